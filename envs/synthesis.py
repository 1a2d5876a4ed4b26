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
the CPU and torch elsewhere. `cuda_graph=True` (CUDA only) replays each vector-env step, whatever
the automaton, scoring included, from one CUDA graph captured at reset (envs/step_graph.py).

Bad actions: an action out of range or not allowed by the mask ends the episode with the
reward's compile penalty and `info["invalid_action"] = True`; the state is otherwise unchanged.
A float action counts as its integer only when it is one (4.0 is 4): 4.9, NaN and inf are out
of range (envs/vector.py as_actions), never truncated. SynthesisBatch-v0 takes exactly one
body per env ((N, L) arrays; (L,) in the single env) and never flags an action: a body ends at
its first END or out-of-range token (floats as above), and is scored as written up to there.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch
from gymnasium import spaces

from vramgym.vm.values import check_int

from . import vocab as V
from .bank import TaskBank, bank_for, code_cap_for
from .grammar import STATE_SIZE, BatchedAutomaton, Grammar
from .reward import SynthesisReward, check_callable, check_output, check_real
from .vector import CoreEnv, HashedTasks, TensorVectorEnv, check_max_episode_steps, none_on_cpu

INT32 = np.iinfo(np.int32)


@dataclass
class SynthesisState:
    """Batched state of N synthesis envs (torch tensors on one device)."""

    task: torch.Tensor     # (N,) int64: task index in the bank
    tokens: torch.Tensor   # (N, L) int64: the body's actions so far, END-padded
    length: torch.Tensor   # (N,) int64: actions taken
    grammar: torch.Tensor  # (N, STATE_SIZE) int32: mask automaton rows of each env's task (unused with batch=True)
    task_obs: torch.Tensor | None = None   # observe(copy=False)'s buffer of the per-task fields
    task_views: list | None = None         # observe(copy=False)'s field views of task_obs (made once per buffer)
    init_rows: torch.Tensor | None = None  # scratch: the automaton's initial rows of each env's task


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
                 automaton: str = "auto", batch: bool = False):
        if automaton not in ("auto", "native", "numpy", "torch"):
            raise ValueError(f"automaton must be 'auto', 'native', 'numpy' or 'torch', got {automaton!r}")
        max_len = check_int(max_len, "max_len")   # (the grammar says how short it may be)
        reward = SynthesisReward() if reward is None else reward
        # checked here, not at the first scored step (or the first invalid action: compile_penalty)
        check_callable(reward, 1, "SynthesisReward")
        if not batch and not hasattr(reward, "compile_penalty"):
            raise TypeError(f"reward must be callable on the scores{'' if batch else ' with a compile_penalty'} "
                            f"(like SynthesisReward), got {reward!r:.80}")
        # the token env's penalty for an invalid action, checked once (a float, not a tensor op)
        self.compile_penalty = None if batch else check_real(reward.compile_penalty, "reward.compile_penalty")
        self.bank, self.max_len, self.batch = bank, max_len, batch
        self.reward = reward
        self.grammars = [Grammar(sig, max_len=max_len) for sig in bank.signatures]
        self.n_tasks = len(bank)
        self._automaton_kind = automaton
        self._automata: dict = {}
        self._dev_tables: dict = {}

    def __getstate__(self):
        # The per-device tables are derived data whose layout may change between versions: a pickle
        # keeps only their devices, and loading makes them again there (so that a step after loading
        # still builds nothing: on a GPU that would sync)
        d = dict(vars(self))
        d["_dev_tables"] = {}
        d["_table_devices"] = list(self._dev_tables)
        return d

    def __setstate__(self, d):
        devices = d.pop("_table_devices", None) or list(d.get("_dev_tables", {}))   # (an older pickle's keys)
        d["_dev_tables"] = {}
        vars(self).update(d)
        for dev in devices:
            self._tables(torch.device(dev))

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
                kind = "native" if grammar_cuda.available() else "torch"
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
                from .grammar_torch import TorchAutomaton
                self._automata[key] = TorchAutomaton(self.grammars, device)
        return self._automata[key]

    def prepare(self, state: SynthesisState) -> None:
        """Before the first step (the shell's reset): put the scorer's constants on a GPU (made
        lazily in the first step, their copies would sync)."""
        dev = state.grammar.device
        self.automaton(dev)
        if dev.type == "cuda":
            self.bank.tensors(dev)
            self.bank.slot_tables(dev, self.max_len)

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

    # ---- per-device tables (made once per device) --------------------------------------------------
    def _tables(self, device: torch.device) -> dict:
        """The tables a step reads on `device`: the automaton's initial row of every task, the
        per-task observation fields packed in one int32 table (one gather per step instead of
        four; the fields are views of it), token positions, and 0-dim constants (a Python
        scalar in torch.where costs a launch of its own on a GPU)."""
        key = str(device)
        if key not in self._dev_tables:
            tb = self.bank.tensors(device)
            T, E, W = tb["examples"].shape
            parts = [tb["kinds"], tb["ret_kind"][:, None], tb["examples"].reshape(T, -1), tb["outputs"].reshape(T, -1)]
            cuts = np.cumsum([0] + [p.shape[1] for p in parts])
            init = None
            if not self.batch:
                gid = torch.arange(self.n_tasks, device=device)
                init = torch.as_tensor(self.automaton(device).initial(gid)).to(device=device, dtype=torch.int32)
            self._dev_tables[key] = {
                "task_obs": torch.cat(parts, dim=1).contiguous(), "widths": [int(w) for w in np.diff(cuts)],
                "shapes": [(V.NUM_PARAMS,), (), (E, W), (E, tb["outputs"].shape[2])], "init": init,
                "pos": torch.arange(self.max_len, device=device)[None, :],
                "END": torch.tensor(V.END, device=device), "ZERO": torch.tensor(0, device=device)}
        return self._dev_tables[key]

    def reset_rows(self, state: SynthesisState, rows: torch.Tensor, tasks: torch.Tensor) -> None:
        """Start new episodes in the envs where `rows` is True (in place), on `tasks`."""
        t = self._tables(state.task.device)
        torch.where(rows, tasks, state.task, out=state.task)
        state.tokens.masked_fill_(rows[:, None], V.END)
        state.length.masked_fill_(rows, 0)
        if not self.batch:   # SynthesisBatch-v0 never reads the automaton rows
            torch.where(rows[:, None], self._init_rows(state, t), state.grammar, out=state.grammar)

    @staticmethod
    def _init_rows(state: SynthesisState, t: dict) -> torch.Tensor:
        """The initial automaton row of each env's task, gathered into a scratch buffer that every
        step reuses (on the CPU, a fresh 45 MB at 65,536 envs costs more in page faults than the
        gather itself; on a GPU the caching allocator would hide that, and it is one op either way)."""
        if state.init_rows is None or state.init_rows.shape != state.grammar.shape:
            state.init_rows = torch.empty_like(state.grammar)
        return torch.index_select(t["init"], 0, state.task, out=state.init_rows)

    # On the CPU a step may take shortcuts that a GPU step cannot: host checks that skip work (no
    # scoring where no program ends; the shell's autoreset where no env restarts) and numpy around
    # the native calls. False: the device path on the CPU too (the tests compare the two;
    # bench_envs counts the device path's ops, a GPU step's launches).
    cpu_shortcuts = True
    # With the native automaton (CPU library or CUDA kernels), the token env's step and autoreset
    # (without the scoring) and its mask are one native call each (NativeAutomaton.env_step and
    # env_mask; on a GPU one kernel each, where the torch ops below are ~25 launches). False: the
    # torch ops, which the tests compare them with (the other automata always take those).
    native_env_step = True

    def _native_env(self, aut, state: SynthesisState) -> str | None:
        """How the token env's step and mask run: "host" (the native CPU calls with numpy around
        them: the CPU's shortcuts), "device" (the native calls, torch around them: a GPU's step,
        or a CPU's without shortcuts) or None (the torch ops: another automaton, or a state laid
        out otherwise than `empty` makes it, e.g. from row slices)."""
        g, i64 = state.grammar, torch.int64   # (the cheap reads: this runs twice a step)
        if not (self.native_env_step and hasattr(aut, "env_step") and g.device == aut.device
                and g.dtype is torch.int32 and g.is_contiguous() and state.task.dtype is i64
                and state.task.is_contiguous() and state.tokens.dtype is i64 and state.tokens.is_contiguous()
                and state.length.dtype is i64 and state.length.is_contiguous()):
            return None
        return "host" if self.cpu_shortcuts and g.is_cpu else "device"

    def _mask_i8(self, state: SynthesisState) -> torch.Tensor:
        """(N, VOCAB_SIZE) int8 masks, END allowed in finished rows. Every automaton returns a
        fresh mask, so it is viewed as int8 (bool and int8 share their size) and fixed in place."""
        aut = self.automaton(state.grammar.device)
        if self._native_env(aut, state):   # one native call (a kernel on a GPU): the mask with END fixed in
            return aut.env_mask(state.grammar, state.task)
        m = aut.mask(state.grammar, state.task)
        # A finished episode allows END alone: its next action is ignored (autoreset), and a
        # masked softmax over an all-false mask would be NaN.
        none = torch.logical_not(m.any(dim=1))
        m8 = m.view(torch.int8)
        m8.select(1, V.END).bitwise_or_(none)
        return m8

    def masks(self, state: SynthesisState) -> torch.Tensor:
        """(N, VOCAB_SIZE) bool."""
        return self._mask_i8(state).view(torch.bool)

    def action_space(self) -> spaces.Space:
        if self.batch:
            return spaces.Box(0, V.VOCAB_SIZE - 1, (self.max_len,), np.int64)
        return spaces.Discrete(V.VOCAB_SIZE)

    def observe(self, state: SynthesisState, copy: bool = True) -> dict:
        """The observation dict. copy=False: tokens, length and task are the state's own tensors
        (the next step overwrites them), and the per-task fields are gathered into a buffer the
        next observe reuses."""
        t = state.task
        tb = self._tables(t.device)
        n = t.shape[0]
        if copy:
            fields = self._fields(tb["task_obs"].index_select(0, t), tb)
        else:
            if state.task_obs is None or state.task_obs.shape[0] != n:
                state.task_obs = torch.empty((n, tb["task_obs"].shape[1]), dtype=torch.int32, device=t.device)
            torch.index_select(tb["task_obs"], 0, t, out=state.task_obs)
            # the views of this buffer, made again for another one (a pickle or a copy makes views
            # of their own storage: the identity check fails there too)
            if state.task_views is None or state.task_views[0]._base is not state.task_obs:
                state.task_views = self._fields(state.task_obs, tb)
            # fresh views of them (a third of splitting again): a caller's in-place view op on an
            # observation (transpose_, unsqueeze_) must not reshape the next ones
            fields = [v.view(v.shape) for v in state.task_views]
        keep = (lambda x: x.clone()) if copy else (lambda x: x)  # noqa: E731
        obs = {"tokens": keep(state.tokens), "length": keep(state.length), "task": keep(t), "kinds": fields[0],
               "ret_kind": fields[1], "examples": fields[2], "outputs": fields[3]}
        if not self.batch:
            obs["action_mask"] = self._mask_i8(state)
        return obs

    @staticmethod
    def _fields(per_task: torch.Tensor, tb: dict) -> list:
        """The per-task fields of (n, W) rows gathered from tb["task_obs"], as views (a field's
        columns are contiguous within a row: each view splits them)."""
        n = per_task.shape[0]
        return [f.view((n,) + shape) for f, shape in zip(per_task.split_with_sizes(tb["widths"], 1), tb["shapes"])]

    def _score(self, tokens, length, body_len, task, done) -> torch.Tensor:
        if none_on_cpu(self, done):   # no program ends here (most token steps): the caller zeroes the rows
            return torch.zeros(len(done), dtype=torch.float32)
        ok, passed, steps = self.bank.evaluate(tokens, length, task, done)
        return check_output(self.reward(self.bank.scores(ok, passed, steps, body_len)), passed, self.reward)

    def step(self, state: SynthesisState, actions: torch.Tensor, live: torch.Tensor):
        """One step where `live`: a token per env, or with batch=True a whole body per env.
        Returns (reward, terminated, truncated, invalid), (N,) each; rows not live are left as
        they are and get zeros."""
        return self.step_reset(state, actions, ~live, None)

    def step_tokens(self, state: SynthesisState, actions: torch.Tensor, live: torch.Tensor):
        """`step` of the token env (one action per env) where `live`."""
        return self._step_tokens(state, actions, ~live, None)

    def step_programs(self, state: SynthesisState, bodies: torch.Tensor, live: torch.Tensor):
        """`step` of the batch env (one whole body per env) where `live`."""
        return self._step_programs(state, bodies, ~live, None)

    def step_reset(self, state: SynthesisState, actions: torch.Tensor, restart: torch.Tensor, tasks):
        """The vector env's step with its autoreset (NEXT_STEP): one step in the rows not in
        `restart`, a new episode on `tasks` in the rows in `restart` (their outputs all zero), in
        place. tasks=None: the restart rows are left as they are (the plain `step`)."""
        return (self._step_programs if self.batch else self._step_tokens)(state, actions, restart, tasks)

    # Written for the GPU, where each torch op is a kernel launch: few full-width ops, fields
    # updated in place (out=), no data-dependent shape, nothing read back to the host. Bool
    # identities used: a & ~b == a > b (bools compare as 0 < 1); `allowed ^ finished` is
    # allowed & ~finished as finished implies allowed.
    def _step_tokens(self, state: SynthesisState, actions: torch.Tensor, restart: torch.Tensor, tasks):
        """One token per env: the automaton steps every row (an out-of-range or masked action is
        `invalid` there, its row unchanged), the rows not restarting take their step."""
        L, t = self.max_len, self._tables(state.task.device)
        aut = self.automaton(state.grammar.device)
        native = self._native_env(aut, state)
        if native:   # the same step in one native call (tested equal; one kernel on a GPU), tasks hashed there
            i64 = lambda x: x.to(torch.int64).contiguous()  # noqa: E731  (a caller's int32 actions or tasks)
            flags, body_len = aut.env_step(
                state.task, state.tokens, state.length, state.grammar, i64(actions),
                restart.to(torch.bool).contiguous(),
                tasks if tasks is None or isinstance(tasks, HashedTasks) else i64(tasks), L)
        if native == "device":   # torch around it (the scoring, and nothing read on the host)
            bad, term, truncated, done = torch.as_tensor(flags).unbind(0)
            r = self._score(state.tokens, state.length, torch.as_tensor(body_len), state.task, done).float()
            return r.masked_fill(~done, 0.0).masked_fill_(bad, self.compile_penalty), term, truncated, bad
        if native:   # numpy around it (the CPU's shortcuts)
            bad, term, truncated, done = flags
            r = np.zeros(len(done), dtype=np.float32)
            if done.any():   # (else no scoring: most token steps)
                s = self._score(state.tokens, state.length, torch.from_numpy(body_len), state.task,
                                torch.from_numpy(done))
                # (torch.where: a fresh tensor, whatever the reward's own is: with grad, a view with
                # the negative bit set)
                r = torch.where(torch.from_numpy(done), s.detach().float(), 0.0).numpy()
            r[bad] = self.compile_penalty   # (float32, as masked_fill_ rounds it)
            return torch.from_numpy(r), torch.from_numpy(term), torch.from_numpy(truncated), torch.from_numpy(bad)
        if isinstance(tasks, HashedTasks):
            tasks = tasks.tensor()
        new, invalid = aut.step(state.grammar, actions, state.task)
        bad = torch.gt(invalid, restart)                       # invalid & live
        allowed = torch.logical_not(invalid | restart)
        finished = allowed & (actions == V.END)
        write = allowed & (state.length < L)
        put = (t["pos"] == state.length[:, None]) & write[:, None]
        torch.where(put, actions[:, None], state.tokens, out=state.tokens)
        state.length += write
        truncated = (allowed ^ finished) & (state.length >= L)
        done = finished | truncated
        body_len = torch.add(state.length, finished, alpha=-1)
        r = self._score(state.tokens, state.length, body_len, state.task, done).float()   # float32 (free when it is)
        reward = r.masked_fill(~done, 0.0).masked_fill_(bad, self.compile_penalty)
        if tasks is None:   # the automaton may have moved the restart rows: keep them
            torch.where(restart[:, None], state.grammar, new, out=state.grammar)
        else:
            torch.where(restart, tasks, state.task, out=state.task)
            state.tokens.masked_fill_(restart[:, None], V.END)
            state.length.masked_fill_(restart, 0)
            torch.where(restart[:, None], self._init_rows(state, t), new, out=state.grammar)
        return reward, finished | bad, truncated, bad

    def _step_programs(self, state: SynthesisState, bodies: torch.Tensor, restart: torch.Tensor, tasks):
        """Score one whole body per env ((N, L') action ids; beyond L ignored, an out-of-range
        action ends the body) in the rows not restarting."""
        L, n, t = self.max_len, len(restart), self._tables(state.task.device)
        if isinstance(tasks, HashedTasks):
            tasks = tasks.tensor()
        bodies = bodies.reshape(n, -1)[:, :L]
        bodies = bodies.masked_fill((bodies < 0) | (bodies >= V.VOCAB_SIZE), V.END)
        if bodies.shape[1] < L:
            tokens = torch.full_like(state.tokens, V.END)
            tokens[:, : bodies.shape[1]] = bodies
        else:
            tokens = bodies
        is_end = tokens == V.END
        body_len = is_end.to(torch.uint8).argmax(dim=1)        # the first END, if any
        has_end = is_end.any(dim=1)
        body_len.masked_fill_(~has_end, L)
        length = body_len + has_end
        tokens = tokens.masked_fill(t["pos"] >= length[:, None], V.END)   # END-padded past the body's end
        live = ~restart
        r = self._score(tokens, length, body_len, state.task, live).float()   # float32 (free when it is)
        keep = tasks is None
        torch.where(restart[:, None], state.tokens if keep else t["END"], tokens, out=state.tokens)
        torch.where(restart, state.length if keep else t["ZERO"], length, out=state.length)
        if not keep:
            torch.where(restart, tasks, state.task, out=state.task)
        # truncated and invalid: two arrays (one shared tensor aliased them in the user's hands)
        return r.masked_fill(restart, 0.0), live, torch.zeros_like(restart), torch.zeros_like(restart)

    def render(self, state: SynthesisState, i: int = 0) -> str:
        ti = int(state.task[i])
        task = self.bank.tasks[ti]
        body = state.tokens[i, : int(state.length[i])].cpu().numpy()
        try:
            source = V.detokenize(body, self.bank.signatures[ti])
        except ValueError as e:
            source = f"{task.signature_line()}\n    # (cannot render: {e})"
        lines = [f"task {task.name}: {task.description}", source]
        if len(body) and (body[-1] == V.END or len(body) >= self.max_len):   # scored: ended, or cut at max_len
            s = self.bank.score(body[None], np.array([ti]))
            lines.append(f"compiled={bool(s.compiled[0])} passed={s.pass_frac[0] * self.bank.n_tests:.0f}/"
                         f"{self.bank.n_tests} steps={s.steps[0]:.0f}")
            error = None if s.compiled[0] else self._token_error(body, ti, source)
            if error:  # why the tokens failed, placed in the source above (which may read as valid text)
                lines.append(f"error: {error}")
        return "\n".join(lines) + "\n"

    def _token_error(self, body, ti: int, source: str) -> str | None:
        from vramgym.compiler import compile_tokens
        try:
            toks = V.to_compiler_tokens(body, self.bank.signatures[ti])
        except ValueError as e:  # an action out of the vocabulary
            return str(e)
        cb = compile_tokens(toks, np.array([0, len(toks)]), code_cap=code_cap_for(len(toks)))
        return None if cb.ok[0] else cb.error(0, source)


class SynthesisEnv(CoreEnv):
    """`vramgym/Synthesis-v0` (batch=False) and `vramgym/SynthesisBatch-v0` (batch=True) as one
    Gymnasium env with numpy observations (the core on the CPU with one row)."""

    def __init__(self, bank: TaskBank | None = None, tasks: list[str] | None = None, max_len: int = 48,
                 reward: SynthesisReward | None = None, batch: bool = False, n_tests: int | None = None,
                 seed: int = 0, backend: str | None = None, render_mode: str | None = None, fuel: int | None = None,
                 fuel_scale: float | None = None):
        self.core = SynthesisCore(bank_for(bank, tasks, n_tests, seed, backend, fuel, fuel_scale=fuel_scale), max_len,
                                  reward, batch=batch)
        self.observation_space = self.core.observation_space()
        self.action_space = self.core.action_space()
        super().__init__(render_mode)


class SynthesisVectorEnv(TensorVectorEnv):
    """N synthesis envs in one batched state: one mask and one score call per step for all of
    them, autoreset NEXT_STEP (envs/vector.py). `device=None`: numpy out; a device: torch
    tensors there, state and scoring included. `automaton`: "auto", "native", "numpy" or
    "torch" (see the module docstring). `cuda_graph=True` (CUDA only) replays the whole step
    (automaton, scoring, autoreset, observation) from one CUDA graph captured at reset: one
    launch instead of ~140 (envs/vector.py, envs/step_graph.py).
    `copy=False`: observations share memory with the env's state and buffers, overwritten by the
    next step or reset (envs/vector.py), fewer ops and no fresh allocation per step."""

    def __init__(self, num_envs: int = 1, bank: TaskBank | None = None, tasks: list[str] | None = None,
                 max_len: int = 48, reward: SynthesisReward | None = None, batch: bool = False,
                 n_tests: int | None = None, seed: int = 0, backend: str | None = None, device=None,
                 render_mode: str | None = None, automaton: str = "auto", cuda_graph: bool | str = False,
                 max_episode_steps: int | None = None, copy: bool = True, fuel: int | None = None,
                 fuel_scale: float | None = None):
        check_max_episode_steps(max_episode_steps, "max_len")
        core = SynthesisCore(bank_for(bank, tasks, n_tests, seed, backend, fuel, device, fuel_scale), max_len, reward,
                             automaton, batch)
        super().__init__(core, num_envs, core.observation_space(), core.action_space(), seed, device, render_mode,
                         copy, cuda_graph)


def make_batch_env(**kw) -> SynthesisEnv:
    return SynthesisEnv(batch=True, **kw)


def make_batch_vector_env(num_envs: int = 1, **kw) -> SynthesisVectorEnv:
    return SynthesisVectorEnv(num_envs=num_envs, batch=True, **kw)
