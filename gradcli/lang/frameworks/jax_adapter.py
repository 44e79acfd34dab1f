"""JAX as gradcli calls it: float64 arrays in, ``jax.vjp`` and ``jax.jvp``, and the primitives of
the function's jaxpr."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import UsageError
from .adapter import Adapter, dtype_of, words


class JaxAdapter(Adapter):
    name = "jax"
    analytic = words(
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
        return self.module.numpy.asarray(np.asarray(value, dtype=dtype_of(value)))

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
