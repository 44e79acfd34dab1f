"""The engine: iterative traversal, memory, reference cycles, pruning."""

from __future__ import annotations

import gc as pygc
import math
import sys
import weakref

import numpy as np

import gradcli as gc


def test_chain_far_deeper_than_the_recursion_limit():
    depth = 100_000
    assert depth > 50 * sys.getrecursionlimit()
    x = gc.tensor(0.3, requires_grad=True)
    y = x
    for _ in range(depth):
        y = y * 1.0001 + 0.0001
    y.backward()
    assert math.isclose(x.grad.item(), 1.0001**depth, rel_tol=1e-10)


def test_deep_chain_of_nonlinear_ops_matches_a_hand_computed_derivative():
    # x_{k+1} = sin(x_k) + 0.5 x_k  =>  dx_{k+1}/dx_k = cos(x_k) + 0.5
    depth = 20_000
    x = gc.tensor(0.8, requires_grad=True)
    y, value, deriv = x, 0.8, 1.0
    for _ in range(depth):
        y = gc.sin(y) + 0.5 * y
        deriv *= math.cos(value) + 0.5
        value = math.sin(value) + 0.5 * value
    y.backward()
    assert math.isclose(y.item(), value, rel_tol=1e-12)
    assert math.isclose(x.grad.item(), deriv, rel_tol=1e-9)


def test_graph_memory_is_released_without_the_garbage_collector():
    pygc.disable()
    try:
        x = gc.tensor(np.ones(1000), requires_grad=True)
        y = x
        for _ in range(50):
            y = gc.exp(y * 0.001)
        probe = weakref.ref(y.grad_fn)
        y.sum().backward()
        assert probe() is not None
        del y
        assert probe() is None  # freed by reference counting alone: no cycles
    finally:
        pygc.enable()


def test_backward_frees_saved_values_but_keeps_the_structure():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).exp().sum()
    node = y.grad_fn.next_functions[0][0]  # ExpBackward0
    y.backward()
    assert node.name() == "ExpBackward0"
    assert node.next_functions[0][0].name() == "MulBackward0"
    assert node.out is None  # the saved result was freed


def test_create_graph_leaves_no_cycle_behind_when_grad_is_used():
    pygc.disable()
    try:
        x = gc.tensor(2.0, requires_grad=True)
        z = x * x * x
        (g,) = gc.grad(z, x, create_graph=True)
        probe = weakref.ref(g.grad_fn)
        del z, g
        assert probe() is None
    finally:
        pygc.enable()


def test_grad_runs_only_the_part_of_the_graph_it_needs():
    calls = []

    class Spy(gc.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1

        @staticmethod
        def backward(ctx, grad):
            calls.append(1)
            return grad

    x = gc.tensor(1.0, requires_grad=True)
    w = gc.tensor(2.0, requires_grad=True)
    y = Spy.apply(x) * w
    (gw,) = gc.grad(y, w)
    assert gw.item() == 1.0 and calls == []


def test_a_wide_graph_with_many_consumers_of_one_node():
    x = gc.tensor(1.5, requires_grad=True)
    a = x * 2
    total = gc.tensor(0.0)
    for k in range(1, 2001):
        total = total + a * k
    total.backward()
    assert x.grad.item() == 2 * sum(range(1, 2001))
