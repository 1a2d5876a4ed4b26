"""The native token-slot builder (envs/csrc/token_slots.h, envs/token_slots.py) against its oracle,
TaskBank.compiler_token_slots: the C++ library on random and realistic bodies of every suite task,
with END, negative and too-large actions, lengths out of range and random active masks; the CUDA
kernel's logic on the host (compiled with g++ over the very kernel file, launched by
grammar_cuda.launch_token_slots), nvcc and NVRTC compile it, and on a GPU (skipped without one) it
equals the oracle, the env step stays sync-free and the GPU env's rewards equal the CPU env's. Bad
task ids and absurd lengths never read or write out of bounds (a sanitized fuzz harness). Fresh
seeds every run (printed on failure; VRAMGYM_SEED replays one)."""
from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

import native_build

from vramgym.envs import grammar_native as N
from vramgym.envs import vocab as V
from vramgym.envs.bank import TaskBank
from vramgym.envs.token_slots import token_slots

SEED = int(os.environ.get("VRAMGYM_SEED", np.random.SeedSequence().entropy % 2**32))
pytestmark = pytest.mark.skipif(not N.built(), reason="the native library is not built (pip install -e .)")
ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "envs" / "csrc"
BAD_ACTIONS = np.array([-1, -2, -2**40, V.VOCAB_SIZE, V.VOCAB_SIZE + 1, 2**40, V.END])


@pytest.fixture(scope="module")
def bank():
    return TaskBank.from_names(n_tests=8)


def random_batch(rng, T: int, n: int, L: int):
    """Bodies of random actions (a few bad ones and ENDs), lengths in -3..L+3 (and absurd ones),
    task ids of every task and a random active mask (None now and then)."""
    bodies = rng.integers(0, V.VOCAB_SIZE, (n, L))
    bad = rng.random((n, L)) < rng.choice([0.0, 0.02, 0.2])
    bodies[bad] = rng.choice(BAD_ACTIONS, int(bad.sum()))
    lengths = np.where(rng.random(n) < 0.1, rng.choice([-2**62, -1, 2**62], n), rng.integers(-3, L + 4, n))
    tasks = rng.integers(0, T, n)
    active = None if rng.random() < 0.2 else rng.random(n) < rng.choice([0.05, 0.5, 1.0])
    return bodies, lengths, tasks, active


def assert_equal_oracle(bank, bodies, lengths, tasks, active, got, ctx):
    """The active rows of got = (slots, count) are compiler_token_slots' (padding included);
    inactive rows have count 0."""
    slots, count = (x.numpy() for x in got)
    want_s, want_c = (x.numpy() for x in bank.compiler_token_slots(*(torch.as_tensor(x) for x in (bodies, lengths, tasks))))
    rows = np.ones(len(bodies), bool) if active is None else np.asarray(active)
    assert slots.shape == want_s.shape and slots.dtype == np.int32 and count.dtype == np.int64, ctx
    bad = np.flatnonzero(rows & ((count != want_c) | (slots != want_s).any((1, 2))))
    assert not len(bad), (ctx, SEED, bad[:5], bodies[bad[0]], lengths[bad[0]], tasks[bad[0]])
    assert (count[~rows] == 0).all(), ctx


def masked_rollout_bodies(bank, rng, n: int, L: int):
    """Bodies the env's mask allows (the native automaton's random rollouts): half of them with a
    budget of about L / 2 (ended by END), half cut unfinished at L (their budget is larger)."""
    from vramgym.envs.grammar import Grammar
    from vramgym.envs.grammar_native import NativeAutomaton
    na = NativeAutomaton([Grammar(sig, max_len=m) for sig in bank.signatures for m in (L // 2 + 4, L + 8)])
    tasks = rng.integers(0, len(bank), n)
    gid = 2 * tasks + rng.integers(0, 2, n)
    s = na.initial(gid)
    bodies = np.full((n, L), V.END)
    for k in range(L):
        m = na.mask(s, gid)
        a = (rng.random(m.shape) + m).argmax(1)
        s, invalid = na.step(s, a, gid)
        bodies[:, k] = np.where(invalid, V.END, a)
    is_end = bodies == V.END
    return bodies, np.where(is_end.any(1), is_end.argmax(1), L), tasks


# ---- the CPU library ---------------------------------------------------------------------------
@pytest.mark.parametrize("L", [0, 1, 8, 48])
def test_cpu_equals_oracle_on_random_bodies(bank, L):
    rng = np.random.default_rng([SEED, L])
    for rep in range(6):
        b, lens, tasks, active = random_batch(rng, len(bank), 700, L)
        got = token_slots(bank, *(torch.from_numpy(x) for x in (b, lens, tasks)),
                          None if active is None else torch.from_numpy(active))
        assert_equal_oracle(bank, b, lens, tasks, active, got, (L, rep))


def test_cpu_equals_oracle_on_masked_rollouts_and_references(bank):
    """Realistic bodies (nested blocks, DEDENT runs, bodies cut at the budget), and the reference
    bodies of tests/test_envs.py, whose kinds, values and lines also equal vocab.to_compiler_tokens
    (the per-row renderer: an oracle independent of the bank's tables)."""
    from test_envs import REFERENCES
    rng = np.random.default_rng([SEED, 1])
    for L in (12, 48):
        b, lens, tasks = masked_rollout_bodies(bank, rng, 400, L)
        assert (lens == L).any() and (lens < L).any() and (L < 48 or (b == V.ID["<DEDENT>"]).any())
        assert_equal_oracle(bank, b, lens, tasks, None, token_slots(bank, *(torch.from_numpy(x) for x in (b, lens, tasks))), L)
    names = [t.name for t in bank.tasks]
    for name, text in REFERENCES.items():
        a = V.encode(text)
        t = names.index(name)
        b, lens, tasks = np.array([a]), np.array([len(a) - 1]), np.array([t])
        slots, count = (x.numpy() for x in token_slots(bank, *(torch.from_numpy(x) for x in (b, lens, tasks))))
        want = V.to_compiler_tokens(a, bank.signatures[t])
        assert count[0] == len(want) and np.array_equal(slots[0, : len(want), :3], want[:, :3]), name
        assert_equal_oracle(bank, b, lens, tasks, None, (torch.from_numpy(slots), torch.from_numpy(count)), name)


def scoring_batch(bank, rng, n: int):
    """Bodies to score (torch bodies, lengths, task ids, active) and where the references lie: n
    masked rollouts, then every reference body (each compiles and passes every test), then n
    random bodies with bad actions under an active mask."""
    from test_envs import REFERENCES
    b, lens, tasks = masked_rollout_bodies(bank, rng, n, 24)
    names = [t.name for t in bank.tasks]
    refs = [np.array(V.encode(text)) for text in REFERENCES.values()]
    width = max(24, max(len(a) for a in refs))
    pad = lambda a: np.concatenate([a, np.full(width - len(a), V.END)])  # noqa: E731
    rb, rl, rt, ra = random_batch(rng, len(bank), n, width)
    bodies = np.concatenate([np.array([pad(x) for x in b]), np.array([pad(a) for a in refs]), rb])
    lengths = np.concatenate([lens, [len(a) - 1 for a in refs], np.clip(rl, 0, width)])
    task_ids = np.concatenate([tasks, [names.index(name) for name in REFERENCES], rt])
    active = np.concatenate([np.ones(len(b) + len(refs), bool), np.ones(len(rb), bool) if ra is None else ra])
    return [torch.from_numpy(x) for x in (bodies, lengths, task_ids, active)], slice(len(b), len(b) + len(refs))


def test_cpu_scorer_equals_the_checked_evaluate_tasks_cpu(bank):
    """TaskBank.evaluate on the CPU calls the scorer behind evaluate_tasks_cpu without its
    argument checks (score_token_rows): row for row the same (compiled, passed, steps) as
    evaluate_tasks_cpu on the same slots, for masked rollouts, the reference bodies and random
    bodies with bad actions under an active mask; task ids out of range are still refused."""
    from vramgym.vm.evaluate import evaluate_tasks_cpu
    from vramgym.envs.bank import code_cap_for
    args, refs = scoring_batch(bank, np.random.default_rng([SEED, 5]), 200)
    got = [x.numpy() for x in bank.evaluate(*args)]
    slots, count = token_slots(bank, *args[:3])
    p, s, o = evaluate_tasks_cpu(slots, count, args[2], args[3], bank.inputs, bank.expected, bank.n_tests,
                                 bank.ret_kind, config=bank.config, code_cap=code_cap_for(slots.shape[1]),
                                 task_fuel=bank.task_fuel)
    for g, w, what in zip(got, (o.numpy(), p.numpy(), s.numpy()), ("compiled", "passed", "steps")):
        assert np.array_equal(g, w), (what, SEED, np.flatnonzero(g != w)[:5])
    assert got[0][refs].all() and (got[1][refs] == bank.n_tests).all()   # the references pass
    one = [x[:1] for x in args[:3]]
    for bad in (-1, len(bank)):
        with pytest.raises(ValueError, match="task_ids of active rows"):
            bank.evaluate(one[0], one[1], torch.tensor([bad]))
    inactive = bank.evaluate(one[0], one[1], torch.tensor([len(bank)]), torch.tensor([False]))
    assert [x.tolist() for x in inactive] == [[False], [0], [0]]   # an inactive row may hold anything


def test_cpu_scorer_takes_the_native_builder_and_scores_as_the_torch_one(bank, monkeypatch):
    """TaskBank.evaluate on the CPU builds its token slots natively where the library is built,
    and scores every row (compiled, tests passed, steps) as with the torch builder, on masked
    rollouts, the reference bodies and random bodies with bad actions and an active mask."""
    import vramgym.envs.token_slots as TS
    args, refs = scoring_batch(bank, np.random.default_rng([SEED, 2]), 300)
    calls = []
    native = TS.token_slots_cpu
    monkeypatch.setattr(TS, "token_slots_cpu", lambda *a, **k: calls.append(1) or native(*a, **k))
    got = [x.numpy() for x in bank.evaluate(*args)]
    assert calls, "the CPU scorer did not take the native builder"
    monkeypatch.setattr(N, "available", lambda: False)
    want = [x.numpy() for x in bank.evaluate(*args)]
    for g, w, what in zip(got, want, ("compiled", "passed", "steps")):
        assert np.array_equal(g, w), (what, SEED, np.flatnonzero(g != w)[:5])
    assert want[0][refs].all() and (want[1][refs] == bank.n_tests).all()   # the references pass


def test_slots_follow_the_body_the_task_and_the_length(bank):
    """What a broken builder would miss: changing one body token, the task or the length changes
    the row (and the oracle agrees)."""
    from test_envs import REFERENCES
    a = np.array(V.encode(REFERENCES["count_evens"]))
    t = [x.name for x in bank.tasks].index("count_evens")
    rows = np.repeat(a[None], 4, 0)
    rows[1, 3] = V.ID["<P1>"] if a[3] != V.ID["<P1>"] else V.ID["<P2>"]   # another name
    lens = np.array([len(a) - 1] * 3 + [5])
    tasks = np.array([t, t, (t + 1) % len(bank), t])
    slots, count = token_slots(bank, *(torch.from_numpy(x) for x in (rows, lens, tasks)))
    s, c = slots.numpy(), count.numpy()
    for k in (1, 2, 3):
        assert not np.array_equal(s[0], s[k]), k
    assert c[3] < c[0] and c[0] == c[1]
    assert_equal_oracle(bank, rows, lens, tasks, None, (slots, count), "mutants")


def test_bad_task_ids_and_shapes(bank):
    """A task id outside [0, T) gives count 0 and a row of zeros (the torch code fails on it);
    the other rows are unaffected; shape errors raise."""
    rng = np.random.default_rng([SEED, 2])
    n, L = 64, 16
    b, lens, tasks, _ = random_batch(rng, len(bank), n, L)
    bad = rng.random(n) < 0.3
    junk = tasks.copy()
    junk[bad] = rng.choice([-1, -len(bank), len(bank), 2**40, -2**40], int(bad.sum()))
    slots, count = token_slots(bank, *(torch.from_numpy(x) for x in (b, lens, junk)))
    assert (count.numpy()[bad] == 0).all() and (slots.numpy()[bad] == 0).all()
    assert_equal_oracle(bank, b, lens, tasks, ~bad, (slots, count), "bad ids")
    with pytest.raises(ValueError, match="task_ids"):
        token_slots(bank, torch.from_numpy(b), torch.from_numpy(lens), torch.from_numpy(tasks[:-1]))
    with pytest.raises(ValueError, match="out must"):
        token_slots(bank, *(torch.from_numpy(x) for x in (b, lens, tasks)),
                    out=(torch.empty(n, 3, 4, dtype=torch.int32), torch.empty(n, dtype=torch.int64)))
    S = bank.slot_size(L)
    with pytest.raises(ValueError, match="out must"):   # buffers on another device: refused, never written
        token_slots(bank, *(torch.from_numpy(x) for x in (b, lens, tasks)),
                    out=(torch.empty(n, S, 4, dtype=torch.int32, device="meta"), torch.empty(n, dtype=torch.int64)))
    assert token_slots(bank, *(torch.from_numpy(x[:0]) for x in (b, lens, tasks)))[0].shape == (0, bank.slot_size(L), 4)


def test_threads_do_not_change_results(bank, monkeypatch):
    rng = np.random.default_rng([SEED, 3])
    b, lens, tasks, _ = random_batch(rng, len(bank), 9000, 24)   # several threads' worth of rows
    args = [torch.from_numpy(x) for x in (b, lens, tasks)]
    outs = []
    for threads in ("1", "2", "5"):
        monkeypatch.setenv("VRAMGYM_THREADS", threads)
        outs.append(token_slots(bank, *args))
    assert all(torch.equal(o[0], outs[0][0]) and torch.equal(o[1], outs[0][1]) for o in outs[1:])
    assert_equal_oracle(bank, b, lens, tasks, None, outs[0], "threads")


# ---- the CUDA kernel: on the host, nvcc, NVRTC ---------------------------------------------------
def _cached_build(name: str, source: str, flags: list[str]) -> Path:
    """Build (or reuse) `source` with g++; the key covers it, the flags and envs/csrc."""
    return native_build.build("vramgym-token-slots", name, source, flags, [CSRC],
                              sorted(CSRC.glob("*.h")) + sorted(CSRC.glob("*.cu")))


# grammar_kernels.cu on the host, its threads run one after another (gm_token_slots_kernel shares
# nothing between threads); the other kernels compile but are never run here
EMU = r"""
struct EmuDim { unsigned x = 1, y = 1, z = 1; };
static EmuDim threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __shared__ static
#define __launch_bounds__(...)
inline void __syncthreads() {}
#include "grammar_kernels.cu"
extern "C" void emu_token_slots(unsigned grid, unsigned block, const long long* bodies, int L, const long long* lengths,
                                const long long* task_ids, const unsigned char* active, long long n, const int32_t* act,
                                int nact, const int32_t* tail, const int32_t* prefix, const long long* prefix_len,
                                int ntask, int P, int32_t* out, long long* count) {
  gridDim.x = grid, blockDim.x = block;
  for (unsigned b = 0; b < grid; b++)
    for (unsigned t = 0; t < block; t++) {
      blockIdx.x = b, threadIdx.x = t;
      gm_token_slots_kernel(bodies, L, lengths, task_ids, active, n, act, nact, tail, prefix, prefix_len, ntask, P,
                            out, count);
    }
}
"""


class _EmuKernel(dict):
    """{"gm_token_slots_kernel": callable like a CuPy RawKernel} over the host build."""

    def __init__(self):
        super().__init__()
        so = ctypes.CDLL(str(_cached_build("token_slots_emu.so", EMU, ["-std=c++17", "-O1", "-shared", "-fPIC"])))
        self.grids = []

        def launch(grid, block, args):
            conv = {np.uint64: ctypes.c_void_p, np.int32: ctypes.c_int32, np.int64: ctypes.c_int64}
            so.emu_token_slots(ctypes.c_uint(grid[0]), ctypes.c_uint(block[0]), *(conv[type(a)](int(a)) for a in args))
            self.grids.append(grid)
        self["gm_token_slots_kernel"] = launch


def test_kernel_on_the_host_equals_oracle(bank):
    """gm_token_slots_kernel launched by grammar_cuda.launch_token_slots (grid, argument list,
    partial last block, inactive rows skipped with count 0, slots left unwritten), on CPU memory."""
    from vramgym.envs import grammar_cuda
    k = _EmuKernel()
    rng = np.random.default_rng([SEED, 4])
    t = bank.tensors("cpu")
    for n, L in ((300, 24), (128, 1), (5, 48), (0, 8)):
        c = bank.slot_tables("cpu", L)
        b, lens, tasks, active = random_batch(rng, len(bank), n, L)
        if active is None:
            active = rng.random(n) < 0.5
        x = [torch.from_numpy(np.ascontiguousarray(v)) for v in (b, lens, tasks, active)]
        slots = torch.full((n, bank.slot_size(L), 4), -7, dtype=torch.int32)
        count = torch.full((n,), -7, dtype=torch.int64)
        p = lambda v: np.uint64(v.data_ptr())  # noqa: E731
        grammar_cuda.launch_token_slots(k, p(x[0]), L, p(x[1]), p(x[2]), p(x[3]), n, p(c["act"]), c["act"].shape[0],
                                        p(c["tail_kv"]), p(t["prefix"]), p(t["prefix_len"]), len(bank), c["P"],
                                        p(slots), p(count))
        assert_equal_oracle(bank, b, lens, tasks, active, (slots, count), (n, L))
        assert (slots.numpy()[~active] == -7).all()    # inactive rows: not written
    assert k.grids == [(3,), (1,), (1,)]               # no launch for n = 0


def test_nvrtc_compiles_the_kernel():
    from test_grammar_native import grammar_ptx
    from vramgym.envs import grammar_cuda
    assert "gm_token_slots_kernel" in grammar_cuda.KERNELS
    ptx = grammar_ptx()
    assert b".entry gm_token_slots_kernel(" in ptx and b"st.global.v4" in ptx   # one 16-byte store per slot


# ---- bad inputs under ASan/UBSan -------------------------------------------------------------------
FUZZ = r"""
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "token_slots.h"
// garbage rows (actions, lengths, task ids) and garbage prefix lengths over the bank's own tables;
// every output row is exactly S slots (ASan sees a write past it), and count <= S for sane tables
int main(int argc, char** argv) {
  unsigned long long s = strtoull(argv[1], 0, 10) | 1;
  auto rnd = [&]() { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; };
  const long long pick[] = {-1, -2, 0, 1, 72, 73, 74, -(1LL << 62), 1LL << 62, 0x7fffffffffffffffLL,
                            (long long)0x8000000000000000ULL};
  std::vector<int32_t> act(FZ_ACT), tail(FZ_TAIL), prefix(FZ_PREFIX);
  std::vector<int64_t> plen(FZ_PLEN);
  long long tokens = 0;
  for (int it = 0; it < 20000; it++) {
    int32_t L = rnd() % 60;
    bool junk_plen = it % 4 == 0;
    std::vector<int64_t> pl(plen);
    if (junk_plen) for (auto& v : pl) v = pick[rnd() % 11];
    gm::SlotTables T{act.data(), tail.data(), prefix.data(), pl.data(), FZ_NACT, FZ_NTASK, FZ_P};
    std::vector<int64_t> body(L);
    for (auto& a : body) a = rnd() % 3 ? (long long)(rnd() % 80) - 3 : pick[rnd() % 11];
    long long length = rnd() % 3 ? (long long)(rnd() % (L + 8)) - 4 : pick[rnd() % 11];
    long long task = rnd() % 4 ? (long long)(rnd() % (FZ_NTASK + 4)) - 2 : pick[rnd() % 11];
    std::vector<int32_t> out(gm::slot_size(T, L) * 4);
    long long c = gm::token_slots_row(T, body.data(), L, length, task, out.data());
    if (c < 0 || c > gm::slot_size(T, L)) return printf("count %lld out of 0..%lld\n", c, gm::slot_size(T, L)), 1;
    tokens += c;
  }
  printf("tokens=%lld\n", tokens);
  return 0;
}
"""


def test_bad_inputs_under_sanitizers(bank):
    from test_native_fuzz import ENV, FLAGS, SANITIZER_REPORT, _sanitizers_work
    cxx = native_build.compiler()
    reason = _sanitizers_work(cxx, Path(tempfile.mkdtemp()))
    if reason:
        pytest.skip(reason)
    c, t = bank.slot_tables("cpu", 8), bank.tensors("cpu")
    arr = lambda x: "{" + ",".join(str(int(v)) for v in x.reshape(-1).tolist()) + "}"  # noqa: E731
    tables = (f"#define FZ_NACT {c['act'].shape[0]}\n#define FZ_NTASK {len(bank)}\n#define FZ_P {c['P']}\n"
              f"#define FZ_ACT {arr(c['act'])}\n#define FZ_TAIL {arr(c['tail_kv'])}\n"
              f"#define FZ_PREFIX {arr(t['prefix'])}\n#define FZ_PLEN {arr(t['prefix_len'])}\n")
    binary = _cached_build("token_slots_fuzz", tables + FUZZ, FLAGS)
    run = subprocess.run([str(binary), str(SEED)], capture_output=True, text=True, env=ENV, timeout=300)
    assert not SANITIZER_REPORT.search(run.stderr), (SEED, run.stderr[-6000:])
    assert run.returncode == 0 and "tokens=" in run.stdout, (SEED, run.stdout, run.stderr[-3000:])


# ---- on a GPU ----------------------------------------------------------------------------------------
def _gpu_reason():
    from vramgym.envs.token_slots import cuda_available
    if not torch.cuda.is_available():
        return "no CUDA device"
    if not cuda_available():
        return "cupy is not installed (pip install cupy-cuda12x)"
    return None


gpu = pytest.mark.skipif(_gpu_reason() is not None, reason=f"GPU test: {_gpu_reason()}")


@gpu
def test_cuda_equals_oracle_without_sync(bank):
    rng = np.random.default_rng([SEED, 5])
    for L in (1, 8, 48):
        b, lens, tasks, active = random_batch(rng, len(bank), 3000, L)
        x = [torch.from_numpy(v).cuda() for v in (b, lens, tasks)]
        ta = None if active is None else torch.from_numpy(active).cuda()
        bank.tensors(x[0].device)                        # the bank's tensors, the slot tables and the
        bank.slot_tables(x[0].device, L)                 # module: made (copied, synced) before the check
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            got = token_slots(bank, *x, ta)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert_equal_oracle(bank, b, lens, tasks, active, tuple(g.cpu() for g in got), L)


@gpu
def test_gpu_env_uses_the_kernel_without_sync_and_equals_cpu(monkeypatch):
    """SynthesisVectorEnv on CUDA scores with the kernel (never the torch builder), with no host
    sync in its steps, and gets the CPU env's rewards step for step."""
    from test_envs_device import BANK, SEED as ENV_SEED, assert_same, rollout
    from vramgym.envs.synthesis import SynthesisVectorEnv

    def no_torch_builder(*a, **k):
        raise AssertionError("the GPU scorer used compiler_token_slots")

    n = 512
    cpu = SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=24, device="cpu")
    want = rollout(cpu, ENV_SEED, 60)
    monkeypatch.setattr(BANK, "compiler_token_slots", no_torch_builder)
    gpu_ = SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=24, device="cuda")
    assert_same(want, rollout(gpu_, ENV_SEED, 60))
    obs, _ = gpu_.reset(seed=0)
    gen = torch.Generator(device="cuda").manual_seed(0)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(30):
            a = torch.multinomial(obs["action_mask"].float(), 1, generator=gen)[:, 0]
            obs, r, term, trunc, info = gpu_.step(a)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
