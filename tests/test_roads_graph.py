"""Drawing a graph after backward() (issue 12): it works and shows the gradients backward left."""

from __future__ import annotations

import numpy as np
import pytest

import gradcli as gc
from gradcli.render import graph, recording


def _leaf_grads(view):
    return {n.name: np.asarray(n.grad).tolist() for n in view.nodes if n.kind == "variable"}


def test_graph_after_backward_shows_the_leaf_gradients():
    x = gc.tensor(2.0, requires_grad=True, name="x")
    w = gc.tensor([1.0, 3.0], requires_grad=True, name="w")
    y = gc.sum((x + 1) * x * w)
    y.backward()
    view = graph(y)  # raised "Trying to backward through the graph a second time"
    # d/dx sum((x+1) x w) = (2x + 1) sum(w) = 20; d/dw = (x+1) x = 6
    assert _leaf_grads(view) == {"x": 20.0, "w": [6.0, 6.0]}
    assert any("backward() has already run" in note for note in view.model.notes)
    assert [n.freed for n in view.nodes if n.grad_fn == "MulBackward0"] == [True, True]
    for text in (view.text(), view.tree(), view.dot()):
        assert "20" in text
    doc = view.json()
    assert {n["name"]: n["grad"] for n in doc["nodes"] if n["kind"] == "variable"} == {"x": 20.0, "w": [6.0, 6.0]}


def test_graph_after_backward_with_a_trace_and_retain_grad():
    x = gc.tensor(0.5, requires_grad=True, name="x")
    with recording() as trace:
        a = x * x
        a.retain_grad()
        y = gc.sin(a)
    y.backward()
    view = graph(y, trace=trace)
    by_kind = {n.grad_fn or n.name: n for n in view.nodes}
    assert by_kind["x"].grad == pytest.approx(np.cos(0.25) * 2 * 0.5, rel=1e-15)
    assert by_kind["MulBackward0"].grad == pytest.approx(np.cos(0.25), rel=1e-15)
    assert by_kind["MulBackward0"].value == 0.25 and by_kind["SinBackward0"].value == pytest.approx(np.sin(0.25))


def test_graph_after_backward_matches_torch():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    tx = torch.tensor([0.3, -1.2], dtype=torch.float64, requires_grad=True)
    tw = torch.tensor(1.7, dtype=torch.float64, requires_grad=True)
    (torch.exp(tx * tw).sum() * tw).backward()
    x = gc.tensor([0.3, -1.2], requires_grad=True, name="x")
    w = gc.tensor(1.7, requires_grad=True, name="w")
    y = gc.sum(gc.exp(x * w)) * w
    y.backward()
    grads = _leaf_grads(graph(y))
    np.testing.assert_allclose(grads["x"], tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(grads["w"], tw.grad.item(), rtol=1e-12)


def test_graph_before_backward_still_computes_its_own_gradients():
    x = gc.tensor(2.0, requires_grad=True, name="x")
    with recording() as trace:
        y = (x + 1) * x
    view = graph(y, trace=trace)
    assert _leaf_grads(view) == {"x": 5.0}
    assert x.grad is None  # drawing does not accumulate into .grad
    assert not view.model.notes


def test_json_label_of_an_assigned_node_starts_with_its_name():
    import json

    from typer.testing import CliRunner

    from gradcli.cli.app import app

    result = CliRunner().invoke(app, ["graph", "a = x + w; a * w", "--at", "x=2,w=1", "--format", "json"])
    assert result.exit_code == 0, result.stderr
    nodes = json.loads(result.stdout)["nodes"]
    a = next(n for n in nodes if n["name"] == "a")
    assert a["label"] == "a = x + w" and a["label"].startswith("a")
    assert [n["label"] for n in nodes] == ["x", "w", "a = x + w", "a * w"]  # f: not the program's name
    # the structure alone (no --at) labels the same way
    result = CliRunner().invoke(app, ["graph", "a = x + w; a * w", "--format", "json"])
    assert [n["label"] for n in json.loads(result.stdout)["nodes"]] == ["x", "w", "a = x + w", "a * w"]
    result = CliRunner().invoke(app, ["graph", "a = x + w; y = a * w", "--at", "x=2,w=1", "--format", "json"])
    assert [n["label"] for n in json.loads(result.stdout)["nodes"]] == ["x", "w", "a = x + w", "y = a * w"]
