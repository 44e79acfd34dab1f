"""Issue 19: ``diff`` of a whole program, statement by statement, and ``--at``.

The two-layer MLP of the issue used to hit SymPy's time limit; differentiated step by step it
takes well under a second, states each derivative in the program's own names, and equals
autograd (and PyTorch in float64) at the point.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcli.cli.app import app
from gradcli.lang.compute import derivative_text, value_and_grad
from gradcli.lang.program import load
from gradcli.lang.values import assignments

runner = CliRunner()

MLP = "h = tanh(W1 @ x + b1); yhat = W2 @ h + b2; loss = sum((yhat - y)^2) / 2"
AT = "W1=[[0.5,-1],[1,0.5],[-0.5,1]],x=[1,2],b1=[0,1/2,-1/2],W2=[1,-1,2],b2=1/4,y=1"
AT_MATRIX = "W1=[[0.5,-1],[1,0.5],[-0.5,1]],x=[1,2],b1=[0,0.5,-0.5],W2=[[1,-1,2]],b2=[0.25],y=[1]"


def run(*args: str):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_the_mlp_differentiates_fast_in_its_own_names():
    start = time.perf_counter()
    out = run("diff", MLP, "--at", AT).stdout
    seconds = time.perf_counter() - start
    print(f"MLP diff took {seconds:.2f} s")
    assert seconds < 10  # the bound, generous under load (about 0.5 s idle)
    lines = out.splitlines()
    assert lines[0] == "dloss/dyhat = yhat - y ≈ -1.118574239884767"
    assert lines[1].startswith("dloss/dh    = W2*(yhat - y) ≈ [-1.11857423988476")
    labels = [line.split(" = ")[0].strip() for line in lines]
    assert labels == [f"dloss/d{n}" for n in ("yhat", "h", "W1", "x", "b1", "W2", "b2", "y")]
    assert "dloss/db1   = W2*(1 - h^2)*(yhat - y) ≈ " in out
    assert "dloss/dW2   = h*(yhat - y) ≈ " in out
    assert "dloss/dW1   = outer(W2*(1 - h^2)*(yhat - y), x) ≈ [[-0.2021337912761512, " in out


@pytest.mark.parametrize("at", [AT, AT_MATRIX], ids=["W2 a vector", "W2 1x3"])
def test_the_mlp_derivative_equals_autograd_every_way_it_is_given(at):
    doc = json.loads(run("diff", MLP, "--at", at, "--json").stdout)
    values = assignments([at])
    program = load(MLP)
    for name, text in doc["derivative"].items():
        expected = value_and_grad(program, values, [name]).gradient[name]
        np.testing.assert_allclose(doc["value"][name], expected, rtol=1e-12, atol=1e-14)
        # the text in the program's names reads back after the program's statements
        stepwise = load(f"{doc['statements']}; {text}").run(values).outputs[0].array
        np.testing.assert_allclose(np.broadcast_to(stepwise, expected.shape), expected, rtol=1e-12, atol=1e-14)
        # and expanded, in the variables only
        expanded = load(doc["expanded"][name]).run(values).outputs[0].array
        np.testing.assert_allclose(np.broadcast_to(expanded, expected.shape), expected, rtol=1e-12, atol=1e-14)
    assert list(doc["steps"]) == ["yhat", "h"]  # as backpropagation runs


def test_the_mlp_derivative_equals_torch_float64():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    doc = json.loads(run("diff", MLP, "--at", AT, "--json").stdout)
    values = {
        n: torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=True) for n, v in assignments([AT]).items()
    }
    h = torch.tanh(values["W1"] @ values["x"] + values["b1"])
    yhat = values["W2"] @ h + values["b2"]
    loss = torch.sum((yhat - values["y"]) ** 2) / 2
    grads = torch.autograd.grad(loss, list(values.values()))
    for (name, _), grad in zip(values.items(), grads):
        np.testing.assert_allclose(doc["value"][name], grad.numpy(), rtol=1e-12, atol=1e-14)


def test_at_gives_exact_values_where_the_inputs_are_exact():
    assert run("diff", "x^2*y", "--at", "x=1/3,y=2").stdout == "d/dx = 2*x*y = 4/3\nd/dy = x^2 = 1/9\n"
    doc = json.loads(run("diff", "x^2*y", "--at", "x=1/3,y=2", "--json").stdout)
    assert doc == {
        "derivative": {"x": "2*x*y", "y": "x^2"},
        "value": {"x": 4 / 3, "y": 1 / 9},
        "value_exact": {"x": "4/3", "y": "1/9"},
    }
    # 0.1 is read as 1/10; an irrational value is its float, marked ≈
    assert run("diff", "x^3", "--at", "x=0.1").stdout == "d/dx = 3*x^2 = 3/100\n"
    assert run("diff", "sin(x)", "--at", "x=2").stdout == "d/dx = cos(x) ≈ -0.4161468365471424\n"
    assert run("diff", "sum(v*v)", "--at", "v=[1/2,3]").stdout == "d/dv = 2*v = [1, 6]\n"
    doc = json.loads(run("diff", "sin(x)", "--at", "x=2", "--json").stdout)
    assert doc == {"derivative": {"x": "cos(x)"}, "value": {"x": np.cos(2.0)}}


def test_sympy_and_latex_forms():
    assert run("diff", "x^2*sigmoid(x)", "--sympy").stdout == (
        "d/dx = x**2*exp(-x)/(1 + exp(-x))**2 + 2*x/(1 + exp(-x))\n"
    )
    assert run("diff", "x^2*sigmoid(x)").stdout == "d/dx = x*(x + 2 - x*sigmoid(x))*sigmoid(x)\n"
    assert run("diff", "x^3", "--latex").stdout == "3 x^{2}\n"  # pure LaTeX: no d/dx =
    assert run("diff", "x^2*y", "--latex", "--at", "x=1/3,y=2").stdout == (
        "\\frac{\\partial f}{\\partial x} = 2 x y = \\frac{4}{3}\n\\frac{\\partial f}{\\partial y} = x^{2} = \\frac{1}{9}\n"
    )
    both = runner.invoke(app, ["diff", "x", "--latex", "--sympy"])
    assert both.exit_code == 2 and both.stderr == "error: give --latex or --sympy, not both\n"


def test_one_function_gives_the_printed_text():
    program = load("u = x^2; sin(u)")
    assert derivative_text(program, "x") == "2*x*cos(u)"
    assert derivative_text(program, "u") == "cos(u)"
    assert derivative_text(load("tanh(x)"), "x", form="sympy") == "1 - tanh(x)**2"
    assert derivative_text(load("sum(x*x)"), "x", {"x": (2,)}) == "2*x"
