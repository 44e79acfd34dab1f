"""Issue 13: the function forms of the operators are the operators.

``ge(y, x)`` gave a boolean, which later arithmetic turned into float16
(``exp(ge(y,x))`` was 2.71875) or refused (``-ge(y,x)``: NumPy's "boolean
negative"), and SymPy got a bare relation (``diff "ge(x,1) + x"``: internal
error). Comparisons give 0.0/1.0 in the inputs' float dtype, with no gradient,
in both spellings, numerically and symbolically.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli.app import app
from gradcli.lang.compute import symbolic_derivatives, value_and_grad
from gradcli.lang.evaluate import evaluate
from gradcli.lang.parser import parse
from gradcli.lang.program import load

runner = CliRunner()


def run_json(*args: str) -> dict:
    result = runner.invoke(app, [args[0], "--json", *args[1:]])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    "text, value",
    [
        ("exp(ge(y,x))", math.e),
        ("sin(eq(x,x))", math.sin(1.0)),
        ("-ge(y,x)", -1.0),
        ("sigmoid(lt(x,y))", 1 / (1 + math.exp(-1.0))),
        ("abs(ge(y,x))", 1.0),
        ("exp(ne(x,y)) + le(y,x) * 3", math.e),
        ("gt(x, y) - 0.5", -0.5),
    ],
)
def test_comparison_functions_give_float64_numbers(text, value):
    doc = run_json("eval", "--at", "x=1,y=2", "--", text)
    assert doc["value"] == value  # exactly the float64 result: not 2.71875 (float16), not true
    assert isinstance(doc["value"], float)
    assert doc["gradient"] == {"x": 0.0, "y": 0.0} or set(doc["gradient"].values()) == {0.0}


def test_comparisons_keep_the_float_dtype_of_their_inputs():
    for dtype in (np.float32, np.float64):
        x = gc.tensor(np.array([1.0, 2.0, 3.0], dtype=dtype))
        for text in ("ge(x, 2)", "x >= 2", "eq(2, x)", "2 == x"):
            out = evaluate(parse(text), {"x": x}).outputs[0]
            assert out.dtype == dtype, (text, out.dtype)
    out = evaluate(parse("lt(1, 2)"), {}).outputs[0]  # numbers: float64
    assert out.dtype == np.float64 and out.item() == 1.0


# The function form of every operator, and the operator form it must equal.
PAIRS = [
    ("add(a, b)", "a + b"),
    ("sub(a, b)", "a - b"),
    ("mul(a, b)", "a * b"),
    ("div(a, b)", "a / b"),
    ("pow(a, b)", "a ^ b"),
    ("remainder(a, b)", "a % b"),
    ("neg(a)", "-a"),
    ("lt(a, b)", "a < b"),
    ("le(a, b)", "a <= b"),
    ("gt(a, b)", "a > b"),
    ("ge(a, b)", "a >= b"),
    ("eq(a, b)", "a == b"),
    ("ne(a, b)", "a != b"),
    ("where(ge(a, b), a, b)", "a if a >= b else b"),
]
POINTS = [
    {"a": 1.5, "b": 0.5},
    {"a": 0.5, "b": 0.5},
    {"a": 0.25, "b": 2.0},
    {"a": [0.5, 1.5, 2.0], "b": [0.5, 1.0, 3.0]},
    {"a": [[0.5, 1.5], [2.0, 0.25]], "b": 1.5},
]


def test_every_operator_has_a_function_form_in_this_list():
    from gradcli.lang.functions import FUNCTIONS
    from gradcli.lang.parser import BINARY, COMPARE

    operators = {o for _, o in PAIRS for o in o.split() if not o.isidentifier()}
    assert set(BINARY) - {"**", "@"} <= operators | {"-"}
    assert operators >= COMPARE
    for function, _ in PAIRS:
        assert function.split("(")[0] in FUNCTIONS


@pytest.mark.parametrize("function, operator", PAIRS)
@pytest.mark.parametrize("point", POINTS, ids=lambda p: "x".join(map(str, np.shape(p["a"]))) or "scalar")
def test_function_and_operator_forms_agree(function, operator, point):
    values = {k: np.asarray(v, dtype=float) for k, v in point.items()}
    for wrapper in ("{}", "exp({})", "-({})", "sum([({0}), 2 * ({0})])"):
        f_text, o_text = wrapper.format(function), wrapper.format(operator)
        f = value_and_grad(load(f_text), values, ["a", "b"], seed="ones")
        o = value_and_grad(load(o_text), values, ["a", "b"], seed="ones")
        assert np.asarray(f.value).dtype == np.asarray(o.value).dtype == np.float64, (f_text, o_text)
        np.testing.assert_array_equal(f.value, o.value)
        for name in ("a", "b"):
            np.testing.assert_array_equal(f.gradient[name], o.gradient[name])


@pytest.mark.parametrize("function, operator", PAIRS)
def test_function_and_operator_forms_agree_symbolically(function, operator):
    for wrapper in ("{}", "({}) + a", "x if ({}) else 2*a"):
        f = symbolic_derivatives(load(wrapper.format(function)), ["a"])
        o = symbolic_derivatives(load(wrapper.format(operator)), ["a"])
        import sympy as sp

        assert sp.simplify(f["a"] - o["a"]) == 0, (wrapper, function, f, o)


@pytest.mark.parametrize("function, operator", PAIRS)
def test_function_and_operator_forms_agree_on_the_command_line(function, operator):
    at = "a=[0.5,1.5,2.0],b=[0.5,1.0,3.0]"
    f = run_json("eval", "--at", at, "--seed", "ones", "--", f"sin({function}) * a")
    o = run_json("eval", "--at", at, "--seed", "ones", "--", f"sin({operator}) * a")
    assert f == o


def test_diff_of_comparison_functions_runs():
    assert run_json("diff", "ge(x,1) + x")["derivative"] == {"x": "1"}
    assert run_json("diff", "atan2(ne(4,0), x)")["derivative"] == {"x": "-1/(x^2 + 1)"}


@pytest.mark.parametrize(
    "text, at, expected",
    [
        ("x if eq(x,1) else 2*x", "x=3", 2.0),
        ("x if eq(x,1) else 2*x", "x=1", 1.0),
        ("where(ge(x,1), x, 2)", "x=3", 1.0),
        ("where(ge(x,1), x, 2)", "x=0.5", 0.0),
        ("x * ge(x, 0) + le(x, 0)", "x=2", 1.0),
    ],
)
def test_check_accepts_the_right_gradient_through_comparison_functions(text, at, expected):
    result = runner.invoke(app, ["check", "--at", at, "--json", "--", text])
    doc = json.loads(result.stdout)
    assert result.exit_code == 0, result.output
    assert doc["ok"] is True and doc["gradient"] == {"x": expected}
    assert doc["checks"]["sympy"]["ok"] is True
