"""The native mask automaton (envs/grammar_native.py, envs/csrc/grammar.h) against the numpy one
(envs/grammar.py BatchedAutomaton, itself checked against the per-row reference in
tests/test_grammar_vectorized.py), row for row: masks, next rows, invalid flags, completion costs
and initial rows on random rollouts over every signature of the task suite and mixed-grammar
batches, with masked, structural, unmasked and out-of-range actions and rows kept after END; the
tables and constants the C++ reads against Python's; numpy and CPU torch inputs; garbage rows
never crash. Fresh seeds every run (printed on failure; VRAMGYM_SEED replays one).

The CUDA kernels: nvcc compiles them (skipped without nvcc), their logic runs on the host in an
emulator (tests/native/grammar_cuda_emu.cpp) equal to the CPU library, and on a GPU (skipped
without one) the CUDA automaton equals the CPU one."""
from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import native_build

from vramgym.envs import grammar as G
from vramgym.envs import grammar_native as N
from vramgym.envs import vocab as V
from vramgym.envs.grammar import H_DONE, STATE_SIZE, BatchedAutomaton, Grammar
from vramgym.envs.grammar_native import NativeAutomaton
from vramgym.envs.vector import HashedTasks, hash_tasks_keyed

from test_grammar_torch import SIGNATURES, grammar, pick_actions

SEED = int(os.environ.get("VRAMGYM_SEED", np.random.SeedSequence().entropy % 2**32))
# not built: skip; built but stale (compiled with other constants): the tests fail
pytestmark = pytest.mark.skipif(not N.built(), reason="the native automaton is not built (pip install -e .)")


@pytest.fixture(scope="module")
def suite_grammars():
    from vramgym.envs.bank import TaskBank
    sigs = TaskBank.from_names().signatures
    assert len(sigs) > 10
    return [Grammar(sig, max_len=48) for sig in sigs]


def compare_rollouts(grammars, rows_per_grammar, steps, seed, native=None, as_torch=False):
    """Step numpy and native side by side from the same rows; returns the number of finished bodies."""
    auto, na = BatchedAutomaton(grammars), native or NativeAutomaton(grammars)
    rng = np.random.default_rng(seed)
    gid = rng.permutation(np.repeat(np.arange(len(grammars)), rows_per_grammar))
    wrap = torch.from_numpy if as_torch else (lambda x: x)
    unwrap = (lambda x: x.numpy()) if as_torch else (lambda x: x)
    s = auto.initial(gid)
    init = unwrap(na.initial(wrap(gid)))
    assert init.dtype == np.int32 and np.array_equal(init, s), seed
    finished = 0
    for k in range(steps):
        ts, tg = wrap(s.copy()), wrap(gid)
        m = auto.mask(s, gid)
        got = unwrap(na.mask(ts, tg))
        assert got.dtype == bool and np.array_equal(got, m), (seed, k, np.flatnonzero((got != m).any(1))[:5])
        c = unwrap(na.min_tokens_to_finish(ts, tg))
        assert c.dtype == np.int64 and np.array_equal(c, auto.min_tokens_to_finish(s, gid)), (seed, k)
        a = pick_actions(rng, m)
        new, inv = auto.step(s, a, gid)
        tnew, tinv = na.step(ts, wrap(a), tg)
        tnew, tinv = unwrap(tnew), unwrap(tinv)
        assert tnew.dtype == np.int32 and tinv.dtype == bool
        assert np.array_equal(tinv, inv), (seed, k, np.flatnonzero(tinv != inv)[:5])
        assert np.array_equal(tnew, new), (seed, k, np.flatnonzero((tnew != new).any(1))[:5])
        assert np.array_equal(unwrap(ts), s), "step wrote into its input"
        s = new
        done = s[:, H_DONE] != 0
        finished += int(done.sum())
        # most finished rows restart at once; the rest stay done a while (every action invalid)
        restart = done & (rng.random(len(s)) < 0.7)
        s[restart] = auto.initial(gid[restart])
    return finished


# ---- the constants and tables the C++ reads are Python's ----------------------------------------
def test_generated_header_is_current():
    """envs/csrc/grammar_consts.h is what consts_header() generates from envs/grammar.py."""
    assert N.CONSTS_FILE.read_text() == N.consts_header(), \
        "regenerate: python -c 'from vramgym.envs import grammar_native as N; " \
        "N.CONSTS_FILE.write_text(N.consts_header())'"


def test_library_was_compiled_with_these_constants():
    got = np.zeros(len(N.consts_vector()), np.int64)
    n = N.lib().gm_consts(got.ctypes.data_as(N._i64p), len(got))
    assert n == len(got) and np.array_equal(got, N.consts_vector())
    for name, v in (("STATE_SIZE", STATE_SIZE), ("VOCAB", V.VOCAB_SIZE), ("INF", G.INF), ("OFF_FRAMES", G.OFF_FRAMES),
                    ("TOK_COMMA", V.ID[","]), ("K_COND_ELIF", G.K_COND_ELIF), ("KEY_M_EOK", G._M_EOK)):
        assert f"constexpr int {name} = {v};" in N.consts_header()


def test_library_was_compiled_from_these_sources(monkeypatch):
    """The library carries the sha256 of grammar.h, grammar_consts.h and grammar_cpu.cpp (setup.py);
    loading refuses one built from other sources (a logic change with an old build)."""
    lib = N.lib()
    assert lib.gm_source_hash().decode() == N.source_hash()
    monkeypatch.setattr(N, "source_hash", lambda: "0" * 64)
    N.lib.cache_clear()
    try:
        with pytest.raises(ImportError, match="other sources"):
            N.lib()
        assert not N.available()
    finally:
        N.lib.cache_clear()
        monkeypatch.undo()
    assert N.lib().gm_source_hash().decode() == N.source_hash()


def test_tables_handed_to_the_library_are_pythons(suite_grammars):
    """Every array the library reads, in the GmTab order, equals grammar.py's (int32 exact)."""
    na = NativeAutomaton(suite_grammars[:7])
    names = list(N._table_arrays()) + list(N._PARAMS)
    assert len(na._arrays) == len(names) == N._scalars()["NTAB"]
    header = N.CONSTS_FILE.read_text()
    assert [ln.strip().rstrip(",")[4:] for ln in header.splitlines() if ln.startswith("  TAB_")] == names
    P = G._Params(suite_grammars[:7], G._NUMPY)
    want = dict(N._table_arrays(), C=P.C, VAR=P.var, RET=P.ret, RET_COST=P.ret_cost, MAX_LEN=P.max_len,
                CARGS=P.cargs, CNARGS=P.cnargs, CRET=P.cret, INIT=P.init)
    for name, a, addr in zip(names, na._arrays, na._addrs):
        assert a.dtype == np.int32 and a.flags.c_contiguous and a.ctypes.data == addr, name
        assert np.array_equal(a, want[name]) and a.shape == np.shape(want[name]), name
    assert na.nfid == G.tables().n and G.tables().pack2fid[0] == 1   # fid 1: the fresh frame


# ---- differential rollouts --------------------------------------------------------------------------
def test_task_suite_signatures_equal_numpy(suite_grammars):
    assert compare_rollouts(suite_grammars, rows_per_grammar=6, steps=60, seed=[SEED, 1]) > 0


def test_mixed_signatures_and_budgets_equal_numpy():
    grammars = [grammar(sig, L) for sig in SIGNATURES for L in (5, 12, 32, 64)]
    assert compare_rollouts(grammars, rows_per_grammar=8, steps=80, seed=[SEED, 2]) > 0


def test_torch_cpu_tensors_equal_numpy():
    grammars = [grammar(sig, L) for sig in SIGNATURES[:4] for L in (12, 40)]
    assert compare_rollouts(grammars, rows_per_grammar=8, steps=50, seed=[SEED, 3], as_torch=True) > 0


def test_single_grammar_done_rows_and_bad_actions():
    """One grammar, gid omitted; after END every action is invalid and the row unchanged; out of
    range and masked actions are invalid, never a crash; int64 rows come back int64."""
    g = Grammar(SIGNATURES[0], max_len=16)
    na = NativeAutomaton([g])
    s = na.initial([0])
    for a in V.encode(r"return <P0> \n <END>"):
        assert np.array_equal(na.mask(s), g.mask(s))
        s, inv = na.step(s, [a])
        assert not inv[0]
    assert s[0, H_DONE] == 1 and not na.mask(s).any() and na.min_tokens_to_finish(s)[0] == 0
    for a in (V.END, 0, 5, -1, V.VOCAB_SIZE, 2**40, -2**40):
        s2, inv = na.step(s, [a])
        assert inv[0] and np.array_equal(s2, s)
    s = na.initial(np.zeros(3, np.int64)).astype(np.int64)
    new, inv = na.step(s, np.array([V.ID["if"], V.ID["+"], 999]))
    assert new.dtype == np.int64 and inv.tolist() == [False, True, True] and np.array_equal(new[1:], s[1:])


def test_empty_batch_and_shape_errors():
    na = NativeAutomaton([Grammar(SIGNATURES[0], max_len=20)])
    gid = np.zeros(0, np.int64)
    s = na.initial(gid)
    assert s.shape == (0, STATE_SIZE) and na.mask(s, gid).shape == (0, V.VOCAB_SIZE)
    new, inv = na.step(s, gid, gid)
    assert new.shape == (0, STATE_SIZE) and inv.shape == (0,) and na.min_tokens_to_finish(s, gid).shape == (0,)
    with pytest.raises(ValueError):
        na.mask(np.zeros((2, STATE_SIZE - 1), np.int32))
    with pytest.raises(ValueError):
        na.step(na.initial([0, 0]), [1], [0, 0])


def _garbage_rows(rng, auto, n: int) -> np.ndarray:
    """n initial states (grammars 0..2) with 30% of their fields replaced by extreme or random ints."""
    base = auto.initial(rng.integers(0, 3, n))
    return np.where(rng.random((n, STATE_SIZE)) < 0.3,
                    rng.choice([-2**31, -7, -1, 0, 1, 2, 5, 17, 99, 2**20, 2**31 - 1], (n, STATE_SIZE)), base)


def test_garbage_rows_never_crash():
    """Rows no rollout reaches (random ints, huge values, negative fields): every call returns
    (indices are wrapped/clamped in the C++), outputs keep their shapes. Grammar ids numpy rejects
    raise IndexError on the CPU; the C++ clamps them (what the GPU relies on)."""
    rng = np.random.default_rng([SEED, 4])
    grammars = [grammar(sig, 32) for sig in SIGNATURES[:3]]
    na, auto = NativeAutomaton(grammars), BatchedAutomaton(grammars)
    n = 3000
    noise = _garbage_rows(rng, auto, n)
    gid = rng.integers(-5, 8, n)
    with pytest.raises(IndexError):
        na.mask(noise.astype(np.int32), gid)
    clamped = np.zeros((n, V.VOCAB_SIZE), bool)   # the library itself, bad ids and all
    rows = noise.astype(np.int32)
    ok = (gid >= -3) & (gid < 3)                  # numpy's: -3..-1 wrap
    assert N.lib().gm_mask(N._p(rows), N._p(gid), n, N._p(clamped), na._addr, na.nfid, len(grammars), 0, 0) == (~ok).sum()
    assert np.array_equal(clamped[ok], na.mask(noise.astype(np.int32)[ok], gid[ok]))
    assert np.array_equal(clamped[~ok], na.mask(noise.astype(np.int32)[~ok], np.clip(gid[~ok], 0, 2)))
    gid = np.clip(gid, 0, 2)
    m = na.mask(noise.astype(np.int32), gid)
    new, inv = na.step(noise.astype(np.int32), rng.integers(-3, 80, n), gid)
    c = na.min_tokens_to_finish(noise.astype(np.int32), gid)
    assert m.shape == (n, V.VOCAB_SIZE) and new.shape == (n, STATE_SIZE) and inv.shape == c.shape == (n,)
    assert np.array_equal(new[inv], noise.astype(np.int32)[inv])


def _numpy_or_none(auto, rows, gid, actions):
    """numpy's mask, min_tokens and step of each row, None for a row numpy rejects (IndexError:
    a type or id outside the indices numpy accepts, outside the native automaton's contract)."""
    out = []
    for i in range(len(rows)):
        r, g, a = rows[i:i + 1], gid[i:i + 1], actions[i:i + 1]
        try:
            out.append((auto.mask(r, g)[0], auto.min_tokens_to_finish(r, g)[0], *[x[0] for x in auto.step(r, a, g)]))
        except IndexError:
            out.append(None)
    return out


def _assert_rows_equal_numpy(auto, na, rows, gid, actions, seed):
    rows = np.ascontiguousarray(rows, dtype=np.int32)
    want = _numpy_or_none(auto, rows, gid, actions)
    m, c = na.mask(rows, gid), na.min_tokens_to_finish(rows, gid)
    new, inv = na.step(rows, actions, gid)
    checked = 0
    for i, w in enumerate(want):
        if w is None:
            continue
        checked += 1
        assert np.array_equal(m[i], w[0]), (seed, i, rows[i].tolist(), np.flatnonzero(m[i] != w[0]))
        assert c[i] == w[1], (seed, i, rows[i].tolist(), c[i], w[1])
        assert inv[i] == w[3] and np.array_equal(new[i], w[2]), (seed, i, rows[i].tolist(), int(actions[i]))
    return checked


def test_int32_extremes_equal_numpy():
    """Fields at the int32 limits: numpy computes in int64 (d + 1, nf - 1, TARGET - P0, ...) and
    writes back with a wrapping astype(int32); the C++ does the same, without signed overflow."""
    grammars = [grammar(sig, 48) for sig in SIGNATURES[:2]]
    na, auto = NativeAutomaton(grammars), BatchedAutomaton(grammars)
    base = auto.initial([0])[0]
    rows, acts = [], []
    big, small = 2**31 - 1, -2**31
    for field, ph in ((G.H_DEPTH, G.P_INDENT), (G.H_TARGET, G.P_TARGET), (G.H_DEPTH, G.P_BOUND),
                      (G.H_NF, G.P_BOUND), (G.H_PEND_VAR, G.P_INDENT), (G.H_LOOPS, G.P_INDENT),
                      (G.H_LEN, G.P_BOUND), (G.H_DEPTH, G.P_FOR_VAR)):
        for v in (big, small, big - 1, small + 1):
            for a in (V.INDENT, V.DEDENT, V.ID["if"], V.ID["for"], V.P0, V.ID["("], V.ID["+="], V.ID["["]):
                r = base.copy()
                r[G.H_PH], r[field] = ph, v
                rows.append(r)
                acts.append(a)
    rows = np.array(rows, np.int32)
    rows[1::2, G.H_PEND_KIND] = G.BK_LOOP
    assert _assert_rows_equal_numpy(auto, na, rows, np.zeros(len(rows), np.int64), np.array(acts), None) > 200


def test_garbage_rows_equal_numpy_where_numpy_accepts_them():
    """Random noise (extreme and negative values, negative types included) on rows of rollouts:
    equal to numpy on every row numpy accepts (negative indices wrap as numpy's)."""
    rng = np.random.default_rng([SEED, 9])
    grammars = [grammar(sig, 40) for sig in SIGNATURES]
    na, auto = NativeAutomaton(grammars), BatchedAutomaton(grammars)
    n = 200
    gid = rng.integers(0, len(grammars), n)
    s = auto.initial(gid)
    pool = []
    for _ in range(30):
        s, _ = auto.step(s, pick_actions(rng, auto.mask(s, gid)), gid)
        pool.append(s.copy())
    pick = rng.integers(0, 30 * n, 800)
    base, g = np.concatenate(pool)[pick], np.tile(gid, 30)[pick]
    vals = np.array([-2**31, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 17, 2**31 - 1])
    noise = np.where(rng.random(base.shape) < 0.04, rng.choice(vals, base.shape), base)
    acts = rng.integers(-2, V.VOCAB_SIZE + 2, len(noise))
    assert _assert_rows_equal_numpy(auto, na, noise, g, acts, SEED) > 200


def test_negative_name_type_wraps_as_numpy():
    """A name slot of type -1: numpy's after[f, -1] reads type 3 (a list); the reviewer's case."""
    grammars = [grammar(sig, 48) for sig in SIGNATURES[:1]]
    na, auto = NativeAutomaton(grammars), BatchedAutomaton(grammars)
    r = auto.initial([0]).copy()
    r[0, G.H_NF] = 5
    r[0, G.OFF_VARS + 2 * 11] = -1
    assert np.array_equal(na.mask(r), auto.mask(r))
    assert _assert_rows_equal_numpy(auto, na, np.repeat(r, V.VOCAB_SIZE, 0), np.zeros(V.VOCAB_SIZE, np.int64),
                                    np.arange(V.VOCAB_SIZE), None) == V.VOCAB_SIZE


def test_negative_grammar_ids_wrap_as_numpy():
    """gid -n..-1 read grammar n+gid, as numpy's indexing; ids numpy rejects raise IndexError on
    the CPU, and the library (what the GPU runs) wraps and clamps them."""
    grammars = [grammar(sig, L) for sig in SIGNATURES[:3] for L in (12, 40)]
    na, auto, n = NativeAutomaton(grammars), BatchedAutomaton(grammars), len(grammars)
    rng = np.random.default_rng([SEED, 10])
    gid = rng.integers(-n, n, 300)
    s = auto.initial(gid)
    assert np.array_equal(na.initial(gid), s) and np.array_equal(na.initial(torch.from_numpy(gid)).numpy(), s)
    for _ in range(20):
        m = auto.mask(s, gid)
        assert np.array_equal(na.mask(s, gid), m)
        assert np.array_equal(na.min_tokens_to_finish(s, gid), auto.min_tokens_to_finish(s, gid))
        a = pick_actions(rng, m)
        new, inv = auto.step(s, a, gid)
        tnew, tinv = na.step(s, a, gid)
        assert np.array_equal(tnew, new) and np.array_equal(tinv, inv)
        s = new
    for bad in (-n - 1, n, 2**40, -2**40):
        g = np.array([0, bad])
        for call in (lambda: na.mask(s[:2], g), lambda: na.min_tokens_to_finish(s[:2], g),
                     lambda: na.step(s[:2], [0, 0], g)):
            with pytest.raises(IndexError):
                call()
    rows = np.ascontiguousarray(s[:4])
    g = np.array([-1, -n, -n - 1, n], np.int64)
    out = np.zeros((4, V.VOCAB_SIZE), bool)
    assert N.lib().gm_mask(N._p(rows), N._p(g), 4, N._p(out), na._addr, na.nfid, n, 0, 0) == 2
    assert np.array_equal(out, na.mask(rows, [n - 1, 0, 0, n - 1]))


def _ids(*toks):
    return [V.ID[t] for t in toks]


_SHORT = _ids(*[f"v{i}" for i in range(8)], *[f"<P{i}>" for i in range(4)], *"0123456789", "True", "False", ":",
              "<NEWLINE>", "<INDENT>")
# five biases, one per row: nest (if/while/for, short expressions, DEDENT rare), brackets and
# callees (`( [ , ] )`, len/abs/min/max/range/<FN>, for-range), chains (if/elif/else/return/DEDENT),
# loops (while/for/break/continue/DEDENT), ranges (for v in range(a, b, c))
_BIAS = np.ones((5, V.VOCAB_SIZE))
_BIAS[0, _ids("if", "while", "for", "elif", "else") + _SHORT] = 6
_BIAS[0, _ids("<DEDENT>")] = 0.2
_BIAS[1, _ids("(", "[", ",", "]", ")", "len", "abs", "min", "max", "range", "<FN>", "for", "in")] = 6
_BIAS[2, _ids("if", "elif", "else", "return", "<DEDENT>") + _SHORT] = 6
_BIAS[3, _ids("while", "for", "break", "continue", "<DEDENT>", "if", "else") + _SHORT] = 6
_BIAS[4, _ids("for", "in", "range", ",") + _SHORT] = 6   # for v in range(a, b, c)


def biased_actions(rng, m, mode):
    """Allowed actions drawn with row i's bias (_BIAS[mode[i]]): ~75-90% of picks from the
    preferred tokens where one is allowed; deep blocks, else/elif chains, loops, calls and ranges
    of several arguments."""
    score = np.where(m, rng.random(m.shape) * _BIAS[mode], -1.0)
    return score.argmax(axis=1)


def test_biased_long_rollouts_equal_numpy():
    """Rollouts that reach deep blocks (room for if/while/for at MAX_BLOCKS), safe else chains,
    elif chains and range/call arguments: a bias to statement and bracket tokens, 160 tokens."""
    seed = [SEED, 11]
    print("seed", seed)
    grammars = [grammar(sig, L) for sig in SIGNATURES for L in (96, 160)]
    auto, na = BatchedAutomaton(grammars), NativeAutomaton(grammars)
    rng = np.random.default_rng(seed)
    gid = rng.permutation(np.repeat(np.arange(len(grammars)), 32))
    mode = rng.integers(0, 5, len(gid))
    s = auto.initial(gid)
    finished = 0
    for k in range(170):
        m = auto.mask(s, gid)
        assert np.array_equal(na.mask(s, gid), m), (seed, k)
        assert np.array_equal(na.min_tokens_to_finish(s, gid), auto.min_tokens_to_finish(s, gid)), (seed, k)
        a = biased_actions(rng, m, mode)
        new, inv = auto.step(s, a, gid)
        tnew, tinv = na.step(s, a, gid)
        assert np.array_equal(tinv, inv) and np.array_equal(tnew, new), (seed, k)
        s = new
        done = s[:, H_DONE] != 0
        finished += int(done.sum())
        s[done] = auto.initial(gid[done])
    assert finished > 0


SCRIPTS = (  # corners rollouts reach rarely: a safe else chain (TERM after it), an elif that breaks the
            # chain's safety, nesting to MAX_BLOCKS, range's third argument
    r"if True : \n <INDENT> return <P0> \n <DEDENT> else : \n <INDENT> return <P0> \n <DEDENT>",
    r"if True : \n <INDENT> return <P0> \n <DEDENT> elif True : \n <INDENT> pass \n <DEDENT> else : \n "
    r"<INDENT> return <P0> \n <DEDENT>",
    r"while True : \n <INDENT> if True : \n <INDENT> while True : \n <INDENT> if True : \n <INDENT> "
    r"if True : \n <INDENT> pass \n",
    r"for v0 in range ( 1 , 2 , 3 ) : \n <INDENT> break \n",
)


def test_scripted_corners_equal_numpy():
    """Each prefix of SCRIPTS: mask, min_tokens and every action's step equal numpy's."""
    g = grammar(SIGNATURES[0], 64)
    auto, na = BatchedAutomaton([g]), NativeAutomaton([g])
    for prog in SCRIPTS:
        s = auto.initial([0])
        for a in V.encode(prog):
            assert np.array_equal(na.mask(s), auto.mask(s)), (prog, a)
            assert np.array_equal(na.min_tokens_to_finish(s), auto.min_tokens_to_finish(s)), (prog, a)
            every = np.repeat(s, V.VOCAB_SIZE, 0)
            new, inv = auto.step(every, np.arange(V.VOCAB_SIZE))
            tnew, tinv = na.step(every, np.arange(V.VOCAB_SIZE))
            assert np.array_equal(tinv, inv) and np.array_equal(tnew, new), (prog, a)
            s, inv = auto.step(s, [a])
            assert not inv[0], (prog, a)


def test_threads_do_not_change_results(monkeypatch):
    grammars = [grammar(sig, 48) for sig in SIGNATURES]
    na = NativeAutomaton(grammars)
    rng = np.random.default_rng([SEED, 5])
    gid = rng.integers(0, len(grammars), 5000)
    s = na.initial(gid)
    for _ in range(12):
        s, _ = na.step(s, pick_actions(rng, na.mask(s, gid)), gid)
    outs = []
    for t in ("1", "2", "3"):
        monkeypatch.setenv("VRAMGYM_THREADS", t)
        outs.append((na.mask(s, gid), *na.step(s, np.full(len(s), V.ID["("]), gid), na.min_tokens_to_finish(s, gid)))
    for o in outs[1:]:
        assert all(np.array_equal(x, y) for x, y in zip(o, outs[0]))


# ---- CUDA: nvcc, the host emulator, the GPU ---------------------------------------------------------
ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "envs" / "csrc"
EMU = ROOT / "tests" / "native" / "grammar_cuda_emu.cpp"
EMU_FLAGS = ["-std=c++20", "-O1", "-pthread", "-shared", "-fPIC"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_compiles_kernels(tmp_path):
    """The exact text NVRTC gets (includes inlined) compiles with nvcc for sm_90, with a static
    stack (no recursion) and every kernel present; the token-slot kernel (envs/token_slots.h)
    without a stack frame or spills."""
    from vramgym.envs import grammar_cuda
    src = tmp_path / "grammar_kernels.cu"
    src.write_text(grammar_cuda.kernel_source())
    r = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "-cubin", "-Xptxas", "-v", str(src), "-o",
                        str(tmp_path / "k.cubin")], capture_output=True, text=True)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-4000:]
    for name in grammar_cuda.KERNELS:
        assert f"Compiling entry function '{name}'" in log, name
    assert "bytes stack frame" in log and "recursive" not in log.lower()
    part = log.split("Compiling entry function 'gm_token_slots_kernel'")[1].split("Compiling entry function")[0]
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in part, part


# VRAMGYM_EMU_SANITIZE=1: the emulator under AddressSanitizer and UBSan (the process must preload
# the runtime: test_emulated_kernels_under_sanitizers runs this module so)
EMU_SANITIZE = ["-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"] \
    if os.environ.get("VRAMGYM_EMU_SANITIZE") == "1" else []


def _emu_library() -> Path:
    return native_build.build("vramgym-grammar-emu", "grammar_emu.so", EMU, EMU_FLAGS + EMU_SANITIZE, [CSRC],
                              sorted(CSRC.glob("*.h")) + sorted(CSRC.glob("*.cu")))


class _EmuKernels(dict):
    """Kernels of the emulator called like CuPy RawKernels: (grid, block, args of numpy arrays
    and numpy scalars)."""

    def __init__(self):
        super().__init__()
        self.so = ctypes.CDLL(str(_emu_library()))
        self.so.emu_launch.restype = ctypes.c_int
        self.so.emu_launch.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
        self.launches: list = []

    def __missing__(self, name):
        def launch(grid, block, args):
            held = []
            for a in args:
                if isinstance(a, np.ndarray):
                    assert a.flags.c_contiguous, (name, "non-contiguous argument")
                    held.append(ctypes.c_void_p(a.ctypes.data))
                elif isinstance(a, np.int32):
                    held.append(ctypes.c_int32(int(a)))
                elif isinstance(a, np.int64):
                    held.append(ctypes.c_int64(int(a)))
                elif isinstance(a, np.uint64):   # (an address: np.uint64(0) is the null pointer)
                    held.append(ctypes.c_uint64(int(a)))
                else:
                    raise TypeError(f"{name}: argument of type {type(a).__name__} (CuPy needs numpy scalars)")
            ptrs = (ctypes.c_void_p * len(held))(*[ctypes.addressof(h) for h in held])
            assert self.so.emu_launch(name.encode(), grid[0], block[0], ptrs) == 0, f"no kernel {name}"
            self.launches.append((name, grid, block))
        return launch


def test_emulated_kernels_equal_cpu_library():
    """The CUDA kernels run on the host, launched by grammar_cuda's launch functions, equal the
    CPU library (itself equal to numpy above) on rows of a mixed rollout; sizes that leave a
    partial last block; the constants kernel reports grammar.py's constants."""
    from vramgym.envs import grammar_cuda
    k = _EmuKernels()
    got = np.zeros(len(N.consts_vector()), np.int64)
    k["gm_consts_kernel"]((1,), (1,), (got,))
    assert np.array_equal(got, N.consts_vector())
    grammars = [grammar(sig, L) for sig in SIGNATURES for L in (12, 40)]
    na = NativeAutomaton(grammars)
    rng = np.random.default_rng([SEED, 6])
    n = 300                                                   # 3 blocks, the last one partial
    gid = rng.integers(0, len(grammars), n)
    s = na.initial(gid)
    args = (na._addrs, na.nfid, len(grammars))
    for step in range(25):
        m = na.mask(s, gid)
        out = np.zeros((n, V.VOCAB_SIZE), np.uint8)
        grammar_cuda.launch_mask(k, s, gid, out, *args, n)
        assert np.array_equal(out.view(bool), m), (SEED, step)
        cost = np.zeros(n, np.int64)
        grammar_cuda.launch_min_tokens(k, s, gid, cost, *args, n)
        assert np.array_equal(cost, na.min_tokens_to_finish(s, gid)), (SEED, step)
        a = pick_actions(rng, m)
        new, inv = na.step(s, a, gid)
        enew, einv = np.full_like(s, -9), np.full(n, 7, np.uint8)
        grammar_cuda.launch_step(k, s, a.astype(np.int64), gid, enew, einv, *args, n)
        assert np.array_equal(einv.view(bool), inv) and np.array_equal(enew, new), (SEED, step)
        s = new
        done = s[:, H_DONE] != 0
        s[done] = na.initial(gid[done])
    assert [x[1] for x in k.launches[1:4]] == [(3,), (3,), (3,)] and k.launches[1][2] == (grammar_cuda.BLOCK,)
    grammar_cuda.launch_mask(k, s[:0], gid[:0], np.zeros((0, V.VOCAB_SIZE), np.uint8), *args, 0)   # no launch
    assert len(k.launches) == 1 + 3 * 25


def test_device_tables_emulated(monkeypatch):
    """grammar_cuda.DeviceTables (what NativeAutomaton(grammars, "cuda") calls) with CPU torch
    tensors standing in for CUDA ones, the emulator for CuPy's kernels and numpy for DLPack:
    its table upload, output allocation and launches give the CPU library's results."""
    from vramgym.envs import grammar_cuda
    k = _EmuKernels()
    monkeypatch.setattr(grammar_cuda, "kernels", lambda device_id: k)
    monkeypatch.setattr(grammar_cuda, "_cp", lambda t: t.detach().numpy())
    monkeypatch.setattr(grammar_cuda, "_torch_stream", lambda device: contextlib.nullcontext())
    grammars = [grammar(sig, 24) for sig in SIGNATURES]
    na = NativeAutomaton(grammars)
    dt = grammar_cuda.DeviceTables(na._arrays, na.nfid, torch.device("cpu"))
    rng = np.random.default_rng([SEED, 8])
    gid = torch.from_numpy(rng.integers(0, len(grammars), 200))
    s = dt.init[gid]
    assert torch.equal(s, na.initial(gid))
    for _ in range(15):
        m = dt.mask(s, gid)
        assert m.dtype == torch.bool and torch.equal(m, na.mask(s, gid))
        assert torch.equal(dt.min_tokens(s, gid), na.min_tokens_to_finish(s, gid))
        a = torch.from_numpy(pick_actions(rng, m.numpy()))
        new, bad = dt.step(s, a, gid)
        want_new, want_bad = na.step(s, a, gid)
        assert bad.dtype == torch.bool and torch.equal(bad, want_bad) and torch.equal(new, want_new)
        s = new


def test_env_step_and_env_mask_emulated(monkeypatch):
    """The token env's own calls on a GPU (NativeAutomaton.env_step and env_mask there:
    grammar_cuda.DeviceTables.env_step, gm_env_step_kernel, and the mask kernel with END fixed in)
    on the emulated kernels, with CPU torch tensors standing in for CUDA ones: the CPU library's
    gm_env_step and gm_mask step for step, every output and the whole state (tasks, tokens,
    lengths, automaton rows). Rows restart where their episode ended and at random, on new tasks
    or left as they are (tasks None); some actions are masked or out of range; 300 rows leave a
    partial last block. Then task ids out of range: clamped as the CPU library clamps them."""
    from vramgym.envs import grammar_cuda
    k = _EmuKernels()
    monkeypatch.setattr(grammar_cuda, "kernels", lambda device_id: k)
    monkeypatch.setattr(grammar_cuda, "_cp", lambda t: t.detach().numpy())
    monkeypatch.setattr(grammar_cuda, "_torch_stream", lambda device: contextlib.nullcontext())
    L = 10
    grammars = [grammar(sig, L) for sig in SIGNATURES[:4]]
    na = NativeAutomaton(grammars)
    dt = grammar_cuda.DeviceTables(na._arrays, na.nfid, torch.device("cpu"))
    rng = np.random.default_rng([SEED, 14])
    n = 300
    first = torch.from_numpy(rng.integers(0, len(grammars), n))
    cpu = [first.clone(), torch.full((n, L), V.END), torch.zeros(n, dtype=torch.int64), na.initial(first)]
    emu = [x.clone() for x in cpu]
    ended = bad = 0
    flags = np.zeros((4, n), bool)
    for t in range(40):
        if t % 5 == 3:   # the vector env's hashed tasks, hashed in the kernel: as the CPU library and as torch
            hashed = HashedTasks(torch.from_numpy(rng.integers(0, 2**32, n)), torch.from_numpy(rng.integers(0, 2**40, n)),
                                 len(grammars))
            assert torch.equal(hashed.tensor(), hash_tasks_keyed(*hashed))
        m = na.env_mask(cpu[3], cpu[0])
        got = dt.mask(emu[3], emu[0], end_if_none=True).view(torch.int8)
        assert got.dtype == m.dtype and torch.equal(got, m), (SEED, t)
        a = torch.from_numpy(pick_actions(rng, m.numpy().astype(bool)).astype(np.int64))
        u = rng.random(n)
        a[u < 0.05] = torch.from_numpy(rng.integers(-2, V.VOCAB_SIZE + 3, int((u < 0.05).sum())))
        restart = torch.from_numpy((flags[1] | flags[2]) & (rng.random(n) < 0.9) | (rng.random(n) < 0.03))
        tasks = None if t % 5 == 2 else hashed if t % 5 == 3 else torch.from_numpy(rng.integers(0, len(grammars), n))
        if t % 5 == 3:   # the CPU library hashes as torch does
            plain = [x.clone() for x in cpu]
            want = na.env_step(*plain, a, restart, hashed.tensor(), L)
        flags, body_len = na.env_step(*cpu, a, restart, tasks, L)
        eflags, ebody = dt.env_step(*emu, a, restart, tasks, L)
        if t % 5 == 3:
            assert np.array_equal(want[0], flags) and all(torch.equal(x, y) for x, y in zip(plain, cpu)), (SEED, t)
        assert eflags.dtype == torch.bool and torch.equal(eflags, torch.from_numpy(flags)), (SEED, t)
        assert torch.equal(ebody, torch.from_numpy(body_len)), (SEED, t)
        for name, x, y in zip(("task", "tokens", "length", "grammar"), cpu, emu):
            assert torch.equal(x, y), (name, SEED, t)
        ended += int(flags[3].sum())
        bad += int(flags[0].sum())
    assert ended > n // 2 and bad > 0
    # task ids out of range (a device tensor holds whatever it was given): the CPU library counts
    # them and reads a clamped grammar, as the kernel does
    cpu[0][: n // 2] = torch.from_numpy(rng.integers(-9, 12, n // 2))
    emu[0].copy_(cpu[0])
    wild = torch.from_numpy(rng.integers(-9, 12, n))
    restart = torch.from_numpy(rng.random(n) < 0.3)
    a = torch.from_numpy(rng.integers(0, V.VOCAB_SIZE, n))
    want, want_len = np.zeros((4, n), np.uint8), np.zeros(n, np.int64)
    assert N.lib().gm_env_step(*(x.data_ptr() for x in cpu[:3]), cpu[3].data_ptr(), n, L, a.data_ptr(),
                               restart.data_ptr(), wild.data_ptr(), None, None, 0, N._p(na._init),
                               *(N._p(w) for w in want),
                               N._p(want_len), na._addr, na.nfid, len(grammars), 1) > 0
    eflags, ebody = dt.env_step(*emu, a, restart, wild, L)
    assert np.array_equal(eflags.numpy(), want.astype(bool)) and np.array_equal(ebody.numpy(), want_len), SEED
    assert all(torch.equal(x, y) for x, y in zip(cpu, emu)), SEED


def test_cuda_initial_wraps_and_clamps_ids(monkeypatch):
    """initial() on the CUDA path (DeviceTables emulated on CPU tensors): ids -n..-1 wrap as
    numpy's, the rest clamp as the kernels' gm_gid, never an out-of-bounds gather."""
    from vramgym.envs import grammar_cuda
    monkeypatch.setattr(grammar_cuda, "kernels", lambda device_id: _EmuKernels())
    grammars = [grammar(sig, 24) for sig in SIGNATURES[:3]]
    na = NativeAutomaton(grammars)
    gpu_ = NativeAutomaton(grammars)
    gpu_._cuda = grammar_cuda.DeviceTables(na._arrays, na.nfid, torch.device("cpu"))
    gpu_.device = type("FakeCuda", (), {"type": "cuda"})()
    monkeypatch.setattr(gpu_, "_vec", lambda v, n: torch.as_tensor(v, dtype=torch.int64))
    g = [0, 2, -1, -3, -4, 3, 2**40, -2**40]
    assert torch.equal(gpu_.initial(g), torch.from_numpy(na.initial([0, 2, 2, 0, 0, 2, 2, 0])))


def test_emulated_kernels_on_garbage_rows():
    """Rows no rollout reaches (random and extreme fields, as device tensors may hold) and
    grammar ids out of range, through the emulated kernels: the CPU library's results (the same
    clamping), every output written and nothing read outside the tables (the sanitized run below
    checks that)."""
    from vramgym.envs import grammar_cuda
    k = _EmuKernels()
    rng = np.random.default_rng([SEED, 12])
    grammars = [grammar(sig, 32) for sig in SIGNATURES[:3]]
    na, auto = NativeAutomaton(grammars), BatchedAutomaton(grammars)
    n = 300
    rows = np.ascontiguousarray(_garbage_rows(rng, auto, n), dtype=np.int32)
    raw_gid = rng.integers(-5, 8, n)
    args = (na._addrs, na.nfid, len(grammars))
    want = np.zeros((n, V.VOCAB_SIZE), bool)
    N.lib().gm_mask(N._p(rows), N._p(raw_gid), n, N._p(want), na._addr, na.nfid, len(grammars), 0, 0)
    out = np.full((n, V.VOCAB_SIZE), 7, np.uint8)
    grammar_cuda.launch_mask(k, rows, raw_gid, out, *args, n)
    assert np.array_equal(out.view(bool), want), SEED
    gid = np.where((raw_gid >= -3) & (raw_gid < 0), raw_gid + 3, np.clip(raw_gid, 0, 2))  # the kernels' gm_gid
    cost = np.full(n, -9, np.int64)
    grammar_cuda.launch_min_tokens(k, rows, raw_gid, cost, *args, n)
    assert np.array_equal(cost, na.min_tokens_to_finish(rows, gid)), SEED
    actions = rng.integers(-3, 80, n).astype(np.int64)
    new, inv = na.step(rows, actions, gid)
    enew, einv = np.full_like(rows, -9), np.full(n, 7, np.uint8)
    grammar_cuda.launch_step(k, rows, actions, raw_gid, enew, einv, *args, n)
    assert np.array_equal(einv.view(bool), inv) and np.array_equal(enew, new), SEED


def test_emulated_kernels_under_sanitizers(tmp_path):
    """The emulated-kernel tests of this module again in a child process whose emulator is built
    with AddressSanitizer and UBSan: an out-of-bounds access or undefined behaviour in
    grammar.h's kernels, on rollouts or on garbage rows, fails the test."""
    from test_native_fuzz import pytest_sanitized
    pytest_sanitized(__file__, "emulated and not sanitizers", SEED, tmp_path)


def _gpu_reason():
    from vramgym.envs import grammar_cuda
    if not torch.cuda.is_available():
        return "no CUDA device"
    if not grammar_cuda.available():
        return "cupy is not installed (pip install cupy-cuda12x)"
    return None


gpu = pytest.mark.skipif(_gpu_reason() is not None, reason=f"GPU test: {_gpu_reason()}")


@gpu
def test_cuda_equals_cpu_without_sync(suite_grammars):
    """On the GPU: the CUDA automaton equals the CPU library on rollouts of every suite signature,
    and mask/step/min_tokens pass under torch's sync debug mode "error"."""
    cpu, gpu_ = NativeAutomaton(suite_grammars), NativeAutomaton(suite_grammars, "cuda")
    assert gpu_.device == torch.device("cuda", torch.cuda.current_device())   # the index fixed
    rng = np.random.default_rng([SEED, 7])
    n = 5000
    gid = rng.integers(0, len(suite_grammars), n)
    s = cpu.initial(gid)
    tg = torch.from_numpy(gid).cuda()
    assert torch.equal(gpu_.initial(tg).cpu(), torch.from_numpy(s))
    for step in range(40):
        ts = torch.from_numpy(s).cuda()
        m = cpu.mask(s, gid)
        assert np.array_equal(gpu_.mask(ts, tg).cpu().numpy(), m), (SEED, step)
        assert np.array_equal(gpu_.min_tokens_to_finish(ts, tg).cpu().numpy(), cpu.min_tokens_to_finish(s, gid))
        a = pick_actions(rng, m)
        new, inv = cpu.step(s, a, gid)
        tnew, tinv = gpu_.step(ts, torch.from_numpy(a).cuda(), tg)
        assert np.array_equal(tnew.cpu().numpy(), new) and np.array_equal(tinv.cpu().numpy(), inv), (SEED, step)
        s = new
        done = s[:, H_DONE] != 0
        s[done] = cpu.initial(gid[done])
    ts = torch.from_numpy(s).cuda()
    # the token env's own calls: env_step (one kernel: step, autoreset, tokens) and env_mask
    L = suite_grammars[0].max_len
    state = [torch.from_numpy(gid), torch.full((n, L), V.END), torch.zeros(n, dtype=torch.int64),
             torch.from_numpy(s).clone()]
    dstate = [x.cuda() for x in state]
    flags = np.zeros((4, n), bool)
    for step in range(30):
        m = cpu.env_mask(state[3], state[0])
        assert torch.equal(gpu_.env_mask(dstate[3], dstate[0]).cpu(), m), (SEED, step)
        a = torch.from_numpy(pick_actions(rng, m.numpy().astype(bool)).astype(np.int64))
        restart = torch.from_numpy((flags[1] | flags[2]) | (rng.random(n) < 0.02))
        tasks = torch.from_numpy(rng.integers(0, len(suite_grammars), n))
        dtasks = tasks.cuda()
        if step % 3 == 2:   # the vector env's hashed tasks, hashed in the call
            tasks = HashedTasks(torch.from_numpy(rng.integers(0, 2**32, n)), torch.from_numpy(rng.integers(0, 2**40, n)),
                                len(suite_grammars))
            dtasks = HashedTasks(tasks.keys.cuda(), tasks.episode.cuda(), tasks.n_tasks)
        flags, body_len = cpu.env_step(*state, a, restart, tasks, L)
        dflags, dbody = gpu_.env_step(*dstate, a.cuda(), restart.cuda(), dtasks, L)
        assert np.array_equal(dflags.cpu().numpy(), flags) and np.array_equal(dbody.cpu().numpy(), body_len)
        assert all(torch.equal(x, y.cpu()) for x, y in zip(state, dstate)), (SEED, step)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(4):
            m = gpu_.mask(ts, tg)
            gpu_.min_tokens_to_finish(ts, tg)
            ts, _ = gpu_.step(ts, (torch.rand(m.shape, device="cuda") + m).argmax(dim=1), tg)
            gpu_.env_mask(dstate[3], dstate[0])
            gpu_.env_step(*dstate, torch.zeros(n, dtype=torch.int64, device="cuda"), dstate[2] > 3, None, L)
            gpu_.env_step(*dstate, torch.zeros(n, dtype=torch.int64, device="cuda"), dstate[2] > 3, dtasks, L)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


# ---- the environments -----------------------------------------------------------------------------
@pytest.mark.parametrize("device", [None, "cpu"])
def test_native_env_equals_numpy_env(device):
    """Synthesis-v0 vector envs with automaton="native" and "numpy": the same observations (masks
    included), rewards and flags step for step for the same seed and actions, some of them bad."""
    from test_envs_device import BANK, SEED as ENV_SEED, assert_same, rollout
    from vramgym.envs.synthesis import SynthesisVectorEnv
    n = 32
    a = SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=20, device=device, automaton="numpy")
    b = SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=20, device=device, automaton="native")
    assert isinstance(b.core.automaton(b.device), NativeAutomaton)
    assert_same(rollout(a, ENV_SEED, 80), rollout(b, ENV_SEED, 80))


# The core's three ways through a token step: the native calls with numpy around them (the CPU's
# shortcuts), the native calls with torch around them (the device path: a GPU's, one kernel
# each), and the torch ops (other automata, and native_env_step off).
PATHS = {"host": dict(cpu_shortcuts=True, native_env_step=True),
         "device": dict(cpu_shortcuts=False, native_env_step=True),
         "torch": dict(cpu_shortcuts=False, native_env_step=False)}


def _take(core, path: str) -> None:
    for k, v in PATHS[path].items():
        setattr(core, k, v)


@pytest.mark.parametrize("n,max_len", [(1, 12), (7, 20), (96, 9)])
def test_native_cpu_env_step_equals_the_torch_ops(n, max_len):
    """The token env's step and mask on the CPU in native calls (NativeAutomaton.env_step and
    env_mask, gm_env_step), with numpy (the shortcuts) and with torch around them (the device
    path), against the torch ops they replace on the same automaton, step for step: every output
    and the whole state (tasks, tokens, lengths, automaton rows). Actions come from the masks,
    with a share masked, out of range or past int32; rows restart where their episode ended (as
    the vector env's autoreset) and at random, on new tasks, or are left as they are (the plain
    step); a few ended rows go on stepping (bad)."""
    from test_envs_device import BANK
    from vramgym.envs.synthesis import SynthesisCore
    rng = np.random.default_rng(SEED + n)
    core = SynthesisCore(BANK, max_len=max_len)
    assert isinstance(core.automaton(torch.device("cpu")), NativeAutomaton)
    states = {p: core.empty(n, "cpu") for p in PATHS}
    first = torch.as_tensor(rng.integers(0, len(BANK), n))
    for st in states.values():
        core.reset_rows(st, torch.ones(n, dtype=torch.bool), first)
    fast = states["host"]
    ended = bad = 0
    try:
        for t in range(6 * max_len * (4 if n == 1 else 1)):   # (one row: enough steps for episodes to end)
            masks = {}
            for p, st in states.items():
                _take(core, p)
                masks[p] = core.masks(st)
            m = masks["host"]
            assert all(torch.equal(m, x) for x in masks.values()), (SEED, t)
            a = (torch.from_numpy(rng.random(m.shape)) + m).argmax(dim=1)
            u = torch.from_numpy(rng.random(n))
            a = torch.where(u < 0.05, torch.from_numpy(rng.integers(0, V.VOCAB_SIZE, n)), a)
            a = torch.where(u > 0.97, torch.from_numpy(rng.choice([-1, V.VOCAB_SIZE, 2**40, -2**63], n)), a)
            restart = torch.from_numpy(rng.random(n) < (0.02 if t % 3 else 0.3))
            if t:   # most ended rows restart (full-length bodies among them), some step on
                restart |= (outs[0][1] | outs[0][2]) & torch.from_numpy(rng.random(n) < 0.9)
            tasks = None if t % 4 == 1 else torch.from_numpy(rng.integers(0, len(BANK), n))
            if t % 4 == 3:   # the vector env's hashed tasks: computed in the native call, or .tensor()
                tasks = HashedTasks(torch.from_numpy(rng.integers(0, 2**32, n)),
                                    torch.from_numpy(rng.integers(0, 2**40, n)), len(BANK))
            outs = []
            for p, st in states.items():
                _take(core, p)
                outs.append(core.step_reset(st, a.clone(), restart.clone(), tasks if not isinstance(tasks, torch.Tensor)
                                            else tasks.clone()))
            for other, slow in zip(outs[1:], list(states.values())[1:]):
                for name, x, y in zip(("reward", "terminated", "truncated", "invalid"), outs[0], other):
                    assert x.dtype == y.dtype and torch.equal(x, y), (name, SEED, t)
                for field in ("task", "tokens", "length", "grammar"):
                    assert torch.equal(getattr(fast, field), getattr(slow, field)), (field, SEED, t)
            ended += int((outs[0][1] | outs[0][2]).sum())
            bad += int(outs[0][3].sum())
    finally:
        del core.cpu_shortcuts, core.native_env_step
    assert ended > n and bad > 0   # episodes ended, and some actions were refused, inside the compared steps


def test_core_step_takes_other_int_actions_and_states_made_of_slices_on_both_paths():
    """Found by session 26's audit: SynthesisCore.step driven directly (not through an env shell)
    with int32 actions, or on a state whose fields are row slices of another one, raised on the
    native path; now the actions are cast and such a state takes the torch ops, as before."""
    from test_envs_device import BANK
    from vramgym.envs.synthesis import SynthesisCore, SynthesisState
    core = SynthesisCore(BANK, max_len=10)
    outs = []
    for path in PATHS:
        _take(core, path)
        big = core.empty(8, "cpu")
        core.reset_rows(big, torch.ones(8, dtype=torch.bool), torch.arange(8) % len(BANK))
        half = SynthesisState(*(getattr(big, f)[::2] for f in ("task", "tokens", "length", "grammar")))
        whole = core.empty(4, "cpu")
        core.reset_rows(whole, torch.ones(4, dtype=torch.bool), half.task.clone())
        live = torch.tensor([True, True, False, True])
        for dtype in (torch.int32, torch.uint8, torch.int64):
            a = core.masks(whole).to(torch.uint8).argmax(dim=1).to(dtype)
            r = [core.step(st, a, live) for st in (whole, half)]
            outs.append([torch.stack([x.float() for x in ri]) for ri in r])
            assert torch.equal(outs[-1][0], outs[-1][1]) and torch.equal(whole.tokens, half.tokens)
        assert torch.equal(core.masks(whole), core.masks(half))
    del core.cpu_shortcuts, core.native_env_step
    assert all(torch.equal(x[0], y[0]) for x, y in zip(outs[:3], outs[3:])) and len(outs) == 9
    assert all(torch.equal(x[0], y[0]) for x, y in zip(outs[:3], outs[6:]))


def test_a_pickled_core_keeps_no_device_tables_and_makes_them_when_loaded():
    """Found by session 26's audit: a core pickled its per-device tables, so a pickle from another
    version (another table layout) failed at its first step. Now only their devices are kept."""
    import pickle
    from test_envs_device import BANK
    from vramgym.envs.synthesis import SynthesisCore
    core = SynthesisCore(BANK, max_len=10)
    core._tables(torch.device("cpu"))
    d = core.__getstate__()
    assert d["_dev_tables"] == {} and d["_table_devices"] == ["cpu"]
    back = pickle.loads(pickle.dumps(core))
    assert list(back._dev_tables) == ["cpu"]   # made again on load: a step after it builds nothing
    old = dict(d, _dev_tables={"cpu": {"cuts": "an older layout"}})
    del old["_table_devices"]
    again = SynthesisCore.__new__(SynthesisCore)
    again.__setstate__(old)
    assert "widths" in again._dev_tables["cpu"]
    st = again.empty(3, "cpu")
    again.reset_rows(st, torch.ones(3, dtype=torch.bool), torch.arange(3))
    assert again.observe(st)["action_mask"].shape == (3, V.VOCAB_SIZE)


def test_native_env_step_refuses_tensors_it_cannot_take_by_address():
    from test_envs_device import BANK
    from vramgym.envs.synthesis import SynthesisCore
    core = SynthesisCore(BANK, max_len=10)
    aut, st = core.automaton(torch.device("cpu")), core.empty(4, "cpu")
    core.reset_rows(st, torch.ones(4, dtype=torch.bool), torch.arange(4))
    args = [st.task, st.tokens, st.length, st.grammar, torch.zeros(4, dtype=torch.int64),
            torch.zeros(4, dtype=torch.bool), None, 10]
    for i, bad in [(4, torch.zeros(8, dtype=torch.int64)[::2]), (4, torch.zeros(4, dtype=torch.int32)),
                   (1, st.tokens[:, :5]), (5, torch.zeros(3, dtype=torch.bool)), (3, st.grammar.long())]:
        with pytest.raises(ValueError, match="expected a contiguous CPU tensor"):
            aut.env_step(*args[:i], bad, *args[i + 1:])
    with pytest.raises(IndexError, match="grammar ids out of"):   # a task past the bank: refused, read clamped
        aut.env_step(*args[:5], torch.ones(4, dtype=torch.bool), torch.tensor([0, 1, 2, len(BANK)]), 10)
    with pytest.raises(ValueError, match="expected a contiguous CPU tensor"):
        aut.env_mask(st.grammar[:, ::2], st.task)


def test_auto_picks_native_on_the_cpu_and_names_are_checked():
    from test_envs_device import BANK
    from vramgym.envs.synthesis import SynthesisCore
    core = SynthesisCore(BANK, max_len=20)
    assert core.automaton_kind(torch.device("cpu")) == "native"
    assert core.automaton_kind(torch.device("meta")) == "torch"
    with pytest.raises(ValueError):
        SynthesisCore(BANK, automaton="cupy")
    with pytest.raises(ValueError):
        SynthesisCore(BANK, automaton="native").automaton_kind(torch.device("meta"))


def grammar_ptx() -> bytes:
    """The PTX of the exact text and options grammar_cuda.py gives CuPy's RawModule, through NVRTC
    (no GPU needed; the caller skips without cupy's NVRTC)."""
    from test_cuda_backend import _nvrtc
    from vramgym.envs import grammar_cuda
    nvrtc = _nvrtc()
    if nvrtc is None:
        pytest.skip("NVRTC is unavailable (pip install cupy-cuda12x)")
    prog = nvrtc.createProgram(grammar_cuda.kernel_source(), "grammar_kernels.cu", [], [])
    try:
        # RawModule adds the architecture and --device-as-default-execution-space itself.
        nvrtc.compileProgram(prog, [*grammar_cuda.NVRTC_OPTIONS, "-arch=compute_90",
                                    "--device-as-default-execution-space"])
        return nvrtc.getPTX(prog)
    except Exception as e:
        pytest.fail(f"NVRTC: {e}\n{nvrtc.getProgramLog(prog)}")
    finally:
        nvrtc.destroyProgram(prog)


def test_nvrtc_compiles_kernel_source():
    from vramgym.envs import grammar_cuda
    ptx = grammar_ptx()
    for name in grammar_cuda.KERNELS:
        assert f".entry {name}(".encode() in ptx, name


def test_kernel_source_inlines_the_headers():
    from vramgym.envs import grammar_cuda
    src = grammar_cuda.kernel_source()
    assert '#include "' not in src
    for text in ("struct GmTables {", "constexpr int STATE_SIZE = ", "gm_step_kernel("):
        assert src.count(text) == 1, text


def test_every_automaton_reads_non_integer_actions_as_invalid_and_counts_them():
    """Found by an audit: step cast actions with astype(int64), so 4.9 was the valid action 4,
    and the per-row reference path (fewer than 8 rows) took an actions array of the wrong length."""
    from vramgym.envs.grammar_torch import TorchAutomaton
    grammars = [Grammar(SIGNATURES[0], max_len=20)]
    g = grammars[0]
    automata = {"reference": (lambda S, a: G.ReferenceGrammar.step(g, S, a)), "grammar": (lambda S, a: g.step(S, a))}
    for name, cls in (("numpy", BatchedAutomaton), ("torch", TorchAutomaton), ("native", NativeAutomaton)):
        auto = cls(grammars)
        conv = torch.as_tensor if name == "torch" else np.asarray  # (the torch one takes tensors)
        automata[name] = (lambda S, a, auto=auto, conv=conv: auto.step(conv(S), a, conv(np.zeros(len(S), np.int64))))
    for n in (3, 12):  # below and above Grammar's per-row threshold
        S = g.reset(n)
        a = g.mask(S).argmax(1)
        want, none = g.step(S, a)
        assert not none.any()
        for name, step in automata.items():
            for frac in (a + 0.5, np.where(np.arange(n) % 2, np.nan, np.inf)):
                new, bad = (np.asarray(x) for x in step(S, frac))
                assert bad.all() and (new == S).all(), (name, n)
            new, bad = (np.asarray(x) for x in step(S, a.astype(np.float32)))  # whole floats: the actions
            assert not bad.any() and (new == want).all(), (name, n)
            new, bad = (np.asarray(x) for x in step(S, torch.as_tensor(a + 0.25)))
            assert bad.all(), (name, n)
            with pytest.raises(ValueError, match="rows but"):
                step(S, a[:-1])


def test_every_automaton_refuses_bad_states_grammar_ids_and_huge_actions():
    """Found by an audit: a (2, 3, STATE_SIZE) state was read as 2 rows by the native automaton
    (its step returned unwritten memory) and as finished or truncated rows elsewhere, float states
    gave all-False masks below 8 rows and truncated ones above, rows of the wrong width were read,
    float grammar ids were truncated, and an action of 2**70 raised instead of being invalid."""
    from vramgym.envs.grammar_torch import TorchAutomaton
    grammars = [Grammar(SIGNATURES[0], max_len=20)]
    g = grammars[0]
    autos = {"numpy": BatchedAutomaton(grammars), "torch": TorchAutomaton(grammars, torch.device("cpu")),
             "native": NativeAutomaton(grammars)}
    for n in (3, 12):
        S = g.reset(n)
        gid = np.zeros(n, np.int64)
        bad_states = [np.stack([S] * 2), S.astype(np.float64) + 0.5, S.astype(np.float64), S[:, :-1],
                      np.concatenate([S, S], axis=1), S.astype(bool)]
        for b in bad_states:
            for call in (lambda b: g.mask(b), lambda b: g.step(b, np.zeros(len(b), np.int64)),
                         lambda b: g.min_tokens_to_finish(b), lambda b: G.ReferenceGrammar.mask(g, b)):
                with pytest.raises((ValueError, TypeError)):
                    call(b)
            for name, auto in autos.items():
                conv = torch.as_tensor if name == "torch" else np.asarray
                with pytest.raises((ValueError, TypeError)):
                    auto.mask(conv(b), conv(gid[:len(b)]))
                with pytest.raises((ValueError, TypeError)):
                    auto.step(conv(b), conv(np.zeros(len(b), np.int64)), conv(gid[:len(b)]))
        for name, auto in autos.items():
            conv = torch.as_tensor if name == "torch" else np.asarray
            for bad_gid in (gid + 0.7, gid.astype(np.float64), gid[:-1], np.zeros((n, 1), np.int64)):
                with pytest.raises((ValueError, TypeError)):
                    auto.mask(conv(S), conv(bad_gid))
            with pytest.raises(TypeError):
                auto.initial(conv(np.array([0.2, 1.7])))
            acts = [2**70] + [V.ID["return"]] * (n - 1)
            new, bad = (np.asarray(x) for x in auto.step(conv(S), acts, conv(gid)))
            assert bad[0] and not bad[1:].any() and (new[0] == S[0]).all(), name
        new, bad = g.step(S, [2**70] + [V.ID["return"]] * (n - 1))
        assert bad[0] and not bad[1:].any()
        new, bad = g.step(S, np.array([2**64 - 1] * n, dtype=np.uint64))
        assert bad.all()
    for max_len in (48.9, "48", True):
        with pytest.raises(TypeError):
            Grammar(SIGNATURES[0], max_len=max_len)


def test_vocab_refuses_strings_and_signatures_python_rejects():
    """Found by an audit: detokenize parsed the strings "4" and b"4" as actions, and Signature
    took Python keywords (lambda, None, class), __debug__ and names longer than the compiler's 64
    characters, whose masked bodies then failed in compile_source and CPython."""
    sig = "def f(a: int) -> int:"
    assert V.detokenize([4, 51, 1], sig) == V.detokenize([4.0, np.int64(51), 1], sig)
    for acts in (["4", "51", "1"], [b"4", 51, 1], np.array(["4", "51", "1"]), [4, " 51 ", 1]):
        with pytest.raises(TypeError):
            V.detokenize(acts, sig)
        with pytest.raises(TypeError):
            V.to_compiler_tokens(acts, sig)
    for name in ("lambda", "None", "class", "def", "__debug__", "__builtins__", "a" * 65):
        with pytest.raises(ValueError, match="bad name"):
            V.Signature.parse(f"def f({name}: int) -> int:")
        with pytest.raises(ValueError, match="bad name"):
            V.Signature.parse(f"def {name}(a: int) -> int:")
    long = "a" * 64
    from vramgym.compiler import compile_source
    g = Grammar(f"def f({long}: int) -> int:", 8)
    body = V.detokenize([V.ID["return"], V.P0, V.NEWLINE, V.END], g.sig)
    compile(body, "<body>", "exec") and compile_source(body)   # both accept the longest name
