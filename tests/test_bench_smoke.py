"""Smoke test of experiments/bench_cpu.py: the --quick run builds the workloads, checks that
vramgym and CPython agree on every run, and writes the results table (no timing assertions)."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

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
