"""The backward hooks a PyTorch function's gradient passes through, watched: which ran, and which
changed the gradient they were given.

A hook can replace a gradient: ``tensor.register_hook(h)`` (``h(grad)`` returns the new gradient),
a module's ``register_full_backward_hook`` (returns a new ``grad_input``) or
``register_full_backward_pre_hook`` (a new ``grad_output``), or the same registered for every module
(``torch.nn.modules.module.register_module_full_backward_hook``). ``watching_hooks(roots)`` puts a
``Watched`` in each one's place while its block runs: the module hooks and parameter hooks registered
before (the modules reachable from ``roots``, and the global ones), and, inside ``registering()``,
the tensor hooks the function registers as it runs (seen through a ``TorchFunctionMode``, the public
way ``Tensor.register_hook`` is overridden). Each ``Watched`` notes whether its hook changed the
gradient, and can be switched off (the hook not run, as if removed): check/torch_hooks.py blames the
hook whose removal makes the gradient agree with finite differences.

This module imports torch: it is imported only when a torch function is checked with ``--blame``.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from .torch_record import user_line

TENSOR = "tensor hook"
FULL = "full backward hook"
PRE = "full backward pre-hook"
OLD = "backward hook"  # register_backward_hook (not full): called on the module's last operation


class Watched:
    """A hook in its own place: runs it (unless ``off``) and notes whether it changed the gradient.

    ``site`` is the ``HookSite`` that names it; ``changed`` whether any of its calls so far returned
    a gradient other than the one it was given; ``module`` the first module it changed a gradient
    of (a global hook runs for every module)."""

    def __init__(self, hook: Any, site: HookSite) -> None:
        self.hook, self.site = hook, site
        self.off = False
        self.changed = False
        self.module: Any = None

    def __call__(self, *args: Any) -> Any:
        if self.off:
            return None
        out = self.hook(*args)
        given = args[0] if self.site.kind == TENSOR else args[-1] if self.site.kind == PRE else args[1]
        if out is not None and _differs(out, given):
            if not self.changed and self.site.kind != TENSOR:
                self.module = args[0]
            self.changed = True
        return out


def _differs(out: Any, given: Any) -> bool:
    """Whether a hook's result is another gradient than the one it was given (one tensor, or a
    tuple of them with None where there is none)."""
    if isinstance(given, torch.Tensor) or not isinstance(out, (tuple, list)):
        outs, givens = (out,), (given,)
    else:
        outs, givens = tuple(out), tuple(given)
    if len(outs) != len(givens):
        return True
    for a, b in zip(outs, givens):
        if a is None or b is None:
            if a is not b:
                return True
        elif a is not b and (a.shape != b.shape or not torch.equal(a, b)):
            return True
    return False


@dataclass
class HookSite:
    """One backward hook, as a message names it."""

    kind: str  # TENSOR, FULL, PRE or OLD
    name: str  # the hook's function name ("scale", "<lambda>")
    defined: str | None  # where its function is written ("model.py:9")
    scope: str | None = None  # the module path it belongs to ("encoder.1"); a tensor hook's: where registered
    registered: str | None = None  # the user's line that registered it (a tensor hook registered as the function ran)
    tensor: Any = field(default=None, repr=False)  # a tensor hook's tensor (its grad_fn names it where no module does)
    global_: bool = False  # registered for every module
    watch: Watched | None = field(default=None, repr=False)

    def where(self, paths: Mapping[int, str]) -> str | None:
        """The module path a message names: a global hook's, that of the first module it changed."""
        module = self.watch.module if self.watch is not None else None
        if self.global_ and module is not None:
            return paths.get(id(module), type(module).__name__.lower())
        return self.scope


def _defined(hook: Any) -> tuple[str, str | None]:
    """A hook's name and ``file.py:LINE`` of its function (a bound method's, a partial's)."""
    function = getattr(hook, "func", hook)  # functools.partial
    function = getattr(function, "__func__", function)  # a bound method
    code = getattr(function, "__code__", None)
    if code is None:
        code = getattr(type(function).__call__, "__code__", None)  # a callable object's method
    name = getattr(function, "__qualname__", None) or type(function).__name__
    return name, None if code is None else f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"


@dataclass
class HookWatch:
    """The hooks watched while a ``watching_hooks`` block runs, in the order met."""

    sites: list[HookSite] = field(default_factory=list)
    paths: dict[int, str] = field(default_factory=dict)  # id(module) -> its path from the roots
    undo: list[tuple[dict[int, Any], int, Any]] = field(default_factory=list)  # (dict, key, the hook put back)

    def watched(self, hooks: dict[int, Any] | None, kind: str, **names: Any) -> None:
        """Each hook of a registry (a module's, a tensor's, the global one) replaced by its ``Watched``."""
        for key, hook in list((hooks or {}).items()):
            if isinstance(hook, Watched):
                continue
            site = HookSite(kind, *_defined(hook), **names)
            site.watch = Watched(hook, site)
            hooks[key] = site.watch  # type: ignore[index]
            self.undo.append((hooks, key, hook))  # type: ignore[arg-type]
            self.sites.append(site)

    @contextmanager
    def registering(self) -> Iterator[None]:
        """While the block runs, a tensor hook registered on this thread is registered as its ``Watched``."""
        with _Registering(self):
            yield


class _Registering(TorchFunctionMode):
    """``Tensor.register_hook`` seen as the function calls it: the hook registered in its ``Watched``,
    named by the module running (the ``nn.Module`` call on the stack: its forward, or its forward hook)."""

    def __init__(self, watch: HookWatch) -> None:
        super().__init__()
        self.watch, self.thread = watch, threading.get_ident()

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.Tensor.register_hook and threading.get_ident() == self.thread and len(args) == 2:
            tensor, hook = args
            frame = sys._getframe(1)
            site = HookSite(TENSOR, *_defined(hook), scope=self._running(frame), registered=user_line(frame),
                            tensor=tensor)  # fmt: skip
            site.watch = Watched(hook, site)
            self.watch.sites.append(site)
            return func(tensor, site.watch)
        return func(*args, **kwargs)

    def _running(self, frame: Any) -> str | None:
        """The path of the innermost ``nn.Module`` being called at ``frame`` (None: none is)."""
        while frame is not None:
            if frame.f_code.co_name == "_call_impl":
                module = frame.f_locals.get("self")
                if isinstance(module, torch.nn.Module):
                    return self.watch.paths.get(id(module), type(module).__name__.lower())
            frame = frame.f_back
        return None


@contextmanager
def watching_hooks(roots: Mapping[str, Any]) -> Iterator[HookWatch]:
    """While the block runs, every backward hook of the modules reachable from ``roots`` (name ->
    ``nn.Module``), of their parameters and of every module (the global ones) is its ``Watched``;
    put back as it was afterwards (a graph made in the block keeps calling the ``Watched``)."""
    watch = HookWatch()
    modules = torch.nn.modules.module
    found: dict[int, Any] = {}
    for root, top in roots.items():
        for path, sub in top.named_modules():
            watch.paths.setdefault(id(sub), f"{root}.{path}" if path else root)
            found.setdefault(id(sub), sub)
    try:
        for module_id, module in found.items():
            path = watch.paths[module_id]
            full = getattr(module, "_is_full_backward_hook", None)
            watch.watched(module._backward_pre_hooks, PRE, scope=path)
            watch.watched(module._backward_hooks, FULL if full is not False else OLD, scope=path)
            for parameter in module.parameters(recurse=False):
                watch.watched(parameter._backward_hooks, TENSOR, scope=path, tensor=parameter)
        full = getattr(modules, "_global_is_full_backward_hook", None)
        watch.watched(modules._global_backward_pre_hooks, PRE, global_=True)
        watch.watched(modules._global_backward_hooks, FULL if full is not False else OLD, global_=True)
        yield watch
    finally:
        for hooks, key, hook in reversed(watch.undo):
            if isinstance(hooks.get(key), Watched):
                hooks[key] = hook
