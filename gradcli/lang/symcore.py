"""A scalar program's derivative by SymEngine, SymPy's C++ core (issue 36: ``check`` in a blink).

Importing SymPy takes longer than a whole ``gradcli eval`` (about 1 s on a loaded machine);
SymEngine imports in a tenth of that and differentiates in C++. The primitive table writes each
SymPy counterpart against the module it is given (``sympy=lambda sp, x: sp.sin(x)``), so the same
rows build SymEngine expressions when handed ``symengine``: there is one symbolic form per
primitive, and two engines that read it.

``scalar_gradient`` takes what SymEngine answers exactly as SymPy would: a program of scalar
variables whose every node is a number, a name, an operator or a function of the table that
SymEngine knows, and derivatives that come out as numbers. Anything else (arrays, indexing,
comparisons, a kink SymEngine leaves as ``Derivative(abs(x), x)``, a huge exact power) answers
None, and the caller asks SymPy, which knows it all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..ops import POW
from ..ops.operators import INFIX, PREFIX
from . import ast
from .functions import FUNCTIONS

#: the functions SymEngine differentiates as SymPy does: smooth, elementary, no Piecewise (SymEngine
#: 0.15 crashes the process on round and trunc, and reads Piecewise's kinks otherwise than SymPy)
SMOOTH = frozenset(
    [
        "acos",
        "acosh",
        "add",
        "asin",
        "asinh",
        "atan",
        "atan2",
        "atanh",
        "cos",
        "cosh",
        "deg2rad",
        "div",
        "erf",
        "erfc",
        "exp",
        "exp2",
        "expm1",
        "hypot",
        "log",
        "log10",
        "log1p",
        "log2",
        "logaddexp",
        "logsigmoid",
        "mish",
        "mul",
        "neg",
        "pow",
        "rad2deg",
        "reciprocal",
        "rsqrt",
        "sigmoid",
        "silu",
        "sin",
        "sinh",
        "softplus",
        "sqrt",
        "square",
        "sub",
        "tan",
        "tanh",
    ]
)
#: the precision the derivative is evaluated in: SymPy's road evaluates with 30 digits
BITS = 112
MAX_EXPONENT = 1_000  # an exact power beyond this is SymPy's road's to refuse


class NotScalar(Exception):
    """The program is not one SymEngine answers as SymPy would."""


def scalar_gradient(
    tree: Any, values: Mapping[str, Any], names: Sequence[str], max_nodes: int | None = None
) -> dict[str, np.ndarray] | None:
    """d output / d name at ``values`` for each of ``names``, or None where SymPy must answer (as it
    must when the expression has more than ``max_nodes`` nodes: SymPy's road says it is too large).

    >>> from gradcli.lang.parser import parse
    >>> scalar_gradient(parse("x^2 * sin(y)"), {"x": 3.0, "y": 0.0}, ["x", "y"])
    {'x': array(0.), 'y': array(9.)}
    """
    if any(np.ndim(values[n]) for n in values) or tree.statements or len(tree.outputs.items) != 1:
        return None
    try:
        import symengine as se
    except ImportError:  # (an install without the wheel: SymPy answers)
        return None
    try:
        output = _lowered(tree.outputs.items[0], se, set(values))
        if max_nodes is not None and _size(output) > max_nodes:
            return None
        point = {se.Symbol(n): se.RealDouble(float(v)) for n, v in values.items()}
        return {n: np.array(_number(output.diff(se.Symbol(n)), point, se)) for n in names}
    except (NotScalar, RuntimeError, TypeError, ValueError, AttributeError, ArithmeticError):
        return None


def _lowered(root: ast.SyntaxNode, se: Any, given: set[str]) -> Any:
    results: dict[int, Any] = {}
    for node in ast.postorder(root):
        args = [results.pop(id(child)) for child in node.children()]
        results[id(node)] = _node(node, args, se, given)
    return results[id(root)]


def _node(node: ast.SyntaxNode, args: list[Any], se: Any, given: set[str]) -> Any:
    if isinstance(node, ast.Number):
        return _exact(node.text, se)
    if isinstance(node, ast.Name):
        if node.id in ("pi", "e") and node.id not in given:  # (a name given a value is a variable)
            return se.pi if node.id == "pi" else se.E
        return se.Symbol(node.id)
    if isinstance(node, ast.Unary):
        return PREFIX[node.op].sympy_form()(se, args[0])
    if isinstance(node, ast.Binary):
        row = INFIX[node.op]
        if node.op not in ("+", "-", "*", "/", "^", "**"):  # (% is a staircase; @ is not of scalars)
            raise NotScalar(node.op)
        if row.primitive is POW and args[1].is_Number and abs(float(args[1])) > MAX_EXPONENT:
            raise NotScalar("a huge power")
        return row.sympy_form()(se, *args)
    if isinstance(node, ast.Call):
        function = FUNCTIONS.get(node.function)
        if node.function not in SMOOTH or function is None or len(args) not in function.elementwise:
            raise NotScalar(node.function)
        return function.sympy(se, *args)
    raise NotScalar(type(node).__name__)


def _size(expr: Any) -> int:
    """The nodes of a SymEngine expression, as SymPy's ``preorder_traversal`` counts them."""
    count, stack = 0, [expr]
    while stack:
        count += 1
        stack.extend(stack.pop().args)
    return count


def _exact(text: str, se: Any) -> Any:
    """A literal as an exact rational (``2.5`` is 5/2), as SymPy's road reads it."""
    from fractions import Fraction

    fraction = Fraction(text)
    return se.Rational(fraction.numerator, fraction.denominator)


def _number(derivative: Any, point: dict[Any, Any], se: Any) -> float:
    if derivative.atoms(se.Derivative, se.Subs):
        raise NotScalar("a derivative SymEngine leaves unevaluated")
    value = derivative.subs(point).n(BITS, real=False)
    if not value.is_Number:
        raise NotScalar("not a number at the point")
    found = complex(value)
    if found.imag and abs(found.imag) >= 1e-25 * max(1.0, abs(found.real)):
        return math.nan
    if math.isinf(found.real):  # 1/0: SymPy's exact road says zoo, which check reads as no number
        return math.nan
    return found.real
