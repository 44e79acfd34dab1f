"""gradcli on a pseudo-terminal, for the tests of what a terminal shows (one helper for every file).

The output is read while gradcli writes it: a terminal holds only a few KB, so reading after the
process ends would block a large table for ever.
"""

from __future__ import annotations

import os
import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def on_terminal(
    command: list[str], columns: int = 80, *, term: str = "xterm-256color", no_color: bool = False
) -> tuple[int, str, str]:
    """(exit code, output without escape codes, raw output) of ``command`` (argv) run on a
    pseudo-terminal ``columns`` wide; stdout and stderr both go to the terminal."""
    import pty

    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50", "TERM": term}
    # no progress display unless a test asks for one (GRADCLI_PROGRESS_DELAY set): on a loaded machine
    # SymPy outlasts the display's 0.5 s delay, and its escape codes land in what the test reads
    env.setdefault("GRADCLI_PROGRESS_DELAY", "3600")
    env.pop("NO_COLOR", None)
    if no_color:
        env["NO_COLOR"] = "1"
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command on the terminal
        os.execve(command[0], command, env)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the terminal's other end is closed: everything is read
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    raw = out.decode("utf-8", errors="replace").replace("\r\n", "\n")
    return os.waitstatus_to_exitcode(status), ANSI.sub("", raw), raw


def gradcli_on_terminal(args: list[str], columns: int = 80, **options: object) -> tuple[int, str, str]:
    """``python -m gradcli ARGS`` on a pseudo-terminal: see :func:`on_terminal`."""
    return on_terminal([sys.executable, "-m", "gradcli", *args], columns, **options)  # type: ignore[arg-type]
