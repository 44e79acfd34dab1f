"""``check --blame`` of backward hooks: which ``register_hook`` / ``register_full_backward_hook`` makes a
PyTorch function's gradient wrong?

A hook that returns a gradient replaces the one autograd computed (a tensor hook's ``grad``, a module
hook's ``grad_input`` or ``grad_output``); one that returns None, or the gradient it was given, only
reads. The function's forward ran once with each hook watched (lang/frameworks/torch_hooks.py); here
its backward runs along a random cotangent with every hook, then with each hook that changed a
gradient switched off (as if removed), and each is projected on a random direction of the inputs
(at each input's own scale). Finite differences of the function along the same direction give the
true number. The hook whose removal makes the gradient agree, where with it the gradient does not,
is named, with its module path and lines. The cost is one forward of differences and one backward per
hook that changed something, whatever the number of weights.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..lang.frameworks.torch_hooks import HookSite, HookWatch
from ..lang.frameworks.torch_record import TorchRecord, input_tensor
from .blame import input_scale
from .numeric import finite_differences

TOLERANCE = 1e-6  # relative to the sum of |g_i u_i|: a hook off by 1e-4 stands out by two orders


@dataclass
class HookFinding:
    """The hook blamed, and the gradient along a random direction with it, without it, and by
    finite differences of the function."""

    site: HookSite
    scope: str | None  # the module path a message names
    autograd: float
    without: float
    numeric: float


def blame_hooks(
    function: Callable[..., Any],
    tensors: Mapping[str, Any],
    output: Any,
    watch: HookWatch,
    record: TorchRecord,
    wrt: Sequence[str] | None,
) -> HookFinding | None:
    """The hook whose removal makes ``function``'s gradient agree with finite differences (None: no
    hook changed a gradient, or the gradient agrees with them all, or no one hook's removal mends it)."""
    leaves = [t for name, t in tensors.items() if (wrt is None or name in wrt) and t.requires_grad]
    outputs = [o for o in _flat(output) if o.requires_grad and o.is_floating_point()]
    if not leaves or not outputs:
        return None
    rng = np.random.default_rng(1)
    cotangents = [torch.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype) for o in outputs]

    def gradient() -> np.ndarray:
        grads = torch.autograd.grad(outputs, leaves, cotangents, retain_graph=True, allow_unused=True)
        return np.concatenate([np.zeros(t.numel()) if g is None else g.detach().to(torch.float64).numpy().ravel()
                               for g, t in zip(grads, leaves)])  # fmt: skip

    full = gradient()
    changed = [s for s in watch.sites if s.watch is not None and s.watch.changed]
    if not changed:
        return None
    x0 = np.concatenate([t.detach().to(torch.float64).numpy().ravel() for t in leaves])
    u = rng.standard_normal(x0.shape) * input_scale(x0)
    numeric, error = _along(function, tensors, leaves, cotangents, x0, u)
    if numeric is None:
        return None
    with_hooks = float(full @ u)
    scale = float(np.abs(full * u).sum())

    def agrees(value: float) -> bool:
        return abs(value - numeric) <= TOLERANCE * max(scale, abs(numeric)) + 10.0 * error

    if agrees(with_hooks):
        return None
    culprit, without = _mending(changed, gradient, u, agrees)
    if culprit is None:
        return None
    return HookFinding(culprit, culprit.where(watch.paths) or _scope(culprit, record, tensors), with_hooks, without,
                       numeric)  # fmt: skip


def _mending(
    changed: list[HookSite], gradient: Callable[[], np.ndarray], u: np.ndarray, agrees: Callable[[float], bool]
) -> tuple[HookSite | None, float]:
    """The first hook (in the order met) whose removal alone makes the gradient agree, and the gradient
    along ``u`` without it; where none alone does but all together do, the first of them."""
    for site in changed:
        site.watch.off = True  # type: ignore[union-attr]
        try:
            without = float(gradient() @ u)
        finally:
            site.watch.off = False  # type: ignore[union-attr]
        if agrees(without):
            return site, without
    for site in changed:
        site.watch.off = True  # type: ignore[union-attr]
    try:
        without = float(gradient() @ u)
    finally:
        for site in changed:
            site.watch.off = False  # type: ignore[union-attr]
    return (changed[0], without) if agrees(without) else (None, without)


def _along(
    function: Callable[..., Any],
    tensors: Mapping[str, Any],
    leaves: list[Any],
    cotangents: list[Any],
    x0: np.ndarray,
    u: np.ndarray,
) -> tuple[float | None, float]:
    """d/dt v . function(x0 + t u) at t = 0 by Richardson differences, and its error; None where the
    differences did not converge or the function steps there (nothing to judge a hook by)."""
    positions = {id(t): k for k, t in enumerate(leaves)}
    sizes = np.cumsum([0] + [t.numel() for t in leaves])

    def value(t: float) -> float:
        moved = x0 + t * u
        given = {}
        for name, tensor in tensors.items():
            k = positions.get(id(tensor))
            if k is None:
                given[name] = tensor
            else:
                row = moved[sizes[k] : sizes[k + 1]].reshape(tuple(tensor.shape))
                given[name] = input_tensor(row, True).to(tensor.dtype)  # (a hook registers only where grad flows)
        with torch.enable_grad():
            outs = [o for o in _flat(function(**given)) if isinstance(o, torch.Tensor) and o.is_floating_point()]
        return float(
            sum(torch.sum(c.to(torch.float64) * o.detach().to(torch.float64)) for c, o in zip(cotangents, outs))
        )

    f0 = np.array([value(0.0)])
    if not np.isfinite(f0).all():
        return None, 0.0
    estimate = finite_differences(lambda points: np.array([[value(float(t))] for t in points[:, 0]]), np.zeros(1), f0)
    if estimate.kink is not None and estimate.kink[0, 0]:
        return None, 0.0
    numeric, error = float(estimate.value[0, 0]), float(estimate.error[0, 0])
    if not (np.isfinite(numeric) and error <= 1e-3 * max(abs(numeric), 1e-300)):
        return None, 0.0
    return numeric, error


def _flat(output: Any) -> list[Any]:
    """The tensors of a function's output (one, or a tuple or list of them)."""
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, (tuple, list)):
        return [o for o in output if isinstance(o, torch.Tensor)]
    return []


def _scope(site: HookSite, record: TorchRecord, tensors: Mapping[str, Any]) -> str | None:
    """A tensor hook registered outside every module: the module whose operation made its tensor, the
    module a parameter belongs to, or the input it is (``input x``)."""
    tensor = site.tensor
    if tensor is None:
        return None
    if tensor.grad_fn is not None:
        return record.scopes.get(tensor.grad_fn)
    path = record.leaf_names.get(id(tensor))
    if path is not None:
        return path.rpartition(".")[0] or path
    name = next((n for n, t in tensors.items() if t is tensor), None)
    return None if name is None else f"input {name}"
