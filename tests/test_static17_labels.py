"""Issue 17, short edge labels: local derivatives in terms of node names (``∂f/∂n4 = f*(1-f)``),
never a repeated sub-expression; an unnamed intermediate goes by its id in every view; ``--compact``
keeps names and values and drops formulas."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app
from gradcli.render.page import model_json

runner = CliRunner()
NEURON = "sigmoid(w * x + b)"
AT = "w=2,x=1,b=0.5"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def run(*args: str):
    result = runner.invoke(app, expression_after_dashes(list(args)))
    assert "Traceback" not in result.stdout + result.stderr
    return result


def test_a_neurons_edges_name_the_nodes_instead_of_repeating_them():
    tree = run("graph", NEURON, "--at", AT).stdout
    assert "∂f/∂n4 = f*(1-f) = 0.0701037" in tree  # was ∂sigmoid(w * x + b)/∂(w * x + b) = sigmoid(w * x + b)*(1-...)
    assert "n4 = w * x + b  [AddBackward0]" in tree and "n2 = w * x  [MulBackward0]" in tree
    assert "∂n4/∂n2 = 1" in tree and "∂n2/∂w = x = 1" in tree and "∂n2/∂x = w = 2" in tree
    for line in tree.splitlines():
        if "·" in line:
            assert "w * x" not in line.split("·", 1)[1]  # no sub-expression in a derivative


def test_the_short_name_is_the_same_in_every_view():
    doc = json.loads(run("graph", NEURON, "--at", AT, "--json").stdout)
    refs = {n["ref"]: n for n in doc["nodes"]}
    assert refs["n4"]["label"] == "w * x + b" and refs["n2"]["label"] == "w * x" and refs["f"]["output"]
    text = run("graph", NEURON, "--at", AT, "--format", "text").stdout
    assert "n4 = add(n2, b)" in text and "f = sigmoid(n4)" in text
    dot_text = run("graph", NEURON, "--at", AT, "--format", "dot").stdout
    assert "<b>n4 = w * x + b</b>" in dot_text and "∂f/∂n4 = f*(1-f) = 0.0701037" in dot_text
    edges = [e for e in doc["edges"] if e["target"] == "n5"]
    assert [e["formula"] for e in edges] == ["f*(1-f)"]


def test_the_page_panel_uses_the_same_names():
    import gradcli as gc
    from gradcli.render import graph, recording

    w, x, b = (gc.tensor(v, requires_grad=True, name=n) for v, n in ((2.0, "w"), (1.0, "x"), (0.5, "b")))
    with recording() as trace:
        y = gc.sigmoid(w * x + b)
    data = model_json(graph(y, trace=trace).model)
    titles = {n["id"]: n["title"] for n in data["nodes"]}
    assert titles["n2"] == "n2 = w * x" and titles["n4"] == "n4 = n2 + b" and titles["n5"] == "f = sigmoid(n4)"
    partials = [e["partial"] for e in data["edges"] if e["partial"]]
    assert "∂f/∂n4 = f*(1-f) = 0.0701037" in partials


def test_compact_keeps_names_and_values_and_drops_formulas():
    tree = run("graph", NEURON, "--at", AT, "--compact", "--digits", "6").stdout
    assert tree.splitlines()[0].startswith("f  [SigmoidBackward0]  value 0.924142  grad 1")
    assert "∂f/∂n4 = 0.0701037" in tree and "f*(1-f)" not in tree and "w * x" not in tree
    assert "x  (variable)  value 1  grad 0.140207   · ∂n2/∂x = 2" in tree
    shared = run("graph", "x*y + x*3", "--at", "x=2,y=5", "--compact").stdout
    assert "grad 8  " in shared and "= 5 + 3" not in shared  # the parts are a formula too


def test_rankdir_must_be_tb_or_lr():
    result = run("graph", NEURON, "--rankdir", "up")
    assert result.exit_code == 2
    assert result.stderr == "error: --rankdir must be TB (top to bottom) or LR (left to right), not 'up'\n"


@needs_dot
@pytest.mark.parametrize("direction", ["TB", "LR", "lr"])
def test_rankdir_is_passed_to_graphviz(direction):
    dot_text = run("graph", NEURON, "--at", AT, "--format", "dot", "--rankdir", direction).stdout
    assert f"rankdir={direction.upper()}" in dot_text
