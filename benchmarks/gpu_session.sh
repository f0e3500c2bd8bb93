#!/usr/bin/env bash
# benchmarks/gpu_session.sh - what a session lent a GPU runs, in as few device calls as possible.
#
# Device time is short (10 minutes a call, 30 a session) and the device machine reaches no
# network, so everything it needs travels with the call:
#   here:    make gpu-prep      # .gpu/wheels (cp312 wheels the device image lacks: mach-beamform,
#                               # array-api-compat, pymust) and .gpu/datasets (the recordings);
#                               # .gpu/ is git-ignored
#   device:  run(command="bash benchmarks/gpu_session.sh tests", carry=[".gpu"], timeout_s=600)
#            run(command="bash benchmarks/gpu_session.sh bench", carry=[".gpu"], timeout_s=600)
# (`all` does both in one call when the build is warm.)  Each step has its own time limit, so a
# slow step costs its share and the rest still runs.  Logs, a summary and benchmarks/RESULTS.md
# with the new sections come back in $OUT: merge those sections into benchmarks/RESULTS.md,
# keeping the older rows.
#
#   tests: build with nvcc (USBEAM_CUDA=1: no silent CPU-only build), every test marked cuda on
#          the GPU (PyTorch and CuPy peers included), then compute-sanitizer memcheck, racecheck,
#          initcheck and synccheck on the fast CUDA tests (issue 5's validation).
#   bench: gpu_das (PWI_disk, with mach), gpu_rca, gpu_hadamard, gpu_pipelines (NVML energy),
#          gpu_twins, live.py --gpu-only, ai_handoff: recorded in RESULTS.md.
set -u
MODE=${1:-all}
OUT=${OUT:-/tmp/usbeam-gpu-out}
mkdir -p "$OUT"
PY=${PY:-python3}
export USBEAM_DATA=${USBEAM_DATA:-$PWD/.gpu/datasets}
SUMMARY="$OUT/summary.txt"

log() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$SUMMARY"; }

# step NAME SECONDS COMMAND...: run with a time limit, log to $OUT/NAME.log, summarise.
step() {
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    timeout --signal=INT --kill-after=20 "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    log "$name: rc=$rc in $((SECONDS - start)) s"
    tail -n 4 "$OUT/$name.log" | sed 's/^/    /' | tee -a "$SUMMARY"
}

log "mode $MODE on $(hostname)"
if ! nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$SUMMARY" 2>&1; then
    log "no GPU visible (nvidia-smi failed): nothing to run; the CPU figures come from the other benchmarks"
    exit 1
fi
if [ -d .gpu/wheels ]; then
    step wheels 120 "$PY" -m pip install --no-index --find-links .gpu/wheels mach-beamform array-api-compat pymust
fi
step build 300 env USBEAM_CUDA=1 "$PY" setup.py --quiet build_ext --inplace

FAST_CUDA_TESTS=(tests/test_cuda_bmode.py tests/test_cuda_rf2iq.py tests/test_cuda_das.py tests/test_cuda_hadamard.py
                 tests/test_cuda_rca.py tests/test_cuda_doppler.py tests/test_cuda_device.py tests/test_ai_cuda.py)
if [ "$MODE" = tests ] || [ "$MODE" = all ]; then
    step pytest_cuda 240 "$PY" -m pytest -q -p no:cacheprovider -m cuda -rs tests
    for tool in memcheck racecheck initcheck synccheck; do
        step "sanitizer_$tool" 150 compute-sanitizer --tool "$tool" --error-exitcode 97 --print-limit 20 \
            "$PY" -m pytest -q -p no:cacheprovider -m "cuda and not slow" -x "${FAST_CUDA_TESTS[@]}"
    done
fi
if [ "$MODE" = bench ] || [ "$MODE" = all ]; then
    step bench_das 120 "$PY" benchmarks/gpu_das.py
    step bench_rca 120 "$PY" benchmarks/gpu_rca.py
    step bench_hadamard 60 "$PY" benchmarks/gpu_hadamard.py
    step bench_pipelines 150 "$PY" benchmarks/gpu_pipelines.py
    step bench_twins 60 "$PY" benchmarks/gpu_twins.py
    step bench_live 120 "$PY" benchmarks/live.py --gpu-only
    step bench_ai 60 "$PY" benchmarks/ai_handoff.py
fi
cp benchmarks/RESULTS.md "$OUT/RESULTS.md"
log "done"
