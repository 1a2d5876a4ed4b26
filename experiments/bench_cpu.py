"""Benchmark: vramgym's CPU backend against plain CPython on the same programs and inputs.

What a user does today to run many small candidate programs on test inputs is CPython:
`compile(src)`, `exec` the code object, call the entry function on each input, compare with the
expected output. This script measures that against vramgym (`compile_batch` + `run_batch`),
per core (both sides on one thread / one process) and on all cores (vramgym's threads against a
`multiprocessing.Pool` of CPython workers).

Workload "corpus": ~30 realistic small task programs (gcd, digit sum, primality, power mod,
collatz, fibonacci, list sum/max/count/index, reverse, insertion sort, prefix sums, dedupe,
binary search, ...), each replicated N/30 times with textual variations (renamed variables and
functions, different constants, indentation, a header comment) so no compilation cache can help;
about a quarter of the copies carry a small bug (wrong results or a trap), like candidates from
a policy. Every program gets its own 32 inputs; expected outputs come from the bug-free copy.

Workload "random" (optional): programs from `vramgym.compiler.random_programs`, when present.

Before any timing, both sides' results are compared on every (program, input); the script
aborts on any difference.

    python experiments/bench_cpu.py                 # ~3000 programs x 32 inputs, best of 3
    python experiments/bench_cpu.py --quick         # smoke test, a few seconds
    python experiments/bench_cpu.py --programs 6000 --repeat 5 --out experiments/results
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import json
import multiprocessing as mp
import os
import platform
import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

# numpy's OpenBLAS threads spin on idle cores and steal time from the timed code (no BLAS here).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from vramgym.compiler import compile_batch, compile_source  # noqa: E402
from vramgym.vm import Encoded, cpu, encode_results, encode_tuples, run_batch  # noqa: E402
from vramgym.vm import opcodes as oc  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))  # (bench_out, when loaded by path as in the tests)
from bench_out import OUT_HELP, results_dir  # noqa: E402

# --------------------------------------------------------------------------------------------
# The task templates. Placeholders: {F} entry function, {G} helper function, {C_*} constants,
# every other {NAME} a local variable or parameter (renamed per copy). The entry is always the
# first function (index 0). No template mutates its arguments (CPython reuses the input lists).
# --------------------------------------------------------------------------------------------


@dataclass
class Template:
    name: str
    src: str
    params: tuple[str, ...]
    ret: str
    gen: object  # (random.Random, consts) -> argument tuple
    consts: dict = field(default_factory=dict)  # name -> (random.Random) -> int
    bugs: tuple = ()  # (old, new) replacements on the template text


def _ints(r, lo, hi, n_lo, n_hi):
    return [r.randint(lo, hi) for _ in range(r.randint(n_lo, n_hi))]


def _pal_number(r):
    if r.random() < 0.5:
        half = str(r.randint(1, 9999))
        return int(half + half[::-1][r.randint(0, 1):])
    return r.randint(0, 10**8)


def _pal_list(r):
    xs = _ints(r, 0, 3, 0, 10)
    if r.random() < 0.5:
        return xs + xs[::-1][r.randint(0, 1):]
    return xs


TEMPLATES = [
    Template("gcd", """
def {F}({A}: int, {B}: int) -> int:
    while {B} != 0:
        {A}, {B} = {B}, {A} % {B}
    return {A}
""", ("int", "int"), "int", lambda r, c: (r.randint(0, 10**6), r.randint(0, 10**6)),
        bugs=(("{B} != 0", "{B} > 1"),)),
    Template("lcm", """
def {F}({A}: int, {B}: int) -> int:
    return {A} // {G}({A}, {B}) * {B}

def {G}({X}: int, {Y}: int) -> int:
    while {Y}:
        {X}, {Y} = {Y}, {X} % {Y}
    return {X}
""", ("int", "int"), "int", lambda r, c: (r.randint(1, 2000), r.randint(1, 2000)),
        bugs=(("* {B}", "* {A}"),)),
    Template("digit_sum", """
def {F}({N}: int) -> int:
    {S} = 0
    while {N} > 0:
        {S} += {N} % {C_K}
        {N} //= {C_K}
    return {S}
""", ("int",), "int", lambda r, c: (r.randint(0, 10**9),), {"C_K": lambda r: r.randint(2, 16)},
        bugs=(("{N} > 0", "{N} > {C_K}"),)),
    Template("is_prime", """
def {F}({N}: int) -> bool:
    if {N} < 2:
        return False
    {D} = 2
    while {D} * {D} <= {N}:
        if {N} % {D} == 0:
            return False
        {D} += 1
    return True
""", ("int",), "bool", lambda r, c: (r.randint(0, 20000),),
        bugs=(("{D} * {D} <= {N}", "{D} * {D} < {N}"),)),
    Template("power_mod", """
def {F}({B}: int, {E}: int) -> int:
    {R} = 1
    {B} = {B} % {C_M}
    while {E} > 0:
        if {E} % 2 == 1:
            {R} = {R} * {B} % {C_M}
        {B} = {B} * {B} % {C_M}
        {E} //= 2
    return {R}
""", ("int", "int"), "int", lambda r, c: (r.randint(0, 10**6), r.randint(0, 10**6)),
        {"C_M": lambda r: r.randint(1000, 46340)}, bugs=(("{E} % 2 == 1", "{E} % 2 == 0"),)),
    Template("collatz_steps", """
def {F}({N}: int) -> int:
    {C} = 0
    while {N} != 1:
        if {N} % 2 == 0:
            {N} = {N} // 2
        else:
            {N} = 3 * {N} + 1
        {C} += 1
    return {C}
""", ("int",), "int", lambda r, c: (r.randint(1, 10000),), bugs=(("{C} = 0", "{C} = 1"),)),
    Template("fib_mod", """
def {F}({N}: int) -> int:
    {A}, {B} = 0, 1
    for {I} in range({N}):
        {A}, {B} = {B}, ({A} + {B}) % {C_M}
    return {A}
""", ("int",), "int", lambda r, c: (r.randint(0, 300),), {"C_M": lambda r: r.randint(1000, 10**6)},
        bugs=(("range({N})", "range({N} - 1)"),)),
    Template("sum_list", """
def {F}({XS}: list[int]) -> int:
    {S} = 0
    for {X} in {XS}:
        {S} += {X}
    return {S}
""", ("list",), "int", lambda r, c: (_ints(r, -1000, 1000, 0, 20),), bugs=(("{S} += {X}", "{S} += abs({X})"),)),
    Template("max_list", """
def {F}({XS}: list[int]) -> int:
    {B} = {XS}[0]
    for {I} in range(1, len({XS})):
        if {XS}[{I}] > {B}:
            {B} = {XS}[{I}]
    return {B}
""", ("list",), "int", lambda r, c: (_ints(r, -1000, 1000, 1, 20),),
        bugs=(("range(1, len({XS}))", "range(1, len({XS}) - 1)"),)),
    Template("count_greater", """
def {F}({XS}: list[int], {T}: int) -> int:
    {C} = 0
    for {X} in {XS}:
        if {X} > {T}:
            {C} += 1
    return {C}
""", ("list", "int"), "int", lambda r, c: (_ints(r, 0, 20, 0, 20), r.randint(0, 20)),
        bugs=(("{X} > {T}", "{X} >= {T}"),)),
    Template("index_of", """
def {F}({XS}: list[int], {T}: int) -> int:
    for {I} in range(len({XS})):
        if {XS}[{I}] == {T}:
            return {I}
    return -1
""", ("list", "int"), "int", lambda r, c: (_ints(r, 0, 9, 0, 15), r.randint(0, 9)),
        bugs=(("return -1", "return len({XS})"),)),
    Template("reverse", """
def {F}({XS}: list[int]) -> list[int]:
    {OUT} = []
    {I} = len({XS}) - 1
    while {I} >= 0:
        {OUT}.append({XS}[{I}])
        {I} -= 1
    return {OUT}
""", ("list",), "list", lambda r, c: (_ints(r, -99, 99, 0, 20),), bugs=(("{I} >= 0", "{I} > 0"),)),
    Template("insertion_sort", """
def {F}({XS}: list[int]) -> list[int]:
    {YS} = {XS} + []
    for {I} in range(1, len({YS})):
        {K} = {YS}[{I}]
        {J} = {I} - 1
        while {J} >= 0 and {YS}[{J}] > {K}:
            {YS}[{J} + 1] = {YS}[{J}]
            {J} -= 1
        {YS}[{J} + 1] = {K}
    return {YS}
""", ("list",), "list", lambda r, c: (_ints(r, -99, 99, 0, 16),), bugs=(("{YS}[{J}] > {K}", "{YS}[{J}] < {K}"),)),
    Template("prefix_sums", """
def {F}({XS}: list[int]) -> list[int]:
    {OUT} = []
    {S} = 0
    for {X} in {XS}:
        {S} += {X}
        {OUT}.append({S})
    return {OUT}
""", ("list",), "list", lambda r, c: (_ints(r, -1000, 1000, 0, 20),),
        bugs=(("{S} += {X}\n        {OUT}.append({S})", "{OUT}.append({S})\n        {S} += {X}"),)),
    Template("filter_evens", """
def {F}({XS}: list[int]) -> list[int]:
    {OUT} = []
    for {X} in {XS}:
        if {X} % 2 == 0:
            {OUT}.append({X})
    return {OUT}
""", ("list",), "list", lambda r, c: (_ints(r, -50, 50, 0, 20),), bugs=(("{X} % 2 == 0", "{X} % 4 == 0"),)),
    Template("dedupe", """
def {F}({XS}: list[int]) -> list[int]:
    {OUT} = []
    for {X} in {XS}:
        {SEEN} = False
        for {Y} in {OUT}:
            if {Y} == {X}:
                {SEEN} = True
                break
        if not {SEEN}:
            {OUT}.append({X})
    return {OUT}
""", ("list",), "list", lambda r, c: (_ints(r, 0, 9, 0, 20),), bugs=(("for {Y} in {OUT}:", "for {Y} in {OUT} + [0]:"),)),
    Template("binary_search", """
def {F}({XS}: list[int], {T}: int) -> int:
    {LO}, {HI} = 0, len({XS}) - 1
    while {LO} <= {HI}:
        {MID} = ({LO} + {HI}) // 2
        if {XS}[{MID}] == {T}:
            return {MID}
        if {XS}[{MID}] < {T}:
            {LO} = {MID} + 1
        else:
            {HI} = {MID} - 1
    return -1
""", ("list", "int"), "int", lambda r, c: (sorted(r.sample(range(-50, 50), r.randint(0, 20))), r.randint(-50, 50)),
        bugs=(("{HI} = {MID} - 1", "{HI} = {MID} - 2"),)),
    Template("is_palindrome_list", """
def {F}({XS}: list[int]) -> bool:
    {I}, {J} = 0, len({XS}) - 1
    while {I} < {J}:
        if {XS}[{I}] != {XS}[{J}]:
            return False
        {I} += 1
        {J} -= 1
    return True
""", ("list",), "bool", lambda r, c: (_pal_list(r),), bugs=(("len({XS}) - 1", "len({XS}) - 2"),)),
    Template("is_palindrome_number", """
def {F}({N}: int) -> bool:
    {M} = {N}
    {R} = 0
    while {M} > 0:
        {R} = {R} * 10 + {M} % 10
        {M} //= 10
    return {R} == {N}
""", ("int",), "bool", lambda r, c: (_pal_number(r),), bugs=(("{M} > 0", "{M} > 9"),)),
    Template("count_divisors", """
def {F}({N}: int) -> int:
    {C} = 0
    {D} = 1
    while {D} * {D} <= {N}:
        if {N} % {D} == 0:
            {C} += 1 if {D} * {D} == {N} else 2
        {D} += 1
    return {C}
""", ("int",), "int", lambda r, c: (r.randint(1, 10**5),), bugs=(("1 if {D} * {D} == {N} else 2", "2"),)),
    Template("sum_squares", """
def {F}({N}: int) -> int:
    {S} = 0
    for {I} in range(0, {N} + 1, {C_K}):
        {S} += {I} * {I}
    return {S}
""", ("int",), "int", lambda r, c: (r.randint(0, 1000),), {"C_K": lambda r: r.randint(1, 5)},
        bugs=(("{N} + 1", "{N}"),)),
    Template("popcount", """
def {F}({N}: int) -> int:
    {C} = 0
    while {N} > 0:
        {C} += {N} % 2
        {N} //= 2
    return {C}
""", ("int",), "int", lambda r, c: (r.randint(0, 2**31 - 1),), bugs=(("{N} % 2", "{N} % 3"),)),
    Template("second_largest", """
def {F}({XS}: list[int]) -> int:
    {A}, {B} = -{C_S}, -{C_S}
    for {X} in {XS}:
        if {X} > {A}:
            {A}, {B} = {X}, {A}
        elif {X} > {B}:
            {B} = {X}
    return {B}
""", ("list",), "int", lambda r, c: (_ints(r, -1000, 1000, 2, 20),), {"C_S": lambda r: r.randint(10**6, 10**9)},
        bugs=(("{A}, {B} = {X}, {A}", "{A} = {X}"),)),
    Template("running_max", """
def {F}({XS}: list[int]) -> list[int]:
    {OUT} = []
    for {X} in {XS}:
        if len({OUT}) == 0 or {X} > {OUT}[-1]:
            {OUT}.append({X})
        else:
            {OUT}.append({OUT}[-1])
    return {OUT}
""", ("list",), "list", lambda r, c: (_ints(r, -100, 100, 0, 20),), bugs=(("{X} > {OUT}[-1]", "{X} < {OUT}[-1]"),)),
    Template("dot", """
def {F}({XS}: list[int], {YS}: list[int]) -> int:
    {S} = 0
    for {I} in range(min(len({XS}), len({YS}))):
        {S} += {XS}[{I}] * {YS}[{I}]
    return {S}
""", ("list", "list"), "int", lambda r, c: (_ints(r, -100, 100, 0, 20), _ints(r, -100, 100, 0, 20)),
        bugs=(("min(len", "max(len"),)),
    Template("count_runs", """
def {F}({XS}: list[int]) -> int:
    if len({XS}) == 0:
        return 0
    {C} = 1
    for {I} in range(1, len({XS})):
        if {XS}[{I}] != {XS}[{I} - 1]:
            {C} += 1
    return {C}
""", ("list",), "int", lambda r, c: (_ints(r, 0, 2, 0, 20),), bugs=(("{C} = 1", "{C} = 0"),)),
    Template("rotate_left", """
def {F}({XS}: list[int], {K}: int) -> list[int]:
    {N} = len({XS})
    if {N} == 0:
        return []
    {K} = {K} % {N}
    {OUT} = []
    for {I} in range({N}):
        {OUT}.append({XS}[({I} + {K}) % {N}])
    return {OUT}
""", ("list", "int"), "list", lambda r, c: (_ints(r, -99, 99, 0, 15), r.randint(-50, 50)),
        bugs=(("({I} + {K}) % {N}", "{I} + {K}"),)),
    Template("merge_sorted", """
def {F}({XS}: list[int], {YS}: list[int]) -> list[int]:
    {OUT} = []
    {I}, {J} = 0, 0
    while {I} < len({XS}) and {J} < len({YS}):
        if {XS}[{I}] <= {YS}[{J}]:
            {OUT}.append({XS}[{I}])
            {I} += 1
        else:
            {OUT}.append({YS}[{J}])
            {J} += 1
    while {I} < len({XS}):
        {OUT}.append({XS}[{I}])
        {I} += 1
    while {J} < len({YS}):
        {OUT}.append({YS}[{J}])
        {J} += 1
    return {OUT}
""", ("list", "list"), "list", lambda r, c: (sorted(_ints(r, -50, 50, 0, 15)), sorted(_ints(r, -50, 50, 0, 15))),
        bugs=(("{XS}[{I}] <= {YS}[{J}]", "{XS}[{I}] >= {YS}[{J}]"),)),
    Template("isqrt", """
def {F}({N}: int) -> int:
    {LO}, {HI} = 0, min({N}, 46340)
    while {LO} < {HI}:
        {MID} = ({LO} + {HI} + 1) // 2
        if {MID} * {MID} <= {N}:
            {LO} = {MID}
        else:
            {HI} = {MID} - 1
    return {LO}
""", ("int",), "int", lambda r, c: (r.randint(0, 2**31 - 1),), bugs=(("{MID} * {MID} <= {N}", "{MID} * {MID} < {N}"),)),
    Template("count_primes", """
def {F}({N}: int) -> int:
    {C} = 0
    for {I} in range(2, {N} + 1):
        if {G}({I}):
            {C} += 1
    return {C}

def {G}({M}: int) -> bool:
    {D} = 2
    while {D} * {D} <= {M}:
        if {M} % {D} == 0:
            return False
        {D} += 1
    return True
""", ("int",), "int", lambda r, c: (r.randint(0, 150),), bugs=(("range(2, {N} + 1)", "range(1, {N} + 1)"),)),
    Template("max_freq", """
def {F}({XS}: list[int]) -> int:
    {BEST} = 0
    for {X} in {XS}:
        {C} = 0
        for {Y} in {XS}:
            if {Y} == {X}:
                {C} += 1
        {BEST} = max({BEST}, {C})
    return {BEST}
""", ("list",), "int", lambda r, c: (_ints(r, 0, 5, 0, 20),), bugs=(("{BEST} = 0", "{BEST} = 1"),)),
    Template("fizz_sum", """
def {F}({N}: int) -> int:
    {S} = 0
    for {I} in range({N}):
        if {I} % {C_P} == 0 or {I} % {C_Q} == 0:
            {S} += {I}
    return {S}
""", ("int",), "int", lambda r, c: (r.randint(0, 2000),), {"C_P": lambda r: r.randint(2, 9), "C_Q": lambda r: r.randint(2, 9)},
        bugs=((" or ", " and "),)),
    Template("abs_diff_sum", """
def {F}({XS}: list[int]) -> int:
    {S} = 0
    for {I} in range(1, len({XS})):
        {S} += abs({XS}[{I}] - {XS}[{I} - 1])
    return {S}
""", ("list",), "int", lambda r, c: (_ints(r, -1000, 1000, 0, 20),), bugs=(("range(1,", "range(0,"),)),
    Template("max_subarray", """
def {F}({XS}: list[int]) -> int:
    {BEST} = {XS}[0]
    {CUR} = 0
    for {X} in {XS}:
        {CUR} = max({X}, {CUR} + {X})
        {BEST} = max({BEST}, {CUR})
    return {BEST}
""", ("list",), "int", lambda r, c: (_ints(r, -100, 100, 1, 20),), bugs=(("max({X}, {CUR} + {X})", "{CUR} + {X}"),)),
]

VAR_POOL = ("a", "b", "c", "d", "e", "g", "h", "k", "m", "n", "p", "q", "r", "s", "t", "u", "v", "w", "x",
            "y", "z", "acc", "tot", "cur", "nxt", "prev", "lo", "hi", "mid", "val", "res", "cnt", "idx", "tmp",
            "num", "den", "left", "right", "best", "run", "pos", "item", "elem", "head", "tail", "total",
            "count", "value", "limit", "bound", "key", "part", "step", "mark", "seen", "flag", "out", "buf",
            "arr", "data", "vals", "nums", "seq", "ys", "xs", "zs", "ws", "j", "i")
FUNC_POOL = ("solve", "f", "compute", "answer", "run_task", "main_fn", "entry", "calc")
HELPER_POOL = ("helper", "aux", "g", "inner", "check", "sub")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass
class Task:
    template: str
    source: str
    entry: str
    params: tuple[str, ...]
    ret: str
    inputs: list  # 32 argument tuples
    expected: list  # one value per input (from the bug-free copy)
    buggy: bool


def _render(t: Template, r: random.Random, copy_id: int, bug: tuple | None):
    text = t.src.strip("\n") + "\n"
    if bug is not None:
        assert bug[0] in text, (t.name, bug)
        text = text.replace(bug[0], bug[1], 1)
    names = sorted(set(_PLACEHOLDER.findall(t.src)))
    variables = [n for n in names if n not in ("F", "G") and not n.startswith("C_")]
    picked = r.sample(VAR_POOL, len(variables))
    if r.random() < 0.5:  # suffixes make the name space much larger
        picked = [f"{p}{r.randint(0, 99)}" for p in picked]
    mapping = dict(zip(variables, picked))
    mapping["F"] = f"{r.choice(FUNC_POOL)}_{t.name}" if r.random() < 0.5 else f"{r.choice(FUNC_POOL)}{copy_id}"
    mapping["G"] = f"{r.choice(HELPER_POOL)}_{r.randint(0, 999)}"
    return mapping, text


def make_corpus(n_programs: int, n_inputs: int, seed: int = 0, bug_rate: float = 0.25) -> list[Task]:
    r = random.Random(seed)
    tasks: list[Task] = []
    for k in range(n_programs):
        t = TEMPLATES[k % len(TEMPLATES)]
        consts = {name: f(r) for name, f in t.consts.items()}
        bug = r.choice(t.bugs) if t.bugs and r.random() < bug_rate else None
        mapping, good_text = _render(t, r, k, None)
        fmt = {**mapping, **{name: str(v) for name, v in consts.items()}}
        unit = r.choice((2, 3, 4))
        header = f"# task {t.name}, candidate {k}\n" if r.random() < 0.7 else ""

        def finish(text):
            lines = []
            for line in text.format(**fmt).splitlines():
                stripped = line.lstrip(" ")
                lines.append(" " * ((len(line) - len(stripped)) // 4 * unit) + stripped)
            return header + "\n".join(lines) + "\n"

        good = finish(good_text)
        source = good if bug is None else finish(good_text.replace(bug[0], bug[1], 1))
        inputs = [t.gen(r, consts) for _ in range(n_inputs)]
        expected = cpython_results(good, mapping["F"], inputs)
        if any(isinstance(e, TrapResult) for e in expected):
            raise SystemExit(f"bench: the bug-free copy of {t.name} traps on {inputs}:\n{good}")
        tasks.append(Task(t.name, source, mapping["F"], t.params, t.ret, inputs, expected, bug is not None))
    return tasks


# --------------------------------------------------------------------------------------------
# CPython side
# --------------------------------------------------------------------------------------------


class TrapResult(tuple):
    """('trap', kind): a run that raised (CPython) or trapped (VM)."""


_EXC_TRAP = ((ZeroDivisionError, "zero_division"), (IndexError, "index_error"), (ValueError, "value_error"),
             (RecursionError, "recursion"))


def _trap_of(e: BaseException) -> TrapResult:
    for cls, kind in _EXC_TRAP:
        if isinstance(e, cls):
            return TrapResult(("trap", kind))
    return TrapResult(("trap", f"python:{type(e).__name__}"))


def cpython_results(source: str, entry: str, inputs, code=None) -> list:
    ns: dict = {}
    exec(code if code is not None else compile(source, "<bench>", "exec"), ns)
    f = ns[entry]
    out = []
    for args in inputs:
        try:
            out.append(f(*args))
        except Exception as e:  # noqa: BLE001 - every exception is a result here
            out.append(_trap_of(e))
    return out


def cpy_compile(sources):
    for s in sources:
        compile(s, "<bench>", "exec")


def cpy_execute(codes, entries, inputs_list):
    """exec each code object once, then call its entry on its inputs; returns all results."""
    results = []
    append = results.append
    for code, entry, inputs in zip(codes, entries, inputs_list):
        ns: dict = {}
        exec(code, ns)
        f = ns[entry]
        for args in inputs:
            try:
                append(f(*args))
            except (ZeroDivisionError, IndexError, ValueError, RecursionError) as e:
                append(_trap_of(e))
    return results


def cpy_end_to_end(sources, entries, inputs_list, expected_list):
    """compile + exec + call + compare; returns (programs passing all inputs, runs passed)."""
    progs_ok = runs_ok = 0
    for src, entry, inputs, expected in zip(sources, entries, inputs_list, expected_list):
        ns: dict = {}
        exec(compile(src, "<bench>", "exec"), ns)
        f = ns[entry]
        ok = 0
        for args, want in zip(inputs, expected):
            try:
                got = f(*args)
            except (ZeroDivisionError, IndexError, ValueError, RecursionError):
                continue
            if got == want and type(got) is type(want):
                ok += 1
        runs_ok += ok
        progs_ok += ok == len(inputs)
    return progs_ok, runs_ok


# Pool workers: the parent sets _W before forking, the workers read it (fork start method).
_W: dict = {}


def _w_compile(rng):
    cpy_compile(_W["sources"][rng[0]:rng[1]])
    return rng[1] - rng[0]


def _w_execute(rng):
    a, b = rng
    return cpy_execute(_W["codes"][a:b], _W["entries"][a:b], _W["inputs"][a:b])


def _w_end_to_end(rng):
    a, b = rng
    return cpy_end_to_end(_W["sources"][a:b], _W["entries"][a:b], _W["inputs"][a:b], _W["expected"][a:b])


# --------------------------------------------------------------------------------------------
# vramgym side
# --------------------------------------------------------------------------------------------

KIND_CODE = {"int": oc.KIND_INT, "bool": oc.KIND_BOOL, "list": oc.KIND_LIST}


def vg_encode(tasks, with_expected: bool):
    """Inputs (and expected values) of every task, grouped by signature; run i*M + j is task i on
    its input j. Returns (inputs, expected or None, (run_prog, run_in))."""
    m = len(tasks[0].inputs)
    groups: dict = {}
    for i, t in enumerate(tasks):
        groups.setdefault((t.params, t.ret), []).append(i)
    parts, eparts, base = [], [], np.zeros(len(tasks), dtype=np.int32)
    total = 0
    for (params, ret), idx in groups.items():
        parts.append(encode_tuples([a for i in idx for a in tasks[i].inputs], params))
        if with_expected:
            eparts.append(encode_results([e for i in idx for e in tasks[i].expected], ret))
        base[idx] = total + m * np.arange(len(idx), dtype=np.int32)
        total += m * len(idx)
    run_prog = np.repeat(np.arange(len(tasks), dtype=np.int32), m)
    run_in = (base[:, None] + np.arange(m, dtype=np.int32)).ravel()
    return Encoded.concat(parts), Encoded.concat(eparts) if with_expected else None, (run_prog, run_in)


def vg_programs(tasks, nthreads, code_cap=1024):
    cb = compile_batch([t.source for t in tasks], nthreads=nthreads, code_cap=code_cap)
    return cb, cb.to_programs(entry=np.array([t.entry_index for t in tasks], dtype=np.int32)
                              if hasattr(tasks[0], "entry_index") else 0,
                              ret_kind=np.array([KIND_CODE[t.ret] for t in tasks], dtype=np.int32))


def vg_end_to_end(tasks, nthreads):
    _, progs = vg_programs(tasks, nthreads)
    inputs, expected, runs = vg_encode(tasks, True)
    res = run_batch(progs, inputs, runs, expected=expected, out_cap=0, nthreads=nthreads)
    passed = res.passed.reshape(len(tasks), -1)
    return int(passed.all(axis=1).sum()), int(passed.sum())


def vg_one_by_one(sources, entries, inputs_list):
    """compile_source + execute, one program per call: the Python API without batching."""
    from vramgym.vm import execute
    return [execute(compile_source(s), e, inputs) for s, e, inputs in zip(sources, entries, inputs_list)]


def cpy_one_by_one(sources, entries, inputs_list):
    """CPython's side of vg_one_by_one: compile, exec and call each program on its inputs."""
    return cpy_execute([compile(s, "<bench>", "exec") for s in sources], entries, inputs_list)


def vg_decode(res, tasks, m):
    out = []
    status, value = res.status.tolist(), res.value.tolist()
    for i, t in enumerate(tasks):
        for j in range(m):
            r = i * m + j
            if status[r]:
                out.append(TrapResult(("trap", oc.TRAP_NAMES.get(status[r], f"code{status[r]}"))))
            elif t.ret == "bool":
                out.append(bool(value[r]))
            elif t.ret == "list":
                out.append(res.out_list[r, :value[r]].tolist())
            else:
                out.append(value[r])
    return out


# --------------------------------------------------------------------------------------------
# Random programs (optional second workload)
# --------------------------------------------------------------------------------------------


def make_random(n_programs: int, n_inputs: int, seed: int = 1):
    try:
        from vramgym.compiler import random_programs as rp
        gen, args = rp.generate_program, rp.random_args
    except (ImportError, AttributeError) as e:
        return None, f"skipped: vramgym.compiler.random_programs unavailable ({e})"
    rng = np.random.default_rng(seed)
    tasks = []
    for k in range(n_programs):
        p = gen(rng)
        inputs = [tuple(a) for a in args(rng, p.params, n_inputs)]
        t = Task("random", p.source, p.entry, tuple(p.params), p.ret, inputs, [], False)
        t.entry_index = compile_source(p.source).function(p.entry).index   # (sources may end lines with \r)
        tasks.append(t)
    return tasks, None


def _fresh_args(tasks):
    """Copies of the arguments (random programs may mutate their list arguments)."""
    return [[tuple(list(v) if isinstance(v, list) else v for v in a) for a in t.inputs] for t in tasks]


# --------------------------------------------------------------------------------------------
# Timing helpers and reporting
# --------------------------------------------------------------------------------------------


def best_of(fn, repeat: int, prepare=None):
    best = float("inf")
    out = None
    for _ in range(repeat):
        arg = prepare() if prepare else None
        gc.collect()
        t0 = time.perf_counter()
        out = fn(arg) if prepare else fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def best_pair(fn_cpy, fn_vg, repeat: int, prepare=None):
    """Best-of-R of both sides, interleaved (C, V, C, V, ...) so that load from other processes
    falls on both alike. Returns (cpython_s, vramgym_s, cpython_out, vramgym_out)."""
    bc = bv = float("inf")
    oc_ = ov = None
    for _ in range(repeat):
        t, oc_ = best_of(fn_cpy, 1, prepare)
        bc = min(bc, t)
        t, ov = best_of(fn_vg, 1)
        bv = min(bv, t)
    return bc, bv, oc_, ov


def machine_info() -> dict:
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    import subprocess
    import vramgym.vm
    root = Path(vramgym.vm.__file__).resolve().parent.parent
    try:
        rev = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True,
                             text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        rev = "unknown"
    return {"cpu": model, "cores": cores, "cpu_count": os.cpu_count(), "load_avg_at_start": load, "vramgym": f"{root} @ {rev}",
            "python": sys.version.split()[0],
            "implementation": platform.python_implementation(), "numpy": np.__version__,
            "platform": platform.platform()}


def check_same(tasks, vg_results, cpy_results, label):
    m = len(tasks[0].inputs)
    bad = [(r, a, b) for r, (a, b) in enumerate(zip(vg_results, cpy_results))
           if a != b or type(a) is not type(b)]
    if bad:
        r, a, b = bad[0]
        t = tasks[r // m]
        raise SystemExit(f"bench: {label}: vramgym and CPython disagree on {len(bad)} of {len(vg_results)} runs; "
                         f"first: program {r // m} ({t.template}) input {t.inputs[r % m]!r}: "
                         f"vramgym {a!r}, CPython {b!r}\n{t.source}")


def row(metric, unit, cpy_time, vg_time, count):
    return {"metric": metric, "unit": unit, "count": count, "cpython_s": cpy_time, "vramgym_s": vg_time,
            "cpython_per_s": count / cpy_time, "vramgym_per_s": count / vg_time, "ratio": cpy_time / vg_time}


def _fmt_rate(x):
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.1f} k" if x >= 1e3 else f"{x:.0f}"


def markdown(results) -> str:
    m = results["machine"]
    lines = [f"# vramgym CPU backend vs CPython", "",
             f"Machine: {m['cpu']}, {m['cores']} cores usable, Python {m['python']} ({m['implementation']}), "
             f"numpy {m['numpy']}. Load average at start: "
             f"{', '.join(f'{x:.2f}' for x in m['load_avg_at_start']) if m.get('load_avg_at_start') else 'n/a'}"
             " (other processes on the machine make timings noisy).", "",
             f"vramgym: {m.get('vramgym', 'unknown')}.", "",
             f"Workload: {results['config']['programs']} programs x {results['config']['inputs']} inputs, "
             f"best of {results['config']['repeat']}. Correctness check: "
             f"{'passed' if results['correct'] else 'FAILED'}."
             + (f" The corpus holds {results['distinct_programs']} distinct programs (bytecode and entry; the "
                "others differ from one of them in names, layout or comments only): run_batch compiles each "
                "once and runs its copies on that code; the row 'copies not sharing code' compiles every "
                "program as if it had none."
                if results.get("distinct_programs") else ""), ""]
    for section in results["sections"]:
        lines += [f"## {section['title']}", ""]
        if section.get("note"):
            lines += [section["note"], ""]
        lines += ["| metric | unit | CPython /s | vramgym /s | vramgym / CPython |", "| --- | --- | ---: | ---: | ---: |"]
        for r in section["rows"]:
            lines.append(f"| {r['metric']} | {r['unit']} | {_fmt_rate(r['cpython_per_s'])} | "
                         f"{_fmt_rate(r['vramgym_per_s'])} | {r['ratio']:.1f}x |")
        lines.append("")
    if results.get("per_template"):
        lines += ["## Execute per template (per core)", "",
                  "Each template timed alone (one call per side); share: its part of CPython's time on the "
                  "corpus, so the corpus ratio is about the share-weighted harmonic mean of these.", "",
                  "| template | programs | VM steps/run | CPython ns/run | vramgym ns/run | share | vramgym / CPython |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in results["per_template"]:
            lines.append(f"| {r['template']} | {r['programs']} | {r['vm_steps_per_run']:.0f} | "
                         f"{r['cpython_s'] / r['runs'] * 1e9:.0f} | {r['vramgym_s'] / r['runs'] * 1e9:.0f} | "
                         f"{100 * r['cpython_share']:.1f}% | {r['ratio']:.1f}x |")
        lines.append("")
    if results.get("pass_counts"):
        pc = results["pass_counts"]
        lines += ["## End-to-end pass counts", "",
                  f"Programs passing all inputs: CPython {pc['cpython'][0]}, vramgym {pc['vramgym'][0]} "
                  f"(of {results['config']['programs']}); runs passed: CPython {pc['cpython'][1]}, "
                  f"vramgym {pc['vramgym'][1]}.", ""]
    if results.get("breakdown"):
        lines += ["## vramgym end-to-end breakdown (per core, seconds)", "", "| step | s |", "| --- | ---: |"]
        lines += [f"| {k} | {v:.4f} |" for k, v in results["breakdown"].items()]
        lines.append("")
    if results.get("vm_profile"):
        vp = results["vm_profile"]
        lines += [f"VM: {vp['instructions_per_run']:.0f} instructions per run on average, "
                  f"{vp['ns_per_instruction']:.1f} ns per instruction (one thread); encoding inputs and "
                  f"expected values in Python: {vp['encode_us_per_run']:.1f} us per run.", ""]
    if results.get("random_note"):
        lines += [f"Random workload: {results['random_note']}", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------------------------


def log(*a):
    print(*a, flush=True)


def bench_workload(tasks, repeat, label, with_e2e, code_cap=1024):
    """Per-core compile / execute (/ end-to-end) rows for one workload (already verified)."""
    m = len(tasks[0].inputs)
    n = len(tasks)
    sources = [t.source for t in tasks]
    entries = [t.entry for t in tasks]
    codes = [compile(s, "<bench>", "exec") for s in sources]
    fresh = (lambda: _fresh_args(tasks)) if label == "random" else None
    inputs_list = [t.inputs for t in tasks]
    _, progs = vg_programs(tasks, 1, code_cap)
    inputs, expected, runs = vg_encode(tasks, with_e2e)
    out_cap = 64 if any(t.ret == "list" for t in tasks) else 0

    # warm up both sides on a prefix
    w = min(n, 64)
    cpy_compile(sources[:w])
    # (on copies where programs may mutate their arguments: the timed runs copy from these lists)
    cpy_execute(codes[:w], entries[:w], fresh()[:w] if fresh else inputs_list[:w])
    vg_programs(tasks[:w], 1, code_cap)
    run_batch(progs, inputs, runs, out_cap=out_cap, nthreads=1)

    rows = []
    tc, tv, _, _ = best_pair(lambda: cpy_compile(sources),
                             lambda: compile_batch(sources, nthreads=1, code_cap=code_cap), repeat)
    rows.append(row(f"compile ({label})", "programs", tc, tv, n))
    if fresh:
        tc, tv, _, _ = best_pair(lambda a: cpy_execute(codes, entries, a),
                                 lambda: run_batch(progs, inputs, runs, out_cap=out_cap, nthreads=1), repeat, fresh)
    else:
        tc, tv, _, _ = best_pair(lambda: cpy_execute(codes, entries, inputs_list),
                                 lambda: run_batch(progs, inputs, runs, out_cap=out_cap, nthreads=1), repeat)
    rows.append(row(f"execute ({label}, {m} inputs/program)", "runs", tc, tv, n * m))
    e2e = None
    if with_e2e:
        expected_list = [t.expected for t in tasks]
        tc, tv, pc, pv = best_pair(lambda: cpy_end_to_end(sources, entries, inputs_list, expected_list),
                                   lambda: vg_end_to_end(tasks, 1), repeat)
        rows.append(row(f"end to end ({label}: compile + run + compare)", "programs", tc, tv, n))
        e2e = (pc, pv)
        k = min(n, 500)   # the one-program calls: what a loop over candidates pays without the batch API
        tc, tv, _, _ = best_pair(lambda: cpy_one_by_one(sources[:k], entries[:k], inputs_list[:k]),
                                 lambda: vg_one_by_one(sources[:k], entries[:k], inputs_list[:k]), repeat)
        rows.append(row(f"one program per call ({label}: compile_source + execute)", "programs", tc, tv, k))
    return rows, e2e


def distinct_programs(tasks) -> int:
    """How many distinct programs (bytecode and entry) the corpus holds: the others are copies of
    one of them that differ in names, layout or comments only."""
    _, progs = vg_programs(tasks, 1)
    return len({(progs.code[progs.offsets[i]:progs.offsets[i + 1]].tobytes(), int(progs.entry[i]))
                for i in range(len(tasks))})


def unshared_row(tasks, repeat):
    """Execute on the corpus with each program compiled as if it had no copies (vg_jit_cache's
    share 0), beside CPython: run_batch compiles a distinct program once and its copies run that
    code; this row shows the ratio without it. None where the JIT is not built."""
    lib = cpu.lib()
    lib.vg_jit_cache.restype = ctypes.c_int64
    lib.vg_jit_cache.argtypes = [ctypes.c_int32, ctypes.c_int64, ctypes.c_int32]
    if lib.vg_jit_cache(-1, -1, -1) < 0:
        return None
    m = len(tasks[0].inputs)
    codes = [compile(t.source, "<bench>", "exec") for t in tasks]
    entries, inputs_list = [t.entry for t in tasks], [t.inputs for t in tasks]
    _, progs = vg_programs(tasks, 1)
    inputs, _, runs = vg_encode(tasks, False)
    out_cap = 64 if any(t.ret == "list" for t in tasks) else 0
    lib.vg_jit_cache(0, -1, -1)
    try:
        tc, tv, _, _ = best_pair(lambda: cpy_execute(codes, entries, inputs_list),
                                 lambda: run_batch(progs, inputs, runs, out_cap=out_cap, nthreads=1), repeat)
    finally:
        lib.vg_jit_cache(1, -1, -1)
    return row(f"execute (corpus, {m} inputs/program, copies not sharing code)", "runs", tc, tv, len(tasks) * m)


def per_template(tasks, repeat):
    """Execute time per template, per core, CPython beside vramgym (interleaved best-of-R): where
    the corpus ratio comes from."""
    by: dict = {}
    for t in tasks:
        by.setdefault(t.template, []).append(t)
    rows = []
    for name, ts in by.items():
        codes = [compile(t.source, "<bench>", "exec") for t in ts]
        entries, inputs_list = [t.entry for t in ts], [t.inputs for t in ts]
        _, progs = vg_programs(ts, 1)
        inputs, _, runs = vg_encode(ts, False)
        out_cap = 64 if ts[0].ret == "list" else 0
        tc, tv, _, res = best_pair(lambda: cpy_execute(codes, entries, inputs_list),
                                   lambda: run_batch(progs, inputs, runs, out_cap=out_cap, nthreads=1), repeat)
        n = len(runs[0])
        rows.append({"template": name, "programs": len(ts), "runs": n, "cpython_s": tc, "vramgym_s": tv,
                     "ratio": tc / tv, "vm_steps_per_run": float(res.steps.astype(np.int64).sum()) / n})
    total_c = sum(r["cpython_s"] for r in rows)
    for r in rows:
        r["cpython_share"] = r["cpython_s"] / total_c
    return sorted(rows, key=lambda r: r["ratio"])


RANDOM_CODE_CAP = 8192


def verify(tasks, label, code_cap=1024):
    m = len(tasks[0].inputs)
    before = repr([t.inputs for t in tasks]) if label != "random" else None
    cpy = []
    for t in tasks:
        cpy += cpython_results(t.source, t.entry, [tuple(list(v) if isinstance(v, list) else v for v in a)
                                                  for a in t.inputs] if label == "random" else t.inputs)
    if before is not None and repr([t.inputs for t in tasks]) != before:
        raise SystemExit(f"bench: {label}: a program mutated its input lists")
    cb, progs = vg_programs(tasks, 0, code_cap)
    if label == "random" and not cb.ok.all():  # too long for code_cap: leave those out
        return None, [i for i in range(len(tasks)) if cb.ok[i]]
    if not cb.ok.all():
        i = int(np.flatnonzero(~cb.ok)[0])
        raise SystemExit(f"bench: {label}: program {i} fails to compile: {cb.error(i, tasks[i].source)}\n{tasks[i].source}")
    inputs, _, runs = vg_encode(tasks, False)
    res = run_batch(progs, inputs, runs, out_cap=256, nthreads=0)
    vg = vg_decode(res, tasks, m)
    return cpy, vg


def _at_least(lo: int):
    def parse(text: str) -> int:
        v = int(text)
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be >= {lo}, got {v}")
        return v
    return parse


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=_at_least(1), default=3000, help="corpus programs (default 3000)")
    ap.add_argument("--inputs", type=_at_least(1), default=32, help="inputs per program (default 32)")
    ap.add_argument("--repeat", type=_at_least(1), default=3, help="timed repetitions, the best is reported (default 3)")
    ap.add_argument("--random-programs", type=_at_least(0), default=1000,
                    help="programs of the random workload (0: skip; default 1000)")
    ap.add_argument("--workers", type=_at_least(0), default=0, help="cores for the multi-core line (default: all)")
    ap.add_argument("--quick", action="store_true", help="small sizes for a smoke test")
    ap.add_argument("--no-multicore", action="store_true", help="skip the multi-core line")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help=OUT_HELP)
    args = ap.parse_args(argv)
    out = results_dir(ap, args.out, args.quick)
    if args.quick:
        args.programs, args.repeat, args.random_programs = min(args.programs, 4 * len(TEMPLATES)), 1, min(args.random_programs, 30)

    info = machine_info()
    workers = args.workers or info["cores"]
    log(f"machine: {info['cpu']}, {info['cores']} cores usable (os.cpu_count {info['cpu_count']}), "
        f"Python {info['python']}, numpy {info['numpy']}")
    results = {"machine": info, "config": {"programs": args.programs, "inputs": args.inputs, "repeat": args.repeat,
                                           "random_programs": args.random_programs, "workers": workers,
                                           "seed": args.seed},
               "sections": [], "correct": False}

    t0 = time.perf_counter()
    tasks = make_corpus(args.programs, args.inputs, args.seed)
    log(f"corpus: {len(tasks)} programs from {len(TEMPLATES)} templates "
        f"({sum(t.buggy for t in tasks)} with a bug), {args.inputs} inputs each "
        f"[{time.perf_counter() - t0:.1f}s to build]")
    cpy, vg = verify(tasks, "corpus")
    check_same(tasks, vg, cpy, "corpus")
    log(f"correctness: corpus, {len(vg)} runs identical on both sides")

    rtasks, note = (None, "skipped (--random-programs 0)") if args.random_programs <= 0 else \
        make_random(args.random_programs, args.inputs, args.seed + 1)
    if rtasks:
        n_gen = len(rtasks)
        cpy_r, ok = verify(rtasks, "random", RANDOM_CODE_CAP)
        if cpy_r is None:
            rtasks = [rtasks[i] for i in ok]
            cpy_r, vg_r = verify(rtasks, "random", RANDOM_CODE_CAP)
        else:
            vg_r = ok
        too_long = n_gen - len(rtasks)
        m = args.inputs
        keep = [i for i in range(len(rtasks)) if cpy_r[i * m:(i + 1) * m] == vg_r[i * m:(i + 1) * m] and
                all(type(a) is type(b) for a, b in zip(cpy_r[i * m:(i + 1) * m], vg_r[i * m:(i + 1) * m]))]
        dropped = len(rtasks) - len(keep)
        rtasks = [rtasks[i] for i in keep]
        note = (f"{len(rtasks)} of {n_gen} generated programs kept ({too_long} longer than {RANDOM_CODE_CAP} "
                f"words; {dropped} hit a VM-only trap such as int32 overflow, where plain CPython computes a "
                f"value); on the kept ones both sides agree on every run (compile_batch code_cap={RANDOM_CODE_CAP})")
        log(f"correctness: random, {note}")
        if not rtasks:
            rtasks = None
    results["random_note"] = note
    results["correct"] = True

    # per core
    log("timing per core ...")
    rows, (pc, pv) = bench_workload(tasks, args.repeat, "corpus", True)
    if pc != pv:
        raise SystemExit(f"bench: end-to-end pass counts differ: CPython {pc}, vramgym {pv}")
    results["pass_counts"] = {"cpython": pc, "vramgym": pv}
    results["distinct_programs"] = distinct_programs(tasks)
    urow = unshared_row(tasks, args.repeat)
    if urow:
        rows.insert(2, urow)
    if rtasks:
        rrows, _ = bench_workload(rtasks, args.repeat, "random", False, RANDOM_CODE_CAP)
        rows += rrows
    results["sections"].append({"title": "Per core (vramgym nthreads=1, CPython one process)", "rows": rows})
    for r in rows:
        log(f"  {r['metric']:<55} CPython {_fmt_rate(r['cpython_per_s']):>9}/s  vramgym "
            f"{_fmt_rate(r['vramgym_per_s']):>9}/s  ratio {r['ratio']:.1f}x")

    log("timing per template ...")
    results["per_template"] = per_template(tasks, args.repeat)

    # breakdown of vramgym's end-to-end path, per core
    sources = [t.source for t in tasks]
    bd = {}
    bd["compile_batch"], cb = best_of(lambda: compile_batch(sources, nthreads=1), args.repeat)
    ret = np.array([KIND_CODE[t.ret] for t in tasks], dtype=np.int32)
    bd["to_programs"], progs = best_of(lambda: cb.to_programs(0, ret), args.repeat)
    bd["encode inputs + expected"], enc = best_of(lambda: vg_encode(tasks, True), args.repeat)
    inputs, expected, runs = enc
    bd["run_batch(expected, out_cap=0)"], res = best_of(
        lambda: run_batch(progs, inputs, runs, expected=expected, out_cap=0, nthreads=1), args.repeat)
    bd["run_batch(out_cap=64)"], _ = best_of(lambda: run_batch(progs, inputs, runs, out_cap=64, nthreads=1), args.repeat)
    bd["run_batch(default out_cap=256)"], _ = best_of(lambda: run_batch(progs, inputs, runs, nthreads=1), args.repeat)
    results["breakdown"] = bd
    total_steps = int(res.steps.astype(np.int64).sum())
    results["vm_profile"] = {"instructions": total_steps, "runs": len(res.steps),
                             "instructions_per_run": total_steps / len(res.steps),
                             "ns_per_instruction": bd["run_batch(expected, out_cap=0)"] / total_steps * 1e9,
                             "encode_us_per_run": bd["encode inputs + expected"] / len(res.steps) * 1e6}

    # all cores
    if not args.no_multicore:
        log(f"timing on {workers} cores ...")
        mrows = multicore(tasks, args.repeat, workers)
        results["sections"].append({"title": f"All cores ({workers}: vramgym nthreads={workers}, "
                                             f"CPython multiprocessing.Pool({workers}))", "rows": mrows})
        for r in mrows:
            log(f"  {r['metric']:<55} CPython {_fmt_rate(r['cpython_per_s']):>9}/s  vramgym "
                f"{_fmt_rate(r['vramgym_per_s']):>9}/s  ratio {r['ratio']:.1f}x")

    (out / "bench_cpu.json").write_text(json.dumps(results, indent=2))
    md = markdown(results)
    (out / "bench_cpu.md").write_text(md)
    log("")
    log(md)
    log(f"wrote {out / 'bench_cpu.json'} and {out / 'bench_cpu.md'}")
    return results


def multicore(tasks, repeat, workers):
    m = len(tasks[0].inputs)
    n = len(tasks)
    _W.clear()
    _W.update(sources=[t.source for t in tasks], entries=[t.entry for t in tasks], inputs=[t.inputs for t in tasks],
              expected=[t.expected for t in tasks])
    _W["codes"] = [compile(s, "<bench>", "exec") for s in _W["sources"]]
    nchunks = workers * 4
    bounds = np.linspace(0, n, nchunks + 1).astype(int)
    chunks = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    sources = _W["sources"]
    _, progs = vg_programs(tasks, workers)
    inputs, _, runs = vg_encode(tasks, False)
    out_cap = 64 if any(t.ret == "list" for t in tasks) else 0
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    rows = []
    with ctx.Pool(workers) as pool:
        pool.map(_w_compile, chunks[:workers])  # warm up
        tc, tv, _, _ = best_pair(lambda: pool.map(_w_compile, chunks),
                                 lambda: compile_batch(sources, nthreads=workers), repeat)
        rows.append(row("compile (corpus)", "programs", tc, tv, n))
        tc, tv, _, _ = best_pair(lambda: pool.map(_w_execute, chunks),
                                 lambda: run_batch(progs, inputs, runs, out_cap=out_cap, nthreads=workers), repeat)
        rows.append(row(f"execute (corpus, {m} inputs/program)", "runs", tc, tv, n * m))
        tc, tv, _, _ = best_pair(lambda: pool.map(_w_end_to_end, chunks),
                                 lambda: vg_end_to_end(tasks, workers), repeat)
        rows.append(row("end to end (corpus: compile + run + compare)", "programs", tc, tv, n))
    _W.clear()
    return rows


if __name__ == "__main__":
    main()
