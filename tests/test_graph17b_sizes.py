"""Graphs at real sizes (issue 17): a summary from the tape (groups with totals, a depth cut counted),
dense pictures within 8000 px a side and 30 MP, Graphviz's words never leaking."""

from __future__ import annotations

import math
import random
import shutil
import struct

import pytest
from typer.testing import CliRunner

from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app

runner = CliRunner()
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def run(*args: str):
    return runner.invoke(app, expression_after_dashes(list(args)))


def program(steps: int, seed: int = 0) -> str:
    """Statements that do not repeat: each a random form of the last result and a recent one."""
    rng = random.Random(seed)
    forms = ["h{i}*{v} + h{j}", "sin(h{i})+h{j}*{c}", "h{i}-{v}*h{j}", "exp(h{j}*0.1)*h{i}", "h{i}/(1+h{j}*h{j})",
             "cos(h{i})*h{j}", "tanh(h{i}+h{j}*{c})"]  # fmt: skip
    lines = ["h0 = x"]
    for i in range(steps):
        form = rng.choice(forms)
        j, v, c = rng.randrange(max(0, i - 8), i + 1), rng.choice("xyz"), round(rng.uniform(0.2, 0.9), 2)
        lines.append(f"h{i + 1} = " + form.format(i=i, j=j, v=v, c=c))
    return "\n".join(lines) + f"\nh{steps}\n"


def test_over_max_nodes_the_repeats_are_summed_up_not_cut():
    terms = " + ".join(f"sin(x*{k})*w" for k in range(1, 501))  # 2,501 nodes
    result = run("graph", terms, "--at", "x=0.5,w=2", "--format", "text")
    assert result.exit_code == 0, result.stderr
    total = sum(math.sin(0.5 * k) * 2 for k in range(1, 501))
    lines = result.stdout.splitlines()
    assert lines[1].startswith("g0 = group(x, w)  # sin(x * k) * w x500 (2,000 nodes)  value=")
    assert float(lines[1].split("value=")[1].split()[0]) == pytest.approx(total, rel=1e-12)
    assert lines[4].startswith("g1 = group(n10, g0)  # add chain x497 (497 nodes)")
    assert lines[5].startswith("f = add(g1, g0)  # AddBackward0  value=") and "grad=1  output" in lines[5]
    assert (
        lines[-1]
        == "# 2,497 nodes in 2 groups of repeated structure drawn as one node each: sin(x * k) * w ×500, add chain ×497"
    )


def test_a_summary_with_a_depth_cut_counts_what_it_hid():
    steps = "h0 = x; " + "; ".join(f"h{i + 1} = sin(h{i}) * {i % 5 + 2} + h{i}" for i in range(200)) + "; h200"
    result = run("graph", steps, "--at", "x=0.1", "--format", "json")
    assert result.exit_code == 0, result.stderr
    import json

    doc = json.loads(result.stdout)
    shown = [n for n in doc["nodes"] if n["kind"] not in ("hidden", "group")]
    groups = [n for n in doc["nodes"] if n["kind"] == "group"]
    assert len(shown) + len(groups) <= 200 and doc["nodes"][-1]["id"] == "hidden"
    assert doc["hidden"] == 1 + 200 * 4 - len(shown)  # x, then sin, constant, mul, add a step
    assert sum(doc["hidden_kinds"].values()) == doc["hidden"]


@needs_dot
def test_a_thousand_node_picture_stays_within_bounds_and_graphviz_is_said_in_our_words(tmp_path):
    source = tmp_path / "p.gc"
    source.write_text(program(316))
    out = tmp_path / "p.png"
    result = run("graph", "-f", str(source), "--at", "x=0.5,y=0.3,z=0.2", "--max-nodes", "1100", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    said = result.stderr.splitlines()
    assert said[-1] == f"wrote {out} (999 nodes)"
    assert all(line.startswith("warning: the picture would be ") for line in said[:-1])  # nothing of dot's own
    width, height = struct.unpack(">II", out.read_bytes()[16:24])
    assert width <= 8000 and height <= 8000 and width * height <= 30_000_000
    assert max(width, height) > 7900  # every node drawn (--max-nodes covers the graph, issue 27), as large as allowed
