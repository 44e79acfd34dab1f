"""Command bodies: read the inputs, call the library, format what it returns."""

from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np

from . import output, reported


def _point_text(values: dict[str, Any]) -> str:
    return ", ".join(f"{k} = {output.array(v)}" for k, v in values.items())


def evaluate(
    expression: str | None,
    file: str | None,
    at: list[str],
    wrt: list[str],
    as_json: bool,
    seed: str | None,
    points: str | None,
    python: str | None = None,
) -> None:
    with reported():
        from ..lang.program import load, unseen_in_gradient, value_and_grad
        from ..lang.values import assignments, names_list

        program = load(expression, file, python)
        values = assignments(at)
        if points is not None:
            _evaluate_points(program, points, values, names_list(wrt), as_json, seed)
            return
        result = value_and_grad(program, values, names_list(wrt) or None, seed)
        unseen = unseen_in_gradient(program, values, result)
        if unseen:
            output.warn(unseen)
        if result.evaluation.nonfinite:
            output.warn(f"non-finite value: {result.evaluation.nonfinite}")
        elif result.backward_nonfinite:
            output.warn(f"non-finite gradient: {result.backward_nonfinite}")
        if as_json:
            output.print_json({"value": result.value, "gradient": result.gradient})
            return
        rows = [("value", _with_shape(result.value))]
        rows += [(f"d/d{name}", _with_shape(g)) for name, g in result.gradient.items()]
        what = f"v^T J with v = {seed}" if seed is not None else "at"
        detail = f"{what} {_point_text(values)}" if seed is None else f"{what}, at {_point_text(values)}"
        output.print_rows(rows, heading=_source_text(program, expression), detail=detail)


def _with_shape(value: Any) -> str:
    text = output.array(value)
    return text if np.ndim(value) == 0 else f"{text}   ({output.shape_text(value)})"


def _source_text(program: Any, expression: str | None) -> str:
    """The heading: the program's text on one line, controls (ESC in a comment, say) escaped."""
    from ..errors import printable

    if program.tree is not None:
        text = " ".join(program.tree.text.split())
        return printable(text if len(text) <= 60 else text[:57] + "...")
    return printable(expression or program.origin)


def _evaluate_points(
    program: Any, path: str, values: dict[str, Any], wrt: list[str], as_json: bool, seed: str | None = None
) -> None:
    """Every row of a CSV file as its own point (per-point semantics, computed in one batched pass)."""
    from ..lang.points import evaluate_points
    from ..lang.program import element_labels
    from ..lang.values import read_points_with_rows

    columns, row_texts = read_points_with_rows(path)
    names, result = evaluate_points(program, columns, values, wrt or None, seed)
    if result.warning:
        output.warn(result.warning)
    n = len(result.value)
    arrays = [result.value, *(result.gradient[name] for name in names)]
    if not as_json:
        header = [*columns, *element_labels("value", result.value.shape[1:])]
        for name in names:
            header += element_labels(f"grad_{name}", result.gradient[name].shape[1:])
        sys.stdout.write(",".join(header) + "\n")
    # in blocks of rows: the texts of a million rows of wide gradients would not fit in memory at once
    block = max(1, POINTS_CELLS // sum(int(np.prod(a.shape[1:])) + 1 for a in arrays))
    keys = [f'"{name}": ' for name in names]
    for start in range(0, n, block):
        stop = min(n, start + block)
        texts = [_element_texts(a[start:stop]) for a in arrays]
        if as_json:  # JSON lines, written without json.dumps: a million rows in a few seconds
            value_json, *grads_json = [_nested(t, a.shape[1:], stop - start) for t, a in zip(texts, arrays)]
            lines = (
                '{"value": ' + v + ', "gradient": {' + ", ".join(k + g[i] for k, g in zip(keys, grads_json)) + "}}"
                for i, v in enumerate(value_json)
            )
        else:
            if row_texts is not None:
                point_texts = [row_texts[start:stop]]
            else:
                point_texts = [_texts(c[start:stop]) for c in columns.values()]
            lines = (",".join(r) for r in zip(*point_texts, *(t for element in texts for t in element)))
        sys.stdout.write("\n".join(lines) + "\n")


POINTS_CELLS = 2_000_000  # numbers formatted at once by --points


def _element_texts(array: np.ndarray) -> list[list[str]]:
    """One list of texts per element of a point's value (C order), each with a text per point."""
    flat = np.asarray(array, dtype=np.float64).reshape(len(array), -1)
    return [_texts(flat[:, j]) for j in range(flat.shape[1])]


def _nested(columns: list[list[str]], shape: tuple[int, ...], n: int) -> list[str]:
    """JSON text of each point's value of ``shape``, from its elements' texts: numbers, nested lists."""
    import json

    if not shape:
        return _json_numbers(columns[0])
    if 0 in shape:
        return [json.dumps(np.zeros(shape).tolist())] * n
    parts = [_json_numbers(c) for c in columns]
    for size in reversed(shape):
        parts = [
            ["[" + ", ".join(items) + "]" for items in zip(*parts[k : k + size])] for k in range(0, len(parts), size)
        ]
    return parts[0]


def _texts(column: Any) -> list[str]:
    """Shortest round-trip text of every float (Python's repr: faster than NumPy's astype(str))."""
    return list(map(repr, np.asarray(column, dtype=np.float64).tolist()))


def _json_numbers(texts: list[str]) -> list[str]:
    return [t if t not in ("nan", "inf", "-inf") else f'"{t}"' for t in texts]


def differentiate(
    expression: str | None,
    file: str | None,
    at: list[str],
    wrt: list[str],
    as_json: bool,
    latex: bool,
    timeout: float = 30.0,
) -> None:
    with reported():
        import sympy as sp

        from ..check.symbolic import Skipped, time_limit
        from ..errors import GradcliError, UsageError
        from ..lang.program import load, symbolic_derivatives
        from ..lang.symbolic import warning_text
        from ..lang.values import assignments, names_list

        if not timeout > 0:
            raise UsageError(f"--sympy-timeout must be a number of seconds > 0, not {timeout!r}")
        program = load(expression, file)
        values = assignments(at)
        shapes = {name: np.shape(v) for name, v in values.items()}
        try:
            with time_limit(timeout), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                derivatives = symbolic_derivatives(program, names_list(wrt) or None, shapes)
                text = {name: _sympy_text(d, sp.latex if latex else sp.sstr) for name, d in derivatives.items()}
            said = warning_text(caught)
            if said:
                output.warn(said)
        except Skipped as exc:
            raise UsageError(str(exc)) from None
        except (GradcliError, RecursionError, MemoryError):
            raise
        except Exception as exc:  # SymPy itself failed (check skips SymPy for the same): the input's fault
            raise UsageError(f"SymPy could not differentiate this expression ({type(exc).__name__}: {exc})") from None
        if as_json:
            document: dict[str, Any] = {"derivative": text}
            if latex:
                with time_limit(timeout):
                    document["derivative_text"] = {n: _sympy_text(d, sp.sstr) for n, d in derivatives.items()}
            output.print_json(document)
            return
        output.print_rows([(f"d/d{name}", t) for name, t in text.items()], heading=_source_text(program, expression))


def _sympy_text(expr: Any, printer: Any) -> str:
    if isinstance(expr, np.ndarray):
        return "[" + ", ".join(printer(e) for e in expr.reshape(-1)) + "]" if expr.ndim == 1 else printer(expr.tolist())
    return printer(expr)


def list_functions(as_json: bool) -> None:
    with reported():
        from ..lang.functions import FUNCTIONS
        from ..ops.operators import COMPARISONS, INFIX

        entries = []
        for f in FUNCTIONS.values():
            entry = {
                "name": f.name,
                "arity": f.arities[0] if len(f.arities) == 1 else list(f.arities),
                "derivative": f.derivative,
                "doc": f.doc,
            }
            if f.primitive is not None:
                entry["backward"] = f.primitive.node_name()
            entries.append(entry)
        operators = [{"name": op, "arity": 2, "kind": "operator"} for op, row in INFIX.items() if op == row.symbol]
        operators += [{"name": op, "arity": 2, "kind": "operator"} for op in sorted(COMPARISONS)]
        if as_json:
            output.print_json({"ops": entries, "operators": [o["name"] for o in operators]})
            return
        rows = [(e["name"], str(e["arity"]), e["derivative"], e["doc"]) for e in entries]
        output.print_table(["function", "arity", "derivative", "what it computes"], rows)


def draw(
    expression: str | None,
    file: str | None,
    at: list[str],
    wrt: list[str],
    fmt: str | None,
    out: str | None,
    highlight: list[str],
    max_nodes: int,
    seed: str | None,
    blame: bool = False,
    python: str | None = None,
    layout_timeout: float | None = 30.0,
    compact: bool = False,
    rankdir: str | None = None,
) -> None:
    with reported():
        from pathlib import Path

        from ..errors import UsageError, printable
        from ..lang.program import load, resolve_wrt
        from ..lang.values import assignments, names_list, seed_vector
        from ..render.build import build, recording
        from ..render.layout import checked_limit, checked_rankdir, time_limit
        from ..render.output import format_for, show, write

        if max_nodes < 1:
            raise UsageError("--max-nodes must be at least 1")
        checked_limit(layout_timeout)
        rankdir = checked_rankdir(rankdir)
        program = load(expression, file, python)
        values = assignments(at)
        point = bool(values)
        if not point:  # the structure alone: any value of the right kind will do
            values = {name: 1.0 for name in program.variables}
        names = resolve_wrt(program, values, names_list(wrt) or None)
        path = Path(out) if out else None
        fmt = format_for(path, fmt)
        with recording() as trace:
            try:
                evaluation = program.run(values, names, record_steps=True)
            except UsageError as problem:
                if not point:
                    raise UsageError(f"{problem.message} (give the variables values with --at)") from None
                raise
        outputs = evaluation.outputs
        vector = None
        if point and seed is not None:
            from ..lang.program import single_output

            vector = seed_vector(seed, single_output(evaluation).shape)
        found = None
        if blame:  # before build: building with gradients frees what the nodes saved
            from ..check.blame import blame_nodes

            found, _ = blame_nodes(trace)
        graph = build(
            outputs, trace=trace, texts=_ProgramTexts(evaluation), seed=vector, point=point, free=True,
            highlight=names_list(highlight, "--highlight"), max_nodes=max_nodes, blamed=[found.autograd_node] if found else (),
        )  # fmt: skip
        graph.compact, graph.rankdir = compact, rankdir
        if blame:
            marked = next((n for n in graph.nodes if n.blamed), None)
            if found is None:
                sys.stderr.write("blame: every node's derivative agrees with finite differences\n")
            else:
                where = f"node {marked.id} ({marked.label})" if marked else "a node not shown"
                sys.stderr.write(f"blame: {where}, marked in red: {found.text()}\n")
        if evaluation.nonfinite and point:
            output.warn(f"non-finite value: {evaluation.nonfinite}")
        with time_limit(layout_timeout):
            if path is not None:
                write(graph, path, fmt)
                sys.stderr.write(f"wrote {printable(str(path))} ({len(graph.nodes)} nodes)\n")
            else:
                show(graph, fmt, rich=output.rich_wanted())


class _ProgramTexts:
    """``id(tensor) -> program text``, unparsed on demand for the nodes a view shows.

    Only subexpressions of up to ``LIMIT`` nodes get their text: unparsing the
    subtree under every value of a 1e5-term sum would be quadratic, and such a
    label could not be read anyway (the view writes ``n3 + n7`` instead).
    """

    LIMIT = 40

    def __init__(self, evaluation: Any) -> None:
        from ..autograd import Tensor
        from ..lang import ast

        self._nodes: dict[int, Any] = {}
        size: dict[int, int] = {}
        for node, value in evaluation.steps:  # children come before their parents
            size[id(node)] = 1 + sum(size.get(id(child), 1) for child in node.children())
            computed = isinstance(value, Tensor) and not isinstance(node, (ast.Name, ast.Number))
            if computed and size[id(node)] <= self.LIMIT:
                self._nodes.setdefault(id(value), node)

    def get(self, key: int, default: str | None = None) -> str | None:
        from ..lang.unparse import unparse

        node = self._nodes.get(key)
        return default if node is None else unparse(node)


def jacobian(
    expression: str | None,
    file: str | None,
    at: list[str],
    wrt: list[str],
    as_json: bool,
    mode: str,
    explain: bool,
    python: str | None = None,
) -> None:
    with reported():
        from ..errors import UsageError
        from ..lang.program import load, program_jacobian, unseen_derivative
        from ..lang.values import assignments, names_list

        if mode not in ("auto", "forward", "reverse"):
            raise UsageError(f"--mode {mode}: use auto, forward or reverse")
        program = load(expression, file, python)
        values = assignments(at)
        result = program_jacobian(program, values, names_list(wrt) or None, mode, as_json)
        unseen = unseen_derivative(program, values, result.names or [], result.matrix, labels=result.rows)
        if unseen:
            output.warn(unseen)
        document = {"outputs": result.rows, "inputs": result.columns, "jacobian": result.matrix,
                    "value": result.value, "mode": result.plan.mode}  # fmt: skip
        _print_matrix_result(result, document, f"Jacobian of {_source_text(program, expression)}", as_json, explain)


def hessian(
    expression: str | None,
    file: str | None,
    at: list[str],
    wrt: list[str],
    as_json: bool,
    explain: bool,
    python: str | None = None,
) -> None:
    with reported():
        from ..lang.program import load, program_hessian, unseen_derivative
        from ..lang.values import assignments, names_list

        program = load(expression, file, python)
        values = assignments(at)
        result = program_hessian(program, values, names_list(wrt) or None, as_json)
        unseen = unseen_derivative(program, values, result.names or [], np.asarray(result.gradient)[None, :])
        if unseen:
            output.warn(unseen)
        document = {"inputs": result.columns, "hessian": result.matrix, "value": result.value,
                    "gradient": result.gradient}  # fmt: skip
        _print_matrix_result(result, document, f"Hessian of {_source_text(program, expression)}", as_json, explain)


def _print_matrix_result(result: Any, document: dict[str, Any], title: str, as_json: bool, explain: bool) -> None:
    """A Jacobian or Hessian: its JSON ``document``, or the labelled matrix; with how it was computed."""
    if as_json:
        if explain:
            document["explain"] = result.plan.explain()
        output.print_json(document)
        return
    output.print_matrix(result.rows, result.columns, result.matrix, title=title)
    if explain:
        sys.stdout.write(result.plan.explain() + "\n")


def check(
    expression: str | None,
    file: str | None,
    at: list[str],
    wrt: list[str],
    as_json: bool,
    expect: list[str],
    methods: list[str],
    rtol: float | None,
    atol: float | None,
    seed: str | None,
    blame: bool,
    sympy_timeout: float = 10.0,
    python: str | None = None,
) -> None:
    """Exit 0 when every method that ran agrees with autograd, 1 on a mismatch or a non-finite value."""
    with reported():
        from ..check import check as run_check
        from ..errors import UsageError
        from ..lang.program import load
        from ..lang.values import assignments, names_list

        if not (sympy_timeout > 0 and np.isfinite(sympy_timeout)):
            raise UsageError(f"--sympy-timeout must be a positive number of seconds, got {sympy_timeout}")
        for name, value in (("--rtol", rtol), ("--atol", atol)):
            if value is not None and not (value >= 0 and np.isfinite(value)):
                raise UsageError(f"{name} must be a finite number >= 0, got {value}")
        program = load(expression, file, python)
        values = assignments(at)
        formulas = _expectations(expect)
        locate = None
        if blame:
            from ..render.build import locate_blamed as locate
        result = run_check(
            program, values, names_list(wrt) or None, methods, rtol, atol, formulas, seed, blame, sympy_timeout, locate
        )
        for said in result.warnings:
            output.warn(said)
        if as_json:
            output.print_json(result.to_dict())
        else:
            _print_check(result, _source_text(program, expression), _point_text(values))
        if not result.ok:
            raise SystemExit(1)


def _expectations(items: list[str]) -> dict[str, str]:
    """``--expect x="2*x*y"`` (repeatable) -> ``{"x": "2*x*y"}``; the formula may itself hold '='."""
    from ..errors import UsageError
    from ..lang.values import NAME_CHARS

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
    from ..check.result import METHOD_NAMES, check_table

    table = result.table or check_table(result.gradient, result.checks, result.kinks, result.labels)
    header = ["", "autograd", *(METHOD_NAMES[name] for name in table.methods), "abs err", "rel err", ""]
    body = [_check_cells(row) for row in table.rows]
    lines = [f"{METHOD_NAMES[c.name]}: {c.reason}" for c in result.checks.values() if c.reason]
    lines += [k.text() for k in result.kinks]
    lines += result.notes
    if result.blame is not None:
        lines.append(f"blame: node {result.blame.node}: {result.blame.text()}")
    elif result.blame_checked:
        lines.append(f"blame: the derivatives of all {result.blame_checked} nodes agree with finite differences")
    _write_check(result, heading, point, header, body, lines, table.note)


def _check_cells(row: Any) -> list[str]:
    cells = [f"d/d{row.label}", output.number(row.autograd, 12)]
    cells += ["" if np.isnan(v) else output.number(v, 12) for v in row.values]
    cells += ["", ""] if row.abs_error is None else [f"{row.abs_error:.2g}", f"{row.rel_error:.2g}"]
    cells.append(row.status)
    return cells


def _write_check(
    result: Any, heading: str, point: str, header: list[str], body: list[list[str]], lines: list[str], note: str | None
) -> None:
    verdict = result.verdict()
    if output.rich_wanted() and output.table_fits([header, *body]):
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        console = Console(highlight=False)
        title = Text(heading, style="bold")
        title.append(f"   at {point}" if point else "", style="dim")
        console.print(title)
        table = Table(caption=note)
        for i, name in enumerate(header):
            table.add_column(name, justify="left" if i == 0 else "right", style="bold cyan" if i == 0 else None)
        for cells in body:
            mark = cells[-1]
            good, bad = ("✓", "✗") if output.can_show("✓✗") else ("ok", "MISMATCH")
            cells[-1] = {"ok": f"[green]{good}[/]", "kink": "[yellow]kink[/]", "-": "-"}.get(
                mark, f"[bold red]{bad}[/]"
            )
            cells[0] = output.partial(cells[0])
            table.add_row(*cells)
        console.print(table)
        for line in lines:
            console.print(Text(line, style="dim" if "skipped" in line or "agree" in line else "yellow"))
        console.print(Text(verdict, style="bold green" if result.ok else "bold red"))
        return
    header[-1] = "ok"
    widths = [max(len(str(c)) for c in col) for col in zip(header, *body)]
    text = ["  ".join(str(c).rjust(w) if 0 < i < len(widths) - 1 else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in [header, *body]]  # fmt: skip
    if note:
        text.append(f"({note})")
    sys.stdout.write("\n".join(text + lines + [verdict]) + "\n")
