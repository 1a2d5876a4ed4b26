"""Threads and processes around the core and the envs (session 23's concurrency audit): the C
core releases the GIL, so Python threads really run in it at once. Each test is a case that
crashed, hung or silently mixed state before its fix."""
import os
import signal
import subprocess
import sys
import textwrap
import threading

import gymnasium as gym
import numpy as np
import pytest

import vramgym.envs  # noqa: F401  (registers the envs)
from vramgym.compiler import compile_tokens, tokenize
from vramgym.envs.bank import TaskBank
from vramgym.vm import cpu

BANK = TaskBank.from_names(["sum_list", "gcd"], n_tests=4)


@pytest.mark.parametrize("env_id", vramgym.envs.ENV_IDS)
def test_one_env_refuses_a_second_thread_and_goes_on(env_id):
    """Two threads stepping one vector env mixed its rows silently (2,030 of 2,048 rows out of
    step with their automaton). Now the second caller gets a RuntimeError, and the env is unharmed."""
    vec = gym.make_vec(env_id, num_envs=4, vectorization_mode="vector_entry_point", bank=BANK)
    env = vec.unwrapped
    env.reset(seed=0)
    inside, release = threading.Event(), threading.Event()
    core = env.core
    name = "step_reset" if hasattr(core, "step_reset") else "step"
    real = getattr(core, name)

    def slow(*args, **kwargs):  # the first caller waits inside the step until told to go on
        inside.set()
        release.wait(30)
        return real(*args, **kwargs)

    actions = np.zeros(vec.action_space.shape, dtype=np.int64)
    setattr(core, name, slow)
    errors = []
    first = threading.Thread(target=lambda: errors.append(vec.step(actions)))
    first.start()
    try:
        assert inside.wait(30)
        with pytest.raises(RuntimeError, match="another thread"):
            vec.step(actions)
        with pytest.raises(RuntimeError, match="another thread"):
            vec.reset(seed=1)
    finally:
        release.set()
        first.join(30)
        setattr(core, name, real)
    assert len(errors) == 1  # the first step finished
    vec.step(actions)        # and the env goes on
    vec.reset(seed=2)


def test_compile_tokens_hands_the_core_private_copies(monkeypatch):
    """The core trusts the checks of tokens and offsets; with the caller's own arrays, another
    thread writing to them during the call crashed it (an offset past the end) or hung it (no
    final EOF). The arrays the core reads must be copies."""
    toks = tokenize("def f(a: int) -> int:\n    return a + 1\n")
    offsets = np.array([0, len(toks)], dtype=np.int64)
    seen = {}
    real = cpu.compile_tokens_batch

    def spy(tokens, offs, *args):
        seen["shared"] = np.shares_memory(tokens, toks) or np.shares_memory(offs, offsets)
        return real(tokens, offs, *args)

    monkeypatch.setattr(cpu, "compile_tokens_batch", spy)
    res = compile_tokens(toks, offsets)
    assert seen["shared"] is False and res.lengths[0] > 0


def test_a_bad_thread_count_in_the_environment_is_an_error_for_the_masks_too(monkeypatch):
    """VRAMGYM_THREADS reached the mask automaton unchecked: 'abc' gave a bare int() error,
    4294967298 wrapped to 2 in the C call."""
    from vramgym.envs import grammar_native
    for bad in ("abc", "4294967298", "100000", "-1"):
        monkeypatch.setenv("VRAMGYM_THREADS", bad)
        with pytest.raises(ValueError, match="VRAMGYM_THREADS"):
            grammar_native._threads()
    monkeypatch.setenv("VRAMGYM_THREADS", "3")
    assert grammar_native._threads() == 3


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_while_another_thread_runs_a_batch_leaves_the_child_working():
    """A fork() while another thread held the core's scratch-pool lock left the lock held in the
    child forever: with 530,737 kept scratches, 5 of 20 children deadlocked on the build before
    the fix, 0 of 20 after (session 23). This smaller version (a few seconds) rarely catches the
    old build; it guards the path. A subprocess runs the forks, so a deadlock fails the test
    instead of hanging it."""
    script = textwrap.dedent("""
        import os, signal, threading, time
        from vramgym.compiler import compile_batch
        from vramgym.vm import run_batch, encode_tuples, VMConfig
        progs = compile_batch(["def f(a: int) -> int:\\n    return a + 1\\n"]).to_programs(entry=0)
        one = encode_tuples([(1,)], ("int",))
        for s in range(1, 40):  # many kept scratches: each take() scans them under the lock
            for h in range(0, 40):
                run_batch(progs, one, config=VMConfig(stack_size=s, max_depth=1, heap_size=h, max_lists=1), nthreads=1)
        busy_cfg = VMConfig(stack_size=1 << 22, max_depth=0, heap_size=0, max_lists=0)
        stop = False
        def busy():
            while not stop:
                run_batch(progs, one, config=busy_cfg, nthreads=1)
        for _ in range(2):
            threading.Thread(target=busy, daemon=True).start()
        hung = 0
        for _ in range(20):
            time.sleep(0.01)
            pid = os.fork()
            if pid == 0:
                signal.alarm(10)
                r = run_batch(progs, one, nthreads=1)
                os._exit(0 if r.value[0] == 2 else 3)
            _, st = os.waitpid(pid, 0)
            assert not (os.WIFEXITED(st) and os.WEXITSTATUS(st) == 3), "wrong result in the child"
            hung += os.WIFSIGNALED(st)
        stop = True
        print("hung", hung)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["hung", "0"], out.stdout + out.stderr[-2000:]
