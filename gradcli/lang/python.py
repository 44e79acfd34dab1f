"""The Python-function kind of program (``FILE.py:func``, ``--python FILE:FUNC``): its run with
tensors, and the watchers that see where it leaves autograd (``float(x)``, ``x.item()``...).

``program.PythonFunction`` is the kind; this module is what it does, apart so that the kind stays a
few lines beside the others (a framework's function, issue 29, would sit beside it the same way).
"""

from __future__ import annotations

import inspect
from _thread import RLock
from _thread import _local as _thread_local  # threading.local, without importing threading at start-up
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import UsageError, raised
from .evaluate import Evaluation
from .library import gc, input_tensors


def run_function(
    program: Any, values: Mapping[str, Any], wrt: Sequence[str], call: Callable[..., Any] | None = None
) -> Evaluation:
    """Call ``program.function`` (a ``PythonFunction``) with ``values`` as tensors, those in ``wrt``
    requiring grad, noting in ``program.escapes`` how it takes values out of autograd's sight. A
    parameter with a default is left out unless given; one taking a Python number gets one.
    ``call``: what computes with the named arguments in its place (a framework's function, as one
    operation: lang/frameworks/function.py)."""
    parameters = program.parameters
    missing = [p.name for p in parameters if p.required and p.name not in values]
    if missing:
        raise UsageError(
            f"{program.origin} needs --at {missing[0]}=... (its parameters: {', '.join(map(str, parameters))})"
        )
    inputs = input_tensors(values, wrt)
    arguments = {p.name: inputs[p.name] if p.number is None else python_number(program, p, values[p.name], wrt)
                 for p in parameters if p.name in values}  # fmt: skip
    try:
        with np.errstate(all="ignore"), _watching_escapes(program.escapes):
            result = (call or program.function)(**arguments)
    except BadReturn:
        raise
    except Exception as exc:  # the user's function raised: report it, not a traceback of ours
        raise UsageError(f"{program.origin} raised {raised(exc)}") from None
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    if not results:
        raise UsageError(f"{program.origin} returned an empty {type(result).__name__}: {RETURNS}")
    outputs = [_output(program, r) for r in results]
    checked_real(program, outputs, list(arguments.values()))
    labels = [f"{program.name}[{i}]" for i in range(len(outputs))] if len(outputs) > 1 else [program.name]
    nonfinite = next((f"{labels[i]} gave {'nan' if np.isnan(o.array).any() else 'inf'}"
                      for i, o in enumerate(outputs) if not np.isfinite(o.array).all()), None)  # fmt: skip
    return Evaluation(outputs, inputs, {}, labels, nonfinite)


RETURNS = "return a tensor, a number, or a tuple or list of them"


class BadReturn(UsageError):
    """The user's function returned something that is not its output (None, a dict, complex values):
    said as it is, not as an exception the function raised."""


def python_number(program: Any, parameter: Any, value: Any, wrt: Sequence[str]) -> Any:
    """``--at``'s value for a parameter that takes a Python number (``jax.jit``'s static argument, a
    TorchScript ``float``): one number, an int where it is whole (unless the parameter wants a float)."""
    if parameter.name in wrt:
        raise UsageError(
            f"--wrt {parameter.name}: {program.origin} takes {parameter.name} as a Python number "
            f"({_number_kind(program, parameter)}), which is not differentiated"
        )
    array = np.asarray(getattr(value, "array", value))
    if array.ndim != 0 or array.dtype.kind not in "biuf":
        raise UsageError(
            f"--at {parameter.name}: {program.origin} takes {parameter.name} as a Python number "
            f"({_number_kind(program, parameter)}): give one real number"
        )
    number = array.item()
    if parameter.number == "bool":
        return bool(number)
    whole = float(number).is_integer() and parameter.number != "float" and not isinstance(parameter.default, float)
    return int(number) if whole or parameter.number == "int" else float(number)


def _number_kind(program: Any, parameter: Any) -> str:
    return (
        "a static argument of jax.jit"
        if parameter.number == "number"
        else f"its TorchScript type is {parameter.number}"
    )


def returned_problem(value: Any, returns: str = RETURNS) -> str | None:
    """What is wrong with ``value`` as (one of) a function's results, in words (``returned ...``), or
    None where it is numbers: a tensor or array of any framework, a number, a list of numbers."""
    if value is None:
        return "returned None: return the output (did you forget `return`?)"
    if isinstance(value, (str, bytes, dict, set, frozenset)) or inspect.isgenerator(value):
        return f"returned a {type(value).__name__}: {returns}"
    if hasattr(value, "dtype") and hasattr(value, "shape") or isinstance(value, (int, float, complex, np.number)):
        return None
    try:
        kind = np.asarray(value).dtype.kind
    except Exception:  # an object of the user's own class, a ragged list...
        kind = "O"
    return None if kind in "biufc" else f"returned a {type(value).__name__} that is not numbers: {returns}"


def checked_return(origin: str, result: Any, inputs: Sequence[Any], returns: str = RETURNS) -> None:
    """Refuse, as ``BadReturn``, a function's ``result`` that is no output: None, a dict, text, or
    complex values from real ``inputs`` (complex inputs are check's complex step: complex out is right)."""
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    for value in results:
        problem = returned_problem(value, returns)
        if problem is not None:
            raise BadReturn(f"{origin} {problem}")
    if any(_is_complex(v) for v in results) and not any(_is_complex(x) for x in inputs):
        raise BadReturn(f"{origin} {COMPLEX}")


COMPLEX = (
    "returned complex values from real inputs: gradcli differentiates real-valued functions; "
    "return a real value (its real part, its absolute value, or both as two outputs)"
)


def _is_complex(value: Any) -> bool:
    """A complex number, tensor or array, of any framework (a torch tensor says so itself)."""
    if isinstance(value, complex):
        return True
    said = getattr(value, "is_complex", None)
    if callable(said):
        return bool(said())
    dtype = getattr(value, "dtype", None)
    try:
        return dtype is not None and np.dtype(dtype).kind == "c"
    except TypeError:  # a dtype NumPy does not know
        return False


def checked_real(program: Any, outputs: Sequence[Any], arguments: Sequence[Any]) -> None:
    """A gradcli function's complex outputs from real arguments, refused (``checked_return``'s rule)."""
    if any(o.dtype.kind == "c" for o in outputs) and not any(
        isinstance(a, gc.Tensor) and a.dtype.kind == "c" for a in arguments
    ):
        raise BadReturn(f"{program.origin} {COMPLEX}")


def random_difference(program: Any, values: Mapping[str, Any], wrt: Sequence[str] = ()) -> float | None:
    """Two runs of ``program`` at ``values`` (no gradient; those in ``wrt`` given as the gradient's
    run gives them: a PyTorch function may call ``torch.autograd.grad`` on them): the largest
    difference between their outputs, or None where they agree to rounding (a random function:
    dropout in training mode, ``torch.randn``, ``np.random`` inside, a seed set once outside it)."""
    with gc.no_grad():
        runs = [[np.asarray(o.array) for o in program.run(values, wrt).outputs] for _ in range(2)]
    largest = 0.0
    for a, b in zip(*runs):
        if a.shape != b.shape:
            return float("inf")
        with np.errstate(all="ignore"):
            gap = np.where(np.isnan(a) & np.isnan(b), 0.0, np.abs(a - b))
            scale = max(float(np.nanmax(np.abs(a), initial=0.0)), np.finfo(np.float64).tiny)
        gap = np.where(np.isnan(gap), np.inf, gap)  # nan in one run only
        worst = float(np.max(gap, initial=0.0))
        if worst > 64 * np.finfo(np.float64).eps * scale:
            largest = max(largest, worst)
    return largest or None


def _output(program: Any, result: Any) -> gc.Tensor:
    """One of the function's results as a tensor; anything but numbers is refused, by name."""
    if isinstance(result, gc.Tensor):
        return result
    problem = returned_problem(result)
    tensor = None
    if problem is None:
        try:
            tensor = gc.tensor(result)
        except Exception:  # a list of strings, an object of the user's own class...
            tensor = None
        if tensor is None or tensor.dtype.kind not in "biufc":
            problem = f"returned a {type(result).__name__} that is not numbers: {RETURNS}"
    if problem is not None:
        raise BadReturn(f"{program.origin} {problem}")
    return tensor


#: Tensor methods through which a Python function takes values out of autograd's sight.
_ESCAPES = {"__float__": "float()", "__int__": "int()", "__complex__": "complex()", "item": ".item()",
            "tolist": ".tolist()", "numpy": ".numpy()", "__array__": "NumPy on its values"}  # fmt: skip


class _Watch(_thread_local):
    """What this thread asked the patched Tensor methods to do (``_patched``): a thread that asked
    for nothing (another thread's work meanwhile) gets their plain behaviour."""

    escapes: list[str] | None = None  # where a run notes how its function leaves autograd
    depth = 0  # float(x) calls x.item(): only the outermost way counts
    detach: tuple[Any, Any, list[int]] | None = None  # detach_fixed's (record, replay, [calls so far])


_WATCH = _Watch()
_PATCHING = RLock()
_users: dict[str, int] = {}  # blocks using each patch, in every thread
_saved: dict[str, dict[str, Any]] = {}  # each patch's replaced methods, the class's own


@contextmanager
def _patched(kind: str, replacements: Callable[[], dict[str, Any]]) -> Iterator[None]:
    """Tensor's methods replaced while any thread's block of ``kind`` runs: installed by the first,
    the class's own put back by the last (a class is shared by every thread; what each thread's
    replacements do is read from ``_WATCH``)."""
    cls = gc.Tensor
    with _PATCHING:
        if not _users.get(kind):
            new = replacements()
            _saved[kind] = {name: cls.__dict__[name] for name in new}
            for name, method in new.items():
                setattr(cls, name, method)
        _users[kind] = _users.get(kind, 0) + 1
    try:
        yield
    finally:
        with _PATCHING:
            _users[kind] -= 1
            if not _users[kind]:
                for name, method in _saved.pop(kind).items():
                    setattr(cls, name, method)


def _escape_watchers() -> dict[str, Any]:
    saved = {name: gc.Tensor.__dict__[name] for name in (*_ESCAPES, "data")}

    def watch(method: Callable[..., Any], how: str) -> Callable[..., Any]:
        def watched(self: gc.Tensor, *args: Any, **kwargs: Any) -> Any:
            found = _WATCH.escapes
            if found is None:
                return method(self, *args, **kwargs)
            if self._edge is not None and not _WATCH.depth and how not in found:
                found.append(how)
            _WATCH.depth += 1
            try:
                return method(self, *args, **kwargs)
            finally:
                _WATCH.depth -= 1

        return watched

    watchers = {name: watch(saved[name], how) for name, how in _ESCAPES.items()}
    data = saved["data"]
    watchers["data"] = property(watch(data.fget, ".data"), data.fset, doc=data.__doc__)
    return watchers


@contextmanager
def _watching_escapes(found: list[str]) -> Iterator[None]:
    """While the user's function runs on this thread, note each way it takes the values of a tensor
    that requires grad out of the graph (math.sin(float(x)), np.sin(x.data), x.item()...)."""
    previous = _WATCH.escapes, _WATCH.depth
    _WATCH.escapes, _WATCH.depth = found, 0
    try:
        with _patched("escapes", _escape_watchers):
            yield
    finally:
        _WATCH.escapes, _WATCH.depth = previous


def _fixed_detach() -> dict[str, Any]:
    original = gc.Tensor.__dict__["detach"]

    def detach(self: gc.Tensor) -> gc.Tensor:
        out = original(self)
        fixed = _WATCH.detach
        if fixed is None:
            return out
        record, replay, count = fixed
        if record is not None:
            record.append(out.array)
        elif replay is not None:
            k = count[0]
            count[0] += 1
            if k < len(replay) and np.shape(replay[k]) == out.shape:
                return gc.tensor(replay[k])
        return out

    return {"detach": detach}


@contextmanager
def detach_fixed(record: list[Any] | None = None, replay: Sequence[Any] | None = None) -> Iterator[None]:
    """``detach()`` as a constant when a Python function is called at other points: its values at
    the point are recorded, then given again, in call order, wherever the shapes still match: as
    the replay of an expression keeps detach(...) fixed, so both roads judge the same derivative.
    (On this thread only: another thread's ``detach()`` meanwhile is its own.)"""
    previous = _WATCH.detach
    _WATCH.detach = (record, replay, [0])
    try:
        with _patched("detach", _fixed_detach):
            yield
    finally:
        _WATCH.detach = previous
