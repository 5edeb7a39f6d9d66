"""The flamegraph of a real run with forked children: each process's code
outside any stage stands under a frame naming that process, never under
the parent's code it inherited at the fork; a child blocked outside its
stages most of the time (as a DataLoader worker waits on its queue
between items) folds with the idle threads; and the note under the
legend, too long for the drawing, ends in an ellipsis at a word's end."""
import html
import multiprocessing
import re
import time

import pytest

import aquaprof as ap
from aquaprof.views.flamegraph import IDLE_LABEL, ellipsized, flamegraph_svg
from aquaprof.views.threads import idle_threads

pytestmark = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(),
    reason="needs the fork start method")

CHILDREN = 2
ITEM = 0.02
BLOCKED = 0.3


def load_then_wait():
    """A worker: loads an item in a stage, then waits outside any."""
    with ap.stage("item"):
        time.sleep(ITEM)
    time.sleep(BLOCKED)


def start_children():
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=load_then_wait) for _ in range(CHILDREN)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)


@pytest.fixture(scope="module")
def rep():
    with ap.Profiler(sample=0.001, memory=False) as prof:
        start_children()
    rep = prof.report()
    assert rep.meta["children"]["reported"] == CHILDREN
    return rep


def frames(svg):
    """[(name, parent index or None, classes)] in the order drawn."""
    out = []
    for kind, attrs in re.findall(r'<g class="(f[^"]*)"([^>]*)>', svg):
        a = {k: html.unescape(v) for k, v in
             re.findall(r'([\w-]+)="([^"]*)"', attrs)}
        name = a["data-n"]
        parent = int(a["data-p"]) if "data-p" in a else None
        out.append((name, parent, kind.split()))
    return out


def test_code_outside_stages_stands_under_its_process(rep):
    labels = {p["label"] for p in rep.processes}
    assert len(labels) == CHILDREN + 1
    drawn = frames(flamegraph_svg(rep, min_share=0))
    idle = [i for i, (_, _, kind) in enumerate(drawn) if "idle" in kind]
    for name, parent, kind in drawn:
        if "c" in kind and (parent == 0 or parent in idle) \
                and "idle" not in kind:
            assert name in labels, name
    # each child's waiting is there, under its own frame
    children = [p["label"] for p in rep.processes[1:]]
    under = {name for name, parent, _ in drawn
             if parent is not None and drawn[parent][0] in children}
    assert under and not under & {"start_children", "rep"}


def test_a_child_blocked_outside_its_stage_folds_with_the_idle_threads(rep):
    mains = {(i, p["pid"]) for i, p in enumerate(rep.processes) if i}
    assert mains <= idle_threads(rep)
    # the program's own main thread, waiting for them outside any stage,
    # keeps its wait: that is the program's time
    assert (0, rep.processes[0]["pid"]) not in idle_threads(rep)
    # its stage stays drawn, as wide as the children's calls
    drawn = frames(flamegraph_svg(rep))
    assert any(name == "item" for name, _, _ in drawn)
    idle = next(i for i, (name, _, _) in enumerate(drawn)
                if name.startswith(IDLE_LABEL))
    folded = {name for name, parent, _ in drawn if parent == idle}
    assert {p["label"] for p in rep.processes[1:]} <= folded


def test_the_note_under_the_legend_ends_in_an_ellipsis(rep):
    svg = flamegraph_svg(rep)
    match = re.search(r'<text class="legend note"[^>]*data-note="([^"]*)"'
                      r'><title>[^<]*</title>([^<]*)</text>', svg)
    assert match
    full, shown = html.unescape(match[1]), html.unescape(match[2])
    if shown != full:
        assert shown.endswith("\u2026")
        kept = shown[:-1]
        assert full.startswith(kept) and full[len(kept)] in " ;,"


def test_ellipsized_cuts_at_a_word_end():
    text = "idle threads folded into one frame; code frames merged"
    assert ellipsized(text, 100) == text
    assert ellipsized(text, 20) == "idle threads folded\u2026"
    assert len(ellipsized(text, 20)) <= 20
    assert ellipsized(text, 36) == "idle threads folded into one frame\u2026"
