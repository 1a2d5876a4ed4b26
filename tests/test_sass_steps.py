"""experiments/sass_steps.py's walk over an interpreter loop, on a hand-written SASS listing (no
nvcc, nvdisasm or GPU): the switch's compares are followed as the opcode takes them, other checks
both ways, and the shortest way back to the dispatch is one VM step."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "experiments" / "sass_steps.py"


def _load():
    spec = importlib.util.spec_from_file_location("vramgym_sass_steps", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _listing(lines: list[str]) -> str:
    out, addr = [".text.k:"], 0
    for ln in lines:
        if ln.startswith(".L_x_"):
            out.append(ln)
            continue
        out.append(f"        /*{addr:04x}*/ {ln} ;")
        addr += 16
    return "\n".join(out) + "\n//---- end\n"


# A loop: fuel check (exits), fetch, dispatch tree over opcodes 1..4, handlers, back edge.
# op 1: 2 instructions then back; op 2: a trap check (exits or goes on) then 1; op 3: 4; op 4 and
# every other opcode: the default, which exits (a trap).
LOOP = [
    "MOV R1, RZ",
    ".L_x_0:",
    "ISETP.GE.AND P0, PT, R4, R5, PT",       # fuel
    "@P0 BRA `(.L_x_9)",
    "LDG.E.CONSTANT R2, desc[UR4][R6.64]",
    "LOP3.LUT R3, R2, 0xff, RZ, 0xc0, !PT",  # the dispatch
    "ISETP.GT.AND P0, PT, R3, 0x2, PT",
    "@P0 BRA `(.L_x_3)",
    "ISETP.NE.AND P0, PT, R3, 0x1, PT",
    "@P0 BRA `(.L_x_2)",
    "VIADD R4, R4, 0x1",                     # op 1
    "BRA `(.L_x_0)",
    ".L_x_2:",
    "ISETP.NE.AND P0, PT, R3, 0x2, PT",
    "@P0 BRA `(.L_x_9)",
    "ISETP.GE.AND P1, PT, R7, RZ, PT",       # op 2: a check whose outcome the walk cannot know
    "@!P1 BRA `(.L_x_9)",
    "VIADD R4, R4, 0x1",
    "BRA `(.L_x_0)",
    ".L_x_3:",
    "ISETP.NE.AND P0, PT, R3, 0x3, PT",
    "@P0 BRA `(.L_x_9)",
    "LOP3.LUT R3, R3, 0x7, RZ, 0xc0, !PT",   # op 3 overwrites the opcode's register,
    "ISETP.NE.AND P0, PT, R3, 0x3, PT",      # so this compare is not the switch's: both ways
    "@P0 BRA `(.L_x_4)",
    "NOP",
    ".L_x_4:",
    "BRA `(.L_x_0)",
    ".L_x_9:",
    "EXIT",
]


def test_walk_counts_one_step_per_opcode():
    m = _load()
    insns, labels = m.parse_listing(_listing(LOOP), "k")
    d = next(i for i, x in enumerate(insns) if x[2] == "LOP3.LUT")
    assert insns[d][3].startswith("R3,")
    # dispatch(1) + 2 compares and branches(4) + handler(2) + fuel check(2) + fetch(1)
    assert m.step_cost(insns, labels, d, "R3", 1) == (10, False)
    # + the third compare and branch, the unknown check's two, the handler's two
    assert m.step_cost(insns, labels, d, "R3", 2) == (14, False)
    # after the opcode's register is overwritten its compare goes both ways: the taken branch skips
    # the NOP (12); read as the switch's (R3 still 3) it would fall through (13)
    assert m.step_cost(insns, labels, d, "R3", 3) == (12, False)
    # opcodes that only reach EXIT never come back
    assert m.step_cost(insns, labels, d, "R3", 4, limit=50)[1] is True
    assert m.step_cost(insns, labels, d, "R3", 0, limit=50)[1] is True
    path = []
    m.step_cost(insns, labels, d, "R3", 1, trace=path)
    assert [insns[i][2] for i in path][:3] == ["ISETP.GT.AND", "BRA", "ISETP.NE.AND"]


def test_predicate_value_only_from_the_switch_register():
    m = _load()
    insns, labels = m.parse_listing(_listing(LOOP), "k")
    br = next(i for i, x in enumerate(insns) if x[1] == "@P0" and x[2] == "BRA" and i > 5)
    assert m.predicate_value(insns, br, "P0", "R3", 5) is True    # 5 > 2
    assert m.predicate_value(insns, br, "P0", "R3", 2) is False
    assert m.predicate_value(insns, br, "P0", "R9", 5) is None    # another register: unknown


# The same loop with nvcc's jump table (--jump-table-density): the case index is the opcode minus
# 1, a range check sends others to the default (EXIT), and BRX goes to the opcode's own target.
JT = [
    ".L_x_0:",
    "ISETP.GE.AND P0, PT, R4, R5, PT",       # fuel
    "@P0 BRA `(.L_x_9)",
    "LDG.E.CONSTANT R2, desc[UR4][R6.64]",
    "LOP3.LUT R3, R2, 0xff, RZ, 0xc0, !PT",  # the dispatch
    "VIADD R3, R3, 0xffffffff",              # first case 1
    "ISETP.GT.U32.AND P0, PT, R3, 0x7, PT",
    "@P0 BRA `(.L_x_9)",
    "LDC R8, c[0x2][R3]",                    # opcodes 4 .. 8: the default's label
    'BRX R8 -0x90 (*"BRANCH_TARGETS .L_x_1,.L_x_2,.L_x_3,.L_x_9,.L_x_9,.L_x_9,.L_x_9,.L_x_9"*)',
    ".L_x_1:",
    "VIADD R4, R4, 0x1",                     # op 1: 2
    "BRA `(.L_x_0)",
    ".L_x_2:",
    "NOP",                                   # op 2: 3
    "VIADD R4, R4, 0x1",
    "BRA `(.L_x_0)",
    ".L_x_3:",
    "NOP",                                   # op 3: 4
    "NOP",
    "VIADD R4, R4, 0x1",
    "BRA `(.L_x_0)",
    ".L_x_9:",
    "EXIT",
]


def test_walk_follows_a_jump_table():
    m = _load()
    insns, labels = m.parse_listing(_listing(JT), "k")
    d, reg = m.find_dispatch(insns, labels)   # found by its jump table: no compares with constants
    assert (d, reg) == (3, "R3") and m.jump_table(insns, d, reg) == (8, 1)
    # dispatch(1) + VIADD, range check and branch, LDC, BRX (5) + handler + fuel check(2) + fetch(1)
    assert m.step_cost(insns, labels, d, reg, 1) == (11, False)
    assert m.step_cost(insns, labels, d, reg, 2) == (12, False)
    assert m.step_cost(insns, labels, d, reg, 3) == (13, False)
    # the default's targets and outside the table: EXIT only
    for op in (4, 8, 9, 0):
        assert m.step_cost(insns, labels, d, reg, op, limit=50)[1] is True


def _tool(m, name):
    try:
        return m.find_tool(name)
    except SystemExit:
        return None


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """The default build's cubin (nvcc, sm_90, the backend's NVRTC options) and ptxas's report."""
    m = _load()
    if not _tool(m, "nvcc") or not _tool(m, "nvdisasm"):
        pytest.skip("needs nvcc and nvdisasm (pip install nvidia-cuda-nvdisasm)")
    cubin = tmp_path_factory.mktemp("sass") / "k.cubin"
    return m, cubin, m.build_cubin([], cubin)


HOT = ("LOAD_VAR", "LOAD_CONST", "STORE_VAR", "JUMP_IF_FALSE", "BINARY_ADD", "COMPARE_NE")


def test_scorer_step_is_no_longer_than_evaluates(kernels):
    """The environments' scorer (vg_execute_tasks_local) runs a VM step no longer than evaluate's
    kernel: its program's code address stays in a register (cuda_kernels.cu's hold) instead of
    being recomputed, a 64-bit multiply-add, at every step (11 more instructions before it). Its
    fuel, a task's budget, is in a register too, where evaluate's comes from the constant bank at
    every step (2 instructions), so it may be shorter. Neither reloads a spilled register in a
    step: evaluate spills nothing under the default register bound, the scorer at most a word
    that it stores and reloads once per run."""
    from vramgym.vm import cuda, opcodes
    m, cubin, report = kernels
    cost = {}
    for k in ("vg_execute_local_eval", "vg_execute_tasks_local"):
        insns, labels = m.disassemble(cubin, k)
        d, reg = m.find_dispatch(insns, labels)
        cost[k] = {}
        for o in HOT:
            walk = []
            cost[k][o] = m.step_cost(insns, labels, d, reg, opcodes.OP_BY_NAME[o].code, trace=walk)[0]
            # spill slots lie past the local VM stack in the thread's frame ([R1 + offset])
            for i in walk:
                _, _, op, ops = insns[i]
                slot = re.search(r"\[R1\+(0x[0-9a-f]+)\]", ops)
                assert not (op.startswith(("LDL", "STL")) and slot and int(slot.group(1), 16) >= 4 * cuda.LOCAL_STACK), \
                    (k, o, insns[i])
        spill = re.search(rf"entry function '{k}'.*?(\d+) bytes spill stores", report, re.S)
        assert spill and int(spill.group(1)) <= (4 if k == "vg_execute_tasks_local" else 0), (k, spill.group(1))
    for o in HOT:
        assert cost["vg_execute_tasks_local"][o] <= cost["vg_execute_local_eval"][o], cost
