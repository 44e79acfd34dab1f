"""``--blame``: which node computes a wrong derivative?

Each recorded node is checked on its own: for random directions u (inputs)
and v (output), its backward rule gives v . J u; finite differences of its
forward alone give the same number. The first node, in evaluation order,
where they disagree is named. This is what finds the bug in a custom
``gradcli.autograd.Function`` whose backward is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..autograd.function import FunctionCtx, FunctionNode
from ..autograd.node import OpNode
from ..autograd.tensor import Tensor, wrap
from ..ops import Meta, unbroadcast
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
        values = [x._value if isinstance(x, Tensor) else x for x in inputs]
        out = np.asarray(result._value)
        if not np.issubdtype(out.dtype, np.floating):
            continue
        u = {i: rng.standard_normal(np.shape(values[i])) for i in differentiable}
        v = rng.standard_normal(out.shape)
        with np.errstate(all="ignore"):
            backward = _backward_dot(node, values, out, v, u)
            forward = _forward(node, values)
            estimate = finite_differences(_directional(forward, values, u, v), np.zeros(1), np.array([np.sum(v * out)]))
        checked += 1
        if estimate.kink is not None and estimate.kink[0, 0]:
            continue  # a kink along this direction: no derivative to compare
        numeric, error = float(estimate.value[0, 0]), float(estimate.error[0, 0])
        if not np.isfinite(numeric) or not np.isfinite(backward):
            continue
        if abs(backward - numeric) > TOLERANCE * max(abs(numeric), 1.0) + 10.0 * error:
            return _describe(node, position, values, backward, numeric), checked
    return None, checked


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
            ctx, *[wrap(np.asarray(v)) if isinstance(v, np.ndarray) or np.ndim(v) == 0 else v for v in vs]
        )
        return out._value if isinstance(out, Tensor) else out

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
    return float(sum(np.sum(np.asarray(grads[i]._value if isinstance(grads[i], Tensor) else grads[i]) * ui)
                     for i, ui in u.items() if i < len(grads) and grads[i] is not None))  # fmt: skip


def _describe(node: Any, position: int, values: list[Any], backward: float, numeric: float) -> Blame:
    from ..cli.output import array

    shown = ", ".join(array(np.asarray(v), digits=6) if np.size(v) <= 6 else f"shape {np.shape(v)}" for v in values)
    op = node.function.__name__ if isinstance(node, FunctionNode) else node.prim.name
    found = Blame(str(position), op, node.name(), op, backward, numeric, shown)
    found.autograd_node = node
    return found
