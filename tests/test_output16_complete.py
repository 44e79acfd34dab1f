"""Issue 16, "nothing lost, one number format": output is complete in a pipe, abbreviated (saying how to see it
all) on a terminal; one number format (every digit in pipes and JSON, 10 digits on a terminal, --digits N);
headings ``d/dx`` on a terminal and in a pipe. Run through the installed command and a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from terminal import on_terminal

posix_only = pytest.mark.skipif(os.name != "posix", reason="needs a pseudo-terminal")
_SCRIPT = Path(sys.executable).with_name("gradcli")
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "gradcli"]  # the installed command

X20 = "x=[" + ",".join(repr(i / 7) for i in range(20)) + "]"
X2000 = "x=[" + ",".join(str(i) for i in range(2000)) + "]"


def piped(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    environment.update(env or {})
    return subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=120, env=environment)


def in_terminal(*args: str, columns: int = 80, no_color: bool = False) -> tuple[int, str, str]:
    """(exit code, output without escape codes, raw output) of gradcli on a pseudo-terminal."""
    return on_terminal([*COMMAND, *args], columns, no_color=no_color)


# --- complete in a pipe ------------------------------------------------------------------------------------------


def test_a_piped_20x20_jacobian_shows_all_400_numbers_with_every_digit():
    done = piped("jacobian", "x * sum(x)", "--at", X20)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 21 and "..." not in done.stdout
    assert lines[0].split() == [f"x[{j}]" for j in range(20)]
    rows = [line.split() for line in lines[1:]]
    assert [r[0] for r in rows] == [f"f[{i}]" for i in range(20)]
    shown = np.array([[float(t) for t in r[1:]] for r in rows])
    assert shown.shape == (20, 20)
    exact = np.array(json.loads(piped("jacobian", "x * sum(x)", "--at", X20, "--json").stdout)["jacobian"])
    assert np.array_equal(shown, exact)  # the text reads back to the same doubles
    x = np.arange(20) / 7
    np.testing.assert_allclose(shown, np.diag(np.full(20, x.sum())) + x[:, None], rtol=1e-15)


def test_a_piped_2000_element_gradient_prints_every_element():
    done = piped("eval", "sum(x^2)", "--at", X2000)
    assert done.returncode == 0, done.stderr
    expected = "[" + ", ".join(str(2 * i) for i in range(2000)) + "]"
    assert done.stdout == f"value = 2664667000\nd/dx  = {expected}   (shape (2000,))\n"


def test_a_piped_hessian_is_complete():
    done = piped("hessian", "sum(x^3)", "--at", X20)
    rows = [line.split()[1:] for line in done.stdout.splitlines()[1:]]
    assert len(rows) == 20 and all(len(r) == 20 for r in rows) and "..." not in done.stdout
    assert [float(rows[i][i]) for i in range(20)] == [6 * (i / 7) for i in range(20)]


@posix_only
def test_a_terminal_abbreviates_a_large_jacobian_and_says_how_to_see_it_all():
    code, shown, _ = in_terminal("jacobian", "x * sum(x)", "--at", X20)
    assert code == 0
    note = shown[shown.rindex("(showing") :]  # as many columns as fit 80, the note wrapped between words
    assert " ".join(note.split()) == (
        "(showing 12 of 20 rows and 4 of 20 columns; pipe to a file or use --json / --format csv for all)"
    )
    assert all(len(line) <= 80 for line in shown.splitlines())
    assert "f[5]" in shown and "f[14]" in shown and "f[6]" not in shown and "..." in shown
    assert "29.85714286" in shown  # the last diagonal element, 10 significant digits


@posix_only
def test_a_terminal_abbreviates_a_long_gradient_and_says_how_to_see_it_all():
    code, shown, _ = in_terminal("eval", "sum(x^2)", "--at", X2000)
    assert code == 0
    assert "[0, 2, 4, ..., 3994, 3996, 3998]   (shape (2000,))" in shown
    assert "(showing 6 of 2,000 elements of d/dx; pipe to a file or use --json for all)" in shown


# --- one number format -----------------------------------------------------------------------------------------

THIRD = repr(1 / 3)  # 0.3333333333333333


def test_pipes_print_the_shortest_text_that_reads_back_to_the_same_double():
    assert piped("eval", "x/3", "--at", "x=1").stdout == f"value = {THIRD}\nd/dx  = {THIRD}\n"
    assert json.loads(piped("eval", "x/3", "--at", "x=1", "--json").stdout) == {
        "value": 1 / 3,
        "gradient": {"x": 1 / 3},
    }
    jac = piped("jacobian", "x/3, x*y", "--at", "x=1,y=0.1").stdout.splitlines()
    assert jac[1].split() == ["x/3", THIRD, "0"] and jac[2].split() == ["x*y", "0.1", "1"]
    assert piped("hessian", "x^3/9", "--at", "x=1").stdout.splitlines()[1].split() == ["x", repr(6 / 9)]
    check = piped("check", "x/3", "--at", "x=1", "--method", "fd").stdout
    assert f"d/dx  {THIRD}" in check
    text = piped("graph", "x/3", "--at", "x=1", "--format", "text").stdout
    assert f"f = div(x, 3)  # DivBackward0  value={THIRD}  grad=1" in text
    tree = piped("graph", "x/3", "--at", "x=1").stdout
    assert tree.splitlines()[1] == f"├── x  (variable)  value 1  grad {THIRD}   · ∂f/∂x = 1/3 = {THIRD}"


@pytest.mark.parametrize(
    "args,line",
    [
        (["eval", "x/3", "--at", "x=1"], "d/dx  = 0.333"),
        (["jacobian", "x/3, x", "--at", "x=1"], "x/3  0.333"),
        (["hessian", "x^3/9", "--at", "x=1"], "x  0.667"),
        (["check", "x/3", "--at", "x=1", "--method", "fd"], "d/dx  0.333"),
        (["graph", "x/3", "--at", "x=1", "--format", "text"], "f = div(x, 3)  # DivBackward0  value=0.333  grad=1"),
        (["graph", "x/3", "--at", "x=1"], "├── x  (variable)  value 1  grad 0.333   · ∂f/∂x = 1/3 = 0.333"),
    ],
    ids=["eval", "jacobian", "hessian", "check", "graph-text", "graph-tree"],
)
def test_digits_sets_the_precision_of_every_command(args, line):
    done = piped(*args, "--digits", "3")
    assert done.returncode == 0, done.stderr
    words = line.split()
    assert any(x.split()[: len(words)] == words for x in done.stdout.splitlines()), done.stdout
    assert "0.3333" not in done.stdout and "0.6666" not in done.stdout


def test_digits_does_not_change_json():
    done = piped("eval", "x/3", "--at", "x=1", "--json", "--digits", "3")
    assert json.loads(done.stdout) == {"value": 1 / 3, "gradient": {"x": 1 / 3}}


@pytest.mark.parametrize("value", ["0", "18", "-1"])
def test_a_bad_digits_value_is_one_error_line(value):
    done = piped("eval", "x/3", "--at", "x=1", f"--digits={value}")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1 and "--digits" in done.stderr


def test_the_fast_command_path_reads_digits_as_typer_does(monkeypatch, capsys):
    from typer.testing import CliRunner

    from gradcli.cli import fast_command, main
    from gradcli.cli.app import app

    argv = ["eval", "x/3", "--at", "x=1", "--digits", "4"]
    assert fast_command(argv)["digits"] == 4
    monkeypatch.setattr(sys, "argv", ["gradcli", *argv])
    main()
    fast = capsys.readouterr()
    slow = CliRunner().invoke(app, argv)
    assert fast.out == slow.stdout == "value = 0.3333\nd/dx  = 0.3333\n"


@posix_only
@pytest.mark.parametrize("no_color", [False, True])
def test_a_terminal_shows_ten_digits_and_the_same_headings_as_a_pipe(no_color):
    code, shown, raw = in_terminal("eval", "x/3 + y", "--at", "x=1,y=2", no_color=no_color)
    assert code == 0
    rows = [" ".join(line.split()) for line in shown.splitlines()]
    assert "│ value │ 2.333333333 │" in rows and "│ d/dx │ 0.3333333333 │" in rows and "│ d/dy │ 1 │" in rows
    assert "∂" not in shown
    assert ("\x1b[" in raw) is not no_color  # NO_COLOR: no escape codes, but still the table
    code, shown, _ = in_terminal("eval", "x/3 + y", "--at", "x=1,y=2", "--digits", "3")
    assert "│ d/dx │ 0.333 │" in [" ".join(line.split()) for line in shown.splitlines()]
    code, shown, _ = in_terminal("check", "x/3", "--at", "x=1", "--method", "fd", no_color=no_color)
    assert code == 0 and "d/dx" in shown and "∂" not in shown and "0.3333333333 " in shown


@posix_only
def test_diff_headings_are_the_same_on_a_terminal_and_in_a_pipe():
    assert piped("diff", "x^2*y", "--wrt", "x").stdout == "d/dx = 2*x*y\n"
    code, shown, _ = in_terminal("diff", "x^2*y", "--wrt", "x")
    assert code == 0 and "│ d/dx │ 2*x*y │" in [" ".join(line.split()) for line in shown.splitlines()]
