"""The golden corpus (tests/corpus/**/*.py) against CPython, the compiler and every VM backend."""
from __future__ import annotations

import functools
import re

import pytest

from corpus_runner import (Case, CorpusError, TrapExpect, cpython_checkable,
                           cpython_result, load_cases, parse_case, same_value)

CASES = load_cases()
RUNS = [c for c in CASES if not c.error]
ERRORS = [c for c in CASES if c.error]
BACKENDS = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
_UNAVAILABLE = re.compile(r"unavailable|not available", re.IGNORECASE)


def ids(cases: list[Case]) -> list[str]:
    return [c.id for c in cases]


def test_corpus_is_complete():
    from corpus_runner import TRAP_NAMES
    assert len(CASES) >= 80
    assert len(ERRORS) >= 25
    trapped = {call.expect.kind for c in RUNS for call in c.calls
               if isinstance(call.expect, TrapExpect)}
    missing = set(TRAP_NAMES) - {"bad_bytecode", "bad_input"} - trapped
    assert not missing, f"no corpus call expects the traps {sorted(missing)}"


@pytest.mark.parametrize("line", [
    "# call: f(1 -> 2", "# call: f(1)", "# call: f(1) -> 'a'", "# call: f(1) -> trap nope",
    "# call: f(x=1) -> 2", "# call: f(1.5) -> 2", "# error: 3 undefined", "# config: fuel=x",
    "# config: speed=3",
])
def test_malformed_expectation_is_rejected(tmp_path, line):
    path = tmp_path / "bad.py"
    path.write_text(f"def f(x: int) -> int:\n    return x\n{line}\n")
    with pytest.raises(CorpusError, match=r"bad\.py:3"):
        parse_case(path)


# --- CPython, the oracle -------------------------------------------------------------------

@pytest.mark.parametrize("case", RUNS, ids=ids(RUNS))
def test_cpython_agrees(case: Case):
    compile(case.source, str(case.path), "exec")  # a valid program is valid Python
    wrong = []
    for call in filter(cpython_checkable, case.calls):
        got = cpython_result(case, call)
        if not (got == call.expect if isinstance(got, TrapExpect) else same_value(got, call.expect)):
            wrong.append(f"{call}: CPython gives {got!r}")
    assert not wrong, "\n".join(wrong)


# --- the compiler and the VM ----------------------------------------------------------------

def _vramgym():
    import vramgym.compiler as compiler  # a missing build must fail these tests, not skip them
    import vramgym.vm as vm
    return compiler, vm


@functools.lru_cache(maxsize=None)
def _compiled(path):
    compiler, _ = _vramgym()
    return compiler.compile_source(parse_case(path).source)


def _skip_unless_available(backend: str) -> None:
    if backend != "cuda":
        return
    try:
        import cupy
    except ImportError:
        pytest.skip("cuda backend: cupy is not installed")
    try:
        ok = cupy.cuda.is_available()
    except Exception as e:  # a driver without a device raises rather than answering
        ok = False
        print(f"cupy.cuda.is_available() raised {e!r}")
    if not ok:
        pytest.skip("cuda backend: cupy.cuda.is_available() is false")


@pytest.mark.parametrize("case", ERRORS, ids=ids(ERRORS))
def test_compile_error(case: Case):
    compiler, _ = _vramgym()
    want = case.error
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile_source(case.source)
    err = info.value
    got = f"{err.line}:{err.col} {err.message} ({err.kind})"
    assert (err.line, err.col) == (want.line, want.col) and want.text in err.message, (
        f"expected {want.line}:{want.col} ...{want.text}..., compiler gives {got}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", RUNS, ids=ids(RUNS))
def test_vm(case: Case, backend: str):
    _, vm = _vramgym()
    _skip_unless_available(backend)
    prog = _compiled(case.path)
    wrong = []
    for call in case.calls:
        try:
            [got] = vm.execute(prog, call.entry, [call.args], backend=backend, **case.config)
        except Exception as e:
            if _UNAVAILABLE.search(str(e)):
                pytest.skip(f"{backend} backend: {e}")
            raise
        if isinstance(call.expect, TrapExpect):
            ok = isinstance(got, vm.Trap) and got.kind == call.expect.kind
        else:
            ok = same_value(got, call.expect)
        if not ok:
            wrong.append(f"{call}: {backend} gives {got!r}")
    assert not wrong, "\n".join(wrong)
