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
    return pytest.importorskip("torch")


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
