"""``check EXPR --points DATA``: the gradient checked at every point of a data set, each numeric method
batched over the points (one run of the program per step for all the points of a chunk, never a loop
over points), and the worst points reported.

Finite differences: central differences at steps h, h/2, h/4, h/8 (h = 2^-6 of each input's scale)
refined by Richardson extrapolation, whose last correction bounds the estimate's own error. Complex
step: Im f(x + ih) / h, exact to rounding where every operation is complex-analytic. ``--expect
VAR=EXPR``: the formula evaluated at every point. SymPy works on one point at a time and is left out.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...check.numeric import STEP_FRACTION, _richardson, complex_steps, default_tolerances
from ...check.result import METHOD_NAMES
from ...errors import UsageError
from .source import Chunk, Columns, chunks

BATCHED = ("finite_difference", "complex_step")
ALIASES = {"fd": "finite_difference", "finite_difference": "finite_difference", "complex": "complex_step",
           "complex_step": "complex_step", "sympy": "sympy"}  # fmt: skip
WORST = 5  # points shown


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
    skipped: dict[str, str] = field(default_factory=dict)

    def keep(self, bad: Bad) -> None:
        if len(self.worst) < WORST:
            heapq.heappush(self.worst, bad)
        elif bad.ratio > self.worst[0].ratio:
            heapq.heapreplace(self.worst, bad)


def chosen_methods(methods: list[str]) -> list[str]:
    names = [m.strip() for item in methods for m in item.split(",") if m.strip()]
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
        from ...lang.program import load

        self.program, self.values, self.wrt, self.seed = program, values, wrt or None, seed
        self.methods = chosen_methods(methods)
        default_rtol, default_atol = default_tolerances(np.dtype(np.float64))
        self.rtol = default_rtol if rtol is None else rtol
        self.atol = default_atol if atol is None else atol
        self.expect = {name: load(formula) for name, formula in expect.items()}
        if self.expect:
            self.methods = [*self.methods, "expect"]
        if not self.methods:
            raise UsageError("check --points compares with fd, complex or --expect: SymPy works on one point at a time")
        self.tally = Tally()
        self.names: list[str] = []

    def f(self, columns: dict[str, np.ndarray], values: dict[str, Any]) -> np.ndarray:
        """Each point's (seeded) value: shape (n,)."""
        from ...lang.points import point_values

        out = point_values(self.program, columns, values)
        if self.vector is None:
            return out.reshape(len(out))
        return (out.reshape(len(out), -1) * self.vector.reshape(1, -1)).sum(axis=1)

    def chunk(self, chunk: Chunk) -> None:
        from ...lang.points import evaluate_points
        from ...lang.values import seed_vector

        names, result = evaluate_points(self.program, chunk.numbers, self.values, self.wrt, self.seed, chunk.first)
        self.names = names
        shape = result.value.shape[1:]
        self.vector = None if self.seed is None else np.asarray(seed_vector(self.seed, shape), dtype=np.float64)
        f0 = self.f(chunk.numbers, self.values)
        failed = np.zeros(chunk.n, dtype=bool) | ~np.isfinite(f0)
        for name in names:
            grad = result.gradient[name].reshape(chunk.n, -1)
            failed |= ~np.isfinite(grad).all(axis=1)
            one = name in chunk.numbers or np.ndim(self.values[name]) == 0
            for e in range(grad.shape[1]):
                label = f"d/d{name}" if one else f"d/d{name}[{e}]"
                x = self._base(chunk, name, e)
                scale = np.maximum(np.abs(f0), np.abs(grad[:, e]) * np.maximum(np.abs(x), 1.0))
                scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
                for method, other, own_error in self._estimates(chunk, name, e, x, f0):
                    failed |= self._compare(chunk, label, method, grad[:, e], other, own_error, scale)
        self.tally.points += chunk.n
        self.tally.failed += int(failed.sum())

    def _base(self, chunk: Chunk, name: str, e: int) -> np.ndarray:
        if name in chunk.numbers:
            return chunk.numbers[name]
        return np.full(chunk.n, float(np.ravel(self.values[name])[e]))

    def _moved(self, chunk: Chunk, name: str, e: int, step: Any) -> tuple[dict, dict]:
        """The columns and values with element ``e`` of ``name`` moved by ``step`` (real or complex)."""
        columns, values = dict(chunk.numbers), dict(self.values)
        if name in columns:
            columns[name] = columns[name] + step
        else:
            moved = np.array(values[name], dtype=np.result_type(np.asarray(values[name]), step))
            flat = moved.reshape(-1)
            flat[e] += step
            values[name] = moved
        return columns, values

    def _estimates(self, chunk: Chunk, name: str, e: int, x: np.ndarray, f0: np.ndarray) -> Any:
        shared = name not in chunk.numbers
        if "finite_difference" in self.methods:
            h0 = STEP_FRACTION * np.maximum(np.abs(x[:1] if shared else x), 1.0)
            table = []
            for k in range(4):
                h = h0 / 2.0**k
                step = float(h[0]) if shared else h
                plus = self.f(*self._moved(chunk, name, e, step))
                minus = self.f(*self._moved(chunk, name, e, -step))
                table.append((plus - minus) / (2 * h))
            with np.errstate(all="ignore"):
                estimate, error = _richardson(np.stack(table, axis=-1), 2.0, 2, 2)
            yield "finite_difference", estimate, error
        if "complex_step" in self.methods:
            h = complex_steps(x[:1] if shared else x)
            try:
                values = self.f(*self._moved(chunk, name, e, 1j * (float(h[0]) if shared else h)))
            except Exception as exc:  # noqa: BLE001 - a function without a complex form: the method is skipped
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                self.tally.skipped.setdefault("complex_step", f"skipped for d/d{name}: {reason}")
                return
            values = np.asarray(values)
            if not np.iscomplexobj(values):
                self.tally.skipped.setdefault(
                    "complex_step", f"skipped for d/d{name}: not complex-analytic (abs, max...)"
                )
                return
            real = np.isclose(values.real, f0, rtol=1e-10, atol=1e-20) | ~np.isfinite(f0)
            estimate = np.where(real, values.imag / h, np.nan)
            if not real.all():
                self.tally.skipped.setdefault(
                    "complex_step", f"d/d{name}: not real-valued near some points, not judged"
                )
            yield "complex_step", estimate, np.where(real, 0.0, np.inf)
        if name in self.expect:
            from ...lang.points import point_values

            expected = point_values(self.expect[name], chunk.numbers, self.values).reshape(chunk.n, -1)
            yield "expect", expected[:, e if expected.shape[1] > 1 else 0], np.zeros(chunk.n)

    def _compare(self, chunk: Chunk, label: str, method: str, autograd: np.ndarray, other: np.ndarray,
                 own_error: np.ndarray, scale: np.ndarray) -> np.ndarray:  # fmt: skip
        with np.errstate(all="ignore"):
            error = np.abs(autograd - other)
            allowed = self.atol * scale + self.rtol * np.maximum(np.abs(autograd), np.abs(other)) + 2 * own_error
            ratio = np.where(allowed > 0, error / allowed, np.where(error > 0, np.inf, 0.0))
        judged = np.isfinite(own_error) | (method != "complex_step")
        ratio = np.where(judged & ~np.isfinite(ratio), np.inf, np.where(judged, ratio, 0.0))
        for i in np.argsort(ratio)[-WORST:]:
            self.tally.keep(Bad(float(ratio[i]), chunk.first + int(i), _where(chunk, int(i)), label, method,
                                float(autograd[i]), float(other[i])))  # fmt: skip
        return ratio > 1.0


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
    for chunk in chunks(spec, set(program.variables), False, check_chunk_rows(chunk_rows), columns, values):
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
        "ok": ok, "points": tally.points, "failed": tally.failed, "methods": checker.methods,
        "skipped": tally.skipped,
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
                     METHOD_NAMES[b.method], f"{b.ratio:.2g}", verdict])  # fmt: skip
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    print("the worst points:")
    for r in rows:
        print("  " + "  ".join(c.ljust(w) if k < 2 else c.rjust(w) for k, (c, w) in enumerate(zip(r, widths))).rstrip())
    for method, reason in tally.skipped.items():
        print(f"{METHOD_NAMES[method]}: {reason}")
    methods = ", ".join(METHOD_NAMES[m] for m in checker.methods)
    if ok:
        print(f"OK: at all {tally.points:,} points autograd agrees with {methods}")
    else:
        print(f"MISMATCH: at {tally.failed:,} of {tally.points:,} points autograd disagrees with {methods}")
