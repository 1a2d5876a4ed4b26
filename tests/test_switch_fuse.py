"""Adversarial checks of the switch interpreter's peephole superinstructions (vm.h switch_fused,
-DVG_SWITCH_FUSE=1, what CUDA runs with cuda.SWITCH_FUSE) against the plain switch interpreter:
the same status, value, steps and list contents for any bytecode that vg::validate accepts.

- Fused sequences at the very end of functions (clamped look-ahead), next to FUNC words and
  CALLs, LOAD_CONST + CONST_EXT chains, loop heads whose STORE_VAR is a range slot, JUMPs to loop
  heads, step-0 ranges, stack sizes of nlocals .. nlocals + 3, fuel 1 .. 39.
- A FOR_RANGE or FOR_LIST as a function's last word is invalid bytecode: going on, the loop head
  skips the next word, which would be the next function's FUNC word (its body would then run in
  this frame, with slot numbers checked against the other function's locals).
- Fuel near 2^31 - 1 (VMConfig allows it): the fused fuel checks must not overflow int32.
  run_from takes the steps already executed (the lockstep interpreter's handover), so a small
  driver built here starts runs there instead of executing 2^31 steps."""
import ctypes
from pathlib import Path

import numpy as np

import native_build

from test_fused import SEED, _ModeLib, switch_library
from vramgym.vm import Program, ProgramBatch, VMConfig, cpu, encode_tuples, opcodes as oc, run_batch

ROOT = Path(__file__).resolve().parent.parent
E = oc.encode
INT32_MAX = 2**31 - 1
BINOPS = ["BINARY_ADD", "BINARY_SUB", "BINARY_MUL", "BINARY_DIV", "BINARY_MOD", "MIN", "MAX",
          "COMPARE_LT", "COMPARE_LE", "COMPARE_GT", "COMPARE_GE", "COMPARE_EQ", "COMPARE_NE"]
CJUMPS = ["JUMP_IF_FALSE", "JUMP_IF_TRUE", "JUMP_IF_FALSE_OR_POP", "JUMP_IF_TRUE_OR_POP"]
CONSTS = [-2**23, 2**23 - 1, -1, 0, 1, 2, 3, -3, 7]


def _libs():
    return switch_library("switch"), switch_library("switch fused")


def _run(so, batch, inputs, cfg):
    old = cpu.lib
    cpu.lib = lambda: _ModeLib(so, 3)  # scalar runs: the switch interpreter one by one
    try:
        return run_batch(batch, inputs, config=cfg, out_cap=8, nthreads=1, lockstep=False)
    finally:
        cpu.lib = old


def _assert_same(batch, inputs, cfg, what, progs=None):
    plain, fused = _libs()
    a, b = _run(plain, batch, inputs, cfg), _run(fused, batch, inputs, cfg)
    for field in ("status", "value", "steps", "out_list"):
        x, y = getattr(b, field), getattr(a, field)
        bad = np.flatnonzero((x != y).reshape(len(x), -1).any(axis=1))
        if len(bad):
            r = int(bad[0])
            code = progs[r // len(inputs)] if progs else what
            raise AssertionError(f"switch fused vs switch differ in {field} ({cfg}, seed {SEED}): run {r} "
                                 f"fused (status, value, steps) = {(b.status[r], b.value[r], b.steps[r])}, "
                                 f"plain = {(a.status[r], a.value[r], a.steps[r])}; code {code}")
    return a


def _body(rng, nl, length, starts):
    """Fused shapes (often cut short by the end of the function), with CONST_EXT chains, loop heads
    storing into their own range slots, stack shuffles, calls and jumps anywhere."""
    ld = lambda: (("LOAD_VAR", int(rng.integers(0, nl))) if rng.random() < 0.6
                  else ("LOAD_CONST", int(rng.choice(CONSTS))))
    body = []
    while len(body) < length:
        c = rng.random()
        if c < 0.35:
            seq = [ld(), ld(), (str(rng.choice(BINOPS)), 0)] if c < 0.23 else [ld(), (str(rng.choice(BINOPS)), 0)]
            r = rng.random()
            if r < 0.4:
                seq.append(("STORE_VAR", int(rng.integers(0, nl))))
                if rng.random() < 0.5:
                    seq.append(("JUMP", "J"))
            elif r < 0.7:
                seq.append((str(rng.choice(CJUMPS)), "J"))
            body += seq
        elif c < 0.45:
            body += [ld(), (str(rng.choice(["STORE_VAR", "JUMP_IF_FALSE", "JUMP_IF_TRUE"])), "S")]
        elif c < 0.55 and nl >= 3:
            a = int(rng.integers(0, nl - 2))
            if rng.random() < 0.4:
                body.append(("JUMP", "H"))
            body += [("FOR_RANGE", a), ("JUMP", "J"), ("STORE_VAR", int(rng.choice([a, a + 1, a + 2, int(rng.integers(0, nl))])))]
        elif c < 0.62:
            body.append(("LOAD_CONST", int(rng.integers(-2**23, 2**23))))
            body += [("CONST_EXT", int(rng.integers(0, 256))) for _ in range(int(rng.integers(1, 3)))]
            if rng.random() < 0.5:
                body.append((str(rng.choice(BINOPS)), 0))
        elif c < 0.7:
            body.append((str(rng.choice(["POP", "DUP", "DUP2", "SWAP", "UNARY_NEG", "RETURN"])), 0))
        elif c < 0.76 and len(starts) > 1:
            body.append(("CALL", "F"))
        elif c < 0.85:
            body.append((str(rng.choice(BINOPS)), 0))
        elif c < 0.92:
            body.append(("JUMP", "J"))
        else:
            body.append(ld())
    if rng.random() < 0.5:
        body = body[:length]  # a sequence cut short by the end of the function
    if rng.random() < 0.5 or (body and body[-1][0] == "FOR_RANGE"):
        body.append(("RETURN", 0))  # (a FOR_RANGE last in a function: test_for_range_skips_into_next_function)
    return body


def random_program(rng, nparams):
    nf = int(rng.integers(1, 4))
    shapes = []
    for f in range(nf):
        nl = int(rng.integers(max(nparams, 1), 7)) if f == 0 else int(rng.integers(1, 7))
        shapes.append((nparams if f == 0 else int(rng.integers(0, min(nl, 2) + 1)), nl))
    bodies, starts, pc = [], [], 0
    for np_, nl in shapes:
        starts.append(pc)
        bodies.append(_body(rng, nl, int(rng.integers(1, 14)), [0] * nf))
        pc += 1 + len(bodies[-1])
    words = []
    for (np_, nl), body, s in zip(shapes, bodies, starts):
        end = s + 1 + len(body)
        words.append(E("FUNC", np_ | nl << 8))
        for j, (op, arg) in enumerate(body):
            if arg == "S":
                arg = int(rng.integers(0, nl)) if op == "STORE_VAR" else int(rng.integers(s + 1, end + 1))
            elif arg == "H":  # the FOR_RANGE just after, mostly
                arg = s + 2 + j if rng.random() < 0.8 else int(rng.integers(s + 1, end + 1))
            elif arg == "J":
                arg = int(rng.integers(s + 1, end + 1))  # anywhere in the function, or its end
            elif arg == "F":
                arg = int(rng.choice(starts))
            words.append(E(op, arg))
    return words


def test_random_adversarial_bytecode():
    rng = np.random.default_rng(SEED)
    seen = set()
    for i in range(120):
        nparams = int(rng.integers(0, 3))
        progs = [random_program(rng, nparams) for _ in range(40)]
        batch = ProgramBatch.from_programs([Program.from_code(w) for w in progs], "f0")
        ins = [tuple(int(rng.choice([-2**31, INT32_MAX, *CONSTS])) if rng.random() < 0.4 else int(rng.integers(-4, 5))
                     for _ in range(nparams)) for _ in range(6)]
        inputs = encode_tuples(ins, ("int",) * nparams)
        for cfg in (VMConfig(fuel=int(rng.integers(1, 13)), stack_size=int(rng.integers(1, 10)), max_depth=int(rng.integers(0, 4))),
                    VMConfig(fuel=int(rng.integers(1, 300)), stack_size=int(rng.integers(1, 16)), max_depth=int(rng.integers(0, 6))),
                    VMConfig(fuel=3000)):
            res = _assert_same(batch, inputs, cfg, f"batch {i}", [[hex(w) for w in p] for p in progs])
            seen.update(oc.TRAP_NAMES[int(s)] for s in res.status)
    assert {"ok", "out_of_fuel", "recursion", "bad_bytecode", "value_error"} <= seen, seen


def test_every_fuel_and_stack_cut_of_fused_shapes():
    """Every shape at the end of its function, entered from a JUMP, with stack sizes from the
    locals alone (every push traps) up, at every fuel cut."""
    tails = [[("LOAD_VAR", 0), ("LOAD_CONST", 3), ("BINARY_MOD", 0)],
             [("LOAD_CONST", 0), ("LOAD_VAR", 1), ("BINARY_DIV", 0), ("STORE_VAR", 0), ("JUMP", 1)],
             [("LOAD_VAR", 1), ("LOAD_VAR", 1), ("COMPARE_EQ", 0), ("JUMP_IF_TRUE_OR_POP", 1)],
             [("LOAD_VAR", 0), ("LOAD_VAR", 1)], [("LOAD_VAR", 0), ("BINARY_SUB", 0)],
             [("LOAD_CONST", 2**23 - 1), ("CONST_EXT", 255), ("CONST_EXT", 1)], [("LOAD_CONST", -1), ("CONST_EXT", 255)],
             [("LOAD_CONST", 1), ("LOAD_CONST", 2), ("CONST_EXT", 3)], [("LOAD_VAR", 0), ("STORE_VAR", 1)],
             [("LOAD_VAR", 0), ("JUMP_IF_FALSE", 1)], [("FOR_RANGE", 0), ("JUMP", 1), ("STORE_VAR", 2)],
             [("JUMP", "H"), ("FOR_RANGE", 0), ("JUMP", 1), ("STORE_VAR", 0)], [("JUMP", "H"), ("FOR_RANGE", 0)],
             [("JUMP", "H"), ("FOR_RANGE", 0), ("JUMP", 1)]]
    heads = [[], [("LOAD_VAR", 1)], [("LOAD_VAR", 0), ("LOAD_VAR", 1), ("BINARY_ADD", 0)]]
    progs = []
    for t in tails:
        for h in heads:
            body = h + t
            words = [E("FUNC", 3 | 3 << 8)]
            for j, (op, arg) in enumerate(body):
                words.append(E(op, 2 + j if arg == "H" else arg))
            progs.append(words + [E("FUNC", 0 | 1 << 8), E("LOAD_CONST", 5), E("RETURN", 0)])
            progs.append(words)
    batch = ProgramBatch.from_programs([Program.from_code(w) for w in progs], "f0")
    rng = np.random.default_rng(SEED)
    ins = [(0, 3, 1), (5, 0, -1), (-2**31, -1, 0), (2, 2, 0), (INT32_MAX - 1, INT32_MAX, 7)]
    ins += [tuple(int(v) for v in rng.integers(-4, 5, 3)) for _ in range(5)]
    inputs = encode_tuples(ins, ("int",) * 3)
    for fuel in range(1, 40):
        for stack in range(3, 7):
            _assert_same(batch, inputs, VMConfig(fuel=fuel, stack_size=stack), "shapes", [[hex(w) for w in p] for p in progs])


def test_loop_head_last_in_a_function_is_invalid(monkeypatch):
    """Before validate() refused it, this program returned 9 on the plain interpreters and 0 with
    the switch superinstructions: its FOR_RANGE skipped the FUNC word after it, and the next
    function's LOAD_VAR 4 read slot 4 of a 3-local frame, above sp, where only plain pushes had
    written (with more locals in the next function, plain runs wrote past the stack). Now every
    interpreter traps bad_bytecode, and FOR_LIST likewise."""
    tail = [E("FUNC", 0 | 5 << 8), E("LOAD_VAR", 4), E("RETURN", 0)]
    head = [E("FUNC", 0 | 3 << 8), E("LOAD_CONST", 7), E("LOAD_CONST", 9), E("BINARY_ADD", 0), E("STORE_VAR", 1),
            E("LOAD_CONST", 1), E("STORE_VAR", 2)]
    progs = [head + [E("FOR_RANGE", 0)] + tail, head + [E("FOR_LIST", 0)] + tail, head + [E("FOR_RANGE", 0)],
             head + [E("FOR_RANGE", 0), E("JUMP", 10), E("RETURN", 0)] + tail]   # the last: valid
    batch = ProgramBatch.from_programs([Program.from_code(w) for w in progs], "f0")
    inputs = encode_tuples([()], ())
    res = _assert_same(batch, inputs, VMConfig(), [[hex(w) for w in p] for p in progs])
    names = [oc.TRAP_NAMES[int(s)] for s in res.status]
    assert names == ["bad_bytecode", "bad_bytecode", "bad_bytecode", "ok"], names
    for mode in (0, 1, 2, 3):   # the installed core: lockstep and scalar, fused and plain
        so = cpu.lib()
        monkeypatch.setattr(cpu, "lib", lambda: _ModeLib(so, mode))
        r = run_batch(batch, inputs, nthreads=1)
        monkeypatch.undo()
        assert r.status.tolist() == res.status.tolist(), (mode, r.status)


# ---- fuel near 2^31 - 1 ----

DRIVER = r"""
#include <vector>
#include "vm.h"
using namespace vg;
extern "C" int drive(const uint32_t* code, int32_t len, const int32_t* in, int32_t in_len, int32_t fuel,
                     int32_t stack_size, int32_t steps0, int32_t* out) {
  int32_t entry_pc;
  if (validate(code, len, 0, &entry_pc) >= 0 || entry_pc < 0) return -1;
  VMConfig cfg{fuel, 4, 64, 8, stack_size};
  std::vector<int32_t> stack(stack_size), heap(64);
  std::vector<Frame> frames(4);
  std::vector<ListHdr> lists(8);
  Workspace ws{stack.data(), frames.data(), lists.data(), heap.data(), 0, 0};
  int32_t nl = func_nlocals(code[entry_pc]);
  int32_t t = load_args(code[entry_pc], in, in_len, cfg, ws, ws.stack, 1);
  if (t != TRAP_OK) { out[0] = t; out[1] = 0; out[2] = 0; return 0; }
#ifdef VG_DRIVE_THREADED_FUSED  // the host's threaded interpreter with fuse.h's superinstructions
  std::vector<Fused> fx(len);
  std::vector<uint8_t> target(len + 1), xop(len);
  fuse_program(code, len, fx.data(), target.data(), xop.data());
  RunResult r = run_from(code, len, cfg, ws, entry_pc + 1, nl, 0, nl, 0, steps0, fx.data(), xop.data());
#else
  RunResult r = run_from(code, len, cfg, ws, entry_pc + 1, nl, 0, nl, 0, steps0);
#endif
  out[0] = r.status; out[1] = r.value; out[2] = r.steps;
  return 0;
}
"""


DRIVER_FLAGS = {"switch": ["-DVG_NO_THREADED_DISPATCH"],
                "switch fused": ["-DVG_NO_THREADED_DISPATCH", "-DVG_SWITCH_FUSE=1"],
                "threaded fused": ["-DVG_DRIVE_THREADED_FUSED"]}


def _driver(kind: str):
    out = native_build.build("vramgym-switch-driver", "driver.so", DRIVER,
                             ["-std=c++17", "-O1", "-shared", "-fPIC", *DRIVER_FLAGS[kind]], [ROOT / "vm" / "csrc"],
                             sorted((ROOT / "vm" / "csrc").glob("*.h")))
    so = ctypes.CDLL(str(out))
    P = ctypes.POINTER
    so.drive.argtypes = [P(ctypes.c_uint32), ctypes.c_int32, P(ctypes.c_int32), ctypes.c_int32, ctypes.c_int32,
                         ctypes.c_int32, ctypes.c_int32, P(ctypes.c_int32)]
    return so


def _drive(so, words, args, fuel, stack, steps0):
    code = np.array(words, dtype=np.uint32)
    ins = np.array([x for a in args for x in (oc.KIND_INT, a)] or [0], dtype=np.int32)
    out = np.zeros(3, dtype=np.int32)
    P = ctypes.POINTER
    rc = so.drive(code.ctypes.data_as(P(ctypes.c_uint32)), len(code), ins.ctypes.data_as(P(ctypes.c_int32)),
                  2 * len(args), fuel, stack, steps0, out.ctypes.data_as(P(ctypes.c_int32)))
    assert rc == 0, "invalid bytecode"
    return tuple(int(v) for v in out)


def test_fuel_near_int32_max():
    """With fuel = 2^31 - 1 the plain interpreter stops at steps 2^31 - 1 (out_of_fuel). A fuel
    check written as steps - 1 + n > fuel wrapped in int32 there: the fused sequence ran on and the
    run returned a value with negative steps (both the switch superinstructions and the host's
    threaded ones did; through the public API after 2^31 executed steps)."""
    plain = _driver("switch")
    others = {k: _driver(k) for k in ("switch fused", "threaded fused")}
    cases = [
        ([E("FUNC", 0 | 1 << 8), E("LOAD_CONST", 1), E("LOAD_CONST", 2), E("BINARY_ADD", 0), E("RETURN", 0)], []),
        ([E("FUNC", 0 | 1 << 8), E("LOAD_CONST", 1), E("LOAD_CONST", 2), E("BINARY_ADD", 0), E("STORE_VAR", 0),
          E("JUMP", 6), E("LOAD_CONST", 3), E("LOAD_VAR", 0), E("RETURN", 0)], []),
        ([E("FUNC", 0 | 1 << 8), E("LOAD_CONST", 5), E("STORE_VAR", 0), E("LOAD_VAR", 0), E("RETURN", 0)], []),
        ([E("FUNC", 0 | 1 << 8), E("LOAD_CONST", 0), E("JUMP_IF_FALSE", 4), E("LOAD_CONST", 9), E("LOAD_CONST", 7),
          E("RETURN", 0)], []),
        ([E("FUNC", 3 | 4 << 8), E("FOR_RANGE", 0), E("JUMP", 5), E("STORE_VAR", 3), E("JUMP", 1), E("LOAD_VAR", 3),
          E("RETURN", 0)], [0, 3, 1]),
        ([E("FUNC", 3 | 4 << 8), E("JUMP", 2), E("FOR_RANGE", 0), E("JUMP", 6), E("STORE_VAR", 3), E("JUMP", 1),
          E("LOAD_VAR", 3), E("RETURN", 0)], [0, 3, 1]),
    ]
    for words, args in cases:
        for back in range(1, 12):
            for fuel in (INT32_MAX, INT32_MAX - 1):
                steps0 = fuel - back
                a = _drive(plain, words, args, fuel, 8, steps0)
                assert a[2] <= fuel, a
                for kind, so in others.items():
                    b = _drive(so, words, args, fuel, 8, steps0)
                    assert a == b, (f"fuel {fuel}, {back} steps left: {kind} (status, value, steps) {b}, plain {a}; "
                                    f"code {[hex(w) for w in words]} args {args}")
