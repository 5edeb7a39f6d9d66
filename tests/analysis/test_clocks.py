"""Which reports read one monotonic clock, which a merge keeps and the
ranks' call times are compared on."""
import sys

import pytest

import aquaprof as ap
from aquaprof.analysis.clocks import shared_clock

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="boot_id is Linux's")


@pytest.mark.parametrize("hosts, shared", [
    # one kernel boot: one clock, however the containers are named
    ([{"hostname": "pod-0", "boot_id": "a"},
      {"hostname": "pod-1", "boot_id": "a"}], True),
    # two machines of one name: two boots, two clocks
    ([{"hostname": "localhost", "boot_id": "a"},
      {"hostname": "localhost", "boot_id": "b"}], False),
    # files that name no boot: the hostname, as before boots were kept
    ([{"hostname": "vm"}, {"hostname": "vm", "boot_id": "a"}], True),
    ([{"hostname": "vm"}, {"hostname": "other"}], False),
    ([{}, {}], False),
    # two boots named: two clocks, though a file beside names none
    ([{"hostname": "vm", "boot_id": "a"}, {"hostname": "vm", "boot_id": "b"},
      {"hostname": "vm"}], False),
    # a malformed host's fields name nothing
    ([{"hostname": "vm", "boot_id": ["a"]}, {"hostname": ["vm"]}], False),
    ([{"hostname": "vm", "boot_id": ["a"]}, {"hostname": "vm"}], True),
])
def test_reports_share_a_clock_where_one_kernel_boot_made_them(hosts,
                                                               shared):
    assert shared_clock(hosts) is shared


@linux_only
def test_a_run_records_its_kernels_boot():
    with ap.Profiler() as prof:
        with ap.stage("s"):
            pass
    with open("/proc/sys/kernel/random/boot_id") as f:
        assert prof.report().meta["host"]["boot_id"] == f.read().strip()


def shifted(rep, **host):
    """The report as if its host were `host`, started 100 s later."""
    data = rep.to_dict()
    data["host"] = dict(data["host"], **host,
                        started_at=data["host"]["started_at"] + 100)
    return ap.Report.from_dict(data)


@linux_only
@pytest.mark.parametrize("host, aligned_on_wall_clock", [
    # another container of this machine: the spans keep their times
    ({"hostname": "another container"}, False),
    # a machine of this one's name: aligned on when each run started
    ({"boot_id": "another boot"}, True),
])
def test_a_merge_keeps_times_only_of_reports_of_one_kernel_boot(
        host, aligned_on_wall_clock):
    with ap.Profiler() as prof:
        with ap.stage("s"):
            pass
    rep = prof.report()
    merged = ap.merge([rep, shifted(rep, **host)])
    starts = merged.spans()["start_ns"]
    assert bool(starts[1] - starts[0] > 99e9) is aligned_on_wall_clock
