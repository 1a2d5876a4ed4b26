// CUDA kernels of the mask automaton and the token-slot builder, over the very headers the CPU
// library compiles (grammar.h, token_slots.h).
// vramgym/envs/grammar_cuda.py inlines the includes and compiles this file once per process and
// device with NVRTC (CuPy RawModule); tests compile it with nvcc and run it on the host in an
// emulator (tests/native/grammar_cuda_emu.cpp).
//
// One thread per row, GM_BLOCK rows per block. Why not a warp per row with lanes over the 73
// actions: most of a row's work is its context (frame ids, boundary costs, the REST of frames
// it could open: ~40 table lookups and a few small loops), shared by every action; per action it
// is one cost-table lookup and a few compares (grammar.h mask_row evaluates the 16 token classes
// once). Lanes over actions would each redo the context or wait on one lane computing it.
//
// Separate mask and step kernels, not a fused step+mask: the env masks the row it keeps, which
// is the stepped row only where the env was live and the action valid (autoresets replace the
// rest), so a fused kernel would mask rows the env then throws away; one launch per call already
// removes what made the torch automaton launch-bound. The token env's own step
// (gm_env_step_kernel) does take its autoreset and the tokens' bookkeeping along: ~25 torch ops.
//
// Memory: a row is 171 int32 (684 bytes); a thread reads its own row (strided across the warp,
// but each thread walks whole cache lines, which L1 keeps). Outputs are written coalesced: the
// mask kernel stages the block's (GM_BLOCK, 73) bytes in shared memory and the block stores them
// as one contiguous range; the step kernel first copies the block's rows S -> N cooperatively
// (consecutive threads, consecutive words), then each thread writes only what its action changes.
// The tables (pointers in GmTables) are read through the read-only cache; the per-row frame
// tables are ~10 MB and the cost table 2 MB per variant, so the hot part stays in L2.
#include "grammar.h"
#include "token_slots.h"

#define GM_BLOCK 128

// GmTables in shared memory: one load of the table addresses per block, not per thread.
__device__ inline void gm_load_tables(gm::GmTables& T, const unsigned long long* addrs, int nfid, int ngram) {
  for (int k = threadIdx.x; k < gm::NTAB; k += blockDim.x) T.p[k] = (const int32_t*)addrs[k];
  if (threadIdx.x == 0) T.nfid = nfid, T.ngram = ngram;
  __syncthreads();
}

// mask: out (n, VOCAB) bool. end_if_none: the envs' mask, where a row that allows nothing (a
// finished episode) allows END (SynthesisCore._mask_i8; the CPU library's gm_mask likewise)
extern "C" __global__ void gm_mask_kernel(const int32_t* S, const long long* gid, long long n, unsigned char* out,
                                          const unsigned long long* addrs, int nfid, int ngram, int end_if_none) {
  __shared__ gm::GmTables T;
  __shared__ unsigned char buf[GM_BLOCK * gm::VOCAB];
  gm_load_tables(T, addrs, nfid, ngram);
  long long row0 = (long long)blockIdx.x * GM_BLOCK;
  long long i = row0 + threadIdx.x;
  if (i < n) {
    uint32_t bits[3];
    gm::mask_row(T, S + i * gm::STATE_SIZE, gm::gm_gid(T, gid[i]), bits);
    unsigned char any = 0;
    for (int a = 0; a < gm::VOCAB; a++) any |= buf[threadIdx.x * gm::VOCAB + a] = (bits[a >> 5] >> (a & 31)) & 1;
    if (end_if_none && !any) buf[threadIdx.x * gm::VOCAB + gm::END] = 1;
  }
  __syncthreads();
  long long rows = n - row0 < GM_BLOCK ? n - row0 : GM_BLOCK;
  for (long long k = threadIdx.x; k < rows * gm::VOCAB; k += blockDim.x) out[row0 * gm::VOCAB + k] = buf[k];
}

// step: N (n, STATE_SIZE) the new rows (S where invalid), invalid (n,) bool. At most 128
// registers (ptxas, sm_90: 141 unbounded, 124 bounded, no spills) so that 4 blocks fit an SM:
// 65,536 rows are then one wave on an H100 (132 SMs x 4 x 128 = 67,584 threads). Not yet timed.
extern "C" __global__ void __launch_bounds__(GM_BLOCK, 4) gm_step_kernel(const int32_t* S, const long long* actions, const long long* gid, long long n,
                                          int32_t* N, unsigned char* invalid, const unsigned long long* addrs, int nfid,
                                          int ngram) {
  __shared__ gm::GmTables T;
  gm_load_tables(T, addrs, nfid, ngram);
  long long row0 = (long long)blockIdx.x * GM_BLOCK;
  long long rows = n - row0 < GM_BLOCK ? n - row0 : GM_BLOCK;
  for (long long k = threadIdx.x; k < rows * gm::STATE_SIZE; k += blockDim.x)
    N[row0 * gm::STATE_SIZE + k] = S[row0 * gm::STATE_SIZE + k];
  __syncthreads();  // each thread's row is now in N (written by other threads of the block)
  long long i = row0 + threadIdx.x;
  if (i < n)
    invalid[i] = gm::step_row(T, S + i * gm::STATE_SIZE, actions[i], gm::gm_gid(T, gid[i]), N + i * gm::STATE_SIZE,
                              true);
}

// The token env's step with its autoreset, in place (the CPU library's gm_env_step, row by row:
// grammar.h env_step_row): task (n,), tokens (n, L), length (n,), S (n, STATE_SIZE); actions
// (n,), restart (n,) bytes, the restart rows' new tasks: tasks (n,), or (tasks null) keys and
// episode (n,) with n_tasks for the vector env's task hash (gm::hashed_task), or neither (the
// restart rows left as they are); init (ngram, STATE_SIZE). Out: flags (4, n) bytes (bad, term,
// trunc, done) and body_len (n,). One thread per row; where the torch ops of
// SynthesisCore._step_tokens and the task hash were ~40 launches, this is one. Task ids out of
// range read a clamped grammar (gm_gid), as every kernel here.
extern "C" __global__ void __launch_bounds__(GM_BLOCK, 4)
    gm_env_step_kernel(long long* task, long long* tokens, long long* length, int32_t* S, long long n, int L,
                       const long long* actions, const unsigned char* restart, const long long* tasks,
                       const long long* keys, const long long* episode, long long n_tasks, const int32_t* init,
                       unsigned char* flags, long long* body_len, const unsigned long long* addrs, int nfid,
                       int ngram) {
  __shared__ gm::GmTables T;
  gm_load_tables(T, addrs, nfid, ngram);
  long long i = (long long)blockIdx.x * GM_BLOCK + threadIdx.x;
  if (i >= n) return;
  const bool restart_i = restart[i] != 0;
  const int64_t nt = !restart_i ? 0 : tasks ? tasks[i] : keys ? gm::hashed_task(keys[i], episode[i], n_tasks) : 0;
  const gm::EnvStep o = gm::env_step_row(
      T, (int64_t*)task + i, (int64_t*)tokens + i * L, (int64_t*)length + i, S + i * gm::STATE_SIZE, L, actions[i],
      restart_i, tasks || keys, nt, init, [&](int64_t g) { return gm::gm_gid(T, g); });
  flags[i] = o.bad, flags[n + i] = o.term, flags[2 * n + i] = o.trunc, flags[3 * n + i] = o.done;
  body_len[i] = o.body_len;
}

// min_tokens_to_finish: out (n,) int64
extern "C" __global__ void gm_min_tokens_kernel(const int32_t* S, const long long* gid, long long n, long long* out,
                                                const unsigned long long* addrs, int nfid, int ngram) {
  __shared__ gm::GmTables T;
  gm_load_tables(T, addrs, nfid, ngram);
  long long i = (long long)blockIdx.x * GM_BLOCK + threadIdx.x;
  if (i < n) out[i] = gm::min_tokens_row(T, S + i * gm::STATE_SIZE, gm::gm_gid(T, gid[i]));
}

// token slots (TaskBank.compiler_token_slots) of the active rows (active: n bytes, null: all):
// out (n, S, 4) int32, 16-byte aligned (put_slot's stores), count (n,) int64. An inactive row
// only gets count 0: its slots stay unwritten (evaluate_tasks never reads them), and most rows
// are inactive in a step (only the bodies that end are scored). A thread writes its own row
// (strided across the warp, whole cache lines per thread, merged in L2).
extern "C" __global__ void gm_token_slots_kernel(const long long* bodies, int L, const long long* lengths,
                                                 const long long* task_ids, const unsigned char* active, long long n,
                                                 const int32_t* act, int nact, const int32_t* tail,
                                                 const int32_t* prefix, const long long* prefix_len, int ntask, int P,
                                                 int32_t* out, long long* count) {
  long long i = (long long)blockIdx.x * GM_BLOCK + threadIdx.x;
  if (i >= n) return;
  if (active && !active[i]) {
    count[i] = 0;
    return;
  }
  const gm::SlotTables T{act, tail, prefix, (const int64_t*)prefix_len, nact, ntask, P};
  count[i] = gm::token_slots_row(T, (const int64_t*)bodies + i * L, L, lengths[i], task_ids[i],
                                 out + i * gm::slot_size(T, L) * 4);
}

// the constants the module was compiled with (as gm_consts of the CPU library): out[NCONSTS]
extern "C" __global__ void gm_consts_kernel(long long* out) {
  const long long v[] = {
#define GM_VALUE(k) (long long)gm::k,
      GM_CONSTS(GM_VALUE)
#undef GM_VALUE
  };
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (unsigned k = 0; k < sizeof(v) / sizeof(v[0]); k++) out[k] = v[k];
}
