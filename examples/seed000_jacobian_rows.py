"""Seed 000: backward() with a gradient vector picks out a row of the Jacobian.

python examples/seed000_jacobian_rows.py
tensor([[3., 5.]], dtype=float32)
tensor([[4., 6.]], dtype=float32)
"""

import gradcli as gc

x = gc.tensor([[1, 2]], dtype=gc.float32, requires_grad=True)
y = gc.tensor([[3, 4], [5, 6]], dtype=gc.float32, requires_grad=True)
loss = gc.mm(x, y)  # y1 = 3 x1 + 5 x2, y2 = 4 x1 + 6 x2

loss.backward(gc.tensor([[1, 0]], dtype=gc.float32), retain_graph=True)  # keep the graph for a second pass
print(x.grad.data)  # d y1 / d x
x.grad.data.zero_()  # gradients accumulate in leaves: clear them
loss.backward(gc.tensor([[0, 1]], dtype=gc.float32))
print(x.grad.data)  # d y2 / d x

# Without retain_graph, a second backward fails as in PyTorch:
loss = gc.mm(x, y)
loss.backward(gc.tensor([[1, 0]], dtype=gc.float32))
try:
    loss.backward(gc.tensor([[0, 1]], dtype=gc.float32))
except RuntimeError as error:
    print("RuntimeError:", str(error)[:60], "...")
