"""Indexing functions of PyTorch as rows: gather, index_select, chunk's pieces, unbind's
pieces, masked_fill and repeat.

The first four read positions of ``x`` as ``x[index]`` does, through an index that their
parameters build (integer index arrays are parameters, never inputs: they have no gradient);
so their rules are those of ``getitem``: the gradient scattered back with repeated positions
adding up (``np.add.at``), the tangent read at the same positions. They are rows of their own
for PyTorch's backward names (GatherBackward0, IndexSelectBackward0, SplitBackward0,
UnbindBackward0). ``g`` and tangents may carry leading batch axes (the number is
``g.ndim - out.ndim``).
"""

from __future__ import annotations

import numpy as np

from .core import primitive
from .shape import SCATTER, batch_ndim, lift, take

GROUP = "indexing and shape"


def gather_index(ndim: int, dim: int, index) -> tuple:
    """``x[gather_index(x.ndim, dim, index)]`` is ``torch.gather(x, dim, index)``: ``index`` at
    ``dim``, the position itself along every other axis (``index`` may be smaller there). A
    0-d input is read as one of shape (1,)."""
    index = np.asarray(index)
    if index.size == 0:  # PyTorch reads nothing and checks nothing: any shape, any values
        return (np.zeros(index.shape, np.intp),) * ndim
    if ndim == 1:  # a 0-d index on a vector reads one element, as a 0-d result
        return (index,)
    shape = index.shape
    items = []
    for d in range(ndim):
        if d == dim:
            items.append(index)
        else:
            items.append(np.arange(shape[d]).reshape((shape[d],) + (1,) * (ndim - 1 - d)))
    return tuple(items)


def _along_index(dim: int, item) -> tuple:
    return (slice(None),) * dim + (item,)


def _reading_row(name: str, build, nparams: int, doc: str, **facts):
    """A row that reads ``x[build(x.ndim, *params)]``, with getitem's rules."""

    def forward(x, *params):
        return x[build(np.ndim(x), *params)]

    def rule(g, out, x, *params):
        return SCATTER(g, build(len(x.shape), *params), x.shape, batch_ndim(g, out))

    def jvp(tangents, out, x, *params):
        t = tangents[0]
        return take(t, build(len(x.shape), *params), np.ndim(t) - len(x.shape))

    return primitive(
        name, 1, forward, (rule,), saves="meta", nparams=nparams, jvp=jvp, batch="linear", doc=doc, **facts
    )


GATHER = _reading_row(
    "gather",
    gather_index,
    2,
    "x[i][j] = x[i][index[i][j]] along dim (torch.gather): gradient scattered back, repeated positions add up",
    label="gather",
    formulas=("scatter_add",),
    arg_names=("x",),
)

INDEX_SELECT = _reading_row(
    "index_select",
    lambda ndim, dim, index: _along_index(dim, np.asarray(index)),
    2,
    "the slices at the positions index along dim: gradient scattered back, repeated positions add up",
    label="index_select",
    formulas=("index_add",),
)

SPLIT = _reading_row(
    "split",
    lambda ndim, dim, start, length: _along_index(dim, slice(start, start + length)),
    3,
    "one piece of x along dim (chunk, split): gradient placed back, zeros elsewhere",
    label="split",
    formulas=("1 on the piece",),
    public=False,
)

UNBIND = _reading_row(
    "unbind",
    lambda ndim, dim, i: _along_index(dim, i),
    2,
    "the i-th slice along dim (unbind): gradient placed back, zeros elsewhere",
    label="unbind",
    formulas=("1 on the slice",),
    public=False,
)

# --- masked_fill ---------------------------------------------------------------------------------


def _masked_fill_kind(consts, params):
    return 0 if consts[1] else 1  # MaskedFillBackward0 (a number), 1 (a 0-d tensor)


def _masked_fill_jvp(tangents, out, x, value, mask):
    tx, tv = tangents
    t = tx if tx is not None else tv
    own = np.ndim(x) if tx is not None else np.ndim(value)
    nb = np.ndim(t) - own
    batch = np.shape(t)[:nb]
    if tx is None:
        tx = np.zeros(batch + np.shape(x))
    if tv is None:
        tv = np.zeros(batch + np.shape(value))
    tv = lift(tv, np.ndim(value), out.ndim)
    return np.where(mask, tv, lift(tx, np.ndim(x), out.ndim))


MASKED_FILL = primitive(
    "masked_fill",
    2,
    lambda x, value, mask: np.where(mask, value, x),
    (
        lambda g, out, x, value, mask: np.where(mask, 0.0, g),
        lambda g, out, x, value, mask: np.where(mask, g, 0.0),
    ),
    saves="meta",
    nparams=1,
    variant=_masked_fill_kind,
    jvp=_masked_fill_jvp,
    batch="linear",
    label="masked_fill",
    formulas=("1 where not mask", "1 where mask"),
    arg_names=("x", "value"),
    doc="value where mask is true, x elsewhere: gradient to x where not masked, to value summed where masked",
)

# --- repeat ----------------------------------------------------------------------------------------


def _repeat(x, sizes):
    sizes = tuple(sizes)
    x = np.reshape(x, (1,) * (len(sizes) - np.ndim(x)) + np.shape(x))
    return np.tile(x, sizes)


def _repeat_rule(g, out, x, sizes):
    nb = batch_ndim(g, out)
    gshape = np.shape(g)
    padded = (1,) * (len(sizes) - len(x.shape)) + tuple(x.shape)
    split = gshape[:nb] + tuple(n for s, m in zip(sizes, padded) for n in (s, m))
    summed = np.sum(np.reshape(g, split), axis=tuple(nb + 2 * k for k in range(len(sizes))))
    return np.reshape(summed, gshape[:nb] + tuple(x.shape))


def _repeat_jvp(tangents, out, x, sizes):
    t = tangents[0]
    nb = np.ndim(t) - len(x.shape)
    padded = np.reshape(t, np.shape(t)[:nb] + (1,) * (len(sizes) - len(x.shape)) + tuple(x.shape))
    return REPEAT(padded, (1,) * nb + tuple(sizes))


REPEAT = primitive(
    "repeat",
    1,
    _repeat,
    (_repeat_rule,),
    saves="meta",
    nparams=1,
    jvp=_repeat_jvp,
    batch="linear",
    label="repeat",
    formulas=("sum over the copies",),
    doc="x tiled sizes[i] times along each axis (new axes in front): gradient summed over the copies",
)
