"""The vector envs' step is a bounded number of torch ops (on a GPU each is a kernel launch of a
few microseconds, eager, so their count is what a GPU step costs at small batches; a CPU can
count them: experiments/bench_envs.py count_ops), and the copy flag's observations."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from vramgym.envs import vocab as V
from vramgym.envs.bank import TaskBank
from vramgym.envs.synthesis import SynthesisVectorEnv

BANK = TaskBank.from_names(["gcd", "sum_list", "reverse_list", "is_prime", "count_evens", "max_list"], n_tests=8)
BENCH = Path(__file__).resolve().parent.parent / "experiments" / "bench_envs.py"

# Aten ops per step, measured with count_ops (device="cpu", the device path: torch tensors in and
# out) when the step was restructured: token env 61 (before: 106-111), batch env 50 (92-95), the
# scorer's token builder 51 (106), reset 43 / 37; session 29: 62 / 52, reset 44 / 38 (copy=True,
# the default; 3 fewer with copy=False); session 42, the token step (with the autoreset and the
# task hash) and mask of the native automaton one call each (NativeAutomaton.env_step and
# env_mask: a kernel each on a GPU): token env 24, reset 41. The counts do not depend on num_envs or on the
# data (no data-dependent branch on the device path). The bounds leave ~10% headroom (6 ops): a
# change that adds per-field ops (the task hash recomputed from the seed every step: +12, a
# where per field, a gather per observation key) fails here. Raise them only with a reason.
BOUND = {"token": 30, "batch": 55, "scorer": 56, "reset": 47}


def _count_ops():
    spec = importlib.util.spec_from_file_location("vramgym_bench_envs_ops", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.count_ops


@pytest.mark.parametrize("batch", [False, True])
@pytest.mark.parametrize("n", [1, 300])
def test_step_op_count_is_bounded(batch, n):
    env = SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=16, device="cpu", batch=batch)
    c = _count_ops()(env, steps=6, seed=n)
    step, reset = c["step_max"], c["reset"]
    name = "batch" if batch else "token"
    assert step["aten"] <= BOUND[name], (name, step["aten"], c["last_step_ops"])
    assert step["scorer_aten"] <= BOUND["scorer"], (step["scorer_aten"], c["last_step_ops"])
    assert reset["aten"] <= BOUND["reset"], reset
    # the native automaton is one call per mask and per step (the env's own: env_mask, and
    # env_step with the autoreset), the scorer one per step, and no per-step call for the initial
    # rows (a gather of a per-task table)
    assert step["calls.scorer"] == 1
    assert "calls.automaton.initial" not in step
    if not batch:
        assert step["calls.automaton.env_mask"] == 1 and step["calls.automaton.env_step"] == 1
        assert "calls.automaton.mask" not in step and "calls.automaton.step" not in step
    else:
        assert not any(k.startswith("calls.automaton") for k in step)


def test_copy_false_shares_buffers_and_copy_true_does_not():
    n, steps = 40, 30
    envs = [SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=12, device="cpu", copy=c) for c in (True, False)]
    obs = [e.reset(seed=3)[0] for e in envs]
    rng = np.random.default_rng(0)
    kept = []
    for _ in range(steps):
        m = obs[0]["action_mask"].numpy().astype(bool)
        a = torch.as_tensor((rng.random(m.shape) + m).argmax(1))
        outs = [e.step(a) for e in envs]
        obs = [o[0] for o in outs]
        for k in obs[0]:
            np.testing.assert_array_equal(obs[0][k].numpy(), obs[1][k].numpy(), err_msg=k)
        for x, y in zip(outs[0][1:4], outs[1][1:4]):
            np.testing.assert_array_equal(x.numpy(), y.numpy())
        kept.append(({k: v.clone() for k, v in obs[0].items()}, obs[0]))
    for snapshot, o in kept:   # copy=True observations are never written afterwards
        for k in o:
            assert torch.equal(snapshot[k], o[k]), k
    assert obs[1]["tokens"].data_ptr() == envs[1].state.tokens.data_ptr()
    assert obs[0]["tokens"].data_ptr() != envs[0].state.tokens.data_ptr()


def test_numpy_out_copy_false_matches():
    n = 16
    a, b = (SynthesisVectorEnv(num_envs=n, bank=BANK, max_len=12, copy=c, batch=True) for c in (True, False))
    oa, ob = a.reset(seed=1)[0], b.reset(seed=1)[0]
    bodies = np.full((n, 12), V.END)
    for _ in range(4):
        ra, rb = a.step(bodies), b.step(bodies)
        for k in ra[0]:
            np.testing.assert_array_equal(ra[0][k], rb[0][k])
        np.testing.assert_array_equal(ra[1], rb[1])


@pytest.mark.parametrize("env_id", ["vramgym/Synthesis-v0", "vramgym/SynthesisBatch-v0", "vramgym/NeuralCompile-v0"])
@pytest.mark.parametrize("copy", [True, False])
def test_step_results_are_separate_arrays(env_id, copy):
    """The batch env returned one zero tensor as both truncated and info["invalid_action"]:
    a user who wrote into one changed the other. A step's reward, terminated, truncated and
    invalid_action arrays share no memory with each other, whatever the copy flag."""
    import gymnasium as gym
    import vramgym.envs  # noqa: F401
    vec = gym.make_vec(env_id, num_envs=5, vectorization_mode="vector_entry_point", bank=BANK, copy=copy)
    vec.reset(seed=0)
    shape = (5,) + vec.single_action_space.shape
    for _ in range(3):
        _, r, term, trunc, info = vec.step(np.zeros(shape, dtype=np.int64))
        arrays = [r, term, trunc, info["invalid_action"]]
        for i in range(4):
            for j in range(i + 1, 4):
                assert not np.shares_memory(arrays[i], arrays[j]), (i, j)
