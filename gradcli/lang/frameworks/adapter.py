"""What gradcli asks of a framework (PyTorch, JAX): the few verbs of an ``Adapter``, and the dtype
rules both adapters share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import require


class Adapter:
    """One framework's few verbs: a forward that may keep its pullback, the pullback applied, and a
    VJP as a new function of the framework's (inputs, cotangents) for derivatives of derivatives."""

    name = ""

    def __init__(self) -> None:
        self.module = require(self.name)
        self.version = getattr(self.module, "__version__", "").split("+")[0]
        self.notes: list[str] = []  # how the numbers were made where not as asked (another mode), said once

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def forward(
        self, function: Callable[..., Any], arrays: list[Any], pullback: bool | Sequence[bool]
    ) -> tuple[list[Any], Any]:
        """The outputs, and with ``pullback`` (True, or which inputs are differentiated) what ``pull`` needs."""
        raise NotImplementedError

    def pull(self, pullback: Any, cotangents: list[Any]) -> list[Any]:
        raise NotImplementedError

    def vjp(self, function: Callable[..., Any], count: int, wanted: Sequence[bool] | None = None) -> Callable[..., Any]:
        """``wanted``: which of the ``count`` inputs are differentiated (None: all)."""
        raise NotImplementedError

    def jvp(self, function: Callable[..., Any], arrays: list[Any], tangents: list[Any]) -> list[Any]:
        raise NotImplementedError


def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def dtype_of(value: Any) -> Any:
    """float64, or complex128 for complex values (the complex step)."""
    return np.complex128 if np.iscomplexobj(value) else np.float64


def differentiable(tensor: Any) -> bool:
    return bool(tensor.is_floating_point() or tensor.is_complex())
