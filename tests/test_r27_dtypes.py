"""dtypes as PyTorch keeps them (issue 27): float32 stays float32 through forward mode, Jacobians,
max/min tangents and assignment; integer tensors with floating ones compute in the floating dtype;
repeated derivatives of a quotient stay in range in float32."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import gradcli as gc

torch = pytest.importorskip("torch", reason="dtypes are compared with PyTorch's")

F32 = np.array([1.0, 2.0, 2.0], np.float32)


def _f32(requires_grad=True):
    return gc.tensor(F32.copy(), requires_grad=requires_grad)


def test_sixth_derivative_of_one_over_x_in_float32_is_exact():
    x = gc.tensor(np.float32(4.0), requires_grad=True)
    t = torch.tensor(4.0, requires_grad=True)
    y, ty = 1 / x, 1 / t
    for order in range(1, 9):
        (y,) = gc.grad(y, x, create_graph=True)
        (ty,) = torch.autograd.grad(ty, t, create_graph=True)
        assert y.dtype == np.float32
        assert y.item() == ty.item(), order  # powers of 2: exact in float32
    x6 = gc.tensor(np.float32(4.0), requires_grad=True)
    y = 1 / x6
    for _ in range(6):
        (y,) = gc.grad(y, x6, create_graph=True)
    assert y.item() == 0.0439453125  # 720 / 4^7


@pytest.mark.parametrize("value", [3.0, 0.7, 11.0])
def test_repeated_derivatives_of_a_quotient_follow_pytorch(value):
    x = gc.tensor(np.float32(value), requires_grad=True)
    t = torch.tensor(value, requires_grad=True)
    y, ty = 2 / (x * x), 2 / (t * t)
    for _ in range(6):
        (y,) = gc.grad(y, x, create_graph=True)
        (ty,) = torch.autograd.grad(ty, t, create_graph=True)
    assert y.item() == pytest.approx(ty.item(), rel=1e-5)


@pytest.mark.parametrize(
    "fn",
    [
        lambda v: gc.amax(v),
        lambda v: gc.amin(v, 0),
        lambda v: v.max(),
        lambda v: gc.sin(v) * 2,
        lambda v: gc.norm(v),
        lambda v: v[1:] * 3,
    ],
    ids=["amax", "amin-dim", "max", "sin", "norm", "slice"],
)
def test_forward_mode_and_jacobians_keep_float32(fn):
    out, tangent = gc.functional.jvp(fn, (_f32(),), (gc.tensor(np.ones(3, np.float32)),))
    assert (out.dtype, tangent.dtype) == (np.float32, np.float32)
    for kw in ({}, {"vectorize": True}, {"vectorize": True, "strategy": "forward-mode"}):
        assert gc.functional.jacobian(fn, _f32(), **kw).dtype == np.float32, kw
    assert gc.functional.hessian(lambda v: gc.sum(fn(v)), _f32()).dtype == np.float32


def test_amax_tangent_shares_ties_in_float32_as_pytorch():
    tangent = np.array([1.0, 3.0, 5.0], np.float32)
    _, got = gc.functional.jvp(gc.amax, (_f32(),), (gc.tensor(tangent),))
    want = torch.func.jvp(torch.amax, (torch.tensor(F32),), (torch.tensor(tangent),))[1]
    assert got.dtype == np.float32 and want.dtype == torch.float32
    assert got.item() == want.item() == 4.0


def test_assignment_into_a_float32_tensor_keeps_float32_and_its_tangent_too():
    def f(v, widen):
        c = gc.zeros(3, dtype=np.float32)
        c[1:] = (v.double() if widen else v) * 2
        return c

    for widen in (False, True):
        g = functools.partial(f, widen=widen)
        out, tangent = gc.functional.jvp(g, (_f32()[:2],), (gc.tensor(np.ones(2, np.float32)),))
        assert (out.dtype, tangent.dtype) == (np.float32, np.float32), widen
        assert tangent._value.tolist() == [0.0, 2.0, 2.0]
        assert gc.functional.jacobian(g, _f32()[:2]).dtype == np.float32
    w = gc.tensor(2.0, requires_grad=True)  # float64 into float32: the gradient is w's float64
    c = gc.zeros(3, dtype=np.float32)
    c[0] = w * 3
    assert c.dtype == np.float32
    c.sum().backward()
    assert w.grad.dtype == np.float64 and w.grad.item() == 3.0


@pytest.mark.parametrize("int_dtype", [np.int8, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("float_dtype", [np.float32, np.float16, np.complex64])
def test_an_integer_tensor_with_a_floating_one_takes_the_floating_dtype(int_dtype, float_dtype):
    ints = np.array([1, 2, 3], int_dtype)
    floats = np.array([0.5, 1.5, 2.5], float_dtype)
    a, b = gc.tensor(ints), gc.tensor(floats, requires_grad=True)
    ta, tb = torch.tensor(ints), torch.tensor(floats, requires_grad=True)
    for op in (lambda p, q: p + q, lambda p, q: q * p, lambda p, q: p / q, lambda p, q: q - p):
        y, ty = op(a, b), op(ta, tb)
        assert str(y.dtype) == str(ty.dtype).replace("torch.", "")
        np.testing.assert_allclose(y._value, ty.detach().numpy(), rtol=1e-3)
        (g,) = gc.grad(y.real.sum() if y.dtype.kind == "c" else y.sum(), b)
        assert g.dtype == float_dtype
    where = gc.where(gc.tensor([True, False, True]), a, b)
    assert where.dtype == float_dtype
    assert gc.cat([a, b]).dtype == torch.cat([ta, tb]).numpy(force=True).dtype


def test_numbers_and_integer_tensors_keep_their_rules():
    k = gc.tensor(np.array([1, 2], np.int32))
    assert (k * 2).dtype == np.int32  # a Python int does not widen an int32 tensor
    assert (k * 2.5).dtype == np.float64  # a Python float: the default dtype (float64 here)
    assert (gc.tensor(np.array([True, False])) * k).dtype == np.int32
