# `make demo` and `make test` set everything up from nothing: a virtual
# environment (the demo's few packages from requirements-demo.txt, the
# test tools from requirements-dev.txt on top), the C extension built in
# place.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEMO_DEPS := $(VENV)/.demo-deps-stamp
DEPS := $(VENV)/.deps-stamp
EXT := $(VENV)/.ext-stamp
CORE_SOURCES := $(wildcard csrc/core/*.c csrc/core/*.h)
# every C, header and CUDA file under csrc/, whatever its folder: a folder
# left off this list would leave a stale extension to test
EXT_SOURCES := $(shell find csrc -name '*.[ch]' -o -name '*.cu')
CFLAGS_STRICT := -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -pthread
# CI passes -Werror to the extension; users' builds never get it.
WERROR ?= 1

.PHONY: demo test test-core test-kernels test-python asan bench bench-projection build \
	clean typecheck gpu-check browser wheel wheel-check test-pythons

$(DEMO_DEPS): requirements-demo.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements-demo.txt
	touch $@

$(DEPS): $(DEMO_DEPS) requirements-dev.txt requirements-aquamvs.txt
	$(PY) -m pip install -q -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps -r requirements-aquamvs.txt
	touch $@

# The browser tests' chromium (tests/support/browser.py): Debian's, which
# Playwright drives (its own download is never used). Where it cannot be
# installed (not root, no apt) the tests skip and say why.
browser:
	@command -v chromium >/dev/null || command -v chromium-browser \
	  >/dev/null || apt-get install -y -q chromium || \
	  (apt-get update -q && apt-get install -y -q chromium) || \
	  echo "chromium could not be installed: the browser tests will skip"

$(EXT): $(DEMO_DEPS) $(EXT_SOURCES) setup.py pyproject.toml
	AQUAPROF_WERROR=$(WERROR) $(PY) setup.py -q build_ext --inplace --force
	touch $@

build: $(EXT)

demo: build
	$(PY) -m aquaprof demo

tests/core/test_core: $(CORE_SOURCES) tests/core/test_core.c
	$(CC) $(CFLAGS_STRICT) csrc/core/*.c tests/core/test_core.c -lm -o $@

# The core's tests run with both tick sources, then under valgrind's
# memcheck where it is installed (no invalid access, no definite leak).
test-core: tests/core/test_core
	./tests/core/test_core
	AQUAPROF_CLOCK=monotonic ./tests/core/test_core
	@if command -v valgrind >/dev/null; then \
	  echo "valgrind memcheck:"; \
	  valgrind -q --error-exitcode=3 --leak-check=full \
	    --errors-for-leak-kinds=definite ./tests/core/test_core; \
	else echo "valgrind not installed: memcheck skipped"; fi

# The plane-sweep kit's maths that the GPU runs (csrc/mvs/), compiled for
# the host and checked against the CPU's: a GPU-only path fails here on a
# machine without one. And the CPU kernels' vector loops against their
# plain forms, to the bit. The tests include the kit's headers by
# relative path, as the kit's own files do.
KT = tests/mvs/kernels
KERNEL_TEST_HEADERS = $(wildcard csrc/mvs/*/*.h csrc/mvs/*/*.cuh $(KT)/*.h)
$(KT)/test_crossing: $(KT)/test_crossing.c $(KERNEL_TEST_HEADERS)
	$(CC) $(CFLAGS_STRICT) $(KT)/test_crossing.c -lm -o $@

SAMPLING_SOURCES = csrc/mvs/geometry/projector.c \
	csrc/mvs/geometry/camera.c csrc/mvs/geometry/snell_guess.c
$(KT)/test_sampling: $(KT)/test_sampling.c $(SAMPLING_SOURCES) $(KERNEL_TEST_HEADERS)
	$(CC) $(CFLAGS_STRICT) $(KT)/test_sampling.c $(SAMPLING_SOURCES) \
	  -lm -o $@

# the GPU's sample maths as nvcc builds it: products and sums fused where
# the host has FMA as the device does
HOST_FMA = $(shell grep -qw fma /proc/cpuinfo 2>/dev/null && echo -mfma)
$(KT)/test_gpu_sample: $(KT)/test_gpu_sample.c $(SAMPLING_SOURCES) $(KERNEL_TEST_HEADERS)
	$(CC) $(CFLAGS_STRICT) -ffp-contract=fast $(HOST_FMA) \
	  $(KT)/test_gpu_sample.c $(SAMPLING_SOURCES) -lm -o $@

# the strip cost kernel's blocks run thread by thread, against the
# window's sums made afresh and against the CPU's whole sweep: every C
# file of the kit but its binding and the C side of its CUDA path
KERNEL_SOURCES = $(wildcard csrc/mvs/geometry/*.c csrc/mvs/cpu/*.c \
	csrc/mvs/parity/*.c)
# ... and the same under the kinds of variant that
# benchmarks/mvs/gpu_variants.sh times (they are parameters): two sources
# a thread in another block geometry, and the same with each row read a
# row ahead (its passes of one source, the fifth of five and the side by
# side check's, read ahead as well)
STRIP_TWO = -DAP_STRIP_SOURCES=2 -DAP_STRIP_ROWS=48 -DAP_STRIP_GROUP=2 \
	-DAP_STRIP_SEGMENT=8
$(KT)/test_gpu_strip_variant: STRIP_FLAGS = $(STRIP_TWO)
$(KT)/test_gpu_strip_ahead: STRIP_FLAGS = $(STRIP_TWO) -DAP_STRIP_AHEAD=1
$(KT)/test_gpu_strip $(KT)/test_gpu_strip_variant $(KT)/test_gpu_strip_ahead: \
	  $(KT)/test_gpu_strip.c $(KERNEL_SOURCES) $(KERNEL_TEST_HEADERS) Makefile
	$(CC) $(CFLAGS_STRICT) -ffp-contract=fast $(HOST_FMA) $(STRIP_FLAGS) \
	  $(KT)/test_gpu_strip.c $(KERNEL_SOURCES) -lm -o $@

# AquaMVS parity's strip kernel the same way, against its windows summed
# whole and against the CPU's AquaMVS parity
$(KT)/test_gpu_parity_strip: $(KT)/test_gpu_parity_strip.c $(KERNEL_SOURCES) $(KERNEL_TEST_HEADERS)
	$(CC) $(CFLAGS_STRICT) -ffp-contract=fast $(HOST_FMA) \
	  $(KT)/test_gpu_parity_strip.c $(KERNEL_SOURCES) -lm -o $@

WINDOW_SOURCES = csrc/mvs/cpu/window_costs.c \
	csrc/mvs/parity/parity_filters.c csrc/mvs/cpu/wide_lanes.c
$(KT)/test_window_sums: $(KT)/test_window_sums.c $(WINDOW_SOURCES) $(KERNEL_TEST_HEADERS)
	$(CC) $(CFLAGS_STRICT) $(KT)/test_window_sums.c $(WINDOW_SOURCES) \
	  -lm -o $@

$(KT)/test_workers: $(KT)/test_workers.c csrc/mvs/cpu/workers.c $(KERNEL_TEST_HEADERS)
	$(CC) $(CFLAGS_STRICT) $(KT)/test_workers.c csrc/mvs/cpu/workers.c \
	  -o $@

KERNEL_TESTS = $(KT)/test_crossing $(KT)/test_sampling \
	$(KT)/test_gpu_sample $(KT)/test_gpu_strip $(KT)/test_gpu_strip_variant \
	$(KT)/test_gpu_strip_ahead $(KT)/test_gpu_parity_strip \
	$(KT)/test_window_sums \
	$(KT)/test_workers
test-kernels: $(KERNEL_TESTS)
	set -e; for t in $(KERNEL_TESTS); do ./$$t; done

test-python: build browser
	$(PY) -X dev -m pytest -q

# The core's tests, the window sums' kernel test (its buffers exactly
# their rows, so a loop past a row's end is caught) and then the whole
# Python suite with the extensions built under AddressSanitizer and
# UndefinedBehaviorSanitizer (any report is fatal), and the core's thread
# test under ThreadSanitizer. Leaves the
# sanitized extension in place: the next `make build` rebuilds. Its
# objects and library go to build/asan, never to the build folder that
# `pip install .` and `make wheel` reuse.
SAN_RUNTIME = $(shell $(CC) -print-file-name=libasan.so)
asan: $(DEPS) browser
	rm -f $(EXT)
	$(CC) $(CFLAGS_STRICT) -fsanitize=address,undefined \
	  -fno-sanitize-recover=all csrc/core/*.c tests/core/test_core.c -lm \
	  -o tests/core/test_core_asan
	./tests/core/test_core_asan
	$(CC) $(CFLAGS_STRICT) -fsanitize=address,undefined \
	  -fno-sanitize-recover=all \
	  $(KT)/test_window_sums.c $(WINDOW_SOURCES) -lm \
	  -o $(KT)/test_window_sums_asan
	./$(KT)/test_window_sums_asan
	$(CC) $(CFLAGS_STRICT) -fsanitize=thread csrc/core/*.c \
	  tests/core/test_core.c -lm -o tests/core/test_core_tsan
	TSAN_OPTIONS=halt_on_error=1 ./tests/core/test_core_tsan
	AQUAPROF_SANITIZE=1 AQUAPROF_WERROR=$(WERROR) $(PY) setup.py -q \
	  build_ext --inplace --force --build-temp build/asan/temp \
	  --build-lib build/asan/lib
	AQUAPROF_SANITIZED=1 LD_PRELOAD=$(SAN_RUNTIME) \
	  ASAN_OPTIONS=detect_leaks=0 \
	  UBSAN_OPTIONS=print_stacktrace=1 $(PY) -m pytest -q -p no:cacheprovider

# mypy over aquaprof/, with the settings in pyproject.toml
typecheck: $(DEPS)
	$(PY) -m mypy

# wheel-check right after asan: the wheel built then must be a plain build
test: typecheck asan wheel-check test-core test-kernels test-python \
	test-pythons

# The suite on the other CPythons pyproject.toml claims, where this
# machine has them (tests/support/other_pythons.sh); `make test-pythons
# OTHER_PYTHONS="3.9 3.10"` tries others.
OTHER_PYTHONS = 3.12 3.13
test-pythons: build
	bash tests/support/other_pythons.sh $(OTHER_PYTHONS)

# A binary wheel, CUDA kernels inside where nvcc is found, repaired and
# tagged for manylinux by auditwheel (dist/); wheel-check installs it into
# a fresh virtual environment with no compiler on the PATH and runs a
# smoke test there, then builds the sdist without nvcc and checks what it
# says it left out (tests/support/wheel_check.sh).
wheel: $(DEPS)
	rm -rf dist
	$(PY) -m pip wheel -q . --no-deps --no-build-isolation -w dist/raw
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m auditwheel repair -w dist \
	  dist/raw/aquaprof-*.whl
	# the egg-info pip left in the tree would register the pytest plugin
	# a second time in the tests' own pytest runs
	rm -rf dist/raw aquaprof.egg-info

wheel-check: wheel
	bash tests/support/wheel_check.sh $(PYTHON) $(PY) dist/aquaprof-*.whl

# The pytest-benchmark suite, its tables written into docs/benchmarks.md;
# then the overhead ratios against a C floor measured in the same run.
bench: build
	mkdir -p benchmarks/.results
	$(PY) -m pytest benchmarks/ -q -p no:cacheprovider \
	  --benchmark-json=benchmarks/.results/latest.json
	$(PY) benchmarks/write_tables.py benchmarks/.results/latest.json
	$(PY) benchmarks/bench_overhead.py --runs 5

KERNEL_CFLAGS := $(CFLAGS_STRICT) -O3 -fno-math-errno -fno-trapping-math
benchmarks/mvs/bench_projection: benchmarks/mvs/bench_projection.c $(SAMPLING_SOURCES) $(wildcard csrc/mvs/geometry/*.h csrc/mvs/cpu/*.h csrc/mvs/parity/*.h)
	$(CC) $(KERNEL_CFLAGS) benchmarks/mvs/bench_projection.c \
	  $(SAMPLING_SOURCES) -lm -o $@

bench-projection: benchmarks/mvs/bench_projection
	./benchmarks/mvs/bench_projection

# Every GPU check, on a bare GPU machine with python3 (no .venv), within
# a time budget; SUMMARY.txt and the logs go to OUT (docs/gpu.md).
OUT = gpu-check-out
gpu-check:
	PYTHON=$(PYTHON) bash tests/device/gpu_check.sh $(OUT)

clean:
	rm -rf build dist $(VENV) .venv-pythons tests/core/test_core tests/core/test_core_*san \
	  $(KERNEL_TESTS) $(KT)/test_window_sums_asan \
	  benchmarks/mvs/bench_projection aquaprof/_*.so gpu-check-out
