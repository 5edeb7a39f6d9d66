"""The views of a 200,000-span report."""


def test_chrome_trace(benchmark, large_report, tmp_path):
    benchmark.extra_info["spans"] = large_report.spans_recorded
    benchmark(large_report.to_chrome_trace, tmp_path / "t.json")


def test_speedscope(benchmark, large_report, tmp_path):
    benchmark.extra_info["spans"] = large_report.spans_recorded
    benchmark(large_report.to_speedscope, tmp_path / "s.json")


def test_flamegraph(benchmark, large_report, tmp_path):
    benchmark(large_report.to_flamegraph, tmp_path / "f.svg")


def test_save_and_load(benchmark, large_report, tmp_path):
    import aquaprof as ap
    benchmark.extra_info["spans"] = large_report.spans_recorded

    def round_trip():
        return ap.Report.load(large_report.save(tmp_path / "r.json"))

    assert benchmark(round_trip) == large_report


def test_compare(benchmark, large_report):
    benchmark(large_report.compare, large_report)
