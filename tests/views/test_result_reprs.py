"""What a REPL and Jupyter show of the result objects: their text, not
<... object at 0x...>, and the same text as HTML."""
import html

import aquaprof as ap
from aquaprof.integrations.batch_size import SweepResult


def profiled(step_work: int) -> ap.Report:
    with ap.Profiler() as prof:
        for _ in range(20):
            with ap.stage("step"):
                sum(range(step_work))
    return prof.report()


def check(result) -> None:
    text = str(result)
    assert repr(result) == text and "object at 0x" not in text
    assert result._repr_html_() == f"<pre>{html.escape(text)}</pre>"


def test_a_diagnosis_shows_its_findings():
    diagnosis = profiled(20000).diagnose()
    assert "step" in repr(diagnosis)
    check(diagnosis)


def test_a_comparison_shows_its_verdicts():
    comparison = profiled(40000).compare(profiled(20000))
    assert "step" in repr(comparison)
    check(comparison)


def test_a_sweep_shows_its_table():
    result = ap.sweep(lambda batch: sum(range(batch * 100)), [1, 2],
                      repeats=1)
    assert isinstance(result, SweepResult)
    assert "best batch size" in repr(result)
    check(result)
