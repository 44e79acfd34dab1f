"""The library's functions: PyTorch's signatures over the primitive table.

Elementwise primitives become functions (``gradcli.sin``, ``gradcli.atan2``)
and methods (``x.sin()``) straight from the table; functions with axes,
shapes or several forms (``sum(x, dim)``, ``max(x)`` vs ``max(a, b)``) are
written here, each a few lines over a primitive.
"""

from __future__ import annotations

import math
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import ops
from ..ops import PRIMITIVES
from ..ops import order as ops_order
from ..ops.shape import PickIndex
from .record import apply, binary, matmul_mismatch, unary
from .record import matmul as _matmul
from .tensor import MinMax, Tensor, as_value, mark_complex, note_view, storage_root, wrap


def as_tensor(x: Any) -> Tensor:
    """``x`` itself if it is a tensor, else a constant tensor of its values."""
    return x if isinstance(x, Tensor) else wrap(as_value(x))


def wrap_dim(dim: Any, ndim: int) -> int:
    """``dim`` as an index in ``range(ndim)``; out of range is PyTorch's IndexError (a 0-d
    tensor accepts 0 and -1), never a silent wrap-around."""
    d = int(dim)
    n = ndim if ndim > 0 else 1  # (max is gradcli's max in this module)
    if not -n <= d < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d % n


def _dims(dim: Any, ndim: int) -> tuple[int, ...] | None:
    """Axes as negative offsets from the end, so rules stay valid with batch axes."""
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    if ndim == 0:  # PyTorch accepts 0 and -1 on a 0-d tensor
        for d in dims:
            if d not in (0, -1):
                raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {d})")
        return None
    out = set()
    for d in dims:
        d = int(d)
        if not -ndim <= d < ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {d})")
        if (d - ndim if d >= 0 else d) in out:
            raise RuntimeError(f"dim {d % ndim} appears multiple times in the list of dims")
        out.add(d - ndim if d >= 0 else d)
    return tuple(sorted(out))


def _reduce(prim: Any, x: Any, dim: Any, keepdim: bool, axis: Any, keepdims: Any) -> Tensor:
    x = as_tensor(x)
    dim = axis if dim is None else dim
    keepdim = bool(keepdims) if keepdims is not None else keepdim
    return apply(prim, (x,), (_dims(dim, x.ndim), keepdim))


def sum(x: Any, dim: Any = None, keepdim: bool = False, *, axis: Any = None, keepdims: Any = None) -> Tensor:  # noqa: A001
    """Sum of the elements, over ``dim`` (an int or a tuple) or all of them."""
    return _reduce(ops.SUM, x, dim, keepdim, axis, keepdims)


def mean(x: Any, dim: Any = None, keepdim: bool = False, *, axis: Any = None, keepdims: Any = None) -> Tensor:
    return _reduce(ops.MEAN, x, dim, keepdim, axis, keepdims)


def prod(x: Any, dim: Any = None, keepdim: bool = False, *, axis: Any = None, keepdims: Any = None) -> Tensor:
    return _reduce(ops.PROD, x, dim, keepdim, axis, keepdims)


def amax(x: Any, dim: Any = None, keepdim: bool = False, *, axis: Any = None, keepdims: Any = None) -> Tensor:
    x = as_tensor(x)
    _check_nonempty("amax", x, axis if dim is None else dim)
    return _reduce(ops.AMAX, x, dim, keepdim, axis, keepdims)


def amin(x: Any, dim: Any = None, keepdim: bool = False, *, axis: Any = None, keepdims: Any = None) -> Tensor:
    x = as_tensor(x)
    _check_nonempty("amin", x, axis if dim is None else dim)
    return _reduce(ops.AMIN, x, dim, keepdim, axis, keepdims)


def _check_nonempty(name: str, x: Tensor, dim: Any) -> None:
    """PyTorch's refusals of a largest or smallest element of nothing (NumPy's ValueError otherwise)."""
    if x.numel() != 0:
        return
    if dim is None:
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim "
            "with the 'dim' argument."
        )
    for d in _dims(dim, x.ndim) or range(x.ndim):
        if x.ndim and x.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d % x.ndim} to have non-zero size.")


def _extreme(prim: Any, pair: Any, arg: Any, x: Any, dim: Any, keepdim: bool) -> Any:
    if dim is not None and not isinstance(dim, (int, np.integer)):
        return binary(pair, x, dim)  # max(a, b): elementwise
    x = as_tensor(x)
    _check_nonempty("max" if prim is ops.AMAX else "min", x, dim)
    if dim is None:
        return _reduce(prim, x, None, False, None, None)
    v = np.asarray(x._value)
    if v.ndim == 0 or v.size == 0 or v.dtype.kind == "c":
        values = _reduce(prim, x, dim, keepdim, None, None)
        indices = arg(v, axis=int(dim), keepdims=keepdim)
        return MinMax(values, wrap(np.asarray(indices, dtype=np.int64)))
    axis = wrap_dim(dim, v.ndim)
    indices = np.asarray(arg(v, axis=axis, keepdims=keepdim), dtype=np.int64)
    # the values are the elements at the indices returned: the gradient goes to that one element
    # (PyTorch's rule for max(dim); max(x) and amax share it among ties)
    picked = indices if keepdim else np.expand_dims(indices, axis)
    grid = list(np.indices(picked.shape, sparse=True))
    grid[axis] = picked
    if not keepdim:
        grid = [np.squeeze(g, axis) for g in grid]
    index = PickIndex(grid)
    index.op = "max" if prim is ops.AMAX else "min"
    values = apply(ops.GETITEM, (x,), (index,))
    return (_MAX if prim is ops.AMAX else _MIN)(values, wrap(indices))


# what max(x, dim) / min(x, dim) return, named as PyTorch's torch.return_types.max / min
_MAX = namedtuple("max", ["values", "indices"])
_MIN = namedtuple("min", ["values", "indices"])


def max(x: Any, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:  # noqa: A001
    """``max(x)``: largest element; ``max(x, dim)``: (values, indices); ``max(a, b)``: elementwise.
    ``axis`` is ``dim`` as NumPy spells it (PyTorch accepts it too)."""
    return _extreme(ops.AMAX, ops.MAXIMUM, np.argmax, x, axis if dim is None else dim, keepdim)


def min(x: Any, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:  # noqa: A001
    """``min(x)``: smallest element; ``min(x, dim)``: (values, indices); ``min(a, b)``: elementwise."""
    return _extreme(ops.AMIN, ops.MINIMUM, np.argmin, x, axis if dim is None else dim, keepdim)


def logsumexp(x: Any, dim: Any = None, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over ``dim`` (all elements when omitted), without overflow."""
    return _reduce(ops.LOGSUMEXP, x, dim, keepdim, None, None)


def norm(x: Any, p: Any = 2, dim: Any = None, keepdim: bool = False) -> Tensor:
    """The p-norm (Euclidean by default; ``p=inf`` is the largest magnitude)."""
    if p in (2, "fro", None):
        return _reduce(ops.NORM, x, dim, keepdim, None, None)
    x = as_tensor(x)
    if p == math.inf:
        return amax(abs(x), dim, keepdim)
    if p == -math.inf:
        return amin(abs(x), dim, keepdim)
    if p == 0:  # the number of non-zero elements, with gradient 0 (sign's) as PyTorch's
        return sum(GENERATED["sign"](abs(x)), dim, keepdim)
    if p == 1:
        return sum(abs(x), dim, keepdim)
    return sum(abs(x) ** p, dim, keepdim) ** (1.0 / p)


def _along(prim: Any, x: Any, dim: Any) -> Tensor:
    """``prim`` along one axis (a 0-d tensor is taken as one element along axis 0 or -1)."""
    x = as_tensor(x)
    if x.ndim == 0:
        _dims(dim, 0)  # only 0 and -1
        return apply(prim, (x.reshape(1),), (-1,)).reshape(())
    return apply(prim, (x,), (wrap_dim(dim, x.ndim) - x.ndim,))


def softmax(x: Any, dim: int = -1) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim`` (SoftmaxBackward0)."""
    return _along(ops.SOFTMAX, x, dim)


def log_softmax(x: Any, dim: int = -1) -> Tensor:
    """x - logsumexp(x) along ``dim``, without overflow (LogSoftmaxBackward0)."""
    return _along(ops.LOG_SOFTMAX, x, dim)


def cumsum(x: Any, dim: int = -1) -> Tensor:
    """Cumulative sum along ``dim`` (the last axis when omitted, as in the language)."""
    return _along(ops.CUMSUM, x, dim)


def cumprod(x: Any, dim: int = -1) -> Tensor:
    """Cumulative product along ``dim``; its gradient is exact where elements are 0."""
    return _along(ops.CUMPROD, x, dim)


def flip(x: Any, dims: Any = -1) -> Tensor:
    """The elements in reverse order along each of ``dims`` (an int or a tuple)."""
    x = as_tensor(x)
    axes = _dims(dims, x.ndim)
    if axes is None:  # a 0-d tensor
        return apply(ops.FLIP, (x.reshape(1),), ((-1,),)).reshape(())
    return apply(ops.FLIP, (x,), (axes,))


def _arg(pick: Any, x: Any, dim: Any, keepdim: bool) -> Tensor:
    """The index (int64, no gradient) that ``pick`` chooses, over all elements or along ``dim``."""
    v = np.asarray(as_tensor(x)._value)
    if v.dtype.kind == "c":
        raise RuntimeError(f"{pick.__name__}(): complex tensors are not supported")
    if dim is None:
        index = np.asarray(pick(v), dtype=np.int64)
        return wrap(np.reshape(index, (1,) * v.ndim) if keepdim else index)
    if v.ndim == 0:
        _dims(dim, 0)
        return wrap(np.zeros((), dtype=np.int64))
    return wrap(np.asarray(pick(v, axis=wrap_dim(dim, v.ndim), keepdims=bool(keepdim)), dtype=np.int64))


def argmax(x: Any, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """Index of the largest element (of the flattened tensor when ``dim`` is omitted); int64, no gradient."""
    return _arg(np.argmax, x, axis if dim is None else dim, keepdim)


def argmin(x: Any, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """Index of the smallest element (of the flattened tensor when ``dim`` is omitted); int64, no gradient."""
    return _arg(np.argmin, x, axis if dim is None else dim, keepdim)


SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])


def _ordered(name: str, x: Any) -> Tensor:
    x = as_tensor(x)
    if x.dtype.kind == "c":
        raise RuntimeError(f"{name}(): complex tensors are not supported")
    return x


def sort(x: Any, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
    """(values, indices) sorted along ``dim`` (SortBackward0): the values differentiable, the
    indices int64 without gradient; equal elements keep their order (NaN is the largest)."""
    x = _ordered("sort", x)
    if x.ndim == 0:
        _dims(dim, 0)
        values = apply(ops.SORT, (x.reshape(1),), (-1, np.zeros(1, np.int64))).reshape(())
        return SortResult(values, wrap(np.zeros((), np.int64)))
    axis = wrap_dim(dim, x.ndim) - x.ndim
    index = ops_order.order(x._value, axis, bool(descending)).astype(np.int64)
    return SortResult(apply(ops.SORT, (x,), (axis, index)), wrap(index))


def topk(x: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:  # noqa: A002
    """(values, indices) of the ``k`` largest (``largest=False``: smallest) elements along ``dim``
    (TopkBackward0), in order; the gradient goes to the positions the indices name."""
    x = _ordered("topk", x)
    n = x.shape[wrap_dim(dim, x.ndim)] if x.ndim else 1
    k = int(k)
    if not 0 <= k <= n:
        raise RuntimeError(f"selected index k out of range: k={k} for a dimension of size {n}")
    if x.ndim == 0:
        _dims(dim, 0)
        index = np.zeros(k, np.int64)
        values = apply(ops.TOPK, (x.reshape(1),), (-1, index)).reshape(() if k else (0,))
        return TopkResult(values, wrap(index.reshape(() if k else (0,))))
    axis = wrap_dim(dim, x.ndim) - x.ndim
    full = ops_order.order(x._value, axis, bool(largest)).astype(np.int64)
    index = np.ascontiguousarray(np.take(full, np.arange(k), axis=axis))
    return TopkResult(apply(ops.TOPK, (x,), (axis, index)), wrap(index))


def _spread(
    prim: Any, x: Any, dim: Any, unbiased: Any, keepdim: bool, correction: Any, axis: Any, keepdims: Any
) -> Tensor:
    if isinstance(dim, bool):  # torch.var(x, False): the unbiased flag
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise RuntimeError(f"{prim.name}: give correction or unbiased, not both")
    c = correction if correction is not None else (1 if unbiased is None or unbiased else 0)
    x = as_tensor(x)
    dim = axis if dim is None else dim
    keepdim = bool(keepdims) if keepdims is not None else keepdim
    return apply(prim, (x,), (_dims(dim, x.ndim), bool(keepdim), c))


def var(
    x: Any, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *, correction: Any = None,
    axis: Any = None, keepdims: Any = None,
) -> Tensor:  # fmt: skip
    """Variance over ``dim`` (all elements when omitted), divided by n - correction (default 1)."""
    return _spread(ops.VAR, x, dim, unbiased, keepdim, correction, axis, keepdims)


def std(
    x: Any, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *, correction: Any = None,
    axis: Any = None, keepdims: Any = None,
) -> Tensor:  # fmt: skip
    """Standard deviation over ``dim`` (all elements when omitted), with n - correction (default 1)."""
    return _spread(ops.STD, x, dim, unbiased, keepdim, correction, axis, keepdims)


def dot(a: Any, b: Any) -> Tensor:
    a, b = as_tensor(a), as_tensor(b)
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    return _checked_product(ops.DOT, a, b)


def matmul(a: Any, b: Any) -> Tensor:
    return _matmul(as_tensor(a), as_tensor(b))


def mm(a: Any, b: Any) -> Tensor:
    a, b = as_tensor(a), as_tensor(b)
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError("mm: both arguments must be matrices")
    return _checked_product(ops.MM, a, b)


def mv(a: Any, x: Any) -> Tensor:
    a, x = as_tensor(a), as_tensor(x)
    if a.ndim != 2 or x.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {a.ndim}, {x.ndim}")
    return _checked_product(ops.MV, a, x)


def outer(a: Any, b: Any) -> Tensor:
    """Outer product of two vectors, ``a[:, None] * b`` (PyTorch records MulBackward0 too)."""
    a, b = as_tensor(a), as_tensor(b)
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"outer: 1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    return mul(reshape(a, (a.shape[0], 1)), b)


def _matrix(name: str, x: Tensor) -> Tensor:
    if x.ndim != 2:
        raise RuntimeError(f"{name}: expected a matrix, got {x.ndim}D tensor")
    return x


def trace(x: Any) -> Tensor:
    """Sum of the diagonal of a matrix (TraceBackward0)."""
    return apply(ops.TRACE, (_matrix("trace", as_tensor(x)),))


def diag(x: Any, diagonal: int = 0) -> Tensor:
    """``diag(v, k)``: the square matrix with ``v`` on its ``k``-th diagonal (DiagEmbedBackward0);
    ``diag(A, k)``: the ``k``-th diagonal of ``A`` (above the main one for k > 0, below for k < 0)."""
    x = as_tensor(x)
    k = int(diagonal)
    if x.ndim == 1:
        n = x.shape[0] + (k if k >= 0 else -k)
        return apply(ops.DIAG_EMBED, (x,), ((n, n), k, -2, -1))
    if x.ndim == 2:
        return apply(ops.DIAGONAL, (x,), (k, -2, -1))
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {x.ndim}D")


def _two_dims(name: str, ndim: int, dim1: int, dim2: int) -> tuple[int, int]:
    """Two distinct axes of ``ndim`` as negative offsets from the end."""
    d1, d2 = wrap_dim(dim1, ndim), wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"{name}: dimensions cannot be identical {dim1}, {dim2}")
    return d1 - ndim, d2 - ndim


def diagonal(input: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:  # noqa: A002
    """The ``offset`` diagonal of axes ``dim1`` and ``dim2``, as the last axis: DiagonalBackward0."""
    x = as_tensor(input)
    if x.ndim < 2:
        raise RuntimeError(f"diagonal(): expected a tensor of at least 2 dimensions, got {x.ndim}")
    return apply(ops.DIAGONAL, (x,), (int(offset), *_two_dims("diagonal", x.ndim, dim1, dim2)))


def diag_embed(input: Any, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:  # noqa: A002
    """Zeros with the last axis of ``input`` on the ``offset`` diagonal of axes ``dim1``, ``dim2``
    of the result (one axis more): DiagEmbedBackward0."""
    x = as_tensor(input)
    if x.ndim < 1:
        raise RuntimeError("diag_embed(): expected a tensor of at least 1 dimension")
    ndim, k = x.ndim + 1, int(offset)
    d1, d2 = _two_dims("diag_embed", ndim, dim1, dim2)
    n = x.shape[-1] + (k if k >= 0 else -k)
    rest = iter(x.shape[:-1])
    shape = tuple(n if d - ndim in (d1, d2) else next(rest) for d in range(ndim))
    return apply(ops.DIAG_EMBED, (x,), (shape, k, d1, d2))


def tril(x: Any, diagonal: int = 0) -> Tensor:
    """The lower triangle of a matrix (of each matrix in a batch), the rest 0."""
    x = as_tensor(x)
    if x.ndim < 2:
        raise RuntimeError(f"tril: input tensor must have at least 2 dimensions, got {x.ndim}")
    return apply(ops.TRIL, (x,), (int(diagonal),))


def triu(x: Any, diagonal: int = 0) -> Tensor:
    """The upper triangle of a matrix (of each matrix in a batch), the rest 0."""
    x = as_tensor(x)
    if x.ndim < 2:
        raise RuntimeError(f"triu: input tensor must have at least 2 dimensions, got {x.ndim}")
    return apply(ops.TRIU, (x,), (int(diagonal),))


def inv(x: Any) -> Tensor:
    """Inverse of a square matrix (LinalgInvExBackward0); ``inverse`` is the same."""
    x = _matrix("inv", as_tensor(x))
    if x.shape[0] != x.shape[1]:
        raise RuntimeError(f"inv: A must be a square matrix, got shape {tuple(x.shape)}")
    try:
        return apply(ops.INV, (x,))
    except np.linalg.LinAlgError:
        raise RuntimeError("inv: the matrix is singular (not invertible)") from None


inverse = inv


def _square(name: str, x: Any) -> Tensor:
    x = as_tensor(x)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are {tuple(x.shape)[-2:]} matrices")
    return x


def det(A: Any) -> Tensor:
    """Determinant of a square matrix (of each in a batch) (LinalgDetBackward0); its gradient is the
    cofactor matrix, right at singular matrices too."""
    return apply(ops.DET, (_square("linalg.det", A),))


def solve(A: Any, B: Any, *, left: bool = True) -> Tensor:
    """``X`` with ``A @ X = B`` (``left=False``: ``X @ A = B``), B a vector or a matrix, with
    gradients to both (LinalgSolveExBackward0)."""
    A, B = _square("linalg.solve", A), as_tensor(B)
    if not left:
        return transpose(solve(transpose(A), transpose(B)))
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    if B.ndim == 0 or B.shape[-1 if vector else -2] != A.shape[-1]:
        raise RuntimeError(
            f"linalg.solve: Incompatible shapes of A and B for the equation AX = B ({tuple(A.shape)} and {tuple(B.shape)})"
        )
    try:
        return apply(ops.SOLVE, (A, B), (bool(vector),))
    except np.linalg.LinAlgError:
        raise RuntimeError("linalg.solve: The solver failed because the input matrix is singular.") from None
    except ValueError:
        raise RuntimeError(
            f"linalg.solve: Incompatible shapes of A and B for the equation AX = B ({tuple(A.shape)} and {tuple(B.shape)})"
        ) from None


def _checked_product(prim: Any, a: Tensor, b: Tensor) -> Tensor:
    try:
        return apply(prim, (a, b))
    except ValueError:
        raise RuntimeError(matmul_mismatch(a.shape, b.shape)) from None


def where(condition: Any, a: Any, b: Any) -> Tensor:
    """Elements of ``a`` where ``condition`` holds, else of ``b`` (gradient to the chosen one)."""
    return apply(ops.WHERE, (condition, a, b))


def clamp(x: Any, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """``x`` limited to [min, max]; tensor bounds get gradients too (where they are the value)."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        lo = as_tensor(-np.inf if min is None else min)
        hi = as_tensor(np.inf if max is None else max)
        return apply(ops.CLAMP_TENSOR, (as_tensor(x), lo, hi))
    return apply(ops.CLAMP, (as_tensor(x),), (min, max))


def conj(x: Any) -> Tensor:
    """Complex conjugate (``x`` itself when it is real, as in PyTorch)."""
    x = as_tensor(x)
    return unary(ops.CONJ, x) if x.dtype.kind == "c" else x


def real(x: Any) -> Tensor:
    """Real part (``x`` itself when it is real)."""
    x = as_tensor(x)
    return unary(ops.REAL, x) if x.dtype.kind == "c" else x


def imag(x: Any) -> Tensor:
    """Imaginary part of a complex tensor."""
    x = as_tensor(x)
    if x.dtype.kind != "c":
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return unary(ops.IMAG, x)


def detach(x: Any) -> Tensor:
    """The value of ``x``, with no gradient flowing back through it."""
    return as_tensor(x).detach()


# --- shapes -----------------------------------------------------------------------------------


def _shape_args(shape: Any) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, np.ndarray, Tensor)):  # a tensor: the language's [2, 3]
        shape = shape[0]
    return tuple(int(s) for s in shape)


def reshape(x: Any, *shape: Any) -> Tensor:
    x = as_tensor(x)
    return apply(ops.RESHAPE, (x,), (_resolve_shape(x.shape, _shape_args(shape)),))


def _resolve_shape(old: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, ...]:
    size = int(np.prod(old, dtype=np.int64))
    if new.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if -1 in new:
        known = int(np.prod([s for s in new if s != -1], dtype=np.int64))
        if known == 0 or size % known:
            raise RuntimeError(f"shape '{list(new)}' is invalid for input of size {size}")
        new = tuple(size // known if s == -1 else s for s in new)
    if int(np.prod(new, dtype=np.int64)) != size:
        raise RuntimeError(f"shape '{list(new)}' is invalid for input of size {size}")
    return new


def flatten(x: Any, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    x = as_tensor(x)
    if x.ndim == 0:
        return reshape(x, 1)
    s, e = wrap_dim(start_dim, x.ndim), wrap_dim(end_dim, x.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    return reshape(x, x.shape[:s] + (-1,) + x.shape[e + 1 :])


def squeeze(x: Any, dim: Any = None) -> Tensor:
    x = as_tensor(x)
    if dim is None:
        return reshape(x, tuple(s for s in x.shape if s != 1))
    d = wrap_dim(dim, x.ndim)
    if x.ndim == 0 or x.shape[d] != 1:
        return x
    return reshape(x, x.shape[:d] + x.shape[d + 1 :])


def unsqueeze(x: Any, dim: int) -> Tensor:
    x = as_tensor(x)
    d = wrap_dim(dim, x.ndim + 1)
    return reshape(x, x.shape[:d] + (1,) + x.shape[d:])


def permute(x: Any, *dims: Any) -> Tensor:
    x = as_tensor(x)
    axes = tuple(wrap_dim(d, x.ndim) for d in _shape_args(dims)) if x.ndim else ()
    if sorted(axes) != list(range(x.ndim)):
        raise RuntimeError(f"permute: dims {list(axes)} are not a permutation of {x.ndim} dimensions")
    return apply(ops.PERMUTE, (x,), (axes,))


def transpose(x: Any, dim0: int | None = None, dim1: int | None = None) -> Tensor:
    """``dim0`` and ``dim1`` swapped; without them the last two (a vector is its own transpose)."""
    x = as_tensor(x)
    if dim0 is None and dim1 is None:
        if x.ndim < 2:
            return x
        dim0, dim1 = -2, -1
    axes = list(range(x.ndim))
    dim0, dim1 = wrap_dim(dim0, x.ndim), wrap_dim(dim1, x.ndim)
    if x.ndim == 0:
        return x
    axes[dim0], axes[dim1] = axes[dim1], axes[dim0]
    return permute(x, axes)


def t(x: Any) -> Tensor:
    x = as_tensor(x)
    return x if x.ndim < 2 else transpose(x, 0, 1)


def expand(x: Any, *sizes: Any) -> Tensor:
    x = as_tensor(x)
    shape = _shape_args(sizes)
    lead = len(shape) - x.ndim
    shape = tuple(x.shape[i - lead] if s == -1 else s for i, s in enumerate(shape))
    return apply(ops.EXPAND, (x,), (shape,))


def broadcast_to(x: Any, shape: Any) -> Tensor:
    return expand(x, tuple(shape))


def stack(tensors: Sequence[Any], dim: int = 0) -> Tensor:
    items = [as_tensor(t) for t in tensors]
    if not items:
        raise RuntimeError("stack expects a non-empty TensorList")
    return apply(ops.STACK, items, (wrap_dim(dim, items[0].ndim + 1),))


def cat(tensors: Sequence[Any], dim: int = 0) -> Tensor:
    items = [as_tensor(t) for t in tensors]
    if not items:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    if any(item.ndim != 1 for item in items):  # PyTorch's legacy rule: an empty vector joins anything
        items = [item for item in items if item.shape != (0,)] or items[:1]
    for i, item in enumerate(items):
        if item.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    return apply(ops.CAT, items, (wrap_dim(dim, items[0].ndim),))


concatenate = cat


def to(x: Any, dtype: Any) -> Tensor:
    x = as_tensor(x)
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        mark_complex(np.empty(0, dtype))
    return x if x.dtype == dtype else apply(ops.TO_COPY, (x,), (dtype,))


def clone(x: Any) -> Tensor:
    return unary(ops.CLONE, as_tensor(x))


# --- generated from the table ----------------------------------------------------------------------


def _unary_function(prim: Any) -> Any:
    def fn(x: Any) -> Tensor:
        return unary(prim, x if x.__class__ is Tensor else as_tensor(x))

    return fn


def _binary_function(prim: Any) -> Any:
    def fn(a: Any, b: Any) -> Tensor:
        if not isinstance(a, Tensor) and not isinstance(b, Tensor):
            a = as_tensor(a)
        return binary(prim, a, b)

    return fn


def _generated() -> dict[str, Any]:
    made = {}
    for prim in PRIMITIVES.values():
        if not (prim.public and prim.elementwise and prim.nparams == 0) or prim.arity not in (1, 2):
            continue
        fn = _unary_function(prim) if prim.arity == 1 else _binary_function(prim)
        fn.__name__ = fn.__qualname__ = prim.name
        fn.__doc__ = f"{prim.doc} (elementwise; graph node {prim.node_name()})."
        made[prim.name] = fn
    return made


GENERATED = _generated()
globals().update({name: fn for name, fn in GENERATED.items() if name not in globals()})

add, sub, mul, div, pow, neg = (GENERATED[n] for n in ("add", "sub", "mul", "div", "pow", "neg"))  # noqa: A001
exp, log, sin, cos, tanh, sigmoid, relu, abs = (  # noqa: A001
    GENERATED[n] for n in ("exp", "log", "sin", "cos", "tanh", "sigmoid", "relu", "abs")
)
maximum, minimum = GENERATED["maximum"], GENERATED["minimum"]
lt, le, gt, ge, eq, ne = (GENERATED[n] for n in ("lt", "le", "gt", "ge", "eq", "ne"))


def softplus(x: Any, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, without overflow; x itself where beta x > threshold (PyTorch's)."""
    return apply(ops.SOFTPLUS, (as_tensor(x),), (float(beta), float(threshold)))


GENERATED["softplus"] = softplus


def gelu(x: Any, approximate: str = "none") -> Tensor:
    """x Phi(x) (``approximate="tanh"``: PyTorch's tanh form of it), GeluBackward0."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    return apply(ops.GELU, (as_tensor(x),), (approximate,))


def elu(x: Any, alpha: float = 1.0) -> Tensor:
    """x for x > 0, else alpha (exp(x) - 1): EluBackward0."""
    return apply(ops.ELU, (as_tensor(x),), (float(alpha),))


def hardtanh(x: Any, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """x limited to [min_val, max_val], the gradient 1 strictly inside: HardtanhBackward0."""
    if min_val > max_val:
        raise RuntimeError("min_val cannot be greater than max_val")
    return apply(ops.HARDTANH, (as_tensor(x),), (float(min_val), float(max_val)))


def nan_to_num(x: Any, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
    """NaN as ``nan``, +-inf as ``posinf``/``neginf`` (the dtype's extremes by default): NanToNumBackward0."""
    return apply(ops.NAN_TO_NUM, (as_tensor(x),), (nan, posinf, neginf))


def lerp(input: Any, end: Any, weight: Any) -> Tensor:  # noqa: A002
    """``input + weight * (end - input)``: LerpBackward0 (a number weight) or LerpBackward1 (a tensor)."""
    x = as_tensor(input)
    if isinstance(weight, Tensor) or np.ndim(weight):
        return apply(ops.LERP, (x, as_tensor(end), as_tensor(weight)))
    return apply(ops.LERP, (x, as_tensor(end), float(weight)))


GENERATED.update(gelu=gelu, elu=elu, hardtanh=hardtanh, nan_to_num=nan_to_num, lerp=lerp)


def _log(x: Any, base: Any = None) -> Tensor:
    """Natural logarithm; ``log(x, b)`` to base ``b`` (log(x) / log(b)), as in the language."""
    if base is None:
        return unary(ops.LOG, as_tensor(x))
    return div(unary(ops.LOG, as_tensor(x)), unary(ops.LOG, as_tensor(base)))


_log.__name__ = _log.__qualname__ = "log"
_log.__doc__ = f"{GENERATED['log'].__doc__[:-1]}; log(x, b) to base b (log(x) / log(b))."
GENERATED["log"] = log = _log


# --- indexing functions (issue 15): integer positions are parameters, never inputs ----------------


def _positions(index: Any, what: str) -> np.ndarray:
    """An index as an integer array (a tensor's, a list's); PyTorch's error for other dtypes."""
    value = index._value if isinstance(index, Tensor) else np.asarray(index)
    if value.dtype.kind not in "iu":
        raise RuntimeError(f"{what}(): Expected dtype int32/int64 for index")
    return value


def gather(input: Any, dim: int, index: Any, *, sparse_grad: bool = False) -> Tensor:  # noqa: A002
    """``out[i][j] = input[i][index[i][j]]`` for ``dim=1`` (any dim alike): GatherBackward0,
    the gradient scattered back with repeated positions adding up."""
    x = as_tensor(input)
    positions = _positions(index, "gather")
    ndim = x.ndim
    if positions.ndim != ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    d = wrap_dim(dim, ndim)
    if ndim == 0:
        return gather(x.reshape(1), 0, positions.reshape(1)).reshape(())
    for k, (m, n) in enumerate(zip(positions.shape, x.shape)):
        if k != d and m > n:
            raise RuntimeError(
                f"Size does not match at dimension {k} expected index {list(positions.shape)} to be no larger "
                f"than self {list(x.shape)} apart from dimension {d}"
            )
    _check_range(positions, x.shape[d], d, negative=False)
    return apply(ops.GATHER, (x,), (d, positions))


def _out_of_bounds(i: int, dim: int, size: int) -> Any:
    raise RuntimeError(f"index {i} is out of bounds for dimension {dim} with size {size}")


def _check_range(positions: np.ndarray, size: int, dim: int, negative: bool) -> None:
    low = -size if negative else 0
    bad = positions[(positions < low) | (positions >= size)]
    if bad.size:
        _out_of_bounds(int(bad.flat[0]), dim, size)


def index_select(input: Any, dim: int, index: Any) -> Tensor:  # noqa: A002
    """The slices of ``input`` at ``index`` (a vector) along ``dim``: IndexSelectBackward0."""
    x = as_tensor(input)
    positions = _positions(index, "index_select")
    if positions.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = wrap_dim(dim, x.ndim)
    size = x.shape[d] if x.ndim else 1
    if positions.size and (positions.min() < 0 or positions.max() >= size):
        raise IndexError("index out of range in self")
    if x.ndim == 0:  # PyTorch keeps a 0-d input's shape
        return apply(ops.INDEX_SELECT, (x.reshape(1),), (0, positions.reshape(-1))).reshape(())
    return apply(ops.INDEX_SELECT, (x,), (d, positions.reshape(-1)))


def masked_fill(input: Any, mask: Any, value: Any) -> Tensor:  # noqa: A002
    """``value`` where ``mask`` (booleans) is true, ``input`` elsewhere: MaskedFillBackward0
    (a number) or MaskedFillBackward1 (a 0-d tensor, which gets the gradient summed where masked)."""
    x = as_tensor(input)
    m = mask._value if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype != np.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {_torch_dtype(m)}")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise RuntimeError(
            f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with {value.ndim} dimension(s)."
        )
    try:
        np.broadcast_shapes(m.shape, np.shape(x._value))
    except ValueError:
        raise RuntimeError(f"The size of the mask {list(m.shape)} does not broadcast to {list(x.shape)}") from None
    if not isinstance(value, Tensor):
        value = float(value)
    return apply(ops.MASKED_FILL, (x, value), (m,))


def _torch_dtype(a: np.ndarray) -> str:
    return {"f": "float", "i": "long", "u": "unsigned", "c": "complex"}.get(a.dtype.kind, str(a.dtype))


def narrow(input: Any, dim: int, start: Any, length: int) -> Tensor:  # noqa: A002
    """``length`` elements from ``start`` along ``dim`` (a slice: SliceBackward0)."""
    x = as_tensor(input)
    d = wrap_dim(dim, x.ndim)
    size = x.shape[d]
    s = int(start._value) if isinstance(start, Tensor) else int(start)
    if not -size <= s <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {s})")
    s = s % size if s < 0 else s
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if s + length > size:
        raise RuntimeError(f"start ({s}) + length ({length}) exceeds dimension size ({size}).")
    return x[(slice(None),) * d + (slice(s, s + length),)]


def chunk(input: Any, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002
    """Up to ``chunks`` pieces of equal size (the last smaller) along ``dim``: SplitBackward0."""
    x = as_tensor(input)
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = wrap_dim(dim, x.ndim)
    size = x.shape[d]
    step = -(-size // chunks) if size else 0
    if step == 0:  # an empty axis: chunks empty pieces, as PyTorch's
        return multi_view(tuple(apply(ops.SPLIT, (x,), (d, 0, 0)) for _ in range(chunks)), x, "Split")
    pieces = tuple(apply(ops.SPLIT, (x,), (d, s, _smaller(step, size - s))) for s in range(0, size, step))
    return multi_view(pieces, x, "Split")


def unbind(input: Any, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002
    """The slices along ``dim``, that axis removed: UnbindBackward0."""
    x = as_tensor(input)
    if x.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = wrap_dim(dim, x.ndim)
    if x.shape[d] == 0:
        return ()
    from .function import Unbind  # (custom Functions load only when used)

    slices = multi_view(Unbind.apply(x, d), x, "Unbind")
    chain = () if x._base is None else x._view_fn
    if chain is not None and not x._detached:  # how each slice is taken again when x changes in place
        for i, t in enumerate(slices):
            if t._base is not None:
                t._view_fn = chain + ((ops.GETITEM, ((slice(None),) * d + (i,),)),)
                note_view(t._base, t)
    return slices


def multi_view(outputs: tuple[Tensor, ...], x: Tensor, name: str) -> tuple[Tensor, ...]:
    """Mark ``outputs`` as the views of ``x`` that one function returned together (``name``): changing
    one of them in place under a recording is refused, as in PyTorch."""
    root = storage_root(x)
    for k, t in enumerate(outputs):
        if t._value.__class__ is np.ndarray and np.may_share_memory(t._value, root._value):
            t._base = root
            t._detached = x._detached
            t._multi_view = (name, k)
    return outputs


def repeat(input: Any, *sizes: Any) -> Tensor:  # noqa: A002
    """``input`` tiled ``sizes[i]`` times along each axis (extra sizes add axes in front): RepeatBackward0."""
    x = as_tensor(input)
    sizes = _shape_args(sizes)
    if len(sizes) < x.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    if any(s < 0 for s in sizes):
        padded = (1,) * (len(sizes) - x.ndim) + tuple(x.shape)
        shape = [s * n for s, n in zip(sizes, padded)]
        negative = next(n for n in shape if n < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {negative}: {shape}")
    return apply(ops.REPEAT, (x,), (sizes,))


def split(tensor: Any, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces of ``split_size_or_sections`` elements along ``dim`` (the last smaller), or of the sizes
    listed: SplitBackward0 (SplitWithSizesBackward0 in PyTorch for a list)."""
    x = as_tensor(tensor)
    d = wrap_dim(dim, x.ndim)
    size = x.shape[d] if x.ndim else 0
    if isinstance(split_size_or_sections, (int, np.integer)):
        step = int(split_size_or_sections)
        if step < 0 or (step == 0 and size):
            raise RuntimeError(f"split expects split_size be non-negative, but got split_size={step}")
        sizes = [_smaller(step, size - s) for s in range(0, size, step)] if step and size else [0]
    else:
        sizes = [int(n) for n in split_size_or_sections]
        if any(n < 0 for n in sizes) or np.sum(sizes) != size:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size at "
                f"dimension {d}), but got split_sizes={sizes}"
            )
    starts = np.cumsum([0, *sizes[:-1]])
    pieces = tuple(apply(ops.SPLIT, (x,), (d, int(s), n)) for s, n in zip(starts, sizes))
    return multi_view(pieces, x, "Split" if isinstance(split_size_or_sections, (int, np.integer)) else "SplitWithSizes")


def roll(input: Any, shifts: Any, dims: Any = None) -> Tensor:  # noqa: A002
    """The elements shifted by ``shifts`` along ``dims`` (the flattened tensor when omitted), those
    past the end coming round to the start: RollBackward0."""
    x = as_tensor(input)
    shift = tuple(int(s) for s in _int_list(shifts))
    if dims is None:
        if len(shift) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shift)}, dims:0")
        return apply(ops.ROLL, (x,), (shift, None))
    axes = _int_list(dims)
    if len(axes) != len(shift):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shift)}, dims:{len(axes)}")
    ndim = x.ndim if x.ndim else 1
    if x.ndim == 0:
        return x.clone()
    return apply(ops.ROLL, (x,), (shift, tuple(wrap_dim(a, ndim) - ndim for a in axes)))


def _int_list(value: Any) -> list[int]:
    """One whole number or several (a list, a tuple, a 0-d or 1-d tensor) as a list of ints."""
    raw = value._value if isinstance(value, Tensor) else value
    return [int(v) for v in np.atleast_1d(np.asarray(raw))]


def cross(input: Any, other: Any, dim: Any = None) -> Tensor:  # noqa: A002
    """Cross product of 3-vectors along ``dim`` (the first axis of size 3 when omitted, as torch.cross),
    the two broadcast against each other: LinalgCrossBackward0."""
    a, b = as_tensor(input), as_tensor(other)
    if a.ndim != b.ndim:
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions, got {a.ndim} and {b.ndim}")
    shape = np.broadcast_shapes(a.shape, b.shape)
    if dim is None:
        dim = next((d for d, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    d = wrap_dim(dim, len(shape))
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {d} must have length 3. Got {a.shape[d]} and {b.shape[d]}")
    return apply(ops.CROSS, (a, b), (d - len(shape),))


def kron(input: Any, other: Any) -> Tensor:  # noqa: A002
    """The Kronecker product: every element of ``input`` times the whole of ``other``, block by block
    (composed, as in PyTorch, of a product and a reshape)."""
    a, b = as_tensor(input), as_tensor(other)
    ndim = a.ndim if a.ndim > b.ndim else b.ndim
    sa = (1,) * (ndim - a.ndim) + tuple(a.shape)
    sb = (1,) * (ndim - b.ndim) + tuple(b.shape)
    left = reshape(a, tuple(n for s in sa for n in (s, 1)))
    right = reshape(b, tuple(n for s in sb for n in (1, s)))
    return reshape(mul(left, right), tuple(m * n for m, n in zip(sa, sb)))


def _at_least(x: Tensor, ndim: int) -> Tensor:
    """``x`` with axes of size 1 in front up to ``ndim`` (NumPy's atleast_1d, atleast_2d)."""
    return x if x.ndim >= ndim else reshape(x, (1,) * (ndim - x.ndim) + tuple(x.shape))


def hstack(tensors: Sequence[Any]) -> Tensor:
    """The tensors joined column-wise: along axis 0 for vectors, 1 otherwise (numbers as vectors)."""
    items = [_at_least(as_tensor(t), 1) for t in tensors]
    return cat(items, 0 if items and items[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Any]) -> Tensor:
    """The tensors joined row-wise, along axis 0 (vectors and numbers as rows)."""
    return cat([_at_least(as_tensor(t), 2) for t in tensors], 0)


def argsort(input: Any, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:  # noqa: A002
    """The positions that sort ``input`` along ``dim`` (int64, no gradient; ties keep their order)."""
    x = _ordered("argsort", input)
    if x.ndim == 0:
        _dims(dim, 0)
        return wrap(np.zeros((), np.int64))
    axis = wrap_dim(dim, x.ndim) - x.ndim
    return wrap(ops_order.order(x._value, axis, bool(descending)).astype(np.int64))


def var_mean(
    input: Any,
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,  # noqa: A002
) -> tuple[Tensor, Tensor]:
    """``(var(input, ...), mean(input, ...))`` over the same axes, as torch.var_mean."""
    if isinstance(dim, bool):  # torch.var_mean(x, False): the unbiased flag
        dim, unbiased = None, dim
    spread = var(input, dim, unbiased, keepdim, correction=correction)
    return spread, mean(input, dim, keepdim)


def _smaller(a: int, b: int) -> int:
    return a if a < b else b
