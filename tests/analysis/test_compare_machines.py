"""A comparison of runs made on another kind of machine or Python says
so: a baseline captured on a laptop against a CI runner, or before a
Python upgrade, moves every stage with no change to the code."""
import contextlib
import io
import time

import aquaprof as ap
from aquaprof.analysis.compare import machine_differs
from aquaprof.integrations.cli import main
from aquaprof.record.host import cpu_model


def run(seconds=0.01):
    with ap.Profiler() as prof:
        for _ in range(5):
            with ap.stage("work"):
                time.sleep(seconds)
    return prof.report()


def elsewhere(rep, **host):
    """The run as another machine would have recorded it."""
    data = rep.to_dict()
    data["host"] = dict(data["host"], **host)
    return ap.Report.from_dict(data)


def test_a_run_records_its_cpu_model_where_the_system_says():
    rep = run()
    assert rep.meta["host"].get("cpu") == cpu_model()
    # a file read back keeps it
    assert ap.Report.from_dict(rep.to_dict()).meta["host"].get("cpu") == \
        cpu_model()


def test_another_cpu_and_python_are_named_in_the_comparison(tmp_path):
    base = elsewhere(run(), cpu="Laptop CPU 9000", cpus=8, python="3.11.7")
    new = elsewhere(run(), cpu="CI Runner CPU", cpus=2, python="3.12.1")
    text = str(new.compare(base))
    assert ("note: the new run ran on another kind of machine or Python: "
            "CPU Laptop CPU 9000 -> CI Runner CPU; CPUs to run on 8 -> 2; "
            "Python 3.11.7 -> 3.12.1. That moves timings with no change "
            "to the code") in text, text
    # on the command line, as the pytest gate and history print it
    base.save(tmp_path / "base.json")
    new.save(tmp_path / "new.json")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["compare", str(tmp_path / "base.json"),
              str(tmp_path / "new.json")])
    assert "ran on another kind of machine or Python" in out.getvalue()


def test_no_note_for_one_kind_of_machine_or_where_a_run_is_silent():
    a, b = run(), run()
    # a CI job's container has a new host name each time
    assert machine_differs([elsewhere(a, hostname="job-1")],
                           [elsewhere(b, hostname="job-2")]) == ""
    # one base run made on the new runs' Python: not all moved
    mixed = [elsewhere(a, python="3.12.1"), elsewhere(a, python="3.11.7")]
    assert "Python" not in machine_differs(
        mixed, [elsewhere(b, python="3.12.1")])
    # a file written before the CPU was recorded says nothing of it
    old = a.to_dict()
    old["host"].pop("cpu", None)
    assert "CPU " not in machine_differs(
        [ap.Report.from_dict(old)], [elsewhere(b, cpu="Other CPU")])
