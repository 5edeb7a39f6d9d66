"""Builds aquaprof._core: the C core and its CPython binding."""
import glob
import os

import numpy
from setuptools import Extension, setup

# -Werror only where we ask for it (CI), never in users' builds.
strict = ["-Werror"] if os.environ.get("AQUAPROF_WERROR") == "1" else []
debug = os.environ.get("AQUAPROF_DEBUG") == "1"

COMPILE_ARGS = [
    "-std=c11",
    # only PyInit_* are exported: the hot path reaches the core's flag and
    # functions directly, not through the GOT and PLT
    "-fvisibility=hidden",
    "-Wall",
    "-Wextra",
    "-O0" if debug else "-O2",
    "-g" if debug else "-g0",
] + strict


def extension(name, *patterns, extra=()):
    return Extension(
        name,
        sources=sorted(f for p in patterns for f in glob.glob(p)),
        include_dirs=[numpy.get_include()],
        define_macros=[("_GNU_SOURCE", None)],
        extra_compile_args=COMPILE_ARGS + list(extra),
        extra_link_args=["-pthread"],
    )


setup(ext_modules=[
    # the profiler: core and its binding
    extension("aquaprof._core", "csrc/core/*.c", "csrc/module/*.c"),
    # the plane-sweep kit's CPU kernels and their binding; the kernels'
    # loops vectorise at -O3 once sqrt need not set errno and comparisons
    # need not keep FP exceptions (nothing here reads either)
    extension("aquaprof._mvs", "csrc/kernels/*.c", "csrc/module/mvs/*.c",
              extra=[] if debug else ["-O3", "-fno-math-errno",
                                      "-fno-trapping-math"]),
])
