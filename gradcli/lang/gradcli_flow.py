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

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..autograd.grad_mode import is_grad_enabled
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
        self.outside: set[int] = set()  # the values met that no operation made (a global tensor)

    def key(self, tensor: Any, made: bool = False) -> int:
        """The key of ``tensor``'s current value; a new one when an operation ``made`` it (in place too)."""
        found = self.keys.get(id(tensor))
        if found is None or made:
            found = len(self.tensors)
            self.keys[id(tensor)] = found
            self.tensors[found] = tensor
            self.stats[found] = Stats.of(tensor.array)
            if not made:
                self.outside.add(found)
        return found

    def gradients(self, output: Any) -> dict[int, Stats | None]:
        """d output / d value for each tracked value still held as it was made (an in-place write's
        earlier versions are not: their key is left out, unknown); the output summed to a scalar."""
        if output is None or not output.requires_grad:
            return {}
        wanted = [k for k, t in self.tensors.items() if t.requires_grad and self.keys.get(id(t)) == k]
        with np.errstate(all="ignore"):
            scalar = output.reshape(()) if output.numel() == 1 else gc.sum(output)
            found = gc.grad(scalar, [self.tensors[k] for k in wanted], allow_unused=True, retain_graph=True)
        return {k: None if g is None else Stats.of(g.array) for k, g in zip(wanted, found)}


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
    grads = values.gradients(output)
    input_grads = {name: grads.get(inputs[name]) for name in wrt if name in inputs}
    return Flow("gradcli", inputs, out_key, steps, values.stats, tracked, grads, input_grads, language=True)


# --- a Python function computing with gradcli's tensors ------------------------------------------------

#: calls the user makes that read a tensor's values out of autograd's sight, by the name the analysis uses
_READS = {"item": "item", "__float__": "item", "__int__": "item", "__index__": "item", "__bool__": "item",
          "__complex__": "item", "tolist": "tolist", "numpy": "numpy", "__array__": "numpy"}  # fmt: skip
#: library functions whose own name says less than the primitive they apply (closures, operators)
_GENERIC = {"fn", "method", "wrapper", "inner", "function"}
#: calls that return their own tensor without computing anything
_SAME = {"requires_grad_", "retain_grad", "register_hook", "to", "contiguous", "cpu", "double"}
#: in-place writes that do not read the value they replace
_FRESH = {"zero_", "fill_", "copy_", "normal_", "uniform_"}
_PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # not pathlib: start-up
_NOT_USERS = (_PACKAGE, os.path.dirname(os.path.realpath(np.__file__)), os.path.dirname(os.__file__))


class _Call:
    """One call from the user's code into gradcli's, open until it returns."""

    __slots__ = ("frame", "inputs", "numbers", "prim", "bounds", "inner")

    def __init__(self, frame: Any, arguments: list[Any]) -> None:
        self.frame = frame
        self.inner: str | None = None  # the name of the first function of gradcli's it called
        self.inputs = [a for a in arguments if isinstance(a, gc.Tensor)]
        self.numbers = [a for a in arguments if isinstance(a, (int, float)) and not isinstance(a, bool)]
        self.prim: str | None = None  # the first primitive it applied
        self.bounds: tuple[Any, Any] | None = None  # a clamp's (min, max)


def _arguments(frame: Any) -> list[Any]:
    """A call's arguments, those in its ``*args`` and ``**kwargs`` and in lists (``stack``) too."""
    code, local = frame.f_code, frame.f_locals
    count = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 4) + bool(code.co_flags & 8)
    found: list[Any] = []
    for value in [local[n] for n in code.co_varnames[:count] if n in local]:
        if isinstance(value, dict):
            value = list(value.values())
        found.extend(value if isinstance(value, (list, tuple)) else [value])
    return found


def _results(call: _Call, name: str, result: Any) -> list[Any]:
    """The tensors a call made: what it returned, or the tensor it wrote (``x[i] = v`` returns None)."""
    if name == "__setitem__" and call.inputs:
        return [call.inputs[0]]
    return [r for r in (result if isinstance(result, (tuple, list)) else [result]) if isinstance(r, gc.Tensor)]


def _clamp(bounds: tuple[Any, Any]) -> tuple[str, list[Any]]:
    """A clamp's name as the analysis reads it (``clamp_min`` with one bound) and its numeric bounds."""
    low, high = bounds
    op = "clamp" if low is not None and high is not None else "clamp_min" if high is None else "clamp_max"
    return op, [b for b in (low, high) if b is not None and not isinstance(b, gc.Tensor)]


def _user_line(frame: Any) -> str | None:
    """``file.py:LINE`` of the first frame from ``frame`` outward in the user's code."""
    while frame is not None:
        name = frame.f_code.co_filename
        if _USERS.get(name) is None:
            _USERS[name] = not name.startswith("<") and not os.path.realpath(name).startswith(_NOT_USERS)
        if _USERS[name]:
            return f"{os.path.basename(name)}:{frame.f_lineno}"
        frame = frame.f_back
    return None


_USERS: dict[str, bool] = {}  # a file's name -> whether it is the user's (not gradcli's, NumPy's, Python's)


class _Watcher:
    """Every call the user's function makes into gradcli on this thread (a profile function): each is an
    operation, named by the primitive it applied where its own name says less (``x * w``: ``mul``)."""

    def __init__(self, values: _Values) -> None:
        self.values = values
        self.steps: list[Step] = []
        self.open: list[_Call] = []
        self.iterating: dict[Any, list[Any]] = {}  # the frame of ``iter(x)``'s generator -> [x]
        self.tracking: dict[int, bool] = {}  # a step's output -> whether autograd tracked it when made

    def _made_inside(self, call: _Call, results: list[Any]) -> bool:
        """Whether ``call`` returned what a step inside it made, as it was (a custom Function's output,
        given its gradient function by ``apply``, is a step of its own)."""
        made = [(self.values.keys.get(id(r)), r) for r in results if not any(r is t for t in call.inputs)]
        return bool(made) and all(k is not None and self.tracking.get(k) == bool(r.requires_grad) for k, r in made)

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call":
            if not code.co_filename.startswith(_PACKAGE):
                return
            back = frame.f_back
            if back is not None and not back.f_code.co_filename.startswith(_PACKAGE):
                self.open.append(_Call(frame, self.iterating.get(frame) or _arguments(frame)))
            elif self.open and back is self.open[-1].frame and self.open[-1].inner is None:
                self.open[-1].inner = code.co_name
            if self.open and code.co_name == "clamp" and "min" in code.co_varnames:  # its bounds, however called
                self.open[-1].bounds = (frame.f_locals.get("min"), frame.f_locals.get("max"))
        elif event == "return" and self.open:
            call = self.open[-1]
            if frame is call.frame:
                self.open.pop()
                self._close(call, arg)
            elif call.prim is None and "prim" in code.co_varnames and code.co_filename.startswith(_PACKAGE):
                call.prim = getattr(frame.f_locals.get("prim"), "name", None)

    def _close(self, call: _Call, result: Any) -> None:
        name = call.frame.f_code.co_name
        op = self._name(call, name)
        if getattr(result, "gi_frame", None) is not None and call.inputs:  # ``for a in x``: each a is x's
            self.iterating[result.gi_frame] = call.inputs
            return
        results = _results(call, name, result)
        if self._made_inside(call, results):
            return  # made by the user's code it called back (a function under ``@gc.no_grad()``): its steps are there
        if not results and op not in ("item", "tolist", "numpy"):
            return  # (a shape, a dtype, a context manager)
        inputs = [self.values.key(t) for t in call.inputs]
        inplace = bool(results) and bool(call.inputs) and results[0] is call.inputs[0]
        if inplace and not (op.endswith("_") or name.startswith("__i")):
            return  # (``+x``, ``x.requires_grad_()``: the same tensor)
        overwrites = inputs[0] if inplace else None
        if inplace and op in _FRESH:
            inputs = inputs[1:]
        outputs = [self.values.key(r, made=True) for r in results]
        self.tracking.update({k: bool(r.requires_grad) for k, r in zip(outputs, results)})
        op, numbers = _clamp(call.bounds) if call.bounds is not None else (op, call.numbers)
        line = _user_line(call.frame.f_back)
        self.steps.append(Step(op, inputs, outputs, line, None, is_grad_enabled(), inplace, overwrites, numbers))

    @staticmethod
    def _name(call: _Call, name: str) -> str:
        if name == "watched" and call.inner:  # (lang/python.py's watch on a method that reads values out)
            name = call.inner
        if name in _READS:
            return _READS[name]
        if name == "data":
            return "detach"
        if name == "__setitem__":
            return "index_put_"
        if name == "<genexpr>":  # (the elements of ``for a in x``)
            return "unbind"
        if name == "apply" and isinstance(call.frame.f_locals.get("cls"), type):  # a custom Function
            return call.frame.f_locals["cls"].__name__
        if name.startswith("__i") and call.prim:  # x += y
            return call.prim + "_"
        if call.prim and (name.startswith("_") or name in _GENERIC):
            return call.prim
        return name[2:-2] if name.startswith("__") and name.endswith("__") else name


def record_function_flow(program: Any, given: Mapping[str, Any], wrt: Sequence[str]) -> Flow:
    """Run ``program`` (a Python function computing with gradcli's tensors) once at ``given``, those in
    ``wrt`` requiring grad, each call it makes into gradcli an operation at its line; the output is
    summed when it is not a scalar."""
    from .python import run_function  # lazy: start-up, a program of the language never runs a Python function

    values = _Values()
    watcher = _Watcher(values)
    inputs: dict[str, int] = {}

    def call(**arguments: Any) -> Any:
        inputs.update({n: values.key(t) for n, t in arguments.items() if isinstance(t, gc.Tensor)})
        values.outside.clear()
        previous = sys.getprofile()
        sys.setprofile(watcher)
        try:
            return program.function(**arguments)
        finally:
            sys.setprofile(previous)

    evaluation = run_function(program, given, wrt, call)
    output = evaluation.outputs[0] if len(evaluation.outputs) == 1 else None
    out_key = None if output is None else values.key(output)
    grads = values.gradients(output)
    input_grads = {name: grads.get(inputs[name]) for name in wrt if name in inputs}
    tracked = {k: bool(t.requires_grad) for k, t in values.tensors.items()}
    return Flow("gradcli", inputs, out_key, watcher.steps, values.stats, tracked, grads, input_grads, values.outside)
