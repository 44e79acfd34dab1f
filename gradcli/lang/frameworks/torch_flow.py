"""PyTorch's reader for ``gradcli why``: one run of the user's function as a ``Flow``.

Every aten operation is seen (those autograd does not track too: ``detach``, the ones under
``torch.no_grad()``, ``_local_scalar_dense`` for ``.item()``, an ``argmax``), each tensor keyed by
its object while the run holds it, a new key for each in-place write. After the run one
``torch.autograd.grad`` gives the output's gradient with respect to every tracked value. Only
statistics are kept of each value (``Stats``).

This module imports torch: it is imported only for a function that computes with PyTorch.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..flow import Flow, Stats, Step
from .torch_record import input_tensor, module_roots, user_line


class _Watcher(TorchDispatchMode):
    """Every operation of one run on this thread, with its module (forward hooks keep a stack)."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()
        self.keys: dict[int, int] = {}  # id(tensor) -> the key of its current version
        self.held: list[Any] = []  # every tensor met, so that no id is reused during the run
        self.latest: dict[int, Any] = {}  # key -> the tensor (its value and gradient are read after the run)
        self.steps: list[Step] = []
        self.values: dict[int, Stats] = {}
        self.outside: set[int] = set()
        self.modules: list[str] = []

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # no compiler guard: it imports torch's compiler
        return False

    def key(self, tensor: Any, made: bool = False) -> int:
        found = self.keys.get(id(tensor))
        if found is None or made:
            found = len(self.latest)
            self.keys[id(tensor)] = found
            self.held.append(tensor)
            self.latest[found] = tensor
            if not made:
                self.outside.add(found)
                self.values[found] = Stats.of(tensor.detach().cpu().numpy())
        return found

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if threading.get_ident() != self.thread:
            return out
        flat = [*args, *(kwargs or {}).values()]
        tensors = [a for a in flat if isinstance(a, torch.Tensor)]
        tensors += [t for a in flat if isinstance(a, (tuple, list)) for t in a if isinstance(t, torch.Tensor)]
        inputs = [self.key(t) for t in tensors]
        op = func.overloadpacket.__name__
        results = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, torch.Tensor)]
        inplace = op.endswith("_") and bool(results) and bool(tensors) and results[0] is tensors[0]
        overwrites = inputs[0] if inplace else None
        if inplace and op in ("zero_", "fill_", "copy_", "normal_", "uniform_"):
            inputs = inputs[1:]  # (the old value is not read: it is overwritten)
        outputs = []
        for tensor in results:
            k = self.key(tensor, made=True)
            self.values[k] = Stats.of(tensor.detach().cpu().numpy())
            outputs.append(k)
        numbers = [a for a in flat if isinstance(a, (int, float)) and not isinstance(a, bool)]
        self.steps.append(Step(op, inputs, outputs, user_line(sys._getframe(1)), self.modules[-1] if self.modules else None,
                               torch.is_grad_enabled(), inplace, overwrites, numbers))  # fmt: skip
        return out


def record_flow(function: Callable[..., Any], values: Mapping[str, Any], wrt: list[str]) -> Flow:
    """Run ``function`` once on torch tensors of ``values`` (those in ``wrt`` requiring grad) and read
    where each value went; the output is summed when it is not a scalar."""
    watcher = _Watcher()
    names = {id(m): n for n, m in module_roots(function).items()}
    paths: dict[int, str] = {}
    for name, module in module_roots(function).items():
        for path, sub in module.named_modules():
            paths.setdefault(id(sub), f"{name}.{path}" if path else name)

    def enter(module: Any, *_: Any) -> None:
        if threading.get_ident() == watcher.thread:
            watcher.modules.append(paths.get(id(module), names.get(id(module), type(module).__name__.lower())))

    def leave(module: Any, *_: Any) -> None:
        if threading.get_ident() == watcher.thread and watcher.modules:
            watcher.modules.pop()

    tensors = {n: input_tensor(v, n in wrt) for n, v in values.items()}
    hooks = torch.nn.modules.module
    before, after = hooks.register_module_forward_pre_hook(enter), hooks.register_module_forward_hook(leave)
    try:
        with torch.enable_grad():
            inputs = {n: watcher.key(t) for n, t in tensors.items()}
            watcher.outside.difference_update(inputs.values())
            with watcher:
                output = function(**tensors)
    finally:
        before.remove()
        after.remove()
    return _flow(watcher, tensors, inputs, output)


def _flow(watcher: _Watcher, tensors: dict[str, Any], inputs: dict[str, int], output: Any) -> Flow:
    if isinstance(output, (tuple, list)):
        output = output[0] if len(output) == 1 else None
    out_key = watcher.keys.get(id(output)) if isinstance(output, torch.Tensor) else None
    tracked = {k: bool(t.requires_grad) for k, t in watcher.latest.items()}
    grads: dict[int, Stats | None] = {}
    if isinstance(output, torch.Tensor) and output.requires_grad:
        scalar = output if output.numel() == 1 else output.sum()
        current = {
            id(t): k for t, k in ((watcher.latest[k], k) for k in watcher.latest) if watcher.keys.get(id(t)) == k
        }
        wanted = [(k, watcher.latest[k]) for k in current.values() if tracked[k]]
        found = torch.autograd.grad(scalar, [t for _, t in wanted], allow_unused=True, retain_graph=True)
        grads = {k: None if g is None else Stats.of(g.detach().cpu().numpy()) for (k, _), g in zip(wanted, found)}
    input_grads = {n: grads.get(inputs[n]) for n, t in tensors.items() if t.requires_grad}
    return Flow("PyTorch", inputs, out_key, watcher.steps, watcher.values, tracked, grads, input_grads,
                watcher.outside)  # fmt: skip
