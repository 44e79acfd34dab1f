"""See a computation graph: one model (``model``), built from autograd (``build``), many views.

From Python:

>>> import gradcli as gc
>>> from gradcli.render import graph, recording
>>> x = gc.tensor(2.0, requires_grad=True, name="x")
>>> with recording() as trace:
...     y = (x + 1) * x
>>> print(graph(y, trace=trace).text())
x = variable  # value=2  grad=5 (2 + 3)
n2 = add(x, 1)  # AddBackward0  value=3  grad=2
f = mul(n2, x)  # MulBackward0  value=6  grad=1  output
<BLANKLINE>

``graph(y).dot()``, ``.json()``, ``.tree()``, ``.html()`` and ``.save("g.png")`` give the
other views (in Jupyter the graph shows itself as the interactive page); without a trace the graph has its structure but not the values
of intermediate nodes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..autograd.tensor import Tensor
from ..errors import MissingProgram
from ..lang.frameworks import framework_of, jax_float64, require
from .build import build, recording
from .levels import checked_depth, leveled, unbounded
from .model import Edge, Graph, GraphNode, keeping_arrays
from .outputs import holds_torch
from .paint import checked_color_by

Node = GraphNode  # the name gc.render.Node had before the layers named their nodes apart


class View:
    """A built graph with its views (what ``graph()`` returns)."""

    def __init__(self, model: Graph) -> None:
        self.model = model

    @property
    def nodes(self) -> list[GraphNode]:
        return self.model.nodes

    @property
    def edges(self) -> list[Edge]:
        return self.model.edges

    def text(self) -> str:
        from .views import text  # lazy: start-up, plot and check --blame draw no graph

        return text(self.model)

    def tree(self) -> str:
        from .views import tree_plain  # lazy: start-up, plot and check --blame draw no graph

        return tree_plain(self.model)

    def dot(self) -> str:
        from .views import dot  # lazy: start-up, plot and check --blame draw no graph

        return dot(self.model)

    def json(self) -> dict[str, Any]:
        return self.model.to_dict()

    def html(self) -> str:
        """The interactive page: one self-contained HTML file (``.save("g.html")`` writes it)."""
        from .page import page  # lazy: start-up, plot and check --blame draw no graph

        return page(self.model)

    def save(self, path: str | Path, fmt: str | None = None, layout_timeout: float | None = 30.0) -> Path:
        """Write the graph to ``path``; the format follows the extension (.png .svg .pdf .html .dot .json .txt).
        Graphviz gets ``layout_timeout`` seconds to draw a picture (None: no limit)."""
        from .layout import time_limit  # lazy: start-up, plot and check --blame lay out no graph
        from .output import write  # lazy: start-up, plot and check --blame write no graph

        with time_limit(layout_timeout):
            return write(self.model, Path(path), fmt)

    def save_arrays(self, path: str | Path) -> Path:
        """Write every node's value and gradient whole to one ``.npz`` (keys ``n3.value``, ``n3.grad``);
        the graph must keep them: ``graph(..., arrays=True)``."""
        from .output import write_arrays  # lazy: start-up, plot and check --blame write no graph

        return write_arrays(self.model, Path(path))

    def _repr_svg_(self) -> str:  # pictures in Jupyter
        from .views import picture  # lazy: start-up, plot and check --blame draw no graph

        return picture(self.model, "svg").decode()

    def _repr_html_(self) -> str | None:
        """The interactive page in Jupyter, in a frame of its own (its script and ids apart from the
        notebook's); None without Graphviz, so Jupyter shows the text instead."""
        from .page import framed  # lazy: start-up, plot and check --blame draw no graph

        try:
            return framed(self.model)
        except MissingProgram:
            return None


def graph(
    *outputs: Any,
    trace: Sequence[Any] | None = None,
    seed: Any = None,
    point: bool = True,
    highlight: Sequence[str] = (),
    max_nodes: int | str | None = None,
    compact: bool = False,
    rankdir: str | None = None,
    arrays: bool = False,
    color_by: str | None = None,
    depth: int | str | None = None,
) -> View:
    """The graph behind tensors built in Python (``recording()`` around the code adds values), or
    ``graph(f, *args)`` that of a JAX function ``f`` at ``args`` (its jaxpr's equations, with values
    and cotangents). PyTorch's own graph for torch tensors (``graph(loss)``, before or after
    ``backward()``; ``trace``: a ``recording()`` of the run, else the latest that computed them: every
    value, module box and, after ``backward()``, every node's gradient) and for ``graph(f, *args)``
    of a function computing with torch (recorded: every value, nn.Module boxes, the user's lines).
    Leaves without a ``name=`` are named by the caller's variables that hold them (``x``, else
    ``leaf0``); without a trace, the values shown are those tensors still hold (the outputs, the
    caller's tensors, what the nodes saved for backward). ``max_nodes``: at most that many nodes
    (200 when not given, repeated structure drawn as one node over 100); given and covering the
    graph, or ``0``/``"all"``, every node is drawn as itself. ``compact`` shows names and values
    without formulas; ``rankdir`` ("TB" or "LR") forces the pictures' direction, else chosen
    from the graph's shape. Values and gradients over 64 elements are kept as statistics (shape, dtype,
    mean, std, min, max, norm, zeros, nonfinite); ``arrays`` keeps them whole too, for ``save_arrays``.
    ``color_by`` ("grad-norm", "nan", "zeros" or "ratio") colours the pictures' nodes and module boxes by
    their gradient health, with a key (NaN and inf red in every mode). ``depth``: boxes (nn.Module calls,
    JAX calls, statements and Python calls) deeper than ``depth`` drawn folded, one node each (their name,
    class, shapes, output value and gradient); ``"all"``: none; not given, a picture draws the deepest
    depth whose text can be read, and says so."""
    color_by = checked_color_by(color_by)
    depth = checked_depth(depth)
    with keeping_arrays(arrays):
        view = _graph(outputs, sys._getframe(1), trace, seed, point, highlight, unbounded(depth, max_nodes), compact,
                      rankdir)  # fmt: skip
    view.model.color_by = color_by
    view.model = leveled(view.model, depth, max_nodes)
    return view


def _graph(outputs: tuple[Any, ...], caller: Any, trace: Any, seed: Any, point: bool, highlight: Sequence[str],
           max_nodes: Any, compact: bool, rankdir: str | None) -> View:  # fmt: skip
    from .layout import checked_rankdir  # lazy: start-up, plot and check --blame lay out no graph

    flat = [t for o in outputs for t in (o if isinstance(o, (list, tuple)) else [o])]
    first = flat[0] if flat and not isinstance(flat[0], Tensor) else None
    calling = first is not None and callable(first) and not holds_torch([first])  # graph(f, *args)
    framework = None if first is None else framework_of(first, outputs[1:] if calling else ())
    if framework is None and first is not None and holds_torch(first):  # a model's output object, a dict
        framework = "torch"
    if framework == "jax" and callable(outputs[0]):  # graph(f, *args): a JAX function and its arguments
        model = _jax_model(first, outputs[1:], seed=seed, point=point, highlight=highlight, max_nodes=max_nodes)
        model.compact, model.rankdir = compact, checked_rankdir(rankdir)
        return View(model)
    if framework == "torch":
        model = _torch_graph(
            list(outputs) if calling else flat,
            caller,
            trace,
            seed=seed,
            point=point,
            highlight=highlight,
            max_nodes=max_nodes,
        )
    else:
        held = _held(caller)
        model = build(flat, trace=trace, seed=seed, point=point, highlight=highlight, max_nodes=max_nodes, held=held)
    model.compact, model.rankdir = compact, checked_rankdir(rankdir)
    return View(model)


def _torch_graph(flat: list[Any], caller: Any, trace: Any, **options: Any) -> Graph:
    """PyTorch's graph of tensors (``graph(t)``) or of a function computing with torch (``graph(f, *args)``)."""
    require("torch")  # (exit 3 with the install line when missing)
    from . import torch_graph  # lazy: torch is imported only when a torch tensor or function is met

    if callable(flat[0]) and not torch_graph.is_torch_tensor(flat[0]):
        return torch_graph.torch_call_graph(flat[0], flat[1:], caller, **options).lighten()
    return torch_graph.torch_tensor_graph(flat, caller, trace, **options).lighten()


def _jax_model(function: Any, args: Sequence[Any], **options: Any) -> Graph:
    """JAX's graph of ``function(*args)``, computed in float64; the caller's JAX keeps its own setting."""
    with jax_float64():
        from .jax_graph import jax_graph  # lazy: imports JAX, only for a function of JAX's

        return jax_graph(function, args, **options)


def _held(frame: Any) -> list[tuple[str, Any]]:
    """The tensors the caller's variables hold (its locals, then its module's globals, as a
    notebook cell keeps them), by name; names starting with ``_`` (IPython's ``_``, ``_3``) left out."""
    found: list[tuple[str, Any]] = []
    for scope in (frame.f_locals, frame.f_globals):
        found += [(name, v) for name, v in list(scope.items()) if isinstance(v, Tensor) and not name.startswith("_")]
    return found


__all__ = ["Edge", "Graph", "GraphNode", "Node", "View", "build", "graph", "recording"]
