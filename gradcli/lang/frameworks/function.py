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
from ...errors import UsageError
from ..evaluate import Evaluation
from ..library import gc
from ..program import PythonFunction
from . import require, title


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

    def _run(self, values: Mapping[str, Any], wrt: Sequence[str], record_steps: bool) -> Evaluation:
        from ..python import run_function  # lazy: as PythonFunction's own run

        parameters = self.variables
        call = _Call(self, parameters)
        return run_function(self, values, wrt, call=lambda **inputs: call.apply(inputs))


class _Call:
    """One call of the user's function as a gradcli operation; ``single``: it returned one value."""

    def __init__(self, program: FrameworkFunction, parameters: list[str]) -> None:
        self.program = program
        self.adapter = program.adapter
        self.parameters = parameters
        user = program.function

        def positional(*xs: Any) -> tuple[Any, ...]:
            result = user(**dict(zip(parameters, xs)))
            self.single = not isinstance(result, (tuple, list))
            return (result,) if self.single else tuple(result)

        self.function = positional
        self.single = True

    def apply(self, inputs: Mapping[str, Any]) -> Any:
        results = FrameworkCall.apply(self, *(inputs[p] for p in self.parameters))
        return results if self.single or isinstance(results, tuple) else (results,)


class FrameworkCall(Function):
    """The user's framework function as one operation: forward by the framework, backward by the
    framework's VJP (kept from the forward when no higher derivative is asked for)."""

    @staticmethod
    def forward(ctx: Any, call: Any, *inputs: Any) -> Any:
        arrays = [np.asarray(t.array) for t in inputs]
        wanted = any(ctx.needs_input_grad)
        outputs, pullback = call.adapter.forward(call.function, arrays, wanted)
        ctx.call, ctx.pullback, ctx.inputs = call, pullback, inputs
        ctx.shapes = [np.shape(o) for o in outputs]
        return tuple(outputs) if len(outputs) != 1 else outputs[0]  # (one output: a node of one output)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        cotangents = [gc.zeros(shape) if g is None else g for g, shape in zip(grads, ctx.shapes)]
        batch = cotangents[0].shape[: len(cotangents[0].shape) - len(ctx.shapes[0])]
        if not batch:
            return (None, *_pulled(ctx, cotangents))
        rows = [_pulled(ctx, [c.reshape((-1, *shape))[k] for c, shape in zip(cotangents, ctx.shapes)])
                for k in range(int(np.prod(batch)))]  # fmt: skip
        return (None, *(None if parts[0] is None else gc.stack(parts).reshape((*batch, *parts[0].shape))
                        for parts in zip(*rows)))  # fmt: skip

    @staticmethod
    def not_analytic(ctx: Any) -> str | None:
        """Why check's complex step cannot be trusted through this call (None: every operation the
        framework ran is complex-analytic)."""
        adapter = ctx.call.adapter
        operations = adapter.operations(ctx.call.function, [np.asarray(t.array) for t in ctx.inputs])  # (run again)
        if operations is None:
            return f"{title(adapter.name)} did not say which operations it ran"
        odd = sorted(op for op in operations if op not in adapter.analytic)
        if odd:
            return (
                f"{title(adapter.name)}'s {', '.join(odd[:3])} {'is' if len(odd) == 1 else 'are'} not complex-analytic"
            )
        return None

    @staticmethod
    def jvp(ctx: Any, *tangents: Any) -> Any:
        """Forward mode: the framework's own Jacobian-vector product."""
        zeros = [np.zeros(np.shape(t.array)) for t in ctx.inputs]
        tangents = tangents[1:]  # (the first argument is the call itself)
        given = [z if t is None else np.asarray(t.array) for t, z in zip(tangents, zeros)]
        found = ctx.call.adapter.jvp(ctx.call.function, [np.asarray(t.array) for t in ctx.inputs], given)
        outputs = tuple(gc.tensor(t) for t in found)
        return outputs if len(outputs) > 1 else outputs[0]


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
    pulled.function = ctx.call.adapter.vjp(ctx.call.function, len(inputs))
    found = FrameworkCall.apply(pulled, *inputs, *cotangents)
    return found if isinstance(found, tuple) else (found,)


class Adapter:
    """One framework's few verbs: a forward that may keep its pullback, the pullback applied, and a
    VJP as a new function of the framework's (inputs, cotangents) for derivatives of derivatives."""

    name = ""

    def __init__(self) -> None:
        self.module = require(self.name)
        self.version = getattr(self.module, "__version__", "").split("+")[0]

    def forward(self, function: Callable[..., Any], arrays: list[Any], pullback: bool) -> tuple[list[Any], Any]:
        raise NotImplementedError

    def pull(self, pullback: Any, cotangents: list[Any]) -> list[Any]:
        raise NotImplementedError

    def vjp(self, function: Callable[..., Any], count: int) -> Callable[..., Any]:
        raise NotImplementedError

    def jvp(self, function: Callable[..., Any], arrays: list[Any], tangents: list[Any]) -> list[Any]:
        raise NotImplementedError


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


class TorchAdapter(Adapter):
    name = "torch"
    analytic = _words(
        "add sub rsub mul div neg exp exp2 expm1 log log1p log2 log10 sin cos tan sinh cosh tanh asin acos atan "
        "asinh acosh atanh sigmoid sqrt rsqrt reciprocal pow square mm addmm bmm baddbmm matmul dot mv addmv linear "
        "einsum sum mean prod cumsum view reshape _unsafe_view t transpose permute expand select slice index "
        "index_select gather stack cat clone squeeze unsqueeze alias lift_fresh copy _to_copy detach "
        "_softmax _log_softmax softmax log_softmax zeros_like ones_like full_like fill zero new_zeros new_ones "
        "new_empty empty_like split split_with_sizes unbind chunk narrow diagonal diag trace flip roll repeat "
        "contiguous as_strided unfold movedim"
    )

    def operations(self, function: Callable[..., Any], arrays: list[Any]) -> set[str] | None:
        """The aten operations one run of ``function`` performs."""
        from torch.utils._python_dispatch import TorchDispatchMode

        seen: set[str] = set()

        class Seen(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls) -> bool:  # no compiler guard (it imports torch's compiler: a second)
                return False

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
                seen.add(func.overloadpacket.__name__.rstrip("_"))
                return func(*args, **(kwargs or {}))

        try:
            with Seen():
                function(*(self.tensor(a) for a in arrays))
        except Exception:  # (it ran once already: what it did is known from the forward)
            return None
        return seen

    def tensor(self, array: Any) -> Any:
        torch = self.module
        return torch.from_numpy(np.array(array, dtype=_dtype(array)))

    def forward(self, function: Callable[..., Any], arrays: list[Any], pullback: bool) -> tuple[list[Any], Any]:
        torch = self.module
        xs = [self.tensor(a) for a in arrays]
        if pullback:
            xs = [x.requires_grad_(True) if _differentiable(x) else x for x in xs]
        with torch.enable_grad():
            outputs = [self.output(o) for o in function(*xs)]
        values = [o.detach().numpy().copy() for o in outputs]
        return values, ((xs, outputs) if pullback else None)

    def output(self, value: Any) -> Any:
        torch = self.module
        if isinstance(value, torch.Tensor):
            return value
        try:
            return torch.as_tensor(np.asarray(value, dtype=_dtype(value)))
        except (TypeError, ValueError):
            raise UsageError(f"the function returned a {type(value).__name__}: return tensors or numbers") from None

    def pull(self, pullback: Any, cotangents: list[Any]) -> list[Any]:
        torch = self.module
        xs, outputs = pullback
        pairs = [(o, torch.from_numpy(np.array(c, dtype=_dtype(c)))) for o, c in zip(outputs, cotangents)]
        pairs = [(o, c.to(o.dtype)) for o, c in pairs if o.requires_grad]
        wanted = [x for x in xs if x.requires_grad]
        if not pairs or not wanted:
            return [None] * len(xs)
        found = iter(torch.autograd.grad([o for o, _ in pairs], wanted, [c for _, c in pairs], allow_unused=True,
                                         retain_graph=True))  # fmt: skip
        return [(lambda g: None if g is None else g.detach().numpy().copy())(next(found)) if x.requires_grad
                else None for x in xs]  # fmt: skip

    def vjp(self, function: Callable[..., Any], count: int) -> Callable[..., Any]:
        torch = self.module

        def pulled(*args: Any) -> tuple[Any, ...]:
            xs, cotangents = list(args[:count]), args[count:]
            with torch.enable_grad():
                xs = [x if x.requires_grad or not _differentiable(x) else x.detach().requires_grad_(True) for x in xs]
                outputs = [self.output(o) for o in function(*xs)]
                pairs = [(o, c.to(o.dtype)) for o, c in zip(outputs, cotangents) if o.requires_grad]
                wanted = [x for x in xs if x.requires_grad]
                found = (torch.autograd.grad([o for o, _ in pairs], wanted, [c for _, c in pairs], allow_unused=True,
                                             create_graph=True) if pairs and wanted else [None] * len(wanted))  # fmt: skip
            grads = iter(found)
            return tuple(
                (lambda g, x: torch.zeros_like(x) if g is None else g)(next(grads), x)
                if x.requires_grad
                else torch.zeros_like(x)
                for x in xs
            )

        return pulled

    def jvp(self, function: Callable[..., Any], arrays: list[Any], tangents: list[Any]) -> list[Any]:
        from torch.func import jvp

        from ...autograd.forward import NoForwardRule  # lazy: forward mode is rarely asked for

        try:
            _, found = jvp(lambda *xs: tuple(self.output(o) for o in function(*xs)),
                           tuple(self.tensor(a) for a in arrays), tuple(self.tensor(t) for t in tangents))  # fmt: skip
        except (RuntimeError, NotImplementedError) as failed:
            said = str(failed).split(". ")[0].splitlines()[0]
            raise NoForwardRule(f"PyTorch's forward mode cannot run this function ({said})") from None
        return [t.detach().numpy().copy() for t in found]


class JaxAdapter(Adapter):
    name = "jax"
    analytic = _words(
        "add sub mul div neg exp exp2 expm1 log log1p sin cos tan sinh cosh tanh asin acos atan asinh acosh atanh "
        "logistic sqrt rsqrt integer_pow pow square dot_general reduce_sum reduce_prod cumsum broadcast_in_dim "
        "reshape transpose squeeze expand_dims slice dynamic_slice gather concatenate copy copy_p pjit closed_call "
        "custom_jvp_call custom_vjp_call custom_vjp_call_jaxpr rev pad select_and_gather_add"
    )

    def operations(self, function: Callable[..., Any], arrays: list[Any]) -> set[str] | None:
        """The primitives of ``function``'s jaxpr at these arrays, its calls' inner ones included."""
        try:
            closed = self.module.make_jaxpr(lambda *a: tuple(self.output(o) for o in function(*a)))(
                *(self.array(a) for a in arrays)
            )
        except Exception:  # (it ran once already)
            return None
        seen: set[str] = set()
        stack = [closed.jaxpr]
        while stack:
            jaxpr = stack.pop()
            for eqn in jaxpr.eqns:
                seen.add(eqn.primitive.name)
                for param in eqn.params.values():
                    inner = getattr(param, "jaxpr", param)
                    if hasattr(inner, "eqns"):
                        stack.append(inner)
        return seen

    def array(self, value: Any) -> Any:
        return self.module.numpy.asarray(np.asarray(value, dtype=_dtype(value)))

    def forward(self, function: Callable[..., Any], arrays: list[Any], pullback: bool) -> tuple[list[Any], Any]:
        jax = self.module
        xs = [self.array(a) for a in arrays]
        if pullback:
            outputs, pull = jax.vjp(lambda *a: tuple(self.output(o) for o in function(*a)), *xs)
        else:
            outputs, pull = tuple(self.output(o) for o in function(*xs)), None
        return [np.array(o) for o in outputs], pull

    def output(self, value: Any) -> Any:
        try:
            return self.module.numpy.asarray(value)
        except (TypeError, ValueError):
            raise UsageError(f"the function returned a {type(value).__name__}: return arrays or numbers") from None

    def pull(self, pullback: Any, cotangents: list[Any]) -> list[Any]:
        return [np.array(g) for g in pullback(tuple(self.array(c) for c in cotangents))]

    def vjp(self, function: Callable[..., Any], count: int) -> Callable[..., Any]:
        jax = self.module

        def pulled(*args: Any) -> tuple[Any, ...]:
            xs, cotangents = args[:count], args[count:]
            _, pull = jax.vjp(lambda *a: tuple(self.output(o) for o in function(*a)), *xs)
            return tuple(pull(tuple(cotangents)))

        return pulled

    def jvp(self, function: Callable[..., Any], arrays: list[Any], tangents: list[Any]) -> list[Any]:
        _, found = self.module.jvp(lambda *xs: tuple(self.output(o) for o in function(*xs)),
                                   tuple(self.array(a) for a in arrays), tuple(self.array(t) for t in tangents))  # fmt: skip
        return [np.array(t) for t in found]


ADAPTERS: dict[str, type[Adapter]] = {"torch": TorchAdapter, "jax": JaxAdapter}


def _dtype(value: Any) -> Any:
    """float64, or complex128 for complex values (the complex step)."""
    return np.complex128 if np.iscomplexobj(value) else np.float64


def _differentiable(tensor: Any) -> bool:
    return bool(tensor.is_floating_point() or tensor.is_complex())
