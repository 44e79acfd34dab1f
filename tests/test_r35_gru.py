"""Issue 35, a rolled loop's default view: six GRUCells stepped 20 times in a Python loop are drawn,
without ``--depth``, as torchview's ``roll=True`` draws them: the ``loop ×20`` box open, each cell in
it a module node (name, class, shapes, statistics) with its loop edge ×19, the calls from one cell to
the next ×20; a rolled loop's box is no level of its own (``levels.box_depths``). The colour key of
``--color-by`` is labelled at round values (1, 3, 10 ... or whole decades), each cell the colour its
value gets on the log scale."""

from __future__ import annotations

import math
import re
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli.app import app
from gradcli.render import levels, views
from gradcli.render.paint import key_marks, scale_colour
from tests.frameworks import need

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
WIDTH, LAYERS, STEPS = 8, 6, 20


@pytest.fixture(scope="module")
def gru():
    """benchmarks/real_models.py's gru-6x20 at width 8: recorded, backward run; the view and each
    cell's output at step 0 and its gradient, from torch (forward hooks, retain_grad)."""
    torch = need("torch")
    from torch import nn

    torch.manual_seed(0)

    class GRULoop(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cells = nn.ModuleList(nn.GRUCell(WIDTH, WIDTH) for _ in range(LAYERS))

        def forward(self, xs):
            hs = [xs.new_zeros(xs.shape[1], xs.shape[2]) for _ in self.cells]
            for x in xs:
                for i, cell in enumerate(self.cells):
                    hs[i] = cell(x, hs[i])
                    x = hs[i]
            return (hs[-1] ** 2).mean()

    model = GRULoop()
    first: dict[int, object] = {}

    def keep(k):
        def hook(module, args, out):
            if k not in first:
                out.retain_grad()
                first[k] = out

        return hook

    for k, cell in enumerate(model.cells):
        cell.register_forward_hook(keep(k))
    with gc.render.recording():
        loss = model(torch.randn(STEPS, 1, WIDTH))
    loss.backward()
    return gc.render.graph(loss), {k: (t.detach().numpy(), t.grad.numpy()) for k, t in first.items()}


def _box(graph, box_id):
    return next(c for c in graph.clusters if c["id"] == box_id)


@needs_dot
def test_the_default_gru_picture_opens_the_loop_and_draws_its_six_cells_as_module_nodes(gru):
    view, torch_first = gru
    shown, source = levels.legible(view.model, views.dot, views.PICTURE_MAX_NODES)
    # on main: depth 1 folded the loop box itself, one node "loop ×20" for the whole model
    assert shown.depth == 1
    cells = [n for n in shown.nodes if n.kind == "module"]
    assert [n.label for n in cells] == [f"model.cells.{k} (GRUCell) ×20" for k in range(LAYERS)]
    (group,) = [g for g in view.model.groups if g.get("kind") == "loop"]
    loop = _box(shown, group["cluster"])
    assert not loop.get("collapsed") and loop["label"].startswith("loop ×20 (step 0–19), step 0 drawn\n")
    assert {n.cluster for n in cells} == {loop["id"]}  # inside the open loop box
    assert [n.op for n in shown.nodes if n.kind == "op"] == ["pow", "mean"]
    for k, node in enumerate(cells):  # each cell's statistics: its output at step 0, torch's own
        value, grad = torch_first[k]
        np.testing.assert_array_equal(node.value, value)
        np.testing.assert_array_equal(node.grad, grad)
        assert node.module["class"] == "GRUCell" and node.module["repeat"] == STEPS
        assert node.module["parameters"] == 2 * (3 * WIDTH * WIDTH + 3 * WIDTH)
    facts = [levels.module_facts(n) for n in cells]
    # the first cell reads nothing drawn (x[t] and the zero state need no gradient): no "()", a scalar's shape
    assert facts[0] == f"→ (1, {WIDTH}) · 22 operations · 432 parameters"
    assert facts[1:] == [f"(1, {WIDTH}) → (1, {WIDTH}) · 22 operations · 432 parameters"] * (LAYERS - 1)
    edges = {(e.source, e.target): e.count for e in shown.edges}
    ids = [n.id for n in cells]
    assert [edges[(i, i)] for i in ids] == [STEPS - 1] * LAYERS  # each cell's state into its next step
    assert [edges[(a, b)] for a, b in zip(ids, ids[1:])] == [STEPS] * (LAYERS - 1)  # once a step
    assert " ×19 " in source and " ×20 " in source
    loops = re.findall(r'(\S+) -> (\S+) \[[^]]*label=" ×19 "[^]]*\]', source)
    assert len(loops) == LAYERS and all(a == b for a, b in loops)
    assert source.count("style=dashed") >= LAYERS  # a cell's state into its next step: a loop edge, dashed
    assert shown.notes[0].startswith("132 operations (156 nodes) in 6 boxes drawn folded")
    assert "drawn at depth 1, the deepest whose picture can be read" in shown.notes[0]


def test_a_rolled_loop_is_no_level_of_its_own(gru):
    view, _ = gru
    graph = view.model
    (group,) = [g for g in graph.groups if g.get("kind") == "loop"]
    depths = levels.box_depths(graph)
    assert depths[group["cluster"]] == 1 and levels.deepest(graph) == 2  # the model's depth, its cells' 2
    assert levels.loops(graph) == {group["cluster"]}
    top = levels.at_depth(graph, 0)  # the model folded: one node, the loop inside it
    assert [n.kind for n in top.nodes] == ["module"] and top.nodes[0].label == "model (GRULoop)"
    assert len(levels.at_depth(graph, 2).nodes) == len(graph.nodes)  # every operation


GRU_TOP = """
import torch

torch.manual_seed(0)
cells = torch.nn.ModuleList([torch.nn.GRUCell(4, 4) for _ in range(3)]).double()


def f(x):
    hs = [torch.zeros(1, 4, dtype=torch.float64) for _ in cells]
    for t in range(x.shape[0]):
        inp = x[t]
        for k, cell in enumerate(cells):
            hs[k] = cell(inp, hs[k])
            inp = hs[k]
    return inp.sum()
"""


def test_a_loop_at_the_top_opens_at_depth_0():
    need("torch")
    space: dict = {}
    exec(compile(GRU_TOP, "gru_top.py", "exec"), space)
    graph = gc.render.graph(space["f"], np.random.default_rng(2).normal(size=(5, 1, 4))).model
    (group,) = [g for g in graph.groups if g.get("kind") == "loop"]
    assert levels.box_depths(graph)[group["cluster"]] == 0
    shown = levels.at_depth(graph, 0)  # on main: the loop folded, one node for the whole function
    assert [n.label for n in shown.nodes if n.kind == "module"] == [f"cells.{k} (GRUCell) ×5" for k in range(3)]
    assert not _box(shown, group["cluster"]).get("collapsed")


# --- the colour key ----------------------------------------------------------------------------------


def test_key_marks_are_round_values():
    assert [t for _, t in key_marks(-3, -2)] == ["0.001", "0.003", "0.01"]
    assert [t for _, t in key_marks(0, 2)] == ["1", "3", "10", "30", "100"]
    assert [t for _, t in key_marks(-6, 0)] == ["1e-6", "1e-5", "1e-4", "1e-3", "1e-2", "1e-1", "1e0"]
    assert [t for _, t in key_marks(-8, 2)] == ["1e-8", "1e-6", "1e-4", "1e-2", "1e0", "1e2"]
    assert [a for a, _ in key_marks(-3, -2)] == [-3, math.log10(3) - 3, -2]


def _key(*args: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    result = CliRunner().invoke(app, ["graph", *args, "--color-by", "grad-norm", "--format", "dot"])
    assert result.exit_code == 0, result.output
    fills = dict(re.findall(r'\[label=<<b>([^<]*)</b>.*?fillcolor="(#[0-9a-f]{6})"', result.stdout))
    return fills, re.findall(r'<td bgcolor="(#[0-9a-f]{6})"[^>]*>([^<]*)</td>', result.stdout)


def test_the_key_of_nine_decades_is_labelled_every_second_decade():
    # x * y at x=1e-7, y=100: gradients 100 (x), 1e-7 (y), 1 (f): 1e-7 to 1e2, widened to 1e-8 for even marks
    fills, cells = _key("x * y", "--at", "x=1e-7,y=100")
    assert cells == [(scale_colour(k / 5), f"1e{e}") for k, e in enumerate(range(-8, 3, 2))] + [
        ("#d9d9d9", "0"), ("#ff7f7f", "NaN/inf")]  # fmt: skip
    assert fills["x"] == "#fdae61" and fills["y"] == scale_colour(0.1)  # 1e-7: a tenth of the scale


# --- a block drawn once for ×N is opened before it hides the model ------------------------------------

STEM_AND_BLOCKS = """
import torch
from torch import nn


class Stem(nn.Module):  # 100 operations of its own, no module inside: opened, a level too big
    def forward(self, x):
        for _ in range(50):
            x = torch.sin(x) * 1.01
        return x


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln, self.fc = nn.LayerNorm(4), nn.Linear(4, 4)

    def forward(self, x):
        return x + torch.tanh(self.fc(self.ln(x)))


torch.manual_seed(0)
stem, blocks = Stem(), nn.ModuleList(Block() for _ in range(12)).double()


def f(x):
    x = stem(x)
    for block in blocks:
        x = block(x)
    return x.sum()
"""


def test_a_block_drawn_once_opens_before_its_level_folds_it():
    need("torch")
    space: dict = {}
    exec(compile(STEM_AND_BLOCKS, "stem.py", "exec"), space)
    graph = gc.render.graph(space["f"], np.linspace(-1, 1, 8).reshape(2, 4)).model
    depths = levels.box_depths(graph)
    assert sorted(depths.values()) == [1, 1, 2, 2] and levels.drawn_count(graph, 1) > 100  # the stem open
    # most 40: depths 2 and 1 draw the stem's 100 operations; depth 0 folds blocks.0–11 ×12, most of the model
    first, *rest = levels.candidates(graph, 40)  # on main: depth 0 alone, four nodes
    assert first.depth == 0 and [len(g.nodes) for g in rest] == [4]
    assert [n.label for n in first.nodes if n.kind == "module"] == ["stem (Stem)", "blocks.0.ln (LayerNorm)",
                                                                    "blocks.0.fc (Linear)"]  # fmt: skip
    (block,) = [c for c in first.clusters if c.get("repeat") == 12]
    assert not block.get("collapsed") and block["label"].startswith("blocks.0–11 (Block) ×12")
    assert (
        "drawn at depth 0 (a block drawn once for ×N at depth 1), the deepest whose picture can be read"
        in (first.notes[0])
    )


@needs_dot
def test_the_keys_cells_are_as_wide_as_one_another_under_a_long_title():
    torch = need("torch")
    import graphviz

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh()).double()
    dot = gc.render.graph(lambda x: net(x).sum(), torch.ones(3, 2, dtype=torch.float64), color_by="grad-norm").dot()
    assert re.findall(r"<td bgcolor=[^>]*>([^<]*)</td>", dot) == ["0.1", "0.3", "1", "3", "10", "0", "NaN/inf"]
    svg = graphviz.Source(dot).pipe("svg").decode()
    key = svg[svg.index("gradcli_legend") :]
    cells = re.findall(r'<polygon fill="#[0-9a-f]{6}" stroke="transparent" points="([^"]+)"', key[: key.index("</g>")])
    widths = {round(np.ptp([float(p.split(",")[0]) for p in c.split()])) for c in cells}
    assert len(cells) == 7 and len(widths) == 1, widths  # (on main: 124 to 47 pt, the title's width spread unevenly)
