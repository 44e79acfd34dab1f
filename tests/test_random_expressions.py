"""Random expressions of the language: value against NumPy, gradient against finite differences.

A seeded generator builds expression trees over scalars, vectors and matrices
(every operator, unary minus, indexing and slicing, vector literals, named
steps, the conditional, comparisons and the functions of ``gradcli ops``),
each well-defined where it is sampled by construction: ``log`` and ``sqrt``
see positive subexpressions (``exp(..)``, ``1 + t^2``, ...), ``asin`` and
``tan`` bounded ones, denominators are positive. The same tree gives the text
gradcli parses and a batched NumPy function, an independent reference: its
value at the point, and its gradient by central differences with Richardson
extrapolation (``gradcli.check.numeric.finite_differences``, fed with the
NumPy function, never with gradcli's engine). Points within a small margin of
a kink or a branch (abs, relu, max, min, clamp, where, comparisons, norm at
0, atan2's cut) or with huge intermediates are drawn again.

``test_against_torch`` runs the same expressions through PyTorch (float64)
when it is installed: values and gradients agree to ~1e-12.

Disagreements found by this file are kept below as minimal regression cases
(``FOUND``: norm's axis was taken as the order p; ``e`` and ``pi`` given
values were left out of the default --wrt). A construct with a known,
unfixed bug can be left out of the random expressions with ``AVOID``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from gradcli.check.numeric import finite_differences
from gradcli.lang.compute import program_jacobian, value_and_grad
from gradcli.lang.program import load

VARIABLES = {"x": (), "y": (), "z": (), "w": (2,), "u": (3,), "v": (3,), "A": (2, 3), "M": (3, 3)}
SHAPES = [(), (2,), (3,), (2, 3), (3, 3)]
KINK_MARGIN = 2e-2  # a kink or a branch no closer than this (in its argument) to the point
MAX_MAGNITUDE = 1e5  # no intermediate value larger than this
SPREAD = 1.5  # inputs uniform in [-SPREAD, SPREAD]
EXPRESSIONS_PER_CHUNK = 100
CHUNKS = 30

# (value, text) constants, in several spellings
CONSTANTS = [(2.0, "2"), (0.5, ".5"), (0.5, "0.5"), (3.0, "3"), (1.5, "1.5"), (0.1, "1e-1"), (0.25, "2.5e-1"),
             (math.pi, "pi"), (math.e, "e"), (1.0, "1"), (0.75, "0.75"), (2.0, "2.0")]  # fmt: skip
PREC = {"cond": 0, "cmp": 1, "add": 2, "sub": 2, "mul": 3, "div": 3, "matmul": 3, "neg": 4, "pow": 5}
ATOM = 6
# Constructs with a known bug (see FOUND), left out of the random expressions until fixed.
AVOID: set[str] = set()


@dataclass(eq=False)
class Node:
    """One node of an expression tree: ``op`` on ``kids`` giving an array of ``shape``."""

    op: str
    kids: tuple[Node, ...] = ()
    shape: tuple[int, ...] = ()
    arg: Any = None  # the variable's name, the constant, the function, the index, ...
    text_arg: str = ""

    @property
    def prec(self) -> int:
        return PREC.get(self.op, ATOM)


@dataclass
class Expression:
    statements: list[tuple[str, Node]]  # named steps, then ("", output)
    text: str
    variables: list[str]
    nodes: int = 0

    @property
    def output(self) -> Node:
        return self.statements[-1][1]


# --- text ----------------------------------------------------------------------------------------


def render(node: Node, rng: np.random.Generator) -> str:
    def wrap(kid: Node, least: int) -> str:
        text = render(kid, rng)
        if kid.prec < least or rng.random() < 0.05:
            return f"({text})"
        return text

    op, k = node.op, node.kids
    if op == "var" or op == "named":
        return node.arg
    if op == "num":
        return node.text_arg
    if op in ("add", "sub", "mul", "div", "matmul"):
        sym = {"add": " + ", "sub": " - ", "mul": " * ", "div": " / ", "matmul": " @ "}[op]
        if rng.random() < 0.3:
            sym = sym.strip()
        p = PREC[op]
        return wrap(k[0], p) + sym + wrap(k[1], p + 1)
    if op == "neg":
        return "-" + wrap(k[0], 4)
    if op == "pow":
        sym = "^" if rng.random() < 0.7 else "**"
        return wrap(k[0], ATOM) + sym + wrap(k[1], 4)
    if op == "cmp":
        return wrap(k[0], 2) + f" {node.arg} " + wrap(k[1], 2)
    if op == "cond":
        return wrap(k[0], 1) + " if " + wrap(k[1], 1) + " else " + wrap(k[2], 0)
    if op == "call":
        args = [render(kid, rng) for kid in k]
        if node.text_arg:  # an extra literal argument (an axis, a log base)
            args.append(node.text_arg)
        return f"{node.arg}({', '.join(args)})"
    if op == "index":
        return wrap(k[0], ATOM) + "[" + node.text_arg + "]"
    if op == "vector":
        return "[" + ", ".join(render(kid, rng) for kid in k) + "]"
    raise AssertionError(op)


# --- the generator ---------------------------------------------------------------------------------

ANY_UNARY = ["sin", "cos", "tanh", "sigmoid", "softplus", "atan", "erf", "exp", "sinh", "cosh", "expm1", "neg",
             "abs", "relu", "sign", "tanh", "sin"]  # fmt: skip
POS_UNARY = ["log", "sqrt", "log2", "log10", "logb", "log1p"]
UNIT_UNARY = ["asin", "acos", "tan", "atan"]


class Generator:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.named: list[Node] = []

    def choice(self, items: list[Any]) -> Any:
        return items[int(self.rng.integers(len(items)))]

    def num(self, value: float | None = None) -> Node:
        if value is None:
            value, text = self.choice(CONSTANTS)
        else:
            text = repr(value) if value != int(value) else str(int(value))
        return Node("num", shape=(), arg=value, text_arg=text)

    def leaf(self, shape: tuple[int, ...]) -> Node:
        named = [n for n in self.named if n.shape == shape]
        if named and self.rng.random() < 0.4:
            return self.choice(named)
        names = [name for name, s in VARIABLES.items() if s == shape]
        if shape == () and self.rng.random() < 0.25:
            return self.num()
        if names and self.rng.random() < 0.9:
            name = self.choice(names)
            return Node("var", shape=shape, arg=name)
        if shape == ():
            return self.num()
        return Node("vector", tuple(self.leaf(shape[1:]) for _ in range(shape[0])), shape)

    # any real value, moderate
    def gen(self, shape: tuple[int, ...], depth: int) -> Node:
        r = self.rng.random()
        if depth <= 0 or r < 0.12:
            return self.leaf(shape)
        d = depth - 1
        kind = self.choice(
            ["unary"] * 6 + ["posunary"] * 2 + ["unitunary"] + ["arith"] * 7 + ["div"] * 2 + ["pow"] * 2
            + ["pair"] + ["clamp"] + ["where"] + ["atan2"] + ["reshape"] * 4 + ["detach"] + ["cmpmul"]
        )  # fmt: skip
        if kind == "unary":
            f = self.choice(ANY_UNARY)
            kid = self.gen(shape, d)
            return Node("neg", (kid,), shape) if f == "neg" else Node("call", (kid,), shape, f)
        if kind == "posunary":
            f = self.choice(POS_UNARY)
            kid = self.pos(shape, d)
            if f == "logb":
                base, text = self.choice([(2.0, "2"), (10.0, "10"), (0.5, "0.5"), (3.0, "3")])
                return Node("call", (kid,), shape, "log", text_arg=text)
            if f == "log1p" and self.rng.random() < 0.5:
                kid = self.unit(shape, d)  # log1p of (-1, 1)
            return Node("call", (kid,), shape, f)
        if kind == "unitunary":
            return Node("call", (self.unit(shape, d),), shape, self.choice(UNIT_UNARY))
        if kind == "arith":
            a, b = self.broadcast_pair(shape, d)
            return Node(self.choice(["add", "sub", "mul", "mul", "add"]), (a, b), shape)
        if kind == "div":
            a, b = self.broadcast_pair(shape, d, second=self.pos)
            return Node("div", (a, b), shape)
        if kind == "pow":
            form = self.rng.integers(4)
            if form == 0:  # any base, whole exponent
                return Node("pow", (self.gen(shape, d), self.num(self.choice([2.0, 3.0, 2.0, 1.0, 0.0]))), shape)
            if form == 1:  # positive base, any exponent (bounded)
                a, b = self.broadcast_pair(shape, d, first=self.pos, second=self.unit)
                return Node("pow", (a, b), shape)
            if form == 2:  # constant base
                return Node("pow", (self.num(self.choice([2.0, 0.5, 3.0])), self.unit(shape, d)), shape)
            return Node("pow", (self.pos(shape, d), self.num(self.choice([0.5, 1.5, -1.0, -0.5, 2.5]))), shape)
        if kind == "pair":
            a, b = self.broadcast_pair(shape, d)
            return Node("call", (a, b), shape, self.choice(["max", "min", "maximum", "minimum"]))
        if kind == "clamp":
            x = self.gen(shape, d)
            if self.rng.random() < 0.5:
                lo, hi = self.choice([(-0.5, 0.5), (-1.0, 2.0), (0.0, 1.0)])
                return Node("call", (x, self.signed(lo), self.num(hi)), shape, "clamp")
            lo = self.gen((), d - 1)
            hi = Node("add", (lo, self.pos((), d - 1)), ())
            return Node("call", (x, lo, hi), shape, "clamp")
        if kind == "where":
            c = self.compare(shape if self.rng.random() < 0.6 else (), d)
            a, b = self.gen(shape, d), self.gen(shape, d)
            if self.rng.random() < 0.5:
                return Node("call", (c, a, b), shape, "where")
            return Node("cond", (a, c, b), shape)
        if kind == "cmpmul":
            return Node("mul", (self.compare(shape, d), self.gen(shape, d)), shape)
        if kind == "atan2":
            a, b = self.broadcast_pair(shape, d)
            return Node("call", (a, b), shape, "atan2")
        if kind == "detach":
            return Node("call", (self.gen(shape, d),), shape, "detach")
        return self.reshape(shape, d)

    def signed(self, value: float) -> Node:
        return Node("neg", (self.num(-value),)) if value < 0 else self.num(value)

    def compare(self, shape: tuple[int, ...], d: int) -> Node:
        a, b = self.broadcast_pair(shape, d)
        return Node("cmp", (a, b), shape, self.choice(["<", "<=", ">", ">="]))

    def broadcast_pair(self, shape: tuple[int, ...], d: int, first=None, second=None) -> tuple[Node, Node]:
        first, second = first or self.gen, second or self.gen
        shapes = [(shape, shape)]
        if shape:
            shapes += [((), shape), (shape, ())]
        if len(shape) == 2:
            shapes += [(shape[1:], shape), (shape, shape[1:])]
        sa, sb = self.choice(shapes)
        return first(sa, d), second(sb, d)

    def reshape(self, shape: tuple[int, ...], d: int) -> Node:
        """Indexing, slicing, reductions, products and literals that give ``shape``."""
        options: list[Any] = []
        if shape == ():
            options += [
                lambda: self.index((3,), d, self.choice(["0", "1", "2", "-1", "-3"])),
                lambda: self.index((2,), d, self.choice(["0", "1", "-1"])),
                lambda: self.index((2, 3), d, self.choice(["0, 1", "1, 2", "-1, 0", "0][2", "1][-2"])),
                lambda: self.index((3, 3), d, self.choice(["2, 1", "0, 0", "1][1"])),
                lambda: self.reduce(self.choice([(2,), (3,), (2, 3), (3, 3)]), d),
                lambda: self.reduce(self.choice([(2,), (3,)]), d),
                lambda: Node("call", self.same_pair((self.choice([2, 3]),), d), (), "dot"),
                lambda: Node("matmul", self.same_pair((self.choice([2, 3]),), d), ()),
            ]
        elif shape == (2,):
            options += [
                lambda: self.index((3,), d, self.choice(["1:", ":-1", "::2", ":2", "-2:", "1:3"])),
                lambda: self.index((2, 3), d, self.choice([":, 0", ":, 2", ":, -1"])),
                lambda: self.index((3, 3), d, self.choice(["1:, 0", ":2, 1", "0, 1:"])),
                lambda: self.reduce((2, 3), d, axis=self.choice(["1", "-1"])),
                lambda: Node("matmul", (self.gen((2, 3), d), self.gen((3,), d)), (2,)),
                lambda: Node("vector", (self.gen((), d), self.gen((), d)), (2,)),
                lambda: self.index((2,), d, "::-1"),
            ]
        elif shape == (3,):
            options += [
                lambda: self.index((2, 3), d, self.choice(["0", "1", "-1"])),
                lambda: self.index((3, 3), d, self.choice(["0", "2", ":, 1", "1, :"])),
                lambda: self.reduce((2, 3), d, axis="0"),
                lambda: self.reduce((3, 3), d, axis=self.choice(["0", "1"])),
                lambda: Node("matmul", (self.gen((3, 3), d), self.gen((3,), d)), (3,)),
                lambda: Node("matmul", (self.gen((2,), d), self.gen((2, 3), d)), (3,)),
                lambda: Node("matmul", (self.gen((3,), d), self.gen((3, 3), d)), (3,)),
                lambda: Node("vector", (self.gen((), d), self.gen((), d), self.gen((), d)), (3,)),
                lambda: self.index((3,), d, "::-1"),
            ]
        elif shape == (2, 3):
            options += [
                lambda: self.index((3, 3), d, self.choice(["1:", ":2", "::2", "0:2, :"])),
                lambda: Node("matmul", (self.gen((2, 3), d), self.gen((3, 3), d)), (2, 3)),
                lambda: Node("vector", (self.gen((3,), d), self.gen((3,), d)), (2, 3)),
            ]
        else:
            options += [
                lambda: Node("matmul", (self.gen((3, 3), d), self.gen((3, 3), d)), (3, 3)),
                lambda: Node("vector", tuple(self.gen((3,), d) for _ in range(3)), (3, 3)),
            ]
        return self.choice(options)()

    def same_pair(self, shape: tuple[int, ...], d: int) -> tuple[Node, Node]:
        return self.gen(shape, d), self.gen(shape, d)

    def index(self, shape: tuple[int, ...], d: int, text: str) -> Node:
        target = self.gen(shape, d)
        parts = text.split("][")
        node = target
        for part in parts:
            node = Node("index", (node,), _indexed_shape(node.shape, part), arg=_parse_index(part), text_arg=part)
        return node

    def reduce(self, shape: tuple[int, ...], d: int, axis: str | None = None) -> Node:
        f = self.choice(["sum", "mean", "prod", "norm", "logsumexp", "max", "min", "sum", "mean"])
        if axis is not None and (f in ("max", "min") or f == "norm" and "norm-axis" in AVOID):
            f = "sum"
        x = self.gen(shape, d)
        out = () if axis is None else tuple(s for i, s in enumerate(shape) if i != int(axis) % len(shape))
        return Node("call", (x,), out, f, text_arg=axis or "")

    # positive, by construction
    def pos(self, shape: tuple[int, ...], depth: int) -> Node:
        d = depth - 1
        if depth <= 0:
            form = self.choice(["exp", "sq", "const", "cosh"] if shape == () else ["exp", "sq", "cosh"])
        else:
            form = self.choice(["exp", "sq", "softplus", "sigmoid", "cosh", "sqrt", "mul", "div", "add", "powpos",
                                "reduce", "relu", "abs", "max", "exp", "sq"])  # fmt: skip
        g = lambda: self.gen(shape, d)  # noqa: E731
        if form == "reduce" and shape != ():
            form = "exp"
        if form == "const":
            return self.num(self.choice([0.5, 2.0, 1.5, 3.0]))
        if form in ("exp", "softplus", "sigmoid", "cosh"):
            return Node("call", (g(),), shape, form)
        if form == "sq":
            return Node("add", (self.num(1.0), Node("pow", (g(), self.num(2.0)), shape)), shape)
        if form == "sqrt":
            return Node("call", (self.pos(shape, d),), shape, "sqrt")
        if form in ("mul", "div", "add"):
            a, b = self.broadcast_pair(shape, d, first=self.pos, second=self.pos)
            return Node(form, (a, b), shape)
        if form == "powpos":
            return Node("pow", (self.pos(shape, d), self.unit((), d)), shape)
        if form == "reduce":
            f = self.choice(["sum", "mean", "prod", "norm", "logexp"])
            vec = self.choice([(2,), (3,), (2, 3)])
            if f == "norm":
                return Node("call", (self.gen(vec, d),), (), "norm")
            if f == "logexp":  # logsumexp(x) - min(x) + 0.1 > 0
                x = self.gen(vec, d)
                lse = Node("call", (x,), (), "logsumexp")
                return Node("add", (Node("sub", (lse, Node("call", (x,), (), "max"))), self.num(0.5)), ())
            return Node("call", (self.pos(vec, d),), (), f)
        if form == "relu":
            return Node("add", (Node("call", (g(),), shape, "relu"), self.num(0.5)), shape)
        if form == "abs":
            return Node("add", (Node("call", (g(),), shape, "abs"), self.num(0.25)), shape)
        a, b = self.broadcast_pair(shape, d, first=self.pos)
        return Node("call", (a, b), shape, self.choice(["max", "maximum"]))

    # in (-1, 1), by construction
    def unit(self, shape: tuple[int, ...], depth: int) -> Node:
        d = depth - 1
        form = self.choice(["tanh", "sin", "erf", "sigmoid", "cos", "ratio"])
        g = self.gen(shape, d)
        if form == "ratio":  # t / (1 + t^2) in [-1/2, 1/2]
            return Node("div", (g, Node("add", (self.num(1.0), Node("pow", (g, self.num(2.0)), shape)), shape)), shape)
        inner = Node("call", (g,), shape, form)
        return Node("mul", (self.num(self.choice([0.9, 0.5, 0.75])), inner), shape)

    def expression(self) -> Expression:
        self.named = []
        statements: list[tuple[str, Node]] = []
        for i in range(int(self.rng.choice([0, 0, 0, 1, 2]))):
            node = self.gen(self.choice(SHAPES), int(self.rng.integers(1, 4)))
            if node.op in ("var", "num"):
                continue
            name = f"t{i}"
            statements.append((name, node))
            self.named.append(Node("named", (node,), node.shape, arg=name))
        depth = int(self.rng.integers(2, 6))
        out = self.gen((), depth) if self.rng.random() < 0.7 else self.reduce(self.choice(SHAPES[1:]), depth)
        statements.append(("", out))
        parts = [f"{name} = {render(node, self.rng)}" for name, node in statements[:-1]]
        parts.append(render(out, self.rng))
        text = self.choice(["; ", "\n", ";"]).join(parts)
        used: dict[str, None] = {}
        count = 0
        for _, node in statements:
            for n in _walk(node):
                count += 1
                if n.op == "var":
                    used.setdefault(n.arg)
        return Expression(statements, text, list(used), count)


def _walk(node: Node):
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if id(n) in seen or n.op == "named":
            continue
        seen.add(id(n))
        yield n
        stack.extend(n.kids)


def _parse_index(text: str) -> tuple[Any, ...]:
    items = []
    for part in text.split(","):
        part = part.strip()
        if ":" in part:
            bounds = [int(b) if b.strip() else None for b in part.split(":")]
            items.append(slice(*bounds))
        else:
            items.append(int(part))
    return tuple(items)


def _indexed_shape(shape: tuple[int, ...], text: str) -> tuple[int, ...]:
    return np.empty(shape)[_parse_index(text)].shape


# --- reference evaluation ---------------------------------------------------------------------------


def _erf(x: np.ndarray) -> np.ndarray:
    return np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)


NP_UNARY = {
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "tanh": np.tanh, "atan": np.arctan, "asin": np.arcsin,
    "acos": np.arccos, "exp": np.exp, "sinh": np.sinh, "cosh": np.cosh, "expm1": np.expm1, "abs": np.abs,
    "relu": lambda t: np.maximum(t, 0.0), "sign": np.sign, "erf": _erf, "log": np.log, "sqrt": np.sqrt,
    "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sigmoid": lambda t: 1.0 / (1.0 + np.exp(-t)),
    "softplus": lambda t: np.logaddexp(0.0, t), "detach": lambda t: t,
}  # fmt: skip


class Lib:
    """Batched array operations: NumPy here, PyTorch in ``TorchLib``. Arrays carry a leading batch axis."""

    unary = NP_UNARY

    def asarray(self, value: float) -> Any:
        return np.full((1,), value)

    def flat(self, t: Any) -> Any:
        return t.reshape(t.shape[0], -1)

    def reduce(self, f: str, t: Any, axis: int | None) -> Any:
        if axis is None:
            t, axis = self.flat(t), 1
        if f == "sum":
            return t.sum(axis=axis)
        if f == "mean":
            return t.mean(axis=axis)
        if f == "prod":
            return t.prod(axis=axis)
        if f == "norm":
            return np.sqrt((t * t).sum(axis=axis))
        if f == "max":
            return t.max(axis=axis)
        if f == "min":
            return t.min(axis=axis)
        assert f == "logsumexp"
        m = t.max(axis=axis, keepdims=True)
        return np.log(np.exp(t - m).sum(axis=axis)) + np.squeeze(m, axis)

    def index(self, t: Any, index: tuple[Any, ...]) -> Any:
        return t[(slice(None),) + index]

    def stack(self, items: list[Any]) -> Any:
        return np.stack(np.broadcast_arrays(*items), axis=1)

    def where(self, c: Any, a: Any, b: Any) -> Any:
        return np.where(c != 0, a, b)

    def compare(self, op: str, a: Any, b: Any) -> Any:
        return {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}[op](a, b).astype(float)

    maximum, minimum, atan2, power, matmul = staticmethod(np.maximum), staticmethod(np.minimum), \
        staticmethod(np.arctan2), staticmethod(np.power), staticmethod(np.matmul)  # fmt: skip

    def detach(self, t: Any) -> Any:
        return t


@dataclass
class Trace:
    """What a reference evaluation saw: the smallest distance to a kink, the largest magnitude."""

    margin: float = math.inf
    magnitude: float = 0.0
    frozen: dict[int, Any] = field(default_factory=dict)  # detach(..) values at the point

    def near(self, distance: Any) -> None:
        d = np.abs(np.asarray(distance, dtype=float))
        if d.size:
            self.margin = min(self.margin, float(np.min(d)))


def _align(t: Any, shape: tuple[int, ...], out: tuple[int, ...]) -> Any:
    return t.reshape((t.shape[0],) + (1,) * (len(out) - len(shape)) + shape)


def reference(expr: Expression, env: dict[str, Any], lib: Lib, trace: Trace | None = None, frozen=None) -> Any:
    """The output of ``expr`` at a batch of points ``env`` (name -> (B,) + shape)."""
    memo: dict[int, Any] = {}

    def ev(node: Node) -> Any:
        key = id(node)
        if key in memo:
            return memo[key]
        memo[key] = value = _ev(node)
        if trace is not None:
            trace.magnitude = max(trace.magnitude, float(np.max(np.abs(_numpy(value)))))
        return value

    def _ev(node: Node) -> Any:
        op, k, shape = node.op, node.kids, node.shape
        if op == "var":
            return env[node.arg]
        if op == "named":
            return ev(k[0])
        if op == "num":
            return lib.asarray(node.arg)
        if op == "vector":
            return lib.stack([ev(kid) for kid in k])
        if op == "index":
            return lib.index(ev(k[0]), node.arg)
        if op == "neg":
            return -ev(k[0])
        f = node.arg
        if op == "call" and (f in ("max", "min") and len(k) == 1 or f in ("sum", "mean", "prod", "norm", "logsumexp")):
            x = ev(k[0])
            axis = None if not node.text_arg else int(node.text_arg) % len(k[0].shape) + 1
            if trace is not None and f in ("max", "min"):
                s = np.sort(_numpy(lib.flat(x)), axis=1)
                trace.near(s[:, -1] - s[:, -2] if f == "max" else s[:, 1] - s[:, 0])
            if trace is not None and f == "norm":
                trace.near(_numpy(lib.reduce("norm", x, axis)))
            return lib.reduce(f, x, axis)
        if f == "dot":
            a, b = (ev(kid) for kid in k)
            return (a * b).sum(-1)
        args = [_align(ev(kid), kid.shape, shape) if op != "matmul" else ev(kid) for kid in k]
        if op in ("add", "sub", "mul", "div", "pow"):
            a, b = args
            if op == "add":
                return a + b
            if op == "sub":
                return a - b
            if op == "mul":
                return a * b
            if op == "div":
                return a / b
            return lib.power(a, b)
        if op == "matmul":
            a, b = args
            sa, sb = k[0].shape, k[1].shape
            a = a[:, None, :] if len(sa) == 1 else a
            b = b[:, :, None] if len(sb) == 1 else b
            out = lib.matmul(a, b)
            if len(sb) == 1:
                out = out[..., 0]
            if len(sa) == 1:
                out = out[:, 0]
            return out
        if op == "cmp":
            if trace is not None:
                trace.near(_numpy(args[0] - args[1]))
            return lib.compare(node.arg, *args)
        if op == "cond":
            then, c, otherwise = args
            return lib.where(c, then, otherwise)
        if f == "detach":
            if frozen is not None:
                return frozen[id(node)]
            value = lib.detach(args[0])
            if trace is not None:
                trace.frozen[id(node)] = value
            return value
        if f in lib.unary:
            x = args[0]
            if trace is not None and f in ("abs", "relu", "sign"):
                trace.near(_numpy(x))
            value = lib.unary[f](x)
            if node.text_arg:  # log(x, base)
                value = value / math.log(float(node.text_arg))
            return value
        if f in ("max", "min", "maximum", "minimum"):
            a, b = args
            if trace is not None:
                trace.near(_numpy(a - b))
            return (lib.maximum if f in ("max", "maximum") else lib.minimum)(a, b)
        if f == "where":
            c, a, b = args
            return lib.where(c, a, b)
        if f == "clamp":
            x, lo, hi = args
            if trace is not None:
                trace.near(_numpy(x - lo))
                trace.near(_numpy(x - hi))
            return lib.minimum(lib.maximum(x, lo), hi)
        if f == "atan2":
            y, x = args
            if trace is not None:
                ny, nx = _numpy(y), _numpy(x)
                trace.near(np.where(nx < 0, ny, np.hypot(ny, nx)))
            return lib.atan2(y, x)
        raise AssertionError(f)

    for _name, node in expr.statements[:-1]:
        ev(node)
    return ev(expr.output)


def _numpy(t: Any) -> np.ndarray:
    return t.detach().numpy() if hasattr(t, "detach") and not isinstance(t, np.ndarray) else np.asarray(t)


# --- cases -----------------------------------------------------------------------------------------


@dataclass
class Case:
    expr: Expression
    values: dict[str, np.ndarray]
    value: float  # the NumPy reference value
    magnitude: float
    frozen: dict[int, Any]
    forward: bool = False  # also compare forward mode's gradient


def draw(seed: int) -> Case:
    """An expression and a point where it is smooth, finite and moderate (drawn again until so)."""
    gen = Generator(seed)
    while True:
        expr = gen.expression()
        if not expr.variables:
            continue
        for _ in range(4):
            values = {n: gen.rng.uniform(-SPREAD, SPREAD, VARIABLES[n]) for n in expr.variables}
            trace = Trace()
            with np.errstate(all="ignore"):
                out = reference(expr, {n: v[None] for n, v in values.items()}, Lib(), trace)
            if (
                np.isfinite(out).all()
                and np.isfinite(trace.magnitude)
                and trace.magnitude < MAX_MAGNITUDE
                and trace.margin > KINK_MARGIN
            ):
                return Case(expr, values, float(out.reshape(-1)[0]), trace.magnitude, trace.frozen, seed % 4 == 0)


def cases(chunk: int) -> list[Case]:
    return [draw(1_000_003 * chunk + i) for i in range(EXPRESSIONS_PER_CHUNK)]


def gradcli_value_and_grad(case: Case) -> tuple[float, dict[str, np.ndarray]]:
    result = value_and_grad(load(case.expr.text), case.values, case.expr.variables)
    return float(result.value), result.gradient


def numeric_gradient(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """Central differences of the NumPy reference (detach(..) held at its value at the point)."""
    names = case.expr.variables
    shapes = [VARIABLES[n] for n in names]
    sizes = [int(np.prod(s)) for s in shapes]
    offsets = np.cumsum([0, *sizes])
    x0 = np.concatenate([np.ravel(case.values[n]) for n in names])

    def f(points: np.ndarray) -> np.ndarray:
        env = {
            n: points[:, offsets[i] : offsets[i + 1]].reshape((len(points),) + shapes[i]) for i, n in enumerate(names)
        }
        out = np.asarray(reference(case.expr, env, Lib(), frozen=case.frozen)).reshape(-1)
        return np.broadcast_to(out, (len(points),)).reshape(len(points), 1)

    with np.errstate(all="ignore"):
        estimate = finite_differences(f, x0, np.array([case.value]))
    return estimate.value[0], estimate.error[0]


def compare(case: Case) -> list[str]:
    """Every disagreement between gradcli and the references, as readable lines."""
    problems = []
    try:
        value, grad = gradcli_value_and_grad(case)
    except Exception as exc:  # noqa: BLE001 - any failure is a finding
        return [f"{case.expr.text!r} at {_point(case)}: gradcli raised {type(exc).__name__}: {exc}"]
    scale = max(abs(case.value), 1e-6 * case.magnitude, 1e-300)
    if not abs(value - case.value) <= 1e-10 * scale:
        problems.append(f"{case.expr.text!r} at {_point(case)}: value {value!r}, NumPy gives {case.value!r}")
    flat = np.concatenate([np.ravel(grad[n]) for n in case.expr.variables])
    fd, error = numeric_gradient(case)
    gscale = max(float(np.max(np.abs(fd))), 1e-300)
    bad = ~(np.abs(flat - fd) <= 1e-6 * np.maximum(np.abs(flat), np.abs(fd)) + 1e-9 * gscale + 10.0 * error)
    if bad.any():
        problems.append(
            f"{case.expr.text!r} at {_point(case)}: gradient {flat.tolist()}, finite differences {fd.tolist()} "
            f"(error estimate {error.tolist()})"
        )
    if case.forward:  # forward mode (a separate set of rules) agrees with reverse mode to rounding
        forward = program_jacobian(load(case.expr.text), case.values, case.expr.variables, "forward").matrix[0]
        if not np.all(np.abs(forward - flat) <= 1e-12 * max(float(np.max(np.abs(flat))), 1.0) + 1e-10 * np.abs(flat)):
            problems.append(
                f"{case.expr.text!r} at {_point(case)}: forward mode {forward.tolist()}, reverse {flat.tolist()}"
            )
    return problems


def _point(case: Case) -> str:
    return ", ".join(f"{n}={np.asarray(v).tolist()!r}" for n, v in case.values.items())


# --- the tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_expressions_against_numpy_and_finite_differences(chunk):
    problems = [p for case in cases(chunk) for p in compare(case)]
    assert not problems, "\n".join(problems)


def test_the_command_line_prints_the_same_numbers_in_full():
    """``gradcli eval --json`` on random expressions: the library's value and gradient, to the last bit."""
    from typer.testing import CliRunner

    from gradcli.cli.app import app

    runner = CliRunner()
    problems = []
    for case in cases(CHUNKS)[:40]:
        value, grad = gradcli_value_and_grad(case)
        at = ",".join(f"{k}={json.dumps(np.asarray(v).tolist())}" for k, v in case.values.items())
        result = runner.invoke(
            app, ["eval", "--at", at, "--wrt", ",".join(case.expr.variables), "--json", "--", case.expr.text]
        )
        assert result.exit_code == 0, f"{case.expr.text!r} --at {at}: {result.output}"
        doc = json.loads(result.stdout)
        if doc["value"] != value or any(
            not np.array_equal(np.asarray(doc["gradient"][n], dtype=float), grad[n]) for n in case.expr.variables
        ):
            problems.append(f"{case.expr.text!r} --at {at}: {doc} vs value {value!r}, gradient {grad}")
    assert not problems, "\n".join(problems)


# --- disagreements found, kept as minimal regression cases --------------------------------------------

FOUND = [
    pytest.param(
        "norm(A, 1)", {"A": [[3.0, 4.0], [6.0, 8.0]]}, None, [5.0, 10.0], {"A": [[0.6, 0.8], [0.6, 0.8]]},
        id="norm-axis-1",
    ),
    pytest.param(
        "norm(A, 0)", {"A": [[3.0, 4.0], [6.0, 8.0]]}, None, [6.708203932499369, 8.94427190999916],
        {"A": [[3 / 45**0.5, 4 / 80**0.5], [6 / 45**0.5, 8 / 80**0.5]]},
        id="norm-axis-0",
    ),
    pytest.param(
        "norm(u, -1)", {"u": [3.0, 4.0]}, None, 5.0, {"u": [0.6, 0.8]},
        id="norm-axis-minus-1",
    ),
    pytest.param(
        "e * x", {"e": 2.0, "x": 3.0}, None, 6.0, {"e": 3.0, "x": 2.0},
        id="e-given-a-value-is-differentiated",
    ),
    pytest.param(
        "x + pi^2", {"pi": 3.0, "x": 1.0}, None, 10.0, {"x": 1.0, "pi": 6.0},
        id="pi-given-a-value-is-differentiated",
    ),
]  # fmt: skip


@pytest.mark.parametrize("text, values, wrt, value, gradient", FOUND)
def test_disagreements_found_stay_fixed(text, values, wrt, value, gradient):
    """Each found by the random expressions (or by probing what they suggested); see AVOID."""
    seed = None if np.ndim(value) == 0 else "ones"
    result = value_and_grad(load(text), {k: np.asarray(v, dtype=float) for k, v in values.items()}, wrt, seed=seed)
    np.testing.assert_allclose(result.value, value, rtol=1e-12)
    assert list(result.gradient) == list(gradient)
    for name, expected in gradient.items():
        np.testing.assert_allclose(result.gradient[name], expected, rtol=1e-12)


# --- PyTorch, when installed (a local check; the suite does not need it) ---------------------------


class TorchLib(Lib):
    def __init__(self, torch: Any) -> None:
        self.torch = t = torch
        self.unary = {
            "sin": t.sin, "cos": t.cos, "tan": t.tan, "tanh": t.tanh, "atan": t.atan, "asin": t.asin,
            "acos": t.acos, "exp": t.exp, "sinh": t.sinh, "cosh": t.cosh, "expm1": t.expm1, "abs": t.abs,
            "relu": t.relu, "sign": t.sign, "erf": t.erf, "log": t.log, "sqrt": t.sqrt, "log2": t.log2,
            "log10": t.log10, "log1p": t.log1p, "sigmoid": t.sigmoid, "softplus": t.nn.functional.softplus,
        }  # fmt: skip
        self.maximum, self.minimum, self.atan2, self.power, self.matmul = (
            t.maximum,
            t.minimum,
            t.atan2,
            t.pow,
            t.matmul,
        )

    def asarray(self, value: float) -> Any:
        return self.torch.full((1,), value, dtype=self.torch.float64)

    def reduce(self, f: str, t: Any, axis: int | None) -> Any:
        torch = self.torch
        if axis is None:
            t, axis = self.flat(t), 1
        if f == "norm":
            return torch.linalg.vector_norm(t, dim=axis)
        if f == "max":
            return torch.amax(t, dim=axis)
        if f == "min":
            return torch.amin(t, dim=axis)
        return {"sum": torch.sum, "mean": torch.mean, "prod": torch.prod, "logsumexp": torch.logsumexp}[f](t, axis)

    def index(self, t: Any, index: tuple[Any, ...]) -> Any:
        dim = 1
        for item in index:  # one at a time: torch has no negative steps
            if isinstance(item, int):
                t = t.select(dim, item)
                continue
            rows = range(t.shape[dim])[item]
            t = t.index_select(dim, self.torch.tensor(list(rows), dtype=self.torch.long))
            dim += 1
        return t

    def stack(self, items: list[Any]) -> Any:
        return self.torch.stack(self.torch.broadcast_tensors(*items), dim=1)

    def where(self, c: Any, a: Any, b: Any) -> Any:
        a, b = self.torch.broadcast_tensors(a, b)
        return self.torch.where(c != 0, a, b)

    def compare(self, op: str, a: Any, b: Any) -> Any:
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op].to(self.torch.float64)

    def detach(self, t: Any) -> Any:
        return t.detach()


def torch_value_and_grad(torch: Any, case: Case) -> tuple[float, np.ndarray]:
    leaves = {n: torch.tensor(v[None], dtype=torch.float64, requires_grad=True) for n, v in case.values.items()}
    out = reference(case.expr, leaves, TorchLib(torch)).reshape(())
    names = case.expr.variables
    grads = torch.autograd.grad(out, [leaves[n] for n in names], allow_unused=True) if out.requires_grad else []
    flat = [
        np.zeros(VARIABLES[n]).ravel() if g is None else g.numpy().ravel()
        for n, g in zip(names, grads or [None] * len(names))
    ]
    return float(out.detach()), np.concatenate(flat)


@pytest.mark.parametrize("chunk", range(0, CHUNKS, 3))
def test_against_torch(chunk):
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    problems = []
    for case in cases(chunk):
        value, grad = gradcli_value_and_grad(case)
        value = float(value)
        flat = np.concatenate([np.ravel(grad[n]) for n in case.expr.variables])
        t_value, t_grad = torch_value_and_grad(torch, case)
        scale = max(abs(t_value), 1e-3 * case.magnitude)
        if not abs(value - t_value) <= 1e-12 * scale:
            problems.append(f"{case.expr.text!r} at {_point(case)}: value {value!r}, torch {t_value!r}")
        gscale = max(float(np.max(np.abs(t_grad))), 1e-300)
        if not np.all(np.abs(flat - t_grad) <= 1e-12 * np.abs(t_grad) + 1e-11 * gscale):
            problems.append(f"{case.expr.text!r} at {_point(case)}: gradient {flat.tolist()}, torch {t_grad.tolist()}")
    assert not problems, "\n".join(problems)
