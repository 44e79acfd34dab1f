"""Gradient health at a glance (issue 35): each node's and each module box's gradient norm, value norm,
their ratio, zeros and NaN/inf, equal to NumPy's on torch's own tensors; ``--color-by`` colours the
picture by them, NaN and infinities always red; ``with gc.render.recording():`` around a torch forward
keeps what a picture drawn after ``backward()`` needs."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli.app import app
from gradcli.errors import UsageError
from gradcli.render.health import module_rows, node_health, ordered
from gradcli.stats import TensorStats, whole
from tests.frameworks import need


def norm(t) -> float:
    return float(np.linalg.norm(t.detach().double().numpy().ravel()))


def together(tensors) -> float:
    return float(np.sqrt(sum(norm(t) ** 2 for t in tensors)))


def mlp(torch, width: int = 16):
    torch.manual_seed(35)
    net = torch.nn.Sequential(torch.nn.Linear(6, width), torch.nn.ReLU(), torch.nn.Linear(width, 3))
    with torch.no_grad():
        net[0].bias[:4] = -100.0  # four dead units: their rows of the first weight get zero gradients
    return net


def torch_own(torch, net, x):
    """Torch's own tensors of a forward and backward: each module's output and its gradient (hooks),
    each parameter's ``.grad``."""
    outputs, grads = {}, {}

    def keep(name):
        def hook(module, args, out):
            outputs[name] = out.detach().clone()
            out.register_hook(lambda g: grads.__setitem__(name, g.detach().clone()))

        return hook

    handles = [m.register_forward_hook(keep(name)) for name, m in net.named_children()]
    net.zero_grad()
    loss = net(x).pow(2).mean()
    loss.backward()
    for h in handles:
        h.remove()
    return outputs, grads


def test_node_health_and_module_rows_equal_numpy_on_torch_tensors():
    torch = need("torch")
    net = mlp(torch)
    x = torch.randn(5, 6)
    g = gc.render.graph(lambda x: net(x).pow(2).mean(), x).model
    outputs, grads = torch_own(torch, net, x)
    weight = g.node(next(n.id for n in g.nodes if n.name == "net.0.weight"))
    assert isinstance(weight.value, TensorStats)  # (96 elements: its statistics)
    w, gw = net[0].weight, net[0].weight.grad
    h = node_health(weight)
    assert h["grad_norm"] == pytest.approx(norm(gw), rel=1e-12)
    assert h["value_norm"] == pytest.approx(norm(w), rel=1e-12)
    assert h["ratio"] == pytest.approx(norm(gw) / norm(w), rel=1e-12)
    assert h["zeros"] == np.count_nonzero(gw.numpy() == 0) / gw.numel() == 0.25  # (the dead units' rows)
    assert h["nonfinite"] == 0
    rows = {r["path"]: r for r in module_rows(g)}
    assert list(rows) == ["net", "net.0", "net.1", "net.2"]
    for k, path in ((0, "net.0"), (2, "net.2")):
        params = list(net[k].parameters())
        row = rows[path]
        assert row["class"] == "Linear" and row["of"] == "parameters"
        assert row["params"] == sum(p.numel() for p in params)
        assert row["grad_norm"] == pytest.approx(together(p.grad for p in params), rel=1e-12)
        assert row["value_norm"] == pytest.approx(together(params), rel=1e-12)
        zeros = sum(int((p.grad == 0).sum()) for p in params) / row["params"]
        assert row["zeros"] == pytest.approx(zeros, rel=1e-12)
    relu = rows["net.1"]  # no parameters: its output's gradient
    assert relu["of"] == "output" and relu["params"] == 0
    assert relu["grad_norm"] == pytest.approx(norm(grads["1"]), rel=1e-12)
    assert relu["value_norm"] == pytest.approx(norm(outputs["1"]), rel=1e-12)
    assert rows["net"]["params"] == sum(p.numel() for p in net.parameters()) == 163
    assert rows["net"]["grad_norm"] == pytest.approx(together(p.grad for p in net.parameters()), rel=1e-12)
    json_rows = gc.render.graph(lambda x: net(x).pow(2).mean(), x).json()["modules"]
    assert [r["path"] for r in json_rows] == list(rows) and json_rows[1]["grad_norm"] == rows["net.0"]["grad_norm"]


def gated(torch):
    """An MLP whose middle module's parameter gets a NaN gradient (``where`` over a ``sqrt`` of a negative
    number: 0 times NaN) while the gradient it passes on, and every value it gives, are finite."""

    class Gate(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = torch.nn.Parameter(torch.tensor([-1.0, 4.0]))

        def forward(self, x):
            return x * torch.where(self.p > 0, self.p.sqrt(), 1.0)

    torch.manual_seed(35)
    return torch.nn.Sequential(torch.nn.Linear(2, 2), Gate(), torch.nn.Linear(2, 1))


def test_a_nan_gradient_comes_first_in_the_nan_ordering():
    torch = need("torch")
    net = gated(torch)
    x = torch.randn(3, 2)
    net(x).sum().backward()
    assert torch.isnan(net[1].p.grad).tolist() == [True, False] and torch.isfinite(net[0].weight.grad).all()
    g = gc.render.graph(lambda x: net(x).sum(), x).model
    rows = module_rows(g)
    first = ordered(rows, "nan")[0]
    assert (first["path"], first["class"]) == ("net.1", "Gate")
    assert first["nonfinite"] >= 1 and first["grad_norm"] != first["grad_norm"]  # (NaN)
    assert {r["path"]: r["nonfinite"] for r in rows}["net.0"] == 0
    assert [r["path"] for r in ordered(rows, "grad-norm")][:2] == ["net.1", "net"]  # (a NaN norm: the worst)
    text = gc.render.graph(lambda x: net(x).sum(), x, color_by="nan").text()  # the text views' table

    def line(k):
        params = list(net[k].parameters())
        grad = together(p.grad for p in params)
        return f"#   net.{k} (Linear)  {sum(p.numel() for p in params)} params  grad_norm {grad:.4g}  " + (
            f"ratio {grad / together(params):.4g}  zeros 0%  nonfinite 0"
        )

    assert text.endswith(
        "# module boxes by nan (of their parameters, or of their output where they have none):\n"
        "#   net.1 (Gate)  2 params  grad_norm nan  ratio nan  zeros 0%  nonfinite 2\n"
        "#   net (Sequential)  11 params  grad_norm nan  ratio nan  zeros 0%  nonfinite 2\n"
        f"{line(0)}\n{line(2)}\n"
    ), text


# --- --color-by: the picture coloured by gradient health --------------------------------------------

runner = CliRunner()


def fills(dot: str) -> dict[str, str]:
    """Each node's title (its first bold text) -> its fillcolor, from DOT source."""
    found = {}
    for line in dot.splitlines():
        m = re.match(r'\s*(\w+) \[label=<(?:<b>([^<]*)</b>)?.*fillcolor="(#[0-9a-f]{6})"', line)
        if m:
            found[html.unescape(m.group(2) or m.group(1))] = m.group(3)
    return found


def test_a_nan_gradient_is_red_in_the_picture_in_every_mode():
    torch = need("torch")
    net = gated(torch)
    x = torch.randn(3, 2)
    for by in ("grad-norm", "zeros", "ratio", "nan"):
        dot = gc.render.graph(lambda x: net(x).sum(), x, color_by=by).dot()
        colours = fills(dot)
        assert colours["net.1.p"] == "#ff7f7f", by  # its gradient [nan, 0.23]
        assert colours["n6 = sqrt(net.1.p)"] == "#ff7f7f", by  # its value [nan, 2]
        assert "#ff7f7f" not in {colours["net.0.weight"], colours["net.2.weight"], colours["f = sum(n12)"]}
        gate = re.search(r'subgraph cluster_(m\d+) \{\n[^\n]*net\.1 \(Gate\)[^\n]*\n\s*color="#b00000"', dot)
        assert gate is not None, dot  # the Gate's box bordered in dark red
    assert ">NaN/inf</td>" in dot and 'bgcolor="#ff7f7f"' in dot  # the key says what red is


def cli_dot(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_color_by_fills_a_known_graph():
    # x * y at x=1, y=100: the gradients are 100 (x) and 1 (y, f): the scale spans 1e0 to 1e2
    dot = cli_dot("graph", "x * y", "--at", "x=1,y=100", "--color-by", "grad-norm", "--format", "dot")
    assert fills(dot) == {"x": "#fdae61", "y": "#e0f3f8", "f = x * y": "#e0f3f8"}
    cells = re.findall(r'<td bgcolor="(#[0-9a-f]{6})"[^>]*>([^<]*)</td>', dot)
    # the key at round values (1, 3, 10 ...), each cell the colour its value gets (3: 0.24 of the scale)
    assert cells == [("#e0f3f8", "1"), ("#addaea", "3"), ("#ffffbf", "10"), ("#fee192", "30"),
                     ("#fdae61", "100"), ("#d9d9d9", "0"), ("#ff7f7f", "NaN/inf")]  # fmt: skip
    # the ratio: 100 / 1 for x, 1 / 100 for y and f: 1e-2 to 1e2, x at the top, y and f at the bottom
    dot = cli_dot("graph", "x * y", "--at", "x=1,y=100", "--color-by", "ratio", "--format", "dot")
    assert fills(dot) == {"x": "#fdae61", "y": "#e0f3f8", "f = x * y": "#e0f3f8"}
    # zeros: relu's gradient [3, 0, 3, 0] into x is half zeros: the middle of the scale
    dot = cli_dot("graph", "sum(relu(x) * y)", "--at", "x=[1,-1,2,-2],y=3", "--color-by", "zeros", "--format", "dot")
    colours = fills(dot)
    assert colours["x"] == "#ffffbf" and colours["n1 = relu(x)"] == "#e0f3f8"
    dot = cli_dot("graph", "sum(relu(x) * y)", "--at", "x=[1,-1,2,-2],y=3", "--color-by", "nan", "--format", "dot")
    assert set(fills(dot).values()) == {"#d9f0d3"}  # finite everywhere
    plain = cli_dot("graph", "x * y", "--at", "x=1,y=100", "--format", "dot")
    assert "gradcli_legend" not in plain and "#fdae61" not in plain  # without --color-by: as before


def test_a_bad_color_by_is_one_error_line_exit_2():
    result = runner.invoke(app, ["graph", "x * y", "--at", "x=1,y=2", "--color-by", "gradnorm"])
    assert result.exit_code == 2
    assert result.stderr == "error: --color-by must be one of grad-norm, nan, zeros, ratio, not 'gradnorm'\n"
    with pytest.raises(UsageError, match="grad-norm, nan, zeros, ratio"):
        gc.render.graph(gc.tensor(1.0, requires_grad=True), color_by="norm")


# --- after backward: gc.render.recording() around a torch forward -----------------------------------


def recorded_forward(torch, net, x, record: bool, arrays: bool = False):
    """``net``'s forward (in ``gc.render.recording()`` when ``record``), with torch's own tensors of it:
    each module's output and, after ``backward()``, the gradient flowing into it (tensor hooks)."""
    outputs, grads = {}, {}

    def keep(name):
        def hook(module, args, out):
            outputs[name] = out.detach().clone()
            out.register_hook(lambda g: grads.__setitem__(name, g.detach().clone()))

        return hook

    handles = [m.register_forward_hook(keep(name)) for name, m in net.named_children()]
    if record:
        with gc.render.recording(arrays=arrays):  # (arrays: kept whole, to compare them whole)
            loss = net(x).pow(2).mean()
    else:
        loss = net(x).pow(2).mean()
    for h in handles:
        h.remove()
    loss.backward()
    return loss, outputs, grads


def test_a_recorded_forward_drawn_after_backward_has_every_value_box_and_gradient():
    torch = need("torch")
    net = mlp(torch)
    x = torch.randn(5, 6)
    loss, outputs, grads = recorded_forward(torch, net, x, record=True, arrays=True)
    g = gc.render.graph(loss, arrays=True).model
    ops = [n for n in g.nodes if n.kind == "op"]
    assert [n.op for n in ops] == ["t", "addmm", "relu", "t", "addmm", "pow", "mean"]
    expected = [net[0].weight.T, outputs["0"], outputs["1"], net[2].weight.T, outputs["2"], outputs["2"] ** 2, loss]
    for node, tensor in zip(ops, expected):
        assert np.array_equal(whole(node.value), tensor.detach().numpy()), node.label
    for node, name in ((ops[1], "0"), (ops[2], "1"), (ops[4], "2")):  # what flowed into each module's output
        assert np.array_equal(whole(node.grad), grads[name].numpy()), node.label
    assert float(whole(ops[-1].grad)) == 1.0
    for name, parameter in net.named_parameters():
        leaf = next(n for n in g.nodes if n.name == f"net.{name}")
        assert np.array_equal(whole(leaf.grad), parameter.grad.numpy()), name
    boxes = {c["id"]: c for c in g.clusters}
    assert [(c["path"], c.get("class")) for c in g.clusters] == [
        ("net", "Sequential"), ("net.0", "Linear"), ("net.1", "ReLU"), ("net.2", "Linear")]  # fmt: skip
    assert [boxes[n.cluster]["path"] for n in ops[:5]] == ["net.0", "net.0", "net.1", "net.2", "net.2"]
    assert any("what the recording kept" in note for note in g.notes)
    assert not any("not kept" in note for note in g.notes)
    rows = {r["path"]: r for r in module_rows(g)}  # the health table after backward too
    assert rows["net.1"]["grad_norm"] == pytest.approx(norm(grads["1"]), rel=1e-12)


def test_without_a_recording_the_picture_says_what_it_lacks_and_how_to_get_it():
    torch = need("torch")
    net = mlp(torch)
    loss, _, _ = recorded_forward(torch, net, torch.randn(5, 6), record=False)
    view = gc.render.graph(loss)
    ops = [n for n in view.nodes if n.kind == "op"]
    assert sum(n.value is None for n in ops) == 6 and len(ops) == 7 and not view.model.clusters
    note = (
        "values of 6 of 7 operations, the operations' gradients and the nn.Module boxes were not kept: "
        "wrap the forward in `with gc.render.recording():`"
    )
    assert note in view.model.notes
    assert f"({note})" in view.tree() and f"# {note}" in view.text()


def summed(net):
    return lambda x: net(x).sum()


def test_an_attention_masks_minus_inf_inside_its_box_is_no_alarm():
    """A causal mask writes -inf into the scores inside the attention box; softmax turns it into 0, so
    every value the box gives out and every gradient is finite: the box is not flagged (it was, and so
    was every GPT-2 block around it). A NaN gradient in the same box still is."""
    torch = need("torch")

    class Attention(torch.nn.Module):
        def __init__(self, spoil=False):
            super().__init__()
            self.q = torch.nn.Linear(4, 4)
            self.spoil = spoil

        def forward(self, x):
            scores = self.q(x) @ x.T
            mask = torch.triu(torch.ones(3, 3, dtype=torch.bool), 1)
            out = scores.masked_fill(mask, float("-inf")).softmax(-1) @ x
            return out * torch.where(x > 0, x.sqrt(), 1.0) if self.spoil else out

    torch.manual_seed(0)
    x = torch.randn(3, 4)
    for spoil in (False, True):
        net = torch.nn.Sequential(Attention(spoil), torch.nn.Linear(4, 1))
        g = gc.render.graph(summed(net), x).model
        rows = {r["path"]: r["nonfinite"] for r in module_rows(g)}
        masked = [n for n in g.nodes if "masked_fill" in (n.op or "")]
        assert [node_health(n)["nonfinite"] for n in masked] == [3]  # (the node itself holds the -inf)
        assert (rows["net.0"] == 0) is not spoil and rows["net.1"] == 0
