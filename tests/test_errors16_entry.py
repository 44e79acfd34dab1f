"""Issue 16, errors and entry: click's errors in gradcli's voice, --json errors, gradcli alone,
--version, help COMMAND, expressions starting with '-', shell completion. Through the installed command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

INSTALLED = Path(sys.executable).with_name("gradcli")
GRADCLI = [str(INSTALLED)] if INSTALLED.exists() else [shutil.which("gradcli") or "gradcli"]


def gradcli(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [*GRADCLI, *args], capture_output=True, text=True, input=stdin, env={**os.environ, **(env or {})}, timeout=120
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


# --- every error is one `error:` line, click's included ------------------------------------------

CLICK_ERRORS = [
    (["eval", "x", "--att", "x=1"], "error: no such option: --att; did you mean --at?\n"),
    (["evl", "x"], "error: no such command 'evl'; did you mean 'eval'?\n"),
    (["eval", "x", "--at", "x=1", "--wrt"], "error: option '--wrt' requires an argument\n"),
    (
        ["graph", "x", "--max-nodes", "abc"],
        "error: invalid value for '--max-nodes': 'abc' is not a count of nodes (N, or 0 or all: every node)\n",
    ),
    (["check", "x", "--rtol", "tiny"], "error: invalid value for '--rtol': 'tiny' is not a valid float\n"),
    (["ops", "--jsn"], "error: no such option: --jsn; did you mean --json?\n"),
    (["eval", "x", "y"], "error: got unexpected extra argument(s) (y)\n"),
]


@pytest.mark.parametrize("args,said", CLICK_ERRORS, ids=[" ".join(a) for a, _ in CLICK_ERRORS])
def test_click_errors_are_one_error_line_exit_2(args, said):
    result = gradcli(*args)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", said)


JSON_ERRORS = [
    (["eval", "x", "--att", "x=1", "--json"], "no such option: --att; did you mean --at?"),
    (
        ["diff", "x", "--json", "--sympy-timeout", "abc"],
        "invalid value for '--sympy-timeout': 'abc' is not a valid float",
    ),
    (
        ["graph", "x", "--json", "--max-nodes", "abc"],
        "invalid value for '--max-nodes': 'abc' is not a count of nodes (N, or 0 or all: every node)",
    ),
    (["eval", "x[", "--json"], "expected ']' to close '[' at column 2"),  # the fast path's own error
    (["jacobian", "x", "--at", "x=1", "--mode", "bogus", "--json"], "--mode bogus: use auto, forward or reverse"),
    (["hessian", "x*y", "--at", "x=1", "--json"], "missing value for 'y': give it with --at y=..."),
    (["check", "x^2", "--at", "x=1", "--bogus", "--json"], "no such option: --bogus; did you mean --jobs?"),
    (["ops", "--json", "--x"], "no such option: --x"),
    (["eval", "x", "--at", "x=1,x=2", "--json"], "--at x is given twice: give each name one value"),
]


@pytest.mark.parametrize("args,message", JSON_ERRORS, ids=[" ".join(a) for a, _ in JSON_ERRORS])
def test_json_errors_are_also_one_json_object_on_stdout(args, message):
    result = gradcli(*args)
    assert result.returncode == 2
    assert json.loads(result.stdout) == {"error": message, "exit_code": 2}
    assert result.stdout.count("\n") == 1
    assert result.stderr.startswith(f"error: {message}\n")


def test_json_error_keeps_the_exit_code_of_a_missing_program(capsys):
    """The one place errors are said (reported -> say_error) gives the JSON object its exit code."""
    from gradcli.cli.report import errors_as_json, reported
    from gradcli.errors import MissingProgram

    errors_as_json(True)
    try:
        with pytest.raises(SystemExit) as ended, reported():
            raise MissingProgram("PNG output needs Graphviz's dot program")
    finally:
        errors_as_json(False)
    assert ended.value.code == 3
    out, err = capsys.readouterr()
    assert json.loads(out) == {"error": "PNG output needs Graphviz's dot program", "exit_code": 3}
    assert err == "error: PNG output needs Graphviz's dot program\n"


def test_without_json_stdout_stays_empty_on_error():
    result = gradcli("eval", "x +", "--at", "x=1")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: ")


# --- entry: gradcli alone, --version, help COMMAND ------------------------------------------------


def test_gradcli_alone_prints_the_help_and_exits_0():
    result = gradcli()
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.startswith("Usage: gradcli [OPTIONS] COMMAND [ARGS]...")
    for command in ("eval", "diff", "graph", "jacobian", "hessian", "check", "ops", "help"):
        assert f"  {command} " in result.stdout


def test_version():
    from gradcli import __version__

    for flag in ("--version", "-V"):
        result = gradcli(flag)
        assert (result.returncode, result.stdout, result.stderr) == (0, f"gradcli {__version__}\n", "")


def test_version_verbose_names_python_numpy_sympy_and_dot():
    import platform
    from importlib import metadata

    from gradcli import __version__

    result = gradcli("--version", "--verbose")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[:4] == [
        f"gradcli {__version__}",
        f"Python {platform.python_version()}",
        f"NumPy {metadata.version('numpy')}",
        f"SymPy {metadata.version('sympy')}",
    ]
    if shutil.which("dot"):
        said = subprocess.run(["dot", "-V"], capture_output=True, text=True).stderr
        assert lines[4].startswith("Graphviz dot ") and lines[4].split()[-1] in said
    assert len(lines) == 5


def test_version_verbose_without_dot(tmp_path):
    result = gradcli("--version", "--verbose", env={"PATH": str(tmp_path)})
    assert result.returncode == 0
    assert result.stdout.splitlines()[-1] == "Graphviz dot not found (needed for png, svg, pdf and html graphs)"


def test_verbose_alone_is_an_error():
    result = gradcli("--verbose")
    assert (result.returncode, result.stderr) == (
        2,
        "error: --verbose goes with --version (gradcli --version --verbose)\n",
    )


def test_help_command():
    for command in ("eval", "jacobian", "check", "ops"):
        assert gradcli("help", command).stdout == gradcli(command, "--help").stdout
    assert gradcli("help").stdout == gradcli("--help").stdout == gradcli().stdout
    result = gradcli("help", "evl")
    assert (result.returncode, result.stdout, result.stderr) == (
        2,
        "",
        "error: no such command 'evl'; did you mean 'eval'?\n",
    )


# --- an expression starting with '-' ----------------------------------------------------------------

DASHED = [
    (["eval", "-x^2", "--at", "x=3", "--json"], {"value": -9.0, "gradient": {"x": -6.0}}),
    (["eval", "--at", "x=3", "-x^2", "--json"], {"value": -9.0, "gradient": {"x": -6.0}}),
    (["eval", "--json", "-sin(x)", "--at", "x=0"], {"value": -0.0, "gradient": {"x": -1.0}}),
    (["eval", "-1*x", "--at", "x=2", "--json"], {"value": -2.0, "gradient": {"x": -1.0}}),
    (["eval", "-x", "--at=x=2", "--wrt", "x", "--json"], {"value": -2.0, "gradient": {"x": -1.0}}),
    (["eval", "--", "-x^2", "--at", "x=3", "--json"], {"value": -9.0, "gradient": {"x": -6.0}}),
    (["jacobian", "-x*y", "--at", "x=2,y=3", "--json"], None),
]


@pytest.mark.parametrize("args,expected", DASHED, ids=[" ".join(a) for a, _ in DASHED])
def test_an_expression_may_start_with_a_dash(args, expected):
    result = gradcli(*args)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    if expected is None:
        assert document["jacobian"] == [[-3.0, -2.0]]
    else:
        assert document == expected


def test_dashed_expression_with_a_file_option(tmp_path):
    program = tmp_path / "p.txt"
    program.write_text("x^2\n")
    both = gradcli("eval", "-x^2", "-f", str(program), "--at", "x=1")
    assert (both.returncode, both.stderr) == (
        2,
        "error: give the expression either as EXPR or with -f FILE, not both\n",
    )
    alone = gradcli("eval", f"-f{program}", "--at", "x=3", "--json")  # -fFILE stays the option
    assert json.loads(alone.stdout) == {"value": 9.0, "gradient": {"x": 6.0}}


def test_a_mistyped_long_option_is_still_an_error():
    result = gradcli("eval", "-x^2", "--att", "x=3")
    assert (result.returncode, result.stderr) == (2, "error: no such option: --att; did you mean --at?\n")
    result = gradcli("eval", "x", "-q")  # after the expression, a short word is an option
    assert (result.returncode, result.stderr) == (2, "error: no such option: -q\n")


def test_dash_expression_in_process():
    """The same through typer's test runner (the group itself reads the expression)."""
    from typer.testing import CliRunner

    from gradcli.cli.app import app

    result = CliRunner().invoke(app, ["eval", "-x^2", "--at", "x=3", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout) == {"value": -9.0, "gradient": {"x": -6.0}}
    result = CliRunner().invoke(app, ["eval", "x", "--att", "x=3", "--json"])
    assert result.exit_code == 2
    assert json.loads(result.stdout) == {"error": "no such option: --att; did you mean --at?", "exit_code": 2}


# --- shell completion -----------------------------------------------------------------------------


def complete_bash(words: str) -> list[str]:
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    result = gradcli(env={"_GRADCLI_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)})
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_completion_of_commands_options_and_values():
    from gradcli.cli.app import command_names  # the registry: a new command (plot) is completed too

    assert complete_bash("gradcli ") == command_names()
    assert command_names()[:7] == ["eval", "diff", "graph", "jacobian", "hessian", "check", "ops"]
    assert complete_bash("gradcli ev") == ["eval"]
    assert complete_bash("gradcli eval x --w") == ["--wrt"]
    assert complete_bash("gradcli graph x --format ") == ["tree", "text", "dot", "png", "svg", "pdf", "html", "json"]
    assert complete_bash("gradcli graph x --format s") == ["svg"]
    assert complete_bash("gradcli jacobian x --mode ") == ["auto", "forward", "reverse"]
    assert complete_bash("gradcli help ja") == ["jacobian"]


def test_completion_of_function_names_in_expr():
    from gradcli.lang.functions import FUNCTIONS

    assert complete_bash("gradcli eval x*si") == ["x*" + n for n in FUNCTIONS if n.startswith("si")]
    assert "x*sin" in complete_bash("gradcli eval x*si") and "x*sinh" in complete_bash("gradcli eval x*si")
    assert complete_bash("gradcli check tan") == [n for n in FUNCTIONS if n.startswith("tan")]


def test_completion_zsh_and_fish():
    zsh = gradcli(env={"_GRADCLI_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "gradcli graph x --format p"})
    assert '"png"' in zsh.stdout and '"pdf"' in zsh.stdout and '"svg"' not in zsh.stdout
    fish = gradcli(
        env={
            "_GRADCLI_COMPLETE": "complete_fish",
            "_TYPER_COMPLETE_ARGS": "gradcli eval cos",
            "_TYPER_COMPLETE_FISH_ACTION": "get-args",
        }
    )
    assert fish.stdout.split() == ["cos", "cosh"]


def test_show_completion_prints_a_script():
    # the shell named, not detected: detection reads the parent process, which under a test runner
    # (or `timeout`) is no shell
    result = gradcli("--show-completion", "bash", env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert result.returncode == 0
    assert "_gradcli_completion" in result.stdout and "_GRADCLI_COMPLETE=complete_bash" in result.stdout
    assert "--install-completion" in gradcli("--help").stdout


# --- in a terminal ----------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_in_a_terminal_help_and_errors_are_the_same():
    import pty  # noqa: F401 - posix only

    def in_terminal(*args: str) -> tuple[int, str]:
        main, child = os.openpty()
        process = subprocess.Popen(
            [*GRADCLI, *args], stdin=child, stdout=child, stderr=child, env={**os.environ, "COLUMNS": "100"}
        )
        os.close(child)
        chunks = []
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(main)
        return process.wait(timeout=60), b"".join(chunks).decode().replace("\r\n", "\n")

    code, text = in_terminal()
    assert code == 0 and text.startswith("Usage: gradcli [OPTIONS] COMMAND [ARGS]...")
    code, text = in_terminal("eval", "x", "--att", "x=1")
    assert (code, text) == (2, "error: no such option: --att; did you mean --at?\n")
    code, text = in_terminal("eval", "-x^2", "--at", "x=3", "--json")
    assert (code, json.loads(text)) == (0, {"value": -9.0, "gradient": {"x": -6.0}})
