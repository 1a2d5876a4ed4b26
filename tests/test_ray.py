"""The Ray evaluator on a local Ray cluster of CPU actors: sharding a batch over actors and
putting the answers back together gives exactly what one process gives (the GPU actors use the
same code with the CUDA backend; their run is in tests/test_cuda_backend.py)."""
import numpy as np
import pytest

from vramgym.compiler import compile_batch, compile_source
from vramgym.compiler.random_programs import GeneratorConfig, generate_program, random_args
from vramgym.vm import VMConfig, encode_results, encode_tuples, run_batch
from vramgym.vm.ray_evaluator import RayEvaluator

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'vramgym[ray]')")
SEED = int(np.random.SeedSequence().entropy % (1 << 30))


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


def batch(n_programs: int, n_inputs: int, seed: int, ret: str = "int"):
    """Random programs of one signature, compiled, with inputs and expected values (from the
    CPU backend, half of them perturbed so that some runs fail the comparison)."""
    cfg = GeneratorConfig(entry_name="entry", entry_params=("int", "list"), entry_ret=ret)
    rng = np.random.default_rng(seed)
    progs = [generate_program(rng, cfg) for _ in range(n_programs)]
    compiled = compile_batch([p.source for p in progs], code_cap=8192)
    assert compiled.ok.all(), compiled.errors[~compiled.ok]
    entry = np.array([[f.name for f in compile_source(p.source).functions].index("entry") for p in progs])
    programs = compiled.to_programs(entry=entry, ret_kind=ret)
    args = random_args(rng, ("int", "list"), n_inputs)
    inputs = encode_tuples(args, ("int", "list"))
    expected = encode_results(list(rng.integers(-3, 3, n_inputs)), "int")
    return programs, inputs, expected


def test_cpu_actors_give_what_one_process_gives(local_ray):
    programs, inputs, expected = batch(40, 37, SEED)
    ev = RayEvaluator(backend="cpu", num_workers=2)
    assert len(ev.actors) == 2
    config = VMConfig(fuel=5000)
    for runs in (None, (np.repeat(np.arange(40), 3)[::-1].copy(), np.arange(120) % 37)):
        got = ev.run_batch(programs, inputs, runs, expected=expected, config=config)
        want = run_batch(programs, inputs, runs, expected=expected, config=config)
        for name in ("status", "value", "steps", "passed"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=f"{name} (seed {SEED})")
        assert len(got.status) == (40 * 37 if runs is None else 120)
    programs, inputs, _ = batch(20, 37, SEED + 2, "list")   # list results: each actor's ragged part, joined
    got, want = ev.run_batch(programs, inputs, out_cap=6), run_batch(programs, inputs, out_cap=6)
    assert want.out_off[-1] > 0
    for name in ("status", "value", "out_words", "out_off", "out_list"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=f"{name} (seed {SEED})")


def test_empty_batch_and_clear_errors(local_ray):
    programs, inputs, expected = batch(3, 4, SEED + 1)
    ev = RayEvaluator(backend="cpu", num_workers=2)
    res = ev.run_batch(programs, inputs, (np.zeros(0, np.int32), np.zeros(0, np.int32)), expected=expected)
    assert len(res.status) == 0
    res = ev.run_batch(programs, inputs, (np.zeros(0, np.int32), np.zeros(0, np.int32)), out_cap=3)
    assert res.out_list.shape == (0, 3) and res.out_off.tolist() == [0] and len(res.out_words) == 0
    with pytest.raises(RuntimeError, match="no GPU"):
        RayEvaluator(backend="cuda")
    with pytest.raises(NotImplementedError, match="CUDA"):
        ev.evaluate(np.zeros((1, 4), np.int32), np.array([0, 1]), inputs, expected)
    with pytest.raises(ValueError, match="backend"):
        RayEvaluator(backend="tpu")


def test_an_evaluator_whose_actors_cannot_start_fails_clearly(local_ray):
    programs, inputs, expected = batch(3, 4, SEED + 2)
    ev = RayEvaluator(backend="cpu", num_workers=2)  # holds both CPUs of the cluster
    # a second one sized by the cluster's total waited for them forever, in its first call
    with pytest.raises(RuntimeError, match=r"2 actors of one CPU each did not start within 3 s .* 0 free"):
        RayEvaluator(backend="cpu", num_workers=2, start_timeout=3)
    want = run_batch(programs, inputs, expected=expected)
    np.testing.assert_array_equal(ev.run_batch(programs, inputs, expected=expected).passed, want.passed)
    for bad in (0, -1.0, True, "5", float("inf"), 1e300, float("nan")):  # (inf and 1e300 crashed inside ray.get)
        with pytest.raises(ValueError, match="start_timeout"):
            RayEvaluator(backend="cpu", start_timeout=bad)
