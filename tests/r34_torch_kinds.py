"""PyTorch functions of the kinds issue 34 found failing on gradcli's road (tests/test_r34_torch_road.py
runs every command on them and compares with PyTorch itself). Imported only where torch is installed."""

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable
from torch.utils.checkpoint import checkpoint


def gradient_penalty(x):
    """A gradient inside: the squared gradient of x**3 (a WGAN-GP style penalty) plus sin."""
    y = (x**3).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    return (g**2).sum() + x.sin().sum()


def gradient_inside(x):
    """The same inner gradient, as a vector (for jacobian)."""
    (g,) = torch.autograd.grad((x**3).sum(), x, create_graph=True)
    return g * x


def backward_inside(x):
    """``.backward()`` inside, then the accumulated gradient used."""
    (x**3).sum().backward(create_graph=True)
    return (x.grad**2).sum()


torch.manual_seed(0)
norm = torch.nn.BatchNorm1d(2).double().train()


def batchnorm(x):
    """BatchNorm in training mode (its running statistics updated in place)."""
    return norm(x.reshape(3, 2)).sin().reshape(-1)


def batchnorm_sum(x):
    return (batchnorm(x) * torch.arange(1.0, 7.0, dtype=torch.float64)).sum()


class Square(torch.autograd.Function):
    """A custom Function without jvp (and in the old style: no setup_context)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


def custom(x):
    return Square.apply(x) * x.sin()


def custom_sum(x):
    return custom(x).sum()


def reentrant(x):
    """Reentrant checkpoint: PyTorch itself refuses ``torch.autograd.grad`` through it."""
    return checkpoint(lambda t: t.sin() * t, x, use_reentrant=True)


def sign(x):
    """torch.sgn's gradient is a ZeroTensor."""
    return torch.sgn(x).sum()


def absolute(x):
    """abs's second derivative is a ZeroTensor."""
    return torch.abs(x).sum() * 2


INDEX = torch.tensor([0, 2, 2])


def embedding(w):
    """A sparse embedding gradient."""
    return (F.embedding(INDEX, w, sparse=True).sin() ** 2).sum()


def embedding_dense(w):
    return (F.embedding(INDEX, w).sin() ** 2).sum()


table = torch.nn.Embedding(4, 2, sparse=True).double()


def embedding_module(x):
    return (table(INDEX) * x).sum()


def bfloat16(x):
    """A bfloat16 output."""
    return (x.to(torch.bfloat16) ** 3).sum()


def float16(x):
    return (x.half().exp()).sum()


@torch.compile(backend="aot_eager")
def compiled(x):
    return (x.sin() * x).sum()


@torch.compile(backend="aot_eager")
def compiled_vector(x):
    return x.sin() * x.exp()


class Lying(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * grad  # wrong: 2x


@torch.compile(backend="aot_eager")
def compiled_lying(x):
    return Lying.apply(x).sum()


def in_place(x, y):
    """An input not differentiated, changed in place (a plain call gives x * 2y)."""
    y.mul_(2)
    return (x * y).sum()


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * grad


def once(x):
    return Cube.apply(x).sum()
