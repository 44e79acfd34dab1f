"""``--blame``: which node computes a wrong derivative?

Each recorded node is checked on its own: for random directions u (inputs,
at each input's own scale) and v (output), its backward rule gives v . J u;
the complex step (for a complex-analytic primitive) or finite differences of
its forward alone give the same number. Where finite differences have not
converged (a jump, a steep spot) the node is not judged. The first node, in evaluation order,
where they disagree is named. This is what finds the bug in a custom
``gradcli.autograd.Function`` whose backward is wrong.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..autograd.function import FunctionCtx, FunctionNode
from ..autograd.node import OpNode
from ..autograd.tensor import Tensor, wrap
from ..ops import Meta, unbroadcast
from ..text import array
from .numeric import finite_differences
from .result import Blame

TOLERANCE = 1e-6


def blame_nodes(tape: Sequence[tuple[Any, Tensor, tuple[Any, ...]]]) -> tuple[Blame | None, int]:
    """The first node whose backward disagrees with its forward, and how many were checked.

    ``Blame.autograd_node`` is that node; a graph built with ``blamed=[it]`` marks it.
    """
    rng = np.random.default_rng(0)
    checked = 0
    for position, (node, result, inputs) in enumerate(tape):
        if not isinstance(node, (OpNode, FunctionNode)):
            continue
        differentiable = _differentiable(node, inputs)
        if not differentiable:
            continue
        values = [x.array if isinstance(x, Tensor) else x for x in inputs]
        out = np.asarray(result.array)
        if not np.issubdtype(out.dtype, np.floating):
            continue
        if not (np.isfinite(out).all() and all(np.isfinite(values[i]).all() for i in differentiable)):
            continue  # an infinite input or output: no difference quotient means anything there
        # directions at each input's own scale: a step of a few per cent of log's input at 1e-300
        # stays on its side of 0
        u = {i: rng.standard_normal(np.shape(values[i])) * input_scale(values[i]) for i in differentiable}
        v = rng.standard_normal(out.shape)
        with np.errstate(all="ignore"):
            backward = _backward_dot(node, values, out, v, u)
            forward = _forward(node, values)
            numeric, error = _exact(node, forward, values, u, v, out)
            if numeric is None:
                f0 = np.array([np.sum(v * out)])
                estimate = finite_differences(_directional(forward, values, u, v), np.zeros(1), f0)
                if estimate.kink is not None and estimate.kink[0, 0]:
                    checked += 1
                    continue  # a kink along this direction: no derivative to compare
                numeric, error = float(estimate.value[0, 0]), float(estimate.error[0, 0])
                # again with steps 2^-10 as long: a jump (sign at 0, atan2's cut) grows like 1/step
                along = _directional(forward, values, u, v)
                small = finite_differences(lambda t, along=along: along(t * 2.0**-10), np.zeros(1), f0)
                again = float(small.value[0, 0]) * 2.0**10
                if not abs(again - numeric) <= 1e-3 * max(abs(numeric), abs(again)) + 10.0 * error:
                    checked += 1
                    continue
        checked += 1
        if not np.isfinite(numeric) or not np.isfinite(backward):
            continue
        # not converged (a jump such as atan2's cut, sign at 0): it proves nothing. Against the
        # larger of the two, so that a derivative of 0 (floor, round) measured to 1e-13 still
        # judges a backward that gives 7
        if not error <= 1e-2 * max(abs(numeric), abs(backward)) + 1e-300:
            continue
        if abs(backward - numeric) > TOLERANCE * max(abs(numeric), 1.0) + 10.0 * error:
            with np.errstate(all="ignore"):
                if _confirmed(_directional(_forward(node, values), values, u, v), backward):
                    continue  # a plain difference quotient agrees: the estimate above was misled
            return _describe(node, position, values, backward, numeric), checked
    return None, checked


def _confirmed(along: Any, backward: float) -> bool:
    """Does a central difference at one of a few fixed steps agree with ``backward``? A blame
    stands only if none does: Richardson's rounds can settle on steps so small that the input
    does not move at all (log at 1 along a short direction gave 0 with an error of 0)."""
    steps = 2.0 ** -np.arange(8.0, 30.0, 3.0)
    points = np.concatenate([steps, -steps])[:, None]
    values = along(points)[:, 0]
    plus, minus = values[: steps.size], values[steps.size :]
    quotient = (plus - minus) / (2.0 * steps)
    rounding = 16.0 * np.finfo(np.float64).eps * np.maximum(np.abs(plus), np.abs(minus)) / steps
    agree = np.abs(quotient - backward) <= 1e-5 * np.maximum(np.abs(quotient), abs(backward)) + rounding
    return bool(np.any(agree & np.isfinite(quotient) & (plus != minus)))


def input_scale(value: Any) -> np.ndarray:
    """A direction's scale at each element: the input's own size, at most 1 (1 at 0)."""
    magnitude = np.abs(np.asarray(value, dtype=np.float64))
    return np.where(magnitude > 0, np.minimum(magnitude, 1.0), 1.0)


def _exact(node: Any, forward: Any, values: list[Any], u: dict[int, np.ndarray], v: np.ndarray,
           out: np.ndarray) -> tuple[float | None, float]:  # fmt: skip
    """v . J u by the complex step, for a complex-analytic primitive (exact to rounding, so no
    false blame where finite differences lose digits); (None, 0) where it does not apply."""
    if not isinstance(node, OpNode) or not node.prim.analytic:
        return None, 0.0
    if node.prim.continuation is not None:  # complex inputs mean the modulus to it (norm): step its continuation
        continuation, params = node.prim.continuation, node.params
        forward = lambda vs: continuation(*vs, *params)  # noqa: E731
    smallest = min((float(np.min(np.abs(ui))) for ui in u.values() if np.size(ui)), default=1.0)
    h = 2.0**-50 if smallest > 1e-200 else 2.0**-20  # h u stays a normal number (not a denormal)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", np.exceptions.ComplexWarning)  # an imaginary part dropped
            result, mirror = (
                np.asarray(forward(_stepped(values, u, step)), dtype=np.complex128) for step in (1j * h, -1j * h)
            )
    except (TypeError, ValueError, np.exceptions.ComplexWarning):
        return None, 0.0
    if not np.allclose(result.real, out, rtol=1e-6, atol=0.0, equal_nan=False):
        return None, 0.0  # not real-valued around the point (log of a negative number)
    # analytic and real on the real line: f(x - ihu) = conj f(x + ihu). Not so at a branch point
    # such as norm's at 0 (sqrt(-h^2) = ih both ways), where the complex step is no derivative.
    if not np.allclose(mirror.imag, -result.imag, rtol=1e-6, atol=1e-300, equal_nan=False):
        return None, 0.0
    numeric = float(np.sum(v * result.imag) / h)
    return numeric, 8.0 * np.finfo(np.float64).eps * float(np.sum(np.abs(v * result.imag)) / h)


def _stepped(values: list[Any], u: dict[int, np.ndarray], step: complex) -> list[Any]:
    return [np.asarray(x, dtype=np.complex128) + step * u[i] if i in u else x for i, x in enumerate(values)]


def _differentiable(node: Any, inputs: tuple[Any, ...]) -> list[int]:
    if isinstance(node, OpNode):
        rules = node.prim.vjp
        count = len(inputs) if node.prim.arity < 0 else len(rules)
        return [i for i in range(count) if isinstance(inputs[i], Tensor) and inputs[i]._edge is not None
                and (node.prim.arity < 0 or rules[i] is not None)]  # fmt: skip
    return [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x._edge is not None]


def _directional(forward: Any, values: list[Any], u: dict[int, np.ndarray], v: np.ndarray) -> Any:
    """t -> v . node(inputs + t u), for a batch of t (one row each): the node alone, along u."""

    def along(points: np.ndarray) -> np.ndarray:
        return np.array([[np.sum(v * forward(_moved(values, u, t)))] for t in points[:, 0]])

    return along


def _moved(values: list[Any], u: dict[int, np.ndarray], t: float) -> list[Any]:
    return [v + t * u[i] if i in u else v for i, v in enumerate(values)]


def _forward(node: Any, values: list[Any]) -> Any:
    if isinstance(node, OpNode):
        prim, params = node.prim, node.params

        def run(vs: list[Any]) -> Any:
            return prim.forward(vs, *params) if prim.arity < 0 else prim.forward(*vs, *params)

        return run

    def run_function(vs: list[Any]) -> Any:
        ctx = FunctionCtx(tuple(False for _ in vs))
        out = node.function.forward(
            ctx, *[wrap(np.asarray(v)) if isinstance(v, (np.ndarray, np.generic)) else v for v in vs]
        )
        return out.array if isinstance(out, Tensor) else out

    return run_function


def _backward_dot(node: Any, values: list[Any], out: np.ndarray, v: np.ndarray, u: dict[int, np.ndarray]) -> float:
    """v . J u from the node's own backward rule(s)."""
    if isinstance(node, OpNode):
        prim = node.prim
        args = [Meta.of(x) for x in values] if prim.saves == "meta" else values
        saved_out = Meta.of(out) if prim.saves == "meta" else out[()] if out.ndim == 0 else out
        if prim.arity < 0:
            grads = prim.vjp[0](v, saved_out, *args, *node.params)
        else:
            grads = [
                None if i not in u else prim.vjp[i](v, saved_out, *args, *node.params) for i in range(len(prim.vjp))
            ]
        total = 0.0
        for i, ui in u.items():
            g = grads[i]
            if g is not None:
                total += float(
                    np.sum(
                        unbroadcast(
                            np.asarray(np.broadcast_to(g, np.broadcast_shapes(np.shape(g), np.shape(g)))),
                            np.shape(values[i]),
                        )
                        * ui
                    )
                )
        return total
    ctx = FunctionCtx(tuple(i in u for i in range(len(values))))
    node.function.forward(
        ctx, *[wrap(np.asarray(x)) if i in u or isinstance(x, np.ndarray) else x for i, x in enumerate(values)]
    )
    grads = node.function.backward(ctx, wrap(v))
    grads = grads if isinstance(grads, tuple) else (grads,)
    return float(sum(np.sum(np.asarray(grads[i].array if isinstance(grads[i], Tensor) else grads[i]) * ui)
                     for i, ui in u.items() if i < len(grads) and grads[i] is not None))  # fmt: skip


def inputs_text(values: Sequence[Any]) -> str:
    """A node's inputs as a blame message shows them: small ones in full, others by shape."""
    return ", ".join(array(np.asarray(v), digits=6) if np.size(v) <= 6 else f"shape {np.shape(v)}" for v in values)


def _describe(node: Any, position: int, values: list[Any], backward: float, numeric: float) -> Blame:
    shown = inputs_text(values)
    op = node.function.__name__ if isinstance(node, FunctionNode) else node.prim.name
    found = Blame(str(position), op, node.name(), op, backward, numeric, shown)
    found.autograd_node = node
    return found
