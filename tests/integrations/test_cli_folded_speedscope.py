"""`aquaprof folded` and `aquaprof speedscope` as a user runs them: the
files read back (folded stacks that add up to the stages' self times, a
speedscope file with what speedscope needs of its schema), stdout, -o a
folder, a reader that leaves early, and one-line errors for bad input."""
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import aquaprof as ap
from aquaprof.views.flamegraph import folded_lines
from profiled import busy
import test_cli_edges as cli_edges
from test_cli_edges import refused

from repo_paths import ROOT  # noqa: E402


def cli(*args, **kwargs):
    """Output as bytes: folded stacks are checked byte for byte."""
    return cli_edges.cli(*args, text=False, **kwargs)


def work():
    with ap.stage("load"):
        busy(0.002)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A report with nesting, a second thread, a name folded stacks must
    escape (';') and one that is not ASCII."""
    with ap.Profiler(sample=None) as prof:
        with ap.stage("train"):
            for _ in range(3):
                with ap.stage("step;1"):
                    busy(0.001)
            with ap.stage("évaluer"):
                busy(0.001)
        t = threading.Thread(target=work, name="loader")
        t.start()
        t.join()
    folder = tmp_path_factory.mktemp("cli_views")
    return prof.report().save(folder / "run.aquaprof.json")


# ----------------------------------------------------------- folded

def test_folded_prints_the_stacks_to_stdout(saved):
    out = cli("folded", saved)
    assert out.returncode == 0, out.stderr
    report = ap.Report.load(saved)
    text = out.stdout.decode("utf-8")
    assert text.splitlines() == folded_lines(report)
    stacks = dict(line.rsplit(" ", 1) for line in text.splitlines())
    assert set(stacks) == {"train", "train;step:1", "train;évaluer",
                           "load"}
    for stage in report.stages:
        key = stage.path.replace(";", ":").replace("/", ";")
        assert int(stacks[key]) == pytest.approx(stage.self_time * 1e9,
                                                 abs=1)


def test_folded_writes_the_same_bytes_to_a_file(saved, tmp_path):
    out = cli("folded", saved, "-o", tmp_path / "x.folded")
    assert out.returncode == 0, out.stderr
    assert str(tmp_path / "x.folded") in out.stdout.decode()
    assert (tmp_path / "x.folded").read_bytes() == \
        cli("folded", saved).stdout


def test_folded_to_stdout_is_utf8_whatever_the_locale(saved):
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONIOENCODING="ascii",
               LC_ALL="C")
    out = subprocess.run([sys.executable, "-m", "aquaprof", "folded",
                          str(saved)], capture_output=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "train;évaluer ".encode("utf-8") in out.stdout


def test_folded_into_a_reader_that_leaves_mid_write_exits_141(tmp_path):
    # stacks far past a pipe's capacity: the reader leaves while the
    # write is under way, which makes it return short rather than raise
    with ap.Profiler(sample=None) as prof:
        for i in range(10_000):
            with ap.stage(f"stage {i:05d} " + "x" * 80):
                pass
    saved = prof.report().save(tmp_path / "many.json")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen(
        [sys.executable, "-m", "aquaprof", "folded", str(saved)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    first = child.stdout.readline()
    child.stdout.close()            # `| head -1`
    err = child.stderr.read()
    assert child.wait(timeout=60) == 141, err
    assert first.startswith(b"stage ") and err == b""


# ------------------------------------------------------- speedscope

def test_speedscope_writes_a_file_speedscope_reads(saved, tmp_path):
    out = cli("speedscope", saved, "-o", tmp_path / "run.speedscope.json")
    assert out.returncode == 0, out.stderr
    assert "speedscope" in out.stdout.decode()
    data = json.loads((tmp_path / "run.speedscope.json").read_text())
    assert data["$schema"] == \
        "https://www.speedscope.app/file-format-schema.json"
    frames = data["shared"]["frames"]
    assert all(isinstance(f["name"], str) for f in frames)
    report = ap.Report.load(saved)
    assert [f["name"] for f in frames] == report.stage_names
    assert [p["name"] for p in data["profiles"]] == [
        f"{t['name']} (tid {t['native_id']})" for t in report.threads]
    opened = 0
    for profile in data["profiles"]:
        assert profile["type"] == "evented"
        assert profile["unit"] == "nanoseconds"
        assert profile["startValue"] <= profile["endValue"]
        stack, last = [], profile["startValue"]
        for e in profile["events"]:
            assert e["type"] in ("O", "C")
            assert 0 <= e["frame"] < len(frames)
            assert last <= e["at"] <= profile["endValue"]   # in order
            last = e["at"]
            if e["type"] == "O":
                stack.append(e["frame"])
                opened += 1
            else:
                assert stack.pop() == e["frame"]     # closes the innermost
        assert stack == []                           # balanced
    assert opened == len(report.spans())


# ---------------------------------------------------- both commands

@pytest.mark.parametrize("command, written", [
    ("folded", "run.folded"), ("speedscope", "run.speedscope.json")])
def test_o_naming_a_folder_writes_into_it(saved, tmp_path, command,
                                          written):
    out = cli(command, saved, "-o", tmp_path, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert [p.name for p in tmp_path.iterdir()] == [written]
    assert written in out.stdout.decode()


@pytest.mark.parametrize("command", ["folded", "speedscope"])
def test_bad_reports_are_one_line_errors(tmp_path, command):
    o = ["-o", tmp_path / "out"]
    refused(cli(command, tmp_path / "none.json", *o), "cannot read report")
    (tmp_path / "broken.json").write_text("{not json")
    refused(cli(command, tmp_path / "broken.json", *o), "not valid JSON")
    (tmp_path / "other.json").write_text('{"format": "something else"}')
    refused(cli(command, tmp_path / "other.json", *o),
            "not an aquaprof report")
    refused(cli(command, tmp_path, *o), "cannot read report")   # a folder
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["folded", "speedscope"])
def test_an_unwritable_o_is_a_one_line_error(saved, tmp_path, command):
    refused(cli(command, saved, "-o", tmp_path / "no" / "such" / "x"),
            "does not exist")


@pytest.mark.parametrize("command", ["folded", "speedscope"])
def test_help(command):
    out = cli(command, "--help")
    assert out.returncode == 0
    assert f"usage: aquaprof {command}" in out.stdout.decode()
