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


def derivative_texts(tree: Any, names: Sequence[str] | None) -> dict[str, str] | None:
    """``gradcli diff``'s text of d output / d name for each of ``names`` (the variables when None),
    by SymEngine, where the text is the one SymPy's road prints: each derivative an integer times
    a product of whole positive powers of variables (``2*x``, ``-3*x^2*y``, ``7``), which SymPy's
    simplification leaves as it is. None where SymPy must answer (anything else, or a name that is
    not a variable: SymPy's road says so).

    >>> from gradcli.lang.parser import parse
    >>> derivative_texts(parse("x^3 * y - 4*y"), None)
    {'x': '3*x^2*y', 'y': 'x^3 - 4'}
    """
    if tree.statements or len(tree.outputs.items) != 1:
        return None
    from .evaluate import free_variables  # lazy: start-up (as this module: check's and diff's only)

    variables = free_variables(tree)
    if names and any(n not in variables for n in names):
        return None
    try:
        import symengine as se
    except ImportError:
        return None
    try:
        output = _lowered(tree.outputs.items[0], se, set())
        texts = {n: _polynomial_text(output.diff(se.Symbol(n)), se) for n in (names or variables)}
    except (NotScalar, RuntimeError, TypeError, ValueError, AttributeError, ArithmeticError):
        return None
    return None if any(t is None for t in texts.values()) or not texts else texts  # type: ignore[return-value]


def _polynomial_text(expr: Any, se: Any) -> str | None:
    """A monomial's text as SymPy's printer writes it in gradcli's language (the integer first, the
    variables by name, ``^`` for a power); a sum of them only where it is of two terms, a monomial
    and an integer, which SymPy orders so (``x^3 - 4``). None for anything else."""
    if expr.is_Add:
        terms = list(expr.args)
        numbers = [t for t in terms if t.is_Integer]
        if len(terms) != 2 or len(numbers) != 1:
            return None
        monomial = _monomial_text(next(t for t in terms if not t.is_Integer), se)
        if monomial is None or monomial.startswith("-"):
            return None  # (SymPy puts a positive term first: -x + 4 prints as 4 - x)
        number = int(numbers[0])
        return f"{monomial} {'-' if number < 0 else '+'} {abs(number)}"
    return _monomial_text(expr, se)


#: the functions whose call on a variable SymPy's road prints as SymEngine writes it (``cos(x)``)
CALLS = frozenset(["sin", "cos", "sinh", "cosh"])


def _call_text(factor: Any, se: Any) -> str | None:
    """``sin(x)``, ``exp(x)``: one of ``CALLS`` (or ``exp``) of a variable; None for anything else."""
    if factor.is_Pow and factor.args[0] == se.E and factor.args[1].is_Symbol:
        return f"exp({factor.args[1].name})"
    name = type(factor).__name__
    if factor.is_Function and name in CALLS and len(factor.args) == 1 and factor.args[0].is_Symbol:
        return f"{name}({factor.args[0].name})"
    return None


def _monomial_text(expr: Any, se: Any) -> str | None:
    """``c*x^a*y^b`` (integer c, whole a, b >= 1), times at most one call of a variable
    (``3*x^2*cos(y)``), as SymPy prints it: None for any other form."""
    if expr.is_Integer:
        return str(int(expr))
    factors = list(expr.args) if expr.is_Mul else [expr]
    coefficient = 1
    powers: list[tuple[str, int]] = []
    calls: list[str] = []
    for factor in factors:
        if factor.is_Integer:
            coefficient *= int(factor)
        elif factor.is_Symbol:
            powers.append((factor.name, 1))
        elif factor.is_Pow and factor.args[0].is_Symbol and factor.args[1].is_Integer and int(factor.args[1]) > 1:
            powers.append((factor.args[0].name, int(factor.args[1])))
        elif (call := _call_text(factor, se)) is not None:
            calls.append(call)
        else:
            return None
    if len(calls) > 1 or (not powers and not calls) or coefficient == 0:
        return None if coefficient else "0"
    body = "*".join([*(name if power == 1 else f"{name}^{power}" for name, power in sorted(powers)), *calls])
    if coefficient in (1, -1):
        return ("-" if coefficient < 0 else "") + body
    return f"{coefficient}*{body}"
