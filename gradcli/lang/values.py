"""Values given on the command line: ``--at x=2,w=[1,2]``, ``--seed``; files read within limits.

A value is a constant expression of the language (``pi/4``, ``[1, 2, 3]``,
``2^-3``), read by the same safe parser; nothing is handed to Python.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, BinaryIO

import numpy as np

from ..errors import Source, SyntaxProblem, UsageError
from . import ast
from .evaluate import evaluate
from .lexer import NumberTooLarge
from .parser import MAX_CHARACTERS, parse

#: A value longer than a program can be is a list of numbers that belongs in a file.
MANY_POINTS = "for one large input, read it from a file with NAME=@FILE.npy (or .csv, .txt, .pt); for many points, use --points FILE.csv"

NAME_CHARS = str.isidentifier
#: what a value given on the command line that is not finite is told (``--at x=1e400``, ``1/0``)
NOT_FINITE = "is not a finite float64 number (too large, or 1/0)"


def split_top_level(text: str, sep: str = ",") -> list[tuple[int, str]]:
    """Pieces of ``text`` split at ``sep`` outside brackets, with their offsets."""
    pieces, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == sep and depth == 0:
            pieces.append((start, text[start:i]))
            start = i + 1
    pieces.append((start, text[start:]))
    return pieces


def constant(text: str, origin: str = "value") -> np.ndarray:
    """The value of a constant expression: ``2``, ``-1.5e3``, ``pi/2``, ``[[1, 2], [3, 4]]``; a value
    that overflows (``1e400``) is refused in the words a computed one (``1/0``) is."""
    try:
        program = parse(text, origin)
    except NumberTooLarge:
        raise UsageError(f"{origin}: {text.strip()!r} {NOT_FINITE}") from None
    names = [n for n in program.nodes() if isinstance(n, ast.Name) and n.id not in ("pi", "e")]
    if names or program.statements or len(program.outputs.items) != 1:
        offset = names[0].start if names else 0
        raise SyntaxProblem("a value must be a number or a list of numbers (no names)", Source(text, origin), offset)
    (value,) = evaluate(program, {}).outputs
    return np.asarray(value.array, dtype=np.float64)


MAX_DIMENSIONS = 16  # NumPy's own limit is 64; Jacobians add the output's dimensions to the input's


def assignments(items: Iterable[str]) -> dict[str, np.ndarray]:
    """``["x=2,w=1", "v=[1,2]"]`` -> ``{"x": 2.0, "w": 1.0, "v": [1., 2.]}``, in order."""
    values: dict[str, np.ndarray] = {}
    for item in items:
        for offset, piece in split_top_level(item):
            if not piece.strip():
                continue
            name, eq, value = piece.partition("=")
            name = name.strip()
            source = Source(item, "--at")
            if not eq:
                raise SyntaxProblem(f"--at expects NAME=VALUE, got {piece.strip()!r}", source, offset)
            if not NAME_CHARS(name) or name in ("if", "else"):
                raise SyntaxProblem(f"--at: {name!r} is not a name", source, offset)
            if not value.strip():
                raise SyntaxProblem(f"--at {name}= needs a value", source, offset + len(piece))
            if name in values:
                raise SyntaxProblem(f"--at {name} is given twice: give each name one value", source, offset)
            if value.strip().startswith("@"):
                values[name] = _from_file(value.strip()[1:], name)
                continue
            if len(value) > MAX_CHARACTERS:
                raise UsageError(
                    f"--at {name} is {len(value):,} characters long, more than the limit of {MAX_CHARACTERS:,} "
                    f"({MANY_POINTS})"
                )
            try:
                values[name] = constant(value.strip(), f"--at {name}")
            except SyntaxProblem as problem:
                raise UsageError(f"--at {name}: {problem.message}") from None
            if values[name].ndim > MAX_DIMENSIONS:
                raise UsageError(f"--at {name}: {values[name].ndim} dimensions; at most {MAX_DIMENSIONS} are supported")
            if not np.isfinite(values[name]).all():
                raise UsageError(f"--at {name}: {value.strip()!r} {NOT_FINITE}")
    return values


#: Linux refuses one command-line argument over 128 KiB (MAX_ARG_STRLEN) before gradcli runs.
SHELL_ARGUMENT_LIMIT = 131_072


def near_the_shell_limit(items: Iterable[str]) -> list[str]:
    """What to say of ``--at`` arguments near the shell's limit for one argument: a longer one would
    never reach gradcli ("Argument list too long"), so the file form is named while it still does."""
    return [
        f"--at {item.partition('=')[0].strip()} is {len(item):,} characters long, near the shell's limit of "
        f"{SHELL_ARGUMENT_LIMIT:,} bytes for one argument: read a large input from a file, "
        f"--at {item.partition('=')[0].strip()}=@FILE.npy (or .csv, .txt, .pt)"
        for item in items
        if len(item.encode("utf-8", "surrogatepass")) > SHELL_ARGUMENT_LIMIT // 2
    ]


def _from_file(path: str, name: str) -> np.ndarray:
    """``--at w=@weights.npy``: the value read from a file, under the rules of a typed value."""
    from .arrayfile import read_array  # lazy: start-up, most points are typed

    if not path:
        raise UsageError(f"--at {name}=@ needs a file name: --at {name}=@FILE.npy")
    value = read_array(path, name)
    if value.ndim > MAX_DIMENSIONS:
        raise UsageError(f"--at {name}: {value.ndim} dimensions; at most {MAX_DIMENSIONS} are supported")
    if not np.isfinite(value).all():
        raise UsageError(f"--at {name}=@{path}: holds a value that is not finite (nan or inf)")
    return value


def names_list(items: Iterable[str], option: str = "--wrt") -> list[str]:
    """``["x,w", "v"]`` -> ``["x", "w", "v"]`` (``--wrt``, or the ``option`` named in errors)."""
    out: list[str] = []
    for item in items:
        for _, piece in split_top_level(item):
            name = piece.strip()
            if not name:
                continue
            if not NAME_CHARS(name):
                raise UsageError(f"{option}: {name!r} is not a name")
            if name not in out:
                out.append(name)
    return out


def checked_seed(text: str) -> np.ndarray | None:
    """``--seed``'s numbers read and checked (None for ``ones``), before any data is read for it."""
    if text.strip() == "ones":
        return None
    seed = constant(text, "--seed")
    if not np.isfinite(seed).all():  # an inf or nan seed makes every gradient inf or nan
        raise UsageError(f"--seed: {text.strip()!r} {NOT_FINITE}")
    return seed


def seed_vector(text: str, shape: tuple[int, ...]) -> np.ndarray:
    """``--seed ones`` or a literal vector, checked against the output's shape."""
    seed = checked_seed(text)
    if seed is None:
        return np.ones(shape)
    if seed.shape != shape:
        if seed.ndim == 0:
            return np.full(shape, float(seed))
        raise UsageError(f"--seed has shape {seed.shape} but the output has shape {shape}")
    return seed


def read_bounded(source: str | BinaryIO, what: str, limit: int | None, too_long: str | None = None) -> bytes:
    """At most ``limit`` bytes of a file (a path) or of an open binary stream, or a UsageError.

    Never more than ``limit + 1`` bytes are read, however large the input (``/dev/zero``, a
    pipe that never ends): one byte past the limit is enough to know it is too long.
    ``limit=None`` reads it all. Errors name ``what`` (``-f FILE``, ``standard input``);
    ``too_long`` replaces the message for an input over the limit.
    """
    size = -1 if limit is None else limit + 1
    try:
        if isinstance(source, str):
            with open(source, "rb") as stream:
                length = os.fstat(stream.fileno()).st_size
                if limit is not None and length > limit:  # a regular file: no need to read it
                    said = too_long or f"{what} is longer than the limit of {limit:,} bytes"
                    raise UsageError(f"{said} (it is {length:,} bytes)")
                data = stream.read(size)
        else:
            data = source.read(size)
    except FileNotFoundError:
        raise UsageError(f"{what}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{what}: is a directory") from None
    except OSError as exc:
        raise UsageError(f"{what}: cannot read it ({exc.strerror or exc})") from None
    if limit is not None and len(data) > limit:
        raise UsageError(too_long or f"{what} is longer than the limit of {limit:,} bytes")
    return data


def read_text(path: str, what: str, limit: int | None = None, too_long: str | None = None) -> str:
    """A file's UTF-8 text; with ``limit``, refused past that many bytes (read no further)."""
    return decode(read_bounded(path, f"{what} {path}", limit, too_long), f"{what} {path}")


def text_bytes_limit() -> int:
    """The most bytes a program's text can take: its character limit, at up to 4 bytes each."""
    return 4 * MAX_CHARACTERS


def program_too_long(origin: str) -> str:
    """The refusal of a program text over the limit (the parser's words, for a file or stdin
    that was not read to its end)."""
    return f"{origin} is longer than the limit of {MAX_CHARACTERS:,} characters"


def decode(data: bytes, what: str) -> str:
    """UTF-8 text, or an error naming ``what`` and the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what}: not UTF-8 text (byte {exc.start})") from None


def as_numbers(value: Any) -> Any:
    """A NumPy value as plain Python numbers and lists (for output)."""
    return np.asarray(value).tolist()
