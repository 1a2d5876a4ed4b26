"""`vramgym/NeuralCompile-v0`: the observation is a source program, the actions write its
bytecode, and the reward is the paper's (envs/reward.py: +1 structurally valid, +10 when every
test passes, plus an efficiency term against the traditional compiler's executed steps).

Actions are bytes: every instruction word is four consecutive actions, least significant byte
first (so the opcode comes first, then the 24-bit argument); action 256 (END) ends the program.
`bytecode_actions(code)` turns the traditional compiler's bytecode into that action sequence,
which earns 11 (valid, all tests pass, same steps).

Source programs are the bank's tasks' reference solutions: the observation holds their compiler
token arrays ((S, 4) int32 rows of kind, value, line, col; zero rows after the end), the task's
signature kinds and shown examples, and the bytes written so far.

State is torch tensors on one device, as in envs/synthesis.py; `device=None` vector envs return
numpy. Scoring a finished image runs on the CPU backend: on a CUDA device the finished rows are
copied to the host for it (the one host sync of this env's step; the synthesis envs have none).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from gymnasium import spaces

from vramgym.compiler import tokenize
from vramgym.vm import ProgramBatch, run_batch
from vramgym.vm import cpu

from .bank import TaskBank
from .reward import NeuralCompileReward
from .vector import CoreEnv, TensorVectorEnv

END = 256
NUM_ACTIONS = 257
INT32 = np.iinfo(np.int32)


def bytecode_actions(code) -> list[int]:
    """The action sequence that writes `code` (uint32 words), END included."""
    b = np.asarray(code, dtype="<u4").view(np.uint8)
    return [int(x) for x in b] + [END]


@dataclass
class NeuralCompileState:
    """Batched state of N neural-compile envs (torch tensors on one device)."""

    task: torch.Tensor    # (N,) int64: task index in the bank (its reference is the source)
    code: torch.Tensor    # (N, 4 * max_words) int64: the bytes written so far
    length: torch.Tensor  # (N,) int64: bytes written


class NeuralCompileCore:
    """The pure part shared by the single and vector envs."""

    def __init__(self, bank: TaskBank, max_words: int = 256, source_len: int = 256,
                 reward: NeuralCompileReward | None = None):
        self.bank, self.max_words, self.source_len = bank, max_words, source_len
        self.n_tasks = len(bank)
        self.reward = reward or NeuralCompileReward()
        T = len(bank)
        self.sources = np.zeros((T, source_len, 4), dtype=np.int32)
        self.source_lengths = np.zeros(T, dtype=np.int64)
        self.ref_code = []
        for i, task in enumerate(bank.tasks):
            toks = tokenize(task.reference)
            if len(toks) > source_len:
                raise ValueError(f"task {task.name}: {len(toks)} source tokens, more than source_len={source_len}")
            self.sources[i, : len(toks)] = toks
            self.source_lengths[i] = len(toks)
            code = task.program.code
            if len(code) > max_words:
                raise ValueError(f"task {task.name}: its bytecode has {len(code)} words, more than max_words")
            self.ref_code.append(code)
        # Executed steps of the traditional compiler's bytecode, the efficiency baseline.
        self.ref_steps = self._run([c for c in self.ref_code], np.arange(T))[1]
        self._tensors: dict = {}

    def tensors(self, device) -> dict:
        key = str(device)
        if key not in self._tensors:
            self._tensors[key] = {"sources": torch.from_numpy(self.sources).to(device),
                                  "source_lengths": torch.from_numpy(self.source_lengths).to(device)}
        return self._tensors[key]

    def observation_space(self) -> spaces.Dict:
        T, E, W = self.bank.examples.shape
        L = 4 * self.max_words
        return spaces.Dict({
            "source": spaces.Box(INT32.min, INT32.max, (self.source_len, 4), np.int32),
            "source_length": spaces.Box(0, self.source_len, (), np.int64),
            "task": spaces.Box(0, T - 1, (), np.int64),
            "kinds": spaces.Box(-1, 2, (4,), np.int32),
            "ret_kind": spaces.Box(0, 2, (), np.int32),
            "examples": spaces.Box(INT32.min, INT32.max, (E, W), np.int32),
            "outputs": spaces.Box(INT32.min, INT32.max, (E, self.bank.outputs.shape[2]), np.int32),
            "code": spaces.Box(0, 255, (L,), np.int64),
            "length": spaces.Box(0, L, (), np.int64),
        })

    def _run(self, codes: list[np.ndarray], task_ids: np.ndarray):
        """(valid (N,), mean steps (N,), all tests pass (N,)) of bytecode images on their tasks."""
        n, m = len(codes), self.bank.n_tests
        lengths = np.array([len(c) for c in codes], dtype=np.int64)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        words = np.concatenate(codes).astype(np.uint32) if n else np.zeros(0, np.uint32)
        checks = [cpu.validate(c) for c in codes]  # (first bad word or -1, pc of function 0 or -1)
        valid = np.array([bad == -1 and pc >= 0 for bad, pc in checks], dtype=bool)
        programs = ProgramBatch.build(words, offsets, 0, self.bank.ret_kind[task_ids])
        run_prog = np.repeat(np.arange(n, dtype=np.int32), m)
        run_in = (task_ids[:, None] * m + np.arange(m)[None, :]).ravel().astype(np.int32)
        res = run_batch(programs, self.bank.inputs, (run_prog, run_in), expected=self.bank.expected,
                        config=self.bank.config, out_cap=0, backend=self.bank.backend)
        passed = res.passed.reshape(n, m).all(axis=1) & valid
        return valid, res.steps.reshape(n, m).mean(axis=1), passed

    def empty(self, n: int, device) -> NeuralCompileState:
        z = lambda *shape: torch.zeros(shape, dtype=torch.int64, device=device)  # noqa: E731
        return NeuralCompileState(z(n), z(n, 4 * self.max_words), z(n))

    def reset_rows(self, state: NeuralCompileState, rows: torch.Tensor, tasks: torch.Tensor) -> None:
        state.task.copy_(torch.where(rows, tasks, state.task))
        state.code.masked_fill_(rows[:, None], 0)
        state.length.masked_fill_(rows, 0)

    def observe(self, state: NeuralCompileState) -> dict:
        t = state.task
        tb, src = self.bank.tensors(t.device), self.tensors(t.device)
        return {"source": src["sources"][t], "source_length": src["source_lengths"][t], "task": t.clone(),
                "kinds": tb["kinds"][t], "ret_kind": tb["ret_kind"][t], "examples": tb["examples"][t],
                "outputs": tb["outputs"][t], "code": state.code.clone(), "length": state.length.clone()}

    def words(self, state: NeuralCompileState, i: int) -> np.ndarray:
        """Env i's bytecode: whole words only (a trailing partial word is left out)."""
        nbytes = int(state.length[i])
        b = state.code[i, : nbytes - nbytes % 4].cpu().numpy().astype(np.uint8)
        return b.view("<u4").astype(np.uint32) if len(b) else np.zeros(0, np.uint32)

    def render(self, state: NeuralCompileState, i: int = 0) -> str:
        from vramgym.vm.program import disassemble
        return f"task {self.bank.tasks[int(state.task[i])].name}\n" + disassemble(self.words(state, i)) + "\n"

    def score(self, state: NeuralCompileState, done: torch.Tensor) -> torch.Tensor:
        """Rewards of the finished images where `done` (others 0), on the state's device."""
        rows = np.flatnonzero(done.cpu().numpy())
        out = np.zeros(len(done), np.float32)
        if len(rows):
            task_ids = state.task.cpu().numpy()[rows]
            valid, steps, passed = self._run([self.words(state, i) for i in rows], task_ids)
            valid &= (state.length.cpu().numpy()[rows] % 4) == 0  # a partial last word is not a valid image
            out[rows] = self.reward(valid, passed & valid, steps, self.ref_steps[task_ids])
        return torch.from_numpy(out).to(done.device)

    def step(self, state: NeuralCompileState, actions: torch.Tensor, live: torch.Tensor):
        """(reward, terminated, truncated, invalid) per env where `live`; an out-of-range action
        is invalid and ends the episode with reward 0 (no valid bytecode was written)."""
        invalid = live & ((actions < 0) | (actions >= NUM_ACTIONS))
        byte = live & ~invalid & (actions != END)
        col = state.length.clamp(max=4 * self.max_words - 1)[:, None]
        state.code.scatter_(1, col, torch.where(byte, actions, state.code.gather(1, col)[:, 0])[:, None])
        state.length += byte.long()
        finished = live & ~invalid & (actions == END)
        truncated = byte & (state.length >= 4 * self.max_words)
        reward = self.score(state, finished | truncated)
        return reward, finished | invalid, truncated, invalid


class NeuralCompileEnv(CoreEnv):
    def __init__(self, bank: TaskBank | None = None, tasks: list[str] | None = None, max_words: int = 256,
                 reward: NeuralCompileReward | None = None, n_tests: int = 16, seed: int = 0, backend: str = "cpu",
                 render_mode: str | None = None):
        bank = bank or TaskBank.from_names(tasks, n_tests=n_tests, seed=seed, backend=backend)
        self.core = NeuralCompileCore(bank, max_words, reward=reward)
        self.observation_space = self.core.observation_space()
        self.action_space = spaces.Discrete(NUM_ACTIONS)
        super().__init__(render_mode)


class NeuralCompileVectorEnv(TensorVectorEnv):
    def __init__(self, num_envs: int = 1, bank: TaskBank | None = None, tasks: list[str] | None = None,
                 max_words: int = 256, reward: NeuralCompileReward | None = None, n_tests: int = 16, seed: int = 0,
                 backend: str = "cpu", device=None, render_mode: str | None = None,
                 max_episode_steps: int | None = None):
        bank = bank or TaskBank.from_names(tasks, n_tests=n_tests, seed=seed, backend=backend)
        core = NeuralCompileCore(bank, max_words, reward=reward)
        super().__init__(core, num_envs, core.observation_space(), spaces.Discrete(NUM_ACTIONS), seed, device,
                         render_mode)
