"""next() on a real torch DataLoader iterator recorded as the stage
next(DataLoader) while watch_dataloaders() is in effect, and put back as
it was after. Profilers here leave the watching to the tests
(dataloaders=False), which the Profiler otherwise does itself."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import aquaprof as ap
from aquaprof.common.units import fmt_time
from aquaprof.analysis.diagnose import LOADER_STAGE
from aquaprof.record.torch import dataloader
from aquaprof.record.torch.dataloader import watch_dataloaders
from profiled import busy

torch = pytest.importorskip("torch")  # installed by `make test`
from torch.utils.data import DataLoader, Dataset  # noqa: E402
from torch.utils.data.dataloader import _BaseDataLoaderIter  # noqa: E402

ORIGINAL = vars(_BaseDataLoaderIter)["__next__"]
ITEMS, BATCH = 10, 3
BATCHES = 4                     # 3 + 3 + 3 + 1


@pytest.fixture(autouse=True)
def next_left_as_it_was():
    """Every test starts and ends with torch's own __next__ and nothing
    watching; a test that leaves a patch fails here, then undoes it."""
    assert vars(_BaseDataLoaderIter)["__next__"] is ORIGINAL
    assert dataloader._watchers == 0
    yield
    left = vars(_BaseDataLoaderIter)["__next__"]
    watchers = dataloader._watchers
    _BaseDataLoaderIter.__next__ = ORIGINAL
    dataloader._watches.clear()
    dataloader._watchers = 0
    assert left is ORIGINAL and watchers == 0


class Numbers(Dataset):
    """ITEMS numbers; each item a stage `getitem` holding `decode`."""

    def __init__(self, fail_at=None, work=0.0):
        self.fail_at, self.work = fail_at, work

    def __len__(self):
        return ITEMS

    @ap.stage("getitem")
    def __getitem__(self, i):
        with ap.stage("decode"):
            if i == self.fail_at:
                raise ValueError(f"item {i} is corrupt")
            busy(self.work)
        return torch.tensor([i])


def epoch(loader=None, name="train"):
    """One profiled epoch under the stage `name`: the report and the
    batches seen."""
    loader = loader or DataLoader(Numbers(), batch_size=BATCH)
    seen = []
    with ap.Profiler(cpu_resolution=0, dataloaders=False) as prof:
        with ap.stage(name):
            for batch in loader:
                seen.append(batch)
    return prof.report(), seen


def test_each_next_is_a_stage_under_the_open_one():
    unwatch = watch_dataloaders()
    try:
        rep, seen = epoch()
    finally:
        unwatch()
    assert len(seen) == BATCHES
    waited = rep["train/next(DataLoader)"]
    # the epoch's last next() raises StopIteration: a call, not an error
    assert waited.count == BATCHES + 1
    assert waited.raised == 0
    assert rep["train/next(DataLoader)/getitem"].count == ITEMS
    assert rep["train/next(DataLoader)/getitem/decode"].count == ITEMS
    spans = rep.spans()
    names = rep.stage_names
    mine = spans[spans["stage"] == names.index("train/next(DataLoader)")]
    assert len(mine) == BATCHES + 1
    assert not (mine["flags"] & ap._core.SPAN_RAISED).any()
    train = int(np.flatnonzero(
        spans["stage"] == names.index("train"))[0])
    assert (mine["parent"] == train).all()
    # every item was loaded inside one of the loop's waits
    items = spans[spans["stage"] == names.index(
        "train/next(DataLoader)/getitem")]
    waits = set(np.flatnonzero(
        spans["stage"] == names.index("train/next(DataLoader)")).tolist())
    assert set(items["parent"].tolist()) <= waits


def test_two_epochs_count_a_final_call_each():
    loader = DataLoader(Numbers(), batch_size=BATCH)
    unwatch = watch_dataloaders()
    try:
        with ap.Profiler(dataloaders=False) as prof:
            for _ in range(2):
                with ap.stage("epoch"):
                    assert len(list(loader)) == BATCHES
    finally:
        unwatch()
    assert prof.report()["epoch/next(DataLoader)"].count == 2 * (BATCHES + 1)


def test_an_error_in_the_dataset_counts_as_raised_and_reaches_the_loop():
    unwatch = watch_dataloaders()
    try:
        with ap.Profiler(dataloaders=False) as prof:
            with pytest.raises(ValueError, match="item 4 is corrupt"):
                for _ in DataLoader(Numbers(fail_at=4), batch_size=BATCH):
                    pass
    finally:
        unwatch()
    waited = prof.report()["next(DataLoader)"]
    assert (waited.count, waited.raised) == (2, 1)   # batch 0, then 3-5


def test_unwatching_puts_next_back_and_records_nothing_more():
    unwatch = watch_dataloaders()
    wrapper = vars(_BaseDataLoaderIter)["__next__"]
    assert wrapper is not ORIGINAL and wrapper.__wrapped__ is ORIGINAL
    unwatch()
    assert vars(_BaseDataLoaderIter)["__next__"] is ORIGINAL
    rep, seen = epoch()
    assert len(seen) == BATCHES
    assert "train/next(DataLoader)" not in rep
    assert rep["train/getitem"].count == ITEMS


def test_watching_with_no_profiler_running_changes_no_batch():
    unwatch = watch_dataloaders()
    try:
        batches = [b.tolist() for b in DataLoader(Numbers(), batch_size=BATCH)]
    finally:
        unwatch()
    assert batches == [[[0], [1], [2]], [[3], [4], [5]], [[6], [7], [8]],
                       [[9]]]


def test_two_watchers_share_one_wrapper_until_the_last_one_ends():
    first = watch_dataloaders()
    wrapper = vars(_BaseDataLoaderIter)["__next__"]
    second = watch_dataloaders()
    assert vars(_BaseDataLoaderIter)["__next__"] is wrapper   # not wrapped twice
    rep, _ = epoch()
    assert rep["train/next(DataLoader)"].count == BATCHES + 1
    assert "train/next(DataLoader)/next(DataLoader)" not in rep
    first()
    first()                  # acts once: the second still watches
    assert vars(_BaseDataLoaderIter)["__next__"] is wrapper
    rep, _ = epoch()
    assert rep["train/next(DataLoader)"].count == BATCHES + 1
    second()
    assert vars(_BaseDataLoaderIter)["__next__"] is ORIGINAL
    second()
    assert dataloader._watchers == 0


def test_a_patch_made_meanwhile_is_left_in_place():
    unwatch = watch_dataloaders()
    ours = vars(_BaseDataLoaderIter)["__next__"]
    calls = []

    def theirs(iterator):
        calls.append(1)
        return ours(iterator)

    _BaseDataLoaderIter.__next__ = theirs
    unwatch()
    assert vars(_BaseDataLoaderIter)["__next__"] is theirs
    rep, seen = epoch()      # ours, still called by theirs, passes through
    assert len(seen) == BATCHES and len(calls) == BATCHES + 1
    assert "train/next(DataLoader)" not in rep
    again = watch_dataloaders()       # wraps theirs; the old one stays off
    rep, _ = epoch()
    assert rep["train/next(DataLoader)"].count == BATCHES + 1
    assert "train/next(DataLoader)/next(DataLoader)" not in rep
    again()
    assert vars(_BaseDataLoaderIter)["__next__"] is theirs
    _BaseDataLoaderIter.__next__ = ORIGINAL


def test_our_wrapper_put_back_by_another_is_reused():
    unwatch = watch_dataloaders()
    ours = vars(_BaseDataLoaderIter)["__next__"]
    _BaseDataLoaderIter.__next__ = lambda it: ours(it)
    unwatch()
    _BaseDataLoaderIter.__next__ = ours       # the other library's restore
    again = watch_dataloaders()
    assert vars(_BaseDataLoaderIter)["__next__"] is ours
    rep, _ = epoch()
    assert rep["train/next(DataLoader)"].count == BATCHES + 1
    again()
    assert vars(_BaseDataLoaderIter)["__next__"] is ORIGINAL


def test_a_watch_made_before_torch_is_imported_begins_at_its_import(
        monkeypatch):
    """As under `aquaprof run`: the profiler starts, then the script
    imports torch. Played here by taking the module out of sys.modules
    and importing it again (a fresh module, with its own iterator
    class)."""
    for name in [m for m in sys.modules
                 if m == "torch.utils.data.dataloader"]:
        monkeypatch.delitem(sys.modules, name)
    unwatch = watch_dataloaders()
    assert dataloader._watchers == 0 and dataloader._FINDER in sys.meta_path
    import importlib
    fresh = importlib.import_module("torch.utils.data.dataloader")
    try:
        assert fresh._BaseDataLoaderIter is not _BaseDataLoaderIter
        assert dataloader._watchers == 1
        assert getattr(vars(fresh._BaseDataLoaderIter)["__next__"],
                       "__aquaprof_patch__", None) is not None
        loader = fresh.DataLoader(Numbers(), batch_size=BATCH)
        with ap.Profiler(dataloaders=False) as prof:
            list(loader)
        assert prof.report()[LOADER_STAGE].count == BATCHES + 1
    finally:
        unwatch()
    assert dataloader._watchers == 0
    assert dataloader._FINDER not in sys.meta_path
    assert getattr(vars(fresh._BaseDataLoaderIter)["__next__"],
                   "__aquaprof_patch__", None) is None


def test_a_watch_ended_before_torch_is_imported_leaves_no_trace():
    code = ("import sys\n"
            "import aquaprof as ap\n"
            "with ap.Profiler():\n"
            "    pass\n"
            "assert not any(type(f).__module__.startswith('aquaprof') "
            "and type(f).__module__ != 'aquaprof.moved' "   # old paths
            "for f in sys.meta_path), sys.meta_path\n"
            "from torch.utils.data import dataloader\n"
            "assert not hasattr(dataloader._BaseDataLoaderIter.__next__, "
            "'__aquaprof_patch__')\n"
            "print('ok')\n")
    runs_fresh(code)


def runs_fresh(code):
    """Runs code in a fresh interpreter, where torch is not imported yet;
    it ends by printing ok."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


def test_watching_never_imports_torch():
    code = ("import sys\n"
            "from aquaprof.record.torch.dataloader import watch_dataloaders\n"
            "unwatch = watch_dataloaders()\n"
            "unwatch()\n"
            "assert not any(m == 'torch' or m.startswith('torch.') "
            "for m in sys.modules), 'torch imported'\n"
            "print('ok')\n")
    runs_fresh(code)


def test_with_two_workers_the_loop_records_its_waits():
    """Workers of the default start method; the parent's side only: each
    wait for a batch, and no dataset stage in the parent."""
    class Slow(Dataset):
        def __len__(self):
            return 16

        def __getitem__(self, i):
            time.sleep(0.002)
            return torch.tensor([i])

    unwatch = watch_dataloaders()
    try:
        rep, seen = epoch(DataLoader(Slow(), batch_size=4, num_workers=2))
    finally:
        unwatch()
    assert torch.cat(seen).flatten().tolist() == list(range(16))
    assert rep["train/next(DataLoader)"].count == 4 + 1
    assert rep["train/next(DataLoader)"].raised == 0
    assert [s.path for s in rep] == ["train", "train/next(DataLoader)"]


def test_diagnose_names_the_stage_loaded_in_the_loop():
    """num_workers=0: the dataset runs inside next(); `decode` is its
    heavy part, the loop's own work light."""
    unwatch = watch_dataloaders()
    try:
        with ap.Profiler(dataloaders=False) as prof:
            with ap.stage("train"):
                for _ in DataLoader(Numbers(work=0.004), batch_size=BATCH):
                    busy(0.001)
    finally:
        unwatch()
    rep = prof.report()
    wait = rep["train/next(DataLoader)"]
    decode = rep["train/next(DataLoader)/getitem/decode"]
    found = [f for f in rep.diagnose(top=1) if f.path == wait.path]
    assert len(found) == 1 and found[0].kind == "data-loading-bound"
    spans = rep.spans()
    spans = spans[spans["stage"] == wait.id]
    loop = (spans["end_ns"].max() - spans["start_ns"].min()) * 1e-9
    share = wait.wall.total / loop
    assert share > 0.6           # 40 ms of loading against 4 ms of work
    assert found[0].evidence.startswith(
        f"the loop spent {share * 100:.0f} % of its time from its first "
        f"batch to its last ({fmt_time(loop)}) loading its batches itself "
        f"in next(DataLoader), where getitem/decode "
        f"took {decode.self_time / wait.wall.total * 100:.0f} % of it; ")
    assert "num_workers=0" in found[0].evidence
    assert "num_workers=N" in found[0].fix
    assert "getitem/decode cheaper" in found[0].fix
    assert LOADER_STAGE == "next(DataLoader)"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_the_lock_is_held_can_watch():
    """A DataLoader worker forked while another thread started or stopped
    a profiler: the child's own profiler can still watch."""
    with dataloader._LOCK:
        pid = os.fork()
        if pid == 0:                                  # the child
            unwatch = watch_dataloaders()
            ok = dataloader._watchers == 1
            unwatch()
            os._exit(0 if ok and dataloader._watchers == 0 else 1)
    deadline = time.monotonic() + 30
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung on the lock")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_profiler_watches_while_it_runs_and_puts_next_back():
    loader = DataLoader(Numbers(), batch_size=BATCH)
    with ap.Profiler() as prof:
        assert vars(_BaseDataLoaderIter)["__next__"] is not ORIGINAL
        with ap.stage("train"):
            for _ in loader:
                pass
    assert vars(_BaseDataLoaderIter)["__next__"] is ORIGINAL
    assert prof.report()[f"train/{LOADER_STAGE}"].count == BATCHES + 1


def test_a_watch_whose_owner_stopped_is_dropped_at_the_next_change():
    """A watch never ended (a Ctrl-C between a profiler's stop and its
    unwatch) is dropped once its owner says it is done."""
    running = [True]
    watch_dataloaders(lambda: running[0])          # never ended
    assert vars(_BaseDataLoaderIter)["__next__"] is not ORIGINAL
    running[0] = False
    watch_dataloaders()()                          # any later change
    assert vars(_BaseDataLoaderIter)["__next__"] is ORIGINAL
    assert dataloader._watchers == 0
