"""Bad input to user-defined tasks, task files and the batch scorers: a clear TypeError/ValueError
that names the argument (for task files: the file and the entry), or the documented outcome;
never a crash, a hang or a silently wrong answer. (The happy paths are in test_tasks.py,
test_evaluate_tasks.py and test_ray.py.)"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from vramgym.compiler import compile_source, tokenize
from vramgym.envs.tasks import ParamSpec, Signature, Task, get_task, load_tasks, save_tasks
from vramgym.vm import ProgramBatch, VMConfig, encode_results, encode_tuples
from vramgym.vm.evaluate import evaluate_tasks_cpu, execute_tasks_cpu
from vramgym.vm.values import Encoded

GOOD = {"name": "inc", "description": "n + 1", "difficulty": "easy", "signature": "def inc(n: int) -> int:",
        "inputs": [{"kind": "int", "lo": 0, "hi": 9}], "reference": ["def inc(n: int) -> int:", "    return n + 1"]}
CASES = {"name": "c", "signature": "def c(n: int) -> int:", "cases": [[[1], 2]]}
INC = "def inc(n: int) -> int:\n    return n + 1\n"


def write(tmp_path, text: str):
    path = tmp_path / "suite.json"
    path.write_text(text)
    return path


def suite(*tasks, **top) -> str:
    return json.dumps({"version": 1, "tasks": list(tasks), **top})


# -- task files -------------------------------------------------------------------------------

@pytest.mark.parametrize("entry, message", [
    ({**GOOD, "description": 5}, "description must be a string"),
    ({**GOOD, "reference": 5}, "reference must be source text or a list of lines"),
    ({**GOOD, "reference": {"def inc(n: int) -> int:": 1}}, "reference must be source text or a list of lines"),
    ({**GOOD, "inputs": [{"kind": ["int"]}]}, "kind must be one of"),
    ({**CASES, "cases": 5}, "cases must be a list"),
    ({**CASES, "cases": {"1": 2}}, "cases must be a list"),
    ({**CASES, "cases": [[[1.5], 2]]}, r"case 0, argument 'n': float is not a value"),
    ({**CASES, "cases": [[[1], None]]}, r"case 0, output: NoneType is not a value"),
    ({**CASES, "cases": [[[1], 2], [[1], 3]]}, "case 1: the arguments of case 0 with another output"),
    ({**CASES, "signature": "def c(n: int) -> int: return n"}, "text after the signature"),
])
def test_bad_entries_name_the_file_and_the_entry(tmp_path, entry, message):
    with pytest.raises(ValueError, match=message) as err:
        load_tasks(write(tmp_path, suite(GOOD | {"name": "first"}, entry)))
    assert "suite.json: task entry 1:" in str(err.value) and f"'{entry['name']}'" in str(err.value)


@pytest.mark.parametrize("text, message", [
    (suite(GOOD, extra=1), "no other keys"),
    (json.dumps({"version": True, "tasks": [GOOD]}), "expected"),
    ('{"version": 1, "version": 1, "tasks": []}', "'version' appears twice"),
    ("[" * 100_000 + "]" * 100_000, "not a valid task file"),
    ('{"version": 1, "tasks": [{"name": "x", "difficulty": ' + "9" * 5000 + "}]}", "not a valid task file"),
], ids=["extra key", "version true", "repeated key", "deep nesting", "huge int"])
def test_bad_files(tmp_path, text, message):
    with pytest.raises(ValueError, match=message) as err:
        load_tasks(write(tmp_path, text))
    assert "suite.json" in str(err.value)


def test_file_paths_and_encodings(tmp_path):
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe{}")
    with pytest.raises(ValueError, match="bin.json: not a valid task file: not UTF-8"):
        load_tasks(tmp_path / "bin.json")
    with pytest.raises(TypeError):   # an int is not a path (open() would take it as a file descriptor)
        load_tasks(0)
    with pytest.raises(TypeError):
        save_tasks([get_task("gcd")], 1)
    with pytest.raises(FileNotFoundError):
        load_tasks(tmp_path / "missing.json")


def test_save_tasks_rejects_what_load_tasks_would(tmp_path):
    path = tmp_path / "out.json"
    with pytest.raises(ValueError, match="'gcd' is given twice"):
        save_tasks([get_task("gcd"), get_task("gcd")], path)
    with pytest.raises(TypeError, match="takes Tasks, got str"):
        save_tasks(["gcd"], path)
    assert not path.exists()  # nothing written
    # numpy values in examples are saved as plain ints and bools
    t = Task.from_examples("np", "def np_(a: int, b: bool) -> list[int]",
                           [((np.int64(3), np.bool_(True)), np.array([1, 2]))])
    save_tasks([t], path)
    back = load_tasks(path)["np"]
    assert back == t and back.examples(0, 1) == ([(3, True)], [[1, 2]])


def test_a_save_that_fails_leaves_the_previous_task_file_whole(tmp_path):
    """save_tasks used to open the file with "w" (emptying it) before writing: a write that
    failed part-way (here a file-size limit, as a full disk) destroyed the previous suite."""
    path = tmp_path / "suite.json"
    save_tasks([get_task("gcd")], path)
    before = path.read_bytes()
    code = ("import resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
            "from vramgym.envs.tasks import TASKS, save_tasks\n"
            "try:\n    save_tasks(list(TASKS.values()), sys.argv[1])\nexcept OSError:\n    sys.exit(3)\n")
    assert subprocess.run([sys.executable, "-c", code, str(path)]).returncode == 3  # the write did fail
    assert path.read_bytes() == before and load_tasks(path).keys() == {"gcd"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["suite.json"]  # no temporary file left
    save_tasks([get_task("gcd"), get_task("sum_list")], path)  # and a save that succeeds replaces it
    assert load_tasks(path).keys() == {"gcd", "sum_list"}


# -- Task construction ------------------------------------------------------------------------

def test_from_reference_bad_arguments():
    with pytest.raises(ValueError, match="task 't': reference must be source text"):
        Task.from_reference("t", None)
    with pytest.raises(TypeError, match="entry must be a function name"):
        Task.from_reference("t", INC, entry=0)   # 0 would quietly mean the first function
    with pytest.raises(ValueError, match="inputs must be a list of input specs"):
        Task.from_reference("t", INC, "int")
    with pytest.raises(ValueError, match="description must be a string"):
        Task.from_reference("t", INC, description=["x"])
    t = Task.from_reference("t", INC, ({"kind": "int", "lo": 1, "hi": 2} for _ in range(1)))  # any iterable
    assert t.inputs == (ParamSpec("int", 1, 2),)


def test_from_examples_bad_arguments():
    sig = "def add(a: int, b: int) -> int:"
    with pytest.raises(TypeError, match="task 'add': signature must be"):
        Task.from_examples("add", 5, [((1, 2), 3)])
    with pytest.raises(TypeError, match="task 'add': examples must be"):
        Task.from_examples("add", sig, 5)
    with pytest.raises(ValueError, match=r"task 'add': case 1: expected \[\[args...\], output\]"):
        Task.from_examples("add", sig, [((1, 2), 3), 4])
    with pytest.raises(ValueError, match="case 0: expected"):
        Task.from_examples("add", sig, [((1, 2), 3, 4)])
    with pytest.raises(ValueError, match="case 0, argument 'a': 1099511627776 does not fit"):
        Task.from_examples("add", sig, [((np.int64(2**40), 1), 3)])
    with pytest.raises(ValueError, match="case 0, argument 'a': expected int, got bool"):
        Task.from_examples("add", sig, [((np.bool_(True), 1), 3)])
    with pytest.raises(ValueError, match="case 2: the arguments of case 0 with another output"):
        Task.from_examples("add", sig, [((1, 2), 3), ((2, 2), 4), ((1, 2), 4)])
    with pytest.raises(ValueError, match="case 0, argument 'xs': a list argument holds at most 1024"):
        Task.from_examples("n", "def n(xs: list[int]) -> int", [(list(range(5000)), 5000)])  # (out_of_memory)
    assert Task.from_examples("n", "def n(xs: list[int]) -> int", [(list(range(1024)), 1024)]).cases
    same = Task.from_examples("add", sig, [((1, 2), 3), ((1, 2), 3)])  # a repeated case is harmless
    assert len(same.cases) == 2


def test_signature_and_lookup_types():
    with pytest.raises(TypeError, match="signature is a 'def ...' line"):
        Signature.parse(b"def f(a: int) -> int:")
    with pytest.raises(ValueError, match="text after the signature"):
        Signature.parse("def f(a: int) -> int::")
    with pytest.raises(TypeError, match="task name is a str"):
        get_task(["gcd"])


# -- drawing tests ----------------------------------------------------------------------------

@pytest.mark.parametrize("n, error", [(-1, ValueError), (2.5, TypeError), ("3", TypeError), (True, TypeError)])
def test_bad_counts(n, error):
    ref = Task.from_reference("t", INC)
    ex = Task.from_examples("x", "def x(a: int) -> int", [(1, 2)])
    for call in (lambda: ref.examples(0, n), lambda: ex.examples(0, n), lambda: ref.sample_inputs(0, n),
                 lambda: ParamSpec("int").sample(0, n)):
        with pytest.raises(error, match="n must be"):
            call()


@pytest.mark.parametrize("seed, error", [(-1, ValueError), (1.5, TypeError), ("a", TypeError), (True, TypeError)])
def test_bad_seeds(seed, error):
    with pytest.raises(error, match="seed must be"):
        Task.from_reference("t", INC).examples(seed, 3)


def test_reference_checked_under_the_scorers_limits():
    # about 80,000 steps per run: fine under the default fuel (100,000), impossible under an env's 20,000
    src = "def f(n: int) -> int:\n    i = 0\n    while i < 5000:\n        i += 1\n    return n\n"
    t = Task.from_reference("slow", src, [{"kind": "int", "lo": 0, "hi": 9}])
    inputs, outputs = t.examples(0, 2)
    assert outputs == [n for (n,) in inputs]
    with pytest.raises(ValueError, match="task 'slow': the reference traps out_of_fuel"):
        t.examples(0, 2, config=VMConfig(fuel=20_000))
    with pytest.raises(TypeError, match="config must be a VMConfig"):
        t.outputs([(1,)], config={"fuel": 1})


# -- evaluate_tasks_cpu / execute_tasks_cpu ---------------------------------------------------

SRC = "def f(a: int) -> int:\n    return a + 1\n"
TOK = tokenize(SRC)
TOKENS = np.zeros((3, len(TOK) + 2, 4), np.int32)
TOKENS[:, :len(TOK)] = TOK
COUNTS = np.full(3, len(TOK))
CODE = compile_source(SRC).code
IMAGES = np.zeros((3, len(CODE) + 3), np.uint32)
IMAGES[:, :len(CODE)] = CODE
LENS = np.full(3, len(CODE))
INS = encode_tuples([(1,), (2,), (5,), (6,)], ("int",))   # 2 tasks x 2 tests
EXP = encode_results([2, 3, 6, 7], "int")
RET = np.zeros(2, np.int32)
TIDS = np.array([0, 1, 1])


def scorers():
    return [(evaluate_tasks_cpu, TOKENS, COUNTS, "tokens", "counts"),
            (execute_tasks_cpu, IMAGES, LENS, "code", "code_len")]


def test_scorers_baseline():
    for fn, data, sizes, _, _ in scorers():
        passed, steps, ok = fn(data, sizes, TIDS, None, INS, EXP, 2, RET)
        assert passed.tolist() == [2, 2, 2] and ok.all() and (steps > 0).all()


@pytest.mark.parametrize("change, error, message", [
    ({"task_ids": TIDS + 0.5}, TypeError, "task_ids must be an integer array"),
    ({"task_ids": np.array([0, 2**64 - 1, 1], np.uint64)}, ValueError, "task_ids: values must lie in"),
    ({"task_ids": np.array([False, True, True])}, TypeError, "task_ids must be an integer array"),
    ({"active": np.array([0, 2, 1])}, ValueError, r"active: values must lie in \[0, 1\]"),
    ({"active": np.array(["False", "True", "True"])}, TypeError, "active must be an integer array"),
    ({"active": np.array([0.0, 0.5, 1.0])}, TypeError, "active must be an integer array"),
    ({"n_tests": 2.7}, TypeError, "n_tests must be an int"),
    ({"n_tests": "2"}, TypeError, "n_tests must be an int"),
    ({"n_tests": -2}, ValueError, "n_tests must be >= 0"),
    ({"ret_kinds": np.array([0.0, 0.0])}, TypeError, "ret_kinds must be an integer array"),
    ({"ret_kinds": np.array([0, 2**32])}, ValueError, r"ret_kinds: values must lie in \[0, 2\]"),
    ({"ret_kinds": 0}, ValueError, "ret_kinds must be 1-D"),
    ({"ret_kinds": np.array([0, 1])}, ValueError, r"expected value 2 \(task 1\) has kind 0, but ret_kinds\[1\] is 1"),
    ({"expected": encode_results([True] * 4, "bool")}, ValueError, "expected value 0 .task 0. has kind 1"),
    ({"expected": Encoded(np.zeros(0, np.int32), np.zeros(5, np.int64))}, ValueError, "is not a whole value"),
    ({"inputs": [(1,), (2,), (5,), (6,)]}, TypeError, "inputs must be an Encoded batch or a .words, offsets. pair"),
    ({"expected": None}, TypeError, "expected must be an Encoded batch"),
    ({"inputs": (INS.words.astype(float) + 0.5, INS.offsets)}, TypeError, "inputs: words must be an integer array"),
    ({"inputs": (INS.words.astype(np.int64) + 2**32, INS.offsets)}, ValueError, "inputs: words: values must lie"),
])
def test_shared_arguments(change, error, message):
    for fn, data, sizes, _, _ in scorers():
        args = {"task_ids": TIDS, "active": None, "inputs": INS, "expected": EXP, "n_tests": 2, "ret_kinds": RET}
        args.update(change)
        with pytest.raises(error, match=message):
            fn(data, sizes, args["task_ids"], args["active"], args["inputs"], args["expected"], args["n_tests"],
               args["ret_kinds"])


def test_program_arrays():
    for fn, data, sizes, dname, sname in scorers():
        with pytest.raises(TypeError, match=f"{dname} must be an integer array, got dtype float64"):
            fn(data.astype(np.float64) + 0.5, sizes, TIDS, None, INS, EXP, 2, RET)   # not truncated
        wide = data.astype(np.int64)
        wide[0, 0] += 2**32
        with pytest.raises(ValueError, match=f"{dname}: values must lie in"):
            fn(wide, sizes, TIDS, None, INS, EXP, 2, RET)                             # not wrapped
        with pytest.raises(TypeError, match=f"{sname} must be an integer array"):
            fn(data, sizes + 0.7, TIDS, None, INS, EXP, 2, RET)
        with pytest.raises(TypeError, match=f"{sname} must be an integer array"):
            fn(data, np.array(["7"] * 3), TIDS, None, INS, EXP, 2, RET)
        with pytest.raises(ValueError, match=rf"{sname} must have shape \(3,\)"):
            fn(data, sizes[:2], TIDS, None, INS, EXP, 2, RET)
        # documented outcomes: non-contiguous arrays work; sizes outside [0, S] / [0, W] give rows
        # that are clamped (tokens: then fail to compile here) or invalid; an empty batch is empty
        a = fn(np.asfortranarray(data), sizes, TIDS, None, INS, EXP, 2, RET)
        assert a[0].tolist() == [2, 2, 2]
        p, s, ok = fn(data, np.array([-5, 2**40, sizes[2]]), TIDS, None, INS, EXP, 2, RET)
        assert ok.tolist() == [False, False, True] and p.tolist() == [0, 0, 2] and s[:2].tolist() == [0, 0]
        p, s, ok = fn(data[:0], sizes[:0], TIDS[:0], None, INS, EXP, 2, RET)
        assert p.shape == s.shape == ok.shape == (0,)
    # bytecode as int32 views (negative words) is the same image
    assert execute_tasks_cpu(IMAGES.view(np.int32), LENS, TIDS, None, INS, EXP, 2, RET)[0].tolist() == [2, 2, 2]


def test_inactive_rows_may_hold_any_task_id():
    for fn, data, sizes, _, _ in scorers():
        p, s, ok = fn(data, sizes, np.array([0, -1, 99]), np.array([True, False, False]), INS, EXP, 2, RET)
        assert p.tolist() == [2, 0, 0] and ok.tolist() == [True, False, False]
        with pytest.raises(ValueError, match=r"task_ids of active rows must be in \[0, 2\)"):
            fn(data, sizes, np.array([0, -1, 99]), None, INS, EXP, 2, RET)


# -- RayEvaluator: checked in the driver, no cluster needed -----------------------------------

def test_ray_evaluator_arguments():
    pytest.importorskip("ray", reason="ray is not installed")
    from vramgym.vm.ray_evaluator import RayEvaluator
    for kw, error, message in [({"num_workers": 0}, ValueError, "num_workers must be None .all. or >= 1"),
                               ({"num_workers": 1.5}, TypeError, "num_workers must be None or an int"),
                               ({"num_gpus": 2}, ValueError, "num_gpus applies to backend='cuda'")]:
        with pytest.raises(error, match=message):
            RayEvaluator(backend="cpu", **kw)
    with pytest.raises(ValueError, match="num_workers applies to backend='cpu'"):
        RayEvaluator(num_workers=2)

    ev = object.__new__(RayEvaluator)   # no actors: every check below runs before anything is sent
    ev.backend, ev.actors = "cpu", []
    pb = ProgramBatch.from_programs([compile_source(SRC)] * 2, "f")
    ins, exp = encode_tuples([(1,), (2,)], ("int",)), encode_results([2, 3], "int")
    for args, kw, error, message in [
        ((pb, ins, (np.array([0.9, 1.2]), np.array([0, 1]))), {}, TypeError, "run_prog must be an integer array"),
        ((pb, ins, (np.array([2**32, 1]), np.array([0, 1]))), {}, ValueError, "run_prog: values must lie"),
        ((pb, ins, np.zeros(2, int)), {}, TypeError, "runs must be a pair"),
        ((pb, ins, (np.zeros(3, int), np.zeros(2, int))), {}, ValueError, "same length"),
        (([compile_source(SRC)], ins), {}, TypeError, "programs must be a ProgramBatch"),
        ((pb, [(1,)]), {}, TypeError, "inputs must be an Encoded batch"),
        ((pb, ins), {"expected": encode_results([2], "int")}, ValueError, "expected needs one value per input"),
        ((pb, ins), {"out_cap": -1}, ValueError, "out_cap must be an int"),
        ((pb, ins), {"config": {"fuel": 1}}, TypeError, "config must be a VMConfig"),
    ]:
        with pytest.raises(error, match=message):
            ev.run_batch(*args, **kw)
    ev.backend = "cuda"
    with pytest.raises(ValueError, match=r"offsets: values must lie in \[0, 1\]"):
        ev.evaluate(np.zeros((1, 4), np.int32), [0, 5], ins, exp)
    with pytest.raises(ValueError, match="non-decreasing"):
        ev.evaluate(np.zeros((2, 4), np.int32), [0, 2, 1], ins, exp)


# --- TaskBank over such tasks -----------------------------------------------------------------

def test_task_bank_names_what_is_wrong():
    from vramgym.envs.bank import TaskBank
    with pytest.raises(TypeError, match=r"tasks\[0\] must be a Task"):
        TaskBank(["gcd"])
    five = Task.from_reference("five", "def five(a: int, b: int, c: int, d: int, e: int) -> int:\n    return a\n",
                               [{"kind": "int"}] * 5)
    with pytest.raises(ValueError, match="task 'five'"):
        TaskBank([five])


def test_task_bank_warns_when_its_fuel_does_not_cover_a_reference():
    """A reference that needs more steps than the bank gives candidates makes tests nobody can
    pass: the bank warns (naming the task) and keeps the tests (a low fuel may be chosen)."""
    import warnings
    from vramgym.envs.bank import TaskBank
    from vramgym.vm import VMConfig
    slow = Task.from_reference("slow", "def slow(n: int) -> int:\n    s = 0\n    for i in range(n):\n"
                               "        s += i % 7\n    return s\n", [{"kind": "int", "lo": 5000, "hi": 8000}])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        roomy = TaskBank([slow], n_tests=4, config=VMConfig(fuel=1_000_000))
    with pytest.warns(UserWarning, match=r"task .slow.: the reference traps out_of_fuel .* \(fuel=20000\)"):
        tight = TaskBank([slow], n_tests=4, config=VMConfig(fuel=20_000))
    assert np.array_equal(tight.expected.words, roomy.expected.words)


def test_only_shown_examples_must_fit_the_example_width():
    """Tests past the shown examples may be longer than example_width (a list spec up to 200)."""
    from vramgym.envs.bank import TaskBank
    t = Task.from_reference("t", "def t(xs: list[int]) -> int:\n    return len(xs)\n", [{"kind": "list", "len": [0, 200]}])
    with pytest.raises(ValueError, match="task 't': an example input needs"):
        TaskBank([t], n_tests=16, seed=0, example_width=8)
    cases = [(([1, 2],), 2), (([3],), 1), (([],), 0), (([4, 5, 6],), 3), ((list(range(100)),), 100)]
    short = Task.from_examples("s", "def s(xs: list[int]) -> int", cases)
    built = []
    for seed in range(40):  # the cases come in a seeded order: where the long one is not shown
        try:
            built.append(TaskBank([short], n_tests=5, n_examples=4, seed=seed, example_width=8))
        except ValueError as e:
            assert "task 's': an example input needs 102 words" in str(e)
    assert built, "no seed left the 100-element case out of the shown examples"
    bank = built[0]
    assert bank.examples.shape == (1, 4, 8) and len(bank.inputs) == 5
    assert int(np.diff(bank.inputs.offsets).max()) == 102   # the long test is still scored


# --- audit, session 16 --------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [100, 500, 950])
def test_deeply_nested_case_values_are_a_value_error(tmp_path, depth):
    nested = "[" * depth + "1" + "]" * depth
    for case in (f"[[{nested}], 1]", f"[[[1]], {nested}]", nested):
        text = ('{"version": 1, "tasks": [{"name": "c", "signature": "def c(xs: list[int]) -> int:", "cases": ['
                + case + "]}]}")
        with pytest.raises(ValueError):  # (was a RecursionError from 500 deep until json's own limit)
            load_tasks(write(tmp_path, text))
    deep = [1]
    for _ in range(depth):
        deep = [deep]
    with pytest.raises(ValueError):
        Task.from_examples("c", "def c(xs: list[int]) -> int:", [((deep,), 1)])


def test_a_repeated_key_is_found_in_linear_time(tmp_path):
    import time
    keys = ", ".join(f'"k{i}": {i}' for i in range(40_000))
    path = write(tmp_path, '{"version": 1, "tasks": [], "x": {' + keys + ', "k39999": 0}}')
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="'k39999' appears twice"):
        load_tasks(path)
    assert time.perf_counter() - t0 < 5  # (46 s before: each key was compared with all before it)


@pytest.mark.parametrize("sig", [Signature("if", (("a", "int"),), "int"),
                                 Signature("f", (("a", "int"), ("a", "int")), "int"),
                                 Signature("len", (("a", "int"),), "int"), Signature("f", (("my-arg", "int"),), "int")])
def test_a_hand_made_signature_obeys_the_compilers_rules(sig, tmp_path):
    # it was accepted, saved, and refused by load_tasks
    with pytest.raises(ValueError, match="bad signature"):
        Task.from_examples("t", sig, [((1,) * len(sig.params), 2)])
    ok = Task.from_examples("t", Signature("f", (("a", "int"),), "int"), [((1,), 2)])
    save_tasks([ok], tmp_path / "ok.json")
    assert load_tasks(tmp_path / "ok.json")["t"] == ok


def test_case_lists_that_no_run_can_hold_are_refused():
    with pytest.raises(ValueError, match="output holds 5000 ints, more than the VM's list memory"):
        Task.from_examples("zeros", "def zeros(n: int) -> list[int]:", [(3, [0] * 3), (5000, [0] * 5000)])
    args = tuple([1] * 1024 for _ in range(5))
    with pytest.raises(ValueError, match="list arguments hold 5120 ints"):
        Task.from_examples("five", "def five(a: list[int], b: list[int], c: list[int], d: list[int], "
                           "e: list[int]) -> int:", [(args, 1)])
    assert Task.from_examples("zeros", "def zeros(n: int) -> list[int]:", [(4096, [0] * 4096)])


def test_a_bank_with_less_list_memory_than_a_case_needs_warns():
    from vramgym.envs.bank import TaskBank
    t = Task.from_examples("zeros", "def zeros(n: int) -> list[int]:", [(3, [0] * 3), (100, [0] * 100)])
    with pytest.warns(UserWarning, match="holds 100 ints of lists, more than this bank's list memory"):
        TaskBank([t], n_tests=4, example_width=128, config=VMConfig(heap_size=64))


def test_numpy_bounds_of_an_input_spec_are_python_ints():
    spec = ParamSpec("int", lo=np.int64(0), hi=np.int64(100), log=True)
    assert type(spec.lo) is int and all(0 <= v <= 100 for v in spec.sample(0, 50))  # (log: AttributeError)
    assert ParamSpec("int", lo=np.uint8(0), hi=np.uint8(255)).domain_size() == 256  # (uint8 wrapped to 0)
    assert all(-100 <= v <= 100 for v in ParamSpec("int", lo=np.int8(-100), hi=np.int8(100)).sample(1, 50))


def test_task_program_is_a_copy_of_the_shared_cache():
    t = get_task("abs_diff")
    want = t.examples(0, 3)
    p = t.program
    p.code[:] = 0  # a caller's edit reached every later examples() of every task with this source
    assert t.examples(0, 3) == want and get_task("abs_diff").program.code.any()


def test_task_bank_arguments():
    from vramgym.envs.bank import TaskBank
    with pytest.raises(ValueError, match="at least one task"):
        TaskBank(iter([]))
    for bad, exc in ((-1, ValueError), (0, ValueError), (True, TypeError), (2.0, TypeError)):
        with pytest.raises(exc, match="example_width"):
            TaskBank([get_task("gcd")], example_width=bad)
    assert len(TaskBank(iter([get_task("gcd")]), n_tests=4).tasks) == 1
