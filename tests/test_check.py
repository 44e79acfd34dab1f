"""gradcli check and gradcli.testing: right answers pass, wrong ones fail, and the figures are honest."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.check import check, symbolic
from gradcli.check.numeric import complex_step, finite_differences
from gradcli.cli.app import app
from gradcli.lang.program import load

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
BUGGY = str(EXAMPLES / "check" / "buggy_function.py")


def run(*args: str):
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output + result.stderr, result.output + result.stderr
    return result


def run_json(*args: str, code: int = 0) -> dict:
    result = run("check", *args, "--json")
    assert result.exit_code == code, result.output + result.stderr
    return json.loads(result.stdout)


def checked(expression: str, **values: object):
    return check(load(expression), {k: np.asarray(v, dtype=float) for k, v in values.items()})


# --- agreement, and the JSON contract ----------------------------------------------------------


def test_seed_002_agrees_every_way_and_json_has_the_spec_keys():
    doc = run_json("(x + w) * (w + 1)", "--at", "x=2,w=1", "--expect", "x=w + 1", "--expect", "w=x + 2*w + 1")
    assert doc["ok"] is True
    assert doc["gradient"] == {"x": 2.0, "w": 5.0}
    assert set(doc["checks"]) == {"sympy", "finite_difference", "complex_step", "expect"}
    for method in doc["checks"].values():
        assert method["ok"] is True
        assert {"ok", "max_abs_error", "max_rel_error"} <= set(method)
        assert method["max_rel_error"] < 1e-12
    assert doc["checks"]["sympy"]["values"] == {"x": 2.0, "w": 5.0}


def test_human_output_is_a_table_and_a_verdict():
    result = run("check", "x^2 * y", "--at", "x=2,y=3", "--expect", "x=2*x*y")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "      autograd  sympy  finite differences  complex step  expected  abs err  rel err  ok",
        "d/dx        12     12                  12            12        12        0        0  ok",
        "d/dy         4      4                   4             4                  0        0  ok",
        "OK: autograd agrees with sympy, finite differences, complex step, expected (largest relative error 0)",
    ]


@pytest.mark.parametrize(
    "formula, why",
    [("2*x*y + 1", "off by a constant"), ("-2*x*y", "wrong sign"), ("2*x*y*(1 + 1e-6)", "1e-6 relative")],
)
def test_a_wrong_hand_derivative_fails_with_exit_1(formula, why):
    result = run("check", "x^2 * y", "--at", "x=2,y=3", "--expect", f"x={formula}")
    assert result.exit_code == 1, why
    assert "MISMATCH: d/dx: autograd 12 but the expected formula gives" in result.stdout
    doc = run_json("x^2 * y", "--at", "x=2,y=3", "--expect", f"x={formula}", code=1)
    assert doc["ok"] is False and doc["checks"]["expect"]["ok"] is False
    assert all(doc["checks"][m]["ok"] is True for m in ("sympy", "finite_difference", "complex_step"))


def test_every_method_catches_an_error_of_1e_minus_6_relative():
    """No false passes: each reference is accurate enough to see a 1e-6 relative error."""
    result = checked("exp(sin(x)) * y", x=0.7, y=1.3)
    g = result.gradient["x"]
    for method in ("sympy", "finite_difference", "complex_step"):
        reference = result.checks[method].values["x"]
        assert abs(reference - g) < 1e-9 * abs(g), method  # far inside 1e-6
    assert result.rtol <= 1e-7


def test_multi_statement_programs_and_arrays_with_the_worst_element_named():
    doc = run_json("a = x * y; b = sin(a); b + a^2", "--at", "x=0.5,y=-1.5")
    assert doc["ok"] is True
    a = 0.5 * -1.5
    assert doc["gradient"]["x"] == pytest.approx((np.cos(a) + 2 * a) * -1.5, rel=1e-15)
    doc = run_json("sum(v^3)", "--at", "v=[1,2,3]", "--expect", "v=3*v^2 + [0, 0, 1e-3]", code=1)
    assert doc["checks"]["expect"]["worst"] == "v[2]"
    assert doc["gradient"]["v"] == [3.0, 12.0, 27.0]
    result = run("check", "sum(sin(v)^2)", "--at", "v=[" + ",".join(str(i) for i in range(1, 15)) + "]")
    assert result.exit_code == 0
    assert "14 elements: the worst of each variable shown" in result.stdout


def test_matrix_programs():
    doc = run_json("x @ A @ x", "--at", "x=[1,2]", "--at", "A=[[1,2],[3,4]]")
    assert doc["ok"] is True
    assert doc["gradient"]["x"] == [12.0, 21.0]  # (A + A^T) x
    assert doc["gradient"]["A"] == [[1.0, 2.0], [2.0, 4.0]]  # x x^T


def test_non_scalar_output_with_a_seed():
    doc = run_json("x * x", "--at", "x=[1,2]", "--seed", "ones")
    assert doc["ok"] is True and doc["gradient"] == {"x": [2.0, 4.0]}
    result = run("check", "x * x", "--at", "x=[1,2]")
    assert result.exit_code == 2 and "--seed" in result.stderr


# --- kinks, ill-conditioned points, non-finite values ------------------------------------------


def test_abs_at_zero_is_reported_as_not_differentiable_and_passes():
    doc = run_json("abs(x)", "--at", "x=0")
    assert doc["ok"] is True
    assert doc["not_differentiable"] == [
        {"element": "x", "left": -1.0, "right": 1.0, "autograd": 0.0, "subgradient": True}
    ]
    complex_ = doc["checks"]["complex_step"]
    assert complex_["ok"] is None and "abs" in complex_["reason"] and "complex-analytic" in complex_["reason"]
    assert doc["verdict"].startswith("OK: not differentiable here")


@pytest.mark.parametrize(
    "expression, point, left, right",
    [("relu(x)", "x=0", 0.0, 1.0), ("max(x, y)", "x=1,y=1", 0.0, 1.0), ("abs(x - 1) * 3", "x=1", -3.0, 3.0)],
)
def test_kinks_give_one_sided_derivatives(expression, point, left, right):
    doc = run_json(expression, "--at", point)
    kink = doc["not_differentiable"][0]
    assert (kink["left"], kink["right"]) == pytest.approx((left, right), abs=1e-9)
    assert kink["subgradient"] is True and doc["ok"] is True
    assert doc["checks"]["complex_step"]["ok"] is None


class _AbsWithWrongBackward(gc.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return gc.abs(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * 3.0  # |x| has slopes -1 and 1: 3 is no subgradient


def test_a_value_outside_the_one_sided_derivatives_fails():
    from gradcli.lang.program import Program

    program = Program("bad_abs", function=lambda x: _AbsWithWrongBackward.apply(x))
    result = check(program, {"x": np.asarray(0.0)})
    assert not result.ok
    (kink,) = result.kinks
    assert (kink.left, kink.right, kink.autograd, kink.subgradient) == (-1.0, 1.0, 3.0, False)
    assert result.verdict().startswith("MISMATCH: x: not differentiable here")


def test_a_function_smooth_on_each_side_of_zero_is_differentiable():
    """x*relu(x) is differentiable at 0 (derivative 0) though its second derivative jumps."""
    doc = run_json("x * relu(x)", "--at", "x=0")
    assert doc["ok"] is True and "not_differentiable" not in doc
    assert abs(doc["checks"]["finite_difference"]["values"]["x"]) < 1e-12


@pytest.mark.parametrize(
    "expression, point",
    [
        ("sqrt(x)", "x=1e-12"),  # the step must shrink to the scale of x
        ("log(x)", "x=1e-8"),
        ("1/(x - 1)", "x=1.0001"),  # a pole nearby
        ("tan(x)", "x=1.5707"),  # and a pole 1e-4 away
        ("sin(1000*x)", "x=0.3"),  # fast oscillation
        ("exp(x)", "x=700"),  # near overflow
        ("x^10", "x=1e5"),
        ("atan(x)", "x=1e20"),  # a derivative of 1e-40
        ("(exp(x) - 1 - x) / x^2", "x=1e-3"),  # autograd itself loses digits here
        ("x^1.5", "x=0"),  # undefined to the left
    ],
)
def test_no_false_failures_at_ill_conditioned_points(expression, point):
    doc = run_json(expression, "--at", point)
    assert doc["ok"] is True, doc["verdict"]


def test_cancellation_is_explained_not_hidden():
    doc = run_json("(exp(x) - 1 - x) / x^2", "--at", "x=1e-3")
    assert any("rounding error" in note for note in doc["notes"])
    # the rounding allowance is not a blank cheque: a 1e-5 error still fails
    bad = "(exp(x) - 1)/x^2 - 2*(exp(x) - 1 - x)/x^3 + 2e-6"
    assert run_json("(exp(x) - 1 - x) / x^2", "--at", "x=1e-3", "--expect", f"x={bad}", code=1)["ok"] is False


def test_non_finite_values_fail_with_exit_1():
    doc = run_json("log(x)", "--at", "x=-1", code=1)
    assert doc["ok"] is False and "nan" in doc["nonfinite"]
    assert doc["checks"]["finite_difference"]["ok"] is None
    result = run("check", "1/x", "--at", "x=0")
    assert result.exit_code == 1 and "FAILED" in result.stdout


def test_complex_step_is_skipped_where_the_function_is_not_real_valued():
    estimate = complex_step(lambda p: np.sqrt(p), np.array([4.0]), f0=np.array([2.0]))
    assert estimate.value[0, 0] == 0.25
    with pytest.raises(ValueError, match="not real-valued"):
        complex_step(lambda p: np.sqrt(p + 0j), np.array([-4.0]), f0=np.array([np.nan]))


# --- the numerical methods themselves ----------------------------------------------------------


def test_finite_differences_are_accurate_and_their_error_estimate_is_honest():
    x0 = np.array([0.3, -1.1, 2.5])

    def f(points):
        return np.stack([np.sin(points[:, 0]) * np.exp(points[:, 1]) + points[:, 2] ** 3], axis=1)

    estimate = finite_differences(f, x0, f(x0[None, :])[0])
    exact = np.array([np.cos(0.3) * np.exp(-1.1), np.sin(0.3) * np.exp(-1.1), 3 * 2.5**2])
    actual = np.abs(estimate.value[0] - exact)
    assert actual.max() < 1e-10 * np.abs(exact).max()
    assert np.all(actual <= 3 * estimate.error[0] + 1e-15)  # the estimate bounds the real error
    assert not estimate.kink.any()


def test_finite_differences_evaluate_f_in_a_few_batched_calls():
    calls = []

    def f(points):
        calls.append(points.shape)
        return np.sum(np.sin(points), axis=1, keepdims=True)

    x0 = np.linspace(0.1, 1.0, 50)
    estimate = finite_differences(f, x0, f(x0[None, :])[0])
    assert np.allclose(estimate.value[0], np.cos(x0), rtol=1e-10)
    assert len(calls) - 1 <= 2  # one batch of 400 points, perhaps one more round
    assert calls[1] == (50 * 4 * 2, 50)


def test_complex_step_is_exact():
    x0 = np.array([0.7])
    estimate = complex_step(lambda p: np.exp(np.sin(p)), x0)
    assert estimate.value[0, 0] == pytest.approx(np.cos(0.7) * np.exp(np.sin(0.7)), rel=1e-15)


def test_float32_tolerances_follow_the_dtype():
    program = load("exp(x) * sin(x)")
    result = check(program, {"x": np.float32(0.7)})
    assert result.ok, result.verdict()
    assert result.rtol == 3e-3
    assert result.gradient["x"] == pytest.approx(np.exp(0.7) * (np.sin(0.7) + np.cos(0.7)), rel=1e-6)
    wrong = check(program, {"x": np.float32(0.7)}, expect={"x": "exp(x) * (sin(x) + cos(x)) * 1.01"})
    assert not wrong.ok


# --- SymPy limits, Python functions, blame -----------------------------------------------------


def test_sympy_is_skipped_with_a_reason_when_the_expression_is_too_large(monkeypatch):
    monkeypatch.setattr(symbolic, "MAX_NODES", 10)
    doc = run_json("sin(x) * cos(x) + exp(x) * x^3", "--at", "x=0.5")
    assert doc["checks"]["sympy"]["ok"] is None
    assert "SymPy nodes (limit 10)" in doc["checks"]["sympy"]["reason"]
    assert doc["ok"] is True  # the other methods still judge


def test_sympy_time_limit_interrupts_a_slow_derivative(monkeypatch):
    from gradcli.lang import symcore

    monkeypatch.setattr(symcore, "scalar_gradient", lambda *args: None)  # SymPy's road: SymEngine answers in time
    terms = " + ".join(f"sin({i}*x + y)*exp(x*{i})" for i in range(1, 200))
    doc = run_json(terms, "--at", "x=0.1,y=0.2", "--sympy-timeout", "0.05")
    assert doc["checks"]["sympy"]["ok"] is None
    assert doc["checks"]["sympy"]["reason"] == "skipped: SymPy took more than 0.05 s (--sympy-timeout raises the limit)"
    assert doc["ok"] is True and doc["checks"]["finite_difference"]["ok"] is True


def test_python_functions_skip_sympy_and_still_check():
    doc = run_json(f"{EXAMPLES / 'cli' / 'seed004_f.py'}:f", "--at", "a=0.7")
    assert doc["checks"]["sympy"]["ok"] is None
    assert "Python function" in doc["checks"]["sympy"]["reason"]
    assert doc["checks"]["finite_difference"]["ok"] is True
    assert doc["ok"] is True


def test_the_buggy_custom_function_fails_and_blame_names_it():
    doc = run_json(f"{BUGGY}:f", "--at", "x=0.5,y=2", "--blame", code=1)
    assert doc["checks"]["finite_difference"]["ok"] is False
    assert doc["checks"]["complex_step"]["ok"] is None
    blame = doc["blame"]
    assert blame["grad_fn"] == "SoftClipBackward" and blame["op"] == "SoftClip"
    # y = x/(1+|x|) at x*y = 1: the wrong backward gives 1/(1+1), the right one 1/(1+1)^2, so twice as much
    assert blame["autograd"] == pytest.approx(2 * blame["finite_difference"], rel=1e-6)
    result = run("check", f"{BUGGY}:f", "--at", "x=0.5,y=2", "--blame")
    assert result.exit_code == 1 and "blame: node n4: SoftClipBackward (SoftClip(n3))" in result.stdout


def test_blame_finds_nothing_in_a_correct_program():
    doc = run_json("sin(x) * exp(y) / (1 + x^2)", "--at", "x=0.3,y=0.2", "--blame")
    assert doc["blame"] is None and doc["ok"] is True


def test_graph_blame_marks_the_node():
    result = run("graph", f"{BUGGY}:f", "--at", "x=0.5,y=2", "--blame", "--format", "json")
    assert result.exit_code == 0
    blamed = [n for n in json.loads(result.stdout)["nodes"] if n.get("blamed")]
    assert [n["grad_fn"] for n in blamed] == ["SoftClipBackward"]
    assert "blame: node n4 (SoftClip(n3)), marked in red" in result.stderr


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (["x^2", "--at", "x=1", "--expect", "x"], "--expect expects VAR=EXPR"),
        (["x^2", "--at", "x=1", "--expect", "z=2*z"], "'z' is not one of the variables checked"),
        (["x^2", "--at", "x=1", "--expect", "x=2*x", "--expect", "x=2*x"], "--expect x is given twice"),
        (["x^2", "--at", "x=1", "--method", "newton"], "--method 'newton': use sympy, fd, complex"),
        (["x^2", "--at", "x=1", "--rtol", "-1"], "--rtol must be a finite number >= 0"),
        (["x^2", "--at", "x=1", "--sympy-timeout", "0"], "--sympy-timeout must be a positive number of seconds"),
        (
            ["sum(x^2)", "--at", "x=[1,2]", "--expect", "x=[1,2,3]"],
            "the formula gives shape (3,), but x has shape (2,)",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(args, message):
    result = run("check", *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_missing_value_is_bad_input():
    result = run("check", "x^2")
    assert result.exit_code == 2 and "missing value for 'x': give it with --at x=..." in result.stderr


def test_a_syntax_error_in_an_expected_formula_has_a_caret():
    result = run("check", "x^2", "--at", "x=1", "--expect", "x=2*(x")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert "expected ')' to close '('" in lines[0]
    assert any(line.strip() == "2*(x" for line in lines) and any(line.strip() == "^" for line in lines)


def test_only_sympy_on_a_python_function_checks_nothing_and_says_so():
    result = run("check", f"{BUGGY}:f", "--at", "x=0.5,y=2", "--method", "sympy")
    assert result.exit_code == 1
    assert "NOTHING CHECKED" in result.stdout


# --- gradcli.testing ----------------------------------------------------------------------------


def _buggy():
    import importlib.util

    spec = importlib.util.spec_from_file_location("buggy_function", BUGGY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SoftClip


def test_assert_grad_close_passes_on_correct_functions():
    x = gc.tensor([0.3, -1.2, 2.0], requires_grad=True)
    y = gc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    gc.testing.assert_grad_close(lambda x: gc.sin(x) * x, x)
    gc.testing.assert_grad_close(lambda x, y: (gc.sin(x) * y, (x @ y) ** 2), (x, y))
    gc.testing.assert_grad_close(lambda x: gc.relu(x) * x, gc.tensor([0.0, 1.0], requires_grad=True))
    gc.testing.assert_grad_close(
        lambda x: gc.exp(x).sum() * x, gc.tensor([0.3, -1.2], dtype="float32", requires_grad=True)
    )


def test_assert_grad_close_follows_python_control_flow():
    def doubling(x):
        y = x * 2
        while y.norm() < 10:
            y = y * 2
        return y

    gc.testing.assert_grad_close(doubling, gc.tensor([1.0, 1.0, 1.0], requires_grad=True))


def test_assert_grad_close_names_output_input_and_element_of_a_wrong_backward():
    soft_clip = _buggy()
    x = gc.tensor([0.3, -1.2, 2.0], requires_grad=True)
    with pytest.raises(AssertionError) as failure:
        gc.testing.assert_grad_close(lambda x: soft_clip.apply(x), x)
    message = str(failure.value)
    assert message.startswith("Jacobian mismatch for output 0 with respect to input 0: d out[2]/d in[2] is ")
    assert "0.3333333333333333 by autograd but 0.111111111111" in message
    assert "finite differences:" in message and "autograd:" in message


def test_assert_grad_close_holds_constant_inputs_that_do_not_require_grad():
    w = gc.tensor([2.0, 3.0])  # a constant
    x = gc.tensor([0.5, 0.25], requires_grad=True)
    gc.testing.assert_grad_close(lambda x, w: gc.sum(x * w) ** 2, (x, w))


def test_assert_grad_close_rejects_complex_step_where_it_is_invalid():
    with pytest.raises(ValueError, match="not complex-analytic"):
        gc.testing.assert_grad_close(lambda x: gc.abs(x), gc.tensor([1.0], requires_grad=True), method="complex")
    gc.testing.assert_grad_close(lambda x: gc.tanh(x) ** 2, gc.tensor([0.4], requires_grad=True), method="complex")


# --- no false failures over the whole table -------------------------------------------------------


def _elementwise_functions():
    from gradcli.lang.functions import FUNCTIONS

    return [
        f
        for f in FUNCTIONS.values()
        if f.primitive is not None and f.primitive.elementwise and f.primitive.differentiable
    ]


@pytest.mark.parametrize("function", _elementwise_functions(), ids=lambda f: f.name)
def test_every_elementwise_function_checks_clean_inside_its_domain(function):
    prim = function.primitive
    names = ["x", "y", "z"][: function.arities[0]]
    expression = f"{function.name}({', '.join(names)})"
    for fraction in (0.2, 0.55, 0.9):
        values = {}
        for i, name in enumerate(names):
            lo, hi = prim.domain_of(i)
            values[name] = np.asarray(lo + (hi - lo) * (fraction + 0.07 * i))
        if not prim.analytic and (
            abs(values["x"]) < 0.05 or (len(names) > 1 and abs(values["x"] - values["y"]) < 0.05)
        ):
            continue  # a kink: tested above
        result = check(load(expression), values)
        assert result.ok, f"{expression} at {values}: {result.verdict()}"
        assert result.checks["finite_difference"].ok is True


# --- the batched replay under finite differences and the complex step ------------------------------

REPLAYED = [
    ("sum(A @ x)", {"A": [[1.0, 2.0, 0.5], [3.0, -1.0, 2.0]], "x": [0.3, -0.7, 1.1]}),
    ("sum(x[1:] * x[:-1]) + x[0]^3", {"x": [0.3, -0.7, 1.1, 2.0]}),
    ("mean(exp(A), 0) @ x", {"A": [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], "x": [1.0, 2.0, 3.0]}),
    ("logsumexp(x) + norm(x) + prod(x) + max(x)", {"x": [0.3, -0.7, 1.1]}),
    ("sum(where(x > 0, x^2, -x)) + dot(x, x)", {"x": [0.3, -0.7, 1.1]}),
    ("[x[0], x[1] * 2, sum(x)] @ [1, 2, 3]", {"x": [0.3, -0.7]}),
    ("v = A @ x; w = tanh(v); sum(w * v) if x[0] > 0 else sum(v)", {"A": [[1.0, 2.0], [3.0, 4.0]], "x": [0.1, 0.2]}),
    ("sum(clamp(x, y, 1))", {"x": [0.3, -0.7, 1.5], "y": [-0.5, -0.5, -0.5]}),
    ("sum(max(A, 1)) + sum(sum(A, 1) * x)", {"A": [[0.1, 2.0], [3.0, 0.4]], "x": [0.5, 0.6]}),
]


@pytest.mark.parametrize("expression, point", REPLAYED, ids=[e for e, _ in REPLAYED])
def test_replay_evaluates_a_batch_as_each_point_would(expression, point):
    from gradcli.check.run import Recorded

    program = load(expression)
    values = {k: np.asarray(v) for k, v in point.items()}
    recorded = Recorded(program, values, list(values), None)
    rng = np.random.default_rng(1)
    points = recorded.x0 + 0.01 * rng.standard_normal((5, recorded.x0.size))
    batched = recorded.evaluate(points)
    one_by_one = recorded._call_each_expression(points)
    np.testing.assert_allclose(batched, one_by_one, rtol=1e-13, atol=1e-13)
    complex_points = points + 1e-20j
    np.testing.assert_allclose(recorded.evaluate(complex_points).real, one_by_one, rtol=1e-13, atol=1e-13)


# --- a review's findings: no false passes, no false failures -----------------------------------

POLES = [
    ("x^-2", "x=1e-6", -2e18),
    ("1/x^2", "x=-1e-6", 2e18),
    ("1/x", "x=1e-9", -1e18),
    ("log(x^2)", "x=1e-9", 2e9),
    ("sqrt(x)", "x=1e-30", 5e14),
    ("1/(x-1)", "x=1.000001", -1e12),
    ("log(1+x^2)", "x=1e-8", 2e-8),
]


@pytest.mark.parametrize("expression, point, derivative", POLES, ids=[e for e, _, _ in POLES])
def test_near_a_pole_or_far_below_1_a_correct_gradient_passes_and_no_kink_is_invented(expression, point, derivative):
    doc = run_json(expression, "--at", point)
    assert doc["ok"] is True, doc["verdict"]
    assert "not_differentiable" not in doc
    assert doc["gradient"]["x"] == pytest.approx(derivative, rel=1e-5)
    assert doc["checks"]["complex_step"]["ok"] is True
    assert doc["checks"]["sympy"]["ok"] is True


def test_finite_differences_that_lose_digits_inside_are_inconclusive_where_exact_methods_agree():
    doc = run_json("log(1+x^2)", "--at", "x=1e-8")
    assert doc["checks"]["finite_difference"]["ok"] is None
    assert doc["checks"]["finite_difference"]["reason"].startswith("inconclusive")


def test_a_custom_backward_wrong_at_a_pole_fails(tmp_path):
    source = tmp_path / "pole.py"
    source.write_text(
        "import gradcli as gc\n"
        "class InvSq(gc.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        return 1 / (x * x)\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return g * 0\n"
        "def f(x):\n"
        "    return InvSq.apply(x)\n"
    )
    doc = run_json(f"{source}:f", "--at", "x=1e-6", code=1)
    assert doc["checks"]["finite_difference"]["ok"] is False
    assert doc["checks"]["finite_difference"]["values"]["x"] == pytest.approx(-2e18, rel=1e-6)


@pytest.mark.parametrize(
    "args",
    [("sin(exp(x))", "--at", "x=40", "--method", "fd"), ("sin(1e20*x)", "--at", "x=1")],
    ids=["sin(exp(x))", "sin(1e20x)"],
)
def test_where_no_method_can_judge_the_verdict_is_inconclusive_and_exit_1(args):
    doc = run_json(*args, code=1)
    assert doc["ok"] is False
    assert doc["verdict"].startswith("INCONCLUSIVE")


def test_atol_scales_with_the_gradient_so_tiny_problems_are_checked():
    doc = run_json("1e-20*x^2", "--at", "x=1", "--expect", "x=-2e-20", code=1)
    assert doc["checks"]["expect"]["ok"] is False
    assert doc["atol"] == pytest.approx(2e-32)
    assert doc["checks"]["expect"]["max_rel_error"] == pytest.approx(2.0)


@pytest.mark.parametrize("tolerance", [-1.0, float("nan"), float("inf")])
def test_the_api_refuses_negative_or_non_finite_tolerances(tolerance):
    with pytest.raises(gc.errors.UsageError, match="rtol must be a finite number >= 0"):
        check(load("x^2"), {"x": np.array(2.0)}, rtol=tolerance)
    with pytest.raises(ValueError, match="atol must be a finite number >= 0"):
        gc.testing.assert_grad_close(gc.sin, gc.tensor(1.0, requires_grad=True), atol=tolerance)


@pytest.mark.parametrize("value", [1 + 2j, True])
def test_the_api_refuses_complex_and_bool_points(value):
    with pytest.raises(gc.errors.UsageError, match="check needs real numbers"):
        check(load("x^2"), {"x": value})


def test_e_and_pi_given_values_are_variables_for_sympy_too():
    assert run_json("x*e", "--at", "x=2,e=3", "--wrt", "x,e")["gradient"] == {"x": 3.0, "e": 2.0}
    assert run_json("pi*x", "--at", "x=2,pi=3")["checks"]["sympy"]["values"] == {"pi": 2.0, "x": 3.0}


def test_a_sympy_nan_where_the_function_is_defined_is_skipped_with_a_reason():
    doc = run_json("x^y", "--at", "x=0,y=2")
    assert doc["ok"] is True
    assert "undefined (nan)" in doc["checks"]["sympy"]["reason"]


def test_an_expected_formula_with_two_values_is_bad_input():
    result = run("check", "x^2", "--at", "x=2", "--expect", "x=1,2")
    assert result.exit_code == 2
    assert result.stderr == "error: --expect x: the formula must give one value, not 2\n"


def test_a_user_function_misusing_autograd_is_bad_input_not_an_internal_error(tmp_path):
    source = tmp_path / "user.py"
    source.write_text(
        "def inplace(x):\n    y = x * 1\n    y.mul_(y)\n    return y\n\ndef varargs(*args):\n    return args[0]\n"
    )
    result = run("check", f"{source}:inplace", "--at", "x=1.5")
    assert result.exit_code == 2
    assert "modified by an inplace operation" in result.stderr and "user.py:inplace" in result.stderr
    result = run("check", f"{source}:varargs", "--at", "a=1,b=2")
    assert result.exit_code == 2
    assert "takes *args" in result.stderr


def test_ten_thousand_inputs_are_checked_in_bounded_memory():
    calls = []

    def f(points):
        calls.append(points.shape)
        return (points**2).sum(axis=1, keepdims=True)

    x0 = np.linspace(-1.0, 1.0, 3000)
    estimate = finite_differences(f, x0, f(x0[None, :])[0])
    assert np.all(np.abs(estimate.value[0] - 2 * x0) <= 3 * estimate.error[0])
    assert estimate.error.max() < 1e-9
    assert max(rows * cols for rows, cols in calls[1:]) <= 2_000_000
    exact = complex_step(lambda p: (p**2).sum(axis=1, keepdims=True), x0)
    assert np.array_equal(exact.value[0], 2 * x0)


def test_complex_step_takes_its_step_below_a_tiny_input():
    estimate = complex_step(lambda p: np.sqrt(p), np.array([1e-30]))
    assert estimate.value[0, 0] == pytest.approx(5e14, rel=1e-14)


def test_assert_grad_close_with_an_empty_input_passes_and_tiny_wrong_signs_fail():
    gc.testing.assert_grad_close(gc.sin, gc.tensor(np.zeros(0), requires_grad=True))

    class WrongSign(gc.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return gc.sin(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return -g * gc.cos(x)

    with pytest.raises(AssertionError, match="Jacobian mismatch"):
        gc.testing.assert_grad_close(lambda a: WrongSign.apply(a) * 1e-13, gc.tensor(0.3, requires_grad=True))


@pytest.mark.parametrize(
    "expression, point",
    [("sign(x)*x", "x=0"), ("log(x)", "x=1e-300"), ("atan2(y,x)", "x=-1,y=0"), ("abs(x)*x", "x=0")],
    ids=["sign at 0", "log at 1e-300", "atan2 on its cut", "abs at 0"],
)
def test_blame_never_accuses_a_correct_rule_at_a_jump_or_a_tiny_input(expression, point):
    doc = run_json(expression, "--at", point, "--blame")
    assert doc["blame"] is None
    assert doc["ok"] is True, doc["verdict"]
