"""The ``gradcli`` command: typer commands over the library (see ``app``).

Only this edge turns errors into exit codes: bad input is reported as one
clear message on stderr (with a caret for syntax errors) and exit code 2;
a missing outside program is exit 3; an internal failure is reported as
such (exit 70) and never as a traceback unless ``GRADCLI_DEBUG=1``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress

EXIT_INTERNAL = 70


def one_line(message: str) -> str:
    """A message as one printable line: line breaks (of a matrix, say) become spaces, controls escapes."""
    from ..errors import printable

    return printable(" ".join(part.strip() for part in message.splitlines() if part.strip()))


WARNING_LIMIT = 300  # characters of a Python warning shown (a library's may run to a dozen lines)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    """Python's warnings (NumPy's overflow, a library's deprecation, Graphviz's messages) as
    gradcli's own ``warning:`` line, without the file and line of the code that raised them."""
    text = one_line(str(message))
    if len(text) > WARNING_LIMIT:
        text = text[: WARNING_LIMIT - 3] + "..."
    with suppress(OSError, ValueError, AttributeError):  # stderr closed: nothing to say it on
        sys.stderr.write(f"warning: {text}\n")


@contextmanager
def reported() -> Iterator[None]:
    """Run a command body; report a ``GradcliError`` as its message and exit code, and any Python
    warning as one ``warning:`` line."""
    import warnings

    _later.clear()
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            with _reporting():
                yield
        except SystemExit as exc:
            if exc.code in (0, 1, None):  # done, or a check that disagrees: not an error of the input
                _say_later()
            raise
        else:
            _say_later()
        finally:
            _later.clear()


_later: list[str] = []  # warnings said when the command ends without an error


def warn_later(message: str) -> None:
    """A ``warning:`` said when the command has done its work; dropped if it ends with an error,
    which is then the one thing said (an unused ``--at`` name, say, beside a shape error)."""
    _later.append(message)


def _say_later() -> None:
    for message in _later:
        with suppress(OSError, ValueError, AttributeError):
            sys.stderr.write(f"warning: {one_line(message)}\n")
    _later.clear()


@contextmanager
def _reporting() -> Iterator[None]:
    from ..errors import GradcliError, loaded_user_code

    try:
        yield
    except GradcliError as exc:
        say_error(exc.render(), exc.exit_code)
        raise SystemExit(exc.exit_code) from None
    except StreamProblem:
        raise  # said by main(), which also silences the stream
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None
    except RecursionError:
        say_error("error: the input is nested too deeply to process", 2)
        raise SystemExit(2) from None
    except MemoryError:
        say_error("error: not enough memory for this computation", 2)
        raise SystemExit(2) from None
    except (SystemExit, BrokenPipeError):
        raise
    except Exception as exc:
        if os.environ.get("GRADCLI_DEBUG"):
            raise
        culprit = loaded_user_code()
        if culprit is not None and type(exc) is RuntimeError:  # autograd refusing what the user's code did
            say_error(f"error: {one_line(f'{culprit}: {exc}')}", 2)
            raise SystemExit(2) from None
        say_error(
            f"error: internal error ({type(exc).__name__}: {one_line(str(exc))}); "
            "please report it (GRADCLI_DEBUG=1 shows the traceback)",
            EXIT_INTERNAL,
        )
        raise SystemExit(EXIT_INTERNAL) from None


_errors_as_json: list[bool] = [False]  # the command line asked for --json: errors are said on stdout too


def errors_as_json(on: bool) -> None:
    """Say whether errors are also written to stdout as ``{"error": ..., "exit_code": N}`` (``--json``)."""
    _errors_as_json[0] = on


def say_error(text: str, exit_code: int) -> None:
    """The one place an error is said: ``text`` (``error: ...``, and for a syntax error the line and
    its caret) on stderr; with ``--json`` also one JSON object on stdout, so that a script never
    has to read stderr."""
    sys.stderr.write(text + "\n")
    if not _errors_as_json[0]:
        return
    import json

    message = text.split("\n", 1)[0].removeprefix("error: ")
    with suppress(StreamProblem, OSError, ValueError):  # stdout itself is the problem: stderr has said it
        sys.stdout.write(json.dumps({"error": message, "exit_code": exit_code}) + "\n")
        sys.stdout.flush()


def json_requested(args: list[str]) -> bool:
    """``--json`` among the options (not after ``--``, where it would be the expression)."""
    return "--json" in (args[: args.index("--")] if "--" in args else args)


#: Characters of an expression that no option or file name given after ``-f``/``-o`` holds.
_EXPRESSION_CHARS = frozenset("()^*+[], ")


def dash_expression(arg: str, options: dict[str, bool]) -> bool:
    """Whether ``arg``, starting with '-', is an expression (``-x^2``, ``-sin(x)``, ``-1*x``) rather
    than an option: not an option the command knows (``options``: name -> takes a value), nor one
    with its value attached (``-fprog.txt``). A long ``--name`` is always an option, so that a
    mistyped one (``--att``) is reported with a suggestion."""
    if not arg.startswith("-") or arg == "-" or arg.startswith("--"):
        return False
    if arg.partition("=")[0] in options:
        return False
    attached = options.get(arg[:2], False) and not _EXPRESSION_CHARS.intersection(arg)  # -fprog.txt
    return not attached


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


#: ``eval``'s options for the fast path (see ``fast_eval``): option -> (parameter, kind).
#: tests/test_cli.py checks that this table matches the typer command's options.
EVAL_OPTIONS = {
    "--at": ("at", list),
    "--wrt": ("wrt", list),
    "--json": ("as_json", bool),
    "-f": ("file", str),
    "--file": ("file", str),
    "--seed": ("seed", str),
    "--points": ("points", str),
    "--python": ("python", str),
    "--digits": ("digits", int),
    "-o": ("out", str),
    "--output": ("out", str),
    "--chunk-rows": ("chunk_rows", int),
    "--keep-columns": ("keep_columns", bool),
    "--dask": ("dask", str),
}


_EVAL_TAKES_VALUE = {name: kind is not bool for name, (_, kind) in EVAL_OPTIONS.items()} | {"-h": False}


def fast_eval(argv: list[str]) -> dict | None:
    """``eval``'s arguments read without typer (whose import and command building take
    longer than the whole gradient), or None for anything but plain use (help, an unknown
    option, ``--``, a missing value): typer then parses, and reports errors, as always."""
    if not argv or argv[0] != "eval":
        return None
    found: dict = {
        "expression": None,
        "file": None,
        "at": [],
        "wrt": [],
        "as_json": False,
        "seed": None,
        "points": None,
        "python": None,
        "digits": None,
        "out": None,
        "chunk_rows": None,
        "keep_columns": False,
        "dask": None,
    }
    args = iter(argv[1:])
    for arg in args:
        if arg.startswith("-") and arg != "-":
            name, equals, value = arg.partition("=")
            spec = EVAL_OPTIONS.get(name)
            if spec is None and found["expression"] is None and dash_expression(arg, _EVAL_TAKES_VALUE):
                found["expression"] = arg  # "-x^2": an expression, not an option
                continue
            if spec is None or (equals and spec[1] is bool) or (equals and not name.startswith("--")):
                return None
            parameter, kind = spec
            if kind is bool:
                found[parameter] = True
                continue
            if not equals:
                value = next(args, None)
                if value is None:
                    return None
            if kind is list:
                found[parameter].append(value)
            elif kind is int:
                if not value.isdigit() or not value.isascii():
                    return None  # typer says what is wrong with it
                from .options import range_problem  # the one range check, typer's callbacks' too

                if range_problem(name, int(value)) is not None:
                    return None  # typer's callback says it
                found[parameter] = int(value)
            else:
                found[parameter] = value
        elif found["expression"] is None:
            found["expression"] = arg
        else:
            return None
    return found


class StreamProblem(Exception):
    """A standard stream that cannot be used (closed, full, or an encoding that cannot show the
    result): the user's setup, said in one ``error:`` line with exit code 2."""

    @classmethod
    def writing(cls, exc: BaseException) -> StreamProblem:
        """Writing the result to stdout failed with ``exc`` (a full disk, a closed descriptor)."""
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return cls(f"cannot write the result to standard output ({reason})")


class ReaderLeft(StreamProblem):
    """The reader of stdout went away (``gradcli ... | head -c1``): not an error, nothing to say.
    (Not an ``OSError``: click would turn a broken pipe into exit code 1.)"""


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
    """End the process of a plain ``gradcli eval`` without the interpreter's teardown (freeing
    every module and object one by one: a quarter of the command's time after NumPy's import).
    Registered with atexit before the command runs, so any handler registered later still runs
    first; only when no file of the user's Python code was loaded (it may leave files to be
    flushed by their finalizers) and main() ended with a known exit code."""
    from ..errors import loaded_user_code

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
    """``main`` as the console script (or ``python -m gradcli``) calls it: a plain ``eval`` ends
    by ``_quick_exit``. Called in-process (the tests), main() returns and raises as always."""
    from functools import wraps

    @wraps(entry)
    def run() -> None:
        if not _from_the_script(sys._getframe(1).f_globals) or fast_eval(sys.argv[1:]) is None:
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


@_ends_quickly
def main() -> None:
    """Entry point of the ``gradcli`` console script."""
    original, original_errors = sys.stdout, sys.stderr
    _guard_streams()
    try:
        fast = fast_eval(sys.argv[1:])
        if fast is not None:
            from . import commands

            errors_as_json(fast["as_json"])
            _run(lambda: commands.evaluate(**fast))
            return
        from .app import app

        _run(lambda: app(args=expression_after_dashes(sys.argv[1:]), prog_name="gradcli"))
    finally:
        if isinstance(sys.stdout, (_CheckedOutput, _ClosedOutput)):  # called in-process (tests): as it was
            sys.stdout = original
        if isinstance(sys.stderr, _QuietErrors):
            sys.stderr = original_errors
        errors_as_json(False)
