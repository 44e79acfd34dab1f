"""Gradient health: each node's and each module box's gradient norm, value norm, their ratio, the
fraction of zeros in the gradient and the count of NaN and infinities, from the values and gradients a
graph keeps (whole arrays up to 64 elements, ``stats.TensorStats`` beyond: norm, zeros, nan and inf are
NumPy's on the whole tensor, so a statistic gives the same numbers as the tensor it stands for).

>>> import numpy as np
>>> from gradcli.render.model import GraphNode
>>> n = GraphNode("n0", "variable", "variable", "w", value=np.array([3.0, 4.0]), grad=np.array([0.0, 0.5]))
>>> node_health(n)
{'grad_norm': 0.5, 'value_norm': 5.0, 'ratio': 0.1, 'zeros': 0.5, 'nonfinite': 0}

``module_rows(graph)``: a row per module box (a cluster with a ``"path"`` or ``"class"``), what the
page's table and ``--color-by`` read; ``ordered(rows, by)`` sorts them as a column does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..stats import TensorStats, tensor_stats
from ..text import percent

#: what ``--color-by`` and the table sort by: a node's or a row's key for each
MEASURES = {"grad-norm": "grad_norm", "nan": "nonfinite", "zeros": "zeros", "ratio": "ratio"}


class _Sum:
    """Sums over tensors: squared norm, zeros, non-finite elements and size (None: no tensor seen)."""

    __slots__ = ("squares", "zeros", "nonfinite", "size", "seen")

    def __init__(self) -> None:
        self.squares, self.zeros, self.nonfinite, self.size, self.seen = 0.0, 0, 0, 0, False

    def add(self, value: Any) -> None:
        if value is None:
            return
        self.seen = True
        if isinstance(value, TensorStats):
            size = value.size
            norm = value.norm if value.norm is not None else 0.0
            self.squares += norm * norm
            self.zeros += round((value.zeros or 0.0) * size)
            self.nonfinite += value.nonfinite
            self.size += size
            return
        a = np.asarray(value)
        if a.dtype.kind == "c":
            a = np.abs(a)
        if a.dtype.kind not in "fiub":  # (an object array: a value of several outputs)
            return
        a = a.astype(np.float64, copy=False)
        with np.errstate(all="ignore"):
            self.squares += float(np.sum(a * a))
        self.zeros += int(np.count_nonzero(a == 0))
        self.nonfinite += int(np.count_nonzero(~np.isfinite(a)))
        self.size += a.size

    @property
    def norm(self) -> float | None:
        return math.sqrt(self.squares) if self.seen else None


def _ratio(grad_norm: float | None, value_norm: float | None) -> float | None:
    """Gradient norm over value norm; None where either is missing or the value is all zeros."""
    if grad_norm is None or value_norm is None or value_norm == 0:
        return None
    return grad_norm / value_norm


def _norm(value: Any) -> float | None:
    """The 2-norm of a value or gradient as NumPy computes it (``np.linalg.norm``), or its statistic's."""
    if value is None:
        return None
    if isinstance(value, TensorStats):
        return value.norm
    a = np.asarray(value)
    if a.dtype.kind not in "fiubc":
        return None
    with np.errstate(all="ignore"):
        return float(np.linalg.norm(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64).ravel()))


def node_health(node: Any) -> dict[str, Any]:
    """``grad_norm`` and ``value_norm`` (2-norms, None where not kept), ``ratio`` (grad norm / value
    norm), ``zeros`` (the fraction of the gradient's elements exactly 0), ``nonfinite`` (NaN and
    infinities in the value and the gradient together)."""
    value, grad = _Sum(), _Sum()
    value.add(node.value)
    grad.add(node.grad)
    grad_norm, value_norm = _norm(node.grad), _norm(node.value)
    zeros = node.grad.zeros if isinstance(node.grad, TensorStats) else grad.zeros / grad.size if grad.size else None
    return {
        "grad_norm": grad_norm,
        "value_norm": value_norm,
        "ratio": _ratio(grad_norm, value_norm),
        "zeros": zeros,
        "nonfinite": value.nonfinite + grad.nonfinite,
    }


def module_boxes(graph: Any) -> list[dict[str, Any]]:
    """The clusters that are modules (a ``"path"`` or ``"class"``: an ``nn.Module``, a flax or
    equinox module), not a program's statements or Python calls."""
    return [c for c in graph.clusters if "path" in c or "class" in c]


def _members(graph: Any, boxes: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    """Each box's nodes, those of the boxes inside it too, in evaluation order."""
    parent = {c["id"]: c.get("parent") for c in graph.clusters}
    inside: dict[str, list[Any]] = {b["id"]: [] for b in boxes}
    for node in graph.nodes:
        box = node.cluster
        while box is not None:
            if box in inside:
                inside[box].append(node)
            box = parent.get(box)
    return inside


def _outputs(graph: Any, nodes: Sequence[Any]) -> list[Any]:
    """The operations of a box that something outside it reads (or that are the graph's outputs)."""
    ids = {n.id for n in nodes}
    outs = set(graph.outputs)
    return [
        n
        for n in nodes
        if n.kind != "variable"
        and n.kind != "constant"
        and (n.id in outs or any(e.target not in ids for e in graph.consumers_of(n.id)))
    ]


def _depth(box: dict[str, Any], parent: dict[str, Any]) -> int:
    depth, up = 1, box.get("parent")
    while up is not None:
        depth, up = depth + 1, parent.get(up)
    return depth


def module_rows(graph: Any) -> list[dict[str, Any]]:
    """A row per module box, in the graph's order: ``id`` (the cluster's), ``path``, ``class``, ``depth``
    (1: outermost), ``params`` (parameter elements, those of the modules inside it too), ``grad_norm``
    and ``value_norm`` (of its parameters' gradients and values together; a box without parameters:
    of its outputs'), ``of`` (``"parameters"`` or ``"output"``: which), ``ratio``, ``zeros`` (fraction
    of those gradients' elements exactly 0) and ``nonfinite`` (NaN and infinities in every gradient of
    the box's nodes, where they arise; NaN in every value; an infinity in a value only where the box
    gives it out: the -inf an attention mask writes inside its block, which softmax turns into 0, is
    no alarm)."""
    boxes = module_boxes(graph)
    parent = {c["id"]: c.get("parent") for c in graph.clusters}
    inside = _members(graph, boxes)
    rows = []
    for box in boxes:
        nodes = inside[box["id"]]
        params = [n for n in nodes if n.kind == "variable"]
        measured = params or _outputs(graph, nodes)
        values, grads, every = _Sum(), _Sum(), _Sum()
        for n in measured:
            values.add(n.value)
            grads.add(n.grad)
        given = {n.id for n in _outputs(graph, nodes)}
        for n in nodes:
            every.add(n.grad)
        alarms = every.nonfinite + sum(_nonfinite(n.value, infinities=n.id in given) for n in nodes)
        rows.append(
            {
                "id": box["id"],
                "path": box.get("path", box.get("label")),
                "class": box.get("class"),
                "depth": _depth(box, parent),
                "params": int(sum(_size(n) for n in params)),
                "of": "parameters" if params else "output",
                "grad_norm": grads.norm,
                "value_norm": values.norm,
                "ratio": _ratio(grads.norm, values.norm),
                "zeros": grads.zeros / grads.size if grads.size else None,
                "nonfinite": alarms,
            }
        )
    return rows


def _nonfinite(value: Any, *, infinities: bool) -> int:
    """NaN (and, if ``infinities``, infinite) elements of a node's value: its statistics' counts, or
    counted on the array (complex: on the modulus); 0 for no value or one of several outputs."""
    if value is None or (not isinstance(value, TensorStats) and np.asarray(value).dtype.kind not in "fc"):
        return 0
    stats = value if isinstance(value, TensorStats) else tensor_stats(value)  # (a small array: its own counts)
    return stats.nan + (stats.inf if infinities else 0)


def _size(node: Any) -> int:
    if node.value is not None:
        return int(np.size(node.value))
    return int(np.prod(node.shape, dtype=np.int64))


def ordered(rows: Iterable[dict[str, Any]], by: str) -> list[dict[str, Any]]:
    """``rows`` sorted as the table's column ``by`` (a ``MEASURES`` name or key) sorts them: largest
    first, a NaN measure before every number (the worst there is), rows without it last; ``nan``: most
    NaN and infinities first; the innermost box first among equals (where a measure arises, not every
    box around it)."""
    key = MEASURES.get(by, by)

    def rank(row: dict[str, Any]) -> tuple[Any, ...]:
        v = row.get(key)
        if v is None:
            return (2, 0.0, -row.get("depth", 0))
        nan = isinstance(v, float) and math.isnan(v)
        return (0 if nan else 1, 0.0 if nan else -float(v), -row.get("depth", 0))

    return sorted(rows, key=rank)


def table_lines(graph: Any) -> list[str]:
    """With ``--color-by``, the text views' table of the module boxes, sorted by that measure (the
    worst first): ``net.1 (Gate)  2 params  grad_norm nan  ratio nan  zeros 0%  nonfinite 2``."""
    by = getattr(graph, "color_by", None)
    rows = module_rows(graph) if by else []
    if not rows:
        return []
    lines = [f"module boxes by {by} (of their parameters, or of their output where they have none):"]
    for row in ordered(rows, by):
        cls = f" ({row['class']})" if row["class"] else ""
        zeros = "-" if row["zeros"] is None else percent(row["zeros"])
        lines.append(
            f"  {row['path']}{cls}  {row['params']:,} params  grad_norm {_g(row['grad_norm'])}  "
            f"ratio {_g(row['ratio'])}  zeros {zeros}  nonfinite {row['nonfinite']:,}"
        )
    return lines


def _g(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"
