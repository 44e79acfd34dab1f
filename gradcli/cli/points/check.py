"""``check EXPR --points DATA``: the gradient checked at every point of a data set, each numeric method
batched over the points (one run of the program per round of steps for all the points of a chunk,
never a loop over points), and the worst points reported.

Every point's verdict is decided as ``check --at`` decides it at that point (gradcli/check/decide.py):
the same finite differences with their kink search, the complex step only where every operation on
the path is complex-analytic, the same inconclusive estimates, tolerances and expected values; the
chunk's points are only its batch. SymPy works on one point at a time and is left out.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...check.decide import AGREE, MISMATCH, Decision, Reference, Road, decide, tolerances
from ...check.result import METHOD_NAMES
from ...errors import UsageError
from .source import Chunk, Columns, chunks

ALIASES = {"fd": "finite_difference", "finite_difference": "finite_difference", "complex": "complex_step",
           "complex_step": "complex_step", "cs": "complex_step", "sympy": "sympy"}  # fmt: skip
WORST = 5  # points shown
# why a point fails when no method disagrees there, in the order a single point's verdict says it
CAUSES = {
    "nonfinite": "the value or the gradient is not finite",
    "kink": "autograd's value lies outside the one-sided derivatives at a kink",
    "unjudged": "no method could judge (inconclusive)",
}
SHOWN = {"nonfinite": "not finite", "kink": "kink", "unjudged": "inconclusive"}
NOT_NEEDED = "not needed at this point"


@dataclass(order=True)
class Bad:
    """One element at one point, for the table of the worst: ``ratio`` is its error over its tolerance."""

    ratio: float
    point: int = field(compare=False)
    where: str = field(compare=False)
    label: str = field(compare=False)
    method: str = field(compare=False)
    autograd: float = field(compare=False)
    other: float = field(compare=False)


@dataclass
class Tally:
    points: int = 0
    failed: int = 0
    worst: list[Bad] = field(default_factory=list)  # a heap of the WORST largest ratios
    skipped: dict[str, str] = field(default_factory=dict)  # method: why it did not run (the first reason)
    skipped_at: dict[str, int] = field(default_factory=dict)  # method: at how many points
    inconclusive: dict[str, int] = field(default_factory=dict)  # method: points where it could not judge some element
    agreed: set[str] = field(default_factory=set)  # methods that judged somewhere
    disagreed: dict[str, int] = field(default_factory=dict)  # method: points where it disagrees
    causes: dict[str, int] = field(default_factory=dict)  # failing points no method disagrees at, by cause
    methods: list[str] = field(default_factory=list)  # as the decision ran them (finite differences as a stand-in)

    def keep(self, bad: Bad) -> None:
        if len(self.worst) < WORST:
            heapq.heappush(self.worst, bad)
        elif bad.ratio > self.worst[0].ratio:
            heapq.heapreplace(self.worst, bad)

    def count(self, table: dict[str, int], key: str, k: int) -> None:
        if k:
            table[key] = table.get(key, 0) + k


def chosen_methods(methods: list[str]) -> list[str]:
    names = [m.strip().lower() for item in methods for m in item.split(",") if m.strip()]
    out = []
    for name in names or ["fd", "complex"]:
        if name not in ALIASES:
            raise UsageError(f"--method {name}: choose from sympy, fd, complex")
        if ALIASES[name] not in ("sympy", *out):
            out.append(ALIASES[name])
    return out


class PointsCheck:
    """Everything a chunk needs: the program, shared values, what is differentiated, tolerances."""

    def __init__(self, program: Any, values: dict[str, Any], wrt: list[str], seed: str | None, methods: list[str],
                 rtol: float | None, atol: float | None, expect: dict[str, str]) -> None:  # fmt: skip
        from ...check.numeric import tolerance_problem
        from ...lang.program import load

        for name, value in (("rtol", rtol), ("atol", atol)):
            problem = tolerance_problem(name, value)
            if problem:
                raise UsageError(problem)
        self.program, self.values, self.wrt, self.seed = program, values, wrt or None, seed
        self.methods = chosen_methods(methods)
        self.rtol, self.atol = rtol, atol
        self.formulas = expect
        self.expect = {name: load(formula) for name, formula in expect.items()}
        if not self.methods and not self.expect:
            raise UsageError("check --points compares with fd, complex or --expect: SymPy works on one point at a time")
        self.tally = Tally()
        self.names: list[str] = []
        self.path: tuple[str | None, str | None, str | None] | None = None  # an expression's, the same at every point

    def chunk(self, chunk: Chunk) -> None:
        from ...lang.points import evaluate_points

        names, result = evaluate_points(self.program, chunk.numbers, self.values, self.wrt, self.seed, chunk.first)
        unexpected = [name for name in self.expect if name not in names]
        if unexpected:
            raise UsageError(f"--expect {unexpected[0]}: {unexpected[0]!r} is not differentiated (--wrt)")
        self.names = names
        road = _ChunkRoad(self, chunk, names, result).road()
        rtol, atol = tolerances(np.dtype(np.float64), self.rtol, self.atol, road)
        given = {"expect": self._expected(chunk, road, names, result)} if self.expect else {}
        decision = decide(road, self.methods, rtol, atol, given)
        self._tally(chunk, road, decision)

    def paths(self, chunk: Chunk, names: list[str]) -> list[tuple[str | None, str | None, str | None]]:
        """At each point, why a complex step cannot follow the program there: an expression's operations
        are the same at every point (both sides of a condition run); a Python function's may differ."""
        from ...check.run import path_at

        def at(i: int) -> tuple[str | None, str | None, str | None]:
            point = {**self.values, **{name: np.asarray(column[i]) for name, column in chunk.numbers.items()}}
            return path_at(self.program, point, names, self.seed)

        if self.program.function is not None:
            return [at(i) for i in range(chunk.n)]
        if self.path is None:
            self.path = at(0)
        return [self.path] * chunk.n

    def _expected(self, chunk: Chunk, road: Road, names: list[str], result: Any) -> Reference:
        """The user's formulas at every point, each broadcast to its variable's shape."""
        from ...lang.points import point_values

        n = chunk.n
        reference, covered = road.gradient.copy(), np.zeros(road.gradient.shape, dtype=bool)
        offsets = np.cumsum([0, *(int(np.prod(result.gradient[m].shape[1:], dtype=int)) for m in names)])
        for name, program in self.expect.items():
            k = names.index(name)
            shape = result.gradient[name].shape[1:]
            with np.errstate(all="ignore"):
                value = np.asarray(point_values(program, chunk.numbers, self.values), dtype=np.float64)
            own = value.shape[1:]
            try:
                block = np.broadcast_to(value.reshape((n,) + (1,) * (len(shape) - len(own)) + own), (n, *shape))
            except ValueError:
                raise UsageError(
                    f"--expect {name}: the formula gives shape {own}, but {name} has shape {shape}"
                ) from None
            reference[:, offsets[k] : offsets[k + 1]] = block.reshape(n, -1)
            covered[:, offsets[k] : offsets[k + 1]] = True
        return Reference("expect", reference, None, ~covered, "the expected formula gives", [None] * n,
                         only=list(self.expect))  # fmt: skip

    def _tally(self, chunk: Chunk, road: Road, decision: Decision) -> None:
        tally, n = self.tally, chunk.n
        tally.points += n
        tally.failed += int((~decision.ok).sum())
        tally.methods = list(dict.fromkeys([*tally.methods, *decision.checks]))
        mismatch = np.zeros(n, dtype=bool)
        for name, c in decision.checks.items():
            if (c.ok == AGREE).any():
                tally.agreed.add(name)
            tally.count(tally.disagreed, name, int((c.ok == MISMATCH).sum()))
            mismatch |= c.ok == MISMATCH
            tally.count(tally.inconclusive, name, int((c.loose.any(axis=1) | c.inconclusive).sum()))
            skipped = [r for r in c.ref.reason if r is not None and r != NOT_NEEDED]
            if skipped:
                tally.skipped.setdefault(name, skipped[0])
                tally.count(tally.skipped_at, name, len(skipped))
            for e in range(road.x0.shape[1]):
                judged = np.flatnonzero(c.mask[:, e])
                for i in judged[np.argsort(c.badness[judged, e])[-WORST:]]:
                    self._keep(chunk, road, int(i), e, name, float(c.badness[i, e]), float(c.ref.reference[i, e]))
        causes = {
            "nonfinite": decision.nonfinite,
            "kink": ~decision.subgradient.all(axis=1),
            "unjudged": ~decision.ok,
        }
        left = ~decision.ok & ~mismatch
        for cause, where in causes.items():
            found = left & where
            tally.count(tally.causes, cause, int(found.sum()))
            for i in np.flatnonzero(found)[:WORST]:
                e = int(np.argmax(~decision.subgradient[i])) if cause == "kink" else 0
                self._keep(chunk, road, int(i), e, cause, np.inf, np.nan)
            left &= ~found

    def _keep(self, chunk: Chunk, road: Road, i: int, e: int, method: str, ratio: float, other: float) -> None:
        autograd = float(road.gradient[i, e]) if road.labels else float("nan")
        label = f"d/d{road.labels[e]}" if road.labels else ""
        self.tally.keep(Bad(ratio, chunk.first + i, _where(chunk, i), label, method, autograd, other))


class _ChunkRoad:
    """A chunk's points as the decision takes them: every differentiated element of every point a
    number in a row, the program evaluated on rows of moved points in one batched run."""

    def __init__(self, check: PointsCheck, chunk: Chunk, names: list[str], result: Any) -> None:
        from ...lang.values import seed_vector

        self.check, self.chunk, self.names = check, chunk, names
        self.shapes = {name: tuple(result.gradient[name].shape[1:]) for name in names}
        self.sizes = [int(np.prod(self.shapes[name], dtype=int)) for name in names]
        shape = result.value.shape[1:]
        self.vector = None if check.seed is None else np.asarray(seed_vector(check.seed, shape), dtype=np.float64)
        self.f0 = self._seeded(result.value)
        self.gradient = self._flat({name: result.gradient[name] for name in names})
        n = chunk.n
        self.x0 = self._flat({
            name: chunk.numbers[name] if name in chunk.numbers
            else np.broadcast_to(np.asarray(check.values[name], dtype=np.float64), (n, *self.shapes[name]))
            for name in names
        })  # fmt: skip

    def road(self) -> Road:
        from ...lang.program import element_labels

        paths = self.check.paths(self.chunk, self.names)
        labels = [label for name in self.names for label in element_labels(name, self.shapes[name])]
        return Road(self.x0, self.f0, self.gradient, labels, self.evaluate, self.gradient_at,
                    [p[0] for p in paths], paths[0][1], [p[2] for p in paths])  # fmt: skip

    def _flat(self, per_name: dict[str, np.ndarray]) -> np.ndarray:
        n = self.chunk.n
        parts = [np.asarray(per_name[name], dtype=np.float64).reshape(n, -1) for name in self.names]
        return np.concatenate(parts, axis=1) if parts else np.zeros((n, 0))

    def _seeded(self, value: np.ndarray) -> np.ndarray:
        rows = len(value)
        if self.vector is None:
            return value.reshape(rows)
        return (value.reshape(rows, -1) * self.vector.reshape(1, -1)).sum(axis=1)

    def _moved(self, rows: np.ndarray, owner: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The columns and shared values of the rows' points: each row's own numbers for the differentiated
        variables, its point's for the other columns."""
        columns = {name: c[owner] for name, c in self.chunk.numbers.items() if name not in self.names}
        offsets = np.cumsum([0, *self.sizes])
        for k, name in enumerate(self.names):
            columns[name] = rows[:, offsets[k] : offsets[k + 1]].reshape(len(rows), *self.shapes[name])
        return columns, {k: v for k, v in self.check.values.items() if k not in self.names}

    def evaluate(self, rows: np.ndarray, owner: np.ndarray) -> np.ndarray:
        from ...lang.points import point_values

        return self._seeded(np.asarray(point_values(self.check.program, *self._moved(rows, owner))))

    def gradient_at(self, rows: np.ndarray, owner: np.ndarray) -> np.ndarray:
        from ...lang.points import evaluate_points

        columns, values = self._moved(rows, owner)
        _, result = evaluate_points(self.check.program, columns, values, self.names, self.check.seed)
        n = len(rows)
        return np.concatenate([np.asarray(result.gradient[m], dtype=np.float64).reshape(n, -1) for m in self.names],
                              axis=1)  # fmt: skip


def _where(chunk: Chunk, i: int) -> str:
    cells = [f"{k} = {float(c[i])!r}" for k, c in list(chunk.numbers.items())[:6]]
    return "(" + ", ".join(cells) + ")"


def check_points_file(
    program: Any, spec: str, values: dict[str, Any], wrt: list[str], methods: list[str], rtol: float | None,
    atol: float | None, seed: str | None, expect: dict[str, str], as_json: bool, chunk_rows: int | None = None,
) -> bool:  # fmt: skip
    """Check every point of ``spec``; print the worst points; True when all agree."""
    from .. import output
    from .run import check_chunk_rows

    checker = PointsCheck(program, values, wrt, seed, methods, rtol, atol, expect)
    columns: list[Columns] = []
    for chunk in chunks(spec, set(program.variables), False, check_chunk_rows(chunk_rows), columns):
        checker.chunk(chunk)
    tally = checker.tally
    if not tally.points:
        raise UsageError(f"--points {spec}: no points after the header")
    unexpected = [name for name in expect if name not in checker.names]
    if unexpected:
        raise UsageError(f"--expect {unexpected[0]}: {unexpected[0]!r} is not differentiated (--wrt)")
    worst, seen = [], set()
    for bad in sorted(tally.worst, reverse=True):  # each point once, at its worst
        if bad.point not in seen:
            seen.add(bad.point)
            worst.append(bad)
    ok = tally.failed == 0
    if as_json:
        output.print_json(_document(checker, worst, ok))
        return ok
    _print(checker, worst, ok)
    return ok


def _document(checker: PointsCheck, worst: list[Bad], ok: bool) -> dict[str, Any]:
    tally = checker.tally
    return {
        "ok": ok, "points": tally.points, "failed": tally.failed, "methods": tally.methods or checker.methods,
        "disagreeing": [m for m in tally.methods if m in tally.disagreed],
        "disagreeing_points": tally.disagreed, "other_failures": tally.causes, "skipped": tally.skipped,
        "skipped_points": tally.skipped_at, "inconclusive_points": tally.inconclusive,
        "worst": [{"point": b.point + 1, "at": b.where, "element": b.label, "method": b.method, "autograd": b.autograd,
                   "other": b.other, "error_over_tolerance": b.ratio} for b in worst],
    }  # fmt: skip


def _print(checker: PointsCheck, worst: list[Bad], ok: bool) -> None:
    from .. import output

    tally = checker.tally
    rows = [["point", "", "autograd", "other", "method", "err/tol", ""]]
    for b in worst:
        verdict = "ok" if b.ratio <= 1.0 else "MISMATCH"
        rows.append([f"{b.point + 1:,} {b.where}", b.label, output.shown(b.autograd), output.shown(b.other),
                     METHOD_NAMES.get(b.method) or SHOWN[b.method], f"{b.ratio:.2g}", verdict])  # fmt: skip
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    print("the worst points:")
    for r in rows:
        print("  " + "  ".join(c.ljust(w) if k < 2 else c.rjust(w) for k, (c, w) in enumerate(zip(r, widths))).rstrip())
    for line in _said(tally):
        print(line)
    print(summary(tally))


def _said(tally: Tally) -> list[str]:
    """Why a method did not run, or could not judge, and at how many points."""
    n = tally.points
    lines = []
    for method, reason in tally.skipped.items():
        k = tally.skipped_at[method]
        lines.append(f"{METHOD_NAMES[method]}: {reason}" + ("" if k == n else f" (at {k:,} of {n:,} points)"))
    for method, k in tally.inconclusive.items():
        lines.append(
            f"{METHOD_NAMES[method]}: inconclusive at {k:,} of {n:,} points (its own error, or autograd's rounding, "
            "is a sizeable part of the value there; not judged there: check --at at one of them says more)"
        )
    return lines


def summary(tally: Tally) -> str:
    """The last line: OK, or at how many points what went wrong, naming only the methods that disagreed."""
    n = tally.points
    if not tally.failed:
        agreed = [METHOD_NAMES[m] for m in tally.methods if m in tally.agreed]
        if not agreed:
            return f"OK: at all {n:,} points autograd's values are valid subgradients (not differentiable there)"
        return f"OK: at all {n:,} points autograd agrees with {', '.join(agreed)}"
    clauses = []
    disagreeing = tally.failed - sum(tally.causes.values())
    if disagreeing:
        names = ", ".join(METHOD_NAMES[m] for m in tally.methods if m in tally.disagreed)
        clauses.append((disagreeing, f"autograd disagrees with {names}"))
    clauses += [(k, CAUSES[cause]) for cause, k in tally.causes.items()]
    (k, text), *more = clauses
    return f"MISMATCH: at {k:,} of {n:,} points {text}" + "".join(f"; at {k:,} {text}" for k, text in more)
