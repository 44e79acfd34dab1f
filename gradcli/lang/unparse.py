"""Syntax tree -> canonical text, with only the parentheses precedence needs.

``parse(unparse(tree))`` gives back the same tree (tested); graph views use it
to label nodes (``a = x + w``).
"""

from __future__ import annotations

from ..ops.operators import COMPARE_POWER, CONDITIONAL_POWER, INFIX, PREFIX_POWER
from . import ast

# how tightly each form binds (higher: tighter): the operator table's powers
POWERS = {row.symbol: row.power for row in INFIX.values()}
_RIGHT = frozenset(row.symbol for row in INFIX.values() if row.right)
_COMPARE = COMPARE_POWER
_CONDITIONAL = CONDITIONAL_POWER
_UNARY = PREFIX_POWER
ATOM = 100
#: the operators ``diff`` writes without spaces (SymPy's ``str`` form, which its printer keeps):
#: ``2*x*sin(x) + x^2/2``; the derivation of ``diff --steps`` is written in the same form
TIGHT = frozenset({"*", "/"})


def unparse(root: ast.SyntaxNode | ast.SyntaxTree, tight: frozenset[str] = frozenset()) -> str:
    """The text of a node (or a whole program, statements joined by '; '); the operators in ``tight``
    written without spaces around them (``TIGHT``: diff's form of a formula)."""
    if isinstance(root, ast.SyntaxTree):
        parts = [f"{s.name} = {unparse(s.value, tight)}" for s in root.statements]
        outputs = root.outputs.items
        last = ", ".join(unparse(item, tight) for item in outputs)
        named_last = root.statements and len(outputs) == 1 and isinstance(outputs[0], ast.Name)
        if named_last and outputs[0].id == root.statements[-1].name:
            return "; ".join(parts)
        return "; ".join([*parts, last])
    done: dict[int, tuple[str, int]] = {}
    for node in ast.postorder(root):
        kids = [done.pop(id(child)) for child in node.children()]
        done[id(node)] = _form(node, kids, tight)
    return done[id(root)][0]


def _wrap(part: tuple[str, int], need: int) -> str:
    text, power = part
    return f"({text})" if power < need else text


def _form(node: ast.SyntaxNode, kids: list[tuple[str, int]], tight: frozenset[str] = frozenset()) -> tuple[str, int]:
    if isinstance(node, ast.Number):
        return node.text, ATOM
    if isinstance(node, ast.Name):
        return node.id, ATOM
    if isinstance(node, ast.Unary):
        # the operand of a sign takes in a power (-x^2), nothing looser
        return f"{node.op}{_wrap(kids[0], _UNARY)}", _UNARY
    if isinstance(node, ast.Binary):
        power = POWERS[node.op]
        if node.op in _RIGHT:  # "^": right-associative; its left side is an atom or a call; written tight: x^2
            return f"{_wrap(kids[0], ATOM)}{node.op}{_wrap(kids[1], _UNARY)}", power
        left, right = _wrap(kids[0], power), _wrap(kids[1], power + 1)
        return (f"{left}{node.op}{right}" if node.op in tight else f"{left} {node.op} {right}"), power
    if isinstance(node, ast.Compare):
        return f"{_wrap(kids[0], _COMPARE + 1)} {node.op} {_wrap(kids[1], _COMPARE + 1)}", _COMPARE
    if isinstance(node, ast.Conditional):
        then, condition, otherwise = kids
        return (
            f"{_wrap(then, _CONDITIONAL + 1)} if {_wrap(condition, _CONDITIONAL + 1)} else {_wrap(otherwise, _CONDITIONAL)}",
            _CONDITIONAL,
        )
    if isinstance(node, ast.Call):
        return f"{node.function}({', '.join(k[0] for k in kids)})", ATOM
    if isinstance(node, ast.Slice):
        parts = iter(k[0] for k in kids)
        texts = ["" if p is None else next(parts) for p in (node.lower, node.upper, node.step)]
        text = ":".join(texts[:2]) + (f":{texts[2]}" if node.step is not None else "")
        return text, ATOM
    if isinstance(node, ast.Index):
        target, *items = kids
        return f"{_wrap(target, ATOM)}[{', '.join(i[0] for i in items)}]", ATOM
    if isinstance(node, ast.Vector):
        return f"[{', '.join(k[0] for k in kids)}]", ATOM
    if isinstance(node, (ast.Outputs,)):
        return ", ".join(k[0] for k in kids), 0
    if isinstance(node, ast.Assign):
        return f"{node.name} = {kids[0][0]}", 0
    raise TypeError(f"cannot unparse {type(node).__name__}")
