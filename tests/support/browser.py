"""A real browser for the tests of what aquaprof draws: Debian's chromium
driven by Playwright (`make test` installs both). The browser is the
system's: Playwright's own download is never used.

Tests take the `page` fixture (import it with `browser_page`): a fresh
tab, whose console errors and uncaught exceptions fail the test.
"""
import os
import re
import shutil

import pytest


def chromium_path():
    """The chromium binary, or None."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


# per module: each test module imports the fixture, which makes it that
# module's own, and a second Playwright may not start while one runs
@pytest.fixture(scope="module")
def browser():
    path = chromium_path()
    if path is None:
        reason = ("chromium is not installed (Debian: apt-get install -y "
                  "chromium; `make test` does it where it can)")
        pytest.skip(reason)
    # pinned in requirements-dev.txt: missing, it is an error, not a skip
    from playwright.sync_api import sync_playwright
    # `make asan` preloads ASan's runtime into the tests; Playwright's
    # driver and chromium are not built for it and hang under it
    preload = os.environ.pop("LD_PRELOAD", None)
    try:
        p = sync_playwright().start()
        chrome = p.chromium.launch(executable_path=path)
    finally:
        if preload is not None:
            os.environ["LD_PRELOAD"] = preload
    yield chrome
    chrome.close()
    p.stop()


@pytest.fixture
def browser_page(browser):
    """A tab 1200 px wide; fails the test on any console error or
    uncaught exception in it."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    tab = context.new_page()
    errors = []
    tab.on("console", lambda m: errors.append(f"console: {m.text}")
           if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(f"exception: {e}"))
    yield tab
    context.close()
    assert not errors, errors


def frame(tab, path, root="body"):
    """The flamegraph frame (g.f) of stage path under root, found as a
    user finds it: its tooltip starts with its path (one under
    flamegraph.HOVER_PATH_CHARS long); "" the root. Needs no script."""
    if not path:
        return tab.locator(f"{root} g.f:not([data-p])")
    said = re.compile("^" + re.escape(f"{path}: "))
    return tab.locator(f"{root} g.f:not(.c)").filter(
        has=tab.locator("title", has_text=said))


def rect_box(tab, path, root="body"):
    """x and width of a frame's rect, in its drawing's units."""
    rect = frame(tab, path, root).locator("rect")
    return float(rect.get_attribute("x")), float(rect.get_attribute("width"))
