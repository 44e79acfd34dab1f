"""Functions the peers' suites ask for (issue 27): each against PyTorch in float64, value, gradient and
(for the elementwise ones) second derivative, with PyTorch's defaults, argument names and edge values."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import gradcli as gc

torch = pytest.importorskip("torch", reason="the functions are compared with PyTorch float64")
F = torch.nn.functional

X = np.array([-30.0, -2.5, -1.0, -0.3, 0.0, 1e-9, 0.02, 0.4, 1.0, 1.2, 2.5, 19.0, 40.0])
POSITIVE = np.array([1e-3, 0.1, 0.5, 1.0, 2.0, 7.5, 300.0])


def _both(gfn, tfn, x, *rest, second=True, rtol=1e-13, rtol2=1e-10):
    """gradcli and torch at the same points: values, gradients and second derivatives agree."""
    g = gc.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    gy, ty = gfn(g, *rest), tfn(t, *rest)
    assert gy.dtype == np.float64
    np.testing.assert_allclose(gy._value, ty.detach().numpy(), rtol=rtol, atol=1e-300)
    (gg,) = gc.grad(gy.sum(), g, create_graph=second)
    (tg,) = torch.autograd.grad(ty.sum(), t, create_graph=second)
    np.testing.assert_allclose(gg._value, tg.detach().numpy(), rtol=rtol, atol=1e-300)
    if second:
        th = torch.autograd.grad(tg.sum(), t)[0].numpy() if tg.requires_grad else np.zeros_like(x)
        gh = gc.grad(gg.sum(), g)[0]._value if gg.requires_grad else np.zeros_like(x)
        np.testing.assert_allclose(gh, th, rtol=rtol2, atol=1e-13)
    return gy


ELEMENTWISE = [
    ("logsigmoid", gc.logsigmoid, F.logsigmoid, X),
    ("softsign", gc.softsign, F.softsign, X[X != 0]),
    ("mish", gc.mish, F.mish, X),
    ("rad2deg", gc.rad2deg, torch.rad2deg, X),
    ("deg2rad", gc.deg2rad, torch.deg2rad, X),
    ("rsqrt", gc.rsqrt, torch.rsqrt, POSITIVE),
    ("erfc", gc.erfc, torch.erfc, X[np.abs(X) < 25]),
    ("hardtanh", gc.hardtanh, F.hardtanh, X[np.abs(X) != 1]),
    ("elu", gc.elu, F.elu, X),
    ("gelu", gc.gelu, F.gelu, X),
    ("nan_to_num", gc.nan_to_num, torch.nan_to_num, X),
]


@pytest.mark.parametrize("name, gfn, tfn, x", ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE])
def test_elementwise_value_gradient_and_second_derivative_match_pytorch(name, gfn, tfn, x):
    y = _both(gfn, tfn, x)
    t = tfn(torch.tensor(x[:2], requires_grad=True))
    assert type(gfn(gc.tensor(x[:2], requires_grad=True)).grad_fn).__name__ == type(t.grad_fn).__name__, name
    assert y.shape == x.shape


def test_sinc_is_one_at_zero_with_slope_zero_and_curvature_minus_pi_squared_over_three():
    x = np.array([-2.2, -0.5, 0.01, 0.3, 1.0, 1.7])
    _both(gc.sinc, torch.sinc, x, rtol=1e-11, rtol2=1e-9)  # PyTorch's slope cancels near 0 (3e-13 at 0.01)
    mpmath = pytest.importorskip("mpmath", reason="the exact slope near 0")
    near = gc.tensor(0.01, requires_grad=True)
    exact = mpmath.diff(lambda v: mpmath.sin(mpmath.pi * v) / (mpmath.pi * v), mpmath.mpf("0.01"))
    assert gc.grad(gc.sinc(near), near)[0].item() == pytest.approx(float(exact), rel=1e-15)
    z = gc.tensor(0.0, requires_grad=True)
    y = gc.sinc(z)
    assert y.item() == 1.0 and type(y.grad_fn).__name__ == "SincBackward0"
    (g,) = gc.grad(y, z, create_graph=True)
    assert g.item() == 0.0
    (h,) = gc.grad(g, z)  # PyTorch's double backward gives nan here; the series gives the exact value
    assert h.item() == pytest.approx(-(np.pi**2) / 3, rel=1e-15)
    tiny = gc.tensor(1e-30, requires_grad=True)
    (g,) = gc.grad(gc.sinc(tiny), tiny, create_graph=True)
    assert gc.grad(g, tiny)[0].item() == pytest.approx(-(np.pi**2) / 3, rel=1e-15)


def test_parameters_as_pytorch_names_them():
    _both(lambda x: gc.elu(x, alpha=2.5), lambda x: F.elu(x, alpha=2.5), X)
    _both(lambda x: gc.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh"), X)
    _both(lambda x: gc.hardtanh(x, min_val=-0.5, max_val=2.0), lambda x: F.hardtanh(x, -0.5, 2.0), X)
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        gc.gelu(gc.tensor(1.0), approximate="fast")


def test_elu_alpha_slope_at_zero_is_alpha_as_pytorch():
    x = gc.tensor([0.0, -1.0], requires_grad=True)
    (g,) = gc.grad(gc.elu(x, 3.0).sum(), x)
    assert g._value.tolist() == [3.0, 3.0 * np.exp(-1.0)]


def test_nan_to_num_defaults_and_gradient_only_where_finite():
    x = np.array([np.nan, np.inf, -np.inf, 2.5, -0.0])
    g = gc.tensor(x, requires_grad=True)
    y = gc.nan_to_num(g)
    big = np.finfo(np.float64).max
    assert y._value.tolist() == [0.0, big, -big, 2.5, 0.0]
    y.sum().backward()
    assert g.grad._value.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]
    y = gc.nan_to_num(gc.tensor(x), nan=1.0, posinf=2.0, neginf=-3.0)
    assert y._value.tolist() == torch.nan_to_num(torch.tensor(x), 1.0, 2.0, -3.0).tolist()
    assert gc.nan_to_num(gc.tensor(np.float32(np.inf))).item() == np.finfo(np.float32).max


def test_lerp_number_and_tensor_weights_match_pytorch():
    rng = np.random.default_rng(27)
    a, b, w = rng.standard_normal((3, 2, 3))
    w[0, 0] = 1.0  # weight 1 gives end exactly (PyTorch's formula from the nearer end)
    ga, gb, gw = (gc.tensor(v, requires_grad=True) for v in (a, b, w))
    ta, tb, tw = (torch.tensor(v, requires_grad=True) for v in (a, b, w))
    for gy, ty in ((gc.lerp(ga, gb, 0.7), torch.lerp(ta, tb, 0.7)), (gc.lerp(ga, gb, gw), torch.lerp(ta, tb, tw))):
        assert type(gy.grad_fn).__name__ == type(ty.grad_fn).__name__
        np.testing.assert_allclose(gy._value, ty.detach().numpy(), rtol=1e-14)
        leaves = [ga, gb, gw][: 2 if ty.grad_fn.__class__.__name__ == "LerpBackward0" else 3]
        tl = [ta, tb, tw][: len(leaves)]
        gs = gc.grad((gy * gy).sum(), leaves)
        ts = torch.autograd.grad((ty * ty).sum(), tl)
        for u, v in zip(gs, ts):
            np.testing.assert_allclose(u._value, v.numpy(), rtol=1e-14)
    assert gc.lerp(ga, gb, gw)._value[0, 0] == b[0, 0]
    assert ga.lerp(gb, 0.25).grad_fn is not None  # a method, as torch's


def test_float32_stays_float32():
    x = gc.tensor(np.array([-1.5, 0.25, 2.0], np.float32), requires_grad=True)
    for fn in (gc.logsigmoid, gc.softsign, gc.mish, gc.sinc, gc.rad2deg, gc.deg2rad, gc.erfc, gc.hardtanh,
               gc.nan_to_num, gc.elu, gc.gelu, lambda v: gc.rsqrt(v * v)):  # fmt: skip
        y = fn(x)
        assert y.dtype == np.float32
        (g,) = gc.grad(y.sum(), x)
        assert g.dtype == np.float32


@pytest.mark.parametrize(
    "expression, value",
    [
        ("sinc(0)", "1"),
        ("rad2deg(pi)", "180"),
        ("rsqrt(4)", "0.5"),
        ("erfc(0)", "1"),
        ("hardtanh(3)", "1"),
        ("lerp(1, 3, 0.25)", "1.5"),
        ("diag([1, 2], 1)", "[[0, 1, 0], [0, 0, 2], [0, 0, 0]]"),
        ("diagonal([[1, 2], [3, 4]], -1)", "[3]"),
        ("roll([1, 2, 3], 1)", "[3, 1, 2]"),
        ("cross([1, 0, 0], [0, 1, 0])", "[0, 0, 1]"),
        ("kron([1, 2], [1, 10])", "[1, 10, 2, 20]"),
        ("vstack([1, 2], [3, 4])", "[[1, 2], [3, 4]]"),
        ("argsort([3, 1, 2])", "[1, 2, 0]"),
    ],
)
def test_the_language_has_them(expression, value):
    done = subprocess.run(
        [sys.executable, "-m", "gradcli", "eval", expression, "--seed", "ones"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith(f"value = {value}")


# --- shapes, matrices and orders ------------------------------------------------------------------------

RNG = np.random.default_rng(2027)


def _compare(gfn, tfn, *arrays, name=""):
    """Value and gradient (of a weighted sum of the output) of ``gfn`` and ``tfn`` at ``arrays``."""
    gs = [gc.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    gy, ty = gfn(*gs), tfn(*ts)
    assert gy.shape == tuple(ty.shape), name
    np.testing.assert_allclose(gy._value, ty.detach().numpy(), rtol=1e-14, atol=1e-300, err_msg=name)
    w = RNG.standard_normal(tuple(ty.shape))
    got = gc.grad((gy * w).sum(), gs, allow_unused=True, materialize_grads=True)
    want = torch.autograd.grad((ty * torch.tensor(w)).sum(), ts, allow_unused=True, materialize_grads=True)
    for g, t in zip(got, want):
        np.testing.assert_allclose(g._value, t.numpy(), rtol=1e-14, atol=1e-15, err_msg=name)
    return gy, ty


@pytest.mark.parametrize("k", [-2, -1, 0, 1, 3, 5])
def test_diagonal_and_diag_with_an_offset_match_pytorch(k):
    m, v, b = RNG.standard_normal((3, 4)), RNG.standard_normal(3), RNG.standard_normal((2, 3, 4))
    _compare(lambda x: gc.diag(x, k), lambda x: torch.diag(x, k), m, name=f"diag(A, {k})")
    _compare(lambda x: gc.diag(x, k), lambda x: torch.diag(x, k), v, name=f"diag(v, {k})")
    _compare(lambda x: x.diagonal(k), lambda x: x.diagonal(k), m, name=f"diagonal {k}")
    _compare(lambda x: gc.diagonal(x, k, 2, 0), lambda x: torch.diagonal(x, k, 2, 0), b, name="dims 2, 0")
    _compare(lambda x: gc.diag_embed(x, k, 0, 2), lambda x: torch.diag_embed(x, k, 0, 2), b, name="embed")


def test_diagonal_names_and_errors_as_pytorch():
    m, v, b = RNG.standard_normal((3, 4)), RNG.standard_normal(3), RNG.standard_normal((2, 3, 4))
    assert type(gc.diagonal(gc.tensor(m, requires_grad=True)).grad_fn).__name__ == "DiagonalBackward0"
    assert type(gc.diag(gc.tensor(v, requires_grad=True), 1).grad_fn).__name__ == "DiagEmbedBackward0"
    with pytest.raises(RuntimeError, match="cannot be identical"):
        gc.diagonal(gc.tensor(m), 0, 1, -1)
    with pytest.raises(RuntimeError, match="1D or 2D"):
        gc.diag(gc.tensor(b))


def test_diagonal_second_derivative_and_forward_mode():
    x = gc.tensor(RNG.standard_normal((3, 3)), requires_grad=True)
    y = (gc.diagonal(x, 1) ** 3).sum()
    (g,) = gc.grad(y, x, create_graph=True)
    (h,) = gc.grad(g.sum(), x)
    expected = np.zeros((3, 3))
    expected[[0, 1], [1, 2]] = 6 * x._value[[0, 1], [1, 2]]
    np.testing.assert_allclose(h._value, expected, rtol=1e-15)
    _, tangent = gc.functional.jvp(lambda t: gc.diag(t, -1), (gc.tensor([1.0, 2.0]),), (gc.tensor([3.0, 4.0]),))
    assert tangent._value.tolist() == [[0.0, 0.0, 0.0], [3.0, 0.0, 0.0], [0.0, 4.0, 0.0]]


@pytest.mark.parametrize("shifts, dims", [(1, None), (-5, None), (2, 0), ((1, -2), (0, 1)), ((3,), (-1,)), (7, 1)])
def test_roll_matches_pytorch(shifts, dims):
    a = RNG.standard_normal((3, 4))
    _compare(lambda x: gc.roll(x, shifts, dims), lambda x: torch.roll(x, shifts, dims), a, name=f"{shifts} {dims}")
    x = gc.tensor(a, requires_grad=True)
    assert type(x.roll(shifts, dims).grad_fn).__name__ == "RollBackward0"
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        gc.roll(x, (1, 2), 0)


def test_split_chunk_and_unbind_match_pytorch():
    a = RNG.standard_normal((5, 4))
    for arg, dim in ((2, 0), (3, 1), ([1, 4], 0), ([2, 0, 2], 1), (5, 0), (7, 0)):
        gs, ts = gc.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        gp, tp = gs.split(arg, dim), ts.split(arg, dim)
        assert [p.shape for p in gp] == [tuple(p.shape) for p in tp]
        for p, q in zip(gp, tp):
            np.testing.assert_array_equal(p._value, q.detach().numpy())
        total = sum(((p * (i + 1)) ** 2).sum() for i, p in enumerate(gp))
        want = sum(((q * (i + 1)) ** 2).sum() for i, q in enumerate(tp))
        np.testing.assert_allclose(gc.grad(total, gs)[0]._value, torch.autograd.grad(want, ts)[0].numpy(), rtol=1e-15)
    assert type(gc.split(gc.tensor(a, requires_grad=True), 2)[0].grad_fn).__name__ == "SplitBackward0"
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly to 5"):
        gc.split(gc.tensor(a), [1, 2])
    assert [p.shape for p in gc.chunk(gc.tensor(a), 2)] == [(3, 4), (2, 4)]
    assert [p.shape for p in gc.tensor(a).unbind(1)] == [(5,)] * 4


def test_hstack_and_vstack_match_pytorch():
    v, m, s = RNG.standard_normal(3), RNG.standard_normal((2, 3)), np.array(1.5)
    _compare(lambda a, b: gc.hstack([a, b]), lambda a, b: torch.hstack([a, b]), v, v, name="hstack vectors")
    _compare(lambda a, b: gc.hstack([a, b]), lambda a, b: torch.hstack([a, b]), m, m[:, :2], name="hstack matrices")
    _compare(lambda a, b: gc.hstack([a, b]), lambda a, b: torch.hstack([a, b]), s, v, name="hstack a number")
    _compare(lambda a, b: gc.vstack([a, b]), lambda a, b: torch.vstack([a, b]), v, m, name="vstack")
    _compare(lambda a, b: gc.vstack([a, b]), lambda a, b: torch.vstack([a, b]), s, s, name="vstack numbers")
    from gradcli.lang.evaluate import evaluate
    from gradcli.lang.parser import parse

    run = evaluate(parse("hstack(a, b)"), {"a": v, "b": v}, ["a"])
    np.testing.assert_array_equal(run.outputs[0]._value, np.hstack([v, v]))


def test_cross_and_kron_match_pytorch():
    a, b = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    gy, ty = _compare(gc.cross, lambda x, y: torch.linalg.cross(x, y), a, b, name="cross")
    assert type(gy.grad_fn).__name__ == type(ty.grad_fn).__name__ == "LinalgCrossBackward0"
    c = RNG.standard_normal((3, 2))
    _compare(lambda x, y: gc.cross(x, y, dim=0), lambda x, y: torch.cross(x, y, dim=0), c, c[::-1].copy(), name="dim")
    _compare(lambda x, y: gc.cross(x, y), lambda x, y: torch.linalg.cross(x, y), a, b[:1], name="broadcast")
    with pytest.raises(RuntimeError, match="must have length 3"):
        gc.cross(gc.tensor(a), gc.tensor(b), dim=0)
    for shapes in (((2, 2), (3, 1)), ((3,), (2,)), ((2, 1, 2), (2, 3)), ((2,), (2, 2))):
        x, y = (RNG.standard_normal(s) for s in shapes)
        _compare(gc.kron, torch.kron, x, y, name=f"kron {shapes}")


def test_argsort_is_int64_without_gradient_as_pytorch():
    a = np.array([[3.0, 1.0, 2.0, 1.0], [0.5, np.nan, -1.0, 0.5]])
    x = gc.tensor(a, requires_grad=True)
    for dim, descending in ((-1, False), (0, False), (1, True)):
        got = gc.argsort(x, dim, descending=descending, stable=True)
        want = torch.argsort(torch.tensor(a), stable=True, dim=dim, descending=descending)
        assert got.dtype == np.int64 and not got.requires_grad
        assert got._value.tolist() == want.tolist()
    assert x.argsort()._value.tolist() == torch.tensor(a).argsort(stable=True).tolist()


def test_var_mean_matches_pytorch():
    a = RNG.standard_normal((3, 4))
    for kw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}, {"dim": 1, "correction": 0}, {"unbiased": False}):
        g, t = gc.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        (gv, gm), (tv, tm) = gc.var_mean(g, **kw), torch.var_mean(t, **kw)
        np.testing.assert_allclose(gv._value, tv.detach().numpy(), rtol=1e-14)
        np.testing.assert_allclose(gm._value, tm.detach().numpy(), rtol=1e-14)
        total, want = (gv * gm).sum() + gv.sum(), (tv * tm).sum() + tv.sum()
        np.testing.assert_allclose(gc.grad(total, g)[0]._value, torch.autograd.grad(want, t)[0].numpy(), rtol=1e-13)
