"""compile_source: one program, with its function signatures, for the Python API and the CLI."""
from __future__ import annotations

import re

import numpy as np

from vramgym.vm import cpu
from vramgym.vm import opcodes as oc
from vramgym.vm.opcodes import BUILTIN_NAMES
from vramgym.vm.program import Function, Program
from vramgym.vm.values import KIND_NAME

from .errors import NAME_AT, make_error



def compile_source(source: str) -> Program:
    """Compile a program. Raises CompileError (with line and column) for anything outside the
    language; see docs/language.md."""
    if isinstance(source, (bytes, bytearray, memoryview)):  # as tokenize and compile_batch take them
        raw = bytes(source)
        text = raw.decode("ascii", errors="replace")
    elif isinstance(source, str):
        raw = source.encode("utf-8", errors="surrogatepass")
        text = source
    else:
        raise TypeError(f"source must be str or bytes, not {type(source).__name__}")
    code, err, meta = cpu.compile_one(raw)
    if code is None:
        raise make_error(err, text)
    plain: dict[bytes, list] = {}
    if b'"' not in raw and b"'" not in raw:   # (a docstring may hold a def line of its own)
        for d in _PLAIN_DEF.finditer(raw):
            plain.setdefault(d.group(1), []).append(d.group(2))
    functions, names = [], None
    for i, m in enumerate(meta.tolist()):
        pc, off, ln, nparams, ret, nlocals = m[:6]
        # (off < 0: a function named like a builtin or a list method, whose name is interned as it)
        name = raw[off:off + ln].decode("ascii") if off >= 0 else BUILTIN_NAMES[ln]   # ln: the builtin's id
        found = plain.get(name.encode(), ())
        if len(found) == 1:
            pnames = tuple(p.split(b":", 1)[0].strip().decode("ascii") for p in found[0].split(b",") if p.strip())
        else:   # a comment in the signature, a name interned as a builtin's, strings, bare CRs: the tokens
            names = _param_names(raw, text) if names is None else names
            pnames = names.get(name, ())
        params = tuple(KIND_NAME[k] for k in m[6:6 + nparams])
        functions.append(Function(name, i, pc, params, KIND_NAME[ret], nlocals, pnames))
    return Program(code, functions, source=text)


def tokenize(source: str):
    """The token array of a source: (T, 4) int32 rows (kind, value, line, col), kinds from
    opcodes.TOKENS, NAME values as name ids, ending with EOF; compile_tokens accepts it.
    Raises CompileError for lexical errors."""
    if not isinstance(source, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"source must be str or bytes, not {type(source).__name__}")
    raw = source.encode("utf-8", errors="surrogatepass") if isinstance(source, str) else bytes(source)
    toks, err = cpu.tokenize(raw)
    if toks is None:
        raise make_error(err, raw.decode("ascii", errors="replace"))
    return toks


_TOK = {name: i for i, (name, _) in enumerate(oc.TOKENS)}

# A def line as most signatures are written: `def name(params)` at a line's start with no comment
# or backslash in the parentheses, so that splitting at commas and colons reads the parameter
# names as the compiler read them (the source compiled; a line cannot start with `def` inside
# brackets, and there are no nested functions). Only in sources without quotes: a string (a
# docstring, which the compiler skips) may hold such a line too.
_PLAIN_DEF = re.compile(rb"^[ \t\f]*def[ \t\f]+([A-Za-z_][A-Za-z0-9_]*)[ \t\f]*\(([^()#\\]*)\)", re.M)


def _param_names(raw: bytes, text: str) -> dict[str, tuple[str, ...]]:
    """Each function's parameter names, for signatures in disassembly and task signatures, read
    from the tokens of a source that compiled (so comments, line joins inside the parentheses
    and any line ending are read as the compiler reads them)."""
    toks, _ = cpu.tokenize(raw)
    kinds = toks[:, 0].tolist()
    lines = re.split(r"\r\n|\r|\n", text)

    def name(i):
        return NAME_AT.match(lines[toks[i, 2] - 1], toks[i, 3] - 1).group(0)
    out = {}
    for i in np.flatnonzero(toks[:, 0] == _TOK["DEF"]).tolist():  # (a loop over signatures, not tokens)
        if kinds[i + 1] != _TOK["NAME"]:
            continue
        params, depth, j = [], 0, i + 2   # j: the '(' (the source compiled)
        while True:
            k = kinds[j]
            depth += k in (_TOK["LPAREN"], _TOK["LBRACKET"])
            depth -= k in (_TOK["RPAREN"], _TOK["RBRACKET"])
            if depth == 0:
                break
            if depth == 1 and k == _TOK["NAME"] and kinds[j - 1] in (_TOK["LPAREN"], _TOK["COMMA"]):
                params.append(name(j))
            j += 1
        out[name(i + 1)] = tuple(params)
    return out
