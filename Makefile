# usbeam: every target does its own set-up (virtual environment, dependencies, build).
#   make demo    simulated phantom, RF -> IQ -> DAS -> B-mode on the CPU, PNG + stage timings
#   make test    build, C tests, the whole pytest suite, the install routes (sdist, wheels,
#                fresh venvs, CUDA toolkit hidden) and, where the CUDA headers are, the emulator
#   make test-package  the install routes alone (tests/build/test_install.py)
#   make asan    C tests and the pytest suite under AddressSanitizer + UBSan
#   make bench   benchmarks (see benchmarks/README.md)
#   make test-emu  the CUDA tests on the CPU emulator (cuda/emu; needs the CUDA headers only)
#   make asan-emu  the same under AddressSanitizer + UBSan
#   make octave  GNU Octave from the Debian packages where absent (make test runs it first)
#   make mex     the MEX client examples/usbeam_mex.c for Octave (build/mex/usbeam_mex.mex)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.deps-installed
# pytest runs in random order (pytest-randomly; the seed is printed at the end): replay one with
# `make test PYTEST_ARGS=--randomly-seed=N`, or run in file order with PYTEST_ARGS="-p no:randomly".
PYTEST_ARGS ?=
CC     ?= cc
CFLAGS_C := -std=c11 -O2 -g -Wall -Wextra -Wshadow -Wno-unused-parameter -fopenmp -Icsrc -Icsrc/include
ifeq ($(CI),true)
CFLAGS_C += -Werror
endif
# The C library: every csrc/<stage>/*.c but the Python binding (csrc/python/).
CORE_C := $(filter-out csrc/python/%,$(shell find csrc -name '*.c' | sort))
CORE_H := $(shell find csrc -name '*.h')

.PHONY: octave mex all venv build test test-clang-if-found test-package test-emu-stress ctest pytest demo asan asan-emu bench clean client emu-build test-emu test-emu-if-headers bench-emu gpu-prep

all: build

$(STAMP): requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

venv: $(STAMP)

# Development builds compile the CUDA backend for one architecture (sm_90) to stay quick; the
# wheel's default is the fat binary (setup.py).  USBEAM_CUDA_ARCH overrides both.
build: $(STAMP)
	USBEAM_CUDA_ARCH="$${USBEAM_CUDA_ARCH:-90}" $(PY) setup.py --quiet build_ext --inplace

CTESTS := $(patsubst tests/c/%.c,build/ctest/%,$(wildcard tests/c/test_*.c))

build/ctest/%: tests/c/%.c tests/c/check.h $(CORE_C) $(CORE_H)
	@mkdir -p build/ctest
	$(CC) $(CFLAGS_C) $< $(CORE_C) -lm -lpthread -lrt -o $@

# Each tests/c/test_*.c is its own program and prints "N passed, N failed".
ctest: $(CTESTS)
	@set -e; for t in $(CTESTS); do echo "== $$t"; ./$$t; done

pytest: build
	$(PY) -m pytest -q $(PYTEST_ARGS)

test: build ctest
	@$(MAKE) --no-print-directory octave
	$(PY) -m pytest -q $(PYTEST_ARGS)
	$(MAKE) --no-print-directory test-package
	$(MAKE) --no-print-directory test-emu-if-headers
	$(MAKE) --no-print-directory test-clang-if-found

# The extension built with clang where it is installed (macOS and conda toolchains use it; a
# GCC-only construct once broke that build), CPU only, into its own copy of the package, and
# the demo run from it.
CLANG_DIR = build/clang
test-clang-if-found: $(STAMP)
	@if command -v clang > /dev/null; then \
	    set -e; mkdir -p $(CLANG_DIR)/pkg/usbeam; \
	    tar -C usbeam --exclude='*.so' --exclude=__pycache__ --exclude=_cuda_build.py --exclude=include -cf - . \
	        | tar -C $(CLANG_DIR)/pkg/usbeam -xf -; \
	    CC=clang CI=$${CI:-} USBEAM_CUDA=0 $(PY) setup.py --quiet build_ext --build-lib $(CLANG_DIR)/pkg \
	        --build-temp $(CLANG_DIR)/temp; \
	    cd $(CLANG_DIR)/pkg && $(abspath $(PY)) -m usbeam.demo --out $(abspath $(CLANG_DIR))/demo_bmode.png; \
	else echo "test-clang-if-found: clang not found, skipped"; fi

# What users get: the README's install routes into fresh virtual environments, imported from
# outside the checkout, and CPU work with the CUDA toolkit hidden (tests/build/test_install.py).
test-package: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -p no:randomly --packaging tests/build/test_install.py

demo: build
	$(PY) -m usbeam.demo --out demo_bmode.png

# Sanitizers: the C tests natively, the extension with libasan preloaded into CPython.
asan: $(STAMP)
	@mkdir -p build/ctest-asan
	@set -e; for src in tests/c/test_*.c; do \
	    exe=build/ctest-asan/$$(basename $$src .c); \
	    $(CC) $(CFLAGS_C) -O1 -fno-omit-frame-pointer -fsanitize=address,undefined $$src $(CORE_C) -lm -lpthread -lrt -o $$exe; \
	    echo "== $$exe"; ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ./$$exe; \
	done
	rm -f usbeam/_core*.so usbeam/_cuda*.so usbeam/_cuda_build.py
	USBEAM_SANITIZE=1 USBEAM_CUDA=0 $(PY) setup.py --quiet build_ext --inplace --force
	LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	    ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
	    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    $(PY) -m pytest -q -m "not slow" -p no:cacheprovider $(PYTEST_ARGS)
	rm -f usbeam/_core*.so
	$(MAKE) build

# The CUDA backend compiled by g++ against the CPU emulator, in its own copy of the package
# (build/emu/pkg) so the real build in usbeam/ is untouched; runs every test marked cuda.
EMU_DIR ?= build/emu
EMU_SANITIZE ?= 0
EMU_PKG = $(EMU_DIR)/pkg
emu-build: $(STAMP)
	@mkdir -p $(EMU_PKG)/usbeam
	@# the Python tree is copied afresh (a module deleted from usbeam/ must not linger in the copy)
	if [ -d $(EMU_PKG)/usbeam ]; then find $(EMU_PKG)/usbeam \( -name '*.py' -o -name '*.json' \) -delete; fi
	tar -C usbeam --exclude='*.so' --exclude=__pycache__ --exclude=_cuda_build.py --exclude=include -cf - . \
	    | tar -C $(EMU_PKG)/usbeam -xf -
	USBEAM_CUDA=emu USBEAM_SANITIZE=$(EMU_SANITIZE) $(PY) setup.py --quiet build_ext --build-lib $(EMU_PKG) \
	    --build-temp $(EMU_DIR)/temp

# The emulated CUDA tests with the extension, the CUDA host code and the kernels under
# AddressSanitizer + UBSan (fibers annotated for ASan): memory errors and undefined
# behaviour in code that otherwise only runs on a GPU.
asan-emu:
	$(MAKE) --no-print-directory emu-build EMU_DIR=build/emu-asan EMU_SANITIZE=1
	cd build/emu-asan/pkg && USBEAM_EMU_QUIET=1 \
	    LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	    ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
	    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    $(abspath $(PY)) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS) -m cuda $(abspath tests)

test-emu: emu-build
	cd $(EMU_PKG) && USBEAM_EMU_QUIET=1 $(abspath $(PY)) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS) -m cuda $(abspath tests)

# The emulated CUDA tests of the kernels with shared memory, barriers, shuffles or atomics, with
# the threads of a block switching at random statements (cuda/emu/MODES.md, stress mode).
EMU_STRESS_TESTS = acquire/test_cuda_hadamard demod/test_cuda_rf2iq bmode/test_cuda_bmode doppler/test_cuda_doppler \
    ai/test_ai_cuda beamform/test_cuda_das beamform/test_cuda_rca
EMU_STRESS_K = test_cuda_rf2iq or test_cuda_hadamard or test_cuda_bmode or svd_rank_deficient or svd_automatic \
    or svd_non_finite or display or color or iir or projection or power or thin or single_image or regionprops \
    or detect_max_candidates or detect_non_finite or plan_reused or stream_ordering or model_input \
    or tiles_at_grid_edges or later_plan or bscans
test-emu-stress: emu-build
	cd $(EMU_PKG) && USBEAM_EMU_QUIET=1 USBEAM_EMU_STRESS=1 $(abspath $(PY)) -m pytest -q -p no:cacheprovider \
	    $(PYTEST_ARGS) -m "cuda and not slow" -k "$(EMU_STRESS_K)" $(foreach t,$(EMU_STRESS_TESTS),$(abspath tests/$(t).py))

# The GPU benchmark scripts on the emulator, at small sizes: they validate their results and
# run end to end (their times mean nothing and are not recorded), so a GPU day is not spent
# debugging a script.
EMU_BENCH = cd $(EMU_PKG) && USBEAM_EMU_QUIET=1 USBEAM_IMPORT_ROOT=$(abspath $(EMU_PKG)) \
    USBEAM_DATA=$(abspath ../shared/datasets) $(abspath $(PY)) $(abspath benchmarks)
bench-emu: emu-build
	$(EMU_BENCH)/bench_twins_gpu.py --repeat 2 --no-record
	$(EMU_BENCH)/bench_acquire_gpu.py --order 16 --samples 256 --channels 8 --repeat 2 --no-record
	$(EMU_BENCH)/bench_rca_gpu.py --bscan 32 --volume 12 --check 12 --repeat 2 --no-record
	$(EMU_BENCH)/bench_pipelines_gpu.py --repeat 2 --frames 8 --elements 32 --samples 256 --grid 32 --no-record
	$(EMU_BENCH)/bench_sector.py --cuda --small --repeat 2 --no-record
	@if [ -f ../shared/datasets/PWI_disk.mat ]; then \
	    echo "bench_beamform_gpu.py (PWI_disk)"; $(EMU_BENCH)/bench_beamform_gpu.py --repeat 2 --no-record; \
	else echo "bench_beamform_gpu.py skipped: ../shared/datasets/PWI_disk.mat not found"; fi

# Everything a session lent a GPU carries to it (benchmarks/gpu_session.sh): wheels for the
# device image's Python 3.12 and the recordings, in .gpu/ (git-ignored).
gpu-prep: $(STAMP)
	@mkdir -p .gpu/wheels .gpu/datasets
	$(PY) -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
	    --platform manylinux_2_34_x86_64 -d .gpu/wheels mach-beamform==0.2.1 array-api-compat==1.16.0 pymust==0.1.9
	cp ../shared/datasets/*.mat ../shared/datasets/README.md .gpu/datasets/
	du -sh .gpu

# make test runs the emulated CUDA tests wherever the CUDA headers are (as setup.py finds them).
NVCC_PATH := $(shell command -v nvcc 2>/dev/null)
CUDA_RUNTIME_H := $(firstword $(wildcard $(if $(CUDA_HOME),$(CUDA_HOME)/include/cuda_runtime.h) \
    $(if $(NVCC_PATH),$(dir $(NVCC_PATH))../include/cuda_runtime.h) /usr/local/cuda/include/cuda_runtime.h))
test-emu-if-headers:
ifneq ($(CUDA_RUNTIME_H),)
	$(MAKE) --no-print-directory test-emu
	$(MAKE) --no-print-directory test-emu-stress
	$(MAKE) --no-print-directory bench-emu
else
	@echo "CUDA emulator tests skipped: no CUDA headers (cuda_runtime.h) on this machine"
endif

CPU_BENCHMARKS := bench_pwi_disk bench_demod bench_beamform bench_rca bench_pipelines bench_live bench_ai bench_batch
GPU_BENCHMARKS := bench_acquire_gpu bench_beamform_gpu bench_rca_gpu bench_pipelines_gpu bench_twins_gpu
bench: build
	@set -e; for b in $(CPU_BENCHMARKS); do echo "== benchmarks/$$b.py"; $(PY) benchmarks/$$b.py; done
	@if $(PY) -c "import usbeam, sys; sys.exit(not usbeam.cuda_available())"; then \
	    for b in $(GPU_BENCHMARKS); do echo "== benchmarks/$$b.py"; $(PY) benchmarks/$$b.py; done; \
	else echo "GPU benchmarks skipped: no CUDA device visible (make bench-emu smoke-runs them)"; fi

# family live: the standalone client of `usbeam serve` (MATLAB loadlibrary, ctypes, C).
# Needs only libc; csrc/shm/usbeam_client.h is its header.
CLIENT_LIB := build/libusbeam_client.so
client: $(CLIENT_LIB)

$(CLIENT_LIB): csrc/shm/client.c csrc/shm/usbeam_client.h csrc/shm/shm_layout.h csrc/shm/shm_sync.h
	@mkdir -p build
	$(CC) -std=c11 -O2 -g -Wall -Wextra -Wshadow -Wno-unused-parameter $(if $(filter true,$(CI)),-Werror) \
	    -fPIC -shared -Icsrc csrc/shm/client.c -o $@ -lpthread -lrt

# GNU Octave for the Vantage end-to-end test (tests/live/test_vantage_octave.py): installed from
# the Debian packages where absent (root or sudo, apt-get: 15 s, 138 packages, 282 MiB on this
# project's Debian 12 image, measured 2026-11-24).  Never fatal: where it cannot be installed
# the reason goes to build/octave-unavailable.txt and the test skips with it.
OCTAVE_NOTE := build/octave-unavailable.txt
octave:
	@mkdir -p build; rm -f $(OCTAVE_NOTE)
	@if command -v octave >/dev/null 2>&1 && command -v mkoctfile >/dev/null 2>&1; then exit 0; fi; \
	if ! command -v apt-get >/dev/null 2>&1; then echo "no apt-get on this machine" > $(OCTAVE_NOTE); \
	elif [ "$$(id -u)" != 0 ] && ! sudo -n true 2>/dev/null; then echo "apt-get needs root (or sudo without a password)" > $(OCTAVE_NOTE); \
	else SUDO=$$([ "$$(id -u)" = 0 ] || echo "sudo -n"); echo "installing GNU Octave (apt-get install octave liboctave-dev)"; \
	  ( timeout 300 $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    timeout 600 $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      octave liboctave-dev ) \
	    > build/octave-install.log 2>&1 || { echo "apt-get install octave liboctave-dev failed (no network?): $$(tail -n 2 build/octave-install.log | tr '\n' ' ')" > $(OCTAVE_NOTE); }; fi; \
	if [ -f $(OCTAVE_NOTE) ]; then echo "GNU Octave unavailable, the Octave tests will skip: $$(cat $(OCTAVE_NOTE))"; fi

# The MEX client (examples/usbeam_mex.c) for GNU Octave; MATLAB: mex -Icsrc examples/usbeam_mex.c csrc/shm/client.c -lrt
MEX := build/mex/usbeam_mex.mex
mex: $(MEX)

$(MEX): examples/usbeam_mex.c csrc/shm/client.c csrc/shm/usbeam_client.h csrc/shm/shm_layout.h csrc/shm/shm_sync.h
	@mkdir -p build/mex
	CFLAGS="-std=gnu11 -O2 -Wall -Wextra -Wshadow -Wno-unused-parameter $(if $(filter true,$(CI)),-Werror)" \
	    mkoctfile --mex -Icsrc examples/usbeam_mex.c csrc/shm/client.c -lrt -lpthread -o $@

clean:
	rm -rf build dist usbeam/_core*.so usbeam/_cuda*.so usbeam/_cuda_build.py usbeam/libusbeam_client.so \
	    usbeam/include usbeam/__pycache__ tests/__pycache__ demo_bmode.png
