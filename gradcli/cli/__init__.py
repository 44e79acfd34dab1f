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
    from ..errors import GradcliError

    try:
        yield
    except GradcliError as exc:
        sys.stderr.write(exc.render() + "\n")
        raise SystemExit(exc.exit_code) from None
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
        program = sys.modules.get("gradcli.lang.program")
        culprit = getattr(program, "user_code", None)
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
            else:
                found[parameter] = value
        elif found["expression"] is None:
            found["expression"] = arg
        else:
            return None
    return found


def main() -> None:
    """Entry point of the ``gradcli`` console script."""
    fast = fast_eval(sys.argv[1:])
    if fast is not None:
        from . import commands

        try:
            commands.evaluate(**fast)
        except BrokenPipeError:
            sys.stderr.close()
            raise SystemExit(0) from None
        return
    from .app import app

    try:
        app(args=expression_after_dashes(sys.argv[1:]), prog_name="gradcli")
    except BrokenPipeError:  # e.g. `gradcli ops | head`
        sys.stderr.close()
        raise SystemExit(0) from None
