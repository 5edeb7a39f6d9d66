"""The text call tree of a stage (aquaprof.views.calltree), what `aquaprof
run` prints: shares worked out by hand on planted samples."""
from sampled_reports import MS, profile_stages, with_samples

from aquaprof.views.calltree import call_tree


def planted():
    rep = profile_stages()
    # decode: <module>/main/run_decode then nms 60 %, parse 39 %, iou 1 %
    return with_samples(rep, [
        (0, 1, "decode", (0, 1, 2, 3), 60, 60 * MS, 60 * MS),
        (0, 1, "decode", (0, 1, 2, 5), 39, 39 * MS, 39 * MS),
        (0, 1, "decode/nms", (0, 1, 2, 4), 1, 1 * MS, 1 * MS),
        (0, 1, "load", (0, 1, 6), 5, 5 * MS, 0),
    ])


def test_the_tree_starts_at_the_code_that_opened_the_stage():
    # sub-stages count in their stage's tree: iou was sampled in nms
    assert call_tree(planted(), "decode") == [
        " total    own  function (file:line)",
        "100.0%   0.0%  run_decode (pipeline.py:20)",
        " 60.0%  60.0%    nms (postproc.py:40)",
        " 39.0%  39.0%    parse (pipeline.py:80)",
        "  1.0%   1.0%    iou (postproc.py:60)",
    ]


def test_small_branches_fold_into_one_line():
    lines = call_tree(planted(), "decode", min_share=0.05)
    assert lines[-1].strip() == "(1 more under 5%)"
    assert not any("iou" in line for line in lines)


def test_depth_is_bounded():
    lines = call_tree(planted(), "decode", max_depth=1)
    assert len(lines) == 2 and "run_decode" in lines[1]


def test_start_file_cuts_the_frames_above_the_script():
    lines = call_tree(planted(), "load", start_file="/app/main.py")
    assert "idle (main.py:90)" in lines[-1]


def test_a_stage_with_no_samples_has_no_tree():
    rep = with_samples(profile_stages(), [
        (0, 1, "load", (0, 1, 6), 5, 5 * MS, 0)])
    assert call_tree(rep, "decode") == []


def test_start_file_leaves_out_stacks_that_never_reached_the_script():
    # a sample while runpy read the script (frames of other files):
    # no frame of the script, no line in its tree
    rep = with_samples(profile_stages(), [
        (0, 1, "load", (0, 1, 6), 5, 5 * MS, 0),
        (0, 1, "load", (2, 5), 1, 1 * MS, 1 * MS)])
    lines = call_tree(rep, "load", start_file="/app/main.py")
    assert len(lines) == 2 and "idle (main.py:90)" in lines[1]
    assert lines[1].startswith("100.0%")
