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

    def ready(self) -> bool:  # answers once the actor is placed and started
        return True

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


def _check_count(value, name: str) -> None:
    if value is None:
        return
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be None or an int, got {value!r}")
    if value < 1:  # (0 would read as "the cluster has no GPU")
        raise ValueError(f"{name} must be None (all) or >= 1, got {value}")


class RayEvaluator:
    """Bad arguments raise TypeError/ValueError in the driver, before anything is sent to the
    actors; runs whose indices are out of range trap bad_input, as in run_batch. The actors
    must start within start_timeout seconds, or RuntimeError (they would wait for the GPUs or
    CPUs that another evaluator holds, and so would every call to them)."""

    def __init__(self, num_gpus: int | None = None, address: str | None = None, *, backend: str = "cuda",
                 num_workers: int | None = None, start_timeout: float = 120.0):
        if backend not in ("cuda", "cpu"):
            raise ValueError(f"backend must be 'cuda' or 'cpu', got {backend!r}")
        _check_count(num_gpus, "num_gpus")
        _check_count(num_workers, "num_workers")
        # (finite and at most a year: ray.get converts it to a C integer of milliseconds)
        if isinstance(start_timeout, bool) or not isinstance(start_timeout, (int, float)) or \
                not 0 < start_timeout <= 365 * 86400:
            raise ValueError(f"start_timeout must be a number of seconds > 0 (at most a year), got {start_timeout!r}")
        # each backend reads one of the two counts: the other one would be silently ignored
        if backend == "cpu" and num_gpus is not None:
            raise ValueError("num_gpus applies to backend='cuda'; CPU actors are counted by num_workers")
        if backend == "cuda" and num_workers is not None:
            raise ValueError("num_workers applies to backend='cpu'; GPU actors are counted by num_gpus")
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
        # The count above is the cluster's total: where others hold some of it (another
        # evaluator), an actor waits for a free one, and every call on it would block.
        try:
            ray.get([a.ready.remote() for a in self.actors], timeout=start_timeout)
        except ray.exceptions.GetTimeoutError:
            for a in self.actors:
                ray.kill(a)
            free = ray.available_resources().get(kind, 0)
            raise RuntimeError(f"RayEvaluator: {n} actors of one {kind} each did not start within {start_timeout} s "
                               f"(the cluster has {have} {kind}, {free:g} free now: is another evaluator holding "
                               f"them?); ask for fewer with num_{'gpus' if kind == 'GPU' else 'workers'}") from None

    def run_batch(self, programs, inputs, runs=None, *, expected=None, config=None, out_cap=None, lockstep=True):
        """vramgym.vm.run_batch(..., backend="cuda") over every GPU of the cluster (or CPU actor),
        with run_batch's arguments and checks."""
        from . import opcodes as oc
        from .batch import MAX_OUT_CAP, BatchResult, ProgramBatch, VMConfig, cross_runs
        from .values import Encoded, int_array
        ray = _ray()
        # run_batch's checks, here in the driver: in an actor they would surface as a RayTaskError
        if not isinstance(programs, ProgramBatch):
            raise TypeError(f"programs must be a ProgramBatch, got {type(programs).__name__}")
        for name, e in (("inputs", inputs), ("expected", expected)):
            if not isinstance(e, Encoded) and not (name == "expected" and e is None):
                raise TypeError(f"{name} must be an Encoded batch (vramgym.vm.encode_tuples), got {type(e).__name__}")
        if expected is not None and len(expected) != len(inputs):
            raise ValueError("expected needs one value per input")
        config = VMConfig() if config is None else config
        if not isinstance(config, VMConfig):
            raise TypeError(f"config must be a VMConfig, got {type(config).__name__}")
        if runs is None:
            runs = cross_runs(len(programs), len(inputs))
        # (a 1-D array of 2 would unpack into 2 scalars; a (2, R) array is a pair)
        if not (isinstance(runs, (tuple, list)) and len(runs) == 2 or
                isinstance(runs, np.ndarray) and runs.ndim == 2 and len(runs) == 2):
            raise TypeError("runs must be a pair (run_prog, run_in) of index arrays, or a (2, R) array")
        run_prog = int_array(runs[0], "run_prog", -(2**31), 2**31 - 1, np.int32)  # no truncation, no wrap
        run_in = int_array(runs[1], "run_in", -(2**31), 2**31 - 1, np.int32)
        if run_prog.shape != run_in.shape:
            raise ValueError("run_prog and run_in must be 1-D arrays of the same length")
        if out_cap is None:
            out_cap = 256 if np.any(programs.ret_kind == oc.KIND_LIST) else 0
        if isinstance(out_cap, bool) or not isinstance(out_cap, (int, np.integer)) or not 0 <= out_cap <= MAX_OUT_CAP:
            raise ValueError(f"out_cap must be an int in [0, {MAX_OUT_CAP}], got {out_cap!r}")
        out_cap = int(out_cap)
        p_ref, i_ref, e_ref = ray.put(programs), ray.put(inputs), ray.put(expected)
        shards = _shards(len(run_prog), len(self.actors), 32)
        futures = [a.run_batch.remote(p_ref, i_ref, run_prog[s:e], run_in[s:e], e_ref, config, out_cap, lockstep)
                   for a, (s, e) in zip(self.actors, shards)]
        parts = ray.get(futures)
        if not parts:
            z = np.zeros(0, dtype=np.int32)  # an empty batch
            return BatchResult(z, z.copy(), z.copy(), np.zeros(0, bool) if expected is not None else None,
                               z.copy() if out_cap > 0 else None, np.zeros(1, np.int64) if out_cap > 0 else None,
                               out_cap)
        return BatchResult.concat(parts)

    def evaluate(self, tokens, offsets, inputs, expected, **kwargs):
        """vramgym.vm.cuda.evaluate over every GPU, host arrays in and (passed, steps, reward,
        errors) numpy arrays out. kwargs as cuda.evaluate (source=True for byte buffers)."""
        if self.backend != "cuda":
            raise NotImplementedError("RayEvaluator.evaluate runs the CUDA kernels: make it with backend='cuda'")
        from .values import int_array
        ray = _ray()
        tokens = np.asarray(tokens)
        # offsets cut the shards: out of order or past the data, they would cut garbage
        offsets = int_array(offsets, "offsets", 0, len(tokens), np.int64)
        if len(offsets) < 1 or np.any(np.diff(offsets) < 0):
            raise ValueError(f"offsets must be N + 1 non-decreasing values in [0, {len(tokens)}]")
        n = len(offsets) - 1
        futures = []
        for a, (s, e) in zip(self.actors, _shards(n, len(self.actors))):
            lo, hi = int(offsets[s]), int(offsets[e])
            futures.append(a.evaluate.remote(tokens[lo:hi], offsets[s: e + 1] - lo, inputs, expected, kwargs))
        parts = ray.get(futures)
        if not parts:
            return (np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros((0, 4), np.int32))
        return tuple(np.concatenate([p[k] for p in parts]) for k in range(4))
