"""Issue 15, matrices: transpose (and x.T), outer, trace, diag, tril, triu in the library and the language,
first and second derivatives against PyTorch float64 and finite differences."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli.app import app
from gradcli.lang.evaluate import evaluate
from gradcli.lang.parser import parse
from gradcli.lang.unparse import unparse

runner = CliRunner()
rng = np.random.default_rng(15)
A0 = rng.uniform(-2, 2, size=(3, 3))
R0 = rng.uniform(-2, 2, size=(2, 4))
V0 = rng.uniform(-2, 2, size=3)

# (name, function of (module, A, R, v), torch backward name of its last node)
PROGRAMS = [
    ("trace", lambda m, A, R, v: m.trace(A * A), "TraceBackward0"),
    ("trace_rect", lambda m, A, R, v: m.trace(R * R), "TraceBackward0"),
    ("tril", lambda m, A, R, v: m.tril(A * A), "TrilBackward0"),
    ("tril_k", lambda m, A, R, v: m.tril(R * R, -1), "TrilBackward0"),
    ("triu_k", lambda m, A, R, v: m.triu(R * R, 1), "TriuBackward0"),
    ("triu_batched", lambda m, A, R, v: m.triu(m.stack([A, A * A]), -1), "TriuBackward0"),
    ("diag_matrix", lambda m, A, R, v: m.diag(R * R), None),
    ("diag_vector", lambda m, A, R, v: m.diag(v * v), None),
    ("outer", lambda m, A, R, v: m.outer(v * v, R[0]), "MulBackward0"),
    ("transpose", lambda m, A, R, v: m.transpose(R * R, 0, 1) @ A[:2], None),
    ("T", lambda m, A, R, v: (R * R).T, "PermuteBackward0"),
]


def _scalar(m, f, A, R, v, w):
    return m.sum(f(m, A, R, v) ** 2 * w)


@pytest.mark.parametrize("name, f, node", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_first_and_second_derivatives_agree_with_pytorch(name, f, node):
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    out = f(gc, gc.tensor(A0), gc.tensor(R0), gc.tensor(V0))
    w = rng.uniform(-1, 1, size=out.shape)
    leaves = [gc.tensor(x, requires_grad=True) for x in (A0, R0, V0)]
    grads = gc.grad(_scalar(gc, f, *leaves, gc.tensor(w)), leaves, create_graph=True, allow_unused=True,
                    materialize_grads=True)  # fmt: skip
    second = gc.grad(sum(gc.sum(g * g) for g in grads), leaves, allow_unused=True, materialize_grads=True)
    tleaves = [torch.tensor(x, requires_grad=True) for x in (A0, R0, V0)]
    tgrads = torch.autograd.grad(_scalar(torch, f, *tleaves, torch.tensor(w)), tleaves, create_graph=True,
                                 allow_unused=True, materialize_grads=True)  # fmt: skip
    tsecond = torch.autograd.grad(sum((g * g).sum() for g in tgrads), tleaves, allow_unused=True,
                                  materialize_grads=True)  # fmt: skip
    assert np.allclose(out.numpy(), f(torch, *map(torch.tensor, (A0, R0, V0))).numpy(), rtol=1e-12, atol=0)
    for got, want in zip([*grads, *second], [*tgrads, *tsecond]):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-9, atol=1e-12)
    if node is not None:
        assert f(gc, *(gc.tensor(x, requires_grad=True) for x in (A0, R0, V0))).grad_fn.name() == node


def test_gradients_agree_with_finite_differences():
    for _, f, _ in PROGRAMS:
        leaves = [gc.tensor(x, requires_grad=True) for x in (A0, R0, V0)]
        gc.testing.assert_grad_close(lambda A, R, v, f=f: gc.sum(f(gc, A, R, v) ** 2), leaves, method="fd")


def test_known_values_and_derivatives():
    A = gc.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (g,) = gc.grad(gc.trace(A @ A.T), [A])  # d tr(A A^T) = 2A
    assert g.tolist() == [[2.0, 4.0], [6.0, 8.0]]
    assert gc.tril(A).tolist() == [[1.0, 0.0], [3.0, 4.0]]
    assert gc.triu(A, 1).tolist() == [[0.0, 2.0], [0.0, 0.0]]
    assert gc.diag(A).tolist() == [1.0, 4.0]
    assert gc.diag(gc.tensor([1.0, 2.0])).tolist() == [[1.0, 0.0], [0.0, 2.0]]
    assert gc.outer(gc.tensor([1.0, 2.0]), gc.tensor([3.0, 4.0, 5.0])).tolist() == [[3.0, 4.0, 5.0], [6.0, 8.0, 10.0]]
    assert A.trace().item() == 5.0 and A.tril(-1).tolist() == [[0.0, 0.0], [3.0, 0.0]]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: gc.trace(gc.tensor([1.0, 2.0])), "expected a matrix"),
        (lambda: gc.tril(gc.tensor([1.0, 2.0])), "at least 2 dimensions"),
        (lambda: gc.diag(gc.tensor(1.0)), "1D or 2D"),
        (lambda: gc.outer(gc.tensor([[1.0]]), gc.tensor([1.0])), "1D tensors expected"),
    ],
)
def test_library_refuses_wrong_shapes(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


# --- the language -----------------------------------------------------------------------------------------------

AT = ["--at", "A=[[1,2],[3,4]]", "--at", "B=[[1,5],[2,7]]", "--at", "v=[1,2]"]


def test_dot_T_reads_as_transpose_and_unparses():
    tree = parse("A.T @ v + x.T.T")
    assert unparse(tree) == unparse(parse("transpose(A) @ v + transpose(transpose(x))"))
    assert unparse(parse(unparse(tree))) == unparse(tree)
    out = evaluate(parse("A.T"), {"A": gc.tensor([[1.0, 2.0], [3.0, 4.0]])}).outputs[0]
    assert out.tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert evaluate(parse("v.T"), {"v": gc.tensor([1.0, 2.0])}).outputs[0].tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    "text, value, gradient",
    [
        ("trace(A @ A.T)", 30.0, {"A": [[2.0, 4.0], [6.0, 8.0]]}),
        ("sum(transpose(A) * B)", 48.0, {"A": [[1.0, 2.0], [5.0, 7.0]], "B": [[1.0, 3.0], [2.0, 4.0]]}),
        ("sum(tril(A) * B)", 35.0, {"A": [[1.0, 0.0], [2.0, 7.0]], "B": [[1.0, 0.0], [3.0, 4.0]]}),
        ("sum(triu(A, 1)^2)", 4.0, {"A": [[0.0, 4.0], [0.0, 0.0]]}),
        ("sum(diag(v) * A)", 9.0, {"v": [1.0, 4.0], "A": [[1.0, 0.0], [0.0, 2.0]]}),
        ("sum(diag(A)^3)", 65.0, {"A": [[3.0, 0.0], [0.0, 48.0]]}),
        ("sum(outer(v, v*v))", 15.0, {"v": [11.0, 17.0]}),
    ],
)
def test_language_values_and_gradients(text, value, gradient):
    result = runner.invoke(app, ["eval", "--json", *AT, "--", text])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["value"] == value
    for name, want in gradient.items():
        assert doc["gradient"][name] == want


def test_check_and_sympy_agree_through_the_matrix_functions():
    text = "trace(A @ A.T) + sum(tril(A) * triu(A.T, -1)) + sum(outer(diag(A), v)) + sum(diag(v) * transpose(B))"
    result = runner.invoke(app, ["check", *AT, "--", text])
    assert result.exit_code == 0, result.output
    assert "sympy" in result.output and "OK" in result.output
    result = runner.invoke(app, ["diff", *AT, "--", "trace(A @ A.T)"])
    assert result.exit_code == 0, result.output
    assert "d/dA = 2*A = [[2, 4], [6, 8]]" in result.output


@pytest.mark.parametrize(
    "text, message",
    [
        ("A.t", "expected 'T' after '.'"),
        ("A.", "expected 'T' after '.'"),
        ("trace(v)", "trace: expected a matrix"),
        ("tril(v)", "at least 2 dimensions"),
        ("tril(A, 0.5)", "a diagonal offset must be a whole number"),
        ("outer(A, v)", "1D tensors expected"),
    ],
)
def test_language_bad_input_is_one_error_line_and_exit_2(text, message):
    result = runner.invoke(app, ["eval", *AT, "--", text])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and message in result.stderr.splitlines()[0]
    assert "Traceback" not in result.output


def test_gradcli_ops_lists_the_matrix_functions():
    result = runner.invoke(app, ["ops"])
    assert result.exit_code == 0
    for name in ("transpose", "outer", "trace", "diag", "tril", "triu"):
        assert any(line.split()[:1] == [name] for line in result.output.splitlines()), name


def test_transpose_without_dims_swaps_the_last_two_as_the_language_does():
    x = gc.tensor(np.arange(6.0).reshape(1, 2, 3))
    assert gc.transpose(x).shape == (1, 3, 2) and gc.transpose(x).tolist() == np.swapaxes(x.numpy(), 1, 2).tolist()
    assert gc.transpose(gc.tensor([1.0, 2.0])).tolist() == [1.0, 2.0]
    assert gc.transpose(x, 0, 2).shape == (3, 2, 1)


def test_functions_that_grow_their_input_are_held_to_the_element_limit():
    """outer and diag(v) make n^2 elements from n: refused before they allocate, as every broadcast is."""
    import subprocess
    import sys

    env = {**__import__("os").environ, "GRADCLI_MAX_ELEMENTS": "10"}
    for expr, at, what in [("sum(outer(x,y))", "x=[1,2,3,4],y=[1,2,3,4]", "outer(a, b)"),
                           ("sum(diag(x))", "x=[1,2,3,4]", "diag(v)")]:  # fmt: skip
        done = subprocess.run([sys.executable, "-m", "gradcli", "eval", expr, "--at", at],
                              capture_output=True, text=True, env=env)  # fmt: skip
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.startswith(f"error: {what} would have shape (4, 4): 16 elements"), done.stderr
