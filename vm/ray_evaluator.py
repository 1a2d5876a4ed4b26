"""Spread a batch over the GPUs of a Ray cluster: one actor per GPU, each running the CUDA
backend on its share, behind the batch API of vramgym.vm.batch.

    ev = RayEvaluator()                          # ray.init() if needed; one actor per cluster GPU
    res = ev.run_batch(programs, inputs, expected=exp)        # a BatchResult, as run_batch gives
    passed, steps, reward, errors = ev.evaluate(tokens, offsets, inputs, expected, signature=sig)

`RayEvaluator(backend="cpu", num_workers=k)` puts k CPU actors (one core each) behind the same
`run_batch`: scale-out over the CPUs of a cluster, and the way the sharding is tested where no
GPU is. Ray is optional (`pip install "vramgym[ray]"`): it is imported when an evaluator is made,
with a clear error where it is absent. Shares are contiguous slices of the runs (or candidates),
so concatenating the actors' answers gives exactly what one GPU (or the CPU backend) gives.
"""
from __future__ import annotations

import numpy as np


def _ray():
    try:
        import ray
    except ImportError as e:
        raise ImportError("RayEvaluator needs ray: pip install 'ray[default]'") from e
    return ray


class _Worker:
    """Body of an actor: one GPU (Ray pins it through CUDA_VISIBLE_DEVICES) or one CPU core."""

    def __init__(self, backend: str):
        self.backend = backend

    def run_batch(self, programs, inputs, run_prog, run_in, expected, config, out_cap, lockstep):
        from vramgym.vm.batch import run_batch
        return run_batch(programs, inputs, (run_prog, run_in), expected=expected, config=config, out_cap=out_cap,
                         backend=self.backend, nthreads=1 if self.backend == "cpu" else None, lockstep=lockstep)

    def evaluate(self, tokens, offsets, inputs, expected, kwargs):
        from vramgym.vm import cuda
        r = cuda.evaluate(tokens, offsets, inputs, expected, **kwargs)
        return r.passed.get(), r.steps.get(), r.reward.get(), r.errors.get()


def _shards(n: int, k: int, align: int = 1) -> list[tuple[int, int]]:
    """k contiguous [a, b) slices of range(n), boundaries on multiples of align; empty ones dropped."""
    edges = [min(n, (n * i // k) // align * align) for i in range(k)] + [n]
    return [(a, b) for a, b in zip(edges, edges[1:]) if b > a]


class RayEvaluator:
    def __init__(self, num_gpus: int | None = None, address: str | None = None, *, backend: str = "cuda",
                 num_workers: int | None = None):
        if backend not in ("cuda", "cpu"):
            raise ValueError(f"backend must be 'cuda' or 'cpu', got {backend!r}")
        ray = _ray()
        if not ray.is_initialized():
            ray.init(address=address, ignore_reinit_error=True)
        self.backend = backend
        kind = "GPU" if backend == "cuda" else "CPU"
        have = int(ray.cluster_resources().get(kind, 0))
        want = num_gpus if backend == "cuda" else num_workers
        n = have if want is None else min(want, have)
        if n < 1:
            raise RuntimeError(f"RayEvaluator: the Ray cluster has no {kind}")
        actor = ray.remote(**({"num_gpus": 1} if backend == "cuda" else {"num_cpus": 1}))(_Worker)
        self.actors = [actor.remote(backend) for _ in range(n)]

    def run_batch(self, programs, inputs, runs=None, *, expected=None, config=None, out_cap=None, lockstep=True):
        """vramgym.vm.run_batch(..., backend="cuda") over every GPU of the cluster."""
        from . import opcodes as oc
        from .batch import BatchResult, VMConfig, cross_runs
        ray = _ray()
        config = config or VMConfig()
        run_prog, run_in = cross_runs(len(programs), len(inputs)) if runs is None else runs
        run_prog = np.ascontiguousarray(run_prog, dtype=np.int32)
        run_in = np.ascontiguousarray(run_in, dtype=np.int32)
        if out_cap is None:
            out_cap = 256 if np.any(programs.ret_kind == oc.KIND_LIST) else 0
        p_ref, i_ref, e_ref = ray.put(programs), ray.put(inputs), ray.put(expected)
        shards = _shards(len(run_prog), len(self.actors), 32)
        futures = [a.run_batch.remote(p_ref, i_ref, run_prog[s:e], run_in[s:e], e_ref, config, out_cap, lockstep)
                   for a, (s, e) in zip(self.actors, shards)]
        parts = ray.get(futures)
        if not parts:
            z = np.zeros(0, dtype=np.int32)  # an empty batch
            return BatchResult(z, z.copy(), z.copy(), np.zeros(0, bool) if expected is not None else None,
                               np.zeros((0, out_cap), np.int32) if out_cap > 0 else None)
        cat = lambda name: (None if getattr(parts[0], name) is None
                            else np.concatenate([getattr(p, name) for p in parts]))
        return BatchResult(cat("status"), cat("value"), cat("steps"), cat("passed"), cat("out_list"))

    def evaluate(self, tokens, offsets, inputs, expected, **kwargs):
        """vramgym.vm.cuda.evaluate over every GPU, host arrays in and (passed, steps, reward,
        errors) numpy arrays out. kwargs as cuda.evaluate (source=True for byte buffers)."""
        if self.backend != "cuda":
            raise NotImplementedError("RayEvaluator.evaluate runs the CUDA kernels: make it with backend='cuda'")
        ray = _ray()
        tokens, offsets = np.asarray(tokens), np.asarray(offsets, dtype=np.int64)
        n = len(offsets) - 1
        futures = []
        for a, (s, e) in zip(self.actors, _shards(n, len(self.actors))):
            lo, hi = int(offsets[s]), int(offsets[e])
            futures.append(a.evaluate.remote(tokens[lo:hi], offsets[s: e + 1] - lo, inputs, expected, kwargs))
        parts = ray.get(futures)
        if not parts:
            return (np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros((0, 4), np.int32))
        return tuple(np.concatenate([p[k] for p in parts]) for k in range(4))
