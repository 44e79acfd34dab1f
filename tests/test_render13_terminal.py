"""Issue 13, terminals: narrow ones (COLUMNS=20 or 40) still show every number, and user text with
control characters is never echoed raw (headings, error lines, warnings, graph views)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from terminal import gradcli_on_terminal

posix_only = pytest.mark.skipif(os.name != "posix", reason="needs a pseudo-terminal")
POINT = "x=1.123456789012345,y=2.2222222222222"
EXPRESSION = "x*y + 123456789.123456789*x"


def in_terminal(args: list[str], columns: int) -> str:
    """gradcli's output on a pseudo-terminal ``columns`` wide (colour codes removed)."""
    return gradcli_on_terminal(args, columns, term="xterm")[1]


def plain(args: list[str]) -> str:
    result = subprocess.run([sys.executable, "-m", "gradcli", *args], capture_output=True, text=True, check=False)
    return result.stdout


def numbers(text: str) -> list[str]:
    return re.findall(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", text)


@posix_only
@pytest.mark.parametrize("columns", [20, 40])
@pytest.mark.parametrize(
    "command",
    [
        ["eval", EXPRESSION, "--at", POINT],
        ["jacobian", "x*y, 123456789.123456789*x", "--at", POINT],
        ["check", EXPRESSION, "--at", POINT, "--method", "fd"],
        ["hessian", "x^3*y^2 * 1234.5678", "--at", POINT],
    ],
    ids=["eval", "jacobian", "check", "hessian"],
)
def test_narrow_terminals_show_every_number(command, columns):
    shown = in_terminal(command, columns)
    # a terminal shows 10 significant digits (issue 16): the plain output at that precision is what it must keep
    expected = [
        n for n in numbers(plain([*command, "--digits", "10"])) if len(n) >= 6
    ]  # long ones are what a table cuts
    assert expected, "the plain output has numbers to look for"
    for n in expected:
        assert n in shown, f"{n} missing at COLUMNS={columns}:\n{shown}"
    assert "…" not in shown


@posix_only
def test_wide_terminals_keep_the_table():
    shown = in_terminal(["eval", "x*y", "--at", "x=2,y=3"], 100)
    assert "┌" in shown and "│ 6 │" in shown


@posix_only
def test_heading_escapes_controls_in_a_comment():
    shown = in_terminal(["eval", "x # \x1b]0;pwn\x07 note", "--at", "x=1"], 100)
    assert "\x1b]" not in shown and "\x07" not in shown
    assert "x # \\x1b]0;pwn\\x07 note" in shown


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gradcli", *args], capture_output=True, text=True, check=False)


def run_here(*args: str) -> subprocess.CompletedProcess:
    """The same, in this process (fast): what the command wrote and its exit code."""
    from typer.testing import CliRunner

    from gradcli.cli import expression_after_dashes
    from gradcli.cli.app import app

    result = CliRunner().invoke(app, expression_after_dashes(list(args)))
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


@pytest.mark.parametrize(
    ("expression", "line", "caret"),
    [
        ("x\x1b[31m+", "  x\\x1b[31m+", "   ^"),
        ("sin(x\x1b", "  sin(x\\x1b", "       ^"),
        ("x\u202e+1", "  x\\u202e+1", "   ^"),
        ("x + \x9b1", "  x + \\x9b1", "      ^"),
        ("(x\r+ 1 $", "  (x\\x0d+ 1 $", "            ^"),
    ],
)
def test_error_lines_show_controls_escaped_with_the_caret_under_the_culprit(expression, line, caret):
    result = run_here("eval", expression, "--at", "x=1")
    assert result.returncode == 2
    lines = result.stderr.split("\n")
    assert lines[0].startswith("error: ") and lines[1:] == [line, caret, ""]
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", result.stderr)


@pytest.mark.parametrize("control", ["\x1b", "\r", "\x07", "\x9b", "\u202e", "\u2066"])
def test_no_control_character_is_echoed_raw(control):
    for args in (
        ["eval", f"x{control}", "--at", "x=1"],
        ["eval", "x", "--at", f"x=1{control}"],
        ["eval", "x", "--at", f"x{control}=1"],
        ["graph", "x", "--at", "x=1", "-o", f"g{control}.xyz"],
        ["check", "x", "--at", "x=1", "--expect", f"x=1{control}"],
    ):
        result = run_here(*args)
        assert result.returncode in (0, 2), (args, result.stderr)  # CR is white space in an expression
        assert control not in result.stderr + result.stdout, (args, result.stderr)
        assert result.stderr.count("\n") <= 3  # one error line (and a caret pair)


def test_matrices_in_non_finite_warnings_are_one_line():
    result = run_here("eval", "sum(A @ log(A - 1))", "--at", "A=[[1,2],[3,4]]")
    assert result.returncode == 0
    assert result.stderr == (
        "warning: non-finite value: 'log(A - 1)' at column 9 gave -inf from input [[0., 1.], [2., 3.]] (shape [2, 2])\n"
    )


def test_python_warnings_become_one_gradcli_line():
    """NumPy's overflow in check's tolerance arithmetic leaked as file:line, RuntimeWarning and source."""
    result = run("check", "x", "--at", "x=1", "--rtol", "1e308", "--atol", "1e308")
    assert result.stderr == "warning: overflow encountered in add\n"
    assert result.returncode == 0


def test_warnings_from_the_library_are_one_line_in_process(capsys):
    import warnings

    from gradcli.cli.report import reported

    with reported():
        warnings.warn("first line\n  second line\x1b[2J", DeprecationWarning, stacklevel=1)
        warnings.warn("x" * 1000, RuntimeWarning, stacklevel=1)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "warning: first line second line\\x1b[2J"
    assert err[1] == "warning: " + "x" * 297 + "..."


@posix_only
def test_a_long_vector_still_gets_the_table_when_each_number_fits():
    shown = in_terminal(["eval", "sum(v*1.123456789)*v", "--at", "v=[1,2,3,4,5,6,7,8,9,10]", "--seed", "ones"], 60)
    assert "┌" in shown  # the table wraps between numbers
    for n in ("61.79012339", "617.901234", "123.5802468"):  # 10 significant digits on a terminal (issue 16)
        assert n in shown
