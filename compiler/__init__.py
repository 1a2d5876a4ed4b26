"""The vramgym compiler: source text (or token arrays) to stack bytecode, on the C++ core.

    from vramgym.compiler import compile_source
    prog = compile_source("def f(x: int) -> int:\n    return x * 2\n")
    print(prog.disassemble())
"""
from __future__ import annotations

from .batch import CompiledBatch, compile_batch, compile_tokens
from .errors import CompileError
from .frontend import compile_source, tokenize

__all__ = ["compile_source", "tokenize", "CompileError", "compile_batch", "compile_tokens", "CompiledBatch"]
