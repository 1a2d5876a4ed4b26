"""The CPU implementation of the batch interface (see vramgym.vm.batch)."""
from __future__ import annotations

import numpy as np

from . import cpu
from .batch import BatchResult


# The core traps bad_input on runs whose inputs are not of the entry's parameter kinds
# (ProgramBatch.params) itself: vramgym.vm.batch.run_batch does that check for other backends.
CHECKS_KINDS = True


def run_batch(programs, inputs, run_prog, run_in, expected, config, out_cap, nthreads, lockstep=True):
    exp_words = expected.words if expected is not None else None
    exp_off = expected.offsets if expected is not None else None
    status, value, steps, passed, out_words, out_off = cpu.run_batch(
        programs.code, programs.offsets, programs.entry, programs.ret_kind, inputs.words, inputs.offsets,
        run_prog, run_in, exp_words, exp_off, config.as_array(), out_cap,
        cpu.default_threads() if nthreads is None else nthreads, lockstep, programs.params)
    return BatchResult(status, value, steps, passed.astype(bool) if passed is not None else None, out_words, out_off,
                       out_cap)


def available() -> bool:
    try:
        cpu.lib()
        return True
    except ImportError:
        return False
