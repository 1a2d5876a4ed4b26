// CPU binding of the mask automaton (grammar.h) and of the token-slot builder (token_slots.h): a C
// ABI over batches of rows, parallel across cores, loaded with ctypes by
// vramgym/envs/grammar_native.py. Every array is caller-owned
// (numpy or CPU torch memory); nothing here allocates per row. Threads pull chunks of rows
// from an atomic counter.
#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "grammar.h"
#include "token_slots.h"

#define GM_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using namespace gm;

template <class F>
void parallel_rows(int64_t n, int32_t nthreads, F body) {
  const int64_t chunk = 256;              // rows per grab: ~0.2 ms of work
  const int64_t rows_per_thread = 2048;   // below this a thread costs more (spawn, a core shared
                                          // with torch's spinning OpenMP workers) than it saves
  static const int32_t cores = (int32_t)std::max(1u, std::thread::hardware_concurrency());  // a file read: once
  if (nthreads <= 0) nthreads = cores;
  int64_t max_threads = (n + rows_per_thread - 1) / rows_per_thread;
  if (nthreads > max_threads) nthreads = (int32_t)std::max<int64_t>(1, max_threads);
  std::atomic<int64_t> next(0);
  auto worker = [&]() {
    for (;;) {
      int64_t lo = next.fetch_add(chunk);
      if (lo >= n) break;
      int64_t hi = std::min(n, lo + chunk);
      for (int64_t i = lo; i < hi; i++) body(i);
    }
  };
  if (nthreads == 1) return worker();
  std::vector<std::thread> pool;
  try {
    pool.reserve(nthreads - 1);  // (so that adding a started thread cannot throw)
    for (int32_t t = 1; t < nthreads; t++) pool.emplace_back(worker);
  } catch (...) {  // no more threads (system_error) or memory for one: the ones started share the
  }                // work; an exception across the C ABI would abort the process
  worker();
  for (auto& th : pool) th.join();
}

// A row's grammar id (-ngram..-1 wrap, as numpy's indexing), counting the ids numpy would reject
// (the caller raises for them; the row itself reads the clamped grammar, as on the GPU, so
// nothing reads out of bounds).
inline int32_t row_gid(const GmTables& T, int64_t g, std::atomic<int64_t>& bad) {
  if (g < -(int64_t)T.ngram || g >= T.ngram) bad.fetch_add(1, std::memory_order_relaxed);
  return gm_gid(T, g);
}

GmTables tables(const uint64_t* addrs, int32_t nfid, int32_t ngram) {
  GmTables T;
  for (int k = 0; k < NTAB; k++) T.p[k] = reinterpret_cast<const int32_t*>(addrs[k]);
  T.nfid = nfid;
  T.ngram = ngram;
  return T;
}

}  // namespace

// The scalar constants this library was compiled with, in grammar_consts.h order; returns how many.
GM_EXPORT int32_t gm_consts(int64_t* out, int32_t cap) {
  const int64_t v[] = {
#define GM_VALUE(k) (int64_t)gm::k,
      GM_CONSTS(GM_VALUE)
#undef GM_VALUE
  };
  int32_t n = (int32_t)(sizeof(v) / sizeof(v[0]));
  for (int32_t i = 0; i < n && i < cap; i++) out[i] = v[i];
  return n;
}

#ifndef GM_SOURCE_HASH  // setup.py passes the sha256 of the headers and this file (GRAMMAR_SOURCES)
#define GM_SOURCE_HASH ""
#endif

// The hash of the sources this library was compiled from (grammar_native.source_hash()); "" when
// built without it (by hand), which loading refuses as it refuses a stale build.
GM_EXPORT const char* gm_source_hash() { return GM_SOURCE_HASH; }

// The batch calls return how many rows had a grammar id out of range (0 when all are valid).

// mask: out (n, VOCAB) bytes, 1 where the action is allowed. end_if_none: the envs' mask, where
// a row that allows nothing (a finished episode) allows END (SynthesisCore._mask_i8)
GM_EXPORT int64_t gm_mask(const int32_t* S, const int64_t* gid, int64_t n, uint8_t* out, const uint64_t* addrs,
                          int32_t nfid, int32_t ngram, int32_t nthreads, int32_t end_if_none) {
  GmTables T = tables(addrs, nfid, ngram);
  std::atomic<int64_t> bad(0);
  parallel_rows(n, nthreads, [&](int64_t i) {
    uint32_t bits[3];
    mask_row(T, S + i * STATE_SIZE, row_gid(T, gid[i], bad), bits);
    uint8_t* o = out + i * VOCAB;
    uint8_t any = 0;
    for (int32_t a = 0; a < VOCAB; a++) any |= o[a] = (bits[a >> 5] >> (a & 31)) & 1;
    if (end_if_none && !any) o[END] = 1;
  });
  return bad.load();
}

// step: N (n, STATE_SIZE) the new rows (S where invalid), invalid (n,) bytes
GM_EXPORT int64_t gm_step(const int32_t* S, const int64_t* actions, const int64_t* gid, int64_t n, int32_t* N,
                          uint8_t* invalid, const uint64_t* addrs, int32_t nfid, int32_t ngram, int32_t nthreads) {
  GmTables T = tables(addrs, nfid, ngram);
  std::atomic<int64_t> bad(0);
  parallel_rows(n, nthreads, [&](int64_t i) {
    invalid[i] = step_row(T, S + i * STATE_SIZE, actions[i], row_gid(T, gid[i], bad), N + i * STATE_SIZE);
  });
  return bad.load();
}

// The token env's step with its autoreset, in place, for the CPU: SynthesisCore._step_tokens
// (envs/synthesis.py) row by row (grammar.h env_step_row, which the GPU's gm_env_step_kernel
// runs too), one call where the torch ops are ~40 (each a few us on a small batch). The env's
// state: task (n,), tokens (n, L), length (n,), S (n, STATE_SIZE); init (ngram, STATE_SIZE):
// each task's empty-body row (a task is its grammar). Rows where restart is
// set take no step: with tasks they start an episode on tasks[i], with keys (tasks null) on
// hashed_task(keys[i], episode[i], n_tasks) (the vector env's task hash, computed here for the
// restart rows only), without either they are left as they are. Out (n bytes each): bad (an invalid action in a stepped row: out of range,
// masked, or after the end; its row unchanged), term (END taken, or bad), trunc (the length
// limit reached without END), done (the rows whose programs are now scored); body_len (n,).
// Returns the rows whose task or new task is out of range (0: none; they read a clamped one).
GM_EXPORT int64_t gm_env_step(int64_t* task, int64_t* tokens, int64_t* length, int32_t* S, int64_t n, int32_t L,
                              const int64_t* actions, const uint8_t* restart, const int64_t* tasks,
                              const int64_t* keys, const int64_t* episode, int64_t n_tasks,
                              const int32_t* init, uint8_t* bad, uint8_t* term, uint8_t* trunc, uint8_t* done,
                              int64_t* body_len, const uint64_t* addrs, int32_t nfid, int32_t ngram,
                              int32_t nthreads) {
  GmTables T = tables(addrs, nfid, ngram);
  std::atomic<int64_t> nbad(0);
  parallel_rows(n, nthreads, [&](int64_t i) {
    const int64_t nt = !restart[i] ? 0 : tasks ? tasks[i] : keys ? hashed_task(keys[i], episode[i], n_tasks) : 0;
    const EnvStep o = env_step_row(T, task + i, tokens + i * (int64_t)L, length + i, S + i * STATE_SIZE, L, actions[i],
                                   restart[i], tasks || keys, nt, init, [&](int64_t g) { return row_gid(T, g, nbad); });
    bad[i] = o.bad, term[i] = o.term, trunc[i] = o.trunc, done[i] = o.done, body_len[i] = o.body_len;
  });
  return nbad.load();
}

// min_tokens_to_finish: out (n,) int64
GM_EXPORT int64_t gm_min_tokens(const int32_t* S, const int64_t* gid, int64_t n, int64_t* out, const uint64_t* addrs,
                                int32_t nfid, int32_t ngram, int32_t nthreads) {
  GmTables T = tables(addrs, nfid, ngram);
  std::atomic<int64_t> bad(0);
  parallel_rows(n, nthreads,
                [&](int64_t i) { out[i] = min_tokens_row(T, S + i * STATE_SIZE, row_gid(T, gid[i], bad)); });
  return bad.load();
}

// token slots (TaskBank.compiler_token_slots): out (n, S, 4) int32, count (n,) int64, S =
// P + 2L + 3; rows where active (n bytes; null: all) is 0 are left unwritten, with count 0
GM_EXPORT void gm_token_slots(const int64_t* bodies, int32_t L, const int64_t* lengths, const int64_t* task_ids,
                              const uint8_t* active, int64_t n, const int32_t* act, int32_t nact, const int32_t* tail,
                              const int32_t* prefix, const int64_t* prefix_len, int32_t ntask, int32_t P,
                              int32_t* out, int64_t* count, int32_t nthreads) {
  const SlotTables T{act, tail, prefix, prefix_len, nact, ntask, P};
  const int64_t S = slot_size(T, L);
  parallel_rows(n, nthreads, [&](int64_t i) {
    count[i] = active && !active[i] ? 0 : token_slots_row(T, bodies + i * L, L, lengths[i], task_ids[i], out + i * S * 4);
  });
}
