"""Profiler(save=PATH): the report on disk however the run ends. Each
ending is planted in a process of its own, as a script meets it: Ctrl-C
and errors out of the `with` block (where a save after it never runs),
SIGTERM from a scheduler or torchrun's agent, a run never stopped."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import aquaprof as ap
from repo_paths import ROOT

posix_only = pytest.mark.skipif(os.name != "posix",
                                reason="signals as POSIX sends them")


def script(tmp_path, body):
    path = tmp_path / "prog.py"
    path.write_text("import os, signal, sys, time\n"
                    "import aquaprof as ap\n" + textwrap.dedent(body))
    return path


def run(tmp_path, body, **kw):
    return subprocess.run(
        [sys.executable, str(script(tmp_path, body))], capture_output=True,
        text=True, timeout=120, cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)), **kw)


@pytest.mark.parametrize("raised", ["KeyboardInterrupt", "ValueError"])
def test_a_with_block_ended_by_an_exception_still_saves(tmp_path, raised):
    out = run(tmp_path, f"""
        with ap.Profiler(save="run.json"):
            with ap.stage("step"):
                pass
            raise {raised}("planted")
        """)
    # the program's own exception reaches it, as without the profiler
    assert out.returncode != 0 and f"{raised}: planted" in out.stderr
    rep = ap.Report.load(tmp_path / "run.json")
    assert rep["step"].count == 1
    assert rep.meta["ended_by"] == raised


def test_a_run_started_and_never_stopped_is_saved_at_exit(tmp_path):
    out = run(tmp_path, """
        prof = ap.Profiler(save="run.json").start()
        for _ in range(3):
            with ap.stage("step"):
                pass
        """)
    assert out.returncode == 0, out.stderr
    rep = ap.Report.load(tmp_path / "run.json")
    assert rep["step"].count == 3
    assert "ended_by" not in rep.meta


def test_a_whole_run_is_saved_at_stop_and_the_report_is_the_same(tmp_path):
    path = tmp_path / "run.json"
    with ap.Profiler(save=path) as prof:
        with ap.stage("step"):
            pass
    assert path.exists()
    assert ap.Report.load(path)["step"].count == prof.report()["step"].count
    # disarmed: the process's SIGTERM is its own again
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


SERVING = """
    with ap.Profiler(save="run.json"):
        with ap.stage("setup"):
            pass
        print("ready", flush=True)
        while True:
            with ap.stage("serve"):
                time.sleep(0.01)
    """


def wait_ready(proc):
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)


def terminated(tmp_path, body):
    """The program's exit status, stdout and stderr once a SIGTERM came
    after it said it was ready."""
    proc = subprocess.Popen(
        [sys.executable, str(script(tmp_path, body))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    wait_ready(proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


@posix_only
def test_sigterm_saves_the_run_up_to_there_and_ends_by_it(tmp_path):
    code, _, err = terminated(tmp_path, SERVING)
    # ended as unprofiled: by the signal, which a scheduler reads
    assert code == -signal.SIGTERM, err
    assert "terminated by SIGTERM: the report of the run up to there is " \
        "saved (run.json)" in err
    rep = ap.Report.load(tmp_path / "run.json")
    assert rep["serve"].count >= 5
    assert rep.meta["ended_by"] == "SIGTERM"
    assert "the run was cut short: SIGTERM" in str(rep)


@posix_only
def test_a_sigterm_handler_of_the_program_is_kept(tmp_path):
    body = textwrap.dedent("""
        def mine(*_):
            print("mine", flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, mine)
        """) + textwrap.dedent(SERVING)
    code, out, err = terminated(tmp_path, body)
    assert code == 3, err
    assert out.strip() == "mine"
    # its sys.exit left the `with` block, whose stop saved the run
    rep = ap.Report.load(tmp_path / "run.json")
    assert rep["serve"].count >= 5
    assert rep.meta["ended_by"] == "SystemExit"


def test_a_save_that_fails_is_said_never_raised(tmp_path):
    folder = tmp_path / "gone"
    folder.mkdir()
    prof = ap.Profiler(save=folder / "run.json")
    folder.rmdir()
    with pytest.warns(RuntimeWarning, match="could not be saved to .*"
                      "prof.report\\(\\) still has it"):
        with prof:
            with ap.stage("step"):
                pass
    assert prof.report()["step"].count == 1


@pytest.mark.parametrize("save, error, words", [
    (1, TypeError, "save must be a file path"),
    (b"run.json", TypeError, "save must be a file path"),
    ("", ValueError, "save must name a file"),
    (".", ValueError, "save must name a file"),
    ("no/such/folder/run.json", ValueError, "does not exist"),
])
def test_a_bad_save_is_refused_before_the_run(tmp_path, monkeypatch, save,
                                              error, words):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=words):
        ap.Profiler(save=save)


# A main thread in a C call that signals do not interrupt, the GIL let go,
# as torch.distributed's collectives wait for a rank that never comes: its
# Python handler cannot run, so a thread of aquaprof's saves in its place.
STUCK_IN_C = """
    import ctypes
    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(64)     # a default mutex, zeroed
    libc.pthread_mutex_lock(mutex)
    with ap.Profiler(save="run.json"):
        with ap.stage("setup"):
            pass
        print("ready", flush=True)
        with ap.stage("wait"):
            libc.pthread_mutex_lock(mutex)      # its own: never returns
    """


@posix_only
def test_sigterm_saves_while_the_main_thread_waits_in_c(tmp_path):
    code, _, err = terminated(tmp_path, STUCK_IN_C)
    assert code == -signal.SIGTERM, err
    assert "the report of the run up to there is saved" in err, err
    rep = ap.Report.load(tmp_path / "run.json")
    assert rep["wait"].count == 1 and rep["wait"].unclosed == 1
    assert rep["wait"].wall.total >= 0.15
    assert rep.meta["ended_by"] == "SIGTERM"


RANK = """
    import torch, torch.distributed as dist
    from datetime import timedelta
    rank, port = int(sys.argv[1]), int(sys.argv[2])
    store = dist.TCPStore("127.0.0.1", port, None, False,
                          timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2,
                            timeout=timedelta(seconds=60))
    if rank == 1:           # a rank that hangs: it never joins the step
        print("ready", flush=True)
        time.sleep(60)
    with ap.Profiler(save="rank0.json"):
        for step in range(3):
            with ap.stage("step"):
                dist.all_reduce(torch.ones(8))
    """


@posix_only
def test_a_rank_ended_while_its_collective_waits_keeps_its_profile(
        tmp_path):
    """torchrun's agent ends every rank by SIGTERM once one fails or
    hangs; the others wait in a collective, in C, and lost their
    profiles whole."""
    pytest.importorskip("torch")
    dist = pytest.importorskip("torch.distributed")
    from datetime import timedelta
    store = dist.TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=60),
                          wait_for_workers=False)
    path = script(tmp_path, RANK)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    ranks = [subprocess.Popen(
        [sys.executable, str(path), str(r), str(store.port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=tmp_path, env=env) for r in range(2)]
    try:
        wait_ready(ranks[1])
        time.sleep(1.0)       # rank 0 waits in its first all-reduce
        ranks[0].send_signal(signal.SIGTERM)
        _, err = ranks[0].communicate(timeout=60)
    finally:
        for rank in ranks:
            rank.kill()
            rank.communicate()
    assert ranks[0].returncode == -signal.SIGTERM, err
    rep = ap.Report.load(tmp_path / "rank0.json")
    assert rep["step"].unclosed == 1 and rep.meta["ended_by"] == "SIGTERM"


# The rescue thread of a run already stopped reaches its wait only while
# the next run goes on, as a busy machine may schedule it: it must not
# take that run's SIGTERM, saving the old report in its place.
LATE_RESCUER = """
    import ctypes, threading
    from aquaprof.record import saving
    real = saving._core
    gates = [threading.Event(), threading.Event()]

    class Core:
        def __getattr__(self, name):
            return getattr(real, name)

        def _sigterm_rescue(self, *args):
            gate = gates[len(entered)]
            entered.append(1)
            gate.wait()
            waits.append(1)
            return real._sigterm_rescue(*args)

    entered, waits = [], []
    saving._core = Core()
    with ap.Profiler(save="old.json"):
        pass
    while not entered:          # the old run's thread held at its gate
        time.sleep(0.01)
    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(64)
    libc.pthread_mutex_lock(mutex)
    with ap.Profiler(save="run.json"):
        gates[0].set()          # the old run's thread first
        while not waits:
            time.sleep(0.01)
        time.sleep(0.2)
        gates[1].set()
        while len(waits) < 2:
            time.sleep(0.01)
        time.sleep(0.2)
        print("ready", flush=True)
        with ap.stage("wait"):
            libc.pthread_mutex_lock(mutex)
    """


@posix_only
def test_a_rescue_thread_late_for_its_run_never_saves_the_next(tmp_path):
    code, _, err = terminated(tmp_path, LATE_RESCUER)
    assert code == -signal.SIGTERM, err
    assert "is saved (run.json)" in err, err
    rep = ap.Report.load(tmp_path / "run.json")
    assert rep["wait"].unclosed == 1 and rep.meta["ended_by"] == "SIGTERM"
