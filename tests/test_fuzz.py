"""In-process fuzzing of the compiler, the VM and the batch APIs.

Every input here is garbage or near-garbage, and every property is "fails cleanly": a
CompileError with a position inside the source, a trap code, an error row, never another
exception, a crash or a hang. On top of that:

* a mutated program the compiler accepts must be valid Python (the language is a subset), its
  bytecode must validate and never trap bad_bytecode, and where it returns a value CPython must
  return the same one;
* runs are deterministic: the same batch in another order and on one thread gives the same
  results (this catches state leaking between runs through reused scratch memory).

Each run draws a fresh seed, printed in every failure; VRAMGYM_SEED=<n> replays one, and
VRAMGYM_FUZZ_SCALE=<x> multiplies the iteration counts (the defaults keep the file well under a
minute).
"""
from __future__ import annotations

import inspect
import os
import re
import secrets
import string
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from vramgym.compiler import CompileError, compile_batch, compile_source, compile_tokens
from vramgym.vm import Encoded, Program, ProgramBatch, Trap, VMConfig, cpu, execute, run_batch
from vramgym.vm import opcodes as oc
from vramgym.vm.opcodes import encode

SEED = int(os.environ.get("VRAMGYM_SEED") or secrets.randbits(32))
SCALE = float(os.environ.get("VRAMGYM_FUZZ_SCALE") or 1)
CORPUS = Path(__file__).resolve().parent / "corpus"
TRAP_CODES = set(oc.TRAP_NAMES)
ERROR_KINDS = set(oc.ERROR_NAMES.values()) - {"ok"}
ERROR_CODES = set(oc.ERROR_NAMES) - {0}
ERROR_TEMPLATES = {name: msg for _, name, msg in oc.ERRORS}
BAD_BYTECODE = oc.TRAP_CODES["bad_bytecode"]
FUEL = 2000


def rng_for(test: str) -> np.random.Generator:
    """One independent stream per test, so a failing test replays alone with the same seed."""
    return np.random.default_rng([SEED, zlib.crc32(test.encode())])


def iters(n: int) -> int:
    return max(1, int(n * SCALE))


def where() -> str:
    return f"(replay with VRAMGYM_SEED={SEED})"


def _sources() -> list[str]:
    out = []
    for p in sorted(CORPUS.rglob("*.py")):
        src = p.read_bytes().decode("utf-8")
        try:
            compile_source(src)
        except CompileError:
            continue
        out.append(src)
    return out


VALID = _sources()


# --- Source text into the compiler -----------------------------------------------------------

def _line_breaks(raw: bytes) -> int:
    return len(re.findall(rb"\r\n|\r|\n", raw))


def check_compile(src: str | bytes) -> Program | None:
    """compile_source must return a Program or raise a well-formed CompileError."""
    raw = src if isinstance(src, bytes) else src.encode("utf-8", errors="surrogatepass")
    try:
        prog = compile_source(src)
    except CompileError as e:
        nlines = _line_breaks(raw) + 1  # the line after the last line break counts (EOF errors)
        assert 1 <= e.line <= nlines and e.col >= 1, f"{e.kind} at {e.line}:{e.col} outside {raw!r} {where()}"
        assert e.kind in ERROR_KINDS and e.message.strip(), f"bad error {e.kind!r} {e.message!r} for {raw!r} {where()}"
        # Errors about a name point at it (else the message reads "undefined name '?'").
        assert "{name}" not in ERROR_TEMPLATES.get(e.kind, "") or "'?'" not in e.message, \
            f"{e.kind} at {e.line}:{e.col} is not at a name: {e.message!r} for {raw!r} {where()}"
        return None
    except Exception as e:  # noqa: BLE001 - anything else is the bug we are looking for
        pytest.fail(f"compile_source raised {type(e).__name__}: {e} for {raw!r} {where()}")
    # The language is a subset of Python: whatever compiles here compiles under CPython.
    try:
        compile(raw.decode("ascii"), "<fuzz>", "exec")
    except (SyntaxError, ValueError, UnicodeDecodeError) as e:
        pytest.fail(f"accepted by vramgym but not by CPython ({e!r}):\n{raw!r} {where()}")
    # What the compiler emits is always valid bytecode, with a FUNC word at every function.
    bad, _ = cpu.validate(prog.code)
    assert bad == -1, f"compiled code fails validation at word {bad}: {raw!r} {where()}"
    for f in prog.functions:
        assert prog.code[f.pc] & 0xFF == oc.OP_BY_NAME["FUNC"].code, f"{f} {raw!r}"
    return prog


# Fragments that make random text look enough like a program to get past the lexer.
FRAGMENTS = ["def", "return", "if", "elif", "else", "while", "for", "in", "break", "continue", "pass",
             "and", "or", "not", "True", "False", "None", "lambda", "is", "global", "class", "import",
             "int", "bool", "list", "list[int]", "range", "len", "abs", "min", "max", ".append", ".pop",
             "f", "g", "x", "xs", "_a1", "(", ")", "[", "]", ",", ":", ".", "->", "=", "+=", "-=", "*=",
             "//=", "%=", "+", "-", "*", "//", "%", "<", "<=", ">", ">=", "==", "!=", "/", "**", "&", "|",
             "^", "~", "<<", ";", "\\", "@", ":=", "'", '"', "#", "0", "1", "7", "2147483647", "2147483648",
             "00", "0x1", "1.5", "1_0", "1e3", " ", " ", "    ", "\n", "\n", "\r\n", "\r", "\t", "\n    ",
             "\n        ", "\x00", "\x0c", "\xe9", "\u2028"]


def test_random_bytes_and_text():
    rng = rng_for("bytes")
    printable = np.frombuffer(string.printable.encode(), dtype=np.uint8)
    for i in range(iters(8000)):
        n = int(rng.integers(0, 120))
        style = i % 4
        if style == 0:  # any byte at all
            src: str | bytes = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        elif style == 1:  # printable ASCII (tabs, \r, \x0b and \x0c included)
            src = rng.choice(printable, n).tobytes()
        elif style == 2:  # program-like text, as str (so non-ASCII goes through UTF-8)
            src = "".join(FRAGMENTS[j] + " " * int(rng.integers(0, 2))
                          for j in rng.integers(0, len(FRAGMENTS), n // 3))
        else:  # a valid program with random bytes spliced in
            base = bytearray(VALID[int(rng.integers(len(VALID)))].encode())
            for _ in range(int(rng.integers(1, 4))):
                base[int(rng.integers(0, len(base) + 1)):0] = rng.integers(0, 256, int(rng.integers(1, 4)),
                                                                          dtype=np.uint8).tobytes()
            src = bytes(base)
        check_compile(src)


# --- Mutated valid programs -----------------------------------------------------------------

TOKEN_RE = re.compile(r"[A-Za-z_]\w*|\d+|//=?|->|[<>=!]=|[-+*%]=|\S")
SAME_CLASS = [["+", "-", "*", "//", "%"], ["<", "<=", ">", ">=", "==", "!="], ["and", "or"],
              ["+=", "-=", "*=", "//=", "%=", "="], ["True", "False"], ["int", "bool", "list[int]"],
              ["if", "while", "elif"], ["break", "continue", "pass"], ["(", "["], [")", "]"]]


def mutate(src: str, rng: np.random.Generator) -> str:
    """1-4 random edits: line-level, token-level (often to a token of the same class, so that a
    good share of mutants still compile) and character-level."""
    for _ in range(int(rng.integers(1, 5))):
        lines = src.split("\n")
        i, j = (int(x) for x in rng.integers(0, len(lines), 2))
        toks = [m for m in TOKEN_RE.finditer(src)]
        m = toks[int(rng.integers(len(toks)))] if toks else None
        pos = int(rng.integers(0, len(src) + 1))
        op = int(rng.integers(0, 12))
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[j])
        elif op == 2:
            lines[i], lines[j] = lines[j], lines[i]
        elif op == 3:  # change indentation
            d = int(rng.choice([-4, -2, -1, 1, 2, 4]))
            lines[i] = " " * d + lines[i] if d > 0 else lines[i][min(-d, len(lines[i]) - len(lines[i].lstrip(" "))):]
        elif op == 4:  # a line from another program
            other = VALID[int(rng.integers(len(VALID)))].split("\n")
            lines.insert(i, other[int(rng.integers(len(other)))])
        elif m is not None and op in (5, 6, 7):
            t = m.group()
            if op == 5:  # same-class replacement: operators, keywords, types, brackets
                cls = next((c for c in SAME_CLASS if t in c), None)
                new = str(rng.choice(cls)) if cls else t
                if t.isdigit():
                    new = str(rng.choice(["0", "1", "2", "-1", "2147483647", "46341", "65536", t + t]))
            elif op == 6:  # another token of the same program (names, numbers, keywords)
                new = toks[int(rng.integers(len(toks)))].group()
            else:
                new = str(rng.choice(FRAGMENTS))
            src = src[:m.start()] + new + src[m.end():]
            continue
        elif op == 8:
            src = src[:pos] + src[pos + int(rng.integers(1, 6)):]
            continue
        elif op == 9:
            src = src[:pos] + chr(int(rng.integers(9, 127))) + src[pos:]
            continue
        elif op == 10 and len(toks) > 1:  # swap two adjacent tokens
            k = int(rng.integers(len(toks) - 1))
            a, b = toks[k], toks[k + 1]
            src = src[:a.start()] + b.group() + src[a.end():b.start()] + a.group() + src[b.end():]
            continue
        else:
            src = src[:pos] + str(rng.choice(FRAGMENTS)) + src[pos:]
            continue
        src = "\n".join(lines)
    return src


class _Budget(Exception):
    pass


def _cpython_call(fn, args, max_lines: int = 200_000):
    """Call fn under a line budget: a mutant that the VM saw finish must finish here too, and a
    bug there must fail the test rather than hang it."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        count += 1
        if count > max_lines:
            raise _Budget
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        return fn(*args)
    finally:
        sys.settrace(old)


PY_EXC = {"zero_division": ZeroDivisionError, "index_error": IndexError, "value_error": ValueError}


def _differential(src: str, prog: Program, rng: np.random.Generator) -> int:
    """Run every all-int function of an accepted mutant on the VM and under CPython. Returns the
    number of calls compared."""
    code = compile(src, "<fuzz>", "exec")  # check_compile vetted the source
    ns: dict = {}
    exec(code, ns)
    compared = 0
    for f in prog.functions:
        if any(k != "int" for k in f.params):
            continue
        args = [tuple(int(v) for v in rng.choice([0, 1, 2, 3, -1, -5, 10, 100], len(f.params))) for _ in range(3)]
        got = execute(prog, f.name, args, fuel=20_000)
        for a, g in zip(args, got):
            assert g != Trap("bad_bytecode") and g != Trap("bad_input"), f"{f.name}{a} -> {g}\n{src} {where()}"
            if isinstance(g, Trap) and g.kind not in PY_EXC:
                continue  # overflow, fuel, recursion, memory: CPython has no such limit
            try:
                want = _cpython_call(ns[f.name], a)
            except _Budget:
                pytest.fail(f"CPython did not finish {f.name}{a}, the VM gave {g!r}\n{src} {where()}")
            except RecursionError:
                continue
            except Exception as e:  # noqa: BLE001
                want = next((Trap(k) for k, t in PY_EXC.items() if isinstance(e, t)), e)
            ok = type(g) is type(want) and g == want
            assert ok, f"{f.name}{a}: VM {g!r}, CPython {want!r}\n{src} {where()}"
            compared += 1
    return compared


def test_mutated_programs():
    rng = rng_for("mutants")
    mutants = []
    accepted = compared = 0
    for _ in range(iters(4000)):
        src = mutate(VALID[int(rng.integers(len(VALID)))], rng)
        mutants.append(src)
        prog = check_compile(src)
        if prog is None:
            continue
        accepted += 1
        if accepted <= iters(600):  # the differential check is the slow part: bound it
            compared += _differential(src, prog, rng)
    # The checks above are vacuous if nothing compiles: make sure the mutator keeps some alive.
    assert accepted >= len(mutants) // 20 and compared > 0, (accepted, compared, len(mutants))
    # The parallel batch compiler agrees with compile_source on every mutant.
    batch = compile_batch(mutants, code_cap=oc.LIMITS["MAX_CODE"])
    for i, src in enumerate(mutants):
        try:
            one = compile_source(src)
        except CompileError as e:
            err = batch.error(i, src)
            assert err is not None and (err.kind, err.line, err.col) == (e.kind, e.line, e.col), (src, err, e)
        else:
            assert batch.lengths[i] == len(one.code) and np.array_equal(batch.code[i, :len(one.code)], one.code), src


# --- Bytecode into the VM -------------------------------------------------------------------

def _compiled_code() -> list[np.ndarray]:
    return [compile_source(s).code for s in VALID]


COMPILED = _compiled_code()
CODES = [op.code for op in oc.OPS]


def random_program(rng: np.random.Generator) -> np.ndarray:
    """Random words of three kinds: pure noise, plausible code (a FUNC header, known opcodes,
    small arguments, jumps inside the function), and compiled programs with a few words hit."""
    style = int(rng.integers(0, 3))
    if style == 0:
        return rng.integers(0, 2**32, int(rng.integers(0, 16)), dtype=np.uint32)
    if style == 1:
        n = int(rng.integers(1, 24))
        npar = int(rng.integers(0, 3))
        nloc = npar + int(rng.integers(0, 4))
        words = [encode("FUNC", npar | nloc << 8)]
        for pc in range(1, n):
            op = int(rng.choice(CODES)) if rng.random() < 0.95 else int(rng.integers(0, 256))
            arg = int(rng.integers(0, n + 1)) if rng.random() < 0.8 else int(rng.integers(0, 1 << 24))
            if rng.random() < 0.1:
                words.append(encode("FUNC", int(rng.integers(0, 3)) | int(rng.integers(2, 5)) << 8))
            else:
                words.append(op | arg << 8)
        return np.array(words, dtype=np.uint32)
    code = COMPILED[int(rng.integers(len(COMPILED)))].copy()
    for _ in range(int(rng.integers(1, 4))):
        k = int(rng.integers(len(code)))
        if rng.random() < 0.5:
            code[k] ^= np.uint32(1 << int(rng.integers(32)))
        else:
            code[k] = int(rng.choice(CODES)) | int(rng.integers(0, 8)) << 8
    return code


def _check_batch(batch: ProgramBatch, inputs: Encoded, runs, expected, config, out_cap):
    res = run_batch(batch, inputs, runs, expected=expected, config=config, out_cap=out_cap)
    assert set(np.unique(res.status).tolist()) <= TRAP_CODES, f"unknown status {where()}"
    assert np.all((res.steps >= 0) & (res.steps <= config.fuel)), where()
    assert np.all(res.value[res.status != 0] == 0), where()
    if res.passed is not None:
        assert not np.any(res.passed.astype(bool) & (res.status != 0)), where()
    # Determinism: the same runs in reverse order on one thread give the same results, and so
    # does the one-run-at-a-time interpreter where the batch API has a lockstep one.
    rp, ri = runs
    others = [(slice(None, None, -1), dict(nthreads=1))]
    if "lockstep" in inspect.signature(run_batch).parameters:
        others.append((slice(None), dict(lockstep=False)))
    for order, kw in others:
        again = run_batch(batch, inputs, (rp[order], ri[order]), expected=expected, config=config,
                          out_cap=out_cap, **kw)
        for name in ("status", "value", "steps", "passed", "out_list"):
            a, b = getattr(res, name), getattr(again, name)
            if a is not None:
                assert np.array_equal(a, b[order]), f"{name} differs with {kw} {where()}"
    return res


def _random_inputs(rng: np.random.Generator, n: int, garbage: bool) -> Encoded:
    words: list[int] = []
    offsets = [0]
    for _ in range(n):
        if garbage:  # anything: unknown kinds, negative or oversized list lengths, truncation
            k = int(rng.integers(0, 8))
            words += [int(v) for v in rng.choice([0, 1, 2, 3, -1, 5, 2**31 - 1, -2**31], k)]
        else:  # well-formed ints, bools and short lists
            for _ in range(int(rng.integers(0, 4))):
                kind = int(rng.integers(0, 3))
                if kind == oc.KIND_LIST:
                    m = int(rng.integers(0, 5))
                    words += [kind, m] + [int(v) for v in rng.integers(-3, 4, m)]
                else:
                    words += [kind, int(rng.integers(0, 2)) if kind == oc.KIND_BOOL else int(rng.integers(-9, 10))]
        offsets.append(len(words))
    return Encoded(np.array(words, dtype=np.int64).astype(np.int32), np.array(offsets))


def test_random_bytecode_batches():
    rng = rng_for("bytecode")
    for _ in range(iters(80)):
        progs = [random_program(rng) for _ in range(int(rng.integers(1, 120)))]
        progs += [np.zeros(0, np.uint32)] * int(rng.integers(0, 3))  # empty programs
        rng.shuffle(progs)
        offsets = np.concatenate([[0], np.cumsum([len(p) for p in progs])])
        entry = rng.integers(-1, 3, len(progs))
        batch = ProgramBatch.build(np.concatenate(progs), offsets, entry, rng.integers(0, 3, len(progs)))
        inputs = _random_inputs(rng, int(rng.integers(1, 12)), garbage=rng.random() < 0.3)
        n_runs = len(progs) * len(inputs)
        run_prog = np.repeat(np.arange(len(progs)), len(inputs))
        run_in = np.tile(np.arange(len(inputs)), len(progs))
        if rng.random() < 0.3:  # out-of-range run indices must give bad_input, not a crash
            k = rng.integers(0, n_runs, 3)
            run_prog[k] = rng.choice([-1, len(progs), 2**31 - 1], 3)
        expected = _random_inputs(rng, len(inputs), garbage=rng.random() < 0.5) if rng.random() < 0.5 else None
        config = VMConfig(fuel=int(rng.integers(1, FUEL)), max_depth=int(rng.integers(0, 10)),
                          heap_size=int(rng.integers(0, 64)), max_lists=int(rng.integers(0, 8)),
                          stack_size=int(rng.integers(1, 64)))
        res = _check_batch(batch, inputs, (run_prog, run_in), expected, config, int(rng.integers(0, 8)))
        bad, pc = cpu.validate_batch(batch.code, batch.offsets, batch.entry, int(rng.integers(1, 5)))
        for p, code in enumerate(progs):  # programs that fail validation never run
            single = cpu.validate(code, int(entry[p]))
            assert (int(bad[p]), int(pc[p])) == single, ("validate_batch differs", p, code.tolist(), where())
            if single[0] != -1:
                mine = (run_prog == p)
                assert np.all(res.status[mine] == BAD_BYTECODE), (code.tolist(), where())


def test_random_bytecode_execute():
    """The Python path: Program.from_code + execute on the raw words, with every FUNC word a
    function of int parameters."""
    rng = rng_for("execute")
    for _ in range(iters(1000)):
        code = random_program(rng)
        prog = Program.from_code(code)
        if not prog.functions:
            with pytest.raises(KeyError):
                execute(prog, "f0", [()])
            continue
        f = prog.functions[int(rng.integers(len(prog.functions)))]
        args = [tuple(int(v) for v in rng.choice([0, 1, -1, 7, 2**31 - 1, -2**31], len(f.params)))
                for _ in range(3)]
        try:
            got = execute(prog, f.name, args, fuel=FUEL, max_depth=16, heap_size=256, max_lists=16,
                          stack_size=256, steps=True)
        except Exception as e:  # noqa: BLE001
            pytest.fail(f"execute raised {type(e).__name__}: {e} on {code.tolist()} {where()}")
        for v, n in got:
            assert (type(v) is int and -2**31 <= v < 2**31 or isinstance(v, Trap)) and 0 <= n <= FUEL, \
                (v, n, code.tolist(), where())


# --- Token arrays into the compiler ---------------------------------------------------------

def _token_templates() -> list[np.ndarray]:
    """Token arrays of valid programs: from the lexer where it is exposed, else one by hand."""
    try:
        from vramgym.compiler import tokenize
        return [tokenize(s) for s in VALID]
    except (ImportError, AttributeError, OSError):
        t = oc.TOKEN_CODES  # def f(a: int) -> int:\n    return a // 2\n
        kinds = ["DEF", "NAME", "LPAREN", "NAME", "COLON", "NAME", "RPAREN", "ARROW", "NAME", "COLON",
                 "NEWLINE", "INDENT", "RETURN", "NAME", "SLASHSLASH", "INT", "NEWLINE", "DEDENT", "EOF"]
        values = [0, 10, 0, 11, 0, 5, 0, 0, 5, 0, 0, 0, 0, 11, 0, 2, 0, 0, 0]
        return [np.array([[t[k], v, 1, 1] for k, v in zip(kinds, values)], dtype=np.int32)]


def test_random_token_arrays():
    rng = rng_for("tokens")
    templates = _token_templates()
    ntok = len(oc.TOKENS)
    for _ in range(iters(60)):
        programs = []
        for _ in range(int(rng.integers(1, 200))):
            if rng.random() < 0.3:  # noise: kinds in and out of range, any values
                n = int(rng.integers(0, 40))
                t = np.stack([rng.integers(-2, ntok + 3, n), rng.choice([-1, 0, 1, 5, 9, 255, 256, 2**31 - 1], n),
                              rng.integers(-1, 5, n), rng.integers(-1, 5, n)], axis=1)
                if n and rng.random() < 0.7:
                    t[-1, 0] = 0  # end with EOF, so the parser (not the check) sees most of them
            else:  # a real program's tokens with a few rows changed, dropped or duplicated
                t = templates[int(rng.integers(len(templates)))].copy()
                for _ in range(int(rng.integers(1, 4))):
                    k = int(rng.integers(len(t)))
                    r = rng.random()
                    if r < 0.4:
                        t[k, 0] = rng.integers(0, ntok) if rng.random() < 0.9 else rng.integers(-5, 100)
                    elif r < 0.6:
                        t[k, 1] = rng.choice([0, 1, 3, 10, 11, 200, 255, 256, -1, 2**31 - 1])
                    elif r < 0.8:
                        t = np.delete(t, k, axis=0)
                    else:
                        t = np.insert(t, k, t[k], axis=0)
            programs.append(np.asarray(t, dtype=np.int32).reshape(-1, 4))
        offsets = np.concatenate([[0], np.cumsum([len(p) for p in programs])])
        cap = int(rng.choice([1, 8, 64, 1024]))
        res = compile_tokens(np.concatenate(programs), offsets, code_cap=cap)
        for i in range(len(programs)):
            n, err = int(res.lengths[i]), res.errors[i].tolist()
            if n >= 0:
                assert n <= cap and err[0] == 0, (programs[i].tolist(), n, err, where())
                assert cpu.validate(res.code[i, :n])[0] == -1, (programs[i].tolist(), where())
            else:
                assert n == -1 and err[0] in ERROR_CODES, (programs[i].tolist(), n, err, where())


# --- Bugs found by the fuzzers --------------------------------------------------------------

# A stray ] or ) after a comma on the right of an assignment was once ignored.
@pytest.mark.parametrize("line", ["x = 1, 2]", "x = [5], 6)", "a, b = 1, 2, 3]"])
def test_stray_closing_bracket_is_an_error(line):
    src = f"def f() -> int:\n    {line}\n    return 0\n"
    with pytest.raises(SyntaxError):
        compile(src, "<test>", "exec")
    with pytest.raises(CompileError):
        compile_source(src)


# `x, = 7` once compiled as `x = 7`; CPython raises TypeError (cannot unpack an int).
def test_one_target_tuple_assignment_is_an_error():
    with pytest.raises(CompileError):
        compile_source("def f() -> int:\n    x, = 7\n    return x\n")
