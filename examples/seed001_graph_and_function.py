"""Seed 001: grad_fn, backward on a vector output, and a user-defined Function.

python examples/seed001_graph_and_function.py
"""

import gradcli as gc

gc.manual_seed(0)
a = gc.randn((3, 3), requires_grad=True)
w1, w2, w3, w4 = (gc.randn((3, 3), requires_grad=True) for _ in range(4))
b = w1 * a
c = w2 * a
d = w3 * b + w4 * c
L = 10 - d

print("The grad fn for a is", a.grad_fn)  # None: a leaf
print("The grad fn for d is", d.grad_fn)  # <AddBackward0 object at 0x...>

try:
    L.backward()
except RuntimeError as error:
    print("RuntimeError:", error)  # grad can be implicitly created only for scalar outputs

L.sum().backward()  # fix 1: reduce to a scalar
first = a.grad.clone()
a.grad = None
(10 - (w3 * (w1 * a) + w4 * (w2 * a))).backward(gc.ones((3, 3)))  # fix 2: give the vector
print("both fixes agree:", bool((a.grad == first).numpy().all()))


class MulAdd(gc.autograd.Function):
    """d = w3*b + w4*c as one operation, with its own backward: the seed's <ThAddBackward>."""

    @staticmethod
    def forward(ctx, w3, b, w4, c):
        ctx.save_for_backward(w3, b, w4, c)
        return w3 * b + w4 * c

    @staticmethod
    def backward(ctx, grad):
        w3, b, w4, c = ctx.saved_tensors
        return grad * b, grad * w3, grad * c, grad * w4


d2 = MulAdd.apply(w3, b, w4, c)
print("custom node:", d2.grad_fn.name(), "- same values:", bool((d2 == d).numpy().all()))
