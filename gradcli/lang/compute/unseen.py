"""What autograd may not see, and values the program does not use: the commands' warnings.

``unseen_derivative`` tries a Python function that left autograd's sight (``float(x)``, ``.item()``)
along a random direction; ``unused_values`` names ``--at`` values the program ignores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import UsageError
from ..evaluate import suggest
from ..library import gc
from ..program import Program
from .gradient import Gradient, single_output


def leaves_autograd(program: Program, unconnected: Sequence[str] = (), detail: str = "") -> str:
    """Why autograd misses a derivative of a Python function: the ways it leaves gradcli's operations."""
    how = f" ({', '.join(program.escapes)} of a tensor that requires grad)" if program.escapes else ""
    parts = [f"{program.origin} leaves gradcli's operations{how}, where autograd cannot follow it"]
    if unconnected:
        them = ", ".join(unconnected)
        parts.append(f"autograd's graph does not connect {them} to the output, yet changing {them} changes it")
    if detail:
        parts[-1] += f" ({detail})"
    parts.append("use gradcli's functions (gc.sin, ...) instead of math, float(), .item() or NumPy on .data")
    return "; ".join(parts)


def unseen_derivative(
    program: Program,
    values: Mapping[str, Any],
    names: Sequence[str],
    jacobian: np.ndarray,
    seed: Any = None,
    unconnected: Sequence[str] = (),
    labels: Sequence[str] | None = None,
) -> str | None:
    """For a Python function that left autograd's sight (or whose output autograd does not connect to
    an input): whether its outputs really change otherwise than ``jacobian`` (rows: output elements,
    or the one row of v^T J with ``seed``; columns: the elements of ``names``) says, tried along one
    random direction with central differences at two steps (``labels`` name the rows). The warning
    to give, or None."""
    unconnected = [n for n in names if n in unconnected]
    if program.replayable or not names or not (program.escapes or unconnected):
        return None
    base = {n: np.asarray(getattr(values[n], "_value", values[n])) for n in names}
    if any(b.dtype.kind not in "iuf" for b in base.values()) or not np.isfinite(jacobian).all():
        return None
    rng = np.random.default_rng(0)
    direction = {
        n: rng.choice([-1.0, 1.0], size=b.shape) * rng.uniform(0.5, 1.0, size=b.shape) for n, b in base.items()
    }
    dtype = np.result_type(*base.values(), np.float32)
    root_eps = float(np.sqrt(np.finfo(dtype).eps))
    scale = max(max(float(np.max(np.abs(b), initial=0.0)) for b in base.values()), 1.0)
    flat = np.concatenate([direction[n].reshape(-1) for n in names])
    predicted = np.asarray(jacobian, dtype=np.float64).reshape(-1, flat.size) @ flat
    from ..python import detach_fixed  # lazy: start-up, eval's plain gradient never probes

    detached: list[Any] = []

    def along(t: float) -> np.ndarray:
        moved = {**values, **{n: (base[n] + t * direction[n]).astype(dtype) for n in names}}
        with gc.no_grad(), detach_fixed(replay=detached):
            evaluation = program.run(moved, ())
            outputs = evaluation.outputs
            if seed is not None:
                outputs = [gc.sum(single_output(evaluation) * gc.as_tensor(seed))]
        return np.concatenate([np.asarray(o.array, dtype=np.float64).reshape(-1) for o in outputs])

    h = root_eps * scale
    try:
        with gc.no_grad(), detach_fixed(record=detached):
            program.run(dict(values), ())
        slopes = [(along(step) - along(-step)) / (2 * step) for step in (h, h / 2)]
    except UsageError:  # the function refuses a nearby point: nothing to say
        return None
    if slopes[1].shape != predicted.shape or not np.isfinite(slopes).all():
        return None
    tolerance = 100 * root_eps * np.maximum(np.maximum(np.abs(slopes[0]), np.abs(predicted)), 1e-300)
    wrong = (np.abs(slopes[0] - slopes[1]) <= tolerance) & (np.abs(slopes[1] - predicted) > tolerance)
    if not wrong.any():
        return None
    k = int(np.argmax(wrong))
    which = labels[k] if labels is not None and k < len(labels) else "the output"
    detail = f"along a random direction {which} changes at {slopes[1][k]:.10g}, the derivative says {predicted[k]:.10g}"
    return "autograd misses a derivative: " + leaves_autograd(program, unconnected, detail)


def unused_values(program: Program, values: Mapping[str, Any]) -> str | None:
    """A warning for ``--at`` names the program does not use (a typo such as ``xx=3``), or None."""
    used = program.variables
    unused = [name for name in values if name not in used]
    if not unused:
        return None
    hints = {name: suggest(name, used).removeprefix("; ").replace("'", "") for name in unused}
    if len(unused) == 1:
        hint = hints[unused[0]]
        return f"--at {unused[0]} is not used by the expression" + (f" ({hint})" if hint else "")
    hint = "; ".join(f"{name}: {h}" for name, h in hints.items() if h)
    said = ", ".join(unused[:-1]) + " and " + unused[-1]
    return f"--at {said} are not used by the expression" + (f" ({hint})" if hint else "")


def nothing_to_differentiate(command: str, program: Program, values: Mapping[str, Any]) -> str:
    """Why ``command`` has no variable to differentiate by (as ``diff`` refuses it)."""
    if program.variables or not values:
        return f"{command} needs a variable to differentiate by: give one a value with --at NAME=..."
    given = ", ".join(values)
    return (
        f"{command}: the expression has no variable to differentiate by (it uses none of --at {given}; "
        f"name one with --wrt to see its derivative, 0)"
    )


def unseen_in_gradient(program: Program, values: Mapping[str, Any], result: Gradient) -> str | None:
    """``unseen_derivative`` for what ``value_and_grad`` gave."""
    names = list(result.gradient)
    if program.replayable or not names:
        return None
    row = np.concatenate([np.asarray(g, dtype=np.float64).reshape(-1) for g in result.gradient.values()])
    return unseen_derivative(program, values, names, row[None, :], result.seed, result.unconnected)
