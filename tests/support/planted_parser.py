"""A recursive-descent evaluator whose grammar rules are stages: mutual
recursion as a parser makes it (expr calls term, which calls expr again
for a parenthesised factor), each rule's own work planted and timed by
perf_counter in the program, so that what a report ranks can be held
against what the program knows it did.

    expr   := term (('+' | '-') term)*
    term   := factor (('*' | '/') factor)*
    factor := NUMBER | '(' expr ')'
"""
import functools
import re
import time
from typing import Callable, Dict, List, Sequence

import aquaprof as ap

#: a rule's planted work a call, seconds
WORK = {"expr": 0.0004, "term": 0.0002, "factor": 0.0001}

#: nested 6 parentheses deep: each level is expr/term(/factor) again
EXPRESSION = "((((((1+2)*3+4)*5-6)*7+8)/9+1)*2-3)+4*5"


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Evaluator:
    """Evaluates EXPRESSION; the rules named in `staged` are stages, and
    own[rule] sums each rule's time less that of the staged rules it
    called, by perf_counter."""

    def __init__(self, staged: Sequence[str]):
        self.own: Dict[str, float] = {name: 0.0 for name in staged}
        self._inner: List[float] = []   # the staged calls' time, a level
        for name in staged:
            setattr(self, name, self._timed(name, getattr(self, name)))

    def _timed(self, name: str, rule: Callable[[], float]
               ) -> Callable[[], float]:
        @functools.wraps(rule)
        def call() -> float:
            with ap.stage(name):
                start = time.perf_counter()
                self._inner.append(0.0)
                try:
                    return rule()
                finally:
                    spent = time.perf_counter() - start
                    self.own[name] += spent - self._inner.pop()
                    if self._inner:
                        self._inner[-1] += spent
        return call

    def evaluate(self, text: str = EXPRESSION) -> float:
        self._tokens = re.findall(r"\d+|[-+*/()]", text)
        self._at = 0
        return self.expr()

    def _next(self) -> str:
        token = self._tokens[self._at]
        self._at += 1
        return token

    def _peek(self) -> str:
        return self._tokens[self._at] if self._at < len(self._tokens) \
            else ""

    def expr(self) -> float:
        spin(WORK["expr"])
        value = self.term()
        while self._peek() in ("+", "-"):
            sign = 1 if self._next() == "+" else -1
            value += sign * self.term()
        return value

    def term(self) -> float:
        spin(WORK["term"])
        value = self.factor()
        while self._peek() in ("*", "/"):
            op = self._next()
            right = self.factor()
            value = value * right if op == "*" else value / right
        return value

    def factor(self) -> float:
        spin(WORK["factor"])
        if self._peek() == "(":
            self._next()
            value = self.expr()
            self._next()            # ')'
            return value
        return float(self._next())


def profiled(staged: Sequence[str], rounds: int = 3):
    """The report of `rounds` evaluations with the rules in `staged` as
    stages, and each rule's own time by perf_counter."""
    evaluator = Evaluator(staged)
    with ap.Profiler(compensate=False) as prof:
        for _ in range(rounds):
            assert evaluator.evaluate() == eval(EXPRESSION)
    return prof.report(), evaluator.own
