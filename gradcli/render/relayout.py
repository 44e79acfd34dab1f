"""The page's boxes folded and unfolded with a new layout: the DOT pieces its script assembles.

A page whose boxes fold (a framework's modules, or boxes that start folded) carries, in its JSON,
the DOT of the graph in pieces (``pieces``): each node's statement, each box's cluster attributes
and the statement of the one node it becomes when folded, each edge's attributes. For a set of
folded boxes, ``assemble`` writes the DOT: every node stands for itself or for the outermost folded
box around it; edges between two nodes that stand for themselves keep their own attributes, the
others are merged, one edge per pair, counted. The page's script (``page.js``, ``assemble`` there)
does the same in the browser and lays it out with Graphviz compiled to WebAssembly (``vendor/``);
the page's first picture is this module's, laid out by the ``dot`` program, as the PNG is.

Example: a 12-block model opens with its blocks folded (12 nodes in a column); unfolding one
lays out its 14 nodes in place and pushes the other blocks aside.
"""

from __future__ import annotations

import html
import re
from dataclasses import replace
from importlib import resources
from typing import Any

import numpy as np

from ..errors import printable
from ..stats import TensorStats
from .levels import ALL, box_depths, drawn_count, module_node
from .model import Graph, GraphNode
from .views import (
    EDGE_ATTRIBUTES,
    NODE_ATTRIBUTES,
    box_attributes,
    box_chains,
    compact_text,
    dot_label,
    dot_style,
    drawn_boxes,
    edge_attributes,
    edge_label_key,
    graph_attributes,
    notes_attributes,
)

FOLD_PREFIX = "fold_"  # a folded box's node: fold_<box id>


PAGE_NODES = 40  # nodes the page opens with at most, a window's worth: the deepest depth that draws no more


def opening(graph: Graph) -> tuple[Graph, set[str]]:
    """The graph the page draws and the boxes it opens with folded: a graph folded by ``--depth``
    (``levels.folded``) is drawn whole, its boxes deeper than the depth folded, so each unfolds; a
    model without a depth opens at the deepest depth that draws at most ``PAGE_NODES`` nodes (depth 1
    at least: a 48-block model opens as its 48 blocks); other graphs with the boxes marked ``"collapsed"``."""
    base = graph.unfolded if graph.folded and graph.unfolded is not None else graph
    depths = box_depths(base)
    if graph.depth == ALL:
        return base, set()
    if isinstance(graph.depth, int):
        return base, {b for b, d in depths.items() if d > graph.depth}
    if not any("path" in c or "class" in c for c in base.clusters):
        return base, {c["id"] for c in base.clusters if c.get("collapsed")}
    depth = next((d for d in range(max(depths.values()), 0, -1) if drawn_count(base, d) <= PAGE_NODES), 1)
    return base, {b for b, d in depths.items() if d > depth}


def wanted(graph: Graph, folds: set[str] | None = None) -> bool:
    """Whether the page folds its boxes with a new layout: it has boxes drawn and they are a
    framework's modules or some start folded (a program's few statement boxes fold in place, as cards)."""
    boxes, box_of = drawn_boxes(graph, collapse=False)
    by_id, _ = box_chains(graph, boxes, box_of)
    if not by_id and not _loose_groups(graph, boxes):
        return False
    return any(n.scope for n in graph.nodes) or bool(folds) or any(b.get("collapsed") for b in boxes)


def pieces(graph: Graph, folds: set[str] | None = None) -> dict[str, Any]:
    """The DOT of ``graph`` in pieces, for ``assemble`` here and in the page: ``head``, ``tail``,
    ``nodes`` (id -> statement), ``boxes`` (id -> ``cluster`` attributes or None for a group
    without a box, ``node`` the folded statement, ``key`` its node's id), ``chains`` (node id ->
    the foldable boxes around it, outermost first), ``edges`` (attributes, in the model's order),
    ``folded`` (the boxes that start folded: ``folds``, else those marked ``"collapsed"``)."""
    boxes, box_of = drawn_boxes(graph, collapse=False)
    by_id, chains = box_chains(graph, boxes, box_of)
    chains = {k: list(v) for k, v in chains.items()}
    members: dict[str, list[str]] = {b: [] for b in by_id}
    for node_id, around in chains.items():
        for b in around:
            members[b].append(node_id)
    loose = _loose_groups(graph, boxes)
    for g in loose:  # a group across boxes: its nodes fold into one, which sits where they all do
        common = _common_prefix([chains[m] for m in g["members"]])
        for m in g["members"]:
            chains[m].insert(len(common), g["id"])
        members[g["id"]] = list(g["members"])
    found: dict[str, Any] = {}
    for box in list(by_id.values()) + [dict(g, kind="group", parent=None) for g in loose]:
        key = FOLD_PREFIX + box["id"]
        drawn = box["id"] in by_id
        found[box["id"]] = {
            "key": key,
            "cluster": _attr_line(box_attributes(box)) if drawn else None,
            "node": _statement(key, *_fold_node(graph, box, members[box["id"]])),
            "folded": box["id"] in folds if folds is not None else bool(box.get("collapsed")),
        }
    scratch = _digraph()
    scratch.attr(**notes_attributes(graph)) if graph.notes else None
    tail = "".join(scratch.body) + "}\n"
    label_key = edge_label_key(graph)
    return {
        "head": head(graph),
        "head_folded": head(replace(graph, folded=["(any)"])),  # (spaced as a picture of folded boxes is)
        "tail": tail,
        "nodes": {n.id: _statement(n.id, dot_label(graph, n), dot_style(n)) for n in graph.nodes},
        "boxes": found,
        "chains": {k: v for k, v in chains.items() if v},
        "edges": [_edge_line(edge_attributes(graph, e, label_key)) for e in graph.edges],
        "folded": [b for b, entry in found.items() if entry["folded"]],
    }


def _digraph(graph: Graph | None = None) -> Any:
    import graphviz  # lazy: start-up, only a page with boxes to fold needs it here

    if graph is None:
        return graphviz.Digraph("gradcli")
    return graphviz.Digraph("gradcli", graph_attr=graph_attributes(graph), node_attr=NODE_ATTRIBUTES,
                            edge_attr=EDGE_ATTRIBUTES)  # fmt: skip


def head(graph: Graph) -> str:
    """``digraph gradcli {`` and the graph's, nodes' and edges' default attributes."""
    return _digraph(graph).source[: -len("}\n")]


def _statement(name: str, label: str, attrs: dict[str, str]) -> str:
    """A node's DOT statement as Graphviz's Python package writes it: ``n3 [label=<...> shape=box]``."""
    scratch = _digraph()
    scratch.node(name, label, **attrs)
    return scratch.body[-1].strip()


def _attr_line(attrs: dict[str, str]) -> str:
    """``label=<...> labeljust=l ...``: a cluster's attributes, one line."""
    scratch = _digraph()
    scratch.attr(**attrs)
    return scratch.body[-1].strip()


def _edge_line(attrs: dict[str, str]) -> str:
    """An edge's attribute list (`` [label=" ∂y/∂a = 2 " fontcolor="#1f4e96"]``), or ''."""
    scratch = _digraph()
    scratch.edge("a", "b", **attrs)
    return scratch.body[-1].rstrip("\n")[len("\ta -> b") :]


def _loose_groups(graph: Graph, boxes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Groups of repeated structure that have no box of their own (their nodes in several)."""
    boxed = {b["id"] for b in boxes}
    known = {n.id for n in graph.nodes}
    return [g for g in graph.groups if g["id"] not in boxed and g["members"] and all(m in known for m in g["members"])]


def _common_prefix(lists: list[list[str]]) -> list[str]:
    first = lists[0] if lists else []
    k = 0
    while k < len(first) and all(len(x) > k and x[k] == first[k] for x in lists):
        k += 1
    return first[:k]


_PATH_CLASS = re.compile(r"^(?P<path>.*?) \((?P<cls>[^()]*)\)$")


def path_and_class(box: dict[str, Any]) -> tuple[str, str | None]:
    """A module box's path and class: its own keys, else read from its label ``net.h.0 (Block)``."""
    if box.get("path"):
        return box["path"], box.get("class")
    found = _PATH_CLASS.match(box.get("label", ""))
    return (found["path"], found["cls"]) if found else (box.get("label", box["id"]), None)


def _fold_node(graph: Graph, box: dict[str, Any], members: list[str]) -> tuple[str, dict[str, str]]:
    """The label and style of the one node a folded box becomes: its name and class, what it holds,
    its output's shape, value and gradient."""

    def esc(text: str) -> str:
        return html.escape(printable(text))

    if box["kind"] == "group":
        count = box.get("count") or len(members)
        lines = [f"<b>{esc(box['label'])} ×{count:,}</b>"]
        style = {"shape": "box3d", "style": "filled", "fillcolor": "#fff1d6", "color": "#b07a1a"}
    else:  # a module: the node levels.module_node makes of it, drawn as a picture folded to a depth draws it
        node = module_node(graph, box["id"], members)
        return dot_label(graph, node), dot_style(node)
    inside = set(members)
    ops = sum(graph.node(m).kind == "op" for m in members)
    params = [graph.node(m) for m in members if graph.node(m).kind == "variable" and graph.node(m).scope]
    size = sum(int(np.prod(p.shape)) for p in params)
    facts = [f"{ops:,} op{'s' if ops != 1 else ''}"] + ([f"{size:,} params"] if params else [])
    out = _output(graph, members, inside)
    if out is not None:
        facts.append(f"out {esc(_shape(out.shape))}")
        if out.grad is not None:
            facts.append(f'<font color="#1f4e96">grad {esc(_norm_text(out))}</font>')
    lines.append('<font color="#555555" point-size="9">▸ ' + " · ".join(facts) + "</font>")
    return "<" + "<br/>".join(lines) + ">", style


def _output(graph: Graph, members: list[str], inside: set[str]) -> GraphNode | None:
    """The box's output: its last node used outside it (or an output of the graph)."""
    for m in reversed(members):
        node = graph.node(m)
        if node.kind == "op" and (node.output or any(e.target not in inside for e in graph.consumers_of(m))):
            return node
    return None


def _shape(shape: tuple[int, ...]) -> str:
    return "scalar" if not shape else "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _norm_text(node: GraphNode) -> str:
    grad = node.grad
    if isinstance(grad, TensorStats):
        return f"norm {compact_text(grad.norm, 4)}"
    with np.errstate(all="ignore"):
        return f"norm {compact_text(float(np.linalg.norm(np.asarray(grad, dtype=float).ravel())), 4)}"


def assemble(parts: dict[str, Any], graph: Graph, folded: set[str]) -> str:
    """The DOT of ``graph`` (its ``pieces``: ``parts``) with the boxes ``folded`` folded; page.js's
    ``assemble`` writes the same text."""
    root: dict[str, Any] = {"items": [], "kids": {}}
    rep: dict[str, str] = {}
    for node_id in (n.id for n in graph.nodes):
        chain = parts["chains"].get(node_id, [])
        cut = next((k for k, b in enumerate(chain) if b in folded), None)
        where = chain if cut is None else chain[:cut]
        here = root
        for b in where:
            if parts["boxes"][b]["cluster"] is None:
                continue  # (a group without a box: nothing drawn around its nodes)
            if b not in here["kids"]:
                here["kids"][b] = {"items": [], "kids": {}}
                here["items"].append(("box", b))
            here = here["kids"][b]
        if cut is None:
            rep[node_id] = node_id
            here["items"].append(("node", parts["nodes"][node_id]))
        else:
            box = parts["boxes"][chain[cut]]
            if box["key"] not in here.get("seen", ()):
                here.setdefault("seen", set()).add(box["key"])
                here["items"].append(("node", box["node"]))
            rep[node_id] = box["key"]
    lines = [parts["head_folded"] if any(k != v for k, v in rep.items()) else parts["head"]]
    _write(root, 1, parts, lines)
    _write_edges(parts, [(e.source, e.target) for e in graph.edges], rep, lines)
    lines.append(parts["tail"])
    return "".join(lines)


def _write(here: dict[str, Any], depth: int, parts: dict[str, Any], lines: list[str]) -> None:
    tabs = "\t" * depth
    for kind, item in here["items"]:
        if kind == "node":
            lines.append(f"{tabs}{item}\n")
            continue
        lines.append(f"{tabs}subgraph cluster_{item} {{\n{tabs}\t{parts['boxes'][item]['cluster']}\n")
        _write(here["kids"][item], depth + 1, parts, lines)
        lines.append(f"{tabs}}}\n")


def _write_edges(parts: dict[str, Any], ends: list[tuple[str, str]], rep: dict[str, str], lines: list[str]) -> None:
    """Edges between nodes drawn as themselves with their own attributes; the others one per pair, counted."""
    merged: dict[tuple[str, str], int] = {}
    out: list[Any] = []
    for edge, attrs in zip(ends, parts["edges"]):
        source, target = rep[edge[0]], rep[edge[1]]
        if source == edge[0] and target == edge[1]:
            out.append(f"\t{source} -> {target}{attrs}\n")
        elif source != target:
            if (source, target) not in merged:
                out.append((source, target))
                merged[(source, target)] = 0
            merged[(source, target)] += 1
    for item in out:
        lines.append(item if isinstance(item, str) else f"\t{item[0]} -> {item[1]}{merged_edge(merged[item])}\n")


def merged_edge(count: int) -> str:
    """The attributes of an edge standing for ``count`` edges into or out of folded boxes (its count
    an ``xlabel``, placed after the layout: a label would be a rank of its own, a chain of folded
    blocks twice as tall)."""
    return f' [fontcolor="#996600" penwidth=1.6 xlabel=" ×{count:,} "]' if count > 1 else ""


def graphviz_script() -> str:
    """The vendored Graphviz in WebAssembly as a plain script: its ``export{...}`` becomes one
    global, ``gradcliGraphviz`` (the class with ``load()`` and ``layout(dot, "svg", "dot")``)."""
    text = resources.files("gradcli.render").joinpath("vendor/graphviz.js").read_text(encoding="utf-8")
    found = re.search(r"export\{([^}]*)\};?\s*(//# sourceMappingURL=\S*\s*)?$", text)
    if found is None:
        raise RuntimeError("vendor/graphviz.js does not end with the export statement page.py expects")
    names = dict(reversed(part.strip().split(" as ")) for part in found[1].split(","))
    return text[: found.start()] + f"globalThis.gradcliGraphviz = {names['Graphviz']};\n"
