"""What gradcli asks of a framework (PyTorch, JAX): the few verbs of an ``Adapter``, and the dtype
rules both adapters share."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
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


#: floating and complex dtypes by their names in PyTorch and JAX, as the precision NumPy can hold:
#: the component dtype of a complex one, float16 for bfloat16 (which NumPy lacks; the nearer of its kind)
PRECISIONS = {"float64": np.float64, "complex128": np.float64, "float32": np.float32, "complex64": np.float32,
              "float16": np.float16, "complex32": np.float16, "bfloat16": np.float16}  # fmt: skip


@dataclass
class Operations:
    """What one run of a framework's function did: its operations' names (a cast of a complex value
    to a real dtype named as "convert_element_type to float32") and the least precise floating dtype
    it computed in (float32 inside a float64 function: check judges it at float32's tolerance)."""

    names: set[str]
    precision: np.dtype

    def lower(self, dtypes: Iterable[str]) -> None:
        """Lowered to the least precise of ``dtypes`` (names as "float32", "complex64", "bfloat16")."""
        for name in dtypes:
            kind = PRECISIONS.get(name)
            if kind is not None and np.finfo(kind).eps > np.finfo(self.precision).eps:
                self.precision = np.dtype(kind)


def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def dtype_of(value: Any) -> Any:
    """float64, or complex128 for complex values (the complex step)."""
    return np.complex128 if np.iscomplexobj(value) else np.float64


def differentiable(tensor: Any) -> bool:
    return bool(tensor.is_floating_point() or tensor.is_complex())
