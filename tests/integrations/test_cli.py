"""`python -m aquaprof` as a user runs it: every command, its files read
back, exit codes, and one-line errors without tracebacks."""
import json
import os
import signal
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import aquaprof as ap
from cli_runs import AS_FROM_A_TERMINAL, cli, one_line_error
from flamegraph_frames import frames_by_path
from profiled import busy

from repo_paths import ROOT  # noqa: E402


def saved_report(path, scale):
    with ap.Profiler() as prof:
        # 10 calls of each, interleaved: enough for the compare test to be
        # decisive on decode, and for the unchanged stage to be judged by
        # its samples, not one call a busy machine may have slowed
        for _ in range(10):
            with ap.stage("decode"):
                busy(0.001 * scale)
            with ap.stage("<b>&<i>"):    # names are escaped in every view
                busy(0.001)
    return prof.report().save(path)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reports")
    return (saved_report(folder / "base.json", 1.0),
            saved_report(folder / "slow.json", 3.0))


SCRIPT = """
import sys
import aquaprof as ap
with ap.stage("work", items=3):
    total = sum(range(10000))
print("args", sys.argv[1:])
{ending}
"""


def test_run_profiles_a_script_and_writes_report_and_trace(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT.format(ending="sys.exit(3)"))
    out = cli("run", script, "--flag", "x", cwd=tmp_path)
    assert out.returncode == 3, out.stderr           # the script's code
    assert "args ['--flag', 'x']" in out.stdout
    rep = ap.Report.load(tmp_path / "job.aquaprof.json")
    assert rep["run job.py/work"].count == 1
    assert rep["run job.py/work"].items == 3
    assert str(rep) in out.stdout
    trace = json.loads((tmp_path / "job.trace.json").read_text())
    assert any(e.get("name") == "work" for e in trace["traceEvents"])


def test_run_keeps_the_profile_of_a_script_that_fails(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text(SCRIPT.format(ending="raise ValueError('boom')"))
    out = cli("run", "-o", tmp_path / "out", script)
    assert out.returncode == 1
    assert "ValueError: boom" in out.stderr          # the script's error
    rep = ap.Report.load(tmp_path / "out" / "bad.aquaprof.json")
    assert rep["run bad.py/work"].count == 1
    one_line_error(cli("run", tmp_path / "missing.py"), "no script")


def test_show_prints_the_saved_report(reports, tmp_path):
    out = cli("show", reports[0])
    assert out.returncode == 0
    assert out.stdout.strip() == str(ap.Report.load(reports[0])).strip()
    one_line_error(cli("show", tmp_path / "none.json"),
                   "cannot read report")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    one_line_error(cli("show", broken), "not valid JSON")
    other = tmp_path / "other.json"
    other.write_text('{"format": "something else"}')
    one_line_error(cli("show", other), "not an aquaprof report")


def test_compare_exits_1_on_a_regression(reports):
    base, slow = reports
    same = cli("compare", base, base)
    assert same.returncode == 0 and "no regression" in same.stdout
    worse = cli("compare", base, slow, "--threshold", "50%")
    assert worse.returncode == 1
    assert "! decode:" in worse.stdout and "1 regression(s): decode" in \
        worse.stdout
    # the unchanged "<b>&<i>": the wide threshold keeps a busy machine's
    # noise on it from reading as slower
    better = cli("compare", slow, base, "--threshold", "50%")
    assert better.returncode == 0 and "faster" in better.stdout
    loose = cli("compare", base, slow, "--threshold", "10")
    one_line_error(loose, "would be 1000 %: write 10% or 0.1")
    one_line_error(cli("compare", base, slow, "--threshold", "fast"),
                   "threshold must be like 5% or 0.05")


def test_compare_takes_repeated_runs_and_the_cpu_measure(reports, tmp_path):
    base, slow = reports
    again = saved_report(tmp_path / "again.json", 1.0)
    slow_again = saved_report(tmp_path / "slow_again.json", 3.0)
    worse = cli("compare", base, slow, "--base", again, "--new", slow_again,
                "--threshold", "50%", "--measure", "cpu")
    assert worse.returncode == 1, worse.stdout
    assert f"{base}, {again} -> {slow}, {slow_again}" in worse.stdout
    assert "cpu time per stage" in worse.stdout
    assert "2 vs 2 runs" in worse.stdout
    refused = cli("compare", base, slow, "--measure", "gpu")
    one_line_error(refused, "argument --measure: invalid choice")
    one_line_error(cli("compare", base, slow, "--alpha", "1.5"),
                   "alpha must be a number in (0, 1), got '1.5'")
    one_line_error(cli("compare", base, slow, "--base",
                       tmp_path / "none.json"), "cannot read report")
    # one run given twice would pass for two that agree exactly
    one_line_error(cli("compare", base, slow, "--new", slow),
                   "new runs 1 and 2 are the same run: give each run once")


def test_flamegraph_and_diff(reports, tmp_path):
    base, slow = reports
    out = cli("flamegraph", base, "-o", tmp_path / "f.svg")
    assert out.returncode == 0, out.stderr
    root = ET.parse(tmp_path / "f.svg").getroot()     # valid XML
    assert set(frames_by_path(root)) == {"", "decode", "<b>&<i>"}
    out = cli("flamegraph", slow, "-o", tmp_path / "d.svg", "--diff", base)
    assert out.returncode == 0, out.stderr
    assert "against" in ET.parse(tmp_path / "d.svg").getroot().find(
        "{http://www.w3.org/2000/svg}text").text
    one_line_error(cli("flamegraph", base, "-o",
                       tmp_path / "no" / "such" / "dir" / "f.svg"),
                   "aquaprof: error:")


def test_trace_and_merge(reports, tmp_path):
    base, slow = reports
    out = cli("trace", base, "-o", tmp_path / "t.json", "--max-events", "2")
    assert out.returncode == 0, out.stderr
    trace = json.loads((tmp_path / "t.json").read_text())
    assert trace["otherData"]["spans_left_out"] == 18     # 20 spans, 2 kept
    out = cli("merge", base, slow, "-o", tmp_path / "all.json", "--trace",
              tmp_path / "all.trace.json")
    assert out.returncode == 0, out.stderr
    merged = ap.Report.load(tmp_path / "all.json")
    assert merged["decode"].count == 20
    # one process made both: host/pid, told apart by file name
    where = f"{socket.gethostname()}/{os.getpid()}"
    labels = [f"{where} (base.json)", f"{where} (slow.json)"]
    assert [p["label"] for p in merged.processes] == labels
    trace = json.loads((tmp_path / "all.trace.json").read_text())
    names = {e["args"]["name"] for e in trace["traceEvents"]
             if e.get("name") == "process_name"}
    assert names == set(labels)
    one_line_error(cli("merge", base, tmp_path / "gone.json", "-o",
                       tmp_path / "x.json"), "cannot read report")


def test_help_everywhere_and_demo_passes_through():
    for command in ("run", "show", "compare", "flamegraph", "trace",
                    "html", "merge", "history", "benchmarks"):
        out = cli(command, "--help")
        assert out.returncode == 0 and "usage: aquaprof" in out.stdout
    # a missing history is an error without --add: the help says so too
    assert "--add makes it if missing" in cli("history", "--help").stdout
    out = cli("demo", "--views", "1")
    assert out.returncode == 2 and "--views must be at least 2" in out.stderr
    assert "python -m aquaprof demo" in cli("demo", "--help").stdout
    out = cli()
    assert out.returncode == 2 and "command" in out.stderr
    text = (ROOT / "pyproject.toml").read_text()
    assert 'aquaprof = "aquaprof.integrations.cli:entry"' in text


def test_history_adds_lists_and_flags_steps(reports, tmp_path):
    base, slow = reports
    db = tmp_path / "runs.db"
    out = cli("history", db, "--add", base, base, base, "--label", "ci")
    assert out.returncode == 0, out.stderr
    assert "3 run(s)" in out.stdout and "ci" in out.stdout
    out = cli("history", db, "--add", slow, "--stage", "decode")
    assert out.returncode == 0, out.stderr
    assert "4 run(s)" in out.stdout
    assert "decode, a run's total (calls, p95 and median call):" in out.stdout
    assert "(10 calls, p95 " in out.stdout
    assert "! run 4" in out.stdout and "decode stepped up: total " in \
        out.stdout and "3 vs 1 runs" in out.stdout
    bad = tmp_path / "bad.db"
    bad.write_text("not a database")
    one_line_error(cli("history", bad), "cannot open history")
    one_line_error(cli("history", db, "--add", tmp_path / "none.json"),
                   "cannot read report")


LOOP = """
import time
import aquaprof as ap
with ap.stage("setup"):
    pass
def serve():
    with ap.stage("serve"):
        print("serving", flush=True)
        while True:
            time.sleep(0.01)
serve()
"""


def test_ctrl_c_keeps_prints_and_saves_the_profile(tmp_path):
    """SIGINT to `aquaprof run`: the script's traceback as Python prints
    it (its own frames only), then the report, the files, and the end by
    SIGINT that Python's would be (a shell stops the loop running it)."""
    script = tmp_path / "server.py"
    script.write_text(LOOP)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [*AS_FROM_A_TERMINAL, "-m", "aquaprof", "run", "-o",
         tmp_path / "out", script], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        assert proc.stdout.readline().strip() == "serving"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGINT, err
    assert err.startswith("Traceback (most recent call last):\n"
                          f'  File "{script}", line 11, in <module>')
    assert err.rstrip().endswith("KeyboardInterrupt")
    assert "runpy" not in err and "aquaprof" not in err
    rep = ap.Report.load(tmp_path / "out" / "server.aquaprof.json")
    assert rep["run server.py/serve"].raised == 1
    assert rep["run server.py/setup"].count == 1
    assert "run server.py/serve" in out and "report: " in out
    assert (tmp_path / "out" / "server.trace.json").exists()


# `aquaprof run` with a second Ctrl-C planted while the report is saved
# (at the first call of Report.save) or while the trace is written
SECOND_CTRL_C = r"""
import os, signal, sys
from aquaprof.report import Report
from aquaprof.integrations.cli import main
where = sys.argv[1]
original = getattr(Report, where)
def planted(self, *args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    return original(self, *args, **kwargs)
setattr(Report, where, planted)
sys.exit(main(sys.argv[2:]))
"""


JOB = "import aquaprof as ap\nwith ap.stage('step'):\n    pass\n"
# a script whose own SIGINT handler raises, as servers' do
OWN_HANDLER = ("import signal\ndef stop(*_):\n    raise KeyboardInterrupt\n"
               "signal.signal(signal.SIGINT, stop)\n")


@pytest.mark.parametrize("where, script, html, unwritten", [
    ("save", JOB, False, "the trace was"),
    ("save", OWN_HANDLER + JOB, False, "the trace was"),
    ("to_chrome_trace", JOB, True, "the trace and the page were"),
    ("to_html", JOB, True, "the page was"),
], ids=["saving", "saving-under-the-scripts-handler", "the-trace",
        "the-page"])
def test_a_second_ctrl_c_keeps_the_report_and_says_where_it_is(
        tmp_path, where, script, html, unwritten):
    """A second Ctrl-C as the profile is written: the report is saved
    whole (a Ctrl-C while saving it waits for it, whatever handler the
    script left), and the error says where it is and what was not
    written."""
    job = tmp_path / "job.py"
    job.write_text(script)
    driver = tmp_path / "driver.py"
    driver.write_text(SECOND_CTRL_C)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    page = ["--html", "page.html"] if html else []
    done = subprocess.run(
        [*AS_FROM_A_TERMINAL, driver, where, "run", "-o", "out", *page,
         job], capture_output=True, text=True, env=env, cwd=tmp_path,
        timeout=60)
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip() == (
        f"aquaprof: error: interrupted: the report is saved "
        f"({os.path.join('out', 'job.aquaprof.json')}); {unwritten} not "
        f"written")
    rep = ap.Report.load(tmp_path / "out" / "job.aquaprof.json")
    assert rep["run job.py/step"].count == 1
    assert (tmp_path / "out" / "job.trace.json").exists() == \
        (where == "to_html")
    assert not (tmp_path / "page.html").exists()


@pytest.mark.parametrize("ending, code, stderr, cause", [
    ("sys.exit(7)", 7, "", "sys.exit(7)"),
    ("sys.exit()", 0, "", None),
    ("sys.exit('bye now')", 1, "bye now\n", "sys.exit with a message"),
    ("raise KeyboardInterrupt", -signal.SIGINT, "KeyboardInterrupt\n",
     "KeyboardInterrupt"),
    ("raise ValueError('boom')", 1, "ValueError: boom\n", "ValueError"),
])
def test_run_exits_with_the_scripts_code_and_keeps_its_profile(
        tmp_path, ending, code, stderr, cause):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT.format(ending=ending))
    out = cli("run", script, cwd=tmp_path)
    assert out.returncode == code, out.stderr
    assert out.stderr.endswith(stderr)
    if "raise" in ending:
        assert out.stderr.startswith("Traceback (most recent call last):\n"
                                     f'  File "{script}"')
        assert "cli.py" not in out.stderr and "runpy" not in out.stderr
    saved = tmp_path / "job.aquaprof.json"
    rep = ap.Report.load(saved)
    assert rep["run job.py/work"].count == 1
    # a failed run's report says so: printed, and in the file, whose
    # stage 'run job.py' counts as raised, as `aquaprof show` tells
    # (an end by SIGINT, as Python's: its status is 130 in a shell)
    status = code if code >= 0 else 128 - code
    failed = f"job.py failed ({cause}, exit status {status})"
    shown = cli("show", saved).stdout
    if cause is None:
        assert rep["run job.py"].raised == 0
        assert "failed" not in out.stdout and "raised" not in shown
        return
    assert rep["run job.py"].raised == 1
    assert f"aquaprof: {failed}: the profile below" in out.stdout
    assert f"job.aquaprof.json (of a failed run: {failed})\n" in out.stdout
    assert "! run job.py: 1 of 1 call raised" in out.stdout
    assert "! run job.py: 1 of 1 call raised" in shown


def test_history_of_a_missing_file_is_an_error_not_a_new_file(tmp_path):
    missing = tmp_path / "typo.db"
    one_line_error(cli("history", missing), "no history")
    assert not missing.exists()
    other = tmp_path / "notes.sqlite"
    import sqlite3
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE notes (body TEXT)")
    db.commit()
    db.close()
    one_line_error(cli("history", other), "not an aquaprof history")


def test_views_without_o_write_beside_where_the_command_runs(reports,
                                                             tmp_path):
    base, slow = reports
    here = tmp_path / "here"
    here.mkdir()
    stem = Path(base).name[:-len(".json")]
    for command, made in (("html", f"{stem}.html"),
                          ("trace", f"{stem}.trace.json"),
                          ("flamegraph", f"{stem}.svg"),
                          ("speedscope", f"{stem}.speedscope.json")):
        proc = cli(command, base, cwd=here)
        assert proc.returncode == 0, proc.stderr
        assert (here / made).is_file(), (command, os.listdir(here))
    proc = cli("merge", base, slow, cwd=here)
    assert proc.returncode == 0, proc.stderr
    assert (here / "merged.aquaprof.json").is_file()


def test_every_command_and_argument_says_what_it_is():
    for command in ("show", "html", "trace", "flamegraph", "speedscope",
                    "folded", "merge"):
        out = cli(command, "--help").stdout
        assert "a saved report" in out or "reports" in out, command
        assert "default" in out or command == "show", command
