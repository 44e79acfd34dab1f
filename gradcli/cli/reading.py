"""A command's program and point, read from its command line in one step (``read_program``).

Every command that reads a program (eval, diff, graph, jacobian, hessian, check, plot) starts the
same way: load EXPR / ``-f`` / ``--python``, refuse an ``-o`` that is the program's own file, read
``--at``, and warn about ``--at`` names the program does not use.
"""

from __future__ import annotations

from typing import Any

from ..lang.compute import unused_values
from ..lang.program import load
from ..lang.values import assignments, names_list, near_the_shell_limit
from .inputs import Given
from .report import warn_later


class Read:
    """What ``read_program`` found: the ``program``, the ``--at`` ``values`` and (read when asked,
    so that an error in it is said where the command needs it) the ``--wrt`` names."""

    def __init__(self, program: Any, values: dict[str, Any], wrt: list[str]) -> None:
        self.program, self.values, self._wrt = program, values, wrt

    @property
    def wrt(self) -> list[str]:
        """``--wrt``'s names in order (``[]``: not given)."""
        return names_list(self._wrt)

    def __iter__(self):  # noqa: ANN204
        return iter((self.program, self.values))


def read_program(given: Given, out: str | None = None) -> Read:
    """The program of ``given`` (EXPR, ``-f`` or ``--python``) and its ``--at`` point; ``out``: the file
    the command writes, refused if it is the program's own. An ``--at`` name the program does not
    use is a warning said once the command has run (an error, if there is one, is said alone)."""
    return read_point(given, load_program(given, out))


def load_program(given: Given, out: str | None = None) -> Any:
    """``read_program``'s first half: the program, ``out`` refused if it is the program's own file."""
    program = load(given.expression, given.file, getattr(given, "python", None), getattr(given, "framework", None))
    if out is not None:
        from ..files import refuse_same  # lazy: start-up, eval writes no file here (pathlib)

        refuse_same(out, [program.source])
    return program


def read_point(given: Given, program: Any) -> Read:
    """``read_program``'s second half: ``--at`` read, the names ``program`` does not use warned about."""
    values = assignments(given.at)
    said = unused_values(program, values)
    for message in [said, *near_the_shell_limit(given.at)]:
        if message:
            warn_later(message)
    return Read(program, values, given.wrt)
