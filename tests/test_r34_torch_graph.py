"""The PyTorch graph of issue 34: each output of a node of several outputs (``chunk``, ``split``,
``unbind``, ``var_mean``, ``topk``/``max`` with indices, a custom Function returning two tensors) is a
node of its own, named, with its own value and gradient (equal to torch's), wired to its own
consumers; ``torch.compile``'d functions are drawn; a one-op module gets its box in DOT; a custom
Function's saved tensors read "saved tensors", not "saved saved"; ``--highlight`` shows in the tree."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.frameworks import need

torch = need("torch")

from gradcli.cli.app import app  # noqa: E402

torch.set_num_threads(1)

MODEL = """
import torch


class SinCos(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin(), x.cos()

    @staticmethod
    def backward(ctx, gs, gc):
        x, = ctx.saved_tensors
        return gs * x.cos() - gc * x.sin()


def chunked(x):
    a, b = x.chunk(2)
    return (a * 2 + b.sin() * 3).sum()


def unbound(x):
    a, b, c = x.unbind()
    return a * b + c ** 2


def custom(x):
    s, c = SinCos.apply(x)
    return (s + c * 3).sum()


def splitted(x):
    return (torch.split(x, [1, 3])[1] * 5).sum()


def topk(x):
    values, indices = x.topk(2)
    biggest, where = x.max(0)
    return (values * 2).sum() + biggest * 7


def var_mean(x):
    v, m = torch.var_mean(x)
    return v * 2 + m * 3


net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Softplus()).double()


def module(x):
    return net(x).sum()
"""

X = [0.1, 0.2, 0.3, 0.4]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("torch_graph") / "model.py"
    path.write_text(MODEL)
    return path


def run(*args):
    result = CliRunner().invoke(app, ["graph", *map(str, args)])
    assert result.exit_code == 0, result.output
    return result.stdout


def graph_json(model, function, at="x=[0.1,0.2,0.3,0.4]"):
    document = json.loads(run(f"{model}:{function}", "--at", at, "--json"))
    nodes = {n["id"]: n for n in document["nodes"]}
    named = {n["name"]: n for n in document["nodes"] if n.get("name")}
    return document, nodes, named


def consumers(document, nodes, node_id):
    return sorted(nodes[e["target"]]["label"] for e in document["edges"] if e["source"] == node_id)


def test_chunk_draws_each_output_with_its_value_gradient_and_consumers(model):
    x = torch.tensor(X, dtype=torch.float64)
    text = run(f"{model}:chunked", "--at", "x=[0.1,0.2,0.3,0.4]", "--format", "text").splitlines()
    assert text[1] == "n1 = split(x)  # SplitBackward0"
    assert text[2] == "a = n1[0]  # SplitBackward0 output 0  shape=(2,)  value=[0.1, 0.2]  grad=[2, 2]"
    assert text[3].startswith("b = n1[1]  # SplitBackward0 output 1  shape=(2,)  value=[0.3, 0.4]  grad=[2.8660094")
    assert "n5 = sin(b)" in text[5] and "n4 = mul(a)" in text[4]
    assert not any(line.startswith("#") for line in text)  # (no "no value kept" for the split itself)
    document, nodes, named = graph_json(model, "chunked")
    np.testing.assert_allclose(named["b"]["value"], x[2:].numpy())
    np.testing.assert_allclose(named["b"]["grad"], 3 * torch.cos(x[2:]).numpy(), rtol=1e-12)
    np.testing.assert_allclose(named["a"]["grad"], [2, 2])
    assert consumers(document, nodes, named["b"]["id"]) == ["sin(b)"]
    assert consumers(document, nodes, named["a"]["id"]) == ["a * 2"]
    dot = run(f"{model}:chunked", "--at", "x=[0.1,0.2,0.3,0.4]", "--format", "dot")
    assert "<b>b = n1[1]</b>" in dot and "<b>n5 = sin(b)</b>" in dot and "<b>n4 = a * 2</b>" in dot


def test_unbind_wires_a_times_b_plus_c_squared(model):
    text = run(f"{model}:unbound", "--at", "x=[0.1,0.2,0.3]", "--format", "text").splitlines()
    assert text[2:5] == [
        "a = n1[0]  # UnbindBackward0 output 0  value=0.1  grad=0.2",
        "b = n1[1]  # UnbindBackward0 output 1  value=0.2  grad=0.1",
        "c = n1[2]  # UnbindBackward0 output 2  value=0.3  grad=0.6",
    ]
    assert text[5].startswith("n5 = mul(a, b)") and text[6].startswith("n6 = pow(c)")
    dot = run(f"{model}:unbound", "--at", "x=[0.1,0.2,0.3]", "--format", "dot")
    assert "<b>n5 = a * b</b>" in dot and "<b>n6 = pow(c)</b>" in dot and "<b>f = n5 + n6</b>" in dot
    assert "pow(a)" not in dot and "a * a" not in dot


def test_custom_function_of_two_outputs_and_its_saved_tensors(model):
    x = torch.tensor([0.1, 0.2], dtype=torch.float64)
    dot = run(f"{model}:custom", "--at", "x=[0.1,0.2]", "--format", "dot")
    assert "<b>n4 = c * 3</b>" in dot and "<b>c = n1[1]</b>" in dot and "<b>s = n1[0]</b>" in dot
    assert "saved tensors (2,)" in dot and "saved saved" not in dot
    document, nodes, named = graph_json(model, "custom", "x=[0.1,0.2]")
    np.testing.assert_allclose(named["c"]["value"], torch.cos(x).numpy(), rtol=1e-15)
    np.testing.assert_allclose(named["c"]["grad"], [3, 3])
    np.testing.assert_allclose(named["s"]["value"], torch.sin(x).numpy(), rtol=1e-15)
    np.testing.assert_allclose(named["s"]["grad"], [1, 1])
    assert consumers(document, nodes, named["c"]["id"]) == ["c * 3"]
    assert "saved saved" not in json.dumps(document)
    function = next(n for n in document["nodes"] if n["op"] == "SinCos")
    assert function["saves"] == "tensors (2,)"


def test_split_topk_max_and_var_mean_outputs(model):
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    _, nodes, named = graph_json(model, "splitted")
    np.testing.assert_allclose(named["split_with_sizes[1]"]["value"], X[1:])
    np.testing.assert_allclose(named["split_with_sizes[1]"]["grad"], [5, 5, 5])
    _, nodes, named = graph_json(model, "topk")
    values = next(n for n in nodes.values() if n["op"] == "topk")
    np.testing.assert_allclose(values["value"], [0.4, 0.3])
    np.testing.assert_allclose(values["grad"], [2, 2])
    biggest = next(n for n in nodes.values() if n["op"] == "max")
    assert biggest["value"] == 0.4 and biggest["grad"] == 7
    v, m = torch.var_mean(x)
    (gv,) = torch.autograd.grad(v, x, retain_graph=True)
    (gm,) = torch.autograd.grad(m, x)
    _, nodes, named = graph_json(model, "var_mean")
    assert named["v"]["value"] == pytest.approx(v.item(), rel=1e-15) and named["v"]["grad"] == 2
    assert named["m"]["value"] == pytest.approx(m.item(), rel=1e-15) and named["m"]["grad"] == 3
    np.testing.assert_allclose(named["x"]["grad"], (2 * gv + 3 * gm).numpy(), rtol=1e-12)


def test_torch_compiled_function_is_drawn_with_a_note(tmp_path):
    path = tmp_path / "compiled.py"
    path.write_text("import torch\n\n\n@torch.compile\ndef f(x):\n    return (x.sin() * 2).sum()\n")
    result = CliRunner().invoke(app, ["graph", f"{path}:f", "--at", "x=[0.1,0.2]", "--format", "text"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1].startswith("n1 = sin(x)") and lines[-2].startswith("f = sum(n2)  # SumBackward0  value=0.597005494")
    assert lines[-1].startswith("# torch.compile'd: the graph drawn is the function's own, run eagerly")


def test_one_op_module_gets_its_box_in_dot(model):
    dot = run(f"{model}:module", "--at", "x=[0.1,0.2]", "--format", "dot")
    assert '<font color="#6a7fa8">net.1 (Softplus)</font>' in dot
    box = dot.split("net.1 (Softplus)")[1].split("}")[0]
    assert "softplus(n6)" in box


def test_highlight_shows_in_the_tree():
    tree = run("(x + w) * w", "--at", "x=1,w=2", "--highlight", "x", "--format", "tree").splitlines()
    assert tree[0].endswith("<- highlighted")
    assert "x  (variable)  value 1  grad 2  <- highlighted" in tree[2]
    assert "highlighted" not in tree[3]
