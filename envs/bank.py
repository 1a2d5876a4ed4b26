"""A task bank: the tasks an environment samples from, with their test inputs and expected
outputs drawn and encoded once (outputs computed by the VM running each reference), and the
batched scorer that compiles and runs many candidate programs against them in one call.

    bank = TaskBank.from_names(["gcd", "sum_list"], n_tests=16, seed=0)
    scores = bank.score(bodies, task_ids)      # bodies: (N, L) action ids, END-padded

Shapes (T tasks, M tests per task, E shown examples, W / W_OUT words per encoded example):
    examples  (T, E, W) int32      encoded argument tuples shown to the agent, zero-padded
    outputs   (T, E, W_OUT) int32  encoded expected outputs of those examples
    kinds     (T, 4) int32         parameter kinds (opcodes.KIND_*; -1 for unused slots)
    ret_kind  (T,) int32
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vramgym.compiler import tokenize
from vramgym.vm import opcodes as oc
from vramgym.vm import VMConfig, encode_results, encode_tuples
from vramgym.vm.values import INT32_MAX, INT32_MIN, KIND_BY_NAME, Encoded, check_int, int_array

from . import vocab as V
from .tasks import TASKS, Task, get_task


@dataclass
class Scores:
    """Per candidate (N,): compiled, fraction of tests passed, all passed, mean executed steps
    over the tests, and the program length in actions."""

    compiled: np.ndarray
    pass_frac: np.ndarray
    all_pass: np.ndarray
    steps: np.ndarray
    length: np.ndarray


def _pad_rows(enc: Encoded, width: int, n: int, what: str) -> np.ndarray:
    """The first n encoded items as rows of `width` int32 words, zero-padded (only shown examples
    become rows: the other tests may be longer)."""
    n = min(n, len(enc))
    out = np.zeros((n, width), dtype=np.int32)
    lens = np.diff(enc.offsets[: n + 1])
    if n and lens.max() > width:
        raise ValueError(f"{what} needs {lens.max()} words, more than example_width={width}")
    col = np.arange(width)[None, :]
    mask = col < lens[:, None]
    out[mask] = enc.words[(enc.offsets[:n, None] + col)[mask]]
    return out


def _examples(task: Task, seed, n: int, config: VMConfig):
    """task.examples under the bank's limits. Where its reference needs more (a fuel lowered to
    bound the slowest candidate), the tests come from the default limits with a warning: no
    candidate can pass those tests, which the user should know, but may have chosen. Likewise
    a case whose lists need more than the bank's list memory."""
    if task.cases is not None:  # (checked against the default list memory only, when built)
        if len(task.cases) > n:  # a seeded sample would be scored: a body failing one case could pass
            raise ValueError(f"task {task.name!r} has {len(task.cases)} cases, more than this bank's n_tests={n}: "
                             f"every case must be a test, so give n_tests >= {len(task.cases)}")
        inputs, outputs = task.examples(seed, n)
        need = max(max(sum(len(v) for v in a if isinstance(v, list)), len(o) if isinstance(o, list) else 0)
                   for a, o in zip(inputs, outputs)) if inputs else 0
        if need > config.heap_size:
            warnings.warn(f"task {task.name!r}: a test holds {need} ints of lists, more than this bank's list memory "
                          f"(heap_size={config.heap_size}): no candidate can pass that test", stacklevel=3)
        return inputs, outputs
    try:
        return task.examples(seed, n, config=config)
    except ValueError as e:
        inputs, outputs = task.examples(seed, n)   # raises again if the limits are not the cause
        warnings.warn(f"{e} under this bank's limits (fuel={config.fuel}): no candidate can pass that test",
                      stacklevel=3)  # the TaskBank(...) call
        return inputs, outputs


def _action_token_table() -> np.ndarray:
    """(VOCAB_SIZE, 2) int32: the compiler token (kind, value) of every action; END is -1."""
    tc = oc.TOKEN_CODES
    text_kind = {"return": "RETURN", "if": "IF", "elif": "ELIF", "else": "ELSE", "while": "WHILE", "for": "FOR",
                 "in": "IN", "break": "BREAK", "continue": "CONTINUE", "pass": "PASS", "and": "AND", "or": "OR",
                 "not": "NOT", "True": "TRUE", "False": "FALSE", "(": "LPAREN", ")": "RPAREN", "[": "LBRACKET",
                 "]": "RBRACKET", ",": "COMMA", ":": "COLON", ".": "DOT", "=": "ASSIGN", "+=": "PLUS_ASSIGN",
                 "-=": "MINUS_ASSIGN", "*=": "STAR_ASSIGN", "//=": "SLASHSLASH_ASSIGN", "%=": "PERCENT_ASSIGN",
                 "+": "PLUS", "-": "MINUS", "*": "STAR", "//": "SLASHSLASH", "%": "PERCENT", "<": "LT", "<=": "LE",
                 ">": "GT", ">=": "GE", "==": "EQ", "!=": "NE", "<NEWLINE>": "NEWLINE", "<INDENT>": "INDENT",
                 "<DEDENT>": "DEDENT"}
    table = np.full((V.VOCAB_SIZE, 2), -1, dtype=np.int32)
    for a, text in enumerate(V.TOKENS):
        if text in text_kind:
            table[a] = (tc[text_kind[text]], 0)
        elif text in oc.BUILTIN_NAMES:
            table[a] = (tc["NAME"], oc.BUILTIN_NAMES.index(text))
        elif a in V.NAME_SLOTS:  # FN, P0..P3, V0..V7: fixed name ids after the builtins
            table[a] = (tc["NAME"], len(oc.BUILTIN_NAMES) + V.NAME_SLOTS.index(a))
        elif text.isdigit():
            table[a] = (tc["INT"], int(text))
    assert (table[:, 0] >= 0).sum() == V.VOCAB_SIZE - 1  # every action but END
    return table


_ACTION_TOKENS = _action_token_table()


def code_cap_for(tokens: int) -> int:
    """Bytecode words that hold any program of `tokens` compiler tokens that the mask allows: a
    chained comparison's every further `< x` (2 tokens) compiles to 5 words (DUP ROT3 COMPARE
    JUMP_IF_FALSE_OR_POP LOAD), the most per token of the language (tests/test_envs.py checks
    the longest chain a mask allows); the compiler's default cap fits bodies of ~400 tokens."""
    return min(oc.LIMITS["MAX_CODE"], max(1024, 3 * int(tokens) + 64))


def is_int_dtype(t) -> bool:
    """Whether a numpy array or torch tensor holds integers (bool is not one)."""
    if hasattr(t, "is_floating_point"):   # a torch tensor (torch is imported only where used)
        import torch
        return not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)
    return t.dtype.kind in "iu"


def _check_evaluate_args(bodies, lengths, task_ids, active) -> None:
    """TaskBank.evaluate's arguments by type, shape and device only (their values would need a
    host sync on a GPU): integer tensors, floats never truncated (4.5 is not token 4)."""
    import torch
    for name, t, ndim in (("bodies", bodies, 2), ("lengths", lengths, 1), ("task_ids", task_ids, 1)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch tensor, got {type(t).__name__}")
        if not is_int_dtype(t):
            raise TypeError(f"{name} must be an integer tensor, got {t.dtype}")
        if t.ndim != ndim or t.shape[0] != bodies.shape[0] or t.device != bodies.device:
            raise ValueError(f"{name} must have shape ({bodies.shape[0]},{' L' if ndim == 2 else ''}) on "
                             f"{bodies.device}, got {tuple(t.shape)} on {t.device}")
    if active is not None and (not isinstance(active, torch.Tensor) or active.dtype != torch.bool
                               or active.shape != lengths.shape or active.device != bodies.device):
        raise TypeError(f"active must be None or a bool tensor like lengths, got {active!r:.80}")


def check_seed(seed, name: str = "seed") -> int:
    """A seed as a Python int: non-negative as numpy and Gymnasium require, and below 2**64,
    the bits the vector envs' task hash reads (a larger seed would repeat a smaller one's tasks;
    the hash folds the 64 bits to 32, so two seeds share tasks with a chance of about 2**-32)."""
    s = check_int(seed, name, 0)
    if s >= 1 << 64:
        raise ValueError(f"{name} must be below 2**64, got {s}")
    return s


BACKENDS = ("cpu", "cuda", "auto")


def check_backend(backend, device_type: str | None = None) -> None:
    """`backend=` of the envs and TaskBank chooses nothing (scoring runs where the candidates'
    tensors live: the env's device), kept for compatibility: None, "auto", or the device type
    the env scores on; any other value would be silently ignored, so it is an error."""
    if backend is None:
        return
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend must be 'cpu', 'cuda' or 'auto', got {backend!r}")
    if device_type is not None and backend not in ("auto", device_type):
        raise ValueError(f"backend={backend!r}, but this env scores on {device_type}: envs score where their "
                         f"state lives (device= of the vector envs; single envs: cpu), so leave backend unset")


def check_device(device):
    """device= of the vector envs as a torch.device: None (the CPU), "cpu", "cuda", "cuda:k" or a
    torch.device of those types ("meta" too: tests trace a step there, with the scorer, which
    needs data, replaced); ValueError naming the argument otherwise (torch's own error does not)."""
    import torch
    if device is None:
        return torch.device("cpu")
    if isinstance(device, bool) or not isinstance(device, (str, int, torch.device)):
        raise TypeError(f"device must be None, a str such as 'cpu' or 'cuda:0', or a torch.device, got "
                        f"{type(device).__name__} {device!r}")
    try:
        dev, why = torch.device(device), ""   # (an int k is torch's cuda:k)
    except RuntimeError as e:
        dev, why = None, f": {e}"
    if dev is None or dev.type not in ("cpu", "cuda", "meta"):
        raise ValueError(f"device must be None, 'cpu', 'cuda' or 'cuda:k' (the envs run on the CPU or a CUDA GPU), "
                         f"got {device!r}{why}")
    return dev


def bank_for(bank: "TaskBank | None", tasks, n_tests: int | None, seed: int, backend: str | None,
             fuel: int | None = None, device=None, fuel_scale: float | None = None) -> "TaskBank":
    """The envs' bank: the one given, else the built-in tasks named (all by default; a str is one
    name) with n_tests tests each (None: 16). fuel: VM steps per test run (default 20,000), a
    budget every backend enforces identically; lower it to bound a batch's slowest candidate (on
    a GPU a scoring launch lasts as long as its longest run). fuel_scale: each task's own budget
    in multiples of its reference's steps (None: DEFAULT_FUEL_SCALE, 8; math.inf: fuel alone; see
    TaskBank). A given bank brings its own tests and fuel (TaskBank(..., n_tests=...,
    config=VMConfig(fuel=...), fuel_scale=...)). device: where the env scores (None: the CPU),
    which `backend`, if given, must agree with (check_backend)."""
    check_backend(backend, check_device(device).type)
    if seed is not None:   # (None: numpy's fresh entropy for the tests; a vector env also hashes tasks from it)
        check_seed(seed)
    if bank is not None:
        if not isinstance(bank, TaskBank):
            raise TypeError(f"bank must be a TaskBank, got {type(bank).__name__}")
        if fuel is not None:
            raise ValueError("fuel applies to the envs' own bank; give a TaskBank(config=VMConfig(fuel=...)) instead")
        if fuel_scale is not None:
            raise ValueError(f"fuel_scale applies to the envs' own bank; the bank given has its own "
                             f"(fuel_scale={bank.fuel_scale}): give TaskBank(..., fuel_scale=...) instead")
        if n_tests is not None:
            raise ValueError(f"n_tests applies to the envs' own bank; the bank given has its own "
                             f"(n_tests={bank.n_tests}): give TaskBank(..., n_tests=...) instead")
        if tasks is not None:
            raise ValueError("tasks applies to the envs' own bank; give bank= or tasks=, not both")
        return bank
    if tasks is not None and not isinstance(tasks, str):
        tasks = list(tasks)  # (any iterable of names)
    if tasks is not None and not isinstance(tasks, str) and len(tasks) == 0:
        raise ValueError("tasks is empty: an env needs at least one task (tasks=None: every built-in task)")
    config = None if fuel is None else VMConfig(fuel=fuel)
    return TaskBank.from_names(tasks, n_tests=16 if n_tests is None else n_tests, seed=seed, backend=backend,
                               config=config, fuel_scale=DEFAULT_FUEL_SCALE if fuel_scale is None else fuel_scale)


def _row_hash(bodies: np.ndarray, used: np.ndarray, lengths: np.ndarray, task_ids: np.ndarray) -> np.ndarray:
    """A 64-bit hash per row of its task, length and first used[i] tokens (int64 arithmetic
    wraps around), column by column (Horner's rule: no (N, width) temporaries)."""
    step = np.int64(0x100000001B3)  # the FNV-1 64-bit prime
    h = task_ids * np.int64(0x9E3779B97F4A7C15 - 2**64) + lengths
    for j in range(bodies.shape[1]):
        live = (used > j).astype(np.int64)
        h += live * (h * (step - 1) + bodies[:, j])
    return h


def distinct_candidates(bodies: np.ndarray, lengths: np.ndarray, task_ids: np.ndarray):
    """(first, inverse) over N candidates: first[k] is the row of the k-th distinct one, and row
    i is candidate inverse[i], so results of bodies[first] taken at inverse are every row's.
    Rows are equal when their task, length and tokens before the length are (tokens after it
    are padding). Rows are grouped by a 64-bit hash, then each repeat is compared whole with
    its group's first row: a hash collision only costs a run, never a wrong result."""
    bodies = np.asarray(bodies, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    task_ids = np.asarray(task_ids, dtype=np.int64)
    n, width = bodies.shape
    if n <= 1:   # (one row: nothing to group; the hash below costs 4 numpy ops per column)
        return np.zeros(n, np.int64), np.zeros(n, np.int64)
    used = np.clip(lengths, 0, width)  # the tokens that count
    h = _row_hash(bodies, used, lengths, task_ids)
    order = np.argsort(h)
    hs = h[order]
    start = np.flatnonzero(np.concatenate([[True], hs[1:] != hs[:-1]]))
    first = np.minimum.reduceat(order, start)  # each group's earliest row
    group = np.empty(n, np.int64)
    group[order] = np.cumsum(np.concatenate([[0], (hs[1:] != hs[:-1]).astype(np.int64)]))
    by_row = np.argsort(first)  # number the candidates in row order: the scorer sees rows as given
    rank = np.empty_like(by_row)
    rank[by_row] = np.arange(len(by_row))
    first, inverse = first[by_row], rank[group]
    rep = first[inverse]
    dup = np.flatnonzero(rep != np.arange(n))  # rows taken as repeats of an earlier row: check them
    r = rep[dup]
    differ = (task_ids[dup] != task_ids[r]) | (lengths[dup] != lengths[r])
    if width:
        differ |= ((bodies[dup] != bodies[r]) & (np.arange(width) < used[dup, None])).any(axis=1)
    clash = dup[differ]
    if len(clash):  # equal hashes, different rows: each runs on its own
        inverse[clash] = len(first) + np.arange(len(clash))
        first = np.concatenate([first, clash])
    return first.astype(np.int64), inverse.astype(np.int64)


# A task's fuel (TaskBank's fuel_scale): this many times the most steps its reference takes on
# the bank's tests, and at least MIN_TASK_FUEL.
DEFAULT_FUEL_SCALE = 8.0
MIN_TASK_FUEL = 1000


def check_fuel_scale(fuel_scale) -> float | None:
    """fuel_scale as a finite float >= 1 (a smaller one would fail the reference itself), or
    None for None or math.inf (no task budget below config.fuel)."""
    if fuel_scale is None:
        return None
    if isinstance(fuel_scale, (bool, np.bool_)) or not isinstance(fuel_scale, (int, float, np.integer, np.floating)):
        raise TypeError(f"fuel_scale must be a number or None, got {fuel_scale!r:.60}")
    if not float(fuel_scale) >= 1:   # (NaN fails too)
        raise ValueError(f"fuel_scale must be at least 1 (a task's fuel below its reference's steps would fail the "
                         f"reference), math.inf or None, got {fuel_scale!r}")
    return None if math.isinf(fuel_scale) else float(fuel_scale)


class TaskBank:
    """Tasks with their tests, ready for batched scoring. Every task's signature must fit the
    vocabulary (at most 4 parameters). n_examples of each task's n_tests tests are shown to the
    agent, so n_tests >= n_examples. A task given by cases (Task.from_examples) runs every case,
    so n_tests >= its number of cases; with fewer cases they repeat, in a seeded order, as evenly
    as n_tests allows (all_pass is passing every case; pass_frac counts tests, repeats included).
    `backend` chooses nothing: scoring runs where the candidates' tensors live (check_backend).

    Fuel: a candidate's run on a test stops (out of fuel, failing it) after config.fuel VM steps
    (default 20,000), and, with fuel_scale (default DEFAULT_FUEL_SCALE = 8), after its task's
    own budget: fuel_scale times the most steps the task's reference takes on the bank's tests,
    at least MIN_TASK_FUEL (1,000) and at most config.fuel (task_fuel, (T,) int32). A candidate
    may be that much slower than the reference and still pass; one that loops is stopped early
    (on a GPU a scoring launch lasts as long as its longest run). A task given by cases has no
    reference: config.fuel. fuel_scale=None (or math.inf): config.fuel for every task (task_fuel
    is None)."""

    def __init__(self, tasks: Sequence[Task], n_tests: int = 16, n_examples: int = 4, seed: int = 0,
                 example_width: int = 64, config: VMConfig | None = None, backend: str | None = None,
                 fuel_scale: float | None = DEFAULT_FUEL_SCALE):
        try:
            tasks = list(tasks)  # (an iterator is truthy even when empty)
        except TypeError:
            raise TypeError(f"tasks must be a sequence of Tasks, got {type(tasks).__name__}") from None
        if not tasks:
            raise ValueError("a task bank needs at least one task")
        n_examples = check_int(n_examples, "n_examples", 1)
        example_width = check_int(example_width, "example_width", 1)
        # the envs fix n_examples at 4: name n_tests, the argument a user set, with its minimum
        n_tests = check_int(n_tests, "n_tests", n_examples)
        check_backend(backend)
        self.tasks = tasks
        for i, t in enumerate(self.tasks):
            if not isinstance(t, Task):
                raise TypeError(f"tasks[{i}] must be a Task (TaskBank.from_names takes names), got {t!r:.60}")
        self.n_tests, self.n_examples = n_tests, n_examples
        self.config = config or VMConfig(fuel=20_000)
        self.fuel_scale = check_fuel_scale(fuel_scale)
        self.backend = backend
        self.signatures = []
        for t in self.tasks:
            try:
                self.signatures.append(V.as_signature(t.signature_line()))
            except ValueError as e:
                raise ValueError(f"task {t.name!r}: {e}") from None
        T = len(self.tasks)
        # The compiler tokens of each signature line, up to the body's INDENT. The lexer interns
        # the function name and the parameters first, so their ids are the vocabulary's slots.
        prefixes = []
        for t in self.tasks:
            toks = tokenize(t.signature_line() + "\n    pass\n")
            prefixes.append(toks[: int(np.flatnonzero(toks[:, 0] == oc.TOKEN_CODES["INDENT"])[0]) + 1])
        self.prefix_len = np.array([len(p) for p in prefixes], dtype=np.int64)
        self.prefix = np.zeros((T, self.prefix_len.max(), 4), dtype=np.int32)
        for i, p in enumerate(prefixes):
            self.prefix[i, : len(p)] = p
        self.kinds = np.full((T, V.NUM_PARAMS), -1, dtype=np.int32)
        self.ret_kind = np.zeros(T, dtype=np.int32)
        enc_inputs, enc_expected, shown_in, shown_out = [], [], [], []
        fuel = np.full(T, self.config.fuel, dtype=np.int32)
        for i, task in enumerate(self.tasks):
            kinds = task.signature.kinds
            self.kinds[i, : len(kinds)] = [KIND_BY_NAME[k] for k in kinds]
            self.ret_kind[i] = KIND_BY_NAME[task.signature.ret]
            inputs, outputs = _examples(task, seed, n_tests, self.config)
            if self.fuel_scale is not None and task.reference is not None and inputs:
                need = max(task.reference_steps(inputs, self.config))
                fuel[i] = min(self.config.fuel, max(MIN_TASK_FUEL, math.ceil(self.fuel_scale * need)))
            enc_inputs.append(encode_tuples(inputs, kinds))
            enc_expected.append(encode_results(outputs, task.signature.ret))
            what = f"task {task.name!r}: an example"
            shown_in.append(_pad_rows(enc_inputs[-1], example_width, n_examples, what + " input"))
            shown_out.append(_pad_rows(enc_expected[-1], example_width, n_examples, what + " output"))
        fuel.setflags(write=False)   # (like the tests: the device copies are made once)
        self.task_fuel = None if self.fuel_scale is None else fuel   # (T,) int32 step budgets, or None
        self.inputs = Encoded.concat(enc_inputs)      # task t's tests are items t*M .. t*M + M - 1
        self.expected = Encoded.concat(enc_expected)
        self.examples = np.stack(shown_in)   # (T, E, W)
        self.outputs = np.stack(shown_out)   # (T, E, W_OUT)
        self._tensors: dict = {}
        self._slot_consts: dict = {}
        self._slot_out: dict = {}   # evaluate's token-slot buffers on a GPU: (device, stream, N, L) -> (slots, count)

    def __setstate__(self, d):
        d.setdefault("fuel_scale", None)   # a bank pickled before task budgets: config.fuel for every task
        d.setdefault("task_fuel", None)
        vars(self).update(d)

    @classmethod
    def from_names(cls, names: Sequence[str] | None = None, **kw) -> "TaskBank":
        """A bank of built-in tasks (all of them by default; a str is one name)."""
        if isinstance(names, str):
            names = [names]
        return cls([get_task(n) for n in (sorted(TASKS) if names is None else names)], **kw)

    def __len__(self):
        return len(self.tasks)

    # ---- device tables -----------------------------------------------------------------------
    def tensors(self, device) -> dict:
        """The bank's per-task arrays as torch tensors on `device` (made once per device)."""
        import torch
        device = torch.device(device)
        key = str(device)
        if key not in self._tensors:
            # copies: the tests' arrays are read-only (a checked batch cannot change), and tensors
            # cannot be (torch warns, and a write through one would change the bank)
            as_t = lambda a: torch.from_numpy(np.array(a, order="C")).to(device)  # noqa: E731
            self._tensors[key] = {
                "prefix": as_t(self.prefix), "prefix_len": as_t(self.prefix_len), "actions": as_t(_ACTION_TOKENS),
                "kinds": as_t(self.kinds), "ret_kind": as_t(self.ret_kind), "examples": as_t(self.examples),
                "outputs": as_t(self.outputs),
                # the tests as (words, offsets) device pairs, which the GPU scorer uses in place
                "inputs": (as_t(self.inputs.words), as_t(self.inputs.offsets)),
                "expected": (as_t(self.expected.words), as_t(self.expected.offsets)),
                "task_fuel": None if self.task_fuel is None else as_t(self.task_fuel)}
        return self._tensors[key]

    def slot_size(self, L: int) -> int:
        """Compiler tokens a body of L actions can need: the signature, the body, a NEWLINE,
        the DEDENTs of at most L + 1 open blocks and EOF."""
        return int(self.prefix.shape[1]) + 2 * L + 3

    def slot_tables(self, device, L: int) -> dict:
        """Constants of compiler_token_slots on `device` for bodies of L actions (made once)."""
        import torch
        key = (str(device), L)
        if key not in self._slot_consts:
            tc = oc.TOKEN_CODES
            # per action code (0: negative, 1 + a: action a, VOCAB_SIZE + 1: too large or past the
            # body's length): (goes on, compiler kind, value, is NEWLINE, INDENT - DEDENT, ends a
            # line: NEWLINE, INDENT or DEDENT, after which the tail adds no NEWLINE)
            act = np.zeros((V.VOCAB_SIZE + 2, 6), np.int32)
            act[1: V.VOCAB_SIZE + 1, 0] = 1
            act[1: V.VOCAB_SIZE + 1, 1:3] = _ACTION_TOKENS
            act[1 + V.END] = 0                                     # END stops the body
            act[1:, 3] = np.append(act[1:-1, 1] == tc["NEWLINE"], 0)
            act[1:, 4] = np.append((act[1:-1, 1] == tc["INDENT"]).astype(np.int32) - (act[1:-1, 1] == tc["DEDENT"]), 0)
            act[1:, 5] = act[1:, 3] | (act[1:, 4] != 0)
            act[1 + V.END, 1:] = 0
            P = int(self.prefix.shape[1])
            as_t = lambda a, dt=torch.int32: torch.as_tensor(np.ascontiguousarray(a), dtype=dt).to(device)  # noqa: E731
            self._slot_consts[key] = {
                "act": as_t(act), "pos": as_t(np.arange(L)[None, :], torch.int64),
                "col": as_t(np.arange(1, L + 1)[None, :, None]), "one": as_t(np.ones((1, 1))),
                "j": as_t(np.arange(self.slot_size(L))[None, :]), "T0": as_t(P + L),
                # the tail entries after the body: NEWLINE, DEDENT, EOF, zeros: (kind, value) and
                # line = end_line * lmul + ladd, col = body_len * cmul + cadd
                "tail_kv": as_t(np.array([[tc["NEWLINE"], 0], [tc["DEDENT"], 0], [tc["EOF"], 0], [0, 0]])[None]),
                "lmul": as_t(np.array([[1, 1, 1, 0]])), "ladd": as_t(np.array([[-1, 0, 0, 0]])),
                "cmul": as_t(np.array([[1, 0, 0, 0]])), "cadd": as_t(np.array([[1, 1, 1, 0]])),
                "P": P, "tail": P + L}
            if torch.device(device).type == "cuda":
                self._native_slots_module(torch.device(device))
        return self._slot_consts[key]

    @staticmethod
    def _native_slots_module(device) -> bool:
        """Whether the GPU scorer builds its token slots with the native kernel (envs/token_slots.py):
        CuPy is there. Loads the kernel's module on `device` (its first load syncs: a constants
        check), so the envs' prepare, which makes the slot tables, makes it too."""
        from .token_slots import cuda_available
        if not cuda_available():
            return False
        import torch
        from . import grammar_cuda
        grammar_cuda.kernels(torch.cuda.current_device() if device.index is None else device.index)
        return True

    def _device_token_slots(self, bodies, lengths, task_ids, active):
        """compiler_token_slots' slots of the active rows on a CUDA device, by one native kernel
        (the torch ops, over every row, where CuPy is missing). The output buffers are reused by
        the next call on the same stream and shape: evaluate_tasks reads them first, in stream order."""
        import torch
        dev = bodies.device
        if not self._native_slots_module(dev):
            return self.compiler_token_slots(bodies, lengths, task_ids)
        from .token_slots import token_slots
        n, L = bodies.shape
        key = (dev, torch.cuda.current_stream(dev).cuda_stream, n, L)
        out = self._slot_out.get(key)
        if out is None:   # a few shapes at once (say a training and an evaluation env on one bank)
            if len(self._slot_out) >= 4:
                self._slot_out.pop(next(iter(self._slot_out)))
            out = (torch.empty((n, self.slot_size(L), 4), dtype=torch.int32, device=dev),
                   torch.empty(n, dtype=torch.int64, device=dev))
            self._slot_out[key] = out
        from vramgym.vm.cuda import keep_alive
        keep_alive(out)   # a graph captured now writes them at every replay: it holds them, not just the cache
        return token_slots(self, bodies, lengths, task_ids, active, out=out)

    def compiler_token_slots(self, bodies, lengths, task_ids):
        """Compiler token arrays of N bodies, one fixed-size slot per body, as torch ops on the
        bodies' device (no host sync, no Python loop per program): the signature's tokens, the
        body's, then NEWLINE if missing, the DEDENTs that close every open block and EOF. Lines
        are exact; columns count tokens (vocab.to_compiler_tokens gives the rendered source's
        exact columns, for messages). A body ends at its first END or out-of-range action.

        bodies (N, L), lengths (N,), task_ids (N,): int tensors. Returns ((N, S, 4) int32,
        (N,) int64 tokens used per slot), S = slot_size(L).

        Written for the GPU (each op a launch; ~50 of them): each row's entries (its signature's
        tokens, its body's, and the four tail entries NEWLINE, DEDENT, EOF, zeros) are laid out
        in one table and every slot picks its entry with one gather."""
        import torch
        i32 = torch.int32
        t = self.tensors(bodies.device)
        bodies, lengths, task_ids = bodies.long(), lengths.long(), task_ids.long()
        n, L = bodies.shape
        c = self.slot_tables(bodies.device, L)
        code = bodies.clamp(-1, V.VOCAB_SIZE).add_(1).masked_fill_(c["pos"] >= lengths[:, None], V.VOCAB_SIZE + 1)
        tok = c["act"].index_select(0, code.reshape(-1)).reshape(n, L, 6)   # (index_select: faster on the CPU)
        live = tok[..., 0].cumprod(1, dtype=i32)                  # 1 up to the first stop
        body_len = live.sum(1, dtype=i32)
        nl_d = tok[..., 3:5] * live[..., None]                    # NEWLINE, INDENT - DEDENT within the body
        sums = nl_d.sum(1, dtype=i32)
        nl = nl_d[..., 0]
        line = torch.cumsum(nl, 1, dtype=i32).sub_(nl).add_(2)   # line of each body token
        # a NEWLINE is added unless the body is empty or ends with a NEWLINE, INDENT or DEDENT
        # (`... \n DEDENT END`, which the mask allows; an INDENT or DEDENT not after a NEWLINE
        # is an error either way)
        add_nl = 1 - torch.cat([c["one"].expand(n, 1), tok[..., 5]], 1).gather(1, body_len.long()[:, None])[:, 0]
        close = (sums[:, 1] + 1).clamp_(min=0)                    # the DEDENTs that close every block
        end_line = (sums[:, 0] + add_nl).add_(2)                  # line of the DEDENTs and EOF
        plen = t["prefix_len"][task_ids].to(i32)
        nb = plen + body_len                                      # slot of the NEWLINE (or the tail)
        nba = nb + add_nl
        count = nba + close + 1
        # the entries of each row: prefix (P), body (L), then NEWLINE, DEDENT, EOF, zeros
        body = torch.cat([tok[..., 1:3], line[..., None], c["col"].expand(n, L, 1)], 2)
        tail = torch.cat([c["tail_kv"].expand(n, 4, 2), (end_line[:, None] * c["lmul"] + c["ladd"])[..., None],
                          (body_len[:, None] * c["cmul"] + c["cadd"])[..., None]], 2)
        entries = torch.cat([t["prefix"].index_select(0, task_ids), body, tail], 1)
        # entry of slot j (int32 until the gather: these are the widest ops, (n, S)): j in the
        # prefix, P + j - plen in the body, then the tail's NEWLINE at j = nb when added (j < nba),
        # DEDENT (tail + 1) up to nba + close, EOF (tail + 2) there and zeros (tail + 3) after it
        j, P, T0 = c["j"], c["P"], c["tail"]
        in_tail = torch.where(j < nba[:, None], c["T0"], (j - (nba + close - 2 - T0)[:, None]).clamp_(T0 + 1, T0 + 3))
        in_text = torch.where(j < plen[:, None], j, j + (P - plen)[:, None])
        idx = torch.where(j < nb[:, None], in_text, in_tail).long()
        out = entries.gather(1, idx[..., None].expand(n, idx.shape[1], 4))
        return out, count.long()

    def compiler_tokens(self, bodies: np.ndarray, lengths: np.ndarray, task_ids: np.ndarray):
        """The slots of `compiler_token_slots`, packed for `compile_tokens`: ((R, 4) int32, (N+1,) int64)."""
        import torch
        slots, count = self.compiler_token_slots(torch.as_tensor(np.asarray(bodies)), torch.as_tensor(np.asarray(lengths)),
                                                 torch.as_tensor(np.asarray(task_ids)))
        slots, count = slots.numpy(), count.numpy()
        offsets = np.zeros(len(count) + 1, dtype=np.int64)
        np.cumsum(count, out=offsets[1:])
        return slots[np.arange(slots.shape[1])[None, :] < count[:, None]], offsets

    # ---- scoring ---------------------------------------------------------------------------------
    def evaluate(self, bodies, lengths, task_ids, active=None):
        """Compile and run N candidate bodies on their tasks' tests: torch tensors in, torch
        tensors out on the same device. Returns (compiled (N,) bool, tests passed (N,) int64,
        executed steps summed over the tests (N,) int64); rows where `active` is False are not
        compiled or run and give (False, 0, 0). On a CUDA device everything stays there
        (one native kernel builds the active rows' token slots, envs/token_slots.py, and
        vm.cuda.evaluate_tasks runs them: the tests live on the device, nothing waits for the host); on
        the CPU, the native builder (or the torch ops where its library is not built) and the CPU
        backend run the active rows (vm.evaluate.score_token_rows: evaluate_tasks_cpu unchecked), each distinct candidate
        once (distinct_candidates: repeats take its results). The CUDA path runs every row: there
        the grouping would need a host sync."""
        import torch
        _check_evaluate_args(bodies, lengths, task_ids, active)
        dev = bodies.device
        if dev.type == "cuda":
            from vramgym.vm import cuda
            t = self.tensors(dev)
            slots, count = self._device_token_slots(bodies, lengths, task_ids, active)
            passed, steps, ok = cuda.evaluate_tasks(slots, count, task_ids, active, t["inputs"], t["expected"],
                                                    self.n_tests, t["ret_kind"], config=self.config,
                                                    code_cap=code_cap_for(slots.shape[1]), task_fuel=t["task_fuel"])
            return ok, passed.long(), steps.long()
        # CPU: only the active rows are turned into tokens (a host sync costs nothing here), by the
        # native builder where its library is built (one pass per row; the torch ops cost more
        # than compiling and running the programs), else by the torch ops. numpy over the
        # tensors' memory around them: a single env scores one row, where torch's cost per op
        # outweighed compiling and running it
        from vramgym.vm.evaluate import score_token_rows
        from . import grammar_native
        host = lambda x: x.cpu().numpy()  # noqa: E731  (a view on the CPU)
        n = bodies.shape[0]
        ok, passed, steps = np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        rows = np.arange(n) if active is None else np.flatnonzero(host(active))
        if len(rows):
            b, lens, task = (np.ascontiguousarray(host(x)[rows], dtype=np.int64) for x in (bodies, lengths, task_ids))
            # A candidate that another active row repeats (same task, same body) runs once: a
            # policy that has learned a task writes the same program in many envs
            first, inverse = distinct_candidates(b, lens, task)
            if len(first) < len(rows):
                b, lens, task = b[first], lens[first], task[first]
            else:
                inverse = None
            # The scorer of evaluate_tasks_cpu without its argument checks: the tests are the bank's
            # own, the slots are built just now; only the task ids come from the caller.
            if int(task.min()) < 0 or int(task.max()) >= len(self):
                raise ValueError(f"task_ids of active rows must be in [0, {len(self)})")
            if grammar_native.available():
                from .token_slots import token_slots_cpu
                slots = np.empty((len(task), self.slot_size(b.shape[1]), 4), dtype=np.int32)
                count = np.empty(len(task), dtype=np.int64)
                token_slots_cpu(self, b, lens, task, None, slots, count)
            else:
                slots, count = (x.numpy() for x in self.compiler_token_slots(*map(torch.from_numpy, (b, lens, task))))
            p, s, o = score_token_rows(
                int_array(slots, "slots", INT32_MIN, INT32_MAX, np.int32, ndim=3), count.astype(np.int64, copy=False),
                task, np.ones(len(task), dtype=bool),
                int_array(self.ret_kind, "ret_kind", oc.KIND_INT, oc.KIND_LIST, np.int32), self.inputs,
                self.expected, self.n_tests, self.config, code_cap_for(slots.shape[1]), self.task_fuel)
            if inverse is not None:
                o, p, s = o[inverse], p[inverse], s[inverse]
            ok[rows], passed[rows], steps[rows] = o, p, s
        ok, passed, steps = torch.from_numpy(ok), torch.from_numpy(passed), torch.from_numpy(steps)
        if dev.type != "cpu":
            ok, passed, steps = ok.to(dev), passed.to(dev), steps.to(dev)
        return ok, passed, steps

    def scores(self, ok, passed, steps, length) -> Scores:
        """Scores from `evaluate`'s counts (numpy arrays or torch tensors alike)."""
        m = self.n_tests
        f64 = (lambda x: x.astype(np.float64)) if isinstance(passed, np.ndarray) else (lambda x: x.double())
        return Scores(ok, f64(passed) / m, ok & (passed == m), f64(steps) / m, length)

    def score(self, bodies: np.ndarray, task_ids: np.ndarray, lengths: np.ndarray | None = None) -> Scores:
        """Compile and run N candidate bodies on their tasks' tests in one batch (numpy in and out).

        bodies: (N, L) action ids (a body ends at its first END or id out of the vocabulary, or
        at L, and is scored as written up to there); task_ids: (N,) in [0, len(tasks));
        lengths: (N,) in [0, L].
        Integer arrays only (TypeError for floats and bools: nothing is truncated)."""
        import torch
        bodies = int_array(bodies, "bodies", -(2**63), 2**63 - 1, np.int64, ndim=2)
        n, L = bodies.shape
        task_ids = int_array(task_ids, "task_ids", 0, len(self.tasks) - 1, np.int64)
        if lengths is None:
            is_end = bodies == V.END
            lengths = np.where(is_end.any(axis=1), is_end.argmax(axis=1), L) if L else np.zeros(n, np.int64)
        lengths = int_array(lengths, "lengths", 0, L, np.int64)
        if len(task_ids) != n or len(lengths) != n:
            raise ValueError(f"task_ids and lengths need one value per body ({n}), got {len(task_ids)} and {len(lengths)}")
        ok, passed, steps = (x.numpy() for x in self.evaluate(torch.from_numpy(bodies), torch.as_tensor(lengths),
                                                               torch.from_numpy(task_ids)))
        return self.scores(ok, passed, steps, np.asarray(lengths))
