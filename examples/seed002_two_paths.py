"""Seed 002: y = (x + w)(w + 1): two paths from y to w, their products added.

python examples/seed002_two_paths.py
tensor([5.])
is_leaf: True True False False False
gradient: tensor([5.]) tensor([2.]) None None None
"""

import warnings

import gradcli as gc

w = gc.tensor([1.0], requires_grad=True)
x = gc.tensor([2.0], requires_grad=True)
a = gc.add(w, x)  # retain_grad() would keep a.grad
b = gc.add(w, 1)
y = gc.mul(a, b)
y.backward()
print(w.grad)  # dy/dw = b + a = (w + 1) + (x + w) = 5

print("is_leaf:", w.is_leaf, x.is_leaf, a.is_leaf, b.is_leaf, y.is_leaf)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # reading a non-leaf's .grad warns, as in PyTorch
    print("gradient:", w.grad, x.grad, a.grad, b.grad, y.grad)
print("w.grad_fn =", w.grad_fn, " a.grad_fn =", a.grad_fn.name(), " y.grad_fn =", y.grad_fn.name())
