"""TaskBank.evaluate on the CPU runs each distinct candidate once (same task, same length, same
tokens before the length) and gives every repeat its results. The oracle is the same scorer
with the grouping turned off, on batches full of repeats: equal bodies, bodies that differ only
after their length (padding), the same body on another task or with another length."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import vramgym.envs.bank as B
from vramgym.envs import vocab as V
from vramgym.envs.bank import TaskBank, distinct_candidates

SEED = int(os.environ.get("VRAMGYM_SEED", np.random.SeedSequence().entropy % 2**32))


@pytest.fixture(scope="module")
def bank():
    return TaskBank.from_names(n_tests=8)


def keys(bodies, lengths, tasks):
    """What makes two candidates the same, as hashable rows."""
    return [(int(t), int(n), tuple(int(x) for x in b[: max(0, min(int(n), len(b)))]))
            for b, n, t in zip(bodies, lengths, tasks)]


def repeated_batch(bank, rng, n: int, width: int):
    """Reference bodies and random ones, each repeated many times with random padding after
    the length, now and then on another task or one token shorter."""
    from test_envs import REFERENCES
    names = [t.name for t in bank.tasks]
    base = [(np.array(V.encode(text))[:-1], names.index(name)) for name, text in REFERENCES.items()]
    for _ in range(8):
        k = int(rng.integers(0, width + 1))
        base.append((rng.integers(0, V.VOCAB_SIZE, k), int(rng.integers(0, len(bank)))))
    bodies = rng.integers(0, V.VOCAB_SIZE, (n, width))   # padding: random tokens
    lengths = np.zeros(n, np.int64)
    tasks = np.zeros(n, np.int64)
    for i, j in enumerate(rng.integers(0, len(base), n)):
        a, t = base[j]
        a = a[:width]
        bodies[i, : len(a)] = a
        lengths[i] = len(a) - (rng.random() < 0.1 and len(a) > 0)
        tasks[i] = (t + 1) % len(bank) if rng.random() < 0.1 else t
    return bodies, lengths, tasks


@pytest.mark.parametrize("width", [0, 1, 30])
def test_groups_are_exactly_the_equal_candidates(bank, width):
    rng = np.random.default_rng([SEED, width])
    bodies, lengths, tasks = repeated_batch(bank, rng, 500, width)
    lengths[:20] = rng.choice([-5, -1, width + 3, 2**62], 20)   # lengths outside the body
    first, inverse = distinct_candidates(bodies, lengths, tasks)
    k = keys(bodies, lengths, tasks)
    assert len(set(k)) == len(first), SEED                         # nothing merged or split
    assert all(k[first[inverse[i]]] == k[i] for i in range(len(k))), SEED
    assert len(np.unique(inverse)) == len(first) and (inverse[first] == np.arange(len(first))).all()


def test_hash_collisions_cost_runs_not_results(bank, monkeypatch):
    """With every row hashing alike, rows unlike their group's first row run on their own."""
    rng = np.random.default_rng([SEED, 1])
    bodies, lengths, tasks = repeated_batch(bank, rng, 200, 12)
    monkeypatch.setattr(B, "_row_hash", lambda b, *a: np.zeros(len(b), np.int64))
    first, inverse = distinct_candidates(bodies, lengths, tasks)
    k = keys(bodies, lengths, tasks)
    assert all(k[first[inverse[i]]] == k[i] for i in range(len(k))), SEED
    assert len(first) == 1 + sum(x != k[0] for x in k)


def test_scores_of_repeats_are_those_of_each_row_alone(bank, monkeypatch):
    """Every row's (compiled, passed, steps) as when each row is scored on its own, with an
    active mask; the scorer sees only the distinct active rows."""
    import vramgym.vm.evaluate as E
    rng = np.random.default_rng([SEED, 2])
    bodies, lengths, tasks = repeated_batch(bank, rng, 400, 30)
    active = rng.random(len(bodies)) < 0.8
    args = [torch.from_numpy(x) for x in (bodies, lengths, tasks, active)]
    seen = []
    scorer = E.score_token_rows
    monkeypatch.setattr(E, "score_token_rows", lambda s, c, *a, **kw: seen.append(len(c)) or scorer(s, c, *a, **kw))
    got = [x.numpy() for x in bank.evaluate(*args)]
    distinct = len(set(k for k, a in zip(keys(bodies, lengths, tasks), active) if a))
    assert seen == [distinct] and distinct < active.sum() / 4, (seen, distinct)
    monkeypatch.setattr(B, "distinct_candidates", lambda b, n, t: (np.arange(len(b)), np.arange(len(b))))
    seen.clear()
    want = [x.numpy() for x in bank.evaluate(*args)]
    assert seen == [active.sum()]
    for g, w, what in zip(got, want, ("compiled", "passed", "steps")):
        assert np.array_equal(g, w), (what, SEED, np.flatnonzero(g != w)[:5])
    assert not got[0][~active].any() and got[0][active].any() and (got[1][active] == bank.n_tests).any()


def test_candidates_come_in_row_order(bank):
    rng = np.random.default_rng([SEED, 3])
    bodies, lengths, tasks = repeated_batch(bank, rng, 300, 16)
    first, inverse = distinct_candidates(bodies, lengths, tasks)
    assert (np.diff(first) > 0).all() and first[0] == 0 and inverse[0] == 0
