"""The graph of a function that computes with PyTorch or JAX, in gradcli's one graph model: the
framework's own nodes (torch_graph.py, jax_graph.py), drawn and checked by the same views."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import UsageError, raised
from ..lang.compute import resolve_wrt
from .model import Graph


def function_graph(program: Any, values: Mapping[str, Any], wrt: Sequence[str], **options: Any) -> Graph:
    """``program`` (a ``FrameworkFunction``) at ``values``, ``wrt`` requiring gradients: its framework's
    graph with values, gradients (``seed``: v of v^T J) and the framework's scopes as boxes."""
    function, given = program.bound(values)  # its Python numbers (jax.jit's static arguments) bound
    try:
        if program.framework == "torch":
            from .torch_graph import torch_function_graph  # lazy: imports torch

            return torch_function_graph(function, given, wrt, **options).lighten()
        from .jax_graph import jax_function_graph  # lazy: imports jax

        return jax_function_graph(function, given, wrt, **options)
    except UsageError:
        raise
    except Exception as exc:  # the user's function raised while its graph was recorded
        raise UsageError(f"{program.origin} raised {raised(exc)}") from None


def mark_blamed(graph: Graph, found: Any) -> Any:
    """Mark ``found`` (check's ``Blame`` of a custom Function or a custom rule) on a framework's graph:
    the op of its backward's name (for a JAX rule, its first equation) in its scope, at its line (a
    JAX rule's equations are at its own function's lines; a call in a loop: the nodes of the earlier
    calls from its line are passed over); the node marked, or None."""
    earlier = getattr(found, "occurrence", 0)
    for node in graph.nodes:
        same = node.grad_fn == found.grad_fn or (node.grad_fn is None and found.op in (node.scope or ""))
        here = node.line in (None, found.line) or node.grad_fn is None
        if node.kind == "op" and same and node.scope == found.scope and here:
            if node.grad_fn == found.grad_fn and earlier > 0:
                earlier -= 1
                continue
            node.blamed = True
            return node
    return _holding(graph, found)


def _holding(graph: Graph, found: Any) -> Any:
    """A JAX rule called inside a loop's body or a branch, which are not drawn: the loop's node (the
    innermost drawn whose scope holds the rule's), marked; or None."""
    scope = found.scope or ""
    holders = [n for n in graph.nodes if n.kind == "op" and n.scope and scope.startswith(f"{n.scope}/")
               and n.op in ("scan", "while", "cond")]  # fmt: skip
    if not holders:
        return None
    node = max(holders, key=lambda n: len(n.scope or ""))
    node.blamed = True
    return node


def framework_locate(program: Any, values: Mapping[str, Any], wrt: Sequence[str] | None) -> Any:
    """``check --blame``'s hook for a framework's function: names the blamed call by its id and label
    on the graph ``gradcli graph`` draws of it (``locate(found, outputs, tape)``, as build's)."""

    def locate(found: Any, *_: Any) -> None:
        if getattr(found, "hook", None) is not None:
            return  # a backward hook: no node of the graph is its own (its text names its module and lines)
        names = resolve_wrt(program, values, wrt)
        try:
            graph = function_graph(program, values, names, point=False)
        except UsageError:  # no graph to name it on (a torch.compile'd function): named by its call alone
            return
        node = mark_blamed(graph, found)
        if node is not None:
            found.node = node.id
            found.label = node.titled_label  # (a JAX rule's node: its first equation, named after the rule)

    return locate


def blame_locator(program: Any, values: Mapping[str, Any], wrt: Sequence[str] | None) -> Any:
    """``check --blame``'s hook that names the blamed node as ``gradcli graph`` draws it ("n4"), for
    gradcli's programs and the frameworks' alike: the one name whichever command reports it."""
    if program.framework:
        return framework_locate(program, values, wrt)
    from .build import locate_blamed  # lazy: as the graph it builds, only where a blame is found

    return locate_blamed
