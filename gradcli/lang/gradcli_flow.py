"""gradcli's own reader for ``gradcli why``: one run of a program of the language as a ``Flow``.

The program runs once with its steps recorded (``evaluate(..., record_steps=True)``: each syntax
node with its value, children first). Replaying that order on a stack gives each operation its
arguments: a ``Call`` is its function (``floor``, ``relu``, ``clamp``), an infix operator its
primitive (``mul``, ``pow``), a comparison its own (``gt``: a boolean, no gradient), a conditional
``a if c else b`` is ``where`` (both branches computed, as ``torch.where``). Each tensor is a value
keyed by its object, placed in the program by its column (``column 15``, or ``line 2, column 3``).
One ``grad`` of the output (summed when not a scalar) with respect to every value autograd
tracked gives each value's gradient. Only statistics are kept (``Stats``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import Source
from ..ops.operators import INFIX
from . import ast
from .flow import Flow, Stats, Step
from .functions import COMPARISONS
from .library import gc


class _Values:
    """The run's tensors by key (their objects are held by the run's steps: no id is reused)."""

    def __init__(self) -> None:
        self.keys: dict[int, int] = {}  # id(tensor) -> key
        self.tensors: dict[int, Any] = {}  # key -> tensor
        self.stats: dict[int, Stats] = {}

    def key(self, tensor: Any, made: bool = False) -> int:
        found = self.keys.get(id(tensor))
        if found is None or made:
            found = len(self.tensors)
            self.keys[id(tensor)] = found
            self.tensors[found] = tensor
            self.stats[found] = Stats.of(tensor.array)
        return found


def _op(node: ast.SyntaxNode) -> str:
    """The operation a syntax node performs, as the analysis names operations."""
    if isinstance(node, ast.Call):
        return node.function
    if isinstance(node, ast.Binary):
        return "matmul" if node.op == "@" else INFIX[node.op].primitives[0].name
    if isinstance(node, ast.Compare):
        return COMPARISONS[node.op].name
    if isinstance(node, ast.Conditional):
        return "where"
    if isinstance(node, ast.Unary):
        return "neg" if node.op == "-" else "positive"
    return {ast.Index: "index", ast.Vector: "stack"}.get(type(node), type(node).__name__.lower())


def _steps(evaluation: Any, source: Source, values: _Values) -> list[Step]:
    """The operations of the run, in order, replayed from its recorded (node, value) pairs."""
    stack: list[Any] = []
    steps: list[Step] = []
    for node, value in evaluation.steps:
        n = node.arity
        args = stack[len(stack) - n :] if n else []
        del stack[len(stack) - len(args) :]
        stack.append(value)
        tensors = [a for a in args if isinstance(a, gc.Tensor)]
        if isinstance(node, (ast.Name, ast.Number, ast.Slice)) or not tensors:
            continue  # a variable, a number, a slice, or numbers folded: no operation on tensors
        if not isinstance(value, gc.Tensor) or any(value is t for t in tensors):
            continue  # (``+x``: the same tensor)
        inputs = [values.key(t) for t in tensors]
        numbers = [a for a in args if isinstance(a, (int, float)) and not isinstance(a, bool)]
        place = node.op_start if isinstance(node, (ast.Binary, ast.Compare)) else node.start
        steps.append(Step(_op(node), inputs, [values.key(value, made=True)], source.where(place), numbers=numbers))
    return steps


def record_flow(program: Any, given: Mapping[str, Any], wrt: Sequence[str]) -> Flow:
    """Run ``program`` (a program of the language) once at ``given``, those in ``wrt`` requiring grad,
    and read where each value went; the output is summed when it is not a scalar."""
    with np.errstate(all="ignore"):
        evaluation = program.run(given, wrt, record_steps=True)
    values = _Values()
    inputs = {name: values.key(t) for name, t in evaluation.inputs.items()}
    steps = _steps(evaluation, Source(program.tree.text, program.origin), values)
    for tensor in evaluation.names.values():  # (a name given a number holds a tensor made of it)
        values.key(tensor)
    output = evaluation.outputs[0] if len(evaluation.outputs) == 1 else None
    out_key = None if output is None else values.key(output)
    tracked = {k: bool(t.requires_grad) for k, t in values.tensors.items()}
    grads: dict[int, Stats | None] = {}
    if output is not None and output.requires_grad:
        wanted = [k for k in values.tensors if tracked[k]]
        with np.errstate(all="ignore"):
            scalar = output.reshape(()) if output.numel() == 1 else gc.sum(output)
            found = gc.grad(scalar, [values.tensors[k] for k in wanted], allow_unused=True, retain_graph=True)
        grads = {k: None if g is None else Stats.of(g.array) for k, g in zip(wanted, found)}
    input_grads = {name: grads.get(inputs[name]) for name in wrt if name in inputs}
    return Flow("gradcli", inputs, out_key, steps, values.stats, tracked, grads, input_grads)
