"""The tensor functions the language computes with, looked up by name (``gc.sin``, ``gc.tensor``, ...).

They are what ``import gradcli as gc`` offers, gathered here from autograd: lang lies below the
package face and must not import it.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from types import SimpleNamespace
from typing import Any

from ..autograd import Tensor, arrays, backward, enable_grad, factory, functions, grad, no_grad, set_grad_enabled


def _defined_in(module: Any) -> dict[str, Any]:
    return {
        name: value
        for name, value in vars(module).items()
        if not name.startswith("_") and callable(value) and getattr(value, "__module__", None) == module.__name__
    }


gc = SimpleNamespace(
    **{
        **_defined_in(factory),
        **_defined_in(arrays),
        **_defined_in(functions),
        **functions.GENERATED,
        "concatenate": functions.concatenate,
        "Tensor": Tensor,
        "backward": backward,
        "enable_grad": enable_grad,
        "grad": grad,
        "no_grad": no_grad,
        "set_grad_enabled": set_grad_enabled,
    }
)


def input_tensors(values: Mapping[str, Any], wrt: Container[str]) -> dict[str, Tensor]:
    """A program's inputs as named tensors, those in ``wrt`` requiring grad; a Tensor is used as is
    (it may be a leaf of an outer computation, as ``jacobian_blocks`` gives)."""
    inputs: dict[str, Tensor] = {}
    for name, value in values.items():
        t = value if isinstance(value, Tensor) else gc.tensor(value)
        if name in wrt and not t.requires_grad:
            t.requires_grad_(True)
        t.name = name
        inputs[name] = t
    return inputs
