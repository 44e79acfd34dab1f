"""Jacobians, Hessians, JVPs and VJPs: against formulas and finite differences, forward vs reverse."""

from __future__ import annotations

import json

import numpy as np
import pytest
from numdiff import gradient
from typer.testing import CliRunner

import gradcli as gc
from gradcli.autograd.basis import ScaledIdentity, identity
from gradcli.autograd.functional import jacobian_blocks
from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app
from gradcli.functional import hessian, hvp, jacobian, jvp, vhp, vjp

rng = np.random.default_rng(5)
runner = CliRunner()


def numeric_jacobian(f, x):
    """Row by row, the finite-difference gradient of each output element."""
    out = np.asarray(f(x))
    rows = [gradient(lambda vs, k=k: float(np.asarray(f(vs[0])).reshape(-1)[k]), [x])[0] for k in range(out.size)]
    return np.array(rows).reshape(out.shape + x.shape)


def test_jacobian_of_a_vector_function_in_both_modes():
    x = np.array([0.3, -1.2, 2.0])

    def f(v):
        return gc.stack([v[0] * v[1], gc.sin(v[2]) * v[0], gc.exp(v[1]), v[2] ** 2])

    expected = np.array(
        [[x[1], x[0], 0], [np.sin(x[2]), 0, x[0] * np.cos(x[2])], [0, np.exp(x[1]), 0], [0, 0, 2 * x[2]]]
    )
    for mode in ("forward", "reverse", "auto"):
        np.testing.assert_allclose(jacobian(f, gc.tensor(x), mode=mode).numpy(), expected, rtol=1e-15)
    assert jacobian_blocks(f, (gc.tensor(x),))[3].mode == "forward"  # 3 inputs < 4 outputs


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jacobian_against_finite_differences_for_arrays(mode):
    A = rng.standard_normal((3, 4))
    x = rng.standard_normal((4, 2))

    def f(v):
        h = gc.tanh(gc.tensor(A) @ v)  # (3, 2)
        return gc.logsumexp(h, 1) * gc.norm(v) + h[:, 0] ** 2

    got = jacobian(f, gc.tensor(x), mode=mode).numpy()
    assert got.shape == (3, 4, 2)
    np.testing.assert_allclose(got, numeric_jacobian(lambda v: f(gc.tensor(v)).numpy(), x), rtol=1e-8, atol=1e-10)


def test_tanh_of_a_matrix_vector_product_matches_the_hand_formula():
    n = 50
    A = rng.standard_normal((n, n))
    x = rng.standard_normal(n)
    hand = (1 - np.tanh(A @ x) ** 2)[:, None] * A
    for mode in ("forward", "reverse"):
        np.testing.assert_allclose(
            jacobian(lambda v: gc.tanh(gc.tensor(A) @ v), gc.tensor(x), mode=mode).numpy(), hand, rtol=1e-14
        )


def test_several_inputs_and_outputs_give_nested_tuples():
    x, y = gc.tensor([1.0, 2.0]), gc.tensor(3.0)

    def f(a, b):
        return a * b, gc.sum(a) + b**2

    (dx1, dy1), (dx2, dy2) = jacobian(f, (x, y))
    np.testing.assert_array_equal(dx1.numpy(), 3 * np.eye(2))
    np.testing.assert_array_equal(dy1.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(dx2.numpy(), [1.0, 1.0])
    assert dy2.item() == 6.0
    for mode in ("forward", "reverse"):
        again = jacobian(f, (x, y), mode=mode)
        np.testing.assert_array_equal(again[0][0].numpy(), dx1.numpy())


def test_an_output_that_ignores_an_input_has_zero_columns():
    got = jacobian(lambda a, b: a * 2, (gc.tensor([1.0, 2.0]), gc.tensor(5.0)))
    assert got[1].numpy().tolist() == [0.0, 0.0]


def test_seed_000_mm_jacobian():
    y = gc.tensor([[3.0, 4.0], [5.0, 6.0]])
    J = jacobian(lambda x: gc.mm(x, y), gc.tensor([[1.0, 2.0]]))
    assert J.shape == (1, 2, 1, 2)
    assert J.numpy().reshape(2, 2).tolist() == [[3.0, 5.0], [4.0, 6.0]]


def _h(v):
    return gc.sum(gc.exp(v[:-1]) * v[1:]) + (v @ v) ** 2


def _h_analytic(x):
    n = len(x)
    e = np.exp(x[:-1])
    H = 8 * np.outer(x, x) + 4 * (x @ x) * np.eye(n)
    i = np.arange(n - 1)
    H[i, i] += e * x[1:]
    H[i, i + 1] += e
    H[i + 1, i] += e
    return H


def test_hessian_matches_the_analytic_one():
    x = rng.standard_normal(7)
    np.testing.assert_allclose(hessian(_h, gc.tensor(x)).numpy(), _h_analytic(x), rtol=1e-13, atol=1e-13)


def test_hessian_of_several_inputs_and_errors():
    H = hessian(lambda x, y: x * x * y + gc.sin(y), (gc.tensor(2.0), gc.tensor(3.0)))
    assert [[b.item() for b in row] for row in H] == [[6.0, 4.0], [4.0, -np.sin(3.0)]]
    with pytest.raises(RuntimeError, match="hessian needs a scalar output"):
        hessian(lambda v: v * 2, gc.tensor([1.0, 2.0]))
    assert hessian(lambda v: v.sum() * 3, gc.tensor([1.0, 2.0])).numpy().tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_jvp_vjp_hvp_vhp():
    x = gc.tensor([0.5, 1.0])
    out, tangent = jvp(lambda v: gc.sin(v) * v, x, gc.tensor([1.0, 2.0]))
    np.testing.assert_allclose(
        tangent.numpy(), (np.cos([0.5, 1.0]) * [0.5, 1.0] + np.sin([0.5, 1.0])) * [1, 2], rtol=1e-15
    )
    out2, cotangent = vjp(lambda v: gc.sin(v) * v, x, gc.tensor([1.0, 2.0]))
    np.testing.assert_allclose(cotangent.numpy(), tangent.numpy(), rtol=1e-15)  # a diagonal Jacobian
    np.testing.assert_array_equal(out.numpy(), out2.numpy())
    v = rng.standard_normal(7)
    x7 = rng.standard_normal(7)
    _, hv = hvp(_h, gc.tensor(x7), gc.tensor(v))
    np.testing.assert_allclose(hv.numpy(), _h_analytic(x7) @ v, rtol=1e-12)
    np.testing.assert_allclose(vhp(_h, gc.tensor(x7), gc.tensor(v))[1].numpy(), hv.numpy(), rtol=1e-15)


def test_a_differentiable_jacobian_with_create_graph():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    J = jacobian(lambda v: v**3, x, create_graph=True)  # diag(3 x^2)
    (d,) = gc.grad(J.sum(), x)
    np.testing.assert_array_equal(d.numpy(), [6.0, 12.0])


class Cube(gc.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x**2


def test_custom_function_without_jvp_falls_back_to_reverse_row_by_row():
    x = gc.tensor([1.0, 2.0, 3.0])
    many, outs, blocks, plan = jacobian_blocks(lambda v: gc.stack([Cube.apply(v).sum()] * 4), (x,), "auto")
    assert plan.mode == "reverse" and not plan.vectorised and "jvp" in plan.reason
    np.testing.assert_array_equal(blocks[0][0], np.tile([3.0, 12.0, 27.0], (4, 1)))
    from gradcli.autograd.forward import NoForwardRule

    with pytest.raises(NoForwardRule, match="Cube has no jvp"):
        jacobian(lambda v: Cube.apply(v), x, mode="forward")


def test_scaled_identity_stays_diagonal_and_falls_back_to_dense():
    eye = identity((3,))
    assert eye.shape == (3, 3)
    scaled = eye * np.array([1.0, 2.0, 3.0])
    assert isinstance(scaled, ScaledIdentity) and np.array_equal(np.asarray(scaled), np.diag([1.0, 2.0, 3.0]))
    A = rng.standard_normal((3, 4))
    np.testing.assert_array_equal(scaled @ A, np.diag([1.0, 2.0, 3.0]) @ A)
    np.testing.assert_array_equal(np.asarray(-scaled / 2), -np.diag([0.5, 1.0, 1.5]))
    np.testing.assert_array_equal(scaled + np.ones((3, 3)), np.diag([1.0, 2.0, 3.0]) + 1)  # dense from here
    np.testing.assert_array_equal(scaled.sum(axis=0), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(scaled[1], [0.0, 2.0, 0.0])
    assert not isinstance(eye * np.ones((3, 3)), ScaledIdentity)  # touches the batch axis: dense


# --- the commands -----------------------------------------------------------------------------------------


def cli(*args: str):
    result = runner.invoke(app, expression_after_dashes(list(args)))
    assert "Traceback" not in result.stdout + result.stderr
    return result


def cli_json(*args: str):
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_jacobian_command_labels_rows_and_columns():
    doc = cli_json("jacobian", "x * y, x + y", "--at", "x=2,y=3")
    assert doc["outputs"] == ["x * y", "x + y"] and doc["inputs"] == ["x", "y"]
    assert doc["jacobian"] == [[3.0, 2.0], [1.0, 1.0]]
    doc = cli_json("jacobian", "x @ y", "--at", "x=[[1,2]],y=[[3,4],[5,6]]", "--wrt", "x")
    assert doc["outputs"] == ["f[0,0]", "f[0,1]"] and doc["inputs"] == ["x[0,0]", "x[0,1]"]
    assert doc["jacobian"] == [[3.0, 5.0], [4.0, 6.0]]  # seed 000
    doc = cli_json("jacobian", "v = [x^2, x*y, sin(y)]; v", "--at", "x=2,y=0")
    assert doc["outputs"] == ["v[0]", "v[1]", "v[2]"] and doc["jacobian"] == [[4.0, 0.0], [0.0, 2.0], [0.0, 1.0]]
    assert doc["mode"] == "forward"


def test_jacobian_modes_agree_and_explain():
    point = ["--at", "x=[0.5,1,2]"]
    forward_doc = cli_json("jacobian", "x * sum(x^2)", *point, "--mode", "forward", "--explain")
    reverse_doc = cli_json("jacobian", "x * sum(x^2)", *point, "--mode", "reverse")
    np.testing.assert_allclose(forward_doc["jacobian"], reverse_doc["jacobian"], rtol=1e-15)
    assert forward_doc["explain"].startswith("forward mode: n = 3 inputs, m = 3 outputs.")
    assert "vectorised" in forward_doc["explain"]
    result = cli("jacobian", "x * sum(x^2)", *point, "--mode", "sideways")
    assert result.exit_code == 2 and "--mode sideways: use auto, forward or reverse" in result.stderr


def test_jacobian_plain_table():
    assert cli("jacobian", "x * y, x + y", "--at", "x=2,y=3").stdout == "       x  y\nx * y  3  2\nx + y  1  1\n"


def test_hessian_command():
    doc = cli_json("hessian", "x^2 * y", "--at", "x=2,y=3")
    gradient = {"x": 12.0, "y": 4.0}  # by variable, as eval's (issue 16)
    assert doc == {"inputs": ["x", "y"], "hessian": [[6.0, 4.0], [4.0, 0.0]], "value": 12.0, "gradient": gradient}
    doc = cli_json("hessian", "sum(exp(x[:-1]) * x[1:]) + (x @ x)^2", "--at", "x=[0.1,-0.4,0.7]")
    np.testing.assert_allclose(doc["hessian"], _h_analytic(np.array([0.1, -0.4, 0.7])), rtol=1e-14)
    result = cli("hessian", "x * x", "--at", "x=[1,2]")
    assert result.exit_code == 2
    assert result.stderr == "error: hessian needs a scalar output; the output has shape (2,) (use gradcli jacobian)\n"
    for command in ("jacobian", "hessian"):
        assert f"Example: gradcli {command}" in cli(command, "--help").stdout
