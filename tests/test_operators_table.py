"""Issue 14 (operators): every operator is one row of ops/operators.py, and the lexer, parser,
unparse, evaluation (one point and many), the SymPy translation, the renderers, ``gradcli ops``
and the Tensor methods are derived from it. ``%`` (remainder, Python/PyTorch semantics: the sign
of the divisor) was added as one row (plus its primitive), and works everywhere at once.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli.app import app
from gradcli.errors import Source
from gradcli.lang import ast
from gradcli.lang.evaluate import evaluate
from gradcli.lang.lexer import tokenize
from gradcli.lang.parser import BINARY, COMPARE, parse
from gradcli.lang.unparse import unparse
from gradcli.ops import PRIMITIVES
from gradcli.ops.operators import COMPARISONS, OPERATORS, PREFIX, SHOWN

runner = CliRunner()


def sexpr(text: str) -> str:
    """The fully parenthesised tree of an expression of names, signs, operators and comparisons."""
    done: dict[int, str] = {}
    root = parse(text).outputs.items[0]
    for n in ast.postorder(root):
        k = [done.pop(id(c)) for c in n.children()]
        done[id(n)] = n.id if isinstance(n, ast.Name) else f"({n.op} {' '.join(k)})"
    return done[id(root)]


def run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def value_and_gradient(text: str, **at: float) -> tuple[float, dict[str, float]]:
    doc = json.loads(run("eval", "--json", "--at", ",".join(f"{k}={v!r}" for k, v in at.items()), "--", text))
    return doc["value"], doc["gradient"]


# --- the table is the one source -------------------------------------------------------------------

INFIX_ROWS = [row for row in OPERATORS if row.kind == "infix"]
ELEMENTWISE_ROWS = [row for row in INFIX_ROWS if row.elementwise]


def test_the_parser_reads_its_powers_spellings_and_comparisons_from_the_table():
    assert {s: row.power for row in INFIX_ROWS for s in row.spellings} == BINARY
    assert BINARY["**"] == BINARY["^"] and BINARY["%"] == BINARY["*"] == BINARY["/"]
    assert set(COMPARE) == set(COMPARISONS) == {"<", "<=", ">", ">=", "==", "!="}
    assert set(PREFIX) == {"-", "+"}
    # every primitive an operator records is a row of the primitive table
    assert all(PRIMITIVES[p.name] is p for row in OPERATORS for p in row.primitives)


def test_the_lexer_reads_every_spelling_as_one_token():
    for row in OPERATORS:
        for spelling in row.spellings:
            tokens = tokenize(Source(f"a{spelling}b"))
            assert [(t.kind, t.text) for t in tokens[:3]] == [("name", "a"), ("op", spelling), ("name", "b")]


@pytest.mark.parametrize("row", INFIX_ROWS, ids=lambda r: r.symbol)
def test_every_infix_row_parses_and_unparses_in_every_spelling(row):
    for spelling in row.spellings:
        tree = parse(f"a {spelling} b").outputs.items[0]
        assert isinstance(tree, ast.Binary) and tree.op == row.symbol
        text = unparse(tree)
        assert text == (f"a{row.symbol}b" if row.right else f"a {row.symbol} b")
        assert sexpr(text) == f"({row.symbol} a b)"


@pytest.mark.parametrize("row", ELEMENTWISE_ROWS, ids=lambda r: r.symbol)
def test_every_elementwise_row_folds_evaluates_and_translates_to_sympy(row):
    import sympy as sp

    from gradcli.lang.symbolic import to_sympy

    a, b = 2.5, 1.25
    expected = float(row.primitive.forward(np.float64(a), np.float64(b)))
    folded = evaluate(parse(f"{a!r} {row.symbol} {b!r}"), {}).outputs[0]  # two constants fold
    assert folded.item() == expected == float(row.fold(np.float64(a), np.float64(b)))
    ev = evaluate(parse(f"x {row.symbol} y"), {"x": a, "y": b}, wrt=["x", "y"])
    out = ev.outputs[0]
    assert out.item() == expected
    assert out.grad_fn.name() == row.primitive.node_name()
    (expr,), _ = to_sympy(parse(f"x {row.symbol} y"))
    x, y = sp.Symbol("x", real=True), sp.Symbol("y", real=True)
    assert float(expr.subs({x: sp.Rational(5, 2), y: sp.Rational(5, 4)})) == pytest.approx(expected, rel=1e-15)


def test_the_renderers_show_each_operator_by_its_symbol():
    assert {SHOWN[n] for n in ("add", "sub", "mul", "div", "remainder", "pow")} == {"+", "-", "*", "/", "%", "^"}
    assert SHOWN["mm"] == SHOWN["mv"] == SHOWN["matmul"] == "@"
    assert SHOWN["lt"] == "<" and SHOWN["ne"] == "!="
    x, y = gc.tensor(7.5, requires_grad=True), gc.tensor(2.0, requires_grad=True)
    x.name, y.name = "x", "y"
    labels = [(n.key, n.label) for n in gc.render.graph(-(x % y)).model.nodes]
    assert labels == [("x", "x"), ("y", "y"), ("n2", "x % y"), ("f", "-n2")]


def test_gradcli_ops_lists_the_operators_of_the_table():
    doc = json.loads(run("ops", "--json"))
    assert doc["operators"] == ["+", "-", "*", "/", "%", "@", "^", "!=", "<", "<=", "==", ">", ">="]
    remainder = next(e for e in doc["ops"] if e["name"] == "remainder")
    assert remainder["derivative"] == "d/da = 1; d/db = -floor(a/b)"


def test_the_tensor_methods_record_the_rows_primitives():
    x = gc.tensor(7.5, requires_grad=True)
    for row in OPERATORS:
        if row.method and row.primitive.differentiable:
            assert getattr(x, row.method)(2.0).grad_fn.name() == row.primitive.node_name((False, True))
            assert getattr(x, "__r" + row.method[2:])(2.0).grad_fn is not None
    assert (x < 1).item() is False and (x != x).item() is False
    assert len({x, x}) == 1  # __eq__ installed after the class: tensors stay hashable by identity


def test_a_comparison_computes_one_comparison_not_six():
    calls = []
    saved = {row.primitive: row.primitive.forward for row in COMPARISONS.values()}
    try:
        for prim, forward in saved.items():
            counted = lambda a, b, _f=forward, _n=prim.name: calls.append(_n) or _f(a, b)  # noqa: E731
            object.__setattr__(prim, "forward", counted)  # a frozen row: patched for this test only
        ev = evaluate(parse("x < 1"), {"x": gc.tensor([0.5, 2.0])}, wrt=["x"])
        assert ev.outputs[0].tolist() == [1.0, 0.0]
        assert calls == ["lt"]
        calls.clear()
        assert evaluate(parse("x >= 1"), {"x": 0.5}).outputs[0].item() == 0.0
        assert calls == ["ge"]
    finally:
        for prim, forward in saved.items():
            object.__setattr__(prim, "forward", forward)


# --- "%": one row, everywhere ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b, value",
    [(7.5, 2.0, 1.5), (-7.5, 2.0, 0.5), (7.5, -2.0, -0.5), (-7.5, -2.0, -1.5), (6.0, 3.0, 0.0), (0.25, 2.0, 0.25)],
)
def test_remainder_has_the_sign_of_the_divisor_as_in_python_and_pytorch(a, b, value):
    assert value == a % b  # Python's semantics
    got, gradient = value_and_gradient("x % y", x=a, y=b)
    assert got == value
    assert gradient == {"x": 1.0, "y": -math.floor(a / b)}
    assert evaluate(parse(f"({a!r}) % ({b!r})"), {}).outputs[0].item() == value  # folded constants


def test_remainder_gradients_agree_with_pytorch_float64():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    rng = np.random.default_rng(14)
    a = rng.uniform(-5, 5, size=8)
    b = rng.choice([-1, 1], size=8) * rng.uniform(0.5, 2.0, size=8)
    ta = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(b, dtype=torch.float64, requires_grad=True)
    w = rng.normal(size=8)
    (torch.remainder(ta, tb) * torch.tensor(w)).sum().backward()
    ga, gb = gc.tensor(a, requires_grad=True), gc.tensor(b, requires_grad=True)
    out = ga % gb
    (out * gc.tensor(w)).sum().backward()
    np.testing.assert_array_equal(out.detach().numpy(), torch.remainder(ta, tb).detach().numpy())
    np.testing.assert_allclose(ga.grad.numpy(), ta.grad.numpy(), rtol=0, atol=0)
    np.testing.assert_allclose(gb.grad.numpy(), tb.grad.numpy(), rtol=0, atol=0)
    # PyTorch's node names: a number divisor is overload 0, a tensor one overload 1
    assert (ga % 2.0).grad_fn.name() == torch.remainder(ta, 2.0).grad_fn.name() == "RemainderBackward0"
    assert (ga % gb).grad_fn.name() == torch.remainder(ta, tb).grad_fn.name() == "RemainderBackward1"


@pytest.mark.parametrize(
    "text, tree",
    [
        ("a % b * c", "(a % b) * c"),
        ("a * b % c", "(a * b) % c"),
        ("a + b % c", "a + (b % c)"),
        ("-a % b", "(-a) % b"),
        ("a ^ b % c", "(a ^ b) % c"),
        ("a % b ^ c", "a % (b ^ c)"),
        ("a % b < c", "(a % b) < c"),
    ],
)
def test_remainder_binds_as_tightly_as_a_product(text, tree):
    assert sexpr(text) == sexpr(tree)
    assert sexpr(unparse(parse(text))) == sexpr(text)


def test_remainder_parses_with_the_parsers_own_messages():
    result = runner.invoke(app, ["eval", "--at", "x=1", "--", "x %"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: expected a value after '%' at column 3")


def test_remainder_differentiates_symbolically():
    out = run("diff", "--", "x % y")
    assert out == "d/dx = 1\nd/dy = -floor(x/y)\n"


def test_remainder_through_a_second_derivative():
    # (x % y) * x: d2/dx2 = 2, d2/dxdy = -floor(x/y) = 4 at x = 7.5, y = -2, d2/dy2 = 0
    doc = json.loads(run("hessian", "--json", "--at", "x=7.5,y=-2", "--", "(x % y) * x"))
    assert doc["hessian"] == [[2.0, 4.0], [4.0, 0.0]]


def test_remainder_in_jacobian_check_and_graph():
    assert run("jacobian", "--at", "x=[7.5,-1.25]", "--", "x % 2") == (
        "      x[0]  x[1]\nf[0]     1     0\nf[1]     0     1\n"
    )
    out = run("check", "--at", "x=7.5,y=-2", "--", "x % y")
    assert "complex step: skipped: remainder (RemainderBackward1) is not complex-analytic" in out
    assert out.splitlines()[-1].startswith("OK: autograd agrees with sympy, finite differences")
    graph = run("graph", "--at", "x=7.5", "--", "x % 2 * x")
    assert "x % 2  [RemainderBackward0]  value 1.5  grad 7.5" in graph
    assert "∂n2/∂x = 1" in graph  # the intermediate by its id, "n2 = x % 2" (issue 17)


def test_remainder_at_many_points_matches_one_point_at_a_time(tmp_path):
    path = tmp_path / "points.csv"
    path.write_text("x,y\n7.5,2\n-7.5,2\n7.5,-2\n")
    lines = run("eval", "x % y", "--points", str(path), "--json").splitlines()
    assert [json.loads(line) for line in lines] == [
        {"value": 1.5, "gradient": {"x": 1.0, "y": -3.0}},
        {"value": 0.5, "gradient": {"x": 1.0, "y": 4.0}},
        {"value": -0.5, "gradient": {"x": 1.0, "y": 4.0}},
    ]
