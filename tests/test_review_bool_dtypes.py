"""Issue 13 (review): the library's comparisons return booleans (as PyTorch's do), and NumPy
computes functions of booleans in float16: ``gc.exp(gc.ge(y, 1.5))`` gave 2.71875,
``gc.sigmoid(gc.lt(x, y))`` raised NumPy's "boolean negative" TypeError, ``gc.atan2(b, b)`` and
``2.0 ** b`` float16, ``b ** 2`` an int8 tensor. PyTorch computes them in floating point; gradcli
in float64, its default."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gradcli as gc

UNARY = ["exp", "sin", "cos", "tanh", "sigmoid", "sqrt", "log1p", "erf", "softplus", "abs", "relu", "neg"]


@pytest.mark.parametrize("name", UNARY)
def test_a_function_of_booleans_is_float64(name: str) -> None:
    y = gc.tensor([1.0, 2.0], requires_grad=True)
    mask = gc.ge(y, 1.5)  # [False, True]
    out = getattr(gc, name)(mask)
    assert out.dtype == np.float64
    reference = getattr(gc, name)(gc.tensor([0.0, 1.0]))
    assert np.array_equal(out.numpy(), reference.numpy())


def test_the_issue_values() -> None:
    y = gc.tensor([1.0, 2.0], requires_grad=True)
    assert gc.exp(gc.ge(y, 1.5)).numpy()[1] == math.e  # was 2.71875
    assert gc.sin(gc.eq(y, y)).numpy()[0] == math.sin(1.0)  # was 0.84130859375
    assert gc.sigmoid(gc.lt(y, 2.0)).numpy()[0] == 1 / (1 + math.exp(-1.0))  # was a TypeError


def test_binary_and_general_primitives_of_booleans() -> None:
    b = gc.tensor([True, False])
    assert gc.atan2(b, b).numpy().tolist() == [math.atan2(1.0, 1.0), 0.0]
    assert (2.0**b).dtype == np.float64 and (2.0**b).numpy().tolist() == [2.0, 1.0]
    assert (b**2).dtype == np.float64 and (b**2).numpy().tolist() == [1.0, 0.0]
    assert gc.pow(2.0, b).numpy().tolist() == [2.0, 1.0]
    assert (b + b).dtype == np.bool_  # as PyTorch: bool + bool stays bool
    half = gc.tensor([1.0, 2.0], dtype=np.float16)
    assert (half * b).dtype == np.float16  # a float16 input keeps float16


def test_a_gradient_through_a_mask_is_float64() -> None:
    y = gc.tensor([1.0, 2.0], requires_grad=True)
    (gc.exp(gc.ge(y, 1.5)) * y).sum().backward()
    assert y.grad.dtype == np.float64
    assert y.grad.numpy().tolist() == [1.0, math.e]


def test_against_pytorch() -> None:
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    t = torch.tensor([0.5, 2.0], dtype=torch.float64)
    g = gc.tensor([0.5, 2.0])
    for name in ["exp", "sin", "tanh", "sigmoid", "sqrt", "erf"]:
        expected = getattr(torch, name)(t >= 1.0).double().numpy()
        assert np.allclose(getattr(gc, name)(g >= 1.0).numpy(), expected, rtol=1e-7, atol=0)
