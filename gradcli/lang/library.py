"""The tensor functions the language computes with, looked up by name (``gc.sin``, ``gc.tensor``, ...).

They are what ``import gradcli as gc`` offers, gathered here from autograd: lang lies below the
package face and must not import it.
"""

from __future__ import annotations

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
