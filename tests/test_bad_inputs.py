"""Bad input of every kind: exit code 2, a clear message on stderr, never a traceback, never code run."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app

runner = CliRunner()

BAD = [
    # (arguments, a phrase the message must contain)
    (["eval", "sin((x + 1)", "--at", "x=1"], "expected ')' to close '(' at column 4"),
    (["eval", "x +", "--at", "x=1"], "expected a value after '+'"),
    (["eval", "2x", "--at", "x=1"], "missing operator before 'x'"),
    (["eval", "x $ 1", "--at", "x=1"], "unexpected character '$'"),
    (["eval", "(x]", "--at", "x=1"], "']' does not close '('"),
    (["eval", "", "--at", "x=1"], "empty expression"),
    (["eval", "a < b < c", "--at", "a=1,b=2,c=3"], "comparisons cannot be chained"),
    (["eval", "sinn(x)", "--at", "x=1"], "unknown function 'sinn'; did you mean 'sin'?"),
    (["eval", "x + y", "--at", "x=1"], "missing value for 'y'"),
    (["eval", "xx + 1", "--at", "x=1"], "missing value for 'xx'"),
    (["eval", "sin(x, x)", "--at", "x=1"], "sin() takes 1 argument, got 2"),
    (["eval", "atan2(x)", "--at", "x=1"], "atan2() takes 2 arguments, got 1"),
    (["eval", "sin + 1"], "'sin' is a function: call it, sin(...)"),
    (["eval", "x + [1, 2]", "--at", "x=[1,2,3]"], "shapes (3,) and (2,) do not match for +"),
    (["eval", "x @ y", "--at", "x=[1,2],y=[1,2,3]"], "'@'"),
    (["eval", "[x, [1, 2]]", "--at", "x=1"], "the items of a vector must have the same shape"),
    (["eval", "x[1.5]", "--at", "x=[1,2]"], "an index must be a whole number"),
    (["eval", "x[0, 0]", "--at", "x=[1,2]"], "too many indices"),
    (["eval", "x[5]", "--at", "x=[1,2]"], "index 5 is out of range for axis 0 of size 2"),
    (["eval", "x * x", "--at", "x=[1,2]"], "grad can be implicitly created only for scalar outputs"),
    (["eval", "x", "--at", "x"], "--at expects NAME=VALUE"),
    (["eval", "x", "--at", "x="], "--at x= needs a value"),
    (["eval", "x", "--at", "1x=2"], "is not a name"),
    (["eval", "x", "--at", "x=y"], "a value must be a number or a list of numbers"),
    (["eval", "x", "--at", "x=[1,"], "--at x"),
    (["eval", "x * x", "--at", "x=[1,2]", "--seed", "[1,2,3]"], "--seed has shape (3,) but the output has shape (2,)"),
    (["eval", "x", "--at", "x=1", "--wrt", "q"], "'q' is neither in the expression nor given with --at"),
    (["eval", "x", "--at", "x=1", "--wrt", "1q"], "is not a name"),
    (["eval", "-f", "/no/such/file.txt", "--at", "x=1"], "no such file"),
    (["eval", "x", "-f", "/etc/hostname", "--at", "x=1"], "either as EXPR or with -f FILE, not both"),
    (["eval", "--at", "x=1"], "missing EXPR"),
    (["eval", "/no/such/module.py:f", "--at", "a=1"], "no such file"),
    (["eval", "x", "--bogus"], "error: no such option: --bogus"),
    (["eval", "(" * 10_000 + "x" + ")" * 10_000, "--at", "x=1"], "nested too deeply"),
    (["eval", "x" + "^x" * 5_000, "--at", "x=1"], "nested too deeply"),
    # attempts to run code: all of them are just unknown names, functions or characters
    (["eval", "__import__('os').system('touch /tmp/gradcli-pwned')"], "unexpected character"),
    (["eval", "__import__(x)", "--at", "x=1"], "unknown function '__import__'"),
    (["eval", "eval(x)", "--at", "x=1"], "unknown function 'eval'"),
    (["eval", "exec(x)", "--at", "x=1"], "unknown function 'exec'"),
    (["eval", "x.__class__", "--at", "x=1"], "expected 'T' after '.'"),
    (["eval", "open(x)", "--at", "x=1"], "unknown function 'open'"),
    (["eval", "lambda: 1"], "unexpected"),
    (["eval", "`ls`"], "unexpected character '`'"),
    (["eval", "x; import os", "--at", "x=1"], "missing operator before 'os'"),
    (["diff", "sinn(x)"], "unknown function 'sinn'"),
    (["diff", "x * y", "--wrt", "z"], "'z' is not a variable of the expression"),
    (["diff", "sin((x"], "expected ')' to close '('"),
]


@pytest.mark.parametrize("args,phrase", BAD, ids=[" ".join(a)[:50] for a, _ in BAD])
def test_bad_input_exits_2_with_a_message(args, phrase, tmp_path):
    result = runner.invoke(app, expression_after_dashes(args))
    text = result.stdout + result.stderr
    assert result.exit_code == 2, text
    assert "Traceback" not in text
    assert phrase in result.stderr, result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith(("error: ", "Usage: ")) and len(first) < 300


def test_no_bad_input_ran_code():
    import os

    assert not os.path.exists("/tmp/gradcli-pwned")


def test_binary_and_non_utf8_files_are_refused(tmp_path):
    path = tmp_path / "binary.bin"
    path.write_bytes(b"x + \xff\xfe\x00")
    result = runner.invoke(app, ["eval", "-f", str(path), "--at", "x=1"])
    assert result.exit_code == 2 and "not UTF-8 text (byte 4)" in result.stderr


def test_a_python_function_that_raises_is_reported(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("def f(a):\n    return a / undefined_name\n")
    result = runner.invoke(app, ["eval", f"{path}:f", "--at", "a=1"])
    assert result.exit_code == 2
    assert result.stderr == f"error: {path}:f raised NameError: name 'undefined_name' is not defined\n"
    (tmp_path / "syntax.py").write_text("def f(a:\n")
    result = runner.invoke(app, ["eval", f"{tmp_path / 'syntax.py'}:f", "--at", "a=1"])
    assert result.exit_code == 2 and "line 1" in result.stderr


# --- limits: refused with the size, before anything is allocated --------------------------------

COLUMN = "[" + ",".join(["[1]"] * 20000) + "]"
ROW = "[[" + ",".join(["1"] * 20000) + "]]"
VECTOR = "[" + ",".join(["1"] * 20000) + "]"
TOO_BIG = (
    "would have shape (20000, 20000): 400,000,000 elements (3.2 GB of float64), "
    "more than the limit of 200,000,000 (set GRADCLI_MAX_ELEMENTS to raise it)"
)


@pytest.mark.parametrize(
    "args, what",
    [
        (["eval", "sum(a*b)", "--at", f"a={COLUMN}", "--at", f"b={ROW}"], "'a*b' at column 5"),
        (["eval", "sum(a@b)", "--at", f"a={COLUMN}", "--at", f"b={ROW}"], "'a@b' at column 5"),
        (["jacobian", "v*2", "--at", f"v={VECTOR}"], "the Jacobian"),
        (["hessian", "sum(v^3)", "--at", f"v={VECTOR}"], "the Hessian"),
    ],
    ids=["broadcast", "outer product", "jacobian", "hessian"],
)
def test_arrays_that_would_exhaust_memory_are_refused_with_their_size(args, what):
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr == f"error: {what} {TOO_BIG}\n"


def test_the_element_limit_can_be_raised(monkeypatch):
    monkeypatch.setenv("GRADCLI_MAX_ELEMENTS", "10")
    result = runner.invoke(app, ["eval", "sum(a*b)", "--at", "a=[[1],[2],[3]]", "--at", "b=[[1,2,3,4]]"])
    assert result.exit_code == 2 and "more than the limit of 10 " in result.stderr
    monkeypatch.setenv("GRADCLI_MAX_ELEMENTS", "12")
    result = runner.invoke(app, ["eval", "sum(a*b)", "--at", "a=[[1],[2],[3]]", "--at", "b=[[1,2,3,4]]", "--json"])
    assert result.exit_code == 0 and '"value": 60.0' in result.stdout


def test_an_expression_over_the_character_limit_is_refused(tmp_path, monkeypatch):  # issue 27: 20,000,000
    from gradcli.lang import lexer

    monkeypatch.setattr(lexer, "MAX_CHARACTERS", 500_000)
    source = tmp_path / "huge.txt"
    source.write_text("x+" * 250_001 + "x")
    result = runner.invoke(app, ["eval", "-f", str(source), "--at", "x=1"])
    assert result.exit_code == 2
    assert result.stderr == f"error: {source} is 500,003 characters long, more than the limit of 500,000\n"


@pytest.mark.parametrize("value", ["1e999", "-1e400", "[1, 1/0]"])
def test_points_beyond_float64_are_refused(value):
    result = runner.invoke(app, ["eval", "x", "--at", f"x={value}"])
    assert result.exit_code == 2
    assert result.stderr == f"error: --at x: {value!r} is not a finite float64 number (too large, or 1/0)\n"


def test_non_utf8_standard_input_is_named():
    result = runner.invoke(app, ["eval", "-", "--at", "x=1"], input=b"x\xff+1")
    assert result.exit_code == 2
    assert result.stderr == "error: standard input: not UTF-8 text (byte 1)\n"


@pytest.mark.parametrize(
    "body, message",
    [
        ("x,w\n1,2\n3,zz\n", "row 3, column 'w': 'zz' is not a number"),
        (b"x,w\n1,2\n\xff,3\n", "not UTF-8 text (byte 8)"),
    ],
)
def test_points_files_with_bad_rows_name_the_row_and_column(tmp_path, body, message):
    path = tmp_path / "points.csv"
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    result = runner.invoke(app, ["eval", "x*w", "--points", str(path)])
    assert result.exit_code == 2
    assert result.stderr == f"error: --points {path}: {message}\n"


@pytest.mark.parametrize("option", ["-f", "--points"])
def test_missing_files_and_directories_are_named(tmp_path, option):
    args = ["eval", "x"] if option == "--points" else ["eval"]
    result = runner.invoke(app, [*args, option, str(tmp_path / "nope.txt")])
    assert result.exit_code == 2
    assert result.stderr == f"error: {option} {tmp_path / 'nope.txt'}: no such file\n"
    result = runner.invoke(app, [*args, option, str(tmp_path)])
    assert result.exit_code == 2
    if option == "--points":  # a folder is a data set (issue 18): this one has no data files
        assert (
            result.stderr == f"error: --points {tmp_path}: the folder has no .csv, .parquet, .arrow or .feather files\n"
        )
        return
    assert result.stderr == f"error: {option} {tmp_path}: is a directory\n"
