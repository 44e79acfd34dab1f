"""The syntax tree. Every node knows where it came from (``start``, ``end`` offsets).

Trees can be very deep (``x+x+...+x`` with 500,000 terms is a left spine of
that depth), so nothing walks them recursively: ``children`` and
``postorder`` give an explicit-stack traversal everyone uses.
"""

from __future__ import annotations

# Plain classes with __slots__, not dataclasses: building fourteen dataclasses cost 8 ms of
# every start-up (a sixth of what gradcli adds to `import numpy`).


class SyntaxNode:
    __slots__ = ("start", "end")

    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end

    def children(self) -> tuple[SyntaxNode, ...]:
        return ()

    @property
    def arity(self) -> int:
        """How many children (and so how many values evaluation pops for it)."""
        return len(self.children())

    def fields(self) -> list[str]:
        """Its attributes, in constructor order (``start``, ``end`` first)."""
        return [n for cls in reversed(type(self).__mro__) for n in getattr(cls, "__slots__", ())]

    def spanning(self, start: int, end: int) -> SyntaxNode:
        """A copy whose span is ``start``..``end`` (a parenthesised expression's)."""
        copy = object.__new__(type(self))
        for name in self.fields():
            setattr(copy, name, getattr(self, name))
        copy.start, copy.end = start, end
        return copy

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self.fields())})"


# Forms with a fixed number of children say so once (evaluation reads it for every node).
def _fixed_arity(cls: type, n: int) -> type:
    cls.arity = n  # type: ignore[attr-defined]
    return cls


class Number(SyntaxNode):
    __slots__ = ("value", "text")

    def __init__(self, start: int, end: int, value: float, text: str) -> None:
        self.start, self.end, self.value, self.text = start, end, value, text


class Name(SyntaxNode):
    __slots__ = ("id",)

    def __init__(self, start: int, end: int, id: str) -> None:  # noqa: A002
        self.start, self.end, self.id = start, end, id


class Unary(SyntaxNode):
    __slots__ = ("op", "operand")

    def __init__(self, start: int, end: int, op: str, operand: SyntaxNode) -> None:
        self.start, self.end, self.op, self.operand = start, end, op, operand  # op: "-" or "+"

    def children(self) -> tuple[SyntaxNode, ...]:
        return (self.operand,)


class _Infix(SyntaxNode):
    """``left op right``, the operator's offset in ``op_start`` (where a caret points)."""

    __slots__ = ("op", "left", "right", "op_start")

    def __init__(self, start: int, end: int, op: str, left: SyntaxNode, right: SyntaxNode, op_start: int = 0) -> None:
        self.start, self.end, self.op, self.left, self.right, self.op_start = start, end, op, left, right, op_start

    def children(self) -> tuple[SyntaxNode, ...]:
        return (self.left, self.right)


class Binary(_Infix):
    """``op``: an infix operator's symbol in ops/operators.py: "+", "-", "*", "/", "%", "@", "^" (``**`` is read as "^")."""

    __slots__ = ()


class Compare(_Infix):
    """``op``: "<", "<=", ">", ">=", "==", "!="."""

    __slots__ = ()


class Conditional(SyntaxNode):
    """``then if condition else otherwise``: both sides are computed (a ``where``)."""

    __slots__ = ("then", "condition", "otherwise")

    def __init__(self, start: int, end: int, then: SyntaxNode, condition: SyntaxNode, otherwise: SyntaxNode) -> None:
        self.start, self.end, self.then, self.condition, self.otherwise = start, end, then, condition, otherwise

    def children(self) -> tuple[SyntaxNode, ...]:
        return (self.then, self.condition, self.otherwise)


class Call(SyntaxNode):
    __slots__ = ("function", "args", "name_end")

    def __init__(self, start: int, end: int, function: str, args: tuple[SyntaxNode, ...], name_end: int = 0) -> None:
        self.start, self.end, self.function, self.args, self.name_end = start, end, function, args, name_end

    def children(self) -> tuple[SyntaxNode, ...]:
        return self.args


class Slice(SyntaxNode):
    """``start:stop:step`` inside brackets; a missing part is ``None``."""

    __slots__ = ("lower", "upper", "step")

    def __init__(
        self, start: int, end: int, lower: SyntaxNode | None, upper: SyntaxNode | None, step: SyntaxNode | None
    ) -> None:
        self.start, self.end, self.lower, self.upper, self.step = start, end, lower, upper, step

    def children(self) -> tuple[SyntaxNode, ...]:
        return tuple(p for p in (self.lower, self.upper, self.step) if p is not None)


class Index(SyntaxNode):
    __slots__ = ("target", "items")  # items: expressions and Slices

    def __init__(self, start: int, end: int, target: SyntaxNode, items: tuple[SyntaxNode, ...]) -> None:
        self.start, self.end, self.target, self.items = start, end, target, items

    def children(self) -> tuple[SyntaxNode, ...]:
        return (self.target, *self.items)


class Vector(SyntaxNode):
    """``[a, b, c]``; nested vectors make matrices."""

    __slots__ = ("items",)

    def __init__(self, start: int, end: int, items: tuple[SyntaxNode, ...]) -> None:
        self.start, self.end, self.items = start, end, items

    def children(self) -> tuple[SyntaxNode, ...]:
        return self.items


class Assign(SyntaxNode):
    __slots__ = ("name", "value")

    def __init__(self, start: int, end: int, name: str, value: SyntaxNode) -> None:
        self.start, self.end, self.name, self.value = start, end, name, value

    def children(self) -> tuple[SyntaxNode, ...]:
        return (self.value,)


class Outputs(SyntaxNode):
    """The program's result: one expression, or several separated by commas."""

    __slots__ = ("items",)

    def __init__(self, start: int, end: int, items: tuple[SyntaxNode, ...]) -> None:
        self.start, self.end, self.items = start, end, items

    def children(self) -> tuple[SyntaxNode, ...]:
        return self.items


class SyntaxTree:
    def __init__(self, statements: tuple[Assign, ...], outputs: Outputs, text: str = "") -> None:
        self.statements, self.outputs, self.text = statements, outputs, text
        self._orders: dict[int, list[SyntaxNode]] = {}

    def __repr__(self) -> str:
        return f"SyntaxTree(statements={self.statements!r}, outputs={self.outputs!r})"

    def order(self, statement: SyntaxNode) -> list[SyntaxNode]:
        """``postorder(statement)``, computed once per statement."""
        cached = self._orders.get(id(statement))
        if cached is None:
            cached = self._orders[id(statement)] = postorder(statement)
        return cached

    def nodes(self) -> list[SyntaxNode]:
        """Every node, children before parents, statements in order."""
        return [n for statement in (*self.statements, self.outputs) for n in self.order(statement)]


def postorder(root: SyntaxNode) -> list[SyntaxNode]:
    """Children before parents, left to right, without recursion.

    Two-stack order: visiting parents first with children pushed left to right
    lists each node before its subtrees, right subtree first; the reverse of
    that list is the post-order.
    """
    out: list[SyntaxNode] = []
    stack = [root]
    pop, append, extend = stack.pop, out.append, stack.extend
    while stack:
        node = pop()
        append(node)
        extend(node.children())
    out.reverse()
    return out


for _cls, _n in ((Number, 0), (Name, 0), (Unary, 1), (Binary, 2), (Compare, 2), (Conditional, 3)):
    _fixed_arity(_cls, _n)
