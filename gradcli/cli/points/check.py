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
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...autograd import replay as replaying  # called through the module: a test counts the replays
from ...autograd.forward import key
from ...check.decide import AGREE, MISMATCH, Decision, Reference, Road, decide, expected, expected_names, tolerances
from ...check.numeric import tolerance_problem
from ...check.result import METHOD_NAMES
from ...check.run import Recorded, method_names, not_analytic
from ...errors import UsageError
from ...lang.compute import element_labels
from ...lang.compute.points import evaluate_points, point_values, recorded_points
from ...lang.data import Chunk, Columns, DataSet
from ...lang.program import load
from ...lang.values import checked_seed, seed_vector
from .. import output
from .run import check_chunk_rows

WORST = 5  # points shown
REPLAYED = 4_000_000  # input elements a replay of the chunk's record takes at once
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
    kinked: int = 0  # points not differentiable along some element (a kink or a step)

    def keep(self, bad: Bad) -> None:
        if len(self.worst) < WORST:
            heapq.heappush(self.worst, bad)
        elif bad.ratio > self.worst[0].ratio:
            heapq.heapreplace(self.worst, bad)

    def count(self, table: dict[str, int], key: str, k: int) -> None:
        if k:
            table[key] = table.get(key, 0) + k


def chosen_methods(methods: list[str]) -> list[str]:
    """--method read as check --at reads it (the same names, the same refusal); by default finite
    differences and the complex step, SymPy left out (it works on one point at a time)."""
    return [name for name in method_names(methods or ["fd", "complex"]) if name != "sympy"]


class PointsCheck:
    """Everything a chunk needs: the program, shared values, what is differentiated, tolerances."""

    def __init__(self, program: Any, values: dict[str, Any], wrt: list[str], seed: str | None, methods: list[str],
                 rtol: float | None, atol: float | None, expect: dict[str, str]) -> None:  # fmt: skip
        for name, value in (("rtol", rtol), ("atol", atol)):
            problem = tolerance_problem(name, value)
            if problem:
                raise UsageError(problem)
        if seed is not None:  # a bad --seed is said before the data is opened (no reader's threads to outlive)
            checked_seed(seed)
        self.program, self.values, self.wrt, self.seed = program, values, wrt or None, seed
        self.methods = chosen_methods(methods)
        self.rtol, self.atol = rtol, atol
        self.formulas = expect
        self.expect = {name: load(formula) for name, formula in expect.items()}
        # the data's columns an --expect formula names and the expression does not: read for it alone
        mentioned = {v for formula in self.expect.values() for v in formula.variables}
        self.extra = sorted(mentioned - set(program.variables) - set(values))
        if not self.methods and not self.expect:
            raise UsageError("check --points compares with fd, complex or --expect: SymPy works on one point at a time")
        self.tally = Tally()
        self.names: list[str] = []

    def chunk(self, chunk: Chunk) -> None:
        extra = {k: chunk.numbers.pop(k) for k in self.extra if k in chunk.numbers}
        road, decision = self.decided(chunk, extra)
        self._tally(chunk, road, decision)

    def decided(self, chunk: Chunk, extra: dict[str, np.ndarray] | None = None) -> tuple[Road, Decision]:
        """Every point of the chunk decided, as check --at decides one point."""
        # check's road, as check --at: the zero derivatives of unused variables are checked too
        names, result = evaluate_points(
            self.program, chunk.numbers, self.values, self.wrt, self.seed, chunk.first, unused=True
        )
        expected_names(list(self.expect), names)
        self.names = names
        road = _ChunkRoad(self, chunk, names, result).road()
        rtol, atol = tolerances(road.dtype, self.rtol, self.atol, road)  # (float32 inside a function: float32's)
        given = {"expect": self._expected(chunk, road, names, result, extra or {})} if self.expect else {}
        return road, decide(road, self.methods, rtol, atol, given)

    def _expected(
        self, chunk: Chunk, road: Road, names: list[str], result: Any, extra: dict[str, np.ndarray]
    ) -> Reference:
        """The user's formulas at every point, each broadcast to its variable's shape (as check --at's)."""
        values = {}
        for name, program in self.expect.items():
            with np.errstate(all="ignore"):
                values[name] = np.asarray(
                    point_values(program, {**chunk.numbers, **extra}, self.values), dtype=np.float64
                )
        return expected(road.gradient, names, [result.gradient[m].shape[1:] for m in names], values)

    def _tally(self, chunk: Chunk, road: Road, decision: Decision) -> None:
        tally, n = self.tally, chunk.n
        tally.points += n
        tally.failed += int((~decision.ok).sum())
        tally.kinked += int(decision.kinked.any(axis=1).sum())
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
    """A chunk's points as the decision takes them: every differentiated element of every point a number
    in a row. The points' batched run is recorded once and replayed at rows of moved points, as check
    --at replays its one point's record: what runs without the graph (a comparison, ``detach``) keeps
    each point's own value, so both roads differentiate the same function. A program that cannot run
    batched (a Python function) is recorded point by point, as check --at records it."""

    def __init__(self, check: PointsCheck, chunk: Chunk, names: list[str], result: Any) -> None:
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
        self.recorded = None if not check.program.replayable else (
            recorded_points(check.program, chunk.numbers, check.values, names))  # fmt: skip
        self.each: list[Any] = [] if self.recorded is not None else self._each()
        self.roads: list[Road] = []  # each point's own road, as check --at has it (when recorded point by point)

    def _each(self) -> list[Any]:
        return [Recorded(self.check.program, point, self.names, self.check.seed) for point in self._points()]

    def _points(self) -> list[dict[str, Any]]:
        numbers = self.chunk.numbers
        return [{**self.check.values, **{k: np.asarray(c[i]) for k, c in numbers.items()}} for i in range(self.chunk.n)]

    def road(self) -> Road:
        labels = [label for name in self.names for label in element_labels(name, self.shapes[name])]
        if self.recorded is not None:  # an expression: the same operations at every point
            reason = not_analytic(self.recorded[0], self.check.program)
            return Road(self.x0, self.f0, self.gradient, labels, self.evaluate, self.gradient_at,
                        [reason] * self.chunk.n)  # fmt: skip
        roads = self.roads = [recorded.road() for recorded in self.each]
        return Road(self.x0, self.f0, self.gradient, labels, self.evaluate, self.gradient_at,
                    [r.not_analytic[0] for r in roads], roads[0].escapes,
                    [None if r.continuation is None else r.continuation[0] for r in roads],
                    max((r.dtype for r in roads), key=lambda d: np.finfo(d).eps))  # fmt: skip

    def _flat(self, per_name: dict[str, np.ndarray]) -> np.ndarray:
        n = self.chunk.n
        parts = [np.asarray(per_name[name], dtype=np.float64).reshape(n, -1) for name in self.names]
        return np.concatenate(parts, axis=1) if parts else np.zeros((n, 0))

    def _seeded(self, value: np.ndarray) -> np.ndarray:
        rows = value.shape[0]
        if self.vector is None:
            return value.reshape(rows)
        return (value.reshape(rows, -1) * self.vector.reshape(1, -1)).sum(axis=1)

    def evaluate(self, rows: np.ndarray, owner: np.ndarray) -> np.ndarray:
        """The (seeded) value at each row, the row moved from point ``owner``."""
        out = np.empty(len(rows), dtype=np.result_type(rows.dtype, np.float64))
        if self.recorded is None:
            for p in np.unique(owner):
                mine = owner == p
                out[mine] = self.each[p].evaluate(rows[mine]).reshape(-1)
            return out
        points, n = self.x0.shape
        place = _places(owner, points)
        per = max(1, REPLAYED // max(1, points * max(n, 1)))  # rows a point per replay: memory stays bounded
        for start in range(0, int(place.max(initial=-1)) + 1, per):
            mine = (place >= start) & (place < start + per)
            k = int(place[mine].max()) - start + 1
            moved = np.broadcast_to(self.x0.astype(out.dtype), (k, points, n)).copy()
            moved[place[mine] - start, owner[mine]] = rows[mine]
            out[mine] = self._replayed(moved)[place[mine] - start, owner[mine]]
        return out

    def _replayed(self, moved: np.ndarray) -> np.ndarray:
        """The record replayed at ``moved`` (k, P, N): each of the k batches moves every point: (k, P)."""
        tape, leaves, out = self.recorded  # type: ignore[misc]
        k, points = moved.shape[:2]
        offsets = np.cumsum([0, *self.sizes])
        batched = {key(leaves[name]): moved[..., offsets[i] : offsets[i + 1]].reshape(k, points, *self.shapes[name])
                   for i, name in enumerate(self.names)}  # fmt: skip
        found = replaying.replay(tape, batched).get(key(out))
        if found is None:  # the output does not depend on the inputs
            return np.broadcast_to(self.f0, (k, points))
        found = np.asarray(found).reshape(k, points, -1)
        return found[..., 0] if self.vector is None else (found * self.vector.reshape(1, 1, -1)).sum(axis=-1)

    def gradient_at(self, rows: np.ndarray, owner: np.ndarray) -> np.ndarray:
        """Autograd's gradient at each row, run afresh there (as check --at runs it for the rounding)."""
        if self.recorded is None:
            out = np.empty((len(rows), self.x0.shape[1]), dtype=np.float64)
            for p in np.unique(owner):
                mine = owner == p
                out[mine] = self.roads[p].gradient_at(rows[mine], owner[mine])
            return out
        columns = {name: c[owner] for name, c in self.chunk.numbers.items() if name not in self.names}
        offsets = np.cumsum([0, *self.sizes])
        for k, name in enumerate(self.names):
            columns[name] = rows[:, offsets[k] : offsets[k + 1]].reshape(len(rows), *self.shapes[name])
        values = {k: v for k, v in self.check.values.items() if k not in self.names}
        _, result = evaluate_points(self.check.program, columns, values, self.names, self.check.seed)
        n = len(rows)
        return np.concatenate([np.asarray(result.gradient[m], dtype=np.float64).reshape(n, -1) for m in self.names],
                              axis=1)  # fmt: skip


def _places(owner: np.ndarray, points: int) -> np.ndarray:
    """Each row's place among the rows of its own point (0, 1, ... in order)."""
    counts = np.bincount(owner, minlength=points)
    order = np.argsort(owner, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    place = np.empty(len(owner), dtype=np.int64)
    place[order] = np.arange(len(owner)) - np.repeat(starts, counts)
    return place


def _where(chunk: Chunk, i: int) -> str:
    cells = [f"{k} = {float(c[i])!r}" for k, c in list(chunk.numbers.items())[:6]]
    return "(" + ", ".join(cells) + ")"


def check_points_file(
    program: Any, spec: str, values: dict[str, Any], wrt: list[str], methods: list[str], rtol: float | None,
    atol: float | None, seed: str | None, expect: dict[str, str], as_json: bool, chunk_rows: int | None = None,
) -> bool:  # fmt: skip
    """Check every point of ``spec``; print the worst points; True when all agree."""
    checker = PointsCheck(program, values, wrt, seed, methods, rtol, atol, expect)
    columns: list[Columns] = []
    used = set(program.variables) | set(checker.extra)
    # closed on an error too: a reader's threads (Arrow's) must not outlive the command, or the interpreter's exit
    # aborts ("terminate called without an active exception") instead of exiting 2
    with closing(DataSet.resolved(spec).chunks(used, False, check_chunk_rows(chunk_rows), columns, values)) as chunks:
        for chunk in chunks:
            checker.chunk(chunk)
    tally = checker.tally
    if not tally.points:
        raise UsageError(f"--points {spec}: no points after the header")
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
        "disagreeing_points": tally.disagreed, "other_failures": tally.causes, "not_differentiable_points": tally.kinked, "skipped": tally.skipped,
        "skipped_points": tally.skipped_at, "inconclusive_points": tally.inconclusive,
        "worst": [{"point": b.point + 1, "at": b.where, "element": b.label, "method": b.method, "autograd": b.autograd,
                   "other": b.other, "error_over_tolerance": b.ratio} for b in worst],
    }  # fmt: skip


def _print(checker: PointsCheck, worst: list[Bad], ok: bool) -> None:
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
        kinks = f"; not differentiable at {tally.kinked:,} of them (a kink or a step)" if tally.kinked else ""
        return f"OK: at all {n:,} points autograd agrees with {', '.join(agreed)}{kinks}"
    clauses = []
    disagreeing = tally.failed - sum(tally.causes.values())
    if disagreeing:
        names = ", ".join(METHOD_NAMES[m] for m in tally.methods if m in tally.disagreed)
        clauses.append((disagreeing, f"autograd disagrees with {names}"))
    clauses += [(k, CAUSES[cause]) for cause, k in tally.causes.items()]
    (k, text), *more = clauses
    return f"MISMATCH: at {k:,} of {n:,} points {text}" + "".join(f"; at {k:,} {text}" for k, text in more)
