// A lockstep interpreter for the CPU: one program on up to 32 inputs ("lanes") at once, so the
// cost of decoding and dispatching an instruction is paid once per lane group, not per input.
// This is the layout that ANCHORS.md recommends for the GPU (one program per warp, inputs
// across the lanes), emulated in software: lanes that branch differently split into groups,
// and groups that reach the same point with the same frame state merge again. Scheduling runs
// the deepest group first, then the lowest pc, so the then/else halves of an `if` and the
// lanes that leave a loop early wait at the join point for the others (min-PC reconvergence).
//
// Every lane computes exactly what vg::run computes for it alone (status, value, steps and
// list contents): the scalar interpreter is this one's oracle in the tests.
#pragma once
#include <atomic>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include "fuse.h"
#include "vm.h"

namespace vg {

constexpr int LANES = 32;

struct LaneGroup {
  uint32_t mask;  // lanes in this group
  int32_t pc, sp, base, obase, depth;
  int32_t pending;  // steps executed by every lane of the group since the last flush
  int32_t cyc;      // vm.h's cycle check: the pc after the backward JUMP that every lane took last
                    // with nothing written since, or -1 (forks copy it; merges keep it if equal)
  Frame* frames;    // [max_depth], this group's call frames
};

// Scratch memory for one program on up to LANES inputs. The caller owns every array.
struct LaneState {
  int32_t* stack;        // [stack_size * LANES], slot-major: slot s of lane l is stack[s * LANES + l]
  Workspace lane[LANES];  // per-lane lists and heap (their stack and frames are unused)
  Frame* frame_pool;     // [LANES * max_depth]
  Frame* free_frames[LANES];
  int32_t nfree;
  LaneGroup groups[LANES];
  int32_t ngroups;
  int32_t steps[LANES];
};

// Optional speedups of run_lanes, all nullable (null: plain lockstep steps only).
struct LaneFast {
  Fused* fx;              // [len] superinstructions of the program (fuse.h)
  uint8_t* xop;           // [len] the scalar interpreter's dispatch codes (fuse.h)
  int32_t* solo_stack;    // [stack_size] and [max_depth]: where a lane that runs alone goes on with
  Frame* solo_frames;     // the scalar interpreter
  uint8_t* target;        // lazy: [len + 1] scratch for jump targets; else unused
  int32_t lazy;           // 0: fx, xop hold the whole translation. Else they are scratch, and
                          // translation (pc by pc, as reached) starts after lazy - 1 instructions:
                          // short runs of long programs would spend more on it than they save
};

// A group of at most SOLO_LANES lanes that has run SOLO_AFTER instructions without meeting
// another group (a loop that the other lanes have left) finishes on the scalar interpreter:
// a lockstep instruction costs about as much for 1 lane as for 32.
#ifndef VG_SOLO_LANES
#define VG_SOLO_LANES 4
#define VG_SOLO_AFTER 48
#endif
constexpr int32_t SOLO_LANES = VG_SOLO_LANES, SOLO_AFTER = VG_SOLO_AFTER;

namespace lanes_detail {

// The lane helpers are always inlined: run_lanes_body is compiled for x86-64-v3 too (below), and
// a helper that GCC leaves out of line (the body is too big for its inlining limits) runs the
// baseline build's code in both, through a call: floor_divmod_const alone made bench_cpu's
// corpus 1.7x slower that way (sessions 29-30; fizz_sum 3.2x).
#define VG_LANE_INLINE __attribute__((always_inline)) inline

inline int32_t ctz(uint32_t m) { return __builtin_ctz(m); }

// Bit l set where v[l] != 0, for LANES values.
VG_LANE_INLINE uint32_t nonzero_mask(const int32_t* v) {
#if defined(__SSE2__)
  uint32_t zero = 0;
  for (int32_t i = 0; i < LANES; i += 4) {
    __m128i eq = _mm_cmpeq_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i)), _mm_setzero_si128());
    zero |= (uint32_t)_mm_movemask_ps(_mm_castsi128_ps(eq)) << i;
  }
  return ~zero;
#else
  uint32_t m = 0;
  for (int32_t l = 0; l < LANES; l++) m |= (uint32_t)(v[l] != 0) << l;
  return m;
#endif
}

// Python's x // y (div) or x % y of the lanes in `mask` (others: a meaningless value), through
// floating point: idiv is not pipelined (20-40 cycles a lane), and the float quotient of two
// integers truncates to the exact integer quotient when |x| < 2^p, p the significand's bits (its
// rounding error, below |q| * 2^-p, is smaller than the 1/|y| gap to the next integer). 8 lanes
// at a time in float when every |x| and |y| < 2^24, else 4 in double (int32 < 2^53). Lanes with
// y == 0 or INT_MIN // -1 get a meaningless value (they trap).
typedef int32_t vi4 __attribute__((vector_size(16)));
typedef uint32_t vu4 __attribute__((vector_size(16)));
typedef double vd4 __attribute__((vector_size(32)));
typedef int32_t vi8 __attribute__((vector_size(32)));
typedef uint32_t vu8 __attribute__((vector_size(32)));
typedef float vf8 __attribute__((vector_size(32)));
VG_LANE_INLINE void floor_divmod(const int32_t* xs, const int32_t* ys, int32_t* out, bool div, uint32_t mask) {
  for (int32_t l = 0; l < LANES; l += 8) {
    vi8 x, y;
    __builtin_memcpy(&x, xs + l, sizeof x);
    __builtin_memcpy(&y, ys + l, sizeof y);
    if (!((mask >> l) & 0xFFu)) {  // no lane of this group here
      __builtin_memcpy(out + l, &x, sizeof x);
      continue;
    }
    vi8 odd = (y == 0) | ((x == VG_INT32_MIN) & (y == -1));
    y = (y & ~odd) | (odd & 1);
    const vi8 lim = {1 << 24, 1 << 24, 1 << 24, 1 << 24, 1 << 24, 1 << 24, 1 << 24, 1 << 24};
    vi8 big = ((x >= lim) | (x <= -lim)) | ((y >= lim) | (y <= -lim));
    vi8 q;
    uint64_t b4[4];  // any lane big: OR the vector as four words (no per-lane extraction)
    __builtin_memcpy(b4, &big, sizeof b4);
    if (!(b4[0] | b4[1] | b4[2] | b4[3])) {
      q = __builtin_convertvector(__builtin_convertvector(x, vf8) / __builtin_convertvector(y, vf8), vi8);
    } else {
      for (int32_t h = 0; h < 8; h += 4) {
        vi4 x4, y4;
        __builtin_memcpy(&x4, (const int32_t*)&x + h, sizeof x4);
        __builtin_memcpy(&y4, (const int32_t*)&y + h, sizeof y4);
        vi4 q4 = __builtin_convertvector(__builtin_convertvector(x4, vd4) / __builtin_convertvector(y4, vd4), vi4);
        __builtin_memcpy((int32_t*)&q + h, &q4, sizeof q4);
      }
    }
    vi8 r = (vi8)((vu8)x - (vu8)q * (vu8)y);
    vi8 adj = (r != 0) & ((r ^ y) < 0);  // -1 where floor differs from truncation
    vi8 v = div ? q + adj : r + (y & adj);
    __builtin_memcpy(out + l, &v, sizeof v);
  }
}

// floor_divmod by a constant c (not 0 or -1): a shift or a mask for c a power of two (Python's
// floor division and modulo are the arithmetic shift and the low bits), else as floor_divmod
// without the checks on the divisor.
VG_LANE_INLINE void floor_divmod_const(const int32_t* xs, int32_t c, int32_t* out, bool div) {
  if (c > 0 && (c & (c - 1)) == 0) {
    const int32_t k = __builtin_ctz((uint32_t)c);
    if (div)
      for (int32_t l = 0; l < LANES; l++) out[l] = xs[l] >> k;
    else
      for (int32_t l = 0; l < LANES; l++) out[l] = xs[l] & (c - 1);
    return;
  }
  // One range check over all lanes, then one path for all of them (lanes outside the group
  // hold stale values: they may only send the whole call the exact double way).
  const vi8 lim = {1 << 24, 1 << 24, 1 << 24, 1 << 24, 1 << 24, 1 << 24, 1 << 24, 1 << 24};
  vi8 big = {};
  for (int32_t l = 0; l < LANES; l += 8) {
    vi8 x;
    __builtin_memcpy(&x, xs + l, sizeof x);
    big |= (x >= lim) | (x <= -lim);
  }
  uint64_t b4[4];  // any lane big: OR the vector as four words (no per-lane extraction)
  __builtin_memcpy(b4, &big, sizeof b4);
  const bool floats = c < (1 << 24) && c > -(1 << 24) && !(b4[0] | b4[1] | b4[2] | b4[3]);
  const vf8 yf = {(float)c, (float)c, (float)c, (float)c, (float)c, (float)c, (float)c, (float)c};
  const vd4 yd = {(double)c, (double)c, (double)c, (double)c};
  const vi8 y = {c, c, c, c, c, c, c, c};
  for (int32_t l = 0; l < LANES; l += 8) {
    vi8 x, q;
    __builtin_memcpy(&x, xs + l, sizeof x);
    if (floats) {
      q = __builtin_convertvector(__builtin_convertvector(x, vf8) / yf, vi8);
    } else {
      for (int32_t h = 0; h < 8; h += 4) {
        vi4 x4;
        __builtin_memcpy(&x4, (const int32_t*)&x + h, sizeof x4);
        vi4 q4 = __builtin_convertvector(__builtin_convertvector(x4, vd4) / yd, vi4);
        __builtin_memcpy((int32_t*)&q + h, &q4, sizeof q4);
      }
    }
    vi8 r = (vi8)((vu8)x - (vu8)q * (vu8)y);
    vi8 adj = (r != 0) & ((r ^ y) < 0);  // -1 where floor differs from truncation
    vi8 v = div ? q + adj : r + (y & adj);
    __builtin_memcpy(out + l, &v, sizeof v);
  }
}

// xs[i] for the lanes in `mask` (lists on the left, indexes on the right), lane by lane: each
// lane's lists are its own. range[l] = -1 where the index is out of range, bad[l] = -1 where
// the list reference is bad (else 0); res is 0 there and outside the mask. Non-zero when any
// lane traps. L may be res itself (a chained sequence's value).
VG_LANE_INLINE int32_t index_lanes(const LaneState& S, uint32_t mask, const int32_t* L, const int32_t* R,
                                   int32_t* res, int32_t* range, int32_t* bad) {
  int32_t any = 0, lv[LANES];
  if (L == res) {  // chained: keep the lists before res is written
    for (int32_t l = 0; l < LANES; l++) lv[l] = L[l];
    L = lv;
  }
  for (int32_t l = 0; l < LANES; l++) res[l] = range[l] = bad[l] = 0;
  for (uint32_t m = mask; m; m &= m - 1) {
    int32_t l = ctz(m);
    const Workspace& ws = S.lane[l];
    int32_t r = L[l], i = R[l];
    if ((uint32_t)r >= (uint32_t)ws.nlists) {
      bad[l] = any = -1;
      continue;
    }
    const ListHdr& h = ws.lists[r];
    if (i < 0) i += h.len;
    if (i < 0 || i >= h.len) {
      range[l] = any = -1;
      continue;
    }
    res[l] = ws.heap[h.off + i];
  }
  return any;
}

// Whether column d already holds v (or the constant c) in every lane of the group (mk: -1 there):
// a store of those values writes nothing (vm.h's cycle check).
VG_LANE_INLINE bool holds(const int32_t* d, const int32_t* v, const int32_t* mk) {
  int32_t diff = 0;
  for (int32_t l = 0; l < LANES; l++) diff |= (d[l] ^ v[l]) & mk[l];
  return diff == 0;
}
VG_LANE_INLINE bool holds(const int32_t* d, int32_t c, const int32_t* mk) {
  int32_t diff = 0;
  for (int32_t l = 0; l < LANES; l++) diff |= (d[l] ^ c) & mk[l];
  return diff == 0;
}

inline bool same_state(const LaneGroup& a, const LaneGroup& b) {
  if (a.pc != b.pc || a.depth != b.depth || a.sp != b.sp || a.base != b.base || a.obase != b.obase) return false;
  for (int32_t d = 0; d < a.depth; d++) {
    const Frame& x = a.frames[d];
    const Frame& y = b.frames[d];
    if (x.ret_pc != y.ret_pc || x.base != y.base || x.obase != y.obase) return false;
  }
  return true;
}

// Priority: the deepest call first, then the lowest pc.
inline bool before(const LaneGroup& a, const LaneGroup& b) {
  return a.depth != b.depth ? a.depth > b.depth : a.pc < b.pc;
}

}  // namespace lanes_detail

// The body of run_lanes (below), compiled twice on x86-64 GCC builds: for x86-64-v3 (AVX2: the lane
// loops are 8 wide instead of 4; run_batch is about 1.7x faster on the corpus than with the baseline
// build) and for the baseline.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define VG_LANE_V3 1
#endif

// Which build run_lanes takes: 1 the x86-64-v3 one where the CPU has it, 0 the baseline always
// (the tests run both on every machine). Set it before runs start (vg_lane_isa).
inline std::atomic<int32_t>& lane_isa() {
  static std::atomic<int32_t> isa(1);
  return isa;
}

namespace lanes_detail {

// nonzero_mask for the build of run_lanes_body (V3: the x86-64-v3 one, where 8-wide compares
// take half the instructions of SSE2's 4-wide ones; the mask is made at every branch and trap).
template <bool V3>
inline uint32_t lane_mask(const int32_t* v) {
  return nonzero_mask(v);
}
#ifdef VG_LANE_V3
template <>
__attribute__((target("arch=x86-64-v3"))) inline uint32_t lane_mask<true>(const int32_t* v) {
  uint32_t zero = 0;
  for (int32_t i = 0; i < LANES; i += 8) {
    __m256i eq = _mm256_cmpeq_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i)), _mm256_setzero_si256());
    zero |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(eq)) << i;
  }
  return ~zero;
}
#endif

}  // namespace lanes_detail

template <bool V3>
__attribute__((always_inline)) inline void run_lanes_body(const uint32_t* code, int32_t len, int32_t entry_pc,
                                                          const int32_t* const* in, const int32_t* in_len,
                                                          int32_t nlanes, const VMConfig& cfg, LaneState& S,
                                                          RunResult* out, const LaneFast* fast) {
  using namespace lanes_detail;
  const int32_t fuel = cfg.fuel, stack_size = cfg.stack_size, max_depth = cfg.max_depth;
  int32_t* st = S.stack;
  Fused* fx = fast && !fast->lazy ? fast->fx : nullptr;
  uint8_t* xop = fast && !fast->lazy ? fast->xop : nullptr;
  const uint8_t* target = nullptr;
  int32_t fuse_countdown = fast && fast->lazy && fast->fx ? fast->lazy - 1 : -1;
  int32_t* solo_stack = fast ? fast->solo_stack : nullptr;
  Frame* solo_frames = fast ? fast->solo_frames : nullptr;
  uint32_t live = 0;
  for (int32_t l = 0; l < LANES; l++) {
    S.steps[l] = 0;
    S.lane[l].nlists = 0;
    S.lane[l].hp = 0;
  }
  if (entry_pc < 0 || entry_pc >= len || (code[entry_pc] & 0xFF) != OP_FUNC) {
    for (int32_t l = 0; l < nlanes; l++) out[l].status = TRAP_BAD_INPUT, out[l].value = 0, out[l].steps = 0;
    return;
  }
  const int32_t entry_nl = func_nlocals(code[entry_pc]);
  for (int32_t l = 0; l < nlanes; l++) {
    int32_t t = load_args(code[entry_pc], in[l], in_len[l], cfg, S.lane[l], st + l, LANES);
    out[l].status = t;
    out[l].value = 0;
    out[l].steps = 0;
    if (t == TRAP_OK) live |= 1u << l;
  }
  S.nfree = 0;
  for (int32_t g = LANES - 1; g >= 0; g--) S.free_frames[S.nfree++] = S.frame_pool + (int64_t)g * (max_depth > 0 ? max_depth : 1);
  S.ngroups = 0;
  if (!live) return;
  {
    LaneGroup& g = S.groups[S.ngroups++];
    g.mask = live;
    g.pc = entry_pc + 1;
    g.sp = entry_nl;
    g.base = 0;
    g.obase = entry_nl;
    g.depth = 0;
    g.pending = 0;
    g.cyc = -1;
    g.frames = S.free_frames[--S.nfree];
  }

  while (S.ngroups > 0) {
    // Pick the group to run; merge every other group in the same state into it.
    int32_t gi = 0;
    for (int32_t j = 1; j < S.ngroups; j++)
      if (before(S.groups[j], S.groups[gi])) gi = j;
    for (int32_t j = S.ngroups - 1; j >= 0; j--) {
      if (j == gi || !same_state(S.groups[j], S.groups[gi])) continue;
      LaneGroup& h = S.groups[j];
      LaneGroup& g = S.groups[gi];
      for (uint32_t m = g.mask; m; m &= m - 1) S.steps[ctz(m)] += g.pending;
      for (uint32_t m = h.mask; m; m &= m - 1) S.steps[ctz(m)] += h.pending;
      g.pending = 0;
      g.mask |= h.mask;
      g.cyc = g.cyc == h.cyc ? g.cyc : -1;  // each lane's own check still holds
      S.free_frames[S.nfree++] = h.frames;
      S.groups[j] = S.groups[--S.ngroups];
      if (gi == S.ngroups) gi = j;  // the chosen group was the last one and moved into slot j
    }
    LaneGroup& G = S.groups[gi];
    // Run until a fork, a return, the group's end, or a pc where another group waits.
    int32_t yield_pc = 0x7fffffff;
    for (int32_t j = 0; j < S.ngroups; j++)
      if (j != gi && S.groups[j].depth == G.depth && S.groups[j].pc < yield_pc) yield_pc = S.groups[j].pc;
    uint32_t mask = G.mask;
    int32_t pc = G.pc, sp = G.sp, base = G.base, obase = G.obase, depth = G.depth, pending = G.pending;
    int32_t mk[LANES];
    int32_t max_steps = 0;
    bool dead = false;
    int32_t cyc = G.cyc;

#define LN_RECOMPUTE()                                                                \
  do {                                                                              \
    max_steps = 0;                                                                  \
    for (int32_t l = 0; l < LANES; l++) mk[l] = -(int32_t)((mask >> l) & 1u);       \
    for (int32_t l = 0; l < LANES; l++) {                                           \
      int32_t s_ = S.steps[l] & mk[l];                                              \
      max_steps = s_ > max_steps ? s_ : max_steps;                                  \
    }                                                                               \
  } while (0)
#define LN_FLUSH()                                                                    \
  do {                                                                              \
    for (int32_t l = 0; l < LANES; l++) S.steps[l] += pending & mk[l];              \
    max_steps += pending;                                                           \
    pending = 0;                                                                    \
  } while (0)
    // End lanes `lm` of this group with status t (their steps include this instruction).
#define LN_TRAP_LANES(lm, t)                                                          \
  do {                                                                              \
    uint32_t tl_ = (lm) & mask;                                                     \
    if (tl_) {                                                                      \
      LN_FLUSH();                                                                   \
      for (uint32_t m_ = tl_; m_; m_ &= m_ - 1) {                                   \
        int32_t l_ = ctz(m_);                                                       \
        out[l_].status = (t);                                                       \
        out[l_].value = 0;                                                          \
        out[l_].steps = S.steps[l_];                                                \
      }                                                                             \
      mask &= ~tl_;                                                                 \
      if (!mask) {                                                                  \
        dead = true;                                                                \
        goto leave;                                                                 \
      }                                                                             \
      LN_RECOMPUTE();                                                               \
    }                                                                               \
  } while (0)
#define LN_TRAP_ALL(t) LN_TRAP_LANES(mask, t)
    // vm.h's cycle check at a JUMP to `target` whose word is at id - 1: every lane of the group
    // is in a cycle and ends out of fuel, as the long way.
#define LN_CYCLE_CHECK(target, id)                                                    \
  do {                                                                              \
    if (CYCLE_CHECK && (target) < (id) && sp == obase) {                            \
      if (cyc == (id)) {                                                            \
        for (uint32_t m_ = mask; m_; m_ &= m_ - 1) {                                \
          int32_t l_ = ctz(m_);                                                     \
          out[l_].status = TRAP_OUT_OF_FUEL;                                        \
          out[l_].value = 0;                                                        \
          out[l_].steps = fuel;                                                     \
        }                                                                           \
        mask = 0;                                                                   \
        dead = true;                                                                \
        goto leave;                                                                 \
      }                                                                             \
      cyc = (id);                                                                   \
    }                                                                               \
  } while (0)
#define COL(s) (st + (int64_t)(s) * LANES)
#define LN_NEED(k) if (sp < obase + (k)) LN_TRAP_ALL(TRAP_BAD_BYTECODE)
#define LN_ROOM(k) if (sp + (k) > stack_size) LN_TRAP_ALL(TRAP_RECURSION)
// (GCC emits this as dst ^ ((v ^ dst) & mk). Where dst is a slot no run has written yet, valgrind's
// memcheck marks the active lanes' result undefined too, as it cannot see the xor cancel; the
// value is exact (session 32: lockstep equal to scalar with every scratch array filled with
// garbage). Zeroing the stack scratch once would quiet memcheck, if ever needed.)
#define BLEND(dst, v) (dst) = (((v) & mk[l]) | ((dst) & ~mk[l]))
    // Split: lanes `tm` continue at pc_t with stack pointer sp_t, the others at pc_f / sp_f.
    // This group keeps the side with the lower pc and runs on (min-PC order); a new group
    // with the same history (pending steps, frames) takes the other side and waits.
#define LN_FORK(tm, pc_t, sp_t, pc_f, sp_f)                                           \
  do {                                                                              \
    uint32_t t_ = (tm) & mask;                                                      \
    if (t_ == mask) {                                                               \
      pc = (pc_t);                                                                  \
      sp = (sp_t);                                                                  \
    } else if (t_ == 0) {                                                           \
      pc = (pc_f);                                                                  \
      sp = (sp_f);                                                                  \
    } else {                                                                        \
      bool t_first_ = (pc_t) < (pc_f);                                              \
      LaneGroup& h_ = S.groups[S.ngroups++];                                        \
      h_.mask = t_first_ ? mask & ~t_ : t_;                                         \
      h_.pc = t_first_ ? (pc_f) : (pc_t);                                           \
      h_.sp = t_first_ ? (sp_f) : (sp_t);                                           \
      h_.base = base;                                                               \
      h_.obase = obase;                                                             \
      h_.depth = depth;                                                             \
      h_.pending = pending;                                                         \
      h_.cyc = cyc;                                                                 \
      h_.frames = S.free_frames[--S.nfree];                                         \
      for (int32_t d_ = 0; d_ < depth; d_++) h_.frames[d_] = S.groups[gi].frames[d_]; \
      int32_t npc_ = t_first_ ? (pc_t) : (pc_f);                                    \
      sp = t_first_ ? (sp_t) : (sp_f);                                             \
      mask = t_first_ ? t_ : mask & ~t_;                                            \
      pc = npc_;                                                                    \
      if (h_.pc < yield_pc) yield_pc = h_.pc;                                       \
      for (int32_t l = 0; l < LANES; l++) mk[l] = -(int32_t)((mask >> l) & 1u);     \
    }                                                                               \
  } while (0)

    LN_RECOMPUTE();
    uint32_t w;
    int32_t arg;
    int32_t slice = 0;
    for (;;) {
      if ((++slice & 15) == 0 && slice > SOLO_AFTER && solo_stack && __builtin_popcount(mask) <= SOLO_LANES) {
        LN_FLUSH();
        for (uint32_t m = mask; m; m &= m - 1) {
          int32_t l = ctz(m);
          Workspace& ws = S.lane[l];
          ws.stack = solo_stack;
          ws.frames = solo_frames;
          for (int32_t k = 0; k < sp; k++) ws.stack[k] = COL(k)[l];
          for (int32_t d = 0; d < depth; d++) ws.frames[d] = S.groups[gi].frames[d];
          out[l] = run_from(code, len, cfg, ws, pc, sp, base, obase, depth, S.steps[l], xop ? fx : nullptr, xop);
          ws.stack = nullptr;
          ws.frames = nullptr;
        }
        mask = 0;
        dead = true;
        goto leave;
      }
      if (fuse_countdown >= 0 && fuse_countdown-- == 0) {
        fuse_targets(code, len, fast->target);
        fuse_pending(code, len, fast->fx, fast->xop);
        fx = fast->fx, xop = fast->xop, target = fast->target;
      }
      if (fx && (uint32_t)pc < (uint32_t)len) {
        // A superinstruction when every lane has fuel for all its steps and its stack checks
        // pass; else the plain instruction, which traps exactly where the sequence would.
        if (fx[pc].kind == FX_PENDING) fuse_at(code, len, target, pc, fx, xop);
        const Fused& f = fx[pc];
        if (f.kind != FX_NONE && f.n <= fuel - (max_steps + pending) && sp + f.pushes <= stack_size &&
            sp - f.pops >= obase) {
          const int32_t n = f.n, next = pc + n;
          switch (f.kind) {
            case FX_BIN: {
              // A sequence whose result the next one takes as its left operand runs on into it
              // (chained): the value stays in res, never stored in its stack slot.
              int32_t cl[LANES], cr[LANES], res[LANES], bad[LANES], zero[LANES];
              const Fused* fp = &f;
              int32_t cpc = pc;
              bool chained = false;
              for (;;) {
              const int32_t cnext = cpc + fp->n;
              const int32_t s0 = sp - fp->pops;  // the left operand's slot when on the stack; the result's slot
              const int32_t* L = chained ? res : COL(s0);
              const int32_t* R = COL(sp - 1);
              if (fp->lk == SRC_VAR) L = COL(base + fp->a);
              else if (fp->lk == SRC_CONST) {
                for (int32_t l = 0; l < LANES; l++) cl[l] = fp->a;
                L = cl;
              }
              if (fp->rk == SRC_VAR) R = COL(base + fp->b);
              else if (fp->rk == SRC_CONST) {
                for (int32_t l = 0; l < LANES; l++) cr[l] = fp->b;
                R = cr;
              }
              int32_t any = 0;
              switch (fp->op) {
#define FX_LOOP(EXPR) for (int32_t l = 0; l < LANES; l++) { int32_t x = L[l], y = R[l]; res[l] = (int32_t)(EXPR); } break;
#define FX_OVF(EXPR, OVF)                          \
  for (int32_t l = 0; l < LANES; l++) {            \
    int32_t x = L[l], y = R[l];                    \
    int32_t r = (EXPR);                            \
    res[l] = r;                                    \
    bad[l] = (OVF) & mk[l];                        \
    any |= bad[l];                                 \
  }                                                \
  break;
                case OP_BINARY_ADD: FX_OVF((int32_t)((uint32_t)x + (uint32_t)y), ((x ^ r) & (y ^ r)) >> 31)
                case OP_BINARY_SUB: FX_OVF((int32_t)((uint32_t)x - (uint32_t)y), ((x ^ y) & (x ^ r)) >> 31)
                case OP_BINARY_MUL: {
                  // Every lane's operands in [-2^15, 2^15): no product leaves int32, and a 32-bit
                  // multiply does (the overflow check needs the 64-bit products).
                  uint32_t wide = 0;
                  for (int32_t l = 0; l < LANES; l++) wide |= (((uint32_t)L[l] + 32768u) | ((uint32_t)R[l] + 32768u)) >> 16;
                  if (!wide) {
                    for (int32_t l = 0; l < LANES; l++) res[l] = (int32_t)((uint32_t)L[l] * (uint32_t)R[l]);
                    break;
                  }
                  FX_OVF((int32_t)((int64_t)x * y), -(int32_t)((int64_t)x * y != (int64_t)(int32_t)((int64_t)x * y)))
                }
                case OP_BINARY_DIV: case OP_BINARY_MOD: {
                  bool div = fp->op == OP_BINARY_DIV;
                  if (fp->rk == SRC_CONST && fp->b != 0 && fp->b != -1) {  // cannot trap
                    floor_divmod_const(L, fp->b, res, div);
                    break;
                  }
                  for (int32_t l = 0; l < LANES; l++) {
                    int32_t big = -(int32_t)((L[l] == VG_INT32_MIN) & (R[l] == -1));
                    zero[l] = -(int32_t)(R[l] == 0) & mk[l];
                    bad[l] = div ? big & mk[l] : 0;
                    any |= zero[l] | bad[l];
                  }
                  floor_divmod(L, R, res, div, mask);
                  break;
                }
                case OP_INDEX:  // traps: zero = index out of range, bad = a bad list reference
                  any = index_lanes(S, mask, L, R, res, zero, bad);
                  break;
                case OP_MIN: FX_LOOP(y < x ? y : x)
                case OP_MAX: FX_LOOP(y > x ? y : x)
                case OP_COMPARE_LT: FX_LOOP(x < y)
                case OP_COMPARE_LE: FX_LOOP(x <= y)
                case OP_COMPARE_GT: FX_LOOP(x > y)
                case OP_COMPARE_GE: FX_LOOP(x >= y)
                case OP_COMPARE_EQ: FX_LOOP(x == y)
                default: FX_LOOP(x != y)
#undef FX_LOOP
#undef FX_OVF
              }
              if (any) {  // lanes that trap stop at the binary op, the sequence's (pushes + 1)th step
                const int32_t j = fp->pushes + 1;
                pending += j;
                const bool ix = fp->op == OP_INDEX;
                if (fp->op == OP_BINARY_DIV || fp->op == OP_BINARY_MOD || ix)
                  LN_TRAP_LANES(lane_mask<V3>(zero), ix ? TRAP_INDEX_ERROR : TRAP_ZERO_DIVISION);
                LN_TRAP_LANES(lane_mask<V3>(bad), ix ? TRAP_BAD_BYTECODE : TRAP_OVERFLOW);
                pending += fp->n - j;
              } else {
                pending += fp->n;
              }
              switch (fp->tail) {
                case TAIL_PUSH: {
                  sp = s0 + 1;
                  pc = cnext;
                  if (cnext < len) {
                    if (fx[cnext].kind == FX_PENDING) fuse_at(code, len, target, cnext, fx, xop);
                    const Fused& g = fx[cnext];
                    if (g.kind == FX_BIN && g.lk == SRC_STACK && g.pops == 1 && g.n <= fuel - (max_steps + pending) &&
                        sp + g.pushes <= stack_size && sp - 1 >= obase) {
                      fp = &g;
                      cpc = cnext;
                      chained = true;
                      continue;
                    }
                    // A conditional jump that the sequence could not take in (it starts a block:
                    // the end of an `and`/`or`) runs on res too, when no group waits there.
                    const int32_t nop = (int32_t)(code[cnext] & 0xFF);
                    if ((nop == OP_JUMP_IF_FALSE || nop == OP_JUMP_IF_TRUE) && cnext < yield_pc &&
                        max_steps + pending < fuel) {
                      pending += 1;
                      uint32_t nz = lane_mask<V3>(res);
                      LN_FORK(nop == OP_JUMP_IF_TRUE ? nz : ~nz, (int32_t)(code[cnext] >> 8), s0, cnext + 1, s0);
                      break;
                    }
                  }
                  int32_t* d = COL(s0);
                  for (int32_t l = 0; l < LANES; l++) BLEND(d[l], res[l]);
                  break;
                }
                case TAIL_STORE: case TAIL_STORE_JUMP: {
                  int32_t* d = COL(base + fp->t);
                  if (cyc >= 0 && !holds(d, res, mk)) cyc = -1;
                  for (int32_t l = 0; l < LANES; l++) BLEND(d[l], res[l]);
                  sp = s0;
                  if (fp->tail == TAIL_STORE_JUMP) LN_CYCLE_CHECK(fp->t2, cnext);
                  pc = fp->tail == TAIL_STORE ? cnext : fp->t2;
                  break;
                }
                case TAIL_JIF: case TAIL_JIT: {
                  uint32_t nz = lane_mask<V3>(res);
                  LN_FORK(fp->tail == TAIL_JIT ? nz : ~nz, fp->t, s0, cnext, s0);
                  break;
                }
                default: {  // JUMP_IF_*_OR_POP: the value stays where the jump is taken
                  int32_t* d = COL(s0);
                  for (int32_t l = 0; l < LANES; l++) BLEND(d[l], res[l]);
                  uint32_t nz = lane_mask<V3>(res);
                  LN_FORK(fp->tail == TAIL_JIT_OR_POP ? nz : ~nz, fp->t, s0 + 1, cnext, s0);
                  break;
                }
              }
              break;
              }
              break;
            }
            case FX_MOV: {
              int32_t* d = COL(base + f.t);
              if (f.lk == SRC_VAR) {
                const int32_t* s = COL(base + f.a);
                if (cyc >= 0 && !holds(d, s, mk)) cyc = -1;
                for (int32_t l = 0; l < LANES; l++) BLEND(d[l], s[l]);
              } else {
                if (cyc >= 0 && !holds(d, f.a, mk)) cyc = -1;
                for (int32_t l = 0; l < LANES; l++) BLEND(d[l], f.a);
              }
              pending += n;
              pc = next;
              break;
            }
            case FX_TEST: {
              pending += n;
              uint32_t nz = lane_mask<V3>(COL(base + f.a));
              LN_FORK(f.tail == TAIL_JIT ? nz : ~nz, f.t, sp, next, sp);
              break;
            }
            case FX_SWAP2: {
              // a, b = x, y: the value under the top into slot a, then the top into slot b (the
              // operand stack lies above every local, so no slot is both).
              const int32_t *x = COL(sp - 2), *y = COL(sp - 1);
              int32_t* da = COL(base + f.a);
              int32_t* db = COL(base + f.b);
              if (cyc >= 0 && !(holds(da, x, mk) && holds(db, y, mk))) cyc = -1;  // both before either store
              for (int32_t l = 0; l < LANES; l++) BLEND(da[l], x[l]);
              for (int32_t l = 0; l < LANES; l++) BLEND(db[l], y[l]);
              sp -= 2;
              pending += n;
              if (f.tail == TAIL_STORE_JUMP) LN_CYCLE_CHECK(f.t2, next);
              pc = f.tail == TAIL_STORE_JUMP ? f.t2 : next;
              break;
            }
            case FX_FOR_LIST: {
              cyc = -1;
              // Lane by lane (each lane's lists are its own), in one pass: the checks of FOR_LIST,
              // then the element into the loop variable (after the index: it may be a loop slot).
              int32_t *ref = COL(base + f.a), *idx = COL(base + f.a + 1), *x = COL(base + f.t);
              uint32_t bad = 0, go = 0;
              for (uint32_t m = mask; m; m &= m - 1) {
                int32_t l = ctz(m);
                const Workspace& ws = S.lane[l];
                int32_t r = ref[l], i = idx[l];
                if ((uint32_t)r >= (uint32_t)ws.nlists || i < 0) {
                  bad |= 1u << l;
                  continue;
                }
                const ListHdr& L = ws.lists[r];
                if (i < L.len) {
                  int32_t v = ws.heap[L.off + i];
                  idx[l] = i + 1;
                  x[l] = v;
                  go |= 1u << l;
                }
              }
              pending += n - 1;  // FOR_LIST is the last step but one
              LN_TRAP_LANES(bad, TRAP_BAD_BYTECODE);
              pending += 1;
              LN_FORK(go, f.b, sp, f.t2, sp);
              break;
            }
            default: {  // FX_FOR_RANGE
              cyc = -1;
              int32_t *ctr = COL(base + f.a), *stop = COL(base + f.a + 1), *step = COL(base + f.a + 2);
              int32_t *x = COL(base + f.t), go[LANES];
              int32_t anyz = 0;
              for (int32_t l = 0; l < LANES; l++) {
                go[l] = -(int32_t)(step[l] == 0) & mk[l];
                anyz |= go[l];
              }
              pending += n - 1;  // FOR_RANGE is the last step but one
              if (anyz) LN_TRAP_LANES(lane_mask<V3>(go), TRAP_VALUE_ERROR);
              pending += 1;
              int32_t anyg = 0;
              for (int32_t l = 0; l < LANES; l++) {
                int32_t c = ctr[l];
                int32_t g = -(int32_t)(step[l] > 0 ? c < stop[l] : c > stop[l]) & mk[l];
                int32_t nx = (int32_t)((uint32_t)c + (uint32_t)step[l]);
                int32_t past = ((c ^ nx) & (step[l] ^ nx)) >> 31;  // wrapped: past int32 is past stop
                nx = (stop[l] & past) | (nx & ~past);
                ctr[l] = (nx & g) | (c & ~g);
                x[l] = (c & g) | (x[l] & ~g);  // after the counter: the loop variable may be a range slot
                go[l] = g;
                anyg |= g;
              }
              LN_FORK(anyg ? lane_mask<V3>(go) : 0u, f.b, sp, f.t2, sp);
              break;
            }
          }
          goto stepped;
        }
      }
      if (max_steps + pending >= fuel) {  // some lane has used its budget
        LN_FLUSH();
        uint32_t spent = 0;
        for (uint32_t m = mask; m; m &= m - 1)
          if (S.steps[ctz(m)] >= fuel) spent |= 1u << ctz(m);
        LN_TRAP_LANES(spent, TRAP_OUT_OF_FUEL);
      }
      if ((uint32_t)pc >= (uint32_t)len) LN_TRAP_ALL(TRAP_BAD_BYTECODE);
      w = code[pc++];
      arg = (int32_t)(w >> 8);
      pending++;
      if (op_in(OPS_WRITES & ~op_bit(OP_STORE_VAR), (int32_t)(w & 0xFF))) cyc = -1;  // STORE_VAR: below
      switch (w & 0xFF) {
        case OP_LOAD_CONST: {
          LN_ROOM(1);
          int32_t v = ((int32_t)w) >> 8;
          int32_t* d = COL(sp);
          for (int32_t l = 0; l < LANES; l++) BLEND(d[l], v);
          sp++;
          break;
        }
        case OP_CONST_EXT: {
          LN_NEED(1);
          int32_t* d = COL(sp - 1);
          for (int32_t l = 0; l < LANES; l++) BLEND(d[l], (int32_t)(((uint32_t)d[l] << 8) | (uint32_t)arg));
          break;
        }
        case OP_LOAD_VAR: {
          LN_ROOM(1);
          int32_t* d = COL(sp);
          const int32_t* s = COL(base + arg);
          for (int32_t l = 0; l < LANES; l++) BLEND(d[l], s[l]);
          sp++;
          break;
        }
        case OP_STORE_VAR: {
          LN_NEED(1);
          int32_t* d = COL(base + arg);
          const int32_t* s = COL(sp - 1);
          if (cyc >= 0 && !holds(d, s, mk)) cyc = -1;
          for (int32_t l = 0; l < LANES; l++) BLEND(d[l], s[l]);
          sp--;
          break;
        }
        case OP_POP: LN_NEED(1); sp--; break;
        case OP_DUP: {
          LN_NEED(1);
          LN_ROOM(1);
          int32_t* d = COL(sp);
          const int32_t* s = COL(sp - 1);
          for (int32_t l = 0; l < LANES; l++) BLEND(d[l], s[l]);
          sp++;
          break;
        }
        case OP_DUP2: {
          LN_NEED(2);
          LN_ROOM(2);
          int32_t *d0 = COL(sp), *d1 = COL(sp + 1);
          const int32_t *s0 = COL(sp - 2), *s1 = COL(sp - 1);
          for (int32_t l = 0; l < LANES; l++) {
            BLEND(d0[l], s0[l]);
            BLEND(d1[l], s1[l]);
          }
          sp += 2;
          break;
        }
        case OP_SWAP: {
          LN_NEED(2);
          int32_t *a = COL(sp - 2), *b = COL(sp - 1);
          for (int32_t l = 0; l < LANES; l++) {
            int32_t x = a[l], y = b[l];
            BLEND(a[l], y);
            BLEND(b[l], x);
          }
          break;
        }
        case OP_ROT3: {
          LN_NEED(3);
          int32_t *a = COL(sp - 3), *b = COL(sp - 2), *c = COL(sp - 1);
          for (int32_t l = 0; l < LANES; l++) {
            int32_t x = a[l], y = b[l], z = c[l];
            BLEND(a[l], z);
            BLEND(b[l], x);
            BLEND(c[l], y);
          }
          break;
        }
        case OP_REVERSE: {
          LN_NEED(arg);
          for (int32_t i = sp - arg, j = sp - 1; i < j; i++, j--) {
            int32_t *a = COL(i), *b = COL(j);
            for (int32_t l = 0; l < LANES; l++) {
              int32_t x = a[l], y = b[l];
              BLEND(a[l], y);
              BLEND(b[l], x);
            }
          }
          break;
        }
        // int32 arithmetic with a per-lane overflow flag (-1 where the exact result leaves int32).
#define LN_ARITH(OPC, R, OVF)                                                  \
  case OPC: {                                                                  \
    LN_NEED(2);                                                                \
    int32_t* a = COL(sp - 2);                                                  \
    const int32_t* b = COL(sp - 1);                                            \
    int32_t bad[LANES];                                                        \
    int32_t any = 0;                                                           \
    for (int32_t l = 0; l < LANES; l++) {                                      \
      int32_t x = a[l], y = b[l];                                              \
      int32_t r = (R);                                                         \
      bad[l] = (OVF) & mk[l];                                                  \
      any |= bad[l];                                                           \
      BLEND(a[l], r);                                                          \
    }                                                                          \
    sp--;                                                                      \
    if (any) LN_TRAP_LANES(lane_mask<V3>(bad), TRAP_OVERFLOW);                  \
    break;                                                                     \
  }
        // Wrapped sums overflowed when both operands' signs differ from the result's.
        LN_ARITH(OP_BINARY_ADD, (int32_t)((uint32_t)x + (uint32_t)y), ((x ^ r) & (y ^ r)) >> 31)
        LN_ARITH(OP_BINARY_SUB, (int32_t)((uint32_t)x - (uint32_t)y), ((x ^ y) & (x ^ r)) >> 31)
        LN_ARITH(OP_BINARY_MUL, (int32_t)((int64_t)x * y), -(int32_t)((int64_t)x * y != (int64_t)(int32_t)((int64_t)x * y)))
#undef LN_ARITH
        // Every lane at once through doubles: idiv is not pipelined (20-40 cycles a lane), and a
        // double quotient of two int32 truncates to the exact integer quotient (its rounding
        // error, below |q| * 2^-53, is smaller than the 1/|y| gap to the next integer).
#define LN_DIVMOD(OPC, DIV)                                                          \
  case OPC: {                                                                        \
    LN_NEED(2);                                                                      \
    int32_t* a = COL(sp - 2);                                                        \
    const int32_t* b = COL(sp - 1);                                                  \
    int32_t zero[LANES], ovf[LANES], res[LANES];                                     \
    int32_t any = 0;                                                                 \
    for (int32_t l = 0; l < LANES; l++) {                                            \
      int32_t big = -(int32_t)((a[l] == VG_INT32_MIN) & (b[l] == -1));               \
      zero[l] = -(int32_t)(b[l] == 0) & mk[l];                                       \
      ovf[l] = (DIV) ? big & mk[l] : 0;                                              \
      any |= zero[l] | ovf[l];                                                       \
    }                                                                                \
    floor_divmod(a, b, res, DIV, mask);                                              \
    for (int32_t l = 0; l < LANES; l++) BLEND(a[l], res[l]);                         \
    sp--;                                                                            \
    if (any) {                                                                       \
      LN_TRAP_LANES(lane_mask<V3>(zero), TRAP_ZERO_DIVISION);                         \
      LN_TRAP_LANES(lane_mask<V3>(ovf), TRAP_OVERFLOW);                               \
    }                                                                                \
    break;                                                                           \
  }
        LN_DIVMOD(OP_BINARY_DIV, true)
        LN_DIVMOD(OP_BINARY_MOD, false)
#undef LN_DIVMOD
        case OP_UNARY_NEG: case OP_ABS: {
          LN_NEED(1);
          int32_t* a = COL(sp - 1);
          uint32_t ovf = 0;
          bool neg = (w & 0xFF) == OP_UNARY_NEG;
          for (uint32_t m = mask; m; m &= m - 1) {
            int32_t l = ctz(m);
            if (a[l] == VG_INT32_MIN) ovf |= 1u << l;
            else if (neg || a[l] < 0) a[l] = -a[l];
          }
          LN_TRAP_LANES(ovf, TRAP_OVERFLOW);
          break;
        }
        case OP_UNARY_NOT: {
          LN_NEED(1);
          int32_t* a = COL(sp - 1);
          for (int32_t l = 0; l < LANES; l++) BLEND(a[l], (int32_t)(a[l] == 0));
          break;
        }
#define LN_BINARY(OPC, EXPR)                                        \
  case OPC: {                                                       \
    LN_NEED(2);                                                     \
    int32_t* a = COL(sp - 2);                                       \
    const int32_t* b = COL(sp - 1);                                 \
    for (int32_t l = 0; l < LANES; l++) {                           \
      int32_t x = a[l], y = b[l];                                   \
      BLEND(a[l], (int32_t)(EXPR));                                 \
    }                                                               \
    sp--;                                                           \
    break;                                                          \
  }
        LN_BINARY(OP_MIN, y < x ? y : x)
        LN_BINARY(OP_MAX, y > x ? y : x)
        LN_BINARY(OP_COMPARE_LT, x < y)
        LN_BINARY(OP_COMPARE_LE, x <= y)
        LN_BINARY(OP_COMPARE_GT, x > y)
        LN_BINARY(OP_COMPARE_GE, x >= y)
        LN_BINARY(OP_COMPARE_EQ, x == y)
        LN_BINARY(OP_COMPARE_NE, x != y)
#undef LN_BINARY
        case OP_JUMP:
          LN_CYCLE_CHECK(arg, pc);
          pc = arg;
          break;
        case OP_JUMP_IF_FALSE: case OP_JUMP_IF_TRUE: case OP_JUMP_IF_FALSE_OR_POP: case OP_JUMP_IF_TRUE_OR_POP: {
          LN_NEED(1);
          int32_t op = w & 0xFF;
          bool on_true = op == OP_JUMP_IF_TRUE || op == OP_JUMP_IF_TRUE_OR_POP;
          bool keep = op == OP_JUMP_IF_FALSE_OR_POP || op == OP_JUMP_IF_TRUE_OR_POP;
          const int32_t* c = COL(sp - 1);
          uint32_t taken = on_true ? lane_mask<V3>(c) : ~lane_mask<V3>(c);
          LN_FORK(taken, arg, keep ? sp : sp - 1, pc, sp - 1);
          break;
        }
        case OP_FOR_RANGE: {
          int32_t *ctr = COL(base + arg), *stop = COL(base + arg + 1), *step = COL(base + arg + 2);
          int32_t zero[LANES], go[LANES];
          int32_t anyz = 0;
          for (int32_t l = 0; l < LANES; l++) {
            zero[l] = -(int32_t)(step[l] == 0) & mk[l];
            anyz |= zero[l];
          }
          if (anyz) LN_TRAP_LANES(lane_mask<V3>(zero), TRAP_VALUE_ERROR);
          int32_t anyg = 0;
          for (int32_t l = 0; l < LANES; l++) {
            go[l] = -(int32_t)(step[l] > 0 ? ctr[l] < stop[l] : ctr[l] > stop[l]) & mk[l];
            anyg |= go[l];
          }
          uint32_t gm = anyg ? lane_mask<V3>(go) : 0;
          if (gm && sp + 1 > stack_size) {
            LN_TRAP_LANES(gm, TRAP_RECURSION);
            gm = 0;
          } else if (gm) {
            int32_t* d = COL(sp);
            for (int32_t l = 0; l < LANES; l++) {
              int32_t g = go[l] & mk[l], c = ctr[l];
              int32_t nx = (int32_t)((uint32_t)c + (uint32_t)step[l]);
              int32_t past = ((c ^ nx) & (step[l] ^ nx)) >> 31;  // wrapped: past int32 is past stop
              nx = (stop[l] & past) | (nx & ~past);
              d[l] = (c & g) | (d[l] & ~g);
              ctr[l] = (nx & g) | (c & ~g);
            }
          }
          LN_FORK(gm, pc + 1, sp + 1, pc, sp);
          break;
        }
        case OP_FOR_LIST: {
          int32_t *ref = COL(base + arg), *idx = COL(base + arg + 1);
          uint32_t bad = 0, go = 0;
          for (uint32_t m = mask; m; m &= m - 1) {
            int32_t l = ctz(m);
            if ((uint32_t)ref[l] >= (uint32_t)S.lane[l].nlists || idx[l] < 0) bad |= 1u << l;
            else if (idx[l] < S.lane[l].lists[ref[l]].len) go |= 1u << l;
          }
          LN_TRAP_LANES(bad, TRAP_BAD_BYTECODE);
          go &= mask;
          if (go) {
            if (sp + 1 > stack_size) LN_TRAP_LANES(go, TRAP_RECURSION);
            int32_t* d = COL(sp);
            for (uint32_t m = go & mask; m; m &= m - 1) {
              int32_t l = ctz(m);
              const ListHdr& L = S.lane[l].lists[ref[l]];
              d[l] = S.lane[l].heap[L.off + idx[l]];
              idx[l]++;
            }
          }
          LN_FORK(go, pc + 1, sp + 1, pc, sp);
          break;
        }
        case OP_CALL: {
          uint32_t h = code[arg];
          int32_t np = func_nparams(h), nl = func_nlocals(h);
          LN_NEED(np);
          if (depth >= max_depth) LN_TRAP_ALL(TRAP_RECURSION);
          int32_t nb = sp - np;
          if (nb + nl > stack_size) LN_TRAP_ALL(TRAP_RECURSION);
          Frame& f = S.groups[gi].frames[depth];
          f.ret_pc = pc;
          f.base = base;
          f.obase = obase;
          depth++;
          base = nb;
          for (int32_t k = np; k < nl; k++) {
            int32_t* d = COL(base + k);
            for (int32_t l = 0; l < LANES; l++) BLEND(d[l], 0);
          }
          sp = base + nl;
          obase = sp;
          pc = arg + 1;
          yield_pc = 0x7fffffff;  // no other group is this deep
          break;
        }
        case OP_RETURN: {
          LN_NEED(1);
          const int32_t* v = COL(sp - 1);
          if (depth == 0) {
            LN_FLUSH();
            for (uint32_t m = mask; m; m &= m - 1) {
              int32_t l = ctz(m);
              out[l].status = TRAP_OK;
              out[l].value = v[l];
              out[l].steps = S.steps[l];
            }
            mask = 0;
            dead = true;
            goto leave;
          }
          int32_t* d = COL(base);
          for (int32_t l = 0; l < LANES; l++) BLEND(d[l], v[l]);
          depth--;
          const Frame& f = S.groups[gi].frames[depth];
          sp = base + 1;
          pc = f.ret_pc;
          base = f.base;
          obase = f.obase;
          if (S.ngroups > 1) goto leave;  // a group at the caller's depth may go first
          break;
        }
        case OP_BUILD_LIST: case OP_LIST_REPEAT: case OP_LIST_CONCAT: case OP_LIST_EXTEND: case OP_LEN:
        case OP_INDEX: case OP_STORE_INDEX: case OP_APPEND: case OP_LIST_POP: {
          // Lists live in each lane's own heap: run these per lane, with the scalar rules.
          int32_t op = w & 0xFF;
          int32_t need = op == OP_BUILD_LIST ? arg : op == OP_STORE_INDEX ? 3 : (op == OP_LEN || op == OP_LIST_POP) ? 1 : 2;
          LN_NEED(need);
          if (op == OP_BUILD_LIST && arg == 0) LN_ROOM(1);
          uint32_t oom = 0, idx_err = 0, bad = 0;
          for (uint32_t m = mask; m; m &= m - 1) {
            int32_t l = ctz(m);
            Workspace& ws = S.lane[l];
            int32_t* H = ws.heap;
            ListHdr* Ls = ws.lists;
#define LREF(x) ((uint32_t)(x) < (uint32_t)ws.nlists)
            switch (op) {
              case OP_BUILD_LIST: {
                int32_t r = new_list(ws, cfg, arg);
                if (r < 0) { oom |= 1u << l; break; }
                for (int32_t k = 0; k < arg; k++) H[Ls[r].off + k] = COL(sp - arg + k)[l];
                COL(sp - arg)[l] = r;
                break;
              }
              case OP_LIST_REPEAT: {
                int32_t src = COL(sp - 2)[l], times = COL(sp - 1)[l];
                if (!LREF(src)) { bad |= 1u << l; break; }
                int64_t n = times <= 0 ? 0 : (int64_t)Ls[src].len * times;
                int32_t r = new_list(ws, cfg, n);
                if (r < 0) { oom |= 1u << l; break; }
                for (int32_t k = 0, j = 0; k < (int32_t)n; k++) {
                  H[Ls[r].off + k] = H[Ls[src].off + j];
                  if (++j == Ls[src].len) j = 0;
                }
                COL(sp - 2)[l] = r;
                break;
              }
              case OP_LIST_CONCAT: {
                int32_t ra = COL(sp - 2)[l], rb = COL(sp - 1)[l];
                if (!LREF(ra) || !LREF(rb)) { bad |= 1u << l; break; }
                int32_t la = Ls[ra].len, lb = Ls[rb].len;
                int32_t r = new_list(ws, cfg, (int64_t)la + lb);
                if (r < 0) { oom |= 1u << l; break; }
                for (int32_t k = 0; k < la; k++) H[Ls[r].off + k] = H[Ls[ra].off + k];
                for (int32_t k = 0; k < lb; k++) H[Ls[r].off + la + k] = H[Ls[rb].off + k];
                COL(sp - 2)[l] = r;
                break;
              }
              case OP_LIST_EXTEND: {
                int32_t ra = COL(sp - 2)[l], rb = COL(sp - 1)[l];
                if (!LREF(ra) || !LREF(rb)) { bad |= 1u << l; break; }
                int32_t la = Ls[ra].len, lb = Ls[rb].len;
                if (!reserve(ws, cfg, ra, (int64_t)la + lb)) { oom |= 1u << l; break; }
                for (int32_t k = 0; k < lb; k++) H[Ls[ra].off + la + k] = H[Ls[rb].off + k];
                Ls[ra].len = la + lb;
                break;
              }
              case OP_LEN: {
                int32_t r = COL(sp - 1)[l];
                if (!LREF(r)) { bad |= 1u << l; break; }
                COL(sp - 1)[l] = Ls[r].len;
                break;
              }
              case OP_INDEX: {
                int32_t r = COL(sp - 2)[l], i = COL(sp - 1)[l];
                if (!LREF(r)) { bad |= 1u << l; break; }
                if (i < 0) i += Ls[r].len;
                if (i < 0 || i >= Ls[r].len) { idx_err |= 1u << l; break; }
                COL(sp - 2)[l] = H[Ls[r].off + i];
                break;
              }
              case OP_STORE_INDEX: {
                int32_t v = COL(sp - 3)[l], r = COL(sp - 2)[l], i = COL(sp - 1)[l];
                if (!LREF(r)) { bad |= 1u << l; break; }
                if (i < 0) i += Ls[r].len;
                if (i < 0 || i >= Ls[r].len) { idx_err |= 1u << l; break; }
                H[Ls[r].off + i] = v;
                break;
              }
              case OP_APPEND: {
                int32_t r = COL(sp - 2)[l], v = COL(sp - 1)[l];
                if (!LREF(r)) { bad |= 1u << l; break; }
                if (!reserve(ws, cfg, r, (int64_t)Ls[r].len + 1)) { oom |= 1u << l; break; }
                H[Ls[r].off + Ls[r].len++] = v;
                break;
              }
              case OP_LIST_POP: {
                int32_t r = COL(sp - 1)[l];
                if (!LREF(r)) { bad |= 1u << l; break; }
                if (Ls[r].len == 0) { idx_err |= 1u << l; break; }
                COL(sp - 1)[l] = H[Ls[r].off + --Ls[r].len];
                break;
              }
            }
#undef LREF
          }
          // Uniform stack effect; trapped lanes leave the group, so their stacks do not matter.
          switch (op) {
            case OP_BUILD_LIST: sp = sp - arg + 1; break;
            case OP_LIST_REPEAT: case OP_LIST_CONCAT: case OP_LIST_EXTEND: case OP_INDEX: sp--; break;
            case OP_STORE_INDEX: sp -= 3; break;
            case OP_APPEND: sp -= 2; break;
            default: break;
          }
          LN_TRAP_LANES(bad, TRAP_BAD_BYTECODE);
          LN_TRAP_LANES(idx_err, TRAP_INDEX_ERROR);
          LN_TRAP_LANES(oom, TRAP_OUT_OF_MEMORY);
          break;
        }
        default: LN_TRAP_ALL(TRAP_BAD_BYTECODE);  // FUNC (fell off a function) or an unknown opcode
      }
    stepped:
      // Checked after the instruction, so a group tied with another makes progress.
      if (pc >= yield_pc) {
        // Reconverge in place with a waiting group in the same state, else reschedule.
        int32_t j = 0;
        LaneGroup& cur = S.groups[gi];
        cur.pc = pc, cur.sp = sp, cur.base = base, cur.obase = obase, cur.depth = depth;
        for (; j < S.ngroups; j++)
          if (j != gi && same_state(S.groups[j], cur)) break;
        if (pc != yield_pc || j == S.ngroups) goto leave;
        LN_FLUSH();
        LaneGroup& h = S.groups[j];
        for (int32_t l = 0; l < LANES; l++) S.steps[l] += h.pending & -(int32_t)((h.mask >> l) & 1u);
        mask |= h.mask;
        cyc = cyc == h.cyc ? cyc : -1;
        S.free_frames[S.nfree++] = h.frames;
        int32_t last = --S.ngroups;
        if (j != last) {
          S.groups[j] = S.groups[last];
          if (gi == last) gi = j;
        }
        LN_RECOMPUTE();
        yield_pc = 0x7fffffff;
        for (int32_t k = 0; k < S.ngroups; k++)
          if (k != gi && S.groups[k].depth == depth && S.groups[k].pc < yield_pc) yield_pc = S.groups[k].pc;
      }
    }
  leave:
    if (dead || mask == 0) {
      S.free_frames[S.nfree++] = S.groups[gi].frames;
      S.groups[gi] = S.groups[--S.ngroups];
    } else {
      LaneGroup& g = S.groups[gi];
      g.mask = mask;
      g.pc = pc;
      g.sp = sp;
      g.base = base;
      g.obase = obase;
      g.depth = depth;
      g.pending = pending;
      g.cyc = cyc;
    }
#undef LN_RECOMPUTE
#undef LN_FLUSH
#undef LN_TRAP_LANES
#undef LN_TRAP_ALL
#undef LN_CYCLE_CHECK
#undef COL
#undef LN_NEED
#undef LN_ROOM
#undef BLEND
#undef LN_FORK
  }
}

#ifdef VG_LANE_V3
__attribute__((target("arch=x86-64-v3"), noinline)) inline void run_lanes_v3(
    const uint32_t* code, int32_t len, int32_t entry_pc, const int32_t* const* in, const int32_t* in_len,
    int32_t nlanes, const VMConfig& cfg, LaneState& S, RunResult* out, const LaneFast* fast) {
  run_lanes_body<true>(code, len, entry_pc, in, in_len, nlanes, cfg, S, out, fast);
}
#endif

__attribute__((noinline)) inline void run_lanes_base(const uint32_t* code, int32_t len, int32_t entry_pc,
                                                     const int32_t* const* in, const int32_t* in_len, int32_t nlanes,
                                                     const VMConfig& cfg, LaneState& S, RunResult* out,
                                                     const LaneFast* fast) {
  run_lanes_body<false>(code, len, entry_pc, in, in_len, nlanes, cfg, S, out, fast);
}

// Run function `entry_pc` of a validated program on nlanes (<= LANES) encoded inputs.
inline void run_lanes(const uint32_t* code, int32_t len, int32_t entry_pc, const int32_t* const* in,
                      const int32_t* in_len, int32_t nlanes, const VMConfig& cfg, LaneState& S, RunResult* out,
                      const LaneFast* fast = nullptr) {
#ifdef VG_LANE_V3
  static const bool has_v3 = __builtin_cpu_supports("x86-64-v3");
  if (has_v3 && lane_isa().load(std::memory_order_relaxed)) {
    run_lanes_v3(code, len, entry_pc, in, in_len, nlanes, cfg, S, out, fast);
    return;
  }
#endif
  run_lanes_base(code, len, entry_pc, in, in_len, nlanes, cfg, S, out, fast);
}

}  // namespace vg
