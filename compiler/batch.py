"""Compile many programs per call: sources (or token arrays) -> a padded code matrix with a
status per program. No Python loop runs per program inside the compiler; the C++ core splits
the batch across cores."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vramgym.vm import cpu
from vramgym.vm import opcodes as oc
from vramgym.vm.batch import UNKNOWN_KINDS, ProgramBatch, check_threads
from vramgym.vm.values import KIND_NAME, check_int, int_array, offsets_array

from .errors import CompileError, make_error


@dataclass
class CompiledBatch:
    """Result of compiling N programs.

    code:       (N, code_cap) uint32, program i in code[i, :lengths[i]]
    lengths:    (N,) int32, -1 where compilation failed
    errors:     (N, 4) int32: error code, line, column, argument (code 0 where it succeeded)
    signatures: (N, F) int64 or None: the signature of function f of program i, packed
                (unpack_signatures; 0 where there is no such function or the compile failed).
                The compilers (CPU and GPU) fill it; a batch built by hand without it runs
                unchecked, with ret_kind as given.
    """

    code: np.ndarray
    lengths: np.ndarray
    errors: np.ndarray
    signatures: np.ndarray | None = None

    @property
    def ok(self) -> np.ndarray:
        return self.lengths >= 0

    def __len__(self):
        return len(self.lengths)

    def error(self, i: int, source: str | None = None) -> CompileError | None:
        return None if self.lengths[i] >= 0 else make_error(self.errors[i], source)

    def signature(self, i: int, f: int = 0) -> tuple[tuple[str, ...], str] | None:
        """(parameter kinds, return kind) of function f of program i, e.g. (("list", "int"), "bool");
        None where there is no such function (any f < 0 or past the last; or no signatures).
        i must be in 0..N-1 (IndexError: no wrapping); both are ints, not bools or floats
        (TypeError)."""
        i, f = check_int(i, "i"), check_int(f, "f")
        if not 0 <= i < len(self):
            raise IndexError(f"program index i={i} out of range for a batch of {len(self)}")
        if self.signatures is None or not 0 <= f < self.signatures.shape[1]:
            return None
        present, ret, nparams, params = unpack_signatures(self.signatures[i, f])
        if not present:
            return None
        _check_unpacked(present, ret, nparams, params, f"signatures[{i}, {f}]")
        return tuple(KIND_NAME[int(k)] for k in params[:nparams]), KIND_NAME[int(ret)]

    def to_programs(self, entry: int | np.ndarray = 0, ret_kind: str | np.ndarray | None = None) -> ProgramBatch:
        """Pack the programs into a ProgramBatch; failed ones become empty programs, whose runs
        trap bad_bytecode. entry: the function index to run (one, or one per program).

        With signatures (from the compilers), each program's entry signature comes along:
        ret_kind None takes its return kind, a ret_kind given must match it (ValueError), and
        run_batch traps bad_input on a run whose arguments are not of its parameter kinds.
        Without them, ret_kind None means "int", and nothing is checked."""
        lengths = int_array(self.lengths, "lengths", -(2**63), 2**63 - 1, np.int64)   # no float or bool cast
        code, offsets = packed_rows(self.code, np.maximum(lengths, 0))
        if self.signatures is None:
            return ProgramBatch.build(code, offsets, entry, "int" if ret_kind is None else ret_kind)
        n = len(self)
        table = int_array(self.signatures, "signatures", -(2**63), 2**63 - 1, np.int64, ndim=2)
        if len(table) != n:
            raise ValueError(f"signatures need one row per program ({n}), got {len(table)}")
        batch = ProgramBatch.build(code, offsets, entry, oc.KIND_INT if ret_kind is None else ret_kind)
        e = batch.entry.astype(np.int64)
        sig = np.zeros(n, dtype=np.int64)
        has = (e >= 0) & (e < table.shape[1])
        sig[has] = table[np.flatnonzero(has), e[has]]
        known, ret, nparams, params = unpack_signatures(sig)
        known &= self.ok
        _check_unpacked(known, ret, nparams, params, "signatures")
        ret_kinds = batch.ret_kind
        if ret_kind is None:
            ret_kinds = np.where(known, ret, oc.KIND_INT).astype(np.int32)
        else:
            wrong = np.flatnonzero(known & (batch.ret_kind != ret))
            if len(wrong):
                i = int(wrong[0])
                raise ValueError(f"ret_kind of program {i} is {KIND_NAME[int(batch.ret_kind[i])]}, but its function "
                                 f"{int(e[i])} returns {KIND_NAME[int(ret[i])]} ({len(wrong)} of {n} programs differ; "
                                 "leave ret_kind out to take each program's own)")
        kinds = np.full((n, oc.LIMITS["MAX_PARAMS"] + 1), -1, dtype=np.int8)
        kinds[:, :-1] = params
        kinds[~known] = UNKNOWN_KINDS  # failed compiles and missing entries: not checked (their runs trap)
        # (batch's arrays were checked by build and are read-only; ret_kinds and kinds come from the
        # signatures just checked: a second constructor's scans would cost more than the run of a
        # few programs)
        return ProgramBatch._made(batch.code, batch.offsets, batch.entry, ret_kinds, kinds)


def packed_rows(code: np.ndarray, lengths: np.ndarray, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The words code[i, :lengths[i]] of the rows `rows` (default all) one after another, and
    their offsets (len(rows) + 1,) int64. A gather of just those words: programs use some 60 of a
    row's code_cap (1,024) words, and a boolean mask over the whole matrix reads every one.
    ValueError where a length is negative or wider than the matrix."""
    code = np.asarray(code)
    if code.ndim != 2:
        raise ValueError(f"code must be a 2-D (N, code_cap) matrix, got shape {code.shape}")
    width = code.shape[1]
    lengths = int_array(lengths, "lengths", -(2**63), 2**63 - 1, np.int64)   # no float or bool cast
    take = np.arange(len(lengths)) if rows is None else np.asarray(rows, dtype=np.int64)
    lens = lengths[take]
    if len(lens) and (lens.min() < 0 or lens.max() > width):
        i = int(np.flatnonzero((lens < 0) | (lens > width))[0])
        raise ValueError(f"lengths[{int(take[i])}] = {int(lens[i])} is outside the code matrix's 0..{width} words")
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    flat = code.reshape(-1)  # a view where the matrix is contiguous
    idx = np.arange(offsets[-1], dtype=np.int64)
    idx += np.repeat(take * width - offsets[:-1], lens)
    return flat[idx], offsets


def trim_signatures(sig: np.ndarray) -> np.ndarray:
    """Packed signatures (N, MAX_FUNCS) as the compilers write them -> their columns up to the
    largest function count in the batch (a copy: most programs have one to three functions)."""
    width = int((sig != 0).sum(axis=1).max()) if len(sig) else 0
    return sig[:, :max(width, 1)].copy()


def _check_unpacked(present, ret, nparams, params, what: str) -> None:
    """ValueError unless every present signature is one a compiler writes (kinds 0..2, at most
    MAX_PARAMS parameters): a hand-made table must not reach the core with other values."""
    bad = present & ((ret > oc.KIND_LIST) | (nparams > oc.LIMITS["MAX_PARAMS"]) | (params > oc.KIND_LIST).any(axis=-1))
    if np.any(bad):
        raise ValueError(f"{what}: not a packed signature (kinds 0..2, at most {oc.LIMITS['MAX_PARAMS']} parameters)")


def unpack_signatures(packed) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Packed signatures (any shape S, int64) -> present (S) bool, ret (S) int8, nparams (S) int8
    and params (S + (MAX_PARAMS,)) int8 kinds, -1 past the last parameter (compiler.h's
    packed_signature: bit 0 set, bits 1-2 the return kind, bits 3-7 the parameter count, two bits
    per parameter kind from bit 8)."""
    s = np.asarray(packed, dtype=np.int64)
    present = (s & 1).astype(bool)
    ret = ((s >> 1) & 3).astype(np.int8)
    nparams = ((s >> 3) & 31).astype(np.int8)
    k = np.arange(oc.LIMITS["MAX_PARAMS"])
    params = ((s[..., None] >> (8 + 2 * k)) & 3).astype(np.int8)
    params[k >= nparams[..., None]] = -1
    return present, ret, nparams, params


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
        text = "".join(items)
        if text.isascii():  # one encode; each source's byte length is its length in characters
            offsets = np.zeros(len(items) + 1, dtype=np.int64)
            np.cumsum(list(map(len, items)), out=offsets[1:])
            return text.encode("ascii"), offsets
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
    code, lengths, errors, sig = cpu.compile_batch(blob, offsets, code_cap, nthreads)
    return CompiledBatch(code, lengths, errors, trim_signatures(sig))


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
    from opcodes.TOKENS, NAME values as name ids (ids below len(BUILTIN_NAMES) are the builtins,
    MAX_NAMES - 1 is `__builtins__`),
    each program ending with an EOF token; `offsets` (N + 1,) int64 token offsets, non-decreasing
    from 0 to T. Integer arrays of other dtypes are accepted when every value fits (int32 tokens,
    int64 offsets); floats, bools and out-of-range values raise TypeError / ValueError."""
    code_cap = _code_cap(code_cap)
    nthreads = _nthreads(nthreads)
    # Checked and compiled from private copies: the core trusts the check (an offset or a final
    # EOF), and another thread writing to the caller's arrays meanwhile could crash or hang it.
    tokens = _check_tokens(np.array(tokens))
    offsets = _check_offsets(np.array(offsets), len(tokens))
    code, lengths, errors, sig = cpu.compile_tokens_batch(tokens, offsets, code_cap, nthreads)
    return CompiledBatch(code, lengths, errors, trim_signatures(sig))
