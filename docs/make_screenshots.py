"""The screenshots in docs/views.md, made from a fresh run of
tests/support/training_script.py (a small CNN trained with a DataLoader of two
worker processes, sampled, torch_modules on):

    .venv/bin/python docs/make_screenshots.py

docs/img/report-page.png: the HTML page of its report
(Report.to_html), whole. docs/img/notebook.png: a notebook that shows the
report, then its flamegraph twice, executed by a kernel (nbclient),
exported by nbconvert and opened in chromium, with a frame of the first
flamegraph hovered and the second zoomed into a stage, its widths by CPU
time: each answers on its own. Needs what the browser tests need
(chromium, Playwright, nbclient, nbconvert: requirements-dev.txt, `make
browser`) and torch.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbconvert import HTMLExporter
from playwright.sync_api import Locator, Page, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "img"

sys.path.insert(0, str(ROOT))
import aquaprof as ap                    # noqa: E402  (this checkout's)


def training(folder: Path) -> Path:
    """The saved report of tests/support/training_script.py."""
    report = folder / "report.json"
    subprocess.run([sys.executable, str(ROOT / "tests" / "support" /
                                        "training_script.py"), str(report)],
                   check=True, stdout=subprocess.DEVNULL)
    return report


def notebook_page(report: Path, folder: Path) -> Path:
    """The notebook, executed and exported to HTML."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in (
        f"import aquaprof as ap\nrep = ap.Report.load({str(report)!r})",
        "rep",
        "rep.flamegraph(title='a CNN trained with 2 DataLoader workers')",
        "rep.flamegraph(title='the same by CPU time, zoomed into a "
        "stage')")]
    os.environ["PYTHONPATH"] = str(ROOT)         # the kernel's aquaprof
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    body, _ = HTMLExporter().from_notebook_node(nb)
    page = folder / "notebook.html"
    page.write_text(body, encoding="utf-8")
    return page


def offline(tab: Page) -> None:
    """The export links scripts on CDNs (require.js, MathJax): answered
    empty, so that the shot needs no network."""
    tab.route("http*://**", lambda route: route.fulfill(status=200,
                                                        body=""))


def stage(graph: Locator, path: str) -> Locator:
    """A flamegraph's frame of a stage, by its tooltip: it starts with
    the stage's path."""
    said = re.compile("^" + re.escape(f"{path}: "))
    return graph.locator("g.f:not(.c)").filter(
        has=graph.page.locator("title", has_text=said))


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium is not installed (make browser)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        report = training(folder)
        page = ap.Report.load(report).to_html(
            folder / "page.html", "aquaprof: a CNN trained with 2 "
            "DataLoader workers")
        notebook = notebook_page(report, folder)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium)
            tab = browser.new_page(viewport={"width": 1280, "height": 900})
            tab.goto(page.as_uri())
            tab.screenshot(path=str(IMAGES / "report-page.png"),
                           full_page=True)
            offline(tab)
            tab.goto(notebook.as_uri())
            graphs = tab.locator(".aqp-flame")
            first, second = graphs.nth(0), graphs.nth(1)
            second.locator(".mode[data-mode='cpu']").click()
            stage(second, "epoch/step").click()
            stage(first, "epoch/step/forward").hover()
            tab.screenshot(path=str(IMAGES / "notebook.png"), full_page=True)
            browser.close()
    for name in ("report-page.png", "notebook.png"):
        print(IMAGES / name)


if __name__ == "__main__":
    main()
