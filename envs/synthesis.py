"""Program-synthesis environments: the agent writes the body of a task's function.

`Synthesis-v0`: one action per step (a token of envs/vocab.py), under a grammar- and type-aware
action mask (envs/grammar.py); the episode ends at END or at the length limit, and the program is
then compiled and run on the task's tests. `SynthesisBatch-v0`: one step is one whole body per
env (an (L,) array of action ids), scored at once: the "thousands of candidates per step"
interface.

A functional core over batched torch state (`SynthesisCore`: every tensor with the batch first,
on one device) and thin Gymnasium shells: `SynthesisEnv` (one env, numpy) and
`SynthesisVectorEnv` (N envs, autoreset NEXT_STEP; envs/vector.py: numpy out by default, torch
tensors on `device=` otherwise). The task bank and the reward function are objects handed to the
constructor.

The mask automaton (`automaton=`): "native" is the C++/CUDA port (envs/grammar_native.py: threads
over rows on the CPU, one CUDA thread per row on a GPU), "numpy" the array code of envs/grammar.py
(per-row reference below 8 rows; CPU only), "torch" the same array code over torch on any device
(envs/grammar_torch.py). All give identical masks and states (tested). "auto" (the default) takes
the native one where it runs (CPU: the library is built; CUDA: cupy is installed), else numpy on
the CPU and torch elsewhere. `cuda_graph=True` asks for the torch automaton replayed from CUDA
graphs ("auto" then picks torch on CUDA); the native one needs no graphs (one kernel launch per
call), so with automaton="native" the flag changes nothing.

Bad actions: an action out of range or not allowed by the mask ends the episode with the
reward's compile penalty and `info["invalid_action"] = True`; the state is otherwise unchanged.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch
from gymnasium import spaces

from . import vocab as V
from .bank import TaskBank
from .grammar import STATE_SIZE, BatchedAutomaton, Grammar
from .reward import SynthesisReward
from .vector import CoreEnv, TensorVectorEnv

INT32 = np.iinfo(np.int32)


@dataclass
class SynthesisState:
    """Batched state of N synthesis envs (torch tensors on one device)."""

    task: torch.Tensor     # (N,) int64: task index in the bank
    tokens: torch.Tensor   # (N, L) int64: the body's actions so far, END-padded
    length: torch.Tensor   # (N,) int64: actions taken
    grammar: torch.Tensor  # (N, STATE_SIZE) int32: mask automaton rows (of each env's task signature)


class _NumpyAutomaton:
    """The numpy automaton behind the torch automaton's interface, for CPU tensors (shared
    memory, no copies); a few rows go through the per-row reference, which is cheaper than the
    batched code's fixed cost per call."""

    def __init__(self, grammars):
        self.grammars = grammars
        self.batched = BatchedAutomaton(grammars)
        self.init = torch.from_numpy(np.concatenate([g.reset(1) for g in grammars]))

    def initial(self, gid):
        return self.init[gid]

    def mask(self, state, gid):
        S, G = state.numpy(), gid.numpy()
        if len(G) >= Grammar.reference_below:
            return torch.from_numpy(self.batched.mask(S, G))
        return torch.from_numpy(np.concatenate([self.grammars[t].mask(S[i: i + 1]) for i, t in enumerate(G)])
                                if len(G) else np.zeros((0, V.VOCAB_SIZE), bool))

    def step(self, state, actions, gid):
        S, A, G = state.numpy(), actions.numpy(), gid.numpy()
        if len(G) >= Grammar.reference_below:
            new, bad = self.batched.step(S, A, G)
        else:
            new, bad = S.copy(), np.zeros(len(G), dtype=bool)
            for i, t in enumerate(G):
                row, b = self.grammars[t].step(S[i: i + 1], A[i: i + 1])
                new[i], bad[i] = row[0], b[0]
        return torch.from_numpy(new), torch.from_numpy(bad)


class SynthesisCore:
    """The pure part shared by the single and vector envs: a bank, a length budget, a reward."""

    def __init__(self, bank: TaskBank, max_len: int = 48, reward: SynthesisReward | None = None,
                 automaton: str = "auto", batch: bool = False, cuda_graph: bool = False):
        if automaton not in ("auto", "native", "numpy", "torch"):
            raise ValueError(f"automaton must be 'auto', 'native', 'numpy' or 'torch', got {automaton!r}")
        self.bank, self.max_len, self.batch = bank, max_len, batch
        self.reward = reward or SynthesisReward()
        self.grammars = [Grammar(sig, max_len=max_len) for sig in bank.signatures]
        self.n_tasks = len(bank)
        self._automaton_kind = automaton
        self.cuda_graph = cuda_graph
        self._automata: dict = {}

    def automaton_kind(self, device: torch.device) -> str:
        """Which automaton runs on `device`: "native", "numpy" or "torch" ("auto" resolved)."""
        kind = self._automaton_kind
        if kind == "auto":
            from . import grammar_native
            if device.type == "cpu":
                kind = "native" if grammar_native.available() else "numpy"
                if kind == "numpy" and grammar_native.built():   # built but stale: say so, don't just slow down
                    warnings.warn("the native mask automaton is out of date (reinstall vramgym): using numpy's")
            elif device.type == "cuda":
                from . import grammar_cuda
                kind = "native" if grammar_cuda.available() and not self.cuda_graph else "torch"
            else:
                kind = "torch"
        if kind == "numpy" and device.type != "cpu":
            raise ValueError("the numpy automaton runs on the CPU only")
        if kind == "native" and device.type not in ("cpu", "cuda"):
            raise ValueError(f"the native automaton runs on the CPU or a CUDA device, not {device}")
        return kind

    def automaton(self, device: torch.device):
        key = str(device)
        if key not in self._automata:
            kind = self.automaton_kind(device)
            if kind == "native":
                from .grammar_native import NativeAutomaton
                self._automata[key] = NativeAutomaton(self.grammars, device)
            elif kind == "numpy":
                self._automata[key] = _NumpyAutomaton(self.grammars)
            else:
                from .grammar_torch import GraphedAutomaton, TorchAutomaton
                a = TorchAutomaton(self.grammars, device)
                self._automata[key] = GraphedAutomaton(a) if self.cuda_graph and device.type == "cuda" else a
        return self._automata[key]

    def prepare(self, state: SynthesisState) -> None:
        """Before the first step (the shell's reset): capture the automaton's CUDA graphs."""
        a = self.automaton(state.grammar.device)
        if hasattr(a, "prepare"):
            a.prepare(len(state.task))

    def observation_space(self) -> spaces.Dict:
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
        if not self.batch:
            d["action_mask"] = spaces.Box(0, 1, (V.VOCAB_SIZE,), np.int8)
        return spaces.Dict(d)

    def empty(self, n: int, device) -> SynthesisState:
        z = lambda *shape, dtype=torch.int64: torch.zeros(shape, dtype=dtype, device=device)  # noqa: E731
        return SynthesisState(z(n), z(n, self.max_len), z(n), z(n, STATE_SIZE, dtype=torch.int32))

    def reset_rows(self, state: SynthesisState, rows: torch.Tensor, tasks: torch.Tensor) -> None:
        """Start new episodes in the envs where `rows` is True (in place), on `tasks`."""
        if rows.device.type == "cpu" and not bool(rows.any()):  # free on the CPU; on a GPU it would sync
            return
        state.task.copy_(torch.where(rows, tasks, state.task))
        state.tokens.masked_fill_(rows[:, None], V.END)
        state.length.masked_fill_(rows, 0)
        init = self.automaton(state.grammar.device).initial(state.task)
        state.grammar.copy_(torch.where(rows[:, None], init, state.grammar))

    def masks(self, state: SynthesisState) -> torch.Tensor:
        """(N, VOCAB_SIZE) bool."""
        out = self.automaton(state.grammar.device).mask(state.grammar, state.task).clone()
        # A finished episode allows END alone: its next action is ignored (autoreset), and a
        # masked softmax over an all-false mask would be NaN.
        out[:, V.END] |= ~out.any(dim=1)
        return out

    def action_space(self) -> spaces.Space:
        if self.batch:
            return spaces.Box(0, V.VOCAB_SIZE - 1, (self.max_len,), np.int64)
        return spaces.Discrete(V.VOCAB_SIZE)

    def observe(self, state: SynthesisState) -> dict:
        t = state.task
        tb = self.bank.tensors(t.device)
        obs = {"tokens": state.tokens.clone(), "length": state.length.clone(), "task": t.clone(),
               "kinds": tb["kinds"][t], "ret_kind": tb["ret_kind"][t], "examples": tb["examples"][t],
               "outputs": tb["outputs"][t]}
        if not self.batch:
            obs["action_mask"] = self.masks(state).to(torch.int8)
        return obs

    def _score(self, tokens, length, body_len, task, done) -> torch.Tensor:
        ok, passed, steps = self.bank.evaluate(tokens, length, task, done)
        return self.reward(self.bank.scores(ok, passed, steps, body_len))

    def step(self, state: SynthesisState, actions: torch.Tensor, live: torch.Tensor):
        """One step where `live`: a token per env, or with batch=True a whole body per env."""
        return (self.step_programs if self.batch else self.step_tokens)(state, actions, live)

    def step_tokens(self, state: SynthesisState, actions: torch.Tensor, live: torch.Tensor):
        """One token per env (in place) where `live`. Returns (reward, terminated, truncated,
        invalid), (N,) each; rows not live are left as they are and get zeros."""
        L = self.max_len
        in_range = (actions >= 0) & (actions < V.VOCAB_SIZE)
        a = torch.where(in_range, actions, 0)
        new, invalid = self.automaton(state.grammar.device).step(state.grammar, a, state.task)
        allowed = ~invalid & in_range & live
        bad = live & ~allowed
        state.grammar.copy_(torch.where(allowed[:, None], new, state.grammar))
        write = allowed & (state.length < L)
        col = state.length.clamp(max=L - 1)[:, None]
        state.tokens.scatter_(1, col, torch.where(write, a, state.tokens.gather(1, col)[:, 0])[:, None])
        state.length += write.long()
        finished = allowed & (a == V.END)
        truncated = allowed & ~finished & (state.length >= L)
        done = finished | truncated
        r = self._score(state.tokens, state.length, state.length - finished.long(), state.task, done)
        reward = torch.where(done, r, torch.where(bad, self.reward.compile_penalty, 0.0)).float()
        return reward, finished | bad, truncated, bad

    def step_programs(self, state: SynthesisState, bodies: torch.Tensor, live: torch.Tensor):
        """Score one whole body per env ((N, L') action ids; beyond L ignored, an out-of-range
        action ends the body) where `live`. Returns (reward, terminated, truncated, invalid)."""
        L = self.max_len
        bodies = bodies.reshape(len(live), -1)[:, :L]
        bodies = torch.where((bodies >= 0) & (bodies < V.VOCAB_SIZE), bodies, V.END)
        tokens = torch.full_like(state.tokens, V.END)
        tokens[:, : bodies.shape[1]] = bodies
        is_end = tokens == V.END
        first_end = is_end.to(torch.uint8).argmax(dim=1)
        has_end = is_end.any(dim=1)
        state.tokens.copy_(torch.where(live[:, None], tokens, state.tokens))
        state.length.copy_(torch.where(live, torch.where(has_end, first_end + 1, L), state.length))
        r = self._score(tokens, state.length, torch.where(has_end, first_end, L), state.task, live)
        zero = torch.zeros_like(live)
        return torch.where(live, r, 0.0).float(), live.clone(), zero, zero

    def render(self, state: SynthesisState, i: int = 0) -> str:
        ti = int(state.task[i])
        task = self.bank.tasks[ti]
        body = state.tokens[i, : int(state.length[i])].cpu().numpy()
        try:
            source = V.detokenize(body, self.bank.signatures[ti])
        except ValueError as e:
            source = f"{task.signature_line()}\n    # (cannot render: {e})"
        lines = [f"task {task.name}: {task.description}", source]
        if len(body) and body[-1] == V.END:
            s = self.bank.score(body[None], np.array([ti]))
            lines.append(f"compiled={bool(s.compiled[0])} passed={s.pass_frac[0] * self.bank.n_tests:.0f}/"
                         f"{self.bank.n_tests} steps={s.steps[0]:.0f}")
        return "\n".join(lines) + "\n"


def _bank(bank, tasks, n_tests, seed, backend) -> TaskBank:
    if bank is not None:
        return bank
    return TaskBank.from_names(tasks, n_tests=n_tests, seed=seed, backend=backend)


class SynthesisEnv(CoreEnv):
    """`vramgym/Synthesis-v0` (batch=False) and `vramgym/SynthesisBatch-v0` (batch=True) as one
    Gymnasium env with numpy observations (the core on the CPU with one row)."""

    def __init__(self, bank: TaskBank | None = None, tasks: list[str] | None = None, max_len: int = 48,
                 reward: SynthesisReward | None = None, batch: bool = False, n_tests: int = 16, seed: int = 0,
                 backend: str = "cpu", render_mode: str | None = None):
        self.core = SynthesisCore(_bank(bank, tasks, n_tests, seed, backend), max_len, reward, batch=batch)
        self.observation_space = self.core.observation_space()
        self.action_space = self.core.action_space()
        super().__init__(render_mode)


class SynthesisVectorEnv(TensorVectorEnv):
    """N synthesis envs in one batched state: one mask and one score call per step for all of
    them, autoreset NEXT_STEP (envs/vector.py). `device=None`: numpy out; a device: torch
    tensors there, state and scoring included. `automaton`: "auto", "native", "numpy" or
    "torch" (see the module docstring). `cuda_graph=True` (CUDA only) replays the torch mask
    automaton from CUDA graphs captured at reset (envs/grammar_torch.py GraphedAutomaton), and
    "auto" then picks it; with automaton="native" (one kernel per call) it changes nothing."""

    def __init__(self, num_envs: int = 1, bank: TaskBank | None = None, tasks: list[str] | None = None,
                 max_len: int = 48, reward: SynthesisReward | None = None, batch: bool = False, n_tests: int = 16,
                 seed: int = 0, backend: str = "cpu", device=None, render_mode: str | None = None,
                 automaton: str = "auto", cuda_graph: bool = False, max_episode_steps: int | None = None):
        if cuda_graph and torch.device("cpu" if device is None else device).type != "cuda":
            raise ValueError("cuda_graph=True needs a CUDA device (device='cuda')")
        core = SynthesisCore(_bank(bank, tasks, n_tests, seed, backend), max_len, reward, automaton, batch, cuda_graph)
        super().__init__(core, num_envs, core.observation_space(), core.action_space(), seed, device, render_mode)


def make_batch_env(**kw) -> SynthesisEnv:
    return SynthesisEnv(batch=True, **kw)


def make_batch_vector_env(num_envs: int = 1, **kw) -> SynthesisVectorEnv:
    return SynthesisVectorEnv(num_envs=num_envs, batch=True, **kw)
