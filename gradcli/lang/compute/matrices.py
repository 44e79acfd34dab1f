"""Jacobians and Hessians of a program, labelled: what ``gradcli jacobian`` and ``gradcli hessian`` compute.

``program_jacobian(load("[x*y, x+y]"), {"x": 2, "y": 3}, None, "auto").matrix`` is ``[[3, 2], [1, 1]]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import UsageError
from ...memory import check_fits, limit_size
from ...records import Record, fill
from .. import ast
from ..evaluate import Evaluation
from ..library import gc
from ..program import Program
from .gradient import backward_anomaly, resolve_wrt, single_output
from .unseen import nothing_to_differentiate


def element_labels(base: str, shape: tuple[int, ...]) -> list[str]:
    """``y`` for a scalar, ``y[0], y[1]`` for a vector, ``A[0,1]`` for a matrix (C order)."""
    if not shape:
        return [base]
    return [f"{base}[{','.join(map(str, idx))}]" for idx in np.ndindex(shape)]


class ElementLabels(Sequence[str]):
    """``element_labels`` of several inputs end to end, each made when asked: a million weights' labels
    take half a second to make as a list, and a check along directions reads a few of them.

    >>> labels = ElementLabels(["x", "A"], [(), (2, 2)])
    >>> len(labels), labels[0], labels[4], list(labels)[1:3]
    (5, 'x', 'A[1,1]', ['A[0,0]', 'A[0,1]'])
    """

    def __init__(self, names: Sequence[str], shapes: Sequence[tuple[int, ...]]) -> None:
        self.names, self.shapes = list(names), [tuple(shape) for shape in shapes]
        self.offsets = np.cumsum([0, *(int(np.prod(shape, dtype=int)) for shape in self.shapes)])

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        k = int(k) + (len(self) if int(k) < 0 else 0)
        if not 0 <= k < len(self):
            raise IndexError(k)
        block = int(np.searchsorted(self.offsets, k, side="right")) - 1
        shape = self.shapes[block]
        if not shape:
            return self.names[block]
        index = np.unravel_index(k - int(self.offsets[block]), shape)
        return f"{self.names[block]}[{','.join(str(int(i)) for i in index)}]"

    def __iter__(self) -> Any:
        for name, shape in zip(self.names, self.shapes):
            yield from element_labels(name, shape)


def output_bases(program: Program, evaluation: Evaluation) -> list[str]:
    """Names for the outputs: a program's own name, ``f`` for one unnamed output, else its text."""
    items = program.tree.outputs.items if program.tree is not None else []
    bases = []
    for k, label in enumerate(evaluation.output_labels):
        item = items[k] if k < len(items) else None
        if isinstance(item, ast.Name) or program.tree is None:
            bases.append(label)
        else:
            bases.append("f" if len(evaluation.output_labels) == 1 else label)
    return bases


class Matrix(Record):
    """A labelled matrix: ``rows`` x ``columns`` (Jacobian or Hessian) and how it was computed."""

    _fields = ("rows", "columns", "matrix", "plan", "value", "gradient", "names", "nonfinite", "note")

    def __init__(
        self,
        rows: list[str],
        columns: list[str],
        matrix: np.ndarray,
        plan: Any,
        value: np.ndarray | None = None,
        gradient: np.ndarray | None = None,
        names: list[str] | None = None,  # the variables of the columns
        nonfinite: str | None = None,  # eval's warning of where the first non-finite number came from
        note: str | None = None,  # how the numbers were made where not as asked (reverse for --mode forward)
    ) -> None:
        fill(self, locals())


def _nonfinite_entry(program: Program, values: Mapping[str, Any], names: list[str], jac: Matrix) -> str | None:
    """Eval's ``warning:`` for the first NaN or infinity of a Jacobian (row-major), with its provenance."""
    bad = np.argwhere(~np.isfinite(jac.matrix))
    if not bad.size:
        return None
    row, column = (int(i) for i in bad[0])
    where = backward_anomaly(program, values, names, None, row=row)
    if where is None:
        return None
    return f"non-finite gradient: {where} (first at d {jac.rows[row]} / d {jac.columns[column]})"


def _as_function(program: Program, values: Mapping[str, Any], names: list[str]) -> Callable[..., Any]:
    def run(*leaves: Any) -> tuple[gc.Tensor, ...]:
        return tuple(program.run({**values, **dict(zip(names, leaves))}, names).outputs)

    return run


def program_jacobian(
    program: Program, values: Mapping[str, Any], wrt: Sequence[str] | None, mode: str, as_json: bool = False
) -> Matrix:
    """d outputs / d variables, one row per output element, one column per input element
    (``as_json``: it will be printed whole, which the memory estimate counts)."""
    names = resolve_wrt(program, values, wrt, unused=False)
    if not names and not program.variables:  # (a variable without a value is said by the run)
        raise UsageError(nothing_to_differentiate("jacobian", program, values))
    evaluation = program.run(values, names)
    inputs = tuple(np.asarray(values[n], dtype=np.float64) for n in names)
    # batched passes hold several (outputs x inputs) arrays: refuse them before making them
    shape = (sum(np.size(o.array) for o in evaluation.outputs), sum(np.size(x) for x in inputs))
    limit_size(shape, "the Jacobian")
    check_fits("jacobian", *shape, as_json)
    outs, blocks, plan, note = _blocks(_as_function(program, values, names), inputs, mode)
    rows = [
        label for base, o in zip(output_bases(program, evaluation), outs) for label in element_labels(base, o.shape)
    ]
    columns = [label for n, x in zip(names, inputs) for label in element_labels(n, x.shape)]
    matrix = np.block(
        [[np.asarray(b, dtype=np.float64).reshape(np.size(o.array), np.size(x)) for b, x in zip(row, inputs)]
         for row, o in zip(blocks, outs)]
    ) if blocks and inputs else np.zeros((len(rows), len(columns)))  # fmt: skip
    value = np.concatenate([np.asarray(o.array, dtype=np.float64).reshape(-1) for o in outs])
    jac = Matrix(rows, columns, matrix.reshape(len(rows), len(columns)), plan, value=value, names=names, note=note)
    if evaluation.nonfinite:
        jac.nonfinite = f"non-finite value: {evaluation.nonfinite}"
    else:
        jac.nonfinite = _nonfinite_entry(program, values, names, jac)
    return jac


def _blocks(function: Callable[..., Any], inputs: tuple[Any, ...], mode: str) -> tuple[Any, Any, Any, str | None]:
    """The Jacobian's blocks in ``mode``; where forward mode was asked for and cannot run (PyTorch has
    none for ``torch.autograd.grad`` inside, a custom Function without ``jvp``, reentrant checkpoint),
    reverse mode's, with a note that says so."""
    from ...autograd.forward import NoForwardRule  # lazy: as jacobian_blocks
    from ...autograd.functional import jacobian_blocks  # lazy: start-up, eval never builds a Jacobian

    try:
        _, outs, blocks, plan = jacobian_blocks(function, inputs, mode)
        return outs, blocks, plan, None
    except NoForwardRule as exc:
        if mode != "forward" or isinstance(exc, UsageError):  # (a framework that refuses says why, exit 2)
            raise
        reason = str(exc)
    _, outs, blocks, plan = jacobian_blocks(function, inputs, "reverse")
    return outs, blocks, plan, f"--mode forward: {reason}; the Jacobian is by reverse mode"


def program_hessian(
    program: Program, values: Mapping[str, Any], wrt: Sequence[str] | None, as_json: bool = False
) -> Matrix:
    """d^2 output / d variables^2 of a scalar output, by forward-over-reverse."""
    from ...autograd.functional import hessian_blocks  # lazy: start-up, eval never builds a Hessian

    names = resolve_wrt(program, values, wrt, unused=False)
    if not names and not program.variables:  # (a variable without a value is said by the run)
        raise UsageError(nothing_to_differentiate("hessian", program, values))
    evaluation = program.run(values, names)
    output = single_output(evaluation)
    if output.numel() != 1:
        raise UsageError(f"hessian needs a scalar output; the output has shape {output.shape} (use gradcli jacobian)")
    inputs = tuple(np.asarray(values[n], dtype=np.float64) for n in names)
    n = sum(np.size(x) for x in inputs)
    limit_size((n, n), "the Hessian")
    check_fits("hessian", n, n, as_json)

    def scalar(*leaves: Any) -> gc.Tensor:
        return single_output(program.run({**values, **dict(zip(names, leaves))}, names))

    out, grads, blocks, plan = hessian_blocks(scalar, inputs)
    columns = [label for n, x in zip(names, inputs) for label in element_labels(n, x.shape)]
    matrix = np.block([[np.asarray(b, dtype=np.float64).reshape(np.size(xi), np.size(xj)) for b, xj in zip(row, inputs)]
                       for row, xi in zip(blocks, inputs)]) if inputs else np.zeros((0, 0))  # fmt: skip
    gradient = (
        np.concatenate([np.asarray(g.array, dtype=np.float64).reshape(-1) for g in grads]) if grads else np.zeros(0)
    )
    return Matrix(
        columns, columns, matrix.reshape(len(columns), len(columns)), plan, np.asarray(out.array), gradient, names
    )
