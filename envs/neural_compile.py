"""`vramgym/NeuralCompile-v0`: the observation is a source program, the actions write its
bytecode, and the reward is the paper's (envs/reward.py: +1 structurally valid, +10 when every
test passes, plus an efficiency term against the traditional compiler's executed steps).

Actions are bytes: every instruction word is four consecutive actions, least significant byte
first (so the opcode comes first, then the 24-bit argument); action 256 (END) ends the program.
An action out of 0..256 (a non-integral float too: envs/vector.py as_actions) is invalid: it ends
the episode with reward 0 and `info["invalid_action"]`.
`bytecode_actions(code)` turns the traditional compiler's bytecode into that action sequence,
which earns 11 (valid, all tests pass, same steps).

Source programs are the bank's tasks' reference solutions: the observation holds their compiler
token arrays ((S, 4) int32 rows of kind, value, line, col; zero rows after the end; S =
`source_len`, 256 by default: a longer reference is refused when the env is made), the task's
signature kinds and shown examples, and the bytes written so far. The image's function 0 is the
one its tests call, so a reference whose entry is not its first function is shown with the
entry's definition moved to the top (`entry_first`): compiling the shown source earns 11.

State is torch tensors on one device, as in envs/synthesis.py; `device=None` vector envs return
numpy. Finished images are validated and run on their tasks' tests where the state lives:
vm.cuda.execute_tasks on a CUDA device (no host sync), vm.evaluate.execute_tasks_cpu on the CPU.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch
from gymnasium import spaces

from vramgym.compiler import compile_source, tokenize
from vramgym.vm import opcodes as oc
from vramgym.vm.evaluate import execute_tasks_cpu
from vramgym.vm.values import check_int

from .bank import TaskBank, bank_for
from .reward import NeuralCompileReward, check_callable, check_output
from .vector import CoreEnv, TensorVectorEnv, check_max_episode_steps, none_on_cpu

END = 256
NUM_ACTIONS = 257
INT32 = np.iinfo(np.int32)


def bytecode_actions(code) -> list[int]:
    """The action sequence that writes `code` (uint32 words), END included."""
    b = np.asarray(code, dtype="<u4").view(np.uint8)
    return [int(x) for x in b] + [END]


DEF_TOKEN = next(i for i, (name, _) in enumerate(oc.TOKENS) if name == "DEF")


def entry_first(source: str, entry: str) -> str:
    """`source` with the definition of `entry` moved before the others (functions may call each
    other in any order, so the program means the same), unchanged when it is first already."""
    names = [f.name for f in compile_source(source).functions]
    k = names.index(entry)
    if k == 0:
        return source
    lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", source)   # the compiler's line breaks only
    toks = tokenize(source)
    starts = [int(line) - 1 for kind, _, line, _ in toks if kind == DEF_TOKEN] + [len(lines)]
    chunks = ["".join(lines[a:b]) for a, b in zip(starts, starts[1:])]
    chunks = [c if c.endswith(("\n", "\r")) else c + "\n" for c in chunks]
    out = "".join(lines[:starts[0]]) + chunks[k] + "".join(c for i, c in enumerate(chunks) if i != k)
    assert compile_source(out).functions[0].name == entry
    return out


@dataclass
class NeuralCompileState:
    """Batched state of N neural-compile envs (torch tensors on one device)."""

    task: torch.Tensor    # (N,) int64: task index in the bank (its reference is the source)
    code: torch.Tensor    # (N, 4 * max_words) int64: the bytes written so far
    length: torch.Tensor  # (N,) int64: bytes written


class NeuralCompileCore:
    """The pure part shared by the single and vector envs."""

    cpu_shortcuts = True   # the shell's CPU host checks (envs/synthesis.py SynthesisCore.cpu_shortcuts)

    def __init__(self, bank: TaskBank, max_words: int = 256, source_len: int = 256,
                 reward: NeuralCompileReward | None = None):
        max_words = check_int(max_words, "max_words", 1)
        reward = NeuralCompileReward() if reward is None else reward
        check_callable(reward, 4, "NeuralCompileReward")   # here, not at the first scored step
        source_len = check_int(source_len, "source_len", 1, oc.LIMITS["MAX_TOKENS"])
        self.bank, self.max_words, self.source_len = bank, max_words, source_len
        missing = [t.name for t in bank.tasks if t.reference is None]
        if missing:  # its observation is the reference's source
            raise ValueError(f"NeuralCompile-v0 compiles reference programs; task(s) {', '.join(missing)} have "
                             "only input/output cases (Task.from_examples): give tasks with a reference")
        self.n_tasks = len(bank)
        self.reward = reward
        T = len(bank)
        self.sources = np.zeros((T, source_len, 4), dtype=np.int32)
        self.source_lengths = np.zeros(T, dtype=np.int64)
        self.ref_code = []
        self.shown = []   # the source each task's observation holds (entry first)
        for i, task in enumerate(bank.tasks):
            shown = entry_first(task.reference, task.signature.entry)
            toks = tokenize(shown)
            if len(toks) > source_len:
                raise ValueError(f"task {task.name}: {len(toks)} source tokens, more than source_len={source_len}")
            self.sources[i, : len(toks)] = toks
            self.source_lengths[i] = len(toks)
            self.shown.append(shown)
            code = compile_source(shown).code
            if len(code) > max_words:
                raise ValueError(f"task {task.name}: its bytecode has {len(code)} words, more than max_words")
            self.ref_code.append(code)
        # Executed steps of the traditional compiler's bytecode (mean over the tests), the efficiency baseline.
        ref = np.zeros((T, max_words), np.uint32)
        for i, c in enumerate(self.ref_code):
            ref[i, : len(c)] = c
        passed, steps, valid = execute_tasks_cpu(ref, [len(c) for c in self.ref_code], np.arange(T), None,
                                                 bank.inputs, bank.expected, bank.n_tests, bank.ret_kind,
                                                 config=bank.config, task_fuel=bank.task_fuel)
        assert valid.all(), "the compiler's bytecode of every reference validates"
        short = [bank.tasks[i].name for i in np.flatnonzero(np.asarray(passed) < bank.n_tests)]
        if short:   # the efficiency baseline would be a run cut short by the fuel or another limit
            raise ValueError(f"the reference of {', '.join(short)} fails its tests under the bank's VM limits "
                             f"({bank.config}, fuel_scale={bank.fuel_scale}): raise fuel")
        self.ref_steps = steps / bank.n_tests
        self._tensors: dict = {}

    def tensors(self, device) -> dict:
        key = str(device)
        if key not in self._tensors:
            self._tensors[key] = {"sources": torch.from_numpy(self.sources).to(device),
                                  "source_lengths": torch.from_numpy(self.source_lengths).to(device),
                                  "ref_steps": torch.from_numpy(self.ref_steps).to(device)}
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

    def empty(self, n: int, device) -> NeuralCompileState:
        z = lambda *shape: torch.zeros(shape, dtype=torch.int64, device=device)  # noqa: E731
        return NeuralCompileState(z(n), z(n, 4 * self.max_words), z(n))

    def reset_rows(self, state: NeuralCompileState, rows: torch.Tensor, tasks: torch.Tensor) -> None:
        state.task.copy_(torch.where(rows, tasks, state.task))
        state.code.masked_fill_(rows[:, None], 0)
        state.length.masked_fill_(rows, 0)

    def observe(self, state: NeuralCompileState, copy: bool = True) -> dict:
        """The observation dict; copy=False: code, length and task are the state's own tensors
        (the next step overwrites them)."""
        t = state.task
        tb, src = self.bank.tensors(t.device), self.tensors(t.device)
        keep = (lambda x: x.clone()) if copy else (lambda x: x)  # noqa: E731
        return {"source": src["sources"][t], "source_length": src["source_lengths"][t], "task": keep(t),
                "kinds": tb["kinds"][t], "ret_kind": tb["ret_kind"][t], "examples": tb["examples"][t],
                "outputs": tb["outputs"][t], "code": keep(state.code), "length": keep(state.length)}

    def words(self, state: NeuralCompileState, i: int) -> np.ndarray:
        """Env i's bytecode: whole words only (a trailing partial word is left out)."""
        nbytes = int(state.length[i])
        b = state.code[i, : nbytes - nbytes % 4].cpu().numpy().astype(np.uint8)
        return b.view("<u4").astype(np.uint32) if len(b) else np.zeros(0, np.uint32)

    def render(self, state: NeuralCompileState, i: int = 0) -> str:
        from vramgym.vm.program import disassemble
        return f"task {self.bank.tasks[int(state.task[i])].name}\n" + disassemble(self.words(state, i)) + "\n"

    def score(self, state: NeuralCompileState, done: torch.Tensor) -> torch.Tensor:
        """Rewards of the finished images where `done` (others 0), on the state's device, with no
        host sync on a GPU."""
        n, W = len(done), self.max_words
        if none_on_cpu(self, done):   # nothing ends here
            return torch.zeros(n, dtype=torch.float32)
        b = state.code.view(n, W, 4)
        w = b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16) | (b[..., 3] << 24)   # little-endian words
        w = torch.where(w >= 2**31, w - 2**32, w).to(torch.int32)                 # the same bits as int32
        length = torch.where(state.length % 4 == 0, state.length // 4, -1)        # a partial word: invalid
        bank, m = self.bank, self.bank.n_tests
        if done.device.type == "cuda":
            from vramgym.vm import cuda
            t = bank.tensors(done.device)
            passed, steps, valid = cuda.execute_tasks(w, length, state.task, done, t["inputs"], t["expected"], m,
                                                      t["ret_kind"], config=bank.config, task_fuel=t["task_fuel"])
        else:
            passed, steps, valid = execute_tasks_cpu(w, length, state.task, done, bank.inputs, bank.expected, m,
                                                     bank.ret_kind, config=bank.config, task_fuel=bank.task_fuel)
        passed, steps, valid = passed.to(done.device), steps.to(done.device), valid.to(done.device)
        ref = self.tensors(done.device)["ref_steps"][state.task]
        r = check_output(self.reward(valid, valid & (passed == m), steps.double() / m, ref), done, self.reward)
        return torch.where(done, r.float(), 0.0)   # float32, as the steps that skip scoring give (and Synthesis-v0)

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
                 reward: NeuralCompileReward | None = None, n_tests: int | None = None, seed: int = 0,
                 backend: str | None = None, render_mode: str | None = None, fuel: int | None = None,
                 source_len: int = 256, fuel_scale: float | None = None):
        bank = bank_for(bank, tasks, n_tests, seed, backend, fuel, fuel_scale=fuel_scale)
        self.core = NeuralCompileCore(bank, max_words, source_len, reward=reward)
        self.observation_space = self.core.observation_space()
        self.action_space = spaces.Discrete(NUM_ACTIONS)
        super().__init__(render_mode)


class NeuralCompileVectorEnv(TensorVectorEnv):
    def __init__(self, num_envs: int = 1, bank: TaskBank | None = None, tasks: list[str] | None = None,
                 max_words: int = 256, reward: NeuralCompileReward | None = None, n_tests: int | None = None,
                 seed: int = 0, backend: str | None = None, device=None, render_mode: str | None = None,
                 max_episode_steps: int | None = None, copy: bool = True, fuel: int | None = None,
                 cuda_graph: bool | str = False, source_len: int = 256, fuel_scale: float | None = None):
        check_max_episode_steps(max_episode_steps, "max_words")
        bank = bank_for(bank, tasks, n_tests, seed, backend, fuel, device, fuel_scale)
        core = NeuralCompileCore(bank, max_words, source_len, reward=reward)
        super().__init__(core, num_envs, core.observation_space(), spaces.Discrete(NUM_ACTIONS), seed, device,
                         render_mode, copy, cuda_graph)
