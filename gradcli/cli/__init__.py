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

    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        with _reporting():
            yield


@contextmanager
def _reporting() -> Iterator[None]:
    from ..errors import GradcliError, loaded_user_code

    try:
        yield
    except GradcliError as exc:
        sys.stderr.write(exc.render() + "\n")
        raise SystemExit(exc.exit_code) from None
    except StreamProblem:
        raise  # said by main(), which also silences the stream
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None
    except RecursionError:
        sys.stderr.write("error: the input is nested too deeply to process\n")
        raise SystemExit(2) from None
    except MemoryError:
        sys.stderr.write("error: not enough memory for this computation\n")
        raise SystemExit(2) from None
    except (SystemExit, BrokenPipeError):
        raise
    except Exception as exc:
        if os.environ.get("GRADCLI_DEBUG"):
            raise
        culprit = loaded_user_code()
        if culprit is not None and type(exc) is RuntimeError:  # autograd refusing what the user's code did
            sys.stderr.write(f"error: {one_line(f'{culprit}: {exc}')}\n")
            raise SystemExit(2) from None
        sys.stderr.write(
            f"error: internal error ({type(exc).__name__}: {one_line(str(exc))}); "
            "please report it (GRADCLI_DEBUG=1 shows the traceback)\n"
        )
        raise SystemExit(EXIT_INTERNAL) from None


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
}


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
    }
    args = iter(argv[1:])
    for arg in args:
        if arg.startswith("-") and arg != "-":
            name, equals, value = arg.partition("=")
            spec = EVAL_OPTIONS.get(name)
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
            raise StreamProblem(_write_failure(exc)) from None

    def flush(self) -> None:
        try:
            self._stream.flush()  # type: ignore[attr-defined]
        except BrokenPipeError:
            raise ReaderLeft() from None
        except (OSError, ValueError) as exc:
            raise StreamProblem(_write_failure(exc)) from None

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


def _write_failure(exc: BaseException) -> str:
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return f"cannot write the result to standard output ({reason})"


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


def main() -> None:
    """Entry point of the ``gradcli`` console script."""
    original, original_errors = sys.stdout, sys.stderr
    _guard_streams()
    try:
        fast = fast_eval(sys.argv[1:])
        if fast is not None:
            from . import commands

            _run(lambda: commands.evaluate(**fast))
            return
        from .app import app

        _run(lambda: app(args=expression_after_dashes(sys.argv[1:]), prog_name="gradcli"))
    finally:
        if isinstance(sys.stdout, (_CheckedOutput, _ClosedOutput)):  # called in-process (tests): as it was
            sys.stdout = original
        if isinstance(sys.stderr, _QuietErrors):
            sys.stderr = original_errors
