"""Values crossing the Python/VM boundary: traps, kinds, and the flat int32 encoding of
arguments and expected results ([kind, payload...] per value) that every backend reads."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import opcodes as oc

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
        self.words = np.ascontiguousarray(words, dtype=np.int32)
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        if self.offsets.ndim != 1 or len(self.offsets) < 1 or self.offsets[0] != 0 or self.offsets[-1] != len(self.words):
            raise ValueError("offsets must start at 0 and end at len(words)")
        if np.any(np.diff(self.offsets) < 0):
            raise ValueError("offsets must be non-decreasing")

    def __len__(self):
        return len(self.offsets) - 1


def encode_tuples(tuples: Sequence[Sequence], kinds: Sequence[str], where: str = "argument") -> Encoded:
    """Encode argument tuples for a signature `kinds`, checking every value."""
    words: list[int] = []
    offsets = [0]
    for t in tuples:
        if not isinstance(t, (tuple, list)):
            t = (t,)
        if len(t) != len(kinds):
            raise TypeError(f"{where}: expected {len(kinds)} arguments, got {len(t)}")
        for i, (v, k) in enumerate(zip(t, kinds)):
            check_value(v, k, f"{where} {i + 1}")
            encode_value(v, k, words)
        offsets.append(len(words))
    return Encoded(np.array(words, dtype=np.int32), np.array(offsets, dtype=np.int64))


def encode_results(values: Sequence, kind: str) -> Encoded:
    """Encode expected results (one value each) of a function returning `kind`."""
    return encode_tuples([(v,) for v in values], [kind], "expected value")
