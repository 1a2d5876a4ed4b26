"""CompileError: what the C++ compiler reports (an error code, line, column and argument),
formatted with the message templates of vm/opcodes.py."""
from __future__ import annotations

import re

from vramgym.vm import opcodes as oc

_TYPE_NAMES = {oc.KIND_INT: "int", oc.KIND_BOOL: "bool", oc.KIND_LIST: "list[int]", 3: "None"}
NAME_AT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class CompileError(Exception):
    """A program outside the language. `.line` and `.col` are 1-based; `.kind` names the error."""

    def __init__(self, kind: str, message: str, line: int, col: int):
        super().__init__(f"{line}:{col}: {message}")
        self.kind = kind
        self.message = message
        self.line = line
        self.col = col


def _name_at(source: str | None, line: int, col: int) -> str:
    if not source:
        return "?"
    lines = re.split(r"\r\n|\r|\n", source)
    if not 1 <= line <= len(lines):
        return "?"
    m = NAME_AT.match(lines[line - 1], col - 1)
    return m.group(0) if m else "?"


def make_error(err, source: str | None) -> CompileError:
    code, line, col, arg = (int(x) for x in err)
    template = oc.ERROR_MESSAGES.get(code, "unknown error {arg}")
    message = template.format(name=_name_at(source, line, col), arg=arg,
                              tok=oc.TOKEN_TEXT.get(arg, "?"), type=_TYPE_NAMES.get(arg, "?"))
    return CompileError(oc.ERROR_NAMES.get(code, f"error_{code}"), message, line, col)
