"""Issue 21: the backward pass of elementwise chains reuses buffers, with bit-identical results.

The rules that read the engine's own gradient buffer last write into it (exp, neg, log, mul's
second side), and sin / x**2 multiply into the temporary they just made. Every case here runs the
same backward twice, with and without those shortcuts, and compares the bits.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

import gradcli as gc
from gradcli.autograd import donation as elementwise
from gradcli.autograd import engine

rng = np.random.default_rng(21)
N = 1000


def _plain(monkeypatch):
    """Switch the shortcuts off: no buffer handed to the rules, no product into a temporary."""
    monkeypatch.setattr(engine, "_DONATION", types.SimpleNamespace(buffer=None))
    monkeypatch.setattr(elementwise, "_times", lambda g, c: g * c)


def _bits(a):
    a = np.ascontiguousarray(np.asarray(a))
    return a.dtype, a.shape, a.tobytes()


EXPRESSIONS = {
    "benchmark": lambda x, w: gc.sum(gc.sin(x) * gc.exp(-(x**2)) + gc.log(1 + x**2)),
    "chain": lambda x, w: gc.sum(gc.exp(-gc.exp(-gc.sin(x)))),
    "reused intermediate": lambda x, w: gc.sum((lambda e: e * e + -e + gc.log(e))(gc.exp(x * w))),
    "leaf used often": lambda x, w: gc.sum(x * x * x + gc.sin(x) * x - x**2),
    "broadcast row": lambda x, w: gc.sum(gc.exp(x.reshape(10, 100) * w[:100]) * -w[:100]),
    "broadcast column": lambda x, w: gc.sum(gc.log(1 + x.reshape(100, 10) ** 2) * w[:100].reshape(100, 1)),
    "one-element operand": lambda x, w: gc.sum(gc.exp(x * w[:1]) * w[:1]),
    "mul by a product": lambda x, w: gc.sum(gc.exp(x) * (x * w)),
    "division and neg": lambda x, w: gc.sum(-(gc.sin(x) / (2 + gc.exp(w)))),
    "non-scalar output": lambda x, w: gc.exp(x) * gc.sin(w),
}


def _run(name, dtype=np.float64):
    x = gc.tensor(rng_values(dtype, 0), requires_grad=True)
    w = gc.tensor(rng_values(dtype, 1), requires_grad=True)
    y = EXPRESSIONS[name](x, w)
    y.backward(None if y.ndim == 0 else gc.tensor(rng_values(dtype, 2)))
    return [_bits(y.detach().numpy())] + [None if t.grad is None else _bits(t.grad.numpy()) for t in (x, w)]


def rng_values(dtype, k):
    return np.random.default_rng(100 + k).uniform(-1.5, 1.5, N).astype(dtype)


@pytest.mark.parametrize("name", list(EXPRESSIONS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gradients_bit_identical_with_and_without_reused_buffers(name, dtype, monkeypatch):
    fused = _run(name, dtype)
    _plain(monkeypatch)
    assert _run(name, dtype) == fused


def test_the_shortcuts_run_on_the_benchmark_expression(monkeypatch):
    """The buffers are really reused: mul hands on views of its saved values (the sum's gradient is
    1.0), exp multiplies into a new array, and neg negates that array in place."""
    taken = []
    real = engine._apply_donating

    def spy(node, *rest):
        in_grads, took = real(node, *rest)
        taken.append((type(node).__name__, took))
        return in_grads, took

    monkeypatch.setattr(engine, "_apply_donating", spy)
    x = gc.tensor(rng_values(np.float64, 0), requires_grad=True)
    EXPRESSIONS["benchmark"](x, None).backward()
    assert sorted(name for name, took in taken if took) == ["NegBackward0"]


def test_a_sums_gradient_times_a_value_is_a_view_of_the_value():
    """sum(a * b): the gradient of each side is the other side itself (1.0 * v is v, bit for bit),
    handed on as a read-only view, and the saved values are not written to by later rules."""
    av, bv = rng_values(np.float64, 0), rng_values(np.float64, 1)
    a, b = gc.tensor(av, requires_grad=True), gc.tensor(bv, requires_grad=True)
    e = gc.exp(a)
    y = gc.sum(e * -b)
    y.backward(retain_graph=True)
    assert _bits(a.grad.numpy()) == _bits(-bv * np.exp(av))
    assert _bits(b.grad.numpy()) == _bits(-np.exp(av))
    assert _bits(e.detach().numpy()) == _bits(np.exp(av))  # the saved output, read by exp's rule
    a.grad = b.grad = None
    y.backward()
    assert _bits(a.grad.numpy()) == _bits(-bv * np.exp(av))


def test_benchmark_gradient_matches_the_formula():
    xv = rng_values(np.float64, 0)
    x = gc.tensor(xv, requires_grad=True)
    EXPRESSIONS["benchmark"](x, None).backward()
    expected = np.cos(xv) * np.exp(-(xv**2)) - 2 * xv * np.sin(xv) * np.exp(-(xv**2)) + 2 * xv / (1 + xv**2)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-13, atol=1e-15)


def test_retained_hooked_and_captured_gradients_are_not_overwritten(monkeypatch):
    """A gradient that left the engine (retain_grad, a hook, grad's inputs) keeps its value
    although the rules downstream write into the engine's buffers."""

    def run():
        x = gc.tensor(rng_values(np.float64, 0), requires_grad=True)
        n = -(x**2)
        keep = []
        n.register_hook(lambda g: keep.append(g))  # the tensor itself: must not change later
        e = gc.exp(n)
        e.retain_grad()
        s = gc.sin(x)
        seen = []
        s.register_hook(lambda g: seen.append(g.numpy().copy()) or None)
        y = gc.sum(s * e + gc.log(1 + x**2))
        gx, ge = gc.grad(y, [x, e], retain_graph=True)
        y.backward()
        return [_bits(gx.numpy()), _bits(ge.numpy()), _bits(e.grad.numpy()), _bits(seen[0]),
                _bits(keep[0].numpy()), _bits(x.grad.numpy())]  # fmt: skip

    fused = run()
    _plain(monkeypatch)
    assert run() == fused


def test_retain_graph_second_backward_sees_the_same_saved_values():
    x = gc.tensor(rng_values(np.float64, 0), requires_grad=True)
    y = EXPRESSIONS["benchmark"](x, None)
    y.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    x.grad = None
    y.backward()
    assert _bits(x.grad.numpy()) == _bits(first)


def test_create_graph_does_not_write_into_saved_values(monkeypatch):
    """With create_graph the gradients are tensors that later backward passes read: no shortcut."""

    def run():
        x = gc.tensor(rng_values(np.float64, 0), requires_grad=True)
        y = EXPRESSIONS["benchmark"](x, None)
        (g,) = gc.grad(y, x, create_graph=True)
        (h,) = gc.grad(gc.sum(g * g), x)
        return [_bits(g.detach().numpy()), _bits(h.numpy())]

    fused = run()
    _plain(monkeypatch)
    assert run() == fused
    xv = rng_values(np.float64, 0)
    x = gc.tensor(xv, requires_grad=True)
    (g,) = gc.grad(EXPRESSIONS["benchmark"](x, None), x, create_graph=True)
    g.sum().backward()
    # d/dx of the gradient: the second derivative of the benchmark expression, by central differences
    eps = 1e-6

    def grad_at(v):
        t = gc.tensor(v, requires_grad=True)
        EXPRESSIONS["benchmark"](t, None).backward()
        return t.grad.numpy()

    numeric = (grad_at(xv + eps) - grad_at(xv - eps)) / (2 * eps)
    np.testing.assert_allclose(x.grad.numpy(), numeric, rtol=1e-6, atol=1e-7)


def test_matches_torch_float64():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    for name in ("reused intermediate", "broadcast column", "division and neg"):
        xv, wv = rng_values(np.float64, 0), rng_values(np.float64, 1)
        x, w = gc.tensor(xv, requires_grad=True), gc.tensor(wv, requires_grad=True)
        y = EXPRESSIONS[name](x, w)
        y.backward()
        xt, wt = torch.tensor(xv, requires_grad=True), torch.tensor(wv, requires_grad=True)
        yt = _in_torch(torch, name, xt, wt)
        yt.backward()
        np.testing.assert_allclose(y.item(), yt.item(), rtol=1e-13)
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-12, atol=1e-14)


def _in_torch(torch, name, x, w):
    if name == "reused intermediate":
        e = torch.exp(x * w)
        return torch.sum(e * e + -e + torch.log(e))
    if name == "broadcast column":
        return torch.sum(torch.log(1 + x.reshape(100, 10) ** 2) * w[:100].reshape(100, 1))
    return torch.sum(-(torch.sin(x) / (2 + torch.exp(w))))
