"""The arguments of ``gc.render.graph(f, *args)`` for a function computing with torch, made inputs.

A number, an array, a nested list of numbers or a tensor is one input (``convert`` makes it the
tensor the function is given); a list, tuple or dict holding tensors or arrays keeps its shape, each
of them an input named by its place (``xs[0]``, ``batch['ids']``). The rest is passed as it is: ``None``
(a mask not given), a string, a module, a function, and a Python int or bool inside a container (a
count, a flag: ``range(n)`` needs an int).

Framework-free: the caller says what a tensor is and how an input is made.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

_NUMBER = (int, float, complex, np.number, np.bool_)


def call_arguments(
    args: Sequence[Any], labels: Sequence[str], convert: Callable[[Any], Any], is_tensor: Callable[[Any], bool]
) -> tuple[list[Any], dict[int, str]]:
    """``args`` with their inputs made (``convert``), and each input's name by ``id``."""
    names: dict[int, str] = {}
    made = [_made(value, label, convert, is_tensor, names, True) for value, label in zip(args, labels)]
    return made, names


def _made(value: Any, label: str, convert: Callable[[Any], Any], is_tensor: Callable[[Any], bool],
          names: dict[int, str], top: bool) -> Any:  # fmt: skip
    alone = isinstance(value, int) and top  # (a number given alone: a point, as documented)
    if (
        alone
        or is_tensor(value)
        or isinstance(value, (np.ndarray, float, complex, np.number, np.bool_))
        or _numbers(value)
    ):
        made = convert(value)
    elif type(value) in (list, tuple) or (isinstance(value, tuple) and hasattr(value, "_fields")):
        items = [_made(v, f"{label}[{k}]", convert, is_tensor, names, False) for k, v in enumerate(value)]
        return type(value)(items) if type(value) in (list, tuple) else type(value)(*items)
    elif type(value) is dict:
        return {k: _made(v, f"{label}[{k!r}]", convert, is_tensor, names, False) for k, v in value.items()}
    else:
        return value
    names[id(made)] = label
    return made


def _numbers(value: Any) -> bool:
    """A (nested) list or tuple of numbers: one array (``[1.0, 2.0]``)."""
    if type(value) not in (list, tuple) or not value:
        return False
    return all(_numbers(v) or (isinstance(v, _NUMBER) and not isinstance(v, bool)) for v in value)
