"""Fuzzing the batch API's arguments (not only their values: dtypes, shapes, ranges). Whatever
arrays a caller hands over, ProgramBatch / Encoded / run_batch either raise TypeError or
ValueError, or run and return one well-formed result per run: never a crash of the core, never a
read out of bounds. The run has to agree with the same arrays given as exact int64 copies, so
no conversion may change a value on the way in."""
import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from vramgym.compiler import compile_source
from vramgym.vm import Encoded, ProgramBatch, VMConfig, run_batch
from vramgym.vm import opcodes as oc

GOOD = compile_source("def f(a: int, xs: list[int]) -> int:\n    return a + len(xs)\n").code
DTYPES = [np.uint32, np.int32, np.int64, np.uint64, np.int8, np.uint16, np.float64, np.bool_]
TRAPS = {code for code, _, _ in oc.TRAPS}


@st.composite
def array(draw, base, lo, hi, max_len=12):
    """Mostly base's values in an integer dtype that holds them (so that many draws run); else
    other values, one out of any sane range, a random dtype, another shape."""
    n = draw(st.integers(0, max_len)) if base is None else len(base)
    vals = list(base) if base is not None and draw(st.integers(0, 4)) else \
        draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))
    if draw(st.integers(0, 4)):
        fits32 = all(-(2**31) <= v < 2**31 for v in vals)
        return np.array(vals, dtype=draw(st.sampled_from([np.int64, np.int32] if fits32 else [np.int64])))
    if vals and draw(st.booleans()):  # one value out of any sane range
        vals[draw(st.integers(0, len(vals) - 1))] = draw(st.sampled_from([-1, -(2**31) - 1, 2**32, 2**40, 2**63 - 1]))
    dtype = np.int64 if draw(st.booleans()) else draw(st.sampled_from(DTYPES))  # (int64 keeps the bad value)
    with np.errstate(all="ignore"):
        try:
            a = np.array(vals, dtype=object).astype(dtype)
        except (OverflowError, ValueError):
            a = np.array(vals, dtype=object)
    if draw(st.integers(0, 9)) == 0:
        a = a.reshape(1, -1)
    return a


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_batch_api_never_crashes_and_never_converts_silently(data):
    n_prog = data.draw(st.integers(0, 3))
    code = np.concatenate([GOOD] * n_prog) if n_prog else np.zeros(0, np.uint32)
    pieces = dict(
        code=data.draw(array(code.astype(np.int64), -(2**31), 2**32 - 1)),
        offsets=data.draw(array(np.arange(n_prog + 1) * len(GOOD), -2, len(code) + 2)),
        entry=data.draw(array([0] * n_prog, -1, 2)),
        ret_kind=data.draw(array([0] * n_prog, -1, 3)))
    words = [oc.KIND_INT, 5, oc.KIND_LIST, 2, 7, 8]
    in_words = data.draw(array(words * 2, -(2**31), 2**31 - 1))
    in_off = data.draw(array([0, 6, 12], -1, 13))
    runs = (data.draw(array(None, -1, 3)), data.draw(array(None, -1, 3)))
    if runs[0].shape != runs[1].shape:
        runs = (runs[0], runs[0].copy())
    try:
        batch = ProgramBatch(**pieces)
        inputs = Encoded(in_words, in_off)
        res = run_batch(batch, inputs, runs, config=VMConfig(fuel=1000), nthreads=1)
    except (TypeError, ValueError) as e:
        event(f"refused: {type(e).__name__}")
        return
    event("ran")
    # only values that fit were taken (a cast would have wrapped the others into valid-looking ones)
    def within(a, lo, hi):
        return all(lo <= int(v) <= hi for v in np.asarray(a).reshape(-1).tolist())
    assert within(pieces["code"], -(2**31), 2**32 - 1) and within(pieces["entry"], -(2**31), 2**31 - 1)
    assert within(pieces["ret_kind"], 0, 2) and within(pieces["offsets"], 0, len(batch.code))
    assert within(in_words, -(2**31), 2**31 - 1) and all(within(x, -(2**31), 2**31 - 1) for x in runs)
    r = len(runs[0].reshape(-1))
    assert res.status.shape == res.value.shape == res.steps.shape == (r,)
    assert set(res.status.tolist()) <= TRAPS and (res.steps >= 0).all() and (res.steps <= 1000).all()
    # what was accepted was taken exactly: the same values as int64 give the same runs
    exact = ProgramBatch(np.asarray(pieces["code"]).astype(np.int64), np.asarray(pieces["offsets"]).astype(np.int64),
                         np.asarray(pieces["entry"]).astype(np.int64), np.asarray(pieces["ret_kind"]).astype(np.int64))
    again = run_batch(exact, Encoded(np.asarray(in_words).astype(np.int64), np.asarray(in_off).astype(np.int64)),
                      (runs[0].astype(np.int64), runs[1].astype(np.int64)), config=VMConfig(fuel=1000), nthreads=1)
    for field in ("status", "value", "steps"):
        assert np.array_equal(getattr(res, field), getattr(again, field)), field
