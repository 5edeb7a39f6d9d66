"""The HTML page of a run with hundreds of stage paths: its stage table
shows the stages that took the most of the run's clock as a tree (their
ancestors too) and folds the rest under a <details>, so the flamegraph
is a screen or two down, not many; every stage is still on the page."""
import re

import pytest

import aquaprof as ap
from aquaprof.views.html import SHOWN_STAGES
from browser import browser, browser_page  # noqa: F401
from profiled import busy

GROUPS, MEMBERS = 10, 29


@pytest.fixture(scope="module")
def many():
    with ap.Profiler() as prof:
        for g in range(GROUPS):
            with ap.stage(f"group{g}"):
                for m in range(MEMBERS):
                    with ap.stage(f"member{m}"):
                        busy(0.00002 * ((g * MEMBERS + m) % 13 + 1))
    report = prof.report()
    assert len(report.stages) == GROUPS * (MEMBERS + 1)
    return report


def stage_section(path):
    text = path.read_text(encoding="utf-8")
    at = text.index('<section id="stages">')
    return text[at:text.index("</section>", at)]


def first_cells(html):
    return re.findall(r'<td class="stage">([^<]*)</td>', html)


def shown_paths(report):
    """The top stages and every ancestor of them."""
    wanted = set()
    for s in report.top(SHOWN_STAGES):
        parts = s.path.split("/")
        wanted |= {"/".join(parts[:n]) for n in range(1, len(parts) + 1)}
    return wanted


def test_the_table_shows_the_top_stages_as_a_tree(many, tmp_path):
    section = stage_section(many.to_html(tmp_path / "p.html"))
    table, folded = section.split("<details>")
    wanted = shown_paths(many)
    assert first_cells(table) == [
        "&nbsp;" * 2 * s.depth + s.name for s in many.stages
        if s.path in wanted]


def test_the_rest_is_folded_under_details_by_full_path(many, tmp_path):
    section = stage_section(many.to_html(tmp_path / "p.html"))
    _, folded = section.split("<details>")
    wanted = shown_paths(many)
    rest = [s.path for s in many.stages if s.path not in wanted]
    assert f"<summary>{len(rest):,} more stages</summary>" in folded
    assert first_cells(folded) == rest
    # every stage once: the top in the tree, the rest folded
    assert section.count("<tr>") == len(many.stages) + 2


def test_the_notebook_folds_the_same_way(many):
    text = many._repr_html_()
    assert text.count("<details>") == 1
    assert text.count("<tr>") == len(many.stages) + 2


def test_the_flamegraph_is_near_the_top_and_the_rest_opens(
        many, browser_page, tmp_path):
    tab = browser_page
    tab.goto(many.to_html(tmp_path / "p.html").as_uri())
    tab.wait_for_load_state("load")
    flamegraph = tab.locator("section#flamegraph").bounding_box()
    assert flamegraph["y"] < 2 * 900         # two screens at most
    rows = tab.locator("#stages details tr")
    assert not rows.nth(1).is_visible()
    tab.locator("#stages details summary").click()
    assert rows.nth(1).is_visible()
    assert rows.count() == len(many.stages) - len(shown_paths(many)) + 1
