"""The CPU backend: ctypes bindings to the C++ core built by `pip install` (vramgym.vm._core)."""
from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import os
from functools import lru_cache
from pathlib import Path

import numpy as np

from . import opcodes as oc


def _array_arg(dt) -> type:
    """An argtype for an array of dtype `dt`: the core gets its address as a plain int (about
    1 us less per argument than ndarray.ctypes.data_as), and ptr() checks the dtype that a
    typed pointer would only have implied."""
    return type(f"{np.dtype(dt).name}_array", (ctypes.c_void_p,), {"dtype": np.dtype(dt)})


_i32p, _i64p, _u32p, _u8p, _i8p = (_array_arg(t) for t in (np.int32, np.int64, np.uint32, np.uint8, np.int8))


def extension_path(module: str, env_var: str, what: str) -> Path:
    """The shared library of the extension `module` (e.g. "vramgym.vm._core") that `pip install`
    built, or the one a developer built by hand and named in $env_var. envs/grammar_native.py
    finds its library with it too."""
    if os.environ.get(env_var):  # a library built by hand, for development
        return Path(os.environ[env_var])
    package, stem = module.rsplit(".", 1)
    here = Path(importlib.util.find_spec(package).origin).resolve().parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        p = here / f"{stem}{suffix}"
        if p.exists():
            return p
    spec = importlib.util.find_spec(module)  # editable installs keep it elsewhere
    if spec is not None and spec.origin:
        return Path(spec.origin)
    raise ImportError(f"{what} is not built: install the package with `pip install .` "
                      "(or `pip install -e .`), which compiles it")


def _library_path() -> Path:
    return extension_path("vramgym.vm._core", "VRAMGYM_CORE_LIB", "the vramgym C++ core")


@lru_cache(maxsize=1)
def lib() -> ctypes.CDLL:
    return load_library(_library_path())


def load_library(path) -> ctypes.CDLL:
    """A build of the core (vm/csrc/cpu_backend.cpp) with its C ABI declared; lib() is the
    installed one. The tests load other builds of the same source with it (e.g. the switch
    interpreter that CUDA compiles)."""
    so = ctypes.CDLL(str(path))
    so.vg_compile.restype = ctypes.c_int32
    so.vg_compile.argtypes = [ctypes.c_char_p, ctypes.c_int64, _u32p, ctypes.c_int32, _i32p, _i32p, _i32p]
    so.vg_compile_batch.restype = ctypes.c_int32
    so.vg_compile_batch.argtypes = [ctypes.c_char_p, _i64p, ctypes.c_int32, _u32p, ctypes.c_int32, _i32p, _i32p,
                                    _i64p, ctypes.c_int32]
    so.vg_compile_tokens_batch.restype = ctypes.c_int32
    so.vg_compile_tokens_batch.argtypes = [_i32p, _i64p, ctypes.c_int32, _u32p, ctypes.c_int32, _i32p, _i32p,
                                           _i64p, ctypes.c_int32]
    so.vg_tokenize.restype = ctypes.c_int32
    so.vg_tokenize.argtypes = [ctypes.c_char_p, ctypes.c_int64, _i32p, ctypes.c_int32, _i32p]
    so.vg_validate.restype = ctypes.c_int32
    so.vg_validate.argtypes = [_u32p, ctypes.c_int32, ctypes.c_int32, _i32p]
    so.vg_validate_batch.restype = ctypes.c_int32
    so.vg_validate_batch.argtypes = [_u32p, _i64p, ctypes.c_int32, _i32p, _i32p, _i32p, ctypes.c_int32]
    so.vg_run_batch.restype = ctypes.c_int32
    so.vg_run_batch.argtypes = [_u32p, _i64p, ctypes.c_int32, _i32p, _i32p, _i8p, _i32p, _i64p, ctypes.c_int32, _i32p,
                                _i32p, ctypes.c_int64, _i32p, _i64p, _i32p, _i32p, _i32p, _i32p, _i32p, _u8p,
                                _i32p, _i64p, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32]
    so.vg_score_tokens.restype = ctypes.c_int32
    so.vg_score_tokens.argtypes = [_i32p, _i64p, ctypes.c_int32, _i64p, ctypes.c_int32, _i32p, _i32p, _i64p, _i32p,
                                   _i64p, ctypes.c_int32, _i32p, _i32p, ctypes.c_int32, ctypes.c_int32, _u8p, _i32p,
                                   _i64p, ctypes.c_int32]
    so.vg_func_meta.restype = ctypes.c_int32
    so.vg_abi_version.restype = ctypes.c_int32
    if so.vg_func_meta() != 6 + oc.LIMITS["MAX_PARAMS"] or so.vg_abi_version() != 7:
        raise ImportError("the C++ core is out of date with vm/opcodes.py: reinstall vramgym")
    return so


def _check(rc: int, what: str, hint: str = "use smaller batches or fewer threads") -> None:
    """The C ABI's batch calls return -1 when the core ran out of memory."""
    if rc != 0:
        raise MemoryError(f"{what}: the C++ core ran out of memory; {hint}")


def ptr(a: np.ndarray | None, t):
    """The address of a contiguous array of argtype t's dtype (None: NULL)."""
    if a is None:
        return None
    if a.dtype != t.dtype or not a.flags.c_contiguous:
        got = a.dtype if a.dtype != t.dtype else "a non-contiguous one"
        raise TypeError(f"the core takes a contiguous {t.dtype} array here, got {got}")
    return _address(a)


try:
    from ._address import address as _address  # built by pip install; ~0.1 us against ~2 us
except ImportError:  # a source tree used without building (the core is missing then too)
    def _address(a: np.ndarray) -> int:
        return a.ctypes.data


MAX_THREADS = 1024  # the core caps its threads here too (it sizes per-thread scratch by them)


def default_threads() -> int:
    """VRAMGYM_THREADS, else 0: one thread per core."""
    env = os.environ.get("VRAMGYM_THREADS")
    if not env:
        return 0
    try:
        n = int(env)
    except ValueError:
        n = -1
    if not 0 <= n <= MAX_THREADS:
        raise ValueError(f"VRAMGYM_THREADS must be 0 (one per core) or in 1..{MAX_THREADS}, got {env!r}")
    return n


def compile_one(source: bytes, code_cap: int = oc.LIMITS["MAX_CODE"]):
    """(code uint32 array or None, err int32[4], meta int32[nfuncs, FUNC_META])."""
    fm = 6 + oc.LIMITS["MAX_PARAMS"]
    # (empty, not zeros: the core writes the prefix it returns, and zeroing 256 KiB of code room
    # cost more than compiling a small program)
    code = np.empty(code_cap, dtype=np.uint32)
    err = np.zeros(4, dtype=np.int32)
    meta = np.empty(oc.LIMITS["MAX_FUNCS"] * fm, dtype=np.int32)
    nf = np.zeros(1, dtype=np.int32)
    n = lib().vg_compile(source, len(source), ptr(code, _u32p), code_cap, ptr(err, _i32p), ptr(meta, _i32p),
                         ptr(nf, _i32p))
    if n < 0:
        return None, err, None
    return code[:n].copy(), err, meta[: nf[0] * fm].reshape(nf[0], fm)


def tokenize(source: bytes):
    """(tokens (T, 4) int32 or None, err int32[4])."""
    cap = oc.LIMITS["MAX_TOKENS"]
    toks = np.empty((cap, 4), dtype=np.int32)  # (the core writes the n rows it returns)
    err = np.zeros(4, dtype=np.int32)
    n = lib().vg_tokenize(source, len(source), ptr(toks, _i32p), cap, ptr(err, _i32p))
    return (toks[:n].copy() if n >= 0 else None), err


def _compile_outputs(n: int, code_cap: int):
    return (np.zeros((n, code_cap), dtype=np.uint32), np.zeros(n, dtype=np.int32), np.zeros((n, 4), dtype=np.int32),
            np.zeros((n, oc.LIMITS["MAX_FUNCS"]), dtype=np.int64))


def compile_batch(src: bytes, offsets: np.ndarray, code_cap: int, nthreads: int):
    """(code, lengths, errors, packed signatures (N, MAX_FUNCS) int64) of the sources
    src[offsets[i]:offsets[i + 1]]."""
    n = len(offsets) - 1
    code, lengths, err, sig = _compile_outputs(n, code_cap)
    _check(lib().vg_compile_batch(src, ptr(offsets, _i64p), n, ptr(code, _u32p), code_cap, ptr(lengths, _i32p),
                                  ptr(err, _i32p), ptr(sig, _i64p), nthreads), "compile_batch")
    return code, lengths, err, sig


def compile_tokens_batch(tokens: np.ndarray, offsets: np.ndarray, code_cap: int, nthreads: int):
    """compile_batch's outputs for token arrays."""
    n = len(offsets) - 1
    code, lengths, err, sig = _compile_outputs(n, code_cap)
    _check(lib().vg_compile_tokens_batch(ptr(tokens, _i32p), ptr(offsets, _i64p), n, ptr(code, _u32p), code_cap,
                                         ptr(lengths, _i32p), ptr(err, _i32p), ptr(sig, _i64p), nthreads),
           "compile_tokens")
    return code, lengths, err, sig


def score_tokens(tokens: np.ndarray, offsets: np.ndarray, task: np.ndarray, ret_kind: np.ndarray, inputs, expected,
                 n_tests: int, config: np.ndarray, code_cap: int, chunk: int, nthreads: int,
                 task_fuel: np.ndarray | None = None):
    """(ok (N,) bool, passed (N,) int32, steps (N,) int64) of N token programs, tokens[offsets[i]:
    offsets[i + 1]] (T, 4) int32, on the n_tests tests of task[i] (int64, each in [0, T) for T =
    len(ret_kind)): compiled `chunk` rows at a time and run in one core call (vg_score_tokens).
    inputs and expected: Encoded with T * n_tests items. task_fuel: None, or (T,) int32 step
    budgets that cap config's fuel per task."""
    n = len(offsets) - 1
    # (the core reads by these without checking them: cheap guards for a caller's slip)
    if tokens.ndim != 2 or tokens.shape[1] != 4 or offsets[0] != 0 or offsets[-1] != len(tokens) or len(task) != n:
        raise ValueError("score_tokens: tokens (T, 4), offsets from 0 to T and one task per row expected")
    if len(inputs) != len(ret_kind) * n_tests or len(expected) != len(inputs):
        raise ValueError("score_tokens: inputs and expected need len(ret_kind) * n_tests items each")
    if n and (int(task.min()) < 0 or int(task.max()) >= len(ret_kind)):
        raise ValueError(f"score_tokens: task ids must be in [0, {len(ret_kind)})")
    if task_fuel is not None and task_fuel.shape != (len(ret_kind),):
        raise ValueError("score_tokens: task_fuel needs one value per task")
    ok, passed, steps = np.zeros(n, dtype=np.uint8), np.zeros(n, dtype=np.int32), np.zeros(n, dtype=np.int64)
    _check(lib().vg_score_tokens(ptr(tokens, _i32p), ptr(offsets, _i64p), n, ptr(task, _i64p), len(ret_kind),
                                 ptr(ret_kind, _i32p), ptr(inputs.words, _i32p), ptr(inputs.offsets, _i64p),
                                 ptr(expected.words, _i32p), ptr(expected.offsets, _i64p), n_tests, ptr(config, _i32p),
                                 ptr(task_fuel, _i32p), code_cap, chunk, ptr(ok, _u8p), ptr(passed, _i32p), ptr(steps, _i64p), nthreads),
           "score_tokens")
    return ok.view(bool), passed, steps


def validate(code: np.ndarray, entry: int = 0) -> tuple[int, int]:
    """(index of the first invalid word or -1, pc of function `entry` or -1)."""
    code = np.ascontiguousarray(code, dtype=np.uint32)
    pc = np.zeros(1, dtype=np.int32)
    bad = lib().vg_validate(ptr(code, _u32p), len(code), entry, ptr(pc, _i32p))
    return bad, int(pc[0])


def validate_batch(code: np.ndarray, offsets: np.ndarray, entry: np.ndarray, nthreads: int = 0):
    """validate() of every program code[offsets[i]:offsets[i + 1]] with entry function entry[i], across
    threads: (bad (N,) int32, entry_pc (N,) int32). Arguments as ProgramBatch holds them (checked)."""
    n = len(offsets) - 1
    bad, pc = np.zeros(n, dtype=np.int32), np.zeros(n, dtype=np.int32)
    _check(lib().vg_validate_batch(ptr(code, _u32p), ptr(offsets, _i64p), n, ptr(entry, _i32p), ptr(bad, _i32p),
                                   ptr(pc, _i32p), nthreads or default_threads()), "validate_batch")
    return bad, pc


def run_batch(code, code_off, entry, ret_kind, in_words, in_off, run_prog, run_in, exp_words, exp_off, config,
              out_cap: int, nthreads: int, lockstep: bool = True, params: np.ndarray | None = None,
              prog_fuel: np.ndarray | None = None):
    """vg_run_batch's outputs (status, value, steps, passed, list words, list offsets).
    prog_fuel: None, or (P,) int32 step budgets that cap config's fuel per program."""
    n_runs = len(run_prog)
    if prog_fuel is not None and prog_fuel.shape != (len(code_off) - 1,):
        raise ValueError("run_batch: prog_fuel needs one value per program")
    # (the core writes every element of these, and of out_list as far as the lists reach: it
    # copies each thread's lists in after the runs, in run order; the rest stays untouched)
    status = np.empty(n_runs, dtype=np.int32)
    value = np.empty(n_runs, dtype=np.int32)
    steps = np.empty(n_runs, dtype=np.int32)
    passed = np.empty(n_runs, dtype=np.uint8) if exp_words is not None else None
    out_list = np.empty(n_runs * out_cap, dtype=np.int32) if out_cap > 0 else None
    out_off = np.empty(n_runs + 1, dtype=np.int64) if out_cap > 0 else None
    _check(lib().vg_run_batch(ptr(code, _u32p), ptr(code_off, _i64p), len(code_off) - 1, ptr(entry, _i32p),
                       ptr(ret_kind, _i32p), ptr(params, _i8p), ptr(in_words, _i32p), ptr(in_off, _i64p), len(in_off) - 1,
                       ptr(run_prog, _i32p), ptr(run_in, _i32p), n_runs, ptr(exp_words, _i32p), ptr(exp_off, _i64p),
                       ptr(config, _i32p), ptr(prog_fuel, _i32p), ptr(status, _i32p), ptr(value, _i32p), ptr(steps, _i32p),
                       ptr(passed, _u8p), ptr(out_list, _i32p), ptr(out_off, _i64p), out_cap, nthreads,
                       0 if lockstep else 1),
           "run_batch", "lower the VMConfig limits (heap_size, max_lists, stack_size, max_depth) or nthreads")
    out_words = out_list[:out_off[-1]].copy() if out_cap > 0 else None   # (the lists alone: a small copy)
    return status, value, steps, passed, out_words, out_off
