"""Issue 35, "Group, never cut": a torch graph's repeated modules and loops are drawn once, not cut.

A box per module call (a cell called once per time step gets one per step); ``render/repeats.py``
draws identical consecutive sibling blocks (GPT-2's 12) as block 0 marked ×12, and the same sequence
of module calls made again (3 GRU cells over 20 steps) as one step marked ×20 with loop edges; each
instance's statistics equal torch's own, and the instance that differs is flagged by name."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.frameworks import need

torch = need("torch")

from gradcli.cli.app import app  # noqa: E402
from gradcli.render.repeats import grouped, sparkline  # noqa: E402
from gradcli.render.torch_graph import torch_function_graph  # noqa: E402
from gradcli.render.views import dot  # noqa: E402
from gradcli.stats import TensorStats  # noqa: E402

torch.set_num_threads(1)

GPT = """
import torch
from torch import nn

D = 8


class Attention(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        q, k, v = self.c_attn(x).split(x.shape[-1], dim=-1)
        w = (q @ k.transpose(-1, -2)) / x.shape[-1] ** 0.5
        mask = torch.tril(torch.ones(x.shape[0], x.shape[0], dtype=torch.bool))
        return self.c_proj(w.masked_fill(~mask, float("-inf")).softmax(-1) @ v)


class MLP(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.c_fc, self.c_proj = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        return self.c_proj(torch.nn.functional.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.ln_1, self.attn, self.ln_2, self.mlp = nn.LayerNorm(d), Attention(d), nn.LayerNorm(d), MLP(d, hidden)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, widths):
        super().__init__()
        self.h = nn.ModuleList([Block(D, w) for w in widths])
        self.ln_f = nn.LayerNorm(D)

    def forward(self, x):
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


torch.manual_seed(0)
model = GPT([4 * D] * 12).double()
head = torch.randn(4, D, dtype=torch.float64)


def f(x):
    return (model(x) * head).sum()
"""

X = np.random.default_rng(1).normal(size=(4, 8))


def _gpt(widths=None):
    space: dict = {}
    exec(compile(GPT, "gpt.py", "exec"), space)
    if widths is not None:
        torch.manual_seed(0)
        space["model"] = space["GPT"](widths).double()
    return space


def _same(value, array):
    """A node's value is ``array``: itself, or over 64 elements its statistics (NumPy's on it)."""
    if isinstance(value, TensorStats):
        return (value.shape, value.mean, value.norm, value.min) == (
            array.shape, np.mean(array), np.linalg.norm(array), np.min(array))  # fmt: skip
    return np.array_equal(np.asarray(value), array)


def _repeats(graph):
    return [g for g in graph.groups if g.get("repeat")]


def _box(graph, box_id):
    return next(c for c in graph.clusters if c["id"] == box_id)


def test_twelve_identical_blocks_are_one_box_x12_with_torchs_values_and_gradients():
    space = _gpt()
    model, f = space["model"], space["f"]
    graph = torch_function_graph(f, {"x": X}, ["x"])
    whole = torch_function_graph(f, {"x": X}, ["x"], max_nodes="all")
    (group,) = _repeats(graph)
    assert (group["kind"], group["repeat"]) == ("modules", 12)
    assert [i["label"] for i in group["instances"]] == [f"model.h.{k}" for k in range(12)]
    box = _box(graph, group["cluster"])
    assert box["label"].split("\n")[0] == "model.h.0–11 (Block) ×12" and box["repeat"] == 12
    # every block accounted for: the 11 not drawn are exactly 11 instances of the one drawn, none cut
    assert len(whole.nodes) - len(graph.nodes) == 11 * len(group["members"]) and len(whole.nodes) > 400
    assert graph.hidden == 0 and not any("not shown" in n for n in graph.notes)
    assert len(graph.nodes) < 60
    drawn = {n.id for n in graph.nodes}
    assert set(group["members"]) <= drawn
    loops = [e for e in graph.edges if e.source in group["members"] and e.target in group["members"] and e.count == 11]
    assert loops  # block k's output into block k+1: one loop edge, ×11

    # the drawn block's nodes hold block 0's own tensors (each submodule's output, by forward hooks)
    outputs, handles = {}, []
    kept: list = []

    def keep(module, args, out):
        out.retain_grad()
        kept.append(out)

    for name, sub in model.h[0].named_modules():
        handles.append(sub.register_forward_hook(lambda m, a, out, name=name: outputs.__setitem__(name, out)))
    handles += [block.register_forward_hook(keep) for block in model.h]
    x = torch.tensor(X, requires_grad=True)
    f(x).backward()
    for h in handles:
        h.remove()
    for name, out in outputs.items():
        path = "model.h.0" + (f".{name}" if name else "")
        inside = [n for n in graph.nodes if n.scope and (n.scope + ".").startswith(path + ".")]
        values = [n.value for n in inside if n.shape == tuple(out.shape)]
        assert any(_same(v, out.detach().numpy()) for v in values), path
    # each instance's statistics are torch's: its output's norm and .grad's norm, its parameters' .grad
    for k, (item, out) in enumerate(zip(group["instances"], kept)):
        assert item["value"]["norm"] == pytest.approx(float(out.detach().norm()), rel=1e-12)
        assert item["grad"]["norm"] == pytest.approx(float(out.grad.norm()), rel=1e-12)
        params = np.sqrt(sum(float(p.grad.norm()) ** 2 for p in model.h[k].parameters()))
        assert item["param_grad"]["norm"] == pytest.approx(params, rel=1e-12)
    norms = [float(out.grad.norm()) for out in kept]
    assert sparkline(norms) in box["label"] and group["differs"] == []
    assert "×12" in dot(graph) and "grad norm" in dot(graph)


def test_a_block_of_another_width_is_not_grouped_the_runs_around_it_are():
    space = _gpt([32] * 5 + [16] + [32] * 6)
    graph = torch_function_graph(space["f"], {"x": X}, ["x"])
    found = [(g["repeat"], g["instances"][0]["label"], g["instances"][-1]["label"]) for g in _repeats(graph)]
    assert found == [(5, "model.h.0", "model.h.4"), (6, "model.h.6", "model.h.11")]
    labels = [c["label"].split("\n")[0] for c in graph.clusters if c.get("depth") == 2]
    assert labels == [
        "model.h.0–4 (Block) ×5",
        "model.h.5 (Block)",
        "model.h.6–11 (Block) ×6",
        "model.ln_f (LayerNorm)",
    ]


GRU = """
import torch

torch.manual_seed(0)
cells = torch.nn.ModuleList([torch.nn.GRUCell(4, 4) for _ in range(3)]).double()


def f(x, keep=None):
    hs = [torch.zeros(1, 4, dtype=torch.float64) for _ in cells]
    for t in range(x.shape[0]):
        inp = x[t]
        for k, cell in enumerate(cells):
            hs[k] = cell(inp, hs[k])
            inp = hs[k]
        if keep is not None:
            inp.retain_grad()
            keep.append(inp)
    return inp.sum()
"""


def test_three_gru_cells_over_20_steps_roll_to_one_step_x20_with_loop_edges():
    space: dict = {}
    exec(compile(GRU, "gru.py", "exec"), space)
    xs = np.random.default_rng(2).normal(size=(20, 1, 4))
    whole = torch_function_graph(space["f"], {"x": xs}, ["x"], max_nodes="all")
    calls = [c for c in whole.clusters if c.get("path") == "cells.1"]  # a box per call, in order
    assert [c["call"] for c in calls] == list(range(20)) and calls[3]["label"] == "cells.1 (GRUCell) call 4/20"
    graph = torch_function_graph(space["f"], {"x": xs}, ["x"])
    (group,) = _repeats(graph)
    assert (group["kind"], group["repeat"]) == ("loop", 20)
    assert _box(graph, group["cluster"])["label"].startswith("loop ×20 (step 0–19)")
    cells = [c for c in graph.clusters if c.get("parent") == group["cluster"]]
    assert [c["label"] for c in cells] == [f"cells.{k} (GRUCell) ×20" for k in range(3)]
    members = set(group["members"])
    assert len(whole.nodes) - len(graph.nodes) == 19 * len([m for m in members if graph.node(m).kind == "op"])
    loops = [e for e in graph.edges if e.source in members and e.target in members and e.count == 19]
    assert len({e.source for e in loops}) == 3  # each cell's state into its next step
    keep: list = []
    space["f"](torch.tensor(xs, requires_grad=True), keep).backward()
    assert len(group["instances"]) == 20
    for item, h in zip(group["instances"], keep):
        assert item["value"]["norm"] == pytest.approx(float(h.detach().norm()), rel=1e-12)
        assert item["grad"]["norm"] == pytest.approx(float(h.grad.norm()), rel=1e-12)


RESNET = """
import torch
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, c_in, c_out, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + (x if self.downsample is None else self.downsample(x)))


torch.manual_seed(0)
stage = nn.Sequential(BasicBlock(2, 2), BasicBlock(2, 2), BasicBlock(2, 3, stride=2)).double()


def f(x):
    return stage(x).sum()
"""


def test_resnet_stage_groups_its_two_identical_blocks_not_the_downsampling_one():
    space: dict = {}
    exec(compile(RESNET, "resnet.py", "exec"), space)
    graph = grouped(torch_function_graph(space["f"], {"x": np.ones((1, 2, 4, 4))}, ["x"]))
    (group,) = _repeats(graph)
    assert [i["label"] for i in group["instances"]] == ["stage.0", "stage.1"]
    assert [c["label"].split("\n")[0] for c in graph.clusters if c.get("depth") == 2] == [
        "stage.0–1 (BasicBlock) ×2",
        "stage.2 (BasicBlock)",
    ]


class SqrtBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return x + torch.sqrt(self.lin(x) ** 2)


torch.manual_seed(0)
blocks = torch.nn.Sequential(*[SqrtBlock() for _ in range(12)]).double()
with torch.no_grad():  # block 7 gives 0, where sqrt's gradient (inf) meets 0: NaN from there back
    blocks[7].lin.weight.zero_()
    blocks[7].lin.bias.zero_()


def sqrt_blocks(x):
    return blocks(x).sum()


def test_the_block_whose_gradient_is_nan_is_flagged_by_name():
    graph = torch_function_graph(sqrt_blocks, {"x": X[:2, :4]}, ["x"], max_nodes=40)
    (group,) = _repeats(graph)
    assert group["repeat"] == 12 and graph.hidden == 0  # (given 40: grouped to fit, nothing cut)
    differs = {d["label"]: d["reason"] for d in group["differs"]}
    assert differs["blocks.7"] == "parameter grad NaN"  # its output's gradient is finite: the NaN starts here
    assert differs["blocks.6"] == "grad NaN, parameter grad NaN" and "blocks.8" not in differs
    assert np.isnan(group["instances"][6]["grad"]["norm"]) and np.isfinite(group["instances"][7]["grad"]["norm"])
    label = _box(graph, group["cluster"])["label"]
    assert "blocks.7: parameter grad NaN" in label and "blocks.0–6: grad NaN, parameter grad NaN" in label


def test_cli_json_lists_the_group(tmp_path):
    (tmp_path / "gpt.py").write_text(GPT)
    at = "x=" + json.dumps(X.tolist())
    result = CliRunner().invoke(app, ["graph", f"{tmp_path / 'gpt.py'}:f", "--at", at, "-o", str(tmp_path / "g.json")])
    assert result.exit_code == 0, result.output
    document = json.loads((tmp_path / "g.json").read_text())
    (group,) = [g for g in document["groups"] if g.get("repeat")]
    assert (group["kind"], group["repeat"], len(group["instances"])) == ("modules", 12, 12)
    ids = {n["id"] for n in document["nodes"]}
    assert set(group["members"]) <= ids and group["cluster"] in {c["id"] for c in document["clusters"]}
    assert document["hidden"] == 0


def test_still_too_big_after_grouping_the_cut_says_what_it_left_and_how_to_see_it():
    graph = torch_function_graph(sqrt_blocks, {"x": X[:2, :4]}, ["x"], max_nodes=6)
    whole = torch_function_graph(sqrt_blocks, {"x": X[:2, :4]}, ["x"], max_nodes="all")
    assert (
        len(whole.nodes) == 2 + 12 * 7
    )  # x, the sum, and 12 blocks of 7 nodes (weight, bias, t, addmm, pow, sqrt, add)
    assert len(graph.nodes) == 6 + 1 and graph.hidden == 9 - 6  # grouped to 9 nodes, then cut to 6 (and the note)
    assert f"{graph.hidden} more nodes not shown (--max-nodes 6)" in " ".join(graph.notes)
    assert "--max-nodes all draws every node" in graph.notes


OWN = """
import gradcli as gc


def layer(h, w):
    return gc.tanh(h * w + 0.5) * 1.1


def f(x, w):
    h = x
    for _ in range(60):
        h = layer(h, w)
    return h
"""


def test_gradclis_own_python_function_called_in_a_loop_is_rolled(tmp_path):
    (tmp_path / "net.py").write_text(OWN)
    result = CliRunner().invoke(app, ["graph", f"{tmp_path / 'net.py'}:f", "--at", "x=0.3,w=0.7", "--format", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    (group,) = [g for g in document["groups"] if g.get("repeat")]
    # the first call reads x (a leaf), the others the call before: calls 1..59 are the loop
    assert (group["kind"], group["repeat"], group["label"]) == ("loop", 59, "loop (step 1–59)")
    assert len(document["nodes"]) == 14 and document["hidden"] == 0  # x, w, and two calls of 6 nodes
    h, values, slopes = 0.3, [], []
    for _ in range(60):
        slopes.append(1.1 * (1 - np.tanh(h * 0.7 + 0.5) ** 2) * 0.7)
        h = np.tanh(h * 0.7 + 0.5) * 1.1
        values.append(h)
    for k, item in enumerate(group["instances"], 1):  # step k's output: the layer applied k + 1 times
        assert item["value"]["norm"] == pytest.approx(abs(values[k]), rel=1e-12)
        assert item["grad"]["norm"] == pytest.approx(abs(np.prod(slopes[k + 1 :])), rel=1e-9)
