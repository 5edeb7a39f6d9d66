"""Writes the pytest-benchmark results of `make bench` into
docs/benchmarks.md, between the pytest-benchmark markers, with the
command, machine, date and commit they came from.

    python benchmarks/write_tables.py RESULTS.json [docs/benchmarks.md]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List

START = "<!-- pytest-benchmark:start -->"
END = "<!-- pytest-benchmark:end -->"
COMMAND = ("make bench (.venv/bin/python -m pytest benchmarks/ "
           "--benchmark-json=...; then this script)")


def fmt(seconds: float) -> str:
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def rows(results: Dict[str, Any]) -> List[str]:
    benches = {b["name"]: b for b in results["benchmarks"]}
    plain = benches.get("test_plain_call")
    plain_op = (plain["stats"]["median"] / plain["extra_info"]["ops"]
                if plain else None)
    out = ["| benchmark | median | IQR | rounds | per operation |",
           "|---|---:|---:|---:|---|"]
    for name, b in benches.items():
        stats, extra = b["stats"], b.get("extra_info", {})
        note = ""
        if "ops" in extra:
            op = stats["median"] / extra["ops"]
            note = f"{fmt(op)} a call"
            if plain_op is not None and name != "test_plain_call":
                note += f", {fmt(op - plain_op)} over a plain call"
        if "bytes_per_span" in extra:
            note = (f"{extra['spans']:,} spans, "
                    f"{fmt(stats['median'] / extra['spans'])} a span; the "
                    f"process grew by {extra['bytes_per_span']:.1f} bytes a "
                    f"span")
        elif "spans" in extra:
            note = (f"{extra['spans']:,} spans, "
                    f"{fmt(stats['median'] / extra['spans'])} a span")
        if "samples" in extra:
            note = (f"{extra['samples'] / stats['median'] / 1e9:.3f} "
                    f"Gsamples/s")
        out.append(f"| `{name}` | {fmt(stats['median'])} | "
                   f"{fmt(stats['iqr'])} | {stats['rounds']} | {note} |")
    return out


def section(results: Dict[str, Any]) -> str:
    machine = results["machine_info"]
    cpu = machine.get("cpu", {})
    commit = results.get("commit_info", {})
    lines = [
        START,
        "## The pytest-benchmark suite (`benchmarks/test_bench_*.py`)",
        "",
        f"- **Command:** `{COMMAND}`",
        f"- **Machine:** {machine.get('node')}, "
        f"{cpu.get('brand_raw', machine.get('processor'))}, "
        f"{cpu.get('count', '?')} CPUs, Python "
        f"{machine.get('python_version')}",
        f"- **Date:** {results['datetime'][:16].replace('T', ' ')} UTC, "
        f"commit {commit.get('id', '?')[:7]}"
        f"{' (with uncommitted changes)' if commit.get('dirty') else ''}",
        "",
    ]
    lines += rows(results)
    lines += ["", END]
    return "\n".join(lines)


def main(argv: List[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__, file=sys.stderr)
        return 2
    results = json.loads(Path(argv[0]).read_text())
    doc = Path(argv[1] if len(argv) > 1 else "docs/benchmarks.md")
    text = doc.read_text()
    new = section(results)
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + new + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + new + "\n"
    doc.write_text(text)
    print(f"{doc}: pytest-benchmark section written from {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
