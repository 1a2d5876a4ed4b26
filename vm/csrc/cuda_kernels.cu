// CUDA kernels of the GPU backend, over the very headers the CPU backend compiles (compiler.h,
// vm.h). vramgym/vm/cuda.py inlines the includes and compiles this file once per process and
// device with NVRTC (CuPy RawModule, cached on disk); CI compiles it with nvcc and NVRTC.
//
// Kernels (every one grid-stride over a whole batch, no host round trip between them):
//   vg_compile (sources, token arrays or token slots, by its mode)   one thread per program: the
//       compiler is sequential. Its Lexer/Compiler structs live in global scratch slots, one per
//       thread; the parser does not recurse (explicit stacks in the Compiler), so the kernel's
//       frame is static (~220 bytes) and the default CUDA stack limit suffices.
//   vg_validate_programs                    one thread per program: entry pc, or -2 invalid.
//   vg_execute_{local,global}[_eval]        one warp per (program, up to 32 inputs): the lanes
//       run the same bytecode on different inputs, so they decode and branch together. Each
//       lane runs vg::run in its own workspace. The _local variants keep the operand stack in
//       local memory, which the hardware interleaves across lanes (lanes at the same stack
//       position touch one cache line) and caches in L1; _global ones are for stacks larger
//       than VG_LOCAL_STACK. The _eval variants also sum passes and steps per program.
//   vg_compile (token slots) + vg_execute_tasks_{local,global}   evaluate_tasks: programs as
//       fixed-stride token slots with an active mask, each run on its own task's tests; with a
//       mask, vg_active_rows lists the active rows first and both launches take that list.
// Failures are status codes in the outputs, never exceptions or aborts.
#include "compiler.h"
#include "vm.h"

#ifndef VG_LOCAL_STACK
#define VG_LOCAL_STACK 4096  // ints; = DEFAULT_STACK, so the default configuration runs _local
#endif
// VG_EXEC_MIN_BLOCKS > 0: the execute kernels promise the compiler that many resident blocks of
// VG_EXEC_BLOCK threads per SM (__launch_bounds__), which caps their registers (sm_90, 10 blocks
// of 128: 48, the plain VM's count, also with VG_SWITCH_FUSE's larger kernel). 0: no bound.
#ifndef VG_EXEC_BLOCK
#define VG_EXEC_BLOCK 128  // = cuda.EXEC_BLOCK, the execute kernels' block size
#endif
#ifndef VG_EXEC_MIN_BLOCKS
#define VG_EXEC_MIN_BLOCKS 0
#endif
// VG_FUSED_CODE (vm.h): each warp translates its program into superinstructions (fuse.h) before
// the lanes run it, in an area of its own after the lanes' scratch slots; programs longer than
// VG_FX_CAP words run untranslated. cuda.FX_CAP.
#ifndef VG_FX_CAP
#define VG_FX_CAP 512
#endif
#if VG_EXEC_MIN_BLOCKS > 0
#define VG_EXEC_BOUNDS __launch_bounds__(VG_EXEC_BLOCK, VG_EXEC_MIN_BLOCKS)
#else
#define VG_EXEC_BOUNDS
#endif

namespace vgk {

using namespace vg;

// Entry-function metadata that the compile kernels write: [pc or -1, nparams, ret kind,
// param kinds[MAX_PARAMS]]; used to check a candidate's signature before running it.
constexpr int ENTRY_META = 3 + MAX_PARAMS;

__device__ inline int64_t global_tid() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_threads() { return (int64_t)gridDim.x * blockDim.x; }

#if VG_FUSED_CODE
// Bytes of a warp's translation area: VG_FX_CAP Fused records, xop codes and jump-target flags (+1).
constexpr int64_t FX_WARP_BYTES = ((int64_t)VG_FX_CAP * (int64_t)(sizeof(Fused) + 2) + 1 + 15) / 16 * 16;
#else
constexpr int64_t FX_WARP_BYTES = 0;
#endif

__device__ inline void write_entry_meta(const Compiler& c, int32_t n, int32_t entry, int32_t* m) {
  bool ok = n >= 0 && entry >= 0 && entry < c.nfuncs;
  m[0] = ok ? c.funcs[entry].pc : -1;
  m[1] = ok ? c.funcs[entry].nparams : -1;
  m[2] = ok ? c.funcs[entry].ret : -1;
  for (int32_t k = 0; k < MAX_PARAMS; k++) m[3 + k] = ok && k < c.funcs[entry].nparams ? c.funcs[entry].params[k] : -1;
}

__device__ inline void write_err(int32_t* err, int64_t i, const CompileError& e) {
  err[4 * i] = e.code;
  err[4 * i + 1] = e.line;
  err[4 * i + 2] = e.col;
  err[4 * i + 3] = e.arg;
}

// The value as an opaque register from here on. ptxas otherwise recomputed a program's code
// address (code + p * code_cap, 64-bit: 12 instructions) at every VM step rather than keep two
// registers: the scorer's step took 47.7 SASS instructions instead of 36.7
// (experiments/sass_steps.py). No-op on the host (the kernel emulator).
template <class T>
__device__ inline void hold(T*& ptr) {
#if defined(__CUDA_ARCH__)
  asm volatile("mov.b64 %0, %0;" : "+l"(ptr));
#else
  (void)ptr;
#endif
}

struct ProgRef {
  const uint32_t* code;
  int32_t len;  // < 0: the program failed to compile
};

// Program p either packed (code_off[p] .. code_off[p + 1]) or a row of a code matrix.
__device__ inline ProgRef prog_ref(const uint32_t* code, const int64_t* code_off, int64_t code_stride,
                                   const int32_t* code_len, int32_t p) {
  ProgRef r;
  if (code_off) {
    r.code = code + code_off[p];
    int64_t len = code_off[p + 1] - code_off[p];
    r.len = len > MAX_CODE ? MAX_CODE + 1 : (int32_t)len;
  } else {
    r.code = code + (int64_t)p * code_stride;
    r.len = code_len[p];
  }
  hold(r.code);
  return r;
}

// Per-lane workspace inside one global scratch slot: frames, lists, heap, [stack].
struct LaneLayout {
  int64_t frames, lists, heap, stack, total;  // offsets and size in int32 words
};

__device__ inline LaneLayout lane_layout(const VMConfig& cfg, bool with_stack) {
  LaneLayout l;
  int64_t md = cfg.max_depth > 1 ? cfg.max_depth : 1, ml = cfg.max_lists > 1 ? cfg.max_lists : 1;
  int64_t hs = cfg.heap_size > 1 ? cfg.heap_size : 1;
  l.frames = 0;
  l.lists = l.frames + 3 * md;
  l.heap = l.lists + 3 * ml;
  l.stack = l.heap + hs;
  l.total = l.stack + (with_stack ? cfg.stack_size : 0);
  return l;
}

// Whether item j of a packed batch (offsets off over n_words words, bytes or tokens) lies inside
// it: device arrays that a caller hands in are not checked on the host (that would take a sync),
// so a bad offset must end that item's run or compile here rather than read outside the buffer.
__device__ inline bool item_in_bounds(const int64_t* off, int64_t j, int64_t n_words) {
  int64_t a = off[j], b = off[j + 1];
  return 0 <= a && a <= b && b <= n_words && b - a <= 0x7fffffff;
}

// One run: program p (entry_pc[p]: -2 invalid bytecode, -3 signature mismatch) on input j, with
// its translation fx, xop (VG_FUSED_CODE; null: plain dispatch), then vg::finish_run, as on the
// CPU: a list result is checked and copied out, the result compared with expected value j.
// Returns whether it passed; *nsteps receives the executed steps. An input outside its words
// traps bad_input; an expected value outside its words is never met.
__device__ inline bool run_one(const ProgRef& pr, int32_t p, int32_t n_prog, const int32_t* entry_pc,
                               int32_t rk, const int32_t* in_words, const int64_t* in_off, int32_t j,
                               int32_t n_in, int64_t n_in_words, const int32_t* exp_words,
                               const int64_t* exp_off, int64_t n_exp_words, const VMConfig& cfg, Workspace& ws,
                               int64_t r, int32_t* status, int32_t* value, int32_t* steps, uint8_t* passed,
                               int32_t* out_list, int32_t out_cap, int32_t* nsteps, const Fused* fx,
                               const uint8_t* xop) {
  RunResult res;
  res.value = res.steps = 0;
  ws.nlists = 0;
  int32_t pc = (uint32_t)p < (uint32_t)n_prog ? entry_pc[p] : -1;
  if ((uint32_t)p >= (uint32_t)n_prog || (uint32_t)j >= (uint32_t)n_in || !item_in_bounds(in_off, j, n_in_words))
    res.status = TRAP_BAD_INPUT;
  else if (pc == -2) res.status = TRAP_BAD_BYTECODE;
  else if (pc == -3) res.status = TRAP_BAD_INPUT;
  else
    res = run(pr.code, pr.len, pc, in_words + in_off[j], (int32_t)(in_off[j + 1] - in_off[j]), cfg, ws, fx, xop);
  bool have_exp = exp_words && (uint32_t)j < (uint32_t)n_in && item_in_bounds(exp_off, j, n_exp_words);
  bool ok;
  res = finish_run(res, rk, ws, have_exp ? exp_words + exp_off[j] : nullptr,
                   have_exp ? (int32_t)(exp_off[j + 1] - exp_off[j]) : 0, out_list ? out_list + r * out_cap : nullptr,
                   out_cap, &ok);
  if (status) {
    status[r] = res.status;
    value[r] = res.value;
    steps[r] = res.steps;
    if (passed) passed[r] = ok;
  }
  *nsteps = res.steps;
  return ok;
}

// The workspace of thread `thread` in the scratch buffer (operand stack in local memory or there).
template <bool LOCAL>
__device__ inline Workspace lane_workspace(const VMConfig& cfg, int32_t* scratch, int64_t thread,
                                           int32_t* local_stack) {
  LaneLayout L = lane_layout(cfg, !LOCAL);
  int32_t* mine = scratch + thread * L.total;
  Workspace ws;
  ws.frames = reinterpret_cast<Frame*>(mine + L.frames);
  ws.lists = reinterpret_cast<ListHdr*>(mine + L.lists);
  ws.heap = mine + L.heap;
  ws.stack = LOCAL ? local_stack : mine + L.stack;
  ws.nlists = ws.hp = 0;
  return ws;
}

// The warp's passes and executed steps, added to one program's counters by lane 0.
__device__ inline void warp_add(bool ok, int32_t ns, int32_t lane, int32_t* pass_count,
                                unsigned long long* step_sum) {
  unsigned int npass = __popc(__ballot_sync(0xffffffffu, ok));
  unsigned long long s = (unsigned long long)ns;
  for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
  if (lane == 0) {
    if (npass) atomicAdd(pass_count, (int)npass);
    if (s) atomicAdd(step_sum, s);
  }
}

// The warp's translation of program pr (VG_FUSED_CODE) into its area: the lanes zero the
// jump-target flags, mark the targets of every 32nd word, then translate every 32nd pc, with a
// __syncwarp between the passes (the lanes read each other's writes). Every lane of the warp
// calls it with the same arguments. *fx and *xop stay null (plain dispatch) for a program that
// is not valid bytecode (fuse.h takes validated code only) or is longer than VG_FX_CAP.
__device__ inline void translate(const ProgRef& pr, bool valid, int32_t lane, uint8_t* area, const Fused** fx,
                                 const uint8_t** xop) {
  *fx = nullptr;
  *xop = nullptr;
#if VG_FUSED_CODE
  __syncwarp();  // every lane is done with the area's last program
  if (!valid || pr.len <= 0 || pr.len > VG_FX_CAP) return;
  Fused* F = reinterpret_cast<Fused*>(area);
  uint8_t* X = area + (int64_t)VG_FX_CAP * sizeof(Fused);
  uint8_t* T = X + VG_FX_CAP;
  for (int32_t pc = lane; pc <= pr.len; pc += 32) T[pc] = 0;
  __syncwarp();
  for (int32_t pc = lane; pc < pr.len; pc += 32) fuse_mark_targets(pr.code, pr.len, T, pc);
  __syncwarp();
  for (int32_t pc = lane; pc < pr.len; pc += 32) fuse_at(pr.code, pr.len, T, pc, F, X);
  __syncwarp();
  *fx = F;
  *xop = X;
#else
  (void)pr, (void)valid, (void)lane, (void)area;
#endif
}

// Warp `warp`'s translation area: after the grid's lane slots of `lane_words` int32 words each.
__device__ inline uint8_t* fx_area(int32_t* scratch, int64_t lane_words, int64_t warp) {
  return reinterpret_cast<uint8_t*>(scratch + grid_threads() * lane_words) + warp * FX_WARP_BYTES;
}

// The execute kernels' body. A task is up to 32 runs of one program, one per lane:
//   run_batch (EVAL false): task t = runs task_start[t] .. task_start[t + 1], listed explicitly;
//   evaluate (EVAL true):   task t = program t / wpp on inputs (t % wpp) * 32 + lane, and the
//                           warp adds its passes and steps to pass_count[p] and step_sum[p].
// Warps loop over tasks (persistent grid): warp w owns scratch slot w, so scratch is bounded
// by the grid, not by the batch.
template <bool LOCAL, bool EVAL>
__device__ inline void execute(const uint32_t* __restrict__ code, const int64_t* __restrict__ code_off,
                               int64_t code_stride, const int32_t* __restrict__ code_len, int32_t n_prog,
                               const int32_t* __restrict__ entry_pc, const int32_t* __restrict__ ret_kind,
                               int32_t ret_kind_all, const int32_t* __restrict__ in_words,
                               const int64_t* __restrict__ in_off, int32_t n_in, int64_t n_in_words,
                               const int32_t* __restrict__ run_prog, const int32_t* __restrict__ run_in,
                               const int64_t* __restrict__ task_start, int64_t n_tasks, int32_t wpp,
                               const int32_t* __restrict__ exp_words, const int64_t* __restrict__ exp_off,
                               int64_t n_exp_words, VMConfig cfg, int32_t* __restrict__ scratch,
                               int32_t* status, int32_t* value, int32_t* steps, uint8_t* passed, int32_t* out_list,
                               int32_t out_cap, int32_t* pass_count, unsigned long long* step_sum,
                               int32_t* local_stack) {
  const int32_t lane = threadIdx.x & 31;
  const int64_t warp = global_tid() >> 5, nwarps = grid_threads() >> 5;
  Workspace ws = lane_workspace<LOCAL>(cfg, scratch, warp * 32 + lane, local_stack);
  uint8_t* area = fx_area(scratch, lane_layout(cfg, !LOCAL).total, warp);
  for (int64_t t = warp; t < n_tasks; t += nwarps) {  // uniform across the warp
    int64_t r;
    int32_t p, j;
    bool active;
    if (EVAL) {
      p = (int32_t)(t / wpp);
      j = (int32_t)(t % wpp) * 32 + lane;
      r = (int64_t)p * n_in + j;
      active = j < n_in;
    } else {
      r = task_start[t] + lane;
      active = r < task_start[t + 1];
      p = active ? run_prog[r] : 0;
      j = active ? run_in[r] : 0;
    }
    bool ok = false;
    int32_t ns = 0;
    ProgRef pr;
    pr.code = code;
    pr.len = 0;
    if ((uint32_t)p < (uint32_t)n_prog) pr = prog_ref(code, code_off, code_stride, code_len, p);
    const Fused* fx = nullptr;
    const uint8_t* xop = nullptr;
    if (VG_FUSED_CODE) {  // one translation, when every active lane runs lane 0's program (cuda.py groups runs so)
      const int32_t p0 = __shfl_sync(0xffffffffu, active ? p : -1, 0);
      const bool same = __all_sync(0xffffffffu, !active || p == p0);  // p0 and same: uniform
      const bool valid = same && (uint32_t)p0 < (uint32_t)n_prog && entry_pc[p0] >= 0;
      translate(valid ? prog_ref(code, code_off, code_stride, code_len, p0) : pr, valid, lane, area, &fx, &xop);
    }
    if (active) {
      int32_t rk = (uint32_t)p < (uint32_t)n_prog ? (ret_kind ? ret_kind[p] : ret_kind_all) : KIND_INT;
      ok = run_one(pr, p, n_prog, entry_pc, rk, in_words, in_off, j, n_in, n_in_words, exp_words, exp_off,
                   n_exp_words, cfg, ws, r, status, value, steps, passed, out_list, out_cap, &ns, fx, xop);
    }
    if (EVAL) {
      warp_add(ok, ns, lane, pass_count + p, step_sum + p);
    }
  }
}

// evaluate_tasks: program p runs the tests of its task, inputs task_of[p] * n_tests + j for
// j < n_tests, comparing results as task_ret[task_of[p]] (opcodes KIND_*). Work item t is
// program t / wpp on tests (t % wpp) * 32 + lane; programs that did not compile (inactive ones
// included: their code_len is -1) or name no task skip at once, uniformly across the warp. The
// warp adds its passes and steps to pass_count[p] and step_sum[p]. task_fuel (nullable): each
// task's step budget, which caps cfg.fuel for its runs (uniform across the warp: one task).
template <bool LOCAL>
__device__ inline void execute_tasks(const uint32_t* __restrict__ code, int32_t code_cap,
                                     const int32_t* __restrict__ code_len, int32_t n_prog,
                                     const int32_t* __restrict__ entry_pc, const int64_t* __restrict__ task_of,
                                     const int32_t* __restrict__ task_ret, const int32_t* __restrict__ task_fuel,
                                     int32_t n_task, int32_t n_tests,
                                     const int32_t* __restrict__ in_words, const int64_t* __restrict__ in_off,
                                     int32_t n_in, int64_t n_in_words, const int32_t* __restrict__ exp_words,
                                     const int64_t* __restrict__ exp_off, int64_t n_exp_words, int64_t n_items,
                                     int32_t wpp, const int32_t* __restrict__ rows, const int32_t* __restrict__ n_rows,
                                     VMConfig cfg, int32_t* __restrict__ scratch, int32_t* pass_count,
                                     unsigned long long* step_sum, int32_t* local_stack) {
  const int32_t lane = threadIdx.x & 31;
  const int64_t warp = global_tid() >> 5, nwarps = grid_threads() >> 5;
  Workspace ws = lane_workspace<LOCAL>(cfg, scratch, warp * 32 + lane, local_stack);
  uint8_t* area = fx_area(scratch, lane_layout(cfg, !LOCAL).total, warp);
  // rows (nullable): the programs vg_active_rows listed, rows[0 .. *n_rows), in place of all
  const int64_t items = rows ? (int64_t)*n_rows * wpp : n_items;
  for (int64_t t = warp; t < items; t += nwarps) {  // uniform across the warp
    const int64_t r = t / wpp;
    int32_t p = rows ? rows[r] : (int32_t)r;
    if (p < 0 || p >= n_prog) continue;
    int64_t task = task_of[p];
    if (entry_pc[p] < 0 || task < 0 || task >= n_task) continue;
    int32_t jj = (int32_t)(t % wpp) * 32 + lane;
    bool ok = false;
    int32_t ns = 0;
    ProgRef pr = prog_ref(code, nullptr, code_cap, code_len, p);
    const Fused* fx = nullptr;
    const uint8_t* xop = nullptr;
    translate(pr, true, lane, area, &fx, &xop);  // (p is the warp's, and valid: entry_pc[p] >= 0)
    if (jj < n_tests) {
      int64_t j = task * n_tests + jj;
      VMConfig tc = cfg;  // the task's budget caps the fuel (at least 1, as the CPU core takes it)
      if (task_fuel) {
        const int32_t f = task_fuel[task];
        tc.fuel = f < 1 ? 1 : f < cfg.fuel ? f : cfg.fuel;
      }
      ok = run_one(pr, p, n_prog, entry_pc, task_ret[task], in_words, in_off, j < n_in ? (int32_t)j : n_in, n_in,
                   n_in_words, exp_words, exp_off, n_exp_words, tc, ws, 0, nullptr, nullptr, nullptr, nullptr,
                   nullptr, 0, &ns, fx, xop);
    }
    warp_add(ok, ns, lane, pass_count + p, step_sum + p);
  }
}

}  // namespace vgk

using vgk::ENTRY_META;

#define VG_EXEC_PARAMS                                                                                              \
  const uint32_t *__restrict__ code, const int64_t *__restrict__ code_off, int64_t code_stride,                  \
      const int32_t *__restrict__ code_len, int32_t n_prog, const int32_t *__restrict__ entry_pc,                \
      const int32_t *__restrict__ ret_kind, int32_t ret_kind_all, const int32_t *__restrict__ in_words,          \
      const int64_t *__restrict__ in_off, int32_t n_in, int64_t n_in_words,                                      \
      const int32_t *__restrict__ run_prog, const int32_t *__restrict__ run_in,                                  \
      const int64_t *__restrict__ task_start, int64_t n_tasks, int32_t wpp, const int32_t *__restrict__ exp_words, \
      const int64_t *__restrict__ exp_off, int64_t n_exp_words, int32_t fuel, int32_t max_depth,                 \
      int32_t heap_size, int32_t max_lists, int32_t stack_size, int32_t *__restrict__ scratch, int32_t *status,   \
      int32_t *value, int32_t *steps, uint8_t *passed, int32_t *out_list, int32_t out_cap, int32_t *pass_count,   \
      unsigned long long *step_sum
#define VG_EXEC_ARGS(stack)                                                                                          \
  code, code_off, code_stride, code_len, n_prog, entry_pc, ret_kind, ret_kind_all, in_words, in_off, n_in,         \
      n_in_words, run_prog, run_in, task_start, n_tasks, wpp, exp_words, exp_off, n_exp_words, cfg, scratch,       \
      status, value, steps, passed, out_list, out_cap, pass_count, step_sum, stack
#define VG_MAKE_CFG        \
  vg::VMConfig cfg;        \
  cfg.fuel = fuel;         \
  cfg.max_depth = max_depth; \
  cfg.heap_size = heap_size; \
  cfg.max_lists = max_lists; \
  cfg.stack_size = stack_size

extern "C" {

// Sizes of the scratch structs as device code lays them out (read once by cuda.py).
__global__ void vg_sizes(int64_t* out) {
  out[0] = sizeof(vg::Lexer);
  out[1] = sizeof(vg::Compiler);
  out[2] = sizeof(vg::Token);
  out[3] = ENTRY_META;
  out[4] = VG_LOCAL_STACK;
  out[5] = vgk::FX_WARP_BYTES;  // per warp after the lanes' scratch (0 without VG_FUSED_CODE)
}

// The compile kernel: one entry point for the three ways programs arrive, so that ptxas compiles
// the compiler once (it compiles every function an entry calls once per entry: three entries took
// 72 s of ptxas, nearly all of a first GPU call's NVRTC build). `mode`:
//
// VG_COMPILE_SOURCES: sources packed in src with byte offsets src_off[n + 1] (n_src bytes).
//   Scratch: one Lexer, Compiler and tok_cap tokens per thread of the grid. A source needs at most
//   2 * len + 2 tokens (every token but DEDENT and the final NEWLINE/EOF starts at its own byte,
//   and DEDENTs pair with INDENTs), so tok_cap = min(MAX_TOKENS, 2 * max_len + 4) gives the CPU's
//   results exactly; a source that would not fit a smaller tok_cap (a wrong max_len from the
//   caller) reports code_len -1 and error -1, and so does a source whose offsets fall outside src.
// VG_COMPILE_TOKENS: token arrays ((kind, value, line, col) int32 quadruples) with offsets
//   tok_off[n + 1] into n_toks tokens (offsets outside them: code_len -1, error -1).
// VG_COMPILE_SLOTS: fixed-stride token slots: program i is toks[i * slot .. i * slot + count[i])
//   (count clamped to [0, slot]); rows with active[i] == 0 (active nullable) are not compiled
//   (code_len -1, error code 0).
//
// Program i -> code[i * code_cap ...], code_len[i] (-1 on error); err (nullable) [4 * i ...] =
// {code, line, col, arg}; entry_meta (nullable) ENTRY_META ints per program for function number
// `entry`; sig (nullable) MAX_FUNCS packed signatures per program (compiler.h's
// write_signatures, as the CPU's vg_compile_batch). Pointers a mode does not use may be null.
// VG_COMPILE_ROWS: the token slots of the rows rows[0 .. *n_rows) that vg_active_rows listed
//   (which also wrote the other rows' code_len and err); entry_meta and sig must be null. Only
//   the first row_lanes lanes of a warp compile, each with scratch slot warp * row_lanes + lane;
//   item k goes to lane (k / nwarps) % row_lanes of warp k % nwarps, so no warp takes a second
//   program before every warp has one. A burst of finished programs is a few percent of an env
//   batch's rows: thread t of the grid-stride loop below got rows t, t + grid, ..., which left
//   the busiest warp with about 4 programs in a 65,536-env burst (diverged lanes, or one after
//   the other; experiments/scoring_tail.py), and the slowest warp is the launch.
enum : int32_t { VG_COMPILE_SOURCES = 0, VG_COMPILE_TOKENS = 1, VG_COMPILE_SLOTS = 2, VG_COMPILE_ROWS = 3 };

__global__ void vg_compile(int32_t mode, int32_t n, const char* __restrict__ src, const int64_t* __restrict__ src_off,
                           int64_t n_src, const vg::Token* __restrict__ toks, const int64_t* __restrict__ tok_off,
                           int64_t n_toks, int32_t slot, const int64_t* __restrict__ count,
                           const uint8_t* __restrict__ active, uint32_t* code, int32_t code_cap, int32_t* code_len,
                           int32_t* err, int32_t entry, int32_t* entry_meta, int64_t* sig, vg::Lexer* lexers,
                           vg::Compiler* compilers, vg::Token* tokens, int32_t tok_cap,
                           const int32_t* __restrict__ rows, const int32_t* __restrict__ n_rows, int32_t row_lanes) {
  int64_t tid = vgk::global_tid();
  if (mode == VG_COMPILE_ROWS) {
    const int64_t nwarps = vgk::grid_threads() >> 5, warp = tid >> 5, lane = tid & 31;
    const int64_t lanes = row_lanes < 1 ? 1 : row_lanes > 32 ? 32 : row_lanes;
    if (lane >= lanes) return;
    vg::Compiler& c = compilers[warp * lanes + lane];
    const int64_t listed = *n_rows;
    for (int64_t k = lane * nwarps + warp; k < listed; k += nwarps * lanes) {
      const int64_t i = rows[k];
      if (i < 0 || i >= n) continue;  // (vg_active_rows lists rows of [0, n) only)
      int64_t m = count[i];
      m = m < 0 ? 0 : m > slot ? slot : m;
      code_len[i] = vg::compile_tokens(c, toks + i * (int64_t)slot, (int32_t)m, code + i * (int64_t)code_cap, code_cap);
      if (err) vgk::write_err(err, i, c.err);
    }
    return;
  }
  vg::Compiler& c = compilers[tid];
  for (int64_t i = tid; i < n; i += vgk::grid_threads()) {
    int32_t m = -1;
    vg::CompileError e;  // bad offsets or a too small tok_cap: error -1; an inactive slot: 0
    e.code = mode == VG_COMPILE_SLOTS ? 0 : -1;
    e.line = e.col = e.arg = 0;
    if (mode == VG_COMPILE_SOURCES) {
      bool inside = vgk::item_in_bounds(src_off, i, n_src);
      int64_t len = inside ? src_off[i + 1] - src_off[i] : 0;
      if (inside && !(tok_cap < vg::MAX_TOKENS && 2 * len + 4 > tok_cap && len <= vg::MAX_SOURCE))
        m = vg::compile_source(lexers[tid], c, src + src_off[i], len, tokens + tid * tok_cap, tok_cap,
                               code + i * (int64_t)code_cap, code_cap, &e);
    } else {
      // a flag, not t != nullptr: CuPy hands over an array of no elements as a null pointer, and
      // zero tokens must still compile (to the CPU's error at 1:1)
      bool go = false;
      const vg::Token* t = nullptr;
      int64_t k = 0;
      if (mode == VG_COMPILE_TOKENS && vgk::item_in_bounds(tok_off, i, n_toks)) {
        go = true;
        t = toks + tok_off[i];
        k = tok_off[i + 1] - tok_off[i];
      } else if (mode == VG_COMPILE_SLOTS && (!active || active[i])) {
        go = true;
        t = toks + i * (int64_t)slot;
        k = count[i];
        k = k < 0 ? 0 : k > slot ? slot : k;
      }
      if (go) {
        m = vg::compile_tokens(c, t, (int32_t)k, code + i * (int64_t)code_cap, code_cap);
        e = c.err;
      }
    }
    code_len[i] = m;
    if (err) vgk::write_err(err, i, e);
    if (entry_meta) vgk::write_entry_meta(c, m, entry, entry_meta + i * ENTRY_META);
    if (sig) vg::write_signatures(c, m, sig + i * (int64_t)vg::MAX_FUNCS);
  }
}

// rows[0 .. *n_rows) = the rows i < n with active[i] != 0, in no particular order (*n_rows zeroed
// by the caller): the list vg_compile (VG_COMPILE_ROWS) and vg_execute_tasks take, so that their
// warps get one program each. The other rows get code_len -1 and a zero error here (code_len and
// err nullable). A warp adds its rows to the list with one atomic. Blocks of a multiple of 32.
__global__ void vg_active_rows(int32_t n, const uint8_t* __restrict__ active, int32_t* code_len, int32_t* err,
                               int32_t* rows, int32_t* n_rows) {
  const int32_t lane = threadIdx.x & 31;
  const int64_t warp = vgk::global_tid() >> 5, nwarps = vgk::grid_threads() >> 5;
  for (int64_t base = warp * 32; base < n; base += nwarps * 32) {  // uniform across the warp
    const int64_t i = base + lane;
    const bool on = i < n && active[i];
    const unsigned ballot = __ballot_sync(0xffffffffu, on);
    int32_t first = 0;
    if (lane == 0 && ballot) first = atomicAdd(n_rows, __popc(ballot));
    first = __shfl_sync(0xffffffffu, first, 0);
    if (on) {
      rows[first + __popc(ballot & ((1u << lane) - 1u))] = (int32_t)i;
    } else if (i < n) {
      if (code_len) code_len[i] = -1;
      if (err) err[4 * i] = err[4 * i + 1] = err[4 * i + 2] = err[4 * i + 3] = 0;
    }
  }
}

// entry_pc[p] = the pc of function entry[p] (or entry_all when entry is null), -1 when there is
// no such function, -2 when the bytecode is invalid (or failed to compile), and, when want_sig
// ([nparams, ret, kinds...]) and entry_meta are given, -3 when the entry's signature differs.
__global__ void vg_validate_programs(const uint32_t* __restrict__ code, const int64_t* __restrict__ code_off,
                                     int64_t code_stride, const int32_t* __restrict__ code_len, int32_t n,
                                     const int32_t* __restrict__ entry, int32_t entry_all,
                                     const int32_t* __restrict__ entry_meta, const int32_t* __restrict__ want_sig,
                                     int32_t* entry_pc) {
  for (int64_t p = vgk::global_tid(); p < n; p += vgk::grid_threads()) {
    vgk::ProgRef pr = vgk::prog_ref(code, code_off, code_stride, code_len, (int32_t)p);
    int32_t pc = -1;
    int32_t bad = (pr.len < 0 || pr.len > vg::MAX_CODE) ? 0 : vg::validate(pr.code, pr.len, entry ? entry[p] : entry_all, &pc);
    int32_t out = bad >= 0 ? -2 : pc;
    if (out >= 0 && want_sig && entry_meta) {
      const int32_t* m = entry_meta + p * ENTRY_META;
      bool same = m[1] == want_sig[0] && m[2] == want_sig[1];
      for (int32_t k = 0; same && k < want_sig[0] && k < vg::MAX_PARAMS; k++) same = m[3 + k] == want_sig[2 + k];
      if (!same) out = -3;
    }
    entry_pc[p] = out;
  }
}

__global__ void VG_EXEC_BOUNDS vg_execute_local(VG_EXEC_PARAMS) {
  int32_t stack[VG_LOCAL_STACK];
  VG_MAKE_CFG;
  vgk::execute<true, false>(VG_EXEC_ARGS(stack));
}

__global__ void VG_EXEC_BOUNDS vg_execute_global(VG_EXEC_PARAMS) {
  VG_MAKE_CFG;
  vgk::execute<false, false>(VG_EXEC_ARGS(nullptr));
}

__global__ void VG_EXEC_BOUNDS vg_execute_local_eval(VG_EXEC_PARAMS) {
  int32_t stack[VG_LOCAL_STACK];
  VG_MAKE_CFG;
  vgk::execute<true, true>(VG_EXEC_ARGS(stack));
}

__global__ void VG_EXEC_BOUNDS vg_execute_global_eval(VG_EXEC_PARAMS) {
  VG_MAKE_CFG;
  vgk::execute<false, true>(VG_EXEC_ARGS(nullptr));
}

#define VG_TASK_PARAMS                                                                                             \
  const uint32_t *__restrict__ code, int32_t code_cap, const int32_t *__restrict__ code_len, int32_t n_prog,     \
      const int32_t *__restrict__ entry_pc, const int64_t *__restrict__ task_of, const int32_t *__restrict__ task_ret, \
      const int32_t *__restrict__ task_fuel, int32_t n_task, int32_t n_tests,                                    \
      const int32_t *__restrict__ in_words, const int64_t *__restrict__ in_off, int32_t n_in,                     \
      int64_t n_in_words, const int32_t *__restrict__ exp_words, const int64_t *__restrict__ exp_off, \
      int64_t n_exp_words, int64_t n_items,                                                                      \
      int32_t wpp, const int32_t *__restrict__ rows, const int32_t *__restrict__ n_rows,                          \
      int32_t fuel, int32_t max_depth, int32_t heap_size, int32_t max_lists, int32_t stack_size,                   \
      int32_t *__restrict__ scratch, int32_t *pass_count, unsigned long long *step_sum
#define VG_TASK_ARGS(stack)                                                                                     \
  code, code_cap, code_len, n_prog, entry_pc, task_of, task_ret, task_fuel, n_task, n_tests, in_words, in_off,  \
      n_in,                                                                                                      \
      n_in_words, exp_words, exp_off, n_exp_words, n_items, wpp, rows, n_rows, cfg, scratch, pass_count, step_sum, stack

__global__ void VG_EXEC_BOUNDS vg_execute_tasks_local(VG_TASK_PARAMS) {
  int32_t stack[VG_LOCAL_STACK];
  VG_MAKE_CFG;
  vgk::execute_tasks<true>(VG_TASK_ARGS(stack));
}

__global__ void VG_EXEC_BOUNDS vg_execute_tasks_global(VG_TASK_PARAMS) {
  VG_MAKE_CFG;
  vgk::execute_tasks<false>(VG_TASK_ARGS(nullptr));
}

}  // extern "C"
