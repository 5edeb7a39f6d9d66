"""Leaks counted in allocated blocks, for any room's tests of the C
extension: a leak of one block a call shows as thousands over a few
thousand calls."""
import gc
import sys


def settled_blocks():
    """Allocated blocks once garbage is collected and CPython's method
    cache is emptied: that cache keeps a reference to the name of every
    method C code calls by a C string (NumPy's flags setter calls
    "setflags", its cumsum "accumulate"), a new string each call in its
    own slot, so it grows by up to 4096 blocks that are not a leak."""
    gc.collect()
    sys._clear_type_cache()
    return sys.getallocatedblocks()


def blocks_after(fn, rounds=3000):
    """Blocks still allocated after rounds calls of fn; a leak of one
    block a call would show thousands."""
    for _ in range(rounds // 2):  # free lists and caches settle first
        fn()
    before = settled_blocks()
    for _ in range(rounds):
        fn()
    return settled_blocks() - before


def where_blocks_grow(fn, rounds):
    """The three largest growths over rounds more calls of fn, by
    traceback: what a failing leak test says, so that a leak seen on one
    machine only (a GPU machine) names its source in the log."""
    import tracemalloc
    tracemalloc.start(16)
    try:
        settled_blocks()
        before = tracemalloc.take_snapshot()
        for _ in range(rounds):
            fn()
        settled_blocks()
        top = tracemalloc.take_snapshot().compare_to(before, "traceback")
    finally:
        tracemalloc.stop()
    return "\n\n".join(f"{stat}\n" + "\n".join(stat.traceback.format())
                       for stat in top[:3])
