"""Benchmark of the CUDA backend (issue 3), side by side in one run, for N = 1 .. 1,000,000
candidate programs of one task with 32 test inputs each:

* programs compiled per second: token arrays (torch CUDA tensor) -> bytecode, on the device;
* candidate evaluations per second, end to end: a torch CUDA tensor of tokens -> compile ->
  32 runs -> comparison -> a torch CUDA tensor of rewards (cuda.evaluate), synchronized at the end;
* the environments' scorer, cuda.evaluate_tasks: the same candidates as fixed-stride token slots
  (N, S, 4) with counts, task ids and an active mask (all active, one task), on device tensors;
* VM instructions per second: executed instructions (the steps evaluate sums) over the execute
  part's time (evaluate's time less the compile time measured alone);
* against the CPU backend (compile_tokens + run_batch on all cores) and the CPU pipeline a user
  would otherwise build: copy the tokens to the host, CPython compile + exec + call + compare per
  candidate, copy the rewards back (run up to --cpython-max candidates).

Before timing, the GPU's pass counts are checked equal to the CPU backend's on every size.
Needs a GPU, cupy and torch; results go to experiments/results/bench_gpu.{json,md}.

    python experiments/bench_gpu.py            # N = 1 .. 1e6
    python experiments/bench_gpu.py --quick    # N = 1 .. 1e3, smoke test
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
from pathlib import Path

import numpy as np

from vramgym.compiler import compile_tokens, tokenize
from vramgym.vm import encode_results, encode_tuples, run_batch
from vramgym.vm import cuda

TASK = """def {F}({A}: int, {B}: int) -> int:
    # the greatest common divisor, {variant}
    while {B} != 0:
        {A}, {B} = {B}, {A} % {B}
    return {A}{bug}
"""
SIGNATURE = (("int", "int"), "int")


def candidates(n: int, seed: int = 0) -> list[str]:
    """n textual variants of one task; about half carry a bug (wrong results or a trap)."""
    r = random.Random(seed)
    names = ["a", "b", "x", "y", "m", "n", "p", "q", "u", "v"]
    bugs = ["", "", "", " + 1", " * 0", " // ({A} - {A})"]
    out = []
    for i in range(n):
        a, b = r.sample(names, 2)
        bug = r.choice(bugs).format(A=a)
        out.append(TASK.format(F=r.choice(["gcd", "f", "solve"]), A=a, B=b, variant=i, bug=bug))
    return out


def tests(seed: int = 1):
    r = random.Random(seed)
    args = [(r.randint(0, 10**6), r.randint(0, 10**6)) for _ in range(32)]
    import math
    return args, encode_tuples(args, SIGNATURE[0]), encode_results([math.gcd(a, b) for a, b in args], "int")


def pack_tokens(sources):
    toks = [tokenize(s) for s in sources]
    offsets = np.zeros(len(toks) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in toks], out=offsets[1:])
    return np.concatenate(toks).astype(np.int32), offsets


def slots(flat, offsets):
    """Packed tokens as fixed-stride slots (N, S, 4) and counts, the layout of evaluate_tasks."""
    counts = np.diff(offsets)
    width = int(counts.max())
    used = np.arange(width)[None, :] < counts[:, None]
    out = np.zeros((len(counts), width, 4), dtype=np.int32)
    out[used] = flat
    return out, counts


def timed(fn, repeat: int, sync):
    best = float("inf")
    for _ in range(repeat):
        sync()
        t = time.perf_counter()
        out = fn()
        sync()
        best = min(best, time.perf_counter() - t)
    return best, out


def cpython_pipeline(tok_dev, sources, args, want):
    """What a user builds without vramgym: tokens to the host, CPython per candidate, rewards back."""
    import torch
    tok_dev.cpu()  # the copy to the host (CPython then reads the sources those tokens spell)
    rewards = []
    for src in sources:
        ns: dict = {}
        try:
            exec(compile(src, "<candidate>", "exec"), ns)
            f = next(v for k, v in ns.items() if callable(v) and not k.startswith("__"))
        except Exception:
            rewards.append(0.0)
            continue
        ok = 0
        for (a, b), w in zip(args, want):
            try:
                ok += f(a, b) == w
            except Exception:
                pass
        rewards.append(ok / len(args))
    return torch.tensor(rewards, device="cuda")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cpython-max", type=int, default=20_000)
    ap.add_argument("--cpu-max", type=int, default=200_000)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    opts = ap.parse_args()
    import cupy as cp
    import torch
    if not cuda.available() or not torch.cuda.is_available():
        raise SystemExit("bench_gpu needs a CUDA GPU with cupy and torch")
    sizes = [1, 10, 100, 1000] if opts.quick else [1, 10, 100, 1000, 10_000, 100_000, 1_000_000]
    repeat = 1 if opts.quick else opts.repeat
    args, inputs, expected = tests()
    want = [int(v) for v in expected.words[1::2]]
    sync = torch.cuda.synchronize
    cuda.evaluate(*pack_tokens(candidates(64)), inputs, expected, signature=SIGNATURE)  # build + warm up
    rows = []
    for n in sizes:
        sources = candidates(n)
        flat, offsets = pack_tokens(sources)
        tok = torch.from_numpy(flat).cuda()
        off = torch.from_numpy(offsets).cuda()
        row = {"N": n, "tokens_per_program": round(len(flat) / n, 1)}
        t_comp, _ = timed(lambda: cuda.compile_device("tokens", tok, off), repeat, sync)
        t_eval, ev = timed(lambda: cuda.evaluate(tok, off, inputs, expected, signature=SIGNATURE), repeat, sync)
        steps = int(ev.steps.sum().item())
        sl, counts = slots(flat, offsets)
        task_args = [torch.from_numpy(x).cuda() for x in (sl, counts, np.zeros(n, np.int64), np.ones(n, bool))]
        enc = [tuple(torch.from_numpy(a).cuda() for a in (e.words, e.offsets)) for e in (inputs, expected)]
        kinds = torch.zeros(1, dtype=torch.int32, device="cuda")  # KIND_INT
        t_tasks, tk = timed(lambda: cuda.evaluate_tasks(*task_args, *enc, len(args), kinds), repeat, sync)
        if not torch.equal(tk[0], ev.passed):
            raise SystemExit(f"N={n}: evaluate_tasks and evaluate pass counts differ")
        # Correctness before any figure: the CPU backend's pass counts on the same candidates.
        cpu_c = compile_tokens(flat, offsets)
        if n <= opts.cpu_max:
            t_cpu, res = timed(lambda: run_batch(compile_tokens(flat, offsets).to_programs(), inputs, expected=expected),
                               repeat, lambda: None)
            cpu_pass = res.passed.reshape(n, -1).sum(1)
            if not np.array_equal(cpu_pass, ev.passed.cpu().numpy()):
                raise SystemExit(f"N={n}: GPU and CPU pass counts differ")
            row.update(cpu_backend_s=t_cpu, cpu_backend_evals_per_s=n / t_cpu)
        assert cpu_c.ok.all()
        row.update(gpu_compile_s=t_comp, gpu_programs_compiled_per_s=n / t_comp, gpu_evaluate_s=t_eval,
                   gpu_evals_per_s=n / t_eval, gpu_tasks_s=t_tasks, gpu_tasks_evals_per_s=n / t_tasks,
                   vm_instructions=steps,
                   gpu_vm_instructions_per_s=steps / max(t_eval - t_comp, 1e-9))
        if n <= opts.cpython_max:
            t_py, _ = timed(lambda: cpython_pipeline(tok, sources, args, want), 1, sync)
            row.update(cpython_pipeline_s=t_py, cpython_evals_per_s=n / t_py, speedup_vs_cpython=t_py / t_eval)
        rows.append(row)
        print(json.dumps(row))
        del tok, off, ev, task_args, tk
        cp.get_default_memory_pool().free_all_blocks()
    meta = {"device": cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode(),
            "cupy": cp.__version__, "torch": torch.__version__, "host": platform.node(), "cpus": os.cpu_count(),
            "quick": opts.quick, "repeat": repeat}
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_gpu.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    cols = ["N", "gpu_programs_compiled_per_s", "gpu_evals_per_s", "gpu_tasks_evals_per_s",
            "gpu_vm_instructions_per_s",
            "cpu_backend_evals_per_s", "cpython_evals_per_s", "speedup_vs_cpython", "gpu_evaluate_s"]
    lines = [f"GPU benchmark on {meta['device']} ({meta['cpus']} CPUs), best of {repeat}", "",
             "| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(f"{r[c]:.3g}" if isinstance(r.get(c), float) else str(r.get(c, "-"))
                                       for c in cols) + " |")
    (out / "bench_gpu.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
