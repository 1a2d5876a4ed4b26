"""The per-env reference implementation of the grammar- and type-aware action masks (the oracle).

`vramgym.envs.grammar.Grammar` is the batched implementation (array code, no Python loop over
envs); it subclasses `ReferenceGrammar` below and must give exactly the same masks, next states
and invalid flags (tests/test_grammar_vectorized.py checks it on random rollouts). This module
keeps the original per-row automaton: simple to read, slow (about 0.5 ms per env-step).

The agent writes the body of a function whose signature line is given. At every step the mask
allows the actions that continue the prefix to a well-typed program of the language (within
the subset below) whose canonical completion still fits the length budget L, so that ANY
masked action sequence reaches END by L tokens and compiles (tests/test_grammar.py checks it
against the compiler and CPython). The canonical completion (`min_tokens_to_finish`) closes
every open expression and block with constants, never variables, so the mask is sound but not
complete near the budget: at L = 6 with `def f(xs: list[int]) -> list[int]:` it forbids `pass`
first, although `pass` NEWLINE `return xs` NEWLINE END fits, because the constant-only way to
return a list is longer than `xs`.

    g = ReferenceGrammar(signature, max_len=64)
    state = g.reset(n)                 # (n, STATE_SIZE) int32
    mask = g.mask(state)               # (n, VOCAB_SIZE) bool
    state, invalid = g.step(state, a)  # a: (n,) int; invalid: (n,) bool, state unchanged there

Bad actions (out of range, masked, or after END) are not applied: `step` reports them in
`invalid` and leaves that env's state as it was; it never raises for them.

Subset of the language the vocabulary expresses (docs/language.md): statements `return e`,
`if/elif/else`, `while e:`, `for v in range(a[, b[, c]]):`, `for v in <list expr>:`,
`break`, `continue`, `pass`, `v = e` (declares v with e's type on first assignment),
`v op= e`, `xs[i] = e`, `xs[i] op= e`, `xs.append(e)`; expressions with Python's precedence
over `or and not`, comparisons (chained), `+ - * // %`, unary `-`, `( )`, list literals,
`xs[i]`, `xs.pop()`, `len abs min max`, and recursive calls of the task's function. Left out
(the mask never offers them): tuple assignment, conditional expressions, annotated
assignment, unary `+`, `not not`, `- -`, expression statements other than `append`,
statements after `return/break/continue` in the same block or after an if/else whose
branches all return, and `while True:` as a safe ending (a function must end in a `return` or
an if/else whose branches all return).

State (one int32 row per env, fixed size, so moving it to torch is mechanical):

    header  H_*                              length, done, statement phase, block depth, ...
    blocks  (MAX_BLOCKS, B_FIELDS)           per open block: kind, nonempty, safe, ...
    vars    (NUM_NAMES, 2)                   type and declaring depth of P0..P3, V0..V7
    frames  (MAX_FRAMES, F_FIELDS)           the open expressions (parentheses, calls, ...):
            precedence-chain types + the cost to finish the program after this frame closes
            with each result type (REST_I/B/L: set when the frame opens, so the minimum
            number of tokens to finish is an O(1) lookup: min_t C[top][t] + REST_t).

Length guarantee: cost(state) is the length of a concrete completion (a canonical one: close
expressions with the cheapest constants, `pass` empty blocks, DEDENT, `return <const>`, END);
an action is allowed only when cost after it fits the remaining budget, and the canonical
completion's next action always does, so the mask is never empty and END comes by L.

The batched version (envs/grammar.py) tabulates the frame-local typing and costs into dense
arrays; this per-row version stays as its oracle.
"""
from __future__ import annotations

import math
import numbers
from functools import lru_cache

import numpy as np

from vramgym.vm.values import check_int

from . import vocab as V
from .vocab import ID, Signature, as_signature

INF = 1 << 20

# Types. Want-sets are not stored: a frame's REST_t is INF for result types its context
# rejects, so typing and feasibility are the same check.
T_NONE, T_I, T_B, T_L = 0, 1, 2, 3
TYPE_CODE = {"int": T_I, "bool": T_B, "list[int]": T_L}
CONST_COST = {T_I: 1, T_B: 1, T_L: 2}       # `0`, `True`, `[ ]`

# ---- state layout -------------------------------------------------------------------------
MAX_BLOCKS = 6    # block depth 0 (function body) .. 5; the compiler allows 16
MAX_FRAMES = 6    # open expression frames; with <= 3 nesting levels each, far below 64
# The longest body: every `elif` takes at least 3 tokens and every binary operator 2, so a body
# this long stays far below the compiler's MAX_NESTING (1,000 levels, for CPython's sake).
MAX_LEN = 1024
NUM_NAMES = V.NUM_PARAMS + V.NUM_VARS

(H_LEN, H_DONE, H_PH, H_DEPTH, H_LOOPS, H_NF, H_TARGET, H_PEND_KIND, H_PEND_VAR) = range(9)
H_SIZE = 9
# blocks
(B_KIND, B_NONEMPTY, B_SAFE, B_TERM, B_CHAIN, B_CHAIN_SAFE) = range(6)
B_FIELDS = 6
BK_BODY, BK_IF, BK_ELIF, BK_ELSE, BK_LOOP = range(5)
# frames
(F_KIND, F_PH, F_OR, F_AND, F_NOT, F_CMP, F_SUM, F_TERM, F_NEG, F_CUR, F_AUX, F_ARG, F_EMPTY_OK,
 F_REST_I, F_REST_B, F_REST_L, F_CALLEE) = range(17)
F_FIELDS = 17

OFF_BLOCKS = H_SIZE
OFF_VARS = OFF_BLOCKS + MAX_BLOCKS * B_FIELDS
OFF_FRAMES = OFF_VARS + NUM_NAMES * 2
STATE_SIZE = OFF_FRAMES + MAX_FRAMES * F_FIELDS

# statement phases (no frame open, or below the frames)
(P_BOUND, P_NL, P_COLON_NL, P_INDENT, P_ELSE_COLON, P_ASSIGN_EQ, P_TARGET, P_IDX_OP, P_DOT,
 P_APPEND_LP, P_FOR_VAR, P_FOR_IN, P_RANGE_LP, P_FOR_COLON, P_EXPR) = range(15)
# canonical tail lengths from each phase to the next statement boundary
_TAIL = {P_NL: 1, P_COLON_NL: 5, P_INDENT: 4, P_ELSE_COLON: 6, P_ASSIGN_EQ: 3, P_IDX_OP: 3,
         P_DOT: 5, P_APPEND_LP: 4, P_FOR_VAR: 10, P_FOR_IN: 9, P_RANGE_LP: 9, P_FOR_COLON: 6}

# frame kinds: what closes the frame and what its value feeds
(K_PAREN, K_SUB, K_LIST, K_CALL, K_RET, K_COND, K_ASSIGN_NEW, K_ASSIGN, K_AUG, K_IDX, K_IDX_VAL,
 K_APPEND, K_FORITER, K_RANGE) = range(14)
# frame phases
PH_BEFORE, PH_AFTER, PH_CALLEE, PH_DOT, PH_POP, PH_POPLP = range(6)
# multiplicative-level state: left operand and operator
TM_NONE, TM_INT_MUL, TM_INT_DIVMOD, TM_LIST_MUL = range(4)

# token groups
T = ID
INT_TOKENS = range(V.INT0, V.INT0 + V.NUM_INTS)
NAME_TOKENS = range(V.P0, V.V0 + V.NUM_VARS)
CMP_OPS = {T["<"], T["<="], T[">"], T[">="]}
EQ_OPS = {T["=="], T["!="]}
AUG_INT = {T["+="], T["-="], T["*="], T["//="], T["%="]}
CALLEES = {T["len"]: 0, T["abs"]: 1, T["min"]: 2, T["max"]: 3, V.FN: 4}
CLOSERS = {V.NEWLINE, T[":"], T[")"], T["]"], T[","]}

# Classes of actions with identical effect on the automaton: one trial step per class.
_CLASS_REP: dict[int, int] = {}
for _a in INT_TOKENS:
    _CLASS_REP[_a] = V.INT0
_CLASS_REP[T["False"]] = T["True"]


def action_ids(actions) -> np.ndarray:
    """Actions as the automata read them, (n,) int64: a value that is no integer (4.9, NaN, inf)
    or past int64 (2**70) becomes -1, an out-of-range and so invalid action, where a cast would
    truncate 4.9 to the valid action 4 (as the envs' actions, envs/vector.py as_actions).
    TypeError for non-numbers."""
    a = np.asarray(actions)
    if a.dtype == np.uint64:           # 2**63 and up fit no int64
        a = np.where(a > np.iinfo(np.int64).max, -1, a.astype(np.int64))
    elif a.dtype == object:            # Python ints past int64, or not numbers at all
        if not all(isinstance(v, numbers.Integral) for v in a.flat):
            raise TypeError(f"actions must be ints, got {actions!r:.80}")
        a = np.array([int(v) if -(1 << 63) <= v < 1 << 63 else -1 for v in a.flat], np.int64)
    if a.dtype.kind == "f":
        a = a.astype(np.float64)  # (2.0**62 is inf in float16: the comparison would warn of overflow)
        a = np.where((a == np.trunc(a)) & (np.abs(a) < 2.0**62), a, -1)
    elif a.dtype.kind not in "biu":
        raise TypeError(f"actions must be ints, got an array of {a.dtype}")
    return a.reshape(-1).astype(np.int64)


def _has_int_dtype(x) -> bool:
    if hasattr(x, "is_floating_point"):     # a torch tensor (no import here)
        return not (x.is_floating_point() or x.is_complex() or str(x.dtype) == "torch.bool")
    return x.dtype.kind in "iu"


def check_states(state):
    """State batches are one row (STATE_SIZE,) or rows (n, STATE_SIZE) of integers, numpy or
    torch: anything else is refused rather than read as other rows or truncated. Only the shape
    and dtype are read (no device sync). Returns numpy input as an array, tensors as they are."""
    if not hasattr(state, "shape") or not hasattr(state, "dtype"):
        state = np.asarray(state)
    shape = tuple(state.shape)
    if len(shape) not in (1, 2) or shape[-1] != STATE_SIZE:
        raise ValueError(f"states must be one row ({STATE_SIZE},) or rows (n, {STATE_SIZE}), got shape {shape}")
    if not _has_int_dtype(state):
        raise TypeError(f"states must be integers (as reset/initial make them), got {state.dtype}")
    return state


def check_gids(gid, n: int):
    """Grammar ids: integers, one per row (n of them). Values are the callers' to check (numpy
    indexing raises IndexError; the GPU kernels clamp them rather than sync)."""
    if not hasattr(gid, "shape") or not hasattr(gid, "dtype"):
        gid = np.asarray(gid)
    if not _has_int_dtype(gid):
        raise TypeError(f"grammar ids must be integers, got {gid.dtype}")
    if len(gid.shape) > 1 or (n >= 0 and math.prod(gid.shape) != n):
        raise ValueError(f"{n} rows but grammar ids of shape {tuple(gid.shape)}")
    return gid


def check_count(actions, n: int) -> None:
    """One action per row: ValueError otherwise (never a silent broadcast or a dropped tail)."""
    if actions.shape[0] != n:
        raise ValueError(f"{n} rows but {actions.shape[0]} actions")


class ReferenceGrammar:
    """The automaton for one signature and length budget; per-env Python loops (the oracle)."""

    def __init__(self, signature: "Signature | str", max_len: int = 64):
        self.sig = as_signature(signature)
        self.ret = TYPE_CODE[self.sig.ret]
        self.ptypes = tuple(TYPE_CODE[t] for t in self.sig.param_types)
        self.max_len = check_int(max_len, "max_len", 1)
        if self.max_len > MAX_LEN:
            raise ValueError(f"max_len {self.max_len} is above {MAX_LEN}: a longer body could nest deeper than "
                             f"the compiler allows")
        # callee -> (argument types, result type)
        self.callees = {0: ((T_L,), T_I), 1: ((T_I,), T_I), 2: ((T_I, T_I), T_I),
                        3: ((T_I, T_I), T_I), 4: (self.ptypes, self.ret)}
        self._callee_cost = {c: 2 + sum(CONST_COST[t] for t in a) + len(a) - 1
                             for c, (a, _) in self.callees.items()}
        self._frame_cost = lru_cache(maxsize=None)(self._frame_cost_uncached)
        init = self._initial_row()
        if self._cost(init) > self.max_len:
            raise ValueError(f"max_len {self.max_len} is below the shortest body ({self._cost(init)} tokens)")
        self._init = np.asarray(init, dtype=np.int32)

    def __getstate__(self):   # the per-instance cache is not picklable: rebuilt empty on load
        state = dict(self.__dict__)
        del state["_frame_cost"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._frame_cost = lru_cache(maxsize=None)(self._frame_cost_uncached)

    # ---- batch API ------------------------------------------------------------------------
    def reset(self, n: int = 1) -> np.ndarray:
        """(n, STATE_SIZE) int32: n empty bodies."""
        return np.tile(self._init, (n, 1))

    def mask(self, state: np.ndarray) -> np.ndarray:
        """(n, VOCAB_SIZE) bool: the allowed actions of each env (all False once done)."""
        state = np.atleast_2d(check_states(state))
        out = np.zeros((len(state), V.VOCAB_SIZE), dtype=bool)
        for i, row in enumerate(state.tolist()):
            out[i] = self._mask_row(row)
        return out

    def step(self, state: np.ndarray, actions) -> tuple[np.ndarray, np.ndarray]:
        """Apply one action per env. Returns (new state, invalid (n,) bool); an invalid action
        (out of range, masked, or after END) leaves that env unchanged."""
        state = np.atleast_2d(check_states(state))
        actions = action_ids(actions)
        check_count(actions, len(state))
        new = state.copy()
        invalid = np.zeros(len(state), dtype=bool)
        for i, row in enumerate(state.tolist()):
            r = self._try(row, int(actions[i]))
            if r is None:
                invalid[i] = True
            else:
                new[i] = r
        return new, invalid

    def done(self, state: np.ndarray) -> np.ndarray:
        return np.atleast_2d(check_states(state))[:, H_DONE].astype(bool)

    def min_tokens_to_finish(self, state: np.ndarray) -> np.ndarray:
        """(n,) int: tokens (END included) of the canonical completion of each env."""
        return np.array([self._cost(r) for r in np.atleast_2d(check_states(state)).tolist()])

    # ---- per-row core ---------------------------------------------------------------------
    def _mask_row(self, row: list[int]) -> np.ndarray:
        m = np.zeros(V.VOCAB_SIZE, dtype=bool)
        if row[H_DONE]:
            return m
        seen: dict[tuple, bool] = {}
        for a in range(V.VOCAB_SIZE):
            key = self._class_key(row, a)
            if key not in seen:
                seen[key] = self._try(row, a) is not None
            m[a] = seen[key]
        return m

    def _class_key(self, row, a):
        if a in NAME_TOKENS:   # names act by their declared type only
            slot = a - V.P0
            return ("name", row[OFF_VARS + 2 * slot], slot < V.NUM_PARAMS and row[OFF_VARS + 2 * slot] == T_NONE)
        return _CLASS_REP.get(a, a)

    def _try(self, row: list[int], a: int):
        """The row after action a, or None when a is not allowed (syntax, type or budget)."""
        if not 0 <= a < V.VOCAB_SIZE or row[H_DONE]:
            return None
        s = list(row)
        if not self._apply(s, a):
            return None
        s[H_LEN] += 1
        if self._cost(s) > self.max_len - s[H_LEN]:
            return None
        return s

    def _initial_row(self) -> list[int]:
        s = [0] * STATE_SIZE
        s[H_PH] = P_BOUND
        self._set_block(s, 0, BK_BODY)
        for i, t in enumerate(self.ptypes):
            s[OFF_VARS + 2 * i] = t
            s[OFF_VARS + 2 * i + 1] = -1   # parameters are never undeclared
        return s

    # ---- costs ----------------------------------------------------------------------------
    def _cost(self, s) -> int:
        """Tokens (END included) of the canonical completion of s; INF if there is none."""
        if s[H_DONE]:
            return 0
        nf = s[H_NF]
        if nf:
            f = OFF_FRAMES + (nf - 1) * F_FIELDS
            c = self._frame_cost(self._fkey(s, nf - 1))
            return min(INF, c[0] + s[f + F_REST_I], c[1] + s[f + F_REST_B], c[2] + s[f + F_REST_L])
        ph = s[H_PH]
        if ph == P_BOUND:
            return self._boundary_cost(s)
        if ph == P_TARGET:
            return 2 + CONST_COST[self._vtype(s, s[H_TARGET])] + self._boundary_cost(s)
        if ph == P_FOR_VAR and not any(self._for_var_ok(s, a) for a in NAME_TOKENS):
            return INF
        return _TAIL[ph] + self._boundary_cost(s)

    def _boundary_cost(self, s) -> int:
        """From a statement boundary: `pass` an empty block, DEDENT every block, return, END."""
        d = s[H_DEPTH]
        b = OFF_BLOCKS + d * B_FIELDS
        cost = 2 if (d > 0 and not s[b + B_NONEMPTY]) else 0
        safe = s[b + B_SAFE]
        for k in range(d, 0, -1):
            cost += 1
            kb, pb = OFF_BLOCKS + k * B_FIELDS, OFF_BLOCKS + (k - 1) * B_FIELDS
            safe = s[pb + B_SAFE] or (s[kb + B_KIND] == BK_ELSE and s[pb + B_CHAIN_SAFE] and safe)
        if not safe:
            cost += 2 + CONST_COST[self.ret]
        return cost + 1

    def _fkey(self, s, i):
        f = OFF_FRAMES + i * F_FIELDS
        push = 2 if i + 1 < MAX_FRAMES - 1 else (1 if i + 1 < MAX_FRAMES else 0)
        local = s[f + F_PH:f + F_EMPTY_OK + 1]
        local[F_AUX - F_PH] = local[F_ARG - F_PH] = 0   # not typing state: share the memo
        return tuple(local) + (s[f + F_CALLEE] if s[f + F_PH] == PH_CALLEE else 0, push)

    def _frame_cost_uncached(self, key):
        """(I, B, L): fewest tokens from this frame-local state to a state that can close with
        that result type, over canonical frame-local moves plus the macros `[ ]`, `[ 0 ]`,
        `f( consts )` (Dijkstra over the small graph they reach)."""
        import heapq
        push = key[-1]
        best = [INF, INF, INF]
        dist = {key: 0}
        heap = [(0, key)]
        while heap:
            d, k = heapq.heappop(heap)
            if d > dist.get(k, INF):
                continue
            fr = list(k[:-2])
            t = _final_type(fr) if fr[0] == PH_AFTER else (T_I if fr[0] == PH_BEFORE and fr[-1] and _fresh(fr) else T_NONE)
            if t and d < best[t - 1]:
                best[t - 1] = d
            for nk, c in self._frame_moves(k, push):
                if d + c < dist.get(nk, INF):
                    dist[nk] = d + c
                    heapq.heappush(heap, (d + c, nk))
        return tuple(best)

    def _frame_moves(self, k, push):
        fr, callee = list(k[:-2]), k[-2]
        out = []
        if fr[0] == PH_CALLEE:
            nf = _after_operand(fr, self.callees[callee][1])
            return [(tuple(nf) + (0, push), self._callee_cost[callee])]
        # Canonical completion moves only (constants, `.pop()`, `<` to make a bool, `*` to
        # make a list): this keeps the searched graph tiny; C is then the cost of a concrete
        # completion, which is all the length guarantee needs.
        for a, c in ((V.INT0, 1), (T["True"], 1), (T["."], 1), (T["pop"], 1), (T["("], 1),
                     (T[")"], 1), (T["<"], 1), (T["*"], 1)):
            nf = _ftrans(fr, a)
            if nf is not None:
                out.append((tuple(nf) + (0, push), c))
        if fr[0] == PH_BEFORE and push >= 1:       # `[ ]`
            out.append((tuple(_after_operand(fr, T_L)) + (0, push), 2))
        if fr[0] == PH_AFTER and fr[F_CUR - F_PH] == T_L and push >= 2:   # `[ 0 ]`
            nf = list(fr)
            nf[F_CUR - F_PH] = T_I
            out.append((tuple(nf) + (0, push), 3))
        return out

    # ---- transitions ------------------------------------------------------------------------
    def _apply(self, s, a) -> bool:
        """Apply action a to row s in place; False if it is not a syntactic/typed continuation
        (the budget is checked by the caller)."""
        nf = s[H_NF]
        if nf:
            return self._apply_expr(s, a)
        ph = s[H_PH]
        d = s[H_DEPTH]
        b = OFF_BLOCKS + d * B_FIELDS
        if ph == P_BOUND:
            if a == V.END:
                if d == 0 and s[b + B_SAFE]:
                    s[H_DONE] = 1
                    return True
                return False
            if a == V.DEDENT:
                if d == 0 or not s[b + B_NONEMPTY]:
                    return False
                self._close_block(s)
                return True
            if s[b + B_TERM]:
                return False
            chain = s[b + B_CHAIN]
            if a in (T["elif"], T["else"]):
                if not chain:
                    return False
                s[b + B_CHAIN] = 0
                if a == T["elif"]:
                    return self._push_stmt_frame(s, K_COND, BK_ELIF)
                s[H_PH], s[H_PEND_KIND] = P_ELSE_COLON, BK_ELSE
                return True
            s[b + B_CHAIN] = 0
            s[b + B_NONEMPTY] = 1
            if a == T["return"]:
                return self._push_stmt_frame(s, K_RET)
            if a in (T["if"], T["while"]):
                if d + 1 >= MAX_BLOCKS:
                    return False
                return self._push_stmt_frame(s, K_COND, BK_IF if a == T["if"] else BK_LOOP)
            if a == T["for"]:
                if d + 1 >= MAX_BLOCKS:
                    return False
                s[H_PH], s[H_PEND_KIND] = P_FOR_VAR, BK_LOOP
                return True
            if a == T["pass"]:
                s[H_PH] = P_NL
                return True
            if a in (T["break"], T["continue"]):
                if not s[H_LOOPS]:
                    return False
                s[b + B_TERM] = 1
                s[H_PH] = P_NL
                return True
            if a in NAME_TOKENS:
                vt = self._vtype(s, a)
                if vt == T_NONE:
                    if a < V.V0:
                        return False        # an unused parameter slot
                    s[H_PH] = P_ASSIGN_EQ
                else:
                    s[H_PH] = P_TARGET
                s[H_TARGET] = a
                return True
            return False
        if ph == P_NL:
            if a != V.NEWLINE:
                return False
            s[H_PH] = P_BOUND
            return True
        if ph == P_COLON_NL:
            if a != V.NEWLINE:
                return False
            s[H_PH] = P_INDENT
            return True
        if ph == P_INDENT:
            if a != V.INDENT:
                return False
            self._open_block(s)
            return True
        if ph == P_ELSE_COLON:
            if a != T[":"]:
                return False
            s[H_PH] = P_COLON_NL
            return True
        if ph == P_ASSIGN_EQ:
            return a == T["="] and self._push_stmt_frame(s, K_ASSIGN_NEW, s[H_TARGET])
        if ph == P_TARGET:
            vt = self._vtype(s, s[H_TARGET])
            if a == T["="]:
                return self._push_stmt_frame(s, K_ASSIGN, vt)
            if a in AUG_INT and vt == T_I or a == T["+="] and vt == T_L:
                return self._push_stmt_frame(s, K_AUG, vt)
            if vt == T_L and a == T["["]:
                return self._push_stmt_frame(s, K_IDX)
            if vt == T_L and a == T["."]:
                s[H_PH] = P_DOT
                return True
            return False
        if ph == P_IDX_OP:
            if a == T["="] or a in AUG_INT:
                return self._push_stmt_frame(s, K_IDX_VAL)
            return False
        if ph == P_DOT:
            if a != T["append"]:
                return False
            s[H_PH] = P_APPEND_LP
            return True
        if ph == P_APPEND_LP:
            return a == T["("] and self._push_stmt_frame(s, K_APPEND)
        if ph == P_FOR_VAR:
            if not self._for_var_ok(s, a):
                return False
            s[H_PEND_VAR] = a
            s[H_PH] = P_FOR_IN
            return True
        if ph == P_FOR_IN:
            return a == T["in"] and self._push_stmt_frame(s, K_FORITER)
        if ph == P_RANGE_LP:
            if a != T["("]:
                return False
            return self._push_stmt_frame(s, K_RANGE)
        if ph == P_FOR_COLON:
            if a != T[":"]:
                return False
            s[H_PH] = P_COLON_NL
            return True
        return False

    def _for_var_ok(self, s, a):
        # A new pool variable (declared in the body), or a visible int variable (assigned).
        if a not in NAME_TOKENS:
            return False
        vt = self._vtype(s, a)
        return vt == T_I or (vt == T_NONE and a >= V.V0)

    def _apply_expr(self, s, a) -> bool:
        nf = s[H_NF]
        f = OFF_FRAMES + (nf - 1) * F_FIELDS
        fr = s[f + F_PH:f + F_EMPTY_OK + 1]
        kind, ph = s[f + F_KIND], fr[0]
        if a in CLOSERS:
            if ph == PH_POPLP and a == T[")"]:
                s[f + F_PH:f + F_EMPTY_OK + 1] = _ftrans(fr, a)
                return True
            t = _final_type(fr) if ph == PH_AFTER else (T_I if kind == K_LIST and fr[-1] and _fresh(fr) and ph == PH_BEFORE else T_NONE)
            if t == T_NONE:
                return False
            return self._close_frame(s, a, t)
        if ph == PH_BEFORE:
            if a in NAME_TOKENS:
                vt = self._vtype(s, a)
                if vt == T_NONE:
                    return False
                s[f + F_PH:f + F_EMPTY_OK + 1] = _after_operand(fr, vt)
                return True
            if a == T["range"]:
                if kind != K_FORITER or not _fresh(fr):
                    return False
                s[H_NF] -= 1
                s[H_PH] = P_RANGE_LP
                return True
            if a in CALLEES:
                if nf >= MAX_FRAMES - 1 or (a == V.FN and not self.ptypes):
                    return False
                s[f + F_PH], s[f + F_CALLEE] = PH_CALLEE, CALLEES[a]
                return True
            if a == T["("]:
                return nf < MAX_FRAMES - 1 and self._push_frame(s, K_PAREN)
            if a == T["["]:
                return nf < MAX_FRAMES and self._push_frame(s, K_LIST, empty_ok=1)
        elif ph == PH_CALLEE:
            if a != T["("]:
                return False
            return self._push_frame(s, K_CALL, aux=s[f + F_CALLEE], arg=0)
        elif ph == PH_AFTER and a == T["["]:
            return fr[F_CUR - F_PH] == T_L and nf < MAX_FRAMES - 1 and self._push_frame(s, K_SUB)
        nfr = _ftrans(fr, a)
        if nfr is None:
            return False
        s[f + F_PH:f + F_EMPTY_OK + 1] = nfr
        return True

    def _push_stmt_frame(self, s, kind, aux=0):
        s[H_PH] = P_EXPR
        if kind == K_COND:   # remember which block the condition opens
            s[H_PEND_KIND] = aux
        return self._push_frame(s, kind, aux=aux)

    def _push_frame(self, s, kind, aux=0, arg=0, empty_ok=0) -> bool:
        """Open a frame and record, per result type, the cost to finish after it closes."""
        nf = s[H_NF]
        f = OFF_FRAMES + nf * F_FIELDS
        s[f:f + F_FIELDS] = [0] * F_FIELDS
        s[f + F_KIND], s[f + F_AUX], s[f + F_ARG], s[f + F_EMPTY_OK] = kind, aux, arg, empty_ok
        s[H_NF] = nf + 1
        closer = {K_PAREN: T[")"], K_SUB: T["]"], K_LIST: T["]"], K_CALL: None, K_RET: V.NEWLINE,
                  K_COND: T[":"], K_ASSIGN_NEW: V.NEWLINE, K_ASSIGN: V.NEWLINE, K_AUG: V.NEWLINE,
                  K_IDX: T["]"], K_IDX_VAL: V.NEWLINE, K_APPEND: T[")"], K_FORITER: T[":"],
                  K_RANGE: T[")"]}[kind]
        if kind == K_CALL:
            closer = T[")"] if arg == len(self.callees[aux][0]) - 1 else T[","]
        for t, field in ((T_I, F_REST_I), (T_B, F_REST_B), (T_L, F_REST_L)):
            c = list(s)
            s[f + field] = 1 + self._cost(c) if self._close_frame(c, closer, t) else INF
            s[f + field] = min(s[f + field], INF)
        return True

    def _close_frame(self, s, a, t) -> bool:
        """Close the top frame with closer a and result type t (in place); False if the frame
        cannot close that way or its context rejects type t."""
        nf = s[H_NF]
        f = OFF_FRAMES + (nf - 1) * F_FIELDS
        kind, aux, arg = s[f + F_KIND], s[f + F_AUX], s[f + F_ARG]
        s[H_NF] = nf - 1
        d = s[H_DEPTH]
        b = OFF_BLOCKS + d * B_FIELDS

        def feed(rt):   # the value becomes an operand of the enclosing frame
            g = f - F_FIELDS
            s[g + F_PH:g + F_EMPTY_OK + 1] = _after_operand(s[g + F_PH:g + F_EMPTY_OK + 1], rt)
            return True

        if kind == K_PAREN:
            return a == T[")"] and feed(t)
        if kind == K_SUB:
            return a == T["]"] and t == T_I and feed(T_I)
        if kind == K_LIST:
            if t != T_I:
                return False
            if a == T["]"]:
                return feed(T_L)
            return a == T[","] and not (s[f + F_EMPTY_OK] and s[f + F_PH] == PH_BEFORE) and self._push_frame(s, K_LIST)
        if kind == K_CALL:
            args, rt = self.callees[aux]
            if t != args[arg]:
                return False
            if arg + 1 < len(args):
                return a == T[","] and self._push_frame(s, K_CALL, aux=aux, arg=arg + 1)
            return a == T[")"] and feed(rt)
        if kind == K_RANGE:
            if t != T_I:
                return False
            if a == T[","] and arg < 2:
                return self._push_frame(s, K_RANGE, arg=arg + 1)
            if a == T[")"]:
                s[H_PH] = P_FOR_COLON
                return True
            return False
        if kind == K_RET:
            if a != V.NEWLINE or t != self.ret:
                return False
            s[b + B_SAFE] = s[b + B_TERM] = 1
            s[H_PH] = P_BOUND
            return True
        if kind in (K_COND, K_FORITER):
            if a != T[":"] or (kind == K_FORITER and t != T_L):
                return False
            s[H_PH] = P_COLON_NL
            return True
        if kind == K_ASSIGN_NEW:
            if a != V.NEWLINE:
                return False
            slot = aux - V.P0
            s[OFF_VARS + 2 * slot], s[OFF_VARS + 2 * slot + 1] = t, d
            s[H_PH] = P_BOUND
            return True
        if kind in (K_ASSIGN, K_AUG):
            if a != V.NEWLINE or t != aux:
                return False
            s[H_PH] = P_BOUND
            return True
        if kind == K_IDX:
            if a != T["]"] or t != T_I:
                return False
            s[H_PH] = P_IDX_OP
            return True
        if kind == K_IDX_VAL:
            if a != V.NEWLINE or t != T_I:
                return False
            s[H_PH] = P_BOUND
            return True
        if kind == K_APPEND:
            if a != T[")"] or t != T_I:
                return False
            s[H_PH] = P_NL
            return True
        return False

    # ---- blocks and names -----------------------------------------------------------------
    def _set_block(self, s, d, kind):
        b = OFF_BLOCKS + d * B_FIELDS
        s[b:b + B_FIELDS] = [kind, 0, 0, 0, 0, 0]

    def _open_block(self, s):
        d = s[H_DEPTH] + 1
        kind = s[H_PEND_KIND]
        self._set_block(s, d, kind)
        s[H_DEPTH] = d
        s[H_PH] = P_BOUND
        if kind == BK_LOOP:
            s[H_LOOPS] += 1
            v = s[H_PEND_VAR]
            if v and self._vtype(s, v) == T_NONE:   # a new for-variable lives in the body
                slot = v - V.P0
                s[OFF_VARS + 2 * slot], s[OFF_VARS + 2 * slot + 1] = T_I, d
        s[H_PEND_VAR] = 0

    def _close_block(self, s):
        d = s[H_DEPTH]
        b, pb = OFF_BLOCKS + d * B_FIELDS, OFF_BLOCKS + (d - 1) * B_FIELDS
        for slot in range(NUM_NAMES):   # block scoping: its variables go out of scope
            if s[OFF_VARS + 2 * slot] and s[OFF_VARS + 2 * slot + 1] == d:
                s[OFF_VARS + 2 * slot] = T_NONE
        kind, safe = s[b + B_KIND], s[b + B_SAFE]
        if kind == BK_LOOP:
            s[H_LOOPS] -= 1
        elif kind == BK_IF:
            s[pb + B_CHAIN], s[pb + B_CHAIN_SAFE] = 1, safe
        elif kind == BK_ELIF:
            s[pb + B_CHAIN], s[pb + B_CHAIN_SAFE] = 1, s[pb + B_CHAIN_SAFE] and safe
        elif kind == BK_ELSE and s[pb + B_CHAIN_SAFE] and safe:
            s[pb + B_SAFE] = s[pb + B_TERM] = 1
        s[H_DEPTH] = d - 1

    def _vtype(self, s, a):
        return s[OFF_VARS + 2 * (a - V.P0)]


# ---- frame-local typing (pure functions of the frame's local fields) ------------------------
# fr = [PH, OR, AND, NOT, CMP, SUM, TERM, NEG, CUR, AUX, ARG, EMPTY_OK] (fields F_PH..F_EMPTY_OK)
_PH, _OR, _AND, _NOT, _CMP, _SUM, _TERM, _NEG, _CUR = (i - F_PH for i in range(F_PH, F_CUR + 1))


def _fresh(fr) -> bool:
    return fr[_OR] == fr[_AND] == fr[_NOT] == fr[_CMP] == fr[_SUM] == fr[_TERM] == fr[_NEG] == 0


def _after_operand(fr, t):
    nf = list(fr)
    nf[_PH], nf[_CUR] = PH_AFTER, t
    return nf


def _unary(fr):
    t = fr[_CUR]
    return T_NONE if fr[_NEG] and t != T_I else t


def _term(fr):
    u = _unary(fr)
    tm = fr[_TERM]
    if tm == TM_NONE or not u:
        return u
    if tm == TM_INT_MUL:
        return u if u in (T_I, T_L) else T_NONE
    if tm == TM_INT_DIVMOD:
        return T_I if u == T_I else T_NONE
    return T_L if u == T_I else T_NONE   # TM_LIST_MUL


def _sum(fr):
    v = _term(fr)
    return v if not fr[_SUM] or not v else (v if v == fr[_SUM] else T_NONE)


def _cmp(fr):
    v = _sum(fr)
    return v if not fr[_CMP] or not v else (T_B if v == fr[_CMP] else T_NONE)


def _not(fr):
    v = _cmp(fr)
    return T_B if fr[_NOT] and v else v


def _and(fr):
    v = _not(fr)
    return v if not fr[_AND] or not v else (v if v == fr[_AND] else T_NONE)


def _final_type(fr):
    v = _and(fr)
    return v if not fr[_OR] or not v else (v if v == fr[_OR] else T_NONE)


def _operand_slot(nf):
    nf[_PH], nf[_NEG], nf[_CUR] = PH_BEFORE, 0, 0
    return nf


def _ftrans(fr, a):
    """Frame-local transition: operands, unary/binary operators, `.pop()`. None if a is not a
    (typed) continuation here; pushes and closes are handled by the caller."""
    ph = fr[_PH]
    nf = list(fr)
    if ph == PH_BEFORE:
        if a in INT_TOKENS:
            return _after_operand(fr, T_I)
        if a in (T["True"], T["False"]):
            return _after_operand(fr, T_B)
        if a == T["not"]:
            if not _fresh_operand(fr):
                return None
            nf[_NOT] = 1
            return nf
        if a == T["-"]:
            if fr[_NEG]:
                return None
            nf[_NEG] = 1
            return nf
        return None
    if ph == PH_DOT:
        if a != T["pop"]:
            return None
        nf[_PH] = PH_POP
        return nf
    if ph == PH_POP:
        if a != T["("]:
            return None
        nf[_PH] = PH_POPLP
        return nf
    if ph == PH_POPLP:
        if a != T[")"]:
            return None
        nf[_PH], nf[_CUR] = PH_AFTER, T_I
        return nf
    if ph != PH_AFTER:
        return None
    if a == T["."]:
        if fr[_CUR] != T_L:
            return None
        nf[_PH] = PH_DOT
        return nf
    if a in (T["*"], T["//"], T["%"]):
        v = _term(fr)
        if a == T["*"] and v in (T_I, T_L):
            nf[_TERM] = TM_INT_MUL if v == T_I else TM_LIST_MUL
        elif v == T_I:
            nf[_TERM] = TM_INT_DIVMOD
        else:
            return None
        return _operand_slot(nf)
    if a in (T["+"], T["-"]):
        v = _sum(fr)
        if not (v == T_I or (v == T_L and a == T["+"])):
            return None
        nf[_SUM], nf[_TERM] = v, TM_NONE
        return _operand_slot(nf)
    if a in CMP_OPS or a in EQ_OPS:
        v = _sum(fr)
        if fr[_CMP] and v != fr[_CMP]:
            return None
        if not (v == T_I or (v == T_B and a in EQ_OPS)):
            return None
        nf[_CMP], nf[_SUM], nf[_TERM] = v, 0, TM_NONE
        return _operand_slot(nf)
    if a == T["and"]:
        v = _and(fr)
        if not v:
            return None
        nf[_AND], nf[_NOT], nf[_CMP], nf[_SUM], nf[_TERM] = v, 0, 0, 0, TM_NONE
        return _operand_slot(nf)
    if a == T["or"]:
        v = _final_type(fr)
        if not v:
            return None
        nf[_OR], nf[_AND], nf[_NOT], nf[_CMP], nf[_SUM], nf[_TERM] = v, 0, 0, 0, 0, TM_NONE
        return _operand_slot(nf)
    return None


def _fresh_operand(fr) -> bool:
    """`not` may only start an and/or operand: nothing of a comparison has begun."""
    return fr[_NOT] == fr[_CMP] == fr[_SUM] == fr[_TERM] == fr[_NEG] == 0
