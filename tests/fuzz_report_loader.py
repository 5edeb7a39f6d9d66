"""libFuzzer (atheris) harness for the report loader: any bytes, as JSON,
into Report.from_dict. Only ReportError (or the JSON decoder's error) may
come out. Run by tests/test_fuzz.py; by hand:
    PYTHONPATH=. python tests/fuzz_report_loader.py -runs=100000 CORPUS_DIR
"""
import json
import sys

import atheris

with atheris.instrument_imports():
    import aquaprof.schema  # noqa: F401
    import aquaprof.report as report


def one_input(data: bytes) -> None:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return
    try:
        report.Report.from_dict(doc)
    except report.ReportError:
        pass


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
