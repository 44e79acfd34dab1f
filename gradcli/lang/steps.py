"""A derivation as a teacher writes it: ``gradcli diff EXPR --steps``.

The working expression is a syntax tree in which the derivatives still to take are
``d/dx(u)`` nodes (:class:`Pending`). Each step takes the first of them (left to right,
outermost first), applies one rule to it and writes the result so far. The rules are
read from the tables: an operator's primitive and a function's row give the rule's name
(``Primitive.rule_name``: "product rule", "derivative of sin") and its local derivatives
(``Primitive.formulas``, or SymPy's derivative of the function's SymPy form where the
row's formula is not written in the language). Nothing is written per function here;
only the textbook shapes of the sum, product, quotient and power rules are.

A program is explained as backpropagation runs: one step per statement, last first,
each giving the derivative of the output by that statement's name (∂y/∂y = 1, ...).

Every step carries SymPy expressions of what it claims and of what it should equal, so
that :func:`check` evaluates both at a point (the tests run it over generated expressions
and every function of the table; ``--steps`` runs it at the point too).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp
from sympy.functions.elementary.hyperbolic import HyperbolicFunction
from sympy.functions.elementary.trigonometric import TrigonometricFunction

from ..errors import GradcliError, UsageError
from ..ops.operators import CONDITIONAL_POWER, INFIX, PREFIX, PREFIX_POWER
from . import ast, symbolic
from .functions import FUNCTIONS
from .parser import parse_expression
from .printer import LanguagePrinter
from .unparse import ATOM, POWERS, TIGHT, unparse

#: The most nodes an expression (or statement) may have to be explained step by step.
MAX_NODES = 300
#: Rules that take a sum or product apart; the rest are chain-rule shaped (f'(u) * du/dx).
_LINEAR = frozenset({"sum rule", "difference rule", "product rule", "quotient rule", "constant multiple"})


class Pending(ast.Call):
    """``d/dx(u)``: a derivative not taken yet (printed as a call by ``unparse``)."""

    __slots__ = ("variable",)

    def __init__(self, variable: str, operand: ast.SyntaxNode) -> None:
        super().__init__(0, 0, f"d/d{variable}", (operand,))
        self.variable = variable


@dataclass
class Step:
    """One line of a derivation: the rule, what it applies to, the result so far."""

    rule: str
    applies_to: str
    result: str
    latex: str = ""
    claim: Any = None  # SymPy: what ``result`` says
    truth: Any = None  # SymPy: what it should equal

    def as_json(self) -> dict[str, str]:
        return {"rule": self.rule, "applies_to": self.applies_to, "result": self.result}


@dataclass
class Derivation:
    """The steps of one derivative (by ``variable``), and how to check them."""

    variable: str
    heading: str
    latex_heading: str
    steps: list[Step] = field(default_factory=list)
    # statements as (symbol, SymPy value in earlier symbols): a point's values for the names
    bindings: list[tuple[Any, Any]] = field(default_factory=list)
    symbols: dict[str, Any] = field(default_factory=dict)
    checked: int = 0  # how many steps were checked at a point (see ``check``)

    @property
    def result(self) -> str:
        return self.steps[-1].result if self.steps else ""


def formula_text(node: ast.SyntaxNode) -> str:
    """A tree written as ``diff`` writes a derivative (``2*x + 1``): one form of a formula, in the
    derivation and in diff's own lines and JSON alike."""
    return unparse(node, TIGHT)


# --- building trees ----------------------------------------------------------------------------------


def _number(value: Fraction) -> ast.SyntaxNode:
    if value < 0:
        return ast.Unary(0, 0, "-", _number(-value))
    if value.denominator == 1:
        return ast.Number(0, 0, float(value), str(value.numerator))
    text = repr(float(value))
    if Fraction(text) == value and len(text) <= 8:
        return ast.Number(0, 0, float(value), text)
    return ast.Binary(0, 0, "/", _number(Fraction(value.numerator)), _number(Fraction(value.denominator)))


ZERO, ONE = Fraction(0), Fraction(1)


def _binary(op: str, left: ast.SyntaxNode, right: ast.SyntaxNode) -> ast.SyntaxNode:
    return ast.Binary(0, 0, op, left, right)


def _value(node: ast.SyntaxNode) -> Fraction | None:
    """The exact value of a number (or a negated one), else None."""
    if isinstance(node, ast.Number):
        try:
            return Fraction(node.text)
        except ValueError:
            return None
    if isinstance(node, ast.Unary) and node.op in "-+":
        inner = _value(node.operand)
        return None if inner is None else (-inner if node.op == "-" else inner)
    return None


def _with_children(node: ast.SyntaxNode, kids: list[ast.SyntaxNode]) -> ast.SyntaxNode:
    """A copy of ``node`` with new children (in ``children()`` order)."""
    if isinstance(node, Pending):
        return Pending(node.variable, kids[0])
    copy = object.__new__(type(node))
    for name in node.fields():
        setattr(copy, name, getattr(node, name))
    if isinstance(node, ast.Unary):
        copy.operand = kids[0]
    elif isinstance(node, (ast.Binary, ast.Compare)):
        copy.left, copy.right = kids
    elif isinstance(node, ast.Conditional):
        copy.then, copy.condition, copy.otherwise = kids
    elif isinstance(node, ast.Call):
        copy.args = tuple(kids)
    elif isinstance(node, ast.Vector):
        copy.items = tuple(kids)
    elif isinstance(node, ast.Index):
        copy.target, copy.items = kids[0], tuple(kids[1:])
    return copy


def _rebuild(root: ast.SyntaxNode, change: Any) -> ast.SyntaxNode:
    """``root`` rebuilt bottom-up, each node passed through ``change(node)`` after its children."""
    done: dict[int, ast.SyntaxNode] = {}
    for node in ast.postorder(root):
        kids = node.children()
        new = [done.pop(id(k)) for k in kids]
        fresh = node if all(a is b for a, b in zip(new, kids)) else _with_children(node, new)
        done[id(node)] = change(fresh)
    return done[id(root)]


def _tidy(root: ast.SyntaxNode) -> ast.SyntaxNode:
    """Factors 1 and terms 0 dropped, numbers folded: what a teacher writes without a word."""
    return _rebuild(root, _tidy_node)


def _tidy_node(node: ast.SyntaxNode) -> ast.SyntaxNode:
    if isinstance(node, ast.Unary):
        return _tidy_sign(node)
    if not isinstance(node, ast.Binary):
        return node
    a, b = _value(node.left), _value(node.right)
    if a is not None and b is not None:
        folded = _fold(node.op, a, b)
        if folded is not None:
            return _number(folded)
    tidy = _TIDY.get(node.op)
    return node if tidy is None else tidy(node, a, b)


def _tidy_sign(node: ast.Unary) -> ast.SyntaxNode:
    inner = _value(node.operand)
    if node.op == "+":
        return node.operand
    if inner is not None:
        return _number(-inner)
    if isinstance(node.operand, ast.Unary) and node.operand.op == "-":
        return node.operand.operand
    return node


def _tidy_product(node: ast.Binary, a: Fraction | None, b: Fraction | None) -> ast.SyntaxNode:
    inner = node.right
    if a is not None and isinstance(inner, ast.Binary) and inner.op == "*" and _value(inner.left) is not None:
        # 1/2 * (2 * u): the numbers multiplied
        return _tidy_node(_binary("*", _number(a * _value(inner.left)), inner.right))
    if ZERO in (a, b):
        return _number(ZERO)
    if a == ONE:
        return node.right
    if b == ONE:
        return node.left
    if a == -ONE:
        return _tidy_node(ast.Unary(0, 0, "-", node.right))
    if b == -ONE:
        return _tidy_node(ast.Unary(0, 0, "-", node.left))
    return node


def _tidy_sum(node: ast.Binary, a: Fraction | None, b: Fraction | None) -> ast.SyntaxNode:
    if a == ZERO:
        return node.right if node.op == "+" else _tidy_node(ast.Unary(0, 0, "-", node.right))
    if b == ZERO:
        return node.left
    if isinstance(node.right, ast.Unary) and node.right.op == "-":  # a + -b is a - b; a - -b is a + b
        return _binary("-" if node.op == "+" else "+", node.left, node.right.operand)
    return node


def _tidy_quotient(node: ast.Binary, a: Fraction | None, b: Fraction | None) -> ast.SyntaxNode:
    if a == ZERO and b != ZERO:
        return _number(ZERO)
    return node.left if b == ONE else node


def _tidy_power(node: ast.Binary, a: Fraction | None, b: Fraction | None) -> ast.SyntaxNode:
    if b == ONE:
        return node.left
    return _number(ONE) if b == ZERO else node


_TIDY = {"*": _tidy_product, "+": _tidy_sum, "-": _tidy_sum, "/": _tidy_quotient, "^": _tidy_power}


def _fold(op: str, a: Fraction, b: Fraction) -> Fraction | None:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/" and b != 0:
        return a / b
    if op == "^" and b.denominator == 1 and abs(b) <= 16 and (a != 0 or b > 0):
        return a ** int(b)
    return None


# --- one rule --------------------------------------------------------------------------------------


def _names(node: ast.SyntaxNode) -> set[str]:
    return {n.id for n in ast.postorder(node) if isinstance(n, ast.Name)}


def _depends(node: ast.SyntaxNode, variable: str) -> bool:
    return variable in _names(node)


def _substituted(template: str, args: list[ast.SyntaxNode], out: str = "") -> ast.SyntaxNode | None:
    """A formula of the table (``{0}``, ``{1}``, ``{out}``) with the arguments put in; None when
    the formula is not written in the language (``[lo <= {0} <= hi]``)."""
    text = template.replace("{out}", f"({out})")
    for i, arg in enumerate(args):
        text = text.replace("{" + str(i) + "}", f"({formula_text(arg)})")
    try:
        return parse_expression(text, "formula")
    except GradcliError:
        return None


def _sympy_local(name: str, args: list[ast.SyntaxNode], i: int) -> ast.SyntaxNode:
    """∂f/∂(argument i) from the function's SymPy form, written back in the language."""
    function = FUNCTIONS[name]
    if function.sympy is None:
        raise UsageError(f"--steps: {name}() has no derivative formula to show")
    holders = [sp.Symbol(f"steps_arg_{k}", real=True) for k in range(len(args))]
    try:
        local = sp.diff(_scalar(function.sympy(sp, *holders), f"{name}()"), holders[i])
    except Exception as exc:  # an array form (softmax of a vector...), or SymPy failed
        raise UsageError(f"--steps explains scalar expressions: {name}() of numbers has no rule ({exc})") from None
    if not isinstance(local, sp.Basic):
        raise UsageError(f"--steps explains scalar expressions: {name}() gives an array")
    names = {h.name: f"({formula_text(arg)})" for h, arg in zip(holders, args)}
    return parse_expression(language_text(local, names), "formula")


def _local(name: str, args: list[ast.SyntaxNode], i: int, prim: Any, shown: str) -> ast.SyntaxNode | None:
    """The local derivative of ``name(args)`` (``shown``) by argument ``i``: the row's formula
    (an elementwise row's formula is the scalar derivative), else SymPy's; None where the row
    says the input is not differentiable."""
    if prim is not None and prim.elementwise and prim.arity == len(args) and len(prim.formulas) == len(args):
        if prim.vjp[i] is None:
            return None
        local = _substituted(prim.formulas[i], args, shown)
        if local is not None:
            return _tidy(local)
    return _tidy(_sympy_local(name, args, i))


def _row_of_call(node: ast.Call) -> Any:
    """The primitive whose row describes ``name(args)`` argument for argument, else None."""
    function = FUNCTIONS.get(node.function)
    prim = function.primitive if function is not None else None
    if prim is None or prim.name != node.function or prim.arity != len(node.args):
        return None
    return prim


def rewrite(node: ast.SyntaxNode, variable: str) -> tuple[str, ast.SyntaxNode]:
    """One rule applied to ``d/dvariable(node)``: the rule's name and what replaces it."""
    if not _depends(node, variable):
        return "constant rule", _number(ZERO)
    if isinstance(node, ast.Name):
        return "identity rule", _number(ONE)
    if isinstance(node, ast.Unary):
        if node.op == "+":
            return "unary plus", Pending(variable, node.operand)
        return PREFIX["-"].primitive.rule_name, ast.Unary(0, 0, "-", Pending(variable, node.operand))
    if isinstance(node, ast.Compare):
        return "step rule (a comparison is 0 or 1: derivative 0)", _number(ZERO)
    if isinstance(node, ast.Conditional):
        branches = ast.Conditional(
            0, 0, Pending(variable, node.then), node.condition, Pending(variable, node.otherwise)
        )
        return "piecewise rule", branches
    if isinstance(node, ast.Binary) and node.op in ("+", "-"):
        return _sum_rule(node, variable)
    if isinstance(node, ast.Binary):
        row = INFIX[node.op]
        return _combine(row.primitive, row.primitive.name, [node.left, node.right], variable, formula_text(node))
    if isinstance(node, ast.Call):
        if node.function == "detach":
            return "detach (no gradient flows through it)", _number(ZERO)
        if node.function not in FUNCTIONS:
            raise UsageError(f"--steps: unknown function {node.function}()")
        return _combine(_row_of_call(node), node.function, list(node.args), variable, formula_text(node))
    raise UsageError(
        f"--steps explains scalar expressions: {formula_text(node)} has no step rule (use diff without --steps)"
    )


def _sum_rule(node: ast.Binary, variable: str) -> tuple[str, ast.SyntaxNode]:
    """d/dx(a + b - c) = d/dx(a) + d/dx(b) - d/dx(c): a chain of sums in one step."""
    terms: list[tuple[str, ast.SyntaxNode]] = []
    current: ast.SyntaxNode = node
    while isinstance(current, ast.Binary) and current.op in ("+", "-"):
        terms.append((current.op, current.right))
        current = current.left
    terms.append(("+", current))
    terms.reverse()
    total: ast.SyntaxNode = Pending(variable, terms[0][1])
    for op, term in terms[1:]:
        total = _binary(op, total, Pending(variable, term))
    ops = [op for op, _ in terms[1:]]
    rules = [INFIX[op].primitive.rule_name for op in ("+", "-") if op in ops]
    return " and ".join(rules), total


def _combine(prim: Any, name: str, args: list[ast.SyntaxNode], variable: str, shown: str) -> tuple[str, ast.SyntaxNode]:
    """f(u, v, ...) -> f_u * du/dx + f_v * dv/dx, in the textbook shape of its rule."""
    moving = [i for i, arg in enumerate(args) if _depends(arg, variable)]
    rule = prim.rule_name if prim is not None else f"derivative of {name}"
    both = _both_moving(rule, args, moving, variable)
    if both is not None:
        return rule, both
    rule = _rule_for(rule, moving)
    linear = rule in _LINEAR
    terms = _chain_terms(prim, name, args, moving, variable, shown, linear)
    if not linear and any(not (isinstance(args[i], ast.Name) and args[i].id == variable) for i in moving):
        rule = f"chain rule, {rule}"
    return rule, _signed_sum(terms)


def _both_moving(rule: str, args: list[ast.SyntaxNode], moving: list[int], variable: str) -> ast.SyntaxNode | None:
    """The product and quotient rules in their textbook shape, when both sides depend on ``variable``."""
    if len(moving) != 2 or rule not in ("product rule", "quotient rule"):
        return None
    a, b = args
    pair = (_binary("*", Pending(variable, a), b), _binary("*", a, Pending(variable, b)))
    if rule == "product rule":
        return _binary("+", *pair)
    return _binary("/", _binary("-", *pair), _binary("^", b, _number(Fraction(2))))


def _rule_for(rule: str, moving: list[int]) -> str:
    """The rule's name for the arguments that move: a product with one moving side is a constant multiple."""
    if (rule == "product rule" and len(moving) == 1) or (rule == "quotient rule" and moving == [0]):
        return "constant multiple"
    if rule == "power rule" and moving == [1]:
        return "exponential rule"
    if rule == "power rule" and len(moving) == 2:
        return "generalized power rule"
    return rule


def _chain_terms(
    prim: Any, name: str, args: list[ast.SyntaxNode], moving: list[int], variable: str, shown: str, linear: bool
) -> list[tuple[bool, ast.SyntaxNode]]:
    """(negated, f_u * du/dx) for each moving argument u, a factor of 1 or -1 left out."""
    terms: list[tuple[bool, ast.SyntaxNode]] = []
    for i in moving:
        local = _local(name, args, i, prim, shown)
        if local is None:  # not differentiable there: PyTorch's derivative 0
            continue
        inner = args[i]
        bare = isinstance(inner, ast.Name) and inner.id == variable and not linear
        factor: ast.SyntaxNode | None = None if bare else Pending(variable, inner)
        sign = _value(local)
        if sign is not None and abs(sign) == 1 and factor is not None:
            terms.append((sign < 0, factor))
        elif factor is None:
            terms.append((False, local))
        else:
            terms.append((False, _binary("*", local, factor)))
    return terms


def _signed_sum(terms: list[tuple[bool, ast.SyntaxNode]]) -> ast.SyntaxNode:
    if not terms:
        return _number(ZERO)
    negated, total = terms[0]
    if negated:
        total = ast.Unary(0, 0, "-", total)
    for negated, term in terms[1:]:
        total = _binary("-" if negated else "+", total, term)
    return total


# --- a derivation ------------------------------------------------------------------------------------


def _first_pending(root: ast.SyntaxNode) -> Pending | None:
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, Pending):
            return node
        stack.extend(reversed(node.children()))
    return None


def _swap(root: ast.SyntaxNode, target: ast.SyntaxNode, replacement: ast.SyntaxNode) -> ast.SyntaxNode:
    done: dict[int, ast.SyntaxNode] = {}
    for node in ast.postorder(root):
        if node is target:
            # the target's own children were visited (and are dropped with it)
            for kid in node.children():
                done.pop(id(kid), None)
            done[id(node)] = replacement
            continue
        kids = node.children()
        new = [done.pop(id(k)) for k in kids]
        if isinstance(node, ast.Binary) and node.op == "*" and node.right is target and _is_product(replacement):
            # a * (b * c) written a * b * c: the chain rule's factors join the product they are in
            done[id(node)] = _binary("*", _binary("*", new[0], replacement.left), replacement.right)
            continue
        done[id(node)] = node if all(a is b for a, b in zip(new, kids)) else _with_children(node, new)
    return done[id(root)]


def _is_product(node: ast.SyntaxNode) -> bool:
    return isinstance(node, ast.Binary) and node.op == "*"


def _size_check(node: ast.SyntaxNode, what: str) -> None:
    if len(ast.postorder(node)) > MAX_NODES:
        raise UsageError(f"--steps: {what} is too long to explain step by step (more than {MAX_NODES} parts)")


class _Sympy:
    """Syntax trees (with ``d/dx(...)`` nodes) as SymPy expressions, one symbol per name."""

    def __init__(self) -> None:
        self.symbols: dict[str, Any] = {}

    def symbol(self, name: str) -> Any:
        if name not in self.symbols:
            self.symbols[name] = sp.Symbol(name, real=True)
        return self.symbols[name]

    def _lookup(self, node: ast.Name) -> Any:
        if node.id == "pi" and node.id not in self.symbols:
            return sp.pi
        if node.id == "e" and node.id not in self.symbols:
            return sp.E
        return self.symbol(node.id)

    def __call__(self, root: ast.SyntaxNode, unevaluated: bool = False) -> Any:
        try:
            return self._convert(root, unevaluated)
        except GradcliError:
            raise
        except (TypeError, ValueError, IndexError, AttributeError, ArithmeticError) as exc:
            said = " ".join(str(exc).split())
            raise UsageError(f"--steps explains scalar expressions: {formula_text(root)}: {said}") from None

    def _convert(self, root: ast.SyntaxNode, unevaluated: bool) -> Any:
        results: dict[int, Any] = {}
        for node in ast.postorder(root):
            args = [results.pop(id(child)) for child in node.children()]
            if isinstance(node, Pending):
                x = self.symbol(node.variable)
                results[id(node)] = sp.Derivative(args[0], x) if unevaluated else sp.diff(args[0], x)
            else:
                results[id(node)] = _scalar(symbolic.node_value(node, args, self._lookup), formula_text(node))
        return results[id(root)]


def _scalar(value: Any, what: str) -> Any:
    """A 0-d array of one expression as that expression; an array of several is refused."""
    if isinstance(value, np.ndarray):
        if value.ndim:
            raise UsageError(f"--steps explains scalar expressions: {what} is an array")
        return value.item()
    return value


def derive(expression: ast.SyntaxNode, variable: str, convert: _Sympy | None = None) -> Derivation:
    """The steps of d/dvariable(expression), each rule named, ending with SymPy's simplified form."""
    _size_check(expression, "the expression")
    convert = convert or _Sympy()
    truth = sp.diff(convert(expression), convert.symbol(variable))
    start = Pending(variable, expression)
    derivation = Derivation(
        variable,
        formula_text(start),
        latex(start),
        symbols=convert.symbols,
    )
    current: ast.SyntaxNode = start
    steps = derivation.steps
    while (target := _first_pending(current)) is not None:
        if len(steps) > 4 * MAX_NODES:
            raise UsageError("--steps: the derivation is too long to show")
        rule, replacement = rewrite(target.args[0], variable)
        current = _swap(current, target, replacement)
        steps.append(_step(rule, formula_text(target.args[0]), current, truth, convert))
    tidy = _tidy(current)
    if formula_text(tidy) != formula_text(current):
        steps.append(
            _step(
                "simplify: factors 1 and terms 0 dropped, numbers worked out",
                formula_text(current),
                tidy,
                truth,
                convert,
            )
        )
        current = tidy
    final = _simplified(convert(current))
    text = language_text(final)
    try:
        final_tree = parse_expression(text, "result")
    except GradcliError:
        final_tree = None
    if final_tree is not None and _simpler(final_tree, current):
        steps.append(_step("simplify", formula_text(current), final_tree, truth, convert))
    if not steps:  # (never: there is always the first rule)
        raise UsageError("--steps: nothing to explain")
    return derivation


#: SymPy's simplify up to this many operations; beyond, and with trigonometric or hyperbolic
#: functions (where it spends 10 s on tanh(w*x + b) terms), only the quick forms
SIMPLIFY_OPS = 30


def _simplified(expr: Any) -> Any:
    """The shortest of a few simplified forms: common factors taken out (and fractions joined),
    and SymPy's simplify where it is quick."""
    candidates = [expr, sp.factor_terms(expr), sp.factor_terms(sp.together(expr))]
    slow = expr.has(TrigonometricFunction, HyperbolicFunction)
    if sp.count_ops(expr) <= SIMPLIFY_OPS and not slow:
        candidates.append(sp.simplify(expr))
    return min(candidates, key=lambda e: (sp.count_ops(e), len(str(e))))


def _simpler(new: ast.SyntaxNode, old: ast.SyntaxNode) -> bool:
    """Whether ``new`` is a simplification of ``old`` a reader follows: fewer parts, and no
    function ``old`` does not have (SymPy writes sigmoid(x) (1 - sigmoid(x)) with cosh)."""

    def calls(node: ast.SyntaxNode) -> set[str]:
        return {n.function for n in ast.postorder(node) if isinstance(n, ast.Call)}

    return len(ast.postorder(new)) < len(ast.postorder(old)) and calls(new) <= calls(old)


def _step(rule: str, applies_to: str, tree: ast.SyntaxNode, truth: Any, convert: _Sympy) -> Step:
    return Step(
        rule,
        applies_to,
        formula_text(tree),
        latex(tree),
        claim=convert(tree),
        truth=truth,
    )


# --- a program: backpropagation, one statement at a time ---------------------------------------------


def program_steps(tree: ast.SyntaxTree, wrt: list[str]) -> list[Derivation]:
    """One derivation listing ∂y/∂name for each statement, last first, then ∂y/∂x for each variable."""
    names = [s.name for s in tree.statements]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise UsageError(f"--steps: '{twice}' is assigned twice; give each statement its own name")
    if len(tree.outputs.items) != 1:
        raise UsageError("diff differentiates one scalar output; use gradcli jacobian for several")
    statements = [(s.name, s.value) for s in tree.statements]
    output = tree.outputs.items[0]
    if not (isinstance(output, ast.Name) and statements and output.id == statements[-1][0]):
        statements.append(("f", output) if "f" not in names else ("output", output))
    for name, value in statements:
        _size_check(value, f"the statement {name} = ...")
    convert = _Sympy()
    y = statements[-1][0]
    bindings = [(convert.symbol(name), convert(value)) for name, value in statements]
    derivations = []
    adjoint: dict[str, ast.SyntaxNode] = {y: _number(ONE)}
    steps = [
        Step("start: the output by itself", y, f"∂{y}/∂{y} = 1", rf"\frac{{\partial {y}}}{{\partial {y}}} &= 1", 1, 1)
    ]
    for k in range(len(statements) - 2, -1, -1):
        name = statements[k][0]
        steps.append(_backward_step(statements, k + 1, name, adjoint, convert, bindings, y))
    for x in wrt:
        step = _backward_step(statements, 0, x, adjoint, convert, bindings, y)
        steps.append(step)
        expanded = _expanded(step, x, y, convert)
        if expanded is not None:
            steps.append(expanded)
    whole = Derivation(y, f"backpropagation through {len(statements)} statements", "", steps)
    whole.bindings = bindings
    whole.symbols = convert.symbols
    derivations.append(whole)
    return derivations


def _backward_step(
    statements: list[tuple[str, ast.SyntaxNode]],
    first: int,
    name: str,
    adjoint: dict[str, ast.SyntaxNode],
    convert: _Sympy,
    bindings: list[tuple[Any, Any]],
    y: str,
) -> Step:
    """∂y/∂name = Σ over the later statements t that use name of ∂y/∂t * ∂t/∂name."""
    terms, uses = [], []
    for later, value in statements[first:]:
        if not _depends(value, name) or later not in adjoint:
            continue
        local = _local_result(value, name, convert)
        terms.append(_tidy(_times(adjoint[later], local)))
        uses.append(f"{later} = {formula_text(value)}")
    total = terms[0] if terms else _number(ZERO)
    for term in terms[1:]:
        total = _tidy(_binary("+", total, term))
    adjoint[name] = total
    claim = convert(total)
    # the truth: y with the statements after ``name``'s own inlined, differentiated by name
    inlined = bindings[-1][1]
    position = next((i for i, (n, _) in enumerate(statements) if n == name), -1)
    for symbol, value in reversed(bindings[position + 1 : -1]):
        inlined = inlined.subs(symbol, value)
    truth = sp.diff(inlined, convert.symbol(name))
    rule = "chain rule" + (f" through {len(uses)} uses, summed" if len(uses) > 1 else "")
    text = f"∂{y}/∂{name} = {formula_text(total)}"
    shown = rf"\frac{{\partial {_latex_name(y)}}}{{\partial {_latex_name(name)}}} &= {latex(total)}"
    return Step(rule, "; ".join(uses) if uses else f"{name} (not used)", text, shown, claim, truth)


def _times(a: ast.SyntaxNode, b: ast.SyntaxNode) -> ast.SyntaxNode:
    """a * b, a product on the right joined to the one on the left: a * u * v, not a * (u * v)."""
    factors = []
    stack = [b]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Binary) and node.op == "*":
            stack.extend((node.right, node.left))
        else:
            factors.append(node)
    for factor in factors:
        a = _binary("*", a, factor)
    return a


def _expanded(step: Step, x: str, y: str, convert: _Sympy) -> Step | None:
    """∂y/∂x in the variables alone: the statements substituted, simplified (what diff prints)."""
    text = language_text(_simplified(step.truth))
    try:
        tree = parse_expression(text, "result")
    except GradcliError:
        return None
    result = f"∂{y}/∂{x} = {formula_text(tree)}"
    if result == step.result:
        return None
    shown = rf"\frac{{\partial {_latex_name(y)}}}{{\partial {_latex_name(x)}}} &= {latex(tree)}"
    return Step("substitute the statements, simplify", f"∂{y}/∂{x}", result, shown, convert(tree), step.truth)


def _latex_name(name: str) -> str:
    return sp.latex(sp.Symbol(name))


def _local_result(value: ast.SyntaxNode, name: str, convert: _Sympy) -> ast.SyntaxNode:
    """∂value/∂name, every rule applied and tidied (the other names held constant)."""
    current: ast.SyntaxNode = Pending(name, value)
    while (target := _first_pending(current)) is not None:
        _, replacement = rewrite(target.args[0], name)
        current = _swap(current, target, replacement)
    return _tidy(current)


# --- checking ------------------------------------------------------------------------------------------


def point_for(derivation: Derivation, given: dict[str, float] | None = None, seed: int = 0) -> dict[Any, Any]:
    """Values for every symbol: ``given`` ones, random ones in [0.2, 0.9] for the rest (30-digit
    floats: exact rationals under fractional powers take SymPy minutes), then each statement's value."""
    rng = random.Random(seed)
    bound = {symbol for symbol, _ in derivation.bindings}
    point: dict[Any, Any] = {}
    for name, symbol in derivation.symbols.items():
        if symbol in bound:
            continue
        value = given[name] if given and name in given else rng.randint(200_000, 900_000) / 1_000_000
        point[symbol] = sp.Float(repr(float(value)), 30)
    for symbol, value in derivation.bindings:
        point[symbol] = sp.N(value.subs(point), 30)
    return point


def check(derivation: Derivation, point: dict[Any, Any]) -> tuple[int, list[tuple[Step, complex, complex]]]:
    """How many steps have finite values at ``point`` (and so were checked), and those whose
    result is not what it should be there: (step, got, wanted)."""
    wrong, checked = [], 0
    for step in derivation.steps:
        got, want = _at(step.claim, point), _at(step.truth, point)
        if got is None or want is None:
            continue
        checked += 1
        if abs(got - want) > 1e-9 * max(1.0, abs(want)):
            wrong.append((step, got, want))
    return checked, wrong


def _at(expr: Any, point: dict[Any, Any]) -> complex | None:
    try:
        value = complex(sp.N((sp.Integer(expr) if isinstance(expr, int) else expr).subs(point), 30))
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    if value != value or abs(value) == float("inf"):
        return None
    return value


# --- SymPy -> the language: diff's own printer --------------------------------------------------------


def language_text(expr: Any, names: dict[str, str] | None = None) -> str:
    """``expr`` written in gradcli's language by the printer ``diff`` writes its derivatives with
    (``printer.LanguagePrinter``), in diff's form (``formula_text``); ``names``: a symbol's text."""
    text = LanguagePrinter(names).doprint(expr)
    try:
        return formula_text(parse_expression(text, "result"))
    except GradcliError:
        return text


# --- LaTeX of a step, in the order the text gives it ----------------------------------------------------

#: the language's functions LaTeX has a command for; the rest are \operatorname{name}
_LATEX_FUNCTIONS = {
    **{name: name for name in ("sin", "cos", "tan", "sinh", "cosh", "tanh", "exp", "log", "max", "min")},
    **{"asin": "arcsin", "acos": "arccos", "atan": "arctan", "sign": "operatorname{sgn}"},
}
_LATEX_RELATIONS = {"<": "<", "<=": r"\le", ">": ">", ">=": r"\ge", "==": "=", "!=": r"\ne"}


def latex(root: ast.SyntaxNode) -> str:
    """A syntax tree (with ``d/dx(...)`` nodes) as LaTeX, terms and factors in the tree's order."""
    done: dict[int, tuple[str, int]] = {}
    for node in ast.postorder(root):
        kids = [done.pop(id(child)) for child in node.children()]
        done[id(node)] = _latex_form(node, kids, POWERS, ATOM, PREFIX_POWER, CONDITIONAL_POWER)
    return done[id(root)][0]


def _wrapped(part: tuple[str, int], need: int) -> str:
    text, power = part
    return rf"\left({text}\right)" if power < need else text


def _latex_form(node: ast.SyntaxNode, kids: list[tuple[str, int]], powers: Any, atom: int, unary: int, cond: int):
    if isinstance(node, Pending):
        return rf"\frac{{d}}{{d {_latex_name(node.variable)}}}\left({kids[0][0]}\right)", atom
    if isinstance(node, ast.Number):
        return node.text.replace("e", r"\cdot 10^{") + "}" if "e" in node.text.lower() else node.text, atom
    if isinstance(node, ast.Name):
        return {"pi": r"\pi", "e": "e"}.get(node.id) or _latex_name(node.id), atom
    if isinstance(node, ast.Unary):
        return f"{node.op}{_wrapped(kids[0], unary + 1)}", unary
    if isinstance(node, ast.Binary):
        power = powers[node.op]
        left, right = kids
        if node.op == "/":
            return rf"\frac{{{left[0]}}}{{{right[0]}}}", atom
        if node.op == "^":  # a root or a fraction raised to a power in brackets: (\sqrt{u})^{2}
            base = _wrapped(left, atom + (left[0].startswith((r"\sqrt", r"\frac")) or "^" in left[0]))
            return f"{base}^{{{right[0]}}}", power
        symbol = {"*": r" \cdot ", "%": r" \bmod ", "@": r" \, "}.get(node.op, f" {node.op} ")
        return f"{_wrapped(left, power)}{symbol}{_wrapped(right, power + 1)}", power
    if isinstance(node, ast.Compare):
        return rf"\left[{kids[0][0]} {_LATEX_RELATIONS[node.op]} {kids[1][0]}\right]", atom
    if isinstance(node, ast.Conditional):
        then, condition, otherwise = (k[0] for k in kids)
        if isinstance(node.condition, ast.Compare):  # "if x > 0", not "if [x > 0] != 0"
            condition = condition.removeprefix(r"\left[").removesuffix(r"\right]")
        else:
            condition += r" \ne 0"
        return (
            rf"\begin{{cases}} {then} & \text{{if }} {condition} \\ {otherwise} & \text{{otherwise}} \end{{cases}}",
            atom,
        )
    if isinstance(node, ast.Call):
        args = ", ".join(k[0] for k in kids)
        name = node.function
        if name == "abs":
            return rf"\left|{args}\right|", atom
        if name == "sqrt":
            return rf"\sqrt{{{args}}}", atom
        if name in _LATEX_FUNCTIONS:
            return rf"\{_LATEX_FUNCTIONS[name]}\left({args}\right)", atom
        return rf"\operatorname{{{_latex_text_name(name)}}}\left({args}\right)", atom
    return _latex_text_name(formula_text(node)), atom


def _latex_text_name(name: str) -> str:
    return name.replace("_", r"\_")
