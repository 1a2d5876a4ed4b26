"""Reward functions as objects handed to the environments (Jumanji style): the environment
computes scores, the reward object turns them into numbers. Scores arrive as numpy arrays or
as torch tensors on the envs' device; a reward returns float32 of the same kind, so it runs on
the GPU with the envs (write custom rewards with operators and `where`, which both support)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def where(cond, a, b):
    """np.where or torch.where, by the type of `cond`."""
    if isinstance(cond, np.ndarray):
        return np.where(cond, a, b)
    import torch
    return torch.where(cond, a, b)


def clip(x, lo, hi):
    return np.clip(x, lo, hi) if isinstance(x, np.ndarray) else x.clamp(lo, hi)


def maximum(x, lo):
    return np.maximum(x, lo) if isinstance(x, np.ndarray) else x.clamp(min=lo)


def scaled(w, x):
    """w * x; x itself when w is 1 (the same values, one op less: a kernel launch on a GPU)."""
    return x if w == 1 else w * x


def f32(x):
    return x.astype(np.float32) if isinstance(x, np.ndarray) else x.float()


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

    def __call__(self, valid: np.ndarray, all_pass: np.ndarray, steps: np.ndarray, ref_steps: np.ndarray) -> np.ndarray:
        eff = clip((ref_steps - steps) / maximum(ref_steps, 1), -1.0, 1.0)
        r = self.valid_bonus * valid + all_pass * (self.all_pass_bonus + self.efficiency_weight * eff)
        return f32(r)
