"""Every error a user can cause, with its exit code, formatted in one place.

Library code raises these; only the CLI's edge turns them into a message on
stderr and an exit code (DESIGN principle 8). A syntax error knows its source
and column, and prints the line with a caret under that column.
"""

from __future__ import annotations

import re

from .records import Frozen, fill

EXIT_OK = 0
EXIT_MISMATCH = 1  # check: a derivative disagrees, or a value is not finite
EXIT_USAGE = 2  # bad input of any kind
EXIT_MISSING_PROGRAM = 3  # an outside program (Graphviz's dot) is missing

CONTEXT = 36  # characters shown on each side of the caret in a long line


# C0 and C1 controls (ESC, CR, newline, tab, DEL), and the invisible characters that reorder or hide
# text on a terminal (bidi overrides and isolates, zero-width characters, line separators, BOM)
_UNSAFE_CHARACTERS = (
    "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_unsafe: list[re.Pattern[str]] = []  # compiled on first use: an error or a warning (start-up)


def printable(text: str) -> str:
    """User text made safe to echo: controls and invisible characters as escapes (``\\x1b``, ``\\u202e``),
    so a message is one line that cannot move the cursor, recolour the terminal or reorder itself."""
    if not _unsafe:
        _unsafe.append(re.compile(_UNSAFE_CHARACTERS))
    return _unsafe[0].sub(_escape, text)


def raised(exc: BaseException) -> str:
    """``TypeError: text`` for an exception the user's code raised, on one line: a message of several
    lines (JAX's, with a traceback's) joined by spaces, never shown with its line breaks escaped."""
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    if _FLOAT32_MET.search(text) and "type" in text:  # (PyTorch's words for a float32 model given float64)
        text += (
            " (gradcli gives the function float64 tensors: make a float32 model float64 with .double()"
            " where it is built, e.g. net = net.double())"
        )
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


#: a float64 tensor meeting a float32 (or half) one, as PyTorch's errors say it: "mat1 and mat2 must
#: have the same dtype, but got Double and Float", "Input type (double) and bias type (float) ..."
_FLOAT32_MET = re.compile(
    r"\b[Dd]ouble\b.*\b(?:[Ff]loat|Half|BFloat16)\b|\b(?:[Ff]loat|Half|BFloat16)\b.*\b[Dd]ouble\b"
)


_user_code: list[str] = []  # "file.py:func" of the user's Python function, once one is loaded


def note_user_code(where: str) -> None:
    """Say that the user's Python code (``file.py:func``) is loaded and runs from now on (lang does)."""
    _user_code[:] = [where]


def loaded_user_code() -> str | None:
    """The user's Python function, once loaded: a RuntimeError from autograd is then most likely
    its misuse (an in-place change of a saved value), reported as bad input rather than as our bug."""
    return _user_code[0] if _user_code else None


class GradcliError(Exception):
    """A problem with what the user asked for: one clear message, one exit code."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def render(self) -> str:
        return f"error: {printable(self.message)}"


class UsageError(GradcliError):
    """Bad input: unknown names, shapes that do not fit, values that cannot be read."""


class MissingProgram(GradcliError):
    """An outside program is needed and absent; the message says how to install it."""

    exit_code = EXIT_MISSING_PROGRAM


class Source(Frozen):
    """The text of a program, with what is needed to point at a place in it."""

    __slots__ = _fields = ("text", "origin")

    def __init__(
        self,
        text: str,
        origin: str = "expression",
    ) -> None:
        fill(self, locals())

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a character offset."""
        line = self.text.count("\n", 0, offset) + 1
        start = self.text.rfind("\n", 0, offset) + 1
        return line, offset - start + 1

    def where(self, offset: int) -> str:
        """``column 7``, or ``line 2, column 3`` in a program of several lines."""
        line, col = self.line_col(max(0, min(offset, len(self.text))))
        return f"line {line}, column {col}" if "\n" in self.text.strip("\n") else f"column {col}"

    def excerpt(self, start: int, end: int, width: int = 40) -> str:
        """The text from ``start`` to ``end``, cut to ``width`` characters."""
        text = self.text[start:end].strip()
        return text if len(text) <= width else text[: width - 3] + "..."

    def quote(self, start: int, end: int) -> str:
        """``'sqrt(x)' at column 1``: a piece of the program, and where it is."""
        return f"{self.excerpt(start, end)!r} at {self.where(start)}"

    def point(self, offset: int) -> str:
        """The line holding ``offset`` and a caret under it (long lines are cut)."""
        offset = max(0, min(offset, len(self.text)))
        line, col = self.line_col(offset)
        start = self.text.rfind("\n", 0, offset) + 1
        end = self.text.find("\n", offset)
        end = len(self.text) if end < 0 else end
        shown = self.text[start:end].replace("\t", " ")
        caret = col - 1
        if len(shown) > 2 * CONTEXT + 10:
            left = max(0, caret - CONTEXT)
            right = min(len(shown), caret + CONTEXT)
            prefix = "..." if left > 0 else ""
            shown = prefix + shown[left:right] + ("..." if right < len(shown) else "")
            caret = caret - left + len(prefix)
        caret = len(printable(shown[:caret]))  # escapes are wider than the characters they show
        shown = printable(shown)
        where = f"line {line}: " if "\n" in self.text.strip("\n") else ""
        margin = "  " + " " * len(where)
        return f"  {where}{shown}\n{margin}{' ' * caret}^"


class SyntaxProblem(UsageError):
    """A place in the program where it cannot be read; rendered with a caret."""

    def __init__(self, message: str, source: Source, offset: int) -> None:
        super().__init__(message)
        self.source = source
        self.offset = offset
        self.line, self.column = source.line_col(max(0, min(offset, len(source.text))))

    def render(self) -> str:
        return f"error: {printable(self.message)}\n{self.source.point(self.offset)}"


def install_hint(extra: str) -> str:
    """The command that installs gradcli's optional ``extra`` (``scale``, ``plot``...) the way this
    gradcli was installed: ``pip install "gradcli[scale]"`` names the package index, where a clone
    is unknown ("No matching distribution"). Every hint for a missing extra says this."""
    import importlib.metadata
    import json
    from pathlib import Path

    try:
        direct_url = json.loads(importlib.metadata.distribution("gradcli").read_text("direct_url.json") or "null")
    except (importlib.metadata.PackageNotFoundError, ValueError, OSError):
        direct_url = None
    return install_command(extra, direct_url if isinstance(direct_url, dict) else None, Path(__file__).parent.parent)


def install_command(extra: str, direct_url: dict | None, root: object) -> str:
    """``install_hint`` from its facts: ``direct_url`` the installed distribution's PEP 610 record
    (``direct_url.json``: absent for an install from an index) and ``root`` the folder holding the
    running ``gradcli`` package (a clone's root when it runs from one, with or without an install)."""
    from pathlib import Path

    checkout = Path(str(root))
    pyproject = checkout / "pyproject.toml"
    if pyproject.is_file() and re.search(r'(?m)^name\s*=\s*"gradcli"', pyproject.read_text("utf-8", "replace")):
        return f"pip install -e {_shell_word(f'{checkout}[{extra}]')}"  # running from a clone
    url = str((direct_url or {}).get("url", ""))
    if not url:
        return f"pip install {_shell_word(f'gradcli[{extra}]')}"
    dir_info, vcs_info = direct_url.get("dir_info"), direct_url.get("vcs_info")  # type: ignore[union-attr]
    if isinstance(dir_info, dict) and url.startswith("file:"):
        from urllib.parse import unquote, urlparse

        path = unquote(urlparse(url).path)
        editable = "-e " if dir_info.get("editable") else ""
        return f"pip install {editable}{_shell_word(f'{path}[{extra}]')}"
    if isinstance(vcs_info, dict):
        commit = vcs_info.get("commit_id") or vcs_info.get("requested_revision")
        url = f"{vcs_info.get('vcs', 'git')}+{url}" + (f"@{commit}" if commit else "")
    return f"pip install {_shell_word(f'gradcli[{extra}] @ {url}')}"


def _shell_word(text: str) -> str:
    """``"text"`` as the hints have always quoted it, or single quotes where a shell would expand it."""
    if not re.search(r'["$`\\!]', text):
        return f'"{text}"'
    import shlex

    return shlex.quote(text)
