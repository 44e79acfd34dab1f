"""gradcli graph: the seeds' graphs as text, tree, JSON, DOT and pictures."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app
from gradcli.render import graph, recording

runner = CliRunner()
SEED_002 = "a = x + w; b = w + 1; y = a * b"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def run(*args: str):
    result = runner.invoke(app, expression_after_dashes(list(args)))
    assert "Traceback" not in result.stdout + result.stderr
    return result


def graph_json(*args: str) -> dict:
    result = run("graph", *args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_seed_002_as_text_lines():
    assert run("graph", SEED_002, "--at", "x=2,w=1", "--format", "text").stdout == (
        "x = variable  # value=2  grad=2\n"
        "w = variable  # value=1  grad=5 (2 + 3)\n"
        "a = add(x, w)  # AddBackward0  value=3  grad=2\n"
        "b = add(w, 1)  # AddBackward0  value=2  grad=3\n"
        "y = mul(a, b)  # MulBackward0  value=6  grad=1  saved values freed  output\n"
    )


def test_seed_002_as_a_tree_marks_the_shared_node_and_the_edges_derivatives():
    assert run("graph", SEED_002, "--at", "x=2,w=1").stdout == (
        "y = a * b  [MulBackward0]  value 6  grad 1  saved values freed\n"
        "├── a = x + w  [AddBackward0]  value 3  grad 2   · ∂y/∂a = b = 2\n"
        "│   ├── x  (variable)  value 2  grad 2   · ∂a/∂x = 1\n"
        "│   └── w  (variable)  value 1  grad 5 = 2 + 3   · ∂a/∂w = 1\n"
        "└── b = w + 1  [AddBackward0]  value 2  grad 3   · ∂y/∂b = a = 3\n"
        "    ├── w  (shown above)   · ∂b/∂w = 1\n"
        "    └── 1  (constant)\n"
    )


def test_seed_002_json_has_spec_keys_values_gradients_and_local_derivatives():
    doc = graph_json(SEED_002, "--at", "x=2,w=1")
    assert [n["label"] for n in doc["nodes"]] == ["x", "w", "a = x + w", "1", "b = w + 1", "y = a * b"]
    nodes = {n["label"].split(" = ")[-1]: n for n in doc["nodes"]}  # by expression
    assert [n["id"] for n in doc["nodes"]] == ["n0", "n1", "n2", "n3", "n4", "n5"]
    for node in doc["nodes"]:
        assert {"id", "op", "label", "grad_fn", "is_leaf", "value", "grad"} <= set(node)
    assert (nodes["x"]["is_leaf"], nodes["x"]["grad_fn"], nodes["x"]["value"], nodes["x"]["grad"]) == (
        True,
        None,
        2.0,
        2.0,
    )
    assert nodes["w"]["grad"] == 5.0 and nodes["w"]["grad_parts"] == [2.0, 3.0]
    assert (nodes["x + w"]["name"], nodes["x + w"]["grad_fn"], nodes["x + w"]["value"]) == ("a", "AddBackward0", 3.0)
    assert (nodes["a * b"]["name"], nodes["a * b"]["grad_fn"], nodes["a * b"]["output"]) == ("y", "MulBackward0", True)
    assert nodes["1"]["op"] == "constant" and nodes["1"]["is_leaf"]
    assert nodes["a * b"]["freed"] and not nodes["x + w"]["freed"]  # add saves nothing to free
    by_id = {n["id"]: n["label"].split(" = ")[-1] for n in doc["nodes"]}
    edges = {(by_id[e["source"]], by_id[e["target"]]): e for e in doc["edges"]}
    assert edges[("x + w", "a * b")]["local_grad"] == 2.0 and edges[("x + w", "a * b")]["formula"] == "b"
    assert edges[("w + 1", "a * b")]["local_grad"] == 3.0
    assert edges[("w", "x + w")]["local_grad"] == 1.0
    assert edges[("1", "w + 1")]["local_grad"] is None  # no derivative with respect to a constant
    assert len(doc["edges"]) == 6 and doc["outputs"] == ["n5"]


def test_seed_001_network_local_derivatives_and_paths_through_a():
    program = "b = w1 * a; c = w2 * a; d = w3 * b + w4 * c; L = 10 - d"
    doc = graph_json(program, "--at", "a=2,w1=3,w2=5,w3=7,w4=11")
    nodes = {n["name"] or n["label"]: n for n in doc["nodes"]}
    assert nodes["a"]["grad"] == -(7 * 3 + 11 * 5) and nodes["a"]["grad_parts"] == [-21.0, -55.0]
    assert nodes["L"]["grad_fn"] == "RsubBackward1" and nodes["d"]["grad"] == -1.0
    by_id = {n["id"]: n["name"] or n["label"] for n in doc["nodes"]}
    edges = {(by_id[e["source"]], by_id[e["target"]]): e["local_grad"] for e in doc["edges"]}
    assert edges[("a", "b")] == 3.0 and edges[("w1", "b")] == 2.0 and edges[("d", "L")] == -1.0


def test_seed_000_mm_graph_names_mm_and_shapes():
    doc = graph_json("x @ y", "--at", "x=[[1,2]],y=[[3,4],[5,6]]", "--seed", "[[1,0]]")
    op = next(n for n in doc["nodes"] if n["kind"] == "op")
    assert op["grad_fn"] == "MmBackward0" and op["shape"] == [1, 2]
    assert next(n for n in doc["nodes"] if n["name"] == "x")["grad"] == [[3.0, 5.0]]


def test_structure_without_a_point():
    doc = graph_json("(x + w) * (w + 1)")
    assert all(n["value"] is None for n in doc["nodes"] if n["kind"] != "constant")
    assert all(n["grad"] is None for n in doc["nodes"])
    assert [n["grad_fn"] for n in doc["nodes"] if n["kind"] == "op"] == ["AddBackward0", "AddBackward0", "MulBackward0"]


def test_unnamed_output_is_f_and_subexpressions_go_by_their_ids():
    # issue 17: an unnamed intermediate is referred to by its id, shown beside its expression
    text = run("graph", "sin(x) * x", "--at", "x=0").stdout
    assert text.splitlines()[0].startswith("f = sin(x) * x  [MulBackward0]")
    assert "n1 = sin(x)  [SinBackward0]" in text
    assert "∂f/∂n1 = x = 0" in text and "∂n1/∂x = cos(x) = 1" in text


def test_highlight_marks_the_paths_to_a_leaf():
    doc = graph_json(SEED_002, "--at", "x=2,w=1", "--highlight", "w")
    lit = {n["name"] or n["label"] for n in doc["nodes"] if n["highlighted"]}
    assert lit == {"w", "a", "b", "y"}
    assert sum(e["highlighted"] for e in doc["edges"]) == 4  # w->a, w->b, a->y, b->y
    result = run("graph", SEED_002, "--highlight", "q")
    assert result.exit_code == 2 and "no variable 'q' in the graph (variables: x, w)" in result.stderr


def test_large_graph_is_cut_with_a_summary():
    expression = "+".join(["x * 2"] * 20_000)
    doc = graph_json(expression, "--at", "x=1", "--max-nodes", "50")
    # 20,000 products, 19,999 sums, x and the 20,000 constants 2: over 50, the repeats are collapsed first
    # (issue 17: summarised, not truncated), x, the first and the last sum shown as themselves
    assert [(n["label"], n.get("count")) for n in doc["nodes"] if n["kind"] == "group"] == [
        ("x * k", 20_000), ("add chain", 19_997)]  # fmt: skip
    assert doc["hidden"] == 60_000 - 3 and len(doc["nodes"]) == 3 + 2 + 1  # 2 groups and the summary
    assert doc["hidden_kinds"] == {"MulBackward0": 20_000, "constant": 20_000, "AddBackward0": 19_997}
    assert "59,997 nodes in 2 groups of repeated structure drawn as one node each" in doc["notes"][0]
    dot_text = run("graph", expression, "--at", "x=1", "--format", "dot").stdout
    assert len(dot_text) < 200_000 and "x * k ×20,000" in dot_text


def test_python_function_graph_changes_with_the_input():
    small = run("graph", f"{EXAMPLES / 'cli' / 'seed004_f.py'}:f", "--at", "a=0.5946", "--format", "text").stdout
    negative = run("graph", f"{EXAMPLES / 'cli' / 'seed004_f.py'}:f", "--at", "a=-300", "--format", "text").stdout
    assert small.count("MulBackward0") == 11  # a*2, then doubled ten times to pass 1000
    assert negative.count("MulBackward0") == 3 and "mul(n4, 100)" in negative  # the else branch


def test_library_graph_with_and_without_a_trace():
    x = gc.tensor(2.0, requires_grad=True, name="x")
    with recording() as trace:
        a = x * x
        y = a + a
    view = graph(y, trace=trace)
    assert view.text() == (
        "x = variable  # value=2  grad=8 (4 + 4)\nn1 = mul(x, x)  # MulBackward0  value=4  grad=2 (1 + 1)\n"
        "f = add(n1, n1)  # AddBackward0  value=8  grad=1  output\n"
    )
    bare = gc.render.graph(gc.exp(x) * 3)  # no trace: structure, saved values where kept, gradients
    assert [(n.name, n.label) for n in bare.nodes] == [("x", "x"), (None, "exp(x)"), ("f", "n1 * const")]
    assert bare.nodes[1].value == pytest.approx(7.38905609893065)  # exp keeps its output
    assert bare.nodes[0].grad == pytest.approx(3 * 7.38905609893065)


def test_custom_function_appears_under_its_class_name():
    class Square(gc.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t * t

        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            return 2 * t * g

    x = gc.tensor(3.0, requires_grad=True, name="x")
    with recording() as trace:
        y = Square.apply(x) + 1
    nodes = graph(y, trace=trace).nodes
    assert [n.grad_fn for n in nodes if n.kind == "op"] == ["SquareBackward", "AddBackward0"]
    assert next(n for n in nodes if n.name == "x").grad == 6.0


@needs_dot
@pytest.mark.parametrize("ext", ["png", "svg", "pdf"])
def test_pictures_are_real_images(tmp_path, ext):
    path = tmp_path / f"g.{ext}"
    result = run("graph", SEED_002, "--at", "x=2,w=1", "-o", str(path))
    assert result.exit_code == 0 and f"wrote {path}" in result.stderr
    data = path.read_bytes()
    if ext == "png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", data[16:24])
        assert 300 < width < 3000 and 100 < height < 2000
    elif ext == "svg":
        assert b"<svg" in data and b"y = a * b" in data and b"MulBackward0" in data
    else:
        assert data[:5] == b"%PDF-"


def test_dot_text_has_the_labels_and_edge_derivatives():
    text = run("graph", SEED_002, "--at", "x=2,w=1", "--format", "dot").stdout
    assert text.startswith("digraph gradcli {")
    for piece in (
        "<b>y = a * b</b>",
        "MulBackward0",
        "∂y/∂a = b = 2",
        "grad 5 = 2 + 3",
        "variable (leaf)",
        "saved values freed",
    ):
        assert piece in text, piece


def test_missing_dot_is_exit_3_with_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # gradcli runs dot itself (with a time limit): none on PATH
    result = run("graph", "x^2", "--at", "x=1", "-o", str(tmp_path / "g.png"))
    assert result.exit_code == 3
    assert "apt-get install graphviz" in result.stderr and "--format dot" in result.stderr
    assert run("graph", "x^2", "--at", "x=1", "--format", "dot").exit_code == 0


def test_bad_output_paths_and_formats():
    result = run("graph", "x^2", "--at", "x=1", "-o", "/no/such/dir/g.png")
    assert result.exit_code == 2 and "cannot write /no/such/dir/g.png" in result.stderr
    result = run("graph", "x^2", "-o", "g.xyz")
    assert result.exit_code == 2 and "cannot tell the format from '.xyz'" in result.stderr
    result = run("graph", "x^2", "--format", "png")  # stdout is not a terminal here: the PNG goes to it (issue 16)
    assert result.exit_code == 0 and result.stdout_bytes.startswith(b"\x89PNG\r\n\x1a\n")
    assert run("graph", "x^2", "--format", "gif").exit_code == 2


def test_graph_help_has_an_example():
    assert "Example: gradcli graph" in run("graph", "--help").stdout
