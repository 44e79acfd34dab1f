"""The recording tape: every recorded node's output and inputs, kept while a block runs.

Forward mode, replay, the gradient checks and the pictures read the tape; it lives here, beside the
recording it listens to (this thread's ``grad_mode.state.trace``), so each of them imports it from the layer
below. A recording keeps what its own thread records: another thread's operations are not on its tape.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .grad_mode import state as _state
from .tensor import Tensor


@contextmanager
def recording(entries: list[Any] | None = None) -> Iterator[list[tuple[Any, Tensor, tuple[Any, ...]]]]:
    """Keep every recorded node's output and inputs while the block runs (for values on a graph), in
    ``entries`` when given (a list of the caller's: ``gc.render.recording``'s, which carries torch's too).

    >>> import gradcli as gc
    >>> from gradcli.render import graph, recording
    >>> x = gc.tensor(2.0, requires_grad=True, name="x")
    >>> with recording() as trace:
    ...     y = x * x + 1
    >>> [n.label for n in graph(y, trace=trace).nodes]
    ['x', 'x * x', '1', 'n1 + 1']
    """
    previous = _state.trace
    _state.trace = entries = [] if entries is None else entries
    try:
        yield entries
    finally:
        _state.trace = previous


@contextmanager
def nested_recording() -> Iterator[list[Any]]:
    """Record the run (as ``recording()`` does), and hand it on to an enclosing recording:
    an outer ``jvp``, ``hessian`` or gradient check must see the operations of an inner
    ``jacobian(..., create_graph=True)`` to push tangents or points through them."""
    outer = _state.trace
    with recording() as entries:
        try:
            yield entries
        finally:
            if outer is not None:
                outer.extend(entries)
