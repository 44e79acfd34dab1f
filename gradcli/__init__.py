"""gradcli: compute, check and see derivatives, from a shell or from Python.

The library follows PyTorch's autograd semantics on NumPy arrays:

>>> import gradcli as gc
>>> x = gc.tensor(2.0, requires_grad=True)
>>> w = gc.tensor(1.0, requires_grad=True)
>>> y = (x + w) * (w + 1)
>>> y.backward()
>>> w.grad
tensor(5.)
>>> y.grad_fn
<MulBackward0 object at ...>
"""

import gc as _gc

if _gc.isenabled():  # start-up: no cycle collections while NumPy and the engine load (nothing to free)
    _gc.disable()
    try:
        from . import autograd
    finally:
        _gc.enable()

from . import autograd, functional
from .autograd import (
    Function,
    Tensor,
    backward,
    detect_anomaly,
    enable_grad,
    grad,
    is_anomaly_enabled,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from .autograd import factory as _factory
from .autograd import functions as _functions
from .autograd import linalg as linalg
from .autograd.contract import einsum as einsum
from .autograd.contract import tensordot as tensordot

__version__ = "0.1.0"

_FACTORIES = (
    "arange",
    "bool",
    "complex64",
    "complex128",
    "double",
    "eye",
    "float32",
    "float64",
    "from_numpy",
    "full",
    "int8",
    "int16",
    "int32",
    "int64",
    "long",
    "full_like",
    "linspace",
    "manual_seed",
    "ones",
    "ones_like",
    "rand",
    "rand_like",
    "randn",
    "randn_like",
    "tensor",
    "uint8",
    "zeros",
    "zeros_like",
)
_FUNCTIONS = (
    "det",
    "solve",
    "sort",
    "topk",
    "inv",
    "inverse",
    "diag",
    "outer",
    "trace",
    "tril",
    "triu",
    "amax",
    "amin",
    "argmax",
    "argmin",
    "as_tensor",
    "broadcast_to",
    "cat",
    "clamp",
    "clone",
    "concatenate",
    "conj",
    "cumprod",
    "cumsum",
    "detach",
    "dot",
    "expand",
    "flatten",
    "flip",
    "imag",
    "log_softmax",
    "logsumexp",
    "matmul",
    "max",
    "mean",
    "min",
    "mm",
    "mv",
    "norm",
    "permute",
    "prod",
    "real",
    "reshape",
    "softmax",
    "squeeze",
    "stack",
    "std",
    "sum",
    "t",
    "transpose",
    "unsqueeze",
    "var",
    "where",
    "gather",
    "index_select",
    "masked_fill",
    "narrow",
    "chunk",
    "unbind",
    "repeat",
)

# Factories, the functions written over the table, and every elementwise primitive of
# the table (gc.sin, gc.atan2, ...), which ``functions`` generates.
globals().update({name: getattr(_factory, name) for name in _FACTORIES})
globals().update({name: getattr(_functions, name) for name in _FUNCTIONS})
globals().update(_functions.GENERATED)


def __getattr__(name: str):  # loaded on first use: graphviz only for render, the checkers only for testing
    if name in ("render", "testing"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'gradcli' has no attribute {name!r}")


__all__ = [
    "Function",
    "functional",
    "Tensor",
    "autograd",
    "backward",
    "detect_anomaly",
    "enable_grad",
    "grad",
    "is_anomaly_enabled",
    "is_grad_enabled",
    "no_grad",
    "set_grad_enabled",
    "testing",
    *_FACTORIES,
    *_FUNCTIONS,
    *sorted(_functions.GENERATED),
]
