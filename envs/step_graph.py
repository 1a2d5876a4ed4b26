"""A vector env's whole step replayed from one CUDA graph (`cuda_graph=True` on the envs).

Why: on a GPU an eager step is ~140 kernel launches issued one by one from Python, about 3.5 ms
of host time on the H100 machine (experiments/profile_env.py), more than the GPU's own work up
to 65,536 envs. A replay is one launch.

How (envs/vector.py drives it): the shell's step, written as a function of its own buffers, runs
twice on a side stream to make every lazy allocation and module load happen, then once under
capture; the state it changed is restored from a snapshot taken before. A replay reads the
actions from a static input tensor and leaves its results in static output tensors, which the
shell copies out. What this asks of a step: it writes every buffer in place (a field rebound
to a new tensor would leave the graph writing the old one), never reads the device on the
host, and has no data-dependent shape; the envs' steps are written that way already (no sync:
experiments/find_syncs.py; no rebinding: the emulated graph below checks it on any device).
"""
from __future__ import annotations

from collections.abc import Callable

import torch


def _leaves(x) -> list:
    """The tensors of nested tuples, lists and dicts, in order."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _leaves(v)]
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in _leaves(v)]
    return []


class StepGraph:
    """One captured step. `body()` reads `actions` (a static tensor the caller fills before each
    replay) and the env's buffers, and returns the step's outputs (nested tuples and dicts of
    tensors); `buffers()` names every tensor the step may write, for the snapshot.

    emulate=True replays by calling `body` again and copying its results into the outputs of
    the first call, on any device: the same static-buffer data flow without CUDA, for tests.
    It also checks after every replay that `buffers()` still returns the tensors it returned at
    capture (a real graph would go on writing the old ones).

    pool: another StepGraph of the same env whose memory pool this one shares (graphs of one env
    never run at once, and each keeps its outputs referenced, so the second capture reuses only
    the first's temporaries: one copy of the scorer's scratch per env, not one per graph)."""

    def __init__(self, body: Callable, actions: torch.Tensor, buffers: Callable[[], dict], emulate: bool = False,
                 pool: "StepGraph | None" = None):
        self.body, self.actions, self.buffers, self.emulate = body, actions, buffers, emulate
        dev = actions.device
        saved = {k: t.clone() for k, t in buffers().items()}
        if emulate:
            self.outputs = body()
        else:
            from vramgym.vm import cuda as vm_cuda
            side = torch.cuda.Stream(dev)
            side.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(side):       # warm-up, as torch asks before a capture
                for _ in range(2):
                    body()
            self.graph = torch.cuda.CUDAGraph()
            shared = None if pool is None else pool.graph.pool()
            try:
                with vm_cuda.graph_capture() as self._kept, torch.cuda.graph(
                        self.graph, pool=shared, stream=side, capture_error_mode="thread_local"):
                    self.outputs = body()
            except RuntimeError as e:
                raise RuntimeError("cuda_graph=True: the env's step could not be captured into a CUDA graph (a "
                                   "reward or task function that reads device values on the host, or a shape that "
                                   "depends on the data?); use cuda_graph=False") from e
            torch.cuda.current_stream(dev).wait_stream(side)
        now = buffers()
        for k, t in saved.items():   # the warm-up and (emulated) capture stepped the env: undo it
            now[k].copy_(t)
        self._ptrs = {k: t.data_ptr() for k, t in now.items()}
        self._flat = _leaves(self.outputs)

    def replay(self):
        """Run the step; returns the static outputs (overwritten by the next replay)."""
        if not self.emulate:
            self.graph.replay()
            return self.outputs
        for dst, src in zip(self._flat, _leaves(self.body())):
            if dst.data_ptr() != src.data_ptr():
                dst.copy_(src)
        moved = [k for k, t in self.buffers().items() if k in self._ptrs and t.data_ptr() != self._ptrs[k]]
        if moved:
            raise AssertionError(f"the step rebound {moved}: a CUDA graph would go on writing the old tensors")
        return self.outputs
