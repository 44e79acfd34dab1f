"""``gradcli check``: autograd's gradient against SymPy, finite differences, complex step
and the user's own formulas.

The program runs once, recorded; finite differences and complex step then
evaluate that record at all their points in one batched pass each, and the verdict is
decided as at every other point (gradcli/check/decide.py, which check --points shares) (a Python
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
from dataclasses import fields as dataclass_fields
from typing import Any

import numpy as np

from ..autograd.forward import key
from ..autograd.function import FunctionNode
from ..autograd.node import OpNode
from ..autograd.replay import replay
from ..autograd.tape import recording
from ..errors import UsageError
from ..lang.compute import ElementLabels, backward_anomaly, leaves_autograd, resolve_wrt, single_output
from ..lang.evaluate import evaluate
from ..lang.frameworks import title
from ..lang.functions import not_analytic_call
from ..lang.library import gc
from ..lang.parser import parse
from ..lang.program import Program
from ..lang.python import detach_fixed
from ..lang.values import seed_vector
from ..text import in_message
from .blame import blame_nodes
from .decide import (
    AGREE,
    EXACT,
    LOOSE,
    Compared,
    Decision,
    Reference,
    Road,
    decide,
    expected,
    expected_names,
    tolerances,
)
from .directions import ELEMENTWISE_UP_TO, Along, directions_for
from .framework_blame import checked_note, framework_blame
from .numeric import Estimate, machine_epsilon, tolerance_problem
from .result import METHOD_NAMES, Blame, CheckResult, Kink, MethodCheck, check_table
from .symbolic import Skipped, sympy_gradient

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
            said = getattr(node.function, "not_analytic", None)  # a framework's function knows its own operations
            if said is None:
                return f"the custom Function {node.function.__name__} may not be complex-analytic"
            reason = said(node.ctx)
            if reason is not None:
                return reason
    name = not_analytic_call(program.tree) if program is not None and program.tree is not None else None
    return None if name is None else f"{name}() is not complex-analytic"


def computed_in(tape: Sequence[Any], dtype: Any) -> np.dtype:
    """The precision the recording computed in: its inputs' ``dtype``, or less where a framework's
    function computed in less (float32 inside a float64 function: differences and tolerances are
    float32's, or its rounding reads as a wrong gradient)."""
    precision = np.dtype(dtype)
    for node, _, _ in tape:
        said = getattr(getattr(node, "function", None), "precision", None) if isinstance(node, FunctionNode) else None
        inner = np.dtype(precision if said is None else said(node.ctx))
        if np.finfo(inner).eps > np.finfo(precision).eps:
            precision = inner
    return precision


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


class Recorded:
    """The program run once, recorded: its scalar output, gradient and a batched evaluator."""

    def __init__(self, program: Program, values: Mapping[str, Any], names: list[str], seed: str | None) -> None:
        self.program, self.values, self.names, self.seed_text = program, dict(values), names, seed
        self.seed: np.ndarray | None = None
        self.detached: list[Any] = []  # what detach() gave in a Python function, kept fixed elsewhere
        with recording() as tape, detach_fixed(record=None if program.replayable else self.detached):
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
        self.labels = ElementLabels(names, self.shapes)  # (each made when asked: a model has millions)
        self.f0 = np.asarray(scalar.array, dtype=np.float64).reshape(1)
        self.dtype = computed_in(tape, np.result_type(*(t.array for t in self.inputs)) if self.inputs else np.float64)

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

    def road(self) -> Road:
        """This one point as the decision takes points (gradcli/check/decide.py)."""
        program, escapes, continuation = self.program, None, None
        if program.escapes:
            escapes = (
                f"skipped: {program.origin} leaves gradcli's operations ({', '.join(program.escapes)}), "
                "which a complex step cannot follow"
            )
        if not program.replayable:  # called with complex tensors, not replayed
            continuation = next((f"{node.prim.name} ({node.name()}) of complex values is not complex-analytic"
                                 for node, _, _ in self.tape
                                 if isinstance(node, OpNode) and node.prim.continuation is not None), None)  # fmt: skip
        return Road(
            self.x0[None, :], self.f0.reshape(1), _flat(self.gradient, self.names)[None, :], self.labels,
            lambda rows, owner: self.evaluate(rows).reshape(len(rows)),
            lambda rows, owner: np.stack([self._gradient_at(row) for row in rows]),
            [not_analytic(self.tape, program)], escapes, [continuation], self.dtype,
        )  # fmt: skip

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
        if not self.program.replayable:
            return self._call_each(points)
        if self.seed is None and all(size == 1 for size in self.sizes):
            # a faster road where the program has one (one long scalar expression, lang/flat.py: its
            # postfix code on the points), the replay's numbers without its node an operation
            columns = {n: points[:, i] for i, n in enumerate(self.names)}
            found = self.program.values_at_points({**{n: np.asarray(v) for n, v in self.values.items()}, **columns})
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
        """The Python function itself at every point (complex points for the complex step), given the
        inputs it is given at the first (those checked requiring grad: a PyTorch function may call
        ``torch.autograd.grad`` on them), with nothing recorded."""
        rows = []
        with gc.no_grad():
            for row in zip(*self.split(points)):
                values = {**self.values, **{n: np.asarray(v) for n, v in zip(self.names, row)}}
                with detach_fixed(replay=self.detached):
                    out = single_output(self.program.run(values, self.names))
                scalar = gc.sum(out * gc.tensor(self.seed)) if self.seed is not None else out
                rows.append(np.asarray(scalar.array).reshape(-1)[0])
        return np.array(rows).reshape(-1, 1)


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
    directions: int | None = None,
) -> CheckResult:
    """Check the gradient of ``program`` at ``values`` every way asked for: the decision is the one every
    road takes (gradcli/check/decide.py), at this one point; here it is put into words. ``directions``:
    K checks along K random directions, 0 element by element, None: chosen by the number of input
    elements (check/directions.py)."""
    _check_values(values, rtol, atol)
    names = resolve_wrt(program, values, wrt)
    recorded = Recorded(program, values, names, seed)
    random = program.random_difference(recorded.values, names)  # two more calls: does the value change by itself?
    road = recorded.road()
    count = directions_for(recorded.x0.size, directions)
    view: Any = Along(recorded, road, count) if count else recorded  # what the methods' values are compared on
    atol_given, rtol_given = atol, rtol
    rtol, atols = tolerances(recorded.dtype, rtol, atol, road)
    chosen = method_names(methods)
    said: list[str] = []
    given: dict[str, Reference] = {}
    if "sympy" in chosen and count and not methods and recorded.x0.size > ELEMENTWISE_UP_TO:  # SymPy: 10 s at 1000
        given["sympy"] = Reference.nowhere(
            "sympy", 1, recorded.x0.size,
            f"skipped: {recorded.x0.size} input elements are checked along directions (--method sympy asks for it)",
        )  # fmt: skip
    elif "sympy" in chosen:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            given["sympy"] = _sympy_check(recorded, sympy_timeout)
        said.extend(_sympy_warning(caught))
    if expect:
        given["expect"] = _expect_check(recorded, expect)
    if count:
        decision, rtol, atols = view.decide(chosen, rtol_given, atol_given, given)
    else:
        decision = decide(road, chosen, rtol, atols, given)
    checks = {name: _method_check(c, view, decision) for name, c in decision.checks.items()}
    _escaped(recorded, checks)
    fd = None if decision.fd is None else decision.fd.at(0)
    kinks = _kinks(view, fd, decision)
    nonfinite = _nonfinite(recorded)
    found, blamed = _blame(recorded, locate, rtol, atol_given) if blame else (None, 0)
    ok = bool(decision.ok[0]) and found is None
    atol = float(atols[0])
    result = CheckResult(
        ok, recorded.scalar.array if seed is None else recorded.evaluation.outputs[0].array, recorded.gradient,
        checks, rtol, atol, nonfinite, kinks, blame=found, blame_checked=blamed, labels=view.labels,
        notes=_notes(view, fd, decision.noise[0], rtol, atol) + checked_note(recorded.program, blame, blamed),
        warnings=said, table=check_table(view.gradient, checks, kinks, view.labels),
        framework=recorded.program.framework,
        directional=view.found(decision, given, rtol, atol_given) if count else None,
    )  # fmt: skip
    return result if random is None else RandomCheck.of(result, program, random)


def _kinks(view: Any, fd: Estimate | None, decision: Decision) -> list[Kink]:
    """The elements (or directions) along which the function is not differentiable at the point."""
    if fd is None:
        return []
    ag = _flat(view.gradient, view.names)
    return [Kink(view.labels[k], float(fd.left[0, k]), float(fd.right[0, k]), float(ag[k]),
                 None if fd.jump is None or np.isnan(fd.jump[0, k]) else float(fd.jump[0, k]))
            for k in np.flatnonzero(decision.kinked[0])]  # fmt: skip


@dataclass
class RandomCheck(CheckResult):
    """The check of a function whose value changes from call to call at the same point (dropout in
    training mode, ``torch.randn`` inside): never OK, whatever the methods said, since their
    differences measure the noise, not the derivative. JSON: ``"random": true``."""

    random: float = 0.0  # the largest difference between two calls' outputs at the point
    origin: str = ""

    @classmethod
    def of(cls, result: CheckResult, program: Program, difference: float) -> RandomCheck:
        fields = {f.name: getattr(result, f.name) for f in dataclass_fields(CheckResult)}
        return cls(**{**fields, "ok": False}, random=difference, origin=program.origin)

    def verdict(self) -> str:
        return (
            f"RANDOM: {self.origin} is random at this point (two calls differ by {self.random:.3g}), so no "
            "gradient of it can be checked; fix its randomness inside the function: a fixed seed at its start "
            "(torch.manual_seed(0), np.random.seed(0), a fixed jax.random key), model.eval() for dropout, "
            "or the noise passed in as an input"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "random": True, "random_difference": self.random}


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


def _escaped(recorded: Recorded, checks: dict[str, MethodCheck]) -> None:
    """A Python function that did something autograd cannot see, where the numbers show it: said."""
    program = recorded.program
    numeric = [n for n in ("finite_difference", "complex_step") if n in checks and checks[n].ok is False]
    if not program.replayable and (program.escapes or recorded.unconnected) and numeric:
        why = leaves_autograd(program, [n for n in recorded.unconnected if n in recorded.names])
        for n in numeric:
            checks[n] = replace(checks[n], worst_detail=f"{checks[n].worst_detail}; {why}")


def _notes(recorded: Recorded, fd: Estimate | None, noise: np.ndarray, rtol: float, atol: float) -> list[str]:
    """What a reader should know: autograd's rounding error (``noise``, the decision's) where it is
    loud, one-sided differences."""
    notes = []
    g = _flat(recorded.gradient, recorded.names)
    loud = noise > rtol * np.abs(g) + atol
    if loud.any():
        k = int(np.argmax(np.where(loud, noise / np.maximum(np.abs(g), np.finfo(float).tiny), 0.0)))
        notes.append(
            f"d/d{recorded.labels[k]}: autograd's own rounding error is about {noise[k]:.2g} here "
            "(the expression is ill-conditioned here and loses digits to rounding); "
            + ("no method can check it more closely" if noise[k] > LOOSE * abs(g[k]) else "tolerances allow for it")
        )
    if fd is not None and fd.one_sided is not None and fd.one_sided[0].any():
        sides = ", ".join(recorded.labels[k] for k in np.flatnonzero(fd.one_sided[0]))
        notes.append(f"{sides}: the function is undefined on one side; finite differences from the other side only")
    return notes


def _blame(
    recorded: Recorded, locate: Any = None, rtol: float | None = None, atol: float | None = None
) -> tuple[Blame | None, int]:
    """The first node whose own derivative is wrong, and how many were checked. ``locate``, when
    given, names the node as a graph shows it (render's graph lies above check: the caller passes it).
    A PyTorch or JAX function's custom Functions are checked instead (check/framework_blame.py)."""
    program = recorded.program
    if getattr(program, "framework", None) is not None:
        function, given = program.bound(recorded.values)  # (jax.jit's static arguments bound)
        found, count = framework_blame(program.framework, function, given, recorded.names, rtol, atol)
    else:
        found, count = blame_nodes(recorded.tape)
    if found is not None and locate is not None:
        locate(found, recorded.evaluation.outputs, recorded.tape)
    return found, count


def _sympy_warning(caught: list[warnings.WarningMessage]) -> list[str]:
    if not caught:
        return []
    from ..lang.symbolic import warning_text  # lazy: SymPy, only when it warned

    said = warning_text(caught)
    return [said] if said else []


def _flat(per_name: Mapping[str, np.ndarray], names: Sequence[str]) -> np.ndarray:
    return (
        np.concatenate([np.asarray(per_name[n], dtype=np.float64).reshape(-1) for n in names]) if names else np.zeros(0)
    )


def _unflat(flat: np.ndarray, recorded: Recorded) -> dict[str, np.ndarray]:
    offsets = np.cumsum([0, *recorded.sizes])
    return {n: flat[offsets[i] : offsets[i + 1]].reshape(recorded.shapes[i]) for i, n in enumerate(recorded.names)}


def _method_check(c: Compared, recorded: Recorded, decision: Decision) -> MethodCheck:
    """One method's verdict at the point, in words: what it gives, how far from autograd, and why
    it did not judge where it did not."""
    ref = c.ref
    if ref.reason[0] is not None:
        return MethodCheck(ref.name, None, reason=ref.reason[0])
    check = MethodCheck(ref.name, True, _unflat(np.asarray(ref.reference[0], dtype=np.float64), recorded))
    if ref.only is not None:
        check.values = {n: v for n, v in check.values.items() if n in ref.only}
    if ref.skip[0].all():
        steps = decision.fd is not None and bool(np.isfinite(decision.fd.jump[0][0][decision.kinked[0]]).all())
        check.ok, check.reason = None, (
            "skipped: the function steps at every input (see below)" if steps and decision.kinked[0].all()
            else "skipped: every input is at a kink (see the one-sided derivatives)"
        )  # fmt: skip
    else:
        check.reason = _inconclusive(c, recorded, decision.noise[0])
        if c.mask[0].any():
            _measured(check, c, recorded)
        else:
            check.ok = None
    note = ref.note[0] if ref.note else None
    if ref.name == "sympy":
        undefined = np.isnan(ref.reference[0]) & ~decision.kinked[0]
        if undefined.any():
            where = ", ".join(f"d/d{recorded.labels[k]}" for k in np.flatnonzero(undefined)[:3])
            note = f"its formula is undefined (nan) at {where} at this point; not compared there"
    if note is not None:
        check.reason = note
    if c.inconclusive[0]:
        exact = [n for n, other in decision.checks.items() if n in EXACT and other.ok[0] == AGREE]
        check.ok, check.reason = (
            None,
            (
                f"inconclusive: differs by {check.max_rel_error:.2g} relative where "
                f"{' and '.join(METHOD_NAMES[n] for n in exact)} agree{'s' if len(exact) == 1 else ''} "
                "(finite differences lose digits to rounding inside the expression)"
            ),
        )
    return check


def _inconclusive(c: Compared, recorded: Recorded, noise: np.ndarray) -> str | None:
    """Where the estimate's own error, or autograd's rounding (``noise``), is a sizeable part of the value."""
    loose = c.loose[0]
    if not loose.any():
        return None
    estimated = np.zeros(loose.shape) if c.ref.estimated is None else np.asarray(c.ref.estimated[0])
    reference = c.ref.reference[0]
    k = int(np.argmax(np.where(loose, np.maximum(estimated, noise), -np.inf)))
    whose = "autograd's own rounding" if noise[k] >= estimated[k] else "the estimate's own error"
    where = ", ".join(f"d/d{recorded.labels[j]}" for j in np.flatnonzero(loose)[:3])
    more = f" and {int(loose.sum()) - 3} more" if loose.sum() > 3 else ""
    return (
        f"inconclusive at {where}{more}: {whose} is about {max(estimated[k], noise[k]):.2g} "
        f"against a value of {in_message(reference[k])}"
    )


def _whose(program: Any) -> str:
    """Whose gradient a check judges: autograd's (gradcli's), PyTorch's or JAX's."""
    return "autograd" if program.framework is None else title(program.framework)


def _measured(check: MethodCheck, c: Compared, recorded: Recorded) -> None:
    """The compared elements' errors, the worst of them, and the verdict they give."""
    mask, badness, abs_error, rel_error = c.mask[0], c.badness[0], c.abs_error[0], c.rel_error[0]
    reference, ag = c.ref.reference[0], _flat(recorded.gradient, recorded.names)
    check.max_abs_error = float(np.max(np.where(mask, abs_error, 0.0)))
    check.max_rel_error = float(np.max(np.where(mask & c.significant[0], rel_error, 0.0)))
    if c.ref.estimated is not None and np.any(c.ref.estimated[0]):
        check.estimated_error = float(np.max(np.where(mask, c.ref.estimated[0], 0.0)))
    worst = int(np.argmax(badness))
    check.worst = recorded.labels[worst]
    check.ok = bool(np.all(badness[mask] <= 1.0))
    check.element_ok = np.where(mask, badness <= 1.0, True)
    check.element_error = np.where(mask, abs_error, np.nan)
    check.worst_detail = (
        f"d/d{recorded.labels[worst]}: {_whose(recorded.program)} {in_message(ag[worst])} but {c.ref.label} "
        f"{in_message(reference[worst])} "
        f"(abs error {abs_error[worst]:.3g}, rel {rel_error[worst]:.3g}; tolerance {c.tolerance[0][worst]:.3g})"
    )


def _sympy_check(recorded: Recorded, timeout: float | None) -> Reference:
    n = recorded.x0.size
    if not recorded.program.symbolic or recorded.program.tree is None:
        return Reference.nowhere("sympy", 1, n, "skipped: a Python function has no symbolic form")
    try:
        gradient = sympy_gradient(recorded.program.tree, recorded.values, recorded.names, recorded.seed, timeout)
    except Skipped as exc:
        return Reference.nowhere("sympy", 1, n, f"skipped: {exc}")
    except UsageError as exc:  # a constant too large for exact arithmetic
        return Reference.nowhere("sympy", 1, n, f"skipped: {exc.message}")
    except (RecursionError, MemoryError):
        return Reference.nowhere("sympy", 1, n, "skipped: the expression is too large for SymPy")
    except Exception as exc:  # SymPy itself failed: say so, and let the other methods judge
        return Reference.nowhere("sympy", 1, n, f"skipped: SymPy failed ({type(exc).__name__}: {exc})")
    reference = _flat(gradient, recorded.names)[None, :]
    # nan: SymPy's formula is 0/0 or the like at the point (x^y at x = 0), though the function need not be:
    # not compared there (the note is made with the kinks known, in _method_check)
    estimated = 8.0 * machine_epsilon(np.dtype(np.float64)) * np.abs(reference)
    return Reference("sympy", reference, estimated, np.isnan(reference), "SymPy", [None])


def _expect_check(recorded: Recorded, expect: Mapping[str, str]) -> Reference:
    """The user's hand-derived derivatives, read by the same safe parser, at the point."""

    expected_names(expect, recorded.names)
    values = {}
    for name, formula in expect.items():
        program = parse(formula, f"--expect {name}")
        with np.errstate(all="ignore"):
            outputs = evaluate(program, recorded.values).outputs
        if len(outputs) != 1:
            raise UsageError(f"--expect {name}: the formula must give one value, not {len(outputs)}")
        values[name] = np.asarray(outputs[0].array, dtype=np.float64)[None]
    return expected(_flat(recorded.gradient, recorded.names)[None, :], recorded.names, recorded.shapes, values)


def _nonfinite(recorded: Recorded) -> str | None:
    if not np.isfinite(recorded.f0).all():
        where = recorded.evaluation.nonfinite
        return f"the value is {recorded.f0[0]}" + (f" ({where})" if where else "")
    for name, g in recorded.gradient.items():
        if not np.isfinite(g).all():
            text = f"the gradient with respect to {name} is not finite: {np.asarray(g).tolist()}"
            seed = None if recorded.seed is None else gc.tensor(recorded.seed)
            where = backward_anomaly(recorded.program, recorded.values, recorded.names, seed)
            return text + (f" ({where})" if where else "")
    return None
