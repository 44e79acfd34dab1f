"""Functions the peers' suites ask for (issue 27): each against PyTorch in float64, value, gradient and
(for the elementwise ones) second derivative, with PyTorch's defaults, argument names and edge values."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import gradcli as gc

torch = pytest.importorskip("torch", reason="the functions are compared with PyTorch float64")
F = torch.nn.functional

X = np.array([-30.0, -2.5, -1.0, -0.3, 0.0, 1e-9, 0.02, 0.4, 1.0, 1.2, 2.5, 19.0, 40.0])
POSITIVE = np.array([1e-3, 0.1, 0.5, 1.0, 2.0, 7.5, 300.0])


def _both(gfn, tfn, x, *rest, second=True, rtol=1e-13, rtol2=1e-10):
    """gradcli and torch at the same points: values, gradients and second derivatives agree."""
    g = gc.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    gy, ty = gfn(g, *rest), tfn(t, *rest)
    assert gy.dtype == np.float64
    np.testing.assert_allclose(gy._value, ty.detach().numpy(), rtol=rtol, atol=1e-300)
    (gg,) = gc.grad(gy.sum(), g, create_graph=second)
    (tg,) = torch.autograd.grad(ty.sum(), t, create_graph=second)
    np.testing.assert_allclose(gg._value, tg.detach().numpy(), rtol=rtol, atol=1e-300)
    if second:
        th = torch.autograd.grad(tg.sum(), t)[0].numpy() if tg.requires_grad else np.zeros_like(x)
        gh = gc.grad(gg.sum(), g)[0]._value if gg.requires_grad else np.zeros_like(x)
        np.testing.assert_allclose(gh, th, rtol=rtol2, atol=1e-13)
    return gy


ELEMENTWISE = [
    ("logsigmoid", gc.logsigmoid, F.logsigmoid, X),
    ("softsign", gc.softsign, F.softsign, X[X != 0]),
    ("mish", gc.mish, F.mish, X),
    ("rad2deg", gc.rad2deg, torch.rad2deg, X),
    ("deg2rad", gc.deg2rad, torch.deg2rad, X),
    ("rsqrt", gc.rsqrt, torch.rsqrt, POSITIVE),
    ("erfc", gc.erfc, torch.erfc, X[np.abs(X) < 25]),
    ("hardtanh", gc.hardtanh, F.hardtanh, X[np.abs(X) != 1]),
    ("elu", gc.elu, F.elu, X),
    ("gelu", gc.gelu, F.gelu, X),
    ("nan_to_num", gc.nan_to_num, torch.nan_to_num, X),
]


@pytest.mark.parametrize("name, gfn, tfn, x", ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE])
def test_elementwise_value_gradient_and_second_derivative_match_pytorch(name, gfn, tfn, x):
    y = _both(gfn, tfn, x)
    t = tfn(torch.tensor(x[:2], requires_grad=True))
    assert type(gfn(gc.tensor(x[:2], requires_grad=True)).grad_fn).__name__ == type(t.grad_fn).__name__, name
    assert y.shape == x.shape


def test_sinc_is_one_at_zero_with_slope_zero_and_curvature_minus_pi_squared_over_three():
    x = np.array([-2.2, -0.5, 0.01, 0.3, 1.0, 1.7])
    _both(gc.sinc, torch.sinc, x, rtol=1e-11, rtol2=1e-9)  # PyTorch's slope cancels near 0 (3e-13 at 0.01)
    mpmath = pytest.importorskip("mpmath", reason="the exact slope near 0")
    near = gc.tensor(0.01, requires_grad=True)
    exact = mpmath.diff(lambda v: mpmath.sin(mpmath.pi * v) / (mpmath.pi * v), mpmath.mpf("0.01"))
    assert gc.grad(gc.sinc(near), near)[0].item() == pytest.approx(float(exact), rel=1e-15)
    z = gc.tensor(0.0, requires_grad=True)
    y = gc.sinc(z)
    assert y.item() == 1.0 and type(y.grad_fn).__name__ == "SincBackward0"
    (g,) = gc.grad(y, z, create_graph=True)
    assert g.item() == 0.0
    (h,) = gc.grad(g, z)  # PyTorch's double backward gives nan here; the series gives the exact value
    assert h.item() == pytest.approx(-(np.pi**2) / 3, rel=1e-15)
    tiny = gc.tensor(1e-30, requires_grad=True)
    (g,) = gc.grad(gc.sinc(tiny), tiny, create_graph=True)
    assert gc.grad(g, tiny)[0].item() == pytest.approx(-(np.pi**2) / 3, rel=1e-15)


def test_parameters_as_pytorch_names_them():
    _both(lambda x: gc.elu(x, alpha=2.5), lambda x: F.elu(x, alpha=2.5), X)
    _both(lambda x: gc.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh"), X)
    _both(lambda x: gc.hardtanh(x, min_val=-0.5, max_val=2.0), lambda x: F.hardtanh(x, -0.5, 2.0), X)
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        gc.gelu(gc.tensor(1.0), approximate="fast")


def test_elu_alpha_slope_at_zero_is_alpha_as_pytorch():
    x = gc.tensor([0.0, -1.0], requires_grad=True)
    (g,) = gc.grad(gc.elu(x, 3.0).sum(), x)
    assert g._value.tolist() == [3.0, 3.0 * np.exp(-1.0)]


def test_nan_to_num_defaults_and_gradient_only_where_finite():
    x = np.array([np.nan, np.inf, -np.inf, 2.5, -0.0])
    g = gc.tensor(x, requires_grad=True)
    y = gc.nan_to_num(g)
    big = np.finfo(np.float64).max
    assert y._value.tolist() == [0.0, big, -big, 2.5, 0.0]
    y.sum().backward()
    assert g.grad._value.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]
    y = gc.nan_to_num(gc.tensor(x), nan=1.0, posinf=2.0, neginf=-3.0)
    assert y._value.tolist() == torch.nan_to_num(torch.tensor(x), 1.0, 2.0, -3.0).tolist()
    assert gc.nan_to_num(gc.tensor(np.float32(np.inf))).item() == np.finfo(np.float32).max


def test_lerp_number_and_tensor_weights_match_pytorch():
    rng = np.random.default_rng(27)
    a, b, w = rng.standard_normal((3, 2, 3))
    w[0, 0] = 1.0  # weight 1 gives end exactly (PyTorch's formula from the nearer end)
    ga, gb, gw = (gc.tensor(v, requires_grad=True) for v in (a, b, w))
    ta, tb, tw = (torch.tensor(v, requires_grad=True) for v in (a, b, w))
    for gy, ty in ((gc.lerp(ga, gb, 0.7), torch.lerp(ta, tb, 0.7)), (gc.lerp(ga, gb, gw), torch.lerp(ta, tb, tw))):
        assert type(gy.grad_fn).__name__ == type(ty.grad_fn).__name__
        np.testing.assert_allclose(gy._value, ty.detach().numpy(), rtol=1e-14)
        leaves = [ga, gb, gw][: 2 if ty.grad_fn.__class__.__name__ == "LerpBackward0" else 3]
        tl = [ta, tb, tw][: len(leaves)]
        gs = gc.grad((gy * gy).sum(), leaves)
        ts = torch.autograd.grad((ty * ty).sum(), tl)
        for u, v in zip(gs, ts):
            np.testing.assert_allclose(u._value, v.numpy(), rtol=1e-14)
    assert gc.lerp(ga, gb, gw)._value[0, 0] == b[0, 0]
    assert ga.lerp(gb, 0.25).grad_fn is not None  # a method, as torch's


def test_float32_stays_float32():
    x = gc.tensor(np.array([-1.5, 0.25, 2.0], np.float32), requires_grad=True)
    for fn in (gc.logsigmoid, gc.softsign, gc.mish, gc.sinc, gc.rad2deg, gc.deg2rad, gc.erfc, gc.hardtanh,
               gc.nan_to_num, gc.elu, gc.gelu, lambda v: gc.rsqrt(v * v)):  # fmt: skip
        y = fn(x)
        assert y.dtype == np.float32
        (g,) = gc.grad(y.sum(), x)
        assert g.dtype == np.float32


@pytest.mark.parametrize(
    "expression, value",
    [
        ("sinc(0)", "1"),
        ("rad2deg(pi)", "180"),
        ("rsqrt(4)", "0.5"),
        ("erfc(0)", "1"),
        ("hardtanh(3)", "1"),
        ("lerp(1, 3, 0.25)", "1.5"),
    ],
)
def test_the_language_has_them(expression, value):
    done = subprocess.run(
        [sys.executable, "-m", "gradcli", "eval", expression], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].endswith(f"= {value}")
