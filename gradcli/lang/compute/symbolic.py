"""A program's derivative by SymPy: what ``gradcli diff`` shows (and ``check --cases`` prints).

``explain_derivatives(load("x^2*y"), None).rows`` holds d/dx = 2*x*y and d/dy = x^2;
``formatted`` writes one as the language, SymPy or LaTeX. ``quick_texts`` gives the language's text
without importing SymPy, where SymEngine's derivative is one SymPy's road prints the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import UsageError
from ...records import Record, fill
from ..evaluate import check_names
from ..program import Program, load


def evaluate_text(text: str, values: Mapping[str, Any]) -> np.ndarray | None:
    """The value of an expression in the language (a derivative ``diff`` printed) at ``values``, as
    ``eval`` computes it; None when it does not run there."""
    try:
        program = load(text)
    except Exception:  # noqa: BLE001 - a text that does not run has no value to state
        return None
    return program_value(program, values)


def program_value(program: Program, values: Mapping[str, Any]) -> np.ndarray | None:
    """The single output of ``program`` at ``values`` as ``eval`` computes it (IEEE: ``log(0)`` is
    -inf, quietly), as float64; None when it does not run there or has several outputs."""
    try:
        with np.errstate(all="ignore"):
            outputs = program.run({n: v for n, v in values.items() if n in program.variables}, []).outputs
    except Exception:  # noqa: BLE001 - a program that does not run has no value to state
        return None
    return np.asarray(outputs[0].array, dtype=np.float64) if len(outputs) == 1 else None


def symbolic_derivatives(
    program: Program, wrt: Sequence[str] | None, shapes: Mapping[str, tuple[int, ...]] | None = None
) -> dict[str, Any]:
    """SymPy's derivative of the (single, scalar) output with respect to each variable, in the
    variables only (a program's steps expanded); simplified when it is small."""
    return {row.name: row.expanded for row in explain_derivatives(program, wrt, shapes).rows if not row.step}


class SymbolicRow(Record):
    """d output / d ``name``: ``derivative`` in the program's own names, ``expanded`` in its variables."""

    _fields = ("name", "step", "derivative", "expanded")

    def __init__(
        self,
        name: str,
        step: bool,  # a statement's name (True) or a variable (False)
        derivative: Any,
        expanded: Any,
    ) -> None:
        fill(self, locals())


class Explanation(Record):
    """What ``diff`` shows: for a program, one row per statement (last first, as backpropagation
    runs) then one per variable; for an expression, one per variable."""

    _fields = ("output", "rows", "at", "statements")

    def __init__(
        self,
        output: str | None,  # the output's name, when a statement names it
        rows: list[SymbolicRow],
        at: Callable[[Any, Mapping[str, Any]], Any],  # (expression, exact point) -> its value there
        statements: str = "",  # the program's statements, which give the steps' names their values
    ) -> None:
        fill(self, locals())

    def label(self, row: SymbolicRow) -> str:
        return f"d{self.output or ''}/d{row.name}"


def explain_derivatives(
    program: Program, wrt: Sequence[str] | None, shapes: Mapping[str, tuple[int, ...]] | None = None
) -> Explanation:
    """The derivative of the (single, scalar) output: an expression's by SymPy at once, simplified;
    a program's statement by statement (``symbolic.differentiate_program``)."""
    tree = program.tree
    if not program.symbolic or tree is None:
        raise UsageError("diff needs an expression; a Python function has no symbolic form")
    check_names(tree, set(program.variables))
    from .. import symbolic  # lazy: start-up, SymPy only for diff
    from ..unparse import unparse  # lazy: start-up, with the SymPy it prints

    if tree.statements and len({s.name for s in tree.statements}) == len(tree.statements):
        found = symbolic.differentiate_program(tree, shapes)
        names = _wrt_names(wrt, found.variables)
        rows = [SymbolicRow(n, True, d, None) for n, d in found.steps if n != found.output]
        rows += [SymbolicRow(n, False, found.inputs[n], found.expand(found.inputs[n])) for n in names]
        statements = "; ".join(f"{s.name} = {unparse(s.value)}" for s in tree.statements)
        return Explanation(found.output, rows, found.at, statements)
    outputs, symbols = symbolic.to_sympy(tree, shapes)
    if len(outputs) != 1 or isinstance(outputs[0], np.ndarray):
        raise UsageError("diff differentiates one scalar output; use gradcli jacobian for several")
    rows = []
    for name in _wrt_names(wrt, symbols):
        derivative = symbolic.derivative_of(outputs[0], symbols[name])
        rows.append(SymbolicRow(name, False, derivative, derivative))
    return Explanation(None, rows, lambda expr, point: symbolic.value_at(expr, symbols, point))


def quick_texts(program: Program, wrt: Sequence[str] | None) -> dict[str, str] | None:
    """``diff``'s texts without SymPy where SymEngine's derivative prints as SymPy's road prints it
    (lang/symcore.py: ``derivative_texts``), by variable; None where SymPy answers (and says what is wrong)."""
    tree = program.tree if program.symbolic else None
    if tree is None:
        return None
    from ..symcore import derivative_texts  # lazy: start-up, SymEngine only for diff and check

    return derivative_texts(tree, wrt)


def _wrt_names(wrt: Sequence[str] | None, symbols: Mapping[str, Any]) -> list[str]:
    names = list(wrt) if wrt else list(symbols)
    if not names:
        raise UsageError("diff: the expression has no variable to differentiate by")
    for name in names:
        if name not in symbols:
            raise UsageError(f"--wrt {name}: '{name}' is not a variable of the expression")
    return names


def derivative_text(
    program: Program,
    name: str,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    form: str = "language",
) -> str:
    """The text ``gradcli diff`` prints for d output/d ``name`` (a variable, or a statement's name):
    ``form`` "language" (what ``eval`` reads back, given the program's statements), "sympy" or "latex"."""
    explanation = explain_derivatives(program, None, shapes)
    for row in explanation.rows:
        if row.name == name:
            return formatted(row.derivative, form)
    raise UsageError(f"--wrt {name}: '{name}' is not a variable of the expression")


def formatted(expr: Any, form: str = "language") -> str:
    """A derivative (a SymPy expression, or an object array of them) as text: gradcli's language
    (a whole array as ``2*x`` when each element is the same in its own elements), SymPy's or LaTeX."""
    import sympy as sp

    if form == "language":
        from ..printer import array_text, to_language  # lazy: start-up, printed with SymPy

        return array_text(expr) if isinstance(expr, np.ndarray) else to_language(expr)
    printer = sp.latex if form == "latex" else sp.sstr
    if isinstance(expr, np.ndarray):
        if form == "latex":
            return sp.latex(sp.Array(expr.tolist()))
        return "[" + ", ".join(printer(e) for e in expr.reshape(-1)) + "]" if expr.ndim == 1 else printer(expr.tolist())
    return printer(expr)
