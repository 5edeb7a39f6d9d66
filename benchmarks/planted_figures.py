"""The figures a user acts on, checked against cases planted in real
programs whose truth the program knows on its own: each case a small
program run in a fresh process, printing per figure what was planted,
what the report says and whether they agree.

- memory: a stage that keeps 5 MiB of NumPy a call, one that keeps a
  list of Python objects, one that keeps a 4 MiB torch tensor, and two
  that allocate a 64 MiB temporary (NumPy, torch) freed as they return;
  right: the kept stages' mem delta within 15 % of what they kept (the
  Python objects' size from sys.getsizeof), the temporaries' delta under
  a quarter of one and their rise at least 90 % of one;
- loader: a training loop over a torch DataLoader with 2 workers whose
  dataset keeps 2 MiB a item in the worker, the step keeping 4 MiB and
  dropping a 64 MiB temporary; right: as above, the workers' stage
  counted in their processes;
- percentiles: 1,000 calls, 95 % of 1 ms and 5 % of 20 ms, and 1,000 of
  a heavy-tailed (Pareto) length, with max_spans=50 so that spans are
  dropped; right: p50/p90/p95/p99 within 3 % (+ 20 us) of the same calls
  timed by perf_counter, and the report saying spans were dropped;
- items: items/s with items varying a call, on a stage holding a
  sub-stage, with a third of the calls raising, and on 4 threads at
  once; right: within 5 % (threads: 20 %) of the items over the time
  timed by perf_counter (the threads': from their start to their join);
- ranking: 5 rounds of a recursive stage 8 levels deep (2 ms a level),
  a 10 ms stage, a 3 ms stage under two parents, and 4 threads asleep
  5 ms at once (20 ms summed); right: the order walk, c, the threads'
  stage, then the two decodes; walk's ranked time within 10 % of its
  levels' own time timed by perf_counter, and the threads' stage on the
  clock between 25 ms and the rounds' time from their start to their
  join;
- mutual: a recursive-descent evaluator (expr, term, factor; a rule's
  work 0.4, 0.2, 0.1 ms a call) over an expression 6 parentheses deep,
  10 rounds, with expr and term as stages, then with all three (a cycle
  of three), each rule's own time timed by perf_counter; and a recursion
  7 levels deep that only sleeps 20 ms at its deepest, beside a stage
  computing 5 ms; right: each rule ranks once, at its outermost path,
  within 10 % of its own time, the ranked times' sum the paths' self
  times' (none twice, none left out) and within 10 % of the rules' own
  times, the stages diagnosed those the report names, and the sleeping
  recursion diagnosed waiting.

    python benchmarks/planted_figures.py [--runs N] [--root TREE]
                                         [--only CASE ...]

--root runs the cases against the aquaprof tree at TREE (built in
place), to set a version before a change against this one.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]

# each case prints lines "figure|planted|reported|True or False"
_COMMON = r"""
import time
import aquaprof as ap

def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass

def mib(n):
    return f"{n / 2**20:+.1f} MiB"

def say(figure, planted, reported, ok):
    print(f"{figure}|{planted}|{reported}|{bool(ok)}")
"""

_MEMORY = _COMMON + r"""
import sys
import numpy as np
import torch

MIB = 2**20
kept = []

@ap.stage("np_keep")
def np_keep():
    kept.append(np.ones(5 * MIB // 8))
    spin(0.004)

@ap.stage("np_temp")
def np_temp():
    block = np.ones(64 * MIB // 8)
    spin(0.004)
    return float(block[0])

@ap.stage("torch_keep")
def torch_keep():
    kept.append(torch.ones(MIB))
    spin(0.004)

@ap.stage("torch_temp")
def torch_temp():
    block = torch.ones(16 * MIB)
    spin(0.004)
    return float(block[0])

@ap.stage("py_keep")
def py_keep():
    kept.append([bytes(120) for i in range(40_000)])
    spin(0.004)

with ap.Profiler(memory_interval=0.001) as prof:
    for _ in range(20):
        np_keep(); np_temp(); torch_keep(); torch_temp(); py_keep()
rep = prof.report()
# what the objects hold, each rounded up to the allocator's 16 bytes
py_kept = sum(sys.getsizeof(x) + sum((sys.getsizeof(o) + 15) // 16 * 16
                                     for o in x)
              for x in kept if isinstance(x, list))
for path, truth in (("np_keep", 20 * 5 * MIB), ("torch_keep", 20 * 4 * MIB),
                    ("py_keep", py_kept)):
    d = rep[path].mem_delta
    say(f"{path} mem delta", mib(truth), mib(d), abs(d - truth) < 0.15 * truth)
for path in ("np_temp", "torch_temp"):
    s = rep[path]
    say(f"{path} mem delta", mib(0), mib(s.mem_delta),
        abs(s.mem_delta) < 16 * MIB)
    say(f"{path} mem rise", mib(64 * MIB), mib(s.mem_rise),
        s.mem_rise >= 0.9 * 64 * MIB)
"""

_LOADER = _COMMON + r"""
import torch
from torch.utils.data import DataLoader, Dataset

MIB = 2**20
torch.set_num_threads(1)

class Keeping(Dataset):
    def __init__(self):
        self.cache = []
    def __len__(self):
        return 64
    @ap.stage("getitem")
    def __getitem__(self, i):
        self.cache.append(torch.ones(MIB // 2))   # 2 MiB kept in its worker
        return torch.randn(64)

if __name__ == "__main__":
    kept = []
    model = torch.nn.Linear(64, 64)
    with ap.Profiler() as prof:
        for x in DataLoader(Keeping(), batch_size=8, num_workers=2):
            with ap.stage("step"):
                kept.append(torch.ones(MIB))          # 4 MiB kept a step
                temp = torch.ones(16 * MIB)           # 64 MiB dropped
                model(x).sum().backward()
                spin(0.005)
                del temp
    rep = prof.report()
    get, step = rep["getitem"], rep["step"]
    procs = len({p.process for p in rep.by_process("getitem")})
    say("getitem (workers) mem delta", mib(64 * 2 * MIB),
        f"{mib(get.mem_delta)} in {procs} processes",
        abs(get.mem_delta - 128 * MIB) < 0.15 * 128 * MIB and procs == 2)
    say("step mem delta", mib(8 * 4 * MIB), mib(step.mem_delta),
        abs(step.mem_delta - 32 * MIB) < 0.25 * 32 * MIB)
    say("step mem rise", mib(64 * MIB), mib(step.mem_rise),
        step.mem_rise >= 0.9 * 64 * MIB)
"""

_PERCENTILES = _COMMON + r"""
import random
import numpy as np

random.seed(7)
plans = {
    "bimodal": [0.020 if random.random() < 0.05 else 0.001
                for _ in range(1000)],
    "pareto": [min(0.0005 * random.paretovariate(1.5), 0.05)
               for _ in range(1000)],
}
timed = {name: [] for name in plans}
with ap.Profiler(max_spans=50) as prof:
    for name, plan in plans.items():
        stage = ap.stage(name)
        for seconds in plan:
            t0 = time.perf_counter()
            with stage:
                spin(seconds)
            timed[name].append(time.perf_counter() - t0)
rep = prof.report()
for name, calls in timed.items():
    wall = rep[name].wall
    for q in (50, 90, 95, 99):
        truth = float(np.percentile(calls, q, method="inverted_cdf"))
        got = wall.percentile(q)
        say(f"{name} p{q}", f"{truth * 1e3:.3f} ms", f"{got * 1e3:.3f} ms",
            abs(got - truth) <= 0.03 * truth + 20e-6)
said = f"{rep.spans_dropped:,} spans beyond max_spans" in str(rep)
say("spans dropped, said", f"{2000 - 50:,} dropped",
    f"{rep.spans_dropped:,}, said" if said else "not said",
    said and rep.spans_dropped == 1950)
"""

_ITEMS = _COMMON + r"""
import random
import threading

random.seed(3)
took = {"varying": 0.0, "outer": 0.0, "failing": 0.0}
items = {"varying": 0, "outer": 0, "failing": 0}
with ap.Profiler() as prof:
    for i in range(60):
        n = random.randint(1, 64)
        t0 = time.perf_counter()
        with ap.stage("varying", items=n):
            spin(n * 50e-6)
        took["varying"] += time.perf_counter() - t0
        items["varying"] += n
        t0 = time.perf_counter()
        with ap.stage("outer", items=n):
            spin(0.001)
            with ap.stage("inner"):
                spin(n * 30e-6)
        took["outer"] += time.perf_counter() - t0
        items["outer"] += n
        t0 = time.perf_counter()
        try:
            with ap.stage("failing", items=n):
                spin(n * 20e-6)
                if i % 3 == 0:
                    raise ValueError(i)
        except ValueError:
            pass
        took["failing"] += time.perf_counter() - t0
        items["failing"] += n

    def worker():
        for _ in range(20):
            with ap.stage("pooled", items=10):
                time.sleep(0.005)
    threads = [threading.Thread(target=worker) for _ in range(4)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    pooled = 800 / (time.perf_counter() - t0)
rep = prof.report()
for name in took:
    truth = items[name] / took[name]
    got = rep[name].throughput
    say(f"{name} items/s", f"{truth:,.0f}/s", f"{got:,.0f}/s",
        abs(got - truth) < 0.05 * truth)
said = "failing: 20 of 60 calls raised" in str(rep)
say("failing: raised calls said", "20 of 60 raised",
    "said" if said else "not said", said)
got = rep["pooled"].throughput
say("pooled (4 threads) items/s", f"{pooled:,.0f}/s", f"{got:,.0f}/s",
    abs(got - pooled) < 0.2 * pooled)
"""

_RANKING = _COMMON + r"""
import threading

own = {"walk": 0.0, "fanout": 0.0}

@ap.stage("walk")
def walk(depth):
    t0 = time.perf_counter()
    spin(0.002)
    if depth:
        t1 = time.perf_counter()
        walk(depth - 1)
        t0 += time.perf_counter() - t1   # the level below is its own
    own["walk"] += time.perf_counter() - t0

def nap():
    with ap.stage("fanout"):
        time.sleep(0.005)

with ap.Profiler() as prof:
    for _ in range(5):
        walk(7)
        with ap.stage("c"):
            spin(0.010)
        for parent in ("a", "b"):
            with ap.stage(parent):
                with ap.stage("decode"):
                    spin(0.003)
        threads = [threading.Thread(target=nap) for _ in range(4)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        own["fanout"] += time.perf_counter() - t0
rep = prof.report()
order = [s.path for s in rep.top(5)]
decodes = {"a/decode", "b/decode"}
say("top 5 order", "walk, c, fanout, a or b/decode", ", ".join(order),
    order[:3] == ["walk", "c", "fanout"] and set(order[3:]) == decodes)
walk_ranked = rep.ranked_self(rep["walk"]) if hasattr(rep, "ranked_self") \
    else rep["walk"].self_wall
say("walk ranked time (8 levels)", f"{own['walk'] * 1e3:.1f} ms",
    f"{walk_ranked * 1e3:.1f} ms",
    abs(walk_ranked - own["walk"]) < 0.1 * own["walk"])
fanout = rep["fanout"]
say("fanout on the clock (4 threads)",
    f"at most {own['fanout'] * 1e3:.1f} ms",
    f"{fanout.self_wall * 1e3:.1f} ms ({fanout.self_time * 1e3:.0f} summed)",
    fanout.self_wall <= own["fanout"] and
    fanout.self_wall >= 5 * 0.005)
"""

_MUTUAL = _COMMON + r"""
import re

WORK = {"expr": 0.0004, "term": 0.0002, "factor": 0.0001}
TEXT = "((((((1+2)*3+4)*5-6)*7+8)/9+1)*2-3)+4*5"

class Evaluator:
    def __init__(self, staged):
        self.own = {name: 0.0 for name in staged}
        self.inner = []
        for name in staged:
            setattr(self, name, self.timed(name, getattr(self, name)))

    def timed(self, name, rule):
        def call():
            with ap.stage(name):
                start = time.perf_counter()
                self.inner.append(0.0)
                try:
                    return rule()
                finally:
                    spent = time.perf_counter() - start
                    self.own[name] += spent - self.inner.pop()
                    if self.inner:
                        self.inner[-1] += spent
        return call

    def evaluate(self):
        self.tokens, self.at = re.findall(r"\d+|[-+*/()]", TEXT), 0
        return self.expr()

    def peek(self):
        return self.tokens[self.at] if self.at < len(self.tokens) else ""

    def take(self):
        self.at += 1
        return self.tokens[self.at - 1]

    def expr(self):
        spin(WORK["expr"])
        value = self.term()
        while self.peek() in ("+", "-"):
            value += (1 if self.take() == "+" else -1) * self.term()
        return value

    def term(self):
        spin(WORK["term"])
        value = self.factor()
        while self.peek() in ("*", "/"):
            op, right = self.take(), self.factor()
            value = value * right if op == "*" else value / right
        return value

    def factor(self):
        spin(WORK["factor"])
        if self.peek() == "(":
            self.take()
            value = self.expr()
            self.take()
            return value
        return float(self.take())

def listed(paths):
    cut = [p if len(p) <= 30 else p[:13] + "..." + p[-14:] for p in paths]
    return ", ".join(cut[:4]) + (", ..." if len(cut) > 4 else "")

def ranked(rep, s):
    return rep.ranked_self(s) if hasattr(rep, "ranked_self") \
        else s.self_wall

for staged in (("expr", "term"), ("expr", "term", "factor")):
    ev = Evaluator(staged)
    with ap.Profiler(compensate=False) as prof:
        for _ in range(10):
            ev.evaluate()
    rep = prof.report()
    cycle = "/".join(staged)
    heads = rep.top(len(rep))
    outermost = {"/".join(staged[:i + 1]) for i in range(len(staged))}
    say(f"{cycle}: stages ranked", ", ".join(sorted(outermost)),
        f"{len(heads)}: " + listed([s.path for s in heads]),
        {s.path for s in heads} == outermost)
    for name in staged:
        best = max((ranked(rep, s) for s in heads if s.name == name),
                   default=0.0)
        say(f"{cycle}: {name} ranked (largest rank)",
            f"{ev.own[name] * 1e3:.1f} ms",
            f"{best * 1e3:.1f} ms", abs(best - ev.own[name])
            < 0.1 * ev.own[name])
    summed = sum(ranked(rep, s) for s in heads)
    paths = sum(s.self_wall for s in rep.stages)
    planted = sum(ev.own.values())
    say(f"{cycle}: ranked times' sum",
        f"{planted * 1e3:.1f} ms (paths' self: {paths * 1e3:.1f} ms)",
        f"{summed * 1e3:.1f} ms",
        abs(summed - paths) < 1e-9 and abs(summed - planted) < 0.1 * planted)
    named = [s.path for s, _ in rep.bottlenecks(3)] \
        if hasattr(rep, "bottlenecks") else [s.path for s in rep.top(3)]
    found = [f.path for f in rep.diagnose(3)]
    say(f"{cycle}: stages diagnosed", listed(named), listed(found),
        found == named)

@ap.stage("descend")
def descend(depth):
    if depth:
        descend(depth - 1)
    else:
        time.sleep(0.02)

with ap.Profiler(compensate=False) as prof:
    for _ in range(3):
        descend(6)
        with ap.stage("compute"):
            spin(0.005)
rep = prof.report()
kinds = {f.path: f for f in rep.diagnose(2)}
said = kinds["descend"] if "descend" in kinds else None
say("descend (sleeps at its 7th level): class", "waiting",
    said.kind + " (" + said.evidence.split(", ")[0] + ")" if said
    else "not diagnosed", said is not None and said.kind == "waiting")
"""

CASES: Dict[str, str] = {
    "memory": _MEMORY,
    "loader": _LOADER,
    "percentiles": _PERCENTILES,
    "items": _ITEMS,
    "ranking": _RANKING,
    "mutual": _MUTUAL,
}


def run_case(code: str, root: Path, folder: Path
             ) -> List[Tuple[str, str, str, bool]]:
    """The figures the case printed, or one line saying it failed."""
    # a file, not -c: DataLoader workers started by spawn re-import it
    script = folder / "case.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], cwd=str(folder),
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(root)))
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return [("(the case)", "", f"failed: {last}", False)]
    rows = []
    for line in out.stdout.splitlines():
        parts = line.split("|")
        if len(parts) == 4:
            rows.append((parts[0], parts[1], parts[2], parts[3] == "True"))
    return rows


def main(argv: List[str]) -> int:
    import tempfile
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--root", type=Path, default=ROOT)
    p.add_argument("--only", nargs="*", choices=sorted(CASES))
    a = p.parse_args(argv)
    if a.runs < 1:
        p.error("--runs must be at least 1")
    print(f"aquaprof tree: {a.root.resolve()}; Python "
          f"{sys.version.split()[0]}; {a.runs} run(s) a case")
    print("| case | figure | planted | report says | verdict |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.only or CASES:
            for run in range(a.runs):
                for figure, planted, said, ok in run_case(
                        CASES[name], a.root.resolve(), Path(tmp)):
                    tag = name if a.runs == 1 else f"{name} #{run + 1}"
                    print(f"| {tag} | {figure} | {planted} | {said} | "
                          f"{'PASS' if ok else 'FAIL'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
