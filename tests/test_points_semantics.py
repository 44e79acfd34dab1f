"""``eval --points``: each row is its own point (vmap semantics), checked against ``eval --at`` row by row.

Variables from the file carry a leading point axis; ``--at`` values are shared;
reductions, ``@``, indexing and broadcasting act on each point alone, and each
point gets its own gradient (issue 12). Every program below is evaluated over
the whole file once and then at every row with ``eval --at``: the numbers must
agree to 1e-12.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcli.cli.app import app

runner = CliRunner()

ROWS = [(1.0, 2.0), (2.0, -0.5), (3.0, 0.25), (-1.5, 1.75)]  # with kinks of abs, relu, norm and clamp
POINTS = "x,y\n" + "\n".join(f"{x},{y}" for x, y in ROWS) + "\n"

A = "A=[[1,2],[3,-4]]"
V = "v=[1,2]"
CASES = [
    # (expression, --at, --seed)
    ("a*x", "a=2", None),
    ("sum(x*v)", V, None),
    ("sum(x*v)", "v=[1,2,3]", None),
    ("x*v", V, "ones"),
    ("x*v", V, "[2,-1]"),
    ("dot(v, v*x) + y", V, None),
    ("A @ v * x", f"{A},{V}", "[1,-1]"),
    ("sum(tanh(A @ (v*x)))", f"{A},{V}", None),
    ("v @ A @ (v*y)", f"{A},{V}", None),
    ("(v*y) @ A", f"{A},{V}", "ones"),
    ("sum((A*x) @ B)", f"{A},B=[[1,0.5,2],[0,-1,3]]", None),
    ("norm(v*x - y)", V, None),
    ("mean(v*x) + prod(v + y)", V, None),
    ("logsumexp(v*x)", V, None),
    ("max(v*x) + min(v*y)", V, None),
    ("sum(A*x, 0) @ v", f"{A},{V}", None),
    ("sum(A*x, -1)[1] + mean(A*y, 1)[0]", A, None),
    ("(v*x)[0] + (v*y)[1:][0] + (A*x)[1, 0] + (A*y)[:, 1][0]", f"{A},{V}", None),
    ("[x, y, a] @ w", "a=0.5,w=[1,-2,3]", None),
    ("[x*v, y*v]", V, "ones"),
    ("[[x, y], [y, x]] @ v", V, "[1,2]"),
    ("x*y + sin(x)", "", None),
    ("t = v*x; u = sum(t^2); u / (1 + y^2)", V, None),
    ("x if x > y else y*v[0]", V, None),
    ("where(gt(x, 1), x*a, y) + maximum(x*v, y)[1] + minimum(x, y*a)", "a=0.75,v=[1,2]", None),
    ("sum(clamp(x*v, -1, a))", "a=2.5,v=[1,2]", None),
    ("x*v + A", f"{A},{V}", "ones"),
    ("sum(v + A*y)", f"{A},{V}", None),
    ("x, y*a", "a=3", "ones"),
    ("atan2(y, x*a) + log(x*x*a, 2) + sqrt(x^2 + y^2)", "a=1.5", None),
    ("detach(x)*y + a*x", "a=2", None),
    ("sum(v) * x", V, None),
    ("2*a", "a=4", None),
    ("3", "", None),
    ("(-x)*a + (x < y) + eq(x, 1)", "a=2", None),
    ("sum(sigmoid(M @ [x, y]) * v)", "M=[[0.5,-1],[2,0.25]],v=[1,2]", None),
    ("(v*x)[k] + sum(A*y, k)[0] + (v*y)[k:][0]", f"{A},{V},k=1", None),
    ("abs(x - 2) + relu(x - 1) + max(w*y) + norm(w*(x - 1)) + clamp(x, a, a)", "a=2,w=[1,1]", None),
]


def _invoke(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr + result.stdout
    return result.stdout


def _options(at: str, seed: str | None) -> list[str]:
    return (["--at", at] if at else []) + (["--seed", seed] if seed else [])


@pytest.fixture
def points_file(tmp_path):
    path = tmp_path / "points.csv"
    path.write_text(POINTS)
    return path


@pytest.mark.parametrize("expression, at, seed", CASES)
def test_points_agree_with_eval_at_every_row(points_file, expression, at, seed):
    lines = _invoke(["eval", expression, "--points", str(points_file), "--json", *_options(at, seed)]).splitlines()
    assert len(lines) == len(ROWS)
    for (x, y), line in zip(ROWS, lines):
        got = json.loads(line)
        point = f"x={x},y={y}" + (f",{at}" if at else "")
        want = json.loads(_invoke(["eval", expression, "--json", "--at", point, *_options("", seed)]))
        assert list(got["gradient"]) == list(want["gradient"])
        np.testing.assert_allclose(got["value"], want["value"], rtol=1e-12, atol=1e-15)
        for name, g in want["gradient"].items():
            np.testing.assert_allclose(got["gradient"][name], g, rtol=1e-12, atol=1e-15, err_msg=name)


def test_csv_output_matches_json_lines(points_file):
    """CSV: one column per element of a vector or matrix value or gradient, C order, named like jacobian's."""
    args = ["eval", "A*x + v", "--points", str(points_file), "--at", f"{A},{V}", "--seed", "ones"]
    csv_lines = _invoke(args).splitlines()
    assert csv_lines[0] == (  # y is not used: it passes through only with --keep-columns (issue 18)
        'x,"value[0,0]","value[0,1]","value[1,0]","value[1,1]",'  # a name with a comma is quoted (issue 27)
        '"grad_A[0,0]","grad_A[0,1]","grad_A[1,0]","grad_A[1,1]",grad_x,grad_v[0],grad_v[1]'
    )
    json_lines = _invoke([*args, "--json"]).splitlines()
    for row, line in zip(csv_lines[1:], json_lines):
        doc = json.loads(line)
        flat = [doc["value"], *doc["gradient"].values()]
        numbers = np.concatenate([np.ravel(f) for f in flat])
        np.testing.assert_array_equal(np.array(row.split(",")[1:], dtype=float), numbers)


def test_the_issue_examples_exactly(tmp_path):
    three = tmp_path / "three.csv"
    three.write_text("x\n1\n2\n3\n")
    assert _invoke(["eval", "a*x", "--points", str(three), "--at", "a=2"]) == (
        "x,value,grad_a,grad_x\n1,2.0,1.0,2.0\n2,4.0,2.0,2.0\n3,6.0,3.0,2.0\n"
    )
    assert _invoke(["eval", "sum(x*v)", "--points", str(three), "--at", "v=[1,2]", "--json"]) == (
        '{"value": 3.0, "gradient": {"x": 3.0, "v": [1.0, 1.0]}}\n'
        '{"value": 6.0, "gradient": {"x": 3.0, "v": [2.0, 2.0]}}\n'
        '{"value": 9.0, "gradient": {"x": 3.0, "v": [3.0, 3.0]}}\n'
    )
    assert _invoke(["eval", "sum(x*v)", "--points", str(three), "--at", "v=[1,2]"]) == (
        "x,value,grad_x,grad_v[0],grad_v[1]\n1,3.0,3.0,1.0,1.0\n2,6.0,3.0,2.0,2.0\n3,9.0,3.0,3.0,3.0\n"
    )
    assert _invoke(["eval", "x*v", "--points", str(three), "--at", "v=[1,2]", "--seed", "ones", "--json"]) == (
        '{"value": [1.0, 2.0], "gradient": {"x": 3.0, "v": [1.0, 1.0]}}\n'
        '{"value": [2.0, 4.0], "gradient": {"x": 3.0, "v": [2.0, 2.0]}}\n'
        '{"value": [3.0, 6.0], "gradient": {"x": 3.0, "v": [3.0, 3.0]}}\n'
    )


def test_a_vector_value_per_point_needs_a_seed_as_in_eval(points_file):
    result = runner.invoke(app, ["eval", "x*v", "--points", str(points_file), "--at", V])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(
        "error: grad can be implicitly created only for scalar outputs: the output has shape (2,)"
    )
    result = runner.invoke(app, ["eval", "x*v", "--points", str(points_file), "--at", V, "--seed", "[1,2,3]"])
    assert result.exit_code == 2
    assert result.stderr == "error: --seed has shape (3,) but the output has shape (2,)\n"


def test_shape_errors_are_eval_s_own_for_one_point(points_file):
    expression, at = "sum(x*v) + w @ v", "v=[1,2],w=[1,2,3]"
    result = runner.invoke(app, ["eval", expression, "--points", str(points_file), "--at", at])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("error: '@' at column 14: shapes (3,) and (2,) do not match for @")
    assert result.stderr == runner.invoke(app, ["eval", expression, "--at", f"x=1,{at}"]).stderr  # y: unused


def test_wrt_limits_the_gradient_columns(points_file):
    out = _invoke(["eval", "sum(x*v) + y", "--points", str(points_file), "--at", V, "--wrt", "v"])
    assert out.splitlines()[:2] == ["x,y,value,grad_v[0],grad_v[1]", "1.0,2.0,5.0,1.0,1.0"]


def test_an_index_read_from_the_file_is_taken_point_by_point(tmp_path):
    path = tmp_path / "points.csv"
    path.write_text("i,x\n0,2\n1,3\n2,5\n")
    out = _invoke(["eval", "(v*x)[i]", "--points", str(path), "--at", "v=[1,10,100]", "--json"])
    docs = [json.loads(line) for line in out.splitlines()]
    assert [d["value"] for d in docs] == [2.0, 30.0, 500.0]
    assert [d["gradient"]["v"] for d in docs] == [[2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 5.0]]
    assert [d["gradient"]["x"] for d in docs] == [1.0, 10.0, 100.0]


def test_non_finite_warnings_name_the_point(tmp_path):
    path = tmp_path / "points.csv"
    path.write_text("x\n1\n0\n-1\n")
    result = runner.invoke(app, ["eval", "log(x)*a", "--points", str(path), "--at", "a=2"])
    assert result.exit_code == 0
    assert result.stderr == (
        "warning: non-finite value: 'log(x)' at column 1 gave -inf from input 0 at point 2 (x = 0.0)\n"
    )
    result = runner.invoke(app, ["eval", "sqrt(x*x)", "--points", str(path)])
    assert result.exit_code == 0
    assert result.stderr.startswith("warning: non-finite gradient: ")
    assert result.stderr.endswith("at point 2 (x = 0.0)\n")


def test_python_functions_run_once_a_point(tmp_path):
    """A Python function's control flow may differ per row: it is called once a point."""
    source = tmp_path / "f.py"
    source.write_text(
        "import gradcli as gc\n"
        "def f(x, v):\n"
        "    if x.item() > 1.5:\n"
        "        return (x * v).sum()\n"
        "    return (x * x * v).sum()\n"
    )
    path = tmp_path / "points.csv"
    path.write_text("x\n1\n2\n")
    out = _invoke(["eval", f"{source}:f", "--points", str(path), "--at", V, "--json"])
    assert out == (
        '{"value": 3.0, "gradient": {"x": 6.0, "v": [1.0, 1.0]}}\n'
        '{"value": 6.0, "gradient": {"x": 3.0, "v": [2.0, 2.0]}}\n'
    )


def test_points_agree_with_pytorch_vmap(points_file):
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    from torch.func import grad, vmap

    A_ = torch.tensor([[1.0, 2.0], [3.0, -4.0]], dtype=torch.float64)
    v = torch.tensor([1.0, 2.0], dtype=torch.float64)
    xs = torch.tensor([r[0] for r in ROWS], dtype=torch.float64)
    ys = torch.tensor([r[1] for r in ROWS], dtype=torch.float64)

    def f(A, v, x, y):
        return torch.tanh(A @ (v * x)).sum() + torch.linalg.vector_norm(v * y)

    value = vmap(f, in_dims=(None, None, 0, 0))(A_, v, xs, ys)
    grads = vmap(grad(f, argnums=(0, 1, 2, 3)), in_dims=(None, None, 0, 0))(A_, v, xs, ys)
    out = _invoke(
        ["eval", "sum(tanh(A @ (v*x))) + norm(v*y)", "--points", str(points_file), "--at", f"{A},{V}", "--json"]
    )
    docs = [json.loads(line) for line in out.splitlines()]
    np.testing.assert_allclose([d["value"] for d in docs], value.numpy(), rtol=1e-9)
    for name, g in zip("Avxy", grads):
        np.testing.assert_allclose([d["gradient"][name] for d in docs], g.numpy(), rtol=1e-9, atol=1e-12)


def test_an_error_at_a_later_point_names_it(tmp_path):
    path = tmp_path / "points.csv"
    path.write_text("i,x\n0,1\n1,2\n5,3\n")
    result = runner.invoke(app, ["eval", "(v*x)[i]", "--points", str(path), "--at", V])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (
        "error: point 3 (i = 5.0, x = 3.0): indexing at column 7: index 5 is out of range for axis 0 of size 2\n"
    )


@pytest.mark.parametrize("as_json", [[], ["--json"]])
def test_output_in_blocks_of_rows_is_the_same(points_file, monkeypatch, as_json):
    from gradcli.cli import commands

    args = ["eval", "A*x + v", "--points", str(points_file), "--at", f"{A},{V}", "--seed", "ones", *as_json]
    whole = _invoke(args)
    monkeypatch.setattr(commands, "POINTS_CELLS", 20)  # 13 numbers a row: one row a block
    assert _invoke(args) == whole
    monkeypatch.setattr(commands, "POINTS_CELLS", 30)  # two rows a block, the last block shorter
    assert _invoke(args) == whole
