"""The library's PyTorch semantics: attributes, accumulation, errors, in-place, modes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gradcli as gc


def test_requires_grad_is_contagious_and_leaves_have_no_grad_fn():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    c = gc.tensor([3.0, 4.0])
    y = x * c
    z = c * 2
    assert y.requires_grad and not z.requires_grad
    assert x.is_leaf and x.grad_fn is None
    assert z.is_leaf and z.grad_fn is None
    assert not y.is_leaf and type(y.grad_fn).__name__ == "MulBackward0"


def test_next_functions_point_at_accumulate_grad_and_constants_are_none():
    x = gc.tensor(2.0, requires_grad=True)
    y = x * 0.5
    (first, nr), (second, nr2) = y.grad_fn.next_functions
    assert type(first).__name__ == "AccumulateGrad" and nr == 0
    assert first.variable() is x
    assert second is None and nr2 == 0
    w = gc.tensor(1.0, requires_grad=True)
    a = x + w
    b = w + 1
    (left, _), (right, _) = (a * b).grad_fn.next_functions
    assert left is a.grad_fn and right is b.grad_fn


@pytest.mark.parametrize(
    "make,name",
    [
        (lambda x, y: x + y, "AddBackward0"),
        (lambda x, y: x - y, "SubBackward0"),
        (lambda x, y: 1 - x, "RsubBackward1"),
        (lambda x, y: x * y, "MulBackward0"),
        (lambda x, y: x / y, "DivBackward0"),
        (lambda x, y: x**2, "PowBackward0"),
        (lambda x, y: x**y, "PowBackward1"),
        (lambda x, y: 2**x, "PowBackward2"),
        (lambda x, y: -x, "NegBackward0"),
        (lambda x, y: x.sin(), "SinBackward0"),
        (lambda x, y: gc.exp(x), "ExpBackward0"),
        (lambda x, y: gc.log1p(x), "Log1PBackward0"),
        (lambda x, y: x.sum(), "SumBackward0"),
        (lambda x, y: x.sum(0), "SumBackward1"),
        (lambda x, y: x.mean(), "MeanBackward0"),
        (lambda x, y: x.max(), "MaxBackward1"),
        (lambda x, y: gc.amax(x, 0), "AmaxBackward0"),
        (lambda x, y: gc.maximum(x, y), "MaximumBackward0"),
        (lambda x, y: x[0], "SelectBackward0"),
        (lambda x, y: x[1:], "SliceBackward0"),
        (lambda x, y: x[[0, 0]], "IndexBackward0"),
        (lambda x, y: x @ y, "DotBackward0"),
        (lambda x, y: x.reshape(3, 1), "ViewBackward0"),
        (lambda x, y: x.norm(), "LinalgVectorNormBackward0"),
        (lambda x, y: gc.logsumexp(x, 0), "LogsumexpBackward0"),
        (lambda x, y: gc.where(x > 0, x, y), "WhereBackward0"),
        (lambda x, y: gc.atan2(x, y), "Atan2Backward0"),
        (lambda x, y: gc.stack([x, y]), "StackBackward0"),
        (lambda x, y: x.clone(), "CloneBackward0"),
        (lambda x, y: x.clamp(0, 1), "ClampBackward1"),
    ],
)
def test_backward_node_names_follow_pytorch(make, name):
    x = gc.tensor([0.5, 1.0, 2.0], requires_grad=True)
    y = gc.tensor([1.5, 0.5, 1.0], requires_grad=True)
    out = make(x, y)
    assert out.grad_fn.name() == name
    assert repr(out.grad_fn).startswith(f"<{name} object at 0x")


def test_matrix_products_are_named_by_their_shapes():
    A = gc.ones(3, 3, requires_grad=True)
    v = gc.ones(3, requires_grad=True)
    assert (A @ v).grad_fn.name() == "MvBackward0"
    assert (A @ A).grad_fn.name() == "MmBackward0"
    assert (v @ v).grad_fn.name() == "DotBackward0"
    assert A.T.grad_fn.name() == "PermuteBackward0"


def test_gradients_accumulate_until_zeroed_and_set_to_none():
    x = gc.tensor(3.0, requires_grad=True)
    for expected in (6.0, 12.0, 18.0):
        (x * x).backward()
        assert x.grad.item() == expected
    x.grad.zero_()
    (x * x).backward()
    assert x.grad.item() == 6.0
    x.grad = None
    (x * 2).backward()
    assert x.grad.item() == 2.0


def test_retain_graph_allows_a_second_backward_that_accumulates():
    x = gc.tensor(2.0, requires_grad=True)
    y = x.exp() * x
    y.backward(retain_graph=True)
    first = x.grad.item()
    y.backward()
    assert x.grad.item() == pytest.approx(2 * first, rel=1e-15)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()


def test_nodes_without_saved_values_can_run_twice_as_in_pytorch():
    x = gc.tensor(2.0, requires_grad=True)
    y = x + 1
    y.backward()
    y.backward()
    assert x.grad.item() == 2.0


def test_retain_grad_keeps_a_non_leaf_gradient():
    x = gc.tensor(2.0, requires_grad=True)
    a = x + 1
    a.retain_grad()
    b = x + 2
    y = a * b
    y.backward()
    assert a.retains_grad and not b.retains_grad
    assert a.grad.item() == 4.0  # dy/da = b
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert b.grad is None
    assert "retain_grad" in str(caught[0].message)
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        gc.tensor(1.0).retain_grad()


def test_grad_with_grad_outputs_is_a_vector_jacobian_product():
    x = gc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = gc.stack([x[0] * x[1], x[1] * x[2]])
    (vjp,) = gc.grad(y, x, grad_outputs=gc.tensor([1.0, 10.0]))
    np.testing.assert_array_equal(vjp.numpy(), [2.0, 1.0 + 30.0, 20.0])


def test_grad_errors_and_allow_unused():
    x = gc.tensor(1.0, requires_grad=True)
    z = gc.tensor(1.0, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        gc.grad(y, [x, z], retain_graph=True)
    gx, gz = gc.grad(y, [x, z], allow_unused=True, retain_graph=True)
    assert gx.item() == 2.0 and gz is None
    _, gz = gc.grad(y, [x, z], materialize_grads=True)
    assert gz.item() == 0.0
    with pytest.raises(RuntimeError, match="does not require grad"):
        gc.grad(x * 2, gc.tensor(1.0))
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        gc.grad(x * gc.ones(2), x, grad_outputs=gc.ones(3))


def test_grad_with_respect_to_an_intermediate():
    x = gc.tensor(3.0, requires_grad=True)
    a = x * x
    y = a.sin() + a
    ga, gx = gc.grad(y, [a, x])
    assert ga.item() == pytest.approx(np.cos(9.0) + 1.0, rel=1e-15)
    assert gx.item() == pytest.approx((np.cos(9.0) + 1.0) * 6.0, rel=1e-15)


def test_backward_inputs_restricts_accumulation():
    x = gc.tensor(1.0, requires_grad=True)
    w = gc.tensor(2.0, requires_grad=True)
    (x * w).backward(inputs=[w])
    assert x.grad is None and w.grad.item() == 1.0


def test_third_derivative_through_repeated_create_graph():
    x = gc.tensor(0.7, requires_grad=True)
    y = gc.sin(x) * x**3
    (d1,) = gc.grad(y, x, create_graph=True)
    (d2,) = gc.grad(d1, x, create_graph=True)
    (d3,) = gc.grad(d2, x)
    s, c, v = np.sin(0.7), np.cos(0.7), 0.7
    expected = -c * v**3 - 9 * s * v**2 + 18 * c * v + 6 * s
    assert d3.item() == pytest.approx(expected, rel=1e-13)


def test_no_grad_as_context_manager_and_decorator_and_set_grad_enabled():
    x = gc.tensor(1.0, requires_grad=True)
    with gc.no_grad():
        assert not (x * 2).requires_grad
        with gc.enable_grad():
            assert (x * 2).requires_grad
    assert (x * 2).requires_grad

    @gc.no_grad()
    def double(t):
        return t * 2

    @gc.no_grad
    def triple(t):
        return t * 3

    assert not double(x).requires_grad and not triple(x).requires_grad
    assert gc.is_grad_enabled()
    with gc.set_grad_enabled(False):
        assert not gc.is_grad_enabled()
    assert gc.is_grad_enabled()


def test_detach_shares_storage_and_version_counter():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.is_leaf
    d[0] = 10.0
    assert y[0].item() == 10.0  # same storage
    z = gc.tensor([1.0, 1.0], requires_grad=True)
    w = z.exp()  # saves its output
    w.detach().add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        w.sum().backward()


def test_saved_input_modified_in_place_is_detected():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    z = y * y
    y.mul_(2)
    with pytest.raises(RuntimeError, match=r"is at version 1; expected version 0 instead"):
        z.sum().backward()


def test_in_place_on_non_leaf_is_recorded():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    y.mul_(x)  # y = x * x, recorded
    y.add_(3.0)
    assert y.grad_fn.name() == "AddBackward0"
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])


def test_setitem_routes_gradients():
    x = gc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = gc.tensor(5.0, requires_grad=True)
    y = x * 1
    y[1] = v * 2
    (y * gc.tensor([1.0, 10.0, 100.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 100.0])
    assert v.grad.item() == 20.0


def test_leaf_and_view_of_leaf_cannot_be_modified_in_place():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        x.mul_(2)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable"):
        x[0:1].mul_(2)
    with gc.no_grad():
        x.mul_(2)  # allowed: not recorded, as in PyTorch (an optimizer step)
    np.testing.assert_array_equal(x.detach().numpy(), [2.0, 4.0])


def test_requires_grad_flag_rules():
    with pytest.raises(RuntimeError, match="floating point"):
        gc.tensor([True, False], requires_grad=True)
    y = gc.tensor(1.0, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):
        y.requires_grad = False
    x = gc.tensor(1.0)
    assert x.requires_grad_() is x and x.requires_grad


def test_numpy_item_and_conversions():
    x = gc.tensor([1.5, 2.5], requires_grad=True)
    with pytest.raises(RuntimeError, match="Use tensor.detach"):
        x.numpy()
    assert x.detach().numpy().tolist() == [1.5, 2.5]
    assert x[1].item() == 2.5 and isinstance(x[1].item(), float)
    with pytest.raises(RuntimeError, match="2 elements cannot be converted to Scalar"):
        x.item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(x > 0)
    assert float(x.sum()) == 4.0
    assert f"{x.sum():.2f}" == "4.00"
    assert len(x) == 2 and [t.item() for t in x] == [1.5, 2.5]


def test_float32_is_kept_and_float64_is_the_default():
    assert gc.tensor(1.0).dtype == np.float64
    assert gc.tensor([1, 2.0]).dtype == np.float64
    assert gc.tensor([1, 2]).dtype == np.int64  # Python ints stay integers, as in PyTorch (issue 15)
    x = gc.tensor([1.0, 2.0], dtype=gc.float32, requires_grad=True)
    y = (x * 2.5 + 1).sin().sum()
    assert y.dtype == np.float32
    y.backward()
    assert x.grad.dtype == np.float32
    assert repr(x) == "tensor([1., 2.], dtype=float32, requires_grad=True)"


def test_broadcasting_gradients_are_summed_back_to_each_shape():
    a = gc.tensor(np.ones((2, 1, 3)), requires_grad=True)
    b = gc.tensor(np.ones(3) * 2, requires_grad=True)
    c = gc.tensor(3.0, requires_grad=True)
    (a * b * c).sum().backward()
    assert a.grad.shape == (2, 1, 3) and b.grad.shape == (3,) and c.grad.shape == ()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((2, 1, 3), 6.0))
    np.testing.assert_array_equal(b.grad.numpy(), np.full(3, 6.0))
    assert c.grad.item() == 12.0


def test_shared_gradient_buffers_are_not_aliased_between_leaves():
    a = gc.tensor([1.0, 2.0], requires_grad=True)
    b = gc.tensor([3.0, 4.0], requires_grad=True)
    (a + b).sum().backward()  # the same gradient array flows to both
    a.grad.add_(100.0)
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 1.0])
    g = gc.tensor([5.0, 6.0])
    (a * 1).backward(g)
    g.add_(1000.0)
    np.testing.assert_array_equal(a.grad.numpy(), [106.0, 107.0])


def test_same_tensor_used_twice_sums_its_paths():
    x = gc.tensor(3.0, requires_grad=True)
    (x + x).backward()
    assert x.grad.item() == 2.0
    x.grad = None
    (x * x * x).backward()
    assert x.grad.item() == 27.0


def test_indexing_and_slicing_scatter_gradients_back():
    x = gc.arange(6.0, requires_grad=True)
    y = x[1:4].sum() + 10 * x[-1] + 100 * x[[0, 0]].sum() + x.reshape(2, 3)[1, ::2].sum()
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [200.0, 1.0, 1.0, 2.0, 0.0, 11.0])


def test_reductions_with_dims_and_methods():
    x = gc.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    assert x.sum(0).tolist() == [5.0, 7.0, 9.0]
    assert x.sum(dim=1, keepdim=True).shape == (2, 1)
    assert x.mean(-1).tolist() == [2.0, 5.0]
    values, indices = x.max(1)
    assert values.tolist() == [3.0, 6.0] and indices.tolist() == [2, 2]
    assert gc.max(x, gc.tensor(3.5)).tolist() == [[3.5, 3.5, 3.5], [4.0, 5.0, 6.0]]
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.sum(2)
    x.T.mean().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 3), 1 / 6))


def test_subgradients_at_kinks_match_pytorch():
    x = gc.tensor([-1.0, 0.0, 1.0], requires_grad=True)
    x.abs().sum().backward()
    assert x.grad.tolist() == [-1.0, 0.0, 1.0]
    x.grad = None
    x.relu().sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0]
    t = gc.tensor([0.0, 1.0, 1.0, 0.5], requires_grad=True)
    t.max().backward()
    assert t.grad.tolist() == [0.0, 0.5, 0.5, 0.0]
    a = gc.tensor([0.0, 1.0, 1.0, 0.5], requires_grad=True)
    gc.maximum(a, gc.tensor([0.0, 2.0, 1.0, 0.0])).sum().backward()
    assert a.grad.tolist() == [0.5, 0.0, 0.5, 1.0]
    z = gc.zeros(3, requires_grad=True)
    z.norm().backward()
    assert z.grad.tolist() == [0.0, 0.0, 0.0]


def test_numpy_functions_on_tensors_record_or_refuse():
    x = gc.tensor([0.5, 1.0], requires_grad=True)
    y = np.sum(np.cos(x) * np.array([1.0, 2.0]))
    assert isinstance(y, gc.Tensor) and y.grad_fn.name() == "SumBackward0"
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), -np.sin([0.5, 1.0]) * [1.0, 2.0], rtol=1e-15)
    with pytest.raises(TypeError, match="no derivative rule"):
        np.spacing(x)  # (np.floor records FloorBackward0 since issue 15)
    assert np.allclose(x.detach(), [0.5, 1.0])
    assert np.floor(x).grad_fn.name() == "FloorBackward0"


def test_repr_follows_pytorch_layout():
    assert repr(gc.tensor([1e-5, 1.0])) == "tensor([1.0000e-05, 1.0000e+00])"
    assert repr(gc.tensor([0.1234567, 100.0])) == "tensor([  0.1235, 100.0000])"
    assert repr(gc.tensor([1.0, float("nan"), float("inf")])) == "tensor([1., nan, inf])"
    assert repr(gc.tensor([[1.0, 2.0], [3.0, 4.0]])) == "tensor([[1., 2.],\n        [3., 4.]])"
    assert repr(gc.tensor(0.5946)) == "tensor(0.5946)"
    assert repr(gc.arange(2000.0)).startswith("tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03")


def test_custom_function_forward_backward_and_name():
    class Cube(gc.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x**2

    x = gc.tensor([1.0, 2.0], requires_grad=True)
    y = Cube.apply(x)
    assert type(y.grad_fn).__name__ == "CubeBackward"
    assert y.grad_fn.next_functions[0][0].variable() is x
    y.sum().backward(retain_graph=True)
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 12.0])
    (g,) = gc.grad(Cube.apply(x).sum(), x, create_graph=True)
    (h,) = gc.grad(g.sum(), x)
    np.testing.assert_array_equal(h.numpy(), [6.0, 12.0])  # the backward is itself differentiable


def test_custom_function_with_two_outputs_and_non_tensor_arguments():
    class ScaleBoth(gc.autograd.Function):
        @staticmethod
        def forward(ctx, x, factor):
            ctx.factor = factor
            return x * factor, x * factor * 2

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * ctx.factor + g2 * ctx.factor * 2, None

    x = gc.tensor(1.0, requires_grad=True)
    a, b = ScaleBoth.apply(x, 3.0)
    assert a.grad_fn is b.grad_fn
    assert [nr for _, nr in (a * b).grad_fn.next_functions] == [0, 1]
    (a + 10 * b).backward()
    assert x.grad.item() == 3.0 + 10 * 6.0


def test_custom_function_freed_after_backward():
    class Twice(gc.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            _ = ctx.saved_tensors
            return grad * 2

    y = Twice.apply(gc.tensor(1.0, requires_grad=True))
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_clamp_with_tensor_bounds_sends_gradients_to_the_bounds_as_pytorch_does():
    # torch 2.13: x.grad [1, 0, 0, 1], min.grad [0, 1, 0, 0], max.grad [0, 0, 1, 0]; ties go to x
    x = gc.tensor([0.5, -2.0, 3.0, 1.0], requires_grad=True)
    lo = gc.tensor([0.0, -1.0, 0.0, 1.0], requires_grad=True)
    hi = gc.tensor([1.0, 1.0, 2.0, 1.0], requires_grad=True)
    y = gc.clamp(x, lo, hi)
    assert y.grad_fn.name() == "ClampBackward0"
    assert gc.clamp(x, 0.0, 1.0).grad_fn.name() == "ClampBackward1"
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 0.0, 1.0]
    assert lo.grad.tolist() == [0.0, 1.0, 0.0, 0.0]
    assert hi.grad.tolist() == [0.0, 0.0, 1.0, 0.0]
