"""The expression language: precedence, associativity, errors with carets, round-trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradcli.errors import GradcliError, SyntaxProblem
from gradcli.lang import ast
from gradcli.lang.parser import MAX_DEPTH, parse
from gradcli.lang.unparse import unparse


def sexpr(node: ast.SyntaxNode) -> str:
    """A fully parenthesised form, to state the tree a text parses to."""
    done: dict[int, str] = {}
    for n in ast.postorder(node):
        k = [done.pop(id(c)) for c in n.children()]
        if isinstance(n, ast.Number):
            s = n.text
        elif isinstance(n, ast.Name):
            s = n.id
        elif isinstance(n, ast.Unary):
            s = f"({n.op} {k[0]})"
        elif isinstance(n, (ast.Binary, ast.Compare)):
            s = f"({n.op} {k[0]} {k[1]})"
        elif isinstance(n, ast.Conditional):
            s = f"(if {k[1]} {k[0]} {k[2]})"
        elif isinstance(n, ast.Call):
            s = f"({n.function} {' '.join(k)})"
        elif isinstance(n, ast.Index):
            s = f"([] {' '.join(k)})"
        elif isinstance(n, ast.Slice):
            parts = iter(k)
            texts = ["" if p is None else next(parts) for p in (n.lower, n.upper, n.step)]
            s = ":".join(texts[:2]) + (f":{texts[2]}" if n.step is not None else "")
        elif isinstance(n, ast.Vector):
            s = f"[{' '.join(k)}]"
        else:
            s = ", ".join(k)
        done[id(n)] = s
    return done[id(node)]


def tree(text: str) -> str:
    program = parse(text)
    return "; ".join([*(f"{s.name}={sexpr(s.value)}" for s in program.statements), sexpr(program.outputs)])


@pytest.mark.parametrize(
    "text,expected",
    [
        ("-x^2", "(- (^ x 2))"),  # power binds tighter than the sign on its left
        ("2^3^2", "(^ 2 (^ 3 2))"),  # right-associative
        ("2**3**2", "(^ 2 (^ 3 2))"),
        ("x^-2", "(^ x (- 2))"),
        ("-2^2", "(- (^ 2 2))"),
        ("e^-x^2", "(^ e (- (^ x 2)))"),
        ("1 - 2 - 3", "(- (- 1 2) 3)"),  # left-associative
        ("8 / 4 / 2", "(/ (/ 8 4) 2)"),
        ("a + b * c", "(+ a (* b c))"),
        ("(a + b) * c", "(* (+ a b) c)"),
        ("a * b @ c", "(@ (* a b) c)"),
        ("a + b < c * d", "(< (+ a b) (* c d))"),
        ("x if x > 0 else -x", "(if (> x 0) x (- x))"),
        ("a if c else b if d else e", "(if c a (if d b e))"),
        ("-x * y", "(* (- x) y)"),
        ("sin(x)^2", "(^ (sin x) 2)"),
        ("log(x, 2)", "(log x 2)"),
        ("x[0]", "([] x 0)"),
        ("x[1:]", "([] x 1:)"),
        ("x[:-1]", "([] x :(- 1))"),
        ("x[::2]", "([] x ::2)"),
        ("A[0, :]", "([] A 0 :)"),
        ("[[1, 2], [3, 4]]", "[[1 2] [3 4]]"),
        (".5 + 1e-3", "(+ .5 1e-3)"),
        ("θ * φ_2", "(* θ φ_2)"),
        ("f1, f2", "f1, f2"),
        ("a = x + w; b = w + 1; y = a * b", "a=(+ x w); b=(+ w 1); y=(* a b); y"),
        ("a = x + w\nb = w + 1  # comment\na * b", "a=(+ x w); b=(+ w 1); (* a b)"),
        ("(x\n + 1)", "(+ x 1)"),  # new lines inside brackets do not end a statement
    ],
)
def test_precedence_and_associativity(text, expected):
    assert tree(text) == expected


ERRORS = [
    # (input, message, column of the caret)
    ("sin((x + 1)", "expected ')' to close '(' at column 4", 12),
    ("(x + 1", "expected ')' to close '(' at column 1", 7),
    ("[1, 2", "expected ']' to close '[' at column 1", 6),
    ("x + )", "unmatched ')' at column 5", 5),
    ("(x]", "']' does not close '(' at column 1; expected ')'", 3),
    ("x $ 2", "unexpected character '$' at column 3", 3),
    ("x +", "expected a value after '+' at column 3", 4),
    ("2x", "missing operator before 'x' at column 2 (write 2*x for a product)", 2),
    ("x y", "missing operator before 'y' at column 3 (write x*y for a product)", 3),
    ("(x)(2)", "only functions can be called: put an operator before '('", 4),
    ("a < b < c", "comparisons cannot be chained (at column 7); multiply them: (a < b) * (b < c)", 7),
    ("x = 1, 2", "a name is given one value; several outputs go in the last statement", 6),
    ("", "empty expression: nothing to compute", 1),
    ("  # only a comment", "empty expression: nothing to compute", 1),
    ("x[]", "an index is needed between '[' and ']'", 2),
    ("[]", "an empty vector [] has no values", 1),
    ("x if y", "expected 'else' to complete 'if' at column 3", 7),
    ("x = 3 = 4", "'=' at column 7 assigns a name; compare with '=='", 7),
    ("x + 1; y + 2", "only the last statement can be a bare expression; give this one a name (n = ...)", 1),
    ("x[1:2:3:4]", "a slice has at most three parts, start:stop:step", 8),
    ("sin(,x)", "expected a value at column 5, found ','", 5),
    ("*x", "expected a value at column 1, found '*'", 1),
]


@pytest.mark.parametrize("text,message,column", ERRORS)
def test_syntax_errors_name_the_problem_and_point_at_it(text, message, column):
    with pytest.raises(SyntaxProblem) as caught:
        parse(text)
    problem = caught.value
    assert problem.message == message
    assert problem.column == column
    lines = problem.render().splitlines()
    assert lines[0] == f"error: {message}"
    assert lines[1] == f"  {text}"
    assert lines[2] == " " * (2 + column - 1) + "^"


def test_caret_is_under_the_column_in_the_rendered_message():
    with pytest.raises(SyntaxProblem) as caught:
        parse("sin((x + 1)")
    assert caught.value.render() == "error: expected ')' to close '(' at column 4\n  sin((x + 1)\n             ^"


def test_errors_in_a_program_of_several_lines_name_the_line():
    with pytest.raises(SyntaxProblem) as caught:
        parse("a = x + 1\nb = a *\nb")
    assert caught.value.message == "expected a value after '*' at line 2, column 7"
    assert caught.value.render().splitlines()[1:] == ["  line 2: b = a *", "                 ^"]


def test_long_lines_are_cut_around_the_caret():
    text = "x + " * 100 + "$" + " + x" * 100
    with pytest.raises(SyntaxProblem) as caught:
        parse(text)
    shown, caret = caught.value.render().splitlines()[1:]
    assert len(shown) < 100 and shown.startswith("  ...") and shown.endswith("...")
    assert shown[caret.index("^")] == "$"


def test_nesting_is_bounded_with_a_message_not_a_crash():
    with pytest.raises(SyntaxProblem, match=f"nested too deeply \\(more than {MAX_DEPTH} levels\\)"):
        parse("(" * 10_000 + "x" + ")" * 10_000)
    with pytest.raises(SyntaxProblem, match="nested too deeply"):
        parse("-" * 10_000 + "x")
    with pytest.raises(SyntaxProblem, match="nested too deeply"):
        parse("x" + "^x" * 10_000)
    assert tree("(" * 150 + "x" + ")" * 150) == "x"


def test_half_a_million_characters_of_a_sum_parse():  # issue 27: a million and more (test_r27_limits)
    text = "+".join(["x"] * 250_000)
    program = parse(text)
    assert len(text) == 499_999
    assert sum(1 for n in program.nodes() if isinstance(n, ast.Name)) == 250_000


@pytest.mark.parametrize(
    "text",
    [
        "-x^2",
        "(-x)^2",
        "2^3^2",
        "(2^3)^2",
        "a - (b - c)",
        "(a - b) - c",
        "a / (b * c)",
        "x^-2",
        "--x",
        "-(x + y)",
        "a * -b",
        "x if a < b else y if c else z",
        "(x if a else b) + 1",
        "sin(x)^2 + cos(x)^2",
        "x[1:] @ y[:-1]",
        "A[0, ::2]",
        "[[1, 2], [3, x]]",
        "log(x, 2)",
        "a = x + w; b = w + 1; y = a * b",
        "f1, f2",
    ],
)
def test_unparse_round_trips(text):
    assert tree(unparse(parse(text))) == tree(text)


_atoms = st.sampled_from(["x", "y", "2", "0.5", "pi"])


def _combine(children):
    unary = st.builds(lambda a: f"-{a}", children)
    binary = st.builds(lambda a, op, b: f"{a} {op} {b}", children, st.sampled_from("+-*/^"), children)
    call = st.builds(lambda f, a: f"{f}({a})", st.sampled_from(["sin", "exp", "abs"]), children)
    paren = st.builds(lambda a: f"({a})", children)
    return unary | binary | call | paren


@given(st.recursive(_atoms, _combine, max_leaves=12))
def test_random_expressions_round_trip(text):
    try:
        original = tree(text)
    except GradcliError:
        return
    assert tree(unparse(parse(text))) == original
