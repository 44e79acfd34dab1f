"""A loop's iterations run apart, so that its body can be drawn once (jax_record.py): the inputs of its
first iteration, the cotangents of that iteration's outputs, and each iteration's statistics.

``scan``: one ``jax.lax.scan`` of the body that adds a zero to each floating carry after each step
and returns its norm: its vjp, seeded with the cotangents of the scan's outputs, gives d output / d
each step's carry (the first step's seeds the body's own cotangents) and the norms come with it.
``while``: the trip count from running the loop with a counter, then a scan of that many steps for
the norms (JAX cannot differentiate a while loop in reverse mode: values only). ``cond``: the branch
its index takes, given the cond's own inputs and cotangents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import require

jax = require("jax")
import jax.numpy as jnp  # noqa: E402  (after require: float64 on)
from jax.extend.core import jaxpr_as_fun  # noqa: E402


@dataclass
class LoopRun:
    """What the drawing of a loop body needs of its run."""

    count: int | None  # iterations (None: unknown)
    first: list[Any]  # the body's inputs in its first iteration (its jaxpr's invars, in order)
    seeds: list[Any] | None = None  # the cotangents of the body's outputs in that iteration
    norms: list[list[float]] = field(default_factory=list)  # per iteration, each floating carry's norm
    #: per iteration, the floating carries' statistics together ({"norm", "mean", "nan", "inf"})
    stats: list[dict[str, float]] = field(default_factory=list)
    grads: list[dict[str, float]] | None = None  # the same of d output / d the carries after each iteration
    note: str | None = None  # what the run left out


def _stats(value: Any) -> Any:
    """norm, sum, NaN and infinities of ``value``, as one array (computed inside the loop)."""
    flat = jnp.ravel(value)
    return jnp.stack([_norm(flat), jnp.sum(flat).real, jnp.sum(jnp.isnan(flat)), jnp.sum(jnp.isinf(flat))])


def _steps(stats: Sequence[Any], sizes: Sequence[int], order: Sequence[int]) -> tuple[list[list[float]], list[dict[str, float]]]:  # fmt: skip
    """Each carry's ``_stats`` stacked by the scan's index -> per iteration (in the order they ran) each
    carry's norm, and the carries' statistics together."""
    columns = [np.asarray(c, dtype=np.float64).reshape(-1, 4) for c in stats]
    size = max(sum(sizes), 1)
    norms, together = [], []
    for t in order:
        rows = [c[t] for c in columns]
        norms.append([float(r[0]) for r in rows])
        together.append({"norm": float(np.sqrt(sum(r[0] ** 2 for r in rows))), "mean": float(sum(r[1] for r in rows) / size),
                         "nan": int(sum(r[2] for r in rows)), "inf": int(sum(r[3] for r in rows))})  # fmt: skip
    return norms, together


#: a scan's steps x carry elements up to which each step's carry gets a zero (its cotangent: each step's)
EPS_MOST = 1 << 22


def _floating(value: Any) -> bool:
    return bool(jnp.issubdtype(jnp.asarray(value).dtype, jnp.inexact))


def _norm(value: Any) -> Any:
    return jnp.sqrt(jnp.sum(jnp.abs(jnp.ravel(value)) ** 2))


def scan_run(eqn: Any, values: Sequence[Any], cotangents: Sequence[Any] | None) -> LoopRun:
    """A ``scan`` equation run at ``values`` (its inputs); ``cotangents``: of its outputs (None: values only)."""
    p = eqn.params
    consts_n, carry_n, length, reverse = p["num_consts"], p["num_carry"], p["length"], p["reverse"]
    body = jaxpr_as_fun(p["jaxpr"])
    consts, init, xs = (
        list(values[:consts_n]),
        list(values[consts_n : consts_n + carry_n]),
        list(values[consts_n + carry_n :]),
    )
    if length == 0:
        return LoopRun(0, [])
    first = length - 1 if reverse else 0
    moving = [k for k, c in enumerate(init) if _floating(c)]

    def step(carry: list[Any], given: tuple[list[Any], list[Any]]) -> tuple[list[Any], Any]:
        x, eps = given
        out = list(body(*consts, *carry, *x))
        new = out[:carry_n]
        for k, e in zip(moving, eps or ()):
            new[k] = new[k] + e
        return new, (out[carry_n:], [_stats(new[k]) for k in moving])

    def run(eps: list[Any] | None, init: list[Any], xs: list[Any] = xs, length: int = length) -> tuple[Any, Any]:
        final, (ys, norms) = jax.lax.scan(step, init, (xs, eps), length=length, reverse=reverse)
        floating = [final[k] for k in moving] + [y for y in ys if _floating(y)]
        return floating, norms

    order = range(length - 1, -1, -1) if reverse else range(length)
    found = LoopRun(length, [*consts, *init, *(x[first] for x in xs)])
    sizes = [int(np.size(init[k])) for k in moving]
    if cotangents is None or length * sum(sizes) > EPS_MOST:  # (a zero a step and element: too many)
        _, stats = jax.jit(run)(None, init)
        found.norms, found.stats = _steps(stats, sizes, order)
        if cotangents is not None:
            found.seeds = _first_seeds(eqn, body, values, cotangents, run)
            found.note = (f"each iteration's gradient statistics are left out ({length:,} iterations of "
                          f"{sum(sizes):,} carried elements): the first iteration's gradients are drawn")  # fmt: skip
        return found
    found.seeds, found.grads, stats = _stepwise(eqn, run, init, moving, cotangents)
    found.norms, found.stats = _steps(stats, sizes, order)
    found.grads = _steps([_numpy_stats(g, length) for g in found.grads], sizes, order)[1]
    return found


def _stepwise(eqn: Any, run: Any, init: list[Any], moving: list[int], cotangents: Sequence[Any]) -> tuple[list[Any], Any, Any]:  # fmt: skip
    """One program of ``run`` with a zero added to each step's floating carries and its vjp: the first
    iteration's seeds, d output / d each step's carries (stacked), and each step's statistics."""
    p = eqn.params
    carry_n, length = p["num_carry"], p["length"]
    first = length - 1 if p["reverse"] else 0
    eps = [jnp.zeros((length, *jnp.shape(init[k])), jnp.asarray(init[k]).dtype) for k in moving]
    ys = [k for k, y in enumerate(eqn.outvars[carry_n:]) if jnp.issubdtype(y.aval.dtype, jnp.inexact)]
    avals = [eqn.outvars[k].aval for k in moving] + [eqn.outvars[carry_n + k].aval for k in ys]
    given = [
        jnp.zeros(a.shape, a.dtype) if cotangents[k] is None else jnp.asarray(cotangents[k], a.dtype)
        for k, a in zip([*moving, *(carry_n + k for k in ys)], avals)
    ]

    def both(eps: list[Any], init: list[Any], given: list[Any]) -> tuple[Any, Any]:
        _, pull, norms = jax.vjp(run, eps, init, has_aux=True)
        return norms, pull(given)[0]

    stats, eps_grads = jax.jit(both)(eps, init, given)  # (one program: the forward and its vjp)
    seeds: list[Any] = [None] * len(eqn.outvars)
    for k, g in zip(moving, eps_grads):
        seeds[k] = g[first]
    for k, g in zip(ys, given[len(moving) :]):
        seeds[carry_n + k] = g[first]
    return seeds, eps_grads, stats


def _first_seeds(eqn: Any, body: Any, values: Sequence[Any], cotangents: Sequence[Any], run: Any) -> list[Any]:
    """The cotangents of the body's outputs in the first iteration where a zero per step would not fit:
    d output / d the carry after it by a vjp of the steps after it (``run`` of the rest), memory of one carry."""
    p = eqn.params
    consts_n, carry_n, length, reverse = p["num_consts"], p["num_carry"], p["length"], p["reverse"]
    consts, init = list(values[:consts_n]), list(values[consts_n : consts_n + carry_n])
    xs = list(values[consts_n + carry_n :])
    first = length - 1 if reverse else 0
    out = list(body(*consts, *init, *(x[first] for x in xs)))
    rest = [x[:-1] if reverse else x[1:] for x in xs]
    moving = [k for k, c in enumerate(init) if _floating(c)]
    ys = [k for k, y in enumerate(eqn.outvars[carry_n:]) if jnp.issubdtype(y.aval.dtype, jnp.inexact)]

    def after(moved: list[Any]) -> Any:
        carry = list(out[:carry_n])
        for k, c in zip(moving, moved):
            carry[k] = c
        return run(None, carry, rest, length - 1)[0]

    outs, pull = jax.vjp(after, [out[k] for k in moving])
    wanted = [*moving, *(carry_n + k for k in ys)]
    given = []
    for i, (k, o) in enumerate(zip(wanted, outs)):
        whole = None if cotangents[k] is None else jnp.asarray(cotangents[k], o.dtype)
        if whole is not None and i >= len(moving):  # (a stacked output: the steps after the first)
            whole = whole[:-1] if reverse else whole[1:]
        given.append(jnp.zeros_like(o) if whole is None else whole)
    (moved,) = pull(given)
    seeds: list[Any] = [None] * len(eqn.outvars)
    for k, g in zip(moving, moved):
        seeds[k] = g
    for k in ys:
        whole = cotangents[carry_n + k]
        seeds[carry_n + k] = None if whole is None else np.asarray(whole)[first]
    return seeds


def _numpy_stats(stacked: Any, length: int) -> np.ndarray:
    """``_stats`` of each iteration's slice of ``stacked`` (length, ...), by NumPy."""
    rows = np.asarray(stacked).reshape(length, -1)
    return np.stack(
        [np.linalg.norm(rows, axis=1), np.sum(rows, axis=1).real, np.isnan(rows).sum(1), np.isinf(rows).sum(1)], 1
    )


def while_run(eqn: Any, values: Sequence[Any]) -> LoopRun:
    """A ``while`` equation run at ``values``: its trip count, the first iteration's inputs, the norms."""
    p = eqn.params
    cond_n, body_n = p["cond_nconsts"], p["body_nconsts"]
    cond, body = jaxpr_as_fun(p["cond_jaxpr"]), jaxpr_as_fun(p["body_jaxpr"])
    cond_consts, body_consts, init = (
        list(values[:cond_n]),
        list(values[cond_n : cond_n + body_n]),
        list(values[cond_n + body_n :]),
    )

    def counted(state: tuple[Any, list[Any]]) -> tuple[Any, list[Any]]:
        return state[0] + 1, list(body(*body_consts, *state[1]))

    count, _ = jax.jit(lambda init: jax.lax.while_loop(lambda s: cond(*cond_consts, *s[1])[0], counted, (0, init)))(
        init
    )
    count = int(count)
    found = LoopRun(count, [*body_consts, *init])
    moving = [k for k, c in enumerate(init) if _floating(c)]
    if count and moving:

        def step(carry: list[Any], _: Any) -> tuple[list[Any], list[Any]]:
            new = list(body(*body_consts, *carry))
            return new, [_stats(new[k]) for k in moving]

        _, stats = jax.jit(lambda init: jax.lax.scan(step, init, None, length=count))(init)
        found.norms, found.stats = _steps(stats, [int(np.size(init[k])) for k in moving], range(count))
    return found


def cond_branch(values: Sequence[Any], branches: int) -> int:
    """The branch a ``cond`` takes for its index (its first input), clamped as ``lax.switch`` clamps it."""
    return int(np.clip(int(np.asarray(values[0])), 0, branches - 1))
