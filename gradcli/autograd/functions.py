"""The library's functions: PyTorch's signatures over the primitive table.

Elementwise primitives become functions (``gradcli.sin``, ``gradcli.atan2``)
and methods (``x.sin()``) straight from the table; functions with axes,
shapes or several forms (``sum(x, dim)``, ``max(x)`` vs ``max(a, b)``) are
written here, each a few lines over a primitive. Shapes, views and indexing by positions live in
``arrays`` (and are this module's too, for ``gradcli.reshape`` and ``x.reshape``).
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

import numpy as np

from .. import ops
from ..ops import PRIMITIVES
from ..ops import order as ops_order
from ..ops.shape import PickIndex
from .arrays import (  # noqa: F401 - the library's shape, view and indexing functions, from here too
    as_tensor,
    broadcast_to,
    cat,
    chunk,
    clone,
    dims_of,
    expand,
    flatten,
    gather,
    hstack,
    index_select,
    int_list,
    masked_fill,
    multi_view,
    narrow,
    permute,
    repeat,
    reshape,
    roll,
    smaller,
    split,
    squeeze,
    stack,
    t,
    to,
    transpose,
    unbind,
    unsqueeze,
    vstack,
    wrap_dim,
)
from .record import apply, binary, matmul_mismatch, unary
from .record import matmul as _matmul
from .tensor import MinMax, Tensor, wrap


def _reduce(prim: Any, x: Any, dim: Any, keepdim: bool, axis: Any, keepdims: Any) -> Tensor:
    x = as_tensor(x)
    dim = axis if dim is None else dim
    keepdim = bool(keepdims) if keepdims is not None else keepdim
    return apply(prim, (x,), (dims_of(dim, x.ndim), keepdim))


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
    for d in dims_of(dim, x.ndim) or range(x.ndim):
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
        dims_of(dim, 0)  # only 0 and -1
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
    axes = dims_of(dims, x.ndim)
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
        dims_of(dim, 0)
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
        dims_of(dim, 0)
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
        dims_of(dim, 0)
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
    return apply(prim, (x,), (dims_of(dim, x.ndim), bool(keepdim), c))


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
    return _checked_product(ops.DOT, a, b, (1, 1), "1D tensors expected, but got {}D and {}D tensors")


def matmul(a: Any, b: Any) -> Tensor:
    return _matmul(as_tensor(a), as_tensor(b))


def mm(a: Any, b: Any) -> Tensor:
    return _checked_product(ops.MM, a, b, (2, 2), "mm: both arguments must be matrices")


def mv(a: Any, x: Any) -> Tensor:
    return _checked_product(ops.MV, a, x, (2, 1), "vector + matrix @ vector expected, got {}, {}")


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


def _checked_product(prim: Any, a: Any, b: Any, ndims: tuple[int, int], wrong_ndim: str) -> Tensor:
    """``prim`` of two tensors of ``ndims`` dimensions (else ``wrong_ndim``, given both counts), their
    sizes checked as matmul's."""
    a, b = as_tensor(a), as_tensor(b)
    if (a.ndim, b.ndim) != ndims:
        raise RuntimeError(wrong_ndim.format(a.ndim, b.ndim))
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


concatenate = cat


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


def argsort(input: Any, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:  # noqa: A002
    """The positions that sort ``input`` along ``dim`` (int64, no gradient; ties keep their order)."""
    x = _ordered("argsort", input)
    if x.ndim == 0:
        dims_of(dim, 0)
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
