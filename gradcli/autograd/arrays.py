"""The library's functions that move, pick and join elements, with PyTorch's signatures: shapes
(``reshape``, ``transpose``, ``cat``...), views (``chunk``, ``split``, ``unbind``), indexing by integer
positions (``gather``, ``index_select``, ``narrow``...), and the dimension helpers every function of
``functions`` uses (``as_tensor``, ``wrap_dim``). Integer positions are parameters, never inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import ops
from .record import apply, unary
from .tensor import Tensor, as_value, mark_complex, note_view, storage_root, wrap


def as_tensor(x: Any) -> Tensor:
    """``x`` itself if it is a tensor, else a constant tensor of its values."""
    return x if isinstance(x, Tensor) else wrap(as_value(x))


def wrap_dim(dim: Any, ndim: int) -> int:
    """``dim`` as an index in ``range(ndim)``; out of range is PyTorch's IndexError (a 0-d
    tensor accepts 0 and -1), never a silent wrap-around."""
    d = int(dim)
    n = ndim if ndim > 0 else 1  # (a 0-d tensor takes dims 0 and -1)
    if not -n <= d < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d % n


def dims_of(dim: Any, ndim: int) -> tuple[int, ...] | None:
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
    x._materialize()  # a 0-d NumPy scalar has no memory to share: the expanded view must see x's
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


def to(x: Any, dtype: Any) -> Tensor:
    x = as_tensor(x)
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        mark_complex(np.empty(0, dtype))
    if x.dtype == dtype:
        return x
    if dtype.kind in "biu":  # PyTorch's rule: an integer or bool tensor carries no gradient
        return x.detach().to(dtype) if x.requires_grad else apply(ops.TO_COPY, (x,), (dtype,))
    return apply(ops.TO_COPY, (x,), (dtype,))


def clone(x: Any) -> Tensor:
    return unary(ops.CLONE, as_tensor(x))


def _positions(index: Any, what: str) -> np.ndarray:
    """An index as an integer array (a tensor's, a list's); PyTorch's error for other dtypes."""
    value = index._value if isinstance(index, Tensor) else np.asarray(index)
    if value.dtype.kind not in "iu":
        raise RuntimeError(f"{what}(): Expected dtype int32/int64 for index")
    return value


def gather(input: Any, dim: int, index: Any, *, sparse_grad: bool = False) -> Tensor:  # noqa: A002
    """``out[i][j] = input[i][index[i][j]]`` for ``dim=1`` (any dim alike): GatherBackward0,
    the gradient scattered back with repeated positions adding up. PyTorch's rules: an empty
    index is never checked (its shape is the result's); otherwise a 0-d tensor counts as 1-D
    of one element, for the input as for the index."""
    x = as_tensor(input)
    d = wrap_dim(dim, x.ndim)
    value = index._value if isinstance(index, Tensor) else np.asarray(index)
    if value.size == 0:
        positions = value.astype(np.int64)
    else:
        positions = _positions(index, "gather")
        _check_gather(x.shape, d, positions)
    return apply(ops.GATHER, (x.reshape(1) if x.ndim == 0 else x,), (d, positions))


def _check_gather(shape: tuple[int, ...], d: int, positions: np.ndarray) -> None:
    if max(positions.ndim, 1) != max(len(shape), 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    if positions.ndim == len(shape):
        for k, (m, n) in enumerate(zip(positions.shape, shape)):
            if k != d and m > n:
                raise RuntimeError(
                    f"Size does not match at dimension {k} expected index {list(positions.shape)} to be no larger "
                    f"than self {list(shape)} apart from dimension {d}"
                )
    _check_range(positions, shape[d] if shape else 1, d, negative=False)


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
    pieces = tuple(apply(ops.SPLIT, (x,), (d, s, smaller(step, size - s))) for s in range(0, size, step))
    return multi_view(pieces, x, "Split")


def unbind(input: Any, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002
    """The slices along ``dim``, that axis removed: UnbindBackward0."""
    x = as_tensor(input)
    if x.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = wrap_dim(dim, x.ndim)
    if x.shape[d] == 0:
        return ()
    from .function import Unbind  # lazy: start-up, custom Functions load only when one is used

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
        sizes = [smaller(step, size - s) for s in range(0, size, step)] if step and size else [0]
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
    shift = tuple(int(s) for s in int_list(shifts))
    if dims is None:
        if len(shift) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shift)}, dims:0")
        return apply(ops.ROLL, (x,), (shift, None))
    axes = int_list(dims)
    if len(axes) != len(shift):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shift)}, dims:{len(axes)}")
    ndim = x.ndim if x.ndim else 1
    if x.ndim == 0:
        return x.clone()
    return apply(ops.ROLL, (x,), (shift, tuple(wrap_dim(a, ndim) - ndim for a in axes)))


def int_list(value: Any) -> list[int]:
    """One whole number or several (a list, a tuple, a 0-d or 1-d tensor) as a list of ints."""
    raw = value._value if isinstance(value, Tensor) else value
    return [int(v) for v in np.atleast_1d(np.asarray(raw))]


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


def smaller(a: int, b: int) -> int:
    """``min(a, b)`` of two ints, without the builtin's call overhead."""
    return a if a < b else b
