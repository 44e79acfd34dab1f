"""Where a command's errors and warnings are said: ``reported()`` runs a command body and turns a
``GradcliError`` into its message and exit code, a Python warning into one ``warning:`` line;
``say_error`` is the one place an error is written (also as JSON on stdout with ``--json``).

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

from ..errors import GradcliError, loaded_user_code, printable

EXIT_INTERNAL = 70


def one_line(message: str) -> str:
    """A message as one printable line: line breaks (of a matrix, say) become spaces, controls escapes."""
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
