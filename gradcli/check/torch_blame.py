"""``check --blame`` for a function that computes with PyTorch: which custom ``torch.autograd.Function``
has a wrong backward?

The function runs once with float64 tensors under the recorder (lang/frameworks/torch_record.py),
which notes every call of a custom Function with its arguments, its ``nn.Module`` path and the
user's line that made it. Each call is then checked on its own, in call order: the vector-Jacobian
product its backward gives for a random cotangent (``torch.autograd.grad`` of the Function applied
to fresh leaves) against Richardson differences of its forward alone at the same arguments, decided
as ``check`` decides a gradient (gradcli/check/decide.py: its rtol and atol, the differences' own
error, kinks, autograd's rounding). The first that disagrees is named. PyTorch's built-in operations
are PyTorch's own and trusted: only custom Functions are checked, and the result says how many.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..lang.compute import ElementLabels
from ..lang.frameworks.torch_adapter import dispatched
from ..lang.frameworks.torch_hooks import watching_hooks
from ..lang.frameworks.torch_record import CustomCall, input_tensor, module_roots, recording_torch
from .blame import input_scale, inputs_text
from .decide import MISMATCH, Decision, Road, decide, tolerances
from .directions import along, random_directions
from .torch_hooks import HookFinding, blame_hooks

#: calls with up to this many input elements are varied element by element; larger ones along
#: DIRECTIONS random directions (each a column of differences, as many forward calls as an element)
ELEMENTS = 256
DIRECTIONS = 8
Names = Sequence[str] | None  # the inputs differentiated (all: None)
Tol = float | None  # check's --rtol and --atol (None: check's defaults)


@dataclass
class TorchBlame:
    """The first custom Function whose backward disagrees with finite differences of its forward."""

    name: str  # the Function subclass's __name__
    scope: str | None  # the nn.Module path it was called in ("encoder.layers.0"), or None
    line: str | None  # the user's line that called it ("model.py:12")
    max_abs_error: float  # over the compared elements of v^T J
    max_rel_error: float
    framework: str = "torch"
    index: int = 0  # which custom call it is, in call order (from 0)
    grad_fn: str = ""  # its backward node's name (MySinBackward)
    autograd: float = float("nan")  # v . J u by its backward, for random directions v (output) and u (input)
    numeric: float = float("nan")  # the same from finite differences of its forward
    label: str = ""  # the call as a message names it: ``MySin(x)``, by the forward's argument names
    inputs: str = ""  # its arguments, as a message shows them
    worst: str | None = None  # the input element furthest outside its tolerance ("x[1]")
    checked: int = 0  # custom calls checked, this one included
    occurrence: int = 0  # earlier calls of the same Function from the same line in the same module (a loop)
    backward: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # v^T J by the backward
    differences: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # by finite differences
    cotangent: list[np.ndarray] = field(default_factory=list, repr=False)  # v: one per differentiable output
    arguments: list[Any] = field(default_factory=list, repr=False)  # the call's arguments (tensors as float64 arrays)
    hook: str | None = (
        None  # a backward hook blamed: its kind ("tensor hook", "full backward hook"); name is its function's
    )
    without: float = float("nan")  # a hook blamed: v . J u by the backward with that hook removed
    registered: str | None = None  # a tensor hook blamed: the user's line that registered it


@dataclass
class _Checked:
    """One custom call, ready to be evaluated at moved inputs: its arguments (in float64 unless the
    Function will not take it), which of them are varied (``positions``), and the random cotangent of
    its differentiable outputs."""

    call: CustomCall
    args: list[Any]
    positions: list[int]
    outputs: list[int] = field(default_factory=list)  # indices of the differentiable outputs
    cotangents: list[Any] = field(default_factory=list)
    precision: np.dtype = field(default_factory=lambda: np.dtype(np.float64))  # the least its forward used

    @property
    def shapes(self) -> list[tuple[int, ...]]:
        return [tuple(self.args[i].shape) for i in self.positions]

    def x0(self) -> np.ndarray:
        return np.concatenate([self.args[i].to(torch.float64).numpy().reshape(-1) for i in self.positions])

    @property
    def dtype(self) -> np.dtype:
        """The precision the Function computes in, as check's tolerances read it: its least precise
        argument's, or less where its forward computed in less (float32 between float64 input and
        output: its differences are float32's, and judged at float64's tolerance they blame it)."""
        exact = all(self.args[i].dtype == torch.float64 for i in self.positions)
        given = np.dtype(np.float64 if exact else np.float32)
        return given if np.finfo(given).eps >= np.finfo(self.precision).eps else self.precision

    def moved(self, row: np.ndarray, leaves: list[Any] | None = None) -> list[Any]:
        """Fresh arguments, the varied ones taken from the flat ``row``. With ``leaves``, each varied one
        is a leaf needing grad (appended there), passed as a copy: an in-place Function may write to it."""
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in self.args]
        offset = 0
        for i, shape in zip(self.positions, self.shapes):
            size = int(np.prod(shape, dtype=int))
            args[i] = torch.tensor(row[offset : offset + size].reshape(shape), dtype=self.args[i].dtype)
            if leaves is not None:
                leaves.append(args[i].requires_grad_(True))
                args[i] = args[i].clone()
            offset += size
        return args

    def forward(self, args: list[Any]) -> list[Any]:
        """The Function's floating outputs at ``args``."""
        out = self.call.function.apply(*args, **self.call.kwargs)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return [o for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point()]

    def value(self, row: np.ndarray) -> float:
        """v . forward(row): the call's outputs against the cotangent."""
        with torch.no_grad():
            outs = self.forward(self.moved(row))
        pairs = zip(self.outputs, self.cotangents)
        return float(sum(torch.sum(c.to(torch.float64) * outs[k].to(torch.float64)) for k, c in pairs))

    def vjp(self, row: np.ndarray) -> np.ndarray:
        """v^T J at ``row`` by the Function's own backward (an input it gives no gradient for: 0)."""
        leaves: list[Any] = []
        with torch.enable_grad():
            outs = self.forward(self.moved(row, leaves))
            grads = torch.autograd.grad(
                [outs[k] for k in self.outputs], leaves, grad_outputs=self.cotangents, allow_unused=True
            )
        return np.concatenate([
            np.zeros(leaf.numel()) if g is None else g.detach().to(torch.float64).numpy().reshape(-1)
            for g, leaf in zip(grads, leaves)
        ])  # fmt: skip


def blame_torch(
    function: Callable[..., Any], values: Mapping[str, Any], wrt: Names = None, rtol: Tol = None, atol: Tol = None
) -> TorchBlame | None:
    """The first custom ``torch.autograd.Function`` (in call order) whose backward disagrees with
    finite differences of its forward when ``function(**values)`` runs, or None."""
    return blame_torch_calls(function, values, wrt, rtol, atol)[0]


def blame_torch_calls(
    function: Callable[..., Any], values: Mapping[str, Any], wrt: Names = None, rtol: Tol = None, atol: Tol = None
) -> tuple[TorchBlame | None, int]:
    """``blame_torch``'s finding and how many custom Function calls were checked (``Checked``: with
    how many backward hooks were watched). Where no custom Function is wrong, the backward hooks the
    gradient passes through are judged (check/torch_hooks.py)."""
    roots = module_roots(function)
    tensors = {name: input_tensor(getattr(v, "array", v), wrt is None or name in wrt) for name, v in values.items()}
    with watching_hooks(roots) as watch:
        with torch.enable_grad(), _eager(), watch.registering(), recording_torch(roots) as record:
            output = function(**tensors)
        found, checked = _first_wrong(record.calls, rtol, atol)
        if found is None and watch.sites:
            hook = blame_hooks(function, tensors, output, watch, record, wrt)
            found = None if hook is None else _hook_blame(hook, watch.sites.index(hook.site))
    return found, Checked(checked, len(watch.sites))


class Checked(int):
    """How many custom Function calls ``--blame`` checked, with ``hooks``: how many backward hooks it watched."""

    hooks: int

    def __new__(cls, calls: int, hooks: int = 0) -> Checked:
        made = super().__new__(cls, calls)
        made.hooks = hooks
        return made


def _first_wrong(record_calls: list[CustomCall], rtol: Tol, atol: Tol) -> tuple[TorchBlame | None, int]:
    """The first custom call whose backward disagrees with differences of its forward, and how many were checked."""
    rng = np.random.default_rng(0)
    checked = 0
    for index, call in enumerate(record_calls):
        if call.function.__module__.startswith("torch."):
            continue  # PyTorch's own (the BackwardHookFunction of a module's backward hook): trusted as its operations
        prepared = _prepared(call, rng)
        if prepared is None:
            continue
        checked += 1
        found = _judged(prepared, rng, rtol, atol)
        if found is not None:
            found.index, found.checked = index, checked
            found.occurrence = sum((c.function, c.scope, c.line) == (call.function, call.scope, call.line)
                                   for c in record_calls[:index])  # fmt: skip
            return found, checked
    return None, checked


def _hook_blame(hook: HookFinding, index: int) -> TorchBlame:
    """A hook's finding as a ``TorchBlame``: named by its function, at its module, at its function's line
    (``index``: which hook it is, in the order met)."""
    site, error = hook.site, abs(hook.autograd - hook.numeric)
    return TorchBlame(
        site.name, hook.scope, site.defined, error, error / max(abs(hook.numeric), np.finfo(float).tiny),
        index=index, grad_fn=site.kind, autograd=hook.autograd, numeric=hook.numeric, label=site.name,
        hook=("global " if site.global_ else "") + site.kind, without=hook.without,
        registered=site.registered,
    )  # fmt: skip


def _eager() -> Any:
    """``torch.compile``'d code run as written (its custom Functions called one by one, as the recorder
    sees them; the compiler cannot trace the recorder); nothing where nothing was compiled (the
    compiler's import alone takes a second)."""
    if "torch._dynamo" not in sys.modules:
        return contextlib.nullcontext()
    return torch.compiler.set_stance("force_eager")


def _prepared(call: CustomCall, rng: np.random.Generator) -> _Checked | None:
    """The call ready to check, with a cotangent; None when nothing of it is differentiable."""
    needs = getattr(call.node, "needs_input_grad", None)  # one per argument apply() was given
    given = call.args if needs is None else call.args[: len(needs)]  # (the rest: forward's own defaults)
    positions = [i for i, a in enumerate(given) if _floating(a) and (needs is None or needs[i])]
    if not positions:
        return None
    prepared, outs = _runnable(call, given, positions)
    prepared.outputs = [k for k, o in enumerate(outs) if o.requires_grad]
    if not prepared.outputs:
        return None
    prepared.cotangents = [
        torch.tensor(rng.standard_normal(tuple(outs[k].shape)), dtype=outs[k].dtype) for k in prepared.outputs
    ]
    return prepared


def _runnable(call: CustomCall, given: Sequence[Any], positions: list[int]) -> tuple[_Checked, list[Any]]:
    """The call in float64, or in its own precision where the Function will not take float64 (a float32
    buffer of its own), and its outputs at its arguments."""

    def run(args: list[Any]) -> tuple[_Checked, list[Any]]:
        prepared, outs = _Checked(call, args, positions), []
        with torch.enable_grad():
            prepared.precision = dispatched(
                lambda: outs.extend(prepared.forward(prepared.moved(prepared.x0(), [])))
            ).precision
        return prepared, outs

    try:
        return run([a.detach().to(torch.float64) if _floating(a) else a for a in given])
    except RuntimeError:
        if all(a.dtype == torch.float64 for a in given if _floating(a)):
            raise
    return run(list(given))


def _floating(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def _judged(call: _Checked, rng: np.random.Generator, rtol: float | None, atol: float | None) -> TorchBlame | None:
    """A ``TorchBlame`` when the call's backward disagrees with differences of its forward."""
    x0 = call.x0()
    f0 = call.value(x0)
    backward = call.vjp(x0)
    if not (np.isfinite(f0) and np.isfinite(x0).all()):
        return None  # no difference quotient means anything at an infinite value
    names = _argument_names(call.call.function, len(call.args))
    road = _road(call, x0, f0, backward, ElementLabels([names[i] for i in call.positions], call.shapes))
    if x0.size > ELEMENTS:  # along random directions at each element's own scale (check's own, directions.py)
        directions = random_directions(x0, DIRECTIONS, int(rng.integers(2**32))) / np.sqrt(x0.size)
        road = along(road, directions, [f"direction {k + 1}" for k in range(DIRECTIONS)])
    rtol, atols = tolerances(road.dtype, rtol, atol, road)
    decision = decide(road, ["finite_difference"], rtol, atols)
    fd = decision.checks["finite_difference"]
    if fd.ok[0] != MISMATCH and decision.subgradient[0].all():
        return None
    return _describe(call, decision, road, names, rng)


def _road(call: _Checked, x0: np.ndarray, f0: float, backward: np.ndarray, labels: Sequence[str]) -> Road:
    """The call as check's decision takes a point: v . forward as the function, v^T J as its gradient."""

    def evaluate(rows: np.ndarray, owner: np.ndarray) -> np.ndarray:
        return np.array([call.value(row) for row in rows])

    def gradient_at(rows: np.ndarray, owner: np.ndarray) -> np.ndarray:
        return np.stack([call.vjp(row) for row in rows])

    why = f"the custom Function {call.call.function.__name__} may not be complex-analytic"
    return Road(
        x0[None, :], np.array([f0]), backward[None, :], labels, evaluate, gradient_at, [why], dtype=call.dtype
    )  # fmt: skip


def _describe(call: _Checked, decision: Decision, road: Road, names: list[str], rng: np.random.Generator) -> TorchBlame:
    """The finding in numbers: the largest errors, and v . J u for a random u by either way."""
    fd = decision.checks["finite_difference"]
    mask, reference, gradient = fd.mask[0], fd.ref.reference[0], road.gradient[0]
    abs_error = float(np.max(np.where(mask, fd.abs_error[0], 0.0), initial=0.0))
    rel_error = float(np.max(np.where(mask & fd.significant[0], fd.rel_error[0], 0.0), initial=0.0))
    numeric = np.where(mask, reference, gradient)  # where nothing was compared, no difference to show
    u = rng.standard_normal(gradient.shape) * input_scale(road.x0[0])
    worst = road.labels[int(np.argmax(fd.badness[0]))] if fd.badness[0].size else None
    function = call.call.function
    return TorchBlame(
        function.__name__, call.call.scope, call.call.line, abs_error, rel_error,
        grad_fn=type(call.call.node).__name__ if call.call.node is not None else f"{function.__name__}Backward",
        autograd=float(np.sum(gradient * u)), numeric=float(np.sum(numeric * u)),
        label=f"{function.__name__}({', '.join(names[i] for i in call.positions)})",
        inputs=inputs_text([a.numpy() for a in call.args if isinstance(a, torch.Tensor)]),
        worst=worst, backward=gradient, differences=numeric, cotangent=[c.numpy() for c in call.cotangents],
        arguments=[a.numpy() if isinstance(a, torch.Tensor) else a for a in call.args],
    )  # fmt: skip


def _argument_names(function: type, count: int) -> list[str]:
    """The names of the forward's arguments (after ``ctx``, unless a ``setup_context`` takes it
    apart); ``input1``... where it takes ``*args``."""
    try:
        parameters = list(inspect.signature(function.forward).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    if getattr(function, "setup_context", None) is torch.autograd.Function.setup_context:
        parameters = parameters[1:]  # forward(ctx, ...)
    names = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [names[i] if i < len(names) else f"input{i + 1}" for i in range(count)]
