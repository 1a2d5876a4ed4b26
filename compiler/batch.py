"""Compile many programs per call: sources (or token arrays) -> a padded code matrix with a
status per program. No Python loop runs per program inside the compiler; the C++ core splits
the batch across cores."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vramgym.vm import cpu
from vramgym.vm import opcodes as oc
from vramgym.vm.batch import ProgramBatch, check_threads
from vramgym.vm.values import check_int, int_array, offsets_array

from .errors import CompileError, make_error


@dataclass
class CompiledBatch:
    """Result of compiling N programs.

    code:    (N, code_cap) uint32, program i in code[i, :lengths[i]]
    lengths: (N,) int32, -1 where compilation failed
    errors:  (N, 4) int32: error code, line, column, argument (code 0 where it succeeded)
    """

    code: np.ndarray
    lengths: np.ndarray
    errors: np.ndarray

    @property
    def ok(self) -> np.ndarray:
        return self.lengths >= 0

    def __len__(self):
        return len(self.lengths)

    def error(self, i: int, source: str | None = None) -> CompileError | None:
        return None if self.lengths[i] >= 0 else make_error(self.errors[i], source)

    def to_programs(self, entry: int | np.ndarray = 0, ret_kind: str | np.ndarray = "int") -> ProgramBatch:
        """Pack the programs into a ProgramBatch; failed ones become empty programs, whose runs
        trap bad_bytecode."""
        lengths = np.maximum(self.lengths, 0).astype(np.int64)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        mask = np.arange(self.code.shape[1])[None, :] < lengths[:, None]
        return ProgramBatch.build(self.code[mask], offsets, entry, ret_kind)


_BYTES_LIKE = (bytes, bytearray, memoryview)
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def source_bytes(source, what: str = "source") -> bytes:
    """A source as the bytes the core compiles: str (UTF-8, lone surrogates kept, so they fail
    as non_ascii) or bytes, as compile_source takes. Anything else is a TypeError (bytes(5)
    would be five NUL bytes)."""
    if isinstance(source, str):
        return source.encode("utf-8", errors="surrogatepass")
    if isinstance(source, _BYTES_LIKE):
        return bytes(source)
    raise TypeError(f"{what} must be str or bytes, not {type(source).__name__}")


def pack_sources(sources: Sequence[str | bytes]) -> tuple[bytes, np.ndarray]:
    if isinstance(sources, (str, *_BYTES_LIKE)):
        raise TypeError(f"sources must be a list of sources, not a single {type(sources).__name__}; "
                        "pass a list of sources, e.g. compile_batch([source])")
    try:
        items = sources if isinstance(sources, (list, tuple)) else list(sources)
    except TypeError:
        raise TypeError(f"sources must be a list of sources (str or bytes), not {type(sources).__name__}") from None
    if set(map(type, items)) <= {str}:  # the common case, without a call per source (compile is ~5 us each)
        blobs = [s.encode("utf-8", errors="surrogatepass") for s in items]
    else:
        blobs = [source_bytes(s, f"sources[{i}]") for i, s in enumerate(items)]
    offsets = np.zeros(len(blobs) + 1, dtype=np.int64)
    np.cumsum(list(map(len, blobs)), out=offsets[1:])
    return b"".join(blobs), offsets


def _code_cap(code_cap) -> int:
    return check_int(code_cap, "code_cap", 1, oc.LIMITS["MAX_CODE"])


def _nthreads(nthreads) -> int:
    """None: VRAMGYM_THREADS, else one thread per core; 0: one per core; else 1..cpu.MAX_THREADS."""
    n = check_threads(nthreads)
    return cpu.default_threads() if n is None else n


def compile_batch(sources: Sequence[str | bytes], *, code_cap: int = 1024, nthreads: int | None = None) -> CompiledBatch:
    """Compile N sources at once (code_cap words at most per program; longer ones fail with
    code_too_long). `sources` is a list (any iterable) of str or bytes, not a single str.
    nthreads: None or 0 for one thread per core, else 1..cpu.MAX_THREADS."""
    code_cap = _code_cap(code_cap)
    nthreads = _nthreads(nthreads)
    blob, offsets = pack_sources(sources)
    code, lengths, errors = cpu.compile_batch(blob, offsets, code_cap, nthreads)
    return CompiledBatch(code, lengths, errors)


def _check_tokens(tokens) -> np.ndarray:
    tokens = int_array(tokens, "tokens", _INT32_MIN, _INT32_MAX, np.int32, ndim=2)
    if tokens.shape[1:] != (4,):
        raise ValueError(f"tokens must have shape (T, 4), got {tokens.shape}")
    return tokens


def _check_offsets(offsets, n_tokens: int) -> np.ndarray:
    return offsets_array(offsets, n_tokens, "token", "len(tokens)")


def compile_tokens(tokens: np.ndarray, offsets: np.ndarray, *, code_cap: int = 1024,
                   nthreads: int | None = None) -> CompiledBatch:
    """Compile N token arrays: `tokens` is (T, 4) int32 rows (kind, value, line, col) with kinds
    from opcodes.TOKENS, NAME values as name ids (ids below len(BUILTIN_NAMES) are the builtins),
    each program ending with an EOF token; `offsets` (N + 1,) int64 token offsets, non-decreasing
    from 0 to T. Integer arrays of other dtypes are accepted when every value fits (int32 tokens,
    int64 offsets); floats, bools and out-of-range values raise TypeError / ValueError."""
    code_cap = _code_cap(code_cap)
    nthreads = _nthreads(nthreads)
    tokens = _check_tokens(tokens)
    offsets = _check_offsets(offsets, len(tokens))
    code, lengths, errors = cpu.compile_tokens_batch(tokens, offsets, code_cap, nthreads)
    return CompiledBatch(code, lengths, errors)
