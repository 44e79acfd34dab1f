"""A program to differentiate: an expression of the language, or a Python function.

``load`` turns what the user typed into a ``Program``; ``value_and_grad`` and
``symbolic_derivatives`` are what ``gradcli eval`` and ``gradcli diff``
compute, as library calls the commands only format.
"""

from __future__ import annotations

import inspect
import re
import sys
from _thread import RLock
from _thread import _local as _thread_local  # threading.local, without importing threading at start-up
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import Source, UsageError, note_user_code
from ..memory import check_fits
from ..records import Record, fill
from . import ast
from .evaluate import Evaluation, check_names, evaluate, free_variables, limit_size
from .library import gc
from .parser import MAX_CHARACTERS, check_size, parse
from .values import decode, program_too_long, read_bounded, read_text, seed_vector, text_bytes_limit

#: EXPR names a Python function only when the whole argument (stripped) is FILE.py:FUNC with no
#: whitespace or '#' in FILE, and FILE exists: anything else is an expression, so text that merely
#: holds "helper.py:f" (a comment) is never run. ``--python FILE:FUNC`` takes any path.
_PYTHON_FUNCTION = re.compile(r"^(?P<path>[^\s#]+\.py):(?P<name>[A-Za-z_][A-Za-z0-9_]*)$")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Program:
    """What to differentiate: ``text`` (a parsed program) or a Python ``function``.

    A long expression that the flat road (flat.py) reads is parsed into a syntax tree only when
    something asks for ``tree``: ``eval`` at a point of float numbers never does."""

    def __init__(
        self,
        origin: str,
        tree: ast.SyntaxTree | None = None,
        function: Callable[..., Any] | None = None,
        escapes: list[str] | None = None,
        *,
        flat: Any = None,
    ) -> None:
        self.origin = origin
        self._tree = tree
        self.function = function
        #: how a Python function took values out of autograd's sight while it ran (``float()``, ``.item()``...)
        self.escapes: list[str] = [] if escapes is None else escapes
        self.flat = flat
        self.source: str | None = None  # the file the program was read from (-f, FILE.py:func)

    def __repr__(self) -> str:
        return f"Program(origin={self.origin!r}, tree={self.tree!r}, function={self.function!r})"

    @property
    def tree(self) -> ast.SyntaxTree | None:
        if self._tree is None and self.flat is not None:
            self._tree = parse(self.flat.text, self.origin)  # the origin messages name
        return self._tree

    @property
    def text(self) -> str | None:
        """The program's source text (None for a Python function)."""
        if self.flat is not None:
            return self.flat.text
        return self._tree.text if self._tree is not None else None

    @property
    def variables(self) -> list[str]:
        """Free variables in order of first appearance (a function's parameters)."""
        if self._tree is None and self.flat is not None:
            return self.flat.free_variables()
        if self.tree is not None:
            return free_variables(self.tree)
        assert self.function is not None
        return [
            p.name
            for p in inspect.signature(self.function).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]

    def free_variables(self, given: Any = ()) -> list[str]:
        """``evaluate.free_variables`` of the program's text (constants count when ``given`` a value)."""
        if self._tree is None and self.flat is not None:
            return self.flat.free_variables(given)
        assert self.tree is not None
        return free_variables(self.tree, given)

    def run(self, values: Mapping[str, Any], wrt: Sequence[str] = (), record_steps: bool = False) -> Evaluation:
        if self.tree is not None:
            check_names(self.tree, values)
            with np.errstate(all="ignore"):
                return evaluate(self.tree, values, wrt, record_steps=record_steps)
        return _run_function(self, values, wrt)


def _from_text(text: str, origin: str) -> Program:
    """A program of the language: on the flat road when it is one long scalar expression (flat.py)."""
    from .flat import compile_flat

    check_size(Source(text, origin))  # the flat road's estimate; the full parser counts the tokens
    flat = compile_flat(text)
    if flat is not None:
        return Program(origin, flat=flat)
    return Program(origin, tree=parse(text, origin))


def load(expression: str | None, file: str | None = None, python: str | None = None) -> Program:
    """The program named on the command line: EXPR, ``-`` (stdin), ``-f FILE``, ``file.py:func``
    or ``--python FILE:FUNC``; ``program.source`` is the file it was read from (None for EXPR or stdin)."""
    program = _load(expression, file, python)
    if python is not None:
        program.source = python.rpartition(":")[0]
    elif file is not None:
        program.source = None if file == "-" else file
    elif program.function is not None:
        program.source = expression.strip().rpartition(":")[0]  # type: ignore[union-attr]
    return program


def _load(expression: str | None, file: str | None, python: str | None) -> Program:
    if python is not None:
        if file is not None or expression not in (None, ""):
            other = "-f FILE" if file is not None else "EXPR"
            raise UsageError(f"give the program either as {other} or with --python FILE:FUNC, not both")
        path, colon, name = python.rpartition(":")
        if not colon or not path or not _IDENTIFIER.fullmatch(name):
            raise UsageError(f"--python {python!r}: give FILE:FUNC, a Python file and the name of a function in it")
        return Program(python, function=_load_function(path, name))
    if file is not None and expression not in (None, ""):
        raise UsageError("give the expression either as EXPR or with -f FILE, not both")
    if file is not None:
        text = read_stdin() if file == "-" else read_text(file, "-f", text_bytes_limit(), program_too_long(file))
        return _from_text(text.removeprefix("\ufeff"), file)  # a BOM, as --points takes it
    if expression is None:
        raise UsageError("missing EXPR: give an expression, - to read standard input, or -f FILE")
    if expression == "-":
        return _from_text(read_stdin().removeprefix("\ufeff"), "<stdin>")
    match = _PYTHON_FUNCTION.match(expression.strip())
    if match and _is_file(match["path"]):
        return Program(expression, function=_load_function(match["path"], match["name"]))
    try:
        return _from_text(expression, "expression")
    except UsageError:
        if match:  # meant as a function, surely: say what is missing rather than a syntax error
            raise UsageError(f"{match['path']}: no such file") from None
        raise


def _is_file(path: str) -> bool:
    from pathlib import Path

    return Path(path).is_file()


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
    import importlib.util  # here, as pathlib: a plain expression's start-up does without them
    from pathlib import Path

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
        from .evaluate import suggest

        defined = [n for n, f in vars(module).items() if inspect.isfunction(f) and not n.startswith("_")]
        raise UsageError(f"{path} has no function {name!r}{suggest(name, defined)}")
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
    note_user_code(f"{path}:{name}")
    return function


def _run_function(program: Program, values: Mapping[str, Any], wrt: Sequence[str]) -> Evaluation:
    assert program.function is not None
    parameters = program.variables
    missing = [p for p in parameters if p not in values]
    if missing:
        raise UsageError(f"{program.origin} needs --at {missing[0]}=... (its parameters: {', '.join(parameters)})")
    inputs: dict[str, gc.Tensor] = {}
    for name, value in values.items():
        # a Tensor is used as is: it may be a leaf of an outer computation (jacobian_blocks)
        t = value if isinstance(value, gc.Tensor) else gc.tensor(value)
        if name in wrt and not t.requires_grad:
            t.requires_grad_(True)
        t.name = name
        inputs[name] = t
    try:
        with np.errstate(all="ignore"), _watching_escapes(program.escapes):
            result = program.function(**{p: inputs[p] for p in parameters})
    except Exception as exc:  # the user's function raised: report it, not a traceback of ours
        raise UsageError(f"{program.origin} raised {type(exc).__name__}: {exc}") from None
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    if not results:
        raise UsageError(f"{program.origin} returned an empty {type(result).__name__}: {RETURNS}")
    outputs = [_output(program, r) for r in results]
    labels = (
        [f"{program.function.__name__}[{i}]" for i in range(len(outputs))]
        if len(outputs) > 1
        else [program.function.__name__]
    )
    nonfinite = next((f"{labels[i]} gave {'nan' if np.isnan(o.array).any() else 'inf'}"
                      for i, o in enumerate(outputs) if not np.isfinite(o.array).all()), None)  # fmt: skip
    return Evaluation(outputs, inputs, {}, labels, nonfinite)


RETURNS = "return a tensor, a number, or a tuple or list of them"


def _output(program: Program, result: Any) -> gc.Tensor:
    """One of the function's results as a tensor; anything but numbers is refused, by name."""
    if isinstance(result, gc.Tensor):
        return result
    what = None
    if result is None or isinstance(result, (str, bytes, dict, set, frozenset)) or inspect.isgenerator(result):
        what = "None" if result is None else f"a {type(result).__name__}"
    else:
        try:
            tensor = gc.tensor(result)
        except Exception:  # a list of strings, an object of the user's own class...
            tensor = None
        if tensor is None or tensor.dtype.kind not in "biufc":
            what = f"a {type(result).__name__} that is not numbers"
    if what is not None:
        raise UsageError(f"{program.origin} returned {what}: {RETURNS}")
    return tensor


#: Tensor methods through which a Python function takes values out of autograd's sight.
_ESCAPES = {"__float__": "float()", "__int__": "int()", "__complex__": "complex()", "item": ".item()",
            "tolist": ".tolist()", "numpy": ".numpy()", "__array__": "NumPy on its values"}  # fmt: skip


class _Watch(_thread_local):
    """What this thread asked the patched Tensor methods to do (``_patched``): a thread that asked
    for nothing (another thread's work meanwhile) gets their plain behaviour."""

    escapes: list[str] | None = None  # where a run notes how its function leaves autograd
    depth = 0  # float(x) calls x.item(): only the outermost way counts
    detach: tuple[Any, Any, list[int]] | None = None  # detach_fixed's (record, replay, [calls so far])


_WATCH = _Watch()
_PATCHING = RLock()
_users: dict[str, int] = {}  # blocks using each patch, in every thread
_saved: dict[str, dict[str, Any]] = {}  # each patch's replaced methods, the class's own


@contextmanager
def _patched(kind: str, replacements: Callable[[], dict[str, Any]]) -> Iterator[None]:
    """Tensor's methods replaced while any thread's block of ``kind`` runs: installed by the first,
    the class's own put back by the last (a class is shared by every thread; what each thread's
    replacements do is read from ``_WATCH``)."""
    cls = gc.Tensor
    with _PATCHING:
        if not _users.get(kind):
            new = replacements()
            _saved[kind] = {name: cls.__dict__[name] for name in new}
            for name, method in new.items():
                setattr(cls, name, method)
        _users[kind] = _users.get(kind, 0) + 1
    try:
        yield
    finally:
        with _PATCHING:
            _users[kind] -= 1
            if not _users[kind]:
                for name, method in _saved.pop(kind).items():
                    setattr(cls, name, method)


def _escape_watchers() -> dict[str, Any]:
    saved = {name: gc.Tensor.__dict__[name] for name in (*_ESCAPES, "data")}

    def watch(method: Callable[..., Any], how: str) -> Callable[..., Any]:
        def watched(self: gc.Tensor, *args: Any, **kwargs: Any) -> Any:
            found = _WATCH.escapes
            if found is None:
                return method(self, *args, **kwargs)
            if self._edge is not None and not _WATCH.depth and how not in found:
                found.append(how)
            _WATCH.depth += 1
            try:
                return method(self, *args, **kwargs)
            finally:
                _WATCH.depth -= 1

        return watched

    watchers = {name: watch(saved[name], how) for name, how in _ESCAPES.items()}
    data = saved["data"]
    watchers["data"] = property(watch(data.fget, ".data"), data.fset, doc=data.__doc__)
    return watchers


@contextmanager
def _watching_escapes(found: list[str]) -> Iterator[None]:
    """While the user's function runs on this thread, note each way it takes the values of a tensor
    that requires grad out of the graph (math.sin(float(x)), np.sin(x.data), x.item()...)."""
    previous = _WATCH.escapes, _WATCH.depth
    _WATCH.escapes, _WATCH.depth = found, 0
    try:
        with _patched("escapes", _escape_watchers):
            yield
    finally:
        _WATCH.escapes, _WATCH.depth = previous


def _fixed_detach() -> dict[str, Any]:
    original = gc.Tensor.__dict__["detach"]

    def detach(self: gc.Tensor) -> gc.Tensor:
        out = original(self)
        fixed = _WATCH.detach
        if fixed is None:
            return out
        record, replay, count = fixed
        if record is not None:
            record.append(out.array)
        elif replay is not None:
            k = count[0]
            count[0] += 1
            if k < len(replay) and np.shape(replay[k]) == out.shape:
                return gc.tensor(replay[k])
        return out

    return {"detach": detach}


@contextmanager
def detach_fixed(record: list[Any] | None = None, replay: Sequence[Any] | None = None) -> Iterator[None]:
    """``detach()`` as a constant when a Python function is called at other points: its values at
    the point are recorded, then given again, in call order, wherever the shapes still match: as
    the replay of an expression keeps detach(...) fixed, so both roads judge the same derivative.
    (On this thread only: another thread's ``detach()`` meanwhile is its own.)"""
    previous = _WATCH.detach
    _WATCH.detach = (record, replay, [0])
    try:
        with _patched("detach", _fixed_detach):
            yield
    finally:
        _WATCH.detach = previous


def leaves_autograd(program: Program, unconnected: Sequence[str] = (), detail: str = "") -> str:
    """Why autograd misses a derivative of a Python function: the ways it leaves gradcli's operations."""
    how = f" ({', '.join(program.escapes)} of a tensor that requires grad)" if program.escapes else ""
    parts = [f"{program.origin} leaves gradcli's operations{how}, where autograd cannot follow it"]
    if unconnected:
        them = ", ".join(unconnected)
        parts.append(f"autograd's graph does not connect {them} to the output, yet changing {them} changes it")
    if detail:
        parts[-1] += f" ({detail})"
    parts.append("use gradcli's functions (gc.sin, ...) instead of math, float(), .item() or NumPy on .data")
    return "; ".join(parts)


def unseen_derivative(
    program: Program,
    values: Mapping[str, Any],
    names: Sequence[str],
    jacobian: np.ndarray,
    seed: Any = None,
    unconnected: Sequence[str] = (),
    labels: Sequence[str] | None = None,
) -> str | None:
    """For a Python function that left autograd's sight (or whose output autograd does not connect to
    an input): whether its outputs really change otherwise than ``jacobian`` (rows: output elements,
    or the one row of v^T J with ``seed``; columns: the elements of ``names``) says, tried along one
    random direction with central differences at two steps (``labels`` name the rows). The warning
    to give, or None."""
    unconnected = [n for n in names if n in unconnected]
    if program.function is None or not names or not (program.escapes or unconnected):
        return None
    base = {n: np.asarray(getattr(values[n], "_value", values[n])) for n in names}
    if any(b.dtype.kind not in "iuf" for b in base.values()) or not np.isfinite(jacobian).all():
        return None
    rng = np.random.default_rng(0)
    direction = {
        n: rng.choice([-1.0, 1.0], size=b.shape) * rng.uniform(0.5, 1.0, size=b.shape) for n, b in base.items()
    }
    dtype = np.result_type(*base.values(), np.float32)
    root_eps = float(np.sqrt(np.finfo(dtype).eps))
    scale = max(max(float(np.max(np.abs(b), initial=0.0)) for b in base.values()), 1.0)
    flat = np.concatenate([direction[n].reshape(-1) for n in names])
    predicted = np.asarray(jacobian, dtype=np.float64).reshape(-1, flat.size) @ flat
    detached: list[Any] = []

    def along(t: float) -> np.ndarray:
        moved = {**values, **{n: (base[n] + t * direction[n]).astype(dtype) for n in names}}
        with gc.no_grad(), detach_fixed(replay=detached):
            evaluation = program.run(moved, ())
            outputs = evaluation.outputs
            if seed is not None:
                outputs = [gc.sum(single_output(evaluation) * gc.as_tensor(seed))]
        return np.concatenate([np.asarray(o.array, dtype=np.float64).reshape(-1) for o in outputs])

    h = root_eps * scale
    try:
        with gc.no_grad(), detach_fixed(record=detached):
            program.run(dict(values), ())
        slopes = [(along(step) - along(-step)) / (2 * step) for step in (h, h / 2)]
    except UsageError:  # the function refuses a nearby point: nothing to say
        return None
    if slopes[1].shape != predicted.shape or not np.isfinite(slopes).all():
        return None
    tolerance = 100 * root_eps * np.maximum(np.maximum(np.abs(slopes[0]), np.abs(predicted)), 1e-300)
    wrong = (np.abs(slopes[0] - slopes[1]) <= tolerance) & (np.abs(slopes[1] - predicted) > tolerance)
    if not wrong.any():
        return None
    k = int(np.argmax(wrong))
    which = labels[k] if labels is not None and k < len(labels) else "the output"
    detail = f"along a random direction {which} changes at {slopes[1][k]:.10g}, the derivative says {predicted[k]:.10g}"
    return "autograd misses a derivative: " + leaves_autograd(program, unconnected, detail)


def unused_values(program: Program, values: Mapping[str, Any]) -> str | None:
    """A warning for ``--at`` names the program does not use (a typo such as ``xx=3``), or None."""
    used = program.variables
    unused = [name for name in values if name not in used]
    if not unused:
        return None
    from .evaluate import suggest

    hints = {name: suggest(name, used).removeprefix("; ").replace("'", "") for name in unused}
    if len(unused) == 1:
        hint = hints[unused[0]]
        return f"--at {unused[0]} is not used by the expression" + (f" ({hint})" if hint else "")
    hint = "; ".join(f"{name}: {h}" for name, h in hints.items() if h)
    said = ", ".join(unused[:-1]) + " and " + unused[-1]
    return f"--at {said} are not used by the expression" + (f" ({hint})" if hint else "")


def nothing_to_differentiate(command: str, program: Program, values: Mapping[str, Any]) -> str:
    """Why ``command`` has no variable to differentiate by (as ``diff`` refuses it)."""
    if program.variables or not values:
        return f"{command} needs a variable to differentiate by: give one a value with --at NAME=..."
    given = ", ".join(values)
    return (
        f"{command}: the expression has no variable to differentiate by (it uses none of --at {given}; "
        f"name one with --wrt to see its derivative, 0)"
    )


def unseen_in_gradient(program: Program, values: Mapping[str, Any], result: Gradient) -> str | None:
    """``unseen_derivative`` for what ``value_and_grad`` gave."""
    names = list(result.gradient)
    if program.function is None or not names:
        return None
    row = np.concatenate([np.asarray(g, dtype=np.float64).reshape(-1) for g in result.gradient.values()])
    return unseen_derivative(program, values, names, row[None, :], result.seed, result.unconnected)


# --- what the commands compute -----------------------------------------------------------------


def resolve_wrt(
    program: Program, values: Mapping[str, Any], wrt: Sequence[str] | None, unused: bool = True
) -> list[str]:
    """``--wrt`` names, checked; by default every free variable given a value, in order of first
    appearance. When the expression uses none of them: all of them with ``unused`` (``check`` checks
    their zero derivatives, a data file keeps its columns), else none (eval, jacobian and hessian
    show no derivative of a variable the expression does not use)."""
    if not wrt:
        variables = program.free_variables(values) if program.text is not None else program.variables
        return [v for v in variables if v in values] or (list(values) if unused else [])
    known = set(program.variables) | set(values)
    for name in wrt:
        if name not in known:
            raise UsageError(f"--wrt {name}: '{name}' is neither in the expression nor given with --at")
        if name not in values:
            raise UsageError(f"--wrt {name}: give it a value with --at {name}=...")
    return list(wrt)


class Gradient(Record):
    """``value`` of the output and d(output)/d(variable) for each variable (a VJP with a seed)."""

    _fields = ("value", "gradient", "evaluation", "backward_nonfinite", "unconnected", "seed")

    def __init__(
        self,
        value: np.ndarray,
        gradient: dict[str, np.ndarray],
        evaluation: Evaluation,
        backward_nonfinite: str | None = None,  # where the backward pass first gave a NaN or an infinity
        unconnected: tuple[str, ...] = (),  # variables the output does not depend on, in autograd's graph
        seed: Any = None,  # v of v^T J, when given
    ) -> None:
        fill(self, locals())


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
    names = resolve_wrt(program, values, wrt, unused=False)
    if program.flat is not None and seed is None:
        found = program.flat.value_and_grad(values, names)
        if found is not None:
            return _flat_gradient(program, found, names)
    evaluation = program.run(values, names)
    output = single_output(evaluation)
    if seed is None and output.numel() != 1:
        raise UsageError(SCALAR_ONLY.format(shape=output.shape))
    vector = None if seed is None else seed_vector(seed, output.shape)
    inputs = [evaluation.inputs[n] for n in names]
    if output.requires_grad and inputs:
        found = gc.grad(output, inputs, grad_outputs=vector, allow_unused=True)
    else:
        found = (None,) * len(inputs)
    grads = [gc.zeros_like(t) if g is None else g for g, t in zip(found, inputs)]
    value = output.array if output.numel() != 1 or seed is not None else np.asarray(output.array).reshape(())
    gradient = {n: np.asarray(g.array) for n, g in zip(names, grads)}
    unconnected = tuple(n for n, g in zip(names, found) if g is None)
    result = Gradient(np.asarray(value), gradient, evaluation, unconnected=unconnected, seed=vector)
    if evaluation.nonfinite is None and not all(np.isfinite(g).all() for g in gradient.values()):
        result.backward_nonfinite = backward_anomaly(program, values, names, vector)
    return result


def _flat_gradient(program: Program, found: Any, names: Sequence[str]) -> Gradient:
    """``value_and_grad``'s result from the flat road's ``(value, differentiable, grads, inputs)``."""
    value, _, grads, inputs = found
    output = gc.tensor(value)
    start, end = program.flat.span
    evaluation = Evaluation([output], inputs, {}, [Source(program.flat.text).excerpt(start, end)])
    gradient = {n: np.asarray(gc.zeros_like(inputs[n]).array if grads[n] is None else grads[n]) for n in names}
    unconnected = tuple(n for n in names if grads[n] is None)
    return Gradient(np.asarray(output.array).reshape(()), gradient, evaluation, unconnected=unconnected)


def backward_anomaly(
    program: Program, values: Mapping[str, Any], names: Sequence[str], seed: Any, row: int | None = None
) -> str | None:
    """The program run again in anomaly mode: which operation's derivative first gave a NaN or an
    infinity from finite values, as ``'sqrt(x)' at column 1 (SqrtBackward0) gave inf from input 0``.
    ``row``: of the Jacobian, the output element whose derivative is sought (``seed`` is ignored)."""
    from ..autograd.anomaly import detect_anomaly, inputs_text

    with detect_anomaly(raise_error=False) as mode, np.errstate(all="ignore"):
        evaluation = program.run(values, names, record_steps=True)
        if row is None:
            output = single_output(evaluation)
        else:  # the one element: no other output's zero seed meets an infinity (as jacobian_blocks)
            sizes = np.cumsum([np.size(o.array) for o in evaluation.outputs])
            k = int(np.searchsorted(sizes, row, side="right"))
            output, seed = evaluation.outputs[k].reshape(-1)[row - (sizes[k - 1] if k else 0)], None
        if not output.requires_grad:
            return None
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


def evaluate_text(text: str, values: Mapping[str, Any]) -> np.ndarray | None:
    """The value of an expression in the language (a derivative ``diff`` printed) at ``values``, as
    ``eval`` computes it; None when it does not run there."""
    try:
        program = load(text)
        with np.errstate(all="ignore"):
            outputs = program.run({n: v for n, v in values.items() if n in program.variables}, []).outputs
    except Exception:  # noqa: BLE001 - a text that does not run has no value to state
        return None
    return np.asarray(outputs[0].array, dtype=np.float64) if len(outputs) == 1 else None


def symbolic_derivatives(
    program: Program, wrt: Sequence[str] | None, shapes: Mapping[str, tuple[int, ...]] | None = None
) -> dict[str, Any]:
    """SymPy's derivative of the (single, scalar) output with respect to each variable, in the
    variables only (a program's steps expanded); simplified when it is small."""
    return {row.name: row.expanded for row in explain_derivatives(program, wrt, shapes).rows if not row.step}


class SymbolicRow(Record):
    """d output / d ``name``: ``derivative`` in the program's own names, ``expanded`` in its variables."""

    _fields = ("name", "step", "derivative", "expanded")

    def __init__(
        self,
        name: str,
        step: bool,  # a statement's name (True) or a variable (False)
        derivative: Any,
        expanded: Any,
    ) -> None:
        fill(self, locals())


class Explanation(Record):
    """What ``diff`` shows: for a program, one row per statement (last first, as backpropagation
    runs) then one per variable; for an expression, one per variable."""

    _fields = ("output", "rows", "at", "statements")

    def __init__(
        self,
        output: str | None,  # the output's name, when a statement names it
        rows: list[SymbolicRow],
        at: Callable[[Any, Mapping[str, Any]], Any],  # (expression, exact point) -> its value there
        statements: str = "",  # the program's statements, which give the steps' names their values
    ) -> None:
        fill(self, locals())

    def label(self, row: SymbolicRow) -> str:
        return f"d{self.output or ''}/d{row.name}"


def explain_derivatives(
    program: Program, wrt: Sequence[str] | None, shapes: Mapping[str, tuple[int, ...]] | None = None
) -> Explanation:
    """The derivative of the (single, scalar) output: an expression's by SymPy at once, simplified;
    a program's statement by statement (``symbolic.differentiate_program``)."""
    if program.tree is None:
        raise UsageError("diff needs an expression; a Python function has no symbolic form")
    check_names(program.tree, set(program.variables))
    from . import symbolic
    from .unparse import unparse

    tree = program.tree
    if tree.statements and len({s.name for s in tree.statements}) == len(tree.statements):
        found = symbolic.differentiate_program(tree, shapes)
        names = _wrt_names(wrt, found.variables)
        rows = [SymbolicRow(n, True, d, None) for n, d in found.steps if n != found.output]
        rows += [SymbolicRow(n, False, found.inputs[n], found.expand(found.inputs[n])) for n in names]
        statements = "; ".join(f"{s.name} = {unparse(s.value)}" for s in tree.statements)
        return Explanation(found.output, rows, found.at, statements)
    outputs, symbols = symbolic.to_sympy(tree, shapes)
    if len(outputs) != 1 or isinstance(outputs[0], np.ndarray):
        raise UsageError("diff differentiates one scalar output; use gradcli jacobian for several")
    rows = []
    for name in _wrt_names(wrt, symbols):
        derivative = symbolic.derivative_of(outputs[0], symbols[name])
        rows.append(SymbolicRow(name, False, derivative, derivative))
    return Explanation(None, rows, lambda expr, point: symbolic.value_at(expr, symbols, point))


def _wrt_names(wrt: Sequence[str] | None, symbols: Mapping[str, Any]) -> list[str]:
    names = list(wrt) if wrt else list(symbols)
    if not names:
        raise UsageError("diff: the expression has no variable to differentiate by")
    for name in names:
        if name not in symbols:
            raise UsageError(f"--wrt {name}: '{name}' is not a variable of the expression")
    return names


def derivative_text(
    program: Program,
    name: str,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    form: str = "language",
) -> str:
    """The text ``gradcli diff`` prints for d output/d ``name`` (a variable, or a statement's name):
    ``form`` "language" (what ``eval`` reads back, given the program's statements), "sympy" or "latex"."""
    explanation = explain_derivatives(program, None, shapes)
    for row in explanation.rows:
        if row.name == name:
            return formatted(row.derivative, form)
    raise UsageError(f"--wrt {name}: '{name}' is not a variable of the expression")


def formatted(expr: Any, form: str = "language") -> str:
    """A derivative (a SymPy expression, or an object array of them) as text: gradcli's language
    (a whole array as ``2*x`` when each element is the same in its own elements), SymPy's or LaTeX."""
    import sympy as sp

    if form == "language":
        from .printer import array_text, to_language

        return array_text(expr) if isinstance(expr, np.ndarray) else to_language(expr)
    printer = sp.latex if form == "latex" else sp.sstr
    if isinstance(expr, np.ndarray):
        if form == "latex":
            return sp.latex(sp.Array(expr.tolist()))
        return "[" + ", ".join(printer(e) for e in expr.reshape(-1)) + "]" if expr.ndim == 1 else printer(expr.tolist())
    return printer(expr)


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


class Matrix(Record):
    """A labelled matrix: ``rows`` x ``columns`` (Jacobian or Hessian) and how it was computed."""

    _fields = ("rows", "columns", "matrix", "plan", "value", "gradient", "names", "nonfinite")

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
    from ..autograd.functional import jacobian_blocks

    names = resolve_wrt(program, values, wrt, unused=False)
    if not names and not program.variables:  # (a variable without a value is said by the run)
        raise UsageError(nothing_to_differentiate("jacobian", program, values))
    evaluation = program.run(values, names)
    inputs = tuple(np.asarray(values[n], dtype=np.float64) for n in names)
    # batched passes hold several (outputs x inputs) arrays: refuse them before making them
    shape = (sum(np.size(o.array) for o in evaluation.outputs), sum(np.size(x) for x in inputs))
    limit_size(shape, "the Jacobian")
    check_fits("jacobian", *shape, as_json)
    _, outs, blocks, plan = jacobian_blocks(_as_function(program, values, names), inputs, mode)
    rows = [
        label for base, o in zip(output_bases(program, evaluation), outs) for label in element_labels(base, o.shape)
    ]
    columns = [label for n, x in zip(names, inputs) for label in element_labels(n, x.shape)]
    matrix = np.block(
        [[np.asarray(b, dtype=np.float64).reshape(np.size(o.array), np.size(x)) for b, x in zip(row, inputs)]
         for row, o in zip(blocks, outs)]
    ) if blocks and inputs else np.zeros((len(rows), len(columns)))  # fmt: skip
    value = np.concatenate([np.asarray(o.array, dtype=np.float64).reshape(-1) for o in outs])
    jac = Matrix(rows, columns, matrix.reshape(len(rows), len(columns)), plan, value=value, names=names)
    if evaluation.nonfinite:
        jac.nonfinite = f"non-finite value: {evaluation.nonfinite}"
    else:
        jac.nonfinite = _nonfinite_entry(program, values, names, jac)
    return jac


def program_hessian(
    program: Program, values: Mapping[str, Any], wrt: Sequence[str] | None, as_json: bool = False
) -> Matrix:
    """d^2 output / d variables^2 of a scalar output, by forward-over-reverse."""
    from ..autograd.functional import hessian_blocks

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
