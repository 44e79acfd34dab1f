"""The value and gradient of a program at a point: what ``gradcli eval`` computes.

``value_and_grad(load("x*y"), {"x": 2, "y": 3})`` gives ``Gradient(value=6, gradient={x: 3, y: 2})``;
``backward_anomaly`` says which operation's derivative first went non-finite.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...autograd.anomaly import detect_anomaly, inputs_text
from ...errors import Source, UsageError
from ...records import Record, fill
from ..evaluate import Evaluation
from ..library import gc
from ..program import Program
from ..values import seed_vector


def resolve_wrt(
    program: Program, values: Mapping[str, Any], wrt: Sequence[str] | None, unused: bool = True
) -> list[str]:
    """``--wrt`` names, checked; by default every free variable given a value, in order of first
    appearance. When the expression uses none of them: all of them with ``unused`` (``check`` checks
    their zero derivatives, a data file keeps its columns), else none (eval, jacobian and hessian
    show no derivative of a variable the expression does not use)."""
    if not wrt:
        return [v for v in program.free_variables(values) if v in values] or (list(values) if unused else [])
    known = set(program.variables) | set(values)
    for name in wrt:
        if name not in known:
            raise UsageError(f"--wrt {name}: '{name}' is neither in the expression nor given with --at")
        if name not in values:
            raise UsageError(f"--wrt {name}: give it a value with --at {name}=...")
    return list(wrt)


class Gradient(Record):
    """``value`` of the output and d(output)/d(variable) for each variable (a VJP with a seed)."""

    _fields = ("value", "gradient", "evaluation", "backward_nonfinite", "unconnected", "seed")

    def __init__(
        self,
        value: np.ndarray,
        gradient: dict[str, np.ndarray],
        evaluation: Evaluation,
        backward_nonfinite: str | None = None,  # where the backward pass first gave a NaN or an infinity
        unconnected: tuple[str, ...] = (),  # variables the output does not depend on, in autograd's graph
        seed: Any = None,  # v of v^T J, when given
    ) -> None:
        fill(self, locals())


SCALAR_ONLY = (
    "grad can be implicitly created only for scalar outputs: the output has shape {shape}; "
    "give --seed ones (or a vector) for the vector-Jacobian product, or use gradcli jacobian"
)


def single_output(evaluation: Evaluation) -> gc.Tensor:
    outputs = evaluation.outputs
    if len(outputs) == 1:
        return outputs[0]
    shapes = {o.shape for o in outputs}
    if len(shapes) != 1:
        raise UsageError(f"the {len(outputs)} outputs have different shapes; use gradcli jacobian")
    return gc.stack(outputs)


def value_and_grad(
    program: Program, values: Mapping[str, Any], wrt: Sequence[str] | None = None, seed: str | None = None
) -> Gradient:
    """The value and the gradient (or ``v^T J`` with ``seed``) at one point."""
    names = resolve_wrt(program, values, wrt, unused=False)
    quick = None if seed is not None else program.quick_gradient(values, names)
    if quick is not None:
        return _quick_gradient(*quick, names)
    evaluation = program.run(values, names)
    output = single_output(evaluation)
    if seed is None and output.numel() != 1:
        raise UsageError(SCALAR_ONLY.format(shape=output.shape))
    vector = None if seed is None else seed_vector(seed, output.shape)
    inputs = [evaluation.inputs[n] for n in names]
    if output.requires_grad and inputs:
        found = gc.grad(output, inputs, grad_outputs=vector, allow_unused=True)
    else:
        found = (None,) * len(inputs)
    grads = [gc.zeros_like(t) if g is None else g for g, t in zip(found, inputs)]
    value = output.array if output.numel() != 1 or seed is not None else np.asarray(output.array).reshape(())
    gradient = {n: np.asarray(g.array) for n, g in zip(names, grads)}
    unconnected = tuple(n for n, g in zip(names, found) if g is None)
    result = Gradient(np.asarray(value), gradient, evaluation, unconnected=unconnected, seed=vector)
    if evaluation.nonfinite is None and not all(np.isfinite(g).all() for g in gradient.values()):
        result.backward_nonfinite = backward_anomaly(program, values, names, vector)
    return result


def _quick_gradient(evaluation: Evaluation, grads: Mapping[str, Any], names: Sequence[str]) -> Gradient:
    """``value_and_grad``'s result from ``Program.quick_gradient``'s."""
    output, inputs = evaluation.outputs[0], evaluation.inputs
    gradient = {n: np.asarray(gc.zeros_like(inputs[n]).array if grads[n] is None else grads[n]) for n in names}
    unconnected = tuple(n for n in names if grads[n] is None)
    return Gradient(np.asarray(output.array).reshape(()), gradient, evaluation, unconnected=unconnected)


def _numbers(value: Any) -> bool:
    """An operation's input worth showing: numbers (a custom Function's other arguments are not)."""
    try:
        return np.asarray(getattr(value, "_value", value)).dtype.kind in "biufc"
    except Exception:  # an object that refuses to be an array
        return False


def backward_anomaly(
    program: Program, values: Mapping[str, Any], names: Sequence[str], seed: Any, row: int | None = None
) -> str | None:
    """The program run again in anomaly mode: which operation's derivative first gave a NaN or an
    infinity from finite values, as ``'sqrt(x)' at column 1 (SqrtBackward0) gave inf from input 0``.
    ``row``: of the Jacobian, the output element whose derivative is sought (``seed`` is ignored)."""
    with detect_anomaly(raise_error=False) as mode, np.errstate(all="ignore"):
        evaluation = program.run(values, names, record_steps=True)
        if row is None:
            output = single_output(evaluation)
        else:  # the one element: no other output's zero seed meets an infinity (as jacobian_blocks)
            sizes = np.cumsum([np.size(o.array) for o in evaluation.outputs])
            k = int(np.searchsorted(sizes, row, side="right"))
            output, seed = evaluation.outputs[k].reshape(-1)[row - (sizes[k - 1] if k else 0)], None
        if not output.requires_grad:
            return None
        inputs = [evaluation.inputs[n] for n in names]
        gc.grad(output, inputs, grad_outputs=seed, allow_unused=True)
    found = mode.found
    if found is None or found.phase != "backward":
        return None
    name, detail = found.node.name(), inputs_text([v for v in found.inputs if _numbers(v)])
    described = getattr(getattr(found.node, "function", None), "described", None)
    if described is not None:  # a framework's function, one node: named as the user named it
        return f"the derivative of {described(found.node.ctx)} gave {found.kind}{detail}"
    made = next((node for node, value in evaluation.steps if getattr(value, "_edge", None) is found.node), None)
    if made is None or program.tree is None:
        where = f" (made at {found.where})" if found.where else ""
        return f"the derivative of {name}{where} gave {found.kind}{detail}"
    source = Source(program.tree.text, program.origin)
    return f"the derivative of {source.quote(made.start, made.end)} ({name}) gave {found.kind}{detail}"
