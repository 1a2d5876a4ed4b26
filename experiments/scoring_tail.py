"""The token env's scoring bursts, measured on the CPU: what bounds the GPU scorer's launch.

On a GPU the env step's scorer is one launch over the programs that ended at that step, a warp
per program, so it lasts as long as its slowest warp (session 41's profile: the scorer was 58%
of the step at 65,536 envs). This runs the vector env on the CPU with a masked random policy
(as bench_envs.py), records every burst of finished programs, and replays each program's runs
on its task's tests through vm.h's switch interpreter (experiments/warp_model.cpp), counting
executed words, not reported steps: a run that the cycle check stops early reports its whole
budget but executes only a few words. Per burst it reports the programs, the executed lane steps,
and the slowest program's longest run (the launch's critical path, in VM steps), for each
--fuel-scale side by side. With the static grid-stride of vg_execute_tasks (--warps warps, each
taking rows w, w + warps, ...), and with the rows listed first (one program a warp), it gives the
slowest warp's steps. warp_model.cpp also models a warp's cost in SASS instructions from the
opcodes' step costs (--costs: a sass_steps.py json; default a flat 35 a step): the lanes'
divergence today, and a min-pc schedule (only the lanes at the smallest pc step). Models and CPU
counts, no GPU timing.

    python experiments/scoring_tail.py --num-envs 65536 --fuel-scale 8 inf --steps 120
"""
from __future__ import annotations

import argparse
import json
import math
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_out import OUT_HELP, results_dir  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def build_helper() -> Path:
    exe = Path(tempfile.gettempdir()) / "vramgym_warp_model"
    subprocess.run(["g++", "-O2", "-std=c++17", "-DVG_NO_THREADED_DISPATCH", f"-I{ROOT / 'vm' / 'csrc'}",
                    str(ROOT / "experiments" / "warp_model.cpp"), "-o", str(exe)], check=True)
    return exe


def bursts_of(n: int, steps: int, fuel_scale: float, seed: int):
    """[(row, task, body)] per burst after the first third of `steps` (the episodes' start-up), and the bank."""
    import torch
    from vramgym.envs.bank import TaskBank
    from vramgym.envs.synthesis import SynthesisVectorEnv
    bank = TaskBank.from_names(n_tests=16, fuel_scale=None if math.isinf(fuel_scale) else fuel_scale)  # as bench_envs
    bursts = []
    evaluate = bank.evaluate

    def recorded(bodies, lengths, task_ids, active=None):
        rows = np.flatnonzero(active.numpy()) if active is not None else np.arange(len(bodies))
        bursts.append([(int(r), int(task_ids[r]), bodies[r, :int(lengths[r])].numpy().copy()) for r in rows])
        return evaluate(bodies, lengths, task_ids, active)

    bank.evaluate = recorded
    env = SynthesisVectorEnv(num_envs=n, bank=bank, device="cpu")
    gen = torch.Generator().manual_seed(seed)
    obs, _ = env.reset(seed=seed)
    for _ in range(steps):
        m = torch.as_tensor(obs["action_mask"])
        obs, *_ = env.step((torch.rand(m.shape, generator=gen) + m).argmax(1))
    return bursts[len(bursts) // 3:], bank


def replay(exe: Path, bursts, bank, cost: np.ndarray, base: float, extra: float):
    """Per program (burst, row, lane-max steps, lane steps, cost, min-pc cost) for the programs that compile."""
    from vramgym.envs import vocab as V
    from vramgym.vm import cpu
    c = bank.config
    fuel = bank.task_fuel if bank.task_fuel is not None else np.full(len(bank), c.fuel)
    blob = [cost.astype("<f8").tobytes(), struct.pack("<2d", base, extra),
            struct.pack("<5i", 0, c.max_depth, c.heap_size, c.max_lists, c.stack_size)]
    where, enc, n_prog = [], bank.inputs, 0
    for b, burst in enumerate(bursts):
        for row, t, body in burst:
            code, _, _ = cpu.compile_one(V.detokenize(body, bank.signatures[t]).encode())
            if code is None:
                continue
            blob += [struct.pack("<4i", len(code), cpu.validate(code, 0)[1], int(fuel[t]), bank.n_tests),
                     code.astype("<u4").tobytes()]
            for j in range(bank.n_tests):
                k = t * bank.n_tests + j
                w = np.asarray(enc.words[enc.offsets[k]:enc.offsets[k + 1]], "<i4")
                blob += [struct.pack("<i", len(w)), w.tobytes()]
            where.append((b, row))
            n_prog += 1
    blob[2] = struct.pack("<5i", n_prog, c.max_depth, c.heap_size, c.max_lists, c.stack_size)
    out = subprocess.run([str(exe)], input=b"".join(blob), capture_output=True, check=True).stdout.split()
    r = np.array(out, dtype=np.float64).reshape(-1, 5)
    return np.c_[np.array(where, dtype=np.float64).reshape(-1, 2), r[:, 0], r[:, 1], r[:, 2], r[:, 4]]


def busiest_compile_warp(bursts, slots: int, lanes: int) -> tuple[float, float]:
    """Programs in the busiest compile warp a burst, mean over bursts: vg_compile over every row
    (thread t of `slots` takes rows t, t + slots, ...; a warp is 32 threads) against the listed
    rows (`lanes` compiling lanes a warp, so slots / lanes warps, and item k to warp k % warps:
    ceil(count / warps)). Every ended program counts (the compile runs them all)."""
    warps = -(-slots // lanes)
    strided = [np.bincount((np.array([r for r, _, _ in burst], dtype=np.int64) % slots) // 32).max()
               for burst in bursts if burst]
    listed = [-(-len(burst) // warps) for burst in bursts if burst]
    return float(np.mean(strided)), float(np.mean(listed))


def per_burst(rows: np.ndarray, n_bursts: int, warps: int) -> dict:
    b = rows[:, 0].astype(int)

    def worst(v):
        out = np.zeros(n_bursts)
        np.maximum.at(out, b, v)
        return out

    strided = np.zeros((n_bursts, warps))   # vg_execute_tasks' grid-stride: warp = row % warps, in turn
    np.add.at(strided, (b, rows[:, 1].astype(int) % warps), rows[:, 2])
    total = np.zeros(n_bursts)
    np.add.at(total, b, rows[:, 3])
    tail = worst(rows[:, 2])
    return {"programs_per_burst": float(np.bincount(b, minlength=n_bursts).mean()),
            "lane_steps_per_burst": float(total.mean()),
            "slowest_run_mean": float(tail.mean()), "slowest_run_p50": float(np.percentile(tail, 50)),
            "slowest_run_p90": float(np.percentile(tail, 90)),
            "strided_slowest_warp_mean": float(strided.max(axis=1).mean()),
            "model_cost_per_lane_max_step": float(rows[:, 4].sum() / rows[:, 2].sum()),
            "model_slowest_warp": float(worst(rows[:, 4]).mean()),
            "model_minpc_slowest_warp": float(worst(rows[:, 5]).mean())}


def main() -> None:
    from vramgym.vm import cuda   # (its constants; cupy is not imported)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num-envs", type=int, default=65536)
    p.add_argument("--steps", type=int, default=120, help="env steps (the first third are not counted)")
    p.add_argument("--fuel-scale", type=float, nargs="+", default=[8.0, math.inf])
    p.add_argument("--warps", type=int, default=132 * 40, help="the scorer's persistent grid (an H100/H200 at 40 warps an SM)")
    p.add_argument("--compile-slots", type=int, default=132 * cuda.COMPILE_PER_SM,
                   help="vg_compile's scratch slots (cuda.COMPILE_PER_SM on 132 SMs)")
    p.add_argument("--compile-row-lanes", type=int, default=cuda.compile_row_lanes(), help="cuda.COMPILE_ROW_LANES")
    p.add_argument("--costs", type=Path, default=None, help="sass_steps.py --out json: SASS a step per opcode (default 35 each)")
    p.add_argument("--base", type=float, default=14.0, help="SASS of a step shared by all opcodes (fetch, decode, loop)")
    p.add_argument("--extra", type=float, default=4.0, help="SASS a min-pc step adds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="1,024 envs, 60 steps")
    p.add_argument("--out", default=None, help=OUT_HELP)
    p.add_argument("--name", default="scoring_tail")
    a = p.parse_args()
    if a.quick:
        a.num_envs, a.steps = 1024, 60
    if a.num_envs < 1 or a.steps < 3 or a.warps < 1 or a.compile_slots < 32 or not 1 <= a.compile_row_lanes <= 32:
        p.error("--num-envs and --warps must be positive, --compile-slots at least 32, --compile-row-lanes in "
                "[1, 32], --steps at least 3")
    if not all(s > 0 for s in a.fuel_scale):   # (nan fails this too)
        p.error("--fuel-scale values must be positive (inf: every task keeps the config's fuel)")
    cost = np.full(64, 35.0)
    if a.costs is not None:
        try:
            for v in json.loads(a.costs.read_text())["per_opcode"].values():
                cost[int(v["code"])] = float(v["sass"])
        except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
            p.error(f"--costs {a.costs}: not a sass_steps.py json ({e!r})")
    out = results_dir(p, a.out, a.quick)
    exe = build_helper()
    table = []
    for scale in a.fuel_scale:
        t0 = time.perf_counter()
        bursts, bank = bursts_of(a.num_envs, a.steps, scale, a.seed)
        rows = replay(exe, bursts, bank, cost, a.base, a.extra)
        every, listed = busiest_compile_warp(bursts, a.compile_slots, a.compile_row_lanes)
        r = {"fuel_scale": scale, "num_envs": a.num_envs, "bursts": len(bursts), **per_burst(rows, len(bursts), a.warps),
             "compile_busiest_warp_every_row": every, "compile_busiest_warp_listed": listed,
             "seconds": time.perf_counter() - t0}
        print(json.dumps(r))
        table.append(r)
    head = ("| fuel_scale | programs a burst | executed lane steps a burst | slowest run: mean | p50 | p90 | "
            f"slowest warp, grid-stride over {a.warps} warps | model: SASS per lane-max step | model: slowest warp "
            "(SASS) | min-pc model: slowest warp | compile: programs in the busiest warp, every row / listed rows |\n"
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    lines = [f"| {r['fuel_scale']:g} | {r['programs_per_burst']:,.0f} | {r['lane_steps_per_burst']:.3g} | "
             f"{r['slowest_run_mean']:,.0f} | {r['slowest_run_p50']:,.0f} | {r['slowest_run_p90']:,.0f} | "
             f"{r['strided_slowest_warp_mean']:,.0f} | {r['model_cost_per_lane_max_step']:.1f} | "
             f"{r['model_slowest_warp']:.3g} | {r['model_minpc_slowest_warp']:.3g} | "
             f"{r['compile_busiest_warp_every_row']:.1f} / {r['compile_busiest_warp_listed']:.1f} |" for r in table]
    md = (f"# Scoring bursts of the token env on the CPU ({a.num_envs:,} envs, {a.steps} steps, seed {a.seed})\n\n"
          f"`python experiments/scoring_tail.py {' '.join(sys.argv[1:])}`. VM steps executed (not reported) "
          f"per burst of finished programs, 16 tests each; costs {'from ' + a.costs.name if a.costs else 'a flat 35 SASS a step'}, "
          f"base {a.base:g}, min-pc extra {a.extra:g}. No GPU ran this.\n\n{head}\n" + "\n".join(lines) + "\n")
    (out / f"{a.name}.json").write_text(json.dumps(table, indent=1))
    (out / f"{a.name}.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
