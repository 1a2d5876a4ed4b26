"""The golden corpus: small programs under tests/corpus/ with their expectations in comments.

    # call: f(1, -2) -> -1            entry, Python-literal args, expected value (int, bool, list)
    # call: f(0) -> trap zero_division
    # error: 3:9 undefined name       the file must fail to compile there (one per file)
    # config: fuel=500 max_depth=50   VM configuration for every call of the file

`load_cases()` parses every file (a malformed expectation raises CorpusError with its place);
`cpython_result()` runs one call under CPython, the oracle of the language's meaning.
"""
from __future__ import annotations

import ast
import copy
import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent / "corpus"
_OPCODES = Path(__file__).resolve().parent.parent / "vm" / "opcodes.py"

CONFIG_KEYS = ("fuel", "max_depth", "heap_size", "max_lists", "stack_size")
# Traps that are Python exceptions: CPython must raise the same.
PYTHON_TRAPS = {ZeroDivisionError: "zero_division", IndexError: "index_error",
                ValueError: "value_error"}
# Traps that CPython cannot reproduce (unbounded ints, no step budget, deeper recursion, ...).
VM_ONLY_TRAPS = ("overflow", "out_of_fuel", "recursion", "out_of_memory")

_MARKER = re.compile(r"#\s*(call|error|config)\s*:(.*)$")
_CALL = re.compile(r"(.+?)\s*->\s*(.+)$")
_ERROR = re.compile(r"(\d+):(\d+)\s+(\S.*)$")


def _load_trap_names() -> tuple[str, ...]:
    try:
        from vramgym.vm.opcodes import TRAPS
    except ImportError:  # not installed yet: read the source of truth from the checkout
        spec = importlib.util.spec_from_file_location("_vg_opcodes", _OPCODES)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # dataclasses look their module up while it loads
        spec.loader.exec_module(mod)
        TRAPS = mod.TRAPS
    return tuple(name for code, name, _ in TRAPS if code != 0)


TRAP_NAMES = _load_trap_names()


class CorpusError(Exception):
    """A corpus file whose expectations cannot be parsed."""


@dataclass(frozen=True)
class TrapExpect:
    kind: str

    def __str__(self) -> str:
        return f"trap {self.kind}"


@dataclass(frozen=True)
class Call:
    entry: str
    args: tuple
    expect: object  # int | bool | list[int] | TrapExpect
    line: int

    def __str__(self) -> str:
        args = ", ".join(map(repr, self.args))
        return f"line {self.line}: {self.entry}({args}) -> {self.expect!r}"


@dataclass(frozen=True)
class CompileErrorExpect:
    line: int
    col: int
    text: str


@dataclass
class Case:
    path: Path
    source: str
    calls: list[Call] = field(default_factory=list)
    error: CompileErrorExpect | None = None
    config: dict[str, int] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.path.relative_to(ROOT).as_posix()


def _literal(text: str, where: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError) as e:
        raise CorpusError(f"{where}: not a Python literal: {text!r}") from e


def _check_value(v, where: str) -> None:
    ok = isinstance(v, (bool, int)) or (
        isinstance(v, list) and all(type(x) is int for x in v))
    if not ok:
        raise CorpusError(f"{where}: values are int, bool or list[int], got {v!r}")


def _parse_call(text: str, where: str, lineno: int) -> Call:
    m = _CALL.match(text)
    if not m:
        raise CorpusError(f"{where}: expected 'ENTRY(ARGS) -> VALUE | trap KIND', got {text!r}")
    lhs, rhs = m.groups()
    try:
        node = ast.parse(lhs, mode="eval").body
    except SyntaxError as e:
        raise CorpusError(f"{where}: bad call {lhs!r}") from e
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords):
        raise CorpusError(f"{where}: expected ENTRY(ARGS), got {lhs!r}")
    args = tuple(_literal(ast.unparse(a), where) for a in node.args)
    for a in args:
        _check_value(a, where)
    rhs = rhs.strip()
    if rhs.startswith("trap"):
        kind = rhs[4:].strip()
        if kind not in TRAP_NAMES:
            raise CorpusError(f"{where}: unknown trap {kind!r} (known: {', '.join(TRAP_NAMES)})")
        expect = TrapExpect(kind)
    else:
        expect = _literal(rhs, where)
        _check_value(expect, where)
    return Call(node.func.id, args, expect, lineno)


def _parse_config(text: str, where: str) -> dict[str, int]:
    config = {}
    for item in text.split():
        key, sep, value = item.partition("=")
        if not sep or key not in CONFIG_KEYS or not value.isdigit():
            raise CorpusError(f"{where}: bad config item {item!r} (keys: {', '.join(CONFIG_KEYS)})")
        config[key] = int(value)
    if not config:
        raise CorpusError(f"{where}: empty config")
    return config


def parse_case(path: Path) -> Case:
    # Bytes decoded as-is: line endings (\r\n, \r) and tabs are part of some tests.
    source = path.read_bytes().decode("utf-8")
    case = Case(path, source)
    lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for lineno, line in enumerate(lines, 1):
        m = _MARKER.search(line)
        if not m:
            continue
        kind, text = m.group(1), m.group(2).strip()
        where = f"{path}:{lineno}"
        if kind == "call":
            case.calls.append(_parse_call(text, where, lineno))
        elif kind == "config":
            if case.config:
                raise CorpusError(f"{where}: more than one config line")
            case.config = _parse_config(text, where)
        else:
            em = _ERROR.match(text)
            if not em:
                raise CorpusError(f"{where}: expected 'LINE:COL MESSAGE', got {text!r}")
            if case.error:
                raise CorpusError(f"{where}: more than one error line")
            case.error = CompileErrorExpect(int(em[1]), int(em[2]), em[3].strip())
    if case.error and (case.calls or case.config):
        raise CorpusError(f"{path}: an error file has no calls or config")
    if not case.error and not case.calls:
        raise CorpusError(f"{path}: no '# call:' or '# error:' expectation")
    return case


def load_cases(root: Path = ROOT) -> list[Case]:
    return [parse_case(p) for p in sorted(root.rglob("*.py"))]


def _oracle():
    """`vramgym.compiler.oracle.run_python` where it exists (it models int32 overflow)."""
    try:
        from vramgym.compiler.oracle import run_python
    except ImportError:
        return None
    return run_python


def cpython_checkable(call: Call) -> bool:
    """Whether CPython can confirm this expectation."""
    if not isinstance(call.expect, TrapExpect) or call.expect.kind not in VM_ONLY_TRAPS:
        return True
    return call.expect.kind == "overflow" and _oracle() is not None


def _plain_exec(source: str, entry: str, args_list) -> list:
    namespace: dict = {}
    exec(compile(source, "<corpus>", "exec"), namespace)
    return [namespace[entry](*args) for args in args_list]


def cpython_result(case: Case, call: Call):
    """CPython's value for `call`, or TrapExpect(kind) where it raises (or, through the
    oracle, returns) a trap."""
    run = _oracle() or _plain_exec
    try:
        [result] = run(case.source, call.entry, [copy.deepcopy(call.args)])
    except tuple(PYTHON_TRAPS) as e:
        return TrapExpect(next(k for t, k in PYTHON_TRAPS.items() if isinstance(e, t)))
    kind = getattr(result, "kind", None)  # the oracle's Trap
    return TrapExpect(kind) if isinstance(kind, str) else result


def same_value(got, expect) -> bool:
    """Exact equality of results: bool is not int, and list elements are ints."""
    if isinstance(expect, list):
        return (type(got) is list and len(got) == len(expect)
                and all(type(g) is int and g == e for g, e in zip(got, expect)))
    return type(got) is type(expect) and got == expect
