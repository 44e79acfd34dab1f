"""User-defined operations: subclasses of ``Function`` (seed 001's autograd.Function).

>>> import gradcli as gc
>>> class Cube(gc.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x ** 3
...     @staticmethod
...     def backward(ctx, grad):
...         (x,) = ctx.saved_tensors
...         return grad * 3 * x ** 2
>>> x = gc.tensor(2.0, requires_grad=True)
>>> y = Cube.apply(x)
>>> y.grad_fn
<CubeBackward object at ...>
>>> y.backward(); x.grad
tensor(12.)
"""

from __future__ import annotations

import functools
import inspect
import weakref
from typing import Any

import numpy as np

from ..ops import STACK, unbroadcast
from . import grad_mode as _grad_mode
from .grad_mode import no_grad
from .inplace import check_inplace, rebase_view, retake_views
from .node import BACKWARD_TWICE, FREED, AccumulateGrad, Node, OutputRef, inplace_error, next_seq
from .record import apply
from .tensor import Tensor, as_value, storage_root, wrap

CUSTOM_VIEW = (
    "This view was created inside a custom Function (or because an input was returned as-is) and the autograd logic "
    "to handle view+inplace would override the custom backward associated with the custom Function, leading to "
    "incorrect gradients. This behavior is forbidden. You can fix this by cloning the output of the custom Function."
)


class FunctionCtx:
    """What ``forward`` leaves for ``backward``: saved tensors and any attributes."""

    def __init__(self, needs_input_grad: tuple[bool, ...]) -> None:
        self.needs_input_grad = needs_input_grad
        self.materialize_grads = True
        self._saved: Any = ()
        self._versions: tuple[int, ...] = ()
        self._non_differentiable: set[int] = set()
        self._dirty: set[int] = set()

    def save_for_backward(self, *tensors: Any) -> None:
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward can only save tensors (or None)")
        self._saved = tensors
        self._versions = tuple(0 if t is None else storage_root(t)._version for t in tensors)

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        if self._saved is FREED:
            raise RuntimeError(BACKWARD_TWICE)
        for t, version in zip(self._saved, self._versions):
            if t is not None and storage_root(t)._version != version:
                raise inplace_error(t.shape, t.dtype, "a saved tensor", storage_root(t)._version, version)
        return tuple(self._saved)

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        self._non_differentiable.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)

    def mark_dirty(self, *tensors: Tensor) -> None:
        """The inputs forward changed in place: they are returned, their history continues at this node."""
        self._dirty = {id(t) for t in tensors}


class FunctionNode(Node):
    """The backward node of one ``Function.apply`` call, named ``<Class>Backward``."""

    __slots__ = (
        "next", "ctx", "positions", "n_outputs", "shapes", "_out_shapes", "_retain", "_hooks", "seq", "__weakref__",
    )  # fmt: skip
    function: type
    user_defined = True

    def __init__(self, next, ctx, positions, n_outputs, shapes, out_shapes) -> None:  # noqa: A002
        self._out_shapes = out_shapes
        self.next = next
        self.ctx = ctx
        self.positions = positions  # index of each tensor argument among forward's arguments
        self.n_outputs = n_outputs
        self.shapes = shapes
        self._retain: dict[int, Any] | None = None
        self._hooks = None
        self.seq = next_seq()

    def apply(self, g: Any, create: bool, nbatch: int, retain: bool = True) -> tuple[Any, ...]:
        # A second pass is refused only where backward reads ``ctx.saved_tensors`` (PyTorch frees saved
        # tensors, nothing else): a Function that saves nothing (Unbind) runs again.
        grads = g if self.n_outputs > 1 else [g]
        grads = [self._as_grad(gi, k) for k, gi in enumerate(grads)]
        with _mode(create):
            result = self.function.backward(self.ctx, *grads)
        result = result if isinstance(result, tuple) else (result,)
        n_args = len(self.ctx.needs_input_grad)
        if len(result) < n_args:
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of gradients (expected {n_args}, got {len(result)})"
            )
        out = []
        for edge, pos, shape in zip(self.next, self.positions, self.shapes):
            gi = result[pos]
            if edge is None or gi is None:
                out.append(None)
                continue
            gi = gi if isinstance(gi, Tensor) else wrap(as_value(gi))
            own = gi.shape[nbatch:]  # leading batch axes (a batched Jacobian) are kept
            if own != shape:
                if not _broadcasts_to(shape, own):
                    raise RuntimeError(
                        f"Function {self.name()} returned an invalid gradient at index {pos} - got {list(own)} "
                        f"but expected shape compatible with {list(shape)}"
                    )
                gi = unbroadcast(gi, shape, nbatch)
            out.append(gi if create else gi._value)
        if not retain:
            self.release()
        return tuple(out)

    def _as_grad(self, g: Any, k: int) -> Any:
        if g is None:
            shape = self._out_shapes[k]  # None: an output that is not a tensor gets None
            return None if not self.ctx.materialize_grads or shape is None else wrap(np.zeros(shape))
        return g if isinstance(g, Tensor) else wrap(g)

    def release(self) -> None:
        self.ctx._saved = FREED

    def retain(self, tensor: Tensor, edge: Any) -> None:
        if self._retain is None:
            self._retain = {}
        self._retain[edge.index if edge.__class__ is OutputRef else 0] = weakref.ref(tensor)

    def unretain(self, edge: Any) -> None:
        if self._retain is not None:
            self._retain.pop(edge.index if edge.__class__ is OutputRef else 0, None)

    def retained(self, edge: Any) -> Tensor | None:
        if self._retain is None:
            return None
        ref = self._retain.get(edge.index if edge.__class__ is OutputRef else 0)
        return None if ref is None else ref()

    def retained_tensors(self) -> list[tuple[Tensor, int | None]]:
        if not self._retain:
            return []
        multi = self.n_outputs > 1
        return [(ref(), k if multi else None) for k, ref in self._retain.items() if ref() is not None]


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether a gradient of shape ``target`` sums down to ``shape`` (``shape`` broadcasts to it)."""
    try:
        return np.broadcast_shapes(target, shape) == target
    except ValueError:
        return False


class _mode:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __enter__(self) -> None:
        self.previous = _grad_mode.set_enabled(self.enabled)

    def __exit__(self, *exc: object) -> None:
        _grad_mode.set_enabled(self.previous)


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``; call ``.apply``.

    ``backward`` returns one gradient per argument of ``forward`` (``None`` for
    arguments that need none). Written with gradcli operations, it is itself
    differentiable (``create_graph=True``).
    """

    _node_class: type[FunctionNode] | None = None

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom autograd.Function to use it with "
            "backward mode AD."
        )

    @staticmethod
    def setup_context(ctx: FunctionCtx, inputs: tuple[Any, ...], output: Any) -> None:
        """PyTorch 2 style: ``forward(*args)`` without ctx, then this fills ctx."""
        raise NotImplementedError

    @classmethod
    def _node_type(cls) -> type[FunctionNode]:
        made = cls.__dict__.get("_node_class")
        if made is None:
            made = type(f"{cls.__name__}Backward", (FunctionNode,), {"__slots__": (), "function": cls})
            made.__module__ = cls.__module__
            cls._node_class = made
        return made

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        args, needs, ctx, output = _run_forward(cls, args, kwargs)
        many = isinstance(output, tuple)
        outs = _as_outputs(output if many else (output,), ctx._dirty)
        if _grad_mode.state.enabled and any(needs):
            results = _recorded(cls, ctx, args, outs, many)
        else:
            results = _not_recorded(cls, outs, args, ctx._dirty)
        return tuple(results) if many else results[0]


def _run_forward(cls: type[Function], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``cls.forward`` under ``no_grad``: (the arguments as bound, which of them need grad, the
    context forward or ``setup_context`` filled, forward's output)."""
    separate_setup = cls.setup_context is not Function.setup_context
    if kwargs or separate_setup:  # setup_context sees every argument, defaults included (as PyTorch)
        args, kwargs = _bound(cls.forward, args, kwargs, separate_setup)
    needs = tuple(isinstance(a, Tensor) and a._edge is not None for a in args)
    ctx = FunctionCtx(needs)
    with no_grad():
        output = cls.forward(*args, **kwargs) if separate_setup else cls.forward(ctx, *args, **kwargs)
    if separate_setup:
        cls.setup_context(ctx, args, output)
    return args, needs, ctx, output


def _as_outputs(output: tuple[Any, ...], dirty: Any) -> list[Any]:
    """Forward's outputs: NumPy results become tensors; anything else that is not a tensor (None, a
    string, an int) passes through. Every input marked dirty must be among them."""
    outs = [wrap(as_value(o)) if isinstance(o, (np.ndarray, np.generic)) else o for o in output]
    if dirty and not dirty <= {id(o) for o in outs}:
        raise RuntimeError(
            "Some elements marked as dirty during the forward method were not returned as output. The inputs "
            "that are modified inplace must all be outputs of the Function."
        )
    return outs


def _not_recorded(cls: type[Function], outs: list[Any], args: tuple[Any, ...], dirty: Any) -> list[Any]:
    """The outputs of a call that is not recorded: the dirty inputs' versions move on all the same."""
    for o in outs:
        if id(o) in dirty:
            o._bump_version()
    _mark_custom_views(cls, outs, args, dirty)  # in no_grad mode too (PyTorch's IN_CUSTOM_FUNCTION)
    return outs


def _recorded(cls: type[Function], ctx: FunctionCtx, args: tuple[Any, ...], outs: list[Any], many: bool) -> list[Any]:
    """The outputs of a recorded call: one node of the Function's backward class for the call."""
    positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
    node = cls._node_type()(
        tuple(args[i]._edge for i in positions),
        ctx,
        positions,
        len(outs),
        tuple(args[i].shape for i in positions),
        [o.shape if isinstance(o, Tensor) else None for o in outs],
    )
    results = _link_outputs(node, ctx, outs, many, [a for a in args if isinstance(a, Tensor)])
    _mark_custom_views(cls, results, args, ctx._dirty)
    if _grad_mode.state.trace is not None:
        for result in results:
            if isinstance(result, Tensor):
                _grad_mode.state.trace.append((node, result, args))
    return results


_signature = functools.lru_cache(maxsize=256)(inspect.signature)  # apply binds on every call


def _bound(forward: Any, args: tuple[Any, ...], kwargs: dict[str, Any], separate: bool) -> Any:
    """``forward``'s arguments as it takes them, its defaults filled in: (positional, keyword-only)."""
    signature = _signature(forward)
    if not separate:  # forward(ctx, ...): bind without ctx
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.args, bound.kwargs


def _mark_custom_views(cls: type, results: list[Any], args: tuple[Any, ...], dirty: Any) -> None:
    """An output that is a view of an input (or the input returned as-is), not marked dirty: changing it
    in place under grad is refused, as PyTorch refuses it (CopySlices would override the custom backward)."""
    if cls is DelayedError:
        return
    roots = [storage_root(a) for a in args if isinstance(a, Tensor) and a._value.__class__ is np.ndarray]
    for k, r in enumerate(results):
        if (
            not isinstance(r, Tensor)
            or r._value.__class__ is not np.ndarray
            or id(r) in dirty
            or any(r is t for t in roots)
        ):
            continue
        root = next((t for t in roots if np.may_share_memory(r._value, t._value)), None)
        if root is not None:
            r._base = root
            r._multi_view = (cls.__name__, k, CUSTOM_VIEW)


def _link_outputs(
    node: FunctionNode, ctx: FunctionCtx, outs: list[Any], many: bool, tensors: list[Tensor]
) -> list[Any]:
    """Forward's outputs as the node's outputs: the tensor forward made becomes the output itself, as in
    PyTorch (an output that forward saved is then linked into the graph: its double backward is right);
    an input marked dirty is rebased onto the node; an input returned is a new tensor; a tensor returned
    twice is one object (the later output)."""
    inputs = {id(a) for a in tensors}
    results: list[Any] = []
    for k, o in enumerate(outs):
        if not isinstance(o, Tensor):
            results.append(o)
            continue
        if id(o) in ctx._non_differentiable:
            results.append(wrap(o._value))
            continue
        edge = OutputRef(node, k) if many else node
        if id(o) in ctx._dirty:
            _rebase_dirty(o, edge)
        elif any(o is r for r in results) or (o._edge is None and id(o) not in inputs):
            o._edge = edge
        else:
            o = wrap(o._value, edge)
        results.append(o)
    return results


def _rebase_dirty(t: Tensor, edge: Any) -> None:
    """An input that forward changed in place (``mark_dirty``): its history continues at the node, its
    base's too when it is a view (PyTorch's CopySlices)."""
    if t._edge.__class__ is AccumulateGrad:
        raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
    check_inplace(t, t._edge, True)
    t._bump_version()
    if t._base is not None and not t._detached:
        edge = rebase_view(t, edge)
    t._move_edge(t._edge, edge)
    retake_views(storage_root(t), t)


ONCE_DIFFERENTIABLE = "trying to differentiate twice a function that was marked with @once_differentiable"


class DelayedError(Function):
    """What a ``once_differentiable`` backward's results hang from under ``create_graph``:
    differentiating them again raises PyTorch's error."""

    @staticmethod
    def forward(ctx: FunctionCtx, *values: Any) -> Any:
        return values if len(values) > 1 else values[0]

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        raise RuntimeError(ONCE_DIFFERENTIABLE)


# PyTorch's node for it is named "Error"
DelayedError._node_class = type("Error", (FunctionNode,), {"__slots__": (), "function": DelayedError})


def once_differentiable(fn: Any) -> Any:
    """Decorate a ``Function``'s ``backward`` that is not itself differentiable (written with NumPy,
    say): it runs without recording; under ``create_graph`` with gradients that require grad, its
    results require grad, and differentiating them raises instead of silently giving 0."""

    @functools.wraps(fn)
    def wrapper(ctx: FunctionCtx, *args: Any) -> Any:
        with no_grad():
            outputs = fn(ctx, *args)
        if not _grad_mode.state.enabled or not any(isinstance(a, Tensor) and a._edge is not None for a in args):
            return outputs
        many = isinstance(outputs, tuple)
        items = outputs if many else (outputs,)
        leaves = []
        for o in items:
            if isinstance(o, Tensor) and o.dtype.kind in "fc":
                o = o.detach()
                o.requires_grad_(True)
            leaves.append(o)
        results = _delayed_error(leaves)
        return results if many else results[0]

    return wrapper


def _delayed_error(leaves: list[Any]) -> tuple[Any, ...]:
    """The results of a ``once_differentiable`` backward hung from one ``Error`` node, which has an edge
    for every result, ``None`` for those that are not tensors (PyTorch's DelayedError)."""
    n = len(leaves)
    tensors = [isinstance(o, Tensor) for o in leaves]
    if not any(tensors):
        return tuple(leaves)
    shapes = tuple(o.shape if t else () for o, t in zip(leaves, tensors))
    node = DelayedError._node_class(
        tuple(o._edge if t else None for o, t in zip(leaves, tensors)),
        FunctionCtx(tuple(tensors)),
        tuple(range(n)),
        n,
        shapes,
        list(shapes),
    )
    return tuple(
        wrap(o._value, OutputRef(node, k) if n > 1 else node) if t else o
        for k, (o, t) in enumerate(zip(leaves, tensors))
    )


class Unbind(Function):
    """One node for all the slices (PyTorch's UnbindBackward0): a hook on one slice is called, with
    None, when only another one is differentiated; the slices are views of ``input``."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, d: int) -> tuple[Tensor, ...]:
        ctx.set_materialize_grads(False)
        ctx.axis = d - x.ndim  # counted from the end: batched gradients (a Jacobian's) keep their axes
        ctx.dim = d
        value = x._value
        return tuple(wrap(value[(slice(None),) * d + (i, Ellipsis)]) for i in range(value.shape[d]))  # (0-d: views too)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        like = next(g for g in grads if g is not None)
        zero = wrap(np.zeros_like(like._value))
        stacked = [zero if g is None else g for g in grads]
        return apply(STACK, stacked, (like.ndim + 1 + ctx.axis,)), None  # (axis counted from the end)

    @staticmethod
    def jvp(ctx: Any, tangent: Any, _: Any) -> tuple[Tensor, ...]:
        return tangent.unbind(ctx.dim)


Unbind._node_class = type("UnbindBackward0", (FunctionNode,), {"__slots__": (), "function": Unbind})
