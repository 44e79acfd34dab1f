"""Command bodies: read the inputs, call the library, format what it returns."""

from __future__ import annotations

import sys
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
) -> None:
    with reported():
        from ..lang.program import load, value_and_grad
        from ..lang.values import assignments, names_list

        program = load(expression, file)
        values = assignments(at)
        if points is not None:
            _evaluate_points(program, points, values, names_list(wrt), as_json)
            return
        result = value_and_grad(program, values, names_list(wrt) or None, seed)
        if result.evaluation.nonfinite:
            output.warn(f"non-finite value: {result.evaluation.nonfinite}")
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
    if program.tree is not None:
        text = " ".join(program.tree.text.split())
        return text if len(text) <= 60 else text[:57] + "..."
    return expression or program.origin


def _evaluate_points(program: Any, path: str, values: dict[str, Any], wrt: list[str], as_json: bool) -> None:
    """Every row of a CSV file as one point, computed in a single vectorised pass."""
    import gradcli as gc

    from ..errors import UsageError
    from ..lang.program import resolve_wrt, single_output
    from ..lang.values import read_points_with_rows

    columns, row_texts = read_points_with_rows(path)
    n = len(next(iter(columns.values())))
    point_values = {**values, **columns}
    names = resolve_wrt(program, point_values, wrt or None)
    evaluation = program.run(point_values, names)
    out = single_output(evaluation)
    if out.shape != (n,):
        raise UsageError(
            f"--points needs one value per point: the expression gives shape {out.shape} for {n} points "
            "(reductions such as sum() mix the points)"
        )
    inputs = [evaluation.inputs[name] for name in names]
    grads = (
        gc.grad(out, inputs, grad_outputs=gc.ones(n), allow_unused=True, materialize_grads=True)
        if out.requires_grad
        else [gc.zeros(n) for _ in names]
    )
    grad_columns = [np.broadcast_to(np.asarray(g._value, dtype=np.float64), (n,)) for g in grads]
    if evaluation.nonfinite:
        output.warn(f"non-finite value: {evaluation.nonfinite}")
    value_text = _texts(out._value)
    grad_texts = [_texts(g) for g in grad_columns]
    if as_json:  # JSON lines, written without json.dumps: a million rows in a few seconds
        keys = [f'"{name}": ' for name in names]
        values_json = _json_numbers(value_text)
        grads_json = [_json_numbers(g) for g in grad_texts]
        lines = (
            '{"value": ' + v + ', "gradient": {' + ", ".join(k + g[i] for k, g in zip(keys, grads_json)) + "}}"
            for i, v in enumerate(values_json)
        )
        sys.stdout.write("\n".join(lines) + "\n")
        return
    header = [*columns, "value", *(f"grad_{name}" for name in names)]
    point_texts = [row_texts] if row_texts is not None else [_texts(c) for c in columns.values()]
    rows = zip(*point_texts, value_text, *grad_texts)
    sys.stdout.write(",".join(header) + "\n" + "\n".join(",".join(r) for r in rows) + "\n")


def _texts(column: Any) -> list[str]:
    """Shortest round-trip text of every float (Python's repr: faster than NumPy's astype(str))."""
    return list(map(repr, np.asarray(column, dtype=np.float64).tolist()))


def _json_numbers(texts: list[str]) -> list[str]:
    return [t if t not in ("nan", "inf", "-inf") else f'"{t}"' for t in texts]


def differentiate(
    expression: str | None, file: str | None, at: list[str], wrt: list[str], as_json: bool, latex: bool
) -> None:
    with reported():
        import sympy as sp

        from ..lang.program import load, symbolic_derivatives
        from ..lang.values import assignments, names_list

        program = load(expression, file)
        values = assignments(at)
        shapes = {name: np.shape(v) for name, v in values.items()}
        derivatives = symbolic_derivatives(program, names_list(wrt) or None, shapes)
        text = {name: _sympy_text(d, sp.latex if latex else sp.sstr) for name, d in derivatives.items()}
        if as_json:
            document: dict[str, Any] = {"derivative": text}
            if latex:
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
        from ..lang.parser import BINARY, COMPARE

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
        operators = [{"name": op, "arity": 2, "kind": "operator"} for op in BINARY if op != "**"]
        operators += [{"name": op, "arity": 2, "kind": "operator"} for op in sorted(COMPARE)]
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
) -> None:
    with reported():
        from pathlib import Path

        from ..errors import UsageError
        from ..lang.program import load, resolve_wrt
        from ..lang.values import assignments, names_list, seed_vector
        from ..render.build import build, recording
        from ..render.output import format_for, show, write

        if max_nodes < 1:
            raise UsageError("--max-nodes must be at least 1")
        program = load(expression, file)
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
        graph = build(
            outputs, trace=trace, texts=_ProgramTexts(evaluation), seed=vector, point=point, free=True,
            highlight=names_list(highlight), max_nodes=max_nodes,
        )  # fmt: skip
        if evaluation.nonfinite and point:
            output.warn(f"non-finite value: {evaluation.nonfinite}")
        if path is not None:
            write(graph, path, fmt)
            sys.stderr.write(f"wrote {path} ({len(graph.nodes)} nodes)\n")
        else:
            show(graph, fmt)


class _ProgramTexts:
    """``id(tensor) -> program text``, unparsed on demand for the nodes a view shows.

    Only subexpressions of up to ``LIMIT`` nodes get their text: unparsing the
    subtree under every value of a 1e5-term sum would be quadratic, and such a
    label could not be read anyway (the view writes ``n3 + n7`` instead).
    """

    LIMIT = 40

    def __init__(self, evaluation: Any) -> None:
        import gradcli as gc

        from ..lang import ast

        self._nodes: dict[int, Any] = {}
        size: dict[int, int] = {}
        for node, value in evaluation.steps:  # children come before their parents
            size[id(node)] = 1 + sum(size.get(id(child), 1) for child in node.children())
            computed = isinstance(value, gc.Tensor) and not isinstance(node, (ast.Name, ast.Number))
            if computed and size[id(node)] <= self.LIMIT:
                self._nodes.setdefault(id(value), node)

    def get(self, key: int, default: str | None = None) -> str | None:
        from ..lang.unparse import unparse

        node = self._nodes.get(key)
        return default if node is None else unparse(node)


def jacobian(
    expression: str | None, file: str | None, at: list[str], wrt: list[str], as_json: bool, mode: str, explain: bool
) -> None:
    with reported():
        from ..errors import UsageError
        from ..lang.program import load, program_jacobian
        from ..lang.values import assignments, names_list

        if mode not in ("auto", "forward", "reverse"):
            raise UsageError(f"--mode {mode}: use auto, forward or reverse")
        program = load(expression, file)
        values = assignments(at)
        result = program_jacobian(program, values, names_list(wrt) or None, mode)
        if as_json:
            document: dict[str, Any] = {"outputs": result.rows, "inputs": result.columns, "jacobian": result.matrix,
                                        "value": result.value, "mode": result.plan.mode}  # fmt: skip
            if explain:
                document["explain"] = result.plan.explain()
            output.print_json(document)
            return
        output.print_matrix(
            result.rows, result.columns, result.matrix, title=f"Jacobian of {_source_text(program, expression)}"
        )
        if explain:
            sys.stdout.write(result.plan.explain() + "\n")


def hessian(
    expression: str | None, file: str | None, at: list[str], wrt: list[str], as_json: bool, explain: bool
) -> None:
    with reported():
        from ..lang.program import load, program_hessian
        from ..lang.values import assignments, names_list

        program = load(expression, file)
        values = assignments(at)
        result = program_hessian(program, values, names_list(wrt) or None)
        if as_json:
            document: dict[str, Any] = {"inputs": result.columns, "hessian": result.matrix, "value": result.value,
                                        "gradient": result.gradient}  # fmt: skip
            if explain:
                document["explain"] = result.plan.explain()
            output.print_json(document)
            return
        output.print_matrix(
            result.rows, result.columns, result.matrix, title=f"Hessian of {_source_text(program, expression)}"
        )
        if explain:
            sys.stdout.write(result.plan.explain() + "\n")
