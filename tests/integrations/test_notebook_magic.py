"""The %%aquaprof cell magic, run as a user runs it: whole cells handed to
an IPython shell (`%load_ext aquaprof`, then `%%aquaprof ...` as the
cell's first line). Its line takes the Profiler's options; a bad one is a
one-line usage error and the cell does not run; a failing cell shows its
report and IPython's traceback once; only the cell's code is timed, not
IPython's formatting of its traceback or its value."""
import contextlib
import io
import json
import time

import pytest

import aquaprof as ap
from fake_gpu import scenario

pytest.importorskip("IPython")      # installed by `make test`
from IPython.core.error import UsageError  # noqa: E402

# where IPython formats tracebacks and values: none of it is the cell's
IPYTHON_WORK = ("IPython", "stack_data", "pygments", "executing")


@pytest.fixture
def shell():
    from IPython.testing.globalipapp import get_ipython
    shell = get_ipython()
    shell.run_line_magic("load_ext", "aquaprof")
    # a fresh notebook's names: the shell is shared by the whole session
    for name in ("ran", "_", "__", "___"):
        shell.user_ns.pop(name, None)
    return shell


def run(shell, cell):
    """Runs the cell as a notebook does: (its ExecutionResult, what it
    printed on stdout, on stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        result = shell.run_cell(cell, store_history=True)
    return result, out.getvalue(), err.getvalue()


@pytest.fixture
def shown(monkeypatch):
    """What the magic displays besides its output, in order."""
    import IPython.display
    displayed = []
    monkeypatch.setattr(IPython.display, "display", displayed.append)
    return displayed


def profile_cell(shell, tmp_path, options, body):
    """The report the cell's run saved (-o), after options."""
    out = tmp_path / "cell.json"
    result, _, err = run(shell, f"%%aquaprof {options} -o {out}\n{body}")
    assert result.success, err
    return ap.Report.load(out)


# ------------------------------------------------------------ options

def test_the_line_sets_the_profilers_options(shell, tmp_path):
    rep = profile_cell(shell, tmp_path,
                       "--sample 0.002 --gpu off --no-memory "
                       "--max-spans 2 --cpu-resolution 0",
                       "import aquaprof as ap\n"
                       "for _ in range(5):\n"
                       "    with ap.stage('step'):\n"
                       "        pass\n")
    assert rep.samples["interval_ns"] == 2_000_000
    assert rep.gpu_status == "off (cuda=False)"
    assert rep.meta["memory"] is False
    assert rep.meta["max_spans"] == 2 and rep.meta["spans_dropped"] == 4
    assert rep.meta["cpu_resolution_ns"] == 0
    assert rep["cell/step"].count == 5


def test_the_cell_is_sampled_by_default_as_aquaprof_run_does(shell,
                                                            tmp_path):
    sampled = profile_cell(shell, tmp_path, "", "pass")
    assert sampled.samples["interval_ns"] == 1_000_000
    assert profile_cell(shell, tmp_path, "--no-sample",
                        "pass").samples is None


def test_torch_options_record_ops_and_modules(shell, tmp_path):
    pytest.importorskip("torch")
    rep = profile_cell(shell, tmp_path,
                       "--no-sample --torch-ops=shapes --torch-modules",
                       "import torch\n"
                       "net = torch.nn.Sequential(torch.nn.Linear(4, 2))\n"
                       "net(torch.ones(3, 4))\n")
    paths = [s.path for s in rep.stages]
    assert any(p.startswith("cell/Sequential") for p in paths), paths
    # shapes kept in the op's name
    assert any("aten::" in p and "3×4" in p for p in paths), paths


@pytest.mark.parametrize("line, says", [
    ("--bad", "unrecognized arguments: --bad"),
    ("extra.json", "unrecognized arguments: extra.json"),
    ("--sample", "expected one argument"),
    ("--sample 0", "use --no-sample"),
    ("--sample fast", "'fast' is not a sampling interval"),
    ("--sample 100", "between 0.0001 and 60 seconds"),
    ("--gpu maybe", "invalid choice: 'maybe'"),
    ("--torch-ops=all", "invalid choice: 'all'"),
    ("--max-spans -3", "--max-spans must be between"),
    ("--window many", "invalid int value: 'many'"),
    ("--memory-interval soon", "'soon' is not seconds"),
    ("-o 'unclosed.json", "No closing quotation"),
    ("-o no/such/folder/r.json", "-o 'no/such/folder/r.json': no such "
     "folder"),
    ("--html no/such/folder/p.html", "--html 'no/such/folder/p.html': no "
     "such folder"),
])
def test_a_bad_line_is_a_usage_error_and_the_cell_does_not_run(
        shell, line, says):
    with pytest.raises(UsageError) as error:
        shell.run_cell_magic("aquaprof", line, "ran = True\n")
    assert says in str(error.value) and "%%aquaprof -h" in str(error.value)
    assert "ran" not in shell.user_ns
    # a notebook shows it as IPython shows any usage error: one line
    result, out, err = run(shell, f"%%aquaprof {line}\nran = True\n")
    assert not result.success and "ran" not in shell.user_ns
    assert err.strip().splitlines() == [f"UsageError: {error.value}"]
    assert "Traceback" not in out + err
    assert not ap.active()


def test_gpu_on_without_a_driver_is_a_usage_error():
    # the driver the Profiler opens: one no machine has. A fresh
    # interpreter, as the driver stays open for a process's life once an
    # earlier test opened a real one
    said, success, ran, active = scenario("""
        import contextlib, io
        from IPython.testing.globalipapp import get_ipython
        shell = get_ipython()
        shell.run_line_magic("load_ext", "aquaprof")
        err = io.StringIO()
        with contextlib.redirect_stderr(err), \\
                contextlib.redirect_stdout(io.StringIO()):
            result = shell.run_cell("%%aquaprof --gpu on\\nran = True\\n")
        print(json.dumps([err.getvalue().strip().splitlines(),
                          result.success, "ran" in shell.user_ns,
                          ap.active()]))
    """, {"AQUAPROF_LIBCUDA": "/nonexistent/libcuda.so.1"})
    (line,) = said
    assert line.startswith("UsageError: %%aquaprof: the Profiler cannot "
                           "start: cuda=True: no CUDA driver: cannot open "
                           "/nonexistent/libcuda.so.1")
    assert not success and not ran and not active


def test_help_lists_the_options_and_runs_nothing(shell):
    result, out, _ = run(shell, "%%aquaprof -h\nran = True\n")
    assert result.success and "ran" not in shell.user_ns
    assert out.startswith("usage: %%aquaprof")
    for option in ("--sample", "--no-sample", "--torch-ops", "--gpu", "-o"):
        assert option in out
    # `%%aquaprof?` shows what the magic does and the same options
    _, asked, _ = run(shell, "%%aquaprof?")
    assert "runs the cell under a Profiler" in asked
    assert "--torch-modules" in asked


# ------------------------------------------------------- what is shown

def test_the_report_is_the_cells_output_and_its_value_shown_first(
        shell, shown):
    result, _, _ = run(shell, "%%aquaprof --no-sample\nx = 20\nx + 22\n")
    assert result.success and isinstance(result.result, ap.Report)
    assert shell.user_ns["_"] is result.result
    assert shell.user_ns["Out"][result.execution_count] is result.result
    assert shown == [42]
    # a trailing ';' hides the value, as in any cell
    run(shell, "%%aquaprof --no-sample\nx + 1;\n")
    assert shown == [42]


def test_a_failing_cell_shows_its_report_then_one_traceback(shell, shown):
    result, out, err = run(shell, "%%aquaprof --no-sample\n"
                                  "x = 1\n"
                                  "x / 0\n")
    # an error IPython saw: a run of cells stops here
    assert not result.success
    assert isinstance(result.error_in_exec, ZeroDivisionError)
    assert len(shown) == 1 and isinstance(shown[0], ap.Report)
    assert shown[0]["cell"].count == 1
    text = out + err
    assert text.count("Traceback (most recent call last)") == 1
    assert text.count("ZeroDivisionError: division by zero") == 1
    # the failing line numbered as the notebook shows it, the magic's
    # line first; the magic's own frames hidden
    assert f"Cell In[{result.execution_count}], line 3" in text
    assert "----> 3 x / 0" in text
    assert "notebook.py" not in text
    assert not ap.active()


def test_a_failing_cells_report_says_the_cell_was_cut_short(shell, shown):
    run(shell, "%%aquaprof --no-sample\n"
               "with ap.stage('load'):\n"
               "    {}['missing']\n")
    (rep,) = shown
    # as a `with Profiler()` block that raised: not a whole run's report
    assert rep.meta["ended_by"] == "KeyError"
    assert "! the run was cut short: KeyError ended the profiled block" \
        in str(rep)
    assert "cut short" in rep._repr_html_()


def test_an_interrupted_cell_leaves_no_profiler_and_says_so(shell, shown):
    # the kernel's interrupt is a KeyboardInterrupt in the cell's code
    result, _, _ = run(shell, "%%aquaprof\n"
                              "with ap.stage('spin'):\n"
                              "    raise KeyboardInterrupt\n")
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    (rep,) = shown
    assert rep.meta["ended_by"] == "KeyboardInterrupt"
    assert not ap.active()
    # the next cell profiles as the first did, and whole
    assert run(shell, "%%aquaprof --no-sample\n"
                      "with ap.stage('again'): pass\n")[0].success
    again = shell.user_ns["_"]
    assert again["cell/again"].count == 1 and "ended_by" not in again.meta


def test_a_cell_under_a_profiler_left_running_says_it_is_nested(shell):
    outer = ap.Profiler()
    outer.start()
    try:
        result, _, err = run(shell, "%%aquaprof\n"
                                    "import aquaprof as ap\n"
                                    "with ap.stage('b'): pass\n")
    finally:
        outer.stop()
    assert result.success
    rep = shell.user_ns["_"]
    assert rep.meta["nested"] and rep.samples is None
    # why the call stacks --sample asked for are missing, and what to do
    assert "a Profiler started earlier is still running" in err
    assert "no call stacks" in err
    assert run(shell, "%%aquaprof --no-sample\npass\n")[2] == ""


def test_a_syntax_error_names_the_cells_line_and_profiles_nothing(
        shell, shown):
    result, out, err = run(shell, "%%aquaprof --no-sample\n"
                                  "x = 1\n"
                                  "y = (\n")
    error = result.error_in_exec
    assert isinstance(error, SyntaxError) and error.lineno == 3
    assert f"Cell In[{result.execution_count}], line 3" in out + err
    assert shown == [] and not ap.active()


def test_a_cell_keeps_ipython_syntax_and_its_names(shell):
    result, _, err = run(shell, "%%aquaprof --no-sample\n"
                                "%time y = 6 * 7\n"
                                "def double(v):\n"
                                "    return 2 * v\n")
    assert result.success, err
    assert shell.user_ns["y"] == 42
    assert shell.user_ns["double"](4) == 8


def test_out_and_html_write_the_report(shell, tmp_path):
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    result, _, _ = run(shell, f"%%aquaprof --no-sample -o {out} "
                              f"--html {page}\nran = True\n")
    assert result.success
    assert ap.Report.load(out)["cell"].count == 1
    assert page.read_text(encoding="utf-8").lstrip().startswith(
        "<!DOCTYPE html>")
    # a failing cell's profile is kept too
    run(shell, f"%%aquaprof --no-sample -o {out}\nimport aquaprof as ap\n"
               f"with ap.stage('before_error'):\n    pass\n1 / 0\n")
    assert ap.Report.load(out)["cell/before_error"].count == 1
    json.loads(out.read_text())


# ------------------------------------------- only the cell's code timed

DEEP_ERROR_CELL = """\
import time
def deeper(n):
    return deeper(n + 1)
time.sleep(0.01)
deeper(0)
"""


def test_formatting_the_traceback_is_not_the_cells_time(shell, tmp_path):
    # a 10 ms cell whose RecursionError IPython formats a frame at a
    # time: hundreds of ms of IPython's work, none of it the cell's
    out = tmp_path / "deep.json"
    began = time.perf_counter()
    result, text, _ = run(shell, f"%%aquaprof -o {out}\n{DEEP_ERROR_CELL}")
    elapsed = time.perf_counter() - began
    assert isinstance(result.error_in_exec, RecursionError)
    assert text.count("Traceback (most recent call last)") == 1
    rep = ap.Report.load(out)
    cell = rep["cell"]
    assert 0.01 <= cell.wall.total < 0.1
    # the plant is large: were the formatting timed, the bound above fails
    assert elapsed > 3 * cell.wall.total
    assert cell.cpu < 0.05
    # bottleneck #1 is the cell, and the code it names is the cell's
    (first,) = rep.top(1)
    assert first.path == "cell"
    hottest = [h for h in cell.hot(5) if h.own_s > 0]
    assert hottest and not any(work in h.file for h in hottest
                               for work in IPYTHON_WORK), hottest
    assert not any(work in str(rep.diagnose()) for work in IPYTHON_WORK)
    # the Profiler stopped before IPython took over again: the report's
    # run is the cell's, not the cell's and the formatting's
    run_s = (rep.meta["stop_ns"] - rep.meta["start_ns"]) / 1e9
    assert run_s < cell.wall.total + 0.05


def test_showing_the_cells_value_is_not_the_cells_time(shell, tmp_path,
                                                       shown):
    out = tmp_path / "value.json"
    run(shell, f"%%aquaprof --no-sample -o {out}\n"
               f"import time\n"
               f"class SlowToShow:\n"
               f"    def __repr__(self):\n"
               f"        time.sleep(0.3)\n"
               f"        return 'shown'\n"
               f"SlowToShow()\n")
    # display is monkeypatched: repr() it as the notebook would
    began = time.perf_counter()
    assert [repr(v) for v in shown] == ["shown"]
    assert time.perf_counter() - began >= 0.3
    assert ap.Report.load(out)["cell"].wall.total < 0.15
