"""A custom operation whose backward is wrong, and the check that finds it.

gradcli check examples/check/buggy_function.py:f --at x=1.3,y=0.4 --blame
"""

import gradcli as gc


class SoftClip(gc.autograd.Function):
    """y = x / (1 + |x|), a smooth clip into (-1, 1)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x / (1 + abs(x))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / (1 + abs(x))  # wrong: the derivative is 1 / (1 + |x|)^2


def f(x, y):
    return gc.sin(y) * SoftClip.apply(x * y) + y**2
