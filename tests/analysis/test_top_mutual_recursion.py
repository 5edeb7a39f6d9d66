"""A parser's rules call one another down to themselves (expr/term/expr):
each rule is one stage whose self time is spread over a path a level of
the cycle. The bottlenecks rank each rule once, with all its levels, so
that no time ranks twice and none is left out."""
import pytest

from aquaprof import Report
from aquaprof.views.text import recursion_note
from crafted import report, stage
from planted_parser import profiled

CYCLES = [("expr", "term"), ("expr", "term", "factor")]


@pytest.mark.parametrize("staged", CYCLES, ids=["two", "three"])
def test_each_rule_of_a_cycle_ranks_once_with_the_time_it_took(staged):
    rep, own = profiled(staged)
    heads = rep.top(len(rep))
    # each rule at its outermost path, none of its deeper levels apart
    assert sorted(s.path for s in heads) == sorted(
        "/".join(staged[:i + 1]) for i in range(len(staged)))
    for head in heads:
        levels = rep.recursion(head)
        assert len(levels) > 2
        assert {s.name for s in levels} == {head.name}
        # what the program timed itself doing in that rule, every level
        assert rep.ranked_self(head) == pytest.approx(own[head.name],
                                                      rel=0.1)


@pytest.mark.parametrize("staged", CYCLES, ids=["two", "three"])
def test_every_path_ranks_in_exactly_one_stage(staged):
    rep, _own = profiled(staged)
    heads = rep.top(len(rep))
    ranked = [level.path for s in heads for level in rep.recursion(s)]
    assert sorted(ranked) == sorted(s.path for s in rep.stages)
    assert sum(rep.ranked_self(s) for s in heads) == pytest.approx(
        sum(s.self_wall for s in rep.stages), rel=1e-9)


def test_the_printed_report_and_the_page_name_each_rule_once():
    rep, _own = profiled(("expr", "term"))
    text = str(rep)
    lines = text.splitlines()
    top = lines[lines.index("Top 2 bottlenecks by self time:") + 1:][:2]
    assert sorted(line.split()[1] for line in top) == ["expr", "expr/term"]
    assert any("paths expr/.../expr" in line for line in top)
    html = rep._repr_html_()
    listed = html[html.index("Top bottlenecks"):]
    assert listed.count("<li>") == 2
    assert "<li>expr/term/expr" not in listed
    assert "paths term/.../term" in listed


def test_a_recursion_direct_and_through_another_stage_is_not_called_direct():
    # f/f beside f/g/f: three levels at depths 0, 1 and 2, one of them
    # reached through g
    rep = Report.from_dict(report([
        stage("f", -1, 0, ns=10**6), stage("f", 0, 1), stage("g", 0, 1),
        stage("f", 2, 2)]))
    assert recursion_note(rep, rep["f"]).endswith("3 paths f/.../f)")
