// The batched mask automaton of envs/grammar.py (BatchedAutomaton) as scalar per-row code, for
// the host (envs/csrc/grammar_cpu.cpp) and CUDA device code (envs/csrc/grammar_kernels.cu).
//
// A line-by-line port of BatchedAutomaton's array code: Ctx is its _context for one row,
// boundaries/call_rest/rest_*/stmt_rest its helpers, expr_cost/stmt_cost its _eval_expr /
// _eval_stmt for one action, apply its _apply. Comments name the Python they mirror; where the
// Python says xp.where(cond, a, b) over rows, this says cond ? a : b for the row.
//
// Every table (per-fid frame tables, per-variant cost tables, per-grammar parameters, small
// constant arrays) comes from Python at run time (GmTables, int32 arrays in the GmTab order);
// the scalar constants come from the generated grammar_consts.h. No allocation, no recursion,
// no STL, bounded loops: the same code runs in a CUDA thread. Costs are int64 (the numpy code
// computes in int64; REST fields of hand-made rows could overflow int32 sums), and so is all row
// arithmetic (d + 1, nf - 1, TARGET - P0, ...), written back with a wrapping int32 cast as numpy's
// astype(int32), without signed overflow. Every index read from a row is wrapped as numpy's
// (-n..-1 count from the end) where numpy does not clip it, then clamped, so no row, however
// garbled, reads out of bounds; rows where numpy raises IndexError are outside the contract.
#pragma once

#if defined(__CUDACC_RTC__)  // NVRTC has no system headers
typedef unsigned char uint8_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

#include "grammar_consts.h"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define GM_HD __host__ __device__
#else
#define GM_HD
#endif

namespace gm {

typedef long long cost_t;

struct GmTables {
  const int32_t* p[NTAB];  // GmTab order; see envs/grammar_native.py _table_arrays/_param_arrays
  int32_t nfid;            // rows of the per-fid tables
  int32_t ngram;           // grammars (rows of the per-grammar tables); a row's gid is clamped to them
};

GM_HD inline int32_t clampi(int64_t v, int32_t lo, int32_t hi) { return (int32_t)(v < lo ? lo : (v > hi ? hi : v)); }
// numpy's index into an axis of n for the index v: -n..-1 wrap as Python's negative indices do;
// numpy raises IndexError for the rest (outside the contract: clamped here, so nothing reads out of bounds)
GM_HD inline int32_t wrapi(int64_t v, int32_t n) { return clampi(v < 0 && v >= -n ? v + n : v, 0, n - 1); }
// v + dv as numpy's int64 arithmetic written back with astype(int32): wrapping, without signed overflow
GM_HD inline int32_t wrap_add(int32_t v, int32_t dv) { return (int32_t)((uint32_t)v + (uint32_t)dv); }
GM_HD inline cost_t cmin2(cost_t a, cost_t b) { return a < b ? a : b; }
GM_HD inline cost_t cap(cost_t v) { return v < INF ? v : INF; }

// a row's grammar index: -ngram..-1 wrap as numpy's; the ids numpy rejects are clamped, so a bad gid
// reads a real grammar rather than out of bounds
GM_HD inline int32_t gm_gid(const GmTables& T, int64_t g) {
  return wrapi(g, T.ngram);
}

// per-grammar parameters of one row (BatchedAutomaton._Params, row g)
struct Gram {
  int32_t var, ret, ret_cost, max_len;
  const int32_t* cargs;   // (NCALLEES, MAX_ARGS)
  const int32_t* cnargs;  // (NCALLEES,)
  const int32_t* cret;    // (NCALLEES,)
  const int32_t* C;       // this variant's cost table (nfid, 3, 3)
};

GM_HD inline Gram gram(const GmTables& T, int32_t g) {
  Gram r;
  r.var = T.p[TAB_VAR][g];
  r.ret = T.p[TAB_RET][g];
  r.ret_cost = T.p[TAB_RET_COST][g];
  r.max_len = T.p[TAB_MAX_LEN][g];
  r.cargs = T.p[TAB_CARGS] + (int64_t)g * NCALLEES * MAX_ARGS;
  r.cnargs = T.p[TAB_CNARGS] + (int64_t)g * NCALLEES;
  r.cret = T.p[TAB_CRET] + (int64_t)g * NCALLEES;
  r.C = T.p[TAB_C] + (int64_t)r.var * T.nfid * 9;
  return r;
}

// BatchedAutomaton._fid: the frame-state id of a frame row
GM_HD inline int32_t frame_fid(const GmTables& T, const int32_t* F) {
  int64_t callee = F[F_PH] == PH_CALLEE ? F[F_CALLEE] : 0;
  int64_t pack = (int64_t)F[F_PH] * KEY_M0 + (int64_t)F[F_OR] * KEY_M1 + (int64_t)F[F_AND] * KEY_M2 +
                 (int64_t)F[F_NOT] * KEY_M3 + (int64_t)F[F_CMP] * KEY_M4 + (int64_t)F[F_SUM] * KEY_M5 +
                 (int64_t)F[F_TERM] * KEY_M6 + (int64_t)F[F_NEG] * KEY_M7 + (int64_t)F[F_CUR] * KEY_M8 +
                 (int64_t)F[F_EMPTY_OK] * KEY_M_EOK + callee * KEY_M_CALLEE;
  pack = pack < 0 ? 0 : (pack > KEY_SPACE - 1 ? KEY_SPACE - 1 : pack);
  return T.p[TAB_PACK2FID][pack];
}

// BatchedAutomaton._cmin: min(INF, min_t C[fid, push, t] + rest_t)
GM_HD inline cost_t cmin(const Gram& g, int32_t fid, int32_t push, const cost_t* rest) {
  const int32_t* c = g.C + ((int64_t)fid * 3 + push) * 3;
  return cap(cmin2(cmin2(c[0] + rest[0], c[1] + rest[1]), c[2] + rest[2]));
}

// small lookups (types read from a row index as numpy's: -4..-1 wrap; others, which numpy rejects, clamp)
GM_HD inline int32_t after_of(const GmTables& T, int32_t fid, int32_t t) {
  return T.p[TAB_AFTER][(int64_t)fid * 4 + wrapi(t, 4)];
}

struct Ctx {
  const int32_t* S;
  Gram g;
  int32_t length, nf, ph, d, i, fb, pi, pfb, f, pf, kind, aux, arg, push, push_next, push_parent, fph;
  bool done, before, after, incallee;
  cost_t r[3], pr[3];
  const int32_t* TF;
  const int32_t* PF;
  const int32_t* B;  // (MAX_BLOCKS, B_FIELDS)
  int32_t dc;
  const int32_t* bd;
  const int32_t* vars;  // (NUM_NAMES, 2): type, declaring depth (read in place: no per-thread copy)
  bool any_for_ok, empty_d;
  cost_t bS, b_ret, b_ded, b_ind, bS1;
  int32_t tvt, t, kc, caux, canon;
  cost_t rt;
};

GM_HD inline int32_t vt_of(const Ctx& x, int32_t j) { return x.vars[2 * j]; }  // declared type of name slot j

// for_ok: slot j can be a for-variable (an int, or an undeclared local)
GM_HD inline bool for_ok(const GmTables& T, const Ctx& x, int32_t j) {
  int32_t vt = vt_of(x, j);
  return vt == T_I || (vt == T_NONE && !T.p[TAB_IS_PARAM_SLOT][j]);
}

// _boundaries, one of its four variants: the boundary cost of blocks (kind, cs, safe) at depth D
GM_HD inline cost_t boundary(const int32_t* kind, const int32_t* cs, const int32_t* safe, int64_t D, int32_t NE,
                             int32_t rc) {
  bool reach = false;
  int32_t P = 1;  // cumulative product of p_k = (kind[k] == ELSE) & (cs[k-1] != 0)
  for (int32_t j = 0; j < MAX_BLOCKS; j++) {
    if (j > 0) P = P && (kind[j] == BK_ELSE) && (cs[j - 1] != 0);
    if (safe[j] != 0 && P != 0 && j <= D) reach = true;
  }
  return (cost_t)((D > 0 && NE == 0) ? 2 : 0) + D + (reach ? 0 : 2 + rc) + 1;
}

GM_HD inline void boundaries(Ctx& x) {
  int32_t kind[MAX_BLOCKS], cs[MAX_BLOCKS], safe[MAX_BLOCKS], s2[MAX_BLOCKS];
  for (int32_t j = 0; j < MAX_BLOCKS; j++) {
    kind[j] = x.B[j * B_FIELDS + B_KIND];
    cs[j] = x.B[j * B_FIELDS + B_CHAIN_SAFE];
    safe[j] = x.B[j * B_FIELDS + B_SAFE];
  }
  int32_t rc = x.g.ret_cost, dc = x.dc;
  int64_t d = x.d;  // d - 1, d + 1 in int64, as numpy's
  x.bS = boundary(kind, cs, safe, d, x.bd[B_NONEMPTY], rc);
  for (int32_t j = 0; j < MAX_BLOCKS; j++) s2[j] = safe[j];  // return: SAFE[d] = 1
  s2[dc] = 1;
  x.b_ret = boundary(kind, cs, s2, d, 1, rc);
  int32_t pd = clampi(d - 1, 0, MAX_BLOCKS - 1);  // DEDENT: close block d into d-1
  for (int32_t j = 0; j < MAX_BLOCKS; j++) s2[j] = safe[j];
  s2[pd] = (kind[dc] == BK_ELSE && cs[pd] != 0 && safe[dc] != 0) ? 1 : safe[pd];
  x.b_ded = boundary(kind, cs, s2, d - 1, x.B[pd * B_FIELDS + B_NONEMPTY], rc);
  int32_t nd = clampi(d + 1, 0, MAX_BLOCKS - 1);  // INDENT: open block d+1 = [PEND_KIND, 0...]
  for (int32_t j = 0; j < MAX_BLOCKS; j++) s2[j] = safe[j];
  s2[nd] = 0;
  int32_t k2 = kind[nd], c2 = cs[nd];
  kind[nd] = x.S[H_PEND_KIND];
  cs[nd] = 0;
  x.b_ind = boundary(kind, cs, s2, d + 1, 0, rc);
  kind[nd] = k2;
  cs[nd] = c2;
}

GM_HD inline void context(const GmTables& T, const int32_t* S, int32_t gid, Ctx& x) {
  x.S = S;
  x.g = gram(T, gid);
  x.length = S[H_LEN];
  x.done = S[H_DONE] != 0;
  x.nf = S[H_NF];
  x.ph = S[H_PH];
  x.d = S[H_DEPTH];
  x.i = clampi((int64_t)x.nf - 1, 0, MAX_FRAMES - 1);
  x.fb = OFF_FRAMES + x.i * F_FIELDS;
  x.TF = S + x.fb;
  x.f = frame_fid(T, x.TF);
  for (int k = 0; k < 3; k++) x.r[k] = x.TF[F_REST_I + k];
  x.kind = x.TF[F_KIND];
  x.aux = x.TF[F_AUX];
  x.arg = x.TF[F_ARG];
  x.pi = clampi((int64_t)x.nf - 2, 0, MAX_FRAMES - 1);
  x.pfb = OFF_FRAMES + x.pi * F_FIELDS;
  x.PF = S + x.pfb;
  x.pf = frame_fid(T, x.PF);
  for (int k = 0; k < 3; k++) x.pr[k] = x.PF[F_REST_I + k];
  const int32_t* PUSH = T.p[TAB_PUSH];
  x.push = PUSH[x.i];
  x.push_next = PUSH[clampi(x.nf, 0, MAX_FRAMES)];
  x.push_parent = PUSH[x.pi];
  x.fph = T.p[TAB_PH][x.f];
  x.before = x.fph == PH_BEFORE;
  x.after = x.fph == PH_AFTER;
  x.incallee = x.fph == PH_CALLEE;
  x.B = S + OFF_BLOCKS;
  x.dc = clampi(x.d, 0, MAX_BLOCKS - 1);
  x.bd = x.B + x.dc * B_FIELDS;
  x.vars = S + OFF_VARS;
  x.any_for_ok = false;
  for (int32_t j = 0; j < NUM_NAMES; j++) x.any_for_ok = x.any_for_ok || for_ok(T, x, j);
  x.empty_d = x.d > 0 && x.bd[B_NONEMPTY] == 0;
  boundaries(x);
  x.bS1 = x.bS - (x.empty_d ? 2 : 0);
  x.tvt = vt_of(x, clampi((int64_t)S[H_TARGET] - P0, 0, NUM_NAMES - 1));
  int32_t at = T.p[TAB_AFTER_T][x.f];
  x.t = at > 0 ? at : ((T.p[TAB_EMPTY_CLOSE][x.f] && x.kind == K_LIST) ? T_I : T_NONE);
  x.rt = x.r[x.t - 1 > 0 ? x.t - 1 : 0];
  x.kc = clampi(x.kind, 0, 13);
  x.caux = clampi(x.aux, 0, 4);
  x.canon = (x.kc == K_CALL && x.arg != x.g.cnargs[x.caux] - 1) ? TOK_COMMA : T.p[TAB_CANON][x.kc];
}

// _call_rest: REST of the K_CALL frame for argument `arg` of `callee` at push depth `push`,
// where X is the cost once the call's result feeds the parent
GM_HD inline void call_rest(const GmTables& T, const Ctx& x, int32_t callee, int64_t arg, cost_t X, int32_t push,
                            cost_t* out) {
  const int32_t* args = x.g.cargs + callee * MAX_ARGS;
  int32_t nargs = x.g.cnargs[callee];
  const int32_t* c0 = x.g.C + ((int64_t)T.p[TAB_PACK2FID][0] * 3 + push) * 3;  // the fresh frame
  cost_t nxt[3] = {INF, INF, INF};
  out[0] = out[1] = out[2] = INF;
  for (int32_t j = MAX_ARGS - 1; j >= 0; j--) {
    cost_t cont = cap(1 + cap(cmin2(cmin2(c0[0] + nxt[0], c0[1] + nxt[1]), c0[2] + nxt[2])));
    cost_t val = nargs - 1 == j ? cap(1 + X) : cont;
    for (int32_t t = 0; t < 3; t++) {
      nxt[t] = (args[j] == t + 1 && nargs > j) ? val : INF;
      if (arg == j) out[t] = nxt[t];
    }
  }
}

// _pushes, one frame at a time (each computed only where an action needs it): the REST of each
// frame an expression token can open or reopen on the top frame
GM_HD inline void rest_paren(const GmTables& T, const Ctx& x, cost_t* out) {
  for (int32_t t = 0; t < 3; t++) out[t] = cap(1 + cmin(x.g, after_of(T, x.f, t + 1), x.push, x.r));
}

GM_HD inline void rest_list(const GmTables& T, const Ctx& x, cost_t* out) {  // a list literal: [feed_L, INF, INF]
  out[0] = cap(1 + cmin(x.g, after_of(T, x.f, T_L), x.push, x.r));
  out[1] = out[2] = INF;
}

GM_HD inline void rest_sub(const GmTables& T, const Ctx& x, cost_t* out) {  // a subscript: [feed_I, INF, INF]
  out[0] = cap(1 + cmin(x.g, after_of(T, x.f, T_I), x.push, x.r));
  out[1] = out[2] = INF;
}

GM_HD inline void rest_call(const GmTables& T, const Ctx& x, cost_t* out) {  // the call's `(`: argument 0
  int32_t c = clampi(x.TF[F_CALLEE], 0, 4);
  cost_t X = cmin(x.g, after_of(T, x.f, x.g.cret[c]), x.push, x.r);
  call_rest(T, x, c, 0, X, x.push_next, out);
}

GM_HD inline void rest_call_more(const GmTables& T, const Ctx& x, cost_t* out) {  // `,`: the next argument
  cost_t Xp = cmin(x.g, after_of(T, x.pf, x.g.cret[x.caux]), x.push_parent, x.pr);
  call_rest(T, x, x.caux, (int64_t)x.arg + 1, Xp, x.push, out);
}

// _stmt_frames, for one kind k (K_COND_ELIF: an elif): the REST of the statement frame opened
// from the statement state; returns the cost once it is open
GM_HD inline cost_t stmt_rest(const GmTables& T, const Ctx& x, int32_t k, cost_t* rest) {
  cost_t bsel = k == K_RET ? x.b_ret : (k == K_COND ? x.bS1 : x.bS);
  cost_t x0 = 1 + T.p[TAB_PTAIL][k] + bsel;
  for (int32_t t = 0; t < 3; t++) {
    bool ok = T.p[TAB_PTYPES][k * 3 + t] != 0;
    if (k == K_RET) ok = t + 1 == x.g.ret;
    if (k == K_ASSIGN || k == K_AUG) ok = t + 1 == x.tvt;
    rest[t] = ok ? x0 : INF;
  }
  return cmin(x.g, T.p[TAB_PACK2FID][0], T.p[TAB_PUSH][0], rest);
}

// _eval_expr for action a (0 <= a < VOCAB); base = cmin(ft[f, ACLASS[a]], push, r)
GM_HD inline cost_t expr_cost(const GmTables& T, const Ctx& x, int32_t a, cost_t base) {
  const int32_t fresh0 = T.p[TAB_PACK2FID][0];
  if (a >= P0 && a < P0 + NUM_NAMES)  // names: an operand of the declared type
    return x.before ? cmin(x.g, after_of(T, x.f, vt_of(x, a - P0)), x.push, x.r) : INF;
  if ((a >= TOK_LEN && a < TOK_LEN + 4) || a == FN) {  // callees: enter PH_CALLEE
    int32_t c = a == FN ? 4 : a - TOK_LEN;
    return (x.before && x.nf < MAX_FRAMES - 1) ? cmin(x.g, T.p[TAB_CALLEE][(int64_t)x.f * NCALLEES + c], x.push, x.r)
                                               : INF;
  }
  if (a == TOK_RANGE)  // `for v in range(`: the iterable frame gives way to the range arguments
    return (x.before && x.kind == K_FORITER && T.p[TAB_FRESH][x.f]) ? T.p[TAB_TAILA][P_RANGE_LP] + x.bS : INF;
  cost_t rest[3];
  if (a == TOK_LPAR) {  // ( at PH_BEFORE, the call's ( at PH_CALLEE
    if (x.before) {
      if (x.nf >= MAX_FRAMES - 1) return INF;
      rest_paren(T, x, rest);
      return cmin(x.g, fresh0, x.push_next, rest);
    }
    if (!x.incallee) return base;
    rest_call(T, x, rest);
    return cmin(x.g, fresh0, x.push_next, rest);
  }
  if (a == TOK_LBRK) {  // a list literal at PH_BEFORE, a subscript after a list
    if (x.before) {
      if (x.nf >= MAX_FRAMES) return INF;
      rest_list(T, x, rest);
      return cmin(x.g, T.p[TAB_PACK2FID][KEY_M_EOK], x.push_next, rest);
    }
    if (!(x.after && T.p[TAB_CUR][x.f] == T_L && x.nf < MAX_FRAMES - 1)) return INF;
    rest_sub(T, x, rest);
    return cmin(x.g, fresh0, x.push_next, rest);
  }
  if (T.p[TAB_IS_CLOSER][a]) {  // the canonical closer costs REST_t - 1; `,` continues a list or range
    cost_t v = (x.canon == a && x.t > 0 && x.rt < INF) ? x.rt - 1 : INF;
    if (a == TOK_COMMA) {
      bool again = (x.kind == K_LIST && x.t == T_I && !(T.p[TAB_EOK][x.f] != 0 && x.before)) ||
                   (x.kind == K_RANGE && x.arg < 2 && x.t == T_I);
      if (again) v = cmin(x.g, fresh0, x.push, x.r);
    }
    if (a == TOK_RPAR && x.fph == PH_POPLP) v = base;
    return v;
  }
  return base;
}

// _eval_stmt for action a: the cost at statement level
GM_HD inline cost_t stmt_cost(const GmTables& T, const Ctx& x, int32_t a) {
  int32_t phA = clampi(x.ph, 0, 15);
  int32_t sk = T.p[TAB_SPUSH][phA * VOCAB + a];
  int32_t tail = T.p[TAB_STAIL][phA * VOCAB + a];
  cost_t cost;
  if (sk >= 0) {
    cost_t rest[3];
    cost = stmt_rest(T, x, sk, rest);
  } else {
    cost = tail >= 0 ? tail + (T.p[TAB_SB1][phA * VOCAB + a] ? x.bS1 : x.bS) : INF;
  }
  bool atb = x.ph == P_BOUND;
  bool free_ = atb && x.bd[B_TERM] == 0;  // a statement may start here
  bool chain = free_ && x.bd[B_CHAIN] != 0;
  bool room = (int64_t)x.d + 1 < MAX_BLOCKS;
  bool loops = x.S[H_LOOPS] != 0;
  if (a == END) return (atb && x.d == 0 && x.B[B_SAFE] != 0) ? 0 : INF;
  if (a == DEDENT) return (atb && x.d > 0 && x.bd[B_NONEMPTY] != 0) ? x.b_ded : INF;
  if (a == INDENT) return x.ph == P_INDENT ? x.b_ind : INF;
  bool cond = true;
  if (a == TOK_ELIF || a == TOK_ELSE) cond = chain;
  if (a == TOK_RETURN || a == TOK_PASS) cond = free_;
  if (a == TOK_IF || a == TOK_WHILE) cond = free_ && room;
  if (a == TOK_FOR) cond = free_ && room && x.any_for_ok;
  if (a == TOK_BREAK || a == TOK_CONTINUE) cond = free_ && loops;
  if (!cond) return INF;
  if (a >= P0 && a < P0 + NUM_NAMES) {
    int32_t j = a - P0, vt = vt_of(x, j);
    if (atb) {
      bool param_slot = T.p[TAB_IS_PARAM_SLOT][j] != 0;
      if (!free_ || (vt == T_NONE && param_slot)) return INF;
      return (vt == T_NONE ? T.p[TAB_TAILA][P_ASSIGN_EQ] : 2 + T.p[TAB_CONSTA][wrapi(vt, 4)]) + x.bS1;
    }
    return (x.ph == P_FOR_VAR && for_ok(T, x, j)) ? T.p[TAB_TAILA][P_FOR_IN] + x.bS : INF;
  }
  if (x.ph == P_TARGET) {
    if (T.p[TAB_IS_AUG][a]) {
      bool okt = a == TOK_PLUSEQ ? (x.tvt == T_I || x.tvt == T_L) : x.tvt == T_I;
      if (!okt) return INF;
    }
    if ((a == TOK_LBRK || a == TOK_DOT) && x.tvt != T_L) return INF;
  }
  return cost;
}

// _eval: the cost of the canonical completion after action a (0 <= a < VOCAB)
GM_HD inline cost_t action_cost(const GmTables& T, const Ctx& x, int32_t a) {
  if (x.nf > 0) {
    int32_t nfid = T.p[TAB_FT][(int64_t)x.f * NCLS + T.p[TAB_ACLASS][a]];
    return expr_cost(T, x, a, cmin(x.g, nfid, x.push, x.r));
  }
  return stmt_cost(T, x, a);
}

// mask: bit a of out (3 words) set where action a is allowed
GM_HD inline void mask_row(const GmTables& T, const int32_t* S, int32_t gid, uint32_t* out) {
  out[0] = out[1] = out[2] = 0;
  Ctx x;
  context(T, S, gid, x);
  if (x.done) return;
  cost_t budget = (cost_t)x.g.max_len - x.length - 1;
  if (x.nf > 0) {
    cost_t cls[NCLS];  // the frame-local cost of each token class (_ftrans depends on the class only)
    for (int32_t c = 0; c < NCLS; c++) cls[c] = cmin(x.g, T.p[TAB_FT][(int64_t)x.f * NCLS + c], x.push, x.r);
    for (int32_t a = 0; a < VOCAB; a++)
      if (expr_cost(T, x, a, cls[T.p[TAB_ACLASS][a]]) <= budget) out[a >> 5] |= 1u << (a & 31);
  } else {
    for (int32_t a = 0; a < VOCAB; a++)
      if (stmt_cost(T, x, a) <= budget) out[a >> 5] |= 1u << (a & 31);
  }
}

// min_tokens_to_finish
GM_HD inline cost_t min_tokens_row(const GmTables& T, const int32_t* S, int32_t gid) {
  Ctx x;
  context(T, S, gid, x);
  if (x.done) return 0;
  if (x.nf > 0) return cmin(x.g, x.f, x.push, x.r);
  int32_t ph = x.ph;
  cost_t tail = ph == P_BOUND ? 0
                : (ph == P_TARGET ? 2 + T.p[TAB_CONSTA][wrapi(x.tvt, 4)] : T.p[TAB_TAILA][clampi(ph, 0, 15)]);
  return (ph == P_FOR_VAR && !x.any_for_ok) ? INF : tail + x.bS;
}

// _apply: the row after action a (valid by assumption; 0 <= a < VOCAB), written to N (a copy of S)
GM_HD inline void apply(const GmTables& T, const Ctx& x, int32_t a, int32_t* N) {
  const int32_t* S = x.S;
  bool E = x.nf > 0, St = !E;
  int32_t ph = x.ph, d = x.d, dc = x.dc, nf = x.nf, kind = x.kind, t = x.t;
  bool is_name = T.p[TAB_IS_NAME][a] != 0;
  int32_t slot = clampi(a - P0, 0, NUM_NAMES - 1);
  int32_t cnum = T.p[TAB_CALLEE_NUM][a];
  bool is_callee = cnum >= 0;
  cnum = cnum < 0 ? 0 : cnum;
  bool before = x.before, after = x.after;

  // --- expression level
  bool close = E && T.p[TAB_IS_CLOSER][a] && !(x.fph == PH_POPLP && a == TOK_RPAR);
  bool names_b = E && before && is_name;
  bool range_b = E && before && a == TOK_RANGE;
  bool callee_b = E && before && is_callee;
  bool paren_b = E && before && a == TOK_LPAR;
  bool list_b = E && before && a == TOK_LBRK;
  bool call_open = E && x.incallee && a == TOK_LPAR;
  bool sub_open = E && after && a == TOK_LBRK;
  bool opens = paren_b || list_b || call_open || sub_open;
  bool local = E && !(close || range_b || opens);
  if (local) {  // frame-local change of the top frame (F_PH..F_CUR)
    int32_t nfid = names_b ? after_of(T, x.f, vt_of(x, slot))
                           : (callee_b ? T.p[TAB_CALLEE][(int64_t)x.f * NCALLEES + cnum]
                                       : T.p[TAB_FT][(int64_t)x.f * NCLS + T.p[TAB_ACLASS][a]]);
    for (int32_t k = 0; k < 9; k++) N[x.fb + F_PH + k] = T.p[TAB_LOCAL9][(int64_t)nfid * 9 + k];
  }
  if (callee_b) N[x.fb + F_CALLEE] = cnum;
  bool canon_close = close && a == x.canon;
  bool list_more = close && kind == K_LIST && a == TOK_COMMA;
  bool range_more = close && kind == K_RANGE && a == TOK_COMMA;
  bool call_more = canon_close && kind == K_CALL && a == TOK_COMMA;
  bool feed = canon_close && kind <= K_CALL && !call_more;
  bool sclose = canon_close && kind >= K_RET;
  if (feed) {  // closing into the parent frame: its operand becomes the result
    int32_t feed_t = kind == K_PAREN ? t : (kind == K_SUB ? T_I : (kind == K_LIST ? T_L : x.g.cret[x.caux]));
    int32_t nfid = after_of(T, x.pf, feed_t);
    for (int32_t k = 0; k < 9; k++) N[x.pfb + F_PH + k] = T.p[TAB_LOCAL9][(int64_t)nfid * 9 + k];
  }

  // --- statement level
  int32_t phc = clampi(ph, 0, 15);
  int32_t sk = St ? T.p[TAB_SPUSH][phc * VOCAB + a] : -1;
  bool spush = sk >= 0;
  bool atb = St && ph == P_BOUND;
  int32_t pend = T.p[TAB_PEND][a];

  // --- a frame opened or reopened (the last matching case of the Python's list wins)
  bool pm = true;
  int32_t p_idx = 0, p_kind = 0, p_aux = 0, p_arg = 0, p_eok = 0;
  cost_t p_rest[3];
  if (spush) {
    int32_t s_aux = sk == K_ASSIGN_NEW ? S[H_TARGET] : ((sk == K_ASSIGN || sk == K_AUG) ? x.tvt : 0);
    if (sk == K_COND || sk == K_COND_ELIF) s_aux = pend;
    stmt_rest(T, x, sk, p_rest);
    p_idx = 0, p_kind = sk == K_COND_ELIF ? K_COND : sk, p_aux = s_aux;
  } else if (call_more) {
    rest_call_more(T, x, p_rest);
    p_idx = x.i, p_kind = K_CALL, p_aux = x.aux, p_arg = wrap_add(x.arg, 1);
  } else if (range_more || list_more) {
    for (int32_t k = 0; k < 3; k++) p_rest[k] = x.r[k];
    p_idx = x.i, p_kind = range_more ? K_RANGE : K_LIST, p_arg = range_more ? wrap_add(x.arg, 1) : 0;
  } else if (call_open) {
    rest_call(T, x, p_rest);
    p_idx = nf, p_kind = K_CALL, p_aux = clampi(x.TF[F_CALLEE], 0, 4);
  } else if (sub_open) {
    rest_sub(T, x, p_rest);
    p_idx = nf, p_kind = K_SUB;
  } else if (list_b) {
    rest_list(T, x, p_rest);
    p_idx = nf, p_kind = K_LIST, p_eok = 1;
  } else if (paren_b) {
    rest_paren(T, x, p_rest);
    p_idx = nf, p_kind = K_PAREN;
  } else {
    pm = false;
  }
  if (pm) {
    int32_t* F = N + OFF_FRAMES + clampi(p_idx, 0, MAX_FRAMES - 1) * F_FIELDS;
    for (int32_t k = 0; k < F_FIELDS; k++) F[k] = 0;
    F[F_KIND] = p_kind;
    F[F_AUX] = p_aux;
    F[F_ARG] = p_arg;
    F[F_EMPTY_OK] = p_eok;
    for (int32_t k = 0; k < 3; k++) F[F_REST_I + k] = (int32_t)p_rest[k];
  }

  // --- header fields
  N[H_NF] = opens ? wrap_add(nf, 1) : ((feed || range_b) ? wrap_add(nf, -1) : (sclose ? 0 : (spush ? 1 : nf)));
  bool dedent = atb && a == DEDENT;
  bool indent = St && ph == P_INDENT;
  bool name_stmt = atb && is_name;
  int32_t sph = (name_stmt && vt_of(x, slot) == T_NONE) ? P_ASSIGN_EQ : T.p[TAB_SPH][phc * VOCAB + a];
  int32_t eph = range_b ? P_RANGE_LP : (sclose ? T.p[TAB_SCLOSE_PH][x.kc] : ph);
  N[H_PH] = St ? sph : eph;
  if (atb && a == END) N[H_DONE] = 1;
  if (name_stmt) N[H_TARGET] = a;
  if (atb && pend >= 0) N[H_PEND_KIND] = pend;
  int32_t pend_var = S[H_PEND_VAR];
  N[H_PEND_VAR] = (St && ph == P_FOR_VAR) ? a : (indent ? 0 : pend_var);

  // --- blocks (read from S, written to N)
  int32_t* B = N + OFF_BLOCKS;
  const int32_t* B0 = x.B;
  int32_t kind_d = B0[dc * B_FIELDS + B_KIND], safe_d = B0[dc * B_FIELDS + B_SAFE];
  bool ret_close = sclose && kind == K_RET;
  bool stmt_start = atb && a != END && a != DEDENT;  // CHAIN[d] = 0; NONEMPTY[d] = 1 unless elif/else
  if (stmt_start) B[dc * B_FIELDS + B_CHAIN] = 0;
  if (stmt_start && a != TOK_ELIF && a != TOK_ELSE) B[dc * B_FIELDS + B_NONEMPTY] = 1;
  bool brk = atb && (a == TOK_BREAK || a == TOK_CONTINUE);
  if (brk || ret_close) B[dc * B_FIELDS + B_TERM] = 1;
  if (ret_close) B[dc * B_FIELDS + B_SAFE] = 1;
  int32_t pd = clampi((int64_t)d - 1, 0, MAX_BLOCKS - 1);  // DEDENT: close block d into d-1
  int32_t pcs = B0[pd * B_FIELDS + B_CHAIN_SAFE];
  if (dedent && (kind_d == BK_IF || kind_d == BK_ELIF)) B[pd * B_FIELDS + B_CHAIN] = 1;
  B[pd * B_FIELDS + B_CHAIN_SAFE] =
      (dedent && kind_d == BK_IF) ? safe_d : ((dedent && kind_d == BK_ELIF) ? (pcs != 0 ? safe_d : pcs) : pcs);
  bool else_safe = dedent && kind_d == BK_ELSE && pcs != 0 && safe_d != 0;
  if (else_safe) B[pd * B_FIELDS + B_SAFE] = 1, B[pd * B_FIELDS + B_TERM] = 1;
  int32_t nd = clampi((int64_t)d + 1, 0, MAX_BLOCKS - 1);  // INDENT: open block d+1
  int32_t pend_kind = S[H_PEND_KIND];
  if (indent) {
    for (int32_t k = 0; k < B_FIELDS; k++) B[nd * B_FIELDS + k] = 0;
    B[nd * B_FIELDS + B_KIND] = pend_kind;
  }
  N[H_DEPTH] = dedent ? wrap_add(d, -1) : (indent ? wrap_add(d, 1) : d);
  int32_t loops = S[H_LOOPS];
  N[H_LOOPS] = (dedent && kind_d == BK_LOOP) ? wrap_add(loops, -1)
                                             : ((indent && pend_kind == BK_LOOP) ? wrap_add(loops, 1) : loops);

  // --- names: scoping on DEDENT, a new variable on `v = e` or as a new for-variable
  int32_t* vars = N + OFF_VARS;  // N's vars still equal S's (x.vars) here
  if (dedent)
    for (int32_t j = 0; j < NUM_NAMES; j++)
      if (vt_of(x, j) != T_NONE && x.vars[2 * j + 1] == d) vars[2 * j] = T_NONE;
  if (sclose && kind == K_ASSIGN_NEW) {
    int32_t aslot = clampi((int64_t)x.aux - P0, 0, NUM_NAMES - 1);
    vars[2 * aslot] = t;
    vars[2 * aslot + 1] = d;
  }
  int32_t fslot = clampi((int64_t)pend_var - P0, 0, NUM_NAMES - 1);
  if (indent && pend_kind == BK_LOOP && pend_var != 0 && vt_of(x, fslot) == T_NONE) {
    vars[2 * fslot] = T_I;
    vars[2 * fslot + 1] = wrap_add(d, 1);
  }
}

// step: N = the row after action, or S where it is invalid (returns invalid). copied: N already
// holds a copy of S (the CUDA kernel copies a block's rows cooperatively, coalesced).
GM_HD inline bool step_row(const GmTables& T, const int32_t* S, int64_t action, int32_t gid, int32_t* N,
                           bool copied = false) {
  if (!copied)
    for (int32_t k = 0; k < STATE_SIZE; k++) N[k] = S[k];
  bool in_range = action >= 0 && action < VOCAB;
  int32_t a = in_range ? (int32_t)action : 0;
  Ctx x;
  context(T, S, gid, x);
  if (!in_range || x.done) return true;
  if (action_cost(T, x, a) > (cost_t)x.g.max_len - x.length - 1) return true;
  apply(T, x, a, N);
  N[H_LEN] = wrap_add(N[H_LEN], 1);
  return false;
}

// vramgym.envs.vector.hash_tasks_keyed for one env: the task of its episode from its key (32
// bits, hash_keys) and episode number; the same int64 arithmetic (products below 2**59).
GM_HD inline int64_t mix32(int64_t x) {
  x = (((x >> 16) ^ x) * 0x45D9F3B) & 0xFFFFFFFFLL;
  x = (((x >> 16) ^ x) * 0x45D9F3B) & 0xFFFFFFFFLL;
  return (x >> 16) ^ x;
}
GM_HD inline int64_t hashed_task(int64_t key, int64_t episode, int64_t n_tasks) {
  return mix32(key ^ (episode & 0xFFFFFFFFLL)) % n_tasks;
}

// The token env's step with its autoreset for one row, in place (SynthesisCore._step_tokens
// without the scoring; envs/synthesis.py): task, toks (L), length and row (STATE_SIZE) are the
// row's state. A restart row takes no step: with a new task (has_new) it starts an episode on
// new_task, else it is left as it is. gid(t) is the grammar of task id t (the CPU library counts
// the ids out of range, the GPU's clamps them). Out: bad (an invalid action: out of range, masked,
// or after the end; the row unchanged), term (END taken, or bad), trunc (the length limit reached
// without END), done (the program is scored now), body_len.
struct EnvStep {
  uint8_t bad, term, trunc, done;
  int64_t body_len;
};
template <class Gid>
GM_HD inline EnvStep env_step_row(const GmTables& T, int64_t* task, int64_t* toks, int64_t* length, int32_t* row,
                                  int32_t L, int64_t a, bool restart, bool has_new, int64_t new_task,
                                  const int32_t* init, Gid gid) {
  EnvStep o = {0, 0, 0, 0, *length};
  if (restart) {
    if (!has_new) return o;
    const int32_t g = gid(new_task);
    *task = new_task;
    for (int32_t j = 0; j < L; j++) toks[j] = END;
    *length = o.body_len = 0;
    const int32_t* from = init + (int64_t)g * STATE_SIZE;
    for (int32_t k = 0; k < STATE_SIZE; k++) row[k] = from[k];
    return o;
  }
  int32_t next[STATE_SIZE];  // (step_row reads the row while it writes the next one)
  if (step_row(T, row, a, gid(*task), next)) {
    o.bad = o.term = 1;
    return o;
  }
  for (int32_t k = 0; k < STATE_SIZE; k++) row[k] = next[k];
  const bool finished = a == END;
  int64_t len = *length;
  if (len < L) {  // (as the torch ops: a length past the tokens writes nothing, one below 0 too)
    if (len >= 0) toks[len] = a;
    *length = ++len;
  }
  o.trunc = !finished && len >= L;
  o.term = finished;
  o.done = finished || o.trunc;
  o.body_len = len - finished;
  return o;
}

}  // namespace gm
