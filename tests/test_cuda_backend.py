"""The CUDA backend against the CPU backend, its oracle: bytecode, compile errors and positions,
values, traps, step counts and list contents must be identical.

CI-safe tests (no GPU): nvcc and NVRTC compile the kernels (the exact source the backend
hands to NVRTC), and the pure-Python parts. GPU tests skip with a reason where cupy or a GPU
is absent. VRAMGYM_SEED replays a run; VRAMGYM_GPU_RANDOM_PROGRAMS sets how many fresh random
programs the differential test uses (default 100,000).
"""
from __future__ import annotations

import multiprocessing
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from corpus_runner import load_cases
from vramgym.compiler import compile_batch, compile_source, compile_tokens, tokenize
from vramgym.compiler.random_programs import GeneratorConfig, generate_program, random_args
from vramgym.vm import (BackendUnavailable, Encoded, Program, ProgramBatch, VMConfig, encode_results,
                        encode_tuples, get_backend, opcodes as oc, run_batch)
from vramgym.vm import cuda

ROOT = Path(__file__).resolve().parents[1]
SEED = int(os.environ.get("VRAMGYM_SEED", np.random.SeedSequence().entropy % 2**32))
CODE_TOO_LONG = next(code for code, name, _ in oc.ERRORS if name == "code_too_long")
N_RANDOM = int(os.environ.get("VRAMGYM_GPU_RANDOM_PROGRAMS", 100_000))
CASES = load_cases()
SIGNATURE = (("int", "int"), "int")
GEN = GeneratorConfig(entry_name="entry", entry_params=SIGNATURE[0], entry_ret=SIGNATURE[1])
CONFIGS = [VMConfig(), VMConfig(fuel=300, max_depth=6, heap_size=40, max_lists=6, stack_size=64),
           VMConfig(stack_size=oc.DEFAULT_STACK + 1)]  # past the local-memory stack: the _global kernels
CONFIG_IDS = ["default", "tight", "global-stack"]


def _gpu_reason() -> str | None:
    try:
        import cupy
    except ImportError:
        return "cupy is not installed (pip install 'vramgym[cuda]')"
    try:
        ok = cupy.cuda.is_available()
    except Exception as e:  # a driver without a device raises
        return f"cupy.cuda.is_available() raised {e!r}"
    return None if ok else "no CUDA GPU: cupy.cuda.is_available() is false"


gpu = pytest.mark.skipif(_gpu_reason() is not None, reason=f"GPU test: {_gpu_reason()}")


# --- CI-safe: the device code compiles ---------------------------------------------------------

@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("switch_fuse,min_blocks,prefetch,jump_tables,fused_code",
                         [(0, 0, 0, 0, 0), (1, 10, 0, 0, 0), (0, 10, 1, 1, 0), (0, 10, 0, 0, 1)])
def test_nvcc_compiles_kernels(tmp_path, switch_fuse, min_blocks, prefetch, jump_tables, fused_code):
    # PTX without NVVM optimisation: every front-end and device-code error still fails, in
    # seconds (test_compile_kernels_have_a_static_stack runs the full object compile).
    r = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", f"-DVG_LOCAL_STACK={cuda.LOCAL_STACK}",
                        f"-DVG_SWITCH_FUSE={switch_fuse}", f"-DVG_EXEC_MIN_BLOCKS={min_blocks}",
                        f"-DVG_PREFETCH={prefetch}", f"-DVG_FUSED_CODE={fused_code}",
                        *(["--jump-table-density=50"] if jump_tables else []),
                        f"-I{ROOT / 'vm' / 'csrc'}", f"-I{ROOT / 'compiler' / 'csrc'}", "-ptx", "-Xcicc", "-O0",
                        str(ROOT / "vm" / "csrc" / "cuda_kernels.cu"), "-o", str(tmp_path / "k.ptx")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ptx = (tmp_path / "k.ptx").read_text()
    for name in ("vg_compile", "vg_validate_programs", "vg_active_rows", "vg_execute_local", "vg_execute_global_eval",
                 "vg_execute_tasks_local", "vg_execute_tasks_global"):
        assert f".entry {name}(" in ptx
    # No kernel recurses (the compiler once did: expr -> ... -> expr), so no kernel needs the
    # dynamic CUDA call stack. At -O0 nothing is inlined: the PTX call graph is the whole one.
    graph = ptx_call_graph(ptx)
    entries = re.findall(r"\.entry (\w+)\(", ptx)
    for name in entries:
        assert call_cycle(graph, name) is None, f"{name} recurses: {call_cycle(graph, name)}"
    # ptxas compiles every function an entry reaches once per entry: one entry reaches the parser
    # (three did, and took 72 of the 89 s of a full build, most of a first GPU call's NVRTC time)
    assert [name for name in entries if "parse_expr" in " ".join(reachable(graph, name))] == ["vg_compile"]


def ptx_call_graph(ptx: str) -> dict[str, set[str]]:
    """Callees of every .entry/.func in a PTX text (call targets may sit on the next line)."""
    graph: dict[str, set[str]] = {}
    cur, pending = None, False
    for line in ptx.splitlines():
        s = line.strip()
        m = re.match(r"(?:\.visible\s+|\.weak\s+)?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?(\w+)", s)
        if m:
            cur = m.group(1)
            graph.setdefault(cur, set())
        elif pending and s:
            graph[cur].add(re.match(r"\w+", s).group(0))
            pending = False
        elif cur and (m := re.match(r"call(?:\.uni)?\s*(.*)", s)):
            rest = re.sub(r"^\([^)]*\),?\s*", "", m.group(1).strip())
            if rest:
                graph[cur].add(re.match(r"\w+", rest).group(0))
            else:
                pending = True
    return graph


def reachable(graph: dict[str, set[str]], root: str) -> set[str]:
    """Every function root calls, directly or not."""
    seen, todo = set(), [root]
    while todo:
        for v in graph.get(todo.pop(), ()):
            if v not in seen:
                seen.add(v)
                todo.append(v)
    return seen


def call_cycle(graph: dict[str, set[str]], root: str) -> list[str] | None:
    """A call cycle reachable from root, or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(u):
        state[u] = 1
        path.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return path[path.index(v):] + [v]
            if v not in state and (found := visit(v)):
                return found
        state[u] = 2
        path.pop()
        return None

    return visit(root)


def test_ptx_call_graph_finds_recursion():
    ptx = """.func (.param .b32 r) _Z1ai(.param .b32 x)
{
\tcall.uni (retval0),
\t_Z1bi,
}
.func (.param .b32 r) _Z1bi(.param .b32 x)
{
\tcall.uni (retval0), _Z1ai, (param0);
}
.visible .entry k(
{
\tcall.uni _Z1bi, (param0);
}
.visible .entry ok(
{
}
"""
    g = ptx_call_graph(ptx)
    assert g == {"_Z1ai": {"_Z1bi"}, "_Z1bi": {"_Z1ai"}, "k": {"_Z1bi"}, "ok": set()}
    assert call_cycle(g, "k") == ["_Z1bi", "_Z1ai", "_Z1bi"] and call_cycle(g, "ok") is None


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_compile_kernels_have_a_static_stack(tmp_path):
    """The compiler does not recurse, so ptxas sizes the compile kernels' stack statically, within
    the driver's default CUDA stack limit (1 KB): cuda.py leaves the limit alone, and the driver
    reserves no call stack per resident thread (a recursive parser needed ~52 KB: ~17 GB on an
    H100). About 45 s: the full object compile of every kernel."""
    r = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", f"-DVG_LOCAL_STACK={cuda.LOCAL_STACK}",
                        f"-I{ROOT / 'vm' / 'csrc'}", f"-I{ROOT / 'compiler' / 'csrc'}", "-cubin", "-Xptxas", "-v",
                        str(ROOT / "vm" / "csrc" / "cuda_kernels.cu"), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-4000:]
    assert "cannot be statically determined" not in log, log
    for name in ("vg_compile",):
        entry = log.split(f"Compiling entry function '{name}'")[1].split("Compiling entry function")[0]
        frame = int(re.search(r"(\d+) bytes stack frame", entry).group(1))
        total = re.search(r"(\d+) bytes cumulative stack size", entry)
        stack = int(total.group(1)) if total else frame
        print(f"{name}: {frame} bytes stack frame, {stack} bytes cumulative")
        assert stack <= 1024, f"{name} needs {stack} bytes of stack:\n{entry}"


def _nvrtc():
    try:
        from cupy_backends.cuda.libs import nvrtc
        nvrtc.getVersion()
        return nvrtc
    except Exception:
        return None


@pytest.mark.skipif(_nvrtc() is None, reason="NVRTC is unavailable (pip install cupy-cuda13x nvidia-cuda-nvrtc)")
@pytest.mark.parametrize("switch_fuse,min_blocks,prefetch,jump_tables,fused_code",
                         [(False, 0, False, False, False), (True, 10, False, False, False),
                          (False, 10, True, True, False), (False, 10, False, True, True)])
def test_nvrtc_compiles_kernel_source(switch_fuse, min_blocks, prefetch, jump_tables, fused_code):
    """The exact text and options cuda.py gives CuPy's RawModule, through NVRTC (no GPU needed)."""
    nvrtc = _nvrtc()
    prog = nvrtc.createProgram(cuda.kernel_source(), "cuda_kernels.cu", [], [])
    try:
        # RawModule adds the architecture and --device-as-default-execution-space itself.
        nvrtc.compileProgram(prog, [*cuda.nvrtc_options(switch_fuse, min_blocks, prefetch, jump_tables, fused_code),
                                    "-arch=compute_90", "--device-as-default-execution-space"])
        ptx = nvrtc.getPTX(prog)
    except Exception as e:
        pytest.fail(f"NVRTC: {e}\n{nvrtc.getProgramLog(prog)}")
    finally:
        nvrtc.destroyProgram(prog)
    assert b".entry vg_execute_local_eval(" in ptx and b".entry vg_execute_tasks_local(" in ptx


def test_kernel_source_inlines_the_shared_headers():
    src = cuda.kernel_source()
    assert '#include "' not in src
    for text in ("struct Compiler {", "VG_HD inline RunResult run(", "enum Op {", "__global__ void vg_compile("):
        assert src.count(text) == 1, text


def test_task_starts():
    run_prog = np.array([0] * 70 + [1] * 3 + [0] * 2 + [5], dtype=np.int32)
    assert cuda.task_starts(run_prog).tolist() == [0, 32, 64, 70, 73, 75, 76]
    assert cuda.task_starts(run_prog[:3], lockstep=False).tolist() == [0, 1, 2, 3]
    assert cuda.task_starts(run_prog[:0]).tolist() == [0]


def test_token_capacity_bounds_every_source():
    # Every token but DEDENT and the final NEWLINE/EOF starts at a byte of its own, so the
    # compile kernel's token scratch (2 * len + 4) never changes a result.
    from vramgym.vm import cpu
    deep = "def f(x: int) -> int:\n" + "".join(" " * (d + 1) + "if x:\n" for d in range(15)) + " " * 16 + "return 1"
    for src in [c.source for c in CASES] + [deep, "def f()->int:return 1", "x", ""]:
        raw = src.encode()
        toks, _ = cpu.tokenize(raw)
        if toks is not None:
            assert len(toks) <= 2 * len(raw) + 2 and len(toks) + 1 < cuda.token_capacity(len(raw)), src


def test_ray_shards():
    from vramgym.vm.ray_evaluator import _shards
    assert _shards(100, 3, 32) == [(0, 32), (32, 64), (64, 100)]
    assert _shards(5, 8) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    assert _shards(0, 2) == []


@pytest.mark.skipif(_gpu_reason() is None, reason="a GPU is present")
def test_cuda_backend_unavailable_is_clear():
    with pytest.raises(BackendUnavailable, match="cuda"):
        get_backend("cuda")
    assert get_backend("auto").__name__.endswith("cpu_backend")


# --- GPU: identical to the CPU ------------------------------------------------------------------

def assert_same_compile(a, b, what):
    assert np.array_equal(a.lengths, b.lengths), f"{what}: lengths differ at {np.flatnonzero(a.lengths != b.lengths)[:5]}"
    assert np.array_equal(a.errors, b.errors), f"{what}: errors differ at {np.flatnonzero((a.errors != b.errors).any(1))[:5]}"
    ok = a.lengths >= 0
    assert np.array_equal(a.code[ok], b.code[ok]), f"{what}: bytecode differs"
    assert np.array_equal(a.signatures, b.signatures), f"{what}: signatures differ"


def assert_same_runs(batch, inputs, runs=None, expected=None, config=None, out_cap=64, what="", lockstep=True):
    a = run_batch(batch, inputs, runs, expected=expected, config=config, out_cap=out_cap, backend="cpu")
    b = run_batch(batch, inputs, runs, expected=expected, config=config, out_cap=out_cap, backend="cuda",
                  lockstep=lockstep)
    for field in ("status", "value", "steps", "passed", "out_list"):
        x, y = getattr(a, field), getattr(b, field)
        assert (x is None) == (y is None), field
        if x is not None:
            bad = np.flatnonzero((x != y).reshape(len(x), -1).any(axis=1))
            assert not len(bad), f"{what}: cpu and cuda differ in {field} at runs {bad[:5].tolist()} (seed {SEED})"
    for field in ("out_words", "out_off"):  # (the ragged lists behind out_list)
        x, y = getattr(a, field), getattr(b, field)
        assert (x is None) == (y is None) and (x is None or np.array_equal(x, y)), f"{what}: {field} (seed {SEED})"
    return a


@gpu
def test_corpus_compiles_identically():
    sources = [c.source for c in CASES]
    for cap in (1024, 16):  # 16: code_too_long on the bigger files
        assert_same_compile(compile_batch(sources, code_cap=cap), cuda.compile_batch(sources, code_cap=cap), f"cap {cap}")
    toks = [tokenize(c.source) for c in CASES if not c.error]
    offsets = np.cumsum([0] + [len(t) for t in toks]).astype(np.int64)
    flat = np.concatenate(toks).astype(np.int32)
    assert_same_compile(compile_tokens(flat, offsets), cuda.compile_tokens(flat, offsets), "corpus tokens")


@gpu
@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_corpus_runs_identically(config):
    import dataclasses
    for case in CASES:
        if case.error:
            continue
        prog = compile_source(case.source)
        cfg = VMConfig(**{**dataclasses.asdict(config), **case.config})
        for call in case.calls:
            f = prog.function(call.entry)
            inputs = encode_tuples([call.args], f.params)
            assert_same_runs(ProgramBatch.from_programs([prog], call.entry), inputs, config=cfg,
                             out_cap=max(cfg.heap_size, 1), what=f"{case.id} {call}")


def _generate(args):
    seed, lo, hi = args
    out = []
    for i in range(lo, hi):
        rng = np.random.default_rng([seed, i])
        g = generate_program(rng, GEN)
        out.append((g.source, random_args(rng, g.params, 32)))
    return out


def entry_indices(sources) -> np.ndarray:
    """The index of the function named "entry" in each generated program."""
    return np.array([compile_source(s).function("entry").index for s in sources], np.int32)


def random_corpus(n: int, seed: int = SEED):
    """n fresh random programs with the entry signature GEN fixes, and 32 arguments each."""
    step = 500
    jobs = [(seed, lo, min(n, lo + step)) for lo in range(0, n, step)]
    with multiprocessing.get_context("fork").Pool() as pool:
        parts = pool.map(_generate, jobs)
    items = [x for p in parts for x in p]
    return [s for s, _ in items], [a for _, a in items]


@gpu
def test_random_programs_identically():
    """N_RANDOM fresh programs: compile (sources and tokens), run on 32 inputs each, evaluate."""
    sources, arg_sets = random_corpus(N_RANDOM)
    cpu_c = compile_batch(sources)
    assert_same_compile(cpu_c, cuda.compile_batch(sources), f"random sources (seed {SEED})")
    # the generator's programs compile; a rare one (~3 in 100,000) outgrows the batch's code slots
    # of 1,024 words (both backends said so identically above), and the runs below skip it
    bad = cpu_c.errors[~cpu_c.ok]
    assert (bad[:, 0] == CODE_TOO_LONG).all() and len(bad) <= max(2, N_RANDOM // 1000), \
        f"random programs fail to compile (seed {SEED}): {bad[:5]}"
    keep = np.flatnonzero(cpu_c.ok)
    sources, arg_sets = [sources[i] for i in keep], [arg_sets[i] for i in keep]
    cpu_c = compile_batch(sources)
    flat, offsets = _tokens(sources)
    assert_same_compile(compile_tokens(flat, offsets), cuda.compile_tokens(flat, offsets), f"random tokens (seed {SEED})")
    programs = cpu_c.to_programs(entry=entry_indices(sources), ret_kind="int")
    inputs = encode_tuples([a for args in arg_sets for a in args], SIGNATURE[0])
    m = 32
    runs = (np.repeat(np.arange(len(sources), dtype=np.int32), m), np.arange(len(sources) * m, dtype=np.int32))
    assert_same_runs(programs, inputs, runs, config=VMConfig(), out_cap=0, what=f"random programs (seed {SEED})")


@gpu
def test_switch_fuse_identically(monkeypatch):
    """The VM's peephole superinstructions on the GPU (cuda.SWITCH_FUSE, a second module): the
    corpus under every configuration, fuzzed bytecode and random programs run exactly as on the
    CPU (the host builds of the same code are checked in test_fused.py and test_cuda_emulated.py)."""
    monkeypatch.setattr(cuda, "SWITCH_FUSE", True)
    assert cuda.device().switch_fuse
    for config in CONFIGS:
        test_corpus_runs_identically(config)
    test_fuzzed_bytecode_identically()
    monkeypatch.setattr(sys.modules[__name__], "N_RANDOM", min(N_RANDOM, 20_000))
    test_random_programs_identically()


@gpu
def test_fused_code_identically(monkeypatch):
    """The translated superinstructions on the GPU (cuda.FUSED_CODE, a module of its own: each warp
    translates its program before the lanes run it): the corpus under every configuration, fuzzed
    bytecode, random programs and the env scorer's kernel (evaluate_tasks) exactly as on the CPU
    (host builds of the same code: test_fused.py's and test_cuda_emulated.py's fused-code runs)."""
    monkeypatch.setattr(cuda, "FUSED_CODE", True)
    assert cuda.device().fused_code and cuda.device().fx_warp_bytes > 0
    for config in CONFIGS:
        test_corpus_runs_identically(config)
    test_fuzzed_bytecode_identically()
    monkeypatch.setattr(sys.modules[__name__], "N_RANDOM", min(N_RANDOM, 20_000))
    test_random_programs_identically()
    from test_evaluate_tasks import _host, make_bank, make_programs
    from vramgym.vm.evaluate import evaluate_tasks_cpu
    rng = np.random.default_rng([SEED, 44])
    inputs, expected, ret_kinds = make_bank(rng, 16)
    progs = make_programs(rng, 3000)
    want = evaluate_tasks_cpu(*progs, inputs, expected, 16, ret_kinds)
    got = cuda.evaluate_tasks(*progs, inputs, expected, 16, ret_kinds)
    for name, g, w in zip(("passed", "steps", "ok"), got, want):
        g = _host(g)
        assert g.dtype == w.dtype and np.array_equal(g, w), (name, np.flatnonzero(g != w)[:5], SEED)
    assert want[2].sum() > 500 and want[0].sum() > 0


def test_switch_fuse_and_fused_code_exclude_each_other():
    with pytest.raises(ValueError, match="exclude each other"):
        cuda.nvrtc_options(switch_fuse=True, fused_code=True)


def test_fx_cap_checked(monkeypatch):
    assert "-DVG_FX_CAP=512" in cuda.nvrtc_options(fused_code=True)
    for bad in (0, -1, 65537, 2.5, "512", True, None):
        monkeypatch.setattr(cuda, "FX_CAP", bad)
        with pytest.raises(ValueError, match="FX_CAP"):
            cuda.nvrtc_options(fused_code=True)
        assert not any("VG_FX_CAP" in o for o in cuda.nvrtc_options())  # only the variant reads it


@gpu
def test_evaluate_matches_cpu_pipeline():
    """Tokens -> compile -> 32 tests -> pass counts on the device == the CPU backend's passes."""
    sources, arg_sets = random_corpus(2000, SEED + 1)
    args = arg_sets[0]  # one shared test set
    inputs = encode_tuples(args, SIGNATURE[0])
    # Expected values: what program 0 returns (so some candidates pass some tests), traps as 0.
    p0 = compile_source(sources[0])
    first = run_batch(ProgramBatch.from_programs([p0], "entry"), inputs)
    expected = encode_results([int(v) for v in first.value], "int")
    toks = [tokenize(s) for s in sources]
    offsets = np.cumsum([0] + [len(t) for t in toks]).astype(np.int64)
    flat = np.concatenate(toks).astype(np.int32)
    cpu_c = compile_tokens(flat, offsets)
    res = run_batch(cpu_c.to_programs(entry=0), inputs, expected=expected)
    # evaluate runs function number 0 and checks its signature: mirror that on the CPU side.
    metas = [compile_source(s).functions[0] for s in sources]
    sig_ok = np.array([f.params == SIGNATURE[0] and f.ret == SIGNATURE[1] for f in metas])
    want_pass = res.passed.reshape(-1, 32).sum(1) * sig_ok
    want_steps = res.steps.reshape(-1, 32).astype(np.int64).sum(1)
    ev = cuda.evaluate(flat, offsets, inputs, expected, signature=SIGNATURE)
    assert np.array_equal(ev.passed.get(), want_pass)
    assert np.array_equal(ev.steps.get()[sig_ok], want_steps[sig_ok])
    assert np.array_equal(ev.errors.get(), cpu_c.errors)
    src_ev = cuda.evaluate(*_packed(sources), inputs, expected, signature=SIGNATURE, source=True)
    assert np.array_equal(src_ev.passed.get(), want_pass)


def _tokens(sources):
    toks = [tokenize(s) for s in sources]
    return np.concatenate(toks).astype(np.int32), np.cumsum([0] + [len(t) for t in toks]).astype(np.int64)


def _packed(sources):
    from vramgym.compiler.batch import pack_sources
    blob, off = pack_sources(sources)
    return np.frombuffer(blob, dtype=np.uint8), off


@gpu
def test_fuzzed_bytecode_identically():
    rng = np.random.default_rng(SEED)
    ops = [op.code for op in oc.OPS] + [0, 46, 255]
    programs = []
    for _ in range(3000):
        n = int(rng.integers(1, 60))
        words = [oc.encode("FUNC", int(rng.integers(0, 4)) | int(rng.integers(3, 9)) << 8)]
        for _ in range(n):
            arg = int(rng.integers(0, 4)) if rng.random() < 0.7 else int(rng.integers(0, 1 << 24))
            words.append(int(rng.choice(ops)) | arg << 8)
        words.append(oc.encode("RETURN"))
        programs.append(Program.from_code(words))
    batch = ProgramBatch.from_programs(programs, "f0")
    ints = [(int(a), int(b)) for a, b in rng.integers(-5, 5, size=(40, 2))]
    inputs = encode_tuples(ints, ("int", "int"))
    for config in CONFIGS[:2] + [VMConfig(fuel=200, heap_size=64, max_lists=8)]:
        assert_same_runs(batch, inputs, config=config, what="random bytecode")
    assert_same_runs(batch, inputs, config=CONFIGS[1], what="random bytecode, no lockstep", lockstep=False)
    # Bad program and input indices, bad encodings and list results of garbage references.
    words = np.array([oc.KIND_LIST, 3, 1, 2, 3, oc.KIND_INT, 1, 9, 9, oc.KIND_BOOL, 2], dtype=np.int32)
    odd = Encoded(words, np.array([0, 5, 7, 9, 11], dtype=np.int64))
    runs = (np.array([0, 1, 2, len(programs), -1, 5], np.int32), np.array([0, 1, 2, 3, 0, 99], np.int32))
    kinds = ProgramBatch.build(batch.code, batch.offsets, batch.entry, oc.KIND_LIST)
    assert_same_runs(kinds, odd, runs, expected=Encoded(words, odd.offsets), config=CONFIGS[1], what="odd runs")


@gpu
def test_fuzzed_sources_identically():
    rng = np.random.default_rng(SEED)
    base = [c.source for c in CASES]
    alphabet = np.frombuffer(b"defintboolist()[]:,.=+-*/%<>!#\n\r\t 0123456789abcxyzTrueFalse\x00\xff'\"", np.uint8)
    fuzzed = []
    for i in range(4000):
        src = bytearray(base[i % len(base)].encode())
        for _ in range(int(rng.integers(1, 6))):
            at = int(rng.integers(0, len(src) + 1))
            r = rng.random()
            if r < 0.4:
                src[at:at] = bytes([int(rng.choice(alphabet))])
            elif r < 0.7:
                del src[at: at + int(rng.integers(1, 4))]
            else:
                src[at:at] = src[: int(rng.integers(0, 40))]  # duplicate a prefix
        fuzzed.append(bytes(src))
    fuzzed += [bytes(rng.integers(0, 256, int(rng.integers(0, 200)), dtype=np.uint8)) for _ in range(1000)]
    fuzzed += ["def f(x: int) -> int:\n    return " + "(" * d + "x" + ")" * d + "\n" for d in (63, 64, 65, 300)]
    fuzzed += ["def f(x: int) -> int:\n    return " + "-" * d + "x\n" for d in (64, 65)]
    for cap in (1024, 7):
        assert_same_compile(compile_batch(fuzzed, code_cap=cap), cuda.compile_batch(fuzzed, code_cap=cap), "fuzzed")


@gpu
def test_fuzzed_tokens_identically():
    rng = np.random.default_rng(SEED)
    toks = []
    for i in range(3000):
        t = tokenize(CASES[i % len(CASES)].source) if not CASES[i % len(CASES)].error else None
        t = np.array(t if t is not None else [[0, 0, 1, 1]], np.int32)
        for _ in range(int(rng.integers(0, 4))):
            k = int(rng.integers(0, len(t)))
            t[k, 0] = int(rng.integers(-1, len(oc.TOKENS) + 1))
            t[k, 1] = int(rng.integers(-2, 300))
        toks.append(t)
    offsets = np.cumsum([0] + [len(t) for t in toks]).astype(np.int64)
    flat = np.concatenate(toks)
    assert_same_compile(compile_tokens(flat, offsets), cuda.compile_tokens(flat, offsets), "fuzzed tokens")


@gpu
def test_zero_tokens_identically():
    """CuPy hands an array of no elements to a kernel as a null pointer: programs of zero tokens,
    in a batch with no tokens at all and beside others, still compile to the CPU's error."""
    for flat, offsets in ((np.zeros((0, 4), np.int32), [0, 0, 0]),
                          (np.array(tokenize(CASES[0].source), np.int32), [0, 0, len(tokenize(CASES[0].source))])):
        offsets = np.array(offsets, np.int64)
        cpu_c = compile_tokens(flat, offsets)
        assert (cpu_c.errors[np.diff(offsets) == 0, 0] > 0).all(), cpu_c.errors
        assert_same_compile(cpu_c, cuda.compile_tokens(flat, offsets), "zero tokens")


@gpu
def test_chunking_gives_the_same_results(monkeypatch):
    sources, arg_sets = random_corpus(300, SEED + 2)
    cpu_c = compile_batch(sources)
    inputs = encode_tuples(arg_sets[0], SIGNATURE[0])
    programs = cpu_c.to_programs(entry=entry_indices(sources))
    whole = run_batch(programs, inputs, backend="cuda")
    whole_c = cuda.compile_batch(sources)
    toks = [tokenize(s) for s in sources]
    offsets = np.cumsum([0] + [len(t) for t in toks]).astype(np.int64)
    flat = np.concatenate(toks).astype(np.int32)
    expected = encode_results([int(v) for v in whole.value[:32]], "int")
    ev = cuda.evaluate(flat, offsets, inputs, expected)
    monkeypatch.setattr(cuda, "MAX_CHUNK", 7)  # many chunks
    assert_same_compile(whole_c, cuda.compile_batch(sources), "chunked compile")
    small = run_batch(programs, inputs, backend="cuda")
    for f in ("status", "value", "steps"):
        assert np.array_equal(getattr(whole, f), getattr(small, f)), f
    ev2 = cuda.evaluate(flat, offsets, inputs, expected)
    assert np.array_equal(ev.passed.get(), ev2.passed.get()) and np.array_equal(ev.steps.get(), ev2.steps.get())


@gpu
def test_torch_round_trip_without_copies():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    import cupy
    sources = ["def f(a: int, b: int) -> int:\n    return a + b\n", "def f(a: int, b: int) -> int:\n    return a - b\n",
               "def f(a: int) -> int:\n    return a\n", "def f(a: int, b: int) -> int:\n    return a // b\n"]
    toks = [tokenize(s) for s in sources]
    offsets = torch.tensor(np.cumsum([0] + [len(t) for t in toks]), dtype=torch.int64, device="cuda")
    flat = torch.tensor(np.concatenate(toks), dtype=torch.int32, device="cuda")
    assert cuda._dev(flat, cupy.int32).data.ptr == flat.data_ptr()  # DLPack, no copy
    args = [(1, 2), (5, 3), (7, 0)]
    inputs = encode_tuples(args, ("int", "int"))
    expected = encode_results([3, 8, 7], "int")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        ev = cuda.evaluate(flat, offsets, inputs, expected, signature=SIGNATURE)
    stream.synchronize()
    assert isinstance(ev.passed, torch.Tensor) and ev.passed.is_cuda
    # a - b passes (7, 0) only; the 1-parameter f fails the signature; 7 // 0 traps
    assert ev.passed.tolist() == [3, 1, 0, 0]
    assert ev.reward[0].item() == 1.0 and ev.reward[2].item() == 0.0
    assert ev.errors[:, 0].tolist() == [0, 0, 0, 0]
    code, lengths, errors = cuda.compile_device("tokens", flat, offsets)
    assert isinstance(code, torch.Tensor) and lengths.tolist() == compile_tokens(
        np.concatenate(toks).astype(np.int32), offsets.cpu().numpy()).lengths.tolist()


@gpu
def test_ray_evaluator():
    ray = pytest.importorskip("ray", reason="ray is not installed")
    from vramgym.vm.ray_evaluator import RayEvaluator
    ray.init(ignore_reinit_error=True)
    try:
        if ray.cluster_resources().get("GPU", 0) < 1:
            pytest.skip("the Ray cluster has no GPU")
        sources, arg_sets = random_corpus(200, SEED + 3)
        programs = compile_batch(sources).to_programs(entry=entry_indices(sources))
        inputs = encode_tuples(arg_sets[0], SIGNATURE[0])
        a = run_batch(programs, inputs)
        b = RayEvaluator().run_batch(programs, inputs)
        for f in ("status", "value", "steps"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), f
    finally:
        ray.shutdown()


@gpu
def test_compile_device_signatures():
    """compile_device(with_signatures=True): the packed signatures of CompiledBatch, sources and
    tokens alike, and the entry meta agrees with them."""
    from vramgym.compiler.batch import unpack_signatures
    sources = [c.source for c in CASES] + random_corpus(100, SEED + 3)[0]
    want = compile_batch(sources)
    flat, offsets = _tokens([s for s, ok in zip(sources, want.ok) if ok])
    want_tok = compile_tokens(flat, offsets)
    for kind, data, off, w in (("sources", *_packed(sources), want), ("tokens", flat, offsets, want_tok)):
        code, lengths, errors, meta, sig = (np.asarray(x.get()) for x in cuda.compile_device(
            kind, data, off, with_meta=True, with_signatures=True))
        assert np.array_equal(lengths, w.lengths) and np.array_equal(errors, w.errors), kind
        assert sig.shape == (len(lengths), oc.LIMITS["MAX_FUNCS"]) and sig.dtype == np.int64
        assert np.array_equal(sig[:, :w.signatures.shape[1]], w.signatures) and not sig[:, w.signatures.shape[1]:].any()
        present, ret, nparams, params = unpack_signatures(sig[:, 0])
        ok = lengths >= 0
        assert present[ok].all() and not present[~ok].any(), kind
        assert np.array_equal(meta[ok, 1], nparams[ok]) and np.array_equal(meta[ok, 2], ret[ok]), kind
        for i in np.flatnonzero(ok):
            assert np.array_equal(meta[i, 3:3 + nparams[i]], params[i, :nparams[i]]), (kind, i)


@gpu
def test_compile_device_offsets_outside_the_data():
    """compile_device with device offsets outside the bytes or tokens (or decreasing): those
    programs report code_len -1 and error -1 (the caller's mistake), the others compile as on
    the CPU, and nothing is read past the buffers."""
    from vramgym.compiler.batch import pack_sources
    srcs = ["def f(x: int) -> int:\n    return x + %d\n" % i for i in range(40)]
    blob, off = pack_sources(srcs)
    toks = [tokenize(s) for s in srcs]
    flat = np.concatenate(toks).astype(np.int32)
    toff = np.cumsum([0] + [len(t) for t in toks]).astype(np.int64)
    cases = (("sources", np.frombuffer(blob, np.uint8), off, len(blob), compile_batch(srcs)),
             ("tokens", flat, toff, len(flat), compile_tokens(flat, toff)))
    for kind, data, good, size, want in cases:
        bad = good.copy()
        bad[5] = size + (1 << 33)  # programs 4 and 5 end / start past the data
        bad[20] = -7               # program 19 ends before it starts, 20 starts before the data
        bad[31] = bad[30] - 1      # program 30 ends before it starts (31 starts early: some text)
        out, touched = {4, 5, 19, 20, 30}, {31}
        outs = cuda.compile_device(kind, data, bad, max_source_len=64, with_signatures=True)
        code, lengths, errors, sig = (np.asarray(x.get() if hasattr(x, "get") else x) for x in outs)
        for i in range(len(srcs)):
            if i in out:
                assert lengths[i] == -1 and errors[i].tolist() == [-1, 0, 0, 0] and not sig[i].any(), (kind, i)
            elif i not in touched:
                assert lengths[i] == want.lengths[i] > 0, (kind, i)
                assert np.array_equal(code[i, :lengths[i]], want.code[i, :lengths[i]]), (kind, i)
