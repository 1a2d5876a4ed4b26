"""The native mask automaton on a CUDA device: envs/csrc/grammar_kernels.cu (over grammar.h, the
header the CPU library compiles) built by NVRTC through CuPy, once per process and device. The
same module holds the token-slot builder of the task scorer (token_slots.h; envs/token_slots.py).

Used by envs/grammar_native.py NativeAutomaton(grammars, "cuda"); only this module imports cupy,
and only when it is used. Inputs and outputs are torch CUDA tensors shared with CuPy through
DLPack (no copies); kernels run on torch's current stream of the tensors' device, so they queue
behind the policy's work and nothing waits for the GPU (no host sync in mask/step/min_tokens).
One launch per call: mask, step and min_tokens_to_finish are one kernel each, and so is the
token env's whole step with its autoreset and task hash (env_step: SynthesisCore._step_tokens's
~25 torch ops and the vector env's 13).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from vramgym.vm.cuda import available, inline_includes  # noqa: F401  (available: re-exported)

CSRC = Path(__file__).resolve().parent / "csrc"
KERNEL_FILE = CSRC / "grammar_kernels.cu"
NVRTC_OPTIONS = ("-std=c++17",)
VOCAB = 73           # checked against vocab.VOCAB_SIZE by the constants check (gm_consts_kernel)
BLOCK = 128          # GM_BLOCK of grammar_kernels.cu: rows per block
KERNELS = ("gm_mask_kernel", "gm_step_kernel", "gm_env_step_kernel", "gm_min_tokens_kernel", "gm_token_slots_kernel",
           "gm_consts_kernel")


def kernel_source() -> str:
    """grammar_kernels.cu with its quoted #includes (from envs/csrc) inlined once: the text NVRTC
    compiles (vm/cuda.py's inliner, shared with the VM kernels)."""
    return inline_includes(KERNEL_FILE, (CSRC,))


# ---- launches (shared with the host emulator test: k maps names to callables like CuPy kernels) --
def grid(n: int) -> tuple[int]:
    return (-(-n // BLOCK),)


def launch_mask(k, S, gid, out_u8, addrs, nfid: int, ngram: int, n: int, end_if_none: bool = False) -> None:
    if n:
        k["gm_mask_kernel"](grid(n), (BLOCK,), (S, gid, np.int64(n), out_u8, addrs, np.int32(nfid), np.int32(ngram),
                                                np.int32(end_if_none)))


def launch_step(k, S, actions, gid, new, invalid_u8, addrs, nfid: int, ngram: int, n: int) -> None:
    if n:
        k["gm_step_kernel"](grid(n), (BLOCK,), (S, actions, gid, np.int64(n), new, invalid_u8, addrs, np.int32(nfid),
                                                np.int32(ngram)))


def launch_env_step(k, task, tokens, length, S, n: int, L: int, actions, restart, tasks, keys, episode,
                    n_tasks: int, init, flags_u8, body_len, addrs, nfid: int, ngram: int) -> None:
    """gm_env_step_kernel; tasks, keys and episode may be the null address np.uint64(0)."""
    if n:
        k["gm_env_step_kernel"](grid(n), (BLOCK,), (task, tokens, length, S, np.int64(n), np.int32(L), actions, restart,
                                                    tasks, keys, episode, np.int64(n_tasks), init, flags_u8, body_len,
                                                    addrs, np.int32(nfid), np.int32(ngram)))


def launch_min_tokens(k, S, gid, out, addrs, nfid: int, ngram: int, n: int) -> None:
    if n:
        k["gm_min_tokens_kernel"](grid(n), (BLOCK,), (S, gid, np.int64(n), out, addrs, np.int32(nfid), np.int32(ngram)))


def launch_token_slots(k, bodies, L: int, lengths, task_ids, active, n: int, act, nact: int, tail, prefix,
                       prefix_len, ntask: int, P: int, out, count) -> None:
    """Arrays as CuPy kernel arguments (arrays, or device addresses as np.uint64; active may be
    the null address np.uint64(0))."""
    if n:
        k["gm_token_slots_kernel"](grid(n), (BLOCK,), (bodies, np.int32(L), lengths, task_ids, active, np.int64(n), act,
                                                       np.int32(nact), tail, prefix, prefix_len, np.int32(ntask),
                                                       np.int32(P), out, count))


# ---- per-device module -----------------------------------------------------------------------------
_modules: dict = {}
_lock = threading.Lock()


def kernels(device_id: int) -> dict:
    """The compiled kernels of a device, built on first use; checks the constants they were
    compiled with against envs/grammar.py (as the CPU library's loader does)."""
    import cupy as cp
    from .grammar_native import consts_vector
    with _lock:
        if device_id not in _modules:
            with cp.cuda.Device(device_id):
                mod = cp.RawModule(code=kernel_source(), options=NVRTC_OPTIONS)
                k = {name: mod.get_function(name) for name in KERNELS}
                want = consts_vector()
                got = cp.zeros(len(want), dtype=cp.int64)
                k["gm_consts_kernel"]((1,), (1,), (got,))
                if not np.array_equal(got.get(), want):
                    raise RuntimeError("grammar_kernels.cu is out of date with envs/grammar.py")
                _modules[device_id] = k
        return _modules[device_id]


@contextmanager
def _torch_stream(device):
    """CuPy on torch's current stream of `device` (the kernels queue behind torch's work)."""
    import cupy as cp
    import torch
    ts = torch.cuda.current_stream(device)
    try:
        stream = cp.cuda.Stream.from_external(ts)
    except (AttributeError, TypeError):  # cupy without the __cuda_stream__ protocol
        stream = cp.cuda.ExternalStream(ts.cuda_stream, device.index)
    with cp.cuda.Device(device.index), stream:
        yield


def _cp(t):
    import cupy as cp
    return cp.from_dlpack(t.detach())


class DeviceTables:
    """The automaton's int32 tables on one CUDA device (torch tensors), their addresses, and the
    launches of NativeAutomaton's calls there."""

    def __init__(self, arrays, nfid: int, device):
        import torch
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        self.device = device
        self.k = kernels(device.index)
        self.arrays = [torch.from_numpy(a).to(device) for a in arrays]   # kept alive: kernels read them by address
        self.addrs = torch.tensor([a.data_ptr() for a in self.arrays], dtype=torch.int64, device=device)
        self.init = self.arrays[-1]                                    # INIT: the last table
        self.nfid, self.ngram = nfid, len(self.init)

    def mask(self, S, gid, end_if_none: bool = False):
        """(n, VOCAB) uint8 viewed as bool; end_if_none: END allowed where nothing is."""
        import torch
        n = len(S)
        out = torch.empty((n, VOCAB), dtype=torch.uint8, device=self.device)
        with _torch_stream(self.device):
            launch_mask(self.k, _cp(S), _cp(gid), _cp(out), _cp(self.addrs), self.nfid, self.ngram, n, end_if_none)
        return out.view(torch.bool)

    def env_step(self, task, tokens, length, S, actions, restart, tasks, max_len: int):
        """The token env's step and autoreset in one kernel, in place on the env's tensors (as
        NativeAutomaton.env_step checks them): (flags (4, n) bool: bad, term, trunc, done;
        body_len (n,) int64), torch tensors on the device."""
        import torch
        from .vector import HashedTasks
        n = len(S)
        flags = torch.empty((4, n), dtype=torch.uint8, device=self.device)
        body_len = torch.empty(n, dtype=torch.int64, device=self.device)
        null = np.uint64(0)
        hashed = isinstance(tasks, HashedTasks)
        with _torch_stream(self.device):
            launch_env_step(self.k, _cp(task), _cp(tokens), _cp(length), _cp(S), n, max_len, _cp(actions),
                            _cp(restart), null if tasks is None or hashed else _cp(tasks),
                            _cp(tasks.keys) if hashed else null, _cp(tasks.episode) if hashed else null,
                            tasks.n_tasks if hashed else 0, _cp(self.init), _cp(flags), _cp(body_len),
                            _cp(self.addrs), self.nfid, self.ngram)
        return flags.view(torch.bool), body_len

    def step(self, S, actions, gid):
        import torch
        n = len(S)
        new = torch.empty_like(S)
        bad = torch.empty(n, dtype=torch.uint8, device=self.device)
        with _torch_stream(self.device):
            launch_step(self.k, _cp(S), _cp(actions), _cp(gid), _cp(new), _cp(bad), _cp(self.addrs), self.nfid,
                        self.ngram, n)
        return new, bad.view(torch.bool)

    def min_tokens(self, S, gid):
        import torch
        n = len(S)
        out = torch.empty(n, dtype=torch.int64, device=self.device)
        with _torch_stream(self.device):
            launch_min_tokens(self.k, _cp(S), _cp(gid), _cp(out), _cp(self.addrs), self.nfid, self.ngram, n)
        return out
