"""The flamegraph in a notebook, end to end: a notebook that displays a
report and its flamegraph twice is executed by a real kernel (nbclient,
ipykernel), exported to HTML by nbconvert as a user would share it, and
opened in a real browser (tests/browser.py), where each flamegraph
answers hover and click on its own."""
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbconvert import HTMLExporter

from browser import browser, browser_page, frame, rect_box  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent

CELLS = [
    """\
import time
import aquaprof as ap
with ap.Profiler() as prof:
    with ap.stage("load"):
        time.sleep(0.01)
    with ap.stage("train"):
        for _ in range(3):
            with ap.stage("step"):
                time.sleep(0.005)
rep = prof.report()""",
    "rep",
    "rep.flamegraph()",
    "rep.flamegraph(title='again')",
]


def run_notebook(folder):
    """The notebook, executed in a fresh kernel that imports this
    checkout's aquaprof, then exported to HTML: the path of the page."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(folder)}})
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = env["PYTHONPATH"]    # the kernel's
    try:
        client.execute()
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    nbformat.write(nb, folder / "run.ipynb")
    body, _ = HTMLExporter().from_notebook_node(nb)
    page = folder / "run.html"
    page.write_text(body, encoding="utf-8")
    return nb, page


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    return run_notebook(tmp_path_factory.mktemp("notebook"))


def test_the_notebook_holds_html_outputs(notebook):
    nb, _ = notebook
    outputs = [cell.outputs for cell in nb.cells[1:]]
    for out in outputs:
        (shown,) = [o for o in out if o.output_type == "execute_result"]
        assert "text/html" in shown.data
    assert "<table>" in outputs[0][0].data["text/html"]
    ids = [o[0].data["text/html"].split('class="aqp-flame" id="')[1][:22]
           for o in outputs[1:]]
    assert ids[0] != ids[1]


def test_both_flamegraphs_work_in_the_exported_notebook(notebook,
                                                        browser_page):
    _, page = notebook
    tab = browser_page
    # the export's template links a few scripts on CDNs (require.js,
    # MathJax); tests have no network, so they come back empty
    tab.route("http*://**", lambda route: route.fulfill(status=200,
                                                        body=""))
    tab.goto(page.as_uri())
    roots = tab.locator(".aqp-flame")
    assert roots.count() == 2
    first, second = (f"#{roots.nth(i).get_attribute('id')}"
                     for i in range(2))
    assert "again" in tab.locator(f"{second} .title").text_content()
    for root in (first, second):
        # as wide as the output area it sits in
        area = tab.evaluate(
            f"(() => {{ const p = document.querySelector('{root}')"
            f".parentElement, s = getComputedStyle(p); return p.clientWidth"
            f" - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); }})"
            f"()")
        svg = tab.locator(f"{root} svg.frames").bounding_box()
        assert svg["width"] == pytest.approx(area, abs=2)
        frame(tab, "train", root).hover()
        assert tab.locator(f"{root} .details").text_content().startswith(
            "train: ")
    before = rect_box(tab, "train/step", second)
    frame(tab, "train", first).click()
    assert not frame(tab, "load", first).is_visible()
    assert frame(tab, "load", second).is_visible()
    assert rect_box(tab, "train/step", second) == before
    frame(tab, "train", second).click()
    assert not frame(tab, "load", second).is_visible()
    tab.locator(f"{first} .reset").click()
    assert frame(tab, "load", first).is_visible()
    assert not frame(tab, "load", second).is_visible()
