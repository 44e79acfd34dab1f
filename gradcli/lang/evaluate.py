"""Syntax tree -> gradcli tensors: running a program records its autograd graph.

The walk is iterative (a 500,000-term sum is a tree that deep). Variables
become leaf tensors (requiring grad when differentiated), numbers stay Python
numbers (weakly typed, as in NumPy), assigned names label their tensors, and
every failure points at the node that caused it.
"""

from __future__ import annotations

import gc as _gc
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..autograd import functions as _library
from ..autograd.anomaly import inputs_text, nonfinite_kind
from ..errors import Source, SyntaxProblem, UsageError
from ..memory import limit_size, max_elements
from ..ops.operators import INFIX, PREFIX
from ..records import Record, fill
from . import ast
from .functions import COMPARISONS, CONSTANTS, FUNCTIONS, compare
from .library import gc, input_tensors

_NUMBERS = (int, float)
_INF = float("inf")
_Tensor = gc.Tensor
_SIGNS = {symbol: row.apply for symbol, row in PREFIX.items()}
#: How each infix operator applies to tensors and numbers: its Python operator, or its library function.
_APPLY = {symbol: row.apply or getattr(_library, row.function) for symbol, row in INFIX.items()}


class Evaluation(Record):
    """What running a program produced."""

    _fields = ("outputs", "inputs", "names", "output_labels", "nonfinite", "steps")

    def __init__(
        self,
        outputs: list[gc.Tensor],
        inputs: dict[str, gc.Tensor],  # the variables, as leaves
        names: dict[str, gc.Tensor],  # every assigned name
        output_labels: list[str],
        nonfinite: str | None = None,  # where a NaN or infinity first appeared
        steps: list[tuple[ast.SyntaxNode, Any]] | None = None,  # (node, value) in evaluation order
    ) -> None:
        steps = [] if steps is None else steps
        fill(self, locals())


def free_variables(program: ast.SyntaxTree, given: Iterable[str] = ()) -> list[str]:
    """Names used before any assignment, in order of first appearance (constants excluded,
    unless ``given`` a value: ``e`` with --at e=3 is a variable)."""
    constants = set(CONSTANTS) - set(given)
    assigned: set[str] = set()
    seen: dict[str, None] = {}
    name_type = ast.Name
    for statement in (*program.statements, program.outputs):
        for node in program.order(statement):
            if node.__class__ is name_type and node.id not in assigned and node.id not in constants:
                seen.setdefault(node.id)
        if isinstance(statement, ast.Assign):
            assigned.add(statement.name)
    return list(seen)


def uses_constant(program: ast.SyntaxTree, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in program.nodes())


#: Names from other notations and libraries that spelling distance does not find: ln is log,
#: NumPy's arc- names are the a- ones. Used only when the target is among the candidates.
ALIASES = {
    "ln": "log",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "arctan2": "atan2",
    "arcsinh": "asinh",
    "arccosh": "acosh",
    "arctanh": "atanh",
    "absolute": "abs",
    "power": "pow",
    "ceiling": "ceil",
    "clip": "clamp",
    "swish": "silu",
}


def suggest(word: str, candidates: Iterable[str]) -> str:
    candidates = list(candidates)
    alias = ALIASES.get(word)
    if alias is None:  # Pi, PI, Sin: the same name in another case
        alias = next((c for c in candidates if c.lower() == word.lower() and c != word), None)
    if alias is not None and alias in candidates:
        return f"; did you mean '{alias}'?"
    import difflib  # lazy: start-up, eval needs it only for a name it does not know

    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def evaluate(
    program: ast.SyntaxTree,
    values: Mapping[str, Any],
    wrt: Iterable[str] = (),
    *,
    record_steps: bool = False,
) -> Evaluation:
    """Run ``program`` with ``values`` for its variables; ``wrt`` variables require grad."""
    source = Source(program.text)
    inputs = input_tensors(values, set(wrt))
    run = Run(source, dict(inputs), record_steps, program)
    collecting = _gc.isenabled()
    _gc.disable()  # evaluation makes no cycles; collections would rescan the growing graph
    try:
        return _run_statements(program, run, source, inputs)
    finally:
        if collecting:
            _gc.enable()


def _run_statements(program: ast.SyntaxTree, run: Run, source: Source, inputs: dict[str, gc.Tensor]) -> Evaluation:
    for statement in program.statements:
        value = run.value_of(statement.value)
        tensor = value if isinstance(value, gc.Tensor) else gc.tensor(value)
        if tensor.name is None:  # an alias ("a = x") keeps its first name; names holds both
            tensor.name = statement.name
        run.env[statement.name] = tensor
        run.names[statement.name] = tensor
    outputs = []
    for item in program.outputs.items:
        value = run.value_of(item)
        outputs.append(value if isinstance(value, gc.Tensor) else gc.tensor(value))
    labels = [source.excerpt(item.start, item.end) for item in program.outputs.items]
    return Evaluation(outputs, inputs, run.names, labels, run.nonfinite, run.steps)


class Run:
    def __init__(self, source: Source, env: dict[str, Any], record: bool, program: ast.SyntaxTree) -> None:
        self.program = program
        self.source = source
        self.env = env
        self.names: dict[str, gc.Tensor] = {}
        self.nonfinite: str | None = None
        self.record = record
        self.steps: list[tuple[ast.SyntaxNode, Any]] = []
        self.handlers = self.__post_init_handlers()
        self.limit = max_elements()  # read (and checked) once a run, whatever the program
        self._masks: frozenset[str] | None = None  # names given a comparison (masks when they index)

    def fail(self, message: str, node: ast.SyntaxNode, offset: int | None = None) -> SyntaxProblem:
        return SyntaxProblem(message, self.source, node.start if offset is None else offset)

    def value_of(self, root: ast.SyntaxNode) -> Any:
        """Evaluate ``root``: post-order on a value stack (each node pops its children's values)."""
        values: list[Any] = []
        handlers = self.handlers
        record, steps = self.record, self.steps
        for node in self.program.order(root):
            n = node.arity
            if n:
                args = values[-n:]
                del values[-n:]
            else:
                args = ()
            try:
                if n > 1:  # an operation on arrays may broadcast: its size is checked before it runs
                    for a in args:
                        if a.__class__ is _Tensor and a.array.ndim:
                            self._size_limit(node, args)
                            break
                value = handlers[node.__class__](node, args)
            except SyntaxProblem:
                raise
            except (ValueError, TypeError, RuntimeError, IndexError, ZeroDivisionError, OverflowError) as exc:
                message, offset = failure(node, args, exc, self.source)
                raise self.fail(message, node, offset) from None
            values.append(value)
            if record:
                steps.append((node, value))
            if n and self.nonfinite is None:
                self._watch(node, value, args)
        return values[0]

    def _watch(self, node: ast.SyntaxNode, value: Any, args: Any) -> None:
        raw = value.array if value.__class__ is gc.Tensor else value
        if raw.__class__ is float or raw.__class__ is np.float64:
            if -_INF < raw < _INF:  # false for nan and for infinities
                return
        elif not isinstance(raw, (np.ndarray, np.generic)) or raw.dtype.kind not in "fc" or np.isfinite(raw).all():
            return
        given = [a for a in args if not isinstance(a, (str, tuple))]
        self.nonfinite = f"{self.source.quote(node.start, node.end)} gave {nonfinite_kind(raw)}{inputs_text(given)}"

    def __post_init_handlers(self) -> dict[type, Any]:
        return {
            ast.Number: lambda node, args: node.value,
            ast.Name: lambda node, args: self.lookup(node),
            ast.Unary: lambda node, args: _SIGNS[node.op](args[0]),
            ast.Binary: lambda node, args: self.binary(node, *args),
            ast.Compare: lambda node, args: compare(gc, COMPARISONS[node.op], *args),
            ast.Conditional: self.conditional,
            ast.Call: self.call,
            ast.Slice: self.slice,
            ast.Index: self.index,
            ast.Vector: self.vector,
        }

    def conditional(self, node: ast.Conditional, args: list[Any]) -> Any:
        then, condition, otherwise = args
        if all(isinstance(v, _NUMBERS) for v in args):
            return then if condition else otherwise
        return gc.where(gc.as_tensor(condition) != 0, then, otherwise)

    def slice(self, node: ast.Slice, args: list[Any]) -> slice:
        parts = iter(args)
        return slice(
            *(None if p is None else self.integer(next(parts), node) for p in (node.lower, node.upper, node.step))
        )

    def index(self, node: ast.Index, args: list[Any]) -> Any:
        target, *items = args
        target = gc.as_tensor(target)
        return target[self.index_items(node, items, target.shape)]

    def index_items(self, node: ast.Index, items: list[Any], shape: tuple[int, ...]) -> tuple[Any, ...]:
        """The items of ``target[...]`` as a NumPy index, checked against the target's ``shape``.

        A number is a position, a slice a range; a vector or matrix is a list of positions
        (whole numbers, any shape: ``x[[0, 2, 0]]``), unless it is written as a comparison
        (``x[x > 0]``, ``lt(a, b)``, a product of comparisons, or a name given one): then it is a
        mask and must have the shape of the axes it covers. Each problem is said at its item.
        """
        if self._masks is None:
            self._masks = mask_names(self.program)
        index: list[Any] = []
        dim = 0
        for item_node, item in zip(node.items, items):
            where = self.source.where(item_node.start)
            if isinstance(item, slice):
                index.append(item)
                dim += 1
                continue
            raw = item.array if isinstance(item, gc.Tensor) else item
            is_mask = np.ndim(raw) > 0 and is_mask_node(item_node, self._masks)
            covers = np.ndim(raw) if is_mask else 1
            if dim + covers > len(shape):
                raise self.fail(
                    f"too many indices at {self.source.where(node.start)}: {len(node.items)} for a value of shape {shape}",
                    node,
                )
            if is_mask:
                covered = shape[dim : dim + covers]
                if np.shape(raw) != covered:
                    raise self.fail(
                        f"a mask (a comparison) must have the shape of the axes it indexes (at {where}): "
                        f"{np.shape(raw)} for {covered}",
                        item_node,
                    )
                index.append(np.asarray(raw) != 0)
                dim += covers
                continue
            if np.ndim(raw) == 0:
                position = self.integer(item, node)
                positions: Any = position
            else:
                values = np.asarray(raw, dtype=np.float64)
                if not (np.isfinite(values).all() and (values == np.trunc(values)).all()):
                    raise self.fail(
                        f"an index must be whole numbers (at {where}), got {values}; "
                        "a mask is written as a comparison: x[x > 0]",
                        item_node,
                    )
                positions = values.astype(np.intp)
            size = shape[dim]
            bad = np.asarray(positions)
            bad = bad[(bad >= size) | (bad < -size)]
            if bad.size:
                of = f" (the value has shape {shape})" if len(shape) > 1 else ""
                raise self.fail(
                    f"indexing at {where}: index {int(bad.flat[0])} is out of range for axis {dim} of size {size}{of}",
                    item_node,
                )
            index.append(positions)
            dim += 1
        return tuple(index)

    def lookup(self, node: ast.Name) -> Any:
        env = self.env
        if node.id in env:
            return env[node.id]
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        if node.id in FUNCTIONS:
            raise self.fail(f"'{node.id}' is a function: call it, {node.id}(...)", node)
        hint = suggest(node.id, [*env, *CONSTANTS])
        raise self.fail(f"unknown name '{node.id}'{hint} (give it a value with --at {node.id}=...)", node)

    def binary(self, node: ast.Binary, a: Any, b: Any) -> Any:
        op = node.op
        if isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS):  # constants fold with IEEE semantics
            fold = INFIX[op].fold
            if fold is None:
                raise self.fail(
                    f"'{op}' needs vectors or matrices at {self.source.where(node.op_start)}", node, node.op_start
                )
            with np.errstate(all="ignore"):
                return float(fold(np.float64(a), np.float64(b)))
        return _APPLY[op](a, b)  # shapes that do not fit: said by failure()

    def _vector_limit(self, node: ast.Vector, args: Any) -> None:
        """``[a, b, ...]`` stacks its items: refused when the stack would be over the limit."""
        count = len(args)
        shape = np.shape(args[0].array if args[0].__class__ is _Tensor else args[0])
        size = count
        for n in shape:
            size *= n
        if size > self.limit:
            limit_size((count, *shape), self.source.quote(node.start, node.end), self.limit)

    def _size_limit(self, node: ast.SyntaxNode, args: Any) -> None:
        """Refuse, before it is allocated, a result over the limit that is larger than its arguments.

        The one place where every operation that can make a value larger than its inputs is
        checked: broadcasting operators and functions, comparisons, conditionals (all of their
        arguments broadcast together), ``@`` and ``[a, b, ...]`` stacking. Reductions, indexing and
        one-argument functions never enlarge a value, and a number never enlarges a result; a
        result no larger than an argument costs no more than the values given.
        """
        cls = node.__class__
        if cls is ast.Vector:
            self._vector_limit(node, args)
            return
        if cls is ast.Call:
            function = FUNCTIONS.get(node.function)
            if function is None or len(args) not in function.elementwise:
                return  # reductions, dot: never larger than an argument; unknown names fail on their own
        elif cls is ast.Index or cls is ast.Slice:
            return
        shapes = [a.array.shape for a in args if a.__class__ is _Tensor]
        if len(shapes) < 2:
            return  # a number never enlarges a result
        first = shapes[0]
        if all(s == first for s in shapes):
            return  # no broadcasting (the common case): the result is an argument's size
        try:
            if cls is ast.Binary and node.op == "@":
                sa, sb = shapes
                if len(sa) < 2 or len(sb) < 2:
                    return
                shape = (*np.broadcast_shapes(sa[:-2], sb[:-2]), sa[-2], sb[-1])
            else:
                shape = np.broadcast_shapes(*shapes)
        except ValueError:
            return  # shapes that do not fit: the operation itself says so
        count = 1
        for n in shape:
            count *= n
        if count > self.limit and count > max(a.array.size for a in args if a.__class__ is _Tensor):
            limit_size(shape, self.source.quote(node.start, node.end), self.limit)

    def call(self, node: ast.Call, args: Any) -> Any:
        function = FUNCTIONS.get(node.function)
        if function is None:
            hint = suggest(node.function, FUNCTIONS)
            raise self.fail(f"unknown function '{node.function}'{hint}", node)
        if len(args) not in function.arities:
            raise self.fail(
                f"{node.function}() takes {function.arity_text()}, got {len(args)} (at {self.source.where(node.start)})",
                node,
            )
        return function.apply(gc, *args)

    def integer(self, value: Any, node: ast.SyntaxNode) -> int:
        raw = value.array if isinstance(value, gc.Tensor) else value
        if np.ndim(raw) != 0 or float(raw) != int(float(raw)):
            raise self.fail(f"an index must be a whole number (at {self.source.where(node.start)}), got {raw}", node)
        return int(float(raw))

    def vector(self, node: ast.Vector, items: Any) -> Any:
        if all(isinstance(v, _NUMBERS) for v in items):
            return gc.tensor(items)
        # each shape once, in the order of the items: [[1, 2], [3]] has (2,), (1,)
        shapes = dict.fromkeys(np.shape(v.array if isinstance(v, gc.Tensor) else v) for v in items)
        if len(shapes) > 1:
            raise self.fail(
                f"the items of a vector must have the same shape (at {self.source.where(node.start)}): "
                + ", ".join(str(s) for s in shapes),
                node,
            )
        return gc.stack([gc.as_tensor(v) for v in items])


_COMPARE_FUNCTIONS = frozenset(prim.name for prim in COMPARISONS.values())


def is_mask_node(node: ast.SyntaxNode, masks: frozenset[str] = frozenset()) -> bool:
    """Whether an index item is written as a comparison (so a mask, not a list of positions)."""
    cls = node.__class__
    if cls is ast.Compare:
        return True
    if cls is ast.Call:
        return node.function in _COMPARE_FUNCTIONS
    if cls is ast.Binary:
        return node.op == "*" and is_mask_node(node.left, masks) and is_mask_node(node.right, masks)
    if cls is ast.Name:
        return node.id in masks
    return False


def mask_names(program: ast.SyntaxTree) -> frozenset[str]:
    """The names a program gives a comparison (``m = x > 0``): ``x[m]`` is a mask."""
    masks: set[str] = set()
    for statement in program.statements:
        if is_mask_node(statement.value, frozenset(masks)):
            masks.add(statement.name)
        else:
            masks.discard(statement.name)
    return frozenset(masks)


def _describe(node: ast.SyntaxNode, source: Source) -> str:
    if isinstance(node, ast.Binary):
        return f"'{node.op}'"
    if isinstance(node, ast.Call):
        return f"{node.function}()"
    if isinstance(node, ast.Index):
        return "indexing"
    text = source.text[node.start : node.end]
    return repr(text if len(text) <= 30 else text[:27] + "...")


def failure(node: ast.SyntaxNode, args: Any, exc: Exception, source: Source) -> tuple[str, int]:
    """The one place where an operation's error (NumPy's, or autograd's in PyTorch's words) is said
    in gradcli's: which shapes met at which operator or function, and the offset of the caret, under
    the operator (``@``, ``+``, the ``[`` of an index, a function's name) rather than an operand."""
    offset = node.start
    if isinstance(node, ast.Binary):
        offset = node.op_start
    elif isinstance(node, ast.Index):
        bracket = source.text.find("[", node.target.end)
        offset = bracket if bracket >= 0 else node.start
    return f"{_describe(node, source)} at {source.where(offset)}: {_reason(exc, node, args)}", offset


def _shape_of(value: Any) -> tuple[int, ...]:
    return tuple(np.shape(value.array if isinstance(value, gc.Tensor) else value))


def _shapes_text(shapes: list[tuple[int, ...]]) -> str:
    texts = [str(s) for s in shapes]
    return texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " and " + texts[-1]


def _reason(exc: Exception, node: ast.SyntaxNode | None = None, args: Any = ()) -> str:
    """NumPy's message for ``exc`` in gradcli's words, from the shapes of the operation's ``args``."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    values = [a for a in args if not isinstance(a, (str, slice, tuple))]
    shapes = [_shape_of(a) for a in values]
    if isinstance(node, ast.Binary):
        op = node.op
    elif isinstance(node, ast.Call):
        op = f"{node.function}()"
    else:
        op = "this operation"
    matmul = (isinstance(node, ast.Binary) and node.op == "@") or "matmul" in text or "(n?,k),(k,m?)" in text
    if matmul and len(shapes) == 2:
        return _matmul_reason(*shapes)
    if "broadcast" in text and len(shapes) >= 2:
        return _broadcast_reason(shapes, op)
    return _numpy_reason(text, shapes, op)


def _numpy_reason(text: str, shapes: list[tuple[int, ...]], op: str) -> str:
    """NumPy's other messages (an index out of range, a matrix not square or singular, a reshape, a
    gufunc's core sizes) in gradcli's words; any other is said as it is."""
    found = re.search(r"index (-?\d+) is out of bounds for (?:axis|dimension) (\d+) with size (\d+)", text)
    if found:
        shape = f" (the value has shape {shapes[0]})" if shapes and len(shapes[0]) > 1 else ""
        return f"index {found[1]} is out of range for axis {found[2]} of size {found[3]}{shape}"
    if "must be square" in text or "square matrix" in text:
        return f"{op} needs a square matrix, got shape {shapes[0] if shapes else '?'}"
    if "Singular matrix" in text:
        return "the matrix is singular: it has no inverse"
    found = re.search(r"cannot reshape array of size (\d+) into shape (.+)", text)
    if found:
        given = f" (shape {shapes[0]})" if shapes else ""
        return f"cannot reshape {found[1]} elements{given} into shape {found[2]}: the number of elements must stay the same"
    if "core dimension" in text or "gufunc" in text:
        sizes = re.search(r"size (\d+) is different from (\d+)", text)
        detail = f": a size {sizes[1]} where {sizes[2]} is needed" if sizes else ""
        return f"shapes {_shapes_text(shapes)} do not fit {op}{detail}"
    return text


def _matmul_reason(sa: tuple[int, ...], sb: tuple[int, ...]) -> str:
    if not sa or not sb:
        return "'@' needs vectors or matrices, not a scalar"
    left, right = sa[-1], sb[0] if len(sb) == 1 else sb[-2]
    where = "first" if len(sb) <= 2 else "second-to-last"
    if left != right:
        return (
            f"shapes {sa} and {sb} do not match for @: the last axis of the left ({left}) "
            f"must equal the {where} of the right ({right})"
        )
    return f"shapes {sa} and {sb} do not match for @: their batch axes {sa[:-2]} and {sb[:-2]} do not broadcast"


def _broadcast_reason(shapes: list[tuple[int, ...]], op: str) -> str:
    """Which axis (counted from the right, as broadcasting aligns them) has sizes that differ."""
    longest = max(len(s) for s in shapes)
    k = 1
    for k in range(1, longest + 1):
        if len({s[-k] for s in shapes if len(s) >= k} - {1}) > 1:
            break
    axis = "last axes" if k == 1 else f"axes {-k}"
    sizes = [str(s[-k]) for s in shapes if len(s) >= k]
    return (
        f"shapes {_shapes_text(shapes)} do not match for {op}: their {axis} have sizes {_shapes_text(sizes)} "
        "(from the right, sizes must be equal or 1)"
    )


def check_names(program: ast.SyntaxTree, given: Iterable[str]) -> None:
    """Every function exists with a right arity, and every free variable has a value."""
    source = Source(program.text)
    call_type = ast.Call
    for node in program.nodes():
        if node.__class__ is call_type:
            function = FUNCTIONS.get(node.function)
            if function is None:
                hint = suggest(node.function, FUNCTIONS)
                raise SyntaxProblem(f"unknown function '{node.function}'{hint}", source, node.start)
            if len(node.args) not in function.arities:
                raise SyntaxProblem(
                    f"{node.function}() takes {function.arity_text()}, got {len(node.args)} (at {source.where(node.start)})",
                    source,
                    node.start,
                )
    given = set(given)
    for name in free_variables(program):
        if name not in given:
            if name in FUNCTIONS:
                continue
            node = next(n for n in program.nodes() if isinstance(n, ast.Name) and n.id == name)
            hint = suggest(name, [*given, *CONSTANTS])
            raise SyntaxProblem(f"missing value for '{name}'{hint}: give it with --at {name}=...", source, node.start)


__all__ = ["Evaluation", "evaluate", "free_variables", "check_names", "UsageError"]
