"""The JAX road of issue 34: functions JAX differentiates in one mode only (a while loop: forward; a
custom_vjp: reverse), float32 and float16 outputs, inputs not differentiated passed as plain arrays,
float64 from before the user's module is imported (and not left on by ``gc.render.graph``), and
``--blame`` of every custom rule wherever it is called (scan, cond, fori/while bodies, jit), with a
planted-bug sweep. Every number is compared with JAX's own."""

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

MODEL = """
from functools import partial

import jax
import jax.numpy as jnp
from jax import lax


@jax.jit
def while_sin(x):
    def cond(c):
        return c[0] < 3

    def body(c):
        return (c[0] + 1, jnp.sin(c[1]) * 1.5 + 0.1 * c[1] ** 2)

    return jnp.sum(lax.while_loop(cond, body, (0, x))[1])


@jax.jit
def fori_dynamic(x, n):
    return jnp.sum(lax.fori_loop(0, n.astype(int), lambda i, c: jnp.sin(c) * 1.2 + c * c * 0.1, x))


@jax.custom_vjp
def cube(x):
    return x**3


cube.defvjp(lambda x: (x**3, x), lambda x, g: (3 * g * x * x,))


def custom(x):
    return jnp.sum(cube(x) * jnp.sin(x))


def to_float32(x):
    return jnp.sum(jnp.exp(x.astype(jnp.float32)))


def to_float16(x):
    return jnp.sum(jnp.exp(x.astype(jnp.float16)) * x.astype(jnp.float16))


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def scaled_sin(x, y):
    return jnp.sin(x) * y


scaled_sin.defvjp(lambda x, y: (jnp.sin(x) * y, x), lambda y, x, g: (g * jnp.cos(x) * y,))


def nondiff(x, y):
    return jnp.sum(scaled_sin(x, y) ** 2)


W = jnp.array([0.1, 0.2, 0.3])


def module_array(x):
    return jnp.sum(W * x)
"""

X = [0.5, -1.25]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """The model's file, and its functions as JAX runs them (the oracle)."""
    path = tmp_path_factory.mktemp("jax_road") / "jr.py"
    path.write_text(MODEL)
    namespace: dict = {}
    exec(compile(MODEL, str(path), "exec"), namespace)
    return path, namespace


def run(path, name, *args, code=0):
    """``gradcli ARGS[0] path:name ARGS[1:] --json``: its document and stderr's lines, exit ``code``."""
    result = CliRunner().invoke(app, [args[0], f"{path}:{name}", *args[1:], "--json"])
    assert "Traceback" not in result.output + result.stderr, result.output + result.stderr
    assert result.exit_code == code or (code is None and result.exit_code in (0, 1)), result.output + result.stderr
    return json.loads(result.stdout), result.stderr.splitlines()


def at(values):
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


# --- 1. a while loop: JAX's forward mode, said ------------------------------------------------------

FORWARD_NOTE = (
    "JAX cannot differentiate this function in reverse mode (Reverse-mode differentiation does not work for "
    "lax.while_loop or lax.fori_loop with dynamic start/stop values): its derivatives are JAX's forward mode "
    "(jax.jacfwd)"
)


def test_a_while_loop_is_differentiated_by_jaxs_forward_mode_and_says_so(model):
    path, f = model
    x = jnp.array(X)
    document, stderr = run(path, "while_sin", "eval", "--at", f"x={at(X)}")
    assert document["value"] == float(f["while_sin"](x))
    assert document["gradient"]["x"] == [float(g) for g in jax.jacfwd(f["while_sin"])(x)]
    assert document["framework_notes"] == [FORWARD_NOTE] and stderr == [f"warning: {FORWARD_NOTE}"]
    document, _ = run(path, "while_sin", "hessian", "--at", f"x={at(X)}")
    np.testing.assert_allclose(document["hessian"], jax.jacfwd(jax.jacfwd(f["while_sin"]))(x), rtol=1e-13, atol=1e-15)
    document, _ = run(path, "while_sin", "check", "--at", f"x={at(X)}")
    assert document["ok"] is True and FORWARD_NOTE in document["notes"]


def test_a_fori_loop_with_traced_bounds_is_a_while_loop_and_takes_forward_mode(model):
    path, f = model
    x = jnp.array(X)
    document, stderr = run(path, "fori_dynamic", "eval", "--at", f"x={at(X)}", "--at", "n=4", "--wrt", "x")
    expected = jax.jacfwd(f["fori_dynamic"])(x, jnp.array(4.0))
    np.testing.assert_allclose(document["gradient"]["x"], expected, rtol=1e-14)
    assert stderr == [f"warning: {FORWARD_NOTE}"]


# --- 2. a custom_vjp: no forward mode ---------------------------------------------------------------------


def test_a_custom_vjp_hessian_is_reverse_over_reverse_and_forward_mode_is_refused_with_jaxs_reason(model):
    path, f = model
    x = jnp.array(X)
    document, stderr = run(path, "custom", "hessian", "--at", f"x={at(X)}")
    np.testing.assert_allclose(document["hessian"], jax.jacrev(jax.jacrev(f["custom"]))(x), rtol=1e-14, atol=1e-15)
    note = (
        "JAX has no forward mode for this function (can't apply forward-mode autodiff (jvp) to a custom_vjp "
        "function): reverse mode is used instead"
    )
    assert document["framework_notes"] == [note] and stderr == [f"warning: {note}"]
    document, stderr = run(path, "custom", "jacobian", "--at", f"x={at(X)}", "--mode", "forward", code=2)
    said = (
        "JAX's forward mode cannot run this function (can't apply forward-mode autodiff (jvp) to a custom_vjp "
        "function): use --mode reverse"
    )
    assert document == {"error": said, "exit_code": 2} and stderr == [f"error: {said}"]
    document, _ = run(path, "custom", "jacobian", "--at", f"x={at(X)}", "--mode", "auto")
    np.testing.assert_allclose(document["jacobian"], [jax.grad(f["custom"])(x)], rtol=1e-15)


# --- 3. float32 and float16 outputs: cotangents in the output's dtype ------------------------------


@pytest.mark.parametrize("name", ["to_float32", "to_float16"])
def test_an_output_of_lower_precision_gets_cotangents_of_its_dtype(model, name):
    path, f = model
    x = jnp.array(X)
    document, _ = run(path, name, "eval", "--at", f"x={at(X)}")
    assert document["value"] == float(f[name](x))
    assert document["gradient"]["x"] == [float(g) for g in jax.grad(f[name])(x)]
    for mode in ("forward", "reverse") if name == "to_float32" else ("forward",):
        document, _ = run(path, name, "jacobian", "--at", f"x={at(X)}", "--mode", mode)
        assert document["jacobian"] == [[float(g) for g in jax.grad(f[name])(x)]]
    document, _ = run(path, name, "hessian", "--at", f"x={at(X)}")
    assert document["hessian"] == np.asarray(jax.hessian(f[name])(x), dtype=np.float64).tolist()
    if name == "to_float32":  # (check's verdict at a lower precision is the verdicts' item of issue 34: no exit 70)
        document, _ = run(path, name, "check", "--at", f"x={at(X)}", code=None)
        assert document["gradient"]["x"] == [float(g) for g in jax.grad(f[name])(x)]


# --- 5. float64 before the user's module makes its arrays; the caller's setting kept ----------------


@pytest.fixture
def float32_jax():
    """A process where JAX runs in float32 (its default), as a user's may: put back after the test."""
    jax.config.update("jax_enable_x64", False)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", True)


def test_module_level_arrays_are_float64_as_the_file_is_imported(model, float32_jax):
    path, _ = model
    document, _ = run(path, "module_array", "eval", "--at", "x=[1,1,1]")
    assert document["gradient"]["x"] == [0.1, 0.2, 0.3]  # (float32 arrays: 0.10000000149011612, ...)
    assert document["value"] == 0.1 + 0.2 + 0.3


def test_render_graph_of_a_jax_function_leaves_the_callers_float32_as_it_was(float32_jax):
    view = gc.render.graph(lambda x: jnp.sum(jnp.sin(x) * x), np.array([0.5, 2.0]))
    assert jax.config.jax_enable_x64 is False
    assert jnp.asarray(np.array([0.5])).dtype == jnp.float32
    x = np.array([0.5, 2.0])
    grad = next(n.grad for n in view.nodes if n.kind == "variable")
    np.testing.assert_allclose(grad, np.sin(x) + x * np.cos(x), rtol=1e-14)  # (computed in float64 all the same)


# --- 6. inputs not differentiated are plain arrays ---------------------------------------------------


def test_an_array_in_nondiff_argnums_works_when_it_is_not_differentiated(model):
    path, f = model
    x, y = jnp.array(X), jnp.array([3.0, -2.0])
    point = ["--at", f"x={at(X)}", "--at", "y=[3,-2]", "--wrt", "x"]
    document, _ = run(path, "nondiff", "eval", *point)
    assert document["value"] == float(f["nondiff"](x, y))
    assert document["gradient"] == {"x": [float(g) for g in jax.grad(f["nondiff"])(x, y)]}
    document, _ = run(path, "nondiff", "hessian", *point)
    np.testing.assert_allclose(document["hessian"], jax.jacrev(jax.jacrev(f["nondiff"]))(x, y), rtol=1e-14)
    document, _ = run(path, "nondiff", "jacobian", *point, "--mode", "reverse")
    assert document["jacobian"] == [[float(g) for g in jax.grad(f["nondiff"])(x, y)]]
    document, _ = run(path, "nondiff", "check", *point, "--blame")  # (its rule judged with y a plain array)
    assert document["ok"] is True and document["blame"] is None
    assert document["notes"][-1].startswith("--blame checked 1 custom_vjp/custom_jvp call, each rule ")


# --- 4, 7. --blame: a rule that closes over an array; rules inside loops, branches and jit ------------

BLAMED = """
import jax
import jax.numpy as jnp
from jax import lax

W = jnp.array([0.5, -1.5, 2.0])


@jax.custom_vjp
def scale(x):
    return jnp.sin(x) * W


scale.defvjp(lambda x: (jnp.sin(x) * W, x), lambda x, g: (g * jnp.cos(x) * W,))


@jax.custom_vjp
def square(x):
    return x * x


square.defvjp(lambda x: (x * x, x), lambda x, g: ({square_rule},))


@jax.custom_vjp
def neg_square(x):
    return -x * x


neg_square.defvjp(lambda x: (-x * x, x), lambda x, g: (2 * g * x,))  # wrong sign: -2 g x


def closes(x):
    return jnp.sum(scale(x)) + jnp.sum(square(x))


@jax.jit
def scanned(x):
    return jnp.sum(lax.scan(lambda c, _: (jnp.sin(c) + square(c) * 0.1, None), x, None, length=3)[0])


@jax.jit
def cancelling(x):
    return jnp.sum(lax.fori_loop(0, 2, lambda i, c: neg_square(square(c)) * 0.5 + 0.1, x))
"""


@pytest.fixture(scope="module")
def blamed(tmp_path_factory):
    """The model with ``square``'s rule right (``right.py``) and with its sign wrong (``wrong.py``)."""
    folder = tmp_path_factory.mktemp("jax_blame")
    (folder / "right.py").write_text(BLAMED.replace("{square_rule}", "2 * g * x"))
    (folder / "wrong.py").write_text(BLAMED.replace("{square_rule}", "-2 * g * x"))
    return folder


def line_of(text, source):
    return next(k for k, line in enumerate(source.splitlines(), 1) if text in line)


def test_blame_judges_a_rule_that_closes_over_an_array_and_every_rule_after_it(blamed):
    document, stderr = run(blamed / "right.py", "closes", "check", "--at", "x=[0.5,-0.7,1.1]", "--blame")
    assert document["ok"] is True and document["blame"] is None and stderr == []
    assert document["notes"][-1].startswith("--blame checked 2 custom_vjp/custom_jvp calls, each rule ")
    document, _ = run(blamed / "wrong.py", "closes", "check", "--at", "x=[0.5,-0.7,1.1]", "--blame", code=1)
    assert (document["blame"]["op"], document["blame"]["scope"]) == ("square", "custom_vjp:square")
    assert document["notes"][-1].startswith("--blame checked 2 custom_vjp/custom_jvp calls, each rule ")


def test_graph_blame_marks_the_scan_holding_a_wrong_rule_and_names_the_iteration(blamed):
    path = blamed / "wrong.py"
    line = line_of("def scanned", BLAMED) + 1  # (jitted: the scan is in the box jit:scanned)
    result = CliRunner().invoke(app, ["graph", f"{path}:scanned", "--at", "x=[0.5,-0.7,1.1]", "--blame",
                                      "--format", "text"])  # fmt: skip
    assert result.exit_code == 0, result.output + result.stderr
    # (the scan's body is drawn once in its box: the rule's own node there is the one marked, issue 35)
    assert "square = mul(n1, n1)" in result.stdout and result.stdout.count("BLAMED") == 1
    assert "BLAMED" in next(text for text in result.stdout.splitlines() if text.startswith("square = mul(n1, n1)"))
    assert result.stderr.startswith(
        "blame: node n3 (square = n1 * n1), marked in red: custom_vjp:square (square) computes a "
    )
    assert result.stderr.rstrip().endswith(
        f"in iteration 0 of scan); called in jit:scanned/scan/custom_vjp:square at wrong.py:{line}"
    )
    result = CliRunner().invoke(app, ["graph", f"{blamed / 'right.py'}:scanned", "--at", "x=[0.5,-0.7,1.1]",
                                      "--blame", "--format", "text"])  # fmt: skip
    assert result.stderr == "blame: every node's derivative agrees with finite differences\n"


def test_two_wrong_rules_in_a_fori_loop_that_cancel_are_blamed_all_the_same(blamed):
    document, _ = run(blamed / "right.py", "cancelling", "check", "--at", "x=[0.5,-0.7,1.1]")
    assert document["ok"] is True  # (the gradient is right: the two sign errors cancel)
    document, _ = run(blamed / "wrong.py", "cancelling", "check", "--at", "x=[0.5,-0.7,1.1]", "--blame", code=1)
    assert (document["blame"]["op"], document["blame"]["scope"]) == ("square", "jit:cancelling/scan/custom_vjp:square")
    assert document["checks"]["finite_difference"]["ok"] is True
    document, _ = run(blamed / "right.py", "cancelling", "check", "--at", "x=[0.5,-0.7,1.1]", "--blame", code=1)
    assert (document["blame"]["op"], document["blame"]["scope"]) == (
        "neg_square",
        "jit:cancelling/scan/custom_vjp:neg_square",
    )


# --- 8. the planted-bug sweep: every wrong rule named wherever it is called, the right one never ------

PLANTED = {
    "sign": lambda dx, w, x, g, t: -dx,
    "transposed": lambda dx, w, x, g, t: g * t + w @ (g * x * (1 - t * t)),
    "wrong_input": lambda dx, w, x, g, t: g * t + w.T @ (g * x * (1 - jnp.tanh(x) ** 2)),
    "missing_term": lambda dx, w, x, g, t: w.T @ (g * x * (1 - t * t)),
    "factor_1e3": lambda dx, w, x, g, t: dx * (1 + 1e-3),
    "factor_1e6": lambda dx, w, x, g, t: dx * (1 + 1e-6),
    "one_element": lambda dx, w, x, g, t: dx.at[1].multiply(1.5),
    "negative_only": lambda dx, w, x, g, t: jnp.where(x < 0, dx * 1.25, dx),
    "right": lambda dx, w, x, g, t: dx,
}


def planted_rule(bug):
    """tanh(w @ x) * x, with its rule's derivative in x made wrong as ``bug`` says ("right": not)."""

    def rule(w, x):
        return jnp.tanh(w @ x) * x

    rule.__name__ = bug
    rule = jax.custom_vjp(rule)

    def backward(saved, g):
        w, x = saved
        t = jnp.tanh(w @ x)
        inner = g * x * (1 - t * t)
        return jnp.outer(inner, x), PLANTED[bug](g * t + w.T @ inner, w, x, g, t)

    rule.defvjp(lambda w, x: (rule(w, x), (w, x)), backward)
    return rule


def swept(container):
    """A function calling every planted rule (and the right one) inside ``container``'s body."""
    rules = [planted_rule(bug) for bug in PLANTED]

    def body(w, c):
        return 0.5 * c + 0.2 * sum(rule(w, c) for rule in rules)

    if container == "scan":
        return lambda w, x: jnp.sum(jax.lax.scan(lambda c, wi: (body(wi, c), None), x, jnp.stack([w, w.T]))[0])
    if container == "cond":
        return lambda w, x: jnp.sum(jax.lax.cond(x[0] > 0, lambda c: body(w, c), jnp.sin, x))
    if container == "fori_loop":
        return lambda w, x: jnp.sum(jax.lax.fori_loop(0, 2, lambda i, c: body(w, c), x))
    if container == "while_loop":
        return lambda w, x: jnp.sum(jax.lax.while_loop(lambda s: s[0] < 2, lambda s: (s[0] + 1, body(w, s[1])),
                                                       (0, x))[1])  # fmt: skip
    jitted = jax.jit(body)  # "jit in scan"
    return lambda w, x: jnp.sum(jax.lax.scan(lambda c, _: (jitted(w, c), None), x, None, length=2)[0])


SWEEP_W = np.array([[0.3, -0.8, 0.5], [0.6, 0.2, -0.4], [-0.5, 0.7, 0.1]])
SWEEP_X = np.array([0.7, -0.6, 0.9])


@pytest.mark.parametrize("container", ["scan", "cond", "fori_loop", "while_loop", "jit in scan"])
def test_every_planted_rule_is_blamed_inside_every_container_and_the_right_one_never(container):
    from gradcli.check.jax_blame import rule_results
    from gradcli.lang.frameworks.jax_record import trace_values

    trace = trace_values(swept(container), {"w": SWEEP_W, "x": SWEEP_X}, cotangents=False)
    results = rule_results(trace)
    assert [r.name for r in results] == list(PLANTED)
    calls = 1 if container == "cond" else 2
    assert [r.judged for r in results] == [calls] * len(PLANTED)
    blamed = {r.name: r.blame for r in results if r.blame is not None}
    assert sorted(blamed) == sorted(bug for bug in PLANTED if bug != "right")
    where = {"cond": "branch 1 of cond", "while_loop": "iteration 0 of while"}.get(container, "iteration 0 of scan")
    for bug, found in blamed.items():
        assert found.where == where and found.kind == "custom_vjp" and found.scope.endswith(f"custom_vjp:{bug}")
        assert found.max_rel_error > 1e-7 and not np.allclose(found.rule, found.differences, rtol=1e-7, atol=0)
