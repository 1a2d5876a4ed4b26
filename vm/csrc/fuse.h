// Superinstructions for the CPU lockstep interpreter (lanes.h) and the scalar ones (vm.h: the host's
// threaded interpreter, and the switch interpreter of the GPU with VG_FUSED_CODE): a load-time translation of
// validated bytecode into fused operations, one per pc where a common sequence starts
// (LOAD_VAR LOAD_CONST COMPARE_LT JUMP_IF_FALSE, FOR_RANGE + STORE_VAR, ...). The public
// bytecode is unchanged: a fused op is an internal shortcut that an interpreter may take at its
// first pc, and must behave exactly as its n single steps (same values, traps, step counts).
// The interpreter takes it only when every lane has fuel for all n steps and the stack checks of
// the sequence pass; otherwise it runs the plain instruction at that pc. Words after the first
// keep their own entry, so jumps into a sequence run it from there.
#pragma once
#include "core_types.h"
#include "opcodes.h"

namespace vg {

enum FusedKind : uint8_t {
  FX_NONE = 0,
  FX_BIN,        // [operand pushes] binary op [tail]: see Fused
  FX_MOV,        // LOAD_VAR a | LOAD_CONST a; STORE_VAR t
  FX_TEST,       // LOAD_VAR a; JUMP_IF_FALSE t | JUMP_IF_TRUE t (tail says which)
  FX_FOR_RANGE,  // [JUMP to it;] FOR_RANGE a; JUMP e; STORE_VAR t  (go: pc = after the store)
  FX_PENDING,    // not translated yet (fuse_pending / fuse_at)
  FX_FOR_LIST,   // [JUMP to it;] FOR_LIST a; JUMP e; STORE_VAR t  (lockstep only: xop stays plain)
  FX_SWAP2,      // SWAP; STORE_VAR a; STORE_VAR b [; JUMP t2]: a, b = x, y
};

enum FusedSrc : uint8_t { SRC_STACK = 0, SRC_VAR = 1, SRC_CONST = 2 };

enum FusedTail : uint8_t {
  TAIL_PUSH = 0,    // result stays on the stack
  TAIL_STORE,       // STORE_VAR t
  TAIL_JIF,         // JUMP_IF_FALSE t
  TAIL_JIT,         // JUMP_IF_TRUE t
  TAIL_JIF_OR_POP,  // JUMP_IF_FALSE_OR_POP t
  TAIL_JIT_OR_POP,  // JUMP_IF_TRUE_OR_POP t
  TAIL_STORE_JUMP,  // STORE_VAR t; JUMP t2
};

struct Fused {
  uint8_t kind;    // FusedKind
  uint8_t n;       // bytecode words (= steps) it covers
  uint8_t op;      // FX_BIN: the binary opcode (or INDEX: lockstep only)
  uint8_t lk, rk;  // FX_BIN: where the left / right operand comes from (FusedSrc)
  uint8_t tail;    // FusedTail (FX_TEST: TAIL_JIF or TAIL_JIT)
  uint8_t pushes;  // values the sequence pushes before its first pop (for the room check)
  uint8_t pops;    // FX_BIN: values taken from the stack as it was (for the underflow check)
  int32_t a, b;    // operands: a local slot or a constant (FX_FOR_RANGE: a = the range's slots)
  int32_t t, t2;   // store slot or jump target; TAIL_STORE_JUMP: t2 = jump target
                   // FX_FOR_RANGE, FX_FOR_LIST: t = loop variable slot, t2 = exit target, b = go pc
};

static_assert(sizeof(Fused) == 24, "Fused: three 8-byte words (load_fused)");

// A copy of *p, from its six 32-bit words (little-endian: the flags are the bytes of words 0 and 1).
// On a GPU as three 8-byte loads (records are 8-byte aligned: a warp's translation area is, and
// they are 24 bytes apart), which ptxas otherwise reads field by field, a byte load for each flag;
// the host builds (the switch interpreter's tests) copy the words and unpack them the same way.
VG_HD inline Fused load_fused(const Fused* p) {
  uint32_t w[6];
#if defined(__CUDA_ARCH__)
  const uint2* q = reinterpret_cast<const uint2*>(p);
  const uint2 a = q[0], b = q[1], c = q[2];
  w[0] = a.x, w[1] = a.y, w[2] = b.x, w[3] = b.y, w[4] = c.x, w[5] = c.y;
#else
  __builtin_memcpy(w, p, sizeof w);
#endif
  Fused r;
  r.kind = (uint8_t)w[0], r.n = (uint8_t)(w[0] >> 8), r.op = (uint8_t)(w[0] >> 16), r.lk = (uint8_t)(w[0] >> 24);
  r.rk = (uint8_t)w[1], r.tail = (uint8_t)(w[1] >> 8), r.pushes = (uint8_t)(w[1] >> 16), r.pops = (uint8_t)(w[1] >> 24);
  r.a = (int32_t)w[2], r.b = (int32_t)w[3], r.t = (int32_t)w[4], r.t2 = (int32_t)w[5];
  return r;
}

// Binary ops and tails of FX_BIN in the order of the scalar interpreter's handlers (vm.h):
// xop = XOP_BIN + tail * NUM_BINOPS + op index.
#define VG_FX_BINOPS(X, T) X(BINARY_ADD, T) X(BINARY_SUB, T) X(BINARY_MUL, T) X(BINARY_DIV, T) X(BINARY_MOD, T) \
  X(MIN, T) X(MAX, T) X(COMPARE_LT, T) X(COMPARE_LE, T) X(COMPARE_GT, T) X(COMPARE_GE, T) X(COMPARE_EQ, T) X(COMPARE_NE, T)
#define VG_FX_TAILS(Y, X) Y(X, PUSH) Y(X, STORE) Y(X, JIF) Y(X, JIT) Y(X, JIF_OR_POP) Y(X, JIT_OR_POP) Y(X, STORE_JUMP)
constexpr int32_t NUM_TAILS = 7, NUM_BINOPS = 13;
// Internal dispatch codes of the scalar interpreter (never in public bytecode): below 64 the
// plain opcode; from XOP_BIN the fused handlers.
constexpr int32_t XOP_BIN = 64, XOP_MOV = XOP_BIN + NUM_BINOPS * NUM_TAILS, XOP_TEST_F = XOP_MOV + 1,
                  XOP_TEST_T = XOP_MOV + 2, XOP_FOR_RANGE = XOP_MOV + 3, XOP_SWAP2 = XOP_MOV + 4,
                  NUM_XOPS = XOP_MOV + 5;
// FXI_<binop>: the binary op's index in VG_FX_BINOPS (the switch interpreter's case values).
#define VG_FX_ENUM(NAME, T) FXI_##NAME,
enum FusedBinIndex : int32_t { VG_FX_BINOPS(VG_FX_ENUM, _) };
#undef VG_FX_ENUM

VG_HD inline int32_t binop_index(int32_t op) {
  int32_t i = 0, found = -1;
#define VG_FX_INDEX(NAME, T) if (op == OP_##NAME) found = i; i++;
  VG_FX_BINOPS(VG_FX_INDEX, _)
#undef VG_FX_INDEX
  return found;
}

namespace fuse_detail {

VG_HD inline bool is_binop(int32_t op) {
  switch (op) {
    case OP_BINARY_ADD: case OP_BINARY_SUB: case OP_BINARY_MUL: case OP_BINARY_DIV: case OP_BINARY_MOD:
    case OP_MIN: case OP_MAX: case OP_COMPARE_LT: case OP_COMPARE_LE: case OP_COMPARE_GT:
    case OP_COMPARE_GE: case OP_COMPARE_EQ: case OP_COMPARE_NE:
      return true;
    default:
      return false;
  }
}

// The binary ops that the lockstep interpreter fuses: is_binop's, and INDEX (xs[i]), which the
// scalar interpreter runs plain (its xop stays the opcode).
VG_HD inline bool is_lane_binop(int32_t op) { return is_binop(op) || op == OP_INDEX; }

// A plain operand push: LOAD_VAR (a slot) or a one-word LOAD_CONST (not followed by CONST_EXT).
VG_HD inline bool operand(const uint32_t* code, int32_t len, int32_t pc, uint8_t* src, int32_t* v) {
  uint32_t w = code[pc];
  if ((w & 0xFF) == OP_LOAD_VAR) {
    *src = SRC_VAR;
    *v = (int32_t)(w >> 8);
    return true;
  }
  if ((w & 0xFF) == OP_LOAD_CONST && !(pc + 1 < len && (code[pc + 1] & 0xFF) == OP_CONST_EXT)) {
    *src = SRC_CONST;
    *v = ((int32_t)w) >> 8;
    return true;
  }
  return false;
}

}  // namespace fuse_detail

// Jump targets of a program validated by vg::validate: target[pc] = 1 where control may enter
// other than from pc - 1 (jump targets, loop exits, return and entry points). [len + 1] flags.
// The targets that the word at pc makes (target[] zeroed first; words may be marked in any order,
// as a GPU warp's lanes do, each writing 1).
VG_HD inline void fuse_mark_targets(const uint32_t* code, int32_t len, uint8_t* target, int32_t pc) {
  uint32_t w = code[pc];
  int32_t op = w & 0xFF, arg = (int32_t)(w >> 8);
  switch (op) {
    case OP_JUMP: case OP_JUMP_IF_FALSE: case OP_JUMP_IF_TRUE: case OP_JUMP_IF_FALSE_OR_POP:
    case OP_JUMP_IF_TRUE_OR_POP:
      target[arg] = 1;
      break;
    case OP_FOR_RANGE: case OP_FOR_LIST:
      target[pc + 1] = 1;
      if (pc + 2 <= len) target[pc + 2] = 1;
      break;
    case OP_CALL: case OP_FUNC:
      target[pc + 1] = 1;  // return point, entry point
      break;
    default:
      break;
  }
}

inline void fuse_targets(const uint32_t* code, int32_t len, uint8_t* target) {
  for (int32_t pc = 0; pc <= len; pc++) target[pc] = 0;
  for (int32_t pc = 0; pc < len; pc++) fuse_mark_targets(code, len, target, pc);
}

// Mark every pc as not yet translated (FX_PENDING; xop: the plain opcode), so that an
// interpreter translates only the pcs it reaches (fuse_at): short runs of long programs would
// spend more on translating than they save.
inline void fuse_pending(const uint32_t* code, int32_t len, Fused* fx, uint8_t* xop) {
  for (int32_t pc = 0; pc < len; pc++) {
    fx[pc].kind = FX_PENDING;
    int32_t op = code[pc] & 0xFF;
    xop[pc] = (uint8_t)(op < NUM_OPCODES ? op : 0);  // 0: an invalid opcode
  }
}

// Translate the sequence that starts at pc into fx[pc] and xop[pc] (nullable). Sequences never
// continue across a jump target, so groups of lanes that wait at a join point meet the running
// group there (lanes.h reconverges at equal pcs).
VG_HD inline void fuse_at(const uint32_t* code, int32_t len, const uint8_t* target, int32_t pc, Fused* fx, uint8_t* xop) {
  using namespace fuse_detail;
  Fused f = {};
  uint32_t w = code[pc];
  int32_t op = w & 0xFF;
  // The k-th word after pc, when it exists and is not a jump target.
  auto at = [&](int32_t k) -> int32_t {
    int32_t q = pc + k;
    return q < len && !target[q] ? (int32_t)(code[q] & 0xFF) : -1;
  };
  auto arg_at = [&](int32_t k) -> int32_t { return (int32_t)(code[pc + k] >> 8); };
  uint8_t s0, s1;
  int32_t v0, v1;
  int32_t k = 0;  // words of the sequence so far
  if (operand(code, len, pc, &s0, &v0) && at(1) >= 0 && operand(code, len, pc + 1, &s1, &v1) && is_lane_binop(at(2))) {
    f.kind = FX_BIN, f.lk = s0, f.a = v0, f.rk = s1, f.b = v1, f.op = (uint8_t)at(2), f.pushes = 2, f.pops = 0;
    k = 3;
  } else if (operand(code, len, pc, &s1, &v1) && is_lane_binop(at(1))) {
    f.kind = FX_BIN, f.lk = SRC_STACK, f.rk = s1, f.b = v1, f.op = (uint8_t)at(1), f.pushes = 1, f.pops = 1;
    k = 2;
  } else if (is_lane_binop(op)) {
    f.kind = FX_BIN, f.lk = SRC_STACK, f.rk = SRC_STACK, f.op = (uint8_t)op, f.pushes = 0, f.pops = 2;
    k = 1;
  }
  if (f.kind == FX_BIN) {
    f.tail = TAIL_PUSH;
    switch (at(k)) {
      case OP_STORE_VAR:
        f.t = arg_at(k);
        f.tail = TAIL_STORE;
        k++;
        if (at(k) == OP_JUMP) f.t2 = arg_at(k), f.tail = TAIL_STORE_JUMP, k++;
        break;
      case OP_JUMP_IF_FALSE: f.t = arg_at(k), f.tail = TAIL_JIF, k++; break;
      case OP_JUMP_IF_TRUE: f.t = arg_at(k), f.tail = TAIL_JIT, k++; break;
      case OP_JUMP_IF_FALSE_OR_POP: f.t = arg_at(k), f.tail = TAIL_JIF_OR_POP, k++; break;
      case OP_JUMP_IF_TRUE_OR_POP: f.t = arg_at(k), f.tail = TAIL_JIT_OR_POP, k++; break;
      default: break;
    }
    if (k < 2) f.kind = FX_NONE;  // a lone binary op: nothing to gain
  } else if (operand(code, len, pc, &s0, &v0) && at(1) == OP_STORE_VAR) {
    f.kind = FX_MOV, f.lk = s0, f.a = v0, f.t = arg_at(1), f.pushes = 1;
    k = 2;
  } else if (op == OP_LOAD_VAR && (at(1) == OP_JUMP_IF_FALSE || at(1) == OP_JUMP_IF_TRUE)) {
    f.kind = FX_TEST, f.a = (int32_t)(w >> 8), f.t = arg_at(1), f.pushes = 1;
    f.tail = at(1) == OP_JUMP_IF_FALSE ? TAIL_JIF : TAIL_JIT;
    k = 2;
  } else if (op == OP_SWAP && at(1) == OP_STORE_VAR && at(2) == OP_STORE_VAR) {
    f.kind = FX_SWAP2, f.a = arg_at(1), f.b = arg_at(2), f.pops = 2, f.tail = TAIL_STORE;
    k = 3;
    if (at(3) == OP_JUMP) f.t2 = arg_at(3), f.tail = TAIL_STORE_JUMP, k = 4;
  } else {
    // FOR_RANGE a; JUMP e; STORE_VAR x (the compiler's loop head; FOR_LIST likewise),
    // optionally entered by a JUMP to it (the loop's back edge). Both paths take the same
    // number of steps.
    int32_t h = op == OP_JUMP ? (int32_t)(w >> 8) : pc;
    int32_t extra = op == OP_JUMP ? 1 : 0;
    int32_t hop = h + 2 < len ? (int32_t)(code[h] & 0xFF) : -1;
    if ((op == OP_JUMP || op == hop) && (hop == OP_FOR_RANGE || hop == OP_FOR_LIST) &&
        (code[h + 1] & 0xFF) == OP_JUMP && (code[h + 2] & 0xFF) == OP_STORE_VAR) {
      f.kind = hop == OP_FOR_RANGE ? FX_FOR_RANGE : FX_FOR_LIST;
      f.a = (int32_t)(code[h] >> 8), f.t2 = (int32_t)(code[h + 1] >> 8);
      f.t = (int32_t)(code[h + 2] >> 8), f.b = h + 3, f.pushes = 1;
      k = 2 + extra;
    }
  }
  f.n = (uint8_t)k;
  if (f.kind == FX_NONE) f.n = 0;
  fx[pc] = f;
  if (xop) {
    int32_t x = op < NUM_OPCODES ? op : 0;  // 0: an invalid opcode
    if (f.kind == FX_BIN && f.op != OP_INDEX) x = XOP_BIN + f.tail * NUM_BINOPS + binop_index(f.op);
    else if (f.kind == FX_MOV) x = XOP_MOV;
    else if (f.kind == FX_TEST) x = f.tail == TAIL_JIF ? XOP_TEST_F : XOP_TEST_T;
    else if (f.kind == FX_FOR_RANGE) x = XOP_FOR_RANGE;
    else if (f.kind == FX_SWAP2) x = XOP_SWAP2;
    xop[pc] = (uint8_t)x;
  }
}

// Translate a whole program validated by vg::validate: fx[0 .. len), xop[0 .. len) (nullable),
// with `target` as scratch for len + 1 flags.
inline void fuse_program(const uint32_t* code, int32_t len, Fused* fx, uint8_t* target, uint8_t* xop = nullptr) {
  fuse_targets(code, len, target);
  for (int32_t pc = 0; pc < len; pc++) fuse_at(code, len, target, pc, fx, xop);
}

}  // namespace vg
