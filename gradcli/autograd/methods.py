"""Tensor methods: the library functions, bound (``x.sum(0)``, ``x.sin()``, ``x.T``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import functions as F
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


def _pow(self: Tensor, exponent: Any) -> Any:
    return self**exponent


_install()
Tensor.pow = _pow
