"""execute(): run programs on argument tuples and get Python values back (or Traps).

A thin shell over the batch API: it encodes the arguments, runs every program on every tuple
in one batch call, and decodes the results."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache, partial

import numpy as np

from . import opcodes as oc
from .backends import get_backend
from .batch import ProgramBatch, VMConfig, check_threads, run_checked
from .program import Program
from .values import KIND_BY_NAME, Encoded, Trap, check_bool, encode_tuples

try:
    from . import _decode as _native  # built by pip install (setup.py)
except ImportError:  # a source tree used without building: _decode_python
    _native = None

# A trap's Trap object by its status code (None: no such trap; decode gives bad_bytecode there).
_TRAP_TABLE = tuple(Trap(oc.TRAP_NAMES[c]) if c and c in oc.TRAP_NAMES else None for c in range(max(oc.TRAP_NAMES) + 1))
_BAD_BYTECODE = Trap("bad_bytecode")
_OUT_CAP = 64  # list elements copied out per run in the first call
# List results longer than _OUT_CAP are fetched by running those runs again with room for them: in
# calls of at most this many ints of output (a (runs, out_cap) matrix), whatever the heap size.
_RERUN_CELLS = 1 << 22


def _config(*limits) -> VMConfig:
    """VMConfig(*limits), made once per distinct limits (its checks cost a few us a call)."""
    try:
        return _cached_config(*limits)
    except TypeError:  # an unhashable limit: VMConfig words the error
        return VMConfig(*limits)


@lru_cache(maxsize=32, typed=True)  # (typed: fuel=True must still be refused after fuel=1)
def _cached_config(*limits) -> VMConfig:
    return VMConfig(*limits)


def _decode_python(status, value, steps, out_words, out_off, kinds, m, traps, fallback, long_lists, with_steps):
    """vm/csrc/decode_py.cpp's decode in Python (a source tree used without building): one list of
    results per program from run_batch's arrays, runs program-major, m per program."""
    status, value, nsteps = status.tolist(), value.tolist(), steps.tolist()
    # the list elements of every run that returned a list, flat, in run order
    flat = out_words.tolist() if out_words is not None else []
    starts = out_off.tolist() if out_off is not None else [0] * (len(status) + 1)
    results = []
    for p, kind in enumerate(kinds):
        lo, hi = p * m, p * m + m
        if kind == oc.KIND_BOOL:
            row = [v != 0 for v in value[lo:hi]]
        elif kind == oc.KIND_LIST:
            row = [long_lists[r] if r in long_lists else flat[starts[r]:starts[r + 1]] for r in range(lo, hi)]
        else:
            row = value[lo:hi]
        for j, s in enumerate(status[lo:hi]):
            if s:
                row[j] = traps[s] if 0 < s < len(traps) and traps[s] is not None else fallback
        results.append(list(zip(row, nsteps[lo:hi])) if with_steps else row)
    return results


def execute(program_or_programs: Program | Sequence[Program], entry: str, args_list: Iterable[Sequence], *,
            backend: str = "cpu", fuel: int = oc.DEFAULT_FUEL, max_depth: int = oc.DEFAULT_MAX_DEPTH,
            heap_size: int = oc.DEFAULT_HEAP, max_lists: int = oc.DEFAULT_MAX_LISTS,
            stack_size: int = oc.DEFAULT_STACK, steps: bool = False, nthreads: int | None = None):
    """For one program: a list with one result per argument tuple; for a sequence of programs:
    one such list per program. A result is an int, a bool, a list[int] or a Trap; with
    steps=True, a (result, executed_steps) pair. Raises KeyError for an unknown entry and
    TypeError/ValueError for arguments that do not fit the entry's signature."""
    check_bool(steps, "steps")
    single = isinstance(program_or_programs, Program)
    if isinstance(program_or_programs, (str, bytes)):
        raise TypeError("execute takes compiled programs: compile the source first (vramgym.compiler.compile_source)")
    programs = [program_or_programs] if single else list(program_or_programs)
    for p in programs:
        if not isinstance(p, Program):
            raise TypeError(f"execute takes a Program or a sequence of Programs, got {type(p).__name__} in it")
    config = _config(fuel, max_depth, heap_size, max_lists, stack_size)
    if type(args_list) is not list:   # (encode_tuples reads a list's rows as they are: tuples, lists, bare values)
        args_list = [tuple(a) if isinstance(a, (tuple, list)) else (a,) for a in args_list]
    if not programs:
        return []
    fns = [p.function(entry) for p in programs]
    # Encode the arguments once per distinct signature; run_in indexes into the concatenation.
    base: dict[tuple[str, ...], int] = {}
    parts: list[Encoded] = []
    total = 0
    for f in fns:
        if f.params not in base:
            base[f.params] = total
            parts.append(encode_tuples(args_list, f.params, f"{entry}() argument"))
            total += len(args_list)
    inputs = Encoded.concat(parts)
    batch = ProgramBatch.from_programs(programs, entry)
    m = len(args_list)
    if single:
        run_prog, run_in = np.zeros(m, dtype=np.int32), np.arange(m, dtype=np.int32)
    else:
        run_prog = np.repeat(np.arange(len(programs), dtype=np.int32), m)
        run_in = (np.array([base[f.params] for f in fns], dtype=np.int32)[:, None] +
                  np.arange(m, dtype=np.int32)).ravel()
    kinds = bytes(KIND_BY_NAME[f.ret] for f in fns)   # ('list[int]' is 'list', as in ProgramBatch)
    has_list = oc.KIND_LIST in kinds
    # (the arrays above were made here from checked values: the backend's call, not run_batch's checks)
    nthreads = check_threads(nthreads)
    run = partial(run_checked, get_backend(backend), batch, inputs, expected=None, config=config, nthreads=nthreads)
    res = run(run_prog, run_in, out_cap=_OUT_CAP if has_list else 0)
    long_lists = {}
    # Rerun the few runs whose list result did not fit, with room for any list.
    if has_list and len(res.value) and int(res.value.max()) > _OUT_CAP:
        lists = (res.status == 0) & (batch.ret_kind[run_prog] == oc.KIND_LIST)   # runs that returned a list
        long = np.flatnonzero(lists & (res.value > _OUT_CAP))
        long = long[np.argsort(-res.value[long], kind="stable")]
        i = 0
        while i < len(long):  # longest first, out_cap their actual length, at most _RERUN_CELLS ints a call
            cap = int(res.value[long[i]])
            part = long[i: i + max(1, _RERUN_CELLS // cap)]
            again = run(run_prog[part], run_in[part], out_cap=cap)
            long_lists.update((int(r), again.out_row(k).tolist()) for k, r in enumerate(part))
            i += len(part)
    decode = _native.decode if _native is not None else _decode_python
    results = decode(res.status, res.value, res.steps, res.out_words, res.out_off, kinds, m, _TRAP_TABLE,
                     _BAD_BYTECODE, long_lists, steps)
    return results[0] if single else results

