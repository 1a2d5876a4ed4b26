"""Benchmark: the VM's cycle check (vm/csrc/vm.h) on what a random policy writes.

A masked random policy on Synthesis-v0 writes many loops that never end (`while 3: pass`); each
ran a whole fuel budget per test before the check. This script steps the CPU vector env with
masked random actions, keeps every batch of finished bodies that the task bank scored, and then
scores those same batches again with the installed core and with a build of it without the check
(-DVG_NO_CYCLE_CHECK, built with g++ by the tests' helper), alternating, best of --repeat.
Results must be identical (the check is exact); the script aborts otherwise.

    python experiments/bench_cycle_check.py                  # 1024 envs, 300 steps
    python experiments/bench_cycle_check.py --num-envs 4096 --steps 200 --fuel 20000
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "experiments"))

from bench_envs import masked_actions  # noqa: E402
from bench_cpu import machine_info  # noqa: E402
from test_cycle_check import unchecked_library  # noqa: E402
from vramgym.envs import bank as bank_mod  # noqa: E402
from vramgym.envs.synthesis import SynthesisVectorEnv  # noqa: E402
from vramgym.vm import cpu  # noqa: E402


def collect(num_envs: int, steps: int, fuel: int, seed: int):
    """Step the env; return its bank and every (bodies, lengths, task_ids, active) it scored."""
    batches = []
    orig = bank_mod.TaskBank.evaluate

    def spy(self, bodies, lengths, task_ids, active=None):
        batches.append((bodies.clone(), lengths.clone(), task_ids.clone(), None if active is None else active.clone()))
        return orig(self, bodies, lengths, task_ids, active)

    bank_mod.TaskBank.evaluate = spy
    try:
        env = SynthesisVectorEnv(num_envs=num_envs, device="cpu", fuel=fuel)
        obs, _ = env.reset(seed=seed)
        gen = torch.Generator().manual_seed(seed)
        for _ in range(steps):
            obs, *_ = env.step(masked_actions(obs["action_mask"], gen))
    finally:
        bank_mod.TaskBank.evaluate = orig
    return env.core.bank, batches


def score_all(bank, batches, lib):
    installed = cpu.lib
    cpu.lib = lambda: lib
    try:
        t0 = time.perf_counter()
        out = [bank.evaluate(*b) for b in batches]
        return time.perf_counter() - t0, out
    finally:
        cpu.lib = installed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--num-envs", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--fuel", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    info = machine_info()
    print(f"machine: {info['cpu']}, {info['cores']} cores, load {info['load_avg_at_start']}, {info['vramgym']}")
    if min(args.num_envs, args.steps, args.repeat) < 1:
        ap.error("--num-envs, --steps and --repeat must be >= 1")
    bank, batches = collect(args.num_envs, args.steps, args.fuel, args.seed)
    libs = {"with the check": cpu.lib(), "without": unchecked_library("-O3")}  # setup.py's level
    best = {k: float("inf") for k in libs}
    outs = {}
    for _ in range(args.repeat):
        for name, lib in libs.items():
            t, outs[name] = score_all(bank, batches, lib)
            best[name] = min(best[name], t)
    a, b = outs["with the check"], outs["without"]
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            if not torch.equal(u, v):
                raise SystemExit("bench_cycle_check: results differ with and without the check")
    n = sum(int(x[0].numel()) if b[3] is None else int(b[3].sum()) for x, b in zip(a, batches))
    if not n:
        raise SystemExit(f"bench_cycle_check: {args.steps} steps of {args.num_envs} envs finished no body to score; "
                         "take more steps or envs")
    steps = sum(int(x[2].sum()) for x in a)
    print(f"{len(batches)} scoring calls, {n} candidates, {bank.n_tests} tests each, fuel {args.fuel}; "
          f"VM steps counted: {steps:,} (identical with and without the check)")
    for name, t in best.items():
        print(f"  {name:15s} {t:7.3f} s   {n / t:10,.0f} candidates/s")
    print(f"  speedup {best['without'] / best['with the check']:.2f}x (threads: the backend default, best of {args.repeat})")


if __name__ == "__main__":
    main()
