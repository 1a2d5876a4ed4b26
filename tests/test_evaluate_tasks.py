"""evaluate_tasks: token-slot programs scored on their own tasks' tests.

The CPU reference (vramgym.vm.evaluate.evaluate_tasks_cpu) is checked against a per-row oracle
(compile_tokens + run_batch one program at a time); the GPU version (vramgym.vm.cuda) against
the CPU reference, exactly, on thousands of random programs across several tasks with a random
active mask, garbage past each row's count, rows that fail to compile, and chunking. GPU tests
skip without a GPU. VRAMGYM_SEED replays a run.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from vramgym.compiler import compile_tokens, tokenize
from vramgym.compiler.batch import CompiledBatch
from vramgym.compiler.random_programs import GeneratorConfig, generate_program, random_args
from vramgym.vm import ProgramBatch, VMConfig, cpu, cuda, encode_results, encode_tuples, opcodes as oc, run_batch
from vramgym.vm.evaluate import evaluate_tasks_cpu, execute_tasks_cpu
from vramgym.vm import evaluate as vm_evaluate
from vramgym.vm.values import KIND_BY_NAME, Encoded

SEED = int(os.environ.get("VRAMGYM_SEED", np.random.SeedSequence().entropy % 2**32))
N_GPU = int(os.environ.get("VRAMGYM_GPU_TASK_PROGRAMS", 4000))

# (params, ret, reference source, Python oracle of the expected result)
TASKS = [
    (("int", "int"), "int", "def f(a: int, b: int) -> int:\n    return a % 1000 + b % 1000\n",
     lambda a, b: a % 1000 + b % 1000),
    (("list",), "int",
     "def f(xs: list[int]) -> int:\n    s = 0\n    for x in xs:\n        s += x % 100\n    return s\n",
     lambda xs: sum(x % 100 for x in xs)),
    (("list",), "list", "def f(xs: list[int]) -> list[int]:\n    ys: list[int] = []\n    for x in xs:\n"
     "        ys = [x] + ys\n    return ys\n", lambda xs: xs[::-1]),
    (("int",), "bool", "def f(a: int) -> bool:\n    return a % 2 == 0\n", lambda a: a % 2 == 0),
]


def make_bank(rng: np.random.Generator, n_tests: int):
    """inputs, expected (Encoded, T * n_tests values) and ret_kinds (T,) of TASKS."""
    ins, exps = [], []
    for params, ret, _, fn in TASKS:
        args = random_args(rng, params, n_tests)
        ins.append(encode_tuples(args, params))
        exps.append(encode_results([fn(*a) for a in args], ret))
    ret_kinds = np.array([KIND_BY_NAME[t[1]] for t in TASKS], dtype=np.int32)
    return Encoded.concat(ins), Encoded.concat(exps), ret_kinds


def make_programs(rng: np.random.Generator, n: int, slot: int | None = None):
    """(tokens (n, S, 4), counts, task_ids, active): references, generated programs of the
    task's signature, and mutants; garbage rows past each count; a random active mask."""
    task_ids = rng.integers(0, len(TASKS), n)
    rows = []
    for t in task_ids:
        params, ret, ref, _ = TASKS[t]
        r = rng.random()
        if r < 0.15:
            src = ref
        else:
            cfg = GeneratorConfig(entry_name="entry", entry_params=params, entry_ret=ret, max_functions=2)
            src = generate_program(rng, cfg).source
        toks = tokenize(src)
        if r > 0.8:  # a mutant: kinds and values changed, rows dropped (often no longer compiles)
            toks = toks.copy()
            for _ in range(int(rng.integers(1, 4))):
                k = int(rng.integers(len(toks)))
                if rng.random() < 0.5:
                    toks[k, 0] = rng.integers(0, len(oc.TOKENS))
                else:
                    toks = np.delete(toks, k, axis=0)
        rows.append(toks)
    S = slot or max(len(t) for t in rows) + 3
    tokens = rng.integers(-3, 2**31 - 1, (n, S, 4)).astype(np.int32)  # garbage past the count
    counts = np.zeros(n, dtype=np.int64)
    for i, t in enumerate(rows):
        m = min(len(t), S)
        tokens[i, :m] = t[:m]
        counts[i] = m
    odd = rng.random(n)
    counts[odd < 0.02] = S + 5  # clamped to S
    counts[(odd >= 0.02) & (odd < 0.03)] = 0
    active = rng.random(n) < 0.8
    return tokens, counts, task_ids.astype(np.int64), active


def oracle(tokens, counts, task_ids, active, inputs, expected, n_tests, ret_kinds, config=None, code_cap=1024):
    """One program at a time, through the public compile_tokens and run_batch."""
    n, S = tokens.shape[:2]
    passed, steps, ok = np.zeros(n, np.int32), np.zeros(n, np.int64), np.zeros(n, bool)
    for i in np.flatnonzero(active):
        c = int(np.clip(counts[i], 0, S))
        res = compile_tokens(tokens[i, :c], np.array([0, c]), code_cap=code_cap)
        if not res.ok[0]:
            continue
        ok[i] = True
        t = int(task_ids[i])
        runs = (np.zeros(n_tests, np.int32), (t * n_tests + np.arange(n_tests)).astype(np.int32))
        # evaluate checks no signature (module docstring): drop the compiler's, as it does
        unchecked = CompiledBatch(res.code, res.lengths, res.errors)
        r = run_batch(unchecked.to_programs(0, ret_kinds[t]), inputs, runs, expected=expected, config=config,
                      out_cap=0)
        passed[i] = r.passed.sum()
        steps[i] = r.steps.astype(np.int64).sum()
    return passed, steps, ok


@pytest.mark.parametrize("chunk", [None, 7])
def test_cpu_reference_matches_per_program_oracle(chunk, monkeypatch):
    """chunk 7: the rows compile 7 at a time (evaluate_tasks_cpu bounds its code matrix so);
    the programs of every chunk must land in their own rows."""
    if chunk:
        monkeypatch.setattr(vm_evaluate, "COMPILE_CHUNK", chunk)
    rng = np.random.default_rng([SEED, 1])
    inputs, expected, ret_kinds = make_bank(rng, 12)
    progs = make_programs(rng, 300)
    config = VMConfig(fuel=5000)
    got = evaluate_tasks_cpu(*progs, inputs, expected, 12, ret_kinds, config=config)
    want = oracle(*progs, inputs, expected, 12, ret_kinds, config=config)
    for name, g, w in zip(("passed", "steps", "ok"), got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w), (name, np.flatnonzero(g != w)[:5], SEED)
    tokens, counts, task_ids, active = progs
    assert got[2].sum() > 50 and got[0].sum() > 0  # the mix exercises passing and failing programs
    assert not got[2][~active].any() and not got[0][~active].any() and not got[1][~active].any()
    # the references pass every test
    refs = [tokenize(t[2]) for t in TASKS]
    S = max(len(r) for r in refs)
    tok = np.zeros((len(refs), S, 4), np.int32)
    for i, r in enumerate(refs):
        tok[i, :len(r)] = r
    p, s, ok = evaluate_tasks_cpu(tok, [len(r) for r in refs], np.arange(len(refs)), None, inputs, expected, 12,
                                  ret_kinds)
    assert ok.all() and (p == 12).all() and (s > 0).all()


def test_cpu_reference_torch_and_edge_cases():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng([SEED, 2])
    inputs, expected, ret_kinds = make_bank(rng, 3)
    tokens, counts, task_ids, active = make_programs(rng, 40)
    a = evaluate_tasks_cpu(tokens, counts, task_ids, active, inputs, expected, 3, ret_kinds)
    b = evaluate_tasks_cpu(torch.from_numpy(tokens), torch.from_numpy(counts), torch.from_numpy(task_ids),
                           torch.from_numpy(active), (inputs.words, inputs.offsets), expected, 3, ret_kinds)
    assert all(isinstance(x, torch.Tensor) for x in b)
    assert all(np.array_equal(x, y.numpy()) for x, y in zip(a, b))
    c = evaluate_tasks_cpu(np.asfortranarray(tokens), counts, task_ids, active, inputs, expected, 3, ret_kinds)
    assert all(np.array_equal(x, y) for x, y in zip(a, c))  # a strided token array: the same
    p, s, ok = evaluate_tasks_cpu(tokens[:, :0], counts, task_ids, None, inputs, expected, 3, ret_kinds)
    assert not ok.any() and not p.any() and not s.any()  # slots of no tokens: nothing compiles
    # no tests: compiled or not, nothing runs
    empty = Encoded(np.zeros(0, np.int32), np.zeros(1, np.int64))
    p, s, ok = evaluate_tasks_cpu(tokens, counts, task_ids, active, empty, empty, 0, ret_kinds)
    assert np.array_equal(ok, a[2]) and not p.any() and not s.any()
    # nothing active
    p, s, ok = evaluate_tasks_cpu(tokens, counts, task_ids, np.zeros(40, bool), inputs, expected, 3, ret_kinds)
    assert not p.any() and not s.any() and not ok.any()
    with pytest.raises(ValueError, match="task_ids"):
        evaluate_tasks_cpu(tokens, counts, task_ids + 10, active, inputs, expected, 3, ret_kinds)
    with pytest.raises(ValueError, match="tests"):
        evaluate_tasks_cpu(tokens, counts, task_ids, active, inputs, expected, 4, ret_kinds)


def test_core_scorer_guards_what_it_reads_by():
    """cpu.score_tokens (vg_score_tokens, behind score_token_rows) takes task ids, token offsets
    and the tests' sizes on trust in the core: its wrapper refuses inconsistent ones."""
    rng = np.random.default_rng([SEED, 7])
    inputs, expected, ret_kinds = make_bank(rng, 3)
    toks = tokenize(TASKS[0][2])
    off = np.array([0, len(toks)], np.int64)
    cfg = VMConfig().as_array()
    args = (inputs, expected, 3, cfg, 1024, 4096, 1)
    ok, passed, steps = cpu.score_tokens(toks, off, np.array([0], np.int64), ret_kinds, *args)
    assert ok.tolist() == [True] and passed.tolist() == [3] and steps[0] > 0
    for task in ([-1], [len(TASKS)]):
        with pytest.raises(ValueError, match="task ids"):
            cpu.score_tokens(toks, off, np.array(task, np.int64), ret_kinds, *args)
    with pytest.raises(ValueError, match="items"):
        cpu.score_tokens(toks, off, np.array([0], np.int64), ret_kinds, inputs, expected, 4, *args[3:])
    with pytest.raises(ValueError, match="offsets"):
        cpu.score_tokens(toks, off + 1, np.array([0], np.int64), ret_kinds, *args)


# --- GPU == CPU ---------------------------------------------------------------------------------

from test_cuda_backend import gpu  # noqa: E402  (one GPU check and skip reason for every GPU test)


def _host(x):
    return x.cpu().numpy() if hasattr(x, "cpu") else x.get()


@gpu
@pytest.mark.parametrize("n_tests", [40, 7])
@pytest.mark.parametrize("config", [VMConfig(fuel=20_000), VMConfig(stack_size=oc.DEFAULT_STACK + 1)],
                         ids=["default", "global-stack"])
def test_evaluate_tasks_gpu_equals_cpu(n_tests, config, monkeypatch):
    rng = np.random.default_rng([SEED, 3, n_tests])
    inputs, expected, ret_kinds = make_bank(rng, n_tests)
    progs = make_programs(rng, N_GPU)
    want = evaluate_tasks_cpu(*progs, inputs, expected, n_tests, ret_kinds, config=config)
    for chunk in (None, 997):  # one chunk, and several
        monkeypatch.setattr(cuda, "MAX_CHUNK", chunk)
        got = cuda.evaluate_tasks(*progs, inputs, expected, n_tests, ret_kinds, config=config)
        for name, g, w in zip(("passed", "steps", "ok"), got, want):
            g = _host(g)
            assert g.dtype == w.dtype and np.array_equal(g, w), (name, chunk, np.flatnonzero(g != w)[:5], SEED)
    assert want[2].sum() > N_GPU // 4 and want[0].sum() > 0


@gpu
@pytest.mark.parametrize("share", [0.0, 0.02, 1.0])
def test_evaluate_tasks_gpu_sparse_masks(share):
    """An env burst: tens of thousands of rows, a few percent of them active (the listed rows:
    vg_active_rows, then the compile and scorer over that list, with the device's real grid),
    none and all: the CPU's results."""
    rng = np.random.default_rng([SEED, 14, int(share * 100)])
    inputs, expected, ret_kinds = make_bank(rng, 16)
    tokens, counts, task_ids, _ = make_programs(rng, 400)
    pick = rng.integers(0, 400, 40_000)   # 40,000 rows drawn from 400 programs
    tokens, counts, task_ids = tokens[pick], counts[pick], task_ids[pick]
    active = rng.random(len(pick)) < share
    want = evaluate_tasks_cpu(tokens, counts, task_ids, active, inputs, expected, 16, ret_kinds)
    got = cuda.evaluate_tasks(tokens, counts, task_ids, active, inputs, expected, 16, ret_kinds)
    for name, g, w in zip(("passed", "steps", "ok"), got, want):
        g = _host(g)
        assert np.array_equal(g, w), (name, share, np.flatnonzero(g != w)[:5], SEED)
    assert share == 0 or want[2].sum() > 0


@gpu
def test_evaluate_tasks_torch_no_sync():
    """Torch CUDA tensors in (the environments' state), torch CUDA tensors out, on torch's
    current stream; torch's sync debugger must see no synchronisation inside the call."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng([SEED, 4])
    inputs, expected, ret_kinds = make_bank(rng, 16)
    tokens, counts, task_ids, active = make_programs(rng, 1000)
    want = evaluate_tasks_cpu(tokens, counts, task_ids, active, inputs, expected, 16, ret_kinds)
    dev = torch.device("cuda")
    t = [torch.from_numpy(x).to(dev) for x in (tokens, counts, task_ids, active)]
    ins = (torch.from_numpy(inputs.words).to(dev), torch.from_numpy(inputs.offsets).to(dev))
    exp = (torch.from_numpy(expected.words).to(dev), torch.from_numpy(expected.offsets).to(dev))
    rk = torch.from_numpy(ret_kinds).to(dev)
    cuda.evaluate_tasks(*t, ins, exp, 16, rk)  # compile the module first (that syncs, once)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda.set_sync_debug_mode("error")
        try:
            got = cuda.evaluate_tasks(*t, ins, exp, 16, rk)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    stream.synchronize()
    assert all(isinstance(x, torch.Tensor) and x.is_cuda for x in got)
    assert [x.dtype for x in got] == [torch.int32, torch.int64, torch.bool]
    for name, g, w in zip(("passed", "steps", "ok"), got, want):
        assert np.array_equal(g.cpu().numpy(), w), name


# --- execute_tasks: bytecode images -------------------------------------------------------------

def make_images(rng: np.random.Generator, n: int):
    """(code (n, W) uint32, code_len, task_ids, active): the compiled programs of make_programs,
    some with words flipped (often invalid), lengths cut short, negative or past W."""
    tokens, counts, task_ids, active = make_programs(rng, n)
    code = np.zeros((n, 256), np.uint32)
    length = np.full(n, -1, np.int64)
    for i in range(n):
        c = int(np.clip(counts[i], 0, tokens.shape[1]))
        res = compile_tokens(tokens[i, :c], np.array([0, c]), code_cap=256)
        if res.ok[0]:
            length[i] = res.lengths[0]
            code[i, : length[i]] = res.code[0, : length[i]]
    u = rng.random(n)
    flip = u < 0.2
    for i in np.flatnonzero(flip & (length > 0)):
        code[i, rng.integers(length[i])] ^= np.uint32(1 << int(rng.integers(32)))
    length[(u > 0.2) & (u < 0.25)] //= 2
    length[(u > 0.25) & (u < 0.27)] = 300
    code[:, 250:] = rng.integers(0, 2**32, (n, 6), dtype=np.uint32)  # garbage past most images
    return code, length, task_ids, active


def image_oracle(code, length, task_ids, active, inputs, expected, n_tests, ret_kinds, config=None):
    """One image at a time: the validator, then run_batch on its task's tests."""
    n, W = code.shape
    passed, steps, valid = np.zeros(n, np.int32), np.zeros(n, np.int64), np.zeros(n, bool)
    for i in np.flatnonzero(active):
        if not 0 <= length[i] <= W:
            continue
        img = code[i, : length[i]]
        bad, pc = cpu.validate(img)
        if bad != -1 or pc < 0:
            continue
        valid[i] = True
        t = int(task_ids[i])
        runs = (np.zeros(n_tests, np.int32), (t * n_tests + np.arange(n_tests)).astype(np.int32))
        prog = ProgramBatch.build(img, np.array([0, len(img)]), 0, ret_kinds[t])
        r = run_batch(prog, inputs, runs, expected=expected, config=config, out_cap=0)
        passed[i] = r.passed.sum()
        steps[i] = r.steps.astype(np.int64).sum()
    return passed, steps, valid


def test_execute_tasks_cpu_matches_per_image_oracle():
    rng = np.random.default_rng([SEED, 7])
    inputs, expected, ret_kinds = make_bank(rng, 9)
    imgs = make_images(rng, 300)
    config = VMConfig(fuel=5000)
    got = execute_tasks_cpu(*imgs, inputs, expected, 9, ret_kinds, config=config)
    want = image_oracle(*imgs, inputs, expected, 9, ret_kinds, config=config)
    for name, g, w in zip(("passed", "steps", "valid"), got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w), (name, np.flatnonzero(g != w)[:5], SEED)
    assert got[2].sum() > 50 and (~got[2] & imgs[3]).sum() > 10 and got[0].sum() > 0
    torch = pytest.importorskip("torch")
    t = execute_tasks_cpu(*(torch.from_numpy(x.view(np.int32) if x.dtype == np.uint32 else x) for x in imgs),
                          inputs, expected, 9, ret_kinds, config=config)
    assert all(np.array_equal(a.numpy(), b) for a, b in zip(t, got))


@gpu
def test_execute_tasks_gpu_equals_cpu(monkeypatch):
    rng = np.random.default_rng([SEED, 8])
    inputs, expected, ret_kinds = make_bank(rng, 33)
    imgs = make_images(rng, 3000)
    want = execute_tasks_cpu(*imgs, inputs, expected, 33, ret_kinds)
    for chunk in (None, 997):
        monkeypatch.setattr(cuda, "MAX_CHUNK", chunk)
        got = cuda.execute_tasks(*imgs, inputs, expected, 33, ret_kinds)
        for name, g, w in zip(("passed", "steps", "valid"), got, want):
            g = _host(g)
            assert g.dtype == w.dtype and np.array_equal(g, w), (name, chunk, np.flatnonzero(g != w)[:5], SEED)


def _host_view(words, offsets):
    """The Encoded batch that device (words, offsets) stand for: each item whose offsets lie
    inside the words as those words, any other as one word of no value kind (bad_input for every
    function, as the kernels must treat it)."""
    parts = []
    for a, b in zip(offsets[:-1], offsets[1:]):
        parts.append(words[a:b] if 0 <= a <= b <= len(words) else np.full(1, 99, np.int32))
    lens = [len(p) for p in parts]
    return Encoded(np.concatenate(parts).astype(np.int32), np.concatenate([[0], np.cumsum(lens)]).astype(np.int64))


def check_offsets_outside_the_words(seed: int):
    """(words, offsets) pairs that live on the device are not checked on the host (a sync): an
    offset outside the words, or decreasing, must end that run as bad_input (an input) or a
    failed test (an expected value) in the kernel, never read past the buffer (AddressSanitizer
    on the emulator and compute-sanitizer on the GPU would report it). The CPU backend on what
    the offsets stand for (_host_view) gives the same passes and steps."""
    rng = np.random.default_rng([seed, 11])
    n_tests = 9
    inputs, expected, ret_kinds = make_bank(rng, n_tests)
    progs = make_programs(rng, 120)
    imgs = make_images(rng, 120)
    n_items = len(inputs.offsets) - 1
    for trial in range(6):
        k = int(rng.integers(1, n_items - 1))
        words, bad_in, bad_exp = inputs.words, inputs.offsets.copy(), expected.offsets.copy()
        if trial % 3 == 0:  # past the end: items k - 1 and k are both out
            bad_in[k] = len(inputs.words) + int(rng.integers(1, 1 << 40))
            bad_exp[k] = len(expected.words) + 7
        elif trial % 3 == 1:  # negative start / decreasing: items k - 1 and k
            bad_in[k] = -int(rng.integers(1, 1 << 20))
            bad_exp[k] = -3
        else:  # item k: a list header at the very end of the words that claims 3 more words
            words = np.concatenate([inputs.words, np.array([oc.KIND_LIST, 3], np.int32)])
            bad_in[k], bad_in[k + 1] = len(inputs.words), len(inputs.words) + 5
        want_in, want_exp = _host_view(words, bad_in), expected  # runs with a bad input trap: no expected counts
        dev_in, dev_exp = (words, bad_in), (expected.words, bad_exp)
        want = evaluate_tasks_cpu(*progs, want_in, want_exp, n_tests, ret_kinds)
        got = cuda.evaluate_tasks(*progs, dev_in, dev_exp, n_tests, ret_kinds)
        for name, g, w in zip(("passed", "steps", "ok"), got, want):
            assert np.array_equal(_host(g), w), (name, trial, seed)
        want = execute_tasks_cpu(*imgs, want_in, want_exp, n_tests, ret_kinds)
        got = cuda.execute_tasks(*imgs, dev_in, dev_exp, n_tests, ret_kinds)
        for name, g, w in zip(("passed", "steps", "valid"), got, want):
            assert np.array_equal(_host(g), w), (name, trial, seed)
    # expected values out of bounds alone: the runs happen (their steps count), no test passes
    bad_exp = expected.offsets.copy()
    bad_exp[1:] = len(expected.words) + 1
    got = cuda.evaluate_tasks(*progs, inputs, (expected.words, bad_exp), n_tests, ret_kinds)
    want = evaluate_tasks_cpu(*progs, inputs, expected, n_tests, ret_kinds)
    assert not _host(got[0]).any() and np.array_equal(_host(got[1]), want[1]) and want[0].any()


@gpu
def test_gpu_offsets_outside_the_words():
    check_offsets_outside_the_words(SEED)
