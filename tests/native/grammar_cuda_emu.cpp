// Host emulation of the mask automaton's CUDA kernels (envs/csrc/grammar_kernels.cu), for tests
// without a GPU: every thread of a block is a std::thread, __syncthreads is a block-wide barrier,
// __shared__ variables are statics (blocks run one after another). It checks the kernels' logic
// (row indexing, the shared-memory staging of the mask, the cooperative copy before a step, the
// partial last block) and envs/grammar_cuda.py's launches (argument lists, grid) against the CPU
// library; it says nothing of the GPU's memory model, streams or speed.
//
//   emu_launch(name, grid, block, args): args as for cuLaunchKernel (one pointer per parameter).
#include <barrier>
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
static std::unique_ptr<std::barrier<>> emu_block_barrier;

#define __global__
#define __device__
#define __shared__ static
#define __launch_bounds__(...)
inline void __syncthreads() { emu_block_barrier->arrive_and_wait(); }

#include "grammar_kernels.cu"

template <class... A, size_t... I>
static void emu_call(void (*k)(A...), void** args, std::index_sequence<I...>) {
  k(*reinterpret_cast<std::remove_reference_t<A>*>(args[I])...);
}

template <class... A>
static void emu_grid(void (*k)(A...), unsigned grid, unsigned block, void** args) {
  gridDim.x = grid;
  blockDim.x = block;
  for (unsigned b = 0; b < grid; b++) {
    emu_block_barrier.reset(new std::barrier<>(block));
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; t++) {
      threads.emplace_back([=] {
        threadIdx.x = t;
        blockIdx.x = b;
        emu_call(k, args, std::index_sequence_for<A...>{});
      });
    }
    for (auto& th : threads) th.join();
  }
}

extern "C" int emu_launch(const char* name, unsigned grid, unsigned block, void** args) {
#define EMU_KERNEL(k) if (!strcmp(name, #k)) return emu_grid(k, grid, block, args), 0;
  EMU_KERNEL(gm_mask_kernel)
  EMU_KERNEL(gm_step_kernel)
  EMU_KERNEL(gm_env_step_kernel)
  EMU_KERNEL(gm_min_tokens_kernel)
  EMU_KERNEL(gm_consts_kernel)
#undef EMU_KERNEL
  return -1;
}
