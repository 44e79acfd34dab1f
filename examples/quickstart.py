"""The SPEC's library example: y = (x + w) * (w + 1) at x = 2, w = 1 (seed 002).

python examples/quickstart.py
"""

import gradcli as gc

x = gc.tensor(2.0, requires_grad=True)
w = gc.tensor(1.0, requires_grad=True)
a = x + w
b = w + 1
y = a * b
y.backward()

print("y      =", y)  # tensor(6., grad_fn=<MulBackward0>)
print("dy/dx  =", x.grad)  # tensor(2.)
print("dy/dw  =", w.grad)  # tensor(5.): two paths, y -> a -> w and y -> b -> w, added
print("y.grad_fn.next_functions =", y.grad_fn.next_functions)

# Second derivatives, as seed 003 builds them: z = x^2 y at x = 2, y = 3
x = gc.tensor(2.0, requires_grad=True)
y = gc.tensor(3.0, requires_grad=True)
z = x * x * y
(dz_dx,) = gc.grad(z, x, create_graph=True)
(d2z_dx2,) = gc.grad(dz_dx, x)
print("dz/dx =", dz_dx, " d2z/dx2 =", d2z_dx2)  # 12 and 6
