"""The report schema, in one place: every field a report holds, how it is
checked, and how it is encoded to JSON and decoded back.

The C binding builds the same dicts (csrc/module/report.c,
csrc/module/gpu_report.c) and docs/report-format.md lists the same
fields; tests/model/test_schema.py fails when the three disagree.

A field table maps each field to its JSON type. A float field takes ints
too; bool (an int in Python) only a bool field.
"""
from __future__ import annotations

import base64
import binascii
import json
import math
import zlib
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..common.checks import whole
from .. import _core
from . import limits

FORMAT = "aquaprof.report"
VERSION = 1
ENCODING = "zlib+base64"

Fields = Dict[str, type]

#: what makes a JSON object a report, before any run field
ENVELOPE_FIELDS: Fields = {"format": str, "version": int}

#: run-level fields, all required
RUN_FIELDS: Fields = {
    "start_ns": int, "stop_ns": int, "clock": str, "pid": int,
    "max_spans": int, "memory": bool, "memory_interval_ns": int,
    "cpu_resolution_ns": int, "spans_dropped": int, "unclosed": int,
    "lost": int, "stages": list, "threads": list, "spans": dict,
}
#: run-level fields a report may lack
RUN_OPTIONAL: Fields = {
    "host": dict, "memory_samples": list, "overhead": dict,
    "processes": list, "gpu_status": str, "gpu": dict, "nested": bool,
    "max_stages": int, "stages_overflowed": int, "stages_too_deep": int,
    "spans_shed": int,
    "label": str, "children": dict, "worker": int, "samples": dict,
    "measured": list, "ended_by": str,
}
STAGE_FIELDS: Fields = {
    "name": str, "parent": int, "depth": int, "count": int, "raised": int,
    "unclosed": int, "total_ns": int, "self_ns": int, "min_ns": int,
    "max_ns": int, "mean_ns": float, "m2": float, "cpu_ns": int,
    "items": int, "mem_peak": int, "mem_delta": int, "hist": list,
}
#: stage fields that reports written by earlier versions lack
STAGE_OPTIONAL: Fields = {"suspended": int, "mem_rise": int,
                          "proc_cpu_ns": int}
THREAD_FIELDS: Fields = {"index": int, "native_id": int, "spans": int,
                         "dropped": int}
#: "name": the Python thread's name (threading.Thread.name) at the
#: report; absent for a thread threading did not start, and in files
#: written before names were recorded
#: "folded": the row is no thread but the sum of this many ended threads
#: (past the first 16,384, those that kept no span), whose index a new
#: thread took
THREAD_OPTIONAL: Fields = {"cpu_reads": int, "process": int, "name": str,
                           "folded": int}
#: all optional: a host field, where present, has this type
HOST_OPTIONAL: Fields = {
    "hostname": str, "platform": str, "python": str, "aquaprof": str,
    "argv": list, "cwd": str, "started_at": float,
    # the CPU's model name; the kernel's boot (Linux's boot_id), which
    # processes that read one monotonic clock share
    "cpu": str, "boot_id": str,
    # the CPUs the process could run on, and the machine's load average
    # over the last minute when the report was made
    "cpus": int, "load": float,
    # during the run: the CPUs other processes kept busy on average, and
    # the share of all CPU time a hypervisor took (Linux; runs long
    # enough for the kernel's 10 ms ticks, BUSY_SECONDS)
    "other_cpus": float, "steal": float,
    # the CPUs this process used on average from start to stop, all its
    # threads, and its child processes reaped meanwhile; and where one
    # thread started and stopped the run, its native id, CPU seconds and
    # run delay (seconds runnable but not running) meanwhile
    "process_cpus": float, "children_cpus": float, "thread_id": int,
    "thread_cpu": float, "thread_delay": float,
    # the CPUs its cgroup's quota allows (a container's CPU limit), and
    # that cgroup's quota periods during the run and those it was
    # throttled in
    "cpu_quota": float, "quota_periods": int, "throttled_periods": int,
}
#: the shortest run (seconds, on a machine of 2 CPUs; times the square
#: root of half the CPUs on larger ones) whose machine's busy CPUs are
#: said: the kernel counts each CPU's time in ticks of 10 ms, and over a
#: shorter run their rounding alone moves the figure by about a tenth of
#: a CPU
BUSY_SECONDS = 0.25
OVERHEAD_FIELDS: Fields = {"span_ns": float, "inside_ns": float}
OVERHEAD_OPTIONAL: Fields = {
    "read_ns": float, "resolution_ns": float,
    # the torch hooks' calibrated cost a call (docs/torch.md#cost), and
    # the calls of theirs that no stage counts
    "torch_op_ns": float, "torch_quiet_ns": float, "torch_carry_ns": float,
    "torch_module_ns": float, "torch_module_inside_ns": float,
    "torch_module_nograd_ns": float, "torch_module_nograd_inside_ns": float,
    "torch_backward_ns": float, "torch_backward_inside_ns": float,
    "torch_quiet_calls": int, "torch_carried_calls": int}
PROCESS_FIELDS: Fields = {"pid": int, "label": str}
CHILDREN_FIELDS: Fields = {"started": int, "reported": int, "lost": list}
CHILDREN_OPTIONAL: Fields = {"error": str}
LOST_CHILD_FIELDS: Fields = {"pid": int, "label": str, "reason": str}
PROCESS_OPTIONAL: Fields = {"host": dict, "memory_samples": list,
                             "stages": list, "worker": int}
GPU_FIELDS: Fields = {"events": dict, "kernel_names": list,
                      "devices": list, "dropped": int, "unattributed": int,
                      "incomplete": int, "over_max": int, "max_events": int,
                      "late": int}
#: GPU counters that files written before them lack: 0 there
GPU_COUNTERS_ADDED = ("incomplete", "over_max", "max_events", "late")
#: the GPU event of files written before correlation ids were extended
#: past 32 bits; loaded into GPU_DTYPE
GPU_DTYPE_32 = np.dtype([
    ("start_ns", "<i8"), ("end_ns", "<i8"), ("bytes", "<i8"),
    ("span", "<i8"), ("stage", "<i4"), ("correlation", "<u4"),
    ("name", "<u4"), ("device", "<u4"), ("stream", "<u4"),
    ("grid", "<u4", (3,)), ("block", "<u4", (3,)), ("shared", "<u4"),
    ("registers", "<u2"), ("kind", "u1"), ("copy", "u1"), ("pinned", "u1"),
    ("pad", "V3")])
#: the sampler's section (docs/sampling.md); its "timeline" is an
#: encoded array in JSON, a TIMELINE_DTYPE array in memory
SAMPLES_FIELDS: Fields = {"interval_ns": int, "rounds": int, "late": int,
                          "lost": int, "frames": list, "stacks": list}
SAMPLES_OPTIONAL: Fields = {"timeline": dict, "timeline_dropped": int,
                             "unseen_ns": int, "held_ns": int,
                             "own_ns": int, "delay_ns": int, "gil_ns": int,
                             "lock_ns": int, "unanswered": int,
                             "threads": list}
#: a stack's figures: [process, tid, stage, frames, count, wall_ns, cpu_ns]
#: and, in files that carry the waits (the section's delay_ns, gil_ns and
#: lock_ns say which were measured), delay_ns, gil_ns and lock_ns (files
#: from before it end at gil_ns)
STACK_LENGTHS = (7, 9, 10)
#: each sample in time order: when it was taken, its stack's index, and
#: the CPU time it stands for in us (CPU_UNKNOWN in files from before it)
TIMELINE_DTYPE = np.dtype([("t_ns", "<i8"), ("stack", "<u4"),
                           ("cpu_us", "<u4")])
#: the timeline of files written before the samples' CPU time was kept
TIMELINE_DTYPE_TIMES = np.dtype([("t_ns", "<i8"), ("stack", "<u4")])
CPU_UNKNOWN = 0xFFFFFFFF
DEVICE_FIELDS: Fields = {
    "name": str, "sms": int, "threads_per_sm": int, "blocks_per_sm": int,
    "registers_per_sm": int, "shared_per_sm": int, "warp_size": int,
}

# GPU event kinds and copy directions, as the C layer writes them
KERNEL, MEMCPY, MEMSET = _core.GPU_KERNEL, _core.GPU_MEMCPY, _core.GPU_MEMSET
ALLOC, FREE, SYNC = _core.GPU_ALLOC, _core.GPU_FREE, _core.GPU_SYNC
GPU_KINDS = (KERNEL, MEMCPY, MEMSET, ALLOC, FREE, SYNC)
COPY_NAMES = {_core.COPY_H2D: "H2D", _core.COPY_D2H: "D2H",
              _core.COPY_D2D: "D2D", _core.COPY_OTHER: "other"}


class ReportError(ValueError):
    """A file or dict that is not a valid aquaprof report."""


# ------------------------------------------------------------ encoding
def encode(data: Dict[str, Any]) -> Dict[str, Any]:
    """A report's data as a JSON-ready dict (arrays compressed, base64)."""
    d: Dict[str, Any] = {"format": FORMAT, "version": VERSION}
    d.update(data)
    d["spans"] = encode_array(data["spans"], _core.SPAN_DTYPE)
    if "gpu" in d:
        d["gpu"] = dict(d["gpu"], events=encode_array(
            d["gpu"]["events"], _core.GPU_DTYPE))
    if "timeline" in d.get("samples", {}):
        d["samples"] = dict(d["samples"], timeline=encode_array(
            d["samples"]["timeline"], TIMELINE_DTYPE))
    return d


def decode(obj: Any) -> Dict[str, Any]:
    """Inverse of encode(): a report's data, its arrays decoded (Report()
    validates the rest); ReportError naming what is wrong."""
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise ReportError(f"not an aquaprof report (expected "
                          f"'format': {FORMAT!r})")
    version = obj.get("version")
    if not whole(version):
        raise ReportError("report has no integer 'version'")
    if version > VERSION:
        raise ReportError(f"report schema version {version} is newer "
                          f"than this aquaprof reads ({VERSION}); "
                          f"upgrade aquaprof")
    if version < 1:
        raise ReportError(f"report schema version {version} is invalid")
    data = {k: v for k, v in obj.items() if k not in ("format", "version")}
    if "spans" not in data:
        raise ReportError("report lacks 'spans'")
    data["spans"] = decode_array(data["spans"], _core.SPAN_DTYPE, "spans")
    if "gpu" in data:
        if not isinstance(data["gpu"], dict):
            raise ReportError("report['gpu'] must be an object")
        data["gpu"] = {**{k: 0 for k in GPU_COUNTERS_ADDED},
                       **data["gpu"], "events": _decode_gpu_events(
                           data["gpu"].get("events"))}
    samples = data.get("samples")
    if isinstance(samples, dict) and "timeline" in samples:
        data["samples"] = dict(samples, timeline=_decode_timeline(
            samples["timeline"]))
    return data


def _decode_timeline(obj: Any) -> np.ndarray:
    """The samples' timeline in TIMELINE_DTYPE, from a file of either
    layout (the CPU time CPU_UNKNOWN where the file has none)."""
    if (isinstance(obj, dict)
            and obj.get("dtype") == _dtype_fields(TIMELINE_DTYPE_TIMES)):
        old = decode_array(obj, TIMELINE_DTYPE_TIMES, "samples timeline")
        timeline = np.empty(len(old), TIMELINE_DTYPE)
        timeline["t_ns"], timeline["stack"] = old["t_ns"], old["stack"]
        timeline["cpu_us"] = CPU_UNKNOWN
        return timeline
    return decode_array(obj, TIMELINE_DTYPE, "samples timeline")


def _dtype_fields(dtype: np.dtype) -> List[Any]:
    """dtype.descr as JSON gives it back (tuples become lists)."""
    return json.loads(json.dumps(dtype.descr))


def encode_array(records: np.ndarray, dtype: np.dtype) -> Dict[str, Any]:
    """A record array as {dtype, count, encoding, data}."""
    raw = np.ascontiguousarray(records).tobytes()
    return {
        "dtype": _dtype_fields(dtype),
        "count": int(len(records)),
        "encoding": ENCODING,
        "data": base64.b64encode(zlib.compress(raw, 1)).decode("ascii"),
    }


def decode_array(obj: Any, dtype: np.dtype, what: str) -> np.ndarray:
    """Inverse of encode_array(); ReportError naming `what` otherwise."""
    if not isinstance(obj, dict):
        raise ReportError(f"'{what}' must be an object")
    expected = _dtype_fields(dtype)
    if obj.get("dtype") != expected:
        raise ReportError(f"'{what}' has dtype {obj.get('dtype')!r}, "
                          f"expected {expected!r}")
    if obj.get("encoding") != ENCODING:
        raise ReportError(f"'{what}' encoding {obj.get('encoding')!r} is "
                          f"unknown")
    count = obj.get("count")
    if not whole(count, 0):
        raise ReportError(f"'{what}' count must be an int >= 0, got "
                          f"{count!r}")
    size = count * dtype.itemsize
    if size > limits.MAX_ARRAY_BYTES:
        raise ReportError(f"'{what}' declares {count} records "
                          f"({size} bytes), over the limit of "
                          f"{limits.MAX_ARRAY_BYTES} bytes "
                          f"(aquaprof.limits.MAX_ARRAY_BYTES)")
    data = obj.get("data", "")
    if not isinstance(data, str):
        raise ReportError(f"'{what}' data must be a base64 string")
    try:
        packed = base64.b64decode(data, validate=True)
    except (ValueError, binascii.Error) as e:
        raise ReportError(f"'{what}' data is corrupt: {e}") from None
    raw = _inflate_upto(packed, size, f"'{what}' data")
    if len(raw) != size:
        held = (f"more than {size}" if len(raw) > size else str(len(raw)))
        raise ReportError(f"'{what}' holds {held} bytes, not the "
                          f"{count} {what} it declares")
    return np.frombuffer(raw, dtype=dtype)


def _decode_gpu_events(obj: Any) -> np.ndarray:
    """GPU events in GPU_DTYPE, from a file of either layout."""
    if (isinstance(obj, dict)
            and obj.get("dtype") == _dtype_fields(GPU_DTYPE_32)):
        old = decode_array(obj, GPU_DTYPE_32, "gpu events")
        events = np.zeros(len(old), _core.GPU_DTYPE)
        for name in GPU_DTYPE_32.names or ():
            if name != "pad":
                events[name] = old[name]
        return events
    return decode_array(obj, _core.GPU_DTYPE, "gpu events")


def _inflate_upto(packed: bytes, limit: int, what: str) -> bytes:
    """zlib-compressed bytes inflated, never past limit + 1 bytes however
    much they would inflate to; ReportError naming `what` when they are
    not a zlib stream, or one cut short."""
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(packed, limit + 1)
    except zlib.error as e:
        raise ReportError(f"{what} is corrupt: {e}") from None
    if len(raw) <= limit and not inflater.eof:
        raise ReportError(f"{what} is corrupt: the compressed stream is "
                          f"cut short")
    return raw


def inflate(packed: bytes, limit: int, what: str) -> bytes:
    """zlib-compressed bytes inflated, never past limit + 1 bytes however
    much they would inflate to (a zlib bomb costs no more); ReportError
    naming `what` when they hold more than limit bytes or are not a
    complete zlib stream."""
    raw = _inflate_upto(packed, limit, what)
    if len(raw) > limit:
        raise ReportError(f"{what} inflates past {limit} bytes")
    return raw


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ReportError(f"the number {text[:40]} is out of range")
    return value


def _no_constant(name: str) -> Any:
    raise ReportError(f"{name} is not a number a report may hold")


def parse_json(raw: bytes) -> Any:
    """A report's JSON text parsed within aquaprof.limits (size, items,
    nesting); NaN, Infinity and numbers out of a float's range refused.
    ReportError naming what is wrong."""
    if len(raw) > limits.MAX_FILE_BYTES:
        raise ReportError(f"larger than {limits.MAX_FILE_BYTES} bytes "
                          f"(aquaprof.limits.MAX_FILE_BYTES)")
    # base64 holds none of these: they count the JSON values that parsing
    # turns into objects, before any is made
    items = raw.count(b",") + raw.count(b"[") + raw.count(b"{")
    if items > limits.MAX_JSON_ITEMS:
        raise ReportError(f"holds {items} JSON values, over the limit of "
                          f"{limits.MAX_JSON_ITEMS} "
                          f"(aquaprof.limits.MAX_JSON_ITEMS)")
    try:
        return json.loads(raw, parse_float=_finite_float,
                          parse_constant=_no_constant)
    except RecursionError:
        raise ReportError("not an aquaprof report: JSON nested too "
                          "deeply") from None
    except (UnicodeDecodeError, ValueError) as e:
        if isinstance(e, ReportError):
            raise
        raise ReportError(f"not an aquaprof report: not valid JSON "
                          f"({e})") from None


# ---------------------------------------------------------- validation
def _is(value: Any, kind: type) -> bool:
    accepted = (int, float) if kind is float else kind
    return isinstance(value, accepted) and (
        kind is bool or not isinstance(value, bool))


#: the number fields that may be negative; every other int or float field
#: of a report is a count, a duration, a size or an id, and is >= 0
SIGNED = frozenset({"start_ns", "stop_ns", "parent", "mem_delta"})
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _number_problem(key: str, value: Any) -> Optional[str]:
    """What is wrong with a field's number (already of its type), or
    None: ints fit 64 bits, floats are finite, none is negative unless
    the field is SIGNED."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        return "does not fit in 64 bits"
    if isinstance(value, float) and not math.isfinite(value):
        return f"is {value}"
    if value < 0 and key not in SIGNED:
        return "is negative"
    return None


def check_fields(obj: Any, fields: Fields, where: str,
                 optional: Optional[Fields] = None) -> None:
    """ReportError unless obj is a dict holding every one of `fields`
    and any of `optional`, each of its type, each number in range
    (_number_problem)."""
    if not isinstance(obj, dict):
        raise ReportError(f"{where} must be an object")
    for key in fields:
        if key not in obj:
            raise ReportError(f"{where} lacks {key!r}")
    for key, kind in {**fields, **(optional or {})}.items():
        if key not in obj:
            continue
        if not _is(obj[key], kind):
            raise ReportError(f"{where}[{key!r}] must be {kind.__name__}, "
                              f"got {type(obj[key]).__name__}")
        problem = _number_problem(key, obj[key])
        if problem:
            raise ReportError(f"{where}[{key!r}] {problem}")


def _is_pair(p: Any) -> bool:
    """[int, int], both fitting 64 bits, the second >= 0."""
    return (isinstance(p, (list, tuple)) and len(p) == 2
            and all(_is(x, int) and INT64_MIN <= x <= INT64_MAX for x in p)
            and p[1] >= 0)


def _check_samples(samples: Any, where: str) -> None:
    if not isinstance(samples, list) or not all(map(_is_pair, samples)):
        raise ReportError(f"{where}['memory_samples'] must be a list of "
                          f"[ns, bytes] pairs, bytes >= 0")


def _check_measured(windows: Any) -> None:
    """The windows a gate judges (a benchmark's timed rounds): [start_ns,
    end_ns] pairs, each in order."""
    if not isinstance(windows, list) or not all(
            _is_pair(w) and w[0] <= w[1] for w in windows):
        raise ReportError("report['measured'] must be a list of [start_ns, "
                          "end_ns] pairs, start <= end")


def validate(data: Dict[str, Any]) -> None:
    """ReportError unless data is a report's decoded data (its spans and
    GPU events arrays, everything else plain JSON values)."""
    if not isinstance(data, dict):
        raise ReportError("report must be an object")
    # the arrays are checked once decoded, below
    arrays = ("spans", "gpu", "samples")
    check_fields({k: v for k, v in data.items() if k not in arrays},
                 _without(RUN_FIELDS, "spans"), "report",
                 _without(_without(RUN_OPTIONAL, "gpu"), "samples"))
    stages, threads = data["stages"], data["threads"]
    if data["stop_ns"] < data["start_ns"]:
        raise ReportError("report['stop_ns'] is before its 'start_ns'")
    for i, s in enumerate(stages):
        _check_stage(stages, i, s)
    _check_tree(stages)
    _check_threads(threads)
    _check_overhead(data.get("overhead"))
    check_fields(data.get("host", {}), {}, "report['host']", HOST_OPTIONAL)
    _check_samples(data.get("memory_samples", []), "report")
    _check_measured(data.get("measured", []))
    _check_children(data.get("children"))
    processes = data.get("processes", [])
    for i, p in enumerate(processes):
        check_fields(p, PROCESS_FIELDS, f"processes[{i}]", PROCESS_OPTIONAL)
        _check_samples(p.get("memory_samples", []), f"processes[{i}]")
        _check_process_stages(p.get("stages", []), len(stages),
                              f"processes[{i}]")
    if any(not 0 <= t.get("process", 0) < max(len(processes), 1)
           for t in threads):
        raise ReportError("a thread names a process the report lacks")
    spans = _check_spans(data["spans"], len(stages), len(threads))
    if "gpu" in data:
        _check_gpu(data["gpu"], len(stages), len(spans))
    if "samples" in data:
        check_samples(data["samples"], len(stages), len(processes))


def _check_children(children: Any) -> None:
    if children is None:
        return
    check_fields(children, CHILDREN_FIELDS, "report['children']",
                 CHILDREN_OPTIONAL)
    for i, lost in enumerate(children["lost"]):
        check_fields(lost, LOST_CHILD_FIELDS,
                     f"report['children']['lost'][{i}]")
    if not children["reported"] + len(children["lost"]) \
            >= children["started"]:
        raise ReportError("report['children'] accounts for fewer children "
                          "than started")


def _check_process_stages(rows: Any, nstages: int, where: str) -> None:
    """A process's own figures: [stage, count, total_ns, self_ns, cpu_ns]
    rows, each naming a stage of the report, at most one per stage."""
    seen = set()
    for row in rows:
        if (not isinstance(row, list) or len(row) != 5
                or not all(_is(x, int) and 0 <= x <= INT64_MAX
                           for x in row)):
            raise ReportError(f"{where}['stages'] rows must be 5 "
                              f"non-negative integers")
        if row[0] >= nstages or row[0] in seen:
            raise ReportError(f"{where}['stages'] names stage {row[0]} "
                              f"twice or that the report lacks")
        seen.add(row[0])


def _without(fields: Fields, key: str) -> Fields:
    return {k: v for k, v in fields.items() if k != key}


def _check_stage(stages: List[Any], i: int, s: Any) -> None:
    where = f"stages[{i}]"
    check_fields(s, STAGE_FIELDS, where, STAGE_OPTIONAL)
    if not -1 <= s["parent"] < i:
        raise ReportError(f"{where}['parent'] = {s['parent']} does not "
                          f"name an earlier stage")
    depth = stages[s["parent"]]["depth"] + 1 if s["parent"] >= 0 else 0
    if s["depth"] != depth:
        raise ReportError(f"{where}['depth'] = {s['depth']}, its "
                          f"place in the tree says {depth}")
    if depth > limits.MAX_DEPTH:
        raise ReportError(f"{where} is nested {depth} deep, deeper than "
                          f"the limit of {limits.MAX_DEPTH} "
                          f"(aquaprof.limits.MAX_DEPTH)")
    # the rules aquaprof.stage() applies to a name
    if not s["name"]:
        raise ReportError(f"{where} has an empty name")
    if "/" in s["name"]:
        raise ReportError(f"{where}['name'] {s['name'][:80]!r} contains "
                          f"'/', which separates nested stages in paths")
    try:
        s["name"].encode("utf-8")
    except UnicodeEncodeError:
        raise ReportError(f"{where}['name'] {s['name'][:80]!r} is not "
                          f"valid Unicode (a lone surrogate)") from None
    buckets = len(_core.HIST_LOWER_NS) - 1
    last = -1
    for pair in s["hist"]:
        # ascending buckets: percentiles walk them in order
        if not _is_pair(pair) or not last < pair[0] < buckets:
            raise ReportError(f"{where}['hist'] has a bad bucket "
                              f"{pair!r:.80}: [bucket, count] pairs in "
                              f"ascending bucket order, count >= 0")
        last = pair[0]


def _check_tree(stages: List[Any]) -> None:
    """Each (parent, name) once, so that each path names one stage; all
    paths together within limits.MAX_PATH_CHARS. Linear in the stages,
    whatever their depth: path lengths are summed, not built."""
    seen: Dict[Any, int] = {}
    lengths: List[int] = []
    total = 0
    for i, s in enumerate(stages):
        key = (s["parent"], s["name"])
        if key in seen:
            raise ReportError(f"stages[{i}] repeats stages[{seen[key]}]: "
                              f"the same name {s['name'][:80]!r} under the "
                              f"same parent")
        seen[key] = i
        length = len(s["name"]) + (lengths[s["parent"]] + 1
                                   if s["parent"] >= 0 else 0)
        lengths.append(length)
        total += length
    if total > limits.MAX_PATH_CHARS:
        raise ReportError(f"the stage paths hold {total} characters, over "
                          f"the limit of {limits.MAX_PATH_CHARS} "
                          f"(aquaprof.limits.MAX_PATH_CHARS)")


def _check_threads(threads: List[Any]) -> None:
    for i, t in enumerate(threads):
        check_fields(t, THREAD_FIELDS, f"threads[{i}]", THREAD_OPTIONAL)
        if t["index"] != i:
            raise ReportError(f"threads[{i}]['index'] is {t['index']}")
        if t.get("folded", 1) < 1:
            raise ReportError(f"threads[{i}]['folded'] is {t['folded']}")


def _check_overhead(overhead: Any) -> None:
    if overhead is None:
        return
    check_fields(overhead, OVERHEAD_FIELDS, "report['overhead']",
                 OVERHEAD_OPTIONAL)


def _check_spans(spans: Any, nstages: int, nthreads: int) -> np.ndarray:
    if not isinstance(spans, np.ndarray) or spans.dtype != _core.SPAN_DTYPE:
        raise ReportError("report['spans'] must be a span array")
    if len(spans) and int(spans["stage"].max()) >= nstages:
        raise ReportError("a span names a stage id the report lacks")
    if len(spans) and int(spans["thread"].max()) >= nthreads:
        raise ReportError("a span names a thread the report lacks")
    if len(spans) and not ((spans["parent"] >= -1)
                           & (spans["parent"] < len(spans))).all():
        raise ReportError("a span names a parent span the report lacks")
    if len(spans) and (spans["end_ns"] < spans["start_ns"]).any():
        raise ReportError("a span ends before it starts")
    if len(spans) and ((spans["cpu_ns"] < 0) | (spans["items"] < 0)).any():
        raise ReportError("a span has negative CPU time or items")
    return spans


def _check_gpu(gpu: Any, nstages: int, nspans: int) -> None:
    if not isinstance(gpu, dict):
        raise ReportError("report['gpu'] must be an object")
    check_fields({k: v for k, v in gpu.items() if k != "events"},
                 _without(GPU_FIELDS, "events"), "report['gpu']")
    if not all(isinstance(n, str) for n in gpu["kernel_names"]):
        raise ReportError("report['gpu']['kernel_names'] must be a list of "
                          "str")
    for i, device in enumerate(gpu["devices"]):
        where = f"report['gpu']['devices'][{i}]"
        check_fields(device, {"name": str}, where)
        check_fields(device, {}, where, {k: int for k in device
                                         if k != "name"})
    ev = gpu["events"]
    if not isinstance(ev, np.ndarray) or ev.dtype != _core.GPU_DTYPE:
        raise ReportError("report['gpu']['events'] must be a GPU event "
                          "array")
    if not len(ev):
        return
    problems = [
        (~np.isin(ev["kind"], GPU_KINDS), "an unknown kind"),
        ((ev["stage"] < -1) | (ev["stage"] >= nstages), "a stage id the "
         "report lacks"),
        ((ev["span"] < -1) | (ev["span"] >= nspans), "a span the report "
         "lacks"),
        ((ev["kind"] == KERNEL) & (ev["name"] >= len(gpu["kernel_names"])),
         "a kernel name the report lacks"),
        (ev["end_ns"] < ev["start_ns"], "an end before its start"),
        (ev["bytes"] < 0, "negative bytes"),
        (ev["copy"] > max(COPY_NAMES), "an unknown copy direction"),
    ]
    for bad, what in problems:
        if bad.any():
            raise ReportError(f"a GPU event has {what}")


# ------------------------------------------------------------- samples
def check_samples(samples: Any, nstages: int, nprocesses: int) -> None:
    """ReportError unless `samples` is a sampler's section (decoded) whose
    every index names something the report holds: a stack's process,
    stage and frames, a timeline sample's stack."""
    where = "report['samples']"
    if not isinstance(samples, dict):
        raise ReportError(f"{where} must be an object")
    check_fields({k: v for k, v in samples.items() if k != "timeline"},
                 SAMPLES_FIELDS, where,
                 _without(SAMPLES_OPTIONAL, "timeline"))
    for i, frame in enumerate(samples["frames"]):
        _check_code_frame(frame, f"{where}['frames'][{i}]")
    bounds = (max(nprocesses, 1), nstages, len(samples["frames"]))
    for i, stack in enumerate(samples["stacks"]):
        _check_stack(stack, bounds, f"{where}['stacks'][{i}]")
    for i, thread in enumerate(samples.get("threads", ())):
        _check_sampled_thread(thread, bounds[0],
                              f"{where}['threads'][{i}]")
    if "timeline" in samples:
        _check_timeline(samples["timeline"], len(samples["stacks"]))


def _is_count(x: Any) -> bool:
    return _is(x, int) and 0 <= x <= INT64_MAX


def _check_code_frame(frame: Any, where: str) -> None:
    if (not isinstance(frame, (list, tuple)) or len(frame) != 3
            or not isinstance(frame[0], str)
            or not isinstance(frame[1], str) or not _is_count(frame[2])):
        raise ReportError(f"{where} must be [function, file, line]: two "
                          f"str and an int >= 0")


def _check_stack(stack: Any, bounds: Tuple[int, int, int],
                 where: str) -> None:
    """[process, tid, stage, frames, count, wall_ns, cpu_ns] (and
    delay_ns, gil_ns, lock_ns), each index within `bounds` (processes,
    stages, frames)."""
    nprocesses, nstages, nframes = bounds
    if (not isinstance(stack, (list, tuple))
            or len(stack) not in STACK_LENGTHS
            or not isinstance(stack[3], (list, tuple))
            or not all(map(_is_count, [*stack[:2], *stack[4:]]))
            or not _is(stack[2], int)):
        raise ReportError(f"{where} must be [process, tid, stage, frames, "
                          f"count, wall_ns, cpu_ns(, delay_ns, gil_ns(, "
                          f"lock_ns))]: "
                          f"frames a list, the rest ints >= 0 but stage")
    if stack[0] >= nprocesses:
        raise ReportError(f"{where} names process {stack[0]}, which the "
                          f"report lacks")
    if not -1 <= stack[2] < nstages:
        raise ReportError(f"{where} names stage {stack[2]}, which the "
                          f"report lacks (-1: no stage)")
    if not all(_is(f, int) and 0 <= f < nframes for f in stack[3]):
        raise ReportError(f"{where} names a frame the report lacks")


def _check_sampled_thread(thread: Any, nprocesses: int, where: str) -> None:
    """[process, tid, name]: a sampled thread's Python name."""
    if (not isinstance(thread, (list, tuple)) or len(thread) != 3
            or not all(map(_is_count, thread[:2]))
            or not isinstance(thread[2], str)):
        raise ReportError(f"{where} must be [process, tid, name]: two ints "
                          f">= 0 and a str")
    if thread[0] >= nprocesses:
        raise ReportError(f"{where} names process {thread[0]}, which the "
                          f"report lacks")


def _check_timeline(timeline: Any, nstacks: int) -> None:
    where = "report['samples']['timeline']"
    if not isinstance(timeline, np.ndarray) or \
            timeline.dtype != TIMELINE_DTYPE:
        raise ReportError(f"{where} must be a timeline array")
    if len(timeline) and int(timeline["stack"].max()) >= nstacks:
        raise ReportError(f"{where} names a stack the report lacks")
    if (np.diff(timeline["t_ns"]) < 0).any():
        raise ReportError(f"{where} is not in time order")
