"""Every file aquaprof writes goes through a temporary file and a rename:
a process killed mid-write leaves the previous file whole."""
import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import aquaprof as ap

from repo_paths import ROOT  # noqa: E402

WRITER = """
import sys, itertools
import aquaprof as ap
path, kind = sys.argv[1], sys.argv[2]
reports = []
for n in (150_000, 160_000):            # two versions, told apart by size
    s = ap.stage("s")
    with ap.Profiler(max_spans=n, memory=False) as prof:
        for _ in range(n):
            with s:
                pass
    reports.append(prof.report())
print("ready", flush=True)
for rep in itertools.cycle(reports):
    if kind == "report":
        rep.save(path)
    else:
        rep.to_chrome_trace(path)
"""


def readable(kind, path):
    if kind == "report":
        return ap.Report.load(path).spans_recorded in (150_000, 160_000)
    import json
    doc = json.loads(Path(path).read_text())
    return doc["otherData"]["spans_in_report"] in (150_000, 160_000)


def test_a_kill_mid_write_leaves_the_previous_file_whole(tmp_path):
    rng = random.Random(5)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    s = ap.stage("s")
    with ap.Profiler(max_spans=150_000, memory=False) as prof:
        for _ in range(150_000):
            with s:
                pass
    first = prof.report()
    for kind in ("report", "trace"):
        path = tmp_path / f"{kind}.json"
        if kind == "report":        # the file a killed writer must keep
            first.save(path)
        else:
            first.to_chrome_trace(path)
        for _ in range(4):
            child = subprocess.Popen(
                [sys.executable, "-c", WRITER, str(path), kind], env=env,
                stdout=subprocess.PIPE, text=True)
            assert child.stdout.readline().strip() == "ready"
            time.sleep(rng.uniform(0.05, 0.6))
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdout.close()
            assert readable(kind, path)
        # what a killed writer leaves is its temporary file, never ours
        strays = [p.name for p in tmp_path.iterdir()
                  if p.name.startswith(f".{kind}.json.")]
        assert all(name.endswith(".tmp") for name in strays)


def test_written_files_get_the_usual_mode(tmp_path):
    with ap.Profiler() as prof:
        pass
    old = os.umask(0o022)
    try:
        path = prof.report().save(tmp_path / "r.json")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
