"""Issue 17, big graphs summarised: repeated terms become one group ×N with their total, a long
chain of one operation one group, in the JSON's ``groups`` and in the pictures of large graphs."""

from __future__ import annotations

import json
import math
import shutil
import struct
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app
from gradcli.render import graph, recording
from gradcli.render.page import model_json
from gradcli.render.summary import collapsed, find_groups

runner = CliRunner()
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
SIXTY = " + ".join(f"sin(x*{k})*y" for k in range(1, 61))


def run(*args: str):
    result = runner.invoke(app, expression_after_dashes(list(args)))
    assert "Traceback" not in result.stdout + result.stderr
    return result


def test_sixty_terms_of_one_shape_are_one_group_with_their_total():
    doc = json.loads(run("graph", SIXTY, "--at", "x=0.5,y=2", "--max-nodes", "400", "--json").stdout)
    assert len(doc["nodes"]) == 301 and doc["hidden"] == 0
    terms, chain = doc["groups"]
    assert (terms["id"], terms["label"], terms["count"], len(terms["members"])) == ("g0", "sin(x * k) * y", 60, 240)
    assert terms["total"] == pytest.approx(sum(math.sin(0.5 * k) * 2 for k in range(1, 61)), rel=1e-12)
    assert terms["collapsed"] is False  # (issue 27: --max-nodes 400 covers the graph: every node drawn as itself)
    assert (chain["label"], chain["count"], len(chain["members"])) == ("add chain", 57, 57)  # t1 + t2 is a node
    ids = {n["id"] for n in doc["nodes"]}
    assert set(terms["members"]) <= ids and not set(terms["members"]) & set(chain["members"])
    by_id = {n["id"]: n for n in doc["nodes"]}
    assert {by_id[m]["kind"] for m in terms["members"]} == {"op", "constant"}  # x and y stay outside


def test_small_graphs_have_no_groups():
    doc = json.loads(run("graph", "a = x + w; b = w + 1; y = a * b", "--at", "x=2,w=1", "--json").stdout)
    assert doc["groups"] == []


def test_collapsed_graph_draws_each_group_once():
    x, y = gc.tensor(0.5, requires_grad=True, name="x"), gc.tensor(2.0, requires_grad=True, name="y")
    with recording() as trace:
        total = gc.sin(x * 1.0) * y
        for k in range(2, 11):
            total = total + gc.sin(x * float(k)) * y
    model = graph(total, trace=trace).model
    groups = find_groups(model)
    assert [(g["label"], g["count"], g["collapsed"]) for g in groups] == [
        ("sin(x * k) * y", 10, False),  # (51 nodes: pictures of this size draw every node)
        ("add chain", 7, False),
    ]
    for g in groups:
        g["collapsed"] = True
    small = collapsed(model, groups)
    assert [n.kind for n in small.nodes].count("group") == 2 and len(
        small.nodes
    ) == 2 + 2 + 2  # x, y, groups, t1 + t2, f
    (term,) = [n for n in small.nodes if n.id == "g0"]
    assert term.count == 10 and term.size == 40 and term.grad == 1.0
    assert term.value == pytest.approx(sum(math.sin(0.5 * k) * 2 for k in range(1, 11)), rel=1e-12)
    into = {(small.node(e.source).name, e.target): e.count for e in small.edges}
    assert into[("x", "g0")] == 10 and into[("y", "g0")] == 10  # x and y feed all ten terms


def test_the_page_lists_the_groups_of_a_small_graph_expanded():
    x = gc.tensor(0.5, requires_grad=True, name="x")
    with recording() as trace:
        total = x * 1.0
        for k in range(2, 9):
            total = total + gc.exp(x * float(k))
    data = model_json(graph(total, trace=trace).model)
    ids = {n["id"] for n in data["nodes"]}
    assert data["groups"] and all(not g["collapsed"] and set(g["members"]) <= ids for g in data["groups"])  # (small)
    assert data["groups"][0]["label"] == "exp(x * k)" and data["groups"][0]["count"] == 7


def png_size(path) -> tuple[int, int]:
    return struct.unpack(">II", path.read_bytes()[16:24])


@needs_dot
@pytest.mark.parametrize("terms", [60, 200])  # 301 and 1,001 nodes
def test_large_pictures_are_summaries_drawn_fast(tmp_path, terms):
    expression = " + ".join(f"sin(x*{k})*y" for k in range(1, terms + 1))
    out = tmp_path / "g.png"
    start = time.monotonic()
    result = run("graph", expression, "--at", "x=0.5,y=2", "-o", str(out))  # (--max-nodes 2000 would draw all)
    elapsed = time.monotonic() - start
    # summarised from the tape (the note beside it is no node)
    assert result.exit_code == 0 and result.stderr == f"wrote {out} (6 nodes)\n"
    width, height = png_size(out)
    assert width <= 2000 and height <= 2000, (width, height)  # (was 24292x6560 at 300 nodes)
    assert elapsed < 10, elapsed  # about 1 s here
    dot_text = run("graph", expression, "--at", "x=0.5,y=2", "--format", "dot").stdout
    assert f"sin(x * k) * y ×{terms}" in dot_text and f"add chain ×{terms - 3}" in dot_text
    assert dot_text.count(" -> ") == 7  # x, y -> terms; terms -> t1 + t2, chain, f; t1 + t2 -> chain; chain -> f


@needs_dot
def test_a_hundred_thousand_nodes_give_their_summary_in_seconds(tmp_path):
    program = tmp_path / "big.gc"
    program.write_text(" + ".join(f"sin(x*{k})*y" for k in range(1, 25_001)), encoding="utf-8")
    out = tmp_path / "big.png"
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "gradcli", "graph", "-f", str(program), "--at", "x=0.5,y=2", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    elapsed = time.monotonic() - start
    assert done.returncode == 0 and done.stderr == f"wrote {out} (6 nodes)\n", (
        done.stderr
    )  # x, y, 2 groups, 2 sums (the note is no node)
    width, height = png_size(out)
    assert width <= 2000 and height <= 2000
    assert elapsed < 60, elapsed  # about 6.5 s here: the run and the cut, then a picture of 200 nodes summarised
