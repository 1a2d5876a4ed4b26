"""The cycle check (vm/csrc/vm.h): a run that takes the same backward JUMP twice with an empty
operand stack, and wrote nothing in between, stops at once with what running on would give:
out_of_fuel with steps = fuel. It must be invisible except in time:
- every interpreter (lockstep and scalar, plain and fused, the switch interpreter that CUDA
  compiles, plain and with its peephole superinstructions) equals a build of the core without the
  check (-DVG_NO_CYCLE_CHECK) on random programs, fuzzed bytecode and the env's masked random
  bodies (the policy whose loops the check is for), every fuel cut of the loops below included;
- a loop whose only write is one instruction of OPS_WRITES is not cut (its run ends as CPython's);
- pure infinite loops end at the largest fuel (2^31 - 1) at once, everywhere, the emulated CUDA
  kernels included (without the check these runs would take minutes each)."""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import native_build
from test_cuda_emulated import emu  # noqa: F401 - the emulated-GPU fixture
from test_evaluate_tasks import TASKS, make_bank
from test_fused import MODES, SWITCH_BUILDS, assert_same_runs, run_mode, switch_library
from test_fuzz import random_program
from vramgym.compiler import compile_source, compile_tokens, tokenize
from vramgym.compiler.random_programs import GeneratorConfig, generate_program, random_args
from vramgym.vm import ProgramBatch, VMConfig, cpu, cuda, encode_tuples, execute, opcodes as oc
from vramgym.vm.evaluate import execute_tasks_cpu

SEED = int(os.environ.get("VRAMGYM_SEED", np.random.SeedSequence().entropy % 2**32))
ROOT = Path(__file__).resolve().parent.parent
MAX_FUEL = 2**31 - 1
OUT_OF_FUEL = oc.TRAP_CODES["out_of_fuel"]


@lru_cache(maxsize=None)
def unchecked_library(opt: str = "-O1"):
    """The core without the cycle check (the host's threaded build otherwise). Hidden symbols, as
    setup.py builds the core: the threaded interpreter's dispatch table is a static in an inline
    function, which g++ binds process-wide (STB_GNU_UNIQUE) when visible, so this library would
    jump into the code of another build loaded before it (the tests' drivers). opt: -O1 builds
    fast for the tests; experiments/bench_cycle_check.py asks for setup.py's -O3, so that it
    compares the check and nothing else."""
    inc = [ROOT / "vm" / "csrc", ROOT / "compiler" / "csrc"]
    return cpu.load_library(native_build.build(
        f"vramgym-nocycle-core{opt}", "core.so", ROOT / "vm" / "csrc" / "cpu_backend.cpp",
        ["-std=c++17", opt, "-pthread", "-shared", "-fPIC", "-fvisibility=hidden", "-fvisibility-inlines-hidden",
         "-DVG_NO_CYCLE_CHECK"], inc,
        sorted(f for d in inc for f in d.glob("*.h"))))


def assert_same_as_unchecked(batch, inputs, config, what, monkeypatch):
    """Every mode and switch build (with the check) == the plain scalar run without it."""
    ref = run_mode(batch, inputs, config, MODES["plain scalar"], monkeypatch, unchecked_library())
    runs = {name: run_mode(batch, inputs, config, mode, monkeypatch) for name, mode in MODES.items()}
    runs.update({name: run_mode(batch, inputs, config, MODES["plain scalar"], monkeypatch, switch_library(name))
                 for name in SWITCH_BUILDS})
    for name, got in runs.items():
        assert_same_runs(got, ref, f"{what} ({config}): {name} and the unchecked build", SEED)
    return ref


def _batch(sources):
    return ProgramBatch.from_programs([compile_source(s) for s in sources], "f")


# Pure loops: no write inside, so a looping run is a cycle. Inputs where they end are mixed in.
PURE = [
    "def f(n: int) -> int:\n    while True:\n        pass\n    return 1\n",
    "def f(n: int) -> int:\n    while n > 0:\n        pass\n    return n\n",
    "def f(n: int) -> int:\n    while n % 3 != 0 or n > 7 and abs(n) != 9:\n        continue\n    return 2\n",
    "def f(n: int) -> int:\n    k = 0\n    while k < 3:\n        if n > 5:\n            while n:\n                pass\n"
    "        k += 1\n    return k\n",
    "def g(m: int) -> bool:\n    while m < 0:\n        pass\n    return m > 4\n\n"
    "def f(n: int) -> int:\n    while g(n - 10):\n        n -= 1\n    return n\n",
    "def f(n: int) -> int:\n    xs = [n, 2]\n    while xs[0] > 3 and len(xs) == 2:\n        pass\n    return xs[1]\n",
    # stores of the value a local holds write nothing: from the second round on, these are cycles
    "def f(n: int) -> int:\n    v = 0\n    w = 1\n    while n > 2:\n        v = 9\n        w = n\n    return v + w\n",
    "def f(n: int) -> int:\n    a = 0\n    b = 0\n    while n < 0:\n        a, b = n, 4\n    return a + b\n",
    "def f(n: int) -> int:\n    s = n\n    while s != 1 and s < 30:\n        s = s * 1\n        s += 0\n    return s\n",
]


def test_pure_loops_end_at_once_at_the_largest_fuel(monkeypatch):
    """Without the check each looping run here would take 2^31 steps."""
    inputs = encode_tuples([(n,) for n in (-20, -1, 0, 3, 6, 9, 12, 40)], ("int",))
    for src in PURE:
        batch = _batch([src])
        want = execute(compile_source(src), "f", [(n,) for n in (-20, -1, 0, 3, 6, 9, 12, 40)], fuel=200_000)
        for name, mode in MODES.items():
            got = run_mode(batch, inputs, VMConfig(fuel=MAX_FUEL), mode, monkeypatch)
            for k, w in enumerate(want):  # fuel 200,000 outside a cycle would not run out
                if getattr(w, "kind", None) == "out_of_fuel":
                    assert got.status[k] == OUT_OF_FUEL and got.steps[k] == MAX_FUEL, (src, name, k)
                else:
                    assert got.status[k] == 0 and got.value[k] == int(w), (src, name, k, w)
        for name in SWITCH_BUILDS:
            got = run_mode(batch, inputs, VMConfig(fuel=MAX_FUEL), MODES["plain scalar"], monkeypatch,
                           switch_library(name))
            assert ((got.status == OUT_OF_FUEL) == (got.steps == MAX_FUEL)).all(), (src, name)
        assert sum(getattr(w, "kind", None) == "out_of_fuel" for w in want) >= 2, src


@pytest.mark.parametrize("k", range(len(PURE)))
def test_pure_loops_every_fuel_cut(k, monkeypatch):
    rng = np.random.default_rng([SEED, k])
    batch = _batch([PURE[k]])
    inputs = encode_tuples([(int(n),) for n in rng.integers(-12, 30, 32)], ("int",))
    for fuel in range(1, 90):
        assert_same_as_unchecked(batch, inputs, VMConfig(fuel=fuel), PURE[k], monkeypatch)


# Loops whose only write is one instruction of OPS_WRITES: none is a cycle, each ends (a value,
# or a trap that is not out_of_fuel), as in CPython or by running out of list memory.
WRITES = {
    "STORE_VAR": ("def f(n: int, xs: list[int]) -> int:\n    while n < 60:\n        n = n + 1\n    return n\n", 60),
    "FOR_RANGE": ("def f(n: int, xs: list[int]) -> int:\n    for i in range(n):\n        pass\n    return 7\n", 7),
    "FOR_LIST": ("def f(n: int, xs: list[int]) -> int:\n    for x in xs:\n        pass\n    return 8\n", 8),
    "APPEND": ("def f(n: int, xs: list[int]) -> int:\n    while len(xs) < 40:\n        xs.append(n)\n"
               "    return len(xs)\n", 40),
    "LIST_POP": ("def f(n: int, xs: list[int]) -> int:\n    while len(xs) > 0:\n        xs.pop()\n    return 5\n", 5),
    "STORE_INDEX": ("def f(n: int, xs: list[int]) -> int:\n    ys = [n]\n    while ys[0] < 50:\n"
                    "        ys[0] += 1\n    return ys[0]\n", 50),
    "BUILD_LIST": ("def f(n: int, xs: list[int]) -> int:\n    while len([n]) > 0:\n        pass\n    return 1\n",
                   "out_of_memory"),
    "LIST_REPEAT": ("def f(n: int, xs: list[int]) -> int:\n    while len(xs * 2) >= 0:\n        pass\n    return 1\n",
                    "out_of_memory"),
    "LIST_CONCAT": ("def f(n: int, xs: list[int]) -> int:\n    while len(xs + xs) >= 0:\n        pass\n    return 1\n",
                    "out_of_memory"),
    "LIST_EXTEND": ("def f(n: int, xs: list[int]) -> int:\n    while len(xs) < 30:\n        xs += [n]\n"
                    "    return len(xs)\n", 30),
    "CALL": ("def g(xs: list[int]) -> int:\n    xs.append(1)\n    return len(xs)\n\n"
             "def f(n: int, xs: list[int]) -> int:\n    while g(xs) < 30:\n        pass\n    return len(xs)\n", 30),
}


@pytest.mark.parametrize("op", sorted(WRITES))
def test_a_write_breaks_the_cycle(op, monkeypatch):
    src, want = WRITES[op]
    assert op in oc.WRITES and op in compile_source(src).disassemble(), op
    args = [(n, [1, 2, 3][: n % 4]) for n in range(-3, 13)]
    batch = _batch([src])
    inputs = encode_tuples(args, ("int", "list"))
    ref = assert_same_as_unchecked(batch, inputs, VMConfig(fuel=100_000), src, monkeypatch)
    if isinstance(want, str):
        assert (ref.status == oc.TRAP_CODES[want]).all(), (op, ref.status)
    else:
        assert (ref.status == 0).all() and (ref.value == want).all(), (op, ref.status, ref.value)


def test_random_programs_and_bytecode_as_without_the_check(monkeypatch):
    rng = np.random.default_rng([SEED, 100])
    for rep in range(12):  # generated programs, some with loops that never write
        progs, inputs = [], None
        params = ("int", "list")
        for _ in range(16):
            p = generate_program(rng, GeneratorConfig(entry_name="entry", entry_params=params, entry_ret="int"))
            progs.append(compile_source(p.source))
        args = random_args(rng, params, 24)
        batch = ProgramBatch.from_programs(progs, "entry")
        assert_same_as_unchecked(batch, encode_tuples(args, params), VMConfig(fuel=int(rng.integers(50, 3000))),
                                 f"generated (rep {rep})", monkeypatch)
    for rep in range(30):  # fuzzed bytecode: noise, plausible code with backward jumps, hit programs
        codes = [random_program(rng) for _ in range(40)]
        offsets = np.concatenate([[0], np.cumsum([len(c) for c in codes])])
        batch = ProgramBatch.build(np.concatenate(codes), offsets, rng.integers(0, 2, len(codes)), 0)
        inputs = encode_tuples([(int(a), int(b)) for a, b in rng.integers(-9, 10, (6, 2))], ("int", "int"))
        assert_same_as_unchecked(batch, inputs, VMConfig(fuel=int(rng.integers(1, 400)), stack_size=64),
                                 f"fuzzed bytecode (rep {rep})", monkeypatch)


def test_masked_random_bodies_as_without_the_check(monkeypatch):
    """The env's random policy: many `while 3: pass`-like bodies, on their tasks' tests."""
    from test_token_slots import masked_rollout_bodies
    from vramgym.envs.bank import TaskBank
    from vramgym.envs.tasks import get_task, task_names
    from vramgym.envs.vocab import detokenize
    rng = np.random.default_rng([SEED, 200])
    names = task_names()[:12]
    bank = TaskBank([get_task(n) for n in names], n_tests=8, seed=int(rng.integers(1 << 30)))
    bodies, lengths, tasks = masked_rollout_bodies(bank, rng, 300, 24)
    by_task: dict = {}
    for b, n, t in zip(bodies, lengths, tasks):
        src = detokenize(b[:n].tolist(), bank.signatures[t])
        try:
            by_task.setdefault(int(t), []).append(compile_source(src))
        except Exception:  # noqa: BLE001 - bodies cut at the length limit may not compile
            continue
    cycles = 0
    for t, progs in by_task.items():
        task = bank.tasks[t]
        args, _ = task.examples(int(rng.integers(1 << 30)), 8)
        batch = ProgramBatch.from_programs(progs, task.signature.entry)
        for fuel in (500, 20_000):
            ref = assert_same_as_unchecked(batch, encode_tuples(args, task.signature.kinds), VMConfig(fuel=fuel),
                                           f"masked bodies of {task.name}", monkeypatch)
            cycles += int((ref.status == OUT_OF_FUEL).sum())
    assert cycles > 0, "no masked body ran out of fuel: the test lost its point"


def test_emulated_gpu_ends_pure_loops_at_once(emu):  # noqa: F811 - the fixture
    """vg_execute_tasks (the switch interpreter of the GPU) on programs of task 0's signature
    that loop where a > 0, at the largest fuel: equal to the CPU backend, and the looping tests
    count 2^31 - 1 steps each."""
    n_tests = 6
    for k in range(100):  # tests that loop (a > 0) and tests that do not: ~3% of banks have only one kind
        inputs, expected, ret_kinds = make_bank(np.random.default_rng([SEED, 300, k]), n_tests)
        a = [int(inputs.words[inputs.offsets[j] + 1]) for j in range(n_tests)]  # task 0: (a, b) ints
        if 0 < sum(x > 0 for x in a) < n_tests:
            break
    srcs = ["def f(a: int, b: int) -> int:\n    while a > 0:\n        pass\n    return a % 1000 + b % 1000\n",
            "def f(a: int, b: int) -> int:\n    while a > b or a == 3:\n        continue\n    return b\n",
            TASKS[0][2]]
    code = np.zeros((len(srcs), 64), np.uint32)
    length = np.zeros(len(srcs), np.int64)
    for i, s in enumerate(srcs):
        res = compile_tokens(tokenize(s), np.array([0, len(tokenize(s))]), code_cap=64)
        length[i] = res.lengths[0]
        code[i, :length[i]] = res.code[0, :length[i]]
    task_ids = np.zeros(len(srcs), np.int64)
    active = np.ones(len(srcs), bool)
    config = VMConfig(fuel=MAX_FUEL)
    want = execute_tasks_cpu(code, length, task_ids, active, inputs, expected, n_tests, ret_kinds, config=config)
    got = cuda.execute_tasks(code, length, task_ids, active, inputs, expected, n_tests, ret_kinds, config=config)
    for name, g, w in zip(("passed", "steps", "valid"), got, want):
        assert np.array_equal(g, w), (name, g, w, SEED)
    loops = sum(x > 0 for x in a)
    assert 0 < loops < n_tests, a
    assert loops * MAX_FUEL <= want[1][0] < loops * MAX_FUEL + 1000, (want[1], a)
