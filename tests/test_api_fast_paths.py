"""The one-program API's shortcuts give what the general code they skip gives: compile_source's
parameter names read from the source text (CPython's ast is the oracle), and execute's results
decoded in C (vm/csrc/decode_py.cpp; its Python twin _decode_python is the oracle)."""
import ast
import importlib
import os
from pathlib import Path

import numpy as np
import pytest

from vramgym.compiler import compile_source, frontend
from vramgym.compiler.random_programs import generate_program
from vramgym.vm import Trap, execute, opcodes as oc

SEED = int(os.environ.get("VRAMGYM_SEED", np.random.SeedSequence().entropy % 2**32))
EXECUTE = importlib.import_module("vramgym.vm.execute")
CORPUS = Path(__file__).parent / "corpus"


def ast_param_names(src: str) -> dict:
    return {f.name: tuple(a.arg for a in f.args.args) for f in ast.parse(src).body if isinstance(f, ast.FunctionDef)}


def check_names(src: str) -> None:
    p = compile_source(src)
    want = ast_param_names(src)
    assert {f.name: f.param_names for f in p.functions} == want
    # and the token-based reader, which signatures with comments or line joins still take
    raw = src.encode()
    assert {k: v for k, v in frontend._param_names(raw, src).items() if k in want} == want


@pytest.mark.parametrize("sig", [
    "def f(a: int, b: list[int], c: bool) -> int:",
    "def f( a :int ,b:list[int] , c : bool , ) -> int:",
    "def f\t(a: int,\n      b: list[int],\n\n      c: bool) -> int:",
    "def f(a: int,  # the count\n      b: list[int], c: bool) -> int:",
    "def f(a: int, b: list[int], c: bool) -> int:  # (x, y)",
    "# def f(x: int) -> int:\ndef f(a: int, b: list[int], c: bool) -> int:",
    "def f(a: int, b: list[int],\n      c: bool) -> int: # def f(z: int)",
])
@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_param_names_of_every_signature_layout(sig, newline):
    check_names((sig + "\n    return a\n\ndef g() -> int:\n    return f(1, [2], True)\n").replace("\n", newline))


DOCSTRINGS = [   # (found by a review: a string's def line was taken for the function's own)
    'def f(a: int  # the count\n      ) -> int:\n    """\ndef f(y: int)\n"""\n    return a\n',
    'def g() -> int:\n    """\ndef f(p, q)\n"""\n    return 1\r\rdef f(a: int, b: int) -> int:\r    return a\r',
    '"""\ndef f(p: int, q: int, r: int)\n"""\ndef f(a: int) -> int:\n    return a\n',
    "def f(a: int) -> int:\n    '''\ndef f(zz: int)'''\n    return a\n",
]


@pytest.mark.parametrize("src", DOCSTRINGS)
def test_param_names_with_def_lines_in_strings(src):
    check_names(src)


def test_param_names_on_random_programs_and_the_corpus():
    rng = np.random.default_rng(SEED)
    for _ in range(300):
        check_names(generate_program(rng).source)
    n = 0
    for path in sorted(CORPUS.rglob("*.py")):
        src = path.read_text()
        try:
            compile_source(src)
        except Exception:
            continue
        check_names(src)
        n += 1
    assert n > 50, f"seed {SEED}: only {n} corpus programs compiled"


def random_results(rng):
    """run_batch-like arrays for a random call: (args of decode except traps and fallback)."""
    n_prog, m = int(rng.integers(0, 6)), int(rng.integers(0, 40))
    runs = n_prog * m
    kinds = bytes(rng.integers(0, 3, n_prog).tolist())
    cap = int(rng.choice([0, 1, 4, 9]))
    status = np.where(rng.random(runs) < 0.7, 0, rng.choice([1, 2, 5, 9, 12, 200, -3], runs)).astype(np.int32)
    value = rng.integers(-2**31, 2**31, runs, dtype=np.int64).astype(np.int32)
    steps = rng.integers(0, 10**6, runs).astype(np.int32)
    long_lists = {}
    for r in range(runs):
        if kinds[r // m] == oc.KIND_LIST and status[r] == 0:
            value[r] = rng.integers(0, 2 * cap + 2)
            if value[r] > cap:
                long_lists[r] = rng.integers(-9, 9, value[r]).tolist()
    # run_batch's ragged lists: each list result's first cap elements, one list after another
    lens = np.array([min(int(value[r]), cap) if kinds[r // m] == oc.KIND_LIST and status[r] == 0 else 0
                     for r in range(runs)], dtype=np.int64)
    out_off = np.zeros(runs + 1, dtype=np.int64)
    np.cumsum(lens, out=out_off[1:])
    out_words = rng.integers(-2**31, 2**31, int(out_off[-1]), dtype=np.int64).astype(np.int32)
    if cap == 0 and rng.random() < 0.5:
        out_words = out_off = None
    return status, value, steps, out_words, out_off, kinds, m, long_lists


@pytest.mark.skipif(EXECUTE._native is None, reason="the _decode extension is not built")
def test_native_decode_equals_the_python_decode():
    rng = np.random.default_rng(SEED)
    for i in range(400):
        status, value, steps, out_words, out_off, kinds, m, long_lists = random_results(rng)
        for with_steps in (False, True):
            args = (status, value, steps, out_words, out_off, kinds, m, EXECUTE._TRAP_TABLE, EXECUTE._BAD_BYTECODE,
                    long_lists, with_steps)
            got, want = EXECUTE._native.decode(*args), EXECUTE._decode_python(*args)
            assert got == want, f"seed {SEED}, call {i}"
            flat = [x for row in got for x in row]
            if with_steps:
                assert all(type(x) is tuple and type(x[1]) is int for x in flat)
                flat = [x[0] for x in flat]
            for k, x in enumerate(flat):   # types too: bool is not int, a trap is the shared Trap
                kind, s = kinds[k // m], int(status[k])
                want_type = Trap if s else {oc.KIND_INT: int, oc.KIND_BOOL: bool, oc.KIND_LIST: list}[kind]
                assert type(x) is want_type, f"seed {SEED}, call {i}, run {k}"
                if s:
                    assert x.kind == (oc.TRAP_NAMES[s] if s > 0 and s in oc.TRAP_NAMES else "bad_bytecode")


@pytest.mark.skipif(EXECUTE._native is None, reason="the _decode extension is not built")
def test_native_decode_refuses_malformed_calls():
    decode = EXECUTE._native.decode
    z = np.zeros(6, dtype=np.int32)
    off = np.zeros(7, np.int64)
    good = (z, z, z, np.zeros(0, np.int32), off, bytes([2, 0]), 3, EXECUTE._TRAP_TABLE, EXECUTE._BAD_BYTECODE,
            {}, False)
    assert decode(*good) == [[[], [], []], [0, 0, 0]]
    words = np.array([5, 6, 7], np.int32)
    assert decode(z, np.array([0, 2, 1, 0, 0, 0], np.int32), z, words, np.array([0, 0, 2, 3, 3, 3, 3], np.int64),
                  *good[5:]) == [[[], [5, 6], [7]], [0, 0, 0]]

    def call(**kw):
        names = ("status", "value", "steps", "out_words", "out_off", "kinds", "m", "traps", "fallback", "long_lists",
                 "with_steps")
        return decode(*(kw.get(n, g) for n, g in zip(names, good)))
    for bad in (dict(status=z[:5]), dict(value=z.astype(np.int64)), dict(steps=z.astype(np.float32)),
                dict(out_off=off[:6]), dict(out_off=off.astype(np.int32)), dict(out_off=None), dict(out_words=None),
                dict(out_words=words, out_off=np.arange(7)),             # offsets past the words' end
                dict(out_words=words, out_off=np.array([1, 1, 1, 1, 1, 1, 1])),  # not from 0
                dict(out_words=words, out_off=np.array([0, 2, 1, 3, 3, 3, 3])),  # going back
                dict(m=4), dict(kinds=bytes([2])),
                dict(value=np.full(6, 3, np.int32)),   # lists longer than out_words holds, that long_lists lacks
                dict(value=np.full(6, -1, np.int32))):   # a negative list length
        with pytest.raises(ValueError):
            call(**bad)
    for bad in (dict(kinds="ab"), dict(traps=[]), dict(long_lists=[]), dict(m=-1),
                dict(status=[0] * 6)):
        with pytest.raises((TypeError, ValueError)):
            call(**bad)
    with pytest.raises(TypeError):
        decode(z, z)


def test_execute_decodes_in_c_and_agrees_with_the_python_decode(monkeypatch):
    """execute on every result kind, traps and lists longer than its first out_cap: the same with
    the C decoder and with the Python one."""
    src = ("def f(n: int) -> list[int]:\n    return [n % 7] * n\n\n"
           "def f2(n: int) -> bool:\n    return 10 // n > 1\n\n"
           "def f3(n: int) -> int:\n    return 100 // n\n")
    p = compile_source(src)
    args = [(0,), (3,), (EXECUTE._OUT_CAP,), (EXECUTE._OUT_CAP + 1,), (500,), (-2,)]
    programs = [p, p]
    for entry in ("f", "f2", "f3"):
        for steps in (False, True):
            with_c = execute(programs, entry, args, steps=steps)
            monkeypatch.setattr(EXECUTE, "_native", None)
            with_py = execute(programs, entry, args, steps=steps)
            monkeypatch.undo()
            assert with_c == with_py
    assert execute(p, "f", args)[2:5] == [[1] * 64, [2] * 65, [3] * 500]
    assert execute(p, "f2", [(0,), (2,), (20,)]) == [Trap("zero_division"), True, False]
    if EXECUTE._native is not None:
        assert EXECUTE._native.__name__ == "vramgym.vm._decode"
