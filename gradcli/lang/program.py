"""A program to differentiate: an expression of the language, or a Python function.

``load`` turns what the user typed into a ``Program``; ``value_and_grad`` and
``symbolic_derivatives`` are what ``gradcli eval`` and ``gradcli diff``
compute, as library calls the commands only format.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import gradcli as gc

from ..errors import Source, UsageError
from ..memory import check_fits
from . import ast
from .evaluate import Evaluation, check_names, evaluate, free_variables, limit_size
from .parser import MAX_CHARACTERS, parse
from .values import _read_text, decode, program_too_long, read_bounded, seed_vector, text_bytes_limit

_PYTHON_FUNCTION = re.compile(r"^(?P<path>.+\.py):(?P<name>[A-Za-z_][A-Za-z0-9_]*)$")


@dataclass
class Program:
    """What to differentiate: ``text`` (a parsed program) or a Python ``function``."""

    origin: str
    tree: ast.Program | None = None
    function: Callable[..., Any] | None = None

    @property
    def variables(self) -> list[str]:
        """Free variables in order of first appearance (a function's parameters)."""
        if self.tree is not None:
            return free_variables(self.tree)
        assert self.function is not None
        return [
            p.name
            for p in inspect.signature(self.function).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]

    def run(self, values: Mapping[str, Any], wrt: Sequence[str] = (), record_steps: bool = False) -> Evaluation:
        if self.tree is not None:
            check_names(self.tree, values)
            with np.errstate(all="ignore"):
                return evaluate(self.tree, values, wrt, record_steps=record_steps)
        return _run_function(self, values, wrt)


def load(expression: str | None, file: str | None = None) -> Program:
    """The program named on the command line: EXPR, ``-`` (stdin), ``-f FILE`` or ``file.py:func``."""
    if file is not None and expression not in (None, ""):
        raise UsageError("give the expression either as EXPR or with -f FILE, not both")
    if file is not None:
        text = read_stdin() if file == "-" else _read_text(file, "-f", text_bytes_limit(), program_too_long(file))
        return Program(file, tree=parse(text.removeprefix("\ufeff"), file))  # a BOM, as --points takes it
    if expression is None:
        raise UsageError("missing EXPR: give an expression, - to read standard input, or -f FILE")
    if expression == "-":
        return Program("<stdin>", tree=parse(read_stdin().removeprefix("\ufeff"), "<stdin>"))
    match = _PYTHON_FUNCTION.match(expression.strip())
    if match:
        return Program(expression, function=_load_function(match["path"], match["name"]))
    return Program("expression", tree=parse(expression))


def read_stdin() -> str:
    """Standard input as UTF-8 text (bytes, so that a bad byte is named rather than escaped),
    read no further than a program's size limit."""
    if sys.stdin is None:  # closed (`gradcli eval - <&-`)
        raise UsageError("standard input is closed: nothing to read (give EXPR, or -f FILE)")
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # replaced by a text stream (tests)
        text = sys.stdin.read(MAX_CHARACTERS + 1)
        if len(text) > MAX_CHARACTERS:
            raise UsageError(program_too_long("<stdin>"))
        return text
    data = read_bounded(stream, "standard input", text_bytes_limit(), program_too_long("<stdin>"))
    return decode(data, "standard input")


def _load_function(path: str, name: str) -> Callable[..., Any]:
    """Import ``path`` (the user's own code, as pytest imports tests) and take ``name``."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(f"_gradcli_user_{file.stem}", file)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise UsageError(f"{path}, line {exc.lineno}: {exc.msg}") from None
    except Exception as exc:  # the user's module failed while importing
        raise UsageError(f"{path}: importing it raised {type(exc).__name__}: {exc}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise UsageError(f"{path} has no function {name!r}")
    try:
        odd = [p for p in inspect.signature(function).parameters.values()
               if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY)]  # fmt: skip
    except (TypeError, ValueError):
        odd = []
    if odd:
        raise UsageError(
            f"{path}:{name} takes {odd[0]}: gradcli passes each --at value by its parameter's name, "
            "so every parameter needs a plain name"
        )
    global user_code
    user_code = f"{path}:{name}"
    return function


#: The user's Python function, once loaded: a RuntimeError from autograd is then most likely
#: its misuse (an in-place change of a saved value), reported as bad input rather than as our bug.
user_code: str | None = None


def _run_function(program: Program, values: Mapping[str, Any], wrt: Sequence[str]) -> Evaluation:
    assert program.function is not None
    parameters = program.variables
    missing = [p for p in parameters if p not in values]
    if missing:
        raise UsageError(f"{program.origin} needs --at {missing[0]}=... (its parameters: {', '.join(parameters)})")
    inputs: dict[str, gc.Tensor] = {}
    for name, value in values.items():
        t = gc.tensor(value, requires_grad=name in wrt)
        t.name = name
        inputs[name] = t
    try:
        with np.errstate(all="ignore"):
            result = program.function(**{p: inputs[p] for p in parameters})
    except Exception as exc:  # the user's function raised: report it, not a traceback of ours
        raise UsageError(f"{program.origin} raised {type(exc).__name__}: {exc}") from None
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    outputs = [r if isinstance(r, gc.Tensor) else gc.tensor(r) for r in results]
    labels = (
        [f"{program.function.__name__}[{i}]" for i in range(len(outputs))]
        if len(outputs) > 1
        else [program.function.__name__]
    )
    nonfinite = next((f"{labels[i]} gave {'nan' if np.isnan(o._value).any() else 'inf'}"
                      for i, o in enumerate(outputs) if not np.isfinite(o._value).all()), None)  # fmt: skip
    return Evaluation(outputs, inputs, {}, labels, nonfinite)


# --- what the commands compute -----------------------------------------------------------------


def resolve_wrt(program: Program, values: Mapping[str, Any], wrt: Sequence[str] | None) -> list[str]:
    """``--wrt`` names, checked; by default every free variable, in order of first appearance."""
    if not wrt:
        variables = free_variables(program.tree, values) if program.tree is not None else program.variables
        return [v for v in variables if v in values] or list(values)
    known = set(program.variables) | set(values)
    for name in wrt:
        if name not in known:
            raise UsageError(f"--wrt {name}: '{name}' is neither in the expression nor given with --at")
        if name not in values:
            raise UsageError(f"--wrt {name}: give it a value with --at {name}=...")
    return list(wrt)


@dataclass
class Gradient:
    """``value`` of the output and d(output)/d(variable) for each variable (a VJP with a seed)."""

    value: np.ndarray
    gradient: dict[str, np.ndarray]
    evaluation: Evaluation
    backward_nonfinite: str | None = None  # where the backward pass first gave a NaN or an infinity


SCALAR_ONLY = (
    "grad can be implicitly created only for scalar outputs: the output has shape {shape}; "
    "give --seed ones (or a vector) for the vector-Jacobian product, or use gradcli jacobian"
)


def single_output(evaluation: Evaluation) -> gc.Tensor:
    outputs = evaluation.outputs
    if len(outputs) == 1:
        return outputs[0]
    shapes = {o.shape for o in outputs}
    if len(shapes) != 1:
        raise UsageError(f"the {len(outputs)} outputs have different shapes; use gradcli jacobian")
    return gc.stack(outputs)


def value_and_grad(
    program: Program, values: Mapping[str, Any], wrt: Sequence[str] | None = None, seed: str | None = None
) -> Gradient:
    """The value and the gradient (or ``v^T J`` with ``seed``) at one point."""
    names = resolve_wrt(program, values, wrt)
    evaluation = program.run(values, names)
    output = single_output(evaluation)
    if seed is None and output.numel() != 1:
        raise UsageError(SCALAR_ONLY.format(shape=output.shape))
    vector = None if seed is None else seed_vector(seed, output.shape)
    inputs = [evaluation.inputs[n] for n in names]
    if output.requires_grad and inputs:
        grads = gc.grad(output, inputs, grad_outputs=vector, allow_unused=True, materialize_grads=True)
    else:
        grads = tuple(gc.zeros_like(t) for t in inputs)
    value = output._value if output.numel() != 1 or seed is not None else np.asarray(output._value).reshape(())
    gradient = {n: np.asarray(g._value) for n, g in zip(names, grads)}
    result = Gradient(np.asarray(value), gradient, evaluation)
    if evaluation.nonfinite is None and not all(np.isfinite(g).all() for g in gradient.values()):
        result.backward_nonfinite = backward_anomaly(program, values, names, vector)
    return result


def backward_anomaly(program: Program, values: Mapping[str, Any], names: Sequence[str], seed: Any) -> str | None:
    """The program run again in anomaly mode: which operation's derivative first gave a NaN or an
    infinity from finite values, as ``'sqrt(x)' at column 1 (SqrtBackward0) gave inf from input 0``."""
    from ..autograd.anomaly import detect_anomaly, inputs_text

    with detect_anomaly(raise_error=False) as mode, np.errstate(all="ignore"):
        evaluation = program.run(values, names, record_steps=True)
        output = single_output(evaluation)
        inputs = [evaluation.inputs[n] for n in names]
        gc.grad(output, inputs, grad_outputs=seed, allow_unused=True)
    found = mode.found
    if found is None or found.phase != "backward":
        return None
    name, detail = found.node.name(), inputs_text(found.inputs)
    made = next((node for node, value in evaluation.steps if getattr(value, "_edge", None) is found.node), None)
    if made is None or program.tree is None:
        where = f" (made at {found.where})" if found.where else ""
        return f"the derivative of {name}{where} gave {found.kind}{detail}"
    source = Source(program.tree.text, program.origin)
    return f"the derivative of {source.quote(made.start, made.end)} ({name}) gave {found.kind}{detail}"


def symbolic_derivatives(
    program: Program, wrt: Sequence[str] | None, shapes: Mapping[str, tuple[int, ...]] | None = None
) -> dict[str, Any]:
    """SymPy's derivative of the (single, scalar) output with respect to each variable, simplified."""
    if program.tree is None:
        raise UsageError("diff needs an expression; a Python function has no symbolic form")
    check_names(program.tree, set(program.variables))
    from .symbolic import derivative_of, to_sympy

    outputs, symbols = to_sympy(program.tree, shapes)
    if len(outputs) != 1 or isinstance(outputs[0], np.ndarray):
        raise UsageError("diff differentiates one scalar output; use gradcli jacobian for several")
    names = list(wrt) if wrt else list(symbols)
    if not names:
        raise UsageError("diff: the expression has no variable to differentiate by")
    result = {}
    for name in names:
        if name not in symbols:
            raise UsageError(f"--wrt {name}: '{name}' is not a variable of the expression")
        result[name] = derivative_of(outputs[0], symbols[name])
    return result


# --- Jacobians and Hessians of a program ----------------------------------------------------------------


def element_labels(base: str, shape: tuple[int, ...]) -> list[str]:
    """``y`` for a scalar, ``y[0], y[1]`` for a vector, ``A[0,1]`` for a matrix (C order)."""
    if not shape:
        return [base]
    return [f"{base}[{','.join(map(str, idx))}]" for idx in np.ndindex(shape)]


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


@dataclass
class Matrix:
    """A labelled matrix: ``rows`` x ``columns`` (Jacobian or Hessian) and how it was computed."""

    rows: list[str]
    columns: list[str]
    matrix: np.ndarray
    plan: Any
    value: np.ndarray | None = None
    gradient: np.ndarray | None = None


def _as_function(program: Program, values: Mapping[str, Any], names: list[str]) -> Callable[..., Any]:
    def run(*leaves: Any) -> tuple[gc.Tensor, ...]:
        return tuple(program.run({**values, **dict(zip(names, leaves))}, names).outputs)

    return run


def program_jacobian(
    program: Program, values: Mapping[str, Any], wrt: Sequence[str] | None, mode: str, as_json: bool = False
) -> Matrix:
    """d outputs / d variables, one row per output element, one column per input element
    (``as_json``: it will be printed whole, which the memory estimate counts)."""
    from ..autograd.functional import jacobian_blocks

    names = resolve_wrt(program, values, wrt)
    if not names and not program.variables:
        raise UsageError("jacobian needs a variable to differentiate by: give one a value with --at NAME=...")
    evaluation = program.run(values, names)
    inputs = tuple(np.asarray(values[n], dtype=np.float64) for n in names)
    # batched passes hold several (outputs x inputs) arrays: refuse them before making them
    shape = (sum(np.size(o._value) for o in evaluation.outputs), sum(np.size(x) for x in inputs))
    limit_size(shape, "the Jacobian")
    check_fits("jacobian", *shape, as_json)
    _, outs, blocks, plan = jacobian_blocks(_as_function(program, values, names), inputs, mode)
    rows = [
        label for base, o in zip(output_bases(program, evaluation), outs) for label in element_labels(base, o.shape)
    ]
    columns = [label for n, x in zip(names, inputs) for label in element_labels(n, x.shape)]
    matrix = np.block(
        [[np.asarray(b, dtype=np.float64).reshape(np.size(o._value), np.size(x)) for b, x in zip(row, inputs)]
         for row, o in zip(blocks, outs)]
    ) if blocks and inputs else np.zeros((len(rows), len(columns)))  # fmt: skip
    value = np.concatenate([np.asarray(o._value, dtype=np.float64).reshape(-1) for o in outs])
    return Matrix(rows, columns, matrix.reshape(len(rows), len(columns)), plan, value=value)


def program_hessian(
    program: Program, values: Mapping[str, Any], wrt: Sequence[str] | None, as_json: bool = False
) -> Matrix:
    """d^2 output / d variables^2 of a scalar output, by forward-over-reverse."""
    from ..autograd.functional import hessian_blocks

    names = resolve_wrt(program, values, wrt)
    if not names and not program.variables:
        raise UsageError("hessian needs a variable to differentiate by: give one a value with --at NAME=...")
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
        np.concatenate([np.asarray(g._value, dtype=np.float64).reshape(-1) for g in grads]) if grads else np.zeros(0)
    )
    return Matrix(columns, columns, matrix.reshape(len(columns), len(columns)), plan, np.asarray(out._value), gradient)
