"""The `vramgym` command.

    vramgym                      run the main job on its embedded default (now: the demo)
    vramgym demo                 compile an example program, run it on example inputs
    vramgym compile FILE         print the disassembly, or FILE:LINE:COL: error: MESSAGE (exit 1)
    vramgym run FILE ENTRY ARG…  print the result, or the trap (exit 2); ARGs are Python literals

Bad input (a missing or unreadable FILE, an unusable --backend, a bad ARG) prints one line,
`vramgym: ...` or `vramgym run: ...`, on stderr and exits 1. argparse's own usage errors exit 2.
"""
from __future__ import annotations

import argparse
import ast
import os
import sys


class _Fail(Exception):
    """A one-line error for the user: main prints it on stderr and returns 1."""

DEMO = '''\
def gcd(a: int, b: int) -> int:
    while b != 0:
        a, b = b, a % b
    return a

def is_prime(n: int) -> bool:
    if n < 2:
        return False
    d = 2
    while d * d <= n:
        if n % d == 0:
            return False
        d += 1
    return True

def primes_below(n: int) -> list[int]:
    out: list[int] = []
    for k in range(n):
        if is_prime(k):
            out.append(k)
    return out
'''


def _config_args(p: argparse.ArgumentParser) -> None:
    from vramgym.vm import opcodes as oc
    p.add_argument("--backend", default="cpu", help="cpu, cuda or auto (default: cpu)")
    p.add_argument("--fuel", type=int, default=oc.DEFAULT_FUEL, help="step budget per run")
    p.add_argument("--max-depth", type=int, default=oc.DEFAULT_MAX_DEPTH, help="call depth limit")
    p.add_argument("--heap-size", type=int, default=oc.DEFAULT_HEAP, help="ints of list memory per run")
    p.add_argument("--steps", action="store_true", help="also print the executed steps")


def _read(path: str) -> str:
    from vramgym.vm import opcodes as oc
    try:
        with open(path, "rb") as f:  # past the compiler's limit, the rest changes nothing (/dev/zero)
            data = f.read(oc.LIMITS["MAX_SOURCE"] + 1)
    except OSError as e:  # missing, a directory, unreadable, ...
        raise _Fail(f"vramgym: {path}: {e.strerror or e}") from None
    return data.decode("utf-8", errors="surrogateescape")


def _compile(path: str):
    from vramgym.compiler import CompileError, compile_source
    try:
        return compile_source(_read(path))
    except CompileError as e:
        print(f"{path}:{e.line}:{e.col}: error: {e.message}", file=sys.stderr)
        return None


def cmd_compile(a) -> int:
    prog = _compile(a.file)
    if prog is None:
        return 1
    print(prog.disassemble())
    return 0


def _parse_arg(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # TypeError: {[1]: 2}
        raise _Fail(f"vramgym run: cannot read argument {text!r} (use Python literals: 3, True, [1, 2])") from None


def _check_backend(name: str) -> None:
    """Fail early, in one line, on an unknown backend name or one that cannot run here (cuda
    without a GPU)."""
    from vramgym.vm import BackendUnavailable, get_backend
    try:
        get_backend(name)
    except (ValueError, BackendUnavailable) as e:
        raise _Fail(f"vramgym: {e}") from None


def cmd_run(a) -> int:
    from vramgym.vm import BackendUnavailable, Trap, execute
    prog = _compile(a.file)
    if prog is None:
        return 1
    args = tuple(_parse_arg(x) for x in a.args)
    try:
        (result, steps), = execute(prog, a.entry, [args], backend=a.backend, fuel=a.fuel, max_depth=a.max_depth,
                                   heap_size=a.heap_size, steps=True)
    except (KeyError, TypeError, ValueError, OverflowError, MemoryError, BackendUnavailable) as e:
        print(f"vramgym run: {e.args[0] if e.args else type(e).__name__}", file=sys.stderr)
        return 1
    suffix = f"  ({steps} steps)" if a.steps else ""
    if isinstance(result, Trap):
        print(f"trap: {result.kind}{suffix}", file=sys.stderr)
        return 2
    print(f"{result!r}{suffix}")
    return 0


def cmd_demo(a) -> int:
    from vramgym.compiler import compile_source
    from vramgym.vm import execute
    prog = compile_source(DEMO)
    print("# program\n" + DEMO)
    print("# bytecode of is_prime\n")
    print(prog.disassemble("is_prime"))
    print("\n# runs")
    for entry, args in (("gcd", [(12, 18), (1071, 462), (7, 0)]), ("is_prime", [(97,), (91,), (2,)]),
                        ("primes_below", [(30,)])):
        for arg, (res, steps) in zip(args, execute(prog, entry, args, backend=a.backend, steps=True)):
            call = f"{entry}({', '.join(map(repr, arg))})"
            print(f"{call:<22} -> {res!r:<40} {steps:>6} steps")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            rc = _main(argv)
        except _Fail as e:
            print(e, file=sys.stderr)
            rc = 1
        sys.stdout.flush()  # here, so that a closed pipe shows up inside the try
        return rc
    except BrokenPipeError:
        # `vramgym ... | head`: the reader went away. Send what is left to devnull (so the flush
        # at exit does not fail again) and stop quietly, as the Python docs advise.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="vramgym", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd")
    p = sub.add_parser("demo", help="compile and run an example program")
    p.add_argument("--backend", default="cpu", help="cpu, cuda or auto (default: cpu)")
    p = sub.add_parser("compile", help="print a program's disassembly")
    p.add_argument("file")
    p = sub.add_parser("run", help="run one function of a program")
    p.add_argument("file")
    p.add_argument("entry")
    p.add_argument("args", nargs="*")
    _config_args(p)
    a = parser.parse_args(argv)
    if a.cmd is None:
        a = parser.parse_args(["demo"])
    if a.cmd in ("demo", "run"):
        _check_backend(a.backend)
    return {"demo": cmd_demo, "compile": cmd_compile, "run": cmd_run}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
