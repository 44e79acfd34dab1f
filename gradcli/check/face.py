"""``gc.check(f, *args, blame=...)``: the library's face of ``gradcli check`` (issue 36).

``f`` is an expression of the language (its point given as keywords: ``gc.check("x^2 * y", x=2,
y=3)``) or a Python function computing with gradcli, PyTorch or JAX, called with ``args`` (tensors,
arrays or numbers, by its parameters' order) and keywords for the rest. The result is the
``CheckResult`` the command prints (``ok``, ``verdict()``, ``to_dict()``; ``print`` shows the
command's report).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .directions import directions_asked
from .result import CheckResult
from .run import check


def check_function(
    f: str | Callable[..., Any],
    *args: Any,
    wrt: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    expect: Mapping[str, str] | None = None,
    blame: bool = False,
    framework: str | None = None,
    directions: int | str | None = None,
    **at: Any,
) -> CheckResult:
    """Check ``f``'s gradient at a point, every way ``gradcli check`` does. ``directions``: K random
    directions, ``"elementwise"``, or None (8 directions above 512 input elements, else elementwise).

    >>> import gradcli as gc
    >>> gc.check("x^2 * y", x=2, y=3).ok
    True
    >>> gc.check(lambda x: gc.sin(x) * x, 0.5).verdict().startswith("OK: autograd agrees with finite differences")
    True
    """
    from ..lang.program import function_program, load  # lazy: start-up, as every command's body

    if isinstance(f, str):
        if args:
            raise TypeError("gc.check(EXPR, ...) takes the point as keywords: gc.check('x^2 * y', x=2, y=3)")
        program, given = load(f), dict(at)
    else:
        program = function_program(f, framework, args)
        names = program.variables
        if len(args) > len(names):
            raise TypeError(f"{program.origin} takes {len(names)} inputs ({', '.join(names)}), {len(args)} given")
        given = {**dict(zip(names, args)), **at}
    values = {name: as_array(value) for name, value in given.items()}
    return check(
        program, values, wrt, methods, rtol, atol, expect, blame=blame, directions=directions_asked(directions)
    )


def as_array(value: Any) -> np.ndarray:
    """A value as the command line's ``--at`` gives it: a float64 array (a torch tensor detached, a JAX
    array copied; integers stay integers only where they are indices, never here)."""
    detach = getattr(value, "detach", None)
    if callable(detach):  # a torch tensor (gradcli's own tensors have .array)
        value = detach().cpu().numpy()
    value = getattr(value, "array", value)
    return np.asarray(value, dtype=np.float64)
