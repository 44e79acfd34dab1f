"""`check` and `--blame` through the functions that are not complex-analytic (issue 15): the complex
step is never used through them (central differences stand in, and the result says so), `check`
agrees where the derivative is right and finds a wrong hand derivative, and `--blame` names a
wrong rule in such a row."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcli import ops
from gradcli.cli.app import app
from gradcli.lang.functions import FUNCTIONS

runner = CliRunner()


def check(expr: str, *args: str) -> tuple[int, dict]:
    result = runner.invoke(app, ["check", expr, *args, "--json"])
    assert result.stdout.startswith("{"), result.output
    return result.exit_code, json.loads(result.stdout)


# (expression, point, variable, the right derivative, a wrong one, the function the reason names)
CASES = [
    ("floor(x)*x", "x=2.5", "x", "floor(x)", "floor(x) + 1", "floor"),
    ("ceil(x)*x", "x=2.5", "x", "ceil(x)", "x", "ceil"),
    ("round(x)*x", "x=2.3", "x", "round(x)", "2*x", "round"),
    ("trunc(x)*x", "x=-2.5", "x", "trunc(x)", "x", "trunc"),
    ("x % 0.7", "x=2", "x", "1", "0", "remainder"),
    ("7.5 % x", "x=2", "x", "-floor(7.5/x)", "floor(7.5/x)", "remainder"),
    ("remainder(x, 0.7) * x", "x=2", "x", "remainder(x, 0.7) + x", "x", "remainder"),
    ("abs(x)*x", "x=-1.5", "x", "2*abs(x)", "2*x", "abs"),
    ("sign(x)*x", "x=-2", "x", "sign(x)", "0", "sign"),
    ("relu(x)*x", "x=1.5", "x", "2*x", "x", "relu"),
    ("leaky_relu(x)*x", "x=-1.5", "x", "0.02*x", "2*x", "leaky_relu"),
    ("elu(x)", "x=-0.5", "x", "exp(x)", "1", "elu"),
    ("max(x, 2)*x", "x=3", "x", "2*x", "x", "max"),
    ("min(x, 2)*x", "x=3", "x", "2", "2*x", "min"),
    ("maximum(x, y)", "x=1,y=2", "y", "1", "0", "maximum"),
    ("minimum(x, y)", "x=1,y=2", "x", "1", "0", "minimum"),
    ("max(v)*2", "v=[1,3,2]", "v", "[0, 2, 0]", "[2, 0, 0]", "max"),
    ("min(v)*2", "v=[1,3,2]", "v", "[2, 0, 0]", "[0, 2, 0]", "min"),
    ("clamp(x, 0, 1)*x", "x=0.5", "x", "2*x", "x", "clamp"),
    ("clamp(x, lo, hi)", "x=2,lo=0,hi=1", "hi", "1", "0", "clamp"),
    ("argmax(v)*sum(v)", "v=[1,3,2]", "v", "[1, 1, 1]", "[0, 0, 0]", "argmax"),
    ("argmin(v)*sum(v)", "v=[1,3,2]", "v", "0*v", "v", "argmin"),
    ("var(v)", "v=[1,2,4]", "v", "v - mean(v)", "v", "var"),
    ("std(v)", "v=[1,2,4]", "v", "(v - mean(v))/(2*std(v))", "v", "std"),
    ("cbrt(x)", "x=-8", "x", "1/(3*cbrt(x)^2)", "1/(3*x)", "cbrt"),
    ("hypot(x, 4)", "x=3", "x", "x/5", "4/5", "hypot"),
    ("atan2(y, 2)", "y=1", "y", "2/(y^2 + 4)", "1/(y^2 + 4)", "atan2"),
    ("sum(topk(v, 2))", "v=[3,1,2]", "v", "[1, 0, 1]", "[1, 1, 0]", "topk"),
    ("sum(sort(v) * [1, 2, 3])", "v=[3,1,2]", "v", "[3, 1, 2]", "[1, 2, 3]", "sort"),
]


def _ids(case):
    return case[0]


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_check_matches_through_a_function_that_is_not_complex_analytic(case):
    expr, at, name, right, _, function = case
    code, doc = check(expr, "--at", at, "--expect", f"{name}={right}")
    assert code == 0, doc["verdict"]
    assert doc["checks"]["expect"]["ok"] is True and doc["checks"]["finite_difference"]["ok"] is True
    reason = doc["checks"]["complex_step"]["reason"]
    assert reason.startswith("skipped: ") and "is not complex-analytic: central differences" in reason, reason
    assert reason.split()[1].rstrip("()") in (function, "amax", "amin") or function in reason, reason


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_check_finds_a_wrong_hand_derivative_through_it(case):
    expr, at, name, _, wrong, _ = case
    code, doc = check(expr, "--at", at, "--expect", f"{name}={wrong}")
    assert code == 1
    assert doc["checks"]["expect"]["ok"] is False
    assert doc["verdict"].startswith(f"MISMATCH: d/d{name}")


def test_every_function_that_is_not_complex_analytic_has_a_case():
    """The generated test below takes each one with a first form of one input, or elementwise;
    the others need a case here."""
    covered = {case[5] for case in CASES}
    missing = [
        name
        for name, f in FUNCTIONS.items()
        if not f.analytic and min(f.arities) > 1 and min(f.arities) not in f.elementwise and name not in covered
    ]
    assert missing == [], "add a case to CASES for each"


@pytest.mark.parametrize("name", sorted(n for n, f in FUNCTIONS.items() if not f.analytic))
def test_the_table_keeps_the_complex_step_away_from_each_such_function(name):
    """Generated from the table, so a row added later is held to it too: at a smooth point of its
    domain, check runs central differences instead of the complex step and agrees."""
    f = FUNCTIONS[name]
    prim = f.primitive
    arity = min(f.arities)
    if f.elementwise and arity in f.elementwise:
        points = [prim.domain_of(i) if prim else (-3.0, 3.0) for i in range(arity)]
        names = ["a", "b", "c"][:arity]
        # a different place in each input's interval: maximum(a, b) with a = b is a tie
        at = ",".join(
            f"{n}={lo + (0.37 + 0.24 * i) * (hi - lo)!r}" for i, (n, (lo, hi)) in enumerate(zip(names, points))
        )
        expr = f"{name}({', '.join(names)})"
    elif arity == 1:
        lo, hi = prim.domain_of(0) if prim else (-3.0, 3.0)
        at = "a=[" + ",".join(repr(lo + t * (hi - lo)) for t in (0.37, 0.81, 0.55)) + "]"
        expr = f"sum({name}(a) * [1, 2, 3])"
    else:
        pytest.skip(f"{name} needs arguments of its own: give it a case in CASES")
    code, doc = check(expr, "--at", at, "--method", "complex")
    assert code == 0, doc["verdict"]
    assert doc["checks"]["finite_difference"]["ok"] is True
    assert "is not complex-analytic: central differences" in doc["checks"]["complex_step"]["reason"]
    # a hand derivative off by one is found
    wrong = np.asarray(doc["gradient"]["a"], dtype=float) + 1.0
    code, doc = check(expr, "--at", at, "--method", "complex", "--expect", f"a={json.dumps(wrong.tolist())}")
    assert code == 1 and doc["verdict"].startswith("MISMATCH: d/da")


def test_only_the_complex_step_asked_for_falls_back_to_central_differences():
    result = runner.invoke(app, ["check", "floor(x)*x", "--at", "x=2.5", "--method", "complex"])
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "      autograd  finite differences  abs err  rel err  ok",
        "d/dx         2                   2        0        0  ok",
        "complex step: skipped: floor (FloorBackward0) is not complex-analytic: "
        "central differences (with their kink search) check the gradient instead",
        "OK: autograd agrees with finite differences (largest relative error 0)",
    ]


def test_argmax_records_no_node_but_the_complex_step_still_keeps_away():
    code, doc = check("argmax([x, 1]) * x", "--at", "x=2")
    assert code == 0
    assert doc["checks"]["complex_step"]["reason"].startswith("skipped: argmax() is not complex-analytic")


def test_analytic_functions_still_get_the_complex_step():
    code, doc = check("sin(x) * exp(x)", "--at", "x=0.5")
    assert code == 0 and doc["checks"]["complex_step"]["ok"] is True


# --- --blame names a wrong rule in a row that is not complex-analytic -------------------------------


def _wrong(prim):
    """The primitive with its first input's reverse rule off by 7 g (restored after)."""
    return prim.vjp, (lambda g, out, *args: g * 7.0,) + prim.vjp[1:]


@pytest.mark.parametrize(
    ("prim", "expr", "at", "shown"),
    [
        (ops.FLOOR, "floor(x)*x", "x=2.5", "FloorBackward0 (floor(x))"),
        (ops.ROUND, "round(x) + x", "x=2.3", "RoundBackward0 (round(x))"),
        (ops.SIGN, "sign(x)*x", "x=-2", "SignBackward0 (sign(x))"),
        (ops.RELU, "relu(x)*x", "x=1.5", "ReluBackward0 (relu(x))"),
        (ops.REMAINDER, "x % 0.7", "x=2", "RemainderBackward0 (x % 0.7)"),
        (ops.ABS, "abs(x) * x", "x=-1.5", "AbsBackward0 (abs(x))"),
        (ops.MAXIMUM, "maximum(x, 2) * x", "x=3", "MaximumBackward0 (maximum(x, 2))"),
    ],
    ids=lambda v: v.name if isinstance(v, ops.Primitive) else None,
)
def test_blame_names_a_wrong_rule_in_a_row_that_is_not_complex_analytic(prim, expr, at, shown):
    old, wrong = _wrong(prim)
    object.__setattr__(prim, "vjp", wrong)
    try:
        result = runner.invoke(app, ["check", expr, "--at", at, "--blame"])
    finally:
        object.__setattr__(prim, "vjp", old)
    assert result.exit_code == 1
    blame = [line for line in result.stdout.splitlines() if line.startswith("blame: ")]
    assert len(blame) == 1 and f": {shown} computes a wrong derivative" in blame[0], blame


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_blame_finds_nothing_wrong_in_the_rows_as_they_are(case):
    expr, at, *_ = case
    result = runner.invoke(app, ["check", expr, "--at", at, "--blame"])
    assert result.exit_code == 0, result.output
    assert any(line.startswith("blame: the derivatives of all") for line in result.stdout.splitlines())


def test_a_zero_derivative_is_judged_by_blame():
    """floor's rule gives 0; finite differences of floor give 0 with an error of ~1e-13. That
    estimate is converged for judging a backward of 7 (it was not, relative to 0 alone)."""
    from gradcli import tensor
    from gradcli.autograd.tape import recording
    from gradcli.check.blame import blame_nodes

    old, wrong = _wrong(ops.FLOOR)
    object.__setattr__(ops.FLOOR, "vjp", wrong)
    try:
        x = tensor(2.5, requires_grad=True)
        with recording() as tape:
            (x.floor() * x).sum()
        found, checked = blame_nodes(tape)
    finally:
        object.__setattr__(ops.FLOOR, "vjp", old)
    assert found is not None and found.op == "floor" and checked >= 1
    assert np.isclose(found.numeric, 0.0)


# --- which rows say they are not complex-analytic ----------------------------------------------------

PIECEWISE = ["floor", "ceil", "round", "trunc", "remainder", "abs", "sign", "relu", "leaky_relu", "elu", "maximum",
             "minimum", "clamp", "clamp_tensor", "max", "min", "sort", "topk", "argmax", "argmin", "lt", "eq"]  # fmt: skip


@pytest.mark.parametrize("name", PIECEWISE)
def test_piecewise_rows_are_not_complex_analytic(name):
    """abs-like rows (issue 15): their primitive and their language function both say so; sort and
    topk once they are in the table."""
    if name not in ops.PRIMITIVES and name not in FUNCTIONS:
        pytest.skip(f"{name} is not in the table yet")
    if name in ops.PRIMITIVES:
        assert ops.PRIMITIVES[name].analytic is False
    if name in FUNCTIONS:
        assert FUNCTIONS[name].analytic is False


def test_gelu_is_complex_analytic_and_the_complex_step_would_be_exact():
    """gelu is x (1 + erf(x / sqrt 2)) / 2, erf entire: it stays analytic (unlike relu, elu).
    The complex step (with mpmath's complex erf) gives its derivative to rounding."""
    mpmath = pytest.importorskip("mpmath", reason="the reference values come from mpmath (installed with SymPy)")
    assert ops.GELU.analytic is True and FUNCTIONS["gelu"].analytic is True
    x, h = 0.3, 1e-30
    with mpmath.workdps(50):
        z = mpmath.mpc(x, h)
        step = float(mpmath.im(z * (1 + mpmath.erf(z / mpmath.sqrt(2))) / 2) / h)
    rule = float(ops.GELU.vjp[0](1.0, None, np.float64(x)))
    assert step == pytest.approx(rule, rel=1e-14)
