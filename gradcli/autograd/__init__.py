"""Reverse-mode automatic differentiation with PyTorch's semantics.

``Tensor`` records operations; ``backward``/``grad`` run the engine;
``Function`` defines new operations; ``functional`` computes Jacobians,
Hessians and products with them.
"""

from typing import Any

from .. import ops as _ops

# Tensor's methods that need the graph, defined by the modules above tensor.py (tensor_methods):
from . import inplace as _inplace  # noqa: F401  (in-place changes: add_, x[i] = v, copy_...)
from . import methods as _methods  # noqa: F401  (the functions, the operators, NumPy's protocols)
from . import place as _place  # noqa: F401  (the place in the graph: requires_grad, grad_fn, backward...)
from .anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly  # noqa: F401 (exported: __all__)
from .engine import backward, grad  # noqa: F401 (exported: __all__)
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401 (exported: __all__)
from .node import AccumulateGrad, Node
from .record import apply
from .tensor import Tensor


def _bind(prim, inputs, params):
    """How a primitive called from a rule evaluates: recorded when a tensor is involved."""
    items = inputs[0] if prim.arity < 0 else inputs
    if any(isinstance(x, Tensor) for x in items):
        return apply(prim, items, tuple(params))
    return prim.forward(*inputs, *params)


_ops.set_binding(_bind)


def lazy(namespace: dict[str, Any], table: dict[str, tuple[str, str | None]]) -> None:
    """Give the module whose globals are ``namespace`` a ``__getattr__`` and ``__dir__`` (PEP 562)
    that load ``table``'s names on first use: ``{name: (relative module, attribute or None for
    the module itself)}``. The value is then stored in the module (the next read is a plain
    attribute). Any other name that is one of the package's submodules is imported, as an
    eager import of the package used to load them (``gc.autograd.function.once_differentiable``)."""
    module = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        import importlib

        if name in table:
            where, attribute = table[name]
            value = importlib.import_module(where, module)
            value = value if attribute is None else getattr(value, attribute)
        elif not name.startswith("__") and "__path__" in namespace:
            try:
                value = importlib.import_module(f"{module}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{module}.{name}":
                    raise  # the submodule exists and needs something that is missing
                raise AttributeError(f"module {module!r} has no attribute {name!r}") from None
        else:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    namespace["__getattr__"] = __getattr__
    namespace["__dir__"] = __dir__


# Jacobians, Hessians and custom Functions load on first use: a plain evaluation needs none of them
lazy(
    globals(),
    {
        "functional": (".functional", None),
        "Function": (".function", "Function"),
        "FunctionCtx": (".function", "FunctionCtx"),
    },
)

#: what the ``gradcli`` package exports from here too (``gc.grad``, ``gc.no_grad``...)
LIBRARY = (
    "Tensor",
    "backward",
    "detect_anomaly",
    "enable_grad",
    "grad",
    "is_anomaly_enabled",
    "is_grad_enabled",
    "no_grad",
    "set_grad_enabled",
)
__all__ = ["functional", "AccumulateGrad", "Function", "FunctionCtx", "Node", "set_detect_anomaly", *LIBRARY]
