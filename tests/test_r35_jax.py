"""JAX models drawn as models (issue 35): a ``scan``/``fori_loop``/``while_loop`` body drawn once in its
box ``scan ×N`` (its carry on a loop edge ×N-1, its nodes with the first iteration's values and
cotangents, the carry's norm per iteration), the branch a ``cond`` took, nested loops nested; equinox,
flax nnx and flax linen modules as boxes named by their paths, their parameters named by their paths.
Every number is compared with JAX's own (``jax.lax.scan``'s outputs, ``jax.grad``) or NumPy's."""

from __future__ import annotations

import json

import numpy as np
import pytest
from frameworks import need

jax = need("jax")

import jax.numpy as jnp  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

import gradcli as gc  # noqa: E402
from gradcli.cli.app import app  # noqa: E402
from gradcli.render.jax_loops import sparkline  # noqa: E402

W = np.array([[0.5, -0.3, 0.1], [0.2, 0.4, -0.6], [-0.1, 0.3, 0.2]])
U = np.array([[0.1, 0.7], [-0.6, 0.3], [0.4, -0.2]])
XS = np.sin(np.arange(40.0) * 0.7).reshape(20, 2)
H0 = np.array([0.1, -0.2, 0.3])


def cell(h, x):
    return jnp.tanh(W @ h + U @ x)


def rnn(h0, xs):
    def step(h, x):
        h = cell(h, x)
        return h, h

    h, hs = jax.lax.scan(step, h0, xs)
    return jnp.sum(h) + 0.1 * jnp.sum(hs)


def boxes(model):
    return {c["id"]: c for c in model.clusters}


def inside(model, box):
    """The nodes in ``box`` or a box inside it."""
    parents = {c["id"]: c["parent"] for c in model.clusters}
    found = []
    for n in model.nodes:
        k = n.cluster
        while k is not None and k != box:
            k = parents.get(k)
        if k == box:
            found.append(n)
    return found


def test_a_scan_rnn_is_one_box_scan_x20_with_its_body_once_and_the_carry_on_a_loop_edge():
    view = gc.render.graph(rnn, H0, XS)
    model = view.model
    (loop,) = [c for c in model.clusters if c.get("kind") == "scan"]
    assert loop["repeat"] == 20 and loop["label"].startswith("scan ×20  ‖carry‖ ")
    body = inside(model, loop["id"])
    ops = [n.op for n in body if n.kind == "op"]  # (W and U, constants, sit beside their products)
    assert ops == ["carry", "slice", "dot_general", "dot_general", "add", "tanh", "result", "result"]
    tanh = next(n for n in body if n.op == "tanh")
    labels = [n.label for n in body if n.op in ("carry", "slice", "result")]
    assert labels == ["carry(h0)", "xs[t]", f"last({tanh.id})", f"stacked({tanh.id})"]
    carry = next(n for n in body if n.op == "carry")
    xs_t = next(n for n in body if n.op == "slice")  # (W and U, closed over by cell, named as the module names them)
    assert [n.label for n in body if n.op == "dot_general"] == [f"W @ {carry.id}", f"U @ {xs_t.id}"]
    (back,) = [e for e in model.edges if e.count > 1]
    assert (back.source, back.target, back.count) == (tanh.id, carry.id, 19)
    # the body's values are the first iteration's, equal to JAX's; the loop's outputs the last's
    np.testing.assert_allclose(tanh.value, cell(H0, XS[0]), rtol=1e-15)
    assert tanh.iteration == 1 and carry.iteration == 1
    h, hs = jax.lax.scan(lambda h, x: (cell(h, x), cell(h, x)), H0, XS)
    last, stacked = (n for n in body if n.op == "result")
    np.testing.assert_allclose(last.value, h, rtol=1e-15)
    np.testing.assert_allclose(stacked.value, hs, rtol=1e-15)

    # cotangents: d f / d h1 (the rest of the run from the first step's carry), and the inputs' are jax.grad's
    def rest(h1):
        h, hs = jax.lax.scan(lambda h, x: (cell(h, x), cell(h, x)), h1, XS[1:])
        return jnp.sum(h) + 0.1 * (jnp.sum(h1) + jnp.sum(hs))

    np.testing.assert_allclose(tanh.grad, jax.grad(rest)(cell(H0, XS[0])), rtol=1e-13)
    gh0, gxs = jax.grad(rnn, argnums=(0, 1))(H0, XS)
    np.testing.assert_allclose(carry.grad, gh0, rtol=1e-13)
    xs_node = next(n for n in model.nodes if n.name == "xs")
    np.testing.assert_allclose(xs_node.grad, gxs, rtol=1e-13)
    assert next(n for n in body if n.op == "slice").grad.tolist() == pytest.approx(
        np.asarray(gxs[0]).tolist(), rel=1e-13
    )
    # per-iteration statistics: the carry's norm after each step is NumPy's over scan's outputs
    (group,) = [g for g in model.groups if g.get("kind") == "scan"]
    assert group["repeat"] == 20 and group["cluster"] == loop["id"] and tanh.id in group["members"]
    np.testing.assert_allclose([i["value"]["norm"] for i in group["instances"]], np.linalg.norm(hs, axis=1), rtol=1e-13)
    np.testing.assert_allclose([i["value"]["mean"] for i in group["instances"]], np.mean(hs, axis=1), rtol=1e-12)
    assert loop["label"].endswith(sparkline(list(np.linalg.norm(hs, axis=1))))

    def carried(h1):  # (what the carry after the first step goes on to make: the steps after it)
        h, hs = jax.lax.scan(lambda h, x: (cell(h, x), cell(h, x)), h1, XS[1:])
        return jnp.sum(h) + 0.1 * jnp.sum(hs)

    expected = np.linalg.norm(jax.grad(carried)(cell(H0, XS[0])))
    assert group["instances"][0]["grad"]["norm"] == pytest.approx(float(expected), rel=1e-13)
    assert group["instances"][-1]["grad"]["norm"] == pytest.approx(np.sqrt(3), rel=1e-15)  # (d f / d h = 1 each)
    data = json.loads(json.dumps(view.json()))
    (entry,) = [g for g in data["groups"] if g.get("kind") == "scan"]
    assert entry["repeat"] == 20 and len(entry["instances"]) == 20
    assert next(n for n in data["nodes"] if n["id"] == tanh.id)["iteration"] == 1


def test_a_long_scan_gets_its_first_iterations_gradients_without_a_zero_per_step(monkeypatch):
    from gradcli.lang.frameworks import jax_loops

    monkeypatch.setattr(jax_loops, "EPS_MOST", 10)  # (20 steps x 3 elements are over it)
    model = gc.render.graph(rnn, H0, XS).model
    tanh = next(n for n in model.nodes if n.op == "tanh")
    h1 = cell(H0, XS[0])

    def rest(h1):
        h, hs = jax.lax.scan(lambda h, x: (cell(h, x), cell(h, x)), h1, XS[1:])
        return jnp.sum(h) + 0.1 * (jnp.sum(h1) + jnp.sum(hs))

    np.testing.assert_allclose(tanh.grad, jax.grad(rest)(h1), rtol=1e-13)
    (group,) = [g for g in model.groups if g.get("kind") == "scan"]
    assert group["instances"][0]["grad"] is None and len(group["instances"]) == 20
    assert "scan: each iteration's gradient statistics are left out (20 iterations of 3 carried" in " ".join(
        model.notes
    )


def test_a_fori_loop_with_static_bounds_is_a_scan_box_with_its_counter():
    def f(x):
        return jnp.sum(jax.lax.fori_loop(0, 6, lambda i, c: jnp.sin(c) * 1.5 + 0.1 * i, x))

    x = np.array([0.3, -0.8])
    model = gc.render.graph(f, x).model
    (loop,) = [c for c in model.clusters if c.get("kind") == "scan"]
    assert loop["repeat"] == 6 and loop["label"].startswith("scan ×6")
    sine = next(n for n in model.nodes if n.op == "sin")
    np.testing.assert_allclose(sine.value, np.sin(x), rtol=1e-15)
    assert sine.cluster == loop["id"] and sum(e.count == 5 for e in model.edges) == 2  # (the counter is carried too)
    (variable,) = [n for n in model.nodes if n.kind == "variable"]
    np.testing.assert_allclose(variable.grad, jax.grad(f)(x), rtol=1e-13)
    norms, c = [], x
    for i in range(6):
        c = np.sin(c) * 1.5 + 0.1 * i
        norms.append(np.linalg.norm(c))
    (group,) = [g for g in model.groups if g.get("kind") == "scan"]
    np.testing.assert_allclose(
        [i["value"]["norm"] for i in group["instances"]], norms, rtol=1e-13
    )  # (the counter's none)


def test_a_while_loop_is_counted_by_running_it():
    def f(x):
        return jnp.sum(jax.lax.while_loop(lambda c: jnp.sum(c) < 10.0, lambda c: c * 1.5 + 0.1, x))

    x = np.array([0.5, 1.0])
    model = gc.render.graph(f, x).model
    norms, c = [], x
    while np.sum(c) < 10.0:
        c = c * 1.5 + 0.1
        norms.append(np.linalg.norm(c))
    (loop,) = [c for c in model.clusters if c.get("kind") == "while"]
    assert loop["repeat"] == len(norms) == 5 and loop["label"] == f"while ×5  ‖carry‖ {sparkline(norms)}"
    (group,) = [g for g in model.groups if g.get("kind") == "while"]
    np.testing.assert_allclose([i["value"]["norm"] for i in group["instances"]], norms, rtol=1e-14)
    mul = next(n for n in model.nodes if n.op == "mul")
    np.testing.assert_allclose(mul.value, x * 1.5, rtol=1e-15)
    assert mul.iteration == 1 and any("no gradients" in note for note in model.notes)


def test_nested_scans_nest_and_a_cond_draws_the_branch_it_took():
    def nested(x):
        def outer(c, _):
            d, _ = jax.lax.scan(lambda a, _: (jnp.sin(a) * 1.1, None), c, None, length=3)
            return d + 0.1, None

        return jnp.sum(jax.lax.scan(outer, x, None, length=4)[0])

    x = np.array([0.5, 1.0])
    model = gc.render.graph(nested, x).model
    outer, inner = (c for c in model.clusters if c.get("kind") == "scan")
    assert (outer["repeat"], inner["repeat"], inner["parent"]) == (4, 3, outer["id"])
    assert sorted(e.count for e in model.edges if e.count > 1) == [2, 3]
    (variable,) = [n for n in model.nodes if n.kind == "variable"]
    np.testing.assert_allclose(variable.grad, jax.grad(nested)(x), rtol=1e-13)

    def branch(x):
        return jax.lax.cond(jnp.sum(x) > 0, lambda y: jnp.sum(jnp.sin(y)), lambda y: jnp.sum(jnp.cos(y)), x)

    model = gc.render.graph(branch, x).model
    assert [c["label"] for c in model.clusters] == ["cond: branch 1 ran (of 2)"]
    assert "sin" in {n.op for n in model.nodes} and "cos" not in {n.op for n in model.nodes}
    (variable,) = [n for n in model.nodes if n.kind == "variable"]
    np.testing.assert_allclose(variable.grad, jax.grad(branch)(x), rtol=1e-14)


def test_a_sparkline_spans_lowest_to_highest():
    assert sparkline([1.0, 2.0, 3.0, 8.0]) == "▁▂▃█"
    assert sparkline([2.0, 2.0]) == "▄▄" and sparkline([1.0, float("nan"), 3.0]) == "▁?█"
    assert len(sparkline(list(range(1000)))) == 32


# --- models: equinox, flax nnx, flax linen ------------------------------------------------------

X = np.array([0.5, -1.0, 2.0])


def filled(abstract):
    """A model of the structure ``abstract`` (``eqx.filter_eval_shape``'s, ``nnx.eval_shape``'s) with
    random weights from NumPy (JAX's own initialisers compile a program a shape: seconds)."""
    rng = np.random.default_rng(0)
    return jax.tree_util.tree_map(
        lambda s: jnp.asarray(rng.normal(size=s.shape) * 0.5) if isinstance(s, jax.ShapeDtypeStruct) else s, abstract
    )


def module_boxes(model):
    return [(c["path"], c.get("class"), c["depth"]) for c in model.clusters if "path" in c]


def parameters(model):
    return {n.name: n for n in model.nodes if n.kind == "variable" and n.name != "x"}


def test_an_equinox_mlp_is_boxes_named_by_paths_and_its_gradients_are_jaxs():
    eqx = pytest.importorskip("equinox", reason="the equinox tests need equinox (CI installs it)")
    mlp = filled(eqx.filter_eval_shape(eqx.nn.MLP, 3, 1, 4, 2, activation=jnp.tanh, key=jax.random.PRNGKey(0)))

    def loss(model, x):
        return jnp.sum(model(x) ** 2)

    model = gc.render.graph(loss, mlp, X).model
    assert module_boxes(model) == [("model", "MLP", 1)] + [(f"layers[{k}]", "Linear", 2) for k in range(3)]
    grads = eqx.filter_grad(loss)(mlp, jnp.asarray(X))
    found = parameters(model)
    assert sorted(found) == sorted(f"layers[{k}].{p}" for k in range(3) for p in ("weight", "bias"))
    box = {c["path"]: c["id"] for c in model.clusters}
    for k in range(3):
        for p in ("weight", "bias"):
            node = found[f"layers[{k}].{p}"]
            np.testing.assert_allclose(node.grad, getattr(grads.layers[k], p), rtol=1e-13)
            assert node.cluster == box[f"layers[{k}]"]
    matmul = next(n for n in model.nodes if n.label == "layers[0].weight @ x")
    assert matmul.cluster == box["layers[0]"] and matmul.scope == "model/layers[0]"


def test_an_nnx_mlp_is_boxes_named_by_paths_and_its_gradients_are_jaxs():
    nnx = pytest.importorskip("flax.nnx", reason="the flax tests need flax (CI installs it)")

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.layers = nnx.List([nnx.Linear(3, 4, rngs=rngs), nnx.Linear(4, 2, rngs=rngs)])

        def __call__(self, x):
            for layer in self.layers:
                x = jnp.tanh(layer(x))
            return x

    graphdef, state = nnx.split(nnx.eval_shape(lambda: MLP(nnx.Rngs(0))))
    mlp = nnx.merge(graphdef, filled(state))

    def loss(model, x):
        return jnp.sum(model(x) ** 2)

    model = gc.render.graph(loss, mlp, X).model
    assert module_boxes(model) == [("model", "MLP", 1), ("layers[0]", "Linear", 2), ("layers[1]", "Linear", 2)]
    grads = jax.grad(loss)(mlp, X)  # (an nnx module is a pytree: its gradients are one)
    found = parameters(model)
    assert sorted(found) == ["layers[0].bias", "layers[0].kernel", "layers[1].bias", "layers[1].kernel"]
    for k in range(2):
        np.testing.assert_allclose(found[f"layers[{k}].kernel"].grad, grads.layers[k].kernel[...], rtol=1e-13)
        np.testing.assert_allclose(found[f"layers[{k}].bias"].grad, grads.layers[k].bias[...], rtol=1e-13)


def test_a_linen_model_is_boxes_from_its_name_stack_and_its_parameters_are_named_by_paths():
    nn = pytest.importorskip("flax.linen", reason="the flax tests need flax (CI installs it)")

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            return jnp.tanh(nn.Dense(3)(x))

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = Block(name="encoder")(x)
            return nn.Dense(2)(Block()(x))

    net = Net()
    variables = filled(jax.eval_shape(net.init, jax.random.PRNGKey(0), X))

    def loss(params, x):
        return jnp.sum(net.apply(params, x) ** 2)

    model = gc.render.graph(loss, variables, X).model
    assert module_boxes(model) == [("Net", "Net", 1), ("encoder", "Block", 2), ("encoder.Dense_0", "Dense", 3),
                                   ("Block_0", "Block", 2), ("Block_0.Dense_0", "Dense", 3), ("Dense_0", "Dense", 2)]  # fmt: skip
    grads = jax.grad(loss)(variables, X)["params"]
    found = parameters(model)
    box = {c["path"]: c["id"] for c in model.clusters}
    for layer, keys in (("encoder.Dense_0", ("encoder", "Dense_0")), ("Block_0.Dense_0", ("Block_0", "Dense_0")),
                        ("Dense_0", ("Dense_0",))):  # fmt: skip
        for p in ("kernel", "bias"):
            node = found[f"params.{layer}.{p}"]
            expected = grads
            for key in keys:
                expected = expected[key]
            np.testing.assert_allclose(node.grad, expected[p], rtol=1e-13)
            assert node.cluster == box[layer]


MODEL = """
import equinox as eqx
import jax
import jax.numpy as jnp

import numpy as np

shape = eqx.filter_eval_shape(eqx.nn.MLP, 3, 1, 4, 2, activation=jnp.tanh, key=jax.random.PRNGKey(0))
rng = np.random.default_rng(0)
model = jax.tree_util.tree_map(
    lambda s: jnp.asarray(rng.normal(size=s.shape)) if isinstance(s, jax.ShapeDtypeStruct) else s, shape
)


def loss(x):
    return jnp.sum(model(x) ** 2)
"""


def test_the_cli_names_a_closed_over_equinox_model_by_its_paths(tmp_path):
    eqx = pytest.importorskip("equinox", reason="the equinox tests need equinox (CI installs it)")
    path = tmp_path / "eqx_model.py"
    path.write_text(MODEL)
    result = CliRunner().invoke(app, ["graph", f"{path}:loss", "--at", "x=[0.5,-1,2]", "--format", "json"])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output + result.stderr
    data = json.loads(result.stdout)
    assert [(c["path"], c.get("class")) for c in data["clusters"]] == [("model", "MLP")] + [
        (f"layers[{k}]", "Linear") for k in range(3)
    ]
    namespace: dict = {}
    exec(compile(MODEL, str(path), "exec"), namespace)
    grads = eqx.filter_grad(lambda m, x: jnp.sum(m(x) ** 2))(namespace["model"], jnp.asarray(X))
    nodes = {n["name"]: n for n in data["nodes"] if n["kind"] == "variable"}
    np.testing.assert_allclose(nodes["layers[0].weight"]["grad"], grads.layers[0].weight, rtol=1e-13)
    np.testing.assert_allclose(nodes["layers[2].bias"]["grad"], grads.layers[2].bias, rtol=1e-13)
    assert nodes["layers[1].weight"]["cluster"] == next(c["id"] for c in data["clusters"] if c["path"] == "layers[1]")


def test_without_a_point_a_while_loop_is_while_x_unknown_with_a_note():
    from gradcli.render.jax_graph import jax_function_graph

    def f(x):
        return jnp.sum(jax.lax.while_loop(lambda c: jnp.sum(c) < 10.0, lambda c: c * 1.5 + 0.1, x))

    model = jax_function_graph(f, {"x": np.array([0.5, 1.0])}, None, point=False)
    assert [c["label"] for c in model.clusters] == ["while ×?"]
    assert "give a point (--at) to count it" in model.notes[-1]
    assert all(n.iteration is None and n.value is None for n in model.nodes if n.kind == "op")
