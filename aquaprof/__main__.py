"""``python -m aquaprof``: the command line (aquaprof/integrations/cli.py)."""
import sys

from .integrations.cli import entry

sys.exit(entry())
