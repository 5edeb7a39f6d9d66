"""The command line at its edges, as a new user meets them: merged
processes named from their reports, -o naming a folder, a reader that
leaves early (`| head`), a stage named by the end of its path, a script
that does not compile, and malformed thresholds; every refusal one line
on stderr."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import aquaprof as ap

from repo_paths import ROOT  # noqa: E402


def cli(*args, cwd=None, stdout=subprocess.PIPE, text=True):
    """The command line as a user runs it; output as text, or as bytes
    (text=False) for tests of what is written byte for byte."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "aquaprof", *map(str, args)],
                          stdout=stdout, stderr=subprocess.PIPE, text=text,
                          env=env, cwd=cwd or ROOT)


def refused(out, *texts):
    """Exit 2 and one line on stderr holding each of texts."""
    err = out.stderr if isinstance(out.stderr, str) else \
        out.stderr.decode()
    assert out.returncode == 2, err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    for text in texts:
        assert text in err, err


def report_of(folder, name, pid=None, host="node1", label=None):
    """A saved report whose stages end alike in two places
    (train/step/forward, eval/forward), as process `pid` on `host`."""
    with ap.Profiler(sample=None) as prof:
        with ap.stage("train"):
            with ap.stage("step"):
                with ap.stage("forward"):
                    pass
        with ap.stage("eval"):
            with ap.stage("forward"):
                pass
    data = prof.report().to_dict()
    data["pid"] = pid or data["pid"]
    if host is None:
        del data["host"]
    else:
        data["host"]["hostname"] = host
    if label is not None:
        data["label"] = label
    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return ap.Report.from_dict(data).save(path)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return report_of(tmp_path_factory.mktemp("edges"), "run.aquaprof.json")


@pytest.fixture(scope="module")
def other(tmp_path_factory):
    """A second run, for the merges."""
    return report_of(tmp_path_factory.mktemp("edges"), "two.aquaprof.json")


def labels_of(path):
    return [p["label"] for p in ap.Report.load(path).processes]


# ------------------------------------------------------------- merge

def test_merge_labels_processes_from_their_reports_not_file_names(
        tmp_path):
    one = report_of(tmp_path / "a", "myscript.aquaprof.json", pid=11)
    two = report_of(tmp_path / "b", "myscript.aquaprof.json", pid=22,
                    host="node2")
    worker = report_of(tmp_path, "w.aquaprof.json", pid=33,
                       label="worker 0")
    nameless = report_of(tmp_path, "nohost.aquaprof.json", pid=44,
                         host=None)
    out = cli("merge", one, two, worker, nameless, "-o", tmp_path / "m.json")
    assert out.returncode == 0, out.stderr
    labels = ["node1/11", "node2/22", "worker 0 node1/33",
              "nohost (pid 44)"]
    assert labels_of(tmp_path / "m.json") == labels
    assert f"node1/11: {one}" in out.stdout       # which file is which


def test_merge_tells_apart_processes_that_label_alike(tmp_path):
    one = report_of(tmp_path / "a", "x.json", pid=11)
    again = report_of(tmp_path / "b", "y.json", pid=11)
    third = report_of(tmp_path / "c", "x.json", pid=11)
    out = cli("merge", one, again, third, "-o", tmp_path / "m.json")
    assert out.returncode == 0, out.stderr
    assert labels_of(tmp_path / "m.json") == [
        "node1/11 (x.json)", "node1/11 (y.json)", "node1/11 (x.json) #2"]


def test_merge_refuses_one_run_given_twice(report, other, tmp_path):
    """A file named twice, or a copy of it (a glob that names a run again):
    merged, its stages would count twice."""
    copy = tmp_path / "copy.aquaprof.json"
    shutil.copyfile(report, copy)
    for twice in ((report, other, report), (report, copy)):
        refused(cli("merge", *twice, "-o", tmp_path / "m.json"),
                f"{report} and {twice[-1]} hold the same run")
        assert not (tmp_path / "m.json").exists()
    out = cli("merge", report, other, "-o", tmp_path / "m.json")
    assert out.returncode == 0, out.stderr


def test_merge_refuses_a_run_a_merged_report_holds_already(
        report, other, tmp_path):
    """A merged report given beside one of the runs it holds: that run's
    stages would count twice, as with one file named twice. The merged
    report's own pid, clock range and host are its first run's only, so
    the runs are told by each process's."""
    third = report_of(tmp_path / "c", "three.aquaprof.json")
    merged = tmp_path / "m1.json"
    assert cli("merge", third, report, "-o", merged).returncode == 0
    for again in (report, third):
        refused(cli("merge", merged, again, "-o", tmp_path / "m2.json"),
                f"{merged} and {again} hold the same run")
        assert not (tmp_path / "m2.json").exists()
    out = cli("merge", merged, other, "-o", tmp_path / "m2.json")
    assert out.returncode == 0, out.stderr


def test_merge_takes_labels_one_per_report(report, other, tmp_path):
    out = cli("merge", report, other, "-o", tmp_path / "m.json",
              "--labels", "rank 0, rank 1")
    assert out.returncode == 0, out.stderr
    assert labels_of(tmp_path / "m.json") == ["rank 0", "rank 1"]


@pytest.mark.parametrize("labels, text", [
    ("a", "--labels gives 1 label(s) for 2 reports"),
    ("a,b,c", "--labels gives 3 label(s) for 2 reports"),
    ("a,a", "label 'a' is given twice"),
    ("a,", "has an empty label"),
])
def test_merge_refuses_labels_that_do_not_fit(report, tmp_path, labels,
                                              text):
    refused(cli("merge", report, report, "-o", tmp_path / "m.json",
                "--labels", labels), text)
    assert not (tmp_path / "m.json").exists()


# ------------------------------------------------------ -o a folder

@pytest.mark.parametrize("command, written", [
    (["flamegraph"], ["run.svg"]),
    (["trace"], ["run.trace.json"]),
    (["html"], ["run.html"]),
    (["merge"], ["merged.aquaprof.json"]),
    (["merge", "--trace", "."], ["merged.aquaprof.json",
                                 "merged.trace.json"]),
])
def test_o_naming_a_folder_writes_into_it(report, tmp_path, command,
                                          written):
    out = cli(command[0], report, "-o", tmp_path, *command[1:],
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == written
    for name in written:
        assert name in out.stdout                 # the path it wrote
    assert ".tmp" not in out.stdout + out.stderr


def test_run_refuses_o_naming_a_file(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("print('ran')\n")
    refused(cli("run", "-o", script, script), f"-o '{script}' is a file")


# -------------------------------------------- a reader that leaves

QUIET = "import aquaprof as ap\nwith ap.stage('work'):\n    pass\n"


@pytest.mark.parametrize("command", [
    ["show", "{report}"], ["compare", "{report}", "{report}"],
    ["history", "{tmp}/h.db", "--add", "{report}"],
    ["merge", "{report}", "{other}", "-o", "{tmp}/m.json"],
    ["trace", "{report}", "-o", "{tmp}/t.json"],
    ["flamegraph", "{report}", "-o", "{tmp}/f.svg"],
    ["html", "{report}", "-o", "{tmp}/p.html"],
    ["folded", "{report}"], ["folded", "{report}", "-o", "{tmp}/f.folded"],
    ["speedscope", "{report}", "-o", "{tmp}/s.json"],
    ["run", "{tmp}/quiet.py"],
])
def test_a_closed_stdout_ends_the_command_quietly(report, other, tmp_path,
                                                  command):
    (tmp_path / "quiet.py").write_text(QUIET)
    args = [a.format(report=report, other=other, tmp=tmp_path)
            for a in command]
    read, write = os.pipe()
    os.close(read)                  # no reader: every write is EPIPE
    try:
        out = cli(*args, stdout=write)
    finally:
        os.close(write)
    # run's code is the script's, cut report or not
    assert out.returncode == (0 if command[0] == "run" else 141)
    assert out.stderr == ""
    if "-o" in command:             # the file is written all the same
        assert Path(args[-1]).stat().st_size > 0
    # the work is done all the same
    if command[0] == "merge":
        assert (tmp_path / "m.json").exists()
    if command[0] == "run":
        assert ap.Report.load(tmp_path / "quiet.aquaprof.json")[
            "run quiet.py/work"].count == 1


# ----------------------------------------------------- history --stage

@pytest.fixture(scope="module")
def history(report, tmp_path_factory):
    db = tmp_path_factory.mktemp("history") / "runs.db"
    assert cli("history", db, "--add", report).returncode == 0
    return db


def test_history_stage_by_the_end_of_its_path(history):
    out = cli("history", history, "--stage", "step/forward")
    assert out.returncode == 0, out.stderr
    assert "stage 'step/forward' is 'train/step/forward'" in out.stdout
    assert ("\ntrain/step/forward, a run's total (calls, p95 and median "
            "call):\n  run    1") in out.stdout
    out = cli("history", history, "--stage", "eval/forward")   # exact
    assert out.returncode == 0 and " is " not in out.stdout


def test_history_refuses_a_stage_it_cannot_tell(history):
    refused(cli("history", history, "--stage", "forward"),
            "stage 'forward' ends 2 paths", "'eval/forward', "
            "'train/step/forward'; give more of its path")


def test_history_names_the_closest_stages_of_a_misspelt_one(
        history, report):
    out = cli("history", history, "--stage", "stpe", "--add", report)
    refused(out, f"no stage 'stpe' in {history}; its stages, closest "
            f"first: 'train/step', ")
    assert out.stdout == ""                 # and added nothing
    assert "1 run(s)" in cli("history", history).stdout


# ---------------------------------------------------- run: SyntaxError

def test_run_prints_a_syntax_error_as_python_does(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text("x = 1\ndef f(:\n    pass\n")
    python = subprocess.run([sys.executable, script], cwd=tmp_path,
                            capture_output=True, text=True)
    out = cli("run", script, cwd=tmp_path)
    assert (out.returncode, out.stderr) == (1, python.stderr)
    assert "SyntaxError" in out.stderr and out.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.py"]


@pytest.mark.parametrize("source", [
    b"x = 1\0\n", b"# -*- coding: nosuch -*-\nx = 1\n", b"x = (\n"])
def test_run_of_a_script_that_does_not_compile_makes_no_profile(
        tmp_path, source):
    script = tmp_path / "bad.py"
    script.write_bytes(source)
    out = cli("run", script, cwd=tmp_path)
    assert out.returncode == 1 and out.stdout == ""
    # what Python's own compile() raises: a NUL byte was a ValueError
    # before 3.11
    error = "ValueError" if b"\0" in source and sys.version_info < (3, 11) \
        else "SyntaxError"
    assert out.stderr.splitlines()[-1].startswith(f"{error}: ")
    assert "Traceback" not in out.stderr and "runpy" not in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.py"]


def test_run_keeps_the_profile_of_a_syntax_error_the_script_meets(
        tmp_path):
    """A module the script imports does not compile: the script ran, so
    its traceback starts at its own frame and its profile is kept."""
    (tmp_path / "broken.py").write_text("def f(:\n")
    (tmp_path / "job.py").write_text(QUIET + "import broken\n")
    out = cli("run", tmp_path / "job.py", cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.startswith("Traceback (most recent call last):\n"
                                 f'  File "{tmp_path / "job.py"}", line 4')
    assert "SyntaxError" in out.stderr and "runpy" not in out.stderr
    assert ap.Report.load(tmp_path / "job.aquaprof.json")[
        "run job.py/work"].count == 1


# ------------------------------------------------------- thresholds

@pytest.mark.parametrize("value", ["5%", "0.05", "150%", "+2.5%", "0"])
def test_thresholds_in_the_forms_the_docs_give(report, history, value):
    assert cli("compare", report, report, "--threshold",
               value).returncode == 0
    assert cli("history", history, "--threshold", value).returncode == 0


@pytest.mark.parametrize("value, text", [
    ("-5%", "must be a finite value >= 0, got '-5%'"),
    ("-0.05", "must be a finite value >= 0, got '-0.05'"),
    ("-1e-3", "must be a finite value >= 0, got '-1e-3'"),
    ("-inf", "must be a finite value >= 0, got '-inf'"),
    ("inf%", "must be a finite value >= 0, got 'inf%'"),
    ("nan", "must be a finite value >= 0, got 'nan'"),
    ("5%%", "threshold must be like 5% or 0.05, got '5%%'"),
    ("", "threshold must be like 5% or 0.05, got ''"),
    ("5", "would be 500 %: write 5% or 0.05"),
])
def test_thresholds_that_make_no_sense_are_refused(report, history, value,
                                                   text):
    refused(cli("compare", report, report, "--threshold", value),
            "aquaprof compare: error: argument --threshold: ", text)
    refused(cli("history", history, "--threshold", value),
            "aquaprof history: error: argument --threshold: ", text)


def test_usage_errors_are_one_line(report):
    refused(cli("compare", report), "aquaprof compare: error: the "
            "following arguments are required: new (see aquaprof compare "
            "--help)")
    refused(cli("show", report, "--colour"), "unrecognized arguments")
    refused(cli("nosuch"), "invalid choice: 'nosuch'")


def test_benchmarks_refuses_what_is_not_a_pytest_benchmark_file(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "other.json").write_text('{"stages": []}')
    refused(cli("benchmarks", tmp_path / "gone.json"), "cannot read",
            "gone.json")
    refused(cli("benchmarks", tmp_path / "bad.json"), "cannot read",
            "bad.json")
    refused(cli("benchmarks", tmp_path / "other.json"),
            "is not a pytest-benchmark file")


def test_benchmarks_says_when_a_test_has_no_breakdown(tmp_path):
    saved = tmp_path / "plain.json"
    saved.write_text('{"benchmarks": [{"fullname": "t.py::test_x", '
                     '"extra_info": {}}]}')
    out = cli("benchmarks", saved)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"{saved}: t.py::test_x",
        "  no aquaprof breakdown: the test used no aquaprof fixture"]
