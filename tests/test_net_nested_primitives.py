"""Every primitive in both modes and nested to second order, and against PyTorch.

HIPS autograd's ``check_grads(f, modes=["fwd", "rev"], order=2)``, generated from
the primitive table. ``test_primitives.py`` already checks, per primitive, the
reverse rule against finite differences, reverse-over-reverse (a Hessian-vector
product by ``create_graph=True``) and the forward rule against the reverse one.
This file adds, at the same inputs (its ``CASES`` and seeded draws from each
elementwise primitive's domain):

- forward mode (``gc.functional.jvp``) against a finite difference of the
  primitive along the same direction, with no reverse rule involved;
- forward-over-reverse (``gc.functional.hvp``) and reverse-over-forward (the
  gradient of a ``jvp`` taken with ``create_graph=True``) against a finite
  difference of the (already checked) first derivative;
- the first and second derivatives against PyTorch (float64) for every
  primitive with a PyTorch counterpart (``TORCH`` below); skipped without torch.

A differentiable primitive with no entry in ``TORCH`` (and not in ``NO_TORCH``)
fails ``test_every_primitive_has_a_torch_counterpart``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numdiff import STENCIL, STEP
from test_primitives import CASES, GENERIC, KINK_MARGIN, _differentiable_inputs, _evaluate

import gradcli as gc
from gradcli.autograd.record import apply
from gradcli.ops import PRIMITIVES

RTOL, ATOL = 1e-6, 1e-8  # against finite differences (4th-order stencil)
TORCH_RTOL, TORCH_ATOL = 1e-10, 1e-12  # against PyTorch: the same formulas, rounded differently


def _draws(prim, count: int = 2) -> list[tuple[list[np.ndarray], tuple]]:
    """Seeded inputs inside the primitive's domain, away from its kinks (same shape, then broadcast)."""
    rng = np.random.default_rng(sum(map(ord, prim.name)))
    shapes = [[(3,)], [(2, 3)]] if prim.arity == 1 else [[(3,), (3,)], [(2, 3), (3,)]]
    draws = []
    for shape_list in shapes[:count]:
        while True:
            values = [rng.uniform(*prim.domain_of(i), size=s) for i, s in enumerate(shape_list)]
            if prim.analytic:
                break
            gap = np.abs(values[0]) if prim.arity == 1 else np.abs(np.subtract(*np.broadcast_arrays(*values)))
            if np.all(gap > 5 * KINK_MARGIN):
                break
        draws.append((values, ()))
    return draws


ALL_CASES = [(p.name, case) for p in GENERIC for case in _draws(p)] + [
    (name, case) for name, cases in CASES.items() for case in cases
]
IDS = [f"{name}-{i}" for i, (name, _) in enumerate(ALL_CASES)]


class Setup:
    """The primitive as functions of its differentiable inputs, with a weight ``w`` and a direction ``u``."""

    def __init__(self, name: str, case: tuple[list[Any], tuple]) -> None:
        self.prim = PRIMITIVES[name]
        inputs, self.params = case
        self.values = [np.asarray(v) for v in inputs]
        self.which = _differentiable_inputs(self.prim, self.values)
        rng = np.random.default_rng(len(self.values) + sum(v.size for v in self.values))
        self.out = np.asarray(_evaluate(self.prim, self.values, self.params))
        self.w = rng.standard_normal(self.out.shape)
        self.u = [rng.standard_normal(self.values[i].shape) for i in self.which]
        self.x = [self.values[i].astype(np.float64) for i in self.which]

    def full(self, xs: list[Any]) -> list[Any]:
        """All inputs: ``xs`` at the differentiable places, the fixed values elsewhere."""
        out: list[Any] = [gc.tensor(v) for v in self.values]
        for i, x in zip(self.which, xs):
            out[i] = x
        return out

    def f(self, *xs: Any) -> gc.Tensor:
        return apply(self.prim, self.full(list(xs)), self.params)

    def F(self, *xs: Any) -> gc.Tensor:  # noqa: N802 - the scalar w . f
        return gc.sum(self.f(*xs) * self.w)

    def leaves(self) -> list[gc.Tensor]:
        return [gc.tensor(x, requires_grad=True) for x in self.x]

    def numpy_f(self, xs: list[np.ndarray]) -> np.ndarray:
        full = list(self.values)
        for i, x in zip(self.which, xs):
            full[i] = x
        return np.asarray(_evaluate(self.prim, full, self.params), dtype=np.float64)

    def gradient(self, xs: list[np.ndarray]) -> np.ndarray:
        """grad (w . f) at ``xs``, by reverse mode (checked against finite differences elsewhere)."""
        leaves = [gc.tensor(x, requires_grad=True) for x in xs]
        gs = gc.grad(self.F(*leaves), leaves, allow_unused=True, materialize_grads=True)
        return flat(gs)

    def along_u(self, fn: Callable[[list[np.ndarray]], np.ndarray]) -> np.ndarray:
        """d/dt fn(x + t u) at t = 0, by the 4th-order central stencil."""
        total = 0.0
        for offset, weight in STENCIL:
            total = total + weight * fn([x + offset * STEP * d for x, d in zip(self.x, self.u)])
        return total / (12.0 * STEP)


def flat(items: Any) -> np.ndarray:
    if isinstance(items, gc.Tensor):
        items = [items]
    arrays = [np.asarray(t._value if isinstance(t, gc.Tensor) else t, dtype=np.float64) for t in items]
    return np.concatenate([np.ravel(a) for a in arrays]) if arrays else np.zeros(0)


def close(got: np.ndarray, want: np.ndarray, what: str, rtol: float = RTOL, atol: float = ATOL) -> None:
    assert np.shape(got) == np.shape(want), f"{what}: shape {np.shape(got)}, expected {np.shape(want)}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * max(1.0, float(np.max(np.abs(want), initial=0))),
                               err_msg=what)  # fmt: skip


@pytest.mark.parametrize("name,case", ALL_CASES, ids=IDS)
def test_forward_mode_against_finite_differences(name, case):
    s = Setup(name, case)
    _, tangent = gc.functional.jvp(s.f, tuple(s.leaves()), tuple(gc.tensor(u) for u in s.u))
    close(flat(tangent), np.ravel(s.along_u(s.numpy_f)), f"{name}: jvp")


@pytest.mark.parametrize("name,case", ALL_CASES, ids=IDS)
def test_forward_over_reverse_against_finite_differences_of_the_gradient(name, case):
    s = Setup(name, case)
    _, hu = gc.functional.hvp(s.F, tuple(s.leaves()), tuple(gc.tensor(u) for u in s.u))
    close(flat(hu), s.along_u(s.gradient), f"{name}: forward-over-reverse H u")


@pytest.mark.parametrize("name,case", ALL_CASES, ids=IDS)
def test_reverse_over_forward_against_finite_differences_of_the_gradient(name, case):
    s = Setup(name, case)
    leaves = s.leaves()
    _, tangent = gc.functional.jvp(s.f, tuple(leaves), tuple(gc.tensor(u) for u in s.u), create_graph=True)
    inner = gc.sum(tangent * s.w)  # w . J(x) u, whose gradient in x is H_w u
    if inner.requires_grad:
        got = flat(gc.grad(inner, leaves, allow_unused=True, materialize_grads=True))
    else:  # not connected to x: right only where J does not depend on x (a linear primitive)
        got = np.zeros(sum(x.size for x in s.x))
    close(got, s.along_u(s.gradient), f"{name}: reverse-over-forward d/dx (w . J u)")


def test_the_cases_cover_every_differentiable_primitive():
    covered = {name for name, _ in ALL_CASES}
    assert {p.name for p in PRIMITIVES.values() if p.differentiable} <= covered


# --- PyTorch ------------------------------------------------------------------------------------------------------


def _dims(x: Any, axis: Any) -> Any:
    return tuple(range(x.ndim)) if axis is None else axis


def _torch_index(torch: Any, index: tuple, shape: tuple[int, ...]) -> tuple:
    """NumPy's index for torch: arrays as tensors, a negative-step slice as the positions it takes."""
    out = []
    for d, item in enumerate(index):
        if isinstance(item, np.ndarray):
            out.append(torch.as_tensor(item))
        elif isinstance(item, slice) and (item.step or 1) < 0:
            out.append(torch.as_tensor(np.arange(shape[d])[item].copy()))
        else:
            out.append(item)
    return tuple(out)


def _scatter(torch, src, index, shape, nbatch):
    positions = tuple(
        torch.as_tensor(np.arange(shape[d])[i] if isinstance(i, slice) else i) for d, i in enumerate(index)
    )
    return torch.zeros(shape, dtype=src.dtype).index_put(positions, src, accumulate=True)


def _index_put(torch, x, value, index):
    y = x.clone()
    y[_torch_index(torch, index, x.shape)] = value
    return y


def _unary(name: str) -> Callable[..., Any]:
    return lambda torch, *xs: getattr(torch, name)(*xs)


#: name -> (torch, *inputs, *params) -> tensor
TORCH: dict[str, Callable[..., Any]] = {
    **{
        n: _unary(n)
        for n in (
            "add",
            "sub",
            "mul",
            "div",
            "neg",
            "pow",
            "exp",
            "expm1",
            "log",
            "log2",
            "log10",
            "log1p",
            "sqrt",
            "sin",
            "cos",
            "tan",
            "asin",
            "acos",
            "atan",
            "sinh",
            "cosh",
            "tanh",
            "atan2",
            "remainder",
            "abs",
            "sign",
            "relu",
            "maximum",
            "minimum",
            "sigmoid",
            "erf",
            "asinh",
            "acosh",
            "atanh",
            "exp2",
            "square",
            "reciprocal",
            "hypot",
            "logaddexp",
            "floor",
            "ceil",
            "round",
            "trunc",
            "rsqrt",
            "erfc",
            "sinc",
            "rad2deg",
            "deg2rad",
            "clone",
            "dot",
            "mv",
            "mm",
            "matmul",
        )
    },  # fmt: skip
    "copy": lambda torch, x: x.clone(),
    "cbrt": lambda torch, x: torch.sign(x) * torch.abs(x) ** (1 / 3),
    "softplus": lambda torch, x, beta, threshold: torch.nn.functional.softplus(x, beta, threshold),
    "silu": lambda torch, x: torch.nn.functional.silu(x),
    "elu": lambda torch, x, alpha: torch.nn.functional.elu(x, alpha),
    "gelu": lambda torch, x, approximate: torch.nn.functional.gelu(x, approximate=approximate),
    "hardtanh": lambda torch, x, lo, hi: torch.nn.functional.hardtanh(x, lo, hi),
    "nan_to_num": lambda torch, x, nan, posinf, neginf: torch.nan_to_num(x, nan, posinf, neginf),
    "lerp": lambda torch, a, b, w: torch.lerp(a, b, w),
    "logsigmoid": lambda torch, x: torch.nn.functional.logsigmoid(x),
    "softsign": lambda torch, x: torch.nn.functional.softsign(x),
    "mish": lambda torch, x: torch.nn.functional.mish(x),
    "leaky_relu": lambda torch, x: torch.nn.functional.leaky_relu(x),
    "to": lambda torch, x, dtype: x.to(getattr(torch, np.dtype(dtype).name)),
    "where": lambda torch, c, a, b: torch.where(c.bool(), a, b),
    "clamp": lambda torch, x, lo, hi: torch.clamp(x, lo, hi),
    "clamp_tensor": lambda torch, x, lo, hi: torch.clamp(x, lo, hi),
    "fill": lambda torch, x, value: x * 0 + value,
    "sum": lambda torch, x, axis, keep: torch.sum(x, dim=_dims(x, axis), keepdim=keep),
    "mean": lambda torch, x, axis, keep: torch.mean(x, dim=_dims(x, axis), keepdim=keep),
    "prod": lambda torch, x, axis, keep: torch.prod(x) if axis is None else torch.prod(x, dim=axis[0], keepdim=keep),
    "max": lambda torch, x, axis, keep: torch.amax(x, dim=_dims(x, axis), keepdim=keep),
    "min": lambda torch, x, axis, keep: torch.amin(x, dim=_dims(x, axis), keepdim=keep),
    "logsumexp": lambda torch, x, axis, keep: torch.logsumexp(x, dim=_dims(x, axis), keepdim=keep),
    "norm": lambda torch, x, axis, keep: torch.linalg.vector_norm(x, dim=axis, keepdim=keep),
    "softmax": lambda torch, x, axis: torch.softmax(x, axis),
    "log_softmax": lambda torch, x, axis: torch.log_softmax(x, axis),
    "cumsum": lambda torch, x, axis: torch.cumsum(x, axis),
    "cumprod": lambda torch, x, axis: torch.cumprod(x, axis),
    "var": lambda torch, x, axis, keep, c: torch.var(x, dim=_dims(x, axis), keepdim=keep, correction=c),
    "std": lambda torch, x, axis, keep, c: torch.std(x, dim=_dims(x, axis), keepdim=keep, correction=c),
    "flip": lambda torch, x, axes: torch.flip(x, axes),
    "reshape": lambda torch, x, shape: x.reshape(shape),
    "permute": lambda torch, x, axes: x.permute(axes),
    "expand": lambda torch, x, shape: x.expand(shape),
    "getitem": lambda torch, x, index: x[_torch_index(torch, index, x.shape)],
    "scatter": _scatter,
    "index_put": _index_put,
    "stack": lambda torch, xs, axis: torch.stack(xs, axis),
    "cat": lambda torch, xs, axis: torch.cat(xs, axis),
    "trace": lambda torch, x: torch.trace(x),
    "inv": lambda torch, x: torch.linalg.inv(x),
    "det": lambda torch, x: torch.linalg.det(x),
    "solve": lambda torch, a, b, vector: torch.linalg.solve(a, b),
    "sort": lambda torch, x, axis, index: torch.take_along_dim(x, torch.as_tensor(index), axis),
    "topk": lambda torch, x, axis, index: torch.take_along_dim(x, torch.as_tensor(index), axis),
    "tril": lambda torch, x, k: torch.tril(x, k),
    "triu": lambda torch, x, k: torch.triu(x, k),
    "gather": lambda torch, x, dim, index: torch.gather(x, dim, torch.as_tensor(index)),
    "index_select": lambda torch, x, dim, index: torch.index_select(x, dim, torch.as_tensor(index)),
    "split": lambda torch, x, dim, start, length: x.split([start, length, x.shape[dim] - start - length], dim)[1],
    "unbind": lambda torch, x, dim, i: x.unbind(dim)[i],
    "masked_fill": lambda torch, x, value, mask: x.masked_fill(torch.as_tensor(mask), value),
    "repeat": lambda torch, x, sizes: x.repeat(*sizes),
    "diagonal": lambda torch, x, offset, dim1, dim2: torch.diagonal(x, offset, dim1, dim2),
    "diag_embed": lambda torch, x, shape, offset, dim1, dim2: (
        torch.diag(x, offset) if x.ndim == 1 else torch.diag_embed(x, offset, dim1, dim2)
    ),
    "roll": lambda torch, x, shifts, dims: torch.roll(x, shifts, dims),
    "cross": lambda torch, a, b, dim: torch.linalg.cross(*torch.broadcast_tensors(a, b), dim=dim),
}
# conj, real and imag are identities (or zero) on the real draws here; they are compared with PyTorch
# on complex inputs in tests/test_engine_complex.py.
NO_TORCH: set[str] = {"conj", "real", "imag"}


def test_every_primitive_has_a_torch_counterpart():
    differentiable = {p.name for p in PRIMITIVES.values() if p.differentiable}
    assert differentiable - set(TORCH) - NO_TORCH == set()


def _torch_derivatives(torch: Any, s: Setup) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Value, grad (w . f) and H_w u, by PyTorch in float64."""
    leaves = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in s.x]
    full: list[Any] = [torch.as_tensor(v) for v in s.values]
    for i, x in zip(s.which, leaves):
        full[i] = x
    fn = TORCH[s.prim.name]
    out = fn(torch, full, *s.params) if s.prim.arity < 0 else fn(torch, *full, *s.params)
    total = (out * torch.as_tensor(s.w)).sum()
    grads = torch.autograd.grad(total, leaves, create_graph=True, allow_unused=True, materialize_grads=True)
    inner = sum((g * torch.as_tensor(u)).sum() for g, u in zip(grads, s.u))
    if inner.requires_grad:
        hu = torch.autograd.grad(inner, leaves, allow_unused=True, materialize_grads=True)
    else:
        hu = [torch.zeros_like(x) for x in leaves]
    as_flat = lambda ts: np.concatenate([t.detach().numpy(force=True).reshape(-1) for t in ts])  # noqa: E731
    return out.detach().numpy().astype(np.float64), as_flat(grads), as_flat(hu)


TORCH_CASES = [(c, i) for c, i in zip(ALL_CASES, IDS) if c[0] not in NO_TORCH]


@pytest.mark.parametrize("name,case", [c for c, _ in TORCH_CASES], ids=[i for _, i in TORCH_CASES])
def test_first_and_second_derivatives_against_pytorch(name, case):
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    s = Setup(name, case)
    value, grad, hu = _torch_derivatives(torch, s)
    leaves = s.leaves()
    out = s.f(*leaves)
    gs = gc.grad(gc.sum(out * s.w), leaves, create_graph=True, allow_unused=True, materialize_grads=True)
    inner = gc.sum(gc.stack([gc.sum(g * u) for g, u in zip(gs, s.u)]))
    if inner.requires_grad:
        got_hu = flat(gc.grad(inner, leaves, allow_unused=True, materialize_grads=True))
    else:
        got_hu = np.zeros_like(hu)
    close(np.asarray(out._value, dtype=np.float64), value, f"{name}: value", TORCH_RTOL, TORCH_ATOL)
    close(flat(gs), grad, f"{name}: first derivative", TORCH_RTOL, TORCH_ATOL)
    close(got_hu, hu, f"{name}: second derivative", TORCH_RTOL, TORCH_ATOL)
