"""Issue 15, "axis15": softmax, log_softmax, cumsum and flip as primitives along an axis.

The generated suites (tests/test_primitives.py, tests/test_net_nested_primitives.py, ...) check
each row's rules against finite differences and PyTorch; here: the library's signatures and graph
node names, the language's last-axis default, and the batched --points evaluator.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli.app import app

runner = CliRunner()
A = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.5]])
W = np.array([[0.3, -1.0, 2.0], [1.5, 0.25, -0.5]])


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize(
    "fn,node",
    [
        (lambda x: gc.softmax(x, 0), "SoftmaxBackward0"),
        (lambda x: x.log_softmax(-1), "LogSoftmaxBackward0"),
        (lambda x: x.cumsum(1), "CumsumBackward0"),
        (lambda x: gc.flip(x, (0, 1)), "FlipBackward0"),
    ],
)
def test_each_is_one_node_named_as_in_pytorch(fn, node):
    y = fn(gc.tensor(A, requires_grad=True))
    assert type(y.grad_fn).__name__ == node
    assert y.shape == A.shape


def test_values_and_gradients_by_hand():
    x = gc.tensor(A, requires_grad=True)
    s = gc.softmax(x, 0)
    np.testing.assert_allclose(s.detach().numpy(), _softmax(A, 0), rtol=1e-15)
    (g,) = gc.grad(gc.sum(s * gc.tensor(W)), [x])
    sv = _softmax(A, 0)  # d/dx (w . s) = s * (w - sum(w * s))
    np.testing.assert_allclose(g.numpy(), sv * (W - (W * sv).sum(0, keepdims=True)), rtol=1e-13)
    (g,) = gc.grad(gc.sum(gc.cumsum(x, 1) * gc.tensor(W)), [x])  # reversed cumulative sums of w
    np.testing.assert_allclose(g.numpy(), np.cumsum(W[:, ::-1], 1)[:, ::-1], rtol=1e-15)
    (g,) = gc.grad(gc.sum(gc.flip(x, 1) * gc.tensor(W)), [x])
    np.testing.assert_array_equal(g.numpy(), W[:, ::-1])


def test_log_softmax_does_not_overflow():
    y = gc.log_softmax(gc.tensor([1000.0, 0.0, -1000.0]))
    np.testing.assert_allclose(y.numpy(), [0.0, -1000.0, -2000.0])
    np.testing.assert_allclose(gc.softmax(gc.tensor([1000.0, 0.0])).numpy(), [1.0, 0.0])


def test_zero_dim_and_out_of_range_follow_pytorch():
    assert gc.softmax(gc.tensor(3.0)).item() == 1.0
    assert gc.cumsum(gc.tensor(3.0), 0).item() == 3.0
    with pytest.raises(IndexError):
        gc.cumsum(gc.tensor(A), 2)


def test_against_pytorch_with_a_second_derivative():
    torch = pytest.importorskip("torch")
    cases = [
        (lambda m, x: m.softmax(x, 1), lambda x: torch.softmax(x, 1)),
        (lambda m, x: m.log_softmax(x, 0), lambda x: torch.log_softmax(x, 0)),
        (lambda m, x: m.cumsum(x * x, 0), lambda x: torch.cumsum(x * x, 0)),
        (lambda m, x: m.flip(x * x, (1,)), lambda x: torch.flip(x * x, (1,))),
    ]
    for ours, theirs in cases:
        x = gc.tensor(A, requires_grad=True)
        (g,) = gc.grad(gc.sum(ours(gc, x) ** 2 * gc.tensor(W)), [x], create_graph=True)
        (h,) = gc.grad(gc.sum(g * g), [x])
        t = torch.tensor(A, requires_grad=True)
        (tg,) = torch.autograd.grad((theirs(t) ** 2 * torch.tensor(W)).sum(), [t], create_graph=True)
        (th,) = torch.autograd.grad((tg * tg).sum(), [t])
        np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(h.numpy(), th.numpy(), rtol=1e-9, atol=1e-12)


def test_language_defaults_to_the_last_axis():
    r = runner.invoke(
        app, ["eval", "sum(cumsum(A) * W)", "--at", f"A={A.tolist()}", "--at", f"W={W.tolist()}", "--json"]
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["value"] == pytest.approx(float((np.cumsum(A, -1) * W).sum()), rel=1e-15)
    r = runner.invoke(app, ["eval", "sum(flip(v) * [1, 10, 100])", "--at", "v=[1,2,3]"])
    assert r.exit_code == 0
    assert r.stdout.splitlines()[0] == "value = 123"
    r = runner.invoke(app, ["eval", "sum(softmax(A, 0) * W)", "--at", f"A={A.tolist()}", "--at", f"W={W.tolist()}"])
    assert r.exit_code == 0
    assert float(r.stdout.splitlines()[0].split("=")[1]) == pytest.approx(float((_softmax(A, 0) * W).sum()))


def test_bad_axis_is_one_error_line_exit_2():
    r = runner.invoke(app, ["eval", "sum(softmax(v, 1))", "--at", "v=[1,2,3]"])
    assert r.exit_code == 2
    assert r.stderr.startswith("error: softmax() at column 5: Dimension out of range")
    assert "Traceback" not in r.output


def test_points_match_one_point_at_a_time(tmp_path):
    text = "sum(softmax([x, y, x*y]) * [1, 2, 3]) + sum(cumsum([x, y]) * flip([x, 1])) + log_softmax([x, y], 0)[1]"
    rows = [(1.0, 2.0), (0.5, -1.0), (-2.0, 0.25)]
    csv = tmp_path / "p.csv"
    csv.write_text("x,y\n" + "".join(f"{x},{y}\n" for x, y in rows))
    r = runner.invoke(app, ["eval", text, "--points", str(csv)])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == "x,y,value,grad_x,grad_y"
    for (x, y), line in zip(rows, lines[1:]):
        one = runner.invoke(app, ["eval", text, "--at", f"x={x},y={y}", "--json"])
        want = json.loads(one.stdout)
        got = [float(v) for v in line.split(",")[2:]]
        assert got[0] == pytest.approx(want["value"], rel=1e-14)
        assert got[1:] == pytest.approx([want["gradient"]["x"], want["gradient"]["y"]], rel=1e-13)


def test_cumprod_gradient_is_exact_at_zeros():
    # y = cumprod(v), v = [0.5, 0, 2]: dy_j/dv_i = prod(v_k, k <= j, k != i) for j >= i
    v = gc.tensor([0.5, 0.0, 2.0], requires_grad=True)
    y = v.cumprod(0)
    assert type(y.grad_fn).__name__ == "CumprodBackward0"
    (g,) = gc.grad(gc.sum(y * gc.tensor([1.0, 2.0, 3.0])), [v])
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0 * 2 * 0.5 + 3 * 0.5 * 2.0, 0.0])
    torch = pytest.importorskip("torch")
    for x in (np.array([[1.5, 0.0, 2.0], [0.0, 0.0, 3.0]]), A):
        for dim in (0, 1):
            a = gc.tensor(x, requires_grad=True)
            (g,) = gc.grad(gc.sum(gc.cumprod(a, dim) * gc.tensor(W)), [a], create_graph=True)
            (h,) = gc.grad(gc.sum(g * g), [a])
            t = torch.tensor(x, requires_grad=True)
            (tg,) = torch.autograd.grad((torch.cumprod(t, dim) * torch.tensor(W)).sum(), [t], create_graph=True)
            (th,) = torch.autograd.grad((tg * tg).sum(), [t])
            np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(h.numpy(), th.numpy(), rtol=1e-12, atol=1e-14)


def test_cumprod_at_points(tmp_path):
    # sum(cumprod([x, y, x])) = x + x*y + x*y*x: d/dx = 1 + y + 2*x*y, d/dy = x + x^2
    csv = tmp_path / "p.csv"
    csv.write_text("x,y\n2,0\n0.5,3\n")
    r = runner.invoke(app, ["eval", "sum(cumprod([x, y, x]))", "--points", str(csv)])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[1:] == ["2,0,2.0,1.0,6.0", "0.5,3,2.75,7.0,0.75"]
