"""Curves drawn in a terminal with Braille characters (2 x 4 dots a character), for ``gradcli plot``
without ``-o``: it works over SSH and needs nothing beyond rich (for the colours).

>>> lines = canvas([(np.array([0.0, 1.0]), np.array([0.0, 1.0]), "")], (0.0, 1.0), (0.0, 1.0), 2, 1)
>>> [text for text, _ in lines[0]]
['⡠', '⠎']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: the bit of each dot of a Braille character, by (column, row) in its 2 x 4 cell
_DOTS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))

Series = tuple[np.ndarray, np.ndarray, str]  # x, y (NaN: a break), style


def canvas(
    series: Sequence[Series], xlim: tuple[float, float], ylim: tuple[float, float], width: int, height: int
) -> list[list[tuple[str, str]]]:
    """``height`` rows of ``width`` (character, style) cells; a cell takes the style of the last
    series that drew in it."""
    bits = np.zeros((height, width), dtype=np.int64)
    styles = [[""] * width for _ in range(height)]
    w, h = 2 * width, 4 * height
    for xs, ys, style in series:
        with np.errstate(all="ignore"):
            px = (np.asarray(xs, dtype=np.float64) - xlim[0]) / (xlim[1] - xlim[0]) * (w - 1)
            py = (ylim[1] - np.asarray(ys, dtype=np.float64)) / (ylim[1] - ylim[0]) * (h - 1)
        for dx, dy in _dots(px, py, w, h):
            row, col = dy // 4, dx // 2
            bits[row, col] |= _DOTS[dx % 2][dy % 4]
            styles[row][col] = style
    return [[(chr(0x2800 + int(bits[r, c])) if bits[r, c] else " ", styles[r][c]) for c in range(width)]
            for r in range(height)]  # fmt: skip


def _dots(px: np.ndarray, py: np.ndarray, w: int, h: int) -> list[tuple[int, int]]:
    """The dots on the segments between neighbouring finite points, clipped to the canvas."""
    found: list[tuple[int, int]] = []
    if len(px) == 1 and np.isfinite(px[0]) and np.isfinite(py[0]):
        px, py = np.repeat(px, 2), np.repeat(py, 2)
    for i in range(len(px) - 1):
        segment = _clipped(px[i], py[i], px[i + 1], py[i + 1], w - 1, h - 1)
        if segment is None:
            continue
        x0, y0, x1, y1 = segment
        n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        for t in np.linspace(0.0, 1.0, n + 1):
            found.append((round(x0 + (x1 - x0) * t), round(y0 + (y1 - y0) * t)))
    return found


def _clipped(x0: float, y0: float, x1: float, y1: float, right: float, bottom: float) -> tuple[float, ...] | None:
    """The part of the segment inside [0, right] x [0, bottom] (Liang-Barsky), or None."""
    if not all(np.isfinite(v) for v in (x0, y0, x1, y1)):
        return None
    dx, dy = x1 - x0, y1 - y0
    lo, hi = 0.0, 1.0
    for p, q in ((-dx, x0), (dx, right - x0), (-dy, y0), (dy, bottom - y0)):
        if p == 0:
            if q < 0:
                return None
            continue
        t = q / p
        if p < 0:
            lo = max(lo, t)
        else:
            hi = min(hi, t)
    if lo > hi:
        return None
    return x0 + lo * dx, y0 + lo * dy, x0 + hi * dx, y0 + hi * dy


def tick(value: float) -> str:
    return f"{value:.4g}" if value != 0 else "0"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round values (steps of 1, 2 or 5 times a power of ten) from lo to hi.

    >>> nice_ticks(-9.3, 16.9, count=8)
    [-5.0, 0.0, 5.0, 10.0, 15.0]
    """
    raw = (hi - lo) / max(1, count - 1)
    power = 10.0 ** np.floor(np.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = np.ceil(lo / step - 1e-9) * step
    return [float(v) + 0.0 for v in np.round(np.arange(first, hi + step * 1e-9, step) / step) * step]


def _place(value: float, lo: float, hi: float, cells: int, dots: int) -> int:
    """The cell (row or column) of ``value`` on an axis of ``cells`` cells of ``dots`` dots each."""
    return int((value - lo) / (hi - lo) * (cells * dots - 1) + 0.5) // dots


def _row_labels(ylim: tuple[float, float], height: int, dots: int) -> dict[int, str]:
    """Tick labels by row (row 0 at the top, the highest y)."""
    found = {}
    for t in nice_ticks(*ylim, count=max(3, height // 2)):
        found.setdefault(height - 1 - _place(t, ylim[0], ylim[1], height, dots), tick(t))
    return found


def _axis_text(xlim: tuple[float, float], inner: int, dots: int, room: int | None = None) -> str:
    """The x axis's tick labels, each centred under its column, none overlapping, within ``room``
    characters (the canvas's width unless said): a label at an end is moved in to fit, so that the
    line never wraps on the terminal."""
    line = [" "] * (inner if room is None else room)
    free = 0
    for t in nice_ticks(*xlim, count=max(3, inner // 8)):
        text = tick(t)
        at = max(0, min(_place(t, xlim[0], xlim[1], inner, dots) - len(text) // 2, len(line) - len(text)))
        if at >= free and at + len(text) <= len(line):
            line[at : at + len(text)] = list(text)
            free = at + len(text) + 2
    return "".join(line).rstrip()


def _fitted(title: str, across: int, width: int) -> str:
    """The title centred over the plot (``across`` columns), within the terminal's ``width``: cut
    with … if longer (a line that wraps breaks the picture)."""
    if len(title) > width:
        title = title[: max(width - 1, 0)] + "…"
    return title.center(across).rstrip() if len(title) <= across else title


def _rows_with_axis(rows: list[Any], labels: dict[int, str], margin: int) -> Any:
    """The canvas rows with the y axis: a tick (``┤``) and its label on the rows in ``labels``."""
    from rich.text import Text

    out = Text()
    for r, row in enumerate(rows):
        label = labels.get(r)
        out.append(label.rjust(margin - 1) + " ┤" if label is not None else " " * margin + "│")
        for char, style in row:
            out.append(char, style=style or None)
        out.append("\n")
    return out


def figure(
    series: Sequence[Series],
    labels: Sequence[tuple[str, str, str]],
    xlim: tuple[float, float],
    ylim: tuple[float, float],
    title: str,
    xlabel: str,
    width: int,
    height: int,
    marks: Sequence[tuple[float, float, str]] = (),
) -> Any:
    """The whole picture as rich ``Text``: the title, the canvas with y ticks on the left and x ticks
    below, the legend (``labels``: symbol, text, style) and ``marks`` (a point drawn as ●)."""
    from rich.text import Text

    labels_by_row = _row_labels(ylim, height, 4)
    margin = max(len(t) for t in labels_by_row.values()) + 1 if labels_by_row else 2
    inner = max(10, width - margin - 1)
    cells = canvas(series, xlim, ylim, inner, height)
    for x, y, style in marks:
        col = _place(x, xlim[0], xlim[1], inner, 2)
        row = height - 1 - _place(y, ylim[0], ylim[1], height, 4)
        if 0 <= col < inner and 0 <= row < height:
            cells[row][col] = ("●", style)
    out = Text(_fitted(title, margin + 1 + inner, width) + "\n", style="bold")
    out.append_text(_rows_with_axis(cells, labels_by_row, margin))
    out.append(" " * margin + "└" + "─" * inner + "\n")
    out.append(" " * (margin + 1) + _axis_text(xlim, inner, 2) + "\n")
    out.append(" " * margin + xlabel.center(inner).rstrip() + "\n")
    out.append(" " * margin)
    used = margin
    for i, (symbol, text, style) in enumerate(labels):  # on as many lines as the width needs
        size = len(symbol) + 1 + len(text)
        if i and used + 3 + size > width:
            out.append("\n" + " " * margin)
            used = margin
        elif i:
            out.append("   ")
            used += 3
        out.append(symbol + " ", style=style or None)
        out.append(text)
        used += size
    out.append("\n")
    return out


ARROWS = "→↗↑↖←↙↓↘"  # by the gradient's angle, counter-clockwise from the x axis
SHADES = ["blue", "cyan", "green", "yellow", "red"]  # f from low to high


def arrows(data: Any, title: str, width: int, height: int = 16) -> Any:
    """A two-variable plot in a terminal: at each character the gradient's direction as an arrow,
    coloured by the value of f (blue low, red high); ● the --at point."""
    from rich.text import Text

    ylim, xlim = (float(data.y[0]), float(data.y[-1])), (float(data.x[0]), float(data.x[-1]))
    labels_by_row = _row_labels(ylim, height, 1)
    margin = max(len(t) for t in labels_by_row.values()) + 1 if labels_by_row else 2
    inner = max(10, min(width - margin - 1, 2 * height * 2))
    cols = np.round(np.linspace(0, len(data.x) - 1, inner)).astype(int)
    rows = np.round(np.linspace(len(data.y) - 1, 0, height)).astype(int)  # the top row is the highest y
    f, gx, gy = (np.asarray(a)[np.ix_(rows, cols)] for a in (data.f, data.gx, data.gy))
    finite = np.isfinite(f) & np.isfinite(gx) & np.isfinite(gy)
    levels = np.quantile(f[finite], [0.2, 0.4, 0.6, 0.8]) if finite.any() else np.zeros(4)
    cells = [[(" ", "")] * inner for _ in range(height)]
    for r, c in zip(*np.nonzero(finite)):
        shade = SHADES[int(np.searchsorted(levels, f[r, c]))]
        if gx[r, c] == 0 and gy[r, c] == 0:
            cells[r][c] = ("·", shade)
        else:
            cells[r][c] = (ARROWS[int(np.round(np.arctan2(gy[r, c], gx[r, c]) / (np.pi / 4))) % 8], shade)
    if data.at is not None:
        row = height - 1 - _place(data.at[1], *ylim, height, 1)
        col = _place(data.at[0], *xlim, inner, 1)
        if 0 <= row < height and 0 <= col < inner:
            cells[row][col] = ("●", "bold")
    out = Text(_fitted(title, margin + 1 + inner, width) + "\n", style="bold")
    out.append_text(_rows_with_axis(cells, labels_by_row, margin))
    out.append(" " * margin + "└" + "─" * inner + "\n")
    out.append(" " * (margin + 1) + _axis_text(xlim, inner, 1, max(inner, width - margin - 1)) + "\n")
    out.append(" " * margin + f"{data.names[0]} →, {data.names[1]} ↑".center(inner).rstrip() + "\n")
    key = "arrows: the direction of ∇f; colour: f from ■■■■■ (low to high)"
    out.append(
        " " * margin + "arrows: the direction of ∇f;" + (" " if margin + len(key) <= width else "\n" + " " * margin)
    )
    out.append("colour: f from ")
    for shade in SHADES:
        out.append("■", style=shade)
    out.append(" (low to high)")
    if data.at is not None:
        a, b, fab, da, db = data.at
        out.append(f"\n{' ' * margin}● ({a:.4g}, {b:.4g}): f = {fab:.4g}, ∇f = ({da:.4g}, {db:.4g})")
    out.append("\n")
    return out
