"""Grammar- and type-aware action masks: a typed pushdown automaton over the vocabulary, batched.

The agent writes the body of a function whose signature line is given. At every step the mask
allows exactly the actions that continue the prefix to a well-typed program of the language
(within the subset documented in envs/grammar_reference.py) that can still be finished within
the length budget L, so that ANY masked action sequence reaches END by L tokens and compiles
(tests/test_grammar.py checks it against the compiler and CPython).

    g = Grammar(signature, max_len=64)
    state = g.reset(n)                 # (n, STATE_SIZE) int32
    mask = g.mask(state)               # (n, VOCAB_SIZE) bool
    state, invalid = g.step(state, a)  # a: (n,) int; invalid: (n,) bool, state unchanged there

Bad actions (out of range, masked, or after END) are not applied: `step` reports them in
`invalid` and leaves that env's state as it was; it never raises for them.

The state layout, the language subset and the length guarantee are those of the per-env
reference implementation, `envs/grammar_reference.py` (`ReferenceGrammar`, the oracle): this
module computes exactly the same masks, next states and invalid flags
(tests/test_grammar_vectorized.py), with array code and no Python loop over envs.

How it is batched:

* Frame-local typing is tabulated. A frame's local state (phase, the precedence-chain types,
  `-`, the current operand type, EMPTY_OK, and the callee while in PH_CALLEE) packs into one
  integer (mixed radix, < 983,040) that a dense map turns into a frame-state id (fid; 55,296
  reachable, id 0 = DEAD, absorbing). Per fid: the transition for each class of frame-local
  token (`_ftrans`), `_after_operand` for each type, entering PH_CALLEE for each callee, the
  phase / current type / freshness / closing type, and the cost table C[fid, push, t] (the
  reference's `_frame_cost`, computed for all fids at once by Bellman-Ford over the same moves;
  only the rows of a pending call of the task's own function depend on the signature, and
  those are filled per (return type, call cost)). The tables are built once per process
  (about 1.5 s) and shared by all grammars.
* The cost after an action is a lookup: a frame-local move costs min_t C[fid', push, t] +
  REST_t of the top frame; opening a frame computes the new frame's REST from its parent
  (feeding the result type into the parent's fid) or from the statement level; closing a frame
  with its canonical closer costs REST_t - 1 (what lies below an open frame is frozen while it
  is open, so REST_t, set when the frame opened, is exact); statement-level costs are the
  canonical tail of the phase plus the boundary cost, computed from the block array in closed
  form (a cumulative product over the else-chain instead of the reference's loop over depth).
* `mask` evaluates all 73 actions of every env as (n, 73) array ops (one gather for the
  frame-local tokens, column updates for the handful of special tokens); `step` evaluates the
  chosen action only (the same code with an (n,) action axis) and writes the new rows with
  masked updates. Loops are over the small fixed frame/argument/block dimensions only.

Every operation is indexing, where, min/any/cumprod or elementwise arithmetic over integer
arrays, so the torch port is mechanical. `BatchedAutomaton(grammars)` runs rows of different
signatures/budgets in one call (`mask(state, gid)`, `step(state, actions, gid)`): the
per-grammar constants are per-row lookups. `Grammar.reference_below` (8): smaller batches use
the reference rows, which are cheaper than the batched code's fixed cost per call (~1-4 ms).
"""
from __future__ import annotations

import numpy as np

from . import vocab as V
from .grammar_reference import (  # noqa: F401  (re-exported: the state layout and constants)
    AUG_INT, B_CHAIN, B_CHAIN_SAFE, B_FIELDS, B_KIND, B_NONEMPTY, B_SAFE, B_TERM, BK_BODY, BK_ELIF,
    BK_ELSE, BK_IF, BK_LOOP, CALLEES, CLOSERS, CMP_OPS, CONST_COST, EQ_OPS, F_AND, F_ARG, F_AUX,
    F_CALLEE, F_CMP, F_CUR, F_EMPTY_OK, F_FIELDS, F_KIND, F_NEG, F_NOT, F_OR, F_PH, F_REST_B,
    F_REST_I, F_REST_L, F_SUM, F_TERM, H_DEPTH, H_DONE, H_LEN, H_LOOPS, H_NF, H_PEND_KIND,
    H_PEND_VAR, H_PH, H_SIZE, H_TARGET, INF, INT_TOKENS, K_APPEND, K_ASSIGN, K_ASSIGN_NEW, K_AUG,
    K_CALL, K_COND, K_FORITER, K_IDX, K_IDX_VAL, K_LIST, K_PAREN, K_RANGE, K_RET, K_SUB,
    MAX_BLOCKS, MAX_FRAMES, NAME_TOKENS, NUM_NAMES, OFF_BLOCKS, OFF_FRAMES, OFF_VARS, P_APPEND_LP,
    P_ASSIGN_EQ, P_BOUND, P_COLON_NL, P_DOT, P_ELSE_COLON, P_EXPR, P_FOR_COLON, P_FOR_IN,
    P_FOR_VAR, P_IDX_OP, P_INDENT, P_NL, P_RANGE_LP, P_TARGET, PH_AFTER, PH_BEFORE, PH_CALLEE,
    PH_DOT, PH_POP, PH_POPLP, STATE_SIZE, T_B, T_I, T_L, T_NONE, TM_INT_DIVMOD, TM_INT_MUL,
    TM_LIST_MUL, TM_NONE, TYPE_CODE, ReferenceGrammar, _after_operand, _final_type, _fresh,
    _ftrans, _TAIL)
from .vocab import ID, Signature, as_signature  # noqa: F401

T = ID
_NV = V.VOCAB_SIZE

# ---- frame-state tables (grammar-independent, built once per process) ------------------------
# Key of a frame's local state: PH OR AND NOT CMP SUM TERM NEG CUR (fields F_PH..F_CUR), EMPTY_OK,
# and the callee while PH == PH_CALLEE (0 otherwise). AUX/ARG are not typing state.
_KEY_RADIX = (6, 4, 4, 2, 4, 4, 4, 2, 4, 2, 5)
_KEY_MULT = np.cumprod((1,) + _KEY_RADIX[:0:-1])[::-1].astype(np.int64)   # most significant first
_KEY_SPACE = int(np.prod(_KEY_RADIX))
DEAD = 0

# Classes of frame-local tokens (_ftrans depends on the token only through its class); 0: none.
_FT_REPS = (None, V.INT0, T["True"], T["not"], T["-"], T["pop"], T["("], T[")"], T["."], T["*"],
            T["//"], T["+"], T["<"], T["=="], T["and"], T["or"])
ACLASS = np.zeros(_NV, dtype=np.int64)
for _k, _rep in enumerate(_FT_REPS):
    if _rep is not None:
        ACLASS[_rep] = _k
ACLASS[list(INT_TOKENS)] = 1
ACLASS[T["False"]] = 2
ACLASS[T["%"]] = ACLASS[T["//"]]
for _a in CMP_OPS:
    ACLASS[_a] = ACLASS[T["<"]]
for _a in EQ_OPS:
    ACLASS[_a] = ACLASS[T["=="]]
# the reference's canonical completion moves (token, cost) of _frame_moves
_MOVES = ((V.INT0, 1), (T["True"], 1), (T["."], 1), (T["pop"], 1), (T["("], 1), (T[")"], 1),
          (T["<"], 1), (T["*"], 1))
# callees: 0 len, 1 abs, 2 min, 3 max (fixed), 4 the task's function (per grammar)
_CALLEE_TOKENS = np.array([T["len"], T["abs"], T["min"], T["max"], V.FN])
_CALLEE_NUM = np.full(_NV, -1, dtype=np.int64)
_CALLEE_NUM[_CALLEE_TOKENS] = np.arange(5)
_FIXED_CALLEES = {0: ((T_L,), T_I), 1: ((T_I,), T_I), 2: ((T_I, T_I), T_I), 3: ((T_I, T_I), T_I)}
PUSH = np.array([2 if i + 1 < MAX_FRAMES - 1 else (1 if i + 1 < MAX_FRAMES else 0)
                 for i in range(MAX_FRAMES)] + [0], dtype=np.int64)   # push depth of frame i (+ pad)


def _callee_cost(args) -> int:
    return 2 + sum(CONST_COST[t] for t in args) + len(args) - 1


class _Tables:
    """Dense per-fid arrays over every frame-local state the automaton can reach."""

    def __init__(self):
        def key(fr, callee=0):
            return tuple(fr[:9]) + (fr[11], callee if fr[0] == PH_CALLEE else 0)

        def frame(k):
            return list(k[:9]) + [0, 0, k[9]]

        keys = [None]                       # fid 0: DEAD
        ids: dict = {}

        def fid(k):
            if k not in ids:
                ids[k] = len(keys)
                keys.append(k)
            return ids[k]

        fid(key([0] * 12))                  # fresh frame
        fid(key([0] * 11 + [1]))            # fresh list frame that may close empty (`[ ]`)
        ft, after, callee = [[0] * len(_FT_REPS)], [[0] * 4], [[0] * 5]
        j = 1
        while j < len(keys):                # BFS: ids grow while rows are filled in id order
            fr = frame(keys[j])
            ph = fr[0]
            row = [0]
            for rep in _FT_REPS[1:]:
                nf = _ftrans(fr, rep)
                row.append(0 if nf is None else fid(key(nf)))
            ft.append(row)
            # _after_operand where the automaton uses it: operands and feeds at PH_BEFORE, call
            # results at PH_CALLEE, `xs[i]` at PH_AFTER on a list.
            arow = [0, 0, 0, 0]
            for t in (T_I, T_B, T_L):
                if ph in (PH_BEFORE, PH_CALLEE) or (ph == PH_AFTER and fr[8] == T_L and t == T_I):
                    arow[t] = fid(key(_after_operand(fr, t)))
            after.append(arow)
            crow = [0] * 5
            if ph == PH_BEFORE:
                for c in range(5):
                    nf = list(fr)
                    nf[0] = PH_CALLEE
                    crow[c] = fid(key(nf, c))
            callee.append(crow)
            j += 1
        self.keys = keys
        self.n = len(keys)
        K = np.array([(0,) * 11] + keys[1:], dtype=np.int64)
        self.fields = K                                     # (n, 11) key fields
        self.local9 = K[:, :9]                              # F_PH..F_CUR as written into a row
        self.ft = np.array(ft, dtype=np.int64)              # (n, classes)
        self.after = np.array(after, dtype=np.int64)        # (n, 4): by type, [:, 0] DEAD
        self.callee = np.array(callee, dtype=np.int64)      # (n, 5)
        self.pack2fid = np.zeros(_KEY_SPACE, dtype=np.int64)
        self.pack2fid[K[1:] @ _KEY_MULT] = np.arange(1, self.n)
        ph = K[:, 0]
        self.ph = np.where(np.arange(self.n) == DEAD, -1, ph)
        self.cur = K[:, 8]
        self.eok = K[:, 9]
        self.fresh = (K[:, 1:8] == 0).all(axis=1)
        self.after_t = np.array([0] + [_final_type(frame(k)) if k[0] == PH_AFTER else 0 for k in keys[1:]],
                                dtype=np.int64)
        self.empty_close = (self.ph == PH_BEFORE) & (self.eok != 0) & self.fresh
        self.cbase = self._costs()
        self._variants: dict = {}

    def _costs(self):
        """C[fid, push, t-1] = the reference's _frame_cost(key)[t-1], for every fid except pending
        calls of the task's function (per grammar, see costs()): shortest paths to a closable
        state over the canonical moves, by Bellman-Ford (the reference runs Dijkstra per key)."""
        n = self.n
        C = np.full((n, 3, 3), INF, dtype=np.int64)
        tgt = np.where(self.after_t > 0, self.after_t, np.where(self.empty_close, T_I, 0))
        for t in (T_I, T_B, T_L):
            C[tgt == t, :, t - 1] = 0
        C[DEAD] = INF
        edges = [(self.ft[:, ACLASS[a]], c, None) for a, c in _MOVES]
        edges.append((self.after[:, T_L], 2, (self.ph == PH_BEFORE)[:, None] & (np.arange(3) >= 1)))   # `[ ]`
        edges.append((self.after[:, T_I], 3, ((self.ph == PH_AFTER) & (self.cur == T_L))[:, None]
                      & (np.arange(3) >= 2)))                                                         # `[ 0 ]`
        cal = self.fields[:, 10]
        for c, (args, rt) in _FIXED_CALLEES.items():
            edges.append((self.after[:, rt], _callee_cost(args),
                          ((self.ph == PH_CALLEE) & (cal == c))[:, None] & np.ones(3, bool)))
        while True:
            new = C
            for succ, cost, cond in edges:
                cand = C[succ] + cost
                if cond is not None:
                    cand = np.where(cond[:, :, None], cand, INF)
                new = np.minimum(new, cand)
            new = np.minimum(new, INF)
            if np.array_equal(new, C):
                return C
            C = new

    def costs(self, ret: int, fn_cost: int) -> np.ndarray:
        """The cost table of a grammar: the base table with the rows of a pending call of the
        task's function (result type ret, canonical call cost fn_cost) filled in."""
        k = (ret, fn_cost)
        if k not in self._variants:
            C = self.cbase.copy()
            rows = (self.ph == PH_CALLEE) & (self.fields[:, 10] == 4)
            C[rows] = np.minimum(INF, self.cbase[self.after[rows, ret]] + fn_cost)
            self._variants[k] = C
        return self._variants[k]


_TABLES: _Tables | None = None


def tables() -> _Tables:
    global _TABLES
    if _TABLES is None:
        _TABLES = _Tables()
    return _TABLES


# ---- constants of the batched code -----------------------------------------------------------
def _mn(x, lo, hi):
    return np.minimum(np.maximum(x, lo), hi)


_TAILA = np.zeros(16, dtype=np.int64)
for _p, _c in _TAIL.items():
    _TAILA[_p] = _c
_CONSTA = np.array([0, CONST_COST[T_I], CONST_COST[T_B], CONST_COST[T_L]], dtype=np.int64)
# canonical closer of each frame kind (K_CALL: `)` after the last argument, else `,`)
_CANON = np.zeros(14, dtype=np.int64)
for _kd, _cl in {K_PAREN: T[")"], K_SUB: T["]"], K_LIST: T["]"], K_CALL: T[")"], K_RET: V.NEWLINE,
                 K_COND: T[":"], K_ASSIGN_NEW: V.NEWLINE, K_ASSIGN: V.NEWLINE, K_AUG: V.NEWLINE,
                 K_IDX: T["]"], K_IDX_VAL: V.NEWLINE, K_APPEND: T[")"], K_FORITER: T[":"],
                 K_RANGE: T[")"]}.items():
    _CANON[_kd] = _cl
_CLOSER_LIST = (V.NEWLINE, T[":"], T[")"], T["]"], T[","])
_IS_CLOSER = np.zeros(_NV, dtype=bool)
_IS_CLOSER[list(_CLOSER_LIST)] = True
_IS_NAME = np.zeros(_NV, dtype=bool)
_IS_NAME[list(NAME_TOKENS)] = True
_NAMES = np.arange(V.P0, V.V0 + V.NUM_VARS)
_IS_PARAM_SLOT = np.arange(NUM_NAMES) < V.NUM_PARAMS
_FR = np.arange(F_FIELDS)
_LOC = np.arange(F_PH, F_CUR + 1)
_J = np.arange(MAX_BLOCKS)
_TT = np.arange(1, 4)            # result types T_I, T_B, T_L
_A73 = np.arange(_NV)
# phase after closing a statement frame of each kind
_SCLOSE_PH = np.array([0, 0, 0, 0, P_BOUND, P_COLON_NL, P_BOUND, P_BOUND, P_BOUND, P_IDX_OP, P_BOUND,
                       P_NL, P_COLON_NL, P_FOR_COLON], dtype=np.int64)

# Statement level, by (phase, action): the statement frame it opens (K_COND_ELIF: an elif
# condition), the canonical tail to the next boundary when it opens none, which boundary cost
# applies (after NONEMPTY[d] = 1 or not), and the new phase.
K_COND_ELIF = 14
_SPUSH = np.full((16, _NV), -1, dtype=np.int64)
_STAIL = np.full((16, _NV), -1, dtype=np.int64)
_SB1 = np.zeros((16, _NV), dtype=bool)
_SPH = np.tile(np.arange(16)[:, None], (1, _NV))
_AUGS = sorted(AUG_INT)
for _a, _k in ((T["return"], K_RET), (T["if"], K_COND), (T["while"], K_COND), (T["elif"], K_COND_ELIF)):
    _SPUSH[P_BOUND, _a] = _k
_SPUSH[P_ASSIGN_EQ, T["="]] = K_ASSIGN_NEW
_SPUSH[P_TARGET, T["="]] = K_ASSIGN
_SPUSH[P_TARGET, _AUGS] = K_AUG
_SPUSH[P_TARGET, T["["]] = K_IDX
_SPUSH[P_IDX_OP, [T["="]] + _AUGS] = K_IDX_VAL
_SPUSH[P_APPEND_LP, T["("]] = K_APPEND
_SPUSH[P_FOR_IN, T["in"]] = K_FORITER
_SPUSH[P_RANGE_LP, T["("]] = K_RANGE
_SPH[_SPUSH >= 0] = P_EXPR
for _ph, _a, _tail, _nph in ((P_BOUND, T["else"], _TAIL[P_ELSE_COLON], P_ELSE_COLON),
                             (P_BOUND, T["for"], _TAIL[P_FOR_VAR], P_FOR_VAR),
                             (P_BOUND, T["pass"], 1, P_NL), (P_BOUND, T["break"], 1, P_NL),
                             (P_BOUND, T["continue"], 1, P_NL),
                             (P_NL, V.NEWLINE, 0, P_BOUND), (P_COLON_NL, V.NEWLINE, _TAIL[P_INDENT], P_INDENT),
                             (P_INDENT, V.INDENT, -1, P_BOUND), (P_ELSE_COLON, T[":"], _TAIL[P_COLON_NL], P_COLON_NL),
                             (P_TARGET, T["."], _TAIL[P_DOT], P_DOT), (P_DOT, T["append"], _TAIL[P_APPEND_LP], P_APPEND_LP),
                             (P_FOR_COLON, T[":"], _TAIL[P_COLON_NL], P_COLON_NL)):
    _STAIL[_ph, _a], _SPH[_ph, _a] = _tail, _nph
_STAIL[P_FOR_VAR, _NAMES] = _TAIL[P_FOR_IN]
_SPH[P_FOR_VAR, _NAMES] = P_FOR_IN
_SPH[P_BOUND, _NAMES] = P_TARGET          # P_ASSIGN_EQ for an undeclared variable
_SB1[P_BOUND] = True
_SB1[P_BOUND, [T["elif"], T["else"]]] = False
# statement frames: tail after closing, result types accepted (RET: ret, ASSIGN/AUG: the target's)
_PTAIL = np.zeros(15, dtype=np.int64)
_PTAIL[[K_COND, K_COND_ELIF, K_FORITER]] = _TAIL[P_COLON_NL]
_PTAIL[K_IDX], _PTAIL[K_APPEND], _PTAIL[K_RANGE] = _TAIL[P_IDX_OP], _TAIL[P_NL], _TAIL[P_FOR_COLON]
_PTYPES = np.zeros((15, 3), dtype=bool)
_PTYPES[[K_COND, K_COND_ELIF, K_ASSIGN_NEW]] = True
_PTYPES[[K_IDX, K_IDX_VAL, K_APPEND, K_RANGE], 0] = True
_PTYPES[K_FORITER, 2] = True
_PEND = np.full(_NV, -1, dtype=np.int64)   # PEND_KIND set by a statement keyword
_PEND[T["if"]], _PEND[T["while"]], _PEND[T["elif"]], _PEND[T["else"]], _PEND[T["for"]] = (
    BK_IF, BK_LOOP, BK_ELIF, BK_ELSE, BK_LOOP)


class _Cols:
    """The cost after each action: (n, 73) for a mask, (n,) for one given action per env."""

    def __init__(self, base, acts):
        self.v, self.acts = base, acts

    def get(self, c):
        return self.v[:, c] if self.acts is None else self.v

    def set(self, c, val):
        if self.acts is None:
            self.v[:, c] = val
        else:
            self.v = np.where(self.acts == c, val, self.v)

    def set_many(self, cols, vals, lo):
        """cols: the contiguous action ids lo..lo+K-1; vals: (n, K)."""
        if self.acts is None:
            self.v[:, cols] = vals
        else:
            p = self.acts - lo
            inside = (p >= 0) & (p < len(cols))
            pick = np.take_along_axis(vals, _mn(p, 0, len(cols) - 1)[:, None], axis=1)[:, 0]
            self.v = np.where(inside, pick, self.v)


class _Ctx:
    """Per-row quantities that mask and step share (all (n,) or (n, k) arrays)."""


class _Params:
    """Per-grammar constants, stacked over G grammars (rows pick theirs by grammar index)."""

    def __init__(self, grammars):
        tb = tables()
        variants: dict = {}
        self.var = np.array([variants.setdefault((g.ret, g._callee_cost[4]), len(variants)) for g in grammars])
        self.C = np.stack([tb.costs(*k) for k in variants])           # (variants, fids, push, t)
        self.ret = np.array([g.ret for g in grammars], dtype=np.int64)
        self.ret_cost = _CONSTA[self.ret]
        self.max_len = np.array([g.max_len for g in grammars], dtype=np.int64)
        self.cargs = np.zeros((len(grammars), 5, 4), dtype=np.int64)
        for i, g in enumerate(grammars):
            for c, (a, _) in g.callees.items():
                self.cargs[i, c, :len(a)] = a
        self.cnargs = (self.cargs > 0).sum(axis=2)
        self.cret = np.array([[g.callees[c][1] for c in range(5)] for g in grammars], dtype=np.int64)


class BatchedAutomaton:
    """The batched mask/step core over rows that may belong to different grammars (row i uses
    grammars[gid[i]]); `Grammar` is the single-grammar case. All grammars share the tables."""

    def __init__(self, grammars):
        self.grammars = list(grammars)
        self._tb = tables()
        self._P = _Params(self.grammars)
        self._single_C = self._P.C[0] if len(self._P.C) == 1 else None
        self._fresh0 = int(self._tb.pack2fid[0])
        self._fresh1 = int(self._tb.pack2fid[_KEY_MULT[9]])

    # ---- batch API ------------------------------------------------------------------------
    def mask(self, state: np.ndarray, gid=None) -> np.ndarray:
        S = np.atleast_2d(state).astype(np.int64)
        x = self._context(S, gid)
        cost = self._eval(x, None)
        return (cost <= (x.max_len - x.length - 1)[:, None]) & ~x.done[:, None]

    def step(self, state: np.ndarray, actions, gid=None) -> tuple[np.ndarray, np.ndarray]:
        state = np.atleast_2d(state)
        S = state.astype(np.int64)
        actions = np.asarray(actions).reshape(-1).astype(np.int64)
        in_range = (actions >= 0) & (actions < _NV)
        a = np.where(in_range, actions, 0)
        x = self._context(S, gid)
        cost = self._eval(x, a)
        ok = in_range & ~x.done & (cost <= x.max_len - x.length - 1)
        new = self._apply(S, x, a)
        new[:, H_LEN] += 1
        return np.where(ok[:, None], new, S).astype(state.dtype), ~ok

    def min_tokens_to_finish(self, state: np.ndarray, gid=None) -> np.ndarray:
        x = self._context(np.atleast_2d(state).astype(np.int64), gid)
        top = self._cmin(x, x.f, x.push, x.r)
        ph = x.ph
        tail = np.where(ph == P_BOUND, 0, np.where(ph == P_TARGET, 2 + _CONSTA[x.tvt], _TAILA[_mn(ph, 0, 15)]))
        stmt = np.where((ph == P_FOR_VAR) & ~x.for_ok.any(axis=1), INF, tail + x.bS)
        return np.where(x.done, 0, np.where(x.nf > 0, top, stmt))

    # ---- shared per-row quantities ----------------------------------------------------------
    def _fid(self, F):
        """Frame-state ids of frame rows F (n, F_FIELDS)."""
        callee = np.where(F[:, F_PH] == PH_CALLEE, F[:, F_CALLEE], 0)
        pack = (F[:, F_PH:F_CUR + 1] * _KEY_MULT[:9]).sum(axis=1) + F[:, F_EMPTY_OK] * _KEY_MULT[9] \
            + callee * _KEY_MULT[10]
        return self._tb.pack2fid[_mn(pack, 0, _KEY_SPACE - 1)]

    def _cmin(self, x, fid, push, rest):
        """min(INF, min_t C[fid, push, t] + rest_t): the cost with a frame in state fid on top
        whose REST is rest (fid, push: shape (n, ...); rest: (n, ..., 3))."""
        if self._single_C is not None:
            c = self._single_C[fid, push]
        else:
            c = self._P.C[x.var.reshape((-1,) + (1,) * (np.ndim(fid) - 1)), fid, push]
        return np.minimum(INF, (c + rest).min(axis=-1))

    def _context(self, S, gid) -> _Ctx:
        n = len(S)
        P, tb = self._P, self._tb
        x = _Ctx()
        x.S, x.n, x.ar = S, n, np.arange(n)
        g = np.zeros(n, dtype=np.int64) if gid is None else np.asarray(gid, dtype=np.int64).reshape(n)
        x.var, x.ret, x.ret_cost, x.max_len = P.var[g], P.ret[g], P.ret_cost[g], P.max_len[g]
        x.cargs, x.cnargs, x.cret = P.cargs[g], P.cnargs[g], P.cret[g]
        x.length, x.done = S[:, H_LEN], S[:, H_DONE] != 0
        x.nf, x.ph, x.d = S[:, H_NF], S[:, H_PH], S[:, H_DEPTH]
        x.i = _mn(x.nf - 1, 0, MAX_FRAMES - 1)                      # top frame index
        x.fb = OFF_FRAMES + x.i * F_FIELDS
        x.TF = S[x.ar[:, None], x.fb[:, None] + _FR]                # (n, F_FIELDS)
        x.f = self._fid(x.TF)
        x.r = x.TF[:, F_REST_I:F_REST_L + 1]
        x.kind, x.aux, x.arg = x.TF[:, F_KIND], x.TF[:, F_AUX], x.TF[:, F_ARG]
        x.pi = _mn(x.nf - 2, 0, MAX_FRAMES - 1)                     # parent frame index
        x.pfb = OFF_FRAMES + x.pi * F_FIELDS
        x.PF = S[x.ar[:, None], x.pfb[:, None] + _FR]
        x.pf = self._fid(x.PF)
        x.pr = x.PF[:, F_REST_I:F_REST_L + 1]
        x.push = PUSH[x.i]
        x.push_next = PUSH[_mn(x.nf, 0, MAX_FRAMES)]
        x.push_parent = PUSH[x.pi]
        x.fph = tb.ph[x.f]
        x.before, x.after, x.incallee = x.fph == PH_BEFORE, x.fph == PH_AFTER, x.fph == PH_CALLEE
        # blocks and names
        x.B = S[:, OFF_BLOCKS:OFF_VARS].reshape(n, MAX_BLOCKS, B_FIELDS)
        x.dc = _mn(x.d, 0, MAX_BLOCKS - 1)
        x.bd = x.B[x.ar, x.dc]                                       # (n, B_FIELDS): block d
        x.vt = S[:, OFF_VARS:OFF_FRAMES:2]                           # (n, NUM_NAMES) types
        x.vdep = S[:, OFF_VARS + 1:OFF_FRAMES:2]
        x.empty_d = (x.d > 0) & (x.bd[:, B_NONEMPTY] == 0)
        x.bS, x.b_ret, x.b_ded, x.b_ind = self._boundaries(x)
        x.bS1 = x.bS - np.where(x.empty_d, 2, 0)                     # after NONEMPTY[d] = 1
        x.tgt = _mn(S[:, H_TARGET] - V.P0, 0, NUM_NAMES - 1)
        x.tvt = x.vt[x.ar, x.tgt]                                    # type of the statement target
        x.for_ok = (x.vt == T_I) | ((x.vt == T_NONE) & ~_IS_PARAM_SLOT)   # (n, NUM_NAMES)
        # closing the top frame: result type t, its REST, the canonical closer
        at = tb.after_t[x.f]
        x.t = np.where(at > 0, at, np.where(tb.empty_close[x.f] & (x.kind == K_LIST), T_I, T_NONE))
        x.rt = x.r[x.ar, np.maximum(x.t - 1, 0)]
        x.kc = _mn(x.kind, 0, 13)
        x.caux = _mn(x.aux, 0, 4)
        x.canon = np.where((x.kc == K_CALL) & (x.arg != x.cnargs[x.ar, x.caux] - 1), T[","], _CANON[x.kc])
        self._pushes(x)
        self._stmt_frames(x)
        return x

    def _boundaries(self, x):
        """The reference's _boundary_cost in closed form (a cumulative product over the
        else-chain), for the state and for it after `return`, DEDENT and INDENT: (n,) each."""
        n, ar, d, dc = x.n, x.ar, x.d, x.dc
        kind, cs, safe = x.B[:, :, B_KIND], x.B[:, :, B_CHAIN_SAFE], x.B[:, :, B_SAFE]
        s_ret = safe.copy()                               # return: SAFE[d] = 1 (and NONEMPTY[d])
        s_ret[ar, dc] = 1
        pd = _mn(d - 1, 0, MAX_BLOCKS - 1)                # DEDENT: close block d into d-1
        s_ded = safe.copy()
        s_ded[ar, pd] = np.where((kind[ar, dc] == BK_ELSE) & (cs[ar, pd] != 0) & (safe[ar, dc] != 0),
                                 1, safe[ar, pd])
        nd = _mn(d + 1, 0, MAX_BLOCKS - 1)                # INDENT: open block d+1 = [PEND_KIND, 0...]
        k_ind, c_ind, s_ind = kind.copy(), cs.copy(), safe.copy()
        k_ind[ar, nd] = x.S[:, H_PEND_KIND]
        c_ind[ar, nd] = 0
        s_ind[ar, nd] = 0
        K = np.concatenate([kind, kind, kind, k_ind])
        CS = np.concatenate([cs, cs, cs, c_ind])
        SF = np.concatenate([safe, s_ret, s_ded, s_ind])
        D = np.concatenate([d, d, d - 1, d + 1])
        NE = np.concatenate([x.bd[:, B_NONEMPTY], np.ones_like(d), x.B[ar, pd, B_NONEMPTY], np.zeros_like(d)])
        p = (K[:, 1:] == BK_ELSE) & (CS[:, :-1] != 0)                  # p_k, k = 1..MAX-1
        Pc = np.cumprod(np.concatenate([np.ones((4 * n, 1), np.int64), p.astype(np.int64)], axis=1), axis=1)
        reach = ((SF != 0) & (Pc != 0) & (_J[None] <= D[:, None])).any(axis=1)
        rc = np.concatenate([x.ret_cost] * 4)
        b = np.where((D > 0) & (NE == 0), 2, 0) + D + np.where(reach, 0, 2 + rc) + 1
        return b[:n], b[n:2 * n], b[2 * n:3 * n], b[3 * n:]

    # ---- REST of frames being opened ----------------------------------------------------------
    def _call_rest(self, x, callee, arg, X, push):
        """REST of the K_CALL frame for argument `arg` of callee (m,), at push depth push, where
        X is the cost once the call's result feeds the parent (rows: x's, possibly stacked)."""
        m = len(callee)
        ar = np.arange(m)
        reps = m // x.n
        args = np.concatenate([x.cargs] * reps)[ar, callee]         # (m, 4)
        nargs = np.concatenate([x.cnargs] * reps)[ar, callee]
        var = np.concatenate([x.var] * reps)
        c0 = (self._single_C[self._fresh0][push] if self._single_C is not None
              else self._P.C[var, self._fresh0, push])               # (m, 3)
        out = np.full((m, 3), INF, dtype=np.int64)
        nxt = out
        for k in range(3, -1, -1):
            cont = np.minimum(INF, 1 + np.minimum(INF, (c0 + nxt).min(axis=-1)))
            val = np.where(k == nargs - 1, np.minimum(INF, 1 + X), cont)
            rk = np.where((args[:, k:k + 1] == _TT) & (k < nargs)[:, None], val[:, None], INF)
            out = np.where((arg == k)[:, None], rk, out)
            nxt = rk
        return out

    def _pushes(self, x):
        """REST (n, 3) of each frame an expression token can open or reopen on the top frame."""
        tb, f, push, r, n = self._tb, x.f, x.push, x.r, x.n
        feed = np.minimum(INF, 1 + self._cmin(x, tb.after[f[:, None], _TT[None, :]], push[:, None], r[:, None, :]))
        x.rest_paren = feed
        x.rest_list = np.where(_TT == T_I, feed[:, T_L - 1:T_L], INF)
        x.rest_sub = np.where(_TT == T_I, feed[:, T_I - 1:T_I], INF)
        c = _mn(x.TF[:, F_CALLEE], 0, 4)
        X = self._cmin(x, tb.after[f, x.cret[x.ar, c]], push, r)
        Xp = self._cmin(x, tb.after[x.pf, x.cret[x.ar, x.caux]], x.push_parent, x.pr)
        both = self._call_rest(x, np.concatenate([c, x.caux]), np.concatenate([np.zeros_like(c), x.arg + 1]),
                               np.concatenate([X, Xp]), np.concatenate([x.push_next, push]))
        x.rest_call, x.rest_call_more = both[:n], both[n:]

    def _stmt_frames(self, x):
        """REST (n, 15, 3) of the statement frame of each kind (K_COND_ELIF: an elif) opened
        from the current statement state, and the cost (n, 15) once it is open."""
        bsel = np.stack([x.bS] * 15, axis=1)
        bsel[:, K_RET] = x.b_ret
        bsel[:, K_COND] = x.bS1
        x0 = 1 + _PTAIL + bsel                                           # (n, 15)
        ok = np.broadcast_to(_PTYPES, (x.n, 15, 3)).copy()
        ok[:, K_RET] = _TT == x.ret[:, None]
        ok[:, K_ASSIGN] = ok[:, K_AUG] = _TT == x.tvt[:, None]
        x.srest = np.where(ok, x0[:, :, None], INF)
        fresh = np.full((x.n, 15), self._fresh0)
        x.scost = self._cmin(x, fresh, PUSH[0], x.srest)

    # ---- costs after actions --------------------------------------------------------------------
    def _eval(self, x, acts):
        """Cost of the canonical completion after each action ((n, 73) when acts is None, else
        (n,) for acts (n,)); INF where the action is not a syntactic/typed continuation."""
        E = self._eval_expr(x, acts)
        Sv = self._eval_stmt(x, acts)
        return np.where((x.nf > 0)[:, None] if acts is None else x.nf > 0, E, Sv)

    def _eval_expr(self, x, acts):
        tb, n = self._tb, x.n
        f, push, r = x.f, x.push, x.r
        if acts is None:
            base = self._cmin(x, tb.ft[f[:, None], ACLASS[None, :]], push[:, None], r[:, None, :])
        else:
            base = self._cmin(x, tb.ft[f, ACLASS[acts]], push, r)
        out = _Cols(base, acts)
        before, after = x.before, x.after
        # names: an operand of the declared type; callees: enter PH_CALLEE
        nc = self._cmin(x, tb.after[f[:, None], x.vt], push[:, None], r[:, None, :])
        out.set_many(_NAMES, np.where(before[:, None], nc, INF), V.P0)
        cc = self._cmin(x, tb.callee[f], push[:, None], r[:, None, :])
        cc = np.where((before & (x.nf < MAX_FRAMES - 1))[:, None], cc, INF)
        out.set_many(_CALLEE_TOKENS[:4], cc[:, :4], T["len"])
        out.set(V.FN, cc[:, 4])
        # range: `for v in range(` (the iterable frame gives way to the range arguments)
        out.set(T["range"], np.where(before & (x.kind == K_FORITER) & tb.fresh[f], _TAILA[P_RANGE_LP] + x.bS, INF))
        # frames opened on top: ( [ at PH_BEFORE, the call's ( at PH_CALLEE, a subscript [
        fids = np.array([self._fresh0, self._fresh0, self._fresh1, self._fresh0])
        opened = self._cmin(x, np.broadcast_to(fids, (n, 4)), x.push_next[:, None],
                            np.stack([x.rest_paren, x.rest_call, x.rest_list, x.rest_sub], axis=1))
        out.set(T["("], np.where(before, np.where(x.nf < MAX_FRAMES - 1, opened[:, 0], INF),
                                 np.where(x.incallee, opened[:, 1], out.get(T["("]))))
        out.set(T["["], np.where(before, np.where(x.nf < MAX_FRAMES, opened[:, 2], INF),
                                 np.where(after & (tb.cur[f] == T_L) & (x.nf < MAX_FRAMES - 1), opened[:, 3], INF)))
        # closers: the canonical one costs REST_t - 1; `,` continues a list or range
        canon_cost = np.where((x.t > 0) & (x.rt < INF), x.rt - 1, INF)
        again = self._cmin(x, np.full(n, self._fresh0), push, r)   # a new list item / range argument
        for c in _CLOSER_LIST:
            v = np.where(x.canon == c, canon_cost, INF)
            if c == T[","]:
                v = np.where((x.kind == K_LIST) & (x.t == T_I) & ~((tb.eok[f] != 0) & before), again, v)
                v = np.where((x.kind == K_RANGE) & (x.arg < 2) & (x.t == T_I), again, v)
            if c == T[")"]:
                v = np.where(x.fph == PH_POPLP, out.get(c), v)
            out.set(c, v)
        return out.v

    def _eval_stmt(self, x, acts):
        n, ar, ph = x.n, x.ar, x.ph
        if acts is None:
            phA, A, bS, bS1, arA = ph[:, None], _A73[None, :], x.bS[:, None], x.bS1[:, None], ar[:, None]
        else:
            phA, A, bS, bS1, arA = ph, acts, x.bS, x.bS1, ar
        phA = _mn(phA, 0, 15)
        k = _SPUSH[phA, A]
        tail = _STAIL[phA, A]
        cost = np.where(k >= 0, x.scost[arA, np.maximum(k, 0)],
                        np.where(tail >= 0, tail + np.where(_SB1[phA, A], bS1, bS), INF))
        out = _Cols(cost, acts)
        d, bd = x.d, x.bd
        atb = ph == P_BOUND
        free = atb & (bd[:, B_TERM] == 0)          # a statement may start here
        chain = free & (bd[:, B_CHAIN] != 0)
        room = d + 1 < MAX_BLOCKS
        out.set(V.END, np.where(atb & (d == 0) & (x.B[:, 0, B_SAFE] != 0), 0, INF))
        out.set(V.DEDENT, np.where(atb & (d > 0) & (bd[:, B_NONEMPTY] != 0), x.b_ded, INF))
        out.set(V.INDENT, np.where(ph == P_INDENT, x.b_ind, INF))
        for c, cond in ((T["elif"], chain), (T["else"], chain), (T["return"], free), (T["if"], free & room),
                        (T["while"], free & room), (T["for"], free & room & x.for_ok.any(axis=1)),
                        (T["pass"], free), (T["break"], free & (x.S[:, H_LOOPS] != 0)),
                        (T["continue"], free & (x.S[:, H_LOOPS] != 0))):
            out.set(c, np.where(cond, out.get(c), INF))
        vt = x.vt
        names_b = np.where(vt == T_NONE, _TAILA[P_ASSIGN_EQ], 2 + _CONSTA[vt]) + x.bS1[:, None]
        names_b = np.where(free[:, None] & ~((vt == T_NONE) & _IS_PARAM_SLOT), names_b, INF)
        names_f = np.where((ph == P_FOR_VAR)[:, None] & x.for_ok, _TAILA[P_FOR_IN] + x.bS[:, None], INF)
        out.set_many(_NAMES, np.where(atb[:, None], names_b, names_f), V.P0)
        target = ph == P_TARGET
        for c in _AUGS:
            okt = (x.tvt == T_I) | ((x.tvt == T_L) & (c == T["+="]))
            out.set(c, np.where(target & ~okt, INF, out.get(c)))
        not_list = target & (x.tvt != T_L)
        out.set(T["["], np.where(not_list, INF, out.get(T["["])))
        out.set(T["."], np.where(not_list, INF, out.get(T["."])))
        return out.v

    # ---- the new rows ---------------------------------------------------------------------------
    def _apply(self, S, x, a):
        """The rows after action a (n,), assuming it is valid (rows where it is not are
        discarded by the caller). Mirrors the reference's _apply case by case."""
        tb, ar, n = self._tb, x.ar, x.n
        N = S.copy()
        E = x.nf > 0
        St = ~E
        ph, d, dc = x.ph, x.d, x.dc
        is_name = _IS_NAME[a]
        slot = _mn(a - V.P0, 0, NUM_NAMES - 1)
        cnum = _CALLEE_NUM[a]
        is_callee = cnum >= 0
        cnum = np.maximum(cnum, 0)
        before, after = x.before, x.after
        kind, t = x.kind, x.t

        # --- expression level
        close = E & _IS_CLOSER[a] & ~((x.fph == PH_POPLP) & (a == T[")"]))
        names_b = E & before & is_name
        range_b = E & before & (a == T["range"])
        callee_b = E & before & is_callee
        paren_b = E & before & (a == T["("])
        list_b = E & before & (a == T["["])
        call_open = E & x.incallee & (a == T["("])
        sub_open = E & after & (a == T["["])
        opens = paren_b | list_b | call_open | sub_open
        local = E & ~(close | range_b | opens)        # includes names_b and callee_b
        # frame-local changes of the top frame (fields F_PH..F_CUR, and F_CALLEE on a callee)
        nfid = np.where(names_b, tb.after[x.f, x.vt[ar, slot]],
                        np.where(callee_b, tb.callee[x.f, cnum], tb.ft[x.f, ACLASS[a]]))
        cols = x.fb[:, None] + _LOC
        N[ar[:, None], cols] = np.where(local[:, None], tb.local9[nfid], N[ar[:, None], cols])
        N[ar, x.fb + F_CALLEE] = np.where(callee_b, cnum, N[ar, x.fb + F_CALLEE])
        canon_close = close & (a == x.canon)
        list_more = close & (kind == K_LIST) & (a == T[","])
        range_more = close & (kind == K_RANGE) & (a == T[","])
        call_more = canon_close & (kind == K_CALL) & (a == T[","])
        feed = canon_close & (kind <= K_CALL) & ~call_more
        sclose = canon_close & (kind >= K_RET)
        # closing into the parent frame: its operand becomes the result
        feed_t = np.where(kind == K_PAREN, t, np.where(kind == K_SUB, T_I,
                                                       np.where(kind == K_LIST, T_L, x.cret[ar, x.caux])))
        pcols = x.pfb[:, None] + _LOC
        N[ar[:, None], pcols] = np.where(feed[:, None], tb.local9[tb.after[x.pf, feed_t]], N[ar[:, None], pcols])

        # --- statement level
        phc = _mn(ph, 0, 15)
        sk = np.where(St, _SPUSH[phc, a], -1)
        spush = sk >= 0
        atb = St & (ph == P_BOUND)

        # --- frames opened or reopened: (rows, index, kind, aux, arg, empty_ok, rest)
        cases = [
            (paren_b, x.nf, K_PAREN, 0, 0, 0, x.rest_paren),
            (list_b, x.nf, K_LIST, 0, 0, 1, x.rest_list),
            (sub_open, x.nf, K_SUB, 0, 0, 0, x.rest_sub),
            (call_open, x.nf, K_CALL, _mn(x.TF[:, F_CALLEE], 0, 4), 0, 0, x.rest_call),
            (list_more, x.i, K_LIST, 0, 0, 0, x.r),
            (range_more, x.i, K_RANGE, 0, x.arg + 1, 0, x.r),
            (call_more, x.i, K_CALL, x.aux, x.arg + 1, 0, x.rest_call_more),
        ]
        s_aux = np.where(sk == K_ASSIGN_NEW, S[:, H_TARGET], np.where((sk == K_ASSIGN) | (sk == K_AUG), x.tvt, 0))
        s_aux = np.where((sk == K_COND) | (sk == K_COND_ELIF), _PEND[a], s_aux)
        cases.append((spush, 0, np.where(sk == K_COND_ELIF, K_COND, sk), s_aux, 0, 0,
                      x.srest[ar, np.maximum(sk, 0)]))
        pm = np.zeros(n, dtype=bool)
        zeros = np.zeros(n, dtype=np.int64)
        p_idx, p_kind, p_aux, p_arg, p_eok = zeros, zeros, zeros, zeros, zeros
        p_rest = np.zeros((n, 3), dtype=np.int64)
        for rows, idx, kd, aux, arg, eok, rest in cases:
            pm = pm | rows
            p_idx = np.where(rows, idx, p_idx)
            p_kind = np.where(rows, kd, p_kind)
            p_aux = np.where(rows, aux, p_aux)
            p_arg = np.where(rows, arg, p_arg)
            p_eok = np.where(rows, eok, p_eok)
            p_rest = np.where(rows[:, None], rest, p_rest)
        frame = np.zeros((n, F_FIELDS), dtype=np.int64)
        frame[:, F_KIND], frame[:, F_AUX], frame[:, F_ARG], frame[:, F_EMPTY_OK] = p_kind, p_aux, p_arg, p_eok
        frame[:, F_REST_I:F_REST_L + 1] = p_rest
        fcols = OFF_FRAMES + _mn(p_idx, 0, MAX_FRAMES - 1)[:, None] * F_FIELDS + _FR
        N[ar[:, None], fcols] = np.where(pm[:, None], frame, N[ar[:, None], fcols])

        # --- header fields
        N[:, H_NF] = np.where(opens, x.nf + 1, np.where(feed | range_b, x.nf - 1,
                                                         np.where(sclose, 0, np.where(spush, 1, x.nf))))
        dedent = atb & (a == V.DEDENT)
        indent = St & (ph == P_INDENT)
        name_stmt = atb & is_name
        sph = np.where(name_stmt & (x.vt[ar, slot] == T_NONE), P_ASSIGN_EQ, _SPH[phc, a])
        eph = np.where(range_b, P_RANGE_LP, np.where(sclose, _SCLOSE_PH[x.kc], ph))
        N[:, H_PH] = np.where(St, sph, eph)
        N[:, H_DONE] = np.where(atb & (a == V.END), 1, S[:, H_DONE])
        N[:, H_TARGET] = np.where(name_stmt, a, S[:, H_TARGET])
        N[:, H_PEND_KIND] = np.where(atb & (_PEND[a] >= 0), _PEND[a], S[:, H_PEND_KIND])
        pend_var = S[:, H_PEND_VAR]
        N[:, H_PEND_VAR] = np.where(St & (ph == P_FOR_VAR), a, np.where(indent, 0, pend_var))

        # --- blocks (a copy of the (n, MAX_BLOCKS, B_FIELDS) array, written back at the end)
        B = x.B.copy()
        kind_d, safe_d = x.B[ar, dc, B_KIND], x.B[ar, dc, B_SAFE]
        ret_close = sclose & (kind == K_RET)
        # a statement at a boundary: CHAIN[d] = 0; NONEMPTY[d] = 1 unless elif/else
        stmt_start = atb & (a != V.END) & (a != V.DEDENT)
        B[ar, dc, B_CHAIN] = np.where(stmt_start, 0, B[ar, dc, B_CHAIN])
        B[ar, dc, B_NONEMPTY] = np.where(stmt_start & (a != T["elif"]) & (a != T["else"]), 1, B[ar, dc, B_NONEMPTY])
        brk = atb & ((a == T["break"]) | (a == T["continue"]))
        B[ar, dc, B_TERM] = np.where(brk | ret_close, 1, B[ar, dc, B_TERM])
        B[ar, dc, B_SAFE] = np.where(ret_close, 1, B[ar, dc, B_SAFE])
        # DEDENT: close block d into d-1
        pd = _mn(d - 1, 0, MAX_BLOCKS - 1)
        pcs = x.B[ar, pd, B_CHAIN_SAFE]
        B[ar, pd, B_CHAIN] = np.where(dedent & ((kind_d == BK_IF) | (kind_d == BK_ELIF)), 1, B[ar, pd, B_CHAIN])
        B[ar, pd, B_CHAIN_SAFE] = np.where(dedent & (kind_d == BK_IF), safe_d,
                                           np.where(dedent & (kind_d == BK_ELIF), np.where(pcs != 0, safe_d, pcs), pcs))
        else_safe = dedent & (kind_d == BK_ELSE) & (pcs != 0) & (safe_d != 0)
        B[ar, pd, B_SAFE] = np.where(else_safe, 1, B[ar, pd, B_SAFE])
        B[ar, pd, B_TERM] = np.where(else_safe, 1, B[ar, pd, B_TERM])
        # INDENT: open block d+1
        nd = _mn(d + 1, 0, MAX_BLOCKS - 1)
        pend_kind = S[:, H_PEND_KIND]
        newblock = np.zeros((n, B_FIELDS), dtype=np.int64)
        newblock[:, B_KIND] = pend_kind
        B[ar, nd] = np.where(indent[:, None], newblock, B[ar, nd])
        N[:, OFF_BLOCKS:OFF_VARS] = B.reshape(n, -1)
        N[:, H_DEPTH] = np.where(dedent, d - 1, np.where(indent, d + 1, d))
        loops = S[:, H_LOOPS]
        N[:, H_LOOPS] = np.where(dedent & (kind_d == BK_LOOP), loops - 1,
                                 np.where(indent & (pend_kind == BK_LOOP), loops + 1, loops))

        # --- names: scoping on DEDENT, a new variable on `v = e` or as a new for-variable
        new_var = sclose & (kind == K_ASSIGN_NEW)
        vt = np.where(dedent[:, None] & (x.vt != T_NONE) & (x.vdep == d[:, None]), T_NONE, x.vt)
        vdep = x.vdep.copy()
        aslot = _mn(x.aux - V.P0, 0, NUM_NAMES - 1)
        vt[ar, aslot] = np.where(new_var, t, vt[ar, aslot])
        vdep[ar, aslot] = np.where(new_var, d, vdep[ar, aslot])
        fslot = _mn(pend_var - V.P0, 0, NUM_NAMES - 1)
        for_var = indent & (pend_kind == BK_LOOP) & (pend_var != 0) & (x.vt[ar, fslot] == T_NONE)
        vt[ar, fslot] = np.where(for_var, T_I, vt[ar, fslot])
        vdep[ar, fslot] = np.where(for_var, d + 1, vdep[ar, fslot])
        N[:, OFF_VARS:OFF_FRAMES:2] = vt
        N[:, OFF_VARS + 1:OFF_FRAMES:2] = vdep
        return N


class Grammar(ReferenceGrammar):
    """The automaton for one signature and length budget, over batches of envs (array code).

    `mask`, `step` and `min_tokens_to_finish` are batched; the per-row methods inherited from
    ReferenceGrammar (`_try`, `_mask_row`, `_cost`, ...) remain the oracle. Batches smaller
    than `reference_below` rows go through the reference rows instead (the batched code has a
    fixed cost of about a millisecond per call, the reference about half a millisecond per row);
    the results are the same either way. Set it to 0 to force the batched path."""

    reference_below = 8

    def __init__(self, signature: "Signature | str", max_len: int = 64):
        super().__init__(signature, max_len)
        self._batched = BatchedAutomaton([self])

    def mask(self, state: np.ndarray) -> np.ndarray:
        """(n, VOCAB_SIZE) bool: the allowed actions of each env (all False once done)."""
        state = np.atleast_2d(state)
        if len(state) < self.reference_below:
            return ReferenceGrammar.mask(self, state)
        return self._batched.mask(state)

    def step(self, state: np.ndarray, actions) -> tuple[np.ndarray, np.ndarray]:
        """Apply one action per env. Returns (new state, invalid (n,) bool); an invalid action
        (out of range, masked, or after END) leaves that env unchanged."""
        state = np.atleast_2d(state)
        if len(state) < self.reference_below:
            return ReferenceGrammar.step(self, state, actions)
        return self._batched.step(state, actions)

    def min_tokens_to_finish(self, state: np.ndarray) -> np.ndarray:
        """(n,) int: tokens (END included) of the canonical completion of each env."""
        return self._batched.min_tokens_to_finish(state)
