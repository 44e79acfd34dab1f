"""Tensor methods: the library functions, bound (``x.sum(0)``, ``x.sin()``, ``x.T``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ops.operators import OPERATORS
from . import functions as F
from . import record as _record
from .tensor import Tensor

_METHODS = (
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
    "to",
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
    for name in _METHODS:
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


_install()
_install_operators()
Tensor.pow = _pow
