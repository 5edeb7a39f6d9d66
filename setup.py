"""Builds aquaprof._core: the C core and its CPython binding."""
import glob
import os

import numpy
from setuptools import Extension, setup

# -Werror only where we ask for it (CI), never in users' builds.
strict = ["-Werror"] if os.environ.get("AQUAPROF_WERROR") == "1" else []
debug = os.environ.get("AQUAPROF_DEBUG") == "1"

core = Extension(
    "aquaprof._core",
    sources=sorted(glob.glob("csrc/core/*.c") + glob.glob("csrc/module/*.c")),
    include_dirs=[numpy.get_include()],
    define_macros=[("_GNU_SOURCE", None)],
    extra_compile_args=[
        "-std=c11",
        # only PyInit__core is exported: the hot path reaches the core's
        # flag and functions directly, not through the GOT and PLT
        "-fvisibility=hidden",
        "-Wall",
        "-Wextra",
        "-O0" if debug else "-O2",
        "-g" if debug else "-g0",
    ] + strict,
    extra_link_args=["-pthread"],
)

setup(ext_modules=[core])
