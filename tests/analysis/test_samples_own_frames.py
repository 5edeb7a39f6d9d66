"""The profiler never shows itself: its threads and its frames are taken
out of what the sampler saw, in every view and in hot(); the time of
its frames inside a program's call goes to the program's frame that
called them."""
import runpy
import threading
import time

import numpy as np

import aquaprof as ap
from aquaprof.analysis.own_frames import is_own, without_own_frames


def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_no_frame_of_the_profiler_in_a_sampled_run():
    stop = threading.Event()

    def idle_worker():
        stop.wait()

    t = threading.Thread(target=idle_worker)
    t.start()
    with ap.Profiler(sample=0.001, compensate=False) as prof:
        with ap.stage("work"):
            busy(0.15)
        stop.set()
    t.join()
    rep = prof.report()
    samples = rep._data["samples"]
    used = {f for s in samples["stacks"] for f in s[3]}
    files = [samples["frames"][f][1] for f in used]
    assert files and not any(is_own(f) for f in files), files
    # nor in the frame table every view lists (speedscope's)
    assert not any(is_own(f[1]) for f in samples["frames"])
    assert all(not is_own(h.file) for h in rep["work"].hot(20))
    assert rep["work"].hot()[0].function == "busy"
    assert "profiler.py" not in rep.flamegraph().html()
    timeline = samples["timeline"]
    assert len(timeline) and timeline["stack"].max() < len(samples["stacks"])


def test_the_kit_and_the_demo_are_the_programs_code():
    import aquaprof.mvs
    import aquaprof.integrations.demo as demo
    assert not is_own(aquaprof.mvs.__file__)
    assert not is_own(demo.__file__)
    assert is_own(ap.Profiler.start.__code__.co_filename)


def test_stacks_lose_the_profilers_frames_and_merge():
    own = ap.Profiler.stop.__code__.co_filename
    frames = [["main", "/app/main.py", 1], ["hook", own, 10],
              ["step", "/app/main.py", 20], ["watch", own, 30]]
    timeline = np.zeros(4, dtype=[("t_ns", "<i8"), ("stack", "<u4")])
    timeline["t_ns"] = [1, 2, 3, 4]
    timeline["stack"] = [0, 1, 2, 0]
    samples = {"interval_ns": 1000, "rounds": 4, "late": 0, "lost": 0,
               "frames": frames, "timeline": timeline,
               "stacks": [[0, 1, 0, [0, 1, 2], 2, 20, 10],
                          [0, 1, 0, [0, 2], 1, 10, 5],
                          [0, 2, -1, [3], 1, 10, 0]]}
    out = without_own_frames(samples)
    # main/hook/step and main/step are one stack; the watcher's is gone,
    # and with it every frame of the profiler
    assert out["frames"] == [frames[0], frames[2]]
    assert out["stacks"] == [[0, 1, 0, [0, 1], 3, 30, 15]]
    assert out["own_ns"] == 10
    assert out["timeline"]["stack"].tolist() == [0, 0, 0]
    assert out["timeline"]["t_ns"].tolist() == [1, 2, 4]


def test_a_thread_started_on_the_profilers_code_is_left_out_whole():
    """A watcher thread's stack keeps only threading's start of it once
    the profiler's frames go: that is no program code either."""
    own = ap.Profiler.stop.__code__.co_filename
    start = threading.__file__
    frames = [["_bootstrap", start, 990], ["run", start, 1010],
              ["watch", own, 30], ["worker", "/app/main.py", 5]]
    samples = {"interval_ns": 1000, "rounds": 2, "late": 0, "lost": 0,
               "frames": frames,
               "stacks": [[0, 2, -1, [0, 1, 2], 1, 10, 0, 0, 0],
                          [0, 3, -1, [0, 1, 3], 1, 10, 5, 0, 0]]}
    out = without_own_frames(samples)
    # a program's thread started by threading stays
    assert out["frames"] == [frames[0], frames[1], frames[3]]
    assert out["stacks"] == [[0, 3, -1, [0, 1, 2], 1, 10, 5, 0, 0]]
    assert out["own_ns"] == 10


def test_the_torch_hooks_stand_in_for_the_engine_is_not_the_hot_code():
    torch = __import__("pytest").importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 1))
    x = torch.randn(512, 256)
    with ap.Profiler(sample=0.001, compensate=False,
                     torch_modules=True) as prof:
        for _ in range(40):
            with ap.stage("step"):
                loss = model(x).sum()
                loss.backward()
    rep = prof.report()
    samples = rep._data["samples"]
    used = {f for s in samples["stacks"] for f in s[3]}
    files = {samples["frames"][f][1] for f in used}
    assert not any(is_own(f) for f in files), sorted(files)
    for stage in rep.stages:
        assert all(not is_own(h.file) for h in stage.hot(10)), stage.path


def test_the_monitors_thread_and_stop_waiting_for_it_never_show(
        monkeypatch):
    """The Monitor's checks run numpy on its own thread, and stop() joins
    that thread: neither has a frame of the profiler's where it spends
    its time (numpy's, threading's), and both read as the program's work
    in a flamegraph. The profiler's threads are named aquaprof-...; a
    stack whose frames past the profiler's are the standard library's
    alone is the profiler waiting."""
    from aquaprof.live import monitor as monitor_module
    checking = threading.Event()

    def heavy_check(self):
        np.sort(np.random.default_rng(0).random(200_000))   # numpy's time
        checking.set()
        time.sleep(0.12)            # stop() waits for this: join's time
        return []

    monkeypatch.setattr(monitor_module.Monitor, "check", heavy_check)
    with ap.Profiler(sample=0.001, compensate=False, window=10) as prof:
        mon = prof.monitor(interval=0.001)
        with ap.stage("work"):
            busy(0.1)
        assert checking.wait(5)       # stop() comes in the check's sleep
    rep = prof.report()
    samples = rep.samples
    names = {tid: name for _, tid, name in samples["threads"]}
    monitor_tid = mon._thread.native_id
    assert names[monitor_tid] == "aquaprof-monitor"
    assert not [s for s in samples["stacks"] if s[1] == monitor_tid]
    frames = samples["frames"]
    joins = [s for s in samples["stacks"]
             if any(frames[f][0].startswith("Thread.join") for f in s[3])]
    assert not joins, joins
    assert samples["own_ns"] > 50_000_000        # its sleep at least


def test_runpy_frames_that_ran_the_script_for_the_profiler_go_with_it():
    """`python -m aquaprof run job.py` reaches job.py through runpy twice:
    Python's run of aquaprof's __main__, and aquaprof's run_path of the
    script. Both are how the profiler started the program, and stood
    above every stack of its main thread in every view; a program's own
    `python -m job` keeps its runpy frames."""
    own = ap.Profiler.stop.__code__.co_filename
    runpy_file = runpy.run_path.__code__.co_filename
    frames = [["_run_module_as_main", runpy_file, 198],
              ["_run_code", runpy_file, 88],
              ["<module>", own, 3], ["cmd_run", own, 400],
              ["run_path", runpy_file, 291],
              ["_run_module_code", runpy_file, 98],
              ["_run_code", runpy_file, 88],
              ["<module>", "/app/job.py", 1], ["step", "/app/job.py", 9]]
    samples = {"interval_ns": 1000, "rounds": 2, "late": 0, "lost": 0,
               "frames": frames,
               "stacks": [[0, 1, -1, list(range(9)), 2, 20, 10],
                          [0, 2, -1, [0, 1, 7, 8], 1, 10, 5]]}
    out = without_own_frames(samples)
    names = [[out["frames"][f][0] for f in stack[3]]
             for stack in out["stacks"]]
    assert names == [["<module>", "step"],
                     ["_run_module_as_main", "_run_code", "<module>",
                      "step"]]
