"""Issue 15: the custom Function details PyTorch users rely on: ctx.needs_input_grad,
ctx.mark_non_differentiable, ctx.set_materialize_grads and @once_differentiable, each run as
the same program on gradcli and (when importable) torch."""

import pytest

import gradcli as gc
from gradcli.autograd.function import ONCE_DIFFERENTIABLE, once_differentiable


def _module(lib):
    if lib is gc:
        return gc, gc.grad, once_differentiable
    from torch.autograd.function import once_differentiable as torch_once

    return lib, lib.autograd.grad, torch_once


def ctx_program(lib):
    lib, _, _ = _module(lib)
    log = []

    class Pair(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, k):
            log.append(("needs_input_grad", ctx.needs_input_grad))
            a, b = x * 2, x * y
            ctx.mark_non_differentiable(b)
            return a, b

        @staticmethod
        def backward(ctx, ga, gb):  # gb: zeros, materialized for the non-differentiable output
            log.append(("backward", ga.tolist(), gb.tolist()))
            return ga * 2, None, None

    x = lib.tensor([1.0, 3.0], requires_grad=True)
    y = lib.tensor([2.0, 2.0], requires_grad=True)
    a, b = Pair.apply(x, y, 3)
    log.append(("b", b.requires_grad, b.is_leaf, b.grad_fn is None, b.tolist()))
    (a.sum() + b.sum()).backward()
    log.append(("grads", x.grad.tolist(), y.grad))
    Pair.apply(x, lib.tensor([1.0, 1.0]), 3)
    mask = Pair.apply(x, lib.tensor([True, False]), 0)[1]
    log.append(("mask", mask.tolist(), mask.requires_grad))

    class Lazy(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 1, x * 2

        @staticmethod
        def backward(ctx, ga, gb):
            log.append(("not materialized", ga is None, gb is None))
            return gb * 2

    x.grad = None
    Lazy.apply(x)[1].sum().backward()
    log.append(("x.grad", x.grad.tolist()))
    return log


CTX = [
    ("needs_input_grad", (True, True, False)),
    ("b", False, True, True, [2.0, 6.0]),
    ("backward", [1.0, 1.0], [0.0, 0.0]),
    ("grads", [2.0, 2.0], None),
    ("needs_input_grad", (True, False, False)),
    ("needs_input_grad", (True, False, False)),
    ("mask", [1.0, 0.0], False),
    ("not materialized", True, False),
    ("x.grad", [2.0, 2.0]),
]


def once_program(lib):
    lib, grad, once = _module(lib)
    log = []

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        @once
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            log.append(("recording in backward", lib.is_grad_enabled(), g.requires_grad))
            return g * 3 * x**2

    x = lib.tensor([1.0, -2.0], requires_grad=True)
    (gx,) = grad(Cube.apply(x).sum(), x, create_graph=True)
    log.append(("gx", gx.tolist(), gx.requires_grad))
    y = Cube.apply(x)
    (gx,) = grad((y * y).sum(), x, create_graph=True)  # its incoming gradient 2y requires grad
    log.append(("gx", gx.tolist(), gx.requires_grad, type(gx.grad_fn).__name__))
    try:
        gx.sum().backward()
    except RuntimeError as e:
        log.append(("error", str(e)))
    return log


ONCE = [
    ("recording in backward", False, False),
    ("gx", [3.0, 12.0], False),
    ("recording in backward", False, True),
    ("gx", [6.0, -192.0], True, "Error"),
    ("error", ONCE_DIFFERENTIABLE),
]


@pytest.mark.parametrize(("program", "expected"), [(ctx_program, CTX), (once_program, ONCE)])
def test_function_details_as_written(program, expected):
    assert program(gc) == expected


@pytest.mark.parametrize("program", [ctx_program, once_program])
def test_function_details_as_pytorch(program):
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    torch.set_default_dtype(torch.float64)
    try:
        assert program(gc) == program(torch)
    finally:
        torch.set_default_dtype(torch.float32)
