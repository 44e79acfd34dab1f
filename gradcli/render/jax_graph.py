"""A JAX function's jaxpr -> the graph model: its equations as nodes, with values and cotangents.

The function's inputs are the variables (named by its parameters), literals and the arrays it
closed over the constants, each equation an operation named by its primitive (``sin``,
``dot_general``), with its value, its cotangent (d output / d it, ``grad``), the names of the calls
around it (``scope``: ``jit:layer/custom_vjp:safe_log``) and the line of the user's code that made
it. ``jit`` calls, custom rules and loops are boxes (``Graph.clusters``). Every view draws it as it
draws gradcli's own graphs; over ``max_nodes``, its repeated structure is collapsed and it is cut as
they are. Importing this module imports JAX.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..lang.frameworks.jax_record import CUSTOM, JaxTrace, local_derivatives, parameter_names, trace_jax, trace_values
from .build import ALL_NODES, DEFAULT_MAX_NODES, checked_max_nodes, gradient_parts, highlight_paths, name_outputs
from .jax_loops import box_label, iterations, loop_label, loops
from .labels import expression, value_text
from .model import Edge, Graph, GraphNode
from .summary import collapsed, cut_to, find_groups

#: JAX's primitives drawn with gradcli's operator where they are the same operation
LABELLED_AS = {"rem": "remainder", "max": "maximum", "min": "minimum"}


def jax_function_graph(
    function: Callable[..., Any],
    values: Mapping[str, Any],
    wrt: Sequence[str] | None,
    *,
    seed: Any = None,
    point: bool = True,
    highlight: Sequence[str] = (),
    max_nodes: int | str | None = None,
) -> Graph:
    """The graph of ``function(**values)``, each value made a float64 JAX array (``wrt``: the
    inputs differentiated, default all)."""
    trace = trace_values(function, values, wrt, seed)
    return jax_model(trace, point=point, highlight=highlight, max_nodes=max_nodes)


def jax_graph(function: Callable[..., Any], args: Sequence[Any], *, seed: Any = None, point: bool = True,
              highlight: Sequence[str] = (), max_nodes: int | str | None = None) -> Graph:  # fmt: skip
    """The graph of ``function(*args)`` (``gc.render.graph(f, *args)``): an argument may be an array,
    a number or a pytree of them; its leaves are the variables, named by the function's parameters."""
    trace = trace_jax(function, args, parameter_names(function, len(args)), seed=seed)
    return jax_model(trace, point=point, highlight=highlight, max_nodes=max_nodes)


def jax_model(
    trace: JaxTrace, *, point: bool = True, highlight: Sequence[str] = (), max_nodes: int | str | None = None
) -> Graph:
    """The graph model of a traced JAX function (``trace_jax``). ``max_nodes`` as ``build``'s: not
    given, 200 (pictures collapse what repeats over 100); ``0``/``"all"``: every node."""
    given = checked_max_nodes(max_nodes)
    if not point:
        _without_point(trace)
    builder = _Builder(trace)
    builder.add_all()
    graph = Graph(builder.nodes, builder.edges, builder.outputs, notes=list(trace.notes))
    name_outputs(graph, builder.outputs)
    _place_parameters(trace, graph)
    graph.clusters = _clusters(trace, graph)
    limit = DEFAULT_MAX_NODES if given is None else given
    if not point:
        for node in graph.nodes:
            node.grad = None
            node.value = node.value if node.kind == "constant" else None
    graph.has_point = point
    if given != ALL_NODES and len(graph.nodes) > limit:
        graph = _summary(graph, limit)
    else:
        graph.groups = find_groups(graph)
    graph.groups += loops(trace, graph, builder.node_of)
    if point:
        _local_derivatives(graph, builder)
        gradient_parts(graph)
    graph.as_built = given is not None
    if highlight:
        highlight_paths(graph, highlight)
    return graph.lighten()  # (the trace keeps every value whole: blame reads them)


def _without_point(trace: JaxTrace) -> None:
    """A graph drawn without a point: no iteration's values, no statistics of them, and a while loop's
    trip count unknown (``while ×?``: it depends on the point), said in a note."""
    for call in trace.calls:
        call.norms, call.stats, call.grads, call.iteration = [], [], None, None
        if call.kind == "while":
            call.repeat = None
            note = "a while loop's trip count depends on its inputs (while ×?): give a point (--at) to count it"
            if note not in trace.notes:
                trace.notes.append(note)


def _summary(graph: Graph, limit: int) -> Graph:
    """``graph`` over ``limit`` nodes: its repeated structure drawn as one node a group, then cut to
    the ``limit`` nodes nearest its outputs (a group counting as one), the rest counted."""
    groups = find_groups(graph)
    for g in groups:
        g["collapsed"] = True
    whole = collapsed(graph, groups) if groups else graph
    return cut_to(whole, graph, limit)


class _Builder:
    """The trace's values and shown equations as nodes and edges, in evaluation order."""

    def __init__(self, trace: JaxTrace) -> None:
        self.trace = trace
        self.nodes: list[GraphNode] = []
        self.edges: list[Edge] = []
        self.node_of: dict[int, str] = {}  # value id -> the node drawing it
        self.equation_of: dict[str, int] = {}  # node id -> its equation (one output)
        self.outputs: list[str] = []
        self.names = _rule_names(trace)
        self.iterations = iterations(trace)

    def add_all(self) -> None:
        for i in self.trace.inputs:
            value = self.trace.values[i]
            kind = "variable" if value.differentiable else "constant"
            self._node(i, GraphNode("", kind, kind, value.name or "", name=value.name))
        for k, equation in enumerate(self.trace.equations):
            if equation.shown and equation.eqn is None:
                self._drawn(k)
            elif equation.shown:
                self._equation(k)
        self.outputs = [self.source(i) for i in self.trace.outputs]

    def _drawn(self, k: int) -> None:
        """A loop's input (``carry(h0)``, ``xs[t]``) or output (``last(n11)``, ``stacked(n11)``)."""
        equation = self.trace.equations[k]
        out = equation.outputs[0]
        if self.trace.values[out].dropped:
            return
        source = self.source(equation.inputs[0])
        ref = self.nodes[int(source[1:])].key
        call = self.trace.calls[equation.call] if equation.call is not None else None
        outputs = self.trace.equations[call.equation].outputs if call is not None else []
        label = loop_label(equation.primitive, ref, call, outputs.index(out) if out in outputs else 0)
        node = self._node(out, GraphNode("", "op", equation.primitive, label, generated=True))
        node.scope, node.line, node.cluster = equation.scope, equation.line, f"c{equation.call}"
        if call is not None:  # (a loop's output in the body of a loop around it: that one's iteration)
            node.iteration = call.iteration if equation.primitive != "result" else self.iterations.get(call.parent)
        self.edges.append(Edge(source, node.id, 0))

    def _node(self, index: int, node: GraphNode) -> GraphNode:
        value = self.trace.values[index]
        node.id = f"n{len(self.nodes)}"
        node.shape, node.value, node.grad = value.shape, value.value, value.cotangent
        self.nodes.append(node)
        self.node_of[index] = node.id
        return node

    def source(self, index: int) -> str:
        """The node drawing value ``index`` (a constant's made on its first use: a model's parameter the
        function closed over as a variable named by its path)."""
        index = self.trace.shown_as.get(index, index)
        if index not in self.node_of:
            value = self.trace.values[index]
            if value.name and value.differentiable:
                self._node(index, GraphNode("", "variable", "variable", value.name, name=value.name))
            else:
                self._node(index, GraphNode("", "constant", "constant", value_text(value.value), name=value.name))
        return self.node_of[index]

    def _equation(self, k: int) -> None:
        equation = self.trace.equations[k]
        sources = [self.source(i) for i in equation.inputs]
        refs = [self.nodes[int(s[1:])].key for s in sources]
        label = _label(equation, refs, self.trace)
        drawn = [o for o in equation.outputs if not self.trace.values[o].dropped and o not in self.trace.shown_as]
        for position, out in enumerate(equation.outputs):
            if out not in drawn:
                continue
            text = f"{label}[{position}]" if len(equation.outputs) > 1 else label
            node = self._node(out, GraphNode("", "op", equation.primitive, text, generated=True))
            node.scope, node.line, node.name = equation.scope, equation.line, self.names.get(out)
            node.cluster = None if equation.call is None else f"c{equation.call}"
            node.iteration = self.iterations.get(equation.call) if equation.body else None
            if len(equation.outputs) == 1:
                self.equation_of[node.id] = k
            for i, source in enumerate(sources):
                self.edges.append(Edge(source, node.id, i))
                inner = self.nodes[int(source[1:])]
                if inner.kind == "constant" and inner.cluster is None and inner.name is None:
                    inner.cluster = node.cluster  # a constant operand sits with its operation


def _rule_names(trace: JaxTrace) -> dict[int, str]:
    """The value drawn for a custom rule's output -> the name of the rule's function (``safe_log``, then
    ``safe_log_1``, ...): its node says which function it is even where its box is not drawn."""
    taken = {v.name for v in trace.values if v.kind == "input"}
    names = {}
    for call in trace.calls:
        outputs = trace.equations[call.equation].outputs
        if call.kind not in CUSTOM.values() or len(outputs) != 1 or not call.name.isidentifier():
            continue
        name, k = call.name, 0
        while name in taken:
            k += 1
            name = f"{call.name}_{k}"
        taken.add(name)
        names[trace.shown_as.get(outputs[0], outputs[0])] = name
    return names


def _label(equation: Any, refs: list[str], trace: JaxTrace) -> str:
    """The expression an equation computes, as gradcli's views write one (``w @ x``, ``sin(n3)``)."""
    params = equation.eqn.params
    if equation.primitive == "integer_pow" and len(refs) == 1:
        return expression("pow", [refs[0], str(params.get("y"))])
    if equation.primitive == "dot_general" and len(refs) == 2:
        (_, batch) = params.get("dimension_numbers", ((), ((), ())))
        if not any(batch):
            return expression("matmul", refs)
    if equation.call is not None and equation.primitive.startswith("custom_"):  # the call drawn as itself
        return f"{trace.calls[equation.call].name}({', '.join(refs)})"
    return expression(LABELLED_AS.get(equation.primitive, equation.primitive), refs)


def _clusters(trace: JaxTrace, graph: Graph) -> list[dict[str, Any]]:
    """The calls holding a node (and those around them), outer before inner: a module's box with its
    ``path`` and ``class``, a loop's with its iterations (``repeat``) and its carry's norm per iteration."""
    used = set()
    for node in graph.nodes:
        k = None if node.cluster is None else int(node.cluster[1:])
        while k is not None and k not in used:
            used.add(k)
            k = trace.calls[k].parent
    depth: dict[int | None, int] = {None: 0}
    boxes = []
    for k, call in enumerate(trace.calls):
        if k not in used:
            continue
        depth[k] = depth.get(call.parent, 0) + 1
        box = {"id": f"c{k}", "label": box_label(call), "parent": None if call.parent is None else f"c{call.parent}"}
        if call.kind == "module":
            box.update(path=call.name, depth=depth[k], **({"class": call.module} if call.module else {}))
        elif call.kind in ("scan", "while"):
            box.update(kind=call.kind, repeat=call.repeat, depth=depth[k])
        boxes.append(box)
    return boxes


def _place_parameters(trace: JaxTrace, graph: Graph) -> None:
    """A model's parameter (``layers[0].weight``) in the box of the module holding it (its first call)."""
    boxes: dict[str, str] = {}
    for k, call in enumerate(trace.calls):
        if call.kind == "module":
            boxes.setdefault(call.name, f"c{k}")
    if not boxes:
        return
    for node in graph.nodes:
        if node.kind != "variable" or not node.name or node.cluster:
            continue
        for owner in (node.name, node.name.partition(".")[2]):  # (linen's: after its collection, params.)
            while owner and owner not in boxes:
                owner = owner[: max(owner.rfind("."), owner.rfind("["), 0)]
            if owner:
                node.cluster, node.scope = boxes[owner], owner
                break


def _local_derivatives(graph: Graph, builder: _Builder) -> None:
    """d node / d input on each edge between scalars drawn (a variable's or an operation's), from
    ``jax.vjp`` of that equation alone with cotangent 1."""
    for node in graph.nodes:
        k = builder.equation_of.get(node.id)
        if k is None or builder.trace.equations[k].eqn is None or np.size(node.value) != 1 or node.value is None:
            continue
        edges = [e for e in graph.inputs_of(node.id) if e.source != "hidden"]
        if any(np.size(graph.node(e.source).value) != 1 for e in edges):
            continue
        wanted = [e for e in edges if graph.node(e.source).kind in ("variable", "op")]
        if not wanted:
            continue
        grads = local_derivatives(builder.trace, k)
        for edge in wanted:
            g = grads[edge.input] if 0 <= edge.input < len(grads) else None
            edge.local_grad = None if g is None else np.asarray(g).reshape(())
