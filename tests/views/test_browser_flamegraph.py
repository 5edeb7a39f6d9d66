"""The interactive flamegraph in a real browser (tests/support/browser.py), in
both of its forms: the standalone SVG file and the HTML fragment a
notebook shows. Hover shows a frame's details, a click zooms into it,
reset returns, the search box highlights the paths a regular expression
matches and names a bad one; several fragments on one page stay
independent and each is as wide as its container."""
import threading
import time

import pytest

import aquaprof as ap
from aquaprof.views.flamegraph import FRAME_HEIGHT, PAD
from aquaprof.views.threads import idle_threads
from browser import browser, browser_page, frame, rect_box  # noqa: F401
from profiled import busy


@pytest.fixture(scope="module")
def report():
    def worker():
        with ap.stage("decode"):
            busy(0.004)

    with ap.Profiler() as prof:
        with ap.stage("load"):
            busy(0.004)
            with ap.stage("parse"):
                busy(0.004)
                with ap.stage("tokens"):       # the deepest branch
                    with ap.stage("utf8"):
                        busy(0.001)
        t = threading.Thread(target=worker)
        t.start()
        with ap.stage("train"):
            for _ in range(5):
                with ap.stage("step"):
                    busy(0.002)
        t.join()
    return prof.report()


def fragment_page(*fragments, widths=None):
    """An HTML page holding the fragments, each in a div of its width."""
    widths = widths or [None] * len(fragments)
    boxes = [f'<div class="box" style="width:{w}px">{f}</div>' if w
             else f'<div class="box">{f}</div>'
             for f, w in zip(fragments, widths)]
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'></head>"
            "<body style='margin:8px'>" + "".join(boxes) + "</body></html>")


@pytest.fixture(params=["svg file", "notebook fragment"])
def shown(request, report, browser_page, tmp_path):
    """A tab showing the report's flamegraph in one form, and the CSS
    selector of the flamegraph's root."""
    if request.param == "svg file":
        path = report.flamegraph(title="one").save(tmp_path / "f.svg")
        browser_page.goto(path.as_uri())
        return browser_page, "svg"
    browser_page.set_content(fragment_page(report.flamegraph().html()))
    return browser_page, ".aqp-flame"


def drawing_width(tab, root):
    """The width of the frames' drawing, from its viewBox."""
    svg = root if root == "svg" else f"{root} svg.frames"
    return float(tab.locator(svg).first.get_attribute("viewBox")
                 .split()[2])


def test_hover_shows_the_frame_details(shown):
    tab, root = shown
    details = tab.locator(f"{root} .details")
    frame(tab, "train", root).hover()
    assert details.text_content().startswith("train: ")
    assert "% of the run" in details.text_content()
    frame(tab, "load/parse", root).hover()
    assert details.text_content().startswith("load/parse: ")


def test_click_zooms_into_a_frame_and_reset_returns(shown):
    tab, root = shown
    width = drawing_width(tab, root)
    before = rect_box(tab, "train/step", root)
    train = rect_box(tab, "train", root)[1]
    reset = tab.locator(f"{root} .reset")
    assert not reset.is_visible()
    frame(tab, "train", root).click()
    # the frame takes the whole width, its children grow with it, and
    # what is not under it is hidden
    assert rect_box(tab, "train", root) == pytest.approx(
        (PAD, width - 2 * PAD), abs=0.01)
    assert rect_box(tab, "train/step", root)[1] == pytest.approx(
        before[1] * (width - 2 * PAD) / train, rel=1e-3)
    assert (width - 2 * PAD) / train > 1.5
    assert not frame(tab, "load", root).is_visible()
    assert frame(tab, "", root).is_visible()          # the root, dimmed
    assert reset.is_visible()
    reset.click()
    assert frame(tab, "load", root).is_visible()
    assert rect_box(tab, "train/step", root) == pytest.approx(before,
                                                              abs=0.01)
    assert not reset.is_visible()


def test_search_highlights_full_paths_and_names_a_bad_pattern(shown):
    tab, root = shown
    term = tab.locator(f"{root} .term")
    matched = tab.locator(f"{root} .matched")
    term.fill("rain/st")                 # across the '/' of a full path
    hits = tab.locator(f"{root} g.f.hit")
    assert [hits.nth(i).locator("title").text_content().split(": ")[0]
            for i in range(hits.count())] == ["train/step"]
    assert matched.text_content().startswith("1 matched, ")
    term.fill("(")
    assert matched.text_content() == "invalid pattern"
    assert "bad" in term.get_attribute("class").split()
    assert hits.count() == 0
    term.fill("^(load|train)$")
    assert hits.count() == 2
    term.press("Escape")
    # (input_value() knows only HTML documents' inputs, not the SVG's)
    assert hits.count() == 0 and term.evaluate("e => e.value") == ""
    assert "bad" not in term.get_attribute("class").split()


def test_a_standalone_svg_takes_the_window_width(report, browser_page,
                                                 tmp_path):
    tab = browser_page
    tab.goto(report.flamegraph().save(tmp_path / "f.svg").as_uri())
    assert drawing_width(tab, "svg") == pytest.approx(1200, abs=1)
    tab.set_viewport_size({"width": 700, "height": 600})
    tab.wait_for_function(
        "document.documentElement.viewBox.baseVal.width < 701")
    assert rect_box(tab, "", "svg") == pytest.approx(
        (PAD, 700 - 2 * PAD), abs=1)
    # what hangs on the right edge moved with it
    box = tab.locator("svg foreignObject").bounding_box()
    assert box["x"] + box["width"] <= 700


def test_fragments_on_one_page_are_independent_and_fit_their_box(
        report, browser_page):
    tab = browser_page
    graph = report.flamegraph()
    tab.set_content(fragment_page(graph.html(), graph.html(),
                                  widths=[500, 900]))
    roots = tab.locator(".aqp-flame")
    assert roots.count() == 2
    ids = [roots.nth(i).get_attribute("id") for i in range(2)]
    assert len(set(ids)) == 2
    first, second = (f"#{i}" for i in ids)
    for root, width in ((first, 500), (second, 900)):
        box = tab.locator(f"{root} svg.frames").bounding_box()
        assert box["width"] == pytest.approx(width, abs=1)
        assert drawing_width(tab, root) == pytest.approx(width, abs=1)
        assert rect_box(tab, "", root) == pytest.approx(
            (PAD, width - 2 * PAD), abs=1)
    untouched = rect_box(tab, "train", second)
    frame(tab, "train", first).click()
    assert not frame(tab, "load", first).is_visible()
    assert frame(tab, "load", second).is_visible()
    assert rect_box(tab, "train", second) == untouched
    assert not tab.locator(f"{second} .reset").is_visible()
    tab.locator(f"{second} .term").fill("load")
    assert tab.locator(f"{second} g.f.hit").count() == 4     # and under
    assert tab.locator(f"{first} g.f.hit").count() == 0
    frame(tab, "decode", second).hover()
    assert tab.locator(f"{second} .details").text_content().startswith(
        "decode: ")
    assert tab.locator(f"{first} .details").text_content().strip() == ""
    # a container that changes width takes its flamegraph with it
    tab.evaluate("document.querySelectorAll('.box')[1].style.width = "
                 "'600px'")
    tab.wait_for_function(
        f"document.querySelector('{second} svg.frames').viewBox.baseVal"
        f".width < 601")
    assert rect_box(tab, "", second) == pytest.approx((PAD, 600 - 2 * PAD),
                                                      abs=1)
    assert drawing_width(tab, first) == pytest.approx(500, abs=1)


def test_a_fragment_zoomed_into_a_shallow_stage_leaves_no_space_above(
        report, browser_page):
    tab = browser_page
    tab.set_content(fragment_page(report.flamegraph().html()))
    svg = tab.locator(".aqp-flame svg.frames")
    full = svg.bounding_box()["height"]
    frame(tab, "train").click()        # two rows fewer than load/parse/...
    assert svg.bounding_box()["height"] == pytest.approx(
        full - 2 * FRAME_HEIGHT, abs=1)
    tab.locator(".aqp-flame .reset").click()
    assert svg.bounding_box()["height"] == pytest.approx(full, abs=1)


def test_without_scripts_a_fragment_still_draws_within_its_box(
        report, browser):
    # an untrusted notebook, or a viewer that runs no script
    context = browser.new_context(java_script_enabled=False,
                                  viewport={"width": 1200, "height": 900})
    tab = context.new_page()
    try:
        tab.set_content(fragment_page(report.flamegraph().html(),
                                      widths=[600]))
        svg = tab.locator(".aqp-flame svg.frames").bounding_box()
        assert svg["width"] == pytest.approx(600, abs=1)
        assert frame(tab, "train/step").is_visible()
        assert frame(tab, "train/step").locator("title").text_content() \
            .startswith("train/step: ")
    finally:
        context.close()


# ------------------------------------------- idle threads, wall or CPU

@pytest.fixture(scope="module")
def sampled():
    """A sampled run: a stage that sleeps (wall time, no CPU), one that
    computes as long, and three threads that wait all run without a
    stage: the idle threads."""
    stop = threading.Event()
    waiters = [threading.Thread(target=stop.wait, name=f"waiter {i}")
               for i in range(3)]
    with ap.Profiler(sample=0.001) as prof:
        for t in waiters:
            t.start()
        with ap.stage("sleep"):
            time.sleep(0.15)
        with ap.stage("compute"):
            busy(0.15)
        stop.set()
        for t in waiters:
            t.join()
    rep = prof.report()
    rep.waiters = {(0, t.native_id) for t in waiters}
    return rep


@pytest.fixture(params=["svg file", "notebook fragment"])
def shown_sampled(request, sampled, browser_page, tmp_path):
    if request.param == "svg file":
        path = sampled.flamegraph().save(tmp_path / "s.svg")
        browser_page.goto(path.as_uri())
        return browser_page, "svg"
    browser_page.set_content(fragment_page(sampled.flamegraph().html()))
    return browser_page, ".aqp-flame"


def idle_index(tab, root):
    """The index of the idle threads' frame among the frames."""
    return tab.evaluate(
        f"Array.from(document.querySelector('{root}')"
        f".querySelectorAll('g.f')).findIndex("
        f"g => g.classList.contains('idle'))")


def shown_width(tab, locator):
    """A frame's drawn width, 0 when it is not drawn."""
    if locator.evaluate("g => getComputedStyle(g).display") == "none":
        return 0.0
    return float(locator.locator("rect").get_attribute("width"))


def test_idle_threads_fold_into_one_frame_that_expands(shown_sampled,
                                                       sampled):
    tab, root = shown_sampled
    # the three waiters, and whatever else of this process only waited
    # (the browser driver's threads)
    waiting = idle_threads(sampled)
    assert sampled.waiters <= waiting
    n = len(waiting)
    idle = tab.locator(f"{root} g.f.idle")
    assert idle.get_attribute("data-n") == f"idle threads ({n})"
    above = tab.locator(f"{root} g.f[data-p='{idle_index(tab, root)}']")
    assert above.count() >= 1
    toggle = tab.locator(f"{root} .fold")
    assert toggle.text_content() == f"expand idle threads ({n})"
    # folded: the three threads' waiting left out, what they ran hidden
    folded = shown_width(tab, idle)
    sleep = rect_box(tab, "sleep", root)[1]
    assert folded < sleep / 4
    assert all(shown_width(tab, above.nth(i)) == 0
               for i in range(above.count()))
    toggle.click()
    assert toggle.text_content() == f"fold idle threads ({n})"
    # expanded: as wide as their wall time, 3x the run's or more, and
    # the stages narrower for it
    narrower = rect_box(tab, "sleep", root)[1]
    assert narrower < sleep / 2
    assert shown_width(tab, idle) > 4 * narrower
    assert shown_width(tab, above.first) > 0
    toggle.click()
    assert shown_width(tab, idle) == pytest.approx(folded, abs=0.5)
    assert shown_width(tab, above.first) == 0
    # a click on the frame itself expands it and zooms into it
    tab.evaluate(f"document.querySelector('{root} g.f.idle')"
                 f".dispatchEvent(new MouseEvent('click'))")
    width = drawing_width(tab, root)
    assert shown_width(tab, idle) == pytest.approx(width - 2 * PAD, abs=1)
    assert shown_width(tab, above.first) > 0
    assert not frame(tab, "sleep", root).is_visible()
    tab.locator(f"{root} .reset").click()
    assert frame(tab, "sleep", root).is_visible()


def test_the_cpu_switch_draws_widths_by_cpu_time(shown_sampled, sampled):
    tab, root = shown_sampled
    cpu_button = tab.locator(f"{root} .mode[data-mode='cpu']")
    wall_button = tab.locator(f"{root} .mode[data-mode='wall']")
    assert "on" in wall_button.get_attribute("class").split()
    sleep = rect_box(tab, "sleep", root)[1]
    compute = rect_box(tab, "compute", root)[1]
    # by wall time the two stages are about as wide
    assert sleep == pytest.approx(compute, rel=0.5)
    cpu_button.click()
    assert "on" in cpu_button.get_attribute("class").split()
    assert "on" not in wall_button.get_attribute("class").split()
    # by CPU time the sleep all but vanishes and the compute fills in
    assert sampled["sleep"].cpu < sampled["compute"].cpu / 5
    assert rect_box(tab, "sleep", root)[1] < sleep / 5
    assert rect_box(tab, "compute", root)[1] > compute
    frame(tab, "compute", root).hover()
    text = tab.locator(f"{root} .details").text_content()
    assert text.startswith("compute: ") and "of CPU time" in text
    tab.locator(f"{root} .term").fill("compute")
    assert "% of all the CPU time drawn" in tab.locator(
        f"{root} .matched").text_content()
    wall_button.click()
    assert rect_box(tab, "sleep", root)[1] == pytest.approx(sleep, abs=0.5)
    assert rect_box(tab, "compute", root)[1] == pytest.approx(compute,
                                                               abs=0.5)
