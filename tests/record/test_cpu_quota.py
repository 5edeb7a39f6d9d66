"""The process's cgroup CPU quota (a container's CPU limit) and the quota
periods the kernel throttled it in: read from cgroup v2 and v1 trees written here
(nested limits, no limit, files that are missing or malformed, which
must never raise), and from a real cgroup this test makes where it may
(root on Linux): a profiled process limited to 1 CPU, with torch running
four times as many threads as its two CPUs of affinity, is told that
the quota bound it."""
import importlib.util
import os
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from aquaprof.record.cpu_quota import CpuLimit, cpu_limit
from planted_runs import planted_json


def tree(tmp_path, cgroup, files):
    """A root with /proc/self/cgroup holding `cgroup` and the files given
    under /sys/fs/cgroup."""
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text(cgroup)
    for name, text in files.items():
        path = tmp_path / "sys/fs/cgroup" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


V2 = "0::/kubepods/pod1/ctr\n"


def test_cgroup_v2_the_tightest_limit_along_the_path_binds(tmp_path):
    root = tree(tmp_path, V2, {
        "cgroup.controllers": "cpu memory\n",
        "kubepods/cpu.max": "400000 100000\n",
        "kubepods/pod1/cpu.max": "150000 100000\n",
        "kubepods/pod1/cpu.stat": "usage_usec 9\nnr_periods 40\n"
                                  "nr_throttled 37\nthrottled_usec 2500\n",
        "kubepods/pod1/ctr/cpu.max": "max 100000\n",
        "kubepods/pod1/ctr/cpu.stat": "nr_periods 1\nnr_throttled 0\n"})
    # the periods of the cgroup whose quota binds
    assert cpu_limit(root) == CpuLimit(1.5, (40, 37))


def test_cgroup_v2_without_a_limit_gives_the_periods_only(tmp_path):
    root = tree(tmp_path, "0::/\n", {
        "cgroup.controllers": "cpu\n", "cpu.max": "max 100000\n",
        "cpu.stat": "nr_periods 0\nnr_throttled 0\n"})
    assert cpu_limit(root) == CpuLimit(None, (0, 0))


def test_cgroup_v1_a_container_mounted_at_its_own_cgroup(tmp_path):
    """Inside a container the mount is its own cgroup while the path
    /proc names is the host's: the walk ends at the mount."""
    root = tree(tmp_path, "12:cpu,cpuacct:/docker/abc\n0::/\n", {
        "cpu,cpuacct/cpu.cfs_quota_us": "200000\n",
        "cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        "cpu,cpuacct/cpu.stat": "nr_periods 5\nnr_throttled 2\n"
                                "throttled_time 123456\n"})
    assert cpu_limit(root) == CpuLimit(2.0, (5, 2))


def test_cgroup_v1_no_quota(tmp_path):
    root = tree(tmp_path, "3:cpu:/\n", {
        "cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n",
        "cpu/cpu.stat": "nr_periods 0\nnr_throttled 0\n"})
    assert cpu_limit(root) == CpuLimit(None, (0, 0))


@pytest.mark.parametrize("cgroup,files", [
    ("", {}),                                    # no cgroup at all
    ("garbage", {}),                             # no colons
    (V2, {"cgroup.controllers": "cpu\n",
          "kubepods/pod1/ctr/cpu.max": "lots\n",
          "kubepods/pod1/ctr/cpu.stat": "nr_periods x\nnr_throttled 1\n"}),
    (V2, {"cgroup.controllers": "cpu\n",
          "kubepods/pod1/ctr/cpu.max": "100000 0\n"}),
    ("3:cpu:/../../etc\n", {"cpu/cpu.cfs_quota_us": "",
                             "cpu/cpu.cfs_period_us": "100000\n"}),
])
def test_unreadable_or_malformed_files_say_unknown(tmp_path, cgroup, files):
    limit = cpu_limit(tree(tmp_path, cgroup, files))
    assert limit.cpus is None and limit.periods is None


def test_no_proc_files_say_unknown(tmp_path):
    assert cpu_limit(tmp_path) == CpuLimit()


@contextmanager
def quota_cgroup(cpus):
    """A cgroup limited to `cpus` CPUs; its cgroup.procs file. Skips
    where this process may not make one (not root, no cpu controller)."""
    fs = Path("/sys/fs/cgroup")
    name = f"aquaprof-test-{uuid.uuid4().hex[:8]}"
    v1 = next((fs / n for n in ("cpu", "cpu,cpuacct") if (fs / n).is_dir()),
              None)
    folder = (v1 or fs) / name
    try:
        folder.mkdir()
    except OSError as e:
        pytest.skip(f"cannot make a cgroup here: {e}")
    try:
        if v1 is not None:
            (folder / "cpu.cfs_quota_us").write_text(str(int(cpus * 1e5)))
        else:
            (folder / "cpu.max").write_text(f"{int(cpus * 1e5)} 100000")
    except OSError as e:
        folder.rmdir()
        pytest.skip(f"cannot set a cgroup's CPU quota here: {e}")
    try:
        yield folder / "cgroup.procs"
    finally:
        folder.rmdir()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                    reason="the planted process pins itself (Linux)")
@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="the planted program runs torch's threads: "
                           "torch is not installed for this Python")
def test_a_process_whose_quota_binds_is_told_so():
    with quota_cgroup(1.0) as procs:
        found = planted_json("planted_native.py", "quota", procs)["matmul"]
    assert found["cpu_quota"] == 1.0 and found["throttled"] > 0, found
    assert "the 1 CPU its cgroup's quota" in found["evidence"], found
    assert "its cgroup's CPU quota throttled it in" in found["evidence"], \
        found
    assert "run 1 at most" in found["fix"], found
