"""JAX's reader for ``gradcli why``: a function's evaluated jaxpr (jax_record.py's ``JaxTrace``, the
one the graph draws) as a ``Flow``.

Each equation is a step (a custom rule's call is one step, its inner equations are not), each
variable a value with its statistics and its cotangent's. ``stop_gradient`` is the step autograd
does not follow; an integer result (``argmax``, a comparison, a cast) carries no gradient. JAX gives
an unused input a zero gradient where PyTorch gives None: the analysis reads both the same way.

Importing this module imports JAX.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..flow import Flow, Stats, Step
from .jax_record import CUSTOM, JaxTrace, trace_values


def record_flow(function: Callable[..., Any], values: Mapping[str, Any], wrt: list[str]) -> Flow:
    """``function(**values)`` traced and evaluated once, its output summed when it is not a scalar."""

    def summed(**xs: Any) -> Any:
        out = function(**xs)
        return out.sum() if getattr(out, "ndim", 0) else out

    trace = trace_values(summed, values, wrt)
    rules = {c.equation: c.name for c in trace.calls if c.kind in CUSTOM.values()}  # a rule's call by its function
    steps = [
        Step(
            rules.get(i, e.primitive), list(e.inputs), list(e.outputs), e.line, e.scope, e.primitive != "stop_gradient"
        )
        for i, e in enumerate(trace.equations)
        if not e.body and not _inside_a_rule(trace, i)
    ]
    stats = {i: Stats.of(v.value) for i, v in enumerate(trace.values) if v.value is not None}
    tracked = {i: v.differentiable or (v.kind == "result" and str(v.dtype).startswith("float")) for i, v in
               enumerate(trace.values)}  # fmt: skip
    grads = {i: None if v.cotangent is None else Stats.of(v.cotangent) for i, v in enumerate(trace.values)
             if tracked[i]}  # fmt: skip
    inputs = {v.name or f"x{i}": i for i, v in ((i, trace.values[i]) for i in trace.inputs)}
    input_grads = {name: grads.get(i) for name, i in inputs.items() if trace.values[i].differentiable}
    output = trace.outputs[0] if len(trace.outputs) == 1 else None
    return Flow("JAX", inputs, output, steps, stats, tracked, grads, input_grads)


def _inside_a_rule(trace: JaxTrace, index: int) -> bool:
    """An equation of a custom rule's own jaxpr (the rule's call stands for them)."""
    call = trace.equations[index].call
    while call is not None:
        found = trace.calls[call]
        if found.kind in CUSTOM.values() and found.equation != index:
            return True
        call = found.parent
    return False
