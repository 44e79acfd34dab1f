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
    return f"{value:.4g}"


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

    ticks = [tick(ylim[1]), tick((ylim[0] + ylim[1]) / 2), tick(ylim[0])]
    margin = max(len(t) for t in ticks) + 1
    inner = max(10, width - margin - 1)
    cells = canvas(series, xlim, ylim, inner, height)
    for x, y, style in marks:
        col = round((x - xlim[0]) / (xlim[1] - xlim[0]) * (inner - 1))
        row = round((ylim[1] - y) / (ylim[1] - ylim[0]) * (height - 1))
        if 0 <= col < inner and 0 <= row < height:
            cells[row][col] = ("●", style)
    out = Text(title.center(margin + 1 + inner).rstrip() + "\n", style="bold")
    for r, row in enumerate(cells):
        label = ticks[0] if r == 0 else ticks[2] if r == height - 1 else ticks[1] if r == height // 2 else ""
        out.append(label.rjust(margin - 1) + " ┤" if label else " " * margin + "│")
        for char, style in row:
            out.append(char, style=style or None)
        out.append("\n")
    out.append(" " * margin + "└" + "─" * inner + "\n")
    left, middle, right = tick(xlim[0]), tick((xlim[0] + xlim[1]) / 2), tick(xlim[1])
    axis = [" "] * (inner + 1)
    for text, at in ((left, 0), (middle, inner // 2 - len(middle) // 2), (right, inner + 1 - len(right))):
        axis[at : at + len(text)] = list(text)
    out.append(" " * margin + "".join(axis).rstrip() + "\n")
    out.append(" " * margin + xlabel.center(inner).rstrip() + "\n")
    out.append(" " * margin)
    for i, (symbol, text, style) in enumerate(labels):
        out.append(("   " if i else "") + symbol + " ", style=style or None)
        out.append(text)
    out.append("\n")
    return out


ARROWS = "→↗↑↖←↙↓↘"  # by the gradient's angle, counter-clockwise from the x axis
SHADES = ["blue", "cyan", "green", "yellow", "red"]  # f from low to high


def arrows(data: Any, title: str, width: int, height: int = 16) -> Any:
    """A two-variable plot in a terminal: at each character the gradient's direction as an arrow,
    coloured by the value of f (blue low, red high); ● the --at point."""
    from rich.text import Text

    ticks = [tick(data.y[-1]), tick((data.y[0] + data.y[-1]) / 2), tick(data.y[0])]
    margin = max(len(t) for t in ticks) + 1
    inner = max(10, min(width - margin - 1, 2 * height * 2))
    cols = np.round(np.linspace(0, len(data.x) - 1, inner)).astype(int)
    rows = np.round(np.linspace(len(data.y) - 1, 0, height)).astype(int)  # the top row is the highest y
    f, gx, gy = (np.asarray(a)[np.ix_(rows, cols)] for a in (data.f, data.gx, data.gy))
    finite = np.isfinite(f) & np.isfinite(gx) & np.isfinite(gy)
    levels = np.quantile(f[finite], [0.2, 0.4, 0.6, 0.8]) if finite.any() else np.zeros(4)
    mark = None
    if data.at is not None:
        a, b = data.at[:2]
        mark = (round((data.y[-1] - b) / (data.y[-1] - data.y[0]) * (height - 1)),
                round((a - data.x[0]) / (data.x[-1] - data.x[0]) * (inner - 1)))  # fmt: skip
    out = Text(title.center(margin + 1 + inner).rstrip() + "\n", style="bold")
    for r in range(height):
        label = ticks[0] if r == 0 else ticks[2] if r == height - 1 else ticks[1] if r == height // 2 else ""
        out.append(label.rjust(margin - 1) + " ┤" if label else " " * margin + "│")
        for c in range(inner):
            if mark == (r, c):
                out.append("●", style="bold")
            elif not finite[r, c]:
                out.append(" ")
            elif gx[r, c] == 0 and gy[r, c] == 0:
                out.append("·", style=SHADES[int(np.searchsorted(levels, f[r, c]))])
            else:
                k = int(np.round(np.arctan2(gy[r, c], gx[r, c]) / (np.pi / 4))) % 8
                out.append(ARROWS[k], style=SHADES[int(np.searchsorted(levels, f[r, c]))])
        out.append("\n")
    out.append(" " * margin + "└" + "─" * inner + "\n")
    left, middle, right = tick(data.x[0]), tick((data.x[0] + data.x[-1]) / 2), tick(data.x[-1])
    axis = [" "] * (inner + 1)
    for text, at in ((left, 0), (middle, inner // 2 - len(middle) // 2), (right, inner + 1 - len(right))):
        axis[at : at + len(text)] = list(text)
    out.append(" " * margin + "".join(axis).rstrip() + "\n")
    out.append(" " * margin + f"{data.names[0]} →, {data.names[1]} ↑".center(inner).rstrip() + "\n")
    out.append(" " * margin + "arrows: the direction of ∇f; colour: f from ")
    for shade in SHADES:
        out.append("■", style=shade)
    out.append(" (low to high)")
    if data.at is not None:
        a, b, fab, da, db = data.at
        out.append(f"\n{' ' * margin}● ({a:.4g}, {b:.4g}): f = {fab:.4g}, ∇f = ({da:.4g}, {db:.4g})")
    out.append("\n")
    return out
