"""Complex autograd (issue 12): PyTorch's conjugate Wirtinger convention, in both modes.

Generated from the primitive table: every primitive is either checked at complex
points against PyTorch float64/complex128 (reverse mode, forward mode and a second
derivative), checked against finite differences (holomorphic ones torch does not
take complex), or listed as refusing complex inputs, which is asserted. A primitive
added to the table without being placed here fails ``test_every_primitive_is_classified``.
"""

from __future__ import annotations

import numpy as np
import pytest

import gradcli as gc
from gradcli.ops import PRIMITIVES

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

rng = np.random.default_rng(12)


def cz(*shape, re=(0.3, 1.2), im=(-0.5, 0.5)):
    """Complex samples away from branch cuts and poles."""
    return rng.uniform(*re, size=shape) + 1j * rng.uniform(*im, size=shape)


# name -> (gradcli function, torch function name or callable, inputs)
def _t(name):
    return lambda *a: getattr(torch, name)(*a)


UNARY_HOLOMORPHIC = [
    "exp", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sin", "cos", "tan",
    "asin", "acos", "atan", "sinh", "cosh", "tanh", "sigmoid", "neg",
    "asinh", "acosh", "atanh", "exp2", "square", "reciprocal", "rsqrt", "sinc",
]  # fmt: skip
TORCH_CASES = {name: (getattr(gc, name), _t(name), [cz(3)]) for name in UNARY_HOLOMORPHIC}
TORCH_CASES.update(
    {
        "add": (lambda a, b: a + b, lambda a, b: a + b, [cz(3), cz(3)]),
        "sub": (lambda a, b: a - b, lambda a, b: a - b, [cz(3), cz(1)]),
        "mul": (lambda a, b: a * b, lambda a, b: a * b, [cz(3), cz(3)]),
        "div": (lambda a, b: a / b, lambda a, b: a / b, [cz(3), cz(3)]),
        "pow": (lambda a, b: a**b, lambda a, b: a**b, [cz(3), cz(3)]),
        "abs": (gc.abs, torch.abs if torch else None, [cz(3)]),
        "conj": (gc.conj, (lambda z: z.conj_physical()) if torch else None, [cz(3)]),
        "real": (gc.real, (lambda z: z.real) if torch else None, [cz(3)]),
        "imag": (gc.imag, (lambda z: z.imag) if torch else None, [cz(3)]),
        "copy": (lambda z: z * 1, lambda z: z * 1, [cz(3)]),
        "clone": (lambda z: z.clone(), lambda z: z.clone(), [cz(3)]),
        "to": (lambda z: gc.real(z).to(np.complex128), lambda z: z.real.to(torch.complex128), [cz(3)]),
        "where": (
            lambda a, b: gc.where(gc.tensor([True, False, True]), a, b),
            lambda a, b: torch.where(torch.tensor([True, False, True]), a, b),
            [cz(3), cz(3)],
        ),
        "fill": (lambda z: (z * 1).fill_(2.0) * z, lambda z: (z * 1).fill_(2.0) * z, [cz(3)]),
        "reshape": (lambda z: z.reshape(2, 3), lambda z: z.reshape(2, 3), [cz(6)]),
        "permute": (lambda z: z.permute(1, 0), lambda z: z.permute(1, 0), [cz(2, 3)]),
        "expand": (lambda z: z.expand(2, 3), lambda z: z.expand(2, 3), [cz(1, 3)]),
        "getitem": (lambda z: z[1:] * z[0], lambda z: z[1:] * z[0], [cz(3)]),
        "scatter": (lambda z: z[[0, 0, 2]] * z[1], lambda z: z[[0, 0, 2]] * z[1], [cz(3)]),
        "index_put": (None, None, [cz(3), cz(1)]),
        "stack": (lambda a, b: gc.stack([a, b * a]), lambda a, b: torch.stack([a, b * a]), [cz(3), cz(3)]),
        "cat": (lambda a, b: gc.cat([a, b * a]), lambda a, b: torch.cat([a, b * a]), [cz(3), cz(3)]),
        "dot": (gc.dot, lambda a, b: torch.dot(a, b), [cz(3), cz(3)]),
        "mv": (gc.mv, lambda a, b: torch.mv(a, b), [cz(2, 3), cz(3)]),
        "mm": (gc.mm, lambda a, b: torch.mm(a, b), [cz(2, 3), cz(3, 2)]),
        "matmul": (lambda a, b: a @ b, lambda a, b: a @ b, [cz(2, 2, 3), cz(3)]),
        "sum": (lambda z: (z * z).sum(0), lambda z: (z * z).sum(0), [cz(2, 3)]),
        "mean": (lambda z: (z * z).mean(1), lambda z: (z * z).mean(1), [cz(2, 3)]),
        "prod": (lambda z: z.prod(1), lambda z: z.prod(1), [cz(2, 3)]),
        "norm": (lambda z: gc.norm(z, dim=1), lambda z: torch.linalg.vector_norm(z, dim=1), [cz(2, 3)]),
        "cumsum": (lambda z: (z * z).cumsum(1), lambda z: (z * z).cumsum(1), [cz(2, 3)]),
        "cumprod": (lambda z: z.cumprod(1), lambda z: z.cumprod(1), [cz(2, 3)]),
        "flip": (lambda z: z.flip(0) * z, lambda z: z.flip(0) * z, [cz(2, 3)]),
        "det": (lambda z: gc.det(z * z), lambda z: torch.linalg.det(z * z), [cz(3, 3)]),
        "solve": (lambda a, b: gc.solve(a * a, b), lambda a, b: torch.linalg.solve(a * a, b), [cz(2, 2), cz(2)]),
        "inv": (lambda z: gc.inv(z * z), lambda z: torch.linalg.inv(z * z), [cz(2, 2)]),
        "trace": (lambda z: gc.trace(z * z), lambda z: torch.trace(z * z), [cz(3, 3)]),
        "tril": (lambda z: gc.tril(z * z, -1), lambda z: torch.tril(z * z, -1), [cz(3, 3)]),
        "triu": (lambda z: gc.triu(z * z), lambda z: torch.triu(z * z), [cz(2, 3)]),
        "gather": (
            lambda z: (z * z).gather(1, np.array([[2, 0, 2], [1, 1, 0]])),
            lambda z: (z * z).gather(1, torch.tensor([[2, 0, 2], [1, 1, 0]])),
            [cz(2, 3)],
        ),
        "index_select": (
            lambda z: (z * z).index_select(0, np.array([1, 0, 1])),
            lambda z: (z * z).index_select(0, torch.tensor([1, 0, 1])),
            [cz(2, 3)],
        ),
        "split": (lambda z: (z * z).chunk(2, 1)[1], lambda z: (z * z).chunk(2, 1)[1], [cz(2, 3)]),
        "unbind": (lambda z: (z * z).unbind(1)[2], lambda z: (z * z).unbind(1)[2], [cz(2, 3)]),
        "masked_fill": (
            lambda z, v: (z * z).masked_fill(np.array([True, False, True]), v * v),
            lambda z, v: (z * z).masked_fill(torch.tensor([True, False, True]), v * v),
            [cz(2, 3), cz()],
        ),
        "repeat": (lambda z: (z * z).repeat(2, 1, 2), lambda z: (z * z).repeat(2, 1, 2), [cz(2, 3)]),
        "var": (lambda z: gc.var(z * z, 1), lambda z: torch.var(z * z, 1), [cz(2, 3)]),
        "std": (lambda z: gc.std(z * z), lambda z: torch.std(z * z), [cz(2, 3)]),
        "logaddexp": (lambda a, b: gc.logaddexp(a, b * 3j), lambda a, b: torch.logaddexp(a, b * 3j), [cz(3), cz(3)]),
        "softsign": (lambda z: gc.softsign(z * z), lambda z: torch.nn.functional.softsign(z * z), [cz(3)]),
        "lerp": (lambda a, b: gc.lerp(a, b * b, a), lambda a, b: torch.lerp(a, b * b, a), [cz(3), cz(3)]),
        "diagonal": (lambda z: (z * z).diagonal(1), lambda z: (z * z).diagonal(1), [cz(3, 4)]),
        "diag_embed": (lambda z: gc.diag(z * z, -1), lambda z: torch.diag(z * z, -1), [cz(3)]),
        "roll": (lambda z: (z * z).roll(1, 0) * z, lambda z: (z * z).roll(1, 0) * z, [cz(2, 3)]),
        "cross": (lambda a, b: gc.cross(a, b * a), lambda a, b: torch.linalg.cross(a, b * a), [cz(2, 3), cz(3)]),
    }
)


def _index_put(lib):
    def f(z, v):
        y = z * 1
        y[1] = v[0] * z[0]
        return y * z

    return f


TORCH_CASES["index_put"] = (_index_put(gc), _index_put(torch), TORCH_CASES["index_put"][2])

# holomorphic, but torch takes no complex there: checked against finite differences
FD_CASES = {
    "softplus": (gc.softplus, [cz(3)]),
    "silu": (gc.silu, [cz(3)]),
    "logsumexp": (lambda z: gc.logsumexp(z, 0), [cz(3)]),
    "softmax": (lambda z: gc.softmax(z, 0), [cz(3)]),
    "log_softmax": (lambda z: gc.log_softmax(z, 0), [cz(3)]),
    "rad2deg": (gc.rad2deg, [cz(3)]),
    "deg2rad": (gc.deg2rad, [cz(3)]),
    "logsigmoid": (gc.logsigmoid, [cz(3)]),
    "mish": (gc.mish, [cz(3)]),
    "nan_to_num": (lambda z: gc.nan_to_num(z * z), [cz(3)]),
}
# not holomorphic and no complex rule: differentiating at a complex input must refuse
REFUSED = {
    "sign": gc.sign,
    "relu": gc.relu,
    "elu": gc.elu,
    "leaky_relu": gc.leaky_relu,
    "maximum": lambda z: gc.maximum(z, z * 2),
    "minimum": lambda z: gc.minimum(z, z * 2),
    "clamp": lambda z: gc.clamp(z, -1.0, 1.0),
    "clamp_tensor": lambda z: gc.clamp(z, gc.tensor(-1.0), gc.tensor(1.0)),
    "max": lambda z: gc.amax(z),
    "min": lambda z: gc.amin(z),
    "hardtanh": gc.hardtanh,
}
# no complex values at all: comparisons and logic have no gradient; erf, atan2 and remainder have no complex forward
NOT_COMPLEX = {
    "lt",
    "le",
    "gt",
    "ge",
    "eq",
    "ne",
    "logical_not",
    "logical_and",
    "logical_or",
    "erf",
    "erfc",
    "gelu",
    "atan2",
    "remainder",
    "cbrt",
    "hypot",
    "floor",
    "ceil",
    "round",
    "trunc",
    "sort",
    "topk",
}


def test_every_primitive_is_classified():
    placed = set(TORCH_CASES) | set(FD_CASES) | set(REFUSED) | NOT_COMPLEX
    assert set(PRIMITIVES) - placed == set(), "classify new primitives for complex inputs here"


def _scalarize(y, w):
    """A real scalar from an output: Re(sum(w * y)) (w complex for a complex output)."""
    complex_out = y.is_complex() if torch is not None and isinstance(y, torch.Tensor) else y.dtype.kind == "c"
    return (y * w).sum().real if complex_out else (y * w.real).sum()


@needs_torch
@pytest.mark.parametrize("name", sorted(TORCH_CASES))
def test_reverse_mode_matches_torch_at_complex_points(name):
    fn, tfn, inputs = TORCH_CASES[name]
    zs = [gc.tensor(v, requires_grad=True) for v in inputs]
    tzs = [torch.tensor(v, dtype=torch.complex128, requires_grad=True) for v in inputs]
    y, ty = fn(*zs), tfn(*tzs)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-14)
    v = cz(*y.shape, re=(-1, 1), im=(-1, 1))
    ours = gc.grad(y, zs, grad_outputs=gc.tensor(v if y.dtype.kind == "c" else v.real))
    tv = torch.tensor(v if ty.is_complex() else v.real)
    theirs = torch.autograd.grad(ty, tzs, grad_outputs=tv)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.numpy(), t.resolve_conj().numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


@needs_torch
@pytest.mark.parametrize("name", sorted(TORCH_CASES))
def test_forward_mode_matches_torch_at_complex_points(name):
    from torch.func import jvp as torch_jvp

    fn, tfn, inputs = TORCH_CASES[name]
    tangents = [cz(*np.shape(v), re=(-1, 1), im=(-1, 1)) for v in inputs]
    _, ours = gc.functional.jvp(fn, tuple(gc.tensor(v) for v in inputs), tuple(gc.tensor(t) for t in tangents))
    _, theirs = torch_jvp(
        tfn,
        tuple(torch.tensor(v, dtype=torch.complex128) for v in inputs),
        tuple(torch.tensor(t, dtype=torch.complex128) for t in tangents),
    )
    np.testing.assert_allclose(np.asarray(ours.numpy()), theirs.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


SECOND_ORDER = [n for n in sorted(TORCH_CASES) if n not in ("to", "fill", "index_put", "scatter")]


@needs_torch
@pytest.mark.parametrize("name", SECOND_ORDER)
def test_second_derivative_matches_torch_at_complex_points(name):
    fn, tfn, inputs = TORCH_CASES[name]
    zs = [gc.tensor(v, requires_grad=True) for v in inputs]
    tzs = [torch.tensor(v, dtype=torch.complex128, requires_grad=True) for v in inputs]
    y, ty = fn(*zs), tfn(*tzs)
    w = cz(*y.shape, re=(-1, 1), im=(-1, 1))
    (g,) = gc.grad(_scalarize(y, gc.tensor(w)), zs[:1], create_graph=True)
    (tg,) = torch.autograd.grad(_scalarize(ty, torch.tensor(w)), tzs[:1], create_graph=True)
    u = cz(*g.shape, re=(-1, 1), im=(-1, 1))
    s, ts = (g * gc.tensor(u)).sum().real, (tg * torch.tensor(u)).sum().real
    if not ts.requires_grad:  # linear in z: torch's gradient does not depend on it
        assert not s.requires_grad or all(
            float(np.abs(d.numpy()).max()) == 0 for d in gc.grad(s, zs, allow_unused=True, materialize_grads=True)
        )
        return
    ours = gc.grad(s, zs, allow_unused=True, materialize_grads=True)
    theirs = torch.autograd.grad(ts, tzs, allow_unused=True, materialize_grads=True)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.numpy(), t.resolve_conj().numpy(), rtol=1e-9, atol=1e-11, err_msg=name)


@pytest.mark.parametrize("name", sorted(FD_CASES))
def test_holomorphic_primitives_torch_lacks_match_finite_differences(name):
    fn, inputs = FD_CASES[name]
    z0 = inputs[0]
    z = gc.tensor(z0, requires_grad=True)
    y = fn(z)
    v = cz(*y.shape, re=(-1, 1), im=(-1, 1))
    (g,) = gc.grad(y, z, grad_outputs=gc.tensor(v))
    # PyTorch's convention for a holomorphic f: grad = conj(J)^T v; J by central differences
    h = 1e-6
    cols = []
    for k in range(z0.size):
        e = np.zeros_like(z0)
        e.flat[k] = h
        cols.append((fn(gc.tensor(z0 + e)).numpy() - fn(gc.tensor(z0 - e)).numpy()).ravel() / (2 * h))
    jac = np.stack(cols, axis=-1)
    np.testing.assert_allclose(g.numpy().ravel(), np.conj(jac).T @ np.ravel(v), rtol=1e-7, atol=1e-9)
    _, tangent = gc.functional.jvp(fn, gc.tensor(z0), gc.tensor(np.ones_like(z0)))
    np.testing.assert_allclose(np.ravel(tangent.numpy()), jac.sum(axis=1), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_non_holomorphic_primitives_refuse_complex_inputs(name):
    z = gc.tensor(cz(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="not differentiable at complex inputs"):
        y = REFUSED[name](z)
        gc.grad(_scalarize(y, gc.tensor(np.ones(y.shape, dtype=complex))), z)


# --- the case and the convention's basics, without torch ---------------------------------------


def test_vjp_of_z_squared_is_the_conjugate_derivative():
    z = gc.tensor(0.5 + 0.2j, requires_grad=True)
    (z * z).backward(gc.tensor(1.0 + 0j))
    assert z.grad.item() == pytest.approx(1 - 0.4j, abs=1e-15)
    _, vjp = gc.functional.vjp(lambda z: z * z, gc.tensor(0.5 + 0.2j), gc.tensor(1.0 + 0j))
    assert vjp.item() == pytest.approx(1 - 0.4j, abs=1e-15)


def test_forward_tangent_of_z_squared_is_the_derivative_times_the_tangent():
    _, t = gc.functional.jvp(lambda z: z * z, gc.tensor(0.5 + 0.2j), gc.tensor(1.0 + 0j))
    assert t.item() == pytest.approx(1 + 0.4j, abs=1e-15)
    _, t = gc.functional.jvp(lambda z: z * z, gc.tensor(0.5 + 0.2j), gc.tensor(1j))
    assert t.item() == pytest.approx(-0.4 + 1j, abs=1e-15)


def test_real_loss_of_a_complex_input_gives_the_gradient_dx_plus_i_dy():
    # L = |z|^2 = x^2 + y^2: PyTorch's z.grad = dL/dx + i dL/dy = 2 z
    z = gc.tensor(0.5 + 0.2j, requires_grad=True)
    (gc.abs(z) ** 2).backward()
    assert z.grad.item() == pytest.approx(1 + 0.4j)
    z.grad = None
    (gc.conj(z) * z).real.backward()
    assert z.grad.item() == pytest.approx(1 + 0.4j)


def test_real_input_through_a_complex_constant_gets_a_real_gradient():
    x = gc.tensor([2.0, 1.0], requires_grad=True)
    y = gc.sin(x) * (1 + 2j)
    y.backward(gc.tensor([1 - 1j, 1j]))
    assert x.grad.dtype == np.float64
    expected = np.real(np.cos([2.0, 1.0]) * np.conj(1 + 2j) * np.array([1 - 1j, 1j]))
    np.testing.assert_allclose(x.grad.numpy(), expected)
    (gx,) = gc.grad(gc.sin(x) * (1 + 2j), x, grad_outputs=gc.tensor([1 - 1j, 1j]))
    assert gx.dtype == np.float64
    np.testing.assert_allclose(gx.numpy(), expected)


def test_backward_of_a_complex_scalar_needs_a_gradient():
    z = gc.tensor(1.0 + 1j, requires_grad=True)
    with pytest.raises(RuntimeError, match="real scalar outputs"):
        (z * z).backward()


def test_complex_gradients_accumulate_in_complex():
    z = gc.tensor([0.5 + 0.2j, 1.0 - 1j], requires_grad=True)
    y = z * z + z
    y.backward(gc.ones_like(y))
    np.testing.assert_allclose(z.grad.numpy(), np.conj(2 * z.detach().numpy() + 1))
