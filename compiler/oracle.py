"""CPython as the oracle of the language's meaning.

`run_python(source, entry, args_list)` runs a vramgym program under CPython and returns, per
argument tuple, the value the entry function returns or the `Trap` the VM must report.

CPython ints are unbounded while vramgym ints are int32. The oracle therefore runs the program
with every int value an `I32`, an int subclass whose arithmetic (`+ - * // %`, unary `-` and
`+`, `abs`) raises `OracleOverflow` at exactly the operation whose exact result leaves int32,
which is where the VM traps `overflow`. Augmented assignments (`x += e`, `xs[i] *= e`) go
through the same methods, with CPython's own evaluation order.

Every int is born an I32:
* integer literals: each int literal in the source (`5`, `0x1F`, `1_000`) is replaced by a
  global name bound to an I32 (`5` -> `_λ5`: non-ASCII, so no program's own name can be it).
  This also stops CPython's constant folding, which would otherwise compute `2147483647 + 1` at
  compile time, unchecked. Only NUMBER tokens are replaced (Python's tokenize finds them), not
  digits inside strings or comments: `b'version 2'` would become bytes with a non-ASCII name in
  it, which CPython refuses.
* int arguments and the elements of list arguments are wrapped before each call;
* `len()` and `range()` are replaced in the program's globals by versions that yield I32s;
* everything else (list elements, min/max, pop) returns values that are already I32.

This keeps the program CPython's plain bytecode (no AST rewriting, which costs several times
more than compiling), so the oracle runs thousands of programs per second.
"""
from __future__ import annotations

import io
import re
import tokenize

from vramgym.vm import Trap

__all__ = ["run_python", "prepare", "I32", "OracleOverflow", "Trap"]

INT_MIN, INT_MAX = -(2**31), 2**31 - 1


class OracleOverflow(ArithmeticError):
    """An int result outside int32: the VM's `overflow` trap."""


_new = int.__new__
_add, _sub, _mul = int.__add__, int.__sub__, int.__mul__
_floordiv, _mod, _neg, _abs = int.__floordiv__, int.__mod__, int.__neg__, int.__abs__


class I32(int):
    """An int whose arithmetic traps outside [-2**31, 2**31 - 1]. The reflected methods
    matter only if a plain int leaks in; `n * xs` returns NotImplemented so that the list
    repeats itself."""
    __slots__ = ()

    def __add__(a, b):
        r = _add(a, b)
        if INT_MIN <= r <= INT_MAX:
            return _new(I32, r)
        raise OracleOverflow

    __radd__ = __add__

    def __sub__(a, b):
        r = _sub(a, b)
        if INT_MIN <= r <= INT_MAX:
            return _new(I32, r)
        raise OracleOverflow

    def __rsub__(a, b):
        return I32.__sub__(_new(I32, b), a)

    def __mul__(a, b):
        r = _mul(a, b)
        if r is NotImplemented:  # n * xs: let the list handle it
            return r
        if INT_MIN <= r <= INT_MAX:
            return _new(I32, r)
        raise OracleOverflow

    __rmul__ = __mul__

    def __floordiv__(a, b):
        r = _floordiv(a, b)  # raises ZeroDivisionError
        if INT_MIN <= r <= INT_MAX:  # only -2**31 // -1 leaves the range
            return _new(I32, r)
        raise OracleOverflow

    def __rfloordiv__(a, b):
        return I32.__floordiv__(_new(I32, b), a)

    def __mod__(a, b):
        return _new(I32, _mod(a, b))  # |a % b| < |b|: never overflows

    def __rmod__(a, b):
        return _new(I32, _mod(b, a))

    def __neg__(a):
        r = _neg(a)
        if r <= INT_MAX:
            return _new(I32, r)
        raise OracleOverflow

    def __pos__(a):
        return a

    def __abs__(a):
        r = _abs(a)
        if r <= INT_MAX:
            return _new(I32, r)
        raise OracleOverflow


_builtin_len, _builtin_range = len, range


def _len(xs):
    return _new(I32, _builtin_len(xs))


def _range(*args):
    return map(I32, _builtin_range(*args))  # range() itself raises ValueError on step 0


_INT = re.compile(r"0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|[0-9][0-9_]*")
# where Python's tokenizer raises: every int-like run not inside a name (a number may run into a
# keyword: `1if`), which also rewrites digits in strings (compile() then reports the error)
_LITERAL = re.compile(r"(?<![A-Za-z_0-9])(?:" + _INT.pattern + ")")


def _int_literals(source: str) -> list[tuple[int, int]]:
    """The [start, end) offsets of the int literals in source (its line breaks all \n)."""
    lines = io.StringIO(source).readlines()  # (at \n only: str.splitlines would also split at \f)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    try:
        return [(starts[t.start[0] - 1] + t.start[1], starts[t.end[0] - 1] + t.end[1])
                for t in tokenize.generate_tokens(iter(lines).__next__)
                if t.type == tokenize.NUMBER and _INT.fullmatch(t.string)]
    except (tokenize.TokenError, SyntaxError, StopIteration):
        return [m.span() for m in _LITERAL.finditer(source)]


def prepare(source: str, filename: str = "<vramgym>") -> dict:
    """Compile `source` for the oracle: the namespace (globals) holding its functions."""
    # (CPython reads \r\n and \r as \n, in strings too)
    source = source.replace("\r\n", "\n").replace("\r", "\n")
    literals, parts, done = {}, [], 0
    for a, b in _int_literals(source):
        text = source[a:b]
        n = "_λ" + text  # non-ASCII: no name of the language (ASCII only) can be it, as `_vg_1` could
        digits, base = text.replace("_", ""), {"x": 16, "o": 8, "b": 2}.get(text[1:2].lower(), 10)
        literals[n] = I32(int(digits[2:] if base != 10 else digits, base))
        parts += [source[done:a], n + " " if source[b:b + 1].isalpha() else n]  # `1if` -> `_λ1 if`
        done = b
    code = compile("".join(parts) + source[done:], filename, "exec")
    namespace = {"len": _len, "range": _range, **literals}
    exec(code, namespace)
    return namespace


def _arg(a):
    if type(a) is list:
        return [I32(x) for x in a]  # a fresh copy per call
    if type(a) is int:
        return I32(a)
    return a


def _result(v):
    if type(v) is list:
        return [int(x) for x in v]
    if type(v) is I32:
        return int(v)
    return v


_EXCEPTIONS = (
    (OracleOverflow, "overflow"),
    (ZeroDivisionError, "zero_division"),
    (IndexError, "index_error"),
    (RecursionError, "recursion"),
    (ValueError, "value_error"),
    (MemoryError, "out_of_memory"),
)


def run_python(source: str, entry: str, args_list) -> list:
    """Run `entry` of `source` on each argument tuple: a list of results, each an int, a bool,
    a list[int] or a `Trap`. Each call gets fresh copies of its list arguments; the program
    runs in a fresh namespace. Exceptions that are not traps of the language (TypeError,
    NameError, ...) propagate: the program is not a valid vramgym program."""
    fn = prepare(source)[entry]
    out = []
    for args in args_list:
        try:
            out.append(_result(fn(*[_arg(a) for a in args])))
        except _CAUGHT as e:
            out.append(Trap(_kind(e)))
    return out


_CAUGHT = tuple(e for e, _ in _EXCEPTIONS)


def _kind(e: BaseException) -> str:
    for cls, kind in _EXCEPTIONS:
        if isinstance(e, cls):
            return kind
    raise AssertionError(e)

