"""Issue 15 (mat15): reshape with a shape literal in the language; gc.einsum and gc.tensordot,
composed from rows, against PyTorch float64 in value, gradient and second derivative."""

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

rng = np.random.default_rng(15)


def _agree(f_gc, f_torch, xs):
    """Value, gradient of sum(f^2 w) and the gradient of sum(g^3) (second derivatives) agree."""
    ts = [gc.tensor(x, requires_grad=True) for x in xs]
    y = f_gc(*ts)
    tt = [torch.tensor(x, requires_grad=True) for x in xs]
    yt = f_torch(*tt)
    assert tuple(y.shape) == tuple(yt.shape)
    w = rng.standard_normal(tuple(yt.shape))
    gs = gc.grad(gc.sum(y**2 * w), ts, create_graph=True)
    hs = gc.grad(gc.sum(gc.stack([gc.sum(g**3) for g in gs])), ts)
    gt = torch.autograd.grad((yt**2 * torch.tensor(w)).sum(), tt, create_graph=True)
    ht = torch.autograd.grad(sum((g**3).sum() for g in gt), tt)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    for got, want in zip(list(gs) + list(hs), list(gt) + list(ht)):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-10)


EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),  # implicit output
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),  # implicit: a trace
    ("...ij,...jk->...ik", [(2, 2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("i,i->", [(3,), (3,)]),
    ("i,j->ij", [(3,), (2,)]),
    ("ij->ji", [(2, 3)]),
    ("...i,...i", [(2, 3), (3,)]),
    ("ijk,kj->i", [(2, 3, 4), (4, 3)]),
    ("iij->j", [(2, 2, 3)]),
    ("i,i,i->i", [(3,), (3,), (3,)]),
    ("ij,ij->", [(2, 3), (1, 3)]),
    (" ij , jk -> ki ", [(2, 3), (3, 2)]),
]


@needs_torch
@pytest.mark.parametrize("equation, shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum_agrees_with_pytorch(equation, shapes):
    xs = [rng.standard_normal(s) for s in shapes]
    _agree(lambda *ts: gc.einsum(equation, *ts), lambda *ts: torch.einsum(equation, *ts), xs)


@needs_torch
@pytest.mark.parametrize(
    "dims, sa, sb",
    [(2, (4, 3, 2), (3, 2, 5)), (1, (3, 2), (2, 4)), (0, (3, 2), (2,)), (([1, 0], [0, 1]), (3, 2), (2, 3)), (([0], [1]), (3, 2), (2, 3))],
)  # fmt: skip
def test_tensordot_agrees_with_pytorch(dims, sa, sb):
    xs = [rng.standard_normal(sa), rng.standard_normal(sb)]
    _agree(lambda a, b: gc.tensordot(a, b, dims), lambda a, b: torch.tensordot(a, b, dims), xs)


@needs_torch
def test_hessian_through_einsum_matches_pytorch():
    x = rng.standard_normal((2, 3))
    m = rng.standard_normal((3, 3))
    want = torch.autograd.functional.hessian(
        lambda t: torch.einsum("ij,jk,ik->", t, torch.tensor(m), t) ** 2, torch.tensor(x)
    )
    got = gc.functional.hessian(lambda t: gc.einsum("ij,jk,ik->", t, gc.tensor(m), t) ** 2, gc.tensor(x))
    np.testing.assert_allclose(np.asarray(got.numpy()), want.numpy(), rtol=1e-10, atol=1e-12)


def test_einsum_known_values_and_errors():
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(gc.einsum("ij->j", gc.tensor(a)).numpy(), a.sum(0))
    np.testing.assert_array_equal(gc.einsum("ij,kj", [gc.tensor(a), gc.tensor(a)]).numpy(), a @ a.T)
    for equation, args, message in [
        ("ij,jk->il", [a, a.T], "output subscript l"),
        ("ij->ii", [a], "more than once"),
        ("ijk", [a], "does not match"),
        ("ij,jk", [a], "2 operands"),
        ("ii", [a], "sizes don't match"),
    ]:
        with pytest.raises(RuntimeError, match=message):
            gc.einsum(equation, *args)
    with pytest.raises(RuntimeError, match="contracted dimensions need to match"):
        gc.tensordot(gc.tensor(a), gc.tensor(a), 1)


def test_language_reshape_with_a_shape_literal():
    runner = CliRunner()
    result = runner.invoke(app, ["eval", "--at", "x=[1,2,3,4,5,6]", "--", "sum(reshape(x, [2, 3]) @ [1, 2, 3])"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["value = 46", "d/dx  = [1, 2, 3, 1, 2, 3]   (shape (6,))"]
    result = runner.invoke(app, ["eval", "--at", "x=[1,2,3,4,5,6]", "--seed", "ones", "--", "reshape(x, [-1, 2])"])
    assert result.exit_code == 0 and result.stdout.startswith("value = [[1, 2], [3, 4], [5, 6]]   (shape (3, 2))")
    result = runner.invoke(app, ["check", "--at", "x=[1,2,3,4,5,6]", "--", "sum(reshape(x, [3, -1]) ^ 2 @ [1, 2])"])
    assert result.exit_code == 0 and "sympy" in result.output, result.output


@pytest.mark.parametrize(
    "text, message",
    [
        ("reshape(x, [4, 2])", "shape '[4, 2]' is invalid for input of size 6"),
        ("reshape(x, [-1, -1])", "only one dimension can be inferred"),
        ("reshape(x, [2.5, 2])", "a size must be a whole number"),
    ],
)
def test_language_reshape_refuses_with_a_caret(text, message):
    result = CliRunner().invoke(app, ["eval", "--at", "x=[1,2,3,4,5,6]", "--", text])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0] == f"error: reshape() at column 1: {message}" or (
        lines[0].startswith("error: ") and message in lines[0]
    )
    assert lines[1:] == [f"  {text}", "  ^"]
