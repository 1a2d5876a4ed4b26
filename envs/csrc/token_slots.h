// The compiler's input for one candidate body: TaskBank.compiler_token_slots (envs/bank.py) for
// one row, as scalar code for the host (envs/csrc/grammar_cpu.cpp, gm_token_slots) and CUDA
// device code (envs/csrc/grammar_kernels.cu, gm_token_slots_kernel; one thread per row).
//
// The torch code builds every row's slots with ~50 full-width ops; here a row is two passes over
// its body: the first finds what the tail needs (the body's length, its NEWLINEs, its INDENT -
// DEDENT balance, whether it ends with a NEWLINE, INDENT or DEDENT), the second writes the slots in order. Every
// table is Python's (SlotTables, from TaskBank.slot_tables and TaskBank.tensors), so the
// vocabulary and the compiler's token codes live in Python only. No allocation, no recursion, no
// STL, loops bounded by the slot size.
//
// Inputs read from a row are guarded as the torch code treats them: actions clamp to
// [-1, VOCAB_SIZE] (both ends stop the body, as END does), lengths of any value cut the body at
// min(max(length, 0), L). The torch code indexes the bank with the task id (an error out of
// range); here a task id outside [0, ntask) gives a row of zeros and count 0 (the compile kernel
// then fails it, and evaluate_tasks runs no test for such a task).
#pragma once

#if defined(__CUDACC_RTC__)  // NVRTC has no system headers
typedef int int32_t;
typedef long long int64_t;
#else
#include <stdint.h>
#endif

#ifndef GM_HD  // as grammar.h's
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define GM_HD __host__ __device__
#else
#define GM_HD
#endif
#endif

namespace gm {

// the columns of an action code's row in the act table (TaskBank.slot_tables "act")
enum SlotAct { SA_GO, SA_KIND, SA_VALUE, SA_NL, SA_DEPTH, SA_ENDS_LINE, SA_FIELDS };

struct SlotTables {
  const int32_t* act;         // (nact, SA_FIELDS): per action code 0 (negative), 1 + a, nact - 1 (too large or past the length)
  const int32_t* tail;        // (4, 2): (kind, value) of the tail entries NEWLINE, DEDENT, EOF, padding
  const int32_t* prefix;      // (ntask, P, 4): each task's signature tokens, up to the body's INDENT
  const int64_t* prefix_len;  // (ntask,)
  int32_t nact, ntask, P;
};

// a row of S = P + 2L + 3 slots: the most tokens a body of L actions can need (TaskBank.slot_size)
GM_HD inline int64_t slot_size(const SlotTables& T, int32_t L) { return (int64_t)T.P + 2 * (int64_t)L + 3; }

GM_HD inline void put_slot(int32_t* s, int32_t kind, int32_t value, int32_t line, int32_t col) {
#if defined(__CUDA_ARCH__)  // one 16-byte store (the kernel's output rows are 16-byte aligned)
  *reinterpret_cast<int4*>(s) = make_int4(kind, value, line, col);
#else
  s[0] = kind, s[1] = value, s[2] = line, s[3] = col;
#endif
}

// the act-table row of body position k: code = clamp(action, -1, VOCAB_SIZE) + 1, or nact - 1 past the length
GM_HD inline const int32_t* slot_act(const SlotTables& T, int64_t action, int32_t k, int64_t length) {
  int64_t top = T.nact - 1;
  int64_t code = k >= length ? top : (action < -1 ? 0 : (action > top - 1 ? top : action + 1));
  return T.act + code * SA_FIELDS;
}

// Writes the S slots (S, 4) of a body (L actions) for task `task`; returns the tokens used (count).
GM_HD inline int64_t token_slots_row(const SlotTables& T, const int64_t* body, int32_t L, int64_t length, int64_t task,
                                     int32_t* out) {
  const int64_t S = slot_size(T, L);
  int64_t j = 0;
  int64_t count = 0;
  if (task >= 0 && task < T.ntask) {
    // pass 1: the body runs to its first stop; its NEWLINEs and block balance place the tail
    int32_t body_len = 0, nl = 0, depth = 0, last_nl = 1;  // an empty body gets no NEWLINE
    for (; body_len < L; body_len++) {
      const int32_t* a = slot_act(T, body[body_len], body_len, length);
      if (!a[SA_GO]) break;
      nl += a[SA_NL];
      depth += a[SA_DEPTH];
      last_nl = a[SA_ENDS_LINE];  // NEWLINE, INDENT or DEDENT (`... \n DEDENT END`): no NEWLINE added
    }
    const int32_t add_nl = 1 - last_nl;
    const int32_t close = depth + 1 > 0 ? depth + 1 : 0;  // the DEDENTs that close every block
    const int32_t end_line = nl + add_nl + 2;             // line of the DEDENTs and EOF
    const int64_t pl = T.prefix_len[task];
    const int64_t plen = pl < 0 ? 0 : (pl > T.P ? T.P : pl);
    count = plen + body_len + add_nl + close + 1;
    // pass 2: the signature, the body (line 2 on, a column per token), NEWLINE, DEDENTs, EOF
    const int32_t* pre = T.prefix + task * T.P * 4;
    for (; j < plen; j++) put_slot(out + 4 * j, pre[4 * j], pre[4 * j + 1], pre[4 * j + 2], pre[4 * j + 3]);
    for (int32_t k = 0, line = 2; k < body_len && j < S; k++, j++) {
      const int32_t* a = slot_act(T, body[k], k, length);
      put_slot(out + 4 * j, a[SA_KIND], a[SA_VALUE], line, k + 1);
      line += a[SA_NL];
    }
    if (add_nl && j < S) put_slot(out + 4 * j++, T.tail[0], T.tail[1], end_line - 1, body_len + 1);
    for (int32_t d = 0; d < close && j < S; d++, j++) put_slot(out + 4 * j, T.tail[2], T.tail[3], end_line, 1);
    if (j < S) put_slot(out + 4 * j++, T.tail[4], T.tail[5], end_line, 1);
  }
  for (; j < S; j++) put_slot(out + 4 * j, T.tail[6], T.tail[7], 0, 0);
  return count;
}

}  // namespace gm
