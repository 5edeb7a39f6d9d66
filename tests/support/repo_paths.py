"""Where the repository and the tests' helper scripts lie, for tests that
run a helper as its own process: tests sit in one folder per room, so a
path taken from a test's own file would break when it moves."""
from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
ROOT = SUPPORT.parent.parent
