"""``gradcli check --cases FILE.toml``: the command around gradcli.check.cases (selection, --update, the
lines printed as cases finish, the summary, --json, --junit, the exit code)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..check.cases import (
    case_program,
    case_values,
    insert_expectations,
    junit_xml,
    missing_expectations,
    parse_cases,
    read_cases,
    run_cases,
    selector,
    summarize,
)  # fmt: skip
from ..check.symbolic import Skipped, time_limit
from ..errors import GradcliError, UsageError, printable
from ..files import refuse_same, write_atomic
from ..lang.compute import formatted, symbolic_derivatives
from ..lang.evaluate import evaluate
from ..lang.parser import parse
from . import output
from .inputs import ONE_CHECK, Given, given_value
from .report import reported


def check_cases(given: Given) -> None:
    """``check --cases FILE.toml`` (``given``: check's options; a case brings its own program and
    options, so those of one check are refused). Exit 0 when every case passes; 1 when one fails,
    is inconclusive or is broken; 2 when the file cannot be used."""
    path, junit, pattern, digits = given.cases, given.junit, given.select, given.digits
    conflicting = [row.label for row in ONE_CHECK if given_value(given, row)]
    with reported():
        if path is None:
            raise UsageError("--junit, -k, --jobs, --fail-fast and --update go with --cases FILE.toml")
        if conflicting:
            raise UsageError(
                f"--cases takes each case's program and options from the file, not {', '.join(conflicting)} "
                "(a [defaults] table gives options to every case)"
            )
        output.use_digits(digits, "json" if given.as_json else None)
        cases, text = read_cases(path)
        refuse_same(junit, [path], "--junit")
        chosen = cases
        if pattern is not None:
            matches = selector(pattern)
            chosen = [c for c in cases if matches(c.name)]
            if not chosen:
                raise UsageError(f"-k {pattern!r} selects none of the {len(cases)} cases")
        if given.update:
            cases, chosen = _update(path, text, cases, chosen, given.sympy_timeout)
        started = time.perf_counter()
        width = min(40, max(len(c.name) for c in chosen))
        results = []
        from ..render.frameworks import blame_locator  # lazy: start-up, the graphs a blame is named on

        for result in run_cases(
            chosen, given.jobs, given.fail_fast, given.sympy_timeout, 10 if digits is None else digits, blame_locator
        ):
            results.append(result)
            if not given.as_json:
                _print_case(result, width)
        summary = summarize(results, len(cases) - len(chosen), len(chosen), time.perf_counter() - started)
        if given.as_json:
            output.print_json(
                {"file": path, "cases": [r.to_dict() for r in results], "summary": summary.to_dict(), "ok": summary.ok}
            )
        else:
            sys.stdout.write(summary.text() + "\n")
            sys.stdout.flush()
        if junit is not None:
            _write_junit(junit, results, summary, path)
        if not summary.ok:
            raise SystemExit(1)


def _print_case(result: Any, width: int) -> None:
    """``ok            product rule   0.02 s``; under a case that does not pass, its message and table."""

    name = printable(result.name)
    lines = [f"{result.status:<12}  {name.ljust(width)}  {result.seconds:.2f} s"]
    if not result.passed:  # as `gradcli check` shows it: the table, the notes, then the verdict
        lines += ["    " + line for line in result.detail.splitlines()]
        lines += ["    " + line for line in result.message.splitlines()]
    lines += [f"    warning: {w}" for w in result.warnings]
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


def _write_junit(path: str, results: list[Any], summary: Any, cases_path: str) -> None:

    write_atomic(path, junit_xml(results, summary, Path(cases_path).name, cases_path))
    output.wrote(path, f"JUnit XML, {len(results)} test cases")


def _update(path: str, text: str, cases: list[Any], chosen: list[Any], sympy_timeout: float) -> tuple[list, list]:
    """Fill the chosen cases' missing ``expect`` entries with the derivative ``gradcli diff`` prints, write
    the file (only new lines or entries: comments and order stay), and read it again."""

    added: dict[int, dict[str, str]] = {}
    for case in chosen:
        try:
            names = missing_expectations(case)
            found = derivative_texts(case, names, sympy_timeout) if names else {}
            if found:
                added[case.number] = found
        except GradcliError as exc:
            output.warn(f"--update: case {case.name!r} left as it is: {exc.message}")
    new_text = text
    for number, found in added.items():
        new_text = insert_expectations(new_text, number, found)
    if not added:
        sys.stderr.write(f"--update: nothing to add to {path}\n")
        return cases, chosen
    try:
        updated = parse_cases(new_text, path)
    except UsageError as exc:
        raise UsageError(
            f"--update could not add the expect entries safely ({exc.message}); {path} is unchanged"
        ) from None
    for number, found in added.items():
        if any(updated[number - 1].fields.get("expect", {}).get(k) != v for k, v in found.items()):
            raise UsageError(f"--update could not add case {number}'s expect entries safely; {path} is unchanged")
    write_atomic(path, new_text)
    n = sum(len(f) for f in added.values())
    sys.stderr.write(f"--update: {n} expect entr{'y' if n == 1 else 'ies'} added to {len(added)} case(s) of {path}\n")
    numbers = {c.number for c in chosen}
    return updated, [c for c in updated if c.number in numbers]


def derivative_texts(case: Any, names: list[str], sympy_timeout: float) -> dict[str, str]:
    """The derivative of the case's program with respect to each name, as text: what ``gradcli diff``
    prints for it (its one formatting function, so the two always agree)."""

    program = case_program(case)
    if not program.symbolic:
        raise UsageError("a Python function has no symbolic form: write its expect by hand")
    shapes = {name: value.shape for name, value in case_values(case).items()}
    try:
        with time_limit(sympy_timeout):
            derivatives = symbolic_derivatives(program, names, shapes)
            # in gradcli's language, expanded into the variables: what diff prints for an expression
            texts = {name: formatted(d, "language") for name, d in derivatives.items()}
    except Skipped as exc:
        raise UsageError(str(exc)) from None
    return {name: text for name, text in texts.items() if _reads_back(case, name, text, shapes[name])}


def _reads_back(case: Any, name: str, formula: str, shape: tuple[int, ...]) -> bool:
    """Whether ``check`` can read the derivative text back as an ``expect`` formula at the case's point
    (an entry it could not would only turn the case into an ERROR): else a warning, and it is left out."""

    try:
        with np.errstate(all="ignore"):
            outputs = evaluate(parse(formula), case_values(case)).outputs
        if len(outputs) == 1:
            np.broadcast_to(np.asarray(outputs[0].array), shape)
            return True
    except (GradcliError, ValueError):
        pass
    output.warn(
        f"--update: case {case.name!r}: diff's derivative for {name} ({formula}) is not a formula check reads back; left out"
    )
    return False
