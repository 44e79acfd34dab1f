"""Issue 27, the peers' special values, against torch float64 / complex128:

- d/db of ``0**b`` at b < 0 is -inf (out * log(0) = inf * -inf), where gradcli gave nan;
- the gradient of a full ``max``/``min`` whose value is NaN spreads evenly over the NaNs, as
  PyTorch's ``max()`` does (along an axis, as ``amax``, it stays NaN, as PyTorch's);
- ``pow`` of a negative real base to a complex exponent has a finite gradient (log(-2) taken in
  the complex result's type: ln 2 + i pi), where gradcli gave nan.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gradcli as gc

torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")

NAN = float("nan")


def _number(t) -> complex:
    return complex(np.asarray(t.detach().numpy() if hasattr(t, "detach") else t))


def _same(mine, theirs) -> bool:
    """Equal to 1e-13, NaN where NaN, infinities of the same sign."""
    a, b = np.asarray(mine, dtype=complex), np.asarray(theirs, dtype=complex)
    return bool(np.allclose(a, b, rtol=1e-13, atol=0, equal_nan=True) and (np.isnan(a) == np.isnan(b)).all())


BASES = [0.0, -2.0, 2.0, 0.5, -0.5]
EXPONENTS = [-1.0, -0.5, 0.0, 0.5, 2.0, 3.0, 1 + 1j, -1 + 0.5j, 2 + 0j, 0j, -1 + 0j]


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("exponent", EXPONENTS)
def test_pow_gradients_are_pytorchs(base, exponent):
    complex_exponent = isinstance(exponent, complex)
    x = gc.tensor(base, requires_grad=True)
    y = gc.tensor(exponent, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 0 ** -1 = inf: NumPy's divide warning
        z = x**y
        gx, gy = gc.autograd.grad(z.real if complex_exponent else z, [x, y])
    xt = torch.tensor(base, dtype=torch.float64, requires_grad=True)
    yt = torch.tensor(exponent, dtype=torch.complex128 if complex_exponent else torch.float64, requires_grad=True)
    zt = xt**yt
    tx, ty = torch.autograd.grad(zt.real if complex_exponent else zt, [xt, yt])
    if not (base == 0 and exponent == 0j):  # 0 ** 0j: 1 in NumPy and Python, nan in PyTorch (exp(0j * log 0))
        assert _same(_number(z), zt.item())
    assert _same(_number(gx), tx.item()), (gx, tx)
    assert _same(_number(gy), ty.item()), (gy, ty)


def test_the_exponents_derivative_at_base_zero_and_a_negative_exponent_is_minus_infinity():
    b = gc.tensor(-1.0, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (gc.tensor(0.0) ** b).backward()
    assert float(b.grad) == -np.inf


def test_a_negative_base_to_a_complex_exponent_has_a_finite_gradient():
    y = gc.tensor(1 + 1j, requires_grad=True)
    (g,) = gc.autograd.grad(((-2.0) ** y).real, [y])
    # d/dy (-2)^y = (-2)^y * (ln 2 + i pi), conjugated as PyTorch gives a real loss's gradient
    expected = np.conj((-2.0 + 0j) ** (1 + 1j) * (np.log(2.0) + 1j * np.pi))
    assert np.isfinite(_number(g))
    assert _number(g) == pytest.approx(expected, rel=1e-14)


@pytest.mark.parametrize(
    "values",
    [[NAN, NAN, NAN], [1.0, NAN, 2.0, NAN], [NAN], [[NAN, 1.0], [NAN, NAN]], [3.0, 1.0, 3.0]],
    ids=["all-nan", "two-nans", "one", "matrix", "ties"],
)
@pytest.mark.parametrize("name", ["max", "min"])
def test_a_full_max_spreads_its_gradient_as_pytorchs(values, name):
    x = gc.tensor(values, requires_grad=True)
    getattr(x, name)().backward()
    xt = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    getattr(xt, name)().backward()
    np.testing.assert_array_equal(np.asarray(x.grad), xt.grad.numpy())


def test_all_nan_spreads_evenly():
    x = gc.tensor([NAN, NAN, NAN, NAN], requires_grad=True)
    x.max().backward()
    np.testing.assert_array_equal(np.asarray(x.grad), [0.25, 0.25, 0.25, 0.25])


def test_along_an_axis_a_nan_value_gives_nan_as_pytorchs_amax():
    values = [[1.0, NAN], [2.0, 3.0]]
    x = gc.tensor(values, requires_grad=True)
    x.amax(dim=1).sum().backward()
    xt = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    xt.amax(dim=1).sum().backward()
    np.testing.assert_array_equal(np.asarray(x.grad), xt.grad.numpy())  # [[nan, nan], [0, 1]]


def test_forward_mode_agrees_with_reverse_over_nans():
    """PyTorch's forward mode gives NaN here (evenly_read_jvp divides by the count of x == max, 0);
    gradcli's two modes agree, as issue 27 asks of every Jacobian."""
    from gradcli.autograd.functional import jacobian

    point = gc.tensor([1.0, NAN, 2.0, NAN])
    reverse = np.asarray(jacobian(lambda v: v.max(), point))
    forward = np.asarray(jacobian(lambda v: v.max(), point, strategy="forward-mode", vectorize=True))
    np.testing.assert_array_equal(reverse, [0.0, 0.5, 0.0, 0.5])
    np.testing.assert_array_equal(forward, reverse)
