"""The torch automaton (envs/grammar_torch.py) against the numpy one (envs/grammar.py, itself
checked against the per-row reference in tests/test_grammar_vectorized.py): identical masks,
next states, invalid flags and completion costs at every step of random rollouts, with rows of
many signatures and budgets mixed in one batch; the built-in task suite's signatures; no
data-dependent host sync (all four calls run on the meta device, which has no data, and mask
and step trace as one torch.compile graph); the same on CUDA under torch's sync debug mode,
skipped without a GPU."""
import numpy as np
import pytest
import torch

from vramgym.envs import vocab as V
from vramgym.envs.grammar import H_DONE, STATE_SIZE, BatchedAutomaton, Grammar
from vramgym.envs.grammar_torch import TorchAutomaton

SIGNATURES = [
    "def f(a: int, b: int) -> int:",
    "def f(xs: list[int]) -> list[int]:",
    "def f(xs: list[int], k: int) -> bool:",
    "def g(n: int) -> bool:",
    "def h(xs: list[int], ys: list[int], t: bool, n: int) -> int:",
    "def p(t: bool) -> list[int]:",
    "def q(a: int, b: bool, c: list[int]) -> bool:",
]
STRUCTURAL = np.array(sorted({V.ID[t] for t in (
    "if", "elif", "else", "while", "for", "<DEDENT>", "<NEWLINE>", "<INDENT>", "break", "continue", "pass",
    "return", "=", "[", "(", ",", "range", "append", ".", "<FN>", "min", "max", "len", "abs", "not", "-",
    "and", "or", "+=", "*")} | set(range(V.V0, V.V0 + 8))))


@pytest.fixture(autouse=True, scope="module")
def one_cpu_thread():
    """Small kernels on a shared 2-core machine: a second intra-op thread only adds waits."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def grammar(sig, max_len):
    if max_len < 6 and "list[int]:" in str(sig).split("->")[1]:
        max_len = 6                                   # below the shortest body of a list return
    return Grammar(sig, max_len=max_len)


def pick_actions(rng, m):
    """Masked random actions, biased to structural tokens for half the rows; 5% unmasked, 5%
    out of range."""
    n = len(m)
    keep = np.zeros(V.VOCAB_SIZE, bool)
    keep[STRUCTURAL] = True
    sm = m & keep
    src = np.where((sm.any(axis=1) & (rng.random(n) < 0.5))[:, None], sm, m)
    a = (rng.random(m.shape) + src).argmax(axis=1)
    u = rng.random(n)
    a = np.where(u < 0.05, rng.integers(0, V.VOCAB_SIZE, n), a)
    return np.where(u > 0.95, rng.choice([-5, -1, V.VOCAB_SIZE, 1000], n), a)


def compare_rollouts(grammars, rows_per_grammar, steps, seed, device="cpu"):
    """Step numpy and torch side by side from the same rows; returns the number of finished bodies."""
    auto, ta = BatchedAutomaton(grammars), TorchAutomaton(grammars, device)
    rng = np.random.default_rng(seed)
    gid = rng.permutation(np.repeat(np.arange(len(grammars)), rows_per_grammar))
    tg = torch.from_numpy(gid).to(device)
    init = np.stack([g.reset(1)[0] for g in grammars])
    s = init[gid]
    ts = ta.initial(tg)
    assert ts.dtype == torch.int32 and ts.device.type == torch.device(device).type
    np.testing.assert_array_equal(ts.cpu().numpy(), s)
    finished = 0
    for _ in range(steps):
        ts = torch.from_numpy(s).to(device)
        m = auto.mask(s, gid)
        tm = ta.mask(ts, tg)
        assert tm.dtype == torch.bool
        np.testing.assert_array_equal(tm.cpu().numpy(), m)
        tc = ta.min_tokens_to_finish(ts, tg)
        assert tc.dtype == torch.int64
        np.testing.assert_array_equal(tc.cpu().numpy(), auto.min_tokens_to_finish(s, gid))
        a = pick_actions(rng, m)
        new, inv = auto.step(s, a, gid)
        tnew, tinv = ta.step(ts, torch.from_numpy(a).to(device), tg)
        assert tnew.dtype == torch.int32 and tinv.dtype == torch.bool
        np.testing.assert_array_equal(tnew.cpu().numpy(), new)
        np.testing.assert_array_equal(tinv.cpu().numpy(), inv)
        s = new
        done = s[:, H_DONE] != 0
        finished += int(done.sum())
        # most finished rows restart at once; the rest stay done a while (every action invalid)
        restart = done & (rng.random(len(s)) < 0.7)
        s[restart] = init[gid[restart]]
    return finished


def test_mixed_signatures_and_budgets_equal_numpy():
    grammars = [grammar(sig, L) for sig in SIGNATURES for L in (5, 12, 32, 64)]
    assert compare_rollouts(grammars, rows_per_grammar=6, steps=80, seed=0) > 0


def test_task_suite_signatures_equal_numpy():
    from vramgym.envs.bank import TaskBank
    sigs = TaskBank.from_names().signatures
    assert len(sigs) > 10
    grammars = [Grammar(sig, max_len=48) for sig in sigs]   # every masked rollout ends by 48 valid steps
    assert compare_rollouts(grammars, rows_per_grammar=2, steps=60, seed=2) > 0


def test_single_grammar_and_gid_forms():
    """One grammar (the single cost-table path); gid given as a list; invalid after END."""
    g = Grammar(SIGNATURES[0], max_len=16)
    ta = TorchAutomaton([g], "cpu")
    s = ta.initial([0])
    for a in V.encode(r"return <P0> \n <END>"):
        np.testing.assert_array_equal(ta.mask(s, torch.zeros(1, dtype=torch.int64)).numpy(), g.mask(s.numpy()))
        s, inv = ta.step(s, torch.tensor([a]), torch.zeros(1, dtype=torch.int64))
        assert not inv[0]
    gid = torch.zeros(1, dtype=torch.int64)
    assert s[0, H_DONE] == 1 and not ta.mask(s, gid).any() and ta.min_tokens_to_finish(s, gid)[0] == 0
    s2, inv = ta.step(s, torch.tensor([V.END]), gid)
    assert inv[0] and torch.equal(s2, s)


def test_empty_batch():
    ta = TorchAutomaton([Grammar(SIGNATURES[0], max_len=20)], "cpu")
    gid = torch.zeros(0, dtype=torch.int64)
    s = ta.initial(gid)
    assert s.shape == (0, STATE_SIZE) and ta.mask(s, gid).shape == (0, V.VOCAB_SIZE)
    new, inv = ta.step(s, gid, gid)
    assert new.shape == (0, STATE_SIZE) and inv.shape == (0,) and ta.min_tokens_to_finish(s, gid).shape == (0,)


def test_no_data_dependent_ops_on_meta_device():
    """Every data-dependent op (.item(), bool(), nonzero, boolean-mask indexing, .cpu(),
    .tolist()) raises on the meta device, which carries shapes and no data; gathers, indexed
    writes, where and arithmetic work. All four calls run there, so none of them can read a
    value back to the host or take a shape from one."""
    grammars = [Grammar(sig, max_len=L) for sig, L in ((SIGNATURES[0], 24), (SIGNATURES[1], 40))]
    ta = TorchAutomaton(grammars, "meta")
    n = 37
    gid = torch.empty(n, dtype=torch.int64, device="meta")
    state = ta.initial(gid)
    assert state.shape == (n, STATE_SIZE) and state.dtype == torch.int32 and state.is_meta
    m = ta.mask(state, gid)
    assert m.shape == (n, V.VOCAB_SIZE) and m.dtype == torch.bool and m.is_meta
    new, inv = ta.step(state, torch.empty(n, dtype=torch.int64, device="meta"), gid)
    assert new.shape == (n, STATE_SIZE) and new.dtype == torch.int32 and new.is_meta
    assert inv.shape == (n,) and inv.dtype == torch.bool
    c = ta.min_tokens_to_finish(state, gid)
    assert c.shape == (n,) and c.dtype == torch.int64 and c.is_meta
    # the check has teeth: the ops the rule forbids fail here
    for forbidden in (lambda: bool(inv.any()), lambda: inv.nonzero(), lambda: new[inv], lambda: c.tolist()):
        with pytest.raises((RuntimeError, NotImplementedError)):
            forbidden()


def test_traces_as_one_graph():
    """torch.compile(fullgraph=True) traces mask and step without a graph break (dynamo breaks
    on .item(), data-dependent shapes and Python branches on values), so the env can compile
    them or capture them in a CUDA graph. The eager backend: tracing only, no code generation."""
    g = Grammar(SIGNATURES[1], max_len=24)
    ta = TorchAutomaton([g, Grammar(SIGNATURES[3], max_len=40)], "cpu")
    gid = torch.tensor([0, 1, 1, 0])
    s = ta.initial(gid)
    a = torch.tensor([V.ID["return"], V.ID["if"], 1000, V.END])
    m = torch.compile(ta.mask, backend="eager", fullgraph=True)(s, gid)
    new, inv = torch.compile(ta.step, backend="eager", fullgraph=True)(s, a, gid)
    assert torch.equal(m, ta.mask(s, gid))
    assert torch.equal(new, ta.step(s, a, gid)[0]) and inv.tolist() == [False, False, True, True]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_equals_numpy_without_sync():
    """On the GPU: equal to numpy, and the automaton's calls pass under sync debug mode
    "error", in which any op that waits for the device raises."""
    grammars = [grammar(sig, L) for sig in SIGNATURES for L in (12, 48)]
    assert compare_rollouts(grammars, rows_per_grammar=8, steps=40, seed=3, device="cuda") > 0
    ta = TorchAutomaton(grammars, "cuda")
    gid = torch.arange(4096, device="cuda") % len(grammars)
    s = ta.initial(gid)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(8):
            m = ta.mask(s, gid)
            ta.min_tokens_to_finish(s, gid)
            a = (torch.rand(m.shape, device="cuda") + m).argmax(dim=1)   # a masked action, on the device
            s, _ = ta.step(s, a, gid)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
