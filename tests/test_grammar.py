"""The action vocabulary and the grammar/type-aware masks (envs/vocab.py, envs/grammar.py).

Properties: every masked rollout ends with END within L tokens and compiles (our compiler and
CPython), token arrays compile to the same bytecode as the rendered source, the mask is never
empty before END, batched masks equal single-env masks, reference solutions are reachable
token by token, and bad actions are flagged, never applied or raised."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from vramgym.compiler import compile_source, compile_tokens
from vramgym.envs import vocab as V
from vramgym.envs.grammar import Grammar
from vramgym.vm import execute

SIGNATURES = [
    "def f(a: int, b: int) -> int:",
    "def f(xs: list[int]) -> list[int]:",
    "def f(xs: list[int], k: int) -> bool:",
    "def g(n: int) -> bool:",
    "def h(xs: list[int], ys: list[int], t: bool, n: int) -> int:",
]
_GRAMMARS: dict = {}


def grammar(sig, max_len):
    key = (sig, max_len)
    if key not in _GRAMMARS:
        _GRAMMARS[key] = Grammar(sig, max_len=max_len)
    return _GRAMMARS[key]


def check_program(actions, sig):
    """The body compiles from source and from tokens, to the same bytecode, and CPython
    accepts the source."""
    src = V.detokenize(actions, sig)
    prog = compile_source(src)
    compile(src, "<masked>", "exec")
    toks = V.to_compiler_tokens(actions, sig)
    cb = compile_tokens(toks, np.array([0, len(toks)]))
    assert cb.ok[0], (src, cb.error(0, src))
    np.testing.assert_array_equal(cb.code[0, :cb.lengths[0]], prog.code, err_msg=src)
    return src, prog


def rollout(g, pick):
    """One masked rollout; pick(allowed_ids) chooses the action."""
    s = g.reset(1)
    actions = []
    while not g.done(s)[0]:
        m = g.mask(s)[0]
        assert m.any(), f"empty mask after {actions}"
        a = pick(np.flatnonzero(m))
        s, invalid = g.step(s, [a])
        assert not invalid[0]
        actions.append(int(a))
        assert len(actions) <= g.max_len
    assert actions[-1] == V.END
    return actions


@pytest.mark.parametrize("sig", SIGNATURES)
@pytest.mark.parametrize("max_len", [6, 12, 24, 64])
def test_random_masked_rollouts_compile(sig, max_len):
    rng = np.random.default_rng(hash((sig, max_len)) % 2**32)
    g = grammar(sig, max_len)
    n = 60 if max_len > 24 else 120
    for _ in range(n):
        check_program(rollout(g, rng.choice), sig)


@pytest.mark.parametrize("sig", SIGNATURES[:3])
def test_rollouts_biased_to_statements(sig):
    """Random rollouts favour long expressions; preferring structural tokens explores blocks,
    scoping, if/elif/else chains and loops."""
    rng = np.random.default_rng(7)
    g = grammar(sig, 80)
    structural = {V.ID[t] for t in ("if", "elif", "else", "while", "for", "<DEDENT>", "<NEWLINE>",
                                     "break", "continue", "pass", "return", "=")} | set(range(V.V0, V.V0 + 8))

    def pick(allowed):
        pref = [a for a in allowed if a in structural]
        return rng.choice(pref if pref and rng.random() < 0.7 else allowed)

    for _ in range(150):
        check_program(rollout(g, pick), sig)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SIGNATURES), st.integers(8, 48), st.data())
def test_hypothesis_rollouts(sig, max_len, data):
    g = grammar(sig, max_len)
    actions = rollout(g, lambda allowed: data.draw(st.sampled_from(list(allowed))))
    check_program(actions, sig)


REFERENCES = {
    "total": ("def total(xs: list[int]) -> int:", r"""
        v0 = 0 \n for v1 in <P0> : \n <INDENT> v0 += v1 \n <DEDENT> return v0 \n <END>""",
              [([],), ([1, 2, 3],), ([-5, 7],)]),
    "gcd": ("def gcd(a: int, b: int) -> int:", r"""
        while <P1> != 0 : \n <INDENT> v0 = <P0> % <P1> \n <P0> = <P1> \n <P1> = v0 \n
        <DEDENT> return <P0> \n <END>""", [(12, 18), (7, 0), (0, 5), (35, 14)]),
    "reverse": ("def rev(xs: list[int]) -> list[int]:", r"""
        v0 = [ ] \n v1 = len ( <P0> ) - 1 \n while v1 >= 0 : \n <INDENT>
        v0 . append ( <P0> [ v1 ] ) \n v1 -= 1 \n <DEDENT> return v0 \n <END>""",
                [([],), ([1, 2, 3],), ([4],)]),
    "maximum": ("def maximum(xs: list[int]) -> int:", r"""
        v0 = <P0> [ 0 ] \n for v1 in <P0> : \n <INDENT> if v1 > v0 : \n <INDENT> v0 = v1 \n
        <DEDENT> <DEDENT> return v0 \n <END>""", [([3, 9, 2],), ([-4, -1, -7],)]),
    "prefix_sums": ("def prefix(xs: list[int]) -> list[int]:", r"""
        v0 = [ ] \n v1 = 0 \n for v2 in <P0> : \n <INDENT> v1 += v2 \n v0 . append ( v1 ) \n
        <DEDENT> return v0 \n <END>""", [([],), ([1, 2, 3, 4],)]),
    "is_prime": ("def is_prime(n: int) -> bool:", r"""
        if <P0> < 2 : \n <INDENT> return False \n <DEDENT> v0 = 2 \n
        while v0 * v0 <= <P0> : \n <INDENT> if <P0> % v0 == 0 : \n <INDENT> return False \n
        <DEDENT> v0 += 1 \n <DEDENT> return True \n <END>""", [(0,), (2,), (9,), (13,), (97,)]),
    "sign": ("def sign(a: int) -> int:", r"""
        if <P0> < 0 : \n <INDENT> return - 1 \n <DEDENT> elif <P0> == 0 : \n <INDENT> return 0 \n
        <DEDENT> else : \n <INDENT> return 1 \n <DEDENT> <END>""", [(-3,), (0,), (8,)]),
    "count_in_range": ("def count(xs: list[int], k: int) -> int:", r"""
        v0 = 0 \n for v1 in range ( len ( <P0> ) ) : \n <INDENT>
        if <P0> [ v1 ] < <P1> and not <P0> [ v1 ] < 0 : \n <INDENT> v0 += 1 \n
        <DEDENT> <DEDENT> return v0 \n <END>""", [([1, 5, -2, 3], 4), ([], 1)]),
    "fact": ("def fact(n: int) -> int:", r"""
        if <P0> <= 1 : \n <INDENT> return 1 \n <DEDENT> return <P0> * <FN> ( <P0> - 1 ) \n <END>""",
             [(0,), (5,)]),
}


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_reference_solutions_reachable(name):
    sig, text, inputs = REFERENCES[name]
    actions = V.encode(text)
    g = Grammar(sig, max_len=64)
    s = g.reset(1)
    for i, a in enumerate(actions):
        assert g.mask(s)[0, a], f"{V.TOKENS[a]!r} masked at {i} after {V.detokenize(actions[:i], sig)!r}"
        s, invalid = g.step(s, [a])
        assert not invalid[0]
    assert g.done(s)[0]
    src, prog = check_program(actions, sig)
    ns = {}
    exec(src, ns)
    entry = V.as_signature(sig).name
    assert execute(prog, entry, inputs) == [ns[entry](*map(_copy, x)) for x in inputs]


def _copy(x):
    return list(x) if isinstance(x, list) else x


def test_batched_mask_equals_single_env():
    sig = SIGNATURES[2]
    g = grammar(sig, 32)
    n = 24
    rng = np.random.default_rng(3)
    batch = g.reset(n)
    singles = [g.reset(1) for _ in range(n)]
    for _ in range(32):
        m = g.mask(batch)
        for i in range(n):
            np.testing.assert_array_equal(m[i], g.mask(singles[i])[0])
        acts = np.array([rng.choice(np.flatnonzero(m[i])) if m[i].any() else V.END for i in range(n)])
        batch, inv = g.step(batch, acts)
        for i in range(n):
            singles[i], inv1 = g.step(singles[i], acts[i:i + 1])
            assert inv1[0] == inv[i]
            np.testing.assert_array_equal(singles[i][0], batch[i])
    assert g.done(batch).all()   # L = 32 forces every env to finish


def test_bad_actions_are_flagged_not_applied():
    g = grammar(SIGNATURES[0], 16)
    s = g.reset(3)
    m = g.mask(s)
    masked = int(np.flatnonzero(~m[0])[0])
    new, inv = g.step(s, [-1, V.VOCAB_SIZE, masked])
    assert inv.tolist() == [True, True, True]
    np.testing.assert_array_equal(new, s)
    # after END every action is invalid and the mask is empty
    s1 = g.reset(1)
    for a in V.encode(r"return <P0> \n <END>"):
        s1, inv = g.step(s1, [a])
        assert not inv[0]
    assert g.done(s1)[0] and not g.mask(s1).any()
    s2, inv = g.step(s1, [V.END])
    assert inv[0] and (s2 == s1).all()


def test_length_budget():
    g = grammar(SIGNATURES[1], 64)
    # the shortest body: `return [ ] NEWLINE END`
    assert g.min_tokens_to_finish(g.reset(1)).tolist() == [5]
    with pytest.raises(ValueError):
        Grammar(SIGNATURES[1], max_len=4)
    g5 = Grammar(SIGNATURES[1], max_len=5)
    assert rollout(g5, lambda allowed: allowed[0]) == V.encode(r"return [ ] \n <END>")


def test_the_longest_budget_stays_within_the_compilers_nesting_limit():
    """A body of max_len tokens could be one long operator chain or elif chain, and the compiler
    refuses more than MAX_NESTING levels (for CPython's sake): max_len stops at 1,024, and the
    longest `+` chain the mask allows there compiles, in the compiler and in CPython."""
    from vramgym.vm import opcodes as oc
    with pytest.raises(ValueError, match="max_len 1025 is above 1024"):
        Grammar(SIGNATURES[0], max_len=1025)
    g = Grammar(SIGNATURES[0], max_len=1024)
    prefer = [V.ID["+"], V.ID["<P0>"], V.ID["return"]]
    actions = rollout(g, lambda allowed: next((a for a in prefer if a in allowed), allowed[0]))
    src = V.detokenize(actions, SIGNATURES[0])
    assert src.count("+") > 480
    compile(src, "<masked>", "exec")
    prog = compile_source(src)
    toks = V.to_compiler_tokens(actions, SIGNATURES[0])
    cb = compile_tokens(toks, np.array([0, len(toks)]), code_cap=oc.LIMITS["MAX_CODE"])
    assert cb.ok[0]
    np.testing.assert_array_equal(cb.code[0, :cb.lengths[0]], prog.code)


def test_vocabulary_is_stable():
    assert V.VOCAB_SIZE == 73
    assert V.TOKENS[:4] == ("<END>", "<NEWLINE>", "<INDENT>", "<DEDENT>")
    assert V.ID["return"] == 4 and V.ID["("] == 19 and V.ID["+"] == 32 and V.ID["len"] == 43
    assert V.ID["<FN>"] == 50 and V.ID["<P0>"] == 51 and V.ID["v0"] == 55 and V.ID["9"] == 72


def test_detokenize_canonical_text():
    sig = V.Signature.parse("def f(xs: list[int], k: int) -> int:")
    acts = V.encode(r"v0 = - <P1> * ( <P0> [ 0 ] + 2 ) \n return len ( <P0> . pop ( ) * 2 + [ 1 , v0 ] ) \n <END>")
    assert V.detokenize(acts, sig) == (
        "def f(xs: list[int], k: int) -> int:\n"
        "    v0 = -k * (xs[0] + 2)\n"
        "    return len(xs.pop() * 2 + [1, v0])\n")
    with pytest.raises(ValueError):
        V.Signature.parse("def f(v0: int) -> int:")   # pool names are reserved
