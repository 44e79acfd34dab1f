"""The autograd semantics SPEC claims, run side by side with PyTorch (float64).

In the style of PyTorch's own ``test_autograd.py``: each scenario is written once,
against a namespace ``L`` that is either gradcli or torch (``L.m`` the module,
``L.tensor`` a float64 tensor), and returns what it observed: numbers, flags,
names, and for an expected error its type and whether PyTorch's words are in
it. gradcli must observe what PyTorch observes. Skipped without torch.

Scenarios: gradient accumulation and ``zero_``, ``retain_graph``, ``create_graph``
(through ``gc.grad``, custom Functions and ``gc.functional``), in-place changes
and version counters, views, ``no_grad`` as a context, on functions and on
generators, ``detach``, ``retain_grad``, ``grad_fn`` names, the classic errors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import gradcli as gc

torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")


class L:
    """One library, seen through the names gradcli and torch share."""

    def __init__(self, module: Any) -> None:
        self.m = module
        self.is_torch = module is torch

    def tensor(self, value: Any, requires_grad: bool = False) -> Any:
        if self.is_torch:
            return torch.tensor(value, dtype=torch.float64, requires_grad=requires_grad)
        return gc.tensor(np.asarray(value, dtype=np.float64), requires_grad=requires_grad)

    def ones(self, *shape: int) -> Any:
        return self.tensor(np.ones(shape))


def observe(value: Any) -> Any:
    """Tensors as nested lists of floats; ``None`` stays ``None``."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [observe(v) for v in value]
    if isinstance(value, (bool, str, int, float)):
        return value
    if hasattr(value, "detach"):
        return np.asarray(value.detach().numpy(), dtype=np.float64).tolist()
    return value


def error(fn: Any, words: str) -> tuple[str, bool] | str:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        return type(exc).__name__, words in str(exc)
    return "no error"


SCENARIOS = []


def scenario(fn: Any) -> Any:
    SCENARIOS.append(fn)
    return fn


def same(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b)) or (np.isnan(a) and np.isnan(b))
    return a == b


@pytest.mark.parametrize("fn", SCENARIOS, ids=lambda f: f.__name__)
def test_gradcli_observes_what_pytorch_observes(fn):
    want = fn(L(torch))
    got = fn(L(gc))
    assert same(got, want), f"gradcli: {got}\nPyTorch: {want}"


# --- accumulation, retain_graph, create_graph --------------------------------------------------------------------


@scenario
def accumulation_until_zero(L):
    x = L.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    first = observe(x.grad)
    y.backward()
    second = observe(x.grad)
    x.grad.zero_()
    (3 * x).sum().backward()
    return [first, second, observe(x.grad)]


@scenario
def backward_twice_without_retain_graph(L):
    x = L.tensor(2.0, requires_grad=True)
    y = x.exp() * x
    y.backward()
    return error(lambda: y.backward(), "Trying to backward through the graph a second time")


@scenario
def create_graph_third_derivative(L):
    x = L.tensor(0.7, requires_grad=True)
    y = L.m.sin(x) * x**3
    (g1,) = L.m.autograd.grad(y, x, create_graph=True)
    (g2,) = L.m.autograd.grad(g1, x, create_graph=True)
    (g3,) = L.m.autograd.grad(g2, x)
    return observe([g1, g2, g3])


@scenario
def backward_with_create_graph_accumulates_a_differentiable_grad(L):
    x = L.tensor(1.5, requires_grad=True)
    (x**3).backward(create_graph=True)
    g = x.grad
    flags = [g.requires_grad]
    (g2,) = L.m.autograd.grad(g, x)
    return [flags, observe(g), observe(g2)]


@scenario
def grad_outputs_allow_unused_and_materialize(L):
    x = L.tensor([1.0, -2.0], requires_grad=True)
    z = L.tensor(3.0, requires_grad=True)
    y = x * 2
    v = L.tensor([0.5, 4.0])
    (gx, gz) = L.m.autograd.grad(y, (x, z), grad_outputs=v, allow_unused=True, retain_graph=True)
    (gx2, gz2) = L.m.autograd.grad(y, (x, z), grad_outputs=v, allow_unused=True, materialize_grads=True)
    return observe([gx, gz, gx2, gz2])


@scenario
def unused_input_without_allow_unused(L):
    x = L.tensor(1.0, requires_grad=True)
    z = L.tensor(1.0, requires_grad=True)
    return error(lambda: L.m.autograd.grad(x * 2, (x, z)), "")[0]


@scenario
def non_scalar_backward_needs_a_gradient(L):
    x = L.tensor([1.0, 2.0], requires_grad=True)
    return error(lambda: (x * 2).backward(), "grad can be implicitly created only for scalar outputs")


@scenario
def grad_of_a_constant(L):
    x = L.tensor(1.0)
    return error(
        lambda: L.m.autograd.grad(x * 2, x), "element 0 of tensors does not require grad and does not have a grad_fn"
    )


# --- leaves, grad_fn, detach, retain_grad -----------------------------------------------------------------------


@scenario
def leaves_and_grad_fn_names(L):
    x = L.tensor([1.0, 2.0], requires_grad=True)
    c = L.tensor([3.0, 4.0])
    y = (x * c + 1).sum()
    z = x**2
    w = 2**x
    names = [type(t.grad_fn).__name__ for t in (y, z, w, x[0], x[1:], x.exp(), -x, x / c, x - c)]
    return [x.is_leaf, c.is_leaf, y.is_leaf, y.requires_grad, (c * 2).requires_grad, x.grad_fn is None, names]


@scenario
def next_functions_walk(L):
    x = L.tensor(2.0, requires_grad=True)
    w = L.tensor(1.0, requires_grad=True)
    y = (x + w) * (w + 1)
    names = []
    stack = [y.grad_fn]
    while stack:
        node = stack.pop()
        names.append(type(node).__name__)
        stack.extend(f for f, _ in node.next_functions if f is not None)
    return sorted(names)


@scenario
def detach_stops_the_gradient(L):
    x = L.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    y = (x * d).sum()
    y.backward()
    return [d.requires_grad, d.is_leaf, observe(x.grad)]


@scenario
def retain_grad_of_an_intermediate(L):
    x = L.tensor([1.0, 2.0], requires_grad=True)
    a = x * 3
    a.retain_grad()
    b = (a * a).sum()
    b.backward()
    return [observe(a.grad), observe(x.grad), a.retains_grad]


@scenario
def retain_grad_then_changed_in_place(L):
    x = L.tensor([1.0], requires_grad=True)
    a = x.clone()
    a.retain_grad()
    a.mul_(2)
    a.sum().backward()
    return observe([a.grad, x.grad])


# --- in-place and version counters, views ------------------------------------------------------------------------


@scenario
def in_place_on_a_leaf_that_requires_grad(L):
    x = L.tensor([1.0], requires_grad=True)
    return error(lambda: x.add_(1), "a leaf Variable that requires grad is being used in an in-place operation.")


@scenario
def saved_value_changed_in_place(L):
    x = L.tensor([1.0, 2.0], requires_grad=True)
    a = x * 1
    b = a.exp()  # saves its output
    b.mul_(2)
    return error(lambda: b.sum().backward(), "one of the variables needed for gradient computation has been modified")


@scenario
def in_place_after_multiplying_by_a_number(L):
    x = L.tensor(1.0, requires_grad=True)
    d = x + 0
    y = 3 * d
    d += 1
    y.backward()
    return observe(x.grad)


@scenario
def in_place_chain_gradient(L):
    x = L.tensor([1.0, 2.0, 3.0], requires_grad=True)
    a = x * 2
    a.add_(1)
    a.mul_(x)
    a.sum().backward()
    return observe(x.grad)


@scenario
def slices_and_indexing_gradients(L):
    x = L.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    y = x[0, 1:].sum() * 2 + x[1][0] * x[:, 2].prod() + x[-1, ::2].sum()
    y.backward()
    return observe(x.grad)


@scenario
def view_reshape_transpose_gradients(L):
    x = L.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    y = (x.reshape(3, 2) * L.tensor([[1.0], [2.0], [3.0]])).t().sum(0) @ L.tensor([1.0, -1.0, 2.0])
    y.backward()
    return observe([y, x.grad])


# --- no_grad ------------------------------------------------------------------------------------------------------


@scenario
def no_grad_context_and_nesting(L):
    x = L.tensor(2.0, requires_grad=True)
    with L.m.no_grad():
        y = x * 2
        with L.m.enable_grad():
            z = x * 3
    w = x * 4
    return [y.requires_grad, z.requires_grad, w.requires_grad, L.m.is_grad_enabled()]


@scenario
def no_grad_on_a_function(L):
    @L.m.no_grad()
    def double(t):
        return t * 2

    x = L.tensor(2.0, requires_grad=True)
    return [double(x).requires_grad, (x * 2).requires_grad]


@scenario
def no_grad_on_a_generator(L):
    @L.m.no_grad()
    def doubles(t):
        for _ in range(2):
            yield t * 2

    x = L.tensor(2.0, requires_grad=True)
    return [y.requires_grad for y in doubles(x)]


# --- custom Functions ---------------------------------------------------------------------------------------------


@scenario
def custom_function_first_and_second_derivative(L):
    class Cube(L.m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x**2

    x = L.tensor(1.5, requires_grad=True)
    y = Cube.apply(x)
    (g1,) = L.m.autograd.grad(y, x, create_graph=True)
    (g2,) = L.m.autograd.grad(g1, x)
    return [type(y.grad_fn).__name__.endswith("Backward"), observe([y, g1, g2])]


@scenario
def custom_function_saving_its_output(L):
    class Square(L.m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x**2
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * 2 * y / x

    x = L.tensor(2.0, requires_grad=True)
    (g1,) = L.m.autograd.grad(Square.apply(x), x, create_graph=True)
    (g2,) = L.m.autograd.grad(g1, x)
    return observe([g1, g2])


# --- gc.functional against torch.autograd.functional -------------------------------------------------------------


def _f(L):
    return lambda x, y: L.m.stack([x[0] * y.sin(), (x * x).sum() * y, x.exp().sum()])


def _scalar(L):
    return lambda x, y: (x * x).sum() * y.sin() + x.prod()


def _functional(L):
    return L.m.autograd.functional if L.is_torch else gc.functional


def _inputs(L, requires_grad=False):
    return L.tensor([0.5, -1.2], requires_grad), L.tensor(0.8, requires_grad)


@scenario
def functional_jacobian_hessian_vjp_jvp_hvp(L):
    F = _functional(L)
    x, y = _inputs(L)
    jac = F.jacobian(_f(L), (x, y))
    hes = F.hessian(_scalar(L), (x, y))
    _, vjp = F.vjp(_f(L), (x, y), L.tensor([1.0, 2.0, -1.0]))
    _, jvp = F.jvp(_f(L), (x, y), (L.tensor([1.0, 0.5]), L.tensor(2.0)))
    _, hvp = F.hvp(_scalar(L), (x, y), (L.tensor([1.0, 0.5]), L.tensor(2.0)))
    return observe([list(jac), [list(row) for row in hes], list(vjp), jvp, list(hvp)])


@scenario
def functional_create_graph_is_differentiable(L):
    F = _functional(L)
    x, y = _inputs(L, requires_grad=True)
    u = (L.tensor([1.0, 0.5]), L.tensor(2.0))
    _, jvp = F.jvp(_f(L), (x, y), u, create_graph=True)
    _, vjp = F.vjp(_f(L), (x, y), L.tensor([1.0, 2.0, -1.0]), create_graph=True)
    _, hvp = F.hvp(_scalar(L), (x, y), u, create_graph=True)
    jac = F.jacobian(_f(L), (x, y), create_graph=True)
    total = jvp.sum() + vjp[0].sum() + vjp[1] + hvp[0].sum() + hvp[1] + jac[0].sum() + jac[1].sum()
    gx, gy = L.m.autograd.grad(total, (x, y))
    return observe([gx, gy])
