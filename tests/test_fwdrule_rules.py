"""Issue 14, "fwdrule": one forward-mode signature, and each primitive's batching rule in its row.

Every forward rule is ``jvp(tangents, out, *inputs, *params)`` with ``tangents`` a tuple (``None``
for an input without a tangent); each is checked here, called that way, against a central
difference of the primitive's forward. Every primitive declares how it takes a batch of points
(``Primitive.batch``); ``replay.batched_primitive`` follows the declaration, checked against the
forward at each point alone, and never guesses from arity, parameter count or identity.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_primitives import CASES, GENERIC
from typer.testing import CliRunner

from gradcli.autograd.replay import batched_primitive
from gradcli.cli.app import app
from gradcli.ops import PRIMITIVES, Primitive
from gradcli.ops.core import BATCH

rng = np.random.default_rng(20261122)

# The declared kinds of every primitive that does not act element by element.
KINDS = {
    "to": "linear",
    "logical_not": "loop",
    "reshape": "linear",
    "permute": "linear",
    "expand": "linear",
    "getitem": "linear",
    "scatter": "linear",
    "index_put": "linear",
    "stack": "linear",
    "cat": "linear",
    "sum": "linear",
    "mean": "linear",
    "dot": "product",
    "mv": "product",
    "mm": "product",
    "matmul": "product",
    "prod": "reduce",
    "max": "reduce",
    "min": "reduce",
    "logsumexp": "reduce",
    "norm": "reduce",
    "softmax": "loop",
    "log_softmax": "loop",
    "cumsum": "linear",
    "flip": "linear",
    "cumprod": "loop",
    "var": "loop",
    "std": "loop",
    "trace": "linear",
    "diagonal": "linear",
    "diag_embed": "linear",
    "roll": "linear",
    "cross": "loop",
    "inv": "loop",
    "det": "loop",
    "solve": "loop",
    "sort": "linear",
    "topk": "linear",
    "tril": "linear",
    "triu": "linear",
    "gather": "linear",
    "index_select": "linear",
    "split": "linear",
    "unbind": "linear",
    "masked_fill": "linear",
    "repeat": "linear",
}


def _cases():
    """(primitive, inputs, params) for every differentiable primitive: the generated suite's cases,
    and inputs inside the declared domain for the elementwise ones."""
    out = []
    for prim in GENERIC:
        values = [rng.uniform(*prim.domain_of(i), size=(2, 3)) for i in range(prim.arity)]
        out.append(pytest.param(prim, values, (), id=prim.name))
    for name, cases in CASES.items():
        for k, (values, params) in enumerate(cases):
            out.append(pytest.param(PRIMITIVES[name], [np.asarray(v) for v in values], params, id=f"{name}-{k}"))
    return out


def _forward(prim, values, params):
    return prim.forward(list(values), *params) if prim.arity < 0 else prim.forward(*values, *params)


def _moving(values):
    """The inputs a tangent or a batch may move: the float ones (not a condition)."""
    return [i for i, v in enumerate(values) if np.asarray(v).dtype.kind in "fc"]


def test_every_primitive_declares_how_it_batches():
    for prim in PRIMITIVES.values():
        assert prim.batch in BATCH, prim.name
        if prim.elementwise:
            assert prim.batch == "elementwise", prim.name
    declared = {p.name: p.batch for p in PRIMITIVES.values() if p.batch != "elementwise"}
    assert declared == KINDS
    for name in ("dot", "mv", "mm", "matmul"):
        assert PRIMITIVES[name].batch_both is not None


# --- one forward signature ---------------------------------------------------------------------


def _directional(prim, values, params, moved, directions, h=1e-6):
    """Central difference of the forward along each direction (a tuple with None for unmoved inputs)."""
    rows = []
    for direction in directions:
        plus, minus = list(values), list(values)
        for i in moved:
            plus[i] = values[i] + h * direction[i]
            minus[i] = values[i] - h * direction[i]
        rows.append((np.asarray(_forward(prim, plus, params)) - np.asarray(_forward(prim, minus, params))) / (2 * h))
    return np.stack(rows)


def _check_jvp(rule, prim, values, params):
    moving = _moving(values)
    out = _forward(prim, values, params)
    # every input moving, then each alone (the others' tangents None)
    for moved in [moving] + ([[i] for i in moving] if len(moving) > 1 else []):
        directions = [
            [rng.standard_normal(np.shape(v)) if i in moved else None for i, v in enumerate(values)] for _ in range(2)
        ]
        if np.asarray(values[moving[0]]).dtype.kind == "c":
            directions = [
                [None if d is None else d + 1j * rng.standard_normal(d.shape) for d in ds] for ds in directions
            ]
        tangents = tuple(None if i not in moved else np.stack([ds[i] for ds in directions]) for i in range(len(values)))
        got = rule(tangents, out, *values, *params)
        want = _directional(prim, values, params, moved, directions)
        np.testing.assert_allclose(
            np.broadcast_to(got, want.shape), want, rtol=1e-6, atol=1e-7, err_msg=f"{prim.name}, moving {moved}"
        )


@pytest.mark.parametrize("prim, values, params", [c for c in _cases() if c.values[0].jvp is not None])
def test_every_forward_rule_takes_a_tuple_of_tangents(prim, values, params):
    """``jvp(tangents, out, *inputs, *params)`` for every row that declares one, with a batch of two
    directions in front, including ``None`` for inputs that do not move."""
    _check_jvp(prim.jvp, prim, values, params)


COMPLEX = {
    "conj": ([np.array([0.5 + 0.3j, -1.2 + 2.0j])], ()),
    "real": ([np.array([0.5 + 0.3j, -1.2 + 2.0j])], ()),
    "imag": ([np.array([0.5 + 0.3j, -1.2 + 2.0j])], ()),
    "abs": ([np.array([0.5 + 0.3j, -1.2 + 2.0j])], ()),
    "norm": ([np.array([[0.5 + 0.3j, -1.2 + 2.0j], [0.7 - 0.1j, 0.2 + 0.9j]])], ((-1,), False)),
    "softsign": ([np.array([0.5 + 0.3j, -1.2 + 2.0j])], ()),
    "var": ([np.array([[0.5 + 0.3j, -1.2 + 2.0j, 0.4j], [0.7 - 0.1j, 0.2 + 0.9j, -1.0]])], ((-1,), False, 1)),
    "std": ([np.array([[0.5 + 0.3j, -1.2 + 2.0j, 0.4j], [0.7 - 0.1j, 0.2 + 0.9j, -1.0]])], (None, True, 0)),
}


def test_complex_rules_are_the_ones_named():
    assert {p.name for p in PRIMITIVES.values() if p.complex_jvp is not None} == set(COMPLEX)


@pytest.mark.parametrize("name", sorted(COMPLEX))
def test_complex_forward_rules_take_the_same_signature(name):
    """The rule for complex inputs is called the same way; its tangent is the real directional
    derivative d/dh f(z + h t)."""
    prim = PRIMITIVES[name]
    values, params = COMPLEX[name]
    _check_jvp(prim.complex_jvp, prim, values, params)


# --- batching rules declared in the row -------------------------------------------------------------


def _points(value, n=3):
    return np.stack([value + 0.05 * k * rng.standard_normal(np.shape(value)) for k in range(n)])


@pytest.mark.parametrize("prim, values, params", _cases())
def test_a_batch_goes_through_as_each_point_alone(prim, values, params):
    """``batched_primitive`` by the declared rule equals the forward at every point, with each
    input batched alone and all of them together."""
    moving = _moving(values)
    out = _forward(prim, values, params)
    for batched in [moving] + ([[i] for i in moving] if len(moving) > 1 else []):
        args = [_points(v) if i in batched else v for i, v in enumerate(values)]
        which = [i in batched for i in range(len(values))]
        got = batched_primitive(prim, args, which, params, out, 1)
        for k in range(3):
            point = [a[k] if w else a for a, w in zip(args, which)]
            np.testing.assert_allclose(
                np.asarray(got)[k], _forward(prim, point, params), rtol=1e-13, atol=1e-13, err_msg=f"point {k}"
            )


def _roll(x, shift, axis):
    return np.roll(x, shift, axis)


# One input and two parameters, like a reduction's (axis, keepdims), but not a reduction: before the
# kind was declared, replay took it for one and rolled the whole batch as one array.
ROLL = Primitive("roll", 1, _roll, (lambda g, out, x, shift, axis: np.roll(g, -shift, axis),), nparams=2)


def test_a_primitive_is_batched_as_declared_not_as_its_arity_suggests():
    assert ROLL.batch == "loop"  # nothing declared: the safe way, point by point
    points = np.arange(6.0).reshape(2, 3)
    got = batched_primitive(ROLL, [points], [True], (1, None), points[0], 1)
    np.testing.assert_array_equal(got, [[2.0, 0.0, 1.0], [5.0, 3.0, 4.0]])


def test_a_product_is_batched_by_its_own_rules():
    """A product other than the four built in: one side batched runs its forward rule (bilinear),
    both sides its ``batch_both``, as declared (not recognised by identity)."""
    calls = []

    def jvp(tangents, out, a, b):
        calls.append("jvp")
        ta, tb = tangents
        return (0.0 if ta is None else ta[..., :, None] * b) + (0.0 if tb is None else a[:, None] * tb[..., None, :])

    def both(a, b, out, nb):
        calls.append("both")
        return a[..., :, None] * b[..., None, :]

    outer = Primitive(
        "outer",
        2,
        np.multiply.outer,
        (lambda g, out, a, b: g @ b, lambda g, out, a, b: a @ g),
        jvp=jvp,
        batch="product",
        batch_both=both,
    )
    a, b = np.array([1.0, 2.0]), np.array([3.0, -1.0, 0.5])
    pa, pb = _points(a), _points(b)
    for args, which in (([pa, b], [True, False]), ([a, pb], [False, True]), ([pa, pb], [True, True])):
        got = batched_primitive(outer, args, which, (), np.multiply.outer(a, b), 1)
        for k in range(3):
            want = np.multiply.outer(*[x[k] if w else x for x, w in zip(args, which)])
            np.testing.assert_allclose(got[k], want, rtol=1e-15)
    assert calls == ["jvp", "jvp", "both"]


@pytest.mark.parametrize(
    "facts, message",
    [
        ({"batch": "vmap"}, "batch must be one of"),
        ({"elementwise": True}, "an elementwise primitive batches elementwise"),
        ({"batch": "linear"}, "jvp is required"),
        ({"batch": "reduce"}, "parameters (axis, keepdims)"),
        ({"batch": "product", "jvp": lambda ts, out, x: ts[0]}, "two inputs"),
    ],
)
def test_a_row_whose_batching_rule_cannot_work_is_refused(facts, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Primitive("bad", 1, np.negative, (lambda g, out, x: -g,), **facts)


def test_a_product_needs_its_both_sides_rule():
    with pytest.raises(ValueError, match="batch_both"):
        Primitive("bad", 2, np.multiply, (None, None), batch="product", jvp=lambda ts, out, a, b: 0.0)


# --- eval --points reads the row too ----------------------------------------------------------------

POINTS = "x,y\n1.0,2.0\n2.0,-0.5\n-1.5,1.75\n"


def test_points_batch_reductions_and_products_by_their_row(tmp_path, monkeypatch):
    """max/min of one argument (reductions by their row), prod, logsumexp, norm and dot (a product)
    all run in the one batched pass, and agree with eval --at at every row."""
    import gradcli.lang.compute.points as points

    def refuse(*args, **kwargs):
        raise AssertionError("ran point by point")

    monkeypatch.setattr(points, "_point_by_point", refuse)
    path = tmp_path / "p.csv"
    path.write_text(POINTS)
    expression = "max(v*x) + min(v*y) + prod(v*x) + logsumexp(v*y) + norm(v*x) + dot(v, v*y) + sum(v*x, 0)"
    runner = CliRunner()
    result = runner.invoke(app, ["eval", expression, "--points", str(path), "--at", "v=[1,2]", "--json"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    for row, line in zip(POINTS.splitlines()[1:], lines):
        x, y = row.split(",")
        single = runner.invoke(app, ["eval", expression, "--at", f"x={x},y={y},v=[1,2]", "--json"])
        assert single.exit_code == 0, single.output
        got, want = json.loads(line), json.loads(single.stdout)
        np.testing.assert_allclose(got["value"], want["value"], rtol=1e-12)
        for name, g in want["gradient"].items():
            np.testing.assert_allclose(got["gradient"][name], g, rtol=1e-12, atol=1e-15, err_msg=name)


def test_a_batched_matrix_against_a_stack_of_matrices():
    """``A @ b`` with ``b`` (4, 2) batched and ``A`` (2, 3, 4) not: the product's forward rule lifts the
    batched side by the output's dimensions, which a batched run now passes it (it passed None, and
    assert_grad_close failed with a broadcasting error from its finite differences)."""
    import gradcli as gc

    a = gc.tensor(rng.standard_normal((2, 3, 4)))
    b = gc.tensor(rng.standard_normal((4, 2)), requires_grad=True)
    gc.testing.assert_grad_close(lambda b: (a @ b * a[..., :2]).sum(), b)
