"""Smoke test of experiments/bench_cpu.py: the --quick run builds the workloads, checks that
vramgym and CPython agree on every run, and writes the results table (no timing assertions)."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "experiments" / "bench_cpu.py"


def _load():
    spec = importlib.util.spec_from_file_location("vramgym_bench_cpu", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses and the worker pool look the module up by name
    spec.loader.exec_module(mod)
    return mod


def test_bench_quick(tmp_path):
    bench = _load()
    results = bench.main(["--quick", "--random-programs", "20", "--out", str(tmp_path)])
    assert results["correct"] is True
    pc = results["pass_counts"]
    assert pc["cpython"] == pc["vramgym"]
    assert 0 < pc["vramgym"][0] < results["config"]["programs"]  # some buggy copies fail
    metrics = [r["metric"] for s in results["sections"] for r in s["rows"]]
    assert any(m.startswith("compile (corpus)") for m in metrics)
    assert any(m.startswith("execute (corpus") for m in metrics)
    assert any(m.startswith("end to end (corpus") for m in metrics)
    saved = json.loads((tmp_path / "bench_cpu.json").read_text())
    assert saved["correct"] is True
    md = (tmp_path / "bench_cpu.md").read_text()
    assert "| metric |" in md and "Correctness check: passed" in md


def test_corpus_templates_are_valid():
    """Every template, with and without each of its bugs, renders to a program both sides run."""
    bench = _load()
    tasks = bench.make_corpus(2 * len(bench.TEMPLATES), 4, seed=3, bug_rate=0.5)
    cpy, vg = bench.verify(tasks, "corpus")
    bench.check_same(tasks, vg, cpy, "corpus")


def test_bench_envs_quick(tmp_path):
    spec = importlib.util.spec_from_file_location("vramgym_bench_envs", BENCH.parent / "bench_envs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.main(["--quick", "--device", "numpy", "cpu", "--out", str(tmp_path)])
    assert {(r["env"], r["device"]) for r in res["rows"]} == {
        (e, d) for e in ("Synthesis-v0", "SynthesisBatch-v0") for d in ("numpy", "cpu")}
    assert all(r["steps_per_s"] > 0 for r in res["rows"])
    assert "| env | device |" in (tmp_path / "bench_envs.md").read_text()


def test_bench_envs_single_env_rows(tmp_path):
    """--device single times gym.make's env (one env): both envs' rows, and a clear stop for what
    it does not take (more envs, the automaton alone)."""
    spec = importlib.util.spec_from_file_location("vramgym_bench_envs", BENCH.parent / "bench_envs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.main(["--quick", "--device", "single", "--num-envs", "1", "--out", str(tmp_path)])
    rows = {r["env"]: r for r in res["rows"]}
    assert set(rows) == {"Synthesis-v0", "SynthesisBatch-v0"} and all(r["num_envs"] == 1 for r in rows.values())
    assert rows["Synthesis-v0"]["programs_per_s"] > 0   # two whole episodes at least, scored
    assert rows["SynthesisBatch-v0"]["programs_per_s"] == rows["SynthesisBatch-v0"]["steps_per_s"] > 0
    for bad in (["--num-envs", "1", "8"], ["--num-envs", "1", "--env", "automaton"]):
        with pytest.raises(SystemExit):
            mod.main(["--quick", "--device", "single", "--out", str(tmp_path)] + bad)


def test_bench_envs_batch_repeats(tmp_path):
    """--batch-repeats K puts each sampled body in K envs: at most 1/K of a batch is distinct."""
    spec = importlib.util.spec_from_file_location("vramgym_bench_envs", BENCH.parent / "bench_envs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.main(["--quick", "--env", "batch", "--batch-repeats", "4", "--out", str(tmp_path)])
    share = {r["num_envs"]: r["distinct"] for r in res["rows"]}
    assert share[1] == 1.0 and 0 < share[8] <= 0.25, share
    assert "| distinct |" in (tmp_path / "bench_envs.md").read_text()
    with pytest.raises(SystemExit):
        mod.main(["--quick", "--env", "batch", "--batch-repeats", "0", "--out", str(tmp_path)])


def test_quick_runs_leave_the_recorded_results_alone_and_bad_arguments_stop_before_the_run(tmp_path, monkeypatch):
    """`bench_envs.py --quick` (README's smoke test) wrote over experiments/results/bench_envs.md;
    it now writes to results/quick/ unless --out is given. An --out that cannot be written, or a
    count out of range, stops the run before it measures anything (was a traceback at the end)."""
    spec = importlib.util.spec_from_file_location("vramgym_bench_envs", BENCH.parent / "bench_envs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import bench_out  # (bench_envs put experiments/ on sys.path)
    monkeypatch.setattr(bench_out, "RESULTS", tmp_path / "results")
    mod.main(["--quick", "--env", "token", "--device", "numpy", "--num-envs", "1"])
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["quick"]
    assert (tmp_path / "results" / "quick" / "bench_envs.md").exists()
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    calls = []
    monkeypatch.setattr(mod, "bench_token_env", lambda *a, **k: calls.append(a))
    for bad in (["--out", str(blocker)], ["--out", str(blocker / "sub")], ["--repeat", "0"], ["--seconds", "nan"],
                ["--num-envs", "0"], ["--torch-threads", "-1"], ["--warmup-steps", "-5"]):
        with pytest.raises(SystemExit) as e:
            mod.main(["--quick", "--env", "token", *bad])
        assert e.value.code == 2, bad
    assert calls == []


def test_scoring_tail_quick(tmp_path):
    """experiments/scoring_tail.py --quick: the same masked random trajectories under both budgets
    (the masks do not depend on rewards), so the same programs a burst, and the tasks' budgets
    can only cut executed steps and the slowest run; the model's SASS a step is at least the
    cheapest opcode's (30 here: a flat 35)."""
    import subprocess
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, str(root / "experiments" / "scoring_tail.py"), "--quick", "--out", str(tmp_path)],
                   check=True, capture_output=True, timeout=600)
    scaled, plain = json.loads((tmp_path / "scoring_tail.json").read_text())
    assert (scaled["fuel_scale"], plain["fuel_scale"]) == (8, float("inf"))
    assert scaled["bursts"] == plain["bursts"] > 5 and scaled["programs_per_burst"] == plain["programs_per_burst"] > 10
    assert 0 < scaled["lane_steps_per_burst"] < plain["lane_steps_per_burst"]
    assert scaled["slowest_run_mean"] <= plain["slowest_run_mean"]
    for r in (scaled, plain):
        assert r["slowest_run_p50"] <= r["slowest_run_p90"] and r["slowest_run_mean"] <= r["strided_slowest_warp_mean"]
        assert r["model_cost_per_lane_max_step"] >= 35
        assert 1 <= r["compile_busiest_warp_listed"] <= r["compile_busiest_warp_every_row"]
    assert "| fuel_scale |" in (tmp_path / "scoring_tail.md").read_text()


@pytest.mark.parametrize("args", [["--fuel-scale", "0"], ["--fuel-scale", "nan"], ["--costs", "/nonexistent.json"],
                                  ["--num-envs", "0"]])
def test_scoring_tail_bad_arguments(tmp_path, args):
    """Bad options: exit 2 with one line naming the option, before anything runs."""
    import subprocess
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, str(root / "experiments" / "scoring_tail.py"), *args, "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and args[0] in r.stderr.strip().splitlines()[-1], r.stderr
    assert not list(tmp_path.iterdir())
