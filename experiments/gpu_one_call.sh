#!/usr/bin/env bash
# The GPU checks that fit one device `run` call of a 15-device-minute lease (gpu_check.sh's stages
# assume 30): install, every VM variant built at once, the benchmarks alone on the GPU, then the
# GPU tests, compute-sanitizer and one Nsight Compute profile side by side until DEADLINE.
#
#   run(command="bash experiments/gpu_one_call.sh bench", carry=[".whl"], timeout_s=600)
#   run(command="DEADLINE=360 bash experiments/gpu_one_call.sh checks", carry=[".whl"], timeout_s=400)  # warm
#
# Phases: bench (install, the variants built, bench_gpu and bench_envs: ~450 s in session 41, plus
# session 42's fuel_scale rows, ~40 s; session 43 dropped the 16,384-env rows for profile_env at
# 65,536 and added two variants; session 44 swapped bench_gpu's two unbounded variants, measured in
# session 41, for three with translated superinstructions, and added their env row) and checks (the
# GPU tests, memcheck, find_syncs and two ncu passes: ~200 s; installs first where the machine is
# fresh); none named:
# both, which overruns one 600 s call with today's eleven variants. DEADLINE (seconds after the
# start, default 540) bounds the checks, so the script ends, and packs its logs into
# $OUT/gpu_check.tgz beside $OUT/summary.txt, before the call's limit. Every step's limit is cut to
# what is left before DEADLINE (the bench phase's rows are in order of need, so a slow machine
# loses the last ones, not the logs).
# Session 41 on an H200 (a machine started in ~30 s): install 50 s, the VM variants 97 s in
# parallel, bench ~150 s, bench_envs 33 s, the GPU tests 184 s on 10 workers (869 tests), each
# memcheck group under 75 s.
# .whl holds gymnasium and farama-notifications (see gpu_check.sh); the image has the rest.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_check_out}
WORK=${GPU_CHECK_WORK:-/tmp/gpu_check}
DEADLINE=${DEADLINE:-540}
mkdir -p "$OUT" "$WORK"
export PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/cupy_cache}
fails=0
log() { echo "$*" | tee -a "$WORK/summary.txt"; }
step() {  # step NAME LIMIT COMMAND... (the limit cut to what is left before DEADLINE; skipped under 10 s)
  local name=$1 lim=$2; shift 2
  local rest=$((DEADLINE - SECONDS))
  if [ "$rest" -lt 10 ]; then log "== $name SKIPPED: ${rest} s left before DEADLINE"; fails=$((fails + 1)); return; fi
  [ "$lim" -gt "$rest" ] && lim=$rest
  log "== $name (limit ${lim} s, at ${SECONDS} s): $*"
  local t0=$SECONDS
  if timeout "$lim" "$@" >"$WORK/$name.log" 2>&1; then log "   ok ($((SECONDS - t0)) s)"
  else log "   FAILED rc=$? ($((SECONDS - t0)) s, see $name.log)"; tail -n 20 "$WORK/$name.log"; fails=$((fails + 1)); fi
}
left() { echo $((DEADLINE - SECONDS)); }
finish() {
  cp -r experiments/results "$WORK/results" 2>/dev/null
  tar czf "$OUT/gpu_check.tgz" -C "$WORK" .
  cp "$WORK/summary.txt" "$OUT/summary.txt"
}
trap finish EXIT
touch "$WORK/summary.txt"
phases=" ${*:-bench checks} "
for p in $phases; do case $p in bench|checks) ;; *) echo "unknown phase: $p" >&2; exit 2 ;; esac; done

nvidia-smi >"$WORK/nvidia-smi.txt" 2>&1
if ! python -c "import gymnasium, vramgym.vm._core" 2>/dev/null; then  # (a warm machine has both)
  compgen -G ".whl/*.whl" >/dev/null && step wheels 60 python -m pip install -q --no-index --no-deps --no-compile .whl/*.whl
  step install 150 python -m pip install -q --no-index --no-deps --no-build-isolation -e .
fi

# NVRTC builds each variant of the VM module in one thread (~30 s): all of them at once, into
# CuPy's on-disk cache, which every later process reads.
prebuild() {  # bench_gpu.py's FUSE_VARIANTS (the default build is the first)
  local pids=() v
  for v in $(python -c "import sys; sys.path.insert(0, 'experiments'); import bench_gpu as b; \
print(' '.join(','.join(map(str, v)) for v in b.FUSE_VARIANTS))"); do
    python -c "from vramgym.vm import cuda; cuda.SWITCH_FUSE, cuda.EXEC_MIN_BLOCKS, cuda.PREFETCH, cuda.JUMP_TABLES, \
cuda.FUSED_CODE = $v; d = cuda.device(); print('switch_fuse, min_blocks, prefetch, jump_tables, fused_code', ($v), \
'execute regs', d.k['vg_execute_local_eval'].num_regs, \
'local bytes', d.k['vg_execute_local_eval'].local_size_bytes, 'tasks regs', d.k['vg_execute_tasks_local'].num_regs, \
'local warps/SM', d.resident_warps('vg_execute_local_eval'), 'tasks warps/SM', d.resident_warps('vg_execute_tasks_local'))" \
      & pids+=($!)
  done
  python -c "from vramgym.envs import grammar_cuda; grammar_cuda.kernels(0); print('grammar kernels built')" & pids+=($!)
  local bad=0; for p in "${pids[@]}"; do wait "$p" || bad=1; done
  return $bad
}
export -f prebuild  # (timeout runs commands, not shell functions)
if [[ $phases == *" bench "* ]]; then
step prebuild 180 bash -c prebuild

# timings, with nothing else on the GPU
step bench 240 python experiments/bench_gpu.py --sizes 1 1000 100000 1000000 --repeat 2 --warps-per-sm 0 \
  --switch-fuse 100000 --out "$WORK"
step bench_envs 90 python experiments/bench_envs.py --env token --device cuda-graph cuda --num-envs 65536 \
  --seconds 3 --name bench_envs_gpu --out "$WORK"
# where a 65,536-env step's GPU time goes, kernel by kernel (eager; session 41: scorer 1.40 ms,
# vg_compile 0.39 ms a step); alone on the GPU, as the timings above
step profile_env 60 python experiments/profile_env.py --num-envs 65536 --steps 20
# the tasks' own budgets (default fuel_scale 8) against the plain 20,000 steps, side by side
step bench_envs_fuel_scale 75 python experiments/bench_envs.py --env token --device cuda-graph --num-envs 65536 \
  --fuel-scale 8 inf --repeat 2 --seconds 3 --name bench_envs_gpu_fuel_scale --out "$WORK"
# the scorer's variants in the env (its launch lasts as long as its slowest candidate: latency)
VRAMGYM_PREFETCH=1 step bench_envs_prefetch 60 python experiments/bench_envs.py --env token --device cuda-graph \
  --num-envs 65536 --seconds 3 --name bench_envs_gpu_prefetch --out "$WORK"
VRAMGYM_JUMP_TABLES=1 step bench_envs_jump_tables 60 python experiments/bench_envs.py --env token --device cuda-graph \
  --num-envs 65536 --seconds 3 --name bench_envs_gpu_jump_tables --out "$WORK"
VRAMGYM_FUSED_CODE=1 step bench_envs_fused_code 60 python experiments/bench_envs.py --env token --device cuda-graph \
  --num-envs 65536 --seconds 3 --name bench_envs_gpu_fused_code --out "$WORK"
fi
[[ $phases == *" checks "* ]] || exit $fails

# correctness, side by side, each process with a share of the GPU's memory; the sanitizer is
# ~100x slower, so small random corpora and one process per group of tests
lim=$(left); [ "$lim" -lt 30 ] && lim=30
memcheck() {  # memcheck NAME FILE -k EXPR
  VRAMGYM_GPU_MEMORY_FRACTION=0.03 VRAMGYM_GPU_RANDOM_PROGRAMS=300 VRAMGYM_GPU_TASK_PROGRAMS=300 \
    step "memcheck_$1" "$lim" compute-sanitizer --tool memcheck --leak-check no --error-exitcode 99 \
    python -m pytest -q -p no:cacheprovider "$2" -k "$3"
}
i=0
for k in corpus_compiles corpus_runs fuzzed_bytecode fuzzed_sources fuzzed_tokens random_programs \
         "evaluate_matches or zero_tokens" "switch_fuse or outside or chunking or torch_round"; do
  i=$((i + 1)); memcheck "vm$i" tests/test_cuda_backend.py "$k" &
done
memcheck tasks tests/test_evaluate_tasks.py gpu &
step syncs 90 python experiments/find_syncs.py &   # every host sync left in the envs' steps
memcheck task_fuel tests/test_task_fuel.py gpu &
memcheck token_slots tests/test_token_slots.py "gpu or cuda" &
memcheck grammar tests/test_grammar_native.py "gpu or cuda" &
# the opt-in variants (prefetch: a load ahead of the pc; jump tables) against the CPU, and under memcheck
(export VRAMGYM_PREFETCH=1 VRAMGYM_JUMP_TABLES=1
 memcheck variants tests/test_cuda_backend.py "corpus_runs or fuzzed_bytecode or random_programs"
 VRAMGYM_GPU_MEMORY_FRACTION=0.05 step gpu_tests_variants "$lim" python -m pytest -q -rfEs -p no:cacheprovider \
   tests/test_cuda_backend.py tests/test_evaluate_tasks.py -k "corpus_runs or random_programs or fuzzed or gpu") &
# the translated superinstructions (session 44: each warp translates its program first) likewise
(export VRAMGYM_FUSED_CODE=1
 memcheck fused_code tests/test_cuda_backend.py "corpus_runs or fuzzed_bytecode or random_programs"
 VRAMGYM_GPU_MEMORY_FRACTION=0.05 step gpu_tests_fused_code "$lim" python -m pytest -q -rfEs -p no:cacheprovider \
   tests/test_cuda_backend.py tests/test_evaluate_tasks.py -k "corpus_runs or random_programs or fuzzed or gpu") &
# Nsight Compute's full set on one steady-state execute launch, then the stall samples per SASS
# instruction (which loads a step waits on) from the report
(export VRAMGYM_GPU_MEMORY_FRACTION=0.03
 step ncu 120 ncu --set full -k regex:vg_execute_local_eval -c 1 -f -o "$WORK/exec_loop" python -c \
   "import sys; sys.path.insert(0, 'experiments'); import bench_gpu as b; print(b.steady_rows([10000], 1, 2000, check=10))"
 step ncu_details 60 ncu -i "$WORK/exec_loop.ncu-rep" --page details
 step ncu_sass 60 ncu -i "$WORK/exec_loop.ncu-rep" --page source --csv --print-source sass
 rm -f "$WORK/exec_loop.ncu-rep") &
# ... and on one scorer launch of the token env at 65,536 envs in steady state (the step's critical
# path: its slowest warp, ~590 cycles a VM step by session 43's reading): where that warp waits
(export VRAMGYM_GPU_MEMORY_FRACTION=0.1
 step ncu_scorer 150 ncu --set full -k regex:vg_execute_tasks_local --launch-skip 70 -c 1 -f -o "$WORK/env_scorer" \
   python -c "import torch; from vramgym.envs.synthesis import SynthesisVectorEnv as E
e = E(num_envs=65536, device='cuda', copy=False); o, _ = e.reset(seed=0); g = torch.Generator(device='cuda').manual_seed(0)
for _ in range(80): o, *_ = e.step((torch.rand(o['action_mask'].shape, generator=g, device='cuda') + o['action_mask']).argmax(1))
torch.cuda.synchronize()"
 step ncu_scorer_details 60 ncu -i "$WORK/env_scorer.ncu-rep" --page details
 step ncu_scorer_sass 60 ncu -i "$WORK/env_scorer.ncu-rep" --page source --csv --print-source sass
 rm -f "$WORK/env_scorer.ncu-rep") &
VRAMGYM_GPU_MEMORY_FRACTION=0.05 step gpu_tests "$lim" python -m pytest -v -rfEs --durations=25 -n 10 \
  --dist loadfile -p no:cacheprovider tests/test_cuda_backend.py "tests/test_differential.py::test_cuda_matches_cpu" \
  tests/test_step_graph.py tests/test_envs_device.py tests/test_evaluate_tasks.py tests/test_task_fuel.py \
  tests/test_token_slots.py \
  tests/test_grammar_native.py tests/test_grammar_torch.py tests/test_cycle_check.py tests/test_envs_ops.py \
  tests/test_corpus.py tests/test_api.py tests/test_env_bad_input.py
wait
log "failed steps: $fails (at ${SECONDS} s)"
exit $fails
