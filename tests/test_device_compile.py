"""CI has nvcc but no GPU: compile the shared compiler/VM headers as CUDA device code so that a
construct the GPU cannot take fails here. Skips where nvcc is absent."""
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_core_compiles_as_device_code(tmp_path):
    # To PTX without NVVM optimisation: every front-end and device-code error still fails, in
    # seconds instead of the minute a full optimised build of the compiler takes.
    r = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", f"-I{ROOT / 'vm' / 'csrc'}", f"-I{ROOT / 'compiler' / 'csrc'}",
                        "-ptx", "-Xcicc", "-O0", str(ROOT / "tests" / "native" / "device_compile_check.cu"),
                        "-o", str(tmp_path / "k.ptx")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
