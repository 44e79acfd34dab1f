"""Issue 13, graph model: --max-nodes counts every node (constants too), and building and viewing
the model is linear in its size (no scan of all edges per node)."""

from __future__ import annotations

import json
import sys

from typer.testing import CliRunner

from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app
from gradcli.render import views

build_module = sys.modules["gradcli.render.build"]  # the package's ``build`` is the function

runner = CliRunner()


def run(*args: str):
    result = runner.invoke(app, expression_after_dashes(list(args)))
    assert "Traceback" not in result.stdout + result.stderr
    return result


def graph_json(*args: str) -> dict:
    result = run("graph", *args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def ones(n: int) -> str:
    return ",".join(["1"] * n)


def test_constants_count_against_max_nodes():
    doc = graph_json(f"sum([x,{ones(3000)}])", "--at", "x=2", "--max-nodes", "5")
    shown = [n for n in doc["nodes"] if n["kind"] != "hidden"]
    assert len(shown) == 5 and len(doc["nodes"]) == 6  # the cap, and the summary
    kinds = sorted(n["kind"] for n in shown)
    assert kinds == ["constant", "constant", "op", "op", "variable"]  # the variable is kept before constants
    assert doc["hidden"] == 2998 and doc["hidden_kinds"] == {"constant": 2998}
    assert "2,998 more nodes not shown (--max-nodes 5): constant x2,998" in doc["notes"]
    # one edge from the summary to the stack, not one per hidden constant
    assert sum(e["source"] == "hidden" for e in doc["edges"]) == 1 and len(doc["edges"]) == 5


def test_text_view_says_hidden_inputs_once():
    text = run("graph", f"sum([x,{ones(50)}])", "--at", "x=2", "--max-nodes", "5", "--format", "text").stdout
    assert "n3 = stack(x, 1, 1, ...)  # StackBackward0" in text
    assert "# 48 more nodes not shown (--max-nodes 5): constant x48" in text


def test_a_chain_shows_its_constants_within_the_cap():
    expression = "+".join(["x * 2"] * 200)
    doc = graph_json(expression, "--at", "x=1", "--max-nodes", "30")
    shown = [n for n in doc["nodes"] if n["kind"] != "hidden"]
    assert len(shown) == 5  # over the cap, its repeats collapse first (issue 17): x, x * k ×200, a sum, add chain, f
    assert [n["size"] for n in shown if n["kind"] == "group"] == [400, 197]  # products with their constants
    assert doc["hidden"] == 200 * 3 - 3  # 200 products, 199 sums, x, 200 constants; 3 drawn as themselves
    doc = graph_json("sum([x," + ",".join(["1"] * 100) + "])", "--at", "x=1", "--max-nodes", "30")
    shown = [n for n in doc["nodes"] if n["kind"] != "hidden"]
    assert len(shown) == 30 and doc["hidden"] == 103 - 30  # nothing repeats: the plain cut


def test_without_a_cut_nothing_changes():
    doc = graph_json("x * 2 + 3", "--at", "x=1")
    assert [n["label"] for n in doc["nodes"]] == ["x", "2", "x * 2", "3", "x * 2 + 3"]
    assert doc["hidden"] == 0


class CountingList(list):
    """A list that counts the items handed out by iteration (each scan of the edges)."""

    visits = 0

    def __iter__(self):
        for item in super().__iter__():
            CountingList.visits += 1
            yield item


def test_building_and_viewing_scan_the_edges_a_bounded_number_of_times(monkeypatch):
    """The quadratic version scanned every edge once per node (20,000 constants: 4e8 visits)."""
    original = build_module._Builder.__init__

    def counting_init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.edges = CountingList()

    monkeypatch.setattr(build_module._Builder, "__init__", counting_init)
    from gradcli.lang.program import load
    from gradcli.render.build import build, recording

    n = 2000
    program = load(f"sum([x,{ones(n)}]) * x", None)
    with recording() as trace:
        evaluation = program.run({"x": 2.0}, ["x"], record_steps=True)
    CountingList.visits = 0
    model = build(evaluation.outputs, trace=trace, max_nodes=10 * n, free=True)
    assert len(model.nodes) == n + 4  # x, the constants, stack, sum, mul
    assert isinstance(model.edges, CountingList) and len(model.edges) == n + 4
    for view in (views.text, views.tree_plain, views.dot):
        view(model)
    model.to_dict()
    assert CountingList.visits <= 10 * len(model.edges)  # a few passes, not one per node


def test_tree_guides_are_right_after_the_linear_rewrite():
    text = run("graph", "a = x + w; b = w + 1; y = a * b", "--at", "x=2,w=1", "--format", "tree").stdout
    assert [line.split("  [")[0].split("  (")[0] for line in text.splitlines()] == [
        "y = a * b",
        "├── a = x + w",
        "│   ├── x",
        "│   └── w",
        "└── b = w + 1",
        "    ├── w",
        "    └── 1",
    ]
