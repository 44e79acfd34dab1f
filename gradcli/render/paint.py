"""``--color-by grad-norm|nan|zeros|ratio``: the picture's nodes filled, and its module boxes bordered
and tinted, by their gradient health (``health.py``), with a key in the picture (the colour scale and
its range); a NaN or an infinity is red in every mode.

Norms and ratios are coloured on a log10 scale over whole decades (``1e-08`` to ``1e+02``), the key
labelled at round values (``key_marks``: 1, 3, 10, 30, 100 or whole decades), zeros on 0 to 100 %; cool (pale blue) is small, warm (orange) large, so the red of NaN and inf stands apart.
The views call a ``Painter`` (``painter(graph)``) for each node's and box's style; ``NO_PAINT`` adds nothing.

>>> scale_colour(0.0), scale_colour(1.0), scale_colour(0.5)
('#e0f3f8', '#fdae61', '#ffffbf')
"""

from __future__ import annotations

import html
import math
from typing import Any

from ..errors import UsageError
from .health import MEASURES, module_rows, node_health

COLOR_BY = tuple(MEASURES)  # grad-norm, nan, zeros, ratio
STOPS = ("#e0f3f8", "#abd9e9", "#ffffbf", "#fee090", "#fdae61")  # small to large
NONFINITE, NONFINITE_BORDER = "#ff7f7f", "#b00000"
ZERO = "#d9d9d9"  # a norm exactly 0 (no gradient flows), off the log scale
FINITE = "#d9f0d3"  # --color-by nan: finite everywhere
TITLES = {
    "grad-norm": "gradient norm (log scale)",
    "ratio": "gradient norm / value norm (log scale)",
    "zeros": "gradient elements exactly 0",
    "nan": "NaN or inf in value or gradient",
}


def checked_color_by(value: str | None) -> str | None:
    """``--color-by``'s value, or None; anything else a UsageError naming the choices."""
    if value is None or value in COLOR_BY:
        return value
    raise UsageError(f"--color-by must be one of {', '.join(COLOR_BY)}, not {value!r}")


def _rgb(colour: str) -> tuple[int, ...]:
    return tuple(int(colour[k : k + 2], 16) for k in (1, 3, 5))


def scale_colour(t: float) -> str:
    """The scale's colour at ``t`` (0: smallest, 1: largest), interpolated between ``STOPS``."""
    t = min(max(t, 0.0), 1.0) * (len(STOPS) - 1)
    k = min(int(t), len(STOPS) - 2)
    a, b = _rgb(STOPS[k]), _rgb(STOPS[k + 1])
    f = t - k
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b))


def tint(colour: str, white: float = 0.6) -> str:
    """``colour`` mixed with ``white`` parts of white: a box's background behind its coloured nodes;
    with a negative ``white``, that part of black instead (a box's border, darker than its nodes)."""
    if white < 0:
        return "#" + "".join(f"{round(x * (1 + white)):02x}" for x in _rgb(colour))
    return "#" + "".join(f"{round(x + (255 - x) * white):02x}" for x in _rgb(colour))


class Painter:
    """The style each node and module box of a graph gets for ``by``; the range is the graph's."""

    def __init__(self, graph: Any, by: str) -> None:
        self.by, self.key = by, MEASURES[by]
        self.rows = {r["id"]: r for r in module_rows(graph)}
        self.outer = {c.get("parent") for c in graph.clusters}  # boxes around others: a border, no background
        measures = [node_health(n) for n in graph.nodes] + list(self.rows.values())
        found = [m[self.key] for m in measures if _finite(m.get(self.key))]
        self.log = by in ("grad-norm", "ratio")
        if self.log:
            logs = [math.log10(v) for v in found if v > 0]
            low, high = (math.floor(min(logs)), math.ceil(max(logs))) if logs else (0, 1)
            high = high if high > low else low + 1
            self.range = (low - (-(high - low)) % _every(high - low), high)  # (the key's decades evenly spaced)
        else:
            self.range = (0.0, 1.0)

    def colour(self, measure: dict[str, Any]) -> str | None:
        """The fill for one node's or box's health (None: not measured, drawn as without a key)."""
        if measure.get("nonfinite"):
            return NONFINITE
        v = measure.get(self.key)
        if self.by == "nan":
            return FINITE if measure.get("grad_norm") is not None or measure.get("value_norm") is not None else None
        if v is None or not _finite(v):
            return None
        if self.log:
            if v <= 0:
                return ZERO
            low, high = self.range
            return scale_colour((math.log10(v) - low) / (high - low))
        return scale_colour(v)

    def node(self, node: Any) -> dict[str, str]:
        if node.kind == "hidden":
            return {}
        colour = self.colour(node_health(node))
        if colour is None:
            return {}
        style = {"fillcolor": colour}
        if colour == NONFINITE:
            style.update(color=NONFINITE_BORDER, penwidth="2.4")
        return style

    def box(self, box: dict[str, Any]) -> dict[str, str]:
        row = self.rows.get(box["id"])
        colour = None if row is None else self.colour(row)
        if colour is None:
            return {}
        border = NONFINITE_BORDER if colour == NONFINITE else tint(colour, -0.3)
        if box["id"] in self.outer:
            return {"color": border, "penwidth": "3"}
        return {"color": border, "penwidth": "3", "style": "rounded,filled", "fillcolor": tint(colour)}

    def legend(self, g: Any) -> None:
        """The key: a node of its own, a small table of the scale's colours and what they stand for."""
        cells = []
        if self.by == "nan":
            cells.append(("finite", FINITE))
        elif self.log:
            low, high = self.range
            cells += [(text, scale_colour((at - low) / (high - low))) for at, text in key_marks(low, high)]
            cells.append(("0", ZERO))
        else:
            cells += [(f"{k * 100 // (len(STOPS) - 1)}%", colour) for k, colour in enumerate(STOPS)]
        cells.append(("NaN/inf", NONFINITE))
        title = f"colour: {TITLES[self.by]}" + ("; a box: its parameters' (or output's)" if self.rows else "")
        width = max(44, math.ceil(len(title) * 7.5 / len(cells)))  # (cells as wide as one another under the title)
        row = "".join(f'<td bgcolor="{c}" width="{width}">{html.escape(text)}</td>' for text, c in cells)
        label = (
            f'<<table border="0" cellborder="1" cellspacing="0" cellpadding="4"><tr><td colspan="{len(cells)}" '
            f'border="0"><b>{html.escape(title)}</b></td></tr><tr>{row}</tr></table>>'
        )
        g.node("gradcli_legend", label, shape="plaintext", fontsize="12")


class _NoPaint:
    """Every style as it is: no ``--color-by``."""

    def node(self, node: Any) -> dict[str, str]:
        return {}

    def box(self, box: dict[str, Any]) -> dict[str, str]:
        return {}

    def legend(self, g: Any) -> None:
        return None


NO_PAINT = _NoPaint()


def painter(graph: Any) -> Painter | _NoPaint:
    """What colours ``graph``'s picture: its ``color_by``'s ``Painter``, or ``NO_PAINT``."""
    by = getattr(graph, "color_by", None)
    return NO_PAINT if by is None else Painter(graph, by)


KEY_MARKS = 7  # values labelled in a log scale's key, at most


def key_marks(low: int, high: int) -> list[tuple[float, str]]:
    """The values a log scale's key labels between decades ``10**low`` and ``10**high``, as (log10,
    text): over one or two decades 1, 3, 10, 30, 100; over more, whole decades, every k-th when
    there are more than ``KEY_MARKS`` (the range starting where they come out even, ``Painter``).
    Written plainly between 0.001 and 1000 (``0.03``, ``30``), else all alike as powers of ten
    (``1e-6``, ``3e-5``, ``1e0``).

    >>> [text for _, text in key_marks(0, 2)], [text for _, text in key_marks(-8, 2)]
    (['1', '3', '10', '30', '100'], ['1e-8', '1e-6', '1e-4', '1e-2', '1e0', '1e2'])
    """
    if high - low <= 2:
        marks = [(d + step, m) for d in range(low, high) for step, m in ((0.0, 1), (math.log10(3), 3))]
    else:
        marks = [(float(d), 1) for d in range(low, high, _every(high - low))]
    marks.append((float(high), 1))
    plain = all(-3 <= math.floor(at) <= 3 for at, _ in marks)
    return [(at, _number(m, math.floor(at), plain)) for at, m in marks]


def _every(decades: int) -> int:
    """Decades from one mark of a log scale's key to the next (1 up to ``KEY_MARKS - 1`` decades)."""
    return 1 if decades <= 2 else -(-decades // (KEY_MARKS - 1))


def _number(mantissa: int, exponent: int, plain: bool) -> str:
    """``mantissa * 10**exponent`` in a key's cell: ``0.03``, ``30`` (``plain``), ``3e-5``, ``1e0``."""
    if not plain:
        return f"{mantissa}e{exponent}"
    return f"{mantissa * 10**exponent:g}" if exponent >= 0 else f"{mantissa / 10**-exponent:.{-exponent}f}"


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)
