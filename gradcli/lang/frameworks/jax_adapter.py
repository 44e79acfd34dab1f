"""JAX as gradcli calls it: float64 arrays in, ``jax.vjp`` and ``jax.jvp``, and the primitives of
the function's jaxpr.

Only the inputs differentiated are traced: the others are passed as the plain arrays they are (a
``custom_vjp``'s ``nondiff_argnums``, a loop's bound). A cotangent is cast to its output's dtype (a
function computing in float32 returns float32). Where JAX cannot differentiate in reverse mode (a
``lax.while_loop``), the derivatives are JAX's forward mode (``jax.jacfwd``), and where it cannot in
forward mode (a ``custom_vjp``), forward mode's work is done in reverse mode: either way the adapter
notes it (``notes``), so that the command says which mode gave the numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...autograd.forward import NoForwardRule
from ...errors import UsageError
from .adapter import Adapter, Operations, dtype_of, words

#: JAX's words where reverse mode cannot run (a while loop; a primitive without a transpose rule)
_NO_REVERSE = re.compile(r"reverse-mode", re.IGNORECASE)
#: JAX's words where forward mode cannot run (a custom_vjp function)
_NO_FORWARD = re.compile(r"forward-mode|jvp", re.IGNORECASE)


class JaxAdapter(Adapter):
    name = "jax"
    analytic = words(
        "add sub mul div neg exp exp2 expm1 log log1p sin cos tan sinh cosh tanh asin acos atan asinh acosh atanh "
        "logistic sqrt rsqrt integer_pow pow square dot_general reduce_sum reduce_prod cumsum broadcast_in_dim "
        "reshape transpose squeeze expand_dims slice dynamic_slice gather concatenate copy copy_p pjit closed_call "
        "convert_element_type custom_jvp_call custom_vjp_call custom_vjp_call_jaxpr rev pad select_and_gather_add"
    )

    def operations(self, function: Callable[..., Any], arrays: list[Any]) -> Operations | None:
        """The primitives of ``function``'s jaxpr, its calls' inner ones included, traced with complex
        inputs as the complex step runs it (``jnp.real`` or ``jnp.conj`` of a real array is no primitive
        at all), a cast of a complex value to a real dtype named as such, and the least precise dtype
        it computes in. Where it cannot take complex values, those of a real trace."""
        for kind in (np.complex128, np.float64):
            try:
                closed = self.module.make_jaxpr(lambda *a: tuple(self.output(o) for o in function(*a)))(
                    *(self.module.numpy.asarray(np.asarray(a, dtype=kind)) for a in arrays)
                )
            except Exception:  # (it ran once already)
                continue
            return _primitives(closed.jaxpr)
        return None

    def array(self, value: Any) -> Any:
        return self.module.numpy.asarray(np.asarray(value, dtype=dtype_of(value)))

    def forward(
        self, function: Callable[..., Any], arrays: list[Any], pullback: bool | Sequence[bool]
    ) -> tuple[list[Any], Any]:
        """The outputs, and with ``pullback`` (True, or which inputs are differentiated) the pullback:
        only those inputs traced, the others passed as plain arrays."""
        xs = [self.array(a) for a in arrays]
        if not pullback:
            return [np.array(o) for o in self.outputs(function)(*xs)], None
        part = _Part(self, function, xs, _mask(pullback, len(xs)))
        outputs, pull = self.module.vjp(part.call, *part.moving)
        return [np.array(o) for o in outputs], (part, pull, [o.dtype for o in outputs])

    def outputs(self, function: Callable[..., Any]) -> Callable[..., tuple[Any, ...]]:
        return lambda *a: tuple(self.output(o) for o in function(*a))

    def output(self, value: Any) -> Any:
        try:
            return self.module.numpy.asarray(value)
        except (TypeError, ValueError):
            raise UsageError(f"the function returned a {type(value).__name__}: return arrays or numbers") from None

    def pull(self, pullback: Any, cotangents: list[Any]) -> list[Any]:
        part, pull, dtypes = pullback
        given = tuple(self.array(c).astype(d) for c, d in zip(cotangents, dtypes))
        return [None if g is None else np.array(g) for g in part.spread(self.pulled(part, pull, given))]

    def pulled(self, part: _Part, pull: Callable[..., Any], cotangents: tuple[Any, ...]) -> tuple[Any, ...]:
        """The moving inputs' gradients for these cotangents: JAX's reverse mode, else (a while loop)
        the Jacobian by JAX's forward mode, contracted with them."""
        try:
            return tuple(pull(cotangents))
        except Exception as failed:
            if not _NO_REVERSE.search(str(failed)):
                raise
            self.note(f"JAX cannot differentiate this function in reverse mode ({_first_sentence(failed)}): "
                      "its derivatives are JAX's forward mode (jax.jacfwd)")  # fmt: skip
        jnp = self.module.numpy
        if part.blocks is None:  # (once for every cotangent pulled: rows of a Jacobian, --points)
            moving = tuple(range(len(part.moving)))
            part.blocks = self.module.jacfwd(lambda *m: part.call(*m), argnums=moving)(*part.moving)
        blocks = part.blocks
        return tuple(
            sum(jnp.tensordot(c, rows[j], axes=jnp.ndim(c)) for c, rows in zip(cotangents, blocks)).astype(x.dtype)
            for j, x in enumerate(part.moving)
        )

    def vjp(self, function: Callable[..., Any], count: int, wanted: Sequence[bool] | None = None) -> Callable[..., Any]:
        """(inputs, cotangents) -> the inputs' gradients, as a function of JAX's own (for derivatives
        of derivatives); ``wanted``: the inputs differentiated (zeros for the others)."""
        jax = self.module

        def pulled(*args: Any) -> tuple[Any, ...]:
            xs, cotangents = list(args[:count]), args[count:]
            part = _Part(self, function, xs, _mask(wanted or True, count))
            outputs, pull = jax.vjp(part.call, *part.moving)
            given = tuple(c.astype(o.dtype) for c, o in zip(cotangents, outputs))
            found = part.spread(self.pulled(part, pull, given))
            return tuple(jax.numpy.zeros_like(x) if g is None else g for g, x in zip(found, xs))

        return pulled

    def jvp(self, function: Callable[..., Any], arrays: list[Any], tangents: list[Any]) -> list[Any]:
        """JAX's forward mode, the inputs with a zero tangent passed as plain arrays; where JAX has no
        forward mode for the function (a ``custom_vjp``), ``NoForwardRule`` with JAX's reason."""
        xs = [self.array(a) for a in arrays]
        given = [np.asarray(t) for t in tangents]
        part = _Part(self, function, xs, [bool(np.any(t)) for t in given])
        moving = [self.array(t) for t, m in zip(given, part.mask) if m]
        try:
            if not moving:
                return [np.zeros_like(np.asarray(o)) for o in part.call()]
            _, found = self.module.jvp(part.call, tuple(part.moving), tuple(moving))
        except (TypeError, NotImplementedError) as failed:
            if not _NO_FORWARD.search(str(failed)):
                raise
            why = _first_sentence(failed)
            self.note(f"JAX has no forward mode for this function ({why}): reverse mode is used instead")
            raise NoJaxForward(f"JAX's forward mode cannot run this function ({why}): use --mode reverse") from None
        return [np.array(t) for t in found]


class NoJaxForward(UsageError, NoForwardRule):
    """JAX has no forward mode for the function: a Hessian or an automatic mode takes reverse mode
    instead (``NoForwardRule``); ``--mode forward`` asked for it is refused, with JAX's reason (exit 2)."""


class _Part:
    """``function`` as a function of the inputs differentiated alone (``mask``), the others fixed."""

    def __init__(self, adapter: JaxAdapter, function: Callable[..., Any], xs: list[Any], mask: list[bool]) -> None:
        self.outputs = adapter.outputs(function)
        self.xs, self.mask = xs, mask
        self.moving = [x for x, m in zip(xs, mask) if m]
        self.blocks: Any = None  # d outputs / d moving inputs by forward mode, where reverse mode cannot run

    def call(self, *moving: Any) -> tuple[Any, ...]:
        given = iter(moving)
        return self.outputs(*(next(given) if m else x for x, m in zip(self.xs, self.mask)))

    def spread(self, found: Sequence[Any]) -> list[Any]:
        """The moving inputs' values back in every input's place (None for the fixed ones)."""
        given = iter(found)
        return [next(given) if m else None for m in self.mask]


def _mask(wanted: bool | Sequence[bool], count: int) -> list[bool]:
    return [True] * count if isinstance(wanted, bool) else [bool(w) for w in wanted]


def _first_sentence(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__).split(". ")[0].rstrip(".")


def _primitives(jaxpr: Any) -> Operations:
    """``operations`` of one jaxpr, its inner jaxprs walked too."""
    found = Operations(set(), np.dtype(np.float64))
    stack = [jaxpr]
    while stack:
        jaxpr = stack.pop()
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            given = [np.dtype(getattr(v.aval, "dtype", np.float64)) for v in eqn.invars if hasattr(v, "aval")]
            made = [np.dtype(getattr(v.aval, "dtype", np.float64)) for v in eqn.outvars if hasattr(v, "aval")]
            params = [
                q for p in eqn.params.values() for q in (p if isinstance(p, tuple) else (p,))
            ]  # (cond's branches)
            inner = [j for j in (getattr(q, "jaxpr", q) for q in params) if hasattr(j, "eqns")]
            cast = any(d.kind == "c" for d in given) and any(d.kind == "f" for d in made)
            if cast and name in JaxAdapter.analytic and not inner:  # (a call's own equations say which cast)
                name = f"cast to {next(d for d in made if d.kind == 'f')} ({name})"  # the imaginary part dropped
            found.names.add(name)
            found.lower(str(d) for d in made)
            stack.extend(inner)
    return found
