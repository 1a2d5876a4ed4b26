#!/usr/bin/env bash
# Everything a session with a GPU runs on the device machine, in stages that each fit in one
# device `run` call (10 minutes at most per command; the lease is 30 device-minutes):
#
#   bash experiments/gpu_check.sh tests envs          # one call
#   bash experiments/gpu_check.sh memcheck            # another
#   QUICK=1 bash experiments/gpu_check.sh bench bench_envs
#
# Or the correctness checks in one call: set up once, then the suite and memcheck side by side,
# each process taking a small share of the GPU's memory (session 31 ran them so at the default
# share, and a memcheck run ran out of memory beside the suite's workers):
#   bash experiments/gpu_check.sh setup
#   (SKIP_SETUP=1 GPU_CHECK_WORK=/tmp/mem OUT=$OUT/mem VRAMGYM_GPU_MEMORY_FRACTION=0.2 \
#      bash experiments/gpu_check.sh memcheck > $OUT/mem.log 2>&1 &)
#   SKIP_SETUP=1 GPU_CHECK_WORK=/tmp/suite OUT=$OUT/suite VRAMGYM_GPU_MEMORY_FRACTION=0.05 \
#     bash experiments/gpu_check.sh suite
#
# Stages (none named: all of them but suite, in this order; `setup` alone installs and builds):
#   suite     the whole test suite at once (pytest-xdist, SUITE_WORKERS processes): every GPU test in
#             every file, beside the CPU tests on the device machine's Python and numpy
#   tests     CPU == GPU on the corpus, 100,000 random programs, fuzzed bytecode and sources,
#             torch round trip, chunking, Ray; evaluate_tasks / execute_tasks on token slots
#   envs      the environments and mask automata on the GPU: torch and native automata ==
#             numpy, GPU env == CPU env step for step, no sync inside step, CUDA graphs
#   syncs     experiments/find_syncs.py: every host sync left in the envs' step, with its stack
#   profile   Nsight Compute's stall reasons and occupancy for one steady-state execute launch
#   profile_env experiments/profile_env.py: host vs device time of a GPU env step, top kernels
#   memcheck  compute-sanitizer memcheck on a corpus + fuzz + task-scorer run of the kernels
#   bench     experiments/bench_gpu.py (N = 1 .. 1e6; --quick with QUICK=1)
#   bench_envs experiments/bench_envs.py on the GPU at 1k, 16k and 64k envs
#   fuse      the VM with and without its peephole superinstructions (cuda.SWITCH_FUSE), side by
#             side: bench_gpu.py's switch-fuse rows alone (gcd and loop-heavy candidates)
#   graph     the token env at 65,536 envs with its step replayed from one CUDA graph
#             (cuda_graph=True) beside the eager step, then graphed with SWITCH_FUSE, and with a
#             fuel of 2,000 and copy=False (how much of a step the slowest scored run is)
# Every call first installs vramgym (the device machine has no network: torch, cupy, numpy,
# pytest, hypothesis and cloudpickle are in its image; gymnasium and farama-notifications travel
# as wheels in .whl/, made on the development machine as /work/.library/device/README.md shows,
# and the `run` call names .whl in `carry`. Ray's wheel is larger than the 64 MiB a call may
# carry, so the Ray GPU test skips there).
# A fresh machine spends ~1 min in `pip install -e .` and minutes in the first NVRTC build (160 s on
# 2026-11-25, before the compile kernels became one); CUPY_CACHE_DIR (default /tmp/cupy_cache) may
# point at a cache carried from an earlier call of the same session.
# Logs and results go to a work folder that ends up as ONE archive, $OUT/gpu_check.tgz, beside
# $OUT/summary.txt (the device returns at most 8 files). The script goes on after a failed step;
# its exit status is the number of failed steps.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_check_out}
WORK=${GPU_CHECK_WORK:-/tmp/gpu_check}
STEP_LIMIT=${STEP_LIMIT:-570}          # seconds per step, inside the device's 600 s per command;
                                       # LIMIT_<step>=S overrides it for one step
mkdir -p "$OUT" "$WORK"
export PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/cupy_cache}
fails=0
step() {  # step NAME COMMAND...: run under a time limit, log, record
  local name=$1; shift
  echo "== $name: $*" | tee -a "$WORK/summary.txt"
  local t0=$SECONDS lim_var="LIMIT_$name"
  if timeout "${!lim_var:-$STEP_LIMIT}" "$@" >"$WORK/$name.log" 2>&1; then
    echo "   ok ($((SECONDS - t0)) s)" | tee -a "$WORK/summary.txt"
  else
    echo "   FAILED rc=$? ($((SECONDS - t0)) s, see $name.log)" | tee -a "$WORK/summary.txt"
    tail -n 30 "$WORK/$name.log"
    fails=$((fails + 1))
  fi
}
finish() {
  cp -r experiments/results "$WORK/results" 2>/dev/null
  tar czf "$OUT/gpu_check.tgz" -C "$WORK" .
  cp "$WORK/summary.txt" "$OUT/summary.txt"
  cat "$WORK/summary.txt"
}

setup() {
  nvidia-smi >"$WORK/nvidia-smi.txt" 2>&1
  if compgen -G ".whl/*.whl" >/dev/null; then
    step wheels python -m pip install -q --no-index --no-deps --no-compile .whl/*.whl
  fi
  # no network: no build isolation and no dependency resolution; the image provides the rest
  step install python -m pip install -q --no-index --no-deps --no-build-isolation -e .
  step build python -c "from vramgym.vm import cuda; cuda.device(); print(cuda.device().k)"
}

stage_suite() {
  # -v: a run cut off by its limit still names every test that finished. The files with the long
  # GPU runs (100,000 random programs against the CPU and against CPython) are handed out first.
  step suite python -m pytest -v -rfEs --durations=30 -n "${SUITE_WORKERS:-12}" --dist loadfile \
    tests/test_differential.py tests/test_cuda_backend.py tests/test_step_graph.py tests/test_envs_device.py tests
}

stage_tests() {
  step gpu_tests python -m pytest -q -rs tests/test_cuda_backend.py tests/test_corpus.py \
    -k "cuda or gpu or identically or evaluate or torch or chunking or ray"
  step gpu_evaluate_tasks python -m pytest -q -rs tests/test_evaluate_tasks.py tests/test_task_fuel.py
}

stage_envs() {
  local files=(tests/test_grammar_torch.py tests/test_envs_device.py)
  [ -f tests/test_grammar_native.py ] && files+=(tests/test_grammar_native.py)
  [ -f tests/test_token_slots.py ] && files+=(tests/test_token_slots.py)
  [ -f tests/test_step_graph.py ] && files+=(tests/test_step_graph.py)
  step gpu_envs python -m pytest -q -rs "${files[@]}"
}

stage_syncs() {
  step syncs python experiments/find_syncs.py
}

stage_profile() {
  step ncu ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats -k regex:vg_execute_local_eval -c 1 python -c \
    "import sys; sys.path.insert(0, 'experiments'); import bench_gpu as b; b.steady_rows([10000], 1, 2000, check=10)"
}

stage_profile_env() {
  step profile_env python experiments/profile_env.py --num-envs 1024 65536 --steps 20
}

stage_memcheck() {
  # the sanitizer is ~100x slower: small random corpora
  VRAMGYM_GPU_RANDOM_PROGRAMS=300 step memcheck compute-sanitizer --tool memcheck --leak-check no \
    --error-exitcode 99 python -m pytest -q -x tests/test_cuda_backend.py \
    -k "corpus or fuzzed or random_programs or evaluate or switch_fuse or outside"
  VRAMGYM_GPU_TASK_PROGRAMS=300 step memcheck_tasks compute-sanitizer --tool memcheck --leak-check no \
    --error-exitcode 99 python -m pytest -q -x tests/test_evaluate_tasks.py -k gpu
  if [ -f tests/test_token_slots.py ]; then
    step memcheck_token_slots compute-sanitizer --tool memcheck --leak-check no --error-exitcode 99 \
      python -m pytest -q -x tests/test_token_slots.py -k "cuda or gpu"
  fi
  if [ -f tests/test_grammar_native.py ]; then
    step memcheck_grammar compute-sanitizer --tool memcheck --leak-check no --error-exitcode 99 \
      python -m pytest -q -x tests/test_grammar_native.py -k "gpu or cuda"
  fi
}

stage_bench() {
  if [ "${QUICK:-0}" = 1 ]; then step bench python experiments/bench_gpu.py --quick --out "$WORK"
  else step bench python experiments/bench_gpu.py --out "$WORK"; fi
}

stage_fuse() {
  step fuse python experiments/bench_gpu.py --sizes 1000 --steady-iterations 0 --switch-fuse 100000 1000000 \
    --out "$WORK/fuse"
}

stage_graph() {
  local common=(--env token --num-envs 65536 --seconds 4)
  step graph python experiments/bench_envs.py --device cuda cuda-graph --repeat 2 "${common[@]}" \
    --name bench_envs_graph --out "$WORK"
  VRAMGYM_SWITCH_FUSE=1 step graph_fused python experiments/bench_envs.py --device cuda-graph "${common[@]}" \
    --name bench_envs_graph_fused --out "$WORK"
  step graph_fuel2000 python experiments/bench_envs.py --device cuda-graph --fuel 2000 --no-copy "${common[@]}" \
    --name bench_envs_graph_fuel2000 --out "$WORK"
}

stage_bench_envs() {
  # BENCH_ENVS_DEVICES: a list; BENCH_ENVS_ARGS: more options, e.g. "--fuel 2000" (how much of a GPU
  # step the slowest scored run is)
  # shellcheck disable=SC2086
  step bench_envs python experiments/bench_envs.py --device ${BENCH_ENVS_DEVICES:-cuda cuda-graph} ${BENCH_ENVS_ARGS:-} --num-envs 1024 16384 65536 \
    --seconds 5 --name bench_envs_gpu --out "$WORK"
}

stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(tests envs syncs memcheck bench bench_envs profile profile_env)
for s in "${stages[@]}"; do
  case $s in setup|suite|tests|envs|syncs|memcheck|bench|bench_envs|profile|profile_env|fuse|graph) ;; *) echo "unknown stage: $s" >&2; exit 2 ;; esac
done
touch "$WORK/summary.txt"
trap finish EXIT
# SKIP_SETUP=1: vramgym is installed already (a second gpu_check.sh running beside the first)
[ "${SKIP_SETUP:-0}" = 1 ] || setup
for s in "${stages[@]}"; do [ "$s" = setup ] || "stage_$s"; done
exit $fails
