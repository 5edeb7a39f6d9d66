"""A pytest plugin that runs AquaMVS's own dense tests with the drop-in
swapped in: ``python -m pytest <AquaMVS>/tests/test_dense -p
aquamvs_harness.plugin`` (tests/ and the repository root on PYTHONPATH),
with AQUAPROF_AQUAMVS_RUN naming what runs:

- "theirs": AquaMVS's own functions (the baseline);
- "aquamvs" or "textbook": every public function of aquamvs.dense.cost
  and aquamvs.dense.plane_sweep (and so of aquamvs.dense) is the
  drop-in's, with that parity; the private helpers the tests also call
  (_bgr_to_gray, _make_pixel_grid), which the drop-in does not offer,
  stay AquaMVS's.

The swap replaces the modules in sys.modules before the tests import
them, so that their ``from aquamvs.dense.plane_sweep import ...`` lines
get the drop-in; the test files are not touched."""
from __future__ import annotations

import functools
import os
import sys
import types

import aquamvs_harness as harness

#: the drop-in's functions standing in for AquaMVS's, by module
SWAPPED = {
    "cost": ("compute_ncc", "compute_ssim", "compute_cost",
             "aggregate_costs"),
    "plane_sweep": ("generate_depth_hypotheses", "warp_source_image",
                    "build_cost_volume", "plane_sweep_stereo",
                    "extract_depth", "save_depth_map", "load_depth_map"),
}
#: the drop-in's functions that take parity=
WITH_PARITY = ("compute_ncc", "compute_ssim", "compute_cost",
               "warp_source_image", "build_cost_volume",
               "plane_sweep_stereo")
RUNS = ("theirs", "aquamvs", "textbook")


def swapped_module(theirs: types.ModuleType, names: tuple,
                   parity: str) -> types.ModuleType:
    """A module named as `theirs`, holding all it holds, but `names`
    taken from the drop-in with `parity`."""
    from aquaprof.mvs import aquamvs as dropin
    module = types.ModuleType(theirs.__name__, theirs.__doc__)
    module.__dict__.update({k: v for k, v in vars(theirs).items()
                            if k not in ("__name__", "__doc__")})
    for name in names:
        ours = getattr(dropin, name)
        if name in WITH_PARITY:
            ours = functools.wraps(ours)(functools.partial(ours,
                                                           parity=parity))
        setattr(module, name, ours)
    return module


def install(run: str) -> None:
    """AquaMVS's dense modules loaded, and swapped for `run`."""
    if run not in RUNS:
        raise ValueError(f"AQUAPROF_AQUAMVS_RUN must be one of {RUNS}, got "
                         f"{run!r}")
    aq = harness.load()
    dense = sys.modules["aquamvs.dense"]
    for short in SWAPPED:
        theirs = getattr(aq, short)
        module = theirs if run == "theirs" else swapped_module(
            theirs, SWAPPED[short], run)
        sys.modules[module.__name__] = module
        setattr(dense, short, module)
        for name in SWAPPED[short]:
            setattr(dense, name, getattr(module, name))


def pytest_configure(config: object) -> None:
    """As a plugin (not as an imported module), before any collection."""
    install(os.environ.get("AQUAPROF_AQUAMVS_RUN", "aquamvs"))


# -- what ran: AQUAPROF_AQUAMVS_REPORT names a JSON file for the runner --

_outcomes: dict = {}
_imported: dict = {}


def pytest_collection_modifyitems(items: list) -> None:
    """Which of the swapped names each test module holds are the
    drop-in's: the proof that the tests reached it."""
    from aquaprof.mvs import aquamvs as dropin
    for item in items:
        module = getattr(item, "module", None)
        if module is None or module.__name__ in _imported:
            continue
        names = [n for names in SWAPPED.values() for n in names
                 if n in vars(module)]
        _imported[module.__name__] = {
            n: _is_dropin(getattr(module, n), dropin) for n in names}


def _is_dropin(function: object, dropin: types.ModuleType) -> bool:
    inner = getattr(function, "func", function)
    return getattr(inner, "__module__", None) == dropin.__name__


def pytest_runtest_logreport(report: object) -> None:
    nodeid, when = report.nodeid, report.when  # type: ignore[attr-defined]
    outcome = report.outcome  # type: ignore[attr-defined]
    if when == "call" or outcome != "passed":
        _outcomes.setdefault(nodeid, outcome)


def pytest_sessionfinish(session: object) -> None:
    path = os.environ.get("AQUAPROF_AQUAMVS_REPORT")
    if path:
        import json
        with open(path, "w") as f:
            json.dump({"outcomes": _outcomes, "imported": _imported}, f,
                      indent=1)
