// Host emulation of the CUDA kernels (vm/csrc/cuda_kernels.cu), for tests without a GPU: every
// thread of a block is a std::thread, and the warp intrinsics the kernels use (__ballot_sync,
// __all_sync, __shfl_sync, __shfl_down_sync, __syncwarp) meet at a per-warp barrier. It checks
// the kernels' logic (indexing, masks, skips, per-warp sums) and cuda.py's launches (argument
// lists, chunking) against the CPU backend; it says nothing of the GPU's memory model, streams or
// performance.
//
//   emu_launch(name, grid, block, args): args as for cuLaunchKernel (one pointer per parameter).
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

struct EmuDim {
  unsigned x = 1, y = 1, z = 1;
};
static thread_local EmuDim threadIdx, blockIdx;
static EmuDim blockDim, gridDim;

struct EmuWarp {
  std::barrier<> bar{32};
  unsigned long long v[32];
};
static thread_local EmuWarp* emu_warp = nullptr;

#define __global__
#define __device__
#define __host__

inline unsigned __ballot_sync(unsigned, bool p) {
  unsigned lane = threadIdx.x & 31;
  emu_warp->v[lane] = p;
  emu_warp->bar.arrive_and_wait();
  unsigned r = 0;
  for (int i = 0; i < 32; i++) r |= (unsigned)(emu_warp->v[i] != 0) << i;
  emu_warp->bar.arrive_and_wait();
  return r;
}
inline unsigned long long __shfl_down_sync(unsigned, unsigned long long x, int off) {
  unsigned lane = threadIdx.x & 31;
  emu_warp->v[lane] = x;
  emu_warp->bar.arrive_and_wait();
  unsigned long long r = lane + off < 32 ? emu_warp->v[lane + off] : x;
  emu_warp->bar.arrive_and_wait();
  return r;
}
inline int __shfl_sync(unsigned, int x, int src) {
  unsigned lane = threadIdx.x & 31;
  emu_warp->v[lane] = (unsigned long long)(unsigned)x;
  emu_warp->bar.arrive_and_wait();
  int r = (int)(unsigned)emu_warp->v[src & 31];
  emu_warp->bar.arrive_and_wait();
  return r;
}
inline int __all_sync(unsigned m, int p) { return __ballot_sync(m, p != 0) == 0xffffffffu; }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp->bar.arrive_and_wait(); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

#include "cuda_kernels.cu"

template <class... A, size_t... I>
static void emu_call(void (*k)(A...), void** args, std::index_sequence<I...>) {
  k(*reinterpret_cast<std::remove_reference_t<A>*>(args[I])...);
}

template <class... A>
static void emu_grid(void (*k)(A...), unsigned grid, unsigned block, void** args) {
  gridDim.x = grid;
  blockDim.x = block;
  for (unsigned b = 0; b < grid; b++) {
    std::vector<std::unique_ptr<EmuWarp>> warps;
    for (unsigned w = 0; w < (block + 31) / 32; w++) warps.emplace_back(new EmuWarp());
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; t++) {
      threads.emplace_back([=, &warps] {
        threadIdx.x = t;
        blockIdx.x = b;
        emu_warp = warps[t / 32].get();
        emu_call(k, args, std::index_sequence_for<A...>{});
      });
    }
    for (auto& th : threads) th.join();
  }
}

extern "C" int emu_launch(const char* name, unsigned grid, unsigned block, void** args) {
#define EMU_KERNEL(k) if (!strcmp(name, #k)) return emu_grid(k, grid, block, args), 0;
  EMU_KERNEL(vg_sizes)
  EMU_KERNEL(vg_compile)
  EMU_KERNEL(vg_validate_programs)
  EMU_KERNEL(vg_active_rows)
  EMU_KERNEL(vg_execute_local)
  EMU_KERNEL(vg_execute_global)
  EMU_KERNEL(vg_execute_local_eval)
  EMU_KERNEL(vg_execute_global_eval)
  EMU_KERNEL(vg_execute_tasks_local)
  EMU_KERNEL(vg_execute_tasks_global)
#undef EMU_KERNEL
  return -1;
}
