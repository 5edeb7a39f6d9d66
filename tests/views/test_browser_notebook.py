"""aquaprof in a notebook, end to end: a notebook that displays a report
and its flamegraph twice, and one that profiles cells with %%aquaprof,
are executed by a real kernel (nbclient, ipykernel), exported to HTML by
nbconvert as a user would share it, and opened in a real browser
(tests/support/browser.py), where each flamegraph answers hover and click on its
own and the magic's report fits its output area."""
import os
import re
from pathlib import Path

import pytest

import aquaprof as ap

# `make test` installs these (requirements-dev.txt); a bare device image
# running `pytest -m gpu` has none of them and collects this file anyway
nbformat = pytest.importorskip("nbformat")
NotebookClient = pytest.importorskip("nbclient").NotebookClient
HTMLExporter = pytest.importorskip("nbconvert").HTMLExporter

from browser import browser, browser_page, frame, rect_box  # noqa: F401

from repo_paths import ROOT  # noqa: E402

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


def run_notebook(folder, cells=CELLS, allow_errors=False):
    """The notebook, executed in a fresh kernel that imports this
    checkout's aquaprof, then exported to HTML: the path of the page."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            allow_errors=allow_errors,
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


# --------------------------------------------------- the %%aquaprof magic

MAGIC_CELLS = [
    "%load_ext aquaprof",
    """\
%%aquaprof --no-sample -o value.json
import time
time.sleep(0.01)
6 * 7""",
    # a 10 ms cell whose deep traceback takes IPython far longer to format
    """\
%%aquaprof --sample 0.002 -o failed.json
import time
def deeper(n):
    return deeper(n + 1)
time.sleep(0.01)
deeper(0)""",
    "%%aquaprof --sample fast\nran = True",
    "'ran' in dir()",
]


@pytest.fixture(scope="module")
def magic_notebook(tmp_path_factory):
    folder = tmp_path_factory.mktemp("magic")
    nb, page = run_notebook(folder, MAGIC_CELLS, allow_errors=True)
    return folder, nb, page


def test_the_magic_shows_the_cells_value_then_its_report(magic_notebook):
    folder, nb, _ = magic_notebook
    value, report = nb.cells[1].outputs
    assert value.output_type == "display_data"
    assert value.data["text/plain"] == "42"
    assert report.output_type == "execute_result"
    assert "<table>" in report.data["text/html"]
    rep = ap.Report.load(folder / "value.json")
    assert 0.01 <= rep["cell"].wall.total < 0.1


def test_a_failing_cell_shows_its_report_and_one_traceback(magic_notebook):
    folder, nb, _ = magic_notebook
    outputs = nb.cells[2].outputs
    assert [o.output_type for o in outputs] == ["display_data", "error"]
    assert "<table>" in outputs[0].data["text/html"]
    assert outputs[1].ename == "RecursionError"
    # the kernel's one traceback, the cell's lines numbered as shown
    tb = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(outputs[1].traceback))
    assert tb.count("Traceback (most recent call last)") == 1
    assert "line 6" in tb and "deeper(0)" in tb
    assert "notebook.py" not in tb
    # only the cell's 10 ms were timed, not the formatting
    rep = ap.Report.load(folder / "failed.json")
    assert 0.01 <= rep["cell"].wall.total < 0.1
    assert not any(lib in h.file for h in rep["cell"].hot(5)
                   for lib in ("IPython", "stack_data", "pygments"))


def test_a_bad_line_is_one_usage_line_and_the_cell_does_not_run(
        magic_notebook):
    _, nb, _ = magic_notebook
    # as IPython shows any usage error: one line, no traceback
    (said,) = nb.cells[3].outputs
    assert said.output_type == "stream" and said.name == "stderr"
    (line,) = said.text.strip().splitlines()
    assert line.startswith("UsageError: %%aquaprof: argument --sample: "
                           "'fast' is not a sampling interval")
    assert nb.cells[4].outputs[0].data["text/plain"] == "False"


def test_the_magics_report_fits_its_output_area(magic_notebook,
                                                browser_page):
    _, _, page = magic_notebook
    tab = browser_page
    tab.route("http*://**", lambda route: route.fulfill(status=200,
                                                        body=""))
    # JupyterLab beside its file browser: an output area under 800 px
    tab.set_viewport_size({"width": 900, "height": 900})
    tab.goto(page.as_uri())
    tables = tab.locator(".aquaprof")
    assert tables.count() == 2
    for i in range(2):
        fits = tables.nth(i).evaluate(
            "el => { const area = el.closest('.jp-OutputArea-output');"
            " return [el.querySelector('table').getBoundingClientRect()"
            ".right, area.getBoundingClientRect().right]; }")
        table_right, area_right = fits
        assert table_right <= area_right + 1
