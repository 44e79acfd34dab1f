"""check on a terminal too narrow for its table (issue 27's walk through the README: the default 80 columns).

A table with an expected column needs about 120 columns. It fell back to plain lines that the terminal folded
mid-number ("0.909297|4268") and a verdict folded mid-word. On a terminal it now shows a record per element,
as psql's expanded display does, and wraps the notes and the verdict between words; a pipe still gets every
row whole on one line, and a wide terminal the table.
"""

from __future__ import annotations

import sys

import pytest
from terminal import gradcli_on_terminal

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")

ARGS = ["check", "x^2*sin(y)", "--at", "x=0.5,y=2", "--expect", "x=2*x*sin(y)", "--expect", "y=x^2*cos(y)"]
ARGS += ["--method", "fd,complex"]  # (no SymPy: the test stays quick)


def test_a_narrow_terminal_gets_a_record_per_element_and_no_folded_number():
    code, out, _ = gradcli_on_terminal(ARGS, columns=80)
    assert code == 0, out
    lines = out.rstrip("\n").split("\n")
    assert max(len(line) for line in lines) <= 80, out
    assert "d/dx" in lines and "d/dy" in lines, out
    assert "  autograd            0.9092974268" in lines, out
    assert "  expected            -0.1040367091" in lines, out
    assert "  ok                  ok" in lines, out
    assert lines[-2:] == [  # the verdict broken between words
        "OK: autograd agrees with finite differences, complex step, expected (largest",
        "  relative error 2.7e-14)",
    ], out


def test_a_wide_terminal_keeps_the_table():
    code, out, _ = gradcli_on_terminal(ARGS, columns=160)
    assert code == 0, out
    assert "┃ finite differences ┃" in out, out
    assert "  autograd            " not in out


def test_a_pipe_keeps_every_row_whole_on_its_line():
    import subprocess

    done = subprocess.run([sys.executable, "-m", "gradcli", *ARGS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()
    assert rows[1].startswith("d/dx   0.9092974268256817") and rows[2].startswith("d/dy  -0.1040367091367856"), rows
