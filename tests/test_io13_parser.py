"""Issue 13: a BOM at the start of a program file, bracket depth, and the caret of an unclosed bracket."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from gradcli.cli.app import app
from gradcli.errors import SyntaxProblem
from gradcli.lang.parser import MAX_DEPTH, parse

runner = CliRunner()


def test_a_bom_at_the_start_of_a_file_is_accepted(tmp_path):
    source = tmp_path / "f.txt"
    source.write_bytes(b"\xef\xbb\xbfx^2 + 1\n")
    result = runner.invoke(app, ["eval", "-f", str(source), "--at", "x=3", "--json"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == '{"value": 10.0, "gradient": {"x": 6.0}}\n'


def test_a_bom_on_standard_input_is_accepted():
    result = runner.invoke(app, ["eval", "-", "--at", "x=3", "--json"], input=b"\xef\xbb\xbfx^2\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == '{"value": 9.0, "gradient": {"x": 6.0}}\n'


def test_a_bom_inside_the_program_is_still_refused(tmp_path):
    source = tmp_path / "f.txt"
    source.write_bytes(b"x + \xef\xbb\xbf1\n")
    result = runner.invoke(app, ["eval", "-f", str(source), "--at", "x=3"])
    assert result.exit_code == 2
    assert "U+FEFF" in result.stderr


@pytest.mark.parametrize(("opener", "closer"), [("(", ")"), ("[", "]"), ("sin(", ")"), ("x[", "]")])
def test_every_kind_of_bracket_counts_once_per_level(opener, closer):
    levels = MAX_DEPTH - 1  # the whole expression is the first level
    parse(opener * levels + "0" + closer * levels)
    with pytest.raises(SyntaxProblem, match=f"nested too deeply \\(more than {MAX_DEPTH} levels\\)"):
        parse(opener * (levels + 1) + "0" + closer * (levels + 1))


def test_a_hundred_and_fifty_nested_vectors_parse():  # counted twice before: refused at 101
    tree = parse("[" * 150 + "1" + "]" * 150)
    assert tree.outputs.items[0].__class__.__name__ == "Vector"


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("(x+1\n", "error: expected ')' to close '(' at column 1\n  (x+1\n  ^"),
        (
            "y = 2\nz = [y, 1\n\n",
            "error: expected ']' to close '[' at line 2, column 5\n  line 2: z = [y, 1\n              ^",
        ),
        ("sin((x + 1)", "error: expected ')' to close '(' at column 4\n  sin((x + 1)\n             ^"),  # unchanged
    ],
)
def test_the_caret_of_an_unclosed_bracket_is_never_on_an_empty_line(text, rendered):
    with pytest.raises(SyntaxProblem) as caught:
        parse(text)
    assert caught.value.render() == rendered


def test_the_cli_points_at_the_bracket_of_a_file_ending_in_a_newline(tmp_path):
    source = tmp_path / "f.txt"
    source.write_text("(x+1\n")
    result = runner.invoke(app, ["eval", "-f", str(source), "--at", "x=1"])
    assert result.exit_code == 2
    assert result.stderr == "error: expected ')' to close '(' at column 1\n  (x+1\n  ^\n"
