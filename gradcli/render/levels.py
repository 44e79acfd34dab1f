"""Levels of detail: boxes (modules, calls, statements) folded into one node each, a Graph -> Graph
view (the second of the views: repeats, then levels, then drawing).

A box of ``Graph.clusters`` folded is drawn as one node of kind ``"module"`` (``module_node``): its
name and class, the shapes going in and out, the value and gradient of its output (statistics
beyond 64 elements), how many operations and parameters it holds. ``folded(graph, boxes)`` folds the
boxes named, ``at_depth(graph, depth)`` every box deeper than ``depth`` (``--depth N``: a box's depth
is 1 for a top box, 2 for a box inside it, ...), and ``legible`` chooses, for a picture drawn without
``--depth``, the deepest depth whose picture can be read (text of at least 10 px in at most 8000 px
a side). What a fold leaves out is counted in ``Graph.hidden`` and said in ``Graph.notes``, with
how to see it (``--depth N+1``, ``--depth all``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import UsageError
from ..stats import light
from .layout import LEGIBLE_PX, bitmap_dpi, current_limit, laid_out
from .model import Edge, Graph, GraphNode, whole_or_all
from .summary import SUMMARY_NODES, as_drawn, collapsed, summarised

ALL = "all"  # --depth all: every box drawn as a box, every operation drawn


def checked_depth(value: int | str | None) -> int | str | None:
    """``--depth``: None (not given: the deepest legible one for a picture), a whole number >= 0, or
    ``"all"`` (every operation drawn); anything else is a UsageError."""
    depth = whole_or_all(value)
    if depth == -1:
        raise UsageError(f"--depth must be a whole number >= 0 or all, not {value!r}")
    return depth


# --- boxes: depth, parents, the nodes inside ------------------------------------------------------------


def box_depths(graph: Graph) -> dict[str, int]:
    """Each box's depth: its ``"depth"`` when it says, else 1 + its parents' count (1 = a top box). A
    rolled loop's box (``loops``) is no level of its own: it has its parent's depth (0 at the top) and
    is not counted in the depth of the boxes inside it, so that the depth that draws a loop's module
    calls as nodes draws them inside their open ``loop ×N`` box (as torchview's ``roll=True`` does),
    never the whole loop as one node."""
    parent = {c["id"]: c.get("parent") for c in graph.clusters}
    rolled = loops(graph)
    depths: dict[str, int] = {}
    for box in graph.clusters:
        if "depth" in box:
            depths[box["id"]] = int(box["depth"])
            continue
        chain, inner = 0, box["id"] if box["id"] not in rolled else parent.get(box["id"])
        for _ in range(len(parent) + 1):  # (a circle of parents ends)
            if inner is None:
                break
            chain += inner not in rolled
            inner = parent.get(inner)
        depths[box["id"]] = chain
    return depths


def loops(graph: Graph) -> set[str]:
    """The boxes of rolled loops of module calls (``repeats.py``'s ``loop ×N``: its ``groups`` entry of
    kind ``"loop"``), which hold the boxes of one step's calls."""
    return {g["cluster"] for g in graph.groups if g.get("kind") == "loop" and g.get("cluster")}


def _outermost(graph: Graph, boxes: Iterable[str]) -> dict[str, str]:
    """Each node inside one of ``boxes`` -> the outermost of them around it."""
    wanted = set(boxes)
    parent = {c["id"]: c.get("parent") for c in graph.clusters}
    owner: dict[str | None, str | None] = {}  # box -> the outermost wanted box around it (or None)

    def around(box: str | None) -> str | None:
        path = []
        while box is not None and box not in owner and len(path) <= len(parent):
            path.append(box)
            box = parent.get(box)
        found = owner.get(box) if box is not None else None
        for inner in reversed(path):  # outermost first
            found = found if found is not None else (inner if inner in wanted else None)
            owner[inner] = found
        return owner.get(path[0]) if path else found

    return {n.id: box for n in graph.nodes if n.cluster and (box := around(n.cluster)) is not None}


def _inside(graph: Graph, boxes: Iterable[str]) -> set[str]:
    """The boxes inside one of ``boxes`` (not themselves)."""
    wanted = set(boxes)
    parent = {c["id"]: c.get("parent") for c in graph.clusters}
    found = set()
    for box in parent:
        inner = parent.get(box)
        for _ in range(len(parent)):
            if inner is None:
                break
            if inner in wanted:
                found.add(box)
                break
            inner = parent.get(inner)
    return found


# --- the node drawn for a folded box --------------------------------------------------------------------


def module_node(graph: Graph, box_id: str, members: list[str] | None = None) -> GraphNode:
    """The node drawn for box ``box_id`` folded (kind ``"module"``, its id the box's): labelled by the
    box (``encoder.layers.0 (TransformerEncoderLayer)``; a repeated one keeps its ``×N``), its value and
    gradient those of its output (of its last output when it has several; statistics beyond 64
    elements), its shape the output's, and in ``module``: its path and class, the shapes of its
    inputs and outputs, the operations and parameters (elements of its leaves) inside, the nodes
    it stands for. ``members``: the nodes inside (default: found from each node's box)."""
    box = next((c for c in graph.clusters if c["id"] == box_id), None)
    if box is None:
        raise KeyError(f"no box {box_id!r} in the graph")
    if members is None:
        members = [n for n, b in _outermost(graph, [box_id]).items() if b == box_id]
    nodes = [graph.node(m) for m in members]
    sources, outs = _ends(graph, members)
    main = outs[-1] if outs else (nodes[-1] if nodes else None)
    path = box.get("path")
    label = box["label"].replace("\n", "  ")  # (a repeat's statistics line: one line in a node's title)
    label += f" ×{box['repeat']:,}" if box.get("repeat") and "×" not in label else ""
    named = main is not None and main.kind == "op" and not main.named_by_view
    name = path or (main.name if named else None)  # (a statement's box: the name it assigns)
    node = GraphNode(box_id, "module", box.get("class") or "folded", label, name=name)
    node.module = _contents(graph, box, nodes, sources, outs)
    if main is not None:
        node.shape, node.value, node.grad = main.shape, light(main.value), light(main.grad)
    node.output, node.highlighted = any(n.output for n in nodes), any(n.highlighted for n in nodes)
    node.blamed, node.cluster, node.scope = any(n.blamed for n in nodes), box.get("parent"), path
    return node


def _contents(graph: Graph, box: dict[str, Any], nodes: list[GraphNode], sources: list[str],
              outs: list[GraphNode]) -> dict[str, Any]:  # fmt: skip
    """``GraphNode.module`` of a folded box: its path, class and repeat, the shapes of its inputs and
    outputs, the operations (those of its groups too) and parameters (elements of its leaves) inside."""
    return {
        "box": box["id"],
        **{key: box[key] for key in ("path", "class", "repeat") if box.get(key)},
        "inputs": [list(graph.node(s).shape) for s in sources],
        "outputs": [list(n.shape) for n in outs],
        "operations": sum(n.kind == "op" for n in nodes) + sum(n.size for n in nodes if n.kind == "group"),
        "parameters": int(sum(int(np.prod(n.shape, dtype=np.int64)) for n in nodes if n.kind == "variable")),
        "nodes": len(nodes),
    }


def _ends(graph: Graph, members: list[str]) -> tuple[list[str], list[GraphNode]]:
    """The nodes outside ``members`` they read (constants aside), in order, and those of them read
    outside (or outputs): the box's inputs and outputs (its leaves only if nothing else leaves it)."""
    inside = set(members)
    sources: dict[str, None] = {}
    for m in members:
        for e in graph.inputs_of(m):
            if e.source not in inside and e.source != "hidden" and graph.node(e.source).kind != "constant":
                sources.setdefault(e.source)
    nodes = [graph.node(m) for m in members]
    leaving = [n for n in nodes if n.output or any(e.target not in inside for e in graph.consumers_of(n.id))]
    return list(sources), [n for n in leaving if n.kind != "variable"] or leaving


def module_facts(node: GraphNode) -> str:
    """A module node's shapes and contents in one line: ``(4, 8) → (4, 8) · 6 operations · 144 parameters``."""
    info = node.module or {}

    def shapes(found: list[list[int]]) -> str:
        text = ", ".join("(" + ", ".join(map(str, s)) + ("," if len(s) == 1 else "") + ")" for s in found[:3])
        return text + (f" +{len(found) - 3}" if len(found) > 3 else "")

    # (a box reading nothing drawn, a loop's first cell reading constants: "→ (1, 32)", not "()", a scalar)
    facts = [f"{shapes(info.get('inputs', []))} → {shapes(info.get('outputs', [])) or '()'}".lstrip()]
    operations, parameters = info.get("operations", 0), info.get("parameters", 0)
    facts.append(f"{operations:,} operation{'s' if operations != 1 else ''}")
    if parameters:
        facts.append(f"{parameters:,} parameter{'s' if parameters != 1 else ''}")
    return " · ".join(facts)


# --- folding ----------------------------------------------------------------------------------------------


def folded(graph: Graph, boxes: Iterable[str], depth: int | str | None = None, chosen: bool = False) -> Graph:
    """``graph`` with every box of ``boxes`` drawn as one node (``module_node``): its nodes replaced by
    it, the edges into and out of it rewired to it, once between two ends (``Edge.count`` saying how
    many they stand for, without the local derivative of an edge it no longer is); the boxes inside
    a folded one are gone, a folded box stays in ``clusters`` marked ``"collapsed"``. ``hidden`` and
    ``notes`` count the operations folded and say how to see them (``depth``: the depth drawn)."""
    where = _outermost(graph, boxes)
    if not where:
        out = _copy(graph, list(graph.nodes), list(graph.edges), list(graph.outputs))
        out.depth = depth
        return out
    members: dict[str, list[str]] = {}
    for node_id, box in where.items():
        members.setdefault(box, []).append(node_id)
    modules = {box: module_node(graph, box, found) for box, found in members.items()}
    nodes = _ordered(graph, where, modules)
    edges = _rewired(graph, where)
    nodes, edges = as_drawn(nodes, edges, graph, where)
    nodes = [_named_inputs(n, modules) for n in nodes]
    outputs = list(dict.fromkeys(where.get(o, o) for o in graph.outputs))
    out = _copy(graph, nodes, edges, outputs)
    gone = _inside(graph, members)
    out.clusters = [dict(c, collapsed=True) if c["id"] in members else c for c in graph.clusters if c["id"] not in gone]
    out.groups = [g for g in graph.groups if not any(m in where for m in g.get("members", ()))]
    folded_kinds = Counter(graph.node(n).grad_fn or graph.node(n).op for n in where)
    out.hidden = graph.hidden + len(where)
    out.hidden_kinds = dict((Counter(graph.hidden_kinds) + folded_kinds).most_common())
    out.notes = [_fold_note(modules, depth, chosen), *graph.notes]
    out.depth = depth
    out.folded = list(modules)
    out.unfolded = graph.unfolded if graph.unfolded is not None else graph  # (the page unfolds its boxes)
    return out


_WORD = re.compile(r"[A-Za-z_]\w*")


def _named_inputs(node: GraphNode, modules: dict[str, GraphNode]) -> GraphNode:
    """A label made from ids that names a folded box by its id (``pow(m0)``) names it as the views do,
    by its path (``pow(model)``); the node itself is left as it is (it may be the graph's own)."""
    if node.kind != "op" or not node.generated:
        return node
    label = _WORD.sub(lambda m: modules[m.group()].key if m.group() in modules else m.group(), node.label)
    return node if label == node.label else replace(node, label=label)


def _copy(graph: Graph, nodes: list[GraphNode], edges: list[Edge], outputs: list[str]) -> Graph:
    """A graph drawn from ``graph``: every setting of its views kept (``replace``), its lists its own."""
    return replace(graph, nodes=nodes, edges=edges, outputs=outputs, notes=list(graph.notes),
                   hidden_kinds=dict(graph.hidden_kinds), groups=list(graph.groups), clusters=list(graph.clusters))  # fmt: skip


def _ordered(graph: Graph, where: dict[str, str], modules: dict[str, GraphNode]) -> list[GraphNode]:
    """The nodes drawn in an evaluation order: a module where all its inputs are computed (a box's
    nodes need not follow one another), ties in the order of the box's first node."""
    first: dict[str, int] = {}
    for k, n in enumerate(graph.nodes):
        first.setdefault(where.get(n.id, n.id), k)
    drawn = sorted(first, key=first.__getitem__)
    needs: dict[str, set[str]] = {d: set() for d in drawn}
    for e in graph.edges:
        s, t = where.get(e.source, e.source), where.get(e.target, e.target)
        if s != t and s in needs and t in needs:
            needs[t].add(s)
    users: dict[str, list[str]] = {}
    for t, found in needs.items():
        for s in found:
            users.setdefault(s, []).append(t)
    import heapq  # lazy: only a fold orders nodes

    ready = [(first[d], d) for d in drawn if not needs[d]]
    heapq.heapify(ready)
    order: list[str] = []
    placed: set[str] = set()
    while ready:
        _, d = heapq.heappop(ready)
        order.append(d)
        placed.add(d)
        for t in users.get(d, ()):
            needs[t].discard(d)
            if not needs[t] and t not in placed:
                heapq.heappush(ready, (first[t], t))
    order += [d for d in drawn if d not in placed]  # (a circle through a folded box: as they came)
    return [modules[d] if d in modules else graph.node(d) for d in order]


def _rewired(graph: Graph, where: dict[str, str]) -> list[Edge]:
    """The edges between what is drawn: an edge inside a folded box is gone (but a loop edge of a box
    drawn once for ×N, which stays on its node, ``_looped``), one into or out of it goes to or from its
    node, and those between the same two ends are one edge counting them."""
    boxes = {c["id"]: c for c in graph.clusters}
    once = {b for b in where.values() if boxes[b].get("repeat")}  # (folded boxes drawn once for ×N)
    kept: dict[tuple[str, str], list[Edge]] = {}
    for e in graph.edges:
        ends = (where.get(e.source, e.source), where.get(e.target, e.target))
        if ends[0] != ends[1] or (ends[0] in once and _looped(graph, e)):
            kept.setdefault(ends, []).append(e)
    steps = _steps_around(graph, boxes, once)
    port: dict[str, dict[str, int]] = {}  # a module -> the input number of each source into it
    edges = []
    for (s, t), run in kept.items():
        if len(run) == 1 and (run[0].source, run[0].target) == (s, t):
            edges.append(run[0])  # (untouched: its local derivative stays)
            continue
        number = run[0].input if t not in port and t not in where.values() else None
        if number is None:
            number = port.setdefault(t, {}).setdefault(s, len(port[t]))
        edge = Edge(s, t, number, highlighted=any(e.highlighted for e in run))
        edge.count = len(run)
        if s == t:  # a loop edge on a box drawn once: as many times as the state goes round
            edge.count = max(e.count for e in run)
        elif s in steps and steps[s] == steps.get(t):  # from one call to the next in each step: N times
            edge.count = steps[s][1]
        edges.append(edge)
    return edges


def _looped(graph: Graph, edge: Edge) -> bool:
    """Whether ``edge`` (inside a folded box drawn once for ×N) is a loop edge: from a step's node back
    to an earlier one (``Graph.position``), standing for several; it stays, on the box's node."""
    return edge.source != "hidden" and edge.count > 1 and graph.position(edge.target) < graph.position(edge.source)


def _steps_around(graph: Graph, boxes: dict[str, dict[str, Any]], once: set[str]) -> dict[str, tuple[str, int]]:
    """Each folded box drawn once directly inside a rolled loop's box (``loops``) -> that loop and its ``×N``."""
    rolled = loops(graph)
    found = {}
    for box in once:
        around = boxes[box].get("parent")
        if around in rolled:
            found[box] = (around, int(boxes[around].get("repeat") or 1))
    return found


def _fold_note(modules: dict[str, GraphNode], depth: int | str | None, chosen: bool = False) -> str:
    """What the fold left out, and how to see it (``chosen``: the depth was the picture's own choice)."""
    operations = sum(m.module["operations"] for m in modules.values())
    nodes = sum(m.module["nodes"] for m in modules.values())
    boxes = len(modules)
    text = (
        f"{operations:,} operations ({nodes:,} nodes) in {boxes:,} box{'es' if boxes != 1 else ''} drawn folded, "
        "one node each"
    )
    if not isinstance(depth, int):
        return f"{text}: --depth all (depth='all') shows every operation"
    if chosen:
        text += f": drawn at depth {depth}, the deepest whose picture can be read (text of {LEGIBLE_PX} px or more)"
    else:
        text += f" (depth {depth})"
    return f"{text}: --depth {depth + 1} (depth={depth + 1}) shows one level more, --depth all every operation"


def at_depth(graph: Graph, depth: int | str | None, chosen: bool = False) -> Graph:
    """``graph`` with every box deeper than ``depth`` folded (``--depth N``; ``"all"``: none folded; None:
    the graph itself). A repeated box (``"repeat"``) folds like any other, keeping its ``×N``.
    ``chosen``: the depth is a picture's own choice (``legible``), and its note says so."""
    if depth is None:
        return graph
    if depth == ALL:
        return folded(graph, (), ALL)
    deeper = [box for box, d in box_depths(graph).items() if d > depth]
    return folded(graph, deeper, depth, chosen)


def unbounded(depth: int | str | None, max_nodes: int | str | None) -> int | str | None:
    """What a graph drawn at ``depth`` is built with: every node, as folding (not cutting) makes its
    picture small, unless ``--max-nodes`` was given too (or no depth: the build's own limit)."""
    return ALL if depth is not None and max_nodes is None else max_nodes


def leveled(graph: Graph, depth: int | str | None, max_nodes: int | str | None) -> Graph:
    """``graph``, built with ``unbounded(depth, max_nodes)``, drawn at ``depth`` (``at_depth``); its
    pictures still summarise what they cannot draw unless ``--max-nodes`` was given."""
    if depth is None:
        return graph
    graph.as_built = max_nodes is not None
    return at_depth(graph, depth)


def deepest(graph: Graph) -> int:
    """The depth of the deepest box (0 without boxes)."""
    return max(box_depths(graph).values(), default=0)


def drawn_count(graph: Graph, depth: int) -> int:
    """How many nodes ``at_depth(graph, depth)`` draws, without folding."""
    deeper = [box for box, d in box_depths(graph).items() if d > depth]
    where = _outermost(graph, deeper)
    return len(graph.nodes) - len(where) + len(set(where.values()))


# --- the picture drawn without --depth: the deepest that can be read -----------------------------------------

SMALLEST_CUT = 8  # nodes: a picture cut to legibility keeps at least these


def candidates(graph: Graph, most: int) -> Iterator[Graph]:
    """The graphs a picture of ``graph`` drawn without ``--depth`` may show, most detailed first: the
    graph itself, then folded a level more at a time, each drawing at most ``most`` nodes (the most a
    picture draws: folding, not cutting, brings a model within), the graph folded to its top boxes
    last whatever its size. Before a depth that would fold a box drawn once for ×N (a repeated block,
    ``"repeat"``), the same depth with that box open, the boxes inside it folded (``opened``): a block
    standing for most of a model is not one node while its siblings are what makes a level too big."""
    if graph.as_built or graph.depth is not None or not graph.clusters:
        yield graph
        return
    depths = box_depths(graph)
    top = max(depths.values(), default=0)
    for depth in range(top, -1, -1):
        if depth < top and (shown := opened(graph, depth, depths)) is not None and len(shown.nodes) <= most:
            yield shown
        if depth == 0 or drawn_count(graph, depth) <= most:
            yield graph if depth == top else at_depth(graph, depth, chosen=True)


def opened(graph: Graph, depth: int, depths: dict[str, int] | None = None) -> Graph | None:
    """``graph`` at ``depth`` but for its boxes drawn once for ×N one level deeper (``"repeat"``, a
    depth of ``depth + 1``), drawn open with the boxes inside them folded; None when there are none,
    or when nothing else of that level would stay folded (it would be ``depth + 1`` itself)."""
    depths = box_depths(graph) if depths is None else depths
    rolled = loops(graph)  # (a loop's box folds with its parent only; its calls are its steps, not blocks)
    repeated = {
        c["id"]
        for c in graph.clusters
        if c.get("repeat") and depths[c["id"]] == depth + 1 and c["id"] not in rolled and c.get("parent") not in rolled
    }
    if not repeated or all(d != depth + 1 or b in repeated for b, d in depths.items()):
        return None
    boxes = [b for b, d in depths.items() if d > depth + 1 or (d > depth and b not in repeated)]
    shown = folded(graph, boxes, depth, chosen=True)
    said = f"drawn at depth {depth}"
    shown.notes[0] = shown.notes[0].replace(said, f"{said} (a block drawn once for ×N at depth {depth + 1})", 1)
    return shown


def cuts(graph: Graph, limit: int, ratio: float) -> Graph | None:
    """``graph`` cut to fewer nodes than ``limit`` for a picture whose layout was ``ratio`` (< 1) too
    large to be read: its groups of repeated structure drawn as one node each, then the nodes nearest
    the outputs (``summary.summarised``); None when it is as small as a picture gets."""
    smaller = min(int(limit * ratio * 0.9), limit - 1)
    if smaller < SMALLEST_CUT:
        return None
    base = graph
    if len(base.nodes) > SUMMARY_NODES and base.groups and not base.as_built:
        base = collapsed(base, base.groups)
    cut = summarised(base, smaller, "a picture with text of at least 10 px")
    cut.depth, cut.folded = graph.depth, list(graph.folded)
    return cut


def legible(graph: Graph, draw: Callable[[Graph], str], limit: int, wanted: str | None = None) -> tuple[Graph, str]:
    """The graph a picture of ``graph`` shows and its DOT source (``draw``): given ``--depth`` (or
    ``--max-nodes``), as asked; else the most detailed of ``candidates`` whose layout can be read (text of
    at least ``LEGIBLE_PX`` at the PNG's resolution, ``layout.bitmap_dpi``), and failing every depth
    (a graph without boxes, or too big at its top boxes) fewer of its nodes than ``limit`` (``cuts``).
    Each layout is kept for the formats drawn of it (``layout.laid_out``); ``wanted``: the format asked for,
    named if Graphviz is missing."""
    best, room = (graph, ""), 1.0
    for shown in candidates(graph, limit):
        best = (shown, draw(shown))
        if graph.as_built or graph.depth is not None:
            return best
        room = _room(best[1], shown, wanted)
        if room >= 1:
            return best
    base = best[0]
    limit = min(limit, len(base.nodes))
    while (cut := cuts(base, limit, room)) is not None:
        best = (cut, draw(cut))
        room, limit = _room(best[1], cut, wanted), len(cut.nodes) - 1
        if room >= 1:
            break
    return best


def _room(source: str, graph: Graph, wanted: str | None = None) -> float:
    """How much larger than needed the PNG of ``source`` is drawn: 1 or more, its text can be read."""
    laid, _ = laid_out(source, current_limit(), graph.drawn_nodes, wanted=wanted)
    dpi, needed = bitmap_dpi(laid)
    return dpi / needed


__all__ = ["ALL", "at_depth", "box_depths", "checked_depth", "folded", "legible", "leveled", "module_facts", "module_node",
           "unbounded"]  # fmt: skip
