"""The HTML page (Report.to_html) in a real browser (tests/support/browser.py):
every section drawn with no console error and no request leaving the
file, and its flamegraph as interactive as everywhere else."""
import pytest

from browser import browser, browser_page, frame  # noqa: F401
from page_reports import SECTIONS, bare_report, full_report, gpu_report


@pytest.fixture(scope="module")
def rep():
    return full_report()


def open_page(tab, report, path):
    """Opens the report's page, failing on any request that is not the
    file itself."""
    requests = []
    tab.on("request", lambda r: requests.append(r.url))
    tab.goto(report.to_html(path).as_uri())
    tab.wait_for_load_state("load")
    assert requests == [path.as_uri()]


def shown(tab, selector):
    """How many elements match and are drawn with a size."""
    found = tab.locator(selector)
    return sum(1 for i in range(found.count())
               if (found.nth(i).bounding_box() or {}).get("width", 0) > 0)


def test_every_section_renders(rep, browser_page, tmp_path):
    tab = browser_page
    open_page(tab, rep, tmp_path / "p.html")
    headings = tab.locator("section h2").all_text_contents()
    assert len(headings) == len(SECTIONS)
    for name in SECTIONS:
        assert tab.locator(f"section#{name}").is_visible()
    assert shown(tab, "#stages table tr") == len(rep.stages) + 1
    assert shown(tab, "#flamegraph g.f") >= len(rep.stages) + 1
    bars = tab.locator("#timeline svg.timeline rect:has(title)")
    assert bars.count() == len(rep.spans())
    assert shown(tab, "#distributions svg.chart") == min(
        5, len(rep.stages))
    assert shown(tab, "#memory polyline") == 1
    assert tab.locator("#gpu .absent").is_visible()
    assert "Diagnosis of the top stages" in tab.locator(
        "#diagnosis pre").text_content()
    # drawn inside the page's width: nothing runs off to the right
    width = tab.evaluate("document.documentElement.clientWidth")
    for svg in ("#flamegraph svg.frames", "#timeline svg",
                "#distributions svg >> nth=0"):
        box = tab.locator(svg).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1


def test_the_page_flamegraph_zooms_and_searches(rep, browser_page,
                                                 tmp_path):
    tab = browser_page
    open_page(tab, rep, tmp_path / "p.html")
    frame(tab, "train").hover()
    assert tab.locator(".aqp-flame .details").text_content().startswith(
        "train: ")
    frame(tab, "train").click()
    assert not frame(tab, "load").is_visible()
    tab.locator(".aqp-flame .reset").click()
    assert frame(tab, "load").is_visible()
    tab.locator(".aqp-flame .term").fill("(")
    assert tab.locator(".aqp-flame .matched").text_content() == \
        "invalid pattern"


def test_a_timeline_bar_names_its_stage(rep, browser_page, tmp_path):
    tab = browser_page
    open_page(tab, rep, tmp_path / "p.html")
    titles = tab.locator("#timeline rect > title").all_text_contents()
    assert {t.split(":")[0] for t in titles} == {
        rep.stage_names[s] for s in rep.spans()["stage"]}


def test_a_bare_report_says_what_it_lacks(browser_page, tmp_path):
    tab = browser_page
    open_page(tab, bare_report(), tmp_path / "b.html")
    lines = tab.locator("section .absent").all_text_contents()
    assert [line.split(" ")[0] for line in lines] == ["no", "host", "no"]
    assert tab.locator("#flamegraph g.f").count() == 3


def test_gpu_work_renders(fakes, browser_page, tmp_path):
    report = gpu_report(fakes, tmp_path)
    assert report is not None, "aquaprof was built without cupti.h"
    tab = browser_page
    open_page(tab, report, tmp_path / "g.html")
    assert not tab.locator("#gpu .absent").count()
    assert shown(tab, "#gpu svg.timeline") == 1
    titles = tab.locator("#gpu rect > title").all_text_contents()
    assert sum(t.startswith("gemm in compute") for t in titles) == 4
    assert shown(tab, "#memory polyline") >= 1
