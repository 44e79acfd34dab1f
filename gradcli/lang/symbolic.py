"""Syntax tree -> SymPy, node by node (user text never goes through ``sympify``).

Numbers become exact rationals (``2.5`` is 5/2), variables real symbols, and
array values NumPy object arrays of SymPy expressions, so indexing,
broadcasting, reductions and ``@`` behave exactly as they do numerically.
SymPy is imported here and only here.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from ..errors import Source, SyntaxProblem, UsageError
from ..ops import ADD, POW, SUB
from ..ops.operators import INFIX, PREFIX
from . import ast
from .evaluate import is_mask_node
from .functions import COMPARISONS, FUNCTIONS, indicator


class stop_gradient(sp.Function):  # noqa: N801  (the name SymPy prints)
    """``detach(e)``: the value of ``e``, whose derivative is 0."""

    def _at_number(cls, arg: Any) -> Any:
        if arg.is_Number:  # a constant has no gradient to stop (and log(detach(1)) is log(1) = 0)
            return arg
        return None

    eval = classmethod(_at_number)  # SymPy's hook, called as the node is made

    def fdiff(self, argindex: int = 1) -> Any:
        return sp.Integer(0)

    def _eval_evalf(self, prec: int) -> Any:
        return self.args[0]._eval_evalf(prec)


def number(text: str) -> sp.Rational:
    """An exact rational for a numeric literal (``2.5`` -> 5/2, ``1e-3`` -> 1/1000)."""
    fraction = Fraction(text)
    return sp.Rational(fraction.numerator, fraction.denominator)


def symbols_for(name: str, shape: tuple[int, ...], brackets: bool = False) -> Any:
    """A real symbol, or an object array of element symbols ``x_0, x_1, ...`` (``x[0], x[1], ...``
    with ``brackets``: names no user can take, for when the first spelling is someone's name)."""
    if not shape:
        return sp.Symbol(name, real=True)
    flat = [sp.Symbol(_element_name(name, idx, brackets), real=True) for idx in np.ndindex(shape)]
    return np.array(flat, dtype=object).reshape(shape)


def _element_name(name: str, index: tuple[int, ...], brackets: bool) -> str:
    if brackets:
        return f"{name}[{','.join(map(str, index))}]"
    return f"{name}_{'_'.join(map(str, index))}"


def _bracketed(program: ast.SyntaxTree, shapes: Mapping[str, tuple[int, ...]]) -> set[str]:
    """The arrays whose ``x_0`` element names would be the same symbol as a name of the program
    (``sum(x) * x_0``) or as another array's element (``x_1`` of shape (2,) and ``x`` of (2, 2))."""
    arrays = {name: shape for name, shape in shapes.items() if shape}
    if not arrays:
        return set()
    taken = Counter({n.id for n in program.nodes() if isinstance(n, ast.Name)} | set(shapes))
    taken.update(s.name for s in program.statements)
    elements = {name: {_element_name(name, idx, False) for idx in np.ndindex(shape)} for name, shape in arrays.items()}
    for names in elements.values():
        taken.update(names)
    return {name for name, names in elements.items() if any(taken[n] > 1 for n in names)}


def to_sympy(
    program: ast.SyntaxTree, shapes: Mapping[str, tuple[int, ...]] | None = None
) -> tuple[list[Any], dict[str, Any]]:
    """The program's outputs as SymPy expressions, and the symbols of its variables."""
    shapes = dict(shapes or {})
    source = Source(program.text)
    env: dict[str, Any] = {}
    variables: dict[str, Any] = {}
    bracketed = _bracketed(program, shapes)

    def lookup(node: ast.Name) -> Any:
        if node.id in env:
            return env[node.id]
        if node.id == "pi" and node.id not in shapes:  # a constant unless --at gives it a value
            return sp.pi
        if node.id == "e" and node.id not in shapes:
            return sp.E
        symbol = symbols_for(node.id, tuple(shapes.get(node.id, ())), node.id in bracketed)
        variables[node.id] = env[node.id] = symbol
        return symbol

    for statement in program.statements:
        env[statement.name] = _convert(statement.value, lookup, source)
    outputs = [_convert(item, lookup, source) for item in program.outputs.items]
    return outputs, variables


class _Terms(list):
    """The terms of a chain of scalar ``+``/``-``, added in one ``sp.Add`` when it is used:
    adding them one at a time re-sorts the growing sum each time (6 s for 1,000 terms)."""

    def total(self) -> Any:
        return sp.Add(*self)


#: The operators whose chains are gathered in one ``sp.Add``: "+" and "-".
_SUMS = frozenset(symbol for symbol, row in INFIX.items() if row.primitive in (ADD, SUB))


def _sum(op: str, a: Any, b: Any) -> Any:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return _total(a) + _total(b) if op == "+" else _total(a) - _total(b)
    terms = a if isinstance(a, _Terms) else _Terms([a])  # each result is used once: safe to extend
    if isinstance(b, _Terms):
        terms.extend(b if op == "+" else [-t for t in b])
    else:
        terms.append(b if op == "+" else -b)
    return terms


def _total(value: Any) -> Any:
    return value.total() if isinstance(value, _Terms) else value


def _convert(root: ast.SyntaxNode, lookup: Any, source: Source) -> Any:
    results: dict[int, Any] = {}
    for node in ast.postorder(root):
        args = [results.pop(id(child)) for child in node.children()]
        try:
            if isinstance(node, ast.Binary) and node.op in _SUMS:
                results[id(node)] = _sum(node.op, *args)
                continue
            args = [_total(a) for a in args]
            results[id(node)] = _node(node, args, lookup)
        except SyntaxProblem:
            raise
        except _TooLarge as exc:
            raise UsageError(f"{source.quote(node.start, node.end)} {exc}") from None
        except (TypeError, ValueError, IndexError, AttributeError) as exc:
            raise SyntaxProblem(
                f"cannot translate this to SymPy at {source.where(node.start)}: {exc}", source, node.start
            ) from None
        except (KeyError, ArithmeticError) as exc:  # SymPy's own failures (a condition on zoo: KeyError)
            raise SyntaxProblem(
                f"cannot translate this to SymPy at {source.where(node.start)}: SymPy failed "
                f"({type(exc).__name__}: {exc})",
                source,
                node.start,
            ) from None
    return _total(results[id(root)])


MAX_DIGITS = 4_000  # an exact power longer than this is a mistake (and Python prints at most 4,300 digits)


class _TooLarge(ValueError):
    pass


def _power(u: Any, v: Any) -> Any:
    """u^v; refused (before SymPy spends minutes on it) when both are numbers and the result
    would have more than MAX_DIGITS digits."""
    if isinstance(u, sp.Number) and isinstance(v, sp.Number) and abs(u) > 1 and v > 0:
        digits = float(v) * math.log10(abs(float(u))) if abs(float(u)) < float("inf") else float("inf")
        if digits > MAX_DIGITS:
            raise _TooLarge(f"is about 10^{digits:.4g}: too large for exact arithmetic")
    if isinstance(u, sp.Rational) and isinstance(v, sp.Number) and abs(u) != 1 and u != 0:
        # 0.5^(10^400) or 3^(-10^400): as many digits below the fraction bar
        digits = abs(float(v)) * math.log10(max(abs(u.p), u.q))
        if digits > MAX_DIGITS:
            raise _TooLarge(f"has about {digits:.4g} digits: too many for exact arithmetic")
    return u**v


def _elementwise(fn: Any, *args: Any) -> Any:
    if any(isinstance(a, np.ndarray) for a in args):
        return np.frompyfunc(fn, len(args), 1)(*args)
    return fn(*args)


def _node(node: ast.SyntaxNode, args: list[Any], lookup: Any) -> Any:
    if isinstance(node, ast.Number):
        return number(node.text)
    if isinstance(node, ast.Name):
        return lookup(node)
    if isinstance(node, ast.Unary):
        form = PREFIX[node.op].sympy_form()
        return _elementwise(lambda u: form(sp, u), args[0])
    if isinstance(node, ast.Binary):
        row = INFIX[node.op]
        if row.primitive is POW:  # refused before SymPy spends minutes on a huge exact power
            return _elementwise(_power, *args)
        form = row.sympy_form()
        if row.elementwise:
            return _elementwise(lambda u, v: form(sp, u, v), *args)
        return form(sp, *args)
    if isinstance(node, ast.Compare):
        relation = COMPARISONS[node.op].sympy
        return _elementwise(lambda u, v: indicator(sp, relation(sp, u, v)), *args)
    if isinstance(node, ast.Conditional):
        then, condition, otherwise = args
        return _elementwise(lambda t, c, o: sp.Piecewise((t, sp.Ne(c, 0)), (o, True)), then, condition, otherwise)
    if isinstance(node, ast.Call):
        return _call(node.function, args)
    if isinstance(node, ast.Slice):
        parts = iter(args)
        return slice(*(None if p is None else int(next(parts)) for p in (node.lower, node.upper, node.step)))
    if isinstance(node, ast.Index):
        target, *items = args
        index = tuple(_index_item(n, i) for n, i in zip(node.items, items))
        return np.asarray(target, dtype=object)[index]
    if isinstance(node, ast.Vector):
        return np.array([np.asarray(a, dtype=object) if isinstance(a, np.ndarray) else a for a in args], dtype=object)
    raise TypeError(f"no SymPy form for {type(node).__name__}")


def _index_item(node: ast.SyntaxNode, item: Any) -> Any:
    """A slice, a position, positions, or a mask (an item written as a comparison) with known values."""
    if isinstance(item, slice):
        return item
    if np.ndim(item) == 0:
        return int(item)
    values = np.asarray(item, dtype=object)
    if not all(getattr(v, "is_number", True) for v in values.flat):
        raise TypeError("an index or a mask that depends on a variable has no SymPy form")
    if isinstance(node, ast.Name):  # a name given a comparison would be a mask: not known here
        raise TypeError("an index list or a mask given by a name has no SymPy form: write it in the brackets")
    if is_mask_node(node):
        return np.asarray([bool(v != 0) for v in values.flat], dtype=bool).reshape(values.shape)
    return np.asarray([int(v) for v in values.flat], dtype=np.intp).reshape(values.shape)


def _call(name: str, args: list[Any]) -> Any:
    function = FUNCTIONS[name]
    build = stop_gradient if name == "detach" else None
    if build is None:
        if function.sympy is None:
            raise TypeError(f"{name}() has no SymPy counterpart")
        build = lambda *a: function.sympy(sp, *a)  # noqa: E731
    if len(args) in function.elementwise:
        return _elementwise(build, *args)
    if function.reduces and len(args) == 2:  # name(x, axis)
        return np.apply_along_axis(build, int(args[1]), np.asarray(args[0], dtype=object))
    return build(*args)


def warning_text(caught: list[warnings.WarningMessage]) -> str | None:
    """Python warnings raised while SymPy (or NumPy under it) worked, as one line in gradcli's
    words: a SymPyDeprecationWarning is 12 lines of advice to programmers, not to users."""
    said: dict[str, None] = {}
    for item in caught:
        paragraph = str(item.message).strip().split("\n\n")[0]
        text = " ".join(paragraph.split())
        if issubclass(item.category, RuntimeWarning) and "overflow" in text:
            text = f"a number overflowed to infinity ({text})"
        said.setdefault(text or item.category.__name__)
    if not said:
        return None
    texts = list(said)
    more = f" (and {len(texts) - 3} more)" if len(texts) > 3 else ""
    return "while SymPy worked: " + "; ".join(texts[:3]) + more


SIMPLIFY_LIMIT = 400  # operations; beyond this, simplify() can take minutes


def simplified(expr: Any) -> Any:
    """``sympy.simplify`` when the expression is small enough to simplify quickly."""
    return sp.simplify(expr) if sp.count_ops(expr) <= SIMPLIFY_LIMIT else expr


def derivative_of(expr: Any, symbol: Any) -> Any:
    """d expr / d symbol, simplified; an array of derivatives for an array of symbols."""
    if isinstance(symbol, np.ndarray):
        flat = [simplified(sp.diff(expr, s)) for s in symbol.reshape(-1)]
        return np.array(flat, dtype=object).reshape(symbol.shape)
    return simplified(sp.diff(expr, symbol))
