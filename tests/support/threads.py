"""The process's threads as /proc lists them, for tests that check a
thread they started has ended. Sets of ids, not counts: a thread another
test left behind may end meanwhile, and a count would then read as one
of ours gone."""
import os
from typing import Set


def thread_ids() -> Set[str]:
    return set(os.listdir("/proc/self/task"))


def left_behind(before: Set[str]) -> Set[str]:
    """The threads alive now that were not in `before`."""
    return thread_ids() - before
