"""Levels of detail (issue 35): ``--depth N`` draws the boxes deeper than N (nn.Module calls, JAX calls,
statements) folded, one node each with its name, class, shapes in and out, the statistics of its output's
value and gradient (NumPy's own), the operations and parameters inside; edges into and out of a folded
box are rewired to it once; JSON says the depth, the boxes folded, what is hidden and how to see it. A
model's picture drawn without ``--depth`` is folded to the deepest depth whose text is 10 px or more
in a PNG of at most 8000 px a side, and says so."""

from __future__ import annotations

import json
import re
import shutil
import struct
import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app
from gradcli.render import layout, levels, views
from gradcli.stats import TensorStats
from tests.frameworks import need

runner = CliRunner()
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")

MODEL = """
import torch
from torch import nn

torch.manual_seed(0)


class Sub(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.act = nn.Tanh()

    def forward(self, x):
        return self.act(self.lin(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.relu = nn.ReLU()
        self.sub = Sub()

    def forward(self, x):
        return x + self.sub(self.relu(self.fc(x)))


model = nn.Sequential(Block(), Block()).double()


def inputs(s):
    return torch.sin(s + torch.arange(128, dtype=torch.float64) / 10).reshape(16, 8)


def loss(x):
    return model(x).pow(2).sum()


def loss_at(s):
    return loss(inputs(s))
"""


@pytest.fixture(scope="module")
def nested(tmp_path_factory):
    """The model file (a Sequential of two blocks, each a Linear, a ReLU and a sub-block of a Linear and a
    Tanh, with a residual add), imported, and its path."""
    need("torch")
    folder = tmp_path_factory.mktemp("levels")
    path = folder / "nested.py"
    path.write_text(MODEL)
    namespace: dict = {}
    exec(compile(MODEL, str(path), "exec"), namespace)
    return namespace, path


def expected(namespace, x):
    """Each module's output and its gradient, from torch itself (forward hooks, retain_grad)."""
    outputs = {}

    def hook(path):
        def keep(module, args, out):
            out.retain_grad()
            outputs[path] = out

        return keep

    model = namespace["model"]
    handles = [m.register_forward_hook(hook(f"model.{p}" if p else "model")) for p, m in model.named_modules()]
    try:
        namespace["loss"](x).backward()
    finally:
        for h in handles:
            h.remove()
        model.zero_grad()
    return {p: (t.detach().numpy(), t.grad.numpy()) for p, t in outputs.items()}


def assert_numpys(stats, array):
    assert isinstance(stats, TensorStats) and stats.shape == array.shape
    assert stats.mean == np.mean(array) and stats.std == np.std(array)
    assert stats.min == np.min(array) and stats.max == np.max(array)
    assert stats.norm == np.linalg.norm(array) and stats.zeros == np.count_nonzero(array == 0) / array.size


def drawn(graph):
    return [(n.kind, n.label if n.kind != "op" else n.grad_fn) for n in graph.nodes]


def module_facts(graph):
    return {n.label: (n.module["inputs"], n.module["outputs"], n.module["operations"], n.module["parameters"])
            for n in graph.nodes if n.kind == "module"}  # fmt: skip


def edges(graph):
    return [(graph.node(e.source).key, graph.node(e.target).key, e.count) for e in graph.edges]


def test_depth_1_draws_each_block_as_one_node_with_numpys_statistics(nested):
    namespace, _ = nested
    torch = need("torch")
    x = namespace["inputs"](torch.tensor(0.3, dtype=torch.float64))
    graph = gc.render.graph(namespace["loss"], x, depth=1).model
    assert drawn(graph) == [("variable", "x"), ("module", "model.0 (Block)"), ("module", "model.1 (Block)"),
                            ("op", "PowBackward0"), ("op", "SumBackward0")]  # fmt: skip
    assert module_facts(graph) == {"model.0 (Block)": ([[16, 8]], [[16, 8]], 7, 144),
                                   "model.1 (Block)": ([[16, 8]], [[16, 8]], 7, 144)}  # fmt: skip
    # x goes into block 0 twice (its Linear and the residual add): one edge counting two, no local derivative
    assert edges(graph) == [("x", "model.0", 2), ("model.0", "model.1", 2), ("model.1", "n23", 1), ("n23", "f", 1)]
    assert all(e.local_grad is None for e in graph.edges if e.count > 1)
    truth = expected(namespace, x)
    for node in graph.nodes:
        if node.kind == "module":
            value, grad = truth[node.name]
            assert_numpys(node.value, value)
            assert_numpys(node.grad, grad)
    assert graph.depth == 1 and graph.folded == ["m1", "m7"] and graph.hidden == 22
    assert graph.notes[0] == (
        "14 operations (22 nodes) in 2 boxes drawn folded, one node each (depth 1): --depth 2 (depth=2) shows one "
        "level more, --depth all every operation"
    )
    outer = {c["id"]: c for c in graph.clusters}
    assert set(outer) == {"m0", "m1", "m7"} and outer["m1"]["collapsed"] and not outer["m0"].get("collapsed")
    text = views.text(graph)
    assert "model.0 = Block(x)  # model.0 (Block): (16, 8) → (16, 8) · 7 operations · 144 parameters" in text


def test_depth_2_draws_the_blocks_as_boxes_of_their_modules(nested):
    namespace, _ = nested
    torch = need("torch")
    x = namespace["inputs"](torch.tensor(0.3, dtype=torch.float64))
    graph = gc.render.graph(namespace["loss"], x, depth=2).model
    block = [("module", "model.{k}.fc (Linear)"), ("module", "model.{k}.relu (ReLU)"),
             ("module", "model.{k}.sub (Sub)"), ("op", "AddBackward0")]  # fmt: skip
    assert drawn(graph) == [
        ("variable", "x"),
        *[(kind, label.format(k=0)) for kind, label in block],
        *[(kind, label.format(k=1)) for kind, label in block],
        ("op", "PowBackward0"),
        ("op", "SumBackward0"),
    ]
    facts = module_facts(graph)
    assert facts["model.1.fc (Linear)"] == ([[16, 8]], [[16, 8]], 2, 72)  # (t and addmm; weight and bias)
    assert facts["model.1.relu (ReLU)"] == ([[16, 8]], [[16, 8]], 1, 0)
    assert facts["model.1.sub (Sub)"] == ([[16, 8]], [[16, 8]], 3, 72)
    pairs = [(e.source, e.target) for e in graph.edges]
    assert len(pairs) == len(set(pairs)) == 12 and all(e.count == 1 for e in graph.edges)
    assert ("model.0.sub", "n11") in [(graph.node(s).key, graph.node(t).key) for s, t in pairs]
    truth = expected(namespace, x)
    sub = next(n for n in graph.nodes if n.name == "model.1.sub")
    assert_numpys(sub.value, truth["model.1.sub"][0])
    assert_numpys(sub.grad, truth["model.1.sub"][1])
    assert (
        [c["id"] for c in graph.clusters if c.get("collapsed")] == graph.folded == ["m2", "m3", "m4", "m8", "m9", "m10"]
    )
    assert {c["id"] for c in graph.clusters} == {"m0", "m1", "m7", *graph.folded}  # (the sub-blocks' boxes: gone)
    assert graph.hidden == 20 and "--depth 3 (depth=3) shows one level more" in graph.notes[0]


def test_depth_all_draws_every_operation(nested):
    namespace, _ = nested
    torch = need("torch")
    x = namespace["inputs"](torch.tensor(0.3, dtype=torch.float64))
    whole = gc.render.graph(namespace["loss"], x).model
    graph = gc.render.graph(namespace["loss"], x, depth="all").model
    assert drawn(graph) == drawn(whole) and len(graph.nodes) == 25 and not any(n.kind == "module" for n in graph.nodes)
    assert graph.depth == "all" and graph.folded == [] and graph.hidden == 0 and graph.notes == whole.notes
    assert whole.depth is None and "depth" not in whole.to_dict()


def run(*args: str):
    result = runner.invoke(app, expression_after_dashes(list(args)))
    assert "Traceback" not in result.stdout + result.stderr
    return result


def test_cli_json_says_the_depth_the_boxes_folded_and_how_to_see_them(nested):
    _, path = nested
    done = run("graph", f"{path}:loss_at", "--at", "s=0.3", "--depth", "1", "--json")
    assert done.exit_code == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["depth"] == 1 and data["folded"] == ["m1", "m7"]
    assert data["hidden"] == 22 and data["hidden_kinds"]["AddmmBackward0"] == 4
    assert data["notes"][0].startswith("14 operations (22 nodes) in 2 boxes drawn folded, one node each (depth 1): ")
    block = next(n for n in data["nodes"] if n["id"] == "m1")
    assert block["kind"] == "module" and block["label"] == "model.0 (Block)" and block["name"] == "model.0"
    assert block["module"] == {"box": "m1", "path": "model.0", "class": "Block", "inputs": [[16, 8]],
                               "outputs": [[16, 8]], "operations": 7, "parameters": 144, "nodes": 11}  # fmt: skip
    assert set(block["value"]) >= {"mean", "std", "min", "max", "norm", "zeros"} and block["value"]["shape"] == [16, 8]
    into = [e for e in data["edges"] if e["target"] == "m1"]
    assert len(into) == 1 and into[0]["local_grad"] is None


@pytest.mark.parametrize("bad", ["-1", "x", "1.5"])
def test_a_bad_depth_is_one_error_line_exit_2(bad):
    done = run("graph", "x * y", "--at", "x=1,y=2", f"--depth={bad}")
    assert done.exit_code == 2
    assert done.stderr == f"error: --depth must be a whole number >= 0 or all, not '{bad}'\n"
    with pytest.raises(gc.errors.UsageError, match="--depth must be"):
        gc.render.graph(gc.tensor(1.0, requires_grad=True) * 2, depth=int(bad) if bad == "-1" else bad)


def test_statements_of_a_program_fold_at_depth_0():
    done = run("graph", "a = x + w; b = w + 1; y = a * b", "--at", "x=2,w=1", "--depth", "0", "--format", "text")
    assert done.exit_code == 0, done.stderr
    assert done.stdout.splitlines()[2:5] == [
        "a = folded(x, w)  # a = x + w: (), () → () · 1 operation  value=3  grad=2",
        "b = folded(w)  # b = w + 1: () → () · 1 operation  value=2  grad=3",
        "y = folded(a, b)  # y = a * b: (), () → () · 1 operation  value=6  grad=1  output",
    ]


# --- the picture drawn without --depth: legible ------------------------------------------------------


def png_size(data: bytes) -> tuple[int, int]:
    return struct.unpack(">II", data[16:24])


@needs_dot
def test_a_2000_operation_model_is_drawn_folded_with_text_of_10_px(tmp_path):
    torch = need("torch")
    from torch import nn

    torch.manual_seed(0)

    class Block(nn.Module):  # 49 operations a block, as GPT-2's (2 heads, d=8); each of its own width,
        def __init__(self, width):  # so that none repeats (render/repeats.py would draw them once, ×40)
            super().__init__()
            self.ln_1, self.qkv, self.proj = nn.LayerNorm(8), nn.Linear(8, 24), nn.Linear(8, 8)
            self.ln_2, self.fc, self.act = nn.LayerNorm(8), nn.Linear(8, width), nn.GELU()
            self.out = nn.Linear(width, 8)

        def forward(self, x):
            heads = [z.view(1, 4, 2, 4).transpose(1, 2) for z in self.qkv(self.ln_1(x)).split(8, dim=-1)]
            a = torch.softmax(heads[0] @ heads[1].transpose(-2, -1) / 2, dim=-1) @ heads[2]
            x = x + self.proj(a.transpose(1, 2).reshape(1, 4, 8))
            return x + self.out(self.act(self.fc(self.ln_2(x))))

    blocks = nn.Sequential(*[Block(16 + i) for i in range(40)]).double()
    view = gc.render.graph(lambda x: blocks(x).pow(2).mean(), torch.randn(1, 4, 8, dtype=torch.float64))
    operations = sum(n.kind == "op" for n in view.nodes)
    assert operations > 1500 and view.model.hidden == 0  # (built whole: a model's boxes fold, never cut)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "drawn at 0.4 of its size"
        png = views.picture(view.model, "png")
    shown, source = levels.legible(view.model, views.dot, views.PICTURE_MAX_NODES)  # (what the picture drew)
    assert shown.depth == 1 and len(shown.nodes) == 43  # x, 40 blocks, pow, mean
    assert shown.notes[0].startswith(f"{operations - 2:,} operations")
    assert (
        "drawn at depth 1, the deepest whose picture can be read (text of 10 px or more): --depth 2" in shown.notes[0]
    )
    assert "drawn at depth 1" in source
    laid, _ = layout.laid_out(source, None)
    width_pt = np.diff([float(v) for v in re.search(r'\bbb="([\d.]+),[\d.]+,([\d.]+)', laid).groups()])[0]
    width, height = png_size(png)
    assert max(width, height) <= 8000
    scale = width / width_pt  # pixels a point
    smallest = min(float(size) for size in re.findall(r'(?:fontsize|point-size)="?([\d.]+)', source))
    assert smallest * scale >= 10, (smallest, scale, width, height)
    view.save(tmp_path / "blocks.png")
    assert png_size((tmp_path / "blocks.png").read_bytes()) == (width, height)


def test_jax_calls_fold_like_modules():
    jax = need("jax")
    jnp = jax.numpy

    @jax.jit
    def layer(w, x):
        return jnp.tanh(w @ x)

    @jax.jit
    def net(w, x):
        return jnp.sum(layer(w, layer(w, x)) ** 2)

    w, x = jnp.full((3, 3), 0.1) + jnp.eye(3), jnp.arange(3.0)
    graph = gc.render.graph(net, w, x, depth=1).model
    assert [(n.kind, n.label if n.kind != "op" else n.op) for n in graph.nodes] == [
        ("variable", "w"), ("variable", "x"), ("module", "jit:layer"), ("module", "jit:layer"),
        ("op", "integer_pow"), ("op", "reduce_sum")]  # fmt: skip
    first, second = (n for n in graph.nodes if n.kind == "module")
    assert first.module["inputs"] == [[3, 3], [3]] and first.module["outputs"] == [[3]]
    assert first.module["operations"] == 2 and first.module["parameters"] == 0
    np.testing.assert_allclose(first.value, np.tanh(np.asarray(w) @ np.asarray(x)), rtol=1e-15)
    np.testing.assert_allclose(second.grad, 2 * np.asarray(layer(w, layer(w, x))), rtol=1e-15)
    assert edges(graph)[:4] == [("w", "c1", 1), ("x", "c1", 1), ("w", "c2", 1), ("c1", "c2", 1)]
    top = gc.render.graph(net, w, x, depth=0).model
    assert [n.label for n in top.nodes] == ["w", "x", "jit:net"] and top.node("c0").output


@needs_dot
def test_a_graph_without_boxes_too_big_to_read_is_cut_never_drawn_smaller():
    from gradcli.render.model import Edge, Graph, GraphNode

    nodes = [GraphNode("n0", "variable", "variable", "x", name="x")]
    nodes += [GraphNode(f"n{k}", "op", "sin", f"sin(n{k - 1})", grad_fn="SinBackward0") for k in range(1, 261)]
    nodes[-1].output = True
    chain = Graph(nodes, [Edge(f"n{k - 1}", f"n{k}", 0) for k in range(1, 261)], ["n260"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (on main: "drawn at 0.45 of its size", 4 px text)
        png = views.picture(chain, "png")
    shown, source = levels.legible(chain, views.dot, views.PICTURE_MAX_NODES)
    kept = len(shown.nodes) - 1  # (and the summary node)
    assert 8 <= kept < 261 and shown.hidden == 261 - kept
    assert shown.notes[0].startswith(f"{261 - kept:,} more nodes not shown (a picture with text of at least 10 px")
    laid, _ = layout.laid_out(source, None)
    width_pt = np.diff([float(v) for v in re.search(r'\bbb="([\d.]+),[\d.]+,([\d.]+)', laid).groups()])[0]
    width, height = png_size(png)
    smallest = min(float(size) for size in re.findall(r'(?:fontsize|point-size)="?([\d.]+)', source))
    assert max(width, height) <= 8000 and smallest * width / width_pt >= 10


def test_a_repeated_box_folds_keeping_its_count(nested):
    namespace, _ = nested
    torch = need("torch")
    x = namespace["inputs"](torch.tensor(0.3, dtype=torch.float64))
    graph = gc.render.graph(namespace["loss"], x).model
    for box in graph.clusters:  # (as render/repeats.py marks a block drawn once for two identical ones)
        if box["id"] == "m1":
            box["repeat"] = 2
    node = levels.module_node(graph, "m1")
    assert node.label == "model.0 (Block) ×2" and node.module["repeat"] == 2 and node.module["operations"] == 7
    folded = levels.at_depth(graph, 1)
    assert [n.label for n in folded.nodes if n.kind == "module"] == ["model.0 (Block) ×2", "model.1 (Block)"]
