"""``python -m aquaprof``: the command line (aquaprof/cli.py)."""
import sys

from .cli import main

sys.exit(main())
