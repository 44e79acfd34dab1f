"""``check --blame`` of a JAX function: which ``jax.custom_vjp`` / ``jax.custom_jvp`` rule is wrong?

JAX's own primitives are JAX's and trusted; the user's rules are checked, one call at a time, in the
order the function makes them: at the values the call received, the rule's vector-Jacobian product
for a random cotangent v (``jax.vjp`` of the call bound as one, so the user's rule is the one used)
against finite differences of v . forward, the forward being the call's own inner equations. The
comparison is ``check``'s own (``decide``: Richardson differences, kinks, inconclusive estimates,
the rule's rounding, rtol and atol as ``check`` reads them). The first call that disagrees is named,
with its scope and the line of the user's code that called it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..lang.frameworks import require
from ..lang.frameworks.jax_record import CUSTOM, JaxCall, JaxTrace, bind, trace_values
from ..text import array
from .decide import MISMATCH, Road, decide, tolerances

jax = require("jax")
import jax.numpy as jnp  # noqa: E402  (after require: float64 on)
from jax.extend.core import jaxpr_as_fun  # noqa: E402

RULE = "a custom derivative rule"  # why no complex step follows it


@dataclass
class JaxBlame:
    """The first custom rule whose derivative disagrees with differences of its own forward."""

    name: str  # the function the rule belongs to: "safe_log"
    scope: str | None  # the calls around it, itself last: "jit:model/custom_vjp:safe_log"
    line: str | None  # the line of the user's code that called it: "model.py:12"
    max_abs_error: float
    max_rel_error: float
    framework: str = "jax"
    kind: str = "custom_vjp"  # or "custom_jvp"
    index: int = 0  # which custom call, in call order (0: the first)
    checked: int = 0  # the custom calls checked (this one the last)
    rule: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # v . J from the rule
    differences: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # from finite differences
    #: as gradcli's own Blame words a node: "custom_vjp:safe_log (safe_log) ... for random directions,
    #: its backward gives v . J u where differences of its forward give ...", at the call's inputs
    grad_fn: str = ""
    label: str = ""
    autograd: float = float("nan")
    numeric: float = float("nan")
    inputs: str = ""

    def text(self) -> str:
        where = ", ".join(part for part in (self.scope, f"called at {self.line}" if self.line else None) if part)
        return (
            f"the {self.kind} rule of {self.name} ({where}) computes a wrong derivative: for a random cotangent, "
            f"its rule gives {array(self.rule, digits=6)} where finite differences of its forward give "
            f"{array(self.differences, digits=6)} (max abs error {self.max_abs_error:.3g}, rel {self.max_rel_error:.3g})"
        )


def blame_jax(
    function: Callable[..., Any],
    values: Mapping[str, np.ndarray],
    wrt: Sequence[str] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> JaxBlame | None:
    """The first ``custom_vjp`` / ``custom_jvp`` call of ``function(**values)`` (each value a float64
    array) whose rule disagrees with finite differences of its forward; None when all agree (or
    there are none: ``blame_jax_calls`` also says how many were checked)."""
    return blame_jax_calls(function, values, wrt, rtol, atol)[0]


def blame_jax_calls(function: Callable[..., Any], values: Mapping[str, np.ndarray], wrt: Sequence[str] | None = None,
                    rtol: float | None = None, atol: float | None = None) -> tuple[JaxBlame | None, int]:  # fmt: skip
    """``blame_jax``'s finding, and how many custom calls were checked."""
    return blame_traced(trace_values(function, values, wrt, cotangents=False), rtol, atol)


def blame_traced(trace: JaxTrace, rtol: float | None = None, atol: float | None = None) -> tuple[JaxBlame | None, int]:
    """``blame_jax``'s finding on a traced function, and how many custom calls were checked."""
    rng = np.random.default_rng(0)
    checked = 0
    for call in trace.calls:
        if call.kind not in CUSTOM.values():
            continue
        found = _judged(trace, call, rng, rtol, atol)
        if found is None:
            continue
        checked += 1
        if found is not True:
            found.index, found.checked = checked - 1, checked
            return found, checked
    return None, checked


def _judged(trace: JaxTrace, call: JaxCall, rng: np.random.Generator, rtol: float | None,
            atol: float | None) -> JaxBlame | bool | None:  # fmt: skip
    """One custom call judged: its blame, True where its rule agrees (or nothing can judge it), None
    where it has no floating input or output to judge."""
    rule = _Rule(trace, call, rng)
    if rule.x0.size == 0 or not rule.cotangent:
        return None
    with np.errstate(all="ignore"):
        gradient = rule.gradient(rule.x0[None, :])
        road = Road(rule.x0[None, :], np.array([rule.value(rule.x0[None, :])[0]]), gradient, rule.labels,
                    lambda rows, owner: rule.value(rows), lambda rows, owner: rule.gradient(rows), [RULE])  # fmt: skip
        if not (np.isfinite(road.f0).all() and np.isfinite(gradient).all()):
            return True  # (no difference quotient means anything at an infinite value)
        given_rtol, atols = tolerances(road.dtype, rtol, atol, road)
        decision = decide(road, ["finite_difference"], given_rtol, atols)
    compared = decision.checks["finite_difference"]
    if compared.ok[0] != MISMATCH and decision.subgradient.all():
        return True
    return _finding(call, rule, gradient[0], compared, rng)


def _finding(call: JaxCall, rule: _Rule, gradient: np.ndarray, compared: Any, rng: np.random.Generator) -> JaxBlame:
    """The blame of a call whose rule disagrees: the errors over the elements judged, and v . J u for
    a random direction u both ways (elements not judged taken as the rule gives them)."""
    judged = compared.mask[0] if compared.mask[0].any() else np.ones(rule.x0.size, bool)
    differences = compared.ref.reference[0]
    u = rng.standard_normal(rule.x0.size)
    found = JaxBlame(call.name, call.scope, call.line, float(np.max(compared.abs_error[0][judged])),
                     float(np.max(compared.rel_error[0][judged])), kind=call.kind, rule=gradient,
                     differences=differences)  # fmt: skip
    found.grad_fn, found.label = f"{call.kind}:{call.name}", call.name  # (the label is in its nodes' scope)
    found.autograd = float(gradient @ u)
    found.numeric = float(np.where(judged, differences, gradient) @ u)
    found.inputs = ", ".join(array(np.asarray(v), digits=6) if np.size(v) <= 6 else f"shape {np.shape(v)}"
                             for v in rule.values)  # fmt: skip
    return found


class _Rule:
    """A custom call at the values it received, as functions of its floating inputs flattened: v . its
    forward (its inner equations), and v . J by its rule, for rows of points at once."""

    def __init__(self, trace: JaxTrace, call: JaxCall, rng: np.random.Generator) -> None:
        equation = trace.equations[call.equation]
        self.eqn = equation.eqn
        self.values = [trace.values[i].value for i in equation.inputs]
        self.moving = [k for k, i in enumerate(equation.inputs) if _real(trace.values[i].dtype)]
        self.shapes = [np.shape(self.values[k]) for k in self.moving]
        self.sizes = [int(np.prod(s)) for s in self.shapes]
        self.x0 = np.concatenate([np.ravel(self.values[k]) for k in self.moving] or [np.zeros(0)]).astype(np.float64)
        self.names = [f"x{k}" for k in range(len(self.values))]
        self.labels = [f"{self.names[k]}[{j}]" for k, size in zip(self.moving, self.sizes) for j in range(size)]
        outs = [trace.values[o] for o in equation.outputs]
        self.kept = [k for k, o in enumerate(outs) if _real(o.dtype)]
        self.cotangent = [rng.standard_normal(outs[k].shape) for k in self.kept]
        self.forward = jaxpr_as_fun(self.eqn.params["call_jaxpr"])
        self.value = _rows(lambda x: self._dot(self.forward(*self._inputs(x))))
        self.gradient = _rows(self._rule)

    def _inputs(self, flat: Any) -> list[Any]:
        given = list(self.values)
        start = 0
        for k, shape, size in zip(self.moving, self.shapes, self.sizes):
            given[k] = jnp.reshape(flat[start : start + size], shape)
            start += size
        return given

    def _dot(self, outs: Sequence[Any]) -> Any:
        return sum(jnp.sum(jnp.asarray(v) * outs[k]) for k, v in zip(self.kept, self.cotangent))

    def _rule(self, flat: Any) -> Any:
        """v . J by the rule: the vjp of the call bound as one (the user's rule) for the cotangent v."""
        _, pullback = jax.vjp(lambda x: [bind(self.eqn, self._inputs(x))[k] for k in self.kept], flat)
        return pullback([jnp.asarray(v) for v in self.cotangent])[0]


def _rows(one: Callable[[Any], Any]) -> Callable[[np.ndarray], np.ndarray]:
    """``one`` (a function of one flat point) for rows of points at once, compiled once."""
    batched = jax.jit(jax.vmap(one))
    return lambda rows: np.asarray(batched(jnp.asarray(rows, dtype=jnp.float64)))


def _real(dtype: Any) -> bool:
    return bool(jnp.issubdtype(dtype, jnp.floating))
