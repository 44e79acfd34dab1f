"""Issue 27, adversarial review: PyTorch's own tests (test_autograd.py, test_functional.py) ported to
gradcli where they still disagreed after the round's work. Each test asserts the known numbers and,
where torch is installed, torch's own answer."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gradcli as gc

TORCH_REASON = "compares with PyTorch float64 (pip install torch, the CPU build)"


# --- split's outputs are views of one function returning several (test_inplace_view_multi_output_safe)


@pytest.mark.parametrize(
    ("take", "name"),
    [
        (lambda t: t.split(1), "Split"),
        (lambda t: gc.split(t, [1, 1, 1]), "SplitWithSizes"),
        (lambda t: t.chunk(3), "Split"),
    ],
)
def test_split_outputs_refuse_in_place_under_grad(take, name):
    a = gc.tensor(np.arange(9.0).reshape(3, 3), requires_grad=True)
    b = a + a
    s1, s2, _ = take(b)
    with pytest.raises(RuntimeError, match=f"Output 0 of {name} is a view and is being modified inplace. "
                       "This view is the output of a function that returns multiple views."):  # fmt: skip
        s1.mul_(s2)


def test_split_outputs_write_through_without_grad():
    x = gc.tensor([[1.0, 2.0], [3.0, 4.0]])
    top, _ = x.split(1)
    top.mul_(2)
    np.testing.assert_array_equal(x.numpy(), [[2.0, 4.0], [3.0, 4.0]])


def test_split_error_names_match_torch():
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    for sizes in (1, [1, 1, 1]):
        b = torch.randn(3, 3, requires_grad=True) * 2
        with pytest.raises(RuntimeError) as theirs:
            b.split(sizes)[1].mul_(2)
        c = gc.tensor(np.ones((3, 3)), requires_grad=True) * 2
        with pytest.raises(RuntimeError) as ours:
            c.split(sizes)[1].mul_(2)
        assert str(ours.value).split(" is a view")[0] == str(theirs.value).split(" is a view")[0]


# --- diagonal is a view, as torch.diagonal: in place through it reaches the base -----------------


def test_diagonal_in_place_reaches_base_and_its_gradient():
    a = gc.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = a.clone()
    d = b.diagonal()
    d.mul_(2)
    np.testing.assert_array_equal(b.detach().numpy(), [[2.0, 2.0], [3.0, 8.0]])
    assert type(b.grad_fn).__name__ == "CopySlices"
    (b * b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [[8.0, 4.0], [6.0, 32.0]])


def test_diagonal_shares_storage_and_version():
    x = gc.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    d = gc.diagonal(x, 1)
    x.add_(1)
    np.testing.assert_array_equal(d.numpy(), [3.0, 7.0])
    assert d._version == x._version == 1
    e = gc.diagonal(x, offset=-1, dim1=1, dim2=0)  # torch's keyword names
    e.zero_() if hasattr(e, "zero_") else e.mul_(0)
    np.testing.assert_array_equal(x.numpy(), [[2.0, 0.0, 4.0], [5.0, 6.0, 0.0]])
    assert gc.diagonal(x, 5).shape == (0,)


def test_diagonal_in_place_matches_torch():
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    v = np.arange(24.0).reshape(2, 3, 4) / 7
    results = []
    for make in (torch.tensor, gc.tensor):
        a = make(v, requires_grad=True)
        b = a * 1
        b.diagonal(1, 0, 2).mul_(b[0, 0, 0] + 3)
        (b.sin() * b).sum().backward()
        results.append((b.detach().numpy(), a.grad.numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-12)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-12)


# --- float32 through functional.hessian (forward-over-reverse on a vector) ------------------------


def test_hessian_keeps_float32_through_an_integer_power():
    x = gc.tensor([1.0, 2.0, 3.0], dtype=gc.float32)
    h = gc.functional.hessian(lambda t: (t**3).sum(), x)
    assert h.dtype == np.float32
    np.testing.assert_array_equal(h.numpy(), np.diag([6.0, 12.0, 18.0]).astype(np.float32))
    h2 = gc.functional.hessian(lambda t: (2 * t**2 / 3).sum(), x)
    assert h2.dtype == np.float32


# --- x[i] picking one element is a 0-d view, as in PyTorch: in place through it reaches x --------


def test_one_element_view_in_place_reaches_base():
    x = gc.tensor([1.0, 2.0])
    x[0].add_(1)
    np.testing.assert_array_equal(x.numpy(), [2.0, 2.0])
    assert x._version == 1
    m = gc.tensor([[1.0, 2.0], [3.0, 4.0]])
    m[1, 0].mul_(10)
    np.testing.assert_array_equal(m.numpy(), [[1.0, 2.0], [30.0, 4.0]])


def test_one_element_view_in_place_under_grad_rebases_the_history():
    a = gc.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1
    b[1].mul_(3)
    np.testing.assert_array_equal(b.detach().numpy(), [1.0, 6.0])
    assert type(b.grad_fn).__name__ == "CopySlices"
    (b * b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 36.0])
    assert gc.tensor([5.0, 6.0])[1].item() == 6.0  # still reads as a number


def test_one_element_view_matches_torch():
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    grads = []
    for make in (torch.tensor, gc.tensor):
        a = make(np.array([[0.5, 1.5], [2.5, -1.0]]), requires_grad=True)
        b = a * 2
        b[0, 1].mul_(a[1, 1])
        b[1][0].add_(b[0, 0] * 2)
        (b * b.sin()).sum().backward()
        grads.append(a.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


# --- torch.autograd.set_detect_anomaly(mode, check_nan) ------------------------------------------


def test_set_detect_anomaly_turns_the_mode_on_and_off():
    assert not gc.is_anomaly_enabled()
    with gc.autograd.set_detect_anomaly(True):
        assert gc.is_anomaly_enabled()
        x = gc.tensor([1.0, 0.0, 4.0], requires_grad=True)
        with pytest.raises(RuntimeError, match=r"^Function 'SqrtBackward0' returned nan values"):
            (gc.sqrt(x) * x).sum().backward()
        with gc.autograd.set_detect_anomaly(False):
            assert not gc.is_anomaly_enabled()
            (gc.sqrt(x) * x).sum().backward()  # off: no error
        assert gc.is_anomaly_enabled()
    assert not gc.is_anomaly_enabled()
    gc.autograd.set_detect_anomaly(True)  # as a plain call, from then on
    try:
        assert gc.is_anomaly_enabled()
    finally:
        gc.autograd.set_detect_anomaly(False)
    assert not gc.is_anomaly_enabled()


# --- unbind of a vector: its 0-d slices are views too ----------------------------------------------


def test_unbind_of_a_vector_gives_views():
    x = gc.tensor([1.0, 2.0])
    first, second = x.unbind()
    first.mul_(5)
    np.testing.assert_array_equal(x.numpy(), [5.0, 2.0])
    assert second._version == x._version == 1
    y = gc.tensor([1.0, 2.0], requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="Output 0 of Unbind is a view and is being modified inplace"):
        y.unbind()[0].mul_(2)


# --- the Hessian family checks the outputs' types first (test_functional's *_err_check) -----------


@pytest.mark.parametrize("name", ["hessian", "hvp", "vhp"])
def test_hessian_family_refuses_a_non_tensor_output_with_a_type_error(name):
    fn = getattr(gc.functional, name)
    inp = gc.tensor([0.1, 0.2, 0.3, 0.4])
    extra = () if name == "hessian" else (gc.ones(4),)
    with pytest.raises(TypeError, match=f"^The outputs of the user-provided function given to {name} must be either "
                       "a Tensor or a tuple of Tensors but the value at index 1 has type <class 'str'>"):  # fmt: skip
        fn(lambda a: (3 * a.narrow(0, 0, 3).sum(), "bar"), inp, *extra)
    with pytest.raises(RuntimeError, match=f"^The function given to {name} should return a single Tensor"):
        fn(lambda a: (a.sum(), a.sum()), inp, *extra)
    with pytest.raises(TypeError, match=f"^The outputs of the user-provided function given to {name} must be"):
        fn(lambda a: "bar", inp, *extra)


# --- a view of one of several views is refused alike (test_inplace_on_view_of_multiple_output_view)


def test_a_view_of_a_multi_output_view_refuses_in_place():
    a = gc.tensor(np.arange(10.0), requires_grad=True).clone()
    c = a.unbind(0)[0].view_as(a[0])
    with pytest.raises(RuntimeError, match="^Output 0 of View is a view and is being modified inplace. This view "
                       "is the output of a function that returns multiple views."):  # fmt: skip
        c.mul_(2)
    b = gc.tensor(np.ones((3, 4)), requires_grad=True).clone()
    with pytest.raises(RuntimeError, match="^Output 0 of Select is a view and is being modified inplace"):
        b.split(1)[1][0].mul_(2)
    x = gc.tensor([[1.0, 2.0], [3.0, 4.0]])  # without grad: written through
    x.unbind()[0][1:].mul_(3)
    np.testing.assert_array_equal(x.numpy(), [[1.0, 6.0], [3.0, 4.0]])


# --- int32 with float32 is float32 as in PyTorch, also for 0-d tensors (NumPy's scalars widen) -----


def test_zero_dim_int32_with_float32_is_float32():
    i, f = gc.tensor(3, dtype=gc.int32), gc.tensor(2.0, dtype=gc.float32)
    assert (i * f).dtype == np.float32 and (i * f).item() == 6.0
    assert (f - i).dtype == np.float32
    y = i + gc.tensor(2.0, dtype=gc.float32, requires_grad=True)
    assert y.dtype == np.float32
    assert gc.where(gc.tensor(True), i, f).dtype == np.float32
    assert gc.stack([i, f]).dtype == np.float32


def test_zero_dim_int32_with_float32_matches_torch():
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    ti, tf = torch.tensor(3, dtype=torch.int32), torch.tensor(2.0, dtype=torch.float32)
    gi, gf = gc.tensor(3, dtype=gc.int32), gc.tensor(2.0, dtype=gc.float32)
    for op in (lambda a, b: a * b, lambda a, b: b / a, lambda a, b: a - b, lambda a, b: b**a):
        assert str(op(gi, gf).dtype) == str(op(ti, tf).dtype).removeprefix("torch.")


# --- var of one element: its gradient is nan, as PyTorch's (a ZeroDivisionError crashed backward) --


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_var_gradient_without_degrees_of_freedom_is_nan():
    x = gc.tensor([1.0], requires_grad=True)
    x.var().backward()
    assert np.isnan(x.grad.numpy()).all()
    m = gc.tensor([[1.0, 2.0]], dtype=gc.float32, requires_grad=True)
    m.var(0).sum().backward()
    assert m.grad.dtype == np.float32 and np.isnan(m.grad.numpy()).all()
    _, tangent = gc.functional.jvp(lambda a: a.var(), gc.tensor([1.0]), gc.tensor([1.0]))
    assert np.isnan(tangent.item())
    y = gc.tensor([1.0, 4.0], requires_grad=True)
    y.var().backward()  # two elements still: 2 / (n - 1) * (x - mean)
    np.testing.assert_array_equal(y.grad.numpy(), [-3.0, 3.0])


# --- empty shapes: the extreme of nothing is PyTorch's error; split/chunk of an empty axis ----------


@pytest.mark.parametrize(
    ("call", "kind", "message"),
    [
        (lambda: gc.zeros(0, 3).amax(0), IndexError, "amax(): Expected reduction dim 0 to have non-zero size."),
        (lambda: gc.zeros(3, 0).min(-1), IndexError, "min(): Expected reduction dim 1 to have non-zero size."),
        (lambda: gc.zeros(0, 3).max(0), IndexError, "max(): Expected reduction dim 0 to have non-zero size."),
        (
            lambda: gc.amin(gc.zeros(0)),
            RuntimeError,
            "amin(): Expected reduction dim to be specified for input.numel() == 0.",
        ),
        (
            lambda: gc.zeros(0).max(),
            RuntimeError,
            "max(): Expected reduction dim to be specified for input.numel() == 0.",
        ),
    ],
)
def test_extreme_of_nothing_is_refused_as_pytorch(call, kind, message):
    with pytest.raises(kind) as info:
        call()
    assert str(info.value).startswith(message)


def test_extreme_over_a_nonempty_axis_of_an_empty_tensor_is_empty():
    assert gc.zeros(0, 3).amax(1).shape == (0,)
    values, indices = gc.zeros(0, 3).max(1)
    assert values.shape == indices.shape == (0,)


def test_split_and_chunk_of_an_empty_axis():
    x = gc.zeros(2, 0)
    assert [t.shape for t in gc.split(x, 2, 1)] == [(2, 0)]
    assert [t.shape for t in x.chunk(3, 1)] == [(2, 0)] * 3
    assert [t.shape for t in gc.split(x, [0], 1)] == [(2, 0)]


def test_split_and_chunk_of_an_empty_axis_match_torch():
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    for n in (1, 2, 5):
        assert len(gc.split(gc.zeros(2, 0), n, 1)) == len(torch.split(torch.zeros(2, 0), n, 1))
        assert len(gc.chunk(gc.zeros(2, 0), n, 1)) == len(torch.chunk(torch.zeros(2, 0), n, 1))


# --- a custom Function's output that is a view of an input (or the input itself) is not changed in
# place under grad, as PyTorch refuses it (test_inplace_not_requires_grad, test_custom_function_*view*)

CUSTOM_VIEW_TAIL = re.escape("This view was created inside a custom Function (or because an input was returned as-is)")


class _Slice(gc.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x[0:1]

    @staticmethod
    def backward(ctx, g):
        return gc.cat([g, gc.zeros(1)])


class _Same(_Slice):  # the input returned as-is (its backward is never run here)
    @staticmethod
    def forward(ctx, x):
        return x


def test_custom_function_view_output_refuses_in_place():
    x = gc.tensor([1.0, 2.0], requires_grad=True).clone()
    with pytest.raises(
        RuntimeError, match=f"^Output 0 of _Slice is a view and is being modified inplace. {CUSTOM_VIEW_TAIL}"
    ):
        _Slice.apply(x).mul_(2)
    with pytest.raises(
        RuntimeError, match=f"^Output 0 of _Same is a view and is being modified inplace. {CUSTOM_VIEW_TAIL}"
    ):
        _Same.apply(x).mul_(2)
    a, b = gc.tensor([0.5, 0.25]), gc.tensor([1.0], requires_grad=True)
    view = _Slice.apply(a)  # (made while nothing required grad)
    with pytest.raises(RuntimeError, match=f"^A view was created in no_grad mode .*{CUSTOM_VIEW_TAIL}"):
        view += b


def test_custom_function_view_output_still_differentiates_and_writes_without_grad():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    y = x.clone()
    (_Slice.apply(y) * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 0.0])
    plain = gc.tensor([1.0, 2.0])
    _Slice.apply(plain).mul_(5)  # nothing requires grad: written through, as in PyTorch
    np.testing.assert_array_equal(plain.numpy(), [5.0, 2.0])


# --- fill_ with a 0-d tensor is differentiable in the value (PyTorch's fill_(Tensor)) ---------------


def test_fill_with_a_tensor_value_is_differentiable():
    v = gc.tensor(2.0, requires_grad=True)
    x = gc.zeros(3)
    x[1:].fill_(v * 3)
    np.testing.assert_array_equal(x.detach().numpy(), [0.0, 6.0, 6.0])
    (x * x).sum().backward()
    assert v.grad.item() == 72.0  # d/dv of 2 * (3v)^2
    with pytest.raises(RuntimeError, match="^fill_ only supports 0-dimension value tensor but got tensor with 1 dim"):
        gc.zeros(3).fill_(gc.tensor([1.0, 2.0]))
    y = gc.zeros(2, dtype=gc.float32).fill_(gc.tensor(2.5))
    assert y.dtype == np.float32 and y.numpy().tolist() == [2.5, 2.5]


# --- a NumPy number beside a tensor is weak, as PyTorch takes it: float32 stays float32 -------------


def test_numpy_numbers_do_not_widen_a_float32_tensor():
    x = gc.tensor([1.0, 2.0], dtype=gc.float32, requires_grad=True)
    for y in (
        x * np.float64(2.0),
        np.float64(2.0) * x,
        x + np.int64(3),
        np.sqrt(np.float64(2)) / x,
        x ** np.float64(2),
    ):
        assert y.dtype == np.float32
    assert (x * np.complex128(1j)).dtype == np.complex64
    assert (gc.tensor([1, 2], dtype=gc.int32) * np.int64(2)).dtype == np.int32
    (g,) = gc.autograd.grad((x * np.float64(3.0)).sum(), x)
    assert g.dtype == np.float32 and g.numpy().tolist() == [3.0, 3.0]


def test_numpy_numbers_match_torch_dtypes():
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    for dtype in ("float32", "int32", "complex64"):
        ours = gc.tensor([1, 2], dtype=getattr(gc, dtype))
        theirs = torch.tensor([1, 2], dtype=getattr(torch, dtype))
        for number in (np.float64(2.0), np.int64(2), np.float32(0.5)):
            if dtype == "int32" and isinstance(number, np.floating):
                continue  # (PyTorch's default float dtype is float32, gradcli's float64)
            assert str((ours * number).dtype) == str((theirs * number).dtype).removeprefix("torch.")


# --- flip is a copy, as PyTorch's: a later in-place change of x does not show through it -----------


def test_flip_is_a_copy():
    x = gc.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    y = x.flip(0)
    x.add_(1)
    np.testing.assert_array_equal(y.numpy(), [[3.0, 4.0, 5.0], [0.0, 1.0, 2.0]])
    assert y._version == 0
    z = gc.flip(x, (1,))
    z.mul_(0)
    np.testing.assert_array_equal(x.numpy(), [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    a = gc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 1
    f = b.flip(0)
    b.mul_(2)  # f does not see it; its gradient is that of the old b
    (f * gc.tensor([1.0, 10.0, 100.0])).sum().backward()
    np.testing.assert_array_equal(f.detach().numpy(), [3.0, 2.0, 1.0])
    np.testing.assert_array_equal(a.grad.numpy(), [100.0, 10.0, 1.0])


# --- a view that retains its grad keeps doing so when its base changes in place ----------------------


def test_retained_view_keeps_its_grad_after_the_base_changes_in_place():
    a = gc.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = a * 2
    v = b[0]
    v.retain_grad()
    b.mul_(2)
    (v * v).sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), [8.0, 16.0])  # 2 v, v = 4 a[0] now
    np.testing.assert_array_equal(a.grad.numpy(), [[32.0, 64.0], [0.0, 0.0]])
    x = gc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    e = y[0]  # one element: a 0-d view
    e.retain_grad()
    y.mul_(2)
    (e * 1).backward()
    assert e.grad.item() == 1.0
