"""The seeds' PyTorch programs, written with torch: gradcli runs them with PyTorch's own numbers.

gradcli eval examples/torch/seeds.py:two_paths --at w=1,x=2        # seed 002: value 6, d/dw 5, d/dx 2
gradcli hessian examples/torch/seeds.py:higher_order --at x=2,y=3  # seed 003: d2z/dx2 = 2y = 6
gradcli graph examples/torch/seeds.py:two_paths --at w=1,x=2       # PyTorch's nodes: AddBackward0, MulBackward0
"""

import torch
from torch import nn


def two_paths(w, x):
    """Seed 002: y = (w + x) * (w + 1)."""
    a = torch.add(w, x)
    b = torch.add(w, 1)
    return torch.mul(a, b)


def product(x):
    """Seed 003: y = (x + 1) * (x + 2); dy/dx = 2x + 3 = 7 at x = 2."""
    a = torch.add(x, 1)
    b = torch.add(x, 2)
    return torch.mul(a, b)


def higher_order(x, y):
    """Seed 003: z = x^2 y; dz/dx = 2xy = 12, dz/dy = x^2 = 4, d2z/dx2 = 2y = 6 at x = 2, y = 3."""
    return x * x * y


def dot_twice(x):
    """Seed 004: y = 2 x.x; its gradient is 4x."""
    return 2 * torch.dot(x, x)


def control_flow(a):
    """Seed 004: doubling until the norm passes 1000, then a branch: d = k a, so d'(a) = d / a."""
    b = a * 2
    while b.norm() < 1000:
        b = b * 2
    if b.sum() > 0:
        c = b
    else:
        c = b * 100
    return c


def matrix_product(x, y):
    """Seed 000: loss = x @ y (a row by a matrix): its Jacobian by x has the columns of y as rows."""
    return torch.mm(x, y)


torch.manual_seed(0)
net = nn.Linear(3, 4).double()


def layer(input):
    """Seed 000: a one-layer network, summed: the loss whose backward frees the graph."""
    return torch.sum(net(input))
