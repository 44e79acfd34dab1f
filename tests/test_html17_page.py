"""The graph's interactive page (issue 17): one self-contained HTML file, and the notebook object.

What the page does in a browser is tested in test_html17_browser.py; here: what is written.
"""

from __future__ import annotations

import html
import json
import random
import re
import shutil
from importlib import resources

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app
from gradcli.render import graph, recording
from gradcli.render.page import model_json
from gradcli.render.summary import summarised

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
runner = CliRunner()
SEED_002 = "a = x + w; b = w + 1; y = a * b"


def run(*args: str):
    result = runner.invoke(app, expression_after_dashes(list(args)))
    assert "Traceback" not in result.stdout + result.stderr
    return result


def embedded_model(page: str) -> dict:
    found = re.search(r'<script type="application/json" id="gradcli-model">(.*?)</script>', page, re.S)
    assert found is not None
    return json.loads(found.group(1))


def test_the_script_and_style_are_package_data():
    folder = resources.files("gradcli.render")
    assert "gradcliPage" in folder.joinpath("page.js").read_text(encoding="utf-8")
    assert "g.node" in folder.joinpath("page.css").read_text(encoding="utf-8")


@needs_dot
def test_cli_writes_one_self_contained_page(tmp_path):
    out = tmp_path / "graph.html"
    result = run("graph", SEED_002, "--at", "x=2,w=1", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert result.stderr == f"wrote {out} (6 nodes)\n"
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<title>gradcli graph: y = a * b</title>" in page
    # nothing fetched: no external script, style, image or font; the only URLs are SVG's namespaces
    assert not re.search(r"<(link|img|iframe)\b|\bsrc\s*=|@import|url\(", page)
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) <= {
        "http://www.w3.org/2000/svg",
        "http://www.w3.org/1999/xlink",
    }
    assert page.count("<svg") == 1 and "<?xml" not in page and "<!DOCTYPE svg" not in page
    assert page.count("<script") == 2  # the model (JSON) and the page's script, both inline


@needs_dot
def test_the_embedded_model_is_the_json_view_with_texts(tmp_path):
    out = tmp_path / "g.htm"
    assert run("graph", SEED_002, "--at", "x=2,w=1", "-o", str(out)).exit_code == 0
    model = embedded_model(out.read_text(encoding="utf-8"))
    cli = json.loads(run("graph", SEED_002, "--at", "x=2,w=1", "--json").stdout)
    for mine, theirs in zip(model["nodes"], cli["nodes"], strict=True):
        for key in ("id", "op", "label", "grad_fn", "value", "grad", "shape", "saves", "freed", "output"):
            assert mine[key] == theirs[key], (mine["id"], key)
    w = next(n for n in model["nodes"] if n["name"] == "w")
    assert (w["value_text"], w["grad_text"], w["grad_label"], w["grad_parts"]) == ("1", "5", "5 = 2 + 3", [2.0, 3.0])
    by_pair = {(e["source"], e["target"]): e for e in model["edges"]}
    a, y = (next(n["id"] for n in model["nodes"] if n["name"] == name) for name in ("a", "y"))
    assert by_pair[(a, y)]["partial"] == "∂y/∂a = b = 2" and by_pair[(a, y)]["part_text"] == "2"
    assert model["groups"] == [] and model["has_point"] is True


@needs_dot
def test_format_html_names_the_format_and_needs_a_file(tmp_path):
    out = tmp_path / "graph.out"
    assert run("graph", "x * 2", "--at", "x=3", "--format", "html", "-o", str(out)).exit_code == 0
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    result = run("graph", "x * 2", "--at", "x=3", "--format", "html")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "error: --format html needs -o FILE (a page is not text)\n"


def test_a_graph_over_the_page_limit_becomes_its_summary():
    x = gc.tensor(0.5, requires_grad=True, name="x")
    with recording() as trace:
        y = x
        for k in range(300):
            y = gc.sin(y) * (k + 1)  # 300 x (sin, mul, constant): 901 nodes
    view = graph(y, trace=trace, max_nodes=5000)
    assert len(view.nodes) == 901
    small = summarised(view.model, 50)
    assert len(small.nodes) == 51 and small.nodes[-1].id == "hidden" and small.outputs == view.model.outputs
    assert small.hidden == 851 == sum(small.hidden_kinds.values())
    assert small.hidden_kinds == {"constant": 284, "SinBackward0": 283, "MulBackward0": 283, "variable": 1}
    assert small.notes[0] == (
        "851 more nodes not shown (the page shows 50): constant x284, SinBackward0 x283, MulBackward0 x283, variable x1"
    )
    kept = {n.id for n in small.nodes}
    assert all(e.source in kept and e.target in kept for e in small.edges)
    cut = [small.node(e.target) for e in small.edges if e.source == "hidden"]  # where the cut is
    assert [(n.op, n.id) for n in cut] == [("mul", "n852"), ("sin", "n850")] and small.nodes[0].id == "n850"
    assert summarised(view.model, 901) is view.model


def test_the_model_json_has_no_nan_and_gives_big_arrays_as_statistics():
    x = gc.tensor([1.0] * 100, requires_grad=True, name="x")
    with recording() as trace, np.errstate(all="ignore"):
        y = (gc.log(x - 1) * 0).sum()  # -inf * 0: nan in the values
    data = model_json(graph(y, trace=trace).model)
    json.dumps(data, allow_nan=False)
    x_entry = data["nodes"][0]
    # (issue 35: a value over 64 elements is its statistics, in the JSON and as text; was None and "[100 values, mean 1]")
    assert x_entry["value"] == {"shape": [100], "dtype": "float64", "mean": 1.0, "std": 0.0, "min": 1.0, "max": 1.0,
                                "norm": 10.0, "zeros": 0.0, "nonfinite": 0, "nan": 0, "inf": 0}  # fmt: skip
    assert x_entry["value_text"] == "[(100,) float64: mean 1, std 0, min 1, max 1, norm 10]"
    log = next(e for e in data["nodes"] if e["op"] == "log")  # -inf everywhere: counted, and NumPy's own mean
    assert log["value"]["inf"] == 100 and log["value"]["nonfinite"] == 100 and log["value"]["mean"] == "-inf"
    assert data["nodes"][-1]["value_text"] == "nan" and data["nodes"][-1]["value"] == "nan"


@needs_dot
def test_the_notebook_object_after_backward(tmp_path):
    x = gc.tensor(2.0, requires_grad=True, name="x")
    w = gc.tensor(1.0, requires_grad=True, name="w")
    y = (x + w) * (w + 1)
    y.backward()  # frees the graph; the view shows what backward left
    view = gc.render.graph(y)
    frame = view._repr_html_()
    assert frame.startswith('<iframe srcdoc="&lt;!DOCTYPE html&gt;') and 'sandbox="allow-scripts"' in frame
    inner = html.unescape(re.search(r'srcdoc="([^"]*)"', frame).group(1))
    assert inner == view.html()
    model = embedded_model(inner)
    assert [(n["name"], n["grad"], n["freed"]) for n in model["nodes"] if n["kind"] == "variable"] == [
        ("x", 2.0, False),
        ("w", 5.0, False),
    ]
    assert "backward() has already run" in model["notes"][0]
    assert view._repr_svg_().lstrip().startswith("<?xml")
    for name in ("g.html", "g.svg", "g.png"):
        path = view.save(tmp_path / name)
        assert path.stat().st_size > 1000
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "g.html").read_text(encoding="utf-8") == view.html()


def test_repr_html_is_none_without_graphviz(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    x = gc.tensor(2.0, requires_grad=True, name="x")
    assert gc.render.graph(x * x)._repr_html_() is None


@needs_dot
def test_cli_page_of_a_large_graph_is_its_summary(tmp_path, monkeypatch):
    monkeypatch.setattr("gradcli.render.page.PAGE_MAX_NODES", 40)  # stands for 600: the same cut, drawn faster
    # steps of random shapes (nothing repeats to draw as a group): --max-nodes not given, 200 of them
    # (issue 27: given, the page draws every node it leaves)
    rng = random.Random(0)
    forms = ["h{i}*{v}", "sin(h{i})+{v}", "h{i}-{v}", "exp(h{i}*0.1)*{v}", "h{i}/(1+{v}*{v})", "cos(h{i})*{v}"]
    steps = [f"h{i + 1} = " + rng.choice(forms).format(i=i, v=rng.choice("xyz")) for i in range(100)]
    out = tmp_path / "big.html"
    result = run("graph", "; ".join(["h0 = x", *steps]), "--at", "x=0.5,y=0.3,z=0.2", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    model = embedded_model(out.read_text(encoding="utf-8"))
    assert len(model["nodes"]) == 41 and model["nodes"][-1]["id"] == "hidden"
    HIDDEN = 173  # 213 nodes: the default --max-nodes left 21 out and 192 in, the page 40 of those
    assert model["hidden"] == HIDDEN and sum(model["hidden_kinds"].values()) == HIDDEN
    assert model["notes"][0].startswith(f"{HIDDEN} more nodes not shown (the page shows 40): ")
    assert out.read_text(encoding="utf-8").count('class="node"') == 41
