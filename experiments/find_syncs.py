"""Every host-device synchronization inside the environments' step on a GPU, with the Python stack
of each: the tests' sync check (torch's sync debug mode "error") stops at the first one; this runs
the envs with "warn" and lists them all, so one GPU session can fix them all.

    python experiments/find_syncs.py            # exit status 1 when a sync site is left
"""
from __future__ import annotations

import traceback
import warnings

import torch

from vramgym.envs.bank import TaskBank
from vramgym.envs.neural_compile import NUM_ACTIONS, NeuralCompileVectorEnv
from vramgym.envs.synthesis import SynthesisVectorEnv

TASKS = ["gcd", "sum_list", "reverse_list", "is_prime", "count_evens"]


def variants():
    # a bank of its own per env: constants one env put on the GPU must not hide another's lazy copy
    kw = lambda: dict(num_envs=256, bank=TaskBank.from_names(TASKS, n_tests=8), max_len=24, device="cuda")  # noqa: E731
    yield "token, native automaton", SynthesisVectorEnv(automaton="native", **kw())
    yield "token, torch automaton", SynthesisVectorEnv(automaton="torch", **kw())
    yield "token, cuda_graph", SynthesisVectorEnv(cuda_graph=True, **kw())
    yield "token, cuda_graph, torch automaton", SynthesisVectorEnv(cuda_graph=True, automaton="torch", **kw())
    yield "batch, cuda_graph", SynthesisVectorEnv(batch=True, cuda_graph=True, **kw())
    yield "token, copy=False", SynthesisVectorEnv(copy=False, **kw())
    yield "batch", SynthesisVectorEnv(batch=True, **kw())
    yield "neural compile", NeuralCompileVectorEnv(num_envs=256, bank=TaskBank.from_names(TASKS, n_tests=8), max_words=32,
                                                   device="cuda")
    yield "neural compile, cuda_graph", NeuralCompileVectorEnv(num_envs=256, bank=TaskBank.from_names(TASKS, n_tests=8),
                                                               max_words=32, device="cuda", cuda_graph=True)


def actions(env, obs, gen):
    if "action_mask" in obs:
        return torch.multinomial(obs["action_mask"].float(), 1, generator=gen)[:, 0]
    shape = env.single_action_space.shape or ()
    high = NUM_ACTIONS if isinstance(env, NeuralCompileVectorEnv) else int(env.single_action_space.high.max()) + 1
    return torch.randint(0, high, (env.num_envs, *shape), device="cuda", generator=gen)


def main() -> int:
    sites: dict[tuple, set] = {}

    def record(message, category, filename, lineno, file=None, line=None):
        if "called a synchronizing" not in str(message):   # not the "prototype" notice
            return
        stack = tuple(f"{f.filename.split('vramgym/')[-1]}:{f.lineno} {f.name}" for f in traceback.extract_stack()[:-1]
                      if "/torch/" not in f.filename and "warnings" not in f.filename)
        sites.setdefault(stack[-6:], set()).add(current)

    warnings.showwarning = record
    warnings.simplefilter("always")
    for current, env in variants():
        gen = torch.Generator(device="cuda").manual_seed(0)
        obs, _ = env.reset(seed=0)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(30):
                obs, *_ = env.step(actions(env, obs, gen))
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
        print(f"{current}: ran 30 steps")
    for stack, where in sites.items():
        print(f"\nsync in {sorted(where)}:\n  " + "\n  ".join(stack))
    print(f"\n{len(sites)} distinct sync sites")
    return 1 if sites else 0


if __name__ == "__main__":
    raise SystemExit(main())
