"""compile_source: one program, with its function signatures, for the Python API and the CLI."""
from __future__ import annotations

from vramgym.vm import cpu
from vramgym.vm.opcodes import BUILTIN_NAMES
from vramgym.vm.program import Function, Program
from vramgym.vm.values import KIND_NAME

from .errors import make_error



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
    for i, m in enumerate(meta):
        pc, off, ln, nparams, ret, nlocals = (int(x) for x in m[:6])
        name = raw[off:off + ln].decode("ascii") if off >= 0 else BUILTIN_NAMES[ln]  # ln: the builtin's id
        params = tuple(KIND_NAME[int(k)] for k in m[6:6 + nparams])
        functions.append(Function(name, i, pc, params, KIND_NAME[ret], nlocals, _param_names(text, name)))
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


def _param_names(text: str, name: str) -> tuple[str, ...]:
    """Parameter names for signatures in disassembly, read back from the source text."""
    import re
    m = re.search(rf"^def\s+{re.escape(name)}\s*\(([^)]*)\)", text, re.MULTILINE)
    if not m:
        return ()
    return tuple(p.split(":")[0].strip() for p in m.group(1).split(",") if p.strip())
