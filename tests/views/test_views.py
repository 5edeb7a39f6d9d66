"""Every view of a Report, validated by reading it back: the Chrome trace,
folded stacks, the SVG flamegraph (plain and differential), speedscope,
HTML, the DataFrame and the %%aquaprof magic; and merged reports."""
import json
import mmap
import re
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections import defaultdict

import numpy as np
import pytest

import aquaprof as ap
from flamegraph_frames import frames_by_path
from profiled import busy

SVG = "{http://www.w3.org/2000/svg}"


def profile_pipeline(scale=1.0):
    """Nested stages on two threads, items, a raised stage, a ';' in a
    name, a stage called many times."""
    def worker():
        with ap.stage("decode", items=4):
            busy(0.002 * scale)

    with ap.Profiler() as prof:
        with ap.stage("load", items=8):
            busy(0.003 * scale)
            with ap.stage("parse;fast"):
                busy(0.002 * scale)
        t = threading.Thread(target=worker)
        t.start()
        with ap.stage("train"):
            for _ in range(20):
                with ap.stage("step"):
                    busy(0.0002 * scale)
            try:
                with ap.stage("eval"):
                    raise KeyError("x")
            except KeyError:
                pass
        t.join()
    return prof.report()


@pytest.fixture(scope="module")
def report():
    return profile_pipeline()


# ------------------------------------------------------------ trace

def check_trace(trace, report):
    """Complete events nest per track (a child begins and ends within the
    one open below it) and their starts never go back in time."""
    events = trace["traceEvents"]
    tracks = defaultdict(list)
    for e in events:
        assert e["ph"] in "MXCi"
        if e["ph"] == "X":
            assert e["dur"] >= 0
            tracks[(e["pid"], e["tid"])].append(e)
    for track in tracks.values():
        starts = [e["ts"] for e in track]
        ordered = sorted(track, key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in ordered:
            while stack and stack[-1] <= e["ts"]:
                stack.pop()
            if stack:
                assert e["ts"] + e["dur"] <= stack[-1] + 1e-3
            stack.append(e["ts"] + e["dur"])
        assert starts == sorted(starts) or len(set(starts)) == len(starts)
    return tracks


def test_trace_has_a_track_per_thread_and_every_span(report, tmp_path):
    path = report.to_chrome_trace(tmp_path / "t.json")
    trace = json.loads(path.read_text())
    tracks = check_trace(trace, report)
    assert len(tracks) == len(report.threads) == 2
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == report.spans_recorded
    by_name = defaultdict(list)
    for e in spans:
        by_name[e["args"]["path"]].append(e)
    assert len(by_name["train/step"]) == 20
    assert by_name["load"][0]["args"]["items"] == 8
    assert by_name["train/eval"][0]["args"]["raised"] is True
    assert by_name["load/parse;fast"][0]["name"] == "parse;fast"
    # spans map ticks to CLOCK_MONOTONIC: a few ns a span apart at most
    total_ms = sum(e["dur"] for e in by_name["train/step"]) / 1e3
    assert total_ms == pytest.approx(report["train/step"].wall.total * 1e3,
                                     abs=20 * 1e-5)
    names = {e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert len(names) == 2
    assert trace["otherData"]["spans_left_out"] == 0


def test_trace_past_its_cap_keeps_the_longest_and_says_so(report,
                                                           tmp_path):
    trace = json.loads(report.to_chrome_trace(tmp_path / "t.json",
                                              max_events=4).read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == 4
    left = report.spans_recorded - 4
    assert trace["otherData"]["spans_left_out"] == left
    note = [e for e in trace["traceEvents"] if e["ph"] == "i"]
    assert f"{left} shortest spans left out" in note[0]["name"]
    raw = report.spans()
    longest = np.argsort(raw["start_ns"] - raw["end_ns"], kind="stable")[:4]
    assert sorted(e["args"]["path"] for e in spans) == sorted(
        report.stage_names[raw[i]["stage"]] for i in longest)
    check_trace(trace, report)
    with pytest.raises(ValueError, match="max_events"):
        report.to_chrome_trace(tmp_path / "x.json", max_events=-1)


def test_trace_draws_host_memory_over_time(tmp_path):
    with ap.Profiler(memory_interval=0.001) as prof:
        with ap.stage("grow"):
            # A fresh anonymous map: np.ones could reuse heap pages an
            # earlier test freed, and then RSS would not move at all.
            block = mmap.mmap(-1, 64 << 20)
            np.frombuffer(block, np.uint8)[::mmap.PAGESIZE] = 1
            time.sleep(0.03)
            block.close()
            time.sleep(0.01)
    rep = prof.report()
    samples = rep.memory_samples
    assert len(samples) >= 10
    times = [t for t, _ in samples]
    assert times == sorted(times)
    assert rep.meta["start_ns"] <= times[0] and times[-1] <= \
        rep.meta["stop_ns"]
    trace = json.loads(rep.to_chrome_trace(tmp_path / "m.json").read_text())
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    assert len(counters) == len(samples)
    peak = max(e["args"]["RSS MiB"] for e in counters)
    assert peak - counters[0]["args"]["RSS MiB"] > 60
    assert ap.Report.load(rep.save(tmp_path / "r.json")) == rep


# ----------------------------------------------------------- folded

def test_folded_stacks_add_up_to_the_totals(report, tmp_path):
    lines = report.to_folded(tmp_path / "f.txt").read_text().splitlines()
    values = {}
    for line in lines:
        stack, value = line.rsplit(" ", 1)
        values[tuple(stack.split(";"))] = int(value)
    assert ("load", "parse:fast") in values      # ';' in a name is ':'
    for stage in report.stages:
        frames = tuple(p.replace(";", ":") for p in stage.path.split("/"))
        under = sum(v for k, v in values.items()
                    if k[:len(frames)] == frames)
        assert under == pytest.approx(stage.wall.total * 1e9, abs=len(
            report.stages))


# ------------------------------------------------------- flamegraph

def frames_of(svg_path):
    root = ET.parse(svg_path).getroot()
    return root, frames_by_path(root)


def test_flamegraph_has_a_frame_per_stage_as_wide_as_its_time(report,
                                                              tmp_path):
    root, frames = frames_of(report.to_flamegraph(tmp_path / "f.svg"))
    assert set(frames) == {""} | {s.path for s in report.stages}
    width_all = float(frames[""].find(f"{SVG}rect").get("width"))
    total_all = sum(s.wall.total for s in report.stages if s.depth == 0)
    for s in report.stages:
        rect = frames[s.path].find(f"{SVG}rect")
        assert float(rect.get("width")) == pytest.approx(
            width_all * s.wall.total / total_all, abs=0.01)
        details = frames[s.path].get("data-details")
        assert details.startswith(f"{s.path}: ")
        # children sit on their parent, within its extent
        if s.parent is not None:
            parent = frames[s.parent].find(f"{SVG}rect")
            x, px = float(rect.get("x")), float(parent.get("x"))
            assert px - 1e-3 <= x
            assert x + float(rect.get("width")) <= px + float(
                parent.get("width")) + 1e-3
            assert float(rect.get("y")) < float(parent.get("y"))
    script = root.find(f"{SVG}script").text
    assert "function zoom" in script and "function search" in script


def test_differential_flamegraph_colours_by_change(report, tmp_path):
    # ten times slower: a change no busy machine hides in 20 calls
    slower = profile_pipeline(scale=10.0)
    path = ap.diff_flamegraph(report, slower, tmp_path / "d.svg")
    _, frames = frames_of(path)
    # step: 20 calls a side, tested; load: one call, too few to test
    assert frames["train/step"].get("data-verdict") == "slower"
    assert frames["load"].get("data-verdict") == "slower?"
    assert "hedged" in frames["load"].get("class").split()
    fill = frames["load"].find(f"{SVG}rect").get("fill")
    r, g, b = (int(v) for v in fill[4:-1].split(","))
    assert r > b                         # slower: red
    faster = ap.diff_flamegraph(slower, report, tmp_path / "e.svg")
    _, frames = frames_of(faster)
    r, g, b = (int(v) for v in frames["load"].find(f"{SVG}rect")
               .get("fill")[4:-1].split(","))
    assert b > r                         # faster: blue
    assert "self time: total " in frames["load"].get("data-details")
    assert "whole calls, as compare judges them: " in \
        frames["load"].get("data-details")


# -------------------------------------------------------- speedscope

def test_speedscope_file_follows_the_format(report, tmp_path):
    doc = json.loads(report.to_speedscope(tmp_path / "s.json").read_text())
    assert doc["$schema"] == ("https://www.speedscope.app/"
                              "file-format-schema.json")
    assert [f["name"] for f in doc["shared"]["frames"]] == \
        report.stage_names
    assert len(doc["profiles"]) == 2
    opened = 0
    for profile in doc["profiles"]:
        assert profile["type"] == "evented"
        assert profile["unit"] == "nanoseconds"
        stack, last = [], 0
        for e in profile["events"]:
            assert e["type"] in ("O", "C")
            assert e["at"] >= last and \
                profile["startValue"] <= e["at"] <= profile["endValue"]
            last = e["at"]
            if e["type"] == "O":
                stack.append(e["frame"])
                opened += 1
            else:
                assert stack.pop() == e["frame"]
        assert stack == []
    assert opened == report.spans_recorded


# ------------------------------------------------------ text header

def test_the_header_counts_the_threads_sampled_as_the_root_does(tmp_path):
    """Threads that only waited record no stage; the sampler saw them,
    and the header says how many there were in all, as the flamegraph's
    root does."""
    done = threading.Event()
    waiters = [threading.Thread(target=done.wait, name=f"waiter{i}")
               for i in range(3)]
    with ap.Profiler(sample=0.001) as prof:
        for t in waiters:
            t.start()
        with ap.stage("compute"):
            busy(0.03)
        done.set()
        for t in waiters:
            t.join()
    rep = prof.report()
    first = str(rep).splitlines()[0]
    root = ET.parse(rep.to_flamegraph(tmp_path / "f.svg")).getroot()
    label = frames_by_path(root)[""].get("data-n")
    sampled = int(re.fullmatch(r"all \((\d+) threads\)", label).group(1))
    assert sampled >= 4
    assert f", 1 thread with stages (MainThread), {sampled} in all, " \
        in first


def test_the_header_names_the_threads_once_where_all_have_stages(report):
    first = str(report).splitlines()[0]
    assert ", 2 threads (MainThread, Thread-" in first
    assert "in all" not in first


# ------------------------------------------------------ notebook

def test_html_holds_every_stage_and_the_bottlenecks(report):
    text = report._repr_html_()
    for s in report.stages:
        assert f">{'&nbsp;' * 2 * s.depth}{s.name}<" in text
    assert "Top bottlenecks by self time" in text
    assert "raised" in text               # the warning for train/eval
    assert text.count("<tr>") == len(report.stages) + 1
    evil = profile_stage_named("<b>&<i>")
    assert "<b>&" not in evil._repr_html_()
    assert "&lt;b&gt;&amp;&lt;i&gt;" in evil._repr_html_()


def profile_stage_named(name):
    with ap.Profiler() as prof:
        with ap.stage(name):
            pass
    return prof.report()


def test_dataframe_has_a_row_per_stage(report):
    df = report.to_dataframe()
    assert list(df["path"]) == [s.path for s in report.stages]
    row = df[df["path"] == "train/step"].iloc[0]
    assert row["count"] == 20
    assert row["total_s"] == report["train/step"].wall.total


def test_dataframe_without_pandas_says_how(report, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        report.to_dataframe()


def test_cell_magic_profiles_the_cell(tmp_path):
    pytest.importorskip("IPython")   # installed by `make test`
    from IPython.testing.globalipapp import get_ipython
    shell = get_ipython()
    shell.run_line_magic("load_ext", "aquaprof")
    out = tmp_path / "cell.json"
    shell.run_cell_magic("aquaprof", f"-o {out}",
                         "import aquaprof as ap\n"
                         "with ap.stage('inner'):\n"
                         "    total = sum(range(1000))\n")
    rep = ap.Report.load(out)
    assert rep["cell"].count == 1 and rep["cell/inner"].count == 1
    assert shell.user_ns["total"] == 499500
    # IPython's own usage error: shown as one line, no traceback
    from IPython.core.error import UsageError
    with pytest.raises(UsageError, match="usage"):
        shell.run_cell_magic("aquaprof", "--bad", "pass")


def test_cell_magic_shows_the_report_once(monkeypatch):
    pytest.importorskip("IPython")
    import IPython.display
    from IPython.testing.globalipapp import get_ipython
    shell = get_ipython()
    shell.run_line_magic("load_ext", "aquaprof")
    shown = []
    monkeypatch.setattr(IPython.display, "display", shown.append)
    # the returned report is the cell's output: not displayed as well
    rep = shell.run_cell_magic("aquaprof", "", "x = 1\n")
    assert isinstance(rep, ap.Report) and shown == []
    # a cell that raised: its report is shown, then its error
    with pytest.raises(ZeroDivisionError):
        shell.run_cell_magic("aquaprof", "", "1 / 0\n")
    assert len(shown) == 1 and isinstance(shown[0], ap.Report)


# ---------------------------------------------------------- merge

def test_merge_keeps_processes_and_sums_aggregates(report, tmp_path):
    other = profile_pipeline(scale=0.5)
    merged = ap.merge([report, other], ["rank0", "rank1"])
    assert [p["label"] for p in merged.processes] == ["rank0", "rank1"]
    assert len(merged.threads) == 4
    step = merged["train/step"]
    a, b = report["train/step"], other["train/step"]
    assert step.count == 40
    assert step.wall.total == pytest.approx(a.wall.total + b.wall.total)
    assert step.wall.min == min(a.wall.min, b.wall.min)
    both = np.concatenate([[a.wall.mean] * 20, [b.wall.mean] * 20])
    assert step.wall.mean == pytest.approx(
        (a.wall.total + b.wall.total) / 40)
    assert step.wall.std >= 0 and step.wall.std >= both.std() * 0.99
    assert merged.spans_recorded == report.spans_recorded + \
        other.spans_recorded
    saved = merged.save(tmp_path / "m.json")
    assert ap.Report.load(saved) == merged
    trace = json.loads(merged.to_chrome_trace(tmp_path / "m.trace.json")
                       .read_text())
    processes = {e["args"]["name"] for e in trace["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "process_name"}
    assert processes == {"rank0", "rank1"}
    check_trace(trace, merged)
    with pytest.raises(ValueError, match="one or more"):
        ap.merge([])
    with pytest.raises(ValueError, match="labels"):
        ap.merge([report], ["a", "b"])


def test_a_long_runs_trace_is_written_without_holding_it_all(tmp_path):
    """The trace of 300,000 spans is written a block of spans at a time:
    the memory it takes stays a fraction of the file (it took over four
    times the file, a Python object for every span and the whole text
    twice, 700 MB for a million spans)."""
    import tracemalloc
    with ap.Profiler(max_spans=400_000) as prof:
        for i in range(300_000):
            with ap.stage("step", items=i & 1):
                pass
    rep = prof.report()
    tracemalloc.start()
    try:
        path = rep.to_chrome_trace(tmp_path / "t.json")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    size = path.stat().st_size
    assert peak < size / 2, (peak, size)
    events = json.loads(path.read_text())["traceEvents"]
    assert sum(e.get("cat") == "stage" for e in events) == 300_000
