"""AquaMVS's dense stage as it runs, for the drop-in's tests.

AquaMVS (``aquamvs==1.7.3`` on PyPI, requirements-aquamvs.txt) is
installed without its dependencies (``pip install --no-deps``): its
top-level ``aquamvs/__init__.py`` refuses to import without LightGlue and
RoMa v2 and then imports OpenCV, Open3D and the whole pipeline, none of
which the dense stage uses. So the package's ``__init__`` is never run:
:func:`load` registers a bare package module named ``aquamvs`` whose
``__path__`` is the installed package folder (and one for
``aquamvs.dense``, whose ``__init__`` would import the RoMa path), and
then imports the dense modules through them as usual. What runs is
AquaMVS's own unmodified files: ``aquamvs/dense/cost.py``,
``aquamvs/dense/plane_sweep.py``, ``aquamvs/projection/*.py`` and
``aquamvs/config.py`` (which needs PyYAML and pydantic, light pure
dependencies installed with the test tools).

:func:`cost_volume` runs AquaMVS's build_cost_volume as its pipeline
does (float32 models and frames) or with its geometry in float64
(:func:`float64_run`), to measure how far AquaMVS's own results move with
the precision: the spread the drop-in's parity is held to
(tests/mvs/test_aquamvs_parity.py,
benchmarks/mvs/bench_aquamvs_parity.py)."""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Iterator, NamedTuple, Optional

VERSION = "1.7.3"
WHY_MISSING = ("AquaMVS is not installed: pip install --no-deps -r "
               "requirements-aquamvs.txt")


class AquaMVS(NamedTuple):
    """AquaMVS's dense modules, loaded from its installed files."""
    folder: Path
    cost: types.ModuleType
    plane_sweep: types.ModuleType
    refractive: types.ModuleType
    config: types.ModuleType


def installed_folder() -> Optional[Path]:
    """The installed aquamvs package's folder, found without importing
    it; None where it is not installed."""
    spec = importlib.util.find_spec("aquamvs") if "aquamvs" not in \
        sys.modules else sys.modules["aquamvs"].__spec__
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _bare_package(name: str, folder: Path) -> types.ModuleType:
    """A package module whose submodules load from `folder` and whose own
    __init__.py is not run."""
    existing = sys.modules.get(name)
    if existing is not None and getattr(existing, "__path__", None) == [
            str(folder)]:
        return existing
    module = types.ModuleType(name, f"{name}, its __init__ not run "
                                    f"(tests/support/aquamvs_harness)")
    module.__path__ = [str(folder)]
    module.__package__ = name
    module.__spec__ = importlib.util.spec_from_loader(name, loader=None,
                                                      is_package=True)
    module.__spec__.submodule_search_locations = [str(folder)]
    sys.modules[name] = module
    if "." in name:
        parent, child = name.rsplit(".", 1)
        setattr(sys.modules[parent], child, module)
    return module


def load() -> AquaMVS:
    """AquaMVS's dense modules; ImportError (WHY_MISSING) where AquaMVS is
    not installed, or is another version than the one pinned."""
    folder = installed_folder()
    if folder is None:
        raise ImportError(WHY_MISSING)
    from importlib.metadata import version
    if version("aquamvs") != VERSION:
        raise ImportError(f"AquaMVS {version('aquamvs')} is installed, the "
                          f"tests are written for {VERSION}: pip install "
                          f"--no-deps -r requirements-aquamvs.txt")
    _bare_package("aquamvs", folder)
    _bare_package("aquamvs.dense", folder / "dense")
    return AquaMVS(folder,
                   importlib.import_module("aquamvs.dense.cost"),
                   importlib.import_module("aquamvs.dense.plane_sweep"),
                   importlib.import_module("aquamvs.projection.refractive"),
                   importlib.import_module("aquamvs.config"))


@contextlib.contextmanager
def float64_run(aq: AquaMVS) -> Iterator[None]:
    """AquaMVS's plane sweep with its geometry in float64: torch's default
    dtype float64 (the cost volume AquaMVS allocates with torch.zeros),
    and its cost functions, which make their validity mask with .float()
    and so cannot run in float64, handed float32 copies of the float64
    warped images (their float64 costs kept). The geometry is what moves
    AquaMVS's costs: float32 Newton steps and rays place samples up to
    hundredths of a pixel off."""
    import torch
    before = torch.get_default_dtype()
    cost_of = aq.plane_sweep.compute_cost

    def float32_cost(ref, src, cost_function, window_size):
        return cost_of(ref.float(), src.float(), cost_function,
                       window_size).double()
    torch.set_default_dtype(torch.float64)
    aq.plane_sweep.compute_cost = float32_cost
    try:
        yield
    finally:
        torch.set_default_dtype(before)
        aq.plane_sweep.compute_cost = cost_of


def models(aq: AquaMVS, cameras: list, dtype: object) -> list:
    """AquaMVS's RefractiveProjectionModel of each native camera, its
    tensors in `dtype` (float32 as AquaMVS's pipeline makes them). In
    float64 the reference's cast_ray gets AquaMVS's float32 pixel grid as
    float64 (whole numbers: exact), which AquaMVS's matmul would refuse."""
    import torch
    cls = aq.refractive.RefractiveProjectionModel
    if dtype == torch.float64:
        cls = _float64_pixels(cls)
    return [cls(torch.tensor(c.K, dtype=dtype), torch.tensor(c.R, dtype=dtype),
                torch.tensor(c.t, dtype=dtype), float(c.water_z),
                torch.tensor(c.normal, dtype=dtype), float(c.n_air),
                float(c.n_water)) for c in cameras]


def _float64_pixels(cls: type) -> type:
    class Float64Pixels(cls):  # type: ignore[misc, valid-type]
        def cast_ray(self, pixels):
            return super().cast_ray(pixels.double())
    return Float64Pixels


class Config(NamedTuple):
    """The three fields AquaMVS's dense stage reads of its config."""
    cost_function: str
    window_size: int
    num_depths: int = 1


def cost_volume(aq: AquaMVS, cameras: list, images: list, depths: object,
                cost: str, window: int, dtype: object) -> object:
    """AquaMVS's own build_cost_volume over native cameras and float32
    gray images, run in `dtype` (models, frames, depths and volume)."""
    import torch
    ms = models(aq, cameras, dtype)
    frames = [torch.as_tensor(i).to(dtype) for i in images]
    d = torch.as_tensor(depths).to(dtype)
    run = float64_run(aq) if dtype == torch.float64 else \
        contextlib.nullcontext()
    with run:
        return aq.plane_sweep.build_cost_volume(
            ms[0], ms[1:], frames[0], frames[1:], d,
            Config(cost, window))
