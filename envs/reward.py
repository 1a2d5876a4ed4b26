"""Reward functions as objects handed to the environments (Jumanji style): the environment
computes scores, the reward object turns them into numbers. Scores arrive as numpy arrays or
as torch tensors on the envs' device; a reward returns float32 of the same kind, so it runs on
the GPU with the envs (write custom rewards with operators and `where`, which both support)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def where(cond, a, b):
    """np.where or torch.where, by the type of `cond`."""
    if not _is_torch(cond):
        return np.where(cond, a, b)
    import torch
    return torch.where(cond, a, b)


def clip(x, lo, hi):   # (numpy arithmetic on 0-d arrays gives numpy scalars: not torch either)
    return x.clamp(lo, hi) if _is_torch(x) else np.clip(x, lo, hi)


def maximum(x, lo):
    return x.clamp(min=lo) if _is_torch(x) else np.maximum(x, lo)


def scaled(w, x):
    """w * x; x itself when w is 1 (the same values, one op less: a kernel launch on a GPU)."""
    return x if w == 1 else w * x


def f32(x):
    return x.float() if _is_torch(x) else np.asarray(x, dtype=np.float32)


def check_callable(reward, n_args: int, like: str) -> None:
    """TypeError when the env is made, not at its first scored step, unless `reward` can be called
    with the n_args score arrays the env passes (a SynthesisReward handed to NeuralCompile-v0
    used to fail only there, mid-training)."""
    import inspect
    if not callable(reward):
        raise TypeError(f"reward must be callable (like {like}), got {reward!r:.80}")
    try:
        inspect.signature(reward).bind(*range(n_args))
    except TypeError:
        raise TypeError(f"reward must take {n_args} score argument{'s' if n_args > 1 else ''} "
                        f"(like {like}), got {reward!r:.80}") from None
    except ValueError:   # no signature to read (some builtins): the first step tells
        pass


def check_output(r, like, reward):
    """A reward's result: a real-valued tensor of `like`'s shape and device (checked on the host
    by type and shape only, so a GPU step still never waits). A wrong shape would broadcast one
    env's reward to all."""
    import torch
    if not isinstance(r, torch.Tensor) or r.is_complex() or r.dtype == torch.bool:
        raise TypeError(f"reward {type(reward).__name__} must return a real-valued torch tensor like its scores, "
                        f"got {type(r).__name__}{'' if not isinstance(r, torch.Tensor) else ' of ' + str(r.dtype)}")
    if r.shape != like.shape or r.device != like.device:
        raise ValueError(f"reward {type(reward).__name__} must return shape {tuple(like.shape)} on {like.device} (one "
                         f"value per env), got {tuple(r.shape)} on {r.device}")
    return r


def check_real(v, name: str) -> float:
    """A reward weight: a finite real number (a str or None failed at the first scored step, deep
    in torch; nan and inf propagated into rewards)."""
    import math
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {v!r:.80}")
    if not math.isfinite(float(v)) or abs(float(v)) > 1e30:
        raise ValueError(f"{name} must be finite (|x| <= 1e30), got {v!r}")
    return float(v)


def _check_fields(obj):
    for name in obj.__dataclass_fields__:
        check_real(getattr(obj, name), f"{type(obj).__name__}.{name}")


@dataclass(frozen=True)
class SynthesisReward:
    """Reward of a finished program in the synthesis environments.

    compile failure: `compile_penalty`; otherwise `pass_weight * fraction of tests passed`,
    plus `all_pass_bonus` when every test passes, minus `step_cost` per executed VM step (mean
    over the tests) and `length_cost` per action of the program."""

    compile_penalty: float = -1.0
    pass_weight: float = 1.0
    all_pass_bonus: float = 1.0
    step_cost: float = 1e-5
    length_cost: float = 1e-3

    def __post_init__(self):
        _check_fields(self)

    def __call__(self, scores) -> np.ndarray:
        r = (scaled(self.pass_weight, scores.pass_frac) + scaled(self.all_pass_bonus, scores.all_pass)
             - scaled(self.step_cost, scores.steps) - scaled(self.length_cost, scores.length))
        return f32(where(scores.compiled, r, self.compile_penalty))


@dataclass(frozen=True)
class NeuralCompileReward:
    """The paper's reward for a neural compiler (arXiv 2512.11200, section on RL): `valid_bonus`
    (+1) when the bytecode is structurally valid, `all_pass_bonus` (+10) when every test passes,
    and an efficiency term: `efficiency_weight * (ref_steps - steps) / ref_steps`, clipped to
    [-1, 1], against the executed steps of the traditional compiler's bytecode (only when every
    test passes)."""

    valid_bonus: float = 1.0
    all_pass_bonus: float = 10.0
    efficiency_weight: float = 1.0

    def __post_init__(self):
        _check_fields(self)

    def __call__(self, valid: np.ndarray, all_pass: np.ndarray, steps: np.ndarray, ref_steps: np.ndarray) -> np.ndarray:
        eff = clip((ref_steps - steps) / maximum(ref_steps, 1), -1.0, 1.0)
        r = self.valid_bonus * valid + all_pass * (self.all_pass_bonus + self.efficiency_weight * eff)
        return f32(r)
