"""``check --blame`` of a function that computes with PyTorch or JAX.

The framework's own operations are its own and trusted; its custom Functions (a
``torch.autograd.Function`` subclass, a ``jax.custom_vjp`` rule) are what a user writes and gets
wrong, so those are checked, each alone: its backward against finite differences of its forward
(check/torch_blame.py, check/jax_blame.py). The finding is reported as gradcli's own ``Blame``, with
the module path and the user's line that called it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..lang.frameworks import title
from .result import Blame


def framework_blame(
    framework: str, function: Any, values: Mapping[str, Any], wrt: Sequence[str], rtol: float | None, atol: float | None
) -> tuple[Blame | None, int]:
    """``--blame`` of a function that computes with PyTorch or JAX: the framework's own operations are
    its own and trusted, so its custom Functions (``torch.autograd.Function``, ``jax.custom_vjp``) are
    checked, each alone, backward against finite differences of its forward. The first that
    disagrees, as a ``Blame`` with its module path and the user's line, and how many were checked."""
    arrays = {name: np.asarray(getattr(v, "array", v), dtype=np.float64) for name, v in values.items()}
    if framework == "torch":
        from .torch_blame import blame_torch_calls  # lazy: imports torch, only for a function that computes with it

        found, checked = blame_torch_calls(function, arrays, wrt, rtol, atol)
    elif framework == "jax":
        from .jax_blame import blame_jax_calls  # lazy: imports jax, only for a function that computes with it

        found, checked = blame_jax_calls(function, arrays, wrt, rtol, atol)
    else:
        return None, 0
    return (None if found is None else framework_finding(found)), checked


def framework_finding(found: Any) -> Blame:
    """A framework's finding (``TorchBlame``, ``JaxBlame``: both carry what gradcli's own ``Blame``
    words, v . J u for random directions by the backward and by finite differences) as a ``Blame``,
    so that the report words it and keys it as for gradcli's nodes."""
    node = f"{'call' if getattr(found, 'hook', None) is None else 'hook'} {found.index + 1}"
    return Blame(
        node, found.name, found.grad_fn or found.name, found.label or found.name,
        float(found.autograd), float(found.numeric), found.inputs,
        scope=found.scope, line=found.line, framework=found.framework, occurrence=getattr(found, "occurrence", 0),
        hook=getattr(found, "hook", None), without=getattr(found, "without", None),
        registered=getattr(found, "registered", None),
    )  # fmt: skip


def checked_note(program: Any, blame: bool, checked: int) -> list[str]:
    """What ``--blame`` of a framework's function looked at, said once: its custom Functions only;
    before it, how the framework made its numbers where not as asked (JAX's forward mode for a while loop)."""
    framework = getattr(program, "framework", None)
    said = list(program.notes) if framework is not None else []
    if not blame or framework is None:
        return said
    kind, part = (
        ("custom torch.autograd.Function", "backward") if framework == "torch" else ("custom_vjp/custom_jvp", "rule")
    )
    hooks = getattr(checked, "hooks", 0)
    watched = (
        f", and {hooks} backward hook{'' if hooks == 1 else 's'} (the gradient with and without each hook that changed "
        "one, against finite differences of the function)"
        if hooks
        else ""
    )
    return said + [
        f"--blame checked {checked} {kind} call{'' if checked == 1 else 's'}, each {part} against finite "
        f"differences of its own forward{watched}; {title(framework)}'s built-in operations are its own and not checked"
    ]
