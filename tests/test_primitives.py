"""Every primitive of the table against finite differences, generated from the table.

Elementwise primitives are sampled by hypothesis from their declared domain,
with broadcasting shapes; the others are driven by the cases below. A new
differentiable primitive without a case fails ``test_every_primitive_is_tested``.
For each, the first derivative (a vector-Jacobian product) and the second
(a Hessian-vector product through ``create_graph=True``) must agree with a
4th-order central difference.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numdiff import directional, gradient

import gradcli as gc
from gradcli.autograd.record import apply
from gradcli.ops import PRIMITIVES

GENERIC = sorted(
    (p for p in PRIMITIVES.values() if p.differentiable and p.elementwise and p.nparams == 0 and p.arity in (1, 2)),
    key=lambda p: p.name,
)
KINK_MARGIN = 1e-2
RTOL, ATOL = 1e-6, 1e-8

rng = np.random.default_rng(20261121)


def arr(*shape):
    return rng.uniform(-2.0, 2.0, size=shape)


def pos(*shape):
    return rng.uniform(0.5, 2.0, size=shape)


# Non-generic differentiable primitives: (inputs, params) cases.
CASES = {
    "where": [
        ([np.array([True, False, True]), arr(3), arr(3)], ()),
        ([np.array([[True], [False]]), arr(2, 3), arr(3)], ()),
    ],
    "clamp": [([arr(7)], (-1.0, 1.0)), ([arr(5)], (None, 0.5)), ([arr(5)], (-0.5, None))],
    "clamp_tensor": [
        ([np.array([-2.0, -0.3, 0.4, 2.5]), np.array([-1.0, -1.0, 0.0, 1.0]), np.array([1.0, 0.5, 1.0, 2.0])], ()),
        ([arr(2, 3), np.array(-0.5), np.array([0.5, 1.0, 3.0])], ()),
    ],
    "fill": [([arr(3)], (0,)), ([arr(2, 2)], (1.5,))],
    "softplus": [
        ([arr(5)], (1.0, 20.0)),
        ([np.array([-2.0, -0.5, 0.4, 1.2, 2.5, 4.0])], (2.0, 3.0)),  # both sides of beta x = 3, off it
    ],
    "to": [([arr(3)], (np.dtype(np.float64),))],
    "gelu": [([arr(5)], ("none",)), ([arr(2, 3) * 2], ("tanh",))],
    "elu": [([np.array([-2.0, -0.5, 0.3, 1.7])], (1.0,)), ([np.array([-1.2, -0.1, 0.4, 2.2])], (2.5,))],
    "hardtanh": [([np.array([-1.5, -0.4, 0.3, 0.9, 2.0])], (-1.0, 1.0)), ([np.array([-0.8, 0.1, 0.6])], (-0.5, 0.4))],
    "nan_to_num": [([arr(4)], (0.0, None, None)), ([np.array([np.nan, 1.5, np.inf, -np.inf, -0.2])], (2.0, 9.0, -9.0))],
    "lerp": [([arr(3), arr(3), arr(3)], ()), ([arr(2, 3), arr(3), np.array(0.3)], ())],
    "sum": [([arr(2, 3)], (None, False)), ([arr(2, 3)], ((-1,), False)), ([arr(2, 3, 2)], ((-3, -1), True))],
    "mean": [([arr(2, 3)], (None, False)), ([arr(2, 3)], ((-2,), True))],
    "prod": [
        ([pos(4)], (None, False)),
        ([pos(2, 3)], ((-1,), False)),
        ([np.array([1.5, 0.0, 2.0, -1.0])], (None, False)),  # one zero: the product of the others
        ([np.array([[0.0, 2.0, 0.0], [1.0, 3.0, 0.5]])], ((-1,), True)),  # two zeros in a row: 0
    ],
    "max": [
        ([np.array([0.3, -1.0, 2.0, 1.1])], (None, False)),
        ([np.array([[0.3, 1.5], [2.0, -1.0]])], ((-1,), False)),
    ],
    "min": [([np.array([0.3, -1.0, 2.0, 1.1])], (None, False)), ([np.array([[0.3, 1.5], [2.0, -1.0]])], ((-2,), True))],
    "logsumexp": [([arr(5)], (None, False)), ([arr(2, 3)], ((-1,), True)), ([arr(2, 3) * 300], ((-2,), False))],
    "norm": [([arr(4)], (None, False)), ([arr(2, 3)], ((-1,), False))],
    "softmax": [([arr(4)], (-1,)), ([arr(2, 3)], (-2,)), ([arr(2, 3) * 300], (-1,))],
    "log_softmax": [([arr(4)], (-1,)), ([arr(2, 3)], (-2,)), ([arr(2, 3) * 300], (-1,))],
    "cumsum": [([arr(4)], (-1,)), ([arr(2, 3)], (-2,))],
    "cumprod": [
        ([pos(4)], (-1,)),
        ([arr(2, 3)], (-2,)),
        ([np.array([1.5, 0.0, 2.0, -1.0])], (-1,)),  # one zero
        ([np.array([[0.0, 2.0, 0.0], [1.0, 3.0, 0.5]])], (-1,)),  # two zeros in a row
    ],
    "var": [([arr(2, 3)], (None, False, 1)), ([arr(2, 3)], ((-1,), True, 0)), ([arr(2, 3, 2)], ((-3, -1), False, 1))],
    "std": [([arr(5)], (None, False, 1)), ([arr(2, 3)], ((-2,), False, 0)), ([arr(2, 3)], ((-1,), True, 1))],
    "flip": [([arr(4)], ((-1,),)), ([arr(2, 3)], ((-2, -1),))],
    "dot": [([arr(4), arr(4)], ())],
    "mv": [([arr(3, 4), arr(4)], ())],
    "mm": [([arr(2, 3), arr(3, 4)], ())],
    "matmul": [
        ([arr(2, 3, 4), arr(4, 2)], ()),
        ([arr(4), arr(2, 4, 3)], ()),
        ([arr(2, 3, 4), arr(4)], ()),
        ([arr(2, 1, 2, 3), arr(3, 3, 2)], ()),
    ],
    "reshape": [([arr(2, 3)], ((3, 2),)), ([arr(2, 3)], ((6,),)), ([arr(4)], ((2, 1, 2),))],
    "permute": [([arr(2, 3, 4)], ((2, 0, 1),)), ([arr(2, 3)], ((1, 0),))],
    "expand": [([arr(3, 1)], ((2, 3, 4),)), ([arr(3)], ((2, 3),))],
    "getitem": [
        ([arr(4)], ((0,),)),
        ([arr(4)], ((slice(1, None),),)),
        ([arr(4)], ((slice(None, -1),),)),
        ([arr(5)], ((slice(None, None, -2),),)),
        ([arr(4)], ((np.array([0, 2, 0]),),)),  # repeated positions add up
        ([arr(3)], ((np.array([True, False, True]),),)),
        ([arr(2, 3)], ((Ellipsis, 1),)),
        ([arr(2, 3)], ((None, slice(None), np.array([2, 0])),)),
        ([arr(3, 3)], ((np.array([0, 2]), np.array([1, 1])),)),
        ([arr(3, 4, 2)], ((np.array([0, 2, 2]), slice(None), np.array([1, 0, 1])),)),  # NumPy: list axes first
        ([arr(2, 3)], ((np.array([[True, False, True], [False, True, True]]),),)),
    ],
    "scatter": [([arr(3)], ((np.array([0, 0, 2]),), (4,), 0)), ([arr(2)], ((slice(1, 3),), (4,), 0))],
    "index_put": [
        ([arr(4), arr(2)], ((np.array([1, 3]),),)),
        ([arr(2, 3), arr(3)], ((0,),)),
        ([arr(4), arr()], ((slice(1, 3),),)),
    ],
    "gather": [
        ([arr(3, 4)], (1, np.array([[0, 3, 3], [1, 1, 0], [2, 0, 2]]))),  # repeated positions add up
        ([arr(3, 2)], (0, np.array([[2, 0], [2, 2]]))),  # an index smaller than x elsewhere
    ],
    "index_select": [([arr(3, 4)], (1, np.array([3, 0, 3]))), ([arr(4)], (0, np.array([1, 1, 2])))],
    "split": [([arr(5, 2)], (0, 3, 2)), ([arr(2, 3)], (1, 0, 2))],
    "unbind": [([arr(3, 2)], (0, 1)), ([arr(2, 3)], (1, 2))],
    "masked_fill": [
        ([arr(2, 3), arr()], (np.array([[True, False, True], [False, False, True]]),)),
        ([arr(2, 3), arr()], (np.array([False, True, False]),)),  # a mask that broadcasts
    ],
    "repeat": [([arr(2, 3)], ((2, 1),)), ([arr(3)], ((2, 1, 2),)), ([arr(2, 1)], ((1, 3),))],
    "stack": [([arr(3), arr(3)], (0,)), ([arr(2, 2), arr(2, 2), arr(2, 2)], (2,))],
    "cat": [([arr(2, 3), arr(1, 3)], (0,)), ([arr(2, 1), arr(2, 2)], (1,))],
    "sort": [
        ([np.array([0.3, -1.0, 2.0, 1.1])], (-1, np.array([1, 0, 3, 2]))),
        ([np.array([[0.3, 1.5, -0.2], [2.0, -1.0, 0.4]])], (-2, np.array([[0, 1, 0], [1, 0, 1]]))),
    ],
    "topk": [
        ([np.array([0.3, -1.0, 2.0, 1.1])], (-1, np.array([2, 3]))),
        ([np.array([[0.3, 1.5, -0.2], [2.0, -1.0, 0.4]])], (-1, np.array([[1, 0], [0, 2]]))),
    ],
    "det": [
        ([np.eye(3) * 2 + arr(3, 3) * 0.3], ()),
        ([np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])], ()),  # singular
        ([arr(2, 2, 2)], ()),
    ],
    "solve": [
        ([np.eye(3) * 2 + arr(3, 3) * 0.3, arr(3)], (True,)),
        ([np.eye(2) * 2 + arr(2, 2) * 0.3, arr(2, 3)], (False,)),
        ([np.eye(2) * 2 + arr(2, 2, 2) * 0.3, arr(2, 2)], (True,)),
    ],
    "inv": [([np.eye(3) * 2 + arr(3, 3) * 0.3], ()), ([np.array([[0.5, 2.0], [1.5, -1.0]])], ())],
    "trace": [([arr(3, 3)], ()), ([arr(2, 3)], ())],
    "tril": [([arr(3, 3)], (0,)), ([arr(2, 4)], (-1,)), ([arr(2, 3, 3)], (1,))],
    "triu": [([arr(3, 3)], (0,)), ([arr(4, 2)], (1,)), ([arr(2, 3, 3)], (-1,))],
    "diagonal": [([arr(3, 4)], (1, -2, -1)), ([arr(2, 3, 4)], (-1, -3, -1)), ([arr(3, 2, 3)], (0, -1, -3))],
    "diag_embed": [([arr(3)], ((3, 3), 0, -2, -1)), ([arr(2, 3)], ((4, 2, 4), -1, -3, -1))],
    "roll": [([arr(3, 4)], ((1,), None)), ([arr(3, 4)], ((2, -1), (-2, -1))), ([arr(2, 3)], ((4,), (-1,)))],
    "cross": [([arr(3), arr(3)], (-1,)), ([arr(2, 3), arr(3)], (-1,)), ([arr(3, 2), arr(3, 2)], (-2,))],
}


def test_every_primitive_is_tested():
    differentiable = {p.name for p in PRIMITIVES.values() if p.differentiable}
    covered = {p.name for p in GENERIC} | set(CASES)
    assert differentiable - covered == set(), "add cases for these primitives"
    assert covered - differentiable == set()


def _evaluate(prim, values, params):
    return prim.forward(values, *params) if prim.arity < 0 else prim.forward(*values, *params)


def _differentiable_inputs(prim, values):
    if prim.arity < 0:
        return list(range(len(values)))
    return [i for i, rule in enumerate(prim.vjp) if rule is not None]


def check_derivatives(prim, values, params=(), second=True):
    """First and second derivatives of sum(w * prim(inputs)) against finite differences."""
    values = [np.asarray(v) for v in values]
    rng = np.random.default_rng(len(values) + sum(v.size for v in values))  # reproducible weights
    which = _differentiable_inputs(prim, values)
    tensors = [gc.tensor(v, requires_grad=i in which) for i, v in enumerate(values)]
    out = apply(prim, tensors, params)
    w = rng.standard_normal(out.shape)

    def objective(vs):
        full = list(values)
        for i, v in zip(which, vs):
            full[i] = v
        return float(np.sum(_evaluate(prim, full, params) * w))

    grads = gc.grad((out * w).sum(), [tensors[i] for i in which], create_graph=second, materialize_grads=True)
    expected = gradient(objective, [values[i] for i in which])
    for got, want in zip(grads, expected):
        assert got.shape == want.shape
        np.testing.assert_allclose(got._value, want, rtol=RTOL, atol=ATOL, err_msg=f"{prim.name}: first derivative")
    if not second:
        return
    # v . H u via autograd against the derivative of v . grad along u
    u = [rng.standard_normal(values[i].shape) for i in which]
    v = [rng.standard_normal(values[i].shape) for i in which]
    bilinear = gc.sum(gc.stack([gc.sum(g * ui) for g, ui in zip(grads, u)]))
    if bilinear.requires_grad:
        hu = gc.grad(bilinear, [tensors[i] for i in which], allow_unused=True, materialize_grads=True)
        got = sum(float(np.sum(h._value * vi)) for h, vi in zip(hu, v))
    else:  # the gradient is constant: a linear primitive
        got = 0.0

    def v_dot_grad(vs):
        ts = [gc.tensor(x, requires_grad=True) for x in vs]
        full = [gc.tensor(x) for x in values]
        for i, t in zip(which, ts):
            full[i] = t
        o = apply(prim, full, params)
        gs = gc.grad((o * w).sum(), ts, materialize_grads=True)
        return sum(float(np.sum(g._value * vi)) for g, vi in zip(gs, v))

    want = directional(v_dot_grad, [values[i] for i in which], u)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7, err_msg=f"{prim.name}: second derivative")


def _away_from_kinks(prim, values):
    if prim.analytic:
        return
    if prim.arity == 1:
        assume(np.all(np.abs(values[0]) > KINK_MARGIN))
    else:
        a, b = np.broadcast_arrays(*values)
        assume(np.all(np.abs(a - b) > KINK_MARGIN))


def _draw_inputs(prim, data):
    """Broadcastable inputs inside the primitive's domain, away from its kinks."""
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=prim.arity, max_dims=3, max_side=3)).input_shapes
    values = []
    for i, shape in enumerate(shapes):
        lo, hi = prim.domain_of(i)
        elements = st.floats(lo, hi, allow_nan=False, allow_infinity=False, width=64)
        values.append(data.draw(hnp.arrays(np.float64, shape, elements=elements)))
    _away_from_kinks(prim, values)
    return values


@pytest.mark.parametrize("prim", GENERIC, ids=lambda p: p.name)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_elementwise_primitive_matches_finite_differences(prim, data):
    values = _draw_inputs(prim, data)
    check_derivatives(prim, values)


@pytest.mark.parametrize(
    "name,case",
    [(name, case) for name, cases in CASES.items() for case in cases],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_structural_primitive_matches_finite_differences(name, case):
    inputs, params = case
    check_derivatives(PRIMITIVES[name], inputs, params)


@pytest.mark.parametrize("prim", GENERIC, ids=lambda p: p.name)
def test_float32_inputs_keep_float32_values_and_gradients(prim):
    values = [np.float32(np.mean(prim.domain_of(i))) + np.zeros(3, np.float32) + 0.25 for i in range(prim.arity)]
    tensors = [gc.tensor(v, requires_grad=True) for v in values]
    out = apply(prim, tensors, ())
    assert out.dtype == np.float32, prim.name
    out.sum().backward()
    for t in tensors:
        if t.grad is not None:
            assert t.grad.dtype == np.float32, prim.name


# --- forward mode: every primitive's JVP against its (already checked) reverse rule --------------------------


def check_forward_matches_reverse(prim, values, params=()):
    """The full Jacobian by batched forward mode equals the one by batched reverse mode."""
    from gradcli.autograd.functional import forward_blocks, reverse_blocks
    from gradcli.render import recording

    values = [np.asarray(v) for v in values]
    which = _differentiable_inputs(prim, values)
    leaves = [gc.tensor(v, requires_grad=i in which) for i, v in enumerate(values)]
    with recording() as tape:
        out = apply(prim, leaves, params)
    ins = [leaves[i] for i in which]
    forward_j, _ = forward_blocks([out], ins, tape)
    reverse_j, _ = reverse_blocks([out], ins)
    for f, r in zip(forward_j[0], reverse_j[0]):
        np.testing.assert_allclose(np.asarray(f), np.asarray(r), rtol=1e-12, atol=1e-12, err_msg=f"{prim.name}: jvp")


@pytest.mark.parametrize("prim", GENERIC, ids=lambda p: p.name)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_elementwise_forward_mode_matches_reverse_mode(prim, data):
    values = _draw_inputs(prim, data)
    check_forward_matches_reverse(prim, values)


@pytest.mark.parametrize(
    "name,case",
    [(name, case) for name, cases in CASES.items() for case in cases],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_structural_forward_mode_matches_reverse_mode(name, case):
    inputs, params = case
    check_forward_matches_reverse(PRIMITIVES[name], inputs, params)
