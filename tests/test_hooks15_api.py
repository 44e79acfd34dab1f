"""Issue 15: small API gaps: del x.grad, numpy() under no_grad, max/min(dim=) as PyTorch's
(values, indices) with the gradient to the index returned, tensors that pickle and deep-copy."""

import copy
import pickle

import numpy as np
import pytest

import gradcli as gc

NUMPY_ERROR = "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
TIES = [[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]


def test_del_grad_sets_none():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]
    del x.grad
    assert x.grad is None
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_numpy_allowed_under_no_grad_or_without_grad():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError) as error:
        x.numpy()
    assert str(error.value) == NUMPY_ERROR
    with gc.no_grad():
        a = x.numpy()
    assert a.tolist() == [1.0, 2.0]
    assert np.shares_memory(a, x.detach().numpy())
    assert gc.tensor([1, 2]).numpy().dtype == np.int64
    assert (x * 2).detach().numpy().tolist() == [2.0, 4.0]


@pytest.mark.parametrize(
    ("call", "values", "indices", "name", "grad"),
    [
        (lambda x: gc.max(x, dim=1), [3.0, 2.0], [1, 0], "MaxBackward0", [[0, 1, 0], [1, 0, 0]]),
        (lambda x: x.max(1), [3.0, 2.0], [1, 0], "MaxBackward0", [[0, 1, 0], [1, 0, 0]]),
        (lambda x: x.max(dim=-1, keepdim=True), [[3.0], [2.0]], [[1], [0]], "MaxBackward0", [[0, 1, 0], [1, 0, 0]]),
        (lambda x: gc.min(x, 0), [1.0, 2.0, 0.0], [0, 1, 1], "MinBackward0", [[1, 0, 0], [0, 1, 1]]),
        (lambda x: x.min(dim=0, keepdim=True), [[1.0, 2.0, 0.0]], [[0, 1, 1]], "MinBackward0", [[1, 0, 0], [0, 1, 1]]),
    ],
)
def test_max_min_with_dim_return_values_and_indices(call, values, indices, name, grad):
    x = gc.tensor(TIES, requires_grad=True)
    result = call(x)
    assert type(result).__name__ in ("max", "min") and result._fields == ("values", "indices")
    v, i = result
    assert v is result.values and i is result.indices
    assert v.tolist() == values and i.tolist() == indices
    assert i.dtype == gc.int64 and not i.requires_grad
    assert type(v.grad_fn).__name__ == name
    v.sum().backward()
    assert x.grad.tolist() == grad  # ties: all of it to the index returned, as PyTorch


def test_max_dim_second_derivative_and_forward_mode():
    x = gc.tensor([[0.5, 2.0], [1.5, -1.0]], requires_grad=True)
    v = gc.max(x * x, dim=1).values  # x01^2, x10^2
    (g,) = gc.grad(v.sum(), x, create_graph=True)
    assert g.tolist() == [[0.0, 4.0], [3.0, 0.0]]
    (gg,) = gc.grad(g.sum(), x)
    assert gg.tolist() == [[0.0, 2.0], [2.0, 0.0]]
    _, tangent = gc.functional.jvp(lambda t: gc.max(t, dim=0).values, x.detach(), gc.ones(2, 2))
    assert tangent.tolist() == [1.0, 1.0]


def test_max_without_dim_still_shares_ties():
    x = gc.tensor(TIES, requires_grad=True)
    x.max().backward()
    assert x.grad.tolist() == [[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]]


def test_max_dim_as_pytorch():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    rng = np.random.default_rng(15)
    for data in (np.array(TIES), rng.integers(0, 3, size=(3, 4, 2)).astype(float), rng.standard_normal((2, 5))):
        for dim in range(-data.ndim, data.ndim):
            for keepdim in (False, True):
                for op in ("max", "min"):
                    t = torch.tensor(data, requires_grad=True)
                    g = gc.tensor(data, requires_grad=True)
                    rt, rg = getattr(t, op)(dim=dim, keepdim=keepdim), getattr(g, op)(dim=dim, keepdim=keepdim)
                    assert rg.values.tolist() == rt.values.tolist()
                    assert rg.indices.tolist() == rt.indices.tolist()
                    assert type(rg.values.grad_fn).__name__ == type(rt.values.grad_fn).__name__
                    w = rng.standard_normal(rt.values.shape)
                    (rt.values * torch.tensor(w)).sum().backward()
                    (rg.values * gc.tensor(w)).sum().backward()
                    np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=0, atol=1e-15)


@pytest.mark.parametrize(
    "make",
    [
        lambda: gc.tensor([[1.0, 2.0]], requires_grad=True),
        lambda: gc.tensor([1.0, 2.0], requires_grad=True) * 2,
        lambda: gc.tensor([1, 2]),
        lambda: gc.tensor(3.5),
        lambda: gc.tensor([True, False]),
        lambda: gc.tensor([1.0, 2.0], dtype=gc.float32),
        lambda: gc.tensor([1 + 2j]),
    ],
)
def test_tensors_pickle_with_value_dtype_and_requires_grad(make):
    t = make()
    u = pickle.loads(pickle.dumps(t))
    assert u.tolist() == t.tolist() and u.dtype == t.dtype and u.shape == t.shape
    assert u.requires_grad == t.requires_grad
    assert u.is_leaf and u.grad_fn is None and u.grad is None  # a computed tensor comes back a leaf, as in PyTorch
    if u.requires_grad:
        (u * u).sum().backward()
        assert u.grad.tolist() == (2 * np.asarray(t.tolist())).tolist()


def test_pickle_as_pytorch():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    for lib in (torch, gc):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.grad = lib.ones_like(x)
        for t in (x, x * 2):
            u = pickle.loads(pickle.dumps(t))
            assert (u.requires_grad, u.is_leaf, u.grad) == (True, True, None), lib


def test_deepcopy_copies_a_leaf_and_refuses_a_computed_tensor():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    x.grad = gc.ones(2)
    y = copy.deepcopy(x)
    assert y.tolist() == [1.0, 2.0] and y.requires_grad and y.grad.tolist() == [1.0, 1.0] and y.grad is not x.grad
    with pytest.raises(RuntimeError, match=r"^Only Tensors created explicitly by the user \(graph leaves\)"):
        copy.deepcopy(x * 2)
