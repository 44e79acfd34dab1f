"""The Tensor: a NumPy value and, when it requires grad, its place in the graph.

This module knows no node, engine or recording: the methods that need them are defined by the
modules above (``tensor_methods``), so that those modules may build on Tensor without a circle.

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


def storage_root(t: Tensor) -> Tensor:
    """The tensor that owns ``t``'s storage and version counter (``t`` unless it is a view)."""
    return t if t._base is None else t._base


DETACHED_SAVED = (
    "Trying to use a saved tensor that has been detached in-place, i.e. with .detach_().This is not supported, "
    "please use out-of-place `.detach()` instead"
)


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


#: how PyTorch's message names a dtype: its C++ type (the gradient's), its ScalarType (the tensor's)
_CPP_NAMES = {
    "b": ("bool", "Bool"), "u1": ("unsigned char", "Byte"), "i1": ("signed char", "Char"),
    "i2": ("short int", "Short"), "i4": ("int", "Int"), "i8": ("long int", "Long"), "f2": ("c10::Half", "Half"),
    "f4": ("float", "Float"), "f8": ("double", "Double"), "c8": ("c10::complex<float>", "ComplexFloat"),
    "c16": ("c10::complex<double>", "ComplexDouble"), "u2": ("short unsigned int", "UInt16"),
    "u4": ("unsigned int", "UInt32"), "u8": ("long unsigned int", "UInt64"),
}  # fmt: skip


def _dtype_names(dtype: Any) -> tuple[str, str]:
    dtype = np.dtype(dtype)
    return _CPP_NAMES.get("b" if dtype.kind == "b" else f"{dtype.kind}{dtype.itemsize}", (str(dtype), str(dtype)))


def check_assigned_grad(grad: Tensor, tensor: Tensor) -> None:
    """PyTorch's refusals of ``tensor.grad = grad``: another dtype, then another size."""
    if grad.dtype != tensor.dtype:
        raise RuntimeError(
            f"attempting to assign a gradient with dtype '{_dtype_names(grad.dtype)[0]}' to a tensor with grad_dtype "
            f"'{_dtype_names(tensor.dtype)[1]}'. The gradient must match the tensor's grad_dtype (defaults to the "
            "tensor's dtype). You can set the tensor's grad_dtype attribute with a specific dtype, or None to allow "
            "any dtype. Set grad_dtype with caution. Diverging the dtypes of a tensor and its gradient may break "
            "downstream systems that assume they match."
        )
    if grad.shape != tensor.shape:
        raise RuntimeError(
            f"attempting to assign a gradient of size '{list(grad.shape)}' to a tensor of size '{list(tensor.shape)}'. "
            "Please ensure that the gradient and the tensor are the same size"
        )


def wrap(value: Any, edge: Any = None) -> Tensor:
    """The fast internal constructor: no copy, no checks."""
    t = _new(Tensor)
    t._value = value
    t._edge = edge
    return t


def normalize_index(index: Any) -> tuple[Any, ...]:
    if not isinstance(index, tuple):
        index = (index,)
    return tuple(i._value if isinstance(i, Tensor) else (np.asarray(i) if isinstance(i, list) else i) for i in index)


class Tensor:
    """An n-dimensional array that can record the operations applied to it.

    >>> import gradcli as gc
    >>> x = gc.tensor([1.0, 2.0], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad
    tensor([2., 4.])
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
    _no_grad_view: bool = False  # a view taken in no_grad mode (or of one): changed in place under grad, refused
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

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if requires_grad.__class__ is not bool:
            raise TypeError(
                "requires_grad_(): argument 'requires_grad' (position 1) must be bool, not "
                f"{type(requires_grad).__name__}"
            )
        if requires_grad and self._edge is None:
            check_can_require_grad(self._value, REQUIRES_GRAD_DTYPE_METHOD)
        self.requires_grad = requires_grad
        return self

    @property
    def grad(self) -> Tensor | None:
        if self._grad is None and not self.is_leaf and not self.retains_grad:
            warnings.warn(NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if value is self:
                raise RuntimeError("can't assign Variable as its own grad")
            if not isinstance(value, (Tensor, np.ndarray)):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}"
                )
            value = value if isinstance(value, Tensor) else Tensor(value)
            check_assigned_grad(value, self)
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        self._grad = None

    def detach(self) -> Tensor:
        """The same values, cut from the graph (shares storage and version counter)."""
        self._materialize()
        t = wrap(self._value)
        t._base = storage_root(self)
        t._detached = True
        return t

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

    def __pos__(self) -> Tensor:
        return self


#: what a class body holds besides its methods: not copied onto Tensor by ``tensor_methods``
_CLASS_ONLY = frozenset(
    {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__firstlineno__", "__static_attributes__"}
)


def tensor_methods(cls: type) -> type:
    """Class decorator: put the methods and properties ``cls`` defines on ``Tensor``. The modules
    above this one define, this way, what needs them: the place in the graph (place.py), in-place
    changes (inplace.py), operators and NumPy's protocols (methods.py); ``gradcli.autograd``
    imports them all, so a Tensor has every method once the package is loaded."""
    for name, value in vars(cls).items():
        if name not in _CLASS_ONLY:
            setattr(Tensor, name, value)
    return cls


def _unpickle(value: Any, requires_grad: bool, name: str | None) -> Tensor:
    mark_complex(value)
    t = wrap(value[()] if value.ndim == 0 else value)
    if name is not None:
        t.name = name
    if requires_grad:
        t.requires_grad_(True)
    return t
