// What a scorer warp does with one program on its lanes' inputs, from the CPU: each lane's executed
// words (pc, opcode) through vm.h's switch interpreter (the one CUDA compiles) and its VG_ON_STEP
// hook, then two schedules of those traces in SASS instructions (experiments/scoring_tail.py):
//  today's kernel: every live lane takes a step each iteration; an iteration costs BASE, plus, for
//    each distinct opcode among the live lanes, that opcode's step cost less BASE (the switch's
//    groups run one after the other and reconverge before the next fetch);
//  min-pc: only the lanes at the smallest pc step, for BASE + EXTRA (the reduction, compare and
//    branch that pick them) plus that opcode's cost less BASE.
// A model, not a timing: it says how much lane divergence costs and what a min-pc schedule would
// change, not how long a GPU takes.
//
// stdin (little-endian): float64 cost[64] (SASS a step per opcode), BASE, EXTRA; int32 n_prog,
// max_depth, heap_size, max_lists, stack_size; per program int32 len, entry_pc, fuel, n_lanes,
// len uint32 words, then per lane int32 n_words and that many int32 words (its encoded args).
// stdout: per program "lane_max_steps lane_steps cost minpc_iterations minpc_cost" (lane_steps: the
// sum over its lanes).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

static std::vector<int32_t>* g_trace;
// pc is past the word just fetched here
#define VG_ON_STEP(w) (g_trace->push_back((int32_t)((uint32_t)(pc - 1) << 8 | ((w) & 0xFFu))))
#include "vm.h"

template <class T> static bool get(T* p, size_t n = 1) { return fread(p, sizeof(T), n, stdin) == n; }

int main() {
  double cost[64], base, extra;
  int32_t h[5];
  if (!get(cost, 64) || !get(&base) || !get(&extra) || !get(h, 5)) return 1;
  std::vector<int32_t> stack(h[4]), heap(h[2]);
  std::vector<vg::Frame> frames(h[1]);
  std::vector<vg::ListHdr> lists(h[3]);
  for (int32_t p = 0; p < h[0]; p++) {
    int32_t len, entry, fuel, nl;
    if (!get(&len) || !get(&entry) || !get(&fuel) || !get(&nl) || len < 0 || nl < 0) return 1;
    std::vector<uint32_t> code(len);
    if (len && !get(code.data(), len)) return 1;
    std::vector<std::vector<int32_t>> tr(nl);
    size_t longest = 0, total = 0;
    for (int32_t l = 0; l < nl; l++) {
      int32_t nw;
      if (!get(&nw) || nw < 0) return 1;
      std::vector<int32_t> words(nw);
      if (nw && !get(words.data(), nw)) return 1;
      vg::VMConfig cfg{fuel, h[1], h[2], h[3], h[4]};
      vg::Workspace ws{stack.data(), frames.data(), lists.data(), heap.data(), 0, 0};
      g_trace = &tr[l];
      vg::run(code.data(), len, entry, words.data(), nw, cfg, ws);
      longest = std::max(longest, tr[l].size());
      total += tr[l].size();
    }
    double c = 0, mc = 0;
    for (size_t s = 0; s < longest; s++) {  // today's: lane-synchronous steps
      uint64_t seen = 0;
      c += base;
      for (int32_t l = 0; l < nl; l++)
        if (s < tr[l].size()) {
          const int op = tr[l][s] & 63;  // (opcodes are below 64)
          if (!(seen >> op & 1)) seen |= 1ull << op, c += cost[op] - base;
        }
    }
    long mi = 0;  // min-pc
    std::vector<size_t> at(nl, 0);
    for (;;) {
      int32_t lo = INT32_MAX, op = 0;
      for (int32_t l = 0; l < nl; l++)
        if (at[l] < tr[l].size() && (tr[l][at[l]] >> 8) < lo) lo = tr[l][at[l]] >> 8, op = tr[l][at[l]] & 63;
      if (lo == INT32_MAX) break;
      mi++;
      mc += extra + cost[op];
      for (int32_t l = 0; l < nl; l++)
        if (at[l] < tr[l].size() && (tr[l][at[l]] >> 8) == lo) at[l]++;
    }
    printf("%zu %zu %.0f %ld %.0f\n", longest, total, c, mi, mc);
  }
  return 0;
}
