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


class _UfuncOperators:
    """The arithmetic operators through the class's own ``__array_ufunc__`` (which keeps the
    structure where it can and falls back to the dense array), for both tangent bases."""

    __slots__ = ()

    def __mul__(self, other: Any) -> Any:
        return self.__array_ufunc__(np.multiply, "__call__", self, other)

    def __rmul__(self, other: Any) -> Any:
        return self.__array_ufunc__(np.multiply, "__call__", other, self)

    def __truediv__(self, other: Any) -> Any:
        return self.__array_ufunc__(np.true_divide, "__call__", self, other)

    def __neg__(self) -> Any:
        return self.__array_ufunc__(np.negative, "__call__", self)

    def __add__(self, other: Any) -> Any:
        return self.__array_ufunc__(np.add, "__call__", self, other)

    def __radd__(self, other: Any) -> Any:
        return self.__array_ufunc__(np.add, "__call__", other, self)

    def __sub__(self, other: Any) -> Any:
        return self.__array_ufunc__(np.subtract, "__call__", self, other)

    def __rsub__(self, other: Any) -> Any:
        return self.__array_ufunc__(np.subtract, "__call__", other, self)


class ScaledIdentity(_UfuncOperators):
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


# --- structured batches of a Hessian's forward pass ----------------------------------------------

#: More terms than this (bands + rank) and a structured batch turns dense: past it the terms cost
#: more than the dense array they stand for.
MAX_TERMS = 24


class Structured(_UfuncOperators):
    """A batch of ``n`` tangents of a vector of ``m`` values, kept as its structure.

    ``B[k, j] = sum_o bands[o][j] * (k == j + o)  +  (U @ V)[k, j]``: shifted diagonals (an
    identity, sliced as ``x[1:]`` or ``x[:-1]``, scattered back, scaled elementwise) plus a low-rank
    part (``U`` of shape (n, r), ``V`` of shape (r, m): a scalar's tangent spread over a vector).
    The band entries whose row ``j + o`` falls outside ``0..n-1`` are zero. Elementwise products
    by values, sums, slices, scatters, sums over the values and inner products keep the structure;
    anything else gets the dense array (``__array__``), so every rule still sees a correct value.
    """

    __array_priority__ = 2000

    def __init__(self, n: int, m: int, bands: dict[int, np.ndarray], U: np.ndarray | None, V: np.ndarray | None):
        self.n, self.m, self.bands, self.U, self.V = n, m, bands, U, V

    @classmethod
    def identity(cls, n: int, dtype: Any = np.float64) -> Structured:
        return cls(n, n, {0: np.ones(n, dtype=dtype)}, None, None)

    @classmethod
    def spread(cls, t: np.ndarray) -> Structured:
        """The tangents ``t`` (n, 1) of a one-element value, as the rank-1 part ``t @ [[1]]``."""
        return cls(t.shape[0], 1, {}, t.reshape(-1, 1), np.ones((1, 1), dtype=t.dtype))

    # array protocol
    @property
    def shape(self) -> tuple[int, ...]:
        return (self.n, self.m)

    ndim = 2

    @property
    def dtype(self) -> np.dtype:
        parts = [*self.bands.values(), *([] if self.U is None else [self.U, self.V])]
        return np.result_type(*parts) if parts else np.dtype(np.float64)

    @property
    def size(self) -> int:
        return self.n * self.m

    def __len__(self) -> int:
        return self.n

    def terms(self) -> int:
        return len(self.bands) + (0 if self.U is None else self.U.shape[1])

    def dense(self) -> np.ndarray:
        out = np.zeros((self.n, self.m), dtype=self.dtype)
        for o, d in self.bands.items():
            j = np.arange(max(0, -o), min(self.m, self.n - o))
            out[j + o, j] += d[j]
        if self.U is not None:
            out += self.U @ self.V
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        dense = self.dense()
        return dense if dtype is None else dense.astype(dtype)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.dense(), name)

    def __getitem__(self, index: Any) -> Any:
        return self.dense()[index]

    def __repr__(self) -> str:
        rank = 0 if self.U is None else self.U.shape[1]
        return f"Structured(shape={self.shape}, bands={sorted(self.bands)}, rank={rank})"

    def finite(self) -> bool:
        parts = [*self.bands.values(), *([] if self.U is None else [self.U, self.V])]
        return all(np.isfinite(p).all() for p in parts)

    # what keeps the structure
    def _scaled(self, w: Any, op: Any) -> Any:
        """``op(self, w)`` for a value ``w`` that broadcasts along the values (``multiply``, ``true_divide``)."""
        scalar = w if isinstance(w, (int, float)) else None  # kept: NumPy's weak Python scalar keeps float32
        w = np.asarray(w)
        if w.ndim > 1 or (w.ndim == 1 and w.shape[0] not in (1, self.m) and self.m != 1):
            return NotImplemented
        if w.dtype.kind not in "biuf" or not np.isfinite(w).all():
            return NotImplemented  # 0 * inf and NaNs spread as the dense array spreads them
        m = self.m if w.ndim == 0 else max(self.m, w.shape[0])
        if scalar is not None:
            w = scalar
        bands = self.bands
        if m != self.m:  # a one-element value spread over m values: bands become rank-1 terms
            if bands:
                return NotImplemented
            return Structured(self.n, m, {}, self.U, op(self.V, w))
        bands = {o: op(d, w) for o, d in bands.items()}
        return Structured(self.n, m, bands, self.U, None if self.V is None else op(self.V, w))

    def _plus(self, other: Structured, sign: float) -> Any:
        if other.shape != self.shape:
            return NotImplemented
        bands = dict(self.bands)
        for o, d in other.bands.items():
            bands[o] = bands[o] + sign * d if o in bands else sign * d
        if self.U is None:
            U, V = other.U, None if other.V is None else sign * other.V
        elif other.U is None:
            U, V = self.U, self.V
        else:
            U, V = np.concatenate([self.U, other.U], axis=1), np.concatenate([self.V, sign * other.V], axis=0)
        result = Structured(self.n, self.m, bands, U, V)
        return result if result.terms() <= MAX_TERMS else result.dense()

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        result = NotImplemented
        if method == "__call__" and not kwargs:
            if ufunc is np.multiply and len(inputs) == 2:
                a, b = inputs
                other = b if a is self else a
                if not isinstance(other, (Structured, ScaledIdentity)):
                    result = self._scaled(other, np.multiply)
            elif ufunc is np.true_divide and inputs[0] is self and not isinstance(inputs[1], Structured):
                result = self._scaled(inputs[1], np.true_divide)
            elif ufunc is np.negative:
                result = Structured(self.n, self.m, {o: -d for o, d in self.bands.items()}, self.U,
                                    None if self.V is None else -self.V)  # fmt: skip
            elif ufunc in (np.add, np.subtract) and len(inputs) == 2:
                a, b = inputs
                if isinstance(a, Structured) and isinstance(b, Structured):
                    result = a._plus(b, 1.0 if ufunc is np.add else -1.0)
        if result is NotImplemented:
            dense = [np.asarray(x) if isinstance(x, (Structured, ScaledIdentity)) else x for x in inputs]
            return getattr(ufunc, method)(*dense, **kwargs)
        return result

    # structure-keeping operations on the value axis
    def sliced(self, start: int, stop: int) -> Structured:
        """``B[:, start:stop]``: row ``k`` of band ``o`` at value ``j`` moves to value ``j - start``."""
        bands = {o + start: d[start:stop] for o, d in self.bands.items()}
        V = None if self.V is None else self.V[:, start:stop]
        return Structured(self.n, stop - start, bands, self.U, V)

    def scattered(self, start: int, size: int) -> Structured:
        """Zeros of ``size`` values with ``B`` added at ``start:start + m`` (the adjoint of ``sliced``)."""
        pad = (start, size - start - self.m)
        bands = {o - start: np.pad(d, pad) for o, d in self.bands.items()}
        V = None if self.V is None else np.pad(self.V, ((0, 0), pad))
        return Structured(self.n, size, bands, self.U, V)

    def summed(self) -> np.ndarray:
        """``B.sum(axis=1)``: the tangents of the sum of the values."""
        return self.inner(None)

    def inner(self, b: np.ndarray | None) -> np.ndarray:
        """``B @ b`` (``b`` None: ones)."""
        dtype = self.dtype if b is None else np.result_type(self.dtype, b)
        out = np.zeros(self.n, dtype=dtype)
        for o, d in self.bands.items():
            lo, hi = max(0, -o), min(self.m, self.n - o)
            out[lo + o : hi + o] += d[lo:hi] if b is None else d[lo:hi] * b[lo:hi]
        if self.U is not None:
            out += self.U @ (self.V.sum(axis=1) if b is None else self.V @ b)
        return out


def _one_slice(index: Any, size: int) -> tuple[int, int] | None:
    """``(start, stop)`` of an index that is one slice with step 1 of ``size`` values, else None."""
    if isinstance(index, tuple) and len(index) == 1:
        index = index[0]
    if not isinstance(index, slice):
        return None
    start, stop, step = index.indices(size)
    return (start, max(start, stop)) if step == 1 else None


def _vector_axis(axis: Any) -> bool:
    return axis is None or axis in (0, -1, (0,), (-1,))


def _of_vector(t: Any, values: list[Any]) -> bool:
    """A ``Structured`` tangent of a 1-D first input."""
    return isinstance(t, Structured) and np.ndim(values[0]) == 1


def _getitem(tangents: tuple[Any, ...], values: list[Any], params: tuple[Any, ...]) -> Any:
    t = tangents[0]
    span = _one_slice(params[0], t.m) if _of_vector(t, values) else None
    return NotImplemented if span is None else t.sliced(*span)


def _scatter(tangents: tuple[Any, ...], values: list[Any], params: tuple[Any, ...]) -> Any:
    t = tangents[0]
    if not _of_vector(t, values):
        return NotImplemented
    index, shape, nbatch = params
    span = None if nbatch or len(shape) != 1 else _one_slice(index, shape[0])
    if span is None or span[1] - span[0] != t.m:
        return NotImplemented
    return t.scattered(span[0], shape[0])


def _sum(tangents: tuple[Any, ...], values: list[Any], params: tuple[Any, ...]) -> Any:
    t = tangents[0]
    axis, keepdims = params
    return t.summed() if _of_vector(t, values) and _vector_axis(axis) and not keepdims else NotImplemented


def _reshape(tangents: tuple[Any, ...], values: list[Any], params: tuple[Any, ...]) -> Any:
    t = tangents[0]
    return t if isinstance(t, Structured) and tuple(params[0]) == (t.m,) else NotImplemented


def _expand(tangents: tuple[Any, ...], values: list[Any], params: tuple[Any, ...]) -> Any:
    t = tangents[0]
    if not (isinstance(t, Structured) and t.m == 1 and not t.bands and len(params[0]) == 1):
        return NotImplemented
    (m,) = params[0]
    return Structured(t.n, m, {}, t.U, np.repeat(t.V, m, axis=1))


def _dot(tangents: tuple[Any, ...], values: list[Any], params: tuple[Any, ...]) -> Any:
    if not all(np.ndim(v) == 1 for v in values):
        return NotImplemented
    total = None
    for ti, other in zip(tangents, values[::-1]):
        if ti is None:
            continue
        part = ti.inner(other) if isinstance(ti, Structured) else np.asarray(ti) @ other
        total = part if total is None else total + part
    return total


#: the primitives whose tangent keeps a ``Structured`` batch: name -> rule(tangents, values, params)
_STRUCTURED_RULES = {
    "getitem": _getitem,
    "scatter": _scatter,
    "sum": _sum,
    "reshape": _reshape,
    "expand": _expand,
    "dot": _dot,
}


def structured_tangent(name: str, tangents: tuple[Any, ...], out: Any, values: list[Any], params: tuple[Any, ...]):
    """The output's tangent of primitive ``name`` where it keeps a ``Structured`` batch (1-D values);
    ``NotImplemented`` where it does not (the caller densifies)."""
    rule = _STRUCTURED_RULES.get(name)
    return NotImplemented if rule is None else rule(tangents, values, params)
