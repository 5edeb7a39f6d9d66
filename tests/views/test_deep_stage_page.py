"""A stage recursion thousands deep (a decorated recursive walk) makes
stage paths as long as their depth: the page's and the notebook's stage
table and the page's timeline must still grow with the rows and bars they
draw, not with depth squared (600 deep, 10 calls: was 21 MB of page);
so must the flamegraph, whose script makes the paths from each frame's
name and its parent's."""
import re
import sys

import pytest

import aquaprof as ap
from aquaprof.views.html import MAX_INDENT, report_html
from aquaprof.views.timeline import spans_svg

DEPTH = 600
CALLS = 10


@pytest.fixture(scope="module")
def deep():
    @ap.stage("visit")
    def visit(n):
        if n:
            visit(n - 1)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * DEPTH))
    try:
        with ap.Profiler() as prof:
            for _ in range(CALLS):
                visit(DEPTH - 1)
    finally:
        sys.setrecursionlimit(limit)
    rep = prof.report()
    assert len(rep.stages) == DEPTH and len(rep.spans()) == DEPTH * CALLS
    return rep


def test_the_stage_table_stops_indenting_and_says_the_depth(deep):
    text = report_html(deep)
    rows = re.findall(r'<tr><td class="stage">.*?</tr>', text)
    assert len(rows) == DEPTH
    # a row's size is bounded, however deep its stage
    assert max(map(len, rows)) < 1500
    assert len(text) < 1500 * DEPTH
    # the tree's rows indent up to MAX_INDENT levels, then say their
    # depth; the rows folded under <details> and the bottlenecks give
    # their paths cut in the middle, with their depth
    assert f">{'&nbsp;' * 2 * 3}visit<" in text
    for depth in range(MAX_INDENT + 1, DEPTH):
        assert (f">{'&nbsp;' * 2 * MAX_INDENT}[depth {depth}] visit<"
                in text or f"/visit (depth {depth})<" in text), depth
    bottlenecks = re.findall(r"<li>(.*?)</li>", text)
    assert bottlenecks and max(map(len, bottlenecks)) < 250


def test_the_timeline_tooltips_are_bounded(deep):
    svg, note = spans_svg(deep)
    titles = re.findall(r"<title>(.*?)</title>", svg)
    assert len(titles) == DEPTH * CALLS and not note
    assert max(map(len, titles)) < 250
    assert len(svg) < 400 * DEPTH * CALLS
    # a shallow bar keeps its whole path; a deep one its last stage, its
    # depth and its duration
    assert any(t.startswith("visit/visit: ") for t in titles)
    deepest = [t for t in titles if f"(depth {DEPTH - 1})" in t]
    assert len(deepest) == CALLS
    assert all(re.search(r"/visit \(depth \d+\): [\d.]+ [num]?s$", t)
               for t in deepest)


def test_the_flamegraph_grows_with_its_frames_not_their_depth(deep):
    """A stage's hover text (its <title> and data-details) began with its
    whole path: two more copies of every path, the drawing three times
    its depth squared; and a third copy, in data-path, kept it so (600
    deep: 1.5 MB, 2,500 characters a frame)."""
    from aquaprof.views.flamegraph import flamegraph_svg
    svg = flamegraph_svg(deep)
    titles = re.findall(r"<title>([^<]*)</title>", svg)
    details = re.findall(r'data-details="([^"]*)"', svg)
    assert len(details) >= DEPTH
    assert max(map(len, titles + details)) < 400
    deepest = [t for t in titles if f"(depth {DEPTH - 1})" in t]
    assert deepest and deepest[0].split(" (depth")[0].endswith("/visit")
    frames = re.findall(r'<g class="f', svg)
    assert len(frames) >= DEPTH
    assert len(svg) < 20_000 + 1_000 * len(frames)


def test_the_traces_span_paths_are_bounded(deep):
    """Each span's args held its whole path: the trace was its spans
    times its depth."""
    import json
    from aquaprof.views.trace import chrome_trace
    spans = [e for e in json.loads(chrome_trace(deep))["traceEvents"]
             if e.get("cat") == "stage"]
    assert len(spans) == DEPTH * CALLS
    paths = [e["args"]["path"] for e in spans]
    assert max(map(len, paths)) < 200
    assert f"/visit (depth {DEPTH - 1})" in max(paths, key=len) or any(
        p.endswith(f"/visit (depth {DEPTH - 1})") for p in paths)
    assert "visit" in paths            # the short ones whole
