#!/usr/bin/env bash
# The wheel as a user gets it: installed into a fresh virtual environment
# whose PATH holds that environment alone (no compiler, no nvcc), then
# tests/wheel_smoke.py run there. Also checks that the wheel's extensions
# are plain builds: no sanitizer runtime, whatever `make asan` left.
# Usage: tests/wheel_check.sh PYTHON WHEEL
set -euo pipefail
python=$1
wheel=$2
here=$(cd "$(dirname "$0")" && pwd)
env_dir=$(mktemp -d)
trap 'rm -rf "$env_dir"' EXIT

for so in $(unzip -Z1 "$wheel" | grep '\.so'); do
  if unzip -p "$wheel" "$so" | grep -aq '__asan_init\|__ubsan_handle'; then
    echo "wheel check: $so in $wheel is a sanitizer build" >&2
    exit 1
  fi
done

"$python" -m venv "$env_dir/venv"
# numpy from the index (or pip's cache): the wheel's only dependency
"$env_dir/venv/bin/python" -m pip install -q "$wheel"
cd "$env_dir"
env -i HOME="$HOME" PATH="$env_dir/venv/bin" \
  "$env_dir/venv/bin/python" "$here/wheel_smoke.py"
