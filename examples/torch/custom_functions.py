"""A small PyTorch model built of five custom torch.autograd.Functions, one with a planted bug: Softplus's
backward has the sign of sigmoid's argument wrong. torch.autograd.gradcheck says "Jacobian mismatch for
output 0 with respect to input 0" for the whole model; gradcli's --blame names the Function, its
nn.Module path and the line that called it:

    gradcli check examples/torch/custom_functions.py:f --at "x=[[0.5,-1.0,2.0],[1.5,0.25,-0.75]]" --blame
"""

import torch
from torch import nn


class Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return x @ w.T + b

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, g.T @ x, g.sum(0)


class Tanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)


class Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.nn.functional.softplus(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(-x)  # the bug: softplus' derivative is sigmoid(x)


class Square(torch.autograd.Function):  # forward without ctx, as torch 2 allows: setup_context saves
    @staticmethod
    def forward(x):
        return x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * g * x


class Dense(nn.Module):
    def __init__(self, inputs, outputs):
        super().__init__()
        self.weight = nn.Parameter(
            torch.linspace(-1.0, 1.0, inputs * outputs, dtype=torch.float64).reshape(outputs, inputs)
        )
        self.bias = nn.Parameter(torch.linspace(-0.5, 0.5, outputs, dtype=torch.float64))

    def forward(self, x):
        return Linear.apply(x, self.weight, self.bias)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = Dense(3, 4)
        self.out = Dense(4, 2)

    def forward(self, x):
        h = Tanh.apply(self.hidden(x))
        return Softplus.apply(self.out(h))


model = Net()


def f(x):
    return Square.apply(model(x)).sum()
