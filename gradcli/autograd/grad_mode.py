"""Whether operations are recorded: ``no_grad``, ``enable_grad``, ``set_grad_enabled``; and the
rest of a thread's autograd state (``state``).

Every mode is per thread, as PyTorch keeps its grad mode: ``no_grad`` in one thread records
nothing there and changes nothing in another, and a new thread (a pool's worker, a Dask
worker's task) starts from the defaults, grad mode on, whatever the thread that made it was
doing. What is a fact about shared objects stays process-wide: ``hooks.seen`` and
``tensor.inplace_seen``/``complex_seen`` (set once, never cleared: they only turn on checks a
tensor or node that another thread made may need) and the random generator (PyTorch's is
global too).
"""

from __future__ import annotations

import functools
import inspect
from _thread import _local  # threading.local itself, without importing threading at start-up
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class ThreadState(_local):
    """One thread's autograd state; a thread that has set nothing reads these defaults.

    Read on every recorded operation (``state.enabled``, ``state.trace``): one attribute of
    a thread-local object, imported once as a module global by the hot paths."""

    #: grad mode: whether operations are recorded
    enabled: bool = True
    #: the list ``tape.recording()`` keeps every recorded node in, with its output and inputs
    #: (or anomaly mode's witness of them); ``None``: nothing is kept
    trace: Any = None
    #: the ``detect_anomaly`` in force (``anomaly.py``); ``None``: anomaly mode is off
    anomaly: Any = None

    def snapshot(self) -> tuple[bool, Any, Any]:
        """This thread's modes, for a thread that continues its work (``adopt``)."""
        return self.enabled, self.trace, self.anomaly

    def adopt(self, modes: tuple[bool, Any, Any]) -> None:
        self.enabled, self.trace, self.anomaly = modes


state = ThreadState()


def is_grad_enabled() -> bool:
    return state.enabled


def set_enabled(mode: bool) -> bool:
    """Set this thread's mode; returns the previous one."""
    previous = state.enabled
    state.enabled = bool(mode)
    return previous


def _decorate(fn: F, mode: bool) -> F:
    if inspect.isgeneratorfunction(fn):
        return _decorate_generator(fn, mode)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        previous = set_enabled(mode)
        try:
            return fn(*args, **kwargs)
        finally:
            set_enabled(previous)

    return wrapper  # type: ignore[return-value]


def _decorate_generator(fn: F, mode: bool) -> F:
    """The mode holds while the generator runs (each resumption), and the caller's mode
    in between: PyTorch's ``_DecoratorContextManager`` semantics."""

    def step(call: Any, *arg: Any) -> Any:
        previous = set_enabled(mode)
        try:
            return call(*arg)
        finally:
            set_enabled(previous)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        gen = step(fn, *args, **kwargs) if not kwargs else step(lambda: fn(*args, **kwargs))
        try:
            response = step(gen.send, None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    step(gen.close)
                    raise
                except BaseException as exc:
                    response = step(gen.throw, exc)
                else:
                    response = step(gen.send, request)
        except StopIteration as stop:
            return stop.value

    return wrapper  # type: ignore[return-value]


class _Saved(_local):
    """The modes that ``with gc.no_grad:`` (the class itself) replaced, per thread: the class is
    shared by every thread, and each thread's blocks nest on their own."""

    def __init__(self) -> None:
        self.stack: list[bool] = []


class _SwitchType(type):
    # ``with gc.no_grad:`` (no parentheses, as seed 001 writes it) works too
    def __enter__(cls) -> None:
        cls._class_saved.stack.append(set_enabled(cls.mode))

    def __exit__(cls, *exc: object) -> None:
        set_enabled(cls._class_saved.stack.pop())


class _Switch(metaclass=_SwitchType):
    """Context manager and decorator (with or without parentheses)."""

    mode: bool
    _class_saved: _Saved

    def __init_subclass__(cls) -> None:
        cls._class_saved = _Saved()

    def __new__(cls, fn: Any = None) -> Any:
        if callable(fn):  # bare decorator: @gc.no_grad
            return _decorate(fn, cls.mode)
        return super().__new__(cls)

    def __init__(self, fn: Any = None) -> None:
        self._saved: list[bool] = []

    def __enter__(self) -> None:
        self._saved.append(set_enabled(self.mode))

    def __exit__(self, *exc: object) -> None:
        set_enabled(self._saved.pop())

    def __call__(self, fn: F) -> F:
        return _decorate(fn, self.mode)


class no_grad(_Switch):
    """Do not record operations (inference; the seeds' ``torch.no_grad()``).

    >>> import gradcli as gc
    >>> x = gc.tensor(1.0, requires_grad=True)
    >>> with gc.no_grad():
    ...     y = x ** 3
    >>> y.requires_grad
    False
    """

    mode = False


class enable_grad(_Switch):
    """Record operations, even inside ``no_grad``."""

    mode = True


class set_grad_enabled:
    """``set_grad_enabled(False)``: takes effect at once, and as a context manager
    restores the previous mode on exit (PyTorch's semantics)."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self._previous = set_enabled(self.mode)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        set_enabled(self._previous)

    def __call__(self, fn: F) -> F:
        set_enabled(self._previous)
        return _decorate(fn, self.mode)
