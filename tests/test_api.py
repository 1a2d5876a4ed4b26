"""The Python API's contract: compile_source, Program, execute, the batch API and backends.
Values are checked against CPython running the same source."""
import importlib

import numpy as np
import pytest

from vramgym.compiler import CompileError, compile_batch, compile_source, compile_tokens, tokenize
from vramgym.vm import (BackendUnavailable, BatchResult, Encoded, Program, ProgramBatch, Trap, VMConfig,
                        encode_results, encode_tuples, execute, opcodes as oc, run_batch)

SRC = """\
def scale(xs: list[int], k: int) -> list[int]:
    out: list[int] = []
    for x in xs:
        out.append(x * k)
    return out

def safe_div(a: int, b: int) -> int:
    return a // b

def positive(a: int) -> bool:
    return a > 0

def fact(n: int) -> int:
    if n <= 1:
        return 1
    return n * fact(n - 1)
"""


def cpython(src, entry, args):
    ns = {}
    exec(compile(src, "<test>", "exec"), ns)
    return ns[entry](*args)


@pytest.fixture(scope="module")
def prog():
    return compile_source(SRC)


def test_functions_and_signatures(prog):
    assert [f.name for f in prog.functions] == ["scale", "safe_div", "positive", "fact"]
    f = prog.function("scale")
    assert f.params == ("list", "int") and f.ret == "list" and f.param_names == ("xs", "k")
    assert f.index == 0 and f.pc == 0
    assert prog.code.dtype == np.uint32
    with pytest.raises(KeyError):
        prog.function("nope")


METHOD_NAMED = """\
def append(x: int) -> int:
    return x + 1

def pop(xs: list[int]) -> int:
    xs.append(7)
    return xs.pop() + len(xs)

def main(y: int) -> int:
    xs = [y]
    xs.append(append(y))
    return pop(xs) + xs.pop() + append(append(y))
"""


def test_functions_named_like_list_methods():
    """append and pop are method names, not builtins: Python lets a function take them. The
    compiler interns them as builtin names; the functions keep their names (found by name, in
    the disassembly) and compute what CPython computes (test_fuzz found them reported as '')."""
    p = compile_source(METHOD_NAMED)
    assert [f.name for f in p.functions] == ["append", "pop", "main"]
    assert [f.param_names for f in p.functions] == [("x",), ("xs",), ("y",)]
    assert "def append(x: int) -> int:" in str(p) and "(pop)" in str(p)
    for entry, args in (("append", [(3,), (-1,)]), ("pop", [([1, 2],), ([],)]), ("main", [(3,), (-1,)])):
        assert execute(p, entry, args) == [cpython(METHOD_NAMED, entry, a) for a in args], entry


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_parameter_names_are_read_as_the_compiler_reads_them(newline):
    """They came from a regex over the source: a ')' in a comment inside the parameter list cut
    the list short, and CR-only line endings hid every def after the first. They name task
    signatures (TaskBank.from_source), not only the disassembly."""
    src = newline.join([
        "def f(a: int,  # (the count)",
        "      b: list[int],",
        "      c: bool) -> int:",
        "    return a",
        "def  g ( xs : list[int] ) -> list[int]:",
        "    return xs",
        "def h() -> int:",
        "    return f(1, [2], True)",
        ""])
    p = compile_source(src)
    assert [f.param_names for f in p.functions] == [("a", "b", "c"), ("xs",), ()]
    assert "def f(a: int, b: list[int], c: bool) -> int:" in p.disassemble()
    assert "def g(xs: list[int]) -> list[int]:" in p.disassemble()


def test_disassembly_lists_every_function(prog):
    text = str(prog)
    for f in prog.functions:
        assert f.signature() in text
    assert "CALL" in text and "(fact)" in text


@pytest.mark.parametrize("entry,args", [
    ("scale", [([1, -2, 3], 3), ([], 5), ([2**30], 2)]),
    ("safe_div", [(7, 2), (-7, 2), (7, -2), (1, 0), (-2**31, -1)]),
    ("positive", [(0,), (5,), (-1,)]),
    ("fact", [(0,), (5,), (12,), (13,)]),
])
def test_execute_matches_cpython(prog, entry, args):
    got = execute(prog, entry, args)
    for a, g in zip(args, got):
        try:
            want = cpython(SRC, entry, a)
        except ZeroDivisionError:
            want = Trap("zero_division")
        if isinstance(want, int) and not isinstance(want, bool) and not -2**31 <= want < 2**31:
            want = Trap("overflow")
        if isinstance(want, list) and any(not -2**31 <= v < 2**31 for v in want):
            want = Trap("overflow")
        assert g == want and type(g) is type(want), (entry, a)


def test_execute_many_programs_and_steps():
    progs = [compile_source(f"def f(x: int) -> int:\n    return x + {k}\n") for k in range(5)]
    res = execute(progs, "f", [(1,), (2,)], steps=True)
    assert [[v for v, _ in row] for row in res] == [[1 + k, 2 + k] for k in range(5)]
    assert all(s == 4 for row in res for _, s in row)  # LOAD_VAR, LOAD_CONST, BINARY_ADD, RETURN


def test_long_list_results_are_complete(monkeypatch):
    p = compile_source("def f(n: int) -> list[int]:\n    return [7] * n\n")
    assert execute(p, "f", [(1000,)]) == [[7] * 1000]
    # Found by an audit: the long ones were fetched into a (runs, heap_size) matrix (62.5 GiB for
    # 1,000 runs at heap_size 2**24). Now at their own length, in calls of bounded size.
    q = compile_source("def f(n: int) -> list[int]:\n    return [n] * (n % 300)\n")
    args = [(n,) for n in range(1000)]
    want = [[n] * (n % 300) for n in range(1000)]
    assert execute(q, "f", args, heap_size=1 << 24) == want
    monkeypatch.setattr(importlib.import_module("vramgym.vm.execute"), "_RERUN_CELLS", 1000)
    assert execute(q, "f", args) == want  # many calls, a single run in those of over 1,000 ints


def test_bad_arguments_raise(prog):
    with pytest.raises(TypeError):
        execute(prog, "safe_div", [(1,)])
    with pytest.raises(TypeError):
        execute(prog, "safe_div", [(1, True)])
    with pytest.raises(TypeError):
        execute(prog, "scale", [([1.5], 2)])
    with pytest.raises(ValueError):
        execute(prog, "safe_div", [(2**31, 1)])
    with pytest.raises(KeyError):
        execute(prog, "missing", [()])


@pytest.mark.parametrize("bad", [dict(fuel=0), dict(heap_size=-1), dict(max_depth=True), dict(stack_size=0)])
def test_bad_config_raises(prog, bad):
    with pytest.raises(ValueError):
        execute(prog, "positive", [(1,)], **bad)


def test_resource_traps():
    p = compile_source("def f(n: int) -> int:\n    if n == 0:\n        return 0\n    return 1 + f(n - 1)\n")
    assert execute(p, "f", [(200,), (201,)]) == [200, Trap("recursion")]
    assert execute(p, "f", [(50,)], max_depth=10) == [Trap("recursion")]
    assert execute(p, "f", [(50,)], fuel=20) == [Trap("out_of_fuel")]
    q = compile_source("def g(n: int) -> int:\n    xs = [0] * n\n    return len(xs)\n")
    assert execute(q, "g", [(100,), (5000,)], heap_size=1000) == [100, Trap("out_of_memory")]


def test_unknown_backend_and_unavailable_cuda(prog):
    with pytest.raises(ValueError, match="unknown backend"):
        execute(prog, "positive", [(1,)], backend="tpu")
    try:
        import cupy
        gpu = cupy.cuda.is_available()
    except Exception:
        gpu = False
    if not gpu:
        with pytest.raises(BackendUnavailable):
            execute(prog, "positive", [(1,)], backend="cuda")
    assert execute(prog, "positive", [(1,)], backend="auto") == [True]


def test_compile_error_fields():
    with pytest.raises(CompileError) as e:
        compile_source("def f(x: int) -> int:\n    return x +\n")
    err = e.value
    assert (err.line, err.col) == (2, 15) and err.kind == "expected_expression" and err.message
    assert str(err).startswith("2:15:")


def test_batch_matches_single_compile_and_execute(prog):
    sources = [SRC, "def f(x: int) -> int:\n    return x\n", "def broken(:\n"]
    b = compile_batch(sources)
    assert list(b.ok) == [True, True, False]
    assert np.array_equal(b.code[0, : b.lengths[0]], prog.code)
    assert b.error(2, sources[2]).kind == "expected"
    assert b.error(0) is None


def test_run_batch_cross_product_and_expected():
    srcs = [f"def f(a: int, b: int) -> int:\n    return a * {k} - b\n" for k in range(4)] + ["def f(:\n"]
    programs = compile_batch(srcs).to_programs(entry=0, ret_kind="int")
    args = [(1, 2), (3, 4), (5, 6)]
    inputs = encode_tuples(args, ("int", "int"))
    expected = encode_results([a * 2 - b for a, b in args], "int")
    res = run_batch(programs, inputs, expected=expected)
    assert res.status.shape == (15,)
    want = np.array([a * k - b for k in range(4) for a, b in args])
    assert np.array_equal(res.value[:12], want) and np.all(res.status[:12] == 0)
    assert np.all(res.status[12:] == oc.TRAP_CODES["bad_bytecode"])  # the program that failed to compile
    assert list(np.flatnonzero(res.passed)) == [6, 7, 8]
    assert np.all(res.steps[:12] == 6)


def test_run_batch_list_results_and_explicit_runs():
    p = compile_source("def f(xs: list[int]) -> list[int]:\n    return xs + xs\n")
    programs = ProgramBatch.from_programs([p], "f")
    inputs = encode_tuples([([1, 2],), ([],), ([3] * 10,)], ("list",))
    res = run_batch(programs, inputs, (np.array([0, 0]), np.array([2, 0])), out_cap=4,
                    expected=encode_results([[1, 2, 1, 2], [], [3] * 20], "list"))
    assert list(res.value) == [20, 4]
    assert res.out_list[0].tolist() == [3, 3, 3, 3] and res.out_list[1].tolist() == [1, 2, 1, 2]
    assert list(res.passed) == [True, True]


@pytest.mark.parametrize("lockstep, nthreads", [(True, 1), (False, 1), (True, 2), (False, 2)])
def test_run_batch_list_results(lockstep, nthreads):
    """List results come ragged: run r's first out_cap elements are out_words[out_off[r]:out_off[r + 1]]
    (none for a run that traps or returns an int), in run order even when threads run the tasks
    out of order; out_list holds them as rows, zeros after each list (the core writes no row: the
    array comes from the ragged one)."""
    lp = compile_source("def f(xs: list[int], n: int) -> list[int]:\n    ys = []\n    for i in range(n):\n"
                        "        ys.append(xs[i] * 2 - 1)\n    return ys\n")
    ip = compile_source("def f(xs: list[int], n: int) -> int:\n    return n - 5\n")
    programs = ProgramBatch.from_programs([lp, ip], "f")
    rows = [([-7, 3, 9, 4, 1, 8], n) for n in (0, 2, 6, 7)]
    inputs = encode_tuples(rows, ("list", "int"))
    # tasks of 1 to 3 runs, the two programs in turn: threads take them in chunks
    sizes = np.random.default_rng(1).integers(1, 4, 120)
    runs = (np.repeat(np.arange(120) % 2, sizes), np.arange(int(sizes.sum())) % 4)
    for _ in range(3):  # (memory just freed with junk in it: what np.empty hands out next)
        junk = np.full((len(runs[0]), 5), -99, dtype=np.int32)
        del junk
        res = run_batch(programs, inputs, runs, out_cap=5, lockstep=lockstep, nthreads=nthreads)
        assert res.out_off[0] == 0 and res.out_off[-1] == len(res.out_words) and res.out_off.dtype == np.int64
        for r in range(len(runs[0])):
            p, (xs, n) = runs[0][r], rows[runs[1][r]]
            want = [x * 2 - 1 for x in xs[:n]] if p == 0 and n <= len(xs) else []
            assert res.out_row(r).tolist() == want[:5], (r, p, n)
            assert res.out_list[r].tolist() == (want + [0] * 5)[:5], (r, p, n)
            assert res.value[r] == (len(want) if p == 0 and n <= len(xs) else 0 if p == 0 else n - 5)


@pytest.mark.parametrize("nthreads", [1, 2])
def test_run_batch_long_list_results(nthreads):
    """Lists of up to 700 elements, more than out_cap and more in all than a thread's first buffer
    holds (it grows while it keeps what it has): each run's first out_cap elements, in run order."""
    p = compile_source("def f(n: int) -> list[int]:\n    ys = []\n    for i in range(n):\n"
                       "        ys.append(i * 3 - n)\n    return ys\n")
    ns = np.random.default_rng(2).integers(0, 700, 300)
    inputs = encode_tuples([(int(n),) for n in ns], ("int",))
    res = run_batch(ProgramBatch.from_programs([p], "f"), inputs, out_cap=500, nthreads=nthreads)
    assert res.out_off[-1] == np.minimum(ns, 500).sum() > 4 * 16384
    for r, n in enumerate(ns.tolist()):
        assert res.value[r] == n and res.out_row(r).tolist() == [i * 3 - n for i in range(min(n, 500))], r


def test_batch_result_ragged_helpers():
    """BatchResult.from_rows (the GPU's rows) gives the CPU's ragged lists back from its out_list;
    concat of the results of consecutive parts of the runs is the whole call's; drop_lists takes
    some runs' elements out (the others' stay in order)."""
    rng = np.random.default_rng(5)
    src = ("def f(xs: list[int], n: int) -> list[int]:\n    ys = []\n    for i in range(min(n % 9, len(xs))):\n"
           "        ys.append(xs[i])\n    return ys\n\n"
           "def g(xs: list[int], n: int) -> int:\n    return 7 // n\n")
    p = compile_source(src)
    programs = ProgramBatch(np.concatenate([p.code, p.code]), [0, len(p.code), 2 * len(p.code)],
                            [p.function("f").index, p.function("g").index],
                            [oc.KIND_LIST, oc.KIND_INT])
    rows = [(rng.integers(-9, 9, int(rng.integers(0, 8))).tolist(), int(rng.integers(-3, 20))) for _ in range(30)]
    inputs = encode_tuples(rows, ("list", "int"))
    runs = (rng.integers(0, 2, 200).astype(np.int32), rng.integers(0, 30, 200).astype(np.int32))
    whole = run_batch(programs, inputs, runs, out_cap=4)
    assert whole.out_words.dtype == np.int32 and len(whole.out_words) > 0
    listed = (whole.status == 0) & (runs[0] == 0)
    again = BatchResult.from_rows(whole.status, whole.value, whole.steps, None, whole.out_list, listed)
    assert np.array_equal(again.out_words, whole.out_words) and np.array_equal(again.out_off, whole.out_off)
    cuts = [0, 1, 1, 77, 150, 200]
    parts = [run_batch(programs, inputs, (runs[0][a:b], runs[1][a:b]), out_cap=4) for a, b in zip(cuts, cuts[1:])]
    joined = BatchResult.concat(parts)
    for field in ("status", "value", "steps", "out_words", "out_off", "out_list"):
        assert np.array_equal(getattr(joined, field), getattr(whole, field)), field
    gone = np.flatnonzero(listed)[::3]
    whole.drop_lists(gone)
    for r in range(200):
        want = [] if r in set(gone.tolist()) or not listed[r] else rows[runs[1][r]][0][:rows[runs[1][r]][1] % 9][:4]
        assert whole.out_row(r).tolist() == want, r
        assert whole.out_list[r].tolist() == (want + [0] * 4)[:4], r


def test_run_batch_bad_input_encodings_trap():
    p = compile_source("def f(a: int) -> int:\n    return a\n")
    programs = ProgramBatch.from_programs([p], "f")
    bad = Encoded(np.array([0, 1, 0, 5, 9, 2, 100], dtype=np.int32), np.array([0, 2, 5, 7]))
    res = run_batch(programs, bad)
    assert res.status.tolist() == [0, oc.TRAP_CODES["bad_input"], oc.TRAP_CODES["bad_input"]]
    with pytest.raises(ValueError):
        Encoded(np.zeros(3, np.int32), np.array([0, 5]))


def test_token_path_equals_source_path(prog):
    toks = tokenize(SRC)
    assert toks.shape[1] == 4 and toks[-1, 0] == oc.TOKEN_CODES["EOF"]
    b = compile_tokens(toks, np.array([0, len(toks)]))
    assert np.array_equal(b.code[0, : b.lengths[0]], prog.code)


def test_hand_written_bytecode_runs_and_is_checked():
    e = oc.encode
    words = [e("FUNC", 1 | 1 << 8), e("LOAD_VAR", 0), e("LOAD_CONST", 3), e("BINARY_MUL"), e("RETURN")]
    assert execute(Program.from_code(words), "f0", [(5,)]) == [15]
    assert execute(Program.from_code(words[:4]), "f0", [(5,)]) == [Trap("bad_bytecode")]  # falls off the end
    bad_slot = [e("FUNC", 1 | 1 << 8), e("LOAD_VAR", 7), e("RETURN")]
    assert execute(Program.from_code(bad_slot), "f0", [(5,)]) == [Trap("bad_bytecode")]
    underflow = [e("FUNC", 0), e("BINARY_ADD"), e("RETURN")]
    assert execute(Program.from_code(underflow), "f0", [()]) == [Trap("bad_bytecode")]


def test_vmconfig_defaults():
    c = VMConfig()
    assert (c.fuel, c.max_depth, c.heap_size) == (oc.DEFAULT_FUEL, oc.DEFAULT_MAX_DEPTH, oc.DEFAULT_HEAP)
    assert c.heap_size >= 1024 and c.max_depth >= 200


def test_generator_rejects_an_entry_name_it_uses_itself():
    from vramgym.compiler.random_programs import GeneratorConfig
    for name in ("f", "solve", "len", "acc"):
        with pytest.raises(ValueError, match="entry_name"):
            GeneratorConfig(entry_name=name)
    GeneratorConfig(entry_name="entry")


@pytest.mark.parametrize("bad", [
    dict(op_budget=1), dict(max_call_depth=0), dict(max_functions=0), dict(max_params=-1), dict(max_params=16),
    dict(max_expr_depth=-1), dict(list_cap=-1), dict(max_loop_iters=-1), dict(max_recursion=0),
    dict(max_statements=0), dict(max_statements=50), dict(max_block_depth=-1), dict(max_functions="3"),
    dict(p_recursive=2.0), dict(p_comment=-1), dict(p_blank=float("nan")), dict(p_one_line=True),
    dict(entry_name="class"), dict(entry_name="__debug__"),
    dict(entry_name="__builtins__"), dict(entry_name="x y"), dict(entry_name="d"),
    dict(entry_name="depth"), dict(func_names=("def", "class", "if", "for")), dict(func_names=("a", "b", "c", "i")),
    dict(func_names=("d", "depth", "level", "steps")), dict(func_names=("f", "g", "__builtins__", "h")),
    dict(func_names="fghi"),
    dict(entry_name="e", entry_params="int"), dict(entry_name="e", entry_params=("float",)),
    dict(entry_name="e", entry_params=("int",) * 17), dict(entry_name="e", entry_ret="str"),
    dict(list_cap=600), dict(list_cap=200, entry_name="e", entry_params=("list", "list", "list")),
])
def test_generator_config_refuses_what_it_cannot_generate(bad):
    """Each of these used to be accepted and then hang generate_program (no program ever met
    the limits), fail deep inside it (randrange, KeyError), or return programs that CPython or
    the compiler refuses (keywords and pool names as function names, too many parameters)."""
    from vramgym.compiler.random_programs import GeneratorConfig
    with pytest.raises((TypeError, ValueError)):
        GeneratorConfig(**bad)


@pytest.mark.parametrize("cfg", [
    dict(op_budget=10), dict(max_call_depth=1), dict(max_statements=16), dict(max_block_depth=12),
    dict(max_expr_depth=16), dict(max_params=15, p_recursive=1.0), dict(list_cap=583),
    dict(list_cap=194, entry_name="e", entry_params=("list", "list", "list")), dict(max_functions=64,
    func_names=tuple(f"fn{i}" for i in range(64))), dict(max_loop_iters=0, list_budget=0, mem_budget=0),
])
def test_generator_config_edges_still_generate_compiling_programs(cfg):
    """The extremes the config accepts: programs come out (the rejection loop ends) and compile."""
    from vramgym.compiler.random_programs import GeneratorConfig, generate_program
    rng = np.random.default_rng(7)
    config = GeneratorConfig(**cfg)
    for _ in range(5):
        p = generate_program(rng, config)
        compile_source(p.source)
        compile(p.source, "<generated>", "exec")


def test_disassembly_of_one_function_lists_its_words_at_their_pcs():
    """disassemble(name) (found by session 30's mutation audit: a listing numbered from 0, or the
    last function without its RETURN, passed every test)."""
    prog = compile_source("def g(n: int) -> int:\n    return n\n\n"
                          "def f(n: int) -> int:\n    while n > 0:\n        n -= 1\n    return g(n)\n")
    f = prog.function("f")
    lines = prog.disassemble("f").splitlines()
    assert lines[0] == "def f(n: int) -> int:"
    rows = [ln.split() for ln in lines[1:]]
    assert [int(r[0]) for r in rows] == list(range(f.pc, len(prog.code)))   # its pcs, to the end of the code
    assert rows[0][1:] == ["FUNC", f"params={len(f.params)}", f"locals={f.nlocals}"] and rows[-1][1] == "RETURN"
    assert prog.disassemble("g").splitlines()[-1].split()[1] == "RETURN" and "f(" not in prog.disassemble("g")
    whole = str(prog)
    assert all(ln in whole for ln in lines)   # the same lines as in the whole program's listing
