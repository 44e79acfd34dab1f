"""Short functions (DESIGN principle 12, issue 14): no function in gradcli/ over 80 lines or over
complexity 25 (McCabe's, as ruff's C901 counts it; pyproject.toml has ruff enforce the same limit).

Ruff is used when it is installed; otherwise the same count is made from the syntax tree: 1 for
the function, plus 1 for each if/elif, loop, except, with, assert, comprehension clause, boolean
operator's extra operand and match case (what mccabe counts, close enough to catch a function that
grows past the limit). Nested functions count on their own, as ruff counts them.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gradcli"
MAX_LINES = 80
MAX_COMPLEXITY = 25

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [node for node in ast.walk(tree) if isinstance(node, _FUNCTIONS)]


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """McCabe's count as ruff's C901 makes it: statements only (an ``x if c else y`` or ``and`` adds
    nothing), a nested function or class method adding itself and its own branches."""
    return 1 + _branches(function.body)


def _branches(body: list[ast.stmt]) -> int:
    count = 0
    for node in body:
        if isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While)):
            count += 1  # an elif is an If inside orelse: counted there
        elif isinstance(node, ast.Try) or (sys.version_info >= (3, 11) and isinstance(node, ast.TryStar)):
            count += len(node.handlers) + bool(node.orelse)
        elif isinstance(node, _FUNCTIONS):
            count += 1
        elif sys.version_info >= (3, 10) and isinstance(node, ast.Match):
            count += sum(not _wildcard(case) for case in node.cases)
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(node, field, None) or []
            for child in children:
                if isinstance(child, (ast.ExceptHandler, ast.match_case)):
                    count += _branches(child.body)
            count += _branches([c for c in children if isinstance(c, ast.stmt)])
    return count


def _wildcard(case: ast.match_case) -> bool:
    return isinstance(case.pattern, ast.MatchAs) and case.pattern.pattern is None and case.guard is None


def test_no_function_is_longer_than_80_lines():
    long = [
        f"{path.relative_to(PACKAGE.parent)}:{f.lineno} {f.name} ({f.end_lineno - f.lineno + 1} lines)"
        for path in _sources()
        for f in _functions(path)
        if f.end_lineno - f.lineno + 1 > MAX_LINES
    ]
    assert not long, "functions over 80 lines (split them into steps):\n" + "\n".join(long)


def _ruff() -> list[str] | None:
    exe = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(exe).exists():
        return None
    done = subprocess.run(
        [exe, "check", "--isolated", "--select", "C901", "--config", f"lint.mccabe.max-complexity={MAX_COMPLEXITY}",
         "--output-format", "json", str(PACKAGE)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode not in (0, 1):
        return None
    return [f"{Path(d['filename']).relative_to(PACKAGE.parent)}:{d['location']['row']} {d['message']}"
            for d in json.loads(done.stdout or "[]")]  # fmt: skip


def test_no_function_is_more_complex_than_25_by_ruff():
    found = _ruff()
    if found is None:
        pytest.skip("ruff is not installed: the syntax-tree count below still runs")
    assert not found, "functions over complexity 25 (split them into steps):\n" + "\n".join(found)


def test_no_function_is_more_complex_than_25_by_the_syntax_tree():
    complex_ = [
        f"{path.relative_to(PACKAGE.parent)}:{f.lineno} {f.name} ({complexity(f)})"
        for path in _sources()
        for f in _functions(path)
        if complexity(f) > MAX_COMPLEXITY
    ]
    assert not complex_, "functions over complexity 25 (split them into steps):\n" + "\n".join(complex_)


def test_the_counts_catch_what_they_should():
    branches = "\n".join(f"    if x == {i}:\n        x += 1" for i in range(MAX_COMPLEXITY))
    (function,) = _functions_of(f"def f(x):\n{branches}\n    return x\n")
    assert complexity(function) == MAX_COMPLEXITY + 1
    source = """
def g(a, b):
    for v in a:
        if v and b or not v:
            return [w for w in b if w]
        elif v:
            pass
    try:
        pass
    except ValueError:
        pass
    else:
        pass
    def h():
        while a:
            pass
    return 1 if a else 2
"""
    g = _functions_of(source)[0]
    assert complexity(g) == 1 + 1 + 2 + 2 + 2  # for, if + elif, except + else, def h with its while


def _functions_of(source: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(ast.parse(source)) if isinstance(n, _FUNCTIONS)]
