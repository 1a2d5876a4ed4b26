// The vramgym compiler: source text -> tokens -> stack bytecode, in one header that compiles
// for the host (g++) and for CUDA (nvcc / NVRTC). No dynamic allocation: every table has a
// fixed bound, and the caller provides the token and code buffers. See docs/language.md.
//
// Two passes over the token array: pass 1 reads every function signature (so calls may go
// forward), pass 2 is a clox-style single-pass parser that type-checks and emits code. Nothing
// recurses: expressions and nested blocks run on explicit bounded stacks in the Compiler, so
// the GPU compile kernels need no call stack beyond their fixed frames.
#pragma once
#include "core_types.h"
#include "opcodes.h"

// The parser is iterative (explicit stacks, no recursion), so the GPU needs no call stack for it;
// keeping its two loops out of line keeps the compile kernels small.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define VG_NOINLINE __noinline__
#define VG_LEX_INLINE __forceinline__
#else
#define VG_NOINLINE
// The lexer's per-token helpers: GCC left lx_emit out of line, a call per token.
#define VG_LEX_INLINE __attribute__((always_inline)) inline
#endif

namespace vg {

struct Token {
  int32_t kind;   // Tok
  int32_t value;  // NAME: name id; INT: the value; RESERVED: keyword index
  int32_t line;   // 1-based
  int32_t col;    // 1-based
};

struct CompileError {
  int32_t code, line, col, arg;
};

// Per-function metadata returned to the host.
// [pc, name_off, name_len, nparams, ret_kind, nlocals, kinds[MAX_PARAMS]]
// (name_off = -1 and name_len = name id when compiling from tokens without source, and for a
// function named like a builtin, append or pop: ids below NUM_BUILTIN_NAMES are not in the source).
constexpr int FUNC_META = 6 + MAX_PARAMS;

// ---------------------------------------------------------------------------------------------
// Lexer

struct NameEntry {
  const char* ptr;
  int32_t len;
};

struct Lexer {
  const char* src;
  int64_t len, pos, line_start;
  int32_t line;
  Token* toks;
  int32_t cap, n;
  int32_t indents[MAX_BLOCK_DEPTH + 2];
  int32_t nindent;
  int32_t depth;  // open brackets: newlines inside them are ignored
  uint64_t square;    // bit d: the bracket open at depth d is '[' (depths below 64)
  int32_t mismatch;   // the first closing bracket that does not match the open one or has none
                      // (a token index), or -1: compile_tokens' check of untrusted tokens, done here
  NameEntry names[MAX_NAMES];
  int32_t nnames;
  int16_t bucket[256];          // hash of a name -> its latest entry (-1: none); chained by next
  int16_t next[MAX_NAMES];
  CompileError err;
  bool failed;
  bool cpython_raises;  // err is one CPython's tokenizer raises too (a bad number literal)
  // The first string token with an escape CPython cannot decode ([0]) and the first with a \N{name}
  // ([1]), -1: none, and their errors at the literal piece: the parser raises them where it meets
  // the token, as CPython's parser does.
  int32_t esc_tok[2];
  CompileError esc[2];
};

VG_HD inline int32_t name_hash(const char* s, int32_t n) {
  return (int32_t)(((uint32_t)n * 31u + (uint8_t)s[0] * 7u + (uint8_t)s[n - 1]) & 255u);
}

VG_HD inline bool vg_streq(const char* a, int32_t alen, const char* b) {
  int32_t i = 0;
  for (; i < alen; i++)
    if (b[i] == 0 || b[i] != a[i]) return false;
  return b[i] == 0;
}

VG_HD inline bool lx_fail(Lexer& L, int32_t code, int64_t at, int32_t arg = 0) {
  if (L.failed) return false;
  L.failed = true;
  if (L.mismatch >= 0 && L.mismatch < L.n) {  // a bad closing bracket before: CPython's tokenizer stopped there
    L.err.code = ERR_INVALID_SYNTAX;
    L.err.line = L.toks[L.mismatch].line;
    L.err.col = L.toks[L.mismatch].col;
    L.err.arg = 0;
    return false;
  }
  L.err.code = code;
  L.err.line = L.line;
  L.err.col = (int32_t)(at - L.line_start) + 1;
  L.err.arg = arg;
  return false;
}

VG_HD VG_LEX_INLINE bool lx_emit(Lexer& L, int32_t kind, int32_t value, int64_t at) {
  if (L.n >= L.cap - 1) return lx_fail(L, ERR_TOO_MANY_TOKENS, at, L.cap);  // keep room for EOF (counted)
  Token& t = L.toks[L.n++];
  t.kind = kind;
  t.value = value;
  t.line = L.line;
  t.col = (int32_t)(at - L.line_start) + 1;
  return true;
}

VG_HD inline bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
VG_HD inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
// is_alpha(c) || is_digit(c) without branches: it runs for every character of every name.
VG_HD VG_LEX_INLINE bool is_name_char(char c) {
  return ((uint32_t)(uint8_t)((c | 0x20) - 'a') < 26u) | ((uint32_t)(uint8_t)(c - '0') < 10u) | (c == '_');
}

// The lexer's scans on the host, 8 bytes at a time: a loop exit per character mispredicts on
// every name or indent of a new length, and that was the lexer's largest cost (session 34). The
// source is ASCII here (lx_check_bytes ran), so every byte is below 0x80 and a byte's
// v + (0x80 - lo) sets its high bit iff v >= lo, with no carry into the next byte.
#if !defined(__CUDA_ARCH__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define VG_LEX_SWAR 1
constexpr uint64_t SWAR_ONES = 0x0101010101010101ull, SWAR_HIGH = 0x8080808080808080ull;
// High bit of each byte of x that is in [lo, hi].
inline uint64_t swar_in(uint64_t x, uint32_t lo, uint32_t hi) {
  return (x + (0x80 - lo) * SWAR_ONES) & ~(x + (0x80 - hi - 1) * SWAR_ONES) & SWAR_HIGH;
}
// From p, the first byte whose high bit `stop` sets for its 8-byte word, or the first p with
// fewer than 8 bytes left (the caller's loop goes on from there). Only for checked sources: a
// byte of 0x80 or more carries into its neighbour.
template <class Stop>
__attribute__((always_inline)) inline int64_t swar_scan(const char* s, int64_t p, int64_t len, Stop stop) {
  for (; p + 8 <= len; p += 8) {
    uint64_t x;
    __builtin_memcpy(&x, s + p, 8);
    const uint64_t m = stop(x);
    if (m) return p + (__builtin_ctzll(m) >> 3);
  }
  return p;
}
#endif

// Where the name that starts at s[at] ends (s[at .. p) are name characters).
VG_HD VG_LEX_INLINE int64_t name_end(const char* s, int64_t at, int64_t len) {
  int64_t p = at;
#ifdef VG_LEX_SWAR
  p = swar_scan(s, p, len, [](uint64_t x) {
    const uint64_t name = swar_in(x | 0x20 * SWAR_ONES, 'a', 'z') | swar_in(x, '0', '9') | swar_in(x, '_', '_');
    return ~name & SWAR_HIGH;
  });
#endif
  while (p < len && is_name_char(s[p])) p++;
  return p;
}

// Where the run of spaces that starts at s[at] ends (tabs and form feeds are the caller's).
VG_HD VG_LEX_INLINE int64_t spaces_end(const char* s, int64_t at, int64_t len) {
  int64_t p = at;
#ifdef VG_LEX_SWAR
  p = swar_scan(s, p, len, [](uint64_t x) { return ~swar_in(x, ' ', ' ') & SWAR_HIGH; });
#endif
  while (p < len && s[p] == ' ') p++;
  return p;
}

// Whether a name's n chars are a string prefix (r, u, b, f, or br, fr either way round, any case; not
// 3.14's t, which CPython 3.10-3.13 read as a name).
VG_HD inline bool string_prefix(const char* s, int32_t n) {
  auto low = [](char ch) { return (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch); };
  char a = low(s[0]), b = n > 1 ? low(s[1]) : 0;
  if (n == 1) return a == 'r' || a == 'u' || a == 'b' || a == 'f';
  if (n != 2) return false;
  if (a == 'r') { a = b; b = 'r'; }
  return b == 'r' && (a == 'b' || a == 'f');
}

// CPython's tokenizer (3.11) on the number literal at s[at] (a digit, or a '.' before one), cut
// down to whether it raises, and where: "invalid decimal literal" (`1_`, `1a`, `1.x`), "leading
// zeros ...", "invalid digit '8' in octal literal". Such an error wins over a syntax error anywhere
// before it, so the lexer needs CPython's verdict. Else *end: where the literal ends (a number may
// run into a keyword, `1if x else 2`). *bad: the character CPython's column names (the one before
// its cursor). A cursor step past the end reads -1 and stays, as CPython's at EOF.
struct PyNumCursor {
  const char* s;
  int64_t len, p;
  VG_HD int next() { return p < len ? (unsigned char)s[p++] : -1; }
  VG_HD void back(int c) { if (c != -1) p--; }
};

VG_HD inline bool py_ident_char(int c) { return is_alpha((char)c) || is_digit((char)c) || c >= 128; }
VG_HD inline bool py_digit(int c) { return c >= '0' && c <= '9'; }
VG_HD inline bool py_base_digit(int c, int base) {
  return base == 16 ? py_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') : c >= '0' && c < '0' + base;
}

// CPython's lookahead(): the next characters spell `rest` and no identifier character follows.
VG_HD inline bool py_lookahead(PyNumCursor& t, const char* rest) {
  int64_t p0 = t.p;
  int32_t i = 0;
  for (; rest[i]; i++)
    if (t.next() != rest[i]) break;
  bool r = !rest[i] && !py_ident_char(t.p < t.len ? (unsigned char)t.s[t.p] : -1);
  t.p = p0;
  return r;
}

// CPython's verify_end_of_number(): a keyword may follow a number (`1if x else 2`, a warning
// only); any other identifier character is an error at the number's last character.
VG_HD inline bool py_end_ok(PyNumCursor& t, int c, int64_t* bad) {
  bool r = false;
  if (c == 'a') r = py_lookahead(t, "nd");
  else if (c == 'e') r = py_lookahead(t, "lse");
  else if (c == 'f') r = py_lookahead(t, "or");
  else if (c == 'o') r = py_lookahead(t, "r");
  else if (c == 'n') r = py_lookahead(t, "ot");
  else if (c == 'i') r = t.p < t.len && (t.s[t.p] == 'f' || t.s[t.p] == 'n' || t.s[t.p] == 's');
  if (r || !py_ident_char(c)) return true;
  t.back(c);
  *bad = t.p - 1;
  return false;
}

// CPython's tok_decimal_tail(): digits with single underscores between them. -2: an error.
VG_HD inline int py_decimal_tail(PyNumCursor& t, int64_t* bad) {
  for (;;) {
    int c;
    do c = t.next(); while (py_digit(c));
    if (c != '_') return c;
    c = t.next();
    if (!py_digit(c)) {
      t.back(c);
      *bad = t.p - 1;
      return -2;
    }
  }
}

// py_end_ok, and where a literal that ends well ends: one past its last character.
VG_HD inline bool py_number_end(PyNumCursor& t, int c, int64_t* bad, int64_t* end) {
  if (!py_end_ok(t, c, bad)) return false;
  *end = c == -1 ? t.p : t.p - 1;
  return true;
}

VG_HD inline bool py_bad_number(const char* s, int64_t len, int64_t at, int64_t* bad, int64_t* end) {
  PyNumCursor t{s, len, at};
  int c = t.next();
  if (c == '.') {
    c = t.next();
    goto fraction;
  }
  if (c == '0') {
    c = t.next();
    if (c == 'x' || c == 'X' || c == 'o' || c == 'O' || c == 'b' || c == 'B') {
      const int base = c == 'x' || c == 'X' ? 16 : c == 'o' || c == 'O' ? 8 : 2;
      c = t.next();
      do {
        if (c == '_') c = t.next();
        if (!py_base_digit(c, base)) {
          if (base != 16 && py_digit(c)) {  // "invalid digit '8' in octal literal": at the digit
            *bad = t.p - 1;
            return true;
          }
          t.back(c);
          *bad = t.p - 1;
          return true;
        }
        do c = t.next(); while (py_base_digit(c, base));
      } while (c == '_');
      if (base != 16 && py_digit(c)) {
        *bad = t.p - 1;
        return true;
      }
      return !py_number_end(t, c, bad, end);
    }
    bool nonzero = false;
    for (;;) {  // zeros, maybe with underscores
      if (c == '_') {
        c = t.next();
        if (!py_digit(c)) {
          t.back(c);
          *bad = t.p - 1;
          return true;
        }
      }
      if (c != '0') break;
      c = t.next();
    }
    if (py_digit(c)) {
      nonzero = true;
      if ((c = py_decimal_tail(t, bad)) == -2) return true;
    }
    if (c == '.') {
      c = t.next();
      goto fraction;
    }
    if (c == 'e' || c == 'E') goto exponent;
    if (c == 'j' || c == 'J') goto imaginary;
    if (nonzero) {  // "leading zeros in decimal integer literals are not permitted": at the first
      *bad = at;
      return true;
    }
    return !py_number_end(t, c, bad, end);
  }
  if ((c = py_decimal_tail(t, bad)) == -2) return true;
  if (c == '.') {
    c = t.next();
  fraction:
    if (py_digit(c) && (c = py_decimal_tail(t, bad)) == -2) return true;
  }
  if (c == 'e' || c == 'E') {
  exponent:
    const int e = c;
    c = t.next();
    if (c == '+' || c == '-') {
      c = t.next();
      if (!py_digit(c)) {
        t.back(c);
        *bad = t.p - 1;
        return true;
      }
    } else if (!py_digit(c)) {
      t.back(c);
      return !py_number_end(t, e, bad, end);
    }
    if ((c = py_decimal_tail(t, bad)) == -2) return true;
  }
  if (c == 'j' || c == 'J') {
  imaginary:
    c = t.next();
  }
  return !py_number_end(t, c, bad, end);
}

// Keywords of the language map to their own tokens; other Python keywords to RESERVED.
// It runs for every identifier: on the GPU a switch on the first letter, on the host a hash.
VG_HD inline int32_t keyword(const char* s, int32_t n, int32_t* reserved_index) {
#if !defined(__CUDA_ARCH__)
  // On the host: the switch below costs a mispredicted indirect jump per name. Instead, a perfect
  // hash of the first, second and last characters and the length names the one keyword a name can
  // be (found by search for these 36; tests/test_keywords.py checks every keyword and near miss).
  struct Kw {
    const char* text;
    int32_t len, tok, reserved;  // reserved: RESERVED's index, or -1 for the language's own token
  };
  static const Kw kws[] = {
      {"False", 5, TOK_FALSE, -1}, {"None", 4, 0, 0}, {"True", 4, TOK_TRUE, -1}, {"and", 3, TOK_AND, -1},
      {"as", 2, 0, 1}, {"assert", 6, 0, 2}, {"async", 5, 0, 3}, {"await", 5, 0, 4}, {"break", 5, TOK_BREAK, -1},
      {"continue", 8, TOK_CONTINUE, -1}, {"class", 5, 0, 5}, {"def", 3, TOK_DEF, -1}, {"del", 3, 0, 6},
      {"elif", 4, TOK_ELIF, -1}, {"else", 4, TOK_ELSE, -1}, {"except", 6, 0, 7}, {"for", 3, TOK_FOR, -1},
      {"finally", 7, 0, 8}, {"from", 4, 0, 9}, {"global", 6, 0, 10}, {"if", 2, TOK_IF, -1}, {"in", 2, TOK_IN, -1},
      {"import", 6, 0, 11}, {"is", 2, 0, 12}, {"lambda", 6, 0, 13}, {"not", 3, TOK_NOT, -1},
      {"nonlocal", 8, 0, 14}, {"or", 2, TOK_OR, -1}, {"pass", 4, TOK_PASS, -1}, {"return", 6, TOK_RETURN, -1},
      {"raise", 5, 0, 15}, {"try", 3, 0, 16}, {"while", 5, TOK_WHILE, -1}, {"with", 4, 0, 17},
      {"yield", 5, 0, 18}, {"__debug__", 9, 0, 19}};
  constexpr int32_t NKW = (int32_t)(sizeof kws / sizeof kws[0]);
  auto hash = [](const char* w, int32_t len) {
    const uint32_t second = len > 1 ? (uint8_t)w[1] : 0u;
    return (int32_t)(((uint8_t)w[0] * 2u + second * 11u + (uint8_t)w[len - 1] * 2u + (uint32_t)len) & 127u);
  };
  struct Slots {
    int8_t at[128];
  };
  static const Slots slots = [&] {
    Slots t;
    for (int32_t h = 0; h < 128; h++) t.at[h] = -1;
    for (int32_t k = 0; k < NKW; k++) t.at[hash(kws[k].text, kws[k].len)] = (int8_t)k;
    return t;
  }();
  if (n < 1) return -1;  // (lex passes n >= 1; the hash reads w[n - 1])
  const int32_t k = slots.at[hash(s, n)];
  if (k < 0 || kws[k].len != n || __builtin_memcmp(kws[k].text, s, (size_t)n) != 0) return -1;
  if (kws[k].reserved < 0) return kws[k].tok;
  *reserved_index = kws[k].reserved;
  return TOK_RESERVED;
#endif
  if (n < 2 || n > 9) return -1;
// The length first (sizeof a literal counts its NUL): most identifiers fail there.
#define VG_KW(text, tok) if (n == (int32_t)sizeof(text) - 1 && vg_streq(s, n, text)) return tok
#define VG_RK(text, idx) \
  if (n == (int32_t)sizeof(text) - 1 && vg_streq(s, n, text)) { *reserved_index = idx; return TOK_RESERVED; }
  switch (s[0]) {
    case 'F': VG_KW("False", TOK_FALSE); break;
    case 'N': VG_RK("None", 0); break;
    case 'T': VG_KW("True", TOK_TRUE); break;
    case 'a': VG_KW("and", TOK_AND); VG_RK("as", 1); VG_RK("assert", 2); VG_RK("async", 3); VG_RK("await", 4); break;
    case 'b': VG_KW("break", TOK_BREAK); break;
    case 'c': VG_KW("continue", TOK_CONTINUE); VG_RK("class", 5); break;
    case 'd': VG_KW("def", TOK_DEF); VG_RK("del", 6); break;
    case 'e': VG_KW("elif", TOK_ELIF); VG_KW("else", TOK_ELSE); VG_RK("except", 7); break;
    case 'f': VG_KW("for", TOK_FOR); VG_RK("finally", 8); VG_RK("from", 9); break;
    case 'g': VG_RK("global", 10); break;
    case 'i': VG_KW("if", TOK_IF); VG_KW("in", TOK_IN); VG_RK("import", 11); VG_RK("is", 12); break;
    case 'l': VG_RK("lambda", 13); break;
    case 'n': VG_KW("not", TOK_NOT); VG_RK("nonlocal", 14); break;
    case 'o': VG_KW("or", TOK_OR); break;
    case 'p': VG_KW("pass", TOK_PASS); break;
    case 'r': VG_KW("return", TOK_RETURN); VG_RK("raise", 15); break;
    case 't': VG_RK("try", 16); break;
    case 'w': VG_KW("while", TOK_WHILE); VG_RK("with", 17); break;
    case 'y': VG_RK("yield", 18); break;
    case '_': VG_RK("__debug__", 19); break;
    default: break;
  }
#undef VG_KW
#undef VG_RK
  return -1;
}

// `__builtins__` has the last name id in every program, so that token input (names without
// their text) knows it too: a module-level function of that name replaces CPython's builtins.
constexpr int32_t BUILTINS_NAME = MAX_NAMES - 1;

VG_HD inline void lx_init_names_slow(Lexer& L) {
  const char* b[NUM_BUILTIN_NAMES + 1] = {VG_BUILTIN_NAMES};
  b[NUM_BUILTIN_NAMES] = "__builtins__";
  for (int i = 0; i < 256; i++) L.bucket[i] = -1;
  for (int k = 0; k <= NUM_BUILTIN_NAMES; k++) {
    int32_t i = k < NUM_BUILTIN_NAMES ? k : BUILTINS_NAME;
    int32_t n = 0;
    while (b[k][n]) n++;
    L.names[i].ptr = b[k];
    L.names[i].len = n;
    int32_t h = name_hash(b[k], n);
    L.next[i] = L.bucket[h];
    L.bucket[h] = (int16_t)i;
  }
  L.nnames = NUM_BUILTIN_NAMES;
}

// The builtin names in a fresh table, once per compile. The host copies them from a table made
// once (their lengths and hashes cost more than the copy): the builtin entries and the buckets,
// the only parts a compile changes or reads of it.
VG_HD inline void lx_init_names(Lexer& L) {
#if !defined(__CUDA_ARCH__)
  static const Lexer& fresh = [] () -> const Lexer& {
    static Lexer t;  // (static: a Lexer is large for a stack)
    lx_init_names_slow(t);
    return t;
  }();
  for (int32_t k = 0; k <= NUM_BUILTIN_NAMES; k++) {
    const int32_t i = k < NUM_BUILTIN_NAMES ? k : BUILTINS_NAME;
    L.names[i] = fresh.names[i];
    L.next[i] = fresh.next[i];
  }
  __builtin_memcpy(L.bucket, fresh.bucket, sizeof L.bucket);
  L.nnames = NUM_BUILTIN_NAMES;
#else
  lx_init_names_slow(L);
#endif
}

// The id of a name already in L's table, or -1.
VG_HD inline int32_t lx_find(const Lexer& L, const char* s, int32_t n) {
  for (int32_t i = L.bucket[name_hash(s, n)]; i >= 0; i = L.next[i]) {
    if (L.names[i].len != n) continue;
#if !defined(__CUDA_ARCH__)
    if (__builtin_memcmp(L.names[i].ptr, s, (size_t)n) == 0) return i;  // (no loop exit to mispredict)
#else
    int32_t k = 0;
    while (k < n && L.names[i].ptr[k] == s[k]) k++;
    if (k == n) return i;
#endif
  }
  return -1;
}

VG_HD inline int32_t lx_intern(Lexer& L, const char* s, int32_t n, int64_t at) {
  int32_t found = lx_find(L, s, n);
  if (found >= 0) return found;
  int32_t h = name_hash(s, n);
  if (L.nnames >= BUILTINS_NAME) {
    lx_fail(L, ERR_TOO_MANY_NAMES, at, MAX_NAMES);
    return -1;
  }
  L.names[L.nnames].ptr = s;
  L.names[L.nnames].len = n;
  L.next[L.nnames] = L.bucket[h];
  L.bucket[h] = (int16_t)L.nnames;
  return L.nnames++;
}

// Consume one line break at L.pos (\n, \r\n or \r).
VG_HD inline void lx_newline(Lexer& L) {
  if (L.src[L.pos] == '\r' && L.pos + 1 < L.len && L.src[L.pos + 1] == '\n') L.pos++;
  L.pos++;
  L.line++;
  L.line_start = L.pos;
}

VG_HD inline int32_t hex_digit(char ch) {
  return is_digit(ch) ? ch - '0' : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'f' ? (ch | 0x20) - 'a' + 10 : -1;
}

// The escapes of a literal's text [p, end) that CPython refuses the program for when it decodes
// them: ERR_BAD_ESCAPE for \x without 2 hex digits (bytes too) and, in str, \u without 4, \U
// without 8 or past U+10FFFF, \N without {name}. ERR_NAMED_ESCAPE for a well-formed \N{name}:
// its name needs Unicode's name table, so it is refused as unsupported. 0 when all decode.
VG_HD inline int32_t escape_error(const char* s, int64_t p, int64_t end, bool bytes) {
  bool named = false;
  for (; p < end; p++) {
    if (s[p] != '\\' || ++p >= end) continue;
    const char e = s[p];
    const int32_t digits = e == 'x' ? 2 : bytes ? 0 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits > 0) {
      uint32_t v = 0;
      for (int32_t k = 1; k <= digits; k++) {
        int32_t d = p + k < end ? hex_digit(s[p + k]) : -1;
        if (d < 0) return ERR_BAD_ESCAPE;
        v = v * 16 + (uint32_t)d;
      }
      if (v > 0x10FFFF) return ERR_BAD_ESCAPE;
      p += digits;
    } else if (e == 'N' && !bytes) {
      int64_t k = p + 2;
      bool name_chars = true;  // every Unicode name and alias is made of letters, digits, ' ' and '-'
      for (; k < end && s[k] != '}'; k++) name_chars &= (is_alpha(s[k]) && s[k] != '_') || is_digit(s[k]) || s[k] == ' ' || s[k] == '-';
      if (p + 1 >= end || s[p + 1] != '{' || k >= end || k == p + 2 || !name_chars) return ERR_BAD_ESCAPE;  // \N{} too
      named = true;
      p = k;
    }
  }
  return named ? ERR_NAMED_ESCAPE : 0;
}

// The string literal that starts at `at` (its prefix; the opening quote at q): one STRING token, joined with a string right before it (CPython's parser joins adjacent literals).
// flags: STRING's value bits. An unterminated literal is CPython's tokenizer error, at its start.
VG_HD inline bool lx_string(Lexer& L, int64_t at, int64_t q, int32_t flags) {
  const char* s = L.src;
  const char qc = s[q];
  const bool triple = q + 2 < L.len && s[q + 1] == qc && s[q + 2] == qc;
  const int64_t body = q + (triple ? 3 : 1);
  int64_t p = body, ls = L.line_start;
  int32_t line = L.line;
  for (;;) {
    if (p >= L.len) break;
    char ch = s[p];
    if (ch == '\\') {
      if (++p >= L.len) break;
      ch = s[p];
      if (ch != '\n' && ch != '\r') {
        p++;
        continue;
      }
      // an escaped line break continues any literal: counted below
    } else if (ch == qc && (!triple || (p + 2 < L.len && s[p + 1] == qc && s[p + 2] == qc))) {
      const int64_t body_end = p;
      p += triple ? 3 : 1;
      if (L.n > 0 && L.toks[L.n - 1].kind == TOK_STRING) {  // 'a' 'b'
        Token& t = L.toks[L.n - 1];
        if ((t.value ^ flags) & 2) t.value |= 4;
        t.value |= flags & 1;
      } else if (!lx_emit(L, TOK_STRING, flags, at)) {
        return false;
      }
      bool raw = false;
      for (int64_t k = at; k < q; k++) raw |= (s[k] | 0x20) == 'r';
      // (an f-string is refused wherever it stands: its escapes are not looked at)
      const int32_t bad = !raw && !(flags & 1) && (L.esc_tok[0] < 0 || L.esc_tok[1] < 0) ? escape_error(s, body, body_end, flags & 2) : 0;
      const int32_t k = bad == ERR_BAD_ESCAPE ? 0 : 1;
      if (bad && L.esc_tok[k] < 0) {
        L.esc_tok[k] = L.n - 1;
        L.esc[k].code = bad;
        L.esc[k].line = L.line;  // (CPython 3.12's place: this piece's start)
        L.esc[k].col = (int32_t)(at - L.line_start) + 1;
        L.esc[k].arg = 0;
      }
      L.pos = p;
      L.line = line;
      L.line_start = ls;
      return true;
    } else if (ch != '\n' && ch != '\r') {
      p++;
      continue;
    } else if (!triple) {
      break;
    }
    if (ch == '\r' && p + 1 < L.len && s[p + 1] == '\n') p++;
    line++;
    ls = ++p;
  }
  L.cpython_raises = true;
  return lx_fail(L, ERR_UNTERMINATED_STRING, at);
}

// Tokenize the whole source into L.toks (terminated by EOF). Returns false on error (L.err).
VG_HD inline bool lex(Lexer& L) {
  const char* s = L.src;
  bool line_start = true;  // at the start of a logical line (outside brackets)
  while (!L.failed) {
    if (line_start && L.depth == 0) {
      int64_t p = spaces_end(s, L.pos, L.len);
      int64_t tab_at = -1;
      while (p < L.len && (s[p] == ' ' || s[p] == '\t' || s[p] == '\f')) {
        if (s[p] != ' ' && tab_at < 0) tab_at = p;
        p++;
      }
      if (p >= L.len) {
        L.pos = p;
        break;
      }
      if (s[p] == '#') {  // comment-only line: no tokens, no indentation
        while (p < L.len && s[p] != '\n' && s[p] != '\r') p++;
        L.pos = p;
        if (p < L.len) lx_newline(L);
        continue;
      }
      if (s[p] == '\n' || s[p] == '\r') {  // blank line
        L.pos = p;
        lx_newline(L);
        continue;
      }
      // A backslash continuation (refused below, where it ends a line) may start one: CPython joins
      // the lines before it measures an indent, so its error comes before any indentation's.
      if (s[p] == '\\') return lx_fail(L, ERR_UNSUPPORTED, p);
      if (tab_at >= 0) return lx_fail(L, ERR_TAB_INDENT, tab_at);
      int32_t ind = (int32_t)(p - L.pos);
      if (ind > L.indents[L.nindent - 1]) {
        if (L.nindent >= MAX_BLOCK_DEPTH + 1) return lx_fail(L, ERR_TOO_DEEP, p, MAX_BLOCK_DEPTH);
        L.indents[L.nindent++] = ind;
        if (!lx_emit(L, TOK_INDENT, 0, p)) return false;
      } else {
        while (ind < L.indents[L.nindent - 1]) {
          L.nindent--;
          if (!lx_emit(L, TOK_DEDENT, 0, p)) return false;
        }
        if (ind != L.indents[L.nindent - 1]) {  // CPython: at the end of the line
          while (p < L.len && s[p] != '\n' && s[p] != '\r') p++;
          return lx_fail(L, ERR_BAD_DEDENT, p);
        }
      }
      L.pos = p;
      line_start = false;
    }
    // One space between tokens or none, half and half: skipped without a branch on which.
    if (L.pos < L.len) L.pos += s[L.pos] == ' ';
    while (L.pos < L.len && (s[L.pos] == ' ' || s[L.pos] == '\t' || s[L.pos] == '\f')) L.pos++;
    if (L.pos >= L.len) break;
    int64_t at = L.pos;
    char c = s[at];
    if (c == '#') {
      while (L.pos < L.len && s[L.pos] != '\n' && s[L.pos] != '\r') L.pos++;
      if (L.depth == 0) {  // the line's NEWLINE where its comment starts, as CPython places it
        if (!lx_emit(L, TOK_NEWLINE, 0, at)) return false;
        line_start = true;
        if (L.pos < L.len) lx_newline(L);
      }
      continue;
    }
    if (c == '\n' || c == '\r') {
      if (L.depth == 0) {
        if (!lx_emit(L, TOK_NEWLINE, 0, at)) return false;
        line_start = true;
      }
      lx_newline(L);
      continue;
    }
    if (is_alpha(c)) {
      const int64_t p = name_end(s, at, L.len);
      int32_t n = (int32_t)(p - at);
      // b"..", f"..": the string starts at its prefix; after another name it starts at the quote
      if (p < L.len && (s[p] == '\'' || s[p] == '"') && string_prefix(s + at, n)) {
        int32_t flags = 0;
        for (int64_t k = at; k < p; k++) {
          char ch = (char)(s[k] | 0x20);
          if (ch == 'f') flags |= 1;  // it evaluates expressions: never dropped
          if (ch == 'b') flags |= 2;
        }
        if (!lx_string(L, at, p, flags)) return false;
        continue;
      }
      if (n > MAX_NAME_LEN) return lx_fail(L, ERR_NAME_TOO_LONG, at, MAX_NAME_LEN);
      int32_t ri = 0;
      int32_t kw = keyword(s + at, n, &ri);
      bool ok;
      if (kw == TOK_RESERVED) ok = lx_emit(L, TOK_RESERVED, ri, at);
      else if (kw >= 0) ok = lx_emit(L, kw, 0, at);
      else {
        int32_t id = lx_intern(L, s + at, n, at);
        ok = id >= 0 && lx_emit(L, TOK_NAME, id, at);
      }
      if (!ok) return false;
      L.pos = p;
      continue;
    }
    char d = at + 1 < L.len ? s[at + 1] : 0;  // the operators' next characters (not read for names)
    if (is_digit(c) || (c == '.' && is_digit(d))) {
      int64_t bad = at, end = at;
      if (py_bad_number(s, L.len, at, &bad, &end)) {  // CPython's error, at its column (`1_`, `1.x`, `09`)
        L.cpython_raises = true;
        return lx_fail(L, ERR_BAD_NUMBER, bad);
      }
      // A literal CPython takes, [at, end): an int (decimal, 0x, 0o or 0b, with underscores), else a
      // float or an imaginary number.
      int32_t base = 10, refused = ERR_OK;
      int64_t p = at, v = 0;
      char b = end - at > 1 ? (char)(s[at + 1] | 0x20) : 0;
      if (c == '0' && (b == 'x' || b == 'o' || b == 'b')) base = b == 'x' ? 16 : b == 'o' ? 8 : 2, p += 2;
      for (; p < end; p++) {
        char ch = s[p];
        if (ch == '_') continue;
        int32_t dv = is_digit(ch) ? ch - '0' : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'f' ? (ch | 0x20) - 'a' + 10 : 99;
        if (dv >= base) {  // '.', an exponent or 'j' (py_bad_number checked the digits)
          refused = ERR_FLOAT;
          break;
        }
        if (v <= VG_INT32_MAX) v = v * base + dv;
      }
      if (refused == ERR_OK && v > VG_INT32_MAX) refused = ERR_INT_TOO_LARGE;
      if (!lx_emit(L, refused != ERR_OK ? TOK_OPAQUE : TOK_INT, refused != ERR_OK ? refused : (int32_t)v, at)) return false;
      L.pos = end;
      continue;
    }
    char e = at + 2 < L.len ? s[at + 2] : 0;
    int32_t tok = -1, width = 1;
    switch (c) {
      case '(': case '[':
        if (L.depth < 64) L.square = (L.square & ~(1ull << L.depth)) | (uint64_t)(c == '[') << L.depth;
        if (++L.depth > MAX_EXPR_DEPTH) return lx_fail(L, ERR_TOO_DEEP, at, MAX_EXPR_DEPTH);
        tok = c == '(' ? TOK_LPAREN : TOK_LBRACKET;
        break;
      case ')': case ']':
        if (L.depth > 0) {
          L.depth--;
          if (L.mismatch < 0 && L.depth < 64 && ((L.square >> L.depth) & 1) != (uint64_t)(c == ']')) L.mismatch = L.n;
        } else if (L.mismatch < 0) {
          L.mismatch = L.n;  // CPython's tokenizer: "unmatched ')'"
        }
        tok = c == ')' ? TOK_RPAREN : TOK_RBRACKET;
        break;
      case ',': tok = TOK_COMMA; break;
      case ':':
        if (d == '=') return lx_fail(L, ERR_UNSUPPORTED_OPERATOR, at);
        tok = TOK_COLON;
        break;
      case '.':
        if (d == '.') return lx_fail(L, ERR_UNSUPPORTED, at);
        tok = TOK_DOT;
        break;
      case '=': if (d == '=') { tok = TOK_EQ; width = 2; } else tok = TOK_ASSIGN; break;
      case '!':
        if (d != '=') return lx_fail(L, ERR_UNEXPECTED_CHAR, at);
        tok = TOK_NE; width = 2;
        break;
      case '<':
        if (d == '<') return lx_fail(L, ERR_UNSUPPORTED_OPERATOR, at);
        if (d == '=') { tok = TOK_LE; width = 2; } else tok = TOK_LT;
        break;
      case '>':
        if (d == '>') return lx_fail(L, ERR_UNSUPPORTED_OPERATOR, at);
        if (d == '=') { tok = TOK_GE; width = 2; } else tok = TOK_GT;
        break;
      case '+': if (d == '=') { tok = TOK_PLUS_ASSIGN; width = 2; } else tok = TOK_PLUS; break;
      case '-':
        if (d == '=') { tok = TOK_MINUS_ASSIGN; width = 2; }
        else if (d == '>') { tok = TOK_ARROW; width = 2; }
        else tok = TOK_MINUS;
        break;
      case '*':
        if (d == '*') return lx_fail(L, ERR_UNSUPPORTED_OPERATOR, at);
        if (d == '=') { tok = TOK_STAR_ASSIGN; width = 2; } else tok = TOK_STAR;
        break;
      case '/':
        if (d != '/') return lx_fail(L, ERR_TRUE_DIVISION, at);
        if (e == '=') { tok = TOK_SLASHSLASH_ASSIGN; width = 3; } else { tok = TOK_SLASHSLASH; width = 2; }
        break;
      case '%': if (d == '=') { tok = TOK_PERCENT_ASSIGN; width = 2; } else tok = TOK_PERCENT; break;
      case '\'': case '"':
        if (!lx_string(L, at, at, 0)) return false;
        continue;
      case '&': case '|': case '^': case '~': case '@': return lx_fail(L, ERR_UNSUPPORTED_OPERATOR, at);
      case ';': case '{': case '}': case '\\': return lx_fail(L, ERR_UNSUPPORTED, at);
      case 0: return lx_fail(L, ERR_NUL_BYTE, at);
      default:
        if ((unsigned char)c >= 0x80) return lx_fail(L, ERR_NON_ASCII, at);
        return lx_fail(L, ERR_UNEXPECTED_CHAR, at);
    }
    if (!lx_emit(L, tok, 0, at)) return false;
    L.pos = at + width;
  }
  if (L.failed) return false;
  int64_t at = L.pos;
  if (line_start && at == L.len && at > 0 && (s[at - 1] == '\r' || (s[at - 1] == '\n' && !(at > 1 && s[at - 2] == '\r')))) {
    // CPython reports an error at the end of a file that ends in \n or \r (not \r\n) on that
    // last line break (`if x:\n` at EOF: "expected an indented block" at the colon's line)
    at = L.len - 1;
    L.line--;
    L.line_start = at;
    while (L.line_start > 0 && s[L.line_start - 1] != '\n' && s[L.line_start - 1] != '\r') L.line_start--;
  }
  if (!line_start && !lx_emit(L, TOK_NEWLINE, 0, at)) return false;
  while (L.nindent > 1) {
    L.nindent--;
    if (!lx_emit(L, TOK_DEDENT, 0, at)) return false;
  }
  Token& t = L.toks[L.n++];  // lx_emit always leaves room for EOF
  t.kind = TOK_EOF;
  t.value = 0;
  t.line = L.line;
  t.col = (int32_t)(at - L.line_start) + 1;
  return true;
}

// Scan a source for NUL and non-ASCII bytes up front: CPython rejects NUL anywhere, and a
// comment may otherwise hide them from the lexer.
VG_HD inline bool lx_check_bytes(Lexer& L) {
  // First a branch-free pass that the host compiler vectorizes: c - 1 wraps 0 to 0xFF, so one
  // compare finds both NUL and 0x80..0xFF. Only a source that has one is scanned again.
  const unsigned char* u = (const unsigned char*)L.src;
  uint32_t any = 0;
  for (int64_t i = 0; i < L.len; i++) any |= (uint8_t)(u[i] - 1u) > 0x7Eu;
  if (!any) return true;
  for (int64_t i = 0; i < L.len; i++) {
    unsigned char c = (unsigned char)L.src[i];
    if (c == 0 || c >= 0x80) {
      int32_t line = 1;
      int64_t ls = 0;
      for (int64_t k = 0; k < i; k++) {
        if (L.src[k] == '\n' || (L.src[k] == '\r' && !(k + 1 < L.len && L.src[k + 1] == '\n'))) {
          line++;
          ls = k + 1;
        }
      }
      L.line = line;
      L.line_start = ls;
      return lx_fail(L, c == 0 ? ERR_NUL_BYTE : ERR_NON_ASCII, i);
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Parser and code generator

constexpr int32_t NO_CHAIN = (int32_t)ARG_MASK;  // end of a patch chain threaded through code

struct Local {
  int32_t name;  // name id; -1 for hidden loop slots
  int8_t kind;
  int8_t depth;
};

struct FuncSig {
  int32_t name, def_tok, body_tok, pc, chain;
  int32_t nparams, ret, nlocals;
  int32_t params[MAX_PARAMS];
  int32_t param_names[MAX_PARAMS];
};

struct LoopCtx {
  int32_t cont, brk_chain;
  bool has_break;
};

// A pending level of the expression parser (parse_expr): a = chain of jumps, start or pc,
// b = operator or bracket token, d = a token or pc, k = kind of the left operand, n = arguments.
struct PFrame {
  int32_t a, b, d;
  uint8_t type, phase;
  int8_t k;
  uint8_t n;
};
// Every `expr`, `not` and unary sign takes one of MAX_EXPR_DEPTH levels; an `expr` holds at most
// 8 frames (itself, or, and, comparison, sum, term, primary, a bracket or argument list), the
// others one each, and an assignment target's primary 2 more.
constexpr int32_t MAX_PFRAMES = 8 * MAX_EXPR_DEPTH + 8;

// An open block or compound statement of `block`: a, b = jumps and pcs; the flags as named.
struct SFrame {
  int32_t a, b;
  int32_t elifs;  // SF_IF: the elif clauses so far (each nests the rest of the statement in CPython)
  uint8_t type, phase;
  bool ends, all, has_else, forever;
};
constexpr int32_t MAX_SFRAMES = 2 * MAX_BLOCK_DEPTH + 2;

struct Compiler {
  const Token* t;
  int32_t nt, p;
  uint32_t* code;
  int32_t cap, n;
  FuncSig funcs[MAX_FUNCS];
  int32_t nfuncs;
  Local locals[MAX_LOCALS];
  int32_t nlive, max_slots, scope;
  LoopCtx loops[MAX_BLOCK_DEPTH + 1];
  int32_t nloops;
  int32_t depth, blocks;
  int32_t elifs, ops;  // MAX_NESTING's count: elif clauses of the open if statements, and the
                       // binary operators of the expression being parsed
  int32_t cur;  // function being compiled
  PFrame frames[MAX_PFRAMES];  // the expression parser's stack
  SFrame sframes[MAX_SFRAMES];  // the statement parser's stack
  CompileError err;
  int32_t err_tok;  // the index of the token err is at: the post passes compare tokens, not places
  bool failed;
  int32_t esc_tok[2];  // the Lexer's strings with a bad escape and with a \N{name} (-1: none)
  CompileError esc[2];
  int32_t named_at;  // that \N{name} string when it stands between functions (-1: not met there)
  // The bracket stacks of the post passes (adjacent_operands, then never_closed): here, in the
  // GPU's global scratch, not in the compile kernels' stack frame, which must stay within the
  // driver's default 1 KB per thread (tests/test_cuda_backend.py)
  int32_t scan_elem[MAX_EXPR_DEPTH], scan_open[MAX_EXPR_DEPTH];
  uint8_t scan_params[MAX_EXPR_DEPTH];
};

VG_HD inline const Token& tk(Compiler& c) { return c.t[c.p]; }
VG_HD inline int32_t kind_at(Compiler& c, int32_t i) { return i < c.nt ? c.t[i].kind : TOK_EOF; }
VG_HD inline bool check(Compiler& c, int32_t k) { return c.t[c.p].kind == k; }
VG_HD inline void advance(Compiler& c) {
  if (c.p < c.nt - 1) c.p++;
}
VG_HD inline bool operand_start(int32_t k) {
  return k == TOK_NAME || k == TOK_INT || k == TOK_TRUE || k == TOK_FALSE || k == TOK_STRING || k == TOK_OPAQUE;
}
VG_HD inline bool operand_end(int32_t k) { return operand_start(k) || k == TOK_RPAREN || k == TOK_RBRACKET; }

VG_HD inline bool binary_or_prefix_op(int32_t k) {
  return (k >= TOK_PLUS && k <= TOK_NE) || k == TOK_AND || k == TOK_OR || k == TOK_NOT || k == TOK_IN;
}

// Errors only a program that parses can have (names, types, calls, returns, loops): CPython
// reports every syntax error in the file before them. (Not expected_type, expected_def or
// unsupported: `def f(a:, b: int)` and `else return` are syntax errors to CPython too.)
VG_HD inline bool after_parse_error(int32_t code) {
  return (code >= ERR_DUPLICATE_FUNCTION && code <= ERR_FUNCTION_NAME) ||
         (code >= ERR_UNDEFINED_NAME && code <= ERR_CONTINUE_OUTSIDE_LOOP) || code == ERR_TUPLE_MISMATCH ||
         code == ERR_TUPLE_VALUE || code == ERR_NONE_VALUE || code == ERR_UNKNOWN_METHOD || code == ERR_RANGE_OUTSIDE_FOR ||
         code == ERR_BARE_RETURN || code == ERR_STRING || code == ERR_FLOAT || code == ERR_INT_TOO_LARGE ||
         code == ERR_NAMED_ESCAPE || code == ERR_COMPREHENSION || code == ERR_SLICE;
}

// The first `for` from token i to the end of its logical line, or -1. A `for` that does not start
// a statement is a comprehension's or a generator expression's.
VG_HD inline int32_t comprehension_for(const Compiler& c, int32_t i) {
  for (; i < c.nt && c.t[i].kind != TOK_NEWLINE && c.t[i].kind != TOK_EOF; i++)
    if (c.t[i].kind == TOK_FOR) return i;
  return -1;
}

// Out of line on the device: the cold error path, inlined at ~150 call sites (every emit), was
// a third of the compile kernel's build time.
VG_HD VG_NOINLINE inline bool fail_at(Compiler& c, int32_t code, const Token& at_tok, int32_t arg = 0) {
  if (!c.failed) {
    int64_t k = &at_tok - c.t;  // (every token the parser blames is one of c.t)
    if (k < 0 || k >= c.nt) k = c.nt - 1;
    // A name or type error in a comprehension (`[y for y in xs]`: y is its own) is the
    // comprehension's: refused at its `for`, not blamed on what it would have defined.
    int32_t f = after_parse_error(code) && code != ERR_COMPREHENSION ? comprehension_for(c, (int32_t)k) : -1;
    if (f >= 0) {
      code = ERR_COMPREHENSION;
      k = f;
      arg = 0;
    }
    const Token& at = f >= 0 ? c.t[f] : at_tok;
    c.failed = true;
    c.err.code = code;
    c.err.line = at.line;
    c.err.col = at.col;
    // CPython puts an unexpected indent on the indentation's last column, not the first token's
    if (code == ERR_UNEXPECTED_INDENT && at.kind == TOK_INDENT && at.col > 1) c.err.col = at.col - 1;
    c.err.arg = arg;
    c.err_tok = (int32_t)k;
  }
  return false;
}
VG_HD inline bool fail(Compiler& c, int32_t code, int32_t arg = 0) { return fail_at(c, code, tk(c), arg); }
// At a string token: its escape error, if the Lexer found one in it (at that literal's place).
// named: also a \N{name} (where the string itself is not refused as a value). A bad escape wins:
// CPython may know the name and go on to it.
VG_HD inline bool bad_escape(Compiler& c, bool named) {
  const int32_t k = c.p == c.esc_tok[0] ? 0 : named && c.p == c.esc_tok[1] ? 1 : -1;
  if (k < 0 || c.failed) return false;
  fail(c, c.esc[k].code);
  c.err.line = c.esc[k].line;
  c.err.col = c.esc[k].col;
  return true;
}
VG_HD inline bool match(Compiler& c, int32_t k) {
  if (!check(c, k)) return false;
  advance(c);
  return true;
}
// Whether an expression ended before a Python operator outside the language: `is`, `lambda`, ...;
// `x in xs` and `x not in xs` outside for (any other `not` after an operand is adjacent_operands'
// pair).
VG_HD inline bool at_outside_operator(Compiler& c) {
  return check(c, TOK_RESERVED) || check(c, TOK_IN) || (check(c, TOK_NOT) && kind_at(c, c.p + 1) == TOK_IN);
}
// There, its error (valid Python, not a syntax error): true when it failed.
VG_HD inline bool outside_operator(Compiler& c) {
  if (!at_outside_operator(c)) return false;
  fail(c, check(c, TOK_RESERVED) ? ERR_RESERVED_KEYWORD : ERR_UNSUPPORTED);
  return true;
}
VG_HD inline bool expect(Compiler& c, int32_t k) {
  if (match(c, k)) return true;
  if (outside_operator(c)) return false;
  if (check(c, TOK_FOR) && (k == TOK_RBRACKET || k == TOK_RPAREN)) return fail(c, ERR_COMPREHENSION);  // `[x for x in xs]`
  if (k == TOK_NEWLINE) return fail(c, ERR_EXPECTED_NEWLINE);
  return fail(c, ERR_EXPECTED, k);
}
// After a statement's expression: anything but the end of the line is reported where it is,
// before any type error about the expression.
VG_HD inline bool at_line_end(Compiler& c) {
  if (check(c, TOK_NEWLINE) || check(c, TOK_COMMA) || check(c, TOK_EOF)) return true;
  return expect(c, TOK_NEWLINE);
}

VG_HD inline int32_t emit(Compiler& c, int32_t op, int32_t arg = 0) {
  if (c.failed) return 0;
  if (c.n >= c.cap) {
    fail(c, ERR_CODE_TOO_LONG, c.cap);
    return 0;
  }
  c.code[c.n] = (uint32_t)op | (((uint32_t)arg & ARG_MASK) << 8);
  return c.n++;
}
VG_HD inline int32_t arg_of(Compiler& c, int32_t at) { return (int32_t)(c.code[at] >> 8); }
VG_HD inline void set_arg(Compiler& c, int32_t at, int32_t arg) {
  c.code[at] = (c.code[at] & 0xFFu) | (((uint32_t)arg & ARG_MASK) << 8);
}
// Emit a forward jump linked into `chain`; patch_chain later points every link at a target.
VG_HD inline void emit_chained(Compiler& c, int32_t op, int32_t* chain) {
  int32_t at = emit(c, op, *chain);
  if (!c.failed) *chain = at;
}
VG_HD inline void patch_chain(Compiler& c, int32_t chain, int32_t target) {
  if (c.failed) return;
  while (chain != NO_CHAIN) {
    int32_t next = arg_of(c, chain);
    set_arg(c, chain, target);
    chain = next;
  }
}
VG_HD inline void emit_const(Compiler& c, int32_t v) {
  if (v >= -(1 << 23) && v < (1 << 23)) {
    emit(c, OP_LOAD_CONST, v);
  } else {
    emit(c, OP_LOAD_CONST, v >> 8);  // arithmetic shift: the high 24 bits, signed
    emit(c, OP_CONST_EXT, v & 0xFF);
  }
}

VG_HD inline int32_t find_func(Compiler& c, int32_t name) {
  for (int32_t i = 0; i < c.nfuncs; i++)
    if (c.funcs[i].name == name) return i;
  return -1;
}
VG_HD inline int32_t resolve(Compiler& c, int32_t name) {
  for (int32_t i = c.nlive - 1; i >= 0; i--)
    if (c.locals[i].name == name) return i;
  return -1;
}
// A new local in the current scope; its slot is its index (locals form a stack).
VG_HD inline int32_t declare(Compiler& c, int32_t name, int32_t kind) {
  if (c.nlive >= MAX_LOCALS) {
    fail(c, ERR_TOO_MANY_LOCALS, MAX_LOCALS);
    return 0;
  }
  c.locals[c.nlive].name = name;
  c.locals[c.nlive].kind = (int8_t)kind;
  c.locals[c.nlive].depth = (int8_t)c.scope;
  c.nlive++;
  if (c.nlive > c.max_slots) c.max_slots = c.nlive;
  return c.nlive - 1;
}
VG_HD inline void begin_scope(Compiler& c) { c.scope++; }
VG_HD inline void end_scope(Compiler& c) {
  c.scope--;
  while (c.nlive > 0 && c.locals[c.nlive - 1].depth > c.scope) c.nlive--;
}

// Convert the value on top of the stack to a truth value the jumps can test.
VG_HD inline void truth(Compiler& c, int32_t k) {
  if (k == KIND_LIST) emit(c, OP_LEN);
}

VG_HD inline bool is_compare(int32_t k) { return k >= TOK_LT && k <= TOK_NE; }
VG_HD inline bool is_aug(int32_t k) { return k >= TOK_PLUS_ASSIGN && k <= TOK_PERCENT_ASSIGN; }

VG_HD inline bool enter(Compiler& c) {
  if (++c.depth > MAX_EXPR_DEPTH) return fail(c, ERR_TOO_DEEP, MAX_EXPR_DEPTH);
  return true;
}

// One more level of MAX_NESTING (`counter`: c.ops or c.elifs) at the current token, a binary
// operator or an `elif`.
VG_HD inline bool nest(Compiler& c, int32_t& counter) {
  if (c.blocks + c.elifs + c.ops >= MAX_NESTING) return fail(c, ERR_TOO_COMPLEX, MAX_NESTING);
  counter++;
  return true;
}

VG_HD inline int32_t compare_op(int32_t tok) {
  switch (tok) {
    case TOK_LT: return OP_COMPARE_LT;
    case TOK_LE: return OP_COMPARE_LE;
    case TOK_GT: return OP_COMPARE_GT;
    case TOK_GE: return OP_COMPARE_GE;
    case TOK_EQ: return OP_COMPARE_EQ;
    default: return OP_COMPARE_NE;
  }
}

// Where a conditional expression `x if c else y` starting at token i has its `if`, or -1.
VG_HD inline int32_t find_ternary(Compiler& c, int32_t i) {
  int32_t d = 0;
  for (; i < c.nt; i++) {
    int32_t k = c.t[i].kind;
    if (k == TOK_LPAREN || k == TOK_LBRACKET) d++;
    else if (k == TOK_RPAREN || k == TOK_RBRACKET) { if (d-- == 0) return -1; }
    else if (k == TOK_EOF || k == TOK_NEWLINE || k == TOK_INDENT || k == TOK_DEDENT) return -1;
    // (a `for` ends the value: `[a for b in c if d]` is a comprehension's, with no else)
    else if (d == 0 && (k == TOK_COMMA || k == TOK_COLON || k == TOK_ASSIGN || is_aug(k) || k == TOK_ELSE || k == TOK_FOR)) return -1;
    else if (d == 0 && k == TOK_IF) return i;
  }
  return -1;
}

// ---------------------------------------------------------------------------------------------
// Expressions, without recursion
//
// The grammar, loosest level first (one C++ function per level in a recursive-descent parser):
//   expr        or ['if' or 'else' expr]     the condition is compiled first, as in CPython
//   or          and ('or' and)*              short-circuit, returning an operand (same kinds)
//   and         not ('and' not)*
//   not         'not' not | comparison
//   comparison  sum (cmp sum)*               chained: each operand once, short-circuit
//   sum         term (('+' | '-') term)*
//   term        unary (('*' | '//' | '%') unary)*
//   unary       ('-' | '+') unary | primary  -INT folds to a constant, as in CPython
//   primary     atom ('[' expr ']' | '.' append/pop '(' args ')')*
//   atom        INT | True | False | name | name '(' args ')' | '(' expr ')' | '[' expr, ... ']'
// parse_expr runs it as precedence climbing over an explicit stack (Compiler::frames), so no C++
// call nests and the GPU compile kernel needs no call stack beyond its fixed frame. A frame is
// a level that waits for the value of the level it called: an operator chain with its left
// operand, a prefix operator, a bracket, an argument list, a conditional expression. A level
// with nothing pending (no operator seen yet) has no frame: a value climbing through it only
// checks for that level's operator. Checks, errors, emitted words and their token positions come
// in the order of the recursive descent this replaced; the first error ends the parse (every
// caller stops at c.failed). The frame count is bounded: every `expr`, `not` and unary minus or
// plus takes a level of MAX_EXPR_DEPTH, and each `expr` holds at most 8 frames.

enum ExprLevel : int32_t { LV_EXPR, LV_OR, LV_AND, LV_NOT, LV_CMP, LV_SUM, LV_TERM, LV_UNARY, LV_PRIMARY, LV_ATOM };
enum FrameType : uint8_t { PF_EXPR, PF_OR, PF_AND, PF_NOT, PF_CMP, PF_SUM, PF_TERM, PF_UNARY, PF_PRIMARY, PF_PAREN,
                           PF_LIST, PF_ARGS };
VG_HD inline bool bare_group(Compiler& c, int32_t s, int32_t e);  // (with the error passes, below)
enum ExprPhase : uint8_t { X_PLAIN, X_COND, X_BODY, X_ELSE };             // PF_EXPR
enum ArgsOf : uint8_t { A_LEN, A_ABS, A_MIN, A_MAX, A_APPEND, A_POP, A_FUNC };  // PF_ARGS

// The level whose loop a binary operator token continues, or -1.
VG_HD inline int32_t binary_level(int32_t tok) {
  switch (tok) {
    case TOK_STAR: case TOK_SLASHSLASH: case TOK_PERCENT: return LV_TERM;
    case TOK_PLUS: case TOK_MINUS: return LV_SUM;
    case TOK_OR: return LV_OR;
    case TOK_AND: return LV_AND;
    default: return is_compare(tok) ? LV_CMP : -1;
  }
}

// What a frame waits for: the level whose value it takes.
VG_HD inline int32_t callee_level(const PFrame& f) {
  switch (f.type) {
    case PF_EXPR: return f.phase == X_ELSE ? LV_EXPR : LV_OR;
    case PF_OR: return LV_AND;
    case PF_AND: case PF_NOT: return LV_NOT;
    case PF_CMP: return LV_SUM;
    case PF_SUM: return LV_TERM;
    case PF_TERM: case PF_UNARY: return LV_UNARY;
    case PF_PRIMARY: return f.phase == 0 ? LV_ATOM : LV_EXPR;
    default: return LV_EXPR;  // PF_PAREN, PF_LIST, PF_ARGS
  }
}

VG_HD inline PFrame* push_frame(Compiler& c, int32_t& sp, uint8_t type) {
  if (sp >= MAX_PFRAMES) {  // unreachable by the bound above; a guard, not a limit
    fail(c, ERR_TOO_DEEP, MAX_EXPR_DEPTH);
    return nullptr;
  }
  PFrame* f = &c.frames[sp++];
  f->a = f->b = f->d = 0;
  f->type = type;
  f->phase = 0;
  f->k = 0;
  f->n = 0;
  return f;
}

// Arguments an argument list wants: count, and the kind of argument i.
VG_HD inline int32_t args_count(Compiler& c, const PFrame& f) {
  switch (f.phase) {
    case A_MIN: case A_MAX: return 2;
    case A_POP: return 0;
    case A_FUNC: return c.funcs[f.a].nparams;
    default: return 1;
  }
}
VG_HD inline int32_t args_kind(Compiler& c, const PFrame& f, int32_t i) {
  if (f.phase == A_FUNC) return c.funcs[f.a].params[i];
  return f.phase == A_LEN ? KIND_LIST : KIND_INT;
}

// `and`/`or` at c.p after a left operand of kind f.k: the short-circuit jump (into chain f.a).
VG_HD inline bool logic_op(Compiler& c, PFrame& f, bool is_or) {
  int32_t op = c.p;
  advance(c);
  if (f.k == KIND_NONE) return fail_at(c, ERR_BAD_OPERAND, c.t[op], f.k);
  if (f.k == KIND_LIST) {
    emit(c, OP_DUP);
    emit(c, OP_LEN);
    emit_chained(c, is_or ? OP_JUMP_IF_TRUE : OP_JUMP_IF_FALSE, &f.a);
    emit(c, OP_POP);
  } else {
    emit_chained(c, is_or ? OP_JUMP_IF_TRUE_OR_POP : OP_JUMP_IF_FALSE_OR_POP, &f.a);
  }
  f.b = op;
  return !c.failed;
}

// The ')' of an argument list: 0 with the call emitted and *k its result, or -1 on error.
VG_HD inline int32_t args_end(Compiler& c, PFrame& f, int32_t* k) {
  if (!expect(c, TOK_RPAREN)) return -1;
  int32_t nwant = args_count(c, f);
  if (f.n != nwant) {
    fail_at(c, ERR_WRONG_ARG_COUNT, c.t[f.b], nwant);
    return -1;
  }
  switch (f.phase) {
    case A_LEN: emit(c, OP_LEN); *k = KIND_INT; break;
    case A_ABS: emit(c, OP_ABS); *k = KIND_INT; break;
    case A_MIN: emit(c, OP_MIN); *k = KIND_INT; break;
    case A_MAX: emit(c, OP_MAX); *k = KIND_INT; break;
    case A_APPEND: emit(c, OP_APPEND); *k = KIND_NONE; break;
    case A_POP: emit(c, OP_LIST_POP); *k = KIND_INT; break;
    default: {
      FuncSig& fs = c.funcs[f.a];
      if (fs.pc >= 0) emit(c, OP_CALL, fs.pc);
      else emit_chained(c, OP_CALL, &fs.chain);  // patched when the callee is compiled
      *k = fs.ret;
    }
  }
  return c.failed ? -1 : 0;
}

// After an argument list's '(' or ',': 1 when an argument follows (parse it), else args_end.
VG_HD inline int32_t args_next(Compiler& c, PFrame& f, int32_t* k) {
  if (check(c, TOK_RPAREN)) return args_end(c, f, k);
  if (check(c, TOK_NAME) && kind_at(c, c.p + 1) == TOK_ASSIGN) {
    fail(c, ERR_KEYWORD_ARGUMENT);
    return -1;
  }
  f.d = c.p;
  return 1;
}

// Parse from level `root` (LV_EXPR, or LV_PRIMARY for an assignment target's list, which stops
// at token `stop`), emitting its code. Returns the kind of the value, or -1 with c.err set.
VG_HD VG_NOINLINE int32_t parse_expr(Compiler& c, int32_t root, int32_t stop) {
  if (c.failed) return -1;
  c.ops = 0;  // expressions parsed one after another are side by side in the AST, not nested
  PFrame* f = nullptr;  // the top frame
  int32_t sp = 0;
  int32_t lev = root;   // going down: the level to parse; going up: the level that returned k
  int32_t k = -1;
  bool up = false;
  for (;;) {
    f = sp > 0 ? &c.frames[sp - 1] : nullptr;
    if (!up) {
      // Going down: start parsing level `lev` at c.p.
      if (lev == LV_EXPR) {
        if (!enter(c)) return -1;
        int32_t start = c.p, at_if = find_ternary(c, start);
        if (at_if == start) {  // `return if a`: no value before the `if` (its condition is not the error)
          fail(c, ERR_INVALID_SYNTAX);
          return -1;
        }
        if (!(f = push_frame(c, sp, PF_EXPR))) return -1;
        if (at_if >= 0) {  // compile the condition first, then come back for the value
          c.p = at_if + 1;
          f->phase = X_COND;
          f->a = start;
          f->b = at_if;
        }
        lev = LV_NOT;  // `or` and `and` act only once their left operand is back
        continue;
      }
      if (lev <= LV_NOT && check(c, TOK_NOT)) {
        if (!enter(c)) return -1;
        int32_t op = c.p;
        advance(c);
        if (!(f = push_frame(c, sp, PF_NOT))) return -1;
        f->b = op;
        lev = LV_NOT;
        continue;
      }
      if (lev <= LV_UNARY && (check(c, TOK_MINUS) || check(c, TOK_PLUS))) {
        if (!enter(c)) return -1;
        int32_t op = c.p;
        advance(c);
        int32_t nx = kind_at(c, c.p + 1);
        if (c.t[op].kind == TOK_MINUS && check(c, TOK_INT) && nx != TOK_LBRACKET && nx != TOK_LPAREN && nx != TOK_DOT) {
          emit_const(c, -tk(c).value);  // fold -literal, as CPython does
          advance(c);
          c.depth--;
          if (c.failed) return -1;
          k = KIND_INT;
          lev = LV_UNARY;
          up = true;
          continue;
        }
        if (!(f = push_frame(c, sp, PF_UNARY))) return -1;
        f->b = op;
        lev = LV_UNARY;
        continue;
      }
      int32_t nx = kind_at(c, c.p + 1);
      int32_t kind = tk(c).kind;
      if ((kind == TOK_INT || kind == TOK_NAME || kind == TOK_TRUE || kind == TOK_FALSE) && nx != TOK_LPAREN &&
          nx != TOK_LBRACKET && nx != TOK_DOT) {
        // A plain atom with nothing after it for the primary's loop: no frame.
        const Token& t = tk(c);
        if (kind == TOK_NAME) {
          int32_t l = resolve(c, t.value);
          if (l < 0) {
            bool builtin_or_func = t.value < NUM_RESERVED_NAMES || find_func(c, t.value) >= 0;
            fail_at(c, builtin_or_func ? ERR_UNSUPPORTED : ERR_UNDEFINED_NAME, t);
            return -1;
          }
          advance(c);
          emit(c, OP_LOAD_VAR, l);
          k = c.locals[l].kind;
        } else if (kind == TOK_INT) {
          advance(c);
          emit_const(c, t.value);
          k = KIND_INT;
        } else {
          advance(c);
          emit(c, OP_LOAD_CONST, kind == TOK_TRUE ? 1 : 0);
          k = KIND_BOOL;
        }
        if (c.failed) return -1;
        lev = LV_PRIMARY;
        up = true;
        continue;
      }
      if (lev <= LV_PRIMARY) {
        int32_t pstop = sp == 0 ? stop : 0x7fffffff;  // only the root primary of a target stops early
        if (!(f = push_frame(c, sp, PF_PRIMARY))) return -1;
        f->a = pstop;
      }
      // atom (the top frame is a primary waiting for it)
      const Token& t = tk(c);
      int32_t ti = c.p;
      switch (t.kind) {
        case TOK_INT: advance(c); emit_const(c, t.value); k = KIND_INT; break;
        case TOK_TRUE: advance(c); emit(c, OP_LOAD_CONST, 1); k = KIND_BOOL; break;
        case TOK_FALSE: advance(c); emit(c, OP_LOAD_CONST, 0); k = KIND_BOOL; break;
        case TOK_NAME: {
          if (kind_at(c, c.p + 1) != TOK_LPAREN) {
            int32_t l = resolve(c, t.value);
            if (l < 0) {
              bool builtin_or_func = t.value < NUM_RESERVED_NAMES || find_func(c, t.value) >= 0;
              fail_at(c, builtin_or_func ? ERR_UNSUPPORTED : ERR_UNDEFINED_NAME, t);
              return -1;
            }
            advance(c);
            emit(c, OP_LOAD_VAR, l);
            k = c.locals[l].kind;
            break;
          }
          // a call
          int32_t id = t.value;
          advance(c);
          uint8_t of = A_FUNC;
          int32_t fi = 0;
          switch (id) {
            case BUILTIN_LEN: of = A_LEN; break;
            case BUILTIN_ABS: of = A_ABS; break;
            case BUILTIN_MIN: of = A_MIN; break;
            case BUILTIN_MAX: of = A_MAX; break;
            case BUILTIN_RANGE: fail_at(c, ERR_RANGE_OUTSIDE_FOR, t); return -1;
            case BUILTIN_INT: case BUILTIN_BOOL: case BUILTIN_LIST: fail_at(c, ERR_UNSUPPORTED, t); return -1;
            default:
              fi = find_func(c, id);
              if (fi < 0) {
                fail_at(c, resolve(c, id) >= 0 ? ERR_NOT_CALLABLE : ERR_UNKNOWN_FUNCTION, t);
                return -1;
              }
          }
          int32_t open = c.p;
          if (!expect(c, TOK_LPAREN)) return -1;
          if (!(f = push_frame(c, sp, PF_ARGS))) return -1;
          f->phase = of;
          f->a = fi;
          f->b = open;
          int32_t s = args_next(c, *f, &k);
          if (s < 0) return -1;
          if (s > 0) { lev = LV_EXPR; continue; }
          sp--;  // the call's value goes to the primary
          break;
        }
        case TOK_LPAREN:
          advance(c);
          if (check(c, TOK_RPAREN)) { fail_at(c, ERR_TUPLE_VALUE, t); return -1; }
          if (!(f = push_frame(c, sp, PF_PAREN))) return -1;
          f->b = ti;
          lev = LV_EXPR;
          continue;
        case TOK_LBRACKET:
          advance(c);
          if (!check(c, TOK_RBRACKET)) {
            if (!(f = push_frame(c, sp, PF_LIST))) return -1;
            f->b = c.p;
            lev = LV_EXPR;
            continue;
          }
          if (!expect(c, TOK_RBRACKET)) return -1;
          emit(c, OP_BUILD_LIST, 0);
          k = KIND_LIST;
          break;
        case TOK_RESERVED: fail(c, ERR_RESERVED_KEYWORD); return -1;
        // Valid Python that the language refuses (a name or type error's rank: after_parse_error)
        case TOK_STRING:  // 4: b'' ''
          if (t.value & 4) fail(c, ERR_INVALID_SYNTAX);
          else if (!bad_escape(c, false)) fail(c, ERR_STRING);
          return -1;
        case TOK_OPAQUE: fail(c, t.value); return -1;
        default: fail(c, ERR_EXPECTED_EXPRESSION); return -1;
      }
      if (c.failed) return -1;
      lev = LV_ATOM;
      up = true;
      continue;
    }

    // Going up: level `lev` returned a value of kind k (never after an error).
    if (sp == 0) return k;
    int32_t want = callee_level(*f);
    if (lev > want) {
      // Levels want .. lev - 1 have no frame: each would only look for its own operator at c.p,
      // so the one whose operator is there (if any) takes the value; the others pass it on.
      int32_t at = binary_level(tk(c).kind);
      if (at < want || at >= lev) {
        lev = want;
        continue;
      }
      uint8_t type = at == LV_TERM  ? PF_TERM
                     : at == LV_SUM ? PF_SUM
                     : at == LV_CMP ? PF_CMP
                     : at == LV_AND ? PF_AND
                                    : PF_OR;
      if (!(f = push_frame(c, sp, type))) return -1;
      f->k = (int8_t)k;
      if (type == PF_AND || type == PF_OR) {
        f->a = NO_CHAIN;
        if (!logic_op(c, *f, type == PF_OR)) return -1;
        lev = type == PF_OR ? LV_AND : LV_NOT;
      } else {
        if ((type == PF_SUM || type == PF_TERM) && !nest(c, c.ops)) return -1;
        f->a = NO_CHAIN;  // PF_CMP: the cleanup chain
        f->b = c.p;
        advance(c);
        lev = at + 1;
      }
      up = false;
      continue;
    }

    // The top frame takes the value.
    const int32_t k2 = k;
    switch (f->type) {
      case PF_EXPR:
        if (f->phase == X_PLAIN) {
          c.depth--;
          sp--;
          lev = LV_EXPR;
          continue;
        }
        if (f->phase == X_COND) {
          if (k2 == KIND_NONE) { fail_at(c, ERR_BAD_OPERAND, c.t[f->b + 1], k2); return -1; }
          truth(c, k2);
          int32_t jf = emit(c, OP_JUMP_IF_FALSE, 0);
          if (!c.failed && !check(c, TOK_ELSE) && !check(c, TOK_COLON) && !at_outside_operator(c)) {  // (expect's errors)
            // CPython: "expected 'else' after 'if' expression" at the start of the value before
            // the `if`, inside any parentheses that only group it. (err_tok stays where the else
            // is missing: an earlier pair of operands comes first, as in CPython.)
            int32_t s = f->a, e = f->b - 1;
            while (bare_group(c, s, e)) s++, e--;
            fail(c, ERR_EXPECTED, TOK_ELSE);
            c.err.line = c.t[s].line;
            c.err.col = c.t[s].col;
          }
          if (!c.failed) expect(c, TOK_ELSE);
          int32_t after_else = c.p;
          c.p = f->a;
          if (c.failed) return -1;
          f->phase = X_BODY;
          f->a = jf;
          f->d = after_else;
          lev = LV_NOT;
          up = false;
          continue;
        }
        if (f->phase == X_BODY) {
          if (c.p != f->b) {  // `x in xs if b else x`: the `in`'s error
            if (!outside_operator(c)) fail(c, ERR_INVALID_SYNTAX);
            return -1;
          }
          int32_t jend = emit(c, OP_JUMP, 0);
          if (!c.failed) set_arg(c, f->a, c.n);
          c.p = f->d;
          if (c.failed) return -1;
          f->phase = X_ELSE;
          f->a = jend;
          f->k = (int8_t)k2;
          lev = LV_EXPR;
          up = false;
          continue;
        }
        set_arg(c, f->a, c.n);  // X_ELSE
        if (f->k == KIND_NONE || k2 != f->k) { fail_at(c, ERR_TYPE_MISMATCH, c.t[f->d], f->k); return -1; }
        c.depth--;
        k = f->k;
        sp--;
        lev = LV_EXPR;
        continue;
      case PF_OR: case PF_AND: {
        bool is_or = f->type == PF_OR;
        if (k2 != f->k) { fail_at(c, ERR_BAD_OPERAND, c.t[f->b], k2); return -1; }
        if (check(c, is_or ? TOK_OR : TOK_AND)) {
          if (!logic_op(c, *f, is_or)) return -1;
          lev = is_or ? LV_AND : LV_NOT;
          up = false;
          continue;
        }
        patch_chain(c, f->a, c.n);
        k = f->k;
        sp--;
        lev = is_or ? LV_OR : LV_AND;
        continue;
      }
      case PF_NOT:
        c.depth--;
        if (k2 == KIND_NONE) { fail_at(c, ERR_BAD_OPERAND, c.t[f->b], k2); return -1; }
        truth(c, k2);
        emit(c, OP_UNARY_NOT);
        if (c.failed) return -1;
        k = KIND_BOOL;
        sp--;
        lev = LV_NOT;
        continue;
      case PF_CMP: {
        int32_t op = c.t[f->b].kind;
        int32_t k1 = f->k;
        bool eq = op == TOK_EQ || op == TOK_NE;
        bool ok = k1 == k2 && (k1 == KIND_INT || (eq && k1 == KIND_BOOL));
        if (!ok) {
          fail_at(c, ERR_BAD_OPERAND, c.t[f->b], k1 == k2 ? k1 : (k1 == KIND_INT || (eq && k1 == KIND_BOOL) ? k2 : k1));
          return -1;
        }
        if (is_compare(tk(c).kind)) {
          emit(c, OP_DUP);
          emit(c, OP_ROT3);
          emit(c, compare_op(op));
          emit_chained(c, OP_JUMP_IF_FALSE_OR_POP, &f->a);
        } else {
          emit(c, compare_op(op));
        }
        f->k = (int8_t)k2;
        if (!c.failed && is_compare(tk(c).kind)) {
          f->b = c.p;
          advance(c);
          lev = LV_SUM;
          up = false;
          continue;
        }
        if (f->a != NO_CHAIN) {  // a < b < c: drop the operand left over where a test failed
          int32_t j = emit(c, OP_JUMP, 0);
          patch_chain(c, f->a, c.n);
          emit(c, OP_SWAP);
          emit(c, OP_POP);
          set_arg(c, j, c.n);
        }
        if (c.failed) return -1;
        k = KIND_BOOL;
        sp--;
        lev = LV_CMP;
        continue;
      }
      case PF_SUM: {
        int32_t op = c.t[f->b].kind;
        int32_t k1 = f->k;
        if (op == TOK_PLUS && k1 == KIND_LIST && k2 == KIND_LIST) {
          emit(c, OP_LIST_CONCAT);
        } else if (k1 == KIND_INT && k2 == KIND_INT) {
          emit(c, op == TOK_PLUS ? OP_BINARY_ADD : OP_BINARY_SUB);
        } else {
          fail_at(c, ERR_BAD_OPERAND, c.t[f->b], k1 != KIND_INT ? k1 : k2);
          return -1;
        }
        if (c.failed) return -1;
        if (check(c, TOK_PLUS) || check(c, TOK_MINUS)) {
          if (!nest(c, c.ops)) return -1;
          f->b = c.p;
          advance(c);
          lev = LV_TERM;
          up = false;
          continue;
        }
        k = k1;
        sp--;
        lev = LV_SUM;
        continue;
      }
      case PF_TERM: {
        int32_t op = c.t[f->b].kind;
        int32_t k1 = f->k;
        if (op == TOK_STAR && k1 == KIND_LIST && k2 == KIND_INT) {
          emit(c, OP_LIST_REPEAT);
          k1 = KIND_LIST;
        } else if (op == TOK_STAR && k1 == KIND_INT && k2 == KIND_LIST) {
          emit(c, OP_SWAP);
          emit(c, OP_LIST_REPEAT);
          k1 = KIND_LIST;
        } else if (k1 == KIND_INT && k2 == KIND_INT) {
          emit(c, op == TOK_STAR ? OP_BINARY_MUL : op == TOK_SLASHSLASH ? OP_BINARY_DIV : OP_BINARY_MOD);
        } else {
          fail_at(c, ERR_BAD_OPERAND, c.t[f->b], k1 != KIND_INT ? k1 : k2);
          return -1;
        }
        if (c.failed) return -1;
        f->k = (int8_t)k1;
        if (check(c, TOK_STAR) || check(c, TOK_SLASHSLASH) || check(c, TOK_PERCENT)) {
          if (!nest(c, c.ops)) return -1;
          f->b = c.p;
          advance(c);
          lev = LV_UNARY;
          up = false;
          continue;
        }
        k = k1;
        sp--;
        lev = LV_TERM;
        continue;
      }
      case PF_UNARY:
        if (k2 != KIND_INT) { fail_at(c, ERR_BAD_OPERAND, c.t[f->b], k2); return -1; }
        if (c.t[f->b].kind == TOK_MINUS) emit(c, OP_UNARY_NEG);
        c.depth--;
        if (c.failed) return -1;
        sp--;
        lev = LV_UNARY;
        continue;
      case PF_PAREN:
        if (check(c, TOK_COMMA)) { fail_at(c, ERR_TUPLE_VALUE, c.t[f->b]); return -1; }
        if (!expect(c, TOK_RPAREN)) return -1;
        sp--;
        lev = LV_ATOM;
        continue;
      case PF_LIST:
        if (k2 != KIND_INT) { fail_at(c, ERR_TYPE_MISMATCH, c.t[f->b], KIND_INT); return -1; }
        if (++f->a > MAX_LIST_LITERAL) { fail_at(c, ERR_TOO_MANY_ELEMENTS, c.t[f->b], MAX_LIST_LITERAL); return -1; }
        if (match(c, TOK_COMMA) && !check(c, TOK_RBRACKET)) {
          f->b = c.p;
          lev = LV_EXPR;
          up = false;
          continue;
        }
        if (!expect(c, TOK_RBRACKET)) return -1;
        emit(c, OP_BUILD_LIST, f->a);
        if (c.failed) return -1;
        k = KIND_LIST;
        sp--;
        lev = LV_ATOM;
        continue;
      case PF_ARGS: {
        int32_t nwant = args_count(c, *f);
        if (f->n >= nwant) { fail_at(c, ERR_WRONG_ARG_COUNT, c.t[f->d], nwant); return -1; }
        int32_t kw = args_kind(c, *f, f->n);
        if (k2 != kw) { fail_at(c, ERR_TYPE_MISMATCH, c.t[f->d], kw); return -1; }
        f->n++;
        int32_t s = match(c, TOK_COMMA) ? args_next(c, *f, &k) : args_end(c, *f, &k);
        if (s < 0) return -1;
        if (s > 0) { lev = LV_EXPR; up = false; continue; }
        sp--;
        lev = LV_ATOM;
        continue;
      }
      default: break;  // PF_PRIMARY: below
    }

    // A primary: the value of its atom or method call (phase 0) or of a subscript (phase 1).
    if (f->phase == 1) {
      if (check(c, TOK_COLON)) { fail(c, ERR_SLICE); return -1; }  // xs[1:2]: valid Python, refused
      if (k2 != KIND_INT) { fail_at(c, ERR_TYPE_MISMATCH, c.t[f->b], KIND_INT); return -1; }
      if (!expect(c, TOK_RBRACKET)) return -1;
      emit(c, OP_INDEX);
      f->k = KIND_INT;
      f->phase = 0;
    } else {
      f->k = (int8_t)k2;
    }
    bool descend = false;
    while (!c.failed && c.p < f->a) {
      const Token& at = tk(c);
      if (check(c, TOK_LBRACKET)) {
        if (f->k != KIND_LIST) { fail_at(c, ERR_BAD_OPERAND, at, f->k); return -1; }
        advance(c);
        if (check(c, TOK_COLON)) { fail(c, ERR_SLICE); return -1; }  // xs[:2]
        f->b = c.p;
        f->phase = 1;
        lev = LV_EXPR;
        descend = true;
        break;
      } else if (check(c, TOK_DOT)) {
        advance(c);
        const Token& m = tk(c);
        if (!check(c, TOK_NAME)) { fail(c, ERR_EXPECTED, TOK_NAME); return -1; }
        if (f->k != KIND_LIST) { fail_at(c, ERR_BAD_OPERAND, at, f->k); return -1; }
        advance(c);
        if (m.value != BUILTIN_APPEND && m.value != BUILTIN_POP) { fail_at(c, ERR_UNKNOWN_METHOD, m); return -1; }
        int32_t open = c.p;
        if (!expect(c, TOK_LPAREN)) return -1;
        PFrame* g = push_frame(c, sp, PF_ARGS);
        if (!g) return -1;
        g->phase = m.value == BUILTIN_APPEND ? A_APPEND : A_POP;
        g->b = open;
        int32_t s = args_next(c, *g, &k);
        if (s < 0) return -1;
        if (s > 0) { lev = LV_EXPR; descend = true; break; }
        sp--;
        f->k = (int8_t)k;
      } else if (check(c, TOK_LPAREN)) {
        fail(c, ERR_UNSUPPORTED);
        return -1;
      } else {
        break;
      }
    }
    if (descend) {
      up = false;
      continue;
    }
    if (c.failed) return -1;
    k = f->k;
    sp--;
    lev = LV_PRIMARY;
  }
}

VG_HD inline int32_t expr(Compiler& c) { return parse_expr(c, LV_EXPR, 0x7fffffff); }
// atom followed by subscripts and method calls, up to token index `stop` (for targets).
VG_HD inline int32_t primary(Compiler& c, int32_t stop = 0x7fffffff) { return parse_expr(c, LV_PRIMARY, stop); }

VG_HD inline int32_t parse_type(Compiler& c) {
  const Token& t = tk(c);
  if (t.kind == TOK_NAME && t.value == BUILTIN_INT) { advance(c); return KIND_INT; }
  if (t.kind == TOK_NAME && t.value == BUILTIN_BOOL) { advance(c); return KIND_BOOL; }
  if (t.kind == TOK_NAME && t.value == BUILTIN_LIST && kind_at(c, c.p + 1) == TOK_LBRACKET) {
    advance(c);
    advance(c);
    if (!(check(c, TOK_NAME) && tk(c).value == BUILTIN_INT)) { fail(c, ERR_EXPECTED_TYPE); return -1; }
    advance(c);
    if (!expect(c, TOK_RBRACKET)) return -1;
    return KIND_LIST;
  }
  fail(c, ERR_EXPECTED_TYPE);
  return -1;
}

// Store the value on top of the stack (of kind k) into the name at token `name`.
VG_HD inline void store_name(Compiler& c, const Token& name, int32_t k) {
  if (c.failed) return;
  if (name.value < NUM_RESERVED_NAMES) { fail_at(c, ERR_BUILTIN_NAME, name); return; }
  if (find_func(c, name.value) >= 0) { fail_at(c, ERR_FUNCTION_NAME, name); return; }
  int32_t l = resolve(c, name.value);
  if (l < 0) l = declare(c, name.value, k);
  else if (c.locals[l].kind != k) { fail_at(c, ERR_TYPE_MISMATCH, name, c.locals[l].kind); return; }
  emit(c, OP_STORE_VAR, l);
}

// Token index of the first top-level token of kind k (or of any assignment operator if k < 0)
// between i and the end of the logical line, or -1.
VG_HD inline int32_t find_top(Compiler& c, int32_t i, int32_t k) {
  int32_t d = 0;
  for (; i < c.nt; i++) {
    int32_t kk = c.t[i].kind;
    if (kk == TOK_LPAREN || kk == TOK_LBRACKET) d++;
    else if (kk == TOK_RPAREN || kk == TOK_RBRACKET) { if (--d < 0) return -1; }
    else if (kk == TOK_NEWLINE || kk == TOK_EOF || kk == TOK_INDENT || kk == TOK_DEDENT) return -1;
    else if (d == 0 && (k >= 0 ? kk == k : (kk == TOK_ASSIGN || is_aug(kk) || kk == TOK_COLON))) return i;
  }
  return -1;
}

// A subscript target `primary[index]` spanning tokens [c.p, end): emits the list and the index.
VG_HD inline bool subscript_target(Compiler& c, int32_t end) {
  const Token& start = tk(c);
  if (kind_at(c, end - 1) != TOK_RBRACKET) return fail_at(c, ERR_NOT_ASSIGNABLE, start);
  int32_t d = 0, lb = end - 1;
  for (; lb > c.p; lb--) {
    int32_t k = c.t[lb].kind;
    if (k == TOK_RBRACKET || k == TOK_RPAREN) d++;
    else if ((k == TOK_LBRACKET || k == TOK_LPAREN) && --d == 0) break;
  }
  if (lb <= c.p || c.t[lb].kind != TOK_LBRACKET) return fail_at(c, ERR_NOT_ASSIGNABLE, start);
  int32_t k = primary(c, lb);
  if (c.failed) return false;
  if (c.p != lb) return fail_at(c, ERR_NOT_ASSIGNABLE, start);
  if (k != KIND_LIST) return fail_at(c, ERR_BAD_OPERAND, c.t[lb], k);
  advance(c);
  if (check(c, TOK_COLON)) return fail(c, ERR_SLICE);  // xs[:2] = ys
  const Token& it = tk(c);
  int32_t ki = expr(c);
  if (c.failed) return false;
  if (check(c, TOK_COLON)) return fail(c, ERR_SLICE);
  if (ki != KIND_INT) return fail_at(c, ERR_TYPE_MISMATCH, it, KIND_INT);
  if (!expect(c, TOK_RBRACKET)) return false;
  if (c.p != end) return fail_at(c, ERR_NOT_ASSIGNABLE, start);
  return true;
}

// If tokens [i, end) are one bracketed group opened by `open` ('(' or '['), the index of its
// closing bracket, else -1.
VG_HD inline int32_t bracket_group(Compiler& c, int32_t i, int32_t end, int32_t open) {
  if (kind_at(c, i) != open) return -1;
  int32_t d = 0;
  for (int32_t j = i; j < end; j++) {
    int32_t k = c.t[j].kind;
    if (k == TOK_LPAREN || k == TOK_LBRACKET) d++;
    else if ((k == TOK_RPAREN || k == TOK_RBRACKET) && --d == 0) return j == end - 1 ? j : -1;
  }
  return -1;
}
VG_HD inline int32_t paren_group(Compiler& c, int32_t i, int32_t end) { return bracket_group(c, i, end, TOK_LPAREN); }

// Parentheses that only group an assignment target (`(a) = 1`, `((xs[i])) += 1`) are Python's
// too: narrow [*start, *end) to what they enclose. A comma inside makes a tuple: left alone.
VG_HD inline void ungroup_target(Compiler& c, int32_t* start, int32_t* end) {
  int32_t close;
  while ((close = paren_group(c, *start, *end)) > *start + 1 && find_top(c, *start + 1, TOK_COMMA) < 0) {
    (*start)++;
    *end = close;
  }
}

// Errors of the grammar itself, which CPython's parser reports as they come.
VG_HD inline bool is_syntax_error(int32_t code) {
  return code == ERR_EXPECTED || code == ERR_EXPECTED_EXPRESSION || code == ERR_EXPECTED_INDENT ||
         code == ERR_EXPECTED_NEWLINE || code == ERR_INVALID_SYNTAX || code == ERR_NOT_ASSIGNABLE ||
         code == ERR_UNEXPECTED_INDENT || code == ERR_BAD_DEDENT || code == ERR_FORGOT_COMMA ||
         code == ERR_BAD_ESCAPE;  // (CPython's parser decodes a literal as it parses it)
}

// store_target of a target without grouping parentheses.
VG_HD inline void store_inner_target(Compiler& c, int32_t end, int32_t k) {
  const Token& t = tk(c);
  if (bracket_group(c, c.p, end, TOK_LBRACKET) >= 0) {  // a list display: `[a, b] = 1, 2` unpacks in CPython
    expr(c);  // CPython parses the display before it would unpack into it: its syntax errors first
    if (c.failed && is_syntax_error(c.err.code)) return;
    c.failed = false;
    fail_at(c, ERR_UNSUPPORTED, t);
    return;
  }
  if (t.kind == TOK_NAME && c.p + 1 == end) {
    store_name(c, t, k);
    advance(c);
    return;
  }
  if (!subscript_target(c, end)) return;
  if (k != KIND_INT) { fail_at(c, ERR_TYPE_MISMATCH, t, KIND_INT); return; }
  emit(c, OP_STORE_INDEX);
}

// Store the value on top of the stack (kind k) into the target spanning [c.p, end).
VG_HD inline void store_target(Compiler& c, int32_t end, int32_t k) {
  const int32_t outer_end = end;
  ungroup_target(c, &c.p, &end);
  store_inner_target(c, end, k);
  if (!c.failed && c.p == end) c.p = outer_end;
}

// `1 = a` with `a` unknown: the value is compiled first, but the target's grammar error is
// CPython's, which comes before names and types. After a value's name or type error, the targets
// [starts[i], ends[i]) are checked (the code they emit is dropped with the failed compile).
VG_HD inline void target_error_first(Compiler& c, int32_t n, const int32_t* starts, const int32_t* ends) {
  if (!after_parse_error(c.err.code)) return;
  const CompileError value_err = c.err;
  const int32_t value_tok = c.err_tok;
  for (int32_t i = 0; i < n; i++) {
    c.failed = false;
    c.p = starts[i];
    if (starts[i] == ends[i]) fail(c, ERR_NOT_ASSIGNABLE);
    else store_target(c, ends[i], KIND_INT);
    if (!c.failed && c.p != ends[i]) fail(c, ERR_NOT_ASSIGNABLE);
    if (c.failed && is_syntax_error(c.err.code)) return;
  }
  c.failed = true;
  c.err = value_err;
  c.err_tok = value_tok;
}

// Split tokens [i, end) at top-level commas into at most MAX_TUPLE + 1 items (a trailing comma
// ends the last item). Returns the count, or -1 (with the error set) for unbalanced brackets,
// which would otherwise hide tokens from the parser. *comma: whether a top-level comma exists.
VG_HD inline int32_t split_commas(Compiler& c, int32_t i, int32_t end, int32_t* starts, int32_t* ends, bool* comma) {
  int32_t n = 0, d = 0, s = i;
  *comma = false;
  for (int32_t j = i; j <= end; j++) {
    int32_t k = j < end ? c.t[j].kind : TOK_COMMA;
    if (k == TOK_LPAREN || k == TOK_LBRACKET) d++;
    else if (k == TOK_RPAREN || k == TOK_RBRACKET) {
      if (--d < 0) {
        fail_at(c, ERR_INVALID_SYNTAX, c.t[j]);
        return -1;
      }
    } else if (d == 0 && k == TOK_COMMA) {
      if (j < end) *comma = true;
      if (j == end && s == end && n > 0) break;  // trailing comma
      if (n > MAX_TUPLE) return n;
      starts[n] = s;
      ends[n] = j;
      n++;
      s = j + 1;
    }
  }
  if (d != 0) {
    fail_at(c, ERR_INVALID_SYNTAX, c.t[end > i ? end - 1 : i]);
    return -1;
  }
  return n;
}

VG_HD inline int32_t line_end(Compiler& c, int32_t i) {
  int32_t d = 0;
  for (; i < c.nt; i++) {
    int32_t k = c.t[i].kind;
    if (k == TOK_LPAREN || k == TOK_LBRACKET) d++;
    else if (k == TOK_RPAREN || k == TOK_RBRACKET) d--;
    else if (k == TOK_NEWLINE || k == TOK_EOF || k == TOK_INDENT || k == TOK_DEDENT) return i;
  }
  return c.nt - 1;
}

// `t1, t2 = e1, e2`: values left to right, then targets left to right (CPython's order).
VG_HD inline void tuple_assign(Compiler& c, int32_t lhs, int32_t lend, int32_t rhs, int32_t rend) {
  int32_t ls[MAX_TUPLE + 2], le[MAX_TUPLE + 2], rs[MAX_TUPLE + 2], re[MAX_TUPLE + 2];
  int32_t kinds[MAX_TUPLE + 1];
  int32_t pl = paren_group(c, lhs, lend);
  if (pl >= 0) { lhs++; lend--; }
  int32_t pr = paren_group(c, rhs, rend);
  if (pr >= 0 && find_top(c, rhs + 1, TOK_COMMA) >= 0 && find_top(c, rhs + 1, TOK_COMMA) < pr) { rhs++; rend--; }
  bool lcomma, rcomma;
  int32_t nl = split_commas(c, lhs, lend, ls, le, &lcomma);
  int32_t nr = nl < 0 ? -1 : split_commas(c, rhs, rend, rs, re, &rcomma);
  if (nl < 0 || nr < 0) return;
  if (nl > MAX_TUPLE || nr > MAX_TUPLE) { fail_at(c, ERR_TOO_MANY_ELEMENTS, c.t[lhs], MAX_TUPLE); return; }
  // `a, b = xs` and `x, = 7` unpack a non-tuple at run time in CPython: not supported.
  if (lcomma && !rcomma) { fail_at(c, ERR_TUPLE_MISMATCH, c.t[rhs]); return; }
  if (!lcomma && bracket_group(c, lhs, lend, TOK_LBRACKET) >= 0) {  // `[a, b] = 1, 2`: refused by store_target
    c.p = lhs;
    store_target(c, lend, KIND_INT);
    return;
  }
  if (rcomma && !lcomma) { fail_at(c, ERR_TUPLE_VALUE, c.t[rhs]); return; }
  if (nl != nr) { fail_at(c, ERR_TUPLE_MISMATCH, c.t[lhs]); return; }
  for (int32_t i = 0; i < nr && !c.failed; i++) {
    c.p = rs[i];
    if (rs[i] == re[i]) { fail(c, ERR_EXPECTED_EXPRESSION); return; }
    const Token& at = tk(c);
    kinds[i] = expr(c);
    if (!c.failed && c.p != re[i] && !outside_operator(c)) fail(c, ERR_INVALID_SYNTAX);
    if (!c.failed && kinds[i] == KIND_NONE) fail_at(c, ERR_NONE_VALUE, at);
  }
  if (c.failed) return target_error_first(c, nl, ls, le);
  if (nr == 2) emit(c, OP_SWAP);
  else if (nr > 2) emit(c, OP_REVERSE, nr);
  for (int32_t i = 0; i < nl && !c.failed; i++) {
    c.p = ls[i];
    if (ls[i] == le[i]) { fail(c, ERR_NOT_ASSIGNABLE); return; }
    store_target(c, le[i], kinds[i]);
  }
}

// A string literal alone on its line (a docstring) does nothing: the statement is dropped. Not an
// f-string (it evaluates its expressions) nor a bytes/str mix (a syntax error).
VG_HD inline bool docstring(Compiler& c) {
  return check(c, TOK_STRING) && !(tk(c).value & 5) && kind_at(c, c.p + 1) == TOK_NEWLINE;
}

VG_HD inline bool simple_statement(Compiler& c) {
  const Token& t = tk(c);
  if (docstring(c)) {
    if (bad_escape(c, true)) return false;
    advance(c);
    return false;
  }
  switch (t.kind) {
    case TOK_RETURN: {
      advance(c);
      const Token& at = tk(c);
      // (valid Python, which returns None: a name or type error, not a syntax error)
      if (check(c, TOK_NEWLINE)) return fail_at(c, ERR_BARE_RETURN, t, c.funcs[c.cur].ret);
      int32_t k = expr(c);
      if (c.failed || !at_line_end(c)) return false;
      if (check(c, TOK_COMMA)) { fail(c, ERR_TUPLE_VALUE); return false; }
      if (k != c.funcs[c.cur].ret) { fail_at(c, ERR_TYPE_MISMATCH, at, c.funcs[c.cur].ret); return false; }
      emit(c, OP_RETURN);
      return true;
    }
    case TOK_PASS: advance(c); return false;
    case TOK_BREAK:
      if (c.nloops == 0) return fail(c, ERR_BREAK_OUTSIDE_LOOP);
      advance(c);
      emit_chained(c, OP_JUMP, &c.loops[c.nloops - 1].brk_chain);
      c.loops[c.nloops - 1].has_break = true;
      return false;
    case TOK_CONTINUE:
      if (c.nloops == 0) return fail(c, ERR_CONTINUE_OUTSIDE_LOOP);
      advance(c);
      emit(c, OP_JUMP, c.loops[c.nloops - 1].cont);
      return false;
    case TOK_DEF: return fail(c, ERR_NESTED_DEF);
    case TOK_IF: case TOK_WHILE: case TOK_FOR: case TOK_ELSE: case TOK_ELIF: return fail(c, ERR_INVALID_SYNTAX);
    case TOK_RESERVED: return fail(c, ERR_RESERVED_KEYWORD);  // `with a:`, `try:`: at the keyword, not the ':'
    default: break;
  }
  int32_t start = c.p;
  int32_t eq = find_top(c, start, -1);
  int32_t end = line_end(c, start);
  if (eq < 0) {  // expression statement
    int32_t k = expr(c);
    if (c.failed) return false;
    if (check(c, TOK_COMMA)) return fail(c, ERR_TUPLE_VALUE);
    if (k != KIND_NONE) emit(c, OP_POP);
    return false;
  }
  if (eq == start) return fail(c, ERR_EXPECTED_EXPRESSION);
  const Token& op = c.t[eq];
  // `a + = 1`, `- = 1`: an operator still waiting for its right operand; CPython's parser fails at
  // the '='. One that cannot start an expression and follows no operand (`in = 1`, `a, or = 1`)
  // fails itself.
  const int32_t before = c.t[eq - 1].kind;
  const bool is_op = before == TOK_RESERVED && c.t[eq - 1].value == RESERVED_IS;  // `a is = 1`
  if (op.kind != TOK_COLON && (binary_or_prefix_op(before) || is_op)) {
    bool prefix = before == TOK_MINUS || before == TOK_PLUS || before == TOK_NOT;
    return fail_at(c, ERR_INVALID_SYNTAX, prefix || (eq - 1 > start && operand_end(c.t[eq - 2].kind)) ? op : c.t[eq - 1]);
  }
  if (op.kind == TOK_COLON) {  // x: T = e
    if (!(t.kind == TOK_NAME && eq == start + 1)) return fail_at(c, ERR_UNSUPPORTED, t);  // `match a:`, `a[0]: int`
    c.p = eq + 1;
    int32_t want = parse_type(c);
    if (c.failed || !expect(c, TOK_ASSIGN)) return false;
    const Token& at = tk(c);
    int32_t k = expr(c);
    if (c.failed || !at_line_end(c)) return false;
    if (k != want) return fail_at(c, ERR_TYPE_MISMATCH, at, want);
    int32_t after = c.p;
    store_name(c, t, k);
    c.p = after;
    return false;
  }
  if (find_top(c, start, TOK_COMMA) >= 0 && find_top(c, start, TOK_COMMA) < eq && op.kind != TOK_ASSIGN)
    return fail_at(c, ERR_NOT_ASSIGNABLE, t);
  if (is_aug(op.kind)) {
    int32_t ops[5] = {OP_BINARY_ADD, OP_BINARY_SUB, OP_BINARY_MUL, OP_BINARY_DIV, OP_BINARY_MOD};
    int32_t arith = ops[op.kind - TOK_PLUS_ASSIGN];
    int32_t ts = start, te = eq;
    ungroup_target(c, &ts, &te);
    const Token& tt = c.t[ts];
    if (tt.kind == TOK_NAME && te == ts + 1) {
      int32_t l = resolve(c, tt.value);
      if (l < 0) return fail_at(c, tt.value < NUM_RESERVED_NAMES || find_func(c, tt.value) >= 0 ? ERR_UNSUPPORTED : ERR_UNDEFINED_NAME, tt);
      int32_t kt = c.locals[l].kind;
      emit(c, OP_LOAD_VAR, l);
      c.p = eq + 1;
      const Token& at = tk(c);
      int32_t k = expr(c);
      if (c.failed) return false;
      if (kt == KIND_LIST && op.kind == TOK_PLUS_ASSIGN && k == KIND_LIST) emit(c, OP_LIST_EXTEND);
      else if (kt == KIND_INT && k == KIND_INT) emit(c, arith);
      else return fail_at(c, ERR_BAD_OPERAND, kt != KIND_INT && kt != KIND_LIST ? tt : at, kt != KIND_INT && kt != KIND_LIST ? kt : k);
      emit(c, OP_STORE_VAR, l);
      return false;
    }
    c.p = ts;
    if (!subscript_target(c, te)) return false;
    emit(c, OP_DUP2);
    emit(c, OP_INDEX);
    c.p = eq + 1;
    const Token& at = tk(c);
    int32_t k = expr(c);
    if (c.failed) return false;
    if (k != KIND_INT) return fail_at(c, ERR_BAD_OPERAND, at, k);
    emit(c, arith);
    emit(c, OP_ROT3);
    emit(c, OP_STORE_INDEX);
    return false;
  }
  // plain or tuple assignment
  const int32_t eq2 = find_top(c, eq + 1, TOK_ASSIGN);  // `a = b = 1`; `a = b + = 1` is CPython's syntax error
  if (eq2 >= 0) return fail_at(c, binary_or_prefix_op(c.t[eq2 - 1].kind) ? ERR_INVALID_SYNTAX : ERR_UNSUPPORTED, c.t[eq2]);
  int32_t lc = find_top(c, start, TOK_COMMA);
  int32_t rc = find_top(c, eq + 1, TOK_COMMA);
  bool ltuple = (lc >= 0 && lc < eq) || (paren_group(c, start, eq) >= 0 && find_top(c, start + 1, TOK_COMMA) >= 0 &&
                                          find_top(c, start + 1, TOK_COMMA) < eq);
  int32_t pr = paren_group(c, eq + 1, end);
  bool rtuple = rc >= 0 || (pr >= 0 && find_top(c, eq + 2, TOK_COMMA) >= 0 && find_top(c, eq + 2, TOK_COMMA) < pr);
  if (ltuple || rtuple) {
    tuple_assign(c, start, eq, eq + 1, end);
    if (!c.failed) c.p = end;
    return false;
  }
  c.p = eq + 1;
  const Token& at = tk(c);
  int32_t k = expr(c);
  if (c.failed || !at_line_end(c)) {
    target_error_first(c, 1, &start, &eq);
    return false;
  }
  if (k == KIND_NONE) {
    fail_at(c, ERR_NONE_VALUE, at);
    target_error_first(c, 1, &start, &eq);
    return false;
  }
  int32_t after = c.p;
  c.p = start;
  store_target(c, eq, k);
  if (!c.failed && c.p != eq) fail(c, ERR_NOT_ASSIGNABLE);
  c.p = after;
  return false;
}

// ---------------------------------------------------------------------------------------------
// Statements, without recursion: `block` keeps the open blocks and compound statements on an
// explicit stack (Compiler::sframes), as parse_expr does for expressions. The first error ends
// the block (every caller stops at c.failed).

enum StmtFrameType : uint8_t { SF_BLOCK, SF_IF, SF_WHILE, SF_FOR };
enum IfPhase : uint8_t { IF_FIRST, IF_ELIF, IF_ELSE };

VG_HD inline SFrame* push_sframe(Compiler& c, int32_t& sp, uint8_t type) {
  if (sp >= MAX_SFRAMES) {  // unreachable: blocks nest at most MAX_BLOCK_DEPTH deep
    fail(c, ERR_TOO_DEEP, MAX_BLOCK_DEPTH);
    return nullptr;
  }
  SFrame* s = &c.sframes[sp++];
  s->a = s->b = s->elifs = 0;
  s->type = type;
  s->phase = 0;
  s->ends = s->all = s->has_else = s->forever = false;
  return s;
}

// `if` and `elif` conditions: the jump over the branch (its pc).
VG_HD inline int32_t branch_condition(Compiler& c) {
  const Token& at = tk(c);
  int32_t k = expr(c);
  if (k == KIND_NONE) fail_at(c, ERR_BAD_OPERAND, at, k);
  truth(c, k);
  int32_t jf = emit(c, OP_JUMP_IF_FALSE, 0);
  expect(c, TOK_COLON);
  return jf;
}

VG_HD inline bool push_loop(Compiler& c, int32_t cont) {
  if (c.nloops > MAX_BLOCK_DEPTH) return fail(c, ERR_TOO_DEEP, MAX_BLOCK_DEPTH);
  c.loops[c.nloops].cont = cont;
  c.loops[c.nloops].brk_chain = NO_CHAIN;
  c.loops[c.nloops].has_break = false;
  c.nloops++;
  return true;
}

// `while cond:` up to its block: *top the loop's pc, *jf the exit jump (-1 for `while True`).
VG_HD inline bool while_head(Compiler& c, int32_t* top, int32_t* jf, bool* forever) {
  advance(c);  // while
  *top = c.n;
  *forever = check(c, TOK_TRUE) && kind_at(c, c.p + 1) == TOK_COLON;
  *jf = -1;
  if (*forever) {
    advance(c);
  } else {
    const Token& at = tk(c);
    int32_t k = expr(c);
    if (k == KIND_NONE) fail_at(c, ERR_BAD_OPERAND, at, k);
    truth(c, k);
    *jf = emit(c, OP_JUMP_IF_FALSE, 0);
  }
  return expect(c, TOK_COLON) && push_loop(c, *top);
}

// `for var in range(...)/list:` up to its block: *top the FOR_* instruction, *exit its exit jump.
VG_HD inline bool for_head(Compiler& c, int32_t* top, int32_t* exit) {
  advance(c);  // for
  const Token& var = tk(c);
  if (!check(c, TOK_NAME)) return fail(c, ERR_EXPECTED, TOK_NAME);
  advance(c);
  if (!check(c, TOK_IN)) return check(c, TOK_COMMA) ? fail(c, ERR_UNSUPPORTED) : fail(c, ERR_EXPECTED, TOK_IN);
  advance(c);
  begin_scope(c);
  int32_t op, base;
  if (check(c, TOK_NAME) && tk(c).value == BUILTIN_RANGE && kind_at(c, c.p + 1) == TOK_LPAREN) {
    const Token& open = c.t[c.p + 1];
    advance(c);
    advance(c);
    int32_t n = 0;
    while (!check(c, TOK_RPAREN) && !c.failed) {
      if (check(c, TOK_NAME) && kind_at(c, c.p + 1) == TOK_ASSIGN) return fail(c, ERR_KEYWORD_ARGUMENT);
      const Token& at = tk(c);
      int32_t k = expr(c);
      if (c.failed) return false;
      if (++n > 3) return fail_at(c, ERR_WRONG_ARG_COUNT, at, 3);
      if (k != KIND_INT) return fail_at(c, ERR_TYPE_MISMATCH, at, KIND_INT);
      if (!match(c, TOK_COMMA)) break;
    }
    if (!expect(c, TOK_RPAREN)) return false;
    if (n == 0) return fail_at(c, ERR_WRONG_ARG_COUNT, open, 1);
    base = declare(c, -1, KIND_INT);  // counter, stop, step
    declare(c, -1, KIND_INT);
    declare(c, -1, KIND_INT);
    if (n == 1) {
      emit(c, OP_STORE_VAR, base + 1);
      emit(c, OP_LOAD_CONST, 0);
      emit(c, OP_STORE_VAR, base);
    } else {
      if (n == 3) emit(c, OP_STORE_VAR, base + 2);
      emit(c, OP_STORE_VAR, base + 1);
      emit(c, OP_STORE_VAR, base);
    }
    if (n < 3) {
      emit(c, OP_LOAD_CONST, 1);
      emit(c, OP_STORE_VAR, base + 2);
    }
    op = OP_FOR_RANGE;
  } else {
    const Token& at = tk(c);
    int32_t k = expr(c);
    if (c.failed) return false;
    if (k != KIND_LIST) return fail_at(c, ERR_TYPE_MISMATCH, at, KIND_LIST);
    base = declare(c, -1, KIND_LIST);  // list, index
    declare(c, -1, KIND_INT);
    emit(c, OP_STORE_VAR, base);
    emit(c, OP_LOAD_CONST, 0);
    emit(c, OP_STORE_VAR, base + 1);
    op = OP_FOR_LIST;
  }
  if (!expect(c, TOK_COLON)) return false;
  *top = emit(c, op, base);
  *exit = emit(c, OP_JUMP, 0);
  store_name(c, var, KIND_INT);
  return push_loop(c, *top);
}

// A block; true when control can never reach its end (some statement always returns). Nested
// blocks run on the statement stack: a compound statement's frame waits for its block's result.
VG_HD VG_NOINLINE bool block(Compiler& c) {
  int32_t sp = 0;
  bool r = false;  // what the block or statement that just ended returned
  enum { START, NEXT, STATEMENT_DONE, BLOCK_DONE } state = START;
  for (;;) {
    if (c.failed) return false;
    SFrame* s = sp > 0 ? &c.sframes[sp - 1] : nullptr;
    switch (state) {
      case START:  // a block at c.p: indented, or one simple statement on the header's line
        if (match(c, TOK_NEWLINE)) {
          if (!check(c, TOK_INDENT)) return fail(c, ERR_EXPECTED_INDENT);
          advance(c);
          // An empty block: never from the lexer, but token arrays may hold one (INDENT DEDENT)
          if (check(c, TOK_DEDENT) || check(c, TOK_EOF)) return fail(c, ERR_EXPECTED_INDENT);
          if (++c.blocks > MAX_BLOCK_DEPTH) return fail(c, ERR_TOO_DEEP, MAX_BLOCK_DEPTH);
          begin_scope(c);
          if (!push_sframe(c, sp, SF_BLOCK)) return false;
          state = NEXT;
        } else {
          begin_scope(c);
          r = simple_statement(c);
          end_scope(c);
          if (!c.failed) expect(c, TOK_NEWLINE);
          r = r && !c.failed;
          state = BLOCK_DONE;
        }
        break;
      case NEXT:  // the next statement of the indented block on top
        if (check(c, TOK_DEDENT) || check(c, TOK_EOF)) {
          end_scope(c);
          c.blocks--;
          expect(c, TOK_DEDENT);
          r = s->ends && !c.failed;
          sp--;
          state = BLOCK_DONE;
          break;
        }
        switch (tk(c).kind) {
          case TOK_IF: {
            advance(c);  // if
            int32_t jf = branch_condition(c);
            if (!(s = push_sframe(c, sp, SF_IF))) return false;
            s->a = jf;
            s->b = NO_CHAIN;  // the jumps to the end of the whole statement
            s->phase = IF_FIRST;
            state = START;
            break;
          }
          case TOK_WHILE: {
            int32_t top, jf;
            bool forever;
            if (!while_head(c, &top, &jf, &forever) || !(s = push_sframe(c, sp, SF_WHILE))) return false;
            s->a = top;
            s->b = jf;
            s->forever = forever;
            state = START;
            break;
          }
          case TOK_FOR: {
            int32_t top, exit;
            if (!for_head(c, &top, &exit) || !(s = push_sframe(c, sp, SF_FOR))) return false;
            s->a = top;
            s->b = exit;
            state = START;
            break;
          }
          case TOK_INDENT: return fail(c, ERR_UNEXPECTED_INDENT);
          default:
            r = simple_statement(c);
            if (!c.failed) expect(c, TOK_NEWLINE);
            state = STATEMENT_DONE;
        }
        break;
      case STATEMENT_DONE:  // the statement returned r into the indented block on top
        if (r) s->ends = true;
        state = NEXT;
        break;
      case BLOCK_DONE:  // the block returned r into the compound statement on top
        if (sp == 0) return r;
        if (s->type == SF_IF) {
          if (s->phase == IF_FIRST) {
            s->ends = r;  // this branch always returns: no jump over the others
            s->all = r;
          } else if (s->phase == IF_ELIF) {
            s->ends = r;
            s->all = r && s->all;
          } else {
            s->all = r && s->all;
            s->has_else = true;
          }
          if (s->phase != IF_ELSE && (check(c, TOK_ELIF) || check(c, TOK_ELSE))) {
            if (!s->ends) emit_chained(c, OP_JUMP, &s->b);
            if (!c.failed) set_arg(c, s->a, c.n);
            s->a = -1;
            if (check(c, TOK_ELIF)) {
              c.ops = 0;  // the last expression's operators are not around the elif
              if (!nest(c, c.elifs)) return false;
              s->elifs++;
              advance(c);
              s->a = branch_condition(c);
              s->phase = IF_ELIF;
            } else {
              advance(c);
              expect(c, TOK_COLON);
              s->phase = IF_ELSE;
            }
            state = START;
            break;
          }
          if (s->a >= 0 && !c.failed) set_arg(c, s->a, c.n);
          patch_chain(c, s->b, c.n);
          c.elifs -= s->elifs;
          r = s->has_else && s->all;
        } else {  // a loop: jump back to the top, then the exits land here
          emit(c, OP_JUMP, s->a);
          LoopCtx& l = c.loops[--c.nloops];
          if (s->type == SF_WHILE) {
            if (s->b >= 0 && !c.failed) set_arg(c, s->b, c.n);
            patch_chain(c, l.brk_chain, c.n);
            r = s->forever && !l.has_break;
          } else {
            if (!c.failed) set_arg(c, s->b, c.n);
            patch_chain(c, l.brk_chain, c.n);
            end_scope(c);
            r = false;
          }
          // Python's `while ...: ... else:` (run when the loop ends without break): not ours.
          if (check(c, TOK_ELSE)) {
            const Token& e = tk(c);
            advance(c);
            if (!expect(c, TOK_COLON)) return false;  // `else x = 1`: CPython's syntax error first
            return fail_at(c, ERR_LOOP_ELSE, e);
          }
        }
        sp--;
        state = STATEMENT_DONE;
        break;
    }
  }
}

// Pass 1: every `def` signature; bodies are skipped by INDENT/DEDENT counting.
VG_HD inline bool signatures(Compiler& c) {
  while (!c.failed && !check(c, TOK_EOF)) {
    if (match(c, TOK_NEWLINE)) continue;
    if (docstring(c)) {  // the module's docstring, or any string statement between functions
      if (bad_escape(c, false)) return false;
      if (c.p == c.esc_tok[1]) c.named_at = c.p;  // refused after the bodies' syntax errors (compile_tokens)
      advance(c);
      continue;
    }
    if (check(c, TOK_INDENT)) return fail(c, ERR_UNEXPECTED_INDENT);
    if (check(c, TOK_RESERVED)) return fail(c, ERR_RESERVED_KEYWORD);
    if (!check(c, TOK_DEF)) return fail(c, ERR_EXPECTED_DEF);
    if (c.nfuncs >= MAX_FUNCS) return fail(c, ERR_TOO_MANY_FUNCTIONS, MAX_FUNCS);
    FuncSig& f = c.funcs[c.nfuncs];
    f.def_tok = c.p;
    advance(c);
    const Token& name = tk(c);
    if (!expect(c, TOK_NAME)) return false;
    // A module-level `__builtins__` replaces CPython's builtins for every function defined after it.
    if (name.value < NUM_RESERVED_NAMES || name.value == BUILTINS_NAME) return fail_at(c, ERR_BUILTIN_NAME, name);
    if (find_func(c, name.value) >= 0) return fail_at(c, ERR_DUPLICATE_FUNCTION, name);
    f.name = name.value;
    f.pc = -1;
    f.chain = NO_CHAIN;
    f.nparams = 0;
    if (!expect(c, TOK_LPAREN)) return false;
    while (!check(c, TOK_RPAREN)) {
      const Token& pn = tk(c);
      if (!expect(c, TOK_NAME)) return false;
      if (pn.value < NUM_RESERVED_NAMES) return fail_at(c, ERR_BUILTIN_NAME, pn);
      for (int32_t i = 0; i < f.nparams; i++)
        if (f.param_names[i] == pn.value) return fail_at(c, ERR_DUPLICATE_PARAM, pn);
      if (f.nparams >= MAX_PARAMS) return fail_at(c, ERR_TOO_MANY_PARAMS, pn, MAX_PARAMS);
      if (!expect(c, TOK_COLON)) return false;
      int32_t k = parse_type(c);
      if (k < 0) return false;
      f.param_names[f.nparams] = pn.value;
      f.params[f.nparams++] = k;
      if (!match(c, TOK_COMMA)) break;
    }
    if (!expect(c, TOK_RPAREN) || !expect(c, TOK_ARROW)) return false;
    f.ret = parse_type(c);
    if (f.ret < 0 || !expect(c, TOK_COLON)) return false;
    f.body_tok = c.p;
    c.nfuncs++;
    if (match(c, TOK_NEWLINE)) {
      if (!check(c, TOK_INDENT)) return fail(c, ERR_EXPECTED_INDENT);
      int32_t d = 0;
      do {
        if (check(c, TOK_INDENT)) d++;
        else if (check(c, TOK_DEDENT)) d--;
        advance(c);
      } while (d > 0 && !check(c, TOK_EOF));
    } else {
      while (!check(c, TOK_NEWLINE) && !check(c, TOK_EOF)) advance(c);
      match(c, TOK_NEWLINE);
    }
  }
  if (!c.failed && c.nfuncs == 0) return fail_at(c, ERR_EMPTY_PROGRAM, c.t[0]);
  return !c.failed;
}

// Pass 2: one function's code: FUNC header, parameters as locals 0..n-1, then the body.
VG_HD inline bool function(Compiler& c, int32_t fi) {
  FuncSig& f = c.funcs[fi];
  c.cur = fi;
  c.p = f.body_tok;
  c.nlive = 0;
  c.scope = 0;
  c.nloops = 0;
  c.blocks = 0;
  c.depth = 0;
  c.elifs = c.ops = 0;
  f.pc = emit(c, OP_FUNC, 0);
  if (c.failed) return false;
  patch_chain(c, f.chain, f.pc);
  f.chain = NO_CHAIN;
  for (int32_t i = 0; i < f.nparams; i++) {
    if (find_func(c, f.param_names[i]) >= 0) {
      // point at the parameter: walk the signature tokens for the name
      for (int32_t j = f.def_tok; j < f.body_tok; j++)
        if (c.t[j].kind == TOK_NAME && c.t[j].value == f.param_names[i] && kind_at(c, j + 1) == TOK_COLON)
          return fail_at(c, ERR_FUNCTION_NAME, c.t[j]);
    }
    declare(c, f.param_names[i], f.params[i]);
  }
  c.max_slots = f.nparams;
  bool ends = block(c);
  if (c.failed) return false;
  if (!ends) return fail_at(c, ERR_MISSING_RETURN, c.t[f.def_tok + 1]);
  f.nlocals = c.max_slots;
  set_arg(c, f.pc, f.nparams | (f.nlocals << 8));
  return true;
}

// The statement or clause header that starts at token i, compiled for its grammar errors only,
// after a name or type error has ended the compile (the code it emits is dropped with it). A
// header's block is not entered: its lines are checked on their own.
VG_HD VG_NOINLINE void line_grammar(Compiler& c, int32_t i) {
  c.p = i;
  c.failed = false;
  c.depth = c.ops = c.elifs = c.nloops = 0;
  const int32_t k = tk(c).kind;
  int32_t top, jf;
  bool forever;
  switch (k) {
    case TOK_IF: case TOK_ELIF: advance(c); branch_condition(c); break;
    case TOK_ELSE: advance(c); expect(c, TOK_COLON); break;
    case TOK_WHILE: while_head(c, &top, &jf, &forever); break;
    case TOK_FOR: for_head(c, &top, &jf); break;
    default: simple_statement(c); break;
  }
  if (c.failed) return;
  if (k == TOK_IF || k == TOK_ELIF || k == TOK_ELSE || k == TOK_WHILE || k == TOK_FOR) {
    if (match(c, TOK_NEWLINE)) {  // as block() starts one
      if (!check(c, TOK_INDENT)) fail(c, ERR_EXPECTED_INDENT);
      return;
    }
    simple_statement(c);  // the block on the header's line
    if (c.failed) return;
  }
  expect(c, TOK_NEWLINE);
}

// A name or type error at token `from` ended the compile of a function whose tokens end before
// `end`, but CPython reports every grammar error first: the later lines of the function are
// checked one by one (line_grammar). True when one has such an error (then in c.err).
VG_HD inline bool rest_of_body_error(Compiler& c, int32_t from, int32_t end) {
  const int32_t nlive = c.nlive, scope = c.scope;
  for (int32_t i = from; i < end; i++) {
    if (c.t[i].kind != TOK_NEWLINE) continue;
    int32_t j = i + 1;
    while (j < end && (c.t[j].kind == TOK_INDENT || c.t[j].kind == TOK_DEDENT)) j++;
    if (j >= end) break;
    line_grammar(c, j);
    c.nlive = nlive;
    c.scope = scope;
    if (c.failed && is_syntax_error(c.err.code)) return true;
    i = j - 1;
  }
  return false;
}

// Where function fi's tokens end: at the next def, else at EOF.
VG_HD inline int32_t body_end(const Compiler& c, int32_t fi) {
  return fi + 1 < c.nfuncs ? c.funcs[fi + 1].def_tok : c.nt - 1;
}

// Pass 1 stops at the first error in a def line or between functions, but CPython parses the file
// in order: a grammar error inside the body of a function before it comes first. So the bodies
// read before the error are compiled, in order, and the first grammar error among them replaces
// the pass-1 error. Other errors (an unknown name: functions after the pass-1 error are unknown)
// end that body's check only. The code they emit is dropped with the failed compile.
VG_HD inline void earlier_body_error(Compiler& c) {
  const CompileError first = c.err;
  const int32_t first_tok = c.err_tok;
  for (int32_t i = 0; i < c.nfuncs && c.funcs[i].body_tok < first_tok; i++) {
    c.failed = false;
    if (function(c, i)) continue;
    if (after_parse_error(c.err.code)) {
      int32_t e = body_end(c, i);
      rest_of_body_error(c, c.err_tok, e < first_tok ? e : first_tok);
    }
    if (is_syntax_error(c.err.code) && c.err_tok < first_tok) return;
  }
  c.failed = true;
  c.err = first;
  c.err_tok = first_tok;
}

// The token that closes the bracket at token i, or -1 when none does before the end of the file.
VG_HD inline int32_t closer(const Compiler& c, int32_t i) {
  for (int32_t d = 0; i < c.nt; i++) {
    int32_t k = c.t[i].kind;
    if (k == TOK_LPAREN || k == TOK_LBRACKET) d++;
    else if ((k == TOK_RPAREN || k == TOK_RBRACKET) && --d == 0) return i;
  }
  return -1;
}

// Whether the expression whose first operand is token j runs on to the end of the file (inside a
// bracket that is never closed, where the lexer puts NEWLINE only just before EOF). CPython's parser
// then asks for a token past the end before it can blame a missing comma, and "was never closed" wins.
VG_HD inline bool runs_to_eof(const Compiler& c, int32_t j) {
  int32_t i = j + 1;  // just after an operand
  for (;;) {
    int32_t k = c.t[i].kind;
    if (k != TOK_LPAREN && k != TOK_LBRACKET) {  // not a call or a subscript: an operator, or the end
      if (!binary_or_prefix_op(k) && k != TOK_IF && k != TOK_ELSE && k != TOK_DOT) break;
      while (i + 1 < c.nt && binary_or_prefix_op(c.t[i + 1].kind)) i++;  // `not in`, unary signs
      k = c.t[++i].kind;
      if (operand_start(k)) { i++; continue; }
      if (k != TOK_LPAREN && k != TOK_LBRACKET) break;
    }
    int32_t m = closer(c, i);  // a bracketed group
    if (m < 0) return true;
    i = m + 1;
  }
  int32_t k = c.t[i].kind;
  return k == TOK_EOF || k == TOK_NEWLINE || k == TOK_DEDENT;
}

// Whether tokens s..e are one parenthesized expression (not a tuple): CPython's node for it, and
// so the start of a "forgot a comma" range, is what is inside.
VG_HD inline bool bare_group(Compiler& c, int32_t s, int32_t e) {
  if (e <= s + 1 || paren_group(c, s, e + 1) != e) return false;
  for (int32_t i = s + 1, d = 0; i < e; i++) {
    int32_t k = c.t[i].kind;
    if (k == TOK_LPAREN || k == TOK_LBRACKET) d++;
    else if (k == TOK_RPAREN || k == TOK_RBRACKET) d--;
    else if (k == TOK_COMMA && d == 0) return false;
  }
  return true;
}

// Two operands in a row (`retrn a`, `a = 1 a = 2`, `f(a b)`) are a syntax error that the parser
// meets only after names and types in that statement, or in a later pass. CPython reports it
// first: at the second operand, or inside brackets as "Perhaps you forgot a comma?" at the start
// of the element. So after a failed compile, the first such pair replaces the error when it comes
// before it, anywhere after a name or type error (after_parse_error), or later in its logical
// line unless the error is itself a syntax error (a target that
// cannot be assigned counts as one only when the pair is past its '='). A line that starts with a
// pair and ends with ':' may be CPython's `match a:` or `case 1:` (soft keywords: names to us, and
// the token path has no names' text, so the rule must not need it): its own error stands.
VG_HD inline bool adjacent_operands(Compiler& c) {
  int32_t* elem = c.scan_elem;  // per open bracket: the token where its current element began
  int32_t* open = c.scan_open;  // and the bracket itself
  uint8_t* params = c.scan_params;  // a def's parameters: 1, 2 once in a parameter's annotation
  int32_t d = 0;
  bool past = false;  // at or after the error's position: only its logical line is left
  // (or the whole file after a name or type error, which every syntax error comes before)
  const bool anywhere = after_parse_error(c.err.code);
  bool assigned = false;  // an '=' since then: `a a = 1` is the pair's error, `1 = a b` the target's
  for (int32_t i = 0; i + 1 < c.nt; i++) {
    const Token& t = c.t[i];
    int32_t k = t.kind;
    past = past || i >= c.err_tok;
    if (past && !anywhere && (k == TOK_NEWLINE || k == TOK_EOF)) return false;
    assigned = assigned || (past && d == 0 && (k == TOK_ASSIGN || is_aug(k)));
    if (k == TOK_LPAREN || k == TOK_LBRACKET) {
      if (d == MAX_EXPR_DEPTH) return false;  // the parser's too_deep stands
      open[d] = i;
      params[d] = k == TOK_LPAREN && i >= 2 && c.t[i - 1].kind == TOK_NAME && c.t[i - 2].kind == TOK_DEF;
      elem[d++] = i + 1;
    } else if (k == TOK_RPAREN || k == TOK_RBRACKET) {
      if (d > 0) d--;
    } else if (k == TOK_COMMA && d > 0) {
      elem[d - 1] = i + 1;
      if (params[d - 1]) params[d - 1] = 1;
    } else if (k == TOK_COLON && d > 0 && params[d - 1] == 1) {  // an annotation is an expression
      elem[d - 1] = i + 1;
      params[d - 1] = 2;
    }
    const Token& n = c.t[i + 1];
    // `a not b` is a pair too (`not` after an operand can only start `not in`): CPython's parser
    // blames the token after the `not`, or inside brackets the element, as for `a b`
    bool not_pair = n.kind == TOK_NOT && kind_at(c, i + 2) != TOK_IN;
    // a statement's keyword after an operand (`pas return x`): blamed itself, never a comma's
    bool kw_pair = n.kind == TOK_RETURN || n.kind == TOK_PASS || n.kind == TOK_BREAK || n.kind == TOK_CONTINUE ||
                   n.kind == TOK_DEF || n.kind == TOK_WHILE || n.kind == TOK_ELIF;
    if (!operand_end(k) || !(operand_start(n.kind) || not_pair || kw_pair)) continue;
    bool line_start = i == 0 || c.t[i - 1].kind == TOK_NEWLINE || c.t[i - 1].kind == TOK_INDENT ||
                      c.t[i - 1].kind == TOK_DEDENT;
    // (`match x:` may be a match statement; a literal glued to a keyword's letters, `wh's'ile x:`, is
    // not, and CPython's parser fails at it)
    if (line_start && k == TOK_NAME && n.kind != TOK_STRING && n.kind != TOK_OPAQUE && !kw_pair &&
        kind_at(c, line_end(c, i) - 1) == TOK_COLON)
      continue;
    // `f(a b)`; but `def f(a b)` is no expression, and CPython's rule skips a name before a string
    // (`f(b 'x')`: its parser fails at the string)
    bool comma = d > 0 && params[d - 1] != 1 && !(k == TOK_NAME && n.kind == TOK_STRING) && !kw_pair;
    int32_t s = comma ? elem[d - 1] : i + 1 + not_pair, e = i;
    while (comma && bare_group(c, s, e)) s++, e--;  // `((a + 1) b)`: the range starts at `a`
    const Token& at = c.t[s];
    // (the parser meets the pair at its second operand: a syntax error before that comes first)
    bool else_missing = c.err.code == ERR_EXPECTED && c.err.arg == TOK_ELSE;  // `1 if a b`: CPython blames the else
    bool after = i + 1 > c.err_tok || (i + 1 == c.err_tok && else_missing);
    if (after && is_syntax_error(c.err.code) && (c.err.code != ERR_NOT_ASSIGNABLE || assigned)) return false;
    // In a bracket never closed, CPython blames the bracket when its parser read to the end: the
    // element runs into it, or the pair is on a later line than the bracket (`[1,\n n y, 2`).
    if (d > 0 && (runs_to_eof(c, i + 1) || (n.line > c.t[open[d - 1]].line && closer(c, open[d - 1]) < 0)))
      return true;  // never_closed's error
    c.err.code = comma ? ERR_FORGOT_COMMA : ERR_INVALID_SYNTAX;
    c.err.line = at.line;
    c.err.col = at.col;
    c.err.arg = 0;
    c.err_tok = s;
    return false;
  }
  return false;
}

// A name or type error stops the compile, but CPython reports every grammar error in the file
// before such errors: the later lines of the failed function (rest_of_body_error), then the
// bodies of the functions after it are compiled, in order, and the first grammar error wins.
// (The rest of the statement with the error is not checked.)
VG_HD inline void later_body_error(Compiler& c, int32_t next) {
  if (!after_parse_error(c.err.code)) return;
  const CompileError first = c.err;
  const int32_t first_tok = c.err_tok;
  if (rest_of_body_error(c, first_tok, body_end(c, next - 1))) return;
  for (int32_t i = next; i < c.nfuncs; i++) {
    c.failed = false;
    if (function(c, i)) continue;
    if (is_syntax_error(c.err.code)) return;
    if (after_parse_error(c.err.code) && rest_of_body_error(c, c.err_tok, body_end(c, i))) return;
  }
  c.failed = true;
  c.err = first;
  c.err_tok = first_tok;
}

// So such an error gives way to the first INDENT that opens no block (the last token before it,
// layout aside, is not a ':'), which the parser had not reached, or in the signatures pass had
// skipped: CPython's "unexpected indent". So does a grammar error from a later function's body
// (later_body_error) that comes after it. Later passes may still put an earlier pair of operands
// before it.
VG_HD inline void stray_indent(Compiler& c) {
  const bool any = after_parse_error(c.err.code);
  if (!any && !is_syntax_error(c.err.code)) return;
  for (int32_t i = 0, last = -1; i < c.nt && (any || i < c.err_tok); i++) {
    int32_t k = c.t[i].kind;
    if (k == TOK_INDENT && last != TOK_COLON) {
      c.failed = false;  // (fail_at keeps a first error)
      fail_at(c, ERR_UNEXPECTED_INDENT, c.t[i]);
      return;
    }
    if (k != TOK_NEWLINE && k != TOK_INDENT && k != TOK_DEDENT) last = k;
  }
}

// A bracket left open at the end of the file swallows every later line (later functions too) into
// its statement, and CPython, whose parser reads ahead, mostly reports "'(' was never closed" at the
// innermost bracket still open; it never gets to names, types and unsupported constructs. So that
// error replaces all but a syntax error up to the bracket's line. Random programs with one closing
// bracket deleted: the same place as CPython in 2,588 of 3,000.
VG_HD inline void never_closed(Compiler& c, bool force) {
  int32_t* open = c.scan_open;
  int32_t d = 0;
  for (int32_t i = 0; i < c.nt; i++) {
    int32_t k = c.t[i].kind;
    if (k == TOK_LPAREN || k == TOK_LBRACKET) {
      if (d == MAX_EXPR_DEPTH) return;  // the parser's too_deep stands
      open[d++] = i;
    } else if (k == TOK_RPAREN || k == TOK_RBRACKET) {
      if (d-- == 0) return;
    }
  }
  if (d == 0) return;
  const Token& b = c.t[open[d - 1]];
  // The error's line, where an INDENT or DEDENT takes the next token's (token input may place them
  // anywhere: env bodies put an INDENT before a NEWLINE); an error with only layout after it is at the end.
  int32_t e = c.err_tok, end = c.err_tok;
  while (e < c.nt - 1 && (c.t[e].kind == TOK_INDENT || c.t[e].kind == TOK_DEDENT)) e++;
  while (end < c.nt - 1 && (c.t[end].kind == TOK_NEWLINE || c.t[end].kind == TOK_INDENT || c.t[end].kind == TOK_DEDENT)) end++;
  bool later = c.t[e].line > b.line || end == c.nt - 1;
  if (force || later || !is_syntax_error(c.err.code)) {
    c.err.code = ERR_NEVER_CLOSED;
    c.err.line = b.line;
    c.err.col = b.col;
    c.err.arg = b.kind;
  }
}

// Compile a token array (ending with EOF) into `code`. Returns the number of words, or -1 with
// c.err set. `meta` (nullable) receives FUNC_META ints per function; *nfuncs their count.
// lexed: the Lexer that made toks from a source (compile_source). Its tokens' kinds and values are
// valid by construction, and it found the first mismatched bracket itself, so the check of
// untrusted tokens below is skipped (about 6% of the instructions of compiling a corpus program).
VG_HD VG_NOINLINE inline int32_t compile_tokens(Compiler& c, const Token* toks, int32_t ntoks, uint32_t* code, int32_t cap,
                                               const Lexer* lexed = nullptr) {
  c.t = toks;
  c.nt = ntoks;
  c.p = 0;
  c.code = code;
  c.cap = cap < MAX_CODE ? cap : MAX_CODE;
  c.n = 0;
  c.nfuncs = 0;
  c.failed = false;
  c.err.code = ERR_OK;
  c.err.line = c.err.col = c.err.arg = 0;
  for (int32_t k = 0; k < 2; k++) {
    c.esc_tok[k] = lexed ? lexed->esc_tok[k] : -1;
    if (lexed) c.esc[k] = lexed->esc[k];
  }
  c.named_at = -1;
  if (ntoks <= 0 || toks[ntoks - 1].kind != TOK_EOF) {
    c.failed = true;
    c.err.code = ERR_INVALID_SYNTAX;
    c.err.line = c.err.col = 1;
    return -1;
  }
  // Tokens may come from outside: check them first. A closing bracket must match the open one
  // (CPython: "closing parenthesis ']' does not match opening parenthesis '('"); the parser counts
  // ( and [ alike; a closing bracket with none open is CPython's "unmatched ')'". Bit d of `square`:
  // the bracket open at depth d is '['. Brackets left open and nesting past MAX_EXPR_DEPTH (= 64,
  // the bits) are left to the parser's own errors.
  if (lexed && lexed->mismatch >= 0) {
    fail_at(c, ERR_INVALID_SYNTAX, toks[lexed->mismatch]);
    return -1;
  }
  uint64_t square = 0;
  int32_t depth = 0;
  for (int32_t i = 0; !lexed && i < ntoks; i++) {
    const Token& t = toks[i];
    bool bad = t.kind < 0 || t.kind >= NUM_TOKENS || (t.kind == TOK_EOF && i != ntoks - 1) ||
               (t.kind == TOK_NAME && (t.value < 0 || t.value >= MAX_NAMES)) ||
               (t.kind == TOK_INT && t.value < 0) || (t.kind == TOK_STRING && (t.value < 0 || t.value > 7)) ||
               (t.kind == TOK_OPAQUE && t.value != ERR_FLOAT && t.value != ERR_INT_TOO_LARGE) ||
               (t.kind == TOK_RESERVED && (t.value < 0 || t.value >= NUM_RESERVED_KEYWORDS));
    if (t.kind == TOK_LPAREN || t.kind == TOK_LBRACKET) {
      if (depth < 64) square = (square & ~(1ull << depth)) | (uint64_t)(t.kind == TOK_LBRACKET) << depth;
      depth++;
    } else if (t.kind == TOK_RPAREN || t.kind == TOK_RBRACKET) {
      bad |= depth == 0;
      if (depth > 0 && --depth < 64) bad |= ((square >> depth) & 1) != (uint64_t)(t.kind == TOK_RBRACKET);
    }
    if (bad) {
      fail_at(c, ERR_INVALID_SYNTAX, t);
      return -1;
    }
  }
  bool ok = signatures(c);
  if (!ok) earlier_body_error(c);
  int32_t fi = 0;
  for (; ok && fi < c.nfuncs; fi++) ok = function(c, fi);
  // A \N{name} string between functions is valid Python refused: it ranks with name and type
  // errors, after every syntax error and before a name or type error that comes after it.
  if (c.named_at >= 0 && (ok || (after_parse_error(c.err.code) && c.err_tok > c.named_at))) {
    c.failed = false;
    c.p = c.named_at;
    bad_escape(c, true);
    ok = false;
  }
  if (ok) return c.n;
  if (fi > 0) later_body_error(c, fi);  // (fi: just after the function that failed)
  stray_indent(c);
  never_closed(c, adjacent_operands(c));
  return -1;
}

VG_HD inline void write_meta(const Compiler& c, const Lexer* L, int32_t* meta) {
  for (int32_t i = 0; i < c.nfuncs; i++) {
    const FuncSig& f = c.funcs[i];
    int32_t* m = meta + i * FUNC_META;
    m[0] = f.pc;
    if (L && f.name >= NUM_BUILTIN_NAMES) {  // builtin names (a function may be named append or
      m[1] = (int32_t)(L->names[f.name].ptr - L->src);  // pop) point into the builtin table, not src
      m[2] = L->names[f.name].len;
    } else {
      m[1] = -1;
      m[2] = f.name;
    }
    m[3] = f.nparams;
    m[4] = f.ret;
    m[5] = f.nlocals;
    for (int32_t k = 0; k < MAX_PARAMS; k++) m[6 + k] = k < f.nparams ? f.params[k] : -1;
  }
}

// A function's signature packed in one int64 for the batch compilers (0: no function): bit 0
// set, bits 1-2 the return kind, bits 3-7 the parameter count, two bits per parameter kind from
// bit 8 (vramgym.compiler.batch.unpack_signatures reads it).
VG_HD inline int64_t packed_signature(const FuncSig& f) {
  int64_t s = 1 | (int64_t)f.ret << 1 | (int64_t)f.nparams << 3;
  for (int32_t k = 0; k < f.nparams && k < MAX_PARAMS; k++) s |= (int64_t)f.params[k] << (8 + 2 * k);
  return s;
}

// sig[0 .. MAX_FUNCS): each function's packed signature, zeros after the last (all zeros when the
// compile failed, n < 0).
VG_HD inline void write_signatures(const Compiler& c, int32_t n, int64_t* sig) {
  const int32_t nf = n >= 0 ? c.nfuncs : 0;
  for (int32_t i = 0; i < nf; i++) sig[i] = packed_signature(c.funcs[i]);
  for (int32_t i = nf; i < MAX_FUNCS; i++) sig[i] = 0;
}

// Source text -> tokens in toks[0 .. L.n), ending with EOF. False with L.err set on error.
VG_HD inline bool tokenize_source(Lexer& L, const char* src, int64_t len, Token* toks, int32_t tok_cap) {
  L.src = src;
  L.len = len;
  L.pos = 0;
  L.line_start = 0;
  L.line = 1;
  L.toks = toks;
  L.cap = tok_cap < MAX_TOKENS ? tok_cap : MAX_TOKENS;
  L.n = 0;
  L.indents[0] = 0;
  L.nindent = 1;
  L.depth = 0;
  L.square = 0;
  L.mismatch = -1;
  L.failed = false;
  L.cpython_raises = false;
  for (int32_t k = 0; k < 2; k++) {
    L.esc_tok[k] = -1;
    L.esc[k].code = L.esc[k].line = L.esc[k].col = L.esc[k].arg = 0;
  }
  L.err.code = ERR_OK;
  L.err.line = L.err.col = L.err.arg = 0;
  lx_init_names(L);
  if (len > MAX_SOURCE) {
    L.failed = true;
    L.err.code = ERR_TOO_MANY_TOKENS;
    L.err.line = L.err.col = 1;
    L.err.arg = MAX_TOKENS;
    return false;
  }
  return lx_check_bytes(L) && lex(L);
}

// The byte offset where line `line` (1-based) of src starts, with the lexer's line breaks.
VG_HD inline int64_t line_offset(const char* src, int64_t len, int32_t line) {
  int64_t p = 0;
  for (int32_t l = 1; l < line && p < len; p++) {
    if (src[p] == '\n' || (src[p] == '\r' && !(p + 1 < len && src[p + 1] == '\n'))) l++;
  }
  return p;
}

// Our lexer reads the whole file before the parser starts; CPython's tokenizer runs as its parser
// asks for tokens. So after a lexer error, a grammar error in a statement before the error's
// comes first: the statements before it are lexed and compiled again, and such an error replaces
// the lexer's. But after a syntax error CPython's tokenizer reads the rest of the file, and the
// errors it raises there win (a bad number literal, a mismatched bracket), except over an
// "unexpected indent". NUL bytes are refused before parsing, and a non-ASCII character may be a
// name's (`é`) or a comment's to CPython: their errors stand.
VG_HD inline void earlier_grammar_error(Lexer& L, Compiler& c, const char* src, Token* toks, int32_t tok_cap,
                                        uint32_t* code, int32_t code_cap, CompileError* err) {
  const int32_t e = L.err.code;
  const bool raises = L.cpython_raises || L.mismatch >= 0;
  if (e == ERR_NUL_BYTE || e == ERR_NON_ASCII) return;
  int32_t last = -1;  // the last NEWLINE before the error: its statement is the last complete one
  for (int32_t i = 0; i < L.n; i++)
    if (toks[i].kind == TOK_NEWLINE) last = i;
  if (last < 0) return;
  const int64_t cut = line_offset(src, L.len, toks[last].line + 1);
  const CompileError lex_err = L.err;
  // (lexed once already: it cannot fail.) Only a real token may be blamed: the DEDENTs and EOF
  // that end the shortened file are not in the source (`if x:` before the error line would lack
  // its block).
  if (tokenize_source(L, src, cut, toks, tok_cap) && compile_tokens(c, toks, L.n, code, code_cap, &L) < 0 &&
      c.err_tok <= last && (raises ? c.err.code == ERR_UNEXPECTED_INDENT : is_syntax_error(c.err.code)))
    *err = c.err;
  L.failed = true;  // the Lexer still says what became of the whole source (its tokens: the part)
  L.err = lex_err;
}

// Source text -> bytecode. Needs a Lexer, a Compiler and a token buffer of tok_cap tokens.
// Returns the number of code words, or -1 with *err set.
VG_HD inline int32_t compile_source(Lexer& L, Compiler& c, const char* src, int64_t len, Token* toks,
                                    int32_t tok_cap, uint32_t* code, int32_t code_cap, CompileError* err) {
  c.nfuncs = 0;
  if (!tokenize_source(L, src, len, toks, tok_cap)) {
    *err = L.err;
    earlier_grammar_error(L, c, src, toks, tok_cap, code, code_cap, err);
    c.nfuncs = 0;
    return -1;
  }
  int32_t n = compile_tokens(c, toks, L.n, code, code_cap, &L);
  *err = c.err;
  return n;
}

}  // namespace vg
