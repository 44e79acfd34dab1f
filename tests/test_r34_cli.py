"""Issue 34, "Tried as a new user would": what a first session with gradcli met.

- ``diff "log(abs(x))" --at x=0`` stated d/dx = 0 where the function is -inf (eval: nan);
- ``eval "1e999"`` printed inf, ``diff "1e999*x"`` failed in SymPy, while ``--at x=1e400`` was refused;
- ``gradcli --help`` cut 6 of its 9 command summaries with "...";
- ``gradcli digg x`` got no "did you mean 'diff'?";
- ``--digits 3 --json`` was silently ignored;
- ``diff --steps --json`` wrote ``2 * x`` where ``diff --json`` writes ``2*x``;
- ``--at "x=[[1,2],[3]]"`` listed the shapes in the other order than the items;
- README: the custom Functions miscounted, ``nothere.py:f`` said to be an expression, both Quick start
  commands in one ``.venv``, the skips without torch and JAX unsaid.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app, command_names
from gradcli.errors import SyntaxProblem
from gradcli.lang.flat import compile_flat
from gradcli.lang.parser import parse

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def run(*args: str, env: dict[str, str] | None = None):
    result = runner.invoke(app, expression_after_dashes(list(args)), env=env)
    assert "Traceback" not in result.output + result.stderr, result.output + result.stderr
    return result


# --- 1. no finite derivative where the function is not finite --------------------------------------------


def test_diff_states_no_finite_derivative_where_the_function_is_infinite():
    result = run("diff", "log(abs(x))", "--at", "x=0")
    assert result.exit_code == 0
    assert result.stdout == "d/dx = where(x == 0, 0, 1/x) = nan\n"
    assert result.stderr == (
        "warning: the function is -inf at x = 0 and has no derivative where it is not finite: "
        "d/dx is stated as nan, not the formula's 0\n"
    )
    evaluated = run("eval", "log(abs(x))", "--at", "x=0", "--json")  # consistent with eval
    assert json.loads(evaluated.stdout) == {"value": "-inf", "gradient": {"x": "nan"}}


def test_diff_json_has_no_exact_value_there_and_keeps_an_infinite_one():
    result = run("diff", "x + log(y)", "--at", "x=1,y=0", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"derivative": {"x": "1", "y": "1/y"}, "value": {"x": "nan", "y": "inf"}}
    assert result.stderr == (
        "warning: the function is -inf at x = 1, y = 0 and has no derivative where it is not finite: "
        "d/dx is stated as nan, not the formula's 1\n"
    )


def test_diff_where_the_function_is_finite_is_as_before():
    result = run("diff", "log(abs(x))", "--at", "x=2")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "d/dx = where(x == 0, 0, 1/x) = 1/2\n", "")


# --- 2. one rule for a literal too large for float64 ------------------------------------------------------

TOO_LARGE = "is not a finite float64 number (too large: the largest is about 1.8e308)"


@pytest.mark.parametrize(
    "args, literal, column",
    [
        (["eval", "1e999"], "1e999", 1),
        (["eval", "x/1e999", "--at", "x=1"], "1e999", 3),  # finite (0) on the flat road, refused all the same
        (["diff", "1e999*x"], "1e999", 1),
        (["check", "x + 1e400", "--at", "x=1"], "1e400", 5),
        (["jacobian", "x, 2e308*x", "--at", "x=1"], "2e308", 4),
        (["graph", "1e999*x"], "1e999", 1),
    ],
)
def test_an_overflowing_literal_is_refused_with_a_caret_by_every_command(args, literal, column):
    result = run(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"error: {literal!r} at column {column} {TOO_LARGE}\n  {args[1]}\n  {' ' * (column - 1)}^\n"


def test_the_rule_is_the_parsers_and_matches_the_at_rule():
    with pytest.raises(SyntaxProblem) as caught:
        parse("2 * 1e999")
    assert caught.value.offset == 4
    assert compile_flat("x/1e999") is None  # the flat road leaves it to the parser
    assert run("eval", "1.7e308").stdout == "value = 1.7e+308\n"  # the largest float64 numbers are read
    at = run("eval", "x", "--at", "x=1e400")
    assert (at.exit_code, at.stderr) == (
        2,
        "error: --at x: '1e400' is not a finite float64 number (too large, or 1/0)\n",
    )


# --- 3. the command summaries whole ---------------------------------------------------------------------


def _commands(text: str) -> dict[str, str]:
    """The Commands section: each command's summary, its wrapped lines joined."""
    found: dict[str, str] = {}
    name = None
    for line in text.split("Commands:\n", 1)[1].splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            name, _, summary = line.strip().partition(" ")
            found[name] = summary.strip()
        elif name is not None and line.strip():
            found[name] += ("" if found[name].endswith("-") else " ") + line.strip()  # wrapped at a space or a hyphen
    return found


def _help(columns: int) -> str:
    """``gradcli --help`` as a terminal of ``columns`` shows it (CliRunner forces 80 columns: a process)."""
    env = {**os.environ, "COLUMNS": str(columns)}
    said = subprocess.run([sys.executable, "-m", "gradcli", "--help"], capture_output=True, text=True, env=env)
    assert (said.returncode, said.stderr) == (0, "")
    return said.stdout


def test_help_shows_each_command_summary_whole_wrapped_or_not():
    wide, narrow = _help(150), _help(50)
    lines = wide.split("Commands:\n", 1)[1].splitlines()
    assert (
        lines[1]
        == "  diff      Symbolic derivative of EXPR (SymPy), simplified, in gradcli's language; a program step by step."
    )
    assert (
        lines[5]
        == "  check     Cross-check the gradient of EXPR: SymPy, finite differences, complex step, your formulas."
    )
    assert len(lines) == len(command_names())  # one line each
    assert not [line for line in lines if "..." in line]
    # a narrow terminal wraps each summary, whole, within its width
    assert "..." not in narrow.split("Commands:\n", 1)[1]
    assert _commands(narrow) == _commands(wide)
    assert _commands(narrow)["ops"] == (
        "The functions of the language by group: arity, which inputs get a gradient, derivatives, SymPy."
    )
    assert max(len(line) for line in narrow.splitlines()) <= 50


# --- 4. an unknown command: the nearest one ------------------------------------------------------------


@pytest.mark.parametrize(
    "args, said",
    [
        (["digg", "x"], "error: no such command 'digg'; did you mean 'diff'?\n"),
        (["jac", "x"], "error: no such command 'jac'; did you mean 'jacobian'?\n"),
        (["help", "digg"], "error: no such command 'digg'; did you mean 'diff'?\n"),
        (["x^2"], "error: no such command 'x^2'\n"),  # an expression without its command: no guess
        (["cos"], "error: no such command 'cos'\n"),
    ],
)
def test_an_unknown_command_suggests_the_nearest(args, said):
    result = run(*args)
    assert (result.exit_code, result.stderr) == (2, said)


# --- 5. --digits with --json -----------------------------------------------------------------------------


def test_digits_with_json_is_said_to_be_ignored():
    result = run("eval", "x*y", "--at", "x=0.123456789,y=3", "--digits", "3", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"value": 0.370370367, "gradient": {"x": 3.0, "y": 0.123456789}}
    assert result.stderr == "warning: --digits 3 is ignored: JSON keeps full float64 precision\n"
    jacobian = run("jacobian", "x*y", "--at", "x=0.123456789,y=3", "--digits", "3", "--json")
    assert jacobian.stderr == "warning: --digits 3 is ignored: JSON keeps full float64 precision\n"
    text = run("eval", "x*y", "--at", "x=0.123456789,y=3", "--digits", "3")
    assert (text.stdout, text.stderr) == ("value = 0.37\nd/dx  = 3\nd/dy  = 0.123\n", "")


# --- 6. one form of a derivative -------------------------------------------------------------------------


@pytest.mark.parametrize("expression", ["x^2", "x^2 * sin(3*x)", "x*y + sin(x)", "exp(x) / x", "sqrt(x^2 + 1)"])
def test_diff_steps_json_writes_the_derivative_as_diff_json_does(expression):
    steps = json.loads(run("diff", expression, "--steps", "--json", "--wrt", "x").stdout)
    plain = json.loads(run("diff", expression, "--json", "--wrt", "x").stdout)
    assert steps["derivative"] == plain["derivative"]


def test_the_steps_are_written_in_that_form_too():
    document = json.loads(run("diff", "x^2 * y", "--steps", "--json", "--wrt", "x").stdout)
    assert document["derivative"] == {"x": "y*2*x"}  # the derivation's own order, in diff's form
    assert document["steps"] == [
        {"rule": "constant multiple", "applies_to": "x^2*y", "result": "y*d/dx(x^2)", "wrt": "x"},
        {"rule": "power rule", "applies_to": "x^2", "result": "y*2*x", "wrt": "x"},
    ]
    text = run("diff", "a = x*x; b = a/y", "--steps", "--wrt", "x", "--at", "x=2,y=3").stdout.splitlines()
    assert text[-2] == "   ∂b/∂x = 2*x/y"


# --- 7. the shapes in the order of the items -------------------------------------------------------------


def test_ragged_at_value_lists_the_shapes_in_the_order_of_the_items():
    result = run("eval", "sum(x)", "--at", "x=[[1,2],[3]]")
    assert result.exit_code == 2
    assert result.stderr == "error: --at x: the items of a vector must have the same shape (at column 1): (2,), (1,)\n"
    three = run("eval", "sum(x)", "--at", "x=[[1,2],[3],[4,5,6],[7]]")
    assert three.stderr.endswith(": (2,), (1,), (3,)\n")


# --- 8. the README --------------------------------------------------------------------------------------


def _sh_blocks(text: str) -> list[list[str]]:
    blocks, current = [], None
    for line in text.splitlines():
        if current is None and line.strip() == "```sh":
            current = []
        elif current is not None and line.strip() == "```":
            blocks.append(current)
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_the_quick_start_commands_use_two_environments_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    install, tests, frameworks = _sh_blocks(readme)[:3]
    assert install[0].startswith("python3 -m venv .venv && . .venv/bin/activate && pip install . && gradcli eval")
    assert tests[0] == 'python3 -m venv .venv-test && . .venv-test/bin/activate && pip install -e ".[test]" && pytest'
    assert frameworks == [
        'pip install torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu "jax[cpu]==0.10.2"'
    ]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").rstrip("\n").splitlines()
    assert ci[-1] == tests[0]
    assert "Without PyTorch and JAX, that command skips the tests of their road" in readme


def test_the_readme_counts_the_custom_functions_and_says_what_a_missing_file_gives():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    example = (ROOT / "examples" / "torch" / "custom_functions.py").read_text(encoding="utf-8")
    assert example.count("(torch.autograd.Function)") == 4 and example.count(".apply(") == 4  # Linear's twice
    assert "five Functions" not in readme
    assert "four Function classes called five times, one of them wrong" in readme
    assert "a file that is not there is then an error, `nothere.py: no such file`, exit 2" in readme
    result = run("eval", "nothere.py:f", "--at", "x=1")
    assert (result.exit_code, result.stderr) == (2, "error: nothere.py: no such file\n")
