"""SASS instructions per VM step of the GPU interpreter, counted statically, per opcode.

No GPU needed: nvcc compiles vm/csrc/cuda_kernels.cu for sm_90 (the options cuda.py gives NVRTC),
nvdisasm disassembles one execute kernel, and this script walks its interpreter loop. The loop's
dispatch is the `LOP3.LUT Rd, Rw, 0xff, ...` (w & 0xFF) whose result the most branches compare
with constants. For each opcode the walk starts there with Rd = the opcode, follows the branches
that compare Rd with a constant (the switch's decision tree) the way the opcode takes them, takes
every other conditional branch both ways, and counts the instructions of the shortest way back
to the dispatch: one whole VM step on its non-trapping path (fetch, fuel and bounds checks,
decode, dispatch, handler, back edge). Handlers with a loop inside (BUILD_LIST, REVERSE...)
count their shortest trip; an opcode whose shortest way back passes through the end of a run
(RETURN from the entry function) is marked.

What this is not: a timing. The issue rate of a warp also depends on dependency latencies and
on how many warps hide them (Nsight Compute on a GPU: `gpu_check.sh profile`). Session 5's
profile counted about 40 SASS instructions per VM step on the gcd workload.

Needs nvcc and nvdisasm (`pip install nvidia-cuda-nvdisasm` puts it under site-packages'
nvidia/cu13/bin; this script finds it there or on PATH).

    python experiments/sass_steps.py [--kernel vg_execute_local_eval] [-D VG_SWITCH_FUSE=1] [--out DIR]
"""
from __future__ import annotations

import argparse
import heapq
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

INSN = re.compile(r"/\*([0-9a-f]+)\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z0-9_.]+)\s*([^;]*);")
LABEL = re.compile(r"^(\.L_x_\d+):")
JUMP_TARGETS = re.compile(r'BRANCH_TARGETS ([^"]*)"')
ISETP = re.compile(r"ISETP\.(EQ|NE|LT|LE|GT|GE)(\.U32)?\.AND$")


def find_tool(name: str) -> str:
    p = shutil.which(name)
    if p:
        return p
    import site
    for d in site.getsitepackages() + [site.getusersitepackages()]:
        for sub in ("nvidia/cu13/bin", "nvidia/cuda_nvdisasm/bin", "nvidia/cu12/bin"):
            c = Path(d) / sub / name
            if c.exists():
                return str(c)
    raise SystemExit(f"{name} not found: on PATH or `pip install nvidia-cuda-{name}`")


def build_cubin(defines: list[str], out: Path, extra: list[str] = ()) -> str:
    """nvcc -cubin of the kernels (the backend's NVRTC options, then `extra`); returns ptxas's -v
    report (registers, spills)."""
    from vramgym.vm import cuda
    opts = list(cuda.nvrtc_options()) + list(extra)
    for d in defines:  # -D NAME=V overrides the option of the same name
        name = d.split("=")[0]
        opts = [o for o in opts if not o.startswith(f"-D{name}=")] + [f"-D{d}"]
    cmd = [find_tool("nvcc"), "-arch=sm_90", "-cubin", *opts, f"-I{ROOT / 'vm' / 'csrc'}",
           f"-I{ROOT / 'compiler' / 'csrc'}", str(ROOT / "vm" / "csrc" / "cuda_kernels.cu"), "-o", str(out),
           "-Xptxas", "-v"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stderr)
    return r.stderr


def disassemble(cubin: Path, kernel: str):
    text = subprocess.run([find_tool("nvdisasm"), "-c", str(cubin)], capture_output=True, text=True,
                          check=True).stdout
    return parse_listing(text, kernel)


def parse_listing(text: str, kernel: str):
    """nvdisasm's listing of one kernel: [(address, guard, opcode, operands)], {label: index}."""
    start = text.find(f".text.{kernel}:")
    if start < 0:
        raise SystemExit(f"kernel {kernel} not in the cubin")
    end = text.find("//----", start)
    insns, labels = [], {}
    for line in text[start:end if end > 0 else None].splitlines():
        m = LABEL.match(line.strip())
        if m:
            labels[m.group(1)] = len(insns)
            continue
        m = INSN.search(line)
        if m:
            guard = (m.group(2) or "").strip()
            insns.append((int(m.group(1), 16), guard, m.group(3), m.group(4).strip()))
    return insns, labels


def branch_target(ops: str, labels: dict[str, int]) -> int | None:
    m = re.search(r"`\((\.L_x_\d+)\)", ops)
    return labels.get(m.group(1)) if m else None


def dest_reg(op: str, ops: str) -> str | None:
    if op.startswith(("ST", "BRA", "ISETP", "BSSY", "BSYNC", "BREAK", "EXIT", "RET", "WARPSYNC", "BAR", "RED",
                      "NOP", "CALL")):
        return None
    first = ops.split(",")[0].strip()
    return first if re.fullmatch(r"R\d+", first) else None


def jump_table(insns, i: int, reg: str, span: int = 30) -> tuple[int, int] | None:
    """(index of the BRX, first case) when the `w & 0xFF` at i feeds a jump table (nvcc
    --jump-table-density): a BRX with its BRANCH_TARGETS within `span` instructions, the case
    index being reg plus the constant of the `VIADD Rx, reg, c` between them (c = -first case)."""
    base = 0
    for k in range(i + 1, min(i + span, len(insns))):
        _, _, op, ops = insns[k]
        m = re.match(rf"R\d+, {reg}, (0x[0-9a-f]+)$", ops)
        if op == "VIADD" and m:
            c = int(m.group(1), 16)
            base = -(c - (1 << 32) if c >= 1 << 31 else c)
        if op == "BRX":
            return (k, base) if JUMP_TARGETS.search(ops) else None
    return None


def find_dispatch(insns, labels) -> tuple[int, str]:
    """The interpreter's w & 0xFF: among the `LOP3.LUT Rd, Rw, 0xff` whose result many branches
    compare with constants (a compare tree) or that feeds a jump table (a BRX), the first (most
    compared first) from which LOAD_CONST's walk comes back (a register number is reused across a
    kernel, so the count alone can pick another decode). Returns (instruction index, register)."""
    from vramgym.vm import opcodes
    cands = []
    for i, (_, _, op, ops) in enumerate(insns):
        if op == "LOP3.LUT" and re.match(r"R\d+, R\d+, 0xff, RZ, 0xc0", ops):
            rd = ops.split(",")[0]
            n = sum(1 for _, _, o2, a2 in insns[i:i + 400]
                    if ISETP.match(o2) and re.match(rf"P\d, PT, {rd}, (0x[0-9a-f]+|\d+), PT", a2))
            jt = jump_table(insns, i, rd)
            if jt:
                n = max(n, len(JUMP_TARGETS.search(insns[jt[0]][3]).group(1).split(",")))
            if n >= 8:
                cands.append((-n, i, rd))
    for _, i, rd in sorted(cands):
        if not step_cost(insns, labels, i, rd, opcodes.OP_BY_NAME["LOAD_CONST"].code, limit=200)[1]:
            return i, rd
    raise SystemExit("no interpreter dispatch found in this kernel")


def predicate_value(insns, i: int, pred: str, reg: str, op_value: int) -> bool | None:
    """The value of predicate `pred` at branch i when set by a compare of `reg` with a constant
    in the same straight-line run of code (else None)."""
    for k in range(i - 1, max(i - 12, -1), -1):
        _, guard, op, ops = insns[k]
        if op.startswith("BRA"):
            return None
        if ops.startswith(pred + ","):
            m = ISETP.match(op)
            a = re.match(rf"{pred}, PT, {reg}, (0x[0-9a-f]+|-?\d+), PT$", ops)
            if guard or not m or not a:
                return None
            c = int(a.group(1), 0)
            x = op_value
            return {"EQ": x == c, "NE": x != c, "LT": x < c, "LE": x <= c, "GT": x > c, "GE": x >= c}[m.group(1)]
    return None


def step_cost(insns, labels, d: int, reg: str, op_value: int, limit: int = 400,
              trace: list | None = None) -> tuple[int, bool]:
    """Instructions on the shortest way from the dispatch at d back to it for opcode op_value,
    and whether that way leaves the interpreter loop (passes an EXIT or the run's end). A jump
    table's BRX goes to the opcode's own target."""
    jt = jump_table(insns, d, reg)
    # state: (instruction index, whether reg still holds the opcode)
    dist = {(d + 1, True): 1}
    prev = {}
    heap = [(1, d + 1, True)]
    while heap:
        c, i, valid = heapq.heappop(heap)
        if c > limit:
            break
        if dist.get((i, valid), 1 << 30) < c:
            continue
        if i == d:
            if trace is not None:
                s = (i, valid)
                while s in prev:
                    s = prev[s]
                    trace.append(s[0])
                trace.reverse()
            return c, False
        if i >= len(insns):
            continue
        _, guard, op, ops = insns[i]
        nxt = []
        v2 = valid and dest_reg(op, ops) != reg
        if op == "EXIT" and not guard:
            continue
        if op == "BRX":   # an indirect branch: the dispatch's jump table, else a dead end
            m = JUMP_TARGETS.search(ops)
            targets = m.group(1).split(",") if m and jt and i == jt[0] else []
            k = op_value - (jt[1] if jt else 0)
            nxt = [labels.get(targets[k])] if 0 <= k < len(targets) else []
        elif op.startswith("BRA"):
            t = branch_target(ops, labels)
            if not guard:
                nxt = [t]
            else:
                pv = None
                if valid:
                    neg = guard.startswith("@!")
                    pv = predicate_value(insns, i, guard.lstrip("@!"), reg, op_value)
                    pv = None if pv is None else (pv != neg)
                nxt = [t] if pv is True else [i + 1] if pv is False else [t, i + 1]
        else:
            nxt = [i + 1]
        for j in nxt:
            if j is None:
                continue
            if dist.get((j, v2), 1 << 30) > c + 1:
                dist[(j, v2)] = c + 1
                prev[(j, v2)] = (i, valid)
                heapq.heappush(heap, (c + 1, j, v2))
    return limit, True


def op_mix(workload: str, n: int = 64, fused: bool = False) -> dict[int, int]:
    """Opcode -> executed count on the CPU for one of bench_gpu.py's workloads ("gcd": its
    candidates on its 32 tests; "loop": the loop-heavy ones at 2,000 iterations), through vm.h's
    switch interpreter (experiments/op_mix.cpp with its VG_ON_STEP hook). fused: dispatch code ->
    count instead, each program run through its fuse.h translation as VG_FUSED_CODE's kernels run
    it (codes from 64: superinstructions), with key -1 -> the VM steps executed."""
    import struct
    import numpy as np
    sys.path.insert(0, str(ROOT / "experiments"))
    import bench_gpu
    from vramgym.vm import cpu
    from vramgym.vm import opcodes as oc
    if workload == "gcd":
        sources, (_, enc, _) = bench_gpu.candidates(n), bench_gpu.tests()
    else:
        sources, (_, enc) = bench_gpu.loop_candidates(n), bench_gpu.loop_tests(2000)
    exe = Path(tempfile.gettempdir()) / f"vramgym_op_mix{'_fused' if fused else ''}"
    subprocess.run(["g++", "-O2", "-std=c++17", "-DVG_NO_THREADED_DISPATCH", f"-DVG_FUSED_CODE={int(fused)}",
                    f"-I{ROOT / 'vm' / 'csrc'}", str(ROOT / "experiments" / "op_mix.cpp"), "-o", str(exe)],
                   check=True)
    blob = [struct.pack("<7i", len(sources), len(enc.offsets) - 1, oc.DEFAULT_FUEL, oc.DEFAULT_MAX_DEPTH,
                        oc.DEFAULT_HEAP, oc.DEFAULT_MAX_LISTS, 4096)]
    for src in sources:
        code, _, _ = cpu.compile_one(src.encode())
        entry = cpu.validate(code, 0)[1] if code is not None else -1
        code = code if code is not None else np.zeros(0, np.uint32)
        blob += [struct.pack("<2i", len(code), entry), code.astype("<u4").tobytes()]
    blob += [np.asarray(enc.offsets, "<i8").tobytes(), np.asarray(enc.words, "<i4").tobytes()]
    out = subprocess.run([str(exe)], input=b"".join(blob), capture_output=True, check=True).stdout.decode()
    mix = {}
    for line in out.splitlines():
        f = line.split()
        if fused and f[0] == "d":
            mix[int(f[1])] = int(f[2])
        elif fused and f[0] == "runs":
            mix[-1] = int(f[3])
        elif not fused and f[0].isdigit():
            mix[int(f[0])] = int(f[1])
    return mix


# The interpreter's roofline on an H100 or H200 (SXM): 132 SMs x 4 warp schedulers x ~1.98 GHz, one
# instruction issued per scheduler and cycle at best, one VM step per lane of a warp step (32 when
# no lane has diverged or finished). Session 41's profile on an H200 measured 0.5 issued.
SMS, SCHEDULERS, CLOCK_HZ, LANES = 132, 4, 1.98e9, 32


def ceiling(sass_per_step: float, issue: float = 1.0, lanes: float = LANES) -> float:
    """VM steps per second that `sass_per_step` allows at `issue` instructions per scheduler-cycle."""
    return SMS * SCHEDULERS * CLOCK_HZ * issue * lanes / sass_per_step


def main() -> None:
    from vramgym.vm import opcodes
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernel", default="vg_execute_local_eval")
    ap.add_argument("-D", dest="defines", action="append", default=[], help="NAME=VALUE for nvcc (repeatable)")
    ap.add_argument("--nvcc", action="append", default=[], help="one more nvcc option (repeatable), e.g. "
                    "--nvcc=--jump-table-density=0")
    ap.add_argument("--trace", action="append", default=[], help="print an opcode's path (repeatable)")
    ap.add_argument("--out", type=Path, default=None, help="write sass_steps.json here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        log = build_cubin(a.defines, cubin, a.nvcc)
        insns, labels = disassemble(cubin, a.kernel)
    regs = re.search(rf"entry function '{a.kernel}'.*?(\d+) bytes spill stores.*?Used (\d+) registers", log, re.S)
    if "VG_FUSED_CODE=1" in a.defines:
        # ptxas splits this build's switch (plain opcodes and superinstruction codes up to 158) into
        # compare trees and several small jump tables, which find_dispatch does not follow: what
        # can be counted is the kernel's registers and spill, and the dispatches a VM step takes
        print(f"{a.kernel}: {len(insns)} instructions, {regs.group(2) if regs else '?'} registers, "
              f"{regs.group(1) if regs else '?'} bytes of spill stores (VG_FUSED_CODE: no static walk)")
        for w in ("gcd", "loop"):
            mix = op_mix(w, fused=True)
            steps = mix.pop(-1)
            total = sum(mix.values())
            fx = sum(v for k, v in mix.items() if k >= 64)
            print(f"{w}: {steps / total:.2f} VM steps a dispatch ({total} dispatches for {steps} steps), "
                  f"{fx / total:.0%} of the dispatches superinstructions")
        return
    d, reg = find_dispatch(insns, labels)
    rows = {}
    for o in opcodes.OPS:
        n, left = step_cost(insns, labels, d, reg, o.code)
        rows[o.name] = {"code": o.code, "sass": n, "leaves_loop": left}
    print(f"{a.kernel}: {len(insns)} instructions, {regs.group(2) if regs else '?'} registers, "
          f"{regs.group(1) if regs else '?'} bytes of spill stores; "
          f"dispatch at {insns[d][0]:#x} on {reg}")
    for name, r in rows.items():
        print(f"  {name:22s} {r['sass']:4d}{'  (leaves the loop)' if r['leaves_loop'] else ''}")
    for name in a.trace:
        path = []
        step_cost(insns, labels, d, reg, opcodes.OP_BY_NAME[name].code, trace=path)
        print(f"{name}:")
        for i in path:
            print(f"  {insns[i][0]:6x}  {insns[i][1]:6s} {insns[i][2]} {insns[i][3]}")
    weighted = {}
    for w in ("gcd", "loop"):
        mix = op_mix(w)
        total = sum(mix.values())
        by_code = {r["code"]: r["sass"] for r in rows.values()}
        weighted[w] = sum(by_code.get(k, 0) * v for k, v in mix.items()) / total
        top = sorted(mix.items(), key=lambda kv: -kv[1])[:8]
        print(f"{w}: {weighted[w]:.1f} SASS instructions per VM step (weighted by the executed opcodes); "
              "top: " + ", ".join(f"{opcodes.OP_BY_CODE[k].name} {v / total:.0%}" for k, v in top))
        print(f"  ceiling on an H100/H200, 32 lanes a warp step: {ceiling(weighted[w]):.3g} VM steps/s at one "
              f"instruction issued per scheduler-cycle, {ceiling(weighted[w], 0.5):.3g} at 0.5 (measured, session 41)")
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "sass_steps.json").write_text(json.dumps(
            {"kernel": a.kernel, "defines": a.defines, "registers": int(regs.group(2)) if regs else None,
             "spill_store_bytes": int(regs.group(1)) if regs else None,
             "per_opcode": rows, "weighted": weighted,
             "ceiling_issue_1": {w: ceiling(v) for w, v in weighted.items()}}, indent=1))


if __name__ == "__main__":
    main()
