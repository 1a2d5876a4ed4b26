"""Program-synthesis environments: the agent writes the body of a task's function.

`Synthesis-v0`: one action per step (a token of envs/vocab.py), under a grammar- and type-aware
action mask (envs/grammar.py); the episode ends at END, and the program is then compiled and run
on the task's tests. `SynthesisBatch-v0`: one step is one whole body per env (an (L,) array of
action ids), scored at once: the "thousands of candidates per step" interface.

A functional core over batched state (the `reset_core` / `step_core` functions, every array
with the batch first) and thin Gymnasium shells: `SynthesisEnv` (one env, numpy) and
`SynthesisVectorEnv` (N envs in one state, autoreset NEXT_STEP; envs/vector.py). The task bank and the reward
function are objects handed to the constructor.

Bad actions: an action out of range or not allowed by the mask ends the episode with the
reward's compile penalty and `info["invalid_action"] = True`; the state is otherwise unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from . import vocab as V
from .bank import TaskBank
from .grammar import STATE_SIZE, BatchedAutomaton, Grammar
from .reward import SynthesisReward
from .vector import CoreVectorEnv

INT32 = np.iinfo(np.int32)


@dataclass
class SynthesisState:
    """Batched state of N synthesis envs."""

    task: np.ndarray     # (N,) int64: task index in the bank
    tokens: np.ndarray   # (N, L) int64: the body's actions so far, END-padded
    length: np.ndarray   # (N,) int64: actions taken
    grammar: np.ndarray  # (N, STATE_SIZE) int32: mask automaton rows (of each env's task signature)


class SynthesisCore:
    """The pure part shared by the single and vector envs: a bank, a length budget, a reward."""

    def __init__(self, bank: TaskBank, max_len: int = 48, reward: SynthesisReward | None = None):
        self.bank, self.max_len = bank, max_len
        self.reward = reward or SynthesisReward()
        self.grammars = [Grammar(sig, max_len=max_len) for sig in bank.signatures]
        self.automaton = BatchedAutomaton(self.grammars)  # every env's row in one call, whatever its task

    def observation_space(self, masked: bool) -> spaces.Dict:
        T, E, W = self.bank.examples.shape
        d = {
            "tokens": spaces.Box(0, V.VOCAB_SIZE - 1, (self.max_len,), np.int64),
            "length": spaces.Box(0, self.max_len, (), np.int64),
            "task": spaces.Box(0, T - 1, (), np.int64),
            "kinds": spaces.Box(-1, 2, (V.NUM_PARAMS,), np.int32),
            "ret_kind": spaces.Box(0, 2, (), np.int32),
            "examples": spaces.Box(INT32.min, INT32.max, (E, W), np.int32),
            "outputs": spaces.Box(INT32.min, INT32.max, (E, self.bank.outputs.shape[2]), np.int32),
        }
        if masked:
            d["action_mask"] = spaces.Box(0, 1, (V.VOCAB_SIZE,), np.int8)
        return spaces.Dict(d)

    def empty(self, n: int) -> SynthesisState:
        return SynthesisState(np.zeros(n, np.int64), np.zeros((n, self.max_len), np.int64), np.zeros(n, np.int64),
                              np.zeros((n, STATE_SIZE), np.int32))

    def reset_core(self, state: SynthesisState, idx: np.ndarray, rng: np.random.Generator,
                   tasks: np.ndarray | None = None) -> None:
        """Start new episodes in envs `idx` (in place), on random tasks unless given."""
        state.task[idx] = rng.integers(len(self.bank), size=len(idx)) if tasks is None else tasks
        state.tokens[idx] = V.END
        state.length[idx] = 0
        for t in np.unique(state.task[idx]):
            sel = idx[state.task[idx] == t]
            state.grammar[sel] = self.grammars[t].reset(len(sel))

    def masks(self, state: SynthesisState) -> np.ndarray:
        """(N, VOCAB_SIZE) bool."""
        if len(state.task) >= Grammar.reference_below:
            out = self.automaton.mask(state.grammar, state.task)
        else:  # a few rows: the per-row automaton is cheaper than the batched one's fixed cost
            out = np.zeros((len(state.task), V.VOCAB_SIZE), dtype=bool)
            for i, t in enumerate(state.task):
                out[i] = self.grammars[t].mask(state.grammar[i : i + 1])[0]
        # A finished episode allows END alone: its next action is ignored (autoreset), and a
        # masked softmax over an all-false mask would be NaN.
        out[~out.any(axis=1), V.END] = True
        return out

    def observe(self, state: SynthesisState, masked: bool) -> dict:
        t = state.task
        obs = {"tokens": state.tokens.copy(), "length": state.length.copy(), "task": t.copy(),
               "kinds": self.bank.kinds[t], "ret_kind": self.bank.ret_kind[t],
               "examples": self.bank.examples[t], "outputs": self.bank.outputs[t]}
        if masked:
            obs["action_mask"] = self.masks(state).astype(np.int8)
        return obs

    def step_core(self, state: SynthesisState, actions: np.ndarray):
        """One token per env (in place). Returns (reward, terminated, truncated, invalid), (N,) each."""
        n = len(state.task)
        actions = np.asarray(actions).reshape(n)
        in_range = (actions >= 0) & (actions < V.VOCAB_SIZE)
        a = np.where(in_range, actions, 0).astype(np.int64)
        if n >= Grammar.reference_below:
            new, invalid = self.automaton.step(state.grammar, a, state.task)
        else:
            new, invalid = state.grammar.copy(), np.zeros(n, dtype=bool)
            for i, t in enumerate(state.task):
                row, bad = self.grammars[t].step(state.grammar[i : i + 1], a[i : i + 1])
                new[i], invalid[i] = row[0], bad[0]
        allowed = ~invalid & in_range
        state.grammar[allowed] = new[allowed]
        rows = np.flatnonzero(allowed & (state.length < self.max_len))
        state.tokens[rows, state.length[rows]] = a[rows]
        state.length[rows] += 1
        finished = allowed & (a == V.END)
        truncated = allowed & ~finished & (state.length >= self.max_len)
        reward = np.zeros(n, dtype=np.float32)
        reward[~allowed] = self.reward.compile_penalty
        done = np.flatnonzero(finished | truncated)
        if len(done):
            reward[done] = self.reward(self.bank.score(state.tokens[done], state.task[done]))
        return reward, finished | ~allowed, truncated, ~allowed

    def step_programs(self, state: SynthesisState, bodies: np.ndarray) -> np.ndarray:
        """Score one whole body per env: (N, L) action ids. Returns the (N,) rewards."""
        bodies = np.asarray(bodies, dtype=np.int64).reshape(len(state.task), -1)[:, : self.max_len]
        bodies = np.where((bodies >= 0) & (bodies < V.VOCAB_SIZE), bodies, V.END)  # out of range ends it
        state.tokens[:] = V.END
        state.tokens[:, : bodies.shape[1]] = bodies
        is_end = state.tokens == V.END
        state.length[:] = np.where(is_end.any(axis=1), is_end.argmax(axis=1) + 1, self.max_len)
        return self.reward(self.bank.score(state.tokens, state.task))

    def render(self, state: SynthesisState, i: int = 0) -> str:
        task = self.bank.tasks[state.task[i]]
        body = state.tokens[i, : state.length[i]]
        try:
            source = V.detokenize(body, self.bank.signatures[state.task[i]])
        except ValueError as e:
            source = f"{task.signature_line()}\n    # (cannot render: {e})"
        lines = [f"task {task.name}: {task.description}", source]
        if len(body) and body[-1] == V.END:
            s = self.bank.score(state.tokens[i : i + 1], state.task[i : i + 1])
            lines.append(f"compiled={bool(s.compiled[0])} passed={s.pass_frac[0] * self.bank.n_tests:.0f}/"
                         f"{self.bank.n_tests} steps={s.steps[0]:.0f}")
        return "\n".join(lines) + "\n"


def _bank(bank, tasks, n_tests, seed, backend) -> TaskBank:
    if bank is not None:
        return bank
    return TaskBank.from_names(tasks, n_tests=n_tests, seed=seed, backend=backend)


class SynthesisEnv(gym.Env):
    """`vramgym/Synthesis-v0` (batch=False) and `vramgym/SynthesisBatch-v0` (batch=True) as one
    Gymnasium env with numpy observations."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, bank: TaskBank | None = None, tasks: list[str] | None = None, max_len: int = 48,
                 reward: SynthesisReward | None = None, batch: bool = False, n_tests: int = 16, seed: int = 0,
                 backend: str = "cpu", render_mode: str | None = None):
        self.core = SynthesisCore(_bank(bank, tasks, n_tests, seed, backend), max_len, reward)
        self.batch = batch
        self.observation_space = self.core.observation_space(not batch)
        self.action_space = (spaces.Box(0, V.VOCAB_SIZE - 1, (max_len,), np.int64) if batch
                             else spaces.Discrete(V.VOCAB_SIZE))
        self.render_mode = render_mode
        self.state = self.core.empty(1)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        task = None if not options or "task" not in options else np.array([options["task"]])
        self.core.reset_core(self.state, np.array([0]), self.np_random, task)
        return _first(self.core.observe(self.state, not self.batch)), {}

    def step(self, action):
        if self.batch:
            reward = self.core.step_programs(self.state, np.asarray(action)[None])
            obs = _first(self.core.observe(self.state, False))
            return obs, float(reward[0]), True, False, {}
        reward, term, trunc, invalid = self.core.step_core(self.state, np.array([action]))
        obs = _first(self.core.observe(self.state, True))
        return obs, float(reward[0]), bool(term[0]), bool(trunc[0]), {"invalid_action": bool(invalid[0])}

    def render(self):
        if self.render_mode == "ansi":
            return self.core.render(self.state)
        return None


class SynthesisVectorEnv(CoreVectorEnv):
    """N synthesis envs in one batched state: one mask and one score call per step for all of
    them, autoreset NEXT_STEP (envs/vector.py)."""

    def __init__(self, num_envs: int = 1, bank: TaskBank | None = None, tasks: list[str] | None = None,
                 max_len: int = 48, reward: SynthesisReward | None = None, batch: bool = False, n_tests: int = 16,
                 seed: int = 0, backend: str = "cpu", device: str | None = None, render_mode: str | None = None,
                 max_episode_steps: int | None = None):
        core = SynthesisCore(_bank(bank, tasks, n_tests, seed, backend), max_len, reward)
        self.batch = batch
        action = (spaces.Box(0, V.VOCAB_SIZE - 1, (max_len,), np.int64) if batch else spaces.Discrete(V.VOCAB_SIZE))
        super().__init__(core, num_envs, core.observation_space(not batch), action, seed, device, render_mode)

    def _observe(self, state):
        return self.core.observe(state, not self.batch)

    def _step(self, state, actions):
        if self.batch:
            r = self.core.step_programs(state, actions)
            n = len(r)
            return r, np.ones(n, bool), np.zeros(n, bool), np.zeros(n, bool)
        return self.core.step_core(state, actions)


def _first(obs: dict) -> dict:
    return {k: np.asarray(v[0]) for k, v in obs.items()}


def make_batch_env(**kw) -> SynthesisEnv:
    return SynthesisEnv(batch=True, **kw)


def make_batch_vector_env(num_envs: int = 1, **kw) -> SynthesisVectorEnv:
    return SynthesisVectorEnv(num_envs=num_envs, batch=True, **kw)
