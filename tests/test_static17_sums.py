"""Issue 17, honest sums: a gradient shown as a sum of its parts either lists them all or gives
the count of all of them, and the parts in JSON always add up to the gradient."""

from __future__ import annotations

import json
import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app
from gradcli.render import graph, recording
from gradcli.render.views import grad_text

runner = CliRunner()

UNARY = [gc.sin, gc.tanh, gc.exp, lambda t: t * t, lambda t: -t]
BINARY = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - b, lambda a, b: a / (b * b + 1)]


@st.composite
def programs(draw):
    """A random program on x, y, z: each step applies an operation to earlier values, so values
    are used several times (the nodes with several consumers are where parts are shown)."""
    steps = draw(st.lists(st.tuples(st.booleans(), st.integers(0, 99), st.integers(0, 99), st.integers(0, 99)),
                          min_size=1, max_size=30))  # fmt: skip
    point = draw(st.lists(st.floats(-2, 2, allow_nan=False), min_size=3, max_size=3))
    return steps, point


def run_program(steps, point):
    x, y, z = (gc.tensor(v, dtype=gc.float64, requires_grad=True, name=n) for v, n in zip(point, "xyz"))
    values = [x, y, z]
    with recording() as trace:
        for binary, op, i, j in steps:
            a, b = values[i % len(values)], values[j % len(values)]
            values.append(BINARY[op % len(BINARY)](a, b) if binary else UNARY[op % len(UNARY)](a))
        out = values[-1] if len(values) > 3 else x * 1.0
        total = out + sum(values[3:-1], start=gc.tensor(0.0, dtype=gc.float64)) * 0.5  # every step used
    return graph(total, trace=trace, max_nodes=10_000)


def close(a: float, b: float) -> bool:
    return a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b))


@settings(max_examples=150, deadline=None)
@given(programs())
def test_json_grad_parts_add_up_to_grad(program):
    view = run_program(*program)
    data = view.json()
    for node in data["nodes"]:
        if node.get("grad_parts"):
            assert close(sum(node["grad_parts"]), node["grad"]), node
            shown = grad_text(next(n for n in view.nodes if n.id == node["id"]), None)
            assert float(shown.split(" = ", 1)[0]) == node["grad"]  # the label's total is the gradient


def test_many_parts_say_how_many_in_all():
    x = gc.tensor(0.5, requires_grad=True, name="x")
    with recording() as trace:
        y = sum((x * float(k) for k in range(1, 28)), start=gc.tensor(0.0))
    (leaf,) = [n for n in graph(y, trace=trace).nodes if n.name == "x"]
    label = grad_text(leaf)
    assert label == "378 = 1 + 2 + 3 + … (27 terms)"  # 1 + 2 + ... + 27 = 378: the total is the gradient


def test_a_consumer_beyond_max_nodes_leaves_no_parts_that_do_not_add_up():
    # x is used at the top (x * s) and at the bottom of a long chain that --max-nodes cuts
    x = gc.tensor(0.5, requires_grad=True, name="x")
    with recording() as trace:
        s = x
        for _ in range(30):
            s = gc.sin(s)
        y = x * s + x
    view = graph(y, trace=trace, max_nodes=8)
    (leaf,) = [n for n in view.nodes if n.name == "x"]
    assert leaf.grad is not None
    assert leaf.grad_parts is None or np.isclose(sum(map(float, leaf.grad_parts)), float(leaf.grad), rtol=1e-12)


def test_cli_labels_show_the_gradient_as_their_total():
    program = "; ".join(f"t{k} = x * {k}" for k in range(1, 13)) + "; y = " + " + ".join(f"t{k}" for k in range(1, 13))
    result = runner.invoke(app, expression_after_dashes(["graph", program, "--at", "x=2", "--json"]))
    assert result.exit_code == 0, result.stderr
    (x,) = [n for n in json.loads(result.stdout)["nodes"] if n["name"] == "x"]
    assert x["grad"] == 78.0 and sum(x["grad_parts"]) == 78.0 and len(x["grad_parts"]) == 12
    tree = runner.invoke(app, expression_after_dashes(["graph", program, "--at", "x=2"])).stdout
    (line,) = [line for line in tree.splitlines() if "x  (variable)" in line]
    assert re.search(r"grad 78 = 1 \+ 2 \+ 3 \+ … \(12 terms\)", line), line
