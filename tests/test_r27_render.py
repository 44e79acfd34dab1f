"""Issue 27, smaller things a new user hit in the pictures:

- a graph over 100 nodes was drawn grouped even with ``--max-nodes 1000`` (501 nodes, 7 boxes), with
  no way to draw it whole, and its output's label named ids in no box (``f = n495 + n499``);
- ``gc.render.graph(y)`` after ``y.backward()`` showed no value on any operation, not even the
  output's, and named the leaves ``leaf0``, ``leaf1``;
- the terminal plot's last x tick wrapped at 100-150 columns, and the legend of ``plot "tan(x)"``
  sat on the f′ curve.
"""

from __future__ import annotations

import html
import json
import random
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app
from gradcli.render import graph, recording
from gradcli.render.summary import summarised
from gradcli.render.views import dot

sys.path.insert(0, str(Path(__file__).parent))
from terminal import gradcli_on_terminal  # noqa: E402

runner = CliRunner()
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def run(*args: str):
    result = runner.invoke(app, expression_after_dashes(list(args)))
    assert "Traceback" not in result.stdout + result.stderr
    return result


def terms(count: int) -> str:
    """``sin(x*1)*w + ... ``: 5 nodes a term (constant, mul, sin, mul, add) less one add, and x, w."""
    return " + ".join(f"sin(x*{k})*w" for k in range(1, count + 1))


def dot_nodes(source: str) -> dict[str, str]:
    """Each node statement of a DOT text: id -> the plain text of its label."""
    found = {}
    for m in re.finditer(r"^\t+(\w+) \[(?:label|xlabel)=<(.*)> ", source, re.M):
        found[m.group(1)] = html.unescape(re.sub(r"<[^>]+>", " ", m.group(2)))
    return found


def ids_named_but_not_drawn(source: str) -> list[tuple[str, str]]:
    """(where, id) for each node id (``n17``) a node's or an edge's label names that no node of the
    picture is."""
    nodes = dot_nodes(source)
    drawn = set(nodes) | set(re.findall(r"^\t+(\w+) \[", source, re.M))
    missing = [
        (where, ref) for where, text in nodes.items() for ref in re.findall(r"\bn\d+\b", text) if ref not in drawn
    ]
    for m in re.finditer(r"^\t+(\w+) -> (\w+) \[.*?label=\"([^\"]*)\"", source, re.M):
        missing += [
            (f"{m.group(1)}->{m.group(2)}", ref) for ref in re.findall(r"\bn\d+\b", m.group(3)) if ref not in drawn
        ]
    return missing


# --- 1. every node, when asked; labels that name what is drawn -------------------------------------------


@pytest.mark.parametrize("cap", ["1000", "501", "all", "0", "ALL"])
def test_max_nodes_covering_the_graph_draws_every_node_ungrouped(cap):
    result = run("graph", terms(100), "--at", "x=0.5,w=2", "--max-nodes", cap, "--format", "dot")
    assert result.exit_code == 0, result.stderr
    nodes = dot_nodes(result.stdout)
    assert len(nodes) == 501  # 100 x 4 + 99 adds + x, w: every one, none a group, no summary node
    assert "box3d" not in result.stdout and " ×" not in result.stdout and "hidden" not in nodes
    assert sum(text.split()[0] in ("x", "w") for text in nodes.values()) == 2
    assert ids_named_but_not_drawn(result.stdout) == []


def test_max_nodes_all_keeps_every_node_and_no_group_collapsed_in_json():
    doc = json.loads(run("graph", terms(100), "--at", "x=0.5,w=2", "--max-nodes", "all", "--json").stdout)
    assert len(doc["nodes"]) == 501 and doc["hidden"] == 0
    assert [(g["label"], g["count"], g["collapsed"]) for g in doc["groups"]] == [
        ("sin(x * k) * w", 100, False),
        ("add chain", 97, False),
    ]


@pytest.mark.parametrize("bad", ["-1", "x", "1.5", "", "1e3"])
def test_max_nodes_refuses_what_is_not_a_count(bad):
    result = run("graph", "x*2", "--at", "x=1", "--max-nodes", bad)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: invalid value for '--max-nodes': {bad!r} is not a count of nodes (N, or 0 or all: every node)\n"
    )


def test_help_says_how_to_draw_every_node():
    said = " ".join(run("graph", "--help").stdout.split())
    assert "--max-nodes N|all" in said and "or 0 or all: every node, none grouped" in said


def test_the_output_of_a_grouped_picture_names_the_groups_not_ids_inside_them():
    # 35 terms, 176 nodes: within the default 200, drawn with its repeats collapsed (over 100)
    result = run("graph", terms(35), "--at", "x=0.5,w=2", "--format", "dot")
    nodes = dot_nodes(result.stdout)
    assert len(nodes) == 6 and ids_named_but_not_drawn(result.stdout) == []
    assert nodes["n175"].split("  ")[0].strip() == "f = g1 + g0"  # was f = n170 + n174, both inside the groups
    whole = json.loads(run("graph", terms(35), "--at", "x=0.5,w=2", "--json").stdout)
    assert whole["nodes"][-1]["label"] == "n170 + n174"  # the model keeps its own label: all of it is there
    over = run("graph", terms(100), "--at", "x=0.5,w=2", "--max-nodes", "200", "--format", "dot")  # summarised
    nodes = dot_nodes(over.stdout)
    assert len(nodes) == 7 and sum("×" in text for text in nodes.values()) == 2  # x, w, 2 groups, n10, f, the note
    assert nodes["n500"].split("  ")[0].strip() == "f = g1 + g0" and ids_named_but_not_drawn(over.stdout) == []


def random_graph(ops: int, seed: int):
    """Random operations on recent results (nothing named but the leaves): labels made of ids."""
    rng = random.Random(seed)
    pool = [gc.tensor(0.1 * (k + 1), requires_grad=True, name=n) for k, n in enumerate("xyz")]
    with recording() as trace:
        for _ in range(ops):
            a, b = rng.choice(pool[-10:]), rng.choice(pool)
            kind = rng.randrange(4)
            pool.append(
                a * b if kind == 0 else a + b if kind == 1 else gc.sin(a) * 0.5 if kind == 2 else gc.tanh(a - b)
            )
        y = pool[-1] + pool[-2]
    return y, trace


@pytest.mark.parametrize("seed", range(4))
def test_labels_of_a_cut_or_collapsed_picture_name_only_drawn_nodes(seed):
    y, trace = random_graph(150, seed)
    view = graph(y, trace=trace)  # 200 of ~450 nodes, the picture collapsing what repeats
    before = [(n.id, n.label) for n in view.nodes]
    source = dot(view.model)
    assert len(dot_nodes(source)) <= 201
    assert ids_named_but_not_drawn(source) == []
    small = summarised(view.model, 40)  # the page's cut
    kept = {n.id for n in small.nodes}
    for node in small.nodes:
        assert set(re.findall(r"\bn\d+\b", node.label)) <= kept, node.label
    for edge in small.edges:
        assert edge.formula is None or set(re.findall(r"\bn\d+\b", edge.formula)) <= kept, edge.formula
    assert [(n.id, n.label) for n in view.nodes] == before  # drawing changed no label of the model


# --- 2. the notebook's picture: values it holds, the caller's names -------------------------------------


def seed_example(backward: bool):
    x = gc.tensor(2.0, requires_grad=True)
    w = gc.tensor(1.0, requires_grad=True)
    y = (x + w) * (w + 1)
    if backward:
        y.backward()
    return gc.render.graph(y)


def by_kind(doc: dict) -> tuple[list, list]:
    leaves = [(n["name"], n["value"], n["grad"]) for n in doc["nodes"] if n["kind"] == "variable"]
    ops = [(n["ref"], n["label"], n["value"], n["grad"]) for n in doc["nodes"] if n["kind"] == "op"]
    return leaves, ops


def test_after_backward_the_leaves_have_their_names_and_the_output_its_value():
    doc = seed_example(backward=True).json()
    leaves, ops = by_kind(doc)
    assert leaves == [("x", 2.0, 2.0), ("w", 1.0, 5.0)]  # dy/dx = w + 1 = 2, dy/dw = (w + 1) + (x + w) = 5
    assert ops == [("n2", "x + w", None, None), ("n3", "w + const", None, None), ("f", "n2 * n3", 6.0, None)]
    assert (
        doc["notes"][-1] == "no value kept for n2, n3: build the graph inside gc.render.recording() to see every value"
    )


def test_before_backward_the_values_come_from_what_the_nodes_saved():
    leaves, ops = by_kind(seed_example(backward=False).json())
    assert leaves == [("x", 2.0, 2.0), ("w", 1.0, 5.0)]
    assert ops == [("n2", "x + w", 3.0, 2.0), ("n3", "w + const", 2.0, 3.0), ("f", "n2 * n3", 6.0, 1.0)]


@needs_dot
def test_the_svg_and_the_page_after_backward_show_the_names_the_value_and_the_gradients():
    view = seed_example(backward=True)
    svg = html.unescape(re.sub(r"<[^>]+>", "\n", view._repr_svg_()))
    texts = [line.strip() for line in svg.splitlines() if line.strip()]
    assert "x" in texts and "w" in texts and "leaf0" not in texts and "leaf1" not in texts
    assert "value 6" in texts and "grad 2" in texts and "grad 5" in texts
    page = view.html()
    model = json.loads(re.search(r'id="gradcli-model">(.*?)</script>', page, re.S).group(1))
    assert [(n["name"], n["grad"]) for n in model["nodes"] if n["kind"] == "variable"] == [("x", 2.0), ("w", 5.0)]
    assert [n["value"] for n in model["nodes"] if n["output"]] == [6.0]


def test_names_come_from_the_callers_own_locals_and_a_given_name_wins():
    def inside():
        weight = gc.tensor(3.0, requires_grad=True)
        bias = gc.tensor(1.0, requires_grad=True, name="b")
        _hidden = gc.tensor(5.0, requires_grad=True)
        return gc.render.graph(weight * bias + _hidden * gc.tensor(2.0, requires_grad=True))

    names = [n.name for n in inside().nodes if n.kind == "variable"]
    assert names == ["weight", "b", "leaf2", "leaf3"]  # _names (IPython's _, _3) are not names for leaves


def test_a_held_intermediate_gives_its_value_after_backward_but_not_one_changed_in_place():
    x = gc.tensor(2.0, requires_grad=True)
    h = x + 1
    y = h * 4
    y.backward()
    ops = {n.label: n.value for n in gc.render.graph(y).nodes if n.kind == "op"}
    assert ops == {"x + const": 3.0, "n1 * const": 12.0}
    a = x * 1.0
    b = a * a  # saves a (2.0) for its backward
    a.add_(1.0)  # then a is 3.0: the saved value is no longer a's node's
    values = [(n.grad_fn, None if n.value is None else float(n.value)) for n in gc.render.graph(b).nodes]
    assert values == [(None, 2.0), ("MulBackward0", None), ("MulBackward0", 4.0)]


# --- 3. plots: lines within the terminal, the legend over no curve -----------------------------------------


@pytest.mark.parametrize("columns", [100, 120, 150])
@pytest.mark.parametrize(
    "args",
    [["x^3 - 3*x", "--range", "-2.5,2.5"], ["exp(x)", "--range", "-1000,1000"]],
    ids=["cubic", "wide"],
)
def test_no_line_of_a_terminal_plot_is_wider_than_the_terminal(args, columns):
    code, out, _ = gradcli_on_terminal(["plot", *args], columns)
    assert code == 0, out
    lines = out.rstrip("\n").split("\n")
    assert max(len(line) for line in lines) <= columns, [len(line) for line in lines]
    ticks = lines[-3].split()  # the x axis's labels: the last one still there, inside the line
    assert ticks[-1] == {"x^3 - 3*x": "2.5", "exp(x)": "1000"}[args[0]]


def test_a_narrow_terminal_breaks_the_legend_rather_than_the_line():
    code, out, _ = gradcli_on_terminal(["plot", "tan(x)", "--range", "-5,5", "--at", "x=0.5"], 50)
    lines = out.rstrip("\n").split("\n")
    assert code == 0 and max(len(line) for line in lines) <= 50
    assert lines[-2:] == ["   ━━ f(x)   ━━ f′(x)", "   ━━ tangent at x = 0.5: f = 0.5463, f′ = 1.298"]


@pytest.mark.parametrize("at", [None, 0.5])
def test_the_legend_of_tan_covers_no_point_of_any_curve(at):
    pytest.importorskip("matplotlib", reason="the picture is drawn by Matplotlib")
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from gradcli.lang.program import load
    from gradcli.render import plot as drawing

    data = drawing.curves(load("tan(x)", None, None), "x", (-5.0, 5.0), {}, 1, at=at)
    with matplotlib.rc_context(drawing.STYLE):
        figure = drawing.drawn(data, "tan(x)")
        FigureCanvasAgg(figure).draw()
        axes = figure.axes[0]
        legend = axes.get_legend().get_window_extent()
        assert not legend.overlaps(axes.get_window_extent())  # outside the plot area
        bottom, top = axes.get_ylim()
        for xs, ys in zip(data.xs, data.drawn):  # f and f′ (f′ in the report), as drawn
            inside = np.isfinite(ys) & (ys >= bottom) & (ys <= top)
            points = axes.transData.transform(np.column_stack([xs[inside], ys[inside]]))
            assert not legend.count_contains(points)
