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

The last rows compare the VM with and without its peephole superinstructions (cuda.SWITCH_FUSE,
vm.h's VG_SWITCH_FUSE) on the same candidates (--switch-fuse N ...).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np

from vramgym.compiler import compile_tokens, tokenize
from vramgym.vm import encode_results, encode_tuples, run_batch
from vramgym.vm import cuda
sys.path.insert(0, str(Path(__file__).resolve().parent))  # (bench_out, when loaded by path as in the tests)
from bench_out import OUT_HELP, results_dir

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


# The steady-state instruction rate: loop-heavy candidates (lists, indexing, // and %, branches,
# a call) that run ~64,000 VM instructions per test, so per-program set-up and a warp's uneven
# run lengths weigh little. The 32 tests of a candidate share n (lanes of a warp run equally long)
# and differ in k.
LOOP_TASK = """def {F}(n: int, k: int) -> int:
    xs = [0] * 16
    s = 0
    i = 0
    while i < n:
        j = i % 16
        xs[j] += (i * k) % 7
        if xs[j] > {T}:
            s = s + step(xs[j], k)
            xs[j] = 0
        i += 1
    return s{bug}


def step(a: int, b: int) -> int:
    return a // 3 + abs(b) % 5
"""


def loop_candidates(n: int, seed: int = 2) -> list[str]:
    r = random.Random(seed)
    return [LOOP_TASK.format(F=r.choice(["f", "g", "loop"]), T=r.randint(20, 120), bug=r.choice(["", "", " + 1"]))
            for _ in range(n)]


def loop_tests(n_iter: int, seed: int = 3):
    r = random.Random(seed)
    args = [(n_iter, r.randint(-1000, 1000)) for _ in range(32)]
    return args, encode_tuples(args, ["int", "int"])


def steady_rows(sizes, repeat: int, n_iter: int, check: int, warps_per_sm=(0,)):
    """VM instructions per second on long runs, for each persistent-grid size (resident warps per
    SM; 0: as many as fit); the steps are checked equal to the CPU backend's on the first `check`
    candidates first."""
    import torch
    args, inputs = loop_tests(n_iter)
    expected = encode_results([0] * len(args), "int")         # pass counts are not the point here
    sync = torch.cuda.synchronize
    rows = []
    for n in sizes:
        flat, offsets = pack_tokens(loop_candidates(n))
        tok, off = torch.from_numpy(flat).cuda(), torch.from_numpy(offsets).cuda()
        t_comp, _ = timed(lambda: cuda.compile_device("tokens", tok, off), repeat, sync)
        for wps in warps_per_sm:
            saved, cuda.EXEC_WARPS_PER_SM = cuda.EXEC_WARPS_PER_SM, wps or None
            try:
                t_eval, ev = timed(lambda: cuda.evaluate(tok, off, inputs, expected, signature=(("int", "int"), "int")),
                                   repeat, sync)
            finally:
                cuda.EXEC_WARPS_PER_SM = saved
            rows.append(steady_row(n, args, flat, offsets, ev, t_comp, t_eval, n_iter, check, wps))
        del tok, off, ev
    return rows


def steady_row(n, args, flat, offsets, ev, t_comp, t_eval, n_iter, check, wps):
    """One steady row, after its first `check` candidates' steps equal the CPU backend's."""
    _, inputs = loop_tests(n_iter)
    k = min(n, check)
    sub_off = offsets[: k + 1]
    res = run_batch(compile_tokens(flat[: sub_off[-1]], sub_off).to_programs(), inputs)
    if not np.array_equal(res.steps.reshape(k, -1).astype(np.int64).sum(1), ev.steps[:k].cpu().numpy()):
        raise SystemExit(f"steady N={n}: GPU and CPU step counts differ")
    if (res.status != 0).any():
        raise SystemExit(f"steady N={n}: a run trapped (status {np.unique(res.status)})")
    steps = int(ev.steps.sum().item())
    row = {"N": n, "tests": len(args), "loop_iterations": n_iter, "vm_instructions": steps,
           "warps_per_sm": wps or cuda.device().resident_warps("vg_execute_local_eval"),
           "instructions_per_run": steps / (n * len(args)), "gpu_compile_s": t_comp, "gpu_evaluate_s": t_eval,
           "gpu_vm_instructions_per_s": steps / max(t_eval - t_comp, 1e-9)}
    print(json.dumps(row))
    return row


# (cuda.SWITCH_FUSE, cuda.EXEC_MIN_BLOCKS, cuda.PREFETCH, cuda.JUMP_TABLES, cuda.FUSED_CODE): the
# plain VM in 48 registers (10 resident blocks of 128 threads on an H100; its default); with peephole
# superinstructions in 48 registers; each word fetched a step ahead; the dispatch as a jump table,
# plain, with superinstructions and with prefetch; the plain VM in 40 registers (12 blocks: 48 warps
# an SM instead of 40, the same SASS a step and no spill in one, sass_steps.py in session 43), with
# and without jump tables; the translated superinstructions (each warp translates its program
# first, session 44) in 48 registers (68 bytes of spill), in 64 (8 blocks: 32 warps an SM, no
# spill; unbounded takes the same 64) and with jump tables. The first is the reference the others must equal. (The
# plain and peephole VMs unbounded, measured in session 41 on an H200, are left out for time.)
FUSE_VARIANTS = ((False, 10, False, False, False), (True, 10, False, False, False),
                 (False, 10, True, False, False), (False, 10, False, True, False), (True, 10, False, True, False),
                 (False, 10, True, True, False), (False, 12, False, False, False), (False, 12, False, True, False),
                 (False, 10, False, False, True), (False, 8, False, False, True), (False, 10, False, True, True))
VARIANT_FLAGS = ("SWITCH_FUSE", "EXEC_MIN_BLOCKS", "PREFETCH", "JUMP_TABLES", "FUSED_CODE")


def switch_fuse_rows(workloads, repeat: int):
    """The VM's build variants (FUSE_VARIANTS: superinstructions, register bound, prefetch, jump
    tables, translated superinstructions) side by side on the same candidates: evaluate's time,
    VM instructions per second, the execute kernel's registers and resident warps per SM. Pass
    counts and steps must be equal in all. A variant that does not build (an NVRTC without --jump-table-density) is reported and
    skipped."""
    import torch
    sync = torch.cuda.synchronize
    rows = []
    saved = [getattr(cuda, f) for f in VARIANT_FLAGS]
    try:
        for name, n, sources, inputs, expected, sig in workloads:
            flat, offsets = pack_tokens(sources)
            tok, off = torch.from_numpy(flat).cuda(), torch.from_numpy(offsets).cuda()
            warm = [torch.from_numpy(a).cuda() for a in pack_tokens(sources[:64])]
            results = {}
            for v in FUSE_VARIANTS:
                fuse, min_blocks, prefetch, jump_tables, fused_code = v
                for f, x in zip(VARIANT_FLAGS, v):
                    setattr(cuda, f, x)
                try:
                    cuda.evaluate(*warm, inputs, expected, signature=sig)  # build the module first
                except Exception as e:  # noqa: BLE001 (reported, and the other variants go on)
                    print(f"variant {v} did not build or run: {e!r:.300}")
                    continue
                t_comp, _ = timed(lambda: cuda.compile_device("tokens", tok, off), repeat, sync)
                t_eval, ev = timed(lambda: cuda.evaluate(tok, off, inputs, expected, signature=sig), repeat, sync)
                results[v] = ev
                steps = int(ev.steps.sum().item())
                rows.append({"workload": name, "N": n, "switch_fuse": fuse, "min_blocks": min_blocks,
                             "prefetch": prefetch, "jump_tables": jump_tables, "fused_code": fused_code,
                             "vm_instructions": steps,
                             "registers": cuda.device().k["vg_execute_local_eval"].num_regs,
                             "warps_per_sm": cuda.device().resident_warps("vg_execute_local_eval"),
                             "gpu_compile_s": t_comp, "gpu_evaluate_s": t_eval, "gpu_evals_per_s": n / t_eval,
                             "gpu_vm_instructions_per_s": steps / max(t_eval - t_comp, 1e-9)})
                print(json.dumps(rows[-1]))
            a = results[FUSE_VARIANTS[0]]
            for v in [v for v in FUSE_VARIANTS[1:] if v in results]:
                b = results[v]
                if not (torch.equal(a.passed, b.passed) and torch.equal(a.steps, b.steps)):
                    raise SystemExit(f"switch_fuse {name} N={n}: pass counts or steps differ in variant {v}")
            del tok, off, warm, results, a
    finally:
        for f, x in zip(VARIANT_FLAGS, saved):
            setattr(cuda, f, x)
    return rows


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
    ap.add_argument("--sizes", type=int, nargs="+", default=None, help="N of the main rows (default 1 .. 1e6)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cpython-max", type=int, default=20_000)
    ap.add_argument("--cpu-max", type=int, default=200_000)
    ap.add_argument("--steady-iterations", type=int, default=2000,
                    help="loop iterations per run of the steady-state instruction-rate rows (0: none)")
    ap.add_argument("--warps-per-sm", type=int, nargs="+", default=[0, 16],
                    help="persistent-grid sizes of the steady rows (resident warps per SM; 0: as many as fit)")
    ap.add_argument("--switch-fuse", type=int, nargs="*", default=None,
                    help="sizes N of the side-by-side rows with and without the VM's peephole superinstructions "
                         "(cuda.SWITCH_FUSE), on the gcd and the loop-heavy candidates (default 100000; none: skip)")
    ap.add_argument("--out", default=None, help=OUT_HELP)
    opts = ap.parse_args()
    out = results_dir(ap, opts.out, opts.quick)
    import cupy as cp
    import torch
    if not cuda.available() or not torch.cuda.is_available():
        raise SystemExit("bench_gpu needs a CUDA GPU with cupy and torch")
    sizes = opts.sizes or ([1, 10, 100, 1000] if opts.quick else [1, 10, 100, 1000, 10_000, 100_000, 1_000_000])
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
    steady = []
    if opts.steady_iterations:
        steady = steady_rows([1000] if opts.quick else [10_000, 100_000], repeat, opts.steady_iterations,
                             check=200 if opts.quick else 1000, warps_per_sm=opts.warps_per_sm)
    fuse_sizes = opts.switch_fuse if opts.switch_fuse is not None else ([1000] if opts.quick else [100_000])
    fuse = []
    if fuse_sizes:
        _, loop_inputs = loop_tests(opts.steady_iterations or 2000)
        loop_expected = encode_results([0] * 32, "int")
        work = []
        for n in fuse_sizes:
            work.append(("gcd", n, candidates(n), inputs, expected, SIGNATURE))
            work.append(("loop", max(1, n // 10), loop_candidates(max(1, n // 10)), loop_inputs, loop_expected,
                         (("int", "int"), "int")))
        fuse = switch_fuse_rows(work, repeat)
    meta = {"device": cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode(),
            "cupy": cp.__version__, "torch": torch.__version__, "host": platform.node(), "cpus": os.cpu_count(),
            "quick": opts.quick, "repeat": repeat,
            "resident_warps_per_sm": {k: cuda.device().resident_warps(k) for k in (
                "vg_execute_local_eval", "vg_execute_tasks_local", "vg_execute_global_eval")}}
    (out / "bench_gpu.json").write_text(json.dumps({"meta": meta, "rows": rows, "steady": steady,
                                                    "switch_fuse": fuse}, indent=2))
    cols = ["N", "gpu_programs_compiled_per_s", "gpu_evals_per_s", "gpu_tasks_evals_per_s",
            "gpu_vm_instructions_per_s",
            "cpu_backend_evals_per_s", "cpython_evals_per_s", "speedup_vs_cpython", "gpu_evaluate_s"]
    lines = [f"GPU benchmark on {meta['device']} ({meta['cpus']} CPUs), best of {repeat}", "",
             "| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(f"{r[c]:.3g}" if isinstance(r.get(c), float) else str(r.get(c, "-"))
                                       for c in cols) + " |")
    if steady:
        lines += ["", f"Steady state: loop-heavy candidates, {opts.steady_iterations} loop iterations per run, 32 runs each",
                  "", "| N | warps per SM | instructions per run | gpu_vm_instructions_per_s | gpu_evaluate_s |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| {r['N']} | {r['warps_per_sm']} | {r['instructions_per_run']:.0f} | "
                  f"{r['gpu_vm_instructions_per_s']:.3g} | {r['gpu_evaluate_s']:.3g} |" for r in steady]
    if fuse:
        lines += ["", "The VM's build variants side by side: superinstructions (cuda.SWITCH_FUSE), register bound "
                  "(cuda.EXEC_MIN_BLOCKS), next word fetched ahead (cuda.PREFETCH), jump tables (cuda.JUMP_TABLES), "
                  "translated superinstructions (cuda.FUSED_CODE)",
                  "", "| workload | N | switch_fuse | min blocks | prefetch | jump tables | fused code | registers | "
                  "warps per SM | gpu_vm_instructions_per_s | gpu_evals_per_s | gpu_evaluate_s |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {r['workload']} | {r['N']} | {int(r['switch_fuse'])} | {r['min_blocks']} | {int(r['prefetch'])} | "
                  f"{int(r['jump_tables'])} | {int(r.get('fused_code', 0))} | "
                  f"{r['registers']} | {r['warps_per_sm']} | {r['gpu_vm_instructions_per_s']:.3g} | "
                  f"{r['gpu_evals_per_s']:.3g} | {r['gpu_evaluate_s']:.3g} |" for r in fuse]
    (out / "bench_gpu.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
