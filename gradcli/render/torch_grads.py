"""The gradients of a PyTorch graph's nodes (torch_graph.py builds the nodes): one
``torch.autograd.grad`` pass with a pre-hook on every node, or what a ``backward()`` left; each
gradient reduced to what the graph keeps (``kept_array``: statistics beyond ``FULL_LIMIT`` elements)
when the hook sees it, so that no gradient is held whole for long; and each scalar edge's local derivative.

This module imports torch: only torch_graph.py imports it.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..lang.frameworks.torch_record import numpy_of
from ..stats import FULL_LIMIT, TensorStats, arrays_kept, light
from .model import Graph


def is_leaf(node: Any) -> bool:
    return type(node).__name__ == "AccumulateGrad"


def kept_array(tensor: Any, own: bool = False, keep: bool | None = None) -> Any:
    """A tensor as the graph keeps it: up to ``FULL_LIMIT`` elements a NumPy copy; beyond, its
    statistics (``stats.light``), read in place, with the whole array only where ``--arrays`` asks for
    it (``keep``; None: as ``keeping_arrays`` says on this thread): a copy, or the tensor's own memory
    where it is ``own`` (a recording's copy is not copied again)."""
    keep = arrays_kept() if keep is None else keep
    array = numpy_of(tensor)
    if array.size <= FULL_LIMIT or (keep and not own):
        array = array.copy()
    return light(array, keep=keep)


def kept_recorded(value: Any) -> tuple[Any, tuple[int, ...]]:
    """What the graph keeps of a recorded value (``torch_record.seen``: a copy of the recording's own,
    or its statistics), and its shape."""
    if isinstance(value, TensorStats):
        return value, value.shape
    return kept_array(value, own=True), tuple(value.shape)


# --- gradients and local derivatives --------------------------------------------------------------


def gradients(graph: Graph, builder: Any, outputs: Sequence[Any], seed: Any) -> bool:
    """Each node's gradient from one ``torch.autograd.grad`` pass (False when none could run): what
    flows into the node (its pre-hook's ``grad_outputs[0]``, as ``retain_grad()`` keeps it), and the
    leaves' as returned; ``.grad`` of every tensor the graph knows is left as it was."""
    if any(m.freed for m in graph.nodes):
        gradients_left(graph, builder)
        return False
    out = outputs[0] if len(outputs) == 1 else None
    if out is None or not out.requires_grad:
        graph.notes += [] if out is not None else ["gradients are shown for a single output"]
        return False
    grad_output = _seed(graph, out, seed)
    leaves = {i: n.variable for i, n in builder.autograd.items() if is_leaf(n)}
    if out.grad_fn is None or not leaves:  # a leaf drawn alone: its gradient is the seed
        graph.node(graph.outputs[0]).grad = kept_array(grad_output)
        return out.grad_fn is None
    found: dict[str, Any] = {}
    hooks = [
        node.register_prehook(_catch(found, builder.ports.get(node) or {0: i}, arrays_kept()))
        for i, node in builder.autograd.items()
        if not is_leaf(node)
    ]
    kept = _retained(builder.alive)  # (the pass adds to their .grad)
    builder.record.catching = False  # (a recording's hooks keep the user's backward's gradients, not this pass's)
    try:
        grads = torch.autograd.grad(out, list(leaves.values()), grad_output, retain_graph=True, allow_unused=True)
    except RuntimeError as failed:
        graph.notes.append(f"no gradients: backward through this graph fails: {str(failed).split('. Hint:')[0]}")
        return False
    finally:
        builder.record.catching = True
        for hook in hooks:
            hook.remove()
        for tensor, grad in kept:
            tensor.grad = grad
    grads = list(grads)  # (each leaf's gradient let go once reduced: never all held whole at once)
    for k, node_id in enumerate(leaves):
        found[node_id], grads[k] = None if grads[k] is None else kept_array(grads[k]), None
    for node_id, g in found.items():
        graph.node(node_id).grad = g
    return True


def alive_from(nodes: set[Any]) -> list[Any]:
    """The tensors still alive, wherever held (a list, a dict, a hook's closure), that ``nodes`` made:
    one scan of the heap, which a graph makes once (its time grows with the objects of the process:
    0.1 s in a fresh one, a second in a long session)."""
    found = []
    tensor_types: dict[type, bool] = {}
    for o in gc.get_objects():
        kind = type(o)  # (its type: a proxy's __class__ may warn)
        is_tensor = tensor_types.get(kind)
        if is_tensor is None:
            is_tensor = tensor_types[kind] = issubclass(kind, torch.Tensor)
        if is_tensor:
            try:
                node = o.grad_fn
            except RuntimeError:  # (a tensor of a transform's, without autograd state of its own)
                continue
            if node is not None and node in nodes:
                found.append(o)
    return found


def live_tensors(alive: Sequence[Any]) -> dict[Any, Any]:
    """Of the tensors ``alive``, each node's first output: what it holds is the node's value (an op in
    place since would have given the tensor a node of its own)."""
    found: dict[Any, Any] = {}
    for o in alive:
        if o.output_nr == 0:
            found.setdefault(o.grad_fn, o)
    return found


def _retained(alive: Sequence[Any]) -> list[tuple[Any, Any]]:
    """Every tensor of ``alive`` that called ``retain_grad()``, with its ``.grad`` now: the engine's
    pass fills theirs, and the graph leaves every ``.grad`` as it was (another thread's tensors, of
    other nodes, are not touched)."""
    return [(o, o.grad) for o in alive if not o.is_leaf and o.retains_grad]


def _seed(graph: Graph, out: Any, seed: Any) -> Any:
    """The vector of the backward pass: ``seed``, else ones (of the output's sum, a note says, when
    the output is not a scalar)."""
    if seed is None:
        if out.numel() != 1:
            graph.notes.append(
                f"the output has shape {tuple(out.shape)}: the gradients are those of its sum (seed of ones)"
            )
        return torch.ones_like(out)
    return torch.as_tensor(np.asarray(seed), dtype=out.dtype).reshape(out.shape)


def _catch(found: dict[str, Any], ids: Mapping[int, str], keep: bool) -> Callable[[Any], None]:
    """A pre-hook keeping what flows into each output of a node (``ids``: output number -> model id;
    an output no path reaches gets zeros, or None from the engine), as the graph keeps it (``kept_array``:
    a large gradient's statistics, computed here, the gradient itself not held; whole too with ``keep``,
    told here: the engine may run the hook on a thread of its own, outside the caller's context)."""

    def hook(grad_outputs: Any) -> None:
        for k, node_id in ids.items():
            g = grad_outputs[k] if k < len(grad_outputs) else None
            found[node_id] = None if g is None else kept_array(g, keep=keep)

    return hook


def gradients_left(graph: Graph, builder: Any) -> None:
    """After a ``backward()`` that freed the graph: the gradients it left, ``.grad`` of the leaves
    and of the tensors that called ``retain_grad()`` (those the caller holds), and what a recording's
    hooks kept of every other node's (``gc.render.recording()`` around the forward)."""
    for node_id, tensor in builder.tensors.items():
        left = tensor.grad if tensor.is_leaf or tensor.retains_grad else None
        graph.node(node_id).grad = None if left is None else kept_array(left)
    caught = 0
    for node_id, node in builder.autograd.items():
        for number, port in (builder.ports.get(node) or {0: node_id}).items():
            grad = builder.record.grad_of(node, number)
            if grad is not None and graph.node(port).grad is None:
                graph.node(port).grad = kept_recorded(grad)[0]
                caught += 1
    graph.notes.append(
        "backward() has already run and freed this graph: the gradients shown are the ones it gave "
        "(.grad of the leaves, and what the recording kept of every other node's)"
        if caught
        else "backward() has already run and freed this graph: the gradients shown are the ones it left "
        "(.grad of the leaves and of tensors that called retain_grad())"
    )


def local_derivatives(graph: Graph, builder: Any) -> None:
    """d node / d input for each scalar edge: the node's own backward called with ones."""
    for model in graph.nodes:
        node = builder.autograd.get(model.id)
        if node is None or is_leaf(node) or model.freed or model.value is None or np.size(model.value) != 1:
            continue
        edges = graph.inputs_of(model.id)
        if not edges or any(e.source == "hidden" or np.size(graph.node(e.source).value) != 1 for e in edges):
            continue
        try:
            with torch.no_grad():
                found = _backward_of(node, torch.from_numpy(np.ones_like(model.value)))
        except Exception:  # (a node of several outputs, or a backward that needs more: no labels)
            continue
        for edge in edges:
            g = found[edge.input] if edge.input < len(found) else None
            if isinstance(g, torch.Tensor) and g.numel() == 1:
                edge.local_grad = kept_array(g).reshape(())


def _backward_of(node: Any, ones: Any) -> list[Any]:
    """The node's backward of ``ones``, one gradient per ``next_functions`` entry."""
    custom = hasattr(type(node), "_forward_cls")
    found = node.apply(ones) if custom else node(ones)
    found = list(found) if isinstance(found, (tuple, list)) else [found]
    if not custom:
        return found
    slots = len(node.next_functions)
    if len(found) != slots:  # (non-tensor arguments get None: keep the tensors' slots)
        found = [g for g in found if g is not None][:slots] if sum(g is not None for g in found) == slots else []
    return found
