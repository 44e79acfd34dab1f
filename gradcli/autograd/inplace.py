"""In-place changes of a tensor (``add_``, ``x[i] = v``, ``copy_``...): PyTorch's refusals, the
version counter, and the history of a base and its views rebuilt after a change through one of them.
The methods are put on ``Tensor`` (``tensor_methods``) by this module, which knows the nodes and
the recording that tensor.py must not (they build on Tensor)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .. import ops as _ops
from . import grad_mode as _grad_mode
from . import tensor as _tensor_mod
from .node import OVERLAP, AccumulateGrad, CopySlices, edge_node, mark_output_modified
from .record import apply
from .tensor import Tensor, normalize_index, storage_root, tensor_methods, unwrap, wrap

_ndarray = np.ndarray

VIEW_OF_LEAF = "a view of a leaf Variable that requires grad is being used in an in-place operation."
NO_GRAD_VIEW = (
    "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both "
    "the view and the inplace either both inside the no_grad block (if you don't want the inplace to be tracked) or "
    "both outside (if you want the inplace to be tracked)."
)
MULTI_VIEW = (
    "This view is the output of a function that returns multiple views. Such functions do not allow the output "
    "views to be modified inplace. You should replace the inplace operation by an out-of-place one."
)


def _reads_self(prim: Any, edge: Any, args: tuple[Any, ...]) -> bool:
    """Whether the node of an in-place ``prim`` on a tensor reads the tensor's old value
    (``d *= 3`` does not: no copy of ``d`` is kept)."""
    reads = prim.reads
    if not reads:
        return True
    if edge is not None and 0 in reads[0]:
        return True
    return any(a.__class__ is Tensor and a._edge is not None and 0 in reads[i + 1] for i, a in enumerate(args))


def check_inplace(t: Tensor, edge: Any, recording: bool) -> None:
    """PyTorch's refusals of an in-place change under grad mode: a leaf that requires grad; for a view
    that requires grad (itself, or through its base): one made in no_grad mode, by a custom Function
    or by a function returning several views (unbind, split), then a view of a leaf."""
    if edge is not None and edge.__class__ is AccumulateGrad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    base = t._base
    if base is None or t._detached or not (recording or base._edge is not None):
        return
    _check_view_creation(t, edge)
    if base._edge.__class__ is AccumulateGrad:
        # also when the view was taken before its base required grad (PyTorch checks the base)
        raise RuntimeError(VIEW_OF_LEAF)
    if recording and t._view_fn is None:
        raise RuntimeError(
            "gradcli does not record in-place operations on this view of a tensor that requires grad; "
            "assign through the tensor itself (y[i] = v) or use out-of-place operations"
        )


def _check_view_creation(t: Tensor, edge: Any) -> None:
    """PyTorch's ``handle_view_on_rebase``: a view made where its in-place change cannot be recorded
    (in no_grad mode, by a custom Function, by a function returning several views)."""
    multi = t._multi_view
    no_grad = multi is None and t._no_grad_view
    if multi is None and not no_grad:
        return
    why = NO_GRAD_VIEW if no_grad else multi[2] if len(multi) > 2 else MULTI_VIEW  # (a custom Function's says so)
    mode = "no_grad mode and is being modified inplace with grad mode enabled."
    if edge is None:
        head = f"A view was created in {mode}"
    elif no_grad:
        head = f"Output 0 of {edge_node(edge).name().removesuffix('Backward0')} is a view of a view which was created in {mode}"
    else:
        head = f"Output {multi[1]} of {multi[0]} is a view and is being modified inplace."
    raise RuntimeError(f"{head} {why}")


def rebase_view(view: Tensor, new_edge: Any) -> Any:
    """``view`` of a base was changed in place, its new value from ``new_edge``: the base's history
    becomes a ``CopySlices`` node (the old base outside the view, the new values inside it), so the
    base requires grad from now on, and the view is taken again from the new base. Returns the
    view's new edge."""
    root = view._base
    chain = view._view_fn
    if root._edge is None and new_edge is None:
        return None
    root._edge = CopySlices(root._edge, new_edge, chain, root._value)
    return _retake(root, chain)


def _retake(root: Tensor, chain: tuple[Any, ...]) -> Any:
    """The edge of the view ``chain`` takes of ``root`` as it is now."""
    taken = root
    for prim, params in chain:
        taken = apply(prim, (taken,), params)
    return taken._edge


def retake_views(root: Tensor, changed: Tensor) -> None:
    """``root``'s history changed in place (through ``changed``, itself or a view of it): every other
    live view of it is taken again from the new history, as PyTorch regenerates a view's grad_fn
    whose base's version moved on (its old history would miss the change)."""
    views = root._views
    if views:
        for ref in list(views):
            view = ref()
            if view is not None and view is not changed and view._base is root:
                view._move_edge(view._edge, _retake(root, view._view_fn))  # (retain_grad moves with it)


def _may_change(t: Tensor, edge: Any, args: tuple[Any, ...], overlap_ok: bool) -> tuple[bool, bool]:
    """Whether an in-place change of ``t`` (``edge`` its edge) with ``args`` is recorded, and whether
    through a view of a base; raises where PyTorch refuses the change (``overlap_ok``: also on an
    expanded tensor, as ``fill_`` and ``index_put_`` write)."""
    if not _grad_mode.state.enabled:
        recording = through_view = False
    else:
        recording = edge is not None or any(a.__class__ is Tensor and a._edge is not None for a in args)
        check_inplace(t, edge, recording)
        through_view = recording and t._base is not None and not t._detached
    if not overlap_ok and overlaps(t._value):
        raise RuntimeError(OVERLAP)  # an expanded tensor: one element stands for several
    return recording, through_view


def overlaps(value: Any) -> bool:
    """Whether several elements of ``value`` are one place in memory (an axis of stride 0 and size
    above 1: an expanded tensor), PyTorch's test before writing (``assert_no_internal_overlap``)."""
    return value.__class__ is _ndarray and any(s == 0 and n > 1 for n, s in zip(value.shape, value.strides))


def writeable_alias(value: np.ndarray) -> np.ndarray | None:
    """A writeable array on the memory of ``value``, a read-only view NumPy made (``broadcast_to``) of
    a writeable array: a write through it reaches the base and every view of it, as in PyTorch."""
    owner = value.base
    if owner.__class__ is not _ndarray or not owner.flags.writeable or not owner.flags.forc:
        return None
    offset = value.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    return np.ndarray(value.shape, value.dtype, buffer=owner, offset=offset, strides=value.strides)


EXPANDED_INDEX_PUT = (
    "Use of index_put_ on expanded tensors is deprecated. Please clone() the tensor before performing this "
    "operation. This also applies to advanced indexing e.g. tensor[indices] = tensor"
)
EXPANDED_MASKED_FILL = (
    "Use of masked_fill_ on expanded tensors is deprecated. Please clone() the tensor before performing this "
    "operation. This also applies to advanced indexing e.g. tensor[mask] = scalar"
)


def _warn_expanded(index: tuple[Any, ...], value: Any) -> None:
    """PyTorch's warnings for an advanced-index assignment into an expanded tensor (allowed)."""
    warnings.warn(EXPANDED_INDEX_PUT, UserWarning, stacklevel=3)
    mask = len(index) == 1 and isinstance(index[0], _ndarray) and index[0].dtype == np.bool_
    if mask and np.ndim(unwrap(value)) == 0:
        warnings.warn(EXPANDED_MASKED_FILL, UserWarning, stacklevel=3)


@tensor_methods
class TensorInPlace:
    """The in-place methods of ``Tensor``."""

    def _inplace(
        self, prim: Any, args: tuple[Any, ...], params: tuple[Any, ...] = (), overlap_ok: bool = False
    ) -> Tensor:
        edge = self._edge
        recording, through_view = _may_change(self, edge, args, overlap_ok)
        if recording:
            saves_self = prim.saves in ("inputs", "both") and _reads_self(prim, edge, args)
            old = wrap(np.array(self._value, copy=True), edge) if saves_self else self
            result = apply(prim, (old, *args), params)
            new_value, new_edge = result._value, result._edge
        else:
            new_value = prim.forward(self._value, *(unwrap(a) for a in args), *params)
            new_edge = edge
        self._store(new_value, params[0] if prim is _ops.INDEX_PUT else None)
        self._bump_version()
        if through_view:  # the base's history is rebased (PyTorch's CopySlices), the view taken again
            new_edge = rebase_view(self, new_edge)
        if new_edge is not edge:
            self._move_edge(edge, new_edge)
        if recording and (through_view or self._base is None):  # the base's history changed
            retake_views(storage_root(self), self)
        return self

    def _bump_version(self) -> None:
        """After an in-place change: a saved copy of this storage is stale, its version moves on."""
        _tensor_mod.inplace_seen = True
        root = storage_root(self)
        producer = self._edge if root is self else root._edge  # whose saved output shares this storage
        if producer is not None:
            mark_output_modified(producer, root)
        root._versions += 1

    def _move_edge(self, edge: Any, new_edge: Any) -> None:
        if edge is not None and self.retains_grad:
            # .grad is the gradient of the newest version only (PyTorch moves the hook)
            edge_node(edge).unretain(edge)
            edge_node(new_edge).retain(self, new_edge)
        self._edge = new_edge

    def _store(self, new_value: Any, index: Any = None) -> None:
        """``new_value`` into this tensor's memory (shared with its base and views); ``index``: the
        positions an assignment wrote (on an expanded tensor only they are written)."""
        value = self._value
        if value.__class__ is _ndarray and not value.flags.writeable and (self._base is not None or overlaps(value)):
            alias = writeable_alias(value)  # a view of an expanded tensor: written through to its base
            if alias is not None:
                if index is not None and overlaps(value):
                    alias[index] = np.asarray(new_value)[index]
                    return
                value = alias
        if value.__class__ is _ndarray and value.flags.writeable:
            if np.shape(new_value) != value.shape:
                raise RuntimeError(
                    f"output with shape {list(value.shape)} doesn't match the broadcast shape {list(np.shape(new_value))}"
                )
            try:
                np.copyto(value, new_value, casting="same_kind")
            except TypeError:
                raise RuntimeError(
                    f"result type {np.result_type(new_value)} can't be cast to the desired output type {value.dtype}"
                ) from None
        else:
            self._value = np.asarray(new_value, dtype=np.asarray(value).dtype)[()]

    def add_(self, other: Any, alpha: Any = 1) -> Tensor:
        return self._inplace(_ops.ADD, (other if alpha == 1 else other * alpha,))

    def sub_(self, other: Any, alpha: Any = 1) -> Tensor:
        return self._inplace(_ops.SUB, (other if alpha == 1 else other * alpha,))

    def mul_(self, other: Any) -> Tensor:
        return self._inplace(_ops.MUL, (other,))

    def div_(self, other: Any) -> Tensor:
        return self._inplace(_ops.DIV, (other,))

    def pow_(self, exponent: Any) -> Tensor:
        return self._inplace(_ops.POW, (exponent,))

    def zero_(self) -> Tensor:
        return self._inplace(_ops.FILL, (), (0,), overlap_ok=True)

    def fill_(self, value: Any) -> Tensor:
        if isinstance(value, Tensor):  # differentiable in the value, as PyTorch's fill_(Tensor)
            if value.ndim != 0:
                raise RuntimeError(
                    f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions."
                )
            return self.copy_(value)
        return self._inplace(_ops.FILL, (), (value,), overlap_ok=True)

    def copy_(self, src: Any) -> Tensor:
        return self._inplace(_ops.INDEX_PUT, (src,), ((Ellipsis,),))

    def __setitem__(self, index: Any, value: Any) -> None:
        edge = self._edge
        positions = normalize_index(index)
        if overlaps(self._value):  # an expanded tensor: as PyTorch, the view of the positions is written
            if _ops.is_basic_index(positions):
                self[index].copy_(value)  # (refused where the view itself overlaps)
                return
            _warn_expanded(positions, value)
            self._inplace(_ops.INDEX_PUT, (value,), (positions,), overlap_ok=True)
            return
        self._inplace(_ops.INDEX_PUT, (value,), (positions,))
        if self._edge is not edge and self._base is None:
            # PyTorch records an assignment as CopySlices or IndexPutBackward0, both freed by a backward
            # pass: a second one through it raises, whatever the assignment saved
            edge_node(self._edge).frees = True

    __iadd__ = add_
    __isub__ = sub_
    __imul__ = mul_
    __itruediv__ = div_
    __ipow__ = pow_
