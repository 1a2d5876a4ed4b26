"""The Gymnasium shells shared by the environments around their functional cores: `CoreEnv`,
one env with numpy observations (the core with one row on the CPU), and `TensorVectorEnv`, N
envs whose state is a dataclass of torch tensors on one device, stepped by a core's batched
functions (no Python loop over envs), with autoreset NEXT_STEP (the step after an episode ends
resets that env and ignores its action).

`device=None` keeps the state on the CPU and returns numpy arrays, what RLlib and most Gymnasium
code expect; `device="cpu"`, `"cuda"`, `"cuda:1"` or a torch.device returns torch tensors on
that device. On a CUDA device nothing in `step` waits for the GPU: masks, the automaton,
autoresets, task sampling and the scoring of finished programs are all device ops.

Tasks: an env's task is a counter-based hash of (seed, env index, episode number) computed with
int64 tensor arithmetic, so CPU and GPU envs built with one seed see the same tasks in the same
envs. `reset(options={"task": t or (N,) tasks})` pins envs to tasks, autoresets included (e.g.
groups of candidates per task); a reset without it samples again. `reset(seed=s)` starts the
stream of seed s over (episode numbers from 0); a later `reset()` without a seed goes on with
each env's next episode number (it used to start the last seed's stream over, the same tasks
again), and the first reset without one starts the constructor's seed. Seeds are folded to 32
bits in the hash: two distinct seeds share a stream with a chance of about 2**-32.

Observations: with `copy=True` (the default) every reset and step returns fresh arrays; with
`copy=False` (Gymnasium's meaning of the flag) they may share memory with the env's state and
buffers, and the next step or reset overwrites them: fewer ops and no fresh allocation per step
(on the CPU, faulting in a fresh 134 MB of task examples per step at 65,536 envs costs more than
copying them).

A core supplies: `empty(n, device) -> state`; `reset_rows(state, rows, tasks)` (in place, rows a
(N,) bool mask); optionally `prepare(state)` (called at reset); `step(state, actions, live) ->
(reward, terminated, truncated, invalid)` (rows not `live` unchanged, all-zero outputs);
optionally `step_reset(state, actions, restart, tasks)`, which the vector env then uses instead
of `step(state, actions, ~restart)` followed by `reset_rows(state, restart, tasks)` (the same
result, with each field written once; tasks a tensor, None, or a HashedTasks whose .tensor()
computes them); `observe(state, copy=True) -> dict`; `render(state, i) ->
str`; `n_tasks`.

Launches: on a GPU every torch op of a step is a kernel launch (a few us each, eager), so a step
is written as few full-width ops (no per-field resets, no Python loop, no data-dependent shape);
experiments/bench_envs.py counts them (`count_ops`) and tests/test_envs_ops.py bounds them.
`cuda_graph=True` goes further: each reset captures the whole step (the core's step, autoreset,
task hashing and observation) into one CUDA graph (envs/step_graph.py), and a step copies the
actions in, replays it and copies the outputs out. Graphs are kept per action shape and per
pinned/sampled tasks; a step with actions of another shape (a batch env's bodies of another
length) runs eagerly, with the same result. Every buffer a step writes is therefore written in
place, in both modes.
"""
from __future__ import annotations

import functools
import threading
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from vramgym.vm.values import check_bool, check_int

from .bank import check_device, check_seed, is_int_dtype
from .grammar_reference import action_ids

_M32 = 0xFFFFFFFF


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """An avalanche step on 32-bit values held in int64 (products stay below 2**59, so int64
    arithmetic is exact on every device)."""
    x = (((x >> 16) ^ x) * 0x45D9F3B) & _M32
    x = (((x >> 16) ^ x) * 0x45D9F3B) & _M32
    return (x >> 16) ^ x


def _mix32_int(x: int) -> int:
    """_mix32 of one value in Python ints (the same arithmetic)."""
    x = (((x >> 16) ^ x) * 0x45D9F3B) & _M32
    x = (((x >> 16) ^ x) * 0x45D9F3B) & _M32
    return (x >> 16) ^ x


def hash_keys(seed: int, env: torch.Tensor) -> torch.Tensor:
    """The per-env part of hash_tasks, which a vector env computes once per seed. The seed's high
    half is mixed before it meets the low half (a plain XOR made seed 2**32 + 1 repeat seed 0's
    tasks); seeds below 2**32 hash as before (_mix32_int(0) == 0)."""
    return _mix32(env & _M32 ^ _mix32_int((seed & _M32) ^ _mix32_int((seed >> 32) & _M32)))


def hash_tasks_keyed(keys: torch.Tensor, episode: torch.Tensor, n_tasks: int) -> torch.Tensor:
    """hash_tasks from hash_keys (13 elementwise ops: what a step pays)."""
    return _mix32(keys ^ (episode & _M32)) % n_tasks


class HashedTasks(NamedTuple):
    """The tasks hash_tasks_keyed gives, not yet computed: a core's step_reset may hash them where
    it needs them (SynthesisCore's native token step: in its own call, for the restart rows only,
    grammar.h hashed_task), else it takes .tensor()."""
    keys: torch.Tensor
    episode: torch.Tensor
    n_tasks: int

    def tensor(self) -> torch.Tensor:
        return hash_tasks_keyed(self.keys, self.episode, self.n_tasks)


def hash_tasks(seed: int, env: torch.Tensor, episode: torch.Tensor, n_tasks: int) -> torch.Tensor:
    """Task index of each env for its episode number: the same on every device."""
    return hash_tasks_keyed(hash_keys(seed, env), episode, n_tasks)


def to_device(x, device: torch.device, dtype=None) -> torch.Tensor:
    """A user's actions (numpy, list, scalar or tensor) as a tensor on `device`."""
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    return t.to(device=device, dtype=dtype) if dtype is not None else t.to(device)


def as_actions(x, device: torch.device) -> torch.Tensor:
    """A user's actions (numpy, list, scalar or tensor) as an int64 tensor on `device`. An action
    that is no integer (a float like 4.9, NaN, inf) or past int64 becomes -1: out of range, so
    the env handles it as any out-of-range action (invalid_action with the penalty; in a batch
    env's body, the body's end) where a cast would truncate 4.9 to the valid action 4. Integer
    actions take the plain cast (no extra op, no host sync); other dtypes raise TypeError."""
    # one action (a single env's step): no array (np.timedelta64 is an np.integer too: not an int)
    if type(x) is int or (isinstance(x, np.integer) and x.dtype.kind in "iu"):
        v = int(x)   # (from_numpy: a third of torch.tensor's cost)
        return torch.from_numpy(np.array(v if -(1 << 63) <= v < 1 << 63 else -1, np.int64)).to(device)
    if isinstance(x, torch.Tensor):
        t = x
        if t.is_complex():
            raise TypeError(f"actions must be ints, got a tensor of {t.dtype}")
    else:   # the automata's reading (uint64 and Python ints past int64, non-integers: -1)
        t = torch.as_tensor(action_ids(x).reshape(np.shape(x)))
    if t.is_floating_point():   # NaN fails ==, inf fails <; 2**62 keeps the cast defined
        t = torch.where((t == t.trunc()) & (t.abs() < 2.0**62), t, -1)
    return t.to(device=device, dtype=torch.int64)


def none_on_cpu(core, rows: torch.Tensor) -> bool:
    """A CPU step's shortcut (the core's `cpu_shortcuts`): True where `rows` lives on the CPU and
    has no True row, so the work for those rows can be skipped. The check reads the tensor on the
    host: free on the CPU, a sync on a GPU, where the work is therefore always done."""
    return getattr(core, "cpu_shortcuts", False) and rows.device.type == "cpu" and not bool(rows.any())


def check_max_episode_steps(max_episode_steps, bound: str) -> None:
    """The vector envs take `max_episode_steps` (gym.make_vec passes it on) but implement no
    step limit: rather than ignore it, refuse it."""
    if max_episode_steps is not None:
        raise ValueError(f"max_episode_steps is not supported by the vector envs (they do not truncate by step "
                         f"count): bound episodes with {bound}, or wrap single envs (gym.make) in a TimeLimit")


def check_options(options) -> dict:
    """reset's options: None or a dict whose only key is "task" (a misspelt key used to pin
    nothing, silently)."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
    unknown = sorted(map(repr, set(options) - {"task"}))
    if unknown:
        raise ValueError(f"unknown reset option(s) {', '.join(unknown)}: the only one is 'task'")
    return options


def check_render_mode(render_mode) -> None:
    if render_mode is not None and render_mode != "ansi":
        raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")


class _OneCaller:
    """An env's state is updated in place, so two threads in step() or reset() of one env at once
    would mix their rows silently: the second one gets a RuntimeError instead (one env per
    thread; several envs in several threads are fine). Pickles as a fresh, free guard."""

    def __init__(self):
        self._lock = threading.Lock()

    def __getstate__(self):
        return {"free": True}  # (a state that is not empty: pickle then calls __setstate__)

    def __setstate__(self, _state):
        self._lock = threading.Lock()

    def __enter__(self):
        if not self._lock.acquire(blocking=False):
            raise RuntimeError("this env is being stepped or reset by another thread: use one env per thread")

    def __exit__(self, *exc):
        self._lock.release()


def one_thread(method):
    """step() and reset() run under the env's _OneCaller guard."""
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        with self._guard:
            return method(self, *args, **kwargs)
    return guarded


class TensorVectorEnv(gym.vector.VectorEnv):
    metadata = {"render_modes": ["ansi"], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, core, num_envs: int, single_observation_space, single_action_space, seed: int = 0,
                 device=None, render_mode: str | None = None, copy: bool = True, cuda_graph: bool | str = False):
        num_envs = check_int(num_envs, "num_envs", 1)
        check_render_mode(render_mode)
        check_bool(copy, "copy")
        self.core, self.num_envs = core, num_envs
        self._guard = _OneCaller()
        self.as_numpy = device is None
        self.device = check_device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"device {device!r}: torch sees no CUDA device here")
        # cuda_graph: True (CUDA devices), False, or "emulate" (any device: step_graph.StepGraph's
        # eager stand-in for a graph, which tests use to check the static-buffer plumbing)
        # (`is`: 1 == True would pass an `in` test, then fail as neither mode)
        if not (cuda_graph is False or cuda_graph is True or (isinstance(cuda_graph, str) and cuda_graph == "emulate")):
            raise ValueError(f"cuda_graph must be True, False or 'emulate', got {cuda_graph!r}")
        if cuda_graph is True and self.device.type != "cuda":
            raise ValueError(f"cuda_graph=True needs a CUDA device (device='cuda'), got {self.device}")
        self.cuda_graph = cuda_graph
        self._graphs: dict = {}
        self.single_observation_space = single_observation_space
        self.single_action_space = single_action_space
        self.observation_space = gym.vector.utils.batch_space(single_observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(single_action_space, num_envs)
        self.render_mode = render_mode
        self.copy = bool(copy)
        self.state = core.empty(num_envs, self.device)
        self._env = torch.arange(num_envs, device=self.device)
        # the shell's buffers, written in place only (a captured step keeps their addresses)
        self._episode = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self._needs_reset = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        self._pinned = False                     # whether reset pinned tasks (then _pin holds them)
        self._pin = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self._seed = check_seed(seed)
        self._ready = False                      # reset has run: a step needs its state (a Python flag, no sync)
        self._key_seed: int | None = None        # the seed _keys was hashed from
        self._keys = torch.zeros(num_envs, dtype=torch.int64, device=self.device)

    def _tasks(self, lazy: bool = False):
        """Each env's task for its current episode: the pinned ones, else the hash (lazy: as a
        HashedTasks, for a core's step_reset to compute where it needs it)."""
        if self._pinned:
            return self._pin
        if self._key_seed != self._seed:   # the per-env half of the hash, once per seed
            self._keys.copy_(hash_keys(self._seed, self._env))
            self._key_seed = self._seed
        h = HashedTasks(self._keys, self._episode, self.core.n_tasks)
        return h if lazy else h.tensor()

    def _observe(self):
        return self._out(self.core.observe(self.state, copy=self.copy))

    def _out(self, x):
        if isinstance(x, dict):
            return {k: self._out(v) for k, v in x.items()}
        return x.numpy() if self.as_numpy else x

    def _task_ids(self, task) -> torch.Tensor:
        """options["task"]: one int task id or (N,) of them (no floats: int() would truncate 1.9)."""
        t = task if isinstance(task, torch.Tensor) else np.asarray(task)
        # the shape first: numpy reads [] as float64, and its dtype is not what is wrong
        if t.ndim > 1 or (t.ndim == 1 and t.shape[0] not in (1, self.num_envs)):
            raise ValueError(f"options['task'] must be one task id or {self.num_envs} (shape ({self.num_envs},)), "
                             f"got shape {tuple(t.shape)}")
        if not is_int_dtype(t):
            raise TypeError(f"options['task'] must be int task ids, got {t.dtype}")
        if not isinstance(t, torch.Tensor):
            t = t.astype(np.int64)   # (torch takes no uint64; one past int64 wraps negative: out of range below)
        tasks = to_device(t, self.device, torch.int64).reshape(-1).expand(self.num_envs)
        if bool(((tasks < 0) | (tasks >= self.core.n_tasks)).any()):  # a reset may sync; a step never does
            raise ValueError(f"task ids must be in 0..{self.core.n_tasks - 1}")
        return tasks

    @one_thread
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        # check everything before changing anything: a failed reset leaves the env as it was
        seed = None if seed is None else check_seed(seed)
        options = check_options(options)
        pinned = self._task_ids(options["task"]) if "task" in options else None
        if seed is not None:
            self._seed = seed
        super().reset(seed=seed)   # np_random and np_random_seed, as Gymnasium's vector envs keep them
        if seed is None and self._ready:
            self._episode += 1   # Gymnasium's seed=None: go on sampling, do not replay
        else:
            self._episode.zero_()
        self._pinned = pinned is not None
        if self._pinned:
            self._pin.copy_(pinned)
        self.core.reset_rows(self.state, torch.ones_like(self._needs_reset), self._tasks())
        self._needs_reset.zero_()
        if hasattr(self.core, "prepare"):
            self.core.prepare(self.state)  # e.g. device constants: a reset may sync, a step never does
        if self.cuda_graph:
            self._graph((self.num_envs,) + self.single_action_space.shape)
        self._ready = True
        return self._observe(), {}

    def __getstate__(self):
        # captured steps hold closures over this env (and CUDA graphs cannot be copied): a pickle or
        # a deepcopy takes their keys and captures its own steps again
        d = dict(vars(self))
        d["_graphs"] = list(self._graphs)
        return d

    def __setstate__(self, d):
        keys, d["_graphs"] = d["_graphs"], {}
        vars(self).update(d)
        if self.cuda_graph and self._ready:
            pinned = self._pinned
            for shape, pin in keys:   # (a graph's key: the action shape and whether tasks are pinned)
                self._pinned = pin
                self._graph(shape)
            self._pinned = pinned

    def _buffers(self) -> dict:
        """Every tensor a step reads or writes in place: the core's state and the shell's own."""
        d = {f"state.{k}": v for k, v in vars(self.state).items() if isinstance(v, torch.Tensor)}
        d.update(episode=self._episode, needs_reset=self._needs_reset, keys=self._keys, pin=self._pin)
        return d

    def _advance(self, a: torch.Tensor, copy: bool):
        """One step with its autoreset, in place: (obs, reward, terminated, truncated, invalid)."""
        restart = self._needs_reset
        self._episode += restart
        # On the CPU (no graph) a host check costs nothing: with no env restarting, no tasks to hash
        # (13 ops) and nothing to reset. A GPU step never reads the device, so it always does both
        # (as the CPU does with the core's cpu_shortcuts off: SynthesisCore.cpu_shortcuts).
        quiet = not self.cuda_graph and none_on_cpu(self.core, restart)
        if hasattr(self.core, "step_reset"):   # the step and the autoreset in one pass over each field
            tasks = None if quiet else self._tasks(lazy=True)
            reward, term, trunc, invalid = self.core.step_reset(self.state, a, restart, tasks)
        else:
            reward, term, trunc, invalid = self.core.step(self.state, a, ~restart)
            if not quiet:
                self.core.reset_rows(self.state, restart, self._tasks())
        torch.bitwise_or(term, trunc, out=self._needs_reset)   # restart is read no more
        return self.core.observe(self.state, copy=copy), reward, term, trunc, invalid

    def _graph(self, shape: tuple):
        """The captured step for actions of `shape` under the current pinning (made at reset: a
        capture synchronizes, which a step must not)."""
        from .step_graph import StepGraph
        key = (shape, self._pinned)
        if key not in self._graphs:
            a = torch.zeros(shape, dtype=torch.int64, device=self.device)
            emulate = self.cuda_graph == "emulate"
            pool = None if emulate or not self._graphs else next(iter(self._graphs.values()))
            key_seed = self._key_seed   # the warm-up steps may hash _keys anew, and StepGraph puts the old
            self._graphs[key] = StepGraph(lambda: self._advance(a, copy=False), a, self._buffers, emulate, pool)
            self._key_seed = key_seed   # _keys back: the flag must say whose they are (an unpickled env)
        return self._graphs[key]

    @one_thread
    def step(self, actions):
        if not self._ready:
            raise RuntimeError("call reset() before step()")
        a = as_actions(actions, self.device)
        n = self.num_envs
        if self.single_action_space.shape:   # one body per env: (N, L), L may be shorter or longer than max_len
            if a.ndim != 2 or a.shape[0] != n or a.shape[1] == 0:
                raise ValueError(f"actions must be {n} bodies, shape ({n}, L) with L >= 1, got shape {tuple(a.shape)}")
        elif a.shape != (n,):
            if a.shape != (n, 1):
                raise ValueError(f"actions must have shape ({n},) (one action per env), got shape {tuple(a.shape)}")
            a = a.reshape(n)
        g = self._graphs.get((tuple(a.shape), self._pinned)) if self.cuda_graph else None
        if g is None:
            obs, reward, term, trunc, invalid = self._advance(a, self.copy)
        else:   # the graph's outputs are overwritten by the next replay: copies out (observations if copy)
            g.actions.copy_(a)
            obs, reward, term, trunc, invalid = g.replay()
            if self.copy:
                obs = {k: v.clone() for k, v in obs.items()}
            reward, term, trunc, invalid = reward.clone(), term.clone(), trunc.clone(), invalid.clone()
        # `_invalid_action`: Gymnasium's vector-info mask of the envs that report the key (all of them)
        every = torch.ones(n, dtype=torch.bool, device=self.device)
        return (self._out(obs), self._out(reward), self._out(term), self._out(trunc),
                {"invalid_action": self._out(invalid), "_invalid_action": self._out(every)})

    def render(self):
        if self.render_mode == "ansi":
            return "".join(self.core.render(self.state, i) for i in range(self.num_envs))
        return None


class CoreEnv(gym.Env):
    """One env around a core: its state is a one-row batch on the CPU, observations numpy.
    Subclasses set `core`, `observation_space` and `action_space`, then call `super().__init__`."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, render_mode: str | None = None):
        check_render_mode(render_mode)
        self.render_mode = render_mode
        self._guard = _OneCaller()
        self.state = self.core.empty(1, torch.device("cpu"))
        self._live = torch.ones(1, dtype=torch.bool)
        self._restart = torch.zeros(1, dtype=torch.bool)   # step_reset's (no row restarts in a step)
        self._ready = False
        self._done = False   # the episode ended: step refuses until reset

    def __setstate__(self, d):
        d.setdefault("_restart", torch.zeros(1, dtype=torch.bool))   # (a pickle from before session 33)
        vars(self).update(d)

    @one_thread
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        # the vector envs' checks (TypeError/ValueError naming the argument), before anything changes
        seed = None if seed is None else check_seed(seed)
        task = None
        options = check_options(options)
        if "task" in options:
            task = check_int(options["task"], "options['task']", 0, self.core.n_tasks - 1)
        super().reset(seed=seed)
        if task is None:
            task = int(self.np_random.integers(self.core.n_tasks))
        self.core.reset_rows(self.state, self._live, torch.tensor([task]))
        self._ready, self._done = True, False
        return self._first(self.core.observe(self.state, copy=False)), {}

    @one_thread
    def step(self, action):
        if not self._ready:
            raise RuntimeError("call reset() before step()")
        if self._done:   # (the core would step the ended episode's state on: tokens past the end, scored again)
            raise RuntimeError("the episode has ended (terminated or truncated): call reset() before step()")
        a = as_actions(action, torch.device("cpu"))
        if not self.action_space.shape and a.numel() != 1:
            raise ValueError(f"one action expected, got shape {tuple(a.shape)}")
        if self.action_space.shape and (a.ndim != 1 or a.shape[0] == 0):
            raise ValueError(f"one body expected, shape (L,) with L >= 1, got shape {tuple(a.shape)}")
        a = a.reshape((1, -1) if self.action_space.shape else (1,))
        if hasattr(self.core, "step_reset"):   # (the same step as core.step with live = [True])
            r, term, trunc, invalid = self.core.step_reset(self.state, a, self._restart, None)
        else:
            r, term, trunc, invalid = self.core.step(self.state, a, self._live)
        obs = self._first(self.core.observe(self.state, copy=False))
        term, trunc = bool(term), bool(trunc)   # (one-element tensors)
        self._done = term or trunc
        return obs, float(r), term, trunc, {"invalid_action": bool(invalid)}

    @staticmethod
    def _first(obs: dict) -> dict:
        # row 0 as numpy copies (a 0-d array for a scalar field): observe(copy=False) shares the
        # state's buffers, and one copy here costs less than observe's torch clones
        return {k: v.numpy()[0, ...].copy() for k, v in obs.items()}

    def render(self):
        return self.core.render(self.state) if self.render_mode == "ansi" else None
