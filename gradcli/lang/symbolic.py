"""Syntax tree -> SymPy, node by node (user text never goes through ``sympify``).

Numbers become exact rationals (``2.5`` is 5/2), variables real symbols, and
array values NumPy object arrays of SymPy expressions, so indexing,
broadcasting, reductions and ``@`` behave exactly as they do numerically.
SymPy is imported only by the modules SymPy's commands load (this one, terms.py below it,
printer.py, steps.py), never on ``gradcli eval``'s road.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
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
from .parser import parse
from .printer import sigmoid_form
from .terms import Element, as_expr, stop_gradient
from .values import split_top_level


def number(text: str) -> sp.Rational:
    """An exact rational for a numeric literal (``2.5`` -> 5/2, ``1e-3`` -> 1/1000)."""
    fraction = Fraction(text)
    return sp.Rational(fraction.numerator, fraction.denominator)


def symbols_for(name: str, shape: tuple[int, ...], brackets: bool = False) -> Any:
    """A real symbol, or an object array of element symbols ``x_0, x_1, ...`` (``x[0], x[1], ...``
    with ``brackets``: names no user can take, for when the first spelling is someone's name)."""
    if not shape:
        return sp.Symbol(name, real=True)
    flat = [Element(_element_name(name, idx, brackets), name, shape, idx, real=True) for idx in np.ndindex(shape)]
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


def _names(
    program: ast.SyntaxTree, shapes: Mapping[str, tuple[int, ...]], env: dict[str, Any], variables: dict[str, Any]
) -> Any:
    """How a name reads in SymPy: an assigned step's value (``env``), ``pi`` and ``e`` (constants
    unless --at gives them a value), else the variable's symbol (an array of element symbols
    when ``shapes`` gives it a shape), made once and kept in ``variables`` and ``env``."""
    bracketed = _bracketed(program, shapes)

    def lookup(node: ast.Name) -> Any:
        if node.id in env:
            return env[node.id]
        if node.id == "pi" and node.id not in shapes:
            return sp.pi
        if node.id == "e" and node.id not in shapes:
            return sp.E
        symbol = symbols_for(node.id, tuple(shapes.get(node.id, ())), node.id in bracketed)
        variables[node.id] = env[node.id] = symbol
        return symbol

    return lookup


def to_sympy(
    program: ast.SyntaxTree, shapes: Mapping[str, tuple[int, ...]] | None = None
) -> tuple[list[Any], dict[str, Any]]:
    """The program's outputs as SymPy expressions, and the symbols of its variables."""
    shapes = dict(shapes or {})
    source = Source(program.text)
    env: dict[str, Any] = {}
    variables: dict[str, Any] = {}
    lookup = _names(program, shapes, env, variables)
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
            results[id(node)] = node_value(node, args, lookup)
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


def node_value(node: ast.SyntaxNode, args: list[Any], lookup: Any) -> Any:
    """One node in SymPy, from its children's values (``args``) and ``lookup`` for a name."""
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
        flat = [_simplest(autograd_diff(expr, s)) for s in symbol.reshape(-1)]
        return np.array(flat, dtype=object).reshape(symbol.shape)
    return _simplest(autograd_diff(expr, symbol))


def autograd_diff(expr: Any, symbol: Any) -> Any:
    """``sp.diff`` with autograd's convention for a step's derivative: DiracDelta (of ``sign``, of a
    comparison's Heaviside) is 0 everywhere, as the rules of sign, floor and the comparisons give."""
    found = sp.diff(expr, symbol)
    return found.replace(sp.DiracDelta, lambda *args: sp.S.Zero) if found.has(sp.DiracDelta) else found


def _simplest(raw: Any) -> Any:
    """``simplified(raw)``, unless ``raw`` written with sigmoid is simpler still: simplify turns
    exp(-x)/(1 + exp(-x))^2, which prints as sigmoid(x)*(1 - sigmoid(x)), into 1/(4*cosh(x/2)^2)."""
    simple = simplified(raw)
    introduced = any(simple.has(f) and not raw.has(f) for f in (sp.cosh, sp.sinh))
    if not introduced:  # 1 - tanh(x)^2 is no longer than 1/cosh(x)^2, and in the function's own terms
        return simple
    if sp.count_ops(raw) <= sp.count_ops(simple) + 2:
        return raw
    return raw if raw.has(sp.exp) and sigmoid_form(raw) is not raw else simple


# --- a program differentiated statement by statement (reverse mode, by hand) ---------------------


@dataclass
class ProgramDerivative:
    """d output / d each named step and each variable of a program, stated in the program's names.

    ``steps`` holds (name, derivative) from the last statement back to the first, as backpropagation
    runs; ``inputs`` each variable's derivative in terms of the steps' names; ``expanded`` the same
    with every step replaced by its definition (in the variables only). Derivatives of array steps
    and variables are object arrays of the same shape."""

    output: str | None  # the output's name, when the output is a statement's name
    steps: list[tuple[str, Any]]
    inputs: dict[str, Any]
    variables: dict[str, Any]  # the symbols of the variables
    definitions: dict[Any, Any]  # each step's element symbol -> its expression in earlier symbols

    @property
    def statements(self) -> list[str]:
        return [name for name, _ in reversed(self.steps)]

    def expand(self, expr: Any) -> Any:
        """``expr`` with every step symbol replaced by its definition (in the variables only)."""
        full = self._full()
        return _each(expr, lambda e: e.xreplace(full))

    def _full(self) -> dict[Any, Any]:
        if not hasattr(self, "_expanded"):
            full: dict[Any, Any] = {}
            for symbol, definition in self.definitions.items():  # in program order
                full[symbol] = definition.xreplace(full)
            self._expanded = full
        return self._expanded

    def at(self, expr: Any, point: Mapping[str, Any]) -> Any:
        """``expr`` at the point (``point``: variable -> SymPy number or object array of them)."""
        values: dict[Any, Any] = {}
        for name, symbol in self.variables.items():
            if name in point:
                for s, v in zip(
                    np.asarray(symbol, dtype=object).reshape(-1), np.asarray(point[name], dtype=object).reshape(-1)
                ):
                    values[s] = v
        for symbol, definition in self.definitions.items():
            values[symbol] = definition.xreplace(values)
        return _each(expr, lambda e: e.xreplace(values))


def _each(expr: Any, fn: Any) -> Any:
    if isinstance(expr, np.ndarray):
        return np.frompyfunc(fn, 1, 1)(expr) if expr.size else expr
    return fn(expr)


def differentiate_program(
    program: ast.SyntaxTree, shapes: Mapping[str, tuple[int, ...]] | None = None
) -> ProgramDerivative:
    """Each statement becomes a symbol (an array of element symbols for an array); its local
    derivatives are taken once and the chain rule carries d output/d step back through the steps."""
    shapes = dict(shapes or {})
    source = Source(program.text)
    env: dict[str, Any] = {}
    variables: dict[str, Any] = {}
    lookup = _names(program, shapes, env, variables)
    definitions, steps = _step_symbols(program, shapes, lookup, source, env)
    outputs = [_convert(item, lookup, source) for item in program.outputs.items]
    if len(outputs) != 1 or isinstance(outputs[0], np.ndarray):
        raise UsageError("diff differentiates one scalar output; use gradcli jacobian for several")
    out = as_expr(outputs[0])
    items = program.outputs.items
    named = isinstance(items[0], ast.Name) and steps and items[0].id == steps[-1][0] and out == steps[-1][1]
    adjoint: dict[Any, list[Any]] = {}
    if named:
        adjoint[out] = [sp.Integer(1)]
    else:
        _spread(out, sp.Integer(1), adjoint)
    found: list[tuple[str, Any]] = []
    for name, symbol in reversed(steps):
        flat = np.asarray(symbol, dtype=object).reshape(-1)
        grads = [_tidy(sp.Add(*adjoint.pop(s, []))) for s in flat]
        for s, g in zip(flat, grads):
            if g != 0:
                _spread(definitions[s], g, adjoint, s)
        found.append((name, _shaped(grads, symbol)))
    inputs = {}
    for name, symbol in variables.items():
        flat = np.asarray(symbol, dtype=object).reshape(-1)
        inputs[name] = _shaped([_tidy(sp.Add(*adjoint.get(s, []))) for s in flat], symbol)
    return ProgramDerivative(steps[-1][0] if named else None, found, inputs, variables, definitions)


def _step_symbols(
    program: ast.SyntaxTree, shapes: Mapping[str, tuple[int, ...]], lookup: Any, source: Source, env: dict[str, Any]
) -> tuple[dict[Any, Any], list[tuple[str, Any]]]:
    """Each statement's symbol(s) in ``env`` and its definition (element symbol -> expression in earlier
    symbols); a constant statement (or a slice) stays the value it is."""
    taken = {n.id for n in program.nodes() if isinstance(n, ast.Name)} | set(shapes)
    definitions: dict[Any, Any] = {}
    steps: list[tuple[str, Any]] = []  # name, symbol(s)
    for statement in program.statements:
        value = _convert(statement.value, lookup, source)
        known = all(getattr(v, "is_number", True) for v in np.asarray(value, dtype=object).reshape(-1))
        if known or not all(isinstance(v, sp.Basic) for v in np.asarray(value, dtype=object).reshape(-1)):
            env[statement.name] = value  # a constant (or a slice): used as it is
            continue
        shape = np.shape(value)
        elements = {_element_name(statement.name, idx, False) for idx in np.ndindex(shape)} if shape else set()
        symbol = symbols_for(statement.name, shape, bool(elements & taken))
        for s, v in zip(np.asarray(symbol, dtype=object).reshape(-1), np.asarray(value, dtype=object).reshape(-1)):
            definitions[s] = as_expr(v)
        env[statement.name] = symbol
        steps.append((statement.name, symbol))
    return definitions, steps


def _shaped(grads: list[Any], symbol: Any) -> Any:
    """Derivatives of a symbol's elements in the symbol's shape (the one derivative of a scalar)."""
    return np.array(grads, dtype=object).reshape(np.shape(symbol)) if np.shape(symbol) else grads[0]


def _spread(expr: Any, grad: Any, adjoint: dict[Any, list[Any]], name: Any = None) -> None:
    """The chain rule at one step: grad * d expr/d s added to the adjoint of each symbol s in expr
    (``expr`` written ``name`` where its derivative holds it: d tanh(u)/du = 1 - h^2 for h = tanh(u))."""
    for s in expr.free_symbols:
        local = autograd_diff(expr, s)
        if name is not None and not expr.is_Symbol:
            local = local.xreplace({expr: name})
        if local != 0:
            adjoint.setdefault(s, []).append(grad * local)


def _tidy(expr: Any) -> Any:
    """A step's derivative with common factors taken out (``simplify`` costs seconds per element)."""
    return sp.factor_terms(expr)


def exact(value: Any) -> Any:
    """A value of ``--at`` (a float, an array) as SymPy numbers: exact rationals (0.1 is 1/10)."""
    array = np.asarray(value)
    convert = lambda v: number(repr(float(v))) if np.isfinite(v) else sp.Float(float(v))  # noqa: E731
    if array.ndim == 0:
        return convert(array)
    return np.array([convert(v) for v in array.reshape(-1)], dtype=object).reshape(array.shape)


def value_at(expr: Any, symbols: Mapping[str, Any], point: Mapping[str, Any]) -> Any:
    """``expr`` with each variable's symbols replaced by its value at the point."""
    values: dict[Any, Any] = {}
    for name, symbol in symbols.items():
        if name in point:
            flat = np.asarray(point[name], dtype=object).reshape(-1)
            values.update(zip(np.asarray(symbol, dtype=object).reshape(-1), flat))
    return _each(expr, lambda e: e.xreplace(values))


def exact_point(items: list[str], values: Mapping[str, Any]) -> dict[str, Any]:
    """The ``--at`` values as exact SymPy numbers, read from their text (``x=1/3`` is 1/3,
    ``x=0.1`` is 1/10, ``x=pi/4`` is pi/4); a value SymPy cannot read is the float given."""
    point: dict[str, Any] = {}
    for item in items:
        for _, piece in split_top_level(item):
            name, _, text = piece.partition("=")
            name = name.strip()
            if name not in values:
                continue
            try:
                (value,), _ = to_sympy(parse(text.strip()))
                value = np.asarray(value, dtype=object) if isinstance(value, np.ndarray) else as_expr(value)
                ok = np.shape(value) == np.shape(values[name]) and all(
                    as_expr(v).is_number for v in np.asarray(value, dtype=object).reshape(-1)
                )
            except Exception:  # the float parser read it; SymPy's road did not (1e400...)
                ok = False
            point[name] = value if ok else exact(values[name])
    return point
