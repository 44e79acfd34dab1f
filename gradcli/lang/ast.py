"""The syntax tree. Every node knows where it came from (``start``, ``end`` offsets).

Trees can be very deep (``x+x+...+x`` with 500,000 terms is a left spine of
that depth), so nothing walks them recursively: ``children`` and
``postorder`` give an explicit-stack traversal everyone uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True, eq=False)
class Node:
    start: int
    end: int

    def children(self) -> tuple[Node, ...]:
        return ()

    @property
    def arity(self) -> int:
        """How many children (and so how many values evaluation pops for it)."""
        return len(self.children())


# Forms with a fixed number of children say so once (evaluation reads it for every node).
def _fixed_arity(cls: type, n: int) -> type:
    cls.arity = n  # type: ignore[attr-defined]
    return cls


@dataclass(slots=True, eq=False)
class Number(Node):
    value: float
    text: str


@dataclass(slots=True, eq=False)
class Name(Node):
    id: str


@dataclass(slots=True, eq=False)
class Unary(Node):
    op: str  # "-" or "+"
    operand: Node

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)


@dataclass(slots=True, eq=False)
class Binary(Node):
    op: str  # "+", "-", "*", "/", "@", "^" (``**`` is read as "^")
    left: Node
    right: Node
    op_start: int = 0

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(slots=True, eq=False)
class Compare(Node):
    op: str  # "<", "<=", ">", ">=", "==", "!="
    left: Node
    right: Node
    op_start: int = 0

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(slots=True, eq=False)
class Conditional(Node):
    """``then if condition else otherwise``: both sides are computed (a ``where``)."""

    then: Node
    condition: Node
    otherwise: Node

    def children(self) -> tuple[Node, ...]:
        return (self.then, self.condition, self.otherwise)


@dataclass(slots=True, eq=False)
class Call(Node):
    function: str
    args: tuple[Node, ...]
    name_end: int = 0

    def children(self) -> tuple[Node, ...]:
        return self.args


@dataclass(slots=True, eq=False)
class Slice(Node):
    """``start:stop:step`` inside brackets; a missing part is ``None``."""

    lower: Node | None
    upper: Node | None
    step: Node | None

    def children(self) -> tuple[Node, ...]:
        return tuple(p for p in (self.lower, self.upper, self.step) if p is not None)


@dataclass(slots=True, eq=False)
class Index(Node):
    target: Node
    items: tuple[Node, ...]  # expressions and Slices

    def children(self) -> tuple[Node, ...]:
        return (self.target, *self.items)


@dataclass(slots=True, eq=False)
class Vector(Node):
    """``[a, b, c]``; nested vectors make matrices."""

    items: tuple[Node, ...]

    def children(self) -> tuple[Node, ...]:
        return self.items


@dataclass(slots=True, eq=False)
class Assign(Node):
    name: str
    value: Node

    def children(self) -> tuple[Node, ...]:
        return (self.value,)


@dataclass(slots=True, eq=False)
class Outputs(Node):
    """The program's result: one expression, or several separated by commas."""

    items: tuple[Node, ...]

    def children(self) -> tuple[Node, ...]:
        return self.items


@dataclass(eq=False)
class Program:
    statements: tuple[Assign, ...]
    outputs: Outputs
    text: str = field(repr=False, default="")
    _orders: dict[int, list[Node]] = field(default_factory=dict, repr=False)

    def order(self, statement: Node) -> list[Node]:
        """``postorder(statement)``, computed once per statement."""
        cached = self._orders.get(id(statement))
        if cached is None:
            cached = self._orders[id(statement)] = postorder(statement)
        return cached

    def nodes(self) -> list[Node]:
        """Every node, children before parents, statements in order."""
        return [n for statement in (*self.statements, self.outputs) for n in self.order(statement)]


def postorder(root: Node) -> list[Node]:
    """Children before parents, left to right, without recursion.

    Two-stack order: visiting parents first with children pushed left to right
    lists each node before its subtrees, right subtree first; the reverse of
    that list is the post-order.
    """
    out: list[Node] = []
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
