"""Issue 21: the Hessian's forward pass keeps its batch of tangents structured.

A vector input's identity goes through the recorded gradient as ``basis.Structured``: shifted
diagonals (slices ``x[1:]``, ``x[:-1]`` and their scatters) plus a low-rank part (a scalar's
tangent spread over a vector, as ``(x @ x) ** 2`` gives). Every case is compared with the dense
path (the same pass with a dense identity), finite differences, and PyTorch when installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import gradcli as gc
from gradcli.autograd import basis, functional
from gradcli.autograd.basis import Structured
from gradcli.functional import hessian

N = 12
X = np.random.default_rng(21).standard_normal(N) * 0.5
A = np.random.default_rng(22).standard_normal((N, N))

CASES = {
    # name: (gradcli function, torch function, structure kept to the end)
    "diagonal": (lambda v: gc.sum(gc.exp(v) * gc.sin(v)), lambda t, v: t.sum(t.exp(v) * t.sin(v)), True),
    "banded": (
        lambda v: gc.sum(gc.sin(v[1:] - v[:-1]) * v[:-1] ** 2),
        lambda t, v: t.sum(t.sin(v[1:] - v[:-1]) * v[:-1] ** 2),
        True,
    ),
    "wide band": (lambda v: gc.sum(v[3:] * gc.exp(v[:-3])), lambda t, v: t.sum(v[3:] * t.exp(v[:-3])), True),
    "low rank": (lambda v: (v @ v) ** 2 + gc.sum(v) ** 3, lambda t, v: (v @ v) ** 2 + t.sum(v) ** 3, True),
    "benchmark": (
        lambda v: gc.sum(gc.exp(v[:-1]) * v[1:]) + (v @ v) ** 2,
        lambda t, v: t.sum(t.exp(v[:-1]) * v[1:]) + (v @ v) ** 2,
        True,
    ),
    "rank and bands mixed": (
        lambda v: gc.sum(gc.tanh(v[2:] * v[:-2])) * gc.sum(gc.exp(-v)) + gc.log(1 + v @ v),
        lambda t, v: t.sum(t.tanh(v[2:] * v[:-2])) * t.sum(t.exp(-v)) + t.log(1 + v @ v),
        True,
    ),
    "dense fallback (matrix)": (
        lambda v: gc.sum(gc.tanh(gc.tensor(A) @ v)) + gc.sum(v[1:] * v[:-1]),
        lambda t, v: t.sum(t.tanh(t.tensor(A) @ v)) + t.sum(v[1:] * v[:-1]),
        False,
    ),
    "dense fallback (cumsum)": (
        lambda v: gc.sum(gc.cumsum(v, 0) ** 3),
        lambda t, v: t.sum(t.cumsum(v, 0) ** 3),
        False,
    ),
}


def _dense_path(monkeypatch):
    real = functional.forward_blocks
    monkeypatch.setattr(functional, "forward_blocks", lambda o, i, t, structured=False: real(o, i, t))


def _numeric_hessian(f, x, eps=1e-6):
    """Central differences of the (reverse-mode) gradient, one column a coordinate."""

    def grad_at(v):
        t = gc.tensor(v, requires_grad=True)
        f(t).backward()
        return t.grad.numpy()

    step = np.eye(x.size) * eps
    return np.array([(grad_at(x + step[k]) - grad_at(x - step[k])) / (2 * eps) for k in range(x.size)])


@pytest.mark.parametrize("name", list(CASES))
def test_structured_hessian_equals_dense_path_and_finite_differences(name, monkeypatch):
    f, _, _ = CASES[name]
    structured = hessian(f, gc.tensor(X)).numpy()
    _dense_path(monkeypatch)
    dense = hessian(f, gc.tensor(X)).numpy()
    scale = np.max(np.abs(dense))
    np.testing.assert_allclose(structured, dense, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(structured, structured.T, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(structured, _numeric_hessian(f, X), rtol=1e-6, atol=1e-6 * scale)


@pytest.mark.parametrize("name", list(CASES))
def test_structured_hessian_matches_torch(name):
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    f, ft, _ = CASES[name]
    expected = torch.func.hessian(lambda v: ft(torch, v))(torch.tensor(X)).numpy()
    got = hessian(f, gc.tensor(X)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * np.max(np.abs(expected)))


@pytest.mark.parametrize("name", list(CASES))
def test_structure_is_kept_until_the_end(name, monkeypatch):
    """Where every op keeps the structure, the result is the one batch made dense; where one
    does not (a matrix product, cumsum), that op gets the dense array and the rest goes on dense."""
    f, _, kept = CASES[name]
    made, final = [], []
    real_dense, real_final = Structured.dense, functional._dense
    monkeypatch.setattr(Structured, "dense", lambda self: made.append(repr(self)) or real_dense(self))
    monkeypatch.setattr(functional, "_dense", lambda t: final.append(type(t)) or real_final(t))
    hessian(f, gc.tensor(X))
    assert final == ([Structured] if kept else [np.ndarray])
    if kept:
        assert len(made) == 1, made


def test_benchmark_hessian_is_diagonal_bands_and_rank_two(monkeypatch):
    """sum(exp(x[:-1]) x[1:]) + (x.x)^2: bands -1, 0, 1 and the rank-1 part 8 x x^T (two terms)."""
    seen = []
    real = Structured.dense
    monkeypatch.setattr(Structured, "dense", lambda self: seen.append(self) or real(self))
    x = X[:6]
    H = hessian(CASES["benchmark"][0], gc.tensor(x)).numpy()
    (final,) = seen
    assert sorted(final.bands) == [-1, 0, 1] and final.U.shape == (6, 2)
    e = np.exp(x[:-1])
    expected = 8.0 * np.outer(x, x) + 4.0 * (x @ x) * np.eye(6)
    i = np.arange(5)
    expected[i, i] += e * x[1:]
    expected[i, i + 1] += e
    expected[i + 1, i] += e
    np.testing.assert_allclose(H, expected, rtol=1e-13, atol=1e-14)


def test_too_many_terms_turn_dense():
    s = Structured.identity(5)
    total = s
    for k in range(basis.MAX_TERMS + 2):
        total = total + Structured.spread(np.full((5, 1), float(k))) * np.arange(5.0)
    assert isinstance(total, np.ndarray)
    np.testing.assert_array_equal(total, np.eye(5) + np.full((5, 1), sum(range(basis.MAX_TERMS + 2))) * np.arange(5.0))


def test_structured_batch_operations_against_dense():
    rng = np.random.default_rng(3)
    s = Structured(6, 6, {0: rng.standard_normal(6), 2: np.r_[rng.standard_normal(4), 0, 0]},
                   rng.standard_normal((6, 2)), rng.standard_normal((2, 6)))  # fmt: skip
    d = np.asarray(s)
    w = rng.standard_normal(6)
    np.testing.assert_allclose(np.asarray(s * w), d * w, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(w * s), d * w, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(s / (2 + w)), d / (2 + w), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(-s), -d)
    np.testing.assert_allclose(np.asarray(s - s * w), d - d * w, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(np.asarray(s.sliced(1, 5)), d[:, 1:5], rtol=1e-14)
    np.testing.assert_allclose(np.asarray(s.sliced(1, 5).scattered(1, 6)), np.pad(d[:, 1:5], ((0, 0), (1, 1))))
    np.testing.assert_allclose(s.summed(), d.sum(axis=1), rtol=1e-14)
    np.testing.assert_allclose(s.inner(w), d @ w, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(s * np.array([np.inf, 1, 1, 1, 1, 1])), d * [np.inf, 1, 1, 1, 1, 1])
    np.testing.assert_allclose(np.cos(s), np.cos(d))  # anything else: the dense array


def test_float32_input_gives_the_dense_paths_dtype_and_values(monkeypatch):
    f = CASES["benchmark"][0]
    x = gc.tensor(X.astype(np.float32))
    structured = hessian(f, x)
    _dense_path(monkeypatch)
    dense = hessian(f, x)
    assert structured.dtype == dense.dtype
    np.testing.assert_allclose(structured.numpy(), dense.numpy(), rtol=1e-6, atol=1e-6)


def test_create_graph_hessian_is_unchanged_and_differentiable():
    """create_graph=True goes reverse-over-reverse (recorded): the structured pass is not used."""
    x = gc.tensor(X[:5], requires_grad=True)
    H = hessian(CASES["low rank"][0], x, create_graph=True)
    plain = hessian(CASES["low rank"][0], gc.tensor(X[:5])).numpy()
    np.testing.assert_allclose(H.detach().numpy(), plain, rtol=1e-12, atol=1e-12)
    gc.sum(H).backward()
    v, n = X[:5], 5  # d/dx of sum(H), by central differences of the Hessian
    eps = 1e-6
    numeric = []
    for k in range(n):
        e = np.zeros(n)
        e[k] = eps
        hp = hessian(CASES["low rank"][0], gc.tensor(v + e)).numpy().sum()
        hm = hessian(CASES["low rank"][0], gc.tensor(v - e)).numpy().sum()
        numeric.append((hp - hm) / (2 * eps))
    np.testing.assert_allclose(x.grad.numpy(), numeric, rtol=1e-6, atol=1e-6)
