"""Score programs on their tasks' tests: the CPU references of vramgym.vm.cuda.evaluate_tasks
(programs as compiler tokens) and vramgym.vm.cuda.execute_tasks (programs as bytecode, at the
end of this file).

    from vramgym.vm.evaluate import evaluate_tasks_cpu
    passed, steps, ok = evaluate_tasks_cpu(tokens, counts, task_ids, active, bank.inputs,
                                           bank.expected, bank.n_tests, bank.ret_kind)

Shapes (N programs, S token slots per program, T tasks, M = n_tests tests per task):
    tokens    (N, S, 4) int32   compiler tokens (kind, value, line, col) of program i in
                                tokens[i, :counts[i]], the last one EOF (compile_tokens' layout)
    counts    (N,) int          tokens used per row, clamped to [0, S]
    task_ids  (N,) int          each row's task, in [0, T)
    active    (N,) bool | None  rows to compile and run (None: all)
    inputs    Encoded           T * M argument tuples: task t's tests are items t*M .. t*M + M - 1
    expected  Encoded           T * M expected results, aligned with inputs
    ret_kinds (T,) int32        each task's return kind (opcodes.KIND_*), for comparing results
Returns passed (N,) int32 (tests whose result equals the expected value), steps (N,) int64
(executed steps summed over the M tests) and ok (N,) bool (compiled); passed and steps are 0
where a row is inactive or did not compile. The entry is function 0 of each program, and no
signature is checked (the GPU version checks none either; compile_tokens' signatures are
dropped before to_programs): a program whose entry takes another number of arguments traps
bad_input on every test; one whose entry takes other kinds of arguments, or returns another
kind, is not detected (its results are meaningless, and it passes no test only by luck), so the
envs fix the signature themselves.

Bad arguments raise TypeError/ValueError naming them: arrays that are not integers (floats are
not truncated) or whose values do not fit their dtype (no wrap-around), wrong shapes, an active
mask other than bool (or 0/1), task_ids of active rows outside [0, T), n_tests that is not an
int >= 0, ret_kinds other than opcodes.KIND_*, and expected values whose kind is not their
task's ret_kind (no program could pass them). The GPU versions check host arrays the same way,
and device arrays (torch CUDA tensors, CuPy arrays) by dtype and shape only, since reading their
values would wait for the device: there a task id out of range or a malformed test just passes
nothing, and an integer active mask counts nonzero as active.
"""
from __future__ import annotations

import numpy as np

from vramgym.compiler.batch import _code_cap, packed_rows

from . import cpu
from . import opcodes as oc
from .batch import ProgramBatch, VMConfig, run_batch
from .program import code_words
from .values import INT32_MAX, INT32_MIN, Encoded, int_array

I64 = (-(2**63), 2**63 - 1)


def _host(x, dtype=None) -> np.ndarray:
    """A numpy array of x (numpy, sequences, or torch CPU/CUDA tensors: copied to the host)."""
    if type(x).__module__.startswith("torch"):
        x = x.detach().cpu().numpy()
    return np.asarray(x) if dtype is None else np.asarray(x, dtype=dtype)


def _encoded(x, name: str) -> Encoded:
    if isinstance(x, Encoded):
        return x
    if not isinstance(x, (tuple, list)) or len(x) != 2:
        raise TypeError(f"{name} must be an Encoded batch or a (words, offsets) pair, got {type(x).__name__}")
    try:  # Encoded checks the dtypes and ranges (no silent cast of floats or wide ints)
        return Encoded(_host(x[0]), _host(x[1]))
    except (TypeError, ValueError) as e:
        raise type(e)(f"{name}: {e}") from None


def _vector(x, name: str, n: int, lo: int, hi: int, dtype) -> np.ndarray:
    """x as a checked (n,) integer array (int_array: no truncated floats, no wrapped values)."""
    a = _host(x)
    if a.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {a.shape}")
    return int_array(a, name, lo, hi, dtype)


def check_n_tests(n_tests) -> int:
    """n_tests as an int >= 0 (no bool, no float: int() would take True as 1 and truncate 4.7)."""
    if isinstance(n_tests, (bool, np.bool_)) or not isinstance(n_tests, (int, np.integer)):
        raise TypeError(f"n_tests must be an int, got {n_tests!r}")
    n_tests = int(n_tests)
    if n_tests < 0:
        raise ValueError(f"n_tests must be >= 0, got {n_tests}")
    return n_tests


def _task_args(n: int, sizes_name: str, sizes, task_ids, active, inputs, expected, n_tests: int, ret_kinds):
    """The arguments both scorers share, as checked host arrays (O(N + T * M) numpy checks)."""
    sizes = _vector(sizes, sizes_name, n, *I64, np.int64)
    task = _vector(task_ids, "task_ids", n, *I64, np.int64)   # (inactive rows may hold anything)
    if active is None:
        act = np.ones(n, dtype=bool)
    else:  # bool, or 0/1 integers: a cast would take 2, 0.5 or "False" as True
        act = _host(active)
        act = act if act.dtype == bool and act.shape == (n,) else _vector(act, "active", n, 0, 1, bool)
    ret = int_array(_host(ret_kinds), "ret_kinds", oc.KIND_INT, oc.KIND_LIST, np.int32)
    inputs, expected = _encoded(inputs, "inputs"), _encoded(expected, "expected")
    n_tests = check_n_tests(n_tests)
    if len(inputs) != len(ret) * n_tests or len(expected) != len(inputs):
        raise ValueError(f"inputs and expected need {len(ret)} tasks x {n_tests} tests values each, "
                         f"got {len(inputs)} and {len(expected)}")
    if np.any(task[act] < 0) or np.any(task[act] >= len(ret)):
        raise ValueError(f"task_ids of active rows must be in [0, {len(ret)})")
    # Each expected value's kind word must be its task's ret_kind: otherwise no result equals it.
    # (Checked once per bank: the envs pass the same arrays at every step.)
    key = (expected.words, expected.offsets, ret.tobytes(), n_tests)
    if len(expected) and not (len(_KINDS_CHECKED) == 4 and all(a is b for a, b in zip(key[:2], _KINDS_CHECKED))
                              and key[2:] == tuple(_KINDS_CHECKED[2:])):
        start, size = expected.offsets[:-1], np.diff(expected.offsets)
        kind = np.full(len(expected), -1, np.int64)  # -1: fewer than the 2 words of a value
        whole = size >= 2
        kind[whole] = expected.words[start[whole]]
        bad = np.flatnonzero(kind != np.repeat(ret, n_tests))
        if len(bad):
            i, t = int(bad[0]), int(bad[0]) // n_tests
            got = "is not a whole value" if kind[i] < 0 else f"has kind {int(kind[i])}"
            raise ValueError(f"expected value {i} (task {t}) {got}, but ret_kinds[{t}] is {int(ret[t])} "
                             f"(opcodes.KIND_*: no result could equal it)")
        _KINDS_CHECKED[:] = key  # (holding the arrays: their ids cannot be reused meanwhile)
    return sizes, task, act, ret, inputs, expected, n_tests


_KINDS_CHECKED: list = []  # the last (expected words, offsets, ret_kinds bytes, n_tests) that passed
# Rows compiled per call of evaluate_tasks_cpu at the default code_cap (fewer at a larger one): a
# (rows, code_cap) uint32 matrix of 16 MiB (all at once, a million rows would take 4 GiB and a copy).
COMPILE_CHUNK = 4096


def _run_on_tasks(programs, rows, task, inputs, expected, n_tests, config, passed, steps, task_fuel=None) -> None:
    """Run programs[i] on the tests of task[rows[i]] (fuel capped by task_fuel[task] where
    given); write the passes and step sums to rows."""
    if not len(rows) or not n_tests:
        return
    t = task[rows]
    run_prog = np.repeat(np.arange(len(rows), dtype=np.int32), n_tests)
    run_in = (t[:, None] * n_tests + np.arange(n_tests)[None, :]).ravel().astype(np.int32)
    if task_fuel is None:
        res = run_batch(programs, inputs, (run_prog, run_in), expected=expected, config=config, out_cap=0, backend="cpu")
        run_passed, run_steps = res.passed, res.steps
    else:   # (the core's per-program budget: one call, whatever the tasks' budgets)
        _, _, run_steps, run_passed, _, _ = cpu.run_batch(
            programs.code, programs.offsets, programs.entry, programs.ret_kind, inputs.words, inputs.offsets, run_prog,
            run_in, expected.words, expected.offsets, (config or VMConfig()).as_array(), 0, cpu.default_threads(),
            params=programs.params, prog_fuel=np.ascontiguousarray(task_fuel[t], dtype=np.int32))
    passed[rows] = run_passed.reshape(-1, n_tests).sum(axis=1)
    steps[rows] = run_steps.reshape(-1, n_tests).astype(np.int64).sum(axis=1)


def check_task_fuel(task_fuel, n_tasks: int) -> np.ndarray | None:
    """task_fuel as checked host int32 (T,) step budgets in [1, 2**31 - 1], or None. A task's
    runs take min(config.fuel, task_fuel[task]) steps at most."""
    if task_fuel is None:
        return None
    return _vector(task_fuel, "task_fuel", n_tasks, 1, INT32_MAX, np.int32)


def _out(as_torch: bool, *arrays):
    if as_torch:
        import torch
        return tuple(torch.from_numpy(a) for a in arrays)
    return arrays


def evaluate_tasks_cpu(tokens, counts, task_ids, active, inputs, expected, n_tests: int, ret_kinds, *,
                       config: VMConfig | None = None, code_cap: int = 1024, task_fuel=None):
    """The CPU backend's scores of N token-slot programs on their tasks' tests (see the module
    docstring); the same signature and results as vramgym.vm.cuda.evaluate_tasks. task_fuel:
    None, or (T,) step budgets, each in [1, 2**31 - 1], that cap config.fuel for their task's
    runs (TaskBank.task_fuel). Returns numpy arrays, or torch CPU tensors when tokens is a torch
    tensor."""
    code_cap = _code_cap(code_cap)
    toks = _host(tokens)
    if toks.ndim != 3 or toks.shape[2] != 4:
        raise ValueError(f"tokens must have shape (N, S, 4), got {toks.shape}")
    toks = int_array(toks, "tokens", INT32_MIN, INT32_MAX, np.int32, ndim=3)
    n, slot = toks.shape[:2]
    count, task, act, ret, inputs, expected, n_tests = _task_args(n, "counts", counts, task_ids, active, inputs,
                                                                  expected, n_tests, ret_kinds)
    task_fuel = check_task_fuel(task_fuel, len(ret))
    passed, steps, ok = score_token_rows(toks, count, task, act, ret, inputs, expected, n_tests, config, code_cap,
                                         task_fuel)
    return _out(type(tokens).__module__.startswith("torch"), passed, steps, ok)


def score_token_rows(toks: np.ndarray, count: np.ndarray, task: np.ndarray, act: np.ndarray, ret: np.ndarray,
                     inputs: Encoded, expected: Encoded, n_tests: int, config: VMConfig | None, code_cap: int,
                     task_fuel: np.ndarray | None = None):
    """evaluate_tasks_cpu after its checks, for callers whose arguments are checked already
    (TaskBank.evaluate: its own tests, and token slots it built): toks (N, S, 4) int32, count (N,)
    int64, task (N,) int64 (in [0, T) where act), act (N,) bool, ret (T,) int32 KIND_*, inputs
    and expected Encoded with T * n_tests items of those kinds, code_cap in 1..MAX_CODE, task_fuel
    None or (T,) int32 (check_task_fuel).
    Returns (passed, steps, ok) numpy arrays. The token rows go to the core packed in fresh
    arrays, so compile_tokens' copies and checks are not needed here."""
    n, slot = toks.shape[:2]
    count = np.minimum(np.maximum(count, 0), slot)   # (np.clip costs 3-4x more at a few rows)
    passed, steps, ok = np.zeros(n, dtype=np.int32), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
    rows = np.flatnonzero(act)
    if len(rows):
        used = np.arange(slot)[None, :] < count[rows, None]      # (R, S)
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(count[rows], out=offsets[1:])
        # each token's 4 words as one 16-byte item: a boolean mask copies those 4x faster than ints
        items = np.ascontiguousarray(toks).view("V16")[:, :, 0]
        packed = (items if len(rows) == n else items[rows])[used].view(np.int32).reshape(-1, 4)
        # One core call compiles the rows (COMPILE_CHUNK of them at a time at the default cap: the
        # code matrix is (rows, code_cap), 4 KiB a row, while programs use a few dozen words) and
        # runs each that compiled on its task's tests.
        ok[rows], passed[rows], steps[rows] = cpu.score_tokens(
            np.ascontiguousarray(packed), offsets, np.ascontiguousarray(task[rows], dtype=np.int64),
            np.ascontiguousarray(ret, dtype=np.int32), inputs, expected, n_tests,
            (config or VMConfig()).as_array(), code_cap, max(1, COMPILE_CHUNK * 1024 // code_cap), cpu.default_threads(),
            task_fuel)
    return passed, steps, ok


def _images(words: np.ndarray, length: np.ndarray, rows: np.ndarray, ret: np.ndarray) -> ProgramBatch:
    """Rows `rows` of a (N, W) image matrix, each cut to its length, as programs with entry 0."""
    return ProgramBatch.build(*packed_rows(words, length, rows), 0, ret)


def execute_tasks_cpu(code, code_len, task_ids, active, inputs, expected, n_tests: int, ret_kinds, *,
                      config: VMConfig | None = None, task_fuel=None):
    """The CPU backend's scores of N bytecode images (e.g. a neural compiler's output) on their
    tasks' tests; the same signature and results as vramgym.vm.cuda.execute_tasks.

    code (N, W) uint32: image i in code[i, :code_len[i]]; code_len (N,) int: words used (< 0 or
    > W: not a valid image). task_ids, active, inputs, expected, n_tests, ret_kinds as in
    evaluate_tasks_cpu (task_fuel too). Returns passed (N,) int32, steps (N,) int64 (summed over the tests) and
    valid (N,) bool: the image passes the bytecode validator and has a function 0; passed and
    steps are 0 where a row is inactive or invalid. Numpy arrays, or torch CPU tensors when code
    is a torch tensor."""
    from . import cpu
    words = _host(code)
    if words.ndim != 2:
        raise ValueError(f"code must have shape (N, W), got {words.shape}")
    words = code_words(words, "code", ndim=2)
    n, width = words.shape
    length, task, act, ret, inputs, expected, n_tests = _task_args(n, "code_len", code_len, task_ids, active,
                                                                   inputs, expected, n_tests, ret_kinds)
    task_fuel = check_task_fuel(task_fuel, len(ret))
    passed, steps, valid = np.zeros(n, dtype=np.int32), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
    rows = np.flatnonzero(act & (length >= 0) & (length <= width))
    if len(rows):  # every candidate image through the validator in one call
        programs = _images(words, length, rows, ret[task[rows]])
        bad, pc = cpu.validate_batch(programs.code, programs.offsets, programs.entry)
        ok = (bad == -1) & (pc >= 0)
        valid[rows] = ok
        if not ok.all():
            rows = rows[ok]
            programs = _images(words, length, rows, ret[task[rows]])
    if len(rows):
        _run_on_tasks(programs, rows, task, inputs, expected, n_tests, config, passed, steps, task_fuel)
    return _out(type(code).__module__.startswith("torch"), passed, steps, valid)
