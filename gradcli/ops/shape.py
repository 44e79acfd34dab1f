"""Primitives that move values around: reshape, permute, broadcast, indexing.

All are linear, so their forward-mode rule is the forward itself applied to the
tangent. Rules index trailing axes: ``g`` may carry leading batch axes (the
number is ``g.ndim - out.ndim``).
"""

from __future__ import annotations

import numpy as np

from .core import primitive

#: The group the rows of this module are listed in (``gradcli ops``, the README).
GROUP = "indexing and shape"


def batch_ndim(g, out) -> int:
    return np.ndim(g) - out.ndim


def lift(t, ndim: int, target_ndim: int):
    """A tangent of ``ndim`` own axes (after its batch axes) given ones up to ``target_ndim``,
    so that it broadcasts against values of that many axes (batch axes stay in front)."""
    missing = target_ndim - ndim
    if missing <= 0:
        return t
    nb = np.ndim(t) - ndim
    shape = np.shape(t)
    return np.reshape(t, shape[:nb] + (1,) * missing + shape[nb:])


def unbroadcast(g, shape: tuple[int, ...], nbatch: int = 0):
    """Sum ``g`` down to ``batch + shape``, undoing NumPy broadcasting.

    The one place where broadcasting is undone (DESIGN principle 4).
    """
    gshape = g.shape
    target = gshape[:nbatch] + shape
    if gshape == target:
        return g
    lead = len(gshape) - len(target)
    axes = tuple(range(nbatch, nbatch + lead))
    offset = nbatch + lead
    axes += tuple(offset + i for i, n in enumerate(shape) if n == 1 and gshape[offset + i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(target)


# --- reshape ----------------------------------------------------------------------------------


def _reshape_rule(g, out, x, shape):
    return np.reshape(g, g.shape[: batch_ndim(g, out)] + x.shape)


RESHAPE = primitive(
    "reshape",
    1,
    lambda x, shape: np.reshape(x, shape),
    (_reshape_rule,),
    saves="meta",
    nparams=1,
    torch="view",
    jvp=lambda ts, out, x, shape: np.reshape(ts[0], ts[0].shape[: np.ndim(ts[0]) - len(x.shape)] + shape),
    batch="linear",
    sympy=None,
    public=False,
    doc="the same values in another shape",
)

# --- permute ----------------------------------------------------------------------------------


def _permute_trailing(v, axes, nbatch):
    return np.transpose(v, tuple(range(nbatch)) + tuple(nbatch + a for a in axes))


def _permute_rule(g, out, x, axes):
    return _permute_trailing(g, tuple(np.argsort(axes)), batch_ndim(g, out))


PERMUTE = primitive(
    "permute",
    1,
    lambda x, axes: np.transpose(x, axes),
    (_permute_rule,),
    saves="meta",
    nparams=1,
    jvp=lambda ts, out, x, axes: _permute_trailing(ts[0], axes, np.ndim(ts[0]) - len(x.shape)),
    batch="linear",
    public=False,
    doc="reorder axes (x.T, x.permute)",
)

# --- broadcast ------------------------------------------------------------------------------


EXPAND = primitive(
    "expand",
    1,
    lambda x, shape: np.broadcast_to(x, shape),
    (lambda g, out, x, shape: unbroadcast(g, x.shape, batch_ndim(g, out)),),
    saves="meta",
    nparams=1,
    public=False,
    jvp=lambda ts, out, x, shape: np.broadcast_to(
        lift(ts[0], len(x.shape), len(shape)), ts[0].shape[: np.ndim(ts[0]) - len(x.shape)] + shape
    ),
    batch="linear",
    doc="broadcast to a larger shape without copying",
)

# --- indexing --------------------------------------------------------------------------------------


def is_basic_index(index: tuple) -> bool:
    """Ints, slices, None and Ellipsis: a view, no repeated positions."""
    return all(isinstance(i, (int, np.integer, slice)) or i is None or i is Ellipsis for i in index)


def _batched(index: tuple, nbatch: int) -> tuple:
    return (slice(None),) * nbatch + index if nbatch else index


class PickIndex(tuple):
    """The index that picks ``max(x, dim)``'s values (the positions of its indices): read as any index,
    named as PyTorch names the node (``op``: "max" or "min" gives MaxBackward0)."""

    op = "index"


def _separated(index: tuple) -> int | None:
    """How many axes advanced indexing makes when NumPy puts them first (array or integer
    items separated by a slice, None or Ellipsis: ``x[[0, 1], :, [1, 0]]``), else ``None``.

    Batch axes in front of such an index would land after those axes; ``take`` and the
    scatter move them back to the front.
    """
    arrays = [k for k, i in enumerate(index) if isinstance(i, np.ndarray)]
    if not arrays:
        return None
    spots = [k for k, i in enumerate(index) if isinstance(i, (np.ndarray, int, np.integer)) and not isinstance(i, bool)]
    if spots[-1] - spots[0] + 1 == len(spots):
        return None
    shapes = [(int(i.sum()),) if i.dtype == np.bool_ else i.shape for i in (index[k] for k in arrays)]
    return len(np.broadcast_shapes(*shapes))


def split_selects(index: tuple) -> tuple[tuple, tuple] | None:
    """PyTorch applies integer items as selections before advanced indexing; NumPy counts them
    as advanced items, which differs where they are apart from the arrays (``x[1, :, [0, 1]]``:
    NumPy puts the list's axis first, PyTorch keeps it last). There, the two steps
    (integers and slices, then the rest); else ``None``."""
    if _separated(index) is None or not any(isinstance(i, (int, np.integer)) for i in index):
        return None
    first, rest = [], []
    for i in index:
        if isinstance(i, (int, np.integer)):
            first.append(i)
        elif isinstance(i, np.ndarray):
            first.extend((slice(None),) * (i.ndim if i.dtype == np.bool_ else 1))
            rest.append(i)
        elif i is None:
            first.append(None)
            rest.append(slice(None))
        else:  # a slice or Ellipsis
            first.append(i)
            rest.append(slice(None) if isinstance(i, slice) else i)
    return tuple(first), tuple(rest)


def take(v, index: tuple, nbatch: int):
    """``v[index]`` on a value with ``nbatch`` leading batch axes, which stay in front."""
    result = v[_batched(index, nbatch)]
    if nbatch and not is_basic_index(index):
        k = _separated(index)
        if k is not None:  # NumPy put the advanced axes before the batch axes
            ndim = np.ndim(result)
            result = np.transpose(result, (*range(k, k + nbatch), *range(k), *range(k + nbatch, ndim)))
    return result


def _index_kind(consts, params):
    (index,) = params
    if not isinstance(index, tuple):
        return ("index", 0)
    if index.__class__ is PickIndex:
        return (index.op, 0)
    if len(index) == 1 and isinstance(index[0], (int, np.integer)):
        return ("select", 0)
    if is_basic_index(index) and all(isinstance(i, slice) for i in index):
        return ("slice", 0)
    return ("index", 0)


def _getitem_rule(g, out, x, index):
    return SCATTER(g, index, x.shape, batch_ndim(g, out))


def _getitem(x, index):
    out = x[index]
    if out.__class__ is not np.ndarray and x.__class__ is np.ndarray and (x.flags.writeable or x.base is not None):
        # one element picked by integers: a 0-d view of x (NumPy gives a copy), as PyTorch's, so that
        # x[0].add_(1) changes x (an expanded x too)
        return x[(*index, Ellipsis)]
    return out


GETITEM = primitive(
    "getitem",
    1,
    _getitem,
    (_getitem_rule,),
    saves="meta",
    nparams=1,
    variant=_index_kind,
    jvp=lambda ts, out, x, index: take(ts[0], index, np.ndim(ts[0]) - len(x.shape)),
    batch="linear",
    public=False,
    doc="x[i], x[i:j], x[mask]: gradient scattered back to the positions read",
)


def _scatter(src, index, shape, nbatch):
    result = np.zeros(np.shape(src)[:nbatch] + tuple(shape), dtype=np.result_type(src, np.float32))
    full = _batched(index, nbatch)
    if is_basic_index(index):
        result[full] = src
    else:  # repeated positions must add up
        k = _separated(index) if nbatch else None
        if k is not None:  # the positions read put the advanced axes before the batch axes
            ndim = np.ndim(src)
            src = np.transpose(src, (*range(nbatch, nbatch + k), *range(nbatch), *range(nbatch + k, ndim)))
        np.add.at(result, full, src)
    return result


def _scatter_rule(g, out, src, index, shape, nbatch):
    return take(g, index, nbatch + batch_ndim(g, out))


SCATTER = primitive(
    "scatter",
    1,
    _scatter,
    (_scatter_rule,),
    saves="meta",
    nparams=3,
    torch="index_add",
    jvp=lambda ts, out, src, index, shape, nbatch: SCATTER(ts[0], index, shape, nbatch + np.ndim(ts[0]) - src.ndim),
    batch="linear",
    public=False,
    doc="zeros of a shape with values added at an index (the adjoint of indexing)",
)


def _index_put(x, value, index):
    # x's dtype, as an assignment keeps it (float64 values into float32 are float32, and so is their
    # tangent); a value of another kind (complex into real) widens it, for the caller to refuse
    own, other = np.result_type(x), np.result_type(value)
    result = np.array(x, copy=True, dtype=own if np.can_cast(other, own, "same_kind") else np.result_type(x, value))
    result[index] = value
    return result


def _index_put_rule_x(g, out, x, value, index):
    return INDEX_PUT(g, 0.0, _batched(index, batch_ndim(g, out)))


def _index_put_rule_value(g, out, x, value, index):
    return GETITEM(g, _batched(index, batch_ndim(g, out)))


def _index_put_jvp(tangents, out, x, value, index):
    tx, tv = tangents
    nb = np.ndim(tx) - np.ndim(x) if tx is not None else np.ndim(tv) - np.ndim(value)
    base = tx if tx is not None else np.zeros(np.shape(tv)[:nb] + np.shape(x), out.dtype)  # (float32 stays so)
    if tv is None:
        return INDEX_PUT(base, 0.0, _batched(index, nb))
    region = np.ndim(np.empty(np.shape(x))[index])  # a value broadcast into the region: lift its tangent
    return INDEX_PUT(base, lift(tv, np.ndim(value), region), _batched(index, nb))


INDEX_PUT = primitive(
    "index_put",
    2,
    _index_put,
    (_index_put_rule_x, _index_put_rule_value),
    saves="meta",
    nparams=1,
    public=False,
    jvp=_index_put_jvp,
    batch="linear",
    doc="x with x[index] replaced by value (x[index] = value)",
)

# --- joining --------------------------------------------------------------------------------------------


def _join_jvp(join):
    """Forward rule of stack/cat: join the tangents (zeros for inputs without one) after the batch axes."""

    def jvp(tangents, out, *args):
        *xs, axis = args
        present = next(i for i, t in enumerate(tangents) if t is not None)
        nb = np.ndim(tangents[present]) - np.ndim(xs[present])
        batch = np.shape(tangents[present])[:nb]
        filled = [t if t is not None else np.zeros(batch + np.shape(x)) for t, x in zip(tangents, xs)]
        return join(filled, nb + axis)

    return jvp


def _stack_rule(g, out, *args):
    *xs, axis = args
    nb = batch_ndim(g, out)
    pos = (slice(None),) * (nb + axis)
    return tuple(GETITEM(g, pos + (i,)) for i in range(len(xs)))


STACK = primitive(
    "stack",
    -1,
    lambda xs, axis: np.stack(xs, axis),
    (_stack_rule,),
    saves="meta",
    nparams=1,
    public=False,
    doc="join values along a new axis",
    jvp=_join_jvp(np.stack),
    batch="linear",
)


def _cat_rule(g, out, *args):
    *xs, axis = args
    nb = batch_ndim(g, out)
    ends = np.cumsum([x.shape[axis] for x in xs])
    pos = (slice(None),) * (nb + axis)
    return tuple(GETITEM(g, pos + (slice(int(end - x.shape[axis]), int(end)),)) for x, end in zip(xs, ends))


CAT = primitive(
    "cat",
    -1,
    lambda xs, axis: np.concatenate(xs, axis),
    (_cat_rule,),
    saves="meta",
    nparams=1,
    public=False,
    doc="join values along an existing axis",
    jvp=_join_jvp(np.concatenate),
    batch="linear",
)

# --- roll ------------------------------------------------------------------------------------------------


def _rolled(v, own_ndim: int, shifts, dims):
    """``v`` rolled by ``shifts`` along ``dims`` (negative: from the end), or, with ``dims`` None, its
    own ``own_ndim`` trailing axes rolled as one flat sequence (its batch axes stay as they are)."""
    if dims is not None:
        return ROLL(v, shifts, dims)
    shape = np.shape(v)
    nb = len(shape) - own_ndim
    flat = np.reshape(v, shape[:nb] + (-1,))
    return np.reshape(ROLL(flat, shifts, (-1,)), shape)


def _roll(x, shifts, dims):
    return np.roll(x, shifts, None if dims is None else tuple(dims))


ROLL = primitive(
    "roll",
    1,
    _roll,
    (lambda g, out, x, shifts, dims: _rolled(g, len(x.shape), tuple(-s for s in shifts), dims),),
    saves="meta",
    nparams=2,  # (shifts, dims): dims negative offsets from the end, or None for the flattened value
    jvp=lambda ts, out, x, shifts, dims: _rolled(ts[0], len(np.shape(x)), shifts, dims),
    batch="linear",
    label="roll",
    formulas=("the gradient rolled back",),
    doc="the elements shifted along each of dims, those past the end coming round to the start",
)
