"""The batched mask automaton of envs/grammar.py over torch tensors on any device, sync-free.

    ta = TorchAutomaton(grammars, device)          # grammars: envs.grammar.Grammar, one per task
    state = ta.initial(gid)                        # (n, STATE_SIZE) int32, gid: (n,) int64
    mask = ta.mask(state, gid)                     # (n, VOCAB_SIZE) bool
    state, invalid = ta.step(state, actions, gid)  # actions: (n,) int64; invalid: (n,) bool
    cost = ta.min_tokens_to_finish(state, gid)     # (n,) int64

Outputs equal `BatchedAutomaton(grammars)` row for row (tests/test_grammar_torch.py), because
it IS BatchedAutomaton: there is one implementation of the automaton, written over an array
backend. envs/grammar.py keeps the numpy backend (`NumpyOps`, the default) and the code; this
module only supplies `TorchOps`, the dozen operations that numpy and torch spell differently
(where/cat/amin/clamp/gather/...), and converts the numpy tables once per device: the frame
tables and constants (about 25 MB, cached per device, shared by every TorchAutomaton on it) and
each grammar variant's cost table (4 MB, cached per device and (return type, call cost)).

No host synchronization: every operation of initial/mask/step/min_tokens_to_finish is a gather
with int64 indices, an indexed write with int64 indices, torch.where, a reduction with a fixed
output shape or elementwise arithmetic; there is no .item(), boolean-mask indexing, nonzero or
Python branch on tensor values, and all shapes depend on n only. tests/test_grammar_torch.py
runs all four on the meta device, where any data-dependent op raises. Indices are clamped in
range before every gather (as in the numpy code), so no device-side assert can fire on valid
states. Actions may be out of range (then invalid, state unchanged).

Cost: whatever n, a mask is about 460 kernels (260 of them the per-row context that step and
min_tokens_to_finish share) and a step about 860, so on a GPU a call is launch-bound up to tens
of thousands of rows. There is no data-dependent control flow: torch.compile(fullgraph=True)
traces mask and step as one graph each (tests/test_grammar_torch.py), so they can be compiled
(inductor on a 2-core CPU: ~100 s to compile each, then mask 1.2x and step 1.8x faster at 4,096
rows, outputs equal) or captured in a CUDA graph (the envs' cuda_graph=True captures it with the
rest of a step). On a CPU, eager, it
runs at about numpy's speed with one intra-op thread; with more threads on a loaded machine each
small kernel waits for its threads (measured: 15x slower on 2 shared cores), so set
torch.set_num_threads(1) there.
"""
from __future__ import annotations

import numpy as np
import torch

from .grammar import INF, BatchedAutomaton, check_gids, check_states

_OPS: dict = {}


class TorchOps:
    """The backend operations of BatchedAutomaton (see envs/grammar.py NumpyOps) over torch
    tensors on one device."""

    where = staticmethod(torch.where)
    stack = staticmethod(torch.stack)
    cat = staticmethod(torch.cat)
    cumprod = staticmethod(torch.cumprod)
    broadcast_to = staticmethod(torch.broadcast_to)
    ones_like = staticmethod(torch.ones_like)
    zeros_like = staticmethod(torch.zeros_like)

    def __init__(self, device: torch.device):
        self.device = device
        self.cache: dict = {}

    def put(self, a: np.ndarray, key=None) -> torch.Tensor:
        """A numpy constant on the device (once per key when a key is given)."""
        if key is not None:
            if key not in self.cache:
                self.cache[key] = self.put(a)
            return self.cache[key]
        return torch.from_numpy(np.ascontiguousarray(a)).to(self.device)

    def rows(self, state: torch.Tensor) -> torch.Tensor:
        return torch.atleast_2d(torch.as_tensor(check_states(state))).to(device=self.device, dtype=torch.int64)

    def vec(self, v: torch.Tensor) -> torch.Tensor:       # grammar ids
        return torch.as_tensor(check_gids(v, -1)).reshape(-1).to(device=self.device, dtype=torch.int64)

    def actions(self, v) -> torch.Tensor:
        """As NumpyOps.actions (grammar_reference.action_ids): the envs' reading of actions
        (vector.as_actions: non-integers become -1, invalid), flattened."""
        from .vector import as_actions
        return as_actions(v, self.device).reshape(-1)

    @staticmethod
    def like(x: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
        return x.to(ref.dtype)

    def arange(self, n: int) -> torch.Tensor:
        return torch.arange(n, device=self.device)

    def full(self, shape, v: int) -> torch.Tensor:
        return torch.full((shape,) if isinstance(shape, int) else shape, v, dtype=torch.int64, device=self.device)

    def falses(self, n: int) -> torch.Tensor:
        return torch.zeros(n, dtype=torch.bool, device=self.device)

    @staticmethod
    def copy(x: torch.Tensor) -> torch.Tensor:
        # contiguous: x may be an expanded view, whose clone would keep the shared strides
        return x.clone(memory_format=torch.contiguous_format)

    @staticmethod
    def i64(x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.int64)

    @staticmethod
    def min3(x: torch.Tensor) -> torch.Tensor:
        return x.min(dim=-1).values            # one kernel; torch.amin over 3 is 10x slower on cpu

    @staticmethod
    def cap(x: torch.Tensor) -> torch.Tensor:
        return torch.clamp_max(x, INF)

    @staticmethod
    def atleast(x: torch.Tensor, lo: int) -> torch.Tensor:
        return torch.clamp_min(x, lo)

    @staticmethod
    def clip(x: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
        return torch.clamp(x, lo, hi)

    @staticmethod
    def take1(vals: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return torch.gather(vals, 1, idx[:, None])[:, 0]


def ops_for(device) -> TorchOps:
    """The backend of a device, one per device per process (it holds the device's tables)."""
    d = torch.device(device)
    if d.type == "cuda" and d.index is None:
        d = torch.device("cuda", torch.cuda.current_device())
    if d not in _OPS:
        _OPS[d] = TorchOps(d)
    return _OPS[d]


class TorchAutomaton(BatchedAutomaton):
    """BatchedAutomaton over torch tensors on `device`: row i of a batch uses grammars[gid[i]].

    state: (n, STATE_SIZE) int32 (step returns the dtype it is given); gid, actions: (n,) int64.
    Inputs on another device are copied to this one (an explicit transfer, not a sync on values)."""

    def __init__(self, grammars, device="cpu"):
        super().__init__(grammars, ops=ops_for(device))
        self.device = self._xp.device

    def initial(self, gid: torch.Tensor) -> torch.Tensor:
        """(n, STATE_SIZE) int32: the empty-body rows of grammars[gid[i]]."""
        return super().initial(gid)

    def mask(self, state: torch.Tensor, gid: torch.Tensor) -> torch.Tensor:
        """(n, VOCAB_SIZE) bool: the allowed actions of each row (all False once done)."""
        return super().mask(state, gid)

    def step(self, state: torch.Tensor, actions: torch.Tensor, gid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(new state, invalid (n,) bool); an invalid action (out of range, masked, or after END)
        leaves its row unchanged."""
        return super().step(state, actions, gid)

    def min_tokens_to_finish(self, state: torch.Tensor, gid: torch.Tensor) -> torch.Tensor:
        """(n,) int64: tokens (END included) of the canonical completion of each row."""
        return super().min_tokens_to_finish(state, gid)
