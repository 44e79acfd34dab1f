"""Reverse-mode automatic differentiation with PyTorch's semantics.

``Tensor`` records operations; ``backward``/``grad`` run the engine;
``Function`` defines new operations; ``functional`` computes Jacobians,
Hessians and products with them.
"""

# isort: off
from .tensor import Tensor  # first: the modules below build on it

# isort: on
from .. import ops as _ops
from . import methods as _methods  # noqa: F401  (binds the functions as Tensor methods)
from .anomaly import detect_anomaly, is_anomaly_enabled
from .engine import backward, grad
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


def lazy(module: str, table: dict[str, tuple[str, str | None]]):
    """A module ``__getattr__`` (PEP 562) loading ``table``'s names on first use:
    ``{name: (relative module, attribute or None for the module itself)}``. The value is then
    stored in the module: the next read is a plain attribute."""
    import sys

    def __getattr__(name: str):
        if name not in table:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        import importlib

        where, attribute = table[name]
        value = importlib.import_module(where, module)
        value = value if attribute is None else getattr(value, attribute)
        setattr(sys.modules[module], name, value)
        return value

    return __getattr__


# Jacobians, Hessians and custom Functions load on first use: a plain evaluation needs none of them
__getattr__ = lazy(
    __name__,
    {
        "functional": (".functional", None),
        "Function": (".function", "Function"),
        "FunctionCtx": (".function", "FunctionCtx"),
    },
)

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
