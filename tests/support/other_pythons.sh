#!/usr/bin/env bash
# The package built and its test suite run on each CPython it claims
# besides the project's own (pyproject.toml's classifiers): a virtual
# environment each under .venv-pythons/, NumPy and the test tools of
# requirements-pythons.txt, the extensions built in place next to the
# main ones (each Python's own file names), then pytest. torch's CPU build
# lies on this machine for 3.11 alone: its tests skip on the others,
# saying so. A version this machine lacks is said, not tested; any build
# or test failure fails the run.
# Usage: tests/support/other_pythons.sh VERSION...
set -uo pipefail
cd "$(dirname "$0")/../.."
failed=()
for version in "$@"; do
  python=""
  for candidate in "python$version" \
      "$(pyenv root 2>/dev/null)"/versions/"$version".*/bin/python3; do
    if "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != \
tuple(map(int, '$version'.split('.'))))" 2>/dev/null; then
      python=$candidate
      break
    fi
  done
  if [ -z "$python" ]; then
    echo "== Python $version: not found on this machine, not tested"
    continue
  fi
  venv=.venv-pythons/$version
  echo "== Python $version ($python)"
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv" || { failed+=("$version: venv"); continue; }
  fi
  "$venv/bin/python" -m pip install -q -r requirements-pythons.txt \
    || { failed+=("$version: install"); continue; }
  AQUAPROF_WERROR=1 "$venv/bin/python" setup.py -q build_ext --inplace \
    > "$venv/build.log" 2>&1 \
    || { cat "$venv/build.log"; failed+=("$version: build"); continue; }
  "$venv/bin/python" -X dev -m pytest -q -p no:cacheprovider \
    || failed+=("$version: tests")
done
if [ ${#failed[@]} -gt 0 ]; then
  printf 'failed on: %s\n' "${failed[@]}" >&2
  exit 1
fi
