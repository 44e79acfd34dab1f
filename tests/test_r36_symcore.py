"""Issue 36: ``check`` of a small expression in a blink. SymPy's import alone took longer than a whole
``gradcli eval``; a program of scalars is now differentiated by SymEngine (SymPy's C++ core) through
the same table rows (``sympy=lambda sp, x: ...`` handed ``symengine``). Here its answers equal SymPy's
road's, function by function and on composite programs, and what it must not answer goes to SymPy."""

from __future__ import annotations

import numpy as np
import pytest

from gradcli.check import symbolic
from gradcli.lang import symcore
from gradcli.lang.functions import FUNCTIONS
from gradcli.lang.parser import parse

pytest.importorskip("symengine", reason="symengine is a dependency of gradcli: pip install -e '.[test]'")


FAST = symcore.scalar_gradient


def _sympy_road(text, values, names, monkeypatch):
    monkeypatch.setattr(symcore, "scalar_gradient", lambda *args: None)
    return symbolic.sympy_gradient(parse(text), values, names)


def _both(text, values, monkeypatch):
    names = list(values)
    fast = FAST(parse(text), values, names)
    assert fast is not None, text
    slow = _sympy_road(text, values, names, monkeypatch)
    for name in names:
        np.testing.assert_allclose(fast[name], slow[name], rtol=1e-14, atol=1e-300, err_msg=f"{text} d/d{name}")


@pytest.mark.parametrize("name", sorted(symcore.SMOOTH))
def test_every_function_it_answers_equals_sympys_road(name, monkeypatch):
    function = FUNCTIONS[name]
    text = f"{name}(x)" if 1 in function.elementwise else f"{name}(x, y)"
    values = {"x": 0.3} if 1 in function.elementwise else {"x": 0.3, "y": 0.7}
    _both(text, values, monkeypatch)


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("x^2 * sin(y) + exp(x*y) / (1 + y^2)", {"x": 1.25, "y": -0.5}),
        ("log(x, 2) + sqrt(x) * atan(y / x) - x^-3", {"x": 2.5, "y": 0.1}),
        ("e^x * pi + tanh(sigmoid(x) * softplus(y))", {"x": -0.7, "y": 3.0}),
        ("x * e", {"x": 2.0, "e": 3.0}),  # e given a value is a variable
        ("(x + w) * (w + 1)", {"x": 2.0, "w": 1.0}),
    ],
)
def test_composite_programs_equal_sympys_road(text, values, monkeypatch):
    _both(text, values, monkeypatch)


@pytest.mark.parametrize(
    "text",
    ["abs(x)", "relu(x)", "round(x)", "trunc(x)", "x % 2", "max(x, y)", "x if x > 0 else y", "sum([x, y])",
     "a = x * y; a^2", "x^2000"],
)  # fmt: skip
def test_what_it_must_not_answer_goes_to_sympy(text):
    assert FAST(parse(text), {"x": 0.3, "y": 0.7, "a": 1.0}, ["x"]) is None


def test_a_derivative_symengine_cannot_evaluate_to_30_digits_goes_to_sympy():
    """SymEngine's MPFR evaluation of atan2 is not implemented: SymPy's road answers instead."""
    assert FAST(parse("sqrt(x) * atan2(y, x)"), {"x": 2.5, "y": 0.1}, ["x"]) is None


def test_singular_points_read_as_sympys_do(monkeypatch):
    """1/x and sqrt(x) at 0: SymPy's exact road says zoo, check reads no number: nan, never inf."""
    for text in ("1/x", "x^0.5", "sqrt(x)"):
        fast = FAST(parse(text), {"x": 0.0}, ["x"])
        assert fast is not None and np.isnan(fast["x"]), text
        assert np.isnan(_sympy_road(text, {"x": 0.0}, ["x"], monkeypatch)["x"]), text
