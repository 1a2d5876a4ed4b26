"""The vector envs' whole-step CUDA graph (cuda_graph=True, envs/step_graph.py).

Without a GPU, cuda_graph="emulate" replays the captured step by calling it again and copying its
results into the first call's outputs: the shell's static-buffer plumbing (static actions,
outputs copied out, the snapshot the warm-up is undone from, graphs per action shape and
pinning, buffers written in place) is checked here against the eager env, step for step. The
GPU tests compare the real graph with the eager GPU env and the CPU env, and check that a step
does not synchronize."""
import numpy as np
import pytest
import torch

from vramgym.envs import vocab as V
from vramgym.envs.bank import TaskBank
from vramgym.envs.neural_compile import NUM_ACTIONS, NeuralCompileVectorEnv
from vramgym.envs.step_graph import StepGraph
from vramgym.envs.synthesis import SynthesisVectorEnv

SEED = int(np.random.SeedSequence().entropy % (1 << 30))  # fresh every run; printed on failure
BANK = TaskBank.from_names(["gcd", "sum_list", "reverse_list", "is_prime", "count_evens"], n_tests=8)
HAS_CUDA = torch.cuda.is_available()


def as_np(x):
    return x.cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def step_all(envs, a, t):
    """Step every env with actions `a` and assert equal outputs; returns the first env's."""
    outs = [e.step(torch.as_tensor(a).to(e.device)) for e in envs]
    for o in outs[1:]:
        for k in outs[0][0]:
            np.testing.assert_array_equal(as_np(outs[0][0][k]), as_np(o[0][k]),
                                          err_msg=f"obs {k} at step {t} (seed {SEED})")
        for i, name in ((1, "reward"), (2, "terminated"), (3, "truncated")):
            np.testing.assert_array_equal(as_np(outs[0][i]), as_np(o[i]), err_msg=f"{name} at step {t} (seed {SEED})")
        np.testing.assert_array_equal(as_np(outs[0][4]["invalid_action"]), as_np(o[4]["invalid_action"]))
    return outs[0]


def drive(envs, obs, rng, steps, batch=False, widths=(20,)):
    """Step every env with the same actions (drawn from the first env's masks, a few out of
    range or masked; whole bodies of the given widths in turn with batch=True), comparing
    outputs. Returns the last observation and how many episodes ended."""
    ended = 0
    for t in range(steps):
        n = envs[0].num_envs
        if batch:
            a = rng.integers(-1, V.VOCAB_SIZE + 1, (n, widths[t % len(widths)]))
        elif "action_mask" in obs:
            m = as_np(obs["action_mask"]).astype(bool)
            a = (rng.random(m.shape) + m).argmax(axis=1)
            u = rng.random(n)
            a = np.where(u < 0.03, rng.integers(-2, V.VOCAB_SIZE + 2, n), a)
        else:   # NeuralCompile-v0: any byte, a few out of range
            a = rng.integers(-1, NUM_ACTIONS + 1, n)
        obs, _, term, trunc, _ = step_all(envs, a, t)
        ended += int(as_np(term).sum() + as_np(trunc).sum())
    return obs, ended


def reset_all(envs, **kw):
    obs = [e.reset(**kw)[0] for e in envs]
    for o in obs[1:]:
        for k in obs[0]:
            np.testing.assert_array_equal(as_np(obs[0][k]), as_np(o[k]), err_msg=f"reset obs {k}")
    return obs[0]


@pytest.mark.parametrize("copy", [True, False])
def test_emulated_graph_equals_eager_token_env(copy):
    rng = np.random.default_rng(SEED)
    kw = dict(num_envs=48, bank=BANK, max_len=20, device="cpu", copy=copy)
    envs = [SynthesisVectorEnv(**kw), SynthesisVectorEnv(cuda_graph="emulate", **kw)]
    drive(envs, reset_all(envs, seed=SEED), rng, 70)
    drive(envs, reset_all(envs, seed=SEED + 1), rng, 50)    # a new seed: the hash keys change in place
    pin = rng.integers(0, len(BANK), 48)
    drive(envs, reset_all(envs, seed=SEED, options={"task": pin}), rng, 50)   # pinned: a graph of its own
    assert all(bool((e.state.task.cpu() == torch.as_tensor(pin)).all()) for e in envs)
    drive(envs, reset_all(envs, seed=SEED + 2), rng, 30)    # back to sampled tasks: the first graph again
    assert len(envs[1]._graphs) == 2


@pytest.mark.parametrize("batch", [False, True])
def test_emulated_graph_env_pickled_or_copied_after_a_pinned_reset_samples_as_the_original(batch):
    """A copy captures its steps again, one graph per key, each with the pinning of its key. The
    warm-up of the unpinned graph hashes the tasks' keys for the current seed, which a pinned
    reset had not done yet, and the capture then puts the old keys back: the copy must not
    believe they are the new seed's (it sampled other tasks than the original, session 30's
    audit)."""
    import copy
    import pickle
    rng = np.random.default_rng(SEED)
    n = 24
    kw = dict(num_envs=n, bank=BANK, max_len=16, device="cpu", batch=batch)
    eager, graphed = SynthesisVectorEnv(**kw), SynthesisVectorEnv(cuda_graph="emulate", **kw)
    envs = [eager, graphed]
    drive(envs, reset_all(envs, seed=SEED), rng, 3, batch=batch, widths=(16,))     # the unpinned graph
    pin = rng.integers(0, len(BANK), n)
    drive(envs, reset_all(envs, seed=SEED + 1, options={"task": pin}), rng, 3, batch=batch, widths=(16,))
    twins = [copy.deepcopy(graphed), pickle.loads(pickle.dumps(graphed))]
    assert all(len(t._graphs) == 2 for t in twins)
    envs = twins + [graphed, eager]
    drive(envs, reset_all(envs), rng, 40, batch=batch, widths=(16,))   # sampled tasks of seed SEED + 1


def test_emulated_graph_equals_eager_batch_env_and_other_widths_run_eagerly():
    rng = np.random.default_rng(SEED)
    kw = dict(num_envs=32, bank=BANK, max_len=16, device="cpu", batch=True)
    envs = [SynthesisVectorEnv(**kw), SynthesisVectorEnv(cuda_graph="emulate", **kw)]
    drive(envs, reset_all(envs, seed=SEED), rng, 12, batch=True, widths=(16, 9, 16, 23))   # 9, 23: eager steps
    assert list(envs[1]._graphs) == [((32, 16), False)]


def test_emulated_graph_equals_eager_neural_compile_env():
    rng = np.random.default_rng(SEED)
    kw = dict(num_envs=24, bank=BANK, max_words=32, device="cpu")
    envs = [NeuralCompileVectorEnv(**kw), NeuralCompileVectorEnv(cuda_graph="emulate", **kw)]
    _, ended = drive(envs, reset_all(envs, seed=SEED), rng, 200)
    assert ended > 0   # episodes ended (and autoreset) inside the compared steps


def test_graph_outputs_are_fresh_tensors_each_step():
    """The graph's outputs are overwritten by the next replay: what a step returned must not
    change when the env steps again (observations with copy=True; reward and flags always)."""
    rng = np.random.default_rng(SEED)
    for copy in (True, False):
        env = SynthesisVectorEnv(num_envs=16, bank=BANK, max_len=12, device="cpu", copy=copy, cuda_graph="emulate")
        obs, _ = env.reset(seed=SEED)
        first = env.step(torch.as_tensor((rng.random((16, V.VOCAB_SIZE)) + as_np(obs["action_mask"])).argmax(1)))
        kept = [x.clone() for x in first[1:4]] + [first[0]["tokens"].clone()]
        for _ in range(13):   # past the length limit: every env ends and restarts
            obs = env.step(torch.as_tensor((rng.random((16, V.VOCAB_SIZE)) + as_np(obs["action_mask"])).argmax(1)))[0]
        for x, y in zip(first[1:4], kept[:3]):
            assert torch.equal(x, y)
        if copy:
            assert torch.equal(first[0]["tokens"], kept[3])
        else:   # copy=False: the observation is the env's own buffer, as in the eager env
            assert first[0]["tokens"].data_ptr() == env.state.tokens.data_ptr()


def test_emulated_graph_catches_a_rebound_buffer():
    """A step that rebinds a state field instead of writing it in place would leave a real graph
    writing the old tensor: the emulation raises."""
    env = SynthesisVectorEnv(num_envs=8, bank=BANK, max_len=12, device="cpu", cuda_graph="emulate")
    env.reset(seed=SEED)
    step_reset = env.core.step_reset

    def rebinding(state, actions, restart, tasks):
        out = step_reset(state, actions, restart, tasks)
        state.length = state.length.clone()
        return out

    env.core.step_reset = rebinding
    with pytest.raises(AssertionError, match="state.length"):
        env.step(torch.zeros(8, dtype=torch.int64))


def test_capture_undoes_the_warm_up():
    """Capturing runs the step (warm-up, or the emulated capture) on the env's own buffers; the
    snapshot puts them back, so a graph env's reset observation is the eager env's."""
    env = SynthesisVectorEnv(num_envs=8, bank=BANK, max_len=12, device="cpu")
    genv = SynthesisVectorEnv(num_envs=8, bank=BANK, max_len=12, device="cpu", cuda_graph="emulate")
    env.reset(seed=SEED)
    genv.reset(seed=SEED)
    for k, v in env._buffers().items():
        if k in genv._buffers():
            assert torch.equal(v, genv._buffers()[k]), k


def test_step_graph_checks():
    a = torch.zeros(4, dtype=torch.int64)
    buf = {"x": torch.zeros(4, dtype=torch.int64)}

    def body():
        buf["x"] += a
        return (buf["x"] * 2,)

    g = StepGraph(body, a, lambda: dict(buf), emulate=True)
    assert int(buf["x"].sum()) == 0              # the capture's call was undone
    a.fill_(3)
    out = g.replay()
    assert out[0].tolist() == [6] * 4 and buf["x"].tolist() == [3] * 4
    assert g.replay()[0] is out[0] and out[0].tolist() == [12] * 4   # static outputs


@pytest.mark.skipif(HAS_CUDA, reason="a GPU is present")
def test_cuda_graph_needs_a_cuda_device():
    with pytest.raises(ValueError, match="cuda_graph"):
        SynthesisVectorEnv(num_envs=2, bank=BANK, device="cpu", cuda_graph=True)
    with pytest.raises(ValueError, match="cuda_graph"):
        SynthesisVectorEnv(num_envs=2, bank=BANK, device="cpu", cuda_graph="yes")


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
@pytest.mark.parametrize("automaton,batch", [("auto", False), ("torch", False), ("auto", True)])
def test_gpu_graph_equals_eager_gpu_and_cpu(automaton, batch):
    rng = np.random.default_rng(SEED)
    n = 512
    kw = dict(num_envs=n, bank=BANK, max_len=20, batch=batch)
    envs = [SynthesisVectorEnv(device="cpu", **kw), SynthesisVectorEnv(device="cuda", automaton=automaton, **kw),
            SynthesisVectorEnv(device="cuda", automaton=automaton, cuda_graph=True, **kw)]
    drive(envs, reset_all(envs, seed=SEED), rng, 60, batch=batch, widths=(20, 11))
    pin = rng.integers(0, len(BANK), n)
    drive(envs, reset_all(envs, seed=SEED + 1, options={"task": pin}), rng, 40, batch=batch)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
@pytest.mark.parametrize("cuda_graph,batch", [(False, False), (True, False), (True, True)])
def test_gpu_env_pickled_or_copied_mid_episode_goes_on_as_the_original(cuda_graph, batch):
    """Never run on a GPU before session 27's test: a CUDA env unpickled or deep-copied mid-episode
    rebuilds its core's per-device tables (SynthesisCore.__setstate__) and, with cuda_graph=True,
    captures its own step again; it must then step exactly as the original and as a CPU env
    driven by the same actions, and stepping the copies first must not move the original."""
    import copy
    import pickle
    rng = np.random.default_rng(SEED)
    n = 256
    kw = dict(num_envs=n, bank=BANK, max_len=20, batch=batch)
    cpu, gpu = SynthesisVectorEnv(device="cpu", **kw), SynthesisVectorEnv(device="cuda", cuda_graph=cuda_graph, **kw)
    obs, _ = drive([cpu, gpu], reset_all([cpu, gpu], seed=SEED), rng, 7, batch=batch)
    twins = [copy.deepcopy(gpu), pickle.loads(pickle.dumps(gpu))]
    assert all(t.device == gpu.device for t in twins)
    drive(twins + [gpu, cpu], obs, rng, 30, batch=batch, widths=(20, 9))   # twins first, compared with both
    if cuda_graph:
        assert all(t._graphs for t in twins) and all(t._graphs is not gpu._graphs for t in twins)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
def test_gpu_graph_neural_compile_equals_eager_gpu_and_cpu():
    rng = np.random.default_rng(SEED)
    kw = dict(num_envs=256, bank=BANK, max_words=32)
    envs = [NeuralCompileVectorEnv(device="cpu", **kw), NeuralCompileVectorEnv(device="cuda", **kw),
            NeuralCompileVectorEnv(device="cuda", cuda_graph=True, **kw)]
    _, ended = drive(envs, reset_all(envs, seed=SEED), rng, 150)
    assert ended > 0   # episodes ended (and autoreset) on the way


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
@pytest.mark.parametrize("batch", [False, True])
def test_gpu_graph_step_does_not_sync(batch):
    n = 1024
    env = SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=24, device="cuda", batch=batch, cuda_graph=True)
    obs, _ = env.reset(seed=0)
    gen = torch.Generator(device="cuda").manual_seed(0)
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(40):
            if batch:
                a = torch.randint(0, V.VOCAB_SIZE, (n, 24), device="cuda", generator=gen)
            else:
                a = torch.multinomial(obs["action_mask"].float(), 1, generator=gen)[:, 0]
            obs, r, term, trunc, info = env.step(a)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert torch.isfinite(r).all()


def test_capture_state_keeps_buffers_and_nests():
    """vm.cuda's capture state (what graph_capture sets up around a capture, CuPy's allocator
    aside): keep_alive ties objects to the capture's list and is a no-op outside one; the budget
    is frozen at the last value measured; a nested capture shares the list and leaves the outer
    state as it found it (it used to unfreeze the budget while the outer capture went on)."""
    from vramgym.vm import cuda as vm_cuda
    vm_cuda.keep_alive("outside")            # no capture: nothing holds it, nothing fails
    vm_cuda._capture.last = 123
    with vm_cuda._capturing() as keep:
        vm_cuda.keep_alive("a")
        assert vm_cuda._capture.budget == 123
        vm_cuda._capture.last = 456          # a measurement inside does not move the frozen value
        with vm_cuda._capturing() as inner:
            vm_cuda.keep_alive("b")
            assert inner is keep and vm_cuda._capture.budget == 123
        assert vm_cuda._capture.budget == 123 and vm_cuda._capture.keep is keep
        vm_cuda.keep_alive("c")
    assert keep == ["a", "b", "c"]
    assert vm_cuda._capture.budget is None and vm_cuda._capture.keep is None
    vm_cuda.keep_alive("after")
    assert keep == ["a", "b", "c"]


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
def test_gpu_graph_holds_the_token_slot_buffers_it_writes():
    """The bank caches its token-slot output buffers under 4 (device, stream, N, L) keys; a
    captured step writes the ones of its capture stream at every replay. Other shapes evict
    them from the cache: the graph must hold them itself, or it writes memory that torch has
    handed to other tensors since (here: tensors filled with -1 that must stay so)."""
    bank = TaskBank.from_names(["gcd", "sum_list", "reverse_list", "is_prime", "count_evens"], n_tests=8)
    rng = np.random.default_rng(SEED)
    kw = dict(num_envs=256, bank=bank, max_len=20)
    envs = [SynthesisVectorEnv(device="cuda", **kw), SynthesisVectorEnv(device="cuda", cuda_graph=True, **kw)]
    obs = reset_all(envs, seed=SEED)
    kept = [x for g in envs[1]._graphs.values() for x in g._kept]
    assert kept, "the capture kept no token-slot buffers"
    for n in (3, 5, 7, 9):   # four other keys: the captured buffers leave the cache
        bodies = torch.zeros((n, 20), dtype=torch.int64, device="cuda")
        bank._device_token_slots(bodies, torch.zeros(n, dtype=torch.int64, device="cuda"),
                                 torch.zeros(n, dtype=torch.int64, device="cuda"), None)
    cached = {id(t) for out in bank._slot_out.values() for t in out}
    assert not any(id(t) in cached for out in kept for t in out)
    del bodies
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    fill = [torch.full((1 << 16,), -1, dtype=torch.int32, device="cuda") for _ in range(256)]
    drive(envs, obs, rng, 40)
    torch.cuda.synchronize()
    assert all(bool((f == -1).all()) for f in fill), "a replay wrote memory the graph no longer held"
