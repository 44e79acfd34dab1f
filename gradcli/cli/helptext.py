"""``gradcli help [COMMAND]``, ``gradcli [COMMAND] --help`` and a bare ``gradcli``, answered without
typer, whose import (and NumPy's, which the commands' modules load) takes longer than an ``eval``.

The pages are typer's own: ``helprecord.py`` records the calls click's help formatter receives
for every page into ``helppages.py`` (``python -m gradcli.cli.helprecord`` writes it), and this
module replays them through a copy of that formatter, at the terminal's width as click measures
it. tests/test_r36_startup.py holds the two equal, page by page and at several widths, and
``helppages.py`` equal to a fresh recording: a changed option or text fails there until the file
is written again. Anything else on the command line (an unknown command, more words, shell
completion) goes to typer as before.
"""

from __future__ import annotations

import os
import sys
import textwrap

from .helppages import MAX_WIDTH, PAGES
from .report import ReaderLeft, StreamProblem

#: the words that ask for help
_HELP = ("--help", "-h")


def page_asked(argv: list[str]) -> str | None:
    """The page ``argv`` asks for: "" for gradcli's own, a command's name, or None for anything
    that is not exactly a request for help (typer then reads it)."""
    if "_GRADCLI_COMPLETE" in os.environ:  # shell completion: click's
        return None
    if argv in ([], ["help"], *([h] for h in _HELP)):
        return ""
    if len(argv) == 2 and argv[0] == "help" and argv[1] in PAGES and argv[1]:
        return argv[1]
    if len(argv) == 2 and argv[1] in _HELP and argv[0] in PAGES and argv[0]:
        return argv[0]
    return None


def help_text(page: str, width: int | None = None) -> str:
    """The help page as typer prints it (without the final newline), ``width`` as click's formatter
    computes it from the terminal when not given."""
    formatter = _PageFormatter(terminal_width() if width is None else width)
    for call, *args in PAGES[page]:
        getattr(formatter, call)(*args)
    return "".join(formatter.buffer).rstrip("\n")


def show(text: str) -> None:
    """Print ``text`` as ``typer.echo`` does: to a standard output whose encoding is ASCII (what click
    takes for a misconfigured locale) as UTF-8 into its buffer, otherwise as any result."""
    out = sys.stdout
    buffer = getattr(out, "buffer", None)
    if buffer is None or not _ascii(getattr(out, "encoding", None) or "ascii"):
        out.write(text + "\n")
        out.flush()
        return
    out.flush()
    try:
        buffer.write((text + "\n").encode("utf-8"))
        buffer.flush()
    except BrokenPipeError:
        raise ReaderLeft() from None
    except (OSError, ValueError) as exc:
        raise StreamProblem.writing(exc) from None


def _ascii(encoding: str) -> bool:
    import codecs  # lazy: start-up, only for a help page (already loaded by the interpreter)

    try:
        return codecs.lookup(encoding).name == "ascii"
    except LookupError:
        return False


def terminal_width() -> int:
    """The width of click's help formatter: the terminal's columns up to the group's
    ``max_content_width``, less 2, at least 50."""
    import shutil  # lazy: start-up, only a help page measures the terminal

    return max(min(shutil.get_terminal_size().columns, MAX_WIDTH) - 2, 50)


# What follows is click's help formatter (click/formatting.py and click/_textwrap.py as vendored by
# typer 0.2x, BSD-3-Clause, Copyright 2014 Pallets), cut to the calls help pages make.


class _PageWrapper(textwrap.TextWrapper):
    def _handle_long_word(self, reversed_chunks: list[str], cur_line: list[str], cur_len: int, width: int) -> None:
        space_left = max(width - cur_len, 1)
        last = reversed_chunks[-1]
        cur_line.append(last[:space_left])
        reversed_chunks[-1] = last[space_left:]

    def indent_only(self, text: str) -> str:
        return "\n".join(
            f"{self.initial_indent if i == 0 else self.subsequent_indent}{line}"
            for i, line in enumerate(text.splitlines())
        )


def _paragraphs(text: str) -> list[tuple[int, bool, str]]:
    """click's paragraphs: (indent, kept as is (after a \\b line), text)."""
    found: list[tuple[int, bool, str]] = []
    lines: list[str] = []
    indent = None

    def flush() -> None:
        if lines:
            raw = lines[0].strip() == "\b"
            found.append((indent or 0, raw, "\n".join(lines[1:]) if raw else " ".join(lines)))
            lines.clear()

    for line in text.splitlines():
        if not line:
            flush()
            indent = None
            continue
        if indent is None:
            stripped = line.lstrip()
            indent, line = len(line) - len(stripped), stripped
        lines.append(line)
    flush()
    return found


def _wrap(text: str, width: int, initial: str = "", subsequent: str = "", paragraphs: bool = False) -> str:
    wrapper = _PageWrapper(width, initial_indent=initial, subsequent_indent=subsequent, replace_whitespace=False)
    text = text.expandtabs()
    if not paragraphs:
        return wrapper.fill(text)
    done = []
    for indent, raw, part in _paragraphs(text):
        wrapper.initial_indent, wrapper.subsequent_indent = initial + " " * indent, subsequent + " " * indent
        done.append(wrapper.indent_only(part) if raw else wrapper.fill(part))
    return "\n\n".join(done)


class _PageFormatter:
    """click's ``HelpFormatter``, the calls ``helprecord`` records."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.current_indent = 0
        self.buffer: list[str] = []

    def write(self, string: str) -> None:
        self.buffer.append(string)

    def indent(self) -> None:
        self.current_indent += 2

    def dedent(self) -> None:
        self.current_indent -= 2

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        prefix = "Usage: " if prefix is None else prefix
        usage_prefix = f"{prefix:>{self.current_indent}}{prog} "
        text_width = self.width - self.current_indent
        if text_width >= len(usage_prefix) + 20:
            self.write(_wrap(args, text_width, usage_prefix, " " * len(usage_prefix)))
        else:
            indent = " " * (max(self.current_indent, len(prefix)) + 4)
            self.write(f"{usage_prefix}\n{_wrap(args, text_width, indent, indent)}")
        self.write("\n")

    def write_heading(self, heading: str) -> None:
        self.write(f"{'':>{self.current_indent}}{heading}:\n")

    def write_paragraph(self) -> None:
        if self.buffer:
            self.write("\n")

    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        self.write(_wrap(text, self.width, indent, indent, paragraphs=True) + "\n")

    def write_dl(self, rows: list[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        first_col = min(max((len(first) for first, _ in rows), default=0), col_max) + col_spacing
        for first, second in rows:
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            if len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - len(first)))
            else:
                self.write("\n" + " " * (first_col + self.current_indent))
            lines = _wrap(second, max(self.width - first_col - 2, 10), paragraphs=True).splitlines() or [""]
            self.write(f"{lines[0]}\n")
            for line in lines[1:]:
                self.write(f"{'':>{first_col + self.current_indent}}{line}\n")
