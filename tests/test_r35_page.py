"""The graph page of a real model (issue 35) in a real browser: a 12-block model opens folded and fits
the window; unfolding a block lays the graph out again in the browser (Graphviz in WebAssembly, inline)
with the block's nodes in place and the other blocks pushed aside; folding it again restores the
picture. The modules' table sorts by gradient norm (torch's own norms); colour-by NaN marks the nodes
whose value or gradient is not finite. A page with no box to fold carries no WebAssembly.

One headless Chromium for the module (tests/browser.py); GRADCLI_SCREENSHOTS=DIR keeps the screenshots.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from browser import SKIP, cli, new_driver, open_page, severe, shot

from tests.frameworks import need

torch = need("torch")

import gradcli as gc  # noqa: E402
from gradcli.render import relayout, views  # noqa: E402

pytestmark = SKIP
webdriver = pytest.importorskip("selenium.webdriver", reason="Selenium is not installed (pip install gradcli[browser])")
from selenium.webdriver.common.by import By  # noqa: E402

torch.set_num_threads(1)


class Block(torch.nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.fc = torch.nn.Linear(d, 2 * d)
        self.act = torch.nn.GELU()
        self.proj = torch.nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.proj(self.act(self.fc(self.ln(x))))


class Net(torch.nn.Module):
    def __init__(self, d: int = 8, blocks: int = 12) -> None:
        super().__init__()
        self.h = torch.nn.ModuleList([Block(d) for _ in range(blocks)])
        self.head = torch.nn.Linear(d, 1)

    def forward(self, x):
        for block in self.h:
            x = block(x)
        return self.head(x).sum()


@pytest.fixture(scope="module")
def browser():
    driver = new_driver(webdriver, 60, 30)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def model_page(tmp_path_factory):
    torch.manual_seed(0)
    net, x = Net(), torch.randn(4, 8)
    view = gc.render.graph(lambda x: net(x), x)  # (the page opens at depth 1: 12 blocks and the head)
    path = view.save(tmp_path_factory.mktemp("page") / "net.html")
    net(x).backward()  # torch's own gradients, for the table
    return path, view, net


def fold_state(browser) -> dict:
    return browser.execute_script(
        "var svg = document.querySelector('#canvas svg'), vb = svg.viewBox.baseVal;"
        "var boxes = {}; document.querySelectorAll('g.node[data-box]').forEach(function (g) {"
        "  var r = g.getBoundingClientRect(); boxes[g.dataset.box] = [r.left + r.width / 2, r.top + r.height / 2]; });"
        "var c = document.getElementById('canvas').getBoundingClientRect();"
        "var nodes = Array.from(document.querySelectorAll('g.node')).map(function (g) { return g.getBoundingClientRect(); });"
        "return {viewBox: [vb.width, vb.height], folds: boxes, ids: Array.from(document.querySelectorAll('g.node[data-id]'))"
        "  .map(function (g) { return g.dataset.id; }), scale: Math.min(c.width / vb.width, c.height / vb.height),"
        "  inside: nodes.every(function (r) { return r.left >= c.left - 1 && r.right <= c.right + 1 && r.top >= c.top - 1"
        "  && r.bottom <= c.bottom + 1; }), dot: gradcliPage.assemble()}"
    )


def settle(browser) -> None:
    browser.execute_async_script("gradcliPage.settled().then(arguments[0])")


def test_a_model_opens_folded_and_unfolds_a_block_with_a_new_layout(browser, model_page):
    path, view, _ = model_page
    blocks = [c for c in view.model.clusters if c["label"].endswith("(Block)")]
    text = path.read_text()
    assert 'id="gradcli-graphviz"' in text and len(text) > 800_000  # Graphviz in WebAssembly, inline: no network
    open_page(browser, path)
    opened = fold_state(browser)
    assert sorted(opened["folds"]) == sorted([b["id"] for b in blocks] + [c["id"] for c in view.model.clusters
                                                                           if c["label"].endswith("(Linear)") and c["parent"] == blocks[0]["parent"]])  # fmt: skip
    assert opened["inside"] and opened["scale"] > 0.4  # the whole folded model in the window, its text legible
    shot(browser, "r35-page-folded")
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0  # nothing fetched
    # the page's DOT for its boxes folded is Python's, to the byte
    base, folds = relayout.opening(view.model)
    parts = relayout.pieces(base, folds)
    assert opened["dot"] == relayout.assemble(parts, base, folds)

    third = blocks[3]["id"]
    inner = browser.execute_script("return gradcliPage.boxes.get(arguments[0]).members", third)
    assert len(inner) == 13  # LayerNorm 3, Linear 4 and 4 (weight, t, bias, addmm), GELU 1, the residual add
    assert not set(inner) & set(opened["ids"])
    layers = [c["id"] for c in view.model.clusters if c["parent"] == third]  # ln, fc, act, proj
    click = "document.querySelector('g.node[data-box=\"' + arguments[0] + '\"]').dispatchEvent(new MouseEvent('click', {bubbles: true}))"
    browser.execute_script(click, third)
    settle(browser)
    unfolded = fold_state(browser)
    assert unfolded["viewBox"] != opened["viewBox"]  # laid out again: a new picture
    assert browser.find_elements(By.CSS_SELECTOR, f'g.cluster[data-cluster="{third}"]')
    assert third not in unfolded["folds"] and set(layers) <= set(unfolded["folds"])  # one level at a time
    assert set(unfolded["ids"]) - set(opened["ids"]) == {inner[-1]}  # the residual add, in place
    moved = [
        b for b in opened["folds"] if b != third and unfolded["folds"][b] != pytest.approx(opened["folds"][b], abs=2)
    ]
    assert len(moved) >= 8  # the other blocks pushed aside
    fc = layers[1]
    browser.execute_script(click, fc)
    settle(browser)
    deeper = fold_state(browser)
    fc_nodes = browser.execute_script("return gradcliPage.boxes.get(arguments[0]).members", fc)
    assert len(fc_nodes) == 4 and set(fc_nodes) <= set(deeper["ids"]) and fc not in deeper["folds"]
    assert deeper["viewBox"] != unfolded["viewBox"]
    shot(browser, "r35-page-unfolded")
    browser.execute_script(  # its own label folds it again
        "Array.from(document.querySelectorAll('g.cluster[data-cluster=\"' + arguments[0] + '\"] > text'))[0]"
        ".dispatchEvent(new MouseEvent('click', {bubbles: true}))",
        third,
    )
    settle(browser)
    again = fold_state(browser)
    assert (
        again["dot"] == opened["dot"]
        and sorted(again["ids"]) == sorted(opened["ids"])
        and sorted(again["folds"]) == sorted(opened["folds"])
    )
    assert again["viewBox"][1] < unfolded["viewBox"][1]
    assert severe(browser) == []


def test_the_modules_table_sorts_by_torchs_gradient_norms(browser, model_page):
    path, view, net = model_page
    open_page(browser, path)
    browser.find_element(By.CSS_SELECTOR, '#modules th[data-sort="norm"]').click()
    rows = browser.execute_script(
        "return Array.from(document.querySelectorAll('#modules tbody tr')).map(function (tr) {"
        "  var r = gradcliPage.modules.find(function (m) { return m.box === tr.dataset.box; });"
        "  return [r.path, r.of, r.norm, tr.querySelector('[data-key=norm]').textContent]; })"
    )
    with_params = [r for r in rows if r[1] == "parameters"]
    modules = dict(net.named_modules())  # (the page names them from the function: net, net.h.0, ...)
    torch_norms = {
        path: float(np.sqrt(sum(float(p.grad.double().norm()) ** 2 for p in modules[path[4:]].parameters())))
        for path in (r[0] for r in with_params)
    }
    assert len(with_params) == 1 + 12 * 4 + 1 and sorted(r[0] for r in rows if r[1] == "output") == sorted(
        f"net.h.{k}.act" for k in range(12)
    )
    assert [r[0] for r in with_params] == sorted(torch_norms, key=torch_norms.get, reverse=True)
    assert [r[2] for r in with_params] == pytest.approx([torch_norms[r[0]] for r in with_params], rel=1e-5)
    assert len(rows) == len(view.model.clusters) and rows[0][3] == re.sub(r"\.?0+$", "", f"{rows[0][2]:.3g}")
    row = browser.find_element(By.CSS_SELECTOR, f'#modules tr[data-box="{view.model.clusters[-2]["id"]}"]')
    row.click()  # a row opens its box
    settle(browser)
    assert browser.find_elements(By.CSS_SELECTOR, f'g.cluster[data-cluster="{view.model.clusters[-2]["id"]}"]')
    assert severe(browser) == []


NAN_MODEL = """
import torch

w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)


def f(x):
    r = torch.sqrt(x) * w
    return (r * 2).sum() + (x * 3).sum()
"""


def test_colour_by_nan_marks_the_nodes_that_are_not_finite_and_a_small_page_has_no_wasm(browser, tmp_path):
    model = tmp_path / "nan_model.py"
    model.write_text(NAN_MODEL)
    out = tmp_path / "nan.html"
    cli("graph", f"{model}:f", "--at", "x=[4,-1,9]", "-o", str(out))
    assert 'id="gradcli-graphviz"' not in out.read_text() and out.stat().st_size < 100_000
    data = gc.render.graph(lambda x: __import__("torch").sqrt(x), torch.tensor([1.0]))  # (the library too: no boxes)
    assert not relayout.wanted(data.model)
    open_page(browser, out)
    browser.execute_script(
        "var s = document.getElementById('color-by'); s.value = 'nan'; s.dispatchEvent(new Event('change'))"
    )
    red = browser.execute_script(
        "return gradcliPage.model.nodes.filter(function (n) { var s = n.el && n.el.querySelector('polygon, ellipse, path');"
        " return s && s.getAttribute('fill') === '#ff4d4d'; }).map(function (n) { return n.id; })"
    )
    nodes = browser.execute_script("return gradcliPage.model.nodes")

    def bad(v):
        return v is not None and not np.all(np.isfinite(np.asarray(v, dtype=float)))

    expected = [n["id"] for n in nodes if bad(n["value"]) or bad(n["grad"])]
    assert red == expected and len(expected) >= 3  # sqrt(-1) = NaN, and the NaN it sends back
    assert "NaN or inf" in browser.find_element(By.ID, "legend").text
    shot(browser, "r35-page-nan")
    xw = tmp_path / "xw.html"
    cli("graph", "x * w", "--at", "x=2,w=3", "-o", str(xw))
    assert 'id="gradcli-graphviz"' not in xw.read_text() and xw.stat().st_size < 100_000  # (the wasm alone is 815 KB)
    assert severe(browser) == []


def test_a_page_drawn_at_a_depth_unfolds_what_the_depth_folded():
    torch.manual_seed(0)
    net, x = Net(blocks=3), torch.randn(4, 8)
    view = gc.render.graph(lambda x: net(x), x, depth=2)  # each block's four layers folded
    assert sum(n.kind == "module" for n in view.model.nodes) == 3 * 4
    base, folds = relayout.opening(view.model)
    assert len(base.nodes) == 3 * 13 + 1 + 4 + 1 and len(folds) == 3 * 4  # the whole graph, the depth's boxes folded
    parts = relayout.pieces(base, folds)
    page_dot = relayout.assemble(parts, base, folds)
    static_dot = views.dot(view.model)
    drawn = dict(re.findall(r"^\s*fold_(m\d+) (\[.*\])$", page_dot, re.M))
    assert sorted(drawn) == sorted(folds)  # each folded box drawn as the static picture draws it
    assert all(f"\t{box} {statement}" in static_dot for box, statement in drawn.items())
