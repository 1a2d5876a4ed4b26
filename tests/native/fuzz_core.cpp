// Native fuzz harness for the compiler and VM headers, built with AddressSanitizer and UBSan by
// tests/test_native_fuzz.py. Every buffer handed to the core (source bytes, tokens, code,
// inputs, and the VM workspace) is a heap allocation of exactly the size the API is told, so
// any read or write past it is a sanitizer report rather than a silent overrun of slack.
//
//   fuzz_core ITERATIONS SEED [MAX_SECONDS]
//
// Each iteration compiles a random or mutated source, runs what compiles, runs random and
// mutated bytecode, and compiles a mutated token array. A violated property prints the input
// and aborts; the summary line on stdout counts what was exercised.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compiler.h"
#include "vm.h"
#if __has_include("lanes.h")  // the lockstep interpreter: checked lane by lane against run()
#include "lanes.h"
#define VG_HAVE_LANES 1
#else
#define VG_HAVE_LANES 0
#endif

using namespace vg;

namespace {

const char* VALID[] = {
    "def gcd(a: int, b: int) -> int:\n    while b != 0:\n        a, b = b, a % b\n    return a\n",
    "def total(xs: list[int]) -> int:\n    s = 0\n    for x in xs:\n        s += x\n    return s\n\n"
    "def f(n: int) -> list[int]:\n    ys = [1, 2, 3] * 2\n    for i in range(n, 0, -1):\n"
    "        ys.append(i // 2 - i % 3)\n    ys += ys\n    ys[0] = total(ys)\n    return ys\n",
    "def fib(n: int) -> int:\n    if n < 2: return n\n    return fib(n - 1) + fib(n - 2)\n",
    "def sign(x: int) -> int:\n    if x > 0:\n        return 1\n    elif x < 0:\n        return -1\n"
    "    return 0\n\ndef g(a: int, b: bool) -> bool:\n    return not b or a >= 3 and a < 10\n",
    "def pop_all(xs: list[int], k: int) -> int:\n    t = 0\n    while len(xs) > 0 and k != 0:\n"
    "        t = max(t, abs(xs.pop()))\n        k -= 1\n    return t if k else -t\n",
    "def h(a: int, b: int, c: int) -> int:\n    x: int = a * b - c\n    ys = []\n"
    "    for i in range(3):\n        ys = ys + [x, i]\n        if i == 1:\n            continue\n"
    "        x //= (i + 1)\n    return min(x, ys[-1]) + ys[len(ys) // 2]\n",
    "def loop(n: int) -> int:\n    while True:\n        n += 1\n        if n > 100:\n            return n\n",
};
const int NVALID = sizeof(VALID) / sizeof(VALID[0]);

const char* FRAGMENTS[] = {
    "def", "return", "if", "elif", "else", "while", "for", "in", "break", "continue", "pass",
    "and", "or", "not", "True", "False", "None", "lambda", "is", "import", "int", "bool",
    "list[int]", "range", "len", "abs", "min", "max", ".append", ".pop", "f", "x", "xs", "(",
    ")", "[", "]", ",", ":", ".", "->", "=", "+=", "//=", "+", "-", "*", "//", "%", "<", "<=",
    "==", "!=", "/", "**", "&", ";", "\\", "'", "#", "0", "1", "2147483647", "2147483648", "00",
    "1.5", " ", "    ", "\n", "\r\n", "\r", "\t", "\n    ", "\n        ", "\x01", "\xc3\xa9",
    "(((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((", "-------------",
    "not not not not not not not not not not not not not not not not not not not not not",
};
const int NFRAG = sizeof(FRAGMENTS) / sizeof(FRAGMENTS[0]);

struct Rng {
  std::mt19937_64 g;
  explicit Rng(uint64_t seed) : g(seed) {}
  uint64_t u64() { return g(); }
  int below(int n) { return n <= 0 ? 0 : (int)(g() % (uint64_t)n); }
  int range(int lo, int hi) { return lo + below(hi - lo + 1); }  // inclusive
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(g) < p; }
};

uint64_t g_seed;
long g_iter;
const char* g_stage = "";

void dump_words(const char* what, const uint32_t* w, int n) {
  fprintf(stderr, "%s (%d words):", what, n);
  for (int i = 0; i < n; i++) fprintf(stderr, " 0x%08x", w[i]);
  fprintf(stderr, "\n");
}

[[noreturn]] void fail(const char* msg) {
  fprintf(stderr, "FUZZ FAILURE (seed %llu, iteration %ld, %s): %s\n", (unsigned long long)g_seed, g_iter,
          g_stage, msg);
  abort();
}

void dump_source(const std::string& s) {
  fprintf(stderr, "source (%zu bytes): \"", s.size());
  for (unsigned char ch : s) {
    if (ch == '\\' || ch == '"') fprintf(stderr, "\\%c", ch);
    else if (ch >= 32 && ch < 127) fputc(ch, stderr);
    else fprintf(stderr, "\\x%02x", ch);
  }
  fprintf(stderr, "\"\n");
}

// Workspace whose arrays are exactly as large as the config says, filled with a pattern so that
// a read of memory the VM never wrote changes the result (checked by running twice).
struct Scratch {
  std::vector<int32_t> stack, heap;
  std::vector<Frame> frames;
  std::vector<ListHdr> lists;
  Workspace ws;
  Scratch(const VMConfig& c, uint8_t fill)
      : stack(c.stack_size), heap(c.heap_size), frames(c.max_depth), lists(c.max_lists) {
    if (!stack.empty()) memset(stack.data(), fill, stack.size() * sizeof(int32_t));
    if (!heap.empty()) memset(heap.data(), fill, heap.size() * sizeof(int32_t));
    if (!frames.empty()) memset((void*)frames.data(), fill, frames.size() * sizeof(Frame));
    if (!lists.empty()) memset((void*)lists.data(), fill, lists.size() * sizeof(ListHdr));
    ws.stack = stack.data();
    ws.heap = heap.data();
    ws.frames = frames.data();
    ws.lists = lists.data();
    ws.nlists = ws.hp = 12345;  // run() must reset them
  }
};

VMConfig random_config(Rng& r) {
  VMConfig c;
  c.fuel = r.range(1, 3000);
  c.max_depth = r.range(0, 12);
  c.heap_size = r.range(0, 128);
  c.max_lists = r.range(0, 12);
  c.stack_size = r.range(1, 128);
  return c;
}

// Encoded input for a signature (kinds), or garbage when `garbage`.
std::vector<int32_t> random_input(Rng& r, const int32_t* kinds, int np, bool garbage) {
  std::vector<int32_t> in;
  if (garbage) {
    int n = r.range(0, 10);
    const int32_t pool[] = {0, 1, 2, 3, -1, 7, 100000, VG_INT32_MAX, VG_INT32_MIN};
    for (int i = 0; i < n; i++) in.push_back(r.chance(0.5) ? pool[r.below(9)] : (int32_t)r.u64());
    return in;
  }
  const int32_t vals[] = {0, 1, -1, 2, 5, -7, 100, VG_INT32_MAX, VG_INT32_MIN, 46341};
  for (int k = 0; k < np; k++) {
    int32_t kind = kinds ? kinds[k] : KIND_INT;
    in.push_back(kind);
    if (kind == KIND_LIST) {
      int n = r.range(0, 6);
      in.push_back(n);
      for (int e = 0; e < n; e++) in.push_back(vals[r.below(10)]);
    } else if (kind == KIND_BOOL) {
      in.push_back(r.below(2));
    } else {
      in.push_back(r.chance(0.7) ? r.range(-10, 10) : vals[r.below(10)]);
    }
  }
  return in;
}

long g_runs, g_lane_runs, g_status[16];

// The list a run returned, if `value` is a list of its workspace (for comparing interpreters).
std::vector<int32_t> list_of(const RunResult& res, const Workspace& ws) {
  if (res.status != TRAP_OK || (uint32_t)res.value >= (uint32_t)ws.nlists) return {};
  const ListHdr& l = ws.lists[res.value];
  return std::vector<int32_t>(ws.heap + l.off, ws.heap + l.off + l.len);
}

void mismatch(const std::vector<uint32_t>& code, const std::vector<int32_t>& in, const char* a, const RunResult& x,
              const char* b, const RunResult& y, const char* msg) {
  dump_words("code", code.data(), (int)code.size());
  dump_words("input", (const uint32_t*)in.data(), (int)in.size());
  fprintf(stderr, "%s: status %d value %d steps %d; %s: status %d value %d steps %d\n", a, x.status, x.value,
          x.steps, b, y.status, y.value, y.steps);
  fail(msg);
}

// Run a validated program on each input, twice on differently filled workspaces (the results
// must agree and make sense), and, where the lockstep interpreter exists, all inputs at once
// through it (every lane must match the scalar run). Returns the set of statuses, 1 << status.
uint32_t run_checked(const std::vector<uint32_t>& code, int32_t entry_pc, const std::vector<std::vector<int32_t>>& ins,
                    const VMConfig& cfg) {
  std::vector<std::unique_ptr<int32_t[]>> bufs;  // exact sizes, unlike a vector's spare room
  std::vector<RunResult> scalar;
  // Superinstructions (fuse.h): the second scalar run and the second lockstep pass take them.
  std::vector<Fused> fx(code.size());
  std::vector<uint8_t> xop(code.size()), target(code.size() + 1);
  fuse_program(code.data(), (int32_t)code.size(), fx.data(), target.data(), xop.data());
  std::vector<std::vector<int32_t>> lists;
  for (const auto& in : ins) {
    bufs.emplace_back(new int32_t[in.size()]);
    if (!in.empty()) memcpy(bufs.back().get(), in.data(), in.size() * sizeof(int32_t));
    Scratch a(cfg, 0x00), b(cfg, 0xA5);
    RunResult ra = run(code.data(), (int32_t)code.size(), entry_pc, bufs.back().get(), (int32_t)in.size(), cfg, a.ws);
    RunResult rb = run(code.data(), (int32_t)code.size(), entry_pc, bufs.back().get(), (int32_t)in.size(), cfg, b.ws,
                       fx.data(), xop.data());
    g_runs++;
    if (ra.status < 0 || ra.status > TRAP_BAD_INPUT) fail("unknown trap code");
    g_status[ra.status]++;
    if (ra.steps < 0 || ra.steps > cfg.fuel) fail("steps outside [0, fuel]");
    if (ra.status != rb.status || ra.value != rb.value || ra.steps != rb.steps || list_of(ra, a.ws) != list_of(rb, b.ws))
      mismatch(code, in, "zeroed workspace", ra, "filled workspace, superinstructions", rb,
               "result depends on the initial workspace contents (reads memory it never wrote) or on superinstructions");
    if (ra.status == TRAP_OK && (a.ws.nlists < 0 || a.ws.nlists > cfg.max_lists || a.ws.hp < 0 ||
                                 a.ws.hp > cfg.heap_size))
      fail("list table or heap pointer out of range after a run");
    scalar.push_back(ra);
    lists.push_back(list_of(ra, a.ws));
  }
#if VG_HAVE_LANES
  // Exactly sized per-lane arrays (the backend packs them into one allocation, where a lane
  // overrunning into its neighbour would go unnoticed). Pass 0 plain, pass 1 with superinstructions
  // and lanes handed over to the scalar interpreter.
  for (int pass = 0; pass < 2; pass++) {
  int32_t n = (int32_t)ins.size(), depth = cfg.max_depth > 0 ? cfg.max_depth : 1;
  std::vector<int32_t> stack((size_t)cfg.stack_size * LANES, (int32_t)0xA5A5A5A5);
  std::vector<Frame> frames((size_t)depth * LANES);
  std::vector<std::vector<int32_t>> heaps(LANES);
  std::vector<std::vector<ListHdr>> tables(LANES);
  std::unique_ptr<LaneState> S(new LaneState);
  memset((void*)S.get(), 0xA5, sizeof(LaneState));
  S->stack = stack.data();
  S->frame_pool = frames.data();
  const int32_t* inp[LANES];
  int32_t lens[LANES];
  for (int32_t l = 0; l < LANES; l++) {
    heaps[l].assign(cfg.heap_size, (int32_t)0xA5A5A5A5);
    tables[l].resize(cfg.max_lists);
    S->lane[l].heap = heaps[l].data();
    S->lane[l].lists = tables[l].data();
    S->lane[l].stack = nullptr;
    S->lane[l].frames = nullptr;
    if (l < n) inp[l] = bufs[l].get(), lens[l] = (int32_t)ins[l].size();
  }
  RunResult out[LANES];
  std::unique_ptr<int32_t[]> solo_stack(new int32_t[cfg.stack_size > 0 ? cfg.stack_size : 1]);
  std::unique_ptr<Frame[]> solo_frames(new Frame[depth]);
  LaneFast fast = {fx.data(), xop.data(), solo_stack.get(), solo_frames.get()};
  run_lanes(code.data(), (int32_t)code.size(), entry_pc, inp, lens, n, cfg, *S, out, pass ? &fast : nullptr);
  g_lane_runs += n;
  for (int32_t l = 0; l < n; l++) {
    const RunResult& x = scalar[l];
    if (x.status != out[l].status || x.value != out[l].value || x.steps != out[l].steps ||
        lists[l] != list_of(out[l], S->lane[l]))
      mismatch(code, ins[l], "run", x, pass ? "run_lanes, superinstructions" : "run_lanes", out[l],
               "the lockstep interpreter disagrees with run()");
  }
  }
#endif
  uint32_t seen = 0;
  for (const RunResult& x : scalar) seen |= 1u << x.status;
  return seen;
}

std::vector<std::vector<int32_t>> random_inputs(Rng& r, const int32_t* kinds, int np, double garbage) {
  int n = r.chance(0.5) ? 1 : r.chance(0.8) ? r.range(2, 8) : r.range(9, 32);
  std::vector<std::vector<int32_t>> ins;
  for (int i = 0; i < n; i++) ins.push_back(random_input(r, kinds, np, r.chance(garbage)));
  return ins;
}

std::string random_source(Rng& r) {
  std::string s;
  int style = r.below(5);  // half of them mutants, which get deepest into the compiler
  if (style == 0) {  // raw bytes
    int n = r.range(0, 200);
    for (int i = 0; i < n; i++) s.push_back((char)(r.chance(0.3) ? r.below(256) : r.range(9, 126)));
  } else if (style == 1) {  // fragment soup
    int n = r.range(0, 60);
    for (int i = 0; i < n; i++) {
      s += FRAGMENTS[r.below(NFRAG)];
      if (r.chance(0.5)) s.push_back(' ');
    }
  } else {  // a valid program, mutated
    s = VALID[r.below(NVALID)];
    int m = r.chance(0.5) ? 1 : r.range(2, 4);
    for (int k = 0; k < m; k++) {
      size_t pos = s.empty() ? 0 : (size_t)r.below((int)s.size() + 1);
      switch (r.below(6)) {
        case 0: s.insert(pos, FRAGMENTS[r.below(NFRAG)]); break;
        case 1: s.erase(pos, (size_t)r.range(1, 8)); break;
        case 2: s.insert(pos, 1, (char)r.range(1, 127)); break;
        case 3: {  // duplicate or move a line
          size_t a = s.rfind('\n', pos), e = s.find('\n', pos);
          a = a == std::string::npos ? 0 : a + 1;
          if (e == std::string::npos) e = s.size();
          std::string line = s.substr(a, e - a) + "\n";
          if (r.chance(0.5)) s.erase(a, e - a + (e < s.size()));
          s.insert(s.empty() ? 0 : (size_t)r.below((int)s.size() + 1), line);
          break;
        }
        case 4: s.insert(pos, std::string((size_t)r.range(1, 4), ' ')); break;
        default: {  // a character of the same class, so that the mutant often still compiles
          if (pos >= s.size()) break;
          const char* ops = "+-*%<>";
          if (s[pos] >= '0' && s[pos] <= '9') s[pos] = (char)r.range('0', '9');
          else if (strchr(ops, s[pos])) s[pos] = ops[r.below(6)];
          else if (s[pos] >= 'a' && s[pos] <= 'z') s[pos] = (char)r.range('a', 'z');
          else s[pos] = (char)r.range(32, 126);
        }
      }
    }
    if (r.chance(0.05)) s.insert((size_t)r.below((int)s.size() + 1), std::string(20 * r.range(1, 5), '('));
  }
  return s;
}

// Compiles through caller-owned, exactly sized buffers; `fill` pre-poisons the Lexer and
// Compiler so that reading a field before writing it changes the outcome.
struct CompileOut {
  int32_t n;
  CompileError err;
  std::vector<uint32_t> code;
  std::vector<Token> toks;
  int32_t ntoks;
  bool lexed;  // the lexer succeeded: toks[0 .. ntoks) are its whole output
  int32_t nfuncs;
  std::vector<std::vector<int32_t>> params;
  std::vector<int32_t> ret;
};

CompileOut compile_exact(const std::string& src, int32_t tok_cap, int32_t code_cap, uint8_t fill) {
  std::unique_ptr<char[]> buf(new char[src.size()]);
  if (!src.empty()) memcpy(buf.get(), src.data(), src.size());
  std::unique_ptr<Lexer> L(new Lexer);
  std::unique_ptr<Compiler> C(new Compiler);
  memset((void*)L.get(), fill, sizeof(Lexer));
  memset((void*)C.get(), fill, sizeof(Compiler));
  CompileOut o;
  o.toks.resize(tok_cap);
  o.code.resize(code_cap);
  o.err.code = -1;
  o.n = compile_source(*L, *C, buf.get(), (int64_t)src.size(), o.toks.data(), tok_cap, o.code.data(), code_cap,
                       &o.err);
  o.ntoks = L->n;
  o.lexed = !L->failed;
  o.nfuncs = o.n >= 0 ? C->nfuncs : 0;
  for (int i = 0; i < o.nfuncs; i++) {
    o.params.emplace_back(C->funcs[i].params, C->funcs[i].params + C->funcs[i].nparams);
    o.ret.push_back(C->funcs[i].ret);
  }
  return o;
}

long g_compiled, g_rejected;

void check_error(const CompileError& e, const std::string& src) {
  if (e.code <= ERR_OK || e.code >= NUM_ERRORS || e.line < 1 || e.col < 1) {
    dump_source(src);
    fprintf(stderr, "error code %d at %d:%d\n", e.code, e.line, e.col);
    fail("malformed compile error");
  }
  int lines = 1;
  for (size_t i = 0; i < src.size(); i++)
    if (src[i] == '\n' || (src[i] == '\r' && !(i + 1 < src.size() && src[i + 1] == '\n'))) lines++;
  if (e.line > lines) {
    dump_source(src);
    fprintf(stderr, "error code %d at %d:%d, source has %d lines\n", e.code, e.line, e.col, lines);
    fail("compile error line past the end of the source");
  }
}

// Compile a source; when it compiles, validate and run every function.
void fuzz_source(Rng& r, const std::string& src, std::vector<std::vector<uint32_t>>* keep, bool small_caps) {
  g_stage = "compile_source";
  int32_t tok_cap = small_caps && r.chance(0.2) ? r.range(1, 64) : MAX_TOKENS;
  int32_t code_cap = small_caps && r.chance(0.2) ? r.range(1, 64) : 4096;
  CompileOut o = compile_exact(src, tok_cap, code_cap, 0x00);
  CompileOut p = compile_exact(src, tok_cap, code_cap, 0xA5);
  if (o.n != p.n || o.err.code != p.err.code || o.err.line != p.err.line || o.err.col != p.err.col ||
      (o.n > 0 && memcmp(o.code.data(), p.code.data(), o.n * sizeof(uint32_t)) != 0)) {
    dump_source(src);
    fail("compile result depends on the initial Lexer/Compiler contents");
  }
  if (o.lexed) {
    // compile_source skips compile_tokens' check of untrusted tokens (the lexer did its part):
    // the same tokens through the checked path must give the same code or the same error.
    g_stage = "compile_tokens of the lexer's output";
    std::unique_ptr<Token[]> tb(new Token[o.ntoks]);
    memcpy(tb.get(), o.toks.data(), o.ntoks * sizeof(Token));
    std::unique_ptr<Compiler> C(new Compiler);
    memset((void*)C.get(), 0x5A, sizeof(Compiler));
    std::vector<uint32_t> tcode(code_cap);
    int32_t n = compile_tokens(*C, tb.get(), o.ntoks, tcode.data(), code_cap);
    const CompileError& e = C->err;
    if (n != o.n || (n < 0 && (e.code != o.err.code || e.line != o.err.line || e.col != o.err.col ||
                               e.arg != o.err.arg)) ||
        (n > 0 && memcmp(tcode.data(), o.code.data(), n * sizeof(uint32_t)) != 0)) {
      dump_source(src);
      fprintf(stderr, "compile_source: %d (error %d at %d:%d), compile_tokens: %d (error %d at %d:%d)\n", o.n,
              o.err.code, o.err.line, o.err.col, n, e.code, e.line, e.col);
      fail("compile_source and compile_tokens of its tokens differ");
    }
    g_stage = "compile_source";
  }
  if (o.n < 0) {
    g_rejected++;
    check_error(o.err, src);
    return;
  }
  g_compiled++;
  if (o.err.code != ERR_OK || o.n > code_cap || o.nfuncs < 1) fail("inconsistent successful compile");
  std::vector<uint32_t> code(o.code.begin(), o.code.begin() + o.n);
  int32_t pc, bad = validate(code.data(), o.n, 0, &pc);
  if (bad >= 0) {
    dump_source(src);
    dump_words("code", code.data(), o.n);
    fail("compiled code fails validation");
  }
  if (keep && keep->size() < 256) keep->push_back(code);
  g_stage = "run compiled";
  for (int f = 0; f < o.nfuncs; f++) {
    validate(code.data(), o.n, f, &pc);
    if (pc < 0) fail("no pc for a compiled function");
    VMConfig cfg = random_config(r);
    uint32_t seen = run_checked(code, pc, random_inputs(r, o.params[f].data(), (int)o.params[f].size(), 0), cfg);
    if (seen & (1u << TRAP_BAD_BYTECODE | 1u << TRAP_BAD_INPUT)) {
      dump_source(src);
      fprintf(stderr, "function %d trapped (statuses 0x%x)\n", f, seen);
      fail("compiled code trapped bad_bytecode/bad_input on well-formed input");
    }
    if (r.chance(0.2)) run_checked(code, pc, random_inputs(r, nullptr, 0, 1), cfg);
  }
  // Token arrays: the lexer's output, mutated, into compile_tokens.
  g_stage = "compile_tokens";
  std::vector<Token> t(o.toks.begin(), o.toks.begin() + o.ntoks);
  int m = r.range(0, 4);
  for (int k = 0; k < m && !t.empty(); k++) {
    int i = r.below((int)t.size());
    switch (r.below(4)) {
      case 0: t[i].kind = r.chance(0.9) ? r.below(NUM_TOKENS) : r.range(-3, 100); break;
      case 1: t[i].value = r.chance(0.5) ? r.range(-2, 300) : (int32_t)r.u64(); break;
      case 2: t.erase(t.begin() + i); break;
      default: t.insert(t.begin() + i, t[i]);
    }
  }
  std::unique_ptr<Token[]> tb(new Token[t.size()]);
  if (!t.empty()) memcpy(tb.get(), t.data(), t.size() * sizeof(Token));
  std::unique_ptr<Compiler> C(new Compiler);
  std::vector<uint32_t> tcode(code_cap);
  int32_t n = compile_tokens(*C, tb.get(), (int32_t)t.size(), tcode.data(), code_cap);
  if (n >= 0) {
    tcode.resize(n);
    bad = validate(tcode.data(), n, 0, &pc);
    if (bad >= 0) fail("code compiled from tokens fails validation");
  } else if (C->err.code <= ERR_OK || C->err.code >= NUM_ERRORS) {
    fail("malformed compile_tokens error");
  }
}

// An argument that usually passes validation for `op` (so that most plausible programs get to
// run and exercise the VM's run-time checks), occasionally anything.
uint32_t plausible_arg(Rng& r, uint32_t op, int n, int nl) {
  if (r.chance(0.03)) return (uint32_t)(r.u64() & ARG_MASK);
  switch (op) {
    case OP_LOAD_CONST: return (uint32_t)(r.chance(0.5) ? r.range(0, 9) : (int32_t)(r.u64() & ARG_MASK));
    case OP_CONST_EXT: return (uint32_t)r.below(256);
    case OP_LOAD_VAR: case OP_STORE_VAR: case OP_FOR_RANGE: case OP_FOR_LIST: return (uint32_t)r.below(nl + 1);
    case OP_REVERSE: case OP_BUILD_LIST: return (uint32_t)r.range(0, 5);
    case OP_JUMP: case OP_JUMP_IF_FALSE: case OP_JUMP_IF_TRUE: case OP_JUMP_IF_FALSE_OR_POP:
    case OP_JUMP_IF_TRUE_OR_POP: return (uint32_t)r.range(1, n);
    case OP_CALL: return 0;
    default: return 0;
  }
}

std::vector<uint32_t> random_code(Rng& r, const std::vector<std::vector<uint32_t>>& compiled) {
  std::vector<uint32_t> w;
  int style = r.below(3);
  if (style == 0 || compiled.empty()) {  // noise, or plausible code
    int n = r.range(0, 24), nl = 0;
    bool plausible = style != 0 || r.chance(0.5);
    for (int i = 0; i < n; i++) {
      if (!plausible) {
        w.push_back((uint32_t)r.u64());
      } else if (i == 0 || r.chance(0.05)) {
        int np = r.range(0, 3);
        nl = np + r.range(0, 4);
        w.push_back(OP_FUNC | (uint32_t)(np | nl << 8) << 8);
      } else {
        uint32_t op = r.chance(0.98) ? (uint32_t)r.range(1, NUM_OPCODES - 1) : (uint32_t)r.below(256);
        if (op == OP_FUNC) op = OP_RETURN;
        w.push_back(op | plausible_arg(r, op, n, nl) << 8);
      }
    }
    return w;
  }
  w = compiled[r.below((int)compiled.size())];
  int m = r.range(1, 3);
  for (int k = 0; k < m; k++) {
    int i = r.below((int)w.size());
    if (r.chance(0.5)) w[i] ^= 1u << r.below(32);
    else w[i] = (uint32_t)r.range(1, NUM_OPCODES - 1) | (uint32_t)r.range(0, 8) << 8;
  }
  return w;
}

void fuzz_bytecode(Rng& r, const std::vector<uint32_t>& w) {
  g_stage = "validate/run bytecode";
  std::unique_ptr<uint32_t[]> buf(new uint32_t[w.size()]);
  if (!w.empty()) memcpy(buf.get(), w.data(), w.size() * sizeof(uint32_t));
  int32_t entry = r.chance(0.8) ? 0 : r.range(-1, 3), pc = -7;
  int32_t bad = validate(buf.get(), (int32_t)w.size(), entry, &pc);
  if (bad < -1 || (bad >= (int32_t)w.size() && !(w.empty() && bad == 0)))  // empty code: 0
    fail("validate returned an index outside the code");
  if (bad >= 0 || (pc < 0 && r.chance(0.9))) return;  // run() is only defined on validated code
  if (pc != -1 && (pc < 0 || pc >= (int32_t)w.size() || (w[pc] & 0xFF) != OP_FUNC))
    fail("validate returned a bad entry pc");
  VMConfig cfg = random_config(r);
  int32_t np = pc >= 0 ? func_nparams(w[pc]) : 0;
  run_checked(w, pc, random_inputs(r, nullptr, np, 0.2), cfg);
}

}  // namespace

int main(int argc, char** argv) {
  long iterations = argc > 1 ? atol(argv[1]) : 1000;
  g_seed = argc > 2 ? strtoull(argv[2], nullptr, 10) : 1;
  double max_seconds = argc > 3 ? atof(argv[3]) : 1e9;
  Rng r(g_seed);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<uint32_t>> compiled;
  g_iter = -1;
  for (int i = 0; i < NVALID; i++) fuzz_source(r, VALID[i], &compiled, false);
  if (compiled.size() != (size_t)NVALID) fail("an embedded valid program does not compile");
  for (g_iter = 0; g_iter < iterations; g_iter++) {
    if ((g_iter & 15) == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > max_seconds)
      break;
    fuzz_source(r, random_source(r), &compiled, true);
    for (int k = 0; k < 4; k++) fuzz_bytecode(r, random_code(r, compiled));
  }
  printf("iterations=%ld compiled=%ld rejected=%ld runs=%ld lane_runs=%ld statuses=", g_iter, g_compiled, g_rejected,
         g_runs, g_lane_runs);
  for (int s = 0; s <= TRAP_BAD_INPUT; s++) printf("%s%ld", s ? "," : "", g_status[s]);
  printf("\n");
  return 0;
}
