"""``check --blame`` of a function that computes with PyTorch (issue 29): each custom
``torch.autograd.Function`` is checked alone, its backward against finite differences of its forward,
and a planted wrong backward among five is named with its ``nn.Module`` path and the user's line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install gradcli[torch]")

from gradcli.check.framework_blame import framework_blame, framework_finding  # noqa: E402
from gradcli.check.torch_blame import ELEMENTS, blame_torch, blame_torch_calls  # noqa: E402
from gradcli.cli.app import app  # noqa: E402

torch.set_num_threads(1)

#: a custom Function of the model file: forward and backward as expressions of its arguments and g
FUNCTION = """
class {name}(torch.autograd.Function):
    @staticmethod
    def forward(ctx, {args}):
        ctx.save_for_backward({args})
        return {forward}

    @staticmethod
    def backward(ctx, g):
        {args}, = ctx.saved_tensors
        return {backward}
"""
#: the five, right; a test breaks one backward
RIGHT = {
    "Sin": ("x", "torch.sin(x)", "g * torch.cos(x)"),
    "Exp": ("x", "torch.exp(x)", "g * torch.exp(x)"),
    "Square": ("h", "h * h", "2 * g * h"),
    "Mul": ("a, b", "a * b", "g * b, g * a"),
    "MatMul": ("a, w", "a @ w", "g @ w.T, a.T @ g"),
}
MODEL = """
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.arange(9, dtype=torch.float64).reshape(3, 3) / 7 - 0.5)

    def forward(self, x):
        h = Exp.apply(Sin.apply(x))
        return MatMul.apply(h, self.w)  # the line of MatMul


class Head(nn.Module):
    def forward(self, h, x):
        s = Square.apply(h)  # the line of Square
        return Mul.apply(s, x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = Head()

    def forward(self, x):
        return self.head(self.block(x), x)


model = Net()


def f(x):
    return model(x).sum()
"""
X = np.array([[0.3, -0.5, 1.2], [0.1, 0.2, -0.7]])


def _model(tmp_path: Path, name: str = "model", **broken: str) -> tuple[Path, object]:
    """The model file written (a fresh module name: each test's own classes) and imported."""
    path = tmp_path / f"{name}.py"
    functions = {**RIGHT, **{k: (*RIGHT[k][:2], v) for k, v in broken.items()}}
    text = "".join(FUNCTION.format(name=k, args=a, forward=f, backward=b) for k, (a, f, b) in functions.items())
    path.write_text("import torch\nfrom torch import nn\n" + text + MODEL)
    sys.path.insert(0, str(tmp_path))
    try:
        sys.modules.pop(name, None)
        module = __import__(name)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)
    return path, module


def _line(path: Path, marker: str) -> str:
    number = next(k for k, text in enumerate(path.read_text().splitlines(), 1) if marker in text)
    return f"{path.name}:{number}"


def test_all_five_right_none_blamed(tmp_path):
    _, module = _model(tmp_path)
    found, checked = blame_torch_calls(module.f, {"x": X})
    assert found is None
    assert checked == 5
    assert blame_torch(module.f, {"x": X}) is None


def test_wrong_factor_named_with_module_path_and_line(tmp_path):
    path, module = _model(tmp_path, Square="g * h")  # the 2 is missing
    found = blame_torch(module.f, {"x": X})
    assert found is not None
    assert (found.name, found.framework, found.grad_fn) == ("Square", "torch", "SquareBackward")
    assert found.scope == "model.head"
    assert found.line == _line(path, "the line of Square")
    assert found.index == 3  # Sin, Exp, MatMul before it
    assert found.label == "Square(h)"
    # the numbers are PyTorch's: h as the model computed it, the differences the true v^T J, the
    # backward the planted one (half of it)
    w = module.model.block.w.detach()
    t = torch.tensor(X)
    h = torch.exp(torch.sin(t)) @ w
    np.testing.assert_allclose(found.arguments[0], h.numpy(), rtol=1e-15)
    v = torch.tensor(found.cotangent[0])
    leaf = h.clone().requires_grad_(True)
    (true,) = torch.autograd.grad(leaf * leaf, leaf, v)
    np.testing.assert_allclose(found.differences, true.numpy().reshape(-1), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(found.backward, (v * h).numpy().reshape(-1), rtol=1e-14)
    assert found.max_rel_error == pytest.approx(0.5, rel=1e-6)
    assert found.max_abs_error == pytest.approx(float(np.max(np.abs(true.numpy() / 2))), rel=1e-6)
    assert found.autograd == pytest.approx(found.numeric / 2, rel=1e-6)


def test_missing_transpose_named_in_block(tmp_path):
    path, module = _model(tmp_path, MatMul="g @ w, a.T @ g")  # w is not symmetric
    found, checked = blame_torch_calls(module.f, {"x": X})
    assert (found.name, found.scope, found.index, checked) == ("MatMul", "model.block", 2, 3)
    assert found.line == _line(path, "the line of MatMul")
    assert found.label == "MatMul(a, w)"
    a = torch.exp(torch.sin(torch.tensor(X)))
    w = module.model.block.w.detach()
    v = torch.tensor(found.cotangent[0])
    leaves = a.clone().requires_grad_(True), w.clone().requires_grad_(True)
    true = torch.autograd.grad(leaves[0] @ leaves[1], leaves, v)
    np.testing.assert_allclose(
        found.differences, torch.cat([g.reshape(-1) for g in true]).numpy(), rtol=1e-7, atol=1e-9
    )
    np.testing.assert_allclose(found.backward[:6], (v @ w).numpy().reshape(-1), rtol=1e-14)


def _function(name: str, forward: object, backward: object, setup_context: object = None) -> type:
    """A custom torch.autograd.Function subclass made of these static methods."""
    methods = {"forward": forward, "backward": backward, "setup_context": setup_context}
    return type(name, (torch.autograd.Function,), {k: staticmethod(m) for k, m in methods.items() if m})


def test_only_what_needs_a_gradient_is_checked():
    def forward(ctx, x, k=2.0):  # a number argument, and a backward that gives it None
        return x * k

    twice = _function("Twice", forward, lambda ctx, g: (g * 2.0, None))

    def forward(x):  # noqa: F811 (forward without ctx: setup_context apart)
        return x.exp()

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    exp = _function("Exp", forward, lambda ctx, g: g * ctx.saved_tensors[0] * 1.5, setup_context)  # wrong

    def f(x, c):
        y = twice.apply(x, 2.0) + twice.apply(c, 3.0)  # c needs no gradient: that call is not checked
        return exp.apply(y).sum()

    found, checked = blame_torch_calls(f, {"x": np.array([0.1, 0.2]), "c": np.array([0.3, 0.4])}, wrt=["x"])
    assert (found.name, found.index, checked, found.label) == ("Exp", 2, 2, "Exp(x)")
    assert found.scope is None  # called outside any nn.Module
    assert found.line.startswith("test_r29_torch_blame.py:")
    assert found.max_rel_error == pytest.approx(1 / 3, rel=1e-6)


def test_large_inputs_checked_along_random_directions():
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    def backward(ctx, g):  # wrong in a few elements, by 1e-4
        (x,) = ctx.saved_tensors
        return g * 3 * x * x * (1 + 1e-4 * (x > 0.9))

    cube = _function("Cube", forward, backward)
    x = np.linspace(-1.0, 1.0, ELEMENTS + 44)
    found = blame_torch(lambda x: cube.apply(x).sum(), {"x": x})
    assert found is not None and found.worst.startswith("direction ")
    assert found.max_rel_error > 1e-6
    assert blame_torch(lambda x: cube.apply(x).sum(), {"x": x[x <= 0.9]}) is None


def test_framework_finding_keeps_gradcli_blame_wording(tmp_path):
    path, module = _model(tmp_path, Square="g * h")
    found, checked = framework_blame("torch", module.f, {"x": X}, ["x"], None, None)
    assert checked == 4
    assert (found.node, found.op, found.grad_fn, found.label) == ("call 4", "Square", "SquareBackward", "Square(h)")
    line = _line(path, "the line of Square")
    assert found.text().startswith("SquareBackward (Square(h)) computes a wrong derivative: for random directions, ")
    assert found.text().endswith(f"; called in model.head at {line}")
    same = framework_finding(blame_torch(module.f, {"x": X}))
    assert same.text() == found.text()


# --- the command line: check --blame, check --cases ------------------------------------------------------------------

runner = CliRunner()
AT = "x=[[0.3,-0.5,1.2],[0.1,0.2,-0.7]]"
NOTE = (
    "--blame checked {n} custom torch.autograd.Function call{s}, each backward against finite differences of its own "
    "forward; PyTorch's built-in operations are its own and not checked"
)


def _cli(*args: str, code: int) -> object:
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output + result.stderr, result.output + result.stderr
    assert result.exit_code == code, result.output + result.stderr
    return result


def test_cli_blame_names_the_wrong_function_and_exits_1(tmp_path):
    path, module = _model(tmp_path, "model", Square="g * h")
    lines = _cli("check", f"{path}:f", "--at", AT, "--blame", code=1).stdout.splitlines()
    found = framework_finding(blame_torch(module.f, {"x": X}))
    line = _line(path, "the line of Square")
    assert NOTE.format(n=4, s="s") in lines
    # named as graph --blame marks it on the graph gradcli graph draws
    graph = json.loads(_cli("graph", f"{path}:f", "--at", AT, "--blame", "--format", "json", code=0).stdout)
    (node,) = [n for n in graph["nodes"] if n.get("blamed")]
    assert (node["grad_fn"], node["label"]) == ("SquareBackward", "s = Square(n4)")  # (s: the user's name for it)
    found.node, found.label = node["id"], node["label"]
    blamed = [text for text in lines if text.startswith("blame: ")]
    assert blamed == [f"blame: node {node['id']}: {found.text()}"]
    assert blamed[0].startswith(
        f"blame: node {node['id']}: SquareBackward (s = Square(n4)) computes a wrong derivative: "
    )
    assert blamed[0].endswith(f"; called in model.head at {line}")
    document = json.loads(_cli("check", f"{path}:f", "--at", AT, "--blame", "--json", code=1).stdout)
    blame = document["blame"]
    assert (blame["node"], blame["label"], blame["op"]) == (node["id"], "s = Square(n4)", "Square")
    assert set(blame) == {"node", "op", "grad_fn", "label", "autograd", "finite_difference", "inputs",
                          "framework", "scope", "line"}  # fmt: skip
    assert (blame["framework"], blame["scope"], blame["line"], blame["grad_fn"]) == (
        "torch", "model.head", line, "SquareBackward")  # fmt: skip
    assert blame["autograd"] == pytest.approx(found.autograd, rel=1e-12)
    assert blame["autograd"] == pytest.approx(blame["finite_difference"] / 2, rel=1e-6)
    assert document["ok"] is False and NOTE.format(n=4, s="s") in document["notes"]


def test_cli_blame_with_every_backward_right_exits_0(tmp_path):
    path, _ = _model(tmp_path, "model")
    lines = _cli("check", f"{path}:f", "--at", AT, "--blame", code=0).stdout.splitlines()
    assert NOTE.format(n=5, s="s") in lines
    assert "blame: the derivatives of all 5 nodes agree with finite differences" in lines
    document = json.loads(_cli("check", f"{path}:f", "--at", AT, "--blame", "--json", code=0).stdout)
    assert document["blame"] is None and document["ok"] is True


def test_cases_take_a_torch_function_of_a_file(tmp_path):
    _model(tmp_path, "model")
    (tmp_path / "broken").mkdir()
    _model(tmp_path / "broken", "model", Square="g * h")
    cases = tmp_path / "cases.toml"
    at = "at = { x = [[0.3, -0.5, 1.2], [0.1, 0.2, -0.7]] }"
    cases.write_text(
        f'[[case]]\nfile = "model.py"\nfunction = "f"\n{at}\n\n'
        f'[[case]]\nfunction = "model.py:f"\n{at}\n\n'
        f'[[case]]\nname = "broken"\nfile = "broken/model.py"\nfunction = "f"\n{at}\n'
    )
    result = _cli("check", "--cases", str(cases), "--junit", str(tmp_path / "report.xml"), code=1)
    lines = result.stdout.splitlines()
    assert [text.split()[:2] for text in lines[:2]] == [["ok", "model.py:f"], ["ok", "model.py:f"]]
    assert [text.split()[:2] for text in lines if text.startswith("MISMATCH")] == [["MISMATCH", "broken"]]
    assert lines[-1].startswith("2 passed, 1 failed, 0 inconclusive, 0 errors")
    report = (tmp_path / "report.xml").read_text()
    assert report.count("<testcase ") == 3 and report.count("<failure ") == 1
    document = json.loads(_cli("check", "--cases", str(cases), "--json", code=1).stdout)
    assert [c["status"] for c in document["cases"]] == ["ok", "ok", "MISMATCH"]


def test_cases_file_and_function_need_a_python_file(tmp_path):
    cases = tmp_path / "cases.toml"
    cases.write_text('[[case]]\nfile = "model.txt"\nfunction = "f"\nat = { x = 1 }\n')
    result = _cli("check", "--cases", str(cases), code=2)
    assert 'with file, function names a function of it: file = "model.py", function = "f"' in result.stderr


def test_in_place_defaults_and_float32_functions_are_checked_as_called():
    def forward(ctx, x, y, alpha=1.0):  # in place, a default apply() was not given
        ctx.mark_dirty(x)
        return x.add_(alpha * y)

    add = _function("AddInPlace", forward, lambda ctx, g: (g, 2 * g))  # wrong for y

    def forward(ctx, x):  # noqa: F811 (takes float32 only: its own buffer)
        ctx.save_for_backward(x)
        return torch.mv(torch.eye(2, dtype=torch.float32), x) ** 2

    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return factor * g * x

    factor, squares = 2.0, _function("Squares32", forward, backward)

    def f(x, y):
        return squares.apply(x.float()).double().sum() + add.apply(x * 1.0, y).sum()

    values = {"x": np.array([0.5, -1.5]), "y": np.array([2.0, 3.0])}
    found, checked = blame_torch_calls(f, values)
    assert (found.name, found.index, checked, found.label) == ("AddInPlace", 1, 2, "AddInPlace(x, y)")
    assert found.backward.tolist() == pytest.approx([*found.cotangent[0], *(2 * found.cotangent[0])], rel=1e-15)
    assert found.differences == pytest.approx([*found.cotangent[0], *found.cotangent[0]], rel=1e-8)
    assert found.worst.startswith("y[")
    factor = 2.1  # wrong by 5 %: float32's tolerances (check's) see it
    found = blame_torch(f, values)
    assert (found.name, found.index) == ("Squares32", 0)
    assert found.max_rel_error == pytest.approx(0.1 / 2.1, rel=1e-4)


def test_cases_blame_names_the_function_in_the_junit_report(tmp_path):
    path, _ = _model(tmp_path, "model", Square="g * h")
    cases = tmp_path / "cases.toml"
    cases.write_text(
        "[defaults]\nblame = true\n\n"
        '[[case]]\nfile = "model.py"\nfunction = "f"\nat = { x = [[0.3, -0.5, 1.2], [0.1, 0.2, -0.7]] }\n\n'
        '[[case]]\nexpr = "sin(x)"\nat = { x = 1 }\nblame = false\n'
    )
    report = tmp_path / "report.xml"
    lines = _cli("check", "--cases", str(cases), "--junit", str(report), code=1).stdout.splitlines()
    line = _line(path, "the line of Square")
    blamed = [text.strip() for text in lines if text.strip().startswith("blame: ")]
    # the node as check --blame and the graph name it (issue 34: "call 4" before)
    assert len(blamed) == 1 and blamed[0].startswith("blame: node n5: SquareBackward (s = Square(n4)) computes a wrong")
    assert blamed[0].endswith(f"; called in model.head at {line}")
    assert report.read_text().count(f"called in model.head at {line}") == 1
    document = json.loads(_cli("check", "--cases", str(cases), "--json", code=1).stdout)
    first, second = document["cases"]
    assert first["result"]["blame"]["scope"] == "model.head" and "blame" not in second["result"]
    cases.write_text('[[case]]\nexpr = "sin(x)"\nat = { x = 1 }\nblame = "yes"\n')
    assert "blame = 'yes' is not true or false" in _cli("check", "--cases", str(cases), code=2).stderr


def test_graph_blame_marks_the_wrong_function_on_torch_graph(tmp_path):
    path, _ = _model(tmp_path, "model", Square="g * h")
    result = _cli("graph", f"{path}:f", "--at", AT, "--blame", "--format", "json", code=0)
    blamed = [n for n in json.loads(result.stdout)["nodes"] if n.get("blamed")]
    line = _line(path, "the line of Square")
    assert [(n["grad_fn"], n["scope"], n["line"]) for n in blamed] == [("SquareBackward", "model.head", line)]
    said = [text for text in result.stderr.splitlines() if text.startswith("blame: ")]
    assert said == [
        f"blame: node {blamed[0]['id']} ({blamed[0]['label']}), marked in red: " + said[0].split(": ", 2)[2]
    ]
    assert said[0].split("marked in red: ")[1].startswith("SquareBackward (Square(h)) computes a wrong derivative")
    (tmp_path / "right").mkdir()
    right, _ = _model(tmp_path / "right", "model")
    result = _cli("graph", f"{right}:f", "--at", AT, "--blame", "--format", "json", code=0)
    assert not [n for n in json.loads(result.stdout)["nodes"] if n.get("blamed")]
    assert "blame: every node's derivative agrees with finite differences" in result.stderr


def test_a_call_in_a_loop_is_named_by_its_own_node(tmp_path):
    """The same Function from the same line three times, wrong only where 2x + 1 > 3: the third call
    (inputs 0.2976, 1.3125) is the one blamed and marked, not the first node of its line."""
    path = tmp_path / "loop.py"
    text = FUNCTION.format(name="Grow", args="x", forward="x * x + x", backward="g * (2 * x + 1).clamp(max=3.0)")
    path.write_text(
        f"import torch\n{text}\n\ndef f(x):\n    for _ in range(3):\n        x = Grow.apply(x)\n    return x.sum()\n"
    )
    at = "x=[0.2,0.5]"
    document = json.loads(_cli("check", f"{path}:f", "--at", at, "--blame", "--json", code=1).stdout)
    graph = json.loads(_cli("graph", f"{path}:f", "--at", at, "--blame", "--format", "json", code=0).stdout)
    grows = [n for n in graph["nodes"] if n.get("grad_fn") == "GrowBackward"]
    assert [n["value"] for n in grows][1] == pytest.approx([0.2976, 1.3125])  # the third call's inputs
    assert [n["id"] for n in grows if n.get("blamed")] == [grows[2]["id"]] == [document["blame"]["node"]]
    assert document["blame"]["inputs"] == "[0.2976, 1.3125]"
