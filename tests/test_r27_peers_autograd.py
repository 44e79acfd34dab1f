"""Issue 27, the peers' own tests: where PyTorch's test_autograd.py found gradcli disagreeing with
PyTorch (views and in-place, custom Functions, the errors PyTorch raises). Each test asserts the
numbers or words PyTorch gives (so it means something without torch) and, where torch is
installed, compares with torch float64 too."""

from __future__ import annotations

import numpy as np
import pytest

import gradcli as gc
from gradcli.autograd import Function
from gradcli.autograd.function import once_differentiable


def _torch():
    return pytest.importorskip("torch", reason="torch float64 is the reference these tests compare with")


def _t(values, requires_grad=False):
    return gc.tensor(values, requires_grad=requires_grad)


# --- views and in-place -------------------------------------------------------------------------


def _inplace_through_view(lib, make):
    x0 = make([1.0, 2.0, 3.0], True)
    x = x0 * 1
    v = x[:]
    v *= 2
    (x * x).sum().backward()
    return x0.grad


def test_inplace_through_a_view_of_a_tensor_that_requires_grad_rebases_the_base():
    grad = _inplace_through_view(gc, _t)
    np.testing.assert_array_equal(grad.numpy(), [8.0, 16.0, 24.0])
    torch = _torch()
    theirs = _inplace_through_view(torch, lambda v, r: torch.tensor(v, dtype=torch.float64, requires_grad=r))
    np.testing.assert_array_equal(grad.numpy(), theirs.numpy())


def test_inplace_through_a_view_of_a_view_and_of_a_transpose():
    x0 = _t([1.0, 2.0, 3.0], True)
    x = x0 * 1
    x[1:][0:1].mul_(x0[0])
    assert type(x.grad_fn).__name__ == "CopySlices"
    np.testing.assert_array_equal(x.detach().numpy(), [1.0, 2.0, 3.0])
    x.sum().backward()
    np.testing.assert_array_equal(x0.grad.numpy(), [3.0, 1.0, 1.0])
    a0 = _t(np.arange(6.0).reshape(2, 3), True)
    a = a0.clone()
    a.t()[0].mul_(5)
    (a**2).sum().backward()
    np.testing.assert_array_equal(a0.grad.numpy(), [[0.0, 2.0, 4.0], [150.0, 8.0, 10.0]])


def test_inplace_through_a_view_keeps_second_derivatives():
    x0 = _t([1.0, 2.0, 3.0], True)
    x = x0 * x0
    x[1:].mul_(x0[0])
    (g,) = gc.grad(x.sum(), x0, create_graph=True)
    np.testing.assert_array_equal(g.detach().numpy(), [15.0, 4.0, 6.0])
    np.testing.assert_array_equal(gc.grad(g.sum(), x0)[0].numpy(), [12.0, 6.0, 8.0])
    torch = _torch()
    t0 = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    tx = t0 * t0
    tx[1:].mul_(t0[0])
    (tg,) = torch.autograd.grad(tx.sum(), t0, create_graph=True)
    np.testing.assert_array_equal(tg.detach().numpy(), g.detach().numpy())


def test_inplace_with_a_grad_operand_on_a_view_makes_the_base_require_grad():
    b = gc.zeros(3)
    w = _t(3.0, True)
    v = b[1:]
    v.add_(w)
    assert b.requires_grad and not b.is_leaf and type(b.grad_fn).__name__ == "CopySlices"
    (b * b).sum().backward()
    assert w.grad.item() == 12.0  # d/dw (w^2 + w^2) at 3, not lost
    torch = _torch()
    tb, tw = torch.zeros(3, dtype=torch.float64), torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    tb[1:].add_(tw)
    (tb * tb).sum().backward()
    assert tw.grad.item() == w.grad.item()


def test_a_view_shares_its_bases_version_counter():
    x = gc.zeros(3)
    x.add_(1)
    assert x[:]._version == 1
    y = x[:]
    y.add_(1)
    assert (x._version, y._version) == (2, 2)


class _DoubleInPlace(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        x.mul_(2)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_mark_dirty_on_a_view_reaches_the_input():
    a = _t([1.0, 2.0, 3.0], True)
    b = a.clone()
    v = b[:2]
    out = _DoubleInPlace.apply(v)
    assert out is v and v._version == 2  # the change in forward, and mark_dirty's (PyTorch counts both)
    np.testing.assert_array_equal(b.detach().numpy(), [2.0, 4.0, 3.0])
    (b * b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [8.0, 16.0, 6.0])


def test_mark_dirty_refuses_a_leaf_and_a_dirty_input_not_returned():
    a = _t([1.0, 2.0], True)
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad has been used in an in-place"):
        _DoubleInPlace.apply(a)

    class NotReturned(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            x.mul_(2)
            return x.sum()

        @staticmethod
        def backward(ctx, g):
            return g * 2

    with pytest.raises(RuntimeError, match="^Some elements marked as dirty during the forward method were not"):
        NotReturned.apply(a * 1)


MULTI = "is a view and is being modified inplace. This view is the output of a function that returns multiple views."


@pytest.mark.parametrize(
    ("take", "words"),
    [
        (lambda y: y.unbind()[1], "Output 1 of Unbind "),
        (lambda y: y.unbind(1)[2], "Output 2 of Unbind "),
        (lambda y: y.chunk(2)[1], "Output 1 of Split "),
    ],
)
def test_inplace_on_one_of_several_views_is_refused(take, words):
    y = gc.ones(4, 3, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="^" + words + MULTI):
        take(y).mul_(2)


def test_unbind_outputs_are_views_of_one_node_and_a_hook_on_one_sees_none():
    const = gc.ones(2, 3)
    const.unbind()[0].mul_(2)  # nothing recorded: allowed, and written through to the base
    np.testing.assert_array_equal(const.numpy(), [[2.0] * 3, [1.0] * 3])
    x = gc.ones(2, 3, requires_grad=True)
    y = x * 1
    a, b = y.unbind()
    assert type(a.grad_fn).__name__ == "UnbindBackward0" and a.grad_fn is b.grad_fn and a._base is y
    calls = []
    a.register_hook(calls.append)
    b.sum().backward()
    assert calls == [None]
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0] * 3, [1.0] * 3])


def test_detach_in_place_of_a_saved_tensor_raises_on_use():
    a = _t(1.0, True).clone()
    b = a.sin()
    a.detach_()
    with pytest.raises(RuntimeError, match=r"^Trying to use a saved tensor that has been detached in-place"):
        b.backward()
    a = _t(1.0, True).clone()
    b = a.exp()  # exp saves its output, not a: allowed
    a.detach_()
    b.backward()
    with pytest.raises(RuntimeError, match="^Can't detach views in-place. Use detach"):
        _t([1.0, 2.0], True).clone()[:1].detach_()


# --- custom Functions -----------------------------------------------------------------------------


def test_function_returning_non_tensors_passes_them_through():
    seen = []

    class F(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, None, "bar", 3

        @staticmethod
        def backward(ctx, *grads):
            seen.append([None if g is None else g.shape for g in grads])
            return grads[0] * 2

    x = _t([1.0, 2.0], True)
    out = F.apply(x)
    assert out[1:] == (None, "bar", 3)
    out[0].sum().backward()
    assert seen == [[(2,), None, None, None]]
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_function_returning_one_tensor_twice_returns_one_object():
    seen = []

    class Twice(Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            return y, y

        @staticmethod
        def backward(ctx, a, b):
            seen.append((a.tolist(), b.tolist()))
            return a + b

    x = _t([1.0, 2.0], True)
    a, b = Twice.apply(x)
    assert a is b
    a.sum().backward()
    assert seen == [([0.0, 0.0], [1.0, 1.0])]  # the object is the later output, as in PyTorch


def test_setup_context_sees_forwards_default_arguments():
    seen = []

    class D(Function):
        @staticmethod
        def forward(x, y=2.0):
            return x * y

        @staticmethod
        def setup_context(ctx, inputs, output):
            seen.append(inputs[1:])
            ctx.y = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.y, None

    x = _t([1.0, 2.0], True)
    D.apply(x).sum().backward()
    D.apply(x, y=3.0).sum().backward()
    assert seen == [(2.0,), (3.0,)]
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0])


class _Once(Function):
    @staticmethod
    def forward(ctx, tensor1, pyscalar, tensor2):
        ctx.pyscalar = pyscalar
        ctx.save_for_backward(tensor1, tensor2)
        return tensor1 + pyscalar * tensor2 + tensor1 * tensor2

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        assert not gc.is_grad_enabled()
        t1, t2 = ctx.saved_tensors
        return grad_output + grad_output * t2, None, grad_output * ctx.pyscalar + grad_output * t1


def _graph_desc(fn):
    if fn is None:
        return "None"
    return type(fn).__name__ + "(" + ", ".join(_graph_desc(f) for f, _ in fn.next_functions) + ")"


def test_once_differentiable_under_create_graph_with_a_gradient_that_requires_grad():
    x = _t(np.full((2, 2), 0.5), True)
    y = _t(np.full((2, 2), 2.0), True)
    _Once.apply(x, 2, y).sum().backward(_t(1.0, True), create_graph=True)
    # PyTorch's test_once_differentiable: the Error node has an edge for each result, None for None
    assert _graph_desc(x.grad.grad_fn) == "CopyBackwards(None, Error(AccumulateGrad(), None, AccumulateGrad()))"
    np.testing.assert_array_equal(x.grad.detach().numpy(), np.full((2, 2), 3.0))
    np.testing.assert_array_equal(y.grad.detach().numpy(), np.full((2, 2), 2.5))
    with pytest.raises(RuntimeError, match="trying to differentiate twice a function that was marked with"):
        x.grad.sum().backward()


def test_grad_with_respect_to_two_outputs_of_one_function_modified_in_place():
    class Two(Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.mark_dirty(x, y)
            x.mul_(2)
            y.mul_(3)
            return x, y

        @staticmethod
        def backward(ctx, gx, gy):
            return gx * 2, gy * 3

    x, y = _t([1.0, 2.0], True), _t([3.0, 4.0], True)
    p, q = Two.apply(x.clone(), y.clone())
    gp, gq = gc.grad((p * q).sum(), inputs=[p, q], retain_graph=True)
    np.testing.assert_array_equal(gp.numpy(), [9.0, 12.0])
    np.testing.assert_array_equal(gq.numpy(), [2.0, 4.0])
    gq, gp, gx = gc.grad((p * q).sum(), inputs=[q, p, x])
    np.testing.assert_array_equal(gx.numpy(), [18.0, 24.0])


# --- errors PyTorch raises, in its words ------------------------------------------------------------


def test_grad_and_backward_with_empty_inputs_are_refused():
    x = _t([1.0, 2.0], True)
    with pytest.raises(RuntimeError, match=r"^`inputs` argument to `grad\(\)` cannot be empty\.$"):
        gc.grad((x * x).sum(), [])
    with pytest.raises(RuntimeError, match=r"^`inputs` argument to `backward\(\)` cannot be empty\.$"):
        (x * x).sum().backward(inputs=[])
    assert x.grad is None


def test_a_second_backward_through_an_index_assignment_raises():
    x = _t([1.0, 2.0, 3.0], True)
    y = gc.zeros(3)
    y[0] = x[1]  # nothing else saved: PyTorch's CopySlices is freed all the same
    s = y.sum()
    s.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0, 0.0])
    with pytest.raises(RuntimeError, match="^Trying to backward through the graph a second time"):
        s.backward()
    v = (x * 1)[1:]
    v.mul_(2)  # in place through a view: CopySlices, freed likewise
    s = v._base.sum()
    s.backward()
    with pytest.raises(RuntimeError, match="^Trying to backward through the graph a second time"):
        s.backward()


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda x: x.flip((0, 0)), RuntimeError, "dim 0 appears multiple times in the list of dims"),
        (lambda x: x.sum((1, -1)), RuntimeError, "dim 1 appears multiple times in the list of dims"),
        (lambda x: x.clip(None, None), RuntimeError, "torch.clamp: At least one of 'min' or 'max' must not be None"),
        (lambda x: gc.clamp(x, None, None), RuntimeError, "torch.clamp: At least one of 'min' or 'max' must not be"),
    ],
)
def test_pytorchs_refusals_of_dims_and_bounds(call, error, words):
    with pytest.raises(error, match="^" + words.replace("(", r"\(").replace(")", r"\)")):
        call(gc.ones(2, 3, requires_grad=True))


def test_assigning_a_number_to_grad_and_deleting_data_are_refused():
    x = _t([1.0, 2.0], True)
    with pytest.raises(TypeError, match="^assigned grad expected to be a Tensor or None but got grad of type int$"):
        x.grad = 0
    with pytest.raises(RuntimeError, match="^Deleting tensor data is not allowed. Delete tensor instead!$"):
        del x.data
    np.testing.assert_array_equal(x.detach().numpy(), [1.0, 2.0])


F = gc.functional


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: F.jacobian(lambda t: t * 2, [1.0, 2.0]), "inputs given to jacobian .* given inputs has type <class 'list'>"),
        (lambda: F.jacobian(lambda t, k: t * k, (gc.ones(2), 3)), "inputs given to jacobian .* value at index 1 has type <class 'int'>"),
        (lambda: F.hessian(lambda t: (t * t).sum(), 3.0), "inputs given to hessian .* given inputs has type <class 'float'>"),
        (lambda: F.vjp(lambda t: t * 2, 3.0), "inputs given to vjp "),
        (lambda: F.jvp(lambda t: t * 2, 3.0), "inputs given to jvp "),
        (lambda: F.hvp(lambda t: (t * t).sum(), 3.0, 3.0), "inputs given to hvp "),
        (lambda: F.vhp(lambda t: (t * t).sum(), 3.0, 3.0), "inputs given to vhp "),
        (lambda: F.jvp(lambda t: t * 2, gc.ones(2), 3.0), "v given to jvp .* given v has type <class 'float'>"),
    ],
)  # fmt: skip
def test_the_functional_api_refuses_inputs_that_are_not_tensors(call, words):
    with pytest.raises(TypeError, match="^The " + words):
        call()


def test_strict_with_vectorize_is_refused_and_strict_alone_still_works():
    x = gc.tensor([1.0, 2.0])
    words = r"^torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not supported together"
    with pytest.raises(RuntimeError, match=words):
        F.jacobian(lambda t: t**3, x, strict=True, vectorize=True)
    with pytest.raises(RuntimeError, match=words):
        F.hessian(lambda t: (t**3).sum(), x, strict=True, vectorize=True)
    np.testing.assert_array_equal(F.jacobian(lambda t: t**3, x, strict=True).numpy(), [[3.0, 0.0], [0.0, 12.0]])


def test_anomaly_mode_gives_pytorchs_two_warnings():
    x = _t(-1.0, True)
    with pytest.warns(UserWarning, match="^Anomaly Detection has been enabled. This mode will increase the runtime"):
        mode = gc.detect_anomaly()
    error = pytest.raises(RuntimeError, match="^Function 'SqrtBackward0'")
    warned = pytest.warns(UserWarning, match="^Error detected in SqrtBackward0. Traceback of forward call that caused")
    with warned, mode, np.errstate(invalid="ignore"), error:
        with pytest.warns(RuntimeWarning):  # the forward pass's own warning (gradcli's)
            y = gc.sqrt(x) * 2
        y.backward()


def test_einsum_takes_the_sublist_form():
    a = _t([[1.0, 2.0], [3.0, 4.0]], True)
    b = _t([1.0, 2.0])
    out = gc.einsum(a, [0, 1], b, [1], [0])
    np.testing.assert_array_equal(out.detach().numpy(), [5.0, 11.0])
    np.testing.assert_array_equal(gc.einsum(a, [Ellipsis, 1], b, [1]).detach().numpy(), [5.0, 11.0])
    out.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [[1.0, 2.0], [1.0, 2.0]])
    with pytest.raises(RuntimeError, match=r"^einsum\(\): expected subscript to be within the range \[0, 52\)"):
        gc.einsum(a, [0, 52])


def test_max_and_min_take_axis_as_numpy_spells_it():
    x = _t([[1.0, 5.0], [3.0, 4.0]], True)
    values, indices = x.max(axis=1)
    np.testing.assert_array_equal(values.detach().numpy(), [5.0, 4.0])
    np.testing.assert_array_equal(indices.numpy(), [1, 1])
    np.testing.assert_array_equal(x.min(axis=0).values.detach().numpy(), [1.0, 4.0])
    np.testing.assert_array_equal(x.argmax(axis=0).numpy(), [1, 0])
    values.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 1.0], [0.0, 1.0]])


def _siblings(make):
    x0 = make([1.0, 2.0, 3.0], True)
    x = x0 * 1
    v1, v2 = x[:2], x[1:]
    v1.mul_(x0[0] + 1)  # v2 shares x[1]: its history must see the change
    (v2 * v2).sum().backward()
    return x0.grad


def _base_then_view(make):
    x0 = make([1.0, 2.0, 3.0], True)
    x = x0 * 1
    v = x[:2]
    x.mul_(x0[2])  # the base changes in place after the view was taken
    (v * v).sum().backward()
    return x0.grad


@pytest.mark.parametrize(("case", "expected"), [(_siblings, [16.0, 16.0, 6.0]), (_base_then_view, [18.0, 36.0, 30.0])])
def test_a_view_taken_before_its_base_changed_in_place_sees_the_change(case, expected):
    np.testing.assert_array_equal(case(_t).numpy(), expected)
    torch = _torch()
    theirs = case(lambda v, r: torch.tensor(v, dtype=torch.float64, requires_grad=r))
    np.testing.assert_array_equal(theirs.numpy(), expected)


def test_a_view_of_a_constant_base_changed_by_a_grad_operand_requires_grad():
    w = _t(2.0, True)
    x = gc.ones(3)
    v = x[:2]
    row = gc.ones(2, 3)
    first = row.unbind()[0]
    x.mul_(w)
    row.mul_(w)
    assert v.requires_grad and first.requires_grad
    ((v * v).sum() + first.sum()).backward()
    assert w.grad.item() == 11.0  # 2 * 2w from v, 3 from the row's first slice


_A = np.arange(1.0, 7.0).reshape(2, 3)


def _scaled(view, make):
    a = make(_A, True)
    b = a * 1
    view(b).mul_(a[0, 0] + 1)
    (b * b).sum().backward()
    return a.grad


# the numbers are torch float64's (PyTorch 2.13)
@pytest.mark.parametrize(
    ("view", "expected"),
    [
        (lambda b: b.reshape(3, 2), [[372.0, 16.0, 24.0], [32.0, 40.0, 48.0]]),
        (lambda b: b.T, [[372.0, 16.0, 24.0], [32.0, 40.0, 48.0]]),
        (lambda b: b.transpose(0, 1)[1:], [[298.0, 16.0, 24.0], [8.0, 40.0, 48.0]]),
        (lambda b: b.unsqueeze(0), [[372.0, 16.0, 24.0], [32.0, 40.0, 48.0]]),
        (lambda b: b.narrow(1, 1, 2), [[298.0, 16.0, 24.0], [8.0, 40.0, 48.0]]),
        (lambda b: b[:, ::2], [[256.0, 4.0, 24.0], [32.0, 10.0, 48.0]]),
        (lambda b: b[..., 1], [[118.0, 16.0, 6.0], [8.0, 40.0, 12.0]]),
    ],
)
def test_inplace_through_each_kind_of_view(view, expected):
    np.testing.assert_array_equal(_scaled(view, _t).numpy(), expected)
    torch = _torch()
    theirs = _scaled(view, lambda v, r: torch.tensor(v, dtype=torch.float64, requires_grad=r))
    np.testing.assert_array_equal(theirs.numpy(), expected)


def test_inplace_on_an_expanded_tensor_is_refused():
    words = "^unsupported operation: more than one element of the written-to tensor refers to a single memory"
    with pytest.raises(RuntimeError, match=words):
        (gc.ones(3, requires_grad=True) * 1).expand(2, 3).mul_(2)
    with pytest.raises(RuntimeError, match=words):
        gc.ones(3).expand(2, 3).add_(1)
    with pytest.raises(RuntimeError, match="^a view of a leaf Variable that requires grad"):
        gc.ones(3, requires_grad=True).expand(2, 3).mul_(2)
