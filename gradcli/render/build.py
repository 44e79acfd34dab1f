"""Autograd graph -> the graph model.

The autograd nodes reachable from the outputs are the graph; a trace of the
run (``recording()``) adds what the nodes do not keep: each node's output
value and its constant operands. The program, when there is one, adds names and
expression text. With a point, one backward pass captures the gradient at every
node, and each scalar edge gets its local derivative from the primitive's own
rule (the table, not a second copy of the calculus).
"""

from __future__ import annotations

import sys
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..autograd.engine import run_backward
from ..autograd.function import FunctionNode
from ..autograd.node import FREED, AccumulateGrad, OpNode, OutputRef, edge_node
from ..autograd.tensor import Tensor, storage_root
from ..errors import UsageError
from ..ops import Meta
from .clusters import place
from .labels import expression, formula, value_text
from .model import Edge, Graph, GraphNode, kinds, whole_or_all
from .recorded import recording as recording  # gradcli's tape, and torch's operations where torch is imported
from .repeats import expression_groups, grouped, has_repeats
from .summary import collapsed, cut_to, find_groups

DEFAULT_MAX_NODES = 200
ALL_NODES = 0  # --max-nodes 0 (or all): every node, drawn as itself


def checked_max_nodes(value: int | str | None) -> int | None:
    """``--max-nodes``: None (not given: ``DEFAULT_MAX_NODES``, pictures summarised), a count of at
    least 1, or ``ALL_NODES`` for ``0`` and ``all``."""
    count = whole_or_all(value)
    if count == -1:
        raise UsageError(
            f"invalid value for '--max-nodes': {str(value)!r} is not a count of nodes (N, or 0 or all: every node)"
        )
    return ALL_NODES if count == "all" else count


def build(
    outputs: Sequence[Tensor],
    *,
    trace: Sequence[tuple[Any, Tensor, tuple[Any, ...]]] | None = None,
    texts: Mapping[int, str] | None = None,
    seed: Any = None,
    point: bool = True,
    free: bool = False,
    highlight: Sequence[str] = (),
    max_nodes: int | str | None = None,
    blamed: Sequence[Any] = (),
    clusters: Sequence[tuple[str, int, int]] = (),
    held: Sequence[tuple[str, Tensor]] = (),
) -> Graph:
    """The model of the graph behind ``outputs``.

    ``trace`` (from ``recording()``) supplies values and constants; ``texts`` maps
    ``id(tensor)`` to the program text that computed it. With ``point``, gradients
    and local derivatives are computed (one backward pass, ``seed`` as its vector
    for a non-scalar output); ``free`` lets that pass release the saved values, as
    a plain ``backward()`` does, and shows which nodes lost them. ``clusters``: spans of the
    trace (``clusters.statement_spans``, ``clusters.python_calls``) drawn as boxes. ``max_nodes``
    (``checked_max_nodes``): given, pictures draw what it leaves (``Graph.as_built``; all of it: every
    node itself); not given, 200, a picture over 100 nodes collapsing what repeats. ``held``: the
    caller's variables (name, tensor), naming the leaves they hold and, without a trace, giving values.
    """
    texts = texts if texts is not None else {}
    traced = {id(node): (result, inputs) for node, result, inputs in (trace or ())}
    roots = [edge_node(t._edge) for t in outputs if t._edge is not None]
    constant_outputs = sum(t._edge is None for t in outputs)  # always shown, so they take room first
    given = checked_max_nodes(max_nodes)
    max_nodes = DEFAULT_MAX_NODES if given is None else given
    limit = sys.maxsize if given == ALL_NODES else max(max_nodes - constant_outputs, 0)
    kept, hidden, room, everything = _reachable(roots, limit, traced)
    if hidden:  # over --max-nodes: its repeated structure collapsed first, where it has some
        summary = _summary(everything, roots, outputs, traced, texts, seed, point, free, max_nodes, clusters)
        if summary is not None:
            graph, ids = summary
            graph.as_built = given is not None
            _marks(graph, highlight, blamed, ids)
            return graph.lighten()
    builder = _Builder(traced, texts, room)
    builder.known = _held_values(kept, outputs, held, traced)
    builder.held_names = {id(t): name for name, t in reversed(held)}  # the first name holding it
    for node in _evaluation_order(kept, traced, roots):
        builder.add(node)
    out_ids = [builder.output_node(t) for t in outputs]
    if hidden:
        builder.add_hidden(hidden, kept)
    graph = Graph(builder.nodes, builder.edges, out_ids)
    graph.as_built = given is not None  # asked for: the pictures draw it as it is
    name_outputs(graph, out_ids)
    if hidden:
        graph.hidden = sum(hidden.values())
        graph.hidden_kinds = dict(hidden.most_common())
        graph.notes.append(f"{graph.hidden:,} more nodes not shown (--max-nodes {max_nodes}): " + kinds(hidden))
    if not point:  # the values were stand-ins to trace the structure: show none
        for node in graph.nodes:
            if node.kind != "constant":
                node.value = None
    if point:
        graph.has_point = True
        fresh = _gradients(graph, builder, outputs, seed, free)
        _local_derivatives(graph, builder)
        if fresh:  # (what backward left in .grad may hold several passes: no parts of it)
            gradient_parts(graph)
        _unknown_values(graph)
    _marks(graph, highlight, blamed, builder.ids)
    if clusters:
        place(graph, builder.autograd, traced, clusters)
    graph.groups = find_groups(graph)
    return graph.lighten()  # (values over 64 elements as statistics, computed here where they are recorded)


def name_outputs(graph: Graph, out_ids: list[str]) -> None:
    taken = {n.name for n in graph.nodes if n.name}
    for k, node_id in enumerate(out_ids):
        node = graph.node(node_id)
        node.output = True
        if node.kind == "op" and not node.name:  # an unnamed result is "f", as in f(x, w)
            name = "f" if len(out_ids) == 1 else f"f{k + 1}"
            node.name = name if name not in taken else f"{name}_out"
            node.named_by_view = True


def _marks(graph: Graph, highlight: Sequence[str], blamed: Sequence[Any], ids: dict[Any, str]) -> None:
    if highlight:
        highlight_paths(graph, highlight)
    for node in blamed:  # marked by gradcli check --blame
        if node in ids and ids[node] in graph._by_id:
            graph.node(ids[node]).blamed = True


def _summary(everything: list[Any], roots: list[Any], outputs: Sequence[Tensor], traced: dict[int, Any], texts: Mapping[int, str], seed: Any,
             point: bool, free: bool, max_nodes: int, clusters: Sequence[tuple[str, int, int]]) -> tuple[Graph, dict[Any, str]] | None:  # fmt: skip
    """A graph over ``max_nodes`` summarised from its tape: the structure of every node first (no
    program text, no local derivatives), its repeated structure found and collapsed (``×20,000``,
    with totals), the gradients from one backward pass; then the ``max_nodes`` nearest the output,
    a group counting as one, get their texts and local derivatives; the rest is counted. None
    when nothing repeats (the plain cut is then the summary)."""
    builder, skeleton = _skeleton(everything, roots, outputs, traced, point)
    if clusters:
        place(skeleton, builder.autograd, traced, clusters)
    rolled = has_repeats(skeleton)  # a Python function called in a loop: one call drawn, ×N
    groups = find_groups(skeleton)
    if not groups and not rolled:
        return None
    fresh = False
    if point:
        skeleton.has_point = True
        fresh = _gradients(skeleton, builder, outputs, seed, free)
    whole = grouped(skeleton) if rolled else skeleton
    groups = expression_groups(whole) if rolled else groups
    for g in groups:
        g["collapsed"] = True
    if len(whole.nodes) <= max_nodes:  # drawn whole once its repeats are drawn once: nothing cut
        graph = whole
        graph.groups = [*groups, *graph.groups]
        for g in groups:
            g["collapsed"] = False
    else:
        graph = cut_to(collapsed(whole, groups), whole, max_nodes)
        graph.groups += [g for g in whole.groups if g.get("repeat") and all(m in graph._by_id for m in g["members"])]
    _label_drawn(graph, skeleton, groups, builder, texts)
    if point:
        shown = {n.id for n in graph.nodes}
        part = _Builder(traced, texts)
        part.autograd = {i: n for i, n in builder.autograd.items() if i in shown}
        part.inputs = {i: v for i, v in builder.inputs.items() if i in shown}
        _local_derivatives(graph, part)
        if fresh:
            gradient_parts(graph)
    return graph, builder.ids


def _skeleton(everything: list[Any], roots: list[Any], outputs: Sequence[Tensor], traced: dict[int, Any],
              point: bool) -> tuple[_Builder, Graph]:  # fmt: skip
    """The structure of every node, without program text (a summary's labels come afterwards)."""
    builder = _Builder(traced, {}, None)  # the structure alone: no text
    builder.structure = True
    for node in _evaluation_order(everything, traced, roots):
        builder.add(node)
    out_ids = [builder.output_node(t) for t in outputs]
    skeleton = Graph(builder.nodes, builder.edges, out_ids)
    name_outputs(skeleton, out_ids)
    if not point:
        for node in skeleton.nodes:
            if node.kind != "constant":
                node.value = None
    return builder, skeleton


def _label_drawn(graph: Graph, skeleton: Graph, groups: list[dict[str, Any]], builder: _Builder,
                 texts: Mapping[int, str]) -> None:  # fmt: skip
    """The operations a summary draws get their program text, else an expression of their inputs
    as the picture shows them: a group by its id (``f = g1 + g0``), a node not drawn as ``...``."""
    shown = {n.id for n in graph.nodes}
    drawn_as = {m: g["id"] for g in groups for m in g["members"] if g["id"] in shown}  # a group drawn in its place
    drawn_as.update((n.id, n.key) for n in skeleton.nodes if n.id in shown)  # (else "...": not drawn)
    for node in graph.nodes:
        tensor = builder.tensors.get(node.id)
        text = texts.get(id(tensor)) if node.kind == "op" and tensor is not None else None
        if text:
            node.label, node.generated = text, False
        elif node.kind == "op":  # its inputs as the picture shows them: a group by its id (f = g1 + g0)
            refs = [drawn_as.get(e.source, "...") for e in skeleton.inputs_of(node.id)]
            node.label = expression(node.op, refs)


# --- which nodes ---------------------------------------------------------------------------------


def locate_blamed(found: Any, outputs: Sequence[Tensor], trace: Sequence[tuple[Any, Tensor, tuple[Any, ...]]]) -> None:
    """Name a blamed node (``check.Blame``) by its id and label on the graph of ``outputs``."""
    graph = build(outputs, trace=trace, point=False, blamed=[found.autograd_node])
    found.node = next((n.id for n in graph.nodes if n.blamed), found.node)
    found.label = next((n.label for n in graph.nodes if n.blamed), found.label)


def _reachable(
    roots: list[Any], limit: int, traced: dict[int, Any]
) -> tuple[list[Any], Counter, dict[Any, int], list[Any]]:
    """Nodes reachable from the roots, nearest first, and how many of each one's constant operands
    are shown: ``limit`` nodes in all, constants included; a count of the rest by kind.

    Nodes come first with all their constants while they fit; then nodes alone; then what room
    is left goes to the constants of the nodes taken alone (a 3,000-constant ``stack`` shows
    its variable and a few of its constants, not 3,000 boxes). Last, every node reachable.
    """
    seen = dict.fromkeys(roots)
    queue = deque(roots)
    while queue:
        node = queue.popleft()
        for e in node.next:
            if e is not None:
                m = edge_node(e)
                if m not in seen:
                    seen[m] = None
                    queue.append(m)
    ordered = list(seen)
    counts = [_constant_operands(n, traced) for n in ordered]
    room: dict[Any, int] = {}
    used = cut = 0
    while cut < len(ordered) and used + 1 + counts[cut] <= limit:  # nodes with all their constants
        room[ordered[cut]] = counts[cut]
        used += 1 + counts[cut]
        cut += 1
    whole = cut
    cut = max(min(whole + limit - used, len(ordered)), len(set(roots)))  # nodes alone; the outputs always
    used += cut - whole
    for k in range(whole, cut):  # what room is left, to their constants
        room[ordered[k]] = min(counts[k], max(limit - used, 0))
        used += room[ordered[k]]
    hidden = Counter(n.name() for n in ordered[cut:])
    dropped = sum(counts) - sum(room.values())
    if dropped:
        hidden["constant"] += dropped
    return ordered[:cut], hidden, room, ordered


def _constant_operands(node: Any, traced: dict[int, Any]) -> int:
    """How many constant operands of ``node`` the trace shows (each one a node of the graph)."""
    entry = traced.get(id(node))
    if entry is None or entry[1] is None:
        return 0
    inputs = entry[1]
    if isinstance(node, FunctionNode):
        slots = dict(zip(node.positions, node.next))
        return sum(slots.get(i) is None for i in range(len(inputs)))
    return sum(e is None for e in node.next[: len(inputs)])


def _evaluation_order(nodes: list[Any], traced: dict[int, Any], roots: list[Any]) -> list[Any]:
    """Inputs before the nodes that use them: the run's own order where it was traced."""
    kept = set(nodes)
    order: list[Any] = []
    done: set[Any] = set()
    for root in reversed(roots):
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if node in done:
                continue
            if expanded:
                done.add(node)
                order.append(node)
                continue
            stack.append((node, True))
            for e in reversed(node.next):
                if e is not None and edge_node(e) in kept and edge_node(e) not in done:
                    stack.append((edge_node(e), False))
    if traced and all(id(n) in traced for n in order if n.__class__ is not AccumulateGrad):
        position = {key: i for i, key in enumerate(traced)}  # traced keys are ids, in run order
        ops = sorted((n for n in order if n.__class__ is not AccumulateGrad), key=lambda n: position[id(n)])
        leaves = [n for n in order if n.__class__ is AccumulateGrad]
        order = _leaves_before_first_use(ops, leaves)
    return order


def _leaves_before_first_use(ops: list[Any], leaves: list[Any]) -> list[Any]:
    pending = set(leaves)
    order = []
    for op in ops:
        for e in op.next:
            m = None if e is None else edge_node(e)
            if m in pending:
                pending.discard(m)
                order.append(m)
        order.append(op)
    return [leaf for leaf in leaves if leaf in pending] + order


# --- building the model ----------------------------------------------------------------------------


class _Builder:
    def __init__(self, traced: dict[int, Any], texts: dict[int, str], room: dict[Any, int] | None = None) -> None:
        self.traced = traced
        self.texts = texts
        self.room = room  # autograd node -> how many of its constant operands are shown (None: all)
        self.nodes: list[GraphNode] = []
        self.edges: list[Edge] = []
        self.ids: dict[Any, str] = {}  # autograd node -> model id
        self.tensors: dict[str, Tensor] = {}  # model id -> the tensor it computed
        self.autograd: dict[str, Any] = {}  # model id -> autograd node
        self.inputs: dict[str, tuple[Any, ...]] = {}  # model id -> the op's inputs as given
        self.leaf_count = 0
        self.structure = False  # the structure alone: operations without their labels
        self.known: dict[Any, Any] = {}  # autograd node -> its value, where no trace says it (_held_values)
        self.held_names: dict[int, str] = {}  # id(tensor) -> the caller's variable holding it

    def new_id(self) -> str:
        return f"n{len(self.nodes)}"

    def add(self, node: Any) -> None:
        if node.__class__ is AccumulateGrad:
            self._variable(node)
        else:
            self._op(node)

    def _variable(self, node: AccumulateGrad) -> None:
        tensor = node.variable()
        node_id = self.new_id()
        name = (tensor.name or self.held_names.get(id(tensor))) if tensor is not None else None
        name = name or f"leaf{self.leaf_count}"
        self.leaf_count += 1
        model = GraphNode(node_id, "variable", "variable", name, name=name)
        if tensor is not None:
            model.shape = tensor.shape
            model.value = np.asarray(tensor.array)
            self.tensors[node_id] = tensor
        self._append(node, model)

    def _op(self, node: Any) -> None:
        result, inputs = self.traced.get(id(node), (None, None))
        sources = self._sources(node, inputs)  # constants get their ids before the node using them
        node_id = self.new_id()
        if isinstance(node, FunctionNode):
            op, saves = node.function.__name__, "inputs" if node.ctx._saved else "nothing"
        else:
            op, saves = node.prim.name, node.prim.saves
        model = GraphNode(node_id, "op", op, "", grad_fn=node.name(), saves=saves)
        if result is not None:
            model.value = np.asarray(result.array)
            model.shape = result.shape
            model.name = result.name
            self.tensors[node_id] = result
            self.inputs[node_id] = inputs
        elif node in self.known:
            model.value = np.asarray(self.known[node])
            model.shape = model.value.shape
        elif isinstance(node, OpNode) and node.out is not None and not isinstance(node.out, Meta):
            model.value = np.asarray(node.out)
            model.shape = model.value.shape
        self._append(node, model)
        refs = []
        hidden_edge = False
        for i, source in enumerate(sources):
            if source is None:  # a constant operand the graph did not see (no trace)
                refs.append("const")
                continue
            if source == "hidden":  # one edge from the summary, one "..." for a run of hidden inputs
                if not hidden_edge:
                    self.edges.append(Edge(source, node_id, i))
                    hidden_edge = True
                if not refs or refs[-1] != "...":
                    refs.append("...")
                continue
            self.edges.append(Edge(source, node_id, i))
            if not self.structure:
                refs.append(self.nodes[int(source[1:])].key)
        if self.structure:  # (a summary's: the nodes shown get their labels afterwards)
            model.generated = True
            return
        text = self.texts.get(id(result)) if result is not None else None
        model.label = text or expression(op, refs)
        model.generated = text is None

    def _append(self, node: Any, model: GraphNode) -> None:
        self.nodes.append(model)
        self.ids[node] = model.id
        self.autograd[model.id] = node

    def _sources(self, node: Any, inputs: tuple[Any, ...] | None) -> list[str | None]:
        """The model id feeding each input of ``node`` (a new constant node where needed)."""
        edges = node.next
        if isinstance(node, FunctionNode):
            slots = dict(zip(node.positions, edges))
            count = len(inputs) if inputs is not None else (max(node.positions) + 1 if node.positions else 0)
            edges = tuple(slots.get(i) for i in range(count))
        sources: list[str | None] = []
        room = None if self.room is None else self.room.get(node, 0)
        for i, e in enumerate(edges):
            if e is not None:
                sources.append(self.ids.get(edge_node(e), "hidden"))  # not kept: beyond the cut
            elif inputs is not None and i < len(inputs):
                if room is not None and room <= 0:
                    sources.append("hidden")  # beyond --max-nodes: counted in the summary
                    continue
                sources.append(self._constant(inputs[i]).id)
                room = None if room is None else room - 1
            else:
                sources.append(None)
        return sources

    def _constant(self, value: Any) -> GraphNode:
        raw = value.array if isinstance(value, Tensor) else value
        text = self.texts.get(id(value)) if isinstance(value, Tensor) else None
        if text is None:
            text = value_text(raw)
        model = GraphNode(self.new_id(), "constant", "constant", text, shape=np.shape(raw), value=np.asarray(raw))
        if isinstance(value, Tensor) and value.name:
            model.name = value.name
        self.nodes.append(model)
        return model

    def output_node(self, tensor: Tensor) -> str:
        if tensor._edge is not None:
            return self.ids[edge_node(tensor._edge)]
        constant = self._constant(tensor)
        constant.label = self.texts.get(id(tensor), constant.label)
        return constant.id

    def add_hidden(self, hidden: Counter, kept: list[Any]) -> None:
        summary = GraphNode("hidden", "hidden", "hidden", f"... {sum(hidden.values()):,} more nodes")
        self.nodes.append(summary)


def _held_values(nodes: list[Any], outputs: Sequence[Tensor], held: Sequence[tuple[str, Tensor]],
                 traced: dict[int, Any]) -> dict[Any, Any]:  # fmt: skip
    """The value of each operation the trace does not cover, where a tensor still holds it: an
    output passed in, a tensor the caller holds, one kept by ``retain_grad()``, or an input a
    consumer saved for its backward (unless modified in place since, or freed by backward)."""
    if traced and all(id(n) in traced for n in nodes if n.__class__ is not AccumulateGrad):
        return {}
    found: dict[Any, Any] = {}

    def take(tensor: Any, expected: int | None = None) -> None:
        edge = getattr(tensor, "_edge", None)
        if edge is None or edge.__class__ is OutputRef or edge in found:
            return  # (one output of a node with several: not the node's value)
        if expected is None or storage_root(tensor)._version == expected:
            found[edge] = tensor.array

    for tensor in [*outputs, *(t for _, t in held)]:
        take(tensor)
    for node in nodes:
        if not isinstance(node, OpNode):
            continue
        take(node.retained(None))
        saved = node.saved
        if saved is None or saved is FREED or node.prim.saves == "meta":
            continue
        for i, value in enumerate(saved):
            if isinstance(value, Tensor):
                take(value, node.versions[i] if node.versions else 0)
    return found


def _unknown_values(graph: Graph) -> None:
    """A note naming the operations drawn without a value (no trace, and no tensor holds it)."""
    missing = [n.ref for n in graph.nodes if n.kind == "op" and n.value is None]
    if missing:
        names = ", ".join(missing[:6]) + (f" and {len(missing) - 6:,} more" if len(missing) > 6 else "")
        graph.notes.append(
            f"no value kept for {names}: build the graph inside gc.render.recording() to see every value"
        )


# --- values, gradients, local derivatives -----------------------------------------------------------


def _gradients(graph: Graph, builder: _Builder, outputs: Sequence[Tensor], seed: Any, free: bool) -> bool:
    """Each node's gradient from one backward pass; False when none could run."""
    captured_ids = [i for i in builder.autograd if i != "hidden"]
    if any(_freed(builder.autograd[i]) for i in captured_ids):
        _gradients_left(graph, builder, captured_ids)
        return False
    if len(outputs) != 1 or outputs[0]._edge is None:
        if len(outputs) != 1:
            graph.notes.append("gradients are shown for a single output")
        return False
    out = outputs[0]
    if seed is None:
        if np.size(out.array) != 1:
            graph.notes.append(f"the output has shape {out.shape}: give --seed for gradients")
            return False
        seed = np.ones_like(out.array)
    capture = {builder.autograd[i]: k for k, i in enumerate(captured_ids)}
    try:
        found = run_backward([out._edge], [np.asarray(seed, dtype=np.asarray(out.array).dtype)],
                             retain_graph=not free, create_graph=False, capture=capture)  # fmt: skip
    except RuntimeError as failed:  # (a saved value changed in place since: the graph is drawn, as torchviz does)
        graph.notes.append(f"no gradients: backward through this graph fails: {str(failed).split('. Hint:')[0]}")
        return False
    for node_id, g in zip(captured_ids, found):
        graph.node(node_id).grad = None if g is None else np.asarray(g)
    for node_id in captured_ids:
        graph.node(node_id).freed = _freed(builder.autograd[node_id])
    return True


def _freed(node: Any) -> bool:
    """Whether a backward pass has already released what ``node`` saved."""
    if isinstance(node, OpNode):
        return node.saved is FREED
    if isinstance(node, FunctionNode):
        return node.ctx._saved is FREED
    return False


def _gradients_left(graph: Graph, builder: _Builder, captured_ids: list[str]) -> None:
    """The graph drawn after ``backward()`` freed it (as torchviz users do): it cannot run
    again, so the gradients shown are those backward left: the leaves' ``.grad`` and that of
    tensors that called ``retain_grad()``."""
    for node_id in captured_ids:
        model = graph.node(node_id)
        model.freed = _freed(builder.autograd[node_id])
        tensor = builder.tensors.get(node_id)
        left = None if tensor is None or not (tensor.is_leaf or tensor.retains_grad) else tensor._grad
        model.grad = None if left is None else np.asarray(left.array)
    graph.notes.append(
        "backward() has already run and freed this graph: the gradients shown are the ones it left "
        "(.grad of the leaves and of tensors that called retain_grad())"
    )


def _local_derivatives(graph: Graph, builder: _Builder) -> None:
    """d node / d input for scalar nodes, from the primitive's own reverse rule with g = 1."""
    groups = {n.id for n in graph.nodes if n.kind == "group"}
    for node_id, node in builder.autograd.items():
        if not isinstance(node, OpNode) or node_id not in builder.inputs:
            continue
        model = graph.node(node_id)
        inputs = builder.inputs[node_id]
        if np.size(model.value) != 1:
            continue
        values = [x.array if isinstance(x, Tensor) else x for x in inputs]
        if any(np.size(v) != 1 for v in values):
            continue
        _scalar_local_derivatives(graph, node, model, values, groups)


def _scalar_local_derivatives(graph: Graph, node: OpNode, model: GraphNode, values: list[Any], groups: set[str]) -> None:  # fmt: skip
    """Each differentiable edge into ``model`` (a scalar node of scalar inputs ``values``) labelled
    with its local derivative, and its formula when every input is drawn as itself."""
    prim = node.prim
    args = [Meta.of(v) for v in values] if prim.saves == "meta" else values
    out = Meta.of(model.value) if prim.saves == "meta" else model.value[()]
    one = np.ones_like(model.value)[()]
    edges = {e.input: e for e in graph.inputs_of(model.id)}
    refs = [
        graph.node(edges[i].source).ref
        if i in edges and edges[i].source != "hidden" and edges[i].source not in groups
        else "…"
        for i in range(len(values))
    ]
    for i, rule in enumerate(prim.vjp if prim.arity >= 0 else ()):
        edge = edges.get(i)
        if rule is None or edge is None or graph.node(edge.source).kind in ("constant", "hidden", "group"):
            continue
        try:
            with np.errstate(all="ignore"):
                edge.local_grad = np.asarray(rule(one, out, *args, *node.params)).reshape(())
        except Exception:  # a rule that needs more than scalars: leave the edge unlabelled
            continue
        if i < len(prim.formulas) and "…" not in refs:  # (an input beyond --max-nodes: the value alone)
            edge.formula = formula(prim.formulas[i], refs, model.ref, prim.name if prim.arity == 1 else None)


def gradient_parts(graph: Graph) -> None:
    """At a node with several consumers, each consumer's share of its gradient: parts that add up
    to the gradient, or none. A consumer beyond ``--max-nodes`` (nearer the leaves than the node
    on another path) or one without a scalar local derivative leaves the sum incomplete: no parts
    then, rather than a sum that does not add up."""
    for node in graph.nodes:
        consumers = graph.consumers_of(node.id)
        if len(consumers) < 2 or node.grad is None or np.size(node.grad) != 1:
            continue
        parts = []
        for edge in consumers:
            target = graph.node(edge.target)
            if edge.local_grad is None or target.grad is None or np.size(target.grad) != 1:
                parts = []
                break
            with np.errstate(all="ignore"):
                parts.append(np.asarray(target.grad).reshape(()) * edge.local_grad)
        node.grad_parts = _adding_up(parts, np.asarray(node.grad).reshape(()))


def _adding_up(parts: list[Any], total: Any) -> list[Any] | None:
    """``parts`` if they add up to ``total`` (up to rounding, which goes to the largest part, so
    that their sum in order is the total), else None."""
    if not parts:
        return None
    values = [float(p) for p in parts]
    grad = float(total)
    if not all(np.isfinite(values)) or not np.isfinite(grad):
        return parts if all(np.isfinite(values)) == np.isfinite(grad) else None
    scale = max(sum(abs(v) for v in values), abs(grad))
    if abs(sum(values) - grad) > 1e-9 * scale:
        return None  # a share is missing: a consumer not shown
    for _ in range(3):  # the rounding of the sum in order, moved to the largest part
        rest = grad - sum(values)
        if rest == 0:
            break
        k = max(range(len(values)), key=lambda i: abs(values[i]))
        values[k] += rest
    dtype = np.asarray(parts[0]).dtype
    return [np.asarray(v, dtype=dtype) for v in values]


def highlight_paths(graph: Graph, names: Sequence[str]) -> None:
    """The paths from each named leaf to the outputs: the leaf and everything that depends on it."""
    for name in names:
        starts = [n.id for n in graph.nodes if n.kind == "variable" and n.name == name]
        if not starts:
            variables = ", ".join(n.name for n in graph.nodes if n.kind == "variable" and n.name)
            raise UsageError(
                f"--highlight {name}: no variable {name!r} in the graph (variables: {variables or 'none'})"
            )
        on_path = set(starts)
        queue = deque(starts)
        while queue:
            current = queue.popleft()
            for edge in graph.consumers_of(current):
                if edge.target not in on_path:
                    on_path.add(edge.target)
                    queue.append(edge.target)
        for node in graph.nodes:
            node.highlighted = node.highlighted or node.id in on_path
        for edge in graph.edges:
            edge.highlighted = edge.highlighted or (edge.source in on_path and edge.target in on_path)
