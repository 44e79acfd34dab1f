"""``gradcli diff EXPR --steps``: the derivation, each rule named (text, ``--latex``, ``--json``).

The derivation itself is built in ``lang/steps.py``; here it is shown, and every step is
checked at the ``--at`` point (or a random one) before it is: a step that does not equal
the derivative there is a bug, said as a warning.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..errors import UsageError, printable
from ..lang.evaluate import check_names
from ..lang.values import names_list
from . import output
from .inputs import Given
from .reading import load_program, read_point


def show(given: Given) -> None:
    """Print the steps of each derivative (called from ``differentiate`` inside ``reported()``)."""
    from ..check.symbolic import Skipped, time_limit  # lazy: start-up, SymPy
    from .progress import working  # lazy: start-up, threads

    program = load_program(given)
    if not program.symbolic:
        raise UsageError("diff needs an expression; a Python function has no symbolic form")
    values = read_point(given, program).values
    for name, value in values.items():
        if np.ndim(value):
            raise UsageError(f"--steps explains scalar expressions: --at {name} is an array (use diff without --steps)")
    tree = program.tree
    check_names(tree, set(program.variables))
    variables = names_list(given.wrt) or list(program.variables)
    for name in variables:
        if name not in program.variables:
            raise UsageError(f"--wrt {name}: '{name}' is not a variable of the expression")
    if not variables:
        raise UsageError("diff: the expression has no variable to differentiate by")
    if len(tree.outputs.items) != 1:
        raise UsageError("diff differentiates one scalar output; use gradcli jacobian for several")
    numbers = {name: float(value) for name, value in values.items()}
    try:
        with working("working out the steps", quiet=given.as_json), time_limit(given.sympy_timeout):
            derivations, points = _derive(tree, variables, numbers)
    except Skipped as exc:
        raise UsageError(str(exc)) from None
    if given.as_json:
        output.print_json(_document(derivations, points))
    elif given.latex:
        _print_latex(derivations, points)
    else:
        _print_text(derivations, points)


def _derive(tree: Any, variables: list[str], given: dict[str, float]) -> tuple[list[Any], list[dict[str, Any]]]:
    from ..lang import steps  # lazy: start-up, SymPy

    if tree.statements:
        derivations = steps.program_steps(tree, variables)
    else:
        derivations = [steps.derive(tree.outputs.items[0], name) for name in variables]
    points = []
    for derivation in derivations:
        point = steps.point_for(derivation, given)
        derivation.checked, wrong = steps.check(derivation, point)
        for step, got, want in wrong:
            output.warn(
                f"the step '{step.rule}' does not check: {_number(got)} where the derivative is {_number(want)}"
            )
        points.append({str(symbol): value for symbol, value in point.items()})
    return derivations, points


def _number(value: complex) -> str:
    return f"{value.real:.6g}" if value.imag == 0 else f"{value:.6g}"


def _checked_at(derivation: Any, point: dict[str, Any]) -> str:
    """ "every step checked at x=0.7", or why not (the derivative is not finite there)."""
    bound = {str(symbol) for symbol, _ in derivation.bindings}
    where = ", ".join(f"{name}={_value(value)}" for name, value in point.items() if name not in bound)
    if derivation.checked == len(derivation.steps):
        return f"every step checked at {where}"
    if derivation.checked == 0:
        return f"not checked: the derivative is not a finite number at {where}"
    return f"{derivation.checked} of {len(derivation.steps)} steps checked at {where} (the others are not finite there)"


def _json_number(value: Any) -> Any:
    try:
        return float(value)
    except TypeError:
        return str(value)


def _value(value: Any) -> str:
    try:
        return f"{float(value):.6g}"
    except TypeError:  # complex (log of a negative number)
        return str(value)


def _final_name(derivation: Any, step: Any) -> str:
    return step.result.split(" = ", 1)[0] if derivation.bindings else f"d/d{derivation.variable}"


def _document(derivations: list[Any], points: list[dict[str, Any]]) -> dict[str, Any]:
    steps, results = [], {}
    for derivation in derivations:
        for step in derivation.steps:
            entry = step.as_json()
            if derivation.bindings:  # a program: whose derivative each step gives
                label, _, value = step.result.partition(" = ")
                entry["wrt"] = label.rsplit("∂", 1)[-1]
                results[entry["wrt"]] = value
            else:
                entry["wrt"] = derivation.variable
            steps.append(entry)
        if not derivation.bindings:
            results[derivation.variable] = derivation.result
    bound = {str(symbol) for derivation in derivations for symbol, _ in derivation.bindings}
    checked = {name: _json_number(value) for point in points for name, value in point.items() if name not in bound}
    every = all(d.checked == len(d.steps) for d in derivations)
    return {"steps": steps, "derivative": results, "checked_at": checked, "every_step_checked": every}


def _print_text(derivations: list[Any], points: list[dict[str, Any]]) -> None:
    lines: list[str] = []
    for derivation, point in zip(derivations, points):
        if lines:
            lines.append("")
        lines.append(derivation.heading)
        width = len(str(len(derivation.steps)))
        for number, step in enumerate(derivation.steps, 1):
            lines.append(f"{number:>{width}}. {step.rule}: {step.applies_to}")
            lines.append(
                f"{'':>{width}}  = {step.result}" if not derivation.bindings else f"{'':>{width}}  {step.result}"
            )
        lines.append(f"({_checked_at(derivation, point)})")
    _write(lines)


def _write(lines: list[str]) -> None:
    text = "\n".join(lines)
    sys.stdout.write("\n".join(printable(line) for line in text.split("\n")) + "\n")


def _print_latex(derivations: list[Any], points: list[dict[str, Any]]) -> None:
    lines: list[str] = []
    for derivation, point in zip(derivations, points):
        lines.append(r"\begin{align*}")
        rows = []
        for number, step in enumerate(derivation.steps):
            rule = _latex_text(step.rule)
            if derivation.bindings:
                rows.append(f"{step.latex} && \\text{{{rule}}}")
            else:
                first = derivation.latex_heading if number == 0 else ""
                rows.append(f"{first} &= {step.latex} && \\text{{{rule}}}")
        lines.append(" \\\\\n".join(rows))
        lines.append(r"\end{align*}")
        lines.append(f"% {_checked_at(derivation, point)}")
    _write(lines)


def _latex_text(text: str) -> str:
    for char in "\\{}$&#^_%~":
        text = text.replace(char, "\\" + char if char not in "\\^~" else " ")
    return text
