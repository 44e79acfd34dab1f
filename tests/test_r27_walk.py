"""Issue 27, a new user's walk through the README (fresh venv, real terminal, pictures looked at):

- a grouped graph of 60 mixed terms said "9 groups ... drawn as one node each:" and named four of
  them, with nothing to say the list stopped there;
- ``graph ... -o g.png`` said "wrote g.png (121 nodes)" where the page of the same graph says 120:
  the count took the "... 257 nodes inside the groups" note for a node.
"""

from __future__ import annotations

import json
import random
import re
import shutil

import pytest
from terminal import gradcli_on_terminal
from typer.testing import CliRunner

from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app

runner = CliRunner()
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")

# 60 terms of five functions and seven weights: nine groups of repeated structure once summarised
_rng = random.Random(1)
MIXED = " + ".join(f"{_rng.choice(['sin', 'cos', 'tanh', 'exp', 'sigmoid'])}(x*{k} + w)*y{k % 7}" for k in range(1, 61))
AT = "x=0.1,w=0.2," + ",".join(f"y{i}={i + 1}" for i in range(7))


def run(*args: str):
    result = runner.invoke(app, expression_after_dashes(list(args)))
    assert "Traceback" not in result.stdout + result.stderr
    return result


def test_the_groups_note_says_how_many_it_leaves_unnamed():
    result = run("graph", MIXED, "--at", AT, "--format", "json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    groups = [n for n in doc["nodes"] if n["kind"] == "group"]
    assert len(groups) == 9
    (note,) = [n for n in doc["notes"] if "groups of repeated structure" in n]
    assert note.startswith("257 nodes in 9 groups of repeated structure drawn as one node each: ")
    named = note.split(": ", 1)[1]
    assert named.count("×") == 4  # the four largest, then how many more
    assert named.endswith(" and 5 more")


def test_a_cut_graph_note_says_how_many_kinds_it_leaves_unnamed():
    """Cut at 20 nodes, the rest are of more than four backward kinds: the note says so."""
    result = run("graph", MIXED, "--at", AT, "--max-nodes", "20", "--format", "json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    (note,) = [n for n in doc["notes"] if "more nodes not shown" in n]
    kinds = note.split(": ", 1)[1]
    assert kinds.count(" x") == 4
    assert re.search(r" and \d+ more$", kinds)


@needs_dot
def test_wrote_counts_the_nodes_drawn_not_the_note(tmp_path):
    target = tmp_path / "g.svg"
    result = run("graph", MIXED, "--at", AT, "-o", str(target))
    assert result.exit_code == 0
    doc = json.loads(run("graph", MIXED, "--at", AT, "--format", "json").stdout)
    drawn = sum(n["kind"] != "hidden" for n in doc["nodes"])
    assert drawn == len(doc["nodes"]) - 1 == 120
    assert result.stderr.strip().splitlines()[-1] == f"wrote {target} ({drawn} nodes)"
    page = tmp_path / "g.html"
    assert run("graph", MIXED, "--at", AT, "-o", str(page)).stderr.strip().endswith(f"({drawn} nodes)")
    assert f"{drawn} nodes" in page.read_text(encoding="utf-8")  # the page's header says the same


CASES = """
[[case]]
name = "sign error"
expr = "sin(x)"
at = { x = 1 }
expect = { x = "-cos(x)" }
"""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_check_cases_shows_the_digits_asked_for(tmp_path, jobs):
    """``check --cases --digits N`` was accepted and ignored: the table kept 10 digits, on stdout and in
    the JUnit report. Without --digits it stays as the README shows it (10 digits)."""
    cases = tmp_path / "c.toml"
    cases.write_text(CASES, encoding="utf-8")
    report = tmp_path / "r.xml"
    result = run("check", "--cases", str(cases), "--digits", "17", "--jobs", jobs, "--junit", str(report))
    assert result.exit_code == 1
    row = next(line for line in result.stdout.splitlines() if line.strip().startswith("d/dx"))
    autograd, sympy, differences, complex_step, expected = row.split()[1:6]
    assert autograd == sympy == complex_step == "0.54030230586813977" and expected == "-0.54030230586813977"
    assert len(differences) == 19 and differences.startswith("0.540302305868")  # 17 digits of its own estimate
    assert "0.54030230586813977" in report.read_text(encoding="utf-8")
    few = run("check", "--cases", str(cases), "--digits", "3", "--jobs", jobs)
    row = next(line for line in few.stdout.splitlines() if line.strip().startswith("d/dx"))
    assert row.split()[1:6] == ["0.54"] * 4 + ["-0.54"]
    plain = run("check", "--cases", str(cases), "--jobs", jobs)
    row = next(line for line in plain.stdout.splitlines() if line.strip().startswith("d/dx"))
    assert row.split()[1:6] == ["0.5403023059"] * 4 + ["-0.5403023059"]


def test_the_page_without_graphviz_names_the_page_not_svg(tmp_path, monkeypatch):
    """``graph ... -o g.html`` without Graphviz said "SVG output needs Graphviz's dot program": the user
    asked for a page, and the SVG inside it is gradcli's business."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot on it
    target = tmp_path / "g.html"
    result = run("graph", "x*2", "--at", "x=1", "-o", str(target))
    assert result.exit_code == 3
    assert result.stderr.startswith("error: HTML output needs Graphviz's dot program: install it")
    assert not target.exists()
    svg = run("graph", "x*2", "--at", "x=1", "--format", "svg")
    assert svg.exit_code == 3 and svg.stderr.startswith("error: SVG output needs Graphviz's dot program")


@pytest.mark.parametrize(("n", "columns"), [(30, 80), (13, 80), (30, 60), (30, 100)])
def test_a_large_jacobian_on_a_terminal_fits_its_width(n, columns):
    """The 30 x 30 Jacobian on an 80-column terminal showed 12 columns in 86 characters, every row
    wrapped in two; 13 inputs (shown whole) did the same. The columns shown are as many as fit."""
    vector = "[" + ",".join(str(k) for k in range(1, n + 1)) + "]"
    code, text, _ = gradcli_on_terminal(["jacobian", "x*2", "--at", f"x={vector}"], columns)
    assert code == 0, text
    lines = [line for line in text.splitlines() if line.strip()]
    assert all(len(line) <= columns for line in lines), text
    cells = [line.replace("│", " ").replace("┃", " ").split() for line in lines]  # a rich table or plain columns
    table = [c for c in cells if c and (c[0].startswith("f[") or c[0] == "..." or c[0] == "x[0]")]
    assert len(table) >= 1 + min(n, 13)
    assert table[0][0] == "x[0]" and table[0][-1] == f"x[{n - 1}]"  # both corners still shown
    row = next(c for c in table if c[0] == f"f[{n - 1}]")
    assert row[-1] == "2" and row[1] == "0"  # the diagonal's last element in its place
    if columns <= 80:
        assert "..." in table[0] and f"of {n} columns" in text
