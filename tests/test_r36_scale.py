"""Issue 36, part 2 ("at a model's size"): ``check`` of a loss in many weights goes along random directions
(the directional derivative by Richardson differences and the complex step against the gradient projected
on each direction), then element by element only where a direction disagrees, to name the wrong elements;
``--blame`` names the wrong custom Function at that size; float32 raises no false alarm; the planted 1e-6
bugs are still caught, element by element and along directions."""

from __future__ import annotations

import json

import numpy as np
import pytest
from frameworks import need
from typer.testing import CliRunner

from gradcli.check.directions import DIRECTIONS, ELEMENTWISE_UP_TO, directions_asked, directions_for
from gradcli.check.run import check
from gradcli.cli.app import app
from gradcli.errors import UsageError
from gradcli.lang.program import load

runner = CliRunner()

MODELS = '''
import numpy as np
import torch

BUG = {"name": None, "factor": 1.0, "element": None}  # the Function made wrong, by what factor, where


def rule(name, f, df):
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        grad = g * df(x)
        if BUG["name"] == name:
            grad = grad.clone()
            if BUG["element"] is None:
                grad *= BUG["factor"]
            else:
                grad.view(-1)[BUG["element"]] *= BUG["factor"]
        return grad

    def forward(ctx, x):
        ctx.save_for_backward(x)
        return f(x)

    return type(name, (torch.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})


Cube = rule("Cube", lambda x: x**3, lambda x: 3 * x**2)
Quartic = rule("Quartic", lambda x: x * x * x * x / 4, lambda x: x * x * x)
Square = rule("Square", lambda x: x * x, lambda x: 2 * x)


def model(w1, w2, w3):
    """Three custom Functions, one per weight tensor."""
    return Cube.apply(w1).mean() + (Quartic.apply(w2) * w2).mean() + Square.apply(w3).mean()


data = np.random.default_rng(0).standard_normal((32, 100_000)) / 300.0
X = torch.tensor(data)
Y = torch.tensor(np.linspace(-1.0, 1.0, 32))


def linear(w):
    """A least-squares loss in 10^5 weights."""
    r = X @ w - Y
    return (r * r).mean()


def float32(w):
    """The same loss computed in float32."""
    r = X.float() @ w.float() - Y.float()
    return (r * r).mean()
'''

JAX_LOSS = """
import jax.numpy as jnp


def loss(w):
    return jnp.mean(jnp.tanh(w.reshape(-1, 10) @ jnp.linspace(-1.0, 1.0, 10)) ** 2) + jnp.mean(jnp.sin(w) * w)
"""


@pytest.fixture
def models(tmp_path, monkeypatch):
    need("torch")
    (tmp_path / "models.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    program = load("models.py:model")
    module = program.function.__globals__  # the user's module, as gradcli imported it
    yield program, module
    module["BUG"].update(name=None, factor=1.0, element=None)


def weights(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {"w1": rng.standard_normal(n // 3), "w2": rng.standard_normal((n // 30, 10)), "w3": rng.standard_normal(n - n // 3 - n // 30 * 10)}  # fmt: skip


def test_a_linear_model_in_1e5_weights_checks_ok_by_directions(tmp_path, monkeypatch):
    """Before: 8n+3 calls (800,003 here; 39 s at n = 10^4): now 8 directions, the JSON says so."""
    torch = need("torch")
    (tmp_path / "models.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    w = np.random.default_rng(2).standard_normal(100_000) * 0.1
    np.save(tmp_path / "w.npy", w)
    shown = runner.invoke(app, ["check", "models.py:linear", "--at", "w=@w.npy", "--json"])
    assert shown.exit_code == 0, shown.output
    found = json.loads(shown.stdout)
    assert (found["ok"], found["method"], found["directions"]) == (True, "directions", DIRECTIONS)
    assert found["verdict"].startswith("OK: PyTorch agrees with finite differences along 8 random directions")
    # the gradient is PyTorch's, whole; the projections are it . u_k
    wt = torch.tensor(w, requires_grad=True)
    space: dict = {}
    exec(MODELS, space)
    (expected,) = torch.autograd.grad(space["linear"](wt), wt)
    assert np.array_equal(np.array(found["gradient"]["w"]), expected.numpy())
    along = np.array(found["along"]["along"])
    assert along.shape == (DIRECTIONS,) and np.all(along != 0)
    fd = np.array(found["checks"]["finite_difference"]["values"]["along"])
    np.testing.assert_allclose(fd, along, rtol=1e-7)


def test_the_choice_of_directions():
    """Elementwise up to ELEMENTWISE_UP_TO elements, then directions; --directions forces either."""
    assert [directions_for(n, None) for n in (1, ELEMENTWISE_UP_TO, ELEMENTWISE_UP_TO + 1)] == [0, 0, DIRECTIONS]
    assert [directions_for(10**6, 0), directions_for(5, 3), directions_for(0, 3)] == [0, 3, 0]
    forced = check(load("sum(sin(w) * w)"), {"w": np.linspace(0.1, 1.0, 5)}, directions=3).to_dict()
    assert (forced["method"], forced["directions"], forced["ok"]) == ("directions", 3, True)
    assert {n: c["ok"] for n, c in forced["checks"].items()} == {
        "sympy": True,
        "finite_difference": True,
        "complex_step": True,
    }  # SymPy projected too
    assert [directions_asked(t) for t in ("elementwise", "0", "12", None)] == [0, 0, 12, None]
    with pytest.raises(UsageError, match="--directions must be a number of directions from 1 to 1000"):
        directions_asked("many")
    shown = runner.invoke(app, ["check", "x^2", "--at", "x=1", "--directions", "many"])
    assert shown.exit_code == 2 and "error: --directions must be" in shown.output
    shown = runner.invoke(
        app,
        [
            "check",
            "sum(w^3)",
            "--at",
            "w=[" + ",".join(f"{v:.4f}" for v in np.linspace(-1, 1, 600)) + "]",
            "--method",
            "fd",
        ],
    )
    assert (
        shown.exit_code == 0 and "OK: autograd agrees with finite differences along 8 random directions" in shown.stdout
    )
    shown = runner.invoke(app, ["check", "sum(w^3)", "--at", "w=[1,2]", "--directions", "elementwise", "--json"])
    assert json.loads(shown.stdout)["method"] == "elementwise"


def test_a_1e_4_error_in_one_function_of_three_is_a_mismatch_blamed_by_name(models):
    """10^5 weights, three custom Functions, Quartic's backward 1e-4 off: MISMATCH, the search names
    elements of w2, and --blame names Quartic with its line."""
    program, module = models
    module["BUG"].update(name="Quartic", factor=1 + 1e-4)
    given = weights(100_000)
    result = check(program, given, blame=True)
    found = result.to_dict()
    assert found["ok"] is False and found["method"] == "directions"
    assert found["verdict"].startswith("MISMATCH: d/du")
    assert found["blame"]["op"] == "Quartic" and found["blame"]["line"].startswith("models.py:")
    located = found["along"]["localised"]
    assert located["parts"] == {"w1": True, "w2": False, "w3": True}
    assert located["wrong"] and all(w["element"].startswith("w2[") for w in located["wrong"])
    for wrong in located["wrong"]:  # PyTorch's gradient is off by 1e-4 of the part that flows through Quartic
        w = given["w2"][tuple(int(i) for i in wrong["element"][3:-1].split(","))]
        through = w / given["w2"].size * w**3
        assert wrong["autograd"] - wrong[located["method"]] == pytest.approx(1e-4 * through, rel=1e-4)


def test_one_wrong_element_is_named(models):
    """Only w3[1234]'s gradient is wrong (by 1e-3): the bisection names exactly that element."""
    program, module = models
    module["BUG"].update(name="Square", factor=1 + 1e-3, element=1234)
    result = check(program, weights(30_000), methods=["complex"])
    assert result.ok is False
    located = result.to_dict()["along"]["localised"]
    assert [w["element"] for w in located["wrong"]] == ["w3[1234]"]
    assert located["parts"] == {"w1": True, "w2": True, "w3": False}
    w3 = weights(30_000)["w3"]
    assert located["wrong"][0]["complex_step"] == pytest.approx(2 * w3[1234] / w3.size, rel=1e-13)
    assert "found by bisection: d/dw3[1234]" in result.verdict()


@pytest.mark.parametrize(("n", "method"), [(30, "elementwise"), (3000, "directions")])
def test_a_1e_6_error_is_still_caught(models, n, method):
    """Cube's backward 1e-6 off (a third of the weights): caught element by element at small n, and along
    directions at medium n (there it is 1e-6 of a third of each projection: above rtol 1e-7, and the
    differences' own error is near 1e-11). An error diluted below rtol in every projection (1e-6 in one
    element of 3000) is not seen by the directions: only --directions elementwise sees it."""
    program, module = models
    module["BUG"].update(name="Cube", factor=1 + 1e-6)
    found = check(program, weights(n), methods=["fd"]).to_dict()
    assert (found["ok"], found["method"]) == (False, method)
    assert found["verdict"].startswith("MISMATCH")


def test_float32_raises_no_false_alarm(tmp_path, monkeypatch):
    """A least-squares loss computed in float32, 10^5 weights: judged at float32's tolerance, OK (element by
    element, finite differences of 1e-3 gradients under a loss of 1 lose to float32's rounding: INCONCLUSIVE)."""
    need("torch")
    (tmp_path / "models.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    w = np.random.default_rng(3).standard_normal(100_000) * 0.1
    found = check(load("models.py:float32"), {"w": w}, methods=["fd"]).to_dict()
    assert (found["ok"], found["method"]) == (True, "directions"), found["verdict"]
    assert found["rtol"] == 3e-3


def test_a_jax_function_is_checked_by_directions(tmp_path, monkeypatch):
    jax = need("jax")
    (tmp_path / "jloss.py").write_text(JAX_LOSS)
    monkeypatch.chdir(tmp_path)
    w = np.random.default_rng(4).standard_normal(5_000)
    result = check(load("jloss.py:loss"), {"w": w})
    found = result.to_dict()
    assert (found["ok"], found["method"], found["framework"]) == (True, "directions", "jax"), found["verdict"]
    space: dict = {}
    exec(JAX_LOSS, space)
    expected = np.asarray(jax.grad(space["loss"])(jax.numpy.asarray(w)))
    np.testing.assert_allclose(found["gradient"]["w"], expected, rtol=1e-15, atol=1e-18)
