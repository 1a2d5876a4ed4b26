"""compiler.batch.packed_rows: the used words of chosen rows of a (N, code_cap) code matrix, one
program after another (CompiledBatch.to_programs and the task scorers pack their programs so)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from vramgym.compiler import compile_batch
from vramgym.compiler.batch import packed_rows

SEED = int(os.environ.get("VRAMGYM_SEED", np.random.SeedSequence().entropy % 2**32))


def reference(code, lengths, rows):
    """The boolean-mask packing that packed_rows replaced: row by row, each cut to its length."""
    parts = [code[i, :lengths[i]] for i in rows]
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    return (np.concatenate(parts) if parts else code[:0, 0]), offsets


@pytest.mark.parametrize("trial", range(20))
def test_packed_rows_equals_row_by_row(trial):
    rng = np.random.default_rng([SEED, trial])
    n, w = int(rng.integers(0, 40)), int(rng.integers(1, 70))
    code = rng.integers(0, 2**32, (n, w), dtype=np.uint64).astype(np.uint32)
    lengths = rng.integers(0, w + 1, n).astype(np.int32)
    lengths[rng.random(n) < 0.2] = 0
    rows = np.sort(rng.choice(n, int(rng.integers(0, n + 1)), replace=False)) if n else np.zeros(0, np.int64)
    if trial % 3 == 0 and n:  # any order and repeats are allowed
        rows = rng.integers(0, n, int(rng.integers(0, 2 * n)))
    for src in (code, np.asfortranarray(code), code[:, ::-1].copy()[:, ::-1]):  # not C-contiguous too
        got, off = packed_rows(src, lengths, rows)
        want, woff = reference(src, lengths, rows)
        assert got.dtype == code.dtype and np.array_equal(got, want) and np.array_equal(off, woff), SEED
    got, off = packed_rows(code, lengths)
    want, woff = reference(code, lengths, np.arange(n))
    assert np.array_equal(got, want) and np.array_equal(off, woff), SEED


def test_packed_rows_rejects_lengths_outside_the_matrix():
    code = np.arange(12, dtype=np.uint32).reshape(3, 4)
    for bad in ([1, 5, 0], [1, -1, 0]):
        with pytest.raises(ValueError, match=r"lengths\[1\]"):
            packed_rows(code, np.array(bad))
    packed_rows(code, np.array([1, 5, 0]), rows=[0, 2])  # only the chosen rows are checked
    with pytest.raises(ValueError, match="2-D"):
        packed_rows(code.ravel(), np.array([1]))


def test_to_programs_packs_what_compiled():
    ok_src = "def f(a: int) -> int:\n    return a + {}\n"
    sources = [ok_src.format(i) if i % 3 else "def f(:\n" for i in range(10)]
    cb = compile_batch(sources, code_cap=64)
    progs = cb.to_programs()
    for i in range(10):
        want = cb.code[i, :max(cb.lengths[i], 0)]
        assert np.array_equal(progs.code[progs.offsets[i]:progs.offsets[i + 1]], want)
    assert (np.diff(progs.offsets) == np.maximum(cb.lengths, 0)).all() and (cb.lengths[::3] < 0).all()
