"""Issue 19, `--steps`: ``gradcli diff EXPR --steps`` writes the derivation a teacher would, one
named rule a line, and every step is checked.

The rules come from the tables (each primitive row's ``rule_name`` and ``formulas``); a test runs
the derivation for every differentiable function of ``gradcli ops`` and over generated expressions
(the generators of test_parser.py and test_random_expressions.py), checking that each step's
"result so far", evaluated at a point, equals the derivative there.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_parser import _atoms, _combine
from test_random_expressions import Generator
from typer.testing import CliRunner

from gradcli.cli.app import app
from gradcli.errors import GradcliError, UsageError
from gradcli.lang import steps
from gradcli.lang.catalog import derivatives
from gradcli.lang.functions import FUNCTIONS
from gradcli.lang.parser import parse, parse_expression
from gradcli.ops import PRIMITIVES

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, ["diff", *args])


def derivation_of(text: str, variable: str = "x") -> steps.Derivation:
    return steps.derive(parse_expression(text), variable)


def assert_every_step_checks(derivation: steps.Derivation, seed: int = 0) -> None:
    point = steps.point_for(derivation, seed=seed)
    checked, wrong = steps.check(derivation, point)
    assert not wrong, [(s.rule, s.result, got, want) for s, got, want in wrong]
    assert checked == len(derivation.steps), "a step could not be evaluated at the point"


# --- the example of the issue, exactly ----------------------------------------------------------------

EXAMPLE = """\
d/dx(x^2*sin(3*x))
1. product rule: x^2*sin(3*x)
   = d/dx(x^2)*sin(3*x) + x^2*d/dx(sin(3*x))
2. power rule: x^2
   = 2*x*sin(3*x) + x^2*d/dx(sin(3*x))
3. chain rule, derivative of sin: sin(3*x)
   = 2*x*sin(3*x) + x^2*cos(3*x)*d/dx(3*x)
4. constant multiple: 3*x
   = 2*x*sin(3*x) + x^2*cos(3*x)*3*d/dx(x)
5. identity rule: x
   = 2*x*sin(3*x) + x^2*cos(3*x)*3*1
6. simplify: factors 1 and terms 0 dropped, numbers worked out: 2*x*sin(3*x) + x^2*cos(3*x)*3*1
   = 2*x*sin(3*x) + x^2*cos(3*x)*3
7. simplify: 2*x*sin(3*x) + x^2*cos(3*x)*3
   = x*(3*x*cos(3*x) + 2*sin(3*x))
"""


def test_the_issue_example_names_each_rule_and_says_where_it_was_checked():
    result = run("x^2 * sin(3*x)", "--steps")
    assert result.exit_code == 0, result.output
    body, _, last = result.stdout.rstrip("\n").rpartition("\n")
    assert body + "\n" == EXAMPLE
    assert re.fullmatch(r"\(every step checked at x=0\.\d+\)", last)


@pytest.mark.parametrize(
    ("text", "rules"),
    [
        ("sin(x) / x", ["quotient rule", "derivative of sin", "identity rule"]),
        ("x^3 + 2 - x", ["sum rule and difference rule", "power rule", "constant rule", "identity rule"]),
        ("exp(x^2)", ["chain rule, derivative of exp", "power rule"]),
        ("2^x", ["exponential rule"]),
        ("x^x", ["generalized power rule"]),
        ("-cos(x)", ["constant multiple", "derivative of cos"]),
        ("x if x > 0 else x^2", ["piecewise rule", "identity rule", "power rule"]),
        ("log(x, 2)", ["derivative of log"]),
    ],
)
def test_rules_are_named(text, rules):
    derivation = derivation_of(text)
    named = [s.rule for s in derivation.steps if not s.rule.startswith("simplify")]
    assert named == rules
    assert_every_step_checks(derivation)


def test_rule_names_live_in_the_primitive_rows():
    assert PRIMITIVES["mul"].rule_name == "product rule"
    assert PRIMITIVES["div"].rule_name == "quotient rule"
    assert PRIMITIVES["add"].rule_name == "sum rule"
    assert PRIMITIVES["pow"].rule_name == "power rule"
    assert PRIMITIVES["sin"].rule_name == "derivative of sin"  # the default: no text per function


def test_known_derivatives_at_the_end():
    assert derivation_of("x^2 * sin(3*x)").result == "x*(3*x*cos(3*x) + 2*sin(3*x))"
    assert derivation_of("exp(x) / x").result == "(x - 1)*exp(x)/x^2"
    assert derivation_of("x * y + y^2", "y").result == "x + 2*y"
    assert derivation_of("sigmoid(x)").result == "sigmoid(x)*(1 - sigmoid(x))"


# --- every function of the table -----------------------------------------------------------------------

# functions of arrays: --steps says it explains scalar expressions (exit 2), never an internal error
ARRAYS_ONLY = {"det", "diag", "gather", "index_select", "inv", "narrow", "repeat", "reshape", "solve", "sort", "topk",
               "trace", "tril", "triu", "hstack", "vstack", "roll", "diagonal", "cross"}  # fmt: skip


def _argument(name: str, i: int) -> str:
    """An argument in the input's smooth interval for x in [0.2, 0.9] (the check's points)."""
    function = FUNCTIONS[name]
    prim = function.primitive
    lo, hi = prim.domain_of(i) if prim is not None and prim.name == name else (-3.0, 3.0)
    lo, hi = max(lo, -2.0), min(hi, 2.0)
    scale = (hi - lo) / 0.7 * 0.9
    start = lo + (hi - lo) * 0.05 - 0.2 * scale
    if i == 0:
        return f"{start:.4g} + {scale:.4g} * x"
    middle = (lo + hi) / 2 + i - 0.95
    # a second input that moves too (both sides of the chain rule); bounds and the like constant
    return f"{middle:.4g} - x / 20" if function.arities[0] == 2 else f"{middle:.4g}"


def _differentiable():
    return sorted(name for name, f in FUNCTIONS.items() if derivatives(f))


@pytest.mark.parametrize("name", _differentiable())
def test_every_differentiable_function_of_the_table(name):
    arity = FUNCTIONS[name].arities[0]
    text = f"{name}({', '.join(_argument(name, i) for i in range(arity))})"
    if name in ARRAYS_ONLY:
        with pytest.raises(UsageError, match="--steps explains scalar expressions"):
            derivation_of(text)
        return
    derivation = derivation_of(text)
    rules = " ".join(s.rule for s in derivation.steps)
    assert f"derivative of {name}" in rules or PRIMITIVES.get(name, FUNCTIONS[name].primitive).rule_name in rules
    assert_every_step_checks(derivation, seed=len(name))


def test_the_array_only_list_is_current():
    assert set(_differentiable()) >= ARRAYS_ONLY


# --- generated expressions ---------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(_atoms, _combine, max_leaves=6))
def test_generated_expressions_every_step_checks(text):
    try:
        tree = parse_expression(text)
    except GradcliError:
        return
    if "x" not in {n.id for n in _names(tree)}:
        return
    assert_every_step_checks(steps.derive(tree, "x"))


def _names(tree):
    from gradcli.lang import ast

    return [n for n in ast.postorder(tree) if isinstance(n, ast.Name)]


@pytest.mark.parametrize("seed", range(8))
def test_expressions_of_the_random_generator(seed):
    generator = Generator(seed)
    from test_random_expressions import render

    node = generator.gen((), 3)
    text = render(node, generator.rng)
    if re.search(r"\b[wuvAM]\b|\[", text):  # vectors and matrices: not what --steps explains
        pytest.skip("an array expression")
    tree = parse_expression(text)
    for variable in sorted({n.id for n in _names(tree)} & {"x", "y", "z"}):
        assert_every_step_checks(steps.derive(tree, variable), seed=seed)


def test_a_wrong_step_is_caught():
    derivation = derivation_of("x^2 * sin(3*x)")
    bad = derivation.steps[2]
    bad.claim = bad.claim + steps.sp.Symbol("x", real=True) * 1e-6
    _, wrong = steps.check(derivation, steps.point_for(derivation))
    assert [s for s, _, _ in wrong] == [bad]


# --- programs: backpropagation, one statement a step ------------------------------------------------------


def test_a_program_is_explained_last_statement_first():
    tree = parse("a = x + w; b = w + 1; y = a * b")
    (derivation,) = steps.program_steps(tree, ["x", "w"])
    assert [s.result for s in derivation.steps] == [
        "∂y/∂y = 1",
        "∂y/∂b = a",
        "∂y/∂a = b",
        "∂y/∂x = b",
        "∂y/∂x = w + 1",
        "∂y/∂w = b + a",
        "∂y/∂w = 2*w + x + 1",
    ]
    assert derivation.steps[5].rule == "chain rule through 2 uses, summed"
    assert_every_step_checks(derivation)


MLP = "h = tanh(w*x + b); yhat = v*h + c; loss = (yhat - y)^2 / 2"


def test_the_scalar_network_against_torch():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    result = run(MLP, "--steps", "--json", "--wrt", "w,b", "--at", "w=0.3,x=-1.2,b=0.1,v=2,c=-0.5,y=0.7")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["every_step_checked"] is True
    order = [s["wrt"] for s in document["steps"] if s["rule"].startswith(("start", "chain"))]
    assert order[:4] == ["loss", "yhat", "h", "w"]
    assert document["derivative"]["yhat"] == "yhat - y"
    values = {"w": 0.3, "x": -1.2, "b": 0.1, "v": 2.0, "c": -0.5, "y": 0.7}
    t = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in values.items()}
    loss = (t["v"] * torch.tanh(t["w"] * t["x"] + t["b"]) + t["c"] - t["y"]) ** 2 / 2
    loss.backward()
    from gradcli.lang.program import load

    for name in ("w", "b"):  # the expanded derivative, evaluated by gradcli, is autograd's
        text = document["derivative"][name]
        value = load(text).run(values).outputs[0].item()
        assert value == pytest.approx(t[name].grad.item(), rel=1e-12, abs=1e-14), name


# --- the command: text, --json, --latex, bad input ---------------------------------------------------------


def test_json_is_a_list_of_steps():
    result = run("x*y + sin(x)", "--steps", "--json", "--wrt", "x")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [set(s) for s in document["steps"]] == [{"rule", "applies_to", "result", "wrt"}] * len(document["steps"])
    assert document["steps"][0] == {
        "rule": "sum rule",
        "applies_to": "x*y + sin(x)",
        "result": "d/dx(x*y) + d/dx(sin(x))",
        "wrt": "x",
    }
    assert document["derivative"] == {"x": "y + cos(x)"}


KNOWN_LATEX = {"begin", "end", "frac", "left", "right", "cdot", "sin", "cos", "tan", "exp", "log", "sqrt", "text",
               "operatorname", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "partial", "le", "ge", "ne",
               "pi", "max", "min", "bmod"}  # fmt: skip


def _balanced(text: str) -> bool:
    depth = 0
    for char in re.sub(r"\\[{}]", "", text):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


@pytest.mark.parametrize(
    "text", ["x^2 * sin(3*x)", "abs(x) / sqrt(x^2 + 1) + (x if x > 0 else 2^x)", "a = x*x; y = log(a)"]
)
def test_latex_is_an_align_block(text):
    result = run(text, "--steps", "--latex")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == r"\begin{align*}" and lines[-2] == r"\end{align*}" and lines[-1].startswith("% every step")
    body = "\n".join(lines[1:-2])
    assert _balanced(body)
    assert body.count(r"\left") == body.count(r"\right")
    assert set(re.findall(r"\\([A-Za-z]+)", body)) <= KNOWN_LATEX
    rows = body.split(" \\\\\n")
    assert all(" &= " in row and r"&& \text{" in row for row in rows)


def test_latex_compiles_where_latex_is_installed(tmp_path):
    import shutil
    import subprocess

    latex = shutil.which("pdflatex") or shutil.which("latex")
    if latex is None:
        pytest.skip("no latex binary")
    block = run("x^2 * sin(3*x)", "--steps", "--latex").stdout
    document = "\\documentclass{article}\\usepackage{amsmath}\\begin{document}\n" + block + "\\end{document}\n"
    (tmp_path / "w.tex").write_text(document)
    done = subprocess.run([latex, "-interaction=nonstopmode", "w.tex"], cwd=tmp_path, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stdout[-2000:]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["trace(x)", "--steps"], "error: --steps explains scalar expressions: trace(x):"),
        (["sum(v)", "--steps", "--at", "v=[1,2]"], "error: --steps explains scalar expressions: --at v is an array"),
        (["a = x; a = a * 2; a", "--steps"], "error: --steps: 'a' is assigned twice"),
        (["x^2", "--steps", "--wrt", "z"], "error: --wrt z: 'z' is not a variable of the expression"),
        (["x +", "--steps"], "error: expected a value after '+' at column 3"),
    ],
)
def test_bad_input_is_one_error_line(args, message):
    result = run(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines()[0].startswith(message), result.stderr
    assert "Traceback" not in result.stderr


def test_a_point_where_the_derivative_is_not_finite_is_said():
    result = run("log(x)", "--steps", "--at", "x=0")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-1] == "(not checked: the derivative is not a finite number at x=0)"


def test_at_gives_the_point_of_the_check():
    result = run("x^3", "--steps", "--at", "x=2")
    assert result.stdout.splitlines()[-1] == "(every step checked at x=2)"
    assert result.stdout.splitlines()[-2] == "   = 3*x^2"
