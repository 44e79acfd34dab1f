"""Elementwise primitives: one block per primitive.

Conventions at kinks follow PyTorch: abs'(0) = 0, relu'(0) = 0, sign' = 0, and
maximum/minimum split the gradient evenly at ties. Rules are NumPy-style so that
they run on arrays and, for higher derivatives, on gradcli tensors.
"""

from __future__ import annotations

import functools
import math
import operator

import numpy as np

from .core import Primitive, primitive

LN2 = math.log(2.0)
LN10 = math.log(10.0)
#: The group the rows of this module are listed in (``gradcli ops``, the README).
GROUP = "elementwise"

TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def unary(name, forward, rule, formula, sympy, **facts):
    """An elementwise one-input primitive whose derivative is ``formula``."""
    facts.setdefault("numpy", (forward,) if isinstance(forward, np.ufunc) else ())
    facts.setdefault("batch", "elementwise")
    return primitive(
        name,
        1,
        forward,
        (rule,),
        elementwise=True,
        formulas=(formula,),
        sympy=sympy,
        label=facts.pop("label", name),
        **facts,
    )


def defined_on(ufunc, low, high):
    """``ufunc``, NaN (or an infinity at an end) outside ``[low, high]`` without NumPy's warning: PyTorch
    gives the same values silently. Inputs inside (the usual case) pay one comparison, not an errstate."""

    def forward(x):
        if np.iscomplexobj(x) or np.all((x >= low) & (x <= high)):
            return ufunc(x)
        with np.errstate(invalid="ignore", divide="ignore"):
            return ufunc(x)

    forward.__name__ = ufunc.__name__
    return forward


def binary(name, forward, rules, formulas, sympy, **facts):
    facts.setdefault("numpy", (forward,) if isinstance(forward, np.ufunc) else ())
    facts.setdefault("batch", "elementwise")
    return primitive(name, 2, forward, rules, elementwise=True, formulas=formulas, sympy=sympy, **facts)


# Arithmetic runs through Python's operators: on arrays they are the NumPy ufuncs, and on
# 0-d values they take NumPy's scalar fast path (~0.16 us instead of ~1.6 us for np.add),
# which is most of the cost of a graph of scalars.


# --- arithmetic --------------------------------------------------------------------

ADD = binary(
    "add",
    operator.add,
    (lambda g, out, a, b: g, lambda g, out, a, b: g),
    ("1", "1"),
    lambda sp, a, b: a + b,
    saves="nothing",
    named_rule="sum rule",
    label="+",
    numpy=(np.add,),
    doc="a + b",
)
SUB = binary(
    "sub",
    operator.sub,
    (lambda g, out, a, b: g, lambda g, out, a, b: -g),
    ("1", "-1"),
    lambda sp, a, b: a - b,
    saves="nothing",
    named_rule="difference rule",
    label="-",
    numpy=(np.subtract,),
    doc="a - b",
    variant=lambda consts, params: ("rsub", 1) if consts[0] else 0,
)
MUL = binary(
    "mul",
    operator.mul,
    (lambda g, out, a, b: g * b, lambda g, out, a, b: g * a),
    ("{1}", "{0}"),
    lambda sp, a, b: a * b,
    named_rule="product rule",
    label="*",
    numpy=(np.multiply,),
    doc="a * b",
    reads=((1,), (0,)),
)
DIV = binary(
    "div",
    operator.truediv,
    # PyTorch's div_tensor_other_backward: -g (a / b) / b, not a / b^2, whose powers of b grow with each
    # derivative taken through it (the 6th derivative of 1/x at 4 reaches 4^64, past float32's range)
    (lambda g, out, a, b: g / b, lambda g, out, a, b: -g * ((a / b) / b)),
    ("1/{1}", "-{0}/{1}^2"),
    lambda sp, a, b: a / b,
    named_rule="quotient rule",
    label="/",
    numpy=(np.true_divide,),
    doc="a / b",
    reads=((1,), (0, 1)),
    domain=((-3.0, 3.0), (0.5, 3.0)),
)
NEG = unary(
    "neg",
    operator.neg,
    lambda g, out, x: -g,
    "-1",
    lambda sp, x: -x,
    saves="nothing",
    named_rule="constant multiple",
    label="-",
    numpy=(np.negative,),
    doc="-x",
)


def _pow_dbase(g, out, x, y):
    # y * x^(y-1), zero where it would be 0 * inf (x = 0, y = 0). PyTorch masks every y = 0,
    # which also zeroes the mixed second derivative there; masking only x = 0 keeps it right.
    if isinstance(y, (int, float)):
        if y == 2:  # the common square: 2x, without computing x ** 1
            return g * (2.0 * x)
        return np.zeros_like(g) if y == 0 else g * (y * x ** (y - 1))
    return np.where((y == 0) & (x == 0), 0.0, g * (y * x ** (y - 1)))


def _pow_dexp(g, out, x, y):
    # PyTorch's pow_backward_exponent: zero where base == 0 and exponent >= 0. The power
    # is recomputed rather than saved: most exponents are constants, and saving x ** y
    # would keep a whole array alive for a rule that never runs.
    if isinstance(x, (int, float)) and x > 0:
        return g * (x**y * math.log(x))  # a Python float: the tangent keeps y's dtype (float32)
    xv, yv = np.asarray(x), np.asarray(y)  # the mask is data: no gradient flows through it
    if np.iscomplexobj(yv):  # as PyTorch: only a real exponent >= 0 (imaginary part 0) is masked
        masked = (xv == 0) & (yv.imag == 0) & (yv.real >= 0)
    else:
        masked = (xv == 0) & (yv >= 0)
    # log of 1 where masked: that branch stays finite, so its own derivatives (create_graph) are 0
    # rather than 0 * -inf = nan. Unmasked, a base 0 gives out * log(0) = inf * -inf = -inf (y < 0),
    # as PyTorch; the log is taken in the result's type: a negative base to a complex exponent has
    # log(-2) = ln 2 + i pi, finite.
    safe = np.where(masked, 1.0, x)
    if np.iscomplexobj(yv) and not np.iscomplexobj(xv):
        safe = safe + 0j
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(masked, 0.0, g * (x**y * np.log(safe)))


POW = binary(
    "pow",
    operator.pow,
    (_pow_dbase, _pow_dexp),
    ("{1}*{0}^({1}-1)", "{out}*log({0})"),
    lambda sp, a, b: a**b,
    named_rule="power rule",
    label="^",
    domain=((0.5, 2.0), (-2.0, 2.0)),
    numpy=(np.power,),
    # x**2 -> PowBackward0, x**y -> PowBackward1, 2**x -> PowBackward2
    variant=lambda consts, params: 0 if consts[1] else (2 if consts[0] else 1),
    doc="a ^ b",
)


_PLAIN = (np.ndarray, np.generic, float, int)


def _floor_quotient(a, b):
    """floor(a / b), a step function: its derivative is 0. On arrays NumPy's floor; on tensors
    (``create_graph``) ``(a - a % b) / b``, the same steps written with differentiable
    operations whose derivatives cancel (floor itself has no derivative rule)."""
    if isinstance(a, _PLAIN) and isinstance(b, _PLAIN):
        return np.floor(a / b)
    return (a - np.remainder(a, b)) / b


@functools.cache
def _sympy_mod(sp):
    class Mod(sp.Mod):
        """SymPy's Mod (the sign of the divisor, as here), with the derivatives it leaves unevaluated."""

        def fdiff(self, argindex=1):
            a, b = self.args
            return sp.Integer(1) if argindex == 1 else -sp.floor(a / b)

    return Mod


REMAINDER = binary(
    "remainder",
    np.remainder,  # Python's and PyTorch's remainder: the sign of the divisor (-1 % 3 is 2)
    (lambda g, out, a, b: g, lambda g, out, a, b: -g * _floor_quotient(a, b)),
    ("1", "-floor({0}/{1})"),
    lambda sp, a, b: _sympy_mod(sp)(a, b),
    label="%",
    analytic=False,  # a step at every multiple of b: the complex step does not apply
    group="rounding",
    domain=((2.2, 2.8), (1.0, 1.05)),  # away from the jumps: a / b stays between 2 and 3
    numpy=(np.remainder,),
    torch="remainder",
    # x % 2 -> RemainderBackward0 (a number divisor), x % y -> RemainderBackward1
    variant=lambda consts, params: 0 if consts[1] else 1,
    doc="a % b, the remainder with the sign of b (as in Python and PyTorch)",
)

# --- exponentials and logarithms ------------------------------------------------------------

EXP = unary("exp", np.exp, lambda g, out, x: g * out, "exp({0})", lambda sp, x: sp.exp(x), saves="output", doc="e^x")
EXPM1 = unary(
    "expm1",
    np.expm1,
    lambda g, out, x: g * (out + 1),
    "exp({0})",
    lambda sp, x: sp.exp(x) - 1,
    saves="output",
    doc="exp(x) - 1, accurate near 0",
)
EXP2 = unary(
    "exp2",
    np.exp2,
    lambda g, out, x: g * (out * LN2),
    "2^{0}*log(2)",
    lambda sp, x: 2**x,
    saves="output",
    doc="2^x",
)
LOG = unary(
    "log",
    np.log,
    lambda g, out, x: g / x,
    "1/{0}",
    lambda sp, x: sp.log(x),
    domain=((0.1, 3.0),),
    doc="natural logarithm",
)
LOG2 = unary(
    "log2",
    np.log2,
    lambda g, out, x: g / (x * LN2),
    "1/({0}*log(2))",
    lambda sp, x: sp.log(x, 2),
    domain=((0.1, 3.0),),
    doc="base-2 logarithm",
)
LOG10 = unary(
    "log10",
    np.log10,
    lambda g, out, x: g / (x * LN10),
    "1/({0}*log(10))",
    lambda sp, x: sp.log(x, 10),
    domain=((0.1, 3.0),),
    doc="base-10 logarithm",
)
LOG1P = unary(
    "log1p",
    np.log1p,
    lambda g, out, x: g / (x + 1),
    "1/(1+{0})",
    lambda sp, x: sp.log(1 + x),
    domain=((-0.9, 3.0),),
    doc="log(1 + x), accurate near 0",
)
SQUARE = unary(
    "square",
    np.square,
    lambda g, out, x: g * (2 * x),
    "2*{0}",
    lambda sp, x: x**2,
    torch="pow",  # torch.square records x ** 2: PowBackward0
    doc="x^2",
)


def _reciprocal(x):
    # np.reciprocal of an integer array is integer division (1 // x); 1 / x is not
    return np.reciprocal(x) if np.asarray(x).dtype.kind in "fc" else 1.0 / x


RECIPROCAL = unary(
    "reciprocal",
    _reciprocal,
    lambda g, out, x: -g * (out * out),
    "-1/{0}^2",
    lambda sp, x: 1 / x,
    saves="output",
    numpy=(np.reciprocal,),
    domain=((0.5, 3.0),),
    doc="1/x",
)


def _sympy_cbrt(sp, x):
    # the real cube root (SymPy's cbrt is the principal root, complex for x < 0)
    return sp.Piecewise((sp.cbrt(x), x >= 0), (-sp.cbrt(-x), True))


CBRT = unary(
    "cbrt",
    np.cbrt,
    lambda g, out, x: g / (3 * (out * out)),
    "1/(3*cbrt({0})^2)",
    _sympy_cbrt,
    saves="output",
    analytic=False,  # NumPy's cbrt takes no complex values: no complex step through it
    torch="pow",  # PyTorch has no cbrt: x ** (1/3), PowBackward0
    domain=((0.2, 3.0),),
    doc="real cube root (negative for x < 0)",
)
SQRT = unary(
    "sqrt",
    np.sqrt,
    lambda g, out, x: g / (2 * out),
    "1/(2*sqrt({0}))",
    lambda sp, x: sp.sqrt(x),
    saves="output",
    domain=((0.1, 3.0),),
    doc="square root",
)

# --- trigonometric and hyperbolic --------------------------------------------------------------

SIN = unary("sin", np.sin, lambda g, out, x: g * np.cos(x), "cos({0})", lambda sp, x: sp.sin(x), doc="sine")
COS = unary("cos", np.cos, lambda g, out, x: g * -np.sin(x), "-sin({0})", lambda sp, x: sp.cos(x), doc="cosine")
TAN = unary(
    "tan",
    np.tan,
    lambda g, out, x: g * (1 + out * out),
    "1 + tan({0})^2",
    lambda sp, x: sp.tan(x),
    saves="output",
    domain=((-1.4, 1.4),),
    doc="tangent",
)
ASIN = unary(
    "asin",
    defined_on(np.arcsin, -1.0, 1.0),
    lambda g, out, x: g / np.sqrt(1 - x * x),
    "1/sqrt(1-{0}^2)",
    lambda sp, x: sp.asin(x),
    domain=((-0.9, 0.9),),
    doc="inverse sine",
    numpy=(np.arcsin,),  # (NumPy's own function dispatches to the row)
)
ACOS = unary(
    "acos",
    defined_on(np.arccos, -1.0, 1.0),
    lambda g, out, x: -g / np.sqrt(1 - x * x),
    "-1/sqrt(1-{0}^2)",
    lambda sp, x: sp.acos(x),
    domain=((-0.9, 0.9),),
    doc="inverse cosine",
    numpy=(np.arccos,),  # (NumPy's own function dispatches to the row)
)
ATAN = unary(
    "atan", np.arctan, lambda g, out, x: g / (1 + x * x), "1/(1+{0}^2)", lambda sp, x: sp.atan(x), doc="inverse tangent"
)
SINH = unary(
    "sinh", np.sinh, lambda g, out, x: g * np.cosh(x), "cosh({0})", lambda sp, x: sp.sinh(x), doc="hyperbolic sine"
)
COSH = unary(
    "cosh", np.cosh, lambda g, out, x: g * np.sinh(x), "sinh({0})", lambda sp, x: sp.cosh(x), doc="hyperbolic cosine"
)
TANH = unary(
    "tanh",
    np.tanh,
    lambda g, out, x: g * (1 - out * out),
    "1 - tanh({0})^2",
    lambda sp, x: sp.tanh(x),
    saves="output",
    doc="hyperbolic tangent",
)
ASINH = unary(
    "asinh",
    np.arcsinh,
    lambda g, out, x: g / np.sqrt(x * x + 1),
    "1/sqrt({0}^2+1)",
    lambda sp, x: sp.asinh(x),
    doc="inverse hyperbolic sine",
)
ACOSH = unary(
    "acosh",
    defined_on(np.arccosh, 1.0, np.inf),
    lambda g, out, x: g / np.sqrt(x * x - 1),
    "1/sqrt({0}^2-1)",
    lambda sp, x: sp.acosh(x),
    domain=((1.1, 3.0),),
    doc="inverse hyperbolic cosine (x >= 1)",
    numpy=(np.arccosh,),  # (NumPy's own function dispatches to the row)
)
ATANH = unary(
    "atanh",
    defined_on(np.arctanh, -1.0, 1.0),
    lambda g, out, x: g / (1 - x * x),
    "1/(1-{0}^2)",
    lambda sp, x: sp.atanh(x),
    domain=((-0.9, 0.9),),
    doc="inverse hyperbolic tangent (-1 < x < 1)",
    numpy=(np.arctanh,),  # (NumPy's own function dispatches to the row)
)
ATAN2 = binary(
    "atan2",
    np.arctan2,
    (lambda g, out, y, x: g * x / (x * x + y * y), lambda g, out, y, x: -g * y / (x * x + y * y)),
    ("{1}/({0}^2+{1}^2)", "-{0}/({0}^2+{1}^2)"),
    lambda sp, y, x: sp.atan2(y, x),
    analytic=False,
    domain=((0.2, 3.0), (-3.0, 3.0)),
    arg_names=("y", "x"),
    doc="angle of the point (x, y): atan2(y, x)",
)

HYPOT = binary(
    "hypot",
    np.hypot,
    (lambda g, out, a, b: g * (a / out), lambda g, out, a, b: g * (b / out)),
    ("{0}/hypot({0}, {1})", "{1}/hypot({0}, {1})"),
    lambda sp, a, b: sp.sqrt(a**2 + b**2),
    saves="both",
    analytic=False,  # NumPy's hypot takes no complex values
    domain=((0.2, 3.0), (-3.0, 3.0)),
    doc="sqrt(a^2 + b^2), without overflow",
)


def _logaddexp(a, b):
    if not (np.iscomplexobj(a) or np.iscomplexobj(b)):
        return np.logaddexp(a, b)
    # NumPy's takes no complex values. PyTorch's (ATen's complex _log_add_exp_helper): log1p(exp(lo - hi))
    # + hi, hi the value of larger real part, whose imaginary part stays as it is (never wrapped to
    # (-pi, pi]); NaN anywhere gives NaN; two equal infinite real parts give lo (-inf) or log(e^lo + e^hi)
    dtype = np.result_type(a, b)
    a, b = np.broadcast_arrays(np.asarray(a, dtype), np.asarray(b, dtype))
    first = a.real >= b.real
    hi, lo = np.where(first, a, b), np.where(first, b, a)
    with np.errstate(all="ignore"):  # the infinite and NaN cases are picked out below
        out = np.log1p(np.exp(lo - hi)) + hi
        infinite = ~np.isfinite(lo.real) & (lo.real == hi.real)
        out = np.where(infinite, np.where(lo.real < 0, lo, np.log(np.exp(lo) + np.exp(hi))), out)
    nan = np.isnan(a.real) | np.isnan(a.imag) | np.isnan(b.real) | np.isnan(b.imag)
    return np.where(nan, dtype.type(complex(np.nan, np.nan)), out).astype(dtype, copy=False)[()]


LOGADDEXP = binary(
    "logaddexp",
    _logaddexp,
    (lambda g, out, a, b: g * np.exp(a - out), lambda g, out, a, b: g * np.exp(b - out)),
    ("exp({0} - logaddexp({0}, {1}))", "exp({1} - logaddexp({0}, {1}))"),
    lambda sp, a, b: sp.log(sp.exp(a) + sp.exp(b)),
    saves="both",
    numpy=(np.logaddexp,),
    doc="log(exp(a) + exp(b)), without overflow",
)

# --- kinks: PyTorch's subgradients ---------------------------------------------------------------

# --- complex parts: the conjugate is not holomorphic, its rules are its own ---------------------------

CONJ = unary(
    "conj",
    np.conjugate,
    lambda g, out, x: CONJ(g),
    "1",
    lambda sp, x: sp.conjugate(x),
    saves="nothing",
    analytic=False,
    numpy=(np.conjugate,),
    public=False,
    doc="complex conjugate (the identity on real values)",
    complex_vjp=(lambda g, out, x: CONJ(g),),
    complex_jvp=lambda ts, out, x: CONJ(ts[0]),
)
REAL = unary(
    "real",
    np.real,
    lambda g, out, x: REAL(g),  # the gradient of a real output is real
    "1",
    lambda sp, x: sp.re(x),
    saves="nothing",
    analytic=False,
    numpy=(),
    public=False,
    doc="real part",
    complex_vjp=(lambda g, out, x: REAL(g),),
    complex_jvp=lambda ts, out, x: REAL(ts[0]),
)
IMAG = unary(
    "imag",
    np.imag,
    lambda g, out, x: REAL(g) * 1j if x.dtype.kind == "c" else np.zeros_like(g),  # imag(x) = 0 for real x
    "i",
    lambda sp, x: sp.im(x),
    saves="meta",
    analytic=False,
    numpy=(),
    public=False,
    jvp=lambda ts, out, x: IMAG(ts[0]),
    doc="imaginary part",
    complex_vjp=(lambda g, out, x: REAL(g) * 1j,),
    complex_jvp=lambda ts, out, x: IMAG(ts[0]),
)


def _sgn(z):
    """z / |z|, 0 at 0 (PyTorch's sgn): the derivative of |z| in the conjugate Wirtinger sense."""
    zero = z == 0
    return np.where(zero, 0.0, z / np.where(zero, 1.0, np.abs(z)))


ABS = unary(
    "abs",
    np.absolute,
    lambda g, out, x: g * np.sign(x),
    "sign({0})",
    lambda sp, x: sp.Abs(x),
    analytic=False,
    numpy=(np.absolute, np.abs),
    doc="absolute value; abs'(0) = 0",
    # |z|: grad sgn(z) for a real grad; the tangent Re(conj(t) sgn(z)) (PyTorch's formulas)
    complex_vjp=(lambda g, out, x: REAL(g) * _sgn(x),),
    complex_jvp=lambda ts, out, x: REAL(CONJ(ts[0]) * _sgn(x)),
)
SIGN = unary(
    "sign",
    np.sign,
    lambda g, out, x: np.zeros_like(g),
    "0",
    lambda sp, x: sp.sign(x),
    saves="meta",  # (its dtype: a complex input is refused, sgn is not constant there)
    analytic=False,
    doc="sign: -1, 0 or 1; derivative 0",
)
RELU = unary(
    "relu",
    lambda x: np.maximum(x, 0),
    lambda g, out, x: np.where(out > 0, g, 0.0),
    "({0} > 0)",
    lambda sp, x: x * sp.Heaviside(x, 0),  # not Max(x, 0): relu'(0) is 0 (H0 = 0), not a tie's 1/2
    saves="output",
    analytic=False,
    doc="max(x, 0); relu'(0) = 0",
)


@functools.cache
def _sympy_rounding(sp, name):
    """SymPy's floor and ceiling, and round (half to even) and trunc, with the derivative 0 that
    gradcli and PyTorch give (SymPy leaves Derivative(floor(x), x) unevaluated)."""

    def fdiff(self, argindex=1):
        return sp.Integer(0)

    if name in ("floor", "ceil"):
        return type(name, (sp.floor if name == "floor" else sp.ceiling,), {"fdiff": fdiff})
    to_int = round if name == "round" else math.trunc  # round: Python's, half to even like NumPy's

    def at_number(cls, arg):  # SymPy's ``eval`` hook: a number rounds at once
        if arg.is_Number:
            return sp.Integer(to_int(float(arg)))
        return None

    return type(name, (sp.Function,), {"fdiff": fdiff, "eval": classmethod(at_number)})


def rounding(name, forward, what):
    return unary(
        name,
        forward,
        lambda g, out, x: np.zeros_like(g),
        "0",
        lambda sp, x: _sympy_rounding(sp, name)(x),
        saves="meta",  # (its dtype: a complex input is refused)
        analytic=False,
        group="rounding",
        # off the jumps, where finite differences see the derivative 0
        domain=((-0.4, 0.4),) if name == "round" else ((0.2, 0.8),),
        doc=f"{what}; derivative 0 (PyTorch's)",
    )


FLOOR = rounding("floor", np.floor, "largest integer <= x")
CEIL = rounding("ceil", np.ceil, "smallest integer >= x")
ROUND = rounding("round", np.round, "nearest integer, halves to even (as torch.round)")
TRUNC = rounding("trunc", np.trunc, "integer part, toward 0")


def _maximum_rule(first):
    def rule(g, out, a, b):
        wins = (a > b) if first else (b > a)
        return np.where(wins, g, np.where(a == b, g / 2, 0.0))

    return rule


def _minimum_rule(first):
    def rule(g, out, a, b):
        wins = (a < b) if first else (b < a)
        return np.where(wins, g, np.where(a == b, g / 2, 0.0))

    return rule


MAXIMUM = binary(
    "maximum",
    np.maximum,
    (_maximum_rule(True), _maximum_rule(False)),
    ("({0} > {1})", "({1} > {0})"),
    lambda sp, a, b: sp.Max(a, b),
    analytic=False,
    label="max",
    doc="elementwise max(a, b); ties split the gradient",
)
MINIMUM = binary(
    "minimum",
    np.minimum,
    (_minimum_rule(True), _minimum_rule(False)),
    ("({0} < {1})", "({1} < {0})"),
    lambda sp, a, b: sp.Min(a, b),
    analytic=False,
    label="min",
    doc="elementwise min(a, b); ties split the gradient",
)

# --- smooth activations and special functions ------------------------------------------------------


def _sigmoid(x):
    if np.iscomplexobj(x):  # complex step: no overflow to avoid at a tiny imaginary part
        return 1.0 / (1.0 + np.exp(-x))
    # exp(-softplus(-x)): no overflow and full relative precision in both tails
    return np.exp(-np.logaddexp(0.0, -x))


def _softplus(x, beta=1.0, threshold=20.0):
    """PyTorch's softplus: log(1 + exp(beta x)) / beta, and x itself where beta x > threshold."""
    bx = x * beta if beta != 1 else x
    if np.iscomplexobj(x):  # the analytic continuation: no overflow to avoid, no threshold
        return np.log1p(np.exp(bx)) / beta
    soft = np.logaddexp(0.0, bx)
    if beta != 1:
        soft = soft / beta
    return np.where(bx > threshold, x, soft).astype(soft.dtype, copy=False)[()]


def _softplus_rule(g, out, x, beta=1.0, threshold=20.0):
    # PyTorch's softplus_backward: grad where beta x > threshold, else grad * sigmoid(beta x)
    bx = x * beta if beta != 1 else x
    if np.iscomplexobj(getattr(x, "_value", x)):
        return g * SIGMOID(bx)
    return g * np.where(bx > threshold, 1.0, SIGMOID(bx))


SIGMOID = unary(
    "sigmoid",
    _sigmoid,
    lambda g, out, x: g * (1 - out) * out,
    "sigmoid({0})*(1-sigmoid({0}))",
    lambda sp, x: 1 / (1 + sp.exp(-x)),
    saves="output",
    numpy=(),
    doc="logistic function 1/(1+exp(-x))",
)
SOFTPLUS = primitive(
    "softplus",
    1,
    _softplus,
    (_softplus_rule,),
    elementwise=True,
    batch="elementwise",
    nparams=2,  # (beta, threshold), PyTorch's defaults 1 and 20 in the library and the language
    formulas=("sigmoid({0})",),
    sympy=lambda sp, x, beta=1, threshold=20: sp.log(1 + sp.exp(beta * x)) / beta,
    label="softplus",
    doc="log(1 + exp(x)), without overflow (x itself above the threshold 20, as in PyTorch)",
)


def _special(name):
    """``math``'s ``name`` (erf, erfc) for real values, a number or every element of an array, so that a
    point gives the same bits alone and in a batch (SciPy's differs from math's in the last bit for a
    third of inputs, and importing it costs eval 0.2-0.4 s); SciPy's for complex values (math's would
    drop the imaginary part: a complex step through it reads 0)."""
    real = getattr(math, name)
    elementwise = np.frompyfunc(real, 1, 1)

    def forward(x):
        if np.iscomplexobj(x):
            try:
                import scipy.special
            except ImportError:
                raise TypeError(f"{name} of complex values needs SciPy") from None
            return getattr(scipy.special, name)(x)
        dtype = np.result_type(x, np.float32)
        if isinstance(x, (float, np.floating)) or np.ndim(x) == 0:
            return np.asarray(real(float(x)), dtype=dtype)[()]
        return elementwise(x).astype(dtype)

    forward.__name__ = f"_{name}"
    return forward


_erf = _special("erf")


ERF = unary(
    "erf",
    _erf,
    lambda g, out, x: g * (TWO_OVER_SQRT_PI * np.exp(-(x * x))),
    "2/sqrt(pi)*exp(-{0}^2)",
    lambda sp, x: sp.erf(x),
    numpy=(),
    doc="error function",
)

INV_SQRT2 = 1.0 / math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


GELU_BETA = math.sqrt(2.0 / math.pi)  # PyTorch's kBeta for approximate="tanh"
GELU_KAPPA = 0.044715


def _gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(GELU_BETA * (x + GELU_KAPPA * (x * x * x))))
    return 0.5 * x * (1 + _erf(x * INV_SQRT2))


def _gelu_rule(g, out, x, approximate="none"):
    if approximate == "tanh":  # PyTorch's gelu_backward for approximate='tanh'
        x_sq = x * x
        t = np.tanh(GELU_BETA * (x + GELU_KAPPA * (x_sq * x)))
        right = (0.5 * x) * (1 - t * t) * (GELU_BETA * (1 + 3 * GELU_KAPPA * x_sq))
        return g * (0.5 * (1 + t) + right)
    # PyTorch's gelu_backward (approximate='none'): Phi(x) + x phi(x)
    return g * (0.5 * (1 + ERF(x * INV_SQRT2)) + x * (INV_SQRT_2PI * np.exp(-0.5 * (x * x))))


def _sympy_gelu(sp, x, approximate="none"):
    if approximate == "tanh":
        return x / 2 * (1 + sp.tanh(sp.sqrt(2 / sp.pi) * (x + sp.Float(GELU_KAPPA) * x**3)))
    return x / 2 * (1 + sp.erf(x / sp.sqrt(2)))


GELU = primitive(
    "gelu",
    1,
    _gelu,
    (_gelu_rule,),
    elementwise=True,
    batch="elementwise",
    nparams=1,  # approximate: "none" (erf) or "tanh", as PyTorch's
    formulas=("(1+erf({0}/sqrt(2)))/2 + {0}*exp(-{0}^2/2)/sqrt(2*pi)",),
    sympy=_sympy_gelu,
    label="gelu",
    doc='x Phi(x), PyTorch\'s gelu (approximate="tanh": its tanh form)',
)


def _silu(x):
    return x * _sigmoid(x)


def _silu_rule(g, out, x):
    # sigmoid(x) (1 + x sigmoid(-x)): sigmoid(-x), not 1 - sigmoid(x), keeps the digits of the
    # small tail on the right, where the second derivative is ~ -x exp(-x)
    return g * (SIGMOID(x) * (1 + x * SIGMOID(-x)))


SILU = unary(
    "silu",
    _silu,
    _silu_rule,
    "sigmoid({0})*(1 + {0}*(1-sigmoid({0})))",
    lambda sp, x: x / (1 + sp.exp(-x)),
    numpy=(),
    doc="x sigmoid(x) (swish)",
)


def _elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))[()]


def _elu_rule(g, out, x, alpha=1.0):
    # PyTorch's elu_backward: grad * alpha exp(x) for x <= 0, else grad (exp(x), not out + alpha, which
    # loses digits far left; the exponent is 0 where x >= 0, so no overflow and, as PyTorch's, a
    # second derivative 0 at 0)
    return g * np.where(x > 0, 1.0, alpha * np.exp(np.where(x < 0, x, 0.0)))


ELU = primitive(
    "elu",
    1,
    _elu,
    (_elu_rule,),
    elementwise=True,
    batch="elementwise",
    nparams=1,  # alpha, PyTorch's default 1
    formulas=("1 if {0} > 0, else alpha*exp({0})",),
    sympy=lambda sp, x, alpha=1: sp.Piecewise((x, x > 0), (alpha * (sp.exp(x) - 1), True)),
    label="elu",
    analytic=False,
    doc="x for x > 0, else alpha (exp(x) - 1) (alpha 1 by default)",
)
LEAKY_SLOPE = 0.01
LEAKY_RELU = unary(
    "leaky_relu",
    lambda x: np.where(x > 0, x, LEAKY_SLOPE * x)[()],
    lambda g, out, x: np.where(out > 0, g, LEAKY_SLOPE * g),
    "1 if {0} > 0, else 0.01",
    lambda sp, x: sp.Piecewise((x, x > 0), (sp.Rational(1, 100) * x, True)),
    saves="output",
    analytic=False,
    numpy=(),
    doc="x for x > 0, else 0.01 x; derivative 0.01 at 0",
)

# --- more of PyTorch's elementwise functions (issue 27) -----------------------------------------------

RSQRT = unary(
    "rsqrt",
    lambda x: 1.0 / np.sqrt(x),
    lambda g, out, x: g * (-0.5 * (out * out * out)),
    "-1/(2*{0}^(3/2))",
    lambda sp, x: 1 / sp.sqrt(x),
    saves="output",
    numpy=(),
    domain=((0.1, 3.0),),
    doc="1/sqrt(x)",
)
ERFC = unary(
    "erfc",
    _special("erfc"),
    lambda g, out, x: g * (-TWO_OVER_SQRT_PI * np.exp(-(x * x))),
    "-2/sqrt(pi)*exp(-{0}^2)",
    lambda sp, x: sp.erfc(x),
    numpy=(),
    doc="complementary error function 1 - erf(x), accurate where erf(x) is near 1",
)


SINC_SERIES_BELOW = 0.05  # |pi x| under which sinc' is its series: the formula cancels there


def _sinc_rule(g, out, x):
    # PyTorch's sinc_backward: (pi x cos(pi x) - sin(pi x)) / (pi x^2), 0 at 0. Near 0 that difference
    # cancels (its own derivative is noise, and PyTorch's double backward gives nan at 0): there the
    # series pi (-(pi x)/3 + (pi x)^3/30 - (pi x)^5/840) is used, exact to rounding for |pi x| < 0.05
    px = np.pi * x
    near = np.abs(np.asarray(px)) < SINC_SERIES_BELOW
    safe = np.where(near, 1.0, x)
    p_safe = np.pi * safe
    p2 = px * px
    series = np.pi * px * (-1.0 / 3.0 + p2 * (1.0 / 30.0 - p2 * (1.0 / 840.0)))
    return g * np.where(near, series, (np.cos(p_safe) * p_safe - np.sin(p_safe)) / (p_safe * safe))


SINC = unary(
    "sinc",
    np.sinc,
    _sinc_rule,
    "(pi*{0}*cos(pi*{0}) - sin(pi*{0}))/(pi*{0}^2), 0 at 0",
    lambda sp, x: sp.Piecewise((sp.Integer(1), sp.Eq(x, 0)), (sp.sin(sp.pi * x) / (sp.pi * x), True)),
    numpy=(),
    doc="normalized sinc: sin(pi x)/(pi x), 1 at 0",
)
DEGREES_PER_RADIAN = 180.0 / math.pi
RAD2DEG = unary(
    "rad2deg",
    lambda x: x * DEGREES_PER_RADIAN,  # (not NumPy's rad2deg, which takes no complex values for the complex step)
    lambda g, out, x: g * DEGREES_PER_RADIAN,
    "180/pi",
    lambda sp, x: x * 180 / sp.pi,
    saves="nothing",
    numpy=(np.rad2deg,),
    doc="radians to degrees: x * 180/pi",
)
DEG2RAD = unary(
    "deg2rad",
    lambda x: x * (1.0 / DEGREES_PER_RADIAN),
    lambda g, out, x: g * (1.0 / DEGREES_PER_RADIAN),
    "pi/180",
    lambda sp, x: x * sp.pi / 180,
    saves="nothing",
    numpy=(np.deg2rad,),
    doc="degrees to radians: x * pi/180",
)


def _logsigmoid(x):
    return -_softplus(-x, 1.0, math.inf)  # no overflow in either tail; complex x: the analytic continuation


LOGSIGMOID = unary(
    "logsigmoid",
    _logsigmoid,
    lambda g, out, x: g * SIGMOID(-x),
    "sigmoid(-{0})",
    lambda sp, x: -sp.log(1 + sp.exp(-x)),
    numpy=(),
    torch="log_sigmoid",
    doc="log(sigmoid(x)), without overflow",
)
SOFTSIGN = unary(
    "softsign",
    lambda x: x / (1 + np.abs(x)),
    lambda g, out, x: g / np.square(1 + np.abs(x)),
    "1/(1+abs({0}))^2",
    lambda sp, x: x / (1 + sp.Abs(x)),
    numpy=(),
    analytic=False,
    torch="div",  # PyTorch composes it: x / (1 + |x|) records DivBackward0
    doc="x/(1 + |x|)",
    # complex z: the rules PyTorch's composition gives, d|z| being Re(conj(dz) sgn(z))
    complex_vjp=(lambda g, out, x: g / (1 + np.abs(x)) - REAL(g * CONJ(x)) * _sgn(x) / np.square(1 + np.abs(x)),),
    complex_jvp=lambda ts, out, x: ts[0] / (1 + np.abs(x)) - x * REAL(CONJ(ts[0]) * _sgn(x)) / np.square(1 + np.abs(x)),
)


def _mish_rule(g, out, x):
    # PyTorch's mish_backward: tanh(softplus(x)) + x sigmoid(x) (1 - tanh(softplus(x))^2)
    t = np.tanh(SOFTPLUS(x, 1.0, math.inf))
    return g * (t + x * SIGMOID(x) * (1 - t * t))


MISH = unary(
    "mish",
    lambda x: x * np.tanh(_softplus(x, 1.0, math.inf)),  # (no threshold: as _mish_rule's)
    _mish_rule,
    "tanh(softplus({0})) + {0}*sigmoid({0})*(1-tanh(softplus({0}))^2)",
    lambda sp, x: x * sp.tanh(sp.log(1 + sp.exp(x))),
    numpy=(),
    doc="x tanh(softplus(x))",
)


def sym_hardtanh(sp, x, lo, hi):
    """hardtanh in SymPy with the pieces autograd's rule takes (not Min(Max(x, lo), hi), whose ties give 1/2 at
    the bounds where PyTorch's gradient is 0): x strictly inside (lo, hi), the bound outside and on it."""
    return sp.Piecewise((x, (x > lo) & (x < hi)), (lo, x <= lo), (hi, True))


def _hardtanh_rule(g, out, x, lo=-1.0, hi=1.0):
    # PyTorch's hardtanh_backward: the gradient passes strictly inside (lo, hi)
    xv = np.asarray(x)
    return np.where((xv > lo) & (xv < hi), g, 0.0)


HARDTANH = primitive(
    "hardtanh",
    1,
    lambda x, lo=-1.0, hi=1.0: np.clip(x, lo, hi),
    (_hardtanh_rule,),
    elementwise=True,
    batch="elementwise",
    nparams=2,  # (min_val, max_val), PyTorch's defaults -1 and 1
    formulas=("1 if -1 < {0} < 1, else 0",),
    sympy=lambda sp, x, lo=-1, hi=1: sym_hardtanh(sp, x, lo, hi),
    label="hardtanh",
    analytic=False,
    domain=((-0.9, 0.9),),
    doc="x limited to [-1, 1] (min_val, max_val in the library); gradient 1 strictly inside",
)


def _nan_to_num_rule(g, out, x, nan=0.0, posinf=None, neginf=None):
    return np.where(np.isfinite(np.asarray(x)), g, 0.0)  # PyTorch's: grad * isfinite(x)


NAN_TO_NUM = primitive(
    "nan_to_num",
    1,
    lambda x, nan=0.0, posinf=None, neginf=None: np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf),
    (_nan_to_num_rule,),
    elementwise=True,
    batch="elementwise",
    nparams=3,  # (nan, posinf, neginf): 0 and the dtype's largest and smallest finite numbers by default
    formulas=("1 where {0} is finite, else 0",),
    sympy=lambda sp, x, *params: x,
    label="nan_to_num",
    doc="x with NaN as 0 and +-inf as the largest finite numbers; gradient 1 where x is finite",
)


def _lerp(start, end, weight):
    # PyTorch's formula: from the nearer end, so that weight 1 gives end exactly
    return np.where(np.abs(weight) < 0.5, start + weight * (end - start), end - (end - start) * (1 - weight))[()]


LERP = primitive(
    "lerp",
    3,
    _lerp,
    (
        lambda g, out, a, b, w: g * (1 - w),
        lambda g, out, a, b, w: g * w,
        lambda g, out, a, b, w: g * (b - a),
    ),
    elementwise=True,
    batch="elementwise",
    formulas=("1-{2}", "{2}", "{1}-{0}"),
    sympy=lambda sp, a, b, w: a + w * (b - a),
    arg_names=("start", "end", "weight"),
    reads=((2,), (2,), (0, 1)),
    # lerp(a, b, 0.5) -> LerpBackward0 (a number weight), lerp(a, b, w) -> LerpBackward1
    variant=lambda consts, params: 0 if consts[2] else 1,
    doc="lerp(start, end, weight): start + weight (end - start)",
)

# --- copies: identities that PyTorch shows as their own nodes ------------------------------------------

COPY = unary(
    "copy",
    lambda x: np.array(x, copy=True),
    lambda g, out, x: g,
    "1",
    lambda sp, x: x,
    saves="nothing",
    backward_name="CopyBackwards",
    public=False,
    doc="a copy (PyTorch's CopyBackwards)",
)
CLONE = unary(
    "clone", lambda x: np.array(x, copy=True), lambda g, out, x: g, "1", lambda sp, x: x, saves="nothing", public=False
)


def _cast_rule(g, out, x, dtype):
    if x.dtype.kind != "c" and np.iscomplexobj(g):  # back to a real input: its real part
        g = REAL(g)
    return g.astype(x.dtype) if hasattr(g, "astype") else g


TO_COPY = primitive(
    "to",
    1,
    lambda x, dtype: np.asarray(x).astype(dtype),
    (_cast_rule,),
    saves="meta",
    nparams=1,
    torch="_to_copy",
    elementwise=False,
    formulas=("1",),
    public=False,
    doc="convert to another dtype",
    jvp=lambda ts, out, x, dtype: ts[0].astype(dtype) if hasattr(ts[0], "astype") else ts[0],
    batch="linear",
)

# --- comparisons: values 0/1, no gradient --------------------------------------------------------------


def comparison(name, op, ufunc, symbol, sym):
    return binary(
        name,
        op,
        (None, None),
        ("0", "0"),
        sym,
        label=symbol,
        saves="nothing",
        analytic=False,
        group="comparisons",
        numpy=(ufunc,),
        doc=f"a {symbol} b",
    )


LT = comparison("lt", operator.lt, np.less, "<", lambda sp, a, b: sp.Lt(a, b))
LE = comparison("le", operator.le, np.less_equal, "<=", lambda sp, a, b: sp.Le(a, b))
GT = comparison("gt", operator.gt, np.greater, ">", lambda sp, a, b: sp.Gt(a, b))
GE = comparison("ge", operator.ge, np.greater_equal, ">=", lambda sp, a, b: sp.Ge(a, b))
EQ = comparison("eq", np.equal, np.equal, "==", lambda sp, a, b: sp.Eq(a, b))
NE = comparison("ne", np.not_equal, np.not_equal, "!=", lambda sp, a, b: sp.Ne(a, b))
LOGICAL_NOT = primitive(
    "logical_not", 1, np.logical_not, (None,), saves="nothing", analytic=False, numpy=(np.logical_not,), public=False
)
LOGICAL_AND = binary(
    "logical_and", np.logical_and, (None, None), ("0", "0"), None, saves="nothing", analytic=False, public=False
)
LOGICAL_OR = binary(
    "logical_or", np.logical_or, (None, None), ("0", "0"), None, saves="nothing", analytic=False, public=False
)


def _where_rule(first):
    if first:
        return lambda g, out, c, a, b: np.where(c, g, 0.0)
    return lambda g, out, c, a, b: np.where(c, 0.0, g)


WHERE = primitive(
    "where",
    3,
    np.where,
    (None, _where_rule(True), _where_rule(False)),
    elementwise=True,
    batch="elementwise",
    formulas=("0", "({0} != 0)", "({0} == 0)"),
    sympy=lambda sp, c, a, b: sp.Piecewise((a, sp.Ne(c, 0)), (b, True)),
    analytic=True,  # the condition is a constant once recorded; values pass through
    reads=((0,), (0,), (0,)),
    doc="where(c, a, b): a where c is true, else b",
)

# --- clamp and fill ------------------------------------------------------------------------------------


def sym_clamp(sp, x, lo, hi):
    """clamp in SymPy, with the pieces autograd's rules take at the bounds (not Min(Max(x, lo), hi),
    whose ties give 1/2 where the gradient passes whole): x where lo <= x <= hi, lo where x < lo < hi,
    else hi (x > hi, hi < lo, x < lo = hi)."""
    if lo is None or hi is None:
        bound, inside = (hi, x <= hi) if lo is None else (lo, x >= lo)
        return x if bound is None else sp.Piecewise((x, inside), (bound, True))
    return sp.Piecewise((x, (x >= lo) & (x <= hi)), (lo, (x < lo) & (lo < hi)), (hi, True))


def _clamp_rule(g, out, x, lo, hi):
    # PyTorch's clamp_backward: the gradient passes where lo <= x <= hi (bounds included)
    inside = np.ones(np.shape(x), dtype=bool)
    xv = np.asarray(x)
    if lo is not None:
        inside = inside & (xv >= lo)
    if hi is not None:
        inside = inside & (xv <= hi)
    return np.where(inside, g, 0.0)


CLAMP = primitive(
    "clamp",
    1,
    lambda x, lo, hi: np.clip(x, lo, hi),
    (_clamp_rule,),
    elementwise=True,
    batch="elementwise",
    nparams=2,
    variant=lambda consts, params: 1,
    formulas=("[lo <= {0} <= hi]",),
    analytic=False,
    sympy=sym_clamp,
    doc="clamp(x, lo, hi): x limited to [lo, hi]; gradient 1 inside, bounds included",
)


def _clamp_bound_rule(which):
    # PyTorch's clamp_backward_min_max: a bound gets the gradient where it is the value. At
    # x < lo == hi PyTorch gives it to no one, so clamp(z, y, y), which is y, would have
    # d/dy = 0; here hi takes it there, as it does wherever hi <= lo (and as x does at x == lo == hi)
    if which == "lo":
        return lambda g, out, x, lo, hi: np.where((x < lo) & (lo < hi), g, 0.0)
    return lambda g, out, x, lo, hi: np.where((x > hi) | (hi < lo) | ((x < lo) & (lo == hi)), g, 0.0)


CLAMP_TENSOR = primitive(
    "clamp_tensor",
    3,
    lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
    (
        lambda g, out, x, lo, hi: np.where((x >= lo) & (x <= hi), g, 0.0),
        _clamp_bound_rule("lo"),
        _clamp_bound_rule("hi"),
    ),
    elementwise=True,
    batch="elementwise",
    torch="clamp",  # torch.clamp with tensor bounds: ClampBackward0
    formulas=("[lo <= {0} <= hi]", "[{0} < lo < hi]", "[{0} > hi or hi < lo or {0} < lo = hi]"),
    analytic=False,
    public=False,  # the language's clamp() picks it when a bound is a variable
    sympy=sym_clamp,
    doc="clamp(x, lo, hi) with tensor bounds: each bound gets the gradient where it is the value",
)
FILL = primitive(
    "fill",
    1,
    lambda x, value: np.full_like(x, value),
    (lambda g, out, x, value: np.zeros_like(g),),
    saves="nothing",
    elementwise=True,
    batch="elementwise",
    nparams=1,
    public=False,
    variant=lambda consts, params: ("zero", 0) if params[0] == 0 else ("fill", 0),
    doc="every element set to a value",
)

__all__ = [name for name, row in list(globals().items()) if isinstance(row, Primitive)]
