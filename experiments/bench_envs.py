"""Benchmark: environment steps per second against num_envs, with masked random actions and the
compile + execute of finished programs included.

    python experiments/bench_envs.py                       # Synthesis-v0 and SynthesisBatch-v0, CPU
    python experiments/bench_envs.py --quick
    python experiments/bench_envs.py --num-envs 1 16 256 4096 --seconds 5

Synthesis-v0 counts token steps (one action per env per step); SynthesisBatch-v0 counts
candidate programs (one whole body per env per step). The random policy samples uniformly among
the allowed actions (Synthesis-v0) or draws whole bodies by running the mask on the side
(SynthesisBatch-v0: bodies are sampled once, outside the timed loop, and reused).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from vramgym.envs.bank import TaskBank  # noqa: E402
from vramgym.envs.synthesis import SynthesisVectorEnv  # noqa: E402


def masked_actions(rng: np.random.Generator, mask: np.ndarray) -> np.ndarray:
    """One uniformly random allowed action per row, vectorized (Gumbel-max over the mask)."""
    scores = rng.random(mask.shape) + mask.astype(np.float64)  # allowed entries lie in [1, 2)
    return scores.argmax(axis=1)


def bench_token_env(bank, num_envs: int, seconds: float, seed: int) -> dict:
    env = SynthesisVectorEnv(num_envs=num_envs, bank=bank)
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    steps = episodes = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        obs, r, term, trunc, _ = env.step(masked_actions(rng, obs["action_mask"]))
        steps += num_envs
        episodes += int((term | trunc).sum())
    dt = time.perf_counter() - t0
    return {"env": "Synthesis-v0", "num_envs": num_envs, "steps_per_s": steps / dt, "programs_per_s": episodes / dt}


def sample_bodies(bank, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    env = SynthesisVectorEnv(num_envs=n, bank=bank)
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    bodies = np.zeros((n, env.core.max_len), np.int64)
    tasks = env.state.task.numpy().copy()
    done = np.zeros(n, bool)
    for _ in range(env.core.max_len + 1):
        before = env.state.tokens.numpy().copy()
        obs, r, term, trunc, _ = env.step(masked_actions(rng, obs["action_mask"]))
        new = (term | trunc) & ~done
        bodies[new] = before[new]  # END-padded: the body without its final END
        done |= term | trunc
        if done.all():
            break
    return bodies, tasks


def bench_batch_env(bank, num_envs: int, seconds: float, seed: int) -> dict:
    env = SynthesisVectorEnv(num_envs=num_envs, bank=bank, batch=True)
    bodies, tasks = sample_bodies(bank, min(num_envs, 512), seed)
    reps = -(-num_envs // len(bodies))
    bodies = np.tile(bodies, (reps, 1))[:num_envs]
    env.reset(seed=seed, options={"task": np.tile(tasks, reps)[:num_envs]})
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        env.step(bodies)  # scores every body; the next step is the autoreset (counted, not scored)
        env.step(bodies)
        n += num_envs
    dt = time.perf_counter() - t0
    return {"env": "SynthesisBatch-v0", "num_envs": num_envs, "programs_per_s": n / dt, "steps_per_s": 2 * n / dt}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-envs", type=int, nargs="+", default=[1, 16, 256, 4096])
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=str(Path(__file__).parent / "results"))
    a = p.parse_args(argv)
    if a.quick:
        a.num_envs, a.seconds = [1, 8], 0.3
    bank = TaskBank.from_names(n_tests=16)
    rows = []
    for n in a.num_envs:
        for f in (bench_token_env, bench_batch_env):
            row = f(bank, n, a.seconds, a.seed)
            rows.append(row)
            print(f"{row['env']:<18} num_envs={n:>6}  steps/s={row['steps_per_s']:>12,.0f}  "
                  f"programs/s={row['programs_per_s']:>10,.0f}", flush=True)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    result = {"machine": f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}", "rows": rows,
              "load_average": os.getloadavg()}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_envs.json").write_text(json.dumps(result, indent=2))
    lines = [f"# Environment throughput (CPU)\n\nMachine: {result['machine']}; load average at the end: "
             f"{', '.join(f'{x:.2f}' for x in result['load_average'])}.\n",
             "| env | num_envs | env steps/s | programs scored/s |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {r['env']} | {r['num_envs']} | {r['steps_per_s']:,.0f} | {r['programs_per_s']:,.0f} |" for r in rows]
    (out / "bench_envs.md").write_text("\n".join(lines) + "\n")
    return result


if __name__ == "__main__":
    main()
