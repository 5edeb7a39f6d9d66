#!/usr/bin/env bash
# The device check: aquaprof's GPU paths on one NVIDIA GPU, in one go.
#
#     tests/device/gpu_check.sh [OUT]     (`make gpu-check [OUT=dir]`)
#     tests/device/gpu_check.sh --figures OUT   (the figures of its logs)
#
# Runs from a bare checkout with plain python3 (torch with CUDA, numpy,
# pytest) and CUDA's tools; builds in place and needs no network. Each step
# writes OUT/<step>.log and a line in OUT/SUMMARY.txt; at the end every
# log is packed into OUT/gpu-check.tgz, for machines that return few
# files. The steps come in order of value and the run keeps within
# GPU_CHECK_BUDGET seconds (default 540, 9 minutes): a step that no
# longer fits is skipped and the summary says so. Nothing here changes
# the GPU's settings (clocks, power, persistence, compute or MIG mode).
#
# Exit status: 0 every step that ran passed, 1 a step failed or timed
# out, 2 no GPU here (nvidia-smi is missing or lists none).
# Environment: PYTHON (default python3), GPU_CHECK_BUDGET,
# GPU_CHECK_NVIDIA_SMI (default nvidia-smi; the tests name a missing one).
set -u -o pipefail

SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
cd "$(dirname "$SELF")/../.." || exit 1

PY=${PYTHON:-python3}
NVIDIA_SMI=${GPU_CHECK_NVIDIA_SMI:-nvidia-smi}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1

CUDA_ROOT=/usr/local/cuda
for root in "${CUDA_HOME:-}" "${CUDA_PATH:-}"; do
    if [ -n "$root" ] && [ -d "$root/bin" ]; then CUDA_ROOT=$root; break; fi
done

tool() {    # a CUDA tool on PATH or in the toolkit, or nothing
    command -v "$1" 2>/dev/null && return
    if [ -x "$CUDA_ROOT/bin/$1" ]; then echo "$CUDA_ROOT/bin/$1"; fi
}
NVCC=$(tool nvcc)
NCU=$(tool ncu)
SANITIZER=$(tool compute-sanitizer)
CUOBJDUMP=$(tool cuobjdump)


# -------------------------------------------------- steps made of several
# commands: run as `gpu_check.sh --step NAME`, so that `timeout` ends them
# whole

step_env() {
    echo "date: $(date -u '+%F %T UTC'), $(tree_state)"
    if [ -n "$NO_GPU" ]; then echo "no GPU: $NO_GPU"; fi
    # queries only: a check must leave the GPU as it found it
    if command -v "$NVIDIA_SMI" >/dev/null 2>&1; then
        "$NVIDIA_SMI"
        "$NVIDIA_SMI" --format=csv --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,persistence_mode,compute_mode,mig.mode.current
    fi
    echo "CUDA toolkit: $CUDA_ROOT"
    for t in nvcc ncu compute-sanitizer cuobjdump; do
        path=$(tool "$t")
        echo "$t: ${path:-not found}${path:+, $("$path" --version 2>&1 | tail -1)}"
    done
    "$PY" - <<'EOF'
import importlib.metadata, importlib.util, sys
print("python", sys.version.split()[0], sys.executable)
# by distribution: pytest-timeout's module has no __version__
for name in ("numpy", "pytest", "pytest-timeout", "pytest-benchmark",
             "hypothesis", "setuptools", "torch"):
    try:
        print(f"{name} {importlib.metadata.version(name)}")
    except importlib.metadata.PackageNotFoundError:
        print(f"{name} missing")
spec = importlib.util.spec_from_file_location("aquaprof_setup", "setup.py")
setup = importlib.util.module_from_spec(spec)
spec.loader.exec_module(setup)
print("CUDA headers setup.py builds with:",
      setup.find_cupti_headers() or "none (no CUPTI)")
try:
    import torch
except ImportError:
    sys.exit(0)
print("torch CUDA", torch.version.cuda, "available",
      torch.cuda.is_available())
if torch.cuda.is_available():
    print("device 0:", torch.cuda.get_device_name(0),
          "compute capability", torch.cuda.get_device_capability(0))
# aquaprof uses the CUPTI already in the process: torch's, if any
print("libcupti mapped after import torch:",
      sorted({line.split()[-1] for line in open("/proc/self/maps")
              if "libcupti" in line}) or "none")
EOF
}

step_build() {
    # -Werror first, as CI builds; without it only so that the other
    # steps still have an extension to check
    AQUAPROF_WERROR=1 "$PY" setup.py build_ext --inplace --force && return 0
    echo "### the -Werror build FAILED; building without -Werror for the other steps"
    AQUAPROF_WERROR=0 "$PY" setup.py build_ext --inplace --force
    return 1
}

step_verify() {
    local rc=0
    "$PY" - <<'EOF' || rc=1
import sys
from aquaprof import _core, _mvs
print("aquaprof._core.HAVE_CUPTI =", _core.HAVE_CUPTI)
try:
    _mvs.gpu_check(0)
except RuntimeError as e:
    sys.exit(f"FAILED: the CUDA kernels cannot run on device 0: {e}")
print("aquaprof._mvs: the driver opened and the fat binary loaded on "
      "device 0")
if not _core.HAVE_CUPTI:
    sys.exit("FAILED: aquaprof._core was built without cupti.h, so it "
             "cannot trace the GPU")
EOF
    echo "--- the fat binary setup.py embedded"
    local fatbin="" f
    for f in build/temp.*/cuda/sweep.fatbin; do
        if [ -f "$f" ]; then fatbin=$f; break; fi
    done
    if [ -z "$fatbin" ] || [ -z "$CUOBJDUMP" ]; then
        echo "not listed: fat binary ${fatbin:-not found}, cuobjdump ${CUOBJDUMP:-not found}"
    else
        "$CUOBJDUMP" --list-elf --list-ptx "$fatbin"
        "$CUOBJDUMP" --list-elf "$fatbin" | grep -q sm_90 ||
            { echo "FAILED: no sm_90 code in $fatbin"; rc=1; }
    fi
    echo "--- ptxas on csrc/mvs/cuda/sweep.cu for sm_90: registers, spills, shared memory"
    if [ -n "$NVCC" ]; then
        "$NVCC" -cubin -arch=sm_90 -O3 -std=c++17 -Xptxas -v \
            -o "$SCRATCH/sweep_sm90.cubin" csrc/mvs/cuda/sweep.cu 2>&1 || rc=1
    else
        echo "nvcc not found"
    fi
    return $rc
}

step_sanitizer() {
    local leaks=()
    if [ "$1" = memcheck ]; then leaks=(--leak-check full); fi
    "$SANITIZER" --tool "$1" "${leaks[@]}" --error-exitcode 99 \
        --print-limit 30 "$PY" tests/device/sweep_raw.py san
}

step_aquamvs_cpu() {
    # two cores, as the CPU targets are set, against AquaMVS in this
    # machine's torch, as written and with fast convolutions
    local pin=()
    if command -v taskset >/dev/null; then pin=(taskset -c 0,1); fi
    "${pin[@]}" "$PY" benchmarks/mvs/bench_aquamvs.py --repeats 3 \
        --torch-planes 3
}

# The rest of the suite: the GPU tests and the refcount test ran in their
# own steps. In one process, 60 % of it took 270 s on an H200 machine,
# so SHARDS processes side by side, each a share of the files balanced by
# size; their logs follow one another in the step's.
step_pytest_rest() {
    local shards=$1 per_test=$2 k rc=0 args
    local -a pids=() logs=() lists=()
    args=(-m pytest -v -rfE -p no:cacheprovider -m "not gpu")
    if [ -n "${HAVE_PYTEST_TIMEOUT:-}" ]; then args+=("--timeout=$per_test"); fi
    # every room's test files (tests/mvs/ ...), the largest first, each to
    # the lightest shard so far
    # shellcheck disable=SC2046  # file names have no spaces
    mapfile -t lists < <(ls -S $(find tests -name 'test_*.py') |
        grep -vx tests/package/test_refcounts.py |
        awk -v n="$shards" '{ k = 0
            for (i = 1; i < n; i++) if (size[i] < size[k]) k = i
            cmd = "wc -c < " $0; cmd | getline b; close(cmd)
            size[k] += b; files[k] = files[k] " " $0 }
            END { for (i = 0; i < n; i++) print files[i] }')
    show() {
        for k in "${!logs[@]}"; do
            echo "=== shard $((k + 1)) of ${#logs[@]}:${lists[k]}"
            cat "${logs[k]}"
        done
    }
    trap 'kill "${pids[@]}" 2>/dev/null; wait; show; exit 124' TERM
    for k in "${!lists[@]}"; do
        logs+=("$SCRATCH/pytest_rest.$k.log")
        # shellcheck disable=SC2086  # the list is words
        "$PY" "${args[@]}" ${lists[k]} > "${logs[k]}" 2>&1 &
        pids+=($!)
    done
    for k in "${!pids[@]}"; do wait "${pids[k]}" || rc=1; done
    show
    return $rc
}

step_ncu() {
    # the second cost volume, once the code is warm (its one cost kernel,
    # the strip kernel of NCC at window 11, its blocks in either order,
    # or with the planes warped first, its warp and cost kernels); the
    # bytes it moved to and from DRAM, against the 0.98 GB volume's
    # write; clocks as they are
    local kernels=ap_strip_ncc_r5_kernel count=1
    if [ "$1" = ncu_planes ]; then
        kernels="ap_(warp|cost)_planes_kernel" count=2
    fi
    "$NCU" --clock-control none --target-processes all \
        --kernel-name "regex:$kernels" --launch-skip "$count" \
        --launch-count "$count" \
        --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section Occupancy --section WarpStateStats \
        --section ComputeWorkloadAnalysis --section InstructionStats \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
        --page details \
        "$PY" tests/device/sweep_raw.py "$1"
}

# --------------------------------------------------------- the summary

gpu_problem() {    # why there is no GPU to check, or nothing
    if ! command -v "$NVIDIA_SMI" >/dev/null 2>&1; then
        echo "$NVIDIA_SMI not found"
    elif ! "$NVIDIA_SMI" -L 2>/dev/null | grep -q '^GPU '; then
        echo "$NVIDIA_SMI lists none"
    fi
}

# The commit, and how many files differ from it: a copied tree (a device
# machine's) may carry an older .git than its files.
tree_state() {
    local head changed
    head=$(git rev-parse --short HEAD 2>/dev/null) || { echo "no git"; return; }
    changed=$(git status --porcelain --untracked-files=no 2>/dev/null | wc -l)
    echo "commit $head with $changed tracked files changed"
}
left() { echo $(( BUDGET - (SECONDS - START) )); }

line() {    # NAME SECONDS VERDICT
    printf '%-32s %5s  %s\n' "$1" "$2" "$3" | tee -a "$SUMMARY"
}

skip() {    # NAME WHY
    line "$1" - "SKIPPED ($2)"
}

# step NAME NEED CAP COMMAND...: COMMAND's output goes to OUT/NAME.log and
# its verdict to the summary; it runs if NEED seconds of the budget are
# left, for at most CAP of them
step() {
    local name=$1 need=$2 cap=$3 rc t0 limit room took
    shift 3
    if [ -n "$NO_GPU" ] && [ "$name" != env ]; then
        skip "$name" "no GPU: $NO_GPU"
        return
    fi
    room=$(( $(left) - RESERVE ))
    if [ "$room" -lt "$need" ]; then
        skip "$name" "needs ${need}s, ${room}s of the ${BUDGET}s budget left"
        return
    fi
    RAN+=("$name")
    limit=$(( cap < room ? cap : room ))
    t0=$SECONDS
    timeout -k 10 "$limit" "$@" > "$OUT/$name.log" 2>&1 < /dev/null
    rc=$?
    took="$(( SECONDS - t0 ))s"
    if [ "$rc" -eq 0 ]; then
        line "$name" "$took" ok
    elif [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ]; then
        line "$name" "$took" "FAILED (exit $rc)"
        FAILED+=("$name")
    elif [ "$limit" -lt "$cap" ]; then
        # the budget ended it, not a hang of its own: said, not failed
        line "$name" "$took" "CUT SHORT by the budget (its ${cap}s cap, ${limit}s left)"
        CUT+=("$name")
    else
        line "$name" "$took" "TIMED OUT (its ${cap}s cap)"
        FAILED+=("$name")
    fi
}

# pytest_step NAME NEED CAP TEST_TIMEOUT PYTEST_ARGS...: a step of pytest
# in which a hung test fails alone, after TEST_TIMEOUT seconds; verbose,
# so that a step the budget cuts short still names each test's result
pytest_step() {
    local name=$1 need=$2 cap=$3 per_test=$4 args
    shift 4
    args=(-m pytest -v -rfE -p no:cacheprovider)
    if [ -n "${HAVE_PYTEST_TIMEOUT:-}" ]; then args+=("--timeout=$per_test"); fi
    step "$name" "$need" "$cap" "$PY" "${args[@]}" "$@"
}

# Each failed step's telling lines: failed tests, RESULT lines, cases
# that differ from the CPU, sanitizer totals, compiler errors; else the
# tests a cut-short pytest saw fail; else the log's last lines.
failures() {
    local name log found
    for name in "${FAILED[@]}" "${CUT[@]}"; do
        log="$OUT/$name.log"
        echo "* $name ($name.log):"
        found=$(grep -E '^(FAILED|ERROR) |^RESULT |^BAD |ERROR SUMMARY|RACECHECK SUMMARY|error:|^FAILED:' "$log" | sort -u)
        if [ -z "$found" ]; then found=$(grep -E '::.* (FAILED|ERROR) +\[' "$log"); fi
        if [ -z "$found" ]; then found=$(grep -v '^\s*$' "$log" | tail -3); fi
        echo "$found" | head -8 | cut -c1-300 | sed 's/^/    /'
        if [ "$(echo "$found" | wc -l)" -gt 8 ]; then
            echo "    ... $(( $(echo "$found" | wc -l) - 8 )) more in the log"
        fi
    done
}

figures() {
    if [ -f "$OUT/bench_mvs_cuda.log" ]; then
        echo "bench_mvs, 1200x1600, 5 source views, 128 depths, NCC 11:"
        grep -hE '^depths|^ +128 |^target|^depth map|^  depth_batch' "$OUT/bench_mvs_cuda.log" | sed 's/^/    /'
    fi
    grep -hE '^stage pair|aquaprof \(CUPTI\)' "$OUT/bench_gpu_overhead.log" 2>/dev/null |
        sed 's/^ */bench_gpu_overhead: /'
    grep -hE '^(cost|ncc|ssim) |^targets' "$OUT/bench_aquamvs_cpu.log" 2>/dev/null |
        sed 's/^/bench_aquamvs_cpu: /'
    awk -F"'" '/entry function/ { k = $2 }
        /spill stores/ { s = $0; sub(/^ +/, "", s) }
        /Used [0-9]+ registers/ { sub(/.*: /, ""); print "ptxas sm_90 " k ": " $0 "; " s }' \
        "$OUT/verify.log" 2>/dev/null
    # each line named by the log's workload and the kernel whose section
    # it is in (mawk stops at a missing file: the logs there are given)
    local logs=() log
    for log in ncu_cost ncu_cost_tiles ncu_cost_planes; do
        if [ -f "$OUT/$log.log" ]; then logs+=("$OUT/$log.log"); fi
    done
    if [ ${#logs[@]} -eq 0 ]; then return; fi
    awk 'FNR == 1 { w = FILENAME; sub(/.*ncu_cost_?/, "", w); sub(/\.log$/, "", w)
            if (w == "tiles") w = " (blocks a plane at a time)"
            else if (w == "planes") w = " (planes warped first)" }
        /^  ap_[a-z0-9_]+_kernel \(/ { k = $1 }
        /^ +(Duration|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|dram__bytes_(read|write)\.sum|lts__t_sector_hit_rate\.pct) / {
            s = $0; gsub(/ +/, " ", s); sub(/^ /, "", s)
            print "ncu" w " " k ": " s }' "${logs[@]}"
}

# ------------------------------------------------------------- the run

if [ "${1:-}" = --figures ]; then    # the figures of the logs in $2
    OUT=${2:?usage: gpu_check.sh --figures OUT}
    figures
    exit
fi
if [ "${1:-}" = --step ]; then
    NO_GPU=${GPU_CHECK_NO_GPU:-}
    SCRATCH=${GPU_CHECK_SCRATCH:-/tmp}
    "step_$2" "${@:3}"
    exit
fi

OUT=${1:-gpu-check-out}
BUDGET=${GPU_CHECK_BUDGET:-540}
RESERVE=15      # for the kill grace of the last step and the packing
START=$SECONDS
SUMMARY=$OUT/SUMMARY.txt
RAN=()
FAILED=()
CUT=()
mkdir -p "$OUT" || exit 1
rm -f "$OUT"/*.log "$SUMMARY" "$OUT/gpu-check.tgz"
# scratch (the demo's files, the cubin) stays out of OUT: OUT holds only
# what a reader needs
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/aquaprof-gpu-check.XXXXXX") || exit 1
trap 'rm -rf "$SCRATCH"' EXIT
NO_GPU=$(gpu_problem)
HAVE_PYTEST_TIMEOUT=$("$PY" -c 'import pytest_timeout' 2>/dev/null && echo 1)
export GPU_CHECK_SCRATCH=$SCRATCH GPU_CHECK_NO_GPU=$NO_GPU PYTHON=$PY HAVE_PYTEST_TIMEOUT

{
    echo "aquaprof gpu-check, $(date -u '+%F %T UTC'), $(tree_state)"
    if [ -z "$NO_GPU" ]; then
        echo "GPU: $("$NVIDIA_SMI" --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
    fi
    echo "budget ${BUDGET}s; each step's output is in OUT/<step>.log, all of them in gpu-check.tgz"
    echo
    printf '%-32s %5s  %s\n' step time result
} | tee "$SUMMARY"

step env 5 60 bash "$SELF" --step env
step build 30 300 bash "$SELF" --step build
step verify 10 60 bash "$SELF" --step verify
pytest_step pytest_gpu 30 180 120 -m gpu tests
step raw_small 15 90 "$PY" tests/device/sweep_raw.py small
for scenario in pipeline torch_profiler open_stage stop_thread fork overhead blocks; do
    step "cupti_$scenario" 15 90 "$PY" tests/device/cupti_scenarios.py "$scenario"
done
# the fork test sees a parent's GPU state; the refcount test's bad device
# pointers would spoil the CUDA tests that follow them in one process
pytest_step pytest_fork 15 60 50 \
    tests/package/test_behaviour.py::test_fork_child_neither_corrupts_nor_reports_parent_data
pytest_step pytest_refcounts_then_mvs_gpu 20 120 100 tests/package/test_refcounts.py \
    tests/mvs/test_mvs_gpu.py
step demo_cuda 20 90 "$PY" -m aquaprof demo --device cuda --height 240 \
    --width 320 --depths 48 --out "$SCRATCH/demo"
# the headline figure, against torch on the same GPU: four ways, each
# with its depth map, where run 9 timed three ways without
step bench_mvs_cuda 60 200 "$PY" benchmarks/mvs/bench_mvs.py --device cuda \
    --height 1200 --width 1600 --views 5 --depths 128 --window 11 \
    --gpu-repeats 5 --batches 8,16,32,64,128
step bench_gpu_overhead 20 90 "$PY" benchmarks/bench_gpu_overhead.py \
    --runs 3 --steps 100
# the AquaMVS drop-in (parity and textbook) against AquaMVS in torch
for cost in ncc ssim; do
    step "bench_aquamvs_${cost}_cuda" 30 120 "$PY" \
        benchmarks/mvs/bench_aquamvs_dropin.py --device cuda --cost "$cost" \
        --height 240 --width 320 --depths 64 --repeats 3
done
step bench_aquamvs_cpu 40 150 bash "$SELF" --step aquamvs_cpu
for check in memcheck racecheck; do
    if [ -n "$SANITIZER" ] || [ -n "$NO_GPU" ]; then
        step "sanitizer_$check" 30 150 bash "$SELF" --step sanitizer "$check"
    else
        skip "sanitizer_$check" "compute-sanitizer not found"
    fi
done
for mode in ncu ncu_tiles ncu_planes; do
    name=ncu_cost${mode#ncu}
    if [ -n "$NCU" ] || [ -n "$NO_GPU" ]; then
        step "$name" 30 150 bash "$SELF" --step ncu "$mode"
    else
        skip "$name" "ncu not found"
    fi
done
# after everything else, as it takes the most time for the least GPU
step pytest_all 150 400 bash "$SELF" --step pytest_rest \
    "$(( $(nproc) / 4 > 1 ? $(nproc) / 4 : 1 ))" 300

{
    echo
    echo "total $(( SECONDS - START ))s of the ${BUDGET}s budget, ${#RAN[@]} steps run, ${#FAILED[@]} failed, ${#CUT[@]} cut short"
    if [ -n "$NO_GPU" ]; then
        echo "NO GPU here ($NO_GPU): the GPU steps were skipped; nothing was checked on a device"
    fi
    if [ $(( ${#FAILED[@]} + ${#CUT[@]} )) -gt 0 ]; then
        echo
        echo "--- what to read first"
        failures
    fi
    if [ -z "$NO_GPU" ]; then
        echo
        echo "--- figures"
        figures
    fi
} | tee -a "$SUMMARY"

shopt -s nullglob
logs=("$OUT"/*.log)
tar -czf "$OUT/gpu-check.tgz" -C "$OUT" SUMMARY.txt "${logs[@]#"$OUT"/}"

if [ -n "$NO_GPU" ]; then exit 2; fi
if [ ${#FAILED[@]} -gt 0 ]; then exit 1; fi
exit 0
