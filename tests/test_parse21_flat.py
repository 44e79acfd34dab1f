"""The flat road (gradcli/lang/flat.py) against the graph road: the same numbers, bit for bit.

A long expression read by ``compile_flat`` is differentiated on a tape, without the syntax tree
or the recorded graph. Every test here runs the same text both ways: ``load`` (the flat road,
when the text is one) and a ``Program`` built from the full parser's tree (the graph road), and
compares values and gradients as bytes; texts the flat road must refuse give the full parser's
own error; a NaN or an infinity anywhere gives the graph road's warning.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from gradcli.errors import UsageError
from gradcli.lang import flat
from gradcli.lang.compute import value_and_grad
from gradcli.lang.parser import parse
from gradcli.lang.program import Program, load

POINT = {"x": 0.5, "y": -1.25, "z": 2.0}


def graph_road(text: str) -> Program:
    return Program("expression", tree=parse(text))


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def assert_same(text: str, point: dict[str, float] = POINT, wrt: list[str] | None = None, flat_used: bool = True):
    program = load(text)
    assert (program.flat is not None) is flat_used, text[:80]
    if flat_used:
        names = wrt or [n for n in program.variables if n in point]
        assert program.flat.value_and_grad(point, names) is not None, "the flat road stepped aside"
    fast = value_and_grad(program, point, wrt)
    slow = value_and_grad(graph_road(text), point, wrt)
    assert same_bits(fast.value, slow.value), (fast.value, slow.value)
    assert list(fast.gradient) == list(slow.gradient)
    for name in slow.gradient:
        assert same_bits(fast.gradient[name], slow.gradient[name]), (name, fast.gradient[name], slow.gradient[name])
    assert fast.unconnected == slow.unconnected
    assert fast.evaluation.nonfinite == slow.evaluation.nonfinite
    assert fast.backward_nonfinite == slow.backward_nonfinite
    return fast


def long_sum(term: str, at_least: int = flat.MIN_CHARACTERS) -> str:
    text = term
    while len(text) < at_least:
        text += " + " + term
    return text


def domain_of(name: str) -> tuple[float, float]:
    from gradcli.ops import PRIMITIVES

    domain = getattr(PRIMITIVES[name], "domain", ())
    return domain[0] if domain else (-1.5, 1.5)


# --- every function of the flat road ---------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(flat.tables()["functions"]))
def test_every_function_gives_the_graph_roads_bits(name):
    lo, hi = domain_of(name)
    inner = f"({lo!r} + {hi - lo!r} * sigmoid(x*y - z/3))"  # inside the function's domain at any point
    term = f"{name}({inner})*y - {name}({inner})^2/(1 + z^2) + 2*{name}(1.0*{inner})"
    text = long_sum(term)
    assert_same(text)


def test_the_two_benchmark_expressions():
    assert_same("+".join(["x"] * 3000))
    result = assert_same("+".join(f"sin({k % 7 + 1}*x)*y" for k in range(2500)))
    x, y = POINT["x"], POINT["y"]
    expected_dx = sum((k % 7 + 1) * math.cos((k % 7 + 1) * x) * y for k in range(2500))
    assert result.gradient["x"] == pytest.approx(expected_dx, rel=1e-12)


# --- random expressions ---------------------------------------------------------------------------------

NUMBERS = ["2", ".5", "0.5", "3", "1.5", "1e-1", "2.5e-1", "pi", "e", "1", "0.75", "2.0", "1E+0"]


def random_expression(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.2:
        return rng.choice(["x", "y", "z", "x", "y", *NUMBERS])
    kind = rng.random()
    a = random_expression(rng, depth - 1)
    if kind < 0.5:
        b = random_expression(rng, depth - 1)
        op = rng.choice(["+", "-", "*", " * ", "+", "-"])
        return f"{a}{op}{b}" if rng.random() < 0.6 else f"({a}{op}{b})"
    if kind < 0.6:
        return f"({a})/(1.5 + ({random_expression(rng, depth - 1)})^2)"  # a denominator > 0
    if kind < 0.7:
        return rng.choice([f"(1 + ({a})^2)^{rng.choice(['0.5', 'y', '-1.5', '3'])}", f"({a})**2", f"2^({a})"])
    if kind < 0.8:
        return rng.choice([f"-{a}", f"-({a})", f"+({a})", f"-(-{a})"])
    name = rng.choice(sorted(flat.tables()["functions"]))
    lo, hi = domain_of(name)
    return f"{name}({lo!r} + {hi - lo!r}*sigmoid({a}))"


@pytest.mark.parametrize("seed", range(12))
def test_random_long_expressions_give_the_graph_roads_bits(seed):
    rng = random.Random(seed)
    parts = [random_expression(rng, 4)]
    while len(" + ".join(parts)) < flat.MIN_CHARACTERS:
        parts.append(random_expression(rng, 4))
    text = " + ".join(parts) if seed % 2 else " - ".join(parts)
    point = {"x": rng.uniform(-1.5, 1.5), "y": rng.uniform(-1.5, 1.5), "z": rng.uniform(-1.5, 1.5)}
    program = load(text)
    assert program.flat is not None
    assert program.variables == graph_road(text).variables
    # the flat road may step aside (an overflow in 2^(...)); the numbers are the same either way
    assert_same(text, point, flat_used=True) if program.flat.value_and_grad(point, program.variables) else None


def test_constants_given_values_are_variables_as_on_the_graph_road():
    text = long_sum("e*x + pi^2*y")
    assert load(text).variables == ["x", "y"]
    assert_same(text, {"x": 1.0, "y": 2.0, "e": 3.0}, wrt=["x", "y", "e"])
    assert load(text).free_variables({"e": 3.0}) == graph_road(text).free_variables({"e": 3.0}) == ["e", "x", "y"]


def test_variables_the_gradient_does_not_reach_are_unconnected_zeros():
    result = assert_same(long_sum("x*2"), {"x": 1.0, "y": 5.0}, wrt=["x", "y"])
    assert result.unconnected == ("y",)
    assert result.gradient["y"] == 0.0
    # only constants: the output needs no gradient
    result = assert_same(long_sum("2*3 - sin(1)"), {"x": 1.0}, wrt=["x"])
    assert result.unconnected == ("x",)


# --- what the flat road refuses: the full parser says what is wrong --------------------------------------


SYNTAX_ERRORS = [
    long_sum("x") + " +",
    long_sum("x") + " )",
    "(" + long_sum("x"),
    long_sum("2x"),
    long_sum("sin x"),
    long_sum("x") + " + x y",
    long_sum("x") + " + (x)(y)",
    long_sum("x") + " + 1.2.3",
    "x" + "^x" * 1200,  # nested deeper than the full parser's limit
    "(" * 1000 + "x" + ")" * 1000,
    "-" * 2500 + "x",
]


@pytest.mark.parametrize("text", SYNTAX_ERRORS, ids=range(len(SYNTAX_ERRORS)))
def test_bad_text_gets_the_full_parsers_error(text):
    assert flat.compile_flat(text) is None
    with pytest.raises(UsageError) as full:
        parse(text)
    with pytest.raises(UsageError) as loaded:
        load(text)
    assert str(loaded.value) == str(full.value)


REFUSED = [
    long_sum("x") + " + foo(x)",
    long_sum("x") + " + sin",
    long_sum("x") + " + sin(x, y)",
    long_sum("x") + " + sin()",
    long_sum("x") + ", y",
    long_sum("x") + " if x else y",
]


@pytest.mark.parametrize("text", REFUSED, ids=range(len(REFUSED)))
def test_text_the_language_reads_otherwise_is_left_to_the_graph_road(text):
    assert flat.compile_flat(text) is None
    program = load(text)
    assert program.flat is None

    def outcome(p):
        try:
            r = value_and_grad(p, {"x": 0.5, "y": 2.0})
        except UsageError as exc:
            return str(exc)
        return r.value.tobytes(), {n: g.tobytes() for n, g in r.gradient.items()}

    assert outcome(program) == outcome(graph_road(text))


def test_text_the_flat_road_does_not_cover_goes_to_the_graph_road():
    for text in [
        "a = " + long_sum("x") + "\na * 2",  # statements
        long_sum("x") + " # a comment",
        long_sum("x[0]"),
        long_sum("max(x, y)"),
        long_sum("x % 2"),
        long_sum("(x < y)"),
        long_sum("θ"),
        "x + y",  # short: the graph road shows more (names, steps)
    ]:
        program = load(text)
        assert program.flat is None
        assert program.tree is not None


def test_an_unknown_name_is_said_as_on_the_graph_road():
    text = long_sum("x + q")
    with pytest.raises(UsageError) as fast:
        value_and_grad(load(text), {"x": 1.0})
    with pytest.raises(UsageError) as slow:
        value_and_grad(graph_road(text), {"x": 1.0})
    assert str(fast.value) == str(slow.value)


# --- non-finite values: the graph road names where they appeared ------------------------------------------


@pytest.mark.parametrize(
    "term",
    [
        "log1p(x - x - 1) + y",
        "1/(x - x)",
        "sqrt(x - x)*y",
        "x/(1/(y - y))",
        "(0 - 1)^0.5 + x",
        "1/0 + x",
        "exp(1000)*x",
    ],
)
def test_non_finite_values_get_the_graph_roads_warning(term):
    text = long_sum(term)
    program = load(text)
    assert program.flat is not None
    assert program.flat.value_and_grad(POINT, ["x", "y"]) is None  # the flat road steps aside
    result = value_and_grad(program, POINT)
    slow = value_and_grad(graph_road(text), POINT)
    assert result.evaluation.nonfinite == slow.evaluation.nonfinite
    assert result.backward_nonfinite == slow.backward_nonfinite
    assert result.evaluation.nonfinite or result.backward_nonfinite


def test_arrays_and_integers_go_to_the_graph_road():
    text = long_sum("x*y")
    program = load(text)
    assert program.flat.value_and_grad({"x": np.array([1.0, 2.0]), "y": 1.0}, ["x", "y"]) is None
    assert program.flat.value_and_grad({"x": 2, "y": 1.0}, ["x", "y"]) is None
    assert program.flat.value_and_grad({"x": np.float32(2), "y": 1.0}, ["x", "y"]) is None


def test_the_tree_is_parsed_when_asked_for():
    text = long_sum("sin(x)*y")
    program = load(text)
    assert program._tree is None
    assert program.text == text
    tree = program.tree
    assert tree is not None and tree.text == text
    assert program.tree is tree


# --- through the command line --------------------------------------------------------------------------


def test_eval_of_a_long_file_prints_the_graph_roads_numbers(tmp_path):
    from typer.testing import CliRunner

    from gradcli.cli.app import app

    text = "+".join(f"sin({k % 7 + 1}*x)*y" for k in range(400))
    path = tmp_path / "long.gc"
    path.write_text(text)
    result = CliRunner().invoke(app, ["eval", "-f", str(path), "--at", "x=0.5,y=2", "--json"])
    assert result.exit_code == 0, result.output
    import json

    document = json.loads(result.stdout)
    slow = value_and_grad(graph_road(text), {"x": 0.5, "y": 2.0})
    assert document["value"] == float(slow.value)
    assert document["gradient"] == {"x": float(slow.gradient["x"]), "y": float(slow.gradient["y"])}


def test_against_torch():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    text = "+".join(f"sin({k % 7 + 1}*x)*y - x^2/(1+y^2)" for k in range(300))
    result = value_and_grad(load(text), {"x": 0.5, "y": 2.0})
    x = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    y = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    out = sum(torch.sin((k % 7 + 1) * x) * y - x**2 / (1 + y**2) for k in range(300))
    out.backward()
    assert float(result.value) == pytest.approx(out.item(), rel=1e-12)
    assert float(result.gradient["x"]) == pytest.approx(x.grad.item(), rel=1e-12)
    assert float(result.gradient["y"]) == pytest.approx(y.grad.item(), rel=1e-12)


def test_complex_and_in_place_tensors_elsewhere_in_the_process_change_nothing():
    import gradcli as gc

    z = gc.tensor([1 + 2j], requires_grad=True)  # marks complex values as seen in this process
    (z * z).sum().real.backward()
    t = gc.tensor([1.0, 2.0], requires_grad=True).clone()
    t.add_(1)  # an in-place operation
    assert_same(long_sum("sin(x)*y - x^2"))


def test_a_file_with_blank_lines_around_its_expression_takes_the_flat_road(tmp_path):
    text = "\n\n  " + long_sum("sin(x)*y") + " \r\n\n"
    program = load(text)
    assert program.flat is not None
    assert program.flat.span == (4, 4 + len(long_sum("sin(x)*y")))
    assert_same(text)
    path = tmp_path / "long.gc"
    path.write_text(long_sum("sin(x)*y") + "\n")  # a file ends with a new line
    assert load(None, str(path)).flat is not None
    assert flat.compile_flat(long_sum("x") + "\n + y") is None  # a new line within: statements, the full parser's
