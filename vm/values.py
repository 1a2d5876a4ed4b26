"""Values crossing the Python/VM boundary: traps, kinds, and the flat int32 encoding of
arguments and expected results ([kind, payload...] per value) that every backend reads."""
from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import chain

import numpy as np

from . import opcodes as oc

try:
    from . import _encode as _native  # built by pip install (setup.py)
except ImportError:  # a source tree used without building: the Python encoder alone
    _native = None

KIND_BY_NAME = {"int": oc.KIND_INT, "bool": oc.KIND_BOOL, "list": oc.KIND_LIST, "list[int]": oc.KIND_LIST}
KIND_NAME = {oc.KIND_INT: "int", oc.KIND_BOOL: "bool", oc.KIND_LIST: "list"}
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class Trap:
    """A runtime fault of one run: `.kind` is a name from `opcodes.TRAPS` (e.g. "zero_division")."""

    __slots__ = ("kind",)

    def __init__(self, kind: str):
        if kind not in oc.TRAP_CODES or kind == "ok":
            raise ValueError(f"unknown trap kind {kind!r}")
        self.kind = kind

    def __eq__(self, other):
        return isinstance(other, Trap) and other.kind == self.kind

    def __hash__(self):
        return hash(("Trap", self.kind))

    def __repr__(self):
        return f"Trap({self.kind!r})"

    __str__ = __repr__


def kind_of(value) -> str:
    """'int' | 'bool' | 'list' of a Python value, or TypeError if it is outside the language."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (list, tuple, np.ndarray)):
        return "list"
    raise TypeError(f"{type(value).__name__} is not a value of the language (int, bool, list[int])")


def check_value(value, kind: str, where: str) -> None:
    """Raise TypeError/ValueError unless `value` is a valid value of `kind`."""
    got = kind_of(value)
    if got != kind:
        raise TypeError(f"{where}: expected {kind}, got {got} ({value!r})")
    items = value if kind == "list" else [value]
    for v in items:
        if kind == "list" and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
            raise TypeError(f"{where}: list elements must be int, got {v!r}")
        if kind != "bool" and not INT32_MIN <= int(v) <= INT32_MAX:
            raise ValueError(f"{where}: {int(v)} does not fit in a signed 32-bit int")


def encode_value(value, kind: str, out: list[int]) -> None:
    code = KIND_BY_NAME[kind]
    if code == oc.KIND_LIST:
        out.append(code)
        out.append(len(value))
        out.extend(int(v) for v in value)
    else:
        out.append(code)
        out.append(int(value))


class Encoded:
    """A batch of encoded value tuples: `words` int32 and `offsets` int64 (one more than items)."""

    __slots__ = ("words", "offsets")

    def __init__(self, words: np.ndarray, offsets: np.ndarray):
        w = owned(int_array(words, "words", INT32_MIN, INT32_MAX, np.int32), words)
        object.__setattr__(self, "words", w)
        object.__setattr__(self, "offsets", owned(offsets_array(offsets, len(w), "word", "len(words)"), offsets))

    @classmethod
    def _made(cls, words: np.ndarray, offsets: np.ndarray) -> "Encoded":
        """A batch of arrays that only the caller holds, which it made valid (int32 words,
        int64 offsets from 0 to len(words), non-decreasing): stored read-only, not scanned."""
        enc = object.__new__(cls)
        for name, arr in (("words", words), ("offsets", offsets)):
            arr.flags.writeable = False
            object.__setattr__(enc, name, arr)
        return enc

    def __setattr__(self, name, value):
        raise AttributeError(f"Encoded is immutable (the core trusts what its constructor checked): "
                             f"build a new one instead of setting {name!r}")

    def __reduce__(self):  # unpickling checks again
        return Encoded, (self.words, self.offsets)

    def __len__(self):
        return len(self.offsets) - 1

    @classmethod
    def concat(cls, parts: Sequence["Encoded"]) -> "Encoded":
        """The items of several batches, in order, as one batch."""
        if len(parts) == 1:
            return parts[0]
        words = np.concatenate([p.words for p in parts])
        shifts = np.cumsum([0] + [len(p.words) for p in parts[:-1]])
        offsets = np.concatenate([np.zeros(1, np.int64)] + [p.offsets[1:] + s for p, s in zip(parts, shifts)])
        return cls(words, offsets)


def _int_array(values: Sequence, where: str) -> np.ndarray:
    """Ints (not bools) in the int32 range as an int64 array; TypeError/ValueError otherwise."""
    for t in set(map(type, values)):  # one pass in C over the values
        if t is bool or t is np.bool_ or not issubclass(t, (int, np.integer)):
            raise TypeError(f"{where}: expected int, got {t.__name__}")
    try:
        arr = np.array(values, dtype=np.int64) if len(values) else np.zeros(0, np.int64)
    except OverflowError:
        raise ValueError(f"{where}: an int does not fit in a signed 32-bit int") from None
    if arr.size and (arr.min() < INT32_MIN or arr.max() > INT32_MAX):
        bad = arr[(arr < INT32_MIN) | (arr > INT32_MAX)][0]
        raise ValueError(f"{where}: {int(bad)} does not fit in a signed 32-bit int")
    return arr


def check_int(value, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """`value` as a Python int in [lo, hi], else a TypeError/ValueError that names it. Floats
    (1.9, even 2.0), bools and strings are not ints: int() would truncate or parse them."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}") from None
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        want = f"in {lo}..{hi}" if lo is not None and hi is not None else f">= {lo}" if lo is not None else f"<= {hi}"
        raise ValueError(f"{name} must be {want}, got {v}")
    return v


def check_bool(value, name: str) -> bool:
    """`value` as a bool (Python's or numpy's), else a TypeError that names it: bool("no") and
    bool(None) would pick a mode by truth value."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def owned(arr: np.ndarray, given) -> np.ndarray:
    """`arr`, checked from the caller's `given`, as an array that nobody can change any more: a
    copy unless it is a fresh array of its own, marked read-only. Batches are checked once, on
    construction, and the core trusts the check: a caller who kept `given` (or a view of it) and
    wrote to it afterwards could otherwise send it offsets past the end of its buffers."""
    # Only a list or tuple converts to an array nobody else holds: an ndarray, a tensor's view or
    # an object's __array__ (which may hand back an array it keeps) is copied.
    if not isinstance(given, (list, tuple)) or arr is given or not arr.flags.owndata:
        arr = arr.copy()
    arr.flags.writeable = False
    return arr


_INT_RANGE = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max))
              for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)}


def int_array(a, name: str, lo: int, hi: int, dtype, ndim: int = 1) -> np.ndarray:
    """`a` as a contiguous `ndim`-D `dtype` array; TypeError unless it holds integers (not
    floats, bools or objects: no silent truncation), ValueError unless every one lies in
    [lo, hi] (no silent wrap-around in the cast)."""
    a = np.asarray(a)
    if a.size and a.dtype.kind not in "iu":  # (not floats, bools, objects or strings)
        raise TypeError(f"{name} must be an integer array, got dtype {a.dtype}")
    if a.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {a.shape}")
    if a.dtype == dtype and lo <= _INT_RANGE.get(a.dtype, (lo - 1,))[0] and hi >= _INT_RANGE[a.dtype][1]:
        return np.ascontiguousarray(a)  # every value of the dtype fits: no scan
    if a.size and (int(a.min()) < lo or int(a.max()) > hi):
        bad = int(a.min()) if int(a.min()) < lo else int(a.max())
        raise ValueError(f"{name}: values must lie in [{lo}, {hi}], got {bad}")
    return np.ascontiguousarray(a, dtype=dtype)


def offsets_array(offsets, total: int, unit: str, of: str) -> np.ndarray:
    """N + 1 offsets of items into `total` units (`of` names the total) as int64: from 0 to total,
    non-decreasing; TypeError/ValueError otherwise (the core reads the items between them)."""
    arr = int_array(offsets, "offsets", 0, total, np.int64)
    if len(arr) < 1 or arr[0] != 0 or arr[-1] != total:
        raise ValueError(f"offsets must be N + 1 {unit} offsets from 0 to {of} = {total}")
    sizes = np.diff(arr)
    down = np.flatnonzero(sizes < 0)
    if len(down):
        i = int(down[0])
        raise ValueError(f"offsets must be non-decreasing: offsets[{i}] = {int(arr[i])} > offsets[{i + 1}] = "
                         f"{int(arr[i + 1])}")
    if len(sizes) and int(sizes.max()) > INT32_MAX:   # the core takes an item's size as an int32
        i = int(np.argmax(sizes))
        raise ValueError(f"item {i} has {int(sizes[i])} {unit}s, more than 2**31 - 1")
    return arr


def _native_encode(rows, kinds: Sequence[str], single: bool) -> Encoded | None:
    """The C encoder (vm/csrc/encode_py.cpp) for rows of exact ints, bools and lists; None for
    anything else (other types, values out of range, errors), which the Python code handles."""
    if _native is None or type(rows) not in (list, tuple):
        return None
    codes = tuple(KIND_BY_NAME.get(k, -1) if isinstance(k, str) else -1 for k in kinds)
    if -1 in codes:
        return None
    out = _native.encode(rows, codes, single)
    if out is None:
        return None
    # (the C encoder's offsets run from 0 to len(words), non-decreasing, and nothing else holds its
    # bytearrays: no checks, no copies)
    words, offsets = np.frombuffer(out[0], dtype=np.int32), np.frombuffer(out[1], dtype=np.int64)
    if not (words.flags.aligned and offsets.flags.aligned):  # (bytearrays are; copies would be)
        return Encoded(words, offsets)
    return Encoded._made(words, offsets)


def encode_tuples(tuples: Sequence[Sequence], kinds: Sequence[str], where: str = "argument") -> Encoded:
    """Encode argument tuples for a signature `kinds`, checking every value. Rows of plain ints,
    bools and lists go through the C encoder; anything else (numpy values, other sequences, every
    error) through the vectorized Python code below, whose scans run in C (map, zip, numpy)."""
    if isinstance(tuples, np.ndarray) and tuples.ndim == 2 and list(kinds) not in (["list"], ["list[int]"]):
        tuples = tuples.tolist()  # one row per tuple (for one list parameter, a row is that list)
    fast = _native_encode(tuples, kinds, False)
    if fast is not None:
        return fast
    if not isinstance(tuples, (list, tuple)):
        tuples = list(tuples)
    if not set(map(type, tuples)) <= {tuple, list}:  # bare values are 1-tuples
        tuples = [t if isinstance(t, (tuple, list)) else (t,) for t in tuples]
    n, k = len(tuples), len(kinds)
    if set(map(len, tuples)) - {k}:
        bad = next(t for t in tuples if len(t) != k)
        hint = (" (a numpy array there is one list argument: give argument tuples, e.g. rows.tolist())"
                if len(bad) == 1 and isinstance(bad[0], np.ndarray) else "")
        raise TypeError(f"{where}: expected {k} arguments, got {len(bad)}{hint}")
    columns = list(zip(*tuples)) if n and k else [()] * k
    return _encode_columns(columns, kinds, n, where)


def _encode_columns(columns: Sequence[Sequence], kinds: Sequence[str], n: int, where: str) -> Encoded:
    """encode_tuples on its values by parameter: columns[j] holds the n values of parameter j."""
    k = len(kinds)
    sizes = np.full((n, k), 2, dtype=np.int64)  # [kind, value] or [kind, len, elements...]
    payload = []
    for j, kind in enumerate(kinds):
        col = columns[j]
        label = f"{where} {j + 1}"
        if kind in ("list", "list[int]"):
            types = set(map(type, col))
            for t in types:
                if not issubclass(t, (list, tuple, np.ndarray)):
                    raise TypeError(f"{label}: expected list, got {t.__name__}")
            lens = np.fromiter(map(len, col), dtype=np.int64, count=n)
            if any(issubclass(t, np.ndarray) for t in types):
                flat = [v for xs in col for v in (xs.tolist() if isinstance(xs, np.ndarray) else xs)]
            else:
                flat = list(chain.from_iterable(col))
            payload.append((oc.KIND_LIST, lens, _int_array(flat, f"{label} (list element)")))
            sizes[:, j] += lens
        elif kind == "bool":
            for t in set(map(type, col)):
                if t is not bool and t is not np.bool_:
                    raise TypeError(f"{label}: expected bool, got {t.__name__}")
            payload.append((oc.KIND_BOOL, np.array(col, dtype=np.int64), None))
        elif kind == "int":
            payload.append((oc.KIND_INT, _int_array(col, label), None))
        else:
            raise ValueError(f"unknown kind {kind!r}")
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes.sum(axis=1), out=offsets[1:])
    starts = offsets[:-1, None] + np.cumsum(sizes, axis=1) - sizes  # (n, k) where each value begins
    words = np.zeros(int(offsets[-1]), dtype=np.int32)
    for j, (code, values, elems) in enumerate(payload):
        words[starts[:, j]] = code
        words[starts[:, j] + 1] = values  # the value, or the list length
        if elems is not None and len(elems):
            first = np.repeat(starts[:, j] + 2, values)
            within = np.arange(len(elems)) - np.repeat(np.cumsum(values) - values, values)
            words[first + within] = elems
    return Encoded(words, offsets)


def encode_results(values: Sequence, kind: str) -> Encoded:
    """Encode expected results (one value each) of a function returning `kind`."""
    if kind not in KIND_BY_NAME:
        raise ValueError(f"unknown kind {kind!r}")
    values = values if isinstance(values, (list, tuple)) else list(values)
    fast = _native_encode(values, (kind,), True)
    if fast is not None:
        return fast
    return _encode_columns([values], [kind], len(values), "expected value")
