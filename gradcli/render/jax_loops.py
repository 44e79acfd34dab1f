"""A JAX loop's box (``scan``, ``fori_loop``, ``while_loop``, ``cond``): its body drawn once, its
carried values as loop edges, each iteration's statistics.

The body's nodes show the values of one iteration (the first: ``GraphNode.iteration``); the box says
how many there were (``scan ×20``) and draws the norm of the carry after each as a sparkline
(``‖carry‖ ▁▂▅█``); each carried value goes back from the body's output to its input on an edge
counting the iterations after the first (``Edge.count``, drawn ``×19``). ``Graph.groups`` gets one
entry a loop, as a repeated block: ``{"kind": "scan", "repeat": 20, "members": [...],
"instances": [{"iteration", "norm", "carries", "grad_norm"}, ...]}``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..lang.frameworks.jax_record import JaxCall, JaxTrace
from .model import Edge, Graph

#: characters of a sparkline, lowest to highest
BARS = "▁▂▃▄▅▆▇█"
#: a sparkline's most characters: beyond, each is the mean of a run of iterations
SPARK_WIDTH = 32


def sparkline(values: list[float], width: int = SPARK_WIDTH) -> str:
    """``values`` as bars from lowest to highest (``▁▂▅█``); over ``width``, each bar the mean of a run
    of them; a value that is not finite is ``?``."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return ""
    if data.size > width:
        data = np.array([np.mean(part) for part in np.array_split(data, width)])
    finite = data[np.isfinite(data)]
    if finite.size == 0:
        return "?" * data.size
    low, high = float(finite.min()), float(finite.max())
    span = high - low
    bars = []
    for v in data:
        if not np.isfinite(v):
            bars.append("?")
        else:
            bars.append(BARS[int(round((v - low) / span * (len(BARS) - 1)))] if span > 0 else BARS[3])
    return "".join(bars)


def carry_norms(call: JaxCall) -> list[float]:
    """The norm of all the loop's floating carries together after each iteration."""
    return [step["norm"] for step in call.stats]


def box_label(call: JaxCall) -> str:
    """``scan ×20  ‖carry‖ ▁▂▅█``, ``while ×?``, ``cond: branch 1 of 2``, ``layers[0] (Linear)``, ``jit:f``."""
    if call.kind == "module":
        return f"{call.name} ({call.module})" if call.module and call.module != call.name else call.name
    if call.kind == "cond":
        return "cond" if call.branch is None else f"cond: branch {call.branch[0]} ran (of {call.branch[1]})"
    if call.kind not in ("scan", "while"):
        return call.label
    count = "?" if call.repeat is None else f"{call.repeat:,}"
    label = f"{call.kind} ×{count}"
    if len(call.stats) > 1:
        label += f"  ‖carry‖ {sparkline(carry_norms(call))}"
    return label


def loop_label(kind: str, ref: str, call: JaxCall | None, position: int) -> str:
    """The label of a loop's input or output drawn in its box: ``carry(h0)`` (the carry, starting from
    ``h0``), ``xs[t]`` (a slice of ``xs``), ``last(n11)`` / ``stacked(n11)`` (a scan's ``position``-th
    output: its carry after the last iteration, or the stack of every iteration's)."""
    if kind == "carry":
        return f"carry({ref})"
    if kind == "slice":
        return f"{ref}[t]"
    if call is None or call.kind == "cond":
        return ref
    return f"stacked({ref})" if call.kind == "scan" and position >= len(call.carries) else f"last({ref})"


def iterations(trace: JaxTrace) -> dict[int | None, int | None]:
    """Each call -> the iteration its body's nodes show (a loop's, or the loop around it)."""
    found: dict[int | None, int | None] = {}
    for k, call in enumerate(trace.calls):
        parent = found.get(call.parent)
        found[k] = call.iteration if call.kind in ("scan", "while") else parent
    return found


def loops(trace: JaxTrace, graph: Graph, node_of: dict[int, str]) -> list[dict[str, Any]]:
    """The loop edges of each loop drawn (from the body's output carried to its input, ``×N-1``) added
    to ``graph``, and a group a loop: its members (the nodes in its box) and each iteration's norms."""
    drawn = {n.id for n in graph.nodes}
    inside: dict[str, list[str]] = {}
    parents = {f"c{k}": (None if c.parent is None else f"c{c.parent}") for k, c in enumerate(trace.calls)}
    for node in graph.nodes:
        box = node.cluster
        while box is not None:
            inside.setdefault(box, []).append(node.id)
            box = parents.get(box)
    groups = []
    for k, call in enumerate(trace.calls):
        if call.kind not in ("scan", "while") or f"c{k}" not in inside:
            continue
        for out, back in call.carries:
            source, target = node_of.get(trace.shown_as.get(out, out)), node_of.get(back)
            if source in drawn and target in drawn and source != target and (call.repeat or 0) > 1:
                graph.edges.append(Edge(source, target, 0, count=call.repeat - 1))
        groups.append(_group(k, call, inside[f"c{k}"]))
    return groups


def _group(k: int, call: JaxCall, members: list[str]) -> dict[str, Any]:
    """The loop's ``groups`` entry, as a repeated block's (render/repeats.py): ``cluster`` its box,
    an instance an iteration (``value``: its carries' statistics, ``grad``: their cotangents')."""
    instances = [
        {"label": f"iteration {t + 1}", "call": t, "value": stats, "carries": list(call.norms[t]),
         "grad": None if call.grads is None else call.grads[t]}
        for t, stats in enumerate(call.stats)
    ]  # fmt: skip
    differs = [
        {"label": i["label"], "why": "NaN or infinity in the carry"}
        for i in instances
        if i["value"]["nan"] or i["value"]["inf"] or (i["grad"] and (i["grad"]["nan"] or i["grad"]["inf"]))
    ]
    return {
        "id": f"loop{k}", "kind": call.kind, "label": call.kind, "cluster": f"c{k}", "repeat": call.repeat,
        "count": call.repeat, "members": members, "shown": call.iteration, "instances": instances,
        "differs": differs, "collapsed": False, "total": None, "roots": [],
    }  # fmt: skip
