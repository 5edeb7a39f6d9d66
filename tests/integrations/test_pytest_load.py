"""How busy the machine was over a pytest session (pytest_load): the
reading's edge cases, made of crafted CPU ticks: none, too short, a
worker not yet gone, the CPU of exited workers taken off, and the file
a later gate reads back."""
import glob
import json
import os
import subprocess
import sys

import pytest

from aquaprof.integrations.pytest_load import (
    SESSION_FILE, read_session, running, session_busy,
    write_session)
from aquaprof.record.host import Ticks

HZ = os.sysconf("SC_CLK_TCK")


def ticks(at, busy_seconds, process=0.0, cpus=(0, 1), children=0.0):
    """Ticks at `at` s, each CPU busy for busy_seconds / len(cpus) of
    them, the exited children's CPU seconds so far `children`."""
    each = int(busy_seconds / len(cpus) * HZ)
    return Ticks(at, process, {c: (each, 0, int(at * HZ)) for c in cpus},
                 frozenset(cpus), children=children)


def test_no_reading_is_not_known():
    start = None
    assert session_busy(start, ticks(10.0, 0.0)) == {}
    assert session_busy(ticks(0.0, 0.0),
                        None) == {}


def test_a_session_too_short_to_tell_is_not_known():
    assert session_busy(ticks(0.0, 0.0),
                        ticks(0.1, 0.2)) == {}


def test_the_leaders_and_its_exited_childrens_cpu_is_no_other_process():
    # 10 s; the machine's 2 CPUs busy 16 s in all: 2 s the leader's own,
    # 11 s its workers' (exited, waited for): 3 s others', 0.3 CPUs
    start = ticks(0.0, 0.0, process=1.0, children=4.0)
    stop = ticks(10.0, 16.0, process=3.0, children=15.0)
    found = session_busy(start, stop)
    assert found == {"other_cpus": pytest.approx(0.3, abs=0.01),
                     "steal": 0.0, "seconds": 10.0, "cpus": 2}
    # no more than every CPU busy can be pytest's: never below 0
    stop = ticks(10.0, 16.0, process=3.0, children=40.0)
    assert session_busy(start, stop)["other_cpus"] == 0.0


def test_a_worker_still_there_makes_the_reading_unknown():
    # its CPU is not yet among the leader's children's: it would pass
    # for another process's
    start = ticks(0.0, 0.0)
    stop = ticks(10.0, 16.0, children=15.0)
    assert session_busy(start, stop, workers_left=[1234]) == {}
    assert session_busy(start, stop, workers_left=[]) != {}


def test_running_names_the_processes_not_yet_gone():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert running([os.getpid(), child.pid]) == [os.getpid()]


def test_the_reading_written_is_read_back(tmp_path):
    busy = {"other_cpus": 0.7, "steal": 0.01, "seconds": 2.5, "cpus": 2}
    write_session(tmp_path / "runs", busy)
    assert read_session(tmp_path / "runs") == {
        "other_cpus": 0.7, "steal": 0.01, "cpus": 2}
    # a session that could not tell writes {}: an earlier session's
    # reading in the folder is never taken for its own
    write_session(tmp_path / "runs", {})
    assert read_session(tmp_path / "runs") is None
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [SESSION_FILE]
    # hidden: DIR/*.json in a shell (aquaprof merge, history --add) lists
    # the reports alone, every one of which loads
    assert glob.glob(str(tmp_path / "runs" / "*.json")) == []


@pytest.mark.parametrize("text", [
    None, "", "not json", "[1, 2]", "{}", '{"other_cpus": 0.5}',
    '{"other_cpus": "0.5", "steal": 0}', '{"other_cpus": -1, "steal": 0}',
    '{"other_cpus": true, "steal": 0}', '{"other_cpus": NaN, "steal": 0}',
    " " * 20_000 + '{"other_cpus": 0.5, "steal": 0}'])
def test_a_missing_or_odd_reading_is_none(tmp_path, text):
    if text is not None:
        (tmp_path / SESSION_FILE).write_text(text)
    assert read_session(tmp_path) is None


def test_odd_cpus_are_left_out(tmp_path):
    (tmp_path / SESSION_FILE).write_text(json.dumps(
        {"other_cpus": 0.5, "steal": 0, "cpus": "2"}))
    assert read_session(tmp_path) == {"other_cpus": 0.5, "steal": 0.0}


def gate_config(pids):
    """What the plugin's session reading looks at: its stash (the leader's
    first reading, the pids its workers handed over)."""
    from types import SimpleNamespace
    from aquaprof.integrations import pytest_plugin as plugin
    from aquaprof.record.host import cpu_ticks
    # as if read 10 s ago, the CPUs idle since
    start = cpu_ticks()
    cpus = {c: (busy, steal, every - 10 * HZ)
            for c, (busy, steal, every) in start.cpus.items()}
    start = start._replace(at=start.at - 10.0, cpus=cpus)
    return SimpleNamespace(stash={plugin._TICKS: start,
                                  plugin._WORKER_PIDS: pids})


@pytest.mark.skipif(not os.path.exists("/proc/stat"),
                    reason="reads /proc/stat (Linux)")
def test_the_workers_readings_merge_only_when_every_one_said_and_is_gone():
    from aquaprof.integrations.pytest_plugin import _session_busy
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    # every worker handed its pid over and has exited: its CPU is the
    # leader's children's, taken off
    assert "other_cpus" in _session_busy(gate_config([gone.pid]))
    assert "other_cpus" in _session_busy(gate_config([]))      # serial
    # one went down unheard, or is still there: not known
    assert _session_busy(gate_config([gone.pid, None])) == {}
    assert _session_busy(gate_config([gone.pid, os.getpid()])) == {}


def test_the_gate_says_the_sessions_load_where_either_side_is_known():
    from types import SimpleNamespace
    from aquaprof.integrations import pytest_plugin as plugin

    def said(now, bases):
        return plugin._said_busy(SimpleNamespace(stash={
            plugin._BUSY: now, plugin._BASE_BUSY: bases}))
    hog = {"other_cpus": 0.7, "steal": 0.0, "seconds": 2.04, "cpus": 2}
    assert said(hog, {"t": [{"other_cpus": 0.0}, {"other_cpus": 0.1}]}) == (
        "how busy the machine was: other processes kept 0.7 CPUs busy on "
        "average over this session (2.0 s); over the base sessions 0.0-0.1 "
        "CPUs")
    assert said({}, {"t": [{"other_cpus": 0.2}, None]}) == (
        "how busy the machine was: not known over this session (too short, "
        "or a worker went down); over the base sessions 0.2 CPUs (not "
        "known for some base runs)")
    assert said(hog, {}).endswith("over the base sessions not known")
    assert said({}, {"t": [None]}) == ""
