#!/usr/bin/env bash
# benchmarks/gpu_session.sh - what a session lent a GPU runs: six device calls, issued back to
# back (the machine goes back after 30 s idle, and a cold start costs a minute or more of the
# 30-minute budget), each with step limits that add up to under 540 s of its 600-s call.
#
#   here:    make gpu-prep     # .gpu/wheels (cp312 wheels the device image lacks: mach-beamform,
#                              # array-api-compat, pymust) and .gpu/datasets (the recordings);
#                              # .gpu/ is git-ignored and travels with `carry`
#   device:  run(command="bash benchmarks/gpu_session.sh 1", carry=[".gpu"], timeout_s=600)
#            run(command="bash benchmarks/gpu_session.sh 2", carry=[".gpu"], timeout_s=600)
#            run(command="bash benchmarks/gpu_session.sh 3", carry=[".gpu"], timeout_s=600)
#            run(command="bash benchmarks/gpu_session.sh 4", carry=[".gpu"], timeout_s=600)
#            run(command="bash benchmarks/gpu_session.sh 5", carry=[".gpu"], timeout_s=600)
#            run(command="bash benchmarks/gpu_session.sh 6", carry=[".gpu"], timeout_s=600)
#            run(command="bash benchmarks/gpu_session.sh 7", carry=[".gpu"], timeout_s=600)
#
# Where the lease is 15 minutes (2026-11-28), not 30, do 1 (tests: 107 s warm-up and all), 2
# (benchmarks: 26 s), 6 (78 s), then 5, 7 or 3/4 as the rest allows; a warm machine builds in 2 s.
#
# Step budgets in seconds (`timeout` sends INT, then KILL 10 s later, so a step may overrun its
# budget by 10 s; the sums include that):
#   call 1, correctness:  wheels 25, build 140, preflight 25, CUDA tests 300      = 490 + 4 x 10 = 530
#   call 2, benchmarks:   wheels 25, build 100 (warm: nothing to compile), DAS vs mach on PWI_disk
#                         60, RCA FORCES 60, Hadamard 30, one seed-002 pipeline (RF2IQ_DAS_BMODE)
#                         60, sector and volume DAS 90 (each took 2-10 s on an H100, 2026-11-25)
#                                                                                 = 425 + 7 x 10 = 495
#   calls 3 and 4, memcheck: wheels 25, build 100, compute-sanitizer memcheck over half the
#                         CUDA test files each (not slow, no PyTorch/CuPy peers) 380 = 505 + 3 x 10 = 535
#   call 5, racecheck and initcheck over the shared-memory kernels' tests: wheels 25, build 100,
#                         racecheck 260 (without Doppler), initcheck 130          = 515 + 4 x 10 = 555
#   call 6, the other GPU benchmarks: wheels 25, build 100, bench_ai 90, bench_live 90,
#                         seed002 (usbeam CUDA rows) 150                          = 455 + 5 x 10 = 505
#   call 7, racecheck over the Doppler tests: wheels 25, build 100, racecheck 440 = 565 + 3 x 10 = 595
# Calls 1-4 took about 12 minutes of device time on 2026-11-25 (cold starts included); 5 and 6
# fit in the rest of a 30-minute session when issued right after them.
# A cold machine in calls 2 to 4 (the previous call's machine was given back) rebuilds within
# the build step (57 s of nvcc for sm_90 on the H100's 16 cores, 2026-11-25); issue the calls
# back to back all the same, since a cold start costs a minute of device time.
#
# Every step writes $OUT/<step>.log as it runs and appends its verdict to $OUT/summary.txt at
# once, so a call killed at its limit still returns what finished.  Files per call (at most 8
# come back): call 1: summary, preflight, wheels, build, tests = 5; call 2: summary, 5
# benchmark logs, RESULTS.md = 7; calls 3 and 4: summary, wheels, build, memcheck = 4;
# call 5: summary, racecheck, initcheck = 3; call 6: summary, 3 logs, RESULTS.md = 5; call 7:
# summary, racecheck_doppler = 2.
# Merge the new sections of the returned RESULTS.md into benchmarks/RESULTS.md (keep older rows).
set -u
CALL=${1:-1}
OUT=${OUT:-/tmp/usbeam-gpu-out}
mkdir -p "$OUT"
PY=${PY:-python3}
export USBEAM_DATA=${USBEAM_DATA:-$PWD/.gpu/datasets}
export PYTHONUNBUFFERED=1
SUMMARY="$OUT/summary.txt"

log() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$SUMMARY"; }

# step NAME SECONDS COMMAND...: run with a time limit, log to $OUT/NAME.log, summarise at once.
step() {
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    timeout --signal=INT --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    log "$name: rc=$rc in $((SECONDS - start)) s (budget $limit s)$([ $rc = 124 ] && echo ': TIMED OUT')"
    tail -n 3 "$OUT/$name.log" | sed 's/^/    /' | tee -a "$SUMMARY"
}

# What the machine is, which CUDA libraries each module loads, and whether usbeam and PyTorch
# share one cuBLAS (usbeam._cuda preloads the one already in the process, else the toolkit's).
preflight() {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    nvcc --version | tail -n 2
    ls -l "$(dirname "$(command -v nvcc)")/../lib64/libcudart_static.a" "$(dirname "$(command -v nvcc)")/../lib64/libcublas.so"*
    "$PY" - <<'EOF'
import usbeam, torch
print("usbeam", usbeam.build_info())
a = torch.ones(64, 64, device="cuda")
print("torch", torch.__version__, "cuBLAS matmul ok:", bool(((a @ a) == 64).all()))
import numpy as np
x = usbeam.device.from_numpy(np.ones((4, 8), np.complex64))
print("usbeam DeviceArray round trip ok:", bool((x.to_numpy() == 1).all()))
maps = open("/proc/self/maps").read().split("\n")
libs = sorted({line.split()[-1] for line in maps if any(k in line for k in ("cublas", "cudart", "libcuda.so", "_core", "_cuda"))})
print("loaded CUDA libraries and usbeam modules:\n  " + "\n  ".join(libs))
EOF
}

wheels() { [ -d .gpu/wheels ] && "$PY" -m pip install -q --no-index --find-links .gpu/wheels mach-beamform array-api-compat pymust; true; }
# `timeout` runs programs, not shell functions: the steps that are functions run in a child
# bash that inherits them (the first session on a GPU found `timeout preflight` failing)
export -f preflight wheels
export PY

log "call $CALL on $(hostname)"
if ! nvidia-smi -L >> "$SUMMARY" 2>&1; then
    log "no GPU visible (nvidia-smi failed): nothing to run"
    exit 1
fi
BUILD=(env USBEAM_CUDA=1 USBEAM_CUDA_ARCH="${USBEAM_CUDA_ARCH:-90}" "$PY" setup.py --quiet build_ext --inplace)
case "$CALL" in
1)
    step wheels 25 bash -c wheels
    step build 140 "${BUILD[@]}"
    step preflight 25 bash -c preflight  # imports usbeam: after the build
    step tests 300 "$PY" -m pytest -q -p no:cacheprovider -p no:randomly -m cuda -rs tests
    ;;
2)
    step wheels 25 bash -c wheels
    step build 100 "${BUILD[@]}"
    step bench_beamform_gpu 60 "$PY" benchmarks/bench_beamform_gpu.py --repeat 30
    step bench_rca_gpu 60 "$PY" benchmarks/bench_rca_gpu.py --repeat 5
    step bench_acquire_gpu 30 "$PY" benchmarks/bench_acquire_gpu.py --repeat 30
    step bench_pipelines_gpu 60 "$PY" benchmarks/bench_pipelines_gpu.py --only RF2IQ_DAS_BMODE --repeat 20
    step bench_sector_gpu 90 "$PY" benchmarks/bench_sector.py --cuda --repeat 30
    cp benchmarks/RESULTS.md "$OUT/RESULTS.md"
    # at most 8 files come back: the set-up logs go (their verdicts are in summary.txt)
    rm -f "$OUT/wheels.log" "$OUT/build.log"
    ;;
3|4)
    step wheels 25 bash -c wheels
    step build 100 "${BUILD[@]}"
    # every test file with a CUDA test, without the slow ones (big recordings) and the PyTorch /
    # CuPy peers (their own allocators make memcheck slow and report their own internals); the
    # files split in two halves (call 3: even positions, call 4: odd), since all of them under
    # memcheck took more than one call (92 % in 380 s on an H100).  API errors are not reported:
    # the tests provoke some on purpose (out of memory, a capture refused), and every one usbeam
    # does not expect already fails its test.
    mapfile -t ALL < <(grep -l "pytest.mark.cuda" tests/test_*.py tests/*/test_*.py 2>/dev/null)
    FILES=()
    for i in "${!ALL[@]}"; do [ $((i % 2)) = $((CALL - 3)) ] && FILES+=("${ALL[$i]}"); done
    step memcheck 380 compute-sanitizer --tool memcheck --report-api-errors no --show-backtrace device --error-exitcode 97 \
        --print-limit 20 "$PY" -m pytest -q -rfE -p no:cacheprovider -p no:randomly -m "cuda and not slow" \
        -k "not torch and not cupy" "${FILES[@]}"
    ;;
5)
    step wheels 25 bash -c wheels
    step build 100 "${BUILD[@]}"
    # racecheck and initcheck over the tests of the kernels with shared memory, barriers,
    # shuffles or atomics (make test-emu-stress's list), without the PyTorch / CuPy peers;
    # initcheck skips the copy bandwidth probe, whose > 100 GB/s check the instrumentation makes
    # fail.  racecheck leaves out the Doppler tests (call 7): under it they take ~3 s each, and
    # with them the 230-s step ran out at the 62nd of 92 (H100 2026-11-25, H200 2026-11-28);
    # the other files took about 120 s (Hadamard, rf2iq, B-mode) + 43 s (DAS, RCA) on the H200
    SHARED=(tests/acquire/test_cuda_hadamard.py tests/demod/test_cuda_rf2iq.py tests/bmode/test_cuda_bmode.py
            tests/doppler/test_cuda_doppler.py tests/ai/test_ai_cuda.py tests/beamform/test_cuda_das.py
            tests/beamform/test_cuda_rca.py)
    RACE=()
    for f in "${SHARED[@]}"; do [ "$f" != tests/doppler/test_cuda_doppler.py ] && RACE+=("$f"); done
    step racecheck 260 compute-sanitizer --tool racecheck --report-api-errors no --show-backtrace device \
        --error-exitcode 97 --print-limit 20 "$PY" -m pytest -q -rfE -p no:cacheprovider -p no:randomly \
        -m "cuda and not slow" -k "not torch and not cupy" "${RACE[@]}"
    step initcheck 130 compute-sanitizer --tool initcheck --report-api-errors no --show-backtrace device \
        --error-exitcode 97 --print-limit 20 "$PY" -m pytest -q -rfE -p no:cacheprovider -p no:randomly \
        -m "cuda and not slow" -k "not torch and not cupy and not bandwidth_probe" "${SHARED[@]}"
    rm -f "$OUT/wheels.log" "$OUT/build.log"
    ;;
6)
    step wheels 25 bash -c wheels
    step build 100 "${BUILD[@]}"
    # the GPU benchmarks the first session lent a GPU did not finish: the AI hand-off (its
    # CUDA-graph warm-up fixed since), the live session, and seed-002's usbeam CUDA rows
    step bench_ai 90 "$PY" benchmarks/bench_ai.py --repeat 50
    step bench_live 90 "$PY" benchmarks/bench_live.py --gpu-only --quick
    step seed002 150 "$PY" benchmarks/seed002_table.py --engines "usbeam C gather" "usbeam CUDA gather" \
        "usbeam CUDA sparse (cuSPARSE)" --rounds 2 --repeat 3 --record
    cp benchmarks/RESULTS.md "$OUT/RESULTS.md"
    rm -f "$OUT/wheels.log" "$OUT/build.log"
    ;;
7)
    step wheels 25 bash -c wheels
    step build 100 "${BUILD[@]}"
    # racecheck over the Doppler kernels' tests alone (call 5 leaves them out), slowest first
    # reported, so a call cut at its limit still says which tests to thin out
    step racecheck_doppler 440 compute-sanitizer --tool racecheck --report-api-errors no --show-backtrace device \
        --error-exitcode 97 --print-limit 20 "$PY" -m pytest -q -rfE -p no:cacheprovider -p no:randomly \
        --durations=15 -m "cuda and not slow" -k "not torch and not cupy" tests/doppler/test_cuda_doppler.py
    rm -f "$OUT/wheels.log" "$OUT/build.log"
    ;;
*)
    log "unknown call $CALL (1: correctness, 2: benchmarks, 3 and 4: memcheck, each half the files, 5: racecheck and initcheck, 6: AI, live and seed-002 GPU benchmarks, 7: racecheck of the Doppler tests)"
    exit 2
    ;;
esac
log "done"
