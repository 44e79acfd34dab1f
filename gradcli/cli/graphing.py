"""``gradcli graph``: the program's graph (gradcli's own, or a framework's) built, with --blame and
--arrays, and written in the format asked for. The other commands are in commands.py."""

from __future__ import annotations

import sys
from typing import Any

from ..autograd import Tensor
from ..errors import UsageError
from ..files import refuse_same
from ..lang import ast
from ..lang.compute import (
    resolve_wrt,
    single_output,
)
from ..lang.values import names_list, seed_vector
from . import output
from .inputs import Given
from .reading import read_program
from .report import reported


def draw(given: Given) -> None:
    """``gradcli graph``: the computation graph (values, gradients, local derivatives) as a view;
    ``--arrays FILE.npz``: every value and gradient whole beside it."""
    with reported():
        from ..render.model import keeping_arrays  # lazy: start-up, eval draws nothing

        if given.arrays:
            _separate(given.arrays, given.out)
            refuse_same(given.arrays, [given.out, given.file], "--arrays")
        with keeping_arrays(bool(given.arrays)):
            graph, path, fmt = _drawn(given)
        _emit_graph(graph, path, fmt, given.layout_timeout)
        if given.arrays:
            from pathlib import Path  # lazy: start-up, eval writes no file here

            from ..render.output import write_arrays  # lazy: start-up, eval draws nothing

            output.wrote(write_arrays(graph, Path(given.arrays)), "every value and gradient whole")


def _separate(arrays: str, out: str | None) -> None:
    """``--arrays`` and ``-o`` name two files (the second written would replace the first)."""
    import os  # lazy: start-up, eval writes no file here

    if out is not None and os.path.abspath(out) == os.path.abspath(arrays):
        raise UsageError(f"--arrays {arrays} is also -o: write the arrays and the view to two files")


def _drawn(given: Given) -> tuple[Any, Any, str]:
    """The graph ``gradcli graph`` shows, with where and in what format."""
    from ..autograd.tape import recording  # lazy: start-up, eval records nothing (its tape only)
    from ..render.build import build, checked_max_nodes  # lazy: start-up, eval draws nothing
    from ..render.clusters import python_calls, statement_spans  # lazy: start-up, eval draws nothing
    from ..render.layout import checked_rankdir  # lazy: start-up, eval draws nothing
    from ..render.levels import checked_depth, leveled, unbounded  # lazy: start-up, eval draws nothing
    from ..render.paint import checked_color_by  # lazy: start-up, eval draws nothing

    max_nodes = checked_max_nodes(given.max_nodes)
    rankdir = checked_rankdir(given.rankdir)
    depth = checked_depth(given.depth)
    color_by = checked_color_by(given.color_by)
    depth = checked_depth(given.depth)
    program, values = read_program(given, given.out)
    point = bool(values)
    if not point:  # the structure alone: any value of the right kind will do
        values = {name: 1.0 for name in program.free_variables()}  # (a parameter with a default keeps it)
    names = resolve_wrt(program, values, names_list(given.wrt) or None)
    path, fmt = _graph_format(given)
    output.use_digits(given.digits, fmt)
    with recording() as trace, python_calls(trace, enabled=not program.replayable) as calls:
        try:
            evaluation = program.run(values, names, record_steps=True)
        except UsageError as problem:
            if not point:
                raise UsageError(f"{problem.message} (give the variables values with --at)") from None
            raise
    vector = None
    if point and given.seed is not None:
        vector = seed_vector(given.seed, single_output(evaluation).shape)
    if program.framework is not None:  # the framework's own graph, in the one graph model
        graph = _framework_graph(program, values, names, vector, point, given, unbounded(depth, max_nodes), rankdir)
        graph.color_by = color_by
        return leveled(graph, depth, max_nodes), path, fmt
    found = (
        _blamed(trace, fmt) if given.blame else None
    )  # before build: building with gradients frees what the nodes saved
    graph = build(
        evaluation.outputs, trace=trace, texts=_ProgramTexts(evaluation), seed=vector, point=point, free=True,
        highlight=names_list(given.highlight, "--highlight"), max_nodes=unbounded(depth, max_nodes),
        blamed=[found.autograd_node] if found else (), clusters=calls + statement_spans(program.tree, evaluation, trace),
    )  # fmt: skip
    graph.compact, graph.rankdir, graph.color_by = given.compact, rankdir, color_by
    if given.blame:
        _say_blame(graph, found)
    if evaluation.nonfinite and point:
        output.warn(f"non-finite value: {evaluation.nonfinite}")
    return leveled(graph, depth, max_nodes), path, fmt


def _framework_graph(program: Any, values: dict[str, Any], names: list[str], seed: Any, point: bool, given: Given,
                     max_nodes: Any, rankdir: Any) -> Any:  # fmt: skip
    """``gradcli graph FILE.py:f`` of a function computing with PyTorch or JAX: the framework's own graph
    (its node names, values, gradients, nn.Module boxes), drawn by the same views."""
    from ..render.frameworks import function_graph  # lazy: start-up, eval draws nothing

    graph = function_graph(program, values, names, seed=seed, point=point, max_nodes=max_nodes,
                           highlight=names_list(given.highlight, "--highlight"))  # fmt: skip
    graph.compact, graph.rankdir = given.compact, rankdir
    if given.blame:
        _say_blame(graph, _framework_blame(program, values, names, graph))
    return graph


def _framework_blame(program: Any, values: dict[str, Any], names: list[str], graph: Any) -> Any:
    """``graph --blame`` of a framework's function: its first custom Function (or custom_vjp rule) whose
    backward disagrees with differences of its forward, marked on the graph where it is drawn."""
    from ..check.framework_blame import framework_blame  # lazy: start-up, eval checks nothing
    from ..render.frameworks import mark_blamed  # lazy: start-up, eval draws nothing
    from .progress import working  # lazy: start-up, threads

    with working("checking every custom Function's backward (--blame)", quiet=True):
        function, given = program.bound(values)  # (jax.jit's static arguments bound)
        found, _ = framework_blame(program.framework, function, given, names, None, None)
    if found is not None:
        mark_blamed(graph, found)
    return found


def _graph_format(given: Given) -> tuple[Any, str]:
    """-o's path (None: stdout) and the format of the view (``--json`` is ``--format json``); a binary
    format to a terminal is refused before the work, where it would be noise."""
    from pathlib import Path  # lazy: start-up, eval writes no file here

    from ..render.output import format_for  # lazy: start-up, eval draws nothing

    path = Path(given.out) if given.out else None
    fmt = format_for(path, "json" if given.as_json else given.fmt)
    if path is None and fmt in ("png", "pdf") and output.terminal():
        raise UsageError(f"--format {fmt} is binary: write it with -o FILE, or send stdout to a file or a pipe")
    return path, fmt


def _blamed(trace: Any, fmt: str) -> Any:
    """``--blame``: the first node whose own derivative disagrees with finite differences (or None)."""
    from ..check.blame import blame_nodes  # lazy: start-up, eval checks nothing
    from .progress import working  # lazy: start-up, threads

    with working("checking every node's derivative (--blame)", quiet=fmt == "json"):
        found, _ = blame_nodes(trace)
    return found


def _say_blame(graph: Any, found: Any) -> None:
    """``graph --blame``'s finding on stderr: the node marked in red, or that every node agrees."""
    marked = next((n for n in graph.nodes if n.blamed), None)
    if found is None:
        sys.stderr.write("blame: every node's derivative agrees with finite differences\n")
    elif getattr(found, "hook", None) is not None:  # a backward hook: no node of the graph is its own
        sys.stderr.write(f"blame: {found.text()}\n")
    else:
        where = f"node {marked.id} ({marked.titled_label})" if marked else "a node not shown"
        sys.stderr.write(f"blame: {where}, marked in red: {found.text()}\n")


def _emit_graph(graph: Any, path: Any, fmt: str, layout_timeout: float | None) -> None:
    """The graph to ``path`` (with a spinner while Graphviz lays out a picture or page), bytes to a
    stdout that is not a terminal, or text to stdout."""
    from ..render.layout import time_limit  # lazy: start-up, eval draws nothing
    from ..render.output import BINARY, render, show, write  # lazy: start-up, eval draws nothing

    with time_limit(layout_timeout):
        if path is not None:
            from .progress import working  # lazy: start-up, threads

            drawn = graph.drawn_nodes  # the count dot's time limit names too (views.picture)
            what = f"Graphviz is drawing {drawn:,} nodes"
            with working(what, quiet=fmt not in (*BINARY, "html")):  # the pictures and the page are laid out by dot
                write(graph, path, fmt)
            output.wrote(path, f"{drawn:,} nodes")
        elif fmt in ("png", "pdf"):
            output.write_binary(render(graph, fmt), f"--format {fmt}")
        else:
            rich = output.rich_wanted()
            show(graph, fmt, rich=rich, digits=output.digits(), console=output.console() if rich else None)


class _ProgramTexts:
    """``id(tensor) -> program text``, unparsed on demand for the nodes a view shows.

    Only subexpressions of up to ``LIMIT`` nodes get their text: unparsing the
    subtree under every value of a 1e5-term sum would be quadratic, and such a
    label could not be read anyway (the view writes ``n3 + n7`` instead).
    """

    LIMIT = 40

    def __init__(self, evaluation: Any) -> None:

        self._nodes: dict[int, Any] = {}
        size: dict[int, int] = {}
        for node, value in evaluation.steps:  # children come before their parents
            size[id(node)] = 1 + sum(size.get(id(child), 1) for child in node.children())
            computed = isinstance(value, Tensor) and not isinstance(node, (ast.Name, ast.Number))
            if computed and size[id(node)] <= self.LIMIT:
                self._nodes.setdefault(id(value), node)

    def get(self, key: int, default: str | None = None) -> str | None:
        from ..lang.unparse import unparse  # lazy: start-up, only graph labels nodes with text

        node = self._nodes.get(key)
        return default if node is None else unparse(node)
