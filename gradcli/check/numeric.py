"""Numerical derivatives good enough to judge autograd: finite differences and complex step.

Both take ``f``, a function from a batch of points (rows of a 2-D array: every
input element flattened) to a batch of outputs (rows), and evaluate it once for
all their points.

Finite differences: central differences at four steps h, h/2, h/4, h/8,
refined by Richardson extrapolation (each level cancels the next even power of
h; every power where the differences show odd ones, as at x * relu(x), x = 0). The last two levels' difference, and the rounding floor eps |f| / h, give
the estimate's own error. The step starts from each input's scale and shrinks
where the function is not finite nearby. The same samples give one-sided
derivatives, so a kink (abs or relu at 0) shows up as two different slopes.

Complex step: f'(x) = Im f(x + ih) / h with h = min(1e-30 max(|x|, 1), 2^-60 |x|): no subtraction, so
exact to machine precision, valid when every operation is complex-analytic.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

LEVELS = 4
STEP_FRACTION = 2.0**-6  # the first step, as a fraction of the input's scale
ROUNDS = 7  # rounds of ever smaller steps for estimates that have not converged
SMALL_ROUNDS = 4  # then rounds at the scale of an input far below 1
ROUND_SHRINK = 2.0**-8
FLOAT64 = np.dtype(np.float64)
COMPLEX_STEP = 1e-30


def machine_epsilon(dtype: np.dtype) -> float:
    return float(np.finfo(dtype).eps) if np.dtype(dtype).kind in "fc" else float(np.finfo(np.float64).eps)


def default_tolerances(dtype: np.dtype) -> tuple[float, float]:
    """rtol, atol: far tighter than 1e-6 in float64; what float32's rounding allows there.
    atol is relative to ``atol_scale``."""
    return (1e-7, 1e-12) if machine_epsilon(dtype) < 1e-10 else (3e-3, 1e-5)


def tolerance_problem(name: str, value: float | None) -> str | None:
    """Why a given rtol or atol cannot be used (a negative or nan one would pass anything)."""
    if value is not None and not (np.isfinite(value) and value >= 0):
        return f"{name} must be a finite number >= 0, not {value!r}"
    return None


def within_sides(left: np.ndarray, right: np.ndarray, autograd: np.ndarray, jump: np.ndarray) -> np.ndarray:
    """At a kink, whether autograd's value is a valid one: between the one-sided derivatives (to 1e-6
    relative), or anything at a step (``jump`` finite: no derivative there to be wrong about)."""
    with np.errstate(all="ignore"):
        lo, hi = np.fmin(left, right), np.fmax(left, right)
        slack = 1e-6 * np.maximum(1.0, np.fmax(np.abs(lo), np.abs(hi)))
        return ((lo - slack <= autograd) & (autograd <= hi + slack)) | np.isfinite(jump)


def atol_scale(f0: np.ndarray, jacobian: np.ndarray, x0: np.ndarray) -> float:
    """What atol is relative to: the value, or the largest change the Jacobian predicts for a
    change of the inputs' own size (so 1e-20 x^2 is checked as closely as x^2). One point's
    ``atol_scales``: the one rule, whichever road asks."""
    jacobian, x = np.broadcast_arrays(np.asarray(jacobian, dtype=np.float64), np.asarray(x0, dtype=np.float64))
    f0 = np.asarray(f0, dtype=np.float64).reshape(1, -1)
    return float(atol_scales(f0, jacobian.reshape(1, -1), x.reshape(1, -1))[0])


def atol_scales(f0: np.ndarray, jacobian: np.ndarray, x0: np.ndarray) -> np.ndarray:
    """What atol is relative to at each row: the value(s) ``f0`` (P, M), the gradient (P, N) at the
    point ``x0`` (P, N) (``atol_scale`` is one row of it)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a row of nothing but nan
        change = np.abs(jacobian) * np.maximum(np.abs(x0), 1.0)
        value = np.nanmax(np.abs(f0), axis=1, initial=0.0) if f0.shape[1] else np.zeros(len(f0))
        moved = np.nanmax(change, axis=1, initial=0.0) if change.shape[1] else np.zeros(len(f0))
        scale = np.maximum(value, moved)
    return np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)


@dataclass
class Estimate:
    """d f_m / d x_n for every output element m and input element n, with error bounds."""

    value: np.ndarray  # (M, N)
    error: np.ndarray  # (M, N): the estimate's own error
    left: np.ndarray | None = None  # one-sided (backward) derivatives (finite differences only)
    right: np.ndarray | None = None  # one-sided (forward) derivatives
    kink: np.ndarray | None = None  # (M, N) bool: the two sides disagree: not differentiable there (or a jump)
    steps: np.ndarray | None = None  # (N,) the largest step of the round kept, per input element
    one_sided: np.ndarray | None = None  # (M, N) bool: f is finite on one side only; that side's slope
    jump: np.ndarray | None = None  # (M, N) f(x+) - f(x-) where f steps at x (a kink too), nan elsewhere

    def at(self, point: int) -> Estimate:
        """One point's estimate ((M, N) fields) from one made at several ((M, P, N))."""
        fields = [None if v is None else v[:, point] for v in
                  (self.value, self.error, self.left, self.right, self.kink)]  # fmt: skip
        steps = None if self.steps is None else self.steps[point]
        one_sided = None if self.one_sided is None else self.one_sided[:, point]
        jump = None if self.jump is None else self.jump[:, point]
        return Estimate(*fields, steps, one_sided, jump)  # type: ignore[arg-type]


def _richardson(table: np.ndarray, ratio: float, first_power: int, power_step: int) -> tuple[np.ndarray, np.ndarray]:
    """Extrapolate estimates at steps h, h/ratio, ... (last axis) to h -> 0; the error of the result.

    Each round combines neighbouring steps to cancel the leading error term
    (h^first_power, then every power_step more); the best estimate of the last
    round, minus that of the round before, estimates the error left.
    """
    rows = [table[..., k] for k in range(table.shape[-1])]
    best_by_order = [rows[-1]]
    power = first_power
    while len(rows) > 1:
        factor = ratio**power
        rows = [(factor * rows[k + 1] - rows[k]) / (factor - 1.0) for k in range(len(rows) - 1)]
        best_by_order.append(rows[-1])
        power += power_step
    return best_by_order[-1], np.abs(best_by_order[-1] - best_by_order[-2])


def finite_differences(
    f: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, f0: np.ndarray, dtype: np.dtype = FLOAT64
) -> Estimate:
    """Central differences with Richardson extrapolation, each round of steps in one call of ``f``.

    The first round steps by 2^-6 of each input's scale (max(|x|, 1)). An
    element whose estimate has not converged (its truncation error above the
    rounding floor: a pole or a fast oscillation nearby, or no finite value at
    that distance) gets another round with steps 2^-8 as small, and so on;
    an input much smaller than 1 then gets rounds at its own scale (steps from
    2^-6 |x|). The estimate with the smallest error is kept. Each round
    evaluates ``f`` once, at the points of the elements still open.
    """
    x0 = np.asarray(x0, dtype=np.float64).reshape(1, -1)
    found = finite_differences_at(lambda rows, owner: f(rows), x0, np.asarray(f0).reshape(1, -1), dtype)
    return found.at(0)


def finite_differences_at(
    f: Callable[[np.ndarray, np.ndarray], np.ndarray],
    x0: np.ndarray,
    f0: np.ndarray,
    dtype: np.dtype = FLOAT64,
) -> Estimate:
    """``finite_differences`` at P points at once: ``x0`` (P, N), ``f0`` (P, M); ``f(rows, owner)`` takes
    rows of points and the point each row was moved from. Every element of every point is its own
    column: its rounds, steps and verdicts are exactly those it would get alone. Fields (M, P, N)."""
    with np.errstate(all="ignore"):
        return _finite_differences(f, x0, f0, dtype)


def _relative(r: _Round) -> np.ndarray:
    return r.error / np.maximum(np.abs(r.value), np.finfo(np.float64).tiny)


def _schedule(x0: np.ndarray) -> np.ndarray:
    """(N, rounds) first steps: ROUNDS from the absolute scale, then SMALL_ROUNDS at |x|'s own
    scale for inputs below the absolute rounds' reach (nan where a round does not apply)."""
    absolute = STEP_FRACTION * np.maximum(np.abs(x0), 1.0)[:, None] * ROUND_SHRINK ** np.arange(ROUNDS)[None, :]
    relative = STEP_FRACTION * np.abs(x0)[:, None] * ROUND_SHRINK ** np.arange(SMALL_ROUNDS)[None, :]
    reached = absolute[:, -1:]
    relative = np.where((relative < reached) & (relative > 0), relative, np.nan)
    steps = np.concatenate([absolute, relative], axis=1)
    # a step below a few units in the last place of x moves x by nothing (0.5 + 2^-55 == 0.5): f's
    # samples then all equal f(x) and "agree" on a slope of 0 with no error at all; not taken
    return np.where(steps / 2.0 ** (LEVELS - 1) >= 4.0 * np.spacing(np.abs(x0))[:, None], steps, np.nan)


def _finite_differences(
    f: Callable[[np.ndarray, np.ndarray], np.ndarray], x0: np.ndarray, f0: np.ndarray, dtype: np.dtype
) -> Estimate:
    x0 = np.asarray(x0, dtype=np.float64)
    points, n = x0.shape
    f0 = np.asarray(f0, dtype=np.float64).reshape(points, -1).T  # (M, P)
    columns = _Columns(x0)
    schedule = _schedule(x0.reshape(-1))
    best: _Round | None = None
    steps = schedule[:, 0].copy()
    open_ = np.arange(points * n)
    for r in range(schedule.shape[1]):
        open_ = open_[np.isfinite(schedule[open_, r])]
        if not open_.size:
            break
        h = schedule[open_, r]
        plus, minus = _samples(f, columns, h, open_)
        found = _estimates(plus, minus, f0[:, columns.owner[open_]], h, dtype)
        if best is None:
            best = found.spread(open_, points * n)  # (an element at an infinite input has no step: nan)
        else:
            worse = best.part(open_)
            # the smaller error relative to the estimate (at a pole a big step gives a small value
            # with a small absolute error, all of it wrong)
            central = np.isfinite(found.value) & (~np.isfinite(worse.value) | (_relative(found) < _relative(worse)))
            # no central difference at either step (f undefined on one side): the better one-sided one
            lone = ~np.isfinite(found.value) & ~np.isfinite(worse.value) & ~(found.lone >= worse.lone)
            better = central | lone
            best.merge(open_, found, better)
            steps[open_] = np.where(better.any(axis=0), h, steps[open_])
        open_ = open_[~found.converged.all(axis=0)]
    assert best is not None
    value, error, left, right, side = best.value, best.error, best.left, best.right, best.side
    one_sided = ~np.isfinite(value) & (np.isfinite(left) | np.isfinite(right))
    if one_sided.any():  # defined on one side only (x^1.5 at 0): that side's derivative
        take_right = one_sided & np.isfinite(right) & (~np.isfinite(left) | (side <= error))
        value = np.where(one_sided, np.where(take_right, right, left), value)
        error = np.where(one_sided, best.lone, error)
    scale = np.maximum(np.abs(left), np.abs(right))
    with np.errstate(invalid="ignore"):
        # two slopes further apart than either one-sided estimate's own error: a kink
        kink = np.abs(right - left) > 1e-6 * np.maximum(scale, 1.0) + 20.0 * (error + side) + 1e-10
        kink &= side <= 1e-2 * scale  # only from one-sided estimates that converged (not noise at sin(e^100))
        kink |= np.isfinite(best.jump)
    shape = (-1, points, n)
    fields = (value, error, left, right, kink)
    return Estimate(*(v.reshape(shape) for v in fields), steps.reshape(points, n), one_sided.reshape(shape),
                    best.jump.reshape(shape))  # fmt: skip


class _Columns:
    """Every element of every point as one column: the point it belongs to (``owner``), the element
    moved (``element``), and the points themselves (``x0``, (P, N))."""

    def __init__(self, x0: np.ndarray) -> None:
        self.x0 = x0
        points, n = x0.shape
        self.owner = np.repeat(np.arange(points), n)
        self.element = np.tile(np.arange(n), points)


@dataclass
class _Round:
    """One round's estimates, (M, N') for the N' elements it varied."""

    value: np.ndarray
    error: np.ndarray
    left: np.ndarray
    right: np.ndarray
    side: np.ndarray
    lone: np.ndarray  # a cautious error for a one-sided estimate used alone
    jump: np.ndarray  # f(x + h) - f(x - h) where it does not shrink with h (a step at x), else nan
    converged: np.ndarray
    truncation: np.ndarray
    rounding: np.ndarray

    FIELDS = ("value", "error", "left", "right", "side", "lone", "jump")

    def part(self, columns: np.ndarray) -> _Round:
        return _Round(*(getattr(self, k)[:, columns] for k in (*self.FIELDS, "converged", "truncation", "rounding")))

    def spread(self, columns: np.ndarray, total: int) -> _Round:
        """This round's estimates of ``columns`` among ``total``: nan (not converged) at the others."""
        if columns.size == total:
            return self

        def full(values: np.ndarray) -> np.ndarray:
            out = np.full((values.shape[0], total), False if values.dtype == bool else np.nan, dtype=values.dtype)
            out[:, columns] = values
            return out

        return _Round(*(full(getattr(self, k)) for k in (*self.FIELDS, "converged", "truncation", "rounding")))

    def merge(self, columns: np.ndarray, other: _Round, take: np.ndarray) -> None:
        for k in self.FIELDS:
            mine = getattr(self, k)
            mine[:, columns] = np.where(take, getattr(other, k), mine[:, columns])


CHUNK = 2_000_000  # input elements per call of f: points are made and evaluated in slices this size


def _samples(
    f: Callable[[np.ndarray, np.ndarray], np.ndarray], columns: _Columns, h: np.ndarray, open_: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """f at x0 +- h_j 2^-k e_n(j) for each varied column j (its point's x0, its element n(j)) and
    level k: arrays (M, J, LEVELS).

    The points form a (J LEVELS 2, N) matrix: made and evaluated a slice at a time,
    so memory stays bounded for ten thousand inputs and more."""
    n, count = columns.x0.shape[1], open_.size
    per = max(1, CHUNK // max(1, LEVELS * 2 * n))
    parts = []
    for start in range(0, count, per):
        cols, hs = open_[start : start + per], h[start : start + per]
        levels = hs[:, None] / 2.0 ** np.arange(LEVELS)[None, :]  # (n', L)
        owner = columns.owner[cols]
        points = np.broadcast_to(columns.x0[owner][:, None, None, :], (cols.size, LEVELS, 2, n)).copy()
        rows = np.arange(cols.size)
        points[rows, :, 0, columns.element[cols]] += levels
        points[rows, :, 1, columns.element[cols]] -= levels
        found = f(points.reshape(-1, n), np.repeat(owner, LEVELS * 2))
        parts.append(np.asarray(found, dtype=np.float64).reshape(cols.size, LEVELS, 2, -1))
    values = np.concatenate(parts)
    return np.moveaxis(values[:, :, 0, :], -1, 0), np.moveaxis(values[:, :, 1, :], -1, 0)


def _estimates(plus: np.ndarray, minus: np.ndarray, f0: np.ndarray, h: np.ndarray, dtype: np.dtype) -> _Round:
    """One round's estimates from its samples (M, J, LEVELS), ``f0`` (M, J) each column's own value."""
    levels = h[None, :, None] / 2.0 ** np.arange(LEVELS)[None, None, :]  # (1, N', L)
    with np.errstate(all="ignore"):
        central = (plus - minus) / (2.0 * levels)
        forward = (plus - f0[:, :, None]) / levels
        backward = (f0[:, :, None] - minus) / levels
        value, richardson = _richardson(central, 2.0, 2, 2)  # error terms h^2, h^4, h^6
        right, right_error = _richardson(forward, 2.0, 1, 1)  # one-sided: h, h^2, h^3
        left, left_error = _richardson(backward, 2.0, 1, 1)
        eps = machine_epsilon(dtype)
        magnitude = np.fmax(np.abs(plus).max(axis=-1), np.abs(minus).max(axis=-1))  # fmax: one side may be nan
        rounding = 8.0 * eps * magnitude / levels[..., -1]  # the smallest step amplifies rounding most
        # A function smooth on each side but with a jump in a higher derivative at x
        # (x * relu(x) at 0) leaves odd powers of h in the central differences: their
        # successive differences halve (ratio 2) instead of quartering. There, cancel
        # every power of h, not just the even ones.
        steps = np.diff(central, axis=-1)
        ratios = steps[..., :-1] / steps[..., 1:]
        odd = np.all((ratios > 1.5) & (ratios < 2.8), axis=-1) & (np.abs(steps[..., -1]) > 10.0 * rounding)
        if odd.any():
            general, general_error = _richardson(central, 2.0, 1, 1)
            value, richardson = np.where(odd, general, value), np.where(odd, general_error, richardson)
        error = np.maximum(richardson, rounding)
        # Richardson's error estimate holds in the asymptotic range only, where each halving of the step
        # shrinks the central differences' change (by 4, or 2 for odd powers); where the changes do not
        # shrink (a transformer's f at s = 0.1: -7.154, -7.161, -7.146, -7.109 e-7 for h = 2^-6..2^-9),
        # the extrapolation is a guess and its error at least the largest change
        change = np.abs(steps)
        shrinking = np.all(change[..., 1:] <= 0.6 * change[..., :-1], axis=-1) | (
            change.max(axis=-1) <= 10.0 * rounding
        )
        error = np.where(shrinking | ~np.isfinite(change).all(axis=-1), error, np.maximum(error, change.max(axis=-1)))
        side = np.maximum(np.fmax(left_error, right_error), 2.0 * rounding)  # fmax: one side may be undefined
        # alone, a one-sided estimate may be far from converged (x^1.5 at 0 goes like sqrt(h), which
        # Richardson's integer powers do not cancel): at least its distance from the raw finest difference
        distance = np.fmax(np.abs(right - forward[..., -1]), np.abs(left - backward[..., -1]))
        lone = np.where(np.isfinite(right) | np.isfinite(left), np.fmax(side, distance), np.inf)
        # done when truncation is below rounding (smaller steps would only add noise) or negligible
        converged = np.isfinite(value) & (richardson <= np.maximum(rounding, 1e-13 * np.abs(value)))
        # a step at x (trunc at an integer, sign at 0): f(x + h) - f(x - h) stays the same at every step
        # where a derivative would halve it with h; the central differences then grow like 1/h
        size = np.abs(plus - minus)
        jump = (size.min(axis=-1) >= 0.7 * size.max(axis=-1)) & (size.min(axis=-1) > 1e3 * eps * magnitude)
        # a step smaller than 2 f' h (floor(x)*1e-9 + x at -1): what stays of f(x + h) - f(x - h) once
        # its part linear in h is taken out is the same at every level (a smooth f leaves h^3 terms)
        across = 2.0 * (plus - minus)[..., 1:] - (plus - minus)[..., :-1]
        level = across.mean(axis=-1)
        steady = np.abs(across - level[..., None]).max(axis=-1) <= 0.05 * np.abs(level)
        jump = ~converged & (jump | (steady & (np.abs(level) > 1e3 * eps * magnitude)))
        steps_across = plus - minus  # J + 2 f' h at a step: extrapolated to h = 0
        jump = np.where(jump, 2.0 * steps_across[..., -1] - steps_across[..., -2], np.nan)
    error = np.where(np.isfinite(error), error, np.inf)
    return _Round(value, error, left, right, side, lone, jump, converged, richardson, rounding)


def complex_steps(x0: np.ndarray) -> np.ndarray:
    """h per element: 1e-30 of the input's scale, and far below |x| itself (sqrt at 1e-30 varies
    on the scale of x), but not so small that f'(x) h underflows to a denormal."""
    scale = COMPLEX_STEP * np.maximum(np.abs(x0), 1.0)
    own = np.where(x0 != 0.0, 2.0**-60 * np.abs(x0), scale)
    h = np.maximum(np.minimum(scale, own), 1e-290)
    return np.exp2(np.floor(np.log2(h)))  # a power of 2: dividing by it is exact


class NotRealValued(ValueError):
    """f(x + ih) has a real part unlike f(x): f is complex-valued there (log of a negative number)."""


def complex_step(
    f: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    dtype: np.dtype = FLOAT64,
    f0: np.ndarray | None = None,
    mirror: bool = False,
) -> Estimate:
    """Im f(x + ih e_n) / h for every n, in one call of ``f``.

    With ``f0`` (f at x0), the real parts must reproduce it: otherwise f is not
    real-valued near x0 and the imaginary parts are not derivatives (NotRealValued).
    ``mirror`` steps by -ih: where f is analytic (and real on the real line) the
    two agree; at a branch point (norm at 0: sqrt(-h^2) = ih both ways) they do not.
    """
    x0 = np.asarray(x0, dtype=np.float64).reshape(1, -1)
    found, real = complex_step_at(lambda rows, owner: f(rows), x0, dtype, None if f0 is None else np.reshape(f0, (1, -1)),
                                  mirror)  # fmt: skip
    if not real[0]:
        raise NotRealValued("the function is not real-valued around the point")
    return found.at(0)


def complex_step_at(
    f: Callable[[np.ndarray, np.ndarray], np.ndarray],
    x0: np.ndarray,
    dtype: np.dtype = FLOAT64,
    f0: np.ndarray | None = None,
    mirror: bool = False,
) -> tuple[Estimate, np.ndarray]:
    """``complex_step`` at P points at once (``x0`` (P, N), ``f0`` (P, M), ``f(rows, owner)`` as for
    ``finite_differences_at``): the estimate (M, P, N) and, per point, whether f is real-valued
    around it (with ``f0``; where it is not, the point's imaginary parts are not derivatives)."""
    x0 = np.asarray(x0, dtype=np.float64)
    points, n = x0.shape
    columns = _Columns(x0)
    h = complex_steps(x0.reshape(-1))
    h = -h if mirror else h
    per = max(1, CHUNK // max(1, n))
    parts = []
    for start in range(0, points * n, per):
        cols = np.arange(start, min(points * n, start + per))
        moved = x0[columns.owner[cols]].astype(np.complex128)
        with np.errstate(invalid="ignore"):  # (an infinite input: no step there, nan)
            moved[np.arange(cols.size), columns.element[cols]] += 1j * h[cols]
        parts.append(np.asarray(f(moved, columns.owner[cols]), dtype=np.complex128).reshape(cols.size, -1))
    values = np.concatenate(parts) if parts else np.zeros((0, 1), dtype=np.complex128)  # (P N, M)
    real = np.ones(points, dtype=bool)
    if f0 is not None:
        base = np.asarray(f0, dtype=np.float64).reshape(points, -1)[columns.owner]
        with np.errstate(all="ignore"):
            drift = ~(np.abs(values.real - base) <= 1e-6 * np.maximum(np.abs(base), 1.0))  # nan drifts too
        bad = (drift | ~np.isfinite(values)).any(axis=1)
        real = ~np.bincount(columns.owner, weights=bad, minlength=points).astype(bool)
    value = (values.imag / h[:, None]).T.reshape(-1, points, n)  # (M, P, N)
    error = 4.0 * machine_epsilon(dtype) * np.abs(value)
    return Estimate(value, error), real
