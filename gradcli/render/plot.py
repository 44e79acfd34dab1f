"""``gradcli plot``: what is drawn (f and its derivatives on a grid, from autograd) and the picture.

The data (:func:`curves`, :func:`field`) is computed by the library in one batched evaluation of
the whole grid; kinks and poles become breaks (NaN) in the curves instead of vertical spikes. The
picture is drawn by Matplotlib (imported only here, with the Agg backend: no display needed); the
terminal's picture is :mod:`gradcli.render.braille`'s.

>>> from gradcli.lang.program import load
>>> c = curves(load("x^2"), "x", (-1.0, 1.0), {}, order=1, samples=5)
>>> c.x.tolist(), c.raw[0].tolist(), c.raw[1].tolist()
([-1.0, -0.5, 0.0, 0.5, 1.0], [1.0, 0.25, 0.0, 0.25, 1.0], [-2.0, -1.0, 0.0, 1.0, 2.0])
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as _field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MissingProgram, UsageError, install_hint
from ..lang.compute import single_output
from ..lang.compute.points import derivative_series, evaluate_points

SAMPLES = 801  # points of a curve: a pole or a jump between two of them is found from the slopes
GRID = 121  # points along each axis of a two-variable plot (121 x 121 values)
GRID_PYTHON = 61  # for a Python function, which runs point by point (its control flow may differ)
ARROWS = 21  # arrows along each axis
PRIMES = ["", "′", "″"]
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


@dataclass
class Curves:
    """f and its derivatives of one variable: ``raw[k]`` is the k-th derivative at ``x`` as autograd
    gives it (one more than drawn: the slope of the last curve finds its breaks), ``drawn[k]`` the
    k-th curve with NaN at its breaks (``xs[k]`` its abscissae, a NaN point inserted at each jump)."""

    name: str
    x: np.ndarray
    raw: list[np.ndarray]
    xs: list[np.ndarray] = _field(default_factory=list)
    drawn: list[np.ndarray] = _field(default_factory=list)
    at: tuple[float, float, float] | None = None  # the point of --at: a, f(a), f'(a)

    @property
    def labels(self) -> list[str]:
        return [f"f{PRIMES[k]}({self.name})" for k in range(len(self.drawn))]


@dataclass
class Field:
    """f of two variables on a grid (``f[i, j]`` at ``x[j], y[i]``) and its gradient."""

    names: tuple[str, str]
    x: np.ndarray
    y: np.ndarray
    f: np.ndarray
    gx: np.ndarray
    gy: np.ndarray
    at: tuple[float, float, float, float, float] | None = None  # a, b, f(a, b), df/dx, df/dy


def curves(
    program: Any,
    name: str,
    span: tuple[float, float],
    values: Mapping[str, Any],
    order: int = 1,
    samples: int = SAMPLES,
    at: float | None = None,
) -> Curves:
    """f, f′ (and f″ with ``order`` 2) of ``program`` in ``name`` over ``span``, the other variables
    at ``values``; with ``at``, the point a and f(a), f′(a) for the tangent."""
    x = np.linspace(span[0], span[1], samples)
    raw = derivative_series(program, name, x, values, order + 1)
    found = Curves(name, x, raw)
    for k in range(order + 1):
        xs, ys = broken(x, raw[k], raw[k + 1])
        found.xs.append(xs)
        found.drawn.append(ys)
    if at is not None:
        f, slope = derivative_series(program, name, np.array([at]), values, 1)
        found.at = (float(at), float(f[0]), float(slope[0]))
    return found


def broken(x: np.ndarray, y: np.ndarray, slope: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The curve ``y(x)`` with a break (a NaN point, inserted between the two samples) wherever it
    jumps: where the change between neighbours is far above the curve's typical change and the
    curve's own slope (``slope``, from autograd) at both ends cannot explain it: the change is more
    than twice the steeper slope's over the step, or goes against both slopes (a pole: 1/x, tan; a
    step: sign, floor; a kink's derivative: abs' at 0). A non-finite value is a break too.

    >>> x = np.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0])
    >>> xs, ys = broken(x, 1 / x, -1 / x**2)
    >>> xs.tolist(), np.round(ys, 2).tolist()
    ([-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0], [-0.33, -0.5, -1.0, nan, 1.0, 0.5, 0.33])
    """
    y = np.where(np.isfinite(y), y, np.nan)
    with np.errstate(all="ignore"):
        step = np.diff(y)
        h = np.diff(x)
        change = np.abs(step[np.isfinite(step)])
        typical = float(np.median(change)) if change.size else 0.0
        tiny = 1e-9 * max(1.0, float(np.nanmax(np.abs(y))) if np.isfinite(y).any() else 1.0)
        big = np.abs(step) > 2 * typical + tiny
        left, right = slope[:-1], slope[1:]
        steep = np.abs(step) > 2 * h * np.maximum(np.abs(left), np.abs(right)) + tiny
        against = (left * right > 0) & (step * left < 0)  # NaN (an infinite slope) compares False
    jumps = np.flatnonzero(big & (steep | against))
    if not jumps.size:
        return x, y
    middles = (x[jumps] + x[jumps + 1]) / 2
    return np.insert(x, jumps + 1, middles), np.insert(y, jumps + 1, np.nan)


def field(
    program: Any,
    names: tuple[str, str],
    spans: tuple[tuple[float, float], tuple[float, float]],
    values: Mapping[str, Any],
    samples: int | None = None,
    at: tuple[float, float] | None = None,
) -> Field:
    """f and its gradient over the grid of ``spans`` (one batched evaluation of every point; a
    Python function on a coarser grid, point by point)."""
    if samples is None:
        samples = GRID if program.replayable else GRID_PYTHON

    x = np.linspace(*spans[0], samples)
    y = np.linspace(*spans[1], samples)
    gx, gy = np.meshgrid(x, y)
    _scalar_output(program, {**values, names[0]: x[0], names[1]: y[0]}, names)
    shape = gx.shape
    _, result = evaluate_points(program, {names[0]: gx.ravel(), names[1]: gy.ravel()}, values, list(names), None)
    found = Field(
        names, x, y, result.value.reshape(shape), *(result.gradient[n].reshape(shape) for n in names)
    )  # fmt: skip
    if at is not None:
        _, point = evaluate_points(program, {names[0]: np.array([at[0]]), names[1]: np.array([at[1]])}, values,
                                   list(names), None)  # fmt: skip
        found.at = (at[0], at[1], float(point.value[0]), *(float(point.gradient[n][0]) for n in names))
    return found


def _scalar_output(program: Any, point: Mapping[str, Any], names: Sequence[str]) -> None:
    out = single_output(program.run(point, list(names)))
    if out.numel() != 1:
        raise UsageError(f"plot needs one number for each point; the output has shape {tuple(out.shape)}")


def y_limits(data: Curves) -> tuple[float, float] | None:
    """The y range to show: every value, except those close to a break of any curve (a pole's, which
    would squash the rest: within 3 % of the x range of one), and if a few values still dwarf the others (a pole
    between two samples), the central 90 % with a margin."""
    width = 0.03 * (data.x[-1] - data.x[0])
    gaps = np.unique(np.concatenate([xs[np.isnan(ys)] for xs, ys in zip(data.xs, data.drawn)]))  # of every curve
    kept = []
    for xs, ys in zip(data.xs, data.drawn):
        near = np.zeros(len(xs), dtype=bool)
        if gaps.size:
            at = np.searchsorted(gaps, xs)  # the nearest break on either side of each point
            left = np.abs(xs - gaps[np.clip(at - 1, 0, len(gaps) - 1)])
            right = np.abs(gaps[np.clip(at, 0, len(gaps) - 1)] - xs)
            near = np.minimum(left, right) < width
        values = ys[np.isfinite(ys) & ~near]
        kept.append(values if values.size else ys[np.isfinite(ys)])
    values = np.concatenate(kept)
    if not values.size:
        return None
    lo, hi = float(values.min()), float(values.max())
    q_lo, q_hi = (float(q) for q in np.quantile(values, [0.05, 0.95]))
    if hi - lo > 3 * (q_hi - q_lo) and q_hi > q_lo:
        lo, hi = q_lo - 0.25 * (q_hi - q_lo), q_hi + 0.25 * (q_hi - q_lo)
    margin = 0.05 * (hi - lo) or max(1.0, abs(hi)) * 0.1
    return lo - margin, hi + margin


def document(data: Curves | Field) -> dict[str, Any]:
    """The plotted values for ``--json``: the grid, f and its derivatives as autograd gives them (NaN
    and infinities as strings once written), where each curve breaks, and the --at point.

    >>> from gradcli.lang.program import load
    >>> from gradcli.text import jsonable
    >>> jsonable(document(curves(load("1/x"), "x", (-1.0, 2.0), {}, samples=4, at=1.0)))
    {'variables': ['x'], 'x': [-1.0, 0.0, 1.0, 2.0], 'f': [-1.0, 'inf', 1.0, 0.5], 'df/dx': [-1.0, '-inf', -1.0, -0.25], 'breaks': {'f': [0.0], 'df/dx': [0.0]}, 'point': {'x': 1.0, 'f': 1.0, 'df/dx': -1.0}}
    """
    if isinstance(data, Field):
        a, b = data.names
        found = {"variables": [a, b], a: data.x, b: data.y, "f": data.f, f"df/d{a}": data.gx, f"df/d{b}": data.gy}
        if data.at is not None:
            found["point"] = dict(zip([a, b, "f", f"df/d{a}", f"df/d{b}"], data.at))
        return found
    x = data.name
    keys = ["f", f"df/d{x}", f"d2f/d{x}2"][: len(data.drawn)]
    found = {"variables": [x], x: data.x, **dict(zip(keys, data.raw))}
    found["breaks"] = {k: xs[np.isnan(ys)] for k, xs, ys in zip(keys, data.xs, data.drawn)}  # x of each gap
    if data.at is not None:
        found["point"] = dict(zip([x, "f", f"df/d{x}"], data.at))
    return found


def format_of(path: str) -> str:
    """png, svg or pdf from the file's extension."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise UsageError(f"-o {path}: cannot tell the format from '{suffix or 'no extension'}'; use .png, .svg or .pdf")
    return FORMATS[suffix]


def _matplotlib() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise MissingProgram(f"gradcli plot needs matplotlib: {install_hint('plot')}") from None
    return matplotlib


def require_matplotlib() -> None:
    """Say that Matplotlib is missing (exit 3) before any work is done."""
    _matplotlib()


STYLE = {
    "font.size": 12,
    "axes.titlesize": 14,
    "axes.labelsize": 13,
    "legend.fontsize": 11,
    "svg.fonttype": "none",  # text stays text in an SVG: searchable, and smaller
    "axes.grid": True,
    "grid.alpha": 0.3,
}
COLORS = ["#1f77b4", "#d62728", "#2ca02c"]


def picture(data: Curves | Field, title: str, fmt: str, note: str = "") -> bytes:
    """The figure as PNG, SVG or PDF bytes: ``title`` on top (the expression), ``note`` below it
    (the fixed parameters)."""
    matplotlib = _matplotlib()
    with matplotlib.rc_context(STYLE), np.errstate(all="ignore"):
        figure = drawn(data, title, note)
        buffer = io.BytesIO()
        metadata = {"Software": None} if fmt == "png" else {"Creator": None} if fmt == "pdf" else {"Date": None}
        figure.savefig(buffer, format=fmt, dpi=110, metadata=metadata)
    return _palette(buffer.getvalue()) if fmt == "png" else buffer.getvalue()


def drawn(data: Curves | Field, title: str, note: str = "") -> Any:
    """The Matplotlib figure ``picture`` saves (in ``STYLE``'s context)."""
    from matplotlib.figure import Figure  # no pyplot: no backend, no display, no global state touched

    if isinstance(data, Curves):
        figure = _curves_figure(Figure(figsize=(8, 5)), data)
    else:
        figure = _field_figure(Figure(figsize=(7.5, 6)), data)
    axes = figure.axes[0]
    axes.set_title(title + (f"\n{note}" if note else ""))
    figure.tight_layout()
    return figure


def _palette(png: bytes) -> bytes:
    """The PNG in 256 colours (about a third of the bytes, the same to the eye): Pillow comes with Matplotlib."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _curves_figure(figure: Any, data: Curves) -> Any:
    axes = figure.add_subplot()
    for k, (xs, ys, label) in enumerate(zip(data.xs, data.drawn, data.labels)):
        axes.plot(xs, ys, color=COLORS[k], linewidth=2.2 if k == 0 else 1.6, label=label,
                  linestyle="-" if k == 0 else "--" if k == 1 else ":")  # fmt: skip
    limits = y_limits(data)
    if data.at is not None:
        a, fa, slope = data.at
        tangent = fa + slope * (data.x - a)
        axes.plot(data.x, tangent, color="#7f7f7f", linewidth=1.2, label=f"tangent at {data.name} = {_num(a)}")
        axes.plot([a], [fa], "o", color="black", markersize=7, zorder=5,
                  label=f"f({_num(a)}) = {_num(fa)}, f′({_num(a)}) = {_num(slope)}")  # fmt: skip
        if limits is not None and np.isfinite(fa):
            limits = (min(limits[0], fa), max(limits[1], fa))
    axes.set_xlim(data.x[0], data.x[-1])
    if limits is not None:
        axes.set_ylim(*limits)
    axes.axhline(0, color="black", linewidth=0.6)
    axes.set_xlabel(data.name)
    axes.set_ylabel("value")
    entries = len(axes.get_legend_handles_labels()[0])  # below the axes, as the field's: over no curve;
    columns = 3 if entries == 3 else 2  # (filled down: the curves in the first column, the point in the second)
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=columns, fontsize=10, frameon=False)
    return figure


def _field_figure(figure: Any, data: Field) -> Any:
    axes = figure.add_subplot()
    f = np.where(np.isfinite(data.f), data.f, np.nan)
    finite = f[np.isfinite(f)]
    if finite.size and finite.max() > finite.min():
        lo, hi = (float(q) for q in np.quantile(finite, [0.02, 0.98]))
        if hi <= lo:
            lo, hi = float(finite.min()), float(finite.max())
        levels = np.linspace(lo, hi, 15)
        filled = axes.contourf(data.x, data.y, np.clip(f, lo, hi), levels=levels, cmap="GnBu")
        lines = axes.contour(data.x, data.y, f, levels=levels, colors="black", linewidths=0.6)
        axes.clabel(lines, levels[::2], fontsize=8, fmt="%.3g")
        figure.colorbar(filled, ax=axes, label="f")
    step = max(1, (len(data.x) - 1) // (ARROWS - 1))
    u, v = data.gx[::step, ::step], data.gy[::step, ::step]
    length = np.hypot(u, v)
    finite = np.isfinite(length)
    if finite.any() and length[finite].max() > 0:  # arrows over the 95th percentile drawn at its length (a pole's)
        cap = float(np.quantile(length[finite], 0.95)) or float(length[finite].max())
        shrink = np.where(finite & (length > cap), cap / np.where(length > 0, length, 1), 1.0)
        u, v = np.where(finite, u * shrink, 0.0), np.where(finite, v * shrink, 0.0)
        axes.quiver(data.x[::step], data.y[::step], u, v, color="#d62728",
                    label=f"∇f = (∂f/∂{data.names[0]}, ∂f/∂{data.names[1]})")  # fmt: skip
    if data.at is not None:
        a, b, fab, da, db = data.at
        scale = 0.15 * max(data.x[-1] - data.x[0], data.y[-1] - data.y[0]) / (np.hypot(da, db) or 1.0)
        axes.plot([a], [b], "o", color="black", markersize=7, zorder=5, label=f"f({_num(a)}, {_num(b)}) = {_num(fab)}")
        axes.annotate("", xy=(a + da * scale, b + db * scale), xytext=(a, b), zorder=6,
                      arrowprops={"arrowstyle": "-|>", "color": "black", "linewidth": 2.2, "mutation_scale": 18})  # fmt: skip
        axes.plot([], [], color="black", linewidth=2.2, label=f"∇f there = ({_num(da)}, {_num(db)})")
    spans = (data.x[-1] - data.x[0], data.y[-1] - data.y[0])
    if 1 / 3 <= spans[0] / spans[1] <= 3:
        axes.set_aspect("equal")  # the gradient's arrows then stand at right angles to the contours
    axes.set_xlim(data.x[0], data.x[-1])
    axes.set_ylim(data.y[0], data.y[-1])
    axes.set_xlabel(data.names[0])
    axes.set_ylabel(data.names[1])
    axes.grid(False)
    if axes.get_legend_handles_labels()[0]:  # f constant and no point: nothing to name
        axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=10, frameon=False)
    return figure


def _num(value: float) -> str:
    """A number for a label: 4 significant digits."""
    return f"{value:.4g}"
