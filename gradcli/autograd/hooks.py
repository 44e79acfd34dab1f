"""Backward hooks, run where and in the order PyTorch runs them (its "Backward Hooks execution").

When a node is about to run, with the gradients of its outputs:

1. the hooks of the tensors it produced (``Tensor.register_hook``), in the order registered,
   each may return a replacement gradient;
2. ``retain_grad`` stores ``.grad`` (the gradient the tensor hooks left);
3. the node's pre-hooks (``grad_fn.register_prehook``: ``fn(grad_outputs)``);
4. the node runs, then its hooks (``grad_fn.register_hook``: ``fn(grad_inputs, grad_outputs)``).

A leaf's hooks are its ``AccumulateGrad``'s tensor hooks: they run before the gradient is
accumulated (what they return is what ``.grad`` gets), then the node's pre-hooks,
accumulation, ``register_post_accumulate_grad_hook`` hooks, and the node's hooks with
``grad_inputs == ()``. ``gc.grad`` returns the gradient a captured tensor's hooks left;
the nodes it does not need to run do not run their node hooks.

Nothing here runs until a hook is registered (``seen``): the engine reads one flag per pass.
"""

from __future__ import annotations

import itertools
from typing import Any

from .tensor import Tensor, wrap

#: Set by the first hook registered; until then the engine skips the hook checks. For the process,
#: not a thread (unlike the modes in grad_mode.state): a hook belongs to a node, which any thread
#: may run; set once and never cleared, so a thread reading it late only checks more.
seen = False

_ids = itertools.count()


class RemovableHandle:
    """What ``register_hook`` returns: ``handle.remove()`` removes the hook (again: nothing happens)."""

    __slots__ = ("_table", "id")

    def __init__(self, table: dict[int, Any]) -> None:
        self._table = table
        self.id = next(_ids)

    def remove(self) -> None:
        self._table.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


class NodeHooks:
    """The hooks of one node: ``tensor`` ({id: (output index, fn)}), ``pre``, ``post`` and
    ``post_accumulate`` ({id: fn})."""

    __slots__ = ("tensor", "pre", "post", "post_accumulate")

    def __init__(self) -> None:
        self.tensor: dict[int, Any] = {}
        self.pre: dict[int, Any] = {}
        self.post: dict[int, Any] = {}
        self.post_accumulate: dict[int, Any] = {}


def hooks_of(node: Any) -> NodeHooks:
    global seen
    seen = True
    hooks = node._hooks
    if hooks is None:
        hooks = node._hooks = NodeHooks()
    return hooks


def add(table: dict[int, Any], entry: Any) -> RemovableHandle:
    handle = RemovableHandle(table)
    table[handle.id] = entry
    return handle


def check_callable(fn: Any) -> None:
    """Refuse a hook that cannot be called, when it is registered (not when it would run)."""
    if not callable(fn):
        raise TypeError(f"hook must be callable, got {type(fn).__name__}")


def register_node_hook(node: Any, fn: Any) -> RemovableHandle:
    check_callable(fn)
    return add(hooks_of(node).post, fn)


def register_node_prehook(node: Any, fn: Any) -> RemovableHandle:
    check_callable(fn)
    return add(hooks_of(node).pre, fn)


# --- running them (called by the engine) -----------------------------------------------------------


def _as_tensor(g: Any) -> Any:
    return g if g is None or isinstance(g, Tensor) else wrap(g)


def _as_grad(r: Any, like: Any, create: bool, what: str) -> Any:
    """A hook's replacement gradient as the engine carries it (an array, or a tensor under create_graph)."""
    if not isinstance(r, Tensor):
        raise TypeError(f"{what} must return None or a Tensor, got {type(r).__name__}")
    if like is not None and r.shape != getattr(like, "shape", ()):
        raise RuntimeError(f"hook '{what}' has changed the size of value")
    return r if create else r._value


def run_tensor_hooks(hooks: NodeHooks, g: Any, multi: bool, create: bool) -> Any:
    """The tensor hooks on the gradient(s) arriving at a node; returns the gradient(s) they leave."""
    if not hooks.tensor:
        return g
    if multi:
        g = list(g)
    for index, fn in list(hooks.tensor.values()):
        current = g[index] if multi else g
        if current is None and not multi:
            continue
        r = fn(_as_tensor(current))  # an output of several without a gradient: None, as in PyTorch
        if r is not None:
            r = _as_grad(r, current, create, getattr(fn, "__name__", "hook"))
            if multi:
                g[index] = r
            else:
                g = r
    return g


def run_pre_hooks(hooks: NodeHooks, g: Any, multi: bool, create: bool) -> Any:
    if not hooks.pre:
        return g
    grads = list(g) if multi else [g]
    for fn in list(hooks.pre.values()):
        r = fn(tuple(_as_tensor(gi) for gi in grads))
        if r is not None:
            r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
            if len(r) != len(grads):
                raise RuntimeError(
                    f"hook returned an incorrect number of values (got {len(r)}, but expected {len(grads)})"
                )
            grads = [None if ri is None else _as_grad(ri, gi, create, "prehook") for ri, gi in zip(r, grads)]
    return grads if multi else grads[0]


def run_post_hooks(hooks: NodeHooks, in_grads: Any, g: Any, multi: bool, create: bool) -> Any:
    if not hooks.post:
        return in_grads
    grads_out = tuple(_as_tensor(gi) for gi in (g if multi else [g]))
    in_grads = list(in_grads)
    for fn in list(hooks.post.values()):
        r = fn(tuple(_as_tensor(gi) for gi in in_grads), grads_out)
        if r is not None:
            r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
            if len(r) != len(in_grads):
                raise RuntimeError(
                    f"hook returned an incorrect number of values (got {len(r)}, but expected {len(in_grads)})"
                )
            in_grads = [None if ri is None else _as_grad(ri, gi, create, "hook") for ri, gi in zip(r, in_grads)]
    return in_grads


def run_post_accumulate(hooks: NodeHooks, leaf: Any, g: Any, create: bool) -> None:
    for fn in list(hooks.post_accumulate.values()):
        fn(leaf)
    if hooks.post:
        grads_out = (_as_tensor(g),)
        for fn in list(hooks.post.values()):
            fn((), grads_out)
