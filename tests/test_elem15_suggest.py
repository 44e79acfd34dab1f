"""Issue 15: typos and other notations suggest the language's name (ln -> log, Pi -> pi)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gradcli.lang.evaluate import suggest


def _eval(*args):
    return subprocess.run([sys.executable, "-m", "gradcli", "eval", *args], capture_output=True, text=True)


@pytest.mark.parametrize(
    "expr, first_line",
    [
        ("ln(x)", "error: unknown function 'ln'; did you mean 'log'?"),
        ("Pi*x", "error: missing value for 'Pi'; did you mean 'pi'?: give it with --at Pi=..."),
        ("PI + x", "error: missing value for 'PI'; did you mean 'pi'?: give it with --at PI=..."),
        ("arctanh(x)", "error: unknown function 'arctanh'; did you mean 'atanh'?"),
        ("Sin(x)", "error: unknown function 'Sin'; did you mean 'sin'?"),
        ("sinn(x)", "error: unknown function 'sinn'; did you mean 'sin'?"),  # spelling distance, as before
        ("y + x", "error: missing value for 'y': give it with --at y=..."),  # nothing close: no hint
    ],
)
def test_eval_suggests_the_language_name(expr, first_line):
    out = _eval(expr, "--at", "x=0.5")
    assert out.returncode == 2
    assert out.stderr.splitlines()[0] == first_line
    assert "Traceback" not in out.stderr


def test_an_alias_is_offered_only_when_its_target_is_a_candidate():
    assert suggest("ln", ["log", "exp"]) == "; did you mean 'log'?"
    assert suggest("ln", ["x", "y"]) == ""
    assert suggest("Pi", ["x", "pi", "e"]) == "; did you mean 'pi'?"
    assert suggest("pi", ["x"]) == ""
