"""The JIT (vm/csrc/jit.h): validated bytecode compiled to x86-64 machine code, run one input at a
time, handing a run to the interpreter where it cannot vouch for the result (a path that would
cross the step budget, a call whose frame might not fit). The plain scalar interpreter is its
oracle: status, value, steps and list contents must be equal on fresh random programs (default
and tight limits), for every trap, on deep recursion, on the shapes it compiles specially (at
every cut of the step budget), and on hand-made bytecode (whose stack depths may differ at a pc:
then it is not compiled at all). test_fused runs it ("jit") beside the other executors at every
cut of the step budget on its programs.
Mode 6 of vg_run_batch forces the JIT for every program it compiles; mode 0 (the default) takes
it too while vg_jit allows."""
from __future__ import annotations

import ctypes
import os
import threading

import numpy as np
import pytest

from test_fused import MODES, _ModeLib, assert_same_runs, run_mode
from test_lockstep import random_words
from vramgym.compiler import compile_source
from vramgym.compiler.random_programs import GeneratorConfig, generate_program, random_args
from vramgym.vm import (Encoded, Function, Program, ProgramBatch, VMConfig, cpu, encode_tuples, opcodes as oc,
                        run_batch)
from vramgym.vm.values import KIND_BY_NAME

SEED = int(os.environ.get("VRAMGYM_SEED", np.random.SeedSequence().entropy % 2**32))
JIT = 6


def _lib():
    so = cpu.lib()
    so.vg_jit.restype = ctypes.c_int32
    so.vg_jit.argtypes = [ctypes.c_int32]
    so.vg_jit_code.restype = ctypes.c_int64
    so.vg_jit_code.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    return so


pytestmark = pytest.mark.skipif(_lib().vg_jit(-1) < 0, reason="the JIT is built for x86-64 Linux and macOS only")


def compiles(program: Program) -> bool:
    """Whether the JIT compiles this program (vg_jit_code: its code's size, 0 when not compiled)."""
    code = np.ascontiguousarray(program.code, dtype=np.uint32)
    out = np.zeros(max(4096, 512 * len(code)), dtype=np.uint8)
    at = np.zeros(len(code), dtype=np.int64)
    return _lib().vg_jit_code(code.ctypes.data, len(code), out.ctypes.data, len(out), at.ctypes.data) > 0


def assert_jit_equals_interpreter(batch, inputs, config, what, monkeypatch):
    ref = run_mode(batch, inputs, config, MODES["plain scalar"], monkeypatch)
    got = run_mode(batch, inputs, config, JIT, monkeypatch)
    assert_same_runs(got, ref, f"{what} ({config}): the JIT and the interpreter", SEED)
    return ref


def jit_batch(src: str) -> ProgramBatch:
    """A batch of src's f alone, which the JIT compiles."""
    program = compile_source(src)
    assert compiles(program)
    return ProgramBatch.from_programs([program], "f")


def hand_batch(words, functions=None) -> ProgramBatch:
    """A batch of hand-made bytecode's first function f0 alone, which the JIT compiles."""
    program = Program.from_code(words, functions)
    assert compiles(program)
    return ProgramBatch.from_programs([program], "f0")


@pytest.mark.parametrize("tight", [False, True], ids=["default", "tight"])
def test_random_programs(tight, monkeypatch):
    rng = np.random.default_rng(SEED)
    done = 0
    for _ in range(200):
        g = generate_program(rng)
        p = compile_source(g.source)
        done += compiles(p)
        args = random_args(rng, g.params, 24)
        cfg = (VMConfig(fuel=int(rng.integers(1, 500)), stack_size=int(rng.integers(4, 80)),
                        max_depth=int(rng.integers(0, 8)), heap_size=int(rng.integers(0, 200)),
                        max_lists=int(rng.integers(0, 12))) if tight else VMConfig())
        assert_jit_equals_interpreter(ProgramBatch.from_programs([p], g.entry),
                                      encode_tuples(args, p.function(g.entry).params), cfg, g.source, monkeypatch)
    assert done == 200, f"the JIT compiled only {done} of 200 compiled programs"


def test_recursive_programs(monkeypatch):
    """Calls and returns through the frame records (no native stack per call): depth limits from
    0 to past the deepest run, stack sizes that cut frames, and a depth of 100,000."""
    rng = np.random.default_rng(SEED)
    cfg_gen = GeneratorConfig(p_recursive=0.8, max_recursion=12)
    for _ in range(60):
        g = generate_program(rng, cfg_gen)
        p = compile_source(g.source)
        args = random_args(rng, g.params, 16)
        cfg = VMConfig(max_depth=int(rng.integers(0, 30)), stack_size=int(rng.integers(8, 300)))
        assert_jit_equals_interpreter(ProgramBatch.from_programs([p], g.entry),
                                      encode_tuples(args, p.function(g.entry).params), cfg, g.source, monkeypatch)
    src = "def f(n: int) -> int:\n    if n <= 0:\n        return 0\n    return 1 + f(n - 1)\n"
    batch = ProgramBatch.from_programs([compile_source(src)], "f")
    inputs = encode_tuples([(n,) for n in (0, 1, 5, 99_999, 100_000, 100_001)], ("int",))
    cfg = VMConfig(max_depth=100_000, stack_size=1 << 20, fuel=2**31 - 1)
    res = assert_jit_equals_interpreter(batch, inputs, cfg, src, monkeypatch)
    assert [oc.TRAP_NAMES[int(s)] for s in res.status] == ["ok"] * 5 + ["recursion"]
    assert res.value[:5].tolist() == [0, 1, 5, 99_999, 100_000]


def test_every_trap(monkeypatch):
    """Each trap from native code: the arithmetic ones at int32's edges (Python's floor division
    and modulo by constants and variables, of both signs), list indexes out of range, memory,
    recursion, range() with step 0, and the cycle check's out_of_fuel."""
    cases = [
        ("def f(a: int, b: int) -> int:\n    return a + b\n", [(2**31 - 1, 1), (-2**31, -1), (5, -7)]),
        ("def f(a: int, b: int) -> int:\n    return a - b * 2\n", [(-2**31, 1), (0, 2**30), (3, -2**30)]),
        ("def f(a: int, b: int) -> int:\n    return -a + abs(b)\n", [(-2**31, 0), (0, -2**31), (5, -7)]),
        ("def f(a: int, b: int) -> list[int]:\n    return [a // b, a % b, a // 7, a % 7, a // -3, a % -3, a // 8, a % 8]\n",
         [(a, b) for a in (-2**31, -2**31 + 1, -9, -1, 0, 1, 9, 2**31 - 1) for b in (-2**31, -3, -1, 0, 1, 2, 5, 2**31 - 1)]),
        ("def f(xs: list[int], i: int) -> int:\n    return xs[i] + xs[-1 - i] + len(xs)\n",
         [([1, 2, 3], i) for i in range(-5, 5)] + [([], 0)]),
        ("def f(xs: list[int], n: int) -> list[int]:\n    ys = xs + [n]\n    while n > 0:\n        ys.append(n)\n"
         "        ys[n % len(ys)] = ys.pop()\n        n -= 1\n    return ys * 2\n", [([1, 2], n) for n in range(0, 80, 7)]),
        ("def f(n: int, s: int) -> int:\n    t = 0\n    for i in range(0, n, s):\n        t += i\n    return t\n",
         [(5, 0), (10, 3), (-10, -3), (2**31 - 1, 2**30)]),
        ("def f(n: int) -> int:\n    while n > 0:\n        pass\n    return n\n", [(0,), (1,), (-5,)]),
        ("def f(n: int) -> int:\n    return f(n + 1)\n", [(0,)]),
    ]
    for src, args in cases:
        p = compile_source(src)
        assert compiles(p), src
        f = p.function("f")
        for cfg in (VMConfig(), VMConfig(heap_size=40, max_lists=6, max_depth=20), VMConfig(fuel=2**31 - 1)):
            assert_jit_equals_interpreter(ProgramBatch.from_programs([p], "f"), encode_tuples(args, f.params), cfg,
                                          src, monkeypatch)


def _balanced_bytecode(rng):
    """A function of random statements, each of which leaves the operand stack as it found it
    (so every pc has one stack depth and the JIT compiles it), with jumps between statements,
    loop heads, stores into range slots, list instructions on integers that are no list
    references, and an underflow now and then (a trap at that instruction)."""
    binops = ["BINARY_ADD", "BINARY_SUB", "BINARY_MUL", "BINARY_DIV", "BINARY_MOD", "MIN", "MAX",
              "COMPARE_LT", "COMPARE_LE", "COMPARE_GT", "COMPARE_GE", "COMPARE_EQ", "COMPARE_NE"]
    stmts = []
    for _ in range(int(rng.integers(2, 14))):
        c = rng.random()
        operand = (lambda: ("LOAD_VAR", int(rng.integers(0, 6))) if rng.random() < 0.6
                   else ("LOAD_CONST", int(rng.choice([-2**23, -3, -1, 0, 1, 2, 3, 7, 2**23 - 1]))))
        if c < 0.35:
            stmts.append([operand(), operand(), (str(rng.choice(binops)), 0), ("STORE_VAR", int(rng.integers(0, 6)))])
        elif c < 0.5:
            stmts.append([operand(), (str(rng.choice(["JUMP_IF_FALSE", "JUMP_IF_TRUE"])), "stmt")])
        elif c < 0.58:
            stmts.append([("JUMP", "stmt")])
        elif c < 0.68:
            stmts.append([("FOR_RANGE", int(rng.integers(0, 4))), ("JUMP", "stmt"), ("STORE_VAR", int(rng.integers(0, 6)))])
        elif c < 0.76:
            stmts.append([operand(), operand(), ("SWAP", 0), ("STORE_VAR", int(rng.integers(0, 6))),
                          ("STORE_VAR", int(rng.integers(0, 6)))])
        elif c < 0.84:
            stmts.append([operand(), ("DUP", 0), (str(rng.choice(["UNARY_NEG", "ABS", "UNARY_NOT"])), 0),
                          (str(rng.choice(binops)), 0), ("STORE_VAR", int(rng.integers(0, 6)))])
        elif c < 0.92:
            stmts.append([operand(), operand(), (str(rng.choice(["INDEX", "APPEND", "LIST_CONCAT"])), 0)]
                         + ([("STORE_VAR", 1)] if rng.random() < 0.5 else [("POP", 0)]))
        else:
            stmts.append([("STORE_VAR", 0)])  # nothing on the stack: traps bad_bytecode
    stmts.append([operand(), ("RETURN", 0)])
    starts = np.cumsum([1] + [len(s) for s in stmts]).tolist()
    words = [oc.encode("FUNC", 2 | 6 << 8)]
    for s in stmts:
        for op, arg in s:
            if arg == "stmt":
                arg = int(rng.choice(starts))  # a statement's start, or the function's end
            words.append(oc.encode(op, arg))
    return words


# `if cond: c += k` (or `+= v`) and `if cond: c = v` compile without a branch (jit.h's ifcv): the
# skipped words' steps are counted only where they run, adding 0 must not trap, c + k may
# overflow, and the cond may come from a compare (its flags), a divisibility test, a local or a
# call.
IF_CONVERTED = [
    ("def f(xs: list[int], t: int) -> int:\n    c = 0\n    for x in xs:\n        if x > t:\n            c += 1\n"
     "    return c\n", ("list", "int"),
     lambda r: (r.integers(-5, 5, r.integers(0, 12)).tolist(), int(r.integers(-5, 5)))),
    ("def f(n: int, k: int) -> int:\n    s = 0\n    for i in range(n):\n        if i % 3 == 0:\n            s += k\n"
     "        if not i % 4 == 1:\n            s += i\n    return s\n", ("int", "int"),
     lambda r: (int(r.integers(0, 40)), int(r.choice([1, -7, 2**31 - 1, -2**31, 100_000_000])))),
    ("def g(x: int) -> bool:\n    return x % 2 == 1\n\ndef f(xs: list[int], b: bool) -> int:\n    c = 5\n"
     "    for x in xs:\n        if g(x):\n            c += -3\n        if b:\n            c += c\n    return c\n",
     ("list", "bool"), lambda r: (r.integers(-9, 9, r.integers(0, 30)).tolist(), bool(r.integers(0, 2)))),
    ("def f(n: int) -> int:\n    c = 0\n    while n != 7:\n        if n == 3:\n            c += 0\n    return c\n",
     ("int",), lambda r: (int(r.integers(6, 8)),)),  # (n 6: loops with c unchanged: the cycle check)
    # the move form (if x > m: m = x), c in a register and in memory (more locals than registers)
    ("def f(xs: list[int], t: int) -> int:\n    m = t\n    a = 0\n    b = 1\n    c = 2\n    d = 3\n"
     "    for x in xs:\n        if x > m:\n            m = x\n        if x < t:\n            a = -7\n"
     "        if not x % 2 == 0:\n            b = x\n        if x == t:\n            c = d\n        d = d + 1\n"
     "    return m + a + b + c + d\n", ("list", "int"),
     lambda r: (r.integers(-50, 50, r.integers(0, 16)).tolist(), int(r.integers(-50, 50)))),
    ("def f(xs: list[int]) -> int:\n    m = 0\n    for x in xs:\n        if x > m:\n            m = x\n    return m\n",
     ("list",), lambda r: (r.integers(-50, 50, r.integers(0, 16)).tolist(),)),
    # x % y == 0 for a local y: a truncated remainder's test (y 0 traps, y -1 divides INT_MIN)
    ("def f(xs: list[int], y: int) -> int:\n    c = 0\n    for x in xs:\n        if x % y == 0:\n            c += 1\n"
     "        if x % y != 0:\n            c += 2\n        b = x % y == 0\n        if b or x % y != 0:\n"
     "            c += 5\n    return c\n", ("list", "int"),
     lambda r: (r.choice([-2**31, -7, -1, 0, 3, 12, 2**31 - 1], r.integers(0, 10)).tolist(),
                int(r.choice([0, -1, 1, -3, 2, 7, -2**31, 2**31 - 1])))),
]


@pytest.mark.parametrize("k", range(len(IF_CONVERTED)))
def test_if_conversion(k, monkeypatch):
    src, params, gen = IF_CONVERTED[k]
    batch = jit_batch(src)
    rng = np.random.default_rng(SEED + 100 + k)
    inputs = encode_tuples([gen(rng) for _ in range(24)], params)
    full = assert_jit_equals_interpreter(batch, inputs, VMConfig(), src, monkeypatch)
    assert (full.status == 0).any() or k == 3
    for fuel in sorted(set(range(1, 120)) | set(rng.integers(120, max(121, int(full.steps.max()) + 2), 40).tolist())):
        assert_jit_equals_interpreter(batch, inputs, VMConfig(fuel=int(fuel)), src, monkeypatch)


def test_constant_steps(monkeypatch):
    """A range whose step slot only a constant is stored into runs with that step built in (the
    slot may still hold 0, before its store: a trap); counters past int32 stop (steps of 1 and -1
    never get there: no test); a variable step takes the general path."""
    # (the compiler reuses a function's range slots loop after loop: one function per step here)
    src = ("def f(n: int, k: int) -> int:\n    t = 0\n    for i in range(n, -3, -2):\n        t += i\n"
           "    for i2 in range(k + 4, 1, -2):\n        t -= i2\n    return t + g(n, k) + h() + u() + w(n, k) + y1() + y2()\n\n"
           "def g(n: int, k: int) -> int:\n    t = 1\n    for j in range(k, n, 3):\n        t = t * 2 + j\n"
           "    for j2 in range(n):\n        t += j2\n    return t\n\n"
           "def h() -> int:\n    t = 0\n    for q in range(2147483640, 2147483647, 5):\n        t += q % 7\n"
           "    return t\n\n"
           "def u() -> int:\n    t = 0\n    for z in range(-2147483646, -2147483647 - 1, -7):\n        t -= 1\n"
           "    return t\n\n"
           "def w(n: int, k: int) -> int:\n    t = 0\n    for v in range(n, k, k - n):\n        t += 1\n"
           "    return t\n\n"
           "def y1() -> int:\n    t = 0\n    for a in range(2147483643, 2147483647):\n        t += a % 5\n"
           "    return t\n\n"
           "def y2() -> int:\n    t = 0\n    for b in range(-2147483645, -2147483647 - 1, -1):\n        t += b % 7\n"
           "    return t\n")
    batch = jit_batch(src)
    rng = np.random.default_rng(SEED + 300)
    inputs = encode_tuples([(int(rng.integers(-20, 20)), int(rng.integers(-20, 20))) for _ in range(30)] + [(3, 3)],
                           ("int", "int"))
    full = assert_jit_equals_interpreter(batch, inputs, VMConfig(), src, monkeypatch)
    assert {0, oc.TRAP_CODES["value_error"]} <= set(full.status.tolist())
    for fuel in range(1, int(full.steps.max()) + 2, 2):
        assert_jit_equals_interpreter(batch, inputs, VMConfig(fuel=fuel), src, monkeypatch)
    # by hand: the loop head reached before the step's store (the slot still 0: value_error) when
    # the first argument is nonzero
    e = oc.encode
    words = [e("FUNC", 2 | 6 << 8), e("LOAD_VAR", 0), e("JUMP_IF_TRUE", 5), e("LOAD_CONST", 1), e("STORE_VAR", 4),
             e("LOAD_VAR", 1), e("STORE_VAR", 3), e("FOR_RANGE", 2), e("JUMP", 11), e("STORE_VAR", 5),
             e("JUMP", 7), e("LOAD_VAR", 2), e("RETURN")]
    hand = hand_batch(words)
    inputs = encode_tuples([(a, b) for a in (0, 1) for b in (-2, 0, 5)], ("int", "int"))
    got = assert_jit_equals_interpreter(hand, inputs, VMConfig(), "step slot 0", monkeypatch)
    assert got.status.tolist() == [0, 0, 0] + [oc.TRAP_CODES["value_error"]] * 3
    # the step's store bypassed where the first argument is nonzero (the head must still find the
    # slot's 0: the check stays): the step stored right before the head, but a jump from outside
    # into the loop's body; range(a, b, c)'s stores of c, b, a in turn, and a jump into them (with
    # the stop on the stack)
    bypasses = {
        "a jump past the step's store": [
            e("FUNC", 2 | 6 << 8), e("LOAD_VAR", 1), e("STORE_VAR", 3), e("LOAD_VAR", 0), e("JUMP_IF_TRUE", 10),
            e("LOAD_CONST", 1), e("STORE_VAR", 4), e("FOR_RANGE", 2), e("JUMP", 11), e("STORE_VAR", 5),
            e("JUMP", 7), e("LOAD_VAR", 5), e("RETURN")],
        "a jump between the range's stores": [
            e("FUNC", 2 | 6 << 8), e("LOAD_VAR", 1), e("LOAD_VAR", 0), e("JUMP_IF_TRUE", 6), e("LOAD_CONST", 1),
            e("STORE_VAR", 4), e("STORE_VAR", 3), e("FOR_RANGE", 2), e("JUMP", 11), e("STORE_VAR", 5),
            e("JUMP", 7), e("LOAD_VAR", 5), e("RETURN")],
    }
    for what, words in bypasses.items():
        got = assert_jit_equals_interpreter(hand_batch(words), inputs, VMConfig(), what, monkeypatch)
        assert got.status.tolist() == [0, 0, 0] + [oc.TRAP_CODES["value_error"]] * 3, what
        assert got.value.tolist()[:3] == [0, 0, 4], what


def test_in_place_updates(monkeypatch):
    """x += c and x -= c (c != 0) on a local in a register run in place: an overflow traps at the
    add (the store not taken), the store always changes x (so the cycle check never fires on it),
    and a value that read x before keeps the old one; so do x = x + y, x = x - y and the
    if-converted c += k, whose store changes x where y (k) is not 0."""
    src = ("def f(x: int, n: int) -> int:\n    c = 0\n    while c < n:\n        x += 700000000\n        c += 1\n"
           "        x -= -1\n    while x > 5:\n        x -= 3\n    return x + c\n")
    batch = jit_batch(src)
    rng = np.random.default_rng(SEED + 500)
    args = [(int(x), int(n)) for x, n in zip(rng.choice([-2**31, -2**31 + 7, -5, 0, 2**31 - 1], 20),
                                               rng.integers(0, 5, 20))]
    inputs = encode_tuples(args + [(0, 2), (2**31 - 700000001, 1)], ("int", "int"))
    full = assert_jit_equals_interpreter(batch, inputs, VMConfig(), src, monkeypatch)
    assert {0, oc.TRAP_CODES["overflow"]} <= set(full.status.tolist())
    for fuel in range(1, min(int(full.steps.max()), 400) + 2):
        assert_jit_equals_interpreter(batch, inputs, VMConfig(fuel=fuel), src, monkeypatch)
    # by hand: a value read before the update keeps the old one (x - (x + 5) is -5)
    e = oc.encode
    words = [e("FUNC", 1 | 1 << 8), e("LOAD_VAR", 0), e("LOAD_VAR", 0), e("LOAD_CONST", 5), e("BINARY_ADD"),
             e("STORE_VAR", 0), e("LOAD_VAR", 0), e("BINARY_SUB"), e("LOAD_VAR", 0), e("LOAD_VAR", 0),
             e("BINARY_ADD"), e("BINARY_ADD"), e("RETURN")]
    hand = hand_batch(words)
    inputs = encode_tuples([(0,), (9,), (2**31 - 5,), (2**31 - 6,)], ("int",))
    got = assert_jit_equals_interpreter(hand, inputs, VMConfig(), "x read before x += 5", monkeypatch)
    assert got.status.tolist()[:2] == [0, 0] and got.value.tolist()[:2] == [5, 23]
    # x = x + y and x = x - y for any value y (in place into the store next), and the if-converted
    # c += k in place: loops whose only write they are (the cycle check must see it change x
    # where y != 0), overflows, and values read before the update
    src = ("def f(x: int, n: int, d: int) -> int:\n    return w(n) + g(x, n, d) + h(n) + u(n, d)\n\n"
           "def w(n: int) -> int:\n    p = 1\n    for i in range(n % 25):\n        p = p * (i % 3 + 1)\n"
           "    return p\n\n"
           "def g(x: int, n: int, d: int) -> int:\n    while x < n:\n        x = x + abs(d)\n    return x\n\n"
           "def h(n: int) -> int:\n    t = 0\n    while t < n:\n        if t >= 0:\n            t += 1\n"
           "    return t\n\n"
           "def u(n: int, d: int) -> int:\n    s = 0\n    for i in range(n):\n        s = s - i * d\n"
           "    return s\n")
    batch = jit_batch(src)
    args = [(0, 5, 1), (0, 5, 0), (3, 2, 0), (0, 40, 7), (-5, 3, 2), (2**31 - 9, 2**31 - 1, 4), (0, 9, -2**31),
            (0, 70000, 40000), (-3, 6, -1)]
    inputs = encode_tuples(args, ("int", "int", "int"))
    got = assert_jit_equals_interpreter(batch, inputs, VMConfig(), src, monkeypatch)
    assert {0, oc.TRAP_CODES["overflow"], oc.TRAP_CODES["out_of_fuel"]} <= set(got.status.tolist())
    for fuel in (1000, 37):
        assert_jit_equals_interpreter(batch, inputs, VMConfig(fuel=fuel), src, monkeypatch)
    words = [e("FUNC", 2 | 2 << 8), e("LOAD_VAR", 1), e("LOAD_VAR", 1), e("LOAD_VAR", 0), e("LOAD_VAR", 0),
             e("BINARY_MUL"), e("BINARY_ADD"), e("STORE_VAR", 1), e("LOAD_VAR", 1), e("BINARY_SUB"), e("RETURN")]
    hand = hand_batch(words)
    inputs = encode_tuples([(3, 4), (-7, 2), (2**15, 2**31 - 2**30)], ("int", "int"))
    got = assert_jit_equals_interpreter(hand, inputs, VMConfig(), "x read before x = x + a * a", monkeypatch)
    assert got.value.tolist()[:2] == [-9, -49] and got.status.tolist()[2] == oc.TRAP_CODES["overflow"]
    words = [e("FUNC", 2 | 3 << 8), e("LOAD_VAR", 0), e("STORE_VAR", 2), e("LOAD_VAR", 2), e("LOAD_VAR", 1),
             e("JUMP_IF_FALSE", 10), e("LOAD_VAR", 2), e("LOAD_CONST", 5), e("BINARY_ADD"), e("STORE_VAR", 2),
             e("LOAD_VAR", 2), e("BINARY_SUB"), e("LOAD_VAR", 2), e("LOAD_VAR", 2), e("BINARY_ADD"),
             e("BINARY_ADD"), e("RETURN")]
    hand = hand_batch(words)
    inputs = encode_tuples([(3, 1), (3, 0), (2**31 - 3, 1)], ("int", "int"))
    got = assert_jit_equals_interpreter(hand, inputs, VMConfig(), "c read before an if-converted c += 5",
                                        monkeypatch)
    assert got.value.tolist()[:2] == [-5 + 16, 6]


def test_nonnegative_loop_variables(monkeypatch):
    """x // c, x % c and x % c == 0 skip the negative case for a local that is never negative (a
    range's variable counting up from constants >= 0); any other write (a negative start, a
    reused counter, a store of a computed value, a jump into the loop head's store) keeps it."""
    # (the compiler reuses a function's range slots loop after loop: h's second loop starts its
    # first's counter at m)
    src = ("def f(n: int, m: int) -> int:\n    return g(n) + h(n, m) + u(n)\n\n"
           "def g(n: int) -> int:\n    t = 0\n    for i in range(n):\n        t += i % 7 + i // 3\n"
           "        if i % 5 == 0:\n            t += 1\n    return t\n\n"
           "def h(n: int, m: int) -> int:\n    t = 0\n    for i in range(n):\n        t += i % 9\n"
           "    for j in range(m, n):\n        t += j % 7 + j // 3\n        if j % 5 == 0:\n            t -= 1\n"
           "    return t\n\n"
           "def u(n: int) -> int:\n    k = 4\n    t = 0\n    for q in range(3, n, 2):\n        k = q - 10\n"
           "        t += k % 6 + k // 6\n        if k % 6 == 0:\n            t += 100\n    return t\n")
    batch = jit_batch(src)
    rng = np.random.default_rng(SEED + 600)
    inputs = encode_tuples([(int(rng.integers(-5, 40)), int(rng.integers(-40, 40))) for _ in range(30)],
                           ("int", "int"))
    got = assert_jit_equals_interpreter(batch, inputs, VMConfig(), src, monkeypatch)
    assert (got.status == 0).all()
    # by hand: a jump into the loop head's store with the argument (negative: -4 % 3 is 2)
    e = oc.encode
    words = [e("FUNC", 1 | 6 << 8), e("LOAD_CONST", 0), e("STORE_VAR", 1), e("LOAD_CONST", 5), e("STORE_VAR", 2),
             e("LOAD_CONST", 1), e("STORE_VAR", 3), e("LOAD_VAR", 0), e("LOAD_VAR", 0), e("JUMP_IF_TRUE", 13),
             e("POP"), e("FOR_RANGE", 1), e("JUMP", 21), e("STORE_VAR", 4), e("LOAD_VAR", 5), e("LOAD_VAR", 4),
             e("LOAD_CONST", 3), e("BINARY_MOD"), e("BINARY_ADD"), e("STORE_VAR", 5), e("JUMP", 11),
             e("LOAD_VAR", 5), e("RETURN")]
    hand = hand_batch(words)
    ns = [0, -4, 7, -2**31, 2**31 - 1]
    inputs = encode_tuples([(n,) for n in ns], ("int",))
    got = assert_jit_equals_interpreter(hand, inputs, VMConfig(), "a jump into the head's store", monkeypatch)
    assert got.value.tolist() == [(n % 3 if n else 0) + sum(x % 3 for x in range(5)) for n in ns]  # (CPython's)


def test_list_loop_index(monkeypatch):
    """A list loop's head tests its index for a negative value (bad bytecode) unless only
    constants >= 0 are stored into it: hand-made loops whose index starts at an argument, at -1
    and at 0."""
    e = oc.encode
    bad = oc.TRAP_CODES["bad_bytecode"]
    xs = [4, 5, 6]
    for start, want in ((e("LOAD_VAR", 1), {-1: bad, 0: 0, 2: 0, 5: 0}), (e("LOAD_CONST", -1), {i: bad for i in range(-1, 6)}),
                        (e("LOAD_CONST", 0), {i: 0 for i in range(-1, 6)})):
        words = [e("FUNC", 2 | 5 << 8), e("LOAD_VAR", 0), e("STORE_VAR", 2), start, e("STORE_VAR", 3), e("FOR_LIST", 2),
                 e("JUMP", 9), e("STORE_VAR", 4), e("JUMP", 5), e("LOAD_VAR", 4), e("RETURN")]
        hand = hand_batch(words)
        inputs = encode_tuples([(xs, i) for i in want], ("list", "int"))
        got = assert_jit_equals_interpreter(hand, inputs, VMConfig(), f"list loop from {oc.decode(start)}", monkeypatch)
        assert got.status.tolist() == list(want.values())


def test_reversals_of_many_values(monkeypatch):
    """REVERSE n at a join (every value in its stack slot), then a helper that writes the stack:
    with more values than the register pool holds, the reversal goes through memory (found by
    the random-program fuzz: a spill while taking registers left one value in its slot, which the
    helper's write-back overwrote before it was read)."""
    e = oc.encode
    for n in range(2, 10):
        words = [e("FUNC", 1 | 1 << 8), e("LOAD_VAR", 0)] + [e("LOAD_CONST", k) for k in range(1, n)]
        words += [e("LOAD_VAR", 0), e("JUMP_IF_FALSE", len(words) + 2), e("REVERSE", n), e("BUILD_LIST", n), e("RETURN")]
        batch = hand_batch(words, [Function("f0", 0, 0, ("int",), "list", 1)])
        inputs = encode_tuples([(7,), (0,), (-3,)], ("int",))
        got = assert_jit_equals_interpreter(batch, inputs, VMConfig(), f"REVERSE {n}", monkeypatch)
        assert got.out_list[:, :n].tolist() == [list(reversed([x] + list(range(1, n)))) for x in (7, 0, -3)]


def test_lazy_step_counts(monkeypatch):
    """Steps are added where control leaves a block for one that others enter too, not at each
    block's entry: a block with one edge in takes its predecessor's pending steps (any sign: a
    threaded `or`/`and` jump counts one more only where taken), and a block that only jumps back
    to a loop's head is jumped past or copied into its predecessors (with its cycle check). The
    counts at every trap, every hand-over and every cut of the budget must stay the interpreter's."""
    src = ("def f(n: int, k: int) -> int:\n    s = 0\n    for i in range(n):\n"
           "        if i % 3 == 0 or i % k == 0:\n            s += i * k\n"
           "        elif i > 5 and s > 100:\n            s -= 1\n        else:\n            s += 2\n"
           "    j = 0\n    while j < n:\n        if j % 2 == 0:\n            s += 1\n        else:\n            s -= 1\n"
           "        j += 1\n"
           "    for a in range(3):\n        for b in range(n):\n            if b == k:\n                break\n"
           "            s += a * b\n"
           "    while k == 7:\n        pass\n"
           "    xs = [1, 2, 3]\n    t = 0\n    while t < n:\n        t += 1\n        if t > k:\n"
           "            s += xs[t]\n"
           "    return s + g(n, k)\n\n"
           "def g(n: int, k: int) -> int:\n    c = 0\n    while n > 0:\n"
           "        if n % 2 == 1 and k > 0 or n < 3:\n            c += k // n\n        n -= 1\n    return c\n")
    batch = jit_batch(src)
    rng = np.random.default_rng(SEED + 700)
    args = [(int(rng.integers(-2, 13)), int(rng.integers(-3, 6))) for _ in range(24)]
    args += [(9, 0), (4, 7), (12, 2**30), (3, 3), (8, 9), (0, 1)]
    inputs = encode_tuples(args, ("int", "int"))
    full = assert_jit_equals_interpreter(batch, inputs, VMConfig(), src, monkeypatch)
    assert {0, oc.TRAP_CODES["zero_division"], oc.TRAP_CODES["overflow"], oc.TRAP_CODES["index_error"],
            oc.TRAP_CODES["out_of_fuel"]} <= set(full.status.tolist())
    for fuel in range(1, min(int(full.steps[full.status == 0].max()), 700) + 2):
        assert_jit_equals_interpreter(batch, inputs, VMConfig(fuel=fuel), src, monkeypatch)
    # by hand: a threaded JUMP_IF_TRUE_OR_POP (one step more, for the jump at 5) into a block that
    # nothing else enters (the compiler's `or` always has two ways in), then a trap or a return
    e = oc.encode
    words = [e("FUNC", 1 | 1 << 8), e("LOAD_VAR", 0), e("JUMP_IF_TRUE_OR_POP", 5), e("LOAD_CONST", 100),
             e("RETURN"), e("JUMP_IF_TRUE", 7), e("RETURN"), e("LOAD_VAR", 0), e("LOAD_CONST", 1_000_000),
             e("BINARY_ADD"), e("RETURN")]
    hand = hand_batch(words)
    inputs = encode_tuples([(0,), (5,), (2**31 - 5,)], ("int",))
    for fuel in (1, 2, 3, 4, 5, 6):
        assert_jit_equals_interpreter(hand, inputs, VMConfig(fuel=fuel), "a threaded jump", monkeypatch)
    got = assert_jit_equals_interpreter(hand, inputs, VMConfig(), "a threaded jump", monkeypatch)
    assert got.status.tolist() == [0, 0, oc.TRAP_CODES["overflow"]] and got.steps.tolist() == [4, 7, 6]
    # by hand: loop heads whose exit jumps back (to an outer loop's head: the cycle check's jump,
    # so leaving takes a path of its own) around an empty body (a jump back, copied into the head)
    outer = [e("FUNC", 1 | 5 << 8), e("LOAD_VAR", 0), e("LOAD_CONST", 0), e("COMPARE_GT"), e("JUMP_IF_FALSE", 19),
             e("LOAD_VAR", 0), e("LOAD_CONST", 1), e("BINARY_SUB"), e("STORE_VAR", 0)]
    heads = {"range": [e("LOAD_CONST", 0), e("STORE_VAR", 1), e("LOAD_VAR", 0), e("STORE_VAR", 2), e("LOAD_CONST", 1),
                       e("STORE_VAR", 3), e("FOR_RANGE", 1)],
             "list": [e("LOAD_VAR", 0), e("LOAD_VAR", 0), e("BUILD_LIST", 2), e("STORE_VAR", 1), e("LOAD_CONST", 0),
                      e("STORE_VAR", 2), e("FOR_LIST", 1)]}
    inputs = encode_tuples([(n,) for n in range(-1, 7)], ("int",))
    for name, head in heads.items():
        words = outer + head + [e("JUMP", 1), e("STORE_VAR", 4), e("JUMP", 15), e("LOAD_VAR", 4), e("RETURN")]
        hand = hand_batch(words)
        full = assert_jit_equals_interpreter(hand, inputs, VMConfig(), f"{name} loop leaving backward", monkeypatch)
        assert (full.status == 0).all()
        for fuel in range(1, int(full.steps.max()) + 2):
            assert_jit_equals_interpreter(hand, inputs, VMConfig(fuel=fuel), f"{name} loop leaving backward",
                                          monkeypatch)


def test_eager_compile_policy(monkeypatch):
    """Mode 0 compiles a small program that may loop at once only while the thread's programs
    have run long for their size; after a stretch of short ones it runs them in the lockstep
    interpreter with a capped budget, and a run that reaches the cap again as native code. The
    results stay the interpreter's through every switch, at every budget."""
    short = [f"def f(n: int) -> int:\n    s = {k}\n    for i in range(n % 2):\n        s += i\n    return s\n"
             for k in range(40)]
    long = [f"def f(n: int) -> int:\n    s = 0\n    for i in range(n * {k}):\n        if i % 3 == 0:\n"
            f"            s += i\n    return s\n" for k in range(1, 6)]
    programs = [compile_source(src) for src in short[:20] + long + short[20:] + long]
    batch = ProgramBatch.from_programs(programs, "f")
    inputs = encode_tuples([(n,) for n in (0, 1, 7, 40, 200, 500, -3, 15)], ("int",))
    for fuel in (oc.DEFAULT_FUEL, 2000, 300, 57, 5):
        ref = run_mode(batch, inputs, VMConfig(fuel=fuel), MODES["plain scalar"], monkeypatch)
        got = run_mode(batch, inputs, VMConfig(fuel=fuel), MODES["lockstep or jit"], monkeypatch)
        assert_same_runs(got, ref, f"mode 0 and the interpreter (fuel {fuel})", SEED)
        if fuel == oc.DEFAULT_FUEL:
            assert (ref.status == 0).all() and ref.steps.max() > 10_000


def test_division_by_constants(monkeypatch):
    """x // c and x % c for constants c > 0: a multiply and a shift for x >= 0, the general
    sequence for x < 0, and a mask or shift for powers of two; Python's floor semantics at the
    int32 edges."""
    cs = [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 25, 60, 100, 641, 1000, 1009, 46340, 65535, 65537, 10**6,
          2**20 + 1, 2**30 - 1, 2**30, 2**30 + 3, 2**31 - 1]
    body = "".join(f"    out.append(x // {c})\n    out.append(x % {c})\n" for c in cs)
    src = f"def f(x: int) -> list[int]:\n    out = []\n{body}    return out\n"
    batch = jit_batch(src)
    rng = np.random.default_rng(SEED + 400)
    xs = [-2**31, -2**31 + 1, -2**30, -1000001, -10, -1, 0, 1, 9, 10, 2**30, 2**31 - 2, 2**31 - 1]
    xs += rng.integers(-2**31, 2**31, 40).tolist() + rng.integers(-3000, 3000, 20).tolist()
    inputs = encode_tuples([(int(x),) for x in xs], ("int",))
    got = assert_jit_equals_interpreter(batch, inputs, VMConfig(), "divisions", monkeypatch)
    ref = [[v for c in cs for v in (x // c, x % c)] for x in xs]  # CPython, as a cross-check
    assert (got.status == 0).all() and got.out_list.shape[1] >= 2 * len(cs)
    assert got.out_list[:, :2 * len(cs)].tolist() == ref


def test_positive_divisors(monkeypatch):
    """x // d, x % d and x % d == 0 skip the tests for d == 0 and d == -1 when d is a local whose
    every write is a constant >= 1 or d += c (c >= 1), one constant stored in the function's first
    block before the division; a decreasing d, a 0 stored, computed values (d = t + 1 too), a store after the
    division or outside the first block, and a jump into a store keep them (hand-made bytecode:
    the division by 0 or INT_MIN % -1 that skipping them would run)."""
    src = ("def f(n: int, m: int) -> int:\n    return w(n) + g(n) + h(n, m) + u(n, m) + v(n)\n\n"
           "def g(n: int) -> int:\n    c = 0\n    d = 1\n    while d * d <= n:\n        if n % d == 0:\n"
           "            c += n // d\n        d += 1\n    return c\n\n"
           "def h(n: int, m: int) -> int:\n    d = 3\n    t = 0\n    while t < m:\n        t += n % d + n // d\n"
           "        d += -1\n    return t\n\n"
           "def u(n: int, m: int) -> int:\n    d = 2\n    t = n % d\n    if m > 5:\n        d = 0\n"
           "    return t + n // d\n\n"
           "def v(n: int) -> int:\n    d = 5\n    d = n - 3\n    return n % d\n\n"
           "def w(n: int) -> int:\n    d = 1\n    t = n - 1\n    d = t + 1\n    return 100 % d\n")
    batch = jit_batch(src)
    rng = np.random.default_rng(SEED + 800)
    args = [(int(rng.integers(-50, 400)), int(rng.integers(-10, 12))) for _ in range(40)]
    args += [(0, 3), (3, 1), (2**31 - 1, 0), (-2**31, 4), (100, 6)]
    inputs = encode_tuples(args, ("int", "int"))
    got = assert_jit_equals_interpreter(batch, inputs, VMConfig(), src, monkeypatch)
    assert {0, oc.TRAP_CODES["zero_division"]} <= set(got.status.tolist())
    e = oc.encode
    cases = {  # (words, arguments, statuses or values)
        "a store after a jump": ([e("FUNC", 2 | 3 << 8), e("LOAD_VAR", 0), e("JUMP_IF_FALSE", 5), e("LOAD_CONST", 3),
                                  e("STORE_VAR", 2), e("LOAD_VAR", 1), e("LOAD_VAR", 2), e("BINARY_MOD"), e("RETURN")],
                                 [(0, 7), (1, -7), (1, -2**31)], [("zero_division",), -7 % 3, -2**31 % 3]),
        "a store after the division": ([e("FUNC", 2 | 3 << 8), e("LOAD_VAR", 1), e("LOAD_VAR", 2), e("BINARY_DIV"),
                                        e("LOAD_CONST", 3), e("STORE_VAR", 2), e("LOAD_VAR", 2), e("BINARY_ADD"),
                                        e("RETURN")], [(0, 7)], [("zero_division",)]),
        "a jump into the store": ([e("FUNC", 2 | 3 << 8), e("LOAD_CONST", 5), e("STORE_VAR", 2), e("LOAD_CONST", 0),
                                   e("LOAD_VAR", 0), e("JUMP_IF_FALSE", 8), e("POP"), e("LOAD_CONST", 7),
                                   e("STORE_VAR", 2), e("LOAD_VAR", 1), e("LOAD_VAR", 2), e("BINARY_MOD"),
                                   e("RETURN")], [(0, 9), (1, 9)], [("zero_division",), 2]),
        "a jump into d += 2": ([e("FUNC", 2 | 3 << 8), e("LOAD_CONST", 1), e("STORE_VAR", 2), e("LOAD_VAR", 0),
                                e("LOAD_CONST", -1), e("LOAD_VAR", 0), e("JUMP_IF_FALSE", 11), e("POP"), e("POP"),
                                e("LOAD_VAR", 2), e("LOAD_CONST", 2), e("BINARY_ADD"), e("STORE_VAR", 2),
                                e("LOAD_VAR", 1), e("LOAD_VAR", 2), e("BINARY_MOD"), e("RETURN")],
                               [(0, -2**31), (0, 7), (3, 10), (3, -2**31)], [0, 0, 1, -2**31 % 3]),
    }
    for what, (words, xs, want) in cases.items():
        hand = hand_batch(words)
        got = assert_jit_equals_interpreter(hand, encode_tuples(xs, ("int", "int")), VMConfig(), what, monkeypatch)
        status, value = got.status.tolist(), got.value.tolist()
        assert [(oc.TRAP_NAMES[s],) if s else v for s, v in zip(status, value)] == want, what


def test_list_writes(monkeypatch):
    """a[i] = v runs in line (vm.h's checks in order: the reference, then the index, negative ones
    from the end) and append in line while the list has room, through the helper when it must grow
    or move (aliases see it), or the memory runs out."""
    src = ("def f(xs: list[int], i: int, v: int) -> list[int]:\n    ys = xs\n    for k in range(6):\n"
           "        ys.append(v + k)\n    xs[i] = v\n    ys[-1 - i] = xs[0]\n    zs = []\n    for x in ys:\n"
           "        zs.append(x)\n        zs.append(-x)\n        xs[i // 2] = len(zs)\n    zs[i % 3] = len(zs)\n"
           "    return zs\n")
    batch = jit_batch(src)
    rng = np.random.default_rng(SEED + 200)
    inputs = encode_tuples([(rng.integers(-9, 9, rng.integers(0, 7)).tolist(), int(rng.integers(-14, 14)),
                             int(rng.integers(-99, 99))) for _ in range(40)], ("list", "int", "int"))
    seen = set()
    for cfg in (VMConfig(), VMConfig(heap_size=24, max_lists=3), VMConfig(heap_size=40), VMConfig(max_lists=2)):
        seen |= set(assert_jit_equals_interpreter(batch, inputs, cfg, src, monkeypatch).status.tolist())
    for fuel in range(1, 160, 3):
        assert_jit_equals_interpreter(batch, inputs, VMConfig(fuel=fuel, heap_size=48), src, monkeypatch)
    assert {oc.TRAP_CODES["index_error"], oc.TRAP_CODES["out_of_memory"], 0} <= seen, seen


def test_hand_made_bytecode(monkeypatch):
    """Bytecode made by hand: balanced random statements (compiled: stack underflow traps, jumps
    to the function's end, stores into a range's slots, list instructions on integers), and
    random words (mostly not compiled: a loop that pushes has two depths at a pc)."""
    rng = np.random.default_rng(SEED)
    done = 0
    for i in range(300):
        words = _balanced_bytecode(rng)
        p = Program.from_code(words)
        done += compiles(p)
        ints = [(int(a), int(b)) for a, b in rng.integers(-4, 5, size=(16, 2))]
        cfg = VMConfig(fuel=int(rng.integers(1, 300)), heap_size=64, max_lists=8, stack_size=int(rng.integers(6, 30)))
        assert_jit_equals_interpreter(ProgramBatch.from_programs([p], "f0"), encode_tuples(ints, ("int", "int")), cfg,
                                      f"bytecode #{i}: {words}", monkeypatch)
    assert done >= 280, f"the JIT compiled only {done} of 300 balanced programs"
    ops = [op.code for op in oc.OPS if op.name not in ("FUNC", "CALL")]
    for i in range(300):
        words = random_words(rng, ops, int(rng.integers(2, 30)), 2)
        try:
            p = Program.from_code(words)
        except ValueError:
            continue  # not valid bytecode: refused before anything runs
        ints = [(int(a), int(b)) for a, b in rng.integers(-4, 5, size=(16, 2))]
        cfg = VMConfig(fuel=int(rng.integers(1, 200)), heap_size=64, max_lists=8, stack_size=int(rng.integers(6, 30)))
        assert_jit_equals_interpreter(ProgramBatch.from_programs([p], "f0"), encode_tuples(ints, ("int", "int")), cfg,
                                      f"random bytecode #{i}: {words}", monkeypatch)
    growing = Program.from_code([oc.encode("FUNC", 0 | 1 << 8), oc.encode("LOAD_CONST", 1), oc.encode("JUMP", 1)])
    assert not compiles(growing)  # the depth at pc 1 is 0, then 1


def test_random_functions(monkeypatch):
    """Random words in several functions (as test_fuzz's): calls between them, a call as a
    function's last word (it returns to the next FUNC word: bad_bytecode there), jumps to a
    function's end, entries other than the first function, garbage in the inputs' kinds."""
    rng = np.random.default_rng(SEED)
    codes = [op.code for op in oc.OPS if op.name != "FUNC"]
    call, func = oc.OP_BY_NAME["CALL"].code, oc.OP_BY_NAME["FUNC"].code
    for i in range(600):
        n = int(rng.integers(3, 24))
        heads = [0] + sorted(set(rng.integers(2, n, int(rng.integers(0, 4))).tolist()))
        words = []
        for pc in range(n):
            if pc in heads:
                words.append(oc.encode("FUNC", int(pc == 0 or rng.integers(0, 2)) | int(rng.integers(1, 4)) << 8))
                continue
            nxt = pc + 1 in heads or pc + 1 == n
            if nxt and rng.random() < 0.4:  # a function's last word: a call (it returns to the next FUNC word)
                words.append(call | int(rng.choice(heads)) << 8)
            elif rng.random() < 0.15:  # a short function body that returns: LOAD_VAR 0; RETURN
                words.append(oc.encode("LOAD_VAR", 0) if not nxt else oc.encode("RETURN"))
            else:
                op = int(rng.choice(codes))
                words.append(op | (int(rng.choice(heads)) if op == call else int(rng.integers(0, n + 1))) << 8)
        try:
            p = Program.from_code(words)
        except ValueError:
            continue
        f0 = p.functions[0]
        ints = [tuple(int(v) for v in rng.integers(-3, 4, len(f0.params))) for _ in range(8)]
        cfg = VMConfig(fuel=int(rng.integers(1, 300)), max_depth=int(rng.integers(0, 6)), heap_size=32, max_lists=6,
                       stack_size=int(rng.integers(4, 40)))
        assert_jit_equals_interpreter(ProgramBatch.from_programs([p], f0.name), encode_tuples(ints, f0.params), cfg,
                                      f"functions #{i}: {words}", monkeypatch)


def test_call_as_a_functions_last_word(monkeypatch):
    """A call that ends its function returns to the next FUNC word (or past the last word), where
    the interpreter traps bad_bytecode: the native RETURN must hand the run over there (a jump
    through an empty return-point entry crashed here once)."""
    w = oc.encode
    for tail in ([w("FUNC", 1 | 1 << 8), w("LOAD_VAR", 0), w("RETURN")], []):
        words = [w("FUNC", 1 | 1 << 8), w("LOAD_VAR", 0), w("CALL", 3 if tail else 0)] + tail
        if not tail:  # the only function calls itself (on 0 it returns), then returns past the last word
            words = [w("FUNC", 1 | 1 << 8), w("LOAD_VAR", 0), w("JUMP_IF_TRUE", 5), w("LOAD_VAR", 0), w("RETURN"),
                     w("LOAD_CONST", 0), w("CALL", 0)]
        p = Program.from_code(words)
        assert compiles(p)
        res = assert_jit_equals_interpreter(ProgramBatch.from_programs([p], "f0"), encode_tuples([(0,), (1,)], ("int",)),
                                            VMConfig(), str(words), monkeypatch)
        assert oc.TRAP_NAMES[int(res.status[1])] == "bad_bytecode", res.status


def test_long_programs(monkeypatch):
    """Mode 0 compiles programs over 96 words only for the runs that prove long: they run first
    with the step budget capped at 4 words a step, and each run that reaches the cap runs again
    as native code with the whole budget (where the program does not compile: in the plain
    interpreter). Runs on both sides of the cap, budgets around it, and a long program the JIT
    does not compile, against the plain interpreter."""
    pad = "".join(f"    t{i} = n + {i}\n" for i in range(40))
    src = ("def f(n: int, xs: list[int]) -> int:\n" + pad +
           "    s = 0\n    for i in range(n):\n        if i % 3 == 0 or i % 5 == 0:\n            s += i\n"
           "    for x in xs:\n        s = s * 3 + x\n    return s + t7\n")
    p = compile_source(src)
    n_words = len(p.code)
    assert n_words > 96 and compiles(p)
    batch = ProgramBatch.from_programs([p], "f")
    args = [(n, list(range(k))) for n, k in [(0, 0), (1, 3), (5, 0), (30, 2), (200, 5), (2000, 1), (7, 40), (90, 0)]]
    inputs = encode_tuples(args, ("int", "list"))
    cap = 4 * n_words
    for fuel in sorted({cap - 1, cap, cap + 1, 2 * cap, 10 * cap, oc.DEFAULT_FUEL, 50, 1}):
        for mode in (MODES["lockstep or jit"], MODES["scalar"]):
            ref = run_mode(batch, inputs, VMConfig(fuel=fuel), MODES["plain scalar"], monkeypatch)
            got = run_mode(batch, inputs, VMConfig(fuel=fuel), mode, monkeypatch)
            for field in ("status", "value", "steps"):
                assert np.array_equal(getattr(got, field), getattr(ref, field)), (mode, fuel, field)
    # a long loop the JIT does not compile (its depth grows): the capped runs go on interpreted
    w = oc.encode
    words = [w("FUNC", 1 | 2 << 8)] + [w("LOAD_CONST", 1), w("POP")] * 60 + [w("LOAD_VAR", 0), w("JUMP", 121)]
    grow = Program.from_code(words)
    assert len(grow.code) > 96 and not compiles(grow)
    for fuel in (400, 485, 486, 487, 600, 5000):
        for mode in (MODES["lockstep or jit"], MODES["scalar"]):
            b, i = ProgramBatch.from_programs([grow], "f0"), encode_tuples([(k,) for k in range(3)], ("int",))
            ref = run_mode(b, i, VMConfig(fuel=fuel, stack_size=200), MODES["plain scalar"], monkeypatch)
            got = run_mode(b, i, VMConfig(fuel=fuel, stack_size=200), mode, monkeypatch)
            for field in ("status", "value", "steps"):
                assert np.array_equal(getattr(got, field), getattr(ref, field)), (mode, fuel, field)


def test_toggle_and_threads():
    """vg_jit(0) and vg_jit(1) give the same results (the lockstep interpreter against the JIT),
    also with several Python threads calling at once on two core threads each (every thread its
    own code buffer)."""
    lib = _lib()
    rng = np.random.default_rng(SEED)
    progs, argss = [], []
    for _ in range(40):
        g = generate_program(rng)
        progs.append((compile_source(g.source), g))
    batches = [(ProgramBatch.from_programs([p], g.entry), encode_tuples(random_args(rng, g.params, 32),
                                                                        p.function(g.entry).params)) for p, g in progs]
    before = lib.vg_jit(-1)
    try:
        lib.vg_jit(0)
        ref = [run_batch(b, i, out_cap=16, nthreads=1) for b, i in batches]
        lib.vg_jit(1)
        errors = []

        def worker(k):
            for j in range(k, len(batches), 2):
                got = run_batch(*batches[j], out_cap=16, nthreads=2)
                for field in ("status", "value", "steps", "out_list"):
                    if not np.array_equal(getattr(got, field), getattr(ref[j], field)):
                        errors.append((j, field))

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[:5]
    finally:
        lib.vg_jit(before)


# Three functions of one signature (two loops, one recursive): one code, three entries (the JIT's
# cache must not take one for another).
THREE_ENTRIES = """
def a(n: int, xs: list[int]) -> int:
    s = 0
    for i in range(n % 50):
        s = s + i * 3
    return s + len(xs)

def b(n: int, xs: list[int]) -> int:
    t = 1
    for x in xs:
        t = (t * 7 + x) % 1000
    return t - n

def c(n: int, xs: list[int]) -> int:
    if n <= 0:
        return len(xs)
    return (c(n - 1, xs) * 3 + n) % 10007
"""


@pytest.mark.parametrize("share, arena, hash_bits", [(-1, -1, -1), (-1, 1, -1), (-1, -1, 0), (-1, 1, 0), (0, -1, -1)],
                         ids=["default", "emptied by every new program", "one hash", "both", "copies not shared"])
def test_duplicate_programs(share, arena, hash_bits, monkeypatch):
    """A run_batch compiles each distinct program (code and entry) once per thread and runs its
    copies on that code: random programs repeated in random order (runs of one copy split across
    tasks too), one code with three entries, under the cache's test settings (a buffer that each
    program not met before empties; every hash equal, so that only the words tell programs apart;
    no sharing), then one program per call (nothing may carry over from a call to the next)."""
    lib = _lib()
    lib.vg_jit_cache.restype = ctypes.c_int64
    lib.vg_jit_cache.argtypes = [ctypes.c_int32, ctypes.c_int64, ctypes.c_int32]
    rng = np.random.default_rng(SEED + 900)
    kinds = []   # (code words, entry index, result kind, parameter kinds, inputs)
    for _ in range(8):
        g = generate_program(rng)
        p = compile_source(g.source)
        f = p.function(g.entry)
        kinds.append((np.asarray(p.code, np.uint32), f.index, f.ret, f.params, random_args(rng, g.params, 40)))
    # (and a copy with other constants: the same length and entries, other words)
    other = THREE_ENTRIES.replace("t * 7", "t * 5").replace("% 10007", "% 10009")
    for src, names in ((THREE_ENTRIES, "abc"), (other, "bc")):
        three = compile_source(src)
        for name in names:
            f = three.function(name)
            args = [(int(rng.integers(-100, 100)), rng.integers(-50, 50, int(rng.integers(0, 9))).tolist())
                    for _ in range(40)]
            kinds.append((np.asarray(three.code, np.uint32), f.index, f.ret, f.params, args))
    picks = rng.integers(0, len(kinds), 80)
    code, offsets, entry, ret, parts, run_prog, run_in = [], [0], [], [], [], [], []
    n_in = 0
    for k, c in enumerate(picks):
        words, index, r, params, args = kinds[c]
        m = int(rng.integers(1, 41))   # (over 32: the copy's runs are two tasks)
        code.append(words), offsets.append(offsets[-1] + len(words)), entry.append(index)
        ret.append(KIND_BY_NAME[r])
        parts.append(encode_tuples(args[:m], params))
        run_prog += [k] * m
        run_in += range(n_in, n_in + m)
        n_in += m
    batch = ProgramBatch(np.concatenate(code), offsets, entry, ret)
    inputs = Encoded.concat(parts)
    runs = (np.array(run_prog, np.int32), np.array(run_in, np.int32))

    so = cpu.lib()

    def run_as(mode, b=batch, i=inputs, r=runs):
        with monkeypatch.context() as m:
            m.setattr(cpu, "lib", lambda: _ModeLib(so, mode))
            return run_batch(b, i, r, out_cap=16, nthreads=1)

    ref = run_as(MODES["plain scalar"])
    alone = []
    for words, index, r, params, args in kinds:
        b = ProgramBatch(words, [0, len(words)], [index], [KIND_BY_NAME[r]])
        alone.append((b, encode_tuples(args, params)))
    refs_alone = [run_as(MODES["plain scalar"], b, i, None) for b, i in alone]
    before = lib.vg_jit_cache(-1, -1, -1)
    try:
        lib.vg_jit_cache(share, arena, hash_bits)
        for mode in (JIT, MODES["lockstep or jit"]):
            assert_same_runs(run_as(mode), ref, f"mode {mode} and the interpreter", SEED)
        for k in rng.permutation(len(alone)).tolist() * 2:
            assert_same_runs(run_as(JIT, *alone[k], None), refs_alone[k], f"program {k} alone", SEED)
    finally:
        lib.vg_jit_cache(1, before, 64)
