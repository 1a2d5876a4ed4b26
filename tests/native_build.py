"""Native helpers of the tests (the CUDA kernel emulators, host builds of the VM's switch
interpreter, sanitizer harnesses), built with g++ once per content: cached in the temp dir under
a key of the compiler, its flags and the bytes of every input, and written atomically, so that
concurrent test runs share a build and a changed header means a new one."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest


def compiler() -> str:
    """The C++ compiler ($CXX or g++); skips the calling test where there is none."""
    cxx = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("g++")
    if not cxx:
        pytest.skip("g++ is not installed")
    return cxx


def build(cache: str, output: str, source: Path | str, flags, include_dirs=(), inputs=(), *,
          with_version: bool = False, probe=None) -> Path:
    """The path of `output` built from `source` (a file, or the text of one) with `flags` and
    `include_dirs`, cached in <temp>/<cache>/<key>/. `inputs`: more files whose bytes go into
    the key (the headers the source includes). with_version: the compiler's version goes into the
    key too. probe(cxx, folder) -> a reason to skip, or None: run before a build (e.g. whether a
    sanitizer runtime exists). A source that needs C++20's <barrier> skips where it is missing."""
    cxx = compiler()
    flags = list(flags)
    h = hashlib.sha256(" ".join([cxx, *flags]).encode())
    if with_version:
        h.update(subprocess.run([cxx, "--version"], capture_output=True).stdout)
    text = source if isinstance(source, str) else None
    for p in ([] if text is not None else [Path(source)]) + list(inputs):
        h.update(p.name.encode() + p.read_bytes())
    if text is not None:
        h.update(text.encode())
    out = Path(tempfile.gettempdir()) / cache / h.hexdigest()[:16] / output
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    if probe is not None:
        reason = probe(cxx, out.parent)
        if reason:
            pytest.skip(reason)
    src = Path(source) if text is None else out.with_suffix(f".{os.getpid()}.cpp")
    if text is not None:
        src.write_text(text)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    cmd = [cxx, *flags, *(f"-I{d}" for d in include_dirs), str(src), "-o", str(tmp)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode and "barrier" in r.stderr:
        pytest.skip("the C++ compiler lacks C++20 <barrier>")
    assert r.returncode == 0, f"building {output} failed:\n{' '.join(cmd)}\n{r.stderr[-4000:]}"
    os.replace(tmp, out)  # atomic: a concurrent run sees the whole file or none
    return out
