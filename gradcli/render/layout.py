"""Running Graphviz's ``dot``: bounded in time, never outliving gradcli, its messages in our words.

``dot`` lays a graph out in time that grows steeply with long edges (each edge that
skips k ranks becomes k virtual nodes, and edge labels double the ranks), so a
picture of a few hundred nodes could run for minutes. The run is given a time limit
(``--layout-timeout``); SIGINT and SIGTERM end the child with the parent, and on Linux
the child is also told to die when its parent does (a SIGKILL leaves no orphan either).
What ``dot`` prints on stderr becomes one Python warning (``RenderWarning``) that the
CLI shows as one ``warning:`` line.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ..errors import MissingProgram, UsageError, printable

LAYOUT_TIMEOUT = 30.0  # seconds: the default of --layout-timeout
_limit: ContextVar[float | None] = ContextVar("layout_timeout", default=LAYOUT_TIMEOUT)


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Pictures drawn in the block give dot ``seconds`` (None: no limit) instead of ``LAYOUT_TIMEOUT``."""
    token = _limit.set(checked_limit(seconds))
    try:
        yield
    finally:
        _limit.reset(token)


def checked_limit(seconds: float | None) -> float | None:
    """``seconds`` if it is a usable time limit (a finite number > 0, or None), else a UsageError."""
    if seconds is not None and not (seconds > 0 and seconds < float("inf")):
        raise UsageError(f"--layout-timeout must be a finite number of seconds > 0, not {seconds!r}")
    return seconds


RANKDIRS = ("TB", "LR")


def checked_rankdir(rankdir: str | None) -> str | None:
    """``TB`` or ``LR`` (any case), or None for the direction chosen from the graph's shape."""
    if rankdir is None:
        return None
    if rankdir.upper() not in RANKDIRS:
        raise UsageError(f"--rankdir must be TB (top to bottom) or LR (left to right), not {rankdir!r}")
    return rankdir.upper()


def current_limit() -> float | None:
    return _limit.get()


class RenderWarning(UserWarning):
    """Something Graphviz said while drawing (the picture was still made)."""


def run_dot(
    source: str,
    fmt: str,
    timeout: float | None = LAYOUT_TIMEOUT,
    nodes: int | None = None,
    options: tuple[str, ...] = (),
    engine: str = "dot",
    wanted: str | None = None,
) -> bytes:
    """The picture ``dot -T<fmt>`` draws from ``source``, within ``timeout`` seconds (None: no limit);
    ``wanted``: the format the user asked for, named if Graphviz is missing (``fmt`` may be a step)."""
    program = shutil.which(engine)
    if program is None:
        raise MissingProgram(
            f"{(wanted or fmt).upper()} output needs Graphviz's dot program: install it (Debian/Ubuntu: apt-get install graphviz; "
            "macOS: brew install graphviz); --format dot writes the DOT text without it"
        )
    with _ended_on_signals() as children:
        try:
            with warnings.catch_warnings():  # JAX, once loaded, warns at every fork: this one only execs dot
                warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
                child = subprocess.Popen(
                    [program, f"-T{fmt}", *options],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    preexec_fn=_die_with_parent(),  # noqa: PLW1509 - async-signal-safe: one prctl call
                )
        except OSError as exc:
            raise MissingProgram(f"cannot run Graphviz's dot ({program}): {exc.strerror or exc}") from None
        children.append(child)
        try:
            picture, messages = child.communicate(source.encode("utf-8"), timeout=timeout)
        except subprocess.TimeoutExpired:
            size = f"{nodes:,} nodes" if nodes is not None else "the graph"
            raise UsageError(
                f"Graphviz's dot did not finish laying out {size} within {timeout:g} s (--layout-timeout): "
                "show fewer with --max-nodes, allow more time with --layout-timeout, "
                "or write --format dot, text or json, which need no layout"
            ) from None
    said = _graphviz_said(messages.decode("utf-8", errors="replace"))
    if child.returncode != 0:
        raise UsageError(f"Graphviz's dot could not draw the graph: {said or f'exit code {child.returncode}'}")
    if said:
        warnings.warn(said, RenderWarning, stacklevel=2)
    return picture


_SCALED = re.compile(r"too large for cairo-renderer bitmaps\. Scaling by ([\d.eE+-]+) to fit")


MAX_SIDE = 8000  # pixels: the most a bitmap picture has on a side
MAX_PIXELS = 30_000_000  # and in all
DPI = 96  # Graphviz's own for bitmaps


LAYOUTS_KEPT = 4  # graphs whose layout is kept for the next format drawn of them (a page and its PNG)
#: dot's path and the DOT source -> (the source laid out, what dot said)
_laid: OrderedDict[str, tuple[str, list[str]]] = OrderedDict()


def laid_out(
    source: str, timeout: float | None, nodes: int | None = None, wanted: str | None = None
) -> tuple[str, list[str]]:
    """``source`` laid out by dot (``-Tdot``: the same graph with every position), computed once for
    every format drawn of it: the last ``LAYOUTS_KEPT`` layouts are kept, by their source, so a page,
    its PNG, SVG and PDF cost one layout. With what dot said while laying out, for each use to say."""
    key = f"{shutil.which('dot')}\n{source}"  # (another dot lays out anew)
    found = _laid.get(key)
    if found is None:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            laid = run_dot(source, "dot", timeout, nodes, wanted=wanted).decode("utf-8")
        found = (laid, [str(message.message) for message in said])
        _laid[key] = found
        while len(_laid) > LAYOUTS_KEPT:
            _laid.popitem(last=False)
    else:
        _laid.move_to_end(key)
    return found


def _box(laid: str, said: list[str]) -> tuple[float, float] | None:
    """The laid-out graph's width and height in inches (its bounding box), and what dot said while
    laying it out said now; None if it is not a layout we can read (nothing said: dot draws anew)."""
    box = re.search(r'\bbb="([\d.]+),([\d.]+),([\d.]+),([\d.]+)"', laid)
    if box is None:
        return None
    for message in said:
        warnings.warn(message, RenderWarning, stacklevel=3)
    return (float(box.group(3)) - float(box.group(1))) / 72, (float(box.group(4)) - float(box.group(2))) / 72


LEGIBLE_PX = 10  # pixels: the smallest text a picture may draw at 100%
_FONT = re.compile(r'\b(?:fontsize|point-size)="?([\d.]+)')


def smallest_font(source: str) -> float:
    """The smallest text of a DOT source (laid out or not), in points: its ``fontsize`` attributes and
    the ``point-size`` of its HTML labels (14, Graphviz's default, when it sets none)."""
    return min((float(size) for size in _FONT.findall(source)), default=14.0)


def bitmap_dpi(laid: str) -> tuple[float, float]:
    """(the resolution a PNG of the laid-out graph ``laid`` is drawn at: ``DPI``, or less to stay within
    ``MAX_SIDE`` on a side and ``MAX_PIXELS`` in all; the least at which its smallest text is
    ``LEGIBLE_PX``). The picture can be read when the first is at least the second."""
    needed = LEGIBLE_PX * 72 / smallest_font(laid)
    box = re.search(r'\bbb="([\d.]+),([\d.]+),([\d.]+),([\d.]+)"', laid)
    if box is None:
        return float(DPI), needed
    width, height = (float(box.group(3)) - float(box.group(1))) / 72, (float(box.group(4)) - float(box.group(2))) / 72
    dpi = float(DPI)
    if width > 0 and height > 0:
        side = MAX_SIDE - 16  # dot adds a few pixels of margin
        dpi = min(dpi, side / width, side / height, (MAX_PIXELS / (width * height)) ** 0.5 * 0.99)
    return dpi, needed


def drawn(source: str, fmt: str, timeout: float | None, nodes: int | None = None, wanted: str | None = None) -> bytes:
    """The picture of ``source`` in ``fmt`` (SVG, PDF; PNG: ``bitmap``) from its one layout
    (``laid_out``): ``neato -n2`` draws the laid-out graph without laying it out again."""
    import time

    start = time.monotonic()
    laid, said = laid_out(source, timeout, nodes, wanted or fmt)
    if _box(laid, said) is None:  # not a layout we can read: dot draws the picture itself
        return run_dot(source, fmt, timeout, nodes, wanted=wanted)
    left = None if timeout is None else max(timeout - (time.monotonic() - start), 1.0)
    return run_dot(laid, fmt, left, nodes, options=("-n2",), engine="neato", wanted=wanted)


def bitmap(source: str, fmt: str, timeout: float | None, nodes: int | None = None) -> bytes:
    """A PNG no larger than ``MAX_SIDE`` on a side and ``MAX_PIXELS`` in all: dot lays the graph out
    once (``laid_out``, shared with the other formats), the resolution that fits is worked out from
    the layout's bounding box, and ``neato -n2`` draws the laid-out graph at it (no second layout).
    A picture drawn smaller than its full size says so in one warning."""
    import time

    start = time.monotonic()
    laid, said = laid_out(source, timeout, nodes, wanted=fmt)
    box = _box(laid, said)
    if box is None:  # not a layout we can read: dot draws the picture itself
        return run_dot(source, fmt, timeout, nodes)
    width, height = box
    full = (round(width * DPI), round(height * DPI))
    dpi, legible = bitmap_dpi(laid)
    left = None if timeout is None else max(timeout - (time.monotonic() - start), 1.0)
    picture = run_dot(laid, fmt, left, nodes, options=("-n2", f"-Gdpi={dpi:.3f}"), engine="neato")
    if dpi < legible:  # (drawn smaller with text still of LEGIBLE_PX or more: nothing to say)
        warnings.warn(
            f"the picture would be {full[0]:,}x{full[1]:,} pixels: drawn at {dpi / DPI:.2g} of its size, "
            f"{round(width * dpi):,}x{round(height * dpi):,}, its smallest text {smallest_font(laid) * dpi / 72:.2g} px "
            "(write .svg or .pdf for full size, or show fewer nodes with --depth or --max-nodes)",
            RenderWarning,
            stacklevel=2,
        )
    return picture


def _graphviz_said(stderr: str) -> str:
    """Graphviz's messages as one line of ours (empty when it said nothing)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return ""
    scaled = _SCALED.search(stderr)
    if scaled:
        first = (
            f"the picture is too large for a Graphviz bitmap: drawn at {float(scaled.group(1)):.2g} of its size "
            "(write .svg or .pdf for full size, or show fewer nodes with --max-nodes)"
        )
        rest = [line for line in lines if not _SCALED.search(line)]
    else:
        first = "Graphviz: " + re.sub(r"^(Warning|Error):\s*", "", lines[0])
        rest = lines[1:]
    if rest:
        first += f" (and {len(rest)} more message{'s' if len(rest) > 1 else ''} from dot)"
    return printable(" ".join(first.split()))


@contextmanager
def _ended_on_signals() -> Iterator[list[Any]]:
    """The children started in the block are killed when it ends, however it ends: normally, by an
    exception (SIGINT is a KeyboardInterrupt) or by SIGTERM/SIGHUP, which are then re-delivered
    to this process with their default action, so it still ends as the signal says."""
    children: list[Any] = []
    caught: list[int] = []
    previous: dict[int, Any] = {}

    def stop(signum: int, frame: Any) -> None:
        caught.append(signum)
        raise _Stopped(signum)

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:  # ignored stays ignored
                previous[signum] = signal.signal(signum, stop)
    try:
        yield children
    except _Stopped:
        pass
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
            child.wait()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if caught:
        handler = previous.get(caught[0])
        if callable(handler):  # someone else's handler was in place: let it decide
            handler(caught[0], None)
        else:
            signal.signal(caught[0], signal.SIG_DFL)
            os.kill(os.getpid(), caught[0])
        raise SystemExit(128 + caught[0])


class _Stopped(BaseException):
    """SIGTERM or SIGHUP arrived while dot was running."""


def _die_with_parent() -> Any:
    """On Linux, a function for the child to run before exec: die (SIGKILL) when the parent does."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arrange() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the line above
            os._exit(1)

    return arrange
