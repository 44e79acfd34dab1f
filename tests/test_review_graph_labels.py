"""Issue 13 (review): a node used thousands of times (a 3,000-step Horner chain's ``x``) wrote
every contribution to its gradient into its label ("grad 8.9 = 0 + 0 + ... " 23,000 characters),
which Graphviz refuses ("HTML string longer than 16384"): the picture failed where a smaller
label draws. Human views show the first few contributions and how many more there are."""

from __future__ import annotations

import subprocess
import sys

import pytest


def horner(steps: int) -> str:
    lines = ["h0 = x"] + [f"h{i + 1} = h{i}*x + {i % 7}" for i in range(steps)]
    return "\n".join([*lines, f"h{steps}"])


@pytest.fixture(scope="module")
def dot_source(tmp_path_factory: pytest.TempPathFactory) -> str:
    program = tmp_path_factory.mktemp("horner") / "horner.gc"
    program.write_text(horner(3000), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "gradcli", "graph", "-f", str(program), "--at", "x=0.5"]
        + ["--format", "dot", "--max-nodes", "100000"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_no_label_is_longer_than_graphviz_reads(dot_source: str) -> None:
    assert max(len(line) for line in dot_source.splitlines()) < 16384


def test_the_label_says_how_many_terms_are_left_out(tmp_path) -> None:
    # (issue 27: --max-nodes 100000 draws all 12,002 nodes, dense, a gradient without its parts; the
    # tree writes them, as the picture of a smaller graph does)
    program = tmp_path / "horner.gc"
    program.write_text(horner(3000), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "gradcli", "graph", "-f", str(program), "--at", "x=0.5", "--max-nodes", "all"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    leaf = next(line for line in done.stdout.splitlines() if "x  (variable)" in line).split("x  (variable)")[1]
    # x is used 3,001 times: h*x in each step, and h0 = x
    assert "grad " in leaf
    assert (
        "+ … (3,001 terms)" in leaf
    )  # issue 17: the count of all the terms (h*x in each step, h0), not of those left out
    shown = leaf.split("grad ", 1)[1].split(" + … (", 1)[0]
    assert shown.count(" + ") + shown.count(" - ") == 2  # 3 contributions after the value


def test_a_few_contributions_are_all_written() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gradcli", "graph", "x*1+x*2+x*3", "--at", "x=2", "--format", "tree"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "grad 6 = 1 + 2 + 3 " in done.stdout and "terms)" not in done.stdout
