"""Reverse-mode automatic differentiation with PyTorch's semantics.

``Tensor`` records operations; ``backward``/``grad`` run the engine;
``Function`` defines new operations; ``functional`` computes Jacobians,
Hessians and products with them.
"""

# isort: off
from .tensor import Tensor  # first: the modules below build on it

# isort: on
from .. import ops as _ops
from . import functional
from . import methods as _methods  # noqa: F401  (binds the functions as Tensor methods)
from .anomaly import detect_anomaly, is_anomaly_enabled
from .engine import backward, grad
from .function import Function, FunctionCtx
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .node import AccumulateGrad, Node
from .record import apply


def _bind(prim, inputs, params):
    """How a primitive called from a rule evaluates: recorded when a tensor is involved."""
    items = inputs[0] if prim.arity < 0 else inputs
    if any(isinstance(x, Tensor) for x in items):
        return apply(prim, items, tuple(params))
    return prim.forward(*inputs, *params)


_ops.set_binding(_bind)

__all__ = [
    "functional",
    "AccumulateGrad",
    "Function",
    "FunctionCtx",
    "Node",
    "Tensor",
    "backward",
    "detect_anomaly",
    "enable_grad",
    "grad",
    "is_anomaly_enabled",
    "is_grad_enabled",
    "no_grad",
    "set_grad_enabled",
]
