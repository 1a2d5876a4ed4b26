// The vramgym VM: a bytecode validator and a stack interpreter, in one header that compiles for
// the host and for CUDA. One call runs one (program, input) pair in caller-owned scratch memory;
// every fault is a trap code, never a crash: bytecode is validated before it runs (operands,
// jump targets, call targets) and stack, list and index use are checked as it runs.
#pragma once
#include "core_types.h"
#include "opcodes.h"
#if defined(__GNUC__) && !defined(__CUDACC__) && !defined(__CUDACC_RTC__) && !defined(VG_NO_THREADED_DISPATCH)
#define VG_HOST_THREADED 1
#endif
// -DVG_FUSED_CODE=1: the switch interpreter (CUDA's) dispatches through a program's translation
// (fuse.h: xop codes and Fused records, made before the run) as the host's threaded one does, so
// one dispatch runs a whole common sequence. vramgym.vm.cuda.FUSED_CODE; off by default until a
// GPU measures it.
#ifndef VG_FUSED_CODE
#define VG_FUSED_CODE 0
#endif
#if VG_HOST_THREADED || VG_FUSED_CODE
#include "fuse.h"  // superinstructions: the host's threaded interpreter takes them, and VG_FUSED_CODE's
#endif

namespace vg {

struct Fused;  // fuse.h (host only)

struct VMConfig {
  int32_t fuel;        // executed instructions before out_of_fuel
  int32_t max_depth;   // nested calls before recursion (the entry call is depth 0)
  int32_t heap_size;   // ints of list memory
  int32_t max_lists;   // lists created per run
  int32_t stack_size;  // values: locals and operands of all frames
};

struct Frame {
  int32_t ret_pc, base, obase;
};

struct ListHdr {
  int32_t off, len, cap;  // data lives in heap[off .. off + cap)
};

// Scratch memory of one run, owned by the caller (a thread on the CPU, a lane on the GPU).
struct Workspace {
  int32_t* stack;   // [stack_size]
  Frame* frames;    // [max_depth]
  ListHdr* lists;   // [max_lists]
  int32_t* heap;    // [heap_size]
  int32_t nlists, hp;
};

struct RunResult {
  int32_t status;  // Trap
  int32_t value;   // int/bool value, or a list reference into the workspace
  int32_t steps;   // executed instructions
};

VG_HD inline int32_t func_nparams(uint32_t w) { return (int32_t)((w >> 8) & 0xFF); }
VG_HD inline int32_t func_nlocals(uint32_t w) { return (int32_t)((w >> 16) & 0xFF); }

// Check every word of a program image. Returns -1 when valid, else the index of the first bad
// word. *entry_pc receives the pc of the FUNC word of function number `entry` (or -1).
VG_HD inline int32_t validate(const uint32_t* code, int32_t len, int32_t entry, int32_t* entry_pc) {
  *entry_pc = -1;
  if (len <= 0) return 0;
  if ((code[0] & 0xFF) != OP_FUNC) return 0;
  int32_t fi = 0;
  for (int32_t start = 0; start < len; fi++) {
    int32_t end = start + 1;
    while (end < len && (code[end] & 0xFF) != OP_FUNC) end++;
    uint32_t h = code[start];
    int32_t np = func_nparams(h), nl = func_nlocals(h);
    if ((h >> 24) != 0 || np > nl || np > MAX_PARAMS) return start;
    if (fi == entry) *entry_pc = start;
    for (int32_t pc = start + 1; pc < end; pc++) {
      uint32_t w = code[pc];
      int32_t arg = (int32_t)(w >> 8);
      bool ok;
      switch (w & 0xFF) {
        case OP_LOAD_CONST: ok = true; break;
        case OP_CONST_EXT: ok = arg < 256; break;
        case OP_LOAD_VAR: case OP_STORE_VAR: ok = arg < nl; break;
        // a loop head skips the word after it when the loop goes on: that word must be in the function
        case OP_FOR_RANGE: ok = arg + 2 < nl && pc + 1 < end; break;
        case OP_FOR_LIST: ok = arg + 1 < nl && pc + 1 < end; break;
        case OP_REVERSE: ok = arg >= 2 && arg <= 255; break;
        case OP_BUILD_LIST: ok = arg <= 255; break;
        case OP_JUMP: case OP_JUMP_IF_FALSE: case OP_JUMP_IF_TRUE:
        case OP_JUMP_IF_FALSE_OR_POP: case OP_JUMP_IF_TRUE_OR_POP:
          ok = arg > start && arg <= end;  // the end: reached only by dead code, traps there
          break;
        case OP_CALL: ok = arg < len && (code[arg] & 0xFF) == OP_FUNC; break;
        case OP_POP: case OP_DUP: case OP_DUP2: case OP_SWAP: case OP_ROT3:
        case OP_BINARY_ADD: case OP_BINARY_SUB: case OP_BINARY_MUL: case OP_BINARY_DIV:
        case OP_BINARY_MOD: case OP_UNARY_NEG: case OP_UNARY_NOT: case OP_ABS: case OP_MIN:
        case OP_MAX: case OP_COMPARE_LT: case OP_COMPARE_LE: case OP_COMPARE_GT:
        case OP_COMPARE_GE: case OP_COMPARE_EQ: case OP_COMPARE_NE: case OP_RETURN:
        case OP_LIST_REPEAT: case OP_LIST_CONCAT: case OP_LIST_EXTEND: case OP_LEN:
        case OP_INDEX: case OP_STORE_INDEX: case OP_APPEND: case OP_LIST_POP:
          ok = arg == 0;  // canonical encoding: unused arguments are zero
          break;
        default: ok = false;
      }
      if (!ok) return pc;
    }
    start = end;
  }
  return -1;
}

// A new list of length n (capacity n). Returns its reference, or -1 when memory is exhausted.
VG_HD inline int32_t new_list(Workspace& ws, const VMConfig& cfg, int64_t n) {
  if (ws.nlists >= cfg.max_lists || n > (int64_t)(cfg.heap_size - ws.hp)) return -1;
  ListHdr& l = ws.lists[ws.nlists];
  l.off = ws.hp;
  l.len = (int32_t)n;
  l.cap = (int32_t)n;
  ws.hp += (int32_t)n;
  return ws.nlists++;
}

// Make room for `need` elements in list r: grow in place when it is the last block, else move
// it to a new block at the end; either takes twice the size, capped at the memory left. False
// only when `need` elements do not fit.
VG_HD inline bool reserve(Workspace& ws, const VMConfig& cfg, int32_t r, int64_t need) {
  ListHdr& l = ws.lists[r];
  if (need <= l.cap) return true;
  int64_t want = need > 2 * (int64_t)l.cap ? need : 2 * (int64_t)l.cap;
  if (want < 4) want = 4;
  if (l.off + l.cap == ws.hp) {  // last block: extend in place
    int64_t room = cfg.heap_size - l.off;
    if (need > room) return false;
    if (want > room) want = room;
    ws.hp = l.off + (int32_t)want;
    l.cap = (int32_t)want;
    return true;
  }
  int64_t room = cfg.heap_size - ws.hp;
  if (need > room) return false;
  if (want > room) want = room;
  int32_t* h = ws.heap;
  for (int32_t k = 0; k < l.len; k++) h[ws.hp + k] = h[l.off + k];
  l.off = ws.hp;
  l.cap = (int32_t)want;
  ws.hp += (int32_t)want;
  return true;
}

// Decode one encoded input into the entry frame's locals slots[k * stride] (lists go to the
// workspace's heap) and zero the other locals. Returns TRAP_OK or the trap of a bad input; with
// `want` (the parameters' kinds, nullable) a value of another kind is one.
VG_HD inline int32_t load_args(uint32_t header, const int32_t* in, int32_t in_len, const VMConfig& cfg,
                               Workspace& ws, int32_t* slots, int32_t stride, const int8_t* want = nullptr) {
  int32_t np = func_nparams(header), nl = func_nlocals(header);
  if (nl > cfg.stack_size) return TRAP_RECURSION;
  int32_t i = 0;
  for (int32_t k = 0; k < np; k++) {
    if (i + 1 >= in_len) return TRAP_BAD_INPUT;
    int32_t kind = in[i++];
    if (want && kind != want[k]) return TRAP_BAD_INPUT;
    if (kind == KIND_INT || (kind == KIND_BOOL && (in[i] == 0 || in[i] == 1))) {
      slots[k * stride] = in[i++];
    } else if (kind == KIND_LIST) {
      int32_t n = in[i++];
      if (n < 0 || n > in_len - i) return TRAP_BAD_INPUT;
      int32_t r = new_list(ws, cfg, n);
      if (r < 0) return TRAP_OUT_OF_MEMORY;
      int32_t* d = ws.heap + ws.lists[r].off;
      for (int32_t e = 0; e < n; e++) d[e] = in[i + e];
      i += n;
      slots[k * stride] = r;
    } else {
      return TRAP_BAD_INPUT;
    }
  }
  if (i != in_len) return TRAP_BAD_INPUT;
  for (int32_t k = np; k < nl; k++) slots[k * stride] = 0;
  return TRAP_OK;
}

// x op y of a binary opcode (arithmetic, min/max, comparison) into *r, or its trap: Python's
// semantics within int32 (floor division and modulo; overflow traps), for the superinstructions
// of both scalar interpreters. The plain handlers below spell the same rules out (the GPU's plain
// kernel keeps its register count so), and lanes.h vectorizes them.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define VG_ALWAYS_INLINE __forceinline__
#elif defined(__GNUC__)
#define VG_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define VG_ALWAYS_INLINE inline
#endif
// Always inlined: its ~100 call sites each fold the switch on a constant op to a few instructions.
VG_HD VG_ALWAYS_INLINE int32_t eval_binop(int32_t op, int32_t x, int32_t y, int32_t* r) {
  int64_t v;
  switch (op) {
    case OP_BINARY_ADD: v = (int64_t)x + y; break;
    case OP_BINARY_SUB: v = (int64_t)x - y; break;
    case OP_BINARY_MUL: v = (int64_t)x * y; break;
    case OP_BINARY_DIV: {
      if (y == 0) return TRAP_ZERO_DIVISION;
      if (x == VG_INT32_MIN && y == -1) return TRAP_OVERFLOW;
      int32_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
      *r = q;
      return TRAP_OK;
    }
    case OP_BINARY_MOD: {
      if (y == 0) return TRAP_ZERO_DIVISION;
      int32_t m = y == -1 ? 0 : x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      *r = m;
      return TRAP_OK;
    }
    case OP_MIN: *r = y < x ? y : x; return TRAP_OK;
    case OP_MAX: *r = y > x ? y : x; return TRAP_OK;
    case OP_COMPARE_LT: *r = x < y; return TRAP_OK;
    case OP_COMPARE_LE: *r = x <= y; return TRAP_OK;
    case OP_COMPARE_GT: *r = x > y; return TRAP_OK;
    case OP_COMPARE_GE: *r = x >= y; return TRAP_OK;
    case OP_COMPARE_EQ: *r = x == y; return TRAP_OK;
    default: *r = x != y; return TRAP_OK;
  }
  if (v < VG_INT32_MIN || v > VG_INT32_MAX) return TRAP_OVERFLOW;
  *r = (int32_t)v;
  return TRAP_OK;
}

// Opcode sets as 64-bit masks (validated code has opcodes below NUM_OPCODES <= 64).
static_assert(NUM_OPCODES <= 64, "opcode masks");
constexpr uint64_t op_bit(int32_t op) { return (uint64_t)1 << op; }
constexpr uint64_t ops_range(int32_t lo, int32_t hi) { return lo > hi ? 0 : op_bit(lo) | ops_range(lo + 1, hi); }
VG_HD inline bool op_in(uint64_t set, int32_t op) { return (set >> (op & 63)) & 1; }

// Cycle check. A run that takes the same backward JUMP twice with an empty operand stack, and
// ran no instruction of OPS_WRITES in between (opcodes.WRITES: nothing written to a local, a list
// or a frame; a STORE_VAR of the value that the local holds writes nothing), is back in the state
// it was in: it would go round until its fuel ran out, so it stops there at once with the result
// that the long way gives (out_of_fuel, steps = fuel). A random policy writes many such loops
// (`while 3: pass`, `while 7: v = 9`), each a whole fuel budget per test without the check. Every
// interpreter starts its check over where it writes (fused sequences included);
// -DVG_NO_CYCLE_CHECK turns it off (the tests compare both builds).
#ifdef VG_NO_CYCLE_CHECK
constexpr bool CYCLE_CHECK = false;
#else
constexpr bool CYCLE_CHECK = true;
#endif

#ifndef VG_SWITCH_FUSE
#define VG_SWITCH_FUSE 0
#endif
#if VG_SWITCH_FUSE && VG_FUSED_CODE
#error "VG_SWITCH_FUSE (peephole superinstructions) and VG_FUSED_CODE (translated ones) exclude each other"
#endif
// -DVG_PREFETCH=1: the switch interpreter loads each step's next word ahead (run_from; the GPU
// kernels' variant vramgym.vm.cuda.PREFETCH). Off by default until a GPU measures it.
#ifndef VG_PREFETCH
#define VG_PREFETCH 0
#endif
#if VG_SWITCH_FUSE
// Superinstructions of the switch interpreter (CUDA's), found by peeking at the words after the
// one just fetched, so they need no translation pass and no memory: an operand push with what
// follows it (LOAD_VAR/LOAD_CONST [LOAD_VAR/LOAD_CONST] binary-op [STORE_VAR [JUMP] | conditional
// jump]; LOAD + STORE_VAR; LOAD + JUMP_IF_*) and the for-range loop head ([JUMP to it;] FOR_RANGE;
// JUMP; STORE_VAR) run as one dispatch. Like fuse.h's, a sequence runs whole only when the fuel
// and stack checks of all its steps pass (else the plain instruction runs: it traps exactly where
// the sequence would), and gives the same values, traps and step counts as its single steps.
// Enabled by -DVG_SWITCH_FUSE=1 (vramgym.vm.cuda.SWITCH_FUSE on the GPU).
static_assert(OP_BINARY_MOD == OP_BINARY_ADD + 4 && OP_COMPARE_NE == OP_MIN + 7 &&
                  OP_JUMP_IF_TRUE_OR_POP == OP_JUMP_IF_FALSE + 3, "opcode ranges");
constexpr uint64_t OPS_PUSH = op_bit(OP_LOAD_VAR) | op_bit(OP_LOAD_CONST);
constexpr uint64_t OPS_BINARY = ops_range(OP_BINARY_ADD, OP_BINARY_MOD) | ops_range(OP_MIN, OP_COMPARE_NE);
constexpr uint64_t OPS_TAIL = op_bit(OP_STORE_VAR) | ops_range(OP_JUMP_IF_FALSE, OP_JUMP_IF_TRUE_OR_POP);

// Called by the handlers of LOAD_VAR and LOAD_CONST (fused_push) and of FOR_RANGE and JUMP
// (fused_loop_head) right after the fetch of their word w (pc and steps already past it): runs
// the sequence that starts there and returns true (status set when it trapped), or false: run w
// plainly. Other opcodes pay nothing.
VG_HD inline bool fused_push(const uint32_t* code, int32_t len, uint32_t w, int32_t fuel, int32_t stack_size,
                             int32_t* st, int32_t& pc, int32_t& sp, int32_t base, int32_t obase, int32_t& steps,
                             int32_t& status, int32_t& cyc) {
  const int32_t op0 = w & 0xFF, arg = (int32_t)(w >> 8);
  // Only where the two words after the next one exist (near the end of the code: plain steps),
  // and not when the push's own room check fails (plain traps there).
  if (pc + 2 >= len || sp + 1 > stack_size) return false;
  const uint32_t w1 = code[pc], w2 = code[pc + 1], w3 = code[pc + 2];  // independent loads
  const int32_t op1 = w1 & 0xFF, a1 = (int32_t)(w1 >> 8);
  if (op1 == OP_STORE_VAR || op1 == OP_JUMP_IF_FALSE || op1 == OP_JUMP_IF_TRUE) {
    if (steps >= fuel) return false;  // 2 steps: fuel - steps >= 1 (no overflow near INT32_MAX)
    const int32_t x = op0 == OP_LOAD_VAR ? st[base + arg] : ((int32_t)w) >> 8;
    steps++;
    if (op1 == OP_STORE_VAR) cyc = st[base + a1] == x ? cyc : -1, st[base + a1] = x, pc++;
    else pc = (x != 0) == (op1 == OP_JUMP_IF_TRUE) ? a1 : pc + 1;
    return true;
  }
  // A binary op with both operands pushed here (k = 2), or the left one already on the stack
  // (k = 1); its result goes to slot s0. The shape comes from the opcodes alone, before any
  // operand is read; wt is the word after the binary op.
  const bool two = op_in(OPS_PUSH, op1) && op_in(OPS_BINARY, w2 & 0xFF);
  if (!two && !op_in(OPS_BINARY, op1)) return false;
  const int32_t x = op0 == OP_LOAD_VAR ? st[base + arg] : ((int32_t)w) >> 8;
  int32_t k, l, r, s0, opb;
  uint32_t wt;
  if (two) {
    if (sp + 2 > stack_size) return false;
    k = 2, l = x, r = op1 == OP_LOAD_VAR ? st[base + a1] : ((int32_t)w1) >> 8, s0 = sp, opb = w2 & 0xFF, wt = w3;
  } else {
    if (sp - 1 < obase) return false;
    k = 1, l = st[sp - 1], r = x, s0 = sp - 1, opb = op1, wt = w2;
  }
  // The tail: STORE_VAR [JUMP], or a conditional jump.
  int32_t n = k + 1, ot = wt & 0xFF, t = (int32_t)(wt >> 8), t2 = -1;
  if (op_in(OPS_TAIL, ot)) {
    n++;
    if (ot == OP_STORE_VAR && pc + k + 1 < len) {
      const uint32_t wj = code[pc + k + 1];
      if ((wj & 0xFF) == OP_JUMP) t2 = (int32_t)(wj >> 8), n++;
    }
  } else {
    ot = -1;
  }
  if (n - 1 > fuel - steps) return false;  // fuel >= steps here: no overflow
  int32_t v;
  const int32_t trap = eval_binop(opb, l, r, &v);
  if (trap != TRAP_OK) {  // at the binary op, the sequence's (k + 1)th step
    steps += k;
    status = trap;
    return true;
  }
  const int32_t next = pc - 1 + n;
  steps += n - 1;
  switch (ot) {
    case OP_STORE_VAR:
      cyc = st[base + t] == v ? cyc : -1, st[base + t] = v, sp = s0, pc = t2 >= 0 ? t2 : next;
      if (CYCLE_CHECK && t2 >= 0 && t2 < next && sp == obase) {  // vm.h's cycle check at the JUMP
        if (cyc == next) {
          steps = fuel;
          status = TRAP_OUT_OF_FUEL;
          return true;
        }
        cyc = next;
      }
      break;
    case OP_JUMP_IF_FALSE: sp = s0, pc = v == 0 ? t : next; break;
    case OP_JUMP_IF_TRUE: sp = s0, pc = v != 0 ? t : next; break;
    case OP_JUMP_IF_FALSE_OR_POP:
      if (v == 0) st[s0] = v, sp = s0 + 1, pc = t;
      else sp = s0, pc = next;
      break;
    case OP_JUMP_IF_TRUE_OR_POP:
      if (v != 0) st[s0] = v, sp = s0 + 1, pc = t;
      else sp = s0, pc = next;
      break;
    default: st[s0] = v, sp = s0 + 1, pc = next; break;  // the result stays on the stack
  }
  return true;
}

// The loop head: [JUMP h;] FOR_RANGE a; JUMP e; STORE_VAR x at h. Both ways take 2 steps (3 with
// the JUMP to it): go on (the counter into x) or leave through JUMP e. w: the FOR_RANGE or JUMP.
VG_HD inline bool fused_loop_head(const uint32_t* code, int32_t len, uint32_t w, int32_t fuel, int32_t stack_size,
                                  int32_t* st, int32_t& pc, int32_t& sp, int32_t base, int32_t /*obase*/,
                                  int32_t& steps, int32_t& status, int32_t& cyc) {
  const int32_t extra = (w & 0xFF) == OP_JUMP ? 1 : 0;
  const int32_t h = extra ? (int32_t)(w >> 8) : pc - 1;
  if (h + 2 >= len || (code[h] & 0xFF) != OP_FOR_RANGE || (code[h + 1] & 0xFF) != OP_JUMP ||
      (code[h + 2] & 0xFF) != OP_STORE_VAR || 1 + extra > fuel - steps || sp + 1 > stack_size)
    return false;
  int32_t* s = st + base + (int32_t)(code[h] >> 8);  // counter, stop, step
  cyc = -1;  // writes the counter (cycle check)
  steps += extra;
  if (s[2] == 0) {
    status = TRAP_VALUE_ERROR;
    return true;
  }
  steps++;
  if (s[2] > 0 ? s[0] < s[1] : s[0] > s[1]) {
    int32_t c = s[0];
    int64_t nx = (int64_t)c + s[2];
    s[0] = (nx > VG_INT32_MAX || nx < VG_INT32_MIN) ? s[1] : (int32_t)nx;  // past int32 is past stop
    st[base + (int32_t)(code[h + 2] >> 8)] = c;  // after the counter: the loop variable may be a range slot
    pc = h + 3;
  } else {
    pc = (int32_t)(code[h + 1] >> 8);
  }
  return true;
}
#endif

// Continue a run from a given state: pc, the operand stack in ws.stack[0 .. sp), the frame of
// depth `depth` at base/obase with its callers in ws.frames, and `steps` already executed.
// The lockstep interpreter (lanes.h) hands lanes that run alone over to this loop.
// fx/xop (nullable, host only): the program's superinstructions from fuse_program.
VG_HD inline RunResult run_from(const uint32_t* code, int32_t len, const VMConfig& cfg, Workspace& ws, int32_t pc,
                                int32_t sp, int32_t base, int32_t obase, int32_t depth, int32_t steps,
                                const Fused* fx = nullptr, const uint8_t* xop = nullptr) {
  RunResult res;
  int32_t* st = ws.stack;
  int32_t status = TRAP_OK;
  int32_t result = 0;
  // Locals, not cfg./ws. fields: stores through the int32 stack could alias them otherwise.
  const int32_t fuel = cfg.fuel, stack_size = cfg.stack_size, max_depth = cfg.max_depth;
  int32_t* heap = ws.heap;
  ListHdr* lists = ws.lists;
  uint32_t w;
  int32_t arg;
  int32_t cyc = -1;  // the pc after the last backward JUMP taken with an empty operand stack, if
                     // nothing was written since (cycle check above); else -1
#if VG_HOST_THREADED || VG_FUSED_CODE
  const Fused* f = nullptr;  // the superinstruction at hand and its first stack slot (handlers below)
  int32_t fx_s0 = 0;
#endif

#if VG_HOST_THREADED
#define VG_TRAP(t) do { status = (t); goto done; } while (0)
#else
// A trap returns where it happens. Through the shared exit below, every check's branch carried
// the exit's merged values (status, value, steps), and nvcc set them up before each check: three
// instructions a check, about 6 of the 44 SASS instructions of a GPU step (experiments/sass_steps.py).
#define VG_TRAP(t)      \
  do {                  \
    res.status = (t);   \
    res.value = 0;      \
    res.steps = steps;  \
    return res;         \
  } while (0)
#endif
#define VG_WRITES() cyc = -1
#define VG_STORE(slot, v) cyc = st[slot] == (v) ? cyc : -1, st[slot] = (v)  // the value it held: no write
// At a JUMP to `target` whose word is at id - 1 (plain or fused): a backward one taken a second
// time with nothing written between is a cycle.
#define VG_CYCLE_CHECK(target, id)                        \
  if (CYCLE_CHECK && (target) < (id) && sp == obase) {    \
    if (cyc == (id)) {                                    \
      steps = fuel;                                       \
      VG_TRAP(TRAP_OUT_OF_FUEL);                          \
    }                                                     \
    cyc = (id);                                           \
  }
#define VG_NEED(k) if (sp < obase + (k)) VG_TRAP(TRAP_BAD_BYTECODE)
#define VG_ROOM(k) if (sp + (k) > stack_size) VG_TRAP(TRAP_RECURSION)
#define VG_REF(r) if ((uint32_t)(r) >= (uint32_t)ws.nlists) VG_TRAP(TRAP_BAD_BYTECODE)
#define VG_INT32(r) if ((r) < VG_INT32_MIN || (r) > VG_INT32_MAX) VG_TRAP(TRAP_OVERFLOW)
// VG_ON_STEP(w): a hook at every fetched word (experiments/sass_steps.py counts the opcodes that a
// workload executes with it); nothing by default.
#ifndef VG_ON_STEP
#define VG_ON_STEP(w)
#endif
// VG_ON_DISPATCH(op): a hook at every dispatch of the switch interpreter with VG_FUSED_CODE (op: the
// plain opcode or the superinstruction's code; sass_steps.py counts them); nothing by default.
#ifndef VG_ON_DISPATCH
#define VG_ON_DISPATCH(op)
#endif
#define VG_FETCH()                                                \
  if (steps >= fuel) VG_TRAP(TRAP_OUT_OF_FUEL);                   \
  if ((uint32_t)pc >= (uint32_t)len) VG_TRAP(TRAP_BAD_BYTECODE);  \
  w = code[pc++];                                                 \
  arg = (int32_t)(w >> 8);                                        \
  VG_ON_STEP(w);                                                  \
  steps++;

#if VG_HOST_THREADED
  // Threaded dispatch on the host: one indirect jump per opcode handler predicts far better
  // than the single jump of a switch. CUDA keeps the switch (warps run one program anyway).
  // With xop, the dispatch code of each pc may name a superinstruction (fuse.h), whose handler
  // runs its whole sequence when the fuel and stack checks of every step pass, else goes on to
  // the plain handler of its first word.
#define VG_LABEL(name) &&L_##name,
#define VG_INV4 &&L_INVALID, &&L_INVALID, &&L_INVALID, &&L_INVALID,
#define VG_FX_LABEL_T(X, T) X(T)
#define VG_FX_LABEL(NAME, T) &&FX_##NAME##_##T,
#define VG_FX_LABELS(T) VG_FX_BINOPS(VG_FX_LABEL, T)
  static const void* const dispatch[NUM_XOPS] = {
      VG_OPCODE_LIST(VG_LABEL) VG_INV4 VG_INV4 VG_INV4 VG_INV4 &&L_INVALID, &&L_INVALID,  // codes 0 .. 63
      VG_FX_LABELS(PUSH) VG_FX_LABELS(STORE) VG_FX_LABELS(JIF) VG_FX_LABELS(JIT) VG_FX_LABELS(JIF_OR_POP)
      VG_FX_LABELS(JIT_OR_POP) VG_FX_LABELS(STORE_JUMP) &&FX_MOV, &&FX_TEST_F, &&FX_TEST_T, &&FX_FOR_RANGE,
      &&FX_SWAP2};
  static_assert(NUM_OPCODES + 18 == XOP_BIN, "dispatch table padding");
#undef VG_LABEL
#undef VG_INV4
#undef VG_FX_LABEL_T
#undef VG_FX_LABEL
#undef VG_FX_LABELS
#define VG_OP(name) L_##name:
#define VG_DEFAULT L_INVALID:
#define VG_TRY_FUSED(f)  // superinstructions come from xop here
#define VG_NEXT()                                                 \
  do {                                                            \
    VG_FETCH();                                                   \
    if (xop) goto* dispatch[xop[pc - 1]];                         \
    if ((w & 0xFF) >= NUM_OPCODES) VG_TRAP(TRAP_BAD_BYTECODE);    \
    goto* dispatch[w & 0xFF];                                     \
  } while (0)
#define VG_FX_CASE_BIN(NAME, T) FX_##NAME##_##T:
#define VG_FX_CASE(NAME) FX_##NAME:
#define VG_FX_PLAIN() goto* dispatch[w & 0xFF]
#define VG_FX_RECORD(p) f = (p)
  VG_NEXT();
  {
#else
#define VG_OP(name) case OP_##name:
#define VG_DEFAULT default:
#define VG_NEXT() continue
#if VG_SWITCH_FUSE
#define VG_TRY_FUSED(f)                                                                     \
  if (f(code, len, w, fuel, stack_size, st, pc, sp, base, obase, steps, status, cyc)) {     \
    if (status != TRAP_OK) goto done;                                                       \
    VG_NEXT();                                                                              \
  }
#else
#define VG_TRY_FUSED(f)
#endif
#if VG_FUSED_CODE
  // A superinstruction whose checks fail runs the plain handler of its first word instead.
#define VG_FX_CASE_BIN(NAME, T) case XOP_BIN + TAIL_##T * NUM_BINOPS + FXI_##NAME:
#define VG_FX_CASE(NAME) case XOP_##NAME:
#define VG_FX_PLAIN()    \
  do {                   \
    op = w & 0xFF;       \
    goto redispatch;     \
  } while (0)
  // The record as three 8-byte loads into registers (field by field, ptxas loaded each byte alone)
  Fused fx_rec;
#define VG_FX_RECORD(p) fx_rec = load_fused(p), f = &fx_rec
#endif
#if VG_PREFETCH
  // The word after this one is loaded while this one's handler runs (`nw`, the word at `npc`):
  // on the GPU a step's fetch is a round trip through L1 that the decode and the handler wait
  // for (L1TEX waits were 55% of a warp's stall, session 41). A step that falls through finds
  // its word loaded; after a jump, pc != npc and the word is fetched as before.
  int32_t npc = -1;
  uint32_t nw = 0;
#endif
  for (;;) {
    // VG_FETCH with its two checks as one branch (one compare-and-branch fewer a step)
    if ((steps >= fuel) | ((uint32_t)pc >= (uint32_t)len)) {
      if (steps >= fuel) VG_TRAP(TRAP_OUT_OF_FUEL);
      VG_TRAP(TRAP_BAD_BYTECODE);
    }
#if VG_PREFETCH
    w = pc == npc ? nw : code[pc];
    npc = ++pc;
    nw = code[pc < len - 1 ? pc : len - 1];  // in bounds: len > 0 here; a pc at len traps above first
#else
    w = code[pc++];
#endif
    arg = (int32_t)(w >> 8);
    VG_ON_STEP(w);
    steps++;
#if VG_FUSED_CODE
    // the pc's translation, when the program has one: a superinstruction's code from XOP_BIN on
    int32_t op = xop ? xop[pc - 1] : (int32_t)(w & 0xFF);
    VG_ON_DISPATCH(op);
  redispatch:
    switch (op) {
#else
    switch (w & 0xFF) {
#endif
#endif
#if VG_HOST_THREADED || VG_FUSED_CODE
    // Superinstructions. On entry the first word is fetched and counted (pc and steps past it).
#define VG_FX_ENTER()                                                                          \
  VG_FX_RECORD(fx + (pc - 1));                                                                 \
  if (f->n - 1 > fuel - steps || sp + f->pushes > stack_size || sp - f->pops < obase)          \
    VG_FX_PLAIN();                                                                             \
  fx_s0 = sp - f->pops;
#define VG_FX_OPERANDS()                                                                       \
  int32_t x = f->lk == SRC_CONST ? f->a : st[f->lk == SRC_VAR ? base + f->a : fx_s0];          \
  int32_t y = f->rk == SRC_CONST ? f->b : st[f->rk == SRC_VAR ? base + f->b : sp - 1];
    // The binary op is the sequence's (pushes + 1)th step: a trap there counts the steps before.
#define VG_FX_TRAP(t) do { steps += f->pushes; VG_TRAP(t); } while (0)
#define VG_FX_TAIL_PUSH st[fx_s0] = r; sp = fx_s0 + 1; pc += f->n - 1;
#define VG_FX_TAIL_STORE VG_STORE(base + f->t, r); sp = fx_s0; pc += f->n - 1;
#define VG_FX_TAIL_STORE_JUMP VG_STORE(base + f->t, r); sp = fx_s0; VG_CYCLE_CHECK(f->t2, pc - 1 + f->n); pc = f->t2;
#define VG_FX_TAIL_JIF sp = fx_s0; pc = r == 0 ? f->t : pc + f->n - 1;
#define VG_FX_TAIL_JIT sp = fx_s0; pc = r != 0 ? f->t : pc + f->n - 1;
#define VG_FX_TAIL_JIF_OR_POP st[fx_s0] = r; if (r == 0) sp = fx_s0 + 1, pc = f->t; else sp = fx_s0, pc += f->n - 1;
#define VG_FX_TAIL_JIT_OR_POP st[fx_s0] = r; if (r != 0) sp = fx_s0 + 1, pc = f->t; else sp = fx_s0, pc += f->n - 1;
#define VG_FX_HANDLER(NAME, T)       \
  VG_FX_CASE_BIN(NAME, T) {          \
    VG_FX_ENTER();                   \
    VG_FX_OPERANDS();                \
    int32_t r;                       \
    int32_t t_ = eval_binop(OP_##NAME, x, y, &r); \
    if (t_ != TRAP_OK) VG_FX_TRAP(t_);            \
    steps += f->n - 1;               \
    VG_FX_TAIL_##T                   \
    VG_NEXT();                       \
  }
#if VG_HOST_THREADED
#define VG_FX_HANDLERS(T) VG_FX_BINOPS(VG_FX_HANDLER, T)  // a handler a (binop, tail): one jump each
#else
// The switch interpreter (VG_FUSED_CODE): every (binop, tail) code shares one handler (VG_FX_BIN
// below) that switches on the record's op and tail. A handler each took the kernel to 96
// registers unbounded, 256 bytes of spill in 48; one takes 64, 64 bytes (sm_90, session 44).
#define VG_FX_CASE_ONLY(NAME, T) VG_FX_CASE_BIN(NAME, T)
#define VG_FX_HANDLERS(T) VG_FX_BINOPS(VG_FX_CASE_ONLY, T)
#endif
    VG_FX_HANDLERS(PUSH)
    VG_FX_HANDLERS(STORE)
    VG_FX_HANDLERS(JIF)
    VG_FX_HANDLERS(JIT)
    VG_FX_HANDLERS(JIF_OR_POP)
    VG_FX_HANDLERS(JIT_OR_POP)
    VG_FX_HANDLERS(STORE_JUMP)
#if !VG_HOST_THREADED
  {  // VG_FX_BIN: the cases just above
    VG_FX_ENTER();
    VG_FX_OPERANDS();
    int32_t r;
    const int32_t t_ = eval_binop(f->op, x, y, &r);
    if (t_ != TRAP_OK) VG_FX_TRAP(t_);
    steps += f->n - 1;
    switch (f->tail) {
      case TAIL_PUSH: { VG_FX_TAIL_PUSH } break;
      case TAIL_STORE: { VG_FX_TAIL_STORE } break;
      case TAIL_JIF: { VG_FX_TAIL_JIF } break;
      case TAIL_JIT: { VG_FX_TAIL_JIT } break;
      case TAIL_JIF_OR_POP: { VG_FX_TAIL_JIF_OR_POP } break;
      case TAIL_JIT_OR_POP: { VG_FX_TAIL_JIT_OR_POP } break;
      default: { VG_FX_TAIL_STORE_JUMP } break;
    }
    VG_NEXT();
  }
#undef VG_FX_CASE_ONLY
#endif
  VG_FX_CASE(MOV)
    VG_FX_ENTER();
    VG_STORE(base + f->t, f->lk == SRC_CONST ? f->a : st[base + f->a]);
    steps++;
    pc++;
    VG_NEXT();
  VG_FX_CASE(TEST_F)
    VG_FX_ENTER();
    steps++;
    pc = st[base + f->a] == 0 ? f->t : pc + 1;
    VG_NEXT();
  VG_FX_CASE(TEST_T)
    VG_FX_ENTER();
    steps++;
    pc = st[base + f->a] != 0 ? f->t : pc + 1;
    VG_NEXT();
  VG_FX_CASE(FOR_RANGE) {
    VG_FX_ENTER();
    VG_WRITES();
    int32_t* s = st + base + f->a;  // counter, stop, step
    steps += f->n - 2;  // FOR_RANGE is the last step but one
    if (s[2] == 0) VG_TRAP(TRAP_VALUE_ERROR);
    steps++;
    if (s[2] > 0 ? s[0] < s[1] : s[0] > s[1]) {
      int32_t c = s[0];
      int64_t nx = (int64_t)c + s[2];
      s[0] = (nx > VG_INT32_MAX || nx < VG_INT32_MIN) ? s[1] : (int32_t)nx;  // past int32 is past stop
      st[base + f->t] = c;  // after the counter: the loop variable may be a range slot
      pc = f->b;
    } else {
      pc = f->t2;
    }
    VG_NEXT();
  }
  VG_FX_CASE(SWAP2) {
    // a, b = x, y (SWAP; STORE_VAR a; STORE_VAR b [; JUMP t2]): the value under the top into a,
    // then the top into b, each store as STORE_VAR's (the cycle check's writes)
    VG_FX_ENTER();
    const int32_t x = st[sp - 2], y = st[sp - 1];
    VG_STORE(base + f->a, x);
    VG_STORE(base + f->b, y);
    sp -= 2;
    steps += f->n - 1;
    if (f->tail == TAIL_STORE_JUMP) {
      VG_CYCLE_CHECK(f->t2, pc - 1 + f->n);
      pc = f->t2;
    } else {
      pc += f->n - 1;
    }
    VG_NEXT();
  }
#undef VG_FX_ENTER
#undef VG_FX_OPERANDS
#undef VG_FX_TRAP
#undef VG_FX_HANDLER
#undef VG_FX_HANDLERS
#undef VG_FX_CASE_BIN
#undef VG_FX_CASE
#undef VG_FX_PLAIN
#undef VG_FX_RECORD
#endif
      VG_OP(LOAD_CONST) VG_TRY_FUSED(fused_push); VG_ROOM(1); st[sp++] = ((int32_t)w) >> 8; VG_NEXT();
      VG_OP(CONST_EXT) VG_NEED(1); st[sp - 1] = (int32_t)(((uint32_t)st[sp - 1] << 8) | (uint32_t)arg); VG_NEXT();
      VG_OP(LOAD_VAR) VG_TRY_FUSED(fused_push); VG_ROOM(1); st[sp++] = st[base + arg]; VG_NEXT();
      VG_OP(STORE_VAR) VG_NEED(1); sp--; VG_STORE(base + arg, st[sp]); VG_NEXT();
      VG_OP(POP) VG_NEED(1); sp--; VG_NEXT();
      VG_OP(DUP) VG_NEED(1); VG_ROOM(1); st[sp] = st[sp - 1]; sp++; VG_NEXT();
      VG_OP(DUP2) VG_NEED(2); VG_ROOM(2); st[sp] = st[sp - 2]; st[sp + 1] = st[sp - 1]; sp += 2; VG_NEXT();
      VG_OP(SWAP) {
        VG_NEED(2);
        int32_t t = st[sp - 1];
        st[sp - 1] = st[sp - 2];
        st[sp - 2] = t;
        VG_NEXT();
      }
      VG_OP(ROT3) {
        VG_NEED(3);
        int32_t t = st[sp - 1];
        st[sp - 1] = st[sp - 2];
        st[sp - 2] = st[sp - 3];
        st[sp - 3] = t;
        VG_NEXT();
      }
      VG_OP(REVERSE) {
        VG_NEED(arg);
        for (int32_t a = sp - arg, b = sp - 1; a < b; a++, b--) {
          int32_t t = st[a];
          st[a] = st[b];
          st[b] = t;
        }
        VG_NEXT();
      }
      VG_OP(BINARY_ADD) { VG_NEED(2); int64_t r = (int64_t)st[sp - 2] + st[sp - 1]; VG_INT32(r); st[sp - 2] = (int32_t)r; sp--; VG_NEXT(); }
      VG_OP(BINARY_SUB) { VG_NEED(2); int64_t r = (int64_t)st[sp - 2] - st[sp - 1]; VG_INT32(r); st[sp - 2] = (int32_t)r; sp--; VG_NEXT(); }
      VG_OP(BINARY_MUL) { VG_NEED(2); int64_t r = (int64_t)st[sp - 2] * st[sp - 1]; VG_INT32(r); st[sp - 2] = (int32_t)r; sp--; VG_NEXT(); }
      VG_OP(BINARY_DIV) {
        VG_NEED(2);
        int32_t a = st[sp - 2], b = st[sp - 1];
        if (b == 0) VG_TRAP(TRAP_ZERO_DIVISION);
        if (a == VG_INT32_MIN && b == -1) VG_TRAP(TRAP_OVERFLOW);
        int32_t q = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) q--;  // floor, as Python
        st[sp - 2] = q;
        sp--;
        VG_NEXT();
      }
      VG_OP(BINARY_MOD) {
        VG_NEED(2);
        int32_t a = st[sp - 2], b = st[sp - 1];
        if (b == 0) VG_TRAP(TRAP_ZERO_DIVISION);
        int32_t r = b == -1 ? 0 : a % b;  // INT_MIN % -1 is undefined in C++
        if (r != 0 && ((r < 0) != (b < 0))) r += b;  // the sign of the divisor, as Python
        st[sp - 2] = r;
        sp--;
        VG_NEXT();
      }
      VG_OP(UNARY_NEG) VG_NEED(1); if (st[sp - 1] == VG_INT32_MIN) VG_TRAP(TRAP_OVERFLOW); st[sp - 1] = -st[sp - 1]; VG_NEXT();
      VG_OP(UNARY_NOT) VG_NEED(1); st[sp - 1] = st[sp - 1] == 0; VG_NEXT();
      VG_OP(ABS) VG_NEED(1); if (st[sp - 1] == VG_INT32_MIN) VG_TRAP(TRAP_OVERFLOW); if (st[sp - 1] < 0) st[sp - 1] = -st[sp - 1]; VG_NEXT();
      VG_OP(MIN) VG_NEED(2); if (st[sp - 1] < st[sp - 2]) st[sp - 2] = st[sp - 1]; sp--; VG_NEXT();
      VG_OP(MAX) VG_NEED(2); if (st[sp - 1] > st[sp - 2]) st[sp - 2] = st[sp - 1]; sp--; VG_NEXT();
      VG_OP(COMPARE_LT) VG_NEED(2); st[sp - 2] = st[sp - 2] < st[sp - 1]; sp--; VG_NEXT();
      VG_OP(COMPARE_LE) VG_NEED(2); st[sp - 2] = st[sp - 2] <= st[sp - 1]; sp--; VG_NEXT();
      VG_OP(COMPARE_GT) VG_NEED(2); st[sp - 2] = st[sp - 2] > st[sp - 1]; sp--; VG_NEXT();
      VG_OP(COMPARE_GE) VG_NEED(2); st[sp - 2] = st[sp - 2] >= st[sp - 1]; sp--; VG_NEXT();
      VG_OP(COMPARE_EQ) VG_NEED(2); st[sp - 2] = st[sp - 2] == st[sp - 1]; sp--; VG_NEXT();
      VG_OP(COMPARE_NE) VG_NEED(2); st[sp - 2] = st[sp - 2] != st[sp - 1]; sp--; VG_NEXT();
      VG_OP(JUMP) VG_TRY_FUSED(fused_loop_head); VG_CYCLE_CHECK(arg, pc); pc = arg; VG_NEXT();
      VG_OP(JUMP_IF_FALSE) VG_NEED(1); if (st[--sp] == 0) pc = arg; VG_NEXT();
      VG_OP(JUMP_IF_TRUE) VG_NEED(1); if (st[--sp] != 0) pc = arg; VG_NEXT();
      VG_OP(JUMP_IF_FALSE_OR_POP) VG_NEED(1); if (st[sp - 1] == 0) pc = arg; else sp--; VG_NEXT();
      VG_OP(JUMP_IF_TRUE_OR_POP) VG_NEED(1); if (st[sp - 1] != 0) pc = arg; else sp--; VG_NEXT();
      VG_OP(FOR_RANGE) {
        VG_TRY_FUSED(fused_loop_head);
        VG_WRITES();
        int32_t* s = st + base + arg;  // counter, stop, step
        if (s[2] == 0) VG_TRAP(TRAP_VALUE_ERROR);
        if (s[2] > 0 ? s[0] < s[1] : s[0] > s[1]) {
          VG_ROOM(1);
          st[sp++] = s[0];
          int64_t nx = (int64_t)s[0] + s[2];
          s[0] = (nx > VG_INT32_MAX || nx < VG_INT32_MIN) ? s[1] : (int32_t)nx;  // past int32 is past stop
          pc++;
        }
        VG_NEXT();
      }
      VG_OP(FOR_LIST) {
        VG_WRITES();
        int32_t* s = st + base + arg;  // list, index
        VG_REF(s[0]);
        if (s[1] < 0) VG_TRAP(TRAP_BAD_BYTECODE);
        const ListHdr& l = lists[s[0]];
        if (s[1] < l.len) {
          VG_ROOM(1);
          st[sp++] = heap[l.off + s[1]];
          s[1]++;
          pc++;
        }
        VG_NEXT();
      }
      VG_OP(CALL) {
        VG_WRITES();
        uint32_t h = code[arg];
        int32_t np = func_nparams(h), nl = func_nlocals(h);
        VG_NEED(np);
        if (depth >= max_depth) VG_TRAP(TRAP_RECURSION);
        int32_t nb = sp - np;
        if (nb + nl > stack_size) VG_TRAP(TRAP_RECURSION);
        ws.frames[depth].ret_pc = pc;
        ws.frames[depth].base = base;
        ws.frames[depth].obase = obase;
        depth++;
        base = nb;
        for (int32_t k = np; k < nl; k++) st[base + k] = 0;
        sp = base + nl;
        obase = sp;
        pc = arg + 1;
        VG_NEXT();
      }
      VG_OP(RETURN) {
        VG_WRITES();
        VG_NEED(1);
        int32_t v = st[sp - 1];
        if (depth == 0) {
          result = v;
          goto done;
        }
        depth--;
        sp = base;
        pc = ws.frames[depth].ret_pc;
        base = ws.frames[depth].base;
        obase = ws.frames[depth].obase;
        st[sp++] = v;
        VG_NEXT();
      }
      VG_OP(BUILD_LIST) {
        VG_WRITES();
        VG_NEED(arg);
        if (arg == 0) VG_ROOM(1);
        int32_t r = new_list(ws, cfg, arg);
        if (r < 0) VG_TRAP(TRAP_OUT_OF_MEMORY);
        int32_t* d = heap + lists[r].off;
        sp -= arg;
        for (int32_t k = 0; k < arg; k++) d[k] = st[sp + k];
        st[sp++] = r;
        VG_NEXT();
      }
      VG_OP(LIST_REPEAT) {
        VG_WRITES();
        VG_NEED(2);
        int32_t src = st[sp - 2], times = st[sp - 1];
        VG_REF(src);
        int64_t n = times <= 0 ? 0 : (int64_t)lists[src].len * times;
        int32_t r = new_list(ws, cfg, n);
        if (r < 0) VG_TRAP(TRAP_OUT_OF_MEMORY);
        const ListHdr& a = lists[src];
        int32_t* d = heap + lists[r].off;
        for (int32_t k = 0, j = 0; k < (int32_t)n; k++) {
          d[k] = heap[a.off + j];
          if (++j == a.len) j = 0;
        }
        st[sp - 2] = r;
        sp--;
        VG_NEXT();
      }
      VG_OP(LIST_CONCAT) {
        VG_WRITES();
        VG_NEED(2);
        int32_t ra = st[sp - 2], rb = st[sp - 1];
        VG_REF(ra);
        VG_REF(rb);
        int32_t la = lists[ra].len, lb = lists[rb].len;
        int32_t r = new_list(ws, cfg, (int64_t)la + lb);
        if (r < 0) VG_TRAP(TRAP_OUT_OF_MEMORY);
        int32_t* d = heap + lists[r].off;
        for (int32_t k = 0; k < la; k++) d[k] = heap[lists[ra].off + k];
        for (int32_t k = 0; k < lb; k++) d[la + k] = heap[lists[rb].off + k];
        st[sp - 2] = r;
        sp--;
        VG_NEXT();
      }
      VG_OP(LIST_EXTEND) {
        VG_WRITES();
        VG_NEED(2);
        int32_t ra = st[sp - 2], rb = st[sp - 1];
        VG_REF(ra);
        VG_REF(rb);
        int32_t la = lists[ra].len, lb = lists[rb].len;  // lb before growing: xs += xs
        if (!reserve(ws, cfg, ra, (int64_t)la + lb)) VG_TRAP(TRAP_OUT_OF_MEMORY);
        int32_t* d = heap + lists[ra].off;
        const int32_t* s = heap + lists[rb].off;
        for (int32_t k = 0; k < lb; k++) d[la + k] = s[k];
        lists[ra].len = la + lb;
        sp--;
        VG_NEXT();
      }
      VG_OP(LEN) VG_NEED(1); VG_REF(st[sp - 1]); st[sp - 1] = lists[st[sp - 1]].len; VG_NEXT();
      VG_OP(INDEX) {
        VG_NEED(2);
        int32_t r = st[sp - 2], i = st[sp - 1];
        VG_REF(r);
        const ListHdr& l = lists[r];
        if (i < 0) i += l.len;
        if (i < 0 || i >= l.len) VG_TRAP(TRAP_INDEX_ERROR);
        st[sp - 2] = heap[l.off + i];
        sp--;
        VG_NEXT();
      }
      VG_OP(STORE_INDEX) {
        VG_WRITES();
        VG_NEED(3);
        int32_t v = st[sp - 3], r = st[sp - 2], i = st[sp - 1];
        VG_REF(r);
        const ListHdr& l = lists[r];
        if (i < 0) i += l.len;
        if (i < 0 || i >= l.len) VG_TRAP(TRAP_INDEX_ERROR);
        heap[l.off + i] = v;
        sp -= 3;
        VG_NEXT();
      }
      VG_OP(APPEND) {
        VG_WRITES();
        VG_NEED(2);
        int32_t r = st[sp - 2], v = st[sp - 1];
        VG_REF(r);
        if (!reserve(ws, cfg, r, (int64_t)lists[r].len + 1)) VG_TRAP(TRAP_OUT_OF_MEMORY);
        ListHdr& l = lists[r];
        heap[l.off + l.len++] = v;
        sp -= 2;
        VG_NEXT();
      }
      VG_OP(LIST_POP) {
        VG_WRITES();
        VG_NEED(1);
        int32_t r = st[sp - 1];
        VG_REF(r);
        ListHdr& l = lists[r];
        if (l.len == 0) VG_TRAP(TRAP_INDEX_ERROR);
        st[sp - 1] = heap[l.off + --l.len];
        VG_NEXT();
      }
      VG_OP(FUNC)  // fell off the end of a function
      VG_DEFAULT VG_TRAP(TRAP_BAD_BYTECODE);
#if VG_HOST_THREADED
  }
#else
    }
  }
#endif
done:
#undef VG_TRAP
#undef VG_WRITES
#undef VG_STORE
#undef VG_CYCLE_CHECK
#undef VG_NEED
#undef VG_ROOM
#undef VG_REF
#undef VG_INT32
#undef VG_FETCH
#undef VG_OP
#undef VG_DEFAULT
#undef VG_NEXT
#undef VG_TRY_FUSED
  res.status = status;
  res.value = status == TRAP_OK ? result : 0;
  res.steps = steps;
  return res;
}

// A run's start (every executor's): the workspace emptied, the entry checked, the arguments
// loaded (per argument [KIND_INT, v] | [KIND_BOOL, 0 or 1] | [KIND_LIST, n, e1 .. en]) and the
// other locals zeroed. TRAP_OK, or the trap that ends the run before its first step.
VG_HD inline int32_t start_run(const uint32_t* code, int32_t len, int32_t entry_pc, const int32_t* in, int32_t in_len,
                               const VMConfig& cfg, Workspace& ws, const int8_t* want = nullptr) {
  ws.nlists = 0;
  ws.hp = 0;
  if (entry_pc < 0 || entry_pc >= len || (code[entry_pc] & 0xFF) != OP_FUNC) return TRAP_BAD_INPUT;
  return load_args(code[entry_pc], in, in_len, cfg, ws, ws.stack, 1, want);
}

// Run function `entry_pc` of a validated program on one encoded input.
VG_HD inline RunResult run(const uint32_t* code, int32_t len, int32_t entry_pc, const int32_t* in, int32_t in_len,
                           const VMConfig& cfg, Workspace& ws, const Fused* fx = nullptr,
                           const uint8_t* xop = nullptr) {
  RunResult res;
  res.status = start_run(code, len, entry_pc, in, in_len, cfg, ws);
  res.value = 0;
  res.steps = 0;
  if (res.status != TRAP_OK) return res;
  const int32_t nl = func_nlocals(code[entry_pc]);
  return run_from(code, len, cfg, ws, entry_pc + 1, nl, 0, nl, 0, 0, fx, xop);
}

// Compare a finished run with an encoded expected value ([kind, payload]).
VG_HD inline bool matches(const RunResult& r, int32_t ret_kind, const Workspace& ws, const int32_t* exp, int32_t exp_len) {
  if (r.status != TRAP_OK || exp_len < 2 || exp[0] != ret_kind) return false;
  if (ret_kind != KIND_LIST) return exp_len == 2 && r.value == exp[1];
  if ((uint32_t)r.value >= (uint32_t)ws.nlists) return false;
  const ListHdr& l = ws.lists[r.value];
  if (exp[1] != l.len || exp_len != 2 + l.len) return false;
  for (int32_t k = 0; k < l.len; k++)
    if (ws.heap[l.off + k] != exp[2 + k]) return false;
  return true;
}

// After a run: a list result must be a valid reference (else bad_bytecode) and its first out_cap
// elements go to `out` (nullable); *passed says whether it equals the expected value (exp
// nullable). Returns the final result, whose value for a list is its length.
VG_HD inline RunResult finish_run(RunResult res, int32_t ret_kind, const Workspace& ws, const int32_t* exp,
                                  int32_t exp_len, int32_t* out, int32_t out_cap, bool* passed) {
  if (res.status == TRAP_OK && ret_kind == KIND_LIST) {
    if ((uint32_t)res.value >= (uint32_t)ws.nlists) {
      res.status = TRAP_BAD_BYTECODE;
    } else if (out) {
      const ListHdr& l = ws.lists[res.value];
      for (int32_t k = 0; k < l.len && k < out_cap; k++) out[k] = ws.heap[l.off + k];
    }
  }
  *passed = res.status == TRAP_OK && exp && matches(res, ret_kind, ws, exp, exp_len);
  if (res.status == TRAP_OK && ret_kind == KIND_LIST) res.value = ws.lists[res.value].len;
  if (res.status != TRAP_OK) res.value = 0;
  return res;
}

}  // namespace vg
