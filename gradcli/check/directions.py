"""``check`` at a model's size: the gradient checked along a few random directions, then element by
element only where a direction disagrees.

Element by element, finite differences call the function 8 times an input element (and the complex
step once): a loss in 10^6 weights is out of reach. Along a direction u, one directional derivative
d/dt f(x + t u) at t = 0 costs what one element costs, and it must equal the gradient . u (the
framework's VJP projected on u). ``along`` makes that a ``Road`` of the one decision
(gradcli/check/decide.py): its point is t = 0 in R^K, its K "elements" the directions, its gradient
the projections; Richardson's differences, the complex step (f(x + i h u), exact where f is
analytic), SymPy's and the user's formulas (projected) and every tolerance are decided there as for
elements, each estimate's own error deciding how close it can judge (so float32 stays free of false
alarms). Where a direction disagrees, ``localise`` finds the elements at fault: each input's part of
the direction alone, then halves of the disagreeing parts, recursively (the worst ``BRANCHES`` at
each level), down to ``LEAF`` elements compared one by one, as the elementwise check compares them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import UsageError
from .blame import input_scale
from .decide import MISMATCH, Decision, Reference, Road, compare, decide, rounding_noise, tolerances
from .numeric import CHUNK, STEP_FRACTION
from .result import Directional, WrongElement

DIRECTIONS = 8  # directions by default
ELEMENTWISE_UP_TO = 512  # input elements checked one by one by default; above, along DIRECTIONS directions
MOST = 1000  # directions --directions takes
SEED = 0
LEAF = 8  # a part this small is compared element by element
BRANCHES = 2  # disagreeing parts followed at each level of the search
FOUND = 50  # wrong elements kept
SHORTER = 2.0**-4  # the last length tried on a path with kinks, as a part of 1/sqrt(N)
GAIN = 1e3  # the most an input's part of the directions is made longer for its share of the projections
REACH = 2.0**-7  # the part of |f| the first step along a direction changes it by (within the bounds)


def directions_asked(text: str | int | None) -> int | None:
    """``--directions K|elementwise`` -> K, 0 for elementwise, None when not given (chosen by size)."""
    if text is None:
        return None
    word = str(text).strip().lower()
    if word in ("elementwise", "0"):
        return 0
    if word.isdigit() and 1 <= int(word) <= MOST:
        return int(word)
    raise UsageError(f"--directions must be a number of directions from 1 to {MOST}, or elementwise, got {text!r}")


def directions_for(size: int, asked: int | None) -> int:
    """How many directions a check of ``size`` input elements goes along (0: element by element)."""
    if asked is not None:
        return asked if size else 0
    return DIRECTIONS if size > ELEMENTWISE_UP_TO else 0


def random_directions(
    x0: np.ndarray, count: int, seed: int = SEED, gradient: Any = None, sizes: Sequence[int] = ()
) -> np.ndarray:
    """(N, K) Gaussian directions, each element at its own scale (``input_scale``: a step of a few per
    cent of log's input at 1e-300). With the ``gradient`` and the inputs' ``sizes``, each input's part
    is made longer (up to ``GAIN`` times) where its share of the projections is smaller than the largest
    input's: a wrong gradient of a layer whose gradient is a ten-thousandth of another's would otherwise
    be a ten-thousandth of every projection, below any tolerance. Unscaled: see ``scales``."""
    rng = np.random.default_rng(seed)
    x0 = np.asarray(x0, dtype=np.float64).reshape(-1)
    directions = rng.standard_normal((x0.size, count)) * input_scale(x0)[:, None]
    if gradient is None or len(sizes) < 2:
        return directions
    g = np.asarray(gradient, dtype=np.float64).reshape(-1)
    offsets = np.cumsum([0, *sizes])
    parts = [slice(offsets[i], offsets[i + 1]) for i in range(len(sizes))]
    with np.errstate(all="ignore"):
        shares = np.array([np.sqrt(np.mean((g[p] @ directions[p]) ** 2)) for p in parts])
        gains = np.where((shares > 0) & np.isfinite(shares), np.max(shares, initial=0.0) / shares, 1.0)
    for part, gain in zip(parts, np.clip(np.nan_to_num(gains, nan=1.0), 1.0, GAIN)):
        directions[part] *= gain
    return directions


def scales(directions: np.ndarray, f0: float, gradient: Any) -> list[float]:
    """The lengths to try the directions at, in turn while finite differences disagree on a path with
    kinks. First the one that makes the first step of the differences (2^-6) change f by about ``REACH`` of
    |f| as the gradient predicts, so that rounding (eps |f| / step) stays far below the change measured
    (float32's), between 1/sqrt(N) (the whole point moved by about the step) and N^(1/4); then 1/sqrt(N)
    and ``SHORTER`` of it: a ReLU network's pre-activations all move along a direction, and the longer
    the step, the more of them flip inside it (4 of 576,000 within the first step at 1/sqrt(N) and
    N = 10^6, none a sixteenth of it), kinks too dense and small to be seen, which bend the differences
    by 1e-6 where none lies at the point."""
    n = max(directions.shape[0], 1)
    low, high = 1.0 / np.sqrt(n), n**0.25
    first = n**-0.25
    slope = float(np.sqrt(np.mean((np.asarray(gradient, dtype=np.float64).reshape(-1) @ directions) ** 2)))
    if np.isfinite(slope) and slope > 0 and np.isfinite(f0) and f0 != 0:
        first = float(np.clip(REACH * abs(f0) / (STEP_FRACTION * slope), low, high))
    return [first, *(s for s in (low, low * SHORTER) if s < first)]


def _mapped(base: Road, to_x: Callable[[np.ndarray], np.ndarray], width: int) -> tuple[Any, Any]:
    """``evaluate`` and ``gradient_at`` of a road whose rows ``to_x`` maps to the points of ``base`` (one
    point), a slice of rows at a time (at most ``CHUNK`` elements of moved points in memory)."""
    per = max(1, CHUNK // max(1, base.x0.shape[1]))

    def evaluate(rows: np.ndarray, owner: np.ndarray) -> np.ndarray:
        parts = [base.evaluate(to_x(rows[k : k + per]), np.zeros(len(rows[k : k + per]), dtype=int))
                 for k in range(0, len(rows), per)]  # fmt: skip
        return np.concatenate([np.asarray(p).reshape(-1) for p in parts]) if parts else np.zeros(0)

    def gradient_at(rows: np.ndarray, owner: np.ndarray) -> np.ndarray:
        return np.concatenate([
            np.asarray(base.gradient_at(to_x(rows[k : k + per]), np.zeros(len(rows[k : k + per]), dtype=int)))
            for k in range(0, len(rows), per)
        ]) if len(rows) else np.zeros((0, width))  # fmt: skip

    return evaluate, gradient_at


def along(base: Road, directions: np.ndarray, labels: Sequence[str], measure_rounding: bool = True) -> Road:
    """``base`` (one point x0) seen along ``directions`` (N, K): the road of t -> f(x0 + directions t) at
    t = 0, its gradient the projections gradient . u_k. Autograd's rounding is measured by moving x0
    (t = 0 does not move), or taken as none (``measure_rounding`` False: a search's halves)."""
    x0, columns = base.x0[0], np.ascontiguousarray(directions.T)  # (each direction contiguous)

    def to_x(rows: np.ndarray) -> np.ndarray:
        # a row of the differences or the complex step moves along one direction or a few: their columns
        # alone (rows @ directions.T makes a complex copy of every direction for complex rows)
        points = np.repeat(x0[None, :].astype(np.result_type(x0, rows)), len(rows), axis=0)
        for r, row in enumerate(rows):
            for k in np.flatnonzero(row):
                points[r] += row[k] * columns[k]
        return points

    evaluate, at = _mapped(base, to_x, directions.shape[1])
    projected = replace(
        base, gradient=base.gradient @ directions, gradient_at=lambda rows, owner: base.gradient_at(rows, owner) @ directions
    )  # fmt: skip
    count = directions.shape[1]
    return replace(
        base, x0=np.zeros((1, count)), gradient=projected.gradient, labels=list(labels), evaluate=evaluate,
        gradient_at=lambda rows, owner: at(rows, owner) @ directions,
        rounding=(lambda where: rounding_noise(projected, where)) if measure_rounding
        else (lambda where: np.zeros((len(where), count))),
    )  # fmt: skip


def at_elements(base: Road, elements: np.ndarray, labels: Sequence[str], measure_rounding: bool = True) -> Road:
    """``base`` (one point) with only ``elements`` varied, at their own values: the elementwise check of
    those elements alone (their steps and tolerances as the whole check would take them); autograd's
    rounding measured as ``along`` measures it."""
    x0 = base.x0[0]

    def to_x(rows: np.ndarray) -> np.ndarray:
        points = np.repeat(x0[None, :].astype(rows.dtype), len(rows), axis=0)
        points[:, elements] = rows
        return points

    evaluate, at = _mapped(base, to_x, x0.size)
    part = replace(
        base, gradient=base.gradient[:, elements], gradient_at=lambda rows, owner: base.gradient_at(rows, owner)[:, elements]
    )  # fmt: skip
    return replace(
        base, x0=x0[elements][None, :], gradient=part.gradient, labels=list(labels), evaluate=evaluate,
        gradient_at=lambda rows, owner: at(rows, owner)[:, elements],
        rounding=(lambda where: rounding_noise(part, where)) if measure_rounding
        else (lambda where: np.zeros((len(where), elements.size))),
    )  # fmt: skip


def projected(ref: Reference, gradient: np.ndarray, directions: np.ndarray) -> Reference:
    """An elementwise reference (SymPy's, the user's formulas) along the directions: the elements it
    does not cover taken as autograd gives them (no difference there), its error bound summed."""
    filled = np.where(ref.skip | ~np.isfinite(ref.reference), gradient, ref.reference)
    value = filled @ directions
    estimated = None if ref.estimated is None else np.nan_to_num(np.abs(ref.estimated)) @ np.abs(directions)
    skip = np.repeat(ref.skip.all(axis=1, keepdims=True), directions.shape[1], axis=1)
    return Reference(ref.name, value, estimated, skip, ref.label, ref.reason, ref.note, None)


class Along:
    """A check's point seen along ``count`` random directions: what run.py reads of its elementwise
    record (``names``, ``shapes``, ``sizes``, ``labels``, ``gradient``, ``program``), for the directions,
    and the road the decision takes."""

    def __init__(self, recorded: Any, base: Road, count: int, seed: int = SEED) -> None:
        self.recorded, self.base, self.count, self.seed = recorded, base, count, seed
        self.smooth = base.not_analytic[0] is None and base.escapes is None
        self.names, self.shapes, self.sizes = ["along"], [(count,)], [count]
        self.labels = [f"u{k + 1}" for k in range(count)]
        self.program = recorded.program
        self.unit = random_directions(recorded.x0, count, seed, base.gradient[0], recorded.sizes)
        self.lengths = scales(self.unit, float(base.f0[0]), base.gradient[0])
        self.tried = 0  # the lengths tried, less one
        self._set(self.unit * self.lengths[0])

    def _set(self, directions: np.ndarray) -> None:
        self.directions = directions
        self.road = along(self.base, directions, self.labels)
        self.gradient = {"along": self.road.gradient[0]}

    def decide(
        self, chosen: Sequence[str], rtol: float | None, atol: float | None, given: Mapping[str, Reference]
    ) -> tuple[Decision, float, np.ndarray]:
        """The decision along the directions, with its rtol and atol: on a path with kinks, while finite
        differences disagree, measured again along shorter directions (``scales``)."""
        while True:
            rtol_, atols = tolerances(self.road.dtype, rtol, atol, self.road)
            decision = decide(self.road, chosen, rtol_, atols, self.references(given))
            fd = decision.checks.get("finite_difference")
            last = self.tried + 1 >= len(self.lengths)
            if self.smooth or last or fd is None or not (fd.ok == MISMATCH).any():
                return decision, rtol_, atols
            self.tried += 1
            self._set(self.unit * self.lengths[self.tried])

    def references(self, given: Mapping[str, Reference]) -> dict[str, Reference]:
        return {name: projected(ref, self.base.gradient, self.directions) for name, ref in given.items()}

    def found(self, decision: Decision, given: Mapping[str, Reference], rtol: float, atol: float | None) -> Directional:
        """The directions' account, and where one disagrees, the elements at fault (``localise``)."""
        shortened = self.lengths[self.tried] / self.lengths[0]
        result = Directional(self.count, self.seed, self.road.gradient[0].copy(), shortened=shortened)
        worst = _worst_direction(decision)
        if worst is None:
            return result
        k, method = worst
        result.direction, result.method = self.labels[k], method
        blocks = _blocks(self.recorded.names, self.recorded.sizes)
        if method in given:  # SymPy's or the user's values are there for every element: compared directly
            _compared_directly(result, self.base, given[method], rtol, atol, self.recorded.labels, blocks)
        else:
            localise(result, self.base, self.directions[:, k], method, rtol, atol, blocks, self.recorded.labels)
        return result


def _worst_direction(decision: Decision) -> tuple[int, str] | None:
    """The direction furthest outside its tolerance, and the method that says so (the exact ones first)."""
    found = None
    for name in ("complex_step", "sympy", "expect", "finite_difference"):
        c = decision.checks.get(name)
        if c is not None and c.ok[0] == MISMATCH and c.badness[0].size and c.badness[0].max() > 1.0:
            found = found or (int(np.argmax(c.badness[0])), name)
    return found


def _blocks(names: Sequence[str], sizes: Sequence[int]) -> list[tuple[str, int, int]]:
    offsets = np.cumsum([0, *sizes])
    return [(n, int(offsets[i]), int(offsets[i + 1])) for i, n in enumerate(names) if sizes[i]]


@dataclass
class _Searched:
    """A part of the direction searched (its elements) as its own direction: autograd's projection less the
    method's (``off``), the method's value and own error, the tolerance, and how far outside it (above 1:
    it disagrees)."""

    elements: np.ndarray
    off: float
    reference: float
    error: float
    atol: float
    badness: float

    def rest(self, first: _Searched, elements: np.ndarray, rtol: float) -> _Searched:
        """The part less ``first`` (its other half), from the two without evaluating it: the projections
        are linear in the direction, so its difference is the part's less the first's."""
        off, reference, error = self.off - first.off, self.reference - first.reference, self.error + first.error
        tolerance = first.atol + rtol * abs(reference) + 3.0 * error
        return _Searched(elements, off, reference, error, first.atol, abs(off) / tolerance if off else 0.0)


def _judged(
    base: Road, u: np.ndarray, parts: Sequence[np.ndarray], method: str, rtol: float, atol: float | None
) -> list[_Searched]:
    """Each part of the direction ``u`` alone (u on the part, 0 elsewhere), compared by ``method``."""
    directions = np.zeros((u.size, len(parts)))
    for j, part in enumerate(parts):
        directions[part, j] = u[part]
    road = along(base, directions, [f"part {j + 1}" for j in range(len(parts))], measure_rounding=False)
    rtol, atols = tolerances(road.dtype, rtol, atol, road)
    decision = decide(road, [method], rtol, atols)
    c = max(decision.checks.values(), key=lambda c: float(np.max(c.badness[0], initial=0.0)))
    badness = np.where(decision.kinked[0] & ~decision.subgradient[0], np.inf, c.badness[0])
    error = np.zeros(len(parts)) if c.ref.estimated is None else np.nan_to_num(c.ref.estimated[0])
    return [_Searched(part, float(road.gradient[0][j] - c.ref.reference[0][j]), float(c.ref.reference[0][j]),
                  float(error[j]), float(atols[0]), float(badness[j])) for j, part in enumerate(parts)]  # fmt: skip


def localise(
    result: Directional, base: Road, u: np.ndarray, method: str, rtol: float, atol: float | None,
    blocks: Sequence[tuple[str, int, int]], labels: Sequence[str],
) -> None:  # fmt: skip
    """The elements at fault where direction ``u`` disagrees: each input's part of it alone (``parts``),
    then halves of the disagreeing parts (the first measured, the other by difference), the worst
    ``BRANCHES`` at each level, down to parts of ``LEAF`` elements, compared one by one."""
    judged = _judged(base, u, [np.arange(start, stop) for _, start, stop in blocks], method, rtol, atol)
    result.parts = {name: part.badness <= 1.0 for (name, _, _), part in zip(blocks, judged)}
    frontier = [part for part in judged if part.badness > 1.0]
    while any(part.elements.size > LEAF for part in frontier):
        small = [part for part in frontier if part.elements.size <= LEAF]
        split = [(part, *np.array_split(part.elements, 2)) for part in frontier if part.elements.size > LEAF]
        firsts = _judged(base, u, [first for _, first, _ in split], method, rtol, atol)
        halves = [h for (part, _, rest), first in zip(split, firsts) for h in (first, part.rest(first, rest, rtol))]
        wrong = sorted((h for h in halves if h.badness > 1.0), key=lambda h: -h.badness)
        result.complete &= len(wrong) <= BRANCHES
        frontier = small + wrong[:BRANCHES]
    if not frontier:
        return
    elements = np.concatenate([part.elements for part in frontier])
    # (autograd's rounding not measured again: the direction's disagreement has survived it already)
    road = at_elements(base, elements, [labels[j] for j in elements], measure_rounding=False)
    decision = decide(road, [method], *tolerances(road.dtype, rtol, atol, road))
    result.compared = int(elements.size)
    for c in decision.checks.values():
        _wrong(result, c, road)


def _compared_directly(
    result: Directional, base: Road, ref: Reference, rtol: float, atol: float | None,
    labels: Sequence[str], blocks: Sequence[tuple[str, int, int]],
) -> None:  # fmt: skip
    """SymPy's or the user's values against autograd's, element by element (no evaluation needed)."""
    rtol, atols = tolerances(base.dtype, rtol, atol, base)
    c = compare(base, ref, rtol, atols, np.zeros(base.x0.shape))
    bad = c.badness[0] > 1.0
    result.parts = {name: not bad[start:stop].any() for name, start, stop in blocks}
    result.compared = int(c.mask[0].sum())
    _wrong(result, c, replace(base, labels=labels))


def _wrong(result: Directional, c: Any, road: Road) -> None:
    """The elements ``c`` finds outside their tolerance, the worst first, into ``result.wrong``."""
    badness = c.badness[0]
    for j in np.argsort(-badness, kind="stable"):
        if badness[j] <= 1.0 or len(result.wrong) >= FOUND:
            break
        result.wrong.append(
            WrongElement(road.labels[j], float(road.gradient[0][j]), float(c.ref.reference[0][j]), c.ref.name,
                         float(c.abs_error[0][j]), float(c.rel_error[0][j]), float(c.tolerance[0][j]))
        )  # fmt: skip
