"""Statements and Python calls as clusters: boxes around the nodes each one computed.

A cluster is a span of the recorded tape (``recording()``): the entries recorded while a
statement ran (``h = tanh(W1 @ x + b1)``) or while a Python function of the user's ran
(``mlp.py:layer``). Spans nest (a call inside a call); each operation belongs to the
innermost span holding its tape entry, each constant to its operation's, and the leaves
to none. ``place`` writes them on the model (``GraphNode.cluster``, ``Graph.clusters``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..autograd.node import edge_node
from ..errors import printable
from .model import Graph

Span = tuple[str, int, int]  # label, first tape entry, one past the last
LABEL_MOST = 60  # characters of a cluster's label (a long statement is cut with …)


def statement_spans(tree: Any, evaluation: Any, trace: Sequence[Any]) -> list[Span]:
    """A span per statement of a program (``a = x + w; y = a * b``) from its recorded steps: each
    statement's steps are its value's syntax nodes in order; the tape entries up to its last
    value's are its own. A single expression has none (the whole graph would be one box)."""
    statements = getattr(tree, "statements", ())
    if not statements:
        return []
    position = {id(entry[0]): i for i, entry in enumerate(trace)}
    text = getattr(tree, "text", "")
    spans: list[Span] = []
    offset = start = 0
    steps = evaluation.steps
    for statement in statements:
        count = len(tree.order(statement.value))
        end = start
        for _, value in steps[offset : offset + count]:
            edge = getattr(value, "_edge", None)
            if edge is not None:
                end = max(end, position.get(id(edge_node(edge)), -1) + 1)
        offset += count
        if end > start:
            spans.append((_short(text[statement.start : statement.end] or statement.name), start, end))
            start = end
    return spans


@contextmanager
def python_calls(trace: list[Any], files: Sequence[str] = (), enabled: bool = True) -> Iterator[list[Span]]:
    """The calls of the user's Python functions while the block runs, as spans of ``trace``
    (``mlp.py:layer``): functions defined in ``files``, or outside gradcli, the standard
    library and installed packages when none are given. Calls that recorded nothing are left out.
    Not ``enabled``: no spans, at no cost."""
    if not enabled:
        yield []
        return
    own = {str(Path(f).resolve()) for f in files}
    skip = tuple(str(Path(p).resolve()) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, _package()})
    wanted: dict[Any, str | None] = {}
    spans: list[Span] = []
    open_calls: list[tuple[Any, int]] = []

    def label(code: Any) -> str | None:
        found = wanted.get(code, False)
        if found is False:
            path = str(Path(code.co_filename).resolve()) if not code.co_filename.startswith("<") else ""
            mine = path in own if own else bool(path) and not path.startswith(skip)
            found = wanted[code] = f"{Path(path).name}:{code.co_name}" if mine and code.co_name != "<module>" else None
        return found

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            if label(frame.f_code) is not None:
                open_calls.append((frame, len(trace)))
        elif event == "return" and open_calls and open_calls[-1][0] is frame:
            _, begun = open_calls.pop()
            if len(trace) > begun:
                spans.append((label(frame.f_code) or "?", begun, len(trace)))

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield spans
    finally:
        sys.setprofile(previous)


def _package() -> str:
    return str(Path(__file__).resolve().parent.parent)


def _short(text: str) -> str:
    text = printable(" ".join(text.split()))
    return text if len(text) <= LABEL_MOST else text[: LABEL_MOST - 1] + "…"


def place(graph: Graph, autograd: dict[str, Any], traced: dict[int, Any], spans: Sequence[Span]) -> None:
    """Each node's innermost span (operations by their tape entry, constants by their consumer's)
    as ``GraphNode.cluster``, and the spans that hold a node (and those around them) as ``graph.clusters``."""
    if not spans:
        return
    ordered = sorted(range(len(spans)), key=lambda k: (spans[k][1], -spans[k][2]))  # outer before inner
    parent: dict[int, int | None] = {}
    around: list[int] = []
    for k in ordered:
        while around and spans[around[-1]][2] <= spans[k][1]:
            around.pop()
        parent[k] = around[-1] if around and spans[around[-1]][2] >= spans[k][2] else None
        around.append(k)
    size = len(traced)
    owner: list[int | None] = [None] * size
    for k in ordered:  # inner spans come later and overwrite
        for p in range(max(spans[k][1], 0), min(spans[k][2], size)):
            owner[p] = k
    position = {key: i for i, key in enumerate(traced)}
    used: set[int] = set()
    for node in graph.nodes:
        if node.kind != "op":
            continue
        entry = autograd.get(node.id)
        p = position.get(id(entry)) if entry is not None else None
        k = owner[p] if p is not None else None
        if k is not None:
            node.cluster = f"c{k}"
            used.add(k)
    for edge in graph.edges:  # a constant operand sits with its operation
        if edge.source == "hidden":
            continue
        source, target = graph.node(edge.source), graph.node(edge.target)
        if source.kind == "constant" and target.cluster:
            source.cluster = target.cluster
    shown = set(used)
    for k in used:
        while parent.get(k) is not None:
            k = parent[k]  # type: ignore[assignment]
            shown.add(k)
    graph.clusters = [
        {"id": f"c{k}", "label": spans[k][0], "parent": None if parent[k] is None else f"c{parent[k]}"}
        for k in ordered
        if k in shown
    ]
