"""The Tensor: a NumPy value and, when it requires grad, its place in the graph.

A tensor's ``_edge`` is where gradients for it go: its ``grad_fn`` when it was
computed, its ``AccumulateGrad`` when it is a leaf that requires grad, ``None``
for constants. One slot answers both "does it require grad?" and "which node
does a consumer point at?", which keeps recording an operation cheap.
"""

from __future__ import annotations

import warnings
import weakref
from collections import namedtuple
from typing import Any

import numpy as np

from . import format as _format
from . import grad_mode as _grad_mode

_new = object.__new__
_ndarray = np.ndarray

#: Set by the first tracked in-place operation; until then no saved value can be
#: stale, so recording and backward skip version bookkeeping. (A module global:
#: read on every operation.)
inplace_seen = False

#: Set when a complex value first enters tensors or the graph; until then no backward
#: rule needs the complex (conjugate Wirtinger) handling. (A module global, like the above.)
complex_seen = False


def is_complex(value: Any) -> bool:
    """Whether ``value`` (a number or an array) is complex."""
    return value.__class__ is complex or getattr(getattr(value, "dtype", None), "kind", "") == "c"


def mark_complex(value: Any) -> None:
    """Note that ``value`` is complex, if it is (called where values enter the graph)."""
    global complex_seen
    if not complex_seen and is_complex(value):
        complex_seen = True


_REAL = np.dtype(np.float64)

NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute "
    "won't be populated during backward(). If you indeed want the .grad field to be populated for a "
    "non-leaf Tensor, use .retain_grad() on the non-leaf Tensor."
)

MinMax = namedtuple("MinMax", ["values", "indices"])

DEEPCOPY_NON_LEAF = (
    "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at the moment.  "
    "If you were attempting to deepcopy a module, this may be because of a torch.nn.utils.weight_norm usage, "
    "see https://github.com/pytorch/pytorch/pull/103001"
)

# PyTorch words it differently on each path (2.13): setting .requires_grad, requires_grad_(), a factory's requires_grad=True
REQUIRES_GRAD_DTYPE = "only Tensors of floating point and complex dtype can require gradients"
REQUIRES_GRAD_DTYPE_METHOD = "only Tensors of floating point dtype can require gradients"
REQUIRES_GRAD_DTYPE_FACTORY = "Only Tensors of floating point and complex dtype can require gradients"


def check_can_require_grad(value: Any, message: str = REQUIRES_GRAD_DTYPE_FACTORY) -> None:
    """Integer and boolean tensors never require grad."""
    if getattr(value, "dtype", _REAL).kind not in "fc":
        raise RuntimeError(message)


def as_value(data: Any, dtype: Any = None) -> Any:
    """A fresh NumPy array for ``data``: float64 for Python floats unless told, float32 kept, bools kept,
    integers kept as integers (Python ints int64, as PyTorch: such tensors never require grad)."""
    if isinstance(data, Tensor):
        data = data._value
    elif isinstance(data, (list, tuple)) and any(isinstance(d, Tensor) for d in _flatten(data)):
        data = unwrap(data)
    try:
        value = np.array(data, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot make a tensor from {type(data).__name__}: {exc}") from None
    if value.dtype.kind not in "fcbiu":
        raise TypeError(f"cannot make a tensor of dtype {value.dtype}; use numbers")
    if value.dtype.kind == "c":
        global complex_seen
        complex_seen = True
    # 0-d values are kept as NumPy scalars: arithmetic on them is ~10x faster than on 0-d
    # arrays; a tensor that gets aliased (.data, detach, numpy) first gets a real buffer.
    return value[()] if value.ndim == 0 else value


def _flatten(items: Any) -> list[Any]:
    out: list[Any] = []
    stack = [items]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            out.append(item)
    return out


def unwrap(obj: Any) -> Any:
    """The values of the tensors in ``obj`` (a tensor, or lists and tuples of them, nested)."""
    if isinstance(obj, Tensor):
        return obj._value
    if isinstance(obj, (list, tuple)):
        return type(obj)(unwrap(o) for o in obj)
    return obj


def _reads_self(prim: Any, edge: Any, args: tuple[Any, ...]) -> bool:
    """Whether the node of an in-place ``prim`` on a tensor reads the tensor's old value
    (``d *= 3`` does not: no copy of ``d`` is kept)."""
    reads = prim.reads
    if not reads:
        return True
    if edge is not None and 0 in reads[0]:
        return True
    return any(a.__class__ is Tensor and a._edge is not None and 0 in reads[i + 1] for i, a in enumerate(args))


def _no_leaf() -> None:
    return None


def storage_root(t: Tensor) -> Tensor:
    """The tensor that owns ``t``'s storage and version counter (``t`` unless it is a view)."""
    return t if t._base is None else t._base


DETACH_VIEW = (
    "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel (DDP) for "
    "training, and gradient_as_bucket_view is set as True, gradients are views of DDP buckets, and hence "
    "detach_() cannot be called on these gradients. To fix this error, please refer to the Optimizer.zero_grad() "
    "function in torch/optim/optimizer.py as the solution."
)
DETACHED_SAVED = (
    "Trying to use a saved tensor that has been detached in-place, i.e. with .detach_().This is not supported, "
    "please use out-of-place `.detach()` instead"
)
OVERLAP = (
    "unsupported operation: more than one element of the written-to tensor refers to a single memory location. "
    "Please clone() the tensor before performing the operation."
)
CUSTOM_VIEW = (
    "This view was created inside a custom Function (or because an input was returned as-is) and the autograd logic "
    "to handle view+inplace would override the custom backward associated with the custom Function, leading to "
    "incorrect gradients. This behavior is forbidden. You can fix this by cloning the output of the custom Function."
)
VIEW_OF_LEAF = "a view of a leaf Variable that requires grad is being used in an in-place operation."
MULTI_VIEW = (
    "This view is the output of a function that returns multiple views. Such functions do not allow the output "
    "views to be modified inplace. You should replace the inplace operation by an out-of-place one."
)


def check_inplace(t: Tensor, edge: Any, recording: bool) -> None:
    """PyTorch's refusals of an in-place change under grad mode: a leaf that requires grad, a view of
    one, a recorded change to one of several views a function returned (unbind, split)."""
    if edge is not None and edge.__class__ is _node.AccumulateGrad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    base = t._base
    if base is None or t._detached:
        return
    if base._edge.__class__ is _node.AccumulateGrad:
        # also when the view was taken before its base required grad (PyTorch checks the base)
        raise RuntimeError(VIEW_OF_LEAF)
    if not recording:
        return
    multi = t._multi_view
    if multi is not None:
        why = multi[2] if len(multi) > 2 else MULTI_VIEW  # (a custom Function's view says so)
        if edge is None:
            raise RuntimeError(
                "A view was created in no_grad mode and is being modified inplace with grad mode enabled. " + why
            )
        raise RuntimeError(f"Output {multi[1]} of {multi[0]} is a view and is being modified inplace. {why}")
    if t._view_fn is None:
        raise RuntimeError(
            "gradcli does not record in-place operations on this view of a tensor that requires grad; "
            "assign through the tensor itself (y[i] = v) or use out-of-place operations"
        )


def rebase_view(view: Tensor, new_edge: Any) -> Any:
    """``view`` of a base was changed in place, its new value from ``new_edge``: the base's history
    becomes a ``CopySlices`` node (the old base outside the view, the new values inside it), so the
    base requires grad from now on, and the view is taken again from the new base. Returns the
    view's new edge."""
    root = view._base
    chain = view._view_fn
    if root._edge is None and new_edge is None:
        return None
    root._edge = _node.CopySlices(root._edge, new_edge, chain, root._value)
    return _retake(root, chain)


def _retake(root: Tensor, chain: tuple[Any, ...]) -> Any:
    """The edge of the view ``chain`` takes of ``root`` as it is now."""
    taken = root
    for prim, params in chain:
        taken = _record.apply(prim, (taken,), params)
    return taken._edge


def note_view(root: Tensor, view: Tensor) -> None:
    """``view`` (with a ``_view_fn``) was taken of ``root``: held weakly, so that a change of the
    root's history in place reaches it (``retake_views``)."""
    views = root._views
    if views is None:
        root._views = [weakref.ref(view)]
        return
    views.append(weakref.ref(view))
    n = len(views)
    if n >= 64 and not n & (n - 1):  # at each power of two, the dead are dropped (amortised O(1))
        views[:] = [r for r in views if r() is not None]


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


def wrap(value: Any, edge: Any = None) -> Tensor:
    """The fast internal constructor: no copy, no checks."""
    t = _new(Tensor)
    t._value = value
    t._edge = edge
    return t


def _normalize_index(index: Any) -> tuple[Any, ...]:
    if not isinstance(index, tuple):
        index = (index,)
    return tuple(i._value if isinstance(i, Tensor) else (np.asarray(i) if isinstance(i, list) else i) for i in index)


class Tensor:
    """An n-dimensional array that can record the operations applied to it.

    >>> import gradcli as gc
    >>> x = gc.tensor(2.0, requires_grad=True)
    >>> w = gc.tensor(1.0, requires_grad=True)
    >>> y = (x + w) * (w + 1)
    >>> y.backward()
    >>> w.grad
    tensor(5.)
    """

    # The two fields every operation touches are slots; the rarely set ones (a leaf's
    # grad, a view's base, a version bumped by an in-place op, a name) fall back to the
    # class defaults below until set, so making a tensor costs two stores.
    __slots__ = ("_value", "_edge", "__dict__", "__weakref__")
    _grad: Tensor | None = None
    _versions: int = 0  # the storage's version counter, kept on the storage root (read ``_version``)
    _base: Tensor | None = None
    _view_fn: Any = None  # a view's ((primitive, params), ...) from its base: how to take it again
    _multi_view: Any = (
        None  # (name, k[, why]): output k of a function returning several views (unbind), or a custom one's
    )
    _views: Any = None  # weak references to a base's views that have a _view_fn: retaken when it changes
    _detached: bool = False  # shares a leaf's storage through detach(): changing it in place is allowed
    _detached_in_place: bool = False  # cut from the graph by detach_(): a node that saved it must not use it
    name: str | None = None
    __array_priority__ = 1000
    __hash__ = object.__hash__

    def __init__(self, data: Any, requires_grad: bool = False, dtype: Any = None, name: str | None = None) -> None:
        self._value = as_value(data, dtype)
        self._edge = None
        if name is not None:
            self.name = name
        if requires_grad:
            check_can_require_grad(self._value)
            self.requires_grad_(True)

    _wrap = staticmethod(wrap)

    @property
    def _version(self) -> int:
        """The version counter, shared by a view and its base (bumped by every in-place change)."""
        return storage_root(self)._versions

    @_version.setter
    def _version(self, value: int) -> None:
        storage_root(self)._versions = value

    # --- place in the graph -------------------------------------------------------------

    @property
    def requires_grad(self) -> bool:
        return self._edge is not None

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        edge = self._edge
        if edge is not None and edge.__class__ is not _node.AccumulateGrad:
            if not flag:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                    "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
                )
            return
        if not flag:
            self._edge = None
        elif edge is None:
            kind = np.asarray(self._value).dtype.kind
            if kind not in "fc":
                raise RuntimeError(REQUIRES_GRAD_DTYPE)
            if kind == "c":
                global complex_seen
                complex_seen = True
            self._edge = _node.AccumulateGrad(self)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if requires_grad and self._edge is None:
            check_can_require_grad(self._value, REQUIRES_GRAD_DTYPE_METHOD)
        self.requires_grad = requires_grad
        return self

    @property
    def grad_fn(self) -> Any:
        edge = self._edge
        if edge is None or edge.__class__ is _node.AccumulateGrad:
            return None
        return edge.node if edge.__class__ is _node.OutputRef else edge

    @property
    def is_leaf(self) -> bool:
        edge = self._edge
        return edge is None or edge.__class__ is _node.AccumulateGrad

    @property
    def grad(self) -> Tensor | None:
        if self._grad is None and not self.is_leaf and not self.retains_grad:
            warnings.warn(NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, (Tensor, np.ndarray)):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}"
                )
            value = value if isinstance(value, Tensor) else Tensor(value)
            if value.shape != self.shape:
                raise RuntimeError(f"assigned grad has data of a different size: {value.shape} vs {self.shape}")
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        self._grad = None

    def register_hook(self, hook: Any) -> Any:
        """``hook(grad)`` each time the gradient of this tensor is computed; it may return a
        replacement. Returns a handle whose ``.remove()`` removes the hook."""
        return _hooks.register_tensor_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook: Any) -> Any:
        """``hook(leaf)`` after the gradient was accumulated into this leaf's ``.grad``."""
        return _hooks.register_post_accumulate(self, hook)

    def retain_grad(self) -> None:
        """Keep this non-leaf's ``.grad`` after backward (leaves keep theirs anyway)."""
        edge = self._edge
        if edge is None:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if edge.__class__ is not _node.AccumulateGrad:
            _node.edge_node(edge).retain(self, edge)

    @property
    def retains_grad(self) -> bool:
        edge = self._edge
        if edge is None or edge.__class__ is _node.AccumulateGrad:
            return False
        return _node.edge_node(edge).retained(edge) is self

    def backward(
        self, gradient: Any = None, retain_graph: bool | None = None, create_graph: bool = False, inputs: Any = None
    ) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (see ``gradcli.autograd.backward``)."""
        _engine.backward(self, gradient, retain_graph, create_graph, inputs)

    def detach(self) -> Tensor:
        """The same values, cut from the graph (shares storage and version counter)."""
        self._materialize()
        t = wrap(self._value)
        t._base = storage_root(self)
        t._detached = True
        return t

    def detach_(self) -> Tensor:
        """Cut this tensor from the graph in place; a node that saved it refuses to use it (PyTorch)."""
        if self._base is not None and not self._detached:
            raise RuntimeError(DETACH_VIEW)
        edge = self._edge
        if edge.__class__ is _node.AccumulateGrad:
            edge.variable = _no_leaf  # a pass still reaching the leaf's sink fills no .grad (PyTorch)
        elif edge is not None:
            global inplace_seen
            inplace_seen = True  # saved tensors are checked from now on (OpNode._check_versions)
            self._detached_in_place = True
        self._edge = None
        return self

    # --- values -------------------------------------------------------------------------------

    def _materialize(self) -> None:
        # 0-d results are NumPy scalars (fast, immutable); aliasing needs a real buffer
        if self._value.__class__ is not _ndarray:
            self._value = np.array(self._value)

    @property
    def array(self) -> Any:
        """The NumPy array (or 0-d NumPy scalar) the tensor holds, not copied: for reading by the layers
        above autograd (lang, check, render, testing). Never write through it: that is not recorded."""
        return self._value

    @property
    def data(self) -> Tensor:
        """The values as a tensor outside the graph; changes through it are not recorded."""
        self._materialize()
        return wrap(self._value)

    @data.setter
    def data(self, value: Any) -> None:
        self._value = value._value if isinstance(value, Tensor) else as_value(value)

    @data.deleter
    def data(self) -> None:
        raise RuntimeError("Deleting tensor data is not allowed. Delete tensor instead!")

    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.shape

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype

    @property
    def device(self) -> str:
        return "cpu"

    def dim(self) -> int:
        return self._value.ndim

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return self.shape
        n = max(self.ndim, 1)
        if not -n <= dim < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
        return self.shape[dim] if self.ndim else 1

    def numel(self) -> int:
        return int(np.size(self._value))

    def item(self) -> Any:
        n = np.size(self._value)
        if n != 1:
            raise RuntimeError(f"a Tensor with {n} elements cannot be converted to Scalar")
        return np.asarray(self._value).item()

    def tolist(self) -> Any:
        return np.asarray(self._value).tolist()

    def numpy(self) -> np.ndarray:
        """The NumPy array, shared (not copied); refused on a tensor that requires grad, except
        under ``no_grad`` (as PyTorch)."""
        if self._edge is not None and _grad_mode.state.enabled:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        self._materialize()
        return self._value

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = np.asarray(self._value)
        return a.astype(dtype) if dtype is not None else a

    def __reduce__(self) -> Any:
        """Pickles as its value, dtype and requires_grad (and name): a computed tensor comes back a
        leaf that requires grad, ``.grad`` and the graph are not kept (PyTorch does the same)."""
        value = np.array(self._value, copy=True)
        return (_unpickle, (value, self.requires_grad, self.name))

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        """A leaf's copy with its own ``.grad``; a computed tensor is refused, as in PyTorch."""
        if not self.is_leaf:
            raise RuntimeError(DEEPCOPY_NON_LEAF)
        t = _unpickle(np.array(self._value, copy=True), self.requires_grad, self.name)
        if self._grad is not None:
            t._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = t
        return t

    def __repr__(self) -> str:
        grad_fn = self.grad_fn
        return _format.tensor_repr(self._value, None if grad_fn is None else grad_fn.name(), self.requires_grad)

    def __format__(self, spec: str) -> str:
        if self.ndim == 0 and spec:
            return format(self.item(), spec)
        return repr(self)

    def __bool__(self) -> bool:
        if np.size(self._value) != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._value)

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Any:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    # --- in-place -----------------------------------------------------------------------------

    def _inplace(self, prim: Any, args: tuple[Any, ...], params: tuple[Any, ...] = ()) -> Tensor:
        edge = self._edge
        recording = _grad_mode.state.enabled and (
            edge is not None or any(a.__class__ is Tensor and a._edge is not None for a in args)
        )
        through_view = False
        if _grad_mode.state.enabled:
            check_inplace(self, edge, recording)
            through_view = recording and self._base is not None and not self._detached
        value = self._value
        if value.__class__ is _ndarray and not value.flags.writeable and 0 in value.strides and value.size > 1:
            raise RuntimeError(OVERLAP)  # an expanded tensor: one element stands for several
        if recording:
            saves_self = prim.saves in ("inputs", "both") and _reads_self(prim, edge, args)
            old = wrap(np.array(self._value, copy=True) if saves_self else self._value, edge) if saves_self else self
            result = _record.apply(prim, (old, *args), params)
            new_value, new_edge = result._value, result._edge
        else:
            new_value = prim.forward(self._value, *(unwrap(a) for a in args), *params)
            new_edge = edge
        self._store(new_value)
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
        global inplace_seen
        inplace_seen = True
        root = storage_root(self)
        producer = self._edge if root is self else root._edge  # whose saved output shares this storage
        if producer is not None:
            _node.mark_output_modified(producer, root)
        root._versions += 1

    def _move_edge(self, edge: Any, new_edge: Any) -> None:
        if edge is not None and self.retains_grad:
            # .grad is the gradient of the newest version only (PyTorch moves the hook)
            _node.edge_node(edge).unretain(edge)
            _node.edge_node(new_edge).retain(self, new_edge)
        self._edge = new_edge

    def _store(self, new_value: Any) -> None:
        value = self._value
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
        return self._inplace(_ops.FILL, (), (0,))

    def fill_(self, value: Any) -> Tensor:
        if isinstance(value, Tensor):  # differentiable in the value, as PyTorch's fill_(Tensor)
            if value.ndim != 0:
                raise RuntimeError(
                    f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions."
                )
            return self.copy_(value)
        return self._inplace(_ops.FILL, (), (value,))

    def copy_(self, src: Any) -> Tensor:
        return self._inplace(_ops.INDEX_PUT, (src,), ((Ellipsis,),))

    def __setitem__(self, index: Any, value: Any) -> None:
        edge = self._edge
        self._inplace(_ops.INDEX_PUT, (value,), (_normalize_index(index),))
        if self._edge is not edge and self._base is None:
            # PyTorch records an assignment as CopySlices or IndexPutBackward0, both freed by a backward
            # pass: a second one through it raises, whatever the assignment saved
            _node.edge_node(self._edge).frees = True

    __iadd__ = add_
    __isub__ = sub_
    __imul__ = mul_
    __itruediv__ = div_
    __ipow__ = pow_

    # --- operators ------------------------------------------------------------------------------

    # + - * / % ^ and the comparisons are installed from the operator table (methods.py)

    def __matmul__(self, other: Any) -> Any:
        return _record.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return _record.matmul(other, self)

    def __neg__(self) -> Tensor:
        return _record.unary(_ops.NEG, self)

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return _record.unary(_ops.ABS, self)

    def __and__(self, other: Any) -> Any:
        return _record.binary(_ops.LOGICAL_AND, self, other)

    __rand__ = __and__

    def __or__(self, other: Any) -> Any:
        return _record.binary(_ops.LOGICAL_OR, self, other)

    __ror__ = __or__

    def __invert__(self) -> Tensor:
        return _record.unary(_ops.LOGICAL_NOT, self)

    def __getitem__(self, index: Any) -> Tensor:
        return _record.getitem(self, _normalize_index(index))

    # --- NumPy interoperability: rules written with NumPy run on tensors ------------------------

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return _numpy_compat.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _numpy_compat.array_function(func, args, kwargs)


def _unpickle(value: Any, requires_grad: bool, name: str | None) -> Tensor:
    mark_complex(value)
    t = wrap(value[()] if value.ndim == 0 else value)
    if name is not None:
        t.name = name
    if requires_grad:
        t.requires_grad_(True)
    return t


# Late imports: these modules build on Tensor. The order matters (node before the
# modules that import it), so the sorter leaves this block alone.
# isort: off
from .. import ops as _ops  # noqa: E402
from . import node as _node  # noqa: E402
from . import hooks as _hooks  # noqa: E402
from . import engine as _engine  # noqa: E402
from . import record as _record  # noqa: E402
from . import numpy_compat as _numpy_compat  # noqa: E402

# isort: on
