"""Per-task fuel: a step budget per task that caps VMConfig.fuel for that task's runs.

The scorers (evaluate_tasks_cpu, execute_tasks_cpu, and their GPU twins in test_evaluate_tasks.py
and test_cuda_emulated.py) are checked against an oracle that scores each task's rows on their
own, under a config whose fuel is that task's budget. TaskBank's budgets come from its tasks'
references (fuel_scale times their most steps, at least MIN_TASK_FUEL, at most config.fuel):
every reference still passes every test, and a candidate slower than its budget fails where the
plain fuel would let it pass. VRAMGYM_SEED replays a run.
"""
from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from test_evaluate_tasks import SEED, image_oracle, make_bank, make_images, make_programs, oracle
from vramgym.compiler import tokenize
from vramgym.envs import vocab as V
from vramgym.envs.bank import DEFAULT_FUEL_SCALE, MIN_TASK_FUEL, TaskBank, bank_for
from vramgym.envs.neural_compile import entry_first
from vramgym.envs.tasks import Task, get_task
from vramgym.vm import VMConfig, cpu
from vramgym.vm.evaluate import evaluate_tasks_cpu, execute_tasks_cpu


def budgets(rng, n_tasks: int) -> np.ndarray:
    """Step budgets that cut many runs short (1, a few dozen steps) and some that cut none; at
    least one of 1 or 3 (with 4 tasks, about 2 draws in 100 cut no run at all otherwise)."""
    b = rng.choice([1, 3, 17, 60, 250, 2**31 - 1], n_tasks).astype(np.int32)
    b[rng.integers(n_tasks)] = rng.choice([1, 3])
    return b


def by_task(score, progs, task_fuel, config, *args):
    """The oracle's results for rows of each task alone, under fuel min(config.fuel, budget)."""
    task_ids, active = progs[2], progs[3]
    out = None
    for t in np.unique(task_ids):
        rows = active & (task_ids == t)
        c = VMConfig(fuel=int(min(config.fuel, task_fuel[t])), max_depth=config.max_depth,
                     heap_size=config.heap_size, max_lists=config.max_lists, stack_size=config.stack_size)
        got = score(*progs[:3], rows, *args, config=c)
        out = got if out is None else tuple(np.where(rows, g, o) for g, o in zip(got, out))
    return out


@pytest.mark.parametrize("kind", ["tokens", "images"])
def test_cpu_scorers_with_task_budgets_are_each_task_on_its_own(kind):
    """evaluate_tasks_cpu (token slots) and execute_tasks_cpu (bytecode images) with budgets:
    each task's rows as scored on their own at that fuel; without budgets some rows run longer;
    budgets of config.fuel or more change nothing."""
    score, check, make, n_tests = ((evaluate_tasks_cpu, oracle, make_programs, 10) if kind == "tokens" else
                                   (execute_tasks_cpu, image_oracle, make_images, 9))
    rng = np.random.default_rng([SEED, 20 if kind == "tokens" else 21])
    inputs, expected, ret_kinds = make_bank(rng, n_tests)
    rows = make(rng, 400 if kind == "tokens" else 300)
    task_fuel = budgets(rng, len(ret_kinds))
    config = VMConfig(fuel=3000)
    got = score(*rows, inputs, expected, n_tests, ret_kinds, config=config, task_fuel=task_fuel)
    want = by_task(check, rows, task_fuel, config, inputs, expected, n_tests, ret_kinds)
    for name, g, w in zip(("passed", "steps", "ok"), got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w), (name, np.flatnonzero(g != w)[:5], SEED)
    plain = score(*rows, inputs, expected, n_tests, ret_kinds, config=config)
    assert (plain[1] > got[1]).any() and not (plain[1] < got[1]).any()
    wide = score(*rows, inputs, expected, n_tests, ret_kinds, config=config,
                 task_fuel=np.full(len(ret_kinds), 3000, np.int32))
    assert all(np.array_equal(a, b) for a, b in zip(wide, plain))


@pytest.mark.parametrize("lockstep", [True, False])
def test_core_program_budgets_in_every_interpreter(lockstep):
    """cpu.run_batch's prog_fuel: each program's runs as a run_batch of that program alone at
    fuel min(config.fuel, budget), in the lockstep and the scalar interpreters (and the native
    code that the default mode takes for long runs), a budget below 1 taken as 1."""
    from vramgym.compiler.random_programs import GeneratorConfig, generate_program, random_args
    from vramgym.compiler import compile_source
    from vramgym.vm import ProgramBatch, encode_tuples, run_batch
    rng = np.random.default_rng([SEED, 22])
    cfg = GeneratorConfig(entry_name="entry", entry_params=("int", "int"), entry_ret="int", max_functions=2)
    progs = [compile_source(generate_program(rng, cfg).source) for _ in range(40)]
    # and two that loop: every budget cuts them
    progs += [compile_source("def entry(a: int, b: int) -> int:\n    i = 0\n    while i >= 0:\n        i += 1\n"
                             "    return i\n")] * 2
    batch = ProgramBatch.from_programs(progs, "entry")
    inputs = encode_tuples(random_args(rng, ("int", "int"), 40), ("int", "int"))
    fuel = rng.choice([-5, 0, 1, 2, 9, 40, 700, 5000, 2**31 - 1], len(progs)).astype(np.int32)
    config = VMConfig(fuel=5000)
    runs = (np.repeat(np.arange(len(progs), dtype=np.int32), len(inputs)),
            np.tile(np.arange(len(inputs), dtype=np.int32), len(progs)))
    status, value, steps, _, _, _ = cpu.run_batch(
        batch.code, batch.offsets, batch.entry, batch.ret_kind, inputs.words, inputs.offsets, *runs, None, None,
        config.as_array(), 0, 2, lockstep, batch.params, fuel)
    for p in range(len(progs)):
        one = ProgramBatch.from_programs([progs[p]], "entry")
        want = run_batch(one, inputs, config=VMConfig(fuel=int(min(5000, max(1, fuel[p])))), out_cap=0)
        r = slice(p * len(inputs), (p + 1) * len(inputs))
        assert np.array_equal(status[r], want.status) and np.array_equal(steps[r], want.steps), (p, fuel[p], SEED)
        assert np.array_equal(value[r], want.value), (p, SEED)
    assert (steps[-len(inputs):] == min(5000, max(1, fuel[-1]))).all()
    with pytest.raises(ValueError, match="prog_fuel"):
        cpu.run_batch(batch.code, batch.offsets, batch.entry, batch.ret_kind, inputs.words, inputs.offsets, *runs,
                      None, None, config.as_array(), 0, 2, lockstep, batch.params, fuel[:-1])


@pytest.mark.parametrize("bad, error, match", [
    (np.zeros(4, np.int32), ValueError, "task_fuel"),             # below 1
    (np.full(4, -3), ValueError, "task_fuel"),
    (np.full(4, 2**31), ValueError, "task_fuel"),                 # past int32
    (np.full(4, 100.0), TypeError, "task_fuel"),                  # floats are not truncated
    (np.full(3, 100), ValueError, r"task_fuel must have shape \(4,\)"),
    (np.full((4, 1), 100), ValueError, "task_fuel"),
])
def test_bad_task_budgets_are_refused(bad, error, match):
    rng = np.random.default_rng([SEED, 23])
    inputs, expected, ret_kinds = make_bank(rng, 3)
    progs = make_programs(rng, 5)
    with pytest.raises(error, match=match):
        evaluate_tasks_cpu(*progs, inputs, expected, 3, ret_kinds, task_fuel=bad)
    with pytest.raises(error, match=match):
        execute_tasks_cpu(*make_images(rng, 5), inputs, expected, 3, ret_kinds, task_fuel=bad)


# --- TaskBank's budgets ---------------------------------------------------------------------------

def reference_slots(bank: TaskBank):
    """Every task's reference (its entry first: function 0 runs) as compiler token slots."""
    rows = [tokenize(entry_first(t.reference, t.signature.entry)) for t in bank.tasks]
    S = max(len(r) for r in rows)
    slots = np.zeros((len(rows), S, 4), np.int32)
    for i, r in enumerate(rows):
        slots[i, : len(r)] = r
    return slots, np.array([len(r) for r in rows], np.int64), np.arange(len(rows), dtype=np.int64)


def test_bank_budgets_follow_the_references_and_every_reference_passes():
    bank = TaskBank.from_names(n_tests=16, seed=int(SEED % 1000))
    assert bank.fuel_scale == DEFAULT_FUEL_SCALE and bank.task_fuel.dtype == np.int32
    m = bank.n_tests
    for i, task in enumerate(bank.tasks):
        args, _ = task.examples(int(SEED % 1000), m, config=bank.config)   # the bank's tests
        need = max(task.reference_steps(args, bank.config))
        assert bank.task_fuel[i] == min(bank.config.fuel, max(MIN_TASK_FUEL, math.ceil(DEFAULT_FUEL_SCALE * need))), \
            task.name
    # most tasks get much less than the plain fuel, the slowest references keep it
    assert np.median(bank.task_fuel) <= 4000 and bank.task_fuel.max() == bank.config.fuel
    passed, steps, ok = evaluate_tasks_cpu(*reference_slots(bank), None, bank.inputs, bank.expected, m,
                                           bank.ret_kind, config=bank.config, task_fuel=bank.task_fuel)
    assert ok.all() and (passed == m).all(), [t.name for t, p in zip(bank.tasks, passed) if p < m]


def test_a_slow_candidate_fails_its_budget_and_passes_without_it():
    """sum_list's reference takes at most ~150 steps a test, so its budget is about 1,200; the
    same sum after a 729-round idle loop (~4,400 steps) passes under the plain fuel (20,000) only."""
    slow = V.encode(r"v2 = 0 \n while v2 < 9 * 9 * 9 : \n <INDENT> v2 += 1 \n <DEDENT> "
                    r"v0 = 0 \n for v1 in <P0> : \n <INDENT> v0 += v1 \n <DEDENT> return v0 \n <END>")
    fast = V.encode(r"v0 = 0 \n for v1 in <P0> : \n <INDENT> v0 += v1 \n <DEDENT> return v0 \n <END>")
    budgeted = TaskBank.from_names(["sum_list"], n_tests=16)
    plain = TaskBank.from_names(["sum_list"], n_tests=16, fuel_scale=None)
    budget = int(budgeted.task_fuel[0])
    assert MIN_TASK_FUEL <= budget <= 2000 and plain.task_fuel is None
    for body in (fast, slow):
        s = plain.score(np.array([body]), np.array([0]))
        assert s.all_pass[0], body
    assert budgeted.score(np.array([fast]), np.array([0])).all_pass[0]
    s = budgeted.score(np.array([slow]), np.array([0]))
    assert s.compiled[0] and s.pass_frac[0] == 0 and s.steps[0] == budget   # out of fuel on every test
    # the envs' banks take fuel_scale too: math.inf is the plain fuel
    assert bank_for(None, "sum_list", 16, 0, None, fuel_scale=math.inf).task_fuel is None
    assert bank_for(None, "sum_list", 16, 0, None, fuel_scale=2).fuel_scale == 2.0
    assert bank_for(None, "sum_list", 16, 0, None).fuel_scale == DEFAULT_FUEL_SCALE


def test_budgets_never_pass_the_fuel_and_examples_tasks_keep_it():
    ref = Task.from_reference("loop", "def f(n: int) -> int:\n    s = 0\n    for i in range(n):\n        s += i\n"
                              "    return s\n", {"n": {"kind": "int", "lo": 50, "hi": 60}})
    cases = Task.from_examples("cases", "def f(a: int) -> int:", [((1,), 2), ((2,), 3)])
    bank = TaskBank([ref, cases], n_tests=4, config=VMConfig(fuel=1500), fuel_scale=4)
    need = max(ref.reference_steps(ref.examples(0, 4)[0]))
    assert 375 < need < 1000   # so 4 x need is past the fuel (1,500) and capped there
    assert bank.task_fuel.tolist() == [1500, 1500]
    bank = TaskBank([ref, cases], n_tests=4, config=VMConfig(fuel=20_000), fuel_scale=1.5)
    assert bank.task_fuel.tolist() == [max(MIN_TASK_FUEL, math.ceil(1.5 * need)), 20_000]


@pytest.mark.parametrize("scale, error", [(0.5, ValueError), (0, ValueError), (float("nan"), ValueError),
                                          (-math.inf, ValueError), ("8", TypeError), (True, TypeError),
                                          ([8], TypeError)])
def test_bad_fuel_scales_are_refused(scale, error):
    with pytest.raises(error, match="fuel_scale"):
        TaskBank.from_names(["gcd"], fuel_scale=scale)


def test_a_given_bank_keeps_its_own_budgets():
    bank = TaskBank.from_names(["gcd"], fuel_scale=None)
    with pytest.raises(ValueError, match="fuel_scale applies to the envs' own bank"):
        bank_for(bank, None, None, 0, None, fuel_scale=4)
    assert bank_for(bank, None, None, 0, None) is bank


def test_a_bank_pickled_before_budgets_loads_with_the_plain_fuel():
    bank = TaskBank.from_names(["gcd"])
    old = pickle.loads(pickle.dumps(bank))
    assert np.array_equal(old.task_fuel, bank.task_fuel)
    state = dict(vars(bank))
    del state["task_fuel"], state["fuel_scale"]
    older = TaskBank.__new__(TaskBank)
    older.__setstate__(state)
    assert older.task_fuel is None and older.fuel_scale is None
    body = np.array([V.encode(r"return <P0> \n <END>")])
    assert older.score(body, np.array([0])).compiled[0]


def test_reference_steps_are_the_vms():
    task = get_task("gcd")
    args, _ = task.examples(3, 6)
    from vramgym.vm import execute
    want = [s for _, s in execute(task.program, task.signature.entry, args, steps=True)]
    assert task.reference_steps(args) == want and min(want) > 0
    # a run that traps counts its steps: all the fuel
    assert task.reference_steps(args, VMConfig(fuel=7)) == [min(7, s) for s in want]
    with pytest.raises(ValueError, match="no reference"):
        Task.from_examples("c", "def f(a: int) -> int:", [((1,), 2)]).reference_steps([(1,)])


# --- on a GPU -------------------------------------------------------------------------------------

from test_cuda_backend import gpu  # noqa: E402
from test_evaluate_tasks import N_GPU  # noqa: E402


@gpu
def test_task_budgets_gpu_equal_cpu():
    """cuda.evaluate_tasks and cuda.execute_tasks with task_fuel, host arrays and torch CUDA
    tensors, against the CPU backend; and the GPU env's bank scores as the CPU's."""
    torch = pytest.importorskip("torch")
    from vramgym.vm import cuda
    rng = np.random.default_rng([SEED, 31])
    inputs, expected, ret_kinds = make_bank(rng, 20)
    task_fuel = budgets(rng, len(ret_kinds))
    config = VMConfig(fuel=5000)
    for cpu_fn, gpu_fn, args in ((evaluate_tasks_cpu, cuda.evaluate_tasks, make_programs(rng, N_GPU)),
                                 (execute_tasks_cpu, cuda.execute_tasks, make_images(rng, N_GPU // 2))):
        want = cpu_fn(*args, inputs, expected, 20, ret_kinds, config=config, task_fuel=task_fuel)
        for f in (task_fuel, torch.from_numpy(task_fuel).cuda()):
            got = gpu_fn(*args, inputs, expected, 20, ret_kinds, config=config, task_fuel=f)
            for name, g, w in zip(("passed", "steps", "ok"), got, want):
                g = g.get() if hasattr(g, "get") else g.cpu().numpy()
                assert np.array_equal(g, w), (gpu_fn.__name__, name, np.flatnonzero(g != w)[:5], SEED)
    bank = TaskBank.from_names(n_tests=16)
    rows = rng.integers(0, V.VOCAB_SIZE, (2000, 24))
    tasks = rng.integers(0, len(bank), 2000)
    got = bank.evaluate(*(torch.from_numpy(x).cuda() for x in (rows, np.full(2000, 24), tasks)))
    want = bank.evaluate(*(torch.from_numpy(x) for x in (rows, np.full(2000, 24), tasks)))
    assert all(np.array_equal(g.cpu().numpy(), w.numpy()) for g, w in zip(got, want))
