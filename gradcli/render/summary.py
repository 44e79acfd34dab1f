"""Repeated structure in a graph, found and collapsed: a big graph summarised, not truncated.

Two kinds of group, both found in one pass over the nodes (linear in the graph):

- terms of the same shape: sub-graphs that only their root's consumer uses (a private tree)
  and that compute the same operations on the same shared inputs, constants aside
  (``sin(x*k)*y`` for k = 1..60), at least ``GROUP_MIN`` of them: one group ``×60`` with the
  total of their values;
- a chain of the same operation (``((t1 + t2) + t3) + ...``), each link used only by the next:
  one group ``add ×59``.

A group is ``{"id", "label", "members", "count", "collapsed", "total"}`` (the page's ``groups``);
``collapsed(graph)`` is the graph with each group drawn as one node. What still does not fit is
cut to the nodes nearest the outputs, the rest counted in one summary node: ``cut_to`` for
``--max-nodes`` (a group counting as one), ``summarised`` for the page and the pictures.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from .labels import INFIX, expression, wrap
from .model import Edge, Graph, GraphNode, first_four, kinds

GROUP_MIN = 4  # repeats before a shape becomes a group
SUMMARY_NODES = 100  # pictures of more nodes than this are drawn with their groups collapsed


def find_groups(graph: Graph) -> list[dict[str, Any]]:
    """The groups of repeated structure in ``graph``, largest first."""
    nodes = [n for n in graph.nodes if n.kind != "hidden"]
    consumers: dict[str, int] = {}
    for e in graph.edges:
        consumers[e.source] = consumers.get(e.source, 0) + 1
    sig, private = _signatures(graph, nodes, consumers)
    consumer_of = {e.source: e.target for e in graph.edges if consumers.get(e.source) == 1}
    taken: set[str] = set()
    groups = _terms(graph, nodes, sig, private, consumer_of, taken)
    groups += _chains(graph, nodes, consumers, consumer_of, taken)
    groups.sort(key=lambda g: -len(g["members"]))
    for k, g in enumerate(groups):
        g["id"] = f"g{k}"
        g["collapsed"] = len(graph.nodes) > SUMMARY_NODES and not graph.as_built  # as pictures draw them
    return [{key: g[key] for key in ("id", "label", "members", "count", "collapsed", "total", "roots")} for g in groups]


def _signatures(graph: Graph, nodes: list[GraphNode], consumers: dict[str, int]) -> tuple[dict[str, int], dict[str, list[str]]]:  # fmt: skip
    """Each node's shape as a number (the same number: the same operations on the same shared
    inputs, constants aside), and its private inputs (the constants and unnamed operations that it
    alone uses)."""
    table: dict[tuple[Any, ...], int] = {}
    sig: dict[str, int] = {}
    private: dict[str, list[str]] = {}  # node -> its private inputs (used by it alone)
    by_target = graph._index()[0]  # (read directly: this loop runs over every node of a 10^5-node graph)
    by_id = graph._by_id
    for node in nodes:
        parts: list[Any] = [node.kind, node.op]
        mine = []
        for e in by_target.get(node.id, ()):
            source = by_id[e.source] if e.source != "hidden" else None
            if source is None:
                parts.append(("hidden",))
            elif source.kind == "constant":
                parts.append(("constant", source.shape))
                if consumers.get(source.id, 0) == 1:
                    mine.append(source.id)
            elif source.kind == "op" and consumers.get(source.id, 0) == 1 and not source.name:
                parts.append(sig[source.id])
                mine.append(source.id)
            else:
                parts.append(("shared", source.id))
        if node.kind == "variable":
            parts.append(node.id)  # every variable is itself
        sig[node.id] = table.setdefault(tuple(parts), len(table))
        private[node.id] = mine
    return sig, private


def _terms(graph: Graph, nodes: list[GraphNode], sig: dict[str, int], private: dict[str, list[str]],
           consumer_of: dict[str, str], taken: set[str]) -> list[dict[str, Any]]:  # fmt: skip
    """Terms of the same shape, at least ``GROUP_MIN`` of them: maximal repeated trees (their
    consumer does not repeat with them inside), each with its private inputs; their nodes ``taken``."""
    by_id = graph._by_id
    count: dict[int, int] = {}
    for node in nodes:
        if node.kind == "op":
            count[sig[node.id]] = count.get(sig[node.id], 0) + 1

    def repeated(node_id: str) -> bool:
        return by_id[node_id].kind == "op" and count[sig[node_id]] >= GROUP_MIN

    def members(root: str) -> list[str]:
        found, stack = [], [root]
        while stack:
            current = stack.pop()
            found.append(current)
            stack.extend(private[current])
        return found

    groups: list[dict[str, Any]] = []
    roots: dict[int, list[str]] = {}
    for node in nodes:  # maximal repeated trees: the consumer does not repeat with it inside
        if not repeated(node.id) or node.output or not private[node.id]:
            continue
        parent = consumer_of.get(node.id)
        if parent is not None and node.id in private.get(parent, ()) and repeated(parent):
            continue
        roots.setdefault(sig[node.id], []).append(node.id)
    for found in roots.values():
        if len(found) < GROUP_MIN:
            continue
        group_members = [m for r in found for m in members(r)]
        taken.update(group_members)
        groups.append(
            {
                "label": _shape(graph, found[0], private),
                "members": sorted(group_members, key=_order(graph)),
                "roots": found,
                "count": len(found),
                "total": _total(graph, found),
            }
        )
    return groups


def _chains(graph: Graph, nodes: list[GraphNode], consumers: dict[str, int], consumer_of: dict[str, str],
            taken: set[str]) -> list[dict[str, Any]]:  # fmt: skip
    """Runs of a repeating step, each link used only by the next one: a long sum's additions
    (``add chain ×59``), a Horner scheme's ``h * x + k`` (a step of two operations)."""
    groups = []
    seen: set[str] = set()
    by_target, by_id = graph._index()[0], graph._by_id

    def below(node_id: str) -> str | None:
        found = [
            e.source for e in by_target.get(node_id, ())
            if e.source != "hidden" and by_id[e.source].kind == "op" and consumers.get(e.source) == 1
            and e.source not in taken and not by_id[e.source].output
        ]  # fmt: skip
        return found[0] if len(found) == 1 else None

    def local(node_id: str, link: str | None) -> tuple[Any, ...]:
        parts: list[Any] = [by_id[node_id].op]
        for e in by_target.get(node_id, ()):
            if e.source == link:
                parts.append("link")
            elif e.source == "hidden":
                parts.append("hidden")
            elif by_id[e.source].kind == "constant":
                parts.append(("constant", by_id[e.source].shape))
            else:
                parts.append(("input", e.source if e.source not in taken else "group"))
        return tuple(parts)

    for node in reversed(nodes):  # from the output down: each run found from its last link
        if node.kind != "op" or node.id in seen or node.id in taken:
            continue
        run, links = [node.id], []
        while (step := below(run[-1])) is not None and step not in seen:
            links.append(step)
            run.append(step)
        links.append(None)
        seen.update(run)
        steps = [local(n, link) for n, link in zip(run, links)]
        i = 1  # the run's result (its first node) stays a node of its own
        while i < len(run):
            covered, period = _longest_repeat(steps, i)
            if not covered:
                i += 1
                continue
            groups.append(_chain_group(graph, run[i : i + covered], period, consumers))
            i += covered
    return groups


def _longest_repeat(steps: list[tuple[Any, ...]], start: int) -> tuple[int, int]:
    """(steps covered, period) of the longest run of a step of 1 to 4 operations repeated at least
    GROUP_MIN times from ``start``; (0, 0) where none is."""
    best = (0, 0)
    for period in range(1, 5):
        j = start
        while j + period < len(steps) and steps[j] == steps[j + period]:
            j += 1
        repeats = (j - start + period) // period
        if repeats >= GROUP_MIN and repeats * period > best[0]:
            best = (repeats * period, period)
    return best


def _chain_group(graph: Graph, members: list[str], period: int, consumers: dict[str, int]) -> dict[str, Any]:
    """One chain's group: its links and the constants only they use."""
    constants = [
        e.source for m in members for e in graph.inputs_of(m)
        if e.source != "hidden" and graph.node(e.source).kind == "constant" and consumers.get(e.source) == 1
    ]  # fmt: skip
    return {
        "label": _step_text(graph, members[:period], period),
        "members": sorted(members + constants, key=_order(graph)),
        "roots": [members[0]],
        "count": len(members) // period,
        "total": None,
    }


def _step_text(graph: Graph, step: list[str], period: int) -> str:
    """``add chain`` for a step of one operation, else the step as an expression of ``h``, the
    previous step's result: ``h * x + k``."""
    if period == 1:
        return f"{graph.node(step[0]).op} chain"
    text = "h"
    for k in range(len(step) - 1, -1, -1):  # the step's first operation is its last node
        node_id = step[k]
        link = step[k + 1] if k + 1 < len(step) else None
        args = []
        for e in graph.inputs_of(node_id):
            source = None if e.source == "hidden" else graph.node(e.source)
            if (link is not None and e.source == link) or (link is None and source is not None and source.kind == "op"
                                                           and graph.consumers_of(e.source)[0].target == node_id
                                                           and len(graph.consumers_of(e.source)) == 1):  # fmt: skip
                args.append(wrap(text) if graph.node(node_id).op in INFIX else text)
            elif source is None:
                args.append("...")
            else:
                args.append("k" if source.kind == "constant" else source.ref)
        text = expression(graph.node(node_id).op, args)
    return f"{text} chain"


def _order(graph: Graph) -> Any:
    position = {n.id: i for i, n in enumerate(graph.nodes)}
    return lambda node_id: position[node_id]


def _shape(graph: Graph, root: str, private: dict[str, list[str]]) -> str:
    """The tree's expression with its constants as ``k``: ``sin(x * k) * y``."""

    def text(node_id: str, depth: int) -> str:
        args = []
        for e in graph.inputs_of(node_id):
            source = None if e.source == "hidden" else graph.node(e.source)
            if source is None:
                args.append("...")
            elif source.kind == "constant":
                args.append("k")
            elif e.source in private[node_id]:
                inner = text(e.source, depth + 1) if depth < 6 else "…"
                args.append(wrap(inner) if graph.node(node_id).op in INFIX else inner)
            else:
                args.append(source.ref)
        return expression(graph.node(node_id).op, args)

    return text(root, 0)


def _total(graph: Graph, roots: list[str]) -> Any:
    values = [graph.node(r).value for r in roots]
    if any(v is None or np.size(v) != 1 for v in values):
        return None
    return float(np.sum([np.asarray(v, dtype=float).reshape(()) for v in values]))


def collapsed(graph: Graph, groups: list[dict[str, Any]]) -> Graph:
    """``graph`` with each collapsed group as one node (``kind == "group"``): edges into and out of
    a group are drawn once, labelled with how many they stand for."""
    where: dict[str, str] = {}
    group_nodes = []
    for g in groups:
        if not g["collapsed"]:
            continue
        for m in g["members"]:
            where[m] = g["id"]
        group_nodes.append(_group_node(graph, g))
    if not group_nodes:
        return graph
    nodes: list[GraphNode] = []
    placed: set[str] = set()
    by_id = {n.id: n for n in group_nodes}
    for n in graph.nodes:
        gid = where.get(n.id)
        if gid is None:
            nodes.append(n)
        elif gid not in placed:
            placed.add(gid)
            nodes.append(by_id[gid])
    nodes, edges = as_drawn(nodes, _edges_once(graph, where), graph, where)
    shown = sum(len(g["members"]) for g in groups if g["collapsed"])
    notes = [
        f"{shown:,} nodes in {len(group_nodes)} group{'s' if len(group_nodes) > 1 else ''} of repeated structure "
        "drawn as one node each (--format json lists them under groups)",
        *graph.notes,
    ]
    out = Graph(nodes, edges, list(graph.outputs), graph.hidden, dict(graph.hidden_kinds), notes, graph.has_point)
    out.compact, out.rankdir, out.groups, out.clusters = graph.compact, graph.rankdir, groups, graph.clusters
    out.color_by = graph.color_by
    return out


def _group_node(graph: Graph, group: dict[str, Any]) -> GraphNode:
    """The node drawn for a collapsed group: its total value, the gradient of each repeat when
    they all have the same, in its statement's box when all its members are."""
    chain = group["label"].endswith(" chain")
    ops = [m for m in group["members"] if graph.node(m).kind == "op"] if chain else group["roots"]
    root_grads = [graph.node(r).grad for r in ops]  # "grad 1 each" only if it is so for each
    node = GraphNode(group["id"], "group", "group", group["label"])
    node.value = group["total"]
    grads = {float(np.asarray(x)) for x in root_grads if x is not None and np.size(x) == 1}
    node.grad = grads.pop() if len(grads) == 1 and None not in root_grads else None
    node.grad_parts = None
    node.shape = ()
    node.count, node.size = group["count"], len(group["members"])
    around = {graph.node(m).cluster for m in group["members"]}
    node.cluster = around.pop() if len(around) == 1 else None  # in its statement's box, if one
    return node


def _edges_once(graph: Graph, where: Mapping[str, str]) -> list[Edge]:
    """The edges of ``graph`` between what is drawn (``where``: a node -> the group drawn in its
    place), each drawn once: several between the same two ends become one edge that counts them."""
    counted: dict[tuple[str, str], list[Edge]] = {}
    for e in graph.edges:
        s, t = where.get(e.source, e.source), where.get(e.target, e.target)
        if s == t:
            continue
        counted.setdefault((s, t), []).append(e)
    edges = []
    for (s, t), run in counted.items():
        if len(run) == 1 and s == run[0].source and t == run[0].target:
            edges.append(run[0])
        else:
            edge = Edge(s, t, run[0].input, highlighted=any(e.highlighted for e in run))
            edge.count = len(run)
            edges.append(edge)
    return edges


_WORD = re.compile(r"[A-Za-z_]\w*")


def as_drawn(nodes: list[GraphNode], edges: list[Edge], source: Graph, where: Mapping[str, str]) -> tuple[list[GraphNode], list[Edge]]:  # fmt: skip
    """``nodes`` and ``edges`` (what is drawn of ``source``, its groups collapsed or the graph cut)
    with labels that name only what is drawn: in an expression made from ids (``f = n170 + n174``),
    an operand not drawn is named by the group drawn in its place (``where``: node -> group id),
    else ``...`` (``f = g1 + g0``); a local derivative's formula that names one is left out (its
    value stays). What changes is copied: ``source`` keeps its own."""
    drawn = {n.id for n in nodes}
    substitutes: dict[str, dict[str, str]] = {}

    def instead(node_id: str) -> dict[str, str]:  # an input's name -> what stands for it
        if node_id not in substitutes:
            found = {}
            for e in source.inputs_of(node_id) if node_id in source._by_id else ():
                if e.source != "hidden" and e.source not in drawn and _WORD.fullmatch(source.node(e.source).key):
                    group = where.get(e.source)
                    found[source.node(e.source).key] = group if group in drawn else "..."
            substitutes[node_id] = found
        return substitutes[node_id]

    def renamed(text: str, names: dict[str, str]) -> str:
        return _WORD.sub(lambda m: names.get(m.group(), m.group()), text)

    nodes = [
        replace(n, label=renamed(n.label, instead(n.id))) if n.kind == "op" and n.generated and instead(n.id) else n
        for n in nodes
    ]
    edges = [
        replace(e, formula=None) if e.formula and renamed(e.formula, instead(e.target)) != e.formula else e
        for e in edges
    ]
    return nodes, edges


def _nearest(graph: Graph, limit: int, past_hidden: bool = True) -> dict[str, None]:
    """The ``limit`` nodes nearest the outputs of ``graph`` (going from each node to its inputs), the
    outputs always, in the order they were reached; ``past_hidden`` False leaves the summary node out."""
    kept = dict.fromkeys(graph.outputs)
    queue = deque(graph.outputs)
    while queue and len(kept) < limit:
        for edge in graph.inputs_of(queue.popleft()):
            if edge.source not in kept and (past_hidden or edge.source != "hidden") and len(kept) < limit:
                kept[edge.source] = None
                queue.append(edge.source)
    return kept


def _kept_part(graph: Graph, kept: Mapping[str, None], label: str) -> tuple[list[GraphNode], list[Edge], set[str]]:
    """The nodes of ``graph`` in ``kept`` with the edges between them, a summary node labelled
    ``label`` last, and the kept nodes that lost an input to the cut (the summary's edges go to them)."""
    nodes = [n for n in graph.nodes if n.id in kept]
    edges = [e for e in graph.edges if e.source in kept and e.target in kept]
    ends = {e.target for e in graph.edges if e.source not in kept and e.target in kept}
    nodes.append(GraphNode("hidden", "hidden", "hidden", label))
    return nodes, edges, ends


def _derived(source: Graph, nodes: list[GraphNode], edges: list[Edge], hidden: Counter, notes: list[str]) -> Graph:
    """A graph drawn from ``source`` (collapsed or cut): its outputs, point, and how the views show it."""
    graph = Graph(nodes, edges, list(source.outputs), sum(hidden.values()), dict(hidden.most_common()), notes,
                  source.has_point)  # fmt: skip
    graph.compact, graph.rankdir, graph.clusters = source.compact, source.rankdir, source.clusters
    graph.color_by = source.color_by
    return graph


def cut_to(whole: Graph, skeleton: Graph, limit: int) -> Graph:
    """``whole`` (a graph with its groups collapsed) cut to the ``limit`` nodes nearest its outputs,
    a group counting as one, the outputs always; every node of ``skeleton`` (the graph before its
    groups were collapsed) not drawn as itself is counted in ``hidden`` and ``hidden_kinds`` by its
    backward name, the summary node says how many the cut left out, and the notes say both."""
    kept = _nearest(whole, limit)
    grouped = {m: g["id"] for g in whole.groups for m in g["members"]}
    beyond = Counter(
        n.grad_fn or n.op for n in skeleton.nodes if n.id not in kept and grouped.get(n.id) not in kept
    )  # left out by the cut
    shown = [g for g in whole.groups if g["id"] in kept]
    inside = sum(len(g["members"]) for g in shown)
    hidden = Counter(n.grad_fn or n.op for n in skeleton.nodes if n.id not in kept)  # not drawn as themselves
    cut = sum(beyond.values())
    label = f"... {cut:,} more nodes" if cut else f"... {inside:,} nodes inside the groups"
    nodes, edges, ends = _kept_part(whole, kept, label)
    edges += [Edge("hidden", target, -1) for target in kept if target in ends]
    return _derived(whole, nodes, edges, hidden, _cut_notes(beyond, shown, inside, limit))


def _cut_notes(beyond: Counter, shown: list[dict[str, Any]], inside: int, limit: int) -> list[str]:
    """What ``cut_to`` left out (by kind) and the groups it draws as one node each (``inside`` nodes)."""
    notes = []
    cut = sum(beyond.values())
    if cut:
        notes.append(f"{cut:,} more nodes not shown (--max-nodes {limit}): " + kinds(beyond))
    if shown:
        notes.append(
            f"{inside:,} nodes in {len(shown)} group{'s' if len(shown) > 1 else ''} of repeated structure drawn as one "
            "node each: " + first_four([f"{g['label']} ×{g['count']:,}" for g in shown])
        )
    return notes


def summarised(graph: Graph, limit: int, shown_by: str = "the page") -> Graph:
    """``graph`` if it has at most ``limit`` nodes, else the ``limit`` nearest its outputs (going
    from each node to its inputs) and one summary node counting the rest by backward name (``MulBackward0``), as ``--max-nodes`` does."""
    if len(graph.nodes) <= limit:
        return graph
    kept = _nearest(graph, limit, past_hidden=False)
    dropped = Counter(
        n.grad_fn or n.op for n in graph.nodes if n.id not in kept and n.kind != "hidden"
    )  # as build counts
    dropped.update(graph.hidden_kinds)
    nodes, edges, ends = _kept_part(graph, kept, f"... {sum(dropped.values()):,} more nodes")
    nodes, edges = as_drawn(nodes, edges, graph, {})
    edges += [Edge("hidden", target, -1) for target in kept if target in ends]
    notes = [n for n in graph.notes if "more nodes not shown" not in n]
    notes.insert(0, f"{sum(dropped.values()):,} more nodes not shown ({shown_by} shows {limit:,}): " + kinds(dropped))
    return _derived(graph, nodes, edges, dropped, notes)
