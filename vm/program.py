"""A compiled program: its bytecode image, its functions' signatures, and a disassembler."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from . import opcodes as oc
from .values import KIND_BY_NAME, int_array


@dataclass(frozen=True)
class Function:
    name: str
    index: int  # position among the program's functions (the batch API's entry index)
    pc: int  # index of its FUNC word
    params: tuple[str, ...]  # kinds: 'int' | 'bool' | 'list'
    ret: str
    nlocals: int
    param_names: tuple[str, ...] = ()

    def signature(self) -> str:
        names = self.param_names or tuple(f"a{i}" for i in range(len(self.params)))
        ps = ", ".join(f"{n}: {_type(k)}" for n, k in zip(names, self.params))
        return f"def {self.name}({ps}) -> {_type(self.ret)}"


def _canonical(f: Function) -> Function:
    """A hand-made Function with its kinds spelled as the compiler spells them ('list[int]' is
    'list'); ValueError for a kind the VM has not (execute would decode its result wrongly)."""
    def kind(k, what):
        if not isinstance(k, str) or k not in KIND_BY_NAME:
            raise ValueError(f"function {f.name!r}: {what} kind {k!r} is not one of {sorted(KIND_BY_NAME)}")
        return "list" if k == "list[int]" else k
    if isinstance(f.params, str) or not isinstance(f.params, (tuple, list)):
        raise TypeError(f"function {f.name!r}: params must be a tuple of kinds, got {f.params!r:.60}")
    return replace(f, params=tuple(kind(k, "parameter") for k in f.params), ret=kind(f.ret, "return"))


def code_words(words, name: str = "words", ndim: int = 1) -> np.ndarray:
    """Instruction words as a contiguous uint32 array: integers only (no float or bool cast), and
    int32 views of the words (negative values, torch has no uint32) welcome; TypeError/ValueError
    otherwise."""
    words = np.asarray(words)
    if words.dtype == np.int32:  # the same bits: no check, no copy
        words = np.ascontiguousarray(words).view(np.uint32)
    elif words.dtype != np.uint32:  # wider ints holding the words: checked, not wrapped
        words = int_array(words, name, -(2**31), 2**32 - 1, np.int64, ndim) & 0xFFFFFFFF
    return int_array(words, name, 0, 2**32 - 1, np.uint32, ndim)


def _type(kind: str) -> str:
    return "list[int]" if kind == "list" else kind


@dataclass
class Program:
    code: np.ndarray  # (n,) uint32 instruction words
    functions: list[Function] = field(default_factory=list)
    source: str | None = None
    typed: bool = True  # False: the functions' kinds are from_code's guess, not declared

    def function(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name:
                return f
        known = ", ".join(f.name for f in self.functions) or "none"
        raise KeyError(f"no function {name!r} in this program (functions: {known})")

    @classmethod
    def from_code(cls, words, functions: list[Function] | None = None) -> "Program":
        """A program from raw instruction words (hand-made or from a model). Without
        `functions`, every FUNC word starts a function f0, f1, ... with int parameters and an
        int result. The words are validated when they run (invalid ones trap bad_bytecode; so
        does an image of more than 65,536 words, MAX_CODE, as a whole)."""
        code = code_words(words)
        if functions is None:
            functions = []
            for pc in np.flatnonzero((code & 0xFF) == oc.OP_BY_NAME["FUNC"].code):
                w = int(code[pc])
                i = len(functions)
                functions.append(Function(f"f{i}", i, int(pc), ("int",) * ((w >> 8) & 0xFF), "int", (w >> 16) & 0xFF))
            return cls(code, functions, typed=False)
        if not isinstance(functions, (list, tuple)) or not all(isinstance(f, Function) for f in functions):
            raise TypeError("functions must be a list of vramgym.vm.Function, got "
                            f"{type(functions).__name__} {functions!r:.80}")
        return cls(code, [_canonical(f) for f in functions])

    def disassemble(self, function: str | None = None) -> str:
        """The whole program, or one function's code."""
        if function is None:
            return disassemble(self.code, self.functions)
        f = self.function(function)
        end = min((g.pc for g in self.functions if g.pc > f.pc), default=len(self.code))
        return disassemble(self.code[:end], self.functions, start=f.pc)

    def __str__(self) -> str:
        return self.disassemble()

    def __len__(self) -> int:
        return len(self.code)


def format_instruction(pc: int, word: int, functions_by_pc: dict[int, Function] | None = None) -> str:
    op, arg = oc.decode(int(word))
    info = oc.OP_BY_CODE.get(op)
    if info is None:
        return f"{pc:5d}  {word:08x}  ??? (opcode {op})"
    text = f"{pc:5d}  {info.name:<22}"
    if info.arg == "imm":
        text += f"{oc.signed_arg(arg)}"
    elif info.arg == "header":
        text += f"params={arg & 0xFF} locals={arg >> 8}"
    elif info.arg == "func":
        f = (functions_by_pc or {}).get(arg)
        text += f"{arg}" + (f"  ({f.name})" if f else "")
    elif info.arg == "target":
        text += f"-> {arg}"
    elif info.arg != "none" or arg:
        text += f"{arg}"
    return text.rstrip()


def disassemble(code, functions: list[Function] | None = None, start: int = 0) -> str:
    by_pc = {f.pc: f for f in functions or []}
    lines = []
    for pc, w in enumerate(code_words(code, "code")[start:], start):
        f = by_pc.get(pc)
        if f is not None:
            lines.append(("" if pc == start else "\n") + f"{f.signature()}:")
        lines.append(format_instruction(pc, int(w), by_pc))
    return "\n".join(lines)
