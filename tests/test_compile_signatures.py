"""The batch compilers return every function's signature (CompiledBatch.signatures), and
to_programs carries the entry's along: the return kind is taken from it (or checked against the
one given), and run_batch traps bad_input on a run whose arguments have other kinds. Before,
the batch path took ret_kind on trust and read an int given for a list as a list reference."""
import dataclasses
import os

import numpy as np
import pytest

from vramgym.compiler import compile_batch, compile_source, compile_tokens, tokenize
from vramgym.compiler.batch import CompiledBatch, unpack_signatures
from vramgym.compiler.random_programs import generate_program, random_args
from vramgym.vm import Encoded, ProgramBatch, VMConfig, encode_tuples, opcodes as oc, run_batch
from vramgym.vm.batch import UNKNOWN_KINDS
from vramgym.vm.values import KIND_BY_NAME

SEED = int(os.environ.get("VRAMGYM_SEED", np.random.SeedSequence().entropy % 2**32))
BAD_INPUT, BAD_BYTECODE = oc.TRAP_CODES["bad_input"], oc.TRAP_CODES["bad_bytecode"]

TWO = ("def f(xs: list[int], ys: list[int]) -> int:\n    return len(xs) * 100 + xs[0]\n\n"
       "def g(a: int, b: bool) -> list[int]:\n    return [a, a]\n")
PRED = "def p(n: int) -> bool:\n    return n > 2\n"


def _tokens(sources):
    toks = [tokenize(s) for s in sources]
    return np.concatenate(toks).astype(np.int32), np.cumsum([0] + [len(t) for t in toks]).astype(np.int64)


def test_signatures_match_compile_source_on_random_programs():
    rng = np.random.default_rng(SEED)
    sources = [generate_program(rng).source for _ in range(300)] + [TWO, PRED, "def broken(:\n"]
    for cb in (compile_batch(sources, nthreads=2), compile_tokens(*_tokens(sources[:-1]))):
        assert cb.signatures.dtype == np.int64 and cb.signatures.shape[0] == len(cb)
        for i, src in enumerate(sources[:len(cb)]):
            if not cb.ok[i]:
                assert (cb.signatures[i] == 0).all() and cb.signature(i) is None
                continue
            fns = compile_source(src).functions
            got = [cb.signature(i, f) for f in range(cb.signatures.shape[1])]
            assert got[:len(fns)] == [(f.params, f.ret) for f in fns], (SEED, src)
            assert all(g is None for g in got[len(fns):])
    assert cb.signature(0, -1) is None and cb.signature(0, 10**6) is None
    assert cb.signature(np.int64(1), np.int32(0)) == cb.signature(1, 0)


def test_signature_indices_are_ints_and_programs_do_not_wrap():
    """Found by session 30's audit: signature(-1) wrapped to the last program, a bool was taken
    as an index and a float got numpy's IndexError."""
    cb = compile_batch([TWO, PRED])
    for i in (-1, 2, 10**6):
        with pytest.raises(IndexError, match=f"program index i={i} out of range for a batch of 2"):
            cb.signature(i)
    for i, f in ((True, 0), (1.0, 0), ("0", 0), (0, True), (0, 0.0), (0, None)):
        with pytest.raises(TypeError, match="must be an int"):
            cb.signature(i, f)


def test_unpack_signatures_layout():
    present, ret, nparams, params = unpack_signatures(np.array([[0, 1 | oc.KIND_LIST << 1 | 2 << 3 | 1 << 8 | 2 << 10]]))
    assert present.tolist() == [[False, True]] and ret[0, 1] == oc.KIND_LIST and nparams[0, 1] == 2
    assert params[0, 1, :3].tolist() == [oc.KIND_BOOL, oc.KIND_LIST, -1] and (params[0, 0] == -1).all()


def test_to_programs_takes_and_checks_the_return_kind():
    cb = compile_batch([TWO, PRED, TWO])
    assert cb.to_programs().ret_kind.tolist() == [oc.KIND_INT, oc.KIND_BOOL, oc.KIND_INT]
    assert cb.to_programs(entry=[1, 0, 0]).ret_kind.tolist() == [oc.KIND_LIST, oc.KIND_BOOL, oc.KIND_INT]
    assert cb.to_programs(ret_kind=np.array([0, 1, 0])).ret_kind.tolist() == [0, 1, 0]
    with pytest.raises(ValueError, match="program 1 is int, but its function 0 returns bool"):
        cb.to_programs(ret_kind="int")
    with pytest.raises(ValueError, match="program 0 is bool, but its function 1 returns list"):
        cb.to_programs(entry=1, ret_kind="bool")


def test_runs_with_other_argument_kinds_trap_bad_input():
    """The audit's case, now through compile_batch: an int for a list parameter was taken as a
    reference to the other argument's list, and the run returned a value."""
    programs = compile_batch([TWO]).to_programs()
    inputs = Encoded.concat([encode_tuples([([5, 6], [1])], ("list", "list")),
                             encode_tuples([(0, [7, 8, 9])], ("int", "list")),
                             encode_tuples([([5], True)], ("list", "bool"))])
    res = run_batch(programs, inputs, (np.zeros(3, np.int32), np.arange(3, dtype=np.int32)))
    assert res.status.tolist() == [0, BAD_INPUT, BAD_INPUT] and res.value[0] == 205
    # the same runs without the signatures (a hand-built batch): unchecked, as documented
    bare = compile_batch([TWO])
    raw = CompiledBatch(bare.code, bare.lengths, bare.errors).to_programs()
    assert raw.params is None
    assert run_batch(raw, inputs, (np.zeros(3, np.int32), np.arange(3, dtype=np.int32))).status[1] == 0


def test_random_programs_run_as_from_programs():
    """compile_batch + to_programs + run_batch == from_programs + run_batch on random programs and
    their own argument kinds, and every run traps bad_input on arguments of other kinds."""
    rng = np.random.default_rng(SEED + 1)
    for _ in range(40):
        g = generate_program(rng)
        p = compile_source(g.source)
        f = p.function(g.entry)
        args = random_args(rng, g.params, 8)
        inputs = encode_tuples(args, f.params)
        batch = compile_batch([g.source]).to_programs(entry=f.index)
        want = run_batch(ProgramBatch.from_programs([p], g.entry), inputs)
        got = run_batch(batch, inputs)
        assert batch.ret_kind[0] == KIND_BY_NAME[f.ret]
        checked = ProgramBatch(batch.code, batch.offsets, batch.entry, batch.ret_kind, batch.params)
        for name in ("code", "offsets", "entry", "ret_kind", "params"):   # (to_programs skips the scans)
            a, c = getattr(batch, name), getattr(checked, name)
            assert not a.flags.writeable and np.array_equal(a, c) and a.dtype == c.dtype, name
        for field in ("status", "value", "steps"):
            assert np.array_equal(getattr(got, field), getattr(want, field)), (SEED + 1, g.source)
        if f.params:
            other = tuple("int" if k != "int" else "bool" for k in f.params)
            wrong = encode_tuples([tuple(0 if k == "int" else False for k in other)], other)
            assert run_batch(batch, wrong).status.tolist() == [BAD_INPUT], g.source


def test_failed_programs_and_missing_entries_are_not_checked():
    """Their runs keep their own trap: bad_bytecode for a failed compile, bad_input for an entry
    index the program does not have."""
    cb = compile_batch(["def broken(:\n", PRED])
    programs = cb.to_programs(entry=[0, 5], ret_kind=None)
    assert (programs.params == UNKNOWN_KINDS).all()
    inputs = encode_tuples([(3,)], ("int",))
    res = run_batch(programs, inputs, (np.array([0, 1], np.int32), np.zeros(2, np.int32)))
    assert res.status.tolist() == [BAD_BYTECODE, BAD_INPUT]


def test_program_batch_accepts_only_whole_unknown_rows():
    cb = compile_batch([PRED])
    b = cb.to_programs()
    params = b.params.copy()
    params[0, 3] = UNKNOWN_KINDS
    with pytest.raises(ValueError, match="whole row"):
        ProgramBatch(b.code, b.offsets, b.entry, b.ret_kind, params)
    params[0] = UNKNOWN_KINDS
    assert (ProgramBatch(b.code, b.offsets, b.entry, b.ret_kind, params).params == UNKNOWN_KINDS).all()


def test_to_programs_checks_a_hand_made_signature_table():
    cb = compile_batch([PRED, PRED])
    with pytest.raises(ValueError, match="one row per program"):
        CompiledBatch(cb.code, cb.lengths, cb.errors, cb.signatures[:1]).to_programs()
    with pytest.raises(TypeError, match="integer array"):
        CompiledBatch(cb.code, cb.lengths, cb.errors, cb.signatures.astype(float)).to_programs()
    with pytest.raises(ValueError, match="2-D"):
        CompiledBatch(cb.code, cb.lengths, cb.errors, cb.signatures[:, 0]).to_programs()


def test_core_kind_check_equals_the_python_check():
    """The CPU core checks input kinds itself; other backends go through batch._trap_kind_mismatches.
    Both on the same runs: random signatures, inputs of random kinds and arities, malformed kind
    words, a program without parameters, an unchecked row, indices out of range."""

    from vramgym.vm import batch as vb
    rng = np.random.default_rng(SEED + 2)
    kinds = ["int", "bool", "list"]
    sources, sigs = [], []
    for i in range(12):
        params = [str(k) for k in rng.choice(kinds, size=int(rng.integers(0, 4)))]
        ptxt = ", ".join(f"a{j}: {'list[int]' if k == 'list' else k}" for j, k in enumerate(params))
        # (half of them loop: run_batch runs those as native code where the JIT is built, where
        # the kinds are checked as the arguments load)
        body = "    t = 7\n    for i in range(2):\n        t += i\n    return t\n" if i % 2 else "    return 7\n"
        sources.append(f"def f({ptxt}) -> int:\n{body}")
        sigs.append(params)
    programs = compile_batch(sources).to_programs()
    params = programs.params.copy()
    params[3] = UNKNOWN_KINDS
    programs = dataclasses.replace(programs, params=params)
    rows = []
    for _ in range(40):
        sig = sigs[int(rng.integers(len(sigs)))] if rng.random() < 0.6 else \
            [str(k) for k in rng.choice(kinds, size=int(rng.integers(0, 4)))]
        enc = encode_tuples([tuple(int(rng.integers(-3, 3)) if k == "int" else bool(rng.integers(2)) if k == "bool"
                                   else [1, 2][:int(rng.integers(3))] for k in sig)], sig)
        words = enc.words.copy()
        if rng.random() < 0.15 and len(words):
            words[0] = rng.choice([5, 126, 127, -4, 2**30])  # a malformed kind word
        rows.append(words)
    offsets = np.concatenate([[0], np.cumsum([len(w) for w in rows])]).astype(np.int64)
    inputs = Encoded(np.concatenate(rows).astype(np.int32), offsets)
    run_prog = np.repeat(np.arange(len(sources), dtype=np.int32), len(rows))
    run_in = np.tile(np.arange(len(rows), dtype=np.int32), len(sources))
    run_prog[:3], run_in[3:5] = [-1, len(sources), 2**31 - 1], [-1, len(rows)]
    # (and with limits that end runs as their arguments load: bad_input still comes first)
    for config in (VMConfig(), VMConfig(heap_size=1), VMConfig(stack_size=2), VMConfig(fuel=1)):
        core = run_batch(programs, inputs, (run_prog, run_in), config=config)
        bare = dataclasses.replace(programs, params=None)
        py = run_batch(bare, inputs, (run_prog, run_in), config=config)
        vb._trap_kind_mismatches(py, programs, inputs, run_prog, run_in)
        for field in ("status", "value", "steps"):
            assert np.array_equal(getattr(core, field), getattr(py, field)), (field, config, SEED + 2)
        assert (core.status == BAD_INPUT).sum() > len(run_prog) // 4
        assert (core.status == 0).sum() > 20 or config != VMConfig()


def test_hand_made_tables_and_params_are_checked():
    """Found by review: values a compiler never writes must not reach the core."""
    cb = compile_batch([PRED])
    table = cb.signatures.copy()
    table[0, 0] |= 3 << 1  # return kind 3
    bad = CompiledBatch(cb.code, cb.lengths, cb.errors, table)
    for call in (bad.to_programs, lambda: bad.signature(0)):
        with pytest.raises(ValueError, match="not a packed signature"):
            call()
    table = cb.signatures.copy()
    table[0, 0] |= 3 << 8  # parameter kind 3
    with pytest.raises(ValueError, match="not a packed signature"):
        CompiledBatch(cb.code, cb.lengths, cb.errors, table).to_programs()
    b = cb.to_programs()
    for row in ([-1, -1, 0] + [-1] * 14, [0] * 17):  # a hole before a kind; 17 kinds
        with pytest.raises(ValueError, match="followed by -1s"):
            ProgramBatch(b.code, b.offsets, b.entry, b.ret_kind, np.array([row]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.params = b.params[:, :5]  # a batch is checked once: it cannot change afterwards
    with pytest.raises(ValueError, match="params must be an integer array of shape"):
        dataclasses.replace(b, params=b.params[:, :5])


def test_validators_refuse_programs_longer_than_the_core_runs():
    from vramgym.vm import cpu
    p = compile_source(PRED).code
    long = np.concatenate([p, np.full(oc.LIMITS["MAX_CODE"] + 1 - len(p), p[-1], dtype=np.uint32)])
    assert cpu.validate(long[:oc.LIMITS["MAX_CODE"]]) == (-1, 0)  # one word shorter: valid
    bad, pc = cpu.validate_batch(long, np.array([0, len(long)], np.int64), np.zeros(1, np.int32))
    assert (int(bad[0]), int(pc[0])) == (0, -1) == cpu.validate(long)


def test_entries_and_functions_past_the_table_are_absent_not_errors():
    """Session 30's mutation audit: off-by-one bounds at the signature table's width passed."""
    cb = compile_batch(["def f(n: int) -> int:\n    return n\n"])
    width = cb.signatures.shape[1]
    assert cb.signature(0, width) is None and cb.signature(0, width - 1) == (("int",), "int")
    pb = cb.to_programs(entry=width)   # no program has that function: its runs trap, to_programs does not fail
    assert run_batch(pb, encode_tuples([(1,)], ["int"])).status.tolist() == [oc.TRAP_CODES["bad_input"]]


def test_failed_programs_signatures_are_not_trusted():
    ok = compile_batch(["def f(n: int) -> list[int]:\n    return [n]\n"])
    # a hand-made batch whose failed row still holds a signature: it is not read
    failed = dataclasses.replace(ok, lengths=np.array([-1], np.int32), errors=np.array([[1, 1, 1, 0]], np.int32))
    pb = failed.to_programs(ret_kind="int")
    assert pb.ret_kind.tolist() == [oc.KIND_INT] and (pb.params[0] == UNKNOWN_KINDS).all()
    # a batch of list-returning candidates with one compile failure takes ret_kind="list"
    cb = compile_batch(["def f(n: int) -> list[int]:\n    return [n]\n", "def f(n: int) -> list[int]:\n    return [m]\n"])
    assert cb.ok.tolist() == [True, False]
    assert cb.to_programs(ret_kind="list").ret_kind.tolist() == [oc.KIND_LIST] * 2


def test_packed_signatures_with_too_many_parameters_are_refused():
    cb = compile_batch(["def f(n: int) -> int:\n    return n\n"])
    bad = dataclasses.replace(cb, signatures=np.array([[1 | (20 << 3)]], np.int64))   # 20 parameters
    for call in (lambda: bad.signature(0), bad.to_programs):
        with pytest.raises(ValueError, match="not a packed signature"):
            call()
