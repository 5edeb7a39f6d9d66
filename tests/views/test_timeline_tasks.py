"""The HTML page's timeline of an asyncio program: overlapping tasks each
on a lane of their own (no bar drawn over another), as many lanes a
thread as the page can hold and the rest counted, and bands titled by
the Python thread's name, as the trace titles its tracks."""
import asyncio
import re
import threading
from collections import defaultdict

import pytest

import aquaprof as ap
from aquaprof.views import timeline
from aquaprof.views.threads import thread_label

TASKS = 20


async def task(i):
    with ap.stage("task"):
        await asyncio.sleep(0.001 * (i % 7) + 0.002)


async def serve():
    with ap.stage("gather"):
        await asyncio.gather(*(task(i) for i in range(TASKS)))


def in_a_thread():
    asyncio.run(serve())


@pytest.fixture(scope="module")
def tasks():
    with ap.Profiler() as prof:
        asyncio.run(serve())
        worker = threading.Thread(target=in_a_thread, name="server")
        worker.start()
        worker.join()
    return prof.report()


BAR = re.compile(r'<rect x="([\d.]+)" y="(\d+)" width="([\d.]+)" '
                 r'height="\d+" fill="[^"]+"><title>([^:<]+):')


def bars(svg):
    """(x, y, width, stage path) of every bar."""
    return [(float(x), int(y), float(w), path)
            for x, y, w, path in BAR.findall(svg)]


def test_overlapping_tasks_never_share_a_row(tasks):
    svg, note = timeline.spans_svg(tasks)
    drawn = bars(svg)
    assert len(drawn) == len(tasks.spans()) and note == ""
    rows = defaultdict(list)
    for x, y, w, _ in drawn:
        rows[y].append((x, x + w))
    for row in rows.values():
        row.sort()
        # each bar is at least half a unit wide; neighbours may touch
        assert all(end <= after + 0.01 for (_, end), (after, _)
                   in zip(row, row[1:])), row
    task_rows = {y for _, y, _, path in drawn if path == "gather/task"}
    # every task of both loops slept at once
    assert len(task_rows) == 2 * TASKS


def test_each_lane_is_titled_under_its_thread(tasks):
    svg, _ = timeline.spans_svg(tasks)
    titles = re.findall(r'<text x="4" y="\d+">([^<]*)</text>', svg)
    assert titles == [thread_label(t) for t in tasks.threads]
    assert titles[0].startswith("MainThread (tid ")
    assert titles[1].startswith("server (tid ")
    lanes = re.findall(r'class="lane"[^>]*>task lane (\d+)<', svg)
    assert lanes == [str(n) for n in range(1, TASKS)] * 2


def test_a_long_thread_name_is_cut_in_the_middle(tasks):
    long = dict(tasks.threads[1], name="a-very-long-thread-name-" * 4)
    titled = tasks.__class__.from_dict(
        dict(tasks.to_dict(), threads=[tasks.threads[0], long]))
    svg, _ = timeline.spans_svg(titled)
    title = re.findall(r'<text x="4" y="\d+">([^<]*)</text>', svg)[1]
    assert len(title) <= timeline.TITLE_CHARS
    assert title.startswith("a-very") and \
        title.endswith(f"(tid {long['native_id']})")


def test_lanes_past_the_most_a_thread_draws_are_counted_not_drawn(
        tasks, monkeypatch):
    """A server with a thousand tasks open at once would draw a page
    14,000 pixels tall: a thread draws MAX_LANES lanes, and says how
    many task lanes and spans it left to the trace."""
    whole, _ = timeline.spans_svg(tasks)
    monkeypatch.setattr(timeline, "MAX_LANES", 8)
    svg, note = timeline.spans_svg(tasks)
    lanes = re.findall(r'class="lane"[^>]*>task lane (\d+)<', svg)
    assert lanes == [str(n) for n in range(1, 8)] * 2
    # each loop's 20 tasks: the first under `gather` in the thread's own
    # lane, 7 on lanes 1 to 7, 12 on lanes past them
    more = re.findall(r'class="lane"[^>]*>([\d,]+) more task lanes, '
                      r'([\d,]+) spans: in the trace<', svg)
    assert more == [("12", "12")] * 2
    assert len(bars(svg)) == len(tasks.spans()) - 24
    assert note == ("24 spans on task lanes past the 8 a thread left out "
                    "(the trace draws them all)")
    height = int(re.search(r'viewBox="0 0 \d+ (\d+)"', svg).group(1))
    assert height < int(re.search(r'viewBox="0 0 \d+ (\d+)"',
                                  whole).group(1)) - 20 * timeline.ROW
