"""Reductions: sum, mean, prod, max/min, logsumexp, norm.

``axis`` is ``None`` (everything) or a tuple of negative axes, so that rules
address trailing axes and stay valid when ``g`` carries leading batch axes.
"""

from __future__ import annotations

import numpy as np

from .core import primitive
from .elementwise import REAL
from .shape import batch_ndim

#: The group the rows of this module are listed in (``gradcli ops``, the README).
GROUP = "reductions"


def _keep(v, x_shape, axis, keepdims, nbatch=0):
    """``v`` (reduced) reshaped so it broadcasts against ``batch + x_shape``."""
    if keepdims:
        return v
    n = len(x_shape)
    kept = tuple(1 if axis is None or i - n in axis else size for i, size in enumerate(x_shape))
    return np.reshape(v, v.shape[:nbatch] + kept)


def _trailing(axis, ndim):
    """The reduced axes counted from the end: ``None`` is all of the value's own axes
    (and none of the batch axes in front of them)."""
    return tuple(range(-ndim, 0)) if axis is None else axis


def _reduce_jvp(weight):
    """Forward rule of a reduction: the tangent, weighted, summed over the reduced axes."""

    def jvp(tangents, out, x, axis, keepdims):
        (t,) = tangents
        w = weight(out, x, axis, keepdims)
        axes = _trailing(axis, np.ndim(x))
        if w is None:
            return np.sum(t, axis=axes, keepdims=keepdims)
        part = t * w
        total = np.sum(part, axis=axes, keepdims=keepdims)
        if isinstance(total, np.ndarray | np.generic) and total.dtype.kind in "fc" and not np.isfinite(total).all():
            # a zero tangent times a weight that is not finite (norm of an infinite vector:
            # 0 * inf/inf) counts 0, as reverse mode has it
            total = np.sum(np.where(np.asarray(t) == 0, np.zeros((), total.dtype), part), axis=axes, keepdims=keepdims)
        return total

    return jvp


def _spread(g, out, x, axis, keepdims):
    """The gradient of a reduction, broadcast back over the reduced axes."""
    nb = batch_ndim(g, out)
    return np.broadcast_to(_keep(g, x.shape, axis, keepdims, nb), g.shape[:nb] + x.shape)


def _count(shape, axis) -> int:
    n = len(shape)
    return int(np.prod([s for i, s in enumerate(shape) if axis is None or i - n in axis], dtype=np.int64))


def _reduced_sympy(fn):
    def build(sp, x, axis, keepdims):
        return fn(sp, x) if np.ndim(x) == 0 else None

    return build


def _full_or_dim(name_full, overload_full, name_dim, overload_dim):
    return lambda consts, params: (name_full, overload_full) if params[0] is None else (name_dim, overload_dim)


SUM = primitive(
    "sum",
    1,
    lambda x, axis, keepdims: np.sum(x, axis=axis, keepdims=keepdims),
    (_spread,),
    saves="meta",
    nparams=2,
    variant=_full_or_dim("sum", 0, "sum", 1),
    formulas=("1",),
    jvp=_reduce_jvp(lambda out, x, axis, keepdims: None),
    batch="linear",  # its forward rule is itself
    doc="sum of the elements",
)

MEAN = primitive(
    "mean",
    1,
    lambda x, axis, keepdims: np.mean(x, axis=axis, keepdims=keepdims),
    (lambda g, out, x, axis, keepdims: _spread(g, out, x, axis, keepdims) / _count(x.shape, axis),),
    saves="meta",
    nparams=2,
    variant=_full_or_dim("mean", 0, "mean", 1),
    formulas=("1/n",),
    jvp=_reduce_jvp(lambda out, x, axis, keepdims: 1.0 / _count(np.shape(x), axis)),
    batch="linear",  # its forward rule is itself
    doc="mean of the elements",
)


def _others_last(x):
    """Along the last axis: the product of all elements but each one, exactly (zeros too)."""
    if np.shape(x)[-1] == 0:  # no elements: nothing to leave out
        return np.ones_like(x)
    if isinstance(x, (np.ndarray, np.generic)):  # prefix x suffix products, O(n)
        ones = np.ones(x.shape[:-1] + (1,), dtype=x.dtype)
        left = np.cumprod(np.concatenate([ones, x[..., :-1]], axis=-1), axis=-1)
        right = np.cumprod(np.concatenate([ones, x[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
        return left * right
    # recorded (create_graph): row i of an n x n matrix holds x with x_i replaced by 1
    n = x.shape[-1]
    rows = np.where(np.eye(n, dtype=bool), 1.0, np.reshape(x, x.shape[:-1] + (1, n)))
    return np.prod(rows, axis=-1)


def _prod_of_others(x, axis):
    n = x.ndim
    reduced = tuple(range(n)) if axis is None else tuple(a + n for a in axis)
    kept = tuple(a for a in range(n) if a not in reduced)
    order = kept + reduced
    moved = np.transpose(x, order) if order != tuple(range(n)) else x
    flat = np.reshape(moved, tuple(x.shape[a] for a in kept) + (-1,))
    others = np.reshape(_others_last(flat), moved.shape)
    return np.transpose(others, tuple(np.argsort(order))) if order != tuple(range(n)) else others


def _prod_rule(g, out, x, axis, keepdims):
    kg = _keep(g, x.shape, axis, keepdims, batch_ndim(g, out))
    if not (np.asarray(x) == 0).any():  # PyTorch's prod_backward: grad * result / input
        return kg * _keep(out, x.shape, axis, keepdims) / x
    return kg * _prod_of_others(x, axis)


PROD = primitive(
    "prod",
    1,
    lambda x, axis, keepdims: np.prod(x, axis=axis, keepdims=keepdims),
    (_prod_rule,),
    saves="both",
    nparams=2,
    variant=_full_or_dim("prod", 0, "prod", 1),
    formulas=("prod/{0}",),
    doc="product of the elements; exact at zeros",
    jvp=_reduce_jvp(lambda out, x, axis, keepdims: _prod_of_others(x, axis)),
    batch="reduce",
)


def _ties(out, x, axis, keepdims):
    """The elements equal to the max (min): they share its gradient evenly. A full reduction whose
    value is NaN shares it among the NaNs, as PyTorch's max()/min() (evenly_distribute_backward);
    along an axis a NaN value has no ties, so its gradient is NaN, as PyTorch's amax/amin."""
    xv = np.asarray(x)
    value = _keep(np.asarray(out), xv.shape, axis, keepdims)
    mask = xv == value
    if axis is None and value.dtype.kind == "f" and np.isnan(value).any():
        mask = np.isnan(xv)
    return mask


def _share(out, x, axis, keepdims):
    """1/k at each of the k elements tied with the extreme (``_ties``), 0 elsewhere, in x's dtype (float32 stays
    float32)."""
    xv = np.asarray(x)
    mask = _ties(out, xv, axis, keepdims)
    share = mask / mask.sum(axis=axis, keepdims=True)
    return share.astype(xv.dtype) if xv.dtype.kind in "fc" else share


def _norm_weight(out, x, axis, keepdims):
    norm = _keep(out, np.shape(x), axis, keepdims)
    return x * np.where(norm == 0, 0.0, 1.0 / np.where(norm == 0, 1.0, norm))


def _extreme_rule(g, out, x, axis, keepdims):
    # PyTorch's amax/amin backward: ties share the gradient evenly
    nb = batch_ndim(g, out)
    return _keep(g, x.shape, axis, keepdims, nb) * _share(out, x, axis, keepdims)


def _extreme(name, reduce, dim_name, word):
    """``max`` or ``min`` over axes: the gradient goes to the extreme elements, shared at ties."""
    return primitive(
        name,
        1,
        lambda x, axis, keepdims: reduce(x, axis=axis, keepdims=keepdims),
        (_extreme_rule,),
        saves="both",
        nparams=2,
        variant=_full_or_dim(name, 1, dim_name, 0),
        analytic=False,
        formulas=(f"[{{0}} == {name}]",),
        doc=f"{word} element; ties share the gradient",
        jvp=_reduce_jvp(_share),
        batch="reduce",
    )


AMAX = _extreme("max", np.max, "amax", "largest")
AMIN = _extreme("min", np.min, "amin", "smallest")


def logsumexp_value(x, axis, keepdims):
    """log(sum(exp(x))) over ``axis``, computed without overflow (logsumexp's and log_softmax's forward)."""
    # shifted by the largest real part (none over an empty axis: the sum is 0 and the result -inf, as
    # PyTorch's); a real shift keeps a complex result on the principal branch, imag in (-pi, pi]
    m = np.max(np.real(x), axis=axis, keepdims=True) if np.size(x) else 0.0
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):  # log(0) = -inf: every element -inf, or none at all
        s = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return s if keepdims else np.reshape(s, np.sum(s, axis=axis).shape)[()]


LOGSUMEXP = primitive(
    "logsumexp",
    1,
    logsumexp_value,
    (
        lambda g, out, x, axis, keepdims: (
            _keep(g, x.shape, axis, keepdims, batch_ndim(g, out)) * np.exp(x - _keep(out, x.shape, axis, keepdims))
        ),
    ),
    saves="both",
    nparams=2,
    formulas=("softmax({0})",),
    doc="log(sum(exp(x))), without overflow",
    jvp=_reduce_jvp(lambda out, x, axis, keepdims: np.exp(x - _keep(out, np.shape(x), axis, keepdims))),
    batch="reduce",
)


def _abs2(x):
    return (x * x.conj()).real if np.iscomplexobj(x) else x * x


def _norm_jvp_complex(tangents, out, x, axis, keepdims):
    # d||z|| = Re(sum(conj(z) dz)) / ||z||
    w = np.conj(_norm_weight(out, x, axis, keepdims))
    return np.real(np.sum(tangents[0] * w, axis=_trailing(axis, np.ndim(x)), keepdims=keepdims))


def _norm_rule(g, out, x, axis, keepdims):
    # PyTorch: self * (grad / norm), with 0 where the norm is 0
    ko = _keep(out, x.shape, axis, keepdims)
    kg = _keep(g, x.shape, axis, keepdims, batch_ndim(g, out))
    return x * np.where(ko == 0, 0.0, kg / ko)


NORM = primitive(
    "norm",
    1,
    lambda x, axis, keepdims: np.sqrt(np.sum(_abs2(x), axis=axis, keepdims=keepdims)),
    (_norm_rule,),
    saves="both",
    nparams=2,
    torch="linalg_vector_norm",
    formulas=("{0}/norm",),
    doc="Euclidean norm sqrt(sum(x^2)); gradient 0 at 0",
    jvp=_reduce_jvp(_norm_weight),
    batch="reduce",
    # for complex z the same rule z * (grad / norm) is already PyTorch's (grad real)
    complex_vjp=(lambda g, out, x, axis, keepdims: _norm_rule(REAL(g), out, x, axis, keepdims),),
    complex_jvp=_norm_jvp_complex,
    continuation=lambda x, axis, keepdims: np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims)),
)
