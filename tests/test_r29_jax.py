"""JAX functions' graphs (issue 29): the jaxpr's equations as nodes, each value and cotangent equal to
JAX's own (``jax.vjp``, ``jax.grad``, finite differences for intermediates), calls as boxes, every view."""

import importlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from frameworks import need

jax = need("jax")

import jax.numpy as jnp  # noqa: E402

import gradcli as gc  # noqa: E402
from gradcli.lang.frameworks.jax_record import trace_jax  # noqa: E402  (turns float64 on)
from gradcli.render.jax_graph import jax_function_graph, jax_model  # noqa: E402

W1 = np.array([[0.3, -0.2, 0.1], [0.5, 0.1, -0.4]])
W2 = np.array([[0.7, -0.3], [0.2, 0.9]])
X = np.array([0.7, -0.4, 1.1])


@jax.jit
def layer(w, x):
    return jnp.tanh(w @ x)


def head(w2, h, x):
    return jnp.sum(jnp.sin(w2 @ h) * jnp.cos(x[0]))


def mlp(w1, w2, x):
    return head(w2, layer(w1, x), x)


@jax.custom_vjp
def safe_log(x):
    return jnp.log(x)


safe_log.defvjp(lambda x: (jnp.log(x), x), lambda x, g: (g / x,))


def node_of(graph, op, shape=None):
    found = [n for n in graph.nodes if n.op == op and (shape is None or n.shape == shape)]
    assert len(found) == 1, [(n.op, n.shape) for n in graph.nodes]
    return found[0]


def test_every_value_and_cotangent_of_a_jitted_mlp_is_jaxs():
    trace = trace_jax(mlp, [W1, W2, X])
    grads = jax.grad(mlp, argnums=(0, 1, 2))(W1, W2, X)
    for i, expected in zip(trace.inputs, grads):
        np.testing.assert_allclose(trace.values[i].cotangent, expected, rtol=1e-13, atol=1e-15)
    out, pullback = jax.vjp(mlp, W1, W2, X)
    np.testing.assert_allclose(trace.values[trace.outputs[0]].value, out, rtol=1e-15)
    for i, expected in zip(trace.inputs, pullback(1.0)):
        np.testing.assert_allclose(trace.values[i].cotangent, expected, rtol=1e-13, atol=1e-15)
    prims = [e.primitive for e in trace.equations]
    assert prims[:2] == ["dot_general", "tanh"] and "sin" in prims and "cos" in prims
    assert [e.scope for e in trace.equations[:2]] == ["jit:layer", "jit:layer"]
    assert trace.equations[0].line == f"test_r29_jax.py:{layer.__wrapped__.__code__.co_firstlineno + 2}"


def test_intermediate_cotangents_are_the_derivatives_of_the_rest_of_the_function():
    graph = jax_function_graph(mlp, {"w1": W1, "w2": W2, "x": X}, None)
    h = node_of(graph, "tanh")
    value = np.tanh(W1 @ X)
    np.testing.assert_allclose(h.value, value, rtol=1e-15)
    np.testing.assert_allclose(h.grad, jax.grad(head, argnums=1)(W2, value, X), rtol=1e-13)
    step = 1e-6  # and central differences of the rest, element by element
    for k in range(2):
        e = np.eye(2)[k] * step
        numeric = (head(W2, value + e, X) - head(W2, value - e, X)) / (2 * step)
        assert abs(h.grad[k] - numeric) < 1e-8
    (z,) = [n for n in graph.nodes if n.label == "w1 @ x"]  # d f / d z = (1 - tanh^2) d f / d h
    np.testing.assert_allclose(z.value, W1 @ X, rtol=1e-15)
    np.testing.assert_allclose(z.grad, (1 - value**2) * h.grad, rtol=1e-13)
    assert z.op == "dot_general" and z.scope == "jit:layer" and z.cluster is not None
    assert {"id": z.cluster, "label": "jit:layer", "parent": None} in graph.clusters


def test_scalar_edges_carry_the_local_derivative_of_their_equation():
    def f(a, b):
        return jnp.sin(a * b) + jnp.cos(a)

    view = gc.render.graph(f, 0.5, 2.0)
    model = view.model
    a, b = (n for n in model.nodes if n.kind == "variable")
    assert (a.name, b.name) == ("a", "b")
    np.testing.assert_allclose([a.grad, b.grad], jax.grad(f, argnums=(0, 1))(0.5, 2.0), rtol=1e-14)
    product = node_of(model, "mul")
    into = {model.node(e.source).name: e.local_grad for e in model.inputs_of(product.id)}
    assert into == {"a": pytest.approx(2.0), "b": pytest.approx(0.5)}
    sine = node_of(model, "sin")
    (edge,) = model.inputs_of(sine.id)
    assert edge.local_grad == pytest.approx(np.cos(1.0), rel=1e-14)
    cosine = node_of(model, "cos")
    assert a.grad_parts is not None and sum(a.grad_parts) == pytest.approx(float(a.grad), rel=1e-14)
    assert cosine.label == "cos(a)" and model.node(model.outputs[0]).name == "f"


def test_a_custom_vjp_rule_is_the_one_used_and_its_equations_are_in_its_box():
    def wrong(x, g):
        return (2.0 * g / x,)  # twice the derivative: the user's rule, which JAX uses

    @jax.custom_vjp
    def doubled_log(x):
        return jnp.log(x)

    doubled_log.defvjp(lambda x: (jnp.log(x), x), wrong)

    def f(x):
        return jnp.sum(doubled_log(x * x + 1.0)) + jnp.sum(safe_log(x + 2.0))

    x = np.array([0.5, -1.5])
    trace = trace_jax(f, [x])
    np.testing.assert_allclose(trace.values[trace.inputs[0]].cotangent, jax.grad(f)(x), rtol=1e-14)
    graph = jax_model(trace)
    logs = [n for n in graph.nodes if n.op == "log"]
    assert [n.scope for n in logs] == ["custom_vjp:doubled_log", "custom_vjp:safe_log"]
    boxes = {c["id"]: c["label"] for c in graph.clusters}
    assert [boxes[n.cluster] for n in logs] == ["custom_vjp:doubled_log", "custom_vjp:safe_log"]
    np.testing.assert_allclose(logs[0].value, np.log(x * x + 1.0), rtol=1e-15)
    np.testing.assert_allclose(logs[0].grad, [1.0, 1.0])
    sums = [n for n in graph.nodes if n.op == "reduce_sum"]
    assert graph.inputs_of(sums[0].id)[0].source == logs[0].id  # the call's output drawn as its log
    assert [n.name for n in logs] == ["doubled_log", "safe_log"]  # named by the rule's function
    assert sums[0].label == "reduce_sum(doubled_log)" and logs[1].titled_label == "safe_log = log(n7)"


def test_a_fori_loop_is_a_scan_box_and_its_gradient_is_jaxs():
    def f(x):
        return jnp.sum(jax.lax.fori_loop(0, 4, lambda i, c: jnp.sin(c) * 1.5, x))

    x = np.array([0.3, -0.8])
    view = gc.render.graph(f, x)
    model = view.model
    (loop,) = [n for n in model.nodes if n.op == "result"]  # (its counter, which nothing uses, is not drawn)
    boxes = {c["id"]: c["label"] for c in model.clusters}  # (its body drawn inside: tests/test_r35_jax.py)
    assert boxes[loop.cluster].startswith("scan ×4  ‖carry‖ ") and loop.scope == "scan"
    expected = x
    for _ in range(4):
        expected = np.sin(expected) * 1.5
    np.testing.assert_allclose(loop.value, expected, rtol=1e-14)
    (variable,) = [n for n in model.nodes if n.kind == "variable"]
    np.testing.assert_allclose(variable.grad, jax.grad(f)(x), rtol=1e-13)
    np.testing.assert_allclose(loop.grad, [1.0, 1.0])


def test_a_while_loop_has_values_and_says_why_there_are_no_gradients():
    def f(x):
        return jax.lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x)

    view = gc.render.graph(f, 1.5)
    assert view.model.node(view.model.outputs[0]).value == 12.0
    assert all(n.grad is None for n in view.model.nodes)
    assert any("no gradients" in note for note in view.model.notes)


def test_a_vector_output_takes_a_seed_and_pytrees_name_their_leaves():
    def f(params, x):
        return jnp.tanh(params["w"] @ x + params["b"])

    params = {"b": np.array([0.1, -0.2]), "w": W1}
    seed = np.array([1.0, -2.0])
    trace = trace_jax(f, [params, X], seed=seed)
    assert [trace.values[i].name for i in trace.inputs] == ["params['b']", "params['w']", "x"]
    _, pullback = jax.vjp(f, params, X)
    grads, gx = pullback(seed)
    np.testing.assert_allclose(trace.values[trace.inputs[0]].cotangent, grads["b"], rtol=1e-14)
    np.testing.assert_allclose(trace.values[trace.inputs[1]].cotangent, grads["w"], rtol=1e-14)
    np.testing.assert_allclose(trace.values[trace.inputs[2]].cotangent, gx, rtol=1e-14)
    unseeded = trace_jax(f, [params, X])
    assert not unseeded.has_cotangents and any("give --seed" in n for n in unseeded.notes)


def test_inputs_not_differentiated_are_constants():
    graph = jax_function_graph(mlp, {"w1": W1, "w2": W2, "x": X}, ["x"])
    kinds = {n.name: n.kind for n in graph.nodes if n.name in ("w1", "w2", "x")}
    assert kinds == {"w1": "constant", "w2": "constant", "x": "variable"}
    x = next(n for n in graph.nodes if n.name == "x")
    np.testing.assert_allclose(x.grad, jax.grad(mlp, argnums=2)(W1, W2, X), rtol=1e-13)


def test_a_large_graph_is_summarised_as_gradclis_are():
    def f(x):
        for _ in range(150):
            x = jnp.sin(x) * 1.01
        return x

    model = gc.render.graph(f, 0.4).model
    (group,) = [n for n in model.nodes if n.kind == "group"]
    assert len(model.nodes) <= 200 and group.count == 149 and group.label == "sin(h * k) chain"
    assert any("repeated structure" in n for n in model.notes)
    whole = gc.render.graph(f, 0.4, max_nodes="all").model
    assert len(whole.nodes) > 300 and whole.as_built
    (x,) = [n for n in whole.nodes if n.kind == "variable"]
    assert x.grad == pytest.approx(float(jax.grad(f)(0.4)), rel=1e-12)


def test_every_view_renders(tmp_path):
    view = gc.render.graph(mlp, W1, W2, X)
    text, tree, dot = view.text(), view.tree(), view.dot()
    assert "tanh" in text and "w1 @ x" in tree and "cluster_" in dot and "jit:layer" in dot
    data = json.loads(json.dumps(view.json()))
    tanh = next(n for n in data["nodes"] if n["op"] == "tanh")
    assert tanh["scope"] == "jit:layer" and tanh["line"].startswith("test_r29_jax.py:") and tanh["grad_fn"] is None
    assert view.save(tmp_path / "g.html").read_text().startswith("<!DOCTYPE html>")
    if shutil.which("dot"):
        assert view.save(tmp_path / "g.svg").read_bytes().lstrip().startswith((b"<?xml", b"<svg"))


def _rules(planted):
    """Three right custom_vjp rules and one custom_jvp rule; ``planted`` names the one made wrong."""

    def factor(name):
        return 2.0 if name == planted else 1.0

    @jax.custom_vjp
    def csin(x):
        return jnp.sin(x)

    csin.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (factor("csin") * g * jnp.cos(x),))

    @jax.custom_vjp
    def cmul(a, b):
        return a * b

    cmul.defvjp(lambda a, b: (a * b, (a, b)), lambda r, g: (g * r[1], factor("cmul") * g * r[0]))

    @jax.custom_vjp
    def cmat(w, x):
        return w @ x

    def cmat_rule(saved, g):
        w, x = saved
        return jnp.outer(g, x), (w if planted == "cmat" else w.T) @ g  # the planted bug: a transpose missing

    cmat.defvjp(lambda w, x: (w @ x, (w, x)), cmat_rule)

    @jax.custom_jvp
    def cexp(x):
        return jnp.exp(x)

    cexp.defjvp(lambda p, t: (jnp.exp(p[0]), factor("cexp") * jnp.exp(p[0]) * t[0]))

    @jax.jit
    def block(w, x):
        return csin(cmat(w, x))

    def f(w, x):
        h = block(w, x)
        return jnp.sum(cmul(cexp(h), h))

    return f


WB = np.array([[0.3, -0.2, 0.5], [0.5, 0.1, 0.7], [0.1, 0.2, 0.3]])


@pytest.mark.parametrize(
    ("planted", "scope", "index"),
    [("cmat", "jit:block/custom_vjp:cmat", 0), ("cmul", "custom_vjp:cmul", 3), ("cexp", "custom_jvp:cexp", 2)],
)
def test_blame_names_the_one_wrong_custom_rule(planted, scope, index):
    from gradcli.check.jax_blame import blame_jax

    f = _rules(planted)
    found = blame_jax(f, {"w": WB, "x": X}, None, None, None)
    assert (found.name, found.scope, found.framework, found.index) == (planted, scope, "jax", index)
    calls = {"cmat": "return csin(cmat(w, x))", "cmul": "return jnp.sum(cmul(cexp(h), h))"}
    source = Path(__file__).read_text().splitlines()
    line = int(found.line.split(":")[1])
    assert found.line.startswith("test_r29_jax.py:") and calls.get(planted, "cexp(h)") in source[line - 1]
    assert found.max_abs_error > 1e-3 and 0.05 < found.max_rel_error <= 1.0
    assert not np.allclose(found.rule, found.differences, rtol=1e-3)
    assert planted in found.text() and "computes a wrong derivative" in found.text()
    assert found.grad_fn == scope.rpartition("/")[2] and found.label == planted
    assert abs(found.autograd - found.numeric) > 1e-4 * abs(found.numeric)


def test_blame_passes_right_rules_and_counts_them():
    from gradcli.check.jax_blame import blame_jax, blame_jax_calls

    found, checked = blame_jax_calls(_rules(None), {"w": WB, "x": X})
    assert found is None and checked == 4
    assert blame_jax(lambda x: jnp.sin(x) * 2.0, {"x": X}) is None


def test_wrt_takes_a_pytree_by_its_name_and_refuses_an_unknown_one():
    def f(params, x):
        return jnp.sum(jnp.tanh(params["w"] @ x + params["b"]))

    params = {"b": np.array([0.1, -0.2]), "w": W1}
    trace = trace_jax(f, [params, X], wrt=["params"])
    assert [trace.values[i].differentiable for i in trace.inputs] == [True, True, False]
    np.testing.assert_allclose(trace.values[trace.inputs[1]].cotangent, jax.grad(f)(params, X)["w"], rtol=1e-14)
    with pytest.raises(gc.errors.UsageError, match="no input 'y'"):
        trace_jax(f, [params, X], wrt=["y"])


def test_a_jitted_function_is_drawn_as_jax_even_beside_gradcli(tmp_path, monkeypatch):
    (tmp_path / "jitted_model.py").write_text(
        "import gradcli as gc\nimport jax\nimport jax.numpy as jnp\n\n\n@jax.jit\ndef f(x):\n    return jnp.sin(x) * x\n"
    )  # (gradcli imported first: a jitted function has no code of its own to tell its framework by)
    monkeypatch.syspath_prepend(str(tmp_path))
    jitted = importlib.import_module("jitted_model").f
    model = gc.render.graph(jitted, 0.5).model
    (x,) = [n for n in model.nodes if n.kind == "variable"]
    assert x.grad == pytest.approx(float(jax.grad(jitted)(0.5)), rel=1e-14)
    assert [c["label"] for c in model.clusters] == ["jit:f"]
    assert [n.line for n in model.nodes if n.op == "sin"] == ["jitted_model.py:8"]


def test_parameters_name_the_variables_and_star_args_are_numbered():
    from gradcli.lang.frameworks.jax_record import parameter_names

    def f(a, b, *rest, scale=1.0):
        return a

    assert parameter_names(f, 4) == ["a", "b", "x2", "x3"]
    assert parameter_names(lambda *xs: xs, 2) == ["x0", "x1"]
    model = gc.render.graph(lambda *xs: jnp.sin(xs[0]) * xs[1], 0.5, 2.0).model
    assert [n.name for n in model.nodes if n.kind == "variable"] == ["x0", "x1"]
