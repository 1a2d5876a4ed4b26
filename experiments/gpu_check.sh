#!/usr/bin/env bash
# Everything a session with a GPU runs on the device machine, in one go (results under $OUT):
#   1. install vramgym (the device machine has no network: torch, cupy, numpy, pytest and
#      hypothesis are in its image; anything else, e.g. ray, travels as wheels in .whl/, made
#      on the development machine as /work/.library/device/README.md shows, and the `run`
#      call names .whl in `carry`);
#   2. the GPU tests (CPU == GPU on the corpus, 100,000 random programs, fuzzed bytecode and
#      sources, torch round trip, chunking, Ray; evaluate_tasks on token slots across tasks);
#   3. compute-sanitizer memcheck on a corpus + fuzz run of the kernels;
#   4. the benchmarks (experiments/bench_gpu.py, --quick with QUICK=1; experiments/bench_envs.py
#      on the GPU, eager and with CUDA graphs).
# Wheels to carry (the image lacks them): gymnasium, farama-notifications, cloudpickle (and ray
# with its needs for the Ray test), downloaded for the device's Python as the device README shows.
# Each step logs to $OUT/<step>.log and the script goes on after a failure; the exit status is
# the number of failed steps.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_check_out}
mkdir -p "$OUT"
fails=0
step() {  # step NAME COMMAND...: run, log, record
  local name=$1; shift
  echo "== $name: $*" | tee -a "$OUT/summary.txt"
  local t0=$SECONDS
  if "$@" >"$OUT/$name.log" 2>&1; then echo "   ok ($((SECONDS - t0)) s)" | tee -a "$OUT/summary.txt"
  else echo "   FAILED ($((SECONDS - t0)) s, see $name.log)" | tee -a "$OUT/summary.txt"; fails=$((fails + 1)); fi
}
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
if compgen -G ".whl/*.whl" >/dev/null; then
  step wheels python -m pip install -q --no-index --no-deps --no-compile .whl/*.whl
fi
# No network: no build isolation and no dependency resolution; the image provides the rest.
step install python -m pip install -q --no-index --no-deps --no-build-isolation -e .
export CUPY_CACHE_DIR="$OUT/cupy_cache"
step build python -c "from vramgym.vm import cuda; cuda.device(); print(cuda.device().k)"
step gpu_tests python -m pytest -q -rs tests/test_cuda_backend.py tests/test_corpus.py -k "cuda or gpu or identically or evaluate or torch or chunking or ray"
step gpu_evaluate_tasks python -m pytest -q -rs tests/test_evaluate_tasks.py
# the environments on the GPU (needs gymnasium, carried as a wheel): torch automaton == numpy,
# GPU env == CPU env step for step, no sync inside step (torch's sync debug mode), CUDA graphs
step gpu_envs python -m pytest -q -rs tests/test_grammar_torch.py tests/test_envs_device.py
# memcheck: the corpus and the fuzz tests, small random corpus (the sanitizer is ~100x slower)
export VRAMGYM_GPU_RANDOM_PROGRAMS=300
step memcheck compute-sanitizer --tool memcheck --leak-check no --error-exitcode 99 \
  python -m pytest -q -x tests/test_cuda_backend.py -k "corpus or fuzzed or random_programs or evaluate"
VRAMGYM_GPU_TASK_PROGRAMS=300 step memcheck_tasks compute-sanitizer --tool memcheck --leak-check no \
  --error-exitcode 99 python -m pytest -q -x tests/test_evaluate_tasks.py -k gpu
unset VRAMGYM_GPU_RANDOM_PROGRAMS
if [ "${QUICK:-0}" = 1 ]; then step bench python experiments/bench_gpu.py --quick --out "$OUT"
else step bench python experiments/bench_gpu.py --out "$OUT"; fi
step bench_envs python experiments/bench_envs.py --device cuda cuda-graph --num-envs 1024 16384 65536 \
  --seconds 5 --name bench_envs_gpu --out "$OUT"
cp -r experiments/results "$OUT/results" 2>/dev/null
cat "$OUT/summary.txt"
exit $fails
