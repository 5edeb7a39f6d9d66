"""Regression verdicts on changes planted in real programs and a real
pytest-xdist suite: does compare (and the pytest gate) say what changed,
and does it keep quiet where nothing did?

Each run is a fresh process profiling one stage (the way a user runs a
program); the verdict is compare's, one run a side, wall time, threshold
5 % (each new run against the base run before it):
- bimodal: 40 calls of about 2 ms; changed, every 4th call 3x (a cache
  that now misses): the total +50 %, the median call unchanged;
- memory: 10 calls that each fill two 80 MB arrays; changed, the first
  is kept while the second is filled (peak host memory 2x, the same
  work);
- items: 40 calls of about 2 ms, 32 items a call; changed, 16 items a
  call for the same time (items/s halved);
- few: 3 calls of about 8 ms; changed, each 2x.
Every case is also run unchanged against itself: what is said there is
a false alarm. "right" counts a changed run called slower (for memory
and items: a note naming the stage) and an unchanged one called neither
slower nor given such a note.

Then a pytest suite of four tests, each a stage of 20 calls of about 3
ms, run with `-n 2 --aquaprof=DIR`; the new run with test_d's calls
1.5x and a CPU hog (a process spinning) beside it, gated against the
base run (`--aquaprof-compare --aquaprof-fail=5%`): caught if test_d is
a REGRESSION, a false alarm for each other test that is; a test said
"slower? the machine was busy" (not failed) is counted apart, and the
same reports are judged again on wall time with no session reading
(the rule without it) and on CPU time. With
--quiet-too, each run also gates a new run with no hog against a base
made just before it: the rule on a machine no busier than the base's.

    python benchmarks/verdict_suites.py [--runs 4] [--root TREE]
        [--only bimodal,memory,items,few,xdist] [--quiet-too]

--root judges with another tree's aquaprof (a git worktree of an
earlier commit, its _core built or copied in): the programs and pytest
import it too.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Dict, List, Tuple

PROGRAM = textwrap.dedent('''
    import sys
    import numpy as np
    import aquaprof as ap

    def work(units):
        # CPU work, a few ms a unit
        s = 0
        for i in range(units * 60000):
            s += i * i
        return s

    case, changed, out = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
    with ap.Profiler() as prof:
        if case == "bimodal":
            for i in range(40):
                with ap.stage("lookup"):
                    work(3 if changed and i % 4 == 3 else 1)
        elif case == "memory":
            n = 10_000_000
            for i in range(10):
                with ap.stage("transform"):
                    a = np.ones(n)
                    s = a.sum()
                    if not changed:
                        del a
                    b = np.ones(n)
                    s += b.sum()
                    del b
                    a = None
        elif case == "items":
            for i in range(40):
                with ap.stage("batch", items=16 if changed else 32):
                    work(1)
        elif case == "few":
            for i in range(3):
                with ap.stage("step"):
                    work(8 if changed else 4)
    prof.report().save(out)
''')

SUITE = textwrap.dedent('''
    import os
    import aquaprof as ap

    def work(units):
        s = 0
        for i in range(int(units * 30000)):
            s += i * i
        return s

    def run(name, units):
        for _ in range(20):
            with ap.stage(name):
                work(units)

    def test_a():
        run("a", 1)

    def test_b():
        run("b", 1)

    def test_c():
        run("c", 1)

    def test_d():
        run("d", 1.5 if os.environ.get("CHANGED") == "1" else 1)
''')

STAGE = {"bimodal": "lookup", "memory": "transform", "items": "batch",
         "few": "step"}


def env_for(root: Path) -> Dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(root))
    env.pop("CHANGED", None)
    return env


def record(root: Path, folder: Path, case: str, changed: bool, i: int
           ) -> Path:
    out = folder / f"{case}-{int(changed)}-{i}.json"
    subprocess.run([sys.executable, str(folder / "program.py"), case,
                    "1" if changed else "0", str(out)], check=True,
                   env=env_for(root))
    return out


def said(comparison, stage: str) -> Tuple[str, List[str]]:
    """The stage's verdict and the notes that name it."""
    verdict = next(c.verdict for c in comparison.changes if c.path == stage)
    notes = [n for n in vars(comparison).values()
             if isinstance(n, str) and n and stage in n]
    return verdict, notes


def program_cases(root: Path, cases: List[str], runs: int) -> None:
    import aquaprof as ap
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "program.py").write_text(PROGRAM)
        for case in cases:
            stage = STAGE[case]
            base = [record(root, folder, case, False, i)
                    for i in range(runs + 1)]
            new = [record(root, folder, case, True, i) for i in range(runs)]
            counts = {"changed": [0, 0], "unchanged": [0, 0]}
            counts_cpu = {"changed": [0, 0], "unchanged": [0, 0]}
            for kind, after in (("unchanged", base[1:]), ("changed", new)):
                for i, path in enumerate(after):
                    comparison = ap.Report.load(path).compare(
                        ap.Report.load(base[i]))
                    cpu = ap.Report.load(path).compare(
                        ap.Report.load(base[i]), measure="cpu")
                    verdict, notes = said(comparison, stage)
                    cpu_word = said(cpu, stage)[0]
                    cpu_flagged = cpu_word in ("slower", "slower?") or \
                        bool(notes) and case in ("memory", "items")
                    counts_cpu[kind][cpu_flagged == (kind == "changed")] += 1
                    flagged = verdict in ("slower", "slower?") or \
                        bool(notes) and case in ("memory", "items")
                    counts[kind][flagged == (kind == "changed")] += 1
                    line = [c for c in str(comparison).splitlines()
                            if f" {stage}:" in c][0]
                    print(f"  {case} {kind} {i}: {verdict} (cpu: {cpu_word}); "
                          f"{line.strip()}")
                    for note in notes:
                        print(f"    note: {note[:200]}")
            for kind, (wrong, right) in counts.items():
                cpu_wrong, cpu_right = counts_cpu[kind]
                print(f"{case:8s} {kind:9s}: wall right {right}, wrong "
                      f"{wrong}; cpu right {cpu_right}, wrong {cpu_wrong}")


BUSY_WORDS = "slower? the machine was busy"


def gate_once(root: Path, folder: Path, name: str, hog: bool
              ) -> Tuple[Dict[str, str], List[str], Path, Path]:
    """A base run, then a new one (test_d 1.5x; a CPU hog beside it where
    hog) gated against it: each test's word (REGRESSION, busy, or
    quiet), the lines said of the tests and the machine, and the two
    folders."""
    base, new = folder / f"base-{name}", folder / f"new-{name}"
    common = [sys.executable, "-m", "pytest", "-q", "-n", "2",
              "-p", "aquaprof.pytest_plugin", "-p", "no:cacheprovider",
              str(folder / "test_suite.py")]
    subprocess.run(common + [f"--aquaprof={base}"], cwd=folder,
                   env=env_for(root), check=True, stdout=subprocess.DEVNULL)
    spinning = subprocess.Popen([sys.executable, "-c", "while True: pass"]
                                ) if hog else None
    try:
        done = subprocess.run(
            common + [f"--aquaprof={new}", f"--aquaprof-compare={base}",
                      "--aquaprof-fail=5%"],
            cwd=folder, env=dict(env_for(root), CHANGED="1"),
            capture_output=True, text=True)
    finally:
        if spinning is not None:
            spinning.kill()
            spinning.wait()
    words = {}
    for name_ in ("test_a", "test_b", "test_c", "test_d"):
        if re.search(rf"::{name_}: REGRESSION", done.stdout):
            words[name_] = "REGRESSION"
        elif re.search(rf"::{name_}: {re.escape(BUSY_WORDS)}", done.stdout):
            words[name_] = "busy"
        else:
            words[name_] = "quiet"
    lines = [ln for ln in done.stdout.splitlines()
             if re.search(r"test_suite\.py::test_\w+:|"
                          r"^\s+[!? ] \w: total|note:|how busy", ln)]
    return words, lines, base, new


def xdist_case(root: Path, runs: int, quiet_too: bool) -> None:
    import aquaprof as ap
    sides = (("hog", True), ("quiet", False)) if quiet_too else \
        (("hog", True),)
    counts = {side: {} for side, _ in sides}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "test_suite.py").write_text(SUITE)
        for i in range(runs):
            for side, hog in sides:
                words, lines, base, new = gate_once(
                    root, folder, f"{side}{i}", hog)
                tally = counts[side]
                for test, word in words.items():
                    kind = "d" if test == "test_d" else "unchanged"
                    tally[(kind, word)] = tally.get((kind, word), 0) + 1
                # the same runs judged on CPU time, as the gate's
                # --aquaprof-measure=cpu would
                for name in ("a", "b", "c", "d"):
                    test = f"test_{name}"
                    pick = lambda d: next(d.glob(f"*{test}-*.json"))  # noqa
                    cpu = ap.Report.load(pick(new)).compare(
                        ap.Report.load(pick(base)), measure="cpu")
                    slow = said(cpu, name)[0] in ("slower", "slower?")
                    kind = "d" if name == "d" else "unchanged"
                    key = (kind, "cpu slower" if slow else "cpu not")
                    tally[key] = tally.get(key, 0) + 1
                    # and on wall time with no session reading: the
                    # rule the runs met before the gate read one
                    wall = ap.Report.load(pick(new)).compare(
                        ap.Report.load(pick(base)))
                    slow = said(wall, name)[0] in ("slower", "slower?")
                    key = (kind, "unread slower" if slow else "unread not")
                    tally[key] = tally.get(key, 0) + 1
                print(f"  xdist run {i}, {side}: " + ", ".join(
                    f"{t[5:]} {w}" for t, w in words.items()))
                for ln in lines:
                    print(f"    {ln.strip()[:230 if 'note:' in ln else 600]}")
    for side, tally in counts.items():
        def n(kind: str, word: str) -> int:
            return tally.get((kind, word), 0)
        print(f"xdist    {side:5s}: test_d 1.5x: caught {n('d', 'REGRESSION')}"
              f", said busy {n('d', 'busy')}, missed {n('d', 'quiet')}; "
              f"unchanged tests (3 a run): false alarms "
              f"{n('unchanged', 'REGRESSION')}, said busy "
              f"{n('unchanged', 'busy')}, quiet {n('unchanged', 'quiet')}")
        print(f"xdist    {side:5s}: the same runs, no session reading: "
              f"caught {n('d', 'unread slower')}, missed "
              f"{n('d', 'unread not')}; false alarms "
              f"{n('unchanged', 'unread slower')}, quiet "
              f"{n('unchanged', 'unread not')}")
        print(f"xdist    {side:5s}: on cpu time: caught "
              f"{n('d', 'cpu slower')}, missed {n('d', 'cpu not')}; false "
              f"alarms {n('unchanged', 'cpu slower')}, quiet "
              f"{n('unchanged', 'cpu not')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--root", type=Path,
                        default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--only", default="bimodal,memory,items,few,xdist")
    parser.add_argument("--quiet-too", action="store_true",
                        help="also gate runs with no hog (xdist)")
    args = parser.parse_args()
    root = args.root.resolve()
    sys.path.insert(0, str(root))
    import aquaprof
    print(f"aquaprof from {Path(aquaprof.__file__).parent}")
    cases = args.only.split(",")
    program_cases(root, [c for c in cases if c in STAGE], args.runs)
    if "xdist" in cases:
        xdist_case(root, args.runs, args.quiet_too)


if __name__ == "__main__":
    main()
