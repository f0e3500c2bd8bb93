#!/usr/bin/env bash
# benchmarks/gpu_session.sh - what a session lent a GPU runs, in as few device calls as possible.
#
# Device time is short (10 minutes a call, 30 a session) and the device machine reaches no
# network, so everything it needs travels with the call:
#   here:    make gpu-prep      # .gpu/wheels (cp312 wheels the device image lacks: mach-beamform,
#                               # array-api-compat, pymust) and .gpu/datasets (the recordings);
#                               # .gpu/ is git-ignored
#   device:  run(command="bash benchmarks/gpu_session.sh tests", carry=[".gpu"], timeout_s=600)
#            run(command="bash benchmarks/gpu_session.sh sanitize1", carry=[".gpu"], timeout_s=600)
#            run(command="bash benchmarks/gpu_session.sh sanitize2", carry=[".gpu"], timeout_s=600)
#            run(command="bash benchmarks/gpu_session.sh bench", carry=[".gpu"], timeout_s=600)
# One device call each (a call may run 10 minutes; the budgets below add up to <= 570 s per
# call with a warm build, leaving room for start-up).  The build step runs in every mode but
# only compiles on the first call of a warm machine (the first, `tests`, gives it 300 s); a
# sanitize or bench call on a cold machine spends its build time out of its tools' budgets, so
# run `tests` first.  (`all` does tests + bench in one call when the build is warm.)  Each step
# has its own time limit, so a slow step costs its share and the rest still runs.  Logs, a
# summary and benchmarks/RESULTS.md with the new sections come back in $OUT: merge those
# sections into benchmarks/RESULTS.md, keeping the older rows.
#
#   tests:     build with nvcc (USBEAM_CUDA=1: no silent CPU-only build) (300 s), every test
#              marked cuda on the GPU, PyTorch and CuPy peers included (240 s).
#   sanitize1: compute-sanitizer memcheck (280 s) and initcheck (280 s) on every CUDA test file.
#   sanitize2: compute-sanitizer racecheck (380 s, the slowest tool: shared-memory hazards
#              are tracked per access) and synccheck (180 s) on every CUDA test file.
#              "Every CUDA test file" is every tests/test_*.py with a test marked cuda (found
#              by grep, so a new file is never left out: the pipelines' CUDA graphs in
#              test_cuda_pipeline.py and the live sessions in test_live_cuda.py included), with
#              the tests marked slow (big recordings) left out to fit the budget; a tool that
#              runs out of time says so in its log (rc=124) and the summary.
#   bench:     bench_beamform_gpu (PWI_disk, with mach), bench_rca_gpu, bench_acquire_gpu,
#              bench_pipelines_gpu (NVML energy), bench_twins_gpu, bench_live --gpu-only, bench_ai:
#              recorded in RESULTS.md; each log is named after its script.
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

mapfile -t CUDA_TEST_FILES < <(grep -l "pytest.mark.cuda" tests/test_*.py)
log "CUDA test files: ${CUDA_TEST_FILES[*]}"
# sanitize TOOL SECONDS: one compute-sanitizer tool over every CUDA test file
sanitize() {
    step "sanitizer_$1" "$2" compute-sanitizer --tool "$1" --error-exitcode 97 --print-limit 20 \
        "$PY" -m pytest -q -p no:cacheprovider -m "cuda and not slow" "${CUDA_TEST_FILES[@]}"
}
if [ "$MODE" = tests ] || [ "$MODE" = all ]; then
    step pytest_cuda 240 "$PY" -m pytest -q -p no:cacheprovider -m cuda -rs tests
fi
if [ "$MODE" = sanitize1 ]; then
    sanitize memcheck 280
    sanitize initcheck 280
fi
if [ "$MODE" = sanitize2 ]; then
    sanitize racecheck 380
    sanitize synccheck 180
fi
if [ "$MODE" = bench ] || [ "$MODE" = all ]; then
    step bench_beamform_gpu 120 "$PY" benchmarks/bench_beamform_gpu.py
    step bench_rca_gpu 120 "$PY" benchmarks/bench_rca_gpu.py
    step bench_acquire_gpu 60 "$PY" benchmarks/bench_acquire_gpu.py
    step bench_pipelines_gpu 150 "$PY" benchmarks/bench_pipelines_gpu.py
    step bench_twins_gpu 60 "$PY" benchmarks/bench_twins_gpu.py
    step bench_live 120 "$PY" benchmarks/bench_live.py --gpu-only
    step bench_ai 60 "$PY" benchmarks/bench_ai.py
fi
cp benchmarks/RESULTS.md "$OUT/RESULTS.md"
log "done"
