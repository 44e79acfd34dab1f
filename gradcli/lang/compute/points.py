"""``eval --points``: a program at every row of a file, each row its own point (vmap semantics).

Variables read from the file carry a leading point axis; everything else
(``--at`` values, numbers) is shared, and every operation acts on each point
alone: reductions reduce a point's own axes, ``@`` multiplies a point's own
vectors and matrices, indexing indexes a point's own value, broadcasting
aligns a point's own shapes. The program runs once, batched, with every
differentiated variable a leaf of shape ``(n, *shape)`` (an ``--at`` value
repeated n times), so one backward pass of the points' sum gives each point's
own gradient: the points are independent, so nothing mixes.

Before that, the program runs once at the first point as ``eval --at`` would:
every shape, name and output error is reported in eval's own words. What
cannot be batched (an index or an axis that depends on the file's values, a
Python function whose control flow may differ per row) runs point by point.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...autograd.tape import recording
from ...errors import Source, UsageError
from ...memory import limit_size
from ...ops.operators import INFIX, PREFIX
from ...ops.shape import take
from .. import ast
from ..data import given_once
from ..evaluate import Run
from ..functions import COMPARISONS, FUNCTIONS, compare
from ..library import gc
from ..program import Program
from ..values import seed_vector
from .gradient import SCALAR_ONLY, backward_anomaly, resolve_wrt, single_output, value_and_grad


@dataclass
class PointsResult:
    """Each point's value (``(n, *shape)``) and gradient (``(n, *variable shape)`` per variable)."""

    value: np.ndarray
    gradient: dict[str, np.ndarray]
    warning: str | None = None  # the first non-finite value or gradient, with its point
    point: int | None = None  # which of these points the warning names (0 for the first)


class _Unbatchable(Exception):
    """The program does something that depends on a point's values beyond arithmetic (an index)."""


class _Batched:
    """A value with a leading point axis: ``tensor.shape == (n, *shape at one point)``; ``shared``
    the one value it repeats when it is an ``--at`` value (an index or an axis can use it)."""

    __slots__ = ("t", "shared")

    def __init__(self, t: gc.Tensor, shared: Any = None) -> None:
        self.t = t
        self.shared = shared


def evaluate_points(
    program: Program,
    columns: Mapping[str, np.ndarray],
    values: Mapping[str, Any],
    wrt: Sequence[str] | None,
    seed: str | None,
    offset: int = 0,
    unused: bool = False,
) -> tuple[list[str], PointsResult]:
    """The differentiated names and every point's value and gradient (``offset``: the number of points
    before these in the data set, for the point numbers in messages; ``unused``: as ``resolve_wrt``,
    False for eval's road, which shows no derivative of a variable the expression does not use)."""
    n = len(next(iter(columns.values())))
    given_once(columns, values)
    first = {**values, **{name: column[0] for name, column in columns.items()}}
    names = resolve_wrt(program, first, wrt, unused)
    # the first point as eval --at would run it: errors come in eval's words, the shapes are known
    probe = program.run(first, names)
    out = single_output(probe)
    if seed is None and out.numel() != 1:
        raise UsageError(SCALAR_ONLY.format(shape=out.shape))
    vector = None if seed is None else seed_vector(seed, out.shape)
    if program.tree is not None:
        try:
            return names, _batched(program, columns, values, names, vector, n, out.shape, offset)
        except _Unbatchable:
            pass
    return names, _point_by_point(program, columns, values, names, seed, n, offset)


def point_values(program: Program, columns: Mapping[str, np.ndarray], values: Mapping[str, Any]) -> np.ndarray:
    """Every point's value alone, ``(n, *shape)``, without a gradient: one batched run (what the numeric
    checks of ``check --points`` call, with columns of real or complex numbers), or one run a point."""
    n = len(next(iter(columns.values())))
    if program.tree is not None:
        env: dict[str, Any] = {}
        for name, value in {**values, **columns}.items():
            t = gc.tensor(np.asarray(columns[name]) if name in columns else value)
            t.name = name
            env[name] = _Batched(t) if name in columns else t
        try:
            with np.errstate(all="ignore"):
                return np.asarray(_BatchedRun(program, env, n).output().array)
        except _Unbatchable:
            pass
    return np.stack([np.asarray(single_output(program.run(_point(columns, values, i))).array) for i in range(n)])


def _point(columns: Mapping[str, np.ndarray], values: Mapping[str, Any], i: int) -> dict[str, Any]:
    return {**values, **{name: column[i] for name, column in columns.items()}}


def _point_text(columns: Mapping[str, np.ndarray], i: int, first: int = 0, shown: int = 6) -> str:
    """``point 2 (x = 0.0, y = 1.5)``: the point's number (the first data row is point 1) and values."""
    cells = [f"{k} = {float(c[i])!r}" for k, c in list(columns.items())[:shown]]
    return f"point {first + i + 1} (" + ", ".join(cells) + (", ..." if len(columns) > shown else "") + ")"


def _point_by_point(
    program: Program,
    columns: Mapping[str, np.ndarray],
    values: Mapping[str, Any],
    names: list[str],
    seed: str | None,
    n: int,
    first: int = 0,
) -> PointsResult:
    """One evaluation a point (a Python function's control flow may differ from row to row)."""
    results, warning, point = [], None, None
    for i in range(n):
        try:
            result = value_and_grad(program, _point(columns, values, i), names, seed)
        except UsageError as problem:  # the first point ran before: this one differs from it
            raise UsageError(f"{_point_text(columns, i, first)}: {problem.message}") from None
        if warning is None and (result.evaluation.nonfinite or result.backward_nonfinite):
            what = (
                f"non-finite value: {result.evaluation.nonfinite}"
                if result.evaluation.nonfinite
                else f"non-finite gradient: {result.backward_nonfinite}"
            )
            warning, point = f"{what} at {_point_text(columns, i, first)}", i
        results.append(result)
    value = np.stack([np.asarray(r.value, dtype=np.float64) for r in results])
    gradient = {name: np.stack([np.asarray(r.gradient[name], dtype=np.float64) for r in results]) for name in names}
    return PointsResult(value, gradient, warning, point)


def _batched(
    program: Program,
    columns: Mapping[str, np.ndarray],
    values: Mapping[str, Any],
    names: list[str],
    vector: np.ndarray | None,
    n: int,
    out_shape: tuple[int, ...],
    first: int = 0,
) -> PointsResult:
    assert program.tree is not None
    env, leaves = _environment(columns, values, names, n)
    run = _BatchedRun(program, env, n)
    with np.errstate(all="ignore"):
        out = run.output()
        grads = _gradients(out, [leaves[name] for name in names], vector, n, out_shape)
    value = np.asarray(out.array, dtype=np.float64)
    gradient = {name: np.asarray(g, dtype=np.float64) for name, g in zip(names, grads)}
    found = _warning(program, columns, values, names, vector, run, value, gradient, first)
    return PointsResult(value, gradient, *(found or (None, None)))


def _environment(
    columns: Mapping[str, np.ndarray], values: Mapping[str, Any], names: Sequence[str], n: int
) -> tuple[dict[str, Any], dict[str, gc.Tensor]]:
    """The batched run's names: every column, and every differentiated variable, a leaf with a leading
    point axis (a shared one repeated n times); the other shared values as they are."""
    env: dict[str, Any] = {}
    leaves: dict[str, gc.Tensor] = {}
    for name, value in {**values, **columns}.items():
        if name in columns:
            t = gc.tensor(np.asarray(columns[name], dtype=np.float64), requires_grad=name in names)
        elif name in names:  # shared, but differentiated per point: a leaf of n copies
            shape = np.shape(value)
            limit_size((n, *shape), f"--at {name} repeated for {n:,} points")
            t = gc.tensor(np.repeat(np.asarray(value, dtype=np.float64)[None], n, axis=0), requires_grad=True)
        else:
            t = gc.tensor(value)
            t.name = name
            env[name] = t
            continue
        t.name = name
        leaves[name] = t
        env[name] = _Batched(t, None if name in columns else value)
    return env, leaves


def recorded_points(
    program: Program, columns: Mapping[str, np.ndarray], values: Mapping[str, Any], names: Sequence[str]
) -> tuple[list[Any], dict[str, gc.Tensor], gc.Tensor] | None:
    """The points' batched run, recorded (``check --points`` replays it at moved points, as ``check --at``
    replays its one point's: what runs without the graph, a comparison or ``detach``, stays as it was at
    each point): the tape, the differentiated leaves (``(n, *shape)``) and the output. None when the
    program cannot run batched (a Python function, an index that depends on the values)."""
    if program.tree is None:
        return None
    n = len(next(iter(columns.values())))
    env, leaves = _environment(columns, values, names, n)
    try:
        with recording() as tape, np.errstate(all="ignore"):
            out = _BatchedRun(program, env, n).output()
    except _Unbatchable:
        return None
    return tape, {name: leaves[name] for name in names}, out


def _gradients(
    out: gc.Tensor, leaves: list[gc.Tensor], vector: np.ndarray | None, n: int, out_shape: tuple[int, ...]
) -> list[np.ndarray]:
    if not leaves:
        return []
    if not out.requires_grad:
        return [np.zeros(leaf.shape) for leaf in leaves]
    seed = np.ones(n) if vector is None else np.broadcast_to(vector, (n, *out_shape))
    grads = gc.grad(out, leaves, grad_outputs=gc.tensor(seed), allow_unused=True, materialize_grads=True)
    return [g.array for g in grads]


def _warning(
    program: Program,
    columns: Mapping[str, np.ndarray],
    values: Mapping[str, Any],
    names: list[str],
    vector: Any,
    run: _BatchedRun,
    value: np.ndarray,
    gradient: dict[str, np.ndarray],
    first: int = 0,
) -> tuple[str, int] | None:
    """eval's warning at the first point where a value (or else a gradient) is not finite, and that
    point's index."""
    if run.nonfinite_point is not None:
        i = run.nonfinite_point
        evaluation = program.run(_point(columns, values, i), names)
        where = evaluation.nonfinite or f"the output gave {_kind(value[i])}"
        return f"non-finite value: {where} at {_point_text(columns, i, first)}", i
    bad = np.zeros(len(value), dtype=bool)
    for g in gradient.values():
        bad |= ~np.isfinite(g.reshape(len(g), -1)).all(axis=1)
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    where = backward_anomaly(program, _point(columns, values, i), names, vector)
    if where is None:
        where = "d/d" + next(k for k, g in gradient.items() if not np.isfinite(g[i]).all())
        where += f" gave {_kind(gradient[where[3:]][i])}"
    return f"non-finite gradient: {where} at {_point_text(columns, i, first)}", i


def _kind(value: Any) -> str:
    return "nan" if np.isnan(value).any() else "inf"


class _BatchedRun(Run):
    """The evaluator with ``_Batched`` values: each operation acts on every point alone."""

    def __init__(self, program: Program, env: dict[str, Any], n: int) -> None:
        assert program.tree is not None
        super().__init__(Source(program.tree.text), env, False, program.tree)
        self.n = n
        self.nonfinite_point: int | None = None
        plain = dict(self.handlers)
        self.handlers.update(
            {
                ast.Unary: lambda node, args: self._unary(node, args, plain[ast.Unary]),
                ast.Binary: lambda node, args: self._binary(node, args, plain[ast.Binary]),
                ast.Compare: lambda node, args: self._compare(node, args, plain[ast.Compare]),
                ast.Conditional: lambda node, args: self._conditional(node, args, plain[ast.Conditional]),
                ast.Call: lambda node, args: self._call(node, args, plain[ast.Call]),
                ast.Slice: lambda node, args: self._plain_only(node, args, plain[ast.Slice]),
                ast.Index: lambda node, args: self._index(node, args, plain[ast.Index]),
                ast.Vector: lambda node, args: self._vector(node, args, plain[ast.Vector]),
            }
        )

    def output(self) -> gc.Tensor:
        """The program's (single, or stacked) output with its point axis."""
        tree = self.program
        for statement in tree.statements:
            value = self.value_of(statement.value)
            self.env[statement.name] = value if isinstance(value, (_Batched, gc.Tensor)) else gc.tensor(value)
        outputs = [self.spread(self.value_of(item)) for item in tree.outputs.items]
        return outputs[0] if len(outputs) == 1 else gc.stack(outputs, dim=1)

    def spread(self, value: Any) -> gc.Tensor:
        """A value with its point axis (a shared one repeated, without a gradient)."""
        if isinstance(value, _Batched):
            return value.t
        raw = np.asarray(value.array if isinstance(value, gc.Tensor) else value, dtype=np.float64)
        return gc.tensor(np.broadcast_to(raw, (self.n, *raw.shape)))

    def _watch(self, node: ast.SyntaxNode, value: Any, args: Any) -> None:
        if isinstance(value, _Batched):
            raw = value.t.array
            if raw.dtype.kind in "fc":
                finite = np.isfinite(raw.reshape(len(raw), -1)).all(axis=1)
                if not finite.all():
                    self.nonfinite = "batched"
                    self.nonfinite_point = int(np.argmin(finite))
            return
        super()._watch(node, value, args)
        if self.nonfinite is not None:
            self.nonfinite_point = 0  # a shared value: not finite at every point

    # --- each kind of node, with points ------------------------------------------------------------

    @staticmethod
    def _shape(value: Any) -> tuple[int, ...]:
        if isinstance(value, _Batched):
            return value.t.shape[1:]
        return tuple(value.shape) if isinstance(value, gc.Tensor) else np.shape(value)

    def _lifted(self, args: Sequence[Any]) -> list[Any]:
        """Batched values reshaped so that NumPy's broadcasting aligns each point's own axes."""
        ndim = max(len(self._shape(a)) for a in args)
        out = []
        for a in args:
            if isinstance(a, _Batched):
                shape = a.t.shape
                missing = ndim + 1 - len(shape)
                out.append(a.t.reshape(shape[0], *(1,) * missing, *shape[1:]) if missing else a.t)
            else:
                out.append(a)
        return out

    def _limit(self, node: ast.SyntaxNode, args: Sequence[Any]) -> None:
        try:
            shape = np.broadcast_shapes(*(self._shape(a) for a in args))
        except ValueError:
            return  # shapes that do not fit: the operation itself says so
        limit_size((self.n, *shape), self.source.quote(node.start, node.end))

    def _unary(self, node: ast.Unary, args: Any, plain: Any) -> Any:
        (x,) = args
        if isinstance(x, _Batched):
            return _Batched(PREFIX[node.op].apply(x.t))
        return plain(node, args)

    def _binary(self, node: ast.Binary, args: Any, plain: Any) -> Any:
        a, b = args
        if not (isinstance(a, _Batched) or isinstance(b, _Batched)):
            return plain(node, args)
        if node.op == "@":
            return _Batched(self._matmul(a, b))
        self._limit(node, args)
        x, y = self._lifted(args)
        return _Batched(INFIX[node.op].apply(x, y))

    def _matmul(self, a: Any, b: Any) -> gc.Tensor:
        """Each point's own ``a @ b``: vectors become a row and a column, then NumPy's batched
        matrix product, with the point axis aligned in front; the added axes are dropped."""
        da, db = len(self._shape(a)), len(self._shape(b))
        if da == 0 or db == 0:
            raise RuntimeError("both arguments to matmul need to be at least 1D")
        x = self._as_matrix(a, -2 if da == 1 else None)
        y = self._as_matrix(b, -1 if db == 1 else None)
        x, y = self._lifted([x, y])
        out = gc.matmul(x, y)
        shape = out.shape
        if da == 1 and db == 1:
            return out.reshape(shape[:-2])
        if da == 1:
            return out.reshape(*shape[:-2], shape[-1])
        if db == 1:
            return out.reshape(shape[:-1])
        return out

    @staticmethod
    def _as_matrix(value: Any, axis: int | None) -> Any:
        if axis is None:
            return value
        if isinstance(value, _Batched):
            shape = value.t.shape
            new = (*shape[:-1], 1, shape[-1]) if axis == -2 else (*shape, 1)
            return _Batched(value.t.reshape(*new))
        t = gc.as_tensor(value)
        return t.reshape(1, t.shape[-1]) if axis == -2 else t.reshape(t.shape[-1], 1)

    def _compare(self, node: ast.Compare, args: Any, plain: Any) -> Any:
        if not any(isinstance(a, _Batched) for a in args):
            return plain(node, args)
        self._limit(node, args)
        x, y = self._lifted(args)
        if not isinstance(x, gc.Tensor):
            x = gc.as_tensor(x)
        return _Batched(compare(gc, COMPARISONS[node.op], x, y))

    def _conditional(self, node: ast.Conditional, args: Any, plain: Any) -> Any:
        if not any(isinstance(a, _Batched) for a in args):
            return plain(node, args)
        self._limit(node, args)
        then, condition, otherwise = self._lifted(args)
        return _Batched(gc.where(gc.as_tensor(condition) != 0, then, otherwise))

    def _call(self, node: ast.Call, args: Any, plain: Any) -> Any:
        if not any(isinstance(a, _Batched) for a in args):
            return plain(node, args)
        function = FUNCTIONS[node.function]  # the first point's run checked the name and arity
        if len(args) in function.elementwise:
            self._limit(node, args)
            return _Batched(function.apply(gc, *self._lifted(args)))
        # how the rest take points is declared in their primitive's row (Primitive.batch)
        batch = function.primitive.batch if function.primitive is not None else "loop"
        if batch == "product":  # dot: each point's own product
            return _Batched(self._matmul(*args))
        if function.along:  # softmax, cumsum, flip: along one of a point's own axes (the last by default)
            x, *axis = args
            axis = self._shared(axis)
            if not isinstance(x, _Batched):
                return plain(node, [x, *axis])
            k = self.integer(axis[0], node) if axis else -1
            if x.t.ndim == 1:  # one number per point: along its one element
                return _Batched(function.apply(gc, x.t.reshape(self.n, 1), -1 if k in (0, -1) else k).reshape(self.n))
            return _Batched(function.apply(gc, x.t, k + 1 if k >= 0 else k))
        if function.reduces or batch == "reduce":
            x, *axis = args
            axis = self._shared(axis)
            if not isinstance(x, _Batched):
                return plain(node, [x, *axis])
            if not axis:  # over a point's own elements: the primitive along the flattened last axis
                t = x.t.reshape(self.n, int(np.prod(x.t.shape[1:])))
                if batch == "loop":  # var, std: with their correction, through the library
                    return _Batched(function.apply(gc, t, -1))
                return _Batched(function.primitive(t, (-1,), False))
            k = self.integer(axis[0], node)
            return _Batched(function.apply(gc, x.t, k + 1 if k >= 0 else k))
        raise _Unbatchable(f"{function.name}() has no batched form")

    @staticmethod
    def _shared(values: Sequence[Any]) -> list[Any]:
        """Indices and axes as one value for every point (an ``--at`` value is), else ``_Unbatchable``."""
        out = []
        for v in values:
            if isinstance(v, _Batched):
                if v.shared is None:
                    raise _Unbatchable("an index or an axis that depends on the points")
                v = v.shared
            out.append(v)
        return out

    def _plain_only(self, node: ast.SyntaxNode, args: Any, plain: Any) -> Any:
        return plain(node, self._shared(args))

    def _index(self, node: ast.Index, args: Any, plain: Any) -> Any:
        target, *items = args
        items = self._shared(items)
        if not isinstance(target, _Batched):
            return plain(node, [target, *items])
        index = self.index_items(node, items, tuple(target.t.shape[1:]))
        return _Batched(take(target.t, index, 1))

    def _vector(self, node: ast.Vector, items: Any, plain: Any) -> Any:
        if not any(isinstance(v, _Batched) for v in items):
            return plain(node, items)
        return _Batched(gc.stack([self.spread(v) for v in items], dim=1))


def derivative_series(
    program: Program, name: str, grid: np.ndarray, values: Mapping[str, Any], depth: int
) -> list[np.ndarray]:
    """``[f, f', ..., f^(depth)]`` of a scalar program in the one variable ``name`` at every point of
    ``grid`` (the other variables fixed by ``values``): one batched run and ``depth`` backward passes
    of the points' sum, each kept differentiable for the next (the points are independent, so the
    derivative of the sum at a point is that point's own derivative). A Python function, or what
    cannot be batched, runs point by point."""
    grid = np.asarray(grid, dtype=np.float64).reshape(-1)
    probe = single_output(program.run({**values, name: grid[0]}, [name]))
    if probe.numel() != 1:
        raise UsageError(f"plot needs one number for each point; the output has shape {tuple(probe.shape)}")
    with np.errstate(all="ignore"):
        if program.tree is not None:
            try:
                t = gc.tensor(grid, requires_grad=True)
                t.name = name
                env: dict[str, Any] = {name: _Batched(t)}
                for other, value in values.items():
                    if other != name:
                        env[other] = gc.tensor(value)
                        env[other].name = other
                out = _BatchedRun(program, env, len(grid)).output().reshape(len(grid))
                return _derivatives(out, t, depth)
            except _Unbatchable:
                pass
        rows = []
        for x in grid:
            evaluation = program.run({**values, name: x}, [name])
            rows.append(_derivatives(single_output(evaluation).reshape(()), evaluation.inputs[name], depth))
    return [np.array([row[k] for row in rows], dtype=np.float64) for k in range(depth + 1)]


def _derivatives(out: gc.Tensor, leaf: gc.Tensor, depth: int) -> list[np.ndarray]:
    found = [np.asarray(out.array, dtype=np.float64)]
    for k in range(depth):
        if not out.requires_grad:  # constant in the variable: every further derivative is zero
            found.append(np.zeros_like(found[0]))
            continue
        seed = gc.tensor(np.ones(out.shape))
        (out,) = gc.grad(out, [leaf], grad_outputs=seed, create_graph=k + 1 < depth, materialize_grads=True)
        found.append(np.asarray(out.array, dtype=np.float64).reshape(found[0].shape))
    return found


__all__ = ["PointsResult", "derivative_series", "evaluate_points", "point_values"]
