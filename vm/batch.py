"""The batch API: many programs x many inputs per call, arrays in and arrays out.

    programs = compile_batch(sources).to_programs(entry=0, ret_kind="int")
    inputs = encode_tuples(arg_tuples, ("int", "int"))
    result = run_batch(programs, inputs)                   # every program on every input
    result.status, result.value, result.steps              # (N * M,) int32 each

Runs are (program, input) pairs; by default the cross product, program-major. With `expected`
(one encoded value per input), `passed` says which runs returned exactly that value, so the
environments can score candidates without decoding results in Python.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import opcodes as oc
from .backends import get_backend
from .values import KIND_BY_NAME, Encoded


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


@dataclass
class ProgramBatch:
    """N programs: code words (W,) uint32 with offsets (N + 1,) int64, the entry function index
    (N,) int32 and the entry's result kind (N,) int32 (opcodes.KIND_*)."""

    code: np.ndarray
    offsets: np.ndarray
    entry: np.ndarray
    ret_kind: np.ndarray

    @classmethod
    def build(cls, code, offsets, entry=0, ret_kind="int") -> "ProgramBatch":
        code = np.ascontiguousarray(code, dtype=np.uint32)
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        n = len(offsets) - 1
        if n < 0 or offsets[0] != 0 or offsets[-1] != len(code) or np.any(np.diff(offsets) < 0):
            raise ValueError("offsets must be non-decreasing from 0 to len(code)")
        if isinstance(ret_kind, str):
            ret_kind = KIND_BY_NAME[ret_kind]
        entry = np.ascontiguousarray(np.broadcast_to(np.asarray(entry, dtype=np.int32), (n,)))
        ret = np.ascontiguousarray(np.broadcast_to(np.asarray(ret_kind, dtype=np.int32), (n,)))
        return cls(code, offsets, entry, ret)

    @classmethod
    def from_programs(cls, programs, entry: str) -> "ProgramBatch":
        fns = [p.function(entry) for p in programs]
        lengths = [len(p.code) for p in programs]
        offsets = np.zeros(len(programs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        code = np.concatenate([p.code for p in programs]) if programs else np.zeros(0, np.uint32)
        return cls.build(code, offsets, [f.index for f in fns], [KIND_BY_NAME[f.ret] for f in fns])

    def __len__(self):
        return len(self.offsets) - 1


@dataclass
class BatchResult:
    """Per run (R,): status (0 ok, else a trap code), value (int/bool value, or the length of a
    list result), steps (executed instructions); passed (R,) bool when expected values were
    given; out_list (R, out_cap) int32 holding list results' first out_cap elements."""

    status: np.ndarray
    value: np.ndarray
    steps: np.ndarray
    passed: np.ndarray | None = None
    out_list: np.ndarray | None = None


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
    config = config or VMConfig()
    if runs is None:
        runs = cross_runs(len(programs), len(inputs))
    run_prog = np.ascontiguousarray(runs[0], dtype=np.int32)
    run_in = np.ascontiguousarray(runs[1], dtype=np.int32)
    if run_prog.shape != run_in.shape or run_prog.ndim != 1:
        raise ValueError("run_prog and run_in must be 1-D arrays of the same length")
    if expected is not None and len(expected) != len(inputs):
        raise ValueError("expected needs one value per input")
    if out_cap is None:
        out_cap = 256 if np.any(programs.ret_kind == oc.KIND_LIST) else 0
    return get_backend(backend).run_batch(programs, inputs, run_prog, run_in, expected, config, out_cap, nthreads,
                                          lockstep=lockstep)
