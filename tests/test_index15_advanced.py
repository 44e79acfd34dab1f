"""Issue 15, "index15": integer-array and boolean-mask indexing, in the library and the language.

Gradients are scattered back with ``np.add.at`` semantics (repeated positions add up, as PyTorch's
IndexBackward0); values, first and second derivatives and forward mode agree with PyTorch float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.autograd.functional import jacobian
from gradcli.cli.app import app

runner = CliRunner()
rng = np.random.default_rng(1515)

X = rng.uniform(-2.0, 2.0, size=(3, 4, 2))


def _ints(lib, values):
    """An integer tensor of either library (gradcli's until integer dtypes land: its array holds ints)."""
    if lib is gc:
        from gradcli.autograd.tensor import wrap

        return wrap(np.array(values))
    return lib.tensor(values)


# (description, index builder from a library: gc or torch, and the value indexed)
CASES = [
    ("repeated positions", lambda m, x: x[[0, 2, 0]]),
    ("an index array", lambda m, x: x[np.array([[1, 1], [0, 2]])]),
    ("a mask", lambda m, x: x[x > 0]),
    ("a mask of the first axes", lambda m, x: x[(x.sum(-1) > 0)]),
    ("a list on the second axis", lambda m, x: x[:, [1, 0, 1]]),
    ("mixed with slices", lambda m, x: x[1:, [3, 0], 1:]),
    ("two lists broadcast", lambda m, x: x[[0, 2], [1, 3]]),
    ("lists separated by a slice", lambda m, x: x[[0, 2, 2], :, [1, 0, 1]]),
    ("an integer and a list apart", lambda m, x: x[1, :, [1, 1, 0]]),
    ("an index tensor", lambda m, x: x[_ints(m, [2, 0, 2])]),
    ("a mask tensor and a list", lambda m, x: x[x[:, 0, 0] > -1, [3, 1, 0]]),
]


@pytest.fixture(scope="module")
def torch_mod():
    return pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")


class _TorchIndexing:
    """A torch tensor whose [] turns NumPy index arrays into torch tensors (as gradcli takes them)."""

    def __init__(self, torch, t):
        self.torch, self.t = torch, t

    def _convert(self, index):
        torch = self.torch
        items = index if isinstance(index, tuple) else (index,)
        out = []
        for i in items:
            if isinstance(i, np.ndarray):
                i = torch.as_tensor(i)
            elif isinstance(i, _TorchIndexing):
                i = i.t
            out.append(i)
        return tuple(out)

    def __getitem__(self, index):
        return self.torch_result(self.t[self._convert(index)])

    def torch_result(self, t):
        return _TorchIndexing(self.torch, t)

    def sum(self, dim):
        return _TorchIndexing(self.torch, self.t.sum(dim))

    def __gt__(self, other):
        return _TorchIndexing(self.torch, self.t > other)


@pytest.mark.parametrize("name, fn", CASES, ids=[c[0] for c in CASES])
def test_value_gradient_and_second_derivative_agree_with_torch(torch_mod, name, fn):
    torch = torch_mod
    tx = torch.tensor(X, requires_grad=True)
    ty = fn(type("T", (), {"tensor": staticmethod(torch.tensor)}), _TorchIndexing(torch, tx)).t
    x = gc.tensor(X, requires_grad=True)
    y = fn(gc, x)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=0, atol=0)
    assert type(y.grad_fn).__name__ == type(ty.grad_fn).__name__ == "IndexBackward0"
    # first derivative with a weight, then the second through create_graph (y^3 keeps it non-zero)
    w = rng.standard_normal(tuple(ty.shape))
    (tg,) = torch.autograd.grad((ty**3 * torch.tensor(w)).sum(), tx, create_graph=True)
    (g,) = gc.autograd.grad((y**3 * gc.tensor(w)).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-12, atol=1e-12)
    v = rng.standard_normal(X.shape)
    (th,) = torch.autograd.grad((tg * torch.tensor(v)).sum(), tx)
    (h,) = gc.autograd.grad((g * gc.tensor(v)).sum(), x)
    np.testing.assert_allclose(h.numpy(), th.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name, fn", CASES, ids=[c[0] for c in CASES])
def test_forward_mode_and_a_batch_of_directions_agree_with_torch(torch_mod, name, fn):
    """The forward rule takes a batch of tangents in front, even where NumPy moves the
    advanced axes first (lists separated by a slice)."""
    torch = torch_mod
    T = type("T", (), {"tensor": staticmethod(torch.tensor)})
    want = torch.autograd.functional.jacobian(lambda t: fn(T, _TorchIndexing(torch, t)).t, torch.tensor(X))
    for strategy in ("forward-mode", "reverse-mode"):
        got = jacobian(lambda t: fn(gc, t), gc.tensor(X), strategy=strategy)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=0, err_msg=strategy)


def test_repeated_positions_accumulate():
    x = gc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[[0, 0, 2, 0]].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 0.0, 1.0])


def test_the_index_is_a_plain_input_without_gradient():
    x = gc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    positions = _ints(gc, [2, 0])
    assert not positions.requires_grad
    y = x[positions]
    assert y.grad_fn.next_functions[0][0].__class__.__name__ == "AccumulateGrad"
    assert len(y.grad_fn.next_functions) == 1
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        (x > 1).requires_grad_()


@pytest.mark.parametrize(
    "index, message",
    [
        ([5], "index 5 is out of bounds for dimension 0 with size 3"),
        ((slice(None), [0, 4]), "index 4 is out of bounds for dimension 1 with size 4"),
        ([-4], "index -4 is out of bounds for dimension 0 with size 3"),
        (np.array([0.0, 1.0]), "tensors used as indices must be long, int, byte or bool tensors"),
        (
            np.array([True, False]),
            "The shape of the mask [2] at index 0 does not match the shape of the indexed tensor [3, 4, 2] at index 0",
        ),
        ((0, 0, 0, 0), "too many indices for tensor of dimension 3"),
    ],
)
def test_an_index_that_does_not_fit_is_said_in_torch_words(torch_mod, index, message):
    x = gc.tensor(X, requires_grad=True)
    with pytest.raises(IndexError) as caught:
        x[index]
    assert str(caught.value) == message
    torch = torch_mod
    items = index if isinstance(index, tuple) else (index,)
    titems = tuple(torch.as_tensor(i) if isinstance(i, (np.ndarray, list)) else i for i in items)
    with pytest.raises(IndexError):
        torch.tensor(X)[titems]


# --- the language ---------------------------------------------------------------------------------


def _eval(*args):
    return runner.invoke(app, ["eval", *args])


@pytest.mark.parametrize(
    "expr, value, gradient",
    [
        ("sum(x[[0, 2, 0]]^2)", "11", "[4, 0, 6]"),
        ("sum(x[x > 0])", "4", "[1, 0, 1]"),
        ("sum(x[(x > 0) * (x < 3)])", "1", "[1, 0, 0]"),
        ("m = x > 0; sum(x[m] * 2)", "8", "[2, 0, 2]"),
        ("sum(x[lt(x, 2)])", "-1", "[1, 1, 0]"),
        ("sum(x[[2, 1]] * [1, 10])", "-17", "[0, 10, 1]"),
    ],
)
def test_language_positions_and_masks(expr, value, gradient):
    result = _eval(expr, "--at", "x=[1,-2,3]")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"value = {value}\nd/dx  = {gradient}   (shape (3,))\n"


def test_language_matrix_rows_columns_and_masks():
    result = _eval("sum(A[:, [1, 0, 1]] * [1, 2, 3]) + sum(A[A > 2] ^ 2)", "--at", "A=[[1,2],[3,4]]")
    assert result.exit_code == 0, result.stderr
    # A[:, [1,0,1]] = [[2,1,2],[4,3,4]]: sum with weights 1,2,3 = 2+2+6+4+6+12 = 32; 9 + 16 = 25
    assert result.stdout == "value = 57\nd/dA  = [[2, 4], [8, 12]]   (shape (2, 2))\n"


@pytest.mark.parametrize(
    "expr, message, caret",
    [
        ("x[[0, 3]]", "indexing at column 3: index 3 is out of range for axis 0 of size 3", "    ^"),
        ("x[[-4]]", "indexing at column 3: index -4 is out of range for axis 0 of size 3", "    ^"),
        (
            "x[[0.5, 1]]",
            "an index must be whole numbers (at column 3), got [0.5 1. ]; a mask is written as a comparison: x[x > 0]",
            "    ^",
        ),
        (
            "x[x[:2] > 0]",
            "a mask (a comparison) must have the shape of the axes it indexes (at column 3): (2,) for (3,)",
            "    ^",
        ),
        ("x[0, [1]]", "too many indices at column 1: 2 for a value of shape (3,)", "  ^"),
    ],
)
def test_language_index_errors_point_at_the_index(expr, message, caret):
    result = _eval(expr, "--at", "x=[1,-2,3]", "--seed", "ones")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"error: {message}\n  {expr}\n{caret}\n"


def test_a_list_of_zeros_and_ones_is_positions_not_a_mask():
    """Only a comparison is a mask: [1, 0, 1] picks x[1], x[0], x[1] (the unambiguous rule)."""
    result = _eval("x[[1, 0, 1]]", "--at", "x=[1,-2,3]", "--seed", "ones")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "value = [-2, 1, -2]   (shape (3,))\nd/dx  = [1, 2, 0]   (shape (3,))\n"


def test_points_index_per_point(tmp_path):
    """--points: a shared index list, a mask that depends on the point (each point alone), and
    lists separated by a slice on a point's own axes."""
    path = tmp_path / "points.csv"
    path.write_text("x,y\n1,2\n-1,3\n")
    result = _eval("sum(v[[0, 2, 0]] * x) + sum(v[v > y])", "--points", str(path), "--at", "v=[1,2,3]")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "x,y,value,grad_v[0],grad_v[1],grad_v[2],grad_x,grad_y\n"
        "1,2,8.0,2.0,0.0,2.0,5.0,0.0\n"
        "-1,3,-5.0,-2.0,0.0,-1.0,5.0,0.0\n"
    )


def test_points_lists_apart_keep_the_point_axis_first(tmp_path):
    path = tmp_path / "points.csv"
    path.write_text("s\n1\n2\n")
    T = "T=[[[1,2],[3,4]],[[5,6],[7,8]]]"
    result = _eval("sum((s * T)[[0, 1], :, [1, 0]] * [[1, 10], [100, 1000]])", "--points", str(path), "--at", T)
    assert result.exit_code == 0, result.stderr
    # T[[0,1], :, [1,0]] = [[2, 4], [5, 7]]; weighted: 2 + 40 + 500 + 7000 = 7542
    lines = result.stdout.splitlines()
    assert lines[1].split(",")[:2] == ["1", "7542.0"]
    assert lines[2].split(",")[:2] == ["2", "15084.0"]
    assert lines[1].split(",")[2:] == ["7542.0", "0.0", "1.0", "0.0", "10.0", "100.0", "0.0", "1000.0", "0.0"]
