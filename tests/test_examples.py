"""The examples run and print the seeds' numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradcli.cli.app import app

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

EXPECTED = {
    "seed000_jacobian_rows.py": ["tensor([[3., 5.]], dtype=float32)", "tensor([[4., 6.]], dtype=float32)"],
    "seed001_graph_and_function.py": [
        "The grad fn for a is None",
        "RuntimeError: grad can be implicitly created only for scalar outputs",
        "both fixes agree: True",
        "custom node: MulAddBackward - same values: True",
    ],
    "seed002_two_paths.py": ["tensor([5.])", "is_leaf: True True False False False"],
    "seed003_higher_order.py": [
        "case 1: tensor(7.)",
        "without zeroing: tensor(18., grad_fn=<CopyBackwards>)",
        "after zeroing: tensor(6., grad_fn=<CopyBackwards>)",
        "case 3: tensor([2., 4.])",
        "detach: tensor([3.])",
    ],
    "seed004_control_flow.py": [
        "tensor(28., grad_fn=<MulBackward0>)",
        "tensor([ 0.,  4.,  8., 12.]) tensor([True, True, True, True])",
        "tensor([100.], requires_grad=True) tensor([200.])",
    ],
}


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_library_examples_print_the_seed_numbers(script):
    done = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for line in EXPECTED[script]:
        assert line in done.stdout, (line, done.stdout)


@pytest.mark.parametrize(
    "args,expected",
    [
        (["-f", "cli/seed002.gc", "--at", "x=2,w=1"], {"value": 6.0, "gradient": {"x": 2.0, "w": 5.0}}),
        (["-f", "cli/seed003_case2.gc", "--at", "x=2,y=3"], {"value": 12.0, "gradient": {"x": 12.0, "y": 4.0}}),
        (
            ["-f", "cli/seed004_dot.gc", "--at", "x=[0,1,2,3]"],
            {"value": 28.0, "gradient": {"x": [0.0, 4.0, 8.0, 12.0]}},
        ),
        (
            ["-f", "cli/seed000_mm.gc", "--at", "x=[[1,2]],y=[[3,4],[5,6]]", "--wrt", "x", "--seed", "[[1,0]]"],
            {"value": [[13.0, 16.0]], "gradient": {"x": [[3.0, 5.0]]}},
        ),
        (["cli/seed004_f.py:f", "--at", "a=0.5946"], {"value": 1217.7408, "gradient": {"a": 2048.0}}),
    ],
)
def test_cli_examples(args, expected, monkeypatch):
    monkeypatch.chdir(EXAMPLES)
    result = CliRunner().invoke(app, ["eval", *args, "--json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == expected
