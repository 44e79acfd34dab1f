"""Products of vectors and matrices: dot, mv, mm and general matmul.

``a @ b`` picks the primitive by the operands' dimensions, as PyTorch does, so
graphs show PyTorch's names (DotBackward0, MvBackward0, MmBackward0).
"""

from __future__ import annotations

import numpy as np

from .core import primitive
from .shape import lift

#: The group the rows of this module are listed in (``gradcli ops``, the README).
GROUP = "matrices"


def _col(g):
    """``g[..., None]``: a trailing axis to broadcast against a vector."""
    return np.reshape(g, g.shape + (1,))


def _row(g):
    """``g[..., None, :]``."""
    return np.reshape(g, g.shape[:-1] + (1,) + g.shape[-1:])


def _drop_row(r):
    return np.reshape(r, r.shape[:-2] + r.shape[-1:])


def _dot_side(t, v):
    """``t @ v`` for a tangent ``t`` (batch, n) and a value ``v`` (n,), where a zero tangent
    element times an infinite or NaN element of ``v`` counts 0 (it does not move), as reverse
    mode has it. Only a non-finite product pays for the second pass."""
    product = t @ v
    if not isinstance(v, np.ndarray) or np.isfinite(np.sum(product)) or np.isfinite(v).all():
        return product
    t = np.asarray(t)
    bad = ~np.isfinite(v)
    masked = np.where((t != 0) & bad, t * np.where(bad, v, 0.0), 0.0)
    return t @ np.where(bad, 0.0, v) + masked.sum(axis=-1)


def _dot_jvp(tangents, out, a, b):
    ta, tb = tangents
    return (0.0 if ta is None else _dot_side(ta, b)) + (0.0 if tb is None else _dot_side(tb, a))


def _einsum(spec):
    """A product of two operands that both carry ``nb`` leading batch axes, by ``einsum``."""
    return lambda a, b, out, nb: np.einsum(spec, a, b)


def _matmul_both(a, b, out, nb):
    """Each point's own ``a @ b`` where both carry ``nb`` leading batch axes: one batched
    product of matrices (lifted so the batch axes stay in front), point by point where a
    side is a vector (its row or column would have to be added and dropped)."""
    if min(np.ndim(a), np.ndim(b)) - nb > 1:
        ndim = max(np.ndim(out), 2)
        return lift(a, np.ndim(a) - nb, ndim) @ lift(b, np.ndim(b) - nb, ndim)
    batch = np.shape(a)[:nb]
    rows = zip(np.reshape(a, (-1,) + np.shape(a)[nb:]), np.reshape(b, (-1,) + np.shape(b)[nb:]))
    out = np.stack([np.asarray(np.matmul(x, y)) for x, y in rows])
    return out.reshape(batch + out.shape[1:])


DOT = primitive(
    "dot",
    2,
    np.dot,
    (lambda g, out, a, b: _col(g) * b, lambda g, out, a, b: _col(g) * a),
    saves="inputs",
    formulas=("{1}", "{0}"),
    label="dot",
    jvp=_dot_jvp,
    batch="product",
    batch_both=_einsum("...i,...i->..."),
    doc="inner product of two vectors",
    reads=((1,), (0,)),
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
    jvp=lambda ts, out, a, x: (0.0 if ts[0] is None else ts[0] @ x) + (0.0 if ts[1] is None else ts[1] @ a.T),
    batch="product",
    batch_both=_einsum("...ij,...j->...i"),
    reads=((1,), (0,)),
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
    jvp=lambda ts, out, a, b: (0.0 if ts[0] is None else ts[0] @ b) + (0.0 if ts[1] is None else a @ ts[1]),
    batch="product",
    batch_both=_matmul_both,
    reads=((1,), (0,)),
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


def _matmul_side(t, own, other, out_ndim, left):
    """d(a @ b) along a tangent of one side: the tangent lifted so its batch axes stay in front."""
    if own.ndim == 1:  # a vector side: make it a row (left) or a column (right), then drop that axis
        matrix = lift(np.reshape(t, np.shape(t) + (1,)) if not left else _row(t), 2, max(2, other.ndim))
        product = matrix @ other if left else other @ matrix
        return _drop_row(product) if left else np.reshape(product, np.shape(product)[:-1])
    lifted = lift(t, own.ndim, max(own.ndim, out_ndim if other.ndim > 1 else own.ndim))
    return lifted @ other if left else other @ lifted


def _matmul_jvp(tangents, out, a, b):
    ta, tb = tangents
    total = 0.0
    if ta is not None:
        total = total + _matmul_side(ta, a, b, np.ndim(out), True)
    if tb is not None:
        total = total + _matmul_side(tb, b, a, np.ndim(out), False)
    return total


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
    jvp=_matmul_jvp,
    batch="product",
    batch_both=_matmul_both,
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


# --- matrix structure: trace, tril, triu (diag is composed: indexing and a product) ---------------------------------------------------


def _trace_rule(g, out, x):
    n = x.shape[-1]
    return np.reshape(g, np.shape(g) + (1, 1)) * np.eye(x.shape[-2], n)


TRACE = primitive(
    "trace",
    1,
    lambda x: np.trace(x, axis1=-2, axis2=-1),
    (_trace_rule,),
    saves="meta",
    label="trace",
    formulas=("I",),
    jvp=lambda ts, out, x: TRACE(ts[0]),  # the forward takes leading batch axes
    batch="linear",
    sympy=lambda sp, x: sum(np.diagonal(np.asarray(x, dtype=object)), sp.Integer(0)),
    doc="sum of the diagonal of a matrix",
)


def _triangle(name, np_fn, keep):
    # linear and its own adjoint: the rules apply the primitive itself (the forward takes
    # leading batch axes), so they record on tensors for higher derivatives
    prim = primitive(
        name,
        1,
        lambda x, k: np_fn(x, k),
        (lambda g, out, x, k: prim(g, k),),
        saves="meta",
        nparams=1,
        label=name,
        formulas=(f"1 {keep}, else 0",),
        jvp=lambda ts, out, x, k: prim(ts[0], k),
        batch="linear",
        sympy=lambda sp, x, k: np_fn(np.asarray(x, dtype=object), k),
        doc=f"the matrix with the entries {keep} kept, the others 0",
    )
    return prim


TRIL = _triangle("tril", np.tril, "on and below the diagonal")
TRIU = _triangle("triu", np.triu, "on and above the diagonal")


# --- diagonals: diagonal reads one, diag_embed writes one; each is the other's adjoint ------------------


def _diagonal(x, offset, dim1, dim2):
    """A view of ``x`` (writable when ``x`` is, as PyTorch's: an in-place change of it reaches ``x``;
    NumPy's own diagonal is read-only), the diagonal as the last axis, as in PyTorch."""
    x = np.asarray(x)
    moved = np.moveaxis(x, (dim1, dim2), (-2, -1))
    rows, cols = diagonal_positions(moved.shape[-2], moved.shape[-1], offset)
    if len(rows) == 0:
        return np.diagonal(x, offset, dim1, dim2).copy()
    strides = moved.strides[:-2] + (moved.strides[-2] + moved.strides[-1],)
    # (from the first element of the diagonal on, one row and one column down at each step)
    corner = moved[..., rows[0] :, cols[0] :]
    return np.lib.stride_tricks.as_strided(corner, moved.shape[:-2] + (len(rows),), strides)


def diagonal_positions(n1: int, n2: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Where the ``offset`` diagonal of an ``n1`` x ``n2`` matrix lies: rows and columns."""
    length = max(0, min(n1 - max(-offset, 0), n2 - max(offset, 0)))
    k = np.arange(length)
    return k + max(-offset, 0), k + max(offset, 0)


def _diag_embed(v, shape, offset, dim1, dim2):
    """Zeros of ``shape`` (after ``v``'s batch axes) with ``v``'s last axis on the ``offset`` diagonal
    of axes ``dim1``, ``dim2`` (negative: counted from the end)."""
    v = np.asarray(v)
    nb = v.ndim - (len(shape) - 1)
    out = np.zeros(v.shape[:nb] + tuple(shape), dtype=v.dtype)
    moved = np.moveaxis(out, (dim1, dim2), (-2, -1))  # a view: writing into it fills out
    rows, cols = diagonal_positions(shape[dim1], shape[dim2], offset)
    moved[..., rows, cols] = v
    return out


DIAGONAL = primitive(
    "diagonal",
    1,
    _diagonal,
    (lambda g, out, x, offset, dim1, dim2: DIAG_EMBED(g, tuple(x.shape), offset, dim1, dim2),),
    saves="meta",
    nparams=3,  # (offset, dim1, dim2), the axes as negative offsets so that batch axes may lead
    jvp=lambda ts, out, x, offset, dim1, dim2: DIAGONAL(ts[0], offset, dim1, dim2),
    batch="linear",
    label="diagonal",
    formulas=("1 on the diagonal, else 0",),
    doc="the offset diagonal of axes dim1, dim2, as the last axis (torch.diagonal)",
)
DIAG_EMBED = primitive(
    "diag_embed",
    1,
    _diag_embed,
    (lambda g, out, v, shape, offset, dim1, dim2: DIAGONAL(g, offset, dim1, dim2),),
    saves="nothing",
    nparams=4,  # (shape, offset, dim1, dim2): the shape made, and where its diagonal lies
    jvp=lambda ts, out, v, shape, offset, dim1, dim2: DIAG_EMBED(ts[0], shape, offset, dim1, dim2),
    batch="linear",
    label="diag_embed",
    formulas=("the diagonal of the gradient",),
    public=False,
    doc="zeros with the last axis of v on a diagonal (torch.diag_embed, diag of a vector)",
)


# --- inverse ------------------------------------------------------------------------------------------


def _sympy_matrix(sp, x):
    return sp.Matrix(np.asarray(x, dtype=object).tolist())


def _inv_rule(g, out, x):
    """d inv(A) = -inv(A) dA inv(A): the gradient -inv(A)^T g inv(A)^T (from the output, as PyTorch)."""
    t = np.swapaxes(out, -1, -2)
    return -(t @ g @ t)


INV = primitive(
    "inv",
    1,
    np.linalg.inv,
    (_inv_rule,),
    saves="output",
    torch="linalg_inv_ex",
    label="inv",
    formulas=("-{out}^T g {out}^T",),
    jvp=lambda ts, out, x: -(out @ ts[0] @ out),
    batch="loop",
    sympy=lambda sp, x: np.array(_sympy_matrix(sp, x).inv().tolist(), dtype=object),
    domain=((0.5, 1.5),),
    doc="inverse of a square matrix",
)


# --- determinant -------------------------------------------------------------------------------------


def _others_product(s):
    """``prod(s_j for j != i)`` along the last axis, exact where some s_j are 0 (no division)."""
    ones = np.ones(np.shape(s)[:-1] + (1,), dtype=np.result_type(s))
    left = np.cumprod(np.concatenate([ones, s[..., :-1]], axis=-1), axis=-1)
    right = np.flip(np.cumprod(np.concatenate([ones, np.flip(s, axis=-1)[..., :-1]], axis=-1), axis=-1), axis=-1)
    return left * right


def _svd_cofactors(a):
    """The cofactor matrix (the adjugate transposed) by the SVD, as PyTorch's singular case: right
    where ``a`` is singular, where det * inv(a)^T is not defined."""
    u, s, vh = np.linalg.svd(a)
    alpha = np.linalg.det(u) * np.linalg.det(vh)
    if np.iscomplexobj(a):
        u, vh = np.conj(u), np.conj(vh)
    return np.reshape(alpha, np.shape(alpha) + (1, 1)) * ((u * _others_product(s)[..., None, :]) @ vh)


def _minor_cofactors(a):
    """The cofactor matrix from the determinants of the minors, built from rows (indexing and det),
    so that it records on tensors: second derivatives, exact at singular matrices too."""
    n = np.shape(a)[-1]
    if n <= 1:  # 1 x 1: the cofactor is 1; 0 x 0 (det 1): no entries
        return np.ones(np.shape(a))
    keep = np.array([[k for k in range(n) if k != i] for i in range(n)])
    minors = a[..., keep[:, None, :, None], keep[None, :, None, :]]  # (..., n, n, n-1, n-1)
    sign = (-1.0) ** np.add.outer(np.arange(n), np.arange(n))
    return DET(minors) * sign


#: Up to this size the cofactors of an array are its minors' determinants (exact, cheap); above, the SVD.
MINORS_UP_TO = 4


def cofactors(a):
    """d det(A) / dA: the cofactor matrix. Small matrices: the minors' determinants. Larger: on arrays
    the SVD; on tensors (recorded, for higher derivatives) det(A) inv(A)^T, the minors where A is
    singular."""
    if np.shape(a)[-1] <= MINORS_UP_TO:
        return _minor_cofactors(a)
    if isinstance(a, np.ndarray):
        return _svd_cofactors(a)
    try:
        inverse = INV(a)
    except np.linalg.LinAlgError:
        return _minor_cofactors(a)
    d = DET(a)
    return np.reshape(d, np.shape(d) + (1, 1)) * np.swapaxes(inverse, -1, -2)


def _det_rule(g, out, a):
    return np.reshape(g, np.shape(g) + (1, 1)) * cofactors(a)


DET = primitive(
    "det",
    1,
    np.linalg.det,
    (_det_rule,),
    saves="inputs",
    torch="linalg_det",
    label="det",
    formulas=("cofactors({0})",),
    jvp=lambda ts, out, a: np.sum(ts[0] * cofactors(a), axis=(-2, -1)),
    batch="loop",
    sympy=lambda sp, x: _sympy_matrix(sp, x).det(),
    domain=((0.5, 1.5),),
    doc="determinant of a square matrix",
)


# --- solve -------------------------------------------------------------------------------------------


def _solve(a, b, vector):
    """``x`` with ``a @ x = b``; ``vector``: b's last axis is the vector (batch axes in front)."""
    if vector:
        return np.linalg.solve(a, b[..., None])[..., 0]
    return np.linalg.solve(a, b)


def _solve_db(g, out, a, b, vector):
    """A^-T g (PyTorch's LinalgSolveExBackward0)."""
    return SOLVE(np.swapaxes(a, -1, -2), g, vector)


def _solve_da(g, out, a, b, vector):
    """-(A^-T g) x^T."""
    gb = SOLVE(np.swapaxes(a, -1, -2), g, vector)
    if vector:
        return -(gb[..., :, None] * out[..., None, :])
    return -(gb @ np.swapaxes(out, -1, -2))


def _solve_jvp(tangents, out, a, b, vector):
    """dx = A^-1 (db - dA x)."""
    ta, tb = tangents
    rhs = 0.0 if tb is None else tb
    if ta is not None:
        rhs = rhs - ((ta @ out[..., None])[..., 0] if vector else ta @ out)
    return SOLVE(a, rhs, vector)


def _sympy_solve(sp, a, b, vector):
    rhs = np.asarray(b, dtype=object)
    x = _sympy_matrix(sp, a).LUsolve(sp.Matrix(rhs.reshape(rhs.shape[0], -1).tolist()))
    return np.array(x.tolist(), dtype=object).reshape(rhs.shape)


SOLVE = primitive(
    "solve",
    2,
    _solve,
    (_solve_da, _solve_db),
    saves="both",
    nparams=1,
    torch="linalg_solve_ex",
    label="solve",
    arg_names=("A", "b"),
    formulas=("-(A^-T g) {out}^T", "A^-T g"),
    jvp=_solve_jvp,
    batch="loop",
    sympy=_sympy_solve,
    domain=((0.5, 1.5), (-3.0, 3.0)),
    doc="x with A @ x = b (b a vector or a matrix)",
)


# --- cross product ------------------------------------------------------------------------------------


def _cross(a, b, dim):
    return np.cross(a, b, axisa=dim, axisb=dim, axisc=dim)


def _cross_jvp(tangents, out, a, b, dim):
    ta, tb = tangents  # (lifted to the output's axes, so that their batch axes stay in front)
    left = None if ta is None else CROSS(lift(ta, np.ndim(a), out.ndim), b, dim)
    right = None if tb is None else CROSS(a, lift(tb, np.ndim(b), out.ndim), dim)
    return right if left is None else left if right is None else left + right


CROSS = primitive(
    "cross",
    2,
    _cross,
    (lambda g, out, a, b, dim: CROSS(b, g, dim), lambda g, out, a, b, dim: CROSS(g, a, dim)),
    nparams=1,  # dim, a negative offset from the end (leading batch axes broadcast)
    torch="linalg_cross",
    label="cross",
    formulas=("{1} x g", "g x {0}"),
    jvp=_cross_jvp,
    batch="loop",
    reads=((1,), (0,)),
    sympy=lambda sp, a, b, dim=-1: _cross(np.asarray(a, dtype=object), np.asarray(b, dtype=object), dim),
    doc="cross product of 3-vectors along dim (the vectors broadcast)",
)
