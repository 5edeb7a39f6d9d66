"""torch ops and nn.Module calls as stages, the room's entry: what the
Profiler calls and what docs/torch.md names (also as
``aquaprof.integrations.torch_hooks``, moved.py).

``Profiler(torch_ops=True)`` records each torch call of the program as a
stage under the open stage (``model/aten::conv2d``), ``torch_ops=
"shapes"`` with its input shapes in the name (ops.py);
``Profiler(torch_modules=True)`` each ``nn.Module`` call as a stage named
by its attribute path and class
(``SmallCNN/features (Sequential)/features.0 (Conv2d)``, modules.py)
and, where autograd runs it, its backward (``SmallCNN (backward)/...``,
backward.py). They are ordinary stages (``aquaprof.stage``), entered and
left from the hooks: they nest with the program's own, count and time
like them, and with GPU tracing on, the kernels an op or a module
launched are attributed to it (the stage pushes its CUPTI correlation
id). The hooks go in and come out as one switch (watch_torch, switch.py);
what they share lives in state.py; calibrate_hooks (cost.py) measures
what they cost a call, for the report's cost line and its compensated
figures.

Nothing of the hooks raises into the program: an error inside a hook is
swallowed and counted (``errors()``), and said once per run as a
RuntimeWarning. torch is imported at start() by the Profiler that asks
for these (not by aquaprof otherwise): importing this module does not.
"""
from __future__ import annotations

from .cost import calibrate_hooks, calibrated_hooks
from .modules import compiled
from .state import errors, tally
from .switch import check_options, torch_available, watch_torch

__all__ = ["calibrate_hooks", "calibrated_hooks", "check_options",
           "compiled", "errors", "tally", "torch_available", "watch_torch"]
