"""The file.py:func road gives the same numbers as the expression road (issue 12, issue 13).

jacobian and hessian of a Python function (every --mode), check of a function that leaves
gradcli's operations, eval's warning for it, and what a function may return.
"""

from __future__ import annotations

import json
import math
import textwrap

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app

runner = CliRunner()


def run(*args: str, input: str | None = None):
    result = runner.invoke(app, expression_after_dashes(list(args)), input=input)
    assert "Traceback" not in result.output + result.stderr, result.output + result.stderr
    return result


def run_json(*args: str):
    result = run(*args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def write(tmp_path, text: str, name: str = "funcs.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


FUNCS = """
    import gradcli as gc

    def polar(r, t):
        return r * gc.cos(t), r * gc.sin(t)

    def rosenbrock(x, y):
        return (1 - x) ** 2 + 100 * (y - x ** 2) ** 2

    def branchy(x, y):
        if x > 0:
            return x * x * y
        return -x * y
"""


@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
def test_jacobian_of_a_python_function_is_not_zero(tmp_path, mode):
    path = write(tmp_path, FUNCS)
    r, t = 2.0, 0.5
    doc = run_json("jacobian", f"{path}:polar", "--at", f"r={r},t={t}", "--mode", mode)
    expected = [[math.cos(t), -r * math.sin(t)], [math.sin(t), r * math.cos(t)]]
    np.testing.assert_allclose(doc["jacobian"], expected, rtol=1e-14)
    np.testing.assert_allclose(doc["value"], [r * math.cos(t), r * math.sin(t)], rtol=1e-14)
    assert doc["inputs"] == ["r", "t"] and doc["outputs"] == ["polar[0]", "polar[1]"]


@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
def test_jacobian_of_a_function_equals_the_expression_road(tmp_path, mode):
    path = write(tmp_path, FUNCS)
    at = ["--at", "x=1.5,y=-0.25"]
    from_function = run_json("jacobian", f"{path}:branchy", *at, "--mode", mode)["jacobian"]
    from_expression = run_json("jacobian", "x * x * y", *at, "--mode", mode)["jacobian"]
    assert from_function == from_expression == [[2 * 1.5 * -0.25, 1.5**2]]


def test_hessian_of_rosenbrock_as_a_python_function(tmp_path):
    path = write(tmp_path, FUNCS)
    x, y = 1.5, 0.5
    doc = run_json("hessian", f"{path}:rosenbrock", "--at", f"x={x},y={y}")
    expected = [[2 - 400 * (y - x * x) + 800 * x * x, -400 * x], [-400 * x, 200.0]]
    np.testing.assert_allclose(doc["hessian"], expected, rtol=1e-14)
    np.testing.assert_allclose(doc["gradient"], [-2 * (1 - x) - 400 * x * (y - x * x), 200 * (y - x * x)], rtol=1e-14)
    expression = run_json("hessian", "(1 - x)^2 + 100*(y - x^2)^2", "--at", f"x={x},y={y}")
    assert doc["hessian"] == expression["hessian"]


def test_hessian_text_output_shows_the_numbers(tmp_path):
    path = write(tmp_path, FUNCS)
    result = run("hessian", f"{path}:rosenbrock", "--at", "x=1.5,y=0.5")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == ["x", "y", "x", "2502", "-600", "y", "-600", "200"]


def test_python_function_jacobian_and_hessian_match_torch(tmp_path):
    torch = pytest.importorskip("torch")
    path = write(tmp_path, FUNCS)
    x = torch.tensor([1.5, 0.5], dtype=torch.float64)
    rosen = lambda v: (1 - v[0]) ** 2 + 100 * (v[1] - v[0] ** 2) ** 2  # noqa: E731
    hess = torch.autograd.functional.hessian(rosen, x).numpy()
    np.testing.assert_allclose(run_json("hessian", f"{path}:rosenbrock", "--at", "x=1.5,y=0.5")["hessian"], hess,
                               rtol=1e-9)  # fmt: skip
    polar = lambda v: torch.stack([v[0] * torch.cos(v[1]), v[0] * torch.sin(v[1])])  # noqa: E731
    jac = torch.autograd.functional.jacobian(polar, torch.tensor([2.0, 0.5], dtype=torch.float64)).numpy()
    for mode in ("forward", "reverse"):
        doc = run_json("jacobian", f"{path}:polar", "--at", "r=2,t=0.5", "--mode", mode)
        np.testing.assert_allclose(doc["jacobian"], jac, rtol=1e-9)
