"""The backward engine: ``backward`` and ``grad``.

Never recursive (DESIGN principle 5), and in PyTorch's order: every node has a
sequence number (``Node.seq``, the order nodes were made, as PyTorch's
sequence_nr), and of the nodes ready to run, the one made last runs first. A
node is made after the nodes of its inputs, so when the latest node holding a
gradient runs, all its consumers have run: a plain pass (no hook, capture,
anomaly check or graph of the backward: nearly every pass) keeps the nodes
holding a gradient in a heap and needs no first pass over the graph. The other
passes count, for every node reachable from the outputs, how many edges point
at it, and run a node once they all delivered (Kahn's algorithm, with PyTorch's
dependency counts and its priority: a leaf as soon as it is ready, for the
hooks' order). A chain a million nodes deep needs no Python stack.

Gradient buffers that the engine allocated itself are accumulated in place;
buffers it did not allocate (a gradient passed straight through ``+``, a
user's ``gradient=``) are never written to.
"""

from __future__ import annotations

import gc as _gc
import sys
from _thread import _local as _thread_local  # threading.local; threading itself when a thread is needed
from collections.abc import Sequence
from heapq import heapify, heappop, heappush
from typing import Any

import numpy as np

from ..ops import REAL as REAL_PRIM
from . import anomaly as _anomaly
from . import grad_mode as _grad_mode
from . import hooks as _hooks
from . import tensor as _tensor_mod
from .donation import DONATION as _DONATION
from .functions import to
from .node import AccumulateGrad, CopyBackwards, OutputRef, edge_node
from .tensor import Tensor, wrap

_ndarray = np.ndarray

SCALAR_ONLY = "grad can be implicitly created only for scalar outputs"


def _as_list(x: Any) -> list[Any]:
    if x is None:
        return []
    if isinstance(x, (Tensor, np.ndarray)) or not isinstance(x, Sequence):
        return [x]
    return list(x)


def _root_grads(outputs: list[Tensor], grad_outputs: Any, create_graph: bool) -> list[Any]:
    given = _as_list(grad_outputs) if grad_outputs is not None else [None] * len(outputs)
    if len(given) != len(outputs):
        raise RuntimeError(f"grad requires one gradient per output: got {len(given)} for {len(outputs)} outputs")
    grads = []
    for i, (out, g) in enumerate(zip(outputs, given)):
        if g is None:
            if np.size(out._value) != 1:
                raise RuntimeError(SCALAR_ONLY)
            if out._value.dtype.kind == "c":
                raise RuntimeError("grad can be implicitly created only for real scalar outputs")
            g = np.ones_like(out._value)
        else:
            gv = g._value if isinstance(g, Tensor) else np.asarray(g, dtype=np.asarray(out._value).dtype)
            if np.shape(gv) != out.shape:  # (PyTorch's words, its shapes printed as torch.Size)
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of torch.Size({list(np.shape(gv))}) and "
                    f"output[{i}] has a shape of torch.Size({list(out.shape)})."
                )
            if (gv.dtype.kind == "c") != (out.dtype.kind == "c"):
                raise RuntimeError(
                    "For complex Tensors, both grad_output and output are required to have the same dtype. Mismatch "
                    f"in dtype: grad_output[{i}] has a dtype of torch.{gv.dtype} and output[{i}] has a dtype of "
                    f"torch.{out.dtype}."
                )
            if create_graph and isinstance(g, Tensor):
                grads.append(g)
                continue
            g = gv
        grads.append(wrap(g) if create_graph else g)
    return grads


def reachable_counts(roots: list[Any]) -> dict[Any, int]:
    """Every node reachable from ``roots``, with the number of edges pointing at it.

    One small int a node (ints below 257 are shared, so a chain of a million
    nodes costs only the dict): the gradients themselves live in a second dict
    that holds just the frontier of the traversal.
    """
    pending: dict[Any, int] = {}
    stack = []
    for e in roots:
        n = edge_node(e)
        if n not in pending:
            pending[n] = 0
            stack.append(n)
    get = pending.get
    while stack:
        node = stack.pop()
        arity = node.plain_arity  # one or two edges in slots of their own: read without a tuple
        for e in node.next if not arity else (node.e0,) if arity == 1 else (node.e0, node.e1):
            if e is None:
                continue
            if e.__class__ is OutputRef:
                e = e.node
            count = get(e)
            if count is None:
                pending[e] = 1
                stack.append(e)
            else:
                pending[e] = count + 1
    return pending


def _needed(pending: dict[Any, int], roots: list[Any], targets: set[Any]) -> set[Any] | None:
    """Nodes from which some target is reachable (the rest need not run); ``None``: all of them."""
    leaves = {n for n in pending if n.__class__ is AccumulateGrad}
    if targets == leaves:  # every node reaches some leaf, and every leaf is wanted
        return None
    order = []
    remaining = dict(pending)
    ready = [n for n in {edge_node(e) for e in roots} if remaining[n] == 0]
    while ready:
        node = ready.pop()
        order.append(node)
        for e in node.next:
            if e is not None:
                m = edge_node(e)
                remaining[m] -= 1
                if remaining[m] == 0:
                    ready.append(m)
    needed = set(targets)
    for node in reversed(order):
        if node not in needed and any(e is not None and edge_node(e) in needed for e in node.next):
            needed.add(node)
    return needed


# Gradients waiting at a node: ``grads[node]``. ``owned`` holds the nodes whose buffer the
# engine allocated itself, so adding into it in place is safe; a buffer it did not allocate
# (a gradient passed straight through "+", a user's ``gradient=``) is never written to.


def _add(grads: dict[Any, Any], owned: set[Any], node: Any, g: Any, create: bool, fresh: bool = False) -> None:
    """Add ``g`` into a node's gradient buffer: the one place that decides when adding in place is safe.

    ``fresh``: ``g`` is a new array that nobody else holds (made by one of gradcli's own rules),
    so the buffer may later be added into in place."""
    prev = grads.get(node)
    if prev is None:
        grads[node] = g
        if fresh:
            owned.add(node)
    elif (
        not create
        and node in owned
        and prev.__class__ is _ndarray
        and prev.shape == np.shape(g)
        and (not _tensor_mod.complex_seen or prev.dtype == np.result_type(prev, g))
    ):
        prev += g
    else:
        total = prev + g
        grads[node] = total
        if not create and total.__class__ is _ndarray:
            owned.add(node)
        else:
            owned.discard(node)


def _add_output(grads: dict[Any, Any], node: Any, index: int, g: Any) -> None:
    """Add ``g`` to output ``index`` of a node with several outputs."""
    slots = grads.get(node)
    if slots is None:
        slots = grads[node] = [None] * node.n_outputs
    slots[index] = g if slots[index] is None else slots[index] + g


def run_backward(
    roots: list[Any],
    grads: list[Any],
    *,
    retain_graph: bool,
    create_graph: bool,
    capture: dict[Any, int] | None = None,
    nbatch: int = 0,
) -> list[Any]:
    """Propagate ``grads`` from the ``roots`` edges through the graph.

    Without ``capture``, gradients reaching leaves accumulate into ``.grad``.
    With it (``{node: slot}``), the gradients arriving at those nodes are
    returned instead, leaves are left alone and only nodes that lead to a
    captured node run.
    """
    depth = _reentrant.depth
    if depth and _stack_depth() > sys.getrecursionlimit() // 2:
        # a backward called from a backward (a custom Function's), deep enough to run out
        # of stack: continue on a fresh thread's stack, as PyTorch's engine does
        return _on_fresh_stack(
            lambda: run_backward(
                roots, grads, retain_graph=retain_graph, create_graph=create_graph, capture=capture, nbatch=nbatch
            )
        )
    # The engine makes no reference cycles, and a cycle collection rescans the whole
    # graph every few hundred allocations: pause the collector while propagating.
    collecting = _gc.isenabled()
    _gc.disable()
    _reentrant.depth = depth + 1
    try:
        return _propagate(roots, grads, retain_graph, create_graph, capture, nbatch)
    finally:
        _reentrant.depth = depth
        if collecting:
            _gc.enable()


class _Reentrant(_thread_local):
    depth = 0  # backward passes running on this thread (more than 1: reentrant)


_reentrant = _Reentrant()


def _stack_depth() -> int:
    frame, n = sys._getframe(), 0
    while frame is not None:
        frame, n = frame.f_back, n + 1
    return n


def _on_fresh_stack(fn: Any) -> Any:
    """``fn()`` on a new thread (its own stack and recursion count), waited for; the thread takes
    the caller's modes (grad mode, tape, anomaly mode): it continues the caller's work."""
    outcome: list[Any] = [None, None]
    modes = _grad_mode.state.snapshot()

    def run() -> None:
        _grad_mode.state.adopt(modes)
        try:
            outcome[0] = fn()
        except BaseException as exc:  # re-raised in the caller's thread
            outcome[1] = exc

    import threading

    worker = threading.Thread(target=run, name="gradcli-reentrant-backward")
    worker.start()
    worker.join()
    if outcome[1] is not None:
        raise outcome[1]
    return outcome[0]


class _Schedule:
    """Which nodes run, in which order: every node reachable from the roots with its count of
    consumers still to deliver (a node runs when that reaches 0: Kahn's order), pruned to the
    nodes that lead to a captured one (``needed``; ``None``: every node runs)."""

    __slots__ = ("roots", "pending", "needed", "ready", "skip", "plain_capture")

    def __init__(self, roots: list[Any], capture: dict[Any, int] | None) -> None:
        self.roots = roots
        self.pending = reachable_counts(roots)
        self.needed = needed = _needed(self.pending, roots, set(capture)) if capture is not None else None
        # captured nodes that lead to no other captured node take their gradient and do not run
        # (as in PyTorch: their node hooks do not fire, their rules cost nothing)
        self.skip = (
            None
            if needed is None
            else {t for t in capture if not any(e is not None and edge_node(e) in needed for e in t.next)}
        )
        # ready nodes, the one made last first (``Node.seq``; a leaf as soon as it is ready), as
        # PyTorch's engine orders them
        self.ready = [(-n.seq, n) for n in {edge_node(e): None for e in roots} if self.pending[n] == 0]
        heapify(self.ready)
        # every node runs and only leaves are captured (``grad`` with respect to the inputs)
        self.plain_capture = needed is None and all(t.__class__ is AccumulateGrad for t in capture or ())


def _propagate(roots, root_grads, retain_graph, create_graph, capture, nbatch):
    plain = capture is None and not create_graph and not _hooks.seen and _grad_mode.state.anomaly is None
    schedule = None if plain else _Schedule(roots, capture)  # (the plain loop needs no counts)
    grads: dict[Any, Any] = {}
    owned: set[Any] = set()
    for e, g in zip(roots, root_grads):
        if e.__class__ is OutputRef:
            _add_output(grads, e.node, e.index, g)
        else:
            _add(grads, owned, e, g, create_graph)
    previous_mode = _grad_mode.set_enabled(create_graph)
    try:
        with np.errstate(all="ignore"):
            if schedule is None:
                _run_plain(roots, grads, owned, retain_graph, nbatch)
                return []
            return _run_nodes(schedule, grads, owned, retain_graph, create_graph, capture, nbatch)
    finally:
        _grad_mode.set_enabled(previous_mode)


def _run_nodes(schedule, grads, owned, retain_graph, create_graph, capture, nbatch):
    """The loop: each ready node takes its gradient, applies its rule, hands the results on."""
    pending, needed, ready, skip = schedule.pending, schedule.needed, schedule.ready, schedule.skip
    captured: list[Any] = [None] * _slot_count(capture)
    pop = grads.pop
    anomaly = _grad_mode.state.anomaly is not None  # read once: it does not change during a backward pass
    hooked = _hooks.seen  # likewise: no hook anywhere, no hook to look for
    hooks = None
    if not hooked and not anomaly and not create_graph and schedule.plain_capture:
        _run_plain(schedule.roots, grads, owned, retain_graph, nbatch, capture, captured)
        return captured
    while ready:
        node = heappop(ready)[1]
        g = pop(node, None)
        if hooked:
            hooks = node._hooks
            if hooks is not None and g is not None:
                g = _hooks.run_tensor_hooks(hooks, g, getattr(node, "n_outputs", 1) > 1, create_graph)
                owned.discard(node)  # the hooks saw this buffer: never written to in place
        if capture is not None and g is not None and node in capture:
            _capture(captured, capture[node], g)
        if node.__class__ is AccumulateGrad:
            if capture is None and g is not None:
                _leaf_arrives(node, hooks, g, node in owned, create_graph)
            owned.discard(node)
            continue
        if g is not None and (needed is None or (node in needed and node not in skip)):
            lent = g.__class__ is _ndarray and g.ndim and node in owned and not create_graph and not anomaly
            owned.discard(node)
            in_grads, taken, trusted = _run_node(node, g, hooks, lent and (capture is None or node not in capture),
                                                 create_graph, anomaly, retain_graph, nbatch)  # fmt: skip
        else:
            in_grads, taken, trusted = _NO_GRADS, False, False
        _hand_on(node, in_grads, g, taken, trusted, grads, owned, pending, ready, needed, create_graph)
    return captured


def _run_node(node, g, hooks, lent, create_graph, anomaly, retain_graph, nbatch):
    """One node, in either loop (the loops differ only in their order and bookkeeping): its rules on
    ``g``, between its hooks, checked in anomaly mode.
    ``lent``: ``g`` is an array the engine made and holds alone, and nothing outside the node's rules
    will see it, so the node's last rule to read it may write into it. Returns the gradients for its
    edges, whether a rule wrote into ``g`` and returned it, and whether they come from gradcli's rules."""
    trusted = not node.user_defined
    if lent and hooks is None and trusted:
        in_grads, taken = _apply_donating(node, g, retain_graph, nbatch)
        return in_grads, taken, True
    if node._retain is not None:
        _retain_grad(node, g, create_graph)
    try:
        if hooks is None:
            in_grads = node.apply(g, create_graph, nbatch, retain_graph)
        else:
            multi = getattr(node, "n_outputs", 1) > 1
            g = _hooks.run_pre_hooks(hooks, g, multi, create_graph)
            in_grads = node.apply(g, create_graph, nbatch, retain_graph)
            in_grads = _hooks.run_post_hooks(hooks, in_grads, g, multi, create_graph)
    except Exception:
        if anomaly:  # PyTorch warns which node failed, and where it was made, before the error propagates
            _anomaly.node_failed(node)
        raise
    if anomaly:
        in_grads = tuple(in_grads)
        _anomaly.backward_check(node, g, in_grads)
    return in_grads, False, trusted


def _leaf_arrives(node, hooks, g, owned, create_graph):
    """A leaf's complete gradient in ``_run_nodes``, into its ``.grad`` (through its hooks if any)."""
    if hooks is None:
        _accumulate(node, g, owned, create_graph)
    else:
        _accumulate_hooked(node, hooks, g, create_graph)


def _slot_count(capture: dict[Any, Any] | None) -> int:
    """How many gradients a pass capturing ``capture`` returns (a slot is an int, or ``{output: slot}``
    for the outputs of a node with several)."""
    slots = [-1]
    for slot in (capture or {}).values():
        slots.extend(slot.values() if slot.__class__ is dict else (slot,))
    return max(slots) + 1


def _capture(captured: list[Any], slot: Any, g: Any) -> None:
    if slot.__class__ is dict:  # outputs of a node with several: ``g`` holds one gradient an output
        for index, k in slot.items():
            captured[k] = g[index]
    else:
        captured[slot] = g


def _hand_on(node, in_grads, g, taken, trusted, grads, owned, pending, ready, needed, create=False):
    """The edge loop of ``_run_nodes``: each input's gradient to its node, which is ready once all
    its consumers delivered. A new array from one of gradcli's own rules (``trusted``) that
    nobody else holds becomes the engine's to add into in place; ``g`` itself only if a rule
    wrote into it and returned it (``taken``)."""
    for e, gi in zip(node.next, in_grads):
        if e is None:
            continue
        if e.__class__ is OutputRef:
            m = e.node
            if gi is not None and (needed is None or m in needed):
                _add_output(grads, m, e.index, gi)
        else:
            m = e
            if gi is not None and (needed is None or m in needed):
                if m in grads:
                    _add(grads, owned, m, gi, create)
                else:
                    grads[m] = gi
                    if gi.__class__ is _ndarray and trusted and (gi is not g or taken) and gi.base is None:
                        owned.add(m)
        count = pending[m] - 1
        pending[m] = count
        if count == 0:
            heappush(ready, (-m.seq, m))


def _run_plain(roots, grads, owned, retain_graph, nbatch, capture=None, captured=None):
    """The loop without hooks, anomaly check or graph of the backward (nearly every pass).

    No counts and no first pass over the graph: every node holding a gradient waits in a heap
    and the one made last runs next (``Node.seq``). Its consumers were all made after it and ran
    before it, so its gradient is complete: the order of PyTorch's engine, which also runs the
    ready node with the highest sequence number first. Leaves take their gradients at the end
    (into ``.grad``, or into ``captured`` for ``grad``).

    A one- or two-input node of a primitive's own rules with a scalar gradient (a graph of
    scalars: nearly every node) is run in the loop itself; any other node in ``_plain_node``."""
    heap: list[tuple[int, Any]] = []
    leaves: list[Any] = []
    for n in {edge_node(e): None for e in roots}:
        (leaves.append(n) if n.__class__ is AccumulateGrad else heap.append((-n.seq, n)))
    heapify(heap)
    try:
        _plain_loop(heap, leaves, grads, owned, retain_graph, nbatch)
    except BaseException:
        if capture is None:  # as in PyTorch, the leaves whose gradient was complete keep it
            _accumulate_complete(heap, leaves, grads, owned)
        raise
    for leaf in leaves:
        g = grads.pop(leaf, None)
        if g is not None:
            if capture is None:
                _accumulate(leaf, g, leaf in owned, False)
            elif leaf in capture:
                captured[capture[leaf]] = g
        owned.discard(leaf)


def _plain_loop(heap, leaves, grads, owned, retain_graph, nbatch):
    """``_run_plain``'s loop; a node that fails goes back on the heap (its inputs did not get its
    gradient, so the leaves it reaches are not complete)."""
    pop, get = grads.pop, grads.get
    node = None
    try:
        while heap:
            node = heappop(heap)[1]
            g = pop(node, None)
            arity = node.plain_arity
            if not arity or g is None or g.__class__ is _ndarray or node._retain is not None:
                _plain_node(node, g, grads, owned, heap, leaves, retain_graph, nbatch)
                continue
            if arity == 2:
                ga, gb = node.apply(g, False, nbatch, retain_graph)
                edges = ((node.e0, ga), (node.e1, gb))
            else:
                edges = ((node.e0, node.apply(g, False, nbatch, retain_graph)[0]),)
            for m, gi in edges:
                if m is None or gi is None:
                    continue
                if m.__class__ is OutputRef or gi.__class__ is _ndarray:
                    _deliver(m, gi, True, grads, owned, heap, leaves)
                    continue
                prev = get(m)
                if prev is None:
                    grads[m] = gi
                    if m.__class__ is AccumulateGrad:
                        leaves.append(m)
                    else:
                        heappush(heap, (-m.seq, m))
                elif prev.__class__ is _ndarray:
                    _add(grads, owned, m, gi, False)
                else:  # two scalars (the engine never holds a scalar in place)
                    grads[m] = prev + gi
    except BaseException:
        if node is not None:
            heap.append((0, node))
        raise


def _accumulate_complete(heap, leaves, grads, owned):
    """After a node failed: into ``.grad`` the leaves that no node still waiting reaches."""
    waiting = reachable_counts([n for _, n in heap])
    for leaf in leaves:
        g = grads.pop(leaf, None)
        if g is not None and leaf not in waiting:
            _accumulate(leaf, g, leaf in owned, False)


def _plain_node(node, g, grads, owned, heap, leaves, retain_graph, nbatch):
    """Any other node of ``_run_plain``: an array gradient, a custom Function, a node whose
    gradient is retained."""
    owned_g = node in owned
    owned.discard(node)
    if g is None:
        return  # nothing to hand on: the nodes below get nothing from it
    lent = g.__class__ is _ndarray and g.ndim and owned_g  # an array the engine made and holds alone
    in_grads, taken, trusted = _run_node(node, g, None, lent, False, False, retain_graph, nbatch)
    for e, gi in zip(node.next, in_grads):
        if e is not None and gi is not None:
            _deliver(e, gi, trusted and (gi is not g or taken), grads, owned, heap, leaves)


def _deliver(e, gi, fresh, grads, owned, heap, leaves):
    """Hand ``gi`` to edge ``e`` in ``_run_plain``; ``fresh``: a new array from one of gradcli's
    rules that nobody else holds, which the engine may later add into in place."""
    if e.__class__ is OutputRef:
        m = e.node
        if m not in grads:
            heappush(heap, (-m.seq, m))
        _add_output(grads, m, e.index, gi)
        return
    if e in grads:
        _add(grads, owned, e, gi, False)
        return
    grads[e] = gi
    if fresh and gi.__class__ is _ndarray and gi.base is None:
        owned.add(e)
    if e.__class__ is AccumulateGrad:
        leaves.append(e)
    else:
        heappush(heap, (-e.seq, e))


def _apply_donating(node, g, retain_graph, nbatch):
    """Run a node of gradcli's own rules on an array gradient the engine holds alone, lent to the
    rules (``DONATION``): the last rule to read it may write into it (``taken``: one did, and
    returned it; it is then that edge's own buffer)."""
    if node._retain is not None:
        _retain_grad(node, g, False)
    if nbatch:  # a Jacobian's batched pass reads the cotangent after the rules (still.quiet)
        return node.apply(g, False, nbatch, retain_graph), False
    _DONATION.buffer = g
    try:
        in_grads = node.apply(g, False, nbatch, retain_graph)
    finally:
        taken = _DONATION.buffer is None
        _DONATION.buffer = None
    return in_grads, taken


class _NoGrads:
    """Stands for "no gradient for any input" (zip stops at the edges)."""

    def __iter__(self):
        while True:
            yield None


_NO_GRADS = _NoGrads()


def _store_grad(holder: Tensor, g: Any, owned: bool, create: bool) -> None:
    """Accumulate ``g`` into ``holder.grad`` the way PyTorch's AccumulateGrad does."""
    current = holder._grad
    if create:
        g = g if isinstance(g, Tensor) else wrap(g)
        if g._value.dtype != holder._value.dtype:
            g = _as_dtype(g, holder._value.dtype)
        if current is None:  # a copy, recorded as PyTorch's: grad_fn=<CopyBackwards> (None, src)
            holder._grad = wrap(np.array(g._value, copy=True), None if g._edge is None else CopyBackwards(g._edge))
        else:
            holder._grad = current + g
        return
    dtype = holder._value.dtype
    if getattr(g, "dtype", dtype) != dtype:
        g = _cast(g, dtype)
        owned = True
    if current is None:
        if g.__class__ is _ndarray and not owned:
            g = np.array(g, copy=True)
        holder._grad = wrap(g)
    else:
        current._store(current._value + g)
        current._version += 1


def _accumulate(node: AccumulateGrad, g: Any, owned: bool, create: bool) -> None:
    leaf = node.variable()
    if leaf is not None:
        _store_grad(leaf, g, owned, create)


def _accumulate_hooked(node: AccumulateGrad, hooks: Any, g: Any, create: bool) -> None:
    """A leaf's gradient with hooks: the node's pre-hooks, accumulation, then the post-accumulate
    hooks and the node's hooks (the leaf's tensor hooks already ran)."""
    g = _hooks.run_pre_hooks(hooks, g, False, create)
    leaf = node.variable()
    if leaf is not None:
        _store_grad(leaf, g, False, create)
        _hooks.run_post_accumulate(hooks, leaf, g, create)


def _retain_grad(node: Any, g: Any, create: bool) -> None:
    for tensor, index in node.retained_tensors():
        gi = g if index is None else g[index]
        if gi is not None:
            _store_grad(tensor, gi, False, create)


def _check_outputs(outputs: list[Any]) -> list[Tensor]:
    for i, out in enumerate(outputs):
        if not isinstance(out, Tensor):
            raise TypeError(f"element {i} of outputs is a {type(out).__name__}, not a Tensor")
        if out._edge is None:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
    return outputs


def backward(
    tensors: Any,
    grad_tensors: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Any = None,
) -> None:
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the leaves.

    ``grad_tensors`` is the vector of a vector-Jacobian product (required for
    non-scalar outputs). ``inputs`` restricts accumulation to those tensors.
    """
    outputs = _check_outputs(_as_list(tensors))
    if retain_graph is None:
        retain_graph = create_graph
    grads = _root_grads(outputs, grad_tensors, create_graph)
    roots = [t._edge for t in outputs]
    if inputs is None:
        run_backward(roots, grads, retain_graph=retain_graph, create_graph=create_graph)
        return
    chosen = _as_list(inputs)
    if not chosen:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    targets, slots = _targets(chosen, tensors_only=False)
    found = run_backward(roots, grads, retain_graph=retain_graph, create_graph=create_graph, capture=targets)
    stored = set()
    for t, slot in zip(chosen, slots):  # what backward does with the gradients: into .grad, once an input
        if found[slot] is not None and slot not in stored:
            stored.add(slot)
            edge = t._edge
            if _hooks.seen and edge.__class__ is AccumulateGrad and edge._hooks is not None:
                _accumulate_hooked(edge, edge._hooks, found[slot], create_graph)  # as its AccumulateGrad would
            else:
                _store_grad(t, found[slot], False, create_graph)


def _targets(inputs: list[Any], tensors_only: bool) -> tuple[dict[Any, Any], list[int]]:
    """``{node: slot}`` for the inputs whose gradients a pass captures (one slot per distinct input;
    ``{node: {output: slot}}`` for outputs of a node with several), and each input's slot.
    ``tensors_only``: anything else is a TypeError (``grad``), not a tensor without a graph (``backward``)."""
    targets: dict[Any, Any] = {}
    slots: list[int] = []
    count = 0
    for t in inputs:
        if not isinstance(t, Tensor) and tensors_only:
            raise TypeError(f"inputs must be tensors, got {type(t).__name__}")
        if not isinstance(t, Tensor) or t._edge is None:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        edge = t._edge
        table, key = (targets.setdefault(edge.node, {}), edge.index) if edge.__class__ is OutputRef else (targets, edge)
        slot = table.get(key)
        if slot is None:
            slot = table[key] = count
            count += 1
        slots.append(slot)
    return targets, slots


def grad(
    outputs: Any,
    inputs: Any,
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool | None = None,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """The gradients of ``outputs`` with respect to ``inputs``, returned (not accumulated).

    >>> import gradcli as gc
    >>> x = gc.tensor(2.0, requires_grad=True)
    >>> y = gc.tensor(3.0, requires_grad=True)
    >>> z = x * x * y
    >>> (dx,) = gc.grad(z, x, create_graph=True)
    >>> gc.grad(dx, x)
    (tensor(6.),)
    """
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, but got: allow_unused=False."
        )
    outs = _check_outputs(_as_list(outputs))
    ins = _as_list(inputs)
    if not ins:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    if allow_unused is None:
        allow_unused = materialize_grads
    if retain_graph is None:
        retain_graph = create_graph
    targets, slots = _targets(ins, tensors_only=True)
    grads = _root_grads(outs, grad_outputs, create_graph)
    found = run_backward(
        [t._edge for t in outs], grads, retain_graph=retain_graph, create_graph=create_graph, capture=targets
    )
    # what grad does with the gradients: return them, in each input's dtype
    return tuple(_returned(t, found[k], allow_unused, materialize_grads, create_graph) for t, k in zip(ins, slots))


def _returned(t: Tensor, g: Any, allow_unused: bool, materialize_grads: bool, create_graph: bool) -> Tensor | None:
    """The gradient ``grad`` hands back for input ``t`` (``g`` as the pass captured it)."""
    if g is None:
        if not allow_unused:
            raise RuntimeError(
                "One of the differentiated Tensors appears to not have been used in the graph. "
                "Set allow_unused=True if this is the desired behavior."
            )
        if materialize_grads:  # PyTorch: zeros_like(input, requires_grad=create_graph)
            zeros = Tensor(np.zeros_like(t._value), dtype=t._value.dtype)
            return zeros.requires_grad_() if create_graph else zeros
        return None
    if isinstance(g, Tensor):
        return g if g._value.dtype == t._value.dtype else _as_dtype(g, t._value.dtype)
    g = g if np.result_type(g) == t._value.dtype else _cast(g, t._value.dtype)
    return wrap(np.array(g, copy=True) if g.__class__ is _ndarray else g)


def _cast(g: Any, dtype: Any) -> Any:
    """A gradient in its input's dtype (PyTorch's guarantee); a real input keeps the real part."""
    g = np.asarray(g)
    if g.dtype.kind == "c" and dtype.kind != "c":
        g = g.real
    return g.astype(dtype)[()]


def _as_dtype(g: Tensor, dtype: Any) -> Tensor:
    if g._value.dtype.kind == "c" and dtype.kind != "c":
        g = REAL_PRIM(g)
    return to(g, dtype)
