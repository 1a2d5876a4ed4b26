"""The `vramgym` command: compile, run and the default job; bad input gives one line on stderr
and exit 1 (never a traceback), argparse's usage errors exit 2."""
import os
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


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_endless_or_huge_file_is_read_only_up_to_the_limit(tmp_path):
    """Found by an audit: the whole FILE was read before the compiler's 1 MiB limit applied
    (`vramgym compile /dev/zero` never ended; a 300 MB file took 4 s and 645 MB)."""
    r = subprocess.run([sys.executable, "-m", "vramgym.agents.cli", "compile", "/dev/zero"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1 and r.stderr.startswith("/dev/zero:1:1: error: program too long")
    big = tmp_path / "big.py"
    with open(big, "wb") as f:
        f.truncate(64 << 20)  # sparse: 64 MiB of NUL bytes
    r = vramgym("compile", str(big))
    assert r.returncode == 1 and "program too long" in r.stderr


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


def one_line_error(r, text, rc=1):
    """r failed with exactly one stderr line, `text`, and no traceback."""
    assert r.returncode == rc, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "Error:" not in r.stderr, r.stderr
    assert r.stderr == text + "\n" and r.stdout == ""


@pytest.mark.parametrize("cmd", [["compile"], ["run"]])
def test_missing_file(tmp_path, cmd):
    path = str(tmp_path / "nosuch.py")
    r = vramgym(*cmd, path, *(["f", "1"] if cmd == ["run"] else []))
    one_line_error(r, f"vramgym: {path}: No such file or directory")


@pytest.mark.parametrize("cmd", [["compile"], ["run"]])
def test_directory_instead_of_file(tmp_path, cmd):
    r = vramgym(*cmd, str(tmp_path), *(["f", "1"] if cmd == ["run"] else []))
    one_line_error(r, f"vramgym: {tmp_path}: Is a directory")


def test_path_through_a_file(prog):
    r = vramgym("compile", prog + "/x.py")
    one_line_error(r, f"vramgym: {prog}/x.py: Not a directory")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads files of mode 000")
def test_unreadable_file(prog):
    os.chmod(prog, 0)
    r = vramgym("compile", prog)
    one_line_error(r, f"vramgym: {prog}: Permission denied")


def test_permission_denied_in_process(prog, monkeypatch, capsys):
    """The same for any OSError from open (here PermissionError, which root never gets)."""
    import builtins

    import vramgym.compiler  # noqa: F401  (imported before open is patched)
    from vramgym.agents import cli
    real_open = builtins.open

    def deny(path, *a, **k):
        if path == prog:
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, *a, **k)
    monkeypatch.setattr(builtins, "open", deny)
    assert cli.main(["compile", prog]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == f"vramgym: {prog}: Permission denied\n"


@pytest.mark.parametrize("cmd", [["demo"], ["run", "PROG", "f", "1", "[3, 8]"]])
def test_unknown_backend(prog, cmd):
    r = vramgym(*[prog if c == "PROG" else c for c in cmd], "--backend", "bogus")
    one_line_error(r, "vramgym: unknown backend 'bogus'; choose one of cpu, cuda or 'auto'")


@pytest.mark.parametrize("cmd", [["demo"], ["run", "PROG", "f", "1", "[3, 8]"]])
def test_cuda_backend_without_a_gpu(prog, cmd):
    from vramgym.vm.backends import cuda_available
    r = vramgym(*[prog if c == "PROG" else c for c in cmd], "--backend", "cuda")
    if cuda_available():
        assert r.returncode == 0, r.stderr
    else:
        assert r.returncode == 1 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
        assert r.stderr.startswith("vramgym: backend 'cuda' is unavailable") and "Traceback" not in r.stderr


def test_unreadable_argument_literal(prog):
    r = vramgym("run", prog, "f", "1", "{[1]: 2}")  # literal_eval raises TypeError (unhashable)
    one_line_error(r, "vramgym run: cannot read argument '{[1]: 2}' (use Python literals: 3, True, [1, 2])")
    r = vramgym("run", prog, "f", "1", "[3,")
    one_line_error(r, "vramgym run: cannot read argument '[3,' (use Python literals: 3, True, [1, 2])")


@pytest.mark.parametrize("args", [[], ["compile", "PROG"]])
def test_closed_stdout_is_quiet(prog, args):
    """`vramgym | head`: the reader is gone before we write; no BrokenPipeError traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "vramgym.agents.cli", *[prog if a == "PROG" else a for a in args]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 1
    assert err == "", err


def test_usage_errors_exit_2_like_traps(prog):
    """README documents exit 2 for a trap; argparse's usage errors also exit 2 (told apart by
    stderr: 'usage:' versus 'trap: KIND')."""
    r = vramgym("run", prog)
    assert r.returncode == 2 and r.stderr.startswith("usage: vramgym run") and "Traceback" not in r.stderr
    r = vramgym("run", prog, "f", "1", "[3]", "--fuel", "x")
    assert r.returncode == 2 and "invalid int value: 'x'" in r.stderr
    r = vramgym("run", prog, "f", "0", "[3]")
    assert r.returncode == 2 and r.stderr == "trap: zero_division\n"


def test_run_honours_the_vm_limits(tmp_path):
    """--max-depth and --heap-size reach the VM (session 30's mutation audit: dropping either
    passed), and an argument nested too deep to read is one line, not a traceback."""
    rec = tmp_path / "r.py"
    rec.write_text("def f(n: int) -> int:\n    if n == 0:\n        return 0\n    return 1 + f(n - 1)\n")
    assert vramgym("run", str(rec), "f", "50").stdout.strip() == "50"
    r = vramgym("run", "--max-depth", "5", str(rec), "f", "50")
    assert r.returncode == 2 and "recursion" in r.stderr
    lst = tmp_path / "l.py"
    lst.write_text("def g(n: int) -> int:\n    xs: list[int] = []\n    for i in range(n):\n        xs.append(i)\n"
                   "    return len(xs)\n")
    assert vramgym("run", str(lst), "g", "100").stdout.strip() == "100"
    r = vramgym("run", "--heap-size", "10", str(lst), "g", "100")
    assert r.returncode == 2 and "out_of_memory" in r.stderr
    arg = "-" * 5000 + "1"
    r = vramgym("run", str(rec), "f", "--", arg)
    one_line_error(r, f"vramgym run: cannot read argument {arg!r} (use Python literals: 3, True, [1, 2])")
