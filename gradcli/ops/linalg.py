"""Products of vectors and matrices: dot, mv, mm and general matmul.

``a @ b`` picks the primitive by the operands' dimensions, as PyTorch does, so
graphs show PyTorch's names (DotBackward0, MvBackward0, MmBackward0).
"""

from __future__ import annotations

import numpy as np

from .core import primitive


def _col(g):
    """``g[..., None]``: a trailing axis to broadcast against a vector."""
    return np.reshape(g, g.shape + (1,))


def _row(g):
    """``g[..., None, :]``."""
    return np.reshape(g, g.shape[:-1] + (1,) + g.shape[-1:])


def _drop_row(r):
    return np.reshape(r, r.shape[:-2] + r.shape[-1:])


DOT = primitive(
    "dot",
    2,
    np.dot,
    (lambda g, out, a, b: _col(g) * b, lambda g, out, a, b: _col(g) * a),
    saves="inputs",
    formulas=("{1}", "{0}"),
    label="dot",
    jvp=lambda ta, tb, out, a, b: (0.0 if ta is None else ta @ b) + (0.0 if tb is None else tb @ a),
    doc="inner product of two vectors",
)
MV = primitive(
    "mv",
    2,
    np.matmul,
    (lambda g, out, a, x: _col(g) * x, lambda g, out, a, x: g @ a),
    saves="inputs",
    formulas=("{1}", "{0}"),
    label="@",
    public=False,
    doc="matrix times vector",
)
MM = primitive(
    "mm",
    2,
    np.matmul,
    (lambda g, out, a, b: g @ b.T, lambda g, out, a, b: a.T @ g),
    saves="inputs",
    formulas=("{1}^T", "{0}^T"),
    label="@",
    public=False,
    doc="matrix times matrix",
)


def _matmul_da(g, out, a, b):
    if b.ndim == 1:  # (..., n, k) @ (k,)
        return _col(g) * b
    if a.ndim == 1:  # (k,) @ (..., k, m)
        return _drop_row(_row(g) @ np.swapaxes(b, -1, -2))
    return g @ np.swapaxes(b, -1, -2)


def _matmul_db(g, out, a, b):
    if a.ndim == 1:  # (k,) @ (..., k, m): outer product
        return np.reshape(a, (-1, 1)) * _row(g)
    if b.ndim == 1:  # (..., n, k) @ (k,)
        return _drop_row(_row(g) @ a)
    return np.swapaxes(a, -1, -2) @ g


MATMUL = primitive(
    "matmul",
    2,
    np.matmul,
    (_matmul_da, _matmul_db),
    saves="inputs",
    formulas=("{1}^T", "{0}^T"),
    label="@",
    numpy=(np.matmul,),
    doc="matrix product with NumPy's broadcasting (a @ b)",
)


def matmul_primitive(a_ndim: int, b_ndim: int):
    """The primitive PyTorch would record for ``a @ b``."""
    if a_ndim == 1 and b_ndim == 1:
        return DOT
    if a_ndim == 2 and b_ndim == 2:
        return MM
    if a_ndim == 2 and b_ndim == 1:
        return MV
    return MATMUL
