"""Functions along an axis: softmax, log_softmax, cumsum, flip.

The parameter is the axis as a negative offset from the end (``flip``: a tuple of them),
so that rules address trailing axes and stay valid when ``g`` or a tangent carries
leading batch axes.
"""

from __future__ import annotations

import numpy as np

from .core import primitive
from .elementwise import CONJ, REAL
from .reduce import logsumexp_value

#: The group the rows of this module are listed in (``gradcli ops``, the README).
GROUP = "along an axis"


def _softmax(x, axis):
    if np.size(x) == 0:  # nothing to normalise (and no maximum): an empty result, as PyTorch's
        return np.exp(x)
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    return e / np.sum(e, axis=axis, keepdims=True)


def _softmax_rule(g, out, x, axis):
    # PyTorch's _softmax_backward_data: out * (g - sum(g * out))
    return out * (g - np.sum(g * out, axis=axis, keepdims=True))


SOFTMAX = primitive(
    "softmax",
    1,
    _softmax,
    (_softmax_rule,),
    saves="output",
    nparams=1,
    formulas=("{out}*(I - {out})",),
    doc="exp(x) / sum(exp(x)) along an axis (the last by default)",
    jvp=lambda tangents, out, x, axis: _softmax_rule(tangents[0], out, x, axis),
    batch="loop",
)


def _log_softmax_rule(g, out, x, axis):
    # PyTorch's _log_softmax_backward_data: g - exp(out) * sum(g)
    return g - np.exp(out) * np.sum(g, axis=axis, keepdims=True)


LOG_SOFTMAX = primitive(
    "log_softmax",
    1,
    lambda x, axis: x - logsumexp_value(x, (axis,), True),
    (_log_softmax_rule,),
    saves="output",
    nparams=1,
    formulas=("I - softmax({0})",),
    doc="x - logsumexp(x) along an axis (the last by default), without overflow",
    jvp=lambda tangents, out, x, axis: tangents[0] - np.sum(np.exp(out) * tangents[0], axis=axis, keepdims=True),
    batch="loop",
)


def _flip(x, axes):
    # a copy, as PyTorch's flip (NumPy's is a view: an in-place change of x would show through it)
    return np.flip(x, axis=axes).copy()


FLIP = primitive(
    "flip",
    1,
    _flip,
    (lambda g, out, x, axes: FLIP(g, axes),),
    saves="nothing",
    nparams=1,
    formulas=("1 (reversed)",),
    doc="the elements in reverse order along the axes (the last by default)",
    jvp=lambda tangents, out, x, axes: FLIP(tangents[0], axes),
    batch="linear",  # its forward rule is itself
)


CUMSUM = primitive(
    "cumsum",
    1,
    lambda x, axis: np.cumsum(x, axis=axis),
    # the reversed cumulative sum of the gradient
    (lambda g, out, x, axis: FLIP(CUMSUM(FLIP(g, (axis,)), axis), (axis,)),),
    saves="nothing",
    nparams=1,
    formulas=("1 (j >= i)",),
    doc="cumulative sum along an axis (the last by default)",
    jvp=lambda tangents, out, x, axis: CUMSUM(tangents[0], axis),
    batch="linear",  # its forward rule is itself
)


def _inserted(v, axis, after=False):
    """``v`` with a new axis of size 1 just before (or after) ``axis`` (counted from the end)."""
    shape = np.shape(v)
    at = len(shape) + axis + (1 if after else 0)
    return np.reshape(v, shape[:at] + (1,) + shape[at:])


def _others_upto(x, axis):
    """``C[..., i, j, ...] = prod(x_k for k <= j, k != i)`` for ``j >= i``, else 0: the partial
    derivatives of a cumulative product, exact where some x_k are 0 (row i is the cumulative
    product of x with x_i replaced by 1). The new axis i sits just before ``axis``."""
    n = np.shape(x)[axis]
    trailing = (1,) * (-axis - 1)
    eye = np.reshape(np.eye(n, dtype=bool), (n, n) + trailing)
    upper = np.reshape(np.triu(np.ones((n, n))), (n, n) + trailing)
    return CUMPROD(np.where(eye, 1.0, _inserted(x, axis)), axis) * upper


def _cumprod_rule(g, out, x, axis):
    if not (np.asarray(x) == 0).any():  # PyTorch's cumprod_backward without zeros
        return FLIP(CUMSUM(FLIP(g * out, (axis,)), axis), (axis,)) / x
    return np.sum(_inserted(g, axis) * _others_upto(x, axis), axis=axis)


def _cumprod_jvp(tangents, out, x, axis):
    (t,) = tangents
    if not (np.asarray(x) == 0).any():
        return out * CUMSUM(t / x, axis)
    return np.sum(_inserted(t, axis, after=True) * _others_upto(x, axis), axis=axis - 1)


CUMPROD = primitive(
    "cumprod",
    1,
    lambda x, axis: np.cumprod(x, axis=axis),
    (_cumprod_rule,),
    saves="both",
    nparams=1,
    formulas=("prod(x_k, k <= j, k != i)",),
    doc="cumulative product along an axis (the last by default); exact at zeros",
    jvp=_cumprod_jvp,
    batch="loop",
)


def _n(x, axis):
    shape = np.shape(x)
    n = len(shape)
    return int(np.prod([s for i, s in enumerate(shape) if axis is None or i - n in axis], dtype=np.int64))


def _centred(x, axis):
    return x - np.mean(x, axis=axis, keepdims=True)


def _kept(v, x, axis, keepdims, nb=0):
    """``v`` (reduced) reshaped so it broadcasts against ``batch + x.shape``."""
    if keepdims:
        return v
    shape = np.shape(x)
    n = len(shape)
    kept = tuple(1 if axis is None or i - n in axis else s for i, s in enumerate(shape))
    return np.reshape(v, np.shape(v)[:nb] + kept)


def _var(x, axis, keepdims, correction):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.var(x, axis=axis, keepdims=keepdims, ddof=correction)


def _two_over_dof(x, axis, correction):
    """2 / (n - correction), a Python float (float32 stays float32): inf for no degree of freedom
    (a single element), as PyTorch's C++ division gives (its gradient is then 0 * inf = nan)."""
    dof = _n(x, axis) - correction
    return 2.0 / dof if dof else float("inf")


def _reduced_ndim(x, axis, keepdims) -> int:
    """How many axes the reduction of ``x`` over ``axis`` has (read from ``x``, not the output)."""
    n = np.ndim(x)
    return n if keepdims else 0 if axis is None else n - len(axis)


def _var_rule(g, out, x, axis, keepdims, correction):
    # PyTorch's var_backward: (2 / (n - correction)) * grad * (x - mean(x)); it reads the input alone
    # (the output is not saved: changing it in place later does not spoil the gradient)
    nb = np.ndim(g) - _reduced_ndim(x, axis, keepdims)
    with np.errstate(invalid="ignore"):
        return _two_over_dof(x, axis, correction) * _kept(g, x, axis, keepdims, nb) * _centred(x, axis)


def _var_weight(out, x, axis, keepdims, correction):
    with np.errstate(invalid="ignore"):
        return _two_over_dof(x, axis, correction) * _centred(x, axis)


def _var_jvp(tangents, out, x, axis, keepdims, correction):
    axes = tuple(range(-np.ndim(x), 0)) if axis is None else axis
    return np.sum(tangents[0] * _var_weight(out, x, axis, keepdims, correction), axis=axes, keepdims=keepdims)


def _complex_rules(rule, weight):
    """var's and std's rules for complex x (real outputs: sum |x - mean|^2), PyTorch's: the gradient
    is the real rule's with the real part of g; the tangent Re(sum(conj(t) w)) with the real rule's weight."""

    def vjp(g, out, x, axis, keepdims, correction):
        return rule(REAL(g), out, x, axis, keepdims, correction)

    def jvp(tangents, out, x, axis, keepdims, correction):
        axes = tuple(range(-np.ndim(x), 0)) if axis is None else axis
        w = weight(out, x, axis, keepdims, correction)
        return REAL(np.sum(CONJ(tangents[0]) * w, axis=axes, keepdims=keepdims))

    return {"complex_vjp": (vjp,), "complex_jvp": jvp}


def _var_continuation(x, axis, keepdims, correction):
    return np.sum(_centred(x, axis) ** 2, axis=axis, keepdims=keepdims) / (_n(x, axis) - correction)


VAR = primitive(
    "var",
    1,
    _var,
    (_var_rule,),
    saves="inputs",
    nparams=3,
    analytic=False,
    group="reductions",
    formulas=("2*({0} - mean)/(n - 1)",),
    doc="variance sum((x - mean)^2) / (n - 1)",
    jvp=_var_jvp,
    batch="loop",
    continuation=_var_continuation,
    **_complex_rules(_var_rule, _var_weight),
)


def _std_weight(out, x, axis, keepdims, correction):
    """d std / d x: (x - mean) / ((n - correction) * std), 0 where std is 0 (PyTorch's std_backward)."""
    ko = _kept(out, x, axis, keepdims)
    return ko, np.where(ko == 0, 0.0, _centred(x, axis) / np.where(ko == 0, 1.0, ko * (_n(x, axis) - correction)))


def _std_rule(g, out, x, axis, keepdims, correction):
    ko, w = _std_weight(out, x, axis, keepdims, correction)
    return np.where(ko == 0, 0.0, _kept(g, x, axis, keepdims, np.ndim(g) - np.ndim(out)) * w)


def _std_jvp(tangents, out, x, axis, keepdims, correction):
    axes = tuple(range(-np.ndim(x), 0)) if axis is None else axis
    return np.sum(tangents[0] * _std_weight(out, x, axis, keepdims, correction)[1], axis=axes, keepdims=keepdims)


STD = primitive(
    "std",
    1,
    lambda x, axis, keepdims, correction: np.sqrt(_var(x, axis, keepdims, correction)),
    (_std_rule,),
    saves="both",
    nparams=3,
    analytic=False,
    group="reductions",
    formulas=("({0} - mean)/((n - 1)*std)",),
    doc="standard deviation sqrt(var(x)); gradient 0 where it is 0",
    jvp=_std_jvp,
    batch="loop",
    continuation=lambda x, axis, keepdims, correction: np.sqrt(_var_continuation(x, axis, keepdims, correction)),
    **_complex_rules(_std_rule, lambda *args: _std_weight(*args)[1]),
)
