"""Text -> tokens, each with its offset in the source.

Numbers (``2``, ``2.5``, ``.5``, ``1e-3``), names (letters of any script,
digits, ``_``: ``x``, ``w1``, ``x_2``, ``θ``), operators, brackets, ``;`` and
new lines (statement separators, ignored inside brackets), ``#`` comments.
One compiled pattern reads a token per match, so a million characters take
about a second.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..errors import Source, SyntaxProblem, UsageError
from ..memory import available_bytes, room
from ..ops.operators import symbols

KEYWORDS = frozenset({"if", "else"})
OPENERS = {"(": ")", "[": "]"}
CLOSERS = {")": "(", "]": "["}

PUNCTUATION = frozenset(["=", ",", ":", ";", "(", ")", "[", "]", "."])  # "." only in x.T
#: The operators' spellings come from the operator table; the rest is punctuation.
OPERATORS = frozenset(symbols()) | PUNCTUATION


def _pattern() -> re.Pattern[str]:
    """One token per capture; what lies between captures must be blank or a comment. Longer
    spellings are tried first ("**" before "*", "<=" before "<")."""
    long = sorted((s for s in OPERATORS if len(s) > 1), key=lambda s: (-len(s), s))
    short = "".join(sorted(re.escape(s) for s in OPERATORS if len(s) == 1))
    spelled = "|".join(re.escape(s) for s in long)
    return re.compile(rf"(#[^\n]*|\n|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[^\W\d]\w*|{spelled}|[{short}])")


_SPLIT = _pattern()
_GAP = re.compile(r"[ \t\r\f\v]*")


class NumberTooLarge(SyntaxProblem):
    """A literal too large for a float64 number (``1e999``): refused where it is written, as an
    ``--at`` value that large is, rather than read as inf (every command reads it through here)."""

    def __init__(self, literal: str, source: Source, offset: int) -> None:
        super().__init__(
            f"{literal!r} at {source.where(offset)} is not a finite float64 number (too large: the largest is "
            "about 1.8e308)",
            source,
            offset,
        )
        self.literal = literal


def too_large(literal: str) -> bool:
    """Whether a number literal of the language overflows float64 (only one with an exponent or over
    300 characters can: the test costs nothing on the common ones)."""
    return ("e" in literal or "E" in literal or len(literal) > 300) and float(literal) == float("inf")


def _shown(ch: str) -> str:
    """``character '$'``, or ``character U+00A0 (NO-BREAK SPACE)`` for one that does not show."""
    import unicodedata

    name = unicodedata.name(ch, None)
    if (ch.isprintable() and not ch.isspace()) or name is None:  # control characters have no name
        return f"character {ch!r}"
    return f"character U+{ord(ch):04X} ({name})"


class Token(NamedTuple):
    kind: str  # "number", "name", "keyword", "op", "newline", "end"
    text: str
    offset: int

    @property
    def end(self) -> int:
        return self.offset + len(self.text)


_new_token = tuple.__new__

#: The longest program text read, an absurd size for anything but a mistake (/dev/zero, a wrong
#: file). Real generated code runs to megabytes, and reading is linear: measured on an idle 2-core
#: machine, ``eval -f`` of 10 MB of ``x+x+...`` (5,000,001 terms, the most operations a character)
#: takes 8 s and 0.92 GB on the flat road; 20,000 statements ``a{i} = a{i-1} * 1.0001 + 0``
#: (557,791 characters) 0.8 s; 360,000 of them (10.9 MB, the syntax tree and the graph) 15 s and
#: 0.84 GB. Below the cap, what bounds a program is memory: ``check_size``.
MAX_CHARACTERS = 20_000_000
#: Peak bytes a program takes, measured as above (rounded up): a token through the syntax tree,
#: the recorded graph and the backward pass (216 for x+x+..., 270 for the statements); a
#: character on the flat road (92 for x+x+..., which has a token a character).
TREE_BYTES_PER_TOKEN = 300
FLAT_BYTES_PER_CHARACTER = 100
#: Below this estimate no memory is asked about (a short program reads no /proc file).
_SMALL = 50_000_000


def check_length(source: Source) -> None:
    """A UsageError naming the program's size when it is over ``MAX_CHARACTERS``."""
    if len(source.text) > MAX_CHARACTERS:
        raise UsageError(
            f"{source.origin} is {len(source.text):,} characters long, more than the limit of {MAX_CHARACTERS:,}"
        )


def check_size(source: Source, tokens: int | None = None) -> None:
    """A UsageError naming the program's size, before any work, when it is over ``MAX_CHARACTERS`` or
    its estimated peak (from its ``tokens`` when counted, else from its characters on the flat
    road) is over the memory available (``memory.available_bytes``: GRADCLI_MAX_MEMORY or the
    machine's)."""
    check_length(source)
    size = len(source.text)
    needed = size * FLAT_BYTES_PER_CHARACTER if tokens is None else tokens * TREE_BYTES_PER_TOKEN
    if needed < _SMALL:
        return
    available = available_bytes()
    if available is not None and needed > available:
        counted = "" if tokens is None else f", {tokens:,} tokens"
        raise UsageError(
            f"{source.origin} is {size:,} characters long{counted}: reading and differentiating it needs about "
            f"{needed / 1e9:.3g} GB of memory, more than {room(available)}; split it, free memory, "
            "or set GRADCLI_MAX_MEMORY (e.g. 64G) to raise the limit"
        )


def tokenize(source: Source) -> list[Token]:
    text = source.text
    check_length(source)  # before the text is split
    pieces = _SPLIT.split(text)  # [gap, token, gap, token, ..., gap]: the scanning happens in C
    check_size(source, len(pieces) // 2)  # before the tokens are made: they are most of the memory
    tokens: list[Token] = []
    append = tokens.append
    brackets: list[Token] = []
    gap_ok = _GAP.fullmatch
    offset = 0
    for k, piece in enumerate(pieces):
        if k % 2 == 0:  # a gap between tokens
            if piece:
                if not gap_ok(piece):
                    bad = next((i for i, ch in enumerate(piece) if ch not in " \t\r\f\v"), 0)
                    where = offset + bad
                    raise SyntaxProblem(f"unexpected {_shown(piece[bad])} at {source.where(where)}", source, where)
                offset += len(piece)
            continue
        first = piece[0]
        if first == "#":
            pass  # a comment, to the end of its line
        elif first == "\n":
            if not brackets and tokens and tokens[-1][0] != "newline":
                append(_new_token(Token, ("newline", "\n", offset)))
        elif first.isdecimal() or (first == "." and len(piece) > 1):
            if too_large(piece):
                raise NumberTooLarge(piece, source, offset)
            append(_new_token(Token, ("number", piece, offset)))
        elif first.isalpha() or first == "_":
            append(_new_token(Token, ("keyword" if piece in KEYWORDS else "name", piece, offset)))
        elif piece not in OPERATORS:  # a name starting with a character that cannot start one (²x)
            raise SyntaxProblem(f"unexpected {_shown(first)} at {source.where(offset)}", source, offset)
        else:
            token = _new_token(Token, ("op", piece, offset))
            if piece in OPENERS:
                brackets.append(token)
            elif piece in CLOSERS:
                _close(source, brackets, piece, offset)
            append(token)
        offset += len(piece)
    if brackets:
        opener = brackets[-1]
        # the caret: where the closer is missing on the same line, else at the opener itself
        # (the end of a text that runs on over lines, or ends in a newline, is an empty line)
        where = len(text) if "\n" not in text[opener.offset :] else opener.offset
        raise SyntaxProblem(
            f"expected '{OPENERS[opener.text]}' to close '{opener.text}' at {source.where(opener.offset)}",
            source,
            where,
        )
    append(_new_token(Token, ("end", "", len(text))))
    return tokens


def _close(source: Source, brackets: list[Token], closer: str, offset: int) -> None:
    if not brackets:
        raise SyntaxProblem(f"unmatched '{closer}' at {source.where(offset)}", source, offset)
    opener = brackets.pop()
    if OPENERS[opener.text] != closer:
        raise SyntaxProblem(
            f"'{closer}' does not close '{opener.text}' at {source.where(opener.offset)}; "
            f"expected '{OPENERS[opener.text]}'",
            source,
            offset,
        )
