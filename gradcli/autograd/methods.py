"""Tensor methods: the library functions, bound (``x.sum(0)``, ``x.sin()``, ``x.T``), the operators
(``+`` and the comparisons from the operator table, ``@``, ``-x``, ``x[i]``...) and NumPy's protocols."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import ops as _ops
from ..ops.operators import OPERATORS
from . import functions as F
from . import numpy_compat as _numpy_compat
from . import record as _record
from .tensor import Tensor, normalize_index, tensor_methods

#: the library functions that are Tensor methods too (``gc.sum(x, 0)`` and ``x.sum(0)``); the package
#: exports them (``gradcli._FUNCTIONS``), with ``to`` as a method only
FUNCTION_METHODS = (
    "sum",
    "mean",
    "prod",
    "amax",
    "amin",
    "max",
    "min",
    "logsumexp",
    "norm",
    "softmax",
    "log_softmax",
    "cumsum",
    "cumprod",
    "var",
    "argmax",
    "argmin",
    "std",
    "flip",
    "dot",
    "matmul",
    "mm",
    "mv",
    "reshape",
    "flatten",
    "squeeze",
    "unsqueeze",
    "permute",
    "transpose",
    "t",
    "expand",
    "clamp",
    "clone",
    "conj",
    "outer",
    "trace",
    "diag",
    "tril",
    "triu",
    "inverse",
    "sort",
    "topk",
    "det",
    "gather",
    "index_select",
    "masked_fill",
    "narrow",
    "chunk",
    "unbind",
    "repeat",
    "argsort",
    "cross",
    "diag_embed",
    "diagonal",
    "kron",
    "roll",
    "split",
)


def _install() -> None:
    for name in (*FUNCTION_METHODS, "to"):
        setattr(Tensor, name, getattr(F, name))
    for name, fn in F.GENERATED.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
    Tensor.view = F.reshape
    Tensor.clip = F.clamp
    Tensor.astype = F.to
    Tensor.T = property(lambda self: F.permute(self, tuple(reversed(range(self.ndim)))))
    Tensor.real = property(F.real)
    Tensor.imag = property(F.imag)
    Tensor.mT = property(lambda self: F.transpose(self, -2, -1))
    Tensor.float = lambda self: F.to(self, np.float32)
    Tensor.double = lambda self: F.to(self, np.float64)
    Tensor.long = lambda self: F.to(self, np.int64)
    Tensor.int = lambda self: F.to(self, np.int32)
    Tensor.bool = lambda self: F.to(self, np.bool_)
    Tensor.expand_as = lambda self, other: F.expand(self, other.shape)
    Tensor.view_as = lambda self, other: F.reshape(self, other.shape)
    Tensor.reshape_as = Tensor.view_as
    Tensor.add = lambda self, other, alpha=1: self + (other if alpha == 1 else other * alpha)
    Tensor.sub = lambda self, other, alpha=1: self - (other if alpha == 1 else other * alpha)


def _operator(prim: Any, reflected: bool) -> Any:
    """``t + u`` (or, reflected, ``2 + t``): the operator's primitive, recorded."""
    if reflected:

        def method(self: Tensor, other: Any) -> Any:
            return _record.binary(prim, other, self)
    else:

        def method(self: Tensor, other: Any) -> Any:
            return _record.binary(prim, self, other)

    return method


def _install_operators() -> None:
    """The operators' methods (``__add__``, ``__radd__``, ``__lt__``...), from the operator table."""
    for row in OPERATORS:
        if not row.method or row.primitive is None or not row.primitive.elementwise:
            continue  # "@" picks among three primitives: Tensor.__matmul__ does that
        setattr(Tensor, row.method, _operator(row.primitive, False))
        if row.reflected:
            setattr(Tensor, "__r" + row.method[2:], _operator(row.primitive, True))


def _pow(self: Tensor, exponent: Any) -> Any:
    return self**exponent


@tensor_methods
class TensorOperators:
    """The operators that are not rows of the operator table, indexing, and NumPy's protocols."""

    def __matmul__(self, other: Any) -> Any:
        return _record.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return _record.matmul(other, self)

    def __neg__(self) -> Tensor:
        return _record.unary(_ops.NEG, self)

    def __abs__(self) -> Tensor:
        return _record.unary(_ops.ABS, self)

    def __and__(self, other: Any) -> Any:
        return _record.binary(_ops.LOGICAL_AND, self, other)

    __rand__ = __and__

    def __or__(self, other: Any) -> Any:
        return _record.binary(_ops.LOGICAL_OR, self, other)

    __ror__ = __or__

    def __invert__(self) -> Tensor:
        return _record.unary(_ops.LOGICAL_NOT, self)

    def __getitem__(self, index: Any) -> Tensor:
        return _record.getitem(self, normalize_index(index))

    # NumPy interoperability: rules written with NumPy run on tensors

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return _numpy_compat.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _numpy_compat.array_function(func, args, kwargs)


_install()
_install_operators()
Tensor.pow = _pow
