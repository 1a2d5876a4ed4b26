"""Builds the C++ core (compiler + VM), the value encoder and the mask automaton for the CPU
during `pip install`.

The core is a plain shared library loaded with ctypes (vramgym/vm/cpu.py); the same headers are
compiled for the GPU at run time by NVRTC. The value encoder and decoder are regular CPython extension modules.
"""
from pathlib import Path

from setuptools import Extension, setup

core = Extension(
    "vramgym.vm._core",
    sources=["vm/csrc/cpu_backend.cpp"],
    include_dirs=["vm/csrc", "compiler/csrc"],
    # headers: build_ext --inplace rebuilds only when a source or one of these changes
    depends=sorted(str(p) for d in ("vm/csrc", "compiler/csrc") for p in Path(d).glob("*.h")),
    # hidden visibility: only the VG_EXPORT C ABI is exported, so the core inlines freely
    extra_compile_args=["-std=c++17", "-O3", "-pthread", "-fvisibility=hidden", "-fvisibility-inlines-hidden"],
    extra_link_args=["-pthread"],
    language="c++",
)

# the common case of encode_tuples (vm/values.py) in C: a regular CPython extension module.
encode = Extension(
    "vramgym.vm._encode",
    sources=["vm/csrc/encode_py.cpp"],
    extra_compile_args=["-std=c++17", "-O2"],
    language="c++",
)

# execute()'s results as Python values (vm/execute.py): one pass in C instead of numpy masks and slices.
decode = Extension(
    "vramgym.vm._decode",
    sources=["vm/csrc/decode_py.cpp"],
    extra_compile_args=["-std=c++17", "-O2"],
    language="c++",
)

# the data address of an array for the ctypes calls (vm/cpu.py's ptr): ndarray.ctypes.data costs ~2 us.
address = Extension(
    "vramgym.vm._address",
    sources=["vm/csrc/address_py.cpp"],
    extra_compile_args=["-std=c++17", "-O2"],
    language="c++",
)

# the batched mask automaton of the Synthesis envs (envs/csrc/grammar.h; ctypes in envs/grammar_native.py).
# The library carries the hash of its sources (grammar_native.source_hash(), the same recipe), which
# loading compares with the installed sources, so a library older than grammar.h is refused.
GRAMMAR_SOURCES = ("grammar.h", "grammar_consts.h", "token_slots.h", "grammar_cpu.cpp")


def grammar_source_hash() -> str:
    import hashlib
    h = hashlib.sha256()
    for name in GRAMMAR_SOURCES:
        h.update(name.encode() + b"\0" + (Path("envs/csrc") / name).read_bytes() + b"\0")
    return h.hexdigest()


grammar = Extension(
    "vramgym.envs._grammar",
    sources=["envs/csrc/grammar_cpu.cpp"],
    include_dirs=["envs/csrc"],
    depends=["envs/csrc/grammar.h", "envs/csrc/grammar_consts.h", "envs/csrc/token_slots.h"],
    extra_compile_args=["-std=c++17", "-O3", "-pthread", "-fvisibility=hidden", "-fvisibility-inlines-hidden",
                        f'-DGM_SOURCE_HASH="{grammar_source_hash()}"'],
    extra_link_args=["-pthread"],
    language="c++",
)

setup(ext_modules=[core, encode, decode, address, grammar])
