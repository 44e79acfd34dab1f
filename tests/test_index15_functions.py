"""Issue 15, "index15": gather, index_select, masked_fill, narrow, chunk, unbind and repeat in the
library, against PyTorch float64: value, gradient, second derivative (double backward), forward
mode, backward node names, and errors in PyTorch's words. Index arrays are parameters: they
never require grad.
"""

from __future__ import annotations

import numpy as np
import pytest

import gradcli as gc
from gradcli.autograd.functional import jacobian

torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")

rng = np.random.default_rng(15150)
X = rng.uniform(-2.0, 2.0, size=(3, 4))
G = np.array([[0, 3, 3, 1], [2, 2, 0, 0]])  # gather along 1 with a smaller first axis, repeats
GT = torch.tensor(G)

CASES = [
    ("gather dim 1", lambda x: gc.gather(x, 1, G[:, :3]), lambda t: torch.gather(t, 1, GT[:, :3]), "GatherBackward0"),
    (
        "gather dim 0",
        lambda x: x.gather(0, np.array([[2, 0, 2, 1]])),
        lambda t: t.gather(0, torch.tensor([[2, 0, 2, 1]])),
        "GatherBackward0",
    ),
    (
        "gather dim -1",
        lambda x: x.gather(-1, G[:, :2]),
        lambda t: t.gather(-1, GT[:, :2]),
        "GatherBackward0",
    ),
    (
        "index_select",
        lambda x: x.index_select(1, np.array([3, 0, 3])),
        lambda t: t.index_select(1, torch.tensor([3, 0, 3])),
        "IndexSelectBackward0",
    ),
    (
        "index_select dim 0",
        lambda x: gc.index_select(x, 0, np.array([2, 2])),
        lambda t: torch.index_select(t, 0, torch.tensor([2, 2])),
        "IndexSelectBackward0",
    ),
    (
        "masked_fill",
        lambda x: x.masked_fill(x > 0.5, -1.5),
        lambda t: t.masked_fill(t > 0.5, -1.5),
        "MaskedFillBackward0",
    ),
    (
        "masked_fill broadcast mask",
        lambda x: gc.masked_fill(x, np.array([True, False, False, True]), 2.0),
        lambda t: torch.masked_fill(t, torch.tensor([True, False, False, True]), 2.0),
        "MaskedFillBackward0",
    ),
    ("narrow", lambda x: x.narrow(1, 1, 2), lambda t: t.narrow(1, 1, 2), "SliceBackward0"),
    ("narrow negative start", lambda x: gc.narrow(x, 0, -2, 2), lambda t: torch.narrow(t, 0, -2, 2), "SliceBackward0"),
    ("chunk", lambda x: x.chunk(3, 1)[1], lambda t: t.chunk(3, 1)[1], "SplitBackward0"),
    ("chunk last piece", lambda x: gc.chunk(x, 2)[1], lambda t: torch.chunk(t, 2)[1], "SplitBackward0"),
    ("unbind", lambda x: x.unbind(1)[2], lambda t: t.unbind(1)[2], "UnbindBackward0"),
    ("unbind dim 0", lambda x: gc.unbind(x)[0], lambda t: torch.unbind(t)[0], "UnbindBackward0"),
    ("repeat", lambda x: x.repeat(2, 1, 3), lambda t: t.repeat(2, 1, 3), "RepeatBackward0"),
    ("repeat a tuple", lambda x: gc.repeat(x, (1, 2)), lambda t: t.repeat((1, 2)), "RepeatBackward0"),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name, f, tf, node", CASES, ids=IDS)
def test_value_gradient_second_derivative_and_name_agree_with_torch(name, f, tf, node):
    x = gc.tensor(X, requires_grad=True)
    t = torch.tensor(X, requires_grad=True)
    y, ty = f(x), tf(t)
    assert type(y.grad_fn).__name__ == type(ty.grad_fn).__name__ == node
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    w = rng.standard_normal(tuple(ty.shape))
    (tg,) = torch.autograd.grad((torch.sin(ty) * torch.tensor(w)).sum(), t, create_graph=True)
    (g,) = gc.autograd.grad((gc.sin(y) * gc.tensor(w)).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-12, atol=1e-12)
    v = rng.standard_normal(X.shape)
    (th,) = torch.autograd.grad((tg * torch.tensor(v)).sum(), t)
    (h,) = gc.autograd.grad((g * gc.tensor(v)).sum(), x)
    np.testing.assert_allclose(h.numpy(), th.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name, f, tf, node", CASES, ids=IDS)
def test_forward_mode_agrees_with_torch(name, f, tf, node):
    want = torch.autograd.functional.jacobian(tf, torch.tensor(X))
    for strategy in ("forward-mode", "reverse-mode"):
        got = jacobian(f, gc.tensor(X), strategy=strategy)
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=strategy)


def test_gather_adds_up_repeated_positions():
    x = gc.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    x.gather(1, np.array([[0, 0, 2, 0]])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[3.0, 0.0, 1.0]])


def test_masked_fill_with_a_tensor_value_gives_it_the_gradient_summed_where_masked():
    x = gc.tensor(X, requires_grad=True)
    v = gc.tensor(0.5, requires_grad=True)
    t, tv = torch.tensor(X, requires_grad=True), torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    y, ty = x.masked_fill(x > 0, v * v), t.masked_fill(t > 0, tv * tv)
    assert type(y.grad_fn).__name__ == type(ty.grad_fn).__name__ == "MaskedFillBackward1"
    (y**2).sum().backward()
    (ty**2).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-13)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-13)


def test_chunk_and_unbind_give_every_piece():
    x = gc.tensor(np.arange(10.0).reshape(2, 5), requires_grad=True)
    pieces = x.chunk(2, 1)
    assert [p.shape for p in pieces] == [tuple(p.shape) for p in torch.arange(10.0).reshape(2, 5).chunk(2, 1)]
    assert [p.shape for p in x.unbind(1)] == [(2,)] * 5
    sum(p.sum() * (k + 1) for k, p in enumerate(pieces)).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1, 1, 1, 2, 2], [1, 1, 1, 2, 2]])


def test_index_arrays_are_not_inputs():
    x = gc.tensor(X, requires_grad=True)
    y = x.gather(1, G[:, :2])
    assert len(y.grad_fn.next_functions) == 1
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        (x > 0).requires_grad_()


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda x: x.gather(1, np.array([[4]])), RuntimeError, "index 4 is out of bounds for dimension 1 with size 4"),
        (
            lambda x: x.gather(1, np.array([[-1]])),
            RuntimeError,
            "index -1 is out of bounds for dimension 1 with size 4",
        ),
        (
            lambda x: x.gather(1, np.array([1])),
            RuntimeError,
            "Index tensor must have the same number of dimensions as input tensor",
        ),
        (lambda x: x.gather(1, np.array([[0.0]])), RuntimeError, "gather(): Expected dtype int32/int64 for index"),
        (
            lambda x: x.gather(1, np.zeros((4, 1), dtype=int)),
            RuntimeError,
            "Size does not match at dimension 0 expected index [4, 1] to be no larger than self [3, 4] apart from "
            "dimension 1",
        ),
        (lambda x: x.gather(2, np.zeros((1, 1), dtype=int)), IndexError, "Dimension out of range"),
        (lambda x: x.index_select(0, np.array([3])), IndexError, "index out of range in self"),
        (lambda x: x.index_select(0, np.array([[0]])), IndexError, "index_select(): Index is supposed to be a vector"),
        (
            lambda x: x.masked_fill(np.ones(4), 1.0),
            RuntimeError,
            "masked_fill_ only supports boolean masks, but got mask with dtype float",
        ),
        (
            lambda x: x.masked_fill(x > 0, gc.tensor([1.0])),
            RuntimeError,
            "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 dimension(s).",
        ),
        (lambda x: x.narrow(1, 3, 2), RuntimeError, "start (3) + length (2) exceeds dimension size (4)."),
        (lambda x: x.chunk(0), RuntimeError, "chunk expects `chunks` to be greater than 0, got: 0"),
        (
            lambda x: x.repeat(2),
            RuntimeError,
            "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor",
        ),
        (lambda x: x.unbind(2), IndexError, "Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
    ],
)
def test_errors_in_torch_words(call, error, message):
    with pytest.raises(error) as caught:
        call(gc.tensor(X, requires_grad=True))
    assert message in str(caught.value)
