"""Anomaly mode: where did the NaN come from? In the spirit of ``torch.autograd.detect_anomaly``.

    >>> import gradcli as gc
    >>> x = gc.tensor(0.0, requires_grad=True)
    >>> with gc.detect_anomaly():
    ...     y = gc.sqrt(x) * 2
    ...     y.backward()
    Traceback (most recent call last):
    RuntimeError: Function 'SqrtBackward0' returned inf values in its 0th output. ...

While it is on, every recorded operation remembers its inputs and the line
of code that made it; the forward pass warns at the first operation whose
output is not finite although its inputs are; the backward pass checks what
each node returns and, at the first non-finite gradient made from finite
ones, raises ``RuntimeError`` (PyTorch's words) naming the node, the line
that made it and its input values. ``raise_error=False`` records the first
finding in ``found`` instead (the CLI uses it to name the expression).

It costs a check per node and keeps every node's inputs alive while on:
a debugging tool, off by default (the engine then reads one flag per node).
"""

from __future__ import annotations

import linecache
import os
import sys
import traceback
import warnings
from contextlib import ContextDecorator
from typing import Any

import numpy as np

from .grad_mode import state as _state

_PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # not pathlib: start-up


class Finding:
    """The first non-finite value: which node, where it was made, from what."""

    def __init__(self, node: Any, phase: str, kind: str, index: int, inputs: tuple[Any, ...], where: str) -> None:
        self.node, self.phase, self.kind, self.index, self.inputs, self.where = node, phase, kind, index, inputs, where

    def name(self) -> str:
        return self.node.name() if hasattr(self.node, "name") else type(self.node).__name__

    def message(self) -> str:
        name = self.name()
        if self.phase == "backward":
            head = f"Function '{name}' returned {self.kind} values in its {self.index}th output."
        else:
            prim = getattr(self.node, "prim", None)
            op = prim.name if prim is not None else name
            head = f"{op} ({name}) gave {self.kind} in the forward pass."
        parts = [head]
        if self.inputs:
            parts.append("Its inputs: " + ", ".join(describe(v) for v in self.inputs) + ".")
        if self.where:
            parts.append(f"It was made at {self.where}.")
        return " ".join(parts)


ENABLED = (
    "Anomaly Detection has been enabled. This mode will increase the runtime and should only be enabled for debugging."
)


class detect_anomaly(ContextDecorator):
    """Context manager (and decorator) that turns anomaly mode on; see the module's text."""

    def __init__(self, check_nan: bool = True, raise_error: bool = True) -> None:
        self.check_nan, self.raise_error = check_nan, raise_error
        if raise_error:  # the user's debugging mode (the CLI's own use, raise_error=False, says nothing)
            warnings.warn(ENABLED, UserWarning, stacklevel=2)
        self.found: Finding | None = None
        self.made: dict[int, tuple[Any, tuple[Any, ...], str, Any]] = {}

    def __enter__(self) -> detect_anomaly:
        # this thread's mode, as grad mode is (grad_mode.state): another thread's operations
        # are not checked, nor reported here
        self._previous = (_state.anomaly, _state.trace)
        _state.anomaly = self
        _state.trace = _Witness(self, _state.trace)
        return self

    def __exit__(self, *exc: Any) -> None:
        _state.anomaly, _state.trace = self._previous

    # --- what the recorder and the engine call while it is on ---------------------------------

    def forward(self, node: Any, result: Any, inputs: tuple[Any, ...]) -> None:
        frame, _ = _user_frame()
        where = _where(frame)
        # the user's debugging mode keeps the forward call's stack, for PyTorch's warning when the node fails
        stack = _stack(frame) if self.raise_error else None
        self.made[id(node)] = (node, inputs, where, stack)
        if self.found is None and self.check_nan:
            bad = _nonfinite(result)
            if bad and not any(_nonfinite(v) for v in inputs):
                self.found = Finding(node, "forward", bad, 0, inputs, where)
                warnings.warn(f"gradcli anomaly: {self.found.message()}", RuntimeWarning, stacklevel=_user_frame()[1])

    def backward(self, node: Any, incoming: Any, grads: Any) -> None:
        if not self.check_nan or _nonfinite(incoming):
            return  # not this node's doing: it was handed a non-finite gradient
        for i, g in enumerate(grads):
            bad = _nonfinite(g) if g is not None else None
            if bad:
                made = self.made.get(id(node))
                inputs, where = (made[1], made[2]) if made else ((), "")
                finding = Finding(node, "backward", bad, i, inputs, where)
                if self.raise_error:
                    self.failed(node)
                    raise RuntimeError(finding.message())
                if self.found is None or self.found.phase == "forward":
                    self.found = finding
                return

    def failed(self, node: Any) -> None:
        """PyTorch's warning before an error raised in ``node``'s backward propagates: the forward call
        that made the node, or that it was made before anomaly mode was on."""
        if not self.raise_error:
            return
        name = node.name() if hasattr(node, "name") else type(node).__name__
        made = self.made.get(id(node))
        if made is None or made[3] is None:
            text = f"Error detected in {name}. {NO_FORWARD_INFO}"
        else:
            text = f"Error detected in {name}. Traceback of forward call that caused the error:\n" + "".join(
                made[3].format()
            )
        warnings.warn(text, UserWarning, stacklevel=_user_frame()[1])


NO_FORWARD_INFO = (
    "No forward pass information available. Enable detect anomaly during forward pass for more information."
)


def node_failed(node: Any) -> None:
    """An error is being raised in ``node``'s backward: PyTorch's warning, in anomaly mode."""
    current = _state.anomaly
    if current is not None:
        current.failed(node)


def backward_check(node: Any, incoming: Any, grads: Any) -> None:
    current = _state.anomaly
    if current is not None:
        current.backward(node, incoming, grads)


def is_anomaly_enabled() -> bool:
    return _state.anomaly is not None


class set_detect_anomaly:
    """``torch.autograd.set_detect_anomaly(mode, check_nan)``: anomaly mode on or off from the call
    on (as ``set_grad_enabled``), the previous mode back at the end of a ``with`` block."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        current, trace = _state.anomaly, _state.trace
        self._previous = (current, trace)
        if not mode:
            _state.anomaly, _state.trace = None, trace.previous if isinstance(trace, _Witness) else trace
        elif current is None or current.check_nan != check_nan:
            with warnings.catch_warnings():  # (PyTorch's set_detect_anomaly does not warn)
                warnings.simplefilter("ignore")
                on = detect_anomaly(check_nan)
            on.__enter__()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        _state.anomaly, _state.trace = self._previous


class _Witness:
    """Stands in for the thread's trace (``grad_mode.state.trace``) while anomaly mode is on (passing entries on to a trace
    already there): every recorded node's inputs, and the line that made it."""

    def __init__(self, mode: detect_anomaly, previous: Any) -> None:
        self.mode, self.previous = mode, previous

    def append(self, entry: tuple[Any, Any, tuple[Any, ...]]) -> None:
        if self.previous is not None:
            self.previous.append(entry)
        node, result, inputs = entry
        self.mode.forward(node, result, inputs)


def _nonfinite(value: Any) -> str | None:
    raw = getattr(value, "_value", value)
    if isinstance(raw, (float, int)):
        return None if np.isfinite(raw) else nonfinite_kind(raw)
    raw = np.asarray(raw) if not isinstance(raw, np.ndarray) else raw
    if raw.dtype.kind not in "fc" or np.isfinite(raw).all():
        return None
    return nonfinite_kind(raw)


def nonfinite_kind(raw: Any) -> str:
    """ "nan", "-inf" or "inf": what a non-finite value holds (nan first)."""
    raw = np.asarray(raw)
    if np.isnan(raw).any():
        return "nan"
    return "-inf" if np.isneginf(raw).any() and not np.isposinf(raw).any() else "inf"


def describe(value: Any) -> str:
    raw = np.asarray(getattr(value, "_value", value))
    if raw.ndim == 0:
        return f"{raw.item():.6g}" if raw.dtype.kind in "fc" else str(raw.item())
    text = np.array2string(raw, precision=6, threshold=6, edgeitems=2, separator=", ", max_line_width=10**9)
    return f"{' '.join(text.split())} (shape {list(raw.shape)})"  # one line, whatever the shape


def inputs_text(values: Any) -> str:
    """`` from input 0`` or `` from inputs 1, 0`` (empty for no inputs): what a warning appends."""
    if not len(values):
        return ""
    return f" from {'input' if len(values) == 1 else 'inputs'} " + ", ".join(describe(v) for v in values)


def _user_frame() -> tuple[Any, int]:
    """The first frame outside gradcli, and its ``stacklevel`` as seen from the caller."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return frame, level


def _stack(frame: Any) -> traceback.StackSummary:
    """The calls that led to ``frame``, outermost first (their lines are read when shown)."""
    summary = traceback.StackSummary.extract(traceback.walk_stack(frame), lookup_lines=False)
    summary.reverse()
    return summary


def _where(frame: Any) -> str:
    """``file.py:12 (line text)`` of a frame (empty for none)."""
    if frame is None:
        return ""
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" + (f" ({line})" if line else "")
