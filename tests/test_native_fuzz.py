"""The native fuzz harness (tests/native/fuzz_core.cpp) under AddressSanitizer and UBSan.

The Python fuzzers see a crash only when it happens to hit unmapped memory; this build turns
every out-of-bounds access, use of a dangling pointer and undefined behaviour (signed overflow,
bad shifts, out-of-range array indices) in compiler.h and vm.h into a report and a failed test.
The binary is cached by a hash of its inputs, so only a changed header pays the ~30 s build.

VRAMGYM_SEED replays a run; VRAMGYM_NATIVE_FUZZ_SECONDS (default 25) bounds it.
"""
from __future__ import annotations

import os
import re
import secrets
import subprocess
from pathlib import Path


import pytest

import native_build

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "tests" / "native" / "fuzz_core.cpp"
INCLUDES = [ROOT / "vm" / "csrc", ROOT / "compiler" / "csrc"]
FLAGS = ["-std=c++17", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
# Leak checking needs ptrace-free /proc access that containers often lack, and the core never
# allocates; halt on the first report of anything else.
ENV = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:abort_on_error=0",
       "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
SANITIZER_REPORT = re.compile(r"ERROR: AddressSanitizer|runtime error:|ERROR: UndefinedBehaviorSanitizer")


def _sanitizers_work(cxx: str, tmp: Path) -> str | None:
    """None if a sanitized hello-world builds and runs, else why not."""
    src = tmp / "probe.cpp"
    src.write_text("#include <vector>\nint main() { std::vector<int> v(3); return v[1]; }\n")
    build = subprocess.run([cxx, *FLAGS, str(src), "-o", str(tmp / "probe")], capture_output=True, text=True)
    if build.returncode:
        return f"the sanitizer runtime is unavailable ({build.stderr.strip().splitlines()[-1:]})"
    run = subprocess.run([str(tmp / "probe")], capture_output=True, text=True, env=ENV)
    if run.returncode:
        return f"sanitized binaries do not run here ({run.stderr.strip()[:200]})"
    return None


def pytest_sanitized(test_file: str, pick: str, seed: int, tmp_path: Path) -> None:
    """Run `pytest test_file -k pick` in a child process with VRAMGYM_EMU_SANITIZE=1 and the
    ASan/UBSan runtimes preloaded into Python (the kernel emulators are then built sanitized);
    fails on any sanitizer report or failed test, skips where sanitizers do not work here."""
    import sys
    cxx = native_build.compiler()
    reason = _sanitizers_work(cxx, tmp_path)
    if reason:
        pytest.skip(reason)
    runtimes = []
    for lib in ("libasan.so", "libubsan.so"):
        path = subprocess.run([cxx, f"-print-file-name={lib}"], capture_output=True, text=True).stdout.strip()
        if not os.path.isabs(path):
            pytest.skip(f"{cxx} does not locate {lib} for preloading")
        runtimes.append(path)
    env = {**ENV, "LD_PRELOAD": " ".join(runtimes), "VRAMGYM_EMU_SANITIZE": "1", "VRAMGYM_SEED": str(seed)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-s", "-p", "no:cacheprovider", test_file,
                        "-k", pick], capture_output=True, text=True, env=env, cwd=ROOT, timeout=1500)
    out = r.stdout + r.stderr
    assert not SANITIZER_REPORT.search(out), f"sanitizer report (VRAMGYM_SEED={seed}):\n{out[-6000:]}"
    assert r.returncode == 0 and " passed" in out, out[-6000:]


def _binary() -> Path:
    """Build (or reuse) the harness; the key covers the harness, every header, the flags and the
    compiler's version. Skips where sanitized binaries cannot be built or run."""
    return native_build.build("vramgym-native-fuzz", "fuzz_core", HARNESS, FLAGS, INCLUDES,
                              sorted(f for d in INCLUDES for f in d.glob("*.h")), with_version=True,
                              probe=_sanitizers_work)


def test_native_fuzz_under_sanitizers():
    binary = _binary()
    seed = int(os.environ.get("VRAMGYM_SEED") or secrets.randbits(32))
    seconds = float(os.environ.get("VRAMGYM_NATIVE_FUZZ_SECONDS") or 25)
    cmd = [str(binary), "1000000", str(seed), str(seconds)]
    run = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=seconds + 120)
    replay = f"replay: VRAMGYM_SEED={seed} pytest {Path(__file__).name} (or {' '.join(cmd)})"
    assert not SANITIZER_REPORT.search(run.stderr), f"sanitizer report; {replay}\n{run.stderr[-6000:]}"
    assert run.returncode == 0, f"exit code {run.returncode}; {replay}\n{run.stderr[-6000:]}"
    stats = dict(re.findall(r"(\w+)=([\d,]+)", run.stdout))
    print(run.stdout.strip())
    # Guard against a harness that silently stopped exercising anything.
    assert int(stats["compiled"]) > 0 and int(stats["runs"]) > 100 and int(stats["rejected"]) > 0, run.stdout
