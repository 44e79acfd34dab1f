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
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
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
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
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


def test_var_and_std_keywords_follow_pytorch():
    x = gc.tensor(A, requires_grad=True)
    n = A.size
    assert gc.var(x).item() == pytest.approx(float(np.var(A) * n / (n - 1)), rel=1e-15)
    assert type(gc.var(x).grad_fn).__name__ == "VarBackward0"
    assert type(x.std(1).grad_fn).__name__ == "StdBackward0"
    np.testing.assert_allclose(gc.var(x, 1, correction=0).detach().numpy(), np.var(A, 1), rtol=1e-15)
    np.testing.assert_allclose(x.var(0, unbiased=False).detach().numpy(), np.var(A, 0), rtol=1e-15)
    np.testing.assert_allclose(gc.std(x, False).detach().numpy(), np.std(A), rtol=1e-15)
    assert gc.std(x, 0, keepdim=True).shape == (1, 3)
    (g,) = gc.grad(gc.var(x), [x])  # d/dx_i = 2 (x_i - mean) / (n - 1)
    np.testing.assert_allclose(g.numpy(), 2 * (A - A.mean()) / (n - 1), rtol=1e-14)
    z = gc.zeros(3, requires_grad=True)
    gc.std(z).backward()  # PyTorch: 0 where the standard deviation is 0
    np.testing.assert_array_equal(z.grad.numpy(), [0.0, 0.0, 0.0])
    with pytest.raises(RuntimeError):
        gc.var(x, 0, unbiased=True, correction=0)


def test_var_and_std_against_pytorch_with_a_second_derivative():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    for name, kw in (("var", {}), ("std", {"dim": 1}), ("std", {"dim": 0, "correction": 0}), ("var", {"dim": (0, 1)})):
        x = gc.tensor(A, requires_grad=True)
        y = getattr(gc, name)(x * x, **kw)
        (g,) = gc.grad(gc.sum(y**2), [x], create_graph=True)
        (h,) = gc.grad(gc.sum(g * g * gc.tensor(W)), [x])
        t = torch.tensor(A, requires_grad=True)
        (tg,) = torch.autograd.grad((getattr(torch, name)(t * t, **kw) ** 2).sum(), [t], create_graph=True)
        (th,) = torch.autograd.grad((tg * tg * torch.tensor(W)).sum(), [t])
        np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(h.numpy(), th.numpy(), rtol=1e-10)


def test_var_and_std_in_the_language_and_at_points(tmp_path):
    r = runner.invoke(app, ["eval", "var(v) + std(v)", "--at", "v=[1,2,4]", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)  # var = 7/3 with n - 1 = 2
    assert out["value"] == pytest.approx(7 / 3 + np.sqrt(7 / 3), rel=1e-15)
    r = runner.invoke(app, ["eval", "sum(var(A, 1))", "--at", f"A={A.tolist()}", "--json"])
    assert json.loads(r.stdout)["value"] == pytest.approx(float(np.var(A, 1, ddof=1).sum()), rel=1e-15)
    csv = tmp_path / "p.csv"
    csv.write_text("x,y\n1,2\n0.5,-1\n")
    # var([x, y, 0]) = (x^2 + y^2 + 0 - (x + y)^2 / 3) / 2
    r = runner.invoke(app, ["eval", "var([x, y, 0])", "--points", str(csv)])
    assert r.exit_code == 0, r.output
    for (x, y), line in zip([(1.0, 2.0), (0.5, -1.0)], r.stdout.splitlines()[1:]):
        value, gx, gy = (float(v) for v in line.split(",")[2:])
        assert value == pytest.approx((x * x + y * y - (x + y) ** 2 / 3) / 2, rel=1e-14)
        assert gx == pytest.approx((2 * x - 2 * (x + y) / 3) / 2, rel=1e-14)
        assert gy == pytest.approx((2 * y - 2 * (x + y) / 3) / 2, rel=1e-14)


def test_argmax_and_argmin_are_int64_indices_without_gradient():
    x = gc.tensor(A, requires_grad=True)
    assert gc.argmax(x).item() == 2 and gc.argmin(x).item() == 3  # of the flattened tensor
    assert gc.argmax(x).dtype == np.int64 and not gc.argmax(x).requires_grad
    np.testing.assert_array_equal(x.argmax(1).numpy(), [2, 2])
    np.testing.assert_array_equal(gc.argmin(x, 0, keepdim=True).numpy(), [[1, 1, 1]])
    assert gc.argmax(x, keepdim=True).shape == (1, 1)
    with pytest.raises(IndexError):
        gc.argmax(x, 2)
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    t = torch.tensor(A)
    assert gc.argmax(x).item() == torch.argmax(t).item()
    np.testing.assert_array_equal(gc.argmin(x, 1).numpy(), torch.argmin(t, 1).numpy())


def test_argmax_in_the_language_and_at_points(tmp_path):
    r = runner.invoke(app, ["eval", "x * argmax(v) + argmin(A, 1)[1]", "--at", "x=2,v=[1,5,3],A=[[1,2],[4,0]]"])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[:2] == ["value = 3", "d/dx  = 1"]
    r = runner.invoke(app, ["eval", "argmax(v, 1)", "--at", "v=[1,5,3]"])
    assert r.exit_code == 2
    assert r.stderr.startswith("error: argmax() at column 1: Dimension out of range")
    csv = tmp_path / "p.csv"
    csv.write_text("x,y\n1,2\n3,-1\n")
    r = runner.invoke(app, ["eval", "x * argmax([x, y])", "--points", str(csv)])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == ["x,y,value,grad_x,grad_y", "1,2,1.0,1.0,0.0", "3,-1,0.0,0.0,0.0"]
