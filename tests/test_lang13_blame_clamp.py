"""Issue 13: ``check --blame`` blamed correct primitives, complex step misread norm at 0, and
clamp(z, y, y) lost the gradient of y.

- erf took a complex step through ``math.erf(float(x))``, which drops the imaginary part (with a
  ComplexWarning): the complex step read 0 and --blame named the built-in erf.
- At norm's kink at 0, sqrt(-h^2) = ih whichever way the step goes: the complex step "found" a
  derivative of 1 (a false MISMATCH, and a false blame).
- clamp(z, y, y) is y, so d/dy = 1; the bound rules gave it to no one at z < y.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcli.cli.app import app
from gradcli.lang.compute import value_and_grad
from gradcli.lang.program import load

runner = CliRunner()


def check_json(expr: str, *args: str):
    result = runner.invoke(app, ["check", "--json", *args, "--", expr])
    return result, json.loads(result.stdout)


@pytest.mark.parametrize(
    "expr, at",
    [
        ("erf(x)", "x=0.5"),
        ("erf(x)", "x=-2"),
        ("sum(erf(u))", "u=[0.5,-1,2]"),
        ("erf(x) * x", "x=0.25"),
        ("norm(x)", "x=[0,0]"),
        ("norm(x) + x[0]", "x=[0,0]"),
        ("norm(x)", "x=[3,4]"),
    ],
)
def test_blame_does_not_blame_correct_builtins(expr, at):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning from ops/elementwise.py either
        result, doc = check_json(expr, "--at", at, "--blame")
    assert result.exit_code == 0, result.output
    assert doc["ok"] is True
    assert "ComplexWarning" not in result.output and "Warning" not in result.stderr


def test_erf_blame_text_says_every_node_agrees():
    result = runner.invoke(app, ["check", "erf(x)", "--at", "x=0.5", "--blame"])
    assert result.exit_code == 0, result.output
    assert "blame: the derivatives of all 2 nodes agree with finite differences" in result.stdout
    assert result.stderr == ""


def test_erf_refuses_complex_values_instead_of_dropping_the_imaginary_part():
    from gradcli.ops.elementwise import ERF

    try:
        import scipy.special  # noqa: F401
    except ImportError:
        with pytest.raises(TypeError, match="complex"):
            ERF.forward(np.complex128(0.5 + 1e-20j))
    else:
        assert ERF.forward(np.complex128(0.5 + 1e-20j)).imag != 0


def test_complex_step_is_not_compared_at_a_branch_point():
    result, doc = check_json("norm(x)", "--at", "x=[0,0]")
    assert result.exit_code == 0, result.output
    assert doc["gradient"] == {"x": [0.0, 0.0]}
    assert doc["checks"]["complex_step"]["ok"] is None
    assert "not complex-analytic at this point" in doc["checks"]["complex_step"]["reason"]
    # away from 0 the complex step still compares, and a wrong gradient is still caught
    result, doc = check_json("norm(x)", "--at", "x=[3,4]")
    assert doc["checks"]["complex_step"]["ok"] is True


def _torch_clamp(z, lo, hi):
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    t = [torch.tensor(float(v), dtype=torch.float64, requires_grad=True) for v in (z, lo, hi)]
    out = torch.clamp(*t)
    out.backward()
    return out.item(), [v.grad.item() for v in t]


def _gradcli_clamp(z, lo, hi):
    values = {"z": np.float64(z), "lo": np.float64(lo), "hi": np.float64(hi)}
    result = value_and_grad(load("clamp(z, lo, hi)"), values, ["z", "lo", "hi"])
    return float(result.value), [float(result.gradient[n]) for n in ("z", "lo", "hi")]


# every ordering of x, lo, hi with ties; (1, 2, 2) is where PyTorch gives the gradient to no one
CASES = [(1, 2, 3), (2, 2, 3), (2.5, 2, 3), (3, 2, 3), (4, 2, 3), (2, 2, 2), (3, 2, 2),
         (1, 3, 2), (2, 3, 2), (2.5, 3, 2), (3, 3, 2), (4, 3, 2)]  # fmt: skip


@pytest.mark.parametrize("z, lo, hi", CASES)
def test_clamp_with_tensor_bounds_follows_torch(z, lo, hi):
    assert _gradcli_clamp(z, lo, hi) == _torch_clamp(z, lo, hi)


def test_clamp_below_equal_bounds_gives_the_gradient_to_the_bound():
    value, grads = _gradcli_clamp(1, 2, 2)
    assert value == 2.0 and grads == [0.0, 0.0, 1.0]  # PyTorch: [0, 0, 0]; the sum over y must be 1


@pytest.mark.parametrize("z, d_z, d_y", [(1.0, 0.0, 1.0), (2.0, 1.0, 0.0), (3.0, 0.0, 1.0)])
def test_clamp_z_y_y_is_y(z, d_z, d_y):
    values = {"z": np.float64(z), "y": np.float64(2.0)}
    result = value_and_grad(load("clamp(z, y, y)"), values, ["z", "y"])
    assert (float(result.value), float(result.gradient["z"]), float(result.gradient["y"])) == (2.0, d_z, d_y)
    doc = json.loads(runner.invoke(app, ["jacobian", "--json", "clamp(z, y, y)", "--at", f"z={z},y=2",
                                         "--mode", "forward"]).stdout)  # fmt: skip
    assert doc["jacobian"] == [[d_z, d_y]]


def test_check_of_clamp_z_y_y_passes():
    result, doc = check_json("clamp(z, y, y)", "--at", "z=1,y=2")
    assert result.exit_code == 0, result.output
    assert doc["gradient"] == {"z": 0.0, "y": 1.0}
