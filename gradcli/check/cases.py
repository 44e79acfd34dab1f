"""``gradcli check --cases FILE.toml``: a file of cases checked in one process, a verdict per case.

A case is a table in the ``[[case]]`` array of the file; a ``[defaults]`` table gives what every
case leaves out. A case whose program cannot be read or run is an ERROR for that case alone; the
file itself (TOML that does not parse, a key no case knows) is refused as a whole, exit 2.
JUnit XML for CI systems is written by ``junit_xml``.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GradcliError, UsageError, printable
from ..lang.compute import resolve_wrt, unused_values
from ..lang.data import read_points
from ..lang.evaluate import suggest
from ..lang.parser import parse
from ..lang.program import TreeProgram, load
from ..lang.values import NOT_FINITE, assignments, constant, read_text
from ..text import number
from .directions import directions_asked
from .result import METHOD_NAMES, check_table
from .run import check

#: the keys a case may have, and which of them ``[defaults]`` may give
CASE_KEYS = ("name", "expr", "file", "function", "at", "points", "expect", "wrt", "seed", "rtol", "atol", "methods",
             "blame", "directions")  # fmt: skip
DEFAULT_KEYS = ("at", "wrt", "seed", "rtol", "atol", "methods", "blame", "directions")
PROGRAM_KEYS = ("expr", "file", "function")
Locator = Callable[[Any, Mapping[str, Any], Any], Any] | None  # (program, values, wrt) -> check's locate hook
STATUSES = ("ok", "MISMATCH", "FAILED", "INCONCLUSIVE", "ERROR")  # FAILED: a non-finite value or gradient


@dataclass
class Case:
    """One case as the file gives it (with the defaults filled in); paths relative to ``base``."""

    name: str
    number: int  # 1-based, in file order
    line: int  # the line of its [[case]] header (0: not found)
    base: str  # the folder of the TOML file
    fields: dict[str, Any]


@dataclass
class CaseResult:
    """What checking one case found; plain data, so that it crosses process boundaries."""

    name: str
    number: int
    status: str  # one of STATUSES
    seconds: float
    message: str  # the verdict line, or the error (with its caret lines)
    detail: str = ""  # the table of values and the notes, as text
    result: dict[str, Any] | None = None  # the check's own JSON document (CheckResult.to_dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {"name": self.name, "status": self.status, "time": round(self.seconds, 6)}
        if self.status == "ERROR":
            document["error"] = self.message
        else:
            document["verdict"] = self.message
        if self.result is not None:
            document["result"] = self.result
        if self.warnings:
            document["warnings"] = self.warnings
        return document


# --- reading the file ----------------------------------------------------------------------------------------


def read_cases(path: str) -> tuple[list[Case], str]:
    """The cases of a TOML file, and its text; a UsageError (exit 2) when the file cannot be used."""

    text = read_text(path, "--cases", 50_000_000)
    return parse_cases(text, path), text


def parse_cases(text: str, path: str) -> list[Case]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    try:
        document = tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"--cases {path}: not valid TOML: {exc}") from None
    unknown = [k for k in document if k not in ("case", "defaults")]
    if unknown:
        raise UsageError(f"--cases {path}: unknown table {unknown[0]!r} (a cases file has [defaults] and [[case]])")
    defaults = document.get("defaults", {})
    if not isinstance(defaults, dict):
        raise UsageError(f"--cases {path}: defaults must be a table: [defaults]")
    for key in defaults:
        if key not in DEFAULT_KEYS:
            raise UsageError(f"--cases {path}: [defaults] cannot hold {key!r}{_suggest(key, DEFAULT_KEYS)}")
    cases = document.get("case", [])
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise UsageError(f"--cases {path}: cases are tables: [[case]]")
    if not cases:
        raise UsageError(f"--cases {path}: no cases: add [[case]] tables with name and expr")
    lines = case_lines(text)
    base = str(Path(path).resolve().parent) if path != "-" else str(Path.cwd())
    found = []
    for i, raw in enumerate(cases):
        line = lines[i] if i < len(lines) else 0
        where = f"--cases {path}:{line}" if line else f"--cases {path}: case {i + 1}"
        _check_case(raw, where)
        fields = {**defaults, **raw}
        name = str(
            raw.get("name") or raw.get("expr") or _function_of_file(raw) or raw.get("file") or raw.get("function")
        )
        found.append(Case(name, i + 1, line, base, fields))
    return found


def _function_of_file(fields: Mapping[str, Any]) -> str | None:
    """``model.py:f`` for a case with ``file = "model.py"`` and ``function = "f"`` (None otherwise)."""
    return f"{fields['file']}:{fields['function']}" if "file" in fields and "function" in fields else None


def _check_case(raw: Mapping[str, Any], where: str) -> None:
    for key in raw:
        if key not in CASE_KEYS:
            raise UsageError(f"{where}: unknown key {key!r} in a case{_suggest(key, CASE_KEYS)}")
    given = [k for k in PROGRAM_KEYS if k in raw]
    if given == ["file", "function"]:  # file = "model.py", function = "f": a function of that Python file
        if not str(raw["file"]).endswith(".py") or ":" in str(raw["function"]):
            raise UsageError(f'{where}: with file, function names a function of it: file = "model.py", function = "f"')
        given = ["function"]
    if len(given) != 1:
        said = "none" if not given else " and ".join(given)
        raise UsageError(f"{where}: a case needs one of expr, file or function (it has {said})")
    kinds = {
        "name": str, "expr": str, "file": str, "function": str, "points": str, "seed": str,
        "at": (dict, str), "expect": dict, "wrt": (list, str), "methods": (list, str),
        "rtol": (int, float), "atol": (int, float), "blame": bool, "directions": (int, str),
    }  # fmt: skip
    for key, value in raw.items():
        if not isinstance(value, kinds[key]) or (isinstance(value, bool) and kinds[key] is not bool):
            raise UsageError(f"{where}: {key} = {value!r} is not {_kind_name(kinds[key])}")
    for name, formula in raw.get("expect", {}).items():
        if not isinstance(formula, str):
            raise UsageError(f"{where}: expect.{name} must be a formula in quotes, got {formula!r}")


def _kind_name(kind: Any) -> str:
    names = {str: "a string", dict: "a table", list: "a list", int: "a number", float: "a number",
             bool: "true or false"}  # fmt: skip
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(dict.fromkeys(names[k] for k in kinds))


def _suggest(word: str, candidates: Sequence[str]) -> str:
    return suggest(word, candidates) or f" (a case knows {', '.join(candidates)})"


_HEADER = re.compile(r"^\s*\[\[\s*case\s*\]\]\s*(#.*)?$")
_TABLE = re.compile(r"""^\s*\[\[?\s*[A-Za-z_"'][\w."' -]*\]\]?\s*(#.*)?$""")  # a table header, not an array's row
_SUB_TABLE = re.compile(r"^\s*\[\s*case\s*\.")  # [case.expect]: still the case above


def case_lines(text: str) -> list[int]:
    """The 1-based line of each ``[[case]]`` header, in order."""
    return [i + 1 for i, line in enumerate(text.splitlines()) if _HEADER.match(line)]


# --- choosing cases: -k -----------------------------------------------------------------------------------------


def selector(pattern: str) -> Callable[[str], bool]:
    """pytest's ``-k``: words match a case's name as substrings (any case), joined by ``not``, ``and``,
    ``or`` and parentheses. ``-k "product and not sign"``."""
    tokens = re.findall(r"\(|\)|[^\s()]+", pattern)
    if not tokens:
        raise UsageError("-k needs a pattern: a part of case names (and, or, not, parentheses)")
    position = 0

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        position += 1
        return tokens[position - 1]

    def joined(word: str, part: Callable[[], Callable[[str], bool]], combine: Any) -> Callable[[str], bool]:
        """``part (word part)*``: ``combine`` (any, all) of the parts' matches."""
        parts = [part()]
        while peek() == word:
            take()
            parts.append(part())
        return lambda name: combine(p(name) for p in parts)

    def either() -> Callable[[str], bool]:
        return joined("or", both, any)

    def both() -> Callable[[str], bool]:
        return joined("and", negated, all)

    def negated() -> Callable[[str], bool]:
        if peek() == "not":
            take()
            inner = negated()
            return lambda name: not inner(name)
        token = peek()
        if token is None or token in ("and", "or", ")"):
            raise UsageError(
                f"-k {pattern!r}: expected a word {'at the end' if token is None else f'before {token!r}'}"
            )
        take()
        if token == "(":
            inner = either()
            if peek() != ")":
                raise UsageError(f"-k {pattern!r}: a '(' is not closed")
            take()
            return inner
        word = token.lower()
        return lambda name: word in name.lower()

    chosen = either()
    if peek() is not None:
        raise UsageError(f"-k {pattern!r}: unexpected {peek()!r}")
    return chosen


# --- running a case ------------------------------------------------------------------------------------------------


def run_case(case: Case, sympy_timeout: float | None = None, digits: int = 10, locator: Locator = None) -> CaseResult:
    """Check one case; any problem with it (syntax, unknown name, missing file) is its ERROR. ``digits``:
    the significant digits of its table (``--digits N``); ``locator(program, values, wrt)``, the hook
    that names a blamed node as ``gradcli graph`` draws it (render's, passed down by the CLI)."""
    import warnings

    started = time.perf_counter()
    caught: list[Any] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            status, message, detail, document, said = _check_case_program(case, sympy_timeout, digits, locator)
    except GradcliError as exc:
        status, message, detail, document, said = "ERROR", exc.render().removeprefix("error: "), "", None, []
    except RecursionError:
        status, message, detail, document, said = "ERROR", "the input is nested too deeply to process", "", None, []
    except MemoryError:
        status, message, detail, document, said = "ERROR", "not enough memory for this computation", "", None, []
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # the user's own Python code, or gradcli itself: this case alone fails
        message = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        status, message, detail, document, said = "ERROR", printable(message), "", None, []
    said = said + [" ".join(str(w.message).split()) for w in caught]
    return CaseResult(case.name, case.number, status, time.perf_counter() - started, message, detail, document, said)


def _check_case_program(
    case: Case, sympy_timeout: float | None, digits: int = 10, locator: Locator = None
) -> tuple[str, str, str, dict | None, list[str]]:

    f = case.fields
    program = case_program(case)
    values = case_values(case)
    wrt = _names(f.get("wrt"))
    methods = _names(f.get("methods"))
    expect = dict(f.get("expect", {})) or None
    said = [unused_values(program, values)] if unused_values(program, values) else []
    directions = directions_asked(f.get("directions"))
    run = lambda point: check(  # noqa: E731
        program, point, wrt, methods, f.get("rtol"), f.get("atol"), expect, f.get("seed"), bool(f.get("blame")),
        sympy_timeout, None if locator is None or not f.get("blame") else locator(program, point, wrt), directions,
    )  # fmt: skip
    if "points" in f:
        return _check_points(case, run, values, said, digits)
    result = run(values)
    said += result.warnings
    return _status(result), result.verdict(), result_text(result, digits), result.to_dict(), said


def _check_points(
    case: Case, run: Callable[[dict[str, Any]], Any], values: dict[str, Any], said: list[str], digits: int = 10
) -> tuple[str, str, str, dict | None, list[str]]:
    """Every row of the case's points file, each its own point (with ``at``'s values as parameters): the
    first failing row stands for the case (the last row when all pass). The one place points are read
    and checked for a case: a batched ``check --points`` can replace this loop."""

    path = str(Path(case.base, case.fields["points"]))
    columns = read_points(path)
    both = [name for name in columns if name in values]
    if both:
        raise UsageError(f"{both[0]} is given both by at and by a column of {case.fields['points']}")
    n = len(next(iter(columns.values())))
    failed: list[int] = []
    shown = None
    for i in range(n):
        point = {**values, **{name: np.asarray(column[i]) for name, column in columns.items()}}
        result = run(point)
        said += [w for w in result.warnings if w not in said]
        if not result.ok:
            failed.append(i + 1)
            shown = shown or (i + 1, point, result)
        elif i == n - 1 and shown is None:
            shown = (i + 1, point, result)
    row, point, result = shown  # type: ignore[misc]
    where = ", ".join(f"{k} = {_value_text(v)}" for k, v in point.items())
    document = {**result.to_dict(), "points": {"file": case.fields["points"], "rows": n, "failed_rows": failed}}
    status = _status(result)
    if failed:
        message = f"row {row} of {n} ({where}): {result.verdict()}"
        if len(failed) > 1:
            message += (
                f" ({len(failed)} rows fail: {', '.join(map(str, failed[:10]))}{'...' if len(failed) > 10 else ''})"
            )
    else:
        message = f"all {n} rows: {result.verdict()}"
    return status, message, result_text(result, digits), document, said


def _status(result: Any) -> str:
    if result.ok:
        return "ok"
    word = result.verdict().partition(":")[0]
    return {"MISMATCH": "MISMATCH", "FAILED": "FAILED"}.get(word, "INCONCLUSIVE")


def _names(value: Any) -> list[str] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, str) else [str(v) for v in value]
    return [part.strip() for item in items for part in item.split(",") if part.strip()] or None


def case_program(case: Case) -> Any:
    """The case's program: ``expr`` (gradcli's language), ``file`` (a program file) or ``function``
    (``path.py:name``), paths relative to the TOML file."""

    f = case.fields
    if "expr" in f:
        return TreeProgram("expression", parse(f["expr"]))
    if "file" in f and "function" not in f:
        _exists(case, f["file"], "file")
        return load(None, str(Path(case.base, f["file"])))
    path, colon, name = (_function_of_file(f) or f["function"]).rpartition(":")
    if not colon or not path:
        raise UsageError(f"function = {f['function']!r}: give FILE.py:NAME, a Python file and a function in it")
    _exists(case, path, "function")
    return load(None, None, f"{Path(case.base, path)}:{name}")


def _exists(case: Case, path: str, key: str) -> None:
    if not Path(case.base, path).is_file():
        raise UsageError(f"{key} = {path!r}: no such file (paths are relative to the cases file, in {case.base})")


def case_values(case: Case) -> dict[str, Any]:
    """``at = { x = 2, v = [1, 2] }`` (numbers, lists, or the language's constants in quotes) or
    ``at = "x=2, v=[1,2]"``, as ``--at`` reads them."""

    at = case.fields.get("at", {})
    if isinstance(at, str):
        return assignments([at])
    values = {}
    for name, value in at.items():
        try:
            values[name] = constant(value, f"at {name}") if isinstance(value, str) else np.asarray(value, np.float64)
        except (ValueError, TypeError):
            raise UsageError(f"at {name} = {value!r}: not a number or a rectangular list of numbers") from None
        if not np.isfinite(values[name]).all():
            raise UsageError(f"at {name}: {value!r} {NOT_FINITE}")
    return values


def _value_text(value: Any) -> str:
    a = np.asarray(value)
    return number(a.item(), 10) if a.ndim == 0 else str(a.tolist())


def result_text(result: Any, digits: int = 10) -> str:
    """The check's table (element | autograd | each method | abs err | rel err | ok) and its notes, as
    plain text: what a failing case shows under its line and in the JUnit report."""

    table = result.table or check_table(result.compared, result.checks, result.kinks, result.labels)
    header = [
        "",
        getattr(result, "by", "autograd"),
        *(METHOD_NAMES[name] for name in table.methods),
        "abs err",
        "rel err",
        "ok",
    ]
    body = []
    for row in table.rows:
        cells = [f"d/d{row.label}", number(row.autograd, digits)]
        cells += ["" if np.isnan(v) else number(v, digits) for v in row.values]
        cells += ["", ""] if row.abs_error is None else [f"{row.abs_error:.2g}", f"{row.rel_error:.2g}"]
        body.append([*cells, row.status])
    widths = [max(len(c) for c in column) for column in zip(header, *body)]
    last = len(widths) - 1
    lines = [
        "  ".join(c.rjust(w) if 0 < i < last else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in [header, *body]
    ]
    if table.note:
        lines.append(f"({table.note})")
    lines += [f"{METHOD_NAMES[c.name]}: {c.reason}" for c in result.checks.values() if c.reason]
    lines += [k.text() for k in result.kinks] + list(result.notes)
    if result.blame is not None:  # (blame = true: which node, or which custom Function, is wrong)
        lines.append(f"blame: {result.blame.where}{result.blame.text()}")
    return "\n".join(lines)


# --- running them all ------------------------------------------------------------------------------------------------


def run_cases(
    cases: Sequence[Case],
    jobs: int = 1,
    fail_fast: bool = False,
    sympy_timeout: float | None = None,
    digits: int = 10,
    locator: Locator = None,
) -> Iterator[CaseResult]:
    """Each case's result, in file order, as soon as it is known; ``jobs`` > 1 runs them in that many
    processes. With ``fail_fast`` nothing follows the first case that does not pass."""
    _import_sympy(cases)
    if jobs <= 1 or len(cases) <= 1:
        for case in cases:
            done = run_case(case, sympy_timeout, digits, locator)
            yield done
            if fail_fast and not done.passed:
                return
        return
    import multiprocessing

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() and sys.platform != "darwin" else "spawn"
    pool = multiprocessing.get_context(method).Pool(min(jobs, len(cases)))
    try:
        for done in pool.imap(_run_one, [(case, sympy_timeout, digits, locator) for case in cases]):
            yield done
            if fail_fast and not done.passed:
                return
    finally:
        pool.terminate()
        pool.join()


def _import_sympy(cases: Sequence[Case]) -> None:
    """SymPy imported once before the first case (and before the processes of --jobs fork), so that its
    second or so of importing is not counted as the first case's time."""
    for case in cases:
        methods = _names(case.fields.get("methods"))
        symbolic = "expr" in case.fields or ("file" in case.fields and "function" not in case.fields)
        if symbolic and (methods is None or "sympy" in [m.lower() for m in methods]):
            from ..lang import symbolic as _  # noqa: F401  # lazy: SymPy, imported before the first case's clock

            return


def _run_one(job: tuple[Case, float | None, int, Locator]) -> CaseResult:
    return run_case(*job)


@dataclass
class Summary:
    counts: dict[str, int]
    deselected: int
    not_run: int
    seconds: float

    @property
    def ok(self) -> bool:
        return all(self.counts[s] == 0 for s in STATUSES if s != "ok")

    def text(self) -> str:
        """pytest's words: ``12 passed, 1 failed, 0 inconclusive, 0 errors in 1.8 s``."""
        c = self.counts
        failed = c["MISMATCH"] + c["FAILED"]
        parts = [f"{c['ok']} passed", f"{failed} failed", f"{c['INCONCLUSIVE']} inconclusive"]
        parts.append(f"{c['ERROR']} error{'' if c['ERROR'] == 1 else 's'}")
        if self.deselected:
            parts.append(f"{self.deselected} deselected")
        if self.not_run:
            parts.append(f"{self.not_run} not run (--fail-fast)")
        return f"{', '.join(parts)} in {self.seconds:.1f} s"

    def to_dict(self) -> dict[str, Any]:
        c = self.counts
        return {
            "passed": c["ok"], "failed": c["MISMATCH"] + c["FAILED"], "inconclusive": c["INCONCLUSIVE"],
            "errors": c["ERROR"], "deselected": self.deselected, "not_run": self.not_run, "time": round(self.seconds, 6),
        }  # fmt: skip


def summarize(results: Iterable[CaseResult], deselected: int, selected: int, seconds: float) -> Summary:
    counts = dict.fromkeys(STATUSES, 0)
    n = 0
    for r in results:
        counts[r.status] += 1
        n += 1
    return Summary(counts, deselected, selected - n, seconds)


# --- JUnit XML ---------------------------------------------------------------------------------------------------------


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def junit_xml(results: Sequence[CaseResult], summary: Summary, suite: str, path: str) -> str:
    """One testsuite, one testcase per case run: a failure (MISMATCH, FAILED, INCONCLUSIVE) holds its
    verdict as the message and the table of values as text; an ERROR holds the error and its caret.

    Valid for the schemas CI systems read (tests/test_r27_junit_schemas.py): the Jenkins xUnit
    plugin's junit-10.xsd, older and newer, and the Apache Ant JUnit schema, the strictest. So a
    testcase has only name, classname and time; the cases' file is the suite's property ``file``,
    and their warnings go to the suite's system-err, each line under its case's name."""
    import datetime
    import socket
    import xml.etree.ElementTree as ET

    s = summary.to_dict()
    root = ET.Element("testsuites")  # Ant's schema allows it no attributes: the suite has the counts
    stamp = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0, tzinfo=None).isoformat()
    node = ET.SubElement(
        root, "testsuite", name=_xml_text(suite) or "gradcli check", tests=str(len(results)),
        failures=str(s["failed"] + s["inconclusive"]), errors=str(s["errors"]), skipped="0",
        time=f"{summary.seconds:.3f}", timestamp=stamp, hostname=_xml_text(socket.gethostname()) or "localhost",
        package="gradcli check", id="0",
    )  # fmt: skip
    properties = ET.SubElement(node, "properties")
    ET.SubElement(properties, "property", name="file", value=_xml_text(path))
    warnings = []
    for r in results:
        case = ET.SubElement(node, "testcase", name=_xml_text(r.name), classname=_xml_text(suite))
        case.set("time", f"{r.seconds:.3f}")
        if r.status == "ERROR":
            ET.SubElement(case, "error", message=_xml_text(r.message.splitlines()[0]), type="ERROR").text = _xml_text(
                r.message
            )
        elif r.status != "ok":
            failure = ET.SubElement(case, "failure", message=_xml_text(r.message), type=r.status)
            failure.text = _xml_text(f"{r.message}\n\n{r.detail}" if r.detail else r.message)
        warnings += [f"{r.name}: warning: {w}" for w in r.warnings]
    ET.SubElement(node, "system-out").text = ""
    ET.SubElement(node, "system-err").text = _xml_text("\n".join(warnings))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# --- --update: the missing expect entries, written into the file --------------------------------------------------


def missing_expectations(case: Case) -> list[str]:
    """The variables the case checks that its ``expect`` leaves out."""

    program = case_program(case)
    values = case_values(case)
    if "points" in case.fields:
        columns = read_points(str(Path(case.base, case.fields["points"])))
        values = {**values, **{n: np.asarray(c[0]) for n, c in columns.items()}}
    names = resolve_wrt(program, values, _names(case.fields.get("wrt")))
    have = case.fields.get("expect", {})
    return [n for n in names if n not in have]


def insert_expectations(text: str, number: int, found: Mapping[str, str]) -> str:
    """``text`` with ``found`` (variable -> formula) added to case ``number``'s ``expect``, touching no
    other line: a new ``expect = { ... }`` line after the case's last key, new entries in a one-line
    inline table, or new lines in an ``[case.expect]`` table."""
    lines = text.splitlines(keepends=True)
    starts = [n - 1 for n in case_lines(text)]
    start = starts[number - 1]
    end = next((i for i in range(start + 1, len(lines)) if _TABLE.match(lines[i])), len(lines))  # its own keys
    stop = next(
        (i for i in range(end, len(lines)) if _TABLE.match(lines[i]) and not _SUB_TABLE.match(lines[i])), len(lines)
    )
    sub = next((i for i in range(end, stop) if re.match(r"^\s*\[\s*case\s*\.\s*expect\s*\]", lines[i])), None)
    entries = [f"{_key(name)} = {_string(formula)}" for name, formula in found.items()]
    if sub is not None:  # [case.expect]: new lines after its last key
        table_end = next((i for i in range(sub + 1, len(lines)) if _TABLE.match(lines[i])), len(lines))
        at = _last_key_line(lines, sub, table_end) + 1
        return "".join(lines[:at] + [e + "\n" for e in entries] + lines[at:])
    inline = next((i for i in range(start + 1, end) if re.match(r"^\s*expect\s*=", lines[i])), None)
    if inline is not None:
        closing = _inline_end(lines[inline])
        if closing is None:
            raise UsageError(f"case {number}: its expect table spans lines; add the new entries by hand")
        body = lines[inline][:closing].rstrip()
        sep = " " if body.endswith("{") else ", "
        lines[inline] = body + sep + ", ".join(entries) + " " + lines[inline][closing:]
        return "".join(lines)
    if any(re.match(r"^\s*expect\s*\.", lines[i]) for i in range(start + 1, end)):
        at = _last_key_line(lines, start, end) + 1
        return "".join(lines[:at] + [f"expect.{e}\n" for e in entries] + lines[at:])
    at = _last_key_line(lines, start, end) + 1
    newline = "" if at == 0 or lines[at - 1].endswith("\n") else "\n"
    return "".join(lines[:at] + [newline + "expect = { " + ", ".join(entries) + " }\n"] + lines[at:])


def _last_key_line(lines: list[str], start: int, end: int) -> int:
    """The last line from ``start`` to ``end`` that is not blank or a comment (a multi-line value's last line)."""
    last = start
    for i in range(start + 1, end):
        stripped = lines[i].strip()
        if stripped and not stripped.startswith("#"):
            last = i
    return last


def _inline_end(line: str) -> int | None:
    """The offset of the ``}`` closing the inline table that ``line`` opens, or None if not on this line."""
    depth, quote, i = 0, None, line.index("=") + 1
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#":
            return None
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i if c == "}" else None
        i += 1
    return None


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else _string(name)


def _string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in escaped) + '"'
