"""``0 * inf`` counts 0 in a Jacobian's batched passes, forward and reverse alike.

A rule computes ``incoming * derivative`` (a tangent times the local derivative in forward mode, a
cotangent times it in reverse mode). Where one factor is 0 and the other infinite (or NaN), IEEE
gives NaN:
a direction that leaves ``cbrt``'s input at 0 (forward), or a cotangent of 0 reaching ``cbrt(0)``
(``cos'(0) = -0``, or the zero row of another output: reverse), or an infinite tangent meeting a
zero derivative (``erf'(-inf)``). Counting such a product 0 in both modes, whichever factor is the
0 (as a product with a structural zero is 0 in JAX's symbolic zeros), gives the two modes one Jacobian: a product of local derivatives with a 0 in it is 0 in any
order. Plain ``backward`` (no batch axis) keeps PyTorch's IEEE arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .basis import ScaledIdentity


def no_nan(t: Any) -> bool:
    """No NaN in a float array or ``ScaledIdentity`` (one sum; anything else has none)."""
    if t.__class__ is ScaledIdentity:
        t = t.scale
    if t.__class__ is not np.ndarray or t.dtype.kind != "f":
        return True
    return not np.isnan(t.sum())


def settle(part: Any, incoming: Any, derivative: Callable[[Any], Any]) -> Any:
    """``part = rule(incoming)`` with 0 where it is NaN and one factor is 0: ``incoming``, or the local
    derivative (``derivative(ones)``: the rule is linear in what it is given)."""
    if part.__class__ is ScaledIdentity:
        if incoming.__class__ is not ScaledIdentity:
            return part
        scale = _settled(part.scale, incoming.scale, lambda: derivative(np.ones(incoming.scale.shape)))
        return ScaledIdentity(scale)
    if part.__class__ is not np.ndarray or part.dtype.kind != "f":
        return part
    given = np.asarray(incoming)
    if np.broadcast_shapes(given.shape, part.shape) != part.shape:
        return part
    return _settled(part, given, lambda: derivative(np.ones(given.shape, given.dtype)))


def _settled(part: np.ndarray, given: np.ndarray, derivative: Callable[[], Any]) -> np.ndarray:
    nan = np.isnan(part)
    if not nan.any():
        return part
    zero = given == 0
    if (nan & ~zero).any():  # an infinite or NaN factor given: is the local derivative the 0?
        zero = zero | (np.broadcast_to(np.asarray(derivative()), part.shape) == 0)
    nan &= zero
    return np.where(nan, np.zeros((), part.dtype), part) if nan.any() else part


def quiet_rows(grad: Any, g: Any, nbatch: int) -> Any:
    """A non-elementwise rule's result with 0 in each batch row whose cotangent is 0 everywhere
    (forward mode's ``_zero_where_no_direction_moves`` seen from the other end)."""
    if grad.__class__ is not np.ndarray or grad.dtype.kind != "f":
        return grad
    cotangent = np.asarray(g)
    if cotangent.shape[:nbatch] != grad.shape[:nbatch]:
        return grad
    still = ~np.any(cotangent != 0, axis=tuple(range(nbatch, cotangent.ndim)))
    if not still.any():
        return grad
    return np.where(still.reshape(still.shape + (1,) * (grad.ndim - nbatch)), np.zeros((), grad.dtype), grad)


def quiet(grad: Any, g: Any, elementwise: bool, nbatch: int, derivative: Callable[[Any], Any]) -> Any:
    """A reverse rule's result in a batched pass, with ``0 * inf`` counted 0 (see the module):
    ``derivative(given)`` is the rule applied to another cotangent (it is linear in it)."""
    if grad is None or no_nan(grad):
        return grad
    if elementwise:
        return settle(grad, g, derivative)
    grad = quiet_rows(grad, g, nbatch)
    if no_nan(grad) or g.__class__ not in (np.ndarray, ScaledIdentity):
        return grad
    return settle_linear(lambda given: derivative(given[0]), [np.asarray(g)], grad)  # an infinite cotangent meeting 0


def settle_linear(apply: Callable[[list[Any]], Any], tangents: list[Any], part: Any) -> Any:
    """``part = apply(tangents)`` (a rule linear in the tangents) with its NaN entries recomputed with
    ``0 * inf`` and ``0 * nan`` counted 0 (``part`` as it is when no tangent is infinite or NaN)."""
    settled = _settled_entries(apply, tangents)
    if settled is None or np.shape(settled) != np.shape(part):
        return part
    return np.where(np.isnan(np.asarray(part)), settled, part)


def _settled_entries(apply: Callable[[list[Any]], Any], tangents: list[Any]) -> Any:
    """``apply`` at tangents with NaN or infinite entries, with ``0 * inf`` and ``0 * nan`` counted 0:
    the finite entries go through as they are, the others as indicators whose images say where an
    infinity (or NaN) lands; +inf meeting -inf is NaN."""
    dense = [None if t is None else np.asarray(t) for t in tangents]
    if not any(t is not None and t.dtype.kind == "f" and not np.isfinite(t).all() for t in dense):
        return None

    def image(pick: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        return np.asarray(apply([None if t is None else pick(t).astype(t.dtype) for t in dense]))

    with np.errstate(all="ignore"):
        base = np.asarray(apply([None if t is None else np.where(np.isfinite(t), t, 0.0) for t in dense]))
        up, down, lost = image(lambda t: t == np.inf), image(lambda t: t == -np.inf), image(np.isnan)
        pos = (up > 0) | (down < 0)
        neg = (up < 0) | (down > 0)
        spread = np.where(pos, np.inf, np.where(neg, -np.inf, 0.0))
        return np.where((pos & neg) | (lost != 0), np.nan, spread) + base
