"""Graph nodes: what a tensor's ``grad_fn`` is, and what its edges point to.

As in PyTorch, nodes point at nodes (not at tensors): intermediate tensors can
be freed while the graph lives, and only what a rule needs is saved. Each
primitive gets its own node class, named as PyTorch names it (``MulBackward0``),
so ``type(y.grad_fn).__name__`` and ``repr(y.grad_fn)`` read as they do there.
"""

from __future__ import annotations

import weakref
from itertools import count
from typing import Any

import numpy as np

from ..ops import CONJ as _CONJ
from ..ops import Meta, Primitive, unbroadcast
from . import hooks as _hooks
from . import tensor as _tensor_mod
from .donation import rules as rules_with_donation
from .grad_mode import state as _grad_state
from .still import quiet
from .tensor import Tensor, is_complex, storage_root

BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they "
    "have already been freed). Saved intermediate values of the graph are freed when you call "
    ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
    "graph a second time or if you need to access saved tensors after calling backward."
)

OVERLAP = (
    "unsupported operation: more than one element of the written-to tensor refers to a single memory location. "
    "Please clone() the tensor before performing the operation."
)


#: Each node's ``seq``, in the order nodes are made (PyTorch's sequence_nr): a node is always made
#: after the nodes of its inputs, so the engine runs the node made last first (engine.py).
next_seq = count(1).__next__
#: A leaf's sink comes after every node (``LEAF_SEQ`` + its own number): ready, it runs first.
LEAF_SEQ = 1 << 62


class _Freed:
    """Marks saved values released by a backward pass without ``retain_graph``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<freed>"


FREED = _Freed()


class Dirty:
    """Marks a saved output that was later modified in place."""

    __slots__ = ("version", "shape", "dtype")

    def __init__(self, version: int, shape: tuple[int, ...], dtype: Any) -> None:
        self.version = version
        self.shape = shape
        self.dtype = dtype


def inplace_error(shape: tuple[int, ...], dtype: Any, node_name: str, version: int, expected: int) -> RuntimeError:
    hint = (
        # in anomaly mode the warning just given names the node and the forward call that made it (PyTorch's words)
        "the backtrace further above shows the operation that failed to compute its gradient. The variable in "
        "question was changed in there or anywhere later. Good luck!"
        if _grad_state.anomaly is not None
        else "gradcli.detect_anomaly() names the operation that failed to compute its gradient."
    )
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [{dtype} {list(shape)}], which is output 0 of {node_name}, is at version {version}; "
        f"expected version {expected} instead. Hint: {hint}"
    )


class Node:
    """Anything that can appear in ``next_functions``."""

    __slots__ = ()
    next: tuple[Any, ...] = ()
    user_defined = False  # its backward is user code (a custom Function)
    plain_arity = 0  # 1 or 2: a UnaryNode or BinaryNode of a primitive's own rules (the engine's short road)
    _hooks: Any = None  # a hooks.NodeHooks once a hook is registered on the node or its tensors

    def name(self) -> str:
        return type(self).__name__

    def register_hook(self, fn: Any) -> Any:
        """``fn(grad_inputs, grad_outputs)`` after the node runs; may return new ``grad_inputs``."""
        return _hooks.register_node_hook(self, fn)

    def register_prehook(self, fn: Any) -> Any:
        """``fn(grad_outputs)`` before the node runs; may return new ``grad_outputs``."""
        return _hooks.register_node_prehook(self, fn)

    @property
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]:
        return tuple((e.node, e.index) if e.__class__ is OutputRef else (e, 0) for e in self.next)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {id(self):#x}>"


class OutputRef:
    """Edge to output ``index`` of a node with several outputs (custom Functions)."""

    __slots__ = ("node", "index")

    def __init__(self, node: Node, index: int) -> None:
        self.node = node
        self.index = index


def edge_node(edge: Any) -> Node:
    return edge.node if edge.__class__ is OutputRef else edge


class AccumulateGrad(Node):
    """The sink of a leaf that requires grad: gradients arriving here go to ``.grad``.

    Holds the leaf weakly (the leaf holds its AccumulateGrad), so no cycle.
    """

    __slots__ = ("variable", "_hooks", "seq", "__weakref__")

    def __init__(self, leaf: Tensor) -> None:
        self.variable = weakref.ref(leaf)
        self._hooks = None
        self.seq = LEAF_SEQ + next_seq()


_NONES = tuple((None,) * n for n in range(8))


class SingleOutput:
    """``retain_grad`` on the one output of a node (its tensor held weakly in ``_retain``)."""

    __slots__ = ()
    _retain: Any

    def retain(self, tensor: Tensor, edge: Any) -> None:
        self._retain = weakref.ref(tensor)

    def unretain(self, edge: Any) -> None:
        self._retain = None

    def retained(self, edge: Any) -> Tensor | None:
        ref = self._retain
        return None if ref is None else ref()

    def retained_tensors(self) -> list[tuple[Tensor, int | None]]:
        t = self.retained(None)
        return [] if t is None else [(t, None)]


class OpNode(SingleOutput, Node):
    """One recorded primitive application.

    ``next`` holds the edges to its inputs' nodes; ``saved`` the inputs as given
    (tensors and constants) when the rule needs them, ``Meta`` placeholders when
    it needs only shapes, else ``None`` (``FREED`` after backward); ``out`` the
    output value (or its ``Meta``) likewise; ``shapes`` the input shapes when
    broadcasting must be undone; ``versions`` the saved tensors' version
    counters when any was not 0.

    How ``next`` and ``saved`` are stored depends on the primitive's arity:
    one- and two-input primitives (nearly every node) keep edges and saved
    inputs in slots of their own (``UnaryNode``, ``BinaryNode``), others in
    tuples (``TupleNode``). Two tuples fewer a node is 112 bytes less and two
    objects fewer for Python's cycle collector to scan while a graph grows,
    which halves the cost of recording a graph of scalars.
    """

    # The rarely set fields (params, versions, shapes for broadcasting, _retain for
    # retain_grad) default to the class attributes until set.
    __slots__ = ("out", "seq", "__dict__", "__weakref__")
    prim: Primitive
    rules: tuple[Any, ...]  # the primitive's reverse rules, with the in-place forms of donation.py
    params: tuple[Any, ...] = ()
    versions: tuple[int, ...] | None = None
    shapes: tuple[tuple[int, ...], ...] | None = None
    _retain: Any = None
    next: tuple[Any, ...]
    saved: Any

    def _set_rare(self, params: tuple[Any, ...], shapes: Any, versions: Any) -> None:
        if shapes is not None:
            self.shapes = shapes
        if params:
            self.params = params
        if versions is not None:
            self.versions = versions

    def _check_versions(self) -> None:
        out = self.out
        if out.__class__ is Dirty:
            raise inplace_error(out.shape, out.dtype, self.name(), out.version, 0)
        expected = self.versions
        if self.saved is None or self.prim.saves == "meta":
            return
        for i, t in enumerate(self.saved):
            if t.__class__ is Tensor:
                if t._detached_in_place:
                    raise RuntimeError(_tensor_mod.DETACHED_SAVED)
                want = expected[i] if expected else 0
                now = storage_root(t)._version
                if now != want:
                    producer = t._edge.name() if t._edge is not None else "a leaf"
                    raise inplace_error(t.shape, t._value.dtype, producer, now, want)

    def inputs_for(self, create: bool) -> Any:
        saved = self.saved
        if saved is None:
            return _NONES[len(self.next)] if len(self.next) < 8 else (None,) * len(self.next)
        if saved is FREED:
            raise RuntimeError(BACKWARD_TWICE)
        if create or self.prim.saves == "meta":
            return saved
        return [v._value if v.__class__ is Tensor else v for v in saved]

    def apply(self, g: Any, create: bool, nbatch: int, retain: bool = True, rules: Any = None) -> Any:
        """Gradients for each edge in ``next`` given the gradient ``g`` of the output.

        Without ``retain`` the saved values are released afterwards (PyTorch's
        default). This is the general case; ``node_class`` installs leaner
        versions for one- and two-input primitives without parameters.
        ``rules`` replaces the primitive's reverse rules (complex inputs).
        """
        if rules is None:
            if _tensor_mod.complex_seen:
                return complex_apply(self, g, create, nbatch, retain)
            rules = self.rules
        inputs = self.inputs_for(create)
        if _tensor_mod.inplace_seen:  # versions can only differ once something was modified in place
            self._check_versions()
        out = self.out
        if create and out is not None and out.__class__ is not Meta:
            out = Tensor._wrap(out, self)
        prim = self.prim
        params = self.params
        nxt = self.next
        if prim.arity < 0:
            grads = rules[0](g, out, *inputs, *params)
        else:
            grads = [None if e is None else rules[i](g, out, *inputs, *params) for i, e in enumerate(nxt)]
        if nbatch and not create and prim.arity >= 0:
            grads = [quiet(gi, g, prim.elementwise, nbatch, lambda ones, i=i: rules[i](ones, out, *inputs, *params))
                     for i, gi in enumerate(grads)]  # fmt: skip
        shapes = self.shapes
        if shapes is not None:
            grads = [gi if gi is None else unbroadcast(gi, shapes[i], nbatch) for i, gi in enumerate(grads)]
        if not retain:
            self.release()
        return grads

    def release(self) -> None:
        """Free saved values (after a backward pass without ``retain_graph``)."""
        if self.frees:
            self.saved = FREED
            self.out = None


class TupleNode(OpNode):
    """Edges and saved inputs in tuples: any number of inputs."""

    __slots__ = ("next", "saved")

    def __init__(self, next, saved, out, params=(), shapes=None, versions=None) -> None:  # noqa: A002
        self.next = next
        self.saved = saved
        self.out = out
        self.seq = next_seq()
        self._set_rare(params, shapes, versions)


class UnaryNode(OpNode):
    """One input: its edge ``e0``; ``s0`` the saved input (``FREED`` after backward, ``None``
    when the rule does not read it)."""

    __slots__ = ("e0", "s0")

    def __init__(self, next, saved, out, params=(), shapes=None, versions=None) -> None:  # noqa: A002
        (self.e0,) = next
        self.s0 = saved if saved is None or saved is FREED else saved[0]
        self.out = out
        self.seq = next_seq()
        self._set_rare(params, shapes, versions)

    @property
    def next(self) -> tuple[Any]:
        return (self.e0,)

    @property
    def saved(self) -> Any:
        s0 = self.s0
        return s0 if s0 is None or s0 is FREED else (s0,)

    @saved.setter
    def saved(self, value: Any) -> None:
        self.s0 = value if value is None or value is FREED else value[0]


class BinaryNode(OpNode):
    """Two inputs: edges ``e0``, ``e1``; saved inputs ``s0``, ``s1`` (``s0`` is ``FREED``
    after backward, ``None`` when the rule reads neither)."""

    __slots__ = ("e0", "e1", "s0", "s1")

    def __init__(self, next, saved, out, params=(), shapes=None, versions=None) -> None:  # noqa: A002
        self.e0, self.e1 = next
        if saved is None or saved is FREED:
            self.s0, self.s1 = saved, None
        else:
            self.s0, self.s1 = saved
        self.out = out
        self.seq = next_seq()
        self._set_rare(params, shapes, versions)

    @property
    def next(self) -> tuple[Any, Any]:
        return (self.e0, self.e1)

    @property
    def saved(self) -> Any:
        s0 = self.s0
        if s0 is FREED or (s0 is None and self.s1 is None):
            return s0
        return (s0, self.s1)

    @saved.setter
    def saved(self, value: Any) -> None:
        if value is None or value is FREED:
            self.s0, self.s1 = value, None
        else:
            self.s0, self.s1 = value


def mark_output_modified(edge: Any, tensor: Tensor) -> None:
    """``tensor`` (output of ``edge``'s node) is about to change in place: a saved
    copy of it is no longer the value the rule needs."""
    node = edge_node(edge)
    if isinstance(node, OpNode) and node.prim.saves in ("output", "both"):
        out = node.out
        if out is not None and out.__class__ is not Dirty:
            version = storage_root(tensor)._version + 1
            node.out = Dirty(version, tensor.shape, tensor.dtype)


def _unary_apply(prim: Primitive) -> Any:
    (rule,) = rules_with_donation(prim)
    keeps_input = prim.saves in ("inputs", "both")
    frees = prim.frees
    elementwise = prim.elementwise

    def apply(self: UnaryNode, g: Any, create: bool, nbatch: int, retain: bool = True) -> tuple[Any]:
        if _tensor_mod.complex_seen:
            return complex_apply(self, g, create, nbatch, retain)
        x = self.s0
        if x is FREED:
            raise RuntimeError(BACKWARD_TWICE)
        if _tensor_mod.inplace_seen:
            self._check_versions()
        if keeps_input:
            if not create and x.__class__ is Tensor:
                x = x._value
        else:
            x = None
        out = self.out
        if create and out is not None:
            out = Tensor._wrap(out, self)
        if frees and not retain:
            self.s0 = FREED
            self.out = None
        if nbatch and not create:
            return (quiet(rule(g, out, x), g, elementwise, nbatch, lambda ones: rule(ones, out, x)),)
        return (rule(g, out, x),)

    return apply


def _binary_apply(prim: Primitive) -> Any:
    rule_a, rule_b = rules_with_donation(prim)
    keeps_inputs = prim.saves in ("inputs", "both")
    frees = prim.frees
    elementwise = prim.elementwise

    def apply(self: BinaryNode, g: Any, create: bool, nbatch: int, retain: bool = True) -> tuple[Any, Any]:
        if _tensor_mod.complex_seen:
            return complex_apply(self, g, create, nbatch, retain)
        a = self.s0
        if a is FREED:
            raise RuntimeError(BACKWARD_TWICE)
        if _tensor_mod.inplace_seen:
            self._check_versions()
        if keeps_inputs:
            b = self.s1
            if not create:
                if a.__class__ is Tensor:
                    a = a._value
                if b.__class__ is Tensor:
                    b = b._value
        else:
            a = b = None
        out = self.out
        if create and out is not None:
            out = Tensor._wrap(out, self)
        if frees and not retain:
            self.s0 = FREED
            self.s1 = None
            self.out = None
        edge_a = self.e0
        edge_b = self.e1
        ga = None if edge_a is None else rule_a(g, out, a, b)
        gb = None if edge_b is None else rule_b(g, out, a, b)
        if nbatch and not create:
            ga = quiet(ga, g, elementwise, nbatch, lambda ones: rule_a(ones, out, a, b))
            gb = quiet(gb, g, elementwise, nbatch, lambda ones: rule_b(ones, out, a, b))
        shapes = self.shapes
        if shapes is not None:
            if ga is not None:
                ga = unbroadcast(ga, shapes[0], nbatch)
            if gb is not None:
                gb = unbroadcast(gb, shapes[1], nbatch)
        return (ga, gb)

    return apply


def complex_apply(node: OpNode, g: Any, create: bool, nbatch: int, retain: bool) -> Any:
    """A node's gradients once complex values exist (PyTorch's conjugate Wirtinger convention).

    Rules are written as g * f'(z); for a holomorphic primitive the gradient is
    g * conj(f'(z)) = conj(rule(conj(g))). Values all real: the rules as they are
    (a complex ``g`` then only passes through real coefficients). Primitives that
    are not holomorphic use their own complex rules or refuse.
    """
    prim = node.prim
    saved = node.saved
    if saved is FREED:
        raise RuntimeError(BACKWARD_TWICE)
    out = node.out
    values_complex = (out is not None and is_complex(out)) or (
        saved is not None and any(v is not None and is_complex(v) for v in saved)
    )
    if not values_complex:
        return OpNode.apply(node, g, create, nbatch, retain, node.rules)
    if prim.complex_vjp is not None:
        return OpNode.apply(node, g, create, nbatch, retain, prim.complex_vjp)
    if not prim.analytic:
        raise RuntimeError(
            f"{prim.name} is not differentiable at complex inputs (it is not holomorphic and has no "
            "complex rule); differentiate its real and imaginary parts instead"
        )
    if prim.saves in ("nothing", "meta"):  # linear with real coefficients: conj would change nothing
        return OpNode.apply(node, g, create, nbatch, retain, node.rules)
    grads = OpNode.apply(node, _CONJ(g), create, nbatch, retain, node.rules)
    return [None if gi is None else _CONJ(gi) for gi in grads]


_NODE_CLASSES: dict[tuple[Primitive, str], type[OpNode]] = {}


def node_class(prim: Primitive, name: str) -> type[OpNode]:
    """The node class ``name`` (``MulBackward0``) for ``prim``, made once. Keyed by the primitive
    too: two primitives may share PyTorch's name (square and x ** 2 are both PowBackward0)."""
    cls = _NODE_CLASSES.get((prim, name))
    if cls is None:
        body: dict[str, Any] = {
            "__slots__": (),
            "prim": prim,
            "rules": rules_with_donation(prim),
            "frees": prim.frees,
            "__module__": "gradcli.autograd",
        }
        layout: type[OpNode] = TupleNode
        if prim.nparams == 0 and prim.saves != "meta" and prim.arity == 1:
            body["apply"] = _unary_apply(prim)
            body["plain_arity"] = 1
            layout = UnaryNode
        elif prim.nparams == 0 and prim.saves != "meta" and prim.arity == 2:
            body["apply"] = _binary_apply(prim)
            body["plain_arity"] = 2
            layout = BinaryNode
        cls = _NODE_CLASSES.setdefault((prim, name), type(name, (layout,), body))  # one, whichever thread
    return cls


class _NodeOp:
    """What the graph picture reads of a node's primitive (``prim.name``, ``prim.saves``)."""

    saves = "nothing"

    def __init__(self, name: str) -> None:
        self.name = name


class CopyBackwards(SingleOutput, Node):
    """A copy of ``src`` into a new tensor (PyTorch's ``copy_`` node: edges to the tensor written into,
    which requires no grad, and to ``src``): what ``.grad`` hangs from under ``create_graph``."""

    __slots__ = ("next", "_retain", "_hooks", "seq", "__weakref__")
    prim = _NodeOp("copy")

    def __init__(self, src_edge: Any) -> None:
        self.next = (None, src_edge)
        self._retain = None
        self._hooks = None
        self.seq = next_seq()

    def apply(self, g: Any, create: bool, nbatch: int, retain: bool = True) -> tuple[Any, Any]:
        return (None, g)

    def release(self) -> None:
        """Nothing is saved."""


class CopySlices(SingleOutput, Node):
    """A base tensor after one of its views was changed in place (PyTorch's ``CopySlices``).

    Edges: the base's history before the change (``e0``), the view's new values (``e1``). The view's
    elements are found by taking the view (its chain of primitives) of the positions ``0 .. n-1`` laid
    out in the base's shape: the gradient outside them goes to the old base, inside them to the view.
    """

    __slots__ = ("next", "positions", "repeats", "_retain", "_hooks", "seq", "__weakref__")
    prim = _NodeOp("copy_slices")

    def __init__(self, base_edge: Any, view_edge: Any, chain: tuple[Any, ...], base_value: Any) -> None:
        self.next = (base_edge, view_edge)
        shape = np.shape(base_value)
        positions = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)
        for prim, params in chain:
            positions = prim.forward(positions, *params)
        # a view that repeats positions of its base (expanded, then filled): its gradient cannot be
        # split, and backward refuses it as PyTorch's CopySlices does
        self.repeats = any(s == 0 and n > 1 for n, s in zip(np.shape(positions), np.asarray(positions).strides))
        self.positions = np.array(positions, copy=True)
        self._retain = None
        self._hooks = None
        self.seq = next_seq()

    def apply(self, g: Any, create: bool, nbatch: int, retain: bool = True) -> tuple[Any, Any]:
        if self.positions is None:
            raise RuntimeError(BACKWARD_TWICE)
        if self.repeats:
            raise RuntimeError(OVERLAP)
        grads = self._split(g, create, nbatch)
        if not retain:
            self.release()
        return grads

    def _split(self, g: Any, create: bool, nbatch: int) -> tuple[Any, Any]:
        batch = np.shape(g)[:nbatch]
        flat = (Ellipsis, self.positions)
        if create:
            g = g if g.__class__ is Tensor else Tensor._wrap(g)
            mask = np.ones(np.shape(g), g.dtype)
            mask.reshape(batch + (-1,))[flat] = 0
            rows = g.reshape(batch + (-1,))  # (recorded: Tensor's methods, so that node needs no record)
            g_base = g * mask
            g_view = rows[flat]
        else:
            g_base = np.array(g, copy=True)
            rows = np.reshape(g, batch + (-1,))
            g_view = rows[flat]
            g_base.reshape(batch + (-1,))[flat] = 0
        return (None if self.next[0] is None else g_base, g_view)

    def release(self) -> None:
        """After a backward pass without ``retain_graph``: a second one raises, as PyTorch's CopySlices."""
        self.positions = None
