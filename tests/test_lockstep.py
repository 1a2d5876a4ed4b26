"""The CPU backend runs up to 32 inputs of one program in lockstep (vm/csrc/lanes.h). The
scalar interpreter is its oracle: on fresh random programs, under tight and loose limits, and
on random bytecode, both must give the same status, value, steps and list contents."""
import os

import numpy as np
import pytest

from vramgym.compiler import compile_source
from vramgym.compiler.random_programs import generate_program, random_args
from vramgym.vm import Encoded, Program, ProgramBatch, VMConfig, cpu, encode_tuples, opcodes as oc, run_batch

SEED = int(os.environ.get("VRAMGYM_SEED", np.random.SeedSequence().entropy % 2**32))

CONFIGS = [VMConfig(), VMConfig(fuel=300, max_depth=6, heap_size=40, max_lists=6, stack_size=64)]


@pytest.fixture(autouse=True, params=[0, 1], ids=["lockstep", "jit"])
def jit(request):
    """Each test twice: with the JIT off (lockstep=True runs the lockstep interpreter) and on (it
    runs native code where the JIT compiles the program; nothing changes where it is not built)."""
    import ctypes
    f = cpu.lib().vg_jit
    f.restype, f.argtypes = ctypes.c_int32, [ctypes.c_int32]
    before = f(request.param)
    yield
    f(before)


def assert_same(batch, inputs, config, what):
    a = run_batch(batch, inputs, config=config, out_cap=64, nthreads=1, lockstep=True)
    b = run_batch(batch, inputs, config=config, out_cap=64, nthreads=1, lockstep=False)
    for field in ("status", "value", "steps", "out_list"):
        x, y = getattr(a, field), getattr(b, field)
        if x is None:
            continue
        bad = np.flatnonzero((x != y).reshape(len(x), -1).any(axis=1))
        assert not len(bad), f"{what}: lockstep and scalar differ in {field} at runs {bad[:5].tolist()} (seed {SEED})"


@pytest.mark.parametrize("config", CONFIGS, ids=["default", "tight"])
def test_random_programs(config):
    rng = np.random.default_rng(SEED)
    programs, arg_sets = [], []
    for _ in range(300):
        g = generate_program(rng)
        p = compile_source(g.source)
        programs.append((p, g))
        arg_sets.append(random_args(rng, g.params, 40))
    for (p, g), args in zip(programs, arg_sets):
        f = p.function(g.entry)
        assert_same(ProgramBatch.from_programs([p], g.entry), encode_tuples(args, f.params), config, g.source)


def random_words(rng, ops, n: int, past: int) -> list[int]:
    """f0(a, b) with 6 locals: n random words of ops, arguments mostly 0-2, else up to n + past."""
    words = [oc.encode("FUNC", 2 | 6 << 8)]
    for _ in range(n):
        op = int(rng.choice(ops))
        arg = int(rng.integers(0, 3)) if rng.random() < 0.7 else int(rng.integers(0, n + past))
        words.append(op | arg << 8)
    return words + [oc.encode("RETURN")]


def test_random_bytecode():
    rng = np.random.default_rng(SEED)
    ops = [op.code for op in oc.OPS]
    for i in range(400):
        words = random_words(rng, ops, int(rng.integers(2, 40)), 1)
        p = Program.from_code(words)
        ints = [(int(a), int(b)) for a, b in rng.integers(-5, 5, size=(33, 2))]
        assert_same(ProgramBatch.from_programs([p], "f0"), encode_tuples(ints, ("int", "int")),
                    VMConfig(fuel=200, heap_size=64, max_lists=8), f"bytecode #{i}: {words}")


def test_mixed_inputs_and_bad_encodings():
    p = compile_source("def f(xs: list[int], n: int) -> list[int]:\n    while n > 0:\n        xs.append(n)\n"
                       "        n -= 1\n    return xs\n")
    good = encode_tuples([([1] * k, k) for k in range(20)], ("list", "int"))
    junk = Encoded(np.array([2, 5, 1, 0, 7, 3], dtype=np.int32), np.array([0, 3, 6]))
    inputs = Encoded(np.concatenate([good.words, junk.words]),
                     np.concatenate([good.offsets, junk.offsets[1:] + len(good.words)]))
    assert_same(ProgramBatch.from_programs([p], "f"), inputs, VMConfig(heap_size=100), "mixed")


def test_scratch_kept_between_batches():
    """The backend keeps its scratch memory from one run_batch call to the next (for the same
    limits): runs after a batch that filled the lists, the heap and the stack, under other limits
    in between (smaller ones first, which must not serve the larger), give the same results as on
    fresh memory (the plain scalar interpreter) and as Python."""
    p = compile_source("def f(xs: list[int], n: int) -> list[int]:\n    ys = xs + [n]\n    for i in range(n):\n"
                       "        ys.append(i * n)\n        zs = [i, i + 1]\n    return ys\n")
    batch = ProgramBatch.from_programs([p], "f")
    args = [([k] * (k % 5), k) for k in range(40)]
    inputs = encode_tuples(args, ("list", "int"))
    small = VMConfig(heap_size=30, max_lists=5, stack_size=16)
    for config in (small, VMConfig(), small, VMConfig(heap_size=200), VMConfig()):
        assert_same(batch, inputs, config, f"scratch kept ({config})")
        if config == VMConfig():
            res = run_batch(batch, inputs, config=config, out_cap=64, nthreads=1)
            for j, (xs, n) in enumerate(args):
                want = xs + [n] + [i * n for i in range(n)]
                assert res.status[j] == 0 and res.value[j] == len(want), (j, res.status[j], res.value[j])
                assert res.out_list[j, :min(len(want), 64)].tolist() == want[:64], j


def test_scratch_kept_under_concurrent_calls():
    """Calls from several Python threads at once (ctypes lets go of the GIL), each on 2 core
    threads, under two sets of limits: every call takes its own scratch from the kept ones and
    gives the same results as a call alone."""
    import threading

    p = compile_source("def f(xs: list[int], n: int) -> list[int]:\n    ys = xs + [n]\n    for i in range(n):\n"
                       "        ys.append(i * n)\n    return ys\n")
    batch = ProgramBatch.from_programs([p] * 4, "f")
    inputs = encode_tuples([([k] * (k % 5), k) for k in range(64)], ("list", "int"))
    configs = [VMConfig(), VMConfig(heap_size=80, max_lists=4)]  # the second: some runs out of memory
    runs = (np.repeat(np.arange(4, dtype=np.int32), 64), np.tile(np.arange(64, dtype=np.int32), 4))
    ref = [run_batch(batch, inputs, runs, config=c, out_cap=64, nthreads=1) for c in configs]
    errors = []

    def worker(k):
        for i in range(20):
            c = (k + i) % 2
            r = run_batch(batch, inputs, runs, config=configs[c], out_cap=64, nthreads=2)
            for field in ("status", "value", "steps", "out_list"):
                if not np.array_equal(getattr(r, field), getattr(ref[c], field)):
                    errors.append((k, i, field))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]
