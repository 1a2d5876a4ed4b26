"""The `vramgym` command: compile, run and the default job."""
import subprocess
import sys

import pytest


def vramgym(*args):
    return subprocess.run([sys.executable, "-m", "vramgym.agents.cli", *args], capture_output=True, text=True)


@pytest.fixture
def prog(tmp_path):
    p = tmp_path / "p.py"
    p.write_text("def f(x: int, xs: list[int]) -> int:\n    return xs[x] // x\n")
    return str(p)


def test_default_job_runs_the_demo():
    r = vramgym()
    assert r.returncode == 0
    assert "primes_below(30)" in r.stdout and "[2, 3, 5, 7, 11, 13, 17, 19, 23, 29]" in r.stdout


def test_compile_prints_disassembly(prog):
    r = vramgym("compile", prog)
    assert r.returncode == 0 and "FUNC" in r.stdout and "BINARY_DIV" in r.stdout


def test_compile_error_has_position(tmp_path):
    p = tmp_path / "bad.py"
    p.write_text("def f(x: int) -> int:\n    return y\n")
    r = vramgym("compile", str(p))
    assert r.returncode == 1
    assert r.stderr.strip() == f"{p}:2:12: error: undefined name 'y'"


def test_run_prints_value_and_traps(prog):
    r = vramgym("run", prog, "f", "1", "[3, 8]")
    assert r.returncode == 0 and r.stdout.strip() == "8"
    r = vramgym("run", prog, "f", "0", "[3, 8]")
    assert r.returncode == 2 and "zero_division" in r.stderr
    r = vramgym("run", prog, "f", "1", "[3, 8]", "--steps")
    assert r.stdout.strip() == "8  (6 steps)"


def test_run_rejects_bad_arguments(prog):
    r = vramgym("run", prog, "f", "1", "2")
    assert r.returncode == 1 and "expected list" in r.stderr
    r = vramgym("run", prog, "g")
    assert r.returncode == 1 and "no function 'g'" in r.stderr
