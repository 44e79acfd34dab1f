"""Feedback on long work: a spinner on stderr (with a count, when the amount is known).

``with working("running SymPy"):`` around anything that may take more than about
half a second. It shows only when stderr is a terminal (never in a pipe, a file,
with ``--json`` or ``TERM=dumb``), and only once the work has run for ``DELAY``
seconds, so a quick command never flashes. It is transient: the line is erased
when the work ends, before the result is printed. Rich is imported only when
stderr is a terminal (in the main thread: a thread importing it while SymPy
holds the GIL took seconds), so pipes and JSON never import it.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

DELAY = 0.5  # seconds of work before anything is shown


def shown(quiet: bool = False) -> bool:
    """Whether feedback may be shown: stderr is a terminal that can redraw a line, and not ``quiet``."""
    if quiet or os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError, OSError):  # closed or replaced stderr
        return False


class Work:
    """What a ``working`` block can say while it runs: ``say`` a new text, ``count`` to a known
    amount and ``advance`` towards it, or ``finish`` early (before writing to a terminal's stdout)."""

    def __init__(self, what: str, total: int | None, delay: float) -> None:
        self.what = what
        self.total = total
        self.done = 0
        self._delay = delay
        self._ended = threading.Event()
        self._lock = threading.Lock()
        self._progress: Any = None
        self._task: Any = None
        self._thread: threading.Thread | None = None

    def text(self) -> str:
        return self.what if self.total is None else f"{self.what}: {self.done:,} of {self.total:,}"

    def say(self, what: str) -> None:
        self.what = what
        self._show()

    def count(self, total: int, what: str | None = None) -> None:
        self.total, self.done = total, 0
        self.say(self.what if what is None else what)

    def advance(self, amount: int = 1) -> None:
        self.done += amount
        self._show()

    def finish(self) -> None:
        """End the display now (it is erased); the rest of the block runs without it."""
        self._ended.set()
        with self._lock:
            if self._progress is not None:
                self._progress.stop()  # transient: the line is erased
                self._progress = None
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def _show(self) -> None:
        if self._progress is not None:
            with self._lock:
                if self._progress is not None:
                    self._progress.update(self._task, description=self.text())

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._show_when_due, name="gradcli-working", daemon=True)
        self._thread.start()

    def _show_when_due(self) -> None:
        if self._ended.wait(self._delay):
            return
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with self._lock:
            if self._ended.is_set():
                return
            console = Console(file=sys.stderr, highlight=False)
            # stderr written meanwhile (a warning) goes above the line, whole; stdout is left alone
            # (redirected, rich would print the command's results on stderr)
            progress = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                console=console, transient=True, redirect_stdout=False, redirect_stderr=True,
            )  # fmt: skip
            self._task = progress.add_task(self.text())
            progress.start()
            self._progress = progress


@contextmanager
def working(what: str, *, total: int | None = None, quiet: bool = False, delay: float | None = None) -> Iterator[Work]:
    """Show ``what`` with a spinner on stderr while the block runs, if it runs longer than ``delay``.

    ``total``: the amount of work, counted as ``work.advance(n)`` says (``12,000 of 50,000``).
    ``quiet`` (``--json``): nothing. Nothing either when stderr is not a terminal. Nothing may be
    written to a terminal's stdout while it shows: ``work.finish()`` first.
    """
    if delay is None:  # GRADCLI_PROGRESS_DELAY: seconds before the display shows (tests set 0)
        try:
            delay = max(0.0, float(os.environ.get("GRADCLI_PROGRESS_DELAY", DELAY)))
        except ValueError:
            delay = DELAY
    work = Work(what, total, delay)
    if not shown(quiet):
        yield work
        return
    # rich is imported here, not by the display's thread: a main thread busy in SymPy starves an
    # importing thread of the GIL for seconds (the spinner never showed); only on a terminal
    import rich.console  # noqa: F401
    import rich.progress  # noqa: F401

    work._start()
    try:
        yield work
    finally:
        work.finish()
