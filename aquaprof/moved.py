"""Import paths that docs gave before a module found its room, kept
working: ``import aquaprof.schema`` gives aquaprof.model.schema itself
(not a copy), so that a setting assigned through the old path
(``aquaprof.children.SIGTERM_DEADLINE_S``) is the one the code
reads."""
import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Optional, Sequence

#: old dotted path -> the module's room today
MOVED = {
    "aquaprof.schema": "aquaprof.model.schema",
    "aquaprof.limits": "aquaprof.model.limits",
    "aquaprof.profiler": "aquaprof.record.profiler",
    "aquaprof.calibration": "aquaprof.record.calibration",
    "aquaprof.cupti": "aquaprof.record.cupti",
    "aquaprof.children": "aquaprof.record.processes.parent",
    "aquaprof.integrations.torch_hooks": "aquaprof.record.torch.hooks",
    "aquaprof.integrations.dataloader": "aquaprof.record.torch.dataloader",
    "aquaprof.analysis.history": "aquaprof.integrations.history",
    "aquaprof.views.code": "aquaprof.analysis.sampled_code",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target
        self.spec: Optional[importlib.machinery.ModuleSpec] = None

    def create_module(self, spec: importlib.machinery.ModuleSpec
                      ) -> ModuleType:
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the target ran when it was imported; the import system has just
        # given it the old path's spec, which must not stay its own
        module.__spec__ = self.spec


class _OldPaths(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Optional[Sequence[str]],
                  target: Optional[ModuleType] = None
                  ) -> Optional[importlib.machinery.ModuleSpec]:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Lets the old paths import, once per process."""
    if not any(isinstance(f, _OldPaths) for f in sys.meta_path):
        sys.meta_path.append(_OldPaths())
