"""gc.functional and gc.testing where features meet, in the style of PyTorch's autograd/test_functional.py.

Torch-free tests check known values; the ``torch`` fixture skips a test when PyTorch is not installed,
and otherwise compares with ``torch.autograd.functional`` in float64 (issue 12, issue 13).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app
from gradcli.functional import hessian, jacobian

runner = CliRunner()


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")


def val(t):
    """A result's values, whether or not it is in a graph."""
    return t.detach().numpy().tolist()


def cli(*args: str):
    result = runner.invoke(app, expression_after_dashes(list(args)))
    assert "Traceback" not in result.output + result.stderr, result.output + result.stderr
    return result


# --- constant outputs give zero rows ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
def test_a_constant_output_beside_others_gives_a_zero_row(mode):
    x = gc.tensor([1.0, 2.0])
    j_x, j_c = jacobian(lambda x: (x * x, gc.tensor(1.0)), x, mode=mode)
    np.testing.assert_array_equal(j_x.numpy(), [[2.0, 0.0], [0.0, 4.0]])
    np.testing.assert_array_equal(j_c.numpy(), [0.0, 0.0])
    j_c, j_x = jacobian(lambda x: (gc.tensor([5.0, 6.0, 7.0]), x), x, mode=mode)
    np.testing.assert_array_equal(j_c.numpy(), np.zeros((3, 2)))
    np.testing.assert_array_equal(j_x.numpy(), np.eye(2))


def test_assert_grad_close_accepts_a_constant_output():
    gc.testing.assert_grad_close(lambda x: (x, gc.tensor(1.0)), gc.tensor([1.0, 2.0], requires_grad=True))
    gc.testing.assert_grad_close(lambda x: (gc.tensor(1.0), gc.sin(x)), gc.tensor(0.5, requires_grad=True))


@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
@pytest.mark.parametrize("expression", ["max(x,y), 3", "3, max(x,y)", "where(x > y, x, y), 3", "clamp(y, 0, x), 3"])
def test_cli_jacobian_with_a_constant_output_beside_a_kink(expression, mode):
    result = cli("jacobian", expression, "--at", "x=0.5,y=2", "--mode", mode, "--json")
    assert result.exit_code == 0, result.output + result.stderr
    doc = json.loads(result.stdout)
    # d/dx, d/dy of each output: the bound x is active in clamp(2, 0, 0.5)
    row = {"max(x,y)": (0.0, 1.0), "where(x > y, x, y)": (0.0, 1.0), "clamp(y, 0, x)": (1.0, 0.0), "3": (0.0, 0.0)}
    assert sorted(doc["inputs"]) == ["x", "y"]
    assert doc["jacobian"] == [[row[o][i == "y"] for i in doc["inputs"]] for o in doc["outputs"]]


def test_cli_jacobian_constant_output_table():
    result = cli("jacobian", "max(x,y), 3", "--at", "x=0.5,y=2")
    assert result.exit_code == 0
    assert result.stdout.split("\n")[1:3] == ["max(x,y)  0  1", "3         0  0"]


# --- torch-free: create_graph results are differentiable, derivatives of JVPs nest ----------------------------------


def test_create_graph_jacobian_is_differentiable_with_respect_to_the_input():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    j = jacobian(lambda x: x**3, x, create_graph=True)  # diag(3 x^2)
    assert val(j) == [[3.0, 0.0], [0.0, 12.0]]
    (d,) = gc.grad(j.sum(), x)
    np.testing.assert_array_equal(d.numpy(), [6.0, 12.0])
    without = jacobian(lambda x: x**3, x)
    assert not without.requires_grad


def test_create_graph_hessian_is_differentiable_with_respect_to_the_input():
    x = gc.tensor(2.0, requires_grad=True)
    h = hessian(lambda x: x**4, x, create_graph=True)  # 12 x^2
    assert h.item() == 48.0
    assert gc.grad(h, x)[0].item() == 48.0  # 24 x
    (hx, hy), (_, hyy) = hessian(lambda x, y: x * x * y * y, (x, gc.tensor(3.0)), create_graph=True)
    assert (hx.item(), hy.item(), hyy.item()) == (18.0, 24.0, 8.0)
    assert gc.grad(hx, x)[0].item() == 0.0 and gc.grad(hyy, x)[0].item() == 8.0  # of 2 y^2 and 2 x^2


@pytest.mark.parametrize("name", ["vjp", "jvp", "hvp", "vhp"])
def test_create_graph_products_are_differentiable_with_respect_to_input_and_vector(name):
    x = gc.tensor(2.0, requires_grad=True)
    v = gc.tensor(0.5, requires_grad=True)
    out, prod = getattr(gc.functional, name)(lambda x: x**3, x, v, create_graph=True)
    assert out.requires_grad and out.item() == 8.0
    second = name in ("hvp", "vhp")
    assert prod.item() == (6.0 * 2.0 * 0.5 if second else 3.0 * 4.0 * 0.5)
    dx, dv = gc.grad(prod, (x, v))
    assert (dx.item(), dv.item()) == ((6.0 * 0.5, 12.0) if second else (6.0 * 2.0 * 0.5, 12.0))
    out, prod = getattr(gc.functional, name)(lambda x: x**3, x, v)
    assert not out.requires_grad and not prod.requires_grad


def test_nested_forward_over_reverse_and_reverse_over_forward():
    f = gc.functional
    x, u, w = gc.tensor(2.0), gc.tensor(0.5), gc.tensor(3.0)
    cube = lambda x: x**3  # noqa: E731
    # d/dx (w * 3x^2) . u = 6 x w u, by every pairing of the two modes
    fwd_rev = f.jvp(lambda x: f.vjp(cube, x, w, create_graph=True)[1], x, u)[1]
    rev_fwd = f.vjp(lambda x: f.jvp(cube, x, u, create_graph=True)[1], x, w)[1]
    fwd_fwd = f.jvp(lambda x: f.jvp(cube, x, u, create_graph=True)[1], x, w)[1]
    rev_rev = f.vjp(lambda x: f.vjp(cube, x, w, create_graph=True)[1], x, u)[1]
    assert [t.item() for t in (fwd_rev, rev_fwd, fwd_fwd, rev_rev)] == [18.0] * 4
    # a third level: d3/dx3 x^4 = 24 x
    third = f.jvp(lambda x: f.hvp(lambda y: y**4, x, create_graph=True)[1], x, gc.tensor(1.0))[1]
    assert third.item() == 48.0
    # the forward-mode Jacobian of a create_graph Jacobian (batched backward passes, pushed forward)
    v = gc.tensor([1.0, 2.0])
    np.testing.assert_array_equal(
        jacobian(lambda x: jacobian(lambda y: y**3, x, create_graph=True), v, mode="forward").numpy(),
        np.einsum("ij,jk->ijk", np.eye(2), np.diag([6.0, 12.0])),
    )


def test_assert_grad_close_of_a_create_graph_jacobian():
    def f(y):
        return y * gc.abs(y) * y[0] + gc.sin(y)

    x = gc.tensor([0.3, -0.7, 1.1], requires_grad=True)
    for method in ("auto", "fd"):
        gc.testing.assert_grad_close(lambda t: jacobian(f, t, create_graph=True), x, method=method)
        gc.testing.assert_grad_close(lambda t: jacobian(lambda y: y**3, t, create_graph=True), x, method=method)
        gc.testing.assert_grad_close(lambda t: gc.functional.jvp(f, t, gc.ones(3), create_graph=True)[1], x)
        gc.testing.assert_grad_close(lambda t: hessian(lambda y: (y**4).sum(), t, create_graph=True), x)
    with pytest.raises(AssertionError, match="mismatch"):  # still catches a wrong one
        gc.testing.assert_grad_close(lambda t: jacobian(f, t.detach() + 0 * t, create_graph=True), x, method="fd")


# --- torch-free: unrelated outputs, no_grad, v=None -----------------------------------------------------------------


@pytest.mark.parametrize("create_graph", [False, True])
def test_outputs_that_do_not_depend_on_the_input_give_zeros(create_graph):
    f = gc.functional
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    out, g = f.vjp(lambda x: gc.tensor(3.0), x, create_graph=create_graph)
    assert out.item() == 3.0 and val(g) == [0.0, 0.0]
    _, (gx, gy) = f.vjp(lambda x, y: x * 2, (x, gc.tensor(1.0)), gc.ones(2), create_graph=create_graph)
    assert val(gx) == [2.0, 2.0] and gy.item() == 0.0
    _, t = f.jvp(lambda x: (gc.tensor(3.0), x.sum()), x, gc.ones(2), create_graph=create_graph)
    assert t[0].item() == 0.0 and t[1].item() == 2.0
    for name in ("hvp", "vhp"):
        out, hv = getattr(f, name)(lambda x: gc.tensor(1.0), x, gc.ones(2), create_graph=create_graph)
        assert out.item() == 1.0 and val(hv) == [0.0, 0.0]
        _, hv = getattr(f, name)(lambda x: x.sum() * 3, x, gc.ones(2), create_graph=create_graph)  # linear
        assert val(hv) == [0.0, 0.0]
    assert val(f.hessian(lambda x: gc.tensor(1.0), x, create_graph=create_graph)) == [[0.0] * 2] * 2


@pytest.mark.parametrize("create_graph", [False, True])
def test_the_functional_api_runs_normally_inside_no_grad(create_graph):
    f = gc.functional
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    cube = lambda x: (x**3).sum()  # noqa: E731
    with gc.no_grad():
        assert val(f.vjp(cube, x, create_graph=create_graph)[1]) == [3.0, 12.0]
        assert val(f.jvp(lambda x: x**3, x, gc.ones(2), create_graph=create_graph)[1]) == [3.0, 12.0]
        assert val(f.hvp(cube, x, gc.ones(2), create_graph=create_graph)[1]) == [6.0, 12.0]
        assert val(f.vhp(cube, x, gc.ones(2), create_graph=create_graph)[1]) == [6.0, 12.0]
        assert val(f.jacobian(lambda x: x**3, x, create_graph=create_graph)) == [[3.0, 0], [0, 12.0]]
        assert val(f.hessian(cube, x, create_graph=create_graph)) == [[6.0, 0], [0, 12.0]]
        assert not gc.is_grad_enabled()
        assert not (x * 2).requires_grad
    assert gc.is_grad_enabled()


def test_v_none_means_one_for_a_one_element_input_or_output():
    f = gc.functional
    x = gc.tensor(2.0)
    assert f.hvp(lambda x: x**3, x)[1].item() == 12.0
    assert f.vhp(lambda x: x**3, x)[1].item() == 12.0
    assert f.jvp(lambda x: x**3, x)[1].item() == 12.0
    assert f.vjp(lambda x: (x**3).sum(), gc.tensor([1.0, 2.0]))[1].numpy().tolist() == [3.0, 12.0]
    assert f.hvp(lambda x: (x**3).sum(), gc.tensor([2.0]))[1].numpy().tolist() == [12.0]
    vec = gc.tensor([1.0, 2.0])
    for name in ("hvp", "vhp", "jvp"):
        with pytest.raises(RuntimeError, match="v can only be None if the input to the user-provided function is"):
            getattr(f, name)(lambda x: (x**3).sum(), vec)
    with pytest.raises(RuntimeError, match="v can only be None if the user-provided function returns a single"):
        f.vjp(lambda x: x**3, vec)
    with pytest.raises(RuntimeError, match=r"v has invalid size: should be \(2,\) but got \(3,\)"):
        f.vjp(lambda x: x**3, vec, gc.ones(3))
    with pytest.raises(RuntimeError, match="v is a tuple of invalid length: should be 2 but got 1"):
        f.jvp(lambda x, y: x * y, (vec, vec), (gc.ones(2),))
    with pytest.raises(RuntimeError, match="function given to hvp should return a single Tensor"):
        f.hvp(lambda x: (x, x), x)
    with pytest.raises(RuntimeError, match="function given to vhp should contain a single element"):
        f.vhp(lambda x: x * 2, vec, vec)


# --- torch-free: strict=, strategy=, vectorize= -----------------------------------------------------------------------


def test_strict_mode_raises_where_an_output_is_independent():
    f = gc.functional
    x = gc.tensor([1.0, 2.0])
    const = lambda x: gc.tensor(1.0)  # noqa: E731
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients"):
        f.vjp(const, x, strict=True)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients"):
        f.jacobian(const, x, strict=True)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function is independent of input 1"):
        f.jacobian(lambda x, y: x * 2, (x, gc.tensor(1.0)), strict=True)
    with pytest.raises(RuntimeError, match="The output of the user-provided function is independent of input 1"):
        f.vjp(lambda x, y: (x * 2).sum(), (x, gc.tensor(1.0)), strict=True)
    with pytest.raises(RuntimeError, match="The output of the user-provided function is independent of input 1"):
        f.jvp(lambda x, y: x * 2, (x, gc.tensor(1.0)), (gc.ones(2), gc.ones(())), strict=True)
    with pytest.raises(RuntimeError, match="found that the jacobian of the user-provided function with respect to"):
        f.hessian(lambda x: x.sum() * 3, x, strict=True)
    with pytest.raises(RuntimeError, match="found that the jacobian of the user-provided function with respect to"):
        f.hvp(lambda x: x.sum() * 3, x, gc.ones(2), strict=True)
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function is independent of input 0. Th"):
        f.jacobian(lambda x: x * 2, gc.tensor([1.0, 2.0], requires_grad=True), create_graph=True, strict=True)
    # a function that depends on every input passes
    assert f.jacobian(lambda x: x * x, x, strict=True).numpy().tolist() == [[2.0, 0.0], [0.0, 4.0]]
    assert f.vjp(lambda x: (x * x).sum(), x, strict=True)[1].numpy().tolist() == [2.0, 4.0]
    assert f.hessian(lambda x: (x**3).sum(), x, strict=True).numpy().tolist() == [[6.0, 0.0], [0.0, 12.0]]


def test_strategy_and_vectorize_keywords():
    f = gc.functional
    x = gc.tensor([1.0, 2.0])
    for strategy in ("forward-mode", "reverse-mode"):
        for vectorize in (False, True):
            j = f.jacobian(lambda x: x * x, x, vectorize=vectorize, strategy=strategy)
            assert j.numpy().tolist() == [[2.0, 0.0], [0.0, 4.0]]
        h = f.hessian(lambda x: (x**3).sum(), x, outer_jacobian_strategy=strategy)
        assert h.numpy().tolist() == [[6.0, 0.0], [0.0, 12.0]]
    for bad in (lambda: f.jacobian(lambda x: x, x, strategy="sideways"),
                lambda: f.hessian(lambda x: x.sum(), x, outer_jacobian_strategy="sideways")):  # fmt: skip
        with pytest.raises(ValueError, match='Expected strategy to be either "forward-mode" or "reverse-mode"'):
            bad()
        with pytest.raises(AssertionError):  # what PyTorch raises
            bad()


# --- against torch.autograd.functional, float64 ---------------------------------------------------------------------


def _both(torch):
    """(functional module, tensor constructor, math namespace) for gradcli and for PyTorch."""
    import torch.autograd.functional as tf

    def t(value, requires_grad=False):
        return torch.tensor(value, dtype=torch.float64, requires_grad=requires_grad)

    return (gc.functional, gc.tensor, gc), (tf, t, torch)


def _values(result):
    if isinstance(result, (tuple, list)):
        return [_values(r) for r in result]
    return np.asarray(result.detach().numpy(), dtype=np.float64)


def _close(ours, theirs, rtol=1e-12, atol=1e-12):
    if isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _close(a, b, rtol, atol)
    else:
        assert np.shape(ours) == np.shape(theirs)
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)


def _leaves_of(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


# functions written once for both libraries (m: gradcli or torch); each takes the inputs of its point
FUNCTIONS = {
    "vector->vector": (lambda m: lambda x: m.sin(x) * m.exp(x[1]) + x**3, ([0.3, -0.7, 1.1],)),
    "vector->scalar": (lambda m: lambda x: (m.tanh(x * x[0]).sum()) ** 2 + (x**3).sum(), ([0.3, -0.7, 1.1],)),
    "scalar->scalar": (lambda m: lambda x: m.log(x) * x**3, (1.7,)),
    "tuple->tuple": (lambda m: lambda x, y: (x * y**2, m.sigmoid(x).sum() * y, y**3), ([0.5, -1.5], 0.8)),
    "tuple->scalar": (lambda m: lambda x, y: (m.exp(x) * y).sum() * y + (x**2).sum() * x[0], ([0.5, -1.5], 0.8)),
}
SCALAR_FUNCTIONS = [name for name in FUNCTIONS if name.endswith("scalar")]


def _call(lib, name, op, create_graph, *, requires_grad=True):
    """``op`` of function ``name`` at its point with one library; its inputs (to differentiate again) too."""
    F, t, m = lib
    make, point = FUNCTIONS[name]
    f = make(m)
    xs = tuple(t(p, requires_grad=requires_grad) for p in point)
    inputs = xs if len(xs) > 1 else xs[0]
    out = f(*xs)
    outs = out if isinstance(out, tuple) else (out,)
    w = tuple(t(np.linspace(0.5, 1.5, int(np.size(o.detach().numpy()))).reshape(tuple(o.shape)).tolist()) for o in outs)
    u = tuple(t((np.linspace(-1.0, 2.0, int(np.size(p))).reshape(np.shape(p))).tolist()) for p in point)
    w = w if isinstance(out, tuple) else w[0]
    u = u if len(xs) > 1 else u[0]
    if op == "jacobian":
        result = F.jacobian(f, inputs, create_graph=create_graph)
    elif op == "hessian":
        result = F.hessian(f, inputs, create_graph=create_graph)
    elif op == "vjp":
        result = F.vjp(f, inputs, w, create_graph=create_graph)
    elif op == "jvp":
        result = F.jvp(f, inputs, u, create_graph=create_graph)
    else:
        result = getattr(F, op)(f, inputs, u, create_graph=create_graph)
    return result, xs


def _flat(result):
    if isinstance(result, (tuple, list)):
        return [leaf for r in result for leaf in _flat(r)]
    return [result]


CASES = [(name, op) for name in FUNCTIONS for op in ("jacobian", "vjp", "jvp")] + [
    (name, op) for name in SCALAR_FUNCTIONS for op in ("hessian", "hvp", "vhp")
]


@pytest.mark.parametrize(("name", "op"), CASES)
@pytest.mark.parametrize("create_graph", [False, True])
def test_results_match_torch(torch, name, op, create_graph):
    ours, theirs = _both(torch)
    got, _ = _call(ours, name, op, create_graph)
    want, _ = _call(theirs, name, op, create_graph)
    _close(_values(got), _values(want))
    for a, b in zip(_flat(got), _flat(want)):
        assert a.requires_grad or not b.requires_grad  # (a zero block may stay a slice of the graph)
        assert create_graph or not a.requires_grad


@pytest.mark.parametrize(("name", "op"), CASES)
def test_create_graph_results_differentiate_again_as_in_torch(torch, name, op):
    ours, theirs = _both(torch)
    sums = []
    for lib in (ours, theirs):
        F, t, m = lib
        result, xs = _call(lib, name, op, True)
        leaves = [r for r in _flat(result) if r.requires_grad]
        # a weighted sum of every result element, differentiated with respect to the inputs
        total = sum(
            (r * t(np.linspace(0.3, 1.7, int(np.size(r.detach().numpy()))).reshape(tuple(r.shape)).tolist())).sum()
            for r in leaves
        )
        grads = m.autograd.grad(total, xs, allow_unused=True) if leaves else [None] * len(xs)
        sums.append([np.zeros(np.shape(x.detach().numpy())) if g is None else _values(g) for g, x in zip(grads, xs)])
    _close(sums[0], sums[1], rtol=1e-11, atol=1e-11)


def _pairing(F, t, f, x, u, w, kind):
    """d/dx of a first derivative of f, each by forward (jvp) or reverse (vjp) mode."""
    if kind == "forward over reverse":
        return F.jvp(lambda x: F.vjp(f, x, t(w), create_graph=True)[1], x, t(u))[1]
    if kind == "reverse over forward":
        return F.vjp(lambda x: F.jvp(f, x, t(u), create_graph=True)[1], x, t(w))[1]
    if kind == "forward over forward":  # (w is output-shaped: the second direction is u again)
        return F.jvp(lambda x: F.jvp(f, x, t(u), create_graph=True)[1], x, t(u))[1]
    assert kind == "reverse over reverse"
    return F.vjp(lambda x: F.vjp(f, x, t(w), create_graph=True)[1], x, t(u))[1]


def _nested(lib, kind):
    F, t, m = lib
    x0, u, w = [0.3, -0.7, 1.1], [0.5, -1.0, 2.0], [1.5, 0.25, -0.5]

    def f(x):
        return m.sin(x) * m.exp(x[1]) + x**3

    def g(x):
        return (m.tanh(x) * x[0]).sum() ** 2

    x = t(x0)
    if kind.count(" over ") == 1:
        return _pairing(F, t, f, x, u, w, kind)
    if kind == "jvp of a jacobian":
        return F.jvp(lambda x: F.jacobian(f, x, create_graph=True), x, t(u))[1]
    if kind == "jacobian of a jacobian":
        return F.jacobian(lambda x: F.jacobian(f, x, create_graph=True), x)
    if kind == "jacobian of an hvp":
        return F.jacobian(lambda x: F.hvp(g, x, t(u), create_graph=True)[1], x)
    if kind == "hessian of a jvp":
        return F.hessian(lambda x: F.jvp(g, x, t(u), create_graph=True)[1], x)
    if kind == "hessian of a vhp, create_graph":
        x = t(x0, requires_grad=True)
        h = F.hessian(lambda x: F.vhp(g, x, t(u), create_graph=True)[1].sum(), x, create_graph=True)
        return m.autograd.grad(h.sum(), x)[0]
    raise AssertionError(kind)


NESTED = [
    "forward over reverse",
    "reverse over forward",
    "forward over forward",
    "reverse over reverse",
    "jvp of a jacobian",
    "jacobian of a jacobian",
    "jacobian of an hvp",
    "hessian of a jvp",
    "hessian of a vhp, create_graph",
]


@pytest.mark.parametrize("kind", NESTED)
def test_nested_derivatives_match_torch(torch, kind):
    ours, theirs = _both(torch)
    _close(_values(_nested(ours, kind)), _values(_nested(theirs, kind)), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_nested_jacobians_in_both_modes_match_torch(torch, mode):
    ours, theirs = _both(torch)
    x0 = [0.3, -0.7, 1.1]
    got = jacobian(lambda x: jacobian(lambda y: gc.sin(y) * y[0] ** 2, x, create_graph=True), gc.tensor(x0), mode=mode)
    tf = theirs[0]
    want = tf.jacobian(lambda x: tf.jacobian(lambda y: torch.sin(y) * y[0] ** 2, x, create_graph=True), theirs[1](x0))
    _close(_values(got), _values(want))


# unary primitives (gradcli name = torch name) and points inside their domains: every pairing of the
# two modes, to second order (HIPS autograd's check_grads(modes=["fwd", "rev"], order=2) idea)
UNARY = ["sin", "cos", "tan", "exp", "expm1", "log", "log1p", "sqrt", "tanh", "sigmoid", "sinh", "cosh", "atan",
         "asin", "acos", "erf", "abs", "relu", "log2", "log10"]  # fmt: skip


@pytest.mark.parametrize("prim", UNARY)
@pytest.mark.parametrize(
    "kind", ["forward over reverse", "reverse over forward", "forward over forward", "reverse over reverse"]
)
def test_second_order_of_each_unary_primitive_matches_torch(torch, prim, kind):
    ours, theirs = _both(torch)
    x0, u, w = [0.31, -0.42, 0.77], [0.5, -1.0, 2.0], [1.5, 0.25, -0.5]
    results = []
    for F, t, m in (ours, theirs):
        op = getattr(m, prim)

        def f(x, op=op):
            return op(x) * x

        x = t(np.abs(x0).tolist() if prim in ("log", "sqrt", "log2", "log10") else x0)
        r = _pairing(F, t, f, x, u, w, kind)
        results.append(_values(r))
    _close(results[0], results[1], rtol=1e-10, atol=1e-12)


# unrelated inputs, constant outputs, no_grad: the values (zeros) PyTorch gives
EDGE = {
    "constant output": (lambda m, t: lambda x: t(1.0), ([1.0, 2.0],)),
    "constant beside": (lambda m, t: lambda x: (x * x, t([4.0, 5.0, 6.0])), ([1.0, 2.0],)),
    "unrelated input": (lambda m, t: lambda x, y: (x**3).sum(), ([1.0, 2.0], 3.0)),
    "unrelated input, vector output": (lambda m, t: lambda x, y: x**3, ([1.0, 2.0], 3.0)),
    "linear": (lambda m, t: lambda x: x.sum() * 3, ([1.0, 2.0],)),
}


@pytest.mark.parametrize(
    ("case", "op"),
    [(case, op) for case in EDGE for op in ("jacobian", "vjp", "jvp")]
    + [(case, op) for case in ("constant output", "unrelated input", "linear") for op in ("hessian", "hvp", "vhp")],
)
@pytest.mark.parametrize("no_grad", [False, True])
@pytest.mark.parametrize("create_graph", [False, True])
def test_constant_outputs_unrelated_inputs_and_no_grad_as_in_torch(torch, case, op, no_grad, create_graph):
    ours, theirs = _both(torch)
    got = []
    for lib, off in ((ours, gc.no_grad), (theirs, torch.no_grad)):
        F, t, m = lib
        make, point = EDGE[case]
        f = make(m, t)
        xs = tuple(t(p, requires_grad=True) for p in point)
        inputs = xs if len(xs) > 1 else xs[0]
        out = f(*xs)
        many_out = isinstance(out, tuple)
        outs = out if many_out else (out,)
        w = tuple(t(np.ones(tuple(o.shape)).tolist()) for o in outs)
        u = tuple(t(np.full(np.shape(p), 0.5).tolist()) for p in point)
        w, u = (w if many_out else w[0]), (u if len(xs) > 1 else u[0])
        with off() if no_grad else gc.enable_grad():
            if op in ("jacobian", "hessian"):
                r = getattr(F, op)(f, inputs, create_graph=create_graph)
            elif op == "vjp":
                r = F.vjp(f, inputs, w, create_graph=create_graph)
            else:
                r = getattr(F, op)(f, inputs, u, create_graph=create_graph)
        got.append(r)
    _close(_values(got[0]), _values(got[1]), rtol=0, atol=0)
    for a, b in zip(_flat(got[0]), _flat(got[1])):
        assert a.requires_grad == b.requires_grad or (a.requires_grad and not a.detach().numpy().any())


STRICT = {
    "output does not require grad": lambda F, t: F.vjp(lambda x: t(1.0), t([1.0, 2.0]), strict=True),
    "jacobian, constant output": lambda F, t: F.jacobian(lambda x: t(1.0), t([1.0, 2.0]), strict=True, vectorize=False),
    "jacobian, unrelated input": lambda F, t: F.jacobian(
        lambda x, y: x * 2, (t([1.0, 2.0]), t(1.0)), strict=True, vectorize=False
    ),
    "vjp, unrelated input": lambda F, t: F.vjp(lambda x, y: (x * 2).sum(), (t([1.0, 2.0]), t(1.0)), strict=True),
    "jvp, unrelated input": lambda F, t: F.jvp(
        lambda x, y: x * 2, (t([1.0, 2.0]), t(1.0)), (t([1.0, 1.0]), t(1.0)), strict=True
    ),
    "jvp, constant output": lambda F, t: F.jvp(lambda x: t(1.0), t([1.0, 2.0]), t([1.0, 1.0]), strict=True),
    "hessian of a linear function": lambda F, t: F.hessian(lambda x: x.sum() * 3, t([1.0, 2.0]), strict=True),
    "hessian, separate inputs": lambda F, t: F.hessian(
        lambda x, y: (x**2).sum() + y**2, (t([1.0, 2.0]), t(1.0)), strict=True
    ),
    "hvp of a linear function": lambda F, t: F.hvp(lambda x: x.sum() * 3, t([1.0, 2.0]), t([1.0, 1.0]), strict=True),
    "vhp of a linear function": lambda F, t: F.vhp(lambda x: x.sum() * 3, t([1.0, 2.0]), t([1.0, 1.0]), strict=True),
    "vhp, constant output": lambda F, t: F.vhp(lambda x: t(3.0), t([1.0, 2.0]), t([1.0, 1.0]), strict=True),
    "hvp, unrelated input": lambda F, t: F.hvp(
        lambda x, y: (x**2).sum(), (t([1.0, 2.0]), t(1.0)), (t([1.0, 1.0]), t(1.0)), strict=True
    ),
    "vhp, input entering linearly": lambda F, t: F.vhp(
        lambda x, y: (x**2).sum() + y, (t([1.0, 2.0]), t(1.0)), (t([1.0, 1.0]), t(1.0)), strict=True
    ),
    "jacobian create_graph, linear": lambda F, t: F.jacobian(
        lambda x: x * 2, t([1.0, 2.0], requires_grad=True), create_graph=True, strict=True, vectorize=False
    ),
    "vjp create_graph, linear": lambda F, t: F.vjp(
        lambda x: (x * 2).sum(), t([1.0, 2.0], requires_grad=True), create_graph=True, strict=True
    ),
    "jvp create_graph, linear": lambda F, t: F.jvp(
        lambda x: (x * 2).sum(), t([1.0, 2.0], requires_grad=True), t([1.0, 1.0]), create_graph=True, strict=True
    ),
    "hvp create_graph, quadratic": lambda F, t: F.hvp(
        lambda x: (x * x).sum(), t([1.0, 2.0], requires_grad=True), t([1.0, 1.0]), create_graph=True, strict=True
    ),
    "vhp create_graph, quadratic": lambda F, t: F.vhp(
        lambda x: (x * x).sum(), t([1.0, 2.0], requires_grad=True), t([1.0, 1.0]), create_graph=True, strict=True
    ),
    "hessian create_graph, quadratic": lambda F, t: F.hessian(
        lambda x: (x * x).sum(), t([1.0, 2.0], requires_grad=True), create_graph=True, strict=True, vectorize=False
    ),
    "vjp, v=None for a vector output": lambda F, t: F.vjp(lambda x: x * 2, t([1.0, 2.0])),
    "jvp, v=None for a vector input": lambda F, t: F.jvp(lambda x: x * 2, t([1.0, 2.0])),
    "vjp, v of the wrong length": lambda F, t: F.vjp(lambda x: (x, x), t([1.0, 2.0]), (t([1.0, 2.0]),)),
    "vjp, v a tuple for one output": lambda F, t: F.vjp(lambda x: x, t([1.0, 2.0]), (t([1.0, 2.0]), t([1.0, 2.0]))),
    "hvp of a tuple": lambda F, t: F.hvp(lambda x: (x.sum(), x.sum()), t([1.0, 2.0]), t([1.0, 2.0])),
    "hessian of a vector": lambda F, t: F.hessian(lambda x: x * 2, t([1.0, 2.0])),
}


@pytest.mark.parametrize("case", list(STRICT))
def test_errors_are_torchs(torch, case):
    ours, theirs = _both(torch)
    with pytest.raises(RuntimeError) as want:
        STRICT[case](theirs[0], theirs[1])
    with pytest.raises(RuntimeError) as got:
        STRICT[case](ours[0], ours[1])
    assert str(got.value).startswith(str(want.value))
    if case in ("jacobian, unrelated input", "vjp, unrelated input"):  # strict=False: zeros, as in PyTorch
        strict_off = lambda F, t: STRICT[case](  # noqa: E731
            type("F", (), {n: staticmethod(_no_strict(getattr(F, n))) for n in ("jacobian", "vjp")}), t
        )
        _close(_values(strict_off(*ours[:2])), _values(strict_off(*theirs[:2])), rtol=0, atol=0)


def _no_strict(fn):
    return lambda *a, **k: fn(*a, **{**k, "strict": False})


# --- gc.testing.assert_grad_close of functions that differentiate inside, or leave the graph ----------------------


@pytest.mark.parametrize("method", ["auto", "fd"])
def test_assert_grad_close_of_a_function_that_calls_grad(method):
    x = gc.tensor([0.3, -0.7, 1.1], requires_grad=True)
    gc.testing.assert_grad_close(lambda t: gc.grad((t**3).sum(), t, create_graph=True)[0], x, method=method)
    gc.testing.assert_grad_close(lambda t: gc.grad((t * gc.abs(t)).sum(), t, create_graph=True)[0], x, method=method)


@pytest.mark.parametrize("method", ["auto", "fd"])
def test_assert_grad_close_catches_a_function_that_leaves_the_graph(method):
    import math

    x = gc.tensor([0.3, -0.7, 1.1], requires_grad=True)
    cases = [
        lambda t: gc.tensor(math.sin(float(t[0]))),  # math and float(): autograd sees a constant
        lambda t: gc.grad((t**3).sum(), t)[0],  # a gradient without create_graph is cut from the graph
        lambda t: (t * 2, gc.tensor(t.detach().numpy() ** 2)),  # NumPy on the values
    ]
    for f in cases:
        with pytest.raises(AssertionError, match="is not connected to the inputs in gradcli's graph"):
            gc.testing.assert_grad_close(f, x, method=method)


def test_outputs_that_are_not_tensors_are_torchs_type_error(torch):
    ours, theirs = _both(torch)
    for call in (
        lambda F, t: F.jacobian(lambda a: (3 * a, "bar"), t([1.0, 2.0])),
        lambda F, t: F.jacobian(lambda a: "bar", t([1.0, 2.0])),
        lambda F, t: F.vjp(lambda a: (3 * a, "bar"), t([1.0, 2.0]), (t([1.0, 1.0]), t(1.0))),
    ):
        with pytest.raises(TypeError) as want:
            call(theirs[0], theirs[1])
        with pytest.raises(TypeError) as got:
            call(ours[0], ours[1])
        assert str(got.value) == str(want.value)


# PyTorch's test_functional.py checks create_graph results with gradcheck and gradgradcheck; the same
# functions here, checked with assert_grad_close (first order) and of their gradient (second order)


def _adder(x, y):
    return 2 * x + 3 * y, x * y


def _exp_reducer(x):
    return x.exp().sum(1)


def _check_twice(f, inputs):
    gc.testing.assert_grad_close(f, inputs)

    def gradient(*args):  # a weighted sum of f's outputs, differentiated with create_graph
        _, outs = gc.autograd.functional.as_tuple(f(*args))
        total = sum((o * (1.0 + 0.25 * k)).sum() for k, o in enumerate(outs))
        return gc.grad(total, args, create_graph=True, allow_unused=True, materialize_grads=True)

    gc.testing.assert_grad_close(gradient, inputs)


def test_torch_style_create_graph_checks():
    F = gc.functional
    x = gc.tensor([[0.2, 0.5], [0.9, 0.4]], requires_grad=True)
    v = gc.tensor([1.0, 0.5], requires_grad=True)
    _check_twice(lambda inp, v: F.vjp(_exp_reducer, inp, v, create_graph=True), (x, v))
    _check_twice(lambda inp, v: F.jvp(_exp_reducer, inp, gc.stack([v, v]), create_graph=True), (x, v))
    _check_twice(lambda inp: F.jacobian(_exp_reducer, inp, create_graph=True), x)
    _check_twice(lambda inp: F.hessian(lambda y: (y.exp() * y).sum(), inp, create_graph=True), x)
    _check_twice(lambda inp, w: F.hvp(lambda y: (y.exp() * y).sum(), inp, w, create_graph=True), (x, x * 0.5))
    _check_twice(lambda inp, w: F.vhp(lambda y: (y.exp() * y).sum(), inp, w, create_graph=True), (x, x * 0.5))
    a, b = gc.tensor([0.3, 0.6], requires_grad=True), gc.tensor([0.8, 0.1], requires_grad=True)
    u = (gc.tensor([1.0, 0.0], requires_grad=True), gc.tensor([1.0, 0.0], requires_grad=True))
    _check_twice(lambda *args: F.jvp(_adder, args[:2], args[2:], create_graph=True)[1], (a, b, *u))
    _check_twice(lambda *args: F.vjp(_adder, args[:2], args[2:], create_graph=True)[1], (a, b, *u))

    def foo(*args):  # a create_graph JVP used inside a bigger function
        x, y = args[:2]
        x = x.cos()
        val, grad = F.jvp(_adder, (x, y), args[2:], create_graph=True)
        return val[0].exp() + val[1].exp() + grad[0].exp() + grad[1].exp() + x.exp() + y.exp()

    _check_twice(foo, (a, b, *u))


def test_torch_style_create_graph_function_matches_torch(torch):
    def foo(m, F):
        def f(*args):
            x, y = args[:2]
            x = x.cos()
            (v0, v1), (g0, g1) = F.jvp(lambda x, y: (2 * x + 3 * y, x * y), (x, y), args[2:], create_graph=True)
            (j0, j1) = F.jacobian(lambda x, y: (x + y).exp().sum(), (x, y), create_graph=True)
            return (v0.exp() + v1.exp() + g0.exp() + g1.exp() + x.exp() + y.exp() + j0 * j1).sum()

        return f

    ours, theirs = _both(torch)
    grads = []
    for F, t, m in (ours, theirs):
        args = [t(p, requires_grad=True) for p in ([0.3, 0.6], [0.8, 0.1], [1.0, 0.0], [0.5, 2.0])]
        value = foo(m, F)(*args)
        first = m.autograd.grad(value, args, create_graph=True)
        second = m.autograd.grad(sum((g * g).sum() for g in first), args)
        grads.append([_values(g) for g in (*first, *second)])
    _close(grads[0], grads[1], rtol=1e-11, atol=1e-12)


# every other kind of primitive, in a function of a matrix: the four pairings of the two modes, the
# Hessian (with and without create_graph) and the forward-mode Jacobian of a create_graph Jacobian
X0 = [[0.31, -0.42, 0.77], [0.55, 0.12, -0.9]]
U0 = [[0.5, -1.0, 2.0], [0.3, 0.7, -0.2]]
B0 = [[0.2, 0.4], [-0.6, 0.1], [0.3, 0.9]]


def _matrix_functions(m, t):
    flip = (lambda x: x[::-1]) if m is gc else (lambda x: m.flip(x, [0]))
    softplus = gc.softplus if m is gc else m.nn.functional.softplus
    b = t(B0)
    return {
        "mul": lambda x: x * x[0:1] * 3,
        "div": lambda x: x / (2 + x * x),
        "pow": lambda x: (x * x + 1) ** x,
        "atan2": lambda x: m.atan2(x, flip(x) + 2),
        "maximum": lambda x: m.maximum(x, x * 0.5 + 0.1) * x,
        "minimum": lambda x: m.minimum(x, x * 0.5 + 0.1) * x,
        "where": lambda x: m.where(x > 0, x * x, m.sin(x)) * x,
        "clamp": lambda x: m.clamp(x, -0.5, 0.6) * x,
        "matmul": lambda x: (x @ b) ** 2,
        "sum": lambda x: x.sum(1) ** 2 * x[:, 0],
        "mean": lambda x: x.mean(0) ** 3,
        "prod": lambda x: x.prod(1) * x[:, 1],
        "amax": lambda x: m.amax(x * x, 1) * x[:, 0],
        "logsumexp": lambda x: m.logsumexp(x * x, 1) * x[:, 2],
        "softmax": lambda x: m.softmax(x * x, 1) * x,
        "log_softmax": lambda x: m.log_softmax(x * x, 1) * x,
        "norm": lambda x: m.norm(x) * x,
        "stack": lambda x: m.stack([x * x, m.sin(x)]) * 2,
        "cat": lambda x: m.cat([x * x, m.sin(x)], 0) * 2,
        "reshape": lambda x: (x * x).reshape(3, 2) ** 2,
        "transpose": lambda x: (x * x).t() ** 2,
        "getitem": lambda x: (x * x)[1, 1:] ** 2,
        "expand": lambda x: (x[0:1] * x[0:1]).expand(3, 3) * 2,
        "softplus": lambda x: softplus(x) * x,
        "relu": lambda x: m.relu(x) * x * x,
        "sign": lambda x: m.sign(x) * x**3,
    }


def _second_orders(F, t, m, prim):
    f = _matrix_functions(m, t)[prim]
    x = t(X0)
    shape = tuple(f(x).shape)
    w = np.linspace(0.5, 1.5, int(np.prod(shape))).reshape(shape).tolist()
    got = [_pairing(F, t, f, x, U0, w, kind) for kind in NESTED[:4]]
    got.append(F.hessian(lambda x: (f(x) ** 2).sum(), x))
    leaf = t(X0, requires_grad=True)
    h = F.hessian(lambda x: (f(x) ** 2).sum(), leaf, create_graph=True)
    got.append(m.autograd.grad((h * h).sum(), leaf)[0])
    # PyTorch's forward mode does not go through its own create_graph Jacobian: reverse mode there
    outer = {"strategy": "forward-mode"} if m is gc else {}
    got.append(F.jacobian(lambda x: F.jacobian(f, x, create_graph=True), x, **outer))
    return [_values(r) for r in got]


@pytest.mark.parametrize("prim", list(_matrix_functions(gc, gc.tensor)))
def test_second_order_of_each_kind_of_primitive_matches_torch(torch, prim):
    ours, theirs = _both(torch)
    _close(_second_orders(*ours, prim), _second_orders(*theirs, prim), rtol=1e-10, atol=1e-12)


class _Cube(gc.autograd.Function):
    """x^3 with a backward that refuses batches of rows, and no jvp."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        assert g.shape == x.shape, "one row at a time"
        return g * 3 * x**2


def test_custom_functions_in_create_graph_jacobians_and_forward_products():
    f = gc.functional
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    j = f.jacobian(lambda v: _Cube.apply(v) * 2, x, create_graph=True)  # diag(6 x^2)
    assert val(j) == [[6.0, 0.0], [0.0, 24.0]]
    assert val(gc.grad(j.sum(), x)[0]) == [12.0, 24.0]
    h = f.hessian(lambda v: _Cube.apply(v).sum(), x, create_graph=True)
    assert val(h) == [[6.0, 0.0], [0.0, 12.0]] and val(gc.grad(h.sum(), x)[0]) == [6.0, 6.0]
    # no jvp: forward products fall back to PyTorch's double-backward trick
    assert val(f.jvp(lambda v: _Cube.apply(v) * 2, x, gc.ones(2))[1]) == [6.0, 24.0]
    assert val(f.hvp(lambda v: _Cube.apply(v).sum(), x, gc.ones(2))[1]) == [6.0, 12.0]
    assert val(f.jvp(lambda v: _Cube.apply(v), x, gc.ones(2), create_graph=True)[1]) == [3.0, 12.0]
