"""How results are shown: JSON, plain text (pipes) or rich tables (a terminal; NO_COLOR: without colour).

Every command formats through here, so numbers print the same way everywhere:
in pipes and JSON every digit (the shortest text that reads back to the same
double), on a terminal 10 significant digits (``--digits N`` chooses), ``6``
rather than ``6.0`` for humans, ``"nan"``/``"inf"`` in JSON. Pipes get every
element; a terminal gets long arrays and large matrices abbreviated, with a
line saying how to see them whole. Headings are the same everywhere (``d/dx``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import UsageError, printable
from ..text import array, digits_for, jsonable, number, shape_text  # noqa: F401  (numbers as text live under the layers)
from .report import ReaderLeft, StreamProblem, one_line

_digits: int | None = None  # the running command's --digits N


#: the formats that keep every digit of a float64 whatever ``--digits`` says (it shapes what people read)
WHOLE_NUMBERS = {"json": "JSON", "npy": "NumPy's .npy"}


def use_digits(digits: int | None, fmt: str | None = None) -> None:
    """The ``--digits N`` of the command being run (None: the default of where the output goes);
    ``fmt``: the format written, which may keep full precision whatever N is (``--json``): said once."""
    global _digits
    _digits = digits  # in range: --digits' callback (cli/options.py) checked it
    kept = WHOLE_NUMBERS.get(fmt or "")
    if digits is not None and kept is not None:
        warn(f"--digits {digits} is ignored: {kept} keeps full float64 precision")


def terminal() -> bool:
    """Whether stdout is a terminal a person reads (not a pipe, a file, nor TERM=dumb)."""
    try:
        return sys.stdout.isatty() and os.environ.get("TERM") != "dumb"
    except (ValueError, AttributeError):  # closed
        return False


def rich_wanted() -> bool:
    """Rich tables on a terminal (NO_COLOR too: it removes the colour, not the tables); plain text otherwise."""
    return terminal()


def no_color() -> bool:
    return bool(os.environ.get("NO_COLOR"))


def console() -> Any:
    """A rich console for stdout: no colour nor any other escape code with NO_COLOR."""
    from rich.console import Console

    return Console(highlight=False, color_system=None if no_color() else "auto")


def digits() -> int | None:
    """Significant digits of human output: --digits N, else 10 on a terminal and all in a pipe."""
    return digits_for(_digits, terminal())


def shown(value: Any) -> str:
    """A number or array for people: complete in a pipe, long axes abbreviated on a terminal."""
    return array(value, summarize=terminal(), digits=digits())


def show_all_hint(what: str) -> str:
    return f"(showing {what}; pipe to a file or use --json for all)"


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


def json_text(document: Any) -> str:
    import json  # lazily: eval starts faster without it

    text = json.dumps(jsonable(document), ensure_ascii=False)
    if not can_show(text):  # the same document with \u escapes: nothing is lost
        text = json.dumps(jsonable(document), ensure_ascii=True)
    return text + "\n"


def print_json(document: Any) -> None:
    sys.stdout.write(json_text(document))


def write_binary(data: bytes, what: str) -> None:
    """Bytes (a .npy, a PNG) to stdout, which must not be a terminal: there they would be noise."""
    if terminal():
        raise UsageError(f"{what} is binary: write it with -o FILE, or send stdout to a file or a pipe")
    sys.stdout.flush()
    raw = getattr(sys.stdout, "buffer", None)
    if raw is None:
        raise StreamProblem("cannot write the result: standard output is closed")
    try:
        raw.write(data)
        raw.flush()
    except BrokenPipeError:
        raise ReaderLeft() from None
    except (OSError, ValueError) as exc:
        raise StreamProblem.writing(exc) from None


# --- human output ------------------------------------------------------------------------------------


def _heading(heading: str, detail: str | None = None) -> Any:
    """A title line as rich Text (never read as markup: ``[x*y, x+y]`` stays), printed on its own so it
    wraps between words at the terminal's width, not inside a narrow table's."""
    from rich.text import Text

    line = Text(heading, style="bold")
    if detail:
        line.append("   " + detail, style="dim")
    return line


def _cell(text: str, style: str | None = None) -> Any:
    from rich.text import Text

    return Text(str(text), style=style or "")


def print_rows(
    rows: Sequence[tuple[str, str]], heading: str | None = None, detail: str | None = None, note: str | None = None
) -> None:
    """``label = text`` lines (plain), or a heading and a two-column table on a terminal.

    The heading (what was computed) and detail (where) are for people: plain output
    leaves them out, so scripts read the same lines whatever the expression. ``note``
    (what a terminal leaves out) follows the table.
    """
    if rich_wanted() and table_fits(rows):
        from rich.table import Table

        out = console()
        if heading:
            out.print(_heading(heading, detail))
        table = Table(show_header=False)
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column(overflow="fold")
        for label, text in rows:
            table.add_row(_cell(label), _cell(text))
        out.print(table)
        if note:
            out.print(_cell(note, "dim"))
        return
    width = max((len(label) for label, _ in rows), default=0)
    out = [f"{label.ljust(width)} = {text}" for label, text in rows]
    if note:
        out.append(note)
    sys.stdout.write("\n".join(out) + "\n")


def too_wide(lines: Sequence[str]) -> bool:
    """Whether a person reads these lines on a terminal narrower than the longest (it would fold them
    mid-number): a pipe or a file takes every line whole."""
    if not terminal():
        return False
    from rich.console import Console

    return max((len(line) for line in lines), default=0) > Console().width


def expanded(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Each row as a record, one ``name  value`` line a column under the row's first cell, as psql's
    expanded display (``\\x``) shows a table too wide for the terminal: no number is folded."""
    names = [str(h) or "ok" for h in header[1:]]
    width = max((len(n) for n in names), default=0)
    out: list[str] = []
    for row in rows:
        out.append(str(row[0]))
        out += [f"  {n.ljust(width)}  {c}" for n, c in zip(names, row[1:]) if str(c)]
    return out


def wrapped(lines: Iterable[str]) -> list[str]:
    """On a terminal, each line broken between words to its width (the rest indented); elsewhere as given."""
    lines = list(lines)
    if not terminal():
        return lines
    import textwrap

    from rich.console import Console

    width = Console().width
    return [part for line in lines for part in (textwrap.wrap(
        line, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False) or [""])]  # fmt: skip


def print_table(header: Sequence[str], rows: Iterable[Sequence[str]], title: str | None = None) -> None:
    """A table with a header: rich on a terminal, aligned columns otherwise."""
    rows = [list(r) for r in rows]
    if rich_wanted() and table_fits([header, *rows]):
        from rich.table import Table

        out = console()
        if title:
            out.print(_heading(title))
        table = Table()
        for name in header:
            table.add_column(_cell(name), overflow="fold")
        for r in rows:
            table.add_row(*map(_cell, r))
        out.print(table)
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


def wrote(path: Any, detail: str | None = None) -> None:
    """``wrote PATH (detail)`` on stderr, the one line every ``-o`` (and ``--junit``) says once its file
    is in place: stdout stays the data's."""
    sys.stderr.write(f"wrote {printable(str(path))}{f' ({detail})' if detail else ''}\n")


def warn(message: str) -> None:
    """``warning: ...`` on stderr, always one line (a matrix in the message is written on it)."""
    sys.stderr.write(f"warning: {one_line(message)}\n")


MATRIX_EDGE = 6  # rows/columns shown at each end of a large matrix on a terminal


def _window(n: int, whole: bool) -> list[int | None]:
    """Indices to show: all, or the first and last few with None for the gap."""
    if whole or n <= 2 * MATRIX_EDGE + 1:
        return list(range(n))
    return [*range(MATRIX_EDGE), None, *range(n - MATRIX_EDGE, n)]


def print_matrix(rows: Sequence[str], columns: Sequence[str], matrix: Any, title: str | None = None) -> None:
    """A labelled matrix (rows x columns): whole in a pipe; on a terminal large ones show their corners
    and a line says how to see them whole."""
    m = np.asarray(matrix)
    whole = not terminal()
    row_idx, col_idx = _window(m.shape[0], whole), _window(m.shape[1], whole)
    header, body = _cells(rows, columns, m, row_idx, col_idx)
    edge, width = min(MATRIX_EDGE, (m.shape[1] - 1) // 2), 0 if whole else console().width
    while not whole and edge > 1 and len(_aligned(header, body).split("\n", 1)[0]) > width:
        edge -= 1  # fewer columns at each end until a row fits the terminal's width
        col_idx = [*range(edge), None, *range(m.shape[1] - edge, m.shape[1])]
        header, body = _cells(rows, columns, m, row_idx, col_idx)
    note = None
    shown_rows, shown_columns = sum(i is not None for i in row_idx), sum(j is not None for j in col_idx)
    if shown_rows < m.shape[0] or shown_columns < m.shape[1]:
        parts = []
        if shown_rows < m.shape[0]:
            parts.append(f"{shown_rows} of {m.shape[0]:,} rows")
        if shown_columns < m.shape[1]:
            parts.append(f"{shown_columns} of {m.shape[1]:,} columns")
        note = f"(showing {' and '.join(parts)}; pipe to a file or use --json / --format csv for all)"
    if rich_wanted() and table_fits([header, *body]):
        from rich.table import Table

        out = console()
        if title:
            out.print(_heading(title))
        table = Table()
        for k, name in enumerate(header):
            table.add_column(_cell(name), justify="left" if k == 0 else "right", style="bold cyan" if k == 0 else None)
        for r in body:
            table.add_row(*map(_cell, r))
        out.print(table)
        if note:
            out.print(_cell(note, "dim"))
        return
    sys.stdout.write(_aligned(header, body))
    if note:  # only on a terminal: wrapped between words at its width
        sys.stdout.flush()
        console().print(_cell(note, "dim"))


def _cells(
    rows: Sequence[str], columns: Sequence[str], m: Any, row_idx: list[int | None], col_idx: list[int | None]
) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the part of ``m`` shown (None: the gap, ``...``)."""
    places = digits()
    header = ["", *("..." if j is None else columns[j] for j in col_idx)]
    body = []
    for i in row_idx:
        if i is None:
            body.append(["...", *("..." for _ in col_idx)])
            continue
        body.append([rows[i], *("" if j is None else number(m[i, j], places) for j in col_idx)])
    return header, body


def _aligned(header: list[str], body: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *body)]
    lines = ["  ".join(str(c).rjust(w) if k else str(c).ljust(w) for k, (c, w) in enumerate(zip(r, widths))).rstrip()
             for r in [header, *body]]  # fmt: skip
    return "\n".join(lines) + "\n"


def matrix_text(rows: Sequence[str], columns: Sequence[str], matrix: Any) -> str:
    """The plain labelled matrix, whole (for a file): every digit, or --digits N."""
    m = np.asarray(matrix)
    body = [[rows[i], *(number(m[i, j], _digits) for j in range(m.shape[1]))] for i in range(m.shape[0])]
    return _aligned(["", *columns], body)


def shown_path(path: str) -> str:
    """A file name in a message, its end kept when it is long: ``.../data/points.csv``."""
    return printable(path if len(path) <= 40 else "..." + path[-37:])


def float_texts(column: Any) -> list[str]:
    """Shortest round-trip text of every float (Python's repr: faster than NumPy's astype(str))."""
    return list(map(repr, np.asarray(column, dtype=np.float64).tolist()))


def element_texts(values: np.ndarray) -> list[list[str]]:
    """One list of texts per element of a point's value (C order), each with a text per point."""
    flat = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
    return [float_texts(flat[:, j]) for j in range(flat.shape[1])]


def nested(columns: list[list[str]], shape: tuple[int, ...], n: int) -> list[str]:
    """JSON text of each point's value of ``shape``, from its elements' texts: numbers, nested lists."""
    import json  # lazily: eval starts faster without it

    if not shape:
        return _json_numbers(columns[0])
    if 0 in shape:
        return [json.dumps(np.zeros(shape).tolist())] * n
    parts = [_json_numbers(c) for c in columns]
    for size in reversed(shape):
        parts = [
            ["[" + ", ".join(items) + "]" for items in zip(*parts[k : k + size])] for k in range(0, len(parts), size)
        ]
    return parts[0]


def _json_numbers(numbers: list[str]) -> list[str]:
    return [t if t not in ("nan", "inf", "-inf") else f'"{t}"' for t in numbers]
