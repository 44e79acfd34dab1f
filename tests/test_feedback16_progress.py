"""Issue 16, feedback on long work: a spinner on stderr while SymPy, a check, Graphviz or ``--points``
work, only when stderr is a terminal (tested in a real pseudo-terminal), only after half a second,
never in a pipe or with ``--json``, and gone (erased) before the result or the error is written."""

from __future__ import annotations

import io
import os
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

posix_only = pytest.mark.skipif(os.name != "posix", reason="needs a pseudo-terminal")

GRADCLI = Path(sys.executable).with_name("gradcli")
COMMAND = [str(GRADCLI)] if GRADCLI.exists() else [sys.executable, "-m", "gradcli"]
#: 199 terms: SymPy runs for many seconds, so a --sympy-timeout of 2 s always expires (2 s: on a loaded
#: machine the display's own start, importing rich, takes a few tenths of a second after the 0.5 s delay)
# SymPy must outlast --sympy-timeout 2 on an idle machine too: 199 terms took 2.4 s with the checks, SymPy
# itself under 2 s, so the timeout was not reached; 599 terms keep SymPy well past it (the run is still ~2.6 s)
#: SymPy takes seconds on it (abs keeps it on SymPy's road: SymEngine would answer the rest at once)
HARD = " + ".join(f"sin({i}*x + y)*exp(x*{i}/100)" for i in range(1, 600)) + " + abs(x)"
CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_with_terminal_stderr(args: list[str], timeout: float = 120) -> tuple[int, str, str]:
    """Run the installed gradcli with stderr on a pseudo-terminal and stdout on a pipe:
    (exit code, stdout, everything written to the terminal, control sequences kept)."""
    import pty

    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        [*COMMAND, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=env
    )
    os.close(slave)
    terminal, out = b"", b""
    stdout = process.stdout.fileno()
    open_fds = {master, stdout}
    deadline = time.monotonic() + timeout
    while open_fds and time.monotonic() < deadline:  # both at once: a full stdout pipe would block the child
        ready, _, _ = select.select(list(open_fds), [], [], 0.1)
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                chunk = b""
            if not chunk:
                open_fds.discard(fd)
            elif fd == master:
                terminal += chunk
            else:
                out += chunk
        if not ready and process.poll() is not None and stdout not in open_fds:
            break
    process.stdout.close()
    code = process.wait(timeout=timeout)
    os.close(master)
    return code, out.decode(), terminal.decode("utf-8", errors="replace")


def run_piped(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def last_line(terminal: str) -> str:
    """What the terminal shows last: the spinner's line is erased, the message stays."""
    return CONTROL.sub("", terminal).replace("\r\n", "\n").split("\r")[-1].strip().splitlines()[-1]


TIMED_OUT = "error: SymPy took more than 2 s (--sympy-timeout raises the limit)"


@posix_only
def test_a_slow_diff_shows_a_spinner_on_a_terminal_and_erases_it():
    code, out, terminal = run_with_terminal_stderr(["diff", HARD, "--sympy-timeout", "2"])
    assert code == 2 and out == ""
    assert "running SymPy" in terminal  # shown after 0.5 s of the 2 s SymPy had
    assert "\x1b[2K" in terminal  # the line erased ...
    assert last_line(terminal) == TIMED_OUT  # ... before the error


@posix_only
def test_a_slow_check_shows_a_spinner_and_stdout_stays_clean():
    code, out, terminal = run_with_terminal_stderr(["check", HARD, "--at", "x=0.1,y=0.2", "--sympy-timeout", "2"])
    assert code == 0, out + terminal
    assert "checking the gradient" in terminal
    assert "checking" not in out and "\x1b" not in out  # the result on stdout is the plain one
    assert "sympy: skipped: SymPy took more than 2 s (--sympy-timeout raises the limit)" in out


def test_no_spinner_in_a_pipe():
    done = run_piped(["diff", HARD, "--sympy-timeout", "2"])
    assert done.returncode == 2
    assert done.stdout == "" and done.stderr == TIMED_OUT + "\n"


@posix_only
def test_no_spinner_with_json_even_on_a_terminal():
    code, out, terminal = run_with_terminal_stderr(
        ["check", HARD, "--at", "x=0.1,y=0.2", "--sympy-timeout", "2", "--json"]
    )
    assert code == 0
    assert "checking" not in terminal and "\x1b" not in terminal, terminal
    assert '"ok": true' in out


@posix_only
def test_a_quick_command_never_flashes_a_spinner():
    code, out, terminal = run_with_terminal_stderr(["jacobian", "x * y, x + y", "--at", "x=2,y=3"])
    assert code == 0
    assert out == "       x  y\nx * y  3  2\nx + y  1  1\n"
    assert terminal == ""  # not even the escape that hides the cursor


@posix_only
def test_many_points_written_to_a_pipe_show_a_count_on_the_terminal(tmp_path):
    rows = 50_000  # with a 50-element gradient: 2.5 million numbers, over a second of work
    points = tmp_path / "points.csv"
    points.write_text("x\n" + "0.5\n" * rows)
    vector = "v=[" + ",".join(str(i) for i in range(50)) + "]"
    code, out, terminal = run_with_terminal_stderr(["eval", "sum(x*v)", "--points", str(points), "--at", vector])
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == rows + 1 and lines[-1] == "0.5," + ",".join(
        [str(0.5 * sum(range(50))), "1225.0"] + ["0.5"] * 50
    )
    shown = CONTROL.sub("", terminal)
    assert "evaluating" in shown or "writing rows" in shown, shown[:300]
    assert terminal.endswith("\x1b[2K")  # erased at the end


# --- the helper itself, in-process -------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_working_shows_only_after_the_delay_and_only_on_a_terminal(monkeypatch):
    from gradcli.cli.progress import working

    monkeypatch.setenv("TERM", "xterm")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with working("quick work", delay=0.5):
        pass
    assert terminal.getvalue() == ""
    with working("slow work", delay=0.05) as work:
        time.sleep(0.4)
        work.say("slower work")
        time.sleep(0.3)
    assert "slow work" in terminal.getvalue() and "slower work" in terminal.getvalue()
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a pipe or a file
    with working("slow work", delay=0.05):
        time.sleep(0.3)
    assert sys.stderr.getvalue() == ""


def test_working_is_quiet_when_asked_or_on_a_dumb_terminal(monkeypatch):
    from gradcli.cli.progress import working

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("TERM", "xterm")
    with working("quiet work", delay=0.01, quiet=True):
        time.sleep(0.2)
    monkeypatch.setenv("TERM", "dumb")
    with working("dumb work", delay=0.01):
        time.sleep(0.2)
    assert terminal.getvalue() == ""


def test_a_count_goes_to_its_total_and_finish_ends_the_display_early(monkeypatch):
    from gradcli.cli.progress import working

    monkeypatch.setenv("TERM", "xterm")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with working("reading", delay=0.01) as work:
        time.sleep(0.2)
        work.count(10, "writing rows")
        for _ in range(10):
            time.sleep(0.05)
            work.advance()
        assert work.text() == "writing rows: 10 of 10"
        time.sleep(0.2)
        work.finish()
        shown = terminal.getvalue()
        time.sleep(0.3)
        assert terminal.getvalue() == shown  # nothing more once finished
    assert "reading" in shown and "writing rows: 10 of 10" in shown and shown.endswith("\x1b[2K")
    assert terminal.getvalue() == shown


def test_a_block_in_a_pipe_does_not_import_rich():
    """Rich is imported only for a terminal (there in the main thread: a display thread importing
    it while SymPy held the GIL showed nothing for seconds)."""
    code = (
        "import sys, time\n"
        "from gradcli.cli.progress import working\n"
        "class T:\n"
        "    def isatty(self): return False\n"
        "    def write(self, s): return len(s)\n"
        "    def flush(self): pass\n"
        "sys.stderr = T()\n"
        "with working('quick'):\n"
        "    time.sleep(0.05)\n"
        "print('rich' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "TERM": "xterm"}
    )
    assert done.stdout == "False\n", done.stderr


def test_a_warning_during_the_spinner_is_written_whole_above_it(monkeypatch):
    from gradcli.cli.progress import working

    monkeypatch.setenv("TERM", "xterm")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with working("busy", delay=0.05):
        time.sleep(0.4)
        sys.stderr.write("warning: something\n")
        time.sleep(0.2)
    assert sys.stderr is terminal  # given back
    text = terminal.getvalue()
    assert "\x1b[2Kwarning: something\n" in text  # on a line of its own, the spinner's erased first
    assert text.endswith("\x1b[2K")  # and the spinner's line erased at the end


@posix_only
@pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz's dot")
def test_graphviz_drawing_a_large_graph_shows_a_spinner(tmp_path, monkeypatch):
    # repeated terms are drawn as one group node, so dot is quick here: the display is asked to
    # show at once (GRADCLI_PROGRESS_DELAY), which is what a slow layout gets after half a second
    monkeypatch.setenv("GRADCLI_PROGRESS_DELAY", "0")
    large = " + ".join(f"sin({i}*x + y)*exp(x*{i})" for i in range(1, 60))  # 532 nodes
    picture = tmp_path / "g.svg"
    code, out, terminal = run_with_terminal_stderr(
        ["graph", large, "--at", "x=0.1,y=0.2", "--max-nodes", "2000", "-o", str(picture)]
    )
    assert code == 0 and out == ""
    assert "Graphviz is drawing 532 nodes" in terminal
    assert last_line(terminal) == f"wrote {picture} (532 nodes)"
    assert picture.read_text().lstrip().startswith("<?xml")
