"""The corpus of the cross-road matrix (``tests/test_roads_matrix.py``).

Each program is an expression of the language, the point where it is evaluated
(``--at``) and its Python twin: the same function written with ``gc.*`` calls,
with Python ``if``/``while`` where the expression has a conditional. The twin
is the library road, it is the ``file.py:func`` road (gradcli imports this very
file), and, run with ``gc`` bound to PyTorch, it is the PyTorch reference: it
uses only names that ``gradcli`` and ``torch`` share (the test's shim fills the
few gaps). Points stay off the kinks unless a program is about a kink whose
one-sided derivatives agree there.

A new program is one more decorated function; nothing else changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

import gradcli as gc


class Program:
    """A plain class: gradcli imports this file as the user's code (no dataclass machinery there)."""

    def __init__(self, name: str, text: str, at: dict[str, Any], twin: Callable[..., Any], tags: frozenset[str]):
        self.name, self.text, self.at, self.twin, self.tags = name, text, at, twin, tags

    def __repr__(self) -> str:
        return f"Program({self.name!r}, {self.text!r})"


PROGRAMS: list[Program] = []


def program(text: str, at: dict[str, Any], *tags: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(twin: Callable[..., Any]) -> Callable[..., Any]:
        PROGRAMS.append(Program(twin.__name__, text, at, twin, frozenset(tags)))
        return twin

    return register


# --- scalars --------------------------------------------------------------------------------------


@program("x^3 - 2*x*y + y^2", {"x": 1.5, "y": -0.5}, "scalar")
def polynomial(x, y):
    return x**3 - 2 * x * y + y**2


@program("(x + 1) / (x*x + y*y + 1)", {"x": 0.7, "y": -1.2}, "scalar")
def rational(x, y):
    return (x + 1) / (x * x + y * y + 1)


@program("(x + w) * (w + 1)", {"x": 2.0, "w": 1.0}, "scalar", "seed")
def seed002(x, w):
    return (x + w) * (w + 1)


@program("(1 - x)^2 + 100*(y - x^2)^2", {"x": -1.2, "y": 1.0}, "scalar")
def rosenbrock(x, y):
    return (1 - x) ** 2 + 100 * (y - x**2) ** 2


@program("-x^2 + (-y)^3 - -x", {"x": 1.1, "y": 0.4}, "scalar", "unary minus")
def unary_minus(x, y):
    return -(x**2) + (-y) ** 3 - -x


@program("sin(x) * cos(y) + tan(x*y)", {"x": 0.4, "y": 0.9}, "trig")
def trig(x, y):
    return gc.sin(x) * gc.cos(y) + gc.tan(x * y)


@program("asin(x) + acos(y) + atan(x*y)", {"x": 0.3, "y": -0.6}, "inverse trig")
def inverse_trig(x, y):
    return gc.asin(x) + gc.acos(y) + gc.atan(x * y)


@program("atan2(y, x) + atan2(x, 2)", {"x": -0.8, "y": 0.5}, "atan2")
def angles(x, y):
    return gc.atan2(y, x) + gc.atan2(x, gc.tensor(2.0))


@program("sinh(x) - cosh(y) + tanh(x*y)", {"x": 0.6, "y": -0.3}, "hyperbolic")
def hyperbolic(x, y):
    return gc.sinh(x) - gc.cosh(y) + gc.tanh(x * y)


@program("exp(x) * log(y) + log2(y) - log10(x)", {"x": 1.7, "y": 2.5}, "exp log")
def exp_log(x, y):
    return gc.exp(x) * gc.log(y) + gc.log2(y) - gc.log10(x)


@program("log1p(x*x) + expm1(y)", {"x": 0.2, "y": -0.4}, "exp log")
def accurate_near_zero(x, y):
    return gc.log1p(x * x) + gc.expm1(y)


@program("log(x, 3) + log(y, x)", {"x": 2.2, "y": 5.0}, "log base")
def log_base(x, y):
    return gc.log(x) / math.log(3) + gc.log(y) / gc.log(x)


@program("sqrt(x) + x^y + pow(y, 3) + 2^x", {"x": 1.3, "y": 0.7}, "powers")
def powers(x, y):
    return gc.sqrt(x) + x**y + gc.pow(y, 3) + 2**x


@program("x % y + remainder(x^2, 1.5) * y", {"x": 2.3, "y": 0.7}, "remainder")
def remainders(x, y):  # off the jumps: x/y = 3.29, x^2/1.5 = 3.53
    return x % y + gc.remainder(x**2, 1.5) * y


@program("sigmoid(x) * softplus(y) + erf(x - y)", {"x": 0.3, "y": -1.1}, "special")
def special(x, y):
    return gc.sigmoid(x) * gc.softplus(y) + gc.erf(x - y)


@program("asinh(x) + acosh(y) + atanh(x*y)", {"x": 0.4, "y": 1.6}, "inverse hyperbolic")
def inverse_hyperbolic(x, y):
    return gc.asinh(x) + gc.acosh(y) + gc.atanh(x * y)


@program("exp2(x) * square(y) + reciprocal(x) - cbrt(y)", {"x": 0.7, "y": 1.3}, "powers")
def small_powers(x, y):
    return gc.exp2(x) * gc.square(y) + gc.reciprocal(x) - gc.cbrt(y)


@program("hypot(x, y) + logaddexp(x, 2*y) + hypot(x, 2)", {"x": 0.6, "y": -0.9}, "special")
def hypot_logaddexp(x, y):
    return gc.hypot(x, y) + gc.logaddexp(x, 2 * y) + gc.hypot(x, gc.tensor(2.0))


@program("gelu(x) + silu(y) + elu(y) + leaky_relu(y) + softplus(x*y)", {"x": 0.8, "y": -0.6}, "activations")
def activations(x, y):
    return gc.gelu(x) + gc.silu(y) + gc.elu(y) + gc.leaky_relu(y) + gc.softplus(x * y)


@program(
    "logsigmoid(x) + softsign(y) + mish(x*y) + hardtanh(2*y) + sinc(x) + erfc(y) + rsqrt(x + 1)",
    {"x": 0.8, "y": -0.6},
    "activations",
)
def more_activations(x, y):  # issue 27's elementwise functions
    return (
        gc.logsigmoid(x) + gc.softsign(y) + gc.mish(x * y) + gc.hardtanh(2 * y) + gc.sinc(x) + gc.erfc(y)
        + gc.rsqrt(x + 1)
    )  # fmt: skip


@program("rad2deg(x) * deg2rad(y) + lerp(x, y, 0.3) + nan_to_num(x / y)", {"x": 0.8, "y": -0.6}, "special")
def angles_and_lerp(x, y):
    return gc.rad2deg(x) * gc.deg2rad(y) + gc.lerp(x, y, 0.3) + gc.nan_to_num(x / y)


@program("floor(x) * x + ceil(y) * y + round(x*y)^2 - trunc(y) * x", {"x": 1.3, "y": -0.7}, "rounding")
def rounding(x, y):  # off the jumps; derivative 0 through every rounding, as in PyTorch
    return gc.floor(x) * x + gc.ceil(y) * y + gc.round(x * y) ** 2 - gc.trunc(y) * x


@program("exp(sin(cos(tanh(x) * y)))", {"x": 0.8, "y": 1.7}, "chain")
def deep_chain(x, y):
    return gc.exp(gc.sin(gc.cos(gc.tanh(x) * y)))


@program("pi * x^2 + e^y", {"x": 0.5, "y": 0.3}, "constants")
def constants(x, y):
    return math.pi * x**2 + math.e**y


# --- kinks (PyTorch's subgradients), comparisons, conditionals, detach ------------------------------


@program("abs(x) * y + sign(x) * x", {"x": -0.8, "y": 1.4}, "kink")
def abs_sign(x, y):
    return gc.abs(x) * y + gc.sign(x) * x


@program("abs(x) * y + x", {"x": 0.0, "y": 1.4}, "kink", "at the kink")
def abs_at_zero(x, y):
    return gc.abs(x) * y + x


@program("relu(x) + relu(-y) * x", {"x": 0.5, "y": -2.0}, "kink")
def relus(x, y):
    return gc.relu(x) + gc.relu(-y) * x


@program("max(x, y) * min(x, 2*y)", {"x": 0.5, "y": 1.2}, "kink")
def pair_extremes(x, y):
    return gc.maximum(x, y) * gc.minimum(x, 2 * y)


@program("maximum(x, y^2) - minimum(x*y, 1)", {"x": 0.3, "y": 0.9}, "kink")
def maximum_minimum(x, y):
    return gc.maximum(x, y**2) - gc.minimum(x * y, gc.tensor(1.0))


@program("clamp(x, -1, 1) + clamp(3*y, 0, 1)", {"x": 0.2, "y": 0.9}, "kink")
def clamps(x, y):
    return gc.clamp(x, -1, 1) + gc.clamp(3 * y, 0, 1)


@program("x^2 if x > y else y^2 - x", {"x": 1.5, "y": 0.5}, "conditional")
def conditional(x, y):
    if x > y:
        return x**2
    return y**2 - x


@program("(x * y if x < 0 else sin(y)) + (1 if y > 0 else x)", {"x": -0.5, "y": 0.8}, "conditional")
def two_conditionals(x, y):
    first = x * y if x < 0 else gc.sin(y)
    if y > 0:
        return first + 1
    return first + x


@program("(x > y) * x^2 + (x <= y) * y", {"x": 1.0, "y": 0.5}, "comparison")
def comparisons(x, y):
    return (x > y) * x**2 + (x <= y) * y


@program(
    "ge(x, y) * x^2 + lt(x, y) * y + ne(x, 2) * eq(y, y) * x + le(y, x) * gt(x, y) * y",
    {"x": 1.3, "y": 0.4},
    "comparison",
)
def comparison_functions(x, y):
    return (x >= y) * x**2 + (x < y) * y + (x != 2) * (y == y) * x + (y <= x) * (x > y) * y


@program("where(x > 0, x * y, y^2)", {"x": 0.3, "y": 2.0}, "where")
def where_scalar(x, y):
    return gc.where(x > 0, x * y, y**2)


@program("x * detach(x) + detach(y) * y^2", {"x": 1.5, "y": -2.0}, "detach")
def detached(x, y):
    return x * gc.detach(x) + gc.detach(y) * y**2


@program("x * 2 * 2 * 2", {"x": 1.5}, "loop")
def doubling(x):
    y = x * 2
    while y < 10:  # seed 004: Python control flow, recorded as it runs
        y = y * 2
    return y


@program("t = x; t = t*t + x; t = t*t + x; t*t + x", {"x": 0.3}, "loop", "named steps")
def iterate_map(x):
    t = x
    for _ in range(3):
        t = t * t + x
    return t


# --- named steps --------------------------------------------------------------------------------------


@program("a = x + w; b = w + 1; y = a * b", {"x": 2.0, "w": 1.0}, "named steps", "seed")
def named_steps(x, w):
    a = x + w
    b = w + 1
    return a * b


@program("u = x*y; v = sin(u)\nw = u*v  # a comment\nw + exp(-u)", {"x": 0.5, "y": 1.5}, "named steps")
def named_steps_lines(x, y):
    u = x * y
    v = gc.sin(u)
    w = u * v
    return w + gc.exp(-u)


# --- vectors and matrices, broadcasting --------------------------------------------------------------------


@program("sum(v * v)", {"v": [1.0, -2.0, 3.0]}, "vector")
def sum_of_squares(v):
    return gc.sum(v * v)


@program("dot(v, w) + sum(v) * x", {"v": [1.0, 2.0, 3.0], "w": [0.5, -1.0, 2.0], "x": 0.7}, "vector")
def dot_and_sum(v, w, x):
    return gc.dot(v, w) + gc.sum(v) * x


@program("mean(v^2) + prod(v)", {"v": [1.2, -0.5, 2.0]}, "vector")
def mean_prod(v):
    return gc.mean(v**2) + gc.prod(v)


@program("norm(v) * x + norm(v * x)", {"v": [3.0, -4.0, 1.0], "x": 2.0}, "vector")
def norms(v, x):
    return gc.norm(v) * x + gc.norm(v * x)


@program("logsumexp(v) - max(v) + min(v)", {"v": [0.1, 2.0, -1.0]}, "vector", "kink")
def lse_extremes(v):
    return gc.logsumexp(v) - gc.max(v) + gc.min(v)


@program("v[0] * v[-1] + sum(v[1:]) * sum(v[:-1])", {"v": [1.0, 2.0, 3.0, 4.0]}, "indexing")
def indexing(v):
    return v[0] * v[-1] + gc.sum(v[1:]) * gc.sum(v[:-1])


@program("sum([x, y, x*y] * v)", {"x": 0.5, "y": 2.0, "v": [1.0, 2.0, 3.0]}, "vector literal")
def vector_literal(x, y, v):
    return gc.sum(gc.stack([x, y, x * y]) * v)


@program("sum((v + x) * w)", {"v": [1.0, -1.0, 0.5], "x": 0.25, "w": [2.0, 3.0, -1.0]}, "broadcasting")
def broadcast_scalar(v, x, w):
    return gc.sum((v + x) * w)


@program(
    "sum(A * v) + sum(A / (v^2 + 1))", {"A": [[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], "v": [0.5, -1.0, 2.0]}, "broadcasting"
)
def broadcast_matrix(A, v):
    return gc.sum(A * v) + gc.sum(A / (v**2 + 1))


@program("sum((A @ v)^2)", {"A": [[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], "v": [0.5, -1.0, 2.0]}, "matrix")
def matrix_vector(A, v):
    return gc.sum((A @ v) ** 2)


@program(
    "sum(sin(A @ B))", {"A": [[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], "B": [[0.1, 0.2], [0.3, -0.4], [0.5, 0.6]]}, "matrix"
)
def matrix_matrix(A, B):
    return gc.sum(gc.sin(A @ B))


@program("v @ M @ v", {"v": [1.0, -0.5, 2.0], "M": [[2.0, 0.5, 0.1], [0.3, 1.0, -0.2], [0.0, 0.4, 3.0]]}, "matrix")
def quadratic_form(v, M):
    return v @ M @ v


@program(
    "sum(sum(A, 0) * v) + sum(mean(A, 1)^2)", {"A": [[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], "v": [0.5, -1.0, 2.0]}, "axis"
)
def axis_reductions(A, v):
    return gc.sum(gc.sum(A, dim=0) * v) + gc.sum(gc.mean(A, dim=1) ** 2)


@program("sum(norm(A, 1)) + max(A) - min(A)", {"A": [[1.0, 2.0, 3.0], [-1.0, 0.5, 2.5]]}, "axis", "kink")
def matrix_extremes(A):
    return gc.sum(gc.norm(A, dim=1)) + gc.max(A) - gc.min(A)


@program("sum(exp(v - logsumexp(v)) * w)", {"v": [0.5, 1.5, -0.3], "w": [1.0, 2.0, 3.0]}, "vector")
def softmax_weighted(v, w):
    return gc.sum(gc.exp(v - gc.logsumexp(v)) * w)


@program("sum(softmax(v) * w) + sum(cumsum(v) * flip(w))", {"v": [0.5, 1.5, -0.3], "w": [1.0, 2.0, 3.0]}, "vector")
def along_vector(v, w):
    return gc.sum(gc.softmax(v, -1) * w) + gc.sum(gc.cumsum(v, -1) * gc.flip(w, (-1,)))


@program("sum(log_softmax(A, 0) * A) + sum(flip(cumsum(A), 0)^2)", {"A": [[1.0, 2.0, 3.0], [-1.0, 0.5, 2.5]]}, "axis")
def along_axis(A):
    return gc.sum(gc.log_softmax(A, 0) * A) + gc.sum(gc.flip(gc.cumsum(A, -1), (0,)) ** 2)


@program(
    "sum(cumprod(v) * w) + sum(cumprod(A, 0))",
    {"v": [0.5, 0.0, 2.0], "w": [1.0, 2.0, 3.0], "A": [[1.0, 2.0], [3.0, 0.5]]},
    "axis",
)
def cumulative_products(v, w, A):
    return gc.sum(gc.cumprod(v, -1) * w) + gc.sum(gc.cumprod(A, 0))


@program(
    "var(v) * std(v) + sum(std(A, 0)) + var(A)",
    {"v": [0.5, 1.5, -0.3], "A": [[1.0, 2.0, 3.0], [-1.0, 0.5, 2.5]]},
    "axis",
)
def spreads(v, A):
    return gc.var(v) * gc.std(v) + gc.sum(gc.std(A, 0)) + gc.var(A)


@program(
    "x * argmax(v) + sum(argmin(A, 1) * v[:2])",
    {"x": 1.5, "v": [0.5, 2.5, -0.3], "A": [[1.0, -2.0], [0.5, 3.0]]},
    "axis",
)
def arg_extremes(x, v, A):
    return x * gc.argmax(v) + gc.sum(gc.argmin(A, 1) * v[:2])


@program("sum(where(v > 0, v^2, -v))", {"v": [1.0, -2.0, 0.5]}, "where", "vector")
def where_vector(v):
    return gc.sum(gc.where(v > 0, v**2, -v))


@program("sum(clamp(v, -1, 1) * w)", {"v": [0.5, -2.0, 3.0], "w": [1.0, 2.0, -1.0]}, "kink", "vector")
def clamp_vector(v, w):
    return gc.sum(gc.clamp(v, -1, 1) * w)


@program("sum(abs(v)) + sum(relu(v) * x)", {"v": [1.5, -2.0, 0.3], "x": 0.5}, "kink", "vector")
def abs_relu_vector(v, x):
    return gc.sum(gc.abs(v)) + gc.sum(gc.relu(v) * x)


@program(
    "h = tanh(A @ v + b); sum(h^2)",
    {"A": [[0.2, -0.4, 0.1], [0.3, 0.5, -0.6]], "v": [1.0, 0.5, -1.5], "b": [0.1, -0.2]},
    "named steps",
    "matrix",
)
def layer(A, v, b):
    h = gc.tanh(A @ v + b)
    return gc.sum(h**2)


@program(
    "mean(log(1 + exp(-t * (X @ w))))",
    {"X": [[1.0, 2.0], [-0.5, 1.0], [2.0, -1.0]], "w": [0.3, -0.2], "t": [1.0, -1.0, 1.0]},
    "matrix",
)
def logistic_loss(X, w, t):
    return gc.mean(gc.log(1 + gc.exp(-t * (X @ w))))


@program("s = 0 * x; s = s + x^2; s = s + x^2 / 2; s = s + x^2 / 4; sum(s)", {"x": [1.0, -2.0]}, "loop", "vector")
def accumulate(x):
    s = 0 * x
    k = 1.0
    while k >= 0.25:
        s = s + x**2 * k
        k = k / 2
    return gc.sum(s)


# --- several outputs (jacobian; eval and graph with --seed ones) ------------------------------------------------


@program("[x*y, x + y, sin(x)]", {"x": 0.5, "y": 2.0}, "outputs")
def three_outputs(x, y):
    return gc.stack([x * y, x + y, gc.sin(x)])


@program("[r*cos(t), r*sin(t)]", {"r": 2.0, "t": 0.5}, "outputs")
def polar(r, t):
    return gc.stack([r * gc.cos(t), r * gc.sin(t)])


@program("v * x + exp(v)", {"v": [0.5, -1.0, 2.0], "x": 1.5}, "outputs", "broadcasting")
def vector_output(v, x):
    return v * x + gc.exp(v)


@program("A @ v", {"A": [[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], "v": [0.5, -1.0, 2.0]}, "outputs", "matrix")
def matvec_output(A, v):
    return A @ v


@program(
    "sum(diagonal(A, 1) * roll(v, 1)[:2]) + sum(cross(v, w)^2) + sum(kron(v[:2], w[:2]))"
    " + sum(hstack(v, w) * vstack(v, w)[1, 0]) + x * sum(argsort(v) * v) + sum(diag(v[:2], 1) * A)",
    {"A": [[1.0, 2.0, -0.5], [0.3, -1.0, 2.0], [1.5, 0.2, 0.7]], "v": [0.5, -1.0, 2.0], "w": [1.5, 0.3, -0.7],
     "x": 0.6},
    "matrix",
)  # fmt: skip
def shapes_27(A, v, w, x):  # issue 27's functions of arrays
    return (
        gc.sum(gc.diagonal(A, 1) * gc.roll(v, 1)[:2])
        + gc.sum(gc.cross(v, w, dim=0) ** 2)
        + gc.sum(gc.kron(v[:2], w[:2]))
        + gc.sum(gc.hstack([v, w]) * gc.vstack([v, w])[1, 0])
        + x * gc.sum(gc.argsort(v) * v)
        + gc.sum(gc.diag(v[:2], 1) * A)
    )


@program(
    "trace(A @ A.T) + sum(tril(A) * triu(B, -1)) + sum(outer(diag(A), v)^2) + sum(diag(v) * transpose(B))",
    {"A": [[1.0, 2.0, -0.5], [0.3, -1.0, 2.0], [1.5, 0.2, 0.7]], "B": [[0.4, -1.2, 2.0], [1.1, 0.6, -0.3], [0.9, 1.7, 0.5]],
     "v": [0.5, -1.0, 2.0]},
    "matrix",
)  # fmt: skip
def matrix_structure(A, B, v):
    return (
        gc.trace(A @ A.T)
        + gc.sum(gc.tril(A) * gc.triu(B, -1))
        + gc.sum(gc.outer(gc.diag(A), v) ** 2)
        + gc.sum(gc.diag(v) * gc.transpose(B, 0, 1))
    )


@program(
    "sum(gather(A, [[2, 0], [1, 1], [0, 2]])^2) + sum(index_select(A, [2, 0, 2]) * A[[1, 0, 2]]) "
    "+ sum(masked_fill(A, A > 0.8, x) * A) + sum(repeat(A[0], [2, 2])^3) + sum(A[A > 0.1] ^ 2)"
    " + sum(narrow(A, 1, 2)^2) + sum(narrow(A, 0, 2, 0) * x)",
    {"A": [[1.0, 2.0, -0.5], [0.3, -1.0, 2.0], [1.5, 0.2, 0.7]], "x": 0.5},
    "matrix",
)  # fmt: skip
def index_functions(A, x):
    # positions as integer arrays (gradcli) or tensors (the PyTorch twin of this program)
    n = np.array if gc.Tensor.__module__.startswith("gradcli") else gc.as_tensor
    return (
        gc.sum(gc.gather(A, -1, n([[2, 0], [1, 1], [0, 2]])) ** 2)
        + gc.sum(gc.index_select(A, -1, n([2, 0, 2])) * A[[1, 0, 2]])
        + gc.sum(gc.masked_fill(A, A > 0.8, x) * A)
        + gc.sum(A[0].repeat(2, 2) ** 3)
        + gc.sum(A[A > 0.1] ** 2)
        + gc.sum(gc.narrow(A, -1, 1, 2) ** 2)
        + gc.sum(gc.narrow(A, 0, 0, 2) * x)
    )


@program("sum(inv(A) @ v) + trace(inv(A @ A))", {"A": [[2.0, 0.5, -0.3], [0.4, 1.5, 0.2], [0.1, -0.6, 1.8]], "v": [0.5, -1.0, 2.0]},
         "matrix")  # fmt: skip
def matrix_inverse(A, v):
    return gc.sum(gc.inverse(A) @ v) + gc.trace(gc.inverse(A @ A))


@program("sum(sort(v) * w) + sum(topk(v, 2)^2) + sum(sort(A, 0) * A)",
         {"v": [0.5, -1.0, 2.0], "w": [1.0, 2.0, 3.0], "A": [[1.0, -2.0], [0.5, 3.0]]}, "vector")  # fmt: skip
def sort_topk(v, w, A):
    return gc.sum(gc.sort(v).values * w) + gc.sum(gc.topk(v, 2).values ** 2) + gc.sum(gc.sort(A, 0).values * A)


@program("det(A) + sum(solve(A, v) * v) + sum(solve(A @ A, A))",
         {"A": [[2.0, 0.5, -0.3], [0.4, 1.5, 0.2], [0.1, -0.6, 1.8]], "v": [0.5, -1.0, 2.0]}, "matrix")  # fmt: skip
def det_solve(A, v):
    return gc.det(A) + gc.sum(gc.linalg.solve(A, v) * v) + gc.sum(gc.linalg.solve(A @ A, A))


@program("sum(reshape(v, [2, 3]) @ w) + sum(reshape(v, [-1, 2])^2)",
         {"v": [0.5, -1.0, 2.0, 1.5, 0.25, -0.75], "w": [1.0, 2.0, 3.0]}, "matrix")  # fmt: skip
def reshape_literal(v, w):
    return gc.sum(gc.reshape(v, (2, 3)) @ w) + gc.sum(gc.reshape(v, (-1, 2)) ** 2)
