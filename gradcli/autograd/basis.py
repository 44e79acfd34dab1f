"""The identity basis of a Jacobian, kept diagonal for as long as it stays diagonal.

A Jacobian starts from the identity: every basis vector at once, as a batch.
Dense, that is an n x n array, and the first matrix product costs n^3. Kept
as a per-element scale (``ScaledIdentity``), it survives elementwise
products (``g * cos(x)``) as a scale and turns ``diag(s) @ A`` into
``s[:, None] * A`` (n^2). Anything else gets the dense array (``__array__``),
so every rule still sees a correct value; the shortcut only ever saves work.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class ScaledIdentity:
    """The batch ``B[k] = scale.flat[k] * e_k`` (reshaped to ``shape``): dense, ``diag(scale)``."""

    __array_priority__ = 2000

    def __init__(self, scale: np.ndarray) -> None:
        self.scale = np.asarray(scale)

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.scale.size, *self.scale.shape)

    @property
    def ndim(self) -> int:
        return self.scale.ndim + 1

    @property
    def dtype(self) -> np.dtype:
        return self.scale.dtype

    @property
    def size(self) -> int:
        return self.scale.size**2

    def dense(self) -> np.ndarray:
        n = self.scale.size
        out = np.zeros((n, n), dtype=self.scale.dtype)
        out[np.arange(n), np.arange(n)] = self.scale.reshape(-1)
        return out.reshape(self.shape)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        dense = self.dense()
        return dense if dtype is None else dense.astype(dtype)

    def _fits(self, other: Any) -> bool:
        """``other`` broadcasts against one basis element without touching the batch axis."""
        if isinstance(other, (int, float, complex, np.number)):
            return True
        if isinstance(other, np.ndarray):
            if other.ndim > self.scale.ndim:
                return False
            try:
                return np.broadcast_shapes(other.shape, self.scale.shape) == self.scale.shape
            except ValueError:
                return False
        return False

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and not kwargs:
            if ufunc is np.multiply and len(inputs) == 2:
                a, b = inputs
                other = b if a is self else a
                if isinstance(other, ScaledIdentity) and other.shape == self.shape:
                    return ScaledIdentity(self.scale * other.scale)
                if self._fits(other):
                    return ScaledIdentity(self.scale * other)
            if ufunc is np.true_divide and inputs[0] is self and self._fits(inputs[1]):
                return ScaledIdentity(self.scale / inputs[1])
            if ufunc is np.negative:
                return ScaledIdentity(-self.scale)
            if ufunc in (np.add, np.subtract) and len(inputs) == 2:
                a, b = inputs
                if isinstance(a, ScaledIdentity) and isinstance(b, ScaledIdentity) and a.shape == b.shape:
                    return ScaledIdentity(ufunc(a.scale, b.scale))
            if ufunc is np.matmul and inputs[0] is self:
                return self._matmul(inputs[1])
        dense = [np.asarray(x) if isinstance(x, ScaledIdentity) else x for x in inputs]
        return getattr(ufunc, method)(*dense, **kwargs)

    def _matmul(self, other: Any) -> Any:
        other = np.asarray(other)
        if self.scale.ndim == 1 and other.ndim == 2:  # row k of diag(s) @ A is s_k A[k]
            return self.scale[:, None] * other
        return np.asarray(self) @ other

    def __mul__(self, other: Any) -> Any:
        return self.__array_ufunc__(np.multiply, "__call__", self, other)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Any:
        return self.__array_ufunc__(np.true_divide, "__call__", self, other)

    def __neg__(self) -> Any:
        return ScaledIdentity(-self.scale)

    def __add__(self, other: Any) -> Any:
        return self.__array_ufunc__(np.add, "__call__", self, other)

    def __radd__(self, other: Any) -> Any:
        return self.__array_ufunc__(np.add, "__call__", other, self)

    def __sub__(self, other: Any) -> Any:
        return self.__array_ufunc__(np.subtract, "__call__", self, other)

    def __matmul__(self, other: Any) -> Any:
        return self._matmul(other)

    def __rmatmul__(self, other: Any) -> Any:
        return np.asarray(other) @ np.asarray(self)

    # anything else a rule may ask of an array: the dense array answers
    def __getattr__(self, name: str) -> Any:
        return getattr(self.dense(), name)

    def __getitem__(self, index: Any) -> Any:
        return self.dense()[index]

    def __len__(self) -> int:
        return self.scale.size

    def __repr__(self) -> str:
        return f"ScaledIdentity(shape={self.shape})"


def identity(shape: tuple[int, ...], dtype: Any = np.float64) -> ScaledIdentity:
    """Every basis vector of a value of ``shape``, as one (lazy) batch."""
    return ScaledIdentity(np.ones(shape, dtype=dtype))
