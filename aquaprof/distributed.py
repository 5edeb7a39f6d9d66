"""``aquaprof.distributed.gather``: one report of a torch.distributed job,
under the name users import; it lives in
aquaprof.integrations.distributed. Importing it imports no torch."""
from .integrations.distributed import gather

__all__ = ["gather"]
