"""Ordinary inputs and outputs of ``gc.render.graph`` (issue 35): a model or a pytree holding ints,
flags, functions and PRNG keys as an argument (the arrays inputs named by their paths, the rest
static), a model given as the function itself, a ``functools.partial``; a model's output object
(Hugging Face's ``ModelOutput`` holding a ``DynamicCache``) drawn from its ``loss`` (else ``logits``)
with a note naming what was left out; a torch function given lists and dicts of tensors. Every
gradient is compared with ``jax.grad``'s / ``torch.autograd.grad``'s."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections import OrderedDict

import numpy as np
import pytest
from frameworks import need

import gradcli as gc
from gradcli.errors import UsageError

W = np.array([[0.5, -0.3, 0.1], [0.2, 0.4, -0.6]])
B = np.array([0.3, -0.2])
X = np.array([0.5, -1.0, 2.0])


def named(view, name):
    return next(n for n in view.nodes if n.name == name)


# --- JAX: pytree arguments with static leaves, keys, a model as the function -----------------------


def test_an_equinox_model_with_int_bool_and_function_fields_is_drawn_with_jaxs_gradients():
    jax = need("jax")
    eqx = pytest.importorskip("equinox", reason="the equinox tests need equinox (CI installs it)")
    import jax.numpy as jnp

    class Net(eqx.Module):
        weight: jax.Array
        bias: jax.Array
        steps: int  # (a Python int field: a leaf of the pytree, used by range)
        residual: bool
        act: object
        drop: eqx.nn.Dropout

        def __call__(self, x):
            for _ in range(self.steps):
                h = self.drop(self.act(self.weight @ x + self.bias))
                x = x[:2] + h if self.residual else h
            return jnp.sum(x**2)

    net = Net(jnp.asarray(W[:, :2]), jnp.asarray(B), 2, True, jnp.tanh, eqx.nn.Dropout(0.5, inference=True))
    view = gc.render.graph(lambda m, x: m(x), net, X[:2])  # (failed: a traced int given to range)
    grads = eqx.filter_grad(lambda m, x: m(x))(net, jnp.asarray(X[:2]))
    np.testing.assert_allclose(named(view, "weight").grad, grads.weight, rtol=1e-13)
    np.testing.assert_allclose(named(view, "bias").grad, grads.bias, rtol=1e-13)
    np.testing.assert_allclose(view.model.node(view.model.outputs[0]).value, net(jnp.asarray(X[:2])), rtol=1e-13)
    assert not any(n.name in ("steps", "residual") for n in view.nodes)  # (static: no input of the graph)


def test_a_dict_argument_with_a_flag_and_a_function_keeps_them_static():
    jax = need("jax")
    import jax.numpy as jnp

    def f(p, x):
        y = p["act"](jnp.asarray(W) @ x * p["w"])
        return jnp.sum(y) if p["flag"] else -jnp.sum(y)

    p = {"w": np.array(1.5), "flag": True, "act": jnp.sin, "name": "layer"}
    view = gc.render.graph(f, p, X)  # (failed: a traced bool's truth value asked)
    expected = jax.grad(lambda w, x: f({**p, "w": w}, x), argnums=(0, 1))(jnp.asarray(1.5), jnp.asarray(X))
    np.testing.assert_allclose(named(view, "p['w']").grad, expected[0], rtol=1e-13)
    np.testing.assert_allclose(named(view, "x").grad, expected[1], rtol=1e-13)


def test_a_python_int_given_to_a_jit_static_argument_stays_an_int():
    jax = need("jax")
    import jax.numpy as jnp

    powed = jax.jit(lambda x, n: jnp.sum(x**n), static_argnums=1)
    view = gc.render.graph(powed, X, 3)  # (failed: a tracer given as a static argument: not hashable)
    np.testing.assert_allclose(named(view, "x").grad, 3 * X**2, rtol=1e-15)


def test_prng_keys_given_or_made_inside_are_drawn_with_their_key_data():
    jax = need("jax")
    import jax.numpy as jnp

    def f(x, key):
        made = jax.random.key_data(jax.random.key(7))[-1]  # (a key made inside: 7's data is [0, 7])
        return jnp.sum(x * jax.random.normal(key, (3,))) + jnp.sum(x) * made

    key = jax.random.key(3)
    view = gc.render.graph(f, X, key)  # (failed: a key array made NumPy)
    np.testing.assert_allclose(named(view, "x").grad, jax.random.normal(key, (3,)) + 7.0, rtol=1e-13)
    np.testing.assert_array_equal(named(view, "key").value, jax.random.key_data(key))
    assert "key" in view.text()


def test_an_nnx_model_holding_rngs_is_drawn_with_jaxs_gradients():
    jax = need("jax")
    nnx = pytest.importorskip("flax.nnx", reason="the flax tests need flax (CI installs it)")
    import jax.numpy as jnp

    class Net(nnx.Module):
        def __init__(self):
            self.w = nnx.Param(jnp.asarray(W))
            self.drop = nnx.Dropout(0.5, rngs=nnx.Rngs(dropout=0))  # (its key and count: leaves of the tree)

        def __call__(self, x):
            return jnp.sum(jnp.tanh(self.drop(self.w @ x)))

    net = Net()
    net.eval()
    view = gc.render.graph(lambda m, x: m(x), net, X)  # (failed: the dropout's key made NumPy)
    graphdef, params, rest = nnx.split(net, nnx.Param, ...)
    grads = jax.grad(lambda p: nnx.merge(graphdef, p, rest)(jnp.asarray(X)))(params)
    np.testing.assert_allclose(named(view, "w").grad, grads["w"][...], rtol=1e-13)


def test_a_model_given_as_the_function_has_its_arrays_as_inputs_named_by_their_paths():
    jax = need("jax")
    eqx = pytest.importorskip("equinox", reason="the equinox tests need equinox (CI installs it)")
    import jax.numpy as jnp

    class Affine(eqx.Module):
        weight: jax.Array
        bias: jax.Array

        def __call__(self, x):
            return jnp.sum(jnp.tanh(self.weight @ x + self.bias))

    model = Affine(jnp.asarray(W), jnp.asarray(B))
    view = gc.render.graph(model, X)  # (was: its arrays anonymous constants, no gradient)
    grads = eqx.filter_grad(lambda m, x: m(x))(model, jnp.asarray(X))
    np.testing.assert_allclose(named(view, "weight").grad, grads.weight, rtol=1e-13)
    np.testing.assert_allclose(named(view, "bias").grad, grads.bias, rtol=1e-13)
    assert [c["path"] for c in view.model.clusters if "path" in c] == ["model"]


AFFINE = """
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


class Affine(eqx.Module):
    weight: jax.Array
    bias: jax.Array

    def __call__(self, x):
        return jnp.sum(jnp.tanh(self.weight @ x + self.bias))


model = Affine(jnp.asarray([[0.5, -0.3, 0.1], [0.2, 0.4, -0.6]]), jnp.asarray([0.3, -0.2]))
"""


def test_the_cli_draws_a_model_given_as_file_py_model_with_its_arrays_named_by_their_paths(tmp_path):
    need("jax")
    eqx = pytest.importorskip("equinox", reason="the equinox tests need equinox (CI installs it)")
    import jax.numpy as jnp
    from typer.testing import CliRunner

    from gradcli.cli.app import app

    path = tmp_path / "affine.py"
    path.write_text(AFFINE)
    result = CliRunner().invoke(app, ["graph", f"{path}:model", "--at", "x=[0.5,-1,2]", "--format", "json"])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    nodes = {n["name"]: n for n in json.loads(result.stdout)["nodes"] if n["kind"] == "variable"}
    namespace: dict = {}
    exec(compile(AFFINE, str(path), "exec"), namespace)
    grads = eqx.filter_grad(lambda m, x: m(x))(namespace["model"], jnp.asarray(X))
    np.testing.assert_allclose(nodes["weight"]["grad"], grads.weight, rtol=1e-13)  # (was: anonymous constants)
    np.testing.assert_allclose(nodes["bias"]["grad"], grads.bias, rtol=1e-13)


def test_a_partial_of_a_jax_function_is_drawn():
    need("jax")
    import jax.numpy as jnp

    view = gc.render.graph(functools.partial(lambda s, x: jnp.sum(jnp.sin(x) * s), 3.0), X)  # (failed: '_edge')
    np.testing.assert_allclose(named(view, "x").grad, 3.0 * np.cos(X), rtol=1e-13)


def test_a_jax_function_returning_no_array_is_one_usage_error_and_a_string_beside_one_is_left_out():
    need("jax")
    import jax.numpy as jnp

    def nothing(x):
        jnp.sum(x)

    with pytest.raises(UsageError, match=r"^nothing returned None, not JAX arrays: nothing to draw$"):
        gc.render.graph(nothing, X)
    with pytest.raises(UsageError, match=r"^<lambda> returned str, not JAX arrays: nothing to draw$"):
        gc.render.graph(lambda x: "done" if jnp.ndim(x) else "empty", X)  # (was: a TypeError from JAX)
    view = gc.render.graph(lambda x: {"loss": jnp.sum(x**2), "name": "mse"}, X)
    assert "left out what <lambda> returned that is not an array: ['name'] (str)" in view.model.notes
    np.testing.assert_allclose(named(view, "x").grad, 2 * X, rtol=1e-15)


# --- torch: a model's output object, containers in and out ----------------------------------------


class FakeLayer:
    """A cache's layer as transformers' DynamicLayer holds it: its keys and values."""

    def __init__(self, keys, values):
        self.keys, self.values, self.device = keys, values, None


class FakeCache:
    """A cache as transformers' DynamicCache: tensors in a list of layers, not a tensor itself."""

    def __init__(self, layers):
        self.layers = layers
        self.offloading = False


@dataclasses.dataclass
class FakeOutput(OrderedDict):
    """As transformers' ModelOutput: an ordered dict and a dataclass."""

    loss: object = None
    logits: object = None
    past_key_values: object = None

    def __post_init__(self):
        for f in dataclasses.fields(self):
            if getattr(self, f.name) is not None:
                self[f.name] = getattr(self, f.name)


def _language_model(torch):
    weight = torch.tensor(W, requires_grad=True)
    x = torch.tensor(X)
    logits = torch.tanh(weight @ x)
    cache = FakeCache([FakeLayer(logits[:1] * 2, logits[1:] * 3)])
    return weight, logits, cache


def test_a_model_output_object_is_drawn_from_its_loss_with_a_note_naming_the_rest():
    torch = need("torch")
    weight, logits, cache = _language_model(torch)
    loss = (logits**2).mean()
    out = FakeOutput(loss=loss, logits=logits, past_key_values=cache)
    view = gc.render.graph(out)  # (failed: "a graph of PyTorch tensors: got FakeCache" / '_edge')
    (expected,) = torch.autograd.grad(loss, weight, retain_graph=True)
    assert [view.model.node(o).value for o in view.model.outputs] == [pytest.approx(loss.item(), rel=1e-15)]
    np.testing.assert_allclose(named(view, "weight").grad, expected.numpy(), rtol=1e-15)
    assert view.model.notes[0] == (
        "drawn from FakeOutput.loss; left out logits, past_key_values: gc.render.graph(out.logits) draws one of them"
    )


def test_without_a_loss_the_logits_are_drawn_and_a_cache_alone_gives_its_tensors():
    torch = need("torch")
    weight, logits, cache = _language_model(torch)
    view = gc.render.graph(FakeOutput(logits=logits, past_key_values=cache))
    (expected,) = torch.autograd.grad(logits.sum(), weight, retain_graph=True)
    np.testing.assert_allclose(view.model.node(view.model.outputs[0]).value, logits.detach().numpy(), rtol=1e-15)
    np.testing.assert_allclose(named(view, "weight").grad, expected.numpy(), rtol=1e-15)
    assert "drawn from FakeOutput.logits; left out past_key_values: gc.render.graph(out.past_key_values) draws it" in (
        view.model.notes
    )
    alone = gc.render.graph(cache)
    drawn = sorted(float(np.ravel(alone.model.node(o).value)[0]) for o in alone.model.outputs)
    assert drawn == pytest.approx(sorted([2 * logits[0].item(), 3 * logits[1].item()]), rel=1e-15)


def test_a_dict_of_tensors_and_a_function_returning_a_dataclass_are_drawn():
    torch = need("torch")
    weight, logits, _ = _language_model(torch)
    view = gc.render.graph({"a": logits.sum(), "unused": None})  # (failed: '_edge')
    assert gc.render.graph((logits.sum(), 3)).model.outputs == view.model.outputs  # (failed: got int)
    (expected,) = torch.autograd.grad(logits.sum(), weight, retain_graph=True)
    np.testing.assert_allclose(named(view, "weight").grad, expected.numpy(), rtol=1e-15)
    w = torch.tensor(W)

    def f(x):
        h = torch.tanh(w @ x)
        return FakeOutput(loss=h.pow(2).sum(), logits=h)

    called = gc.render.graph(f, X)  # (failed: "a graph of PyTorch tensors: got FakeOutput")
    np.testing.assert_allclose(named(called, "x").grad, 2 * np.tanh(W @ X) / np.cosh(W @ X) ** 2 @ W, rtol=1e-14)
    with pytest.raises(UsageError, match=r"^a graph of PyTorch tensors: got None, which holds no tensor to draw$"):
        gc.render.graph(lambda x: None, torch.tensor(X))


def test_a_torch_function_given_a_list_a_dict_a_count_and_a_partial():
    torch = need("torch")
    w = torch.tensor(W)

    def f(xs, batch):
        total = 0
        for k in range(batch["repeat"]):  # (a Python int inside a dict: stays an int)
            total = total + torch.sum(torch.tanh(w @ xs[k % 2]) * batch["scale"])
        return total

    xs, scale = [torch.tensor(X), torch.tensor(-X)], torch.tensor([2.0, 0.5], dtype=torch.float64)
    view = gc.render.graph(f, xs, {"scale": scale, "repeat": 3})  # (failed: a list made one array / a dict float())
    given = [x.clone().requires_grad_(True) for x in xs] + [scale.clone().requires_grad_(True)]
    expected = torch.autograd.grad(f(given[:2], {"scale": given[2], "repeat": 3}), given)
    for name, grad in zip(["xs[0]", "xs[1]", "batch['scale']"], expected):
        np.testing.assert_allclose(named(view, name).grad, grad.numpy(), rtol=1e-15)
    bound = gc.render.graph(functools.partial(lambda s, x: torch.sum(torch.sin(x) * s), 3.0), X)  # (failed: '_edge')
    np.testing.assert_allclose(named(bound, "x").grad, 3.0 * np.cos(X), rtol=1e-15)


def test_a_hugging_face_gpt2_output_with_its_cache_is_drawn_from_its_loss():
    torch = need("torch")
    transformers = pytest.importorskip("transformers", reason="the Hugging Face test needs transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=8, n_head=2, vocab_size=16, n_positions=8)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.tensor([[1, 2, 3, 4]])
    with gc.render.recording():
        out = model(ids, labels=ids)  # (use_cache: its cache a DynamicCache of tensors)
    view = gc.render.graph(out)  # (failed: "a graph of PyTorch tensors: got DynamicCache")
    (expected,) = torch.autograd.grad(out.loss, model.lm_head.weight, retain_graph=True)
    assert view.model.node(view.model.outputs[0]).value == pytest.approx(out.loss.item(), rel=1e-6)
    found = named(view, "model.transformer.wte.weight").grad  # (tied to lm_head: one parameter)
    assert found.norm == pytest.approx(expected.norm().item(), rel=1e-5)
    assert view.model.notes[0].startswith(f"drawn from {type(out).__name__}.loss; left out logits, ")


def test_a_torch_function_given_a_module_and_a_string():
    torch = need("torch")
    net = torch.nn.Linear(3, 2).double()
    with torch.no_grad():
        net.weight.copy_(torch.tensor(W))
        net.bias.copy_(torch.tensor(B))

    def f(m, x, mode):
        return torch.sum(torch.tanh(m(x))) * (2.0 if mode == "double" else 1.0)

    view = gc.render.graph(f, net, X, "double")  # (failed: float() of a Linear, of a str)
    expected = torch.autograd.grad(f(net, torch.tensor(X), "double"), [net.weight, net.bias])
    np.testing.assert_allclose(named(view, "net.weight").grad, expected[0].numpy(), rtol=1e-15)
    np.testing.assert_allclose(named(view, "net.bias").grad, expected[1].numpy(), rtol=1e-15)
    assert [c["label"] for c in view.model.clusters] == ["net (Linear)"]


def test_a_float32_model_given_float64_says_how_to_make_it_float64(tmp_path):
    """PyTorch's dtype error, one line, with what to do: every command gives the function float64
    tensors, and a model is built float32 unless told otherwise."""
    need("torch")
    from typer.testing import CliRunner

    from gradcli.cli.app import app

    source = "import torch\ntorch.manual_seed(0)\nnet = torch.nn.Linear(2, 1)\n\ndef f(x):\n    return net(x).sum()\n"
    (tmp_path / "m32.py").write_text(source)
    for command in ("eval", "graph", "check"):
        result = CliRunner().invoke(app, [command, str(tmp_path / "m32.py:f"), "--at", "x=[1,2]"])
        assert result.exit_code == 2 and result.stdout == ""
        assert result.stderr == (
            f"error: {tmp_path / 'm32.py'}:f raised RuntimeError: mat1 and mat2 must have the same dtype, but got "
            "Double and Float (gradcli gives the function float64 tensors: make a float32 model float64 with "
            ".double() where it is built, e.g. net = net.double())\n"
        ), (command, result.stderr)
    (tmp_path / "m64.py").write_text(source.replace("Linear(2, 1)", "Linear(2, 1).double()"))
    result = CliRunner().invoke(app, ["eval", str(tmp_path / "m64.py:f"), "--at", "x=[1,2]", "--json"])
    assert result.exit_code == 0 and set(json.loads(result.stdout)["gradient"]) == {"x"}
