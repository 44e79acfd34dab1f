"""Issue 15 (mat15): sort and topk, values differentiable, indices not, as PyTorch."""

from __future__ import annotations

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

X = np.array([[3.0, 1.0, 2.0, 1.0], [0.5, -1.0, 4.0, 4.0], [np.nan, 2.0, -3.0, 0.0]])
W = np.linspace(-1.0, 2.0, 12).reshape(3, 4)


def _both(fn_gc, fn_torch, x=X):
    a = gc.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    return a, t, fn_gc(a), fn_torch(t)


@needs_torch
@pytest.mark.parametrize("dim", [-1, 0, 1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_values_indices_and_gradient_agree_with_pytorch(dim, descending):
    a, t, (v, i), (vt, it) = _both(
        lambda a: gc.sort(a, dim=dim, descending=descending), lambda t: torch.sort(t, dim=dim, descending=descending)
    )
    np.testing.assert_array_equal(v.detach().numpy(), vt.detach().numpy())
    np.testing.assert_array_equal(i.numpy(), it.numpy())  # ties keep their order, NaN is the largest
    assert i.dtype == np.int64 and not i.requires_grad and v.grad_fn.name() == type(vt.grad_fn).__name__
    w = np.nan_to_num(W)
    (g,) = gc.grad(gc.sum(gc.where(v != v, 0.0, v) * w), [a])
    (gt,) = torch.autograd.grad(torch.where(vt.isnan(), 0.0, vt).mul(torch.tensor(w)).sum(), [t])
    np.testing.assert_array_equal(g.numpy(), gt.numpy())


@needs_torch
@pytest.mark.parametrize("k, dim, largest", [(2, -1, True), (1, 0, False), (3, 1, False), (0, -1, True)])
def test_topk_agrees_with_pytorch_on_distinct_values(k, dim, largest):
    x = np.array([[0.3, -1.2, 2.5, 0.9], [1.7, 0.2, -0.4, 3.1], [-2.0, 1.1, 0.6, 0.0]])
    a, t, (v, i), (vt, it) = _both(lambda a: a.topk(k, dim, largest), lambda t: torch.topk(t, k, dim, largest), x)
    np.testing.assert_array_equal(v.detach().numpy(), vt.detach().numpy())
    np.testing.assert_array_equal(i.numpy(), it.numpy())
    assert v.grad_fn.name() == type(vt.grad_fn).__name__ == "TopkBackward0"
    w = np.arange(1.0, 1.0 + np.prod(v.shape)).reshape(v.shape)
    (g,) = gc.grad(gc.sum(v * v * w), [a])
    (gt,) = torch.autograd.grad((vt * vt * torch.tensor(w)).sum(), [t])
    np.testing.assert_allclose(g.numpy(), gt.numpy(), rtol=1e-15)


def test_tie_gradient_goes_to_the_indexed_element():
    a = gc.tensor([2.0, 5.0, 5.0, 1.0], requires_grad=True)
    values, indices = gc.topk(a, 1)
    values.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.eye(4)[indices.numpy()[0]])


@needs_torch
def test_second_derivatives_agree_with_pytorch():
    x = np.array([[0.3, -1.2, 2.5], [1.7, 0.2, -0.4]])

    def f_gc(a):
        return gc.sum(gc.sort(a * a, 0, descending=True).values ** 3 * W[:2, :3]) + gc.sum(gc.topk(a, 2).values ** 3)

    def f_torch(t):
        w = torch.tensor(W[:2, :3])
        return (torch.sort(t * t, 0, descending=True).values ** 3 * w).sum() + (torch.topk(t, 2).values ** 3).sum()

    a = gc.tensor(x, requires_grad=True)
    (g,) = gc.grad(f_gc(a), [a], create_graph=True)
    rows = [gc.grad(g[i, j], [a], retain_graph=True)[0].numpy() for i in range(2) for j in range(3)]
    (h,) = gc.grad(gc.sum(g * g), [a])
    t = torch.tensor(x, requires_grad=True)
    (gt,) = torch.autograd.grad(f_torch(t), [t], create_graph=True)
    (ht,) = torch.autograd.grad((gt * gt).sum(), [t])
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-12)
    hess = torch.autograd.functional.hessian(f_torch, torch.tensor(x))
    np.testing.assert_allclose(np.array(rows).reshape(2, 3, 2, 3), hess.numpy(), rtol=1e-12, atol=1e-12)
    gc.testing.assert_grad_close(f_gc, [gc.tensor(x, requires_grad=True)], method="fd")


def test_zero_dim_and_bad_k():
    s = gc.tensor(2.5, requires_grad=True)
    values, indices = gc.sort(s)
    assert values.shape == () and indices.item() == 0
    values.backward()
    assert s.grad.item() == 1.0
    with pytest.raises(RuntimeError, match="k out of range"):
        gc.topk(gc.tensor([1.0, 2.0]), 3)
    with pytest.raises(RuntimeError, match="complex"):
        gc.sort(gc.tensor([1 + 1j, 2.0]))


def test_language_sort_and_topk():
    runner = CliRunner()
    result = runner.invoke(app, ["eval", "--at", "v=[3,1,2]", "--", "sum(sort(v) * [1,2,3]) + sum(topk(v, 2))"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["value = 19", "d/dv  = [4, 1, 3]   (shape (3,))"]
    result = runner.invoke(app, ["eval", "--at", "A=[[3,1],[0,2]]", "--seed", "ones", "--", "sort(A, 0)"])
    assert result.exit_code == 0 and "[[0, 1], [3, 2]]" in result.stdout.replace("\n", " "), result.output
    result = runner.invoke(app, ["check", "--at", "v=[3,1,2]", "--", "sum(topk(v, 2, 0)^2)"])
    assert result.exit_code == 0, result.output
    for bad, message in (("topk(v, 4)", "k out of range"), ("topk(v, 1.5)", "whole number")):
        result = runner.invoke(app, ["eval", "--at", "v=[3,1,2]", "--", bad])
        assert result.exit_code == 2 and result.stderr.startswith("error: ") and message in result.stderr
        assert "Traceback" not in result.stderr
