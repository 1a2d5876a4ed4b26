"""The single source of truth for the bytecode: opcodes, instruction encoding, trap codes,
compile-error codes, token kinds and limits.

`vm/csrc/opcodes.h` is generated from this module (`python -m vramgym.vm.opcodes --write`),
and a test checks that the committed header matches it.

Instruction word (32 bits):  bits 0..7 = opcode, bits 8..31 = argument (24 bits).
LOAD_CONST's argument is signed (two's complement, 24 bits); CONST_EXT extends the value on
top of the stack by one more byte, so every int32 constant takes at most two words.
"""
from __future__ import annotations

from dataclasses import dataclass

ARG_BITS = 24
ARG_MASK = (1 << ARG_BITS) - 1


@dataclass(frozen=True)
class Op:
    code: int
    name: str
    arg: str  # "none" | "imm" (signed) | "byte" | "slot" | "target" | "count" | "func" | "header"
    pops: int  # values popped (-1: depends on the argument)
    pushes: int
    doc: str


# Stack notation in docs: (before -- after), top of stack on the right.
OPS: tuple[Op, ...] = (
    Op(1, "LOAD_CONST", "imm", 0, 1, "( -- v)  push the sign-extended 24-bit argument"),
    Op(2, "CONST_EXT", "byte", 1, 1, "(v -- v<<8|b)  extend a constant by one byte (b < 256)"),
    Op(3, "LOAD_VAR", "slot", 0, 1, "( -- locals[a])"),
    Op(4, "STORE_VAR", "slot", 1, 0, "(v -- )  locals[a] = v"),
    Op(5, "POP", "none", 1, 0, "(v -- )"),
    Op(6, "DUP", "none", 1, 2, "(a -- a a)"),
    Op(7, "DUP2", "none", 2, 4, "(a b -- a b a b)"),
    Op(8, "SWAP", "none", 2, 2, "(a b -- b a)"),
    Op(9, "ROT3", "none", 3, 3, "(a b c -- c a b)"),
    Op(10, "REVERSE", "count", -1, -1, "(v1 .. vn -- vn .. v1)  n = a, 2 <= n <= 255"),
    Op(11, "BINARY_ADD", "none", 2, 1, "(a b -- a+b)  traps overflow"),
    Op(12, "BINARY_SUB", "none", 2, 1, "(a b -- a-b)  traps overflow"),
    Op(13, "BINARY_MUL", "none", 2, 1, "(a b -- a*b)  traps overflow"),
    Op(14, "BINARY_DIV", "none", 2, 1, "(a b -- a//b)  floor division; traps zero_division, overflow"),
    Op(15, "BINARY_MOD", "none", 2, 1, "(a b -- a%b)  floor modulo (sign of b); traps zero_division"),
    Op(16, "UNARY_NEG", "none", 1, 1, "(a -- -a)  traps overflow"),
    Op(17, "UNARY_NOT", "none", 1, 1, "(a -- a==0)"),
    Op(18, "ABS", "none", 1, 1, "(a -- abs(a))  traps overflow"),
    Op(19, "MIN", "none", 2, 1, "(a b -- min(a,b))"),
    Op(20, "MAX", "none", 2, 1, "(a b -- max(a,b))"),
    Op(21, "COMPARE_LT", "none", 2, 1, "(a b -- a<b)"),
    Op(22, "COMPARE_LE", "none", 2, 1, "(a b -- a<=b)"),
    Op(23, "COMPARE_GT", "none", 2, 1, "(a b -- a>b)"),
    Op(24, "COMPARE_GE", "none", 2, 1, "(a b -- a>=b)"),
    Op(25, "COMPARE_EQ", "none", 2, 1, "(a b -- a==b)"),
    Op(26, "COMPARE_NE", "none", 2, 1, "(a b -- a!=b)"),
    Op(27, "JUMP", "target", 0, 0, "pc = a"),
    Op(28, "JUMP_IF_FALSE", "target", 1, 0, "(c -- )  if c == 0: pc = a"),
    Op(29, "JUMP_IF_TRUE", "target", 1, 0, "(c -- )  if c != 0: pc = a"),
    Op(30, "JUMP_IF_FALSE_OR_POP", "target", 1, 1, "(c -- c | )  if c == 0: pc = a (c stays) else pop"),
    Op(31, "JUMP_IF_TRUE_OR_POP", "target", 1, 1, "(c -- c | )  if c != 0: pc = a (c stays) else pop"),
    Op(32, "FOR_RANGE", "slot", 0, 1,
       "locals[a..a+2] = counter, stop, step. If the range goes on: push counter, advance it and "
       "skip the next word; else fall through to the next word (the loop's exit JUMP). "
       "Traps value_error when step == 0."),
    Op(33, "FOR_LIST", "slot", 0, 1,
       "locals[a..a+1] = list, index. If index < len(list): push list[index], index += 1 and skip "
       "the next word; else fall through to the next word (the loop's exit JUMP)."),
    Op(34, "CALL", "func", -1, 1, "(args -- result)  call the function whose FUNC word is at pc a"),
    Op(35, "RETURN", "none", 1, 0, "(v -- )  return v to the caller"),
    Op(36, "FUNC", "header", 0, 0,
       "function header: a = nparams | nlocals << 8 (nparams <= nlocals <= 255); "
       "never executed (reaching it traps bad_bytecode)"),
    Op(37, "BUILD_LIST", "count", -1, 1, "(v1 .. vn -- list)  n = a <= 255"),
    Op(38, "LIST_REPEAT", "none", 2, 1, "(xs n -- xs*n)  a new list"),
    Op(39, "LIST_CONCAT", "none", 2, 1, "(xs ys -- xs+ys)  a new list"),
    Op(40, "LIST_EXTEND", "none", 2, 1, "(xs ys -- xs)  xs += ys in place"),
    Op(41, "LEN", "none", 1, 1, "(xs -- len(xs))"),
    Op(42, "INDEX", "none", 2, 1, "(xs i -- xs[i])  negative i counts from the end; traps index_error"),
    Op(43, "STORE_INDEX", "none", 3, 0, "(v xs i -- )  xs[i] = v; traps index_error"),
    Op(44, "APPEND", "none", 2, 0, "(xs v -- )  xs.append(v)"),
    Op(45, "LIST_POP", "none", 1, 1, "(xs -- xs.pop())  traps index_error on an empty list"),
)
OP_BY_NAME = {op.name: op for op in OPS}
# The instructions that write state besides the operand stack (a local, a list, the frames).
# Every other one only pops and pushes. The VM's cycle check (vm/csrc/vm.h) starts over at each
# of these (at STORE_VAR only when the value changes): a loop that runs none of them and comes
# back with an empty operand stack never ends.
WRITES = ("STORE_VAR", "FOR_RANGE", "FOR_LIST", "CALL", "RETURN", "BUILD_LIST", "LIST_REPEAT", "LIST_CONCAT",
          "LIST_EXTEND", "STORE_INDEX", "APPEND", "LIST_POP")
OP_BY_CODE = {op.code: op for op in OPS}
NUM_OPCODES = max(OP_BY_CODE) + 1

# Run status of one (program, input) pair. 0 is success; every other value is a trap.
TRAPS: tuple[tuple[int, str, str], ...] = (
    (0, "ok", "the function returned a value"),
    (1, "zero_division", "// or % by zero (CPython: ZeroDivisionError)"),
    (2, "index_error", "index out of range, or pop from an empty list (CPython: IndexError)"),
    (3, "overflow", "an int result outside the signed 32-bit range"),
    (4, "out_of_fuel", "the step budget ran out"),
    (5, "recursion", "call depth or value stack exhausted"),
    (6, "out_of_memory", "list memory or the list table exhausted"),
    (7, "value_error", "range() with step 0 (CPython: ValueError)"),
    (8, "bad_bytecode", "invalid instruction, operand or stack use (only for hand-made bytecode)"),
    (9, "bad_input", "arguments that do not match the entry function, or a bad entry"),
)
TRAP_NAMES = {code: name for code, name, _ in TRAPS}
TRAP_CODES = {name: code for code, name, _ in TRAPS}

# Value kinds, used to encode arguments and expected results and to decode results.
KIND_INT, KIND_BOOL, KIND_LIST = 0, 1, 2
KIND_NAMES = {KIND_INT: "int", KIND_BOOL: "bool", KIND_LIST: "list[int]"}

# Token kinds: the lexer produces them from source text, and the environments' action
# vocabulary maps onto them, so the parser can start from either.
TOKENS: tuple[tuple[str, str], ...] = (
    ("EOF", "end of file"),
    ("NEWLINE", "newline"),
    ("INDENT", "indent"),
    ("DEDENT", "dedent"),
    ("NAME", "name"),
    ("INT", "integer"),
    ("DEF", "'def'"), ("RETURN", "'return'"), ("IF", "'if'"), ("ELIF", "'elif'"),
    ("ELSE", "'else'"), ("WHILE", "'while'"), ("FOR", "'for'"), ("IN", "'in'"),
    ("BREAK", "'break'"), ("CONTINUE", "'continue'"), ("PASS", "'pass'"), ("AND", "'and'"),
    ("OR", "'or'"), ("NOT", "'not'"), ("TRUE", "'True'"), ("FALSE", "'False'"),
    ("RESERVED", "reserved keyword"),
    ("LPAREN", "'('"), ("RPAREN", "')'"), ("LBRACKET", "'['"), ("RBRACKET", "']'"),
    ("COMMA", "','"), ("COLON", "':'"), ("DOT", "'.'"), ("ARROW", "'->'"), ("ASSIGN", "'='"),
    ("PLUS_ASSIGN", "'+='"), ("MINUS_ASSIGN", "'-='"), ("STAR_ASSIGN", "'*='"),
    ("SLASHSLASH_ASSIGN", "'//='"), ("PERCENT_ASSIGN", "'%='"),
    ("PLUS", "'+'"), ("MINUS", "'-'"), ("STAR", "'*'"), ("SLASHSLASH", "'//'"), ("PERCENT", "'%'"),
    ("LT", "'<'"), ("LE", "'<='"), ("GT", "'>'"), ("GE", "'>='"), ("EQ", "'=='"), ("NE", "'!='"),
    # Literals that CPython accepts and the language refuses outside docstrings: the lexer keeps
    # them as tokens and the parser refuses them where it meets them, so that a syntax error after
    # them still comes first, as in CPython. STRING: value bit 0 an f-string, bit 1 bytes, bit 2
    # a bytes/str mix (a syntax error); OPAQUE: value the error its use raises (float, int_too_large).
    ("STRING", "string"), ("OPAQUE", "literal"),
)
TOKEN_CODES = {name: i for i, (name, _) in enumerate(TOKENS)}
TOKEN_TEXT = {i: text for i, (_, text) in enumerate(TOKENS)}

# Python keywords outside the language: RESERVED tokens carry an index into this tuple
# (compiler.h's keyword() switch uses these indices; tests/test_opcodes.py checks them).
RESERVED_KEYWORDS = (
    "None", "as", "assert", "async", "await", "class", "del", "except", "finally", "from",
    "global", "import", "is", "lambda", "nonlocal", "raise", "try", "with", "yield",
    "__debug__",  # a name, but CPython refuses to bind it (`cannot assign to __debug__`)
)

# Names interned first, so they have fixed ids in every program. The first
# NUM_RESERVED_NAMES may not be used as variable, parameter or function names.
BUILTIN_NAMES = ("len", "abs", "min", "max", "range", "int", "bool", "list", "append", "pop")
NUM_RESERVED_NAMES = 8

# Compile errors: (code, name, message template). {name} is the identifier at the error's
# position, {arg} an extra value: a token kind, a type kind or a limit, as the name says.
ERRORS: tuple[tuple[int, str, str], ...] = (
    (0, "ok", ""),
    (1, "nul_byte", "source contains a NUL byte"),
    (2, "non_ascii", "non-ASCII character"),
    (3, "unexpected_char", "unexpected character"),
    (4, "tab_indent", "tabs and form feeds in indentation are not supported"),
    (5, "unexpected_indent", "unexpected indent"),
    (6, "bad_dedent", "unindent does not match any outer indentation level"),
    (7, "expected_indent", "expected an indented block"),
    (8, "too_deep", "blocks or brackets nested too deeply (limit {arg})"),
    (9, "int_too_large", "integer literal does not fit in 32 bits"),
    (10, "bad_number", "invalid number literal"),
    (11, "string", "strings are not supported"),
    (12, "float", "floats are not supported"),
    (13, "unsupported_operator", "this operator is not supported"),
    (14, "true_division", "'/' is not supported: use '//' for integer division"),
    (15, "reserved_keyword", "this keyword is not supported"),
    (16, "too_many_tokens", "program too long (limit {arg} tokens)"),
    (17, "too_many_names", "too many distinct names (limit {arg})"),
    (18, "empty_program", "program defines no function"),
    (19, "expected", "expected {tok}"),
    (20, "expected_def", "only function definitions are allowed at the top level"),
    (21, "expected_expression", "expected an expression"),
    (22, "expected_type", "expected a type: int, bool or list[int]"),
    (23, "duplicate_function", "function '{name}' is already defined"),
    (24, "duplicate_param", "duplicate parameter '{name}'"),
    (25, "builtin_name", "'{name}' is a builtin name and cannot be redefined"),
    (26, "function_name", "'{name}' is a function name and cannot be a variable"),
    (27, "too_many_functions", "too many functions (limit {arg})"),
    (28, "too_many_params", "too many parameters or arguments (limit {arg})"),
    (29, "too_many_locals", "too many local variables (limit {arg})"),
    (30, "code_too_long", "bytecode too long (limit {arg} words)"),
    (31, "undefined_name", "undefined name '{name}'"),
    (32, "unknown_function", "unknown function '{name}'"),
    (33, "not_callable", "'{name}' is not a function"),
    (34, "wrong_arg_count", "wrong number of arguments (expected {arg})"),
    (35, "type_mismatch", "type mismatch: expected {type}"),
    (36, "bad_operand", "unsupported operand type {type}"),
    (37, "missing_return", "function may end without returning a value"),
    (38, "break_outside_loop", "'break' outside a loop"),
    (39, "continue_outside_loop", "'continue' outside a loop"),
    (40, "nested_def", "nested functions are not supported"),
    (41, "not_assignable", "cannot assign to this expression"),
    (42, "tuple_mismatch", "tuple assignment needs the same number of targets and values"),
    (43, "tuple_value", "tuples are only supported on the right of a tuple assignment"),
    (44, "unsupported", "this construct is not supported"),
    (45, "none_value", "this call returns None and has no value"),
    (46, "unknown_method", "unknown method '{name}' (lists have append and pop)"),
    (47, "expected_newline", "expected a newline"),
    (48, "too_many_elements", "too many elements (limit {arg})"),
    (49, "keyword_argument", "keyword arguments are not supported"),
    (50, "invalid_syntax", "invalid syntax"),
    (51, "name_too_long", "name too long (limit {arg} characters)"),
    (52, "range_outside_for", "range() is only supported as the iterable of a for loop"),
    (53, "too_complex", "nested too deeply for CPython's compiler (limit {arg} levels: blocks, elif clauses and operators)"),
    (54, "never_closed", "{tok} was never closed"),
    (55, "forgot_comma", "invalid syntax. Perhaps you forgot a comma?"),
    (56, "bare_return", "'return' needs a value of type {type}"),
    (57, "unterminated_string", "unterminated string literal"),
    (58, "loop_else", "'else' after a loop is not supported"),
    (59, "bad_escape", "invalid escape in a string literal: \\x needs 2 hex digits, \\u 4, \\U 8 "
                       "(up to 0010FFFF), \\N a name in braces"),
    (60, "named_escape", "\\N{{...}} escapes (characters by name) are not supported"),
    (61, "comprehension", "comprehensions and generator expressions are not supported"),
    (62, "slice", "slices are not supported (a subscript is one element: xs[i])"),
)
ERROR_NAMES = {code: name for code, name, _ in ERRORS}
ERROR_MESSAGES = {code: msg for code, _, msg in ERRORS}

# Limits of the compiler (bounded memory, bounded nesting).
LIMITS = {
    "MAX_TOKENS": 16384,
    "MAX_NAMES": 256,
    "MAX_NAME_LEN": 64,
    "MAX_FUNCS": 64,
    "MAX_PARAMS": 16,
    "MAX_LOCALS": 255,
    "MAX_BLOCK_DEPTH": 16,
    "MAX_EXPR_DEPTH": 64,
    # CPython's compiler recurses once per AST level and raises RecursionError near 3,000
    # (3.10-3.12): a statement's enclosing blocks, the elif clauses before it and the binary
    # operators of its expression each nest one level, and together stay within this.
    "MAX_NESTING": 1000,
    "MAX_TUPLE": 8,
    "MAX_LIST_LITERAL": 255,
    "MAX_CODE": 65536,
    "MAX_SOURCE": 1 << 20,
}

# Default run-time configuration (all configurable per call).
DEFAULT_FUEL = 100_000
DEFAULT_MAX_DEPTH = 200
DEFAULT_HEAP = 4096  # ints of list memory per run
DEFAULT_MAX_LISTS = 256
DEFAULT_STACK = 4096  # values: locals and operands of all frames


def encode(op: str | int, arg: int = 0) -> int:
    """One instruction word. `arg` may be negative for LOAD_CONST."""
    code = op if isinstance(op, int) else OP_BY_NAME[op].code
    if arg < -(1 << (ARG_BITS - 1)) or arg > ARG_MASK:
        raise ValueError(f"argument {arg} does not fit in {ARG_BITS} bits")
    return code | ((arg & ARG_MASK) << 8)


def decode(word: int) -> tuple[int, int]:
    """(opcode, unsigned argument) of one instruction word."""
    return word & 0xFF, (word >> 8) & ARG_MASK


def signed_arg(arg: int) -> int:
    return arg - (1 << ARG_BITS) if arg & (1 << (ARG_BITS - 1)) else arg


def render_header() -> str:
    """The C++ header with every table above."""
    out = [
        "// GENERATED by `python -m vramgym.vm.opcodes --write` from vm/opcodes.py. Do not edit.",
        "#pragma once",
        "",
        "namespace vg {",
        "",
        f"constexpr int ARG_BITS = {ARG_BITS};",
        f"constexpr unsigned ARG_MASK = 0x{ARG_MASK:X}u;",
        "",
        "enum Op {",
    ]
    out += [f"  OP_{op.name} = {op.code},  // {op.doc.splitlines()[0][:90]}" for op in OPS]
    out += [f"  NUM_OPCODES = {NUM_OPCODES}", "};", ""]
    writes = sum(1 << OP_BY_NAME[n].code for n in WRITES)
    out += ["// Bit k set: opcode k writes a local, a list or a frame (opcodes.WRITES).",
            f"constexpr unsigned long long OPS_WRITES = 0x{writes:X}ull;", ""]
    names = " ".join(f"X({OP_BY_CODE[c].name if c in OP_BY_CODE else 'INVALID'})" for c in range(NUM_OPCODES))
    out += ["// Every opcode by code (INVALID for unused codes), for dispatch tables.",
            f"#define VG_OPCODE_LIST(X) {names}", "", "enum Trap {"]
    out += [f"  TRAP_{name.upper()} = {code}," for code, name, _ in TRAPS]
    out += ["};", "", "enum Kind {", f"  KIND_INT = {KIND_INT},", f"  KIND_BOOL = {KIND_BOOL},",
            f"  KIND_LIST = {KIND_LIST},", "  KIND_NONE = 3,  // only inside the compiler: append()/pop() statements",
            "};", "", "enum Tok {"]
    out += [f"  TOK_{name} = {i}," for i, (name, _) in enumerate(TOKENS)]
    out += [f"  NUM_TOKENS = {len(TOKENS)}", "};", "", "enum Err {"]
    out += [f"  ERR_{name.upper()} = {code}," for code, name, _ in ERRORS]
    out += [f"  NUM_ERRORS = {len(ERRORS)}", "};", ""]
    out += [f"constexpr int NUM_RESERVED_KEYWORDS = {len(RESERVED_KEYWORDS)};"]
    kw = ", ".join(f'"{k}"' for k in RESERVED_KEYWORDS)
    out += [f"#define VG_RESERVED_KEYWORDS {kw}"]
    out += [f"constexpr int RESERVED_IS = {RESERVED_KEYWORDS.index('is')};  // `is`: a binary operator to CPython"]
    out += [f"constexpr int NUM_BUILTIN_NAMES = {len(BUILTIN_NAMES)};"]
    names = ", ".join(f'"{k}"' for k in BUILTIN_NAMES)
    out += [f"#define VG_BUILTIN_NAMES {names}"]
    out += [f"constexpr int NUM_RESERVED_NAMES = {NUM_RESERVED_NAMES};"]
    out += [f"enum Builtin {{ " + ", ".join(f"BUILTIN_{n.upper()} = {i}" for i, n in enumerate(BUILTIN_NAMES)) + " };"]
    out += [""]
    out += [f"constexpr int {k} = {v};" for k, v in LIMITS.items()]
    out += ["", f"constexpr int DEFAULT_FUEL = {DEFAULT_FUEL};",
            f"constexpr int DEFAULT_MAX_DEPTH = {DEFAULT_MAX_DEPTH};",
            f"constexpr int DEFAULT_HEAP = {DEFAULT_HEAP};",
            f"constexpr int DEFAULT_MAX_LISTS = {DEFAULT_MAX_LISTS};",
            f"constexpr int DEFAULT_STACK = {DEFAULT_STACK};", "", "}  // namespace vg", ""]
    return "\n".join(out)


def header_path():
    from pathlib import Path
    return Path(__file__).resolve().parent / "csrc" / "opcodes.h"


if __name__ == "__main__":
    import sys
    if "--write" in sys.argv:
        header_path().write_text(render_header())
        print(f"wrote {header_path()}")
    else:
        print(render_header())
