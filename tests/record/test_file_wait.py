"""_core._wait_for_file: how a captured child's thread waits for its
parent's request, looking often with the GIL released."""
import threading
import time

import pytest

from aquaprof import _core


def test_the_index_of_the_first_file_there(tmp_path):
    there = tmp_path / "b"
    there.write_text("")
    assert _core._wait_for_file([str(tmp_path / "a"), str(there)],
                                0.01, 5.0) == 1


def test_a_file_made_meanwhile_ends_the_wait_within_a_look(tmp_path):
    """By a Python thread: the wait holds no GIL, or the file would never
    come."""
    path = tmp_path / "request"
    threading.Timer(0.1, path.write_text, ("",)).start()
    start = time.monotonic()
    assert _core._wait_for_file([str(path)], 0.01, 20.0) == 0
    assert time.monotonic() - start < 5.0


def test_none_there_by_the_timeout_is_minus_one(tmp_path):
    start = time.monotonic()
    assert _core._wait_for_file([str(tmp_path / "a")], 0.01, 0.05) == -1
    assert time.monotonic() - start >= 0.05


def test_no_paths_is_minus_one_at_once():
    start = time.monotonic()
    assert _core._wait_for_file([], 0.01, 10.0) == -1
    assert time.monotonic() - start < 5.0


@pytest.mark.parametrize("args, error", [
    ((["a"], 0.0, 1.0), ValueError),
    ((["a"], 1e-9, 1.0), ValueError),
    ((["a"], -1.0, 1.0), ValueError),
    ((["a"], float("nan"), 1.0), ValueError),
    ((["a"], 0.01, -1.0), ValueError),
    ((["a"], 0.01, float("inf")), ValueError),
    ((None, 0.01, 1.0), TypeError),
    (([3], 0.01, 1.0), TypeError),
    ((["a\0b"], 0.01, 1.0), ValueError),
])
def test_bad_arguments_are_refused(args, error):
    with pytest.raises(error):
        _core._wait_for_file(*args)
