"""Every example of ../shared/seeds/ that prints something, with the seed's output.

The seeds run PyTorch; here the same code runs on gradcli (``torch`` -> ``gc``)
and must print what the seed printed. Where the seed used float32
(``torch.FloatTensor``), so do we; gradcli's default is float64, which prints
without a dtype suffix just as PyTorch's default float32 does.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gradcli as gc


def test_000_mm_vector_jacobian_products_rows_of_the_jacobian():
    x = gc.tensor([[1, 2]], dtype=gc.float32)
    x.requires_grad = True
    y = gc.tensor([[3, 4], [5, 6]], dtype=gc.float32)
    y.requires_grad = True
    loss = gc.mm(x, y)
    loss.backward(gc.tensor([[1, 0]], dtype=gc.float32), retain_graph=True)
    assert repr(x.grad.data) == "tensor([[3., 5.]], dtype=float32)"
    x.grad.data.zero_()
    loss.backward(gc.tensor([[0, 1]], dtype=gc.float32))
    assert repr(x.grad.data) == "tensor([[4., 6.]], dtype=float32)"
    assert loss.grad_fn.name() == "MmBackward0"


def test_000_linear_layer_backward_twice_fails_then_retain_graph_works():
    inp = gc.randn(2, 3, requires_grad=True)
    weight, bias = gc.randn(4, 3, requires_grad=True), gc.randn(4, requires_grad=True)
    loss = gc.sum(inp @ weight.T + bias)
    loss.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        loss.backward()
    # As in PyTorch, the leaf reached before the freed node still accumulated: 2 + 2
    np.testing.assert_array_equal(bias.grad.numpy(), [4.0] * 4)
    bias.grad = None
    loss = gc.sum(inp @ weight.T + bias)
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_array_equal(bias.grad.numpy(), [4.0] * 4)  # two backwards, two rows each


def _seed001_graph(shape=(3, 3)):
    a = gc.randn(shape, requires_grad=True)
    w1, w2, w3, w4 = (gc.randn(shape, requires_grad=True) for _ in range(4))
    b = w1 * a
    c = w2 * a
    d = w3 * b + w4 * c
    return a, (w1, w2, w3, w4), d


def test_001_grad_fn_of_leaf_and_of_sum():
    a, _, d = _seed001_graph()
    assert a.grad_fn is None
    assert repr(d.grad_fn).startswith("<AddBackward0 object at 0x")
    assert a.is_leaf and not d.is_leaf


def test_001_backward_on_non_scalar_fails_and_the_two_fixes_agree():
    a, (w1, w2, w3, w4), d = _seed001_graph()
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (10 - d).backward()
    (10 - d).sum().backward()
    expected = -(w3._value * w1._value + w4._value * w2._value)  # dL/da, summed over both paths
    np.testing.assert_allclose(a.grad.numpy(), expected, rtol=1e-15)
    a.grad = None
    L = 10 - (w3 * (w1 * a) + w4 * (w2 * a))
    L.backward(gc.ones(L.shape))
    np.testing.assert_allclose(a.grad.numpy(), expected, rtol=1e-15)


def test_001_no_grad_without_parentheses_as_the_seed_writes_it():
    a = gc.randn(3, requires_grad=True)
    with gc.no_grad:
        b = a * 2
    assert not b.requires_grad and b.grad_fn is None


def test_002_two_paths_summed_w_grad_is_5():
    w = gc.tensor([1.0], requires_grad=True)
    x = gc.tensor([2.0], requires_grad=True)
    a = gc.add(w, x)
    b = gc.add(w, 1)
    y = gc.mul(a, b)
    y.backward()
    assert repr(w.grad) == "tensor([5.])"
    assert (w.is_leaf, x.is_leaf, a.is_leaf, b.is_leaf, y.is_leaf) == (True, True, False, False, False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grads = (w.grad, x.grad, a.grad, b.grad, y.grad)
    assert [repr(g) for g in grads] == ["tensor([5.])", "tensor([2.])", "None", "None", "None"]
    assert len(caught) == 3 and "not a leaf Tensor" in str(caught[0].message)
    assert w.grad_fn is None and x.grad_fn is None
    assert [type(t.grad_fn).__name__ for t in (a, b, y)] == ["AddBackward0", "AddBackward0", "MulBackward0"]


def _case1():
    x = gc.tensor(2.0, requires_grad=True)
    a = gc.add(x, 1)
    b = gc.add(x, 2)
    return x, a, b, gc.mul(a, b)


def test_003_case1_backward_and_attributes():
    x, a, b, y = _case1()
    y.backward()
    assert repr(x.grad) == "tensor(7.)"
    assert (x.requires_grad, a.requires_grad, b.requires_grad, y.requires_grad) == (True, True, True, True)
    assert (x.is_leaf, a.is_leaf, b.is_leaf, y.is_leaf) == (True, False, False, False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert (a.grad, b.grad, y.grad) == (None, None, None)


def test_003_case1_autograd_grad_returns_a_tuple():
    x, _, _, y = _case1()
    grad = gc.grad(outputs=y, inputs=x)
    assert isinstance(grad, tuple) and repr(grad[0]) == "tensor(7.)"
    assert x.grad is None  # grad() returns, it does not accumulate


def _case2():
    x = gc.tensor(2.0).requires_grad_()
    y = gc.tensor(3.0).requires_grad_()
    return x, y, x * x * y


def test_003_case2_first_derivatives_12_and_4():
    x, y, z = _case2()
    z.backward()
    assert (repr(x.grad), repr(y.grad)) == ("tensor(12.)", "tensor(4.)")
    x, y, z = _case2()
    assert repr(gc.grad(outputs=z, inputs=x)[0]) == "tensor(12.)"


def test_003_case2_retain_graph_then_grad_for_y():
    x, y, z = _case2()
    grad_x = gc.grad(outputs=z, inputs=x, retain_graph=True)
    grad_y = gc.grad(outputs=z, inputs=y)
    assert (repr(grad_x[0]), repr(grad_y[0])) == ("tensor(12.)", "tensor(4.)")


def test_003_case2_second_derivative_needs_create_graph():
    x, y, z = _case2()
    grad_x = gc.grad(outputs=z, inputs=x, retain_graph=True)
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and does not have a grad_fn"):
        gc.grad(outputs=grad_x, inputs=x)


def test_003_case2_second_derivative_is_6_in_all_four_combinations():
    x, y, z = _case2()  # grad + grad
    grad_x = gc.grad(outputs=z, inputs=x, create_graph=True)
    assert repr(gc.grad(outputs=grad_x, inputs=x)[0]) == "tensor(6.)"
    x, y, z = _case2()  # grad + backward
    gc.grad(outputs=z, inputs=x, create_graph=True)[0].backward()
    assert repr(x.grad) == "tensor(6.)"
    x, y, z = _case2()  # backward + grad
    z.backward(create_graph=True)
    assert repr(gc.grad(outputs=x.grad, inputs=x)[0]) == "tensor(6.)"


def test_003_case2_backward_twice_accumulates_18_until_zeroed_then_6():
    x, y, z = _case2()
    z.backward(create_graph=True)
    x.grad.backward()
    assert repr(x.grad) == "tensor(18., grad_fn=<CopyBackwards>)"
    x, y, z = _case2()
    z.backward(create_graph=True)
    x.grad.data.zero_()
    x.grad.backward()
    assert repr(x.grad) == "tensor(6., grad_fn=<CopyBackwards>)"


def test_003_case3_vector_output_needs_a_gradient_vector():
    x = gc.tensor([1.0, 2.0]).requires_grad_()
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x + 1).backward()
    ways = []
    x = gc.tensor([1.0, 2.0]).requires_grad_()
    (x * x).sum().backward()
    ways.append(x.grad)
    x = gc.tensor([1.0, 2.0]).requires_grad_()
    y = x * x
    y.backward(gc.ones_like(y))
    ways.append(x.grad)
    x = gc.tensor([1.0, 2.0]).requires_grad_()
    y = x * x
    ways.append(gc.grad(outputs=y, inputs=x, grad_outputs=gc.ones_like(y))[0])
    x = gc.tensor([1.0, 2.0]).requires_grad_()
    ways.append(gc.grad(outputs=(x * x).sum(), inputs=x)[0])
    assert [repr(g) for g in ways] == ["tensor([2., 4.])"] * 4


def test_003_detach_cuts_one_path():
    x = gc.tensor([2.0], requires_grad=True)
    a = gc.add(x, 1).detach()
    b = gc.add(x, 2)
    y = gc.mul(a, b)
    y.backward()
    assert (x.requires_grad, a.requires_grad, b.requires_grad, y.requires_grad) == (True, False, True, True)
    assert (x.is_leaf, a.is_leaf, b.is_leaf, y.is_leaf) == (True, True, False, False)
    assert repr(x.grad) == "tensor([3.])"
    assert a.grad is None


def test_003_in_place_on_a_leaf_is_refused():
    x = gc.tensor([2.0], requires_grad=True)
    with pytest.raises(
        RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation."
    ):
        x.add_(1)


def test_004_y_equals_2_xtx():
    x = gc.arange(4.0)
    assert repr(x) == "tensor([0., 1., 2., 3.])"
    x.requires_grad_(True)
    assert x.grad is None
    y = 2 * gc.dot(x, x)
    assert repr(y) == "tensor(28., grad_fn=<MulBackward0>)"
    y.backward()
    assert repr(x.grad) == "tensor([ 0.,  4.,  8., 12.])"
    assert repr(x.grad == 4 * x) == "tensor([True, True, True, True])"
    assert repr(x.grad.zero_()) == "tensor([0., 0., 0., 0.])"
    y = x.sum()
    assert repr(y) == "tensor(6., grad_fn=<SumBackward0>)"
    y.backward()
    assert repr(x.grad) == "tensor([1., 1., 1., 1.])"
    y = x * x
    assert repr(y) == "tensor([0., 1., 4., 9.], grad_fn=<MulBackward0>)"
    x.grad.zero_()
    y = x * x
    y.sum().backward()
    assert repr(x.grad) == "tensor([0., 2., 4., 6.])"


def test_004_detach_makes_u_a_constant():
    x = gc.arange(4.0, requires_grad=True)
    y = x * x
    u = y.detach()
    z = u * x
    z.sum().backward()
    assert repr(x.grad == u) == "tensor([True, True, True, True])"
    x.grad.zero_()
    y.sum().backward()
    assert repr(x.grad) == "tensor([0., 2., 4., 6.])"


def _f(a):
    b = a * 2
    while b.norm() < 1000:
        b = b * 2
    c = b if b.sum() > 0 else b * 100
    return c


@pytest.mark.parametrize("seed", range(20))
def test_004_python_control_flow_gradient_is_d_over_a(seed):
    gc.manual_seed(seed)
    a = gc.randn(size=(), requires_grad=True)
    d = _f(a)
    d.backward()
    assert repr(a.grad == d / a) == "tensor(True)"


def test_004_no_grad_block_is_not_recorded():
    x = gc.tensor(1.0, requires_grad=True)
    y1 = x**2
    with gc.no_grad():
        y2 = x**3
    y3 = y1 + y2
    assert x.requires_grad
    assert (repr(y1), y1.requires_grad) == ("tensor(1., grad_fn=<PowBackward0>)", True)
    assert (repr(y2), y2.requires_grad) == ("tensor(1.)", False)
    assert (repr(y3), y3.requires_grad) == ("tensor(2., grad_fn=<AddBackward0>)", True)
    y3.backward()
    assert repr(x.grad) == "tensor(2.)"


def test_004_changes_through_data_are_not_recorded():
    x = gc.ones(1, requires_grad=True)
    assert repr(x.data) == "tensor([1.])"
    assert x.data.requires_grad is False
    y = x * x
    x.data *= 100
    y.backward()
    assert repr(x) == "tensor([100.], requires_grad=True)"
    assert repr(x.grad) == "tensor([200.])"
