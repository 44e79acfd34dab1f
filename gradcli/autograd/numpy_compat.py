"""NumPy calls on tensors: ``np.cos(t)``, ``np.sum(t, axis=0)``, ``ndarray * t``.

Derivative rules are written with NumPy; when ``create_graph=True`` they run
on tensors, and NumPy hands the call back here (``__array_ufunc__`` and
``__array_function__``), which records it in the graph. Ufuncs map to the
primitives that declare them in the table; other NumPy functions that rules use
are listed below. Anything else is computed on plain values, and refuses to
silently drop a gradient.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ops import PRIMITIVES
from . import functions as F
from . import grad_mode as _grad_mode
from .record import apply, binary, matmul, unary
from .tensor import Tensor, unwrap, wrap

UFUNCS = {ufunc: prim for prim in PRIMITIVES.values() for ufunc in prim.numpy}
_EXTRA_UFUNCS = {
    np.square: lambda x: binary(PRIMITIVES["mul"], x, x),
    np.reciprocal: lambda x: binary(PRIMITIVES["div"], 1.0, x),
    np.positive: lambda x: x,
}


def _refuse(name: str) -> Any:
    raise TypeError(f"{name} has no derivative rule in gradcli; apply it to tensor.detach() if no gradient should flow")


def _requires_grad(args: Any) -> bool:
    for a in args:
        if isinstance(a, Tensor) and a._edge is not None:
            return True
        if isinstance(a, (list, tuple)) and _requires_grad(a):
            return True
    return False


def array_ufunc(ufunc: Any, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if method == "__call__" and not kwargs:
        if ufunc is np.matmul:
            return matmul(*inputs)
        prim = UFUNCS.get(ufunc)
        if prim is not None:
            if prim.arity == 1:
                return unary(prim, inputs[0])
            if prim.arity == 2:
                return binary(prim, *inputs)
            return apply(prim, inputs)
        extra = _EXTRA_UFUNCS.get(ufunc)
        if extra is not None and len(inputs) == 1:
            return extra(inputs[0])
    return _on_values(getattr(ufunc, method), ufunc.__name__, inputs, kwargs)


def _on_values(fn: Any, name: str, args: Any, kwargs: dict[str, Any]) -> Any:
    """Compute on plain values; the result carries no gradient, so refuse if one was needed."""
    if "out" in kwargs:
        kwargs = dict(
            kwargs,
            out=tuple(unwrap(o) for o in kwargs["out"]) if isinstance(kwargs["out"], tuple) else unwrap(kwargs["out"]),
        )
    result = fn(*unwrap(list(args)), **kwargs)
    if "out" in kwargs:
        return result
    if _grad_mode.state.enabled and _requires_grad(args) and np.result_type(result).kind in "fc":
        _refuse(f"numpy.{name}")
    return wrap(result) if isinstance(result, (np.ndarray, np.generic)) else result


def _sum_like(fn: Any) -> Any:
    def handler(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, **_: Any) -> Any:
        return fn(a, axis=axis, keepdims=keepdims)

    return handler


def _reshape(a: Any, newshape: Any = None, order: str = "C", *, shape: Any = None, **_: Any) -> Any:
    target = shape if shape is not None else newshape
    return F.reshape(a, tuple(target) if isinstance(target, (tuple, list)) else (target,))


def _transpose(a: Any, axes: Any = None) -> Any:
    a = F.as_tensor(a)
    return F.permute(a, tuple(reversed(range(a.ndim))) if axes is None else tuple(axes))


def _swapaxes(a: Any, axis1: int, axis2: int) -> Any:
    return F.transpose(a, axis1, axis2)


def _expand_dims(a: Any, axis: Any) -> Any:
    a = F.as_tensor(a)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    ndim = a.ndim + len(axes)
    where = {ax % ndim for ax in axes}
    it = iter(a.shape)
    return F.reshape(a, tuple(1 if i in where else next(it) for i in range(ndim)))


def _where(condition: Any, x: Any = None, y: Any = None) -> Any:
    if x is None and y is None:
        return np.where(np.asarray(condition))
    return F.where(condition, x, y)


def _constant_like(fill: Any) -> Any:
    def handler(a: Any, dtype: Any = None, order: Any = "K", subok: bool = True, shape: Any = None, **_: Any) -> Any:
        value = np.asarray(unwrap(a))
        return wrap(fill(value if shape is None else np.empty(shape, value.dtype), dtype))

    return handler


HANDLERS: dict[Any, Any] = {
    np.sum: _sum_like(F.sum),
    np.mean: _sum_like(F.mean),
    np.prod: _sum_like(F.prod),
    np.max: _sum_like(F.amax),
    np.amax: _sum_like(F.amax),
    np.min: _sum_like(F.amin),
    np.amin: _sum_like(F.amin),
    np.reshape: _reshape,
    np.transpose: _transpose,
    np.swapaxes: _swapaxes,
    np.expand_dims: _expand_dims,
    np.squeeze: lambda a, axis=None: F.squeeze(a, axis),
    np.broadcast_to: lambda array, shape, subok=False: F.broadcast_to(
        array, tuple(shape) if not isinstance(shape, int) else (shape,)
    ),
    np.where: _where,
    np.stack: lambda arrays, axis=0, **_: F.stack(arrays, axis),
    np.concatenate: lambda arrays, axis=0, **_: F.cat(arrays, axis),
    np.dot: lambda a, b, out=None: (
        F.matmul(a, b) if np.ndim(unwrap(a)) and np.ndim(unwrap(b)) else binary(PRIMITIVES["mul"], a, b)
    ),
    np.clip: lambda a, a_min=None, a_max=None, **kw: F.clamp(a, kw.get("min", a_min), kw.get("max", a_max)),
    np.zeros_like: _constant_like(lambda v, dtype: np.zeros_like(v, dtype=dtype)),
    np.ones_like: _constant_like(lambda v, dtype: np.ones_like(v, dtype=dtype)),
    np.empty_like: _constant_like(lambda v, dtype: np.zeros_like(v, dtype=dtype)),
    np.shape: lambda a: a.shape,
    np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: a.numel() if axis is None else a.shape[axis],
    np.copy: lambda a, **_: F.clone(a),
}


def array_function(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    handler = HANDLERS.get(func)
    if handler is not None:
        return handler(*args, **kwargs)
    return _on_values(func, func.__name__, args, kwargs)
