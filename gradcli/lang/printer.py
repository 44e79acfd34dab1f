"""SymPy -> gradcli's language: the text ``diff`` prints, which ``eval`` and ``check --expect`` read back.

``to_language(expr)`` writes ``^`` for powers, ``abs``, ``max``/``min``, ``sign``, ``where(c, a, b)``
for a piecewise expression, comparisons (1 or 0 in the language) for ``Heaviside``, ``detach`` for
``stop_gradient``, ``x[0,1]`` for the element symbols of an array, and ``sigmoid(u)`` where that
makes the text shorter. SymPy is imported by the caller (this module is only imported with it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp
from sympy.printing.precedence import PRECEDENCE
from sympy.printing.str import StrPrinter

from .terms import Element, as_expr


class _Sigmoid(sp.Function):
    """``sigmoid(u)``, only for printing (never differentiated)."""

    nargs = 1


_Sigmoid.__name__ = "sigmoid"


class LanguagePrinter(StrPrinter):
    """SymPy's ``str`` printer, with the spellings of gradcli's language."""

    def __init__(self, elements: dict[str, str] | None = None) -> None:
        super().__init__({"order": None})
        self._elements = elements or {}

    def _print_Symbol(self, expr: Any) -> str:
        return self._elements.get(expr.name, expr.name)

    def _print_Add(self, expr: Any, order: Any = None) -> str:
        """Positive terms first: ``yhat - y`` rather than ``-y + yhat``."""
        terms = sorted(self._as_ordered_terms(expr, order=order), key=lambda t: t.could_extract_minus_sign())
        text = ""
        for k, term in enumerate(terms):
            negative = term.could_extract_minus_sign()
            part = self._print(-term if negative else term)
            if isinstance(-term if negative else term, sp.Add):
                part = f"({part})"
            if k == 0:
                text = f"-{part}" if negative else part
            else:
                text += f" - {part}" if negative else f" + {part}"
        return text

    def _print_Pow(self, expr: Any, rational: bool = False) -> str:
        base, exp = expr.as_base_exp()
        if exp == sp.S.Half and not rational:
            return f"sqrt({self._print(base)})"
        if exp.is_negative and exp.is_Number:  # 1/x, 1/x^2, 1/sqrt(x)
            if exp == -1:
                return f"1/{self.parenthesize(base, PRECEDENCE['Pow'], strict=True)}"
            return f"1/{self._print(sp.Pow(base, -exp, evaluate=False))}"
        text = super()._print_Pow(expr, rational)
        return text.replace("**", "^")

    def _print_Rational(self, expr: Any) -> str:
        return str(expr.p) if expr.q == 1 else f"{expr.p}/{expr.q}"

    def _print_Float(self, expr: Any) -> str:
        return repr(float(expr))

    def _print_Exp1(self, expr: Any) -> str:
        return "exp(1)"

    def _print_Pi(self, expr: Any) -> str:
        return "pi"

    def _print_Infinity(self, expr: Any) -> str:
        return "(1/0)"

    def _print_NegativeInfinity(self, expr: Any) -> str:
        return "(-1/0)"

    def _print_ComplexInfinity(self, expr: Any) -> str:
        return "(1/0)"

    def _print_NaN(self, expr: Any) -> str:
        return "(0/0)"

    def _print_exp(self, expr: Any) -> str:
        return f"exp({self._print(expr.args[0])})"

    def _print_Abs(self, expr: Any) -> str:
        return f"abs({self._print(expr.args[0])})"

    def _print_MinMax(self, name: str, args: Any) -> str:
        *rest, last = args
        text = self._print(last)
        for arg in reversed(rest):
            text = f"{name}({self._print(arg)}, {text})"
        return text

    def _print_Max(self, expr: Any) -> str:
        return self._print_MinMax("max", expr.args)

    def _print_Min(self, expr: Any) -> str:
        return self._print_MinMax("min", expr.args)

    def _print_Mod(self, expr: Any) -> str:
        return f"remainder({self._print(expr.args[0])}, {self._print(expr.args[1])})"

    def _print_stop_gradient(self, expr: Any) -> str:
        return f"detach({self._print(expr.args[0])})"

    def _print_Heaviside(self, expr: Any) -> str:
        """``H(a - b)`` as comparisons with its value at 0 (``H0``, SymPy's default 1/2: the tie of
        ``max(a, b)``, whose gradient autograd splits): ``(a > b)``, ``(a >= b)``, or
        ``((a > b) + (a == b)/2)``, so that the text gives the value at a tie too."""
        at_zero = expr.args[1] if len(expr.args) > 1 else sp.S.Half
        if at_zero == 0:
            return f"({self._comparison(expr.args[0], '>')})"
        if at_zero == 1:
            return f"({self._comparison(expr.args[0], '>=')})"
        tie = f"({self._comparison(expr.args[0], '==')})"
        share = f"{tie}/2" if at_zero == sp.S.Half else f"{tie}*{self._print(at_zero)}"
        return f"(({self._comparison(expr.args[0], '>')}) + {share})"

    def _print_DiracDelta(self, expr: Any) -> str:  # autograd's convention: 0 almost everywhere
        return "0"

    def _comparison(self, difference: Any, op: str) -> str:
        """``a - b > 0`` written ``a > b``."""
        positive, negative = [], []
        for term in sp.Add.make_args(difference):
            (negative if term.could_extract_minus_sign() else positive).append(term)
        left = sp.Add(*positive) if positive else sp.S.Zero
        right = -sp.Add(*negative) if negative else sp.S.Zero
        return f"{self._print(left)} {op} {self._print(right)}"

    def _print_Relational(self, expr: Any) -> str:
        op = {"==": "==", "!=": "!=", ">=": ">=", "<=": "<=", ">": ">", "<": "<"}[expr.rel_op]
        return f"{self._print(expr.lhs)} {op} {self._print(expr.rhs)}"

    def _condition(self, cond: Any) -> str:
        """A condition as a number: 1 where it holds, 0 where not."""
        if cond is sp.true:
            return "1"
        if cond is sp.false:
            return "0"
        if isinstance(cond, sp.And):
            return "*".join(f"({self._condition(c)})" for c in cond.args)
        if isinstance(cond, sp.Or):
            return self._print_MinMax("max", [sp.Symbol(f"({self._condition(c)})") for c in cond.args])
        if isinstance(cond, sp.Not):
            return f"1 - ({self._condition(cond.args[0])})"
        return self._print(cond)

    def _print_Piecewise(self, expr: Any) -> str:
        pieces = list(expr.args)
        if len(pieces) == 2 and pieces[1] == (0, sp.true) and pieces[0][0] == 1:  # an indicator: 1 or 0
            return f"({self._condition(pieces[0][1])})"
        value, cond = pieces[-1]
        text = self._print(value) if cond is sp.true else f"where({self._condition(cond)}, {self._print(value)}, 0/0)"
        for value, cond in reversed(pieces[:-1]):
            text = f"where({self._condition(cond)}, {self._print(value)}, {text})"
        return text

    def _print_Function(self, expr: Any) -> str:
        name = {"ceiling": "ceil", "atan2": "atan2", "sigmoid": "sigmoid"}.get(expr.func.__name__, expr.func.__name__)
        return f"{name}({', '.join(self._print(a) for a in expr.args)})"

    def _print_log(self, expr: Any) -> str:
        return f"log({', '.join(self._print(a) for a in expr.args)})"

    def _print_BooleanTrue(self, expr: Any) -> str:
        return "1"

    def _print_BooleanFalse(self, expr: Any) -> str:
        return "0"


def element_names(expr: Any) -> dict[str, str]:
    """``x_0_1`` -> ``x[0,1]`` for the element symbols of arrays in ``expr`` (a variable the user
    named ``x_0`` stays ``x_0``; ``x[0,1]`` symbols are written so already)."""
    return {
        s.name: f"{s.array}[{','.join(map(str, s.index))}]"
        for s in getattr(expr, "free_symbols", ())
        if isinstance(s, Element) and s.array
    }


def sigmoid_form(expr: Any) -> Any:
    """``expr`` with ``exp(v)`` written through ``sigmoid`` when that is shorter to print:
    exp(-u) = (1 - s)/s and exp(u) = s/(1 - s) for s = sigmoid(u)."""
    if sp.count_ops(expr) > 120:
        return expr
    exps = [e for e in expr.atoms(sp.exp) if not e.args[0].is_number]
    if not exps or len(exps) > 3:
        return expr
    best, best_ops = expr, (sp.count_ops(expr), len(str(expr)))
    for e in exps:
        v = e.args[0]
        for u, form in ((-v, lambda s: (1 - s) / s), (v, lambda s: s / (1 - s))):
            s = sp.Dummy("s")
            candidate = sp.factor(sp.cancel(expr.subs(e, form(s))))
            if candidate.has(sp.exp):
                continue
            candidate = _sign_inside(candidate).subs(s, _Sigmoid(u))
            ops = sp.count_ops(candidate)
            if (ops, len(str(candidate))) < best_ops:
                best, best_ops = candidate, (ops, len(str(candidate)))
    return best


def _sign_inside(expr: Any) -> Any:
    """``-(s - 1)*s`` as ``(1 - s)*s``: the minus sign taken into a factor that is a sum."""
    if not isinstance(expr, sp.Mul) or not expr.could_extract_minus_sign():
        return expr
    factors = list(expr.args)
    for k, factor in enumerate(factors):
        if isinstance(factor, sp.Add):
            rest = sp.Mul(*factors[:k], *factors[k + 1 :])
            return sp.Mul(-rest, sp.expand(-factor), evaluate=False) if -rest != 1 else sp.expand(-factor)
    return expr


def to_language(expr: Any) -> str:
    """SymPy expression -> text of gradcli's language that ``eval`` reads back."""
    expr = as_expr(expr)
    if expr.has(sp.DiracDelta):
        expr = expr.replace(lambda e: isinstance(e, sp.DiracDelta), lambda e: sp.S.Zero)
    expr = sigmoid_form(expr)
    return LanguagePrinter(element_names(expr)).doprint(expr)


def array_text(array: Any) -> str:
    """An array of derivatives in the language: ``2*x`` when every element is the same expression
    of the same-placed elements of arrays shaped like it (``[2*x[0], 2*x[1]]``), else a nested list."""
    whole = _whole_array(array)
    if whole is None:
        whole = _outer(array)
    if whole is not None:
        return whole
    if array.ndim == 0:
        return to_language(array.item())
    return "[" + ", ".join(array_text(part) if array.ndim > 1 else to_language(part) for part in array) + "]"


def _whole_array(array: Any) -> str | None:
    if array.size < 2 or array.size > 400:
        return None
    template = None
    for index in np.ndindex(array.shape):
        expr = as_expr(array[index])
        swap = {}
        for symbol in expr.free_symbols:
            if not isinstance(symbol, Element):
                continue
            if symbol.index != index or symbol.shape != array.shape:
                return None
            swap[symbol] = sp.Symbol(symbol.array, real=True)
        if not swap:
            return None
        form = expr.xreplace(swap)
        if template is None:
            template = form
        elif form != template:
            return None
    return to_language(template)


def _outer(array: Any) -> str | None:
    """A matrix whose element (i, j) is a(i) * b(j), with a and b each the same expression of the
    i-th (j-th) elements of vectors: ``outer(a, b)`` (dloss/dW1 = outer(W2*(1 - h^2)*(yhat - y), x))."""
    if array.ndim != 2 or array.size > 400:
        return None
    rows, columns = array.shape
    left = right = None
    used = [False, False]  # each side holds elements of its vectors
    for i, j in np.ndindex(array.shape):
        parts: tuple[list[Any], list[Any]] = ([], [])
        for factor in sp.Mul.make_args(as_expr(array[i, j])):
            elements = [s for s in factor.free_symbols if isinstance(s, Element)]
            if all(s.shape == (rows,) and s.index == (i,) for s in elements):
                used[0] = used[0] or bool(elements)
                parts[0].append(factor.xreplace({s: sp.Symbol(s.array, real=True) for s in elements}))
            elif all(s.shape == (columns,) and s.index == (j,) for s in elements):
                used[1] = True
                parts[1].append(factor.xreplace({s: sp.Symbol(s.array, real=True) for s in elements}))
            else:
                return None
        a, b = sp.Mul(*parts[0]), sp.Mul(*parts[1])
        if left is None:
            left, right = a, b
        elif (a, b) != (left, right):
            return None
    if left is None or not all(used):
        return None
    return f"outer({to_language(left)}, {to_language(right)})"
