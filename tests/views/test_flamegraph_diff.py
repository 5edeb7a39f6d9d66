"""The SVG flamegraph against the rest of aquaprof: a differential
flamegraph colours each stage by the verdict Report.compare gives its self
time; widths are thread time and shares are the table's; the search box
matches full paths and says when a pattern is not one. Reports are built
from planted spans through the report-format loader, so every verdict is
known in advance."""
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import aquaprof as ap
from aquaprof import _core
from aquaprof.views.flamegraph import NEUTRAL, flamegraph_svg
from aquaprof.views.flamegraph_script import MATCHING_JS
from crafted import START, report, stage
from flamegraph_frames import frames_by_path

SVG = "{http://www.w3.org/2000/svg}"
MS = 1_000_000


def planted(plan, seed, threads=1):
    """A Report from `plan`: [(path, [call ns, ...] self ns per call)],
    parents before children; each call of a parent holds one call of each
    child, run one after the other after the parent's own time. With
    threads=2 a copy of every top-level call runs at once on a second
    thread."""
    rng = np.random.default_rng(seed)
    paths = [p for p, _ in plan]
    own = {p: np.asarray(ns, np.int64) for p, ns in plan}
    kids = {p: [c for c in paths if c.rpartition("/")[0] == p]
            for p in [""] + paths}
    rows = []        # (stage, thread, parent span, start, end)

    def call(path, i, thread, parent, start):
        index = len(rows)
        rows.append([paths.index(path), thread, parent, start, 0])
        t = start + int(own[path][i] * np.exp(rng.normal(0, 0.02)))
        for child in kids[path]:
            t = call(child, i, thread, index, t)
        rows[index][4] = t
        return t

    t = START
    for top in kids[""]:
        for i in range(len(own[top])):
            end = call(top, i, 0, -1, t)
            if threads == 2:
                call(top, i, 1, -1, t)
            t = end
    spans = np.zeros(len(rows), _core.SPAN_DTYPE)
    for name, column in zip(("stage", "thread", "parent", "start_ns",
                             "end_ns"), zip(*rows)):
        spans[name] = column
    ns = spans["end_ns"] - spans["start_ns"]
    inner = spans["parent"] >= 0
    self_ns = ns - np.bincount(spans["parent"][inner], ns[inner],
                               len(spans)).astype(np.int64)
    stages = []
    for sid, path in enumerate(paths):
        mine, ones = ns[spans["stage"] == sid], self_ns[spans["stage"] ==
                                                       sid]
        parent = path.rpartition("/")[0]
        s = stage(path.rpartition("/")[2],
                  paths.index(parent) if parent else -1, path.count("/"),
                  len(mine), int(np.median(mine)))
        s.update(total_ns=int(mine.sum()), self_ns=int(ones.sum()),
                 min_ns=int(mine.min()), max_ns=int(mine.max()),
                 mean_ns=float(mine.mean()),
                 m2=float(((mine - mine.mean()) ** 2).sum()))
        stages.append(s)
    data = report(stages, spans, stop_ns=int(spans["end_ns"].max()) + MS,
                  threads=[{"index": k, "native_id": 42 + k,
                            "spans": int((spans["thread"] == k).sum()),
                            "dropped": 0} for k in range(threads)])
    return ap.Report.from_dict(data)


def calls(ms, n=20):
    return [int(ms * MS)] * n


# the user's case: infer 30 % slower, preprocess unchanged, and more
BASE = [("pipeline", calls(2)), ("pipeline/infer", calls(20)),
        ("pipeline/postprocess", calls(5)),
        ("pipeline/preprocess", calls(10)),
        ("pipeline/resize", calls(4)), ("pipeline/decode", calls(4)),
        ("pipeline/crop", calls(8)), ("warmup", calls(5, 2))]
NEW = [("pipeline", calls(2)), ("pipeline/infer", calls(26)),
       ("pipeline/postprocess", calls(4)),
       ("pipeline/preprocess", calls(10)),
       ("pipeline/resize", calls(10)), ("pipeline/decode", calls(20)),
       ("pipeline/crop", calls(3)), ("pipeline/export", calls(1)),
       ("warmup", calls(9, 2))]


def frames_of(svg):
    root = ET.fromstring(svg)
    return root, frames_by_path(root)


def rgb(g):
    return tuple(int(v) for v in re.findall(r"\d+", g.find(f"{SVG}rect")
                                           .get("fill")))


@pytest.fixture(scope="module")
def reports():
    return planted(BASE, 1), planted(NEW, 2)


def test_every_stage_is_coloured_by_compares_verdict_on_its_self_time(
        reports):
    base, new = reports
    comparison = new.compare(base)
    verdicts = {c.path: c.verdict for c in comparison.changes}
    # what the user saw compare say, before any flamegraph
    assert verdicts["pipeline/preprocess"] == "same"
    assert verdicts["pipeline/infer"] == "slower"
    assert verdicts["pipeline/postprocess"] == "faster"
    assert verdicts["pipeline"] == "slower"      # for its sub-stages
    own = {c.path: c for c in comparison.own_changes}
    _, frames = frames_of(flamegraph_svg(new, base=base))
    for s in new.stages:
        g, word = frames[s.path], own[s.path].verdict
        assert g.get("data-verdict") == word
        if not any(c.parent == s.path for c in new.stages):
            assert word == verdicts[s.path]     # a leaf: self is its call
        classes = g.get("class").split()
        assert word.rstrip("?") in classes
        assert ("hedged" in classes) == word.endswith("?")
        r, _, b = rgb(g)
        if word.startswith("slower"):
            assert r > b
        elif word.startswith("faster"):
            assert b > r
        elif word == "same":
            assert g.find(f"{SVG}rect").get("fill") == NEUTRAL
    # an ancestor of a slower stage is judged on its own time: grey, and
    # its tooltip still says what compare says of its whole calls
    assert own["pipeline"].verdict == "same"
    details = frames["pipeline"].get("data-details")
    assert "whole calls, as compare judges them: " in details
    assert details.split("as compare judges them: ")[1].split(": ")[1] \
        .startswith("slower")
    assert own["warmup"].verdict == "slower?"
    assert own["pipeline/export"].verdict == "new"
    # the % shown is compare's change of the total a run
    infer = own["pipeline/infer"].change
    assert infer == pytest.approx(0.3, abs=0.03)
    assert f"a run ({infer * 100:+.1f} %)" in \
        frames["pipeline/infer"].get("data-details")


def test_the_colour_deepens_with_the_change_up_to_a_cap(reports):
    base, new = reports
    _, frames = frames_of(flamegraph_svg(new, base=base))
    infer = rgb(frames["pipeline/infer"])          # 1.3x
    resize = rgb(frames["pipeline/resize"])        # 2.5x
    decode = rgb(frames["pipeline/decode"])        # 5x
    assert infer[1] > resize[1]                    # paler: smaller change
    assert resize == decode                        # deepest from 2x on
    crop = rgb(frames["pipeline/crop"])            # 1/2.7x
    assert crop == (resize[1], resize[1], resize[0])   # as deep, blue
    assert infer[1] < 200                          # called, so not grey


def test_the_legend_says_what_colours_and_percentages_mean(reports):
    base, new = reports
    root, _ = frames_of(flamegraph_svg(new, base=base, threshold=0.1,
                                       alpha=0.05))
    legend = " ".join(t.text or "" for t in root.iter(f"{SVG}text")
                      if t.get("class") == "legend")
    for word in ("slower", "same", "faster", "new", "self time, judged",
                 "p < 0.05", "more than 10 %", "% of the run's wall time",
                 "thread time"):
        assert word in legend
    plain, _ = frames_of(flamegraph_svg(new))
    assert "slower" not in " ".join(t.text or "" for t in
                                    plain.iter(f"{SVG}text"))


def test_widths_are_thread_time_and_shares_are_the_tables():
    rep = planted([("load", calls(30, 5)), ("load/parse", calls(10, 5))],
                  3, threads=2)
    _, frames = frames_of(flamegraph_svg(rep))
    all_time = rep["load"].wall.total          # both threads' calls
    assert float(frames[""].get("data-w")) == pytest.approx(all_time)
    assert all_time > rep.wall                 # two threads at once
    root = frames[""].get("data-details")
    assert "of thread time on 2 threads" in root
    assert f"{all_time / rep.wall * 100:.1f} % of the run's" in root
    for s in rep.stages:
        assert f"({s.share * 100:.1f} % of the run)" in \
            frames[s.path].get("data-details")


def script_of(svg):
    root = ET.fromstring(svg)
    return root, root.find(f"{SVG}script").text


def test_search_is_a_box_in_the_svg_wired_to_the_search(reports):
    root, script = script_of(flamegraph_svg(reports[1]))
    box = root.find(f"{SVG}foreignObject/"
                    "{http://www.w3.org/1999/xhtml}input")
    assert box is not None and box.get("id") == "term"
    assert 'term.addEventListener("input"' in script
    assert "prompt(" not in script
    assert "invalid pattern" in script


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_search_matches_full_paths_and_names_a_bad_pattern(reports):
    # the script keeps everything inside one function: its pure matching
    # part, which it carries, runs alone here (the browser tests drive
    # the rest)
    _, script = script_of(flamegraph_svg(reports[1]))
    assert MATCHING_JS.strip() in script
    paths = ["", "pipeline", "pipeline/infer", "pipeline/infer/x",
             "warmup"]
    probe = (MATCHING_JS + "\nvar out = [];"
             f"var paths = {json.dumps(paths)}, widths = [9, 5, 3, 1, 2];"
             "out.push(matching('pipeline/inf', paths, widths));"
             "out.push(matching('^w|infer', paths, widths));"
             "out.push(matching('(', paths, widths));"
             "console.log(JSON.stringify(out));")
    done = subprocess.run(["node", "-e", probe], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    across, nested, bad = json.loads(done.stdout)
    # a pattern across the '/' of a path, never the root
    assert across == {"hit": [False, False, True, True, False],
                      "count": 2, "time": 3}
    # a match inside another counts its time once
    assert nested["count"] == 3 and nested["time"] == 3 + 2
    assert bad is None


def test_a_stage_name_with_control_characters_is_judged_too():
    rep = planted([("odd\x01name", calls(3, 6))], 4)
    _, frames = frames_of(flamegraph_svg(rep, base=rep))
    (g,) = [g for path, g in frames.items() if path.startswith("odd")]
    assert g.get("data-verdict") == "same"
    assert g.find(f"{SVG}rect").get("fill") == NEUTRAL
