"""libFuzzer (atheris) harness for the report loader: any bytes through
what Report.load does with a file's bytes (the bounded JSON parser, then
Report.from_dict). Only ReportError may come out, and whatever loads
must print. Run by tests/model/test_fuzz.py; by hand:
    PYTHONPATH=. python tests/support/fuzz_report_loader.py -runs=100000 CORPUS_DIR
"""
import sys

import atheris

with atheris.instrument_imports():
    import aquaprof.model.schema as schema
    import aquaprof.report as report


def one_input(data: bytes) -> None:
    try:
        loaded = report.Report.from_dict(schema.parse_json(data))
    except report.ReportError:
        return
    str(loaded)


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
