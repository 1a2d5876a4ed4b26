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
    functions = []
    names = _param_names(raw, text)
    for i, m in enumerate(meta):
        pc, off, ln, nparams, ret, nlocals = (int(x) for x in m[:6])
        name = raw[off:off + ln].decode("ascii") if off >= 0 else BUILTIN_NAMES[ln]  # ln: the builtin's id
        params = tuple(KIND_NAME[int(k)] for k in m[6:6 + nparams])
        functions.append(Function(name, i, pc, params, KIND_NAME[ret], nlocals, names.get(name, ())))
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
