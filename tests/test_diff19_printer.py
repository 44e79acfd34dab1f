"""Issue 19: what ``diff`` prints is gradcli's language, which ``eval`` reads back.

For every function of the catalog with a SymPy form, the text ``diff`` prints (the library's
``formatted`` of ``explain_derivatives``, the same call the command makes) is evaluated with the
language at random points and compared with autograd's gradient there.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from gradcli.lang.catalog import catalog
from gradcli.lang.compute import explain_derivatives, formatted, value_and_grad
from gradcli.lang.functions import FUNCTIONS
from gradcli.lang.printer import to_language
from gradcli.lang.program import load
from gradcli.lang.symbolic import stop_gradient

#: argument lists tried in turn for each arity, with the shape of each variable
SCALARS = {"x": (), "y": (), "z": ()}
TRIES = {
    1: ["x", "v", "A"],
    2: [
        "x, y",
        "v, w",
        "A, v",
        "A, B",
        "v, 0",
        "A, 1",
        "v, 1",
        "v, [1, 0]",
        "A, [1, 0]",
        "v, [2]",
        "A, [2, 4]",
        "u, t",
    ],
    3: ["z, x, y", "v, 0, 1", "A, 1, 2", "A, 0, [1, 0]", "(v > 0.5), v, w", "v, 1, 0", "A, 1, 0", "v, 2, 1"],
    4: ["v, 0, 0, 1", "A, 1, 0, 1"],
}
SHAPES = {
    "x": (),
    "y": (),
    "z": (),
    "v": (2,),
    "w": (2,),
    "A": (2, 2),
    "B": (2, 2),
    "u": (3,),
    "t": (3,),
}  # u, t: cross
#: where each function's derivative is defined and smooth (the default: 0.3 .. 0.9)
DOMAIN = {"acosh": (1.2, 2.5), "cbrt": (-0.9, 0.9), "leaky_relu": (-0.9, 0.9), "elu": (-0.9, 0.9)}


def _point(names: list[str], low: float, high: float, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {n: rng.uniform(low, high, size=SHAPES[n]) for n in names}


def _weights(shape: tuple[int, ...]) -> str:
    """A constant array of ``shape`` to reduce a non-scalar result with (every element counts)."""
    return str((np.arange(int(np.prod(shape))).reshape(shape) + 2).tolist())


def _program(name: str, rng: np.random.Generator) -> tuple[str, dict[str, np.ndarray]] | None:
    """``name(...)`` (reduced to a scalar when it is not one) and a point where it evaluates."""
    low, high = DOMAIN.get(name, (0.3, 0.9))
    for arity in FUNCTIONS[name].arities:
        for args in TRIES.get(arity, []):
            if arity not in FUNCTIONS[name].elementwise and not any(a in args for a in "vwABut"):
                continue  # a reduction or a matrix function of a scalar says little
            call = f"{name}({args})"
            names = [n for n in SHAPES if n in args.replace("(", " ").replace(",", " ").split()]
            point = _point(names, low, high, rng)
            try:
                value = load(call).run(point).outputs[0]
            except Exception:
                continue
            if value.array.dtype.kind != "f" or not np.isfinite(value.array).all():
                continue
            text = call if value.shape == () else f"sum({call} * {_weights(value.shape)})"
            try:  # SymPy's form of this argument list
                explanation = explain_derivatives(load(text), list(point), {n: np.shape(v) for n, v in point.items()})
            except Exception:
                continue
            return text, point, explanation
    return None


WITH_SYMPY = sorted(e["name"] for e in catalog() if e["sympy"])


@pytest.mark.parametrize("name", WITH_SYMPY)
def test_diff_output_reads_back_through_eval_for_every_function(name):
    rng = np.random.default_rng(19)
    found = _program(name, rng)
    if found is None and name in NO_TRIAL:
        pytest.skip(NO_TRIAL[name])
    assert found is not None, f"{name}: no argument list evaluates; add one to TRIES"
    text, point, explanation = found
    for row in explanation.rows:
        printed = formatted(row.derivative)
        assert "Piecewise" not in printed and "Heaviside" not in printed and "**" not in printed, printed
        for k in range(3):  # the point, then two more random points
            at = point if k == 0 else {n: v + rng.uniform(-0.05, 0.05, size=np.shape(v)) for n, v in point.items()}
            expected = value_and_grad(load(text), at, [row.name]).gradient[row.name]
            got = np.asarray(load(printed).run(at).outputs[0].array, dtype=float)
            np.testing.assert_allclose(
                np.broadcast_to(got, np.shape(expected)), expected, rtol=1e-9, atol=1e-12, err_msg=f"{text}: {printed}"
            )


#: functions no argument list of TRIES reaches, with the reason
NO_TRIAL: dict[str, str] = {}


def test_printer_spellings_the_language_reads():
    x, y = sp.symbols("x y", real=True)
    assert to_language(sp.exp(-x) / (1 + sp.exp(-x)) ** 2) == "(1 - sigmoid(x))*sigmoid(x)"
    assert to_language(sp.cosh(x) ** -2) == "1/cosh(x)^2"
    # issue 27: SymPy's Heaviside(0) is 1/2 (max's tie), and the text says so; H0 = 0 and 1 read as one comparison
    assert to_language(sp.Heaviside(x - y)) == "((x > y) + (x == y)/2)"
    assert to_language(sp.Heaviside(x - y, 0)) == "(x > y)"
    assert to_language(sp.Heaviside(x - y, 1)) == "(x >= y)"
    assert to_language(sp.Max(x, y) + sp.Min(x, 2)) == "max(x, y) + min(2, x)"
    assert to_language(sp.Abs(x) * sp.sign(y)) == "abs(x)*sign(y)"
    assert to_language(sp.Piecewise((1, sp.Eq(x, 0)), (2 * x**2, True))) == "where(x == 0, 1, 2*x^2)"
    assert to_language(sp.Piecewise((1, (x > 0) & (y < 1)), (0, True))) == "((x > 0)*(y < 1))"  # an indicator
    assert to_language(stop_gradient(x**2) * x) == "x*detach(x^2)"
    assert to_language(sp.Rational(1, 3) * x ** sp.Rational(2, 3) - y) == "x^(2/3)/3 - y"
    assert to_language(sp.sqrt(x) + 1 / sp.sqrt(y) + sp.pi + sp.E) == "sqrt(x) + exp(1) + pi + 1/sqrt(y)"
    assert to_language(sp.Mod(x, y) + sp.ceiling(x)) == "remainder(x, y) + ceil(x)"
    assert to_language(2 * sp.DiracDelta(x) + 1) == "1"  # autograd's convention: 0 almost everywhere
