"""Issue 17, pictures that stay readable: the direction chosen for the shape (``--rankdir`` to
force it), a small MLP not a strip, no bitmap over 8000 px on a side or 30 MP, and Graphviz's
complaints said in one ``warning:`` line of ours."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gradcli.render.model import Edge, Graph, GraphNode
from gradcli.render.views import rankdir

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
MLP_AT = (
    "x=[1,-2,0.5],W1=[[0.1,0.2,-0.3],[0.4,-0.5,0.6],[-0.7,0.8,0.9],[0.2,0.1,-0.1]],b1=[0.1,0,-0.1,0.2],"
    "W2=[[0.3,-0.2,0.1,0.5],[-0.4,0.6,0.2,-0.1]],b2=[0.05,-0.05]"
)


def gradcli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gradcli", *args], capture_output=True, text=True, timeout=timeout)


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_a_chain_goes_top_to_bottom_and_a_wide_fan_left_to_right():
    chain = [GraphNode("n0", "variable", "variable", "x", name="x")]
    chain += [GraphNode(f"n{k}", "op", "sin", f"sin(n{k - 1})") for k in range(1, 12)]
    edges = [Edge(f"n{k - 1}", f"n{k}", 0) for k in range(1, 12)]
    assert rankdir(Graph(chain, edges, ["n11"])) == "TB"
    leaves = [GraphNode(f"n{k}", "variable", "variable", f"x{k}", name=f"x{k}") for k in range(40)]
    top = GraphNode("n40", "op", "stack", "stack(...)")
    fan = Graph([*leaves, top], [Edge(f"n{k}", "n40", k) for k in range(40)], ["n40"])
    assert rankdir(fan) == "LR"


@needs_dot
def test_the_seed_picture_goes_top_to_bottom_unless_told():
    seed = str(EXAMPLES / "cli" / "seed002.gc")
    assert "rankdir=TB" in gradcli("graph", "-f", seed, "--at", "x=2,w=1", "--format", "dot").stdout
    assert "rankdir=LR" in gradcli("graph", "-f", seed, "--at", "x=2,w=1", "--format", "dot", "--rankdir", "LR").stdout


@needs_dot
def test_a_two_layer_mlp_is_not_a_strip(tmp_path):
    out = tmp_path / "mlp.png"
    done = gradcli("graph", "-f", str(EXAMPLES / "cli" / "mlp.gc"), "--at", MLP_AT, "-o", str(out))
    assert done.returncode == 0 and done.stderr == f"wrote {out} (12 nodes)\n"
    width, height = png_size(out)
    assert max(width, height) / min(width, height) <= 3, (width, height)


SCALAR_MLP = """
import sys
import numpy as np
import gradcli as gc
from gradcli.render import graph, recording
rng = np.random.default_rng(0)
xs = [gc.tensor(float(v), requires_grad=True, name=f"x{i}") for i, v in enumerate(rng.normal(size=3))]
with recording() as trace:
    h = []
    for j in range(4):
        s = gc.tensor(0.1 * j, requires_grad=True, name=f"b{j}")
        for i in range(3):
            s = s + gc.tensor(float(rng.normal()), requires_grad=True, name=f"w{j}{i}") * xs[i]
        h.append(gc.tanh(s))
    outs = []
    for k in range(2):
        s = gc.tensor(0.0, requires_grad=True, name=f"c{k}")
        for j in range(4):
            s = s + gc.tensor(float(rng.normal()), requires_grad=True, name=f"v{k}{j}") * h[j]
        outs.append(gc.tanh(s))
    y = outs[0] + outs[1]
graph(y, trace=trace).save(sys.argv[1])
"""


@needs_dot
def test_a_scalar_mlp_3_4_2_is_not_a_strip(tmp_path):
    out = tmp_path / "mlp.png"
    done = subprocess.run([sys.executable, "-c", SCALAR_MLP, str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    width, height = png_size(out)
    assert max(width, height) / min(width, height) <= 3, (width, height)  # was 7111x1608 left to right


@needs_dot
def test_a_300_node_picture_is_scaled_to_fit_and_says_so_once(tmp_path):
    # 140 steps of six shapes on x, y, z drawn at random (310 nodes): no repeated structure to collapse
    rng = random.Random(0)
    forms = ["h{i}*{v}", "sin(h{i})+{v}", "h{i}-{v}", "exp(h{i}*0.1)*{v}", "h{i}/(1+{v}*{v})", "cos(h{i})*{v}"]
    steps = [f"h{i + 1} = " + rng.choice(forms).format(i=i, v=rng.choice("xyz")) for i in range(140)]
    program = "; ".join(["h0 = x", *steps])
    out = tmp_path / "g.png"
    start = time.monotonic()
    done = gradcli("graph", program, "--at", "x=0.5,y=0.3,z=0.2", "--max-nodes", "400", "-o", str(out))
    elapsed = time.monotonic() - start
    assert done.returncode == 0, done.stderr
    width, height = png_size(out)
    assert width <= 8000 and height <= 8000 and width * height <= 30_000_000, (width, height)
    lines = done.stderr.splitlines()
    assert len(lines) == 2 and lines[1] == f"wrote {out} (310 nodes)", lines
    assert lines[0].startswith("warning: the picture would be ") and "drawn at 0." in lines[0]
    assert "Warning" not in done.stderr and "cairo" not in done.stderr
    assert elapsed < 30  # (about 7 s on one core of the development machine; 10 s asked)
