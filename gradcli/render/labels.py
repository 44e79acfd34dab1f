"""The texts on the graph's nodes and edges: an expression for a node the program did not name
(``x * 2``, ``sin(n3)``), a constant's value, a local derivative's formula with the inputs' names.

The operators' symbols come from the operator table (``ops.operators``); ``build`` labels the nodes
it makes with these, and ``summary`` the groups it finds (``sin(x * k) * w``, ``h * x + k chain``).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..ops.operators import PREFIX, SHOWN
from ..text import array, number

SIGNS = {row.primitive.name: row.symbol for row in PREFIX.values() if row.primitive is not None}  # "neg" -> "-"
INFIX = SHOWN  # primitive name -> its operator's symbol ("mul" -> "*"), from the operator table


def expression(op: str, refs: list[str]) -> str:
    """Text for a node the program did not name: ``x * 2``, ``sin(n3)``."""
    symbol = INFIX.get(op)
    if symbol and len(refs) == 2:
        return f"{refs[0]} {symbol} {refs[1]}"
    sign = SIGNS.get(op)
    if sign and len(refs) == 1:
        return f"{sign}{refs[0]}"
    return f"{op}({', '.join(refs)})"


def wrap(text: str) -> str:
    """Parentheses around an operand with an operator outside any parentheses (``x * k``)."""
    depth = 0
    for ch in text:
        depth += ch in "([" and 1 or (-1 if ch in ")]" else 0)
        if depth == 0 and ch == " ":
            return f"({text})"
    return text


def value_text(raw: Any) -> str:
    """A constant's label: its number, a short array, or how many values it holds."""
    a = np.asarray(raw)
    if a.ndim == 0:
        return number(a)
    return array(a) if a.size <= 6 else f"[{a.size} values]"


def formula(template: str, refs: list[str], out: str, unary: str | None = None) -> str:
    """A rule's formula with the inputs' names: ``{1}`` of ``a * b`` is ``b``; a unary
    operation's own value by its name: ``sigmoid({0})*(1-sigmoid({0}))`` of ``f = sigmoid(n3)``
    is ``f*(1-f)``."""
    if unary is not None:
        template = template.replace(f"{unary}({{0}})", "{out}")
    whole = template.strip("{}")
    if template == "{" + whole + "}" and whole.isdigit() and int(whole) < len(refs):
        ref = refs[int(whole)]
        return ref[1:-1] if ref.startswith("(") and ref.endswith(")") else ref  # no parentheses alone
    text = template.replace("{out}", out)
    for i, ref in enumerate(refs):
        bare = ref[1:-1] if ref.startswith("(") and ref.endswith(")") else ref
        text = text.replace("({" + str(i) + "})", f"({bare})")  # exp({0}): one pair of parentheses
        text = text.replace("{" + str(i) + "}", ref)
    return _tidy(text)


_POWER_MINUS_ONE = re.compile(r"\^\((-?\d+(?:\.\d+)?)-1\)")
_POWER_ONE = re.compile(r"\^1(?![\d.])")


def _tidy(text: str) -> str:
    """Arithmetic on numbers in a formula: ``2*x^(2-1)`` reads ``2*x``."""
    text = _POWER_MINUS_ONE.sub(lambda m: "^" + number(float(m.group(1)) - 1), text)
    text = _POWER_ONE.sub("", text)
    return text
