"""Empty and 0-d shapes, and complex inputs, as PyTorch takes them (issue 27)."""

from __future__ import annotations

import numpy as np
import pytest

import gradcli as gc

torch = pytest.importorskip("torch", reason="the shapes and values are compared with PyTorch's")


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, dim", [((2, 0), 1), ((0, 3), 0), ((0, 3), 1), ((0,), 0)])
def test_softmax_over_a_zero_size_axis(name, shape, dim):
    x = gc.tensor(np.zeros(shape), requires_grad=True)
    y = getattr(gc, name)(x, dim)
    assert y.shape == tuple(getattr(torch, name)(torch.zeros(shape), dim).shape)
    (g,) = gc.grad(y.sum(), x)
    assert g.shape == shape


def test_logsumexp_over_a_zero_size_axis_is_minus_infinity():
    x = gc.tensor(np.zeros((2, 0)), requires_grad=True)
    y = gc.logsumexp(x, 1)
    assert y._value.tolist() == torch.logsumexp(torch.zeros(2, 0), 1).tolist() == [-np.inf, -np.inf]
    assert gc.grad(y.sum(), x)[0].shape == (2, 0)


def test_det_of_a_zero_by_zero_matrix_and_its_gradient():
    m = gc.tensor(np.zeros((0, 0)), requires_grad=True)
    y = gc.det(m)
    assert y.item() == 1.0
    (g,) = gc.grad(y, m)
    assert g.shape == (0, 0)
    batch = gc.tensor(np.zeros((3, 0, 0)), requires_grad=True)
    assert gc.grad(gc.det(batch).sum(), batch)[0].shape == (3, 0, 0)


def test_prod_over_an_empty_axis_in_both_modes():
    x = gc.tensor(np.zeros((2, 0)), requires_grad=True)
    out, tangent = gc.functional.jvp(lambda v: gc.prod(v, 1), (x,), (gc.tensor(np.zeros((2, 0))),))
    assert out._value.tolist() == [1.0, 1.0] and tangent._value.tolist() == [0.0, 0.0]
    assert gc.grad(gc.prod(x, 1).sum(), x)[0].shape == (2, 0)


def test_gather_and_index_select_keep_a_zero_d_shape():
    s = gc.tensor(3.0, requires_grad=True)
    t = torch.tensor(3.0, requires_grad=True)
    for index in (np.array(0), np.array([0])):
        y = gc.index_select(s, 0, index)
        assert y.shape == tuple(torch.index_select(t, 0, torch.tensor(index)).shape) == ()
        assert gc.grad(y, s)[0].item() == 1.0
    y = gc.gather(s, 0, np.array(0))
    assert y.shape == tuple(torch.gather(t, 0, torch.tensor(0)).shape) == ()


def test_cat_takes_a_legacy_empty_vector():
    a = gc.tensor(np.ones((2, 3)), requires_grad=True)
    e = gc.tensor(np.zeros(0))
    for items, dim in (([a, e], 0), ([e, a], 1), ([e, a, e], -1)):
        y = gc.cat(items, dim)
        want = torch.cat([torch.ones(2, 3) if i is a else torch.zeros(0) for i in items], dim)
        assert y.shape == tuple(want.shape) == (2, 3)
    (g,) = gc.grad(gc.cat([e, a], 0).sum(), a)
    assert g._value.tolist() == [[1.0] * 3] * 2
    assert gc.cat([e, gc.tensor([1.0, 2.0])]).shape == (2,)


@pytest.mark.parametrize(
    "sa, sb, dims",
    [
        ((2, 1), (3, 4), ([1], [0])),
        ((2, 3), (1, 4), ([1], [0])),
        ((2, 1, 3), (5, 3, 4), ([1, 2], [0, 1])),
        ((1,), (4,), 1),
    ],
)
def test_tensordot_broadcasts_a_size_one_contracted_axis(sa, sb, dims):
    rng = np.random.default_rng(len(sa) + len(sb))
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    ga, gb = gc.tensor(a, requires_grad=True), gc.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    y, ty = gc.tensordot(ga, gb, dims=dims), torch.tensordot(ta, tb, dims=dims)
    np.testing.assert_allclose(y._value, ty.detach().numpy(), rtol=1e-14)
    for g, t in zip(gc.grad((y * y).sum(), [ga, gb]), torch.autograd.grad((ty * ty).sum(), [ta, tb])):
        np.testing.assert_allclose(g._value, t.numpy(), rtol=1e-13)


@pytest.mark.parametrize("p", [0, -np.inf, np.inf, 1])
def test_norm_of_order_zero_and_minus_infinity_as_pytorch(p):
    x = np.array([[1.0, 0.0, -2.0], [0.5, -3.0, 0.0]])
    for dim in (None, 1):
        g, t = gc.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        y, ty = gc.norm(g, p, dim), torch.norm(t, p, dim)
        np.testing.assert_array_equal(y._value, ty.detach().numpy())
        (gg,) = gc.grad(y.sum(), g)
        (tg,) = torch.autograd.grad(ty.sum(), t, allow_unused=True, materialize_grads=True)  # p = 0: unused
        np.testing.assert_array_equal(gg._value, tg.numpy())


# --- complex ----------------------------------------------------------------------------------------------

RNG = np.random.default_rng(27)
Z = RNG.standard_normal((2, 3)) + 1j * RNG.standard_normal((2, 3))


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize("kw", [{}, {"dim": 1}, {"dim": 0, "correction": 0}, {"dim": 1, "keepdim": True}])
def test_var_and_std_of_complex_values_follow_pytorch(name, kw):
    g, t = gc.tensor(Z, requires_grad=True), torch.tensor(Z, requires_grad=True)
    y, ty = getattr(gc, name)(g, **kw), getattr(torch, name)(t, **kw)
    np.testing.assert_allclose(y._value, ty.detach().numpy(), rtol=1e-14)
    w = RNG.standard_normal(tuple(ty.shape))
    (gg,) = gc.grad((y * w).sum(), g)
    (tg,) = torch.autograd.grad((ty * torch.tensor(w)).sum(), t)
    np.testing.assert_allclose(gg._value, tg.numpy(), rtol=1e-13)
    u = RNG.standard_normal(Z.shape) + 1j * RNG.standard_normal(Z.shape)
    _, tangent = gc.functional.jvp(lambda v: getattr(gc, name)(v, **kw), (gc.tensor(Z),), (gc.tensor(u),))
    _, want = torch.func.jvp(lambda v: getattr(torch, name)(v, **kw), (torch.tensor(Z),), (torch.tensor(u),))
    np.testing.assert_allclose(tangent._value, want.numpy(), rtol=1e-13)


def test_logaddexp_of_complex_values_follows_pytorch():
    a, b = np.array([0.3 + 2.0j, -1 + 3j, 700 + 1j]), np.array([1.2 - 2.5j, 0.5 + 3.1j, 699 - 3j])
    ga, gb = gc.tensor(a, requires_grad=True), gc.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    y, ty = gc.logaddexp(ga, gb), torch.logaddexp(ta, tb)
    np.testing.assert_allclose(y._value, ty.detach().numpy(), rtol=1e-14)
    assert np.all(np.abs(y._value.imag) <= np.pi)
    w = np.array([0.7 - 0.2j, 1.1 + 0.3j, 0.5j])
    got = gc.grad(gc.real((y * w).sum()), [ga, gb])
    want = torch.autograd.grad((ty * torch.tensor(w)).sum().real, [ta, tb])
    for g, t in zip(got, want):
        np.testing.assert_allclose(g._value, t.numpy(), rtol=1e-13)


def test_logsumexp_of_complex_values_is_on_the_principal_branch():
    # the second row shifted by its largest element 0.1 + 3.1i ends at imag 4.1 (PyTorch: 4.1 - 2 pi)
    z = np.array([[0.3 + 3.0j, -0.5 + 2.9j, 1.1 + 3.1j], [0.1 + 3.1j, 0.0 - 1.0j, -5.0 + 0.0j]])
    y = gc.logsumexp(gc.tensor(z), 1)
    np.testing.assert_allclose(y._value, torch.logsumexp(torch.tensor(z), 1).numpy(), rtol=1e-14)
    np.testing.assert_allclose(y._value, np.log(np.exp(z).sum(1)), rtol=1e-14)
    assert np.all(np.abs(y._value.imag) <= np.pi)
