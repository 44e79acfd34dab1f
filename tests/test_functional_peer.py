"""gc.functional and gc.testing where features meet, in the style of PyTorch's autograd/test_functional.py.

Torch-free tests check known values; the ``torch`` fixture skips a test when PyTorch is not installed,
and otherwise compares with ``torch.autograd.functional`` in float64 (issue 12, issue 13).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app
from gradcli.functional import jacobian

runner = CliRunner()


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def cli(*args: str):
    result = runner.invoke(app, expression_after_dashes(list(args)))
    assert "Traceback" not in result.output + result.stderr, result.output + result.stderr
    return result


# --- constant outputs give zero rows ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
def test_a_constant_output_beside_others_gives_a_zero_row(mode):
    x = gc.tensor([1.0, 2.0])
    j_x, j_c = jacobian(lambda x: (x * x, gc.tensor(1.0)), x, mode=mode)
    np.testing.assert_array_equal(j_x.numpy(), [[2.0, 0.0], [0.0, 4.0]])
    np.testing.assert_array_equal(j_c.numpy(), [0.0, 0.0])
    j_c, j_x = jacobian(lambda x: (gc.tensor([5.0, 6.0, 7.0]), x), x, mode=mode)
    np.testing.assert_array_equal(j_c.numpy(), np.zeros((3, 2)))
    np.testing.assert_array_equal(j_x.numpy(), np.eye(2))


def test_assert_grad_close_accepts_a_constant_output():
    gc.testing.assert_grad_close(lambda x: (x, gc.tensor(1.0)), gc.tensor([1.0, 2.0], requires_grad=True))
    gc.testing.assert_grad_close(lambda x: (gc.tensor(1.0), gc.sin(x)), gc.tensor(0.5, requires_grad=True))


@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
@pytest.mark.parametrize("expression", ["max(x,y), 3", "3, max(x,y)", "where(x > y, x, y), 3", "clamp(y, 0, x), 3"])
def test_cli_jacobian_with_a_constant_output_beside_a_kink(expression, mode):
    result = cli("jacobian", expression, "--at", "x=0.5,y=2", "--mode", mode, "--json")
    assert result.exit_code == 0, result.output + result.stderr
    doc = json.loads(result.stdout)
    # d/dx, d/dy of each output: the bound x is active in clamp(2, 0, 0.5)
    row = {"max(x,y)": (0.0, 1.0), "where(x > y, x, y)": (0.0, 1.0), "clamp(y, 0, x)": (1.0, 0.0), "3": (0.0, 0.0)}
    assert sorted(doc["inputs"]) == ["x", "y"]
    assert doc["jacobian"] == [[row[o][i == "y"] for i in doc["inputs"]] for o in doc["outputs"]]


def test_cli_jacobian_constant_output_table():
    result = cli("jacobian", "max(x,y), 3", "--at", "x=0.5,y=2")
    assert result.exit_code == 0
    assert result.stdout.split("\n")[1:3] == ["max(x,y)  0  1", "3         0  0"]
