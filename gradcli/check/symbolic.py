"""The gradient from SymPy: the syntax tree translated node by node, differentiated,
evaluated at the point with 30 digits.

SymPy's work grows fast with the size of an expression (differentiating 7,000
nodes took 13 s here, 70,000 over two minutes), so it is bounded twice: by the
size of the translated expression, and by a time limit (a timer interrupts it
on the main thread). Either gives a reason instead of a hang.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

MAX_NODES = 20_000  # nodes of the translated expression
TIME_LIMIT = 10.0  # seconds
DIGITS = 30


class Skipped(Exception):
    """SymPy could not (or should not) be run; the message says why."""


@contextmanager
def time_limit(seconds: float) -> Any:
    """Interrupt the block after ``seconds`` (on the main thread; elsewhere, no limit)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or not hasattr(signal, "setitimer")
        or not seconds < 1e6  # a limit of weeks (or inf) is no limit; setitimer would overflow
    ):
        yield
        return

    def expired(signum: int, frame: Any) -> None:
        raise Skipped(f"SymPy took more than {seconds:g} s (--sympy-timeout raises the limit)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def sympy_gradient(
    tree: Any,
    values: Mapping[str, Any],
    names: Sequence[str],
    seed: np.ndarray | None = None,
    limit: float | None = None,
    max_nodes: int | None = None,
) -> dict[str, np.ndarray]:
    """d output / d name at the point, for each name (``seed``: d (seed . output)). A program of scalars
    that SymEngine answers as SymPy would is differentiated by SymEngine (lang/symcore.py): SymPy's
    import alone takes longer than the rest of a small check."""
    limit = TIME_LIMIT if limit is None else limit
    max_nodes = MAX_NODES if max_nodes is None else max_nodes
    if seed is None:
        from ..lang.symcore import scalar_gradient  # lazy: only for the sympy method

        start = time.perf_counter()
        found = scalar_gradient(tree, values, names, max_nodes)
        if found is not None and time.perf_counter() - start > limit:
            raise Skipped(f"SymPy took more than {limit:g} s (--sympy-timeout raises the limit)")
        if found is not None:
            return found
    import sympy as sp

    from ..lang.symbolic import to_sympy  # lazy: SymPy, only for the sympy method

    start = time.perf_counter()
    with time_limit(limit):
        shapes = {name: np.shape(value) for name, value in values.items()}
        outputs, symbols = to_sympy(tree, shapes)
        if len(outputs) != 1 and seed is None:
            raise Skipped("several outputs")
        output = outputs[0] if len(outputs) == 1 else np.array(outputs, dtype=object)
        if isinstance(output, np.ndarray):
            if seed is None:
                raise Skipped("the output is not a scalar")
            output = sum((s * o for s, o in zip(np.asarray(seed).reshape(-1), output.reshape(-1))), sp.Integer(0))
        size = _size(output)
        if size > max_nodes:
            raise Skipped(f"the expression has {size:,} SymPy nodes (limit {max_nodes:,})")
        point = {}
        for name, value in values.items():
            if name in symbols:
                for symbol, number in zip(
                    np.asarray(symbols[name], dtype=object).reshape(-1), np.asarray(value).reshape(-1)
                ):
                    point[symbol] = sp.Float(float(number), DIGITS)
        result = {}
        for name in names:
            if name not in symbols:
                result[name] = np.zeros(np.shape(values[name]))
                continue
            flat = np.asarray(symbols[name], dtype=object).reshape(-1)
            derivatives = [_evaluate(sp.diff(output, s), point) for s in flat]
            result[name] = np.array(derivatives, dtype=np.float64).reshape(np.shape(values[name]))
    if time.perf_counter() - start > limit:
        raise Skipped(f"SymPy took more than {limit:g} s (--sympy-timeout raises the limit)")
    return result


def _size(expr: Any) -> int:
    import sympy as sp

    return sum(1 for _ in sp.preorder_traversal(expr))


def _evaluate(expr: Any, point: dict[Any, Any]) -> float:
    import sympy as sp

    try:
        value = expr.xreplace(point).evalf(DIGITS)  # (evalf's subs= is slower by half)
    except (ZeroDivisionError, ValueError, ArithmeticError):  # mpmath at a singular point (sqrt' at 0)
        return float("nan")
    if value.has(sp.zoo, sp.nan) or not value.is_number:
        return float("nan")
    if not value.is_real:
        value = sp.re(value) if abs(sp.im(value)) < 1e-25 else sp.nan
    try:
        return float(value)
    except TypeError:  # a piece left symbolic (a derivative of a kink): no number here
        return float("nan")
