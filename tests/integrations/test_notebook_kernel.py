"""A long notebook session in a real Jupyter kernel (ipykernel, driven by
jupyter_client as a notebook front end drives it): cells interrupted by
the kernel's interrupt, top-level await, autoreload of an edited module,
a Profiler left running under %%aquaprof cells, a profiled cell run again
and again. What the kernel is left with after each is checked from
inside it."""
import os
import time

import pytest

import aquaprof as ap

pytest.importorskip("jupyter_client",
                    reason="jupyter_client drives the kernel (make test "
                    "installs it)")
pytest.importorskip("ipykernel", reason="the kernel is ipykernel's")

from kernel import Kernel  # noqa: E402
from repo_paths import ROOT  # noqa: E402

# a cell that runs until interrupted (at most 30 s)
SPIN = ("t = time.time()\n"
        "while time.time() < t + 30:\n"
        "    with ap.stage('spin'):\n"
        "        sum(range(1000))\n")


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kernel")
    k = Kernel(str(ROOT), str(folder))
    # aquaprof imported before autoreload is loaded, as a notebook may
    out = k.run("import asyncio, gc, sys, time\nimport aquaprof as ap\n"
                "%load_ext aquaprof")
    assert not [o for o in out if o[0] == "error"], out
    yield k, folder
    k.close()


def errors(outputs):
    return [text for kind, text in outputs if kind == "error"]


def indented(code):
    return "".join(f"    {line}\n" for line in code.splitlines())


def test_an_interrupted_magic_cell_says_so_and_the_next_one_profiles(
        kernel):
    k, folder = kernel
    out = k.run(f"%%aquaprof -o {folder}/cut.json\n{SPIN}",
                interrupt_after=1.0)
    assert errors(out) == ["KeyboardInterrupt: "]
    # its report shown before the traceback, saying it was cut short
    assert out[0][0] == "display_data"
    cut = ap.Report.load(folder / "cut.json")
    assert cut.meta["ended_by"] == "KeyboardInterrupt"
    assert cut["cell/spin"].count > 0
    assert k.value("ap.active()") == "False"
    out = k.run(f"%%aquaprof -o {folder}/next.json\n"
                f"with ap.stage('next'): time.sleep(0.01)")
    assert not errors(out)
    after = ap.Report.load(folder / "next.json")
    assert after["cell/next"].count == 1 and "ended_by" not in after.meta
    assert [s.path for s in after.stages] == ["cell", "cell/next"]


def test_an_interrupted_with_block_leaves_no_profiler(kernel):
    k, _ = kernel
    out = k.run(f"with ap.Profiler(sample=0.001) as prof:\n{indented(SPIN)}",
                interrupt_after=1.0)
    assert errors(out) == ["KeyboardInterrupt: "]
    assert k.value("(ap.active(), prof.running)") == "(False, False)"
    assert k.value("prof.report().meta['ended_by']") == "KeyboardInterrupt"
    assert not errors(k.run("with ap.Profiler() as again:\n"
                            "    with ap.stage('x'): pass")) and \
        k.value("again.report()['x'].count") == "1"


def test_top_level_await_with_tasks_in_stages(kernel):
    k, _ = kernel
    out = k.run("async def job(i):\n"
                "    with ap.stage('job'):\n"
                "        await asyncio.sleep(0.01 * (i + 1))\n"
                "with ap.Profiler(sample=0.001) as prof:\n"
                "    with ap.stage('gather'):\n"
                "        await asyncio.gather(*(job(i) for i in range(4)))\n"
                "rep = prof.report()")
    assert not errors(out), out
    # the kernel's loop ran the cell: each task's stage under the gather
    assert k.value("[s.path for s in rep.stages]") == \
        "['gather', 'gather/job']"
    assert k.value("(rep['gather/job'].count, rep.unclosed)") == "(4, 0)"


def test_a_staged_function_of_an_edited_module_reloads(kernel):
    k, folder = kernel
    module = folder / "edited_stages.py"
    source = ("import aquaprof as ap\n"
              "@ap.stage('{0}')\n"
              "def step():\n"
              "    return '{0}'\n")
    module.write_text(source.format("v1"))
    os.utime(module, (time.time() - 10,) * 2)
    out = k.run(f"%load_ext autoreload\n%autoreload 2\n"
                f"sys.path.insert(0, {str(folder)!r})\n"
                f"from edited_stages import step")
    assert not errors(out), out
    assert k.value("step()") == "v1"
    module.write_text(source.format("v2"))
    assert k.value("step()") == "v2"
    assert k.value("step.stage_name") == "v2"
    k.run("%autoreload 0")


def test_a_magic_cell_inside_a_profiler_left_running(kernel):
    k, folder = kernel
    assert not errors(k.run("outer = ap.Profiler(); outer.start()"))
    out = k.run(f"%%aquaprof --no-sample -o {folder}/inner.json\n"
                f"with ap.stage('b'): time.sleep(0.01)")
    assert not errors(out), out
    inner = ap.Report.load(folder / "inner.json")
    # said to be nested, and whole
    assert inner.meta["nested"] and inner["cell/b"].count == 1
    assert "nested in another Profiler" in str(inner)
    assert not errors(k.run("outer.stop()"))
    assert k.value("(outer.report()['cell/b'].count, ap.active())") == \
        "(1, False)"


# the probe: IPython's own caches of outputs dropped (Out, _N, _, the
# history's output bundles), then the reports still alive
LIVE_REPORTS = """\
get_ipython().displayhook.flush()
get_ipython().history_manager.outputs.clear()
for name in ("_", "__", "___"):
    globals().pop(name, None)
gc.collect()
print(sum(type(o) is ap.Report for o in gc.get_objects()))
"""


def test_reruns_of_a_profiled_cell_keep_no_report_alive(kernel):
    k, _ = kernel
    cell = "%%aquaprof\nwith ap.stage('s'): sum(range(10000))"
    alive = []
    for runs in (5, 20):
        for _ in range(runs):
            assert not errors(k.run(cell))
        out = k.run(LIVE_REPORTS)
        alive.append(int("".join(t for kind, t in out if kind == "stream")))
    # IPython keeps its last three results (_, __, ___, in its hidden
    # namespace too) and its last cell's, the session's names theirs;
    # aquaprof none: no more after 25 runs than after 5
    assert alive[1] == alive[0]
