"""Issue 15, matrices: inv (LinalgInvExBackward0) in the library and the language."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli.app import app

A0 = np.array([[2.0, 0.5, -0.3], [0.4, 1.5, 0.2], [0.1, -0.6, 1.8]])


def test_inverse_value_and_known_derivative():
    A = gc.tensor(A0, requires_grad=True)
    Y = gc.inv(A)
    np.testing.assert_allclose(Y.detach().numpy() @ A0, np.eye(3), atol=1e-14)
    assert Y.grad_fn.name() == "LinalgInvExBackward0" and gc.inverse is gc.inv
    (g,) = gc.grad(gc.trace(Y), [A])  # d tr(A^-1) = -(A^-2)^T
    inv = np.linalg.inv(A0)
    np.testing.assert_allclose(g.numpy(), -(inv @ inv).T, rtol=1e-13)


def test_first_and_second_derivatives_agree_with_pytorch():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    w = np.linspace(-1.0, 1.0, 9).reshape(3, 3)
    A = gc.tensor(A0, requires_grad=True)
    (g,) = gc.grad(gc.sum(gc.inv(A * A) ** 2 * w), [A], create_graph=True)
    (h,) = gc.grad(gc.sum(g * g), [A])
    T = torch.tensor(A0, requires_grad=True)
    (gt,) = torch.autograd.grad((torch.linalg.inv(T * T) ** 2 * torch.tensor(w)).sum(), [T], create_graph=True)
    (ht,) = torch.autograd.grad((gt * gt).sum(), [T])
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-9, atol=1e-12)
    gc.testing.assert_grad_close(lambda a: gc.sum(gc.inv(a) ** 3), [gc.tensor(A0, requires_grad=True)], method="fd")


@pytest.mark.parametrize(
    "at, message",
    [("A=[[1,2],[2,4]]", "the matrix is singular"), ("A=[[1,2,3],[2,4,5]]", "square matrix"), ("A=[1,2]", "matrix")],
)
def test_language_refuses_singular_and_non_square(at, message):
    result = CliRunner().invoke(app, ["eval", "--at", at, "--", "sum(inv(A))"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and message in result.stderr.splitlines()[0]


def test_language_inverse_checks_clean():
    result = CliRunner().invoke(
        app, ["check", "--at", "A=[[2,0.5],[0.4,1.5]]", "--at", "v=[1,2]", "--", "sum(inv(A) @ v)"]
    )
    assert result.exit_code == 0, result.output
    assert "sympy" in result.output
