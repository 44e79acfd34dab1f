"""A tensor's place in the graph: ``requires_grad``, ``grad_fn``, ``is_leaf``, hooks, ``retain_grad``,
``backward`` and ``detach_``, put on ``Tensor`` (``tensor_methods``) by this module, which may know
the nodes and the engine that tensor.py must not (they build on Tensor)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import engine as _engine
from . import tensor as _tensor_mod
from .hooks import RemovableHandle, add, check_callable, hooks_of
from .node import AccumulateGrad, OutputRef, edge_node
from .tensor import REQUIRES_GRAD_DTYPE, Tensor, tensor_methods

DETACH_VIEW = (
    "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel (DDP) for "
    "training, and gradient_as_bucket_view is set as True, gradients are views of DDP buckets, and hence "
    "detach_() cannot be called on these gradients. To fix this error, please refer to the Optimizer.zero_grad() "
    "function in torch/optim/optimizer.py as the solution."
)

REQUIRES_GRAD_BOOL = "requires_grad must be a bool"


def register_tensor_hook(tensor: Tensor, fn: Any) -> RemovableHandle:
    """``Tensor.register_hook``: a hook of the node the tensor's gradient arrives at, for its output."""
    check_callable(fn)
    edge = tensor._edge
    if edge is None:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    index = edge.index if edge.__class__ is OutputRef else None
    return add(hooks_of(edge_node(edge)).tensor, (index, fn))


def register_post_accumulate(tensor: Tensor, fn: Any) -> RemovableHandle:
    """``Tensor.register_post_accumulate_grad_hook``: a hook of a leaf's ``AccumulateGrad``."""
    check_callable(fn)
    edge = tensor._edge
    if edge is None:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if edge.__class__ is not AccumulateGrad:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    return add(hooks_of(edge).post_accumulate, fn)


def _no_leaf() -> None:
    return None


@tensor_methods
class TensorPlace:
    """The methods of ``Tensor`` that read or change its edge (its node in the graph)."""

    @property
    def requires_grad(self) -> bool:
        return self._edge is not None

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        if flag.__class__ is not bool:
            raise RuntimeError(REQUIRES_GRAD_BOOL)
        edge = self._edge
        if edge is not None and edge.__class__ is not AccumulateGrad:
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
                _tensor_mod.complex_seen = True
            self._edge = AccumulateGrad(self)

    @requires_grad.deleter
    def requires_grad(self) -> None:
        raise RuntimeError(REQUIRES_GRAD_BOOL)  # (PyTorch's setter, handed no value)

    @property
    def grad_fn(self) -> Any:
        edge = self._edge
        if edge is None or edge.__class__ is AccumulateGrad:
            return None
        return edge.node if edge.__class__ is OutputRef else edge

    @property
    def is_leaf(self) -> bool:
        edge = self._edge
        return edge is None or edge.__class__ is AccumulateGrad

    def register_hook(self, hook: Any) -> Any:
        """``hook(grad)`` each time the gradient of this tensor is computed; it may return a
        replacement. Returns a handle whose ``.remove()`` removes the hook."""
        return register_tensor_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook: Any) -> Any:
        """``hook(leaf)`` after the gradient was accumulated into this leaf's ``.grad``."""
        return register_post_accumulate(self, hook)

    def retain_grad(self) -> None:
        """Keep this non-leaf's ``.grad`` after backward (leaves keep theirs anyway)."""
        edge = self._edge
        if edge is None:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if edge.__class__ is not AccumulateGrad:
            edge_node(edge).retain(self, edge)

    @property
    def retains_grad(self) -> bool:
        edge = self._edge
        if edge is None or edge.__class__ is AccumulateGrad:
            return False
        return edge_node(edge).retained(edge) is self

    def backward(
        self, gradient: Any = None, retain_graph: bool | None = None, create_graph: bool = False, inputs: Any = None
    ) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (see ``gradcli.autograd.backward``)."""
        _engine.backward(self, gradient, retain_graph, create_graph, inputs)

    def detach_(self) -> Tensor:
        """Cut this tensor from the graph in place; a node that saved it refuses to use it (PyTorch)."""
        if self._base is not None and not self._detached:
            raise RuntimeError(DETACH_VIEW)
        edge = self._edge
        if edge.__class__ is AccumulateGrad:
            edge.variable = _no_leaf  # a pass still reaching the leaf's sink fills no .grad (PyTorch)
        elif edge is not None:
            _tensor_mod.inplace_seen = True  # saved tensors are checked from now on (OpNode._check_versions)
            self._detached_in_place = True
        self._edge = None
        return self
