"""Report files written by hand, as an attacker or another tool would:
valid ones of any shape (deep chains, many stages, odd names) to push at
the loader's limits, and helpers to bend them into invalid ones."""
import base64
import json
import zlib

import numpy as np

from aquaprof import _core
from aquaprof.model import schema

START = 1_000_000_000


def stage(name, parent=-1, depth=0, count=1, ns=1000):
    """A stage dict with `count` calls of `ns` each, all in one bucket."""
    bucket = int(np.searchsorted(_core.HIST_LOWER_NS, ns, "right")) - 1
    return {"name": name, "parent": parent, "depth": depth, "count": count,
            "raised": 0, "unclosed": 0, "total_ns": count * ns,
            "self_ns": count * ns, "min_ns": ns, "max_ns": ns,
            "mean_ns": float(ns), "m2": 0.0, "cpu_ns": count * ns,
            "items": 0, "mem_peak": 0, "mem_delta": 0,
            "hist": [[bucket, count]] if count else []}


def report(stages, spans=None, **run):
    """A report's JSON dict: `stages` as given, one thread, `spans` (a
    SPAN_DTYPE array; none by default), run fields overridden by `run`."""
    spans = np.zeros(0, _core.SPAN_DTYPE) if spans is None else spans
    data = {"start_ns": START, "stop_ns": START + 10**9, "clock": "tsc",
            "pid": 42, "max_spans": 1000, "memory": False,
            "memory_interval_ns": 10**6, "cpu_resolution_ns": 20000,
            "spans_dropped": 0, "unclosed": 0, "lost": 0, "stages": stages,
            "threads": [{"index": 0, "native_id": 42, "spans": len(spans),
                         "dropped": 0}],
            "spans": spans}
    data.update(run)
    return json.loads(json.dumps(schema.encode(data)))


def chain(depth, name="s"):
    """A report whose stages nest `depth` + 1 deep (the deepest at depth
    `depth`), one call each, with the spans nested likewise."""
    stages = [stage(name, i - 1, i) for i in range(depth + 1)]
    spans = np.zeros(depth + 1, _core.SPAN_DTYPE)
    spans["stage"] = np.arange(depth + 1)
    spans["parent"] = np.arange(depth + 1) - 1
    spans["start_ns"] = START + np.arange(depth + 1)
    spans["end_ns"] = START + 2 * (depth + 1) - np.arange(depth + 1)
    return report(stages, spans)


def flat(n, calls=1):
    """A report of n top-level stages, `calls` spans each."""
    stages = [stage(f"s{i}", count=calls) for i in range(n)]
    spans = np.zeros(n * calls, _core.SPAN_DTYPE)
    spans["stage"] = np.repeat(np.arange(n), calls)
    spans["parent"] = -1
    spans["start_ns"] = START + np.arange(n * calls) * 2000
    spans["end_ns"] = spans["start_ns"] + 1000
    return report(stages, spans)


def on_machine(rep, **busy):
    """The report as if its run had met a machine this busy (host fields
    other_cpus, steal)."""
    from aquaprof import Report
    return Report(dict(rep._data, host=dict(rep.meta.get("host", {}),
                                            **busy)))


def packed(raw):
    """Bytes as a report array's data field (zlib, base64)."""
    return base64.b64encode(zlib.compress(raw)).decode("ascii")


def zlib_bomb(size):
    """A complete zlib stream of `size` zero bytes, about size / 1000 bytes
    long, made in a second for 4 GiB: one 16 MiB block compressed after a
    full flush is the same bytes each time, so it is repeated, and the
    trailer's checksum is that of all `size` bytes."""
    chunk = bytes(1 << 24)
    deflate = zlib.compressobj(9)
    head = deflate.compress(chunk) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(chunk) + deflate.flush(zlib.Z_FULL_FLUSH)
    assert head[2:] == block            # the zlib header, then the block
    blocks, rest = divmod(size, len(chunk))
    tail = deflate.compress(bytes(rest)) + deflate.flush()
    checksum = 1
    for _ in range(blocks):
        checksum = zlib.adler32(chunk, checksum)
    checksum = zlib.adler32(bytes(rest), checksum)
    return head[:2] + block * blocks + tail[:-4] + checksum.to_bytes(4, "big")
