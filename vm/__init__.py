"""The vramgym bytecode VM: one C++ interpreter, run on the CPU (and on the GPU, issue 3).

    from vramgym.vm import execute, Trap
    execute(program, "f", [(1, 2), (3, 0)])   # -> [value, Trap('zero_division')]
"""
from __future__ import annotations

from . import opcodes
from .backends import BackendUnavailable, get_backend
from .batch import BatchResult, ProgramBatch, VMConfig, cross_runs, run_batch
from .execute import execute
from .program import Function, Program, disassemble
from .values import Encoded, Trap, encode_results, encode_tuples

__all__ = ["execute", "Trap", "Program", "Function", "disassemble", "VMConfig", "ProgramBatch", "BatchResult",
           "run_batch", "cross_runs", "Encoded", "encode_tuples", "encode_results", "get_backend",
           "BackendUnavailable", "opcodes"]
