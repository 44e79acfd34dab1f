"""Statements and Python calls drawn as clusters (issue 17): in the model (JSON), the DOT and the page."""

from __future__ import annotations

import json
import re
import shutil
import textwrap

import pytest
from typer.testing import CliRunner

from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app

runner = CliRunner()
MLP = "h = tanh(w1 * x + b1); o = tanh(w2 * h + b2) * 2; o"
AT = "x=0.5,w1=2,b1=0.1,w2=-1,b2=0.3"


def cli(*args: str) -> str:
    result = runner.invoke(app, expression_after_dashes(list(args)))
    assert result.exit_code == 0, result.stderr
    return result.stdout


def model(*args: str) -> dict:
    return json.loads(cli("graph", *args, "--format", "json"))


def test_each_statement_is_a_cluster_of_the_nodes_it_computed():
    doc = model(MLP, "--at", AT)
    assert doc["clusters"] == [
        {"id": "c0", "label": "h = tanh(w1 * x + b1)", "parent": None},
        {"id": "c1", "label": "o = tanh(w2 * h + b2) * 2", "parent": None},
    ]
    where = {n["label"]: n.get("cluster") for n in doc["nodes"]}
    assert where == {
        "x": None, "w1": None, "b1": None, "w2": None, "b2": None,  # the leaves belong to no statement
        "w1 * x": "c0", "w1 * x + b1": "c0", "h = tanh(w1 * x + b1)": "c0", "w2 * h": "c1", "w2 * h + b2": "c1",
        "tanh(w2 * h + b2)": "c1", "2": "c1", "o = tanh(w2 * h + b2) * 2": "c1",  # a constant with its operation
    }  # fmt: skip


def test_a_single_expression_has_no_clusters():
    doc = model("tanh(w * x + b)", "--at", "x=1,w=2,b=3")
    assert "clusters" not in doc and all("cluster" not in n for n in doc["nodes"])


def test_the_picture_draws_each_statement_as_a_labelled_box():
    source = cli("graph", MLP, "--at", AT, "--format", "dot")
    boxes = re.findall(r"subgraph (cluster_\w+) \{\s*(?:[^\n]*?)label=<<font color=\"#6a7fa8\">([^<]*)</font>>", source)
    assert boxes == [("cluster_c0", "h = tanh(w1 * x + b1)"), ("cluster_c1", "o = tanh(w2 * h + b2) * 2")]
    inside = source[source.index("subgraph cluster_c0") : source.index("subgraph cluster_c1")]
    assert re.findall(r"^\t\t(n\d+) \[", inside, re.M) == ["n2", "n4", "n5"]


def test_python_calls_nest_as_clusters(tmp_path):
    path = tmp_path / "net.py"
    path.write_text(
        textwrap.dedent(
            """
            import gradcli as gc

            def layer(w, x, b):
                return gc.tanh(w * x + b)

            def net(x, w1, b1, w2, b2):
                h = layer(w1, x, b1)
                return layer(w2, h, b2) * 2
            """
        )
    )
    doc = model(f"{path}:net", "--at", AT)
    labels = {c["id"]: (c["label"], c["parent"]) for c in doc["clusters"]}
    outer = next(k for k, (label, _) in labels.items() if label == "net.py:net")
    inner = sorted(k for k, (label, parent) in labels.items() if label == "net.py:layer" and parent == outer)
    assert labels[outer][1] is None and len(inner) == 2 and len(labels) == 3
    ops = [n for n in doc["nodes"] if n["kind"] == "op"]
    assert [n["cluster"] for n in ops] == [inner[0]] * 3 + [inner[1]] * 3 + [outer]  # mul add tanh, twice; * 2
    assert doc["nodes"][-1]["output"] and doc["nodes"][-1]["value"] == pytest.approx(2 * __import__("math").tanh(
        -__import__("math").tanh(2 * 0.5 + 0.1) + 0.3))  # fmt: skip


def test_a_long_statement_is_labelled_short():
    statement = "a = " + " + ".join(f"x * {k}" for k in range(1, 30))
    doc = model(f"{statement}; a * 2", "--at", "x=1")
    label = doc["clusters"][0]["label"]
    assert len(label) == 60 and label.startswith("a = x * 1 + x * 2") and label.endswith("…")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_the_page_has_a_box_per_statement_and_lists_them(tmp_path):
    out = tmp_path / "mlp.html"
    cli("graph", MLP, "--at", AT, "-o", str(out))
    page = out.read_text()
    assert page.count('class="cluster"') == 2 and "<title>cluster_c0</title>" in page
    data = json.loads(re.search(r'id="gradcli-model">(.*?)</script>', page, re.S).group(1))
    assert [c["label"] for c in data["clusters"]] == ["h = tanh(w1 * x + b1)", "o = tanh(w2 * h + b2) * 2"]
    assert data["clusters"][0]["members"] == ["n2", "n4", "n5"]
