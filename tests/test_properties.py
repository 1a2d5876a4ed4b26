"""Property tests of the arithmetic and comparison opcodes at the int32 edges.

The oracle is Python's exact integer arithmetic (floor `//` and `%`): a result outside int32
must be Trap('overflow') and a zero divisor Trap('zero_division'). Every operation is checked
twice: through compiled source (the compiler's code generation and the VM together) and through
hand-assembled bytecode (the opcode alone, independent of the compiler). Programs are built once
at import and each hypothesis example runs a whole list of operand pairs in one execute() call.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from vramgym.compiler import CompileError, compile_source
from vramgym.vm import Program, Trap, execute
from vramgym.vm import opcodes as oc
from vramgym.vm.opcodes import encode

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
OVERFLOW, ZERO_DIV = Trap("overflow"), Trap("zero_division")

# Values where int32 arithmetic goes wrong if it goes wrong anywhere: the limits, their
# neighbours, and every power of two (and its neighbours) of either sign.
EDGES = sorted({INT_MIN, INT_MIN + 1, -1, 0, 1, INT_MAX - 1, INT_MAX}
               | {v for k in range(32) for s in (1, -1) for d in (-1, 0, 1)
                  if INT_MIN <= (v := s * 2**k + d) <= INT_MAX})
int32s = st.one_of(st.sampled_from(EDGES), st.integers(INT_MIN, INT_MAX), st.integers(-8, 8))
# Pairs with related operands too: equal, negated (a == -b), and divisor edges (b = ±1, ±2).
pairs = st.one_of(
    st.tuples(int32s, int32s),
    int32s.map(lambda a: (a, a)),
    int32s.filter(lambda a: a != INT_MIN).map(lambda a: (a, -a)),
    st.tuples(int32s, st.sampled_from([-2, -1, 1, 2, 0])),
)
pair_lists = st.lists(pairs, min_size=1, max_size=64)


def _i32(v: int):
    return v if INT_MIN <= v <= INT_MAX else OVERFLOW


# name: (opcode, source expression over a and b, result type, oracle). Unary ops use a only.
OPS = {
    "add": ("BINARY_ADD", "a + b", "int", lambda a, b: _i32(a + b)),
    "sub": ("BINARY_SUB", "a - b", "int", lambda a, b: _i32(a - b)),
    "mul": ("BINARY_MUL", "a * b", "int", lambda a, b: _i32(a * b)),
    "div": ("BINARY_DIV", "a // b", "int", lambda a, b: ZERO_DIV if b == 0 else _i32(a // b)),
    "mod": ("BINARY_MOD", "a % b", "int", lambda a, b: ZERO_DIV if b == 0 else _i32(a % b)),
    "neg": ("UNARY_NEG", "-a", "int", lambda a, b: _i32(-a)),
    "not": ("UNARY_NOT", "not a", "bool", lambda a, b: not a),
    "abs": ("ABS", "abs(a)", "int", lambda a, b: _i32(abs(a))),
    "min": ("MIN", "min(a, b)", "int", lambda a, b: min(a, b)),
    "max": ("MAX", "max(a, b)", "int", lambda a, b: max(a, b)),
    "lt": ("COMPARE_LT", "a < b", "bool", lambda a, b: a < b),
    "le": ("COMPARE_LE", "a <= b", "bool", lambda a, b: a <= b),
    "gt": ("COMPARE_GT", "a > b", "bool", lambda a, b: a > b),
    "ge": ("COMPARE_GE", "a >= b", "bool", lambda a, b: a >= b),
    "eq": ("COMPARE_EQ", "a == b", "bool", lambda a, b: a == b),
    "ne": ("COMPARE_NE", "a != b", "bool", lambda a, b: a != b),
}
NAMES = list(OPS)
assert {op for op, *_ in OPS.values()} >= {o.name for o in oc.OPS if 11 <= o.code <= 26}


def _compiled(name: str) -> Program:
    op, expr, ret, _ = OPS[name]
    prog = compile_source(f"def f(a: int, b: int) -> {ret}:\n    return {expr}\n")
    # Guard against the test silently exercising something else (e.g. a rewritten expression).
    assert oc.OP_BY_NAME[op].code in (prog.code & 0xFF), f"{expr!r} does not compile to {op}"
    return prog


def _assembled(name: str) -> Program:
    op = oc.OP_BY_NAME[OPS[name][0]]
    body = [encode("LOAD_VAR", 0)] + ([encode("LOAD_VAR", 1)] if op.pops == 2 else [])
    return Program.from_code([encode("FUNC", 2 | 2 << 8), *body, encode(op.name), encode("RETURN")])


COMPILED = [_compiled(n) for n in NAMES]
ASSEMBLED = [_assembled(n) for n in NAMES]


def _check_all(programs, entry, ab, *, as_int: bool):
    """Run every op's program on every pair in one call and compare with the oracle."""
    got = execute(programs, entry, ab)
    wrong = []
    for name, row in zip(NAMES, got):
        ret, oracle = OPS[name][2], OPS[name][3]
        for (a, b), g in zip(ab, row):
            want = oracle(a, b)
            if not isinstance(want, Trap) and (as_int or ret == "int"):
                want = int(want)  # raw bytecode functions return int, so True reads back as 1
            if type(g) is not type(want) or g != want:
                wrong.append(f"{OPS[name][1]} with a={a}, b={b}: got {g!r}, want {want!r}")
    assert not wrong, f"{len(wrong)} wrong results, e.g.:\n" + "\n".join(wrong[:10])


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(pair_lists)
@example([(INT_MIN, -1), (INT_MIN, 1), (INT_MAX, -1), (INT_MIN, INT_MIN), (-7, 2), (7, -2), (0, 0)])
def test_compiled_ops_match_python(ab):
    _check_all(COMPILED, "f", ab, as_int=False)


@SETTINGS
@given(pair_lists)
@example([(INT_MIN, -1), (INT_MIN, 1), (INT_MAX, -1), (INT_MIN, INT_MIN), (-7, 2), (7, -2), (0, 0)])
def test_assembled_ops_match_python(ab):
    _check_all(ASSEMBLED, "f0", ab, as_int=True)


def test_every_edge_pair():
    """Deterministic: the full cross product of the edge values (about 36k pairs), both paths."""
    ab = [(a, b) for a in EDGES for b in EDGES]
    _check_all(COMPILED, "f", ab, as_int=False)
    _check_all(ASSEMBLED, "f0", ab, as_int=True)


# --- Constants -----------------------------------------------------------------------------

def _const_words(v: int) -> list[int]:
    """v as the VM encodes it: one LOAD_CONST in 24 bits, else high 24 bits + CONST_EXT low byte."""
    if -(1 << 23) <= v < (1 << 23):
        return [encode("LOAD_CONST", v)]
    return [encode("LOAD_CONST", v >> 8), encode("CONST_EXT", v & 0xFF)]


consts = st.one_of(st.sampled_from(EDGES), st.integers(INT_MIN, INT_MAX),
                   st.integers(-(1 << 23) - 2, -(1 << 23) + 2), st.integers((1 << 23) - 2, (1 << 23) + 2))


@SETTINGS
@given(st.lists(consts, min_size=1, max_size=32))
@example([0, -1, INT_MIN, INT_MAX, 1 << 23, -(1 << 23), (1 << 23) - 1, -(1 << 23) - 1])
def test_constants_round_trip(values):
    # The source form: `return N` and `return -N` (-2**31 has no literal; see the test below).
    sources = []
    for v in values:
        lit = str(v) if v >= 0 else f"-{-v}" if v != INT_MIN else "-2147483647 - 1"
        sources.append(f"def f() -> int:\n    return {lit}\n")
    progs = [compile_source(s) for s in sources]
    for v, p in zip(values, progs):
        if v != INT_MIN:  # a literal (negated literals are folded) takes one or two words
            assert len(p.code) == 2 + len(_const_words(v)), (v, p.disassemble())
    assert [r[0] for r in execute(progs, "f", [()])] == values
    # The raw encoding, without the compiler.
    raw = [Program.from_code([encode("FUNC"), *_const_words(v), encode("RETURN")]) for v in values]
    assert [r[0] for r in execute(raw, "f0", [()])] == values


@pytest.mark.parametrize("lit", ["2147483648", "-2147483648", "4294967296", "99999999999999999999"])
def test_literal_too_large(lit):
    with pytest.raises(CompileError) as e:
        compile_source(f"def f() -> int:\n    return {lit}\n")
    assert (e.value.kind, e.value.line, e.value.col) == ("int_too_large", 2, 12 + lit.startswith("-"))


@SETTINGS
@given(st.integers(-(1 << 23), (1 << 23) - 1), st.integers(0, 255))
def test_const_ext_shifts_in_a_byte(hi, lo):
    """CONST_EXT is (v << 8 | b) in 32 bits, whatever the sign of v (wrapping like the C++)."""
    p = Program.from_code([encode("FUNC"), encode("LOAD_CONST", hi), encode("CONST_EXT", lo), encode("RETURN")])
    want = ((hi << 8 | lo) + 2**31) % 2**32 - 2**31
    assert execute(p, "f0", [()]) == [want]


# --- Step counts ---------------------------------------------------------------------------

# Straight-line stack code whose effect a tiny Python model can follow: (name, pops, pushes).
STACK_OPS = [("LOAD_CONST", 0, 1), ("LOAD_VAR", 0, 1), ("DUP", 1, 2), ("DUP2", 2, 4), ("SWAP", 2, 2),
             ("ROT3", 3, 3), ("POP", 1, 0), ("STORE_VAR", 1, 0), ("REVERSE", -1, -1)] + \
            [(OPS[n][0], 1 if n in ("neg", "not", "abs") else 2, 1) for n in NAMES]


def _simulate(words, args, nlocals):
    """(result or Trap, executed steps) of straight-line code, by the opcode table's semantics."""
    loc = list(args) + [0] * (nlocals - len(args))
    s: list[int] = []
    arith = {OPS[n][0]: OPS[n][3] for n in NAMES}
    for steps, w in enumerate(words, 1):
        code, arg = oc.decode(w)
        name = oc.OP_BY_CODE[code].name
        if name == "RETURN":
            return s[-1], steps
        if name == "LOAD_CONST":
            s.append(oc.signed_arg(arg))
        elif name == "LOAD_VAR":
            s.append(loc[arg])
        elif name == "STORE_VAR":
            loc[arg] = s.pop()
        elif name == "DUP":
            s.append(s[-1])
        elif name == "DUP2":
            s += s[-2:]
        elif name == "SWAP":
            s[-2:] = s[:-3:-1]
        elif name == "ROT3":
            s[-3:] = [s[-1], s[-3], s[-2]]
        elif name == "POP":
            s.pop()
        elif name == "REVERSE":
            s[-arg:] = s[-arg:][::-1]
        else:
            unary = oc.OP_BY_CODE[code].pops == 1
            b = 0 if unary else s.pop()
            r = arith[name](s.pop(), b)
            if isinstance(r, Trap):
                return r, steps
            s.append(int(r))
    raise AssertionError("no RETURN")


@st.composite
def straight_line(draw):
    """A valid straight-line function body (stack never underflows), ending in RETURN."""
    nlocals = draw(st.integers(2, 4))
    depth, words = 0, []
    for _ in range(draw(st.integers(0, 40))):
        name, pops, pushes = draw(st.sampled_from(STACK_OPS))
        arg = 0
        if name == "REVERSE":
            if depth < 2:
                continue
            pops = pushes = arg = draw(st.integers(2, min(depth, 6)))
        if depth < pops:
            continue
        if name == "LOAD_CONST":
            arg = draw(st.one_of(st.integers(-(1 << 23), (1 << 23) - 1), st.integers(-3, 3)))
        elif name in ("LOAD_VAR", "STORE_VAR"):
            arg = draw(st.integers(0, nlocals - 1))
        words.append(encode(name, arg))
        depth += pushes - pops
    if depth == 0:
        words.append(encode("LOAD_VAR", 0))
    words.append(encode("RETURN"))
    return nlocals, words


@SETTINGS
@given(straight_line(), st.lists(st.tuples(int32s, int32s), min_size=1, max_size=8), st.data())
def test_straight_line_steps_are_exact(prog, args, data):
    nlocals, body = prog
    p = Program.from_code([encode("FUNC", 2 | nlocals << 8), *body])
    want = [_simulate(body, a, nlocals) for a in args]
    assert execute(p, "f0", args, steps=True) == want, p.disassemble()
    # With less fuel than the run needs, it stops after exactly `fuel` instructions.
    fuel = data.draw(st.integers(1, len(body) + 1))
    got = execute(p, "f0", args, steps=True, fuel=fuel)
    for (w, n), g in zip(want, got):
        assert g == ((w, n) if n <= fuel else (Trap("out_of_fuel"), fuel)), p.disassemble()


def test_steps_of_a_trap_include_the_trapping_instruction():
    div = ASSEMBLED[NAMES.index("div")]  # FUNC, LOAD_VAR, LOAD_VAR, BINARY_DIV, RETURN
    assert execute(div, "f0", [(7, 2), (7, 0), (INT_MIN, -1)], steps=True) == \
        [(3, 4), (ZERO_DIV, 3), (OVERFLOW, 3)]
    assert np.all(div.code == COMPILED[NAMES.index("div")].code)  # the compiler emits the same
