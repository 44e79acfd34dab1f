"""No code path evaluates user text as Python: the package is scanned for the calls that would.

The one form that runs code is ``path/to/file.py:func`` (the user's own file,
imported as pytest imports tests); the README says so, and this scan allows
exactly that one ``exec_module``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradcli.cli.app import app

PACKAGE = Path(__file__).resolve().parent.parent / "gradcli"
README = Path(__file__).resolve().parent.parent / "README.md"

#: builtins that turn text into running code
FORBIDDEN_BUILTINS = {"eval", "exec", "compile", "__import__", "breakpoint"}
#: methods that do (SymPy's sympify and parse_expr run Python's eval on a string)
FORBIDDEN_METHODS = {"sympify", "parse_expr", "lambdify", "system", "popen", "exec_module", "S"}
FORBIDDEN_MODULES = {"pickle", "marshal", "shelve"}
#: the single place allowed: importing the user's file.py for the file.py:func form
ALLOWED = {("lang/program.py", "exec_module")}


def _calls(path: Path):
    """(name, node) of every call and import that could run text as code."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id in FORBIDDEN_BUILTINS | FORBIDDEN_METHODS:
                yield f.id, node
            elif isinstance(f, ast.Attribute) and f.attr in FORBIDDEN_METHODS:
                yield f.attr, node
            if any(k.arg == "shell" for k in node.keywords):  # subprocesses: never through a shell
                yield "shell=", node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in modules:
                if module.split(".")[0] in FORBIDDEN_MODULES:
                    yield f"import {module}", node


def test_no_module_calls_eval_exec_sympify_or_parse_expr():
    found = [
        f"{path.relative_to(PACKAGE).as_posix()}:{node.lineno}: {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name, node in _calls(path)
        if (path.relative_to(PACKAGE).as_posix(), name) not in ALLOWED
    ]
    assert found == []


def test_the_scan_would_notice():
    sample = PACKAGE.parent / "tests" / "_scan_sample.py"
    sample.write_text("import pickle\nimport sympy\nsympy.sympify(text)\neval(text)\nrun(c, shell=True)\n")
    try:
        names = {name for name, _ in _calls(sample)}
    finally:
        sample.unlink()
    assert names == {"import pickle", "sympify", "eval", "shell="}


def test_the_readme_says_file_py_func_is_the_only_form_that_runs_code():
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "`path/to/file.py:func` differentiates a Python function" in text
    assert "it is the only form that runs code: expressions are parsed by gradcli's own parser" in text


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('touch /tmp/gradcli-pwned')",
        'exec(\'open("/tmp/gradcli-pwned", "w")\')',
        "x.__class__.__bases__",
        "(lambda: 1)()",
        "[c for c in ().__class__.__base__.__subclasses__()]",
        "open('/tmp/gradcli-pwned', 'w')",
    ],
)
def test_python_in_an_expression_is_a_syntax_error_and_runs_nothing(text, tmp_path):
    for command in (["eval", text, "--at", "x=1"], ["diff", text], ["check", text, "--at", "x=1"]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("error: ")
    assert not Path("/tmp/gradcli-pwned").exists()
