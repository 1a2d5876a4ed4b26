"""Seeded generator of random, well-typed vramgym programs.

Used by the differential tests (VM against the CPython oracle), as a fuzzing source and as
training data for a neural compiler. Every program it returns

* is valid Python and is accepted by the vramgym compiler (it follows the static rules of
  docs/language.md: types fixed per variable, block scoping, no variable named like a function
  or a builtin, every function ends safely with a return);
* terminates within bounded resources on *every* input, so that CPython and the VM agree: all
  loops have a static iteration bound, recursion (direct, or mutual through a companion
  function) goes through a depth parameter that is clamped by its callers, every list stays at
  most `GeneratorConfig.list_cap` long (growth is guarded by a `len()` check), and a static cost
  model bounds the executed operations, the lists created and the list memory used by one call
  of the entry function (see `GeneratorConfig`);
* may still trap on purpose: int32 overflow, division by zero, bad indices, `pop()` on an empty
  list and `range()` with step 0 all occur with tunable probabilities.

The generator draws one seed from the numpy Generator it is given and then uses Python's
`random.Random`, which is an order of magnitude faster per draw; the output is a pure function
of the numpy Generator's state.

    rng = numpy.random.default_rng(0)
    prog = generate_program(rng)
    print(prog.source)
    args = random_args(rng, prog.params, 4)
"""
from __future__ import annotations

import keyword
import random
import re
from dataclasses import dataclass, field

import numpy as np

from vramgym.vm.opcodes import BUILTIN_NAMES as _BUILTIN_NAMES, LIMITS
from vramgym.vm.values import check_int

from .errors import CompileError
from .frontend import tokenize

__all__ = ["GeneratedProgram", "GeneratorConfig", "generate_program", "random_args", "INT32_EDGES"]

INT_MIN, INT_MAX = -(2**31), 2**31 - 1

# Values near the int32 limits and near square roots of them, where overflow is one step away.
INT32_EDGES = (INT_MIN, INT_MIN + 1, INT_MAX, INT_MAX - 1, 46341, -46341, 65536, -65536,
               1 << 30, -(1 << 30), 1000000007)

KINDS = ("int", "bool", "list")
TYPE_TEXT = {"int": "int", "bool": "bool", "list": "list[int]"}

# Disjoint name pools: a variable may never be named like a function (a compile error), and
# none of these is a builtin (len abs min max range int bool list) or a Python keyword.
FUNC_NAMES = ("f", "g", "h", "helper", "compute", "combine", "walk", "fold", "scan", "solve",
              "check", "mix", "build", "shuffle", "measure", "pick", "merge", "probe", "tally",
              "rotate", "blend", "count_up", "digest", "visit")
METHOD_NAMED_POOL = ("append", "pop", "f", "g", "h")
# A number, not the end of a name, then one space and a keyword that CPython's tokenizer lets
# end it (`0 or` stays: `0o` starts an octal literal).
_GLUE = re.compile(r"(?<![A-Za-z_0-9])([0-9]+) (if|else|and|or)(?![A-Za-z_0-9])")
# Not allowed as function names (a module-level `__builtins__` takes CPython's builtins away).
_BUILTIN_FUNCTIONS = set(_BUILTIN_NAMES) - {"append", "pop"} | {"__builtins__"}
VAR_NAMES = {
    "int": ("a", "b", "c", "i", "j", "k", "m", "n", "p", "q", "r", "s", "t", "u", "v", "w", "x",
            "y", "z", "acc", "total", "idx", "lo", "hi", "mid", "val", "tmp", "best", "cur",
            "res", "num", "cnt"),
    "bool": ("ok", "flag", "done", "found", "neg", "even", "big", "seen", "halt", "good",
             "small", "odd"),
    "list": ("xs", "ys", "zs", "ws", "buf", "out", "vals", "items", "stack", "evens", "odds",
             "parts", "nums", "seq"),
}
# Legal variable names that look special: soft keywords, Python builtins outside the language,
# `__builtins__` (an ordinary name for a variable) and the list methods' names. A draw skips the
# program's function names, so the pool needs no check against func_names or entry_name.
ODD_NAMES = ("match", "case", "type", "_", "print", "sum", "sorted", "id", "object", "input",
             "__builtins__", "append", "pop", "l", "O", "_x", "__")
DEPTH_NAMES = ("d", "depth", "level", "steps")  # the depth parameter of a recursive function
COMMENTS = ("keep the running value", "edge case", "bounded loop", "may trap", "swap",
            "accumulate", "aliasing on purpose", "note: floor semantics", "TODO: simplify",
            "recursion on a decreasing depth", "guard the length")

# Static cost model, in (roughly) VM instructions: a generous upper bound, not a measurement.
NODE_OPS = 2
LOOP_OPS = 5
CALL_OPS = 6
COMPANION_OPS = 14  # a companion's call back, its base-case test and its return expression
# Hard limits the rejection loop enforces.
MAX_ATTEMPTS = 10_000  # generate_program's tries (defaults: 1-3; op_budget=10: at most ~30)
LIST_MEMORY = 3500     # ints of list memory the entry's lists and arguments may take (VM default 4096)
ARG_LIST_LEN = 6       # ints a list argument is charged (random_args' lists hold 0..6)

# Python operator precedence, lowest first (what decides where parentheses are needed).
P_COND, P_OR, P_AND, P_NOT, P_CMP, P_SUM, P_TERM, P_UNARY, P_ATOM = range(9)


@dataclass
class GeneratedProgram:
    """One generated program: its source, the entry function and that function's signature.

    `params` and `ret` use the kinds 'int', 'bool' and 'list' (for list[int])."""
    source: str
    entry: str
    params: tuple[str, ...]
    ret: str


@dataclass
class GeneratorConfig:
    """Knobs of `generate_program`. Defaults give small programs (a few hundred executed
    operations on average, a few thousand at most) that cover the whole language."""
    # Size.
    max_functions: int = 4          # functions per program (1..max); the entry is one of them
    max_params: int = 3             # parameters per function (0..max; recursive ones get one more)
    max_statements: int = 4         # statements per block (1..max), fewer in deeper blocks
    max_block_depth: int = 3        # nesting of if/while/for blocks inside a function
    max_expr_depth: int = 3         # nesting of operators inside one expression
    # Resource bounds (static upper bounds for one call of the entry function).
    list_cap: int = 12              # no list ever grows longer than this (growth is len-guarded)
    max_loop_iters: int = 6         # iteration bound of counted loops
    max_recursion: int = 6          # depth bound of a recursive function (its callers clamp)
    op_budget: int = 4000           # estimated VM instructions per entry call
    list_budget: int = 40           # lists created per entry call (VM default limit: 256)
    mem_budget: int = 2400          # ints of list memory per entry call (VM default: 4096)
    max_call_depth: int = 40        # nested calls, recursion included (VM default limit: 200)
    # Probabilities.
    p_recursive: float = 0.3        # a non-entry function is self-recursive
    p_binary_recursion: float = 0.3  # ... with two recursive call sites (fib-like)
    p_mutual_recursion: float = 0.3  # ... whose recursive calls go through a companion function
    p_big_literal: float = 0.08     # an int literal is large (near the int32 limits)
    p_unsafe_div: float = 0.15      # a divisor is an arbitrary expression (may be 0)
    p_unsafe_index: float = 0.1     # an index is an arbitrary expression (may be out of range)
    p_step_zero: float = 0.03       # a literal range() step is 0 (value_error)
    p_unguarded_pop: float = 0.5    # xs.pop() without an `if xs:` guard (may trap)
    p_one_line: float = 0.3         # a one-statement body goes on the header's line
    p_comment: float = 0.08         # a comment line before a statement
    p_trailing_comment: float = 0.04
    p_blank: float = 0.05           # a blank line between statements
    p_extra_parens: float = 0.05    # redundant parentheses around an expression
    p_reuse_name: float = 0.1       # a new variable takes a name from another kind's pool
    p_multiline: float = 0.1        # a list literal or call is split over lines (implicit joining)
    p_trailing_comma: float = 0.1   # in calls, list literals and tuple assignments
    p_annotated: float = 0.15       # a declaration is an annotated assignment
    p_list_recursion: float = 0.15  # a recursive function returns list[int] (a list per level)
    p_call_store: float = 0.1       # an indexed store goes to a call's result: g(xs)[i] = e, g(xs)[i] += e
    p_crlf: float = 0.03            # the source's lines end in CRLF (one in four of these: a lone CR)
    p_glued_keyword: float = 0.03   # every number before if/else/and/or loses its space (`1if`, `2else`)
    p_long_chain: float = 0.05      # a comparison chains 3 or 4 operators (`a < b <= c != d`)
    p_wide_tuple: float = 0.05      # a tuple assignment has 5 to 8 targets, a call's element among them
    p_odd_name: float = 0.03        # a new variable is named like a soft keyword or a Python builtin
    p_edge_range: float = 0.03      # a range() runs next to the int32 limits or has a huge step
    p_reuse_for_var: float = 0.2    # `for x in xs` assigns a visible int variable x
    # The pool of function names (at least max_functions of them). METHOD_NAMED_POOL adds append
    # and pop: list methods, which Python allows as function names and the compiler interns with
    # the builtins.
    func_names: tuple[str, ...] = FUNC_NAMES
    # A fixed entry signature, so that many programs can run as one batch on the same
    # arguments (None: random). The name must not be a builtin or in FUNC_NAMES/VAR_NAMES.
    entry_name: str | None = None
    entry_params: tuple[str, ...] | None = None
    entry_ret: str | None = None

    def __post_init__(self):
        """Every accepted config yields programs (the rejection loop ends) that compile: sizes
        within the compiler's limits, names that are identifiers nothing else uses."""
        for name, lo, hi in _INT_KNOBS:
            check_int(getattr(self, name), name, lo, hi)
        for name in _PROB_KNOBS:
            v = getattr(self, name)
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)) \
                    or not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {v!r}")
        var_names = {n for pool in VAR_NAMES.values() for n in pool} | set(DEPTH_NAMES)
        if not isinstance(self.func_names, (tuple, list)) or not all(_is_name(n) for n in self.func_names) \
                or set(self.func_names) & (_BUILTIN_FUNCTIONS | var_names):
            raise ValueError("func_names must be identifiers (no keyword, builtin function or name of the "
                             f"generator's variable pools), got {self.func_names!r}")
        if len(set(self.func_names)) < self.max_functions:
            raise ValueError(f"func_names needs {self.max_functions} distinct names, got {len(set(self.func_names))}")
        taken = set(_BUILTIN_NAMES) | _BUILTIN_FUNCTIONS | set(FUNC_NAMES) | set(self.func_names) | var_names
        if self.entry_name is not None and (not _is_name(self.entry_name) or self.entry_name in taken):
            raise ValueError(f"entry_name {self.entry_name!r} is not an identifier, or a builtin or a name the "
                             "generator uses itself")
        if self.entry_params is not None:
            if not isinstance(self.entry_params, (tuple, list)) or any(k not in KINDS for k in self.entry_params):
                raise ValueError(f"entry_params must be a tuple of {KINDS}, got {self.entry_params!r}")
            if len(self.entry_params) > _MAX_PARAMS:
                raise ValueError(f"entry_params: at most {_MAX_PARAMS} parameters, got {len(self.entry_params)}")
            lists = self.entry_params.count("list")
            if lists * ARG_LIST_LEN * self.list_cap > LIST_MEMORY:
                raise ValueError(f"{lists} list parameters of up to list_cap = {self.list_cap} ints could take "
                                 f"more than {LIST_MEMORY} ints of list memory: lower list_cap")
        elif ARG_LIST_LEN * self.list_cap > LIST_MEMORY:
            raise ValueError(f"list_cap must be at most {LIST_MEMORY // ARG_LIST_LEN} (a list argument could take "
                             f"more than {LIST_MEMORY} ints of list memory)")
        if self.entry_ret is not None and self.entry_ret not in KINDS:
            raise ValueError(f"entry_ret must be one of {KINDS}, got {self.entry_ret!r}")


def _int_text(v: int) -> str:
    """An int literal's text as an argument (int32's minimum has no literal of its own)."""
    return "-2147483647 - 1" if v == INT_MIN else str(v)


def _is_name(n) -> bool:
    return isinstance(n, str) and n.isidentifier() and n.isascii() and not keyword.iskeyword(n) \
        and n != "__debug__" and len(n) <= LIMITS["MAX_NAME_LEN"]


# The knobs' ranges: what the generator can meet (op_budget below 10 leaves no program) and the
# compiler accepts (parameters, a recursive function's extra one included; block nesting; sizes
# whose programs stay well inside its token limit: blocks of 16 statements reach half of it).
_MAX_PARAMS = LIMITS["MAX_PARAMS"] - 1
_INT_KNOBS = (("max_functions", 1, LIMITS["MAX_FUNCS"]), ("max_params", 0, _MAX_PARAMS),
              ("max_statements", 1, 16), ("max_block_depth", 0, LIMITS["MAX_BLOCK_DEPTH"] - 4),
              ("max_expr_depth", 0, 16), ("list_cap", 0, None), ("max_loop_iters", 0, 10**6),
              ("max_recursion", 1, 10**6), ("op_budget", 10, None), ("list_budget", 0, None),
              ("mem_budget", 0, None), ("max_call_depth", 1, None))
_PROB_KNOBS = tuple(f for f in GeneratorConfig.__dataclass_fields__ if f.startswith("p_"))


# ----------------------------------------------------------------------------------------
# Internal representation
# ----------------------------------------------------------------------------------------

@dataclass
class _Var:
    name: str
    kind: str
    assignable: bool = True     # loop counters and recursion depths are never reassigned


@dataclass
class _Func:
    name: str
    params: list[tuple[str, str]]
    ret: str
    recursive: bool = False
    rec_bound: int = 0          # largest depth argument its callers pass (clamped)
    branching: int = 1          # recursive call sites
    ops: int = 0                # static cost of one call (callees and recursion included)
    lists: int = 0
    mem: int = 0
    depth: int = 1              # call depth of one call
    grows: bool = False         # may grow a list (append, +=), itself or through callees
    pops: bool = False          # may pop from a list, itself or through callees
    via: str | None = None      # the companion a recursive function's self-calls go through


@dataclass
class _Expr:
    text: str
    prec: int
    size: int = 0               # upper bound on the length of a list value
    has_call: bool = False      # contains a call or a pop (has side effects)


@dataclass
class _Ctx:
    """What a block may contain, inherited by nested blocks unless reset."""
    depth: int = 0
    in_loop: bool = False
    break_ok: bool = False      # break allowed at this level (not in a `while True` tail loop)
    no_growth: bool = False     # inside a drain loop: no list may grow, no call that may
    frozen: frozenset = frozenset()  # names that must not be reassigned here


# Statements: ("simple", text) | ("clauses", [(header, body), ...]) | ("comment", text) | ("blank",)
# A "clauses" statement is an if/elif/else chain or a loop; the renderer decides indentation
# and whether a one-statement body goes on the header's line.


class _ProgramGen:
    def __init__(self, r: random.Random, cfg: GeneratorConfig):
        self.r = r
        self.cfg = cfg

    # --- program -------------------------------------------------------------------------

    def program(self) -> tuple[GeneratedProgram, _Func]:
        r, cfg = self.r, self.cfg
        nfun = r.randint(1, cfg.max_functions)
        names = r.sample(cfg.func_names, nfun)
        if cfg.entry_name is not None:
            names[0] = cfg.entry_name
        funcs: list[_Func] = []
        for i, name in enumerate(names):
            nparams = r.randint(0, cfg.max_params)
            kinds = r.choices(KINDS, weights=(5, 1.5, 3), k=nparams)
            ret = r.choices(KINDS, weights=(6, 2, 2))[0]
            if i == 0:
                kinds = list(cfg.entry_params) if cfg.entry_params is not None else kinds
                ret = cfg.entry_ret or ret
            recursive = i > 0 and r.random() < cfg.p_recursive
            if recursive:
                # (a list return costs lists per level: the budget checks keep it affordable)
                if cfg.p_list_recursion and r.random() < cfg.p_list_recursion:
                    ret = "list"
                else:
                    ret = r.choice(("int", "int", "bool"))
            pnames = self._param_names(kinds)
            params = list(zip(pnames, kinds))
            f = _Func(name, params, ret, recursive)
            if recursive:
                f.branching = 2 if r.random() < cfg.p_binary_recursion else 1
                f.rec_bound = r.randint(1, 4 if f.branching == 2 else cfg.max_recursion)
                f.params.insert(0, (self._depth_name(pnames), "int"))  # the depth comes first
            funcs.append(f)
        # A recursive function may recurse through a companion g (f -> g -> f -> ...) that
        # forwards its depth: mutual recursion with the same bound. The knob is read before the
        # draw so that p_mutual_recursion=0 keeps the random stream of older versions.
        spare = [n for n in cfg.func_names if n not in names]
        companions: list[_Func] = []
        for f in funcs:
            if f.recursive and spare and cfg.p_mutual_recursion and r.random() < cfg.p_mutual_recursion:
                g = _Func(spare.pop(r.randrange(len(spare))), [], f.ret)
                g.params = [(self._depth_name(()), "int")]
                g.params += list(zip(self._param_names([k for _, k in f.params[1:]]),
                                     [k for _, k in f.params[1:]]))
                f.via = g.name
                companions.append(g)
        self.func_set = set(names) | {g.name for g in companions}  # no variable may take these
        # Function i may call functions j > i (a DAG, so no unbounded mutual recursion) and,
        # when recursive, itself. Generate from the leaves up so each callee's cost is known.
        bodies: dict[str, list] = {}
        for i in range(nfun - 1, -1, -1):
            budget_frac = 1.0 if i == 0 else r.uniform(0.1, 0.5)
            fg = _FuncGen(self, funcs[i], funcs[i + 1:], budget_frac)
            bodies[funcs[i].name] = fg.body()
        for g in companions:
            f = next(f for f in funcs if f.via == g.name)
            bodies[g.name] = self._companion_body(g, f)
        funcs = funcs + companions
        order = list(range(len(funcs)))
        r.shuffle(order)  # definitions appear in any order: calls to later-defined functions
        out: list[str] = []
        if r.random() < 0.3:
            out.append(f"# {r.choice(COMMENTS)}")
        for n, i in enumerate(order):
            f = funcs[i]
            if n:
                out.extend([""] * r.choice((1, 2, 2)))
            indent = " " * r.choice((4, 4, 4, 4, 2, 3, 8, 1))
            sig = ", ".join(f"{p}: {TYPE_TEXT[k]}" for p, k in f.params)
            if f.params and r.random() < self.cfg.p_trailing_comma:
                sig += ","
            out.append(f"def {f.name}({sig}) -> {TYPE_TEXT[f.ret]}:")
            _render(bodies[f.name], indent, indent, out, r, self.cfg)
        entry = funcs[0]
        newline = "\n"
        if cfg.p_crlf and r.random() < cfg.p_crlf:  # the knob first: at 0 the stream is unchanged
            newline = r.choice(("\r\n", "\r\n", "\r\n", "\r"))
        text = "\n".join(out) + "\n"
        if cfg.p_glued_keyword and r.random() < cfg.p_glued_keyword:
            text = _GLUE.sub(lambda m: m[0] if m[1] == "0" and m[2] == "or" else m[1] + m[2], text)
        # (a multi-line statement's own "\n"s change too: a file has one convention)
        return GeneratedProgram(text.replace("\n", newline), entry.name,
                                tuple(k for _, k in entry.params), entry.ret), entry

    def _companion_body(self, g: _Func, f: _Func) -> list:
        """g's body: it calls f back with the same or a smaller depth and its own parameters, so
        the pair recurses as deep as f alone would; a base case of its own is optional."""
        r = self.r
        d = g.params[0][0]
        ints = [p for p, k in g.params if k == "int"]
        bools = [p for p, k in g.params[1:] if k == "bool"]
        args = [r.choice((d, d, f"{d} - 1"))] + [p for p, _ in g.params[1:]]
        call = f"{f.name}({', '.join(args)})"
        out = []
        lists = [p for p, k in g.params[1:] if k == "list"]
        if g.ret == "list":
            # Only the parameters' lists and f's own results: no new list per level here.
            if lists and r.random() < 0.4:
                cond = r.choice((f"{d} <= 0", f"{d} < 0", f"not {d} > 0"))
                out.append(("clauses", [(f"if {cond}:", [("simple", f"return {r.choice(lists)}")])]))
            alt = r.choice(lists) if lists else None
            text = r.choice((call, call) + ((f"{call} or {alt}", f"{alt} if {d} < 0 else {call}") if alt else ()))
            out.append(("simple", f"return {text}"))
            return out
        if r.random() < 0.4:
            base = (r.choice(ints + [str(r.randint(-3, 9))]) if g.ret == "int"
                    else r.choice(bools + ["True", "False"]))
            cond = r.choice((f"{d} <= 0", f"{d} < 0", f"not {d} > 0"))
            out.append(("clauses", [(f"if {cond}:", [("simple", f"return {base}")])]))
        if g.ret == "int":
            e = r.choice(ints + [str(r.randint(1, 9))])
            text = r.choice((call, call, f"{call} + {e}", f"{e} - {call}", f"min({call}, {e})", f"abs({call})"))
        else:
            b = r.choice(bools + ["True", "False"])
            text = r.choice((call, call, f"not {call}", f"{b} or {call}", f"{call} and {b}"))
        out.append(("simple", f"return {text}"))
        return out

    def _param_names(self, kinds):
        used: set[str] = set()
        names = []
        for k in kinds:
            pool = [n for n in VAR_NAMES[k] if n not in used]
            n = self.r.choice(pool)
            used.add(n)
            names.append(n)
        return names

    def _depth_name(self, taken):
        return self.r.choice([n for n in DEPTH_NAMES if n not in taken])


class _FuncGen:
    """Generates the body of one function, tracking scopes and a static cost bound."""

    def __init__(self, pg: _ProgramGen, f: _Func, callees: list[_Func], budget_frac: float):
        self.r, self.cfg, self.f = pg.r, pg.cfg, f
        self.func_set = pg.func_set
        cfg = self.cfg
        self.callees = callees
        self.budget_ops = int(cfg.op_budget * budget_frac)
        self.budget_lists = max(2, int(cfg.list_budget * budget_frac))
        self.budget_mem = max(100, int(cfg.mem_budget * budget_frac))
        self.cap = cfg.list_cap
        self.ops = self.lists = self.mem = 0
        self.callee_depth = 0
        self.grows = self.pops = False
        if f.recursive:
            b, k = f.branching, f.rec_bound
            self.activations = sum(b ** i for i in range(k + 1))
        else:
            self.activations = 1
        self.mult = self.activations       # executions of the code being generated, per call
        self.self_calls_left = f.branching if f.recursive else 0
        self.in_base_case = False
        self.scopes: list[dict[str, _Var]] = [{}]
        self._vis: dict[str, _Var] | None = None
        for i, (p, k) in enumerate(f.params):
            self.scopes[0][p] = _Var(p, k, assignable=not (f.recursive and i == 0))
        self.depth_param = f.params[0][0] if f.recursive else None
        self.safe_index: list[tuple[str, str]] = []  # (index var, list var) from range(len(xs))

    # --- bookkeeping -----------------------------------------------------------------------

    def charge(self, ops=0, lists=0, mem=0):
        self.ops += ops * self.mult
        self.lists += lists * self.mult
        self.mem += mem * self.mult

    def afford(self, ops=0, lists=0, mem=0, mult=None):
        m = self.mult if mult is None else mult
        return (self.ops + ops * m <= self.budget_ops and self.lists + lists * m <= self.budget_lists
                and self.mem + mem * m <= self.budget_mem)

    def _merged(self) -> dict[str, _Var]:
        """Visible variables by name (cached: scopes change far less often than they're read)."""
        if self._vis is None:
            self._vis = {}
            for scope in self.scopes:
                self._vis.update(scope)
        return self._vis

    def visible(self, kind=None, assignable=False, frozen=frozenset()):
        return [v for v in self._merged().values()
                if (kind is None or v.kind == kind)
                and (not assignable or (v.assignable and v.name not in frozen))]

    def is_visible(self, name):
        return name in self._merged()

    def push(self, scope=None):
        self.scopes.append(scope or {})
        self._vis = None

    def pop_scope(self):
        self.scopes.pop()
        self._vis = None

    def fresh_name(self, kind):
        r = self.r
        if self.cfg.p_odd_name and r.random() < self.cfg.p_odd_name:  # the knob first: at 0 the stream is unchanged
            cands = [n for n in ODD_NAMES if n not in self.func_set and not self.is_visible(n)]
            if cands:
                return r.choice(cands)
        pool = VAR_NAMES[kind]
        if r.random() < self.cfg.p_reuse_name:
            pool = VAR_NAMES[r.choice(KINDS)]
        cands = [n for n in pool if not self.is_visible(n)]
        if not cands:
            cands = [n for n in (f"{pool[0]}{i}" for i in range(300)) if not self.is_visible(n)]
        return r.choice(cands)

    def declare(self, name, kind, assignable=True):
        self.scopes[-1][name] = _Var(name, kind, assignable)
        self._vis = None

    # --- function body -----------------------------------------------------------------------

    def body(self) -> list:
        f, r = self.f, self.r
        stmts = []
        if f.recursive:
            d = self.depth_param
            cond = r.choice((f"{d} <= 0", f"{d} < 1", f"not {d} > 0", f"0 >= {d}"))
            self.in_base_case = True  # no call at all: a self-call here would never end
            base = self.expr(f.ret, 1, cap=self.cap, nocall=True)
            self.in_base_case = False
            stmts.append(("clauses", [(f"if {cond}:", [("simple", f"return {base.text}")])]))
        ctx = _Ctx()
        stmts += self.block(ctx, must_return=True, top=True)
        f.ops = self.ops + CALL_OPS + len(f.params)
        f.lists, f.mem = self.lists, self.mem
        f.depth = self.activations if not f.recursive else (f.rec_bound + 1) * (2 if f.via else 1)
        f.depth += self.callee_depth
        f.grows, f.pops = self.grows, self.pops
        return stmts

    # --- blocks ----------------------------------------------------------------------------

    def block(self, ctx: _Ctx, must_return=False, top=False, prefix=()) -> list:
        """A block (its own scope). `prefix` statements come first (loop counters, pops)."""
        r, cfg = self.r, self.cfg
        self.push({})
        out = list(prefix)
        maxn = max(1, cfg.max_statements - ctx.depth - (0 if top else 1))
        n = r.randint(1 if not prefix else 0, maxn)
        for _ in range(n):
            if r.random() < cfg.p_blank and out:
                out.append(("blank",))
            if r.random() < cfg.p_comment:
                out.append(("comment", r.choice(COMMENTS)))
            out.append(self.statement(ctx))
        if must_return:
            out.append(self.tail(ctx))
        else:
            term = self.terminator(ctx)
            if term is not None:
                out.append(term)
            if not any(s[0] in ("simple", "clauses", "seq") for s in out):
                out.append(("simple", "pass"))
        self.pop_scope()
        return out

    def terminator(self, ctx):
        """Sometimes end a nested block with break, continue or return."""
        r = self.r
        x = r.random()
        if ctx.in_loop and x < 0.12:
            return ("simple", "break" if ctx.break_ok and r.random() < 0.5 else "continue")
        if x < 0.18 and ctx.depth > 0:
            return ("simple", f"return {self.expr(self.f.ret, 2, cap=self.cap).text}")
        return None

    def tail(self, ctx):
        """A statement that ends the function safely (the spec's rule, recursively)."""
        r = self.r
        x = r.random()
        if ctx.depth < self.cfg.max_block_depth and x < 0.15:
            return self.if_stmt(ctx, must_return=True)
        if ctx.depth < self.cfg.max_block_depth and x < 0.2:
            w = self.while_true_tail(ctx)
            if w is not None:
                return w
        if self.self_calls_left and self.mult == self.activations and x < 0.9:
            call = self.call(self.f.ret, 1, ctx, force_self=True)
            if self.f.ret == "int":
                e = self.wrap(self.expr("int", 1), P_SUM + 1)
                text = r.choice((call.text, f"{e.text} + {call.text}", f"{call.text} - {e.text}",
                                 f"max({call.text}, {e.text})"))
            elif self.f.ret == "list":
                # No concatenation with the call: a list would grow by a level's worth past list_cap.
                e = self.wrap(self.expr("list", 1, cap=self.cap), P_OR + 1)
                c = self.wrap(self.expr("bool", 1), P_OR + 1)
                text = r.choice((call.text, call.text, f"{call.text} or {e.text}",
                                 f"{e.text} if {c.text} else {call.text}"))
            else:
                e = self.wrap(self.expr("bool", 1), P_AND + 1)
                text = r.choice((call.text, f"not {call.text}", f"{e.text} or {call.text}"))
            return ("simple", f"return {text}")
        return ("simple", f"return {self.expr(self.f.ret, self.cfg.max_expr_depth, cap=self.cap).text}")

    def statement(self, ctx: _Ctx):
        r, cfg = self.r, self.cfg
        nested = ctx.depth < cfg.max_block_depth
        choices = [
            (self.s_declare, 5), (self.s_assign, 3), (self.s_aug, 3), (self.s_subassign, 1.5),
            (self.s_tuple, 1.2), (self.s_exprstmt, 1.5), (self.s_grow, 1.5), (self.s_pass, 0.2),
        ]
        if nested:
            choices += [(self.if_stmt, 3), (self.for_range, 2), (self.for_list, 1.2),
                        (self.while_stmt, 1.5)]
        if ctx.in_loop:
            choices.append((self.s_loop_exit, 0.7))
        choices.append((self.s_early_return, 0.5))
        for _ in range(8):
            s = self.pick([(lambda fn=fn: fn(ctx), w) for fn, w in choices])
            if s is not None:
                return s
        return ("simple", "pass")

    # --- simple statements -------------------------------------------------------------------

    def s_pass(self, ctx):
        return ("simple", "pass")

    def s_declare(self, ctx):
        r = self.r
        kind = r.choices(KINDS, weights=(5, 1.5, 2))[0]
        if kind == "list" and not self.afford(lists=1, mem=self.cap * 5):
            kind = "int"
        e = self.expr(kind, r.randint(0, self.cfg.max_expr_depth), cap=self.cap, nogrow=ctx.no_growth)
        name = self.fresh_name(kind)
        self.declare(name, kind)
        self.charge(ops=1)
        if r.random() < self.cfg.p_annotated:
            return ("simple", f"{name}: {TYPE_TEXT[kind]} = {e.text}")
        return ("simple", f"{name} = {e.text}")

    def s_assign(self, ctx):
        vs = self.visible(assignable=True, frozen=ctx.frozen)
        if not vs:
            return None
        v = self.r.choice(vs)
        e = self.expr(v.kind, self.r.randint(0, self.cfg.max_expr_depth), cap=self.cap,
                      nogrow=ctx.no_growth)
        self.charge(ops=1)
        return ("simple", f"{v.name} = {e.text}")

    def s_aug(self, ctx):
        r = self.r
        ints = self.visible("int", assignable=True, frozen=ctx.frozen)
        lists = self.visible("list")
        x = r.random()
        if ints and x < 0.6:
            v = r.choice(ints)
            op = r.choice(("+=", "+=", "-=", "*=", "//=", "%="))
            rhs = self.aug_value(op, ctx)
            self.charge(ops=3)
            return ("simple", f"{v.name} {op} {rhs.text}")
        if lists and x < 0.85:
            xs = r.choice(lists)
            idx = self.index(xs.name, ctx)
            op = r.choice(("+=", "-=", "*=", "//=", "%="))
            rhs = self.aug_value(op, ctx)
            self.charge(ops=5)
            return ("simple", f"{xs.name}[{idx.text}] {op} {rhs.text}")
        return self.s_grow(ctx, extend=True)

    def s_subassign(self, ctx):
        if self.cfg.p_call_store and self.r.random() < self.cfg.p_call_store:
            s = self.s_call_store(ctx)
            if s is not None:
                return s
        lists = self.visible("list")
        if not lists:
            return None
        xs = self.r.choice(lists)
        e = self.expr("int", self.r.randint(0, 2), nogrow=ctx.no_growth)
        idx = self.index(xs.name, ctx)
        self.charge(ops=3)
        return ("simple", f"{xs.name}[{idx.text}] = {e.text}")

    def s_call_store(self, ctx):
        """g(...)[i] = e or g(...)[i] op= e: a store into a call's result, which may be a list the
        caller holds too (a parameter it returned). Python evaluates e first for `=`, last for
        `op=`. The index is not guarded: an empty result traps index_error."""
        r = self.r
        call = self.call("list", 1, ctx, nogrow=ctx.no_growth)
        if call is None:
            return None
        idx = r.choice(("0", "0", "-1", "-1", "1", "2"))
        op = r.choice(("=", "=", "+=", "-=", "*=", "//=", "%="))
        rhs = self.aug_value(op, ctx)
        self.charge(ops=5)
        return ("simple", f"{call.text}[{idx}] {op} {rhs.text}")

    def s_tuple(self, ctx):
        r = self.r
        assignable = self.visible(assignable=True, frozen=ctx.frozen)
        lists = self.visible("list")
        targets: list[tuple[str, str]] = []  # (target text, kind)
        x = r.random()
        if x < 0.35:
            # Swap two variables of one kind.
            by_kind: dict[str, list[_Var]] = {}
            for v in assignable:
                by_kind.setdefault(v.kind, []).append(v)
            pairs = [vs for vs in by_kind.values() if len(vs) >= 2]
            if not pairs:
                return None
            a, b = r.sample(r.choice(pairs), 2)
            lhs, rhs = [a.name, b.name], [b.name, a.name]
            self.charge(ops=4)
        elif x < 0.55 and lists:
            # Swap two elements of a list (both indices evaluated once per side).
            xs = r.choice(lists).name
            i, j = self.index(xs, ctx, pure=True), self.index(xs, ctx, pure=True)
            lhs = [f"{xs}[{i.text}]", f"{xs}[{j.text}]"]
            rhs = [lhs[1], lhs[0]]
            self.charge(ops=12)
        else:
            n = r.randint(2, 4)
            wide = self.cfg.p_wide_tuple and r.random() < self.cfg.p_wide_tuple
            if wide:
                n = r.randint(5, 8)
            lhs, rhs, new = [], [], []
            pool = list(assignable)
            r.shuffle(pool)
            for _ in range(n):
                y = r.random()
                if wide and y < 0.15:
                    # A call's element as a target: Python calls it after the whole right side,
                    # between the stores to its left and right neighbours.
                    call = self.call("list", 1, ctx, nogrow=ctx.no_growth)
                    if call is None:
                        continue
                    lhs.append(f"{call.text}[{r.choice(('0', '-1', '1'))}]")
                    kind = "int"
                elif y < 0.2 and lists:
                    xs = r.choice(lists).name
                    lhs.append(f"{xs}[{self.index(xs, ctx).text}]")
                    kind = "int"
                elif y < 0.35:
                    kind = r.choice(KINDS)
                    name = self.fresh_name(kind)
                    if name in new or name in lhs:
                        continue
                    new.append((name, kind))
                    lhs.append(name)
                elif pool:
                    v = pool.pop()
                    lhs.append(v.name)
                    kind = v.kind
                else:
                    continue
                rhs.append(self.expr(kind, r.randint(0, 2), cap=self.cap, nogrow=ctx.no_growth).text)
            if len(lhs) < 2:
                return None
            for name, kind in new:
                self.declare(name, kind)
            self.charge(ops=3 * len(lhs))
        comma = "," if r.random() < self.cfg.p_trailing_comma else ""
        left = ", ".join(lhs) + comma
        if r.random() < 0.15:
            left = f"({left})"
        right = ", ".join(rhs) + ("," if r.random() < self.cfg.p_trailing_comma else "")
        return ("simple", f"{left} = {right}")

    def s_exprstmt(self, ctx):
        r = self.r
        x = r.random()
        lists = self.visible("list")
        if x < 0.4:
            call = self.call(r.choice(KINDS), 1, ctx, any_kind=True, nogrow=ctx.no_growth)
            if call is not None:
                return ("simple", call.text)
        if x < 0.75 and lists:
            xs = r.choice(lists).name
            self.charge(ops=2)
            self.pops = True
            if r.random() < self.cfg.p_unguarded_pop:
                return ("simple", f"{xs}.pop()")
            return ("clauses", [(f"if {xs}:", [("simple", f"{xs}.pop()")])])
        e = self.expr(r.choice(KINDS), 1, nogrow=ctx.no_growth)
        return ("simple", e.text)

    def s_grow(self, ctx, extend=None):
        """xs.append(v) or xs += ys, always guarded so that no list outgrows list_cap."""
        r = self.r
        if ctx.no_growth:
            return None
        lists = self.visible("list")
        if not lists:
            return None
        xs = r.choice(lists).name
        cap = self.cap
        self.grows = True
        if extend is None:
            extend = r.random() < 0.3
        if extend:
            others = [v.name for v in lists]
            if r.random() < 0.6:
                ys = r.choice(others)  # may be xs itself: xs += xs doubles it
                guard = f"len({xs}) + len({ys}) <= {cap}"
            else:
                n = r.randint(0, 3)
                ys = "[" + ", ".join(self.literal().text for _ in range(n)) + "]"
                guard = r.choice((f"len({xs}) + {n} <= {cap}", f"len({xs}) <= {cap - n}"))
                self.charge(lists=1, mem=n + 4 * cap)
            self.charge(ops=8)
            return ("clauses", [(f"if {guard}:", [("simple", f"{xs} += {ys}")])])
        x = r.random()
        if x < 0.25 and ctx.depth < self.cfg.max_block_depth:
            # Fill up to a bound: the value must not pop or call (it would keep the loop alive).
            k = r.randint(0, min(cap, self.cfg.max_loop_iters))
            if not self.afford(ops=12 * k):
                return None
            mult = self.mult
            self.mult *= k + 1
            v = self.expr("int", 1, pure=True)
            self.charge(ops=12)
            self.mult = mult
            return ("clauses", [(f"while len({xs}) < {k}:", [("simple", f"{xs}.append({v.text})")])])
        # The guard and the value may pop, but must not grow a list between check and append.
        extra = ""
        if r.random() < 0.3:
            extra = " and " + self.wrap(self.expr("bool", 1, nogrow=True), P_NOT).text
        guard = r.choice((f"len({xs}) < {cap}", f"{cap} > len({xs})", f"not len({xs}) >= {cap}"))
        v = self.expr("int", 2, nogrow=True)
        self.charge(ops=8)
        return ("clauses", [(f"if {guard}{extra}:", [("simple", f"{xs}.append({v.text})")])])

    def s_loop_exit(self, ctx):
        c = self.expr("bool", 2, nogrow=ctx.no_growth)
        word = "break" if ctx.break_ok and self.r.random() < 0.5 else "continue"
        return ("clauses", [(f"if {c.text}:", [("simple", word)])])

    def s_early_return(self, ctx):
        c = self.expr("bool", 2, nogrow=ctx.no_growth)
        e = self.expr(self.f.ret, 2, cap=self.cap, nogrow=ctx.no_growth)
        return ("clauses", [(f"if {c.text}:", [("simple", f"return {e.text}")])])

    # --- compound statements -------------------------------------------------------------

    def sub(self, ctx: _Ctx, **kw) -> _Ctx:
        d = dict(ctx.__dict__)
        d["depth"] = ctx.depth + 1
        d.update(kw)
        return _Ctx(**d)

    def cond(self, ctx):
        """A condition of any type (truthiness), mostly bool."""
        kind = self.r.choices(KINDS, weights=(2, 8, 1.5))[0]
        return self.expr(kind, self.r.randint(0, 2), cap=4 * self.cap, nogrow=ctx.no_growth)

    def if_stmt(self, ctx, must_return=False):
        r = self.r
        sub = self.sub(ctx)
        clauses = [(f"if {self.cond(ctx).text}:", self.block(sub, must_return))]
        for _ in range(r.choice((0, 0, 0, 1, 1, 2))):
            clauses.append((f"elif {self.cond(ctx).text}:", self.block(sub, must_return)))
        if must_return or r.random() < 0.4:
            clauses.append(("else:", self.block(sub, must_return)))
        return ("clauses", clauses)

    def enter_loop(self, iters):
        """Multiply the cost of the loop body by its iteration bound; None if unaffordable."""
        if not self.afford(ops=(LOOP_OPS + 10) * (iters + 1)):
            return None
        saved = self.mult
        self.mult *= iters + 1
        self.charge(ops=LOOP_OPS)
        return saved

    def for_range(self, ctx):
        r, cfg = self.r, self.cfg
        K = cfg.max_loop_iters
        x = r.random()
        lit = lambda v: str(v) if v >= 0 else f"-{-v}"  # noqa: E731
        expr = lambda: self.expr("int", 1, nogrow=ctx.no_growth).text  # noqa: E731
        indexes = None  # the list whose indices the loop variable runs over
        edge = self.edge_range() if cfg.p_edge_range and r.random() < cfg.p_edge_range else None
        if edge is not None:
            args, iters = edge
        elif x < 0.2:
            n = r.randint(-1, K)
            args, iters = lit(n), max(n, 0)
        elif x < 0.35:
            a = r.randint(-K, K)
            b = r.randint(a - 2, a + K)
            args, iters = f"{lit(a)}, {lit(b)}", max(b - a, 0)
        elif x < 0.5:
            s = r.choice((1, 2, 3, -1, -1, -2, -3)) if r.random() >= cfg.p_step_zero else 0
            a, b = r.randint(-K, K), r.randint(-K, K)
            args, iters = f"{lit(a)}, {lit(b)}, {lit(s)}", len(range(a, b, s)) if s else 0
        elif x < 0.65:
            lists = self.visible("list")
            if not lists:
                return None
            indexes = r.choice(lists).name
            args, iters = f"len({indexes})", self.cap
        elif x < 0.75:
            k = r.randint(0, K)
            args, iters = f"min({expr()}, {k})", k
        else:
            # Computed bounds, clamped so that the count stays below 2k + 1 whatever the step.
            k = r.randint(1, K // 2 + 1)
            y = r.random()
            if y < 0.35:    # counts up: the step is positive
                step = r.choice(("1", "2", f"max({expr()}, 1)"))
                args = f"max({expr()}, {lit(-k)}), min({expr()}, {k}), {step}"
            elif y < 0.7:   # counts down: the step is negative
                step = r.choice(("-1", "-2", f"min({expr()}, -1)"))
                args = f"min({expr()}, {k}), max({expr()}, {lit(-k)}), {step}"
            else:           # fixed bounds, any step (0 traps value_error)
                args = f"{lit(r.randint(-k, k))}, {lit(r.randint(-k, k))}, {expr()}"
            iters = 2 * k + 1
        if r.random() < 0.05:
            args += ","
        saved = self.enter_loop(iters)
        if saved is None:
            return None
        ints = self.visible("int", assignable=True, frozen=ctx.frozen)
        self.push({})
        if ints and r.random() < 0.2:
            var = r.choice(ints).name  # assigns the visible variable; it keeps its last value
        else:
            var = self.fresh_name("int")
            self.declare(var, "int")
            if indexes:
                self.safe_index.append((var, indexes))
        body = self.block(self.sub(ctx, in_loop=True, break_ok=True))
        if indexes and self.safe_index and self.safe_index[-1][0] == var:
            self.safe_index.pop()
        self.pop_scope()
        self.mult = saved
        return ("clauses", [(f"for {var} in range({args}):", body)])

    def edge_range(self):
        """range() arguments next to the int32 limits, or with a step of about 2**31, that yield
        at most max_loop_iters values. Every value fits in int32; the next one after the last may
        not, and the VM must not trap on it as CPython does not."""
        r, K = self.r, self.cfg.max_loop_iters
        for _ in range(4):
            k = r.randint(0, K)
            x = r.random()
            if x < 0.3:
                a = INT_MAX - k - r.randint(0, 2)
                args = (a, INT_MAX - r.randint(0, 1)) if r.random() < 0.5 else (a, INT_MAX, r.choice((1, 2, 3)))
            elif x < 0.6:
                a = INT_MIN + k + r.randint(0, 2)
                args = (a, INT_MIN + r.randint(0, 1), r.choice((-1, -2, -3)))
            else:
                big = r.choice((INT_MAX, INT_MAX - 1, INT_MIN, INT_MIN + 1, 1 << 30))
                s = big if big > 0 and r.random() < 0.5 else -abs(big)
                ends = (INT_MIN, INT_MIN + 1, -1, 0, 1, INT_MAX - 1, INT_MAX)
                args = (r.choice(ends), r.choice(ends), s)
            n = len(range(*args))
            if n <= K:
                return ", ".join(_int_text(v) for v in args), n
        return None

    def for_list(self, ctx):
        r = self.r
        lists = self.visible("list")
        x = r.random()
        if lists and x < 0.6:
            it = _Expr(r.choice(lists).name, P_ATOM, self.cap)
        else:
            it = self.expr("list", 2, cap=2 * self.cap, nogrow=ctx.no_growth)
        # The list is live: the body may append to it, but never past list_cap.
        saved = self.enter_loop(max(it.size, self.cap))
        if saved is None:
            return None
        ints = self.visible("int", assignable=True, frozen=ctx.frozen)
        if ints and self.cfg.p_reuse_for_var and r.random() < self.cfg.p_reuse_for_var:
            var = r.choice(ints).name  # assigns the visible variable; it keeps its last value
            self.push({})
        else:
            var = self.fresh_name("int")
            self.push({var: _Var(var, "int")})
        body = self.block(self.sub(ctx, in_loop=True, break_ok=True))
        self.pop_scope()
        self.mult = saved
        return ("clauses", [(f"for {var} in {it.text}:", body)])

    def while_stmt(self, ctx):
        r, cfg = self.r, self.cfg
        K = r.randint(0, cfg.max_loop_iters)
        x = r.random()
        lists = [v for v in self.visible("list", assignable=True, frozen=ctx.frozen)]
        if x < 0.25 and lists:
            # Drain a list: every iteration pops, nothing grows, so it ends within list_cap.
            xs = r.choice(lists).name
            saved = self.enter_loop(self.cap)
            if saved is None:
                return None
            head = r.choice((f"while {xs}:", f"while len({xs}) > 0:", f"while len({xs}) > {r.randint(1, 3)}:"))
            sub = self.sub(ctx, in_loop=True, break_ok=True, no_growth=True, frozen=ctx.frozen | {xs})
            self.pops = True
            self.push({})
            ints = self.visible("int", assignable=True, frozen=ctx.frozen)
            y = r.random()
            if y < 0.4 or not ints:
                v = self.fresh_name("int")
                first = ("simple", f"{v} = {xs}.pop()")
                self.declare(v, "int")
            elif y < 0.8:
                first = ("simple", f"{r.choice(ints).name} += {xs}.pop()")
            else:
                first = ("simple", f"{xs}.pop()")
            body = self.block(sub, prefix=[first])
            self.pop_scope()
            self.mult = saved
            return ("clauses", [(head, body)])
        # A counted loop: the counter is declared in the enclosing block, changed first thing
        # in the body (so `continue` cannot skip it) and never assigned anywhere else.
        counter = self.fresh_name("int")
        saved = self.enter_loop(K + 1)
        if saved is None:
            return None
        if x < 0.55:
            init = "0"
            c = self.expr("bool", self.r.randint(0, 2), nogrow=ctx.no_growth)  # `and` needs one type
            head = r.choice((f"while {counter} < {K} and {self.wrap(c, P_NOT).text}:",
                             f"while {self.wrap(c, P_AND).text} and {counter} < {K}:",
                             f"while {counter} < {K}:"))
            prefix = [("simple", f"{counter} += 1")]
        elif x < 0.75:
            init = str(K)
            head = r.choice((f"while {counter} > 0:", f"while {counter}:", f"while 0 < {counter}:"))
            prefix = [("simple", f"{counter} -= 1")]
        else:
            init = "0"
            head = "while True:"
            prefix = [("simple", f"{counter} += 1"),
                      ("clauses", [(f"if {counter} > {K}:", [("simple", "break")])])]
        self.declare(counter, "int", assignable=False)
        self.push({})
        body = self.block(self.sub(ctx, in_loop=True, break_ok=True), prefix=prefix)
        self.pop_scope()
        self.mult = saved
        return ("seq", [("simple", f"{counter} = {init}"), ("clauses", [(head, body)])])

    def while_true_tail(self, ctx):
        """`while True:` with no break of its own ends a function safely."""
        r = self.r
        K = r.randint(0, self.cfg.max_loop_iters)
        counter = self.fresh_name("int")
        saved = self.enter_loop(K + 1)
        if saved is None:
            return None
        ret = self.expr(self.f.ret, 1, cap=self.cap, nogrow=ctx.no_growth)
        self.declare(counter, "int", assignable=False)
        prefix = [("simple", f"{counter} += 1"),
                  ("clauses", [(f"if {counter} >= {K}:", [("simple", f"return {ret.text}")])])]
        self.push({})
        body = self.block(self.sub(ctx, in_loop=True, break_ok=False), prefix=prefix)
        self.pop_scope()
        self.mult = saved
        return ("seq", [("simple", f"{counter} = 0"), ("clauses", [("while True:", body)])])

    # --- expressions -------------------------------------------------------------------------

    def wrap(self, e: _Expr, prec: int) -> _Expr:
        """Parenthesize `e` if it binds less tightly than `prec` (or sometimes anyway)."""
        if e.prec < prec or (self.r.random() < self.cfg.p_extra_parens and e.prec < P_ATOM):
            return _Expr(f"({e.text})", P_ATOM, e.size, e.has_call)
        return e

    def expr(self, kind, depth, cap=None, nogrow=False, pure=False, nocall=False) -> _Expr:
        """An expression of `kind`. nogrow: no call that may grow a list; pure: no call and no
        pop at all; nocall: no call (recursive base cases). cap bounds a list's length."""
        if cap is None:
            cap = 4 * self.cap
        self.charge(ops=NODE_OPS)
        opts = dict(nogrow=nogrow, pure=pure, nocall=nocall)
        if kind == "int":
            return self.int_expr(depth, opts)
        if kind == "bool":
            return self.bool_expr(depth, opts)
        return self.list_expr(depth, cap, opts)

    def literal(self, small=False) -> _Expr:
        r = self.r
        if not small and r.random() < self.cfg.p_big_literal:
            v = r.choice(INT32_EDGES + (1000, 99999, 123456789))
        else:
            v = r.choice((0, 1, 1, 2, 2, 3, 4, 5, 7, 10, r.randint(0, 100)))
            if r.random() < 0.2:
                v = -v
        if v == INT_MIN:
            return _Expr("-2147483647 - 1", P_SUM)
        if v < 0:
            return _Expr(f"-{-v}", P_UNARY)
        return _Expr(str(v), P_ATOM)

    def divisor(self, ctx) -> _Expr:
        r = self.r
        if r.random() < self.cfg.p_unsafe_div:
            return self.expr("int", 1, nogrow=ctx.no_growth)
        x = r.random()
        if x < 0.5:
            return _Expr(str(r.choice((1, 2, 3, 4, 5, 7, 10, 16))) if r.random() < 0.8 else f"-{r.randint(1, 9)}",
                         P_ATOM)
        e = self.expr("int", 1, nogrow=ctx.no_growth)
        if x < 0.75:
            return _Expr(f"({self.wrap(e, P_AND).text} or {r.randint(1, 9)})", P_ATOM, 0, e.has_call)
        return _Expr(f"max({e.text}, 1)", P_ATOM, 0, e.has_call)

    def aug_value(self, op, ctx) -> _Expr:
        """The right side of an augmented assignment: a safe divisor for //= and %=."""
        if op in ("//=", "%="):
            return self.divisor(ctx)
        return self.expr("int", self.r.randint(0, 2), nogrow=ctx.no_growth)

    def index(self, xs: str, ctx, pure=False) -> _Expr:
        """An index into list variable xs: often in range, sometimes anything."""
        r = self.r
        safe = [i for i, l in self.safe_index if l == xs and self.is_visible(i)]
        x = r.random()
        if safe and x < 0.4:
            return _Expr(r.choice(safe), P_ATOM)
        if x < 0.6:
            return _Expr(str(r.randint(-3, 3)) if r.random() < 0.15 else r.choice(("0", "0", "-1", "-1", "1")), P_UNARY)
        e = self.expr("int", 1, nogrow=True, pure=pure or ctx.no_growth)
        if r.random() < self.cfg.p_unsafe_index:
            return e
        return _Expr(f"{self.wrap(e, P_TERM).text} % len({xs})", P_TERM, 0, e.has_call)  # traps if xs is empty

    def pick(self, options):
        """Call one of the (function, weight) options, chosen by weight."""
        x = self.r.random() * sum(w for _, w in options)
        for fn, w in options:
            x -= w
            if x < 0 and w > 0:
                return fn()
        return next(fn for fn, w in reversed(options) if w > 0)()

    def int_expr(self, depth, o) -> _Expr:
        r = self.r
        ints = self.visible("int")
        lists = self.visible("list")
        sub = lambda: self.expr("int", depth - 1, **o)  # noqa: E731

        def var():
            return _Expr(r.choice(ints).name, P_ATOM)

        def length():
            e = self.expr("list", max(depth - 1, 0), cap=4 * self.cap, **o)
            return _Expr(f"len({e.text})", P_ATOM, 0, e.has_call)

        def indexed():
            xs = r.choice(lists).name
            idx = self.index(xs, _Ctx(no_growth=o["nogrow"]), pure=o["pure"])
            if r.random() < 0.4:  # the idiomatic guard against an empty list
                alt = self.wrap(self.literal(small=True), P_COND)
                return _Expr(f"{xs}[{idx.text}] if {xs} else {alt.text}", P_COND, 0, idx.has_call)
            return _Expr(f"{xs}[{idx.text}]", P_ATOM, 0, idx.has_call)

        def indexed_expr():
            e = self.wrap(self.expr("list", depth - 1, cap=4 * self.cap, **o), P_ATOM)
            return _Expr(f"{e.text}[{r.randint(-2, 2)}]", P_ATOM, 0, e.has_call)

        def pop():
            self.pops = True
            xs = r.choice(lists).name
            if r.random() < self.cfg.p_unguarded_pop:
                return _Expr(f"{xs}.pop()", P_ATOM, 0, True)
            return _Expr(f"{xs}.pop() if {xs} else {self.wrap(self.literal(), P_COND).text}", P_COND, 0, True)

        def binop():
            op = r.choice(("+", "+", "-", "-", "*", "*"))
            p = P_SUM if op in "+-" else P_TERM
            a, b = self.wrap(sub(), p), self.wrap(sub(), p + 1)
            return _Expr(f"{a.text} {op} {b.text}", p, 0, a.has_call or b.has_call)

        def divmod_():
            op = r.choice(("//", "%"))
            a = self.wrap(sub(), P_TERM)
            b = self.wrap(self.divisor(_Ctx(no_growth=o["nogrow"])) if not o["pure"] else _Expr(str(r.randint(1, 9)), P_ATOM), P_UNARY)
            return _Expr(f"{a.text} {op} {b.text}", P_TERM, 0, a.has_call or b.has_call)

        def unary():
            op = r.choice(("-", "-", "+"))
            a = self.wrap(sub(), P_UNARY)
            return _Expr(f"{op}{a.text}", P_UNARY, 0, a.has_call)

        def builtin():
            name = r.choice(("abs", "min", "max"))
            args = [sub() for _ in range(1 if name == "abs" else 2)]
            return _Expr(f"{name}({', '.join(a.text for a in args)})", P_ATOM, 0, any(a.has_call for a in args))

        def conditional():
            return self.conditional("int", depth, o)

        def logic():
            return self.logic("int", depth, o)

        def call():
            c = self.call("int", depth, _Ctx(no_growth=o["nogrow"]), nogrow=o["nogrow"])
            return c if c is not None else self.literal()

        can_call = not (o["pure"] or o["nocall"])
        leaves = [(self.literal, 3), (var, 5 if ints else 0), (length, 1 if lists else 0.2),
                  (indexed, 1.5 if lists else 0), (pop, 0.3 if lists and not o["pure"] else 0),
                  (call, 0.6 if can_call else 0)]
        if depth <= 0:
            return self.pick(leaves)
        return self.pick(leaves + [(binop, 6), (divmod_, 1.5), (unary, 0.7), (builtin, 1.2),
                                   (conditional, 0.5), (logic, 0.4), (indexed_expr, 0.2),
                                   (call, 1.2 if can_call else 0)])

    def bool_expr(self, depth, o) -> _Expr:
        r = self.r
        bools = self.visible("bool")

        def const():
            return _Expr(r.choice(("True", "False")), P_ATOM)

        def var():
            return _Expr(r.choice(bools).name, P_ATOM)

        def compare():
            n = 2 if r.random() < 0.8 or depth <= 0 else 3
            if self.cfg.p_long_chain and r.random() < self.cfg.p_long_chain:
                n = r.randint(4, 5)  # operands evaluated once each, left to right, until one fails
            es = [self.wrap(self.expr("int", max(depth - 1, 0), **o), P_SUM) for _ in range(n)]
            ops = [r.choice(("<", "<=", ">", ">=", "==", "!=")) for _ in range(n - 1)]
            text = es[0].text + "".join(f" {op} {e.text}" for op, e in zip(ops, es[1:]))
            return _Expr(text, P_CMP, 0, any(e.has_call for e in es))

        def bool_eq():
            a = self.wrap(self.expr("bool", depth - 1, **o), P_SUM)
            b = self.wrap(self.expr("bool", depth - 1, **o), P_SUM)
            return _Expr(f"{a.text} {r.choice(('==', '!='))} {b.text}", P_CMP, 0, a.has_call or b.has_call)

        def negation():
            kind = r.choices(KINDS, weights=(1, 3, 1))[0]
            a = self.wrap(self.expr(kind, depth - 1, **o), P_NOT)
            return _Expr(f"not {a.text}", P_NOT, 0, a.has_call)

        def conditional():
            return self.conditional("bool", depth, o)

        def logic():
            return self.logic("bool", depth, o)

        def call():
            c = self.call("bool", depth, _Ctx(no_growth=o["nogrow"]), nogrow=o["nogrow"])
            return c if c is not None else const()

        can_call = not (o["pure"] or o["nocall"])
        leaves = [(const, 1), (var, 3 if bools else 0), (compare, 4), (call, 0.4 if can_call else 0)]
        if depth <= 0:
            return self.pick(leaves)
        return self.pick(leaves + [(negation, 1.2), (logic, 2), (bool_eq, 0.4), (conditional, 0.3),
                                   (call, 0.8 if can_call else 0)])

    def list_expr(self, depth, cap, o) -> _Expr:
        r = self.r
        lists = self.visible("list")
        C = self.cap
        creatable = self.afford(lists=1, mem=cap + 4 * C)

        def var():
            return _Expr(r.choice(lists).name, P_ATOM, C)

        def literal():
            n = r.randint(0, min(cap, 4))
            if n and r.random() < 0.3:
                # Elements are arbitrary int expressions, possibly with side effects.
                elems = [self.expr("int", max(depth - 1, 0), **o) for _ in range(n)]
            else:
                elems = [self.literal() for _ in range(n)]
            self.charge(lists=1, mem=n + 4 * C)
            sep = ", "
            if n >= 2 and r.random() < self.cfg.p_multiline:
                sep = ",\n"  # implicit line joining inside brackets
            text = "[" + sep.join(e.text for e in elems)
            if n and r.random() < self.cfg.p_trailing_comma:
                text += ","
            return _Expr(text + "]", P_ATOM, n, any(e.has_call for e in elems))

        def repeat():
            n = r.randint(1, 2)
            base = _Expr("[" + ", ".join(self.literal().text for _ in range(n)) + "]", P_ATOM, n)
            kmax = max(0, cap // n)
            if kmax == 0:
                return literal()
            k = r.randint(0, min(kmax, 4))
            if r.random() < 0.4:
                e = self.expr("int", max(depth - 1, 0), **o)
                count = _Expr(f"min({e.text}, {k})", P_ATOM, 0, e.has_call)  # <= 0 gives []
            else:
                count = _Expr(str(r.choice((k, k, -1, 0))) if r.random() < 0.9 else f"-{r.randint(1, 3)}", P_UNARY)
            self.charge(lists=2, mem=n + k * n + 8 * C)
            if r.random() < 0.5:
                return _Expr(f"{base.text} * {self.wrap(count, P_UNARY).text}", P_TERM, k * n, count.has_call)
            return _Expr(f"{self.wrap(count, P_TERM).text} * {base.text}", P_TERM, k * n, count.has_call)

        def concat():
            a = self.expr("list", depth - 1, cap=cap // 2, **o)
            b = self.expr("list", depth - 1, cap=cap - a.size, **o)
            a, b = self.wrap(a, P_SUM), self.wrap(b, P_SUM + 1)
            self.charge(lists=1, mem=a.size + b.size + 4 * C)
            return _Expr(f"{a.text} + {b.text}", P_SUM, a.size + b.size, a.has_call or b.has_call)

        def conditional():
            return self.conditional("list", depth, o, cap)

        def logic():
            return self.logic("list", depth, o, cap)

        def call():
            c = self.call("list", depth, _Ctx(no_growth=o["nogrow"]), nogrow=o["nogrow"])
            if c is None:
                return var() if lists and cap >= C else literal()
            return c

        can_call = not (o["pure"] or o["nocall"])
        big = cap >= C
        opts = [(var, 6 if lists and big else 0), (literal, 2 if creatable or not (lists and big) else 0),
                (call, 0.7 if can_call and big else 0)]
        if depth > 0:
            opts += [(repeat, 0.8 if creatable else 0), (concat, 1 if creatable and cap >= 2 else 0),
                     (conditional, 0.4), (logic, 0.3)]
        return self.pick(opts)

    def conditional(self, kind, depth, o, cap=None) -> _Expr:
        a = self.wrap(self.expr(kind, depth - 1, cap=cap, **o), P_OR)
        c = self.wrap(self.expr(self.r.choices(KINDS, weights=(1, 4, 1))[0], depth - 1, **o), P_OR)
        b = self.wrap(self.expr(kind, depth - 1, cap=cap, **o), P_COND)
        return _Expr(f"{a.text} if {c.text} else {b.text}", P_COND, max(a.size, b.size),
                     a.has_call or b.has_call or c.has_call)

    def logic(self, kind, depth, o, cap=None) -> _Expr:
        op, p = self.r.choice((("and", P_AND), ("or", P_OR)))
        a = self.wrap(self.expr(kind, depth - 1, cap=cap, **o), p)
        b = self.wrap(self.expr(kind, depth - 1, cap=cap, **o), p + 1)
        return _Expr(f"{a.text} {op} {b.text}", p, max(a.size, b.size), a.has_call or b.has_call)

    def call(self, kind, depth, ctx, any_kind=False, nogrow=False, force_self=False) -> _Expr | None:
        """A call to a callee (or, outside loops, a recursive self-call) returning `kind`."""
        if self.in_base_case:  # nested helpers (divisors, indices) reach here without `nocall`
            return None
        r = self.r
        f = self.f
        cands = [g for g in self.callees if (any_kind or g.ret == kind)
                 and not (nogrow and g.grows)
                 and self.afford(g.ops, g.lists, g.mem)]
        self_ok = (f.recursive and self.self_calls_left > 0 and self.mult == self.activations
                   and (any_kind or f.ret == kind) and not nogrow)
        if self_ok and (force_self or r.random() < 0.6):
            g = f
            self.self_calls_left -= 1
        elif cands:
            g = r.choice(cands)
        else:
            return None
        args = []
        has_call = True
        for i, (pname, pkind) in enumerate(g.params):
            if g.recursive and i == 0:
                if g is f:
                    args.append(f"{pname} - {r.choice((1, 1, 1, 2))}")
                elif r.random() < 0.4:
                    args.append(str(r.randint(-1, g.rec_bound)))
                else:
                    e = self.expr("int", max(depth - 1, 0), nogrow=nogrow)
                    args.append(f"min({e.text}, {g.rec_bound})")  # the callee's depth is bounded
                continue
            args.append(self.expr(pkind, max(depth - 1, 0), cap=self.cap, nogrow=nogrow).text)
        if g is not f:
            self.charge(ops=g.ops, lists=g.lists, mem=g.mem)
            self.callee_depth = max(self.callee_depth, g.depth)
            self.grows |= g.grows
            self.pops |= g.pops
        self.charge(ops=CALL_OPS + (COMPANION_OPS + len(g.params) if g is f and f.via else 0))
        sep = ", "
        if len(args) >= 2 and r.random() < self.cfg.p_multiline:
            sep = ",\n"
        text = sep.join(args)
        if args and r.random() < self.cfg.p_trailing_comma:
            text += ","
        name = f.via if g is f and f.via else g.name
        return _Expr(f"{name}({text})", P_ATOM, self.cap, has_call)


# ----------------------------------------------------------------------------------------
# Rendering
# ----------------------------------------------------------------------------------------

def _render(stmts, indent, unit, out, r, cfg):
    for s in stmts:
        tag = s[0]
        if tag == "simple":
            line = indent + s[1]
            if r.random() < cfg.p_trailing_comment:
                line += f"  # {r.choice(COMMENTS)}"
            out.append(_indent_continuations(line, indent + unit))
        elif tag == "comment":
            out.append(f"{indent}# {s[1]}")
        elif tag == "blank":
            out.append("")
        elif tag == "seq":
            _render(s[1], indent, unit, out, r, cfg)
        else:  # clauses
            for header, body in s[1]:
                real = [b for b in body if b[0] in ("simple", "clauses", "seq")]
                if (len(body) == 1 and body[0][0] == "simple" and "\n" not in body[0][1]
                        and r.random() < cfg.p_one_line):
                    out.append(f"{indent}{header} {body[0][1]}")
                else:
                    assert real, "a block needs a statement"
                    out.append(_indent_continuations(indent + header, indent + unit))
                    _render(body, indent + unit, unit, out, r, cfg)


def _indent_continuations(line, indent):
    """Lines split inside brackets continue at any indentation; make it look deliberate."""
    if "\n" not in line:
        return line
    return line.replace("\n", "\n" + indent + "    ")


# ----------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------

def _cost_ok(entry: _Func, nparams_list: int, cfg: GeneratorConfig) -> bool:
    """Hard limits, checked after generation (the per-statement checks are best effort)."""
    return (entry.ops <= 2 * cfg.op_budget and entry.lists + nparams_list <= 2 * cfg.list_budget
            and entry.mem + nparams_list * ARG_LIST_LEN * cfg.list_cap <= LIST_MEMORY
            and entry.depth <= cfg.max_call_depth)


def generate_program(rng: np.random.Generator, config: GeneratorConfig | None = None) -> GeneratedProgram:
    """A random well-typed program whose entry terminates within bounded resources on every
    input. Deterministic: the result depends only on the state of `rng` (one draw is taken)."""
    cfg = config or GeneratorConfig()
    r = random.Random(int(rng.integers(0, 2**63 - 1)))
    for _ in range(MAX_ATTEMPTS):  # rejection keeps the hard resource limits exact; it is rarely needed
        prog, entry = _ProgramGen(r, cfg).program()
        if _cost_ok(entry, prog.params.count("list"), cfg) and _fits(prog.source):
            return prog
    raise RuntimeError(f"generate_program: no program within the limits after {MAX_ATTEMPTS} tries; raise "
                       "op_budget, list_budget, mem_budget or max_call_depth, or lower the sizes")


def _fits(source: str) -> bool:
    """Within the compiler's token limit (large max_statements can outgrow it)."""
    try:
        tokenize(source)
    except CompileError:
        return False
    return True


def _random_int(r: random.Random) -> int:
    x = r.random()
    if x < 0.6:
        return r.randint(-10, 10)
    if x < 0.85:
        return r.randint(-1000, 1000)
    if x < 0.95:
        return r.choice(INT32_EDGES)
    return r.randint(INT_MIN, INT_MAX)


def random_args(rng: np.random.Generator, params, n: int) -> list[tuple]:
    """`n` argument tuples for a function with parameter kinds `params` ('int' | 'bool' |
    'list'): ints mostly small, sometimes at the int32 edges; lists of length 0..6."""
    r = random.Random(int(rng.integers(0, 2**63 - 1)))
    out = []
    for _ in range(n):
        args = []
        for k in params:
            if k == "int":
                args.append(_random_int(r))
            elif k == "bool":
                args.append(r.random() < 0.5)
            else:
                length = r.choice((0, 1, 2, 3, 3, 4, 5, 6))
                small = r.random() < 0.8
                args.append([r.randint(-9, 9) if small else _random_int(r) for _ in range(length)])
        out.append(tuple(args))
    return out


if __name__ == "__main__":  # python -m vramgym.compiler.random_programs [seed]
    import sys
    g = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    p = generate_program(g)
    print(p.source)
    print("# entry:", p.entry, p.params, "->", p.ret)
