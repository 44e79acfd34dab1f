"""Record typer's help pages for ``helptext`` (which answers ``gradcli help`` without typer): every
call click's help formatter receives while typer formats a page, at any width (the calls do not
depend on it: the formatter wraps).

    python -m gradcli.cli.helprecord     # writes gradcli/cli/helppages.py again

tests/test_r36_startup.py fails while ``helppages.py`` differs from a fresh recording.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .app import app, command_names

#: the formatter's calls that make a page (the others are made of these)
CALLS = ("write", "indent", "dedent", "write_usage", "write_heading", "write_paragraph", "write_text", "write_dl")
TARGET = Path(__file__).with_name("helppages.py")


def _recorder(base: type) -> type:
    """A subclass of click's formatter that notes its outermost calls in ``calls``."""

    def noted(name: str) -> Any:
        def call(self: Any, *args: Any) -> None:
            if not self.depth:
                self.calls.append((name, *(_plain(a) for a in args)))
            self.depth += 1
            try:
                getattr(base, name)(self, *args)
            finally:
                self.depth -= 1

        return call

    return type("Recorder", (base,), {"calls": None, "depth": 0, **{name: noted(name) for name in CALLS}})


def _plain(value: Any) -> Any:
    """A value as a literal of tuples (click passes generators and lists of tuples)."""
    if isinstance(value, (list, tuple)) or hasattr(value, "__next__"):
        return tuple(_plain(v) for v in value)
    return value


def record() -> tuple[int, dict[str, tuple]]:
    """The group's ``max_content_width`` and each page's calls: "" for gradcli's own, then each command's."""
    import typer

    group = typer.main.get_command(app)
    base = group.context_class.formatter_class
    pages = {}
    with group.make_context("gradcli", [], resilient_parsing=True) as top:
        for name in ("", *command_names()):
            formatter = _recorder(base)(width=80, max_width=top.max_content_width)
            formatter.calls = []
            if not name:
                group.format_help(top, formatter)
            else:
                found = group.get_command(top, name)
                with found.make_context(name, [], parent=top, resilient_parsing=True) as inner:
                    found.format_help(inner, formatter)
            pages[name] = tuple(formatter.calls)
        return top.max_content_width, pages


def source() -> str:
    """The text of ``helppages.py`` for today's commands."""
    width, pages = record()
    return (
        '"""Typer\'s help pages as the calls of click\'s help formatter (gradcli/cli/helptext.py replays them).\n\n'
        "Written by ``python -m gradcli.cli.helprecord``: do not edit; tests/test_r36_startup.py checks it.\n"
        '"""\n\n'
        "# fmt: off\n"
        f"MAX_WIDTH = {width!r}\n"
        "PAGES = {\n" + "".join(f"    {name!r}: {calls!r},\n" for name, calls in pages.items()) + "}\n"
    )  # a page a line: the same options on several pages are no repeated block of code


if __name__ == "__main__":
    from ..files import write_atomic

    write_atomic(TARGET, source())
    print(f"wrote {TARGET}")
