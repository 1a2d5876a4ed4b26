"""The single envs' and the CPU step's cheaper paths against the plain ones: every observation
field of a single env equals the vector env's row and is the caller's own copy; observe(copy=False)
(cached field views of a reused buffer) equals observe() across steps, task changes, pickles and
copies; the int fast path of as_actions reads ints as the array path does."""
import copy
import os
import pickle

import gymnasium as gym
import numpy as np
import pytest
import torch

import vramgym.envs
from vramgym.envs.bank import TaskBank
from vramgym.envs.vector import as_actions
from test_envs import policy as action   # a random action, masked where the env has a mask

SEED = int(os.environ.get("VRAMGYM_SEED", np.random.SeedSequence().entropy % 2**32))
TASKS = ["sum_list", "gcd", "reverse_list", "max_list", "count_evens", "digit_sum"]
BANK = TaskBank.from_names(TASKS, n_tests=8)
IDS = ["vramgym/Synthesis-v0", "vramgym/SynthesisBatch-v0", "vramgym/NeuralCompile-v0"]


@pytest.mark.parametrize("env_id", IDS)
def test_single_env_observations_equal_the_vector_envs_rows_field_for_field(env_id):
    n = 3
    tasks = (np.arange(n) * 2) % len(TASKS)
    vec = gym.make_vec(env_id, num_envs=n, vectorization_mode="vector_entry_point", bank=BANK)
    vobs, _ = vec.reset(seed=0, options={"task": tasks})
    singles = [gym.make(env_id, bank=BANK) for _ in range(n)]
    obs = [env.reset(seed=0, options={"task": int(t)})[0] for env, t in zip(singles, tasks)]
    pending = np.zeros(n, bool)
    rng = np.random.default_rng(SEED)
    for _ in range(70):
        acts = np.stack([action(rng, singles[0].action_space, o) for o in obs])
        vobs, vr, vt, vu, vinfo = vec.step(acts)
        for i, env in enumerate(singles):
            if pending[i]:
                o, _ = env.reset(options={"task": int(tasks[i])})
                r, t, u, bad = 0.0, False, False, False
            else:
                o, r, t, u, info = env.step(acts[i])
                bad = info.get("invalid_action", False)
            assert isinstance(r, float) and type(t) is bool and type(u) is bool
            assert r == pytest.approx(vr[i]) and t == vt[i] and u == vu[i] and bad == vinfo["invalid_action"][i]
            assert o.keys() == vobs.keys()
            for k in o:
                assert o[k].dtype == vobs[k].dtype and o[k].shape == vobs[k].shape[1:], k
                np.testing.assert_array_equal(o[k], vobs[k][i], err_msg=k)
            assert singles[i].observation_space.contains(o)
            obs[i] = o
            pending[i] = t or u


@pytest.mark.parametrize("env_id", IDS)
def test_single_env_observations_are_the_callers_own(env_id):
    """The single env observes the state's own buffers (observe(copy=False)) and copies row 0 out:
    what it returned must neither change with later steps nor reach the env when written to."""
    env = gym.make(env_id, bank=BANK)
    rng = np.random.default_rng(SEED)
    obs, _ = env.reset(seed=1)
    kept = []
    for _ in range(30):
        kept.append((obs, {k: v.copy() for k, v in obs.items()}))
        obs, r, term, trunc, _ = env.step(action(rng, env.action_space, obs))
        if term or trunc:
            obs, _ = env.reset()
    for o, snapshot in kept:
        for k in o:
            assert o[k].base is None or not isinstance(o[k].base, torch.Tensor), k
            np.testing.assert_array_equal(o[k], snapshot[k], err_msg=k)
    # scribbling over an observation leaves the next one as the state says
    obs, _ = env.reset(seed=2, options={"task": 1})
    again = {k: v.copy() for k, v in env.reset(seed=2, options={"task": 1})[0].items()}
    for v in obs.values():
        v[...] = 7
    for k, v in env.reset(seed=2, options={"task": 1})[0].items():
        np.testing.assert_array_equal(v, again[k], err_msg=k)


@pytest.mark.parametrize("env_id", ["vramgym/Synthesis-v0", "vramgym/SynthesisBatch-v0"])
def test_observe_without_copies_equals_observe_through_tasks_pickles_and_copies(env_id):
    """observe(copy=False) keeps views of its buffer's fields and makes them again for another
    buffer: a different env count, or a pickled or deep-copied state (whose views are their own
    storage's, not the buffer's)."""
    rng = np.random.default_rng(SEED)
    for n in (5, 2):
        vec = gym.make_vec(env_id, num_envs=n, vectorization_mode="vector_entry_point", bank=BANK, copy=False)
        core = vec.unwrapped.core
        obs, _ = vec.reset(seed=int(rng.integers(1 << 30)))
        for step in range(40):
            if step == 15:
                vec = pickle.loads(pickle.dumps(vec))
            if step == 25:
                vec = copy.deepcopy(vec)
            st = vec.unwrapped.state
            a = np.stack([action(rng, vec.single_action_space, {k: v[i] for k, v in obs.items()}) for i in range(n)])
            obs = vec.step(a)[0]
            plain = core.observe(st)
            shared = vec.unwrapped.core.observe(st, copy=False)
            for k in plain:
                np.testing.assert_array_equal(shared[k].numpy(), plain[k].numpy(), err_msg=f"{k} at step {step}")
                np.testing.assert_array_equal(obs[k], plain[k].numpy(), err_msg=k)
            if st.task_views is not None:   # the views are the buffer's own
                assert all(v._base is st.task_obs for v in st.task_views)
        # the task field tracks the task (a view made once must see each gather)
        np.testing.assert_array_equal(obs["kinds"], core._tables(torch.device("cpu"))["task_obs"].numpy()[
            obs["task"], : obs["kinds"].shape[1]])


INTS = [0, 1, 72, 73, -1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**70]
NP_INTS = [np.int8(-3), np.int32(5), np.uint8(200), np.int64(-(2**63)), np.uint64(2**63 - 1), np.uint64(2**64 - 1)]


@pytest.mark.parametrize("x", INTS + NP_INTS, ids=repr)
def test_the_int_fast_path_of_as_actions_reads_as_the_array_path(x):
    fast = as_actions(x, torch.device("cpu"))
    slow = as_actions(np.array([x], dtype=object if isinstance(x, int) else np.asarray(x).dtype), torch.device("cpu"))
    assert fast.dtype == torch.int64 and fast.shape == ()
    assert int(fast) == int(slow[0])
    assert int(fast) == (int(x) if -(2**63) <= int(x) < 2**63 else -1)


def test_bools_and_floats_still_take_the_array_path():
    cpu = torch.device("cpu")
    for td in (np.timedelta64(4, "ns"), np.timedelta64(4, "s")):   # an np.integer, but no int
        with pytest.raises(TypeError, match="actions must be ints"):
            as_actions(td, cpu)
    assert int(as_actions(True, cpu)) == 1 and int(as_actions(np.bool_(False), cpu)) == 0
    assert int(as_actions(4.0, cpu)) == 4 and int(as_actions(4.5, cpu)) == -1
    with pytest.raises(TypeError, match="actions must be ints"):
        as_actions("3", cpu)


def test_bank_evaluate_reads_any_int_layout_and_checks_active_task_ids():
    """TaskBank.evaluate's CPU path reads the tensors' memory through numpy: int32 and strided
    (non-contiguous) inputs score as int64 contiguous ones, repeats and inactive rows included;
    inactive rows may hold any task id, active ones may not."""
    from vramgym.envs import vocab as V
    env = gym.make("vramgym/Synthesis-v0", bank=BANK)
    rng = np.random.default_rng(SEED)
    bodies, tasks = [], []
    for _ in range(12):   # masked rollouts: programs that compile, pass some tests or trap
        obs, _ = env.reset(seed=int(rng.integers(1 << 30)))
        done = False
        while not done:
            obs, r, t, u, _ = env.step(action(rng, env.action_space, obs))
            done = t or u
        bodies.append(obs["tokens"])
        tasks.append(int(obs["task"]))
    b = np.stack(bodies + bodies[:4])                       # repeats run once, scored alike
    lens = np.array([np.argmax(x == V.END) if (x == V.END).any() else len(x) for x in b])
    tk = np.array(tasks + tasks[:4])
    active = rng.random(len(b)) < 0.8
    active[0], active[1] = True, False   # (one inactive row at least: its odd task id below)
    want = [x.numpy() for x in BANK.evaluate(torch.from_numpy(b), torch.from_numpy(lens), torch.from_numpy(tk),
                                             torch.from_numpy(active))]
    assert want[0].any(), "no compiled program: the comparison below would be empty"
    # int32, strided (every other column of a wider array), the same values
    wide = np.zeros((len(b), 2 * b.shape[1]), np.int32)
    wide[:, ::2] = b
    strided = torch.from_numpy(wide)[:, ::2]
    assert not strided.is_contiguous()
    odd_tasks = np.where(active, tk, 999)                  # inactive rows: any task id
    got = [x.numpy() for x in BANK.evaluate(strided, torch.from_numpy(lens.astype(np.int32)),
                                            torch.from_numpy(odd_tasks.astype(np.int16)), torch.from_numpy(active))]
    for g, w, what in zip(got, want, ("compiled", "passed", "steps")):
        np.testing.assert_array_equal(g, w, err_msg=what)
        assert not g[~active].any()
    # each row alone gives what it gave in the batch
    for i in np.flatnonzero(active)[:6]:
        one = [x.numpy()[0] for x in BANK.evaluate(*(torch.from_numpy(a[i:i + 1]) for a in (b, lens, tk)))]
        assert one == [w[i] for w in want]
    with pytest.raises(ValueError, match=r"task_ids of active rows must be in \[0, 6\)"):
        BANK.evaluate(torch.from_numpy(b), torch.from_numpy(lens), torch.from_numpy(odd_tasks), None)


def test_token_slots_cpu_refuses_arrays_it_would_misread():
    """The library reads token_slots_cpu's arrays by address: a wrong dtype, shape or layout is a
    ValueError, never a read or write past an array."""
    from vramgym.envs import grammar_native
    from vramgym.envs.token_slots import token_slots_cpu
    if not grammar_native.available():
        pytest.skip("the native library is not built")
    n, L = 3, 10
    S = BANK.slot_size(L)
    good = dict(bodies=np.zeros((n, L), np.int64), lengths=np.zeros(n, np.int64), task_ids=np.zeros(n, np.int64),
                active=None, slots=np.zeros((n, S, 4), np.int32), count=np.zeros(n, np.int64))
    token_slots_cpu(BANK, **good)
    assert (good["count"] > 0).all()
    bad = [("bodies", np.zeros((n, L), np.int32)), ("bodies", np.zeros((n, 2 * L), np.int64)[:, ::2]),
           ("lengths", np.zeros(n + 1, np.int64)), ("task_ids", np.zeros(n, np.int32)),
           ("slots", np.zeros((n, S - 1, 4), np.int32)), ("slots", np.zeros((n, S, 4), np.int64)),
           ("count", np.zeros(n - 1, np.int64)), ("active", np.ones(n, np.int8)), ("active", np.ones(n + 1, bool)),
           ("slots", np.frombuffer(bytes(n * S * 16), np.int32).reshape(n, S, 4)),          # read-only
           ("count", np.frombuffer(bytes(8 * n), np.int64)),
           ("lengths", np.zeros(8 * n + 1, np.uint8)[1:].view(np.int64))]                  # misaligned
    for name, value in bad:
        with pytest.raises(ValueError, match="token_slots_cpu: expected"):
            token_slots_cpu(BANK, **{**good, name: value})


@pytest.mark.parametrize("env_id", IDS)
def test_a_single_env_pickled_by_an_older_version_still_steps(env_id):
    """The single env's fixed restart row (session 33) is made again for a pickle without it."""
    env = gym.make(env_id, bank=BANK)
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(SEED)
    a = action(rng, env.action_space, obs)
    twin = pickle.loads(pickle.dumps(env))
    del vars(twin.unwrapped)["_restart"]
    old = pickle.loads(pickle.dumps(twin))
    out, out_old = env.step(a), old.step(a)
    for k in out[0]:
        np.testing.assert_array_equal(out[0][k], out_old[0][k], err_msg=k)
    assert out[1:4] == out_old[1:4]


@pytest.mark.parametrize("odd", ["grad", "negative_bit"])
def test_rewards_that_numpy_cannot_view_score_the_token_env(odd):
    """The native token step makes its rewards in numpy: a reward tensor with grad, or a view with
    the negative bit set (a valid real tensor), scores as the plain one."""
    from vramgym.envs.reward import SynthesisReward

    class Odd(SynthesisReward):
        def __call__(self, scores):
            r = super().__call__(scores)
            return r.requires_grad_() if odd == "grad" else torch.complex(0 * r, -r).conj().imag

    env, plain = gym.make("vramgym/Synthesis-v0", bank=BANK, reward=Odd()), gym.make("vramgym/Synthesis-v0", bank=BANK)
    rng = np.random.default_rng(SEED)
    obs, _ = env.reset(seed=5)
    plain.reset(seed=5)
    ended = False
    while not ended:
        a = action(rng, env.action_space, obs)
        obs, r, t, u, _ = env.step(a)
        assert r == plain.step(a)[1]
        ended = t or u


def test_observations_without_copies_are_fresh_views_each_step():
    """copy=False shares the buffers, not the tensor objects: a view op in place on one step's
    per-task field (transpose_, unsqueeze_) leaves the next step's observation as it should be."""
    vec = gym.make_vec("vramgym/Synthesis-v0", num_envs=2, vectorization_mode="vector_entry_point", bank=BANK,
                       device="cpu", copy=False)
    obs, _ = vec.reset(seed=0)
    shapes = {k: tuple(v.shape) for k, v in obs.items()}
    obs["examples"].transpose_(1, 2)
    obs["kinds"].unsqueeze_(0)
    obs["ret_kind"].unsqueeze_(1)
    nxt = vec.step(torch.as_tensor((torch.rand(obs["action_mask"].shape) + obs["action_mask"]).argmax(1)))[0]
    assert {k: tuple(v.shape) for k, v in nxt.items()} == shapes
    assert all(nxt[k] is not obs[k] for k in ("kinds", "ret_kind", "examples", "outputs"))
