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
    """A framework's finding (``TorchBlame``, ``JaxBlame``) as gradcli's own ``Blame``, so that the
    report words it and keys it as for gradcli's nodes: v . J u for random directions by the rule
    and by finite differences (from the two vectors v . J where the finding has no such numbers)."""
    autograd, numeric = getattr(found, "autograd", np.nan), getattr(found, "numeric", np.nan)
    if not (np.isfinite(autograd) and np.isfinite(numeric)) and np.size(getattr(found, "rule", ())):
        rule = np.asarray(getattr(found, "rule", np.zeros(0)), dtype=np.float64).reshape(-1)
        differences = np.asarray(getattr(found, "differences", rule), dtype=np.float64).reshape(-1)
        u = np.random.default_rng(0).standard_normal(rule.size)
        autograd, numeric = float(rule @ u), float(np.where(np.isfinite(differences), differences, rule) @ u)
    kind = getattr(found, "kind", None)  # JAX: custom_vjp or custom_jvp, its rules have no node names
    grad_fn = getattr(found, "grad_fn", None) or (f"the {kind} rule of {found.name}" if kind else found.name)
    return Blame(
        f"call {found.index + 1}", found.name, grad_fn, getattr(found, "label", None) or found.name,
        float(autograd), float(numeric), getattr(found, "inputs", ""),
        scope=found.scope, line=found.line, framework=found.framework,
    )  # fmt: skip


def checked_note(program: Any, blame: bool, checked: int) -> list[str]:
    """What ``--blame`` of a framework's function looked at, said once: its custom Functions only."""
    framework = getattr(program, "framework", None)
    if not blame or framework is None:
        return []
    kind, part = (
        ("custom torch.autograd.Function", "backward") if framework == "torch" else ("custom_vjp/custom_jvp", "rule")
    )
    return [
        f"--blame checked {checked} {kind} call{'' if checked == 1 else 's'}, each {part} against finite "
        f"differences of its own forward; {title(framework)}'s built-in operations are its own and not checked"
    ]
