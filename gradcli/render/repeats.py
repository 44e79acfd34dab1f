"""Repeated structure of a model's graph drawn once: a Graph -> Graph view (the first of the views:
repeats, then levels, then drawing).

Two kinds of repeat, found among the boxes (``Graph.clusters``) of one parent, in order:

- ``"loop"``: the same sequence of module calls made again and again (a stack of 3 GRU cells
  called once per time step: ``cells.0, cells.1, cells.2`` x20), each period computing the same
  operations on the same shapes: the first period is drawn inside a ``loop ×20`` box, the edges from
  one step to the next (the recurrent state) drawn once as loop edges ``×19``;
- ``"modules"``: consecutive sibling boxes of different modules whose structure is identical (the
  same class, operations, shapes and dtypes of every node, internal edges and parameter shapes): GPT-2's
  12 blocks are drawn as block 0 alone, ``transformer.h.0–11 (Block) ×12``.

Each is one entry of ``Graph.groups`` (``kind``, ``repeat``, ``cluster``: the box drawn, ``members``:
the nodes of the instance drawn, ``instances``: each one's statistics, ``differs``: the instances that
stand out, with why). The instances not drawn are rewired onto the one drawn: an edge from outside to
any of them comes from the drawn one's node (counted once per edge it stands for), an edge from one
instance to the next becomes a loop edge on the drawn one, the last instance's edges out leave from it.
Their nodes are accounted for in the box's ``×N`` and in a note, not cut.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..stats import TensorStats, tensor_stats
from .model import Edge, Graph
from .summary import find_groups

_ID = re.compile(r"\bn\d+\b")  # a node's id in a label made from ids (``sum(n84)``)
MIN_REPEAT = 2  # instances before a repeat is drawn once
FAR = 10.0  # an instance whose gradient norm is this many times from the median (either way) differs
LONGEST_PERIOD = 8  # module calls in one step of a loop, at most
SPARK = "▁▂▃▄▅▆▇█"
DIFFERS_SHOWN = 3  # lines naming the instances that differ, in a box's label
SPARK_MOST = 40  # characters of a sparkline: more instances are binned (each bin's largest)


@dataclass
class Repeat:
    """One repeat found: its kind, the parent box of its instances, each instance's boxes (one for
    ``modules``, a period's calls for ``loop``) and nodes (in evaluation order, corresponding one to
    one between instances)."""

    kind: str
    parent: str | None
    boxes: list[list[str]]
    members: list[list[str]]


def grouped(graph: Graph) -> Graph:
    """``graph`` with each repeat found drawn once (``Repeat``), or ``graph`` itself when it has none."""
    if not graph.clusters:
        return graph
    finder = _Finder(graph)
    found = finder.find()
    if not found:
        return graph
    return _rewired(graph, found, finder)


def expression_groups(graph: Graph) -> list[dict[str, Any]]:
    """``summary.find_groups`` of a graph whose repeats may be drawn once: read without its loop edges
    (from a node to one before it in evaluation order), as it reads a graph in that order."""
    position = {n.id: k for k, n in enumerate(graph.nodes)}
    forward = [e for e in graph.edges if e.source == "hidden" or position[e.source] < position[e.target]]
    if len(forward) == len(graph.edges):
        return find_groups(graph)
    ahead = Graph(graph.nodes, forward, graph.outputs)
    ahead.as_built = graph.as_built
    return find_groups(ahead)


def has_repeats(graph: Graph) -> bool:
    """Whether ``grouped`` would draw something of ``graph`` once (its structure alone is read)."""
    return bool(graph.clusters) and bool(_Finder(graph).find())


def _dtype(value: Any) -> str | None:
    if value is None:
        return None
    return value.dtype if isinstance(value, TensorStats) else str(np.asarray(value).dtype)


class _Finder:
    """The repeats of a graph's boxes, parents before children (a repeat's other instances not searched)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.boxes = {c["id"]: c for c in graph.clusters}
        self.position = {n.id: i for i, n in enumerate(graph.nodes)}
        self.inside: dict[str, list[str]] = {b: [] for b in self.boxes}  # box -> the nodes in it, nested ones too
        self.loose: dict[str | None, list[str]] = {}  # parent box -> the nodes directly in it
        for node in graph.nodes:
            box = node.cluster if node.cluster in self.boxes else None
            self.loose.setdefault(box, []).append(node.id)
            while box is not None:
                self.inside[box].append(node.id)
                box = self.boxes[box]["parent"]
        self.children: dict[str | None, list[str]] = {}
        for box in sorted((b for b in self.boxes if self.inside[b]), key=lambda b: self.position[self.inside[b][0]]):
            self.children.setdefault(self.boxes[box]["parent"], []).append(box)

    def find(self) -> list[Repeat]:
        found: list[Repeat] = []
        queue: list[str | None] = [None]
        while queue:
            parent = queue.pop(0)
            siblings = self.children.get(parent, [])
            i = 0
            while i < len(siblings):
                repeat, used = self._loop_at(parent, siblings, i) or self._modules_at(parent, siblings, i)
                if repeat is None:
                    queue.append(siblings[i])
                    i += 1
                    continue
                queue.extend(siblings[i:used])  # (a loop's first steps that differ: not repeated)
                found.append(repeat)
                queue.extend(repeat.boxes[0] if repeat.kind == "modules" else [])
                i = used + len(repeat.boxes) * len(repeat.boxes[0])
        return found

    def children_all(self, box: str) -> list[str]:
        """``box`` and every box inside it."""
        found, stack = [], [box]
        while stack:
            current = stack.pop()
            found.append(current)
            stack.extend(self.children.get(current, []))
        return found

    def path(self, box: str) -> str:
        return self.boxes[box].get("path") or self.boxes[box]["label"]

    # --- signatures: equal when two instances compute the same, shapes and dtypes too ----------------

    def signature(self, members: Sequence[str], leaves: bool = False) -> tuple[Any, ...]:
        """The structure of an instance: each node's kind, operation, shape, dtype and box (its
        class, and which of the instance's boxes), its inputs inside the instance by their place,
        and with ``leaves`` the parameters it reads from outside (a loop's) by shape and dtype. What
        else comes from outside is not compared: the first block reads the input, the others the
        block before; a loop's first step may start from a state that needs no gradient."""
        graph, local = self.graph, {m: k for k, m in enumerate(members)}
        boxes: dict[str | None, int] = {}
        parts = []
        for m in members:
            node = graph.node(m)
            box = boxes.setdefault(node.cluster, len(boxes))
            inputs = []
            for e in graph.inputs_of(m):
                if e.source in local:
                    inputs.append((e.input, local[e.source]))
                elif leaves and e.source != "hidden" and graph.node(e.source).kind == "variable":
                    source = graph.node(e.source)
                    inputs.append((e.input, "leaf", source.shape, _dtype(source.value)))
            kind = self.boxes[node.cluster].get("class") if node.cluster in self.boxes else None
            parts.append((node.kind, node.op, node.grad_fn, node.shape, _dtype(node.value), box, kind, tuple(inputs)))
        return tuple(parts)

    # --- identical sibling modules ------------------------------------------------------------------

    def _modules_at(self, parent: str | None, siblings: list[str], i: int) -> tuple[Repeat | None, int]:
        """The run of consecutive siblings from ``i`` of different modules with the structure of the
        ``i``-th, when at least ``MIN_REPEAT`` long."""
        if not self.boxes[siblings[i]].get("path"):  # (a statement's box, a Python call's: not a module)
            return None, i
        first = self.signature(self.inside[siblings[i]])
        paths = {self.path(siblings[i])}
        j = i + 1
        while j < len(siblings) and self.boxes[siblings[j]].get("path") and self.path(siblings[j]) not in paths:
            if self.signature(self.inside[siblings[j]]) != first:
                break
            paths.add(self.path(siblings[j]))
            j += 1
        if j - i < MIN_REPEAT:
            return None, i
        run = siblings[i:j]
        return Repeat("modules", parent, [[b] for b in run], [list(self.inside[b]) for b in run]), i

    # --- loops: a sequence of module calls made again ---------------------------------------------------

    def _loop_at(self, parent: str | None, siblings: list[str], i: int) -> tuple[Repeat, int] | None:
        """A loop whose calls start at ``i`` (or a period later: a first step that differs, a hidden
        state not yet given, stays drawn): the period of module paths repeated most, its steps
        computing the same."""
        paths = [self.path(b) for b in siblings]
        best = (0, 0)
        for period in range(1, min(LONGEST_PERIOD, (len(paths) - i) // 2) + 1):
            repeats = 1
            while paths[i + repeats * period : i + (repeats + 1) * period] == paths[i : i + period]:
                repeats += 1
            if repeats >= MIN_REPEAT and repeats * period > best[0] * best[1]:
                best = (repeats, period)
        repeats, period = best
        if not repeats:
            return None
        steps = [siblings[i + k * period : i + (k + 1) * period] for k in range(repeats)]
        members = self._steps(parent, steps)
        signatures = [self.signature(m, leaves=True) for m in members]
        start = next((k for k in range(repeats - 1) if signatures[k] == signatures[k + 1]), None)
        if start is None:
            return None
        end = start + 1
        while end < repeats and signatures[end] == signatures[start]:
            end += 1
        if end - start < MIN_REPEAT:
            return None
        return Repeat("loop", parent, steps[start:end], members[start:end]), i + start * period

    def _steps(self, parent: str | None, steps: list[list[str]]) -> list[list[str]]:
        """Each step's operations: those of its calls and those beside them that only the step uses
        (``x[t]``, the input it reads); the parameters, read by every step, are not a step's own."""
        graph = self.graph
        owner: dict[str, int] = {}
        for k, boxes in enumerate(steps):
            for b in boxes:
                for m in self.inside[b]:
                    if graph.node(m).kind != "variable":  # (its operations, and the constants they read)
                        owner[m] = k
        for m in reversed(self.loose.get(parent, [])):  # (consumers first: a chain of them joins its step)
            users = {owner.get(e.target) for e in graph.consumers_of(m)}
            if graph.node(m).kind != "variable" and len(users) == 1 and None not in users:
                owner[m] = users.pop()
        members: list[list[str]] = [[] for _ in steps]
        for m in sorted(owner, key=self.position.__getitem__):
            members[owner[m]].append(m)
        return members


# --- drawing each repeat once ----------------------------------------------------------------------


def _rewired(graph: Graph, found: list[Repeat], finder: _Finder) -> Graph:
    """``graph`` with every instance but the first of each repeat left out, its edges moved onto the
    first's nodes, the boxes labelled ``×N`` and the repeats added to ``groups``."""
    drawn: dict[str, str] = {}  # a node left out -> the node drawn in its place
    instance: dict[str, tuple[int, int]] = {}  # node -> (repeat, instance)
    boxes = {c["id"]: dict(c) for c in graph.clusters}
    moved: dict[str, str] = {}  # a box left out -> the box drawn in its place
    for r, repeat in enumerate(found):
        for k, members in enumerate(repeat.members):
            for m, first in zip(members, repeat.members[0]):
                instance[m] = (r, k)
                if k:
                    drawn[m] = first
                    moved.setdefault(graph.node(m).cluster, graph.node(first).cluster)
            for box in (b for top in repeat.boxes[k] for b in finder.children_all(top)) if k else ():
                boxes.pop(box, None)
    entries, notes, loops = [], [], []
    for r, repeat in enumerate(found):
        entry, loop_box = _entry(graph, repeat, finder, boxes, f"r{r}")
        entries.append(entry)
        loops += [loop_box] if loop_box else []
    nodes = []
    for node in graph.nodes:
        if node.id in drawn:
            continue
        wrapper = next((b["id"] for b in loops if node.id in b["loose"]), None)
        if wrapper is not None or node.cluster in moved:
            node = replace(node, cluster=wrapper or moved[node.cluster])
        if node.generated and any(e.source in drawn for e in graph.inputs_of(node.id)):
            node = replace(node, label=_ID.sub(lambda m: drawn.get(m.group(), m.group()), node.label))
        nodes.append(node)
    clusters = _clusters_with_loops(graph, boxes, loops)
    left = len(graph.nodes) - len(nodes)
    notes.append(
        f"{left:,} nodes of {sum(len(f.members) - 1 for f in found):,} repeated instances drawn once, in the box "
        "marked ×N (--format json lists each instance's statistics under groups; --max-nodes all draws every node)"
    )
    out = Graph(nodes, _edges(graph, drawn, instance), [drawn.get(o, o) for o in graph.outputs], graph.hidden,
                dict(graph.hidden_kinds), [*notes, *graph.notes], graph.has_point)  # fmt: skip
    out.compact, out.rankdir, out.as_built = graph.compact, graph.rankdir, graph.as_built
    out.clusters, out.groups = clusters, [*graph.groups, *entries]
    return out


def _clusters_with_loops(graph: Graph, boxes: dict[str, dict[str, Any]], loops: list[dict[str, Any]]) -> list[dict[str, Any]]:  # fmt: skip
    """The boxes drawn, in their order, each loop's box just before the first box it holds."""
    before = {b["holds"][0]: b for b in loops}
    clusters = []
    for c in graph.clusters:
        if c["id"] not in boxes:
            continue
        if c["id"] in before:
            loop = before[c["id"]]
            clusters.append({k: v for k, v in loop.items() if k not in ("loose", "holds")})
        clusters.append(boxes[c["id"]])
    return clusters


def _edges(graph: Graph, drawn: dict[str, str], instance: dict[str, tuple[int, int]]) -> list[Edge]:
    """The edges between what is drawn: those inside an instance left out go with it; every other
    one moved onto the nodes drawn, those landing on the same two ends and input drawn once, counted."""
    merged: dict[tuple[str, str, int], Edge] = {}
    for e in graph.edges:
        here = instance.get(e.source)
        if here is not None and here[1] and here == instance.get(e.target):
            continue
        s, t = drawn.get(e.source, e.source), drawn.get(e.target, e.target)
        key = (s, t, e.input)
        if key in merged:
            first = merged[key]
            merged[key] = replace(first, count=first.count + e.count, local_grad=None, formula=None,
                                  highlighted=first.highlighted or e.highlighted)  # fmt: skip
        else:
            merged[key] = e if (s, t) == (e.source, e.target) else replace(e, source=s, target=t, formula=None)
    return list(merged.values())


# --- a repeat's entry in groups, and its box's label ------------------------------------------------------


def _entry(graph: Graph, repeat: Repeat, finder: _Finder, boxes: dict[str, dict[str, Any]],
           gid: str) -> tuple[dict[str, Any], dict[str, Any] | None]:  # fmt: skip
    """The repeat's ``groups`` entry, with its box labelled (a loop: a new box around its first step,
    returned too, with the nodes beside its calls that it holds)."""
    n = len(repeat.members)
    names = _names(repeat, finder)
    instances = [_instance(graph, repeat, k, names[k]) for k in range(n)]
    differs = _differs(instances, far=repeat.kind == "modules")
    first = repeat.boxes[0]
    detail = _detail(instances, differs)
    loop_box = None
    if repeat.kind == "modules":
        box = boxes[first[0]]
        title = _span(names) + (f" ({box['class']})" if box.get("class") else "")
        box["label"], box["repeat"] = f"{title} ×{n:,}{detail}", n
        cluster = box["id"]
    else:
        cluster = "loop" + gid[1:]  # (a box of its own: the group's id names the group)
        for b in first:
            box = boxes[b]
            box["label"] = (
                box.get("path", box["label"]) + (f" ({box['class']})" if box.get("class") else "") + f" ×{n:,}"
            )
            box["repeat"], box["parent"] = n, cluster
        title = f"loop ({names[0]}–{names[-1].split()[-1]})"
        inner = {m for b in first for m in finder.inside[b]}
        span = f"({names[0]}–{names[-1].split()[-1]}), {names[0]} drawn"  # (whose values its nodes show)
        loop_box = {"id": cluster, "label": f"loop ×{n:,} {span}{detail}", "parent": repeat.parent, "repeat": n,
                    "loose": {m for m in repeat.members[0] if m not in inner}, "holds": first}  # fmt: skip
        if "depth" in boxes[first[0]]:  # (no level of its own: its parent's depth, levels.box_depths)
            loop_box["depth"] = boxes[first[0]]["depth"] - 1
    members = sorted({*repeat.members[0], *(m for b in first for m in finder.inside[b])}, key=finder.position.get)
    entry = {"id": gid, "kind": repeat.kind, "label": title, "repeat": n, "count": n, "cluster": cluster,
             "members": members, "instances": instances, "differs": differs, "collapsed": False, "total": None}  # fmt: skip
    return entry, loop_box


def _names(repeat: Repeat, finder: _Finder) -> list[str]:
    """Each instance's name: its module's path (``transformer.h.7``), or a loop's step (``step 7``)."""
    if repeat.kind == "loop":  # (counted from the loop's first call: a first step that differs is step 0)
        head = repeat.boxes[0][0]
        siblings = finder.children.get(repeat.parent, [])
        first = sum(finder.path(b) == finder.path(head) for b in siblings[: siblings.index(head)])
        return [f"step {k + first}" for k in range(len(repeat.boxes))]
    return [finder.path(b[0]) for b in repeat.boxes]


def _span(paths: list[str]) -> str:
    """``transformer.h.0–11`` for ``transformer.h.0`` .. ``transformer.h.11``; else the first and last."""
    heads = {p.rsplit(".", 1)[0] for p in paths if "." in p}
    tails = [p.rsplit(".", 1)[-1] for p in paths]
    if len(heads) == 1 and all(t.isdigit() for t in tails):
        return f"{heads.pop()}.{tails[0]}–{tails[-1]}"
    return f"{paths[0]} … {paths[-1]}"


def short(name: str) -> str:
    """An instance's name in a flag: ``h.7`` for ``transformer.h.7``."""
    parts = name.split(".")
    return ".".join(parts[-2:]) if len(parts) > 2 else name


def _brief(value: Any) -> dict[str, Any] | None:
    """norm, mean and the NaN and infinities of a value or gradient (``stats.tensor_stats``)."""
    if value is None:
        return None
    stats = value if isinstance(value, TensorStats) else tensor_stats(value)
    return {"norm": stats.norm, "mean": stats.mean, "nan": stats.nan, "inf": stats.inf}


def _instance(graph: Graph, repeat: Repeat, k: int, name: str) -> dict[str, Any]:
    """One instance's statistics: its output's value and gradient (the last of its nodes that another
    one uses), and for a module its parameters' gradients."""
    members = repeat.members[k]
    own = set(members)
    out = next(
        (m for m in reversed(members) if any(e.target not in own for e in graph.consumers_of(m))),
        next((m for m in reversed(members) if graph.node(m).kind == "op"), members[-1]),
    )
    node = graph.node(out)
    found: dict[str, Any] = {"label": name, "output": out, "value": _brief(node.value), "grad": _brief(node.grad)}
    if repeat.kind == "modules":
        found["path"] = name
        grads = [graph.node(m).grad for m in members if graph.node(m).kind == "variable"]
        found["param_grad"] = _together([_brief(g) for g in grads if g is not None])
    else:
        found["call"] = k
    return found


def _together(parts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Several parameters' gradients as one: the norm of all, their NaN and infinities."""
    if not parts:
        return None
    return {
        "norm": float(np.sqrt(sum(p["norm"] ** 2 for p in parts))),
        "nan": sum(p["nan"] for p in parts),
        "inf": sum(p["inf"] for p in parts),
    }


def _differs(instances: list[dict[str, Any]], far: bool = True) -> list[dict[str, Any]]:
    """The instances that stand out, each with why: a NaN or infinity in its output's value or
    gradient or in its parameters' gradients, and with ``far`` a gradient of zero or a gradient norm
    ``FAR`` times from the median of the others (not so for a loop's steps: a gradient that fades
    over the steps back from the output is a fact to see in the sparkline, not one step's fault)."""
    norms = [i["grad"]["norm"] for i in instances if i["grad"] is not None and np.isfinite(i["grad"]["norm"])]
    median = float(np.median(norms)) if norms else None
    found = []
    for item in instances:
        reasons = []
        for key, what in (("value", "value"), ("grad", "grad"), ("param_grad", "parameter grad")):
            stats = item.get(key)
            if stats and stats["nan"]:
                reasons.append(f"{what} NaN")
            elif stats and stats["inf"]:
                reasons.append(f"{what} inf")
        grad = item["grad"]
        if grad is not None and not reasons and median and far:
            if grad["norm"] == 0:
                reasons.append("grad zero")
            elif not 1 / FAR <= grad["norm"] / median <= FAR:
                reasons.append(f"grad norm {grad['norm'] / median:.3g}× the median")
        if reasons:
            found.append({"label": item["label"], "reason": ", ".join(reasons)})
    return found


def sparkline(values: list[float]) -> str:
    """``▁▂▅█``: each value's height between the smallest and the largest, ``!`` for NaN or infinity;
    more than ``SPARK_MOST`` values binned (each bin's largest)."""
    if len(values) > SPARK_MOST:
        size = -(-len(values) // SPARK_MOST)
        values = [_largest(values[k : k + size]) for k in range(0, len(values), size)]
    finite = [v for v in values if np.isfinite(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
    chars = []
    for v in values:
        if not np.isfinite(v):
            chars.append("!")
        else:
            chars.append(SPARK[round((v - low) / (high - low) * (len(SPARK) - 1)) if high > low else 3])
    return "".join(chars)


def _largest(values: list[float]) -> float:
    bad = [v for v in values if not np.isfinite(v)]
    return bad[0] if bad else max(values)


def _detail(instances: list[dict[str, Any]], differs: list[dict[str, Any]]) -> str:
    """The lines under a repeat's label: its instances' gradient norms as a sparkline, and those
    that differ by name (``h.7: grad NaN``)."""
    norms = [i["grad"]["norm"] if i["grad"] is not None else float("nan") for i in instances]
    lines = []
    if any(i["grad"] is not None for i in instances):
        finite = [v for v in norms if np.isfinite(v)]
        spread = f" ({min(finite):.3g}–{max(finite):.3g})" if finite else ""
        lines.append(f"grad norm {sparkline(norms)}{spread}")
    runs: list[list[Any]] = []  # consecutive instances that differ for the same reason, as one line
    index = {item["label"]: k for k, item in enumerate(instances)}
    for d in differs:
        k = index[d["label"]]
        if runs and runs[-1][1] == k - 1 and runs[-1][2] == d["reason"]:
            runs[-1][1] = k
        else:
            runs.append([k, k, d["reason"]])
    for first, last, reason in runs[:DIFFERS_SHOWN]:
        name = short(instances[first]["label"])
        end = instances[last]["label"].rsplit(".", 1)[-1].split()[-1]
        lines.append(f"{name}{'–' + end if last > first else ''}: {reason}")
    if len(runs) > DIFFERS_SHOWN:
        lines.append(f"and {len(runs) - DIFFERS_SHOWN} more that differ (--format json: groups, differs)")
    return "".join("\n" + line for line in lines)
