"""Tokens -> syntax tree: a Pratt parser with SPEC's precedence (the operator table in
ops/operators.py holds every operator's power and associativity), loosest first:

    a if c else b           conditional (right-associative)
    < <= > >= == !=         comparisons (0/1, not chained)
    + -                     sums
    * / % @                 products (% the remainder, with the sign of the divisor)
    - +                     unary sign: -x^2 is -(x^2)
    ^ **                    power, right-associative: 2^3^2 is 512
    f(...) x[...] x.T       calls, indexing and the transpose

Nesting is bounded (``MAX_DEPTH``) so that no input can exhaust Python's
stack; chains of the same operator (``x+x+...``) are read in a loop and cost
no depth at all. Length is bounded by what it costs (lexer.py's ``check_size``):
megabytes of generated code are read in linear time.
"""

from __future__ import annotations

from ..errors import Source, SyntaxProblem
from ..ops.operators import COMPARE_POWER, COMPARISONS, CONDITIONAL_POWER, INFIX, POSTFIX_POWER, PREFIX, PREFIX_POWER
from . import ast
from .functions import FUNCTIONS
from .lexer import MAX_CHARACTERS, Token, check_size, tokenize

__all__ = ["MAX_CHARACTERS", "check_size", "parse", "parse_expression"]

MAX_DEPTH = 200

# Every operator's facts come from the operator table (ops/operators.py).
BINARY = {spelling: row.power for spelling, row in INFIX.items()}
CANONICAL = {spelling: row.symbol for spelling, row in INFIX.items()}  # "**" is read as "^"
RIGHT = frozenset(spelling for spelling, row in INFIX.items() if row.right)
COMPARE = frozenset(COMPARISONS)
SIGNS = frozenset(PREFIX)
UNARY_POWER = PREFIX_POWER  # below "^": the operand of a sign takes in a power


def parse(text: str, origin: str = "expression") -> ast.SyntaxTree:
    """Read a program: statements separated by ``;`` or new lines, the last one the output."""
    source = Source(text, origin)
    return Parser(source, tokenize(source)).program()


def parse_expression(text: str, origin: str = "value") -> ast.SyntaxNode:
    """Read one expression (a ``--at`` value, an ``--expect`` formula)."""
    program = parse(text, origin)
    if program.statements or len(program.outputs.items) != 1:
        raise SyntaxProblem("expected a single expression", Source(text, origin), 0)
    return program.outputs.items[0]


class Parser:
    def __init__(self, source: Source, tokens: list[Token]) -> None:
        self.source = source
        self.tokens = tokens
        self.pos = 0
        self.depth = 0

    # --- tokens ----------------------------------------------------------------------------

    @property
    def token(self) -> Token:
        return self.tokens[self.pos]

    def advance(self) -> Token:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def at(self, kind: str, text: str | None = None) -> bool:
        token = self.tokens[self.pos]
        return token.kind == kind and (text is None or token.text == text)

    def at_op(self, text: str) -> bool:
        return self.at("op", text)

    def error(self, message: str, offset: int | None = None) -> SyntaxProblem:
        return SyntaxProblem(message, self.source, self.token.offset if offset is None else offset)

    def describe(self, token: Token) -> str:
        if token.kind == "end":
            return "the end of the expression"
        if token.kind == "newline":
            return "the end of the line"
        return f"'{token.text}'"

    def expect(self, text: str, context: str) -> Token:
        if not self.at_op(text):
            raise self.error(f"expected '{text}' {context}, found {self.describe(self.token)} at {self.where()}")
        return self.advance()

    def where(self, offset: int | None = None) -> str:
        return self.source.where(self.token.offset if offset is None else offset)

    # --- statements -------------------------------------------------------------------------------

    def program(self) -> ast.SyntaxTree:
        statements: list[ast.SyntaxNode] = []
        while True:
            while self.at("newline") or self.at_op(";"):
                self.advance()
            if self.at("end"):
                break
            statements.append(self.statement())
            if not (self.at("newline") or self.at_op(";") or self.at("end")):
                raise self.unexpected()
        if not statements:
            raise self.error("empty expression: nothing to compute", 0)
        *body, last = statements
        for statement in body:
            if isinstance(statement, ast.Outputs):
                raise SyntaxProblem(
                    "only the last statement can be a bare expression; give this one a name (n = ...)",
                    self.source,
                    statement.start,
                )
        if isinstance(last, ast.Assign):  # "a = ...; y = a * b": y is the output
            outputs = ast.Outputs(last.start, last.end, (ast.Name(last.start, last.start + len(last.name), last.name),))
            body.append(last)
        else:
            outputs = last
        return ast.SyntaxTree(tuple(body), outputs, self.source.text)

    def statement(self) -> ast.SyntaxNode:
        token = self.token
        if token.kind == "name" and self.tokens[self.pos + 1].kind == "op" and self.tokens[self.pos + 1].text == "=":
            self.advance()
            self.advance()
            value = self.expression()
            if self.at_op(","):
                raise self.error("a name is given one value; several outputs go in the last statement")
            return ast.Assign(token.offset, value.end, token.text, value)
        items = [self.expression()]
        while self.at_op(","):
            self.advance()
            items.append(self.expression())
        return ast.Outputs(items[0].start, items[-1].end, tuple(items))

    def unexpected(self) -> SyntaxProblem:
        token = self.token
        previous = self.tokens[self.pos - 1] if self.pos else None
        starts_value = token.kind in ("name", "number") or (token.kind == "op" and token.text in ("(", "["))
        ends_value = previous is not None and (previous.kind in ("name", "number") or previous.text in (")", "]"))
        name_then_value = previous is not None and previous.kind == "name" and token.kind in ("name", "number")
        if starts_value and ends_value and name_then_value and previous.text in FUNCTIONS:  # sin x: no parentheses
            return self.error(
                f"missing parentheses after {previous.text} at {self.where()}; "
                f"did you mean {previous.text}({token.text})?"
            )
        if starts_value and ends_value:
            return self.error(
                f"missing operator before {self.describe(token)} at {self.where()} "
                f"(write {previous.text}*{token.text} for a product)"
            )
        if token.kind == "op" and token.text == "=":
            return self.error(f"'=' at {self.where()} assigns a name; compare with '=='")
        return self.error(f"unexpected {self.describe(token)} at {self.where()}")

    # --- expressions ---------------------------------------------------------------------------

    def expression(self, power: int = 0) -> ast.SyntaxNode:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"expression nested too deeply (more than {MAX_DEPTH} levels) at {self.where()}")
        left = self.prefix()
        tokens = self.tokens
        while True:
            kind, op, _ = tokens[self.pos]
            if kind == "op":
                bp = BINARY.get(op)
                if bp is not None:
                    if bp <= power:
                        break
                    left = self.binary(left)
                elif op in COMPARE:
                    if power >= COMPARE_POWER:
                        break
                    left = self.compare(left)
                elif op == "(" or op == "[" or op == ".":
                    if power >= POSTFIX_POWER:
                        break
                    left = self.postfix(left)
                else:
                    break
            elif kind == "keyword" and op == "if" and power < CONDITIONAL_POWER:
                left = self.conditional(left)
            else:
                break
        self.depth -= 1
        return left

    def operand(self, power: int, after: Token) -> ast.SyntaxNode:
        if self.at("end") or self.at("newline") or (self.at("op") and self.token.text in (")", "]", ",", ";", ":")):
            raise self.error(f"expected a value after '{after.text}' at {self.where(after.offset)}")
        return self.expression(power)

    def prefix(self) -> ast.SyntaxNode:
        token = self.token
        if token.kind == "number":
            self.advance()
            return ast.Number(token.offset, token.end, float(token.text), token.text)
        if token.kind == "name":
            self.advance()
            return ast.Name(token.offset, token.end, token.text)
        if token.kind == "op":
            if token.text in SIGNS:
                self.advance()
                operand = self.operand(UNARY_POWER, token)
                return ast.Unary(token.offset, operand.end, token.text, operand)
            if token.text == "(":
                self.advance()
                inner = self.expression()
                close = self.expect(")", f"to close '(' at {self.where(token.offset)}")
                return _with_span(inner, token.offset, close.end)
            if token.text == "[":
                return self.vector()
        if token.kind == "end":
            raise self.error("unexpected end of the expression; expected a value")
        raise self.error(f"expected a value at {self.where()}, found {self.describe(token)}")

    def binary(self, left: ast.SyntaxNode) -> ast.SyntaxNode:
        token = self.advance()
        op = CANONICAL[token.text]
        power = BINARY[token.text]
        right_power = power - 1 if token.text in RIGHT else power  # "^" is right-associative
        # A bare name or number followed by nothing that binds tighter (x + x + ...) is the
        # whole right operand: read it here instead of recursing (long sums parse 2x faster).
        tokens, pos = self.tokens, self.pos
        kind, text, offset = tokens[pos]
        if kind == "name" or kind == "number":
            after_kind, after_text, _ = tokens[pos + 1]
            if (
                after_kind == "end"
                or after_kind == "newline"
                or after_kind == "keyword"
                or (
                    after_kind == "op"
                    and after_text != "("
                    and after_text != "["
                    and after_text != "."
                    and BINARY.get(after_text, 0) <= right_power
                )
            ):
                self.pos = pos + 1
                end = offset + len(text)
                if kind == "name":
                    right: ast.SyntaxNode = ast.Name(offset, end, text)
                else:
                    right = ast.Number(offset, end, float(text), text)
                return ast.Binary(left.start, end, op, left, right, token.offset)
        right = self.operand(right_power, token)
        return ast.Binary(left.start, right.end, op, left, right, token.offset)

    def compare(self, left: ast.SyntaxNode) -> ast.SyntaxNode:
        token = self.advance()
        right = self.operand(COMPARE_POWER, token)
        if self.at("op") and self.token.text in COMPARE:
            raise self.error(f"comparisons cannot be chained (at {self.where()}); multiply them: (a < b) * (b < c)")
        return ast.Compare(left.start, right.end, token.text, left, right, token.offset)

    def conditional(self, then: ast.SyntaxNode) -> ast.SyntaxNode:
        token = self.advance()  # "if"
        condition = self.operand(CONDITIONAL_POWER, token)
        if not self.at("keyword", "else"):
            raise self.error(f"expected 'else' to complete 'if' at {self.where(token.offset)}")
        otherwise_token = self.advance()
        otherwise = self.operand(CONDITIONAL_POWER - 1, otherwise_token)
        return ast.Conditional(then.start, otherwise.end, then, condition, otherwise)

    def postfix(self, target: ast.SyntaxNode) -> ast.SyntaxNode:
        named = self.tokens[self.pos - 1].kind == "name"  # "f(" and not "(f)(" or "x[0]("
        token = self.advance()
        if token.text == ".":  # x.T, the only attribute: the transpose, read as transpose(x)
            attribute = self.token
            if attribute.kind != "name" or attribute.text != "T":
                raise self.error(f"expected 'T' after '.' at {self.where(token.offset)} (x.T is the transpose)")
            self.advance()
            return ast.Call(target.start, attribute.end, "transpose", (target,), target.start)
        if token.text == "(":
            if not (named and isinstance(target, ast.Name)):
                raise self.error("only functions can be called: put an operator before '('", token.offset)
            args = self.items(")", token, allow_slices=False)
            close = self.advance()
            return ast.Call(target.start, close.end, target.id, tuple(args), target.end)
        items = self.items("]", token, allow_slices=True)
        if not items:
            raise self.error("an index is needed between '[' and ']'", token.offset)
        close = self.advance()
        return ast.Index(target.start, close.end, target, tuple(items))

    def items(self, close: str, opener: Token, allow_slices: bool) -> list[ast.SyntaxNode]:
        """Comma-separated items up to (not including) ``close``."""
        items: list[ast.SyntaxNode] = []
        while not self.at_op(close):
            items.append(self.slice_or_expression() if allow_slices else self.expression())
            if self.at_op(","):
                self.advance()
                continue
            if not self.at_op(close):
                if self.at("op") and self.token.text in (")", "]") or self.at("end"):
                    raise self.error(f"expected '{close}' to close '{opener.text}' at {self.where(opener.offset)}")
                raise self.unexpected()
        return items

    def slice_or_expression(self) -> ast.SyntaxNode:
        start = self.token.offset
        parts: list[ast.SyntaxNode | None] = []
        current: ast.SyntaxNode | None = None
        if not (self.at_op(":")):
            current = self.expression()
        if not self.at_op(":"):
            assert current is not None
            return current
        parts.append(current)
        while self.at_op(":") and len(parts) < 3:
            self.advance()
            if self.at("op") and self.token.text in (":", ",", "]"):
                parts.append(None)
            else:
                parts.append(self.expression())
        if self.at_op(":"):
            raise self.error("a slice has at most three parts, start:stop:step")
        lower, upper, step = (parts + [None, None])[:3]
        return ast.Slice(start, self.tokens[self.pos - 1].end, lower, upper, step)

    def vector(self) -> ast.SyntaxNode:
        opener = self.advance()  # its items are expressions: each level of brackets counts once there
        items = self.items("]", opener, allow_slices=False)
        close = self.advance()
        if not items:
            raise self.error("an empty vector [] has no values", opener.offset)
        return ast.Vector(opener.offset, close.end, tuple(items))


def _with_span(node: ast.SyntaxNode, start: int, end: int) -> ast.SyntaxNode:
    """The node, its span widened to its parentheses (for messages that point at it)."""
    return node.spanning(start, end)
