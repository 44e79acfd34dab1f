"""``check --blame`` of a JAX function: which ``jax.custom_vjp`` / ``jax.custom_jvp`` rule is wrong?

JAX's own primitives are JAX's and trusted; the user's rules are checked wherever the function calls
them: in its own equations and its ``jit`` calls, and inside the bodies of its loops and branches
(``scan``, ``fori_loop``, ``while_loop``, ``cond``), which are run here iteration by iteration to
find the values each call received. Each call is judged at those values: the rule's vector-Jacobian
product for a random cotangent v (``jax.vjp`` of the call bound as one, so the user's rule is the one
used) against finite differences of v . forward, the forward being the call's own inner equations,
differentiated in its explicit inputs only (an array the function closes over is not one). The
comparison is ``check``'s own (``decide``: Richardson differences, kinks, inconclusive estimates, the
rule's rounding, rtol and atol as ``check`` reads them); every call of one rule (a loop's iterations,
up to ``PER_RULE`` of them spread over the loop) is judged in one batch. The first call that
disagrees is named, with its scope, the iteration or branch it ran in and the line of the user's code
that called it. A rule that cannot be judged is said in a warning, and the others still are.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..lang.frameworks import require
from ..lang.frameworks.jax_record import (
    CUSTOM,
    LOOPS,
    OPENED,
    JaxTrace,
    bind,
    call_name,
    sub_jaxpr,
    trace_values,
    user_line,
)
from ..text import array
from .decide import MISMATCH, Road, decide, tolerances

jax = require("jax")
import jax.numpy as jnp  # noqa: E402  (after require: float64 on)
from jax.extend.core import ClosedJaxpr, DropVar, Literal, jaxpr_as_fun  # noqa: E402

RULE = "a custom derivative rule"  # why no complex step follows it
#: calls of one rule judged (a loop's iterations), spread from its first call to its last
PER_RULE = 16
#: loop bodies run here to find the values of the calls inside them: past these, the later ones are not judged
BODY_RUNS = 2000


@dataclass
class JaxBlame:
    """The first custom rule whose derivative disagrees with differences of its own forward."""

    name: str  # the function the rule belongs to: "safe_log"
    scope: str | None  # the calls around it, itself last: "jit:model/custom_vjp:safe_log", "scan/custom_vjp:f"
    line: str | None  # the line of the user's code that called it: "model.py:12"
    max_abs_error: float
    max_rel_error: float
    framework: str = "jax"
    kind: str = "custom_vjp"  # or "custom_jvp"
    index: int = 0  # which custom call, in call order (0: the first)
    checked: int = 0  # the custom calls checked (this one among them)
    where: str = ""  # inside a loop or a branch: "iteration 2 of scan", "branch 1 of cond"
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
        parts = (self.scope, self.where or None, f"called at {self.line}" if self.line else None)
        return (
            f"the {self.kind} rule of {self.name} ({', '.join(p for p in parts if p)}) computes a wrong derivative: "
            f"for a random cotangent, its rule gives {array(self.rule, digits=6)} where finite differences of its "
            f"forward give {array(self.differences, digits=6)} (max abs error {self.max_abs_error:.3g}, "
            f"rel {self.max_rel_error:.3g})"
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
    results = rule_results(trace, rtol, atol, first=True)
    found = next((r.blame for r in results if r.blame is not None), None)
    return found, sum(r.judged for r in results)


@dataclass
class RuleResult:
    """One custom rule's own result: the calls of it judged, and its blame (None: it agrees)."""

    kind: str  # "custom_vjp" or "custom_jvp"
    name: str
    scope: str  # of its first call
    judged: int  # its calls judged (0: it has no floating input or output, or it could not be judged)
    blame: JaxBlame | None = None
    failed: str | None = None  # why it could not be judged


def rule_results(trace: JaxTrace, rtol: float | None = None, atol: float | None = None,
                 first: bool = False) -> list[RuleResult]:  # fmt: skip
    """Every custom rule of a traced function judged, in the order the function first calls it, every
    call of it (up to ``PER_RULE``) in one batch; ``first``: up to the first that disagrees. A rule that
    cannot be judged is said in a warning, and the others are judged all the same."""
    rng = np.random.default_rng(0)
    results: list[RuleResult] = []
    checked = 0
    for calls in _by_rule(list(_calls(trace))):
        result = RuleResult(calls[0].kind, calls[0].name, calls[0].scope, 0)
        results.append(result)
        try:
            result.blame, result.judged = _judged(calls, rng, rtol, atol)
        except Exception as failed:  # (the rule's own failure: said, and the other rules judged all the same)
            result.failed = f"{type(failed).__name__}: {_first_line(failed)}"
            message = (
                f"--blame could not judge the {result.kind} rule of {result.name} ({result.scope}): {result.failed}"
            )
            warnings.warn(message, UserWarning, stacklevel=2)
            continue
        if result.blame is not None:
            result.blame.index += checked
            result.blame.checked = checked + result.judged
            if first:
                break
        checked += result.judged
    return results


@dataclass
class _RuleCall:
    """One call of a custom rule, at the values it received."""

    eqn: Any  # the custom_vjp_call / custom_jvp_call equation (one object for every iteration of a loop)
    values: list[Any]
    scope: str
    where: str = ""  # "iteration 2 of scan"; "" outside loops and branches

    @property
    def kind(self) -> str:
        return CUSTOM[self.eqn.primitive.name]

    @property
    def name(self) -> str:
        return call_name(self.eqn, self.kind)

    @property
    def line(self) -> str | None:
        return user_line(self.eqn)


def _calls(trace: JaxTrace) -> Iterator[_RuleCall]:
    """Every custom call of the traced function in the order it ran: those among its equations (the
    trace's calls), and those inside its loops and branches, found by running their bodies."""
    custom = {c.equation: c for c in trace.calls if c.kind in CUSTOM.values()}
    loops = {c.equation: c for c in trace.calls if c.kind in LOOPS}
    for k, equation in enumerate(trace.equations):
        if equation.body:  # (drawn once in a loop's box: the loop's own run below finds its calls)
            continue
        values = [trace.values[i].value for i in equation.inputs]
        if k in custom:
            yield _RuleCall(equation.eqn, values, custom[k].scope)
        elif equation.primitive in LOOPS and _holds_custom(equation.eqn):
            scope = loops[k].scope if k in loops else equation.primitive
            inside = _Inside()
            try:
                inside.loop(equation.eqn, values, scope, "")
            except _Spent:
                warnings.warn(
                    f"--blame judged the custom rules of the first {BODY_RUNS} runs of the body of {scope} only",
                    UserWarning,
                    stacklevel=2,
                )
            yield from inside.found


def _by_rule(calls: list[_RuleCall]) -> list[list[_RuleCall]]:
    """The calls grouped by rule (its equation), in the order of their first calls; at most
    ``PER_RULE`` of each, spread from the first to the last."""
    groups: dict[int, list[_RuleCall]] = {}
    for call in calls:
        groups.setdefault(id(call.eqn), []).append(call)
    chosen = []
    for group in groups.values():
        picked = np.unique(np.linspace(0, len(group) - 1, min(len(group), PER_RULE)).round().astype(int))
        chosen.append([group[k] for k in picked])
    return chosen


class _Spent(Exception):
    """The loop bodies run to find the custom calls inside them are ``BODY_RUNS``."""


class _Inside:
    """Runs loops and branches equation by equation (as ``jax.core.eval_jaxpr``), noting every custom
    call inside them with the values it received."""

    def __init__(self) -> None:
        self.found: list[_RuleCall] = []
        self.runs = 0

    def run(self, jaxpr: Any, args: Sequence[Any], scope: str, where: str) -> list[Any]:
        inner = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
        env: dict[Any, Any] = dict(zip(inner.constvars, jaxpr.consts if isinstance(jaxpr, ClosedJaxpr) else ()))
        env.update(zip(inner.invars, args))

        def read(atom: Any) -> Any:
            return atom.val if isinstance(atom, Literal) else env[atom]

        for eqn in inner.eqns:
            ins = [read(a) for a in eqn.invars]
            name = eqn.primitive.name
            if name in CUSTOM:
                call = _RuleCall(eqn, ins, "", where)
                call.scope = f"{scope}/{call.kind}:{call.name}"
                self.found.append(call)
                outs = bind(eqn, ins)
            elif name in LOOPS and _holds_custom(eqn):
                outs = self.loop(eqn, ins, f"{scope}/{name}", where)
            elif name in OPENED and sub_jaxpr(eqn) is not None and _holds_custom(eqn):
                kind = OPENED[name]
                outs = self.run(sub_jaxpr(eqn), ins, f"{scope}/{kind}:{call_name(eqn, kind)}", where)
            else:
                outs = bind(eqn, ins)
            env.update((var, value) for var, value in zip(eqn.outvars, outs) if not isinstance(var, DropVar))
        return [read(a) for a in inner.outvars]

    def loop(self, eqn: Any, values: Sequence[Any], scope: str, where: str) -> list[Any]:
        """A ``cond``, ``scan`` or ``while`` run here at ``values``: its outputs."""
        name, params = eqn.primitive.name, eqn.params
        label = scope.rpartition("/")[2]
        if name == "cond":
            index = int(np.asarray(values[0]))
            return self.run(params["branches"][index], values[1:], scope, _within(where, f"branch {index} of {label}"))
        if name == "scan":
            return self.scan(eqn, values, scope, where)
        conds, bodies = params["cond_nconsts"], params["body_nconsts"]
        carry, turn = list(values[conds + bodies :]), 0
        while bool(np.asarray(self.run(params["cond_jaxpr"], [*values[:conds], *carry], scope, where)[0])):
            self.spend()
            body = [*values[conds : conds + bodies], *carry]
            carry = self.run(params["body_jaxpr"], body, scope, _within(where, f"iteration {turn} of {label}"))
            turn += 1
        return carry

    def scan(self, eqn: Any, values: Sequence[Any], scope: str, where: str) -> list[Any]:
        params = eqn.params
        consts, carried, length = params["num_consts"], params["num_carry"], params["length"]
        if not length:
            return bind(eqn, values)
        carry, xs = list(values[consts : consts + carried]), values[consts + carried :]
        ys: list[Any] = [None] * length
        for i in reversed(range(length)) if params["reverse"] else range(length):
            self.spend()
            args = [*values[:consts], *carry, *(x[i] for x in xs)]
            outs = self.run(
                params["jaxpr"], args, scope, _within(where, f"iteration {i} of {scope.rpartition('/')[2]}")
            )
            carry, ys[i] = outs[:carried], outs[carried:]
        return [*carry, *(jnp.stack([y[j] for y in ys]) for j in range(len(ys[0])))]

    def spend(self) -> None:
        self.runs += 1
        if self.runs > BODY_RUNS:
            raise _Spent


def _within(where: str, part: str) -> str:
    return f"{where}, {part}" if where else part


def _holds_custom(eqn: Any) -> bool:
    """Does ``eqn`` hold (in its jaxprs, at any depth) a custom rule's call?"""
    stack = [eqn]
    while stack:
        current = stack.pop()
        for param in current.params.values():
            for inner in param if isinstance(param, tuple) else (param,):
                inner = getattr(inner, "jaxpr", inner)
                if hasattr(inner, "eqns"):
                    if any(e.primitive.name in CUSTOM for e in inner.eqns):
                        return True
                    stack += inner.eqns
    return False


def _judged(calls: list[_RuleCall], rng: np.random.Generator, rtol: float | None,
            atol: float | None) -> tuple[JaxBlame | None, int]:  # fmt: skip
    """The calls of one rule judged together: the first whose rule disagrees (its index among them),
    and how many were judged (none where the rule has no floating input or output)."""
    rule = _Rule(calls, rng)
    if rule.x0.shape[1] == 0 or not rule.kept:
        return None, 0
    points = np.arange(len(calls))
    with np.errstate(all="ignore"):
        f0 = rule.value(rule.x0, points)
        gradient = rule.gradient(rule.x0, points)
        road = Road(rule.x0, f0, gradient, rule.labels, rule.value, rule.gradient, [RULE] * len(calls))
        given_rtol, atols = tolerances(road.dtype, rtol, atol, road)
        decision = decide(road, ["finite_difference"], given_rtol, atols)
    compared = decision.checks["finite_difference"]
    finite = np.isfinite(f0) & np.isfinite(gradient).all(axis=1)  # (no difference quotient means anything else)
    wrong = np.flatnonzero(finite & ((compared.ok == MISMATCH) | ~decision.subgradient.all(axis=1)))
    if not wrong.size:
        return None, len(calls)
    found = _finding(calls[wrong[0]], rule, int(wrong[0]), gradient[wrong[0]], compared, rng)
    found.index = int(wrong[0])
    return found, len(calls)


def _finding(call: _RuleCall, rule: _Rule, p: int, gradient: np.ndarray, compared: Any,
             rng: np.random.Generator) -> JaxBlame:  # fmt: skip
    """The blame of a call whose rule disagrees: the errors over the elements judged, and v . J u for
    a random direction u both ways (elements not judged taken as the rule gives them)."""
    judged = compared.mask[p] if compared.mask[p].any() else np.ones(rule.x0.shape[1], bool)
    differences = compared.ref.reference[p]
    u = rng.standard_normal(rule.x0.shape[1])
    found = JaxBlame(call.name, call.scope, call.line, float(np.max(compared.abs_error[p][judged])),
                     float(np.max(compared.rel_error[p][judged])), kind=call.kind, where=call.where, rule=gradient,
                     differences=differences)  # fmt: skip
    found.grad_fn, found.label = f"{call.kind}:{call.name}", call.name  # (the label is in its nodes' scope)
    found.autograd = float(gradient @ u)
    found.numeric = float(np.where(judged, differences, gradient) @ u)
    found.inputs = ", ".join(array(np.asarray(v), digits=6) if np.size(v) <= 6 else f"shape {np.shape(v)}"
                             for v in call.values) + (f" in {call.where}" if call.where else "")  # fmt: skip
    return found


class _Rule:
    """The calls of one rule at the values each received, as functions of the floating inputs it is
    differentiated in (not an array the function closes over), flattened: v . its forward (its inner
    equations), and v . J by its rule, for rows of points at once (``owner``: each row's call)."""

    def __init__(self, calls: list[_RuleCall], rng: np.random.Generator) -> None:
        first = calls[0]
        self.eqn = first.eqn
        consts = int(self.eqn.params.get("num_consts", 0))  # (arrays the function closed over come first)
        self.moving = [k for k, v in enumerate(first.values) if k >= consts and _real(np.asarray(v).dtype)]
        self.shapes = [np.shape(first.values[k]) for k in self.moving]
        self.sizes = [int(np.prod(s)) for s in self.shapes]
        self.labels = [f"x{k}[{j}]" for k, size in zip(self.moving, self.sizes) for j in range(size)]
        outs = self.eqn.outvars
        self.kept = [k for k, o in enumerate(outs) if _real(o.aval.dtype)]
        self.dtypes = [outs[k].aval.dtype for k in self.kept]
        self.fixed = [np.stack([np.asarray(c.values[k]) for c in calls]) for k in range(len(first.values))]
        self.x0 = np.stack([np.concatenate([np.ravel(c.values[k]) for k in self.moving] or [np.zeros(0)])
                            for c in calls]).astype(np.float64)  # fmt: skip
        self.cotangents = [np.stack([rng.standard_normal(outs[k].aval.shape) for _ in calls]) for k in self.kept]
        self.forward = jaxpr_as_fun(self.eqn.params["call_jaxpr"])
        self.value = _rows(self, lambda x, fixed, v: self._dot(self.forward(*self._inputs(x, fixed)), v))
        self.gradient = _rows(self, self._rule)

    def _inputs(self, flat: Any, fixed: Sequence[Any]) -> list[Any]:
        given = list(fixed)
        start = 0
        for k, shape, size in zip(self.moving, self.shapes, self.sizes):
            given[k] = jnp.reshape(flat[start : start + size], shape)
            start += size
        return given

    def _dot(self, outs: Sequence[Any], cotangents: Sequence[Any]) -> Any:
        return sum(jnp.sum(v * outs[k]) for k, v in zip(self.kept, cotangents))

    def _rule(self, flat: Any, fixed: Sequence[Any], cotangents: Sequence[Any]) -> Any:
        """v . J by the rule: the vjp of the call bound as one (the user's rule) for the cotangent v."""
        _, pullback = jax.vjp(lambda x: [bind(self.eqn, self._inputs(x, fixed))[k] for k in self.kept], flat)
        return pullback([v.astype(d) for v, d in zip(cotangents, self.dtypes)])[0]


def _rows(rule: _Rule, one: Callable[[Any, Any, Any], Any]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``one`` (a function of one flat point, its call's other inputs and cotangent) for rows of points
    at once, each row with the inputs and cotangent of its call (``owner``), compiled once."""
    batched = jax.vmap(one)

    def rows(x: np.ndarray, owner: np.ndarray) -> np.ndarray:
        count = len(x)
        padded = 1 << max(count - 1, 0).bit_length()  # (a few batch sizes, each compiled once for every rule)
        x = np.concatenate([x, np.repeat(x[:1], padded - count, axis=0)])
        owner = np.concatenate([owner, np.zeros(padded - count, dtype=int)])
        fixed = [f[owner] for f in rule.fixed]
        found = batched(jnp.asarray(x, dtype=jnp.float64), fixed, [v[owner] for v in rule.cotangents])
        return np.asarray(found)[:count]

    return rows


def _real(dtype: Any) -> bool:
    return bool(jnp.issubdtype(dtype, jnp.floating))


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
