"""The report as text in a terminal: colour only on a terminal (never
piped, in a file, under NO_COLOR or TERM=dumb), the stage table fit to
the terminal's width, no column that shows the process rather than the
row, the GPU's absence said once, and counts with their nouns in the
right number."""
import io
import re

import pytest

import aquaprof as ap
from aquaprof.integrations import cli
from aquaprof.common.units import display_width
from aquaprof.common.words import shorten, shorten_name, shorten_path, \
    wrap_line
from aquaprof.views.text import format_report, header_lines, \
    terminal_text, warning_lines

import crafted
from fake_gpu import scenario

ESC = "\x1b["
LONG = ("load_data_from_a_very_long_named_source_directory",
        "decode_and_normalise_every_frame_of_the_batch",
        "inner_most_stage_name_with_many_characters")
NO_CUDA = ("no CUDA driver: cannot open libcuda.so.1 (libcuda.so.1: cannot "
           "open shared object file: No such file or directory)")


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self):
        return True


def pipeline(**run):
    """A crafted report: three nested stages with long names, a stage
    with items and one short stage, host memory sampled."""
    stages = [crafted.stage(LONG[0], count=3, ns=30_000_000),
              crafted.stage(LONG[1], 0, 1, count=3, ns=29_000_000),
              crafted.stage(LONG[2], 1, 2, count=3, ns=28_000_000),
              crafted.stage("train", count=3, ns=5_000_000),
              crafted.stage("once", count=1, ns=500)]
    for s, peak, delta in zip(stages, (70, 69, 68, 50, 49),
                              (19, 19, 19, 0, 0)):
        s["mem_peak"], s["mem_delta"] = peak << 20, delta << 20
    stages[3]["items"] = 96
    run = {"memory": True, "gpu_status": NO_CUDA, **run}
    return ap.Report.from_dict(crafted.report(stages, **run))


def table(text):
    """The stage table's lines: its heading and one row a stage."""
    lines = re.sub(r"\x1b\[\d+m", "", text).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("stage "))
    return lines[at:at + 6]


@pytest.fixture
def no_color_env(monkeypatch):
    for name in ("NO_COLOR", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    return monkeypatch


# ------------------------------------------------------------------ colour

def test_a_terminal_gets_colour_and_a_pipe_or_file_does_not(no_color_env):
    rep = pipeline()
    coloured = terminal_text(rep, Terminal())
    assert ESC in coloured
    # the heading bold, the hottest stage's row red
    assert f"\x1b[1mstage " in coloured
    assert any(line.startswith("\x1b[31m") and LONG[0][:10] in line
               for line in coloured.splitlines())
    assert ESC not in terminal_text(rep, io.StringIO())
    # without the codes, the same text
    assert re.sub(r"\x1b\[\d+m", "", coloured) == terminal_text(
        rep, Terminal(), color=False)


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"NO_COLOR": "yes"},
                                 {"TERM": "dumb"}])
def test_no_color_and_a_dumb_terminal_get_no_colour(no_color_env, env):
    for name, value in env.items():
        no_color_env.setenv(name, value)
    assert ESC not in terminal_text(pipeline(), Terminal())


def test_an_empty_no_color_does_not_turn_colour_off(no_color_env):
    no_color_env.setenv("NO_COLOR", "")
    assert ESC in terminal_text(pipeline(), Terminal())


def test_an_explicit_color_wins_over_the_stream(no_color_env):
    rep = pipeline()
    assert ESC in terminal_text(rep, io.StringIO(), color=True)
    assert ESC not in terminal_text(rep, Terminal(), color=False)


def test_str_of_a_report_stays_plain_on_a_terminal(no_color_env):
    no_color_env.setattr("sys.stdout", Terminal())
    no_color_env.setenv("COLUMNS", "80")
    rep = pipeline()
    text = str(rep)
    assert ESC not in text and text.isascii()
    assert text == format_report(rep)
    assert "p50" in table(text)[0]         # every column, whatever COLUMNS


def test_show_colours_a_terminal_and_not_a_file(no_color_env, tmp_path,
                                                capsys):
    path = pipeline().save(tmp_path / "run.json")
    assert cli.main(["show", str(path)]) == 0
    assert ESC not in capsys.readouterr().out      # captured: no terminal
    out = Terminal()
    no_color_env.setattr("sys.stdout", out)
    assert cli.main(["show", str(path)]) == 0
    assert ESC in out.getvalue()


# ------------------------------------------------------------------- width

def test_the_table_fits_80_columns_and_keeps_the_main_ones(no_color_env):
    text = format_report(pipeline(), width=80)
    rows = table(text)
    assert max(len(line) for line in rows) <= 80
    heading = rows[0].split()
    for column in ("stage", "count", "total", "self", "p95", "items/s"):
        assert column in heading
    assert "p50" not in heading and "max" not in heading
    # one row per stage: long names cut in the middle, both ends kept
    assert len(rows) == 6
    deepest = rows[3].split()[0]
    assert "..." in deepest and deepest.startswith(LONG[2][:4]) \
        and deepest.endswith(LONG[2][-4:])
    # what was left out is said
    assert "(left out to fit: p50, max, mean" in text
    # the bottleneck list's paths fit as well, cut in the middle
    top = text.splitlines()[text.splitlines().index(
        "Top 3 bottlenecks by self time:") + 1]
    assert len(top) <= 80 and "..." in top and top.split()[1].endswith(
        LONG[0][-6:])


def test_a_wide_terminal_keeps_every_column(no_color_env):
    rep = pipeline()
    text = format_report(rep, width=200)
    assert table(text) == table(str(rep))
    assert table(text)[0].split() == [
        "stage", "count", "total", "self", "mean", "p50", "p95", "max",
        "cpu", "share", "mem", "delta", "items/s"]
    assert "left out" not in text


def test_terminal_text_fits_columns_and_a_pipe_keeps_all(no_color_env):
    rep = pipeline()
    no_color_env.setenv("COLUMNS", "80")
    assert max(map(len, table(terminal_text(rep, Terminal())))) <= 80
    no_color_env.delenv("COLUMNS")
    assert terminal_text(rep, io.StringIO()) == str(rep)


def test_every_line_fits_a_narrow_terminal_wrapped_under_its_indent(
        no_color_env):
    """The table fits by its columns, the prose around it (the header,
    warnings, the diagnosis) by wrapping: a terminal's own wrapping would
    break the lists' indents."""
    rep = pipeline(spans_dropped=5, max_spans=10)
    assert any(len(line) > 60 for line in str(rep).splitlines())
    text = format_report(rep, width=60)
    lines = text.splitlines()
    assert max(map(display_width, lines)) <= 60, text
    diagnosis = lines[lines.index("Diagnosis (details: report.diagnose()):")
                      + 1:]
    # an item's wrapped lines sit under its text, after "  1. "
    assert diagnosis[0].startswith("  1. ") and \
        diagnosis[1].startswith("     ") and diagnosis[1][5] != " ", text
    # nothing lost: the header's words are str(report)'s, and each
    # diagnosis says what it says there (its path shortened to fit)
    plain = str(rep)
    assert " ".join(text.split("\nstage ")[0].split()) == \
        " ".join(plain.split("\nstage ")[0].split())
    said = " ".join(" ".join(diagnosis).split())
    assert said.count("; thread CPU time ") == 3
    assert "thread CPU time 84.0 ms of 84.0 ms wall (100 %)" in said


def test_wrap_line_cuts_at_spaces_under_the_marker():
    assert wrap_line("short", 10) == ["short"]
    assert wrap_line("x" * 30, None) == ["x" * 30]
    assert wrap_line("! one two three four", 10) == [
        "! one two", "  three", "  four"]
    assert wrap_line("  12. alpha beta gamma", 14) == [
        "  12. alpha", "      beta", "      gamma"]
    assert wrap_line("    evidence: a b c d e f g h i j", 30) == [
        "    evidence: a b c d e f g h", "              i j"]
    # a number stays with its unit; an ellipsis is no number
    assert wrap_line("took 90.0 ms of 100 %", 11) == [
        "took", "90.0 ms of", "100 %"]
    assert wrap_line("see ... and more", 9) == ["see ...", "and more"]
    # a leading tab is kept
    assert wrap_line("\tone two three", 8)[0].startswith("\tone")
    # a word wider than the line stays whole, on a line of its own
    assert wrap_line("see /a/very/long/path/file.py now", 12) == [
        "see", "/a/very/long/path/file.py", "now"]
    # wide characters take two columns each
    assert wrap_line("数据 数据 数据", 10) == ["数据 数据", "数据"]


def test_a_very_narrow_terminal_keeps_stage_total_and_self(no_color_env):
    rows = table(format_report(pipeline(), width=30))
    assert rows[0].split() == ["stage", "total", "self"]
    assert len(rows) == 6


def test_shorten_cuts_in_the_middle():
    assert shorten("abcdefghij", 10) == "abcdefghij"
    assert shorten("abcdefghijkl", 9) == "abc...jkl"
    assert shorten("abcdefghijkl", 8) == "abc...kl"


# ------------------------------------------------------------------ memory

def test_no_column_shows_the_process_rss_on_every_row(no_color_env):
    text = str(pipeline())
    rows = table(text)
    assert "mem peak" not in rows[0]
    # the per-row change stays: the stages that kept memory, and those
    # that did not
    assert [re.findall(r"\S+ [KMG]?i?B", r) for r in rows[1:]] == [
        ["+19.0 MiB"]] * 3 + [["0 B"]] * 2
    for peak in ("70.0 MiB", "69.0 MiB", "50.0 MiB"):
        assert peak not in text


# --------------------------------------------------------------------- GPU

def test_no_cuda_is_said_once_and_short_at_the_end():
    text = str(pipeline())
    gpu = [line for line in text.splitlines() if "GPU" in line]
    assert gpu == ["GPU: not traced (no CUDA driver)"]
    assert text.splitlines()[-1] == gpu[0]
    assert "libcuda.so.1" not in text


def test_no_cuda_in_a_run_with_child_processes_is_said_short_at_the_end():
    # children never look for a GPU: the parent's status is the run's. A
    # fresh interpreter, as the driver stays open for a process's life
    # once an earlier test opened a real one.
    lines = scenario("""
        import multiprocessing

        def child_stage():
            with ap.stage("in child"):
                pass

        with ap.Profiler() as prof:
            child = multiprocessing.get_context("fork").Process(
                target=child_stage)
            child.start()
            child.join()
        rep = prof.report()
        print(json.dumps([len(rep.processes), str(rep).splitlines()]))
    """, {"AQUAPROF_LIBCUDA": "/nonexistent/libcuda.so.1"})
    processes, lines = lines
    assert processes == 2
    assert [line for line in lines if "GPU" in line] == [
        "GPU: not traced (no CUDA driver)"]
    assert lines[-1] == "GPU: not traced (no CUDA driver)"


def test_a_merge_of_merges_says_why_a_gpu_run_in_it_was_not_traced():
    cpu = pipeline()
    gpu = pipeline(gpu_status="CUPTI not found; tried: libcupti.so.12")
    both = ap.merge([ap.merge([cpu, cpu]), gpu])
    assert both.meta["host"]["merged"] == 3
    assert "CUPTI not found" in str(both)
    assert str(ap.merge([ap.merge([cpu, cpu]), cpu])).splitlines()[-1] == \
        "GPU: not traced (no CUDA driver)"


def test_a_gpu_that_was_expected_but_not_traced_is_said_first():
    rep = pipeline(gpu_status="CUPTI not found; tried: libcupti.so.12")
    lines = str(rep).splitlines()
    gpu = [line for line in lines if line.startswith("GPU:")]
    assert gpu == ["GPU: not traced (CUPTI not found; tried: "
                   "libcupti.so.12)"]
    assert lines.index(gpu[0]) < lines.index(table(str(rep))[0])


def test_cuda_off_by_choice_says_nothing_of_the_gpu():
    assert "GPU" not in str(pipeline(gpu_status="off (cuda=False)"))


# ----------------------------------------------------------------- plurals

def test_one_of_a_kind_is_singular():
    stages = [crafted.stage("only", count=1)]
    stages[0]["raised"] = 1
    rep = ap.Report.from_dict(crafted.report(
        stages, spans_dropped=1, lost=1, unclosed=1, spans_shed=1,
        stages_overflowed=1, max_stages=10,
        overhead={"span_ns": 100.0, "inside_ns": 50.0, "read_ns": 800.0,
                  "resolution_ns": 20000.0}))
    text = str(rep)
    for line in ("1 thread,", "0 spans recorded", "! 1 span beyond",
                 "1 stage call was not closed by its own exit",
                 "1 stage call was not recorded in full",
                 "1 entry of stage paths", "1 raw span was left out",
                 "only: 1 of 1 call raised", "(1 call at 100 ns"):
        assert line in text, line
    assert not re.search(r"\b1 (spans|calls|threads|entries|stage calls)\b",
                         text)
    assert "(s)" not in text


def test_many_are_plural():
    stages = [crafted.stage("many", count=2)]
    rep = ap.Report.from_dict(crafted.report(stages, spans_dropped=2,
                                             lost=2))
    text = str(rep)
    assert "! 2 spans beyond" in text and "were not kept" in text
    assert "2 stage calls were not recorded in full" in text


def test_the_html_table_shows_no_process_figure_as_a_stages_own():
    """Its memory column is each stage's own change, as the text table's:
    the process's peak RSS is the same on every row."""
    with ap.Profiler() as prof:
        with ap.stage("a"):
            pass
    page = prof.report()._repr_html_()
    assert "<th>mem delta</th>" in page and "mem peak" not in page


# ------------------------------------------------------- names with shapes

SHAPED = "aten::conv2d (16×3×32×32, 8×3×3×3, 8)"


def whole_shapes(label):
    """Whether every shape in a shortened op name is one the name had,
    whole, or the mark of those left out."""
    shapes = label.partition(" (")[2].rstrip(")").split(", ")
    return set(shapes) <= {"16×3×32×32", "8×3×3×3", "8", "..."}


def test_an_ops_shapes_are_cut_whole_never_inside_one():
    assert shorten_name(SHAPED, 40) == SHAPED
    assert shorten_name(SHAPED, 36) == "aten::conv2d (16×3×32×32, ...)"
    assert shorten_name(SHAPED, 25) == "aten::conv2d (...)"
    for width in range(18, len(SHAPED)):
        label = shorten_name(SHAPED, width)
        assert len(label) <= width and label.startswith("aten::conv2d (")
        assert whole_shapes(label), label
    # a list of shapes is one item: kept whole or left out whole
    listed = "aten::cat ([2×3, 2×3, … 6 more], 16×3×32×32)"
    assert shorten_name(listed, 40) == \
        "aten::cat ([2×3, 2×3, … 6 more], ...)"
    assert shorten_name(listed, 30) == "aten::cat (...)"
    # other names are cut in the middle, as ever
    assert shorten_name("features.2 (MaxPool2d) (backward)", 20) == \
        shorten("features.2 (MaxPool2d) (backward)", 20)


def test_a_path_ending_in_an_op_keeps_its_shapes_whole():
    path = f"step/SmallCNN/features (Sequential)/features.0 (Conv2d)/{SHAPED}"
    label = shorten_path(path, 60)
    assert len(label) <= 60 and label.startswith("step/")
    assert label.endswith("/aten::conv2d (16×3×32×32, ...)")


def test_the_table_and_the_bottlenecks_never_cut_a_shape(no_color_env):
    stages = [crafted.stage("step", count=2, ns=5_000_000),
              crafted.stage("a_rather_long_module_name (Conv2d)", 0, 1,
                            count=2, ns=4_000_000),
              crafted.stage(SHAPED, 1, 2, count=2, ns=3_000_000)]
    rep = ap.Report.from_dict(crafted.report(stages, gpu_status=NO_CUDA))
    for width in (None, 100, 80, 60):
        # the diagnosis's lines wrap at spaces, names' spaces among them
        text = " ".join(format_report(rep, width=width).split())
        # at 60 columns the shape goes whole: "aten::conv2d (...)"
        assert ("aten::conv2d (16×3×32×32" if width != 60 else
                "aten::conv2d (...)") in text, width
        # a cut shape would leave a digit or × against the ellipsis
        assert not re.search(r"[\d×]\.\.\.|\.\.\.[\d×]", text), width
    assert "    aten::conv2d (16×3×32×32, ...)" in format_report(rep)


# ------------------------------------------------------- the header's notes

def test_children_that_all_reported_are_a_fact_not_a_warning():
    data = crafted.report([crafted.stage("work")], gpu_status=NO_CUDA,
                          children={"started": 2, "reported": 2, "lost": []})
    rep = ap.Report.from_dict(data)
    said = "child processes: 2 started, 2 reported"
    assert said in header_lines(rep)
    assert not any("child processes" in w for w in warning_lines(rep))
    # the notebook's table paints warnings red: this line is not one
    page = rep._repr_html_()
    assert f"<div>{said}</div>" in page
    assert f'<div class="warn">{said}' not in page
    assert ESC not in terminal_text(rep, Terminal(), color=True).split(
        said)[0][-10:]


def test_children_lost_are_a_warning():
    lost = [{"label": "worker 1", "pid": 7, "reason": "killed by SIGKILL"}]
    data = crafted.report([crafted.stage("work")], gpu_status=NO_CUDA,
                          children={"started": 2, "reported": 1,
                                    "lost": lost})
    rep = ap.Report.from_dict(data)
    warned = [w for w in warning_lines(rep) if "child processes" in w]
    assert warned == ["! child processes: 2 started, 1 reported, 1 lost: "
                      "their stages are missing from every figure"]
    assert not any("child processes" in h for h in header_lines(rep))
    assert '<div class="warn">! child processes' in rep._repr_html_()


def sampled(late, rounds=100):
    data = crafted.report([crafted.stage("work")], gpu_status=NO_CUDA)
    data["samples"] = {"interval_ns": 10**6, "rounds": rounds, "late": late,
                       "lost": 0, "frames": [], "stacks": []}
    return ap.Report.from_dict(data)


def test_late_rounds_are_explained_where_there_were_some():
    lines = header_lines(sampled(3))
    at = next(i for i, line in enumerate(lines)
              if line.startswith("code sampled"))
    assert "(late rounds: 3)" in lines[at]
    assert lines[at + 1].startswith("  late rounds: rounds taken more than "
                                    "2 intervals after the one before")
    assert not any("late rounds" in line for line in header_lines(sampled(0)))
    # 3 in 1,000: counted, not explained on every busy run
    few = header_lines(sampled(3, rounds=1000))
    assert any("(late rounds: 3)" in line for line in few)
    assert not any(line.startswith("  late rounds") for line in few)


def test_shares_summed_over_processes_say_why_they_pass_100():
    # two processes each spent 0.8 s of a 1 s run in "work"
    one = crafted.report([crafted.stage("work", ns=800_000_000)],
                         gpu_status=NO_CUDA)
    merged = ap.merge([ap.Report.from_dict(one), ap.Report.from_dict(one)])
    assert merged["work"].share == pytest.approx(1.6)
    text = str(merged)
    note = ("(share: each stage's time summed over the 2 processes, "
            "against the run's wall time; past 100% where processes ran it "
            "at once)")
    assert note in text.splitlines()
    assert "160.0%" in text
    # one process, or shares under 100 %: nothing to explain
    assert "summed over" not in str(ap.Report.from_dict(one))
    half = crafted.report([crafted.stage("work", ns=300_000_000)],
                          gpu_status=NO_CUDA)
    assert "summed over" not in str(ap.merge([ap.Report.from_dict(half)] * 2))


@pytest.mark.parametrize("width", [None, 60])
def test_wide_and_combining_characters_keep_the_columns_aligned(
        no_color_env, width):
    """A terminal shows a CJK character two columns wide and an accent
    over the letter before it: the table and the bottleneck list pad and
    cut by those columns, so that every row's figures line up (the count
    of 'データ読み込み' stood 7 columns right of the others)."""
    names = ["模型训练步骤非常长的名字模型训练步骤非常长的名字", "データ読み込み",
             "e\u0301tape", "plain"]
    stages = [crafted.stage(name, count=5, ns=5_000_000 - i)
              for i, name in enumerate(names)]
    text = format_report(ap.Report.from_dict(crafted.report(stages)),
                         width=width)
    rows = [line for line in table(text)[1:5] if line.strip()]
    assert len(rows) == 4
    # each row's count column ends at the same terminal column
    ends = {display_width(row[:row.index(" 5 ") + 2]) for row in rows}
    assert len(ends) == 1, rows
    lines = text.splitlines()
    top = lines[lines.index("Top 3 bottlenecks by self time:") + 1:][:3]
    assert len({display_width(line[:line.index(" ms ")]) for line in top}) \
        == 1, top
    if width is not None:
        assert max(map(display_width, table(text) + top)) <= width


def test_terminal_columns_of_marks_joiners_and_cut_accents():
    # an accent and a zero-width joiner take no column; a wide
    # character two
    assert display_width("e\u0301") == 1
    assert display_width("a\u200db") == 2
    assert display_width("データ") == 6
    # a cut never leaves an accent without its letter
    cut = shorten("abcde\u0301fgh" * 5, 9)
    assert display_width(cut) <= 9 and "...\u0301" not in cut
    assert shorten("データ読み込み", 7) == "デ...み"


def test_the_stragglers_and_the_summed_note_wrap_to_the_terminal_too(
        no_color_env):
    """A merged report's stragglers list (a wait for a straggling rank
    adds a clause) and the note under its table ran to 150 columns on an
    80-column terminal, which wrapped them at its edge."""
    ms = 1_000_000

    def rank(pid, forward_ms, backward_ms):
        step = crafted.stage("step", count=10,
                             ns=(forward_ms + backward_ms) * ms)
        forward = crafted.stage("forward", 0, 1, count=10,
                                ns=forward_ms * ms)
        backward = crafted.stage("backward", 0, 1, count=10,
                                 ns=backward_ms * ms)
        step["self_ns"] = 0
        forward["cpu_ns"] //= 10
        backward["cpu_ns"] = 20 * ms
        step["cpu_ns"] = forward["cpu_ns"] + backward["cpu_ns"]
        return ap.Report.from_dict(crafted.report([step, forward, backward],
                                                  pid=pid))

    merged = ap.merge([rank(100, 2, 34), rank(101, 32, 4),
                       rank(102, 2, 33)])
    assert "the others wait here for rank 1" in str(merged)
    text = format_report(merged, width=80)
    assert max(map(display_width, text.splitlines())) <= 80, text
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines)
                 if line.startswith("  1. step/backward") and
                 "slowest" in line)
    assert lines[first + 1].startswith("     ") and \
        lines[first + 1][5] != " ", text
    said = " ".join(text.split())
    assert "(the others wait here for rank 1, slowest in step/forward)" \
        in said
