"""Instructions a (pixel, plane, source) of the GPU cost kernel costs, read
from its sm_90 machine code (SASS) without a GPU.

    python benchmarks/mvs/gpu_sass_count.py [--kernel ap_cost_kernel]
        [--cost ncc|ssim|sad]
        [--height 1200 --width 1600 --views 5 --planes 128 --window 11]
        [--nvcc-flags "-DAP_STRIP_BLOCKS=2"] [--lines 30]

The kernel counted is the one the default path launches for the window:
the strip kernel of its radius (ap_strip_ncc_r5_kernel at window 11);
--kernel ap_cost_kernel counts the tile kernel. The cost counted is the
one the kernel's name says (ssim, sad), else NCC, or --cost's: the other
costs' code weighs nothing. --lines N lists the N
source lines that weigh most (the innermost line of each instruction's
chain of inlined calls).

Compiles csrc/mvs/cuda/sweep.cu for sm_90 with the flags setup.py uses
(-O3 -std=c++17, plus -lineinfo, which leaves the machine code as it is
and tells which source line each instruction comes from), disassembles
the kernel (nvdisasm; `cuobjdump -sass` must list as many instructions)
and weighs every instruction by how often one thread issues it on the
default path of the reference case: NCC, refractive cameras, 1200 x 1600,
5 sources, 128 planes, window 11. The last line is
`instructions per (pixel, plane, source): N`.

The method, a static count:
- Loops are found by their backward branches. Each loop's source line
  declares how many times the loop runs in a comment,
  `count: trips=EXPR; step=EXPR; part=NAME`: EXPR is Python over the
  case (H, W, views, planes, radius, window) and the integer #defines of
  the kernel headers (AP_GPU_TILE_X ...); `spread(n, threads)` is the
  trip count of `for (i = tid; i < n; i += threads)` averaged over warps
  (a warp issues an iteration while any of its threads runs it); `step`
  is the loop variable's step (default 1). An instruction weighs the
  product of the iterations of the loops around it. A source loop that
  nvcc unrolled U times (U read from the step of the counter that its
  back branch tests) runs floor(trips / U) times around its U copies,
  and the remainder loop beside it trips mod U times; remainder copies
  laid out straight are counted once each, exact where trips mod U is
  U - 1 (window 11 with U = 4) and an upper bound otherwise.
- Off the default path, weight 0: out-of-line slow paths of division and
  square root (blocks that call `__internal_*` routines, and those
  routines), the code of OFF_PATH functions (other costs, the cold
  Newton fallback, pinhole cameras) and lines marked `count: off-path`.
  A line marked `count: share=EXPR` weighs EXPR: the share of a block's
  warps that run it (set-up done by one warp), or of the rows a warp
  runs it in (the strip kernel's cold crossing: a column's first two
  rows).
  The fast-path checks that branch to them are counted. Both arms of any
  other branch are counted (an upper bound), and predicated instructions
  count as issued, as the SM issues them.
- The per-thread sum is divided by the outputs a thread makes, declared
  once in the source as `count: kernel=NAME; per=EXPR` (pixels x planes
  x sources a thread computes; NAME may be a shell pattern, for kernels
  made from one template).
- Parts: an instruction belongs to the `part` of the innermost line of
  its chain marked `count: part=NAME` (a call's line: all it inlines),
  else of the innermost declared loop around it: `warp` (the samples,
  halo included), `sums` (window sums and the cost formula), else
  `other` (a block's set-up and the store, spread over its sources).
- A loop's back branch may test a second predicate (`BRA P1, target`),
  or a thread's copy (PLOP3) of a uniform test's predicate;
  its unroll factor is read from the counter whose last write before
  the test (or, carried round the loop, after it) adds a constant to
  itself.

The instruction-issue floor: benchmarks/mvs/floor_kernel.cu is the least
work an output of the NCC strip kernel must do with the same maths
(every sample seen and settled by the walk's steps, three moments slid,
the reference's sums made once a frame, no test a real kernel needs),
counted the same way; the line before the last gives it and how many
times it the kernel issues. --kernel other than a strip NCC kernel of a
radius up to AP_STRIP_RADII gives no floor.

For the strip kernels, a line gives the blocks an SM can hold by
sm_90's limits (65,536 registers in 256-register units a warp, 228 KiB
of shared memory with 1 KiB reserved a block, 64 warps, 32 blocks): the
registers from ptxas, the shared memory from the launcher's own
functions (ap_strip_shared, ap_sstrip_shared), compiled for the host
with the same -D macros. The H200's profile of the default kernel read
the same 3 blocks (docs/benchmarks.md, run 10). Variants of the blocks'
geometry (-DAP_STRIP_ROWS, _GROUP, _SEGMENT, _BLOCKS in --nvcc-flags)
are counted with their own #defines.

Needs nvcc (CUDA 12.8 or later, for sm_90 with -O3 as setup.py builds)
and cuobjdump with nvdisasm (CUDA's bin folder, or the
nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels); $AQUAPROF_NVCC,
$AQUAPROF_CUOBJDUMP, $AQUAPROF_NVDISASM name them where they are not
found.
"""
from __future__ import annotations

import argparse
import fnmatch
import functools
import glob
import importlib.util
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "csrc" / "mvs"
SOURCE = KIT / "cuda" / "sweep.cu"
FLOOR = Path(__file__).resolve().parent / "floor_kernel.cu"
# the kernel the default path launches: the strip kernel of the window's
# radius (ap_strip_ncc_kernel past AP_STRIP_RADII); ap_cost_kernel is the
# tile kernel, AQUAPROF_MVS_GPU_WARP=tile
# setup.py's CUDA_TARGETS, the sm_90 part
SM90 = ["-gencode", "arch=compute_90,code=sm_90"]
NVCC_FLAGS = ["-cubin", "-O3", "-std=c++17", *SM90, "-lineinfo",
              "-Xptxas", "-v"]

# (file, function): code the default path (refractive, settled
# crossings) never runs
OFF_PATH = [
    ("camera_math.h", "ap_crossing_cold"),
    ("gpu_sample.h", "ap_gpu_share_slow"),
    ("gpu_sample.h", "ap_gpu_pinhole"),
    ("camera_math.h", "ap_cast_aquamvs"),
]
# (file, function): each cost's own code, off the path of the others
COST_CODE = {
    "ncc": [("cost_math.h", "ap_ncc_cost")],
    "ssim": [("cost_math.h", "ap_ssim_cost"),
             ("cost_math.h", "ap_window_moments")],
    "sad": [("cost_math.h", "ap_sad_cost")],
}
# (file, text of the line): call sites off the default path
OFF_PATH_LINES = [
    ("camera_math.h", "return ap_pinhole(cam, x, u, v);"),
]

ANNOTATION = re.compile(r"/\*\s*count:(.*?)\*/", re.S)
CHAIN = re.compile(r'\s*//## File "([^"]+)", line (\d+)'
                   r'(?: inlined at "([^"]+)", line (\d+))?')
INSTRUCTION = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
LABEL = re.compile(r"^(\S+):\s*$")
# a branch, its predicate, and the target; `BRA P1, target` also tests P1
BRANCH = re.compile(r"^(@!?U?P\d+\s+)?BRA(\.\S+)?\s+(?:!?U?P\w+,\s*)?"
                    r"`\((\S+)\)")


@dataclass
class Instruction:
    address: int
    text: str
    chain: tuple            # ((file name, line), ...), innermost first
    label: str | None = None


@dataclass
class Loop:
    start: int              # index of the first instruction
    end: int                # index of the backward branch
    key: tuple | None = None
    unroll: int = 1
    iterations: float = 1.0
    part: str | None = None


# ------------------------------------------------------------ the tools

def find_tool(name, nvcc=None):
    """$AQUAPROF_<NAME>, PATH, nvcc's folder, CUDA's usual place, or the
    nvidia wheels' bin folders; None where there is none."""
    candidates = [os.environ.get("AQUAPROF_" + name.upper()),
                  shutil.which(name)]
    if nvcc:
        candidates.append(str(Path(nvcc).parent / name))
    candidates.append(f"/usr/local/cuda/bin/{name}")
    for site in {sysconfig.get_paths()["purelib"],
                 sysconfig.get_paths()["platlib"]}:
        candidates += sorted(glob.glob(f"{site}/nvidia/*/bin/{name}"))
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and \
                os.access(candidate, os.X_OK):
            return candidate
    return None


def tools():
    """(nvcc, cuobjdump, nvdisasm), or a sentence saying which is
    missing."""
    nvcc = os.environ.get("AQUAPROF_NVCC") or find_tool("nvcc")
    cuobjdump = find_tool("cuobjdump", nvcc)
    nvdisasm = find_tool("nvdisasm", cuobjdump or nvcc)
    missing = [name for name, path in (("nvcc", nvcc),
                                       ("cuobjdump", cuobjdump),
                                       ("nvdisasm", nvdisasm)) if not path]
    if missing:
        return "not found: " + ", ".join(missing)
    return nvcc, cuobjdump, nvdisasm


def tool_env():
    """The environment for nvcc, cuobjdump and nvdisasm: a sanitizer's
    runtime preloaded into the caller (`make asan` runs the tests so)
    crashes them, and is no part of the toolchain."""
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


def compile_cubin(nvcc, source, cubin, extra):
    """ptxas's report of the kernels' resources."""
    command = [nvcc, *NVCC_FLAGS, *extra, "-o", str(cubin), str(source)]
    done = subprocess.run(command, capture_output=True, text=True,
                          env=tool_env())
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr}")
    return done.stderr


def resources(ptxas):
    """{kernel: {registers, spill_stores, spill_loads, stack}}"""
    found, kernel = {}, None
    for line in ptxas.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            kernel = m.group(1)
            found[kernel] = {}
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                      r"(\d+) bytes spill loads", line)
        if m and kernel:
            found[kernel].update(stack=int(m.group(1)),
                                 spill_stores=int(m.group(2)),
                                 spill_loads=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m and kernel:
            found[kernel]["registers"] = int(m.group(1))
    return found


# ------------------------------------------------------- the machine code

def disassemble(nvdisasm, cubin, kernel):
    """The kernel's instructions up to its first subroutine (the slow
    paths of division and square root), and that subroutine code's
    size."""
    text = subprocess.run([nvdisasm, "-gi", str(cubin)], check=True,
                          env=tool_env(),
                          capture_output=True, text=True).stdout
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if line.strip() == f".text.{kernel}:"), None)
    if start is None:
        sys.exit(f"{kernel} is not in {cubin}")
    main, routines, pending, chain, label = [], 0, [], (), None
    in_routine = False
    for line in lines[start + 1:]:
        if line.startswith("//----") or ".section" in line:
            break
        m = CHAIN.match(line)
        if m:
            pending.append((Path(m.group(1)).name, int(m.group(2))))
            if m.group(3):
                pending.append((Path(m.group(3)).name, int(m.group(4))))
            continue
        m = LABEL.match(line)
        if m:
            in_routine = in_routine or m.group(1).startswith("$")
            label = m.group(1)
            continue
        m = INSTRUCTION.match(line)
        if m:
            if pending:
                chain = tuple(dict.fromkeys(pending))
                pending = []
            if in_routine:
                routines += 1
            else:
                main.append(Instruction(int(m.group(1), 16), m.group(2),
                                        chain, label))
            label = None
    return main, routines


def cuobjdump_count(cuobjdump, cubin, kernel):
    """Instructions `cuobjdump -sass` lists for the kernel."""
    text = subprocess.run([cuobjdump, "-sass", "-fun", kernel, str(cubin)],
                          env=tool_env(),
                          check=True, capture_output=True, text=True).stdout
    return sum(1 for line in text.splitlines() if INSTRUCTION.match(line))


def find_loops(code):
    labels = {ins.label: i for i, ins in enumerate(code) if ins.label}
    loops = []
    for i, ins in enumerate(code):
        m = BRANCH.match(ins.text)
        if not m or m.group(3) not in labels:
            continue
        target = labels[m.group(3)]
        if target < i or (target == i and m.group(1)):
            loops.append(Loop(target, i))
    return loops


def signed(value):
    v = int(value, 16)
    return v - (1 << 32) if v >= 1 << 31 else v


def counter_step(code, loop):
    """The constant the counter that the back branch tests moves by in
    one pass of the loop body (0: none found)."""
    branch = code[loop.end].text
    m = re.match(r"@!?(U?P\d+)", branch)
    if not m:
        return 0
    predicate = m.group(1)
    body = code[loop.start:loop.end]
    for at in range(len(body) - 1, -1, -1):
        ops = body[at].text.split(None, 1)
        if len(ops) < 2:
            continue
        operands = [o.strip().replace(".reuse", "")
                    for o in ops[1].split(",")]
        if operands[0] != predicate:
            continue
        # a uniform test's predicate copied to a thread's (PLOP3 of one
        # UP and PTs): the test is the uniform one's
        copied = [o for o in operands[1:] if re.fullmatch(r"U?P\d+", o)]
        if ops[0].startswith("PLOP3") and len(copied) == 1:
            predicate = copied[0]
            continue
        if "SETP" not in ops[0]:
            continue
        registers = [o for o in operands[2:4] if re.fullmatch(r"U?R\d+", o)]
        # each register's last writer before the test (or, carried round
        # the loop, after it): the counter is the one that adds a constant
        # to itself
        before = body[at - 1::-1] if at else []
        order = before + body[:at:-1]
        for register in registers:
            writer = next((ins for ins in order
                           if destination(ins) == register), None)
            step = self_increment(writer) if writer else 0
            if step:
                return step
        return 0
    return 0


def destination(ins):
    """The register an instruction writes first, or None."""
    text = re.sub(r"^@!?U?P\w+\s+", "", ins.text)
    parts = text.split(None, 1)
    if len(parts) < 2:
        return None
    return parts[1].split(",")[0].strip()


def self_increment(ins):
    """The constant an integer add adds to its own register, or 0."""
    text = re.sub(r"^@!?U?P\w+\s+", "", ins.text)
    parts = text.split(None, 1)
    if len(parts) < 2 or not re.match(r"U?(V?IADD3?|VIADD)\b", parts[0]):
        return 0
    args = [o.strip().replace(".reuse", "") for o in parts[1].split(",")]
    if args[0] not in args[1:]:
        return 0
    immediates = [a for a in args[1:] if re.fullmatch(r"-?0x[0-9a-f]+", a)]
    return abs(signed(immediates[0].lstrip("-"))) if immediates else 0


# ----------------------------------------------------------- the source

_LINES: dict = {}


def source_lines(name):
    """The lines of the kit's file `name` (a base name, as the line table
    gives it; base names are unique across csrc/mvs/), or the floor's,
    [] if none."""
    if name not in _LINES:
        path = FLOOR if name == FLOOR.name else \
            next(iter(sorted(KIT.rglob(name))), None)
        _LINES[name] = path.read_text().splitlines() if path else []
    return _LINES[name]


def annotations(files):
    """{(file, line): {key: value}} of the `count:` comments, each for the
    line where it starts or, where it starts a line, for the line after
    its end."""
    found = {}
    for name in files:
        text = "\n".join(source_lines(name))
        for m in ANNOTATION.finditer(text):
            first = text.count("\n", 0, m.start()) + 1
            last = text.count("\n", 0, m.end()) + 1
            line_start = text.rfind("\n", 0, m.start()) + 1
            alone = not text[line_start:m.start()].strip()
            body = re.sub(r"\s*\n\s*\*?", " ", m.group(1))
            fields = {}
            for item in body.split(";"):
                key, _, value = item.strip().partition("=")
                if key:
                    fields[key.strip()] = value.strip()
            found[(name, last + 1 if alone else first)] = fields
    return found


def function_lines(name, function):
    """Line numbers of a function's body (return type on its own line,
    the name at column 0, the closing brace at column 0)."""
    lines = source_lines(name)
    for i, line in enumerate(lines):
        if re.match(rf"{re.escape(function)}\(", line):
            end = next(j for j in range(i, len(lines)) if lines[j] == "}")
            return set(range(i + 1, end + 2))
    return set()


def off_path_lines(notes, cost):
    lines = {key for key, fields in notes.items() if "off-path" in fields}
    others = [at for kind, code in COST_CODE.items() if kind != cost
              for at in code]
    for name, function in OFF_PATH + others:
        lines |= {(name, n) for n in function_lines(name, function)}
    for name, text in OFF_PATH_LINES:
        lines |= {(name, n) for n, line in enumerate(source_lines(name), 1)
                  if text in line}
    return lines


def defines():
    """The integer #defines of the kernel headers, for the EXPRs."""
    names = {}
    for path in sorted(KIT.rglob("*.h")):
        for m in re.finditer(r"^#define (AP_\w+) (\d+)\s*$",
                             path.read_text(), re.M):
            names.setdefault(m.group(1), int(m.group(2)))
    return names


@functools.lru_cache(maxsize=None)
def _setup():
    """setup.py as a module (not run: it builds only as __main__)."""
    spec = importlib.util.spec_from_file_location("aquaprof_setup",
                                                  ROOT / "setup.py")
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)
    return setup


def macros(extra):
    """The -D macros of nvcc flags as setup.py reads them for the
    launcher's C: (name, value or None)."""
    return _setup().variant_macros(extra)


def variant_defines(extra):
    """The integer -D macros of the nvcc flags, which override the
    headers' #defines as they do for nvcc."""
    return {name: int(value) for name, value in macros(extra)
            if value is not None and re.fullmatch(r"\d+", value)}


# sm_90's limits an SM: registers (allocated 256 at a time a warp),
# shared memory (1 KiB of it reserved a block), warps, blocks
SM90_REGISTERS, SM90_SHARED, SM90_RESERVED = 65536, 228 * 1024, 1024
SM90_WARPS, SM90_BLOCKS, SM90_SCHEDULERS = 64, 32, 4


def blocks_an_sm(registers, shared, threads):
    """{limit: blocks an SM} for a kernel of `threads` a block."""
    warps = math.ceil(threads / 32)
    per_warp = max(1, math.ceil(registers * 32 / 256)) * 256
    limits = {"warps": SM90_WARPS // warps, "blocks": SM90_BLOCKS,
              "registers": SM90_REGISTERS // per_warp // warps}
    limits["shared memory"] = SM90_SHARED // (
        math.ceil((shared + SM90_RESERVED) / 128) * 128)
    return limits


SHARED_PROBE = """#include <stdio.h>
#include <stdlib.h>
#include "gpu_strip.h"
#include "gpu_ssim_strip.h"
int main(int argc, char **argv)
{
    int r = argc > 1 ? atoi(argv[1]) : 0;
    printf("%u %u %u\\n", ap_strip_shared(AP_COST_NCC, r),
           ap_strip_shared(AP_COST_SAD, r), ap_sstrip_shared(r));
    return 0;
}
"""


def strip_shared(cost, radius, extra):
    """The strip kernel's shared memory a block as the launcher sizes it
    (the variant's -D macros given), or None without a host compiler."""
    compiler = os.environ.get("CC") or shutil.which("cc") or \
        shutil.which("gcc")
    if not compiler:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "shared.c"
        probe.write_text(SHARED_PROBE)
        binary = Path(tmp) / "shared"
        built = subprocess.run(
            [compiler, "-std=c11", "-D_GNU_SOURCE",
             *(f"-D{name}" + ("" if value is None else f"={value}")
               for name, value in macros(extra)),
             f"-I{KIT / 'cuda'}", str(probe), "-lm", "-o", str(binary)],
            capture_output=True, text=True, env=tool_env())
        if built.returncode:
            sys.exit(f"the shared memory probe did not build:\n"
                     f"{built.stderr}")
        ncc, sad, ssim = map(int, subprocess.run(
            [str(binary), str(radius)], capture_output=True, text=True,
            check=True).stdout.split())
    return {"ncc": ncc, "sad": sad, "ssim": ssim}[cost]


def report_occupancy(kernel, cost, case, extra, registers):
    if not kernel.startswith("ap_strip_"):
        return
    if registers is None:
        print("occupancy: ptxas gave no registers for the kernel")
        return
    shared = strip_shared(cost, case["radius"], extra)
    if shared is None:
        print("occupancy: no host C compiler to size the shared memory")
        return
    threads = case["AP_STRIP_COLS"]
    limits = blocks_an_sm(registers, shared, threads)
    blocks = min(limits.values())
    warps = blocks * math.ceil(threads / 32)
    # the box costs' kernels warp AP_STRIP_SOURCES samples a thread side
    # by side, each a chain of dependent steps; SSIM's one
    sources = 1 if kernel == "ap_strip_ssim_kernel" else \
        case["AP_STRIP_SOURCES"]
    print(f"occupancy on sm_90: {shared:,} bytes of shared memory and "
          f"{registers} registers a thread, {threads} threads a block: "
          f"{blocks} blocks an SM ("
          + ", ".join(f"{k} {v}" for k, v in limits.items()
                      if k in ("registers", "shared memory"))
          + f"), {warps} warps of {SM90_WARPS} "
          f"({100 * warps / SM90_WARPS:.1f} %), "
          f"{warps * sources / SM90_SCHEDULERS:g} samples in flight a "
          f"scheduler ({sources} a thread)")


def spread(n, threads):
    """Trips of `for (i = tid; i < n; i += threads)` per warp, averaged
    over a block's warps: a warp runs while any of its lanes does."""
    warps = math.ceil(threads / 32)
    trips = [max(0, math.ceil((n - 32 * w) / threads)) for w in range(warps)]
    return sum(trips) / warps


def evaluate(expression, case):
    names = dict(case, spread=spread, ceil=math.ceil, floor=math.floor,
                 min=min, max=max)
    return float(eval(expression, {"__builtins__": {}}, names))


# -------------------------------------------------------------- weighing

def weigh_loops(code, loops, notes, case):
    """Each loop's key, unroll factor, iterations and part."""
    groups = {}
    for loop in loops:
        chain = code[loop.end].chain
        loop.key = next((at for at in chain if "trips" in
                         notes.get(at, {})), None)
        if loop.key is None:
            sys.exit(f"the loop ending at {code[loop.end].address:#06x} "
                     f"(source {chain[:2]}) has no `count: trips=` comment")
        fields = notes[loop.key]
        step = evaluate(fields.get("step", "1"), case)
        moved = counter_step(code, loop)
        # a counter of iterations moves by U, a loop variable by U steps
        unroll = moved / step if moved >= step and moved % step == 0 \
            else moved
        loop.unroll = int(unroll) if 1 < unroll <= 16 else 1
        loop.part = fields.get("part")
        groups.setdefault(loop.key, []).append(loop)
    for key, members in groups.items():
        trips = evaluate(notes[key]["trips"], case)
        unrolled = max(loop.unroll for loop in members)
        for loop in members:
            if unrolled == 1:
                loop.iterations = trips
            elif loop.unroll > 1:
                loop.iterations = math.floor(trips / loop.unroll)
            else:                               # the remainder loop
                loop.iterations = trips - unrolled * math.floor(
                    trips / unrolled)


def slow_path_blocks(code):
    """Indices of the basic blocks that call a slow path."""
    skipped, block = set(), []
    for i, ins in enumerate(code):
        if ins.label and block:
            block = []
        block.append(i)
        if "CALL" in ins.text and "__internal" in ins.text:
            skipped |= set(block)
            # the branch back after the call
            j = i + 1
            while j < len(code) and not code[j].label:
                skipped.add(j)
                if code[j].text.startswith("BRA"):
                    break
                j += 1
        if BRANCH.match(ins.text) or ins.text.startswith(("EXIT", "RET")):
            block = []
    return skipped


def count(code, loops, off_lines, shares, parts_of, per):
    """Per-part weighted instruction counts, per output, the weighted
    opcode mix and the weight of each source line (the innermost of an
    instruction's chain)."""
    skipped = slow_path_blocks(code)
    parts, mix, lines = {}, {}, {}
    for i, ins in enumerate(code):
        if i in skipped or any(at in off_lines for at in ins.chain):
            continue
        share = math.prod(shares[at] for at in set(ins.chain)
                          if at in shares)
        if BRANCH.match(ins.text) and ins.text.startswith("BRA") and \
                ins.label and BRANCH.match(ins.text).group(3) == ins.label:
            continue                    # the kernel's final self-branch
        around = [loop for loop in loops if loop.start <= i <= loop.end]
        weight = math.prod(loop.iterations for loop in around) * share / per
        innermost = sorted(around, key=lambda lp: lp.end - lp.start)
        part = next((parts_of[at] for at in ins.chain if at in parts_of),
                    None) or next((lp.part for lp in innermost if lp.part),
                                  "other")
        parts[part] = parts.get(part, 0.0) + weight
        opcode = ins.text.split()[0] if not ins.text.startswith("@") \
            else ins.text.split()[1]
        opcode = opcode.split(".")[0]
        mix[opcode] = mix.get(opcode, 0.0) + weight
        line = ins.chain[0] if ins.chain else ("?", 0)
        lines[line] = lines.get(line, 0.0) + weight
    return parts, mix, lines


def analyse(source, kernel, case, extra, found, cost="ncc"):
    """(parts, mix, resources, loops, listed instructions) of one kernel
    of one source, on the path of `cost`."""
    nvcc, cuobjdump, nvdisasm = found
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "kernels.cubin"
        ptxas = compile_cubin(nvcc, source, cubin, extra)
        code, routines = disassemble(nvdisasm, cubin, kernel)
        listed = cuobjdump_count(cuobjdump, cubin, kernel)
    if listed != len(code) + routines:
        sys.exit(f"cuobjdump lists {listed} instructions of {kernel}, "
                 f"nvdisasm {len(code) + routines}")
    files = sorted({at[0] for ins in code for at in ins.chain})
    notes = annotations(files)
    per = next((f["per"] for f in notes.values()
                if fnmatch.fnmatchcase(kernel, f.get("kernel", ""))), None)
    if per is None:
        sys.exit(f"no `count: kernel={kernel}; per=EXPR` comment in "
                 f"{', '.join(files)}")
    loops = find_loops(code)
    weigh_loops(code, loops, notes, case)
    shares = {at: evaluate(f["share"], case) for at, f in notes.items()
              if "share" in f}
    parts_of = {at: f["part"] for at, f in notes.items()
                if "part" in f and "trips" not in f}
    parts, mix, lines = count(code, loops, off_path_lines(notes, cost),
                              shares, parts_of, evaluate(per, case))
    return (parts, mix, lines, resources(ptxas).get(kernel, {}), loops,
            code, listed)


def report_loops(code, loops):
    for loop in sorted(loops, key=lambda lp: lp.start):
        name, line = loop.key
        print(f"  loop {code[loop.start].address:#06x}-"
              f"{code[loop.end].address:#06x} {name}:{line} "
              f"{loop.end - loop.start + 1} instructions, unrolled "
              f"x{loop.unroll}, {loop.iterations:g} iterations"
              + (f" ({loop.part})" if loop.part else ""))


def default_kernel(case):
    """The NCC kernel the launcher picks for the case's window."""
    radius = case["radius"]
    if 1 <= radius <= case.get("AP_STRIP_RADII", 0):
        return f"ap_strip_ncc_r{radius}_kernel"
    return "ap_strip_ncc_kernel"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernel", default=None,
                        help="the kernel to count (default: the strip "
                             "kernel the window takes)")
    parser.add_argument("--cost", choices=sorted(COST_CODE), default=None,
                        help="the cost whose path is counted (default: "
                             "the kernel name's, else ncc)")
    parser.add_argument("--height", type=int, default=1200)
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--views", type=int, default=5)
    parser.add_argument("--planes", type=int, default=128)
    parser.add_argument("--window", type=int, default=11)
    parser.add_argument("--lines", type=int, default=0, metavar="N",
                        help="list the N source lines that weigh most")
    parser.add_argument("--nvcc-flags", default="",
                        help="more nvcc flags, as $AQUAPROF_NVCC_FLAGS")
    args = parser.parse_args(argv)
    found = tools()
    if isinstance(found, str):
        sys.exit(f"gpu_sass_count: {found} (CUDA's bin folder, or the "
                 f"nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels)")
    extra = shlex.split(args.nvcc_flags or
                        os.environ.get("AQUAPROF_NVCC_FLAGS", ""))
    case = dict(defines(), **variant_defines(extra), H=args.height,
                W=args.width, views=args.views, planes=args.planes,
                radius=args.window // 2, window=args.window)
    args.kernel = args.kernel or default_kernel(case)
    args.cost = args.cost or next(
        (kind for kind in ("ssim", "sad") if kind in args.kernel), "ncc")
    version = next((line for line in subprocess.run(
        [found[0], "--version"], capture_output=True, text=True,
        env=tool_env()).stdout.splitlines() if "release" in line), "nvcc")
    print(f"{args.kernel} in {SOURCE.relative_to(ROOT)}, sm_90, {version}")
    print(f"case: {args.height} x {args.width}, {args.views} sources, "
          f"{args.planes} planes, window {args.window}, "
          f"{args.cost.upper()}, refractive")
    parts, mix, lines, res, loops, code, listed = analyse(
        SOURCE, args.kernel, case, extra, found, args.cost)
    print(f"machine code: {listed} instructions, "
          f"{res.get('registers', '?')} registers, "
          f"{res.get('spill_stores', '?')} bytes spill stores, "
          f"{res.get('spill_loads', '?')} bytes spill loads, "
          f"{res.get('stack', '?')} bytes stack")
    report_occupancy(args.kernel, args.cost, case, extra,
                     res.get("registers"))
    report_loops(code, loops)
    total = sum(parts.values())
    for part in ("warp", "sums", "other"):
        print(f"  {part:>5}: {parts.get(part, 0.0):8.1f}")
    fp64 = sum(v for k, v in mix.items() if k.startswith("D"))
    print(f"  float64 instructions (DFMA, DADD, DMUL, DSETP ...): "
          f"{fp64:.1f}")
    top = sorted(mix.items(), key=lambda kv: -kv[1])[:12]
    print("  most issued: " + ", ".join(f"{k} {v:.0f}" for k, v in top))
    heaviest = sorted(lines.items(), key=lambda kv: -kv[1])[:args.lines]
    for (name, line), weight in heaviest:
        text = (source_lines(name)[line - 1].strip()
                if 0 < line <= len(source_lines(name)) else "")
        print(f"  {weight:7.1f}  {name}:{line}  {text[:60]}")
    floor = floor_kernel(args.kernel)
    if floor is not None:
        floor_parts = analyse(FLOOR, floor, case, extra, found)[0]
        least = sum(floor_parts.values())
        print(f"instruction-issue floor ({FLOOR.relative_to(ROOT)}, "
              f"{floor}): {least:.1f} (warp {floor_parts.get('warp', 0):.1f},"
              f" sums {floor_parts.get('sums', 0):.1f}, other "
              f"{floor_parts.get('other', 0):.1f}); the kernel issues "
              f"{total / least:.2f} times it")
    print(f"instructions per (pixel, plane, source): {round(total)}")


def floor_kernel(kernel):
    """The floor kernel for a strip NCC kernel of its own radius."""
    m = re.fullmatch(r"ap_strip_ncc_r(\d+)_kernel", kernel)
    return f"ap_floor_ncc_r{m.group(1)}_kernel" if m else None


if __name__ == "__main__":
    main()
