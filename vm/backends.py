"""Backends behind one interface, imported lazily: only the CUDA backend imports cupy."""
from __future__ import annotations

import importlib

BACKENDS = ("cpu", "cuda")


class BackendUnavailable(RuntimeError):
    """The requested backend cannot run here (e.g. no GPU)."""


def cuda_available() -> bool:
    try:
        mod = importlib.import_module("vramgym.vm.cuda")
    except ImportError:
        return False
    return mod.available()


def get_backend(name: str):
    """The backend module for "cpu", "cuda" or "auto" (cuda where a GPU is usable, else cpu)."""
    if name == "auto":
        name = "cuda" if cuda_available() else "cpu"
    if name == "cpu":
        from . import cpu_backend
        return cpu_backend
    if name == "cuda":
        try:
            mod = importlib.import_module("vramgym.vm.cuda")
        except ImportError as e:
            raise BackendUnavailable(f"backend 'cuda' is unavailable: {e}") from e
        if not mod.available():
            raise BackendUnavailable("backend 'cuda' is unavailable: no usable CUDA GPU (cupy.cuda.is_available() is false)")
        return mod
    raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)} or 'auto'")
