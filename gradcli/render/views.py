"""Views of the graph model: text lines, a tree, DOT (and pictures through Graphviz)."""

from __future__ import annotations

import html
import re
from typing import Any

import numpy as np

from ..errors import printable
from ..stats import TensorStats
from ..text import array, percent
from .health import table_lines
from .layout import bitmap, current_limit, drawn
from .levels import candidates, legible, module_facts
from .model import Edge, Graph, GraphNode
from .paint import NO_PAINT, painter
from .summary import SUMMARY_NODES, collapsed, summarised

# --- shared pieces ----------------------------------------------------------------------------------


def number(value: Any, digits: int | None = None) -> str:
    return array(value, digits=digits)


HUMAN = 6  # significant digits in the tree and the picture (text and JSON keep every digit)


def title(node: GraphNode) -> str:
    """``a = x + w``, ``x + w``, ``x`` or ``1``: what the node is, as the program says it."""
    if node.kind == "op" and node.label != node.ref:
        return f"{node.ref} = {node.label}"  # its name (or id) first: formulas refer to it so
    return node.name or node.label


def heading(graph: Graph, node: GraphNode) -> str:
    """The node's title, or with ``--compact`` its name (or id) alone."""
    if graph.compact and node.kind == "op":
        return node.ref
    return title(node)


PARTS_SHOWN = 8  # contributions written out in a human view (a label must stay short for dot)
PARTS_LEAD = 3  # beyond PARTS_SHOWN: the first few, then how many there are in all


def grad_text(node: GraphNode, digits: int | None = HUMAN, with_parts: bool = True) -> str:
    """``5 = 2 + 3``; with many contributions ``49.58 = 0.22 + 0.31 + 0.4 + … (27 terms)``: the
    total first (the gradient itself), every term written or the count of all of them, never a
    sum that leaves terms out without saying so."""
    if isinstance(node.grad, TensorStats):
        return stats_text(node.grad, digits)
    text = number(node.grad, digits)
    if node.grad_parts and with_parts:
        parts = node.grad_parts
        if len(parts) <= PARTS_SHOWN:
            text += " = " + _signed_sum(parts, digits)
        else:
            text += " = " + _signed_sum(parts[:PARTS_LEAD], digits) + f" + … ({len(parts):,} terms)"
    return text


def _signed_sum(parts: list[Any], digits: int | None) -> str:
    """``2 + 3``, ``0.68 - 0.37 + 0.8``."""
    text = ""
    for i, part in enumerate(parts):
        v = float(np.asarray(part))
        if i == 0:
            text = number(v, digits)
        else:
            text += (" - " if v < 0 else " + ") + number(abs(v), digits)
    return text


def partial(graph: Graph, edge: Edge, digits: int | None = HUMAN) -> str:
    """``∂y/∂a = b = 2``: the local derivative along an edge, formula and value."""
    target, source = graph.node(edge.target), graph.node(edge.source)
    text = f"∂{target.ref}/∂{source.ref}"
    if edge.formula and edge.formula != number(edge.local_grad) and not graph.compact:
        text += f" = {edge.formula}"
    if edge.local_grad is not None:
        text += f" = {number(edge.local_grad, digits)}"
    return text


# --- text: one line a node, in evaluation order --------------------------------------------------------


def text(graph: Graph, digits: int | None = None) -> str:
    """``a = add(x, w)  # AddBackward0  value=3  grad=2``, a line a node, for diffs and grep."""
    lines = []
    for node in graph.nodes:
        if node.kind == "constant" and not node.output:
            continue
        if node.kind == "hidden":
            lines.append(f"# {node.label}")
            continue
        name = node.key if node.kind != "constant" else node.id
        if node.kind in ("op", "group", "module"):
            args = ", ".join(_ref(graph, e) for e in graph.inputs_of(node.id))
            body = node.label if node.op == "item" else f"{node.op}({args})"  # (an output of several: n1[1])
        else:
            body = node.kind
        facts = [node.grad_fn] if node.grad_fn else []
        if node.kind == "group":  # repeated structure drawn as one node: its value the total, its grad each one's
            facts.append(f"{node.label} x{node.count:,} ({node.size:,} nodes)")
        if node.kind == "module":  # a folded box (--depth): what it is and holds
            facts.append(f"{node.label}: {module_facts(node)}")
        if node.shape:
            facts.append(f"shape={node.shape}")
        if node.value is not None and graph.has_point:
            facts.append(f"value={compact_text(node.value, digits)}")
        if node.grad is not None:
            facts.append(
                f"grad={compact_text(node.grad, digits)}"
                + (f" ({_signed_sum(node.grad_parts, digits)})" if node.grad_parts else "")
            )
        if node.freed:
            facts.append("saved values freed")
        if node.output:
            facts.append("output")
        if node.highlighted:
            facts.append("highlighted")
        if node.blamed:
            facts.append("BLAMED")
        lines.append(f"{name} = {body}" + (f"  # {'  '.join(facts)}" if facts else ""))
    lines += [f"# {note}" for note in graph.notes] + [f"# {line}" for line in table_lines(graph)]  # (--color-by)
    return "\n".join(map(printable, lines)) + "\n"


def _ref(graph: Graph, edge: Edge) -> str:
    if edge.source == "hidden":
        return "..."
    return graph.node(edge.source).key


def compact_text(value: Any, digits: int | None = None, most: int = 8) -> str:
    """A value in a line: its numbers up to ``most`` elements, else their count and mean; a large
    tensor's statistics (``stats_text``), briefly where ``most`` is 2 or less (a dense picture)."""
    if isinstance(value, TensorStats):
        return stats_text(value, digits, brief=most <= 2)
    a = np.asarray(value)
    return number(a, digits) if a.size <= most else f"[{a.size} values, mean {number(np.mean(a), digits)}]"


def stats_text(stats: TensorStats, digits: int | None = None, brief: bool = False) -> str:
    """``[(64, 3, 7, 7) float32: mean 0.0012, std 0.05, min -0.2, max 0.21, norm 3.1, 12% zeros]``; NaN
    and infinities counted when there are some; ``brief``: mean and std (and those counts) alone."""
    shape = "(" + ", ".join(map(str, stats.shape)) + ("," if len(stats.shape) == 1 else "") + ")"
    if stats.mean is None:
        return f"[{shape} {stats.dtype}: empty]"
    facts = [f"mean {number(stats.mean, digits)}", f"std {number(stats.std, digits)}"]
    if not brief:
        facts += [f"min {number(stats.min, digits)}", f"max {number(stats.max, digits)}"]
        facts.append(f"norm {number(stats.norm, digits)}")
        if stats.zeros:
            facts.append(f"{percent(stats.zeros)} zeros")
    if stats.nan:
        facts.append(f"{stats.nan:,} NaN")
    if stats.inf:
        facts.append(f"{stats.inf:,} inf")
    return f"[{shape} {stats.dtype}: {', '.join(facts)}]"


PICTURE_VALUES = 4  # array elements written in a picture's node (more: their count and mean)


# --- tree: the output at the root, inputs below ------------------------------------------------------------


def tree_lines(graph: Graph, digits: int | None = HUMAN) -> list[tuple[int, str, str]]:
    """(depth, node line, edge text) from each output down; a node seen before is not repeated.
    Numbers with ``digits`` significant digits (None: every digit)."""
    rows: list[tuple[int, str, str]] = []
    seen: set[str] = set()
    stack: list[tuple[str, int, Edge | None]] = [(node_id, 0, None) for node_id in reversed(graph.outputs)]
    while stack:
        node_id, depth, edge = stack.pop()
        node = graph.node(node_id)
        edge_text = partial(graph, edge, digits) if edge is not None and edge.local_grad is not None else ""
        if node_id in seen and node.kind != "constant":
            rows.append((depth, f"{heading(graph, node)}  (shown above)", edge_text))
            continue
        seen.add(node_id)
        rows.append((depth, _describe(graph, node, digits), edge_text))
        for e in reversed(graph.inputs_of(node_id)):
            stack.append((e.source, depth + 1, e))
    return rows


def _describe(graph: Graph, node: GraphNode, digits: int | None = HUMAN) -> str:
    parts = [heading(graph, node)]
    if node.kind == "op":
        parts.append(f"[{node.grad_fn or node.op}]")
    elif node.kind == "variable":
        parts.append("(variable)")
    elif node.kind == "constant":
        parts.append("(constant)")
    elif node.kind == "group":
        parts.append(f"×{node.count:,} (a group of {node.size:,} nodes; value: their total)")
    elif node.kind == "module":
        parts.append(f"[{node.op}: {module_facts(node)}]")  # (its heading is its path)
    if node.shape:
        parts.append(f"shape {node.shape}")
    if graph.has_point and node.value is not None and node.kind != "constant":
        parts.append(f"value {compact_text(node.value, digits)}")
    if node.grad is not None:
        parts.append(f"grad {grad_text(node, digits, with_parts=not graph.compact)}")
    if node.freed:
        parts.append("saved values freed")
    if node.highlighted:  # (--highlight: on the paths from the output to the node named)
        parts.append("<- highlighted")
    if node.blamed:
        parts.append("<- BLAMED")
    return "  ".join(parts)


def tree_plain(graph: Graph, digits: int | None = HUMAN) -> str:
    """The tree in plain text, with guide lines (``├──``, ``│``, ``└──``)."""
    rows = tree_lines(graph, digits)
    lasts = _last_children(rows)
    out = []
    # guides[d]: the guide lines of the ancestors at depths 1..d ("│   " where more children are to come),
    # each built from the one above it: a 6,000-deep chain's rows take one copy each, not a join of 6,000
    guides: list[str] = [""]
    for i, (depth, line, edge_text) in enumerate(rows):
        last = lasts[i]
        if depth == 0:
            prefix = ""
            del guides[1:]
        else:
            del guides[depth:]
            prefix = guides[depth - 1] + ("└── " if last else "├── ")
            guides.append(guides[depth - 1] + ("    " if last else "│   "))
        out.append(prefix + line + (f"   · {edge_text}" if edge_text else ""))
    out += [f"({note})" for note in graph.notes] + table_lines(graph)  # (--color-by: the module boxes' health)
    return "\n".join(map(printable, out)) + "\n"


def _last_children(rows: list[tuple[int, str, str]]) -> list[bool]:
    """For each row: no later sibling before the parent's subtree ends (one pass from the end)."""
    lasts = [True] * len(rows)
    sibling_below: list[bool] = []  # per depth: a row of that depth follows, with none shallower between
    for i in range(len(rows) - 1, -1, -1):
        depth = rows[i][0]
        del sibling_below[depth + 1 :]
        while len(sibling_below) <= depth:
            sibling_below.append(False)
        lasts[i] = not sibling_below[depth]
        sibling_below[depth] = True
    return lasts


def tree_rich(graph: Graph, digits: int | None = HUMAN) -> Any:
    from rich.text import Text
    from rich.tree import Tree

    rows = tree_lines(graph, digits)
    roots: list[Any] = []
    parents: list[Any] = []
    for depth, line, edge_text in rows:
        label = Text(printable(line), style="bold" if depth == 0 else "")
        if "(shown above)" in line:
            label.stylize("dim")
        if edge_text:
            label.append(f"   {printable(edge_text)}", style="cyan")
        if depth == 0:
            node = Tree(label, guide_style="dim")
            roots.append(node)
            parents = [node]
        else:
            del parents[depth:]
            node = parents[-1].add(label)
            parents.append(node)
    return roots


# --- DOT and pictures ------------------------------------------------------------------------------------------------

COLOURS = {
    "variable": "#cfe8ff",
    "constant": "#f2f2f2",
    "op": "#fffbe6",
    "output": "#d8f5d0",
    "highlight": "#d62728",
    "blamed": "#ffb3b3",
}


def dot(graph: Graph, collapse: bool = True) -> str:
    """Graphviz DOT source: leaves as ellipses, constants as plain text, operations as boxes.
    Over ``summary.SUMMARY_NODES`` nodes, each group of repeated structure is drawn as one node
    (unless ``collapse`` is False: the page draws every node and collapses groups itself), and
    over ``PICTURE_MAX_NODES`` it is cut; a graph built with ``--max-nodes`` given (``as_built``) is
    drawn as it is: every node itself when that covers the graph."""
    import graphviz

    summarise = collapse and not graph.as_built
    paint = painter(graph)  # --color-by: its range is the whole graph's
    if summarise and graph.depth is None:  # a model without --depth: its boxes folded to a depth it can show
        graph = next(candidates(graph, PICTURE_MAX_NODES))
    if summarise and len(graph.nodes) > SUMMARY_NODES and graph.groups:
        graph = collapsed(graph, graph.groups)
    if summarise and len(graph.nodes) > PICTURE_MAX_NODES:  # a depth cut, what it hides counted
        graph = summarised(graph, PICTURE_MAX_NODES, "a picture")

    g = graphviz.Digraph("gradcli", graph_attr=graph_attributes(graph), node_attr=NODE_ATTRIBUTES,
                         edge_attr=EDGE_ATTRIBUTES)  # fmt: skip
    boxes, box_of = drawn_boxes(graph, collapse)
    _emit_nodes(g, graph, None, boxes, box_of, paint)
    label_key = edge_label_key(graph)
    for edge in graph.edges:
        g.edge(edge.source, edge.target, **edge_attributes(graph, edge, label_key))
    paint.legend(g)
    if graph.notes:
        g.attr(**notes_attributes(graph))
    return g.source


NODE_ATTRIBUTES = {"fontname": "Helvetica", "fontsize": "11"}
EDGE_ATTRIBUTES = {"fontname": "Helvetica", "fontsize": "10", "color": "#555555"}


def graph_attributes(graph: Graph) -> dict[str, str]:
    """The DOT graph's own attributes: direction, font, spacing, the layout's limits."""
    return {"rankdir": graph.rankdir or rankdir(graph), "fontname": "Helvetica", "bgcolor": "white",
            "nodesep": "0.35", "ranksep": "0.6", **_layout_limits(graph), **_dense_spacing(graph)}  # fmt: skip


def notes_attributes(graph: Graph) -> dict[str, str]:
    """The graph's notes as its label, at the bottom."""
    text = html.escape("\n".join(map(printable, graph.notes)))
    return {"label": text, "labelloc": "b", "fontsize": "10", "fontcolor": "#666666"}


def edge_label_key(graph: Graph) -> str:
    """A large picture's edge labels are placed after the layout (xlabel): as labels, each would be a
    rank of its own to lay out, three times the time at 300 nodes."""
    return "xlabel" if len(graph.nodes) > LARGE_PICTURE else "label"


def edge_attributes(graph: Graph, edge: Edge, label_key: str) -> dict[str, str]:
    """An edge's DOT attributes: its count (``×20``) or its local derivative, its highlight."""
    attrs: dict[str, str] = {}
    if edge.count > 1:
        attrs.update(label=f" ×{edge.count:,} ", fontcolor="#996600", penwidth="1.6")
        if graph.position(edge.target) <= graph.position(
            edge.source
        ):  # a loop edge: back to the body's start (or to itself, a folded cell)
            attrs.update(constraint="false", style="dashed", color="#b07a1a")
    elif (
        edge.local_grad is not None
        and not _dense(graph)
        and "group"
        not in (
            graph.node(edge.source).kind,
            graph.node(edge.target).kind,
        )
    ):
        attrs[label_key] = " " + printable(partial(graph, edge)) + " "
        attrs["fontcolor"] = "#1f4e96"
    if edge.highlighted:
        attrs.update(color=COLOURS["highlight"], penwidth="2.6")
    return attrs


def drawn_boxes(graph: Graph, collapse: bool) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The clusters drawn: statements and Python calls (``graph.clusters``), and on the page
    (``collapse`` False) each group of repeated structure whose members share one, as a box the
    page folds and unfolds; with each node's innermost box."""
    boxes = [dict(c, kind="cluster") for c in graph.clusters]
    box_of = {n.id: n.cluster for n in graph.nodes if n.cluster}
    if not collapse:
        for g in graph.groups:
            if g.get("cluster"):  # (a group that is a box already: a loop's, a repeated module's)
                continue
            members = [m for m in g["members"] if m in graph._by_id]
            around = {box_of.get(m) for m in members}
            if not members or len(members) != len(g["members"]) or len(around) != 1:
                continue  # (a group across statements: its nodes stay in theirs, folded without a box)
            boxes.append(
                {"id": g["id"], "label": f"{g['label']} ×{g['count']:,}", "parent": around.pop(), "kind": "group"}
            )
            for m in members:
                box_of[m] = g["id"]
    return boxes, box_of


def box_chains(
    graph: Graph, boxes: list[dict[str, Any]], box_of: dict[str, str]
) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The boxes drawn, by id, and the drawn boxes around each node, outermost first. A box of one
    operation is not drawn (the node's own title says the statement), but for a framework's module
    or call (a node with a ``scope``: ``net.1 (Softplus)`` running one aten op), which only its box names."""
    parent = {b["id"]: b["parent"] for b in boxes}
    size: dict[str | None, int] = {}
    kinds = {n.id: n.kind for n in graph.nodes}
    for node_id, inner in box_of.items():
        if kinds.get(node_id) not in ("op", "group", "module"):
            continue  # (a constant beside its operation does not make a box worth drawing)
        while inner is not None:
            size[inner] = size.get(inner, 0) + 1
            inner = parent.get(inner)
    least = 1 if any(n.scope for n in graph.nodes) else 2
    by_id = {b["id"]: b for b in boxes if size.get(b["id"], 0) >= least}

    def drawn(inner: str | None) -> str | None:  # the innermost drawn box around
        while inner is not None and inner not in by_id:
            inner = parent.get(inner)
        return inner

    def chain(node_id: str) -> list[str]:  # the drawn boxes around a node, outermost first
        found, inner = [], drawn(box_of.get(node_id))
        while inner is not None:
            found.append(inner)
            inner = drawn(parent.get(inner))
        return found[::-1]

    return by_id, {n.id: chain(n.id) for n in graph.nodes}


def box_attributes(box: dict[str, Any]) -> dict[str, str]:
    """A drawn box's DOT cluster attributes: its label top left; a group's dashed and amber."""
    text = _box_label(box["label"])
    colour = "#b07a1a" if box["kind"] == "group" else "#6a7fa8"
    return {"label": f'<<font color="{colour}">{text}</font>>', "labeljust": "l", "fontsize": "11",
            "color": colour, "style": "rounded,dashed" if box["kind"] == "group" else "rounded"}  # fmt: skip


def _emit_nodes(g: Any, graph: Graph, box: str | None, boxes: list[dict[str, Any]], box_of: dict[str, str],
                paint: Any = NO_PAINT) -> None:  # fmt: skip
    """The nodes in ``box`` (None: outside every box) and the boxes inside it, as nested DOT
    clusters, in the nodes' order (a box where its first node comes), as the page does."""
    by_id, chains = box_chains(graph, boxes, box_of)

    def emit(target: Any, here: str | None, depth: int) -> None:
        done: set[str] = set()
        for node in graph.nodes if here is None else inside[here]:
            around = chains[node.id]
            if around[:depth] != ([] if here is None else chains_of[here]):
                continue
            if len(around) == depth:
                target.node(node.id, dot_label(graph, node), **{**dot_style(node), **paint.node(node)})
            elif around[depth] not in done:
                inner = by_id[around[depth]]
                done.add(inner["id"])
                with target.subgraph(name=f"cluster_{inner['id']}") as sub:
                    sub.attr(**box_attributes(inner))
                    sub.attr(**paint.box(inner))
                    emit(sub, inner["id"], depth + 1)

    chains_of: dict[str, list[str]] = {}
    inside: dict[str, list[GraphNode]] = {}  # per box, the nodes within it in order (not every node per box)
    for node in graph.nodes:
        around = chains[node.id]
        for k in range(len(around)):
            chains_of.setdefault(around[k], around[: k + 1])
        for inner in dict.fromkeys(around):
            inside.setdefault(inner, []).append(node)
    emit(g, box, 0)


def _box_label(label: str) -> str:
    """A box's label as DOT's HTML: a label of several lines (a repeat's statistics) left-aligned."""
    lines = [html.escape(printable(line)) for line in label.split("\n")]
    return "".join(f'{line}<br align="left"/>' for line in lines) if len(lines) > 1 else lines[0]


DENSE_PICTURE = 200  # nodes: beyond, a picture is drawn dense (see _dense)


def _dense(graph: Graph) -> bool:
    """Whether ``graph`` is drawn dense: each node in two lines (its title; value and gradient), no
    edge labels (the page, the tree and JSON have them), ranks closer: a picture of 300 nodes
    then fits 30 MP at a size where its text can be read, rather than drawn at half its size."""
    return len(graph.nodes) > DENSE_PICTURE


def _dense_spacing(graph: Graph) -> dict[str, str]:
    return (
        {"nodesep": "0.2", "ranksep": "0.3"} if _dense(graph) or graph.folded else {}
    )  # (a model's folded boxes: a long chain)


LARGE_PICTURE = 100  # nodes: beyond, edges are drawn as straight lines
PICTURE_MAX_NODES = 300  # nodes drawn, groups collapsed: beyond, those nearest the output (dot lays 300 out in ~7 s)


def rankdir(graph: Graph) -> str:
    """``TB`` or ``LR``, whichever gives the picture the shape nearer a square: a node's rank is
    its longest path from a leaf; each rank's nodes stand side by side (TB) or one above the
    other (LR), sized from their labels, and edge labels add a row (TB) or a column (LR) between
    ranks. Deep narrow graphs go top to bottom, wide shallow ones left to right."""
    rank: dict[str, int] = {}
    for node in graph.nodes:  # evaluation order: inputs first
        rank[node.id] = 1 + max((rank.get(e.source, 0) for e in graph.inputs_of(node.id)), default=-1)
    for node in graph.nodes:  # dot keeps edges short: a leaf sits just before its first consumer
        if not graph.inputs_of(node.id) and graph.consumers_of(node.id):
            rank[node.id] = min(rank[e.target] for e in graph.consumers_of(node.id)) - 1
    widths: dict[int, float] = {}
    heights: dict[int, float] = {}
    tallest: dict[int, float] = {}
    widest: dict[int, float] = {}
    for node in graph.nodes:
        w, h = _label_size(graph, node)
        r = rank[node.id]
        widths[r] = widths.get(r, 0.0) + w + 25
        heights[r] = heights.get(r, 0.0) + h + 25
        tallest[r] = max(tallest.get(r, 0.0), h)
        widest[r] = max(widest.get(r, 0.0), w)
    label = max((len(partial(graph, e)) * 6.0 for e in graph.edges if e.local_grad is not None), default=0.0)
    gap_tb = 58 + (58 + 16 if label else 0)  # an edge label is a rank of its own
    gap_lr = 58 + (58 + label if label else 0)
    tb = (max(widths.values(), default=1.0), sum(tallest.values()) + gap_tb * len(tallest))
    lr = (sum(widest.values()) + gap_lr * len(widest), max(heights.values(), default=1.0))

    def skew(size: tuple[float, float]) -> float:
        w, h = max(size[0], 1.0), max(size[1], 1.0)
        return max(w / h, h / w)

    return "TB" if skew(tb) < skew(lr) else "LR"


def _label_size(graph: Graph, node: GraphNode) -> tuple[float, float]:
    """Roughly the pixels a node's label takes (11 pt Helvetica, ~6.5 px a character)."""
    lines = [re.sub(r"<[^>]+>", "", line) for line in dot_label(graph, node)[1:-1].split("<br/>")]
    width = max((len(html.unescape(line)) for line in lines), default=1) * 6.5 + 20
    if node.kind == "variable":
        width *= 1.3  # an ellipse around the text
    return width, len(lines) * 15.0 + 10


def _layout_limits(graph: Graph) -> dict[str, str]:
    """Attributes that keep dot fast. A variable used all along a chain (``x`` in a sum of powers,
    a Horner scheme) has edges that skip hundreds of ranks; dot makes each skipped rank a virtual
    node (twice, as edge labels double the ranks), so 200 nodes become ~18,000, and without a
    limit its network simplex placing them ran for minutes. ``nslimit``/``nslimit1`` stop it after
    2 passes per node (small graphs converge before: the same picture); routing splines around
    those virtual nodes then dominates, so large graphs get straight edges."""
    limits = {"nslimit": "2", "nslimit1": "2"}
    if len(graph.nodes) > LARGE_PICTURE:
        limits["splines"] = "line"
    return limits


def dot_style(node: GraphNode) -> dict[str, str]:
    if node.kind == "variable":
        style = {"shape": "ellipse", "style": "filled", "fillcolor": COLOURS["variable"]}
    elif node.kind == "constant":
        style = {"shape": "box", "style": "rounded,filled,dashed", "fillcolor": COLOURS["constant"], "color": "#999999"}
    elif node.kind == "hidden":
        style = {"shape": "note", "style": "filled", "fillcolor": "#eeeeee"}
    elif node.kind == "group":
        style = {"shape": "box3d", "style": "filled", "fillcolor": "#fff1d6"}
    elif node.kind == "module":  # a folded box: its border the colour of the boxes
        style = {"shape": "box", "style": "rounded,filled,bold", "fillcolor": "#eef1f8", "color": "#6a7fa8"}
    else:
        style = {"shape": "box", "style": "rounded,filled", "fillcolor": COLOURS["op"]}
    if node.output:
        style.update(fillcolor=COLOURS["output"], peripheries="2")
    if node.blamed:
        style.update(fillcolor=COLOURS["blamed"], color="#b00000", penwidth="2")
    if node.highlighted:
        style.update(color=COLOURS["highlight"], penwidth="2.6")
    return style


#: what gradcli's own nodes say they save (the page's panel tells them apart); a framework's node says what it saved
_SAVES_KINDS = frozenset({"", "nothing", "inputs", "output", "both", "shapes", "meta"})


def dot_label(graph: Graph, node: GraphNode) -> str:
    def esc(text: str) -> str:
        return html.escape(printable(text))

    if node.kind == "group":
        return _group_label(graph, node, esc)
    if node.kind == "module":
        return _module_label(graph, node, esc)
    lines = [f"<b>{esc(heading(graph, node))}</b>"]
    if _dense(graph):
        facts = []
        if graph.has_point and node.value is not None and node.kind != "constant":
            facts.append("value " + esc(compact_text(node.value, 4, 2)))
        if node.grad is not None:
            facts.append(f'<font color="#1f4e96">grad {esc(compact_text(node.grad, 4, 2))}</font>')
        return "<" + "<br/>".join(lines + ([" · ".join(facts)] if facts else [])) + ">"
    if node.kind == "op":
        lines.append(f'<font color="#777777" point-size="9">{esc(node.grad_fn or node.op)}</font>')
    elif node.kind == "variable":
        lines.append('<font color="#777777" point-size="9">variable (leaf)</font>')
    if node.shape:
        lines.append(f'<font point-size="9">shape {esc(str(node.shape))}</font>')
    if node.iteration:
        lines.append(f'<font color="#996600" point-size="9">iteration {node.iteration:,}</font>')
    if graph.has_point and node.value is not None and node.kind != "constant":
        lines.append(f"value {esc(compact_text(node.value, HUMAN, PICTURE_VALUES))}")
    if node.grad is not None:
        grad = (
            grad_text(node, with_parts=not graph.compact)
            if np.size(node.grad) == 1
            else compact_text(node.grad, HUMAN, PICTURE_VALUES)
        )
        lines.append(f'<font color="#1f4e96">grad {esc(grad)}</font>')
    if node.saves not in _SAVES_KINDS:  # a framework's node names what it saved: "self (8, 64), other ()"
        lines.append(f'<font color="#777777" point-size="9">saved {esc(node.saves)}</font>')
    if node.freed:
        lines.append('<font color="#aa5500" point-size="9">saved values freed</font>')
    if node.blamed:
        lines.append('<font color="#b00000"><b>derivative disagrees</b></font>')
    return "<" + "<br/>".join(lines) + ">"


def _group_label(graph: Graph, node: GraphNode, esc: Any) -> str:
    count, size = node.count, node.size
    chain = node.label.endswith(" chain")
    lines = [f"<b>{esc(node.label)} ×{count:,}</b>"]
    lines.append(f'<font color="#777777" point-size="9">{size:,} nodes{" in a row" if chain else " in all"}</font>')
    if graph.has_point and node.value is not None:
        lines.append(f"total value {esc(number(node.value, HUMAN))}")
    if node.grad is not None:
        lines.append(f'<font color="#1f4e96">grad {esc(number(node.grad, HUMAN))} each</font>')
    return "<" + "<br/>".join(lines) + ">"


def _module_label(graph: Graph, node: GraphNode, esc: Any) -> str:
    """A folded box: its name and class, shapes and contents, its output's value and gradient (brief)."""
    lines = [f"<b>{esc(node.label)}</b>", f'<font color="#555555">{esc(module_facts(node))}</font>']
    if graph.has_point and node.value is not None:
        lines.append("value " + esc(compact_text(node.value, 4, 2)))
    if node.grad is not None:
        lines.append(f'<font color="#1f4e96">grad {esc(compact_text(node.grad, 4, 2))}</font>')
    return "<" + "<br/>".join(lines) + ">"


FORMATS = ("tree", "text", "dot", "json", "png", "svg", "pdf", "html")


def picture(graph: Graph, fmt: str, collapse: bool = True, wanted: str | None = None) -> bytes:
    """PNG, SVG or PDF bytes, drawn by Graphviz's dot program within the time limit
    (``layout.time_limit``, 30 s by default; a UsageError with advice when it takes longer);
    ``collapse`` as for ``dot``; ``wanted``: what the user asked for (the page's SVG is a step)."""
    if collapse:  # without --depth: the deepest depth (else the most nodes) whose picture can be read
        graph, source = legible(graph, dot, PICTURE_MAX_NODES, wanted or fmt)
    else:
        source = dot(graph, collapse)
    nodes = graph.drawn_nodes
    if fmt == "png":
        return bitmap(source, fmt, current_limit(), nodes=nodes)
    return drawn(source, fmt, current_limit(), nodes=nodes, wanted=wanted)  # (one layout for every format)
