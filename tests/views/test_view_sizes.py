"""The views of a real training run (tests/support/training_script.py: a small
CNN, a DataLoader with two worker processes, sampled, torch_modules on)
lead with the program's work and stay small enough to open: the threads
that only waited fold into one frame, the root counts every thread and
process, no frame of the profiler's own code shows anywhere, and every
view's size stays within a few times the report's JSON. A planted deep
stack shows the size is linear in the frames drawn."""
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import aquaprof as ap
from aquaprof.analysis.own_frames import is_own
from aquaprof.model.report import CodeFrame
from aquaprof.views.flamegraph import flamegraph_svg
from aquaprof.views.threads import idle_threads
from sampled_reports import MS, main_tid, profile_stages, with_samples

torch = pytest.importorskip("torch", reason="the training script needs "
                            "torch (requirements-dev.txt)")

from repo_paths import ROOT  # noqa: E402
SVG = "{http://www.w3.org/2000/svg}"
MB = 1 << 20
#: the bounds users asked for: a page a mail or a CI run takes, notebook
#: output a notebook keeps, no view much larger than the report itself
PAGE_MAX = 3 * MB
NOTEBOOK_MAX = 2 * MB
VIEW_OVER_JSON_MAX = 10


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The script's report, and every view of it written to a file."""
    folder = tmp_path_factory.mktemp("training")
    out = folder / "train.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "support" / "training_script.py"),
         str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rep = ap.Report.load(out)
    views = {"svg": rep.to_flamegraph(folder / "f.svg"),
             "page": rep.to_html(folder / "p.html"),
             "trace": rep.to_chrome_trace(folder / "t.json"),
             "speedscope": rep.to_speedscope(folder / "s.json"),
             "folded": rep.to_folded(folder / "f.folded")}
    return rep, out, views


def root_children(svg_path):
    """The root frame and its children, as <g> elements, in order."""
    groups = [g for g in ET.parse(svg_path).getroot().iter(f"{SVG}g")
              if "f" in (g.get("class") or "").split()]
    return groups[0], [g for g in groups if g.get("data-p") == "0"]


def name_of(g):
    return g.get("data-n")


def is_stage(g):
    return "c" not in g.get("class").split()


def test_threads_that_only_waited_fold_into_one_frame(run):
    rep, _, views = run
    root, children = root_children(views["svg"])
    idle = children[-1]
    assert "idle" in idle.get("class").split()
    folded = idle_threads(rep)
    # at least each worker's queue feeder waited all run
    workers = len(rep.processes) - 1
    assert workers >= 2 and len(folded) >= workers
    assert idle.get("data-n") == f"idle threads ({len(folded)})"
    # folded, it is drawn as its CPU time, far under the wall time the
    # threads spent waiting
    drawn = float(idle.find(f"{SVG}rect").get("width"))
    root_px = float(root.find(f"{SVG}rect").get("width"))
    assert drawn / root_px == pytest.approx(
        float(idle.get("data-c")) / float(root.get("data-w")), abs=1e-3)
    assert float(idle.get("data-c")) < 0.1 * float(idle.get("data-w"))
    # the program's work leads: the widest child is a stage or the
    # script's own code, the training stage outweighs the idle threads
    # by wall and by CPU time, and no frame of a thread that only waited
    # (a queue feeder) stands on the root
    others = children[:-1]
    widest = max(others, key=lambda g: float(g.get("data-w")))
    assert is_stage(widest) or "training_script.py" in name_of(widest)
    epoch = next(g for g in others if is_stage(g) and name_of(g) == "epoch")
    assert float(epoch.get("data-w")) > float(idle.get("data-c"))
    assert float(epoch.get("data-c")) > float(idle.get("data-c"))
    assert not any("Queue._feed" in name_of(g) or
                   "Thread._bootstrap" in name_of(g) for g in others)


def test_the_root_counts_every_thread_and_process(run):
    rep, _, views = run
    threads = {(s[0], s[1]) for s in rep.samples["stacks"]} | {
        (t.get("process", 0), t["native_id"]) for t in rep.threads}
    processes = len(rep.processes)
    assert processes == 1 + 2 * 3          # two workers an epoch
    assert len(threads) > processes
    root, _ = root_children(views["svg"])
    label = f"all ({len(threads)} threads in {processes} processes)"
    assert root.get("data-n") == label
    assert f"on {len(threads)} threads in {processes} processes" in \
        root.get("data-details")
    assert label in views["page"].read_text(encoding="utf-8")


def speedscope_shown(path):
    """The names of the frames a speedscope file's events open: what
    speedscope draws (its table of frames may list more)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    names = [f["name"] for f in doc["shared"]["frames"]]
    return {names[e["frame"]] for p in doc["profiles"] for e in p["events"]}


def own_labels(rep):
    """The labels of the profiler's own code objects the sampler saw:
    none may show (a frame of aquaprof.mvs or the demo would be the
    program's)."""
    return {CodeFrame(*f).label for f in rep.samples["frames"]
            if is_own(f[1])}


def own_code_labels():
    """'name (file.py:line)' of every function of the profiler's torch
    hooks and child capture: file names alone (modules.py, state.py)
    are other libraries' too (sympy's modules.py runs as torch imports
    it)."""
    import ast
    labels = []
    for folder in ("torch", "processes"):
        for path in (ROOT / "aquaprof" / "record" / folder).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = [node.lineno] + [d.lineno
                                             for d in node.decorator_list]
                    labels += [f"{node.name} ({path.name}:{line})"
                               for line in lines]
    assert len(labels) > 100     # the hooks and the capture were found
    return tuple(labels)


def test_no_frame_of_the_profiler_shows_in_any_view_or_hot(run):
    rep, _, views = run
    # the run went through the profiler's code (its torch hooks, its
    # DataLoader wrapper, the child watcher): there was something to hide,
    # and none of it is left in the frames every view draws from
    assert rep.samples["own_ns"] > 0
    assert not own_labels(rep)
    hidden = own_code_labels() + ("_end_with_the_parent",)
    texts = {name: path.read_text(encoding="utf-8")
             for name, path in views.items() if name != "speedscope"}
    texts["notebook"] = rep.flamegraph()._repr_html_()
    texts["speedscope"] = "\n".join(speedscope_shown(views["speedscope"]))
    # named, never diffed: a view runs to megabytes
    shown = [(name, label) for name, text in texts.items()
             for label in hidden if label in text]
    assert not shown, shown
    for stage in rep.stages:
        for h in stage.hot(1000):
            assert not is_own(h.file), (stage.path, h.label)


def test_the_import_system_folds_into_the_line_that_imported(run):
    rep, _, views = run
    text = views["svg"].read_text(encoding="utf-8")
    # the run imports torch._dynamo on its first optimizer: its modules
    # show, the import system's frames do not
    assert "&lt;module&gt;" in text
    assert "_find_and_load" not in text and "frozen importlib" not in text
    assert "_call_with_frames_removed" not in text


def test_the_page_and_notebook_output_stay_small(run):
    rep, out, views = run
    assert views["page"].stat().st_size <= PAGE_MAX
    assert len(rep._repr_html_().encode()) <= NOTEBOOK_MAX
    assert len(rep.flamegraph()._repr_html_().encode()) <= NOTEBOOK_MAX
    size = out.stat().st_size
    for name in ("svg", "page", "trace", "speedscope"):
        assert views[name].stat().st_size <= VIEW_OVER_JSON_MAX * size, name


def test_what_the_flamegraph_merges_it_says(run):
    rep, _, views = run
    text = views["svg"].read_text(encoding="utf-8")
    said = re.search(r"([\d,]+) code frames? under 0\.1 % of the root "
                     r"merged into the frames under them \(([^)]+)\)", text)
    assert said is not None
    everything = flamegraph_svg(rep, min_share=0.0)
    count = len(re.findall(r'<g class="f', everything))
    drawn = len(re.findall(r'<g class="f', text))
    assert int(said.group(1).replace(",", "")) == count - drawn > 0
    assert "merged" not in everything


# ------------------------------------------------- linear in the frames

def deep_report(depth):
    """One stack `depth` frames deep, each frame a function of its own,
    sampled under the stage load."""
    frames = [(f"f{i}", "/app/deep.py", i) for i in range(depth)]
    base = profile_stages()
    return with_samples(base, [(0, main_tid(base), "load",
                                list(range(depth)), 1, MS, MS)],
                        frames=frames)


def test_a_flamegraph_grows_linearly_with_the_depth_of_its_stacks():
    # each frame once: no path repeated down the stack
    small = len(flamegraph_svg(deep_report(100)).encode())
    large = len(flamegraph_svg(deep_report(400)).encode())
    assert large / small < 4.5          # 4x the frames; quadratic: ~16x


def test_a_stage_name_of_100000_characters_keeps_the_printed_report_short():
    """A name made from a request's data: the table, the bottleneck and
    diagnosis lines and the error for a missing stage each show it cut,
    never 100 KB a line."""
    long = "request-" + "x" * 100_000
    with ap.Profiler() as prof:
        for i in range(30):
            with ap.stage(f"{i}-{long}"):
                pass
        with ap.stage(long):
            busy = sum(range(200_000))
    rep = prof.report()
    assert busy
    lines = str(rep).splitlines()
    assert max(map(len, lines)) < 400, max(lines, key=len)[:200]
    assert any(line.startswith("  1. request-xx") for line in lines)
    with pytest.raises(KeyError) as err:
        rep["missing"]
    said = str(err.value)
    assert len(said) < 3000 and said.endswith("and 11 more\"")
