"""The batched automaton (envs/grammar.py) against the per-env reference (envs/grammar_reference.py):
identical masks, next states, invalid flags and completion costs on random rollouts across
signatures and length budgets, with masked, structural, unmasked and out-of-range actions;
the tabulated frame costs against the reference's Dijkstra; rows of different grammars in one
batch. VRAMGYM_GRAMMAR_ROLLOUTS scales the number of rollouts (default: a few thousand)."""
import os

import numpy as np
import pytest

from vramgym.envs import vocab as V
from vramgym.envs.grammar import ACLASS, BatchedAutomaton, Grammar, _ftrans, tables
from vramgym.envs.grammar_reference import ReferenceGrammar

SIGNATURES = [
    "def f(a: int, b: int) -> int:",
    "def f(xs: list[int]) -> list[int]:",
    "def f(xs: list[int], k: int) -> bool:",
    "def g(n: int) -> bool:",
    "def h(xs: list[int], ys: list[int], t: bool, n: int) -> int:",
    "def p(t: bool) -> list[int]:",
    "def q(a: int, b: bool, c: list[int]) -> bool:",
]
SCALE = float(os.environ.get("VRAMGYM_GRAMMAR_ROLLOUTS", "1"))
STRUCTURAL = np.array(sorted({V.ID[t] for t in (
    "if", "elif", "else", "while", "for", "<DEDENT>", "<NEWLINE>", "<INDENT>", "break", "continue", "pass",
    "return", "=", "[", "(", ",", "range", "append", ".", "<FN>", "min", "max", "len", "abs", "not", "-",
    "and", "or", "+=", "*")} | set(range(V.V0, V.V0 + 8))))


def batched(sig, max_len):
    g = Grammar(sig, max_len=max_len)
    g.reference_below = 0          # always the batched path, even for one row
    return g


def pick_actions(rng, m):
    """Masked random actions, biased to structural tokens for some rows; 5% unmasked, 5% out of range."""
    n = len(m)
    sm = m.copy()
    keep = np.zeros(V.VOCAB_SIZE, bool)
    keep[STRUCTURAL] = True
    sm &= keep
    use_s = sm.any(axis=1) & (rng.random(n) < 0.5)
    src = np.where(use_s[:, None], sm, m)
    a = (rng.random(m.shape) + src).argmax(axis=1)
    u = rng.random(n)
    a = np.where(u < 0.05, rng.integers(0, V.VOCAB_SIZE, n), a)
    return np.where(u > 0.95, rng.choice([-5, -1, V.VOCAB_SIZE, 1000], n), a)


def compare_rollouts(sig, max_len, n, steps, seed):
    g, ref = batched(sig, max_len), ReferenceGrammar(sig, max_len=max_len)
    rng = np.random.default_rng(seed)
    s = g.reset(n)
    finished = 0
    for _ in range(steps):
        m = g.mask(s)
        np.testing.assert_array_equal(m, ReferenceGrammar.mask(ref, s))
        np.testing.assert_array_equal(g.min_tokens_to_finish(s), ReferenceGrammar.min_tokens_to_finish(ref, s))
        a = pick_actions(rng, m)
        new, inv = g.step(s, a)
        new_ref, inv_ref = ReferenceGrammar.step(ref, s, a)
        np.testing.assert_array_equal(inv, inv_ref)
        np.testing.assert_array_equal(new, new_ref)
        assert new.dtype == s.dtype
        s = new
        done = g.done(s)
        finished += int(done.sum())
        s[done] = g.reset(int(done.sum()))      # keep the batch busy: a new rollout in that row
    return finished


@pytest.mark.parametrize("sig", SIGNATURES)
@pytest.mark.parametrize("max_len", [5, 12, 32, 64])
def test_batched_equals_reference(sig, max_len):
    if max_len < 6 and "list[int]:" in sig.split("->")[1]:
        max_len = 6
    n = max(1, int(32 * SCALE))
    finished = compare_rollouts(sig, max_len, n, steps=2 * max_len + 4, seed=hash((sig, max_len)) % 2**32)
    assert finished > 0


def test_single_row_batches_and_invalid_after_end():
    g, ref = batched(SIGNATURES[0], 16), ReferenceGrammar(SIGNATURES[0], max_len=16)
    s = g.reset(1)
    for a in V.encode(r"return <P0> \n <END>"):
        np.testing.assert_array_equal(g.mask(s), ReferenceGrammar.mask(ref, s))
        s, inv = g.step(s, [a])
        assert not inv[0]
    assert g.done(s)[0] and not g.mask(s).any()
    s2, inv = g.step(s, [V.END])
    assert inv[0] and (s2 == s).all()


def test_frame_cost_table_equals_reference_dijkstra():
    tb = tables()
    rng = np.random.default_rng(0)
    for sig in SIGNATURES[:5]:
        g = Grammar(sig, max_len=64)
        C = g._batched._P.C[0]
        fn_calls = np.flatnonzero((tb.ph == 2) & (tb.fields[:, 10] == 4))
        for f in np.concatenate([rng.choice(np.arange(1, tb.n), 150), rng.choice(fn_calls, 30)]):
            k = tb.keys[f]
            for push in range(3):
                key = tuple(k[:9]) + (0, 0, k[9]) + (k[10], push)
                assert tuple(C[f, push]) == g._frame_cost(key), (k, push)


def test_token_classes_of_frame_local_moves():
    """_ftrans depends on a token only through ACLASS: the tabulated transition of the class
    representative is the transition of every token (sampled frame states)."""
    tb = tables()
    rng = np.random.default_rng(1)
    for f in rng.choice(np.arange(1, tb.n), 300):
        k = tb.keys[f]
        fr = list(k[:9]) + [0, 0, k[9]]
        for a in range(V.VOCAB_SIZE):
            nf = _ftrans(fr, a)
            got = tb.ft[f, ACLASS[a]]
            if nf is None:
                assert got == 0, (k, V.TOKENS[a])
            else:
                assert tb.keys[got] == tuple(nf[:9]) + (nf[11], 0), (k, V.TOKENS[a])


def test_mixed_grammars_in_one_batch():
    """BatchedAutomaton: rows of different signatures and budgets in one call, each equal to
    its own grammar's reference."""
    sigs = [(SIGNATURES[i % len(SIGNATURES)], (16, 24, 40)[i % 3]) for i in range(9)]
    refs = [ReferenceGrammar(s, max_len=L) for s, L in sigs]
    auto = BatchedAutomaton(refs)
    rng = np.random.default_rng(2)
    gid = np.arange(48) % len(refs)
    s = np.concatenate([refs[i].reset(1) for i in gid])
    for _ in range(50):
        m = auto.mask(s, gid)
        for i in range(len(s)):
            np.testing.assert_array_equal(m[i], refs[gid[i]]._mask_row(s[i].tolist()))
        a = pick_actions(rng, m)
        new, inv = auto.step(s, a, gid)
        for i in range(len(s)):
            r = refs[gid[i]]._try(s[i].tolist(), int(a[i]))
            assert inv[i] == (r is None)
            np.testing.assert_array_equal(new[i], s[i] if r is None else r)
        s = new
        for i in np.flatnonzero(s[:, 1] != 0):
            s[i] = refs[gid[i]].reset(1)[0]


def test_cached_tables_equal_built_ones_and_a_bad_cache_file_is_rebuilt(tmp_path, monkeypatch):
    """The frame tables are built once and kept in a cache file (VRAMGYM_CACHE_DIR here): loaded,
    they equal the built ones array for array; a truncated or garbled file is built again and
    rewritten; an unwritable cache directory only costs the build."""
    from vramgym.envs import grammar as G
    fresh = G._Tables(cache=False)
    monkeypatch.setenv("VRAMGYM_CACHE_DIR", str(tmp_path))
    path = G._cache_path()
    assert path.parent == tmp_path and not path.exists()
    (tmp_path / "grammar_tables_0123.npz").write_bytes(b"another version's tables")

    def same(t):
        for k in G._CACHED + ("local9", "pack2fid", "ph", "cur", "eok", "fresh", "empty_close"):
            a, b = getattr(fresh, k), getattr(t, k)
            assert a.dtype == b.dtype and np.array_equal(a, b), k
        assert t.n == fresh.n and t.keys == fresh.keys
        assert np.array_equal(t.costs(1, 5), fresh.costs(1, 5))
    same(G._Tables())                        # built, then written (and the other version's file removed)
    assert path.exists() and G._load_tables(path) is not None
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    same(G._Tables())                        # loaded
    whole = path.read_bytes()
    for bad in (whole[: len(whole) // 2], whole[:100] + bytes([whole[100] ^ 1]) + whole[101:], b"", b"not a zip"):
        path.write_bytes(bad)
        assert G._load_tables(path) is None
        same(G._Tables())                    # built again and rewritten
        assert path.read_bytes() != bad and G._load_tables(path) is not None
    ro = tmp_path / "ro"
    ro.write_text("a file where the cache directory should be")
    monkeypatch.setenv("VRAMGYM_CACHE_DIR", str(ro))
    same(G._Tables())
    monkeypatch.setenv("VRAMGYM_CACHE_DIR", "off")
    assert G._cache_path() is None
