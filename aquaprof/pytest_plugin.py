"""The pytest plugin under its documented name (``-p aquaprof.pytest_plugin``
and the ``pytest11`` entry point); it lives in
aquaprof.integrations.pytest_plugin."""
from .integrations.pytest_plugin import *  # noqa: F401,F403
