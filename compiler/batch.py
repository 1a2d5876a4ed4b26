"""Compile many programs per call: sources (or token arrays) -> a padded code matrix with a
status per program. No Python loop runs per program inside the compiler; the C++ core splits
the batch across cores."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vramgym.vm import cpu
from vramgym.vm import opcodes as oc
from vramgym.vm.batch import ProgramBatch

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


def pack_sources(sources: Sequence[str | bytes]) -> tuple[bytes, np.ndarray]:
    blobs = [s.encode("utf-8", errors="surrogatepass") if isinstance(s, str) else bytes(s) for s in sources]
    offsets = np.zeros(len(blobs) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in blobs], out=offsets[1:])
    return b"".join(blobs), offsets


def compile_batch(sources: Sequence[str | bytes], *, code_cap: int = 1024, nthreads: int | None = None) -> CompiledBatch:
    """Compile N sources at once (code_cap words at most per program; longer ones fail with
    code_too_long)."""
    if not 1 <= code_cap <= oc.LIMITS["MAX_CODE"]:
        raise ValueError(f"code_cap must be in 1..{oc.LIMITS['MAX_CODE']}")
    blob, offsets = pack_sources(sources)
    code, lengths, errors = cpu.compile_batch(blob, offsets, code_cap, cpu.default_threads() if nthreads is None else nthreads)
    return CompiledBatch(code, lengths, errors)


def compile_tokens(tokens: np.ndarray, offsets: np.ndarray, *, code_cap: int = 1024,
                   nthreads: int | None = None) -> CompiledBatch:
    """Compile N token arrays: `tokens` is (T, 4) int32 rows (kind, value, line, col) with kinds
    from opcodes.TOKENS, NAME values as name ids (ids below len(BUILTIN_NAMES) are the builtins),
    each program ending with an EOF token; `offsets` (N + 1,) int64 token offsets."""
    tokens = np.ascontiguousarray(tokens, dtype=np.int32)
    if tokens.ndim != 2 or tokens.shape[1] != 4:
        raise ValueError("tokens must have shape (T, 4)")
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    if offsets[0] != 0 or offsets[-1] != len(tokens) or np.any(np.diff(offsets) < 0):
        raise ValueError("offsets must be non-decreasing from 0 to len(tokens)")
    code, lengths, errors = cpu.compile_tokens_batch(tokens, offsets, code_cap,
                                                     cpu.default_threads() if nthreads is None else nthreads)
    return CompiledBatch(code, lengths, errors)
