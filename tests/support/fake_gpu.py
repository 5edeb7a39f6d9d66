"""A fake libcuda and a fake libcupti (tests/fakes), built with the real
cupti.h record layouts, and a helper that runs code against them in a
fresh interpreter: the driver and CUPTI, once opened, stay open for the
life of a process, as in every CUDA program."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from aquaprof import _core

ROOT = Path(__file__).resolve().parents[2]
FAKES = ROOT / "tests" / "fakes"


def cupti_folders(roots=None, sites=None):
    """The folders holding cupti.h and the cuda.h it needs, found where
    setup.py finds the ones aquaprof was built with (its
    find_cupti_headers); empty when there are none."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("aquaprof_setup",
                                                  ROOT / "setup.py")
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)
    return [Path(f) for f in setup.find_cupti_headers(roots, sites) or []]


def cupti_include(roots=None, sites=None):
    """The folder holding cupti.h, or None."""
    folders = cupti_folders(roots, sites)
    return folders[0] if folders else None


def cupti_flags():
    """The compiler's -isystem flags for cupti.h and cuda.h."""
    return [x for f in cupti_folders() for x in ("-isystem", str(f))]


def build_fakes(out):
    """Builds the fake libcuda.so, libnvidia-ml.so and (with cupti.h)
    libcupti.so into out."""
    cc = os.environ.get("CC", "cc")
    flags = ["-shared", "-fPIC", "-std=c11", "-D_GNU_SOURCE", "-Wall",
             "-Wextra", "-Werror"]
    # the driver in two files: its device and context calls, and its
    # memory calls (what the plane sweep asks of device pointers)
    for lib, sources in (("libcuda.so", ("fake_cuda.c",
                                         "fake_cuda_memory.c")),
                         ("libnvidia-ml.so", ("fake_nvml.c",))):
        subprocess.run([cc, *flags, "-o", out / lib,
                        *(FAKES / s for s in sources)], check=True)
    if _core.HAVE_CUPTI:
        include = cupti_flags()
        assert include, "aquaprof was built with cupti.h: so must the fake"
        subprocess.run([cc, *flags, *include, "-o",
                        out / "libcupti.so", FAKES / "fake_cupti.c",
                        FAKES / "fake_cupti_records.c", "-pthread"],
                       check=True)
    return out


def scenario(code, env=None, cupti=None, preload=True):
    """Runs code in a fresh interpreter with `ap`, `np`, `json` and, when
    cupti names the fake, `fake` (its ctypes handle) defined, and with
    CUPTI looked for only at `cupti` (a list of paths), each loaded first
    unless preload is false. Returns what the code printed, parsed as
    JSON."""
    prelude = textwrap.dedent(f"""
        import ctypes, json, sys
        import numpy as np
        import aquaprof as ap
        import aquaprof.record.cupti
        aquaprof.record.cupti.cupti_candidates = (
            lambda: {list(map(str, cupti or []))!r})
        fake = None
        for path in {list(map(str, (cupti or []) if preload else []))!r}:
            try:
                fake = ctypes.CDLL(path)
            except OSError:
                pass
    """)
    full = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    out = subprocess.run([sys.executable, "-c", prelude +
                          textwrap.dedent(code)], env=full,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])
