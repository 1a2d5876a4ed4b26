// Compiles the shared compiler and VM headers as CUDA device code (CI has nvcc but no GPU):
// a syntax or host-only construct in the core fails here before any GPU sees it.
#include "compiler.h"
#include "vm.h"

__global__ void compile_and_run(const char* src, int64_t len, vg::Token* toks, uint32_t* code, int32_t* out,
                                const int32_t* in, int32_t in_len, vg::Workspace* ws, vg::VMConfig cfg) {
  vg::Lexer lexer;
  vg::Compiler compiler;
  vg::CompileError err;
  int32_t n = vg::compile_source(lexer, compiler, src, len, toks, 256, code, 256, &err);
  int32_t pc = -1;
  if (n < 0 || vg::validate(code, n, 0, &pc) >= 0) {
    out[threadIdx.x] = -1;
    return;
  }
  vg::RunResult r = vg::run(code, n, pc, in, in_len, cfg, ws[threadIdx.x]);
  out[threadIdx.x] = r.status == vg::TRAP_OK ? r.value : -r.status;
}
