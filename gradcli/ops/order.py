"""Values picked in order along an axis: sort and topk.

Both keep the positions they chose as a parameter (an int array of the output's shape, as
PyTorch saves ``indices``), so the row is linear in ``x``: the values are ``x`` gathered at
those positions, the gradient is scattered back to them (a tie sends it to the element the
index points at, as PyTorch), and the indices carry no gradient. The axis is a negative
offset from the end, so rules stay valid with leading batch axes.
"""

from __future__ import annotations

import numpy as np

from .core import primitive
from .shape import GETITEM, SCATTER

GROUP = "along an axis"


def mesh(index, axis):
    """The advanced index that reads ``take_along_axis(x, index, axis)`` as ``x[mesh]``."""
    index = np.asarray(index)
    nd = index.ndim
    at = nd + axis
    return tuple(
        index if d == at else np.reshape(np.arange(s), (1,) * d + (s,) + (1,) * (nd - d - 1))
        for d, s in enumerate(index.shape)
    )


def order(value, axis, descending):
    """Stable sorting positions along ``axis``; descending keeps equal elements in their order
    (NaN counts as the largest, as PyTorch)."""
    value = np.asarray(value)
    if not descending:
        return np.argsort(value, axis=axis, kind="stable")
    n = value.shape[axis]
    reverse = np.argsort(np.flip(value, axis=axis), axis=axis, kind="stable")
    return (n - 1) - np.flip(reverse, axis=axis)


def _gather(x, axis, index):
    if np.ndim(x) > np.ndim(index):  # leading batch axes: the same positions for each
        index = np.reshape(index, (1,) * (np.ndim(x) - np.ndim(index)) + np.shape(index))
    return np.take_along_axis(x, index, axis=axis)


def _rule(g, out, x, axis, index):
    return SCATTER(g, mesh(index, axis), tuple(x.shape), np.ndim(g) - np.ndim(index))


def _jvp(tangents, out, x, axis, index):
    t = tangents[0]
    nb = np.ndim(t) - np.ndim(index)
    return GETITEM(t, (slice(None),) * nb + mesh(index, axis))


def _sympy(sp, x, axis, index):
    return np.take_along_axis(np.asarray(x, dtype=object), np.asarray(index), axis=axis)


def _row(name, doc):
    return primitive(
        name,
        1,
        _gather,
        (_rule,),
        saves="meta",
        nparams=2,
        analytic=False,
        label=name,
        formulas=("1 at the position chosen (indices: none)",),
        jvp=_jvp,
        batch="linear",  # gathering at fixed positions is linear: its forward rule knows batch axes
        sympy=_sympy,
        doc=doc,
    )


SORT = _row("sort", "the values in ascending order along an axis (the last by default); no SymPy form")
TOPK = _row("topk", "the k largest values along an axis (the last by default), largest first; no SymPy form")
