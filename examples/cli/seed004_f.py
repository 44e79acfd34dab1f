"""Seed 004's f(a): Python control flow, recorded as it runs.

gradcli eval examples/cli/seed004_f.py:f --at a=0.5946    -> value = 1217.7408, d/da = 2048 (= value / a)
"""


def f(a):
    b = a * 2
    while b.norm() < 1000:
        b = b * 2
    if b.sum() > 0:
        c = b
    else:
        c = b * 100
    return c
