"""Issue 27: ``pytest`` printed 990 skips and no reason. Every skip in the suite says why, and the
suite's own options print the reasons (``-rs``), so the README's test command shows them."""

from __future__ import annotations

import ast
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli", reason="reading pyproject.toml on Python 3.10 needs tomli")


def _name(node: ast.expr) -> str:
    """``pytest.mark.skipif`` for the call's function, as written."""
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _is_text(node: ast.expr) -> bool:
    """A reason that says something: a non-empty string, or text made at run time (a name, an f-string)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and bool(node.value.strip())
    return not isinstance(node, ast.Constant)


def _silent_skips(source: str, filename: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func).removeprefix("pytest.")
        keywords = {k.arg: k.value for k in node.keywords}
        if name == "importorskip" or name.endswith("mark.skipif") or name.endswith("mark.xfail"):
            ok = "reason" in keywords and _is_text(keywords["reason"])
        elif name in ("skip", "mark.skip", "xfail"):
            said = node.args[0] if node.args else keywords.get("reason", keywords.get("msg"))
            ok = said is not None and _is_text(said)
        else:
            continue
        if not ok:
            found.append(f"{filename}:{node.lineno}: {name}")
    return found


def test_every_skip_in_the_suite_says_why():
    silent = []
    for path in sorted(TESTS.rglob("*.py")):
        silent += _silent_skips(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert silent == []


def test_the_check_finds_a_silent_skip():
    source = (
        "import pytest\n"
        "torch = pytest.importorskip('torch')\n"
        "pytest.importorskip('numpy', reason='')\n"
        "@pytest.mark.skipif(True)\ndef f(): pytest.skip()\n"
        "pytest.importorskip('numpy', reason='numpy is missing')\n"
        "pytest.skip('an array expression')\n"
    )
    assert _silent_skips(source, "t.py") == [
        "t.py:2: importorskip",
        "t.py:3: importorskip",
        "t.py:4: mark.skipif",
        "t.py:5: skip",
    ]


def test_the_suite_prints_the_skip_reasons():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    flags = shlex.split(options["addopts"])
    assert any(f.startswith("-r") and "s" in f[2:] for f in flags), flags
