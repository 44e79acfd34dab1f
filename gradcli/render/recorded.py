"""``gc.render.recording()``: keep what a picture of the block's computation needs, for gradcli's own
tensors (the tape: each node's output and inputs) and, where the user has imported torch, for PyTorch's
(``recording_torch``: each operation's value, its ``nn.Module``, the user's line, and the gradient a later
``backward()`` gives each node), so that ``gc.render.graph(loss)`` after ``loss.backward()`` draws every
value, gradient and module box:

    with gc.render.recording():
        loss = model(x).pow(2).mean()
    loss.backward()
    gc.render.graph(loss).save("g.png")

torch is never imported here: only read from ``sys.modules`` when the user has imported it. The last
``KEPT`` recordings that saw PyTorch operations are held (a graph drawn without ``trace=`` finds its own
among them); ``with gc.render.recording() as trace:`` holds one as long as ``trace`` lives.
"""

from __future__ import annotations

import sys
from collections import deque
from typing import Any

from ..autograd.tape import recording as tape_recording

KEPT = 2  # recordings of PyTorch operations held for graphs drawn without trace= (each holds its values)
_recent: deque[Any] = deque(maxlen=KEPT)


class Recording(list):
    """The tape of gradcli's own operations (a list, as ``autograd.tape.recording`` gives it), with
    ``torch``: what PyTorch did in the block (a ``TorchRecord``), or None when torch was not imported."""

    torch: Any = None


class _Recording:
    """The context of one ``recording()`` block: gradcli's tape, and torch's recording where the user
    imported torch (its modules named by the caller's variables, ``net.0``)."""

    def __init__(self, caller: Any, arrays: bool) -> None:
        self.caller, self.arrays = caller, arrays
        self.contexts: list[Any] = []
        self.trace = Recording()

    def __enter__(self) -> Recording:
        tape = tape_recording(self.trace)
        self.contexts.append(tape)
        tape.__enter__()
        try:
            if "torch" in sys.modules:  # (never imported for it: a block of the user's torch code has it already)
                self.trace.torch = self._torch()
        except BaseException:
            tape.__exit__(*sys.exc_info())
            raise
        return self.trace

    def _torch(self) -> Any:
        from ..lang.frameworks.torch_record import module_roots, recording_torch  # lazy: imports torch (the user's)

        caller, self.caller = self.caller, None  # (the frame is not held past the block's start)
        roots = module_roots(None, caller.f_locals, caller.f_globals)
        context = recording_torch(roots, grads=True, keep=True if self.arrays else None)
        record = context.__enter__()
        self.contexts.append(context)
        return record

    def __exit__(self, *exc: Any) -> None:
        while self.contexts:
            self.contexts.pop().__exit__(*exc)
        record = self.trace.torch
        if record is not None and record.ops:
            _recent.append(record)


def recording(arrays: bool = False) -> Any:
    """Keep every operation's value while the block runs: gradcli's own (the tape ``graph(y,
    trace=trace)`` reads) and, when torch is imported, PyTorch's, with each ``nn.Module`` that ran and
    the gradients a ``backward()`` gives each node later (``gc.render.graph(loss)`` finds them itself).
    PyTorch's values and gradients over 64 elements are kept as their statistics, computed as they are
    made; ``arrays=True`` keeps them whole too, for ``graph(loss, arrays=True).save_arrays(FILE)``.

    >>> import gradcli as gc
    >>> w = gc.tensor(3.0, requires_grad=True, name="w")
    >>> with gc.render.recording() as trace:
    ...     y = gc.sin(w) * w
    >>> [n.value is not None for n in gc.render.graph(y, trace=trace).nodes]
    [True, True, True]
    """
    return _Recording(sys._getframe(1), arrays)


def torch_record_of(tensors: Any) -> Any:
    """The recording (a ``TorchRecord``) that saw ``tensors`` computed, or computed what they were
    computed from (a loss taken after the recorded forward), the latest first, or None."""
    if not _recent:
        return None
    nodes = [t.grad_fn for t in tensors if getattr(t, "grad_fn", None) is not None]
    seen = set(nodes)
    while nodes:  # (breadth first, without recursion: the nodes nearest the outputs first)
        for record in reversed(_recent):
            if any(node in record.values for node in nodes):
                return record
        nodes = [n for node in nodes for n, _ in node.next_functions if n is not None and n not in seen]
        seen.update(nodes)
    return None
