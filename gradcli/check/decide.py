"""A point's verdict, decided one way whichever road reaches the point.

``check --at`` (one point, its record replayed) and ``check --points`` (every row of a file, the
program batched) both hand ``decide`` a ``Road``: P points, autograd's value and gradient at each,
and a way to evaluate rows of moved points. Everything the verdict depends on is decided here, per
point, over arrays with a leading point axis: which methods apply (the complex step only where
every operation along the point's path is complex-analytic and f stays real-valued around it;
finite differences as its stand-in and for the kink search where it is not), kinks and steps,
inconclusive estimates, autograd's own rounding, the tolerances, the user's expected values. The
roads only read the arrays: run.py into its messages at its one point, the points road into its
tally of the worst points.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import UsageError
from ..text import in_message
from .numeric import (
    LEVELS,
    Estimate,
    atol_scales,
    complex_step_at,
    default_tolerances,
    finite_differences_at,
    machine_epsilon,
    within_sides,
)

NONE, MISMATCH, AGREE = -1, 0, 1  # a method's verdict at a point: did not judge, disagrees, agrees
LOOSE = 1e-2  # an estimate whose error exceeds this part of its value cannot judge autograd
PROBES = (2.0**-10, 2.0**-16)  # steps, as parts of those finite differences settled on, that test them
INSTEAD = "central differences (with their kink search) check the gradient instead"
EXACT = ("sympy", "complex_step")  # exact to rounding: where one agrees, finite differences' doubt is theirs
NUMERIC = ("finite_difference", "complex_step", "sympy")  # not compared at a kink (expected values are)


@dataclass
class Road:
    """What the decision asks of a road, at P points (N input elements each)."""

    x0: np.ndarray  # (P, N) the points
    f0: np.ndarray  # (P,) the (seeded) value at each
    gradient: np.ndarray  # (P, N) autograd's
    labels: Sequence[str]  # (N,) the elements' names, "x", "v[1]"
    evaluate: Callable[[np.ndarray, np.ndarray], np.ndarray]  # (rows (R, N) real or complex, owner (R,)) -> (R,)
    gradient_at: Callable[[np.ndarray, np.ndarray], np.ndarray]  # (rows, owner) -> (R, N) autograd's there
    not_analytic: Sequence[str | None]  # per point: the first operation on its path that is not complex-analytic
    escapes: str | None = None  # why a complex step cannot follow the program at all (a Python escape)
    continuation: Sequence[str | None] | None = None  # per point: an operation whose complex form is not analytic
    dtype: np.dtype = field(default_factory=lambda: np.dtype(np.float64))
    #: autograd's own rounding error at the points given (P', N), where moving ``x0`` does not measure it
    #: (a road along directions: its point t = 0 stays 0); None: ``rounding_noise`` of this road
    rounding: Callable[[np.ndarray], np.ndarray] | None = None


@dataclass
class Reference:
    """One method's gradient at every point, before it is compared with autograd's."""

    name: str
    reference: np.ndarray  # (P, N)
    estimated: np.ndarray | None  # (P, N) the method's own error; None: exact
    skip: np.ndarray  # (P, N) bool: elements not compared (kinks, where the method is undefined)
    label: str  # how a message names its value ("finite differences"...)
    reason: list[str | None]  # per point: why the method did not run there (None: it ran)
    note: list[str | None] = field(default_factory=list)  # per point: why some elements were not compared
    only: Sequence[str] | None = None  # the variables it covers (--expect), None: all

    @classmethod
    def nowhere(cls, name: str, points: int, n: int, reason: str) -> Reference:
        return cls(name, np.full((points, n), np.nan), None, np.ones((points, n), bool), name, [reason] * points)


@dataclass
class Compared:
    """One method against autograd at every point: its verdicts and the numbers behind them."""

    ref: Reference
    ok: np.ndarray  # (P,) NONE, MISMATCH or AGREE
    mask: np.ndarray  # (P, N) the elements compared (not skipped, not inconclusive)
    loose: np.ndarray  # (P, N) the elements whose estimate (or autograd's rounding) is too loose to judge
    abs_error: np.ndarray
    rel_error: np.ndarray
    tolerance: np.ndarray
    badness: np.ndarray  # (P, N) error over tolerance where compared, 0 elsewhere
    significant: np.ndarray  # (P, N) values above atol: a relative error means something
    inconclusive: np.ndarray  # (P,) bool: finite differences overruled by an exact method that agrees


@dataclass
class Decision:
    """Every point's verdict, and what it rests on."""

    ok: np.ndarray  # (P,) bool
    checks: dict[str, Compared]  # in the order the methods were chosen, then expected values
    kinked: np.ndarray  # (P, N) bool
    subgradient: np.ndarray  # (P, N) bool: autograd's value lies between the one-sided derivatives
    nonfinite: np.ndarray  # (P,) bool: the value or autograd's gradient is not finite
    noise: np.ndarray  # (P, N) autograd's own rounding error (measured only where a method disagreed)
    fd: Estimate | None  # finite differences, (1, P, N) fields (nan where they did not run)
    rtol: float
    atol: np.ndarray  # (P,)

    def disagreeing(self, point: int | np.ndarray | slice = slice(None)) -> list[str]:
        """The methods that disagree at ``point`` (at any of them, for several)."""
        return [name for name, c in self.checks.items() if np.any(np.atleast_1d(c.ok[point]) == MISMATCH)]


def expected_names(expect: Sequence[str], names: Sequence[str]) -> None:
    """A UsageError for an ``--expect`` name that is not differentiated (before its formula runs)."""
    for name in expect:
        if name not in names:
            raise UsageError(f"--expect {name}: '{name}' is not one of the variables checked ({', '.join(names)})")


def expected(
    gradient: np.ndarray, names: Sequence[str], shapes: Sequence[tuple[int, ...]], values: Mapping[str, np.ndarray]
) -> Reference:
    """The user's formulas as a reference at P points: ``values[name]`` (P, ...) each broadcast to its
    variable's shape; ``gradient`` (P, N) autograd's, in the elements no formula covers."""
    points = gradient.shape[0]
    reference, covered = np.array(gradient, dtype=np.float64), np.zeros(gradient.shape, dtype=bool)
    offsets = np.cumsum([0, *(int(np.prod(shape, dtype=int)) for shape in shapes)])
    for name, value in values.items():
        k, shape, own = names.index(name), tuple(shapes[names.index(name)]), value.shape[1:]
        try:
            block = np.broadcast_to(value.reshape((points,) + (1,) * (len(shape) - len(own)) + own), (points, *shape))
        except ValueError:
            raise UsageError(f"--expect {name}: the formula gives shape {own}, but {name} has shape {shape}") from None
        reference[:, offsets[k] : offsets[k + 1]] = block.reshape(points, -1)
        covered[:, offsets[k] : offsets[k + 1]] = True
    return Reference("expect", reference, None, ~covered, "the expected formula gives", [None] * points,
                     only=list(values))  # fmt: skip


def tolerances(dtype: np.dtype, rtol: float | None, atol: float | None, road: Road) -> tuple[float, np.ndarray]:
    """rtol, and atol at each point (relative to the point's own scale unless given)."""
    default_rtol, default_atol = default_tolerances(dtype)
    points = len(road.f0)
    if atol is not None:
        return (default_rtol if rtol is None else rtol), np.full(points, float(atol))
    scales = atol_scales(road.f0.reshape(points, 1), road.gradient, road.x0)
    return (default_rtol if rtol is None else rtol), default_atol * scales


def decide(
    road: Road, chosen: Sequence[str], rtol: float, atol: np.ndarray, given: Mapping[str, Reference] | None = None
) -> Decision:
    """Each point's verdict: ``chosen`` methods (``given`` supplies those a road makes itself, SymPy at
    one point, expected values), each applied where it can judge, compared, then overruled where an
    exact method shows the doubt is the estimate's."""
    given = dict(given or {})
    points, n = road.x0.shape
    finite = np.isfinite(road.f0)
    smooth = np.array([r is None for r in road.not_analytic], dtype=bool) & (road.escapes is None)
    stand_in = np.array([r is not None for r in road.not_analytic], dtype=bool)
    methods = list(chosen)
    if "complex_step" in methods and "finite_difference" not in methods and stand_in.any():
        methods.insert(methods.index("complex_step"), "finite_difference")  # the complex step's stand-in
    wanted = np.full(points, "finite_difference" in chosen) | (stand_in & ("complex_step" in chosen))
    run_fd = finite & bool(n) & (wanted | ~smooth)
    fd = _finite_differences(road, run_fd)
    kinked = _kinked(road, fd, smooth)
    noise = np.zeros((points, n))
    references: dict[str, Reference] = {}
    for method in methods:
        if method == "finite_difference":
            references[method] = _fd_reference(road, fd, finite, wanted, kinked)
        elif method == "complex_step":
            references[method] = _complex_reference(road, finite, kinked, rtol, atol)
        elif method in given:
            references[method] = given.pop(method)
    references.update(given)  # expected values
    for name, ref in references.items():
        if name in NUMERIC:
            ref.skip = ref.skip | kinked
    checks = {name: compare(road, ref, rtol, atol, noise) for name, ref in references.items()}
    if "finite_difference" in checks and (checks["finite_difference"].ok == MISMATCH).any():
        _staircase(road, references["finite_difference"], fd, checks["finite_difference"].ok == MISMATCH)
        checks["finite_difference"] = compare(road, references["finite_difference"], rtol, atol, noise)
    doubt = [
        (c.ok == MISMATCH) | c.loose.any(axis=1) for c in checks.values()
    ]  # a method disagreed, or could not judge
    again = finite & bool(n) & np.any(doubt or [np.zeros(points, bool)], axis=0)
    if again.any():  # autograd's own rounding may be the cause: measured where it matters, then compared again
        where = np.flatnonzero(again)
        noise[again] = rounding_noise(road, where) if road.rounding is None else road.rounding(where)
        checks = {name: compare(road, ref, rtol, atol, noise) for name, ref in references.items()}
    _overrule(checks)
    nonfinite = ~finite | ~np.isfinite(road.gradient).all(axis=1)
    subgradient = np.ones((points, n), dtype=bool)
    if fd is not None and kinked.any():
        subgradient = ~kinked | within_sides(fd.left[0], fd.right[0], road.gradient, fd.jump[0])
    verdicts = np.array([c.ok for c in checks.values()]).reshape(len(checks), points)
    confirmed = (verdicts == AGREE).any(axis=0) | kinked.any(axis=1)
    ok = ~nonfinite & confirmed & ~(verdicts == MISMATCH).any(axis=0) & subgradient.all(axis=1)
    return Decision(ok, checks, kinked, subgradient, nonfinite, noise, fd, rtol, atol)


def _finite_differences(road: Road, where: np.ndarray) -> Estimate | None:
    """Finite differences at the points ``where`` says, nan (no kink) at the others."""
    if not where.any():
        return None
    chosen = np.flatnonzero(where)
    found = finite_differences_at(
        lambda rows, owner: road.evaluate(rows, chosen[owner]), road.x0[chosen], road.f0[chosen], road.dtype
    )
    points, n = road.x0.shape

    def spread(part: np.ndarray | None, fill: object) -> np.ndarray:
        out = np.full((1, points, n), fill, dtype=np.asarray(part).dtype)
        out[:, chosen] = part
        return out

    steps = np.full((points, n), np.nan)
    steps[chosen] = found.steps
    return Estimate(spread(found.value, np.nan), spread(found.error, np.nan), spread(found.left, np.nan),
                    spread(found.right, np.nan), spread(found.kink, False), steps,
                    spread(found.one_sided, False), spread(found.jump, np.nan))  # fmt: skip


def _kinked(road: Road, fd: Estimate | None, smooth: np.ndarray) -> np.ndarray:
    """(P, N) where finite differences found a kink or a step (only where the path is not smooth), the
    steps' sizes measured again."""
    if fd is None:
        return np.zeros(road.x0.shape, dtype=bool)
    kinked = fd.kink[0] & ~smooth[:, None]
    if kinked.any():
        _step_sizes(road, fd)
    return kinked


def _staircase(road: Road, ref: Reference, fd: Estimate, where: np.ndarray) -> None:
    """Where finite differences disagree with autograd, plain central differences at steps ``PROBES``
    times those they settled on: where the function is smooth these agree with the estimate (their
    truncation is a millionth of its, their rounding allowed for); where they do not, the estimate was
    no derivative but an average over what its steps straddled (``round(x, 3)`` at 0.5 gives 1.024 at
    steps 2^-6 to 2^-9, each a whole number of its treads, and 0 at shorter ones). Its error is then
    at least the difference: it cannot judge (inconclusive), and says why."""
    chosen = np.flatnonzero(where)
    h = np.asarray(fd.steps)[chosen][None, :, :] * np.array(PROBES)[:, None, None]  # (probes, P', N)
    sides = _probed(road, chosen, h)
    before = ref.reference[chosen]
    error = np.zeros_like(before) if ref.estimated is None else np.array(ref.estimated[chosen])
    with np.errstate(all="ignore"):
        quotient = (sides[0] - sides[1]) / (2.0 * h)
        rounding = 8.0 * machine_epsilon(road.dtype) * np.fmax(np.abs(sides[0]), np.abs(sides[1])) / h
        off = np.abs(quotient - before)
        contradicted = off > 3.0 * error + 1e-6 * np.abs(before) + 4.0 * rounding + 1e-300  # (nan: not)
        moved_by = np.max(np.where(contradicted, off, 0.0), axis=0)
    if not contradicted.any():
        return
    ref.estimated = np.zeros_like(ref.reference) if ref.estimated is None else np.array(ref.estimated)
    ref.estimated[chosen] = np.fmax(error, moved_by)
    ref.note = list(ref.note) if ref.note else [None] * len(road.x0)
    for k, p in enumerate(chosen):
        if contradicted[:, k].any():
            j = int(np.flatnonzero(contradicted[:, k].any(axis=0))[0])
            t = int(np.flatnonzero(contradicted[:, k, j])[0])
            ref.note[p] = (
                f"inconclusive at d/d{road.labels[j]}: the differences change with the step "
                f"({in_message(before[k, j])} at steps down to {fd.steps[p, j] / 2 ** (LEVELS - 1):.3g}, "
                f"{in_message(quotient[t, k, j])} at {h[t, k, j]:.3g}): no derivative at the steps' scale "
                "(a staircase, or noise), so they cannot judge it"
            )


def _probed(road: Road, chosen: np.ndarray, h: np.ndarray) -> list[np.ndarray]:
    """f at x0 + h e_j and x0 - h e_j for each element j of the points ``chosen``, at each step of
    ``h`` (K, P', N): two arrays of that shape (nan where h is)."""
    x0, n = road.x0[chosen], road.x0.shape[1]
    rows = np.repeat(x0[None, :, None, :], len(h), axis=0) * np.ones((1, 1, n, 1))  # (K, P', N, N)
    diagonal = np.arange(n)
    owner = np.broadcast_to(chosen[None, :, None], h.shape).reshape(-1)
    sides = []
    for sign in (1.0, -1.0):
        moved = rows.copy()
        moved[:, :, diagonal, diagonal] += sign * h
        sides.append(np.asarray(road.evaluate(moved.reshape(-1, n), owner), dtype=np.float64).reshape(h.shape))
    return sides


def _step_sizes(road: Road, fd: Estimate) -> None:
    """A step's size again at steps a 2^-16 part of the differences' (t and 2t: 2 d(t) - d(2t) takes out
    f' t): a staircase straddled by the differences' own steps extrapolates to a wrong size, or sign
    (floor(1000 x)/1000 at 0.5 gave -0.001 where it steps by 0.001)."""
    stepped = np.isfinite(fd.jump[0])
    chosen = np.flatnonzero(stepped.any(axis=1))
    if not chosen.size:
        return
    t = np.asarray(fd.steps)[chosen] * 2.0**-16
    with np.errstate(all="ignore"):
        plus, minus = _probed(road, chosen, np.stack([t, 2.0 * t]))
        size = 2.0 * (plus[0] - minus[0]) - (plus[1] - minus[1])
        before = fd.jump[0][chosen]
        wrong = stepped[chosen] & np.isfinite(size) & (size != 0) & ~(np.abs(size - before) <= 1e-3 * np.abs(size))
    fd.jump[0][chosen] = np.where(wrong, size, before)  # (where they agree, the first is the more precise)


def _fd_reference(
    road: Road, fd: Estimate | None, finite: np.ndarray, wanted: np.ndarray, kinked: np.ndarray
) -> Reference:
    points, n = road.x0.shape
    reasons: list[str | None] = [
        "skipped: the value at the point is not finite" if not finite[p]
        else "no input to vary" if not n
        else None if wanted[p] else "not needed at this point"
        for p in range(points)
    ]  # fmt: skip
    if fd is None:
        return Reference("finite_difference", np.full((points, n), np.nan), None, np.ones((points, n), bool),
                         "finite differences", reasons)  # fmt: skip
    skip = kinked | np.array([r is not None for r in reasons])[:, None] | ~np.isfinite(road.x0)  # (no step at inf)
    return Reference("finite_difference", fd.value[0], fd.error[0], skip, "finite differences", reasons)


def _complex_reference(road: Road, finite: np.ndarray, kinked: np.ndarray, rtol: float, atol: np.ndarray) -> Reference:
    """The complex step where it applies; where it disagrees, checked against the mirror step -ih (a
    branch point, norm at 0, is not analytic there: not compared)."""
    points, n = road.x0.shape
    reasons = [_complex_reason(road, finite, p) for p in range(points)]
    ref = Reference("complex_step", np.full((points, n), np.nan), None, np.ones((points, n), bool),
                    "complex step", reasons, [None] * points)  # fmt: skip
    chosen = np.flatnonzero([r is None for r in reasons])
    if not chosen.size:
        return ref
    step = lambda rows, owner: road.evaluate(rows, chosen[owner])  # noqa: E731
    try:
        estimate, real = complex_step_at(step, road.x0[chosen], road.dtype, road.f0[chosen])
    except (TypeError, ValueError) as exc:
        return _nowhere(ref, chosen, f"skipped: an operation cannot take complex values ({exc})")
    except UsageError as exc:  # a Python function that refuses complex values
        return _nowhere(ref, chosen, f"skipped: with complex values, {exc.message}")
    for p in chosen[~real]:
        reasons[p] = "skipped: the function is not real-valued around the point"
    chosen, value, error = chosen[real], estimate.value[0][real], estimate.error[0][real]
    ref.reference[chosen], ref.estimated = value, np.zeros((points, n))
    ref.estimated[chosen] = error
    ref.skip[chosen] = kinked[chosen] | ~np.isfinite(road.x0[chosen])  # (no step at an infinite input)
    first = compare(road, ref, rtol, atol, np.zeros((points, n)))
    doubtful = chosen[first.ok[chosen] == MISMATCH]
    if doubtful.size:
        with np.errstate(all="ignore"):
            mirror = complex_step_at(lambda rows, owner: road.evaluate(rows, doubtful[owner]), road.x0[doubtful],
                                     road.dtype, mirror=True)[0].value[0]  # fmt: skip
            here = ref.reference[doubtful]
            branch = ~(np.abs(mirror - here) <= 1e-6 * np.abs(here))
        for k, p in enumerate(doubtful):
            if (branch[k] & ~kinked[p]).any():
                ref.reference[p][branch[k]] = np.nan  # not compared there: not shown either
                ref.skip[p] |= branch[k]
                where = ", ".join(f"d/d{road.labels[j]}" for j in np.flatnonzero(branch[k])[:3])
                ref.note[p] = f"not compared at {where}: the function is not complex-analytic at this point"
    return ref


def _nowhere(ref: Reference, chosen: np.ndarray, reason: str) -> Reference:
    for p in chosen:
        ref.reason[p] = reason
    return ref


def _complex_reason(road: Road, finite: np.ndarray, p: int) -> str | None:
    if not finite[p]:
        return "skipped: the value at the point is not finite"
    if road.escapes is not None:
        return road.escapes
    if road.not_analytic[p] is not None:
        return f"skipped: {road.not_analytic[p]}: {INSTEAD}"
    if road.continuation is not None and road.continuation[p] is not None:
        return f"skipped: {road.continuation[p]}"
    if not road.x0.shape[1]:
        return "skipped: no input to vary"
    return None


def compare(road: Road, ref: Reference, rtol: float, atol: np.ndarray, noise: np.ndarray) -> Compared:
    """Autograd against ``ref`` element by element at every point, within ``atol + rtol |reference|``
    plus three times the method's own error and autograd's rounding. An element where either is a
    sizeable part of the value proves nothing either way (sin(exp(x)) at x = 40): inconclusive."""
    ag, reference = road.gradient, np.asarray(ref.reference, dtype=np.float64)
    estimated = np.zeros_like(reference) if ref.estimated is None else np.asarray(ref.estimated)
    ran = np.array([r is None for r in ref.reason], dtype=bool)
    mask = ~ref.skip & ran[:, None]
    a = atol[:, None]
    with np.errstate(all="ignore"):
        abs_error = np.abs(ag - reference)
        rel_error = abs_error / np.maximum(np.maximum(np.abs(reference), np.abs(ag)), np.finfo(np.float64).tiny)
        tolerance = a + rtol * np.abs(reference) + 3.0 * (estimated + noise)
        significant = np.maximum(np.abs(reference), np.abs(ag)) > a
        loose = mask & significant & ~(np.maximum(estimated, noise) <= LOOSE * np.abs(reference))
        judged = mask & ~loose
        badness = np.where(judged, np.where(abs_error == 0.0, 0.0, abs_error / tolerance), 0.0)
        badness = np.where(np.isnan(badness) & judged, np.inf, badness)
    agree = np.all((badness <= 1.0) | ~judged, axis=1)
    ok = np.where(judged.any(axis=1), np.where(agree, AGREE, MISMATCH), NONE).astype(np.int8)
    return Compared(ref, ok, judged, loose, abs_error, rel_error, tolerance, badness, significant,
                    np.zeros(len(ok), dtype=bool))  # fmt: skip


def _overrule(checks: dict[str, Compared]) -> None:
    """Finite differences cannot see digits lost inside the expression (1 + x^2 at x = 1e-8): where an
    exact method agrees with autograd, their disagreement is the estimate's fault: inconclusive."""
    fd = checks.get("finite_difference")
    if fd is None:
        return
    exact = np.any([c.ok == AGREE for name, c in checks.items() if name in EXACT] or [np.zeros_like(fd.ok, bool)],
                   axis=0)  # fmt: skip
    fd.inconclusive = exact & (fd.ok == MISMATCH)
    fd.ok = np.where(fd.inconclusive, NONE, fd.ok).astype(np.int8)


def rounding_noise(road: Road, where: np.ndarray) -> np.ndarray:
    """Autograd's own rounding error at the points ``where``, per element, from its gradient at points
    moved by about 1e-12 relative, in pairs (x(1 + t r), x(1 - t r)) whose mean cancels the real
    change of the gradient. What remains is rounding: large where the expression loses digits to
    cancellation ((exp(x) - 1 - x) / x^2 at x = 1e-3), and no method can agree more closely than
    that. Zeros stay zero, so no kink at 0 is crossed. The same moves at every point."""
    rng = np.random.default_rng(0)
    x0, base = road.x0[where], road.gradient[where]
    spread = np.zeros_like(base)
    for t in (2.0**-40, 2.0**-38, 2.0**-36):
        r = rng.choice([-1.0, 1.0], size=x0.shape[1]) * rng.uniform(0.5, 1.0, size=x0.shape[1])
        pair = [road.gradient_at(x0 * (1.0 + sign * t * r), where) for sign in (1.0, -1.0)]
        with np.errstate(all="ignore"):
            spread = np.fmax(spread, np.abs((pair[0] + pair[1]) / 2.0 - base))
    return spread
