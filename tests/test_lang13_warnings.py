"""Issue 13: Python warnings from the SymPy paths leaked as raw, many-line Python text (a
12-line SymPyDeprecationWarning for ``ne(4,0) + x``, NumPy overflow warnings citing
lang/symbolic.py). They are caught and said as one ``warning:`` line."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli.lang.symbolic as symbolic
from gradcli.cli.app import app

runner = CliRunner()


@pytest.mark.parametrize("expr", ["ne(4,0) + x", "eq(x, x) * x + ge(2, 1)", "lt(1, 2) * x"])
def test_comparison_functions_raise_no_sympy_deprecation(expr):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = runner.invoke(app, ["diff", "--json", expr])
        assert result.exit_code == 0, result.output
        assert result.stderr == ""
        result = runner.invoke(app, ["check", "--json", expr, "--at", "x=0.5"])
        assert result.exit_code == 0, result.output
        assert result.stderr == ""


def _noisy(monkeypatch):
    """SymPy's translation warns as SymPy and NumPy do: a deprecation, and an overflow."""
    from sympy.utilities.exceptions import SymPyDeprecationWarning

    original = symbolic.to_sympy

    def to_sympy(*args, **kwargs):
        warnings.warn(
            SymPyDeprecationWarning(
                message="\nUsing non-Expr arguments in Add is deprecated (in this case, one of\nthe arguments "
                "has type 'BooleanTrue').\n\nIf you really did intend to use a multiplication...",
                deprecated_since_version="1.7",
                active_deprecations_target="non-expr-args-deprecated",
            ),
            stacklevel=2,
        )
        with np.errstate(over="warn"):
            np.float64(1e308) * np.float64(10.0)
        return original(*args, **kwargs)

    monkeypatch.setattr(symbolic, "to_sympy", to_sympy)


def test_diff_says_python_warnings_in_one_line(monkeypatch):
    _noisy(monkeypatch)
    result = runner.invoke(app, ["diff", "tan(x)"])  # (SymPy's road: SymEngine answers x^2 and sin(x) without SymPy)
    assert result.exit_code == 0, result.output
    assert result.stdout == "d/dx = 1/cos(x)^2\n"
    assert result.stderr == (
        "warning: while SymPy worked: Using non-Expr arguments in Add is deprecated (in this case, one of the "
        "arguments has type 'BooleanTrue').; a number overflowed to infinity (overflow encountered in "
        "scalar multiply)\n"
    )


def test_check_says_python_warnings_in_one_line(monkeypatch):
    _noisy(monkeypatch)
    # (abs: SymPy's road; SymEngine answers x^2 alone without SymPy)
    result = runner.invoke(app, ["check", "--json", "x^2 + abs(x)", "--at", "x=3"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] is True
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: while SymPy worked: Using non-Expr arguments in Add")
    assert "Warning" not in result.stderr and ".py" not in result.stderr


def test_warning_text_joins_and_bounds():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(5):
            warnings.warn(f"message {i}\nsecond line\n\nadvice", UserWarning, stacklevel=1)
        warnings.warn("message 0\nsecond line", UserWarning, stacklevel=1)
    assert symbolic.warning_text(caught) == (
        "while SymPy worked: message 0 second line; message 1 second line; message 2 second line (and 2 more)"
    )
    assert symbolic.warning_text([]) is None
