"""The report schema is written once (aquaprof/schema.py) and must agree
with what the C binding builds and with docs/report-format.md: each test
here fails when one of the three gains, loses or retypes a field."""
import json
import re
import textwrap
from pathlib import Path

import pytest

import aquaprof as ap
from aquaprof import _core
from aquaprof.model import schema
from fake_gpu import scenario

from repo_paths import ROOT  # noqa: E402
TYPE_NAMES = {int: "int", float: "float", str: "str", bool: "bool",
              list: "list", dict: "object"}
# the doc's heading of each table, and the schema's tables it must match
DOC_TABLES = {
    "Run": ({**schema.ENVELOPE_FIELDS, **schema.RUN_FIELDS},
            schema.RUN_OPTIONAL),
    "Stage": (schema.STAGE_FIELDS, schema.STAGE_OPTIONAL),
    "Thread": (schema.THREAD_FIELDS, schema.THREAD_OPTIONAL),
    "Host": ({}, schema.HOST_OPTIONAL),
    "Overhead": (schema.OVERHEAD_FIELDS, schema.OVERHEAD_OPTIONAL),
    "Process": (schema.PROCESS_FIELDS, schema.PROCESS_OPTIONAL),
    "Children": (schema.CHILDREN_FIELDS, schema.CHILDREN_OPTIONAL),
    "Samples": (schema.SAMPLES_FIELDS, schema.SAMPLES_OPTIONAL),
    "GPU section": (schema.GPU_FIELDS, {}),
    "Device": (schema.DEVICE_FIELDS, {}),
}


def doc_tables():
    """{heading: {field: (type name, required)}} from the doc's tables."""
    text = (ROOT / "docs" / "report-format.md").read_text()
    tables = {}
    for part in re.split(r"^### ", text, flags=re.M)[1:]:
        heading = re.match(r"(.+?)(?: \(|$)", part.splitlines()[0]).group(1)
        rows = re.findall(r"^\| `(\w+)` \| (\w+) \| (yes|no) \|", part,
                          flags=re.M)
        tables[heading] = {f: (t, req == "yes") for f, t, req in rows}
    return tables


def expected(required, optional):
    out = {f: (TYPE_NAMES[t], True) for f, t in required.items()}
    out.update({f: (TYPE_NAMES[t], False) for f, t in optional.items()})
    return out


def test_the_doc_lists_every_field_of_the_schema_with_its_type():
    tables = doc_tables()
    assert set(tables) == set(DOC_TABLES)
    for heading, (required, optional) in DOC_TABLES.items():
        assert tables[heading] == expected(required, optional), heading


def check_object(obj, required, optional, where):
    """obj has every required field and no field the schema lacks, each
    of the schema's type."""
    known = {**required, **optional}
    assert set(required) <= set(obj), (where, set(required) - set(obj))
    assert set(obj) <= set(known), (where, set(obj) - set(known))
    for key, value in obj.items():
        assert schema._is(value, known[key]), (where, key, value)


def test_the_c_binding_builds_what_the_schema_says():
    prof = _core.Profiler(max_spans=16)
    prof.start()
    with ap.stage("outer", items=2):
        with ap.stage("inner"):
            pass
    prof.stop()
    data = prof.report_data()
    encoded = json.loads(json.dumps(schema.encode(data)))
    run = {k: v for k, v in encoded.items()
           if k not in schema.ENVELOPE_FIELDS}
    check_object(run, schema.RUN_FIELDS, schema.RUN_OPTIONAL, "report")
    for s in encoded["stages"]:
        check_object(s, schema.STAGE_FIELDS, schema.STAGE_OPTIONAL, "stage")
        assert set(s) == set(schema.STAGE_FIELDS) | set(schema.STAGE_OPTIONAL)
    for t in encoded["threads"]:
        check_object(t, schema.THREAD_FIELDS, schema.THREAD_OPTIONAL,
                     "thread")
    assert encoded["spans"]["dtype"] == json.loads(
        json.dumps(_core.SPAN_DTYPE.descr))


def test_the_profiler_adds_host_and_overhead_as_the_schema_says():
    with ap.Profiler() as prof:
        with ap.stage("x"):
            pass
    obj = json.loads(json.dumps(prof.report().to_dict()))
    # how busy the machine was is said of runs long enough to tell
    # (tests/record/test_machine_busy.py); a CPU quota where a cgroup
    # sets one (tests/record/test_cpu_quota.py)
    assert set(obj["host"]) == set(schema.HOST_OPTIONAL) - {
        "other_cpus", "steal", "cpu_quota", "quota_periods",
        "throttled_periods"}
    check_object(obj["host"], {}, schema.HOST_OPTIONAL, "host")
    torch_keys = {k for k in schema.OVERHEAD_OPTIONAL
                  if k.startswith("torch_")}
    assert set(obj["overhead"]) == {*schema.OVERHEAD_FIELDS,
                                    *schema.OVERHEAD_OPTIONAL} - torch_keys
    check_object(obj["overhead"], schema.OVERHEAD_FIELDS,
                 schema.OVERHEAD_OPTIONAL, "overhead")


def test_a_merged_report_holds_processes_as_the_schema_says():
    with ap.Profiler(compensate=False) as prof:
        with ap.stage("x"):
            pass
    merged = ap.merge([prof.report(), prof.report()])
    obj = json.loads(json.dumps(merged.to_dict()))
    for p in obj["processes"]:
        check_object(p, schema.PROCESS_FIELDS, schema.PROCESS_OPTIONAL,
                     "process")


GPU_RUN = """
    with ap.Profiler() as prof:
        with ap.stage("compute"):
            fake.fake_kernel(b"gemm", 1000, 20000, 1, 132, 256, 64, 0)
    print(json.dumps(prof.report().to_dict()))
"""


def test_the_gpu_section_the_c_binding_builds_is_the_schemas(fakes):
    if not _core.HAVE_CUPTI:
        pytest.skip("built without cupti.h: no GPU section to build")
    obj = scenario(textwrap.dedent(GPU_RUN),
                   {"AQUAPROF_LIBCUDA": str(fakes / "libcuda.so")},
                   [fakes / "libcupti.so"])
    check_object(obj["gpu"], schema.GPU_FIELDS, {}, "gpu")
    assert obj["gpu"]["devices"], "the fake driver reports one device"
    for device in obj["gpu"]["devices"]:
        check_object(device, schema.DEVICE_FIELDS, {}, "device")
    assert obj["gpu"]["events"]["dtype"] == json.loads(
        json.dumps(_core.GPU_DTYPE.descr))


def test_the_validator_refuses_a_field_of_the_wrong_type_in_every_table():
    """Each table's every typed field is checked: a str where the schema
    says otherwise (or a list where it says str) is refused by name."""
    with ap.Profiler() as prof:
        with ap.stage("x"):
            pass
    good = prof.report().to_dict()
    good["processes"] = [{"pid": 1, "label": "a", "host": {},
                          "memory_samples": []}]
    places = {
        "report": (lambda d: d, schema.RUN_FIELDS, schema.RUN_OPTIONAL),
        "stage": (lambda d: d["stages"][0], schema.STAGE_FIELDS, {}),
        "thread": (lambda d: d["threads"][0], schema.THREAD_FIELDS,
                   schema.THREAD_OPTIONAL),
        "host": (lambda d: d["host"], {}, schema.HOST_OPTIONAL),
        "overhead": (lambda d: d["overhead"], schema.OVERHEAD_FIELDS,
                     schema.OVERHEAD_OPTIONAL),
        "process": (lambda d: d["processes"][0], schema.PROCESS_FIELDS,
                    schema.PROCESS_OPTIONAL),
    }
    for where, (find, required, optional) in places.items():
        for key, kind in {**required, **optional}.items():
            if where == "report" and key in ("spans", "gpu"):
                continue    # arrays: their decoding is tested apart
            bad = json.loads(json.dumps(good))
            find(bad)[key] = [] if kind is str else "x"
            with pytest.raises(ap.ReportError, match=re.escape(repr(key))):
                ap.Report.from_dict(bad)
