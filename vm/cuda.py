"""The CUDA backend: the C++ compiler and VM of the CPU backend, compiled for the GPU by NVRTC.

    from vramgym.vm import run_batch
    run_batch(programs, inputs, backend="cuda")            # same results as backend="cpu"

    from vramgym.vm import cuda
    res = cuda.evaluate(tokens, offsets, inputs, expected)  # torch CUDA tensors in and out
    res.passed, res.steps, res.errors, res.reward

    # environments: (N, S, 4) token slots, each row scored on its own task's tests, no host sync
    passed, steps, ok = cuda.evaluate_tasks(tokens, counts, task_ids, active, inputs, expected,
                                            n_tests, ret_kinds)   # == vm.evaluate.evaluate_tasks_cpu

Only this module imports cupy, and only when it is used. The kernels (vm/csrc/cuda_kernels.cu)
include the very headers the CPU backend compiles; kernel_source() inlines them, so CuPy's
on-disk cache (keyed on the source text) never serves a build of stale headers. The module
is compiled once per process and device.

Memory: scratch (per compile thread and per VM lane) is bounded by the grid, not the batch, and
batches are processed in chunks sized from free device memory. The compiler does not recurse
(expressions and blocks run on explicit stacks inside its Compiler struct, which lives in global
scratch, as are the post passes' bracket stacks), so the compile kernel has a static frame of
~220 bytes (ptxas, sm_90; test_compile_kernels_have_a_static_stack prints it) and the CUDA
stack limit stays at the driver's default (1 KB): nothing is reserved per resident thread for
a call stack. The execute kernels' _local variants keep the VM operand stack (VG_LOCAL_STACK
ints, 16 KB) in their static frame.
"""
from __future__ import annotations

import numbers
import os
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import opcodes as oc
from .program import code_words
from .values import check_int, int_array

I32, I64 = (-(2**31), 2**31 - 1), (-(2**63), 2**63 - 1)

_CSRC = Path(__file__).resolve().parent / "csrc"
KERNEL_FILE = _CSRC / "cuda_kernels.cu"
LOCAL_STACK = oc.DEFAULT_STACK  # ints of operand stack kept in local memory (VG_LOCAL_STACK)
NVRTC_OPTIONS = ("-std=c++17", f"-DVG_LOCAL_STACK={LOCAL_STACK}")
# The VM's peephole superinstructions (vm.h, VG_SWITCH_FUSE): the same results in fewer dispatches
# per VM step, for a larger kernel (sm_90: evaluate's takes 56 registers a thread, not 48). Off until
# a GPU benchmark shows the gain (bench_gpu.py --switch-fuse); VRAMGYM_SWITCH_FUSE=1 turns it on.
SWITCH_FUSE = os.environ.get("VRAMGYM_SWITCH_FUSE", "0") == "1"
# The switch interpreter loads each step's next word while the step runs (vm.h, VG_PREFETCH): a
# shorter chain of dependent loads a step for 7 more SASS instructions (experiments/sass_steps.py),
# and 12 bytes of spill under the 48-register bound. Off until a GPU benchmark shows a gain
# (bench_gpu.py --switch-fuse has rows with it); VRAMGYM_PREFETCH=1 turns it on.
PREFETCH = os.environ.get("VRAMGYM_PREFETCH", "0") == "1"
# Switches compiled to jump tables (NVRTC's --jump-table-density): the VM's dispatch becomes a
# table load and one indirect branch (BRX) instead of a tree of ~5 compares and branches, 36.7 ->
# 33.2 SASS instructions a step on bench_gpu's gcd candidates (sass_steps.py). Off until a GPU
# benchmark shows a gain; VRAMGYM_JUMP_TABLES=1 turns it on.
JUMP_TABLES = os.environ.get("VRAMGYM_JUMP_TABLES", "0") == "1"
# Superinstructions from a translation (vm.h's VG_FUSED_CODE, fuse.h's, as the CPU's threaded
# interpreter takes them): each warp translates its program before the lanes run it, and a dispatch
# runs a whole common sequence (LOAD_VAR LOAD_CONST COMPARE_LT JUMP_IF_FALSE, ...): 2.95 VM steps a
# dispatch on bench_gpu's gcd candidates, 1.91 on its loop-heavy ones (counted on the CPU), for 64
# registers unbounded (or 48 and 68 bytes of spill). Programs longer than FX_CAP words run plain.
# Excludes SWITCH_FUSE. Off until a GPU benchmark shows a gain; VRAMGYM_FUSED_CODE=1 turns it on.
FUSED_CODE = os.environ.get("VRAMGYM_FUSED_CODE", "0") == "1"
FX_CAP = 512    # words: the longest program a warp translates (VG_FX_CAP; env bodies of 48 tokens take
#                 under 300), 13 KB of scratch a warp
JUMP_TABLE_DENSITY = 50   # percent of a switch's value range that its cases fill: the VM's is dense
EXEC_MIN_BLOCKS: int | None = None  # > 0: __launch_bounds__(EXEC_BLOCK, this) on the execute kernels,
# capping their registers so that many blocks fit an SM (10 on an H100: 48 registers, 40 warps); 0: no
# bound. None: 10 for the plain VM (unbounded it takes 56 registers since its traps return in place,
# with no spill at 48: experiments/sass_steps.py), 0 with SWITCH_FUSE (faster unbounded, session 6).
COMPILE_BLOCK = 64     # threads per block of the compile kernels (one program per thread)
# Lanes a warp that compile an env burst's listed rows (the rest idle): the compile's scratch
# slots spread over 4x as many warps as warps of 32 would take, so that a sparse burst gives each
# warp one program (vg_compile's VG_COMPILE_ROWS). An int in [1, 32]; VRAMGYM_COMPILE_ROW_LANES.
COMPILE_ROW_LANES = os.environ.get("VRAMGYM_COMPILE_ROW_LANES") or 8
COMPILE_PER_SM = 256   # resident compile threads per SM worth their scratch
EXEC_BLOCK = 128       # 4 warps per block of the execute kernels
EXEC_WARPS_PER_SM: int | None = None  # resident warps per SM of the persistent execute grids;
# None: as many as the kernel's registers and frame let the SM hold (the driver's occupancy query)
# Of the free device memory (the driver's free bytes plus CuPy's pooled ones) a call may take for
# chunk buffers and scratch; CuPy's pool keeps what it took. Processes that share a GPU (Ray
# actors, env runners beside a learner) each take this share of what they find free: lower it
# there (VRAMGYM_GPU_MEMORY_FRACTION, or this attribute; a float in (0, 1]).
MEMORY_FRACTION = os.environ.get("VRAMGYM_GPU_MEMORY_FRACTION") or 0.5
MAX_CHUNK: int | None = None  # items per chunk at most (None: as memory allows); tests lower it
ENTRY_META = 3 + oc.LIMITS["MAX_PARAMS"]


# --- the kernel source ----------------------------------------------------------------------

def _include_dirs() -> tuple[Path, ...]:
    import vramgym.compiler
    return (_CSRC, Path(vramgym.compiler.__file__).resolve().parent / "csrc")


def inline_includes(kernel_file: Path, dirs) -> str:
    """kernel_file with every quoted #include (looked up in dirs) inlined once, with #line marks:
    the text NVRTC compiles, so CuPy's on-disk cache (keyed on the text) never serves a build of
    stale headers. envs/grammar_cuda.py builds its kernels' source with it too."""
    dirs = tuple(dirs)
    seen: set[str] = set()
    include = re.compile(r'\s*#\s*include\s+"([^"]+)"')
    once = re.compile(r"\s*#\s*pragma\s+once\b")

    def expand(path: Path) -> list[str]:
        out = [f'#line 1 "{path.name}"']
        for no, line in enumerate(path.read_text().splitlines(), 1):
            m = include.match(line)
            if m:
                name = m.group(1)
                if name not in seen:
                    seen.add(name)
                    found = next((d / name for d in dirs if (d / name).exists()), None)
                    if found is None:
                        raise FileNotFoundError(f"{path.name}:{no}: include {name!r} not found in {dirs}")
                    out += expand(found)
                    out.append(f'#line {no + 1} "{path.name}"')
                continue
            out.append("" if once.match(line) else line)
        return out

    return "\n".join(expand(kernel_file)) + "\n"


def kernel_source() -> str:
    """cuda_kernels.cu with every quoted #include inlined once (the text NVRTC compiles)."""
    return inline_includes(KERNEL_FILE, _include_dirs())


# --- availability and per-device state --------------------------------------------------------

def available() -> bool:
    """cupy imports and sees a usable CUDA device."""
    try:
        import cupy
        return bool(cupy.cuda.is_available())
    except Exception:  # ImportError, or a driver without a device raising instead of answering
        return False


class _Device:
    """The compiled module and launch geometry of one device."""

    def __init__(self, device_id: int, switch_fuse: bool = False, min_blocks: int = 0, prefetch: bool = False,
                 jump_tables: bool = False, fused_code: bool = False, fx_words: int = 0):
        import cupy as cp
        self.id, self.switch_fuse, self.min_blocks = device_id, switch_fuse, min_blocks
        self.prefetch, self.jump_tables, self.fused_code = prefetch, jump_tables, fused_code
        self.fx_words = fx_words   # FX_CAP as built (device()'s key), 0 without FUSED_CODE
        with cp.cuda.Device(device_id):
            self.module = cp.RawModule(code=kernel_source(), options=nvrtc_options(
                switch_fuse, min_blocks, prefetch, jump_tables, fused_code))
            self.module.compile()
            self.k = {name: self.module.get_function(name) for name in (
                "vg_sizes", "vg_compile", "vg_validate_programs", "vg_active_rows", "vg_execute_local",
                "vg_execute_global", "vg_execute_local_eval", "vg_execute_global_eval",
                "vg_execute_tasks_local", "vg_execute_tasks_global")}
            rt = cp.cuda.runtime
            self.sms = rt.getDeviceProperties(device_id)["multiProcessorCount"]
            sizes = cp.zeros(6, dtype=cp.int64)
            self.k["vg_sizes"]((1,), (1,), (sizes,))
            lexer, compiler, token, meta, local, fx_warp = (int(v) for v in sizes.get())
            if token != 16 or meta != ENTRY_META or local != LOCAL_STACK or (fx_warp > 0) != fused_code:
                raise RuntimeError(f"cuda_kernels.cu is out of date with vramgym: sizes {sizes.get()}")
            self.lexer_bytes, self.compiler_bytes = lexer, compiler
            self.fx_warp_bytes = fx_warp   # a warp's translation area (VG_FUSED_CODE), after the lanes' scratch
            self._resident: dict[str, int] = {}

    def resident_warps(self, kernel: str) -> int:
        """Warps of `kernel` one SM holds at once (EXEC_BLOCK threads per block): the VM is latency
        bound (a step is a chain of dependent instructions; Nsight Compute on an H100), so a
        persistent grid wants every warp the SM can hold."""
        if kernel not in self._resident:
            import cupy as cp
            k = self.k[kernel]  # a RawKernel; its .kernel is the driver's function
            try:
                blocks = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(k.kernel.ptr, EXEC_BLOCK, 0)
            except Exception as e:  # no query in this CuPy: the register file's limit (256-register units)
                import warnings
                warnings.warn(f"vramgym: CUDA occupancy query failed ({e!r}); sizing {kernel}'s grid from its "
                              "registers", RuntimeWarning, stacklevel=2)
                try:
                    props = cp.cuda.runtime.getDeviceProperties(self.id)
                    per_warp = -(-k.num_regs * 32 // 256) * 256
                    warps = min(props["maxThreadsPerMultiProcessor"] // 32, props["regsPerMultiprocessor"] // per_warp)
                    blocks = warps * 32 // EXEC_BLOCK
                except Exception:
                    blocks = 16 * 32 // EXEC_BLOCK
            self._resident[kernel] = max(1, blocks) * EXEC_BLOCK // 32
        return self._resident[kernel]


def exec_min_blocks(switch_fuse: bool, min_blocks: int | None = None) -> int:
    """The execute kernels' __launch_bounds__ minimum of blocks: min_blocks, else EXEC_MIN_BLOCKS,
    else (None) the variant's default."""
    v = min_blocks if min_blocks is not None else EXEC_MIN_BLOCKS
    return int(v) if v is not None else (0 if switch_fuse else 10)


def nvrtc_options(switch_fuse: bool = False, min_blocks: int | None = None, prefetch: bool = False,
                  jump_tables: bool = False, fused_code: bool = False) -> tuple[str, ...]:
    """NVRTC's options for a variant of the kernels (nvcc takes the same ones)."""
    if switch_fuse and fused_code:
        raise ValueError("vramgym.vm.cuda: SWITCH_FUSE and FUSED_CODE exclude each other (peephole and translated "
                         "superinstructions); turn one off")
    return NVRTC_OPTIONS + (f"-DVG_SWITCH_FUSE={int(bool(switch_fuse))}", f"-DVG_EXEC_BLOCK={EXEC_BLOCK}",
                            f"-DVG_EXEC_MIN_BLOCKS={exec_min_blocks(switch_fuse, min_blocks)}",
                            f"-DVG_PREFETCH={int(bool(prefetch))}", f"-DVG_FUSED_CODE={int(bool(fused_code))}") + \
        ((f"-DVG_FX_CAP={fx_cap()}",) if fused_code else ()) + \
        ((f"--jump-table-density={JUMP_TABLE_DENSITY}",) if jump_tables else ())


_devices: dict[tuple[int, bool, int, bool, bool, bool, int], _Device] = {}
_lock = threading.Lock()


def device(device_id: int | None = None) -> _Device:
    """The compiled kernels for a device (the current one by default) in the variant that
    SWITCH_FUSE, EXEC_MIN_BLOCKS, PREFETCH, JUMP_TABLES and FUSED_CODE name at the moment, built on
    first use."""
    import cupy as cp
    if device_id is None:
        device_id = cp.cuda.Device().id
    key = (device_id, bool(SWITCH_FUSE), exec_min_blocks(bool(SWITCH_FUSE)), bool(PREFETCH), bool(JUMP_TABLES),
           bool(FUSED_CODE), fx_cap() if FUSED_CODE else 0)
    with _lock:
        if key not in _devices:
            _devices[key] = _Device(*key)
        return _devices[key]


_capture = threading.local()   # graph_capture()'s state in this thread: the budget it froze


def memory_fraction() -> float:
    """MEMORY_FRACTION checked: a number in (0, 1] (a string from the environment is parsed)."""
    v = MEMORY_FRACTION
    try:
        f = float(v) if isinstance(v, (str, numbers.Real)) and not isinstance(v, (bool, np.bool_)) else None
    except (ValueError, OverflowError):
        f = None
    if f is None or not 0 < f <= 1:
        raise ValueError(f"vramgym.vm.cuda.MEMORY_FRACTION (or VRAMGYM_GPU_MEMORY_FRACTION) must be a number in "
                         f"(0, 1], got {v!r}")
    return f


def fx_cap() -> int:
    """FX_CAP checked: an integer in [1, MAX_CODE]."""
    v = FX_CAP
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral) or not 1 <= v <= oc.LIMITS["MAX_CODE"]:
        raise ValueError(f"vramgym.vm.cuda.FX_CAP must be an integer in [1, {oc.LIMITS['MAX_CODE']}], got {v!r}")
    return int(v)


def compile_row_lanes() -> int:
    """COMPILE_ROW_LANES checked: an integer in [1, 32] (a string from the environment is parsed)."""
    v = COMPILE_ROW_LANES
    try:
        k = int(v) if isinstance(v, (str, numbers.Integral)) and not isinstance(v, (bool, np.bool_)) else None
    except ValueError:
        k = None
    if k is None or not 1 <= k <= 32:
        raise ValueError(f"vramgym.vm.cuda.COMPILE_ROW_LANES (or VRAMGYM_COMPILE_ROW_LANES) must be an integer in "
                         f"[1, 32], got {v!r}")
    return k


def _budget() -> int:
    """Bytes a call may allocate: a fraction of what the driver and CuPy's pool have free (while
    a graph is captured, the value of the call before: the capture records no query)."""
    import cupy as cp
    frozen = getattr(_capture, "budget", None)
    if frozen is not None:
        return frozen
    free, _ = cp.cuda.runtime.memGetInfo()
    _capture.last = int((free + cp.get_default_memory_pool().free_bytes()) * memory_fraction())
    return _capture.last


class _TorchBlock:
    """Owner of one block of torch's caching allocator behind a CuPy array: freed with it."""

    def __init__(self, ptr: int):
        self.ptr = ptr

    def __del__(self):
        try:
            import torch
            torch.cuda.caching_allocator_delete(self.ptr)
        except Exception:   # interpreter shutdown: torch is gone, and so is the memory
            pass


@contextmanager
def graph_capture():
    """For capturing calls of this module into a torch CUDA graph (`torch.cuda.graph`, as the
    envs' `cuda_graph=True` does): inside it, this thread's CuPy allocations (chunk buffers,
    scratch, outputs) come from torch's caching allocator on torch's current stream, so that
    during a capture they land in the graph's private memory pool, which torch keeps for as long
    as the graph lives (blocks from CuPy's own pool would go back to it when the arrays die, and
    the next eager call could reuse memory the graph still writes); and the memory budget that
    sizes chunks and grids is frozen at the last value measured outside (run the calls once
    eagerly first, as torch asks of any capture). Yields a list of objects (keep_alive's) that
    the graph's owner must hold as long as the graph."""
    import cupy as cp
    import torch

    def alloc(nbytes: int):
        dev = cp.cuda.Device().id
        ptr = torch.cuda.caching_allocator_alloc(max(int(nbytes), 1), dev, torch.cuda.current_stream(dev))
        mem = cp.cuda.UnownedMemory(ptr, nbytes, _TorchBlock(ptr), dev)
        return cp.cuda.MemoryPointer(mem, 0)

    with _capturing() as keep, cp.cuda.using_allocator(alloc):
        yield keep


@contextmanager
def _capturing():
    """This thread's capture state (graph_capture without CuPy's allocator): the frozen budget and
    the list that keep_alive fills, which the caller must hold as long as its graph. A nested
    capture shares the outer one's and leaves it as it found it."""
    outer = getattr(_capture, "budget", None), getattr(_capture, "keep", None)
    _capture.budget = outer[0] if outer[0] is not None else getattr(_capture, "last", None)
    _capture.keep = keep = outer[1] if outer[1] is not None else []
    try:
        yield keep
    finally:
        _capture.budget, _capture.keep = outer


def keep_alive(obj) -> None:
    """Tie obj to the graph being captured on this thread, if any (graph_capture yields the list
    that holds it): for buffers that captured kernels write but that a cache may drop later (the
    graph would go on writing their memory after it was handed to someone else)."""
    keep = getattr(_capture, "keep", None)
    if keep is not None:
        keep.append(obj)


def _chunk_size(n: int, item_bytes: int) -> int:
    """Items (programs or runs) per chunk: half the budget's worth, at least one."""
    c = max(1, min(n, _budget() // 2 // item_bytes))
    return min(c, MAX_CHUNK) if MAX_CHUNK else c


_NULL = np.uint64(0)  # a null pointer argument (8 bytes, like a pointer)
_i32, _i64 = np.int32, np.int64


def _ptr(a):
    return _NULL if a is None else a


# --- torch interop ----------------------------------------------------------------------------

def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "is_cuda")


@contextmanager
def _torch_stream(tensors):
    """Run on torch's current stream of the tensors' device when any input is a torch CUDA
    tensor (so the policy network and the evaluator share one stream and never sync);
    otherwise on CuPy's current stream."""
    import cupy as cp
    t = next((x for x in tensors if _is_torch(x) and x.is_cuda), None)
    if t is None:
        yield False
        return
    import torch
    ts = torch.cuda.current_stream(t.device)
    try:
        stream = cp.cuda.Stream.from_external(ts)
    except (AttributeError, TypeError):  # torch without the __cuda_stream__ protocol
        stream = cp.cuda.ExternalStream(ts.cuda_stream, t.device.index)
    with cp.cuda.Device(t.device.index), stream:
        yield True


def _on_device(x) -> bool:
    """x is a torch CUDA tensor or a CuPy array: checked by its dtype and shape only (reading its
    values would sync with the device). Anything else is a host array, checked as the CPU backend
    checks it before the upload."""
    if _is_torch(x):
        return x.is_cuda
    import cupy as cp
    return isinstance(x, cp.ndarray)


def _int_kind(x, name: str) -> None:
    """TypeError unless the device array x holds integers: a cast to the kernel's dtype would
    truncate floats (and take bools as 0/1)."""
    if _is_torch(x):
        import torch
        ok = x.dtype != torch.bool and not x.dtype.is_floating_point and not x.dtype.is_complex
    else:
        ok = x.dtype.kind in "iu"
    if not ok:
        raise TypeError(f"{name} must be an integer array, got dtype {x.dtype}")


def _ints(x, name: str, dtype, lo: int = I64[0], hi: int = I64[1], ndim: int | None = 1):
    """An integer argument as a device array of `dtype`: device arrays checked by dtype and
    number of dimensions (None: any), host arrays by value as well (vm.values.int_array: no
    truncated floats, no wrapped values)."""
    if _on_device(x):
        _int_kind(x, name)
        if ndim is not None and x.ndim != ndim:
            raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(x.shape)}")
        return _dev(x, dtype, name)
    from .evaluate import _host
    h = _host(x)
    return _dev(int_array(h, name, lo, hi, np.dtype(dtype), h.ndim if ndim is None else ndim), dtype, name)


def _dev(x, dtype, name: str = "an argument"):
    """A CuPy array of `dtype` over x: torch CUDA tensors and CuPy arrays without a copy (DLPack),
    host arrays uploaded. A dtype conversion copies. A device array on another device than the
    call's is refused (its kernels would read it through the wrong device's addresses)."""
    import cupy as cp
    where = x.device.index if _is_torch(x) and x.is_cuda else \
        getattr(getattr(x, "device", None), "id", None) if isinstance(x, cp.ndarray) else None
    if where is not None and hasattr(cp.cuda, "Device") and where != cp.cuda.Device().id:
        raise ValueError(f"{name} is on cuda:{where}, but this call runs on cuda:{cp.cuda.Device().id} (the "
                         f"device of its first torch CUDA argument, else CuPy's current device)")
    if _is_torch(x):
        x = cp.from_dlpack(x.detach()) if x.is_cuda else cp.asarray(x.numpy())
    elif not isinstance(x, cp.ndarray):
        x = cp.asarray(np.asarray(x))
    if x.dtype != dtype:
        x = x.astype(dtype)
    return cp.ascontiguousarray(x)


def _code_cap(code_cap) -> int:
    return check_int(code_cap, "code_cap", 1, oc.LIMITS["MAX_CODE"])


def _is_bool(x) -> bool:
    return str(x.dtype) in ("bool", "torch.bool")


def _active(active, n: int):
    """The active mask as a device uint8 array: a device array of bools, or of integers taken as
    nonzero; a host array as the CPU backend takes it (bools, or integers 0 and 1)."""
    import cupy as cp
    if _on_device(active):
        if not _is_bool(active):
            _int_kind(active, "active")
            active = active != 0
        return _dev(active, cp.uint8, "active")
    from .evaluate import _host, _vector
    a = _host(active)
    return _dev(a if a.dtype == bool and a.shape == (n,) else _vector(a, "active", n, 0, 1, bool), cp.uint8, "active")


def _offsets(offsets, name: str = "offsets"):
    """(N + 1,) int64 offsets on the device, N >= 0 (their values are the kernels' to check)."""
    import cupy as cp
    off = _ints(offsets, name, cp.int64)
    if len(off) < 1:
        raise ValueError(f"{name} must hold N + 1 entries (at least one), got none")
    return off


def _program_data(kind: str, data):
    """compile_device's and evaluate's programs on the device: tokens (T, 4) int32 (a flat array
    of 4T ints is taken as T rows), or source bytes (uint8)."""
    import cupy as cp
    from .evaluate import _host
    if kind == "sources":
        if _on_device(data):
            _int_kind(data, "sources")
            if (data.element_size() if _is_torch(data) else data.dtype.itemsize) != 1:
                raise TypeError(f"sources must be bytes (uint8), got dtype {data.dtype}")
            return _dev(data, cp.uint8, "sources")
        return _dev(int_array(_host(data), "sources", 0, 255, np.uint8), cp.uint8, "sources")
    toks = _ints(data, "tokens", cp.int32, *I32, ndim=None)
    if toks.ndim == 1 and toks.size % 4 == 0:
        toks = toks.reshape(-1, 4)
    if toks.ndim != 2 or toks.shape[1] != 4:
        raise ValueError(f"tokens must have shape (T, 4) (or be a flat array of 4T ints), got {tuple(toks.shape)}")
    return toks


def _out(x, as_torch: bool):
    if not as_torch:
        return x
    import torch
    return torch.from_dlpack(x)


# --- compile ----------------------------------------------------------------------------------

def _compile_launch(d: _Device, kind: str, data, off, n: int, code, code_len, err, code_cap: int, entry: int,
                    meta, tok_cap: int = 0, sig=None):
    """One launch of a compile kernel over programs [0, n) of data/off (device arrays); sig
    (nullable) (n, MAX_FUNCS) int64 receives the packed signatures."""
    import cupy as cp
    if n == 0:
        return
    slot_bytes = d.compiler_bytes + (d.lexer_bytes + 16 * tok_cap if kind == "sources" else 0)
    slots = min(n, d.sms * COMPILE_PER_SM, max(COMPILE_BLOCK, _budget() // slot_bytes))
    blocks = -(-slots // COMPILE_BLOCK)
    slots = blocks * COMPILE_BLOCK
    compilers = cp.empty(slots * d.compiler_bytes, dtype=cp.uint8)
    if kind == "sources":
        lexers = cp.empty(slots * d.lexer_bytes, dtype=cp.uint8)
        tokens = cp.empty(slots * tok_cap * 4, dtype=cp.int32)
        _run_vg_compile(d, blocks, COMPILE_SOURCES, n, code, code_cap, code_len, compilers, src=data, src_off=off,
                         n_src=data.size, err=err, entry=entry, meta=meta, sig=sig, lexers=lexers, tokens=tokens,
                         tok_cap=tok_cap)
    else:
        _run_vg_compile(d, blocks, COMPILE_TOKENS, n, code, code_cap, code_len, compilers, toks=data, tok_off=off,
                         n_toks=data.size // 4, err=err, entry=entry, meta=meta, sig=sig)


# vg_compile's modes (cuda_kernels.cu): one kernel, so that ptxas compiles the compiler once
COMPILE_SOURCES, COMPILE_TOKENS, COMPILE_SLOTS, COMPILE_ROWS = 0, 1, 2, 3


def _run_vg_compile(d: _Device, blocks: int, mode: int, n: int, code, code_cap: int, code_len, compilers, *,
                     src=None, src_off=None, n_src: int = 0, toks=None, tok_off=None, n_toks: int = 0, slot: int = 0,
                     count=None, active=None, err=None, entry: int = 0, meta=None, sig=None, lexers=None, tokens=None,
                     tok_cap: int = 0, rows=None, n_rows=None, row_lanes: int = 32):
    """vg_compile over programs [0, n) in one of its modes; the arguments another mode reads are
    null pointers (device arrays or None)."""
    d.k["vg_compile"]((blocks,), (COMPILE_BLOCK,), (
        _i32(mode), _i32(n), _ptr(src), _ptr(src_off), _i64(n_src), _ptr(toks), _ptr(tok_off), _i64(n_toks),
        _i32(slot), _ptr(count), _ptr(active), code, _i32(code_cap), code_len, _ptr(err), _i32(entry), _ptr(meta),
        _ptr(sig), _ptr(lexers), compilers, _ptr(tokens), _i32(tok_cap), _ptr(rows), _ptr(n_rows), _i32(row_lanes)))


def _active_rows(d: _Device, active, n: int, code_len=None, err=None):
    """(rows, n_rows) device arrays: the rows i < n where active[i] (uint8), listed by one launch of
    vg_active_rows in no particular order, n_rows[0] of them; it also sets code_len -1 and a zero
    error on the other rows (each nullable). Nothing is read back."""
    import cupy as cp
    rows = cp.empty(max(n, 1), dtype=cp.int32)
    n_rows = cp.zeros(1, dtype=cp.int32)
    if n:
        blocks = min(-(-n // 256), d.sms * 8)
        d.k["vg_active_rows"]((blocks,), (256,), (_i32(n), active, _ptr(code_len), _ptr(err), rows, n_rows))
    return rows, n_rows


def token_capacity(max_source_len: int) -> int:
    """Tokens of scratch per compile thread for sources of at most max_source_len bytes."""
    return int(min(oc.LIMITS["MAX_TOKENS"], 2 * max(0, max_source_len) + 4))


def compile_device(kind: str, data, offsets, *, code_cap: int = 1024, entry: int = 0, max_source_len: int | None = None,
                   with_meta: bool = False, with_signatures: bool = False):
    """Compile on the device; device arrays in and out (CuPy, or torch CUDA tensors without a
    copy). kind "tokens": data (T, 4) int32 rows (kind, value, line, col); kind "sources": data
    uint8 bytes. offsets (N + 1,) int64 (not checked on the host: a program whose offsets fall
    outside data gets code_len -1 and error code -1). Returns (code (N, code_cap) uint32,
    lengths (N,) int32, errors (N, 4) int32[, entry_meta (N, ENTRY_META) int32][, signatures
    (N, MAX_FUNCS) int64]): the layout of CompiledBatch. signatures (with_signatures) are packed
    as CompiledBatch.signatures (vramgym.compiler.batch.unpack_signatures reads them, 0 past a
    program's last function); without them a CompiledBatch made from these arrays runs
    unchecked, with the ret_kind given to to_programs. max_source_len (sources) sizes the token
    scratch; None reads it from offsets (one sync)."""
    import cupy as cp
    if kind not in ("tokens", "sources"):
        raise ValueError("kind must be 'tokens' or 'sources'")
    code_cap = _code_cap(code_cap)
    with _torch_stream((data, offsets)) as as_torch:
        d = device()
        data = _program_data(kind, data)
        off = _offsets(offsets)
        n = len(off) - 1
        tok_cap = 0
        if kind == "sources":
            if max_source_len is None:
                max_source_len = int(cp.max(off[1:] - off[:-1])) if n else 0
            tok_cap = token_capacity(max_source_len)
        code = cp.zeros((n, code_cap), dtype=cp.uint32)
        lengths = cp.zeros(n, dtype=cp.int32)
        errors = cp.zeros((n, 4), dtype=cp.int32)
        meta = cp.zeros((n, ENTRY_META), dtype=cp.int32) if with_meta else None
        sig = cp.zeros((n, oc.LIMITS["MAX_FUNCS"]), dtype=cp.int64) if with_signatures else None
        _compile_launch(d, kind, data, off, n, code, lengths, errors, code_cap, entry, meta, tok_cap, sig=sig)
        outs = (code, lengths, errors) + ((meta,) if with_meta else ()) + ((sig,) if with_signatures else ())
        return tuple(_out(x, as_torch) for x in outs)


def _compile_host(kind: str, data: np.ndarray, offsets: np.ndarray, code_cap: int):
    """Host arrays in, CompiledBatch out, in chunks that fit the device."""
    import cupy as cp
    from vramgym.compiler.batch import CompiledBatch, trim_signatures
    d = device()
    n = len(offsets) - 1
    code = np.zeros((n, code_cap), dtype=np.uint32)
    lengths = np.zeros(n, dtype=np.int32)
    errors = np.zeros((n, 4), dtype=np.int32)
    sig = np.zeros((n, oc.LIMITS["MAX_FUNCS"]), dtype=np.int64)
    lens = np.diff(offsets)
    tok_cap = token_capacity(int(lens.max()) if n else 0) if kind == "sources" else 0
    per_prog = 4 * code_cap + 20 + 8 * oc.LIMITS["MAX_FUNCS"]
    chunk = _chunk_size(n, per_prog)
    dev_data = cp.asarray(data)
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        off = cp.asarray(offsets[a: b + 1])
        dc = cp.zeros((b - a, code_cap), dtype=cp.uint32)
        dl = cp.zeros(b - a, dtype=cp.int32)
        de = cp.zeros((b - a, 4), dtype=cp.int32)
        ds = cp.zeros((b - a, oc.LIMITS["MAX_FUNCS"]), dtype=cp.int64)
        _compile_launch(d, kind, dev_data, off, b - a, dc, dl, de, code_cap, 0, None, tok_cap, sig=ds)
        code[a:b], lengths[a:b], errors[a:b], sig[a:b] = dc.get(), dl.get(), de.get(), ds.get()
    return CompiledBatch(code, lengths, errors, trim_signatures(sig))


def compile_batch(sources, *, code_cap: int = 1024):
    """vramgym.compiler.compile_batch on the GPU: the same CompiledBatch, bit for bit."""
    from vramgym.compiler.batch import pack_sources
    code_cap = _code_cap(code_cap)
    blob, offsets = pack_sources(sources)
    return _compile_host("sources", np.frombuffer(blob, dtype=np.uint8), offsets, code_cap)


def compile_tokens(tokens, offsets, *, code_cap: int = 1024):
    """vramgym.compiler.compile_tokens on the GPU (host arrays in, CompiledBatch out), with its
    checks of the arguments (before anything touches the device)."""
    from vramgym.compiler.batch import _check_offsets, _check_tokens
    code_cap = _code_cap(code_cap)
    tokens = _check_tokens(tokens)
    return _compile_host("tokens", tokens, _check_offsets(offsets, len(tokens)), code_cap)


# --- execute ----------------------------------------------------------------------------------

def _lane_words(config, local: bool) -> int:
    """int32 words of one VM lane's global scratch (cuda_kernels.cu lane_layout)."""
    md, ml, hs = max(config.max_depth, 1), max(config.max_lists, 1), max(config.heap_size, 1)
    return 3 * md + 3 * ml + hs + (0 if local else config.stack_size)


def _exec_grid(d: _Device, n_tasks: int, config, family: str, reserve: int = 0):
    """(kernel, blocks, scratch) for a persistent execute launch over n_tasks tasks; family names
    the kernel with {} for its variant, e.g. "vg_execute_{}_eval"."""
    import cupy as cp
    local = config.stack_size <= LOCAL_STACK
    kernel = d.k[family.format("local" if local else "global")]
    lane_bytes = 4 * _lane_words(config, local)
    fx_bytes = d.fx_warp_bytes   # a warp's translation area (FUSED_CODE), after all lanes'
    warp_bytes = 32 * lane_bytes + fx_bytes
    fit = (_budget() - reserve) // warp_bytes
    per_block = EXEC_BLOCK // 32
    if fit < per_block:
        raise MemoryError(f"VMConfig {config} needs {warp_bytes * per_block} bytes of scratch per block of "
                          f"{per_block} warps; the GPU has too little free memory")
    per_sm = EXEC_WARPS_PER_SM or d.resident_warps(family.format("local" if local else "global"))
    warps = min(n_tasks, d.sms * per_sm, fit)
    blocks = max(1, -(-warps // per_block))
    scratch = cp.empty((blocks * EXEC_BLOCK * lane_bytes + blocks * per_block * fx_bytes) // 4, dtype=cp.int32)
    return kernel, blocks, scratch


def _cfg_args(config):
    return (_i32(config.fuel), _i32(config.max_depth), _i32(config.heap_size), _i32(config.max_lists),
            _i32(config.stack_size))


def _validate(d: _Device, code, code_off, code_stride, code_len, n, entry, entry_all, meta, want_sig):
    import cupy as cp
    entry_pc = cp.empty(max(n, 1), dtype=cp.int32)
    if n:
        blocks = -(-n // 256)
        d.k["vg_validate_programs"]((blocks,), (256,), (
            code, _ptr(code_off), _i64(code_stride), _ptr(code_len), _i32(n), _ptr(entry), _i32(entry_all),
            _ptr(meta), _ptr(want_sig), entry_pc))
    return entry_pc


def task_starts(run_prog: np.ndarray, lockstep: bool = True) -> np.ndarray:
    """Start of every task (up to 32 consecutive runs of one program; one run each without
    lockstep) and the end, as int64."""
    r = len(run_prog)
    if r == 0:
        return np.zeros(1, dtype=np.int64)
    if not lockstep:
        return np.arange(r + 1, dtype=np.int64)
    new = np.ones(r, dtype=bool)
    new[1:] = run_prog[1:] != run_prog[:-1]
    seg_start = np.flatnonzero(new)
    pos = np.arange(r) - seg_start[np.cumsum(new) - 1]
    return np.append(np.flatnonzero(pos % 32 == 0), r).astype(np.int64)


def run_batch(programs, inputs, run_prog, run_in, expected, config, out_cap, nthreads, lockstep=True):
    """The batch interface of vramgym.vm.batch on the GPU: exactly the CPU backend's results.
    nthreads is ignored; lockstep=False runs one run per warp (slow, for cross-checks)."""
    import cupy as cp
    from .batch import BatchResult
    d = device()
    n_runs = len(run_prog)
    status = np.zeros(n_runs, dtype=np.int32)
    value = np.zeros(n_runs, dtype=np.int32)
    steps = np.zeros(n_runs, dtype=np.int32)
    passed = np.zeros(n_runs, dtype=bool) if expected is not None else None
    out_list = np.zeros((n_runs, out_cap), dtype=np.int32) if out_cap > 0 else None
    if n_runs == 0:
        return BatchResult.from_rows(status, value, steps, passed, out_list, np.zeros(0, dtype=bool))
    n_prog, n_in = len(programs), len(inputs)
    code = cp.asarray(programs.code) if len(programs.code) else cp.zeros(1, cp.uint32)
    code_off = cp.asarray(programs.offsets)
    ret_kind = cp.asarray(programs.ret_kind) if n_prog else cp.zeros(1, cp.int32)
    entry_pc = _validate(d, code, code_off, 0, None, n_prog, cp.asarray(programs.entry) if n_prog else None, 0,
                         None, None)
    in_words = cp.asarray(inputs.words) if len(inputs.words) else cp.zeros(1, cp.int32)
    in_off = cp.asarray(inputs.offsets)
    exp_words = exp_off = None
    if expected is not None:
        exp_words = cp.asarray(expected.words) if len(expected.words) else cp.zeros(1, cp.int32)
        exp_off = cp.asarray(expected.offsets)
    starts = task_starts(run_prog, lockstep)
    n_tasks = len(starts) - 1
    per_run = 8 + 12 + 1 + 4 * out_cap + 8
    kernel, blocks, scratch = _exec_grid(d, n_tasks, config, "vg_execute_{}")
    chunk_runs = _chunk_size(n_runs, per_run)
    t0 = 0
    while t0 < n_tasks:
        r0 = int(starts[t0])
        t1 = max(t0 + 1, int(np.searchsorted(starts, r0 + chunk_runs, side="right")) - 1)
        t1 = min(t1, n_tasks)
        r1 = int(starts[t1])
        n = r1 - r0
        d_prog, d_in = cp.asarray(run_prog[r0:r1]), cp.asarray(run_in[r0:r1])
        d_starts = cp.asarray(starts[t0: t1 + 1] - r0)
        d_status, d_value, d_steps = (cp.empty(n, dtype=cp.int32) for _ in range(3))
        d_passed = cp.zeros(n, dtype=cp.uint8) if expected is not None else None
        d_list = cp.zeros((n, out_cap), dtype=cp.int32) if out_cap > 0 else None
        kernel((blocks,), (EXEC_BLOCK,), (
            code, code_off, _i64(0), _NULL, _i32(n_prog), entry_pc, ret_kind, _i32(0), in_words, in_off, _i32(n_in),
            _i64(in_words.size), d_prog, d_in, d_starts, _i64(t1 - t0), _i32(1), _ptr(exp_words), _ptr(exp_off),
            _i64(0 if exp_words is None else exp_words.size), *_cfg_args(config),
            scratch, d_status, d_value, d_steps, _ptr(d_passed), _ptr(d_list), _i32(out_cap), _NULL, _NULL))
        status[r0:r1], value[r0:r1], steps[r0:r1] = d_status.get(), d_value.get(), d_steps.get()
        if passed is not None:
            passed[r0:r1] = d_passed.get().astype(bool)
        if out_list is not None:
            out_list[r0:r1] = d_list.get()
        t0 = t1
    # (a run whose program index is out of range trapped bad_input: status is not 0)
    kinds = np.take(programs.ret_kind, run_prog, mode="clip") if n_prog else np.full(n_runs, -1)
    listed = (status == 0) & (kinds == oc.KIND_LIST)
    return BatchResult.from_rows(status, value, steps, passed, out_list, listed)


# --- evaluate: compile + execute + compare, on the device -------------------------------------

@dataclass
class EvalResult:
    """Per candidate (N,): passed tests (int32), executed steps summed over the tests (int64),
    reward = passed / n_tests (float32), compile errors (N, 4) int32 (code 0 where it
    compiled). Arrays are torch tensors when the candidates came as torch tensors, else CuPy."""

    passed: object
    steps: object
    reward: object
    errors: object
    n_tests: int


def _encoded_dev(x, name: str):
    """(words, offsets) device arrays of an Encoded or a (words, offsets) pair."""
    import cupy as cp
    if hasattr(x, "words"):
        words, offsets = x.words, x.offsets
    elif isinstance(x, (tuple, list)) and len(x) == 2:
        words, offsets = x
    else:
        raise TypeError(f"{name} must be an Encoded batch or a (words, offsets) pair, got {type(x).__name__}")
    words = _ints(words, f"{name} words", cp.int32, *I32)
    return (words if words.size else cp.zeros(1, cp.int32)), _offsets(offsets, f"{name} offsets")


def evaluate(programs, offsets, inputs, expected, *, source: bool = False, signature=None, entry: int = 0,
             config=None, code_cap: int = 1024, max_source_len: int | None = None) -> EvalResult:
    """Compile N candidates, run each on the M test inputs and count the tests whose result
    equals the expected value, on one stream with nothing copied to the host in between.

    programs/offsets: tokens (T, 4) int32 with (N + 1,) int64 token offsets, or with
    source=True a uint8 byte buffer with byte offsets; torch CUDA tensors (used in place, on
    torch's current stream), CuPy or host arrays. inputs/expected: Encoded (or (words, offsets)
    pairs, as in evaluate_tasks), M values each. signature: ((param kinds), ret kind), e.g.
    (("int", "int"), "int"): candidates whose entry function (number `entry`) has another
    signature pass no test (their runs trap bad_input); None checks nothing and compares results
    as ints.
    Batches are compiled and run in chunks that fit in free device memory."""
    import cupy as cp
    from .batch import VMConfig
    from .values import KIND_BY_NAME
    config = config or VMConfig()
    code_cap = _code_cap(code_cap)
    want = None
    ret_kind = oc.KIND_INT
    if signature is not None:
        params, ret = signature
        ret_kind = KIND_BY_NAME[ret]
        want = np.array([len(params), ret_kind] + [KIND_BY_NAME[k] for k in params], dtype=np.int32)
    kind = "sources" if source else "tokens"
    with _torch_stream((programs, offsets)) as as_torch:
        d = device()
        data = _program_data(kind, programs)
        off = _offsets(offsets)
        in_words, in_off = _encoded_dev(inputs, "inputs")
        exp_words, exp_off = _encoded_dev(expected, "expected")
        n, m = len(off) - 1, len(in_off) - 1
        if len(exp_off) - 1 != m:
            raise ValueError("expected needs one value per input")
        want_dev = cp.asarray(want) if want is not None else None
        tok_cap = 0
        if source:
            if max_source_len is None:
                max_source_len = int(cp.max(off[1:] - off[:-1])) if n else 0  # the one sync
            tok_cap = token_capacity(max_source_len)
        passed = cp.zeros(n, dtype=cp.int32)
        steps = cp.zeros(n, dtype=cp.uint64)
        errors = cp.zeros((n, 4), dtype=cp.int32)
        lengths = cp.zeros(n, dtype=cp.int32)
        wpp = max(1, -(-m // 32))
        per_prog = 4 * code_cap + 4 * ENTRY_META + 8
        kernel, blocks, scratch = _exec_grid(d, n * wpp, config, "vg_execute_{}_eval")
        chunk = _chunk_size(n, per_prog)
        code = cp.empty((min(chunk, max(n, 1)), code_cap), dtype=cp.uint32)  # reused by every chunk
        meta = cp.empty((code.shape[0], ENTRY_META), dtype=cp.int32)
        for a in range(0, n if m else 0, chunk):
            b = min(n, a + chunk)
            k = b - a
            _compile_launch(d, kind, data, off[a: b + 1], k, code, lengths[a:b], errors[a:b], code_cap, entry, meta,
                            tok_cap)
            entry_pc = _validate(d, code, None, code_cap, lengths[a:b], k, None, entry, meta, want_dev)
            kernel((blocks,), (EXEC_BLOCK,), (
                code, _NULL, _i64(code_cap), lengths[a:b], _i32(k), entry_pc, _NULL, _i32(ret_kind), in_words, in_off,
                _i32(m), _i64(in_words.size), _NULL, _NULL, _NULL, _i64(k * wpp), _i32(wpp), exp_words, exp_off,
                _i64(exp_words.size), *_cfg_args(config),
                scratch, _NULL, _NULL, _NULL, _NULL, _NULL, _i32(0), passed[a:b], steps[a:b]))
        if not m:  # no tests: nothing runs, but compile errors are still reported
            for a in range(0, n, chunk):
                b = min(n, a + chunk)
                _compile_launch(d, kind, data, off[a: b + 1], b - a, code, lengths[a:b], errors[a:b], code_cap, entry,
                                meta, tok_cap)
        reward = passed.astype(cp.float32) / max(m, 1)
        steps = steps.view(cp.int64)
        return EvalResult(_out(passed, as_torch), _out(steps, as_torch), _out(reward, as_torch),
                          _out(errors, as_torch), m)


def _task_args_dev(n: int, sizes_name: str, sizes, task_ids, active, inputs, expected, n_tests: int, ret_kinds):
    """The device arguments evaluate_tasks and execute_tasks share, checked: device arrays by
    dtype and shape (nothing is read back from the device), host arrays as the CPU backend
    checks them."""
    import cupy as cp
    sizes = _ints(sizes, sizes_name, cp.int64)
    task_of = _ints(task_ids, "task_ids", cp.int64)
    act = None if active is None else _active(active, n)
    task_ret = _ints(ret_kinds, "ret_kinds", cp.int32, oc.KIND_INT, oc.KIND_LIST)
    in_words, in_off = _encoded_dev(inputs, "inputs")
    exp_words, exp_off = _encoded_dev(expected, "expected")
    n_in, n_task = len(in_off) - 1, len(task_ret)
    for name, x in ((sizes_name, sizes), ("task_ids", task_of), ("active", act)):
        if x is not None and x.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), got {x.shape}")
    if len(exp_off) - 1 != n_in:
        raise ValueError("expected needs one value per input")
    if n_in != n_task * n_tests:
        raise ValueError(f"inputs hold {n_in} values; {n_task} tasks x {n_tests} tests need {n_task * n_tests}")
    return sizes, task_of, act, task_ret, (in_words, in_off, exp_words, exp_off), n_in, n_task


def _task_fuel_dev(task_fuel, n_task: int):
    """task_fuel as an int32 device array of n_task step budgets, or the null pointer for None:
    host arrays checked as the CPU backend checks them (each in [1, 2**31 - 1]); a device array
    by dtype and shape only (the kernel takes a value below 1 as 1)."""
    if task_fuel is None:
        return _NULL
    import cupy as cp
    from .values import INT32_MAX
    f = _ints(task_fuel, "task_fuel", cp.int32, 1, INT32_MAX)
    if f.shape != (n_task,):
        raise ValueError(f"task_fuel must have shape ({n_task},), one budget per task, got {tuple(f.shape)}")
    return f


# --- evaluate_tasks: token slots, each program on its own task's tests --------------------------

def _compile_slots_launch(d: _Device, toks, count, active, n: int, code, code_len, code_cap: int, err=None):
    """vg_compile over token slots [0, n) (device arrays). With an active mask, vg_active_rows
    lists the active rows first and the compile takes that list (VG_COMPILE_ROWS: COMPILE_ROW_LANES
    lanes a warp, one program a warp before any warp takes two); returns the (rows, n_rows) for
    the scorer, else None."""
    import cupy as cp
    if n == 0:
        return None
    listed = None if active is None else _active_rows(d, active, n, code_len, err)
    slots = min(n, d.sms * COMPILE_PER_SM, max(COMPILE_BLOCK, _budget() // d.compiler_bytes))
    if listed is None:
        blocks = -(-slots // COMPILE_BLOCK)
        compilers = cp.empty(blocks * COMPILE_BLOCK * d.compiler_bytes, dtype=cp.uint8)
        _run_vg_compile(d, blocks, COMPILE_SLOTS, n, code, code_cap, code_len, compilers, toks=toks,
                        slot=toks.shape[1], count=count, err=err)
        return None
    lanes = compile_row_lanes()
    warps = -(-slots // lanes)   # about the same scratch slots, `lanes` of them a warp
    blocks = -(-warps * 32 // COMPILE_BLOCK)
    warps = blocks * COMPILE_BLOCK // 32   # the grid's (a slot for every compiling lane)
    compilers = cp.empty(warps * lanes * d.compiler_bytes, dtype=cp.uint8)
    _run_vg_compile(d, blocks, COMPILE_ROWS, n, code, code_cap, code_len, compilers, toks=toks, slot=toks.shape[1],
                    count=count, err=err, rows=listed[0], n_rows=listed[1], row_lanes=lanes)
    return listed


def evaluate_tasks(tokens, counts, task_ids, active, inputs, expected, n_tests: int, ret_kinds, *, config=None,
                   code_cap: int = 1024, task_fuel=None):
    """Compile N programs given as token slots and run each on its own task's tests, on the
    device, with no host synchronisation (for environments that keep their state on the GPU).

    tokens (N, S, 4) int32: row i holds program i's compiler tokens (kind, value, line, col), the
        layout of compile_tokens, in its first counts[i] entries (the last one EOF); the rest of
        the slot is ignored. counts (N,) int: clamped to [0, S]. task_ids (N,) int: each row's
        task, in [0, T) (evaluate_tasks_cpu raises otherwise; here such a row runs no test).
        active (N,) bool (None: all): inactive rows are neither compiled nor run.
    inputs, expected: Encoded (uploaded on each call) or (words, offsets) device pairs (no
        copy), T * n_tests values: task t's tests are items t * n_tests .. (t + 1) * n_tests - 1.
        Device pairs are not checked on the host (a sync): an item whose offsets fall outside
        its words traps bad_input (an input) or never matches (an expected value) in the kernel.
    ret_kinds (T,) int32: each task's return kind (opcodes.KIND_*), for comparing results.
    task_fuel (T,) int (None: none): each task's step budget, which caps config.fuel for its runs.
    Returns (passed (N,) int32: tests whose result equals the expected value, steps (N,) int64:
    executed steps summed over the tests, ok (N,) bool: compiled); passed and steps are 0 where
    a row did not compile or is inactive. Torch CUDA tensors when tokens is one (on torch's
    current stream), else CuPy arrays. Exactly vramgym.vm.evaluate.evaluate_tasks_cpu.

    Everything is launched on one stream; chunk sizes come from N and free device memory
    (host-side queries), so nothing waits for the device."""
    import cupy as cp
    from .batch import VMConfig
    config = config or VMConfig()
    code_cap = _code_cap(code_cap)
    from .evaluate import check_n_tests
    n_tests = check_n_tests(n_tests)
    with _torch_stream((tokens, counts, task_ids, active)) as as_torch:
        d = device()
        toks = _ints(tokens, "tokens", cp.int32, *I32, ndim=None)
        if toks.ndim != 3 or toks.shape[2] != 4:
            raise ValueError(f"tokens must have shape (N, S, 4), got {toks.shape}")
        n = toks.shape[0]
        count, task_of, act, task_ret, tests, n_in, n_task = _task_args_dev(
            n, "counts", counts, task_ids, active, inputs, expected, n_tests, ret_kinds)
        fuel_of = _task_fuel_dev(task_fuel, n_task)
        in_words, in_off, exp_words, exp_off = tests
        passed = cp.zeros(n, dtype=cp.int32)
        steps = cp.zeros(n, dtype=cp.uint64)
        lengths = cp.empty(n, dtype=cp.int32)
        wpp = max(1, -(-n_tests // 32))
        chunk = _chunk_size(n, 4 * code_cap + 4 * 4)
        code = cp.empty((min(chunk, max(n, 1)), code_cap), dtype=cp.uint32)  # reused by every chunk
        if n and n_tests:
            kernel, blocks, scratch = _exec_grid(d, min(n, chunk) * wpp, config, "vg_execute_tasks_{}")
        for a in range(0, n, chunk):
            b = min(n, a + chunk)
            k = b - a
            listed = _compile_slots_launch(d, toks[a:b], count[a:b], None if act is None else act[a:b], k, code,
                                           lengths[a:b], code_cap)
            if not n_tests:
                continue
            entry_pc = _validate(d, code, None, code_cap, lengths[a:b], k, None, 0, None, None)
            rows, n_rows = listed or (None, None)
            kernel((blocks,), (EXEC_BLOCK,), (
                code, _i32(code_cap), lengths[a:b], _i32(k), entry_pc, task_of[a:b], task_ret, fuel_of, _i32(n_task),
                _i32(n_tests), in_words, in_off, _i32(n_in), _i64(in_words.size), exp_words, exp_off,
                _i64(exp_words.size), _i64(k * wpp), _i32(wpp), _ptr(rows), _ptr(n_rows),
                *_cfg_args(config), scratch, passed[a:b], steps[a:b]))
        ok = _out(lengths, as_torch) >= 0  # compared after the hand-over: no bool through DLPack
        return _out(passed, as_torch), _out(steps.view(cp.int64), as_torch), ok


# --- execute_tasks: bytecode images, each on its own task's tests --------------------------------

def execute_tasks(code, code_len, task_ids, active, inputs, expected, n_tests: int, ret_kinds, *, config=None,
                  task_fuel=None):
    """Validate N bytecode images and run each valid one on its own task's tests, on the device
    with no host synchronisation (NeuralCompile-v0 scores its envs' bytecode with it).

    code (N, W) uint32 or int32 (the same bits): image i in code[i, :code_len[i]]; code_len (N,)
    int (< 0 or > W: invalid). task_ids, active, inputs, expected, n_tests, ret_kinds and
    task_fuel as in evaluate_tasks. Returns (passed (N,) int32, steps (N,) int64 summed over the tests, valid
    (N,) bool: passes the validator and has a function 0); passed and steps are 0 where a row is
    inactive or invalid. Torch CUDA tensors when code is one (on torch's current stream), else
    CuPy arrays. Exactly vramgym.vm.evaluate.execute_tasks_cpu."""
    import cupy as cp
    from .batch import VMConfig
    config = config or VMConfig()
    from .evaluate import check_n_tests
    n_tests = check_n_tests(n_tests)
    with _torch_stream((code, code_len, task_ids, active)) as as_torch:
        d = device()
        if _on_device(code):  # 32-bit words only: the values of a wider dtype could not be checked
            if str(code.dtype) not in (("torch.int32",) if _is_torch(code) else ("int32", "uint32")):
                raise TypeError(f"code on the device must be {'int32' if _is_torch(code) else 'int32 or uint32'}, "
                                f"got dtype {code.dtype}")
            words = _dev(code, cp.int32 if _is_torch(code) else cp.uint32, "code")  # torch: no uint32 for DLPack
        else:
            from .evaluate import _host
            words = _host(code)
            if words.ndim != 2:
                raise ValueError(f"code must have shape (N, W), got {words.shape}")
            words = _dev(code_words(words, "code", ndim=2), cp.uint32, "code")
        if words.ndim != 2:
            raise ValueError(f"code must have shape (N, W), got {tuple(words.shape)}")
        words = words.view(cp.uint32)
        n, width = words.shape
        length, task_of, act, task_ret, tests, n_in, n_task = _task_args_dev(
            n, "code_len", code_len, task_ids, active, inputs, expected, n_tests, ret_kinds)
        fuel_of = _task_fuel_dev(task_fuel, n_task)
        in_words, in_off, exp_words, exp_off = tests
        # Inactive rows and lengths outside [0, W] become -1: the validator marks them invalid.
        keep = (length >= 0) & (length <= width)
        if act is not None:
            keep &= act.astype(cp.bool_)
        lengths = cp.where(keep, length, -1).astype(cp.int32)
        passed = cp.zeros(n, dtype=cp.int32)
        steps = cp.zeros(n, dtype=cp.uint64)
        entry_pc = cp.full(max(n, 1), -1, dtype=cp.int32)
        wpp = max(1, -(-n_tests // 32))
        chunk = _chunk_size(n, 4 * width + 16)
        if n and n_tests:
            kernel, blocks, scratch = _exec_grid(d, min(n, chunk) * wpp, config, "vg_execute_tasks_{}")
        for a in range(0, n, chunk):
            b = min(n, a + chunk)
            k = b - a
            sub = cp.ascontiguousarray(words[a:b])
            pc = _validate(d, sub, None, width, lengths[a:b], k, None, 0, None, None)
            entry_pc[a:b] = pc[:k]
            if not n_tests:
                continue
            # with a mask, the scorer's warps take the listed rows only, one program each
            rows, n_rows = (None, None) if act is None else _active_rows(d, act[a:b], k)
            kernel((blocks,), (EXEC_BLOCK,), (
                sub, _i32(width), lengths[a:b], _i32(k), pc, task_of[a:b], task_ret, fuel_of, _i32(n_task),
                _i32(n_tests), in_words, in_off, _i32(n_in), _i64(in_words.size), exp_words, exp_off,
                _i64(exp_words.size), _i64(k * wpp), _i32(wpp), _ptr(rows), _ptr(n_rows),
                *_cfg_args(config), scratch, passed[a:b], steps[a:b]))
        valid = _out(entry_pc[:n], as_torch) >= 0  # compared after the hand-over: no bool through DLPack
        return _out(passed, as_torch), _out(steps.view(cp.int64), as_torch), valid
