"""Where the time of a GPU env step goes: host time per step (Python and launches) against
device time per step, and the kernels that take the device time (torch.profiler).

    python experiments/profile_env.py --num-envs 1024 65536 [--batch] [--automaton native]
"""
from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

from vramgym.envs.bank import TaskBank
from vramgym.envs.synthesis import SynthesisVectorEnv


def actions(env, obs, gen):
    if "action_mask" in obs:   # Gumbel-max over the mask: a random allowed token per env
        return (torch.rand(obs["action_mask"].shape, generator=gen, device="cuda") + obs["action_mask"]).argmax(1)
    return torch.randint(0, 73, (env.num_envs, env.single_action_space.shape[0]), device="cuda", generator=gen)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--num-envs", type=int, nargs="+", default=[1024, 65536])
    p.add_argument("--batch", action="store_true")
    p.add_argument("--automaton", default="auto")
    p.add_argument("--cuda-graph", action="store_true")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rows", type=int, default=25)
    a = p.parse_args()
    bank = TaskBank.from_names(n_tests=16)           # every built-in task, as bench_envs
    for n in a.num_envs:
        env = SynthesisVectorEnv(num_envs=n, bank=bank, device="cuda", batch=a.batch, automaton=a.automaton,
                                 cuda_graph=a.cuda_graph, copy=False)
        gen = torch.Generator(device="cuda").manual_seed(0)
        obs, _ = env.reset(seed=0)
        # Episodes start together at reset and a random policy's mostly run to the length limit,
        # so scoring comes in bursts every max_len + 1 steps: warm up (NVRTC, caches, allocator)
        # past the first burst and time and profile whole cycles (session 6, 65,536 envs with
        # cuda_graph: 75 M "steps/s" over steps 10-30, 46 M over 58-88; bench_envs, steady: 15.6 M)
        steps = a.steps if a.batch else max(a.steps, 2 * (env.core.max_len + 1))
        for _ in range(10 + (0 if a.batch else env.core.max_len)):
            obs, *_ = env.step(actions(env, obs, gen))
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            obs, *_ = env.step(actions(env, obs, gen))
        host = (time.perf_counter() - t0) / steps
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / steps
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                obs, *_ = env.step(actions(env, obs, gen))
            torch.cuda.synchronize()
        ev = prof.key_averages()
        dev_us = sum(e.self_device_time_total for e in ev) / steps
        launches = sum(e.count for e in ev if e.self_device_time_total > 0) / steps
        print(f"\n=== num_envs {n} ({'batch' if a.batch else 'token'}, automaton {a.automaton}, "
              f"cuda_graph {a.cuda_graph}): wall {wall * 1e3:.3f} ms/step, host-side {host * 1e3:.3f} ms/step, "
              f"device busy {dev_us / 1e3:.3f} ms/step, ~{launches:.0f} kernels/step, "
              f"{n / wall:,.0f} env steps/s")
        print(ev.table(sort_by="self_device_time_total", row_limit=a.rows, max_name_column_width=70))
        del env, obs


if __name__ == "__main__":
    main()
