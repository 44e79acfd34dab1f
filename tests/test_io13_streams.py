"""Issue 13: closed, full and narrow standard streams, run as real processes of the installed gradcli.

Each case is one shell line (the redirections are the shell's), run with bash: a closed or full
stream gives one ``error:`` line and exit code 2, or exit 0 where nothing was lost, and never a
traceback or an internal error.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GRADCLI = shutil.which("gradcli", path=str(Path(sys.executable).parent)) or shutil.which("gradcli")
pytestmark = [
    pytest.mark.skipif(GRADCLI is None, reason="the gradcli console script is not installed"),
    pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash for the redirections"),
]
HAS_FULL = os.path.exists("/dev/full")


def shell(line: str, **env: str) -> subprocess.CompletedProcess:
    """Run ``gradcli ARGS`` with the shell redirections in ``line`` (``{g}`` is the program)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("GRADCLI_", "PYTHONIOENCODING"))}
    environment.update(env)
    environment.pop("COLUMNS", None)
    return subprocess.run(
        ["bash", "-c", line.format(g=shlex.quote(GRADCLI))],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )


def one_error(stderr: str, text: str) -> None:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ") and text in lines[0], stderr
    assert "internal error" not in stderr and "Traceback" not in stderr


def test_closed_stdin_is_one_error_and_exit_2():
    done = shell("{g} eval - --at x=1 <&-")
    assert done.returncode == 2
    assert done.stdout == ""
    one_error(done.stderr, "standard input is closed")


def test_closed_stdin_does_not_matter_when_it_is_not_read():
    done = shell("{g} eval 'x^2' --at x=3 --json <&-")
    assert done.returncode == 0
    assert json.loads(done.stdout) == {"value": 9.0, "gradient": {"x": 6.0}}


@pytest.mark.parametrize("command", ["eval 'x^2' --at x=3", "jacobian 'x*y' --at x=1,y=2 --json", "--help"])
def test_closed_stdout_is_one_error_and_exit_2(command):
    done = shell(f"{{g}} {command} >&-")
    assert done.returncode == 2
    one_error(done.stderr, "standard output is closed")


def test_closed_stdout_is_no_error_when_nothing_goes_to_it(tmp_path):
    target = tmp_path / "g.dot"
    done = shell(f"{{g}} graph 'x*2' --at x=1 -o {shlex.quote(str(target))} >&-")
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"wrote {target} (3 nodes)\n"
    assert target.read_text().startswith("digraph")


@pytest.mark.skipif(not HAS_FULL, reason="no /dev/full")
@pytest.mark.parametrize("command", ["eval 'x^2' --at x=3", "hessian 'x^2*y' --at x=1,y=2 --json",
                                     "check 'x^2' --at x=1 --expect x=3*x", "--help"])  # fmt: skip
def test_full_stdout_is_one_error_and_exit_2(command):
    done = shell(f"{{g}} {command} >/dev/full")
    assert done.returncode == 2  # even for check's mismatch: its verdict was lost
    one_error(done.stderr, "cannot write the result to standard output (No space left on device)")


@pytest.mark.skipif(not HAS_FULL, reason="no /dev/full")
def test_full_stdout_with_many_rows(tmp_path):
    points = tmp_path / "p.csv"
    points.write_text("x\n" + "\n".join(map(str, range(20_000))) + "\n")
    done = shell(f"{{g}} eval 'x^2' --points {shlex.quote(str(points))} >/dev/full")
    assert done.returncode == 2
    one_error(done.stderr, "No space left on device")


def test_an_encoding_that_cannot_show_the_result_is_one_error():
    done = shell("{g} eval 'θ^2' --at θ=1", PYTHONIOENCODING="ascii")
    assert done.returncode == 2
    assert done.stdout == ""
    one_error(done.stderr, "standard output's encoding (ascii) cannot show")
    assert "PYTHONIOENCODING=utf-8" in done.stderr


def test_json_escapes_what_the_encoding_cannot_show_and_loses_nothing():
    done = shell("{g} eval 'θ^2' --at θ=3 --json", PYTHONIOENCODING="ascii")
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"value": 9.0, "gradient": {"\\u03b8": 6.0}}\n'
    assert json.loads(done.stdout) == {"value": 9.0, "gradient": {"θ": 6.0}}


@pytest.mark.skipif(shutil.which("script") is None, reason="needs script(1) for a terminal")
def test_a_terminal_in_ascii_shows_d_not_the_partial_sign():
    done = shell("script -qec \"{g} eval 'x^2' --at x=3\" /dev/null", PYTHONIOENCODING="ascii", TERM="xterm")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "d/dx" in done.stdout and "internal error" not in done.stdout


@pytest.mark.parametrize(
    ("command", "code"),
    [
        ("check 'x^2' --at x=1 --expect x=3*x", 1),  # a mismatch: 1, as documented
        ("eval 'x^' --at x=1", 2),
    ],
)
def test_closed_stderr_keeps_the_documented_exit_code(command, code):
    done = shell(f"{{g}} {command} 2>&-")
    assert done.returncode == code
    assert done.stderr == ""


def test_closed_stdout_and_stderr_still_exit_2():
    done = shell("{g} eval 'x' --at x=1 >&- 2>&-")
    assert done.returncode == 2


@pytest.mark.parametrize("command", ["ops", "eval 'x^2' --points {p} --json", "jacobian 'x*2' --at x=[{v}]"])
def test_a_reader_that_leaves_is_no_error(tmp_path, command):
    points = tmp_path / "p.csv"
    points.write_text("x\n" + "\n".join(map(str, range(100_000))) + "\n")
    vector = ",".join(map(str, range(300)))
    line = "{g} " + command.format(p=shlex.quote(str(points)), v=vector) + " | head -c1; exit ${{PIPESTATUS[0]}}"
    done = shell(line)
    assert done.returncode == 0
    assert len(done.stdout) == 1
    assert done.stderr == ""


def test_endless_input_is_refused_after_the_limit():
    done = shell("{g} eval -f /dev/zero --at x=1")
    assert done.returncode == 2
    one_error(done.stderr, "/dev/zero is longer than the limit of 20,000,000 characters")
    done = shell("{g} eval - --at x=1 < /dev/zero")
    assert done.returncode == 2
    one_error(done.stderr, "<stdin> is longer than the limit of 20,000,000 characters")
