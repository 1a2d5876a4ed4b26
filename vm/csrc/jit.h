// A template JIT for the CPU backend: validated bytecode -> x86-64 machine code, one run (one
// input) at a time. The interpreter (vm.h run_from) is its oracle and its fallback: the native
// code gives exactly the interpreter's status, value, steps and list contents, and wherever it
// cannot vouch for that (a block that would cross the step budget, a call whose frame might not
// fit the stack) it stops at the start of the instruction and hands the run, state and all, to
// the interpreter. Host-only (x86-64, System V ABI); elsewhere the backend interprets.
//
// Layout of the generated code. The operand stack stays in memory at the slots the interpreter
// uses: compiled bytecode has a static stack depth at every pc (checked here; a program without
// one is not compiled), so every push and pop is a fixed offset from the frame's base. A basic
// block's steps are counted where control leaves it for a block that others enter too (a block
// with one way in adds its own to its predecessor's); the budget is tested only at checkpoints
// (loop heads, function entries, return points), for the longest path to the next one (else the
// run is handed over there); a trap inside a block subtracts the steps not taken, and
// if-converted words count theirs where they run. Calls write the interpreter's frame records and jump; a
// return jumps through a table of return points. vm.h's cycle check is kept (it only saves time,
// but a random policy's `while 3: pass` costs a whole budget per test without it), and left out
// where a dataflow shows cyc was just reset.
#pragma once
#include "vm.h"

#if defined(__x86_64__) && defined(__GNUC__) && (defined(__linux__) || defined(__APPLE__)) && !defined(VG_NO_JIT) && \
    !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#define VG_JIT 1
#endif

#ifdef VG_JIT
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <vector>

namespace vg {
namespace jit {

// Whether run_batch takes the JIT (1, the default where it is built) or interprets (0): for A/B
// runs and the tests. Set it before runs start (vg_jit).
inline std::atomic<int32_t>& enabled() {
  static std::atomic<int32_t> on(1);
  return on;
}

// What generated code reads and writes besides the run's stack (its fields' offsets are
// compiled into the code: offsetof below).
struct Ctx {
  int32_t* st;          // ws.stack
  Frame* frames;        // ws.frames
  Workspace* ws;
  const VMConfig* cfg;
  void* const* ret_at;  // native address of each return point (pc after a CALL)
  const void* entry;    // where the run starts: the entry function's first instruction
  int32_t* st_end;      // st + stack_size
  int64_t fuel64;       // fuel (64-bit: generated code counts steps - fuel)
  int32_t steps, fuel, status, result, cyc, depth, max_depth;
  int32_t pc, sp, base, obase;  // where a hand-over to the interpreter starts
  int32_t minus1;               // -1 (a memory operand for cmov)
  ListHdr* lists;               // ws.lists, ws.heap (one load from Ctx instead of two)
  int32_t* heap;
};

enum Exit : int32_t { EXIT_RETURN = 0, EXIT_TRAP = 1, EXIT_HANDOVER = 2 };

// The list instructions run in C++ (vm.h's rules, in the same order of checks): s points at the
// instruction's first operand slot, the result (if any) goes to s[0]. Returns TRAP_OK or a trap.
namespace helpers {
inline bool ref_ok(const Workspace& ws, int32_t r) { return (uint32_t)r < (uint32_t)ws.nlists; }
inline int32_t build_list(Workspace* ws, const VMConfig* cfg, int32_t* s, int32_t n) {
  int32_t r = new_list(*ws, *cfg, n);
  if (r < 0) return TRAP_OUT_OF_MEMORY;
  int32_t* d = ws->heap + ws->lists[r].off;
  for (int32_t k = 0; k < n; k++) d[k] = s[k];
  s[0] = r;
  return TRAP_OK;
}
inline int32_t list_repeat(Workspace* ws, const VMConfig* cfg, int32_t* s, int32_t) {
  int32_t src = s[0], times = s[1];
  if (!ref_ok(*ws, src)) return TRAP_BAD_BYTECODE;
  int64_t n = times <= 0 ? 0 : (int64_t)ws->lists[src].len * times;
  int32_t r = new_list(*ws, *cfg, n);
  if (r < 0) return TRAP_OUT_OF_MEMORY;
  const ListHdr& a = ws->lists[src];
  int32_t* d = ws->heap + ws->lists[r].off;
  for (int32_t k = 0, j = 0; k < (int32_t)n; k++) {
    d[k] = ws->heap[a.off + j];
    if (++j == a.len) j = 0;
  }
  s[0] = r;
  return TRAP_OK;
}
inline int32_t list_concat(Workspace* ws, const VMConfig* cfg, int32_t* s, int32_t) {
  int32_t ra = s[0], rb = s[1];
  if (!ref_ok(*ws, ra) || !ref_ok(*ws, rb)) return TRAP_BAD_BYTECODE;
  int32_t la = ws->lists[ra].len, lb = ws->lists[rb].len;
  int32_t r = new_list(*ws, *cfg, (int64_t)la + lb);
  if (r < 0) return TRAP_OUT_OF_MEMORY;
  int32_t* d = ws->heap + ws->lists[r].off;
  for (int32_t k = 0; k < la; k++) d[k] = ws->heap[ws->lists[ra].off + k];
  for (int32_t k = 0; k < lb; k++) d[la + k] = ws->heap[ws->lists[rb].off + k];
  s[0] = r;
  return TRAP_OK;
}
inline int32_t list_extend(Workspace* ws, const VMConfig* cfg, int32_t* s, int32_t) {
  int32_t ra = s[0], rb = s[1];
  if (!ref_ok(*ws, ra) || !ref_ok(*ws, rb)) return TRAP_BAD_BYTECODE;
  int32_t la = ws->lists[ra].len, lb = ws->lists[rb].len;  // lb before growing: xs += xs
  if (!reserve(*ws, *cfg, ra, (int64_t)la + lb)) return TRAP_OUT_OF_MEMORY;
  int32_t* d = ws->heap + ws->lists[ra].off;
  const int32_t* src = ws->heap + ws->lists[rb].off;
  for (int32_t k = 0; k < lb; k++) d[la + k] = src[k];
  ws->lists[ra].len = la + lb;
  return TRAP_OK;
}
inline int32_t append(Workspace* ws, const VMConfig* cfg, int32_t* s, int32_t) {
  int32_t r = s[0], v = s[1];
  if (!ref_ok(*ws, r)) return TRAP_BAD_BYTECODE;
  if (!reserve(*ws, *cfg, r, (int64_t)ws->lists[r].len + 1)) return TRAP_OUT_OF_MEMORY;
  ListHdr& l = ws->lists[r];
  ws->heap[l.off + l.len++] = v;
  return TRAP_OK;
}
inline int32_t list_pop(Workspace* ws, const VMConfig*, int32_t* s, int32_t) {
  int32_t r = s[0];
  if (!ref_ok(*ws, r)) return TRAP_BAD_BYTECODE;
  ListHdr& l = ws->lists[r];
  if (l.len == 0) return TRAP_INDEX_ERROR;
  s[0] = ws->heap[l.off + --l.len];
  return TRAP_OK;
}
}  // namespace helpers

// x86-64 registers and condition codes.
enum Reg : int { RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13, R14, R15 };
enum Cond : int { CO = 0, CNO = 1, CB = 2, CAE = 3, CE = 4, CNE = 5, CBE = 6, CA = 7, CS = 8, CNS = 9,
                  CL = 0xC, CGE = 0xD, CLE = 0xE, CG = 0xF };
inline Cond invert(Cond c) { return (Cond)(c ^ 1); }

// A byte buffer with the instruction forms the compiler uses. Memory operands are [base + disp]
// or [base + index * 2^scale + disp]; displacements and immediates that fit in a byte take one.
#define JIT_INLINE __attribute__((always_inline)) inline
#define JIT_INLINE_L __attribute__((always_inline))  // (a lambda's)

// One instruction's bytes, written straight into the buffer through a local pointer (the
// compiler keeps it in a register: a byte store through Asm's buffer would make it reload Asm::n,
// and bytes made in a local array then copied whole stall on store forwarding).
struct Ins {
  uint8_t* p;
  JIT_INLINE void b(int x) { *p++ = (uint8_t)x; }
  JIT_INLINE void d32(int32_t x) {
    __builtin_memcpy(p, &x, 4);
    p += 4;
  }
  JIT_INLINE void rex(bool w, int reg, int index, int base) {
    const int r = 0x40 | (w ? 8 : 0) | ((reg & 8) ? 4 : 0) | ((index & 8) ? 2 : 0) | ((base & 8) ? 1 : 0);
    if (r != 0x40) b(r);
  }
  JIT_INLINE void disp(int modrm, int32_t v) {  // modrm with mod 01 (disp8) or 10 (disp32)
    const bool short_ = v == (int8_t)v;
    b(modrm | (short_ ? 0x40 : 0x80));
  }
  JIT_INLINE void mem(int reg, int base, int32_t v) {  // [base + disp8 or disp32]
    disp(((reg & 7) << 3) | (base & 7), v);
    if ((base & 7) == 4) b(0x24);
    if (v == (int8_t)v) b(v);
    else d32(v);
  }
  JIT_INLINE void mem_sib(int reg, int base, int index, int scale, int32_t v) {  // [base + index * 2^scale + disp]
    disp(0x04 | ((reg & 7) << 3), v);
    b((scale << 6) | ((index & 7) << 3) | (base & 7));
    if (v == (int8_t)v) b(v);
    else d32(v);
  }
};

// The instruction forms the compiler uses, into a byte buffer. Writes are not checked one by one: the
// compiler calls room() before each instruction it translates (none emits ROOM bytes) and
// stops when it says no.
struct Asm {
  static constexpr int64_t ROOM = 1 << 15;
  uint8_t* buf = nullptr;
  int64_t cap = 0, n = 0;
  bool full = false;

  JIT_INLINE bool room() {
    if (n + ROOM > cap) full = true;
    return !full;
  }
  JIT_INLINE void put(const Ins& i) { n = i.p - buf; }
  // nops up to the next multiple of 16 (one instruction: 66 66 ... 0F 1F 84 00 00 00 00 00, or a
  // shorter form)
  JIT_INLINE void align16() {
    int k = (int)(-n & 15);
    while (k > 0) {
      static const uint8_t NOP[9][9] = {{0x90}, {0x66, 0x90}, {0x0F, 0x1F, 0x00}, {0x0F, 0x1F, 0x40, 0x00},
                                        {0x0F, 0x1F, 0x44, 0x00, 0x00}, {0x66, 0x0F, 0x1F, 0x44, 0x00, 0x00},
                                        {0x0F, 0x1F, 0x80, 0x00, 0x00, 0x00, 0x00},
                                        {0x0F, 0x1F, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
                                        {0x66, 0x0F, 0x1F, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00}};
      const int m = k > 9 ? 9 : k;
      __builtin_memcpy(buf + n, NOP[m - 1], m);
      n += m, k -= m;
    }
  }
  JIT_INLINE void d32(int32_t x) {
    __builtin_memcpy(buf + n, &x, 4);
    n += 4;
  }
  // opc reg, [base + disp] (32-bit; w: 64-bit)
  JIT_INLINE void rm(int opc, int reg, int base, int32_t disp, bool w = false) {
    Ins i{buf + n};
    i.rex(w, reg, 0, base);
    i.b(opc);
    i.mem(reg, base, disp);
    put(i);
  }
  JIT_INLINE void rm_sib(int opc, int reg, int base, int index, int scale, int32_t disp, bool w = false) {
    Ins i{buf + n};
    i.rex(w, reg, index, base);
    i.b(opc);
    i.mem_sib(reg, base, index, scale, disp);
    put(i);
  }
  // opc reg, rmreg (register form)
  JIT_INLINE void rr(int opc, int reg, int rmreg, bool w = false) {
    Ins i{buf + n};
    i.rex(w, reg, 0, rmreg);
    i.b(opc);
    i.b(0xC0 | ((reg & 7) << 3) | (rmreg & 7));
    put(i);
  }
  JIT_INLINE void rr0f(int opc, int reg, int rmreg, bool w = false) {  // 0F opc reg, rmreg
    Ins i{buf + n};
    i.rex(w, reg, 0, rmreg);
    i.b(0x0F);
    i.b(opc);
    i.b(0xC0 | ((reg & 7) << 3) | (rmreg & 7));
    put(i);
  }
  JIT_INLINE void rm0f(int opc, int reg, int base, int32_t disp) {  // 0F opc reg, [base + disp]
    Ins i{buf + n};
    i.rex(false, reg, 0, base);
    i.b(0x0F);
    i.b(opc);
    i.mem(reg, base, disp);
    put(i);
  }

  JIT_INLINE void load(int r, int base, int32_t disp) { rm(0x8B, r, base, disp); }          // mov r32, [m]
  JIT_INLINE void store(int base, int32_t disp, int r) { rm(0x89, r, base, disp); }         // mov [m], r32
  JIT_INLINE void load64(int r, int base, int32_t disp) { rm(0x8B, r, base, disp, true); }  // mov r64, [m]
  JIT_INLINE void store_imm(int base, int32_t disp, int32_t v) {  // mov dword [m], imm32
    Ins i{buf + n};
    i.rex(false, 0, 0, base);
    i.b(0xC7);
    i.mem(0, base, disp);
    i.d32(v);
    put(i);
  }
  JIT_INLINE void mov_imm(int r, int32_t v) {  // mov r32, imm32
    Ins i{buf + n};
    i.rex(false, 0, 0, r);
    i.b(0xB8 + (r & 7));
    i.d32(v);
    put(i);
  }
  JIT_INLINE void mov_imm64(int r, int64_t v) {
    Ins i{buf + n};
    i.rex(true, 0, 0, r);
    i.b(0xB8 + (r & 7));
    i.d32((int32_t)v);
    i.d32((int32_t)(v >> 32));
    put(i);
  }
  JIT_INLINE void mov(int dst, int src) { rr(0x89, src, dst); }
  JIT_INLINE void mov64(int dst, int src) { rr(0x89, src, dst, true); }
  // 03 add, 2B sub, 3B cmp, 33 xor: r op= [m] / dst op= src (w: 64-bit)
  JIT_INLINE void alu_rm(int opc, int r, int base, int32_t disp, bool w = false) { rm(opc, r, base, disp, w); }
  JIT_INLINE void alu_rr(int opc, int dst, int src, bool w = false) { rr(opc, dst, src, w); }
  // 81 /ext id or 83 /ext ib: 0 add, 1 or, 4 and, 5 sub, 7 cmp
  JIT_INLINE void alu_imm(int ext, int r, int32_t v, bool w = false) {
    Ins i{buf + n};
    i.rex(w, 0, 0, r);
    i.b(v == (int8_t)v ? 0x83 : 0x81);
    i.b(0xC0 | (ext << 3) | (r & 7));
    if (v == (int8_t)v) i.b(v);
    else i.d32(v);
    put(i);
  }
  JIT_INLINE void alu_mem_imm(int ext, int base, int32_t disp, int32_t v) {  // on a dword in memory
    Ins i{buf + n};
    i.rex(false, 0, 0, base);
    i.b(v == (int8_t)v ? 0x83 : 0x81);
    i.mem(ext, base, disp);
    if (v == (int8_t)v) i.b(v);
    else i.d32(v);
    put(i);
  }
  JIT_INLINE void unary(int ext, int r, bool w = false) { rr(0xF7, ext, r, w); }  // F7 /ext: 3 neg, 4 mul, 7 idiv
  JIT_INLINE void imul_imm(int dst, int src, int32_t v, bool w = false) {  // 69 /r id (6B /r ib): dst = src * imm
    Ins i{buf + n};
    i.rex(w, dst, 0, src);
    i.b(v == (int8_t)v ? 0x6B : 0x69);
    i.b(0xC0 | ((dst & 7) << 3) | (src & 7));
    if (v == (int8_t)v) i.b(v);
    else i.d32(v);
    put(i);
  }
  JIT_INLINE void test(int a, int c) { rr(0x85, c, a); }
  JIT_INLINE void test_imm(int r, int32_t v) {  // F7 /0 id
    Ins i{buf + n};
    i.rex(false, 0, 0, r);
    i.b(0xF7);
    i.b(0xC0 | (r & 7));
    i.d32(v);
    put(i);
  }
  JIT_INLINE void cdq() {
    Ins i{buf + n};
    i.b(0x99);
    put(i);
  }
  JIT_INLINE void setcc(Cond c, int r8) { rr0f(0x90 + c, 0, r8); }  // (r8 in AL..BL: no REX needed)
  JIT_INLINE void movzx8(int dst, int src8) { rr0f(0xB6, dst, src8); }
  JIT_INLINE void cmov(Cond c, int dst, int src) { rr0f(0x40 + c, dst, src); }
  JIT_INLINE void imul_rm(int r, int base, int32_t disp) { rm0f(0xAF, r, base, disp); }
  JIT_INLINE void shift(int ext, int r, int k, bool w = false) {  // C1 /ext ib: 4 shl, 5 shr, 7 sar
    Ins i{buf + n};
    i.rex(w, 0, 0, r);
    i.b(0xC1);
    i.b(0xC0 | (ext << 3) | (r & 7));
    i.b(k);
    put(i);
  }
  JIT_INLINE void lea(int r, int base, int32_t disp, bool w = true) { rm(0x8D, r, base, disp, w); }
  JIT_INLINE void lea_sib(int r, int base, int index, int scale, int32_t disp, bool w = true) {
    rm_sib(0x8D, r, base, index, scale, disp, w);
  }
  JIT_INLINE void movsxd(int dst, int src) { rr(0x63, dst, src, true); }
  JIT_INLINE void push(int r) {
    Ins i{buf + n};
    i.rex(false, 0, 0, r);
    i.b(0x50 + (r & 7));
    put(i);
  }
  JIT_INLINE void pop(int r) {
    Ins i{buf + n};
    i.rex(false, 0, 0, r);
    i.b(0x58 + (r & 7));
    put(i);
  }
  JIT_INLINE void ret() {
    Ins i{buf + n};
    i.b(0xC3);
    put(i);
  }
  JIT_INLINE void call_reg(int r) { rr(0xFF, 2, r); }
  JIT_INLINE void jmp_mem_sib(int base, int index, int scale, int32_t disp) { rm_sib(0xFF, 4, base, index, scale, disp); }
  JIT_INLINE void jmp_mem(int base, int32_t disp) { rm(0xFF, 4, base, disp); }
  // Jumps with a 32-bit displacement: return where it is, for patch().
  JIT_INLINE int64_t jcc(Cond c) {
    Ins i{buf + n};
    i.b(0x0F);
    i.b(0x80 + c);
    i.d32(0);
    put(i);
    return n - 4;
  }
  JIT_INLINE int64_t jmp() {
    Ins i{buf + n};
    i.b(0xE9);
    i.d32(0);
    put(i);
    return n - 4;
  }
  JIT_INLINE void patch(int64_t at, int64_t to) {
    const int32_t rel = (int32_t)(to - (at + 4));
    __builtin_memcpy(buf + at, &rel, 4);
  }
};

// The executable memory of one thread: one mapping, reused for every program it compiles.
struct CodeBuffer {
  uint8_t* mem = nullptr;
  size_t size = 0;
  bool failed = false;
  ~CodeBuffer() {
    if (mem) munmap(mem, size);
  }
  // At least `want` bytes (contents lost), or false when the system refuses executable memory.
  bool reserve(size_t want) {
    if (failed) return false;
    if (mem && size >= want) return true;
    if (mem) munmap(mem, size);
    size_t s = size ? size : (size_t)1 << 16;
    while (s < want) s *= 2;
    void* p = mmap(nullptr, s, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      mem = nullptr, size = 0, failed = true;
      return false;
    }
    mem = (uint8_t*)p, size = s;
    return true;
  }
};

// The longest program the JIT takes (words), and the deepest operand stack of a function.
constexpr int32_t MAX_LEN = 1 << 14;
constexpr int32_t MAX_DEPTH = 1024;

namespace detail {
struct Fix {  // a jump to the block of pc
  int64_t at;
  int32_t pc;
};
struct Stub {  // cold code after the blocks (see compile)
  int64_t at;
  int32_t kind, status, back, pc, sp, obase, fs;  // fs: the function's FUNC pc (its register locals)
};
struct Val {  // a value of the abstract operand stack (see compile)
  uint8_t k;
  int32_t v;
};
struct Edges {  // the edges out of a block (see compile): n of them
  int32_t t[2];     // target pc
  uint8_t x[2];     // steps taken on the edge beyond the block's
  uint8_t keep[2];  // whether the cycle check's state goes along
  uint8_t n;
  uint8_t writes;   // the block writes (an opcode of OPS_WRITES other than STORE_VAR): cyc to -1
};
}  // namespace detail

// The bytes of code buffer a compile of a program of len words needs room for (at most).
constexpr size_t code_room(int32_t len) { return (size_t)len * 256 + 4 * (size_t)Asm::ROOM; }

// A compiled program: code in the thread's buffer, the native address of each pc that starts a
// block (return points among them), and each function's deepest operand stack. Its vectors are
// kept from one program to the next (a compile makes no allocation once they are large enough).
struct Compiled {
  bool ok = false;
  int32_t len = 0;
  std::vector<void*> at;      // [len] native address of pc (null where no block starts)
  std::vector<void*> fentry;  // [len] at a FUNC pc: its function's entry (its register locals loaded)
  std::vector<void*> ret;     // [len] at a return point: where RETURN jumps (the caller's locals loaded)
  std::vector<int32_t> depth;  // [len] static stack depth before pc (-1: unreachable)
  std::vector<int32_t> fmax;   // [len] at a FUNC pc: its function's deepest operand stack
  int32_t (*run)(Ctx*) = nullptr;
  int64_t size = 0;  // bytes of code
  // the compiler's scratch
  std::vector<int32_t> work, fstart, funcs, calls, jumps;  // funcs: each FUNC pc, then len; calls, jumps: their pcs
  std::vector<int32_t> blocks;       // each block's first pc, in order
  std::vector<detail::Edges> edges;  // [blocks] the edges out of each block
  std::vector<uint8_t> start;
  std::vector<int64_t> end_stub;
  std::vector<detail::Fix> fixes;
  std::vector<detail::Stub> stubs;
  std::vector<detail::Val> stk;
  std::vector<int32_t> lslot;  // [3 * len] at 3 * (a FUNC pc) + i: the local that LREGS[i] holds there, or -1
  std::vector<int32_t> weight;
  std::vector<int32_t> bend;   // [2 * (len + 1)] at a block's start pc: its end; at len + 1 + pc: wmax (compile)
  std::vector<uint8_t> chk;    // [4 * (len + 1)] at pc: a fuel checkpoint (2: a loop's head); then kin, reached, ifcv
  std::vector<int32_t> pin;    // [2 * (len + 1)] at a block's pc: its edges in, then its role; at len + 1 + pc: steps pending
};

namespace detail {

// Offsets in Ctx and Workspace that generated code uses.
constexpr int32_t C_ST = offsetof(Ctx, st), C_FRAMES = offsetof(Ctx, frames), C_WS = offsetof(Ctx, ws),
                  C_CFG = offsetof(Ctx, cfg), C_RET = offsetof(Ctx, ret_at), C_ENTRY = offsetof(Ctx, entry),
                  C_STEND = offsetof(Ctx, st_end), C_STEPS = offsetof(Ctx, steps), C_FUEL = offsetof(Ctx, fuel),
                  C_FUEL64 = offsetof(Ctx, fuel64),
                  C_STATUS = offsetof(Ctx, status), C_RESULT = offsetof(Ctx, result), C_CYC = offsetof(Ctx, cyc),
                  C_DEPTH = offsetof(Ctx, depth), C_MAXD = offsetof(Ctx, max_depth), C_PC = offsetof(Ctx, pc),
                  C_SP = offsetof(Ctx, sp), C_BASE = offsetof(Ctx, base), C_OBASE = offsetof(Ctx, obase),
                  C_M1 = offsetof(Ctx, minus1), C_LISTS = offsetof(Ctx, lists), C_HEAP = offsetof(Ctx, heap);
constexpr int32_t W_NLISTS = offsetof(Workspace, nlists);
static_assert(sizeof(ListHdr) == 12 && offsetof(ListHdr, off) == 0 && offsetof(ListHdr, len) == 4, "ListHdr");
static_assert(sizeof(Frame) == 12 && offsetof(Frame, ret_pc) == 0 && offsetof(Frame, base) == 4 &&
                  offsetof(Frame, obase) == 8,
              "Frame");

// Registers with fixed roles in generated code (callee-saved, so helper calls keep them). The
// call depth and the frame's base (a slot index) live in Ctx: only calls, returns and
// hand-overs use them.
constexpr int FP = RBX;     // address of the frame's slot 0 (st + base)
constexpr int STEPS = R12;  // steps so far minus the budget (64-bit), less those pending (see pend)
constexpr int CTX = R13;    // the Ctx
constexpr int CYC = R10;    // vm.h's cycle check (Ctx::cyc while a helper runs)
// The registers that hold a function's most used locals (callee-saved: helper calls keep them).
constexpr int LREGS[3] = {RBP, R14, R15};
constexpr int NLREGS = 3;

// Each opcode's operands and depth change (plain ones), or how stack_depths handles it.
enum StackCtl : uint8_t { SE_PLAIN, SE_REVERSE, SE_BUILD, SE_CALL, SE_JUMP, SE_COND, SE_COND_OR_POP, SE_FOR, SE_END };
struct StackEffect {
  int8_t need, delta;
  StackCtl ctl;
};
constexpr StackEffect stack_effect(int32_t op) {
  switch (op) {
    case OP_LOAD_CONST: case OP_LOAD_VAR: return {0, 1, SE_PLAIN};
    case OP_CONST_EXT: case OP_UNARY_NEG: case OP_UNARY_NOT: case OP_ABS: case OP_LEN: case OP_LIST_POP:
      return {1, 0, SE_PLAIN};
    case OP_STORE_VAR: case OP_POP: return {1, -1, SE_PLAIN};
    case OP_DUP: return {1, 1, SE_PLAIN};
    case OP_DUP2: return {2, 2, SE_PLAIN};
    case OP_SWAP: return {2, 0, SE_PLAIN};
    case OP_ROT3: return {3, 0, SE_PLAIN};
    case OP_REVERSE: return {0, 0, SE_REVERSE};
    case OP_BINARY_ADD: case OP_BINARY_SUB: case OP_BINARY_MUL: case OP_BINARY_DIV: case OP_BINARY_MOD:
    case OP_MIN: case OP_MAX: case OP_COMPARE_LT: case OP_COMPARE_LE: case OP_COMPARE_GT: case OP_COMPARE_GE:
    case OP_COMPARE_EQ: case OP_COMPARE_NE: case OP_LIST_REPEAT: case OP_LIST_CONCAT: case OP_LIST_EXTEND:
    case OP_INDEX:
      return {2, -1, SE_PLAIN};
    case OP_STORE_INDEX: return {3, -3, SE_PLAIN};
    case OP_APPEND: return {2, -2, SE_PLAIN};
    case OP_BUILD_LIST: return {0, 0, SE_BUILD};
    case OP_CALL: return {0, 0, SE_CALL};
    case OP_JUMP: return {0, 0, SE_JUMP};
    case OP_JUMP_IF_FALSE: case OP_JUMP_IF_TRUE: return {0, 0, SE_COND};
    case OP_JUMP_IF_FALSE_OR_POP: case OP_JUMP_IF_TRUE_OR_POP: return {0, 0, SE_COND_OR_POP};
    case OP_FOR_RANGE: case OP_FOR_LIST: return {0, 0, SE_FOR};
    default: return {0, 0, SE_END};  // RETURN, FUNC, and no opcode
  }
}
struct StackEffects {
  StackEffect of[NUM_OPCODES];
};
constexpr StackEffects stack_effects() {
  StackEffects t{};
  for (int32_t op = 0; op < NUM_OPCODES; op++) t.of[op] = stack_effect(op);
  return t;
}
constexpr StackEffects STACK_EFFECTS = stack_effects();

// Static stack depth before every pc of the function whose FUNC word is at fs (words up to fe):
// false when some pc is reached with two depths or the stack grows past MAX_DEPTH. Operands
// missing at an instruction are no reason: it traps there (bad_bytecode), as in the interpreter.
inline bool stack_depths(const uint32_t* code, int32_t fs, int32_t fe, int32_t* depth, int32_t* fmax,
                         std::vector<int32_t>& work) {
  work.clear();
  depth[fs + 1] = 0;
  work.push_back(fs + 1);
  int32_t most = 0;
  auto reach = [&](int32_t pc, int32_t d) {
    if (pc >= fe) return true;  // the next FUNC or the end: traps there (no depth needed)
    if (depth[pc] == -1) {
      depth[pc] = d;
      work.push_back(pc);
      return true;
    }
    return depth[pc] == d;
  };
  // (a word's successor that falls through is taken at once: only other targets go on the list)
  while (!work.empty()) {
    int32_t pc = work.back();
    work.pop_back();
    for (;;) {
      const uint32_t w = code[pc];
      const int32_t op = w & 0xFF, arg = (int32_t)(w >> 8), d = depth[pc];
      if (d > most) most = d;
      if (d + 2 > MAX_DEPTH) return false;
      // (stack effects from a table: a switch on the opcode mispredicts on every other word)
      const StackEffect& ef = STACK_EFFECTS.of[op < NUM_OPCODES ? op : 0];
      int32_t need = ef.need, after = d + ef.delta;
      switch (ef.ctl) {
        case SE_PLAIN: break;
        case SE_REVERSE: need = arg; break;
        case SE_BUILD: need = arg, after = d - arg + 1; break;
        case SE_CALL: need = func_nparams(code[arg]), after = d - need + 1; break;
        case SE_JUMP:
          if (!reach(arg, d)) return false;
          need = -1;
          break;
        case SE_COND:  // JUMP_IF_FALSE, JUMP_IF_TRUE
          if (d >= 1 && !reach(arg, d - 1)) return false;
          need = 1, after = d - 1;
          break;
        case SE_COND_OR_POP:
          if (d >= 1 && !reach(arg, d)) return false;
          need = 1, after = d - 1;
          break;
        case SE_FOR:  // goes on at pc + 2 with the value pushed, or leaves at pc + 1
          if (!reach(pc + 2, d + 1)) return false;
          need = 0, after = d;
          break;
        default: need = -1; break;  // RETURN, FUNC (validated code has no other opcode)
      }
      // d < need: traps bad_bytecode there (no successor)
      if (need < 0 || d < need || pc + 1 >= fe) break;
      if (depth[pc + 1] != -1) {
        if (depth[pc + 1] != after) return false;
        break;
      }
      depth[++pc] = after;
    }
  }
  *fmax = most + 2;
  return true;
}

// eax = Python's eax // c or eax % c for a constant c > 0, without idiv (clobbers rcx, rdx): a
// shift and a mask for a power of two; else, on u = x + bias (bias a multiple of c with u >= 0
// for every int32 x), floor(u / c) = (u * M) >> (64 + s) with M = ceil(2^(64+s) / c) and
// 2^s < c < 2^(s+1), exact for u < 2^63 (the error u * (M * c - 2^(64+s)) / (c * 2^(64+s))
// stays below 1 / c).
inline void div_const(Asm& a, bool div, int32_t c) {
  if ((c & (c - 1)) == 0) {
    const int k = __builtin_ctz((uint32_t)c);
    if (div) a.shift(7, RAX, k);
    else a.alu_imm(4, RAX, c - 1);
    return;
  }
  const int sft = 31 - __builtin_clz((uint32_t)c);  // 2^sft < c < 2^(sft+1)
  const unsigned __int128 one = 1;
  const uint64_t m = (uint64_t)(((one << (64 + sft)) + c - 1) / (uint64_t)c);
  const int64_t q0 = ((int64_t)1 << 31) / c + 1;  // bias / c
  if (!div) a.mov(R11, RAX);
  a.movsxd(RAX, RAX);
  a.mov_imm64(RCX, q0 * c);
  a.alu_rr(0x03, RAX, RCX, true);  // u = x + bias (>= 0)
  a.mov_imm64(RCX, (int64_t)m);
  a.unary(4, RCX, true);  // mul rcx: rdx:rax = u * M
  a.shift(5, RDX, sft, true);
  a.alu_imm(5, RDX, (int32_t)q0, true);  // floor(x / c)
  if (div) {
    a.mov(RAX, RDX);
  } else {
    a.imul_imm(RDX, RDX, c);
    a.mov(RAX, R11);
    a.alu_rr(0x2B, RAX, RDX);  // x - c * floor(x / c)
  }
}

// Flags for "x % c == 0" (c > 0; clobbers rax, rcx) for x in eax, or in register src when it is
// known to be >= 0 (else src -1): the condition that holds when it is. For a power of two the
// low bits; else, for c = 2^k * o (o odd) and u = |x| as an unsigned number, c divides u iff
// (u * o^-1 mod 2^32) rotated right by k is at most (2^32 - 1) / c (multiplication by o's
// inverse maps the multiples of o to [0, (2^32 - 1) / o] one to one).
inline Cond divisible(Asm& a, int32_t c, int src) {
  if ((c & (c - 1)) == 0) {
    a.test_imm(src >= 0 ? src : RAX, c - 1);
    return CE;
  }
  const int k = __builtin_ctz((uint32_t)c);
  const uint32_t o = (uint32_t)c >> k;
  uint32_t inv = o;  // Newton: each step doubles the correct low bits (3 from o * o = 1 mod 8)
  for (int i = 0; i < 5; i++) inv *= 2 - o * inv;
  if (src < 0) {
    a.mov(RCX, RAX);
    a.unary(3, RAX);  // neg eax
    a.cmov(CS, RAX, RCX);  // |x| (INT_MIN stays 2^31)
  }
  a.imul_imm(RAX, src >= 0 ? src : RAX, (int32_t)inv);
  if (k) a.shift(1, RAX, k);  // ror eax, k
  a.alu_imm(7, RAX, (int32_t)(0xFFFFFFFFu / (uint32_t)c));
  return CBE;
}

// The taken target of JUMP_IF_*_OR_POP at pc when the word at its target L is a conditional jump
// that pops: taken, the value it keeps is the one that jump tests, so both go in one step more
// (JUMP_IF_TRUE_OR_POP into JUMP_IF_FALSE: on after L; into JUMP_IF_TRUE: to its target; and
// the other way round). -1: no such pair.
inline int32_t threaded(const uint32_t* code, int32_t len, int32_t pc) {
  const int32_t op = code[pc] & 0xFF, L = (int32_t)(code[pc] >> 8);
  if ((op != OP_JUMP_IF_FALSE_OR_POP && op != OP_JUMP_IF_TRUE_OR_POP) || L >= len) return -1;
  const int32_t lop = code[L] & 0xFF;
  if (lop != OP_JUMP_IF_FALSE && lop != OP_JUMP_IF_TRUE) return -1;
  return (op == OP_JUMP_IF_TRUE_OR_POP) == (lop == OP_JUMP_IF_TRUE) ? (int32_t)(code[L] >> 8) : L + 1;
}

// FOR_RANGE a | FOR_LIST a; JUMP e; STORE_VAR x at pc (the compiler's loop head): both ways take
// two steps (the store going on, the jump leaving), so the head runs as one: the value into x,
// on at pc + 3, or to e.
inline bool loop_head(const uint32_t* code, int32_t len, int32_t pc) {
  const int32_t op = code[pc] & 0xFF;
  return (op == OP_FOR_RANGE || op == OP_FOR_LIST) && pc + 3 <= len && (code[pc + 1] & 0xFF) == OP_JUMP &&
         (code[pc + 2] & 0xFF) == OP_STORE_VAR;
}

}  // namespace detail

// Compile a program validated by vg::validate into cb at byte offset `at` (a multiple of 64:
// the caller keeps the code below it, so the buffer grows only for at 0). False: not compiled (no
// static stack depths, too long, or the buffer is too small: the caller interprets it).
inline bool compile(const uint32_t* code, int32_t len, Compiled& out, CodeBuffer& cb, size_t at = 0) {
  using namespace detail;
  out.ok = false;
  out.len = len;
  if (len <= 0 || len > MAX_LEN || (code[0] & 0xFF) != OP_FUNC) return false;
  out.at.assign(len + 1, nullptr);
  out.fentry.assign(len + 1, nullptr);
  out.ret.assign(len + 1, nullptr);
  out.depth.assign(len + 1, -1);
  out.fmax.assign(len + 1, 0);
  // functions and their depths
  std::vector<int32_t>& work = out.work;
  std::vector<int32_t>& fstart = out.fstart;
  std::vector<int32_t>& funcs = out.funcs;
  fstart.resize(len + 1);
  funcs.clear();
  for (int32_t fs = 0; fs < len;) {
    funcs.push_back(fs);
    int32_t fe = fs + 1;
    fstart[fs] = fs;
    while (fe < len && (code[fe] & 0xFF) != OP_FUNC) fstart[fe++] = fs;
    if (fs + 1 < fe && !stack_depths(code, fs, fe, out.depth.data(), &out.fmax[fs], work)) return false;
    fs = fe;
  }
  funcs.push_back(len);
  fstart[len] = 0;
  // block starts: function entries, jump targets and where control comes back (2), and every
  // pc after a jump or a return (1: no edge into it from the word before)
  std::vector<uint8_t>& start = out.start;
  start.assign(len + 1, 0);
  out.calls.clear();
  out.jumps.clear();
  for (int32_t pc = 0; pc < len; pc++) {
    const uint32_t w = code[pc];
    const int32_t op = w & 0xFF, arg = (int32_t)(w >> 8);
    switch (op) {
      case OP_FUNC: start[pc + 1] |= 2; break;
      case OP_JUMP: case OP_JUMP_IF_FALSE: case OP_JUMP_IF_TRUE: case OP_JUMP_IF_FALSE_OR_POP:
      case OP_JUMP_IF_TRUE_OR_POP: {
        const int32_t t = threaded(code, len, pc);
        start[t >= 0 ? t : arg] |= 2, start[pc + 1] |= 1;
        out.jumps.push_back(pc);
        break;
      }
      case OP_FOR_RANGE: case OP_FOR_LIST:
        start[pc + 1] |= 2;
        if (pc + 2 <= len) start[pc + 2] |= 2;
        if (loop_head(code, len, pc)) start[pc + 3] |= 2, start[code[pc + 1] >> 8] |= 2;
        break;
      case OP_CALL:
        start[pc + 1] |= 2;
        out.calls.push_back(pc);
        break;
      case OP_RETURN: start[pc + 1] |= 1; break;
      default: break;
    }
  }
  // If-conversion: JUMP_IF_FALSE | JUMP_IF_TRUE L; LOAD_VAR c; LOAD_CONST k | LOAD_VAR v;
  // BINARY_ADD; STORE_VAR c; L: with no other way into its words (c += 1 under an if: a branch
  // on data, often mispredicted) runs without a branch: c + (taken ? 0 : k or v), its 4 steps
  // counted as 4 * (not taken). Adding 0 never overflows, and storing c's own value writes
  // nothing (the cycle check), so results and steps are the branch's. So does the move
  // JUMP_IF_* L; LOAD_CONST k | LOAD_VAR v; STORE_VAR c; L: (if x > m: m = x), c = taken ? c : k
  // or v with a cmov, 2 steps. ifcv[j]: the words the jump at j skips (4 or 2), else 0.
  std::vector<uint8_t>& chk = out.chk;
  chk.assign(4 * (size_t)(len + 1), 0);
  uint8_t* ifcv = chk.data() + 3 * (size_t)(len + 1);
  for (int32_t j = 0; j + 3 <= len; j++) {  // (each jump's words: one form at most)
    const uint32_t* c = code + j;
    const int32_t op = c[0] & 0xFF;
    if ((op != OP_JUMP_IF_FALSE && op != OP_JUMP_IF_TRUE) || start[j + 1] != 1 || out.depth[j] < 1) continue;
    const int32_t t = (int32_t)(c[0] >> 8);
    if (t == j + 5 && j + 5 <= len && (c[1] & 0xFF) == OP_LOAD_VAR &&
        ((c[2] & 0xFF) == OP_LOAD_CONST || (c[2] & 0xFF) == OP_LOAD_VAR) && (c[3] & 0xFF) == OP_BINARY_ADD &&
        (c[4] & 0xFF) == OP_STORE_VAR && (c[1] >> 8) == (c[4] >> 8) && !start[j + 2] && !start[j + 3] &&
        !start[j + 4]) {
      ifcv[j] = 4;
      start[j + 1] = 0;
    } else if (t == j + 3 && ((c[1] & 0xFF) == OP_LOAD_CONST || (c[1] & 0xFF) == OP_LOAD_VAR) &&
               (c[2] & 0xFF) == OP_STORE_VAR && !start[j + 2]) {
      ifcv[j] = 2;
      start[j + 1] = 0;
    }
  }
  // The step of a range whose step slot is s in the function at fs, when the function writes s
  // only by LOAD_CONST c; STORE_VAR s (in one block), with the same c != 0 each time, and s is no
  // parameter: the slot then holds 0 (locals start at 0) or c. Else 0.
  auto const_step = [&](int32_t fs, int32_t s) -> int32_t {
    if (s < func_nparams(code[fs])) return 0;
    int32_t c = 0;
    for (int32_t q = fs + 1; q < len && (code[q] & 0xFF) != OP_FUNC; q++) {
      const int32_t op = code[q] & 0xFF, a = (int32_t)(code[q] >> 8);
      if (!((op == OP_STORE_VAR && a == s) || (op == OP_FOR_RANGE && a == s) || (op == OP_FOR_LIST && a + 1 == s)))
        continue;
      if (op != OP_STORE_VAR || start[q] || (code[q - 1] & 0xFF) != OP_LOAD_CONST) return 0;
      const int32_t v = (int32_t)code[q - 1] >> 8;
      if (v == 0 || (c != 0 && v != c)) return 0;
      c = v;
    }
    return c;
  };
  // Whether the step slot s of the loop head at k (a FOR_RANGE whose loop spans [k, e), e its
  // exit) holds its constant whenever the head runs: a word before k stores it and falls into k
  // through stores of other locals only, which no jump enters (range(a, b, c) stores c, b, a in
  // turn), and no code outside the loop jumps into it (so every way to the head passes that
  // store, or comes round the loop from it). Else the head tests for the slot's initial 0.
  auto step_stored = [&](int32_t fs, int32_t k, int32_t s) {
    int32_t qs = k - 1;
    while (qs > fs && (code[qs] & 0xFF) == OP_STORE_VAR && (int32_t)(code[qs] >> 8) != s && !start[qs]) qs--;
    if (qs <= fs || !loop_head(code, len, k) || (code[qs] & 0xFF) != OP_STORE_VAR || (int32_t)(code[qs] >> 8) != s)
      return false;
    const int32_t e = (int32_t)(code[k + 1] >> 8);
    if (e <= k + 2) return false;
    auto into = [&](int32_t t) { return t >= k && t < e; };
    for (const int32_t q : out.jumps)  // (a jump inside comes round the loop)
      if (!into(q) && (into((int32_t)(code[q] >> 8)) || into(threaded(code, len, q)))) return false;
    for (int32_t q = std::max(fs + 1, qs - 2); q < k; q++) {  // a FOR_* just before: its next words
      const int32_t op = code[q] & 0xFF;
      if (op == OP_FOR_RANGE || op == OP_FOR_LIST) return false;
    }
    return true;
  };
  // Whether local x of the function at fs is never negative: no parameter, and each write of it
  // a constant >= 0 stored, or the store of a loop head (reached from its FOR_RANGE only) whose
  // counter counts up by a constant step from constants >= 0 (a counter past int32 stops the
  // range: that value is never stored). As a list loop's index (index): constants >= 0 stored,
  // and its FOR_LIST, which adds 1 to an index it found below the list's length.
  auto nonneg = [&](int32_t fs, int32_t x, bool index = false) {
    if (x < func_nparams(code[fs]) || x >= func_nlocals(code[fs])) return false;  // (past: an operand's slot)
    auto const_store = [&](int32_t q) {  // (no jump into it: its LOAD_CONST ran)
      return !start[q] && (code[q - 1] & 0xFF) == OP_LOAD_CONST && (int32_t)code[q - 1] >> 8 >= 0;
    };
    auto counts_up = [&](int32_t c) {  // the writes of counter slot c
      for (int32_t q = fs + 1; q < len && (code[q] & 0xFF) != OP_FUNC; q++) {
        const int32_t op = code[q] & 0xFF, a = (int32_t)(code[q] >> 8);
        if ((op == OP_FOR_LIST && a + 1 == c) || (op == OP_STORE_VAR && a == c && !const_store(q)) ||
            (op == OP_FOR_RANGE && a == c && const_step(fs, c + 2) <= 0))
          return false;
      }
      return true;
    };
    auto jumped_to = [&](int32_t t) {
      for (const int32_t q : out.jumps)
        if ((int32_t)(code[q] >> 8) == t || threaded(code, len, q) == t) return true;
      return false;
    };
    for (int32_t q = fs + 1; q < len && (code[q] & 0xFF) != OP_FUNC; q++) {
      const int32_t op = code[q] & 0xFF, a = (int32_t)(code[q] >> 8);
      if ((op == OP_FOR_LIST && a + 1 == x && !index) || (op == OP_FOR_RANGE && a == x)) return false;
      if (op != OP_STORE_VAR || a != x || const_store(q)) continue;
      if (index) return false;
      const int32_t c = q - 2 > fs ? (int32_t)(code[q - 2] >> 8) : -1;
      if (!(c >= 0 && (code[q - 2] & 0xFF) == OP_FOR_RANGE && loop_head(code, len, q - 2) && c != x &&
            const_step(fs, c + 2) > 0 && !jumped_to(q) && counts_up(c)))
        return false;
    }
    return true;
  };
  // Blocks, as the emission below forms them: [pc, bend[pc]) straight on until a transfer of
  // control, the next block start, or a word without code.
  auto has_block = [&](int32_t t) { return t < len && (code[t] & 0xFF) != OP_FUNC && out.depth[t] >= 0; };
  std::vector<int32_t>& bend = out.bend;
  bend.assign(2 * (size_t)(len + 1), 0);
  int32_t* wmax = bend.data() + len + 1;
  std::vector<int32_t>& blocks = out.blocks;
  blocks.clear();
  for (int32_t pc = 0; pc < len;) {
    if (!has_block(pc)) {
      pc++;
      continue;
    }
    blocks.push_back(pc);
    int32_t q = pc;
    for (;;) {
      const int32_t op = code[q] & 0xFF;
      const bool transfer = op == OP_JUMP || ((op == OP_JUMP_IF_FALSE || op == OP_JUMP_IF_TRUE) && !ifcv[q]) ||
                            op == OP_JUMP_IF_FALSE_OR_POP || op == OP_JUMP_IF_TRUE_OR_POP || op == OP_FOR_RANGE ||
                            op == OP_FOR_LIST || op == OP_CALL || op == OP_RETURN;
      q++;
      if (transfer || !has_block(q) || start[q]) break;
    }
    bend[pc] = q;
    pc = q;
  }
  // Whether local x of the function at fs is at least 1 at pc `at` (a divisor then needs no test
  // for 0 or -1): no parameter, each write of it a constant >= 1 stored or x += c for a constant
  // c > 0 (which traps rather than wrap), and a constant stored in the function's first block
  // before `at`, unconditionally (the block's if-converted stores are not), which every run of
  // the function passes first (so x's initial 0 is never read).
  auto positive = [&](int32_t fs, int32_t x, int32_t at) {
    if (x < func_nparams(code[fs]) || x >= func_nlocals(code[fs])) return false;
    auto lconst = [&](int32_t q) { return (code[q] & 0xFF) == OP_LOAD_CONST && (int32_t)code[q] >> 8 >= 1; };
    bool first = false;
    for (int32_t q = fs + 1; q < len && (code[q] & 0xFF) != OP_FUNC; q++) {
      const int32_t op = code[q] & 0xFF, a = (int32_t)(code[q] >> 8);
      if ((op == OP_FOR_LIST && a + 1 == x) || (op == OP_FOR_RANGE && a == x)) return false;
      if (op != OP_STORE_VAR || a != x) continue;
      if (start[q]) return false;  // (a jump into the store: any value)
      if (lconst(q - 1)) {
        first |= q < at && q < bend[fs + 1] && !(q - 2 > fs && ifcv[q - 2]);  // (not an if-converted store)
      } else if (!(q - 3 > fs && (code[q - 1] & 0xFF) == OP_BINARY_ADD && lconst(q - 2) &&
                   (code[q - 3] & 0xFF) == OP_LOAD_VAR && (int32_t)(code[q - 3] >> 8) == x && !start[q - 1] &&
                   !start[q - 2])) {
        return false;
      }
    }
    return first;
  };
  // Whether the JUMP at k takes part in vm.h's cycle check: backward, with an empty stack, and to
  // a word that does not write first (one that does, a loop head's FOR_*, sets cyc to -1 at once:
  // then cyc never equals k + 1 at this jump, and setting it is moot).
  auto cycle_jump = [&](int32_t k) {
    const int32_t t = (int32_t)(code[k] >> 8);
    return CYCLE_CHECK && t <= k && out.depth[k] == 0 &&
           !(t < len && op_in(OPS_WRITES & ~op_bit(OP_STORE_VAR), (int32_t)(code[t] & 0xFF)));
  };
  // The edges out of each block as the emission makes them: target, steps taken on the edge
  // beyond the block's, whether the cycle check's state goes along (else the edge is a backward
  // JUMP with an empty stack: it sets cyc). A call's edges go to checkpoints (the callee's entry,
  // the return point) and start the check over, as returns do: not listed.
  std::vector<Edges>& eds = out.edges;
  eds.resize(blocks.size());
  for (size_t b = 0; b < blocks.size(); b++) {
    const int32_t pc = blocks[b], e = bend[pc], k = e - 1, op = code[k] & 0xFF, arg = (int32_t)(code[k] >> 8);
    Edges& E = eds[b];
    E.n = 0;
    auto f = [&](int32_t t, int32_t extra, bool keep) {
      E.t[E.n] = t, E.x[E.n] = (uint8_t)extra, E.keep[E.n] = keep;
      E.n++;
    };
    switch (op) {
      case OP_JUMP: f(arg, 0, !cycle_jump(k)); break;
      case OP_JUMP_IF_FALSE: case OP_JUMP_IF_TRUE: f(arg, 0, true), f(e, 0, true); break;
      case OP_JUMP_IF_FALSE_OR_POP: case OP_JUMP_IF_TRUE_OR_POP: {
        const int32_t t = threaded(code, len, k);
        if (t >= 0) f(t, 1, true);  // (the jump at the target: one step more)
        else f(arg, 0, true);
        f(e, 0, true);
        break;
      }
      case OP_FOR_RANGE: case OP_FOR_LIST:
        if (loop_head(code, len, k)) {
          const int32_t x = (int32_t)(code[k + 1] >> 8);
          f(k + 3, 0, true), f(x, 0, !cycle_jump(k + 1));  // (leaving takes the JUMP)
        } else {
          f(k + 2, 0, true), f(e, 0, true);
        }
        break;
      case OP_CALL: case OP_RETURN: break;
      default: f(e, 0, true); break;  // (into the next block, or a word without code: the interpreter's)
    }
    E.writes = 0;
    for (int32_t q = pc; q < e; q++) E.writes |= op_in(OPS_WRITES & ~op_bit(OP_STORE_VAR), (int32_t)(code[q] & 0xFF));
  }
  // Fuel: only a checkpoint's entry tests the budget, for the most steps that any path takes from
  // there to the next checkpoint's entry (wmax); the blocks between only count theirs. Every
  // cycle of the flow graph takes a backward edge, so with the targets of those, function entries
  // and return points as checkpoints, wmax is a longest path in an acyclic graph: one pass from
  // the end. A budget that does not cover wmax hands over to the interpreter at the checkpoint
  // (where an exhausted budget ends the run at the same step).
  // (reached: an entry, a return point or an edge's target; the blocks of the loop head's JUMP
  // and STORE_VAR are not, unless other code jumps there: they get no code)
  uint8_t* kin = chk.data() + len + 1;
  uint8_t* reached = kin + len + 1;
  for (size_t b = 0; b < blocks.size(); b++) {
    const int32_t pc = blocks[b];
    if (pc == fstart[pc] + 1 || (code[pc - 1] & 0xFF) == OP_CALL) chk[pc] = reached[pc] = 1;
    const Edges& E = eds[b];
    for (int i = 0; i < E.n; i++) {
      const int32_t t = E.t[i];
      if ((uint32_t)t >= (uint32_t)len) continue;
      reached[t] = 1;
      if (t < bend[pc]) chk[t] = 2;
    }
    kin[pc] = 1;
  }
  for (size_t b = blocks.size(); b-- > 0;) {
    const int32_t pc = blocks[b], e = bend[pc];
    const Edges& E = eds[b];
    int32_t most = 0;
    for (int i = 0; i < E.n; i++) {
      const int32_t t = E.t[i];
      if ((uint32_t)t < (uint32_t)len && bend[t]) most = std::max(most, E.x[i] + (chk[t] ? 0 : wmax[t]));
    }
    wmax[pc] = e - pc + (loop_head(code, len, e - 1) ? 1 : 0) + most;
  }
  // vm.h's cycle check: kin[pc] when cyc is -1 at the block's entry on every path (a write since
  // the last backward JUMP, or none taken yet): its stores need not test their values, and its
  // backward JUMP need not compare. Starts at 1 everywhere (entries, return points: after a
  // write), lowered along the edges until nothing changes.
  for (bool more = true; more;) {
    more = false;
    for (size_t b = 0; b < blocks.size(); b++) {
      const int32_t pc = blocks[b];
      const Edges& E = eds[b];
      const bool s = kin[pc] || E.writes;
      for (int i = 0; i < E.n; i++) {  // (a later block: lowered in this pass)
        const int32_t t = E.t[i];
        if ((uint32_t)t < (uint32_t)len && bend[t] && kin[t] && !(E.keep[i] && s)) kin[t] = 0, more |= t <= pc;
      }
    }
  }
  // Steps are counted lazily: the code adds a block's steps where control leaves it for a block
  // that others enter too (or at a call, a return, a trap), not at each block's entry, so a path
  // through a loop's body makes one or two adds, not one per block (the adds are a chain of
  // dependent instructions each round). A block with one edge in (not a checkpoint) takes the
  // steps its predecessor had pending (pin) and adds its own to them.
  std::vector<int32_t>& pin = out.pin;
  pin.assign(2 * (size_t)(len + 1), 0);
  int32_t* pendin = pin.data() + len + 1;
  for (size_t b = 0; b < blocks.size(); b++)
    if (reached[blocks[b]])
      for (int i = 0; i < eds[b].n; i++)
        if ((uint32_t)eds[b].t[i] < (uint32_t)len) pin[eds[b].t[i]]++;
  // pin[t] becomes the role of the block at t: 1 one edge in (a forward one: no checkpoint);
  // 2 only a JUMP back to a loop's head (its predecessors jump there themselves, one step more,
  // so that the steps they add and the one the JUMP adds are one add); 4 that JUMP checks cycles
  // (then a conditional jump cannot go past it)
  for (const int32_t t : blocks) {
    const int32_t h = (int32_t)(code[t] >> 8);
    const bool back = bend[t] == t + 1 && (code[t] & 0xFF) == OP_JUMP && reached[t] && !chk[t] && h <= t &&
                      (uint32_t)h < (uint32_t)len && bend[h] && chk[h];
    pin[t] = (reached[t] && !chk[t] && pin[t] == 1 ? 1 : 0) | (back ? 2 : 0) | (back && cycle_jump(t) ? 4 : 0);
  }
  auto role = [&](int32_t t) JIT_INLINE_L { return (uint32_t)t < (uint32_t)len && bend[t] ? pin[t] : 0; };
  if (at + code_room(len) > cb.size && (at || !cb.reserve(code_room(len)))) return false;
  Asm a;
  a.buf = cb.mem + at;
  a.cap = (int64_t)(cb.size - at);

  std::vector<Fix>& fixes = out.fixes;  // jumps to a pc's block
  fixes.clear();
  // Cold stubs, emitted after the code: a trap at a known step (back: steps not taken of the
  // block), a trap whose status is in eax, a hand-over to the interpreter, the cycle check's
  // trap, a range counting down, a division of a negative number by a constant, a range counter
  // past int32.
  enum StubKind { S_TRAP, S_TRAP_EAX, S_HANDOVER, S_CYCLE, S_DOWN, S_DIVNEG, S_CLAMP };
  std::vector<Stub>& stubs = out.stubs;
  stubs.clear();
  int32_t cur_fs = 0;  // the function being compiled
  // steps that the block being compiled has counted but STEPS does not hold yet (any sign: see
  // branch_to); a stub's `back` (steps of the block not taken, as if STEPS held them all) less these
  int32_t pend = 0;
  auto stub = [&](int64_t at, int32_t kind, int32_t status, int32_t back, int32_t pc = 0, int32_t sp = 0,
                  int32_t obase = 0) { stubs.push_back(Stub{at, kind, status, back - pend, pc, sp, obase, cur_fs}); };
  auto flush = [&](int32_t x = 0, bool keep_flags = false) JIT_INLINE_L {  // STEPS += pend + x (lea: the flags stay)
    if (pend + x && keep_flags) a.lea(STEPS, STEPS, pend + x);
    else if (pend + x) a.alu_imm(0, STEPS, pend + x, true);
    pend = 0;
  };

  // Each function's most used locals live in LREGS while its code runs (their slots are stale):
  // loaded at the function's entry and at its return points, written back before a call and a
  // hand-over. Uses count 1, 16 times more in each loop around them; of a for-loop head's slots
  // only the counter (range) or index (list) may take a register: the others stay in memory.
  std::vector<int32_t>& lslot = out.lslot;
  lslot.assign(3 * (size_t)(len + 1), -1);
  {
    std::vector<int32_t>& wt = out.weight;
    for (size_t f = 0; f + 1 < funcs.size(); f++) {
      const int32_t fs = funcs[f], fe = funcs[f + 1];
      const int32_t nlf = func_nlocals(code[fs]);
      wt.assign(nlf + (fe - fs) + 1, 0);
      int32_t* around = wt.data() + nlf;  // loops around each pc: +1 at a backward jump's target, -1 after it
      for (int32_t q = fs + 1; q < fe; q++)
        if ((code[q] & 0xFF) == OP_JUMP && (int32_t)(code[q] >> 8) <= q && (int32_t)(code[q] >> 8) > fs)
          around[(code[q] >> 8) - fs]++, around[q + 1 - fs]--;
      for (int32_t pc = fs + 1, loops = 0; pc < fe; pc++) {
        loops += around[pc - fs];
        if (out.depth[pc] < 0) continue;
        const int32_t op = code[pc] & 0xFF, arg = (int32_t)(code[pc] >> 8);
        if (op == OP_FOR_RANGE || op == OP_FOR_LIST) {  // the counter (index) may take a register
          const int32_t ctr = op == OP_FOR_RANGE ? arg : arg + 1;
          for (int32_t i = 0; i < (op == OP_FOR_RANGE ? 3 : 2); i++)
            if (arg + i != ctr) wt[arg + i] = INT32_MIN / 2;  // (stays below 0 whatever is added)
          wt[ctr] += 4 * (loops > 2 ? 4096 : 1 << (4 * loops));  // (carried from one round to the next)
          continue;
        }
        if (op == OP_LOAD_VAR || op == OP_STORE_VAR) wt[arg] += loops > 2 ? 4096 : 1 << (4 * loops);
      }
      for (int32_t i = 0; i < NLREGS; i++) {
        int32_t best = -1;
        for (int32_t a2 = 0; a2 < nlf; a2++)
          if (wt[a2] > 1 && (best < 0 || wt[a2] > wt[best])) best = a2;
        if (best < 0) break;
        lslot[3 * (size_t)fs + i] = best;
        wt[best] = INT32_MIN / 2;
      }
    }
  }
  int8_t lreg[256];  // the current function's local -> its register (-1: in its slot)
  auto enter_function = [&](int32_t fs) {
    cur_fs = fs;
    for (int32_t i = 0; i < 256; i++) lreg[i] = -1;
    for (int32_t i = 0; i < NLREGS; i++)
      if (lslot[3 * (size_t)fs + i] >= 0) lreg[lslot[3 * (size_t)fs + i]] = (int8_t)LREGS[i];
  };
  auto store_locals = [&](int32_t fs) {
    for (int32_t i = 0; i < NLREGS; i++)
      if (lslot[3 * (size_t)fs + i] >= 0) a.store(FP, 4 * lslot[3 * (size_t)fs + i], LREGS[i]);
  };
  auto load_locals = [&](int32_t fs) {
    for (int32_t i = 0; i < NLREGS; i++)
      if (lslot[3 * (size_t)fs + i] >= 0) a.load(LREGS[i], FP, 4 * lslot[3 * (size_t)fs + i]);
  };

  // Prologue: save the callee-saved registers, load the fixed ones, jump to the entry.
  for (int r : {RBX, RBP, R12, R13, R14, R15}) a.push(r);
  a.alu_imm(5, RSP, 8, true);  // sub rsp, 8: 16-byte aligned at helper calls
  a.mov64(CTX, RDI);
  a.load64(FP, CTX, C_ST);
  a.load(STEPS, CTX, C_STEPS);
  a.alu_rm(0x2B, STEPS, CTX, C_FUEL64, true);  // (so a checkpoint compares with a constant)
  a.load(CYC, CTX, C_CYC);
  a.jmp_mem(CTX, C_ENTRY);
  const int64_t epilogue = a.n;
  // Ctx::steps = the steps so far less `back` (its low 32 bits: steps - fuel + fuel), through r
  auto steps_out = [&](int r, int32_t back) {
    a.lea(r, STEPS, -back, false);
    a.alu_rm(0x03, r, CTX, C_FUEL);
    a.store(CTX, C_STEPS, r);
  };
  a.alu_imm(0, RSP, 8, true);
  for (int r : {R15, R14, R13, R12, RBP, RBX}) a.pop(r);
  a.ret();

  // The abstract operand stack of the block being compiled: each value a constant, a slot (a
  // local, or a stack slot at its own position) or a register. It is written to the stack's
  // slots (materialized) wherever control leaves the block or memory must hold it: before a
  // jump, a call, a list helper (which clobbers the registers) or a hand-over.
  enum VK : uint8_t { K_SLOT, K_REG, K_CONST };
  using V = Val;
  static const int POOL[4] = {RSI, RDI, R8, R9};  // (RAX, RCX, RDX, R11: scratch)
  std::vector<V>& stk = out.stk;
  if (stk.size() < MAX_DEPTH + 4) stk.resize(MAX_DEPTH + 4);
  int32_t sd = 0, nl = 0;
  int32_t refs[16] = {};
  auto slot = [](int32_t s) { return (int32_t)(4 * s); };
  auto release = [&](V x) {
    if (x.k == K_REG) refs[x.v]--;
  };
  // a slot's register (a local held in one) or -1
  auto sreg = [&](int32_t sl) { return sl < 256 ? (int)lreg[sl] : -1; };
  auto load_to = [&](int r, V x) {
    if (x.k == K_CONST) a.mov_imm(r, x.v);
    else if (x.k == K_SLOT && sreg(x.v) >= 0) a.mov(r, sreg(x.v));
    else if (x.k == K_SLOT) a.load(r, FP, slot(x.v));
    else if (x.v != r) a.mov(r, x.v);
  };
  // spill: the deepest value held in a register goes to its own slot (copies of it at other
  // positions keep the register). False when no position holds one.
  auto spill = [&]() {
    for (int32_t p = 0; p < sd; p++)
      if (stk[p].k == K_REG) {
        a.store(FP, slot(nl + p), stk[p].v);
        refs[stk[p].v]--;
        stk[p] = V{K_SLOT, nl + p};
        return true;
      }
    return false;
  };
  bool stuck = false;  // more registers held outside the stack than the pool has: not compiled
  auto alloc = [&]() {
    for (;;) {
      for (int r : POOL)
        if (refs[r] == 0) {
          refs[r] = 1;
          return r;
        }
      if (!spill()) {
        stuck = true;
        refs[POOL[0]]++;
        return POOL[0];
      }
    }
  };
  // a register holding x that the caller may overwrite (x released)
  auto take = [&](V x) {
    if (x.k == K_REG && refs[x.v] == 1) return (int)x.v;
    const int r = alloc();
    load_to(r, x);
    release(x);
    return r;
  };
  auto to_reg = [&](int32_t p) {
    if (stk[p].k == K_REG) return;
    const int r = alloc();
    load_to(r, stk[p]);
    stk[p] = V{K_REG, r};
  };
  // values on the stack that read local x keep its old value (before x is written)
  auto keep_old = [&](int32_t x) {
    for (int32_t p = 0; p < sd; p++)
      if (stk[p].k == K_SLOT && stk[p].v == x) to_reg(p);
  };
  // stack slots' values only at their own positions (so materializing never overwrites one that
  // another position still reads)
  auto own = [&](int32_t from) {
    for (int32_t p = from; p < sd; p++)
      if (stk[p].k == K_SLOT && stk[p].v >= nl) to_reg(p);
  };
  auto materialize = [&]() {
    for (int32_t p = 0; p < sd; p++) {
      const V x = stk[p];
      const int32_t h = nl + p;
      if (x.k == K_SLOT && x.v == h) continue;
      if (x.k == K_CONST) {
        a.store_imm(FP, slot(h), x.v);
      } else if (x.k == K_REG) {
        a.store(FP, slot(h), x.v);
        refs[x.v]--;
      } else if (sreg(x.v) >= 0) {
        a.store(FP, slot(h), sreg(x.v));
      } else {
        a.load(RAX, FP, slot(x.v));
        a.store(FP, slot(h), RAX);
      }
      stk[p] = V{K_SLOT, h};
    }
  };
  // The top n values in a new order: position sd - n + i gets the value at sd - n + from(i). In
  // the abstract stack when own() leaves none of them in a stack slot; else (a spill while own()
  // took registers, as for more values than the pool has, put one back in its slot, which another
  // value could overwrite before it is read) through memory, every value in its slot first.
  auto reorder = [&](int32_t n, auto&& from) {
    const int32_t b = sd - n;
    own(b);
    bool in_slot = false;
    for (int32_t p = b; p < sd; p++) in_slot |= stk[p].k == K_SLOT && stk[p].v >= nl;
    V old[256];
    if (!in_slot) {
      for (int32_t i = 0; i < n; i++) old[i] = stk[b + i];
      for (int32_t i = 0; i < n; i++) stk[b + i] = old[from(i)];
      return;
    }
    materialize();
    bool done[256] = {};
    for (int32_t i = 0; i < n; i++) {  // (a cycle of the permutation at a time, through eax and ecx)
      if (done[i] || from(i) == i) continue;
      int32_t q = i;
      a.load(RAX, FP, slot(nl + b + i));
      for (;;) {
        done[q] = true;
        const int32_t src = from(q);
        if (src == i) break;
        a.load(RCX, FP, slot(nl + b + src));
        a.store(FP, slot(nl + b + q), RCX);
        q = src;
      }
      a.store(FP, slot(nl + b + q), RAX);
    }
  };
  // op r, y for r a register: 03 add, 2B sub, 3B cmp (ext: 0, 5, 7 with an immediate)
  auto alu = [&](int opc, int ext, int r, V y) {
    if (y.k == K_CONST) a.alu_imm(ext, r, y.v);
    else if (y.k == K_REG) a.alu_rr(opc, r, y.v);
    else if (sreg(y.v) >= 0) a.alu_rr(opc, r, sreg(y.v));
    else a.alu_rm(opc, r, FP, slot(y.v));
  };
  // flags of x - y
  auto compare = [&](V x, V y) {
    int rx = RAX;
    if (x.k == K_REG) rx = x.v;
    else if (x.k == K_SLOT && sreg(x.v) >= 0) rx = sreg(x.v);
    else if (x.k == K_SLOT && y.k == K_CONST) return a.alu_mem_imm(7, FP, slot(x.v), y.v);
    else load_to(RAX, x);
    alu(0x3B, 7, rx, y);
  };
  static const Cond CMP_CC[6] = {CL, CLE, CG, CGE, CE, CNE};
  // rdx = &lists[eax] for a reference checked against nlists (else bad_bytecode: `back` steps of
  // the block not taken)
  // (eax written as 32 bits, so rax's upper half is 0: a reference that passes is the index)
  auto list_header = [&](int32_t back) {
    a.load64(RDX, CTX, C_WS);
    a.alu_rm(0x3B, RAX, RDX, W_NLISTS);
    stub(a.jcc(CAE), S_TRAP, TRAP_BAD_BYTECODE, back);  // (unsigned: a negative reference too)
    a.load64(RDX, CTX, C_LISTS);
    a.lea_sib(RAX, RAX, RAX, 1, 0);
    a.lea_sib(RDX, RDX, RAX, 2, 0);
  };
  // then, with eax its length and ecx an index (negative: from the end), [rdx + rcx * 4] the
  // element (else index_error)
  auto element = [&](int32_t back) {
    a.test(RCX, RCX);
    const int64_t nonneg = a.jcc(CNS);
    a.alu_rr(0x03, RCX, RAX);  // i += len
    a.patch(nonneg, a.n);
    a.alu_rr(0x3B, RCX, RAX);  // unsigned i >= len: out of range (a negative one too)
    stub(a.jcc(CAE), S_TRAP, TRAP_INDEX_ERROR, back);
    a.alu_rm(0x03, RCX, RDX, 0);  // + the list's offset (a 32-bit add: rcx's upper half 0)
    a.load64(RDX, CTX, C_HEAP);
  };

  for (int32_t pc = 0; pc < len && a.room();) {
    const int32_t fs = fstart[pc];
    if ((code[pc] & 0xFF) == OP_FUNC || out.depth[pc] < 0) {  // headers and unreachable words: no code
      pc++;
      continue;
    }
    if (!reached[pc]) {
      pc = bend[pc];
      continue;
    }
    // one basic block [pc, end): straight on until a transfer of control or the next block start
    nl = func_nlocals(code[fs]);
    if (fs != cur_fs || pc == fs + 1) enter_function(fs);
    const int32_t end = bend[pc];
    int32_t next_block = end;  // the block whose code follows this one's (-1: none)
    while (next_block < len && bend[next_block] && !reached[next_block]) next_block = bend[next_block];
    if (!(next_block < len && bend[next_block])) next_block = -1;
    // steps of the block (a loop head's block also counts the store or the jump after it)
    const int32_t head_step = loop_head(code, len, end - 1) ? 1 : 0;
    // an if-converted jump and the cw words it skips end it (those counted where they run)
    const int32_t ifj = end - 5 >= pc && ifcv[end - 5] == 4 ? end - 5 : end - 3 >= pc && ifcv[end - 3] == 2 ? end - 3 : -1;
    const int32_t cw = ifj >= 0 ? ifcv[ifj] : 0;
    const int32_t n = end - pc + head_step - cw;
    if (chk[pc] == 2) a.align16();  // a loop's head (the buffer is page aligned)
    out.at[pc] = a.buf + a.n;
    const int32_t d0 = out.depth[pc];
    // the block's steps; at a checkpoint, those up to the next one within the budget, else the
    // interpreter from here (64-bit: steps + wmax may pass INT32_MAX)
    pend = (role(pc) & 1 ? pendin[pc] : 0) + n;  // (|pend| <= MAX_LEN + 1: a stub's back fits in 24 bits)
    if (chk[pc]) {
      a.alu_imm(7, STEPS, -wmax[pc], true);  // steps + wmax - fuel > 0
      stub(a.jcc(CG), S_HANDOVER, 0, n, pc, nl + d0, nl);
    }
    sd = d0;
    for (int32_t p = 0; p < sd; p++) stk[p] = V{K_SLOT, nl + p};
    for (int r = 0; r < 16; r++) refs[r] = 0;
    bool open = true;  // control may fall out of the block's end (else a jump or trap left it)
    bool cyc_dead = kin[pc];  // cyc is -1 here (vm.h's cycle check: see kin)
    int flag_reg = -1;        // a compare's result that only the flags hold (for ifj)
    Cond flag_cc = CE;
    // on to t (no jump to the block emitted next, when fall): the steps pending go along to a
    // block with one edge in, else into STEPS first; a block that only jumps back to a loop's
    // head, in line (its JUMP's code here)
    // vm.h's cycle check at the JUMP at k, when it takes part (cycle_jump)
    auto cycle_check = [&](int32_t k) {
      if (!cycle_jump(k)) return;
      if (!cyc_dead) {
        a.alu_imm(7, CYC, k + 1);
        stub(a.jcc(CE), S_CYCLE, 0, 0);
      }
      a.mov_imm(CYC, k + 1);
    };
    auto jump_to = [&](int32_t t, bool fall = true) JIT_INLINE_L {
      const int32_t rt = role(t);
      if (rt & 2) {  // (the JUMP's step and code)
        pend += 1;
        cycle_check(t);
        flush();
        fixes.push_back(Fix{a.jmp(), (int32_t)(code[t] >> 8)});
        return;
      }
      if (rt & 1) pendin[t] = pend;
      else flush();
      if (t != next_block || !fall) fixes.push_back(Fix{a.jmp(), t});
    };
    // where cc holds, on to t (x steps more); else on here. To a block with more edges in, the
    // steps pending (and x) go into STEPS before the jump, and where it is not taken, -x are
    // pending. A block that only jumps back to a loop's head (no cycle check) is jumped past.
    auto branch_to = [&](Cond cc, int32_t t, int32_t x = 0) JIT_INLINE_L {
      if ((role(t) & 6) == 2) x++, t = (int32_t)(code[t] >> 8);
      if (role(t) & 1) {
        pendin[t] = pend + x;
      } else {
        flush(x, true);
        pend = -x;
      }
      fixes.push_back(Fix{a.jcc(cc), t});
    };
    for (int32_t k = pc; k < end && open && a.room(); k++) {
      const uint32_t w = code[k];
      const int32_t op = w & 0xFF, arg = (int32_t)(w >> 8);
      // steps of the block after this one (a trap here did not take them)
      const int32_t back = end - k - 1 + head_step - (k <= ifj ? cw : 0);
      auto need = [&](int32_t c) {
        if (sd >= c) return true;
        stub(a.jmp(), S_TRAP, TRAP_BAD_BYTECODE, back);  // VG_NEED: the run ends here
        open = false;
        return false;
      };
      // (cyc_dead: the check was reset in this block already, so a store need not test its value)
      auto writes = [&]() {
        if (!cyc_dead) a.mov_imm(CYC, -1);
        cyc_dead = true;
      };
      // x = x + y or x - y into xr, local x's register, in place (for the store of x that comes
      // next): values that read x keep the old one, an overflow traps before the store (tb: the
      // steps not taken there), and the store changes x where y != 0 (a constant: always)
      auto update_in_place = [&](bool add, int32_t x, int xr, V y, int32_t tb) {
        keep_old(x);
        alu(add ? 0x03 : 0x2B, add ? 0 : 5, xr, y);
        stub(a.jcc(CO), S_TRAP, TRAP_OVERFLOW, tb);
        if (y.k == K_CONST) {
          writes();
        } else if (!cyc_dead) {
          compare(y, V{K_CONST, 0});
          a.rm0f(0x40 + CNE, CYC, CTX, C_M1);  // cmovne cyc, -1
        }
      };
      auto pop = [&]() { return stk[--sd]; };
      auto push = [&](V x) { stk[sd++] = x; };
      // the condition that the flags hold as cc, pushed as 0 or 1; or, for the if-converted jump
      // next (ifj), left in the flags (alloc's spill only stores: the flags stay)
      auto push_cond = [&](Cond cc, bool to_ifj) {
        const int r = alloc();
        if (to_ifj) {
          flag_reg = r, flag_cc = cc;
        } else {
          a.setcc(cc, RAX);
          a.movzx8(r, RAX);
        }
        push(V{K_REG, r});
      };
      switch (op) {
        case OP_LOAD_CONST: {
          int32_t c = ((int32_t)w) >> 8;
          while (k + 1 < end && (code[k + 1] & 0xFF) == OP_CONST_EXT) {  // (no step of these can trap)
            c = (int32_t)(((uint32_t)c << 8) | (code[k + 1] >> 8));
            k++;
          }
          push(V{K_CONST, c});
          break;
        }
        case OP_CONST_EXT: {
          if (!need(1)) break;
          const int r = take(pop());
          a.shift(4, r, 8);
          a.alu_imm(1, r, arg);  // or r, b
          push(V{K_REG, r});
          break;
        }
        case OP_LOAD_VAR: {
          // x += y or x -= y (y a constant or another local) for x in a register: in place
          const int lr = sreg(arg);
          const int32_t aop = k + 3 < end ? (int32_t)(code[k + 2] & 0xFF) : -1, yw = (int32_t)code[k + 1];
          const int32_t yop = aop >= 0 ? yw & 0xFF : -1;
          if (lr >= 0 && (aop == OP_BINARY_ADD || aop == OP_BINARY_SUB) && (ifj < 0 || k + 3 < ifj) &&
              ((yop == OP_LOAD_CONST && yw >> 8 != 0) || (yop == OP_LOAD_VAR && (yw >> 8) != arg)) &&
              (code[k + 3] & 0xFF) == OP_STORE_VAR && (int32_t)(code[k + 3] >> 8) == arg) {
            const V y = yop == OP_LOAD_CONST ? V{K_CONST, yw >> 8} : V{K_SLOT, (int32_t)((uint32_t)yw >> 8)};
            update_in_place(aop == OP_BINARY_ADD, arg, lr, y, back - 2);  // (the trap at the add)
            k += 3;
            break;
          }
          push(V{K_SLOT, arg});
          break;
        }
        case OP_STORE_VAR: {
          if (!need(1)) break;
          const V v = pop();
          keep_old(arg);
          // The cycle check's "a store of the value it holds writes nothing", without a branch
          // (whether a store changes its local is often data: c += n % 2): cyc |= -(changed).
          auto changed = [&]() {
            if (!cyc_dead) a.rm0f(0x40 + CNE, CYC, CTX, C_M1);  // cmovne cyc, -1
          };
          const int lr = sreg(arg);
          if (lr >= 0) {  // a local in a register
            if (!cyc_dead) compare(V{K_SLOT, arg}, v);
            changed();
            load_to(lr, v);
          } else if (v.k == K_CONST) {
            if (!cyc_dead) a.alu_mem_imm(7, FP, slot(arg), v.v);
            changed();
            a.store_imm(FP, slot(arg), v.v);
          } else {
            const int r = v.k == K_REG ? (int)v.v : v.k == K_SLOT && sreg(v.v) >= 0 ? sreg(v.v) : RAX;
            load_to(r, v);
            if (!cyc_dead) a.alu_rm(0x3B, r, FP, slot(arg));
            changed();
            a.store(FP, slot(arg), r);
          }
          release(v);
          break;
        }
        case OP_POP:
          if (need(1)) release(pop());
          break;
        case OP_DUP:
          if (!need(1)) break;
          own(sd - 1);
          if (stk[sd - 1].k == K_REG) refs[stk[sd - 1].v]++;
          push(stk[sd - 1]);
          break;
        case OP_DUP2:
          if (!need(2)) break;
          own(sd - 2);
          for (int32_t i = 0; i < 2; i++) {
            if (stk[sd - 2].k == K_REG) refs[stk[sd - 2].v]++;
            push(stk[sd - 2]);
          }
          break;
        case OP_SWAP:
          if (!need(2)) break;
          reorder(2, [](int32_t i) { return 1 - i; });
          break;
        case OP_ROT3:  // (a b c -- c a b)
          if (!need(3)) break;
          reorder(3, [](int32_t i) { return (i + 2) % 3; });
          break;
        case OP_REVERSE:
          if (!need(arg)) break;
          reorder(arg, [&](int32_t i) { return arg - 1 - i; });
          break;
        case OP_BINARY_ADD: case OP_BINARY_SUB: case OP_BINARY_MUL: {
          if (!need(2)) break;
          const V y = pop(), x = pop();
          int32_t r0;
          if (x.k == K_CONST && y.k == K_CONST && eval_binop(op, x.v, y.v, &r0) == TRAP_OK) {
            push(V{K_CONST, r0});
            break;
          }
          // x = x + y or x - y (x a local in a register, y any value but x or a constant 0) into
          // the store of x next: in place, past the store
          const int xr = x.k == K_SLOT ? sreg(x.v) : -1;
          if (xr >= 0 && op != OP_BINARY_MUL && k + 1 < end && (code[k + 1] & 0xFF) == OP_STORE_VAR &&
              (int32_t)(code[k + 1] >> 8) == x.v && !(y.k == K_SLOT && y.v == x.v) && !(y.k == K_CONST && y.v == 0)) {
            update_in_place(op == OP_BINARY_ADD, x.v, xr, y, back);
            release(y);
            k += 1;
            break;
          }
          const int r = take(x);
          if (op == OP_BINARY_MUL) {
            if (y.k == K_CONST) a.imul_imm(r, r, y.v);
            else if (y.k == K_REG) a.rr0f(0xAF, r, y.v);
            else if (sreg(y.v) >= 0) a.rr0f(0xAF, r, sreg(y.v));
            else a.imul_rm(r, FP, slot(y.v));
          } else {
            alu(op == OP_BINARY_ADD ? 0x03 : 0x2B, op == OP_BINARY_ADD ? 0 : 5, r, y);
          }
          stub(a.jcc(CO), S_TRAP, TRAP_OVERFLOW, back);
          release(y);
          push(V{K_REG, r});
          break;
        }
        case OP_BINARY_DIV: case OP_BINARY_MOD: {
          if (!need(2)) break;
          const V y = pop(), x = pop();
          const bool div = op == OP_BINARY_DIV;
          // a divisor not known: ecx = y, eax = x, y == 0 traps, then the flags of y against -1
          // (or, for a divisor known to be at least 1, no test: then ZF is clear, as for y != -1)
          const bool ypos = y.k == K_SLOT && positive(fs, y.v, k);
          auto by_local = [&]() {
            load_to(RCX, y);
            load_to(RAX, x);
            release(x);
            release(y);
            if (ypos) return;
            a.test(RCX, RCX);
            stub(a.jcc(CE), S_TRAP, TRAP_ZERO_DIVISION, back);
            a.alu_imm(7, RCX, -1);
          };
          // x % y == 0 (or != 0): a divisibility test, and the conditional jump after it (if any)
          // in one (for a constant y > 0 without idiv; for a local, the truncated remainder's
          // zero is floor's)
          const int32_t eq = k + 2 < end ? (int32_t)(code[k + 2] & 0xFF) : -1;
          if (!div && (eq == OP_COMPARE_EQ || eq == OP_COMPARE_NE) && (code[k + 1] & 0xFF) == OP_LOAD_CONST &&
              (code[k + 1] >> 8) == 0 && (y.k != K_CONST || y.v > 0)) {
            const int32_t jop = k + 3 < end ? (int32_t)(code[k + 3] & 0xFF) : -1;
            const bool branch = ((jop == OP_JUMP_IF_FALSE || jop == OP_JUMP_IF_TRUE) && !ifcv[k + 3]) ||
                                (jop >= 0 && threaded(code, len, k + 3) >= 0);
            if (branch) {
              own(0);
              materialize();
            }
            Cond cc = CE;
            if (y.k == K_CONST) {
              const bool pos = x.k == K_SLOT && nonneg(fs, x.v);
              int src = pos && sreg(x.v) >= 0 ? sreg(x.v) : -1;
              if (src < 0) {
                load_to(RAX, x);
                if (pos) src = RAX;
              }
              release(x);
              cc = divisible(a, y.v, src);
            } else {
              by_local();
              const int64_t m1 = ypos ? -1 : a.jcc(CE);  // x % -1 == 0 (ZF set), and INT_MIN / -1 must not run
              a.cdq();
              a.unary(7, RCX);  // idiv ecx: edx = the truncated remainder
              a.test(RDX, RDX);
              if (m1 >= 0) a.patch(m1, a.n);
            }
            if (eq == OP_COMPARE_NE) cc = invert(cc);
            if (branch) {
              if (jop == OP_JUMP_IF_FALSE || jop == OP_JUMP_IF_TRUE)
                branch_to(jop == OP_JUMP_IF_TRUE ? cc : invert(cc), (int32_t)(code[k + 3] >> 8));
              else  // (as OP_JUMP_IF_*_OR_POP's below)
                branch_to(jop == OP_JUMP_IF_TRUE_OR_POP ? cc : invert(cc), threaded(code, len, k + 3), 1);
              jump_to(k + 4);
              k += 3;
              open = false;
            } else {
              push_cond(cc, k + 3 == ifj);
              k += 2;
            }
            break;
          }
          if (y.k == K_CONST && y.v > 0) {  // by a positive constant: no trap, no idiv
            load_to(RAX, x);
            release(x);
            if ((y.v & (y.v - 1)) == 0) {
              div_const(a, div, y.v);  // RAX -> RAX
            } else {
              // x >= 0 (the common case) in line: floor(x / c) = (x * M) >> sh, exact for
              // x < 2^31 with 2^(b-1) <= c < 2^b, sh = 31 + b, M = ceil(2^sh / c) <= 2^32 + 1 (the
              // error x * (M - 2^sh / c) / 2^sh stays below 2^-b < 1 / c); x mod c = the high half
              // of ((x * M2) mod 2^64) * c with M2 = floor((2^64 - 1) / c) + 1, exact for x, c
              // below 2^32 (Lemire, Kaser and Kurz 2019: two multiplies on the value's path, not
              // four operations); x < 0 in a stub
              const int b = 32 - __builtin_clz((uint32_t)y.v), sh = 31 + b;
              const unsigned __int128 one = 1;
              const uint64_t m = div ? (uint64_t)(((one << sh) + (uint64_t)y.v - 1) / (uint64_t)y.v)
                                     : UINT64_MAX / (uint64_t)y.v + 1;
              const bool pos = x.k == K_SLOT && nonneg(fs, x.v);
              int64_t neg = -1;
              if (!pos) {
                a.test(RAX, RAX);
                neg = a.jcc(CS);
              }
              a.mov_imm64(R11, (int64_t)m);
              if (div) {
                a.mov(RCX, RAX);  // (zero-extended)
                a.rr0f(0xAF, RCX, R11, true);  // imul rcx, r11
                a.shift(5, RCX, sh, true);      // shr rcx, sh: the quotient
                a.mov(RAX, RCX);
              } else {
                a.rr0f(0xAF, RAX, R11, true);  // imul rax, r11 (eax zero-extended)
                a.mov_imm(RCX, y.v);
                a.unary(4, RCX, true);  // mul rcx: rdx = the remainder
                a.mov(RAX, RDX);
              }
              if (!pos) stubs.push_back(Stub{neg, S_DIVNEG, y.v, (int32_t)a.n, div ? 1 : 0, 0, 0, cur_fs});
            }
          } else {
            by_local();
            int64_t done_m1 = -1;
            if (!ypos) {
              const int64_t not_m1 = a.jcc(CNE);  // x // -1 and x % -1 without idiv (INT_MIN // -1 traps)
              if (div) {
                a.unary(3, RAX);  // neg eax: overflows only for INT_MIN
                stub(a.jcc(CO), S_TRAP, TRAP_OVERFLOW, back);
              } else {
                a.mov_imm(RAX, 0);
              }
              done_m1 = a.jmp();
              a.patch(not_m1, a.n);
            }
            a.cdq();
            a.unary(7, RCX);  // idiv ecx: eax = quotient, edx = remainder (truncated)
            // floor: when the remainder is not 0 and its sign differs from the divisor's
            a.test(RDX, RDX);
            const int64_t exact = a.jcc(CE);
            a.mov(R11, RDX);
            a.alu_rr(0x33, R11, RCX);  // xor r11d, ecx
            const int64_t same_sign = a.jcc(CNS);
            if (div) a.alu_imm(5, RAX, 1);  // sub eax, 1
            else a.alu_rr(0x03, RDX, RCX);  // add edx, ecx
            a.patch(exact, a.n);
            a.patch(same_sign, a.n);
            if (!div) a.mov(RAX, RDX);
            if (done_m1 >= 0) a.patch(done_m1, a.n);
          }
          const int r = alloc();
          a.mov(r, RAX);
          push(V{K_REG, r});
          break;
        }
        case OP_UNARY_NEG: case OP_ABS: {
          if (!need(1)) break;
          const V x = pop();
          if (x.k == K_CONST && x.v != VG_INT32_MIN) {
            push(V{K_CONST, op == OP_UNARY_NEG || x.v < 0 ? -x.v : x.v});
            break;
          }
          const int r = take(x);
          int64_t pos = -1;
          if (op == OP_ABS) {
            a.test(r, r);
            pos = a.jcc(CNS);
          }
          a.unary(3, r);
          stub(a.jcc(CO), S_TRAP, TRAP_OVERFLOW, back);
          if (pos >= 0) a.patch(pos, a.n);
          push(V{K_REG, r});
          break;
        }
        case OP_UNARY_NOT: {
          if (!need(1)) break;
          const V x = pop();
          if (x.k == K_CONST) {
            push(V{K_CONST, x.v == 0});
            break;
          }
          compare(x, V{K_CONST, 0});
          release(x);
          push_cond(CE, k + 1 == ifj);
          break;
        }
        case OP_MIN: case OP_MAX: {
          if (!need(2)) break;
          const V y = pop(), x = pop();
          const int r = take(x);
          load_to(RCX, y);
          release(y);
          a.alu_rr(0x3B, RCX, r);  // cmp ecx, r: y against x
          a.cmov(op == OP_MIN ? CL : CG, r, RCX);
          push(V{K_REG, r});
          break;
        }
        case OP_COMPARE_LT: case OP_COMPARE_LE: case OP_COMPARE_GT: case OP_COMPARE_GE: case OP_COMPARE_EQ:
        case OP_COMPARE_NE: {
          if (!need(2)) break;
          const V y = pop(), x = pop();
          const Cond cc = CMP_CC[op - OP_COMPARE_LT];
          const int32_t nop = k + 1 < end ? (int32_t)(code[k + 1] & 0xFF) : -1;
          const int32_t thr = k + 1 < end ? threaded(code, len, k + 1) : -1;
          if ((((nop == OP_JUMP_IF_FALSE || nop == OP_JUMP_IF_TRUE) && !ifcv[k + 1]) || thr >= 0) &&
              !(x.k == K_CONST && y.k == K_CONST)) {
            // the conditional jump after it: one compare and a conditional jump
            const int32_t t = (int32_t)(code[k + 1] >> 8);
            own(0);
            materialize();
            compare(x, y);
            release(x);
            release(y);
            if (thr >= 0)  // (as OP_JUMP_IF_*_OR_POP's below)
              branch_to(nop == OP_JUMP_IF_TRUE_OR_POP ? cc : invert(cc), thr, 1);
            else
              branch_to(nop == OP_JUMP_IF_TRUE ? cc : invert(cc), t);
            jump_to(k + 2);
            k++;
            open = false;
            break;
          }
          compare(x, y);
          release(x);
          release(y);
          push_cond(cc, k + 1 == ifj);
          break;
        }
        case OP_JUMP:
          materialize();
          cycle_check(k);
          jump_to(arg);
          open = false;
          break;
        case OP_JUMP_IF_FALSE: case OP_JUMP_IF_TRUE: {
          if (!need(1)) break;
          const V c = pop();
          const bool on_true = op == OP_JUMP_IF_TRUE;
          if (k == ifj) {  // if-converted (see ifcv)
            Cond runs = on_true ? CE : CNE;  // where the skipped words run
            if (c.k == K_REG && c.v == flag_reg) runs = on_true ? invert(flag_cc) : flag_cc;  // a compare's flags
            else compare(c, V{K_CONST, 0});
            release(c);
            a.setcc(runs, RAX);
            a.movzx8(RAX, RAX);
            a.lea_sib(STEPS, STEPS, RAX, cw == 4 ? 2 : 1, pend);  // their steps where they run (and the pending)
            pend = 0;
            if (cw == 2) {  // the move: the value, or c's own where the words do not run (flags kept)
              const uint32_t v = code[k + 1];
              const int r = alloc();
              load_to(r, (v & 0xFF) == OP_LOAD_CONST ? V{K_CONST, (int32_t)v >> 8} : V{K_SLOT, (int32_t)(v >> 8)});
              const int32_t cs = (int32_t)(code[k + 2] >> 8);
              if (sreg(cs) >= 0) a.cmov(invert(runs), r, sreg(cs));
              else a.rm0f(0x40 + invert(runs), r, FP, slot(cs));
              push(V{K_REG, r});
              k += 1;  // the STORE_VAR next
              break;
            }
            // the addend, then on at the BINARY_ADD's store
            const uint32_t v = code[k + 2];
            if ((v & 0xFF) == OP_LOAD_CONST) {
              if (((int32_t)v >> 8) != 1) a.imul_imm(RAX, RAX, (int32_t)v >> 8);
            } else {
              a.unary(3, RAX);  // neg: 0 or -1, a mask
              const V y{K_SLOT, (int32_t)(v >> 8)};
              if (sreg(y.v) >= 0) a.alu_rr(0x23, RAX, sreg(y.v));
              else a.alu_rm(0x23, RAX, FP, slot(y.v));
            }
            const int32_t cs = (int32_t)(code[k + 1] >> 8);
            if (sreg(cs) >= 0) {  // c in a register: in place, past the store
              update_in_place(true, cs, sreg(cs), V{K_REG, RAX}, 1);
              k += 4;
              break;
            }
            const int r = alloc();
            load_to(r, V{K_SLOT, cs});
            a.alu_rr(0x03, r, RAX);
            stub(a.jcc(CO), S_TRAP, TRAP_OVERFLOW, 1);  // (taken up to the add: the store not)
            push(V{K_REG, r});
            k += 3;  // the STORE_VAR next
            break;
          }
          materialize();  // (a stack slot c reads is above the stack now: materializing keeps it)
          if (c.k == K_CONST) {
            jump_to((c.v != 0) == on_true ? arg : k + 1);
          } else {
            compare(c, V{K_CONST, 0});
            release(c);
            branch_to(on_true ? CNE : CE, arg);
            jump_to(k + 1);
          }
          open = false;
          break;
        }
        case OP_JUMP_IF_FALSE_OR_POP: case OP_JUMP_IF_TRUE_OR_POP: {
          if (!need(1)) break;
          own(0);
          materialize();  // (the value stays on the stack where the jump is taken)
          a.alu_mem_imm(7, FP, slot(nl + sd - 1), 0);
          const int32_t t = threaded(code, len, k);
          if (t >= 0) {
            // taken: the jump at the target takes one more step (in the checkpoint's wmax) and
            // pops the value
            branch_to(op == OP_JUMP_IF_TRUE_OR_POP ? CNE : CE, t, 1);
            sd--;
            jump_to(k + 1);
            open = false;
            break;
          }
          branch_to(op == OP_JUMP_IF_TRUE_OR_POP ? CNE : CE, arg);
          jump_to(k + 1);
          open = false;
          break;
        }
        case OP_FOR_RANGE: {
          materialize();
          writes();
          // a loop head: leaving takes the JUMP after it (its cycle check included: after the
          // head's write it only sets cyc), going on the STORE_VAR (the value into x, after the
          // counter moved: x may be a range slot)
          const bool head = loop_head(code, len, k);
          const int32_t fb = back;  // (a trap here takes neither the store nor the jump: back counts it)
          const int32_t e = (int32_t)(code[k + 1] >> 8), x = head ? (int32_t)(code[k + 2] >> 8) : 0;
          const int32_t c = slot(arg), stop = slot(arg + 1), step = slot(arg + 2), cr = sreg(arg);
          const bool direct = head && !cycle_jump(k + 1);  // (leaving takes the JUMP at k + 1)
          const int32_t sc = direct ? const_step(fs, arg + 2) : 0;
          if (sc != 0) {  // the step is 0 (traps) or sc: its direction and size known
            if (!step_stored(fs, k, arg + 2)) {
              a.alu_mem_imm(7, FP, step, 0);
              stub(a.jcc(CE), S_TRAP, TRAP_VALUE_ERROR, fb);
            }
            const int rc = cr >= 0 ? cr : RAX;
            if (cr < 0) a.load(RAX, FP, c);
            a.alu_rm(0x3B, rc, FP, stop);
            branch_to(sc > 0 ? CGE : CLE, e);  // past stop: leave
            const bool apart = x < arg || x > arg + 2;  // x no range slot: written first, else after
            if (!apart) a.mov(RDX, rc);
            else if (sreg(x) >= 0) a.mov(sreg(x), rc);
            else a.store(FP, slot(x), rc);
            a.alu_imm(0, rc, sc);  // advance: past int32 is past stop (in a stub: rare)
            if (sc != 1 && sc != -1) {  // (by 1 from below stop or above it: never past int32)
              const int64_t past = a.jcc(CO);
              stubs.push_back(Stub{past, S_CLAMP, rc, (int32_t)a.n, stop, 0, 0, cur_fs});
            }
            if (cr < 0) a.store(FP, c, RAX);
            if (!apart && sreg(x) >= 0) a.mov(sreg(x), RDX);
            else if (!apart) a.store(FP, slot(x), RDX);
            jump_to(k + 3);
            open = false;
            break;
          }
          a.load(RCX, FP, step);
          a.test(RCX, RCX);
          stub(a.jcc(CE), S_TRAP, TRAP_VALUE_ERROR, fb);
          if (cr >= 0) a.mov(RAX, cr);
          else a.load(RAX, FP, c);
          // a loop head that leaves forward: counting up in line, leaving straight to e, counting
          // down in a stub (S_DOWN); else both here
          int64_t leave1 = -1, leave2 = -1;
          if (direct) {  // (S_DOWN jumps to e too: its steps pending the same)
            if (role(e) & 1) pendin[e] = pend;
            else flush(0, true);
            const int64_t down = a.jcc(CS);
            a.alu_rm(0x3B, RAX, FP, stop);
            fixes.push_back(Fix{a.jcc(CGE), e});  // counter >= stop: leave
            stubs.push_back(Stub{down, S_DOWN, stop, (int32_t)a.n, e, 0, 0, cur_fs});
          } else {
            const int64_t down = a.jcc(CS);
            a.alu_rm(0x3B, RAX, FP, stop);
            leave1 = a.jcc(CGE);  // counter >= stop: leave
            const int64_t go = a.jmp();
            a.patch(down, a.n);
            a.alu_rm(0x3B, RAX, FP, stop);
            leave2 = a.jcc(CLE);  // counter <= stop: leave
            a.patch(go, a.n);
          }
          if (head) a.mov(RDX, RAX);
          else a.store(FP, slot(nl + sd), RAX);  // push the counter
          a.alu_rr(0x03, RAX, RCX);  // advance it: past int32 is past stop (in a stub: rare)
          const int64_t past = a.jcc(CO);
          stubs.push_back(Stub{past, S_CLAMP, RAX, (int32_t)a.n, stop, 0, 0, cur_fs});
          if (cr >= 0) a.mov(cr, RAX);
          else a.store(FP, c, RAX);
          const int32_t p0 = pend;  // (at the leaves)
          if (head) {
            if (sreg(x) >= 0) a.mov(sreg(x), RDX);
            else a.store(FP, slot(x), RDX);
            if (direct) {
              jump_to(k + 3);
            } else {
              jump_to(k + 3, false);
              a.patch(leave1, a.n);
              a.patch(leave2, a.n);
              pend = p0;
              a.mov_imm(CYC, k + 2);
              cyc_dead = false;
              jump_to(e, false);
            }
          } else {
            jump_to(k + 2, false);
            a.patch(leave1, a.n);
            a.patch(leave2, a.n);
            pend = p0;
            jump_to(k + 1);
          }
          open = false;
          break;
        }
        case OP_FOR_LIST: {
          materialize();
          writes();
          const bool head = loop_head(code, len, k);  // (as FOR_RANGE's)
          const int32_t fb = back;
          const int32_t e = (int32_t)(code[k + 1] >> 8), x = head ? (int32_t)(code[k + 2] >> 8) : 0;
          const int32_t ref = slot(arg), idx = slot(arg + 1), ir = sreg(arg + 1);
          a.load64(RDX, CTX, C_WS);
          a.load(RAX, FP, ref);
          a.alu_rm(0x3B, RAX, RDX, W_NLISTS);
          stub(a.jcc(CAE), S_TRAP, TRAP_BAD_BYTECODE, fb);  // (unsigned: a negative reference too)
          if (ir >= 0) a.mov(RCX, ir);
          else a.load(RCX, FP, idx);
          if (!nonneg(fs, arg + 1, true)) {  // (else the index's sign is known)
            a.test(RCX, RCX);
            stub(a.jcc(CS), S_TRAP, TRAP_BAD_BYTECODE, fb);
          }
          a.load64(RSI, CTX, C_LISTS);
          a.lea_sib(RAX, RAX, RAX, 1, 0);       // rax = ref * 3 (eax a 32-bit load: rax's upper half 0)
          a.rm_sib(0x3B, RCX, RSI, RAX, 2, 4);  // cmp ecx, [rsi + ref*12 + 4]: the length
          const bool direct = head && !cycle_jump(k + 1);  // (as FOR_RANGE's)
          int64_t leave = -1;
          if (direct) branch_to(CGE, e);
          else leave = a.jcc(CGE);
          const int32_t p0 = pend;  // (at the leave)
          a.rm_sib(0x8B, RDI, RSI, RAX, 2, 0);  // mov edi, [rsi + ref*12]: the offset
          a.alu_rr(0x03, RDI, RCX);             // + index (a 32-bit add of two ints >= 0)
          a.load64(R8, CTX, C_HEAP);
          a.rm_sib(0x8B, RAX, R8, RDI, 2, 0);  // the element
          if (ir >= 0) {
            a.alu_imm(0, ir, 1);
          } else {
            a.alu_imm(0, RCX, 1);
            a.store(FP, idx, RCX);
          }
          if (head) {  // (as FOR_RANGE's: the element into x after the index moved)
            if (sreg(x) >= 0) a.mov(sreg(x), RAX);
            else a.store(FP, slot(x), RAX);
            if (direct) {
              jump_to(k + 3);
            } else {
              jump_to(k + 3, false);
              a.patch(leave, a.n);
              pend = p0;
              a.mov_imm(CYC, k + 2);
              cyc_dead = false;
              jump_to(e, false);
            }
          } else {
            a.store(FP, slot(nl + sd), RAX);
            jump_to(k + 2, false);
            a.patch(leave, a.n);
            pend = p0;
            jump_to(k + 1);
          }
          open = false;
          break;
        }
        case OP_LEN: case OP_INDEX: {
          const bool ix = op == OP_INDEX;
          if (!need(ix ? 2 : 1)) break;
          const V i = ix ? pop() : V{K_CONST, 0};
          const V x = pop();
          load_to(RAX, x);
          if (ix) load_to(RCX, i);
          release(x);
          release(i);
          list_header(back);
          a.load(RAX, RDX, 4);  // its length
          if (ix) {
            element(back);
            a.rm_sib(0x8B, RAX, RDX, RCX, 2, 0);
          }
          const int r = alloc();
          a.mov(r, RAX);
          push(V{K_REG, r});
          break;
        }
        case OP_STORE_INDEX: {  // in line, vm.h's checks in its order
          if (!need(3)) break;
          writes();
          const V i = pop(), r = pop(), v = pop();
          load_to(RAX, r);
          load_to(RCX, i);
          list_header(back);
          a.load(RAX, RDX, 4);  // its length
          element(back);
          load_to(RAX, v);
          a.rm_sib(0x89, RAX, RDX, RCX, 2, 0);  // heap[off + i] = v
          release(i);
          release(r);
          release(v);
          break;
        }
        case OP_BUILD_LIST: case OP_LIST_REPEAT: case OP_LIST_CONCAT: case OP_LIST_EXTEND: case OP_APPEND:
        case OP_LIST_POP: {
          const int32_t k_ops = op == OP_BUILD_LIST ? arg : op == OP_LIST_POP ? 1 : 2;
          if (!need(k_ops)) break;
          own(0);
          materialize();  // (the helper reads its operands from the slots and clobbers the registers)
          writes();
          int64_t fast_done = -1;
          if (op == OP_APPEND) {  // in line while the list has room (reserve's first case), else the helper
            a.load(RAX, FP, slot(nl + sd - 2));
            list_header(back);
            a.load(RCX, RDX, 4);
            a.alu_rm(0x3B, RCX, RDX, 8);  // len against cap
            const int64_t full = a.jcc(CGE);
            a.alu_mem_imm(0, RDX, 4, 1);  // len++
            a.alu_rm(0x03, RCX, RDX, 0);  // off + the old len (32-bit: rcx's upper half 0)
            a.load64(RDX, CTX, C_HEAP);
            a.load(RAX, FP, slot(nl + sd - 1));
            a.rm_sib(0x89, RAX, RDX, RCX, 2, 0);
            fast_done = a.jmp();
            a.patch(full, a.n);
          }
          int32_t (*h)(Workspace*, const VMConfig*, int32_t*, int32_t) =
              op == OP_BUILD_LIST ? helpers::build_list : op == OP_LIST_REPEAT ? helpers::list_repeat
              : op == OP_LIST_CONCAT ? helpers::list_concat : op == OP_LIST_EXTEND ? helpers::list_extend
              : op == OP_APPEND ? helpers::append : helpers::list_pop;
          a.load64(RDI, CTX, C_WS);
          a.load64(RSI, CTX, C_CFG);
          a.lea(RDX, FP, slot(nl + sd - k_ops));
          a.mov_imm(RCX, arg);
          a.mov_imm64(RAX, (int64_t)(intptr_t)h);
          a.store(CTX, C_CYC, CYC);  // (the call clobbers it)
          a.call_reg(RAX);
          a.load(CYC, CTX, C_CYC);
          a.test(RAX, RAX);
          stub(a.jcc(CNE), S_TRAP_EAX, 0, back);
          if (fast_done >= 0) a.patch(fast_done, a.n);
          const int32_t results = op == OP_APPEND ? 0 : 1;
          sd -= k_ops;
          for (int32_t i = 0; i < results; i++) push(V{K_SLOT, nl + sd});
          break;
        }
        case OP_CALL: {
          const uint32_t hdr = code[arg];
          const int32_t np = func_nparams(hdr), nlf = func_nlocals(hdr);
          if (!need(np)) break;
          own(0);
          materialize();
          const int32_t d = sd;
          writes();
          // (fuel: counted at this block's entry; the callee's blocks count their own)
          a.load(RAX, CTX, C_DEPTH);
          a.alu_rm(0x3B, RAX, CTX, C_MAXD);
          stub(a.jcc(CGE), S_TRAP, TRAP_RECURSION, back);
          const int32_t nb = nl + d - np;  // the callee's base, relative to this frame's
          // the callee's locals and deepest operand stack must fit: else the interpreter takes
          // over at this CALL (the steps before it in this block are taken)
          a.lea(RAX, FP, slot(nb + nlf + out.fmax[arg]));
          a.alu_rm(0x3B, RAX, CTX, C_STEND, true);  // (addresses: 64-bit)
          stub(a.jcc(CA), S_HANDOVER, 0, back + 1, k, nl + d, nl);
          store_locals(fs);  // (the callee's locals take the registers)
          a.load64(RAX, CTX, C_FRAMES);
          a.load(RCX, CTX, C_DEPTH);
          a.lea_sib(RCX, RCX, RCX, 1, 0, false);  // depth * 3
          a.rm_sib(0xC7, 0, RAX, RCX, 2, 0);
          a.d32(k + 1);                         // frames[depth].ret_pc
          a.load(RDX, CTX, C_BASE);
          a.rm_sib(0x89, RDX, RAX, RCX, 2, 4);  // .base
          a.lea(RSI, RDX, nl, false);
          a.rm_sib(0x89, RSI, RAX, RCX, 2, 8);  // .obase
          a.alu_mem_imm(0, CTX, C_DEPTH, 1);
          a.alu_imm(0, RDX, nb);
          a.store(CTX, C_BASE, RDX);
          a.lea(FP, FP, slot(nb));
          for (int32_t i = np; i < nlf; i++) a.store_imm(FP, slot(i), 0);
          flush();
          fixes.push_back(Fix{a.jmp(), -1 - arg});  // (the callee's entry: its locals into registers)
          open = false;
          break;
        }
        case OP_RETURN: {
          if (!need(1)) break;
          const V v = pop();
          writes();
          flush();
          load_to(RAX, v);
          release(v);
          // (a program without calls is always at depth 0 in native code: runs start there, and
          // one that hands over stays in the interpreter)
          const int64_t nested = out.calls.empty() ? -1 : (a.alu_mem_imm(7, CTX, C_DEPTH, 0), a.jcc(CNE));
          a.store(CTX, C_RESULT, RAX);
          steps_out(RAX, 0);
          a.mov_imm(RAX, EXIT_RETURN);
          a.patch(a.jmp(), epilogue);
          if (nested < 0) {
            open = false;
            break;
          }
          a.patch(nested, a.n);
          a.alu_mem_imm(5, CTX, C_DEPTH, 1);
          a.store(FP, 0, RAX);  // the value where the callee's frame began
          a.load64(RDX, CTX, C_FRAMES);
          a.load(RCX, CTX, C_DEPTH);
          a.lea_sib(RCX, RCX, RCX, 1, 0, false);
          a.rm_sib(0x8B, RSI, RDX, RCX, 2, 0);  // ret_pc
          a.rm_sib(0x8B, RDI, RDX, RCX, 2, 4);  // base
          a.store(CTX, C_BASE, RDI);
          a.load64(RAX, CTX, C_ST);
          a.movsxd(RDI, RDI);
          a.lea_sib(FP, RAX, RDI, 2, 0);  // (the return point's entry takes the caller's locals back)
          a.load64(RAX, CTX, C_RET);
          a.movsxd(RSI, RSI);
          a.jmp_mem_sib(RAX, RSI, 3, 0);
          open = false;
          break;
        }
        default:  // FUNC (fell off a function) or an unknown opcode
          stub(a.jmp(), S_TRAP, TRAP_BAD_BYTECODE, back);
          open = false;
          break;
      }
    }
    if (open) {  // falling into the next block
      own(0);
      materialize();
      jump_to(end);
    }
    pc = end;
  }
  // The end of a function's code (a jump to the next FUNC word or past the last one): fetching
  // there traps bad_bytecode, after the fuel check; a FUNC word counts as a step, the end not.
  std::vector<int64_t>& end_stub = out.end_stub;
  end_stub.assign(len + 1, -1);
  // Cold code: stubs, then the ends that jumps reach.
  // The traps' common tail: eax = status | steps not taken << 8.
  if (!a.room()) return false;
  const int64_t trap_tail = a.n;
  a.mov(RCX, RAX);
  a.alu_imm(4, RAX, 0xFF);
  a.store(CTX, C_STATUS, RAX);
  a.shift(7, RCX, 8);  // (sar: back may be negative, see pend)
  a.mov(RAX, STEPS);
  a.alu_rr(0x2B, RAX, RCX);
  a.alu_rm(0x03, RAX, CTX, C_FUEL);
  a.store(CTX, C_STEPS, RAX);
  a.mov_imm(RAX, EXIT_TRAP);
  a.patch(a.jmp(), epilogue);
  for (const Stub& s : stubs) {
    if (!a.room()) return false;
    a.patch(s.at, a.n);
    switch (s.kind) {
      case S_TRAP:
        a.mov_imm(RAX, (int32_t)((uint32_t)s.status | (uint32_t)s.back << 8));
        a.patch(a.jmp(), trap_tail);
        continue;
      case S_TRAP_EAX:
        a.alu_imm(1, RAX, (int32_t)((uint32_t)s.back << 8));  // or eax, back << 8 (the helper's status is below 256)
        a.patch(a.jmp(), trap_tail);
        continue;
      case S_CLAMP:  // a range counter past int32 (status: its register) takes the stop's value
                     // (pc: the stop's slot), back to `back`
        a.load(s.status, FP, s.pc);
        a.patch(a.jmp(), s.back);
        continue;
      case S_DOWN:  // a loop head's range counting down (status: the stop's slot, back: where
                    // the head goes on, pc: where it leaves to)
        a.alu_rm(0x3B, RAX, FP, s.status);
        fixes.push_back(Fix{a.jcc(CLE), s.pc});
        a.patch(a.jmp(), s.back);
        continue;
      case S_DIVNEG:  // x // c or x % c (pc: which) for a negative x (status: c), back to `back`
        div_const(a, s.pc != 0, s.status);
        a.patch(a.jmp(), s.back);
        continue;
      case S_CYCLE:  // as the interpreter: every step of the budget spent
        a.store_imm(CTX, C_STATUS, TRAP_OUT_OF_FUEL);
        a.load(RAX, CTX, C_FUEL);
        a.store(CTX, C_STEPS, RAX);
        break;
      default: {  // hand over at pc with the steps before it
        steps_out(RAX, s.back);
        a.store_imm(CTX, C_PC, s.pc);
        store_locals(s.fs);  // (the interpreter reads them from the frame)
        a.load(RCX, CTX, C_BASE);
        a.lea(RAX, RCX, s.sp, false);
        a.store(CTX, C_SP, RAX);
        a.lea(RAX, RCX, s.obase, false);
        a.store(CTX, C_OBASE, RAX);
        a.mov_imm(RAX, EXIT_HANDOVER);
        a.patch(a.jmp(), epilogue);
        continue;
      }
    }
    a.mov_imm(RAX, EXIT_TRAP);
    a.patch(a.jmp(), epilogue);
  }
  // A pc with no code (the end of a function, a FUNC word): the interpreter takes over there (it
  // traps at the fetch or at the FUNC word; it reads no operand, so sp is any).
  auto end_at = [&](int32_t t) {
    if (end_stub[t] < 0) {
      end_stub[t] = a.n;
      steps_out(RAX, 0);
      a.store_imm(CTX, C_PC, t);
      a.load(RCX, CTX, C_BASE);
      a.store(CTX, C_SP, RCX);
      a.store(CTX, C_OBASE, RCX);
      a.mov_imm(RAX, EXIT_HANDOVER);
      a.patch(a.jmp(), epilogue);
    }
    return end_stub[t];
  };
  // Function entries (their register locals loaded) and return points (the caller's loaded again).
  for (size_t f = 0; f + 1 < funcs.size(); f++) {
    const int32_t fs = funcs[f];
    if (fs + 1 >= len || !out.at[fs + 1]) continue;
    if (!a.room()) return false;
    out.fentry[fs] = a.buf + a.n;
    load_locals(fs);
    a.patch(a.jmp(), (uint8_t*)out.at[fs + 1] - a.buf);
  }
  for (const int32_t pc : out.calls) {
    if (out.depth[pc] < 0) continue;
    if (!a.room()) return false;
    const int32_t r = pc + 1;  // (a CALL ending its function returns to the next FUNC word or the end)
    if (out.at[r]) {
      out.ret[r] = a.buf + a.n;
      load_locals(fstart[pc]);
      a.patch(a.jmp(), (uint8_t*)out.at[r] - a.buf);
    } else if (r == len || (code[r] & 0xFF) == OP_FUNC) {
      out.ret[r] = a.buf + end_at(r);
    } else {
      return false;  // (should not happen)
    }
  }
  for (const Fix& f : fixes) {
    if (!a.room()) return false;
    const int32_t t = f.pc;
    if (t < 0) {  // a function's entry: its FUNC word at -1 - t
      const int32_t fs = -1 - t;
      if (out.fentry[fs]) a.patch(f.at, (uint8_t*)out.fentry[fs] - a.buf);
      else a.patch(f.at, end_at(fs + 1));  // (an empty function: its end)
    } else if (t < len && out.at[t]) {
      a.patch(f.at, (uint8_t*)out.at[t] - a.buf);
    } else if (t == len || (code[t] & 0xFF) == OP_FUNC) {
      a.patch(f.at, end_at(t));
    } else {
      return false;  // a jump to a pc without a block: not compiled (should not happen)
    }
  }
  if (a.full || stuck) return false;
  out.run = (int32_t(*)(Ctx*))(void*)a.buf;
  out.size = a.n;
  out.ok = true;
  return true;
}

// What the runs of one entry of a compiled program need: valid while its code stays in the
// buffer, and ret_at's table (read only by programs with calls) with it.
struct Ready {
  int32_t (*run)(Ctx*) = nullptr;
  const void* entry = nullptr;     // the entry function's entry (null: it is not compiled)
  int32_t fmax = 0;                // its deepest operand stack
  void* const* ret_at = nullptr;   // Compiled::ret
};
inline Ready ready(const Compiled& cp, int32_t entry_pc) {
  return Ready{cp.run, cp.fentry[entry_pc], cp.fmax[entry_pc], cp.ret.data()};
}

// The context of a compiled program's runs on ws: the fields that stay the same from run to run
// (run() sets the others).
inline void prepare(Ctx& c, const Ready& cp, const VMConfig& cfg, Workspace& ws) {
  c.st = ws.stack;
  c.frames = ws.frames;
  c.ws = &ws;
  c.cfg = &cfg;
  c.ret_at = cp.ret_at;
  c.entry = cp.entry;
  c.st_end = ws.stack + cfg.stack_size;
  c.fuel64 = cfg.fuel;
  c.fuel = cfg.fuel, c.max_depth = cfg.max_depth, c.minus1 = -1;
  c.lists = ws.lists, c.heap = ws.heap;
}

// A run whose arguments are loaded, from the entry's native code on (the rest of it in the
// interpreter where the code hands it over).
inline RunResult call(Ctx& c, const Ready& cp, const uint32_t* code, int32_t len, const VMConfig& cfg, Workspace& ws) {
  c.steps = 0, c.status = TRAP_OK, c.result = 0, c.cyc = -1, c.depth = 0;
  c.base = 0, c.pc = c.sp = c.obase = 0;
  switch (cp.run(&c)) {
    case EXIT_RETURN:
      return RunResult{TRAP_OK, c.result, c.steps};
    case EXIT_TRAP:
      return RunResult{c.status, 0, c.steps};
    default:
      return run_from(code, len, cfg, ws, c.pc, c.sp, c.base, c.obase, c.depth, c.steps);
  }
}

// Run function `entry_pc` of a compiled program on one encoded input, as vm::run does, in the
// context prepare() made for them (want: as load_args).
inline RunResult run(Ctx& c, const Ready& cp, const uint32_t* code, int32_t len, int32_t entry_pc,
                     const int32_t* in, int32_t in_len, const VMConfig& cfg, Workspace& ws,
                     const int8_t* want = nullptr) {
  const int32_t status = start_run(code, len, entry_pc, in, in_len, cfg, ws, want);
  if (status != TRAP_OK) return RunResult{status, 0, 0};
  const int32_t nl = func_nlocals(code[entry_pc]);
  if (!c.entry || (int64_t)nl + cp.fmax > cfg.stack_size || cfg.fuel <= 0)
    return run_from(code, len, cfg, ws, entry_pc + 1, nl, 0, nl, 0, 0);
  return call(c, cp, code, len, cfg, ws);
}

// run() for a program whose entry the caller checked once for all its runs (valid, compiled,
// its frame and deepest stack within stack_size, fuel > 0): the checks of each run left.
inline RunResult run_checked(Ctx& c, const Ready& cp, const uint32_t* code, int32_t len, int32_t entry_pc,
                             const int32_t* in, int32_t in_len, const VMConfig& cfg, Workspace& ws,
                             const int8_t* want = nullptr) {
  ws.nlists = 0;
  ws.hp = 0;
  const int32_t status = load_args(code[entry_pc], in, in_len, cfg, ws, ws.stack, 1, want);
  if (status != TRAP_OK) return RunResult{status, 0, 0};
  return call(c, cp, code, len, cfg, ws);
}

// One run alone.
inline RunResult run(const Ready& cp, const uint32_t* code, int32_t len, int32_t entry_pc, const int32_t* in,
                     int32_t in_len, const VMConfig& cfg, Workspace& ws) {
  Ctx c;
  prepare(c, cp, cfg, ws);
  return run(c, cp, code, len, entry_pc, in, in_len, cfg, ws);
}

}  // namespace jit
}  // namespace vg
#endif  // VG_JIT
