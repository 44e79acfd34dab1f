"""Issue 15, "index15": gather, index_select, masked_fill and repeat in the language.

The language's forms keep its conventions (the axis last, the last by default; positions and
masks as numbers), so they are compared here with the library's PyTorch signatures (which
tests/test_roads_library_functions.py cannot call with the language's arguments).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli.app import app
from gradcli.lang.evaluate import evaluate
from gradcli.lang.parser import parse

runner = CliRunner()
A = [[0.2, 0.9, 0.4], [0.7, 0.35, 0.55]]

CASES = [
    ("gather(A, [[2, 0], [1, 1]])", lambda a: gc.gather(a, -1, np.array([[2, 0], [1, 1]]))),
    ("gather(A, [[1, 0, 1]], 0)", lambda a: gc.gather(a, 0, np.array([[1, 0, 1]]))),
    ("index_select(A, [2, 2, 0])", lambda a: gc.index_select(a, -1, np.array([2, 2, 0]))),
    ("index_select(A, [1], 0)", lambda a: gc.index_select(a, 0, np.array([1]))),
    ("masked_fill(A, A > 0.5, 2)", lambda a: gc.masked_fill(a, a > 0.5, 2.0)),
    ("repeat(A, [2, 1, 2])", lambda a: gc.repeat(a, 2, 1, 2)),
]


@pytest.mark.parametrize("program, library", CASES, ids=[c[0] for c in CASES])
def test_the_language_equals_the_library(program, library):
    run = evaluate(parse(program), {"A": np.array(A)}, ["A"])
    (got,) = run.outputs
    a = gc.tensor(A, requires_grad=True)
    want = library(a)
    np.testing.assert_array_equal(got._value, want._value)
    seed = np.linspace(0.5, 1.5, want.numel()).reshape(want.shape)
    (g_lang,) = gc.grad(got, [run.inputs["A"]], grad_outputs=gc.tensor(seed))
    (g_lib,) = gc.grad(want, [a], grad_outputs=gc.tensor(seed))
    np.testing.assert_array_equal(g_lang._value, g_lib._value)


def test_masked_fill_differentiates_the_value():
    result = runner.invoke(app, ["eval", "sum(masked_fill(A, A > 0.5, y) * A)", "--at", f"A={A}", "--at", "y=3"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith("d/dy  = 2.15")  # 0.9 + 0.7 + 0.55


@pytest.mark.parametrize(
    "expr, message",
    [
        ("gather(A, [[3]])", "gather() at column 1: index 3 is out of range for axis 1 of size 3"),
        ("gather(A, [0.5])", "gather() at column 1: gather's positions must be whole numbers, got [0.5]"),
        ("index_select(A, [4])", "index_select() at column 1: index out of range in self"),
        ("repeat(A, [2])", "repeat() at column 1: Number of dimensions of repeat dims can not be smaller"),
        ("masked_fill(A, A > 0, [1, 2])", "masked_fill() at column 1: masked_fill_ only supports a 0-dimensional"),
    ],
)
def test_errors_are_one_line(expr, message):
    result = runner.invoke(app, ["eval", expr, "--at", f"A={A}", "--seed", "ones"])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {message}")
    assert "Traceback" not in result.stderr


def test_sympy_forms():
    result = runner.invoke(
        app, ["diff", "sum(gather(A, [[2, 0], [1, 1]])^2) + sum(repeat(A, [2, 1]))", "--wrt", "A", "--at", f"A={A}"]
    )
    assert result.exit_code == 0, result.stderr
    numbers = runner.invoke(
        app, ["eval", "sum(gather(A, [[2, 0], [1, 1]])^2) + sum(repeat(A, [2, 1]))", "--at", f"A={A}"]
    )
    assert numbers.exit_code == 0, numbers.stderr


def test_points_run_each_point(tmp_path):
    path = tmp_path / "points.csv"
    path.write_text("s\n1\n2\n")
    result = runner.invoke(
        app, ["eval", "sum(gather(s * A, [[2, 0], [1, 1]])) + sum(repeat(A, [2, 1]) * s)", "--points", str(path),
              "--at", f"A={A}"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    # gather: 0.4 + 0.2 + 0.35 + 0.35 = 1.3 (times s); repeat: 2 * 3.1 = 6.2 (times s)
    assert [float(v) for v in lines[1].split(",")[:3]] == pytest.approx([1.0, 7.5, 7.5], rel=1e-14)
    assert [float(v) for v in lines[2].split(",")[:3]] == pytest.approx([2.0, 15.0, 7.5], rel=1e-14)


def test_narrow_in_the_language_is_the_library_s_narrow_with_the_axis_last():
    """narrow(x, start, length[, axis]): the language puts the axis last (last axis by default)."""
    import gradcli as gc

    A = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]
    result = runner.invoke(app, ["eval", "sum(narrow(A, 1, 2)^2) + sum(narrow(A, 0, 2, 0) * x)", "--at", f"A={A}",
                                 "--at", "x=2", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    a = gc.tensor(A, requires_grad=True)
    x = gc.tensor(2.0, requires_grad=True)
    y = gc.sum(gc.narrow(a, -1, 1, 2) ** 2) + gc.sum(gc.narrow(a, 0, 0, 2) * x)
    y.backward()
    assert doc["value"] == 261.0 == y.item()
    assert doc["gradient"]["A"] == [[2.0, 6.0, 8.0], [2.0, 12.0, 14.0], [0.0, 16.0, 18.0]] == a.grad.tolist()
    assert doc["gradient"]["x"] == 21.0 == x.grad.item()
    bad = runner.invoke(app, ["eval", "narrow(v, 2, 5)", "--at", "v=[1,2,3]"])
    assert bad.exit_code == 2
    assert bad.stderr.splitlines()[0] == (
        "error: narrow() at column 1: start (2) + length (5) exceeds dimension size (3)."
    )
