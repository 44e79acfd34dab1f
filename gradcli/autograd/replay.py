"""A recorded run, evaluated again at a whole batch of points at once.

``replay`` recomputes every recorded value with a leading batch axis on the
inputs (finite differences need f at 2 x levels x n points, complex step at
n), in one pass over the tape. How a primitive takes a batch is declared in its
row (``Primitive.batch``, see ``ops.core``): elementwise ones broadcast (batched
inputs lifted so the batch axes stay in front); linear ones are their own
forward rule, which already knows about batch axes; reductions reduce over the
value's own trailing axes; products use their forward rule when one side is
batched and their ``batch_both`` when both are; the rest run point by point.
Only what was recorded changes: values computed without the graph (``detach``,
``no_grad``) stay constants, as they are for autograd.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..ops import Meta, Primitive
from ..ops.shape import lift
from .forward import key
from .function import FunctionCtx, FunctionNode
from .node import OpNode
from .tensor import Tensor, wrap


def replay(
    tape: Iterable[tuple[Any, Tensor, tuple[Any, ...]]], batched: dict[Any, Any], nbatch: int = 1
) -> dict[Any, Any]:
    """Every recorded value at the batch of points ``batched`` gives (by ``key``) for the inputs."""
    values = dict(batched)
    with np.errstate(all="ignore"):
        for node, result, inputs in tape:
            args, which = [], []
            for x in inputs:
                k = key(x) if isinstance(x, Tensor) else None
                if k is not None and k in values:
                    args.append(values[k])
                    which.append(True)
                else:
                    args.append(x._value if isinstance(x, Tensor) else x)
                    which.append(False)
            if not any(which):
                continue
            if isinstance(node, OpNode):
                out = batched_primitive(node.prim, args, which, node.params, result._value, nbatch)
            elif isinstance(node, FunctionNode):
                out = _batched_function(node, args, which, nbatch)
            else:
                continue
            values[key(result)] = out
    return values


def batched_primitive(
    prim: Primitive, args: list[Any], which: list[bool], params: tuple[Any, ...], out: Any, nb: int
) -> Any:
    """``prim(*args, *params)`` where the inputs marked in ``which`` carry ``nb`` leading batch axes,
    by the batching rule its row declares (``Primitive.batch``). ``out`` is the output at one
    point (or its ``Meta``): the rules read its shape."""
    kind = prim.batch
    if kind == "elementwise":
        lifted = [lift(a, np.ndim(a) - nb, np.ndim(out)) if w else a for a, w in zip(args, which)]
        return prim.forward(*lifted, *params)
    if kind == "loop":
        return _loop(prim, args, which, params, nb)
    own = [np.asarray(a)[(0,) * nb] if w else a for a, w in zip(args, which)]  # one point's shapes
    shape = Meta.of(out)  # the rules of linear maps and products read the output's shape only
    if kind == "linear":  # its forward rule is itself, with batch axes in front
        batch = next(np.shape(a)[:nb] for a, w in zip(args, which) if w)
        full = tuple(a if w else np.broadcast_to(a, batch + np.shape(a)) for a, w in zip(args, which))
        return prim.jvp(full, shape, *own, *params)
    if kind == "reduce":  # over the value's own axes only
        axis, keepdims = params
        ndim = np.ndim(args[0]) - nb
        forward = prim.continuation if prim.continuation and np.iscomplexobj(args[0]) else prim.forward
        return forward(args[0], tuple(range(-ndim, 0)) if axis is None else axis, keepdims)
    # a product: bilinear, so with one side batched its forward rule is the product itself
    if all(which):
        return prim.batch_both(*args, shape, nb)
    return prim.jvp(tuple(a if w else None for a, w in zip(args, which)), shape, *own, *params)


def _loop(prim: Primitive, args: list[Any], which: list[bool], params: tuple[Any, ...], nb: int) -> Any:
    """The slow way, point by point (for a primitive without a batched form)."""
    batch = next(np.shape(a)[:nb] for a, w in zip(args, which) if w)
    flat = [np.reshape(a, (-1,) + np.shape(a)[nb:]) if w else a for a, w in zip(args, which)]
    rows = [prim.forward(*[f[i] if w else f for f, w in zip(flat, which)], *params) for i in range(int(np.prod(batch)))]
    out = np.stack([np.asarray(r) for r in rows])
    return out.reshape(batch + out.shape[1:])


def _batched_function(node: FunctionNode, args: list[Any], which: list[bool], nb: int) -> Any:
    """A custom Function's forward, point by point (its code may not take batches)."""
    batch = next(np.shape(a)[:nb] for a, w in zip(args, which) if w)
    flat = [np.reshape(a, (-1,) + np.shape(a)[nb:]) if w else a for a, w in zip(args, which)]
    rows = []
    for i in range(int(np.prod(batch))):
        point = [
            wrap(f[i]) if w else (wrap(np.asarray(f)) if isinstance(f, np.ndarray) else f) for f, w in zip(flat, which)
        ]
        ctx = FunctionCtx(tuple(False for _ in point))
        out = node.function.forward(ctx, *point)
        rows.append(np.asarray(out._value if isinstance(out, Tensor) else out))
    out = np.stack(rows)
    return out.reshape(batch + out.shape[1:])
