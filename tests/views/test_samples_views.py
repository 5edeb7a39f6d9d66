"""Planted samples drawn in every view: code frames under their stage's
frame in the folded stacks and the flamegraph (as wide as their share of
the stage's self time), and in the trace and speedscope (from the
timeline, nested in their stage's spans)."""
import json
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections import defaultdict

import pytest

import aquaprof as ap
from aquaprof.views.flamegraph import flamegraph_svg
from aquaprof.views.threads import idle_threads
from flamegraph_frames import frames_by_path
from sampled_reports import FRAMES, MS, main_tid, profile_stages, span_of, \
    with_samples

SVG = "{http://www.w3.org/2000/svg}"
RUN_DECODE = "run_decode (pipeline.py:20)"
NMS = "nms (postproc.py:40)"
IOU = "iou (postproc.py:60)"
PARSE = "parse (pipeline.py:80)"
IDLE = "idle (main.py:90)"
MAIN = "main (main.py:10)"


def planted(tid):
    """Frames 0 <module>, 1 main, 2 run_decode, 3 nms, 4 iou, 5 parse,
    6 idle. decode's stacks share <module>, main and run_decode: trimmed
    to run_decode; decode/nms's and load's single stacks to their
    innermost frame."""
    return [
        (0, tid, "decode", [0, 1, 2, 3], 5, 5 * MS, 4 * MS),        # 0
        (0, tid, "decode", [0, 1, 2, 3, 4], 3, 3 * MS, 3 * MS),     # 1
        (0, tid, "decode", [0, 1, 2, 5], 2, 2 * MS, 1 * MS),        # 2
        (0, tid, "decode", [], 1, 1 * MS, 0),                       # 3
        (0, tid, "decode/nms", [0, 1, 2, 3, 3], 2, 2 * MS, 2 * MS),  # 4
        (0, tid, "load", [0, 1, 6], 4, 4 * MS, 0),                  # 5
        (0, tid, None, [0, 1], 1, 1 * MS, 0),                       # 6
    ]


class Times:
    """The spans' edges of a profile_stages() report, ns."""

    def __init__(self, rep):
        self.ls, self.le = span_of(rep, "load")
        self.ds, self.de = span_of(rep, "decode")
        self.ns, self.ne = span_of(rep, "decode/nms")


def timeline(t):
    """Samples at known times, each a ms after the last on the thread or
    its stage's edge (interval 1 ms)."""
    return [(t.ls + MS, 5), (t.ls + 2 * MS, 5),
            (t.le + 2 * MS, 6),
            (t.ds + MS, 0), (t.ds + 2 * MS, 0), (t.ds + 3 * MS, 1),
            (t.ns + MS, 4), (t.ns + 2 * MS, 4),
            (t.ne + MS, 2), (t.ne + 2 * MS, 2)]


@pytest.fixture(scope="module")
def base():
    return profile_stages()


@pytest.fixture(scope="module")
def rep(base):
    return with_samples(base, planted(main_tid(base)),
                        timeline=timeline(Times(base)))


def self_ns(rep, path):
    return round(rep[path].self_time * 1e9)


# ------------------------------------------------------------ folded

def test_folded_stacks_put_code_under_its_stage(rep, tmp_path):
    lines = rep.to_folded(tmp_path / "f.txt").read_text().splitlines()
    # decode's self time split 1 : 5 : 3 : 2 over its frameless stack
    # (left in decode) and its three stacks, rounded down cumulatively
    own = self_ns(rep, "decode")
    cut = [own * k // 11 for k in (1, 6, 9, 11)]
    assert lines == [
        f"decode {cut[0]}",
        f"decode;{RUN_DECODE};{NMS} {cut[1] - cut[0]}",
        f"decode;{RUN_DECODE};{NMS};{IOU} {cut[2] - cut[1]}",
        f"decode;{RUN_DECODE};{PARSE} {cut[3] - cut[2]}",
        f"decode;nms;{NMS} {self_ns(rep, 'decode/nms')}",
        f"load;{IDLE} {self_ns(rep, 'load')}",
        f"{MAIN} {MS}",
    ]


def test_folded_stacks_still_add_up_to_each_stage_total(rep, tmp_path):
    values = {}
    for line in rep.to_folded(tmp_path / "f.txt").read_text().splitlines():
        stack, value = line.rsplit(" ", 1)
        values[tuple(stack.split(";"))] = int(value)
    for stage in rep.stages:
        frames = tuple(stage.path.split("/"))
        under = sum(v for k, v in values.items() if k[:len(frames)] == frames)
        assert under == pytest.approx(stage.wall.total * 1e9, abs=3)


def test_folded_code_names_keep_to_one_frame_each(base, tmp_path):
    """A ';' in a code name would split its frame: written as ':'."""
    odd = [("f;g", "/a/b;c.py", 3), ("h", "/a/x.py", 4)]
    rep = with_samples(base, [(0, main_tid(base), "load", [0, 1], 1, MS,
                               MS)], frames=odd)
    lines = rep.to_folded(tmp_path / "f.txt").read_text().splitlines()
    assert f"load;h (x.py:4) {self_ns(rep, 'load')}" in lines
    other = [(0, main_tid(base), "load", [0], 1, MS, MS),
             (0, main_tid(base), "load", [1], 1, MS, MS)]
    rep = with_samples(base, other, frames=odd)
    lines = rep.to_folded(tmp_path / "g.txt").read_text().splitlines()
    assert any(line.startswith("load;f:g (b:c.py:3) ") for line in lines)


def test_a_deep_stack_is_drawn_to_a_bounded_depth(base, tmp_path):
    """A recursion 2000 frames deep: the views draw its outermost
    MAX_DEPTH frames, the deepest holding the time of those below."""
    from aquaprof.analysis.sampled_code import MAX_DEPTH
    tid = main_tid(base)
    deep = [(0, tid, "load", [0] + [3] * 2000, 1, MS, MS),
            (0, tid, "load", [0, 6], 1, MS, MS)]
    rep = with_samples(base, deep)
    lines = rep.to_folded(tmp_path / "f.txt").read_text().splitlines()
    frames = [line.rsplit(" ", 1)[0].split(";") for line in lines]
    assert max(len(f) for f in frames) == 1 + MAX_DEPTH
    assert ["load", "<module> (main.py:1)"] + [NMS] * (MAX_DEPTH - 1) \
        in frames
    svg = frames_of(rep.to_flamegraph(tmp_path / "f.svg"))
    assert max(depth_of(svg, g) for g in svg.values()) == 1 + MAX_DEPTH


# -------------------------------------------------------- flamegraph

def frames_of(path):
    return frames_in(ET.parse(path).getroot())


def frames_in(root):
    """{full path: <g>} of a flamegraph, made as its script makes them."""
    return frames_by_path(root)


def frames_of_text(text):
    return frames_in(ET.fromstring(text))


def depth_of(frames, g):
    """How many frames stand under g (0: the root)."""
    groups = list(frames.values())
    depth = 0
    while g.get("data-p") is not None:
        g = groups[int(g.get("data-p"))]
        depth += 1
    return depth


def hover_text(g):
    """A frame's tooltip: a stage's starts with its path, a code frame's
    with its name (what is under it says the rest)."""
    return g.find(f"{SVG}title").text


def test_flamegraph_draws_code_frames_on_their_stage(rep, tmp_path):
    frames = frames_of(rep.to_flamegraph(tmp_path / "f.svg"))
    own = self_ns(rep, "decode")
    code = {
        f"decode/{RUN_DECODE}": own - own // 11,
        f"decode/{RUN_DECODE}/{NMS}": own * 9 // 11 - own // 11,
        f"decode/{RUN_DECODE}/{NMS}/{IOU}": own * 9 // 11 - own * 6 // 11,
        f"decode/{RUN_DECODE}/{PARSE}": own - own * 9 // 11,
        f"decode/nms/{NMS}": self_ns(rep, "decode/nms"),
        f"load/{IDLE}": self_ns(rep, "load"),
        MAIN: MS,
    }
    assert set(frames) == {""} | {s.path for s in rep.stages} | set(code)
    for path, ns in code.items():
        g = frames[path]
        assert g.get("class") == "f c"
        assert float(g.get("data-w")) == pytest.approx(ns * 1e-9)
        name = path.rsplit("/", 1)[-1]
        assert g.get("data-n") == name
        assert hover_text(g).startswith(f"{name}: ")
        assert "sampled code" in hover_text(g)
        # its path is made from what is under it, not written out
        assert g.get("data-details") is None
        assert not any(path in v for k, v in g.attrib.items()
                       if k != "data-n")
        r, _, b = (int(v) for v in g.find(f"{SVG}rect").get("fill")[4:-1]
                   .split(","))
        assert b > r                      # cool: code
    for s in rep.stages:
        assert frames[s.path].get("class") == "f"
        r, _, b = (int(v) for v in frames[s.path].find(f"{SVG}rect")
                   .get("fill")[4:-1].split(","))
        assert r > b                      # warm: stages
    # the root holds the stages and the code sampled outside them
    total = sum(s.wall.total for s in rep.stages if s.depth == 0) + 1e-3
    assert float(frames[""].get("data-w")) == pytest.approx(total)
    # a code frame sits within its parent, one row up
    child = frames[f"decode/{RUN_DECODE}/{NMS}"].find(f"{SVG}rect")
    parent = frames[f"decode/{RUN_DECODE}"].find(f"{SVG}rect")
    assert float(parent.get("x")) - 1e-3 <= float(child.get("x"))
    assert float(child.get("x")) + float(child.get("width")) <= \
        float(parent.get("x")) + float(parent.get("width")) + 1e-3
    assert float(child.get("y")) < float(parent.get("y"))
    texts = "".join(g.find(f"{SVG}text").text or "" for g in frames.values())
    assert "run_decode (pipeline.py:20)" in texts


def test_a_differential_flamegraph_compares_code_frames_too(rep, base,
                                                            tmp_path):
    frames = frames_of(ap.diff_flamegraph(rep, rep, tmp_path / "d.svg"))
    details = hover_text(frames[f"load/{IDLE}"])
    assert "change +0 (+0.0 %)" in details       # the same code frame
    frames = frames_of(ap.diff_flamegraph(base, rep, tmp_path / "e.svg"))
    assert "not in the base report" in hover_text(frames[f"load/{IDLE}"])


def test_code_frames_are_as_wide_by_cpu_time_as_their_sampled_share(
        rep, tmp_path):
    """data-c: a stage's CPU time; its own (less its sub-stages') split
    over its stacks in proportion to their sampled CPU time, 4 : 3 : 1
    for decode's, rounded down cumulatively as wall time is."""
    frames = frames_of(rep.to_flamegraph(tmp_path / "f.svg"))
    for s in rep.stages:
        assert float(frames[s.path].get("data-c")) == pytest.approx(s.cpu)
    own = round(rep["decode"].cpu * 1e9) - round(rep["decode/nms"].cpu
                                                 * 1e9)
    assert own > 0
    cpu = {f"decode/{RUN_DECODE}": own,
           f"decode/{RUN_DECODE}/{NMS}": own * 7 // 8,
           f"decode/{RUN_DECODE}/{NMS}/{IOU}": own * 7 // 8 - own * 4 // 8,
           f"decode/{RUN_DECODE}/{PARSE}": own - own * 7 // 8,
           MAIN: 0}
    for path, ns in cpu.items():
        assert float(frames[path].get("data-c")) == pytest.approx(ns * 1e-9)


def test_threads_that_only_waited_fold_into_one_frame(base, tmp_path):
    """Two threads that opened no stage and used under 10 % of their
    sampled time on a CPU fold into "idle threads (2)", drawn as their
    CPU time; a thread without a stage that computes stays on the
    root."""
    tid = main_tid(base)
    stacks = planted(tid) + [
        (0, 7001, None, [0, 1, 6], 50, 50 * MS, 0),          # waits
        (0, 7002, None, [0, 1, 6], 40, 40 * MS, 3 * MS),     # 7.5 %
        (0, 7003, None, [0, 1, 5], 30, 30 * MS, 20 * MS)]    # computes
    rep = with_samples(base, stacks)
    assert idle_threads(rep) == {(0, 7001), (0, 7002)}
    frames = frames_of(rep.to_flamegraph(tmp_path / "f.svg"))
    idle = frames["idle threads (2)"]
    assert "idle" in idle.get("class").split()
    assert float(idle.get("data-w")) == pytest.approx(0.090)
    assert float(idle.get("data-c")) == pytest.approx(0.003)
    # what they ran is there to expand, hidden until then
    waiting = frames[f"idle threads (2)/{IDLE}"]
    assert waiting.get("display") == "none"
    assert float(waiting.get("data-w")) == pytest.approx(0.090)
    # the root: the stages, the code on the root (the main thread's
    # millisecond and the computing thread's 30), the idle threads' CPU
    total = sum(s.wall.total for s in rep.stages if s.depth == 0)
    assert float(frames[""].get("data-w")) == pytest.approx(
        total + 0.031 + 0.003)
    assert frames[""].get("data-n") == "all (4 threads)"
    assert float(frames[f"{MAIN}/{PARSE}"].get("data-w")) == \
        pytest.approx(0.030)
    # last on the root, after the work
    groups = list(frames.values())
    on_root = [g for g in groups if g.get("data-p") == "0"]
    assert on_root[-1] is idle
    assert "2 idle threads" in ET.tostring(
        ET.parse(tmp_path / "f.svg").getroot(), encoding="unicode")


def test_folded_stacks_label_the_threads_that_only_waited(base, tmp_path):
    """The threads the flamegraph folds into "idle threads (2)" stand
    under that frame in the folded stacks too, at their CPU time as the
    flamegraph draws them folded, so that flamegraph.pl or speedscope
    neither draws their waiting as the program's code nor lets it crowd
    that code out; the thread that computed outside any stage stays on
    the root at its wall time."""
    tid = main_tid(base)
    stacks = planted(tid) + [
        (0, 7001, None, [0, 1, 6], 50, 50 * MS, 0),          # waits
        (0, 7002, None, [0, 1, 6], 40, 40 * MS, 3 * MS),     # 7.5 %
        (0, 7003, None, [0, 1, 5], 30, 30 * MS, 20 * MS)]    # computes
    rep = with_samples(base, stacks)
    lines = rep.to_folded(tmp_path / "f.txt").read_text().splitlines()
    waited = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1])
              for line in lines if "idle (main.py" in line}
    assert waited == {f"idle threads (2);{IDLE}": 3 * MS,
                      f"load;{IDLE}": waited[f"load;{IDLE}"]}
    assert f"{MAIN};{PARSE} {30 * MS}" in lines


def test_narrow_code_frames_merge_into_their_parent_and_say_so(
        base, tmp_path):
    """Thirty stacks of a millionth of load's sampled time each: under
    0.1 % of the root, merged into load (its width unchanged), and a
    note says how many; min_share=0 draws them all."""
    tid = main_tid(base)
    narrow = [(f"tiny{i}", "/app/tiny.py", i) for i in range(30)]
    frames = FRAMES + narrow
    stacks = [(0, tid, "load", [0, 1, 6], 1, 10_000 * MS, 0)] + [
        (0, tid, "load", [0, 1, len(FRAMES) + i], 1, 10_000, 0)
        for i in range(30)]
    rep = with_samples(base, stacks, frames=frames)
    text = flamegraph_svg(rep)
    assert "tiny" not in text
    assert "30 code frames under 0.1 % of the root merged into the " \
        "frames under them" in text
    shown = frames_of_text(text)
    assert float(shown["load"].get("data-w")) == pytest.approx(
        rep["load"].wall.total)
    every = frames_of_text(flamegraph_svg(rep, min_share=0.0))
    assert sum("tiny" in path for path in every) == 30
    assert "merged" not in flamegraph_svg(rep, min_share=0.0)
    # a share that keeps them
    assert "tiny" in flamegraph_svg(rep, min_share=1e-9)


IMPORTS = [("_find_and_load", "<frozen importlib._bootstrap>", 1165),
           ("_call_with_frames_removed", "<frozen importlib._bootstrap>",
            233),
           ("<module>", "/app/lib.py", 1)]


def test_the_import_system_folds_into_the_line_that_imported(
        base, tmp_path):
    """main imports lib: lib's <module> stands right on main, the
    import system's frames (and their own time) go to main."""
    tid = main_tid(base)
    imp, call, lib = (len(FRAMES) + i for i in range(3))
    stacks = [(0, tid, None, [0, 1, imp, call, lib], 2, 2 * MS, 2 * MS),
              (0, tid, None, [0, 1, imp], 1, MS, MS)]
    rep = with_samples(base, stacks, frames=FRAMES + IMPORTS)
    lines = rep.to_folded(tmp_path / "f.txt").read_text().splitlines()
    assert f"{MAIN};<module> (lib.py:1) {2 * MS}" in lines
    assert f"{MAIN} {MS}" in lines
    svg = frames_of(rep.to_flamegraph(tmp_path / "f.svg"))
    assert float(svg[f"{MAIN}/<module> (lib.py:1)"].get("data-w")) == \
        pytest.approx(0.002)
    assert float(svg[MAIN].get("data-w")) == pytest.approx(0.003)
    everything = (tmp_path / "f.svg").read_text() + "".join(lines)
    assert "_find_and_load" not in everything
    assert "_call_with_frames_removed" not in everything


# ------------------------------------------------------------- trace

def expected_slices(t):
    """(name, stage path or None, start ns, end ns) of each code slice."""
    return sorted([
        (IDLE, "load", t.ls, t.ls + 2 * MS),
        (MAIN, None, t.le, t.le + 2 * MS),
        (RUN_DECODE, "decode", t.ds, t.ds + 3 * MS),
        (NMS, "decode", t.ds, t.ds + 3 * MS),
        (IOU, "decode", t.ds + 2 * MS, t.ds + 3 * MS),
        (NMS, "decode/nms", t.ns, t.ns + 2 * MS),
        (RUN_DECODE, "decode", t.ne, t.ne + 2 * MS),
        (PARSE, "decode", t.ne, t.ne + 2 * MS),
    ])


def check_nesting(events):
    """Complete events nest per track: each begins and ends within the
    one open below it (in ns: the trace writes whole ns of its us)."""
    tracks = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            start = round(e["ts"] * 1000)
            tracks[(e["pid"], e["tid"])].append(
                (start, start + round(e["dur"] * 1000)))
    for track in tracks.values():
        stack = []
        for start, end in sorted(track, key=lambda e: (e[0], -e[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            if stack:
                assert end <= stack[-1]
            stack.append(end)


def test_trace_nests_code_slices_in_their_stage(rep, tmp_path):
    trace = json.loads(rep.to_chrome_trace(tmp_path / "t.json").read_text())
    events = trace["traceEvents"]
    check_nesting(events)
    origin, t = rep.meta["start_ns"], Times(rep)
    code = [e for e in events if e.get("cat") == "code"]
    stages = [e for e in events if e.get("cat") == "stage"]

    def enclosing(e):
        """The innermost stage slice on its track around a code slice:
        its stage, which the slice no longer repeats in its args."""
        around = [s for s in stages
                  if (s["pid"], s["tid"]) == (e["pid"], e["tid"])
                  and s["ts"] <= e["ts"]
                  and e["ts"] + e["dur"] <= s["ts"] + s["dur"] + 1e-3]
        return max(around, key=lambda s: s["ts"])["args"]["path"] \
            if around else None

    got = sorted((e["name"], enclosing(e),
                  round(e["ts"] * 1000) + origin,
                  round((e["ts"] + e["dur"]) * 1000) + origin)
                 for e in code)
    assert got == expected_slices(t)
    assert all("stage" not in e["args"] for e in code)
    load = [s for s in stages if s["args"]["path"] == "load"][0]
    for e in code:
        assert (e["pid"], e["tid"]) == (load["pid"], load["tid"])
    nms = [e for e in code if e["name"] == NMS][0]
    assert nms["args"]["file"] == "/app/postproc.py"
    assert nms["args"]["line"] == 40
    assert trace["otherData"]["code_slices_left_out"] == 0


def test_trace_past_its_cap_keeps_the_longest_code_slices(rep, tmp_path):
    trace = json.loads(rep.to_chrome_trace(tmp_path / "t.json",
                                           max_events=3).read_text())
    code = [e for e in trace["traceEvents"] if e.get("cat") == "code"]
    assert len(code) == 3
    assert trace["otherData"]["code_slices_left_out"] == 5
    # the two 3 ms slices, then the first of the 2 ms ones, outermost
    assert sorted((e["name"], e["dur"]) for e in code) == [
        (IDLE, 2000.0), (NMS, 3000.0), (RUN_DECODE, 3000.0)]
    check_nesting(trace["traceEvents"])


def test_samples_past_the_timelines_cap_are_said_in_both_files(base,
                                                               tmp_path):
    # the code drawn stops where the timeline filled: each file says it
    rep = with_samples(base, planted(main_tid(base)),
                       timeline=timeline(Times(base)), timeline_dropped=7)
    trace = json.loads(rep.to_chrome_trace(tmp_path / "t.json").read_text())
    assert trace["otherData"]["code_samples_untimed"] == 7
    said = [e["name"] for e in trace["traceEvents"] if e.get("ph") == "i"]
    assert any("7 code samples past max_samples have no time" in n
               for n in said)
    doc = json.loads(rep.to_speedscope(tmp_path / "s.json").read_text())
    assert doc["aquaprof"]["code_samples_untimed"] == 7
    assert "7 code samples past max_samples" in doc["name"]
    quiet = json.loads(
        with_samples(base, planted(main_tid(base)),
                     timeline=timeline(Times(base))).to_chrome_trace(
            tmp_path / "q.json").read_text())
    assert quiet["otherData"]["code_samples_untimed"] == 0
    assert not [e for e in quiet["traceEvents"] if e.get("ph") == "i"]


def test_without_a_timeline_the_trace_has_no_code(base, tmp_path):
    rep = with_samples(base, planted(main_tid(base)))
    trace = json.loads(rep.to_chrome_trace(tmp_path / "t.json").read_text())
    assert not [e for e in trace["traceEvents"] if e.get("cat") == "code"]
    doc = json.loads(rep.to_speedscope(tmp_path / "s.json").read_text())
    opened = {e["frame"] for p in doc["profiles"] for e in p["events"]}
    assert opened <= set(range(len(rep.stage_names)))


def test_a_thread_sampled_without_spans_gets_a_track(base, tmp_path):
    t = Times(base)
    stacks = planted(main_tid(base)) + [(0, 4242424, None, [5], 1, MS, MS)]
    rep = with_samples(base, stacks, timeline=[(t.le + MS, 7)])
    trace = json.loads(rep.to_chrome_trace(tmp_path / "t.json").read_text())
    names = [e for e in trace["traceEvents"]
             if e["ph"] == "M" and e.get("tid") == 4242424]
    assert names[0]["args"]["name"] == "tid 4242424, sampled code"
    code = [e for e in trace["traceEvents"] if e.get("cat") == "code"]
    assert [(e["name"], e["tid"], e["dur"]) for e in code] == [
        (PARSE, 4242424, 1000.0)]
    doc = json.loads(rep.to_speedscope(tmp_path / "s.json").read_text())
    assert doc["profiles"][-1]["name"] == "tid 4242424, sampled code"
    assert len(doc["profiles"]) == len(rep.threads) + 1
    # in a report of several processes, each profile says whose it is
    merged = ap.merge([rep, base], ["worker 0 (pid 7)", "train (pid 8)"])
    doc = json.loads(merged.to_speedscope(tmp_path / "m.json").read_text())
    names = [p["name"] for p in doc["profiles"]]
    assert "tid 4242424, worker 0 (pid 7), sampled code" in names
    assert all(name.endswith(("(pid 7)", "(pid 8)")) for name in names
               if "sampled code" not in name), names


def test_a_thread_that_only_waited_is_titled_idle(base, tmp_path):
    """A thread sampled without spans that waited (no CPU time), the one
    the flamegraph folds into "idle threads (1)", is titled so in the
    trace and speedscope; the one that computed is not."""
    t = Times(base)
    stacks = planted(main_tid(base)) + [
        (0, 4242424, None, [6], 1, MS, 0),
        (0, 4242425, None, [5], 1, MS, MS)]
    rep = with_samples(base, stacks,
                       timeline=[(t.le + MS, 7), (t.le + MS, 8)])
    trace = json.loads(rep.to_chrome_trace(tmp_path / "t.json").read_text())
    titles = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
              if e["ph"] == "M" and e.get("tid") in (4242424, 4242425)}
    assert titles == {4242424: "tid 4242424, sampled code, idle",
                      4242425: "tid 4242425, sampled code"}
    doc = json.loads(rep.to_speedscope(tmp_path / "s.json").read_text())
    assert [p["name"] for p in doc["profiles"][-2:]] == [
        "tid 4242424, sampled code, idle", "tid 4242425, sampled code"]


# -------------------------------------------------------- speedscope

def test_speedscope_opens_code_frames_inside_their_stage(rep, tmp_path):
    doc = json.loads(rep.to_speedscope(tmp_path / "s.json").read_text())
    names = rep.stage_names
    frames = doc["shared"]["frames"]
    assert [f["name"] for f in frames[:len(names)]] == names
    code = frames[len(names):]
    assert code[3] == {"name": NMS, "file": "/app/postproc.py", "line": 40}
    index = {f["name"]: i for i, f in enumerate(frames)}
    t, start = Times(rep), rep.meta["start_ns"]

    def ev(kind, name, at):
        return {"type": kind, "frame": index[name], "at": at - start}

    assert doc["profiles"][0]["events"] == [
        ev("O", "load", t.ls), ev("O", IDLE, t.ls),
        ev("C", IDLE, t.ls + 2 * MS), ev("C", "load", t.le),
        ev("O", MAIN, t.le), ev("C", MAIN, t.le + 2 * MS),
        ev("O", "decode", t.ds), ev("O", RUN_DECODE, t.ds),
        ev("O", NMS, t.ds), ev("O", IOU, t.ds + 2 * MS),
        ev("C", IOU, t.ds + 3 * MS), ev("C", NMS, t.ds + 3 * MS),
        ev("C", RUN_DECODE, t.ds + 3 * MS),
        ev("O", "decode/nms", t.ns), ev("O", NMS, t.ns),
        ev("C", NMS, t.ns + 2 * MS), ev("C", "decode/nms", t.ne),
        ev("O", RUN_DECODE, t.ne), ev("O", PARSE, t.ne),
        ev("C", PARSE, t.ne + 2 * MS), ev("C", RUN_DECODE, t.ne + 2 * MS),
        ev("C", "decode", t.de),
    ]


def test_speedscope_keeps_the_longest_code_slices(rep, tmp_path,
                                                  monkeypatch):
    from aquaprof.views import speedscope
    monkeypatch.setattr(speedscope, "MAX_SLICES", 3)
    doc = json.loads(rep.to_speedscope(tmp_path / "s.json").read_text())
    first = len(rep.stage_names)
    names = [doc["shared"]["frames"][e["frame"]]["name"]
             for e in doc["profiles"][0]["events"]
             if e["type"] == "O" and e["frame"] >= first]
    # the two 3 ms slices, then the first of the 2 ms ones, outermost
    assert sorted(names) == [IDLE, NMS, RUN_DECODE]


def test_code_slices_go_on_their_own_thread(tmp_path):
    from sampled_reports import other_thread_report
    base = other_thread_report()
    worker = [t for t in base.threads if t["native_id"] != main_tid(base)]
    assert len(worker) == 1
    tid = worker[0]["native_id"]
    start, end = span_of(base, "worker")
    rep = with_samples(base, [(0, tid, "worker", [5], 2, 2 * MS, 0)],
                       timeline=[(start + MS, 0), (start + 2 * MS, 0)])
    trace = json.loads(rep.to_chrome_trace(tmp_path / "t.json").read_text())
    check_nesting(trace["traceEvents"])
    code = [e for e in trace["traceEvents"] if e.get("cat") == "code"]
    assert [(e["name"], e["tid"], e["dur"]) for e in code] == [
        (PARSE, tid, 2000.0)]
    doc = json.loads(rep.to_speedscope(tmp_path / "s.json").read_text())
    index = worker[0]["index"]
    opened = [doc["shared"]["frames"][e["frame"]]["name"]
              for p in doc["profiles"] for e in p["events"]
              if e["type"] == "O"]
    assert PARSE in [doc["shared"]["frames"][e["frame"]]["name"]
                     for e in doc["profiles"][index]["events"]]
    assert opened.count(PARSE) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="the GIL's waits are read from Linux's /proc")
def test_threads_computing_python_on_one_gil_are_not_idle_in_a_real_run():
    """Four threads computing Python, sampled: each holds the GIL a
    fraction of the time and waits for it the rest, outside any stage;
    the sampler must see those waits as the GIL's, or the flamegraph
    would fold their work away as idle."""
    def spin(seconds, tids):
        tids.append(threading.get_native_id())
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            sum(range(200))

    tids = []
    with ap.Profiler(sample=0.001) as prof:
        threads = [threading.Thread(target=spin, args=(0.3, tids))
                   for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    rep = prof.report()
    idle = {tid for _, tid in idle_threads(rep)}
    sampled = {tid for _, tid, *_rest in rep.samples["stacks"]}
    assert len(tids) == 4 and set(tids) <= sampled
    assert not idle & set(tids), idle
    assert rep.samples["gil_ns"] > 0


def test_a_thread_waiting_for_the_gil_or_a_cpu_is_not_idle(base):
    """A pool's threads computing Python on one GIL spend most of their
    time waiting for it, and little on a CPU: they wanted to run, and the
    flamegraph must not fold their work away with the idle threads.
    The thread that waited on a queue is idle."""
    waits = {4242424: (0, 0, 0),                # a queue's get
             4242425: (0, 30 * MS, 0),          # the GIL
             4242426: (25 * MS, 0, 0)}          # a CPU
    stacks = [(*s, 0, 0, 0) for s in planted(main_tid(base))] + [
        (0, tid, None, [6], 40, 40 * MS, 2 * MS, *wait)
        for tid, wait in waits.items()]
    rep = with_samples(base, stacks)
    idle = {tid for _, tid in idle_threads(rep)}
    assert idle & set(waits) == {4242424}
