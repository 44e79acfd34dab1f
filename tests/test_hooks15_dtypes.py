"""Issue 15: integer and boolean tensors exist, never require grad, and comparisons return them."""

import numpy as np
import pytest

import gradcli as gc

REQUIRES_GRAD_ERROR = "only Tensors of floating point and complex dtype can require gradients"
METHOD_ERROR = "only Tensors of floating point dtype can require gradients"  # PyTorch 2.13's requires_grad_()
FACTORY_ERROR = "Only Tensors of floating point and complex dtype can require gradients"


def test_python_ints_make_int64_tensors_and_floats_float64():
    assert gc.tensor([1, 2]).dtype == gc.int64
    assert gc.tensor(3).dtype == gc.int64
    assert gc.tensor([1, 2.5]).dtype == gc.float64
    assert gc.tensor([True, False]).dtype == gc.bool
    assert gc.tensor(np.array([1, 2], dtype=np.int32)).dtype == gc.int32
    assert repr(gc.tensor([1, 2])) == "tensor([1, 2])"
    assert gc.long is gc.int64 or gc.long == gc.int64


def test_arange_is_int64_with_integer_arguments_only():
    assert gc.arange(3).dtype == gc.int64
    assert gc.arange(1, 7, 2).tolist() == [1, 3, 5]
    assert gc.arange(4.0).dtype == gc.float64  # seed 004
    assert gc.arange(0, 1, 0.5).dtype == gc.float64
    assert gc.arange(3, dtype=gc.float32).dtype == gc.float32


@pytest.mark.parametrize(
    "make",
    [
        lambda: gc.tensor([1, 2]),
        lambda: gc.arange(3),
        lambda: gc.tensor([1.0, 2.0]) > 1,
        lambda: gc.argmax(gc.tensor([1.0, 3.0])),
    ],
)
def test_integer_and_boolean_tensors_never_require_grad(make):
    with pytest.raises(RuntimeError, match=f"^{METHOD_ERROR}$"):
        make().requires_grad_()
    t = make()
    with pytest.raises(RuntimeError, match=f"^{REQUIRES_GRAD_ERROR}$"):
        t.requires_grad = True
    assert t.requires_grad is False
    t.requires_grad_(False)  # allowed, as in PyTorch
    for factory in (lambda: gc.tensor([1, 2], requires_grad=True), lambda: gc.arange(3, requires_grad=True)):
        with pytest.raises(RuntimeError, match=f"^{FACTORY_ERROR}$"):
            factory()


def test_comparisons_return_bool_tensors_without_grad():
    x = gc.tensor([0.5, 1.0, 2.0], requires_grad=True)
    k = gc.tensor([1, 2, 3])
    results = [x < 1, x <= 1, x > 1, x >= 1, x == 1, x != 1, 1 < x, k < x, k == 2, 2 >= k]  # noqa: SIM300  (reflected on purpose)
    results += [gc.eq(x, 1), gc.ne(x, 1), gc.lt(x, 1), gc.le(x, 1), gc.gt(x, 1), gc.ge(x, 1)]
    for r in results:
        assert r.dtype == gc.bool and r.requires_grad is False and r.grad_fn is None
    assert (x < 1).tolist() == [True, False, False]
    assert (k < x).tolist() == [False, False, False]
    assert (x >= k).tolist() == [False, False, False]
    assert gc.ge(x, 1).tolist() == [False, True, True]


def test_promotion_int_and_bool_with_float():
    x = gc.tensor([0.5, 1.0, 2.0], requires_grad=True)
    k = gc.tensor([1, 2, 3])
    mask = x > 0.75
    y = k * x + mask * x + gc.arange(3) * x
    assert y.dtype == gc.float64
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0 + 0 + 0, 2.0 + 1 + 1, 3.0 + 1 + 2])
    assert (k * mask).dtype == gc.int64 and (k * mask).tolist() == [0, 2, 3]
    assert (k + 0.5).dtype == gc.float64
    assert (k / 2).tolist() == [0.5, 1.0, 1.5]
    assert (k * 2).dtype == gc.int64 and (k * 2).tolist() == [2, 4, 6]
    assert (mask & mask).dtype == gc.bool


def test_int_tensor_as_index_scatters_gradient_back():
    x = gc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    idx = gc.tensor([0, 2, 2])
    (x[idx] * gc.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 5.0]


def test_same_as_torch():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    for data in ([1, 2], [1, 2.5], [True, False], 3):
        t, g = torch.tensor(data), gc.tensor(data)
        assert (
            str(t.dtype).split(".")[1] in (str(g.dtype), "float32")
            and (g.dtype.kind == "f") == t.dtype.is_floating_point
        )
    assert torch.arange(3).dtype == torch.int64 and gc.arange(3).dtype == gc.int64
    for lib in ("requires_grad_()", "requires_grad = True", "tensor([1, 2], requires_grad=True)"):
        messages = []
        for mod in (torch, gc):
            with pytest.raises(RuntimeError) as error:
                if lib == "requires_grad_()":
                    mod.tensor([1, 2]).requires_grad_()
                elif lib == "requires_grad = True":
                    mod.tensor([1, 2]).requires_grad = True
                else:
                    mod.tensor([1, 2], requires_grad=True)
            messages.append(str(error.value))
        assert messages[0] == messages[1], lib
    K, k = torch.tensor([1, 2, 3]), gc.tensor([1, 2, 3])
    for f in (lambda a: a * (a > 1), lambda a: a * 2, lambda a: -a, lambda a: (a > 1) * (a < 3)):
        assert f(K).tolist() == f(k).tolist()
        assert str(f(K).dtype).split(".")[1] == str(f(k).dtype)
