#!/usr/bin/env bash
# The package as a user gets it, on a machine without a compiler:
# 1. the wheel (`make wheel`) holds plain builds (no sanitizer runtime,
#    whatever `make asan` left), installs into a fresh virtual environment
#    whose PATH holds that environment alone (no cc, no nvcc) and passes
#    tests/support/wheel_smoke.py there;
# 2. an sdist builds where nvcc is not found, says so while it builds, and
#    the package it gives says why its GPU kernels are missing.
# Usage: tests/support/wheel_check.sh PYTHON BUILD_PYTHON WHEEL
#   PYTHON: makes the fresh environment; BUILD_PYTHON: has setuptools and
#   NumPy, builds the sdist (the project's .venv).
set -euo pipefail
python=$1
build_python=$2
wheel=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" - "$wheel" <<'PY'
import sys, zipfile
wheel = zipfile.ZipFile(sys.argv[1])
for name in wheel.namelist():
    if ".so" in name and any(mark in wheel.read(name) for mark in
                             (b"__asan_init", b"__ubsan_handle")):
        sys.exit(f"wheel check: {name} in {sys.argv[1]} is a sanitizer "
                 f"build")
PY

smoke() {   # the smoke test in the fresh environment, nothing else on PATH
  (cd "$work" && env -i HOME="$HOME" PATH="$work/venv/bin" \
    "$work/venv/bin/python" "$here/wheel_smoke.py" "$1")
}

"$python" -m venv "$work/venv"
# NumPy from the index (or pip's cache): the wheel's only dependency
"$work/venv/bin/python" -m pip install -q "$wheel"
smoke "no CUDA driver"

(cd "$here/../.." && "$build_python" setup.py -q sdist -d "$work/sdist") \
  > /dev/null
AQUAPROF_NO_CUDA=1 "$build_python" -m pip wheel -v --no-deps \
  --no-build-isolation -w "$work/from-sdist" "$work"/sdist/aquaprof-*.tar.gz \
  > "$work/sdist.log" 2>&1 || { cat "$work/sdist.log"; exit 1; }
grep -q "nvcc not found: aquaprof._mvs is built without its CUDA kernels" \
  "$work/sdist.log" || {
  echo "wheel check: the sdist's build did not say it left the CUDA" \
    "kernels out" >&2; exit 1; }
"$work/venv/bin/python" -m pip install -q --force-reinstall --no-deps \
  "$work"/from-sdist/aquaprof-*.whl
smoke "built without its CUDA kernels"
