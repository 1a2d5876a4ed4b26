"""Bad input to the environments: actions, constructor arguments, seeds and task ids get a
TypeError/ValueError that names the argument (RuntimeError for a single env's step before reset,
or after its episode ended), or a documented outcome (an invalid action); never a silent
truncation or an ignored argument."""
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

import vramgym.envs
from vramgym.envs import vocab as V
from vramgym.envs.bank import TaskBank
from vramgym.envs.neural_compile import END as NC_END, NeuralCompileVectorEnv
from vramgym.envs.synthesis import SynthesisVectorEnv

TASKS = ["gcd", "sum_list"]
BANK = TaskBank.from_names(TASKS, n_tests=4)
SYN, BATCH, NC = vramgym.envs.ENV_IDS
TOKEN_IDS = [SYN, NC]   # one action per step, with invalid_action
SUM_LIST = V.encode(r"v0 = 0 \n for v1 in <P0> : \n <INDENT> v0 += v1 \n <DEDENT> return v0 \n <END>")


def make(env_id, **kw):
    return gym.make(env_id, **{"bank": BANK, **kw})


def make_vec(env_id, n=3, **kw):
    return gym.make_vec(env_id, num_envs=n, vectorization_mode="vector_entry_point", **{"bank": BANK, **kw})


def penalty(env_id, env):
    return 0.0 if env_id == NC else env.unwrapped.core.reward.compile_penalty


def first_allowed(env_id, obs):
    """A valid action of each env (the first one the mask allows; NeuralCompile: any byte)."""
    if env_id == NC:
        return np.full(np.shape(obs["task"]), 7)
    return np.asarray(obs["action_mask"]).argmax(-1)


# ---- W5: non-integer actions are invalid, never truncated ---------------------------------------

@pytest.mark.parametrize("env_id", TOKEN_IDS)
@pytest.mark.parametrize("bad", [0.9, 0.5, np.nan, np.inf, -np.inf])
def test_single_env_non_integral_float_action_is_invalid(env_id, bad):
    env = make(env_id)
    obs, _ = env.reset(seed=0)
    a = int(first_allowed(env_id, obs))
    obs, r, term, trunc, info = env.step(a + bad)   # int(a + 0.9) == a would be a valid action
    assert info["invalid_action"] and term and r == penalty(env_id, env)
    assert obs["length"] == 0   # nothing was written
    obs, _ = env.reset(seed=0)
    obs, r, term, trunc, info = env.step(float(a))   # an integral float is that int
    assert not info["invalid_action"] and obs["length"] == 1


@pytest.mark.parametrize("env_id", TOKEN_IDS)
def test_vector_env_non_integral_float_actions_are_invalid(env_id):
    vec = make_vec(env_id, n=4)
    obs, _ = vec.reset(seed=0)
    a = first_allowed(env_id, obs).astype(np.float64)
    a[1] += 0.9
    a[2] = np.nan
    a[3] = torch.finfo(torch.float32).max   # a float no int64 holds
    obs, r, term, trunc, info = vec.step(a)
    np.testing.assert_array_equal(info["invalid_action"], [False, True, True, True])
    assert np.all(r[1:] == penalty(env_id, vec)) and term[1:].all()
    np.testing.assert_array_equal(obs["length"], [1, 0, 0, 0])
    # float32 tensors take the same path
    obs, _ = vec.reset(seed=0)
    t = torch.as_tensor(first_allowed(env_id, obs), dtype=torch.float32) + torch.tensor([0.0, 0.25, 0.0, 0.0])
    assert vec.step(t)[4]["invalid_action"].tolist() == [False, True, False, False]


@pytest.mark.parametrize("env_id", TOKEN_IDS)
def test_float16_actions_take_the_same_path_without_warnings(env_id):
    """(2.0**62, the bound that keeps the cast defined, is inf in float16: numpy warned of an
    overflow on every step with float16 actions.)"""
    vec = make_vec(env_id, n=3)
    obs, _ = vec.reset(seed=0)
    a = first_allowed(env_id, obs).astype(np.float16)
    a[1] += np.float16(0.5)
    a[2] = np.frombuffer(np.uint16(0x7E00).tobytes(), np.float16)[0]  # NaN, made without a cast
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        info = vec.step(a)[4]
    assert info["invalid_action"].tolist() == [False, True, True]


@pytest.mark.parametrize("env_id", TOKEN_IDS)
@pytest.mark.parametrize("huge", [2**63, 2**70, -(2**70), np.uint64(2**64 - 1)])
def test_ints_past_int64_are_invalid_not_errors(env_id, huge):
    env = make(env_id)
    env.reset(seed=0)
    obs, r, term, trunc, info = env.step(huge)
    assert info["invalid_action"] and term and r == penalty(env_id, env)


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
@pytest.mark.parametrize("bad", ["3", None, 1 + 2j])
def test_non_numeric_actions_raise_type_error(env_id, bad):
    env, vec = make(env_id), make_vec(env_id, n=2)
    env.reset(seed=0)
    vec.reset(seed=0)
    with pytest.raises(TypeError, match="actions must be ints"):
        env.step(bad)
    with pytest.raises(TypeError, match="actions must be ints"):
        vec.step([bad, bad])


def test_batch_env_float_token_ends_the_body_like_an_out_of_range_one():
    vec = make_vec(BATCH, n=4)
    vec.reset(seed=0, options={"task": TASKS.index("sum_list")})
    good = np.full(20, V.END)
    good[: len(SUM_LIST)] = SUM_LIST
    cut = good.copy()
    cut[3] = -1                                  # out of range: the body ends there
    floats = np.stack([good, good, good, cut]).astype(np.float64)
    floats[2, 3] += 0.5                          # not an int: the same as -1, not SUM_LIST[3]
    _, r, _, _, info = vec.step(floats)
    assert r[0] > 1.5 and r[1] == r[0]           # integral floats are their ints
    assert r[2] == r[3] < r[0]
    assert not info["invalid_action"].any()      # documented: the batch env never flags an action


@pytest.mark.parametrize("vector", [False, True])
def test_batch_env_observes_the_body_end_padded_past_its_end(vector):
    """The tokens after a body's first END (or out-of-range id) are ignored when it is scored, and
    the observation shows them as END, as SynthesisState documents (they were kept as given)."""
    L = 12
    rng = np.random.default_rng(5)
    bodies = rng.integers(0, V.VOCAB_SIZE, (6, 9))
    bodies[0, 2], bodies[1, 0], bodies[2, 4] = V.END, V.END, -1
    bodies[3:, :] = np.where(bodies[3:] == V.END, 4, bodies[3:])   # no END: the whole width is the body
    bodies[4, 5] = V.VOCAB_SIZE
    if vector:
        vec = make_vec(BATCH, n=6, max_len=L)
        vec.reset(seed=0)
        obs = vec.step(bodies)[0]
    else:
        env = make(BATCH, max_len=L)
        rows = []
        for b in bodies:
            env.reset(seed=0)
            rows.append(env.step(b)[0])
        obs = {k: np.stack([o[k] for o in rows]) for k in ("tokens", "length")}
    for i, b in enumerate(bodies):
        ends = np.flatnonzero((b == V.END) | (b < 0) | (b >= V.VOCAB_SIZE))
        n = ends[0] if len(ends) else len(b)
        want = np.full(L, V.END)
        want[:n] = b[:n]
        np.testing.assert_array_equal(obs["tokens"][i], want, err_msg=f"body {b}")
        assert obs["length"][i] == n + 1   # (the END counted: given, or implied before max_len)


# ---- W5: task ids and seeds must be ints ----------------------------------------------------------

@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_single_env_task_id_must_be_an_int(env_id):
    env = make(env_id)
    for bad in (1.9, 1.0, "1", None, [1]):
        with pytest.raises(TypeError, match=r"options\['task'\] must be an int"):
            env.reset(options={"task": bad})
    with pytest.raises(ValueError, match=r"options\['task'\] must be in 0\.\.1, got 2"):
        env.reset(options={"task": 2})
    assert env.reset(options={"task": np.int64(1)})[0]["task"] == 1


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_vector_env_task_ids_must_be_ints_of_one_or_n(env_id):
    vec = make_vec(env_id, n=2)
    for bad in (1.9, [0.0, 1.0], "x"):
        with pytest.raises(TypeError, match=r"options\['task'\] must be int task ids"):
            vec.reset(options={"task": bad})
    for bad in ([[0, 1], [1, 0]], [0, 1, 1], [], np.zeros(0, np.int64)):   # not flattened, not cut; [] is no float
        with pytest.raises(ValueError, match=r"options\['task'\] must be one task id or 2 \(shape \(2,\)\)"):
            vec.reset(options={"task": bad})
    assert vec.reset(options={"task": [1, 0]})[0]["task"].tolist() == [1, 0]
    assert vec.reset(options={"task": torch.tensor(1)})[0]["task"].tolist() == [1, 1]


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
@pytest.mark.parametrize("vector", [False, True])
def test_seeds_are_non_negative_ints_below_2_64(env_id, vector):
    env = make_vec(env_id, n=2) if vector else make(env_id)
    with pytest.raises(TypeError, match="seed must be an int"):
        env.reset(seed=1.5)
    with pytest.raises(ValueError, match="seed must be >= 0, got -1"):
        env.reset(seed=-1)
    with pytest.raises(ValueError, match=r"seed must be below 2\*\*64"):
        env.reset(seed=2**80)   # would repeat seed 2**80 % 2**64's tasks
    env.reset(seed=np.int64(5))
    env.reset(seed=2**64 - 1)
    with pytest.raises(ValueError, match="seed must be >= 0"):
        gym.make(env_id, tasks=["gcd"], n_tests=4, seed=-1)


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
@pytest.mark.parametrize("vector", [False, True])
def test_reset_options_are_a_dict_with_task_only(env_id, vector):
    """Found by an audit: options={"tasks": 1} pinned nothing, silently; a str gave 'string
    indices must be integers'."""
    env = make_vec(env_id, n=2) if vector else make(env_id)
    with pytest.raises(ValueError, match="unknown reset option\\(s\\) 'tasks': the only one is 'task'"):
        env.reset(seed=0, options={"tasks": 1})
    for bad in ("task", [("task", 1)], 3):
        with pytest.raises(TypeError, match="options must be a dict or None"):
            env.reset(seed=0, options=bad)
    np.testing.assert_array_equal(env.reset(seed=5, options={})[0]["task"], env.reset(seed=5)[0]["task"])
    assert np.all(env.reset(seed=5, options={"task": 1})[0]["task"] == 1)


def test_failed_reset_changes_nothing():
    vec = make_vec(SYN, n=2)
    obs, _ = vec.reset(seed=3)
    with pytest.raises(ValueError):
        vec.reset(seed=9, options={"task": 7})
    assert vec._seed == 3
    twin = make_vec(SYN, n=2)
    twin.reset(seed=3)
    np.testing.assert_array_equal(vec.reset()[0]["task"], twin.reset()[0]["task"])


@pytest.mark.parametrize("env_id", [SYN, "vramgym/SynthesisBatch-v0", "vramgym/NeuralCompile-v0"])
def test_reset_without_a_seed_samples_new_tasks(env_id):
    """reset() without a seed started the last seed's stream over: the same tasks after every
    reset. It goes on sampling (Gymnasium's seed=None), like the single envs; reset(seed=s)
    replays s's stream, and a first reset without a seed is the constructor's seed."""
    vec = make_vec(env_id, n=64)
    first = vec.reset()[0]["task"].copy()
    np.testing.assert_array_equal(first, make_vec(env_id, n=64).reset(seed=0)[0]["task"])
    seen = [vec.reset()[0]["task"].copy() for _ in range(3)]
    for a, b in zip([first] + seen, seen):
        assert (a != b).mean() > 0.5, (a, b)
    np.testing.assert_array_equal(vec.reset(seed=0)[0]["task"], first)
    np.testing.assert_array_equal(vec.reset()[0]["task"], seen[0])   # and the stream goes on alike


# ---- W6: one body per env, one action per env -----------------------------------------------------

@pytest.mark.parametrize("shape", [(6, 20), (3,), (3, 20, 2), (3, 0), (1, 20)])
def test_batch_vector_env_takes_exactly_n_bodies(shape):
    vec = make_vec(BATCH, n=3)
    vec.reset(seed=0)
    with pytest.raises(ValueError, match=r"actions must be 3 bodies, shape \(3, L\) with L >= 1, got shape"):
        vec.step(np.full(shape, V.END))
    vec.step(np.full((3, 60), V.END))   # longer or shorter than max_len is fine (documented)
    vec.step(np.full((3, 5), V.END))


@pytest.mark.parametrize("shape", [(0,), (), (2, 20), (1, 20)])
def test_single_batch_env_takes_one_body(shape):
    env = make(BATCH)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"one body expected, shape \(L,\) with L >= 1, got shape"):
        env.step(np.full(shape, V.END))


@pytest.mark.parametrize("env_id", TOKEN_IDS)
@pytest.mark.parametrize("shape", [(2, 2), (3,), (5,), (0,), (), (4, 2)])
def test_token_vector_env_takes_one_action_per_env(env_id, shape):
    vec = make_vec(env_id, n=4)
    vec.reset(seed=0)
    with pytest.raises(ValueError, match=r"actions must have shape \(4,\) \(one action per env\)"):
        vec.step(np.zeros(shape, np.int64))


@pytest.mark.parametrize("env_id", TOKEN_IDS)
def test_token_vector_env_takes_n_by_1_actions_as_n(env_id):
    a, b = make_vec(env_id, n=4), make_vec(env_id, n=4)
    obs, _ = a.reset(seed=0)
    b.reset(seed=0)
    acts = first_allowed(env_id, obs)
    acts[0] = -1
    oa, ra, ta, _, ia = a.step(acts)
    ob, rb, tb, _, ib = b.step(acts[:, None])
    np.testing.assert_array_equal(ra, rb)
    np.testing.assert_array_equal(ia["invalid_action"], ib["invalid_action"])
    np.testing.assert_array_equal(oa["length"], ob["length"])


# ---- W7: no accepted-and-ignored constructor arguments --------------------------------------------

@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_vector_envs_reject_max_episode_steps(env_id):
    with pytest.raises(ValueError, match="max_episode_steps is not supported by the vector envs"):
        make_vec(env_id, max_episode_steps=2)


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_backend_must_be_known_and_match_where_the_env_scores(env_id):
    with pytest.raises(ValueError, match="backend must be 'cpu', 'cuda' or 'auto', got 'tpu'"):
        make(env_id, backend="tpu")
    with pytest.raises(ValueError, match="backend must be 'cpu', 'cuda' or 'auto', got 'tpu'"):
        make_vec(env_id, backend="tpu")
    with pytest.raises(ValueError, match="backend='cuda', but this env scores on cpu"):
        make(env_id, backend="cuda")
    with pytest.raises(ValueError, match="backend='cuda', but this env scores on cpu"):
        make_vec(env_id, backend="cuda", device="cpu")
    make(env_id, backend="cpu")   # kept for compatibility where it agrees
    make_vec(env_id, backend="auto")


def test_task_bank_rejects_unknown_backend():
    with pytest.raises(ValueError, match="backend must be"):
        TaskBank.from_names(["gcd"], n_tests=4, backend="tpu")


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_empty_tasks_is_an_error_not_every_task(env_id):
    with pytest.raises(ValueError, match="tasks is empty: an env needs at least one task"):
        gym.make(env_id, tasks=[], n_tests=4)
    with pytest.raises(ValueError, match="at least one task"):
        TaskBank.from_names([], n_tests=4)


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
@pytest.mark.parametrize("vector", [False, True])
def test_render_mode_must_be_none_or_ansi(env_id, vector):
    with pytest.raises(ValueError, match="render_mode must be None or 'ansi', got 'human'"):
        make_vec(env_id, render_mode="human") if vector else make(env_id, render_mode="human")


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_copy_must_be_a_bool(env_id):
    with pytest.raises(TypeError, match="copy must be a bool, got 'no'"):
        make_vec(env_id, copy="no")


# ---- W8: step before reset -------------------------------------------------------------------------

@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_step_before_reset_raises(env_id):
    vec = make_vec(env_id, n=2)
    a = np.full((2, 8), V.END) if env_id == BATCH else np.zeros(2, np.int64)
    with pytest.raises(RuntimeError, match=r"call reset\(\) before step\(\)"):
        vec.step(a)
    env = make(env_id).unwrapped   # gym.make's OrderEnforcing wrapper raises on its own
    with pytest.raises(RuntimeError, match=r"call reset\(\) before step\(\)"):
        env.step(a[0])
    vec.reset(seed=0)
    vec.step(a)


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_single_env_refuses_a_step_after_its_episode_ended(env_id):
    """The core would step the ended episode on (tokens past the end, the program scored again,
    NeuralCompile's length past its observation space): a clear error instead, until reset."""
    env = make(env_id)
    obs, _ = env.reset(seed=1)
    rng = np.random.default_rng(1)
    for t in range(2000):
        if env_id == BATCH:
            a = np.array([V.END])
        elif env_id == NC:
            a = np.int64(rng.integers(0, 256))
        else:
            a = np.int64((rng.random(V.VOCAB_SIZE) + obs["action_mask"]).argmax())
        obs, r, term, trunc, _ = env.step(a)
        if term or trunc:
            break
    assert term or trunc
    for _ in range(2):   # every later step, not just the first
        with pytest.raises(RuntimeError, match=r"episode has ended .* call reset\(\) before step\(\)"):
            env.step(a)
    assert env.observation_space.contains(obs)
    obs2, _ = env.reset(seed=1)
    env.step(a)   # a new episode steps again


# ---- U4: constructor errors that name the argument -------------------------------------------------

@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_vector_env_device_must_be_cpu_or_cuda(env_id):
    for bad in ("bogus", "CPU", "mps", "cuda:x"):
        with pytest.raises(ValueError, match=f"device must be None, 'cpu', 'cuda' or 'cuda:k'.*got '{bad}'"):
            make_vec(env_id, device=bad)
    for bad in (1.5, True, ["cpu"]):
        with pytest.raises(TypeError, match="device must be None, a str"):
            make_vec(env_id, device=bad)
    for good in ("cpu", torch.device("cpu")):
        vec = make_vec(env_id, device=good)
        assert vec.unwrapped.device == torch.device("cpu")


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
@pytest.mark.parametrize("vector", [False, True])
def test_a_given_bank_refuses_n_tests_as_it_refuses_fuel(env_id, vector):
    """n_tests (like fuel and tasks) builds the env's own bank; with bank= it was silently ignored,
    even below its minimum."""
    build = make_vec if vector else make
    for n in (2, 4, BANK.n_tests, 100):
        with pytest.raises(ValueError, match=f"n_tests applies to the envs' own bank.*n_tests={BANK.n_tests}"):
            build(env_id, n_tests=n)
    assert build(env_id).unwrapped.core.bank is BANK
    assert gym.make(env_id, tasks=["gcd"]).unwrapped.core.bank.n_tests == 16   # n_tests=None: the default

# ---- U4: constructor errors that name the argument -------------------------------------------------

@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_n_tests_error_names_n_tests_and_its_minimum(env_id):
    with pytest.raises(ValueError, match="n_tests must be >= 4, got 3"):
        gym.make(env_id, tasks=["gcd"], n_tests=3)
    with pytest.raises(TypeError, match="n_tests must be an int"):
        gym.make(env_id, tasks=["gcd"], n_tests=4.5)


def test_tasks_as_one_name():
    env = gym.make(SYN, tasks="gcd", n_tests=4)
    assert [t.name for t in env.unwrapped.core.bank.tasks] == ["gcd"]


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_bank_must_be_a_task_bank_and_excludes_tasks(env_id):
    with pytest.raises(TypeError, match="bank must be a TaskBank, got list"):
        gym.make(env_id, bank=[])
    with pytest.raises(ValueError, match="give bank= or tasks=, not both"):
        gym.make(env_id, bank=BANK, tasks=["gcd"])


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
@pytest.mark.parametrize("vector", [False, True])
def test_reward_must_be_callable_at_construction(env_id, vector):
    with pytest.raises(TypeError, match="reward must be callable"):
        make_vec(env_id, reward="x") if vector else make(env_id, reward="x")


@pytest.mark.parametrize("vector", [False, True])
def test_reward_of_the_other_env_is_refused_at_construction(vector):
    """A SynthesisReward takes one scores object, a NeuralCompileReward four arrays: each env
    refuses the other's when it is made (NeuralCompile-v0 used to fail at its first END)."""
    from vramgym.envs.reward import NeuralCompileReward, SynthesisReward
    nc, batch = NC, BATCH
    for env_id, reward in ((nc, SynthesisReward()), (batch, NeuralCompileReward()), (nc, lambda v, a: v)):
        with pytest.raises(TypeError, match="reward must take"):
            make_vec(env_id, reward=reward) if vector else make(env_id, reward=reward)
    make_vec(nc, reward=lambda *scores: scores[0] * 1.0) if vector else make(nc, reward=lambda v, a, s, r: v * 1.0)


def test_rewards_take_0d_numpy_scores():
    """numpy arithmetic on 0-d arrays gives numpy scalars, which the reward helpers took for
    torch tensors (AttributeError: no clamp)."""
    from vramgym.envs.reward import NeuralCompileReward, SynthesisReward
    r = NeuralCompileReward()
    one = r(np.array([True]), np.array([True]), np.array([5.0]), np.array([10.0]))
    assert float(r(np.array(True), np.array(True), np.array(5.0), np.array(10.0))) == float(one[0]) == 11.5


def test_neural_compile_source_len_is_an_argument():
    """The observation's source width: a longer reference used to be refused with no way to widen it."""
    from vramgym.envs.tasks import Task
    src = "def big(a: int) -> int:\n" + "".join(f"    x{i} = a + {i}\n" for i in range(60)) + "    return x59\n"
    bank = TaskBank([Task.from_reference("big", src, [{"kind": "int", "lo": -100, "hi": 100}])], n_tests=4)
    with pytest.raises(ValueError, match="more than source_len=256"):
        make("vramgym/NeuralCompile-v0", bank=bank)
    for env in (make("vramgym/NeuralCompile-v0", bank=bank, source_len=400),
                make_vec("vramgym/NeuralCompile-v0", bank=bank, source_len=400)):
        obs, _ = env.reset(seed=0)
        assert obs["source"].shape[-2] == 400
    with pytest.raises(ValueError, match="source_len"):
        make("vramgym/NeuralCompile-v0", bank=bank, source_len=0)


def test_rendering_refuses_fractional_actions_as_the_envs_do():
    """detokenize / to_compiler_tokens rebuild what the env scored: a non-integral float is out
    of range there (the env ends the body), so here it raises instead of rendering int(4.9) = 4."""
    sig = BANK.signatures[0]
    body = [V.ID["return"], V.NEWLINE]
    for bad in (4.9, float("nan"), float("inf"), torch.tensor(4.5)):
        for f in (V.detokenize, V.to_compiler_tokens):
            with pytest.raises(ValueError, match="not a whole number"):
                f([bad] + body[1:], sig)
    whole = [float(body[0]), np.float32(body[1])]
    assert V.detokenize(whole, sig) == V.detokenize(body, sig)
    assert np.array_equal(V.to_compiler_tokens(torch.tensor(body), sig), V.to_compiler_tokens(body, sig))


def test_token_env_reward_needs_a_compile_penalty():
    with pytest.raises(TypeError, match="with a compile_penalty"):
        make(SYN, reward=lambda scores: scores.pass_frac)
    make(BATCH, reward=lambda scores: scores.pass_frac.float())   # the batch env never uses it


@pytest.mark.parametrize("field", ["compile_penalty", "pass_weight", "step_cost"])
@pytest.mark.parametrize("bad,exc", [("x", TypeError), (None, TypeError), (True, TypeError),
                                     (float("nan"), ValueError), (float("inf"), ValueError), (10**40, ValueError)])
def test_reward_weights_are_finite_numbers(field, bad, exc):
    """Found by an audit: SynthesisReward(compile_penalty="x") was taken, then the first invalid
    action failed deep in torch; nan went into the rewards."""
    from vramgym.envs.reward import NeuralCompileReward, SynthesisReward
    with pytest.raises(exc, match=f"SynthesisReward.{field} must be"):
        SynthesisReward(**{field: bad})
    with pytest.raises(exc, match="NeuralCompileReward.valid_bonus must be"):
        NeuralCompileReward(valid_bonus=bad)
    assert SynthesisReward(**{field: np.float32(-2)}) is not None

    class Own:   # not a SynthesisReward: its compile_penalty is checked when the env is made
        compile_penalty = bad

        def __call__(self, s):
            return s.pass_frac.float()
    with pytest.raises(exc, match="reward.compile_penalty must be"):
        make(SYN, reward=Own())


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
@pytest.mark.parametrize("out,exc,match", [
    (lambda x: x[:1], ValueError, r"must return shape \(3,\) on cpu \(one value per env\), got \(1,\)"),
    (lambda x: 0.5, TypeError, "must return a real-valued torch tensor like its scores, got float"),
    (lambda x: x.numpy(), TypeError, "got ndarray"),
    (lambda x: x > 0, TypeError, "of torch.bool"),
])
def test_reward_results_must_be_one_real_value_per_env(env_id, out, exc, match):
    """Found by an audit: a reward returning one row's value was broadcast to every env (a body
    that did not compile got another env's reward), and a float or numpy result failed with an
    AttributeError."""
    from vramgym.envs.reward import NeuralCompileReward, SynthesisReward
    base = NeuralCompileReward() if env_id == NC else SynthesisReward()

    class Bad(type(base)):
        def __call__(self, *a):
            return out(base(*a))
    vec = make_vec(env_id, n=3, reward=Bad())
    obs, _ = vec.reset(seed=0)
    shape = (3,) + vec.single_action_space.shape
    end = NC_END if env_id == NC else V.END
    rng = np.random.default_rng(0)
    with pytest.raises(exc, match=match):
        for _ in range(200):   # (the token envs score when a body ends: Synthesis-v0's under its mask)
            mask = obs.get("action_mask")
            a = np.full(shape, end) if mask is None else (rng.random(mask.shape) + mask).argmax(1)
            obs, *_ = vec.step(a)


@pytest.mark.parametrize("cls", [SynthesisVectorEnv, NeuralCompileVectorEnv])
@pytest.mark.parametrize("bad", [1, 0, "yes", np.bool_(True)])
def test_cuda_graph_is_exactly_false_true_or_emulate(cls, bad):
    with pytest.raises(ValueError, match="cuda_graph must be True, False or 'emulate'"):
        cls(num_envs=2, bank=BANK, cuda_graph=bad)


@pytest.mark.parametrize("bad", [1.5, "2"])
def test_num_envs_must_be_an_int(bad):
    with pytest.raises(TypeError, match="num_envs must be an int"):
        SynthesisVectorEnv(num_envs=bad, bank=BANK)


def test_empty_body_is_an_error_in_single_and_vector_batch_envs():
    env, vec = make(BATCH), make_vec(BATCH, n=1)
    env.reset(seed=0)
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="L >= 1"):
        env.step(np.zeros(0, np.int64))
    with pytest.raises(ValueError, match="L >= 1"):
        vec.step(np.zeros((1, 0), np.int64))


def test_seeds_past_32_bits_do_not_repeat_small_seeds_tasks():
    """The task hash folded the seed's halves with a plain XOR: seed 2**32 + 1 drew seed 0's tasks."""
    from vramgym.envs.vector import hash_tasks
    env = torch.arange(256)
    ep = torch.zeros_like(env)
    base = hash_tasks(0, env, ep, 68)
    for seed in (2**32 + 1, 2**33 + 2, 2**63 + 2**31):
        low = seed & 0xFFFFFFFF ^ (seed >> 32)   # the seed the old fold landed on
        assert (hash_tasks(seed, env, ep, 68) != hash_tasks(low, env, ep, 68)).float().mean() > 0.9, seed
    assert (hash_tasks(2**32 + 1, env, ep, 68) != base).float().mean() > 0.9
    # below 2**32, tasks are what they were before the change (values recorded from fe594f1's hash)
    assert hash_tasks(5, env, ep, 68)[:16].tolist() == [50, 39, 55, 21, 37, 34, 27, 9, 64, 46, 9, 52, 67, 44, 26, 52]
    assert hash_tasks(2**32 - 1, env, ep, 68)[:8].tolist() == [59, 20, 50, 12, 2, 64, 51, 49]


def test_tasks_may_be_any_iterable_of_names():
    """A generator of names worked before the checks (len() of it does not exist) and still does."""
    from vramgym.envs.synthesis import SynthesisEnv
    env = SynthesisEnv(tasks=(t for t in ["gcd", "sum_list"]), n_tests=4)
    assert [t.name for t in env.core.bank.tasks] == ["gcd", "sum_list"]


def test_bank_score_checks_its_arrays():
    """Found by an audit: score cast with np.asarray(dtype=int64), so 51.9 scored as token 51,
    task 0.9 as task 0, and a task_ids of the wrong length went through."""
    body = np.array(SUM_LIST)
    good = BANK.score(body[None], [1])
    assert good.all_pass.tolist() == [True]
    with pytest.raises(TypeError, match="bodies must be an integer array"):
        BANK.score(body[None].astype(np.float64) + 0.9, [1])
    with pytest.raises(TypeError, match="task_ids"):
        BANK.score(body[None], [0.9])
    with pytest.raises(ValueError, match="task_ids: values must lie in"):
        BANK.score(body[None], [len(TASKS)])
    with pytest.raises(ValueError, match="one value per body"):
        BANK.score(body[None], [1, 1])
    with pytest.raises(TypeError, match="lengths"):
        BANK.score(body[None], [1], [2.5])
    with pytest.raises(ValueError, match="lengths: values must lie in"):
        BANK.score(body[None], [1], [len(body) + 1])
    with pytest.raises(ValueError, match="2-D"):
        BANK.score(body, [1])
    empty = BANK.score(np.zeros((2, 0), np.int64), [0, 1])  # L = 0: no body, a compile error each
    assert empty.compiled.tolist() == [False, False]
    for bad in (10**6, -5):  # ids outside the vocabulary: a compile error, as in the envs
        b = body.copy()
        b[1] = bad
        assert BANK.score(b[None], [1]).compiled.tolist() == [False]


def test_bank_evaluate_checks_its_tensors():
    """Found by an audit: evaluate (the envs' scorer, documented in the README) cast float bodies
    to tokens (4.5 scored as 4) where score raises. Types and shapes are checked; values are not
    (that would sync a GPU; evaluate's callers check them)."""
    import torch
    body = torch.tensor(SUM_LIST)[None]
    n, task = torch.tensor([len(SUM_LIST)]), torch.tensor([1])
    ok, passed, _ = BANK.evaluate(body, n, task)
    assert ok.tolist() == [True] and passed.tolist() == [4]
    for args, exc, match in [
        ((body.double() + 0.5, n, task), TypeError, "bodies must be an integer tensor"),
        ((body, n.float(), task), TypeError, "lengths must be an integer tensor"),
        ((body, n, task.bool()), TypeError, "task_ids must be an integer tensor"),
        ((body.numpy(), n, task), TypeError, "bodies must be a torch tensor"),
        ((body, n, torch.tensor([1, 1])), ValueError, "task_ids must have shape"),
        ((body[0], n, task), ValueError, "bodies must have shape"),
    ]:
        with pytest.raises(exc, match=match):
            BANK.evaluate(*args)
    with pytest.raises(TypeError, match="active must be None or a bool tensor"):
        BANK.evaluate(body, n, task, torch.tensor([1]))


def test_neural_compile_needs_tasks_with_a_reference():
    """Found by an audit: an examples-only task gave 'source must be str or bytes, not NoneType'."""
    from vramgym.envs.tasks import Task
    xor = Task.from_examples("xor", "def xor(a: bool, b: bool) -> bool",
                             [((False, False), False), ((False, True), True), ((True, False), True), ((True, True), False)])
    with pytest.raises(ValueError, match="xor have only input/output cases"):
        gym.make(NC, bank=TaskBank([xor], n_tests=4))
    with pytest.raises(ValueError, match="xor have only input/output cases"):
        gym.make_vec(NC, num_envs=2, vectorization_mode="vector_entry_point", bank=TaskBank([xor], n_tests=4))


# ---- session 30's mutation audit -------------------------------------------------------------------

def test_reset_with_a_new_seed_samples_that_seeds_tasks():
    env = SynthesisVectorEnv(num_envs=16, bank=BANK, seed=0)
    first = env.reset()[0]["task"].tolist()
    reseeded = env.reset(seed=12345)[0]["task"].tolist()
    assert reseeded == SynthesisVectorEnv(num_envs=16, bank=BANK, seed=12345).reset()[0]["task"].tolist()
    assert env.reset(seed=0)[0]["task"].tolist() == first


def test_one_pinned_task_id_in_a_list_pins_every_env():
    env = SynthesisVectorEnv(num_envs=4, bank=BANK, seed=0)
    assert env.reset(options={"task": [1]})[0]["task"].tolist() == [1] * 4


def test_signatures_and_actions_outside_the_vocabulary_are_refused():
    sig = "def f(a: int) -> int:"
    body = V.encode(r"return <P0> \n <END>")
    for bad in ("def f() -> int:", "def f(a: int, a: int) -> int:", "def f(a: int) -> float:"):
        with pytest.raises(ValueError):
            V.detokenize(body, bad)
    with pytest.raises(TypeError):
        V.detokenize([b"43"], sig)
    for a in (V.VOCAB_SIZE, -1):
        with pytest.raises(ValueError):
            V.detokenize([a], sig)
