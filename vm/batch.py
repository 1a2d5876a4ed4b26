"""The batch API: many programs x many inputs per call, arrays in and arrays out.

    programs = compile_batch(sources).to_programs(entry=0)    # each entry's return kind
    inputs = encode_tuples(arg_tuples, ("int", "int"))
    result = run_batch(programs, inputs)                   # every program on every input
    result.status, result.value, result.steps              # (N * M,) int32 each

Runs are (program, input) pairs; by default the cross product, program-major. With `expected`
(one encoded value per input), `passed` says which runs returned exactly that value, so the
environments can score candidates without decoding results in Python.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from . import cpu
from . import opcodes as oc
from .backends import get_backend
from .program import Program, code_words
from .values import KIND_BY_NAME, Encoded, check_bool, int_array, offsets_array, owned


@dataclass(frozen=True)
class VMConfig:
    """Per-run resource limits (every backend honours them identically)."""

    fuel: int = oc.DEFAULT_FUEL
    """Executed instructions before the run traps out_of_fuel."""
    max_depth: int = oc.DEFAULT_MAX_DEPTH
    """Nested calls before the run traps recursion (the entry call is depth 0)."""
    heap_size: int = oc.DEFAULT_HEAP
    """Ints of list memory per run (never freed during the run)."""
    max_lists: int = oc.DEFAULT_MAX_LISTS
    """Lists created per run, arguments included."""
    stack_size: int = oc.DEFAULT_STACK
    """Values (locals and operands of all frames) per run."""

    def __post_init__(self):
        bounds = {"fuel": (1, 2**31 - 1), "max_depth": (0, 1 << 20), "heap_size": (0, 1 << 28),
                  "max_lists": (0, 1 << 24), "stack_size": (1, 1 << 24)}
        for name, (lo, hi) in bounds.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
                raise ValueError(f"VMConfig.{name} must be an int in [{lo}, {hi}], got {v!r}")

    def as_array(self) -> np.ndarray:
        return np.array([self.fuel, self.max_depth, self.heap_size, self.max_lists, self.stack_size], dtype=np.int32)


_DEFAULT_CONFIG = VMConfig()  # (frozen: one instance serves every call that gives none)

UNKNOWN_KINDS = -2  # a ProgramBatch.params row of these: the entry's kinds are unknown


@dataclass(frozen=True, eq=False)
class ProgramBatch:
    """N programs: code words (W,) uint32 with offsets (N + 1,) int64, the entry function index
    (N,) int32, the entry's result kind (N,) int32 (opcodes.KIND_*), and optionally the entry's
    parameter kinds (N, MAX_PARAMS + 1) int8 (KIND_*, -1 past the last), against which run_batch
    checks every input: a run whose input has other kinds traps bad_input. from_programs fills
    them when every program's signatures are declared (not for Program.from_code's guesses), and
    CompiledBatch.to_programs from the compiler's signatures; a row of UNKNOWN_KINDS is not
    checked (a program that failed to compile, or an entry it does not have).
    Checked on construction (ValueError/TypeError), so the core never reads out of bounds; code
    words may also be given as int32 views (negative values). Immutable: the arrays are the
    batch's own, read-only (copies where they shared the caller's memory), and a changed batch
    is a new one (`dataclasses.replace(batch, params=...)`, checked again)."""

    code: np.ndarray
    offsets: np.ndarray
    entry: np.ndarray
    ret_kind: np.ndarray
    params: np.ndarray | None = None

    def __post_init__(self):
        given = (self.code, self.offsets, self.entry, self.ret_kind, self.params)
        code = code_words(self.code, "code")
        offsets = offsets_array(self.offsets, len(code), "code-word", "len(code)")
        n = len(offsets) - 1
        entry = int_array(self.entry, "entry", -(2**31), 2**31 - 1, np.int32)
        kinds = (oc.KIND_INT, oc.KIND_BOOL, oc.KIND_LIST)  # contiguous codes: the range check suffices
        ret_kind = int_array(self.ret_kind, "ret_kind", min(kinds), max(kinds), np.int32)
        if len(entry) != n or len(ret_kind) != n:
            raise ValueError(f"entry and ret_kind need one value per program ({n}), got {len(entry)} and "
                             f"{len(ret_kind)}")
        params = None
        if self.params is not None:
            p = np.asarray(self.params)
            if p.shape != (n, oc.LIMITS["MAX_PARAMS"] + 1) or not np.issubdtype(p.dtype, np.integer):
                raise ValueError(f"params must be an integer array of shape ({n}, {oc.LIMITS['MAX_PARAMS'] + 1})")
            unknown = (p == UNKNOWN_KINDS).all(axis=1)
            known = p[~unknown]   # (-1 and the kinds are one range of codes: a range check, not isin)
            if known.size and (int(known.min()) < -1 or int(known.max()) > max(kinds)):
                raise ValueError(f"params values must be opcodes.KIND_* or -1 (or a whole row of {UNKNOWN_KINDS})")
            used = known >= 0  # the kinds, then -1 to the end (the last position always -1)
            if (used[:, 1:] > used[:, :-1]).any() or used[:, -1].any():
                raise ValueError(f"params rows must be at most {oc.LIMITS['MAX_PARAMS']} kinds followed by -1s")
            params = np.ascontiguousarray(p, dtype=np.int8)
        for name, arr, g in zip(("code", "offsets", "entry", "ret_kind", "params"),
                                (code, offsets, entry, ret_kind, params), given):
            object.__setattr__(self, name, None if arr is None else owned(arr, g))

    def __reduce__(self):  # unpickling checks again
        return ProgramBatch, (self.code, self.offsets, self.entry, self.ret_kind, self.params)

    @classmethod
    def build(cls, code, offsets, entry=0, ret_kind="int") -> "ProgramBatch":
        code = np.asarray(code)
        offsets = np.asarray(offsets)
        n = len(offsets) - 1 if offsets.ndim == 1 else -1
        if n < 0:
            raise ValueError("offsets must be a 1-D array of N + 1 values from 0 to len(code)")
        if isinstance(ret_kind, str):
            if ret_kind not in KIND_BY_NAME:
                raise ValueError(f"unknown ret_kind {ret_kind!r}; choose one of {', '.join(KIND_BY_NAME)}")
            ret_kind = KIND_BY_NAME[ret_kind]
        try:
            entry = np.broadcast_to(np.asarray(entry), (n,))
            ret = np.broadcast_to(np.asarray(ret_kind), (n,))
        except ValueError:
            raise ValueError(f"entry and ret_kind must be scalars or have one value per program ({n})") from None
        return cls(code, offsets, entry, ret)

    @classmethod
    def from_programs(cls, programs, entry: str) -> "ProgramBatch":
        programs = list(programs)
        for p in programs:
            if not isinstance(p, Program):
                raise TypeError(f"from_programs takes vramgym Programs, got {type(p).__name__}")
        fns = [p.function(entry) for p in programs]
        typed = all(p.typed for p in programs)   # then the batch carries the entries' parameter kinds
        index = []
        for f in fns:   # (a hand-made Program's Function may name any kind)
            if f.ret not in KIND_BY_NAME or not all(k in KIND_BY_NAME for k in f.params):
                raise ValueError(f"function {f.name!r} has kinds {f.params!r} -> {f.ret!r}; each must be one "
                                 f"of {sorted(KIND_BY_NAME)}")
            if typed and len(f.params) > oc.LIMITS["MAX_PARAMS"]:   # (untyped: from_code's guess from a
                raise ValueError(f"function {f.name!r} has {len(f.params)} parameters; the VM takes at most "  # FUNC
                                 f"{oc.LIMITS['MAX_PARAMS']}")   # word, which traps bad_bytecode when it runs)
            try:
                i = None if isinstance(f.index, (bool, np.bool_)) else operator.index(f.index)
            except TypeError:
                i = None
            if i is None or not -(2**31) <= i < 2**31:
                raise ValueError(f"function {f.name!r} has index {f.index!r}; an entry index is an int32")
            index.append(i)
        # Every array below is made here from values just checked, so the batch skips
        # __post_init__'s scans (they cost more than running a small program on a few inputs).
        words = [p.code if type(p.code) is np.ndarray and p.code.dtype == np.uint32 and p.code.ndim == 1
                 else code_words(p.code, "code") for p in programs]   # (one dtype: a mix would concatenate as int64)
        lengths = [len(w) for w in words]
        if lengths and max(lengths) > 2**31 - 1:   # the core takes a program's length as int32
            raise ValueError("a program of more than 2**31 - 1 code words")
        offsets = np.fromiter(accumulate(lengths, initial=0), dtype=np.int64, count=len(words) + 1)
        code = (np.array(words[0]) if len(words) == 1 else   # (a copy, even of one: the batch owns it)
                np.concatenate(words) if words else np.zeros(0, np.uint32))
        entry = np.array(index, dtype=np.int32)
        ret_kind = np.array([KIND_BY_NAME[f.ret] for f in fns], dtype=np.int32)
        params = None
        if typed:
            width = oc.LIMITS["MAX_PARAMS"] + 1
            params = np.array([[KIND_BY_NAME[k] for k in f.params] + [-1] * (width - len(f.params)) for f in fns],
                              dtype=np.int8).reshape(len(fns), width)
        return cls._made(code, offsets, entry, ret_kind, params)

    @classmethod
    def _made(cls, code, offsets, entry, ret_kind, params) -> "ProgramBatch":
        """A batch of arrays that the caller made itself, fresh, of the right dtypes and shapes
        and with values that pass __post_init__'s checks: stored read-only, not scanned again."""
        batch = object.__new__(cls)
        for name, arr in (("code", code), ("offsets", offsets), ("entry", entry), ("ret_kind", ret_kind),
                          ("params", params)):
            if arr is not None:
                arr.flags.writeable = False
            object.__setattr__(batch, name, arr)
        return batch

    def __len__(self):
        return len(self.offsets) - 1


@dataclass
class BatchResult:
    """Per run (R,): status (0 ok, else a trap code), value (int/bool value, or the length of a
    list result), steps (executed instructions); passed (R,) bool when expected values were
    given. List results, ragged (None when out_cap is 0): run r's first out_cap elements are
    out_words[out_off[r]:out_off[r + 1]] (int32, and int64 offsets (R + 1,) from 0; no elements
    for other runs). `out_list` is the same as an (R, out_cap) int32 matrix, zeros past each list
    (made on first use: a batch of mostly int results writes no rows)."""

    status: np.ndarray
    value: np.ndarray
    steps: np.ndarray
    passed: np.ndarray | None = None
    out_words: np.ndarray | None = None
    out_off: np.ndarray | None = None
    out_cap: int = 0

    @property
    def out_list(self) -> np.ndarray | None:
        if self.out_off is None:
            return None
        made = self.__dict__.get("_out_list")
        if made is None or made[0] is not self.out_words or made[1] is not self.out_off:
            lens = np.diff(self.out_off)
            rows = np.zeros((len(lens), self.out_cap), dtype=np.int32)
            rows[np.arange(self.out_cap) < lens[:, None]] = self.out_words
            made = self.__dict__["_out_list"] = (self.out_words, self.out_off, rows)
        return made[2]

    def out_row(self, r: int) -> np.ndarray:
        """Run r's list elements (the first out_cap), a view of out_words."""
        return self.out_words[self.out_off[r]:self.out_off[r + 1]]

    @classmethod
    def from_rows(cls, status, value, steps, passed, out_list: np.ndarray | None, listed: np.ndarray) -> "BatchResult":
        """A result from list results as (R, out_cap) rows (the GPU's): listed (R,) bool marks the
        runs that returned a list (status 0 and a list-returning program); each gives its first
        min(value, out_cap) elements."""
        if out_list is None:
            return cls(status, value, steps, passed)
        cap = out_list.shape[1]
        lens = np.where(listed, np.minimum(value, cap), 0).astype(np.int64)
        off = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=off[1:])
        words = np.ascontiguousarray(out_list[np.arange(cap) < lens[:, None]], dtype=np.int32)
        return cls(status, value, steps, passed, words, off, cap)

    @classmethod
    def concat(cls, parts: list["BatchResult"]) -> "BatchResult":
        """The results of consecutive parts of one batch's runs (same out_cap), as one."""
        cat = lambda name: (None if getattr(parts[0], name) is None
                            else np.concatenate([getattr(p, name) for p in parts]))
        off = None
        if parts[0].out_off is not None:
            off = np.zeros(1 + sum(len(p.out_off) - 1 for p in parts), dtype=np.int64)
            at, base = 1, 0
            for p in parts:
                off[at:at + len(p.out_off) - 1] = p.out_off[1:] + base
                at += len(p.out_off) - 1
                base += int(p.out_off[-1])
        return cls(cat("status"), cat("value"), cat("steps"), cat("passed"), cat("out_words"), off, parts[0].out_cap)

    def drop_lists(self, runs: np.ndarray) -> None:
        """Take the list elements of `runs` (indices) out (their runs trapped after all)."""
        if self.out_off is None or not len(runs):
            return
        lens = np.diff(self.out_off)
        gone = np.zeros(len(lens), dtype=bool)
        gone[runs] = True
        self.out_words = self.out_words[~np.repeat(gone, lens)]
        lens[gone] = 0
        off = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=off[1:])
        self.out_off = off


def cross_runs(n_prog: int, n_in: int) -> tuple[np.ndarray, np.ndarray]:
    """(run_prog, run_in) of every program on every input, program-major."""
    return (np.repeat(np.arange(n_prog, dtype=np.int32), n_in),
            np.tile(np.arange(n_in, dtype=np.int32), n_prog))


def run_batch(programs: ProgramBatch, inputs: Encoded, runs: tuple[np.ndarray, np.ndarray] | None = None, *,
              expected: Encoded | None = None, config: VMConfig | None = None, out_cap: int | None = None,
              backend: str = "cpu", nthreads: int | None = None, lockstep: bool = True) -> BatchResult:
    """Run programs on inputs. `runs` = (run_prog, run_in) index arrays, default the cross
    product. `out_cap` (default: 256 if any program returns a list, else 0) bounds the list
    elements copied out per run; `value` always holds the full length. `lockstep` (CPU): run
    consecutive runs of one program 32 at a time in lockstep (False: one by one; both give
    identical results)."""
    if not isinstance(programs, ProgramBatch):
        raise TypeError(f"programs must be a ProgramBatch, got {type(programs).__name__}")
    check_bool(lockstep, "lockstep")
    for name, e in (("inputs", inputs), ("expected", expected)):
        if not isinstance(e, Encoded) and not (name == "expected" and e is None):
            raise TypeError(f"{name} must be an Encoded batch (vramgym.vm.encode_tuples), got {type(e).__name__}")
    config = _DEFAULT_CONFIG if config is None else config
    if not isinstance(config, VMConfig):
        raise TypeError(f"config must be a VMConfig, got {type(config).__name__}")
    nthreads = check_threads(nthreads)
    if runs is None:
        runs = cross_runs(len(programs), len(inputs))
    if not (isinstance(runs, (tuple, list)) and len(runs) == 2 or
            isinstance(runs, np.ndarray) and runs.ndim == 2 and len(runs) == 2):
        raise TypeError("runs must be a pair (run_prog, run_in) of index arrays, or a (2, R) array")
    run_prog = int_array(runs[0], "run_prog", -(2**31), 2**31 - 1, np.int32)
    run_in = int_array(runs[1], "run_in", -(2**31), 2**31 - 1, np.int32)
    if run_prog.shape != run_in.shape:
        raise ValueError("run_prog and run_in must be 1-D arrays of the same length")
    if expected is not None and len(expected) != len(inputs):
        raise ValueError("expected needs one value per input")
    if out_cap is None:
        out_cap = 256 if np.any(programs.ret_kind == oc.KIND_LIST) else 0
    if isinstance(out_cap, bool) or not isinstance(out_cap, (int, np.integer)) or not 0 <= out_cap <= MAX_OUT_CAP:
        raise ValueError(f"out_cap must be an int in [0, {MAX_OUT_CAP}], got {out_cap!r}")
    return run_checked(get_backend(backend), programs, inputs, run_prog, run_in, expected=expected, config=config,
                       out_cap=int(out_cap), nthreads=nthreads, lockstep=lockstep)


def run_checked(impl, programs: ProgramBatch, inputs: Encoded, run_prog: np.ndarray, run_in: np.ndarray, *,
                expected: Encoded | None, config: VMConfig, out_cap: int, nthreads: int | None,
                lockstep: bool = True) -> BatchResult:
    """run_batch on backend module `impl` with arguments it has checked (int32 run arrays of one
    length, an int out_cap, nthreads from check_threads): for callers that made them themselves
    (execute), whose few microseconds of checks would cost more than a small program's runs."""
    res = impl.run_batch(programs, inputs, run_prog, run_in, expected, config, out_cap, nthreads, lockstep=lockstep)
    if programs.params is not None and not getattr(impl, "CHECKS_KINDS", False):
        _trap_kind_mismatches(res, programs, inputs, run_prog, run_in)
    return res


# out_list holds (runs, out_cap) int32; more than a run's whole list memory is never needed.
MAX_OUT_CAP = 1 << 28


def check_threads(nthreads):
    """nthreads of the batch calls: None (VRAMGYM_THREADS, else one per core), 0 (one per core)
    or a count up to cpu.MAX_THREADS; TypeError/ValueError otherwise."""
    if nthreads is None:
        return None
    if isinstance(nthreads, bool) or not isinstance(nthreads, (int, np.integer)):
        raise TypeError(f"nthreads must be None or an int, not {type(nthreads).__name__}")
    if not 0 <= nthreads <= cpu.MAX_THREADS:
        raise ValueError(f"nthreads must be None or 0 (one per core) or in 1..{cpu.MAX_THREADS}, got {nthreads}")
    return int(nthreads)


def input_kinds(inputs: Encoded) -> np.ndarray:
    """(len(inputs), MAX_PARAMS + 1) int8: the kind word of each encoded value, -1 past the last.
    Vectorized over inputs, one step per parameter position. Malformed inputs get whatever
    their words say (the VM traps them bad_input anyway)."""
    width = oc.LIMITS["MAX_PARAMS"] + 1
    n = len(inputs)
    kinds = np.full((n, width), -1, dtype=np.int8)
    words = inputs.words
    if not len(words):
        return kinds
    pos, end = inputs.offsets[:-1].copy(), inputs.offsets[1:]
    for k in range(width):
        live = np.flatnonzero(pos + 1 < end)
        if not len(live):
            break
        kind = words[pos[live]]
        kinds[live, k] = np.where((kind >= 0) & (kind < 127), kind, 127)
        size = np.where(kind == oc.KIND_LIST, 2 + np.maximum(words[pos[live] + 1], 0).astype(np.int64), 2)
        pos[live] += size
    return kinds


def _kind_words(kinds: np.ndarray, width: int) -> np.ndarray:
    """The first `width` positions of (M, MAX_PARAMS + 1) int8 kind rows as (M, ceil(width / 8))
    int64 words (padded with -1), equal exactly where those positions are equal."""
    w8 = -(-width // 8) * 8
    out = np.full((len(kinds), w8), -1, dtype=np.int8)
    out[:, :width] = kinds[:, :width]
    return out.view(np.int64)


def _trap_kind_mismatches(res: BatchResult, programs: ProgramBatch, inputs: Encoded, run_prog, run_in) -> None:
    """Runs whose input's kinds differ from the entry's parameter kinds trap bad_input (the VM
    sees only the argument count: an int given for a list would be taken as a list reference)."""
    ok = (run_prog >= 0) & (run_prog < len(programs)) & (run_in >= 0) & (run_in < len(inputs))
    r = np.flatnonzero(ok)
    r = r[programs.params[run_prog[r], 0] != UNKNOWN_KINDS]
    if not len(r):
        return
    # Every entry has at most P parameters, so position P is -1 in every row of params, and an input
    # with more values differs there: the first P + 1 positions decide (one word for P < 8).
    known = programs.params[programs.params[:, 0] != UNKNOWN_KINDS]
    width = int((known >= 0).sum(axis=1).max()) + 1 if len(known) else 1
    a = _kind_words(input_kinds(inputs), width)[run_in[r]]
    b = _kind_words(programs.params, width)[run_prog[r]]
    bad = r[(a != b).any(axis=1)]
    if len(bad):
        res.status[bad] = oc.TRAP_CODES["bad_input"]
        res.value[bad] = 0
        res.steps[bad] = 0
        if res.passed is not None:
            res.passed[bad] = False
        res.drop_lists(bad)
