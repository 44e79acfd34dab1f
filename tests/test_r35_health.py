"""Gradient health at a glance (issue 35): each node's and each module box's gradient norm, value norm,
their ratio, zeros and NaN/inf, equal to NumPy's on torch's own tensors; ``--color-by`` colours the
picture by them, NaN and infinities always red; ``with gc.render.recording():`` around a torch forward
keeps what a picture drawn after ``backward()`` needs."""

from __future__ import annotations

import numpy as np
import pytest

import gradcli as gc
from gradcli.render.health import module_rows, node_health, ordered
from gradcli.stats import TensorStats
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
