"""The graph of a function that computes with PyTorch or JAX, in gradcli's one graph model: the
framework's own nodes (torch_graph.py, jax_graph.py), drawn and checked by the same views."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import UsageError
from .model import Graph


def function_graph(program: Any, values: Mapping[str, Any], wrt: Sequence[str], **options: Any) -> Graph:
    """``program`` (a ``FrameworkFunction``) at ``values``, ``wrt`` requiring gradients: its framework's
    graph with values, gradients (``seed``: v of v^T J) and the framework's scopes as boxes."""
    try:
        if program.framework == "torch":
            from .torch_graph import torch_function_graph  # lazy: imports torch

            return torch_function_graph(program.function, values, wrt, **options)
        from .jax_graph import jax_function_graph  # lazy: imports jax

        return jax_function_graph(program.function, values, wrt, **options)
    except UsageError:
        raise
    except Exception as exc:  # the user's function raised while its graph was recorded
        raise UsageError(f"{program.origin} raised {type(exc).__name__}: {exc}") from None
