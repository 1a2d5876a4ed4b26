"""The environments' torch state: numpy and torch outputs agree, the torch mask automaton gives the
same episodes as the numpy one, CPU and GPU envs agree step for step (GPU part skips without a
GPU), and the step path has no data-dependent op (checked on the meta device, where every
host-syncing op raises)."""
import numpy as np
import pytest
import torch

from vramgym.envs import vocab as V
from vramgym.envs.bank import TaskBank
from vramgym.envs.neural_compile import NUM_ACTIONS, NeuralCompileVectorEnv
from vramgym.envs.synthesis import SynthesisVectorEnv
from vramgym.envs.vector import hash_tasks

SEED = int(np.random.SeedSequence().entropy % (1 << 30))  # fresh every run; printed on failure
BANK = TaskBank.from_names(["gcd", "sum_list", "reverse_list", "is_prime", "count_evens", "max_list", "contains"], n_tests=8)
HAS_CUDA = torch.cuda.is_available()


def as_np(x):
    return x.cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def masked_actions(rng, mask, p_bad=0.03):
    """A random allowed action per row; a few out-of-range or masked ones on purpose."""
    mask = as_np(mask).astype(bool)
    a = (rng.random(mask.shape) + mask).argmax(axis=1)
    u = rng.random(len(a))
    a = np.where(u < p_bad, rng.integers(0, V.VOCAB_SIZE, len(a)), a)
    return np.where(u > 1 - p_bad, rng.choice([-1, V.VOCAB_SIZE, 999], len(a)), a)


def rollout(env, seed, steps, pin=None):
    """Observations, rewards and flags of a rollout driven by actions drawn from the observed masks."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed, options=None if pin is None else {"task": pin})
    trace = []
    for _ in range(steps):
        a = masked_actions(rng, obs["action_mask"])
        obs, r, term, trunc, info = env.step(a)
        trace.append({**{k: as_np(v) for k, v in obs.items()}, "reward": as_np(r), "term": as_np(term),
                      "trunc": as_np(trunc), "invalid": as_np(info["invalid_action"])})
    return trace


def assert_same(t1, t2):
    assert len(t1) == len(t2)
    for step, (a, b) in enumerate(zip(t1, t2)):
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=f"{k} differs at step {step} (seed {SEED})")


def test_numpy_and_torch_outputs_agree():
    n = 12
    np_env = SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=24)
    t_env = SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=24, device="cpu")
    obs, _ = t_env.reset(seed=1)
    assert all(isinstance(v, torch.Tensor) for v in obs.values())
    obs, _ = np_env.reset(seed=1)
    assert all(isinstance(v, np.ndarray) for v in obs.values())
    assert np_env.observation_space.contains(obs)
    assert_same(rollout(np_env, SEED, 60), rollout(t_env, SEED, 60))


def test_tasks_are_a_hash_of_seed_env_and_episode():
    env = torch.arange(4096)
    a = hash_tasks(7, env, torch.zeros_like(env), 68)
    np.testing.assert_array_equal(a, hash_tasks(7, env, torch.zeros_like(env), 68))
    assert (a != hash_tasks(8, env, torch.zeros_like(env), 68)).float().mean() > 0.9
    assert (a != hash_tasks(7, env, torch.ones_like(env), 68)).float().mean() > 0.9
    counts = torch.bincount(a, minlength=68).float()
    expect = len(env) / 68
    chi2 = float(((counts - expect) ** 2 / expect).sum())
    assert chi2 < 140, chi2  # 67 degrees of freedom: p < 1e-6 above this
    assert hash_tasks(-3, env, env, 5).min() >= 0 and hash_tasks(2**62 + 5, env, env, 5).max() < 5


def test_autoreset_draws_new_tasks_and_pins_hold():
    n = 64
    env = SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=16, device="cpu", batch=True)
    env.reset(seed=3)
    first = env.state.task.clone()
    bodies = torch.full((n, 16), V.END)
    env.step(bodies)          # every env finishes
    env.step(bodies)          # and is reset: its episode number moved on
    assert (env.state.task != first).any()
    env.reset(seed=3, options={"task": 2})
    env.step(bodies)
    env.step(bodies)
    assert (env.state.task == 2).all()
    with pytest.raises(ValueError, match="task ids"):
        env.reset(options={"task": len(BANK)})
    with pytest.raises(ValueError, match="one task id or 64"):
        env.reset(options={"task": [0, 1, 2]})


def test_batch_env_tensor_bodies_and_garbage():
    n = 8
    env = SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=16, device="cpu", batch=True)
    env.reset(seed=0, options={"task": BANK.tasks.index(next(t for t in BANK.tasks if t.name == "sum_list"))})
    bodies = torch.randint(-50, 200, (n, 40))
    obs, r, term, trunc, _ = env.step(bodies)
    assert r.dtype == torch.float32 and term.all() and not trunc.any()
    assert (r == -1.0).all()  # garbage does not compile


def test_neural_compile_numpy_and_torch_agree():
    n = 6
    rng = np.random.default_rng(SEED)
    acts = rng.integers(-2, NUM_ACTIONS + 2, size=(300, n))
    acts[rng.random(acts.shape) < 0.02] = 256
    out = []
    for device in (None, "cpu"):
        env = NeuralCompileVectorEnv(num_envs=n, bank=BANK, max_words=64, device=device)
        env.reset(seed=5)
        out.append([tuple(as_np(x) for x in env.step(a)[1:4]) for a in acts])
    for s, (a, b) in enumerate(zip(*out)):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y, err_msg=f"step {s}")


def test_compiler_token_slots_are_sync_free():
    """Every op of the scorer's token builder runs on the meta device (no data-dependent shape,
    no .item(), no boolean indexing), so on a GPU it never waits for the host."""
    n, L = 16, 24
    slots, count = BANK.compiler_token_slots(torch.zeros((n, L), dtype=torch.int64, device="meta"),
                                             torch.zeros(n, dtype=torch.int64, device="meta"),
                                             torch.zeros(n, dtype=torch.int64, device="meta"))
    assert slots.shape == (n, BANK.slot_size(L), 4) and count.shape == (n,)


def test_env_step_is_sync_free(monkeypatch):
    """The whole vector-env step and autoreset, the torch mask automaton included, run on the meta
    device. The scorer is the one part replaced (its GPU kernels are tested on a GPU)."""
    pytest.importorskip("vramgym.envs.grammar_torch")
    n = 32

    def fake_evaluate(bodies, lengths, task_ids, active=None):
        z = torch.zeros(bodies.shape[0], dtype=torch.int64, device=bodies.device)
        return z.bool(), z, z

    monkeypatch.setattr(BANK, "evaluate", fake_evaluate)
    for batch in (False, True):
        env = SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=16, device="meta", batch=batch, automaton="torch")
        obs, _ = env.reset(seed=0)
        shape = (n, 16) if batch else (n,)
        for _ in range(3):
            obs, r, term, trunc, info = env.step(torch.zeros(shape, dtype=torch.int64, device="meta"))
        assert r.device.type == "meta" and r.shape == (n,)
        if not batch:
            assert obs["action_mask"].shape == (n, V.VOCAB_SIZE)


def test_torch_automaton_env_equals_numpy_automaton_env():
    pytest.importorskip("vramgym.envs.grammar_torch")
    n = 24
    a = SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=20, device="cpu", automaton="numpy")
    b = SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=20, device="cpu", automaton="torch")
    assert_same(rollout(a, SEED, 80), rollout(b, SEED, 80))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
@pytest.mark.parametrize("batch", [False, True])
def test_gpu_env_equals_cpu_env(batch):   # cuda_graph=True: tests/test_step_graph.py
    n = 512
    cpu = SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=24, device="cpu", batch=batch)
    gpu = SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=24, device="cuda", batch=batch)
    if not batch:
        assert_same(rollout(cpu, SEED, 100), rollout(gpu, SEED, 100))
        return
    rng = np.random.default_rng(SEED)
    for env in (cpu, gpu):
        env.reset(seed=SEED)
    for _ in range(6):
        bodies = torch.from_numpy(rng.integers(0, V.VOCAB_SIZE, (n, 24)))
        outs = [e.step(bodies.to(e.device)) for e in (cpu, gpu)]
        for x, y in zip(outs[0][1:4], outs[1][1:4]):
            np.testing.assert_array_equal(as_np(x), as_np(y))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
def test_gpu_env_step_does_not_sync():   # cuda_graph=True: tests/test_step_graph.py
    """torch's sync debug mode raises on any synchronizing CUDA call inside step."""
    n = 1024
    env = SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=24, device="cuda")
    obs, _ = env.reset(seed=0)
    gen = torch.Generator(device="cuda").manual_seed(0)
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(40):
            m = obs["action_mask"].float()
            a = torch.multinomial(m, 1, generator=gen)[:, 0]
            obs, r, term, trunc, info = env.step(a)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
def test_gpu_neural_compile_equals_cpu_and_does_not_sync():
    from vramgym.envs.neural_compile import bytecode_actions
    n = 64
    envs = [NeuralCompileVectorEnv(num_envs=n, bank=BANK, max_words=64, device=d) for d in ("cpu", "cuda")]
    for e in envs:
        e.reset(seed=SEED, options={"task": torch.arange(n) % len(BANK)})
    # each env writes its task's reference bytecode (reward 11), some with a byte changed
    scripts = [bytecode_actions(BANK.tasks[i % len(BANK)].program.code) for i in range(n)]
    rng = np.random.default_rng(SEED)
    for s in scripts[::3]:
        s[int(rng.integers(len(s) - 1))] = int(rng.integers(256))
    T = max(len(s) for s in scripts)
    acts = torch.as_tensor(np.array([s + [256] * (T - len(s)) for s in scripts]).T)
    acts = {e.device.type: acts.to(e.device) for e in envs}       # copied before the no-sync part
    torch.cuda.set_sync_debug_mode("error")
    try:
        outs = [[e.step(a)[1:4] for a in acts[e.device.type]] for e in envs]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for step, (a, b) in enumerate(zip(*outs)):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(as_np(x), as_np(y), err_msg=f"step {step}")
    total = sum(as_np(o[0]) for o in outs[0])
    assert (total[1::3] == 11).all()


@pytest.mark.parametrize("env_id", ["vramgym/Synthesis-v0", "vramgym/SynthesisBatch-v0", "vramgym/NeuralCompile-v0"])
def test_make_vec_takes_a_device(env_id):
    import gymnasium as gym
    import vramgym.envs  # noqa: F401
    kw = {"bank": BANK}
    t = gym.make_vec(env_id, num_envs=3, vectorization_mode="vector_entry_point", device="cpu", **kw)
    n = gym.make_vec(env_id, num_envs=3, vectorization_mode="vector_entry_point", **kw)
    ot, _ = t.reset(seed=4)
    on, _ = n.reset(seed=4)
    assert all(isinstance(v, torch.Tensor) for v in ot.values())
    assert all(isinstance(v, np.ndarray) for v in on.values()) and n.observation_space.contains(on)
    for k in on:
        np.testing.assert_array_equal(ot[k].numpy(), on[k])
    with pytest.raises((RuntimeError, ValueError)):
        gym.make_vec(env_id, num_envs=0, vectorization_mode="vector_entry_point", **kw)


@pytest.mark.skipif(HAS_CUDA, reason="a GPU is present")
def test_cuda_device_without_a_gpu_is_a_clear_error():
    with pytest.raises(RuntimeError, match="no CUDA device"):
        SynthesisVectorEnv(num_envs=2, bank=BANK, device="cuda")


@pytest.mark.parametrize("kind", ["token", "batch", "neural_compile"])
@pytest.mark.parametrize("n", [1, 40])
def test_cpu_shortcuts_equal_the_device_path(kind, n):
    """On the CPU a step skips what it can see is not needed (scoring where no program ends, the
    autoreset where no env restarts) and takes the native token step and mask; with the core's
    cpu_shortcuts off it runs the device path's ops. Both give the same rollouts, pinned tasks
    included, and rewards stay float32 whether a step scores or not (a float64 reward too)."""
    from vramgym.envs.reward import NeuralCompileReward, SynthesisReward
    from test_step_graph import drive, reset_all

    class F64(NeuralCompileReward if kind == "neural_compile" else SynthesisReward):
        def __call__(self, *scores):
            return super().__call__(*scores).double()

    def make(reward=None):
        if kind == "neural_compile":
            return NeuralCompileVectorEnv(num_envs=n, bank=BANK, max_words=32, device="cpu", reward=reward)
        return SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=14, device="cpu", batch=kind == "batch",
                                  reward=reward)
    envs = [make(), make()]
    envs[1].core.cpu_shortcuts = False
    rng = np.random.default_rng(SEED)
    steps = 300 if kind == "neural_compile" else 60   # (its random episodes run to 128 bytes)
    _, ended = drive(envs, reset_all(envs, seed=SEED), rng, steps, batch=kind == "batch", widths=(14, 5))
    drive(envs, reset_all(envs, seed=SEED, options={"task": rng.integers(0, len(BANK), n)}), rng, 30,
          batch=kind == "batch")
    assert ended > 0
    env = make(F64())
    obs, _ = env.reset(seed=SEED)
    dtypes = set()
    for _ in range(30):
        a = (rng.integers(-1, NUM_ACTIONS + 1, n) if kind == "neural_compile" else
             rng.integers(0, V.VOCAB_SIZE, (n, 14)) if kind == "batch" else masked_actions(rng, obs["action_mask"]))
        obs, r, *_ = env.step(torch.as_tensor(a))
        dtypes.add(r.dtype)
    assert dtypes == {torch.float32}
