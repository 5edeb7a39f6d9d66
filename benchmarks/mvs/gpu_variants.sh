#!/usr/bin/env bash
# Variants of the CUDA kernels, each built in place and timed on the
# headline volume, in one call: for a lent GPU's minutes after
# `make gpu-check`.
#
#     benchmarks/mvs/gpu_variants.sh ["NVCC FLAGS" ...]
#
# Each argument is one variant's extra nvcc flags ($AQUAPROF_NVCC_FLAGS;
# "" is the code as committed; its -D macros reach the launcher's C too);
# by default the code as committed and the strip kernel's block
# geometries below, whose static counts and occupancy
# benchmarks/mvs/gpu_sass_count.py --nvcc-flags=... gives
# (docs/benchmarks.md). Each is built by `setup.py build_ext --inplace
# --force` and timed by benchmarks/mvs/bench_mvs.py --device cuda
# (1200x1600, 5 sources, 128 depths, NCC 11, the ways of warping in WAYS,
# default strip, torch left out), which checks its costs against the CPU
# path and times the depth map without the volume. The code as committed
# is built again at the end; a table of the variants is last.
# Environment: PYTHON (default python3), WAYS. Exit status 1 when a build
# or a run failed.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
PY=${PYTHON:-python3}
WAYS=${WAYS:-strip}
if [ $# -eq 0 ]; then
    # two sources a thread at three blocks an SM (48 rows), and with
    # each row's ray read a row ahead too; a source a thread, read ahead;
    # half the group's rows, a fourth block an SM; half the strip's rows
    # too, a fifth
    S2="-DAP_STRIP_SOURCES=2 -DAP_STRIP_ROWS=48 -DAP_STRIP_GROUP=2 -DAP_STRIP_SEGMENT=8"
    set -- "" "$S2" "$S2 -DAP_STRIP_AHEAD=1" "-DAP_STRIP_AHEAD=1" \
        "-DAP_STRIP_GROUP=2 -DAP_STRIP_SEGMENT=4 -DAP_STRIP_BLOCKS=4" \
        "-DAP_STRIP_ROWS=32 -DAP_STRIP_GROUP=2 -DAP_STRIP_SEGMENT=4 -DAP_STRIP_BLOCKS=5"
fi
LOG=$(mktemp) || exit 1
trap 'rm -f "$LOG"' EXIT
rows=()
rc=0
build() {
    AQUAPROF_NVCC_FLAGS="$1" "$PY" setup.py -q build_ext --inplace \
        --force > "$LOG" 2>&1 || { tail -20 "$LOG"; return 1; }
}
for flags in "$@"; do
    name=${flags:-as committed}
    echo "=== $name"
    if ! build "$flags"; then
        rows+=("$(printf '%-40s build FAILED' "$name")")
        rc=1
        continue
    fi
    out=$("$PY" benchmarks/mvs/bench_mvs.py --device cuda --height 1200 \
        --width 1600 --views 5 --depths 128 --window 11 --gpu-repeats 5 \
        --batches "" --skip-torch --gpu-warps "$WAYS" 2>&1) || rc=1
    echo "$out"
    # a row per way of warping: its time, then the CPU check's line; a
    # row per depth map
    rows+=("$(echo "$out" | awk -v name="$name" '
        $1 == 128 && NF == 9 { ms = $2; how = $9 }
        /against the CPU:/ && ms != "" {
            printf "%-40s %-7s %9s ms  %s of %s costs off by more than 1e-4\n",
                   name, how, ms, $4, $6; ms = "" }
        /^depth map +[0-9]+ depths / { sub(/:$/, "", $5)
            printf "%-40s %-7s %9s ms  the depth map\n", name, $5, $6 }')")
done
echo "=== the code as committed, built again"
build "" || rc=1
echo
printf '%-40s %-7s %12s\n' variant warp time
printf '%s\n' "${rows[@]}"
exit $rc
