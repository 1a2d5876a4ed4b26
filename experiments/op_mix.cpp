// The opcodes a workload executes, counted by vm.h's switch interpreter (the one CUDA compiles)
// through its VG_ON_STEP hook. experiments/sass_steps.py builds and feeds this.
// stdin (little-endian): int32 n_prog, n_in, fuel, max_depth, heap_size, max_lists, stack_size;
// per program int32 len, entry_pc, then len uint32 words; int64 in_off[n_in + 1]; int32 words.
// stdout: one line "opcode count" per opcode that ran, then "runs N steps S".
// Built with -DVG_NO_THREADED_DISPATCH -DVG_FUSED_CODE=1, each program runs through its fuse.h
// translation (as the GPU's VG_FUSED_CODE kernels run it) and lines "d code count" count the
// dispatches by their code (plain opcodes below 64, superinstructions from XOP_BIN).
#include <cstdint>
#include <cstdio>
#include <vector>
static unsigned long long g_count[256], g_disp[256];
#define VG_ON_STEP(w) (g_count[(w) & 0xFF]++)
#define VG_ON_DISPATCH(op) (g_disp[(op) & 0xFF]++)
#include "vm.h"
#include "fuse.h"
#ifndef VG_FUSED_CODE
#define VG_FUSED_CODE 0
#endif

template <class T> static bool get(T* p, size_t n = 1) { return fread(p, sizeof(T), n, stdin) == n; }

int main() {
  int32_t h[7];
  if (!get(h, 7)) return 1;
  vg::VMConfig cfg{h[2], h[3], h[4], h[5], h[6]};
  std::vector<std::vector<uint32_t>> code(h[0]);
  std::vector<int32_t> entry(h[0]);
  for (int32_t p = 0; p < h[0]; p++) {
    int32_t len;
    if (!get(&len) || !get(&entry[p]) || len < 0) return 1;
    code[p].resize(len);
    if (len && !get(code[p].data(), len)) return 1;
  }
  std::vector<int64_t> off(h[1] + 1);
  if (!get(off.data(), off.size())) return 1;
  std::vector<int32_t> words(off.back());
  if (!words.empty() && !get(words.data(), words.size())) return 1;
  std::vector<int32_t> stack(cfg.stack_size), heap(cfg.heap_size);
  std::vector<vg::Frame> frames(cfg.max_depth);
  std::vector<vg::ListHdr> lists(cfg.max_lists);
  unsigned long long steps = 0, runs = 0;
  for (int32_t p = 0; p < h[0]; p++) {
    const int32_t len = (int32_t)code[p].size();
    std::vector<vg::Fused> fx(len > 0 ? len : 1);
    std::vector<uint8_t> xop(len > 0 ? len : 1), target(len + 1);
    if (VG_FUSED_CODE && entry[p] >= 0) vg::fuse_program(code[p].data(), len, fx.data(), target.data(), xop.data());
    for (int32_t j = 0; j < h[1]; j++) {
      if (entry[p] < 0) continue;
      vg::Workspace ws{stack.data(), frames.data(), lists.data(), heap.data(), 0, 0};
      vg::RunResult r = vg::run(code[p].data(), len, entry[p], words.data() + off[j], (int32_t)(off[j + 1] - off[j]),
                                cfg, ws, VG_FUSED_CODE ? fx.data() : nullptr, VG_FUSED_CODE ? xop.data() : nullptr);
      steps += r.steps;
      runs++;
    }
  }
  for (int k = 0; k < 256; k++)
    if (g_count[k]) printf("%d %llu\n", k, g_count[k]);
  for (int k = 0; k < 256; k++)
    if (g_disp[k]) printf("d %d %llu\n", k, g_disp[k]);
  printf("runs %llu steps %llu\n", runs, steps);
  return 0;
}
