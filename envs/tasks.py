"""The task suite: program-synthesis tasks as plain data.

A task is a signature the agent must implement, a way to draw test inputs, and the truth for
those inputs: either a reference solution in the language (the VM computes its outputs), or a
fixed list of input/output examples. Everything is data, so tasks load from and save to JSON:

    from vramgym.envs.tasks import TASKS, get_task, Task
    task = get_task("gcd")
    task.signature_line()                  # 'def gcd(a: int, b: int) -> int:'
    inputs, outputs = task.examples(seed=0, n=8)

    mine = Task.from_reference("triple", "def triple(n: int) -> int:\\n    return 3 * n\\n",
                               [{"kind": "int", "lo": -1000, "hi": 1000}])
    xor = Task.from_examples("xor", "def xor(a: bool, b: bool) -> bool",
                             [((False, False), False), ((False, True), True),
                              ((True, False), True), ((True, True), False)])
    save_tasks([mine, xor], "my_tasks.json"); load_tasks("my_tasks.json")

The JSON form of a task (`Task.to_dict`), declared once here:

    {"name": "gcd",                                  # unique key in a suite
     "description": "Greatest common divisor ...",  # what to compute, in words
     "difficulty": "medium",                        # "easy" | "medium" | "hard" (1 | 2 | 3)
     "signature": "def gcd(a: int, b: int) -> int:",
     "inputs": [ParamSpec, ...],                    # one per parameter (reference tasks)
     "reference": ["def gcd(a: int, b: int) -> int:", "    ..."],   # source lines
     "cases": [[[12, 18], 6], ...]}                 # instead of inputs + reference: [args, output]

A ParamSpec (`ParamSpec.to_dict`) draws one argument:

    {"kind": "int",  "lo": -100, "hi": 100, "constraint": "nonzero", "log": false}  # last two optional
    {"kind": "bool"}
    {"kind": "list", "len": [0, 12], "lo": -50, "hi": 50, "sorted": false, "distinct": false}

`lo`/`hi` bound values (for lists: every element), inclusive. `constraint` ("nonzero", "even"
or "odd") restricts values further; `sorted` gives a non-decreasing list; `distinct` a list
without repeats. Draws are uniform over the allowed values, or with `"log": true` uniform over
the bit length of the offset from `lo` (then 7 and 7,000,000 are both common, which digit and
bit tasks need to see). Draws are deterministic per seed: numpy's PCG64 `default_rng(seed)`,
integer arithmetic only, parameters drawn in order, one vectorized draw each.

A task file is {"version": 1, "tasks": [task, ...]} (no other keys; names unique; no key twice in
an object). load_tasks raises ValueError naming the file and the entry for anything else. Cases
are checked like arguments (int32 ints, bools, lists of ints; list arguments at most
MAX_LIST_LEN = 1024 long, as specs draw); the same arguments twice with two outputs is an error
(no program could pass both). A reference's outputs are computed when
examples are drawn: a run that traps (on inputs the specs allow, or past the VM's limits) is a
ValueError then.
"""
from __future__ import annotations

import copy
import functools
import importlib.resources
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from vramgym.compiler import CompileError, compile_source
from vramgym.vm import Program, Trap, VMConfig, execute
from vramgym.vm.opcodes import DEFAULT_HEAP
from vramgym.vm.values import INT32_MAX, INT32_MIN, check_int, check_value, kind_of

# The end of a def line: '->', the return type and the ':' (group 0 ends after the ':').
_SIGNATURE_END = re.compile(r"->\s*(int|bool|list\s*\[\s*int\s*\])\s*:")

__all__ = ["Task", "Signature", "ParamSpec", "TASKS", "get_task", "task_names", "load_tasks", "save_tasks",
           "DIFFICULTIES", "FORMAT_VERSION"]

KINDS = ("int", "bool", "list")
DIFFICULTIES = {"easy": 1, "medium": 2, "hard": 3}
CONSTRAINTS = ("nonzero", "even", "odd")
MAX_LIST_LEN = 1024  # a quarter of the VM's default list memory: room for the program's own lists
FORMAT_VERSION = 1
SUITE_FILE = "task_suite.json"

Args = tuple  # one input: a tuple with one value per parameter


# ---------------------------------------------------------------------------------------------
# Signature


def _type_name(kind: str) -> str:
    return "list[int]" if kind == "list" else kind


@dataclass(frozen=True)
class Signature:
    """The function the agent writes: entry name, parameters (name, kind) and return kind."""

    entry: str
    params: tuple[tuple[str, str], ...]
    ret: str

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(k for _, k in self.params)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.params)

    def line(self) -> str:
        ps = ", ".join(f"{n}: {_type_name(k)}" for n, k in self.params)
        return f"def {self.entry}({ps}) -> {_type_name(self.ret)}:"

    @classmethod
    def parse(cls, line: str) -> "Signature":
        """A signature from its `def` line (the trailing colon is optional). The real compiler
        parses it, under a body that always ends safely, so every rule of the language (names,
        types, limits) applies as it will to the agent's program."""
        if not isinstance(line, str):
            raise TypeError(f"a signature is a 'def ...' line (str), got {type(line).__name__}")
        text = line.strip()
        if not text.startswith("def ") or "\n" in text or "\r" in text:
            raise ValueError(f"a signature is one line 'def name(param: type, ...) -> type:', got {line!r}")
        if not text.endswith(":"):
            text += ":"
        try:
            prog = compile_source(text + "\n    while True:\n        pass\n")
        except CompileError as e:
            # an error in the body added above, or after the signature's own ':' (the compiler
            # reports a syntax error there before the stray indent of the body): more than a signature
            end = _SIGNATURE_END.search(text)
            if e.line > 1 or (end is not None and e.col > end.end()):
                raise ValueError(f"bad signature {line!r}: text after the signature's ':'") from None
            raise ValueError(f"bad signature {line!r}: {e.line}:{e.col}: {e.message}") from None
        if len(prog.functions) != 1:
            raise ValueError(f"bad signature {line!r}: text after the signature's ':'")
        return cls.of(prog.functions[0])

    @classmethod
    def of(cls, fn) -> "Signature":
        """The signature of a compiled vramgym.vm.Function."""
        return cls(fn.name, tuple(zip(fn.param_names, fn.params)), fn.ret)


# ---------------------------------------------------------------------------------------------
# Input specs


@dataclass(frozen=True)
class ParamSpec:
    """How to draw one argument (see the module docstring for the JSON form)."""

    kind: str
    lo: int = -100
    hi: int = 100
    len: tuple[int, int] = (0, 12)
    sorted: bool = False
    distinct: bool = False
    constraint: str | None = None
    log: bool = False

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        for key in ("lo", "hi"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not INT32_MIN <= v <= INT32_MAX:
                raise ValueError(f"{key} must be an int32, got {v!r}")
            object.__setattr__(self, key, int(v))  # (numpy ints: np.uint8 arithmetic would wrap)
        if self.lo > self.hi:
            raise ValueError(f"lo {self.lo} > hi {self.hi}")
        if self.constraint is not None and self.constraint not in CONSTRAINTS:
            raise ValueError(f"constraint must be one of {', '.join(CONSTRAINTS)}, got {self.constraint!r}")
        if any(not isinstance(getattr(self, k), bool) for k in ("sorted", "distinct", "log")):
            raise ValueError("sorted, distinct and log must be true or false")
        if self.kind != "list" and (self.sorted or self.distinct):
            raise ValueError("sorted and distinct apply to lists only")
        if self.kind == "bool" and (self.constraint is not None or self.log):
            raise ValueError("bool parameters take no constraint or log")
        if self.distinct and self.log:
            raise ValueError("distinct lists are drawn uniformly (log does not apply)")
        n = tuple(self.len) if isinstance(self.len, (tuple, list)) else None
        if (n is None or len(n) != 2 or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in n)
                or not 0 <= n[0] <= n[1] <= MAX_LIST_LEN):
            raise ValueError(f"len must be [min, max] with 0 <= min <= max <= {MAX_LIST_LEN}, got {self.len!r}")
        object.__setattr__(self, "len", (int(n[0]), int(n[1])))
        if self.kind != "bool" and self.domain_size() == 0:
            raise ValueError(f"no value in [{self.lo}, {self.hi}] is {self.constraint}")
        if self.kind == "list" and self.distinct and self.domain_size() < self.len[1]:
            raise ValueError(f"{self.domain_size()} allowed values cannot fill a distinct list of {self.len[1]}")

    # Allowed values are indexed 0..domain_size()-1 in increasing order, so a uniform index is a
    # uniform value and distinct values are distinct indices.
    def domain_size(self) -> int:
        if self.constraint in ("even", "odd"):
            first = self._first()
            return 0 if first > self.hi else (self.hi - first) // 2 + 1
        return self.hi - self.lo + 1 - (self.constraint == "nonzero" and self.lo <= 0 <= self.hi)

    def _first(self) -> int:  # the smallest allowed value of an even/odd constraint
        return self.lo + ((self.lo - (self.constraint == "odd")) % 2)

    def _values(self, index: np.ndarray) -> np.ndarray:
        if self.constraint in ("even", "odd"):
            return self._first() + 2 * index
        v = self.lo + index
        if self.constraint == "nonzero" and self.lo <= 0 <= self.hi:
            v = v + (v >= 0)  # skip the hole at zero
        return v

    def _indices(self, rng: np.random.Generator, n: int) -> np.ndarray:
        size = self.domain_size()
        if not self.log:
            return rng.integers(0, size, n, dtype=np.int64)
        # A bit length b in 0..B uniformly, then an index with that bit length uniformly.
        b = rng.integers(0, (size - 1).bit_length() + 1, n, dtype=np.int64)
        low = np.where(b == 0, 0, np.left_shift(1, np.maximum(b - 1, 0)))
        high = np.minimum(np.left_shift(1, b) - 1, size - 1)
        return rng.integers(low, high + 1, dtype=np.int64)

    def sample(self, rng: np.random.Generator, n: int) -> list:
        """n arguments as Python values (int, bool, list[int]); rng: a numpy Generator or a seed."""
        rng, n = _rng(rng), _count(n)
        if self.kind == "bool":
            return [bool(b) for b in rng.integers(0, 2, n)]
        if self.kind == "int":
            return self._values(self._indices(rng, n)).tolist()
        lens = rng.integers(self.len[0], self.len[1] + 1, n)
        if self.distinct:
            rows = [rng.choice(self.domain_size(), int(k), replace=False) for k in lens]
        else:
            rows = np.split(self._indices(rng, int(lens.sum())), np.cumsum(lens)[:-1])
        return [self._values(np.sort(r) if self.sorted else r).tolist() for r in rows]

    def to_dict(self) -> dict:
        if self.kind == "bool":
            return {"kind": "bool"}
        d = {"kind": self.kind}
        if self.kind == "list":
            d["len"] = list(self.len)
        d["lo"], d["hi"] = int(self.lo), int(self.hi)
        if self.kind == "list":
            d["sorted"], d["distinct"] = self.sorted, self.distinct
        if self.constraint is not None:
            d["constraint"] = self.constraint
        if self.log:
            d["log"] = True
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "ParamSpec":
        if not isinstance(d, Mapping) or "kind" not in d:
            raise ValueError(f"an input spec is an object with a 'kind', got {d!r}")
        if d["kind"] not in KINDS:  # (before it is used as a key: it may be unhashable)
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {d['kind']!r}")
        allowed = {"bool": {"kind"}, "int": {"kind", "lo", "hi", "constraint", "log"}}.get(
            d["kind"], {"kind", "lo", "hi", "len", "sorted", "distinct", "constraint", "log"})
        extra = set(d) - allowed
        if extra:
            raise ValueError(f"unknown keys for a {d['kind']} spec: {', '.join(sorted(map(str, extra)))}")
        return cls(**d)

    @classmethod
    def default(cls, kind: str) -> "ParamSpec":
        return cls(kind, -50, 50) if kind == "list" else cls(kind)


# ---------------------------------------------------------------------------------------------
# Tasks


@functools.lru_cache(maxsize=None)
def _compile(source: str) -> Program:
    return compile_source(source)


def _plain(v):
    """numpy values as Python ones (arrays as lists), so cases compare, hash and save as JSON."""
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return bool(v) if isinstance(v, np.bool_) else int(v) if isinstance(v, np.integer) else v


def _freeze(v):  # lists -> tuples, so tasks are hashable values
    return tuple(_freeze(x) for x in v) if isinstance(v, (list, tuple)) else v


def _thaw(v):
    return [int(x) for x in v] if isinstance(v, tuple) else v


def _normalize_source(source: str | Sequence[str]) -> str:
    if isinstance(source, str):
        lines = re.split(r"\r\n|\r|\n", source.rstrip("\r\n"))
    elif isinstance(source, (list, tuple)) and all(isinstance(s, str) for s in source):
        lines = list(source)
    else:  # (a dict would give its keys, bytes their byte values)
        raise TypeError(f"reference must be source text or a list of lines, got {type(source).__name__}")
    return "\n".join(lines) + "\n"


def _difficulty(d) -> int:
    if isinstance(d, str) and d in DIFFICULTIES:
        return DIFFICULTIES[d]
    if isinstance(d, int) and not isinstance(d, bool) and d in DIFFICULTIES.values():
        return d
    raise ValueError(f"difficulty must be 1-3 or one of {', '.join(DIFFICULTIES)}, got {d!r}")


def _rng(seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, (bool, float, str, bytes)):  # numpy would take True as 1 and some floats as ints
        raise TypeError(f"seed must be None, a non-negative int or a numpy Generator, got {seed!r}")
    try:
        return np.random.default_rng(seed)
    except (TypeError, ValueError) as e:
        raise type(e)(f"seed must be None, a non-negative int or a numpy Generator, got {seed!r} ({e})") from None


def _count(n) -> int:
    """A number of draws: a non-negative int (not a float or bool, which numpy would take or mangle)."""
    return check_int(n, "n", 0)


def _check_case_value(v, kind: str, where: str):
    """v (numpy values made plain) checked as a value of `kind`; TypeError/ValueError naming `where`."""
    v = _plain(v)
    try:
        kind_of(v)
    except TypeError as e:  # (its message does not say where)
        raise TypeError(f"{where}: {e}") from None
    check_value(v, kind, where)
    return v


@dataclass(frozen=True)
class Task:
    """One synthesis task. Exactly one of (`reference` with `inputs`) or `cases` is set.

    name, description, difficulty (1 easy, 2 medium, 3 hard), signature: what to write.
    reference: a full program in the language whose `signature.entry` is the truth.
    inputs: one ParamSpec per parameter, drawing test inputs for the reference.
    cases: fixed ((args...), output) pairs, for tasks given by examples only; lists are tuples.
    """

    name: str
    description: str
    difficulty: int
    signature: Signature
    reference: str | None = None
    inputs: tuple[ParamSpec, ...] | None = None
    cases: tuple[tuple[Args, object], ...] | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a task needs a non-empty name, got {self.name!r}")
        try:
            self._validate()
        except (ValueError, TypeError) as e:
            raise ValueError(f"task {self.name!r}: {e}") from None
        except RecursionError:  # (a case value nested hundreds deep: its repr alone recurses)
            raise ValueError(f"task {self.name!r}: a value nested too deeply (the language's values are int, "
                             "bool and list[int])") from None

    def _validate(self):
        if not isinstance(self.description, str):
            raise ValueError(f"description must be a string, got {self.description!r:.80}")
        object.__setattr__(self, "difficulty", _difficulty(self.difficulty))
        sig = self.signature
        if not isinstance(sig, (str, Signature)):
            raise ValueError(f"signature must be a Signature or a 'def ...' line, got {sig!r}")
        # (a Signature built by hand obeys the compiler's rules as its line does, no keyword or
        # repeated names, or a saved task would not load again)
        sig = Signature.parse(sig if isinstance(sig, str) else sig.line())
        object.__setattr__(self, "signature", sig)
        if (self.reference is None) == (self.cases is None):
            raise ValueError("needs exactly one of a reference (with inputs) and cases")
        if self.reference is not None:
            object.__setattr__(self, "reference", _normalize_source(self.reference))
            try:
                prog = _compile(self.reference)
            except CompileError as e:
                raise ValueError(f"reference does not compile: {e.line}:{e.col}: {e.message}") from None
            try:
                got = Signature.of(prog.function(sig.entry))
            except KeyError:
                raise ValueError(f"reference defines no function {sig.entry!r}") from None
            if got != sig:
                raise ValueError(f"reference signature {got.line()!r} differs from the declared {sig.line()!r}")
            specs = self.inputs if self.inputs is not None else [ParamSpec.default(k) for k in sig.kinds]
            if isinstance(specs, (str, bytes, Mapping)) or not isinstance(specs, Iterable):
                raise ValueError(f"inputs must be a list of input specs, one per parameter, got {specs!r:.80}")
            specs = list(specs)
            if len(specs) != len(sig.params):
                raise ValueError(f"{len(specs)} input specs for {len(sig.params)} parameters")
            parsed = []
            for (pname, kind), s in zip(sig.params, specs):
                try:
                    s = s if isinstance(s, ParamSpec) else ParamSpec.from_dict(s)
                except (ValueError, TypeError) as e:
                    raise ValueError(f"bad input spec for parameter {pname!r}: {e}") from None
                if s.kind != kind:
                    raise ValueError(f"bad input spec for parameter {pname!r}: kind {s.kind!r}, but it is {kind!r}")
                parsed.append(s)
            object.__setattr__(self, "inputs", tuple(parsed))
        else:
            if self.inputs is not None:
                raise ValueError("a task given by cases draws its inputs from them, not from input specs")
            if isinstance(self.cases, (str, bytes, Mapping)) or not isinstance(self.cases, Iterable):
                raise ValueError(f"cases must be a list of [[args...], output] pairs, got {self.cases!r:.80}")
            cases, seen = [], {}
            for i, case in enumerate(self.cases):
                if not isinstance(case, (tuple, list)) or len(case) != 2 or not isinstance(case[0], (tuple, list)):
                    raise ValueError(f"case {i}: expected [[args...], output], got {case!r:.80}")
                args, out = case
                if len(args) != len(sig.params):
                    raise ValueError(f"case {i}: {len(args)} arguments for {len(sig.params)} parameters")
                args = [_check_case_value(v, kind, f"case {i}, argument {pname!r}") for (pname, kind), v in
                        zip(sig.params, args)]
                long = next((pname for (pname, _), v in zip(sig.params, args)
                             if isinstance(v, list) and len(v) > MAX_LIST_LEN), None)
                if long is not None:  # (as input specs draw: far longer ones would not fit in the VM's memory)
                    raise ValueError(f"case {i}, argument {long!r}: a list argument holds at most {MAX_LIST_LEN} "
                                     f"elements")
                out = _check_case_value(out, sig.ret, f"case {i}, output")
                # (what no run could hold in the VM's default list memory: no program could pass it)
                held = sum(len(v) for v in args if isinstance(v, list))
                if held > DEFAULT_HEAP:
                    raise ValueError(f"case {i}: its list arguments hold {held} ints, more than the VM's list "
                                     f"memory ({DEFAULT_HEAP})")
                if sig.ret == "list" and len(out) > DEFAULT_HEAP:
                    raise ValueError(f"case {i}: its output holds {len(out)} ints, more than the VM's list memory "
                                     f"({DEFAULT_HEAP}): no program can return it")
                case = (_freeze(args), _freeze(out))
                # the same arguments with two outputs: no program could pass both
                j = seen.setdefault(case[0], i)
                if j != i and cases[j][1] != case[1]:
                    raise ValueError(f"case {i}: the arguments of case {j} with another output "
                                     f"({_thaw(case[1])!r} vs {_thaw(cases[j][1])!r})")
                cases.append(case)
            if not cases:
                raise ValueError("needs at least one case")
            object.__setattr__(self, "cases", tuple(cases))

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def from_reference(cls, name: str, source: str, inputs: Sequence | Mapping | None = None, *,
                       entry: str | None = None, description: str = "", difficulty=1) -> "Task":
        """A task whose truth is `source`. The signature is the entry function's (default: the
        first function defined). `inputs`: one spec (ParamSpec or dict) per parameter, a dict
        of them by parameter name, or None for defaults by kind."""
        if entry is not None and not isinstance(entry, str):  # (entry=0 would quietly mean the first)
            raise TypeError(f"task {name!r}: entry must be a function name (str), got {entry!r}")
        try:
            prog = _compile(_normalize_source(source))
            fn = prog.function(entry) if entry else prog.functions[0]
        except TypeError as e:
            raise ValueError(f"task {name!r}: {e}") from None
        except CompileError as e:
            raise ValueError(f"task {name!r}: reference does not compile: {e.line}:{e.col}: {e.message}") from None
        except KeyError:
            raise ValueError(f"task {name!r}: reference defines no function {entry!r}") from None
        sig = Signature.of(fn)
        if isinstance(inputs, Mapping):
            unknown = set(inputs) - set(sig.names)
            if unknown:
                raise ValueError(f"task {name!r}: input specs for unknown parameters {sorted(unknown)}")
            inputs = [inputs.get(n, ParamSpec.default(k)) for n, k in sig.params]
        return cls(name, description, difficulty, sig, reference=source, inputs=inputs)

    @classmethod
    def from_examples(cls, name: str, signature: str | Signature, examples: Iterable, *,
                      description: str = "", difficulty=1) -> "Task":
        """A task given by (args, output) pairs only; they are its tests. `args` is a tuple of
        arguments, or the argument itself when the signature has one parameter; a dict
        {args: output} works too."""
        if not isinstance(signature, (str, Signature)):
            raise TypeError(f"task {name!r}: signature must be a 'def ...' line or a Signature, "
                            f"got {type(signature).__name__}")
        try:
            sig = Signature.parse(signature) if isinstance(signature, str) else signature
        except ValueError as e:
            raise ValueError(f"task {name!r}: {e}") from None
        if isinstance(examples, Mapping):
            examples = examples.items()
        if isinstance(examples, (str, bytes)) or not isinstance(examples, Iterable):
            raise TypeError(f"task {name!r}: examples must be (args, output) pairs, got {type(examples).__name__}")
        # anything but a pair goes through as it is: the Task reports it as a bad case, by index
        cases = [((e[0],) if len(sig.params) == 1 and not isinstance(e[0], tuple) else e[0], e[1])
                 if isinstance(e, (tuple, list)) and len(e) == 2 else e for e in examples]
        return cls(name, description, difficulty, sig, cases=cases)

    # -- use ---------------------------------------------------------------------------------

    def signature_line(self) -> str:
        """The line the agent is given: `def entry(param: type, ...) -> type:`."""
        return self.signature.line()

    @property
    def program(self) -> Program | None:
        """The compiled reference: a copy of the one cached per source, which every task with that
        source shares (an edit to it would change their outputs)."""
        return None if self.reference is None else copy.deepcopy(_compile(self.reference))

    def _case_order(self, rng: np.random.Generator, n: int) -> np.ndarray:
        # A seeded permutation repeated to length n: every case appears before any repeats.
        return np.resize(rng.permutation(len(self.cases)), n)

    def sample_inputs(self, rng, n: int) -> list[Args]:
        """n argument tuples, drawn from the input specs (or the cases) with `rng` (a numpy
        Generator or a seed)."""
        rng = _rng(rng)
        n = _count(n)
        if self.cases is not None:
            return [tuple(_thaw(v) for v in self.cases[i][0]) for i in self._case_order(rng, n)]
        columns = [spec.sample(rng, n) for spec in self.inputs]
        return list(zip(*columns)) if columns else [()] * n

    def _run_reference(self, inputs: Sequence[Args], config: VMConfig | None, steps: bool, none: str) -> list:
        """execute() of the reference on `inputs` under `config`'s limits (default VMConfig())."""
        if self.reference is None:
            raise ValueError(f"task {self.name!r} has no reference; {none}")
        if config is not None and not isinstance(config, VMConfig):
            raise TypeError(f"config must be a VMConfig, got {type(config).__name__}")
        c = config or VMConfig()
        return execute(_compile(self.reference), self.signature.entry, inputs, fuel=c.fuel, max_depth=c.max_depth,
                       heap_size=c.heap_size, max_lists=c.max_lists, stack_size=c.stack_size, steps=steps)

    def outputs(self, inputs: Sequence[Args], config: VMConfig | None = None) -> list:
        """The reference's results on `inputs`, computed by the VM under `config`'s limits
        (default: VMConfig()). A run that traps means the inputs are outside what the task
        promises, or the reference needs more than those limits: ValueError. Scorers that run
        candidates under lower limits (a TaskBank's fuel) should pass them here, or the task
        may be impossible under them (the reference itself would fail its tests)."""
        results = self._run_reference(inputs, config, False, "its outputs are its cases")
        for args, r in zip(inputs, results):
            if isinstance(r, Trap):
                raise ValueError(f"task {self.name!r}: the reference traps {r.kind} on {args!r}")
        return results

    def reference_steps(self, inputs: Sequence[Args], config: VMConfig | None = None) -> list[int]:
        """The VM steps the reference executes on each of `inputs` under `config`'s limits
        (default: VMConfig()); a run that traps counts the steps it took (all the fuel, when it
        ran out). TaskBank sets each task's fuel from these."""
        return [int(s) for _, s in self._run_reference(inputs, config, True, "it has no steps to count")]

    def examples(self, seed, n: int, config: VMConfig | None = None) -> tuple[list[Args], list]:
        """(inputs, outputs): n inputs drawn with `seed` and the true outputs (the reference's
        under `config`, see outputs)."""
        rng, n = _rng(seed), _count(n)
        if self.cases is not None:
            picked = [self.cases[i] for i in self._case_order(rng, n)]
            return [tuple(_thaw(v) for v in a) for a, _ in picked], [_thaw(o) for _, o in picked]
        inputs = self.sample_inputs(rng, n)
        return inputs, self.outputs(inputs, config)

    # -- data --------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        d = {"name": self.name, "description": self.description,
             "difficulty": next(k for k, v in DIFFICULTIES.items() if v == self.difficulty),
             "signature": self.signature_line()}
        if self.reference is not None:
            d["inputs"] = [s.to_dict() for s in self.inputs]
            d["reference"] = self.reference.rstrip("\n").split("\n")
        else:
            d["cases"] = [[[_thaw(v) for v in a], _thaw(o)] for a, o in self.cases]
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "Task":
        name = d.get("name") if isinstance(d, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ValueError(f"a task needs a non-empty string 'name', got {d!r:.80}")
        required = {"name", "signature"} | ({"reference", "inputs"} if "cases" not in d else {"cases"})
        missing = required - set(d)
        extra = set(d) - {"name", "description", "difficulty", "signature", "reference", "inputs", "cases"}
        if missing or extra:
            what = [f"{word} {', '.join(sorted(keys))}" for word, keys in (("missing", missing), ("unknown", extra)) if keys]
            raise ValueError(f"task {name!r}: {'; '.join(what)}")
        if not isinstance(d["signature"], str):
            raise ValueError(f"task {name!r}: signature must be a 'def ...' line")
        try:
            sig = Signature.parse(d["signature"])
        except ValueError as e:
            raise ValueError(f"task {name!r}: {e}") from None
        ref = d.get("reference")
        if ref is not None and not (isinstance(ref, str)
                                    or isinstance(ref, list) and all(isinstance(s, str) for s in ref)):
            raise ValueError(f"task {name!r}: reference must be source text or a list of lines")
        inputs = d.get("inputs")
        if inputs is not None and not isinstance(inputs, list):
            raise ValueError(f"task {name!r}: inputs must be a list of input specs, one per parameter")
        return cls(name, d.get("description", ""), d.get("difficulty", 1), sig,
                   reference=None if ref is None else _normalize_source(ref), inputs=inputs, cases=d.get("cases"))


# ---------------------------------------------------------------------------------------------
# Files


def _dumps(value, indent: str = "", width: int = 100) -> str:
    """JSON with short containers on one line and long ones one item per line."""
    flat = json.dumps(value)
    if not isinstance(value, (dict, list)) or len(indent) + len(flat) <= width:
        return flat
    inner = indent + "  "
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {_dumps(v, inner, width)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    return "[\n" + ",\n".join(inner + _dumps(v, inner, width) for v in value) + f"\n{indent}]"


def save_tasks(tasks: Iterable[Task] | Mapping[str, Task], path: str | os.PathLike) -> None:
    """Write tasks to a JSON file that load_tasks reads back (names must be unique)."""
    path = os.fspath(path)  # (an int would be taken by open() as a file descriptor)
    if isinstance(tasks, (str, bytes)):
        raise TypeError("tasks must be Tasks (a list or a dict by name), got a string")
    tasks = list(tasks.values()) if isinstance(tasks, Mapping) else list(tasks)
    for t in tasks:
        if not isinstance(t, Task):
            raise TypeError(f"save_tasks takes Tasks, got {type(t).__name__}")
    seen = set()
    for t in tasks:
        if t.name in seen:  # load_tasks would reject the file
            raise ValueError(f"task {t.name!r} is given twice: names must be unique in a task file")
        seen.add(t.name)
    text = _dumps({"version": FORMAT_VERSION, "tasks": [t.to_dict() for t in tasks]}) + "\n"  # before the file opens
    # Written next to its final name and renamed over it: a write that fails (a full disk, an
    # interrupt) leaves the previous file whole, where open(path, "w") would have emptied it.
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _unique_keys(pairs):  # json.loads hook: a repeated key would silently keep only the last value
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"key {dup!r} appears twice in an object")
    return d


def _parse_suite(text: str, origin: str) -> dict[str, Task]:
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as e:
        raise ValueError(f"{origin}: not JSON: {e}") from None
    except (ValueError, RecursionError) as e:  # huge ints, repeated keys, deep nesting
        raise ValueError(f"{origin}: not a valid task file: {e}") from None
    version = data.get("version") if isinstance(data, dict) else None
    if (not isinstance(data, dict) or set(data) != {"version", "tasks"} or type(version) is not int
            or version != FORMAT_VERSION or not isinstance(data["tasks"], list)):
        raise ValueError(f"{origin}: expected {{\"version\": {FORMAT_VERSION}, \"tasks\": [...]}} and no other keys")
    tasks: dict[str, Task] = {}
    for i, d in enumerate(data["tasks"]):
        try:
            t = Task.from_dict(d)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{origin}: task entry {i}: {e}") from None
        except RecursionError:  # (a value nested too deeply for from_dict's checks, not for json)
            raise ValueError(f"{origin}: task entry {i}: a value nested too deeply") from None
        if t.name in tasks:
            raise ValueError(f"{origin}: task entry {i}: task {t.name!r} is defined twice")
        tasks[t.name] = t
    return tasks


def load_tasks(path: str | os.PathLike) -> dict[str, Task]:
    """Tasks from a JSON file written by save_tasks (or by hand), by name. ValueError (naming
    the file and the entry) for a file that is not a valid task file; OSError where it cannot
    be read."""
    path = os.fspath(path)  # (an int would be taken by open() as a file descriptor: 0 reads stdin)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a valid task file: not UTF-8 text ({e})") from None
    return _parse_suite(text, path)


# ---------------------------------------------------------------------------------------------
# The built-in suite


def _load_builtin() -> dict[str, Task]:
    # importlib.resources finds the package data in regular and editable installs alike.
    text = importlib.resources.files("vramgym.envs").joinpath(SUITE_FILE).read_text(encoding="utf-8")
    return _parse_suite(text, SUITE_FILE)


TASKS: dict[str, Task] = _load_builtin()


def get_task(name: str) -> Task:
    if not isinstance(name, str):
        raise TypeError(f"a task name is a str, got {type(name).__name__}")
    try:
        return TASKS[name]
    except KeyError:
        raise KeyError(f"no task {name!r}; known: {', '.join(TASKS)}") from None


def task_names(difficulty=None) -> list[str]:
    """Built-in task names, optionally only those of one difficulty (1-3 or easy/medium/hard)."""
    if difficulty is None:
        return list(TASKS)
    level = _difficulty(difficulty)
    return [n for n, t in TASKS.items() if t.difficulty == level]
