"""How results are shown: JSON, plain text (pipes, NO_COLOR) or rich tables (a terminal).

Every command formats through here, so numbers print the same way everywhere:
full float64 precision (the shortest text that reads back to the same
double), ``6`` rather than ``6.0`` for humans, ``"nan"``/``"inf"`` in JSON.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..text import array, jsonable, number, shape_text  # noqa: F401  (numbers as text live under the layers)


def rich_wanted() -> bool:
    """Rich tables on a terminal; plain text without colour codes otherwise or with NO_COLOR."""
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def table_fits(rows: Iterable[Sequence[str]]) -> bool:
    """A rich table of these rows fits the terminal with no number cut or folded: every column as
    wide as its longest word (a cell may wrap between words). A narrow terminal (``COLUMNS=20``)
    gets the plain lines instead: long, but every digit is there."""
    from rich.console import Console

    widths: list[int] = []
    for row in rows:
        for k, cell in enumerate(row):
            size = max((len(word) for word in str(cell).split()), default=0)
            if k < len(widths):
                widths[k] = max(widths[k], size)
            else:
                widths.append(size)
    return sum(w + 3 for w in widths) + 1 <= Console().width


def can_show(text: str) -> bool:
    """Whether stdout's encoding can write ``text`` (PYTHONIOENCODING=ascii cannot write 'θ')."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    if encoding.lower().replace("-", "").replace("_", "") in ("utf8", "utf16", "utf32"):
        return True
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def print_json(document: Any) -> None:
    import json  # lazily: eval starts faster without it

    text = json.dumps(jsonable(document), ensure_ascii=False)
    if not can_show(text):  # the same document with \u escapes: nothing is lost
        text = json.dumps(jsonable(document), ensure_ascii=True)
    sys.stdout.write(text + "\n")


def partial(label: str) -> str:
    """``d/dx`` as ``∂/∂x`` for people, where the output's encoding can show it."""
    return label.replace("d/d", "∂/∂", 1) if can_show("∂") else label


# --- human output ------------------------------------------------------------------------------------


def print_rows(rows: Sequence[tuple[str, str]], heading: str | None = None, detail: str | None = None) -> None:
    """``label = text`` lines (plain), or a heading and a two-column table on a terminal.

    The heading (what was computed) and detail (where) are for people: plain output
    leaves them out, so scripts read the same lines whatever the expression.
    """
    if rich_wanted() and table_fits(rows):
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        console = Console(highlight=False)
        if heading:
            line = Text(heading, style="bold")
            if detail:
                line.append("   " + detail, style="dim")
            console.print(line)
        table = Table(show_header=False)
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column(overflow="fold")
        for label, text in rows:  # Text: "[lo, hi]" in a doc is text, not rich markup
            table.add_row(Text(partial(label) if label.startswith("d/d") else label), Text(text))
        console.print(table)
        return
    width = max((len(label) for label, _ in rows), default=0)
    out = [f"{label.ljust(width)} = {text}" for label, text in rows]
    sys.stdout.write("\n".join(out) + "\n")


def print_table(header: Sequence[str], rows: Iterable[Sequence[str]], title: str | None = None) -> None:
    """A table with a header: rich on a terminal, aligned columns otherwise."""
    rows = [list(r) for r in rows]
    if rich_wanted() and table_fits([header, *rows]):
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(title=title, title_justify="left")
        for name in header:
            table.add_column(name, overflow="fold")
        for r in rows:
            table.add_row(*(Text(str(c)) for c in r))
        Console().print(table)
        return
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    lines = [title] if title else []
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    sys.stdout.write("\n".join(lines) + "\n")


MIN_WRAPPED = 24  # the narrowest the last, wrapped column of a sectioned table may be


def print_sections(header: Sequence[str], sections: Sequence[tuple[str, Sequence[Sequence[str]]]]) -> None:
    """Rows in titled sections. On a terminal: one rich table, a heading row per section, the
    last column wrapped to the width (words longer than it folded); every cell is text, never
    rich markup. Elsewhere (a pipe, NO_COLOR, a terminal too narrow): aligned plain columns
    with the section's title as the second one, every row complete on its line."""
    if rich_wanted():
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        console = Console(highlight=False)
        fixed = [row[:-1] for _, rows in sections for row in rows]  # the columns that do not wrap
        widths = [max(len(w) for cell in col for w in (str(cell).split() or [""])) for col in zip(header[:-1], *fixed)]
        if sum(w + 3 for w in widths) + 4 + MIN_WRAPPED <= console.width:
            table = Table(header_style="bold")
            for name in header[:-1]:
                table.add_column(name)
            table.add_column(header[-1], overflow="fold", ratio=1)
            for title, rows in sections:
                table.add_row(Text(title, style="bold magenta"), *([""] * (len(header) - 1)))
                for k, row in enumerate(rows):
                    table.add_row(*(Text(str(c)) for c in row), end_section=k == len(rows) - 1)
            console.print(table)
            return
    print_table(
        [header[0], "group", *header[1:]], [[row[0], title, *row[1:]] for title, rows in sections for row in rows]
    )


def warn(message: str) -> None:
    """``warning: ...`` on stderr, always one line (a matrix in the message is written on it)."""
    from . import one_line

    sys.stderr.write(f"warning: {one_line(message)}\n")


MATRIX_EDGE = 6  # rows/columns shown at each end of a large matrix
MATRIX_DIGITS = 10  # significant digits in a table of many numbers (JSON keeps every digit)


def _window(n: int) -> list[int | None]:
    """Indices to show: all, or the first and last few with None for the gap."""
    if n <= 2 * MATRIX_EDGE + 1:
        return list(range(n))
    return [*range(MATRIX_EDGE), None, *range(n - MATRIX_EDGE, n)]


def print_matrix(rows: Sequence[str], columns: Sequence[str], matrix: Any, title: str | None = None) -> None:
    """A labelled matrix (rows x columns); large ones show their corners."""
    m = np.asarray(matrix)
    row_idx, col_idx = _window(m.shape[0]), _window(m.shape[1])
    header = ["", *("..." if j is None else columns[j] for j in col_idx)]
    body = []
    for i in row_idx:
        if i is None:
            body.append(["...", *("..." for _ in col_idx)])
            continue
        body.append([rows[i], *("" if j is None else number(m[i, j], MATRIX_DIGITS) for j in col_idx)])
    note = f"{m.shape[0]} x {m.shape[1]}" if m.shape[0] > len(body) or m.shape[1] > len(col_idx) else None
    if rich_wanted() and table_fits([header, *body]):
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, title_justify="left", caption=note)
        for k, name in enumerate(header):
            table.add_column(name, justify="left" if k == 0 else "right", style="bold cyan" if k == 0 else None)
        for r in body:
            table.add_row(*r)
        Console(highlight=False).print(table)
        return
    widths = [max(len(str(c)) for c in col) for col in zip(header, *body)]
    lines = ["  ".join(str(c).rjust(w) if k else str(c).ljust(w) for k, (c, w) in enumerate(zip(r, widths))).rstrip()
             for r in [header, *body]]  # fmt: skip
    if note:
        lines.append(f"({note})")
    sys.stdout.write("\n".join(lines) + "\n")
