"""THE operator table: every operator of the language, declared once, beside the primitives.

A row says everything the program needs to know about an operator: its symbol and
aliases (``**`` is ``^``), how tightly it binds and which way it associates, whether it
is a prefix sign, an infix operation or a comparison, the primitive(s) it records, the
Python operator (or library function) that applies it to tensors, how two constants fold
(IEEE arithmetic on float64), its SymPy form, and the Tensor method that spells it.
The lexer, parser, unparse, evaluation (one point and many), the SymPy translation, the
renderers and ``gradcli ops`` all read this table: adding an operator is adding a row
(and its primitive, when it is a new one).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ..records import Row, fill
from . import elementwise as E
from . import linalg as L
from .core import Primitive

#: Binding powers of the forms that are not operators (the parser's and unparse's other levels).
CONDITIONAL_POWER = 10  # a if c else b
COMPARE_POWER = 20  # < <= > >= == != (not chained)
PREFIX_POWER = 50  # -x, +x: below "^", so -x^2 is -(x^2)
POSTFIX_POWER = 70  # f(...), x[...]


class Operator(Row):
    """One row of the operator table."""

    __slots__ = _fields = (
        "symbol",
        "kind",
        "power",
        "primitives",
        "aliases",
        "right",
        "apply",
        "function",
        "fold",
        "sympy",
        "elementwise",
        "method",
        "reflected",
        "doc",
    )

    def __init__(
        self,
        symbol: str,  # the canonical spelling, kept in the syntax tree
        kind: str,  # "infix", "compare" or "prefix"
        power: int,  # binding power: higher binds tighter
        primitives: tuple[Primitive, ...] = (),  # what it records; renderers show these as the symbol
        aliases: tuple[str, ...] = (),  # other spellings read as this one ("**" for "^")
        right: bool = False,  # right-associative (2^3^2 is 2^9), written tight (x^2)
        apply: Callable[[Any, Any], Any] | None = None,  # on tensors and numbers; None: ``function``
        function: str = "",  # the library function applied when ``apply`` is None ("matmul")
        fold: Callable[[Any, Any], Any] | None = None,  # two float64 constants -> float64; None: refused
        sympy: Callable[..., Any] | None = None,  # (sympy, a, b); default: the primitive's
        elementwise: bool = True,  # the SymPy form applies element by element to arrays
        method: str = "",  # the Tensor method that spells it ("__add__"); "__r...__" is its reflection
        reflected: bool = True,  # whether the Tensor has the reflected method too (number + tensor)
        doc: str = "",
    ) -> None:
        fill(self, locals())

    @property
    def primitive(self) -> Primitive | None:
        return self.primitives[0] if self.primitives else None

    @property
    def spellings(self) -> tuple[str, ...]:
        return (self.symbol, *self.aliases)

    def sympy_form(self) -> Callable[..., Any] | None:
        if self.sympy is not None:
            return self.sympy
        return self.primitive.sympy if self.primitive is not None else None


def _sympy_matmul(sp: Any, a: Any, b: Any) -> Any:
    return np.matmul(np.asarray(a, dtype=object), np.asarray(b, dtype=object))


OPERATORS: tuple[Operator, ...] = (
    Operator("+", "prefix", PREFIX_POWER, (), apply=lambda x: x, sympy=lambda sp, x: x, doc="+x"),
    Operator("-", "prefix", PREFIX_POWER, (E.NEG,), apply=operator.neg, doc="-x"),
    Operator("+", "infix", 30, (E.ADD,), apply=operator.add, fold=operator.add, method="__add__"),
    Operator("-", "infix", 30, (E.SUB,), apply=operator.sub, fold=operator.sub, method="__sub__"),
    Operator("*", "infix", 40, (E.MUL,), apply=operator.mul, fold=operator.mul, method="__mul__"),
    Operator("/", "infix", 40, (E.DIV,), apply=operator.truediv, fold=operator.truediv, method="__truediv__"),
    Operator("%", "infix", 40, (E.REMAINDER,), apply=operator.mod, fold=operator.mod, method="__mod__"),
    Operator(
        "@",
        "infix",
        40,
        (L.MATMUL, L.MM, L.MV),
        function="matmul",
        sympy=_sympy_matmul,
        elementwise=False,
        doc="matrix product",
    ),
    Operator(
        "^", "infix", 60, (E.POW,), aliases=("**",), right=True, apply=operator.pow, fold=operator.pow, method="__pow__"
    ),
    Operator("<", "compare", COMPARE_POWER, (E.LT,), method="__lt__", reflected=False),
    Operator("<=", "compare", COMPARE_POWER, (E.LE,), method="__le__", reflected=False),
    Operator(">", "compare", COMPARE_POWER, (E.GT,), method="__gt__", reflected=False),
    Operator(">=", "compare", COMPARE_POWER, (E.GE,), method="__ge__", reflected=False),
    Operator("==", "compare", COMPARE_POWER, (E.EQ,), method="__eq__", reflected=False),
    Operator("!=", "compare", COMPARE_POWER, (E.NE,), method="__ne__", reflected=False),
)

#: The infix operators by every spelling ("**" and "^" give the same row).
INFIX: dict[str, Operator] = {s: row for row in OPERATORS if row.kind == "infix" for s in row.spellings}
#: The comparisons by symbol; ``a < b`` and ``lt(a, b)`` are the same primitive.
COMPARISONS: dict[str, Operator] = {s: row for row in OPERATORS if row.kind == "compare" for s in row.spellings}
#: The prefix signs by symbol.
PREFIX: dict[str, Operator] = {s: row for row in OPERATORS if row.kind == "prefix" for s in row.spellings}
#: How a graph shows a node of each primitive an infix operator or comparison records: "mul" -> "*".
SHOWN: dict[str, str] = {prim.name: row.symbol for row in OPERATORS if row.kind != "prefix" for prim in row.primitives}


def symbols() -> set[str]:
    """Every spelling of every operator (for the lexer)."""
    return {s for row in OPERATORS for s in row.spellings}


__all__ = [
    "Operator",
    "OPERATORS",
    "INFIX",
    "COMPARISONS",
    "PREFIX",
    "SHOWN",
    "CONDITIONAL_POWER",
    "COMPARE_POWER",
    "PREFIX_POWER",
    "POSTFIX_POWER",
    "symbols",
]
