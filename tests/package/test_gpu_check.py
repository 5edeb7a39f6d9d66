"""`make gpu-check` (tests/device/gpu_check.sh) where there is no GPU, or
no time left: it must say so, name every step and pack its logs, without
touching a device; and it must never change a GPU's settings."""
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

from fake_gpu import ROOT

DRIVER = ROOT / "tests" / "device" / "gpu_check.sh"
STEPS = ["env", "build", "verify", "pytest_gpu", "raw_small",
         "cupti_pipeline", "cupti_torch_profiler", "cupti_open_stage",
         "cupti_stop_thread", "cupti_fork", "cupti_overhead", "cupti_blocks",
         "pytest_fork", "pytest_refcounts_then_mvs_gpu", "demo_cuda",
         "bench_mvs_cuda", "bench_gpu_overhead", "bench_aquamvs_ncc_cuda",
         "bench_aquamvs_ssim_cuda", "bench_aquamvs_cpu",
         "sanitizer_memcheck", "sanitizer_racecheck", "ncu_cost",
         "ncu_cost_tiles", "ncu_cost_planes",
         "pytest_all"]


def run_driver(tmp_path, nvidia_smi, budget):
    """Runs the driver into tmp_path/out; its scratch goes under
    tmp_path/tmp, which the test reads after."""
    (tmp_path / "tmp").mkdir()
    env = dict(os.environ, PYTHON=sys.executable, TMPDIR=str(tmp_path /
                                                             "tmp"),
               GPU_CHECK_NVIDIA_SMI=str(nvidia_smi),
               GPU_CHECK_BUDGET=str(budget))
    out = tmp_path / "out"
    run = subprocess.run(["bash", str(DRIVER), str(out)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    summary = (out / "SUMMARY.txt").read_text()
    rows = {line.split()[0]: line for line in summary.splitlines()
            if line.split()[:1] and line.split()[0] in STEPS}
    return run, out, summary, rows


def packed(out):
    with tarfile.open(out / "gpu-check.tgz") as tgz:
        return sorted(tgz.getnames())


@pytest.mark.slow
def test_without_a_gpu_it_says_so_and_exits_2(tmp_path):
    run, out, summary, rows = run_driver(tmp_path, tmp_path / "nvidia-smi",
                                         60)
    assert run.returncode == 2, run.stdout + run.stderr
    assert list(rows) == STEPS
    # the environment is reported, to show why; nothing else runs
    assert rows["env"].split()[-1] == "ok", (out / "env.log").read_text()
    for name in STEPS[1:]:
        assert "SKIPPED (no GPU: " in rows[name] and "not found" in \
            rows[name]
    assert "NO GPU here" in summary
    assert "no GPU: " in (out / "env.log").read_text()
    assert sorted(p.name for p in out.iterdir()) == [
        "SUMMARY.txt", "env.log", "gpu-check.tgz"]
    assert packed(out) == ["SUMMARY.txt", "env.log"]
    assert not list((tmp_path / "tmp").iterdir()), "scratch left behind"


def test_steps_that_no_longer_fit_the_budget_are_skipped(tmp_path):
    """A GPU that nvidia-smi lists, but no time: every step says so."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: Fake GPU (UUID: GPU-0)'\n")
    smi.chmod(0o755)
    run, out, summary, rows = run_driver(tmp_path, smi, 5)
    assert run.returncode == 0, run.stdout + run.stderr
    assert list(rows) == STEPS
    for name in STEPS:
        # or, before the budget is asked, a CUDA tool this machine lacks
        assert re.search(r"SKIPPED \((needs \d+s, -?\d+s of the 5s budget "
                         r"left|(compute-sanitizer|ncu) not found)\)",
                         rows[name]), rows[name]
    assert "NO GPU" not in summary
    assert packed(out) == ["SUMMARY.txt"]


def test_the_driver_parses_and_never_sets_anything_on_the_gpu():
    subprocess.run(["bash", "-n", str(DRIVER)], check=True)
    text = DRIVER.read_text()
    calls = re.findall(r'"\$NVIDIA_SMI"((?:[ \t]+-[^\s|;&)>]*)*)', text)
    assert any(calls), "the driver asks nvidia-smi nothing"
    for args in calls:
        for arg in args.split():
            assert arg in ("-L",) or arg.startswith(("--query-gpu=",
                                                     "--format=")), args
    # ncu locks the clocks to base unless told not to
    assert "--clock-control none" in text
    assert not re.search(r"nvidia-smi\s+-(r|pm|pl|ac|lgc|rgc|lmc|c|mig)\b",
                         text)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_make_gpu_check_runs_the_driver_with_plain_python(tmp_path):
    # a make that runs this test (make gpu-check OUT=...) passes its
    # command-line variables down through MAKEFLAGS: none of them here
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    dry = subprocess.run(["make", "-n", "gpu-check"], cwd=ROOT, text=True,
                         capture_output=True, check=True,
                         env=dict(env, OUT="/elsewhere")).stdout
    assert "tests/device/gpu_check.sh gpu-check-out" in dry
    assert ".venv" not in dry
    dry = subprocess.run(["make", "-n", "gpu-check", f"OUT={tmp_path}"],
                         cwd=ROOT, text=True, capture_output=True,
                         check=True, env=env).stdout
    assert f"tests/device/gpu_check.sh {tmp_path}" in dry


def test_the_kernel_variants_script_parses_and_builds_back_as_committed():
    """benchmarks/mvs/gpu_variants.sh, for a lent GPU's spare minutes: it
    parses, times each variant without torch, and ends by building the
    code as committed, so that the tree it leaves is the tested one."""
    script = ROOT / "benchmarks" / "mvs" / "gpu_variants.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert "--skip-torch" in text and 'AQUAPROF_NVCC_FLAGS="$1"' in text
    last_build = text.rindex('build ""')
    assert last_build > text.rindex("bench_mvs.py")
    assert "nvidia-smi" not in text


NCU_LOG = """==PROF== Connected to process 4242
  {kernel} (210, 19, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    ----------------------- ----------- ------------
    Metric Name             Metric Unit Metric Value
    ----------------------- ----------- ------------
    Memory Throughput                 %        {memory}
    Duration                         ms        {ms}
    Compute (SM) Throughput           %        81.02
    Section: Command line profiler metrics
    ----------------------------- ----------- ------------
    dram__bytes_read.sum                Gbyte         {read}
    dram__bytes_write.sum               Gbyte         {write}
    lts__t_sector_hit_rate.pct              %        93.10
"""


def test_the_figures_name_each_ncu_workload_and_its_dram_bytes(tmp_path):
    """The summary's figures from the logs a device run leaves: the
    headline bench lines, and each ncu workload's time and DRAM bytes
    named by its kernel (the strip kernel's name has digits) and its
    order, planted here."""
    (tmp_path / "ncu_cost.log").write_text(NCU_LOG.format(
        kernel="ap_strip_ncc_r5_kernel", memory="20.50", ms="24.90",
        read="0.41", write="1.01"))
    (tmp_path / "ncu_cost_tiles.log").write_text(NCU_LOG.format(
        kernel="ap_strip_ncc_r5_kernel", memory="61.00", ms="31.20",
        read="14.70", write="3.90"))
    (tmp_path / "ncu_cost_planes.log").write_text(NCU_LOG.format(
        kernel="ap_cost_planes_kernel", memory="40.00", ms="9.00",
        read="1.00", write="0.10"))
    (tmp_path / "bench_mvs_cuda.log").write_text(
        "depths  ours ms\n   128    24.90 strip\n"
        "depth map  128 depths       strip:    19.00 ms   150.0x; 3 of "
        "1920000 pixels a plane or more from the CPU's\n"
        "target: depth map <= 20 ms, warp strip: met (19.0 ms, 128 "
        "depths)\n\ndepth_batch sweep, 128 depths:\n"
        "  depth_batch  32:      25.1 ms, depth map      21.3 ms\n")
    done = subprocess.run(["bash", str(DRIVER), "--figures", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=True)
    lines = done.stdout.splitlines()
    for want in [
            "ncu ap_strip_ncc_r5_kernel: Duration ms 24.90",
            "ncu ap_strip_ncc_r5_kernel: dram__bytes_write.sum Gbyte 1.01",
            "ncu ap_strip_ncc_r5_kernel: dram__bytes_read.sum Gbyte 0.41",
            "ncu (blocks a plane at a time) ap_strip_ncc_r5_kernel: "
            "dram__bytes_read.sum Gbyte 14.70",
            "ncu (blocks a plane at a time) ap_strip_ncc_r5_kernel: "
            "Memory Throughput % 61.00",
            "ncu (planes warped first) ap_cost_planes_kernel: Duration ms "
            "9.00",
            "    target: depth map <= 20 ms, warp strip: met (19.0 ms, 128 "
            "depths)",
            "      depth_batch  32:      25.1 ms, depth map      21.3 ms"]:
        assert want in lines, done.stdout
    assert any(line.startswith("    depth map  128 depths") for line in
               lines), done.stdout
    # a step that left no log (skipped, no ncu) loses no other's figures
    (tmp_path / "ncu_cost_tiles.log").unlink()
    again = subprocess.run(["bash", str(DRIVER), "--figures",
                            str(tmp_path)], cwd=ROOT, capture_output=True,
                           text=True, timeout=60, check=True).stdout
    assert "ncu (planes warped first) ap_cost_planes_kernel: Duration ms " \
        "9.00" in again.splitlines()
    assert "a plane at a time" not in again


# What a GPU machine's image may lack of requirements-dev.txt: its
# python3 is the one with a CUDA torch, and nothing can be installed
# there. Hypothesis is there, and required.
OPTIONAL = ("gevent", "greenlet", "IPython", "ipykernel", "nbformat",
            "nbclient", "nbconvert", "playwright", "atheris", "pyinstrument",
            "aquamvs", "pydantic", "yaml", "pandas", "prometheus_client",
            "torch", "mypy")
# None in sys.modules is how Python itself marks a package as absent: an
# import raises ModuleNotFoundError and importlib.util.find_spec returns None,
# as both do where the package was never installed.
BLOCKER = """import sys
sys.modules.update(dict.fromkeys({names!r}))
"""


@pytest.mark.slow
def test_the_gpu_tests_collect_where_optional_packages_are_missing(
        tmp_path):
    """The GPU step runs `pytest -m gpu tests`, which imports every test
    file: one file that imports a missing package at its top stops the
    whole collection, and no GPU test runs at all."""
    (tmp_path / "sitecustomize.py").write_text(
        BLOCKER.format(names=set(OPTIONAL)))
    env = dict(os.environ, PYTHONPATH=str(tmp_path),
               PYTHONDONTWRITEBYTECODE="1")
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only",
                          "-q", "-p", "no:cacheprovider", "-m", "gpu",
                          "tests"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "could not import 'gevent'" in run.stdout  # the blocker worked
    collected = re.search(r"(\d+)/\d+ tests collected", run.stdout)
    assert collected and int(collected.group(1)) > 50, run.stdout[-500:]
