"""Seed 004: y = 2 x.x, sums, detach, Python control flow, no_grad and .data.

python examples/seed004_control_flow.py
"""

import gradcli as gc

x = gc.arange(4.0, requires_grad=True)
y = 2 * gc.dot(x, x)
print(y)  # tensor(28., grad_fn=<MulBackward0>)
y.backward()
print(x.grad, x.grad == 4 * x)  # tensor([ 0.,  4.,  8., 12.]) tensor([True, True, True, True])

x.grad.zero_()
x.sum().backward()
print(x.grad)  # tensor([1., 1., 1., 1.])

x.grad.zero_()
y = x * x
u = y.detach()  # u is a constant from here on
(u * x).sum().backward()
print(x.grad == u)  # tensor([True, True, True, True])


def f(a):
    b = a * 2
    while b.norm() < 1000:
        b = b * 2
    c = b if b.sum() > 0 else b * 100
    return c


gc.manual_seed(4)
a = gc.randn(size=(), requires_grad=True)
d = f(a)
d.backward()
print(a, a.grad == d / a)  # the graph recorded this run's loop: d = k a, so d'(a) = d / a

x = gc.tensor(1.0, requires_grad=True)
y1 = x**2
with gc.no_grad():
    y2 = x**3  # not recorded
y3 = y1 + y2
y3.backward()
print(y1, y2, y3, x.grad)  # tensor(2.): only y1's path

x = gc.ones(1, requires_grad=True)
y = x * x
x.data *= 100  # changes through .data are not recorded
y.backward()
print(x, x.grad)  # tensor([100.], requires_grad=True) tensor([200.])
