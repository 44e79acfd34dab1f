"""A function that computes with PyTorch or JAX, as one more kind of program.

gradcli calls it as one operation of its own graph (``FrameworkCall``, a ``gc.autograd.Function``):
the forward runs the user's function on the framework's float64 tensors, the backward is the
framework's own vector-Jacobian product. So every command computes with it unchanged (eval,
jacobian in either mode, hessian, check's differences and complex step, --points), and the numbers
are the framework's. A backward under ``create_graph`` is itself a ``FrameworkCall`` of the
framework's VJP function, so Hessians are the framework's second derivatives.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...autograd import grad_mode
from ...autograd.function import Function
from ..evaluate import Evaluation
from ..kinds import PythonFunction
from ..library import gc
from ..python import checked_return, python_number, run_function
from . import title
from .adapter import Adapter, Operations
from .jax_adapter import JaxAdapter
from .torch_adapter import TorchAdapter


class FrameworkFunction(PythonFunction):
    """``FILE.py:f`` computing with ``framework`` ("torch" or "jax"): called with that framework's
    float64 tensors, one per parameter."""

    def __init__(self, origin: str, function: Callable[..., Any], framework: str) -> None:
        super().__init__(origin, function)
        self.framework = framework
        self.adapter = ADAPTERS[framework]()

    @property
    def title(self) -> str:
        """PyTorch 2.13.0, JAX 0.10.2: whose numbers these are."""
        return f"{title(self.framework)} {self.adapter.version}"

    @property
    def notes(self) -> list[str]:
        """How the framework made the numbers where not as asked (JAX's forward mode for a while loop)."""
        return self.adapter.notes

    def _run(self, values: Mapping[str, Any], wrt: Sequence[str], record_steps: bool) -> Evaluation:
        return run_function(self, values, wrt, call=self.call)

    def call(self, **arguments: Any) -> Any:
        """The user's function as one gradcli operation of its tensor arguments (its Python numbers,
        ``jax.jit``'s static arguments, bound)."""
        tensors = {n: a for n, a in arguments.items() if isinstance(a, gc.Tensor)}
        fixed = {n: a for n, a in arguments.items() if n not in tensors}
        return _Call(self, list(tensors), fixed).apply(tensors)

    def bound(self, values: Mapping[str, Any]) -> tuple[Callable[..., Any], dict[str, Any]]:
        """The function as the framework's own tools call it (the graph recorders, ``--blame``), and the
        values of its tensor parameters: its Python numbers (``jax.jit``'s static arguments) bound, what it
        returns then checked as a run does. Without such numbers, the user's function itself (its globals
        name its modules), whose return a run has checked already."""
        given = {p.name: p for p in self.parameters if p.name in values}
        fixed = {n: python_number(self, p, values[n], ()) for n, p in given.items() if p.number is not None}
        tensors = {n: v for n, v in values.items() if n in given and n not in fixed}
        if not fixed:
            return self.function, tensors
        user = self.function

        def call(**arguments: Any) -> Any:
            result = user(**arguments, **fixed)
            checked_return(self.origin, result, list(arguments.values()), self.returns)
            return result

        call.__name__ = call.__qualname__ = self.name
        call.__wrapped__ = user  # type: ignore[attr-defined]
        return call, tensors

    @property
    def returns(self) -> str:
        """What the function may return, in its framework's words."""
        return f"return {'a tensor' if self.framework == 'torch' else 'an array'}, a number, or a tuple or list of them"


class _Call:
    """One call of the user's function as a gradcli operation; ``single``: it returned one value.
    ``fixed``: the arguments passed as they are (Python numbers), not as the framework's tensors."""

    def __init__(self, program: FrameworkFunction, parameters: list[str], fixed: Mapping[str, Any]) -> None:
        self.program = program
        self.adapter = program.adapter
        self.parameters = parameters
        user, fixed = program.function, dict(fixed)

        def positional(*xs: Any) -> tuple[Any, ...]:
            result = user(**dict(zip(parameters, xs)), **fixed)
            checked_return(program.origin, result, xs, program.returns)
            self.single = not isinstance(result, (tuple, list))
            return (result,) if self.single else tuple(result)

        self.function = positional
        self.single = True

    def __repr__(self) -> str:
        return f"<the call of {self.program.origin}>"

    def apply(self, inputs: Mapping[str, Any]) -> Any:
        results = FrameworkCall.apply(self, *(inputs[p] for p in self.parameters))
        return results if self.single or isinstance(results, tuple) else (results,)


class FrameworkCall(Function):
    """The user's framework function as one operation: forward by the framework, backward by the
    framework's VJP (kept from the forward when no higher derivative is asked for)."""

    @staticmethod
    def forward(ctx: Any, call: Any, *inputs: Any) -> Any:
        arrays = [np.asarray(t.array) for t in inputs]
        wanted = list(ctx.needs_input_grad[1:]) if any(ctx.needs_input_grad) else False  # (the first: the call)
        outputs, pullback = call.adapter.forward(call.function, arrays, wanted)
        ctx.call, ctx.pullback, ctx.inputs = call, pullback, inputs
        ctx.shapes = [np.shape(o) for o in outputs]
        return tuple(outputs) if len(outputs) != 1 else outputs[0]  # (one output: a node of one output)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        cotangents = [gc.zeros(shape) if g is None else g for g, shape in zip(grads, ctx.shapes)]
        # a batch of cotangents (rows of a Jacobian); an output given none has unbatched zeros
        batch = max((c.shape[: len(c.shape) - len(s)] for c, s in zip(cotangents, ctx.shapes)), key=len)
        if not batch:
            return (None, *_pulled(ctx, cotangents))
        rows = [_pulled(ctx, [c.reshape((-1, *shape))[k] if len(c.shape) > len(shape) else c
                              for c, shape in zip(cotangents, ctx.shapes)])
                for k in range(int(np.prod(batch)))]  # fmt: skip
        return (None, *(None if parts[0] is None else gc.stack(parts).reshape((*batch, *parts[0].shape))
                        for parts in zip(*rows)))  # fmt: skip

    @staticmethod
    def described(ctx: Any) -> str:
        """The call in messages: the user's function by its name and file, and whose numbers they are."""
        return f"{ctx.call.program.origin} (by {title(ctx.call.adapter.name)})"

    @staticmethod
    def not_analytic(ctx: Any) -> str | None:
        """Why check's complex step cannot be trusted through this call (None: every operation the
        framework ran, with the complex inputs the step gives it, is complex-analytic)."""
        adapter = ctx.call.adapter
        operations = _operations(ctx)
        if operations is None:
            return f"{title(adapter.name)} did not say which operations it ran"
        odd = sorted(op.lstrip("_") for op in operations.names if op not in adapter.analytic)  # (_conj: conj)
        if odd:
            return (
                f"{title(adapter.name)}'s {', '.join(odd[:3])} {'is' if len(odd) == 1 else 'are'} not complex-analytic"
            )
        return None

    @staticmethod
    def precision(ctx: Any) -> np.dtype:
        """The least precise floating dtype the call computed in (float32 inside a float64 function):
        check's differences and tolerances are that dtype's."""
        operations = _operations(ctx)
        return np.dtype(np.float64) if operations is None else operations.precision

    @staticmethod
    def jvp(ctx: Any, *tangents: Any) -> Any:
        """Forward mode: the framework's own Jacobian-vector product."""
        zeros = [np.zeros(np.shape(t.array)) for t in ctx.inputs]
        tangents = tangents[1:]  # (the first argument is the call itself)
        given = [z if t is None else np.asarray(t.array) for t, z in zip(tangents, zeros)]
        found = ctx.call.adapter.jvp(ctx.call.function, [np.asarray(t.array) for t in ctx.inputs], given)
        outputs = tuple(gc.tensor(t) for t in found)
        return outputs if len(outputs) > 1 else outputs[0]


def _operations(ctx: Any) -> Operations | None:
    """What the call's function does, asked of the framework once (it runs the function again)."""
    if not hasattr(ctx, "operations"):
        ctx.operations = ctx.call.adapter.operations(ctx.call.function, [np.asarray(t.array) for t in ctx.inputs])
    return ctx.operations


def _pulled(ctx: Any, cotangents: list[Any]) -> tuple[Any, ...]:
    """The inputs' gradients for one cotangent of each output: by the pullback kept from the forward,
    or, when they must be differentiable themselves (``create_graph``), by the framework's VJP run as
    a ``FrameworkCall`` of its own."""
    inputs = ctx.inputs
    higher = grad_mode.state.enabled and any(t.requires_grad for t in (*inputs, *cotangents))
    if not higher and ctx.pullback is not None:
        found = ctx.call.adapter.pull(ctx.pullback, [np.asarray(c.array) for c in cotangents])
        return tuple(None if g is None else gc.tensor(g) for g in found)
    pulled = _Call.__new__(_Call)
    pulled.program, pulled.adapter, pulled.single = ctx.call.program, ctx.call.adapter, False
    pulled.function = ctx.call.adapter.vjp(ctx.call.function, len(inputs), ctx.needs_input_grad[1:])
    found = FrameworkCall.apply(pulled, *inputs, *cotangents)
    return found if isinstance(found, tuple) else (found,)


ADAPTERS: dict[str, type[Adapter]] = {"torch": TorchAdapter, "jax": JaxAdapter}
