"""Grammar- and type-aware action masks: a typed pushdown automaton over the vocabulary, batched.

The agent writes the body of a function whose signature line is given. At every step the mask
allows the actions that continue the prefix to a well-typed program of the language (within
the subset documented in envs/grammar_reference.py) whose canonical completion still fits the
length budget L, so that ANY masked action sequence reaches END by L tokens and compiles
(tests/test_grammar.py checks it against the compiler and CPython). Sound, not complete: see
grammar_reference.py for what the canonical completion leaves out near the budget.

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
  those are filled per (return type, call cost)). The tables are built once (about 1 s) and
  shared by all grammars; a cache file keeps them for later processes (_Tables).
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
arrays, with shapes that depend on n only, so one implementation serves numpy and torch:
BatchedAutomaton takes an array backend, `NumpyOps` (the default, below) or `TorchOps`
(envs/grammar_torch.py), which supply the dozen operations the two spell differently; the rest
is indexing and operators they spell alike. The tables are built here once, in numpy, and each
backend converts them once (per device). `TorchAutomaton` (envs/grammar_torch.py) is this code
on torch tensors on any device, with no host synchronization. `BatchedAutomaton(grammars)` runs
rows of different signatures/budgets in one call (`mask(state, gid)`, `step(state, actions,
gid)`, `initial(gid)`): the per-grammar constants are per-row lookups.
`Grammar.reference_below` (8): smaller batches use the reference rows, which are cheaper than
the batched code's fixed cost per call (~1-4 ms).
"""
from __future__ import annotations

from functools import cached_property
from types import SimpleNamespace

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
    _ftrans, _TAIL, action_ids, check_count, check_gids, check_states)
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


def _key_frame(k) -> list:
    """The frame (12 fields) of a frame key."""
    return list(k[:9]) + [0, 0, k[9]]


class _Tables:
    """Dense per-fid arrays over every frame-local state the automaton can reach. Built by a BFS
    in Python (about 1 s), then kept in a cache file (`_cache_path`) that later processes load."""

    def __init__(self, cache: bool = True):
        path = _cache_path() if cache else None
        built = _load_tables(path) if path else None
        if built is None:
            keys, ft, after, callee = self._search()
            fields = np.array([(0,) * 11] + keys[1:], dtype=np.int64)
            after_t = np.array([0] + [_final_type(_key_frame(k)) if k[0] == PH_AFTER else 0 for k in keys[1:]],
                               dtype=np.int64)
            self._derive(fields, ft, after, callee, after_t)
            self.cbase = self._costs()
            if path:
                _save_tables(path, self)
        else:
            fields, ft, after, callee, after_t, self.cbase = built
            self._derive(fields, ft, after, callee, after_t)
        self._variants: dict = {}

    @cached_property
    def keys(self) -> list:
        """The frame key of each fid (None for DEAD), as the BFS found them."""
        return [None] + [tuple(int(v) for v in k) for k in self.fields[1:]]

    @staticmethod
    def _search():
        """(keys, ft, after, callee) lists: every reachable frame key by BFS from the fresh frames."""
        def key(fr, callee=0):
            return tuple(fr[:9]) + (fr[11], callee if fr[0] == PH_CALLEE else 0)

        frame = _key_frame
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
        return keys, ft, after, callee

    def _derive(self, K, ft, after, callee, after_t):
        self.n = len(K)
        self.fields = K                                     # (n, 11) key fields
        self.local9 = K[:, :9]                              # F_PH..F_CUR as written into a row
        self.ft = np.asarray(ft, dtype=np.int64)            # (n, classes)
        self.after = np.asarray(after, dtype=np.int64)      # (n, 4): by type, [:, 0] DEAD
        self.callee = np.asarray(callee, dtype=np.int64)    # (n, 5)
        self.pack2fid = np.zeros(_KEY_SPACE, dtype=np.int64)
        self.pack2fid[K[1:] @ _KEY_MULT] = np.arange(1, self.n)
        ph = K[:, 0]
        self.ph = np.where(np.arange(self.n) == DEAD, -1, ph)
        self.cur = K[:, 8]
        self.eok = K[:, 9]
        self.fresh = (K[:, 1:8] == 0).all(axis=1)
        self.after_t = after_t                              # (n,): the type a PH_AFTER frame closes with
        self.empty_close = (self.ph == PH_BEFORE) & (self.eok != 0) & self.fresh

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
# what the tables are computed from, in the package (vocab.py reads constants of vm/opcodes.py)
_TABLE_SOURCES = ("envs/grammar.py", "envs/grammar_reference.py", "envs/vocab.py", "vm/opcodes.py")
_CACHED = ("fields", "ft", "after", "callee", "after_t", "cbase")      # what the cache file holds


def _cache_path():
    """The tables' cache file: in VRAMGYM_CACHE_DIR, else $XDG_CACHE_HOME/vramgym or
    ~/.cache/vramgym, named by a hash of the sources that define the tables (an edited source
    never meets an old file). VRAMGYM_CACHE_DIR=off: no cache."""
    import hashlib
    import os
    from pathlib import Path
    where = os.environ.get("VRAMGYM_CACHE_DIR")
    if where == "off":
        return None
    try:
        if not where:
            where = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vramgym"
            if str(where).startswith("~"):   # no home to expand: no cache (not a "~" folder here)
                return None
        h = hashlib.sha256(np.__version__.encode())
        for name in _TABLE_SOURCES:
            h.update(name.encode() + b"\0" + (Path(__file__).parent.parent / name).read_bytes())
    except (OSError, RuntimeError, KeyError):   # no home directory, sources not readable as files
        return None
    return Path(where) / f"grammar_tables_{h.hexdigest()[:24]}.npz"


def _load_tables(path):
    """(fields, ft, after, callee, after_t, cbase) from the cache file, or None where it is missing
    or not whole (a zip member's CRC, the shapes and dtypes are checked: a bad file is rebuilt)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            got = tuple(z[k] for k in _CACHED)
    except Exception:   # missing, truncated, not a zip, a CRC error: build the tables instead
        return None
    n = len(got[0])
    shapes = [(n, 11), (n, len(_FT_REPS)), (n, 4), (n, 5), (n,), (n, 3, 3)]
    if n < 3 or any(a.dtype != np.int64 or a.shape != sh for a, sh in zip(got, shapes)):
        return None
    return got


def _save_tables(path, tb) -> None:
    """Write the cache file next to its final name, then rename it (atomic: processes that build
    the tables at once each write their own file, and a reader sees a whole one or none), and
    remove the files of other sources. A cache that cannot be written (read-only home) is skipped."""
    import os
    import tempfile
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **{k: getattr(tb, k) for k in _CACHED})
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        for old in path.parent.glob("grammar_tables_*.npz"):   # other sources' tables: 20 MB each
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:
        pass


def tables() -> _Tables:
    global _TABLES
    if _TABLES is None:
        _TABLES = _Tables()
    return _TABLES


# ---- constants of the batched code -----------------------------------------------------------
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


# ---- array backends ----------------------------------------------------------------------------
class NumpyOps:
    """The array operations of the batched code that numpy and torch spell differently, over
    numpy. envs/grammar_torch.py supplies the same set over torch tensors on a device; the rest
    of BatchedAutomaton is indexing, in-place indexed writes and operators, which both spell
    alike. `put` turns a numpy constant into an array of the backend (here: itself)."""

    where = staticmethod(np.where)
    stack = staticmethod(np.stack)              # (arrays, axis)
    cat = staticmethod(np.concatenate)          # (arrays, axis)
    cumprod = staticmethod(np.cumprod)          # (array, axis)
    broadcast_to = staticmethod(np.broadcast_to)
    ones_like = staticmethod(np.ones_like)
    zeros_like = staticmethod(np.zeros_like)

    def __init__(self):
        self.cache: dict = {}                   # constants already converted, see _on()

    @staticmethod
    def put(a: np.ndarray, key=None) -> np.ndarray:
        return a

    @staticmethod
    def rows(state) -> np.ndarray:             # (n, STATE_SIZE) int64
        return np.atleast_2d(check_states(state)).astype(np.int64)

    @staticmethod
    def vec(v) -> np.ndarray:                  # (n,) int64 grammar ids
        return np.asarray(check_gids(v, -1)).reshape(-1).astype(np.int64)

    actions = staticmethod(action_ids)        # (n,) int64, non-integers -1

    @staticmethod
    def like(x, ref) -> np.ndarray:            # x in the dtype of the caller's array
        return x.astype(np.asarray(ref).dtype)

    @staticmethod
    def arange(n: int) -> np.ndarray:
        return np.arange(n)

    @staticmethod
    def full(shape, v: int) -> np.ndarray:
        return np.full(shape, v, dtype=np.int64)

    @staticmethod
    def falses(n: int) -> np.ndarray:
        return np.zeros(n, dtype=bool)

    @staticmethod
    def copy(x) -> np.ndarray:
        return x.copy()

    @staticmethod
    def i64(x) -> np.ndarray:
        return x.astype(np.int64)

    @staticmethod
    def min3(x) -> np.ndarray:                 # min over the last axis, of length 3
        return np.minimum(np.minimum(x[..., 0], x[..., 1]), x[..., 2])   # 5x faster than .min(axis=-1)

    @staticmethod
    def cap(x) -> np.ndarray:                  # min(x, INF)
        return np.minimum(x, INF)

    @staticmethod
    def atleast(x, lo: int) -> np.ndarray:
        return np.maximum(x, lo)

    @staticmethod
    def clip(x, lo: int, hi: int) -> np.ndarray:
        return np.minimum(np.maximum(x, lo), hi)

    @staticmethod
    def take1(vals, idx) -> np.ndarray:        # vals[i, idx[i]]
        return np.take_along_axis(vals, idx[:, None], axis=1)[:, 0]


_NUMPY = NumpyOps()
# What the batched code indexes with per-row values: frame tables and module constants, moved to
# each backend/device once (_on) and read there as tb.<field> and k.<NAME>.
_TABLE_FIELDS = ("ft", "after", "callee", "local9", "pack2fid", "ph", "cur", "eok", "fresh", "after_t",
                 "empty_close")
_CONSTS = dict(ACLASS=ACLASS, CALLEE_NUM=_CALLEE_NUM, PUSH=PUSH, KEY_MULT9=_KEY_MULT[:9], TAILA=_TAILA,
               CONSTA=_CONSTA, CANON=_CANON, IS_CLOSER=_IS_CLOSER, IS_NAME=_IS_NAME,
               IS_PARAM_SLOT=_IS_PARAM_SLOT, FR=_FR, LOC=_LOC, J=_J, TT=_TT, A73=_A73, SCLOSE_PH=_SCLOSE_PH,
               SPUSH=_SPUSH, STAIL=_STAIL, SB1=_SB1, SPH=_SPH, PTAIL=_PTAIL, PTYPES=_PTYPES, PEND=_PEND)
# scalars next to arrays are Python ints (a numpy scalar next to a tensor would convert it)
_M_EOK, _M_CALLEE, _PUSH0 = int(_KEY_MULT[9]), int(_KEY_MULT[10]), int(PUSH[0])
# set_many writes these action ids as contiguous column ranges
assert (np.diff(_CALLEE_TOKENS[:4]) == 1).all() and (np.diff(_NAMES) == 1).all()


def _on(xp):
    """(tables, constants) as arrays of backend xp, converted once per backend object."""
    if "consts" not in xp.cache:
        tb = tables()
        xp.cache["consts"] = (SimpleNamespace(**{f: xp.put(getattr(tb, f)) for f in _TABLE_FIELDS}),
                              SimpleNamespace(**{k: xp.put(v) for k, v in _CONSTS.items()}))
    return xp.cache["consts"]


class _Cols:
    """The cost after each action: (n, 73) for a mask, (n,) for one given action per env."""

    def __init__(self, xp, base, acts):
        self.xp, self.v, self.acts = xp, base, acts

    def get(self, c):
        return self.v[:, c] if self.acts is None else self.v

    def set(self, c, val):
        if self.acts is None:
            self.v[:, c] = val
        else:
            self.v = self.xp.where(self.acts == c, val, self.v)

    def set_many(self, lo, vals):
        """vals (n, K): the costs of the contiguous action ids lo..lo+K-1."""
        K = vals.shape[1]
        if self.acts is None:
            self.v[:, lo:lo + K] = vals
        else:
            p = self.acts - lo
            inside = (p >= 0) & (p < K)
            self.v = self.xp.where(inside, self.xp.take1(vals, self.xp.clip(p, 0, K - 1)), self.v)


class _Ctx:
    """Per-row quantities that mask and step share (all (n,) or (n, k) arrays)."""


class _Params:
    """Per-grammar constants, stacked over G grammars (rows pick theirs by grammar index)."""

    def __init__(self, grammars, xp):
        tb = tables()
        variants: dict = {}
        var = np.array([variants.setdefault((g.ret, g._callee_cost[4]), len(variants)) for g in grammars])
        self.nvar = len(variants)
        self.var = xp.put(var)
        # (variants, fids, push, t); each variant's table moved to the device once
        self.C = xp.stack([xp.put(tb.costs(*k), key=("C",) + k) for k in variants], 0)
        ret = np.array([g.ret for g in grammars], dtype=np.int64)
        self.ret, self.ret_cost = xp.put(ret), xp.put(_CONSTA[ret])
        self.max_len = xp.put(np.array([g.max_len for g in grammars], dtype=np.int64))
        cargs = np.zeros((len(grammars), 5, 4), dtype=np.int64)
        for i, g in enumerate(grammars):
            for c, (a, _) in g.callees.items():
                cargs[i, c, :len(a)] = a
        self.cargs, self.cnargs = xp.put(cargs), xp.put((cargs > 0).sum(axis=2))
        self.cret = xp.put(np.array([[g.callees[c][1] for c in range(5)] for g in grammars], dtype=np.int64))
        self.init = xp.put(np.stack([np.asarray(g._init, dtype=np.int32) for g in grammars]))


class BatchedAutomaton:
    """The batched mask/step core over rows that may belong to different grammars (row i uses
    grammars[gid[i]]); `Grammar` is the single-grammar case. All grammars share the tables.
    ops: the array backend (numpy by default; envs/grammar_torch.py passes torch on a device)."""

    def __init__(self, grammars, ops: NumpyOps | None = None):
        self.grammars = list(grammars)
        self._xp = xp = _NUMPY if ops is None else ops
        self._tb, self._k = _on(xp)
        self._P = _Params(self.grammars, xp)
        self._single_C = self._P.C[0] if self._P.nvar == 1 else None
        self._fresh0 = int(tables().pack2fid[0])
        self._fresh1 = int(tables().pack2fid[_KEY_MULT[9]])
        self._fids4 = xp.put(np.array([self._fresh0, self._fresh0, self._fresh1, self._fresh0]))

    # ---- batch API ------------------------------------------------------------------------
    def initial(self, gid):
        """(n, STATE_SIZE) int32: the empty-body rows of grammars[gid[i]]."""
        return self._P.init[self._xp.vec(gid)]

    def mask(self, state, gid=None):
        x = self._context(self._xp.rows(state), gid)
        cost = self._eval(x, None)
        return (cost <= (x.max_len - x.length - 1)[:, None]) & ~x.done[:, None]

    def step(self, state, actions, gid=None):
        xp = self._xp
        S = xp.rows(state)
        actions = xp.actions(actions)
        check_count(actions, S.shape[0])
        in_range = (actions >= 0) & (actions < _NV)
        a = xp.where(in_range, actions, 0)
        x = self._context(S, gid)
        cost = self._eval(x, a)
        ok = in_range & ~x.done & (cost <= x.max_len - x.length - 1)
        new = self._apply(S, x, a)
        new[:, H_LEN] += 1
        return xp.like(xp.where(ok[:, None], new, S), state), ~ok

    def min_tokens_to_finish(self, state, gid=None):
        xp, k = self._xp, self._k
        x = self._context(xp.rows(state), gid)
        top = self._cmin(x, x.f, x.push, x.r)
        ph = x.ph
        tail = xp.where(ph == P_BOUND, 0, xp.where(ph == P_TARGET, 2 + k.CONSTA[x.tvt], k.TAILA[xp.clip(ph, 0, 15)]))
        stmt = xp.where((ph == P_FOR_VAR) & ~x.for_ok.any(axis=1), INF, tail + x.bS)
        return xp.where(x.done, 0, xp.where(x.nf > 0, top, stmt))

    # ---- shared per-row quantities ----------------------------------------------------------
    def _fid(self, F):
        """Frame-state ids of frame rows F (n, F_FIELDS)."""
        xp = self._xp
        callee = xp.where(F[:, F_PH] == PH_CALLEE, F[:, F_CALLEE], 0)
        pack = (F[:, F_PH:F_CUR + 1] * self._k.KEY_MULT9).sum(axis=1) + F[:, F_EMPTY_OK] * _M_EOK \
            + callee * _M_CALLEE
        return self._tb.pack2fid[xp.clip(pack, 0, _KEY_SPACE - 1)]

    def _cmin(self, x, fid, push, rest):
        """min(INF, min_t C[fid, push, t] + rest_t): the cost with a frame in state fid on top
        whose REST is rest (fid, push: shape (n, ...); rest: (n, ..., 3))."""
        if self._single_C is not None:
            c = self._single_C[fid, push]
        else:
            c = self._P.C[x.var.reshape((-1,) + (1,) * (fid.ndim - 1)), fid, push]
        return self._xp.cap(self._xp.min3(c + rest))

    def _context(self, S, gid) -> _Ctx:
        xp, k, P, tb = self._xp, self._k, self._P, self._tb
        n = len(S)
        x = _Ctx()
        x.S, x.n, x.ar = S, n, xp.arange(n)
        g = xp.full(n, 0) if gid is None else xp.vec(check_gids(gid, n))
        x.var, x.ret, x.ret_cost, x.max_len = P.var[g], P.ret[g], P.ret_cost[g], P.max_len[g]
        x.cargs, x.cnargs, x.cret = P.cargs[g], P.cnargs[g], P.cret[g]
        x.length, x.done = S[:, H_LEN], S[:, H_DONE] != 0
        x.nf, x.ph, x.d = S[:, H_NF], S[:, H_PH], S[:, H_DEPTH]
        x.i = xp.clip(x.nf - 1, 0, MAX_FRAMES - 1)                  # top frame index
        x.fb = OFF_FRAMES + x.i * F_FIELDS
        x.TF = S[x.ar[:, None], x.fb[:, None] + k.FR]               # (n, F_FIELDS)
        x.f = self._fid(x.TF)
        x.r = x.TF[:, F_REST_I:F_REST_L + 1]
        x.kind, x.aux, x.arg = x.TF[:, F_KIND], x.TF[:, F_AUX], x.TF[:, F_ARG]
        x.pi = xp.clip(x.nf - 2, 0, MAX_FRAMES - 1)                 # parent frame index
        x.pfb = OFF_FRAMES + x.pi * F_FIELDS
        x.PF = S[x.ar[:, None], x.pfb[:, None] + k.FR]
        x.pf = self._fid(x.PF)
        x.pr = x.PF[:, F_REST_I:F_REST_L + 1]
        x.push = k.PUSH[x.i]
        x.push_next = k.PUSH[xp.clip(x.nf, 0, MAX_FRAMES)]
        x.push_parent = k.PUSH[x.pi]
        x.fph = tb.ph[x.f]
        x.before, x.after, x.incallee = x.fph == PH_BEFORE, x.fph == PH_AFTER, x.fph == PH_CALLEE
        # blocks and names
        x.B = S[:, OFF_BLOCKS:OFF_VARS].reshape(n, MAX_BLOCKS, B_FIELDS)
        x.dc = xp.clip(x.d, 0, MAX_BLOCKS - 1)
        x.bd = x.B[x.ar, x.dc]                                       # (n, B_FIELDS): block d
        x.vt = S[:, OFF_VARS:OFF_FRAMES:2]                           # (n, NUM_NAMES) types
        x.vdep = S[:, OFF_VARS + 1:OFF_FRAMES:2]
        x.empty_d = (x.d > 0) & (x.bd[:, B_NONEMPTY] == 0)
        x.bS, x.b_ret, x.b_ded, x.b_ind = self._boundaries(x)
        x.bS1 = x.bS - xp.where(x.empty_d, 2, 0)                     # after NONEMPTY[d] = 1
        x.tgt = xp.clip(S[:, H_TARGET] - V.P0, 0, NUM_NAMES - 1)
        x.tvt = x.vt[x.ar, x.tgt]                                    # type of the statement target
        x.for_ok = (x.vt == T_I) | ((x.vt == T_NONE) & ~k.IS_PARAM_SLOT)   # (n, NUM_NAMES)
        # closing the top frame: result type t, its REST, the canonical closer
        at = tb.after_t[x.f]
        x.t = xp.where(at > 0, at, xp.where(tb.empty_close[x.f] & (x.kind == K_LIST), T_I, T_NONE))
        x.rt = x.r[x.ar, xp.atleast(x.t - 1, 0)]
        x.kc = xp.clip(x.kind, 0, 13)
        x.caux = xp.clip(x.aux, 0, 4)
        x.canon = xp.where((x.kc == K_CALL) & (x.arg != x.cnargs[x.ar, x.caux] - 1), T[","], k.CANON[x.kc])
        self._pushes(x)
        self._stmt_frames(x)
        return x

    def _boundaries(self, x):
        """The reference's _boundary_cost in closed form (a cumulative product over the
        else-chain), for the state and for it after `return`, DEDENT and INDENT: (n,) each."""
        xp = self._xp
        n, ar, d, dc = x.n, x.ar, x.d, x.dc
        kind, cs, safe = x.B[:, :, B_KIND], x.B[:, :, B_CHAIN_SAFE], x.B[:, :, B_SAFE]
        s_ret = xp.copy(safe)                             # return: SAFE[d] = 1 (and NONEMPTY[d])
        s_ret[ar, dc] = xp.ones_like(dc)                  # a value tensor: a Python scalar here is
                                                          # a host-to-device copy in torch (a sync)
        pd = xp.clip(d - 1, 0, MAX_BLOCKS - 1)            # DEDENT: close block d into d-1
        s_ded = xp.copy(safe)
        s_ded[ar, pd] = xp.where((kind[ar, dc] == BK_ELSE) & (cs[ar, pd] != 0) & (safe[ar, dc] != 0),
                                 1, safe[ar, pd])
        nd = xp.clip(d + 1, 0, MAX_BLOCKS - 1)            # INDENT: open block d+1 = [PEND_KIND, 0...]
        k_ind, c_ind, s_ind = xp.copy(kind), xp.copy(cs), xp.copy(safe)
        k_ind[ar, nd] = x.S[:, H_PEND_KIND]
        c_ind[ar, nd] = xp.zeros_like(nd)
        s_ind[ar, nd] = xp.zeros_like(nd)
        K = xp.cat([kind, kind, kind, k_ind], 0)
        CS = xp.cat([cs, cs, cs, c_ind], 0)
        SF = xp.cat([safe, s_ret, s_ded, s_ind], 0)
        D = xp.cat([d, d, d - 1, d + 1], 0)
        NE = xp.cat([x.bd[:, B_NONEMPTY], xp.ones_like(d), x.B[ar, pd, B_NONEMPTY], xp.zeros_like(d)], 0)
        p = (K[:, 1:] == BK_ELSE) & (CS[:, :-1] != 0)                  # p_k, k = 1..MAX-1
        Pc = xp.cumprod(xp.cat([xp.full((4 * n, 1), 1), xp.i64(p)], 1), 1)
        reach = ((SF != 0) & (Pc != 0) & (self._k.J[None] <= D[:, None])).any(axis=1)
        rc = xp.cat([x.ret_cost] * 4, 0)
        b = xp.where((D > 0) & (NE == 0), 2, 0) + D + xp.where(reach, 0, 2 + rc) + 1
        return b[:n], b[n:2 * n], b[2 * n:3 * n], b[3 * n:]

    # ---- REST of frames being opened ----------------------------------------------------------
    def _call_rest(self, x, callee, arg, X, push):
        """REST of the K_CALL frame for argument `arg` of callee (m,), at push depth push, where
        X is the cost once the call's result feeds the parent (rows: x's, possibly stacked)."""
        xp = self._xp
        m = len(callee)
        ar = xp.arange(m)
        reps = m // x.n if x.n else 1
        args = xp.cat([x.cargs] * reps, 0)[ar, callee]              # (m, 4)
        nargs = xp.cat([x.cnargs] * reps, 0)[ar, callee]
        c0 = (self._single_C[self._fresh0][push] if self._single_C is not None
              else self._P.C[xp.cat([x.var] * reps, 0), self._fresh0, push])   # (m, 3)
        out = xp.full((m, 3), INF)
        nxt = out
        for j in range(3, -1, -1):
            cont = xp.cap(1 + xp.cap(xp.min3(c0 + nxt)))
            val = xp.where(nargs - 1 == j, xp.cap(1 + X), cont)
            rk = xp.where((args[:, j:j + 1] == self._k.TT) & (nargs > j)[:, None], val[:, None], INF)
            out = xp.where((arg == j)[:, None], rk, out)
            nxt = rk
        return out

    def _pushes(self, x):
        """REST (n, 3) of each frame an expression token can open or reopen on the top frame."""
        xp, k = self._xp, self._k
        tb, f, push, r, n = self._tb, x.f, x.push, x.r, x.n
        feed = xp.cap(1 + self._cmin(x, tb.after[f[:, None], k.TT[None, :]], push[:, None], r[:, None, :]))
        x.rest_paren = feed
        x.rest_list = xp.where(k.TT == T_I, feed[:, T_L - 1:T_L], INF)
        x.rest_sub = xp.where(k.TT == T_I, feed[:, T_I - 1:T_I], INF)
        c = xp.clip(x.TF[:, F_CALLEE], 0, 4)
        X = self._cmin(x, tb.after[f, x.cret[x.ar, c]], push, r)
        Xp = self._cmin(x, tb.after[x.pf, x.cret[x.ar, x.caux]], x.push_parent, x.pr)
        both = self._call_rest(x, xp.cat([c, x.caux], 0), xp.cat([xp.zeros_like(c), x.arg + 1], 0),
                               xp.cat([X, Xp], 0), xp.cat([x.push_next, push], 0))
        x.rest_call, x.rest_call_more = both[:n], both[n:]

    def _stmt_frames(self, x):
        """REST (n, 15, 3) of the statement frame of each kind (K_COND_ELIF: an elif) opened
        from the current statement state, and the cost (n, 15) once it is open."""
        xp, k = self._xp, self._k
        bsel = xp.stack([x.bS] * 15, 1)
        bsel[:, K_RET] = x.b_ret
        bsel[:, K_COND] = x.bS1
        x0 = 1 + k.PTAIL + bsel                                          # (n, 15)
        ok = xp.copy(xp.broadcast_to(k.PTYPES, (x.n, 15, 3)))
        ok[:, K_RET] = k.TT == x.ret[:, None]
        ok[:, K_ASSIGN] = ok[:, K_AUG] = k.TT == x.tvt[:, None]
        x.srest = xp.where(ok, x0[:, :, None], INF)
        x.scost = self._cmin(x, xp.full((x.n, 15), self._fresh0), _PUSH0, x.srest)

    # ---- costs after actions --------------------------------------------------------------------
    def _eval(self, x, acts):
        """Cost of the canonical completion after each action ((n, 73) when acts is None, else
        (n,) for acts (n,)); INF where the action is not a syntactic/typed continuation."""
        E = self._eval_expr(x, acts)
        Sv = self._eval_stmt(x, acts)
        return self._xp.where((x.nf > 0)[:, None] if acts is None else x.nf > 0, E, Sv)

    def _eval_expr(self, x, acts):
        xp, k, tb, n = self._xp, self._k, self._tb, x.n
        f, push, r = x.f, x.push, x.r
        if acts is None:
            base = self._cmin(x, tb.ft[f[:, None], k.ACLASS[None, :]], push[:, None], r[:, None, :])
        else:
            base = self._cmin(x, tb.ft[f, k.ACLASS[acts]], push, r)
        out = _Cols(xp, base, acts)
        before, after = x.before, x.after
        # names: an operand of the declared type; callees: enter PH_CALLEE
        nc = self._cmin(x, tb.after[f[:, None], x.vt], push[:, None], r[:, None, :])
        out.set_many(V.P0, xp.where(before[:, None], nc, INF))
        cc = self._cmin(x, tb.callee[f], push[:, None], r[:, None, :])
        cc = xp.where((before & (x.nf < MAX_FRAMES - 1))[:, None], cc, INF)
        out.set_many(T["len"], cc[:, :4])
        out.set(V.FN, cc[:, 4])
        # range: `for v in range(` (the iterable frame gives way to the range arguments)
        out.set(T["range"], xp.where(before & (x.kind == K_FORITER) & tb.fresh[f],
                                     _TAIL[P_RANGE_LP] + x.bS, INF))
        # frames opened on top: ( [ at PH_BEFORE, the call's ( at PH_CALLEE, a subscript [
        opened = self._cmin(x, xp.broadcast_to(self._fids4, (n, 4)), x.push_next[:, None],
                            xp.stack([x.rest_paren, x.rest_call, x.rest_list, x.rest_sub], 1))
        out.set(T["("], xp.where(before, xp.where(x.nf < MAX_FRAMES - 1, opened[:, 0], INF),
                                 xp.where(x.incallee, opened[:, 1], out.get(T["("]))))
        out.set(T["["], xp.where(before, xp.where(x.nf < MAX_FRAMES, opened[:, 2], INF),
                                 xp.where(after & (tb.cur[f] == T_L) & (x.nf < MAX_FRAMES - 1), opened[:, 3], INF)))
        # closers: the canonical one costs REST_t - 1; `,` continues a list or range
        canon_cost = xp.where((x.t > 0) & (x.rt < INF), x.rt - 1, INF)
        again = self._cmin(x, xp.full(n, self._fresh0), push, r)   # a new list item / range argument
        for c in _CLOSER_LIST:
            v = xp.where(x.canon == c, canon_cost, INF)
            if c == T[","]:
                v = xp.where((x.kind == K_LIST) & (x.t == T_I) & ~((tb.eok[f] != 0) & before), again, v)
                v = xp.where((x.kind == K_RANGE) & (x.arg < 2) & (x.t == T_I), again, v)
            if c == T[")"]:
                v = xp.where(x.fph == PH_POPLP, out.get(c), v)
            out.set(c, v)
        return out.v

    def _eval_stmt(self, x, acts):
        xp, k = self._xp, self._k
        ar, ph = x.ar, x.ph
        if acts is None:
            phA, A, bS, bS1, arA = ph[:, None], k.A73[None, :], x.bS[:, None], x.bS1[:, None], ar[:, None]
        else:
            phA, A, bS, bS1, arA = ph, acts, x.bS, x.bS1, ar
        phA = xp.clip(phA, 0, 15)
        sk = k.SPUSH[phA, A]
        tail = k.STAIL[phA, A]
        cost = xp.where(sk >= 0, x.scost[arA, xp.atleast(sk, 0)],
                        xp.where(tail >= 0, tail + xp.where(k.SB1[phA, A], bS1, bS), INF))
        out = _Cols(xp, cost, acts)
        d, bd = x.d, x.bd
        atb = ph == P_BOUND
        free = atb & (bd[:, B_TERM] == 0)          # a statement may start here
        chain = free & (bd[:, B_CHAIN] != 0)
        room = d + 1 < MAX_BLOCKS
        loops = x.S[:, H_LOOPS] != 0
        out.set(V.END, xp.where(atb & (d == 0) & (x.B[:, 0, B_SAFE] != 0), 0, INF))
        out.set(V.DEDENT, xp.where(atb & (d > 0) & (bd[:, B_NONEMPTY] != 0), x.b_ded, INF))
        out.set(V.INDENT, xp.where(ph == P_INDENT, x.b_ind, INF))
        for c, cond in ((T["elif"], chain), (T["else"], chain), (T["return"], free), (T["if"], free & room),
                        (T["while"], free & room), (T["for"], free & room & x.for_ok.any(axis=1)),
                        (T["pass"], free), (T["break"], free & loops), (T["continue"], free & loops)):
            out.set(c, xp.where(cond, out.get(c), INF))
        vt = x.vt
        names_b = xp.where(vt == T_NONE, _TAIL[P_ASSIGN_EQ], 2 + k.CONSTA[vt]) + x.bS1[:, None]
        names_b = xp.where(free[:, None] & ~((vt == T_NONE) & k.IS_PARAM_SLOT), names_b, INF)
        names_f = xp.where((ph == P_FOR_VAR)[:, None] & x.for_ok, _TAIL[P_FOR_IN] + x.bS[:, None], INF)
        out.set_many(V.P0, xp.where(atb[:, None], names_b, names_f))
        target = ph == P_TARGET
        int_target = x.tvt == T_I
        for c in _AUGS:
            okt = (int_target | (x.tvt == T_L)) if c == T["+="] else int_target
            out.set(c, xp.where(target & ~okt, INF, out.get(c)))
        not_list = target & (x.tvt != T_L)
        out.set(T["["], xp.where(not_list, INF, out.get(T["["])))
        out.set(T["."], xp.where(not_list, INF, out.get(T["."])))
        return out.v

    # ---- the new rows ---------------------------------------------------------------------------
    def _apply(self, S, x, a):
        """The rows after action a (n,), assuming it is valid (rows where it is not are
        discarded by the caller). Mirrors the reference's _apply case by case."""
        xp, k, tb, ar, n = self._xp, self._k, self._tb, x.ar, x.n
        N = xp.copy(S)
        E = x.nf > 0
        St = ~E
        ph, d, dc = x.ph, x.d, x.dc
        is_name = k.IS_NAME[a]
        slot = xp.clip(a - V.P0, 0, NUM_NAMES - 1)
        cnum = k.CALLEE_NUM[a]
        is_callee = cnum >= 0
        cnum = xp.atleast(cnum, 0)
        before, after = x.before, x.after
        kind, t = x.kind, x.t

        # --- expression level
        close = E & k.IS_CLOSER[a] & ~((x.fph == PH_POPLP) & (a == T[")"]))
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
        nfid = xp.where(names_b, tb.after[x.f, x.vt[ar, slot]],
                        xp.where(callee_b, tb.callee[x.f, cnum], tb.ft[x.f, k.ACLASS[a]]))
        cols = x.fb[:, None] + k.LOC
        N[ar[:, None], cols] = xp.where(local[:, None], tb.local9[nfid], N[ar[:, None], cols])
        N[ar, x.fb + F_CALLEE] = xp.where(callee_b, cnum, N[ar, x.fb + F_CALLEE])
        canon_close = close & (a == x.canon)
        list_more = close & (kind == K_LIST) & (a == T[","])
        range_more = close & (kind == K_RANGE) & (a == T[","])
        call_more = canon_close & (kind == K_CALL) & (a == T[","])
        feed = canon_close & (kind <= K_CALL) & ~call_more
        sclose = canon_close & (kind >= K_RET)
        # closing into the parent frame: its operand becomes the result
        feed_t = xp.where(kind == K_PAREN, t, xp.where(kind == K_SUB, T_I,
                                                       xp.where(kind == K_LIST, T_L, x.cret[ar, x.caux])))
        pcols = x.pfb[:, None] + k.LOC
        N[ar[:, None], pcols] = xp.where(feed[:, None], tb.local9[tb.after[x.pf, feed_t]], N[ar[:, None], pcols])

        # --- statement level
        phc = xp.clip(ph, 0, 15)
        sk = xp.where(St, k.SPUSH[phc, a], -1)
        spush = sk >= 0
        atb = St & (ph == P_BOUND)

        # --- frames opened or reopened: (rows, index, kind, aux, arg, empty_ok, rest)
        cases = [
            (paren_b, x.nf, K_PAREN, 0, 0, 0, x.rest_paren),
            (list_b, x.nf, K_LIST, 0, 0, 1, x.rest_list),
            (sub_open, x.nf, K_SUB, 0, 0, 0, x.rest_sub),
            (call_open, x.nf, K_CALL, xp.clip(x.TF[:, F_CALLEE], 0, 4), 0, 0, x.rest_call),
            (list_more, x.i, K_LIST, 0, 0, 0, x.r),
            (range_more, x.i, K_RANGE, 0, x.arg + 1, 0, x.r),
            (call_more, x.i, K_CALL, x.aux, x.arg + 1, 0, x.rest_call_more),
        ]
        s_aux = xp.where(sk == K_ASSIGN_NEW, S[:, H_TARGET], xp.where((sk == K_ASSIGN) | (sk == K_AUG), x.tvt, 0))
        pend = k.PEND[a]
        s_aux = xp.where((sk == K_COND) | (sk == K_COND_ELIF), pend, s_aux)
        cases.append((spush, 0, xp.where(sk == K_COND_ELIF, K_COND, sk), s_aux, 0, 0,
                      x.srest[ar, xp.atleast(sk, 0)]))
        pm = xp.falses(n)
        zeros = xp.full(n, 0)
        p_idx, p_kind, p_aux, p_arg, p_eok = zeros, zeros, zeros, zeros, zeros
        p_rest = xp.full((n, 3), 0)
        for rows, idx, kd, aux, arg, eok, rest in cases:
            pm = pm | rows
            p_idx = xp.where(rows, idx, p_idx)
            p_kind = xp.where(rows, kd, p_kind)
            p_aux = xp.where(rows, aux, p_aux)
            p_arg = xp.where(rows, arg, p_arg)
            p_eok = xp.where(rows, eok, p_eok)
            p_rest = xp.where(rows[:, None], rest, p_rest)
        frame = xp.full((n, F_FIELDS), 0)
        frame[:, F_KIND], frame[:, F_AUX], frame[:, F_ARG], frame[:, F_EMPTY_OK] = p_kind, p_aux, p_arg, p_eok
        frame[:, F_REST_I:F_REST_L + 1] = p_rest
        fcols = OFF_FRAMES + xp.clip(p_idx, 0, MAX_FRAMES - 1)[:, None] * F_FIELDS + k.FR
        N[ar[:, None], fcols] = xp.where(pm[:, None], frame, N[ar[:, None], fcols])

        # --- header fields
        N[:, H_NF] = xp.where(opens, x.nf + 1, xp.where(feed | range_b, x.nf - 1,
                                                         xp.where(sclose, 0, xp.where(spush, 1, x.nf))))
        dedent = atb & (a == V.DEDENT)
        indent = St & (ph == P_INDENT)
        name_stmt = atb & is_name
        sph = xp.where(name_stmt & (x.vt[ar, slot] == T_NONE), P_ASSIGN_EQ, k.SPH[phc, a])
        eph = xp.where(range_b, P_RANGE_LP, xp.where(sclose, k.SCLOSE_PH[x.kc], ph))
        N[:, H_PH] = xp.where(St, sph, eph)
        N[:, H_DONE] = xp.where(atb & (a == V.END), 1, S[:, H_DONE])
        N[:, H_TARGET] = xp.where(name_stmt, a, S[:, H_TARGET])
        N[:, H_PEND_KIND] = xp.where(atb & (pend >= 0), pend, S[:, H_PEND_KIND])
        pend_var = S[:, H_PEND_VAR]
        N[:, H_PEND_VAR] = xp.where(St & (ph == P_FOR_VAR), a, xp.where(indent, 0, pend_var))

        # --- blocks (a copy of the (n, MAX_BLOCKS, B_FIELDS) array, written back at the end)
        B = xp.copy(x.B)
        kind_d, safe_d = x.B[ar, dc, B_KIND], x.B[ar, dc, B_SAFE]
        ret_close = sclose & (kind == K_RET)
        # a statement at a boundary: CHAIN[d] = 0; NONEMPTY[d] = 1 unless elif/else
        stmt_start = atb & (a != V.END) & (a != V.DEDENT)
        B[ar, dc, B_CHAIN] = xp.where(stmt_start, 0, B[ar, dc, B_CHAIN])
        B[ar, dc, B_NONEMPTY] = xp.where(stmt_start & (a != T["elif"]) & (a != T["else"]), 1, B[ar, dc, B_NONEMPTY])
        brk = atb & ((a == T["break"]) | (a == T["continue"]))
        B[ar, dc, B_TERM] = xp.where(brk | ret_close, 1, B[ar, dc, B_TERM])
        B[ar, dc, B_SAFE] = xp.where(ret_close, 1, B[ar, dc, B_SAFE])
        # DEDENT: close block d into d-1
        pd = xp.clip(d - 1, 0, MAX_BLOCKS - 1)
        pcs = x.B[ar, pd, B_CHAIN_SAFE]
        B[ar, pd, B_CHAIN] = xp.where(dedent & ((kind_d == BK_IF) | (kind_d == BK_ELIF)), 1, B[ar, pd, B_CHAIN])
        B[ar, pd, B_CHAIN_SAFE] = xp.where(dedent & (kind_d == BK_IF), safe_d,
                                           xp.where(dedent & (kind_d == BK_ELIF), xp.where(pcs != 0, safe_d, pcs), pcs))
        else_safe = dedent & (kind_d == BK_ELSE) & (pcs != 0) & (safe_d != 0)
        B[ar, pd, B_SAFE] = xp.where(else_safe, 1, B[ar, pd, B_SAFE])
        B[ar, pd, B_TERM] = xp.where(else_safe, 1, B[ar, pd, B_TERM])
        # INDENT: open block d+1
        nd = xp.clip(d + 1, 0, MAX_BLOCKS - 1)
        pend_kind = S[:, H_PEND_KIND]
        newblock = xp.full((n, B_FIELDS), 0)
        newblock[:, B_KIND] = pend_kind
        B[ar, nd] = xp.where(indent[:, None], newblock, B[ar, nd])
        N[:, OFF_BLOCKS:OFF_VARS] = B.reshape(n, MAX_BLOCKS * B_FIELDS)
        N[:, H_DEPTH] = xp.where(dedent, d - 1, xp.where(indent, d + 1, d))
        loops = S[:, H_LOOPS]
        N[:, H_LOOPS] = xp.where(dedent & (kind_d == BK_LOOP), loops - 1,
                                 xp.where(indent & (pend_kind == BK_LOOP), loops + 1, loops))

        # --- names: scoping on DEDENT, a new variable on `v = e` or as a new for-variable
        new_var = sclose & (kind == K_ASSIGN_NEW)
        vt = xp.where(dedent[:, None] & (x.vt != T_NONE) & (x.vdep == d[:, None]), T_NONE, x.vt)
        vdep = xp.copy(x.vdep)
        aslot = xp.clip(x.aux - V.P0, 0, NUM_NAMES - 1)
        vt[ar, aslot] = xp.where(new_var, t, vt[ar, aslot])
        vdep[ar, aslot] = xp.where(new_var, d, vdep[ar, aslot])
        fslot = xp.clip(pend_var - V.P0, 0, NUM_NAMES - 1)
        for_var = indent & (pend_kind == BK_LOOP) & (pend_var != 0) & (x.vt[ar, fslot] == T_NONE)
        vt[ar, fslot] = xp.where(for_var, T_I, vt[ar, fslot])
        vdep[ar, fslot] = xp.where(for_var, d + 1, vdep[ar, fslot])
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
        state = np.atleast_2d(check_states(state))
        if len(state) < self.reference_below:
            return ReferenceGrammar.mask(self, state)
        return self._batched.mask(state)

    def step(self, state: np.ndarray, actions) -> tuple[np.ndarray, np.ndarray]:
        """Apply one action per env. Returns (new state, invalid (n,) bool); an invalid action
        (out of range, masked, or after END) leaves that env unchanged."""
        state = np.atleast_2d(check_states(state))
        if len(state) < self.reference_below:
            return ReferenceGrammar.step(self, state, actions)
        return self._batched.step(state, actions)

    def min_tokens_to_finish(self, state: np.ndarray) -> np.ndarray:
        """(n,) int: tokens (END included) of the canonical completion of each env."""
        return self._batched.min_tokens_to_finish(state)
