"""The task suite: every built-in reference against CPython, the input specs, the data format."""
from __future__ import annotations

import copy
import importlib.resources
import json

import numpy as np
import pytest

from vramgym.compiler import compile_source
from vramgym.envs.tasks import (TASKS, ParamSpec, Signature, Task, get_task, load_tasks, save_tasks,
                                task_names)
from vramgym.vm import Trap, execute
from vramgym.vm import opcodes as oc

N_INPUTS = 64
FUEL_SHARE = oc.DEFAULT_FUEL // 4  # references stay well inside the default budget


def run_cpython(source: str, entry: str, inputs):
    """CPython is the oracle: the reference is a valid Python program. Arguments are copied
    because a reference may mutate its lists."""
    ns: dict = {}
    exec(compile(source, "<reference>", "exec"), ns)
    return [ns[entry](*copy.deepcopy(args)) for args in inputs]


def spec_violation(spec: ParamSpec, v) -> str | None:
    values = v if spec.kind == "list" else [v]
    if spec.kind == "bool":
        return None if type(v) is bool else "not a bool"
    if spec.kind == "list":
        if type(v) is not list or not spec.len[0] <= len(v) <= spec.len[1]:
            return f"length {len(v)} outside {spec.len}"
        if spec.sorted and v != sorted(v):
            return "not sorted"
        if spec.distinct and len(set(v)) != len(v):
            return "not distinct"
    for x in values:
        if type(x) is not int or not spec.lo <= x <= spec.hi:
            return f"{x!r} outside [{spec.lo}, {spec.hi}]"
        if {"nonzero": x == 0, "even": x % 2 != 0, "odd": x % 2 != 1}.get(spec.constraint, False):
            return f"{x} is not {spec.constraint}"
    return None


# -- the built-in suite ---------------------------------------------------------------------


def test_suite_size_and_levels():
    assert len(TASKS) >= 40
    assert all(name == t.name for name, t in TASKS.items())
    for level, word in ((1, "easy"), (2, "medium"), (3, "hard")):
        assert task_names(level) == task_names(word) and len(task_names(level)) >= 8
    assert sorted(task_names(1) + task_names(2) + task_names(3)) == sorted(task_names())
    kinds = {(t.signature.kinds, t.signature.ret) for t in TASKS.values()}
    assert {("int",), ("int", "int"), ("list",), ("list", "int"), ("list", "list")} <= {k for k, _ in kinds}
    assert {"int", "bool", "list"} == {r for _, r in kinds}


def test_package_file_is_canonical(tmp_path):
    """The shipped JSON is exactly what save_tasks writes, so editing tools round-trip it."""
    shipped = importlib.resources.files("vramgym.envs").joinpath("task_suite.json").read_text()
    save_tasks(TASKS, tmp_path / "suite.json")
    assert (tmp_path / "suite.json").read_text() == shipped


@pytest.mark.parametrize("name", sorted(TASKS))
def test_reference_matches_cpython(name):
    task = TASKS[name]
    prog = compile_source(task.reference)
    assert task.reference.startswith(task.signature_line() + "\n")
    assert Signature.of(prog.function(task.signature.entry)) == task.signature
    inputs = task.sample_inputs(np.random.default_rng(1234), N_INPUTS)
    assert len(inputs) == N_INPUTS
    for args in inputs:
        assert len(args) == len(task.inputs)
        for spec, v in zip(task.inputs, args):
            assert spec_violation(spec, v) is None, (args, spec_violation(spec, v))
    results = execute(prog, task.signature.entry, inputs, steps=True)
    assert not [(a, r) for a, (r, _) in zip(inputs, results) if isinstance(r, Trap)]
    assert max(s for _, s in results) <= FUEL_SHARE
    got = [r for r, _ in results]
    assert got == run_cpython(task.reference, task.signature.entry, inputs)
    assert all(type(v) is type(w) for v, w in zip(got, run_cpython(task.reference, task.signature.entry, inputs)))
    ins, outs = task.examples(1234, N_INPUTS)
    assert ins == inputs and outs == got


@pytest.mark.parametrize("name", sorted(TASKS))
def test_generator_deterministic_per_seed(name):
    task = TASKS[name]
    a = task.sample_inputs(np.random.default_rng(7), 32)
    assert a == task.sample_inputs(7, 32) == task.sample_inputs(np.random.default_rng(7), 32)
    assert task.examples(7, 32) == task.examples(7, 32)


def test_different_seeds_give_different_inputs():
    differ = sum(t.sample_inputs(1, 16) != t.sample_inputs(2, 16) for t in TASKS.values())
    assert differ == len(TASKS)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_dict_round_trip(name):
    task = TASKS[name]
    d = task.to_dict()
    assert json.loads(json.dumps(d)) == d
    again = Task.from_dict(json.loads(json.dumps(d)))
    assert again == task and hash(again) == hash(task) and again.to_dict() == d


def test_save_load_round_trip(tmp_path):
    path = tmp_path / "tasks.json"
    save_tasks(list(TASKS.values()), path)
    loaded = load_tasks(path)
    assert loaded == TASKS and list(loaded) == list(TASKS)


def test_registry_lookup():
    assert get_task("gcd") is TASKS["gcd"]
    assert get_task("gcd").signature_line() == "def gcd(a: int, b: int) -> int:"
    with pytest.raises(KeyError, match="no task 'nope'"):
        get_task("nope")
    with pytest.raises(ValueError, match="difficulty"):
        task_names("impossible")


# -- input specs ----------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [
    ParamSpec("int", -5, 5, constraint="nonzero"),
    ParamSpec("int", -7, 8, constraint="even"),
    ParamSpec("int", -7, 8, constraint="odd"),
    ParamSpec("int", 0, 2**31 - 1, log=True),
    ParamSpec("int", -2**31, 2**31 - 1),
    ParamSpec("bool"),
    ParamSpec("list", -3, 3, len=(2, 5), constraint="nonzero"),
    ParamSpec("list", 0, 9, len=(0, 10), sorted=True, distinct=True),
    ParamSpec("list", 0, 1000, len=(1, 3), sorted=True, log=True),
])
def test_spec_draws_respect_spec(spec):
    values = spec.sample(np.random.default_rng(0), 2000)
    assert len(values) == 2000
    assert [v for v in values if spec_violation(spec, v)] == []
    if spec.kind == "int" and spec.domain_size() < 20:  # uniform: every allowed value shows up
        allowed = [x for x in range(spec.lo, spec.hi + 1) if spec_violation(spec, x) is None]
        assert sorted(set(values)) == allowed
    assert ParamSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_log_spec_covers_magnitudes():
    values = ParamSpec("int", 0, 10**9, log=True).sample(np.random.default_rng(0), 3000)
    digits = {len(str(v)) for v in values}
    assert digits == set(range(1, 10))  # 10**9 is the only 10-digit value


@pytest.mark.parametrize("d, message", [
    ({"kind": "float"}, "kind must be one of"),
    ({"kind": "int", "lo": 5, "hi": 1}, "lo 5 > hi 1"),
    ({"kind": "int", "lo": 0, "hi": 2**31}, "hi must be an int32"),
    ({"kind": "int", "lo": 0, "hi": 0, "constraint": "nonzero"}, "no value"),
    ({"kind": "int", "lo": 1, "hi": 1, "constraint": "even"}, "no value"),
    ({"kind": "int", "constraint": "prime"}, "constraint must be one of"),
    ({"kind": "int", "len": [0, 3]}, "unknown keys"),
    ({"kind": "bool", "lo": 0}, "unknown keys"),
    ({"kind": "list", "len": [3, 1]}, "len must be"),
    ({"kind": "list", "len": [0, 5000]}, "len must be"),
    ({"kind": "list", "len": [0, 10], "lo": 0, "hi": 3, "distinct": True}, "cannot fill a distinct list"),
    ({"kind": "list", "sorted": "yes"}, "must be true or false"),
    ({"lo": 0}, "with a 'kind'"),
])
def test_bad_specs(d, message):
    with pytest.raises(ValueError, match=message):
        ParamSpec.from_dict(d)


# -- user tasks -----------------------------------------------------------------------------

TRIPLE = "def triple(n: int) -> int:\n    return 3 * n\n"


def test_from_reference():
    task = Task.from_reference("triple", TRIPLE, [{"kind": "int", "lo": -1000, "hi": 1000}],
                               description="3n", difficulty="easy")
    assert task.difficulty == 1 and task.signature_line() == "def triple(n: int) -> int:"
    inputs, outputs = task.examples(0, 20)
    assert outputs == [3 * n for (n,) in inputs]
    assert Task.from_dict(task.to_dict()) == task

    # helpers, an explicit entry, specs by parameter name, and defaults for the others
    src = ("def helper(x: int) -> int:\n    return x + 1\n\n"
           "def shift(xs: list[int], k: int) -> list[int]:\n    out = []\n"
           "    for x in xs:\n        out.append(helper(x) + k)\n    return out\n")
    task = Task.from_reference("shift", src, {"k": {"kind": "int", "lo": 0, "hi": 3}}, entry="shift")
    assert task.inputs == (ParamSpec.default("list"), ParamSpec("int", 0, 3))
    inputs, outputs = task.examples(5, 10)
    assert outputs == [[x + 1 + k for x in xs] for xs, k in inputs]


def test_reference_that_traps_on_its_inputs_is_reported():
    task = Task.from_reference("inv", "def inv(n: int) -> int:\n    return 100 // n\n",
                               [{"kind": "int", "lo": -3, "hi": 3}])
    with pytest.raises(ValueError, match="task 'inv': the reference traps zero_division"):
        task.examples(0, 50)
    ok = Task.from_reference("inv", "def inv(n: int) -> int:\n    return 100 // n\n",
                             [{"kind": "int", "lo": -3, "hi": 3, "constraint": "nonzero"}])
    inputs, outputs = ok.examples(0, 50)
    assert outputs == [100 // n for (n,) in inputs]


def test_from_examples():
    cases = [((False, False), False), ((False, True), True), ((True, False), True), ((True, True), False)]
    task = Task.from_examples("xor", "def xor(a: bool, b: bool) -> bool", cases)
    assert task.reference is None and task.signature_line() == "def xor(a: bool, b: bool) -> bool:"
    inputs, outputs = task.examples(3, 4)  # all cases, in a seeded order
    assert sorted(zip(inputs, outputs)) == sorted(cases)
    inputs, outputs = task.examples(3, 10)  # cycles through all before repeating
    assert set(zip(inputs, outputs)) == set(cases) and task.examples(3, 10) == (inputs, outputs)
    assert task.sample_inputs(3, 10) == inputs
    assert Task.from_dict(json.loads(json.dumps(task.to_dict()))) == task

    # one parameter: the argument may stand alone; lists come back as fresh lists
    rev = Task.from_examples("rev", Signature.parse("def rev(xs: list[int]) -> list[int]:"),
                             [([1, 2], [2, 1]), ([], [])])
    inputs, outputs = rev.examples(0, 2)
    assert sorted(zip(inputs, outputs)) == [(([],), []), (([1, 2],), [2, 1])]
    inputs[0][0].append(9)
    assert rev.examples(0, 2)[0][0][0] != inputs[0][0]
    with pytest.raises(ValueError, match="has no reference"):
        rev.outputs([([1],)])


@pytest.mark.parametrize("cases, message", [
    ([], "at least one case"),
    ([((1,), 2)], "1 arguments for 2 parameters"),
    ([((1, True), 2)], "expected int, got bool"),
    ([((1, 2), [3])], "expected int, got list"),
    ([((1, 2**31), 2)], "does not fit"),
])
def test_bad_examples(cases, message):
    with pytest.raises(ValueError, match=f"task 'add'.*{message}"):
        Task.from_examples("add", "def add(a: int, b: int) -> int:", cases)


# -- bad task files -------------------------------------------------------------------------

GOOD = {"name": "inc", "description": "n + 1", "difficulty": "easy", "signature": "def inc(n: int) -> int:",
        "inputs": [{"kind": "int", "lo": 0, "hi": 9}], "reference": ["def inc(n: int) -> int:", "    return n + 1"]}


def write_suite(tmp_path, *tasks, version=1):
    path = tmp_path / "suite.json"
    path.write_text(json.dumps({"version": version, "tasks": list(tasks)}))
    return path


@pytest.mark.parametrize("change, message", [
    ({"reference": ["def inc(n: int) -> int:", "    return n +"]}, r"task 'inc': reference does not compile: 2:\d+: "),
    ({"reference": ["def inc(n: int) -> int:", "    return n / 2"]}, r"does not compile: 2:14: "),
    ({"signature": "def inc(m: int) -> int:"}, "reference signature 'def inc[(]n: int[)] -> int:' differs"),
    ({"signature": "def inc(n: int) -> bool:"}, "differs from the declared"),
    ({"signature": "def bump(n: int) -> int:"}, "reference defines no function 'bump'"),
    ({"signature": "def inc(n: float) -> int:"}, "bad signature"),
    ({"signature": "inc(n)"}, "a signature is one line"),
    ({"inputs": [{"kind": "list"}]}, "bad input spec for parameter 'n': kind 'list', but it is 'int'"),
    ({"inputs": [{"kind": "int", "lo": 3, "hi": 1}]}, "bad input spec for parameter 'n': lo 3 > hi 1"),
    ({"inputs": [{"kind": "int", "step": 2}]}, "bad input spec for parameter 'n': unknown keys .*step"),
    ({"inputs": []}, "0 input specs for 1 parameters"),
    ({"inputs": {"n": {"kind": "int"}}}, "inputs must be a list"),
    ({"difficulty": "extreme"}, "difficulty must be"),
    ({"difficulty": 4}, "difficulty must be"),
    ({"cases": [[[1], 2]]}, "exactly one of a reference"),
    ({"reference": None}, "missing reference"),
    ({"extra": 1}, "unknown extra"),
])
def test_bad_task_files(tmp_path, change, message):
    d = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(ValueError, match=message) as err:
        load_tasks(write_suite(tmp_path, d))
    assert "suite.json" in str(err.value) and "'inc'" in str(err.value)


def test_bad_suite_files(tmp_path):
    inputs, outputs = load_tasks(write_suite(tmp_path, GOOD))["inc"].examples(0, 3)
    assert outputs == [n + 1 for (n,) in inputs]
    with pytest.raises(ValueError, match="defined twice"):
        load_tasks(write_suite(tmp_path, GOOD, GOOD))
    with pytest.raises(ValueError, match="expected"):
        load_tasks(write_suite(tmp_path, GOOD, version=2))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        load_tasks(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="non-empty string 'name'"):
        load_tasks(write_suite(tmp_path, {**GOOD, "name": ""}))


def test_a_bank_runs_every_case_of_an_examples_task():
    """A body that fails one of 20 given examples never earns all_pass (a bank of 16 tests used to
    score a seeded sample of the 20). Fewer cases than tests repeat as evenly as the count allows."""
    from vramgym.envs import vocab as V
    from vramgym.envs.bank import TaskBank
    cases = [(n, n + (n == 13)) for n in range(20)]  # `return n` fails only n = 13
    task = Task.from_examples("almost_id", "def almost_id(n: int) -> int:", cases)
    for seed in range(3):
        with pytest.raises(ValueError, match=r"task 'almost_id' has 20 cases, more than this bank's n_tests=16: "
                                             r".*n_tests >= 20"):
            TaskBank([task], n_tests=16, seed=seed)
    body = np.array([V.encode(r"return <P0> \n <END>")])
    for n_tests in (20, 23):
        bank = TaskBank([task], n_tests=n_tests, seed=1)
        s = bank.score(body, np.array([0]))
        fails = [n for (n,) in task.examples(1, n_tests)[0]].count(13)  # the bank's tests: these, seed 1
        assert not s.all_pass[0] and fails >= 1 and round(s.pass_frac[0] * n_tests) == n_tests - fails
    few = Task.from_examples("id5", "def id5(n: int) -> int:", [(n, n) for n in range(5)])
    inputs, _ = few.examples(4, 16)
    counts = sorted(np.unique([a for (a,) in inputs], return_counts=True)[1].tolist())
    assert counts == [3, 3, 3, 3, 4]
    s = TaskBank([few], n_tests=16, seed=4).score(body, np.array([0]))
    assert s.all_pass[0] and s.pass_frac[0] == 1.0


# ---- session 30's mutation audit: bounds of the input generators and of cases -------------------

def test_param_spec_draws_reach_both_ends_of_their_ranges():
    from vramgym.envs.tasks import MAX_LIST_LEN
    assert ParamSpec("list", len=(0, MAX_LIST_LEN)).len == (0, MAX_LIST_LEN)   # the documented maximum
    with pytest.raises(ValueError):
        ParamSpec("list", len=(0, MAX_LIST_LEN + 1))
    draws = ParamSpec("int", lo=0, hi=1000, log=True).sample(0, 20000)
    assert min(draws) == 0 and max(draws) >= 900   # log draws still reach the top bits
    lens = [len(x) for x in ParamSpec("list", len=(0, 3)).sample(0, 2000)]
    assert min(lens) == 0 and max(lens) == 3


def test_example_cases_are_checked_exactly():
    with pytest.raises(ValueError):   # an extra argument is not dropped
        Task.from_examples("t", "def f(a: int, b: int) -> int", [((1, 2, 99), 3)])
    with pytest.raises(ValueError, match="list elements must be int, got True"):   # bools are not ints here
        Task.from_examples("t", "def f(xs: list[int]) -> int", [([True, False], 1)])
    t = Task.from_examples("t", "def f(a: int) -> int", [(-2**31, 0), (2**31 - 1, 1)])   # the int32 ends
    assert [c[0] for c in t.cases] == [(-2**31,), (2**31 - 1,)]
    with pytest.raises(ValueError):
        Task.from_examples("t", "def f(a: int) -> int", [(-2**31 - 1, 0)])


def test_an_example_may_fill_example_width_exactly():
    from vramgym.envs.bank import TaskBank
    t = Task.from_reference("inc", "def inc(n: int) -> int:\n    return n + 1\n")   # 2 words per example
    assert TaskBank([t], n_tests=4, example_width=2).examples.shape[-1] == 2
    with pytest.raises(ValueError, match="example_width"):
        TaskBank([t], n_tests=4, example_width=1)
