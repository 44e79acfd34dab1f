"""The one range check of every numeric option of every command (typer's callbacks in ``app`` and
``eval``'s fast path in ``gradcli.cli`` both call ``checked_number``): a value out of range, nan or
infinite is one ``error:`` line (exit 2) before any work, never an overflow deep inside (exit 70).

The upper bounds are far beyond any real use and well inside what the machinery below takes (a
C long, ``threading.TIMEOUT_MAX``, a process pool)."""

from __future__ import annotations

import math
from typing import NamedTuple

from ..errors import UsageError


class Range(NamedTuple):
    """What an option takes: a whole number (``whole``) or a float, from ``low`` (included unless
    ``above``) to ``high``, said as ``text`` (``must be {text}``) with ``unit`` after the bound."""

    whole: bool
    low: float
    high: float
    text: str
    unit: str = ""
    above: bool = False


SECONDS = 1_000_000.0  # about 11.6 days: Graphviz's limit (Python's clocks overflow near 9.2e9 s)

NUMBERS: dict[str, Range] = {
    "--digits": Range(True, 1, 17, "between 1 and 17"),
    "--chunk-rows": Range(True, 1, 1_000_000_000, "a positive number of rows", " rows"),
    "--jobs": Range(True, 1, 1024, "at least 1", " processes"),
    "--order": Range(True, 1, 2, "1 (f and f′) or 2 (f, f′ and f″)"),
    "--layout-timeout": Range(False, 0, SECONDS, "a finite number of seconds > 0", " seconds", above=True),
    # any finite length: SymPy's timer takes a limit of weeks as no limit (check/symbolic.py)
    "--sympy-timeout": Range(False, 0, math.inf, "a positive number of seconds", above=True),
    "--dask local:N": Range(True, 1, 256, "at least 1", " workers"),  # the number inside --dask's text
    "--rtol": Range(False, 0, math.inf, "a finite number >= 0"),
    "--atol": Range(False, 0, math.inf, "a finite number >= 0"),
}


def range_problem(option: str, value: float | None) -> str | None:
    """What is wrong with ``value`` for ``option`` (None: nothing, or no value given)."""
    if value is None:
        return None
    allowed = NUMBERS[option]
    finite = allowed.whole or isinstance(value, int) or math.isfinite(value)  # an int of any size is finite
    too_low = value <= allowed.low if allowed.above else value < allowed.low
    if not finite or too_low:
        return f"{option} must be {allowed.text}, got {value!r}"
    if value > allowed.high:  # said by the text when it names the bound (--digits, --order)
        text = f"at most {allowed.high:,.0f}{allowed.unit}" if allowed.unit else allowed.text
        return f"{option} must be {text}, got {value!r}"
    return None


def checked_number(option: str, value: float | None) -> float | None:
    """``value`` if ``option`` takes it, else a UsageError naming the option and the range."""
    problem = range_problem(option, value)
    if problem is not None:
        raise UsageError(problem)
    return value
