"""Command bodies: read the inputs, call the library, format what it returns."""

from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np

from ..errors import GradcliError, UsageError, printable
from ..lang.compute import (
    evaluate_text,
    explain_derivatives,
    formatted,
    program_hessian,
    program_jacobian,
    program_value,
    quick_texts,
    unseen_derivative,
    unseen_in_gradient,
    value_and_grad,
)
from ..lang.functions import FUNCTIONS
from ..lang.values import NAME_CHARS
from ..ops.operators import COMPARISONS, INFIX
from ..text import plain_table, shown_count, summarized
from . import output
from .inputs import CASES, Given, given_value
from .reading import Read, read_program
from .report import reported, warn_later


def _point_text(values: dict[str, Any]) -> str:
    return ", ".join(f"{k} = {output.shown(v)}" for k, v in values.items())


def evaluate(given: Given) -> None:
    """``gradcli eval``: the value and gradient at the ``--at`` point, or at every row of ``--points``."""
    with reported():
        output.use_digits(given.digits, "json" if given.as_json else None)
        program, values = read = read_program(given)
        scale = {
            "out": given.out,
            "chunk_rows": given.chunk_rows,
            "keep_columns": given.keep_columns,
            "dask": given.dask,
        }
        _points_only(given.points, scale)
        if given.points is not None:
            _evaluate_points(program, given.points, values, read.wrt, given.as_json, given.seed, scale)
            _framework(program)  # (how a framework made the numbers, said on stderr)
            return
        seed = given.seed
        result = value_and_grad(program, values, read.wrt or None, seed)
        unseen = unseen_in_gradient(program, values, result)
        if unseen:
            output.warn(unseen)
        if result.evaluation.nonfinite:
            output.warn(f"non-finite value: {result.evaluation.nonfinite}")
        elif result.backward_nonfinite:
            output.warn(f"non-finite gradient: {result.backward_nonfinite}")
        framework = _framework(program)
        if given.as_json:
            document = {"value": result.value, "gradient": result.gradient, **framework}
            output.print_json({**document, **_unused(program, values, result.gradient)})
            return
        shown = {"value": result.value, **{f"d/d{name}": g for name, g in result.gradient.items()}}
        rows = [(label, _with_shape(v)) for label, v in shown.items()]
        what = f"v^T J with v = {seed}" if seed is not None else "at"
        detail = f"{what} {_point_text(values)}" if seed is None else f"{what}, at {_point_text(values)}"
        detail += _framework_text(program)
        output.print_rows(rows, heading=_source_text(program, given.expression), detail=detail, note=_left_out(shown))


def _framework(program: Any) -> dict[str, Any]:
    """JSON's ``framework`` key: whose numbers these are, for a function computing with PyTorch or JAX;
    ``framework_notes`` (also said on stderr) where the framework made them not as asked (another mode)."""
    if not program.framework:
        return {}
    for note in program.notes:
        warn_later(note)
    notes = {"framework_notes": list(program.notes)} if program.notes else {}
    return {"framework": program.framework, "framework_version": program.adapter.version, **notes}


def _framework_text(program: Any) -> str:
    """``, computed by PyTorch 2.13.0`` after a heading, for a function computing with a framework."""
    return f", computed by {program.title}" if program.framework else ""


def _points_only(points: str | None, scale: dict[str, Any] | None) -> None:
    """``-o``, ``--chunk-rows``, ``--keep-columns`` and ``--dask`` go with ``--points``."""

    given = [k for k, v in (scale or {}).items() if v not in (None, False)]
    if points is None and given:
        option = {"out": "-o", "chunk_rows": "--chunk-rows", "keep_columns": "--keep-columns", "dask": "--dask"}
        raise UsageError(f"{option[given[0]]} goes with --points DATA")


def _unused(program: Any, values: dict[str, Any], shown: Any) -> dict[str, list[str]]:
    """JSON's ``unused``: the ``--at`` names the program does not use, which have no derivative in
    the document (nothing, when they all do)."""
    names = [name for name in values if name not in program.variables and name not in shown]
    return {"unused": names} if names else {}


def _with_shape(value: Any) -> str:
    text = output.shown(value)
    return text if np.ndim(value) == 0 else f"{text}   ({output.shape_text(value)})"


def _left_out(shown: dict[str, Any]) -> str | None:
    """On a terminal, the line that says which arrays were abbreviated and how to see them whole."""

    if not output.terminal():
        return None
    cut = [f"{shown_count(v):,} of {np.size(v):,} elements of {label}" for label, v in shown.items() if summarized(v)]
    return output.show_all_hint(", ".join(cut)) if cut else None


def _source_text(program: Any, expression: str | None) -> str:
    """The heading: the program's text on one line, controls (ESC in a comment, say) escaped."""

    if program.text is not None:
        text = " ".join(program.text.split())
        return printable(text if len(text) <= 60 else text[:57] + "...")
    return printable(expression or program.origin)


def _evaluate_points(
    program: Any,
    path: str,
    values: dict[str, Any],
    wrt: list[str],
    as_json: bool,
    seed: str | None = None,
    scale: dict[str, Any] | None = None,
) -> None:
    """Every row of a data set as its own point (per-point semantics, batched a chunk at a time);
    ``scale``: ``--points`` options (``out``, ``chunk_rows``, ``keep_columns``, ``dask``)."""
    options = dict(scale or {})
    dask = options.pop("dask", None)
    if dask is not None:
        from .points.distributed import evaluate_on_dask  # lazy: start-up, only --points --dask needs Dask

        evaluate_on_dask(program, path, values, wrt, seed, dask, **options)
        return
    from .points.run import evaluate_points_file  # lazy: start-up, only --points reads a data set

    evaluate_points_file(program, path, values, wrt, as_json, seed, **options)


POINTS_CELLS = 2_000_000  # numbers formatted at once by --points


def differentiate(given: Given) -> None:
    """``gradcli diff``: SymPy's derivatives, in gradcli's language (or LaTeX, or SymPy's text); with
    ``--steps`` the derivation a teacher writes (cli/steps.py)."""
    with reported():
        if given.steps:
            if given.sympy:
                raise UsageError("--steps writes the derivation in gradcli's language; --sympy does not apply")
            from .steps import show  # lazy: start-up, only diff --steps explains a derivation

            show(given)
            return
        if given.latex and given.sympy:
            raise UsageError("give --latex or --sympy, not both")
        form = "latex" if given.latex else "sympy" if given.sympy else "language"
        read = read_program(given)
        quick = (
            quick_texts(read.program, read.wrt) if form == "language" and not (read.values or given.as_json) else None
        )
        if quick is not None:  # (SymEngine's derivative, printed as SymPy's road prints it: no SymPy import)
            output.print_rows(
                [(f"d/d{n}", t) for n, t in quick.items()], heading=_source_text(read.program, given.expression)
            )
            return
        explanation, text, found, extra = _symbolic(given, read, form)
        found = _undefined_where_not_finite(read, explanation, found)
        steps = [row.name for row in explanation.rows if row.step]
        if given.as_json:
            document: dict[str, Any] = {"derivative": {n: t for n, t in text.items() if n not in steps}}
            if steps:
                document["steps"] = {n: text[n] for n in steps}
                document["statements"] = explanation.statements
            document.update(extra)
            document.update(_unused(read.program, read.values, text))
            output.print_json({**document, **_json_values(found)})
            return
        if given.latex:
            _print_latex(explanation, text, found)
            return
        rows = []
        for row in explanation.rows:
            shown = text[row.name]
            if row.name in found and found[row.name][0] != f"= {shown}":
                shown += f" {found[row.name][0]}"
            rows.append((explanation.label(row), shown))
        output.print_rows(rows, heading=_source_text(read.program, given.expression))


def _symbolic(given: Given, read: Read, form: str) -> tuple[Any, dict[str, str], dict, dict[str, Any]]:
    """SymPy's derivatives within ``--sympy-timeout``: the explanation, each derivative's text in
    ``form``, its value at the point (``_values_at``) and the texts only JSON shows; SymPy's own
    warnings said as one line, SymPy's own failure as the input's error (check skips SymPy for it)."""
    from ..check.symbolic import Skipped, time_limit  # lazy: start-up, SymPy
    from ..lang.symbolic import exact_point, warning_text  # lazy: start-up, SymPy
    from .progress import working  # lazy: start-up, threads

    shapes = {name: np.shape(v) for name, v in read.values.items()}
    try:
        # the display outermost: the time limit is over before the display stops
        with (
            working("running SymPy", quiet=given.as_json),
            time_limit(given.sympy_timeout),
            warnings.catch_warnings(record=True) as caught,
        ):
            warnings.simplefilter("always")
            explanation = explain_derivatives(read.program, read.wrt or None, shapes)
            text = {row.name: formatted(row.derivative, form) for row in explanation.rows}
            point = exact_point(given.at, read.values)
            found = _values_at(explanation, point, read.values, text if form == "language" else None)
            extra = _json_texts(explanation, form, given) if given.as_json else {}
        said = warning_text(caught)
        if said:
            output.warn(said)
    except Skipped as exc:
        raise UsageError(str(exc)) from None
    except (GradcliError, RecursionError, MemoryError):
        raise
    except Exception as exc:  # SymPy itself failed (check skips SymPy for the same): the input's fault
        raise UsageError(f"SymPy could not differentiate this expression ({type(exc).__name__}: {exc})") from None
    return explanation, text, found, extra


def _json_texts(explanation: Any, form: str, given: Given) -> dict[str, Any]:
    """diff --json's texts beside ``derivative``: the language's text too when that is LaTeX, and each
    derivative of a program with its statements expanded."""
    extra: dict[str, Any] = {}
    if given.latex:
        extra["derivative_text"] = {r.name: formatted(r.derivative) for r in explanation.rows if not r.step}
    if explanation.statements:
        extra["expanded"] = {r.name: formatted(r.expanded, form) for r in explanation.rows if not r.step}
    return extra


def _json_values(found: dict[str, Any]) -> dict[str, Any]:
    """diff --json's ``value`` (and ``value_exact`` where SymPy's value is a rational number)."""
    if not found:
        return {}
    document = {"value": {n: v[1] for n, v in found.items()}}
    exact = {n: v[2] for n, v in found.items() if v[2] is not None}
    if exact:
        document["value_exact"] = exact
    return document


def _value_at(value: Any) -> tuple[str, Any, Any] | None:
    """A derivative at the point: (text after the derivative, JSON number(s), exact text or None).
    Exact (``= 2/9``) when the value is a rational number, else ``≈`` its float; None while a
    variable has no value."""

    from ..lang.symbolic import as_expr  # lazy: start-up, SymPy

    flat = [as_expr(v) for v in np.asarray(value, dtype=object).reshape(-1)]
    if not all(v.is_number for v in flat):
        return None
    shape = np.shape(value)
    if all(v.is_Rational for v in flat):
        texts = [str(v.p) if v.q == 1 else f"{v.p}/{v.q}" for v in flat]
        numbers = [int(v.p) if v.q == 1 else float(v) for v in flat]
        exact = texts[0] if not shape else np.array(texts, dtype=object).reshape(shape).tolist()
        if not shape:
            return f"= {texts[0]}", numbers[0], exact
        nested = np.array(texts, dtype=object).reshape(shape).tolist()
        return f"= {_nested_text(nested)}", np.array(numbers, dtype=object).reshape(shape).tolist(), exact
    floats = np.array([complex(v.evalf(17)) for v in flat])
    real = floats.real if np.all(floats.imag == 0) else np.full(floats.shape, np.nan)
    array = real.reshape(shape)
    return f"≈ {output.shown(array)}", array if shape else array.item(), None


def _values_at(explanation: Any, point: dict[str, Any], values: dict[str, Any], text: dict[str, str] | None) -> dict:
    """Each derivative's value at the point (``_value_at``), read back from its ``text`` in the
    language where SymPy states no finite number; none without a point."""
    found = {row.name: _value_at(explanation.at(row.derivative, point)) for row in explanation.rows}
    if text is not None:
        found = {name: _read_back(text[name], values, v) for name, v in found.items()}
    return {name: v for name, v in found.items() if v is not None and values}


def _undefined_where_not_finite(read: Read, explanation: Any, found: dict[str, Any]) -> dict[str, Any]:
    """At a point where the function itself is not finite (as ``eval`` computes it: ``log(abs(x))``
    at 0 is -inf), it has no derivative: a finite value SymPy's formula gives there (0) is stated as
    nan, as eval's gradient is, and a warning says why. An infinite value stays (``1/x`` at 0)."""
    value = program_value(read.program, read.values) if found else None
    if value is None or np.isfinite(value).all():
        return found
    said = []
    for row in explanation.rows:
        text, number, _ = found.get(row.name, (None, np.nan, None))
        numbers = np.asarray(number, dtype=np.float64)
        if np.isfinite(numbers).any():
            said.append(f"{explanation.label(row)} is stated as nan, not the formula's {text.split(' ', 1)[1]}")
            numbers = np.where(np.isfinite(numbers), np.nan, numbers)
            found[row.name] = f"= {output.shown(numbers)}", numbers.tolist() if numbers.ndim else numbers.item(), None
    if said:
        output.warn(
            f"the function is {output.shown(value)} at {_point_text(read.values)} and has no derivative "
            f"where it is not finite: {'; '.join(said)}"
        )
    return found


def _read_back(text: str, values: dict[str, Any], found: Any) -> Any:
    """Where SymPy's value is no finite real number (``1/(2*sqrt(0))`` is its complex infinity), the
    value the printed derivative has when ``eval`` reads it back: the one number ``diff`` may state."""
    if found is None or np.isfinite(np.asarray(found[1], dtype=float)).all():
        return found

    numbers = evaluate_text(text, values)
    if numbers is None or np.shape(numbers) != np.shape(found[1]):
        return found
    return f"= {output.shown(numbers)}", numbers if np.ndim(numbers) else numbers.item(), None


def _latex_number(text: str) -> str:
    """``4/3`` as ``\\frac{4}{3}`` (an exact array stays as printed)."""
    top, bar, bottom = text.partition("/")
    if bar and top.lstrip("-").isdigit() and bottom.isdigit():
        sign = "-" if top.startswith("-") else ""
        return rf"{sign}\frac{{{top.lstrip('-')}}}{{{bottom}}}"
    return text


def _nested_text(nested: Any) -> str:
    return "[" + ", ".join(_nested_text(p) for p in nested) + "]" if isinstance(nested, list) else str(nested)


def _print_latex(explanation: Any, text: dict[str, str], found: dict[str, Any]) -> None:
    """Pure LaTeX: the derivative alone for one variable, else one ``\\frac{\\partial f}{\\partial x} = ...`` line each."""
    import sympy as sp

    lines = []
    for row in explanation.rows:
        line = text[row.name]
        value = found.get(row.name)
        if value is not None and value[0] != f"= {text[row.name]}":
            how, number = value[0].split(" ", 1)
            line += (" = " if how == "=" else r" \approx ") + (_latex_number(number) if how == "=" else number)
        if len(explanation.rows) > 1:
            top, bottom = sp.latex(sp.Symbol(explanation.output or "f")), sp.latex(sp.Symbol(row.name))
            line = rf"\frac{{\partial {top}}}{{\partial {bottom}}} = {line}"
        lines.append(line)
    sys.stdout.write("\n".join(lines) + "\n")


def list_functions(name: str | None, as_json: bool) -> None:
    """``gradcli ops``: every function by group; ``gradcli ops NAME``: one in full."""
    with reported():
        from ..lang.catalog import arity_text, catalog, describe, lookup  # lazy: start-up, only ops reads it

        if name is not None:
            _show_function(describe(lookup(name)), as_json)
            return
        entries = catalog()
        if as_json:
            operators = [op for op, row in INFIX.items() if op == row.symbol] + sorted(COMPARISONS)
            output.print_json({"ops": entries, "operators": operators})
            return
        sections: dict[str, list[list[str]]] = {}
        for e in entries:
            row = [e["name"], arity_text(FUNCTIONS[e["name"]]), e["differentiates"], "yes" if e["sympy"] else "none"]
            sections.setdefault(e["group"], []).append([*row, e["derivative"], e["doc"]])
        if output.rich_wanted():  # on a terminal the list leaves the doc to `gradcli ops NAME`
            sections = {group: [r[:-1] for r in rows] for group, rows in sections.items()}
            header = ["function", "arity", "gradient", "SymPy", "derivative"]
        else:
            header = ["function", "arity", "gradient", "SymPy", "derivative", "what it computes"]
        output.print_sections(header, list(sections.items()))


def _show_function(entry: dict[str, Any], as_json: bool) -> None:
    if as_json:
        output.print_json(entry)
        return
    rows = [("function", entry["name"]), ("what it computes", entry["doc"]), ("group", entry["group"])]
    rows += [("arity", str(entry["arity"]).strip("[]")), ("gradient", entry["differentiates"])]
    rows += [(f"d/d{k}", v) for k, v in entry["derivatives"].items()] or [("derivative", entry["derivative"])]
    sympy = "yes" if entry["sympy"] else "none (gradcli diff and check's sympy method cannot use it)"
    analytic = "yes" if entry["complex_analytic"] else "no (check's complex step is not used through it)"
    rows += [("SymPy", sympy), ("complex-analytic", analytic)]
    if "backward" in entry:
        rows.append(("backward", entry["backward"]))
    output.print_rows(rows)


def jacobian(given: Given) -> None:
    """``gradcli jacobian``: every output's derivative by every input element, forward or reverse."""
    with reported():
        if given.mode not in ("auto", "forward", "reverse"):
            raise UsageError(f"--mode {given.mode}: use auto, forward or reverse")
        read, kind, result = _matrix(
            given, "Jacobian", lambda read, whole: program_jacobian(*read, read.wrt or None, given.mode, whole)
        )
        program, values = read
        unseen = unseen_derivative(program, values, result.names or [], result.matrix, labels=result.rows)
        if unseen:
            output.warn(unseen)
        if result.nonfinite:  # said after the matrix, or not at all beside an error
            warn_later(result.nonfinite)
        if result.note:  # (reverse mode's numbers where forward mode was asked for and cannot run)
            warn_later(result.note)
        document = {"outputs": result.rows, "inputs": result.columns, "jacobian": result.matrix,
                    "value": result.value, "mode": result.plan.mode, **({"note": result.note} if result.note else {}),
                    **_unused(program, values, result.names), **_framework(program)}  # fmt: skip
        title = f"Jacobian of {_source_text(program, given.expression)}{_framework_text(program)}"
        _print_matrix_result(result, document, title, kind, given.explain, given.out)


def hessian(given: Given) -> None:
    """``gradcli hessian``: the second derivatives of a scalar program (forward-over-reverse)."""
    with reported():
        read, kind, result = _matrix(
            given, "Hessian", lambda read, whole: program_hessian(*read, read.wrt or None, whole)
        )
        program, values = read
        unseen = unseen_derivative(program, values, result.names or [], np.asarray(result.gradient)[None, :])
        if unseen:
            output.warn(unseen)
        document = {"inputs": result.columns, "hessian": result.matrix, "value": result.value,
                    "gradient": _by_variable(result.gradient, result.names or [], values),
                    **_unused(program, values, result.names), **_framework(program)}  # fmt: skip
        title = f"Hessian of {_source_text(program, given.expression)}{_framework_text(program)}"
        _print_matrix_result(result, document, title, kind, given.explain, given.out)


def _matrix(given: Given, what: str, compute: Any) -> tuple[Read, str, Any]:
    """A Jacobian's or Hessian's first steps: the format it is written in, the program and point,
    and ``compute(read, whole)`` under a spinner (``whole``: written as one JSON document)."""
    kind = _matrix_format(given.fmt, given.out, given.as_json)
    output.use_digits(given.digits, kind)
    read = read_program(given, given.out)
    from .progress import working  # lazy: start-up, threads

    with working(f"computing the {what}", quiet=given.as_json):
        result = compute(read, _whole(kind))
    return read, kind, result


def _by_variable(flat: Any, names: list[str], values: dict[str, Any]) -> dict[str, Any]:
    """``{var: number or nested list}`` (eval's ``gradient``) from one flat vector over the variables' elements."""
    found: dict[str, Any] = {}
    start = 0
    for name in names:
        shape = np.shape(values[name])
        size = int(np.prod(shape))
        found[name] = np.asarray(flat[start : start + size], dtype=np.float64).reshape(shape)
        start += size
    return found


MATRIX_FORMATS = ("text", "csv", "npy", "json")
MATRIX_EXTENSIONS = {".csv": "csv", ".npy": "npy", ".json": "json", ".txt": "text"}


def _matrix_format(fmt: str | None, out: str | None, as_json: bool) -> str:
    """What a Jacobian or Hessian is written as: ``--format``, else -o's extension, else JSON or a table."""
    from pathlib import Path

    if fmt is not None and fmt not in MATRIX_FORMATS:
        raise UsageError(f"--format {fmt}: use one of {', '.join(MATRIX_FORMATS)}")
    by_name = None
    if out is not None:
        suffix = Path(out).suffix.lower()
        by_name = MATRIX_EXTENSIONS.get(suffix)
        if by_name is None and fmt is None:
            known = ", ".join(MATRIX_EXTENSIONS)
            raise UsageError(
                f"-o {out}: cannot tell the format from '{suffix or 'no extension'}'; use {known} or --format"
            )
    kind = fmt or by_name or ("json" if as_json else "text")
    if as_json and kind != "json":
        raise UsageError(f"--json and --format {kind} ask for two formats: give one")
    return kind


def _whole(kind: str) -> bool:
    """The matrix is written as one JSON document (the memory estimate counts its text)."""
    return kind == "json"


def _print_matrix_result(
    result: Any, document: dict[str, Any], title: str, kind: str, explain: bool, out: str | None = None
) -> None:
    """A Jacobian or Hessian: its JSON ``document``, CSV, .npy or the labelled matrix; with how it was computed."""
    if kind == "text" and out is None:
        output.print_matrix(result.rows, result.columns, result.matrix, title=title)
        if explain:
            sys.stdout.write(result.plan.explain() + "\n")
        return
    if explain:
        document["explain"] = result.plan.explain()
    if kind == "json":
        data: str | bytes = output.json_text(document)
    elif kind == "csv":
        data = _csv_text(result.columns, result.matrix)
    elif kind == "npy":
        data = _npy_bytes(result.matrix)
    else:  # text to a file: the plain table, every element
        data = output.matrix_text(result.rows, result.columns, result.matrix)
        if explain:
            data += result.plan.explain() + "\n"
    if out is not None:
        from ..files import write_atomic  # lazy: start-up, eval writes no file here

        write_atomic(out, data)
        shape = np.shape(result.matrix)
        output.wrote(out, f"{shape[0]} x {shape[1]}")
        if explain and kind in ("csv", "npy"):
            sys.stderr.write(result.plan.explain() + "\n")
        return
    if isinstance(data, bytes):
        output.write_binary(data, "--format npy")
    else:
        sys.stdout.write(data)
    if explain and kind in ("csv", "npy"):
        sys.stderr.write(result.plan.explain() + "\n")


def _csv_text(columns: list[str], matrix: Any) -> str:
    """The matrix as CSV, a row per line, every digit (``repr``), nan/inf as NumPy and pandas read them.
    The header is a comment (``# x,y``): numpy.loadtxt skips it, pandas.read_csv takes it as the column
    names. Element labels lose their commas there (``x[0,1]`` is ``x[0][1]``) so it splits as the rows do."""
    header = "# " + ",".join(label.replace(",", "][") for label in columns)
    m = np.asarray(matrix, dtype=np.float64)
    lines = [header, *(",".join(output.float_texts(row)) for row in m)]
    return "\n".join(lines) + "\n"


def _npy_bytes(matrix: Any) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, np.asarray(matrix, dtype=np.float64), allow_pickle=False)
    return buffer.getvalue()


def check(given: Given) -> None:
    """``gradcli check``: exit 0 when every method that ran agrees with autograd, 1 on a mismatch or
    a non-finite value."""
    if any(given_value(given, row) for row in CASES):
        from .cases import check_cases  # lazy: start-up, only check --cases reads a TOML file of cases

        check_cases(given)
        return
    with reported():
        from ..check import check as run_check  # lazy: start-up, eval checks nothing
        from ..check.directions import directions_asked  # lazy: start-up, as check

        output.use_digits(given.digits, "json" if given.as_json else None)
        program, values = read = read_program(given)
        formulas = _expectations(given.expect)
        directions = directions_asked(given.directions)
        if given.points is not None:
            if directions is not None:
                raise UsageError("--directions goes with --at (one point), not --points")
            options = (given.method, given.rtol, given.atol, given.seed, formulas, given.as_json, given.chunk_rows)
            _check_points(program, given.points, values, read.wrt, *options)
        locate = None
        if given.blame:
            from ..render.frameworks import blame_locator  # lazy: start-up, eval draws nothing

            locate = blame_locator(program, values, read.wrt or None)
        from .progress import working  # lazy: start-up, threads

        what = "checking the gradient and every node's derivative (--blame)" if given.blame else "checking the gradient"
        with working(what, quiet=given.as_json):
            result = run_check(
                program, values, read.wrt or None, given.method, given.rtol, given.atol, formulas, given.seed,
                given.blame, given.sympy_timeout, locate, directions,
            )  # fmt: skip
        for said in result.warnings:
            output.warn(said)
        if given.as_json:
            output.print_json(result.to_dict())
        else:
            _print_check(result, _source_text(program, given.expression), _point_text(values))
        if not result.ok:
            raise SystemExit(1)


def why(given: Given) -> None:
    """``gradcli why``: each input's gradient that is None, zero or not finite, and its cause (exit 0)."""
    with reported():
        from ..check.why import why as diagnose  # lazy: start-up, eval diagnoses nothing

        program, values = read = read_program(given)
        found = diagnose(program, values, read.wrt or None)
        if given.as_json:
            output.print_json(found.to_dict())
        else:
            sys.stdout.write(found.text() + "\n")


def plot(given: Given) -> None:
    """``gradcli plot`` (cli/plot.py)."""
    from .plot import plot as draw  # lazy: start-up, only plot loads the plotting code

    draw(given)


def _check_points(program: Any, points: str, values: dict[str, Any], wrt: list[str], *options: Any) -> None:
    """``check --points DATA``: every point checked, the numeric methods batched; exit 1 on a mismatch."""
    from .points.check import check_points_file  # lazy: start-up, eval checks nothing
    from .progress import working  # lazy: start-up, threads

    with working(f"checking the gradient at the points of {output.shown_path(points)}", quiet=options[-2]):
        ok = check_points_file(program, points, values, wrt, *options)
    raise SystemExit(0 if ok else 1)


def _expectations(items: list[str]) -> dict[str, str]:
    """``--expect x="2*x*y"`` (repeatable) -> ``{"x": "2*x*y"}``; the formula may itself hold '='."""

    formulas: dict[str, str] = {}
    for item in items:
        name, eq, formula = item.partition("=")
        name = name.strip()
        if not eq or not name or not formula.strip():
            raise UsageError(f"--expect expects VAR=EXPR (the derivative with respect to VAR), got {item!r}")
        if not NAME_CHARS(name):
            raise UsageError(f"--expect {item!r}: {name!r} is not a variable name")
        if name in formulas:
            raise UsageError(f"--expect {name} is given twice")
        formulas[name] = formula
    return formulas


def _print_check(result: Any, heading: str, point: str) -> None:
    """The table (element | autograd | each method | abs err | rel err | ok), the notes, the verdict."""
    header, body, lines, note = result.report(output.digits())
    _write_check(result, heading, point, header, body, lines, note)


def _write_check(
    result: Any, heading: str, point: str, header: list[str], body: list[list[str]], lines: list[str], note: str | None
) -> None:
    verdict = result.verdict()
    if output.rich_wanted() and output.table_fits([header, *body]):
        _show_check(result.ok, heading, point, header, body, [*lines, verdict], note)
        return
    header[-1] = "ok"
    text = plain_table(header, body)
    if output.too_wide(text):  # a terminal too narrow for the columns: a record per element
        text = output.expanded(header, body)
    if note:
        text.append(f"({note})")
    sys.stdout.write("\n".join(text + output.wrapped([*lines, verdict])) + "\n")


def _show_check(
    ok: bool, heading: str, point: str, header: list[str], body: list[list[str]], lines: list[str], note: str | None
) -> None:
    """The check's table on a terminal, in colour: each element's mark, the notes, the verdict (the last line)."""
    from rich.table import Table
    from rich.text import Text

    console = output.console()
    title = Text(heading, style="bold")
    title.append(f"   at {point}" if point else "", style="dim")
    console.print(title)
    table = Table(caption=Text(note) if note else None)
    for i, name in enumerate(header):
        table.add_column(name, justify="left" if i == 0 else "right", style="bold cyan" if i == 0 else None)
    good, bad = ("✓", "✗") if output.can_show("✓✗") else ("ok", "MISMATCH")
    for cells in body:
        styled = {"ok": (good, "green"), "kink": ("kink", "yellow"), "-": ("-", "")}.get(cells[-1], (bad, "bold red"))
        table.add_row(*(Text(c) for c in cells[:-1]), Text(*styled))
    console.print(table)
    for line in lines[:-1]:
        console.print(Text(line, style="dim" if "skipped" in line or "agree" in line else "yellow"))
    console.print(Text(lines[-1], style="bold green" if ok else "bold red"))
