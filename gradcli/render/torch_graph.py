"""PyTorch's autograd graph -> the graph model, so every view of gradcli draws it unchanged.

The graph is PyTorch's own: the nodes reachable from the outputs' ``grad_fn`` through
``next_functions`` (walked without recursion: a 10^4-deep graph is drawn), named as PyTorch names
them (``MulBackward0``, ``AccumulateGrad``). A recording of the run (``recording_torch``) adds each
node's value, its aten operation, the ``nn.Module`` that computed it (boxes nested by module path,
``encoder.layers.0.self_attn``) and the user's line. With a point, one ``torch.autograd.grad`` pass,
with a pre-hook on every node, gives each node's gradient (what ``retain_grad()`` would keep) and the
leaves' (what ``torch.autograd.grad`` returns), without touching any ``.grad``; each scalar edge gets
its local derivative from the node's own backward called with ones.

This module imports torch: ``gc.render.graph`` imports it only when a torch tensor or function is met.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..errors import UsageError
from ..lang.frameworks.torch_record import (
    TorchRecord,
    compiler_off,
    input_tensor,
    module_roots,
    recording_torch,
    uncompiled,
)
from .arguments import call_arguments
from .build import ALL_NODES, DEFAULT_MAX_NODES, checked_max_nodes, gradient_parts, highlight_paths, name_outputs
from .labels import expression, value_text
from .model import Edge, Graph, GraphNode, first_four
from .outputs import output_tensors
from .recorded import torch_record_of
from .repeats import expression_groups, grouped
from .summary import SUMMARY_NODES, collapsed, cut_to
from .torch_grads import alive_from, gradients, is_leaf, kept_array, kept_recorded, live_tensors, local_derivatives

_FREED_MESSAGE = "Trying to backward through the graph a second time"


def is_torch_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def torch_model(
    outputs: Any,
    record: TorchRecord | None = None,
    *,
    seed: Any = None,
    point: bool = True,
    highlight: Sequence[str] = (),
    max_nodes: int | str | None = None,
    names: Mapping[int, str] | None = None,
    held: Sequence[tuple[str, Any]] = (),
) -> Graph:
    """The model of PyTorch's graph behind ``outputs`` (a tensor or several). ``record``: what
    ``recording_torch()`` saw while they were computed (values, ops, module scopes, lines). ``names``:
    ``id(tensor) -> name`` for leaves; ``held``: the caller's variables (name, tensor), naming the
    tensors they hold and giving their values. ``seed``: the vector of the backward pass (ones when
    not given). ``max_nodes`` as ``gc.render.graph``'s."""
    outs, left_out = output_tensors(outputs, is_torch_tensor)
    record = record if record is not None else TorchRecord()
    given = checked_max_nodes(max_nodes)
    order = evaluation_order([t.grad_fn for t in outs if t.grad_fn is not None], record)
    builder = _Builder(record, names or {}, held, outs, used_outputs(order, outs))
    builder.count_ops(order)
    partial = not all(n in record.values for n in order if not is_leaf(n))  # (no recording, or a partial one)
    builder.alive = alive_from(set(order)) if partial or point else []
    if partial:
        for node, tensor in live_tensors(builder.alive).items():
            builder.known.setdefault(node, tensor)
    for node in order:
        builder.add(node)
    out_ids = [builder.output(t) for t in outs]
    graph = Graph(builder.nodes, builder.edges, out_ids, notes=left_out)
    name_outputs(graph, out_ids)
    _module_boxes(graph, builder, record)
    fresh = False
    if point:
        graph.has_point = True
        fresh = gradients(graph, builder, outs, seed)
        _unknown_values(graph)
    else:
        for model in graph.nodes:
            model.value = None
    builder.alive = []  # (the graph holds no tensor of the user's longer than it must)
    graph = _fitted(graph, given)
    if point:  # (the nodes drawn: a 10^4-node chain collapsed needs no 10^4 local derivatives)
        local_derivatives(graph, builder)
        if fresh:
            gradient_parts(graph)
    if highlight:
        highlight_paths(graph, highlight)
    _fold_modules(graph)
    return graph


def _unknown_values(graph: Graph) -> None:
    """A note naming the operations drawn without a value (no recording, and no tensor holds it)."""
    several = {e.source for e in graph.edges if graph.node(e.target).op == "item"}  # (their outputs hold them)
    missing = [n.ref for n in graph.nodes if n.kind == "op" and n.value is None and not n.freed and n.id not in several]
    if missing:
        graph.notes.append(
            f"{UNKNOWN_VALUES} {first_four(missing)}: draw the function (gc.render.graph(f, x)) to see every value"
        )


UNKNOWN_VALUES = "no value kept for"


def _flat(value: Any) -> list[Any]:
    """The tensors an output is drawn from (``outputs.output_tensors``: a model's output object's loss)."""
    return output_tensors(value, is_torch_tensor)[0]


def _fitted(graph: Graph, given: int | None) -> Graph:
    """``graph`` within ``--max-nodes`` (200 when not given, and no limit for a model with module boxes:
    a picture folds them to a depth it can show, ``levels.legible``): its repeated modules and loops
    drawn once first (``repeats.grouped``: nothing cut), then its repeated expressions collapsed, and only
    then the nodes nearest the outputs, the rest counted, as gradcli's own graphs are summarised."""
    limit = DEFAULT_MAX_NODES if given is None else given
    boxed = given is None and bool(graph.clusters)  # a model's boxes fold for a picture (levels), never cut
    if given != ALL_NODES and len(graph.nodes) > limit:
        graph = grouped(graph)
    repeats = [g for g in graph.groups if g.get("repeat")]
    if given == ALL_NODES or len(graph.nodes) <= limit or boxed:
        graph.as_built = given is not None
        graph.groups = expression_groups(graph) + repeats
        return graph
    groups = expression_groups(graph)
    for g in groups:
        g["collapsed"] = True
    whole = collapsed(graph, groups) if groups else graph
    fitted = cut_to(whole, graph, limit)
    fitted.as_built = given is not None
    fitted.notes += [note for note in graph.notes if note not in fitted.notes]
    fitted.groups += [g for g in repeats if all(m in fitted._by_id for m in g["members"])]
    fitted.notes.append(CUT_NOTE)
    return fitted


CUT_NOTE = "--max-nodes all draws every node"


# --- the nodes, in evaluation order ---------------------------------------------------------------


def _inputs(node: Any) -> list[Any]:
    return [n for n, _ in node.next_functions if n is not None]


def evaluation_order(roots: Sequence[Any], record: TorchRecord) -> list[Any]:
    """The nodes reachable from ``roots``, inputs before the nodes using them (no recursion): in
    the run's own order where the recording saw every operation, each leaf just before its first use
    (a parameter beside the operation that reads it)."""
    order: list[Any] = []
    inputs: dict[Any, list[Any]] = {}  # (next_functions makes its tuple anew at each read)
    for root in roots:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
            elif node not in inputs:
                inputs[node] = _inputs(node)
                stack.append((node, True))
                stack.extend((n, False) for n in reversed(inputs[node]) if n not in inputs)
    ops = [n for n in order if not is_leaf(n)]
    if ops and all(n in record.ops for n in ops):
        position = {node: k for k, node in enumerate(record.ops)}
        ops.sort(key=position.__getitem__)
    placed: set[Any] = set()
    ordered = []
    for op in ops:
        for n in inputs[op]:
            if is_leaf(n) and n not in placed:
                placed.add(n)
                ordered.append(n)
        ordered.append(op)
    return [n for n in order if is_leaf(n) and n not in placed] + ordered


def op_name(node: Any) -> str:
    """The operation a node's name says: ``AddmmBackward0`` -> ``addmm``, ``NativeLayerNormBackward0``
    -> ``native_layer_norm``; a custom Function's own name."""
    forward = getattr(type(node), "_forward_cls", None)
    if forward is not None:
        return forward.__name__
    stem = re.sub(r"Backward\d*$", "", type(node).__name__)
    return re.sub(r"(?<!^)(?=[A-Z])", "_", stem).lower() or type(node).__name__


def _plain(value: Any) -> Any:
    return kept_array(value) if isinstance(value, torch.Tensor) else value


def used_outputs(order: Sequence[Any], outputs: Sequence[Any]) -> dict[Any, set[int]]:
    """node -> the numbers of its outputs that the graph uses (its consumers' ``next_functions``, and
    the outputs drawn): ``a, b = x.chunk(2)`` using both gives {0, 1}."""
    used: dict[Any, set[int]] = {}
    for node in order:
        for source, number in node.next_functions:
            if source is not None:
                used.setdefault(source, set()).add(number)
    for tensor in outputs:
        if tensor.grad_fn is not None:
            used.setdefault(tensor.grad_fn, set()).add(tensor.output_nr)
    return used


class _Builder:
    def __init__(self, record: TorchRecord, names: Mapping[int, str], held: Sequence[tuple[str, Any]],
                 outputs: Sequence[Any], used: Mapping[Any, set[int]]) -> None:  # fmt: skip
        self.record = record
        self.used = used
        #: node -> {output number: model id}: a node of several outputs draws each one it uses as a node
        #: of its own (``chunk[1]``, or the user's name ``b``), wired to that output's consumers
        self.ports: dict[Any, dict[int, str]] = {}
        self.shared_ops: dict[str, int] = {}  # op -> its nodes of several outputs (``count_ops``)
        self.names = {**record.leaf_names, **{id(t): n for n, t in reversed(held)}, **names}
        self.nodes: list[GraphNode] = []
        self.edges: list[Edge] = []
        self.ids: dict[Any, str] = {}  # autograd node -> model id
        self.autograd: dict[str, Any] = {}  # model id -> autograd node
        self.tensors: dict[str, Any] = {}  # model id -> a tensor it made that someone holds (its .grad)
        self.leaf_count = 0
        self.alive: list[Any] = []  # the tensors alive that its nodes made (torch_grads.alive_from)
        self.known: dict[Any, Any] = {}  # node -> a tensor holding its value (its first output)
        self.op_names: dict[Any, str] = {}  # node -> the caller's variable holding its tensor
        for name, tensor in [*((None, t) for t in outputs), *reversed(held)]:
            node = tensor.grad_fn
            if node is not None and tensor.output_nr == 0:
                self.known.setdefault(node, tensor)
            if node is not None and name is not None:
                self.op_names.setdefault((node, tensor.output_nr), name)
        self._local_names()

    def _local_names(self) -> None:
        """Nodes named as the user's functions named their tensors (``a = torch.add(w, x)``), as the
        graphs of gradcli's own programs are: a name only where it means one node (a helper called
        twice leaves its local names to neither) and no input is called so (``x = x.sin()`` in a loop)."""
        nodes_of: dict[str, set[Any]] = {}
        for node, names in self.record.local_names.items():
            for name in names:
                nodes_of.setdefault(name, set()).add(node)
        taken = set(self.names.values()) | set(self.op_names.values())
        for node, names in self.record.local_names.items():
            if node in self.op_names:
                continue
            name = next((n for n in names if len(nodes_of[n]) == 1 and n not in taken), None)
            if name is not None:
                self.op_names[node] = name

    def count_ops(self, order: Sequence[Any]) -> None:
        """How many nodes of several outputs each operation has: an output is named ``chunk[1]`` only
        where one ``chunk`` is drawn (a GRU cell's two ``unsafe_split`` outputs are ``n5`` and ``n13``)."""
        for node in order:
            if not is_leaf(node) and self.several(node):
                op = self.record.ops.get(node) or op_name(node)
                self.shared_ops[op] = self.shared_ops.get(op, 0) + 1

    def several(self, node: Any) -> bool:
        """Whether ``node`` has several outputs to draw apart: the graph uses one after its first, or
        the run saw more than one (``var, mean = torch.var_mean(x)``, using only ``var``)."""
        used = self.used.get(node, {0})
        return used != {0} or any((node, k) in self.record.outputs for k in range(1, 8))

    def add(self, node: Any) -> None:
        model = self._variable(node) if is_leaf(node) else self._op(node)
        self.nodes.append(model)
        self.ids[node] = model.id
        self.autograd[model.id] = node
        if not is_leaf(node) and self.several(node):
            self._ports(node, model)

    def _ports(self, node: Any, model: GraphNode) -> None:
        """Each output of a node of several used by the graph as a node of its own: ``chunk[1]`` (or
        the user's name for it), with that output's value; the node itself holds no single value."""
        model.value, model.shape = None, ()
        model.name = None if model.name == self.op_names.get((node, 0)) else model.name
        self.ports[node] = {}
        for k in sorted(self.used.get(node, {0})):
            name = self.op_names.get((node, k))
            if name is None and self.shared_ops.get(model.op, 0) <= 1:  # (two splits: n5 + n13, never split[0] twice)
                name = f"{model.op}[{k}]"
            port = GraphNode(f"n{len(self.nodes)}", "op", "item", f"{model.key}[{k}]", name=name)
            port.grad_fn, port.scope, port.line, port.cluster = (
                f"{model.grad_fn} output {k}",
                model.scope,
                model.line,
                model.cluster,
            )
            value = self.record.values.get(node) if k == 0 else self.record.outputs.get((node, k))
            if value is not None:
                port.value, port.shape = kept_recorded(value)
            elif k == 0 and node in self.known:
                port.value, port.shape = kept_array(self.known[node]), tuple(self.known[node].shape)
            self.nodes.append(port)
            self.edges.append(Edge(model.id, port.id, 0))
            self.ports[node][k] = port.id

    def source_id(self, node: Any, number: int) -> str:
        """The model id of output ``number`` of ``node``."""
        ports = self.ports.get(node)
        return ports[number] if ports and number in ports else self.ids[node]

    def _variable(self, node: Any) -> GraphNode:
        tensor = node.variable
        name = self.names.get(id(tensor)) or f"leaf{self.leaf_count}"
        self.leaf_count += 1
        model = GraphNode(f"n{len(self.nodes)}", "variable", "variable", name, grad_fn="AccumulateGrad", name=name)
        model.value, model.shape = kept_array(tensor), tuple(tensor.shape)
        self.tensors[model.id] = tensor
        return model

    def _op(self, node: Any) -> GraphNode:
        node_id = f"n{len(self.nodes)}"
        op = self.record.ops.get(node) or op_name(node)
        saves, freed = saved_text(node)
        model = GraphNode(node_id, "op", op, "", grad_fn=type(node).__name__, saves=saves, freed=freed)
        value = self.record.values.get(node)
        if value is not None:
            model.value, model.shape = kept_recorded(value)
        else:
            value = self.known.get(node)
            if value is None and not freed:
                value = getattr(node, "_saved_result", None)  # (exp, tanh, sigmoid keep their output)
            if isinstance(value, torch.Tensor):
                model.value, model.shape = kept_array(value), tuple(value.shape)
        if node in self.known:
            self.tensors[node_id] = self.known[node]
        model.name = self.op_names.get((node, 0))
        model.scope, model.line = self.record.scopes.get(node), self.record.lines.get(node)
        refs = []
        constants = self.record.constants.get(node, {})
        for i, (source, number) in enumerate(node.next_functions):
            if source is None:  # an input that needs no gradient: not in PyTorch's graph
                constant = constants.get(i)
                refs.append("const" if constant is None else value_text(np.asarray(_plain(constant))))
                continue
            source_id = self.source_id(source, number)
            self.edges.append(Edge(source_id, node_id, i))
            refs.append(self.nodes[int(source_id[1:])].key)
        model.label = expression(op.rstrip("_"), refs)
        model.generated = True
        if not freed:
            self._saved_inputs(node)
        return model

    def _saved_inputs(self, node: Any) -> None:
        """The values of ``node``'s inputs 0 and 1 where it saved them (``_saved_self``, ``_saved_other``,
        aten's names for them) and nothing else gave them."""
        for (source, output_nr), name in zip(node.next_functions, ("_saved_self", "_saved_other")):
            model = self.nodes[int(self.source_id(source, output_nr)[1:])] if source is not None else None
            if model is None or model.value is not None or model.kind != "op" or output_nr != 0:
                continue
            try:
                value = getattr(node, name, None)
            except RuntimeError:  # (changed in place since it was saved)
                continue
            if isinstance(value, torch.Tensor):
                model.value, model.shape = kept_array(value), tuple(value.shape)

    def output(self, tensor: Any) -> str:
        if tensor.grad_fn is not None:
            return self.source_id(tensor.grad_fn, tensor.output_nr)
        kind = "variable" if tensor.requires_grad else "constant"
        name = self.names.get(id(tensor)) or ("x" if kind == "variable" else None)
        model = GraphNode(f"n{len(self.nodes)}", kind, kind, name or "constant", name=name)
        model.grad_fn = "AccumulateGrad" if tensor.requires_grad else None
        model.value, model.shape = kept_array(tensor), tuple(tensor.shape)
        self.nodes.append(model)
        self.tensors[model.id] = tensor
        return model.id


_SAVED: dict[type, list[str]] = {}  # a node's class -> its saved tensors' attribute names


def saved_text(node: Any) -> tuple[str, bool]:
    """What ``node`` keeps for its backward, ``self (3,), other ()`` (a custom Function's
    ``saved_tensors``: ``tensors (3,), (2, 2)``, drawn "saved tensors (3,), (2, 2)"), or ``nothing``; and whether a backward freed it."""
    names = _SAVED.get(type(node))
    if names is None:
        names = _SAVED[type(node)] = [
            a for a in dir(node) if a.startswith("_saved_") and not a.endswith(("_sym_sizes", "_sym_strides"))
        ]
    parts, freed = [], []
    for name in ["saved_tensors"] if hasattr(type(node), "_forward_cls") else names:
        short = name.removeprefix("_saved_")
        try:
            value = getattr(node, name)
        except RuntimeError as failed:  # freed by a backward, or changed in place since it was saved
            if _FREED_MESSAGE in str(failed):
                freed.append(short)
            else:
                parts.append(f"{short} (changed in place since)")
            continue
        if isinstance(value, torch.Tensor):
            parts.append(f"{short} {tuple(value.shape)}")
        elif name == "saved_tensors" and value:
            parts.append("tensors " + ", ".join(str(tuple(t.shape)) for t in value if t is not None))
    if freed:  # (their names: the shapes went with them)
        return ", ".join(freed), True
    return ", ".join(parts) or "nothing", False


# --- nn.Module boxes ------------------------------------------------------------------------------


def _module_boxes(graph: Graph, builder: _Builder, record: TorchRecord) -> None:
    """A box per call of an ``nn.Module`` that computed a node (and those around it), nested by path:
    ``Graph.clusters`` (with ``path``, ``class``, ``call``, ``depth``) and each node's innermost box. A
    module called several times (a cell in a loop over time steps) gets a box per call; a parameter
    sits in the box of its module's call that first used it."""
    calls: dict[str, tuple[str, int]] = {}  # model id -> the module call that computed it
    for model_id, node in builder.autograd.items():
        if node in record.scope_calls:
            calls[model_id] = record.scope_calls[node]
    for node, ports in builder.ports.items():
        for port in ports.values():
            if node in record.scope_calls:
                calls[port] = record.scope_calls[node]
    boxes: dict[tuple[str, int | None], str] = {}  # (path, call) -> box id, outer boxes first
    parents: dict[str, str | None] = {}
    for model in graph.nodes:
        scope = model.scope
        if scope is None and model.kind == "variable" and model.name and "." in model.name:
            owner = model.name.rsplit(".", 1)[0]
            scope = model.scope = owner if owner in record.modules else None  # (a parameter: its module's)
            if scope is not None:
                found = _first_call(graph, model.id, owner, calls, record)
                if found is not None:
                    calls[model.id] = found
        if scope is None:
            continue
        chain = _call_chain(scope, calls.get(model.id), record)
        for k, key in enumerate(chain):
            if key not in boxes:
                boxes[key] = f"m{len(boxes)}"
                parents[boxes[key]] = boxes[chain[k - 1]] if k else None
        model.cluster = boxes[chain[-1]]
    depth: dict[str, int] = {}
    for box in boxes.values():  # (outer boxes first)
        depth[box] = 1 + (depth[parents[box]] if parents[box] else 0)
    drawn: dict[str, list[int]] = {}  # path -> its calls that computed a node of the graph, in order
    for path, call in boxes:
        if call is not None:
            drawn.setdefault(path, []).append(call)
    for calls in drawn.values():
        calls.sort()
    graph.clusters = [
        _box(path, call, drawn.get(path, []), box, parents[box], depth[box], record)
        for (path, call), box in boxes.items()
    ]


def _first_call(graph: Graph, leaf: str, owner: str, calls: Mapping[str, tuple[str, int]],
                record: TorchRecord) -> tuple[str, int] | None:  # fmt: skip
    """The call of module ``owner`` that first used a parameter of its (``leaf``): the call of ``owner``
    running around its first consumer made in one, else None."""
    for edge in graph.consumers_of(leaf):
        call = calls.get(edge.target)
        for running in record.module_calls.get(call, ()) if call is not None else ():
            if running[0] == owner:
                return running
    return None


def _call_chain(scope: str, call: tuple[str, int] | None, record: TorchRecord) -> list[tuple[str, int | None]]:
    """The boxes around a node of module ``scope``, outermost first: the enclosing paths (``a``, ``a.b``
    for ``a.b.c``) that ran as modules and ``scope`` itself, each with the call the node was made in
    (None where no call of it was running: a submodule called from outside its parent's forward)."""
    running = dict(record.module_calls.get(call, ())) if call is not None else {}
    paths = [scope]
    while "." in paths[-1]:
        paths.append(paths[-1].rsplit(".", 1)[0])
    return [(p, running.get(p)) for p in reversed(paths) if p == scope or p in record.modules]


def _box(path: str, call: int | None, calls: list[int], box: str, parent: str | None, depth: int,
         record: TorchRecord) -> dict[str, Any]:  # fmt: skip
    """A module call's box: ``encoder.layers.0 (Linear)``, with ``call 3/20`` for a module several of
    whose calls (``calls``: those in the graph) are drawn; ``call``: its place among them, from 0."""
    kind = record.modules.get(path)
    label = f"{path} ({kind})" if kind else path
    found = {"id": box, "label": label, "parent": parent, "path": path, "depth": depth}
    if kind:
        found["class"] = kind
    if call is not None:
        found["call"] = calls.index(call)
        if len(calls) > 1:
            found["label"] += f" call {found['call'] + 1}/{len(calls)}"
    return found


def _fold_modules(graph: Graph) -> None:
    """At scale (a page of more than ``SUMMARY_NODES`` nodes, as groups of repeated structure are),
    the innermost module boxes start folded (``"collapsed"``): the page shows the model's structure."""
    if not graph.clusters:
        return
    inner = {c["id"] for c in graph.clusters} - {c["parent"] for c in graph.clusters}
    scale = len(graph.nodes) > SUMMARY_NODES and not graph.as_built
    for box in graph.clusters:
        box["collapsed"] = scale and box["id"] in inner


# --- functions computing with torch ---------------------------------------------------------------


def torch_function_graph(
    function: Callable[..., Any],
    values: Mapping[str, Any],
    wrt: Sequence[str] | None = None,
    *,
    seed: Any = None,
    point: bool = True,
    highlight: Sequence[str] = (),
    max_nodes: int | str | None = None,
    roots: Mapping[str, Any] | None = None,
) -> Graph:
    """The graph of ``function(**values)`` computed with torch: the values as float64 tensors (an
    integer array not differentiated stays integer: token ids), those in ``wrt`` (default: all)
    requiring gradients, named by the parameters; module paths from the ``nn.Module`` objects the
    function reaches by name (or ``roots``)."""
    tensors = {name: input_tensor(value, wrt is None or name in wrt) for name, value in values.items()}
    names = {id(t): name for name, t in tensors.items()}
    function, compiled = uncompiled(function)
    with compiler_off(), recording_torch(module_roots(function) if roots is None else roots) as record:
        out = function(**tensors)
    graph = torch_model(out, record, seed=seed, point=point, highlight=highlight, max_nodes=max_nodes, names=names)
    return _compiled_note(graph, compiled)


def _compiled_note(graph: Graph, compiled: bool) -> Graph:
    if compiled:
        graph.notes.append(
            "torch.compile'd: the graph drawn is the function's own, run eagerly (the compiled code keeps no graph to read)"
        )
    return graph


def torch_call_graph(function: Callable[..., Any], args: Sequence[Any], caller: Any, **options: Any) -> Graph:
    """``gc.render.graph(f, *args)`` for ``f`` computing with torch: numbers and float arrays become
    float64 tensors requiring gradients, a torch tensor that does not require them a copy that does
    (integer arrays and tensors stay as they are: indices); each named by ``f``'s parameter; module
    paths named from ``f``'s closure and globals and the caller's variables."""
    try:
        bound = inspect.signature(function).bind(*args)
        labels = [name for name, value in bound.arguments.items() for _ in _flat_args(value)]
    except (TypeError, ValueError):
        labels = [f"x{k}" for k in range(len(args))]
    tensors, names = call_arguments(args, labels, lambda v: input_tensor(v, not _indices(v)), is_torch_tensor)
    function, compiled = uncompiled(function)
    roots = module_roots(function, caller.f_locals, caller.f_globals)
    with compiler_off(), recording_torch(roots) as record:
        out = function(*tensors)
    return _compiled_note(torch_model(out, record, names=names, **options), compiled)


def _indices(value: Any) -> bool:
    """An integer (or boolean) tensor or array: indices, a mask, token ids; a Python number is none."""
    if isinstance(value, torch.Tensor):
        return not (value.is_floating_point() or value.is_complex())
    return np.ndim(value) > 0 and np.asarray(value).dtype.kind in "iub"


def _flat_args(value: Any) -> list[Any]:
    return list(value) if isinstance(value, tuple) else [value]


def torch_tensor_graph(outputs: Sequence[Any], caller: Any, record: Any = None, **options: Any) -> Graph:
    """``gc.render.graph(t)`` for torch tensors: the caller's variables name the tensors they hold
    (and give their values), the ``nn.Module`` objects it holds name their parameters (``model.0.weight``);
    ``record``: what ``recording_torch()`` (or ``gc.render.recording()``) saw while they were computed;
    not given, the latest ``gc.render.recording()`` that did (else nothing)."""
    record = getattr(record, "torch", record)  # (gc.render.recording()'s trace: torch's record within)
    if record is not None and not isinstance(record, TorchRecord):
        raise UsageError("trace= of a torch graph is what gc.render.recording() or recording_torch() gave")
    record = torch_record_of(_flat(list(outputs))) if record is None else record
    held: list[tuple[str, Any]] = []
    for scope in (caller.f_locals, caller.f_globals):  # its locals, then its module's globals (a notebook's)
        held += [(n, v) for n, v in list(scope.items()) if isinstance(v, torch.Tensor) and not n.startswith("_")]
    names = {}
    roots = module_roots(None, caller.f_locals, caller.f_globals)
    for root, module in roots.items():
        for path, parameter in module.named_parameters():
            names.setdefault(id(parameter), f"{root}.{path}")
    names.update((id(t), name) for name, t in reversed(held))
    graph = torch_model(outputs, record, names=names, held=held, **options)
    if record is None:
        _unrecorded(graph, bool(roots))
    return graph


def _unrecorded(graph: Graph, modules: bool) -> None:
    """Tensors drawn without a recording: one note saying what the picture lacks (the values of the
    operations no tensor holds, their gradients after a ``backward()``, the module boxes) and how to get it."""
    several = {e.source for e in graph.edges if graph.node(e.target).op == "item"}  # (their outputs hold them)
    ops = [n for n in graph.nodes if n.kind == "op" and n.id not in several]
    lacking = []
    missing = sum(n.value is None for n in ops)
    if missing and graph.has_point:
        lacking.append(f"values of {missing:,} of {len(ops):,} operations")
    if any(n.freed for n in ops) and graph.has_point and any(n.grad is None for n in ops):
        lacking.append("the operations' gradients")
    if modules:
        lacking.append("the nn.Module boxes")
    graph.notes = [note for note in graph.notes if not note.startswith(UNKNOWN_VALUES)]
    if lacking:
        what = lacking[0] if len(lacking) == 1 else ", ".join(lacking[:-1]) + " and " + lacking[-1]
        graph.notes.append(f"{what} were not kept: wrap the forward in `with gc.render.recording():`")
