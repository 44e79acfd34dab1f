"""The interactive page: one self-contained HTML file (no network, every script and style inline).

Graphviz lays the graph out and draws it as SVG, so the page looks like the PNG;
the page's own script (``page.js``, package data, read when the page is written)
adds pan and zoom, search, a panel for the clicked node, its paths to the output
and to the leaves, and a step control that plays the forward then the backward pass.
The model goes in as JSON (``model_json``): nodes in evaluation order, edges with
their local derivatives, and ``groups`` (a group: ``{"id", "label", "members", "count",
"collapsed"}``) that the page can expand and collapse.

A graph over ``PAGE_MAX_NODES`` is cut to the nodes nearest the output, the rest counted
in the summary node, as ``--max-nodes`` does: Graphviz could not lay out 10^4 nodes in
time, nor a browser draw them; unless ``--max-nodes`` was given (``Graph.as_built``): then as it is.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any

import numpy as np

from ..errors import printable
from ..stats import FULL_LIMIT
from . import relayout
from .layout import current_limit, drawn
from .model import Edge, Graph, GraphNode
from .summary import find_groups, summarised
from .views import HUMAN, compact_text, grad_text, number, partial, picture, title

PAGE_MAX_NODES = 600  # the most Graphviz lays out in a few seconds, and a browser redraws at once
RAW_LIMIT = FULL_LIMIT  # array elements kept as numbers in the page's JSON; larger values: their statistics


def page(graph: Graph) -> str:
    """The HTML page of ``graph``: its SVG picture, its model as JSON, the script and the style; a
    page whose boxes fold with a new layout (``relayout.wanted``) has the DOT in pieces in its JSON
    and Graphviz in WebAssembly inline, and opens with the boxes marked ``"collapsed"`` folded."""
    base, folds = relayout.opening(graph)
    if relayout.wanted(base, folds):  # (not cut: the page opens folded, and lays out what is unfolded)
        graph, parts = base, relayout.pieces(base, folds)
    else:
        graph, parts = graph if graph.as_built else summarised(graph, PAGE_MAX_NODES), None
    model = model_json(graph)
    if parts is not None and parts["folded"]:
        source = relayout.assemble(parts, graph, set(parts["folded"]))
        svg = _inline_svg(drawn(source, "svg", current_limit(), nodes=graph.drawn_nodes, wanted="html").decode("utf-8"))
    else:
        svg = _inline_svg(picture(graph, "svg", collapse=False, wanted="html").decode("utf-8"))
    if parts is not None:
        model["relayout"] = parts
    outputs = ", ".join(printable(graph.node(i).titled_label) for i in graph.outputs)
    data = json.dumps(model, ensure_ascii=False, allow_nan=False).replace("<", "\\u003c")
    return TEMPLATE.format(
        title=html.escape(f"gradcli graph: {outputs}"),
        heading=html.escape(outputs),
        count=f"{sum(n.kind != 'hidden' for n in graph.nodes):,} nodes",
        style=_asset("page.css"),
        svg=svg,
        data=data,
        graphviz="" if parts is None else GRAPHVIZ.format(script=relayout.graphviz_script()),
        script=_asset("page.js"),
    )


def framed(graph: Graph, height: int = 560) -> str:
    """The page in an ``<iframe srcdoc>``, as a notebook shows it: its script runs apart from the notebook's."""
    return (
        f'<iframe srcdoc="{html.escape(page(graph), quote=True)}" sandbox="allow-scripts" '
        f'style="width: 100%; height: {height}px; border: 1px solid #ddd;" title="gradcli graph"></iframe>'
    )


def _asset(name: str) -> str:
    return resources.files("gradcli.render").joinpath(name).read_text(encoding="utf-8")


def _inline_svg(svg: str) -> str:
    """Graphviz's SVG without its XML prolog, DOCTYPE and comments, sized by the page."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


def model_json(graph: Graph) -> dict[str, Any]:
    """What the page's script reads: the model's JSON (``Graph.to_dict``) with the texts the
    other views show (values, gradients, ``∂y/∂a = b = 2``) and each edge's share of its source's gradient."""
    data = graph.to_dict()
    for node, entry in zip(graph.nodes, data["nodes"]):
        _node_texts(graph, node, entry)
    for edge, entry in zip(graph.edges, data["edges"]):
        known = edge.source != "hidden" and edge.target != "hidden"
        entry["partial"] = printable(partial(graph, edge)) if known and edge.local_grad is not None else None
        entry["part_text"] = _part(graph, edge, number, HUMAN) if known else None
    groups = getattr(graph, "groups", None) or find_groups(graph)  # (a page's cut graph: found again)
    known = {n.id for n in graph.nodes}
    data["groups"] = [
        {k: v for k, v in g.items() if k != "roots"}  # every node is drawn: the page hides the collapsed ones
        for g in groups
        if all(m in known for m in g["members"])
    ]
    if graph.clusters:
        data["clusters"] = _clusters_with_members(graph)
    data["has_point"] = graph.has_point
    return _finite(data)


def _node_texts(graph: Graph, node: GraphNode, entry: dict[str, Any]) -> None:
    """A node's entry with its title, value and gradient as text (a value over ``RAW_LIMIT`` elements
    is already its statistics in the model's JSON)."""
    entry["title"] = printable(title(node)) if node.kind != "hidden" else node.label
    entry["value_text"] = None if node.value is None or not graph.has_point else compact_text(node.value)
    entry["grad_text"] = None if node.grad is None else compact_text(node.grad)
    entry["grad_label"] = None if node.grad is None else printable(grad_text(node))
    entry.pop("grad_parts", None)
    if node.grad_parts and len(node.grad_parts) <= RAW_LIMIT:
        entry["grad_parts"] = [float(np.asarray(p)) for p in node.grad_parts]


def _clusters_with_members(graph: Graph) -> list[dict[str, Any]]:
    """The statements' and calls' boxes: each with the nodes inside it, nested ones too."""
    inside: dict[str, list[str]] = {c["id"]: [] for c in graph.clusters}
    parent = {c["id"]: c["parent"] for c in graph.clusters}
    for node in graph.nodes:
        box = node.cluster
        while box is not None and box in inside:
            inside[box].append(node.id)
            box = parent[box]
    return [dict(c, members=inside[c["id"]]) for c in graph.clusters]


def _part(graph: Graph, edge: Edge, number: Any, digits: int) -> str | None:
    """The target's gradient times the edge's local derivative: what flows back along the edge."""
    grad = graph.node(edge.target).grad
    if edge.local_grad is None or grad is None or np.size(grad) != 1:
        return None
    with np.errstate(all="ignore"):
        return number(np.asarray(grad).reshape(()) * edge.local_grad, digits)


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: they become the strings Python prints."""
    if isinstance(value, float) and not np.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


GRAPHVIZ = """<script id="gradcli-graphviz">
{script}</script>
"""

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="gradcli">
<title>{title}</title>
<style>
{style}
</style>
</head>
<body>
<header id="bar">
  <span class="brand">gradcli</span>
  <span class="heading" title="the output">{heading}</span>
  <span class="count">{count}</span>
  <input id="search" type="search" placeholder="find a node: name, id, expression" autocomplete="off" list="names">
  <datalist id="names"></datalist>
  <span class="steps" role="group" aria-label="play the passes">
    <button id="step-first" title="before the forward pass (Home)">|&#x25C0;</button>
    <button id="step-back" title="one step back (&#x2190;)">&#x25C0;</button>
    <button id="step-play" title="play the forward then the backward pass (space)">&#x25B6; play</button>
    <button id="step-next" title="one step on (&#x2192;)">&#x25B6;</button>
    <button id="step-last" title="the whole picture (End)">&#x25B6;|</button>
    <input id="step-range" type="range" min="0" max="0" value="0" aria-label="step">
  </span>
  <label class="colour" title="colour nodes and boxes by their gradient's health">colour
    <select id="color-by">
      <option value="none">none</option>
      <option value="grad-norm">gradient norm</option>
      <option value="nan">NaN / inf</option>
      <option value="zeros">% zeros</option>
      <option value="ratio">grad / value</option>
    </select></label>
  <button id="fit" title="fit the graph to the window (f)">fit</button>
  <span id="legend"></span>
</header>
<div id="status" aria-live="polite"></div>
<main>
  <div id="canvas">
{svg}
  </div>
  <aside id="panel">
    <div id="details"><p class="hint">Click a node to see its operation, values and local derivatives.
    Drag to pan, scroll to zoom, <kbd>&#x2190;</kbd> <kbd>&#x2192;</kbd> to step through the passes.</p></div>
    <section id="modules-box" hidden><h3>modules <span class="hint">(click a column to sort, a row to open its box)</span></h3>
    <table id="modules"></table></section>
    <div id="groups"></div>
    <div id="notes"></div>
  </aside>
</main>
<script type="application/json" id="gradcli-model">{data}</script>
{graphviz}<script>
{script}
</script>
</body>
</html>
"""
