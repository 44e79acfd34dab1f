"""Issue 16: a SymPy timeout means the same thing in every command that runs SymPy: one option
``--sympy-timeout`` with one default (the README's figure), the same words when it expires and for
a bad value. ``diff``, whose answer is SymPy's, exits 2; ``check`` reports SymPy as skipped with
those words and lets the other methods judge. Commands that do not run SymPy have no such option."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from gradcli.cli.app import app, command_names

ROOT = Path(__file__).resolve().parent.parent
GRADCLI = Path(sys.executable).with_name("gradcli")
COMMAND = [str(GRADCLI)] if GRADCLI.exists() else [sys.executable, "-m", "gradcli"]
#: SymPy needs many seconds (abs keeps it on SymPy's road: SymEngine would answer the rest at once)
HARD = " + ".join(f"sin({i}*x + y)*exp(x*{i})" for i in range(1, 200)) + " + abs(x)"
SAID = "SymPy took more than 0.2 s (--sympy-timeout raises the limit)"


def installed(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("GRADCLI_DEBUG", None)
    return subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=120, env=env)


def sympy_options() -> dict[str, Any]:
    group = typer.main.get_command(app)
    found = {}
    for name in command_names():
        for param in group.commands[name].params:
            if "--sympy-timeout" in getattr(param, "opts", ()):
                found[name] = param
    return found


def test_one_option_one_default_the_readme_says():
    from gradcli.check.symbolic import TIME_LIMIT
    from gradcli.cli.inputs import SYMPY_SECONDS

    options = sympy_options()
    assert set(options) == {"diff", "check"}
    assert {o.default for o in options.values()} == {SYMPY_SECONDS} == {TIME_LIMIT}
    assert len({o.help for o in options.values()}) == 1
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    said = re.search(r"`--sympy-timeout` seconds \((\d+(?:\.\d+)?)\)", readme)
    assert said and float(said[1]) == SYMPY_SECONDS
    assert f"SymPy took more than {SYMPY_SECONDS:g} s (--sympy-timeout raises the limit)" in readme


def test_diff_stops_with_exit_2():
    done = installed("diff", HARD, "--sympy-timeout", "0.2")
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"error: {SAID}\n")


def test_check_skips_sympy_with_the_same_words_and_the_others_judge():
    done = installed("check", HARD, "--at", "x=0.1,y=0.2", "--sympy-timeout", "0.2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"sympy: skipped: {SAID}" in done.stdout.splitlines()
    doc = json.loads(installed("check", HARD, "--at", "x=0.1,y=0.2", "--sympy-timeout", "0.2", "--json").stdout)
    assert doc["checks"]["sympy"] == {**doc["checks"]["sympy"], "ok": None, "reason": f"skipped: {SAID}"}
    assert doc["ok"] is True and doc["checks"]["finite_difference"]["ok"] is True


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan"])
def test_a_bad_limit_is_the_same_error_everywhere(value):
    said = {
        command: installed(command, "x^2", "--at", "x=1", f"--sympy-timeout={value}") for command in sympy_options()
    }
    for done in said.values():
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr == f"error: --sympy-timeout must be a positive number of seconds, got {float(value)}\n"


def test_commands_without_sympy_have_no_sympy_timeout():
    for command in set(command_names()) - set(sympy_options()):
        assert installed(command, "--sympy-timeout", "1", "x").returncode == 2, command
