"""One model of a computation graph; every view (tree, text, DOT, JSON) reads it.

Nodes are in evaluation order with stable ids (``n0``, ``n1``, ...); edges
go from an input (``source``) to the node that consumes it (``target``).
With a point, nodes carry their value and their gradient (d output / d node)
and scalar edges their local derivative, with its formula.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..stats import (
    FULL_LIMIT,
    TensorStats,
    arrays_kept,
    keeping_arrays,  # noqa: F401 - (where graphs' callers have always found it)
    light,
    tensor_stats,
)
from .health import module_boxes, module_rows, node_health


def whole_or_all(value: int | str | None) -> int | str | None:
    """An option's ``N|all`` (``--depth``, ``--max-nodes``): None when not given, ``"all"``, a whole
    number >= 0, or -1 for anything else (a float or a bool too), for the option to refuse in its words."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text == "all":
        return "all"
    try:
        number = int(text)
    except ValueError:
        return -1
    return -1 if number < 0 or isinstance(value, (bool, float)) else number


@dataclass
class GraphNode:
    id: str
    kind: str  # "variable", "constant" or "op"
    op: str  # the primitive ("add", "mul"), a custom Function's name, "variable" or "constant"
    label: str  # the expression it computes ("x + w"), a name, or a number
    grad_fn: str | None = None  # PyTorch's name for its backward: "AddBackward0"
    name: str | None = None  # the program's name for it (a, b, y) or the variable's
    shape: tuple[int, ...] = ()
    value: Any = None
    grad: Any = None  # d output / d this node
    grad_parts: list[Any] | None = None  # with several consumers, what each contributed
    saves: str = ""  # what its backward keeps: "inputs", "output", "both", "shapes", "nothing"
    freed: bool = False  # its saved values were released by a backward without retain_graph
    output: bool = False
    highlighted: bool = False
    blamed: bool = False
    generated: bool = False  # the label was made from ids (no program text): show the id too
    named_by_view: bool = False  # the name is the view's own ("f" for an unnamed output), not the program's
    count: int = 0  # a group's node (kind "group", summary.collapsed): how many repeats, and nodes in all
    size: int = 0
    cluster: str | None = None  # the statement or Python call that computed it (Graph.clusters), innermost
    #: a framework's graph (PyTorch, JAX): the nn.Module path that computed it (``encoder.layers.0.self_attn``)
    #: or the JAX call's name; the line of the user's code that made it (``model.py:12``)
    scope: str | None = None
    line: str | None = None
    #: a folded box's node (kind "module", levels.module_node): its path, class, input and output shapes,
    #: operations and parameters inside, the nodes it stands for
    module: dict[str, Any] | None = None
    #: a node of a loop's body drawn once (a JAX ``scan``): the iteration whose value it shows (1: the first)
    iteration: int | None = None

    @property
    def is_leaf(self) -> bool:
        return self.kind not in ("op", "module")  # (a folded box computes from its inputs)

    @property
    def key(self) -> str:
        """How the text view refers to it: its name, its number, or its id."""
        if self.name:
            return self.name
        if self.kind == "constant":
            return self.label
        return self.id

    @property
    def titled_label(self) -> str:
        """The label with the name the program gave the node first, ``a = x + w``, as the tree shows
        it (SPEC: assigned names label their nodes); ``label`` itself stays the expression."""
        if self.kind == "op" and self.name and not self.named_by_view and self.label != self.name:
            return f"{self.name} = {self.label}"
        return self.label

    @property
    def ref(self) -> str:
        """How a formula refers to it: its name, or for an unnamed operation its id (``n7``), which
        every view shows beside its expression (``n7 = w * x + b``): an edge's derivative reads
        ``∂f/∂n7 = f*(1-f)``, never the sub-expression repeated."""
        if self.name or self.kind != "op":
            return self.key
        return self.id


@dataclass
class Edge:
    source: str  # the input
    target: str  # the node that consumes it
    input: int  # which input of the target
    local_grad: Any = None  # d target / d source, where both are scalars
    formula: str | None = None  # the same as a formula of the inputs ("b", "cos(x)")
    highlighted: bool = False
    count: int = 1  # edges it stands for (into or out of a collapsed group)


@dataclass
class Graph:
    nodes: list[GraphNode]
    edges: list[Edge]
    outputs: list[str]
    hidden: int = 0  # nodes left out of a large graph
    hidden_kinds: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    has_point: bool = False  # values and gradients were computed
    compact: bool = False  # views show names and values, not formulas (--compact)
    rankdir: str | None = None  # "TB" or "LR" for pictures; None: chosen from the graph's shape
    #: --max-nodes was given: pictures and the page draw every node the model holds (none collapsed, no
    #: cut of their own); a graph it covers is drawn whole, every node itself
    as_built: bool = False
    groups: list[dict[str, Any]] = field(default_factory=list)  # repeated structure (summary.find_groups)
    #: statements of a program and Python calls, each ``{"id", "label", "parent"}`` (``parent``: the
    #: enclosing one's id or None); nodes name theirs in ``GraphNode.cluster``
    clusters: list[dict[str, Any]] = field(default_factory=list)
    #: the depth drawn (--depth N or all, levels.at_depth; None: not chosen) and the boxes drawn folded
    depth: int | str | None = None
    folded: list[str] = field(default_factory=list)
    #: a graph with boxes folded (levels.folded): the graph it was folded from, which the page unfolds
    unfolded: Graph | None = field(default=None, repr=False, compare=False)
    color_by: str | None = None  # --color-by: grad-norm, nan, zeros or ratio (paint.py), else None
    #: the depth drawn (--depth N or all, levels.at_depth; None: not chosen) and the boxes drawn folded
    depth: int | str | None = None
    folded: list[str] = field(default_factory=list)

    def node(self, node_id: str) -> GraphNode:
        return self._by_id[node_id]

    @property
    def drawn_nodes(self) -> int:
        """The nodes a picture draws: not the note counting those left out (``... N more nodes``)."""
        return sum(n.kind != "hidden" for n in self.nodes)

    def __post_init__(self) -> None:
        self._by_id = {n.id: n for n in self.nodes}
        self._indexed = -1  # len(edges) when the indexes below were built
        self._positions: dict[str, int] = {}

    def position(self, node_id: str) -> int:
        """The node's place in evaluation order (0 for a node not in the graph): an edge to an earlier
        node is a loop's back edge."""
        if len(self._positions) != len(self.nodes):
            self._positions = {n.id: k for k, n in enumerate(self.nodes)}
        return self._positions.get(node_id, 0)

    def inputs_of(self, node_id: str) -> list[Edge]:
        return list(self._index()[0].get(node_id, ()))

    def consumers_of(self, node_id: str) -> list[Edge]:
        return list(self._index()[1].get(node_id, ()))

    def _index(self) -> tuple[dict[str, list[Edge]], dict[str, list[Edge]]]:
        """Edges by target (in input order) and by source: one pass, so views stay linear in the graph."""
        if self._indexed != len(self.edges):
            by_target: dict[str, list[Edge]] = {}
            by_source: dict[str, list[Edge]] = {}
            for e in self.edges:
                by_target.setdefault(e.target, []).append(e)
                by_source.setdefault(e.source, []).append(e)
            for edges in by_target.values():
                edges.sort(key=lambda e: e.input)
            self._inputs, self._consumers, self._indexed = by_target, by_source, len(self.edges)
        return self._inputs, self._consumers

    def lighten(self, keep: bool | None = None) -> Graph:
        """Every value and gradient over ``FULL_LIMIT`` elements replaced by its statistics, the
        whole tensor dropped (held by the statistics when ``keep``; None: as ``keeping_arrays`` says),
        with a note saying so and how to get them whole. Returns the graph itself."""
        keep = arrays_kept() if keep is None else keep
        summarised = 0
        for n in self.nodes:
            for key in ("value", "grad"):
                before = getattr(n, key)
                after = light(before, keep=keep)
                if after is not before:
                    setattr(n, key, after)
                summarised += isinstance(after, TensorStats)
        if summarised and STATS_NOTE not in self.notes:
            self.notes.append(STATS_NOTE)
        return self

    def to_dict(self) -> dict[str, Any]:
        """SPEC's JSON keys (nodes: id, op, label, grad_fn, is_leaf, value, grad; edges: source,
        target, local_grad), and a few more."""
        return {
            "nodes": [
                {
                    "id": n.id,
                    "op": n.op,
                    "label": n.titled_label,
                    "grad_fn": n.grad_fn,
                    "is_leaf": n.is_leaf,
                    "value": _plain(n.value),
                    "grad": _plain(n.grad),
                    "kind": n.kind,
                    "name": n.name,
                    "ref": n.ref,  # the short name formulas and the other views use (n7)
                    "shape": list(n.shape),
                    "saves": n.saves,
                    "freed": n.freed,
                    "output": n.output,
                    "highlighted": n.highlighted,
                    "blamed": n.blamed,
                    **({"grad_parts": _plain(n.grad_parts)} if n.grad_parts else {}),
                    **({"cluster": n.cluster} if n.cluster else {}),
                    **({"scope": n.scope} if n.scope else {}),
                    **({"line": n.line} if n.line else {}),
                    **({"iteration": n.iteration} if n.iteration else {}),
                    **({"count": n.count, "size": n.size} if n.kind == "group" else {}),
                    **({"module": n.module} if n.module else {}),
                    **({"health": node_health(n)} if self.has_point else {}),
                    **({"module": n.module} if n.module else {}),
                }
                for n in self.nodes
            ],
            "edges": [
                {
                    "source": e.source,
                    "target": e.target,
                    "local_grad": _plain(e.local_grad),
                    "input": e.input,
                    "formula": e.formula,
                    "highlighted": e.highlighted,
                }
                for e in self.edges
            ],
            "outputs": self.outputs,
            "hidden": self.hidden,
            **({"hidden_kinds": self.hidden_kinds} if self.hidden else {}),
            "notes": self.notes,
            "groups": [{k: v for k, v in g.items() if k != "roots"} for g in self.groups],
            **({"clusters": self.clusters} if self.clusters else {}),
            **({"depth": self.depth, "folded": self.folded} if self.depth is not None else {}),
            **({"modules": module_rows(self)} if self.has_point and module_boxes(self) else {}),
            **({"depth": self.depth, "folded": self.folded} if self.depth is not None else {}),
        }


def _plain(value: Any) -> Any:
    """A value or gradient in JSON: a list (a number) up to ``FULL_LIMIT`` elements, else its statistics."""
    if value is None:
        return None
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, TensorStats):
        return value.to_dict()
    if np.size(value) > FULL_LIMIT:  # (a graph not lightened: a model built by hand)
        return tensor_stats(value).to_dict()
    return np.asarray(value).tolist()


STATS_NOTE = (
    f"values and gradients over {FULL_LIMIT} elements are shown as statistics (shape, dtype, mean, std, min, "
    "max, norm, zeros, nonfinite): --arrays FILE.npz (gc.render.graph(..., arrays=True).save_arrays(FILE)) "
    "writes them whole"
)


def first_four(items: list[str]) -> str:
    """The first four of a list for a note, then how many it leaves unnamed (``a, b, c, d and 5 more``)."""
    more = f" and {len(items) - 4:,} more" if len(items) > 4 else ""
    return ", ".join(items[:4]) + more


def kinds(counts: Counter) -> str:
    """The nodes a note counts, by kind, most first: ``MulBackward0 x84, constant x32 and 3 more``."""
    return first_four([f"{name} x{count:,}" for name, count in counts.most_common()])
