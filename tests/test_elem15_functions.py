"""Issue 15, elementwise group: values, derivatives and graph names against PyTorch and known formulas."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

import gradcli as gc

X = np.array([0.3, 0.9, 1.7])


def _grad(f, x):
    t = gc.tensor(x, requires_grad=True)
    y = f(t)
    (g,) = gc.grad(y.sum(), [t])
    return y, g._value


@pytest.mark.parametrize(
    "f, value, derivative, node",
    [
        (gc.asinh, np.arcsinh, lambda x: 1 / np.sqrt(x * x + 1), "AsinhBackward0"),
        (lambda x: gc.acosh(x + 1), lambda x: np.arccosh(x + 1), lambda x: 1 / np.sqrt((x + 1) ** 2 - 1), "AcoshBackward0"),
        (lambda x: gc.atanh(x / 2), lambda x: np.arctanh(x / 2), lambda x: 0.5 / (1 - x * x / 4), "AtanhBackward0"),
        (gc.exp2, np.exp2, lambda x: np.exp2(x) * math.log(2), "Exp2Backward0"),
        (gc.square, np.square, lambda x: 2 * x, "PowBackward0"),
        (gc.reciprocal, lambda x: 1 / x, lambda x: -1 / x**2, "ReciprocalBackward0"),
        (lambda x: gc.cbrt(-x), lambda x: -np.cbrt(x), lambda x: -1 / (3 * np.cbrt(x) ** 2), "PowBackward0"),
        (lambda x: gc.hypot(x, 2.0), lambda x: np.sqrt(x * x + 4), lambda x: x / np.sqrt(x * x + 4), "HypotBackward0"),
        (lambda x: gc.logaddexp(x, 0.5), lambda x: np.log(np.exp(x) + np.exp(0.5)),
         lambda x: np.exp(x) / (np.exp(x) + np.exp(0.5)), "LogaddexpBackward0"),
    ],
)  # fmt: skip
def test_known_values_derivatives_and_node_names(f, value, derivative, node):
    y, g = _grad(f, X)
    np.testing.assert_allclose(y._value, value(X), rtol=1e-14)
    np.testing.assert_allclose(g, derivative(X), rtol=1e-12)
    assert type(y.grad_fn).__name__ == node


def test_square_and_a_power_share_a_name_but_not_a_rule():
    # square and x ** 2 are both PowBackward0: the node class made for one must not run the other's rule
    # (cbrt, also PowBackward0 as x ** (1/3) in PyTorch, once ran square's rule with no saved input)
    x = gc.tensor([2.0, 3.0], requires_grad=True)
    for y, want in ((gc.square(x), [4.0, 6.0]), (gc.cbrt(x), 1 / (3 * np.cbrt([2.0, 3.0]) ** 2)), (x**2, [4.0, 6.0])):
        (g,) = gc.grad(y.sum(), [x])
        np.testing.assert_allclose(g._value, want, rtol=1e-14)


def test_reciprocal_of_integers_is_not_integer_division():
    assert gc.reciprocal(gc.tensor([2, 4]))._value.tolist() == [0.5, 0.25]


def test_hypot_and_logaddexp_do_not_overflow():
    np.testing.assert_allclose(gc.hypot(gc.tensor(3e200), gc.tensor(4e200))._value, 5e200)
    np.testing.assert_allclose(gc.logaddexp(gc.tensor(1000.0), gc.tensor(1000.0))._value, 1000 + math.log(2))


def test_methods_where_pytorch_has_them():
    x = gc.tensor([0.5, 2.0])
    for name in ("asinh", "exp2", "square", "reciprocal", "hypot", "logaddexp"):
        assert hasattr(x, name), name
    np.testing.assert_allclose(x.hypot(gc.tensor([1.2, 1.5]))._value, [1.3, 2.5])


@pytest.mark.parametrize(
    "name, args",
    [("asinh", (X,)), ("acosh", (X + 1,)), ("atanh", (X / 2,)), ("exp2", (X,)), ("square", (X,)),
     ("reciprocal", (X,)), ("hypot", (X, X[::-1] - 1)), ("logaddexp", (X, X[::-1] - 1))],
)  # fmt: skip
def test_first_and_second_derivatives_match_pytorch(name, args):
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in args]
    gs = [gc.tensor(a, requires_grad=True) for a in args]
    ty, gy = getattr(torch, name)(*ts), getattr(gc, name)(*gs)
    assert type(gy.grad_fn).__name__ == type(ty.grad_fn).__name__
    tg = torch.autograd.grad(ty.sum(), ts, create_graph=True)
    gg = gc.grad(gy.sum(), gs, create_graph=True)
    for a, b in zip(gg, tg):
        np.testing.assert_allclose(a._value, b.detach().numpy(), rtol=1e-12)
    th = torch.autograd.grad(sum(g.sum() for g in tg), ts)
    gh = gc.grad(sum(g.sum() for g in gg), gs)
    for a, b in zip(gh, th):
        np.testing.assert_allclose(a._value, b.numpy(), rtol=1e-10, atol=1e-12)


def test_language_eval_of_the_new_functions():
    out = subprocess.run(
        [sys.executable, "-m", "gradcli", "eval", "cbrt(x) + hypot(x, 6)", "--at", "x=-8"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "value = 8"
    slope = float(out.stdout.splitlines()[1].split("=")[1])
    assert slope == pytest.approx(1 / 12 - 0.8, rel=1e-12)


# --- activations --------------------------------------------------------------------------------------------------

ACT = np.array([-30.0, -2.0, -0.3, 0.0, 0.4, 2.5, 19.0, 21.0, 40.0])


def test_activation_values_and_slopes_by_formula():
    phi = np.exp(-ACT * ACT / 2) / math.sqrt(2 * math.pi)
    cdf = np.array([(1 + math.erf(v / math.sqrt(2))) / 2 for v in ACT])
    sig = 1 / (1 + np.exp(-ACT))
    cases = [
        (gc.gelu, ACT * cdf, cdf + ACT * phi),
        (gc.silu, ACT * sig, sig * (1 + ACT * (1 - sig))),
        (gc.elu, np.where(ACT > 0, ACT, np.expm1(np.minimum(ACT, 0))), np.where(ACT > 0, 1.0, np.exp(ACT))),
        (gc.leaky_relu, np.where(ACT > 0, ACT, 0.01 * ACT), np.where(ACT > 0, 1.0, 0.01)),
    ]
    for f, value, slope in cases:
        y, g = _grad(f, ACT)
        np.testing.assert_allclose(y._value, value, rtol=1e-13, atol=1e-300, err_msg=f.__name__)
        np.testing.assert_allclose(g, slope, rtol=1e-12, atol=1e-300, err_msg=f.__name__)


def test_softplus_threshold_and_beta_as_pytorch():
    # above the threshold softplus is x itself with slope exactly 1 (PyTorch's), below log1p(exp(beta x)) / beta
    y, g = _grad(gc.softplus, np.array([25.0, 0.0]))
    assert y._value.tolist() == [25.0, math.log(2)]
    assert g.tolist() == [1.0, 0.5]
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    y = gc.softplus(x, beta=2.0, threshold=3.0)  # beta x = 2 (soft), 4 (> 3: x)
    assert y._value.tolist() == [math.log1p(math.exp(2.0)) / 2, 2.0]
    (g,) = gc.grad(y.sum(), [x])
    np.testing.assert_allclose(g._value, [1 / (1 + math.exp(-2.0)), 1.0], rtol=1e-15)
    assert type(y.grad_fn).__name__ == "SoftplusBackward0"


def test_elu_slope_far_left_keeps_its_digits():
    # exp(x), not out + 1 = expm1(x) + 1, which keeps 3 digits at x = -30
    _, g = _grad(gc.elu, np.array([-30.0, -700.0]))
    np.testing.assert_allclose(g, np.exp([-30.0, -700.0]), rtol=1e-15)


@pytest.mark.parametrize(
    "name, kw", [("gelu", {}), ("silu", {}), ("elu", {}), ("leaky_relu", {}), ("softplus", {}),
                 ("softplus", {"beta": 2.0, "threshold": 3.0})]
)  # fmt: skip
def test_activations_first_and_second_derivatives_match_pytorch(name, kw):
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    x = np.array([-30.0, -2.0, -0.3, 0.0, 0.4, 1.2, 2.5, 19.0, 21.0, 40.0, 800.0])
    t, g = torch.tensor(x, requires_grad=True), gc.tensor(x, requires_grad=True)
    ty, gy = getattr(torch.nn.functional, name)(t, **kw), getattr(gc, name)(g, **kw)
    assert type(gy.grad_fn).__name__ == type(ty.grad_fn).__name__
    np.testing.assert_allclose(gy._value, ty.detach().numpy(), rtol=1e-14, atol=1e-300)
    (tg,) = torch.autograd.grad(ty.sum(), t, create_graph=True)
    (gg,) = gc.grad(gy.sum(), g, create_graph=True)
    np.testing.assert_allclose(gg._value, tg.detach().numpy(), rtol=1e-13, atol=1e-300)
    th = torch.autograd.grad(tg.sum(), t)[0].numpy() if tg.requires_grad else np.zeros_like(x)
    gh = gc.grad(gg.sum(), g)[0]._value if gg.requires_grad else np.zeros_like(x)
    np.testing.assert_allclose(gh, th, rtol=1e-9, atol=1e-13)  # far right both are tiny (PyTorch loses digits there)


def test_the_language_keeps_softplus_of_one_argument():
    ok = subprocess.run(
        [sys.executable, "-m", "gradcli", "eval", "softplus(x)", "--at", "x=25"], capture_output=True, text=True
    )
    assert (ok.returncode, ok.stdout) == (0, "value = 25\nd/dx  = 1\n")
    bad = subprocess.run(
        [sys.executable, "-m", "gradcli", "eval", "softplus(x, 2)", "--at", "x=1"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "Traceback" not in bad.stderr


# --- rounding -----------------------------------------------------------------------------------------------------

HALVES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.7, -1.7])


@pytest.mark.parametrize(
    "name, want",
    [
        ("floor", [-3, -2, -1, 0, 1, 2, 1, -2]),
        ("ceil", [-2, -1, 0, 1, 2, 3, 2, -1]),
        ("round", [-2, -2, 0, 0, 2, 2, 2, -2]),  # halves to even, as torch.round
        ("trunc", [-2, -1, 0, 0, 1, 2, 1, -1]),
    ],
)
def test_rounding_values_zero_derivative_and_node(name, want):
    x = gc.tensor(HALVES, requires_grad=True)
    y = getattr(gc, name)(x * 1.0) * x  # d/dx = round(x): the rounding itself contributes 0
    np.testing.assert_array_equal(getattr(gc, name)(x)._value, want)
    (g,) = gc.grad(y.sum(), [x])
    np.testing.assert_array_equal(g._value, want)
    assert type(getattr(x, name)().grad_fn).__name__ == name.title() + "Backward0"


def test_rounding_matches_pytorch():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    for name in ("floor", "ceil", "round", "trunc"):
        t, g = torch.tensor(HALVES, requires_grad=True), gc.tensor(HALVES, requires_grad=True)
        ty, gy = getattr(torch, name)(t) * t, getattr(gc, name)(g) * g
        np.testing.assert_array_equal(gy._value, ty.detach().numpy())
        (tg,) = torch.autograd.grad(ty.sum(), t)
        np.testing.assert_array_equal(gc.grad(gy.sum(), [g])[0]._value, tg.numpy())


def test_rounding_in_the_language_symbolic_derivative_is_zero():
    out = subprocess.run(
        [sys.executable, "-m", "gradcli", "diff", "floor(x)*x + round(x)^2 + trunc(x) + ceil(x)"],
        capture_output=True,
        text=True,
    )
    assert (out.returncode, out.stdout) == (0, "d/dx = floor(x)\n")
    out = subprocess.run(
        [sys.executable, "-m", "gradcli", "eval", "round(2.5) + round(x) + trunc(-x)", "--at", "x=3.5"],
        capture_output=True,
        text=True,
    )
    assert (out.returncode, out.stdout) == (0, "value = 3\nd/dx  = 0\n")
