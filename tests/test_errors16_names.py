"""Issue 16: --at names the program does not use are a warning, a name given twice an error; ln, Pi,
'sin x' and a mistyped file.py:func get a "did you mean". Through the installed command."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

INSTALLED = Path(sys.executable).with_name("gradcli")
GRADCLI = [str(INSTALLED)] if INSTALLED.exists() else [shutil.which("gradcli") or "gradcli"]


def gradcli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*GRADCLI, *args], capture_output=True, text=True, timeout=120, cwd=cwd)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_an_unused_at_name_is_a_warning_with_a_suggestion():
    result = gradcli("eval", "x*y", "--at", "x=2,y=3,xx=5", "--json")
    assert result.returncode == 0
    assert json.loads(result.stdout) == {"value": 6.0, "gradient": {"x": 3.0, "y": 2.0}, "unused": ["xx"]}
    assert result.stderr == "warning: --at xx is not used by the expression (did you mean x?)\n"


def test_several_unused_names_and_one_without_a_suggestion():
    result = gradcli("eval", "x*y", "--at", "x=2,y=3,zzz=1,yy=4")
    assert result.returncode == 0
    assert result.stderr == "warning: --at zzz and yy are not used by the expression (yy: did you mean y?)\n"
    result = gradcli("eval", "x", "--at", "x=2,q=1", "--json")
    assert (result.returncode, result.stderr) == (0, "warning: --at q is not used by the expression\n")


@pytest.mark.parametrize(
    "command",
    [
        ["jacobian", "x*y"],
        ["hessian", "x*y"],
        ["check", "x*y", "--method", "fd"],
        ["graph", "x*y", "--format", "text"],
        ["diff", "x*y"],
        ["eval", "x*y"],
    ],
)
def test_every_command_warns(command):
    result = gradcli(*command, "--at", "x=2,y=3,xx=5")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[0] == "warning: --at xx is not used by the expression (did you mean x?)"


def test_a_missing_name_is_the_error_without_the_warning():
    result = gradcli("eval", "x", "--at", "xx=3")
    assert result.returncode == 2
    assert result.stderr == "error: missing value for 'x'; did you mean 'xx'?: give it with --at x=...\n  x\n  ^\n"


def test_a_python_function_parameter_unused(tmp_path):
    (tmp_path / "f.py").write_text("def func2(x):\n    return x * x\n")
    result = gradcli("eval", "f.py:func2", "--at", "x=3,y=1", "--json", cwd=tmp_path)
    assert result.returncode == 0
    assert json.loads(result.stdout) == {"value": 9.0, "gradient": {"x": 6.0}, "unused": ["y"]}
    assert result.stderr == "warning: --at y is not used by the expression\n"


def test_a_name_given_twice_is_an_error():
    result = gradcli("eval", "x", "--at", "x=1,x=2")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "error: --at x is given twice: give each name one value\n  x=1,x=2\n      ^\n"
    result = gradcli("eval", "x", "--at", "x=1", "--at", "x=2")
    assert result.returncode == 2 and result.stderr.startswith("error: --at x is given twice")


@pytest.mark.parametrize(
    "expression,said",
    [
        ("ln(x)", "error: unknown function 'ln'; did you mean 'log'?\n  ln(x)\n  ^\n"),
        ("Pi*x", "error: missing value for 'Pi'; did you mean 'pi'?: give it with --at Pi=...\n  Pi*x\n  ^\n"),
        ("sin x", "error: missing parentheses after sin at column 5; did you mean sin(x)?\n  sin x\n      ^\n"),
        ("2*exp 3", "error: missing parentheses after exp at column 7; did you mean exp(3)?\n  2*exp 3\n        ^\n"),
        ("y x", "error: missing operator before 'x' at column 3 (write y*x for a product)\n  y x\n    ^\n"),
    ],
)
def test_did_you_mean(expression, said):
    result = gradcli("eval", expression, "--at", "x=1,y=2")
    assert (result.returncode, result.stderr) == (2, said)


def test_a_mistyped_function_of_a_file(tmp_path):
    (tmp_path / "f.py").write_text("def func2(x):\n    return x * x\n\ndef other(x):\n    return x\n")
    result = gradcli("eval", "f.py:func", "--at", "x=1", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (2, "error: f.py has no function 'func'; did you mean 'func2'?\n")
    result = gradcli("eval", "--python", "f.py:zzz", "--at", "x=1", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (2, "error: f.py has no function 'zzz'\n")
