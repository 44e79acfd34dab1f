"""Forward mode: tangents pushed through a recorded run, in the order it ran.

A run recorded with ``render.recording()`` (the tape: each node with its output
and inputs) is replayed for tangents only: each primitive's forward rule,
``jvp(tangents, out, *inputs, *params)`` for every primitive (``ops.core``), turns
its inputs' tangents into its output's. Tangents carry leading batch axes, so
a whole basis of directions (a Jacobian's columns) goes through in one pass.
Elementwise primitives need no rule of their own: their Jacobian is diagonal,
so the tangent is the sum of the reverse rules applied to the inputs' tangents.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..ops import Meta, Primitive
from ..ops.shape import lift
from . import tensor as _tensor_mod
from .basis import ScaledIdentity, Structured, structured_tangent
from .function import FunctionNode
from .node import OpNode
from .still import settle, settle_linear
from .tensor import Tensor, is_complex, wrap


class NoForwardRule(RuntimeError):
    """A node on the tape has no forward-mode rule (a custom Function without ``jvp``)."""


def key(tensor: Any) -> Any:
    """What tangents are keyed by: the tensor's edge (its grad_fn, or its leaf's AccumulateGrad),
    which the tensor and any copy the backward pass makes of it share."""
    return tensor._edge if isinstance(tensor, Tensor) else None


def primitive_tangent(
    prim: Primitive,
    tangents: Sequence[Any],
    out: Any,
    inputs: list[Any],
    params: tuple[Any, ...],
    still: bool = False,
    structured: bool = False,
) -> Any:
    """The output's tangent of one primitive application (``None`` when no input has one).

    ``still``: an elementwise rule's ``0 * inf`` counts 0 (``still.settle``); ``push`` asks for it
    only when the plain tangent is not finite.
    """
    if all(t is None for t in tangents):
        return None
    values = [x._value if isinstance(x, Tensor) else x for x in inputs]
    if _tensor_mod.complex_seen and prim.arity >= 0 and any(is_complex(v) for v in (out, *values)):
        if prim.complex_jvp is not None:
            return prim.complex_jvp(tuple(tangents), out, *values, *params)
        if not prim.analytic:
            raise RuntimeError(f"{prim.name} is not differentiable at complex inputs (it is not holomorphic)")
    if structured:  # a Hessian's batch of 1-D tangents, kept banded + low rank (basis.Structured)
        found, tangents = _structured(prim, tangents, out, values, params)
        if found is not NotImplemented:
            return found
    if prim.jvp is not None:
        return prim.jvp(tuple(tangents), out, *values, *params)
    return _elementwise_tangent(prim, tangents, out, values, params, still)


def _structured(
    prim: Primitive, tangents: Sequence[Any], out: Any, values: list[Any], params: tuple[Any, ...]
) -> tuple[Any, Sequence[Any]]:
    """A primitive's tangent kept ``Structured`` where it has a structured rule (else
    ``NotImplemented``), and the tangents the plain rules take (spread, or made dense)."""
    if prim.elementwise:
        if np.ndim(out) == 1 and np.size(out) > 1:
            tangents = [_spread(t) for t in tangents]
        return NotImplemented, tangents
    if prim.name == "expand" and np.ndim(out) == 1:
        tangents = [_spread(t) for t in tangents]
    if any(isinstance(t, Structured) for t in tangents):
        found = structured_tangent(prim.name, tuple(tangents), out, values, params)
        if found is not NotImplemented:
            return found, tangents
        tangents = [np.asarray(t) if isinstance(t, Structured) else t for t in tangents]
    return NotImplemented, tangents


def _elementwise_tangent(
    prim: Primitive, tangents: Sequence[Any], out: Any, values: list[Any], params: tuple[Any, ...], still: bool
) -> Any:
    """An elementwise primitive's tangent: its Jacobian is diagonal, so the jvp is the sum of the
    reverse rules applied to the tangents."""
    out_ndim = np.ndim(out)
    args = [Meta.of(v) for v in values] if prim.saves == "meta" else values
    total = None
    for i, t in enumerate(tangents):
        rule = prim.vjp[i]
        if t is None or rule is None:
            continue
        lifted = t if t.__class__ is Structured else lift(t, np.ndim(values[i]), out_ndim)
        part = rule(lifted, out, *args, *params)
        if still:  # 0 * inf counts 0, as in a Jacobian's reverse passes (still.py)
            part = settle(part, lifted, lambda ones, rule=rule: rule(ones, out, *args, *params))
        total = part if total is None else _add(total, part, tangents)
    return total


def _add(total: Any, part: Any, tangents: Sequence[Any]) -> Any:
    """``total + part``, in place when ``total`` is a new array of a rule's that can hold the sum
    (saves a pass over memory)."""
    if (
        _fresh(total, tangents)
        and np.shape(total) == np.broadcast_shapes(np.shape(total), np.shape(part))
        and total.dtype == np.result_type(total, part)
    ):
        total += part
        return total
    return total + part


def _spread(t: Any) -> Any:
    """The tangents of a one-element value that an elementwise rule spreads over a vector, as a
    rank-1 ``Structured`` batch (a dense batch would be n x m)."""
    if t.__class__ is np.ndarray and t.ndim in (1, 2) and t.shape[1:] in ((), (1,)):
        return Structured.spread(t.reshape(-1, 1))
    return t


def _finite(t: Any) -> bool:
    """No NaN or infinity in a tangent (one sum, no temporary array; an overflowing sum only costs a mask)."""
    if isinstance(t, ScaledIdentity):
        t = t.scale
    elif isinstance(t, Structured):
        return t.finite()
    if not isinstance(t, np.ndarray) or t.dtype.kind not in "fc":
        return True
    return bool(np.isfinite(t.sum()))


def _zero_where_no_direction_moves(t: Any, tangents: Sequence[Any], nbatch: int) -> Any:
    """Zero the directions (batch rows) along which no input of the node moves.

    Such a direction leaves the node's output where it is: its tangent is 0, as reverse mode
    gives it, even where a non-elementwise rule (``dot``, ``matmul``, a reduction) meets an
    infinite value and computes ``0 * inf``.
    """
    batch = np.shape(t)[:nbatch]
    moving = np.zeros(batch, dtype=bool)
    for ti in tangents:
        if ti is None:
            continue
        if isinstance(ti, ScaledIdentity) and batch == (ti.scale.size,):
            moving |= ti.scale.reshape(batch) != 0  # row k of the batch is scale[k] e_k
            continue
        ti = np.asarray(ti)
        moving |= np.any(ti != 0, axis=tuple(range(nbatch, ti.ndim))) if ti.ndim > nbatch else ti != 0
    if moving.all():
        return t
    dense = np.asarray(t)
    return np.where(moving.reshape(batch + (1,) * (dense.ndim - nbatch)), dense, np.zeros((), dense.dtype))


def _fresh(value: Any, tangents: list[Any]) -> bool:
    """An array a rule just made (not one of the inputs' tangents, which rules may pass through)."""
    return (
        value.__class__ is np.ndarray
        and value.base is None
        and value.flags.writeable
        and all(value is not t for t in tangents)
    )


def push(tape: Iterable[tuple[Any, Tensor, tuple[Any, ...]]], seeds: dict[Any, Any], nbatch: int) -> dict[Any, Any]:
    """Tangents of every recorded value, given ``seeds`` (tangents of some inputs, by ``key``)."""
    tangents = dict(seeds)
    structured = any(isinstance(s, Structured) for s in seeds.values())
    with np.errstate(all="ignore"):
        for node, result, inputs in tape:
            ts = [tangents.get(key(x)) if isinstance(x, Tensor) else None for x in inputs]
            if all(t is None for t in ts):
                continue
            out = result._value
            if isinstance(node, OpNode):
                t = primitive_tangent(node.prim, ts, out, list(inputs), node.params, structured=structured)
                if t is not None and node.prim.elementwise and node.prim.jvp is None and not _finite(t):
                    t = primitive_tangent(node.prim, ts, out, list(inputs), node.params, still=True)
                elif t is not None and not _finite(t) and np.isnan(np.asarray(t)).any():
                    t = _settled_linear(node, ts, out, inputs, t)
            elif isinstance(node, FunctionNode):
                t = _function_tangent(node, ts, result, nbatch)
            else:
                continue
            if t is None:
                continue
            if not _finite(t):
                t = _zero_where_no_direction_moves(t, ts, nbatch)
            batch = np.shape(t)[:nbatch] if nbatch else ()
            tangents[key(result)] = (
                np.broadcast_to(t, batch + np.shape(out)) if np.shape(t) != batch + np.shape(out) else t
            )
    return tangents


def _settled_linear(node: OpNode, ts: list[Any], out: Any, inputs: tuple[Any, ...], t: Any) -> Any:
    """A rule's NaN from ``0 * inf`` inside a linear map (a sum, a dot) counted 0 (``still.settle_linear``)."""
    return settle_linear(lambda given: primitive_tangent(node.prim, given, out, list(inputs), node.params), ts, t)


def _function_tangent(node: FunctionNode, tangents: list[Any], result: Tensor, nbatch: int) -> Any:
    jvp = getattr(node.function, "jvp", None)
    if jvp is None:
        raise NoForwardRule(f"{node.function.__name__} has no jvp(ctx, *tangents) for forward mode")
    results = []
    batch = np.shape(next(t for t in tangents if t is not None))[:nbatch]
    for row in range(int(np.prod(batch))):
        per_input = [None if t is None else wrap(np.reshape(t, (-1,) + np.shape(t)[nbatch:])[row]) for t in tangents]
        out = jvp(node.ctx, *per_input)
        if isinstance(out, tuple):  # one of several outputs: the tangent of this one
            out = out[result._edge.index]
        results.append(np.asarray(out._value))
    return np.stack(results).reshape(batch + results[0].shape)  # no batch axes: none added
