"""``gradcli check``: autograd's gradient against SymPy, finite differences, complex step
and the user's own formulas.

The program runs once, recorded; finite differences and complex step then
evaluate that record at all their points in one batched pass each (a Python
function is called again at each point instead, with real or complex values:
its branches may differ there, and the record holds only what it did through
gradcli's operations, not math.sin(float(x)); a derivative autograd does not
see is then a mismatch, and the result says why). Each method's values are compared with autograd's element by
element, within ``atol + rtol |reference|`` plus the method's own estimated
error, so an accurate method catches an error of 1e-6 relative while a
noisy one (float32) does not cry wolf.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..autograd.forward import key
from ..autograd.function import FunctionNode
from ..autograd.node import OpNode
from ..autograd.replay import replay
from ..autograd.tape import recording
from ..errors import UsageError
from ..lang.functions import not_analytic_call
from ..lang.library import gc
from ..lang.program import Program, detach_fixed, element_labels, resolve_wrt, single_output
from ..lang.values import seed_vector
from .numeric import (
    Estimate,
    NotRealValued,
    atol_scale,
    complex_step,
    default_tolerances,
    finite_differences,
    machine_epsilon,
    tolerance_problem,
)
from .result import METHOD_NAMES, Blame, CheckResult, Kink, MethodCheck, _n, check_table

LOOSE = 1e-2  # an estimate whose error exceeds this part of its value cannot judge autograd
INSTEAD = "central differences (with their kink search) check the gradient instead"
METHODS = ("sympy", "finite_difference", "complex_step")
ALIASES = {"sympy": "sympy", "fd": "finite_difference", "finite_difference": "finite_difference",
           "complex": "complex_step", "complex_step": "complex_step", "cs": "complex_step"}  # fmt: skip


def not_analytic(tape: Sequence[Any], program: Program | None = None) -> str | None:
    """Why the complex step cannot be trusted on this recording, or None when every operation
    is complex-analytic (and so smooth wherever it is finite: no kinks). ``program``'s own
    calls count too: ``argmax`` records no node, its index has no gradient."""
    for node, _, _ in tape:
        if isinstance(node, OpNode) and not node.prim.analytic:
            return f"{node.prim.name} ({node.name()}) is not complex-analytic"
        if isinstance(node, FunctionNode):
            return f"the custom Function {node.function.__name__} may not be complex-analytic"
    name = not_analytic_call(program.tree) if program is not None and program.tree is not None else None
    return None if name is None else f"{name}() is not complex-analytic"


def method_names(text: Sequence[str] | None) -> list[str]:
    if not text:
        return list(METHODS)
    chosen = []
    for item in text:
        for part in item.split(","):
            name = ALIASES.get(part.strip().lower())
            if name is None:
                raise UsageError(f"--method {part.strip()!r}: use sympy, fd, complex (comma-separated)")
            if name not in chosen:
                chosen.append(name)
    return chosen


class _Recorded:
    """The program run once, recorded: its scalar output, gradient and a batched evaluator."""

    def __init__(self, program: Program, values: Mapping[str, Any], names: list[str], seed: str | None) -> None:
        self.program, self.values, self.names, self.seed_text = program, dict(values), names, seed
        self.seed: np.ndarray | None = None
        self.detached: list[Any] = []  # what detach() gave in a Python function, kept fixed elsewhere
        with recording() as tape, detach_fixed(record=self.detached if program.function is not None else None):
            evaluation, scalar, grads = self._run(self.values)
        self.tape, self.evaluation, self.scalar = tape, evaluation, scalar
        self.inputs = [evaluation.inputs[n] for n in names]
        self.unconnected = self._unconnected  # inputs autograd's graph does not connect to the output
        self.gradient = {n: np.asarray(g.array, dtype=np.float64) for n, g in zip(names, grads)}
        self.shapes = [t.shape for t in self.inputs]
        self.sizes = [int(np.size(t.array)) for t in self.inputs]
        self.x0 = (
            np.concatenate([np.asarray(t.array, dtype=np.float64).reshape(-1) for t in self.inputs])
            if self.inputs
            else np.zeros(0)
        )
        self.labels = [label for n, shape in zip(names, self.shapes) for label in element_labels(n, shape)]
        self.f0 = np.asarray(scalar.array, dtype=np.float64).reshape(1)
        self.dtype = np.result_type(*(t.array for t in self.inputs)) if self.inputs else np.dtype(np.float64)
        self.noise = np.zeros(self.x0.size)  # autograd's own rounding error (see rounding_noise)

    def _run(self, values: Mapping[str, Any]) -> tuple[Any, Any, tuple[Any, ...]]:
        """Run the program at ``values``: its evaluation, scalar output and gradient."""
        evaluation = self.program.run(values, self.names)
        output = single_output(evaluation)
        if self.seed_text is not None:
            if self.seed is None:
                self.seed = seed_vector(self.seed_text, output.shape)
            scalar = gc.sum(output * gc.tensor(self.seed))
        elif output.numel() != 1:
            raise UsageError(
                f"check compares gradients of a scalar output; the output has shape {output.shape}: "
                "give --seed ones (or a vector) to check v^T J, or use gradcli jacobian"
            )
        else:
            scalar = output.reshape(())
        inputs = [evaluation.inputs[n] for n in self.names]
        if scalar.requires_grad and inputs:
            found = gc.grad(scalar, inputs, retain_graph=True, allow_unused=True)
        else:
            found = (None,) * len(inputs)
        self._unconnected = [n for n, g in zip(self.names, found) if g is None]
        grads = tuple(gc.zeros_like(t) if g is None else g for g, t in zip(found, inputs))
        return evaluation, scalar, grads

    def rounding_noise(self) -> np.ndarray:
        """Autograd's own rounding error, per element, from its gradient at points moved by
        about 1e-12 relative, in pairs (x(1 + t r), x(1 - t r)) whose mean cancels the real
        change of the gradient. What remains is rounding: large where the expression loses
        digits to cancellation ((exp(x) - 1 - x) / x^2 at x = 1e-3), and no method can agree
        more closely than that. Zeros stay zero, so no kink at 0 is crossed."""
        rng = np.random.default_rng(0)
        base = _flat(self.gradient, self.names)
        spread = np.zeros_like(base)
        for t in (2.0**-40, 2.0**-38, 2.0**-36):
            r = rng.choice([-1.0, 1.0], size=self.x0.size) * rng.uniform(0.5, 1.0, size=self.x0.size)
            pair = [self._gradient_at(self.x0 * (1.0 + sign * t * r)) for sign in (1.0, -1.0)]
            with np.errstate(all="ignore"):
                spread = np.fmax(spread, np.abs((pair[0] + pair[1]) / 2.0 - base))
        return spread

    def _gradient_at(self, x: np.ndarray) -> np.ndarray:
        values = dict(self.values)
        for name, part, t in zip(self.names, self.split(x[None, :]), self.inputs):
            values[name] = part[0].astype(np.asarray(t.array).dtype)
        with np.errstate(all="ignore"):
            _, _, grads = self._run(values)
        return np.concatenate([np.asarray(g.array, dtype=np.float64).reshape(-1) for g in grads])

    def split(self, points: np.ndarray) -> list[np.ndarray]:
        """Rows of flattened points -> one batched array per input."""
        offsets = np.cumsum([0, *self.sizes])
        return [
            points[:, offsets[i] : offsets[i + 1]].reshape((len(points),) + shape)
            for i, shape in enumerate(self.shapes)
        ]

    def evaluate(self, points: np.ndarray) -> np.ndarray:
        """The scalar output at every row of ``points``: one replay of the record (or one call a
        point for a Python function, whose branches may differ from point to point)."""
        if self.program.function is not None:
            return self._call_each(points)
        if self.program.flat is not None and self.seed is None and all(size == 1 for size in self.sizes):
            # one long scalar expression (lang/flat.py): its postfix code on the points, the replay's
            # numbers without its node an operation
            columns = {n: points[:, i] for i, n in enumerate(self.names)}
            found = self.program.flat.at_points({**{n: np.asarray(v) for n, v in self.values.items()}, **columns})
            if found is not None:
                return np.broadcast_to(np.asarray(found), (len(points),)).reshape(len(points), 1)
        batched = {key(t): part for t, part in zip(self.inputs, self.split(points))}
        found = replay(self.tape, batched).get(key(self.scalar))
        if found is None:  # the output does not depend on the inputs
            return np.broadcast_to(self.f0, (len(points), 1))
        return np.asarray(found).reshape(len(points), 1)

    def _call_each_expression(self, points: np.ndarray) -> np.ndarray:
        """The unbatched way, one evaluation a point (for the benchmark that shows what replay saves)."""
        rows = []
        with gc.no_grad():
            for row in zip(*self.split(points)):
                values = {**self.values, **{n: np.asarray(v) for n, v in zip(self.names, row)}}
                rows.append(float(single_output(self.program.run(values, ())).item()))
        return np.array(rows).reshape(-1, 1)

    def _call_each(self, points: np.ndarray) -> np.ndarray:
        """The Python function itself at every point (complex points for the complex step)."""
        rows = []
        with gc.no_grad():
            for row in zip(*self.split(points)):
                values = {**self.values, **{n: np.asarray(v) for n, v in zip(self.names, row)}}
                with detach_fixed(replay=self.detached):
                    out = single_output(self.program.run(values, ()))
                scalar = gc.sum(out * gc.tensor(self.seed)) if self.seed is not None else out
                rows.append(np.asarray(scalar.array).reshape(-1)[0])
        return np.array(rows).reshape(-1, 1)


@dataclass
class _Reference:
    """One method's gradient before it is compared with autograd's (see ``compare``)."""

    name: str
    reference: np.ndarray  # flat, one number per input element
    estimated: np.ndarray | None  # the method's own error per element; None: exact
    skip: set[int]  # elements not compared (kinks, points where the method is undefined)
    label: str  # how the verdict names its value ("finite differences gives"...)
    only: Sequence[str] | None = None  # the variables it covers (--expect), None: all
    note: str | None = None  # why some elements were not compared (replaces compare's own reason)


def check(
    program: Program,
    values: Mapping[str, Any],
    wrt: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    expect: Mapping[str, str] | None = None,
    seed: str | None = None,
    blame: bool = False,
    sympy_timeout: float | None = None,
    locate: Callable[[Blame, Sequence[Any], Sequence[Any]], None] | None = None,
) -> CheckResult:
    """Check the gradient of ``program`` at ``values`` every way asked for."""
    _check_values(values, rtol, atol)
    names = resolve_wrt(program, values, wrt)
    recorded = _Recorded(program, values, names, seed)
    default_rtol, default_atol = default_tolerances(recorded.dtype)
    rtol = default_rtol if rtol is None else rtol
    if atol is None:
        atol = default_atol * atol_scale(recorded.f0, _flat(recorded.gradient, names), recorded.x0)
    finite = bool(np.isfinite(recorded.f0).all())
    # a composition of complex-analytic operations is differentiable wherever it is finite: no
    # kinks to look for, and finite differences run only when asked for
    smooth = not_analytic(recorded.tape, program) is None and not program.escapes
    chosen = method_names(methods)
    if "complex_step" in chosen and "finite_difference" not in chosen and not_analytic(recorded.tape, program):
        chosen.insert(chosen.index("complex_step"), "finite_difference")  # the complex step's stand-in
    fd: Estimate | None = None
    if finite and recorded.x0.size and ("finite_difference" in chosen or not smooth):
        fd = finite_differences(recorded.evaluate, recorded.x0, recorded.f0, recorded.dtype)
    kinked: set[int] = set()
    if fd is not None and fd.kink is not None and not smooth:
        kinked = set(np.flatnonzero(fd.kink[0]).tolist())
    kinks = _kinks(recorded, fd, kinked)
    said: list[str] = []
    references = _references(recorded, chosen, finite, fd, kinked, rtol, atol, sympy_timeout, said)
    if expect:
        references["expect"] = _expect_check(recorded, expect)
    checks = _judge(recorded, references, rtol, atol, measure_noise=finite and bool(recorded.x0.size))
    nonfinite = _nonfinite(recorded)
    found, blamed = _blame(recorded, locate) if blame else (None, 0)
    confirmed = any(c.ok for c in checks.values()) or bool(kinks)  # something did compare
    ok = (
        nonfinite is None
        and confirmed
        and all(c.ok is not False for c in checks.values())
        and all(k.subgradient for k in kinks)
        and found is None
    )
    return CheckResult(
        ok, recorded.scalar.array if seed is None else recorded.evaluation.outputs[0].array, recorded.gradient,
        checks, rtol, atol, nonfinite, kinks, blame=found, blame_checked=blamed, labels=recorded.labels,
        notes=_notes(recorded, fd, rtol, atol), warnings=said,
        table=check_table(recorded.gradient, checks, kinks, recorded.labels),
    )  # fmt: skip


def _check_values(values: Mapping[str, Any], rtol: float | None, atol: float | None) -> None:
    for name, value in (("rtol", rtol), ("atol", atol)):
        problem = tolerance_problem(name, value)
        if problem:
            raise UsageError(problem)
    for name, value in values.items():
        kind = np.asarray(getattr(value, "_value", value)).dtype.kind
        if kind not in "iuf":
            raise UsageError(
                f"{name}: check needs real numbers, not {np.asarray(getattr(value, '_value', value)).dtype}"
            )


def _kinks(recorded: _Recorded, fd: Estimate | None, kinked: set[int]) -> list[Kink]:
    """The elements where finite differences found two one-sided slopes."""
    if fd is None or not kinked:
        return []
    ag = _flat(recorded.gradient, recorded.names)
    return [Kink(recorded.labels[k], float(fd.left[0, k]), float(fd.right[0, k]), float(ag[k])) for k in sorted(kinked)]


def _references(
    recorded: _Recorded, chosen: Sequence[str], finite: bool, fd: Estimate | None, kinked: set[int],
    rtol: float, atol: float, sympy_timeout: float | None, said: list[str],
) -> dict[str, _Reference | MethodCheck]:  # fmt: skip
    """Each chosen method's gradient, or the MethodCheck saying why it did not run."""
    references: dict[str, _Reference | MethodCheck] = {}
    for method in chosen:
        if not finite and method != "sympy":
            references[method] = MethodCheck(method, None, reason="skipped: the value at the point is not finite")
        elif method == "finite_difference":
            references[method] = _finite_difference_check(fd, kinked)
        elif method == "complex_step":
            references[method] = _complex_step_check(recorded, kinked, rtol, atol)
        elif method == "sympy":
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                references[method] = _sympy_check(recorded, kinked, sympy_timeout)
            said.extend(_sympy_warning(caught))
    return references


def _judge(
    recorded: _Recorded, references: dict[str, _Reference | MethodCheck], rtol: float, atol: float, measure_noise: bool
) -> dict[str, MethodCheck]:
    """Every method compared with autograd, once the tolerances are known.

    A disagreement may be autograd's own rounding (cancellation): it is measured only then, as it
    costs six more gradients, and the comparisons are made with it allowed for. SymPy and complex
    step are exact to rounding; finite differences are not (they cannot see digits lost inside the
    expression, 1 + x^2 at x = 1e-8): where an exact method agrees with autograd, a
    finite-difference disagreement is the estimate's fault, not autograd's."""

    def compared() -> dict[str, MethodCheck]:
        return {
            n: _compared(r, recorded, rtol, atol) if isinstance(r, _Reference) else r for n, r in references.items()
        }

    checks = compared()
    if measure_noise and any(c.ok is False for c in checks.values()):
        recorded.noise = recorded.rounding_noise()
        checks = compared()
    exact = [c for name, c in checks.items() if name in ("sympy", "complex_step") and c.ok]
    fd = checks.get("finite_difference")
    if exact and fd is not None and fd.ok is False:
        checks["finite_difference"] = replace(
            fd, ok=None, reason=f"inconclusive: differs by {fd.max_rel_error:.2g} relative where "
            f"{' and '.join(METHOD_NAMES[c.name] for c in exact)} agree{'s' if len(exact) == 1 else ''} "
            "(finite differences lose digits to rounding inside the expression)",
        )  # fmt: skip
    program = recorded.program
    numeric = [n for n in ("finite_difference", "complex_step") if n in checks and checks[n].ok is False]
    if program.function is not None and (program.escapes or recorded.unconnected) and numeric:
        # the function did something autograd cannot see, and the numbers show it
        from ..lang.program import leaves_autograd

        why = leaves_autograd(program, [n for n in recorded.unconnected if n in recorded.names])
        for n in numeric:
            checks[n] = replace(checks[n], worst_detail=f"{checks[n].worst_detail}; {why}")
    return checks


def _compared(ref: _Reference, recorded: _Recorded, rtol: float, atol: float) -> MethodCheck:
    check = compare(ref.name, recorded, ref.reference, ref.estimated, ref.skip, rtol, atol, ref.label, ref.only)
    if ref.note is not None:
        check.reason = ref.note
    return check


def _notes(recorded: _Recorded, fd: Estimate | None, rtol: float, atol: float) -> list[str]:
    """What a reader should know: autograd's rounding error where it is loud, one-sided differences."""
    notes = []
    g = _flat(recorded.gradient, recorded.names)
    loud = recorded.noise > rtol * np.abs(g) + atol
    if loud.any():
        k = int(np.argmax(np.where(loud, recorded.noise / np.maximum(np.abs(g), np.finfo(float).tiny), 0.0)))
        notes.append(
            f"d/d{recorded.labels[k]}: autograd's own rounding error is about {recorded.noise[k]:.2g} here "
            "(the expression is ill-conditioned here and loses digits to rounding); "
            + (
                "no method can check it more closely"
                if recorded.noise[k] > LOOSE * abs(g[k])
                else "tolerances allow for it"
            )
        )
    if fd is not None and fd.one_sided is not None and fd.one_sided[0].any():
        sides = ", ".join(recorded.labels[k] for k in np.flatnonzero(fd.one_sided[0]))
        notes.append(f"{sides}: the function is undefined on one side; finite differences from the other side only")
    return notes


def _blame(recorded: _Recorded, locate: Any = None) -> tuple[Blame | None, int]:
    """The first node whose own derivative is wrong, and how many were checked. ``locate``, when
    given, names the node as a graph shows it (render's graph lies above check: the caller passes it)."""
    from .blame import blame_nodes

    found, count = blame_nodes(recorded.tape)
    if found is not None and locate is not None:
        locate(found, recorded.evaluation.outputs, recorded.tape)
    return found, count


def _sympy_warning(caught: list[warnings.WarningMessage]) -> list[str]:
    if not caught:
        return []
    from ..lang.symbolic import warning_text

    said = warning_text(caught)
    return [said] if said else []


def _flat(per_name: Mapping[str, np.ndarray], names: Sequence[str]) -> np.ndarray:
    return (
        np.concatenate([np.asarray(per_name[n], dtype=np.float64).reshape(-1) for n in names]) if names else np.zeros(0)
    )


def _unflat(flat: np.ndarray, recorded: _Recorded) -> dict[str, np.ndarray]:
    offsets = np.cumsum([0, *recorded.sizes])
    return {n: flat[offsets[i] : offsets[i + 1]].reshape(recorded.shapes[i]) for i, n in enumerate(recorded.names)}


def compare(name: str, recorded: _Recorded, reference: np.ndarray, estimated: np.ndarray | None, skip: set[int],
            rtol: float, atol: float, label: str, only: Sequence[str] | None = None) -> MethodCheck:  # fmt: skip
    """Autograd against ``reference`` (flat), element by element."""
    ag = _flat(recorded.gradient, recorded.names)
    reference = np.asarray(reference, dtype=np.float64).reshape(-1)
    estimated = np.zeros_like(reference) if estimated is None else np.asarray(estimated).reshape(-1)
    mask = np.ones(reference.shape, dtype=bool)
    mask[list(skip)] = False
    check = MethodCheck(name, True, _unflat(reference, recorded))
    if only is not None:
        check.values = {n: v for n, v in check.values.items() if n in only}
    if not mask.any():
        check.ok, check.reason = (
            None,
            "skipped: every input is at a kink (see the one-sided derivatives)",
        )
        return check
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        abs_error = np.abs(ag - reference)
        rel_error = abs_error / np.maximum(np.maximum(np.abs(reference), np.abs(ag)), np.finfo(np.float64).tiny)
        tolerance = atol + rtol * np.abs(reference) + 3.0 * (estimated + recorded.noise)
        # relative error where it means something: not for values below atol (1e-40 against 0)
        significant = np.maximum(np.abs(reference), np.abs(ag)) > atol
        # an element where the method's own error, or autograd's rounding, is a sizeable part of
        # the value proves nothing either way (sin(exp(x)) at x = 40): inconclusive, not agreement
        loose = mask & significant & ~(np.maximum(estimated, recorded.noise) <= LOOSE * np.abs(reference))
        if loose.any():
            k = int(np.argmax(np.where(loose, np.maximum(estimated, recorded.noise), -np.inf)))
            whose = "autograd's own rounding" if recorded.noise[k] >= estimated[k] else "the estimate's own error"
            where = ", ".join(f"d/d{recorded.labels[j]}" for j in np.flatnonzero(loose)[:3])
            more = f" and {int(loose.sum()) - 3} more" if loose.sum() > 3 else ""
            check.reason = (
                f"inconclusive at {where}{more}: {whose} is about {max(estimated[k], recorded.noise[k]):.2g} "
                f"against a value of {_n(reference[k])}"
            )
            mask &= ~loose
            if not mask.any():
                check.ok = None
                return check
        badness = np.where(mask, np.where(abs_error == 0.0, 0.0, abs_error / tolerance), 0.0)
        badness = np.where(np.isnan(badness) & mask, np.inf, badness)
        check.max_abs_error = float(np.max(np.where(mask, abs_error, 0.0)))
        check.max_rel_error = float(np.max(np.where(mask & significant, rel_error, 0.0)))
        if np.any(estimated):
            check.estimated_error = float(np.max(np.where(mask, estimated, 0.0)))
    worst = int(np.argmax(badness))
    check.worst = recorded.labels[worst]
    check.ok = bool(np.all(badness[mask] <= 1.0))
    check.element_ok = np.where(mask, badness <= 1.0, True)
    check.element_error = np.where(mask, abs_error, np.nan)
    check.worst_detail = (
        f"d/d{recorded.labels[worst]}: autograd {_n(ag[worst])} but {label} {_n(reference[worst])} "
        f"(abs error {abs_error[worst]:.3g}, rel {rel_error[worst]:.3g}; tolerance {tolerance[worst]:.3g})"
    )
    return check


def _finite_difference_check(fd: Estimate | None, kinked: set[int]) -> _Reference | MethodCheck:
    if fd is None:
        return MethodCheck("finite_difference", None, reason="no input to vary")
    return _Reference("finite_difference", fd.value[0], fd.error[0], kinked, "finite differences")


def _complex_step_check(recorded: _Recorded, kinked: set[int], rtol: float, atol: float) -> _Reference | MethodCheck:
    program = recorded.program
    if program.escapes:
        return MethodCheck(
            "complex_step", None, reason=f"skipped: {program.origin} leaves gradcli's operations "
            f"({', '.join(program.escapes)}), which a complex step cannot follow",
        )  # fmt: skip
    reason = not_analytic(recorded.tape, program)
    if reason is not None:
        return MethodCheck("complex_step", None, reason=f"skipped: {reason}: {INSTEAD}")
    if program.function is not None:  # called with complex tensors, not replayed
        reason = next((f"{node.prim.name} ({node.name()}) of complex values is not complex-analytic"
                       for node, _, _ in recorded.tape
                       if isinstance(node, OpNode) and node.prim.continuation is not None), None)  # fmt: skip
    if reason is None and not recorded.x0.size:
        reason = "no input to vary"
    if reason is not None:
        return MethodCheck("complex_step", None, reason=f"skipped: {reason}")
    try:
        estimate = complex_step(recorded.evaluate, recorded.x0, recorded.dtype, recorded.f0)
    except NotRealValued as exc:
        return MethodCheck("complex_step", None, reason=f"skipped: {exc}")
    except (TypeError, ValueError) as exc:
        return MethodCheck("complex_step", None, reason=f"skipped: an operation cannot take complex values ({exc})")
    except UsageError as exc:  # a Python function that refuses complex values
        return MethodCheck("complex_step", None, reason=f"skipped: with complex values, {exc.message}")
    ref = _Reference("complex_step", estimate.value[0], estimate.error[0], kinked, "complex step")
    if _compared(ref, recorded, rtol, atol).ok is False:
        # is the function analytic there at all? (norm at 0 is not: a false mismatch)
        with np.errstate(all="ignore"):
            mirror = complex_step(recorded.evaluate, recorded.x0, recorded.dtype, mirror=True).value[0]
        branch = set(np.flatnonzero(~(np.abs(mirror - estimate.value[0]) <= 1e-6 * np.abs(estimate.value[0]))).tolist())
        if branch - kinked:
            shown = np.array(estimate.value[0], dtype=np.float64)  # not compared there: not shown either
            shown.reshape(-1)[sorted(branch)] = np.nan
            ref.reference = shown
            where = ", ".join(f"d/d{recorded.labels[k]}" for k in sorted(branch)[:3])
            ref.skip = kinked | branch
            ref.note = f"not compared at {where}: the function is not complex-analytic at this point"
    return ref


def _sympy_check(recorded: _Recorded, kinked: set[int], timeout: float | None) -> _Reference | MethodCheck:
    from .symbolic import Skipped, sympy_gradient

    if recorded.program.tree is None:
        return MethodCheck("sympy", None, reason="skipped: a Python function has no symbolic form")
    try:
        gradient = sympy_gradient(recorded.program.tree, recorded.values, recorded.names, recorded.seed, timeout)
    except Skipped as exc:
        return MethodCheck("sympy", None, reason=f"skipped: {exc}")
    except UsageError as exc:  # a constant too large for exact arithmetic
        return MethodCheck("sympy", None, reason=f"skipped: {exc.message}")
    except (RecursionError, MemoryError):
        return MethodCheck("sympy", None, reason="skipped: the expression is too large for SymPy")
    except Exception as exc:  # SymPy itself failed: say so, and let the other methods judge
        return MethodCheck("sympy", None, reason=f"skipped: SymPy failed ({type(exc).__name__}: {exc})")
    reference = _flat(gradient, recorded.names)
    # nan: SymPy's formula is 0/0 or the like at the point (x^y at x = 0), though the function need not be
    undefined = set(np.flatnonzero(np.isnan(reference)).tolist())
    estimated = 8.0 * machine_epsilon(np.dtype(np.float64)) * np.abs(reference)
    ref = _Reference("sympy", reference, estimated, kinked | undefined, "SymPy")
    if undefined - kinked:
        where = ", ".join(f"d/d{recorded.labels[k]}" for k in sorted(undefined - kinked)[:3])
        ref.note = f"its formula is undefined (nan) at {where} at this point; not compared there"
    return ref


def _expect_check(recorded: _Recorded, expect: Mapping[str, str]) -> _Reference:
    """The user's hand-derived derivatives, read by the same safe parser, at the point."""
    from ..lang.evaluate import evaluate
    from ..lang.parser import parse

    reference = _flat(recorded.gradient, recorded.names).copy()
    covered = set()
    offsets = np.cumsum([0, *recorded.sizes])
    for name, formula in expect.items():
        if name not in recorded.names:
            raise UsageError(
                f"--expect {name}: '{name}' is not one of the variables checked ({', '.join(recorded.names)})"
            )
        program = parse(formula, f"--expect {name}")
        with np.errstate(all="ignore"):
            outputs = evaluate(program, recorded.values).outputs
        if len(outputs) != 1:
            raise UsageError(f"--expect {name}: the formula must give one value, not {len(outputs)}")
        (value,) = outputs
        i = recorded.names.index(name)
        try:
            block = np.broadcast_to(np.asarray(value.array, dtype=np.float64), recorded.shapes[i])
        except ValueError:
            raise UsageError(
                f"--expect {name}: the formula gives shape {value.shape}, but {name} has shape {recorded.shapes[i]}"
            ) from None
        reference[offsets[i] : offsets[i + 1]] = block.reshape(-1)
        covered.update(range(offsets[i], offsets[i + 1]))
    skip = set(range(len(reference))) - covered
    return _Reference("expect", reference, None, skip, "the expected formula gives", list(expect))


def _nonfinite(recorded: _Recorded) -> str | None:
    if not np.isfinite(recorded.f0).all():
        where = recorded.evaluation.nonfinite
        return f"the value is {recorded.f0[0]}" + (f" ({where})" if where else "")
    for name, g in recorded.gradient.items():
        if not np.isfinite(g).all():
            from ..lang.program import backward_anomaly

            text = f"the gradient with respect to {name} is not finite: {np.asarray(g).tolist()}"
            seed = None if recorded.seed is None else gc.tensor(recorded.seed)
            where = backward_anomaly(recorded.program, recorded.values, recorded.names, seed)
            return text + (f" ({where})" if where else "")
    return None
