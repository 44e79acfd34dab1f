"""The graph page in a real browser: Debian's headless Chromium driven by Selenium.

The browser and its driver are the system's (/usr/bin/chromium, /usr/bin/chromedriver, from
``apt-get install chromium chromium-driver``), named explicitly so Selenium Manager never
downloads one; without them, or without Selenium or Graphviz, these tests are skipped.
One browser session serves the module. Set GRADCLI_SCREENSHOTS=DIR to keep screenshots.
"""

from __future__ import annotations

import json
import math

import pytest
from browser import SKIP, cli, new_driver, open_page, severe, shot

import gradcli as gc
from gradcli.render import graph, recording

SEED_002 = "a = x + w; b = w + 1; y = a * b"

pytestmark = SKIP
webdriver = pytest.importorskip("selenium.webdriver", reason="Selenium is not installed (pip install gradcli[browser])")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402


@pytest.fixture(scope="module")
def browser():
    driver = new_driver(webdriver, 60)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def seed_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("page") / "seed002.html"
    cli("graph", SEED_002, "--at", "x=2,w=1", "-o", str(out))
    return out


def node(browser, name: str):
    node_id = browser.execute_script("return gradcliPage.find(arguments[0]).id", name)
    return browser.find_element(By.CSS_SELECTOR, f'g.node[data-id="{node_id}"]')


def field(browser, name: str) -> str:
    return browser.find_element(By.CSS_SELECTOR, f'#details [data-field="{name}"]').text


def visible(element) -> bool:
    return element.value_of_css_property("visibility") != "hidden"


def test_the_page_opens_without_console_errors(browser, seed_page):
    open_page(browser, seed_page)
    assert severe(browser) == []
    assert browser.title == "gradcli graph: y = a * b"
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg g.node")) == 6
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg g.edge[data-edge]")) == 6  # every edge found its element
    shot(browser, "seed002")


def test_clicking_a_node_shows_what_the_cli_says(browser, seed_page):
    open_page(browser, seed_page)
    cli_json = json.loads(cli("graph", SEED_002, "--at", "x=2,w=1", "--json").stdout)
    w = next(n for n in cli_json["nodes"] if n["name"] == "w")
    b = next(n for n in cli_json["nodes"] if n["name"] == "b")
    node(browser, "w").click()
    assert field(browser, "title") == "w"
    assert (float(field(browser, "value")), float(field(browser, "grad"))) == (w["value"], w["grad"])
    assert field(browser, "grad_parts") == "2 + 3"
    assert field(browser, "consumers").splitlines() == [
        "a = x + w ∂a/∂w = 1 sends back 2",
        "b = w + 1 ∂b/∂w = 1 sends back 3",
    ]
    node(browser, "b").click()
    assert [field(browser, key) for key in ("id", "op", "grad_fn", "shape", "saved")] == [
        b["id"], "add", b["grad_fn"], "scalar", "nothing",
    ]  # fmt: skip
    assert float(field(browser, "value")) == b["value"] and float(field(browser, "grad")) == b["grad"]
    assert field(browser, "inputs").splitlines() == ["w ∂b/∂w = 1", "1"]
    node(browser, "y").click()
    assert field(browser, "saved") == "its inputs — freed by backward()"
    # its paths: b's path to the output, and down to the leaves w and 1
    node(browser, "b").click()
    assert len(browser.find_elements(By.CSS_SELECTOR, "g.edge.to-output")) == 1
    assert len(browser.find_elements(By.CSS_SELECTOR, "g.edge.to-leaves")) == 2
    assert len(browser.find_elements(By.CSS_SELECTOR, "g.node.on-path")) == 4  # b, y, w, 1
    shot(browser, "seed002_selected")
    assert severe(browser) == []


def test_stepping_plays_the_forward_then_the_backward_pass(browser, seed_page):
    open_page(browser, seed_page)
    status = browser.find_element(By.ID, "status")
    value_a = node(browser, "a").find_element(By.XPATH, ".//*[starts-with(text(), 'value ')]")
    grad_w = node(browser, "w").find_element(By.XPATH, ".//*[starts-with(text(), 'grad ')]")
    browser.find_element(By.ID, "step-first").click()
    assert status.text.startswith("Before the forward pass") and not visible(value_a)
    for _ in range(3):
        browser.find_element(By.ID, "step-next").click()
    assert status.text == "forward 3/5: a = x + w from x, w = 3" and visible(value_a)
    assert "current" in node(browser, "a").get_attribute("class")
    body = browser.find_element(By.TAG_NAME, "body")
    for _ in range(3):
        body.send_keys(Keys.ARROW_RIGHT)  # b, y, then y's backward step
    assert status.text.startswith(
        "backward 1/3: y = a * b has its gradient 1; it sends back: a gets 2 (1 × ∂y/∂a = b = 2)"
    )
    assert not visible(grad_w)
    body.send_keys(Keys.ARROW_RIGHT)  # b sends 3 to w: w's sum is forming
    assert status.text.endswith("w gets 3 (3 × ∂b/∂w = 1) [1 of 2 paths summed]")
    assert visible(grad_w) and grad_w.text == "grad 3 + …"
    shot(browser, "seed002_backward")
    body.send_keys(Keys.ARROW_RIGHT)  # a sends 2: the sum is whole
    assert grad_w.text == "grad 5 = 2 + 3" and status.text == ""  # the end: the whole picture again
    body.send_keys(Keys.ARROW_LEFT)
    assert grad_w.text == "grad 3 + …"
    browser.find_element(By.ID, "step-last").click()
    assert grad_w.text == "grad 5 = 2 + 3" and visible(value_a)
    assert severe(browser) == []


def test_search_finds_a_node_by_name_id_or_expression(browser, seed_page):
    open_page(browser, seed_page)
    search = browser.find_element(By.ID, "search")
    search.send_keys("b", Keys.ENTER)
    assert field(browser, "title") == "b = w + 1"
    search.clear()
    search.send_keys("x + w", Keys.ENTER)
    assert field(browser, "title") == "a = x + w"
    search.clear()
    search.send_keys("MulBackward", Keys.ENTER)
    assert field(browser, "title") == "y = a * b"
    search.clear()
    search.send_keys("nothing like it", Keys.ENTER)
    assert "missing" in search.get_attribute("class") and field(browser, "title") == "y = a * b"
    assert severe(browser) == []


def test_zoom_and_groups(browser, tmp_path):
    x = gc.tensor(2.0, requires_grad=True, name="x")
    with recording() as trace:
        y = gc.sin(x) * x + gc.exp(x)
    view = graph(y, trace=trace)
    sin_mul = [n.id for n in view.nodes if n.op in ("sin", "mul")]
    view.model.groups = [{"id": "g1", "label": "sin(x) * x", "members": sin_mul, "count": 2, "collapsed": True}]
    open_page(browser, view.save(tmp_path / "groups.html"))
    button = browser.find_element(By.CSS_SELECTOR, '#groups button[data-group="g1"]')
    assert button.text == "▸ sin(x) * x ×2"
    assert [node(browser, n).is_displayed() for n in ("sin(x)", "exp(x)")] == [False, True]
    button.click()
    assert button.text == "▾ sin(x) * x ×2" and node(browser, "sin(x)").is_displayed()
    browser.execute_script(
        "document.getElementById('canvas').dispatchEvent(new WheelEvent('wheel', {deltaY: -400, clientX: 300, clientY: 300, bubbles: true, cancelable: true}))"
    )
    zoomed = browser.execute_script("return gradcliPage.view()")
    scale = math.exp(400 * 0.0015)
    corner = browser.execute_script(
        "var r = document.getElementById('canvas').getBoundingClientRect(); return [r.left, r.top]"
    )
    assert zoomed["s"] == pytest.approx(scale)  # about the mouse: the point under it stays put
    assert (zoomed["x"], zoomed["y"]) == pytest.approx(
        ((300 - corner[0]) * (1 - scale), (300 - corner[1]) * (1 - scale))
    )
    node(browser, "exp(x)").click()  # a node stays clickable where it is drawn
    assert field(browser, "title").endswith("= exp(x)")
    browser.find_element(By.ID, "fit").click()
    assert browser.execute_script("return gradcliPage.view()") == {"x": 0, "y": 0, "s": 1}
    assert severe(browser) == []
