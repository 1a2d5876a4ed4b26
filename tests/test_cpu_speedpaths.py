"""The lockstep interpreter is compiled twice (vm/csrc/lanes.h): for x86-64-v3 (AVX2), taken where
the CPU has it, and for the baseline x86-64 that every CPU runs. vg_lane_isa(0) forces the
baseline, so both builds are checked against the plain scalar interpreter (mode 3, the one CUDA
runs too) on any machine: same status, value, steps and list contents, on the golden corpus and on
fresh random programs, with and without superinstructions."""
import ctypes
import os
from collections import defaultdict

import numpy as np
import pytest
from corpus_runner import load_cases
from test_fused import assert_same_runs, run_mode

from vramgym.compiler import compile_source
from vramgym.compiler.random_programs import generate_program, random_args
from vramgym.vm import ProgramBatch, VMConfig, cpu, encode_tuples

SEED = int(os.environ.get("VRAMGYM_SEED", np.random.SeedSequence().entropy % 2**32))
# lockstep where superinstructions pay, lockstep always with them, lockstep without them
LOCKSTEP_MODES = (0, 5, 2)
REFERENCE_MODE = 3


def _isa_fn():
    f = cpu.lib().vg_lane_isa
    f.argtypes, f.restype = [ctypes.c_int32], ctypes.c_int32
    return f


@pytest.fixture(params=[1, 0], ids=["auto-isa", "baseline-isa"])
def isa(request):
    f = _isa_fn()
    before = f(request.param)
    yield request.param
    f(before)


def _assert_builds_agree(batch, inputs, config, what, monkeypatch):
    ref = run_mode(batch, inputs, config, REFERENCE_MODE, monkeypatch)
    for mode in LOCKSTEP_MODES:
        res = run_mode(batch, inputs, config, mode, monkeypatch)
        assert_same_runs(res, ref, f"{what} ({config}): mode {mode} and plain scalar", SEED)


def test_isa_setting_round_trips():
    f = _isa_fn()
    before = f(-1)
    assert before in (0, 1)
    assert f(0) == before and f(-1) == 0
    assert f(1) == 0 and f(-1) == 1
    f(before)


def test_corpus(isa, monkeypatch):
    """Every corpus call, its inputs repeated to 40 runs (a full lockstep group and a partial one)."""
    n = 0
    for case in load_cases():
        if case.error is not None or not case.calls:
            continue
        prog = compile_source(case.source)
        by_entry = defaultdict(list)
        for call in case.calls:
            by_entry[call.entry].append(call.args)
        for entry, args in by_entry.items():
            args = [args[i % len(args)] for i in range(40)]
            inputs = encode_tuples(args, prog.function(entry).params)
            _assert_builds_agree(ProgramBatch.from_programs([prog], entry), inputs, VMConfig(**case.config),
                                 f"{case.path.name}:{entry}", monkeypatch)
            n += 1
    assert n > 100


@pytest.mark.parametrize("config", [VMConfig(), VMConfig(fuel=300, max_depth=6, heap_size=40, max_lists=6,
                                                         stack_size=64)], ids=["default", "tight"])
def test_random_programs(isa, config, monkeypatch):
    rng = np.random.default_rng(SEED)
    for _ in range(150):
        g = generate_program(rng)
        p = compile_source(g.source)
        inputs = encode_tuples(random_args(rng, g.params, 40), p.function(g.entry).params)
        _assert_builds_agree(ProgramBatch.from_programs([p], g.entry), inputs, config, g.source, monkeypatch)


def test_lane_helpers_are_inlined_into_both_builds_of_the_interpreter():
    """A helper of the lockstep interpreter that GCC leaves out of line runs the baseline build's
    code even inside the x86-64-v3 build, through a call: floor_divmod_const did (the interpreter
    outgrew GCC's inlining limits) and bench_cpu's corpus ran 1.7x slower. lanes.h forces them
    inline; the built core must hold no copy of them (a build property, not a timing)."""
    import shutil
    import subprocess
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is not installed")
    path = cpu.lib()._name
    out = subprocess.run([nm, "-C", path], capture_output=True, text=True)
    if out.returncode != 0 or "run_lanes" not in out.stdout:
        pytest.skip(f"the core at {path} has no symbol table to read (stripped?)")
    for helper in ("nonzero_mask", "floor_divmod", "floor_divmod_const", "index_lanes", "holds"):
        assert f"lanes_detail::{helper}(" not in out.stdout, f"{helper} was compiled out of line in {path}"
