// CPU backend: the C ABI over the shared compiler and VM headers, parallel across cores.
// Loaded with ctypes by vramgym/vm/cpu.py; every array is caller-owned (numpy), nothing here
// allocates per program. Threads pull chunks of work from an atomic counter.
#include <algorithm>
#include <cstring>
#include <memory>
#include <atomic>
#include <mutex>
#include <new>
#include <pthread.h>
#include <system_error>
#include <thread>
#include <vector>

#include "compiler.h"
#include "jit.h"
#include "lanes.h"
#include "vm.h"

using namespace vg;

namespace {

// Threads for n items taken `chunk` at a time: nthreads (<= 0: one per core), at most one per
// chunk and at most MAX_THREADS (a huge request must not size per-thread scratch by it).
constexpr int32_t MAX_THREADS = 1024;
int32_t thread_count(int64_t n, int32_t nthreads, int64_t chunk) {
  // (hardware_concurrency reads a file, some 6 us: once, as grammar_cpu.cpp does)
  static const int32_t cores = (int32_t)std::max(1u, std::thread::hardware_concurrency());
  if (nthreads <= 0) nthreads = cores;
  int64_t max_threads = std::min<int64_t>(MAX_THREADS, (n + chunk - 1) / chunk);
  return (int32_t)std::max<int64_t>(1, std::min<int64_t>(nthreads, max_threads));
}

// Runs body(tid, i) for i in [0, n) on thread_count(n, nthreads, chunk) threads. Returns false
// when memory ran out (std::bad_alloc in any thread: the rest of the work is skipped), so that
// no C++ exception crosses the C ABI or ends a thread (either would abort the process).
template <class F>
bool parallel_for(int64_t n, int32_t nthreads, int64_t chunk, F body) {
  nthreads = thread_count(n, nthreads, chunk);
  std::atomic<int64_t> next(0);
  std::atomic<bool> failed(false);
  auto worker = [&](int32_t tid) {
    try {
      for (;;) {
        int64_t lo = next.fetch_add(chunk);
        if (lo >= n || failed.load(std::memory_order_relaxed)) break;
        int64_t hi = std::min(n, lo + chunk);
        for (int64_t i = lo; i < hi; i++) body(tid, i);
      }
    } catch (const std::bad_alloc&) {
      failed = true;
    }
  };
  if (nthreads == 1) {
    worker(0);
    return !failed;
  }
  std::vector<std::thread> pool;
  try {
    pool.reserve(nthreads - 1);  // (so that adding a started thread cannot throw)
    for (int32_t t = 1; t < nthreads; t++) pool.emplace_back(worker, t);
  } catch (...) {  // no more threads (system_error) or memory for one: the ones started share the work
  }
  worker(0);
  for (auto& th : pool) th.join();
  return !failed;
}

struct CompileScratch {
  Lexer lexer;
  Compiler compiler;
  std::vector<Token> tokens;
  CompileScratch() : tokens(MAX_TOKENS) {}
};

// Scratch arrays left uninitialized: no run reads what it has not written (the pool below
// reuses them dirty), and untouched pages of a large heap (up to 2**28 ints, 1 GiB) then cost
// no memory; zero-filled vectors committed all of it, per thread.
template <class T>
struct Scratch {
  std::unique_ptr<T[]> p;
  explicit Scratch(size_t n) : p(new T[n]) {}
  T* data() { return p.get(); }
};

struct RunScratch {
  Scratch<int32_t> stack, heap;
  Scratch<Frame> frames;
  Scratch<ListHdr> lists;
  Workspace ws;
  explicit RunScratch(const VMConfig& cfg)
      : stack(std::max(cfg.stack_size, 1)), heap(std::max(cfg.heap_size, 1)), frames(std::max(cfg.max_depth, 1)),
        lists(std::max(cfg.max_lists, 1)) {
    ws.stack = stack.data();
    ws.heap = heap.data();
    ws.frames = frames.data();
    ws.lists = lists.data();
    ws.nlists = ws.hp = 0;
  }
};

struct LaneScratch {
  Scratch<int32_t> stack, heap;
  Scratch<ListHdr> lists;
  Scratch<Frame> frames;
  std::vector<int32_t> solo_stack;
  std::vector<Frame> solo_frames;
  LaneState state;
  explicit LaneScratch(const VMConfig& cfg)
      : stack((size_t)cfg.stack_size * LANES), heap((size_t)std::max(cfg.heap_size, 1) * LANES),
        lists((size_t)std::max(cfg.max_lists, 1) * LANES), frames((size_t)std::max(cfg.max_depth, 1) * LANES) {
    state.stack = stack.data();
    state.frame_pool = frames.data();
    solo_stack.resize(std::max(cfg.stack_size, 1));
    solo_frames.resize(std::max(cfg.max_depth, 1));
    for (int l = 0; l < LANES; l++) {
      Workspace& w = state.lane[l];
      w.stack = nullptr;
      w.frames = nullptr;
      w.heap = heap.data() + (size_t)l * std::max(cfg.heap_size, 1);
      w.lists = lists.data() + (size_t)l * std::max(cfg.max_lists, 1);
      w.nlists = w.hp = 0;
    }
  }
};

// Objects of the run_batch calls before, kept for the next ones (a fresh mapping costs a system
// call and its first page faults): at most 64, one per thread at a time. T::reuse() readies a
// kept one for a new call; T::keep() says whether it is worth keeping.
template <class T>
struct Kept {
  std::mutex mu;
  std::vector<T*> kept;
  T* take() {
    {
      std::lock_guard<std::mutex> g(mu);
      if (!kept.empty()) {
        T* s = kept.back();
        kept.pop_back();
        s->reuse();
        return s;
      }
    }
    return new T();
  }
  void give(T* s) {
    if (!s) return;
    {
      std::lock_guard<std::mutex> g(mu);
      if (kept.size() < 64 && s->keep()) {
        kept.push_back(s);
        return;
      }
    }
    delete s;
  }
  static Kept& pool() {
    static Kept* p = [] {
      Kept* q = new Kept();  // never destroyed (as scratch_pool)
      // (a fork() while another thread holds the lock: see scratch_pool)
      pthread_atfork([] { pool().mu.lock(); }, [] { pool().mu.unlock(); }, [] { pool().mu.unlock(); });
      return q;
    }();
    return *p;
  }
};

#ifdef VG_JIT
// A 64-bit hash of a program's words and entry (four independent lanes: some 0.1 ns a word).
inline uint64_t program_hash(const uint32_t* w, int32_t len, int32_t entry_pc) {
  constexpr uint64_t K = 0x9E3779B97F4A7C15ull;
  uint64_t h[4] = {(uint64_t)(uint32_t)len << 32 | (uint32_t)entry_pc, 0x243F6A8885A308D3ull, 0x13198A2E03707344ull,
                   0xA4093822299F31D0ull};
  int32_t i = 0;
  for (; i + 8 <= len; i += 8)
    for (int k = 0; k < 4; k++) {
      uint64_t x;
      std::memcpy(&x, w + i + 2 * k, 8);
      h[k] = (h[k] ^ x) * K;
    }
  for (; i < len; i++) h[i & 3] = (h[i & 3] ^ w[i]) * K;
  uint64_t x = h[0] ^ (h[1] << 17 | h[1] >> 47) ^ (h[2] << 31 | h[2] >> 33) ^ (h[3] << 47 | h[3] >> 17);
  x ^= x >> 32;
  x *= K;
  return x ^ x >> 29;
}

// The settings of the JIT's code cache (vg_jit_cache, for tests and benchmarks): whether copies
// share their code at all, the bytes of its buffer, and a mask of the program hash's bits (fewer
// bits: more programs share a hash, which find_copies must tell apart by their words).
inline std::atomic<int32_t>& jit_share() {
  static std::atomic<int32_t> on(1);
  return on;
}
constexpr int64_t JIT_ARENA = 2 << 20;
inline std::atomic<int64_t>& jit_arena() {
  static std::atomic<int64_t> a(JIT_ARENA);
  return a;
}
inline std::atomic<uint64_t>& jit_hash_mask() {
  static std::atomic<uint64_t> m(~0ull);
  return m;
}

// The copies among a batch's valid programs (entry_pc >= 0): canon[p], the first program with
// p's words and entry function, and whether p has others (shared). A batch of candidates often
// holds one program many times: those that differ in names or layout only compile alike.
void find_copies(const uint32_t* code, const int64_t* code_off, int32_t n_prog, const int32_t* entry_pc,
                 const uint64_t* hash, std::vector<int32_t>& canon, std::vector<uint8_t>& shared) {
  canon.resize(n_prog), shared.assign(n_prog, 0);
  size_t slots = 16;
  while (slots < 2 * (size_t)n_prog) slots *= 2;
  std::vector<int32_t> table(slots, -1);
  for (int32_t p = 0; p < n_prog; p++) {
    canon[p] = p;
    if (entry_pc[p] < 0) continue;
    const int64_t len = code_off[p + 1] - code_off[p];
    size_t i = hash[p] & (slots - 1);
    for (; table[i] >= 0; i = (i + 1) & (slots - 1)) {
      const int32_t q = table[i];
      if (hash[q] == hash[p] && code_off[q + 1] - code_off[q] == len && entry_pc[q] == entry_pc[p] &&
          std::memcmp(code + code_off[q], code + code_off[p], sizeof(uint32_t) * (size_t)len) == 0)
        break;
    }
    if (table[i] < 0) table[i] = p;
    else canon[p] = table[i], shared[p] = shared[table[i]] = 1;
  }
}

// A thread's native code (jit.h) in one run_batch call. A program with copies in the batch is
// compiled once into `kept`, one after another, and each copy's runs take that code; a program
// without copies is compiled into `once` for its runs at hand (fresh lines of a larger buffer
// would cost it more than the same few lines again). A full `kept` starts over empty; nothing is
// kept from one call to the next (clear).
struct JitScratch {
  struct Entry {
    int32_t canon;  // the program
    bool ok;        // it compiled
    jit::Ready r;
    std::vector<void*> ret;  // the return points' table of a program with calls
  };
  jit::CodeBuffer once, kept;
  size_t used = 0;     // bytes of kept taken by the entries' code
  jit::Compiled work;  // the compiler's scratch
  std::vector<Entry> entries;  // [0, n) the programs in kept (the others' ret vectors kept for reuse)
  size_t n = 0;
  Entry solo;                  // the program in once
  std::vector<int32_t> slot;   // [canon]: its entry's index + 1, 0 none (all 0 between calls)
  int64_t last = -1;           // the program of the last lookup, and its entry
  const Entry* cur = nullptr;

  void clear() {
    for (size_t k = 0; k < n; k++) slot[entries[k].canon] = 0;
    n = 0, used = 0, last = -1;
  }
  void reuse() { clear(); }  // (Kept: nothing of a call before)
  bool keep() const { return true; }
  // Whether program p (canon c) has been compiled in this call (more runs cost no compile).
  bool seen(int64_t p, int32_t c) {
    if (p == last) return true;
    if ((size_t)c < slot.size() && slot[c]) {
      last = p, cur = &entries[slot[c] - 1];
      return true;
    }
    return false;
  }
  // Program p (validated; canon c, with copies when shared) compiled, or null where the JIT does
  // not take it.
  const jit::Ready* get(int64_t p, int32_t c, bool shared, const uint32_t* code, int32_t len, int32_t entry_pc) {
    if (seen(p, c)) return cur->ok ? &cur->r : nullptr;
    Entry* e = &solo;
    if (shared) {
      // (a buffer of cap bytes: reserve() maps a larger one only when it is empty)
      const size_t room = jit::code_room(len), cap = std::max(room, (size_t)jit_arena().load(std::memory_order_relaxed));
      if (used + room > cap) clear();
      if (!kept.reserve(cap)) return nullptr;
      if (n == entries.size()) entries.emplace_back();
      if (slot.size() <= (size_t)c) slot.resize((size_t)c + 1, 0);
      e = &entries[n];
      e->ok = jit::compile(code, len, work, kept, used);
      if (e->ok) used = (used + (size_t)work.size + 63) & ~(size_t)63;
      slot[c] = (int32_t)++n;
    } else {
      e->ok = jit::compile(code, len, work, once);
    }
    e->canon = c;
    if (e->ok) {
      e->r = jit::ready(work, entry_pc);
      if (!work.calls.empty()) e->ret = work.ret, e->r.ret_at = e->ret.data();
    }
    last = p, cur = e;
    return e->ok ? &e->r : nullptr;
  }
};

inline Kept<JitScratch>& jit_pool() { return Kept<JitScratch>::pool(); }
#endif

// A program's superinstructions (fuse.h), per thread.
struct Translation {
  std::vector<Fused> fx;
  std::vector<uint8_t> xop, target;
  int64_t prog = -1;  // the program of the thread's last runs one by one, or -1
  int64_t steps = 0;  // steps of its runs so far
  bool full = false;  // fx and xop hold its whole translation
};

// A thread's list results in a run_batch call, one after another (run_batch then copies them to
// the caller's out_list in run order): a small buffer written in order stays in cache, where
// rows of the caller's array (each list where its run's row starts) cost a cache miss each.
struct ListBuf {
  std::unique_ptr<int32_t[]> d;  // (uninitialized)
  size_t n = 0, cap = 0;
  int32_t* room(size_t k) {  // room for k more elements, at the end
    if (n + k > cap) {
      const size_t c = std::max({2 * cap, n + k, (size_t)1 << 14});
      std::unique_ptr<int32_t[]> e(new int32_t[c]);
      if (n) std::memcpy(e.get(), d.get(), sizeof(int32_t) * n);
      d = std::move(e), cap = c;
    }
    return d.get() + n;
  }
  void reuse() { n = 0; }
  bool keep() const { return cap <= ((size_t)2 << 20); }  // (Kept: at most 8 MiB each)
};

inline Kept<ListBuf>& list_pool() { return Kept<ListBuf>::pool(); }

// Write one run's outputs: a list result is checked, its first out_cap elements appended to lb
// (when not null; their count to out_off[r + 1]), and the result compared with the expected
// value. (In line: a call with 16 arguments a run cost more.)
inline __attribute__((always_inline)) void finish_run(RunResult res, const Workspace& ws, int32_t p, int32_t n_prog,
                                                      const int32_t* ret_kind, int32_t j, int32_t n_in,
                                                      const int32_t* exp_words, const int64_t* exp_off, int64_t r,
                                                      int32_t* status, int32_t* value, int32_t* steps, uint8_t* passed,
                                                      ListBuf* lb, int64_t* out_off, int32_t out_cap) {
  int32_t rk = (uint32_t)p < (uint32_t)n_prog ? ret_kind[p] : KIND_INT;
  bool have_exp = exp_words && (uint32_t)j < (uint32_t)n_in;
  bool ok;
  const int32_t ref = res.value;  // (a list result's reference: finish_run makes value its length)
  res = finish_run(res, rk, ws, have_exp ? exp_words + exp_off[j] : nullptr,
                   have_exp ? (int32_t)(exp_off[j + 1] - exp_off[j]) : 0, nullptr, 0, &ok);
  if (lb) {
    const int32_t w = res.status == TRAP_OK && rk == KIND_LIST ? std::min(res.value, out_cap) : 0;
    if (w) {
      const int32_t* src = ws.heap + ws.lists[ref].off;
      int32_t* d = lb->room((size_t)w);
      for (int32_t k = 0; k < w; k++) d[k] = src[k];
      lb->n += (size_t)w;
    }
    out_off[r + 1] = w;
  }
  if (passed) passed[r] = ok;
  status[r] = res.status;
  value[r] = res.value;
  steps[r] = res.steps;
}

// Scratch of the run_batch calls before, kept for the next ones (at most POOL_BYTES in all):
// a call's fresh megabytes of zeroed pages cost more than a short batch. A kept scratch serves
// only the same memory limits; nothing in it is read before a run writes it.
struct ScratchPool {
  static constexpr size_t POOL_BYTES = 256u << 20;
  std::mutex mu;
  size_t kept = 0;  // bytes (estimated) of the scratch in the pool
  std::vector<std::pair<VMConfig, void*>> lanes, runs;
  static bool same(const VMConfig& a, const VMConfig& b) {
    return a.max_depth == b.max_depth && a.heap_size == b.heap_size && a.max_lists == b.max_lists &&
           a.stack_size == b.stack_size;
  }
  static size_t bytes(const VMConfig& c) {
    return ((size_t)c.stack_size + (size_t)std::max(c.heap_size, 1) + 3 * (size_t)std::max(c.max_lists, 1) +
            3 * (size_t)std::max(c.max_depth, 1)) * 4 * (LANES + 1);
  }
  template <class T>
  T* take(std::vector<std::pair<VMConfig, void*>>& v, const VMConfig& cfg) {
    {
      std::lock_guard<std::mutex> g(mu);
      for (size_t i = v.size(); i-- > 0;)
        if (same(v[i].first, cfg)) {
          T* t = static_cast<T*>(v[i].second);
          kept -= bytes(cfg);
          v.erase(v.begin() + (std::ptrdiff_t)i);
          return t;
        }
    }
    return new T(cfg);
  }
  template <class T>
  void give(std::vector<std::pair<VMConfig, void*>>& v, const VMConfig& cfg, T* t) {
    if (!t) return;
    {
      std::lock_guard<std::mutex> g(mu);
      if (kept + bytes(cfg) <= POOL_BYTES) {
        kept += bytes(cfg);
        v.emplace_back(cfg, t);
        return;
      }
    }
    delete t;
  }
};

// The largest lockstep scratch (ScratchPool::bytes) run_batch allocates per thread.
constexpr size_t LANE_SCRATCH_MAX = 256u << 20;

// Programs of at most this many words that may loop run as native code at once in mode 0
// (compiling one costs at most a few microseconds); longer ones only for their runs that prove
// long (run_batch).
constexpr int32_t JIT_EAGER_WORDS = 96;

// ...and only while the programs before them on the thread ran long for their size: a moving
// average of their runs' steps per run and word (each capped at JIT_LONG_CAP) of at least
// JIT_LONG_RUNS. A compile costs some 40-60 ns a word and native code saves about 1 ns a step
// over the lockstep interpreter, so 32 runs pay for it from about 1.5 steps a run and word; the
// bar is lower (a long program run capped first costs more than a short one compiled), and
// batches of short programs (bench_cpu's random ones: a median of 0.67 there; no template
// of bench_cpu's corpus below 1.6 on average) then run in the lockstep interpreter, capped as
// longer programs are. Results are the same either way.
constexpr float JIT_LONG_RUNS = 1.0f, JIT_LONG_CAP = 16.0f;

// Whether a program may take more steps than it has words: a jump back or a call. (Else every
// run ends within len steps, below run_batch's cap: compiling it would not pay.)
bool may_loop(const uint32_t* code, int32_t len) {
  for (int32_t pc = 0; pc < len; pc++) {
    const int32_t op = code[pc] & 0xFF;
    if (op == OP_CALL) return true;
    const bool jump = op == OP_JUMP || op == OP_JUMP_IF_FALSE || op == OP_JUMP_IF_TRUE || op == OP_JUMP_IF_FALSE_OR_POP ||
                      op == OP_JUMP_IF_TRUE_OR_POP;  // (FOR_*'s argument is a slot: its loop jumps back)
    if (jump && (int32_t)(code[pc] >> 8) <= pc) return true;
  }
  return false;
}

ScratchPool& scratch_pool() {
  static ScratchPool* p = [] {
    ScratchPool* q = new ScratchPool();  // never destroyed: threads may outlive static destructors
    // A fork() while another thread holds the pool's lock would leave it locked forever in the
    // child (multiprocessing forks on Linux): fork only between uses, and unlock on both sides.
    pthread_atfork([] { scratch_pool().mu.lock(); }, [] { scratch_pool().mu.unlock(); },
                   [] { scratch_pool().mu.unlock(); });
    return q;
  }();
  return *p;
}

VMConfig make_config(const int32_t* c) {
  VMConfig cfg;
  cfg.fuel = c[0];
  cfg.max_depth = c[1];
  cfg.heap_size = c[2];
  cfg.max_lists = c[3];
  cfg.stack_size = c[4];
  return cfg;
}

// validate() of a program of len words, which is invalid at word 0 when longer than MAX_CODE:
// every validator of the CPU core and vg_run_batch agree on that (as the GPU's does).
int32_t validate_words(const uint32_t* code, int64_t len, int32_t entry, int32_t* entry_pc) {
  if (len > MAX_CODE) {
    *entry_pc = -1;
    return 0;
  }
  return validate(code, (int32_t)len, entry, entry_pc);
}

int32_t run_batch(const uint32_t* code, const int64_t* code_off, int32_t n_prog, const int32_t* entry,
                  const int32_t* ret_kind, const int8_t* params, const int32_t* in_words, const int64_t* in_off,
                  int32_t n_in, const int32_t* run_prog, const int32_t* run_in, int64_t n_runs,
                  const int32_t* exp_words, const int64_t* exp_off, const int32_t* config, const int32_t* prog_fuel,
                  int32_t* status, int32_t* value, int32_t* steps, uint8_t* passed, int32_t* out_list,
                  int64_t* out_off, int32_t out_cap, int32_t nthreads, int32_t mode);

}  // namespace

#define VG_EXPORT __attribute__((visibility("default")))

extern "C" {

VG_EXPORT int32_t vg_abi_version() { return 7; }
VG_EXPORT int32_t vg_func_meta() { return FUNC_META; }

// The lockstep interpreter's build (lanes.h): isa 1 the x86-64-v3 one where the CPU has it (the
// default), 0 the baseline; -1 changes nothing. Returns the setting before. Not during a run_batch.
VG_EXPORT int32_t vg_lane_isa(int32_t isa) {
  return isa < 0 ? lane_isa().load() : lane_isa().exchange(isa ? 1 : 0);
}

// Whether run_batch runs programs as native code (jit.h) where it can: 1 (the default where the
// JIT is built) or 0; -1 changes nothing. Returns the setting before, or -1 where the JIT is not
// built (x86-64 Linux and macOS with GCC or Clang only). Not during a run_batch.
VG_EXPORT int32_t vg_jit(int32_t on) {
#ifdef VG_JIT
  return on < 0 ? jit::enabled().load() : jit::enabled().exchange(on ? 1 : 0);
#else
  (void)on;
  return -1;
#endif
}

// The JIT's code cache of a run_batch call (JitScratch), for tests and benchmarks, where >= 0:
// whether a program's copies share its code (0: each is compiled as if it had none, 1: they
// share, the default), its buffer's bytes (the smallest: every program not met before empties
// it) and the bits of the program hash it keeps (0: every program has the same; 64: all).
// Returns the buffer's bytes before, or -1 without the JIT. Not during a run_batch.
VG_EXPORT int64_t vg_jit_cache(int32_t share, int64_t arena_bytes, int32_t hash_bits) {
#ifdef VG_JIT
  const int64_t before = jit_arena().load();
  if (share >= 0) jit_share().store(share ? 1 : 0);
  if (arena_bytes >= 0) jit_arena().store(arena_bytes);
  if (hash_bits >= 0) jit_hash_mask().store(hash_bits >= 64 ? ~0ull : (1ull << hash_bits) - 1);
  return before;
#else
  (void)share, (void)arena_bytes, (void)hash_bits;
  return -1;
#endif
}

// The native code the JIT makes of one validated program (for inspection: tests and
// disassembly): its bytes into out (room for cap), the offset of pc's block into at[len]
// (-1 where none). Returns the code's size, 0 when it is not compiled, -1 without the JIT.
VG_EXPORT int64_t vg_jit_code(const uint32_t* code, int32_t len, uint8_t* out, int64_t cap, int64_t* at) {
#ifdef VG_JIT
  jit::CodeBuffer buf;
  jit::Compiled c;
  int32_t entry_pc;
  if (validate_words(code, len, 0, &entry_pc) >= 0 || !jit::compile(code, len, c, buf)) return 0;
  const int64_t n = c.size;
  for (int64_t i = 0; i < n && i < cap; i++) out[i] = buf.mem[i];
  for (int32_t pc = 0; pc < len; pc++) at[pc] = c.at[pc] ? (uint8_t*)c.at[pc] - buf.mem : -1;
  return n;
#else
  (void)code, (void)len, (void)out, (void)cap, (void)at;
  return -1;
#endif
}

// Compile one source. Returns the number of code words, or -1 with err = {code, line, col, arg}.
// meta receives FUNC_META ints per function (room for MAX_FUNCS), *nfuncs their count.
VG_EXPORT int32_t vg_compile(const char* src, int64_t len, uint32_t* code, int32_t code_cap, int32_t* err, int32_t* meta,
                   int32_t* nfuncs) {
  static thread_local CompileScratch s;
  CompileError e;
  int32_t n = compile_source(s.lexer, s.compiler, src, len, s.tokens.data(), (int32_t)s.tokens.size(), code,
                             code_cap, &e);
  err[0] = e.code;
  err[1] = e.line;
  err[2] = e.col;
  err[3] = e.arg;
  *nfuncs = n >= 0 ? s.compiler.nfuncs : 0;
  if (n >= 0 && meta) write_meta(s.compiler, &s.lexer, meta);
  return n;
}

// Tokenize one source into (kind, value, line, col) quadruples, EOF included. Returns the
// number of tokens, or -1 with err = {code, line, col, arg}.
VG_EXPORT int32_t vg_tokenize(const char* src, int64_t len, int32_t* toks, int32_t cap, int32_t* err) {
  static thread_local CompileScratch s;
  Lexer& L = s.lexer;
  bool ok = tokenize_source(L, src, len, reinterpret_cast<Token*>(toks), cap);
  err[0] = L.err.code;
  err[1] = L.err.line;
  err[2] = L.err.col;
  err[3] = L.err.arg;
  return ok ? L.n : -1;
}

// Compile n sources packed in src with byte offsets src_off[n + 1]. Program i's code goes to
// code[i * code_cap ...], its length to code_len[i] (-1 on error, with err[4 * i ...]), and, when
// sig is not null, its functions' packed signatures to sig[i * MAX_FUNCS ...] (compiler.h).
// Returns 0, or -1 when memory ran out (the batch is then incomplete); likewise below.
VG_EXPORT int32_t vg_compile_batch(const char* src, const int64_t* src_off, int32_t n, uint32_t* code,
                                   int32_t code_cap, int32_t* code_len, int32_t* err, int64_t* sig,
                                   int32_t nthreads) {
  int32_t nt = thread_count(n, nthreads, 64);
  std::vector<CompileScratch*> scratch(nt, nullptr);
  bool ok = parallel_for(n, nt, 64, [&](int32_t tid, int64_t i) {
    if (!scratch[tid]) scratch[tid] = new CompileScratch();
    CompileScratch& s = *scratch[tid];
    CompileError e;
    code_len[i] = compile_source(s.lexer, s.compiler, src + src_off[i], src_off[i + 1] - src_off[i],
                                 s.tokens.data(), (int32_t)s.tokens.size(), code + i * (int64_t)code_cap, code_cap, &e);
    err[4 * i] = e.code;
    err[4 * i + 1] = e.line;
    err[4 * i + 2] = e.col;
    err[4 * i + 3] = e.arg;
    if (sig) write_signatures(s.compiler, code_len[i], sig + i * (int64_t)MAX_FUNCS);
  });
  for (auto* p : scratch) delete p;
  return ok ? 0 : -1;
}

// Compile n token arrays (kind, value, line, col int32 quadruples) with token offsets tok_off[n + 1];
// outputs as vg_compile_batch's.
VG_EXPORT int32_t vg_compile_tokens_batch(const int32_t* toks, const int64_t* tok_off, int32_t n, uint32_t* code,
                                          int32_t code_cap, int32_t* code_len, int32_t* err, int64_t* sig,
                                          int32_t nthreads) {
  int32_t nt = thread_count(n, nthreads, 64);
  std::vector<Compiler*> scratch(nt, nullptr);
  bool ok = parallel_for(n, nt, 64, [&](int32_t tid, int64_t i) {
    if (!scratch[tid]) scratch[tid] = new Compiler();
    Compiler& c = *scratch[tid];
    const Token* t = reinterpret_cast<const Token*>(toks) + tok_off[i];
    code_len[i] = compile_tokens(c, t, (int32_t)(tok_off[i + 1] - tok_off[i]), code + i * (int64_t)code_cap, code_cap);
    err[4 * i] = c.err.code;
    err[4 * i + 1] = c.err.line;
    err[4 * i + 2] = c.err.col;
    err[4 * i + 3] = c.err.arg;
    if (sig) write_signatures(c, code_len[i], sig + i * (int64_t)MAX_FUNCS);
  });
  for (auto* p : scratch) delete p;
  return ok ? 0 : -1;
}

// -1 when valid, else the index of the first invalid word (0 for a program longer than
// MAX_CODE words); *entry_pc for function `entry`.
VG_EXPORT int32_t vg_validate(const uint32_t* code, int32_t len, int32_t entry, int32_t* entry_pc) {
  return validate_words(code, len, entry, entry_pc);
}

// vg_validate over n programs (code words with offsets code_off[n + 1], entry function index
// entry[i]) into bad[i] and entry_pc[i], across threads. Returns 0 (it allocates no scratch).
VG_EXPORT int32_t vg_validate_batch(const uint32_t* code, const int64_t* code_off, int32_t n, const int32_t* entry,
                                    int32_t* bad, int32_t* entry_pc, int32_t nthreads) {
  bool ok = parallel_for(n, nthreads, 256, [&](int32_t, int64_t i) {
    bad[i] = validate_words(code + code_off[i], code_off[i + 1] - code_off[i], entry[i], entry_pc + i);
  });
  return ok ? 0 : -1;
}

// Run a batch. Programs: code words with offsets code_off[n_prog + 1], an entry function index
// and a result kind each, and optionally (params, nullable) the entry's parameter kinds,
// MAX_PARAMS + 1 int8 each (-1 past the last; a row of -2: unchecked): a run whose input has
// other kinds traps bad_input. Inputs: encoded words with offsets in_off[n_in + 1]. Run r executes
// program run_prog[r] on input run_in[r]. Outputs per run: status, value (int/bool value, or
// the length of a list result), steps, and, when exp_words is not null, passed[r] = the result
// equals expected value run_in[r] (encoded like an argument, offsets exp_off[n_in + 1]). When
// out_list is not null (room for n_runs * out_cap ints), the first out_cap elements of the list
// results, one list after another (run r's at out_list[out_off[r]], out_off[r + 1] - out_off[r]
// of them: none for other runs; out_off has n_runs + 1 offsets from 0). prog_fuel (nullable):
// a step budget per program, which caps config's fuel for its runs (values below 1 count as 1).
// mode 0: consecutive runs of one program go through the lockstep lane interpreter (up to 32
// at once), mode 1: every run through the scalar interpreter; both with superinstructions
// (fuse.h) where they pay. Modes 2 and 3: the same without superinstructions (the tests'
// references); modes 4 and 5: scalar and lockstep, always with them (for tests); mode 6: native
// code (jit.h) for every program it compiles, the others as mode 0 without it. Mode 0 also runs
// as native code each run that is long for its program's size, where vg_jit allows (the
// default). All give identical results. Returns 0, or -1 when memory for the runs' scratch ran out (results are
// then incomplete).
VG_EXPORT int32_t vg_run_batch(const uint32_t* code, const int64_t* code_off, int32_t n_prog, const int32_t* entry,
                  const int32_t* ret_kind, const int8_t* params, const int32_t* in_words, const int64_t* in_off,
                  int32_t n_in, const int32_t* run_prog, const int32_t* run_in, int64_t n_runs,
                  const int32_t* exp_words, const int64_t* exp_off, const int32_t* config, const int32_t* prog_fuel,
                  int32_t* status, int32_t* value, int32_t* steps, uint8_t* passed, int32_t* out_list,
                  int64_t* out_off, int32_t out_cap, int32_t nthreads, int32_t mode) {
  try {
    return run_batch(code, code_off, n_prog, entry, ret_kind, params, in_words, in_off, n_in, run_prog, run_in, n_runs,
                     exp_words, exp_off, config, prog_fuel, status, value, steps, passed, out_list, out_off, out_cap,
                     nthreads, mode);
  } catch (const std::bad_alloc&) {
    return -1;
  }
}

// Score n token programs on their tasks' tests in one call (vramgym.vm.evaluate.score_token_rows).
// Row i's tokens toks[4 * tok_off[i] ..] (as vg_compile_tokens_batch) compile with code_cap words,
// `chunk` rows at a time (the (chunk, code_cap) code matrix is scratch). A row that compiles runs
// its entry function 0 on the n_tests tests of task[i]: inputs and expected values items
// task[i] * n_tests + k (n_tasks * n_tests of each, encoded as vg_run_batch's), result kind
// ret_kind[task[i]]. Outputs: ok[i] (it compiled), passed[i] (tests whose result equals the
// expected value), steps[i] (executed steps summed over its tests); (0, 0, 0) where it did not
// compile. task_fuel (nullable, n_tasks values): a step budget per task, which caps config's fuel
// for its runs (vg_run_batch's prog_fuel). The caller checks every task[i] in [0, n_tasks).
// Returns 0, or -1 when memory ran out.
VG_EXPORT int32_t vg_score_tokens(const int32_t* toks, const int64_t* tok_off, int32_t n, const int64_t* task,
                                  int32_t n_tasks, const int32_t* ret_kind, const int32_t* in_words,
                                  const int64_t* in_off, const int32_t* exp_words, const int64_t* exp_off,
                                  int32_t n_tests, const int32_t* config, const int32_t* task_fuel,
                                  int32_t code_cap, int32_t chunk, uint8_t* ok, int32_t* passed, int64_t* steps,
                                  int32_t nthreads) {
  try {
    for (int32_t i = 0; i < n; i++) ok[i] = 0, passed[i] = 0, steps[i] = 0;
    std::vector<uint32_t> words, code;  // the compiled programs one after another; a chunk's matrix
    std::vector<int64_t> code_off(1, 0), off;
    std::vector<int32_t> rows, len, err;  // rows: the row of each compiled program
    chunk = std::max(1, chunk);
    for (int32_t a = 0; a < n; a += chunk) {
      const int32_t m = std::min(chunk, n - a);
      code.resize((size_t)m * code_cap), len.resize(m), err.resize(4 * (size_t)m), off.resize(m + 1);
      for (int32_t i = 0; i <= m; i++) off[i] = tok_off[a + i] - tok_off[a];
      if (vg_compile_tokens_batch(toks + 4 * tok_off[a], off.data(), m, code.data(), code_cap, len.data(), err.data(),
                                  nullptr, nthreads) != 0)
        return -1;
      for (int32_t i = 0; i < m; i++) {
        if (len[i] < 0) continue;
        ok[a + i] = 1;
        rows.push_back(a + i);
        const uint32_t* w = code.data() + (size_t)i * code_cap;
        words.insert(words.end(), w, w + len[i]);
        code_off.push_back((int64_t)words.size());
      }
    }
    const int32_t g = (int32_t)rows.size();
    if (!g || n_tests <= 0) return 0;
    const int64_t n_runs = (int64_t)g * n_tests;
    std::vector<int32_t> entry(g, 0), ret(g), run_prog(n_runs), run_in(n_runs), status(n_runs), value(n_runs),
        run_steps(n_runs), fuel(task_fuel ? g : 0);
    std::vector<uint8_t> pass(n_runs);
    for (int32_t k = 0; k < g; k++) {
      ret[k] = ret_kind[task[rows[k]]];
      if (task_fuel) fuel[k] = task_fuel[task[rows[k]]];
      for (int32_t t = 0; t < n_tests; t++) {
        run_prog[(int64_t)k * n_tests + t] = k;
        run_in[(int64_t)k * n_tests + t] = (int32_t)(task[rows[k]] * n_tests + t);
      }
    }
    if (run_batch(words.data(), code_off.data(), g, entry.data(), ret.data(), nullptr, in_words, in_off,
                  n_tasks * n_tests, run_prog.data(), run_in.data(), n_runs, exp_words, exp_off, config,
                  task_fuel ? fuel.data() : nullptr, status.data(), value.data(), run_steps.data(), pass.data(), nullptr,
                  nullptr, 0, nthreads, 0) != 0)
      return -1;
    for (int32_t k = 0; k < g; k++) {
      int32_t p = 0;
      int64_t s = 0;
      for (int64_t r = (int64_t)k * n_tests; r < (int64_t)(k + 1) * n_tests; r++) p += pass[r], s += run_steps[r];
      passed[rows[k]] = p, steps[rows[k]] = s;
    }
    return 0;
  } catch (const std::bad_alloc&) {
    return -1;
  }
}

}  // extern "C"

namespace {

// The entry's parameter kinds of one program (a params row, -1 past the last), read once per
// task: n leading kinds, then -1 to the row's end (else no input can match: ok false).
struct WantKinds {
  const int8_t* row;
  int32_t n;
  bool ok;
};
WantKinds want_kinds(const int8_t* row) {
  WantKinds k = {row, 0, true};
  while (k.n <= MAX_PARAMS && row[k.n] != -1) k.n++;
  for (int32_t i = k.n; i <= MAX_PARAMS; i++) k.ok = k.ok && row[i] == -1;
  return k;
}

// Whether input j's kind words are the wanted kinds, read as vramgym.vm.batch.input_kinds
// reads them: a value at position k when two words remain, its kind word (127 outside 0..126),
// then past it (2 words, or 2 + n for a list); no value past the last parameter.
bool kinds_match(const WantKinds& want, const int32_t* w, int64_t len) {
  if (!want.ok) return false;
  int64_t pos = 0;
  for (int32_t k = 0; k < want.n; k++) {
    if (pos + 1 >= len) return false;
    int32_t wk = w[pos];
    if ((wk >= 0 && wk < 127 ? wk : 127) != want.row[k]) return false;
    pos += wk == KIND_LIST ? 2 + (int64_t)(w[pos + 1] > 0 ? w[pos + 1] : 0) : 2;
  }
  return want.n > MAX_PARAMS || pos + 1 >= len;
}

// vg_run_batch's body: 0, or -1 when memory ran out (results then incomplete).
int32_t run_batch(const uint32_t* code, const int64_t* code_off, int32_t n_prog, const int32_t* entry,
                  const int32_t* ret_kind, const int8_t* params, const int32_t* in_words, const int64_t* in_off,
                  int32_t n_in, const int32_t* run_prog, const int32_t* run_in, int64_t n_runs,
                  const int32_t* exp_words, const int64_t* exp_off, const int32_t* config, const int32_t* prog_fuel,
                  int32_t* status, int32_t* value, int32_t* steps, uint8_t* passed, int32_t* out_list,
                  int64_t* out_off, int32_t out_cap, int32_t nthreads, int32_t mode) {
  const VMConfig base_cfg = make_config(config);  // (a program's own fuel, prog_fuel[p], in each task below)
  std::vector<int32_t> entry_pc(n_prog);
#ifdef VG_JIT
  const bool jit_on = jit::enabled().load(std::memory_order_relaxed) && (mode == 0 || mode == 6);
  std::vector<uint64_t> hash(jit_on ? n_prog : 0);
  const uint64_t mask = jit_hash_mask().load(std::memory_order_relaxed);
#endif
  bool ok = parallel_for(n_prog, nthreads, 256, [&](int32_t, int64_t p) {
    int32_t pc = -1;
    const int64_t len = code_off[p + 1] - code_off[p];
    int32_t bad = validate_words(code + code_off[p], len, entry[p], &pc);
    entry_pc[p] = bad >= 0 ? -2 : pc;  // -2: invalid bytecode, -1: no such entry function
#ifdef VG_JIT
    if (jit_on && pc >= 0 && bad < 0) hash[p] = program_hash(code + code_off[p], (int32_t)len, pc) & mask;
#endif
  });
#ifdef VG_JIT
  std::vector<int32_t> canon;  // the JIT compiles each program with copies once (JitScratch)
  std::vector<uint8_t> shared;
  if (jit_on && jit_share().load(std::memory_order_relaxed)) {
    find_copies(code, code_off, n_prog, entry_pc.data(), hash.data(), canon, shared);
  } else if (jit_on) {  // (each program its own: as if no two were the same)
    canon.resize(n_prog), shared.assign(n_prog, 0);
    for (int32_t p = 0; p < n_prog; p++) canon[p] = p;
  }
#endif
  // Tasks: up to LANES consecutive runs of the same program (one run each in scalar mode, or
  // when the limits make a lockstep scratch, 33 runs' memory, too large: same results).
  const bool lanes_fit = ScratchPool::bytes(base_cfg) <= LANE_SCRATCH_MAX;
  std::vector<int64_t> task_start;
  for (int64_t r = 0; r < n_runs;) {
    task_start.push_back(r);
    int64_t e = r + 1;
    if ((mode == 0 || mode == 2 || mode == 5) && lanes_fit)
      while (e < n_runs && e - r < LANES && run_prog[e] == run_prog[r]) e++;
    r = e;
  }
  task_start.push_back(n_runs);
  const bool fused = mode == 0 || mode == 1 || mode == 4 || mode == 5;
  int64_t ntasks = (int64_t)task_start.size() - 1;
  int32_t nt = thread_count(ntasks, nthreads, 4);
  std::vector<RunScratch*> scratch(nt, nullptr);
  std::vector<LaneScratch*> lane_scratch(nt, nullptr);
  std::vector<Translation*> trans(nt, nullptr);
  struct Src {  // where a task's lists start: its thread's buffer, and the position in it
    int32_t tid;
    int64_t at;
  };
  std::vector<ListBuf*> lists(nt, nullptr);
  std::vector<Src> task_src(out_list ? ntasks : 0);
  if (out_list)
    for (auto& b : lists) b = list_pool().take();
#ifdef VG_JIT
  std::vector<JitScratch*> jits(nt, nullptr);
  std::vector<float> long_runs(nt, JIT_LONG_CAP);  // per thread: see JIT_LONG_RUNS
#endif
  ok = ok && parallel_for(ntasks, nt, 4, [&](int32_t tid, int64_t t) {
    int64_t r0 = task_start[t], r1 = task_start[t + 1];
    int32_t p = run_prog[r0];
    // The limits of p's runs: prog_fuel[p] (at least 1) caps the fuel where given. (The scratch
    // pools key on the other limits only: every task's scratch fits base_cfg's.)
    VMConfig cfg = base_cfg;
    if (prog_fuel && (uint32_t)p < (uint32_t)n_prog) cfg.fuel = std::min(cfg.fuel, std::max(1, prog_fuel[p]));
    if (out_list) task_src[t] = Src{tid, (int64_t)lists[tid]->n};
    // Runs whose input's kinds are not the entry's parameter kinds (params row p; a row of -2 is
    // not checked) trap bad_input, before any other outcome (as the Python check of other backends).
    const bool check = params && (uint32_t)p < (uint32_t)n_prog && params[(int64_t)p * (MAX_PARAMS + 1)] != -2;
    const WantKinds want = check ? want_kinds(params + (int64_t)p * (MAX_PARAMS + 1)) : WantKinds{nullptr, 0, true};
    auto wrong_kinds = [&](int64_t r) {
      int32_t j = run_in[r];
      return check && (uint32_t)j < (uint32_t)n_in && !kinds_match(want, in_words + in_off[j], in_off[j + 1] - in_off[j]);
    };
    // Native code (jit.h), compiled once per program and thread, one run at a time. Mode 6 runs
    // every program it compiles that way, and mode 0 the programs of at most JIT_EAGER_WORDS
    // words that may loop while the thread's programs have run long (JIT_LONG_RUNS). Mode 0 runs
    // the others in the interpreters below with the step budget capped at max(32, 4 * len) (a
    // compile costs some 40-60 ns a word, and native code saves a fraction of a ns a step:
    // shorter runs do not pay for it), then runs again, as native code from the start with the
    // whole budget, each run that reached the cap.
    VMConfig rcfg = cfg;  // the interpreters' limits
#ifdef VG_JIT
    const bool jit_here = jit_on && (uint32_t)p < (uint32_t)n_prog && entry_pc[p] >= 0;  // (jit_on: modes 0 and 6)
    const uint32_t* jcode = jit_here ? code + code_off[p] : nullptr;
    const int32_t jlen = jit_here ? (int32_t)(code_off[p + 1] - code_off[p]) : 0;
    // (after the task's runs: how long they were for the program's size, into the average)
    auto learn = [&]() {
      if (!jit_here) return;
      int64_t total = 0;
      for (int64_t r = r0; r < r1; r++) total += steps[r];
      const float q = std::min((float)total / (float)((r1 - r0) * (int64_t)jlen), JIT_LONG_CAP);
      long_runs[tid] = 0.75f * long_runs[tid] + 0.25f * q;
    };
    auto native = [&]() -> const jit::Ready* {  // the program compiled, or null
      if (!jits[tid]) jits[tid] = jit_pool().take();
      return jits[tid]->get(p, canon[p], shared[p], jcode, jlen, entry_pc[p]);
    };
    auto seen = [&]() {  // whether the program has been compiled in this call
      if (!jits[tid]) jits[tid] = jit_pool().take();
      return jits[tid]->seen(p, canon[p]);
    };
    // mode 6, and small programs in mode 0 (compiled at once): every run as native code
    if (jit_here && (mode == 6 || seen() || (jlen <= JIT_EAGER_WORDS && long_runs[tid] >= JIT_LONG_RUNS && may_loop(jcode, jlen))) &&
        native()) {
      if (!scratch[tid]) scratch[tid] = scratch_pool().take<RunScratch>(scratch_pool().runs, cfg);
      Workspace& ws = scratch[tid]->ws;
      const jit::Ready& cp = *native();
      jit::Ctx ctx;
      jit::prepare(ctx, cp, cfg, ws);
      // the kinds checked as the arguments load (when the row has one per parameter); a run that
      // then ends before its first step is checked in full (bad_input before any other trap)
      const bool inline_kinds = check && want.ok && want.n == func_nparams(jcode[entry_pc[p]]);
      const int32_t nl = func_nlocals(jcode[entry_pc[p]]);
      const bool checked = cp.entry && (int64_t)nl + cp.fmax <= cfg.stack_size && cfg.fuel > 0;  // (for every run)
      for (int64_t r = r0; r < r1; r++) {
        const int32_t j = run_in[r];
        RunResult x;
        x.value = x.steps = 0;
        ws.nlists = 0;
        if ((uint32_t)j >= (uint32_t)n_in || (!inline_kinds && wrong_kinds(r))) {
          x.status = TRAP_BAD_INPUT;
        } else if (checked) {
          x = jit::run_checked(ctx, cp, jcode, jlen, entry_pc[p], in_words + in_off[j],
                               (int32_t)(in_off[j + 1] - in_off[j]), cfg, ws, inline_kinds ? want.row : nullptr);
          if (inline_kinds && x.steps == 0 && x.status != TRAP_OK && wrong_kinds(r)) x.status = TRAP_BAD_INPUT;
        } else {
          x = jit::run(ctx, cp, jcode, jlen, entry_pc[p], in_words + in_off[j], (int32_t)(in_off[j + 1] - in_off[j]),
                       cfg, ws, inline_kinds ? want.row : nullptr);
          if (inline_kinds && x.steps == 0 && x.status != TRAP_OK && wrong_kinds(r)) x.status = TRAP_BAD_INPUT;
        }
        finish_run(x, ws, p, n_prog, ret_kind, j, n_in, exp_words, exp_off, r, status, value, steps, passed, lists[tid],
                   out_off, out_cap);
      }
      learn();
      return;
    }
    if (jit_here && mode == 0 && std::max(32, 4 * jlen) < cfg.fuel) rcfg.fuel = std::max(32, 4 * jlen);
#endif
    // Whether a run of the interpreters reached the cap (it ends out of fuel at the capped budget).
    auto capped = [&](const RunResult& x) {
      return rcfg.fuel < cfg.fuel && x.status == TRAP_OUT_OF_FUEL && x.steps == rcfg.fuel;
    };
    // Such a run again with the whole budget, into ws: native code where the program compiles,
    // else the plain scalar interpreter (the lockstep interpreter's superinstruction tables are
    // filled lazily: they may still hold another program's).
    auto again = [&](int64_t r, Workspace& ws) {
      const int32_t j = run_in[r];
      const uint32_t* pc0 = code + code_off[p];
      const int32_t n = (int32_t)(code_off[p + 1] - code_off[p]);
#ifdef VG_JIT
      if (const jit::Ready* c = jit_here ? native() : nullptr)
        return jit::run(*c, pc0, n, entry_pc[p], in_words + in_off[j], (int32_t)(in_off[j + 1] - in_off[j]), cfg, ws);
#endif
      return run(pc0, n, entry_pc[p], in_words + in_off[j], (int32_t)(in_off[j + 1] - in_off[j]), cfg, ws);
    };
    bool lockstep = r1 - r0 > 1 && (uint32_t)p < (uint32_t)n_prog && entry_pc[p] != -2;
    const int32_t* ins[LANES];
    int32_t lens[LANES];
    uint32_t wrong = 0;  // lockstep: lanes with the wrong kinds (they load no arguments: in_len -1)
    for (int64_t r = r0; lockstep && r < r1; r++) {
      int32_t j = run_in[r];
      lockstep = (uint32_t)j < (uint32_t)n_in;
      if (lockstep) {
        ins[r - r0] = in_words + in_off[j];
        lens[r - r0] = (int32_t)(in_off[j + 1] - in_off[j]);
        if (wrong_kinds(r)) wrong |= 1u << (r - r0), lens[r - r0] = -1;
      }
    }
    const uint32_t* pcode = (uint32_t)p < (uint32_t)n_prog ? code + code_off[p] : nullptr;
    int32_t len = pcode ? (int32_t)(code_off[p + 1] - code_off[p]) : 0;
    Fused* fx = nullptr;
    uint8_t* xop = nullptr;
    uint8_t* target = nullptr;
    if (fused && pcode && entry_pc[p] != -2) {
      // Superinstructions: the lockstep interpreter translates each pc when it first reaches it;
      // runs one by one take the whole translation, kept while the thread's runs stay on p.
      if (!trans[tid]) trans[tid] = new Translation();
      Translation& T = *trans[tid];
      if ((int32_t)T.fx.size() < len) T.fx.resize(len), T.xop.resize(len), T.target.resize(len + 1);
      if (lockstep) {  // run_lanes translates lazily into these
        T.prog = -1;
        fx = T.fx.data();
        xop = T.xop.data();
        target = T.target.data();
      } else {
        if (T.prog != p) T.prog = p, T.steps = 0, T.full = false;
        // A translation costs some 30 ns a word, and saves about 1 ns a step: worth it once the
        // runs of p have shown that they are long for its size.
        if (!T.full && (T.steps >= 16 * (int64_t)len || mode == 4)) {
          fuse_program(pcode, len, T.fx.data(), T.target.data(), T.xop.data());
          T.full = true;
        }
        if (T.full) fx = T.fx.data(), xop = T.xop.data();
      }
    }
    if (lockstep) {
      if (!lane_scratch[tid]) lane_scratch[tid] = scratch_pool().take<LaneScratch>(scratch_pool().lanes, cfg);
      LaneScratch& LS = *lane_scratch[tid];
      LaneState& S = LS.state;
      LaneFast fast = {fx, xop, LS.solo_stack.data(), LS.solo_frames.data(), target, mode == 5 ? 1 : len + 33};
      RunResult res[LANES];
      run_lanes(pcode, len, entry_pc[p], ins, lens, (int32_t)(r1 - r0), rcfg, S, res, fused ? &fast : nullptr);
      for (uint32_t m = wrong; m; m &= m - 1) res[__builtin_ctz(m)] = RunResult{TRAP_BAD_INPUT, 0, 0};
      for (int64_t r = r0; r < r1; r++) {
        if (capped(res[r - r0])) {
          if (!scratch[tid]) scratch[tid] = scratch_pool().take<RunScratch>(scratch_pool().runs, cfg);
          Workspace& ws = scratch[tid]->ws;
          finish_run(again(r, ws), ws, p, n_prog, ret_kind, run_in[r], n_in, exp_words, exp_off, r, status,
                     value, steps, passed, lists[tid], out_off, out_cap);
          continue;
        }
        finish_run(res[r - r0], S.lane[r - r0], p, n_prog, ret_kind, run_in[r], n_in, exp_words, exp_off, r, status,
                   value, steps, passed, lists[tid], out_off, out_cap);
      }
#ifdef VG_JIT
      learn();
#endif
      return;
    }
    if (!scratch[tid]) scratch[tid] = scratch_pool().take<RunScratch>(scratch_pool().runs, cfg);
    Workspace& ws = scratch[tid]->ws;
    for (int64_t r = r0; r < r1; r++) {  // one run, or the runs of a bad program or input
      int32_t j = run_in[r];
      RunResult x;
      x.value = x.steps = 0;
      ws.nlists = 0;
      if ((uint32_t)p >= (uint32_t)n_prog || (uint32_t)j >= (uint32_t)n_in || wrong_kinds(r)) x.status = TRAP_BAD_INPUT;
      else if (entry_pc[p] == -2) x.status = TRAP_BAD_BYTECODE;
      else
        x = run(pcode, len, entry_pc[p], in_words + in_off[j], (int32_t)(in_off[j + 1] - in_off[j]), rcfg, ws, fx, xop);
      if (fused && trans[tid]) trans[tid]->steps += x.steps;
      if (capped(x)) x = again(r, ws);
      finish_run(x, ws, p, n_prog, ret_kind, j, n_in, exp_words, exp_off, r, status, value, steps, passed, lists[tid],
                 out_off, out_cap);
    }
#ifdef VG_JIT
    learn();
#endif
  });
  if (out_list) {  // the tasks' lists in run order (each task's are one piece of its thread's buffer)
    out_off[0] = 0;
    int64_t at = 0;
    for (int64_t t = 0; t < ntasks; t++) {
      const int64_t from = at;
      for (int64_t r = task_start[t]; r < task_start[t + 1]; r++)
        out_off[r + 1] = at += ok ? out_off[r + 1] : 0;  // (not ok: runs may not have set theirs)
      if (at > from)
        std::memcpy(out_list + from, lists[task_src[t].tid]->d.get() + task_src[t].at, sizeof(int32_t) * (size_t)(at - from));
    }
  }
  for (auto* b : lists) list_pool().give(b);
  for (auto* s : scratch) scratch_pool().give(scratch_pool().runs, base_cfg, s);
  for (auto* s : lane_scratch) scratch_pool().give(scratch_pool().lanes, base_cfg, s);
  for (auto* s : trans) delete s;
#ifdef VG_JIT
  for (auto* s : jits) jit_pool().give(s);
#endif
  return ok ? 0 : -1;
}

}  // namespace
