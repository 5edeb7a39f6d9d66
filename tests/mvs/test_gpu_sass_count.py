"""benchmarks/mvs/gpu_sass_count.py: the static instruction count of the GPU
cost kernel, read from its sm_90 machine code without a device."""
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

from repo_paths import ROOT  # noqa: E402
SCRIPT = ROOT / "benchmarks" / "mvs" / "gpu_sass_count.py"
sys.path.insert(0, str(SCRIPT.parent))
import gpu_sass_count  # noqa: E402

FOUND = gpu_sass_count.tools()
needs_tools = pytest.mark.skipif(
    isinstance(FOUND, str),
    reason=f"nvcc, cuobjdump and nvdisasm are needed: {FOUND}")


@functools.lru_cache(maxsize=None)
def run(*args):
    """The script's output for these arguments, counted once a session
    (the sources do not change while the tests run)."""
    done = subprocess.run([sys.executable, str(SCRIPT), *args],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def per_output(out):
    last = out.strip().splitlines()[-1]
    m = re.fullmatch(r"instructions per \(pixel, plane, source\): (\d+)",
                     last)
    assert m, last
    return int(m.group(1))


def parts(out):
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r"^\s+(warp|sums|other):\s+([\d.]+)$",
                                 out, re.M)}


@needs_tools
def test_the_count_ends_on_one_line_and_adds_up_its_parts():
    """The last line is the count; the warp's and the sums' shares and
    the rest add up to it; ptxas's registers and spills are reported and
    every loop found has its trips declared."""
    out = run()
    total = per_output(out)
    shares = parts(out)
    assert set(shares) == {"warp", "sums", "other"}
    assert abs(sum(shares.values()) - total) <= 1
    assert shares["warp"] > 0 and shares["sums"] > 0
    assert re.search(r"\d+ registers, \d+ bytes spill stores, \d+ bytes "
                     r"spill loads", out)
    assert re.search(r"loop 0x[0-9a-f]+-0x[0-9a-f]+ sweep\.cu:\d+", out)


@needs_tools
def test_a_wider_window_and_fewer_views_cost_what_they_should():
    """The weighing follows the case: window 21 sums more rows and warps
    a wider halo than window 11; with one source the block's set-up is
    spread over one output, not five."""
    narrow, wide = parts(run("--window", "11")), parts(run("--window", "21"))
    assert wide["sums"] > narrow["sums"] + 50
    assert wide["warp"] > narrow["warp"] * 1.2
    one = parts(run("--views", "1"))
    assert one["other"] == pytest.approx(5 * narrow["other"], rel=0.01)


FLOOR_LINE = re.compile(
    r"^instruction-issue floor \(benchmarks/mvs/floor_kernel\.cu, "
    r"ap_floor_ncc_r(\d+)_kernel\): ([\d.]+) \(warp ([\d.]+), sums "
    r"([\d.]+), other ([\d.]+)\); the kernel issues ([\d.]+) times it$",
    re.M)


@needs_tools
def test_the_floor_is_counted_the_same_way_and_lies_below_the_kernel():
    """The floor kernel of the window's radius is counted with the
    kernel's method, its parts add up, and the kernel, which does all the
    floor does and more, issues more; a window with no strip kernel of
    its own has no floor to compare with."""
    out = run()
    total = per_output(out)
    m = FLOOR_LINE.search(out)
    assert m, out
    radius, least = int(m.group(1)), float(m.group(2))
    warp, sums, other, ratio = map(float, m.group(3, 4, 5, 6))
    assert radius == 5
    assert warp > 0 and sums > 0 and other > 0
    assert warp + sums + other == pytest.approx(least, abs=0.2)
    assert 0 < least < total
    assert ratio == pytest.approx(total / least, abs=0.01)
    assert out.strip().splitlines()[-2] == m.group(0)
    assert not FLOOR_LINE.search(run("--window", "21"))


@needs_tools
def test_the_cost_counted_is_the_kernels_or_the_one_asked_for():
    """SSIM's strip kernel is counted on SSIM's path, its formula
    included; the tile kernel, which reads its cost at run time, on the
    path --cost names, the other costs' code weighing nothing."""
    ssim = run("--kernel", "ap_strip_ssim_kernel", "--lines", "300")
    assert "window 11, SSIM, refractive" in ssim
    assert "double ssim = ((2 * mr * ms" in ssim
    tile_ncc = run("--kernel", "ap_cost_kernel", "--lines", "300")
    tile_ssim = run("--kernel", "ap_cost_kernel", "--cost", "ssim",
                    "--lines", "300")
    assert "double ssim = ((2 * mr * ms" not in tile_ncc
    assert "double ssim = ((2 * mr * ms" in tile_ssim
    assert per_output(tile_ncc) != per_output(tile_ssim)


def test_trips_of_a_strided_loop_are_counted_by_warps():
    """spread(n, threads): a warp issues an iteration while any of its
    lanes runs it."""
    assert gpu_sass_count.spread(512, 512) == 1
    assert gpu_sass_count.spread(1092, 512) == 2 + 3 / 16
    assert gpu_sass_count.spread(33, 64) == 1


def test_missing_tools_are_named(monkeypatch, tmp_path):
    """Without nvcc, cuobjdump or nvdisasm the script says which."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(gpu_sass_count, "find_tool", lambda *a: None)
    monkeypatch.delenv("AQUAPROF_NVCC", raising=False)
    assert gpu_sass_count.tools() == "not found: nvcc, cuobjdump, nvdisasm"


def occupancy(out):
    """(shared memory a block, blocks an SM) of the count's output."""
    m = re.search(r"occupancy on sm_90: ([\d,]+) bytes of shared memory"
                  r".*: (\d+) blocks an SM", out)
    assert m, out
    return int(m.group(1).replace(",", "")), int(m.group(2))


def test_blocks_an_sm_are_the_limits_the_h200_profile_read():
    """ncu on an H200 read the default strip kernel (118 registers,
    66,112 bytes of shared memory, 128 threads) as 4 blocks an SM by its
    registers and 3 by its shared memory; a kernel of 255 registers
    holds 2 blocks of 128 threads, one of 1 KiB of shared memory 32."""
    limits = gpu_sass_count.blocks_an_sm(118, 66112, 128)
    assert limits["registers"] == 4 and limits["shared memory"] == 3
    assert min(limits.values()) == 3
    assert gpu_sass_count.blocks_an_sm(255, 0, 128)["registers"] == 2
    assert min(gpu_sass_count.blocks_an_sm(32, 1024, 64).values()) == 32


def test_a_variants_macros_override_the_headers_for_the_count():
    assert gpu_sass_count.variant_defines(
        ["-DAP_STRIP_ROWS=32", "-D", "AP_STRIP_GROUP=2", "-DAP_FLAG",
         "-O3"]) == {"AP_STRIP_ROWS": 32, "AP_STRIP_GROUP": 2}


@needs_tools
def test_a_variant_of_the_blocks_is_counted_with_its_own_sizes():
    """Half the groups' rows of column sums free 12 KiB of shared
    memory a block: a fourth block an SM, as the launcher would size it
    (the variant's macros reach the host probe too)."""
    out = run("--nvcc-flags=-DAP_STRIP_GROUP=2 -DAP_STRIP_SEGMENT=8")
    committed = run()
    assert occupancy(committed) == (66112, 3)
    assert occupancy(out) == (53792, 4)
    assert per_output(out) != per_output(committed)


@needs_tools
def test_two_sources_a_thread_put_twice_the_samples_in_flight():
    """Two sources a thread at 48 rows: the same three blocks an SM as
    the committed kernel, at the shared memory the launcher would size
    (a second source's group rows and ring), and twice the samples in
    flight a scheduler, for fewer instructions an output (the ray's and
    the reference's loads and the pass down the strip shared)."""
    out = run("--nvcc-flags=-DAP_STRIP_SOURCES=2 -DAP_STRIP_ROWS=48 "
              "-DAP_STRIP_GROUP=2 -DAP_STRIP_SEGMENT=8")
    committed = run()
    assert occupancy(out) == (69824, 3)
    flight = r"(\S+) samples in flight a scheduler \((\d) a thread\)"
    assert re.search(flight, committed).groups() == ("3", "1")
    assert re.search(flight, out).groups() == ("6", "2")
    assert "0 bytes spill stores" in out
    assert per_output(out) < per_output(committed)


def test_a_loop_tested_on_a_uniform_predicate_copied_is_unrolled_as_found():
    """nvcc may test a loop's uniform counter (UISETP into UP0) and copy
    the predicate to a thread's (PLOP3) for the branch: the unroll factor
    is still the counter's step, here 16, not 1 (which once weighed a
    16-fold unrolled window sum 11 times)."""
    lines = ["UIADD3 UR17, UR17, -0x10, URZ",
             "DADD R8, R6, R8",
             "UISETP.GT.AND UP0, UPT, UR17, 0xc, UPT",
             "PLOP3.LUT P1, PT, PT, PT, UP0, 0x80, 0x0",
             "DADD R10, R10, R52",
             "@P1 BRA `(.L_x_1)"]
    code = [gpu_sass_count.Instruction(16 * i, text, ())
            for i, text in enumerate(lines)]
    code[0].label = ".L_x_1"
    loop = gpu_sass_count.Loop(0, len(code) - 1)
    assert gpu_sass_count.counter_step(code, loop) == 16
