"""``python -m aquaprof``: the command line (aquaprof/integrations/cli.py)."""
import sys

from .integrations.cli import main

sys.exit(main())
