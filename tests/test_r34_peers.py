"""Issue 34, the peers' last failures: gradcli's own autograd against PyTorch. Each test asserts the
values or words PyTorch 2.13 gives (so it means something without torch) and, where torch is
installed, runs the same code under torch float64 and compares."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import gradcli as gc
from gradcli.autograd import Function
from tests.frameworks import need


def _raised(fn):
    """(type name, message) of what ``fn()`` raises."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (the type is what is compared)
        return type(e).__name__, str(e)
    return None


# --- 1. gather with an index of another ndim --------------------------------------------------------


GATHER_CASES = [
    (2.0, [0]),  # 0-d input, 1-element index
    (2.0, [0, 0]),
    (2.0, 0),
    ([1.0, 2.0, 3.0], np.zeros((2, 0), np.int64)),  # empty index: any shape, never checked
    ([1.0, 2.0, 3.0], 2),  # 0-d index on a vector
    ([[1.0, 2.0], [3.0, 4.0]], [[1], [0]]),
    ([[1.0, 2.0, 3.0]], np.zeros((4, 0, 5), np.int64)),
]


def _gather(lib, make, xv, iv):
    x = make(xv)
    y = lib.gather(x, 0, lib.tensor(np.asarray(iv)))
    (y * y).sum().backward()
    return y.detach().numpy(), x.grad.numpy()


def test_gather_takes_pytorchs_index_shapes_values_and_gradients():
    value, grad = _gather(gc, lambda v: gc.tensor(v, requires_grad=True), 2.0, [0])
    np.testing.assert_array_equal(value, [2.0])
    assert grad == 4.0
    value, grad = _gather(gc, lambda v: gc.tensor(v, requires_grad=True), [1.0, 2.0, 3.0], np.zeros((2, 0), np.int64))
    assert value.shape == (2, 0)
    np.testing.assert_array_equal(grad, [0.0, 0.0, 0.0])
    assert (
        gc.gather(gc.tensor([1.0, 2.0, 3.0], requires_grad=True), 0, gc.tensor(2)).grad_fn.name() == "GatherBackward0"
    )
    torch = need("torch")
    for xv, iv in GATHER_CASES:
        ours = _gather(gc, lambda v: gc.tensor(v, requires_grad=True), xv, iv)
        theirs = _gather(torch, lambda v: torch.tensor(v, dtype=torch.float64, requires_grad=True), xv, iv)
        for a, b in zip(ours, theirs):
            assert a.shape == b.shape, (xv, iv)
            np.testing.assert_array_equal(a, b)


GATHER_ERRORS = [
    (2.0, 1, [0]),  # dim out of range of a 0-d input
    (2.0, 0, [1]),  # out of bounds
    (2.0, 0, [[0]]),  # 2-d index on a 0-d input
    ([1.0, 2.0, 3.0], 0, [[0]]),
    ([1.0, 2.0, 3.0], 1, np.zeros((2, 0), np.int64)),  # an empty index still wraps dim
    ([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], 0, np.zeros((1, 5), np.int64)),
    ([1.0, 2.0, 3.0], 0, [3]),
    ([1.0, 2.0, 3.0], 0, np.zeros(1, np.float32)),
]


def test_gather_refuses_as_pytorch_does():
    assert _raised(lambda: gc.gather(gc.tensor(2.0), 0, gc.tensor([1]))) == (
        "RuntimeError",
        "index 1 is out of bounds for dimension 0 with size 1",
    )
    assert gc.gather(gc.tensor([1.0, 2.0]), 0, np.zeros((2, 0), np.float32)).shape == (2, 0)  # (empty: any dtype)
    torch = need("torch")
    for xv, dim, iv in GATHER_ERRORS:
        ours = _raised(lambda xv=xv, dim=dim, iv=iv: gc.gather(gc.tensor(xv), dim, gc.tensor(np.asarray(iv))))
        theirs = _raised(
            lambda xv=xv, dim=dim, iv=iv: torch.gather(torch.tensor(xv), dim, torch.tensor(np.asarray(iv)))
        )
        assert ours == theirs, (xv, dim, iv)


# --- 2. complex logaddexp keeps the imaginary part of the larger value -------------------------------


LOGADDEXP_CASES = [
    (1 + 8j, -100),
    (1 + 8j, 2 - 7j),
    (1 + 20j, 1 + 20j),
    (-5 + 0.5j, 2 + 100j),
    (3 + 4j, 3 - 4j),
    (complex(-np.inf, 1), complex(-np.inf, 2)),
    (complex(np.inf, 1), 2 + 3j),
    (complex(np.nan, 0), 1j),
]


def test_complex_logaddexp_is_not_wrapped():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = gc.logaddexp(gc.tensor(1 + 8j), gc.tensor(-100.0 + 0j)).item()
    assert got == pytest.approx(1 + 8j, abs=1e-15)
    torch = need("torch")
    for a, b in LOGADDEXP_CASES:
        ours = gc.logaddexp(gc.tensor(np.complex128(a)), gc.tensor(np.complex128(b))).item()
        theirs = torch.logaddexp(torch.tensor(a, dtype=torch.complex128), torch.tensor(b, dtype=torch.complex128))
        np.testing.assert_allclose(ours, theirs.item(), rtol=1e-14, equal_nan=True, err_msg=str((a, b)))


# --- 3. a node that saves nothing runs again -----------------------------------------------------------


def _unbind_twice(lib, make):
    x = make([1.0, 2.0, 3.0, 4.0, 5.0])
    a = x.unbind()
    a[0].backward()
    a[1].backward()
    return x.grad.numpy()


class _Double(Function):  # saves nothing: a second backward through it is PyTorch's too
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class _Reads(Function):  # reads ctx.saved_tensors: a second backward raises
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2


def test_a_second_backward_through_a_node_that_saved_nothing_accumulates():
    np.testing.assert_array_equal(_unbind_twice(gc, lambda v: gc.tensor(v, requires_grad=True)), [1, 1, 0, 0, 0])
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    y = _Double.apply(x).sum()
    y.backward()
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 4.0])
    y = _Reads.apply(gc.tensor([1.0, 2.0], requires_grad=True)).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="^Trying to backward through the graph a second time"):
        y.backward()
    torch = need("torch")
    theirs = _unbind_twice(torch, lambda v: torch.tensor(v, dtype=torch.float64, requires_grad=True))
    np.testing.assert_array_equal(_unbind_twice(gc, lambda v: gc.tensor(v, requires_grad=True)), theirs)


# --- 4. var's backward reads the input, not its output -----------------------------------------------


VAR_CODE = [
    "v = lib.var(b, 0); v.mul_(2); v.sum().backward()",
    "v, m = lib.var_mean(b, 0); v.mul_(2); m.mul_(3); (v.sum() + m.sum()).backward()",
    "v = lib.var(b, 1, keepdim=True); v.mul_(2); v.sum().backward()",
    "v = lib.var(b); v.mul_(2); v.backward()",
]


def _var(lib, b, code):
    exec(code, {"lib": lib, "b": b})
    return b.grad.numpy()


def test_var_output_changed_in_place_keeps_its_gradient():
    b = [[1.0, 2.0, 4.0], [3.0, 7.0, 5.0]]
    np.testing.assert_allclose(_var(gc, gc.tensor(b, requires_grad=True), VAR_CODE[0]), [[-4, -10, -2], [4, 10, 2]])
    torch = need("torch")
    for code in VAR_CODE:
        ours = _var(gc, gc.tensor(b, requires_grad=True), code)
        theirs = _var(torch, torch.tensor(b, dtype=torch.float64, requires_grad=True), code)
        np.testing.assert_allclose(ours, theirs, rtol=1e-14, err_msg=code)


# --- 5. writing one element of an expanded tensor ------------------------------------------------------


EXPAND_CODE = [
    "g = lib.ones(1).expand(3); g[0] = 0; r = g",
    "x = lib.tensor(1.0); g = x.expand(3); g[0] = 0; r = (x, g)",
    "x = lib.ones(1); g = x.expand(3); g[0].mul_(2); r = (x, g)",
    "x = lib.ones(1); g = x.expand(3); g.fill_(4); r = (x, g)",
    "x = lib.ones(1); g = x.expand(3); g.zero_(); r = (x, g)",
    "x = lib.ones(2, 1); g = x.expand(2, 3); g[0, 1] = 5; r = (x, g)",
    "x = lib.ones(2, 1); g = x.expand(2, 3); g[:, 0] = lib.tensor([3.0, 4.0]); r = (x, g)",
    "x = lib.ones(2, 1); g = x.expand(2, 3); g[:, 0][1].mul_(7); r = (x, g)",
    "x = lib.ones(1); g = x.expand(3); g[[0, 0]] = lib.tensor([3.0, 4.0]); r = (x, g)",
    "w = lib.ones(1, requires_grad=True); v = w * 1; g = v.expand(3); g[1] = w[0] * 3;"
    " (g * lib.tensor([1.0, 2.0, 3.0])).sum().backward(); r = (g.detach(), v.detach(), w.grad)",
    "w = lib.ones(2, 1, requires_grad=True); v = w * 1; g = v.expand(2, 3); g[:, 1] = w[:, 0] * 3;"
    " (g * lib.arange(6.0).reshape(2, 3)).sum().backward(); r = (g.detach(), w.grad)",
    "w = lib.ones(1, requires_grad=True); v = w * 2; g = v.expand(3); g[0].mul_(w[0]); g.sum().backward();"
    " r = (g.detach(), w.grad)",
    # refused: the written view itself repeats a memory location (or backward cannot split it)
    "g = lib.ones(1).expand(3); g[1:] = 5",
    "g = lib.ones(1).expand(3); g.mul_(2)",
    "g = lib.ones(1).expand(3); g[...] = 7",
    "g = lib.ones(2, 1).expand(2, 3); g[0] = 0",
    "g = lib.ones(1).expand(3); g.copy_(lib.tensor([1.0, 2.0, 3.0]))",
    "w = lib.ones(1, requires_grad=True); g = (w * 1).expand(3); g.zero_(); g.sum().backward()",
    "g = lib.ones(1, requires_grad=True).expand(3); g[0] = 0",
]


def _expand(lib, code):
    namespace = {"lib": lib}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the deprecation of index_put_ on expanded tensors, said by both)
        try:
            exec(code, namespace)
        except RuntimeError as e:
            return str(e)
    r = namespace.get("r")
    return [np.asarray(t.detach().numpy(), np.float64).tolist() for t in (r if isinstance(r, tuple) else (r,))]


def test_one_element_of_an_expanded_tensor_is_written_through():
    assert _expand(gc, EXPAND_CODE[0]) == [[0.0, 0.0, 0.0]]
    assert _expand(gc, EXPAND_CODE[9]) == [[3.0, 3.0, 3.0], [3.0], [18.0]]
    assert _expand(gc, EXPAND_CODE[13]).startswith("unsupported operation: more than one element of the written-to")
    with pytest.warns(UserWarning, match="^Use of index_put_ on expanded tensors is deprecated"):
        g = gc.ones(1).expand(3)
        g[gc.tensor([0])] = 4.0
    np.testing.assert_array_equal(g.numpy(), [4.0, 4.0, 4.0])
    torch = need("torch")
    for code in EXPAND_CODE:
        assert _expand(gc, code) == _expand(_TorchLib(torch), code), code


class _TorchLib:
    """torch with float64 factories, so that its values compare exactly with gradcli's."""

    def __init__(self, torch):
        self.torch = torch

    def __getattr__(self, name):
        fn = getattr(self.torch, name)
        if name in ("ones", "tensor", "arange"):
            return lambda *a, **k: fn(*a, **{"dtype": self.torch.float64, **k})
        return fn


# --- 6. anomaly mode names the node that failed ------------------------------------------------------


def _version_error(lib, detect, anomaly_during_forward):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        mode = detect()
        if anomaly_during_forward:
            mode.__enter__()
        b = a * 1
        c = b**2
        b.mul_(2)
        if not anomaly_during_forward:
            mode.__enter__()
        try:
            with pytest.raises(RuntimeError, match="modified by an inplace operation") as error:
                c.sum().backward()
        finally:
            mode.__exit__(None, None, None)
    texts = [str(w.message) for w in seen if str(w.message).startswith("Error detected in")]
    return texts, str(error.value)


def test_anomaly_mode_warns_which_node_failed_and_where_it_was_made():
    texts_during, message = _version_error(gc, gc.detect_anomaly, True)
    assert len(texts_during) == 1
    assert texts_during[0].startswith(
        "Error detected in PowBackward0. Traceback of forward call that caused the error:\n  File"
    )
    assert "    c = b**2\n" in texts_during[0]
    assert message.endswith(
        "Hint: the backtrace further above shows the operation that failed to compute its gradient. The variable "
        "in question was changed in there or anywhere later. Good luck!"
    )
    texts, _ = _version_error(gc, gc.detect_anomaly, False)
    assert texts == [
        "Error detected in PowBackward0. No forward pass information available. Enable detect anomaly during "
        "forward pass for more information."
    ]
    torch = need("torch")
    theirs, their_message = _version_error(torch, torch.autograd.detect_anomaly, False)
    assert [t.split(" (Triggered internally")[0] for t in theirs] == texts
    assert their_message.split("Hint: ")[1] == message.split("Hint: ")[1]
    theirs, _ = _version_error(torch, torch.autograd.detect_anomaly, True)
    assert len(theirs) == 1 and theirs[0].split("\n")[0] == texts_during[0].split("\n")[0]
    assert "    c = b**2\n" in theirs[0]


# --- 7. and 8. PyTorch's refusals, type and text ---------------------------------------------------------


def _functions(base):
    """Three Functions written alike for gradcli and torch (``base``: their Function class)."""

    class NoForward(base):
        @staticmethod
        def backward(ctx, g):
            return g

    class NoBackward(base):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    class Slice(base):  # returns a view of its input
        @staticmethod
        def forward(ctx, x):
            return x[1:]

        @staticmethod
        def backward(ctx, g):
            return g

    return NoForward, NoBackward, Slice


REFUSALS = [
    "x = lib.ones(2, requires_grad=True); x.grad = lib.ones(2, dtype=lib.int64)",
    "x = lib.ones(2); x.grad = lib.ones(2, dtype=lib.float32)",
    "x = lib.ones(2, dtype=lib.complex128); x.grad = lib.ones(2)",
    "x = lib.ones(2); x.grad = lib.ones(2, 1)",
    "x = lib.ones(2); x.grad = x",
    "x = lib.ones(2); x.grad = 3",
    "x = lib.ones(2, requires_grad=True); del x.requires_grad",
    "x = lib.ones(2, requires_grad=True); x.requires_grad = 1",
    "x = lib.ones(2); x.requires_grad_(None)",
    "x = lib.ones(2, requires_grad=True); y = x * 2; lib.autograd.grad(y, x, lib.ones(3))",
    "x = lib.ones(2, requires_grad=True); y = x * 2; y.backward(lib.ones(2, 1))",
    "x = lib.ones(2, dtype=lib.complex128, requires_grad=True); y = x * 2; y.backward(lib.ones(2))",
    "lib.autograd.functional.hessian(lambda a: a.detach().requires_grad_().clone().sum(), lib.ones(4), strict=True)",
    "lib.autograd.functional.hessian(lambda a: (a.detach().requires_grad_() * 2).sum(), lib.ones(4), strict=True)",
    "x = lib.ones(3, requires_grad=True)\nwith lib.no_grad():\n    v = Slice.apply(x)\nv.mul_(2)",
    "x = lib.ones(3, requires_grad=True).clone()\nwith lib.no_grad():\n    v = Slice.apply(x)\nv.mul_(2)",
    "x = lib.ones(3)\nwith lib.no_grad():\n    v = Slice.apply(x)\nv.mul_(lib.ones(2, requires_grad=True))",
    "x = lib.ones(3, requires_grad=True).clone()\nv = Slice.apply(x)\nv.mul_(2)",
    "x = lib.ones(3, requires_grad=True).clone()\nwith lib.no_grad():\n    v = x[1:]\nv.mul_(2)",
    "NoForward.apply(lib.ones(2, requires_grad=True))",
    "NoBackward.apply(lib.ones(2, requires_grad=True)).sum().backward()",
]


class _GcLib:
    """gradcli spelled as torch is in the cases above (dtype names, torch.autograd.grad)."""

    int64, float32, float64, complex128 = np.int64, np.float32, np.float64, np.complex128

    def __getattr__(self, name):
        return getattr(gc, name)


def _refusal(lib, functions, code):
    no_forward, no_backward, sliced = functions
    namespace = {"lib": lib, "NoForward": no_forward, "NoBackward": no_backward, "Slice": sliced}
    return _raised(lambda: exec(code, namespace))


def test_refusals_have_pytorchs_types_and_words():
    ours = {code: _refusal(_GcLib(), _functions(Function), code) for code in REFUSALS}
    assert ours[REFUSALS[0]] == (
        "RuntimeError",
        "attempting to assign a gradient with dtype 'long int' to a tensor with grad_dtype 'Double'. The gradient "
        "must match the tensor's grad_dtype (defaults to the tensor's dtype). You can set the tensor's grad_dtype "
        "attribute with a specific dtype, or None to allow any dtype. Set grad_dtype with caution. Diverging the "
        "dtypes of a tensor and its gradient may break downstream systems that assume they match.",
    )
    assert ours[REFUSALS[6]] == ("RuntimeError", "requires_grad must be a bool")
    assert ours[REFUSALS[9]] == (
        "RuntimeError",
        "Mismatch in shape: grad_output[0] has a shape of torch.Size([3]) and output[0] has a shape of "
        "torch.Size([2]).",
    )
    assert ours[REFUSALS[12]][1].startswith("While computing the hessian, found that the jacobian of the user-")
    assert ours[REFUSALS[14]][1].startswith("A view was created in no_grad mode and is being modified inplace")
    assert ours[REFUSALS[19]] == (
        "NotImplementedError",
        "You must implement the forward function for custom autograd.Function.",
    )
    torch = need("torch")
    torch_lib = _TorchLib(torch)
    for code in REFUSALS:
        theirs = _refusal(torch_lib, _functions(torch.autograd.Function), code)
        assert theirs is not None, code
        assert ours[code] == (theirs[0], re.sub(r" \(Triggered internally at .*\)$", "", theirs[1])), code


# --- 9. acosh outside its domain: NaN as PyTorch, without NumPy's warning ---------------------------------


def test_inverse_functions_outside_their_domain_give_nan_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = gc.acosh(gc.tensor([0.5, 2.0]))
        edges = [gc.asin(gc.tensor(2.0)), gc.acos(gc.tensor(-2.0)), gc.atanh(gc.tensor([1.0, 3.0]))]
    assert np.isnan(out.numpy()[0]) and out.numpy()[1] == pytest.approx(np.arccosh(2.0))
    assert np.isnan(edges[0].item()) and np.isnan(edges[1].item())
    np.testing.assert_array_equal(edges[2].numpy(), [np.inf, np.nan])
    torch = need("torch")
    theirs = torch.acosh(torch.tensor([0.5, 2.0], dtype=torch.float64)).numpy()
    np.testing.assert_allclose(out.numpy(), theirs, rtol=1e-15, equal_nan=True)
