"""The vector-env shell shared by the environments: N envs in one batched state owned by a core,
tasks optionally pinned per env, autoreset NEXT_STEP (the step after an episode ends resets that
env and ignores its action). Subclasses supply `_observe(state)` and `_step(state, actions)`."""
from __future__ import annotations

from dataclasses import fields

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode


def take(state, rows: np.ndarray):
    """The envs `rows` of a batched state dataclass (copies)."""
    return type(state)(**{f.name: getattr(state, f.name)[rows] for f in fields(state)})


def put(state, rows: np.ndarray, sub) -> None:
    """Write a sub-state back into envs `rows`."""
    for f in fields(state):
        getattr(state, f.name)[rows] = getattr(sub, f.name)


class CoreVectorEnv(gym.vector.VectorEnv):
    metadata = {"render_modes": ["ansi"], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, core, num_envs: int, single_observation_space, single_action_space, seed: int = 0,
                 device: str | None = None, render_mode: str | None = None):
        if device not in (None, "cpu"):
            raise ValueError(f"device {device!r}: the environments' state lives on the host for now (cpu only)")
        self.core, self.num_envs = core, num_envs
        self.single_observation_space = single_observation_space
        self.single_action_space = single_action_space
        self.observation_space = gym.vector.utils.batch_space(single_observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(single_action_space, num_envs)
        self.render_mode = render_mode
        self.state = core.empty(num_envs)
        self._needs_reset = np.zeros(num_envs, dtype=bool)
        self._pinned = None
        self._rng = np.random.default_rng(seed)

    def _observe(self, state) -> dict:
        raise NotImplementedError

    def _step(self, state, actions: np.ndarray):
        """(reward, terminated, truncated, invalid), (n,) each, for the envs of `state`."""
        raise NotImplementedError

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        idx = np.arange(self.num_envs)
        # options={"task": t or (N,) tasks} pins envs to tasks, autoresets included (e.g. groups
        # of candidates per task); a reset without it samples tasks again.
        self._pinned = None if not options or "task" not in options else np.broadcast_to(options["task"], idx.shape).copy()
        self.core.reset_core(self.state, idx, self._rng, self._pinned)
        self._needs_reset[:] = False
        return self._observe(self.state), {}

    def step(self, actions):
        n = self.num_envs
        actions = np.asarray(actions)
        actions = actions.reshape((n,) + actions.shape[1:]) if actions.ndim else actions.reshape(n)
        live = np.flatnonzero(~self._needs_reset)
        restart = np.flatnonzero(self._needs_reset)
        reward, term, trunc, invalid = np.zeros(n, np.float32), np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
        if len(live):
            sub = take(self.state, live)
            r, t, tr, inv = self._step(sub, actions[live])
            put(self.state, live, sub)
            reward[live], term[live], trunc[live], invalid[live] = r, t, tr, inv
        if len(restart):
            self.core.reset_core(self.state, restart, self._rng, None if self._pinned is None else self._pinned[restart])
        self._needs_reset = term | trunc
        return self._observe(self.state), reward, term, trunc, {"invalid_action": invalid}

    def render(self):
        if self.render_mode == "ansi":
            return "".join(self.core.render(self.state, i) for i in range(self.num_envs))
        return None
