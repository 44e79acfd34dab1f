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
    if framework == "torch":
        from .torch_blame import blame_torch_calls  # lazy: imports torch, only for a function that computes with it

        found, checked = blame_torch_calls(function, values, wrt, rtol, atol)
    elif framework == "jax":
        try:
            from . import jax_blame  # lazy: imports jax, only for a function that computes with it
        except ImportError:  # not there yet: nothing checked
            return None, 0
        found = jax_blame.blame_jax(function, values, wrt, rtol, atol)
        checked = int(getattr(found, "checked", 0) or 0) if found is not None else 0
    else:
        return None, 0
    return (None if found is None else framework_finding(found)), checked


def framework_finding(found: Any) -> Blame:
    """A framework's finding (``TorchBlame``, ``JaxBlame``) as gradcli's own ``Blame``, so that the
    report words it and keys it as for gradcli's nodes."""
    name = found.name
    autograd, numeric = getattr(found, "autograd", np.nan), getattr(found, "numeric", np.nan)
    node = getattr(found, "index", None)
    blame = Blame(
        name if node is None else f"call {node + 1}", name, getattr(found, "grad_fn", "") or name,
        getattr(found, "label", name), float(autograd), float(numeric), getattr(found, "inputs", ""),
        scope=found.scope, line=found.line, framework=found.framework,
    )  # fmt: skip
    return blame


def checked_note(program: Any, blame: bool, checked: int) -> list[str]:
    """What ``--blame`` of a framework's function looked at, said once: its custom Functions only."""
    framework = getattr(program, "framework", None)
    if not blame or framework is None:
        return []
    kind = "custom torch.autograd.Function" if framework == "torch" else "custom_vjp/custom_jvp rule"
    return [
        f"--blame checked {checked} {kind} call{'' if checked == 1 else 's'}, each backward against finite "
        f"differences of its own forward; {title(framework)}'s built-in operations are its own and not checked"
    ]
