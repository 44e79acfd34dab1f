"""``gradcli plot``: read the options, choose the variables and ranges, draw to a file or the terminal."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UsageError, printable
from ..files import write_atomic
from ..lang.evaluate import suggest
from ..lang.values import constant, names_list, split_top_level
from ..render import braille
from ..render import plot as drawing
from . import output
from .inputs import Given
from .reading import read_program
from .report import reported, warn_later

DEFAULT_SPAN = 5.0  # without --range: -5..5 (around the --at point if there is one)


def plot(given: Given) -> None:
    """``gradcli plot``: f and f′ (and f″) of one variable, or contours and gradient arrows of two."""
    with reported():
        fmt = _picture_format(given)
        program, values = read_program(given, given.out)
        named, shared = _ranges(given.ranges)
        names = _plotted(program, values, named, names_list(given.wrt))
        spans = [named.get(n) or shared or _around(values.get(n)) for n in names]
        point = _point(names, values)
        fixed = {k: v for k, v in values.items() if k not in names}
        if len(names) == 1:
            at = None if point is None else point[0]
            data: Any = drawing.curves(program, names[0], spans[0], fixed, given.order, at=at)
        else:
            if given.order != 1:
                raise UsageError("--order 2 draws f″ of one variable; a plot of two shows f and its gradient")
            data = drawing.field(program, (names[0], names[1]), (spans[0], spans[1]), fixed, at=point)
        _say_what_is_missing(data, names, spans, point)
        title = _title(program, given.expression)
        note = ", ".join(f"{k} = {output.array(v, summarize=True, digits=4)}" for k, v in fixed.items())
        if fmt is not None:
            write_atomic(given.out, drawing.picture(data, title, fmt, note))  # whole or nothing
            output.wrote(given.out)
        if given.as_json:
            output.print_json(drawing.document(data))
        elif fmt is None:
            _on_terminal(data, title if not note else f"{title}   ({note})")


def _picture_format(given: Given) -> str | None:
    """The picture's format from -o (None: on the terminal), refused before any work where there is
    no terminal to draw on or no Matplotlib to draw with (exit 3)."""
    fmt = drawing.format_of(given.out) if given.out is not None else None
    if fmt is None and not given.as_json and not output.terminal():
        raise UsageError(
            "plot draws a picture: give -o FILE.png (or .svg, .pdf); without -o it is drawn only on a terminal"
        )
    if fmt is not None:
        drawing.require_matplotlib()  # exit 3 before any work
    return fmt


def _ranges(items: list[str]) -> tuple[dict[str, tuple[float, float]], tuple[float, float] | None]:
    """``--range A,B`` (every axis) and ``--range NAME=A,B`` (one variable's)."""

    named: dict[str, tuple[float, float]] = {}
    shared = None
    for item in items:
        name, equals, text = item.partition("=")
        if not equals:
            name, text = "", item
        elif not name.strip().isidentifier():
            raise UsageError(f"--range {item}: give A,B or NAME=A,B")
        span = _span(item, text)
        if not name:
            if shared is not None:
                raise UsageError("give one --range A,B for every axis, or one --range NAME=A,B per variable")
            shared = span
        elif name.strip() in named:
            raise UsageError(f"--range {item}: a second range for {name.strip()}")
        else:
            named[name.strip()] = span
    return named, shared


def _span(item: str, text: str) -> tuple[float, float]:

    pieces = split_top_level(text)
    if len(pieces) != 2:
        raise UsageError(f"--range {item}: give two numbers, the start and the end (--range -2,2)")
    ends = []
    for _, piece in pieces:
        try:
            value = constant(piece.strip(), "--range")
        except UsageError:
            raise UsageError(f"--range {item}: {piece.strip()!r} is not a number") from None
        if value.ndim != 0 or not np.isfinite(value):
            raise UsageError(f"--range {item}: {piece.strip()!r} is not a finite number")
        ends.append(float(value))
    if not ends[0] < ends[1]:
        raise UsageError(f"--range {item}: the start must be below the end")
    if not np.isfinite(ends[1] - ends[0]):  # the samples would be inf and nan
        raise UsageError(f"--range {item}: too wide, the end minus the start is beyond float64's range")
    return ends[0], ends[1]


def _around(value: Any) -> tuple[float, float]:
    centre = float(value) if value is not None and np.ndim(value) == 0 and np.isfinite(value) else 0.0
    return centre - DEFAULT_SPAN, centre + DEFAULT_SPAN


def _plotted(program: Any, values: dict[str, Any], named: dict[str, tuple[float, float]], wrt: list[str]) -> list[str]:
    """The one or two variables along the axes: those of --wrt, else those named by --range and every
    free variable without an --at value (with --at it is a parameter); when every one of one or two
    variables has an --at value, they are plotted and the values are the point."""

    free = program.free_variables([*values, *named, *wrt])
    for option, name in [*(("--wrt", n) for n in wrt), *(("--range", f"{n}=...") for n in named)]:
        plain = name.removesuffix("=...")
        if plain not in free:
            said = ", ".join(free) if free else "none"
            raise UsageError(f"{option} {name}: '{plain}' is not a variable of the expression{suggest(plain, free)} "
                             f"(its variables: {said})")  # fmt: skip
    if wrt:
        outside = [n for n in named if n not in wrt]
        if outside:
            raise UsageError(f"--range {outside[0]}=...: '{outside[0]}' is not among --wrt {','.join(wrt)}")
    names = list(dict.fromkeys(wrt)) or [*named, *(v for v in free if v not in values and v not in named)]
    if not names:
        if not free:
            raise UsageError("the expression has no variable to plot")
        if len(free) > 2:
            raise UsageError(
                f"every variable ({', '.join(free)}) has a value from --at: name the one or two to plot with "
                "--range NAME=A,B"
            )
        names = free  # every variable has its --at value: that is the point (of the tangent, of the arrow)
    if len(names) > 2:
        raise UsageError(
            f"plot draws one or two variables, and {len(names)} are free: {', '.join(names)}; "
            f"give the others a value with --at (say --at {names[-1]}=1) or choose them with --range NAME=A,B"
        )
    return names


def _point(names: list[str], values: dict[str, Any]) -> tuple[float, ...] | None:
    """The --at point along the plotted variables: every one, or none."""

    given = [n for n in names if n in values]
    if not given:
        return None
    if len(given) != len(names):
        missing = next(n for n in names if n not in values)
        raise UsageError(f"--at: give the point's {missing} too (a point of the plot has all of {', '.join(names)})")
    for name in names:
        if np.ndim(values[name]) != 0:
            raise UsageError(f"--at {name}: the point of a plot is one number for each variable")
    return tuple(float(values[n]) for n in names)


def _say_what_is_missing(data: Any, names: list[str], spans: list[tuple[float, float]], point: Any) -> None:
    """Warnings for a picture with nothing, or without its point, in it."""
    values = data.raw[0] if hasattr(data, "raw") else data.f
    if not np.isfinite(values).any():
        warn_later("f has no finite value in the range: the picture is empty")
    for name, span, value in zip(names, spans, point or ()):
        if not span[0] <= value <= span[1]:
            warn_later(f"--at {name}={value:g} is outside the range {span[0]:g}..{span[1]:g}: the point is not shown")


def _title(program: Any, expression: str | None) -> str:
    """The expression in the language (a program's lines joined by '; '), or the Python function."""

    text = "; ".join(line.strip() for line in program.text.splitlines() if line.strip()) if program.text else None
    text = text or expression or program.origin
    return printable(text if len(text) <= 80 else text[:77] + "...")


def _on_terminal(data: Any, title: str) -> None:
    """Curves in Braille characters (the terminal's width, about 20 rows); a two-variable plot as
    arrows of the gradient coloured by f."""
    import shutil

    width = min(shutil.get_terminal_size((80, 24)).columns, 160)
    console = output.console()
    if isinstance(data, drawing.Field):
        console.print(braille.arrows(data, title, width), end="", soft_wrap=True)
        return
    styles = ["blue", "red", "green"]
    series = [(xs, ys, styles[k]) for k, (xs, ys) in enumerate(zip(data.xs, data.drawn))][::-1]  # f on top
    labels = [("━━", label, styles[k]) for k, label in enumerate(data.labels)]
    marks = []
    limits = drawing.y_limits(data) or (-1.0, 1.0)
    if data.at is not None:
        a, fa, slope = data.at
        series.insert(0, (data.x, fa + slope * (data.x - a), "bright_black"))
        labels.append(("━━", f"tangent at {data.name} = {a:.4g}: f = {fa:.4g}, f′ = {slope:.4g}", "bright_black"))
        marks.append((a, fa, "bold"))
    xlim = (float(data.x[0]), float(data.x[-1]))
    height = max(8, min(20, shutil.get_terminal_size((80, 24)).lines - 8))
    text = braille.figure(series, labels, xlim, limits, title, data.name, width, height, marks)
    console.print(text, end="", soft_wrap=True)
