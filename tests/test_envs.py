"""The environments: conformance of every registered id (spaces, check_env, seeding, autoreset),
the vector env against N single envs, masks that always produce compiling programs, reachable
reference solutions that earn the full reward, and bad actions that end episodes cleanly."""
import os
import subprocess
import sys

import gymnasium as gym

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import vramgym.envs
from vramgym.envs import vocab as V
from vramgym.envs.bank import TaskBank
from vramgym.envs.neural_compile import END as NC_END, bytecode_actions
from vramgym.envs.synthesis import SynthesisVectorEnv

SEED = int(os.environ.get("VRAMGYM_SEED", np.random.SeedSequence().entropy % 2**32))
TASKS = ["sum_list", "gcd", "reverse_list", "max_list", "count_evens"]
BANK = TaskBank.from_names(TASKS, n_tests=8)


def policy(rng, space, obs):
    """A random action: masked where the env has a mask."""
    if "action_mask" in obs:
        return int(rng.choice(np.flatnonzero(obs["action_mask"])))
    if isinstance(space, gym.spaces.Discrete):
        return int(rng.integers(space.n))
    return rng.integers(space.low, space.high + 1, size=space.shape).astype(space.dtype)


def rollout(env, seed, steps=60):
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    trace = []
    for _ in range(steps):
        a = policy(rng, env.action_space, obs)
        obs, r, term, trunc, info = env.step(a)
        trace.append((r, term, trunc, obs["tokens"].copy() if "tokens" in obs else obs["code"].copy()))
        if term or trunc:
            obs, _ = env.reset()
    return trace


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_conformance(env_id):
    env = gym.make(env_id, bank=BANK)
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    rng = np.random.default_rng(0)
    for _ in range(30):
        obs, r, term, trunc, info = env.step(policy(rng, env.action_space, obs))
        assert env.observation_space.contains(obs) and isinstance(r, float)
        if term or trunc:
            obs, _ = env.reset()


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_seeding_gives_the_same_trajectory(env_id):
    a = rollout(gym.make(env_id, bank=BANK), SEED)
    b = rollout(gym.make(env_id, bank=BANK), SEED)
    for (r1, t1, u1, o1), (r2, t2, u2, o2) in zip(a, b):
        assert r1 == r2 and t1 == t2 and u1 == u2 and np.array_equal(o1, o2)


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_vector_env_spaces_and_autoreset(env_id):
    vec = gym.make_vec(env_id, num_envs=4, vectorization_mode="vector_entry_point", bank=BANK)
    assert vec.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    obs, _ = vec.reset(seed=1)
    assert vec.observation_space.contains(obs)
    rng = np.random.default_rng(SEED)
    ended = np.zeros(4, bool)
    for _ in range(80):
        if "action_mask" in obs:
            acts = np.array([rng.choice(np.flatnonzero(m)) for m in obs["action_mask"]])
        else:
            acts = np.stack([policy(rng, vec.single_action_space, {}) for _ in range(4)])
        obs, r, term, trunc, info = vec.step(acts)
        assert vec.observation_space.contains(obs)
        # The step after an episode ends is a reset: no reward, fresh episode (length 0).
        assert np.all(r[ended] == 0) and not np.any((term | trunc)[ended])
        assert np.all(obs["length"][ended] == 0)
        ended = term | trunc
    vec.close()


def test_vector_env_equals_single_envs():
    n = 6
    tasks = np.arange(n) % len(TASKS)
    vec = SynthesisVectorEnv(num_envs=n, bank=BANK)
    vobs, _ = vec.reset(seed=0, options={"task": tasks})  # pinned: autoresets keep each env's task
    singles = [gym.make("vramgym/Synthesis-v0", bank=BANK) for _ in range(n)]
    for env, t in zip(singles, tasks):
        env.reset(seed=0, options={"task": int(t)})
    pending = np.zeros(n, bool)  # single envs whose episode ended: reset on the next step (NEXT_STEP)
    rng = np.random.default_rng(SEED)
    for _ in range(80):
        acts = np.array([rng.choice(np.flatnonzero(m)) for m in vobs["action_mask"]])
        vobs, vr, vt, vu, _ = vec.step(acts)
        for i, env in enumerate(singles):
            if pending[i]:
                o, _ = env.reset(options={"task": int(tasks[i])})
                r, t, u = 0.0, False, False
            else:
                o, r, t, u, _ = env.step(int(acts[i]))
            pending[i] = t or u
            assert r == pytest.approx(vr[i]) and t == vt[i] and u == vu[i]
            for key in ("tokens", "length", "task", "action_mask", "examples"):
                assert np.array_equal(o[key], vobs[key][i]), key


def test_masked_rollouts_always_compile():
    rng = np.random.default_rng(SEED)
    vec = SynthesisVectorEnv(num_envs=16, bank=BANK, max_len=40)
    obs, _ = vec.reset(seed=int(rng.integers(1 << 30)))
    finished = 0
    for _ in range(400):
        acts = np.array([rng.choice(np.flatnonzero(m)) for m in obs["action_mask"]])
        before = vec.state.tokens.numpy().copy(), vec.state.task.numpy().copy()
        obs, r, term, trunc, info = vec.step(acts)
        for i in np.flatnonzero(term | trunc):
            assert not info["invalid_action"][i]
            body = np.append(before[0][i][: np.argmax(before[0][i] == V.END) if (before[0][i] == V.END).any() else None], acts[i])
            s = BANK.score(body[None], before[1][i : i + 1])
            assert s.compiled[0], V.detokenize(body, BANK.signatures[before[1][i]])
            assert r[i] > vec.core.reward.compile_penalty
            finished += 1
    assert finished > 10


def test_a_body_ending_in_a_dedent_compiles():
    """Found while aligning render with the scorer: the scorer added a NEWLINE after a body's
    last action unless that action was a NEWLINE, so `... return x \n <DEDENT> <END>` (an if/else
    that returns on both sides: the mask allows it) became `... NEWLINE DEDENT NEWLINE` and
    scored as a compile error. Through the env (mask included), the batch scorer, and the three
    token builders (torch ops, native, per-program rendering)."""
    from vramgym.compiler import compile_tokens
    body = V.encode(r"if <P1> == 0 : \n <INDENT> return <P0> \n <DEDENT> else : \n <INDENT> "
                    r"return <FN> ( <P1> , <P0> % <P1> ) \n <DEDENT> <END>")
    gcd = TASKS.index("gcd")
    env = gym.make("vramgym/Synthesis-v0", bank=BANK)
    obs, _ = env.reset(seed=0, options={"task": gcd})
    for a in body:
        assert obs["action_mask"][a], V.TOKENS[a]
        obs, r, term, trunc, _ = env.step(a)
    assert term and r > 1.0  # all tests pass
    assert BANK.score(np.array(body)[None], [gcd]).all_pass.tolist() == [True]
    import torch
    L = np.array([len(body) - 1])
    torch_slots, count = BANK.compiler_token_slots(torch.as_tensor([body]), torch.as_tensor(L), torch.tensor([gcd]))
    mine = V.to_compiler_tokens(body, BANK.signatures[gcd])
    assert int(count[0]) == len(mine)
    assert np.array_equal(torch_slots[0, : len(mine), :2].numpy(), mine[:, :2])
    assert compile_tokens(*BANK.compiler_tokens(np.array([body]), L, np.array([gcd]))).ok.all()


REFERENCES = {  # task bodies in the vocabulary (names are slots: <P0> the first parameter)
    "sum_list": r"v0 = 0 \n for v1 in <P0> : \n <INDENT> v0 += v1 \n <DEDENT> return v0 \n <END>",
    "count_evens": r"v0 = 0 \n for v1 in <P0> : \n <INDENT> if v1 % 2 == 0 : \n <INDENT> v0 += 1 \n "
                   r"<DEDENT> <DEDENT> return v0 \n <END>",
    "reverse_list": r"v0 = [ ] \n for v1 in <P0> : \n <INDENT> v0 = [ v1 ] + v0 \n <DEDENT> return v0 \n <END>",
}


@pytest.mark.parametrize("task", sorted(REFERENCES))
def test_reference_is_reachable_under_the_mask_and_earns_full_reward(task):
    env = gym.make("vramgym/Synthesis-v0", bank=BANK)
    obs, _ = env.reset(seed=0, options={"task": TASKS.index(task)})
    actions = V.encode(REFERENCES[task])
    for a in actions:
        assert obs["action_mask"][a], f"{V.TOKENS[a]} is masked after {V.detokenize(obs['tokens'][:obs['length']], BANK.signatures[TASKS.index(task)])!r}"
        obs, r, term, trunc, info = env.step(a)
    assert term and not info["invalid_action"]
    rw = env.unwrapped.core.reward
    s = BANK.score(np.array(actions)[None], np.array([TASKS.index(task)]))
    assert s.all_pass[0]
    body_len = len(actions) - 1  # END is not part of the body
    assert r == pytest.approx(rw.pass_weight + rw.all_pass_bonus - rw.step_cost * s.steps[0] - rw.length_cost * body_len)


def test_bad_actions_end_the_episode_cleanly():
    env = gym.make("vramgym/Synthesis-v0", bank=BANK)
    penalty = env.unwrapped.core.reward.compile_penalty
    for bad in (-1, V.VOCAB_SIZE, 10**9):
        obs, _ = env.reset(seed=0)
        obs, r, term, trunc, info = env.step(bad)
        assert term and info["invalid_action"] and r == penalty
    obs, _ = env.reset(seed=0)
    masked = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    obs, r, term, trunc, info = env.step(masked)
    assert term and info["invalid_action"] and r == penalty
    assert obs["length"] == 0  # nothing was written


def test_batch_env_scores_whole_programs_and_survives_garbage():
    vec = gym.make_vec("vramgym/SynthesisBatch-v0", num_envs=4, vectorization_mode="vector_entry_point", bank=BANK)
    obs, _ = vec.reset(seed=0, options={"task": TASKS.index("sum_list")})
    good = np.full(vec.single_action_space.shape, V.END)
    ref = V.encode(REFERENCES["sum_list"])
    good[: len(ref)] = ref
    garbage = np.random.default_rng(SEED).integers(-5, 100, size=(3,) + good.shape)
    obs, r, term, trunc, _ = vec.step(np.vstack([good[None], garbage]))
    assert term.all() and r[0] > 1.5 and np.all(r[1:] <= r[0])


def test_neural_compile_reference_bytecode_earns_the_paper_reward():
    env = gym.make("vramgym/NeuralCompile-v0", bank=BANK)
    for t in range(len(TASKS)):
        obs, _ = env.reset(seed=0, options={"task": t})
        for a in bytecode_actions(env.unwrapped.core.ref_code[t]):
            obs, r, term, trunc, info = env.step(a)
        assert term and r == pytest.approx(11.0), TASKS[t]
    obs, _ = env.reset(seed=0)
    for a in [1, 2, 3, NC_END]:  # a partial word: not valid bytecode
        obs, r, term, trunc, info = env.step(a)
    assert term and r == 0.0
    obs, _ = env.reset(seed=0)
    obs, r, term, trunc, info = env.step(999)  # out of range: ends the episode, nothing earned
    assert term and info["invalid_action"] and r == 0.0


HELPER_FIRST = ("# doubles\r\ndef helper(x: int) -> int:\r\n    return x * 2\r\n# the entry\r\n\r\n"
                "def g(a: int) -> int:\r\n    return helper(a) + mid(a)\r\ndef mid(y: int) -> int:\f\r\n    return y - 1")


def test_neural_compile_takes_references_whose_entry_is_not_first():
    """The image's function 0 is the one the tests call. A reference with a helper before its
    entry made the env refuse the task ('fails its tests ...: raise fuel', which no fuel fixes):
    its own bytecode ran the helper. The observation now shows the entry's definition first, and
    compiling what it shows earns 11."""
    from vramgym.compiler import compile_source, tokenize
    from vramgym.envs.neural_compile import entry_first
    from vramgym.envs.tasks import Task
    shown = entry_first(HELPER_FIRST, "g")
    assert [f.name for f in compile_source(shown).functions] == ["g", "helper", "mid"]
    assert shown.startswith("# doubles\r\ndef g(a: int)") and sorted(shown) == sorted(HELPER_FIRST + "\n")
    assert entry_first(shown, "g") == shown
    bank = TaskBank([Task.from_reference("t", HELPER_FIRST, entry="g")], n_tests=4)
    env = gym.make("vramgym/NeuralCompile-v0", bank=bank)
    obs, _ = env.reset(seed=0)
    n = int(obs["source_length"])
    np.testing.assert_array_equal(obs["source"][:n], tokenize(shown))
    for a in bytecode_actions(compile_source(shown).code):
        obs, r, term, trunc, info = env.step(a)
    assert term and r == pytest.approx(11.0)
    obs, _ = env.reset(seed=0)   # the helper's code first: valid, but the tests call the helper
    for a in bytecode_actions(compile_source(HELPER_FIRST).code):
        obs, r, term, trunc, info = env.step(a)
    assert term and r == pytest.approx(1.0)


def test_ansi_render_shows_program_and_results():
    env = gym.make("vramgym/Synthesis-v0", bank=BANK, render_mode="ansi")
    obs, _ = env.reset(seed=0, options={"task": TASKS.index("sum_list")})
    for a in V.encode(REFERENCES["sum_list"]):
        env.step(a)
    text = env.render()
    assert "def sum_list" in text and "passed=8/8" in text


def test_render_scores_a_body_cut_at_max_len():
    """A body of max_len tokens without END is scored (the batch env's rule), but render showed
    no score for it: only bodies ending in END got one."""
    ref = V.encode(REFERENCES["sum_list"])
    assert ref[-1] == V.END
    env = gym.make("vramgym/SynthesisBatch-v0", bank=BANK, max_len=len(ref) - 1, render_mode="ansi")
    env.reset(seed=0, options={"task": TASKS.index("sum_list")})
    _, r, term, _, _ = env.step(np.array(ref[:-1]))
    assert term and r > 1.5
    assert "compiled=True passed=8/8" in env.render()


def test_vectorized_compiler_tokens_equal_the_rendered_ones():
    """bank.compiler_tokens (the batched scoring path) compiles to the same bytecode as
    vocab.to_compiler_tokens (the per-program rendering) on random masked programs."""
    from vramgym.compiler import compile_tokens
    rng = np.random.default_rng(SEED)
    vec = SynthesisVectorEnv(num_envs=32, bank=BANK, max_len=40)
    obs, _ = vec.reset(seed=int(rng.integers(1 << 30)))
    bodies, tasks = [], []
    for _ in range(200):
        before, btask = vec.state.tokens.numpy().copy(), vec.state.task.numpy().copy()
        obs, r, term, trunc, _ = vec.step(np.array([rng.choice(np.flatnonzero(m)) for m in obs["action_mask"]]))
        for i in np.flatnonzero(term | trunc):
            bodies.append(before[i])
            tasks.append(btask[i])
    bodies, tasks = np.array(bodies), np.array(tasks)
    lengths = np.where((bodies == V.END).any(1), (bodies == V.END).argmax(1), bodies.shape[1])
    fast = compile_tokens(*BANK.compiler_tokens(bodies, lengths, tasks))
    slow_rows = [V.to_compiler_tokens(b[:n], BANK.signatures[t]) for b, n, t in zip(bodies, lengths, tasks)]
    offsets = np.concatenate([[0], np.cumsum([len(x) for x in slow_rows])])
    slow = compile_tokens(np.concatenate(slow_rows), offsets)
    assert len(bodies) > 20 and fast.ok.all() and slow.ok.all()
    for i in range(len(bodies)):
        assert np.array_equal(fast.code[i, : fast.lengths[i]], slow.code[i, : slow.lengths[i]])


def test_render_agrees_with_the_scorer_on_unmasked_bodies():
    """Found by an audit: SynthesisBatch-v0 bodies that fail as tokens (a leading NEWLINE, one
    inside brackets, `: INDENT stmt`) render as text that compiles, next to compiled=False; one
    with an unused parameter slot was scored but could not be rendered. Now render adds the
    tokens' error, unused slots render as names of their own, and the per-program tokens
    (vocab.to_compiler_tokens) compile exactly when the scorer's do, to the same code."""
    from vramgym.compiler import compile_source, compile_tokens
    env = gym.make("vramgym/SynthesisBatch-v0", bank=BANK, render_mode="ansi")
    gcd = TASKS.index("gcd")
    for text, where in ((r"\n return <P0> \n <END>", "2:1"), (r"return max ( <P0> , \n <P1> ) \n <END>", "2:18"),
                        (r"if <P0> : <INDENT> return <P0> \n <DEDENT> return <P1> \n <END>", "2:11")):
        env.reset(seed=0, options={"task": gcd})
        _, r, *_ = env.step(np.array(V.encode(text) + [V.END] * 60)[: env.unwrapped.core.max_len])
        shown = env.render()
        assert "compiled=False" in shown and f"error: {where}: " in shown, (text, shown)
    body = V.encode(r"<P3> = 2 \n return <P3> + <P0> \n <END>")
    env.reset(seed=0, options={"task": gcd})
    env.step(np.array(body + [V.END] * 60)[: env.unwrapped.core.max_len])
    shown = env.render()
    assert "_p3 = 2" in shown and "compiled=True" in shown and "error" not in shown, shown
    compile_source(V.detokenize(body, BANK.signatures[gcd]))  # the text compiles too
    rng = np.random.default_rng(SEED)
    names = list(REFERENCES)
    edits = [V.NEWLINE, V.INDENT, V.DEDENT, V.END, V.P0, V.P0 + 3, V.V0, V.ID["("], V.ID[")"], V.ID[":"], V.ID[","]]
    bodies, tasks = [], []
    for _ in range(1500):  # near misses: a reference body with one or two tokens inserted, dropped or replaced
        k = int(rng.integers(len(names)))
        b = V.encode(REFERENCES[names[k]])
        for _ in range(int(rng.integers(1, 3))):
            i, op = int(rng.integers(len(b))), int(rng.integers(3))
            if op == 0:
                b.insert(i, int(rng.choice(edits)))
            elif op == 1 and len(b) > 1:
                del b[i]
            else:
                b[i] = int(rng.choice(edits))
        bodies.append((b + [V.END] * 40)[:40])
        tasks.append(TASKS.index(names[k]))
    bodies, tasks = np.array(bodies), np.array(tasks)
    lengths = np.where((bodies == V.END).any(1), (bodies == V.END).argmax(1), bodies.shape[1])
    scored = BANK.score(bodies, tasks, lengths).compiled
    rows = [V.to_compiler_tokens(b[:k], BANK.signatures[t]) for b, k, t in zip(bodies, lengths, tasks)]
    slow = compile_tokens(np.concatenate(rows), np.concatenate([[0], np.cumsum([len(x) for x in rows])]))
    fast = compile_tokens(*BANK.compiler_tokens(bodies, lengths, tasks))
    assert 20 < scored.sum() < len(scored) - 100, scored.sum()  # (about 3% compile)
    assert np.array_equal(slow.ok, scored) and np.array_equal(fast.ok, scored)
    assert np.array_equal(slow.errors[:, [0, 3]], fast.errors[:, [0, 3]])  # the same error (placed differently)
    for i in np.flatnonzero(scored):
        assert np.array_equal(fast.code[i, : fast.lengths[i]], slow.code[i, : slow.lengths[i]])


@pytest.mark.parametrize("text", [r"v0 = [ <INDENT> \n return <P0> \n <END>",
                                  r"v0 = [ <INDENT> \n for v1 in <P0> : \n v0 = v1 \n <DEDENT> return <P0> \n <END>"])
def test_an_indent_before_a_newline_gets_one_error_wherever_it_is_placed(text):
    """The render's tokens put such an INDENT at the next line's first word, the scorer's at the
    current line: the compiler's checks after a failure compared lines and gave "'[' was never
    closed" for one and "expected an expression" for the other (seen in the test above, by seed)."""
    from vramgym.compiler import compile_tokens
    task = TASKS.index("sum_list")
    b = V.encode(text)
    rows = V.to_compiler_tokens(b[:-1], BANK.signatures[task])
    slow = compile_tokens(rows, np.array([0, len(rows)]))
    fast = compile_tokens(*BANK.compiler_tokens(np.array([b + [V.END] * 8]), np.array([len(b) - 1]), np.array([task])))
    assert not slow.ok[0] and np.array_equal(slow.errors[:, [0, 3]], fast.errors[:, [0, 3]])


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_vector_ansi_render(env_id):
    vec = gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point", bank=BANK, render_mode="ansi")
    vec.reset(seed=0)
    text = vec.render()
    assert text.count("task ") == 2


def test_make_with_module_prefix():
    env = gym.make("vramgym.envs:vramgym/SynthesisBatch-v0", bank=BANK)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)


def test_fuel_bounds_the_scored_runs():
    """fuel= reaches the VM: the same reference program passes its tests with the default budget
    and traps out_of_fuel (fails them) with one too small for its runs; a bank plus fuel is refused."""
    kw = dict(num_envs=2, vectorization_mode="vector_entry_point", tasks=TASKS, n_tests=8)
    rewards = {}
    for fuel in (None, 5):
        vec = gym.make_vec("vramgym/SynthesisBatch-v0", **kw, **({} if fuel is None else {"fuel": fuel}))
        assert vec.unwrapped.core.bank.config.fuel == (20_000 if fuel is None else fuel)
        vec.reset(seed=0, options={"task": TASKS.index("sum_list")})
        body = np.full(vec.single_action_space.shape, V.END)
        ref = V.encode(REFERENCES["sum_list"])
        body[: len(ref)] = ref
        _, r, term, *_ = vec.step(np.stack([body, body]))
        assert term.all()
        rewards[fuel] = r[0]
    assert rewards[5] < rewards[None]
    with pytest.raises(ValueError, match="fuel"):
        gym.make_vec("vramgym/SynthesisBatch-v0", num_envs=1, vectorization_mode="vector_entry_point", bank=BANK,
                     fuel=100)


def test_neural_compile_fuel_must_cover_the_references():
    """The efficiency baseline is the reference's executed steps: a fuel that cuts a reference's
    runs short is refused (naming the task) rather than measured; one that covers them is used."""
    kw = dict(num_envs=1, vectorization_mode="vector_entry_point", tasks=["sum_list", "gcd"], n_tests=8)
    with pytest.raises(ValueError, match="sum_list.*raise fuel"):
        gym.make_vec("vramgym/NeuralCompile-v0", fuel=40, **kw)
    default = gym.make_vec("vramgym/NeuralCompile-v0", **kw).unwrapped.core.ref_steps
    vec = gym.make_vec("vramgym/NeuralCompile-v0", fuel=2_000, **kw)
    assert vec.unwrapped.core.bank.config.fuel == 2_000
    np.testing.assert_array_equal(vec.unwrapped.core.ref_steps, default)


@pytest.mark.parametrize("env_id", ["vramgym/Synthesis-v0", "vramgym/SynthesisBatch-v0", "vramgym/NeuralCompile-v0"])
def test_envs_pickle_mid_episode_and_go_on_alike(env_id):
    """The synthesis envs did not pickle (the grammar's per-instance lru_cache), so they could not
    be shipped to a worker or checkpointed whole. A copy taken mid-episode steps as the original."""
    import pickle
    vec = gym.make_vec(env_id, num_envs=6, vectorization_mode="vector_entry_point", bank=BANK)
    obs, _ = vec.reset(seed=4)
    rng = np.random.default_rng(SEED)

    def act(o):
        if "action_mask" in o:
            return (rng.random(o["action_mask"].shape) + o["action_mask"]).argmax(1)
        return rng.integers(0, vec.single_action_space.nvec.max() if hasattr(vec.single_action_space, "nvec")
                            else 60, size=(6,) + vec.single_action_space.shape)
    obs = vec.step(act(obs))[0]
    twin = pickle.loads(pickle.dumps(vec))
    for _ in range(8):
        a = act(obs)
        out, out2 = vec.step(a), twin.step(a)
        obs = out[0]
        for k in obs:
            np.testing.assert_array_equal(obs[k], out2[0][k], err_msg=k)
        for x, y in zip(out[1:4], out2[1:4]):
            np.testing.assert_array_equal(x, y)


def test_a_pickled_env_steps_alike_in_another_process_and_after_the_original_is_gone(tmp_path):
    """The native mask automaton kept its tables' addresses, which a pickle or a deepcopy carried
    over: a copy loaded in another process crashed, and one in the same process read freed memory
    once the original was gone (audit, session 24). It is built again where it is loaded."""
    import copy
    import gc
    import pickle
    vec = gym.make_vec("vramgym/Synthesis-v0", num_envs=4, vectorization_mode="vector_entry_point", bank=BANK)
    obs, _ = vec.reset(seed=1)
    twin = copy.deepcopy(vec)
    (tmp_path / "env.pkl").write_bytes(pickle.dumps(vec))
    rng = np.random.default_rng(SEED)
    actions, masks = [], []
    for _ in range(12):
        a = (rng.random(obs["action_mask"].shape) + obs["action_mask"]).argmax(1)
        obs = vec.step(a)[0]
        actions.append(a)
        masks.append(np.asarray(obs["action_mask"]))
    np.save(tmp_path / "actions.npy", np.stack(actions))
    np.save(tmp_path / "masks.npy", np.stack(masks))
    del vec
    gc.collect()
    for a, m in zip(actions, masks):
        np.testing.assert_array_equal(np.asarray(twin.step(a)[0]["action_mask"]), m)
    child = (f"import pickle, numpy as np, vramgym.envs\n"
             f"env = pickle.loads(open({str(tmp_path / 'env.pkl')!r}, 'rb').read())\n"
             f"for a, m in zip(np.load({str(tmp_path / 'actions.npy')!r}), np.load({str(tmp_path / 'masks.npy')!r})):\n"
             f"    assert (np.asarray(env.step(a)[0]['action_mask']) == m).all()\n"
             f"print('same')\n")
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "same", (r.returncode, r.stderr[-2000:])


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_vector_env_keeps_gymnasiums_seed_and_info_conventions(env_id):
    """reset(seed) did not reach gymnasium's VectorEnv.reset, so np_random_seed was a fresh random
    number; step infos lacked the `_key` masks that gymnasium's own vector envs give (audit,
    session 24). The infos now match a SyncVectorEnv's of the same id."""
    native = gym.make_vec(env_id, num_envs=3, vectorization_mode="vector_entry_point", bank=BANK)
    sync = gym.make_vec(env_id, num_envs=3, vectorization_mode="sync", bank=BANK)
    rng = np.random.default_rng(SEED)
    infos = []
    for vec in (native, sync):
        obs, _ = vec.reset(seed=11)
        if vec is native:   # (a SyncVectorEnv reports its sub-envs' seeds, 11, 12, 13)
            assert vec.unwrapped.np_random_seed == 11
            vec.reset()   # seed=None goes on with the same generator
            assert vec.unwrapped.np_random_seed == 11
        if "action_mask" in obs:
            a = np.array([np.flatnonzero(m)[0] for m in obs["action_mask"]])
        else:
            a = np.stack([policy(rng, vec.single_action_space, {}) for _ in range(3)])
        infos.append(vec.step(a)[4])
    assert sorted(infos[0]) == sorted(infos[1])
    for k in infos[1]:
        assert np.asarray(infos[0][k]).dtype == np.asarray(infos[1][k]).dtype, k
        if k.startswith("_"):
            np.testing.assert_array_equal(infos[0][k], infos[1][k])


def test_sync_vector_envs_pin_a_task_for_one_episode_or_by_tasks():
    """docs/api-contract.md: Gymnasium's sync vector env resets its envs without options, so a
    task pinned by reset lasts one episode there (the native vector env keeps it); an env made
    with tasks=[name] keeps its one task."""
    body = np.full((4, 8), V.END, dtype=np.int64)   # ends every episode at once (compile failure)
    pinned = gym.make_vec("vramgym/SynthesisBatch-v0", num_envs=4, vectorization_mode="sync", bank=BANK)
    native = gym.make_vec("vramgym/SynthesisBatch-v0", num_envs=4, vectorization_mode="vector_entry_point",
                          bank=BANK)
    seen = {"sync": set(), "native": set()}
    for name, vec in (("sync", pinned), ("native", native)):
        obs, _ = vec.reset(seed=SEED, options={"task": 1})
        assert obs["task"].tolist() == [1] * 4
        for _ in range(6):   # NEXT_STEP autoreset: every other step starts new episodes
            obs, _, term, _, _ = vec.step(body)
            seen[name].update(obs["task"].tolist())
    assert seen["native"] == {1}
    assert len(seen["sync"]) > 1   # 12 fresh draws from 5 tasks: all 1 with probability 5**-12
    one = gym.make_vec("vramgym/SynthesisBatch-v0", num_envs=4, vectorization_mode="sync", tasks=["gcd"], n_tests=4)
    obs, _ = one.reset(seed=SEED)
    for _ in range(6):
        obs, _, _, _, _ = one.step(body)
        assert obs["task"].tolist() == [0] * 4
    assert [t.name for t in one.unwrapped.envs[0].unwrapped.core.bank.tasks] == ["gcd"]


def test_an_env_with_captured_steps_pickles_and_copies_without_stepping_the_original():
    """With cuda_graph set, reset captures the step in a closure over the env: pickling failed
    and a deepcopy's step ran the original's capture, moving the original (audit, session 24).
    Copies capture their own steps ("emulate" runs the same plumbing on the CPU)."""
    import copy
    import pickle
    kw = dict(num_envs=4, vectorization_mode="vector_entry_point", bank=BANK, cuda_graph="emulate")
    vec = gym.make_vec("vramgym/Synthesis-v0", **kw)
    obs, _ = vec.reset(seed=2)
    twins = [copy.deepcopy(vec), pickle.loads(pickle.dumps(vec))]
    rng = np.random.default_rng(SEED)
    for _ in range(10):
        a = (rng.random(obs["action_mask"].shape) + obs["action_mask"]).argmax(1)
        outs = [t.step(a) for t in twins]   # the copies first: the original must not move
        ref = vec.step(a)
        obs = ref[0]
        for out in outs:
            for k in obs:
                np.testing.assert_array_equal(out[0][k], obs[k], err_msg=k)
            for x, y in zip(out[1:4], ref[1:4]):
                np.testing.assert_array_equal(x, y)
    assert all(t.unwrapped._graphs for t in twins)   # stepping through their own captures


def test_the_longest_chain_the_mask_allows_compiles_in_the_scorer():
    # `return n < n < ... < n` at max_len 1,024 is 2,553 words: the scorer's fixed cap of 1,024
    # words failed every such body from max_len 414 on (audit, session 16)
    from vramgym.compiler import compile_tokens
    from vramgym.envs.bank import code_cap_for
    from vramgym.envs.grammar import Grammar
    bank = TaskBank.from_names(["is_prime"], n_tests=4)
    for max_len in (413, 414, 1024):
        g = Grammar(bank.signatures[0], max_len=max_len)
        st, acts = g.reset(1), []
        def take(a):
            nonlocal st
            assert g.mask(st)[0][a]
            st, _ = g.step(st, np.array([a]))
            acts.append(a)
        take(V.ID["return"])
        take(V.P0)
        while g.mask(st)[0][V.ID["<"]] and g.mask(g.step(st.copy(), np.array([V.ID["<"]]))[0])[0][V.P0]:
            take(V.ID["<"])
            take(V.P0)
        take(V.NEWLINE)
        take(V.END)
        assert bool(g.done(st)[0])
        toks = V.to_compiler_tokens(acts, bank.signatures[0])
        words = compile_tokens(toks, [0, len(toks)], code_cap=2**16).lengths[0]
        assert words <= code_cap_for(len(toks)) and (max_len < 1024 or words > 1024)
        assert bank.score(np.array([acts]), np.array([0])).compiled.tolist() == [True]


def test_a_chained_comparison_costs_the_words_per_token_that_code_cap_for_assumes():
    from vramgym.compiler import compile_source
    from vramgym.envs.bank import code_cap_for
    words = [len(compile_source("def f(n: int) -> bool:\n    return n" + " < n" * k + "\n").code) for k in (2, 3, 50)]
    assert words[1] - words[0] == 5 and words[2] - words[1] == 47 * 5  # 5 words per further `< n` (2 tokens)
    assert code_cap_for(10) == 1024 and code_cap_for(2000) == 6064 and code_cap_for(10**6) == 2**16


# ---- session 30's mutation audit: rewards and scoring that no test pinned ---------------------------

def test_synthesis_reward_terms_and_signs():
    from vramgym.envs.bank import Scores
    from vramgym.envs.reward import SynthesisReward
    s = Scores(np.array([True, False]), np.array([0.5, 0.0]), np.array([False, False]), np.array([200.0, 0.0]),
               np.array([5, 3]))
    r = SynthesisReward(compile_penalty=-5.0, pass_weight=2.0, all_pass_bonus=3.0, step_cost=0.01, length_cost=-1.0)(s)
    assert r.dtype == np.float32
    np.testing.assert_allclose(r, [2.0 * 0.5 - 0.01 * 200 + 1.0 * 5, -5.0], rtol=1e-6)   # length_cost -1: a bonus
    full = Scores(np.array([True]), np.array([1.0]), np.array([True]), np.array([0.0]), np.array([0]))
    assert SynthesisReward(all_pass_bonus=-1.0)(full).tolist() == [0.0]


def test_neural_compile_reward_efficiency_is_clipped_to_minus_one_one():
    from vramgym.envs.reward import NeuralCompileReward
    one = np.ones(4)
    steps, ref = np.array([200.0, 50.0, 1000.0, 0.0]), np.array([100.0, 100.0, 100.0, 100.0])
    r = NeuralCompileReward()(one, one, steps, ref)
    np.testing.assert_allclose(r, [1 + 10 - 1.0, 1 + 10 + 0.5, 1 + 10 - 1.0, 1 + 10 + 1.0])   # slower costs
    assert NeuralCompileReward()(one[:1], np.zeros(1), steps[:1], ref[:1]).tolist() == [1.0]   # no pass: no term


def test_bank_score_takes_a_full_row_without_end_as_the_whole_body():
    from vramgym.envs.tasks import Task
    bank = TaskBank([Task.from_reference("inc", "def inc(n: int) -> int:\n    return n + 1\n")], n_tests=4)
    body = np.array([V.encode("return <P0> + 1")])   # fills its row: no END
    s = bank.score(body, np.array([0]))
    assert s.compiled.tolist() == [True] and s.all_pass.tolist() == [True] and s.length.tolist() == [4]


def test_neural_compile_needs_whole_words_and_refuses_actions_past_end():
    from vramgym.envs.neural_compile import NUM_ACTIONS, NeuralCompileEnv
    env = NeuralCompileEnv(tasks=["gcd"], n_tests=4)
    ref = env.core.ref_code[0]
    env.reset(options={"task": 0})
    for a in bytecode_actions(ref)[:-1] + [7, NC_END]:   # the reference and one stray byte
        obs, r, term, trunc, info = env.step(a)
    assert term and r == 0.0   # a partial word: invalid
    env.reset(options={"task": 0})
    obs, r, term, trunc, info = env.step(NUM_ACTIONS)   # one past END
    assert term and info["invalid_action"] and int(obs["length"]) == 0


def test_neural_compile_source_len_may_be_exactly_the_reference_length():
    from vramgym.compiler import tokenize
    from vramgym.envs.neural_compile import NeuralCompileEnv
    from vramgym.envs.tasks import get_task
    n = len(tokenize(get_task("gcd").reference))
    assert NeuralCompileEnv(tasks=["gcd"], n_tests=4, source_len=n).observation_space["source"].shape[0] == n
    with pytest.raises(ValueError, match="source_len"):
        NeuralCompileEnv(tasks=["gcd"], n_tests=4, source_len=n - 1)
