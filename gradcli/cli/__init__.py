"""The ``gradcli`` command: ``main`` (the console script), with standard streams made safe.

Modules, in the order a command line meets them: ``inputs`` (every command's options, declared
once as data), ``app`` (the typer commands made from them; a plain ``eval``, ``diff``, ``jacobian``,
``hessian`` or ``check`` skips typer through ``fast_command``, read with the same declaration), ``reading`` (the program and its point),
``commands`` (the bodies; ``graphing`` the graph's), ``output`` (formats), ``report`` (errors and exit codes: the edge).
``--version`` (``version``) and the help pages (``helptext``: typer's pages, recorded by ``helprecord``) are
answered without typer or NumPy.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import suppress

from ..errors import loaded_user_code
from ..startup import unscanned
from .inputs import COMMANDS, Given, dash_expression, defaults, option_table
from .report import ReaderLeft, StreamProblem, errors_as_json


def expression_after_dashes(argv: list[str]) -> list[str]:
    """``eval -- "-x^2" --at x=3``: an expression starting with '-' follows ``--`` (SPEC),
    and options may still follow it. Click stops reading options at ``--``, so the
    expression moves to the end: ``eval --at x=3 -- "-x^2"``."""
    if "--" not in argv:
        return argv
    i = argv.index("--")
    if i + 2 >= len(argv):
        return argv
    return argv[:i] + argv[i + 2 :] + ["--", argv[i + 1]]


#: The commands a plain command line runs without typer (whose import and command building take
#: longer than a whole gradient): name -> its body in ``commands``. Their options are read with the
#: rows typer's commands are built from (``inputs.COMMANDS``), so the two roads take the same.
FAST = {"eval": "evaluate", "diff": "differentiate", "jacobian": "jacobian", "hessian": "hessian", "check": "check"}
OPTIONS = {name: option_table(COMMANDS[name]) for name in FAST}
EVAL_OPTIONS = OPTIONS["eval"]

_TAKES_VALUE = {
    name: {option: kind is not bool for option, (_, kind) in table.items()} | {"-h": False}
    for name, table in OPTIONS.items()
}


def fast_command(argv: list[str]) -> dict | None:
    """The arguments of a plain ``eval``, ``diff``, ``jacobian``, ``hessian`` or ``check`` read without
    typer (by parameter, and ``command``), or None for anything else (help, an unknown option, ``--``,
    a missing or bad value): typer then parses, and reports errors, as always."""
    if not argv or argv[0] not in FAST:
        return None
    options = OPTIONS[argv[0]]
    found = defaults(COMMANDS[argv[0]])
    args = iter(argv[1:])
    for arg in args:
        expression = found["expression"] is None and dash_expression(arg, _TAKES_VALUE[argv[0]])  # "-x^2"
        if arg.startswith("-") and arg != "-" and not expression:
            if not _read_option(arg, args, found, options):
                return None
        elif found["expression"] is None:
            found["expression"] = arg
        else:
            return None
    return found | {"command": argv[0]}


def _read_option(arg: str, args: Iterator[str], found: dict, options: dict[str, tuple[str, type]]) -> bool:
    """Put option ``arg`` (and its value, attached or next in ``args``) into ``found``; False for
    anything typer is to read and report (an unknown option, a missing or bad value)."""
    name, equals, value = arg.partition("=")
    spec = options.get(name)
    if spec is None or (equals and (spec[1] is bool or not name.startswith("--"))):
        return False
    parameter, kind = spec
    if kind is bool:
        found[parameter] = True
        return True
    if not equals:
        value = next(args, None)
        if value is None:
            return False
    if kind in (int, float):
        number = _number(name, value, kind)
        if number is None:
            return False  # typer (or its callback, the same range check) says what is wrong with it
        value = number
    if kind is list:
        found[parameter].append(value)
    else:
        found[parameter] = value
    return True


def _number(name: str, text: str, kind: type) -> int | float | None:
    """``text`` as option ``name``'s int or float, read as click reads it, within the option's range;
    None for anything typer is to refuse in its words."""
    from .options import range_problem  # lazy: start-up, read only for a number: the one range check, typer's too

    if kind is int:
        if not text.isdigit() or not text.isascii():
            return None
        number: int | float = int(text)
    else:
        try:
            number = float(text)
        except ValueError:
            return None
    return None if range_problem(name, number) is not None else number


class _CheckedOutput:
    """``sys.stdout`` while a command runs: a failed write becomes a :class:`StreamProblem`
    (a broken pipe becomes :class:`ReaderLeft`: the reader went away, which is not an error)."""

    def __init__(self, stream: object) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)  # type: ignore[attr-defined]
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start]
            encoding = getattr(self._stream, "encoding", None) or exc.encoding
            raise StreamProblem(
                f"standard output's encoding ({encoding}) cannot show {bad!r} (U+{ord(bad):04X}) in the result; "
                "set PYTHONIOENCODING=utf-8 (or --json, which escapes it)"
            ) from None
        except BrokenPipeError:
            raise ReaderLeft() from None
        except (OSError, ValueError) as exc:  # ValueError: "I/O operation on closed file"
            raise StreamProblem.writing(exc) from None

    def flush(self) -> None:
        try:
            self._stream.flush()  # type: ignore[attr-defined]
        except BrokenPipeError:
            raise ReaderLeft() from None
        except (OSError, ValueError) as exc:
            raise StreamProblem.writing(exc) from None

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


class _ClosedOutput:
    """``sys.stdout`` when file descriptor 1 was closed (``>&-``): writing anything is an error,
    writing nothing (``graph -o FILE``) is not."""

    encoding = "utf-8"
    errors = "strict"

    def write(self, text: str) -> int:
        if not text:
            return 0
        raise StreamProblem("cannot write the result: standard output is closed")

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        import io

        raise io.UnsupportedOperation("standard output is closed")


class _QuietErrors:
    """``sys.stderr`` that cannot be written (``2>/dev/full``): the message is lost, but the exit
    code stays the documented one (an unwritable stderr otherwise ends Python with code 1, and
    its flush at exit with 120); descriptor 2 then points at /dev/null."""

    def __init__(self, stream: object) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)  # type: ignore[attr-defined]
        except (OSError, ValueError):
            self._lost()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()  # type: ignore[attr-defined]
        except (OSError, ValueError):
            self._lost()

    def _lost(self) -> None:
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())  # type: ignore[attr-defined]
            os.close(null)
            self._stream.flush()  # type: ignore[attr-defined]
        except (OSError, ValueError, AttributeError):
            pass

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def _guard_streams() -> None:
    """Make closed standard streams safe before anything runs.

    A closed descriptor 0, 1 or 2 is held by /dev/null, so that no file gradcli opens takes
    its number (and no child inherits it as its stdout). A closed stdin stays ``None`` (reading
    it is then an error); a closed stdout refuses writes; a closed stderr swallows messages, so
    the exit code is still the documented one.
    """
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
        except OSError:
            held = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if held != fd:  # the number was taken after all: leave it
                os.close(held)
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (lives as long as the process)
    elif not isinstance(sys.stderr, _QuietErrors):
        sys.stderr = _QuietErrors(sys.stderr)  # type: ignore[assignment]
    sys.stdout = _ClosedOutput() if sys.stdout is None else _CheckedOutput(sys.stdout)  # type: ignore[assignment]


def _silence_stdout() -> None:
    """After a failed or broken stdout: point descriptor 1 at /dev/null, so that Python's own
    flush at exit neither fails again nor prints 'Exception ignored'."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.__stdout__.fileno() if sys.__stdout__ is not None else 1)
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def _stream_failed(exc: BaseException) -> None:
    """End the process for a stream that cannot be used: quietly for a reader that left
    (``| head``), otherwise with one error line and exit code 2."""
    _silence_stdout()
    if isinstance(exc, (ReaderLeft, BrokenPipeError)):
        raise SystemExit(0) from None
    try:
        sys.stderr.write(f"error: {exc}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    raise SystemExit(2) from None


def _run(command: object) -> None:
    """Run ``command`` and flush stdout inside the same guard: a full disk (``>/dev/full``) is
    only seen when the buffer is written, after the command has returned."""
    code: object = 0
    try:
        try:
            command()  # type: ignore[operator]
        except SystemExit as exc:
            code = exc.code
        sys.stdout.flush()
    except (StreamProblem, BrokenPipeError) as exc:
        _stream_failed(exc)
    if code not in (0, None):
        raise SystemExit(code)


_ended_with: list = []  # main()'s exit code, for _quick_exit


def _quick_exit() -> None:
    """End the process of a command on the fast path (``gradcli eval``) without the interpreter's teardown (freeing
    every module and object one by one: a quarter of the command's time after NumPy's import).
    Registered with atexit before the command runs, so any handler registered later still runs
    first; only when no file of the user's Python code was loaded (it may leave files to be
    flushed by their finalizers) and main() ended with a known exit code."""
    if not _ended_with or loaded_user_code() is not None:
        return
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()
    os._exit(_ended_with[0])


def _from_the_script(caller: dict) -> bool:
    """Whether main() is called by the ``gradcli`` console script or ``python -m gradcli`` (whose
    last act it is), not by other code that goes on after it."""
    if caller.get("__name__") != "__main__":
        return False
    spec = caller.get("__spec__")
    return getattr(spec, "name", None) == "gradcli.__main__" or os.path.basename(
        caller.get("__file__") or ""
    ).startswith("gradcli")


def _ends_quickly(entry):  # noqa: ANN001, ANN202
    """``main`` as the console script (or ``python -m gradcli``) calls it: a command on the fast path ends
    by ``_quick_exit``. Called in-process (the tests), main() returns and raises as always."""
    from functools import wraps

    @wraps(entry)
    def run() -> None:
        if not _from_the_script(sys._getframe(1).f_globals) or fast_command(sys.argv[1:]) is None:
            return entry()
        import atexit

        atexit.register(_quick_exit)
        try:
            entry()
        except SystemExit as exc:
            if exc.code is None or type(exc.code) is int:
                _ended_with.append(exc.code or 0)
            raise
        _ended_with.append(0)

    return run


def _commands() -> object:
    """The commands' bodies, NumPy first on its own: imported from inside gradcli.ops, its typing
    modules took 7 ms more to import (python -X importtime), about a tenth of ``gradcli eval``."""
    import numpy  # noqa: F401

    from . import commands  # lazy: start-up, only the fast path runs a command without typer

    return commands


def _app() -> object:
    import numpy  # noqa: F401

    from .app import app  # lazy: start-up, the fast path and the help pages never build the typer commands

    return app


@_ends_quickly
def main() -> None:
    """Entry point of the ``gradcli`` console script."""
    original, original_errors = sys.stdout, sys.stderr
    _guard_streams()
    try:
        if sys.argv[1:] in (["--version"], ["-V"], ["--version", "--verbose"], ["-V", "--verbose"]):
            from .version import version_text  # lazy: start-up, as the commands' modules

            print(version_text("--verbose" in sys.argv))
            return
        if not sys.argv[1:] or {"help", "--help", "-h"} & set(sys.argv[1:]):
            from . import helptext  # lazy: start-up, typer's help pages without typer (and NumPy)

            page = helptext.page_asked(sys.argv[1:])
            if page is not None:
                _run(lambda: helptext.show(helptext.help_text(page)))
                return
        fast = fast_command(sys.argv[1:])
        if fast is not None:
            commands = unscanned(_commands)
            errors_as_json(fast["as_json"])
            body = getattr(commands, FAST[fast.pop("command")])
            _run(lambda: body(Given(**fast)))
            return
        app = unscanned(_app)
        _run(lambda: app(args=expression_after_dashes(sys.argv[1:]), prog_name="gradcli"))  # type: ignore[operator]
    finally:
        if isinstance(sys.stdout, (_CheckedOutput, _ClosedOutput)):  # called in-process (tests): as it was
            sys.stdout = original
        if isinstance(sys.stderr, _QuietErrors):
            sys.stderr = original_errors
        errors_as_json(False)
