"""TaskBank.compiler_token_slots as native code, one pass per row (envs/csrc/token_slots.h): the
C++ library on the CPU (envs/grammar_native.py's, threads over rows), one CUDA thread per row on
a GPU (envs/grammar_cuda.py's module, on torch's current stream, no host sync; nothing allocated
but the outputs, and copies of inputs that are not contiguous int64).

    slots, count = token_slots(bank, bodies, lengths, task_ids, active)   # torch tensors, one device

Only the `active` rows (None: all) are built: an inactive row gets count 0 and its slots are left
as the output buffer held them. For the rows it builds the result is compiler_token_slots' (the
oracle, and the CPU scorer's path where the library is not built; tests/test_token_slots.py
compares them), except that a task id outside [0, T) gives count 0 and zero slots where the
torch code fails on its indexing.

The torch code costs ~50 full-width launches per call on a GPU (every row, active or not); this
is one launch whose threads of inactive rows return at once.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=None)
def cuda_available() -> bool:
    """CuPy and a CUDA device are there to build the kernel (asked once per process)."""
    from . import grammar_cuda
    return grammar_cuda.available()


def token_slots(bank, bodies, lengths, task_ids, active=None, out=None):
    """((N, S, 4) int32 slots, (N,) int64 counts) of `bank`'s tasks, S = bank.slot_size(L), on the
    bodies' device. bodies (N, L), lengths (N,), task_ids (N,): int tensors; active (N,) bool or
    None. out: (slots, count) buffers of those shapes and dtypes to write into (else new ones)."""
    import torch
    dev = bodies.device
    n, L = bodies.shape
    bodies, lengths, task_ids = (x.to(torch.int64).contiguous() for x in (bodies, lengths, task_ids))
    if active is not None:
        active = active.to(torch.bool).contiguous()
    for name, x in (("lengths", lengths), ("task_ids", task_ids), ("active", active)):
        if x is not None and (x.shape != (n,) or x.device != dev):
            raise ValueError(f"{name} must have shape ({n},) on {dev}, got {tuple(x.shape)} on {x.device}")
    S = bank.slot_size(L)
    if out is None:
        out = (torch.empty((n, S, 4), dtype=torch.int32, device=dev), torch.empty(n, dtype=torch.int64, device=dev))
    slots, count = out
    if slots.shape != (n, S, 4) or slots.dtype != torch.int32 or count.shape != (n,) or count.dtype != torch.int64 \
            or not (slots.is_contiguous() and count.is_contiguous()) or slots.device != dev or count.device != dev:
        raise ValueError(f"out must be contiguous ((n, {S}, 4) int32, (n,) int64) buffers on {dev}")
    if dev.type == "cuda" and slots.data_ptr() % 16:   # the kernel writes a slot as one 16-byte store
        raise ValueError("out's slots must start on a 16-byte boundary")
    if dev.type == "cpu":
        token_slots_cpu(bank, bodies.numpy(), lengths.numpy(), task_ids.numpy(),
                        None if active is None else active.numpy(), slots.numpy(), count.numpy())
        return slots, count
    t, c = bank.tensors(dev), bank.slot_tables(dev, L)
    tables = (c["act"], c["act"].shape[0], c["tail_kv"], t["prefix"], t["prefix_len"], len(bank), c["P"])
    assert t["prefix"].dtype == c["act"].dtype == c["tail_kv"].dtype == torch.int32 and t["prefix_len"].dtype == torch.int64
    # addresses, not DLPack views: a few microseconds of host time less per argument
    addr = lambda x: 0 if x is None else x.data_ptr()  # noqa: E731
    if dev.type == "cuda":
        from . import grammar_cuda
        p = lambda x: np.uint64(addr(x))  # noqa: E731
        with grammar_cuda._torch_stream(dev):
            grammar_cuda.launch_token_slots(grammar_cuda.kernels(dev.index), p(bodies), L, p(lengths), p(task_ids),
                                            p(active), n, p(tables[0]), tables[1], p(tables[2]), p(tables[3]),
                                            p(tables[4]), tables[5], tables[6], p(slots), p(count))
    else:
        raise ValueError(f"token_slots runs on the CPU or a CUDA device, not {dev}")
    return slots, count


def token_slots_cpu(bank, bodies: np.ndarray, lengths: np.ndarray, task_ids: np.ndarray, active, slots: np.ndarray,
                    count: np.ndarray) -> None:
    """token_slots on the CPU over numpy arrays (TaskBank.evaluate's CPU path calls it directly:
    at a few rows the torch wrapper's checks cost more than the call): bodies (n, L) int64,
    lengths and task_ids (n,) int64, active (n,) bool or None, all C-contiguous; slots (n, S, 4)
    int32 and count (n,) int64 are written (S = bank.slot_size(L)). The library reads them by
    address, so their layout is checked (ValueError), not trusted."""
    import torch
    from .grammar_native import _p, _threads, lib
    n, L = bodies.shape
    want = ((bodies, np.int64, (n, L)), (lengths, np.int64, (n,)), (task_ids, np.int64, (n,)),
            (slots, np.int32, (n, bank.slot_size(L), 4)), (count, np.int64, (n,))) + \
        (() if active is None else ((active, np.bool_, (n,)),))
    for i, (a, dtype, shape) in enumerate(want):
        written = i in (3, 4)   # slots, count
        if (a.dtype != dtype or a.shape != shape or not a.flags.c_contiguous or not a.flags.aligned
                or (written and not a.flags.writeable)):
            raise ValueError(f"token_slots_cpu: expected a C-contiguous, aligned{', writeable' if written else ''} "
                             f"{np.dtype(dtype)} array of shape {shape}, got {a.dtype} {a.shape}")
    cpu = torch.device("cpu")
    t, c = bank.tensors(cpu), bank.slot_tables(cpu, L)
    assert t["prefix"].dtype == c["act"].dtype == c["tail_kv"].dtype == torch.int32 and t["prefix_len"].dtype == torch.int64
    lib().gm_token_slots(_p(bodies), L, _p(lengths), _p(task_ids), 0 if active is None else _p(active), n,
                         c["act"].data_ptr(), c["act"].shape[0], c["tail_kv"].data_ptr(), t["prefix"].data_ptr(),
                         t["prefix_len"].data_ptr(), len(bank), c["P"], _p(slots), _p(count), _threads())
