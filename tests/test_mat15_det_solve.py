"""Issue 15 (mat15): det and solve, first and second derivatives as PyTorch, right at singular A."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli.app import app

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

A0 = np.array([[2.0, 0.5, -0.3], [0.4, 1.5, 0.2], [0.1, -0.6, 1.8]])
RANK2 = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
RANK1 = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 6.0, 9.0]])
W = np.linspace(-1.0, 1.0, 9).reshape(3, 3)


def test_det_known_gradient_is_the_cofactor_matrix():
    A = gc.tensor(A0, requires_grad=True)
    d = gc.det(A)
    assert d.grad_fn.name() == "LinalgDetBackward0" and gc.linalg.det is gc.det
    np.testing.assert_allclose(d.item(), np.linalg.det(A0), rtol=1e-15)
    d.backward()
    np.testing.assert_allclose(A.grad.numpy(), np.linalg.det(A0) * np.linalg.inv(A0).T, rtol=1e-13)
    B = gc.tensor(RANK2, requires_grad=True)  # singular: the cofactors, not NaN
    B.det().backward()
    cof = np.array([[4.0, 4.0, -4.0], [-2.0, -2.0, 2.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(B.grad.numpy(), cof, atol=1e-13)


@needs_torch
@pytest.mark.parametrize("M", [A0, RANK2, RANK1, np.stack([A0, RANK2])], ids=["regular", "rank2", "rank1", "batch"])
def test_det_first_and_second_derivatives_agree_with_pytorch(M):
    w = np.broadcast_to(W, M.shape)
    A = gc.tensor(M, requires_grad=True)
    (g,) = gc.grad(gc.sum(gc.det(A * 1.5) ** 2), [A], create_graph=True)
    (h,) = gc.grad(gc.sum(g * g * w), [A])
    T = torch.tensor(M, requires_grad=True)
    (gt,) = torch.autograd.grad((torch.linalg.det(T * 1.5) ** 2).sum(), [T], create_graph=True)
    (ht,) = torch.autograd.grad((gt * gt * torch.tensor(w)).sum(), [T])
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-9, atol=1e-10)
    if M.ndim == 2:
        hess = torch.autograd.functional.hessian(lambda t: torch.linalg.det(t), torch.tensor(M))
        got = gc.functional.hessian(gc.det, gc.tensor(M))
        np.testing.assert_allclose(np.asarray(got.numpy()), hess.numpy(), atol=1e-12)


@needs_torch
@pytest.mark.parametrize(
    "a, b",
    [(A0, np.array([1.0, -2.0, 0.5])), (A0, np.arange(6.0).reshape(3, 2)), (np.stack([A0, A0.T]), np.ones((2, 3)))],
    ids=["vector", "matrix", "batch-of-vectors"],
)
def test_solve_first_and_second_derivatives_agree_with_pytorch(a, b):
    w = np.linspace(-1.0, 1.0, b.size).reshape(b.shape)
    A, B = gc.tensor(a, requires_grad=True), gc.tensor(b, requires_grad=True)
    x = gc.linalg.solve(A, B)
    assert x.grad_fn.name() == "LinalgSolveExBackward0"
    ga, gb = gc.grad(gc.sum(x**3 * w), [A, B], create_graph=True)
    ha, hb = gc.grad(gc.sum(ga * ga) + gc.sum(gb**3), [A, B])
    TA, TB = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    xt = torch.linalg.solve(TA, TB)
    gat, gbt = torch.autograd.grad((xt**3 * torch.tensor(w)).sum(), [TA, TB], create_graph=True)
    hat, hbt = torch.autograd.grad((gat * gat).sum() + (gbt**3).sum(), [TA, TB])
    for got, want in [(x, xt), (ga, gat), (gb, gbt), (ha, hat), (hb, hbt)]:
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_solve_known_gradients_and_left_false():
    A, b = gc.tensor(A0, requires_grad=True), gc.tensor([1.0, -2.0, 0.5], requires_grad=True)
    x = gc.solve(A, b)
    np.testing.assert_allclose(A0 @ x.detach().numpy(), [1.0, -2.0, 0.5], atol=1e-15)
    x.sum().backward()
    gb = np.linalg.solve(A0.T, np.ones(3))
    np.testing.assert_allclose(b.grad.numpy(), gb, rtol=1e-14)
    np.testing.assert_allclose(A.grad.numpy(), -np.outer(gb, x.detach().numpy()), rtol=1e-14)
    B = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(gc.linalg.solve(gc.tensor(A0), gc.tensor(B), left=False).numpy() @ A0, B, atol=1e-14)
    gc.testing.assert_grad_close(
        lambda a, v: gc.sum(gc.solve(a, v) ** 2),
        [A.detach().requires_grad_(), b.detach().requires_grad_()],
        method="fd",
    )


def test_solve_refuses_singular_and_mismatched():
    with pytest.raises(RuntimeError, match="singular"):
        gc.solve(gc.tensor(RANK1), gc.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(RuntimeError, match="Incompatible shapes"):
        gc.solve(gc.tensor(A0), gc.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="square"):
        gc.det(gc.tensor(np.ones((2, 3))))


@pytest.mark.parametrize(
    "args, value, gradient",
    [
        (["--at", "A=[[2,1],[1,3]]", "--", "det(A)"], 5.0, {"A": [[3.0, -1.0], [-1.0, 2.0]]}),
        (["--at", "A=[[1,2],[2,4]]", "--", "det(A)"], 0.0, {"A": [[4.0, -2.0], [-2.0, 1.0]]}),  # singular
        (["--at", "A=[[2,0],[0,4]]", "--at", "b=[2,4]", "--", "sum(solve(A, b))"], 2.0,
         {"A": [[-0.5, -0.5], [-0.25, -0.25]], "b": [0.5, 0.25]}),
    ],
)  # fmt: skip
def test_language_det_and_solve(args, value, gradient):
    result = CliRunner().invoke(app, ["eval", "--json", *args])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["value"] == pytest.approx(value, abs=1e-14)
    for name, want in gradient.items():
        np.testing.assert_allclose(document["gradient"][name], want, atol=1e-14)


@pytest.mark.parametrize("at, message", [("A=[[1,2],[2,4]]", "singular"), ("A=[[1,2,3],[2,4,5]]", "square")])
def test_language_solve_refuses_with_one_error_line(at, message):
    result = CliRunner().invoke(app, ["eval", "--at", at, "--at", "b=[1,2]", "--", "sum(solve(A, b))"])
    assert result.exit_code == 2 and result.stderr.startswith("error: ") and message in result.stderr.splitlines()[0]


def test_language_check_with_sympy():
    result = CliRunner().invoke(
        app, ["check", "--at", "A=[[2,0.5],[0.4,1.5]]", "--at", "v=[1,2]", "--", "det(A) * sum(solve(A, v))"]
    )
    assert result.exit_code == 0, result.output
    assert "sympy" in result.output and "OK" in result.output


@needs_torch
@pytest.mark.parametrize("singular", [False, True])
def test_det_of_a_larger_matrix_second_derivative(singular):
    """Above the minors' size: det(A) inv(A)^T recorded, the minors where A is singular."""
    M = np.eye(6) * 2 + np.linspace(-0.5, 0.5, 36).reshape(6, 6)
    if singular:
        M[5] = M[0] + M[1]
    A = gc.tensor(M, requires_grad=True)
    (g,) = gc.grad(gc.det(A), [A], create_graph=True)
    (h,) = gc.grad(gc.sum(g * g), [A])
    T = torch.tensor(M, requires_grad=True)
    (gt,) = torch.autograd.grad(torch.linalg.det(T), [T], create_graph=True)
    (ht,) = torch.autograd.grad((gt * gt).sum(), [T])
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-9, atol=1e-12)
    if not singular:
        np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-9, atol=1e-11)
        return
    # at this singular A PyTorch's second derivative (its SVD route) is off; finite differences of
    # the first derivative (which agrees with PyTorch) are the reference

    def cofactor_norm(m):
        a = gc.tensor(m, requires_grad=True)
        (first,) = gc.grad(gc.det(a), [a])
        return float(np.sum(first.numpy() ** 2))

    step, fd = 1e-5, np.zeros_like(M)
    for i, j in np.ndindex(*M.shape):
        d = np.zeros_like(M)
        d[i, j] = step
        fd[i, j] = (cofactor_norm(M + d) - cofactor_norm(M - d)) / (2 * step)
    np.testing.assert_allclose(h.numpy(), fd, rtol=1e-6, atol=1e-5)
