"""The report as one HTML page (Report.to_html, `aquaprof html`, `aquaprof
run --html`) and the flamegraph object a notebook shows, read back as
text and parsed: every section there or saying why not, nothing fetched
from the network, the figures drawn from the report's own. The browser
tests (test_browser_*.py) check what the page does."""
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

import aquaprof as ap
import crafted
from aquaprof import _core
from aquaprof.common.units import fmt_bytes, fmt_time
from aquaprof.views.threads import thread_label
from aquaprof.views import page, timeline
from aquaprof.views.flamegraph import flamegraph_svg
from cli_runs import cli, one_line_error
from flamegraph_frames import frame_paths_in_text
from page_reports import SECTIONS, STAGES, bare_report, full_report, \
    gpu_report


@pytest.fixture(scope="module")
def rep():
    return full_report()


@pytest.fixture(scope="module")
def gpu(fakes, tmp_path_factory):
    report = gpu_report(fakes, tmp_path_factory.mktemp("gpu"))
    assert report is not None, "aquaprof was built without cupti.h"
    return report


class Sections(HTMLParser):
    """The text of each <section id=...>, tags and all, and every
    attribute value that could fetch something."""

    def __init__(self, text):
        super().__init__()
        self.links, self.opened = [], []
        self.feed(text)
        starts = [(m.start(), m.group(1)) for m in
                  re.finditer(r'<section id="([^"]+)">', text)]
        self.body = {name: text[at:text.index("</section>", at)]
                     for at, name in starts}

    def handle_starttag(self, tag, attrs):
        self.opened.append(tag)
        for key, value in attrs:
            if key in ("src", "href", "action", "data") or \
                    tag == "link":
                self.links.append((tag, key, value))


def read_page(path):
    text = Path(path).read_text(encoding="utf-8")
    return text, Sections(text)


def absent(body):
    """The one-line reasons a section gives for what it lacks."""
    return re.findall(r'<p class="absent">([^<]*)</p>', body)


def test_the_page_has_every_section_in_order(rep, tmp_path):
    path = rep.to_html(tmp_path / "p.html")
    text, parsed = read_page(path)
    assert list(parsed.body) == SECTIONS
    for name in SECTIONS:
        if name != "gpu":               # the run traced none
            assert not absent(parsed.body[name]), name
    host = rep.meta["host"]
    assert "<dt>command</dt>" in text and "<dt>host</dt>" in text
    assert host["hostname"] in text
    assert f"{fmt_time(rep.wall)} wall" in text
    # the stage table, with its share bars
    for stage in rep.stages:
        assert f"{stage.name}</td>" in parsed.body["stages"]
    assert 'class="bar"' in parsed.body["stages"]
    # the flamegraph fragment, a frame per stage
    assert set(STAGES) <= set(frame_paths_in_text(
        parsed.body["flamegraph"]))
    assert parsed.body["flamegraph"].count("<script>") == 1
    # the diagnosis names the top stage
    assert rep.diagnose().findings[0].path in parsed.body["diagnosis"]


def test_the_page_fetches_nothing(rep, tmp_path):
    text, parsed = read_page(rep.to_html(tmp_path / "p.html"))
    # links inside the page only (the table of contents)
    assert all(value.startswith("#") for _, _, value in parsed.links), \
        parsed.links
    assert "link" not in parsed.opened and "iframe" not in parsed.opened
    assert "url(" not in text and "@import" not in text
    # the only address is the SVG namespace, which is a name, not a fetch
    assert set(re.findall(r"https?://[^\"' )<]+", text)) <= {
        "http://www.w3.org/2000/svg"}


def test_the_timeline_draws_every_span_on_its_thread(rep):
    svg, note = timeline.spans_svg(rep)
    spans = rep.spans()
    titles = re.findall(r"<title>([^<]*)</title>", svg)
    assert len(titles) == len(spans) and note == ""
    names = rep.stage_names
    assert sorted(t.split(":")[0] for t in titles) == sorted(
        names[s] for s in spans["stage"])
    for t in rep.threads:       # titled by the Python thread's name
        assert thread_label(t) in svg


def test_a_timeline_past_its_cap_draws_the_longest_and_says_so(
        rep, monkeypatch):
    monkeypatch.setattr(timeline, "MAX_BARS", 3)
    svg, note = timeline.spans_svg(rep)
    spans = rep.spans()
    assert len(re.findall(r"<title>", svg)) == 3
    assert note == (f"the 3 longest spans drawn, {len(spans) - 3:,} "
                    f"shorter ones left out")
    longest = sorted(spans["end_ns"] - spans["start_ns"])[-3:]
    drawn = [fmt_time(d * 1e-9) for d in longest]
    assert sorted(re.findall(r": ([^<]*)</title>", svg)) == sorted(drawn)


def test_each_top_stage_has_its_call_time_distribution(rep):
    body = page.page_html(rep)
    top = rep.top(page.TOP_STAGES)
    section = Sections(body).body["distributions"]
    charts = section.split("<h3>")[1:]
    assert [c[:c.index("</h3>")] for c in charts] == [s.path for s in top]
    for stage, chart in zip(top, charts):
        counts = [int(n.replace(",", "")) for n in
                  re.findall(r"<title>([\d,]+) calls? of", chart)]
        assert sum(counts) == stage.count
        assert f"p50 {fmt_time(stage.wall.p50)}" in chart


def test_memory_is_drawn_from_the_rss_samples(rep):
    section = Sections(page.page_html(rep)).body["memory"]
    points = re.search(r'points="([^"]*)"', section).group(1).split()
    assert len(points) == len(rep.memory_samples)
    top = max(rss for _, rss in rep.memory_samples)
    assert fmt_bytes(top) in section


def test_sections_the_report_lacks_say_so_in_one_line(tmp_path):
    _, parsed = read_page(bare_report().to_html(tmp_path / "p.html"))
    assert absent(parsed.body["timeline"]) == [
        "no timeline: no spans were recorded"]
    assert absent(parsed.body["memory"]) == [
        "host memory was not sampled in this run (Profiler(memory=True) "
        "samples it)"]
    assert absent(parsed.body["gpu"]) == [
        "no GPU activity was traced (not recorded)"]
    # what it has is still there
    assert not absent(parsed.body["flamegraph"])
    assert not absent(parsed.body["distributions"])
    empty = ap.Report.from_dict(crafted.report([]))
    _, parsed = read_page(empty.to_html(tmp_path / "e.html"))
    assert absent(parsed.body["flamegraph"]) == [
        "no stages were recorded, so there is no flamegraph"]
    assert absent(parsed.body["distributions"]) == [
        "no stage calls were recorded, so there are no call times to show"]
    assert list(parsed.body) == SECTIONS


def test_gpu_work_is_drawn_per_device_and_stream(gpu, tmp_path):
    _, parsed = read_page(gpu.to_html(tmp_path / "g.html"))
    section = parsed.body["gpu"]
    assert not absent(section)
    titles = re.findall(r"<title>([^<]*)</title>", section)
    assert sum(t.startswith("gemm in compute: ") for t in titles) == 4
    assert any(t.startswith("memcpy H2D in load: ") for t in titles)
    assert any(t.startswith("memset in compute: ") for t in titles)
    assert any(t.startswith("host waits on the device in compute: ")
               for t in titles)
    assert ": stream " in section and ": host waits</text>" in section
    # a step from 0 to the 16 MiB allocated, held to the run's end
    memory = parsed.body["memory"]
    chart = memory[memory.index("GPU memory in use"):]
    points = re.search(r'points="([^"]*)"', chart).group(1).split()
    ys = [float(p.split(",")[1]) for p in points]
    assert len(points) == 4 and ys[0] == ys[1] > ys[2] == ys[3]
    assert "16.0 MiB" in chart


def test_a_merged_report_has_a_band_per_process(rep, tmp_path):
    merged = ap.merge([rep, bare_report()], labels=["first", "second"])
    text, parsed = read_page(merged.to_html(tmp_path / "m.html"))
    assert '<dt>process</dt><dd>first</dd>' in text
    assert '<dt>process</dt><dd>second</dd>' in text
    assert '<text x="4" y="35" class="proc">first</text>' in \
        parsed.body["timeline"]


def test_many_processes_fold_past_the_first_in_header_and_memory(
        rep, tmp_path):
    """A DataLoader without persistent workers starts two processes an
    epoch: the header lists the first PROCESSES_SHOWN and folds the rest
    under "N more processes", the memory section likewise its charts,
    each still on the page; the page's top stays the run's, not a list
    of hundreds of lines."""
    count = page.PROCESSES_SHOWN + 4
    labels = [f"worker {i}" for i in range(count)]
    merged = ap.merge([rep] * count, labels=labels)
    text, parsed = read_page(merged.to_html(tmp_path / "m.html"))
    header = text[:text.index("<nav>")]
    listed = re.findall(r"<dt>process</dt><dd>([^<]*)</dd>", header)
    assert listed == labels[:page.PROCESSES_SHOWN]
    assert "<details><summary>4 more processes</summary>" \
        "worker 8<br>worker 9<br>worker 10<br>worker 11</details>" in header
    memory = parsed.body["memory"]
    charts = memory.count("<h3>host RSS of ")
    assert charts == count
    folded = memory[memory.index("<details>"):]
    assert folded.startswith("<details><summary>4 more charts</summary>")
    assert folded.count("<h3>host RSS of ") == 4


def test_the_title_and_stage_names_are_escaped(tmp_path):
    odd = ap.Report.from_dict(crafted.report(
        [crafted.stage("<b>&x", count=2)]))
    text, parsed = read_page(odd.to_html(tmp_path / "o.html",
                                         title="<i>run</i>"))
    assert "<title>&lt;i&gt;run&lt;/i&gt;</title>" in text
    assert "<b>&x" not in text and "<i>run" not in text
    assert "&lt;b&gt;&amp;x" in parsed.body["flamegraph"]


def test_a_page_to_a_missing_folder_is_refused(rep, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        rep.to_html(tmp_path / "no" / "p.html")


# ------------------------------------------------- notebook flamegraph

def test_each_render_of_a_flamegraph_has_its_own_id(rep):
    graph = rep.flamegraph()
    first, second = graph._repr_html_(), graph._repr_html_()
    ids = [re.search(r'<div class="aqp-flame" id="([^"]+)"', h).group(1)
           for h in (first, second)]
    assert ids[0] != ids[1]
    # one script each, bound to its own container, defining no global
    for h, uid in zip((first, second), ids):
        (script,) = re.findall(r"<script>(.*?)</script>", h, re.S)
        assert f'"{uid}"' in script and "onload" not in h
        assert script.lstrip().startswith("(function (root, pageKeys)")
        assert script.rstrip().endswith(", false);")
        assert 'width="100%"' in h and "viewBox=" in h


def test_a_flamegraph_saves_as_the_standalone_svg(rep, tmp_path):
    graph = rep.flamegraph(title="t")
    assert graph.save(tmp_path / "f.svg").read_text() == \
        flamegraph_svg(rep, "t")
    assert "flamegraph of" in repr(graph)


def test_a_differential_flamegraph_shows_in_a_notebook_too(rep):
    fragment = rep.flamegraph(base=bare_report())._repr_html_()
    assert 'data-verdict="new"' in fragment
    assert "slower" in fragment          # the legend's key
    assert "differential" in repr(rep.flamegraph(base=rep))


# ------------------------------------------------------------ the CLI

def test_html_command_writes_the_page(rep, tmp_path):
    saved = rep.save(tmp_path / "run.aquaprof.json")
    out = cli("html", saved, "-o", tmp_path / "p.html")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"{tmp_path / 'p.html'} ")
    _, parsed = read_page(tmp_path / "p.html")
    assert list(parsed.body) == SECTIONS
    # a folder: REPORT.html in it
    out = cli("html", saved, "-o", tmp_path)
    assert out.returncode == 0 and (tmp_path / "run.html").is_file()


def test_html_command_refuses_bad_files_in_one_line(rep, tmp_path):
    saved = rep.save(tmp_path / "run.json")
    one_line_error(cli("html", tmp_path / "none.json", "-o", tmp_path),
                   "none.json")
    junk = tmp_path / "junk.json"
    junk.write_bytes(b"\x00\x01 not json")
    one_line_error(cli("html", junk, "-o", tmp_path), "not an aquaprof "
                   "report")
    one_line_error(cli("html", saved, "-o", tmp_path / "no" / "p.html"),
                   "does not exist")


SCRIPT = """
import aquaprof as ap
with ap.stage("work"):
    sum(range(10000))
print("ran")
"""


def test_run_writes_the_page_too(tmp_path):
    (tmp_path / "job.py").write_text(SCRIPT)
    out = cli("run", "--no-sample", "--html", tmp_path / "job.html",
              "job.py", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"page:   {tmp_path / 'job.html'}" in out.stdout
    text, parsed = read_page(tmp_path / "job.html")
    assert list(parsed.body) == SECTIONS
    assert "run job.py/work" in frame_paths_in_text(text)
    out = cli("run", "--no-sample", "--html", tmp_path, "job.py",
              cwd=tmp_path)
    assert out.returncode == 0 and (tmp_path / "job.html").is_file()


def test_run_refuses_a_page_in_a_missing_folder_before_running(tmp_path):
    (tmp_path / "job.py").write_text(SCRIPT)
    out = cli("run", "--html", tmp_path / "no" / "p.html", "job.py",
              cwd=tmp_path)
    one_line_error(out, "does not exist")
    assert "ran" not in out.stdout
    assert not (tmp_path / "job.aquaprof.json").exists()


def test_a_stage_histogram_is_its_calls_by_bucket(rep):
    step = rep["train/step"]
    buckets = step.wall.buckets()
    assert sum(n for _, n in buckets) == step.count
    assert [b for b, _ in buckets] == sorted({b for b, _ in buckets})
    lower = _core.HIST_LOWER_NS
    # the fastest and slowest calls fall in the first and last buckets
    fastest, slowest = (round(t * 1e9) for t in (step.wall.min,
                                                step.wall.max))
    assert lower[buckets[0][0]] <= fastest < lower[buckets[0][0] + 1]
    assert lower[buckets[-1][0]] <= slowest < lower[buckets[-1][0] + 1]


@pytest.mark.parametrize("started", [253402300800.0, 1e300])
def test_a_start_time_past_what_datetime_holds_leaves_it_unsaid(started,
                                                                tmp_path):
    """A file's host start time is any float: one past year 9999 made the
    page raise, and the file unviewable."""
    rep = ap.Report.from_dict(crafted.report(
        [crafted.stage("a", count=1, ns=2000)],
        host={"started_at": started, "hostname": "vm"}))
    text, sections = read_page(rep.to_html(tmp_path / "page.html"))
    assert "started" not in text.split("<nav>")[0]
    assert "vm" in text
