"""check builds its result once: per-element errors, the worst method and the rows to show come
from the library (check/result.py); the CLI only formats them (issue 14, part "split")."""

from __future__ import annotations

import dataclasses

import numpy as np
from typer.testing import CliRunner

from gradcli.check import MethodCheck, check
from gradcli.check.result import CHECK_ROWS, CheckRow
from gradcli.cli.app import app
from gradcli.lang.program import load

runner = CliRunner()


def checked(expression: str, **values: object):
    return check(load(expression), {k: np.asarray(v, dtype=float) for k, v in values.items()})


def test_no_comparison_closure_is_stored_on_a_result():
    assert "redo" not in {f.name for f in dataclasses.fields(MethodCheck)}
    result = checked("x^2 * y", x=2.0, y=3.0)
    assert all(not callable(getattr(c, "redo", None)) for c in result.checks.values())


def test_the_table_holds_each_element_with_its_worst_error():
    result = check(load("x^2 * y"), {"x": np.float64(2.0), "y": np.float64(3.0)}, expect={"x": "2*x*y + 1"})
    table = result.table
    assert table.methods == ["sympy", "finite_difference", "complex_step", "expect"]
    x, y = table.rows
    assert (x.label, x.autograd, x.status) == ("x", 12.0, "MISMATCH")
    assert x.values[0] == 12.0 and x.values[3] == 13.0 and np.isnan(y.values[3])
    assert x.abs_error == 1.0  # the expected formula is the furthest from autograd
    assert x.rel_error == 1.0 / 13.0
    assert (y.label, y.autograd, y.status, y.abs_error) == ("y", 4.0, "ok", 0.0)
    assert table.note is None


def test_past_the_row_limit_the_worst_element_of_each_variable_is_shown():
    v = np.arange(1.0, CHECK_ROWS + 3)
    result = check(load("sum(v^2) + sum(w)"), {"v": v, "w": np.array([1.0, 2.0])}, expect={"v": "2*v + (v == 5)"})
    rows = result.table.rows
    assert [r.label for r in rows] == ["v[4]", "w[0]"]
    assert rows[0].status == "MISMATCH" and rows[0].abs_error == 1.0
    assert result.table.note == f"{CHECK_ROWS + 2 + 2} elements: the worst of each variable shown (--json has them all)"


def test_a_kink_and_an_uncompared_element_are_marked():
    rows = checked("abs(x) + y", x=0.0, y=1.0).table.rows
    assert [(r.label, r.status) for r in rows] == [("x", "kink"), ("y", "ok")]
    assert isinstance(rows[0], CheckRow)


def test_sympy_undefined_formula_is_said_even_after_rounding_is_measured():
    # sqrt at 0: SymPy's formula is nan, the gradient inf. The other methods disagree, so autograd's
    # rounding is measured and the comparisons made again; the reason SymPy did not compare used to
    # be lost then (it said "every input is at a kink", which x = 0 is not here)
    result = checked("sqrt(x)", x=0.0)
    assert result.checks["sympy"].reason == "its formula is undefined (nan) at d/dx at this point; not compared there"
    out = runner.invoke(app, ["check", "sqrt(x)", "--at", "x=0"])
    assert out.exit_code == 1
    assert "sympy: its formula is undefined (nan) at d/dx at this point; not compared there\n" in out.stdout


def test_finite_differences_outvoted_by_exact_methods_are_inconclusive():
    result = checked("sqrt(1 + x^2) - 1", x=1e-8)
    fd = result.checks["finite_difference"]
    assert result.ok is True and fd.ok is None
    assert fd.reason == (
        "inconclusive: differs by 1 relative where sympy and complex step agree "
        "(finite differences lose digits to rounding inside the expression)"
    )
    assert result.table.methods == ["sympy", "complex_step"]
