"""The paths the flamegraph's script makes, in a real browser
(tests/support/browser.py). A frame writes only its name and its
parent's index, stages as code frames, so that a recursive stage
thousands deep does not make the drawing its depth squared: its search
(by stage name and by whole path), its CPU-time hover text, a code
frame's hover text, zoom, reset and keys must find each path as they
did when it was written out whole."""
import re
import sys

import pytest

import aquaprof as ap
from aquaprof.views.flamegraph import PAD
from browser import browser, browser_page, frame  # noqa: F401
from profiled import busy

DEPTH = 200                 # its paths 1,200 characters: cut in tooltips
DEEPEST = "/".join(["visit"] * DEPTH)


@pytest.fixture(scope="module")
def deep():
    """A decorated recursive walk DEPTH deep, sampled, its work at the
    bottom, beside a shallow stage."""
    @ap.stage("visit")
    def visit(n):
        if n:
            visit(n - 1)
        else:
            busy(0.05)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * DEPTH))
    try:
        with ap.Profiler(sample=0.001) as prof:
            with ap.stage("warmup"):
                busy(0.01)
            for _ in range(2):
                visit(DEPTH - 1)
    finally:
        sys.setrecursionlimit(limit)
    rep = prof.report()
    assert rep[DEEPEST].count == 2
    return rep


def fragment_page(fragment):
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'></head>"
            f"<body style='margin:8px'><div>{fragment}</div></body></html>")


@pytest.fixture(params=["svg file", "notebook fragment", "differential"])
def shown(request, deep, browser_page, tmp_path):
    """A tab showing the deep report's flamegraph in one form, and the
    CSS selector of its root."""
    if request.param == "notebook fragment":
        browser_page.set_content(fragment_page(deep.flamegraph().html()))
        return browser_page, ".aqp-flame"
    base = deep if request.param == "differential" else None
    path = deep.flamegraph(base=base).save(tmp_path / "f.svg")
    browser_page.goto(path.as_uri())
    return browser_page, "svg"


def hit_paths(tab, root):
    """What hovering each highlighted frame says, up to its first ': '
    in wall time (a stage's path, cut past 160 characters)."""
    hits = tab.locator(f"{root} g.f.hit")
    details = tab.locator(f"{root} .details")
    said = []
    for i in range(hits.count()):
        hits.nth(i).dispatch_event("mouseover")
        said.append(details.text_content().split(": ")[0])
    return said


def test_search_finds_a_deep_stage_by_its_whole_path(shown):
    tab, root = shown
    term = tab.locator(f"{root} .term")
    matched = tab.locator(f"{root} .matched")
    term.fill(f"^{DEEPEST}$")
    assert matched.text_content().startswith("1 matched, ")
    [said] = hit_paths(tab, root)
    assert said.endswith(f"/visit (depth {DEPTH - 1})")
    # one stage short of it: the one under it
    term.fill(f"^{DEEPEST[:-len('/visit')]}$")
    [said] = hit_paths(tab, root)
    assert said.endswith(f"/visit (depth {DEPTH - 2})")
    # by name: every stage of the walk, not the shallow one nor code
    term.fill("visit$")
    assert matched.text_content().startswith(f"{DEPTH} matched, ")
    term.fill("^warmup$")
    assert hit_paths(tab, root) == ["warmup"]
    # the sampled code at the bottom is under the deepest stage's path
    term.fill(f"^{DEEPEST}/busy ")
    assert matched.text_content().startswith("1 matched, ")
    term.press("Escape")
    assert tab.locator(f"{root} g.f.hit").count() == 0


def test_hover_says_a_deep_frames_whole_path_where_the_script_makes_it(
        shown):
    tab, root = shown
    details = tab.locator(f"{root} .details")
    tab.locator(f"{root} .term").fill(f"^{DEEPEST}/busy ")
    code = tab.locator(f"{root} g.f.hit")
    # a code frame's hover text: its path, made by the script, first
    code.dispatch_event("mouseover")
    assert details.text_content().startswith(
        f"{DEEPEST}/busy (")
    assert "sampled code" in details.text_content()
    # by CPU time, a stage's hover text starts with its whole path
    tab.locator(f"{root} .mode[data-mode='cpu']").click()
    tab.locator(f"{root} .term").fill(f"^{DEEPEST}$")
    tab.locator(f"{root} g.f.hit").dispatch_event("mouseover")
    assert details.text_content().startswith(f"{DEEPEST}: ")
    assert "of CPU time" in details.text_content()


def test_a_click_zooms_into_a_deep_stage_and_reset_returns(shown):
    tab, root = shown
    tab.locator(f"{root} .term").fill(f"^{DEEPEST}$")
    deepest = tab.locator(f"{root} g.f.hit")
    deepest.dispatch_event("click")
    svg = root if root == "svg" else f"{root} svg.frames"
    width = float(tab.locator(svg).get_attribute("viewBox").split()[2])
    assert float(deepest.locator("rect").get_attribute("width")) == \
        pytest.approx(width - 2 * PAD, abs=0.5)
    assert not frame(tab, "warmup", root).is_visible()
    tab.locator(f"{root} .reset").click()
    assert frame(tab, "warmup", root).is_visible()
    assert float(deepest.locator("rect").get_attribute("width")) < \
        width - 2 * PAD


def test_the_keys_reach_the_search_of_a_standalone_file(deep, browser_page,
                                                        tmp_path):
    tab = browser_page
    tab.goto(deep.flamegraph().save(tmp_path / "f.svg").as_uri())
    tab.keyboard.press("Control+f")
    tab.keyboard.type("^warmup$")
    assert tab.locator("svg .matched").text_content().startswith(
        "1 matched, ")
    tab.keyboard.press("Escape")
    assert tab.locator("svg g.f.hit").count() == 0
    assert re.fullmatch(r"\s*", tab.locator("svg .matched").text_content())
