"""Why is this gradient None, zero or NaN? (``gradcli why``, ``gc.why``; issue 36)

One analysis over a run's ``Flow`` (lang/flow.py), whatever framework recorded it. For each input
whose gradient is None, exactly zero or not finite, the cause, the operation, the user's line and
module, and the values that make it so:

- None: the input never reaches the output, or reaches it only through an operation autograd does
  not follow (``detach``/``.data``, ``torch.no_grad()``, ``.item()``/``float()``, an integer result
  such as ``argmax`` or a comparison, a tensor rebuilt from plain values), or it was overwritten in place;
- zero: the operation where the gradient dies (a ReLU off for every element, a saturated tanh or
  sigmoid, a clamp at its bound, a function with zero derivative such as ``round`` or ``sign``);
- not finite: the first operation whose value is NaN or inf from finite inputs (log of a negative,
  division by zero), or, where every value is finite, the first operation, going backward, whose
  gradient stops being finite (sqrt at 0, the ``where`` that hides an untaken branch's NaN).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..lang.flow import Flow, Stats, Step

#: operations whose derivative is zero wherever it exists
FLAT = {"round", "floor", "ceil", "trunc", "sign", "sgn", "frac", "heaviside"}
#: operations whose result autograd never differentiates (integers, booleans, indices)
COMPARE = {"eq", "ne", "lt", "le", "gt", "ge", "argmax", "argmin", "isnan", "isinf", "isfinite", "logical_not",
           "logical_and", "logical_or", "bucketize", "searchsorted", "argsort"}  # fmt: skip

#: operations that read a tensor's values out of autograd's sight: as a number, as an array or list
ITEM = {"_local_scalar_dense", "item"}
READ_OUT = {"tolist", "numpy"}
#: operations that make a tensor from plain values (torch.tensor(...), gc.tensor(...))
REBUILT = {"lift_fresh", "lift_fresh_copy", "scalar_tensor", "tensor", "as_tensor", "from_numpy"}


@dataclass
class Cause:
    """One input's gradient, and why it is what it is."""

    input: str
    gradient: str  # "None", "zero", "nan", "inf"
    cause: str  # a short code: "unused", "detach", "no_grad", "item", "integer", "rebuilt", "overwritten",
    # "relu_off", "saturated", "clamped", "flat", "nonfinite_forward", "nonfinite_backward", "dead"
    message: str  # the sentence the CLI prints
    op: str | None = None
    line: str | None = None
    scope: str | None = None
    values: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"input": self.input, "gradient": self.gradient, "cause": self.cause, "message": self.message,
                "op": self.op, "line": self.line, "scope": self.scope, "values": self.values}  # fmt: skip


@dataclass
class Diagnosis:
    """Every input's finding (``healthy``: the inputs whose gradient is finite and not all zero)."""

    framework: str
    findings: list[Cause]
    healthy: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"framework": self.framework, "findings": [f.to_dict() for f in self.findings], "healthy": self.healthy}

    def text(self) -> str:
        """One line per finding, as ``gradcli why`` prints them."""
        lines = [
            f"{f.input}: {f.gradient if f.gradient.startswith('value') else 'gradient ' + f.gradient}: {f.message}"
            for f in self.findings
        ]
        if self.healthy:
            lines.append(f"{', '.join(self.healthy)}: gradient finite and not zero")
        return "\n".join(lines)

    __str__ = text


def why(program: Any, values: dict[str, Any], wrt: list[str] | None = None) -> Diagnosis:
    """Why ``program``'s gradient at ``values`` is None, zero or not finite, for each input in ``wrt``
    (default: every input given a value). Reads a program of the language's run or a Python function
    computing with gradcli's tensors (lang/gradcli_flow.py), a PyTorch function's (frameworks/torch_flow.py)
    or a JAX function's evaluated jaxpr (frameworks/jax_flow.py)."""
    from ..lang.compute import resolve_wrt  # lazy: start-up, as every command's body

    names = resolve_wrt(program, values, wrt)
    if program.framework is None:
        if program.tree is None:  # a Python function computing with gradcli's tensors
            from ..lang.gradcli_flow import record_function_flow  # lazy: start-up, eval diagnoses nothing

            return diagnose(record_function_flow(program, values, names))
        from ..lang.gradcli_flow import record_flow as gradcli_flow  # lazy: start-up, eval diagnoses nothing

        return diagnose(gradcli_flow(program, values, names))
    if program.framework == "jax":
        from ..lang.frameworks.jax_flow import record_flow  # lazy: imports JAX
    else:
        from ..lang.frameworks.torch_flow import record_flow  # lazy: imports torch
    function, given = program.bound(values)  # (jax.jit's static arguments bound)
    return diagnose(record_flow(function, given, names))


def why_function(function: Any, *args: Any, wrt: list[str] | None = None, **at: Any) -> Diagnosis:
    """``gc.why(f, *args)``: ``why`` of a Python function called with ``args`` (gradcli's or torch's tensors,
    JAX's or NumPy's arrays), by its parameters' names; or of an expression of the language, its point given
    as keywords.

    >>> import gradcli as gc
    >>> print(gc.why("sqrt(x) * 0 + floor(w)", x=0, w=1.5))
    x: gradient nan: sqrt at column 1: every value is finite, but its derivative is not at input 0 (sqrt's derivative 1/(2 sqrt(x)) is inf at x = 0)
    w: gradient zero: floor at column 15: floor has derivative 0 wherever it has one
    """
    from ..lang.program import function_program, load  # lazy: start-up, as the rest of why

    if isinstance(function, str):
        if args:
            raise TypeError("gc.why(EXPR, ...) takes the point as keywords: gc.why('sqrt(x)', x=0)")
        return why(load(function), {name: np.asarray(v, dtype=np.float64) for name, v in at.items()}, wrt)
    program = function_program(function, given=args)
    names = program.variables[: len(args)]
    return why(program, {**dict(zip(names, args)), **at}, wrt)


def diagnose(flow: Flow) -> Diagnosis:
    """The finding of every input of ``flow``."""
    graph = _Graph(flow)
    findings, healthy = [], []
    for name, grad in flow.input_grads.items():
        key = flow.inputs[name]
        if grad is None:
            findings.append(graph.why_none(name, key))
        elif not grad.finite:
            findings.append(graph.why_nonfinite(name, key, grad))
        elif grad.all_zero:
            findings.append(graph.why_zero(name, key))
        else:
            healthy.append(name)
    value = flow.values.get(flow.output) if flow.output is not None else None
    if value is not None and not value.finite:
        findings.append(graph.why_output_nonfinite(value))
    return Diagnosis(flow.framework, findings, healthy)


class _Graph:
    """The flow's steps by the values they read and make."""

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.maker: dict[int, int] = {}
        self.readers: dict[int, list[int]] = defaultdict(list)
        for i, step in enumerate(flow.steps):
            for k in step.outputs:
                self.maker[k] = i
            for k in step.inputs:
                self.readers[k].append(i)
        self.feeds_output = self._upstream(flow.output)

    def _upstream(self, key: int | None) -> set[int]:
        """The values the output was computed from (itself included)."""
        seen: set[int] = set()
        stack = [] if key is None else [key]
        while stack:
            k = stack.pop()
            if k in seen:
                continue
            seen.add(k)
            if k in self.maker:
                stack.extend(self.flow.steps[self.maker[k]].inputs)
        return seen

    def downstream(self, key: int, tracked_only: bool = False) -> tuple[set[int], list[int]]:
        """The values computed from ``key`` and the steps that computed them, in run order."""
        seen, steps = {key}, set()
        stack = [key]
        while stack:
            k = stack.pop()
            for i in self.readers.get(k, ()):
                step = self.flow.steps[i]
                if tracked_only and not self._tracks(step):
                    continue
                steps.add(i)
                for out in step.outputs:
                    if out not in seen:
                        seen.add(out)
                        stack.append(out)
        return seen, sorted(steps)

    def _tracks(self, step: Step) -> bool:
        return step.tracked and any(self.flow.tracked.get(k, False) for k in step.outputs)

    # --- None ----------------------------------------------------------------------------------------

    def why_none(self, name: str, key: int) -> Cause:
        reached, steps = self.downstream(key)
        on_path = [i for i in steps if set(self.flow.steps[i].outputs) & self.feeds_output]
        for i in on_path or steps:
            step = self.flow.steps[i]
            if self._tracks(step) or not any(k in reached for k in step.inputs):
                continue
            cause = self._break(step)
            if cause is not None:
                rebuilt = self._rebuilt_steps()
                if rebuilt and any(
                    self.flow.steps[j].op in READ_OUT | ITEM for j in steps
                ):  # (read out, then a tensor again)
                    words = (f"{cause[1]}; the output is computed from a tensor made of plain values"
                             f"{rebuilt[0].where()} ({self._spelling('tensor')}): autograd cannot see {name} in it")  # fmt: skip
                    return self._found(name, "None", step, "rebuilt" if step.op in READ_OUT else cause[0], words)
                off = not on_path and cause[0] in ("detach", "no_grad")  # (a number or an index may reach it unseen)
                return self._found(name, "None", step, *cause, on_path=not off)
        return self._overwritten(name, "None", reached) or self._rebuilt(name, bool(steps))

    def _overwritten(self, name: str, gradient: str, reached: set[int]) -> Cause | None:
        """An in-place write that replaced a value computed from the input (``y.zero_()``, ``y.copy_(z)``)."""
        for step in self.flow.steps:
            if step.overwrites in reached and not set(step.inputs) & reached and set(step.outputs) & self.feeds_output:
                words = f"it overwrites in place the tensor computed from {name}, so the output no longer depends on it"
                return self._found(name, gradient, step, "overwritten", words)
        return None

    def _rebuilt_steps(self) -> list[Step]:
        """The steps the output is computed from that make a tensor from plain values."""
        return [self.flow.steps[i] for i in sorted({self.maker[k] for k in self.feeds_output if k in self.maker})
                if self.flow.steps[i].op in REBUILT]  # fmt: skip

    def _spelling(self, what: str) -> str:
        """How the user wrote ``what`` (``tensor``, ``no_grad``, ``detach``) in the flow's framework."""
        if self.flow.framework != "gradcli":
            return {"tensor": "torch.tensor(...), torch.from_numpy", "no_grad": "torch.no_grad()"}.get(
                what, ".detach() or .data"
            )
        if what == "detach":
            return "detach(...)" if self.flow.language else ".detach() or .data"
        return {"tensor": "gc.tensor(...)", "no_grad": "gc.no_grad()"}[what]

    def _rebuilt(self, name: str, used: bool) -> Cause:
        rebuilt = self._rebuilt_steps()
        if not rebuilt and not self.feeds_output & self.flow.made_outside:
            if used:
                return Cause(name, "None", "unused", f"{name} is used, but the output is not computed from it")
            return Cause(name, "None", "unused", f"{name} is never used by the function")
        step = rebuilt[0] if rebuilt else None
        where = step.where() if step is not None else ""
        lead = f"{name} reaches no operation of the output's" if used else f"{name} is used by no operation"
        how = self._spelling("tensor")
        return Cause(name, "None", "rebuilt",
                       f"{lead}; the output is computed from a tensor made from plain values{where} ({how}): "
                       f"if it holds {name}'s values (read with .tolist(), .numpy() or float()), "
                       f"autograd cannot see {name} in it",
                       None if step is None else step.op, None if step is None else step.line,
                       None if step is None else step.scope)  # fmt: skip

    def _break(self, step: Step) -> tuple[str, str] | None:
        """(cause, words) where autograd stops following a value at ``step``."""
        if step.op in ITEM:
            return "item", "it is read as a Python number (.item(), float() or int()): autograd does not follow it"
        if step.op in READ_OUT:
            return "item", f"its values are read out (.{step.op}()): autograd does not follow them"
        if step.op == "detach":
            return "detach", f"it is detached ({self._spelling('detach')}): autograd does not follow it"
        if step.op == "stop_gradient":
            return "stop_gradient", "jax.lax.stop_gradient: autograd does not follow it"
        if not step.tracked:
            how = self._spelling("no_grad")
            return "no_grad", f"{step.op} runs under {how} (or with grad mode off): autograd does not record it"
        made = [self.flow.values[k] for k in step.outputs if k in self.flow.values]
        if step.op in COMPARE or any(s.integral for s in made):
            dtype = made[0].dtype if made else "an integer"
            if made and not made[0].integral:  # (gradcli's comparisons give 0.0 and 1.0)
                return "integer", f"{step.op} is a comparison: its values (0 or 1) carry no gradient"
            return "integer", f"{step.op} returns {dtype} values: no gradient flows through it"
        return None

    def _found(self, name: str, gradient: str, step: Step, cause: str, words: str, on_path: bool = True) -> Cause:
        tail = "" if on_path else " (and what is computed from it does not reach the output)"
        return Cause(name, gradient, cause, f"{step.op}{step.where()}: {words}{tail}", step.op, step.line, step.scope)

    # --- zero ----------------------------------------------------------------------------------------

    def why_zero(self, name: str, key: int) -> Cause:
        reached, steps = self.downstream(key, tracked_only=True)
        path = [i for i in steps if set(self.flow.steps[i].outputs) & self.feeds_output]
        if not path:  # no path autograd follows (JAX gives such an input zeros where PyTorch gives None)
            found = self.why_none(name, key)
            found.gradient = "zero"
            return found
        for i in reversed(path):  # backward, from the output: where the gradient dies
            step = self.flow.steps[i]
            out = [self.flow.grads.get(k) for k in step.outputs]
            ins = [self.flow.grads.get(k) for k in step.inputs if k in reached]
            alive = any(g is not None and not g.all_zero for g in out)
            dead = ins and all(g is not None and g.all_zero for g in ins)
            if alive and step.overwrites in reached and self.flow.grads.get(step.overwrites) is None:
                words = (
                    f"it overwrites in place the tensor computed from {name}: its old values no longer reach the output"
                )
                return self._found(name, "zero", step, "overwritten", words)
            if alive and dead:
                cause, words, values = self._zero_cause(step)
                finding = self._found(name, "zero", step, cause, words)
                finding.values = values
                return finding
        first = self.flow.steps[path[0]] if path else None
        if first is None:
            return self._overwritten(name, "zero", reached | {key}) or Cause(
                name, "zero", "dead", f"the gradient with respect to {name} is exactly zero"
            )
        return self._found(name, "zero", first, "dead", "the gradient that reaches it is already zero")

    def _zero_cause(self, step: Step) -> tuple[str, str, dict[str, Any]]:
        x = self.flow.values.get(step.inputs[0]) if step.inputs else None
        op = step.op
        if x is None:
            return "dead", "its derivative is zero here", {}
        values = {"input_min": x.min, "input_max": x.max}
        if op in ("relu", "threshold", "relu6", "hardtanh") and x.max <= 0:
            return "relu_off", f"the ReLU is off for every element (its input is at most {x.max:.6g})", values
        if op in ("tanh", "sigmoid", "hardsigmoid", "hardtanh", "softsign", "erf"):
            return (
                "saturated",
                (
                    f"{op} is saturated: its derivative is 0 in float64 for every element "
                    f"(|input| >= {x.min_abs:.6g}; {x.range_text()})"
                ),
                values | {"input_min_abs": x.min_abs},
            )
        if op.startswith("clamp") or op in ("clip", "hardtanh"):
            return self._clamped(step, x, values)
        if op in FLAT:
            return "flat", f"{op} has derivative 0 wherever it has one", values
        if op in ("mul", "mv", "mm", "matmul", "dot", "bmm"):
            other = [self.flow.values.get(k) for k in step.inputs[1:]] if len(step.inputs) > 1 else []
            if any(s is not None and s.all_zero for s in [x, *other]) or 0 in step.numbers or 0.0 in step.numbers:
                return "dead", "it multiplies by zero", values
        if op in ("abs", "norm", "linalg_vector_norm") and x.all_zero:
            return "dead", f"its input is 0 in every element, where {op}'s derivative is taken as 0", values
        if op in ("where", "masked_fill", "index_put"):
            return "dead", "it never takes the elements that depend on the input", values
        if op in ("max", "min", "amax", "amin", "maximum", "minimum"):
            return "dead", "the input is never the one selected", values
        return "dead", f"its derivative is zero at this input ({x.range_text()})", values

    def _clamped(self, step: Step, x: Stats, values: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
        bounds = [b for b in step.numbers if isinstance(b, (int, float))]
        low, high = (bounds + [None, None])[:2] if step.op != "clamp_max" else (None, bounds[0] if bounds else None)
        if step.op == "clamp_min":
            low, high = (bounds[0] if bounds else None), None
        gaps = []
        if low is not None and x.max < low:
            gaps.append(f"every element is below its min {low:g} by at least {low - x.max:.6g}")
        if high is not None and x.min > high:
            gaps.append(f"every element is above its max {high:g} by at least {x.min - high:.6g}")
        words = "; ".join(gaps) or f"every element is at or outside its bounds ({x.range_text()})"
        return "clamped", f"the clamp is at its bound: {words}", values | {"bounds": [low, high]}

    # --- not finite ----------------------------------------------------------------------------------

    def why_nonfinite(self, name: str, key: int, grad: Stats) -> Cause:
        kind = "nan" if grad.nan else "inf"
        reached, steps = self.downstream(key)
        path = [i for i in steps if set(self.flow.steps[i].outputs) & self.feeds_output]
        first = self._first_nonfinite(path)  # forward first: the first value that stops being finite
        if first is not None:
            return self._forward_nonfinite(name, kind, first, path)
        for i in reversed(path):  # then backward: the first gradient that stops being finite
            step = self.flow.steps[i]
            out = [self.flow.grads.get(k) for k in step.outputs]
            ins = [self.flow.grads.get(k) for k in step.inputs if k in reached]
            if all(g is None or g.finite for g in out) and any(g is not None and not g.finite for g in ins):
                return self._other_nonfinite(name, kind, step, reached) or self._backward_nonfinite(name, kind, step)
        return Cause(name, kind, "nonfinite", f"the gradient with respect to {name} is {kind}")

    def _other_nonfinite(self, name: str, kind: str, step: Step, reached: set[int]) -> Cause | None:
        """``x * log(0)``: the step's other input is not finite, made so by an operation off the input's path."""
        other = [
            k for k in step.inputs if k not in reached and k in self.flow.values and not self.flow.values[k].finite
        ]
        if not other:
            return None
        made = self._first_nonfinite(sorted({self.maker[k] for k in self._upstream(other[0]) if k in self.maker}))
        value = self.flow.values[other[0]]
        what = "nan" if value.nan else "inf"
        where = f" (made by {made.op}{made.where()} from finite inputs)" if made is not None else ""
        words = (
            f"its other input is {what}{where}, so its derivative with respect to {name} is not finite (0 * inf = nan)"
        )
        return self._found(name, kind, step, "nonfinite_forward", words)

    def _backward_nonfinite(self, name: str, kind: str, step: Step) -> Cause:
        x = self.flow.values.get(step.inputs[0]) if step.inputs else None
        at = f" at input {x.range_text()}" if x is not None else ""
        words = f"every value is finite, but its derivative is not{at} ({_infinite_slope(step.op)})"
        finding = self._found(name, kind, step, "nonfinite_backward", words)
        finding.values = {} if x is None else {"input_min": x.min, "input_max": x.max}
        return finding

    def _first_nonfinite(self, path: list[int]) -> Step | None:
        """The first step of ``path`` whose value is NaN or inf though what it read was finite."""
        for i in path:
            step = self.flow.steps[i]
            made = [self.flow.values[k] for k in step.outputs if k in self.flow.values]
            taken = [self.flow.values[k] for k in step.inputs if k in self.flow.values]
            if any(not s.finite for s in made) and all(s.finite for s in taken):
                return step
        return None

    def why_output_nonfinite(self, value: Stats) -> Cause:
        """The output's own value is NaN or inf: the first operation that made one from finite inputs."""
        kind = "nan" if value.nan else "inf"
        path = sorted({self.maker[k] for k in self.feeds_output if k in self.maker})
        first = self._first_nonfinite(path)
        if first is None:
            return Cause("output", f"value {kind}", "nonfinite", f"the output is {kind}: an input is not finite")
        finding = self._forward_nonfinite("output", kind, first, path)
        finding.gradient = f"value {kind}"
        return finding

    def _forward_nonfinite(self, name: str, kind: str, step: Step, path: list[int]) -> Cause:
        made = [self.flow.values[k] for k in step.outputs if k in self.flow.values]
        taken = [self.flow.values[k] for k in step.inputs if k in self.flow.values]
        x = taken[0] if taken else None
        what = "nan" if any(s.nan for s in made) else "inf"
        reason = {"log": "log of a negative number or of 0", "log2": "log of a negative number or of 0",
                  "log10": "log of a negative number or of 0", "sqrt": "sqrt of a negative number",
                  "div": "division by zero", "reciprocal": "division by zero", "pow": "a power out of its domain",
                  "acos": "acos outside [-1, 1]", "asin": "asin outside [-1, 1]", "exp": "exp overflows"}.get(step.op)  # fmt: skip
        words = f"it makes {what} from finite inputs"
        if reason:
            words += f" ({reason}"
            words += f": input {x.range_text()})" if x is not None else ")"
        hidden = self._masked(step, path)
        if hidden is not None:
            words += (f"; {hidden.op}{hidden.where()} drops that {what} from the value, but not from the gradient "
                      f"(0 * {what} = nan): compute {step.op} on a safe input in the branch not taken")  # fmt: skip
        finding = self._found(name, kind, step, "nonfinite_forward", words)
        finding.values = {} if x is None else {"input_min": x.min, "input_max": x.max}
        return finding

    def _masked(self, step: Step, path: list[int]) -> Step | None:
        """The step after ``step`` whose value is finite again though it reads a non-finite value."""
        for i in path:
            later = self.flow.steps[i]
            if later is step or self.flow.steps.index(later) < self.flow.steps.index(step):
                continue
            made = [self.flow.values[k] for k in later.outputs if k in self.flow.values]
            taken = [self.flow.values[k] for k in later.inputs if k in self.flow.values]
            if any(not s.finite for s in taken) and all(s.finite for s in made):
                return later
        return None


def _infinite_slope(op: str) -> str:
    return {
        "sqrt": "sqrt's derivative 1/(2 sqrt(x)) is inf at x = 0",
        "linalg_vector_norm": "the norm's derivative x/|x| is 0/0 at x = 0",
        "norm": "the norm's derivative x/|x| is 0/0 at x = 0",
        "pow": "a fractional power's derivative is inf at 0",
        "div": "the derivative of a/b is inf where b = 0",
        "log": "log's derivative 1/x is inf at x = 0",
        "atan2": "atan2's derivative is 0/0 at (0, 0)",
        "cdist": "the distance's derivative is 0/0 where two points coincide",
    }.get(op, f"{op}'s derivative is not finite there")


__all__ = ["Diagnosis", "Cause", "diagnose"]
