"""Benchmark: environment steps per second against num_envs, with masked random actions and the
compile + execute of finished programs included, on the CPU and (where present) the GPU.

    python experiments/bench_envs.py                                  # numpy-out CPU envs
    python experiments/bench_envs.py --device cpu cuda --num-envs 1024 65536
    python experiments/bench_envs.py --quick
    python experiments/bench_envs.py --env token --automaton native numpy --num-envs 1 64 1024 4096 65536
    python experiments/bench_envs.py --device cpu --no-copy --torch-threads 1
    python experiments/bench_envs.py --env token --num-envs 1 8 64 --cpu-shortcuts on off --torch-threads 1

Every env row also gets its aten ops per step (count_ops below): on a GPU each is a kernel
launch of a few us (eager), so their number bounds a step's time at small batches.

Devices: `numpy` is the default vector env (state on the CPU, numpy out), `cpu` / `cuda` the
torch-out env with its state there (`cuda` uses the torch mask automaton and the GPU scorer, and
the random policy runs on the device too, so nothing crosses to the host in the timed loop),
`cuda-graph` the same with the whole step replayed from one CUDA graph (`cuda_graph=True`), `single`
the env of `gym.make` (one env, numpy out: what a loop over single envs or Gymnasium's
SyncVectorEnv steps; num_envs 1 only; its resets are timed as part of the loop, and the batch
env's row counts one step per scored body, each after a reset). `--automaton` picks the mask
automaton of the token env (auto, native, numpy, torch; several: side by side); SynthesisBatch-v0
does not step the automaton, so it runs once per device.
Synthesis-v0 counts token steps (one action per env per step); SynthesisBatch-v0 counts
candidate programs (one whole body per env per step; a body per env is sampled once under the
mask, outside the timed loop, and reused; the table gives the share of distinct candidates in
the batch: the CPU scorer runs each distinct one once).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from vramgym.envs import vocab as V  # noqa: E402
from vramgym.envs.bank import DEFAULT_FUEL_SCALE, MIN_TASK_FUEL, bank_for, distinct_candidates  # noqa: E402
from vramgym.envs.synthesis import SynthesisVectorEnv  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))  # (bench_out, when loaded by path as in the tests)
from bench_out import OUT_HELP, results_dir  # noqa: E402


def masked_actions(mask, gen: torch.Generator) -> torch.Tensor:
    """One uniformly random allowed action per row (Gumbel-max over the mask), on the mask's device."""
    mask = torch.as_tensor(mask)
    scores = torch.rand(mask.shape, generator=gen, device=mask.device) + mask.float()  # allowed in [1, 2)
    return scores.argmax(dim=1)


# ---- aten op counts: the proxy for GPU kernel launches that a CPU can measure -------------------
class OpCounter(TorchDispatchMode):
    """Counts the aten ops that reach torch's dispatcher (below autograd), by name. `kernels`:
    ops that would launch a kernel on a GPU; `free`: views and allocations (no kernel). While
    `paused`, nothing is counted (the automaton's and the scorer's own launches are counted as
    calls instead: they are not aten ops)."""

    FREE = {"empty", "empty_like", "empty_strided", "detach", "lift_fresh", "alias", "_local_scalar_dense"}

    def __init__(self):
        super().__init__()
        self.paused, self.phase = 0, "env"
        self.ops: dict = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.paused:
            name = func.overloadpacket.__name__
            key = (self.phase, "free" if func.is_view or name in self.FREE else "kernel", name)
            self.ops[key] = self.ops.get(key, 0) + 1
        return func(*args, **(kwargs or {}))

    def total(self, phase: str = "env", kind: str = "kernel") -> int:
        return sum(v for (p, k, _), v in self.ops.items() if p == phase and k == kind)


# CuPy launches of one vm.cuda.evaluate_tasks call of at most one chunk (read from vm/cuda.py):
# active.astype(uint8), zeros(passed), zeros(steps), compile, validate, execute; plus one torch op
# (ok = lengths >= 0), counted with the scorer's aten ops below.
SCORER_CUPY_LAUNCHES = 6


def count_ops(env, steps: int = 8, seed: int = 0) -> dict:
    """Aten ops of one `reset` and of each of `steps` steps of a torch-out vector env (masked
    random actions, drawn outside the count), on the env's device path.

    The mask automaton (NativeAutomaton: one kernel per mask/step on a GPU, and per env_mask /
    env_step, the token env's mask and whole step with its autoreset) and the scorer are counted
    as calls, not ops. The scorer's aten ops are those of a GPU step: its token builder
    (one native kernel on CUDA where CuPy is, envs/token_slots.py, counted as a call; else the
    full-width torch builder, bank.compiler_token_slots) + 1; CPU scoring itself (a subset of
    rows, then the CPU backend) is not counted. Returns per-step means and maxima."""
    core, dev = env.core, env.device
    auto, bank = core.automaton(dev), core.bank
    mode = OpCounter()
    calls: dict = {}

    def paused(name, fn):
        def run(*a, **k):
            calls[name] = calls.get(name, 0) + 1
            mode.paused += 1
            try:
                return fn(*a, **k)
            finally:
                mode.paused -= 1
        return run

    real_eval = bank.evaluate

    def evaluate(bodies, lengths, task_ids, active=None):
        mode.phase = "scorer"
        try:
            if bodies.device.type == "cuda" and bank._native_slots_module(bodies.device):
                calls["token_slots"] = calls.get("token_slots", 0) + 1   # one kernel (inside real_eval)
            else:
                bank.compiler_token_slots(bodies, lengths, task_ids)     # what such a GPU scorer runs as torch ops
            (lengths >= 0)                                         # its `ok` comparison
        finally:
            mode.phase = "env"
        return paused("scorer", real_eval)(bodies, lengths, task_ids, active)

    L = core.max_len   # the scorer's constant tables made before the count (once per device)
    bank.compiler_token_slots(*(torch.zeros(s, dtype=torch.int64, device=dev) for s in ((1, L), (1,), (1,))))
    names = [m for m in ("initial", "mask", "step", "env_mask", "env_step") if hasattr(auto, m)]
    saved = {m: getattr(auto, m) for m in names}
    gen = torch.Generator().manual_seed(seed)
    per_step = []
    shortcuts = core.cpu_shortcuts
    core.cpu_shortcuts = False   # on the CPU too, the device path (a GPU step's ops), not the CPU's shortcuts
    try:
        for m in names:
            setattr(auto, m, paused(f"automaton.{m}", saved[m]))
        bank.evaluate = evaluate
        with mode:
            obs, _ = env.reset(seed=seed)
        reset = {"aten": mode.total(), "free": mode.total(kind="free"), **{f"calls.{k}": v for k, v in calls.items()}}
        batch = core.batch
        for _ in range(steps):
            if batch:
                a = torch.randint(0, 73, (env.num_envs, core.max_len), generator=gen)
            else:
                a = masked_actions(obs["action_mask"].cpu(), gen)     # gen is a CPU generator
            a = a.to(dev)
            mode.ops.clear()
            calls.clear()
            with mode:
                obs, *_ = env.step(a)
            per_step.append({"aten": mode.total(), "free": mode.total(kind="free"),
                             "scorer_aten": mode.total("scorer"),
                             **{f"calls.{k}": v for k, v in calls.items()}})
        ops_last = dict(mode.ops)
    finally:
        for m in names:
            setattr(auto, m, saved[m])
        del bank.evaluate
        core.cpu_shortcuts = shortcuts
    keys = sorted({k for s in per_step for k in s})
    return {"reset": reset,
            "step": {k: float(np.mean([s.get(k, 0) for s in per_step])) for k in keys},
            "step_max": {k: max(s.get(k, 0) for s in per_step) for k in keys},
            "last_step_ops": {f"{p}/{kind}/{n}": v for (p, kind, n), v in sorted(ops_last.items())}}


COPY = True   # --no-copy: copy=False envs


def _env(bank, n, device, shortcuts: bool = True, native_step: bool = True, **kw):
    """The vector env of a row; shortcuts=False: a CPU env runs the device path's ops
    (SynthesisCore.cpu_shortcuts), to compare with the CPU's shortcuts in one run;
    native_step=False: the token env's step as torch ops around the automaton rather than its one
    native call (SynthesisCore.native_env_step)."""
    kw.setdefault("copy", COPY)
    if device == "cuda-graph":
        env = SynthesisVectorEnv(num_envs=n, bank=bank, device="cuda", cuda_graph=True, **kw)
    else:
        env = SynthesisVectorEnv(num_envs=n, bank=bank, device=None if device == "numpy" else device, **kw)
    env.core.cpu_shortcuts = shortcuts
    env.core.native_env_step = native_step
    return env


def op_counts(bank, n: int, device: str, batch: bool, automaton: str = "auto", native_step: bool = True) -> dict:
    """count_ops of the env of a row (numpy rows: the same env with torch out on the CPU, whose
    step is the same code; the counts do not depend on num_envs, so at most 1,024 envs)."""
    dev = "cpu" if device == "numpy" else device
    env = _env(bank, min(n, 1024), dev, native_step=native_step, batch=batch,
               **({} if batch else {"automaton": automaton}))
    c = count_ops(env, steps=3)
    calls = {k.split(".", 1)[1]: v for k, v in c["step_max"].items() if k.startswith("calls.")}
    return {"aten_env": c["step_max"]["aten"], "aten_scorer": c["step_max"]["scorer_aten"], "calls": calls,
            "aten_reset": c["reset"]["aten"]}


def _sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _gen(device, seed):
    return torch.Generator(device="cuda" if device.startswith("cuda") else "cpu").manual_seed(seed)


def bench_token_env(bank, num_envs: int, seconds: float, seed: int, device: str, automaton: str = "auto",
                    warmup: int | None = None, shortcuts: bool = True, native_step: bool = True) -> dict:
    """Token steps per second in the steady state: `warmup` untimed steps first (default max_len:
    right after reset no program ends for several steps, and steps without scoring are cheaper),
    then at least two episode cycles of timed steps (2 * (max_len + 1): a random policy's episodes
    mostly run to the length limit, so they end together every max_len + 1 steps, the reset step
    included; the scoring comes in bursts, and a timed window shorter than the cycle, a few steps
    of 65,536 envs on a CPU, would miss them) besides `seconds`."""
    env = _env(bank, num_envs, device, shortcuts, native_step, automaton=automaton)
    automaton = env.core.automaton_kind(env.device)
    obs, _ = env.reset(seed=seed)
    gen = _gen(device, seed)
    warmup = env.core.max_len if warmup is None else warmup
    for _ in range(warmup):
        obs = env.step(masked_actions(obs["action_mask"], gen))[0]
    _sync(device)
    steps = 0
    done = torch.zeros((), dtype=torch.int64, device=env.device)
    _sync(device)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds or steps < 2 * (env.core.max_len + 1) * num_envs:
        obs, r, term, trunc, _ = env.step(masked_actions(obs["action_mask"], gen))
        steps += num_envs
        done += int((term | trunc).sum()) if device == "numpy" else (term | trunc).sum()
        if device.startswith("cuda") and steps // num_envs % 50 == 0:
            _sync(device)   # bound the queue so the clock check sees the GPU's pace
    _sync(device)
    dt = time.perf_counter() - t0
    return {"env": "Synthesis-v0", "device": device, "automaton": automaton + ("" if native_step else " (torch step)"),
            "num_envs": num_envs, "steps_per_s": steps / dt, "programs_per_s": int(done) / dt, "warmup_steps": warmup,
            "shortcuts": shortcuts, "native_env_step": native_step,
            **op_counts(bank, num_envs, device, False, automaton, native_step)}


def bench_automaton(bank, num_envs: int, seconds: float, seed: int, device: str, automaton: str = "auto") -> dict:
    """The mask automaton alone (no env around it): mask + step of every row per iteration, with
    masked random actions and finished rows restarted, as the env would."""
    env = _env(bank, num_envs, device, automaton=automaton)
    core, dev = env.core, env.device
    auto = core.automaton(dev)
    gid = env.state.task if device != "numpy" else env.state.task.clone()
    gen = _gen(device, seed)
    state = auto.initial(gid)
    steps = 0
    _sync(device)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        m = auto.mask(state, gid)
        new, _ = auto.step(state, masked_actions(m, gen), gid)
        state = torch.where((new[:, 1] != 0)[:, None], auto.initial(gid), new)   # H_DONE: restart
        steps += num_envs
    _sync(device)
    dt = time.perf_counter() - t0
    return {"env": "automaton", "device": device, "automaton": core.automaton_kind(dev), "num_envs": num_envs,
            "steps_per_s": steps / dt, "programs_per_s": 0.0}


def bench_single_env(bank, seconds: float, seed: int, batch: bool) -> dict:
    """gym.make's env: the token env with masked random actions and a reset at each episode's
    end, over at least two episodes besides `seconds`; the batch env scoring sampled bodies, each
    on its own task (reset with options={"task": ...}, then one step)."""
    import gymnasium as gym
    env = gym.make("vramgym/SynthesisBatch-v0" if batch else "vramgym/Synthesis-v0", bank=bank)
    gen = _gen("numpy", seed)
    obs, _ = env.reset(seed=seed)
    if batch:
        bodies, tasks = sample_bodies(bank, 64, seed)
    steps = done = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds or (not batch and done < 2):
        if batch:
            k = steps % len(bodies)
            env.reset(options={"task": int(tasks[k])})
            env.step(bodies[k])
            steps += 1
            done += 1
            continue
        a = int(masked_actions(torch.from_numpy(obs["action_mask"])[None], gen)[0])
        obs, r, term, trunc, _ = env.step(a)
        steps += 1
        if term or trunc:
            done += 1
            obs, _ = env.reset()
    dt = time.perf_counter() - t0
    return {"env": "SynthesisBatch-v0" if batch else "Synthesis-v0", "device": "single",
            "automaton": "-" if batch else env.unwrapped.core.automaton_kind(torch.device("cpu")), "num_envs": 1,
            "steps_per_s": steps / dt, "programs_per_s": done / dt, "shortcuts": env.unwrapped.core.cpu_shortcuts}


def sample_bodies(bank, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    env = _env(bank, n, "numpy")
    obs, _ = env.reset(seed=seed)
    gen = _gen("numpy", seed)
    bodies = np.zeros((n, env.core.max_len), np.int64)
    tasks = env.state.task.numpy().copy()
    done = np.zeros(n, bool)
    for _ in range(env.core.max_len + 1):
        before = env.state.tokens.numpy().copy()
        obs, r, term, trunc, _ = env.step(masked_actions(obs["action_mask"], gen))
        new = (term | trunc) & ~done
        bodies[new] = before[new]  # END-padded: the body without its final END
        done |= term | trunc
        if done.all():
            break
    return bodies, tasks


def bench_batch_env(bank, num_envs: int, seconds: float, seed: int, device: str, repeats: int = 1,
                    shortcuts: bool = True) -> dict:
    env = _env(bank, num_envs, device, shortcuts, batch=True)
    # A masked random body per `repeats` envs, each in `repeats` envs side by side (1: every env
    # its own; a policy that has learned a task repeats itself). The CPU scorer runs each
    # distinct candidate once, so the share of distinct ones goes into the results.
    bodies, tasks = sample_bodies(bank, -(-num_envs // repeats), seed)
    bodies, tasks = np.repeat(bodies, repeats, 0)[:num_envs], np.repeat(tasks, repeats)[:num_envs]
    lengths = np.where((bodies == V.END).any(1), (bodies == V.END).argmax(1), bodies.shape[1])
    distinct = len(distinct_candidates(bodies, lengths, tasks)[0]) / num_envs
    bodies = torch.from_numpy(bodies).to(env.device)
    env.reset(seed=seed, options={"task": tasks})
    n = 0
    _sync(device)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        env.step(bodies)  # scores every body; the next step is the autoreset (counted, not scored)
        env.step(bodies)
        n += num_envs
        _sync(device)
    dt = time.perf_counter() - t0
    return {"env": "SynthesisBatch-v0", "device": device, "automaton": "-", "num_envs": num_envs,
            "programs_per_s": n / dt, "steps_per_s": 2 * n / dt, "distinct": distinct, "shortcuts": shortcuts,
            **op_counts(bank, num_envs, device, True)}


def _cuts(row) -> str:
    return {True: "on", False: "off"}.get(row.get("shortcuts"), "-")


def _distinct(row) -> str:
    return f"{row['distinct']:.1%}" if "distinct" in row else ""


def _ops(row) -> str:
    if "aten_env" not in row:
        return "-"
    calls = ", ".join(f"{k} {v}" for k, v in sorted(row["calls"].items()))
    return f"{row['aten_env']} + {row['aten_scorer']} ({calls})"


def machine() -> str:
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")),
               platform.processor())
    gpu = f", GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return f"{cpu}, {os.cpu_count()} cores{gpu}, Python {platform.python_version()}, torch {torch.__version__}"


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-envs", type=int, nargs="+", default=None, help="(default 1 16 256 4096; --quick: 1 8)")
    p.add_argument("--device", nargs="+", default=["numpy"], help="numpy, cpu, cuda, cuda-graph, single (several: side by side)")
    p.add_argument("--automaton", nargs="+", default=["auto"], help="auto, native, numpy, torch (token env)")
    p.add_argument("--env", choices=("token", "batch", "both", "automaton"), default="both",
                   help="automaton: the mask automaton alone (mask + step per row), no env around it")
    p.add_argument("--seconds", type=float, default=None, help="timed seconds per row (default 3; --quick: 0.3)")
    p.add_argument("--repeat", type=int, default=1,
                   help="run every row this many times, interleaved, and keep the best (a shared machine's "
                        "load varies)")
    p.add_argument("--torch-threads", type=int, default=0,
                   help="torch intra-op threads (0: torch's default). On a shared 2-core machine whose other core "
                        "is busy, torch's 2 threads make each small CPU op wait for a descheduled thread: "
                        "hash_tasks on 65,536 envs took 290 ms with 2 threads, 4 ms with 1")
    p.add_argument("--no-copy", action="store_true",
                   help="copy=False envs: observations share the env's buffers (Gymnasium's copy flag)")
    p.add_argument("--fuel", type=int, default=None,
                   help="VM steps per test run of the scored programs (default: the bank's, 20,000); on a GPU "
                        "a scoring launch lasts as long as its longest run")
    p.add_argument("--fuel-scale", type=float, nargs="+", default=[DEFAULT_FUEL_SCALE],
                   help="each task's own step budget in multiples of its reference's steps (TaskBank's fuel_scale; "
                        f"default {DEFAULT_FUEL_SCALE:g}; inf: --fuel for every task); several: side by side")
    p.add_argument("--warmup-steps", type=int, default=None,
                   help="untimed token-env steps before the clock starts (default: the env's max_len, after "
                        "which episodes no longer start together; 0: time from reset, as before session 5)")
    p.add_argument("--native-env-step", nargs="+", choices=("on", "off"), default=["on"],
                   help="off: the token env's step as torch ops around the native automaton, not its one native "
                        "call (a kernel on a GPU; SynthesisCore.native_env_step); both: side by side")
    p.add_argument("--cpu-shortcuts", nargs="+", choices=("on", "off"), default=["on"],
                   help="off: CPU envs run the device path's ops (SynthesisCore.cpu_shortcuts); both: side by side")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-repeats", type=int, default=1,
                   help="batch env: each sampled body in this many envs (default 1: all sampled apart)")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=None, help=OUT_HELP)
    p.add_argument("--name", default="bench_envs", help="file name of the results (json and md)")
    a = p.parse_args(argv)
    if a.batch_repeats < 1:
        p.error("--batch-repeats must be at least 1")
    # --quick sets what was not given
    a.num_envs = a.num_envs or ([1, 8] if a.quick else [1, 16, 256, 4096])
    a.seconds = a.seconds if a.seconds is not None else 0.3 if a.quick else 3.0
    for name, bad in (("--num-envs", min(a.num_envs) < 1), ("--seconds", not 0 < a.seconds < float("inf")),
                      ("--repeat", a.repeat < 1), ("--torch-threads", a.torch_threads < 0),
                      ("--warmup-steps", a.warmup_steps is not None and a.warmup_steps < 0),
                      ("--fuel", a.fuel is not None and a.fuel < 1),
                      ("--fuel-scale", not all(x >= 1 for x in a.fuel_scale))):
        if bad:
            p.error(f"{name}: out of range (sizes, counts, --fuel and --fuel-scale at least 1, --seconds finite and "
                    f"above 0, --torch-threads and --warmup-steps at least 0)")
    out = results_dir(p, a.out, a.quick)
    if a.torch_threads:
        torch.set_num_threads(a.torch_threads)
    global COPY
    COPY = not a.no_copy
    banks = {fs: bank_for(None, None, 16, 0, "cpu", a.fuel, fuel_scale=fs) for fs in a.fuel_scale}
    bank = banks[a.fuel_scale[0]]
    rows = []
    if "single" in a.device and (a.num_envs != [1] or a.env == "automaton" or a.automaton != ["auto"]
                                 or a.cpu_shortcuts != ["on"]):
        p.error("--device single: gym.make's env, with --num-envs 1 only, --env token, batch or both, and the "
                "default --automaton and --cpu-shortcuts")
    for device in a.device:
        for n in a.num_envs:
            cuts = [c == "on" for c in a.cpu_shortcuts]
            runs = []
            for fs, bank in banks.items():   # (each run takes its own bank: bound as a default argument)
                if device == "single":
                    part = [lambda b=b, bank=bank: bench_single_env(bank, a.seconds, a.seed, b)
                            for b in {"token": [False], "batch": [True], "both": [False, True]}[a.env]]
                elif a.env == "automaton":
                    part = [lambda m=m, bank=bank: bench_automaton(bank, n, a.seconds, a.seed, device, m)
                            for m in a.automaton]
                else:
                    part = [lambda m=m, c=c, v=v, bank=bank: bench_token_env(bank, n, a.seconds, a.seed, device, m,
                                                                             a.warmup_steps, c, v)
                            for m in a.automaton for c in cuts for v in (x == "on" for x in a.native_env_step)]
                if device != "single":
                    part = (part if a.env != "batch" else []) + \
                        ([lambda c=c, bank=bank: bench_batch_env(bank, n, a.seconds, a.seed, device, a.batch_repeats,
                                                                 c)
                          for c in cuts] if a.env in ("batch", "both") else [])
                runs += [lambda run=run, fs=fs: {**run(), "fuel_scale": fs} for run in part]
            best = [None] * len(runs)
            for _ in range(a.repeat):
                for i, run in enumerate(runs):
                    row = run()
                    if best[i] is None or row["steps_per_s"] > best[i]["steps_per_s"]:
                        best[i] = row
            for row in best:
                rows.append(row)
                print(f"{row['env']:<18} {device:<6} {row['automaton']:<6} {_cuts(row):<3} "
                      f"fuel_scale={row['fuel_scale']:<4g} num_envs={n:>6}  "
                      f"steps/s={row['steps_per_s']:>14,.0f}  programs/s={row['programs_per_s']:>12,.0f}  "
                      f"aten ops/step={_ops(row)}", flush=True)
    result = {"machine": machine(), "rows": rows, "load_average": os.getloadavg(), "repeat": a.repeat,
              "torch_threads": torch.get_num_threads(), "copy": COPY, "fuel": bank.config.fuel,
              "fuel_scale": a.fuel_scale}
    (out / f"{a.name}.json").write_text(json.dumps(result, indent=2))
    lines = [f"# Environment throughput\n\nMachine: {result['machine']}; load average at the end: "
             f"{', '.join(f'{x:.2f}' for x in result['load_average'])}; best of {a.repeat} run(s) of "
             f"{a.seconds:g} s per row; torch threads: {torch.get_num_threads()}; copy={COPY}; "
             f"fuel {bank.config.fuel} VM steps per test run, and each task's own budget fuel_scale times its "
             f"reference's most steps (at least {MIN_TASK_FUEL}; inf: the fuel alone); token env timed after "
             f"{'max_len' if a.warmup_steps is None else a.warmup_steps} untimed steps, over at least "
             f"2 * (max_len + 1) steps (a random policy's episodes end together at the length limit: scoring "
             f"comes in bursts).\n",
             "aten ops per step: env + the scorer's token builder, then the calls that are kernels of their own "
             "on a GPU (the native automaton's mask/step: 1 each; the scorer: 6 CuPy launches per call; on CUDA "
             "the token builder is one native kernel, token_slots, where CuPy is). "
             "On a GPU each is a launch: the proxy for launch count that a CPU can measure.\n",
             "CPU shortcuts: on, a CPU env's step skips what host checks show it need not do and takes the native "
             "token step; off, it runs the device path's ops (SynthesisCore.cpu_shortcuts; no effect on CUDA).\n",
             "| env | device | automaton | CPU shortcuts | fuel_scale | num_envs | env steps/s | programs scored/s | "
             "distinct | aten ops per step |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    lines += [f"| {r['env']} | {r['device']} | {r['automaton']} | {_cuts(r)} | {r['fuel_scale']:g} | {r['num_envs']} | "
              f"{r['steps_per_s']:,.0f} | "
              f"{r['programs_per_s']:,.0f} | {_distinct(r)} | "
              f"{_ops(r)} |" for r in rows]
    (out / f"{a.name}.md").write_text("\n".join(lines) + "\n")
    return result


if __name__ == "__main__":
    main()
