"""Builds aquaprof._core (the profiler) and aquaprof._mvs (the plane-sweep
kernels, with their CUDA kernels embedded where nvcc is found)."""
import glob
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# -Werror only where we ask for it (CI), never in users' builds.
strict = os.environ.get("AQUAPROF_WERROR") == "1"
debug = os.environ.get("AQUAPROF_DEBUG") == "1"
# `make asan`: AddressSanitizer and UndefinedBehaviorSanitizer, any UB fatal
SANITIZE = (["-fsanitize=address,undefined", "-fno-sanitize-recover=all",
             "-fno-omit-frame-pointer"]
            if os.environ.get("AQUAPROF_SANITIZE") == "1" else [])

COMPILE_ARGS = [
    "-std=c11",
    # only PyInit_* are exported: the hot path reaches the core's flag and
    # functions directly, not through the GOT and PLT
    "-fvisibility=hidden",
    "-Wall",
    "-Wextra",
    "-O0" if debug else "-O2",
    "-g" if debug or SANITIZE else "-g0",
] + (["-Werror"] if strict else []) + SANITIZE

# sm_80 (A100, and by binary compatibility sm_86/sm_89), sm_90 (H100,
# H200), and PTX that newer GPUs compile when they load it
CUDA_TARGETS = ["-gencode", "arch=compute_80,code=sm_80",
                "-gencode", "arch=compute_90,code=sm_90",
                "-gencode", "arch=compute_90,code=compute_90"]


def find_nvcc():
    """$AQUAPROF_NVCC, nvcc on PATH, or CUDA's usual place; None when
    AQUAPROF_NO_CUDA=1 or there is none."""
    if os.environ.get("AQUAPROF_NO_CUDA") == "1":
        return None
    for candidate in (os.environ.get("AQUAPROF_NVCC"), shutil.which("nvcc"),
                      "/usr/local/cuda/bin/nvcc"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def _has(folder, header):
    return os.path.isfile(os.path.join(folder, header))


def find_cupti_headers(roots=None, sites=None):
    """The include folders that hold cupti.h and cuda.h, cupti.h's first,
    or [] where either is missing: aquaprof then builds and says at run
    time that it cannot trace the GPU. roots: CUDA toolkits (default
    CUDA_HOME, CUDA_PATH and /usr/local/cuda), whose cupti.h is in
    include/ or extras/CUPTI/include/; sites: folders that may hold the
    nvidia-* wheels (default sys.path), whose cupti.h is in
    nvidia/cuda_cupti/include/ (CUDA 12) or nvidia/cu13/include/ (13)."""
    if os.environ.get("AQUAPROF_NO_CUDA") == "1":
        return []
    if roots is None:
        roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                 "/usr/local/cuda"]
    roots = [r for r in roots if r]
    sites = sys.path if sites is None else sites
    toolkits = [os.path.join(r, "include") for r in roots]
    wheels = [folder for site in sites if site
              for folder in sorted(glob.glob(os.path.join(
                  glob.escape(site), "nvidia", "*", "include")))]
    cupti_places = [place for r in roots for place in (
        os.path.join(r, "include"),
        os.path.join(r, "extras", "CUPTI", "include"))]
    cupti_places += [folder for folder in wheels
                     if os.path.basename(os.path.dirname(folder))
                     in ("cuda_cupti", "cu13")]
    cupti = next((f for f in cupti_places if _has(f, "cupti.h")), None)
    if cupti is None:
        return []
    # cupti.h includes cuda.h, which CUPTI's own folder may lack
    cuda = next((f for f in [cupti, *toolkits, *wheels]
                 if _has(f, "cuda.h")), None)
    if cuda is None:
        return []
    return [cupti] if cuda == cupti else [cupti, cuda]


def variant_flags():
    """$AQUAPROF_NVCC_FLAGS: a variant of the kernels to time."""
    return shlex.split(os.environ.get("AQUAPROF_NVCC_FLAGS", ""))


def variant_macros(flags=None):
    """The variant's -D macros as (name, value or None), which the
    launcher's C is built with too: it sizes the kernels' grids and
    shared memory from the same #defines (csrc/mvs/cuda/gpu_strip.h).
    A macro nvcc would get in another form (--define-macro, -U) would
    reach the kernels alone, so it is refused, as is a -D without a
    name. flags: nvcc's flags (default $AQUAPROF_NVCC_FLAGS's)."""
    flags = variant_flags() if flags is None else flags
    macros = []
    for flag, value in zip(flags, flags[1:] + [""]):
        if flag.startswith(("--define-macro", "-U", "--undefine-macro")):
            sys.exit(f"AQUAPROF_NVCC_FLAGS: give macros as -DNAME[=VALUE], "
                     f"which the launcher's C gets too, not {flag!r}")
        if not flag.startswith("-D"):
            continue
        name, equals, text = (flag[2:] or value).partition("=")
        if not name.isidentifier():
            sys.exit(f"AQUAPROF_NVCC_FLAGS: {flag!r} names no macro")
        macros.append((name, text if equals else None))
    return macros


def fatbin_header(path: Path, data: bytes) -> None:
    """ap_fatbin.h: the fat binary as a C array (empty without nvcc)."""
    lines = ["/* generated by setup.py from csrc/mvs/cuda/sweep.cu */",
             "#include <stddef.h>"]
    if data:
        lines.append(f"static _Alignas(8) const unsigned char "
                     f"ap_fatbin[{len(data)}] = {{")
        for i in range(0, len(data), 24):
            lines.append(",".join(str(b) for b in data[i:i + 24]) + ",")
        lines.append("};")
    else:
        lines.append("static const unsigned char ap_fatbin[1] = {0};")
    lines.append(f"static const size_t ap_fatbin_size = {len(data)};")
    path.write_text("\n".join(lines) + "\n")


class BuildWithKernels(build_ext):
    """Compiles the CUDA kernels into a fat binary that aquaprof._mvs
    embeds and loads through the driver at run time, so that the package
    needs no CUDA to import or to run on the CPU."""

    def run(self):
        out = Path(self.build_temp) / "cuda"
        out.mkdir(parents=True, exist_ok=True)
        data = b""
        nvcc = find_nvcc()
        if nvcc:
            fatbin = out / "sweep.fatbin"
            # $AQUAPROF_NVCC_FLAGS: variants of the kernels to time
            # (benchmarks/mvs/gpu_variants.sh), e.g. -DAP_GPU_PLANES_BLOCKS=3
            # --threads 0: the targets compiled side by side, one a core
            command = [nvcc, "--threads", "0", "-fatbin", "-O3",
                       "-std=c++17", *CUDA_TARGETS, *variant_flags(),
                       "-o", str(fatbin), "csrc/mvs/cuda/sweep.cu"]
            if strict:
                command[1:1] = ["--Werror", "all-warnings"]
            print(" ".join(command))
            subprocess.run(command, check=True)
            data = fatbin.read_bytes()
        else:
            print("nvcc not found: aquaprof._mvs is built without its CUDA "
                  "kernels (the GPU path will say so)")
        fatbin_header(out / "ap_fatbin.h", data)
        for ext in self.extensions:
            if ext.name == "aquaprof._mvs":
                ext.include_dirs.append(str(out))
        super().run()


def extension(name, *patterns, extra=(), libraries=(), macros=()):
    return Extension(
        name,
        sources=sorted(f for p in patterns
                       for f in glob.glob(p, recursive=True)),
        include_dirs=[numpy.get_include()],
        define_macros=[("_GNU_SOURCE", None), *macros],
        extra_compile_args=COMPILE_ARGS + list(extra),
        extra_link_args=["-pthread"] + SANITIZE,
        libraries=list(libraries),
    )


def gpu_flags():
    folders = find_cupti_headers()
    if not folders:
        return []
    # -isystem: CUDA's headers are not ours to keep free of warnings
    flags = [arg for folder in folders for arg in ("-isystem", folder)]
    flags.append("-DAP_HAVE_CUPTI")
    if any(_has(f, os.path.join("nvtx3", "nvToolsExt.h")) for f in folders):
        flags.append("-DAP_HAVE_NVTX")
    return flags


def main():
    setup(
        cmdclass={"build_ext": BuildWithKernels},
        ext_modules=[
            # the profiler: core, GPU tracing (libcuda and CUPTI opened at
            # run time through libdl) and their binding
            extension("aquaprof._core", "csrc/core/*.c", "csrc/common/*.c",
                      "csrc/gpu/*.c", "csrc/sampler/*.c", "csrc/module/*.c",
                      extra=gpu_flags(),
                      libraries=["dl"]),
            # the plane-sweep kit (csrc/mvs/: geometry, CPU sweep, AquaMVS
            # parity, the C side of its CUDA path, binding); the kernels'
            # loops vectorise at -O3 once sqrt need not set errno and
            # comparisons need not keep FP exceptions (nothing here reads
            # either); libdl opens the CUDA driver, with the loader the
            # profiler uses
            extension("aquaprof._mvs", "csrc/mvs/**/*.c",
                      "csrc/common/cuda_loader.c",
                      extra=[] if debug else ["-O3", "-fno-math-errno",
                                              "-fno-trapping-math"],
                      libraries=["dl"], macros=variant_macros()),
        ],
    )


# setuptools runs this file as __main__ (setup.py, pip, build); the tests
# import it under another name for find_cupti_headers alone
if __name__ == "__main__":
    main()
