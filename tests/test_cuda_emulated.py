"""The CUDA backend's launches and kernels without a GPU: cuda_kernels.cu compiled for the host
(tests/native/cuda_emu.cpp: a std::thread per CUDA thread, warp intrinsics at a per-warp
barrier), with numpy standing in for CuPy. cuda.evaluate_tasks, cuda.evaluate and, through the
GPU suite of test_cuda_backend.py run here at a smaller scale, cuda.compile_batch and
compile_tokens (bytecode, errors, signatures) and run_batch must equal the CPU backend exactly;
a child run under AddressSanitizer and UBSan checks the kernels' memory accesses. This checks
cuda.py's argument lists, dtypes, chunking and the kernels' indexing, masks and per-warp sums;
not the GPU's memory model, streams, DLPack or speed (the GPU tests in test_cuda_backend.py and
test_evaluate_tasks.py do, on a GPU).
"""
from __future__ import annotations

import ctypes
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import native_build

from test_evaluate_tasks import check_offsets_outside_the_words, make_bank, make_images, make_programs
from vramgym.compiler import tokenize
from vramgym.vm import VMConfig, cuda, encode_results, encode_tuples, opcodes as oc
from vramgym.vm.evaluate import evaluate_tasks_cpu, execute_tasks_cpu

ROOT = Path(__file__).resolve().parent.parent
EMU = ROOT / "tests" / "native" / "cuda_emu.cpp"
INCLUDES = [ROOT / "vm" / "csrc", ROOT / "compiler" / "csrc"]
# VG_NO_THREADED_DISPATCH: vm.h's switch interpreter, the one CUDA compiles (the host's threaded one
# with superinstructions is tested elsewhere), so the emulated kernels run the device's code path
FLAGS = ["-std=c++20", "-O1", "-pthread", "-shared", "-fPIC", f"-DVG_LOCAL_STACK={cuda.LOCAL_STACK}",
         "-DVG_NO_THREADED_DISPATCH"]
SEED = int(os.environ.get("VRAMGYM_SEED", np.random.SeedSequence().entropy % 2**32))
COMPILE_MODES = {cuda.COMPILE_SOURCES: "sources", cuda.COMPILE_TOKENS: "tokens", cuda.COMPILE_SLOTS: "slots",
                 cuda.COMPILE_ROWS: "rows"}


# VRAMGYM_EMU_SANITIZE=1: the emulator under AddressSanitizer and UBSan (the process must preload
# the runtime: test_emulated_kernels_under_sanitizers below runs this module so)
SANITIZE = ["-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"] \
    if os.environ.get("VRAMGYM_EMU_SANITIZE") == "1" else []


def _library(switch_fuse: bool = False, prefetch: bool = False, fused_code: bool = False) -> Path:
    """Build (or reuse) the emulator; the key covers its source, every header and the flags.
    switch_fuse: the VM with its peephole superinstructions (cuda.SWITCH_FUSE); prefetch: each
    step's next word loaded ahead (cuda.PREFETCH); fused_code: each warp translates its program into
    fuse.h's superinstructions first (cuda.FUSED_CODE)."""
    return native_build.build("vramgym-cuda-emu", "cuda_emu.so", EMU,
                              [*FLAGS, *SANITIZE, f"-DVG_SWITCH_FUSE={int(switch_fuse)}",
                               f"-DVG_PREFETCH={int(prefetch)}", f"-DVG_FUSED_CODE={int(fused_code)}",
                               f"-DVG_FX_CAP={cuda.FX_CAP}"],
                              INCLUDES, sorted(f for d in INCLUDES for f in list(d.glob("*.h")) + list(d.glob("*.cu"))))


class _EmuDevice:
    """cuda._Device over the emulator: kernels called like CuPy RawKernels."""

    sms = 2

    def __init__(self, so: ctypes.CDLL):
        self.so = so
        self.so.emu_launch.restype = ctypes.c_int
        self.so.emu_launch.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
        self.k = _Kernels(self)
        self.launches: list[str] = []
        sizes = np.zeros(6, np.int64)
        self.k["vg_sizes"]((1,), (1,), (sizes,))
        self.lexer_bytes, self.compiler_bytes, self.fx_warp_bytes = int(sizes[0]), int(sizes[1]), int(sizes[5])

    def resident_warps(self, kernel: str) -> int:
        return 16


class _Kernels(dict):
    def __init__(self, dev):
        super().__init__()
        self.dev = dev

    def __missing__(self, name):
        def launch(grid, block, args):
            held = []
            for a in args:
                if isinstance(a, np.ndarray):
                    assert a.flags.c_contiguous, (name, "non-contiguous argument")
                    # CuPy's arrays of no elements point nowhere: the kernels get a null pointer
                    held.append(ctypes.c_void_p(a.ctypes.data if a.size else 0))
                elif isinstance(a, np.int32):
                    held.append(ctypes.c_int32(int(a)))
                elif isinstance(a, (np.int64, np.uint64)):
                    held.append((ctypes.c_int64 if isinstance(a, np.int64) else ctypes.c_uint64)(int(a)))
                else:
                    raise TypeError(f"{name}: argument of type {type(a).__name__} (CuPy needs numpy scalars)")
            ptrs = (ctypes.c_void_p * len(held))(*[ctypes.addressof(h) for h in held])
            assert self.dev.so.emu_launch(name.encode(), grid[0], block[0], ptrs) == 0, f"no kernel {name}"
            # vg_compile by its mode (its first argument): vg_compile:sources, :tokens or :slots
            self.dev.launches.append(f"{name}:{COMPILE_MODES[int(args[0])]}" if name == "vg_compile" else name)
        return launch


class _DevArray(np.ndarray):
    """A numpy array standing in for a CuPy one: .get() copies it to the host."""

    def get(self):
        return np.array(self)


def _fake_cupy() -> types.ModuleType:
    cp = types.ModuleType("cupy")
    for name in ("int32", "int64", "uint8", "uint32", "uint64", "float32", "from_dlpack", "max", "where", "bool_"):
        setattr(cp, name, getattr(np, name))

    def dev(f):  # device arrays come back as _DevArray; asarray copies host arrays, as CuPy does
        return lambda *a, **k: np.asarray(f(*a, **k)).view(_DevArray)

    cp.zeros, cp.empty, cp.full = dev(np.zeros), dev(np.empty), dev(np.full)
    cp.asarray = dev(lambda x, dtype=None: x if isinstance(x, _DevArray) and dtype in (None, x.dtype)
                     else np.array(x, dtype=dtype))
    cp.ascontiguousarray = dev(np.ascontiguousarray)
    cp.ndarray = _DevArray
    runtime = types.SimpleNamespace(memGetInfo=lambda: (1 << 30, 1 << 31))
    cp.cuda = types.SimpleNamespace(runtime=runtime, is_available=lambda: True)
    cp.get_default_memory_pool = lambda: types.SimpleNamespace(free_bytes=lambda: 0)
    return cp


@pytest.fixture(params=[(False, False), (True, False), (False, True), (False, False, True)],
                ids=["plain", "switch-fuse", "prefetch", "fused-code"])
def emu(request, monkeypatch):
    dev = _EmuDevice(ctypes.CDLL(str(_library(*request.param))))
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    monkeypatch.setattr(cuda, "device", lambda device_id=None: dev)
    return dev


@pytest.mark.parametrize("n_tests", [40, 7, 0])
@pytest.mark.parametrize("config", [VMConfig(fuel=20_000), VMConfig(stack_size=oc.DEFAULT_STACK + 1)],
                         ids=["local-stack", "global-stack"])
def test_evaluate_tasks_emulated_equals_cpu(emu, n_tests, config, monkeypatch):
    rng = np.random.default_rng([SEED, 5, n_tests])
    inputs, expected, ret_kinds = make_bank(rng, n_tests)
    progs = make_programs(rng, 250)
    want = evaluate_tasks_cpu(*progs, inputs, expected, n_tests, ret_kinds, config=config)
    for chunk in (None, 97):
        monkeypatch.setattr(cuda, "MAX_CHUNK", chunk)
        emu.launches.clear()
        got = cuda.evaluate_tasks(*progs, inputs, expected, n_tests, ret_kinds, config=config)
        for name, g, w in zip(("passed", "steps", "ok"), got, want):
            assert g.dtype == w.dtype and np.array_equal(g, w), (name, chunk, np.flatnonzero(g != w)[:5], SEED)
        n_chunks = 1 if chunk is None else -(-250 // chunk)
        # (the mask's active rows listed first, and the compile takes the list)
        assert emu.launches.count("vg_active_rows") == emu.launches.count("vg_compile:rows") == n_chunks
        suffix = "local" if config.stack_size <= cuda.LOCAL_STACK else "global"
        assert emu.launches.count(f"vg_execute_tasks_{suffix}") == (n_chunks if n_tests else 0)
    if n_tests:
        assert want[0].sum() > 0 and want[2].sum() > 50


@pytest.mark.parametrize("blocks", [1, 3])
def test_active_rows_lists_each_active_row_once(emu, blocks):
    """vg_active_rows: every active row exactly once in rows[:n_rows] (any order), whatever the
    grid (1 block: 8 warps stride over 1,000 rows); the other rows get code_len -1 and a zero
    error, the active rows' are left as they were."""
    rng = np.random.default_rng([SEED, 12, blocks])
    n = 1000
    for p in (0.0, 0.02, 0.5, 1.0):
        active = (rng.random(n) < p).astype(np.uint8)
        code_len = np.full(n, 7, np.int32)
        err = np.full((n, 4), 9, np.int32)
        rows, n_rows = np.full(n, -5, np.int32), np.zeros(1, np.int32)
        emu.k["vg_active_rows"]((blocks,), (256,), (np.int32(n), active, code_len, err, rows, n_rows))
        on = np.flatnonzero(active)
        assert n_rows[0] == len(on) and np.array_equal(np.sort(rows[:len(on)]), on), (p, SEED)
        assert (rows[len(on):] == -5).all()
        assert np.array_equal(code_len, np.where(active, 7, -1)) and np.array_equal(err, np.where(active[:, None] != 0, np.int32(9), np.zeros((n, 4), np.int32)))


@pytest.mark.parametrize("per_sm,lanes", [(256, 8), (16, 8), (16, 1), (16, 32), (7, 3)])
def test_evaluate_tasks_on_listed_rows_emulated(emu, per_sm, lanes, monkeypatch):
    """evaluate_tasks compiles and scores the active rows that vg_active_rows lists: the CPU's
    results for masks with no row, one row, a few percent (an env burst) and every row active,
    also where the compile's scratch is smaller than the list (COMPILE_PER_SM 16 on the
    emulator's 2 SMs: 32 slots, as 4 warps of 8 compiling lanes, 32 warps of 1 or one warp of 32;
    7: 14 slots as 5 warps of 3), so items take lanes past 0 and go round the grid again."""
    monkeypatch.setattr(cuda, "COMPILE_PER_SM", per_sm)
    monkeypatch.setattr(cuda, "COMPILE_ROW_LANES", lanes)
    rng = np.random.default_rng([SEED, 13, per_sm])
    n_tests = 9
    inputs, expected, ret_kinds = make_bank(rng, n_tests)
    tokens, counts, task_ids, _ = make_programs(rng, 150)
    one = np.zeros(150, bool)
    one[rng.integers(150)] = True
    for active in (np.zeros(150, bool), one, rng.random(150) < 0.05, np.ones(150, bool)):
        want = evaluate_tasks_cpu(tokens, counts, task_ids, active, inputs, expected, n_tests, ret_kinds)
        got = cuda.evaluate_tasks(tokens, counts, task_ids, active, inputs, expected, n_tests, ret_kinds)
        for name, g, w in zip(("passed", "steps", "ok"), got, want):
            assert np.array_equal(g, w), (name, int(active.sum()), np.flatnonzero(g != w)[:5], SEED)
    assert want[2].sum() > 50


def test_compile_row_lanes_checked(emu, monkeypatch):
    """COMPILE_ROW_LANES (VRAMGYM_COMPILE_ROW_LANES): an integer in [1, 32], a string from the
    environment parsed; anything else is a ValueError naming it at the first masked call."""
    rng = np.random.default_rng([SEED, 15])
    inputs, expected, ret_kinds = make_bank(rng, 3)
    progs = make_programs(rng, 20)
    want = evaluate_tasks_cpu(*progs, inputs, expected, 3, ret_kinds)
    monkeypatch.setattr(cuda, "COMPILE_ROW_LANES", "4")
    assert cuda.compile_row_lanes() == 4
    assert all(np.array_equal(g, w) for g, w in zip(cuda.evaluate_tasks(*progs, inputs, expected, 3, ret_kinds), want))
    for bad in ("0", "33", "x", "2.5", 0, 33, 2.0, True, None):
        monkeypatch.setattr(cuda, "COMPILE_ROW_LANES", bad)
        with pytest.raises(ValueError, match="COMPILE_ROW_LANES"):
            cuda.evaluate_tasks(*progs, inputs, expected, 3, ret_kinds)


def test_evaluate_emulated_equals_cpu(emu, monkeypatch):
    """cuda.evaluate (packed tokens, one shared list of tests) on the emulator: the same passes
    and steps as evaluate_tasks_cpu with every row on that one task."""
    rng = np.random.default_rng([SEED, 6])
    n_tests = 37
    inputs, expected, ret_kinds = make_bank(rng, n_tests)
    tokens, counts, task_ids, _ = make_programs(rng, 200)
    counts = np.minimum(counts, tokens.shape[1])
    ins = type(inputs)(inputs.words[: inputs.offsets[n_tests]], inputs.offsets[: n_tests + 1])
    exp = type(expected)(expected.words[: expected.offsets[n_tests]], expected.offsets[: n_tests + 1])
    want = evaluate_tasks_cpu(tokens, counts, np.zeros(200, np.int64), None, ins, exp, n_tests, ret_kinds[:1])
    packed = np.concatenate([tokens[i, :counts[i]] for i in range(200)])
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    for chunk in (None, 61):
        monkeypatch.setattr(cuda, "MAX_CHUNK", chunk)
        res = cuda.evaluate(packed, offsets, ins, exp)
        assert np.array_equal(res.passed, want[0]) and np.array_equal(res.steps, want[1]), (chunk, SEED)
        assert np.array_equal(res.errors[:, 0] == 0, want[2]), (chunk, SEED)


@pytest.mark.parametrize("n_tests", [21, 0])
def test_execute_tasks_emulated_equals_cpu(emu, n_tests, monkeypatch):
    rng = np.random.default_rng([SEED, 9, n_tests])
    inputs, expected, ret_kinds = make_bank(rng, n_tests)
    imgs = make_images(rng, 200)
    want = execute_tasks_cpu(*imgs, inputs, expected, n_tests, ret_kinds)
    for chunk in (None, 53):
        monkeypatch.setattr(cuda, "MAX_CHUNK", chunk)
        emu.launches.clear()
        got = cuda.execute_tasks(*imgs, inputs, expected, n_tests, ret_kinds)
        for name, g, w in zip(("passed", "steps", "valid"), got, want):
            assert g.dtype == w.dtype and np.array_equal(g, w), (name, chunk, np.flatnonzero(g != w)[:5], SEED)
        n_chunks = 1 if chunk is None else -(-200 // chunk)
        assert emu.launches.count("vg_validate_programs") == n_chunks
        assert emu.launches.count("vg_execute_tasks_local") == (n_chunks if n_tests else 0)
    assert want[2].sum() > 30 and (not n_tests or want[0].sum() > 0)


@pytest.mark.parametrize("config", [VMConfig(fuel=3000), VMConfig(fuel=3000, stack_size=oc.DEFAULT_STACK + 1)],
                         ids=["local-stack", "global-stack"])
def test_task_budgets_emulated_equal_cpu(emu, config):
    """evaluate_tasks and execute_tasks with a step budget per task (task_fuel: budgets of 1 and
    a few dozen steps cut many runs short, one of 2**31 - 1 none) on the emulated kernels: the
    CPU backend's results; a budget given as a device array (unchecked) below 1 counts as 1."""
    from test_task_fuel import budgets
    rng = np.random.default_rng([SEED, 30])
    inputs, expected, ret_kinds = make_bank(rng, 11)
    task_fuel = budgets(rng, len(ret_kinds))
    progs = make_programs(rng, 200)
    imgs = make_images(rng, 200)
    for cpu_fn, gpu_fn, args in ((evaluate_tasks_cpu, cuda.evaluate_tasks, progs),
                                 (execute_tasks_cpu, cuda.execute_tasks, imgs)):
        want = cpu_fn(*args, inputs, expected, 11, ret_kinds, config=config, task_fuel=task_fuel)
        got = gpu_fn(*args, inputs, expected, 11, ret_kinds, config=config, task_fuel=task_fuel)
        for name, g, w in zip(("passed", "steps", "ok"), got, want):
            assert g.dtype == w.dtype and np.array_equal(g, w), (gpu_fn.__name__, name, np.flatnonzero(g != w)[:5], SEED)
        assert not np.array_equal(want[1], cpu_fn(*args, inputs, expected, 11, ret_kinds, config=config)[1])
        low = sys.modules["cupy"].asarray(np.minimum(task_fuel, 1) - 1)   # 0: taken as 1, as the CPU takes 1
        got = gpu_fn(*args, inputs, expected, 11, ret_kinds, config=config, task_fuel=low)
        want = cpu_fn(*args, inputs, expected, 11, ret_kinds, config=config, task_fuel=np.ones_like(task_fuel))
        assert all(np.array_equal(g, w) for g, w in zip(got, want)), gpu_fn.__name__
        with pytest.raises(ValueError, match=r"task_fuel must have shape \(4,\)"):
            gpu_fn(*args, inputs, expected, 11, ret_kinds, config=config, task_fuel=sys.modules["cupy"].asarray(
                np.ones(5, np.int32)))
        with pytest.raises(ValueError, match="task_fuel"):
            gpu_fn(*args, inputs, expected, 11, ret_kinds, config=config, task_fuel=np.zeros(4, np.int32))


# --- the GPU suite of test_cuda_backend.py, on the emulator -----------------------------------

import test_cuda_backend as gpu_suite  # noqa: E402


@pytest.mark.parametrize("config", gpu_suite.CONFIGS, ids=gpu_suite.CONFIG_IDS)
def test_gpu_corpus_emulated(emu, config):
    """The golden corpus compiles (sources and tokens) and runs on the emulated kernels exactly as
    on the CPU: values, traps, steps, lists, in every configuration."""
    if config is gpu_suite.CONFIGS[0]:
        gpu_suite.test_corpus_compiles_identically()
    gpu_suite.test_corpus_runs_identically(config)
    kernel = "vg_execute_local" if config.stack_size <= cuda.LOCAL_STACK else "vg_execute_global"
    assert kernel in emu.launches and "vg_validate_programs" in emu.launches


def test_gpu_random_programs_emulated(emu, monkeypatch):
    """Fresh random programs: compile kernels (signatures included), lockstep execute, chunking,
    and evaluate (tokens and sources, with a signature check) against the CPU backend."""
    monkeypatch.setattr(gpu_suite, "N_RANDOM", 150)
    monkeypatch.setattr(gpu_suite, "random_corpus", _small_corpus(gpu_suite.random_corpus))
    gpu_suite.test_random_programs_identically()
    gpu_suite.test_evaluate_matches_cpu_pipeline()
    gpu_suite.test_chunking_gives_the_same_results(monkeypatch)
    gpu_suite.test_compile_device_signatures()
    assert {"vg_compile:sources", "vg_compile:tokens", "vg_validate_programs", "vg_execute_local",
            "vg_execute_local_eval"} <= set(emu.launches)


def _small_corpus(full):
    return lambda n, seed=gpu_suite.SEED: full(min(n, 150), seed)


def test_gpu_fuzz_emulated(emu, monkeypatch):
    """Fuzzed bytecode, sources and token arrays: the kernels' validation, compile errors and
    their positions equal the CPU's; so do programs of zero tokens (a null pointer, as from CuPy)."""
    gpu_suite.test_fuzzed_bytecode_identically()
    gpu_suite.test_fuzzed_sources_identically()
    gpu_suite.test_fuzzed_tokens_identically()
    gpu_suite.test_zero_tokens_identically()
    assert {"vg_compile:sources", "vg_compile:tokens", "vg_execute_local"} <= set(emu.launches)


def test_device_offsets_outside_the_words_emulated(emu):
    check_offsets_outside_the_words(SEED)


def test_device_source_offsets_outside_the_data_emulated(emu):
    gpu_suite.test_compile_device_offsets_outside_the_data()


def test_arguments_checked_before_the_device(emu):
    """Bad arguments to the GPU entry points raise as the CPU backend's do, or say why the
    device cannot check them: device arrays (_DevArray here) by dtype and shape (their values
    stay on the device), host arrays by value too. Each of these used to be cast or reshaped
    into another call: a float task id truncated, an active mask of 256 wrapped to 0, wide code
    words cut to 32 bits, (T, 3) tokens read as (T, 4), code_cap 0 scoring every candidate as
    code_too_long, n_tests=4.7 taken as 4."""
    rng = np.random.default_rng([SEED, 11])
    n_tests = 4
    inputs, expected, rk = make_bank(rng, n_tests)
    toks, counts, tids, _ = make_programs(rng, 30)
    dev = lambda a: np.asarray(a).view(sys.modules["cupy"].ndarray)  # noqa: E731  (a "device" array)
    base = dict(tokens=toks, counts=counts, task_ids=tids, active=np.ones(30, bool), inputs=inputs,
                expected=expected, n_tests=n_tests, ret_kinds=rk)

    def both(exc, match, **kw):
        a = base | kw
        with pytest.raises(exc, match=match):
            evaluate_tasks_cpu(*a.values())
        with pytest.raises(exc, match=match):
            cuda.evaluate_tasks(*a.values())

    both(TypeError, "task_ids must be an integer array", task_ids=tids + 0.5)
    both(ValueError, "active", active=np.full(30, 256))
    both(TypeError, "n_tests must be an int", n_tests=4.7)
    both(TypeError, "n_tests must be an int", n_tests=True)
    both(ValueError, "ret_kinds must be 1-D", ret_kinds=rk[:, None])
    with pytest.raises(TypeError, match="code_cap must be an int"):
        cuda.evaluate_tasks(*base.values(), code_cap=True)
    with pytest.raises(TypeError, match="task_ids must be an integer array"):
        cuda.evaluate_tasks(*(base | dict(task_ids=dev(tids + 0.5))).values())
    with pytest.raises(ValueError, match="ret_kinds must be 1-D"):
        cuda.evaluate_tasks(*(base | dict(ret_kinds=dev(rk[:, None]))).values())
    # a device mask of integers: nonzero is active (its values cannot be checked on the host)
    want = evaluate_tasks_cpu(*base.values())
    got = cuda.evaluate_tasks(*(base | dict(active=dev(np.full(30, 256)))).values())
    for g, w in zip(got, want):
        assert np.array_equal(g, w)
    assert want[2].any()

    code, length, ti, act = make_images(rng, 30)
    args = (length, ti, act, inputs, expected, n_tests, rk)
    wide = code.astype(np.int64) + (1 << 32)
    for f in (execute_tasks_cpu, cuda.execute_tasks):
        with pytest.raises(ValueError, match="code"):
            f(wide, *args)
    with pytest.raises(TypeError, match="code on the device must be int32 or uint32"):
        cuda.execute_tasks(dev(wide), *args)
    for g, w in zip(cuda.execute_tasks(dev(code.view(np.int32)), *args), execute_tasks_cpu(code, *args)):
        assert np.array_equal(g, w)

    src = [tokenize(f"def f(a: int) -> int:\n    return a + {i}\n").astype(np.int32) for i in range(4)]
    flat = np.concatenate(src)
    off = np.cumsum([0] + [len(t) for t in src]).astype(np.int64)
    ins, exp = encode_tuples([(1,)], ("int",)), encode_results([1], "int")
    for bad in (np.ascontiguousarray(flat[:, :3]), flat.reshape(-1, 8), dev(flat[:, :3].copy())):
        with pytest.raises(ValueError, match=r"tokens must have shape \(T, 4\)"):
            cuda.compile_device("tokens", bad, off)
        with pytest.raises(ValueError, match=r"tokens must have shape \(T, 4\)"):
            cuda.evaluate(bad, off, ins, exp)
    with pytest.raises(TypeError, match="tokens must be an integer array"):
        cuda.compile_device("tokens", dev(flat.astype(np.float32)), off)
    for cc in (0, -1, oc.LIMITS["MAX_CODE"] + 1):
        with pytest.raises(ValueError, match="code_cap must be in"):
            cuda.evaluate(flat, off, ins, exp, code_cap=cc)
        with pytest.raises(ValueError, match="code_cap must be in"):
            cuda.compile_device("tokens", flat, off, code_cap=cc)
    with pytest.raises(ValueError, match=r"offsets must hold N \+ 1 entries"):
        cuda.compile_device("tokens", flat, np.zeros(0, np.int64))
    empty = (np.zeros(0, np.int32), np.zeros(0, np.int64))
    with pytest.raises(ValueError, match=r"inputs offsets must hold N \+ 1 entries"):
        cuda.evaluate(flat, off, empty, empty)
    with pytest.raises(TypeError, match="sources must be bytes"):
        cuda.compile_device("sources", dev(np.zeros(8, np.int32)), np.array([0, 8]))
    # the valid call still equals the CPU
    assert np.array_equal(cuda.evaluate(flat, off, ins, exp).passed, [1, 0, 0, 0])


def test_emulated_kernels_under_sanitizers(tmp_path):
    """A host memcheck of the kernels: part of this module again in a child process whose
    emulator is built with AddressSanitizer and UBSan (their runtimes preloaded into Python), so
    an out-of-bounds access or undefined behaviour in cuda_kernels.cu, vm.h or compiler.h on
    these paths (fuzzed bytecode, sources and tokens, bad device offsets, the corpus under the
    tight configuration, the scorers) fails the test. The GPU's own compute-sanitizer run is in
    experiments/gpu_check.sh."""
    from test_native_fuzz import pytest_sanitized
    pytest_sanitized(__file__, "plain and not sanitizers and (fuzz or offsets or tasks or evaluate or tight)", SEED,
                     tmp_path)


def test_memory_fraction_sizes_the_budget_and_the_chunks(emu, monkeypatch):
    """MEMORY_FRACTION (VRAMGYM_GPU_MEMORY_FRACTION) is the share of free memory a call takes: the
    emulator reports 1 GiB free. A bad value is a ValueError at the first call that sizes memory."""
    monkeypatch.setattr(cuda, "MEMORY_FRACTION", "0.25")  # as the environment gives it
    assert cuda._budget() == (1 << 30) // 4
    assert cuda._chunk_size(10**9, 1024) == (1 << 30) // 4 // 2 // 1024
    monkeypatch.setattr(cuda, "MEMORY_FRACTION", 1)
    assert cuda._budget() == 1 << 30
    monkeypatch.setattr(cuda, "MEMORY_FRACTION", np.float32(0.5))  # any real number
    assert cuda._budget() == 1 << 29
    rng = np.random.default_rng([SEED, 9])
    inputs, expected, ret_kinds = make_bank(rng, 3)
    progs = make_programs(rng, 40)
    # room for 16 programs' code per chunk (and the 4 warps of scratch an execute block needs)
    per_chunk = 16
    monkeypatch.setattr(cuda, "MEMORY_FRACTION", 2 * per_chunk * (4 * 1024 + 16) / (1 << 30))
    small = VMConfig(heap_size=16, max_lists=4, max_depth=8)
    emu.launches.clear()
    got = cuda.evaluate_tasks(*progs, inputs, expected, 3, ret_kinds, config=small)
    want = evaluate_tasks_cpu(*progs, inputs, expected, 3, ret_kinds, config=small)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    assert emu.launches.count("vg_compile:rows") == -(-40 // per_chunk)  # (a mask: its rows listed)
    for bad in ("1.5", "x", 0, float("nan"), None, True, np.bool_(True), 10**400, "1e400", -0.5):
        monkeypatch.setattr(cuda, "MEMORY_FRACTION", bad)
        with pytest.raises(ValueError, match="MEMORY_FRACTION"):
            cuda.evaluate_tasks(*progs, inputs, expected, 3, ret_kinds)


def test_memory_fraction_from_the_environment():
    import subprocess
    code = "from vramgym.vm import cuda; print(cuda.memory_fraction())"
    for value, want in (("0.125", "0.125"), ("", "0.5")):  # set but empty: the default
        env = {**os.environ, "VRAMGYM_GPU_MEMORY_FRACTION": value}
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout.strip() == want, r.stderr
