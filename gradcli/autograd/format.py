"""``repr`` of a tensor, laid out as PyTorch lays it out.

The seeds print ``tensor([ 0.,  4.,  8., 12.])`` and ``tensor(0.5946,
requires_grad=True)``; users compare against those strings, so the rules are
PyTorch's: integral floats end in ``.``, otherwise 4 decimals, scientific
notation when magnitudes span more than 1000x, columns right-aligned, long
tensors summarised with ``...``.
"""

from __future__ import annotations

import math

import numpy as np

PRECISION = 4
LINEWIDTH = 80
THRESHOLD = 1000
EDGEITEMS = 3
DEFAULT_DTYPES = (np.dtype(np.float64), np.dtype(np.complex128), np.dtype(np.int64), np.dtype(np.bool_))


class _Formatter:
    def __init__(self, values: np.ndarray) -> None:
        self.floating = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        flat = values.reshape(-1)
        if not self.floating:
            for v in flat.tolist():
                self.width = max(self.width, len(self._plain(v)))
            return
        finite = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
        if finite.size == 0:
            return
        lo, hi = float(np.abs(finite).min()), float(np.abs(finite).max())
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        spread = hi / lo > 1000.0 or hi > 1.0e8
        if self.int_mode:
            self.sci_mode = spread
            if not spread:
                self.width = max(len(f"{v:.0f}") + 1 for v in finite.tolist())
        else:
            self.sci_mode = spread or lo < 1.0e-4
            if not self.sci_mode:
                self.width = max(len(f"{v:.{PRECISION}f}") for v in finite.tolist())
        if self.sci_mode:
            self.width = max(len(f"{v:.{PRECISION}e}") for v in finite.tolist())

    @staticmethod
    def _plain(v: object) -> str:
        return str(v)

    def format(self, v: object) -> str:
        if self.floating:
            v = float(v)  # type: ignore[arg-type]
            if self.sci_mode:
                text = f"{v:{self.width}.{PRECISION}e}"
            elif self.int_mode:
                text = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
            else:
                text = f"{v:.{PRECISION}f}"
        else:
            text = self._plain(v)
        return " " * (self.width - len(text)) + text


def _summary_values(a: np.ndarray) -> np.ndarray:
    """The elements that will be shown when the tensor is summarised."""
    if a.ndim == 0:
        return a
    if a.shape[0] > 2 * EDGEITEMS:
        parts = [_summary_values(a[i]) for i in (*range(EDGEITEMS), *range(len(a) - EDGEITEMS, len(a)))]
    else:
        parts = [_summary_values(x) for x in a]
    return np.concatenate([np.reshape(p, -1) for p in parts]) if parts else a.reshape(-1)


def _vector(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    per_line = max(1, (LINEWIDTH - indent) // (fmt.width + 2))
    if summarize and a.shape[0] > 2 * EDGEITEMS:
        items = [fmt.format(v) for v in a[:EDGEITEMS]] + [" ..."] + [fmt.format(v) for v in a[-EDGEITEMS:]]
    else:
        items = [fmt.format(v) for v in a]
    lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    if a.ndim == 0:
        return fmt.format(a[()])
    if a.ndim == 1:
        return _vector(a, indent, summarize, fmt)
    if summarize and a.shape[0] > 2 * EDGEITEMS:
        rows = [_nested(a[i], indent + 1, summarize, fmt) for i in range(EDGEITEMS)]
        rows += ["..."] + [_nested(a[i], indent + 1, summarize, fmt) for i in range(len(a) - EDGEITEMS, len(a))]
    else:
        rows = [_nested(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0])]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def format_values(value: object, indent: int = 0) -> str:
    """The bracketed body: ``[[1., 2.],\\n [3., 4.]]``."""
    a = np.asarray(value)
    if a.size == 0:
        return "[]"
    summarize = a.size > THRESHOLD
    fmt = _Formatter(_summary_values(a) if summarize else a)
    return _nested(a, indent, summarize, fmt)


def _with_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    parts = [text]
    last = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last + len(suffix) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + suffix)
            last = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last += len(suffix) + 2
    return "".join(parts) + ")"


def tensor_repr(value: object, grad_fn_name: str | None, requires_grad: bool) -> str:
    a = np.asarray(value)
    prefix = "tensor("
    body = format_values(a, len(prefix))
    suffixes = []
    if a.size == 0 and a.shape != (0,):
        suffixes.append(f"size={a.shape}")
    if a.dtype not in DEFAULT_DTYPES:
        suffixes.append(f"dtype={a.dtype}")
    if grad_fn_name is not None:
        suffixes.append(f"grad_fn=<{grad_fn_name}>")
    elif requires_grad:
        suffixes.append("requires_grad=True")
    return _with_suffixes(prefix + body, suffixes, len(prefix))
