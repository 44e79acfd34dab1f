"""Seed 003: backward() vs grad(), create_graph for second derivatives, detach.

python examples/seed003_higher_order.py
"""

import gradcli as gc

# case 1: y = (x + 1)(x + 2) at x = 2: dy/dx = 7
x = gc.tensor(2.0, requires_grad=True)
y = gc.mul(gc.add(x, 1), gc.add(x, 2))
print("case 1:", gc.grad(outputs=y, inputs=x)[0])  # tensor(7.)

# case 2: z = x^2 y at x = 2, y = 3: dz/dx = 12, dz/dy = 4, d2z/dx2 = 6
x = gc.tensor(2.0).requires_grad_()
y = gc.tensor(3.0).requires_grad_()
z = x * x * y
z.backward(create_graph=True)  # x.grad = 12, itself differentiable
print("case 2:", x.grad, y.grad)
x.grad.backward()  # accumulates 6 into x.grad: 18
print("without zeroing:", x.grad)  # tensor(18., grad_fn=<CopyBackwards>)

x = gc.tensor(2.0).requires_grad_()
z = x * x * gc.tensor(3.0)
z.backward(create_graph=True)
x.grad.data.zero_()  # clear the first derivative first
x.grad.backward()
print("after zeroing:", x.grad)  # tensor(6., grad_fn=<CopyBackwards>)

# case 3: a vector output needs the vector of the vector-Jacobian product
x = gc.tensor([1.0, 2.0]).requires_grad_()
y = x * x
y.backward(gc.ones_like(y))
print("case 3:", x.grad)  # tensor([2., 4.])

# detach: cut the path through a
x = gc.tensor([2.0], requires_grad=True)
a = gc.add(x, 1).detach()
b = gc.add(x, 2)
gc.mul(a, b).backward()
print("detach:", x.grad)  # tensor([3.]): only the path through b
