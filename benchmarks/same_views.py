"""Whether two versions of aquaprof show report files alike: every view
and analysis of each report (the text, JSON, diagnosis, notebook HTML,
kernels, stage figures, sampling, hot functions, anomalies, comparison,
stragglers, Chrome trace, folded stacks, speedscope, SVG flamegraph and
HTML page), written by one version and checked by another. A refactor
that changes no behaviour leaves every line "same".

    # reports to show: a sampled run with a thread and two fork workers,
    # two runs merged, tests/support/training_script.py's, and a run
    # through the fake CUPTI where aquaprof was built with cupti.h
    PYTHONPATH=. python benchmarks/same_views.py reports OUT
    # with the old version on PYTHONPATH
    python benchmarks/same_views.py write OUT OUT/*.json
    # with the new one
    python benchmarks/same_views.py check OUT OUT/*.json

The flamegraph's element ids are random per drawing and are read as one.
"""
import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing import get_context
from pathlib import Path

import aquaprof as ap

ROOT = Path(__file__).resolve().parent.parent

RANDOM_ID = re.compile(r"aqp-flame-[0-9a-f]{12}")


def views(path):
    """{view: its text} of the report file at path."""
    rep = ap.Report.load(path)
    out = {"str": str(rep),
           "dict": json.dumps(rep.to_dict(), sort_keys=True),
           "diagnose": rep.diagnose().summary(),
           "repr_html": rep._repr_html_(),
           "kernels": repr(rep.kernels()),
           "top": repr(rep.top(5)),
           "stages": repr([(s.path, s.compensated_total, s.compensated_self,
                            s.cuda) for s in rep.stages]),
           "sampling": repr(rep.sampling),
           "hot": repr([s.hot(3) for s in rep.stages]),
           "anomalies": repr(rep.anomalies()),
           "compare": repr(rep.compare(rep).changes),
           "stragglers": repr(rep.stragglers())}
    with tempfile.TemporaryDirectory() as tmp:
        for write, ext in ((rep.to_chrome_trace, "trace.json"),
                           (rep.to_folded, "folded"),
                           (rep.to_speedscope, "speedscope.json"),
                           (rep.to_flamegraph, "svg"),
                           (rep.to_html, "html")):
            out[ext] = Path(write(Path(tmp) / f"view.{ext}")).read_text()
    return {k: RANDOM_ID.sub("aqp-flame-ID", v) for k, v in out.items()}


def _spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _worker(i):
    with ap.stage("child_work"):
        _spin(0.02)
    return i


def write_reports(out):
    """The reports the views are compared on, written to out."""
    out.mkdir(parents=True, exist_ok=True)
    with ap.Profiler(sample=0.001) as prof:
        for i in range(20):
            with ap.stage("load", items=4):
                _spin(0.002)
            with ap.stage("compute"):
                with ap.stage("inner"):
                    _spin(0.03 if i == 15 else 0.003)
                time.sleep(0.001)
        helper = threading.Thread(target=_spin, args=(0.03,), name="helper")
        helper.start()
        helper.join()
        with get_context("fork").Pool(2) as pool:
            pool.map(_worker, range(4))
    sampled = prof.report()
    sampled.save(out / "sampled.json")
    with ap.Profiler() as other:
        with ap.stage("step"):
            _spin(0.01)
    ap.merge([sampled, other.report()], ["a", "b"]).save(out / "merged.json")
    subprocess.run([sys.executable, str(ROOT / "tests" / "support" /
                                        "training_script.py"),
                    str(out / "training.json"), "--epochs", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    from fake_gpu import build_fakes
    from page_reports import gpu_report
    fakes = out / "fakes"
    fakes.mkdir(exist_ok=True)
    if gpu_report(build_fakes(fakes), out) is None:
        print("no GPU report: this build has no cupti.h")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=("reports", "write", "check"))
    parser.add_argument("out", type=Path, help="folder of the reports and their views")
    parser.add_argument("reports", nargs="*")
    args = parser.parse_args(argv)
    if args.mode == "reports":
        write_reports(args.out)
        return 0
    found = {Path(r).name: views(r) for r in args.reports}
    saved = args.out / "views"   # not .json: OUT/*.json are reports
    if args.mode == "write":
        args.out.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps(found))
        print(f"{sum(map(len, found.values()))} views of "
              f"{len(found)} reports written to {saved}")
        return 0
    expected = json.loads(saved.read_text())
    different = 0
    for name, shown in found.items():
        for view, text in shown.items():
            same = expected[name][view] == text
            different += not same
            print(f"{name:24} {view:16} {'same' if same else 'DIFFERENT'}")
    print(f"{different} of {sum(map(len, found.values()))} views differ")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
