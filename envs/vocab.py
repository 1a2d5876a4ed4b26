"""The action vocabulary of the code-search environments: one action = one token.

The vocabulary is fixed (it does not depend on the task), so a policy's output layer is fixed.
The task's function name and parameter names enter only through slots: FN (the function
itself, for recursive calls) and P0..P3 (its parameters, in signature order). Local variables
come from a shared pool V0..V7 whose type is fixed by their first assignment.

Action ids (stable; append new tokens at the end only):

    0 END       1 NEWLINE   2 INDENT    3 DEDENT
    4..18       return if elif else while for in break continue pass and or not True False
    19..26      ( ) [ ] , : . =
    27..31      += -= *= //= %=
    32..42      + - * // % < <= > >= == !=
    43..49      len abs min max range append pop
    50          FN (the task's function)
    51..54      P0..P3 (the task's parameters; a slot past the last one is a name of its own,
                rendered _p<i>, which the mask never offers)
    55..62      V0..V7 (local variables, rendered v0..v7)
    63..72      integer literals 0..9

`detokenize(actions, signature)` renders canonical source (4-space indentation, the signature
line first); `to_compiler_tokens(actions, signature)` gives the (T, 4) int32 token array that
`vramgym.compiler.compile_tokens` accepts, with lines and columns of that same source, so
compile errors point at the rendered text. Neither needs the grammar: tokens are rendered
as they come, and an action sequence that the mask allowed always compiles.
"""
from __future__ import annotations

import keyword
import operator
import re
from dataclasses import dataclass

import numpy as np

from vramgym.vm import opcodes as oc

SPECIAL = ("<END>", "<NEWLINE>", "<INDENT>", "<DEDENT>")
KEYWORDS = ("return", "if", "elif", "else", "while", "for", "in", "break", "continue", "pass",
            "and", "or", "not", "True", "False")
PUNCT = ("(", ")", "[", "]", ",", ":", ".", "=")
AUGOPS = ("+=", "-=", "*=", "//=", "%=")
BINOPS = ("+", "-", "*", "//", "%", "<", "<=", ">", ">=", "==", "!=")
BUILTINS = ("len", "abs", "min", "max", "range", "append", "pop")
NUM_PARAMS = 4   # parameter slots P0..P3
NUM_VARS = 8     # local variable pool V0..V7
NUM_INTS = 10    # integer literals 0..9

TOKENS: tuple[str, ...] = (SPECIAL + KEYWORDS + PUNCT + AUGOPS + BINOPS + BUILTINS + ("<FN>",)
                           + tuple(f"<P{i}>" for i in range(NUM_PARAMS))
                           + tuple(f"v{i}" for i in range(NUM_VARS))
                           + tuple(str(i) for i in range(NUM_INTS)))
VOCAB_SIZE = len(TOKENS)
ID = {t: i for i, t in enumerate(TOKENS)}

END, NEWLINE, INDENT, DEDENT = 0, 1, 2, 3
FN = ID["<FN>"]
P0 = ID["<P0>"]
V0 = ID["v0"]
INT0 = ID["0"]
# Name slots in the order the compiler-token name ids are assigned (see to_compiler_tokens).
NAME_SLOTS = (FN,) + tuple(range(P0, P0 + NUM_PARAMS)) + tuple(range(V0, V0 + NUM_VARS))
TYPES = ("int", "bool", "list[int]")

assert VOCAB_SIZE == 73 and TOKENS[50] == "<FN>" and TOKENS[63] == "0"


@dataclass(frozen=True)
class Signature:
    """The task's function signature: `def name(p: type, ...) -> ret:` (types from TYPES)."""

    name: str
    params: tuple[tuple[str, str], ...]
    ret: str

    def __post_init__(self):
        if not 1 <= len(self.params) <= NUM_PARAMS:
            raise ValueError(f"a signature needs 1..{NUM_PARAMS} parameters")
        names = [self.name] + [p for p, _ in self.params]
        reserved = (set(oc.BUILTIN_NAMES) | {f"v{i}" for i in range(NUM_VARS)} | set(KEYWORDS)
                    | set(keyword.kwlist) | {"__debug__", "__builtins__"})
        for n in names:
            if not isinstance(n, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", n) or n in reserved \
                    or len(n) > oc.LIMITS["MAX_NAME_LEN"]:
                raise ValueError(f"bad name in signature: {n!r} (identifiers of at most {oc.LIMITS['MAX_NAME_LEN']} "
                                 "characters; v0..v7, builtins and Python's keywords are taken)")
        if len(set(names)) != len(names):
            raise ValueError("signature names must be distinct")
        for t in [t for _, t in self.params] + [self.ret]:
            if t not in TYPES:
                raise ValueError(f"unknown type {t!r}; expected one of {TYPES}")

    @classmethod
    def parse(cls, line: str) -> "Signature":
        m = re.fullmatch(r"\s*def\s+(\w+)\s*\((.*)\)\s*->\s*(.+?)\s*:?\s*", line)
        if not m:
            raise ValueError(f"not a signature line: {line!r}")
        params = []
        for part in filter(None, (p.strip() for p in m.group(2).split(","))):
            n, _, t = part.partition(":")
            params.append((n.strip(), t.replace(" ", "")))
        return cls(m.group(1), tuple(params), m.group(3).replace(" ", ""))

    def line(self) -> str:
        ps = ", ".join(f"{n}: {t}" for n, t in self.params)
        return f"def {self.name}({ps}) -> {self.ret}:"

    @property
    def param_types(self) -> tuple[str, ...]:
        return tuple(t for _, t in self.params)


def as_signature(sig: "Signature | str") -> Signature:
    return sig if isinstance(sig, Signature) else Signature.parse(sig)


def token_text(action: int, sig: Signature) -> str:
    if action == FN:
        return sig.name
    if P0 <= action < P0 + NUM_PARAMS:
        i = action - P0
        if i >= len(sig.params):  # no parameter: to the compiler a name of its own (a local, if assigned)
            taken = {sig.name, *(n for n, _ in sig.params)}
            name = f"_p{i}"
            while name in taken:
                name += "_"
            return name
        return sig.params[i][0]
    return TOKENS[action]


# Spacing: a token is glued to its left neighbour when either side asks for it.
_NO_SPACE_BEFORE = {ID[t] for t in (")", "]", ",", ":", ".")}
_NO_SPACE_AFTER = {ID[t] for t in ("(", "[", ".")}
_CALLABLE = {ID[t] for t in ("len", "abs", "min", "max", "range", "append", "pop")} | {FN}
_OPERAND_END = set(NAME_SLOTS) | {ID[")"], ID["]"]}
_OPERATOR_CONTEXT = ({ID[t] for t in BINOPS + AUGOPS + ("=", "(", "[", ",", ":")}
                     | {ID[t] for t in ("return", "if", "elif", "while", "in", "and", "or", "not")})

_CT = oc.TOKEN_CODES
_KW_KIND = {"return": "RETURN", "if": "IF", "elif": "ELIF", "else": "ELSE", "while": "WHILE",
            "for": "FOR", "in": "IN", "break": "BREAK", "continue": "CONTINUE", "pass": "PASS",
            "and": "AND", "or": "OR", "not": "NOT", "True": "TRUE", "False": "FALSE",
            "(": "LPAREN", ")": "RPAREN", "[": "LBRACKET", "]": "RBRACKET", ",": "COMMA",
            ":": "COLON", ".": "DOT", "=": "ASSIGN", "->": "ARROW", "def": "DEF",
            "+=": "PLUS_ASSIGN", "-=": "MINUS_ASSIGN", "*=": "STAR_ASSIGN",
            "//=": "SLASHSLASH_ASSIGN", "%=": "PERCENT_ASSIGN", "+": "PLUS", "-": "MINUS",
            "*": "STAR", "//": "SLASHSLASH", "%": "PERCENT", "<": "LT", "<=": "LE", ">": "GT",
            ">=": "GE", "==": "EQ", "!=": "NE"}


def _action_id(a) -> int:
    """An action as an int: integers as they are, floats only when whole (4.9 and NaN are out of
    range for the envs, envs/vector.py as_actions; int() would truncate 4.9 to 4)."""
    try:
        return operator.index(a)
    except TypeError:
        if isinstance(a, (str, bytes, bytearray)):   # float() would parse "4" or b"4" (np.str_ too)
            raise TypeError(f"actions must be numbers, got {type(a).__name__} {a!r:.40}") from None
        f = float(a)
        if not f.is_integer():
            raise ValueError(f"action {a!r} is not a whole number (out of range 0..{VOCAB_SIZE - 1})") from None
        return int(f)


def _render(actions, sig: Signature):
    """Source text and compiler token rows (kind, value, line, col) of a body, in one pass."""
    sig = as_signature(sig)
    nb = len(oc.BUILTIN_NAMES)
    # Name ids: builtins first (fixed), then FN, P0.., V0.. as fixed slots. The compiler only
    # needs the same id for the same name; the bytecode does not depend on the ids' values.
    name_id = {oc.BUILTIN_NAMES[i]: i for i in range(nb)}
    for k, slot in enumerate(NAME_SLOTS):
        name_id[token_text(slot, sig)] = nb + k
    rows: list[list[int]] = []

    def emit_word(text, line, col):
        if text in _KW_KIND:
            rows.append([_CT[_KW_KIND[text]], 0, line, col])
        elif text.isdigit():
            rows.append([_CT["INT"], int(text), line, col])
        else:
            rows.append([_CT["NAME"], name_id[text], line, col])

    # The signature line, tokenized the same way.
    lines = [sig.line()]
    col = 1
    for piece in re.findall(r"->|\w+|[^\s\w]", lines[0]):
        at = lines[0].index(piece, col - 1) + 1
        emit_word(piece, 1, at)
        col = at + len(piece)
    rows.append([_CT["NEWLINE"], 0, 1, len(lines[0]) + 1])

    # The rows follow the actions one for one, in the order the scorer's token builder puts them
    # (bank.compiler_token_slots: a body that fails there fails here, with the same error), at the
    # places of the text: an INDENT or DEDENT takes the position of the next word.
    depth, cur, prev, unary_prev = 1, "", None, False   # cur: text of the line being built
    rows.append([_CT["INDENT"], 0, 0, 0])
    unplaced = [len(rows) - 1]          # INDENT/DEDENT rows waiting for the next word's position
    last = None
    for a in actions:
        a = _action_id(a)
        if not 0 <= a < VOCAB_SIZE:
            raise ValueError(f"action {a} out of range 0..{VOCAB_SIZE - 1}")
        if a == END:
            break
        last = a
        if a in (INDENT, DEDENT):
            depth += 1 if a == INDENT else -1
            rows.append([_CT["INDENT" if a == INDENT else "DEDENT"], 0, 0, 0])
            unplaced.append(len(rows) - 1)
            continue
        if a == NEWLINE:
            rows.append([_CT["NEWLINE"], 0, len(lines) + 1, len(cur) + 1])
            lines.append(cur)
            cur, prev = "", None
            continue
        text = token_text(a, sig)
        if prev is None:
            cur = " " * (4 * max(depth, 0))
        elif not (a in _NO_SPACE_BEFORE or prev in _NO_SPACE_AFTER
                  or (a == ID["("] and prev in _CALLABLE)
                  or (a == ID["["] and prev in _OPERAND_END)
                  or (prev == ID["-"] and unary_prev)):
            cur += " "
        line, col = len(lines) + 1, len(cur) + 1
        for k in unplaced:
            rows[k][2:] = [line, col]
        unplaced = []
        emit_word(text, line, col)
        # A minus is unary where an operand is expected, i.e. after an operator or a keyword.
        unary_prev = a == ID["-"] and (prev is None or prev in _OPERATOR_CONTEXT)
        cur += text
        prev = a
    if last not in (None, NEWLINE, INDENT, DEDENT):  # the scorer's rule: a NEWLINE unless the line is ended
        rows.append([_CT["NEWLINE"], 0, len(lines) + 1, len(cur) + 1])
    if cur:  # an unfinished last line
        lines.append(cur)
    eof_line = len(lines) + 1
    for k in unplaced:
        rows[k][2:] = [eof_line, 1]
    rows += [[_CT["DEDENT"], 0, eof_line, 1]] * max(depth, 0)   # close every open block
    rows.append([_CT["EOF"], 0, eof_line, 1])
    return "\n".join(lines) + "\n", np.asarray(rows, dtype=np.int32).reshape(-1, 4)


def detokenize(actions, signature: "Signature | str") -> str:
    """Canonical source of signature + body: 4-space indentation, one statement per line,
    Python's usual spacing. Stops at END; an unfinished program renders as far as it goes."""
    return _render(actions, signature)[0]


def to_compiler_tokens(actions, signature: "Signature | str") -> np.ndarray:
    """(T, 4) int32 rows (kind, value, line, col) for vramgym.compiler.compile_tokens, ending
    with EOF: the tokens that the envs' scorer compiles (bank.compiler_token_slots), in its
    order, so a body fails here exactly when it fails there; positions are those of detokenize's
    source. Name ids: builtins 0..9, then FN,
    P0..P3, V0..V7 as fixed slots from len(BUILTIN_NAMES) on."""
    return _render(actions, signature)[1]


def encode(text: str) -> list[int]:
    """Action ids of a whitespace-separated token string, for hand-written sequences:
    `r"return <P0> + 1 \\n <END>"`; the two characters `\\n` stand for NEWLINE (line
    breaks are plain whitespace, so long sequences may wrap)."""
    out = []
    for t in text.replace("\\n", " <NEWLINE> ").split():
        if t not in ID:
            raise ValueError(f"unknown token {t!r}")
        out.append(ID[t])
    return out
