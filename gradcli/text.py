"""Numbers and arrays as text, the same everywhere: full float64 precision (the shortest text that
reads back to the same double), ``6`` rather than ``6.0`` for people, ``"nan"``/``"inf"`` in JSON.

A neutral module under the layers: render, check and the CLI all format through it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

SUMMARY_EDGE = 3  # elements shown at each end of a long array (on a terminal)
SUMMARY_LIMIT = 20
TERMINAL_DIGITS = 10  # significant digits on a terminal (pipes, JSON, CSV keep every digit); --digits N


def digits_for(digits: int | None, terminal: bool) -> int | None:
    """The precision of human text: ``--digits N`` when given, else 10 digits on a terminal and
    every digit (the shortest text that reads back to the same double) in a pipe."""
    if digits is not None:
        return digits
    return TERMINAL_DIGITS if terminal else None


def number(value: Any, digits: int | None = None) -> str:
    """Shortest round-trip text of a number; integral floats without '.0'; ``digits`` rounds (for people)."""
    v = value.item() if hasattr(value, "item") else value
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, complex):
        return repr(v)
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v.is_integer() and abs(v) < 1e16:
        return str(int(v))
    if digits is not None:
        text = f"{v:.{digits}g}"
        return text if "e" in text or "." in text or "inf" in text or "nan" in text else text
    return repr(v)


def percent(fraction: float) -> str:
    """A fraction as a percentage of 3 significant digits that says 0% and 100% only when exact:
    15 non-zero elements of 804,000 are ``>99.99%`` zeros, not ``100%``.

    >>> percent(0.125), percent(1 - 15 / 804_000), percent(1.0), percent(3e-7)
    ('12.5%', '>99.99%', '100%', '<0.01%')
    """
    if 0 < fraction < 1e-4:
        return "<0.01%"
    if 0.9999 < fraction < 1:
        return ">99.99%"
    return f"{number(fraction * 100, 3 if fraction < 0.999 else 4)}%"


def array(value: Any, summarize: bool = True, digits: int | None = None) -> str:
    """``[1, 2.5, 3]``, nested for matrices; with ``summarize`` (a terminal), long axes shown as
    ``[1, 2, 3, ..., 98, 99, 100]``."""
    a = np.asarray(value)

    def render(x: np.ndarray) -> str:  # recursion depth is the number of axes

        if x.ndim == 0:
            return number(x, digits)
        n = x.shape[0]
        if summarize and n > SUMMARY_LIMIT:
            items = (
                [render(x[i]) for i in range(SUMMARY_EDGE)]
                + ["..."]
                + [render(x[i]) for i in range(n - SUMMARY_EDGE, n)]
            )
        else:
            items = [render(x[i]) for i in range(n)]
        return "[" + ", ".join(items) + "]"

    return render(a)


def summarized(value: Any) -> bool:
    """Whether ``array(value, summarize=True)`` leaves elements out."""
    return any(n > SUMMARY_LIMIT for n in np.shape(value))


def shown_count(value: Any) -> int:
    """How many elements ``array(value, summarize=True)`` shows."""
    return int(np.prod([min(n, 2 * SUMMARY_EDGE) if n > SUMMARY_LIMIT else n for n in np.shape(value)]))


def shape_text(value: Any) -> str:
    shape = np.shape(value)
    return "scalar" if not shape else f"shape {shape}"


def jsonable(value: Any) -> Any:
    """Plain JSON data: arrays as nested lists, non-finite floats as "nan", "inf", "-inf"."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (np.ndarray, np.generic)):
        return jsonable(value.tolist())
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if hasattr(value, "_value"):  # a gradcli tensor
        return jsonable(np.asarray(value._value))
    return value


def in_message(value: Any) -> str:
    """A number inside a sentence of a message (a check's notes and verdicts): 10 significant digits."""
    return number(value, 10)


def plain_table(header: list[str], body: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell: labels and the last column to the left, numbers to the right."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *body)]
    return ["  ".join(str(c).rjust(w) if 0 < i < len(widths) - 1 else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in [header, *body]]  # fmt: skip
