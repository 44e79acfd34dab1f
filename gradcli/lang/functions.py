"""The functions of the language, derived from the primitive table.

Every public primitive is a function under its own name with its table arity;
a few names add forms of their own (``log(x, b)``, ``max(x)`` vs
``max(a, b)``, reductions with an axis, ``detach``). ``gradcli ops``, the
parser's suggestions and the SymPy translation all read this registry, so a
primitive added to the table is usable everywhere at once.
"""

from __future__ import annotations

import math
from _thread import RLock
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .. import ops
from ..autograd import record
from ..memory import limit_size
from ..ops import PRIMITIVES, Primitive
from ..ops.indexing import gather_index
from ..ops.operators import COMPARISONS as OPERATOR_COMPARISONS
from ..records import Frozen, fill
from . import library
from .ast import Call

ARG_NAMES = {1: ("x",), 2: ("a", "b"), 3: ("c", "a", "b")}


class BuiltinFunction(Frozen):
    """A function of the language: its arities, how it computes, and what it means."""

    __slots__ = _fields = (
        "name",
        "arities",
        "apply",
        "derivative",
        "sympy",
        "primitive",
        "doc",
        "elementwise",
        "reduces",
        "along",
        "group",
        "analytic",
    )

    def __init__(
        self,
        name: str,
        arities: tuple[int, ...],
        apply: Callable[..., Any],  # (gradcli module, *args) -> tensor
        derivative: str,  # the derivative rule, in words a student reads
        sympy: Callable[..., Any] | None,  # (sympy module, *args) -> expr
        primitive: Primitive | None = None,
        doc: str = "",
        elementwise: tuple[int, ...] = (),  # the arities at which it acts element by element
        reduces: bool = False,  # name(x) over every element, name(x, axis) along one
        along: bool = False,  # name(x) along the last axis, name(x, axis) along another; same shape
        group: str = "",  # one of ops.core.GROUPS; "" takes the primitive's
        analytic: bool = True,  # False: piecewise though no recorded primitive says so (argmax's index)
    ) -> None:
        fill(self, locals())

    def arity_text(self) -> str:
        a = self.arities
        if len(a) == 1:
            return f"{a[0]} argument" + ("s" if a[0] != 1 else "")
        return f"{' or '.join(map(str, a))} arguments"


def _derivative_text(prim: Primitive, names: tuple[str, ...]) -> str:
    parts = []
    for name, formula in zip(names, prim.formulas):
        if prim.vjp[names.index(name)] is None:
            continue
        text = formula.replace("{out}", f"{prim.name}({', '.join(names)})")
        for i, n in enumerate(names):
            text = text.replace("{" + str(i) + "}", n)
        parts.append(f"d/d{name} = {text}")
    return "; ".join(parts) if parts else "not differentiable (derivative 0)"


def _from_primitive(prim: Primitive) -> BuiltinFunction:
    names = prim.arg_names or ARG_NAMES.get(prim.arity, ("x",))
    bound = getattr(library.gc, prim.name, None) if prim.public else None
    return BuiltinFunction(
        prim.name,
        (prim.arity,),
        (lambda gc, *args, _f=bound: _f(*args)) if bound else (lambda gc, *args, _p=prim: record.apply(_p, args)),
        _derivative_text(prim, names),
        (lambda sp, *args, _p=prim: _p.sympy(sp, *args)) if prim.sympy else None,
        prim,
        prim.doc,
        elementwise=(prim.arity,) if prim.elementwise else (),
    )


def _reduction(prim: Primitive, derivative: str, sympy_full: Callable[..., Any] | None) -> BuiltinFunction:
    """``name(x)`` over every element, or ``name(x, axis)``."""

    def apply(gc: Any, x: Any, axis: Any = None) -> Any:
        # by keyword: gc.norm's second parameter is the order p, as in torch.norm
        return getattr(gc, prim.name)(x, dim=None if axis is None else _axis(axis))

    return BuiltinFunction(
        prim.name, (1, 2), apply, derivative, sympy_full, prim, prim.doc + "; name(x, axis) along an axis", reduces=True,
        group="reductions",
    )  # fmt: skip


def _along(prim: Any, derivative: str, sympy_last: Callable[..., Any]) -> BuiltinFunction:
    """``name(x)`` along the last axis, or ``name(x, axis)``; the result has the shape of ``x``."""

    def apply(gc: Any, x: Any, axis: Any = None) -> Any:
        return getattr(gc, prim.name)(x, -1 if axis is None else _axis(axis))

    def sympy(sp: Any, x: Any, axis: Any = None) -> Any:
        arr = np.asarray(x, dtype=object)
        if arr.ndim == 0:
            return sympy_last(sp, arr.reshape(1))[0]
        k = -1 if axis is None else _axis(axis)
        return np.apply_along_axis(lambda v: sympy_last(sp, v), k, arr)

    return BuiltinFunction(
        prim.name, (1, 2), apply, derivative, sympy, prim, prim.doc + "; name(x, axis) along another", along=True,
        group="along an axis",
    )  # fmt: skip


def _sym_softmax(sp: Any, v: Any) -> Any:
    e = [sp.exp(item) for item in v]
    total = sum(e, sp.Integer(0))
    return np.array([item / total for item in e], dtype=object)


def _sym_log_softmax(sp: Any, v: Any) -> Any:
    lse = sp.log(sum((sp.exp(item) for item in v), sp.Integer(0)))
    return np.array([item - lse for item in v], dtype=object)


def _sym_cumsum(sp: Any, v: Any) -> Any:
    return np.cumsum(np.asarray(v, dtype=object))


def _sym_cumprod(sp: Any, v: Any) -> Any:
    return np.cumprod(np.asarray(v, dtype=object))


def _sym_flip(sp: Any, v: Any) -> Any:
    return np.asarray(v, dtype=object)[::-1]


def _axis(value: Any) -> int:
    number = float(value.item() if hasattr(value, "item") else value)
    if number != int(number):
        raise ValueError(f"an axis must be a whole number, got {number:g}")
    return int(number)


def _log(gc: Any, x: Any, base: Any = None) -> Any:
    return gc.log(x) if base is None else gc.log(x) / gc.log(base)


def _extreme(reduce_name: str, pair_name: str) -> Callable[..., Any]:
    def apply(gc: Any, a: Any, b: Any = None) -> Any:
        return getattr(gc, reduce_name)(a) if b is None else getattr(gc, pair_name)(a, b)

    return apply


def _sym_sum(sp: Any, x: Any) -> Any:
    return sum(_flat(x), sp.Integer(0))


def _sym_mean(sp: Any, x: Any) -> Any:
    items = _flat(x)
    return sum(items, sp.Integer(0)) / len(items)


def _sym_prod(sp: Any, x: Any) -> Any:
    return math.prod(_flat(x), start=sp.Integer(1))


def _sym_norm(sp: Any, x: Any) -> Any:
    # the piece at 0 carries autograd's convention: the gradient of norm is 0 there, not 0/0
    squares = sum((v * v for v in _flat(x)), sp.Integer(0))
    if squares.is_number:
        return sp.sqrt(squares)
    return sp.Piecewise((0, sp.Eq(squares, 0)), (sp.sqrt(squares), True))


def _sym_logsumexp(sp: Any, x: Any) -> Any:
    return sp.log(sum((sp.exp(v) for v in _flat(x)), sp.Integer(0)))


def _sym_var(sp: Any, x: Any) -> Any:
    items = _flat(x)
    m = sum(items, sp.Integer(0)) / len(items)
    return sum(((v - m) ** 2 for v in items), sp.Integer(0)) / (len(items) - 1)


def _sym_std(sp: Any, x: Any) -> Any:
    return sp.sqrt(_sym_var(sp, x))


def _sym_extreme(kind: str) -> Callable[..., Any]:
    def build(sp: Any, a: Any, b: Any = None) -> Any:
        fn = sp.Max if kind == "max" else sp.Min
        return _folded(sp, fn, _flat(a) if b is None else [a, b])

    return build


MAX_FOLDED_PIECES = 64


def _folded(sp: Any, fn: Any, args: list[Any]) -> Any:
    """``fn(*args)`` with the conditions of its arguments brought outside (when that makes few
    pieces), so that equal arguments merge: SymPy differentiates Min(x, x, x) written as
    Min(where(v, x, v)...) as 3/2, one Heaviside(0) = 1/2 per argument, where Min(x) gives 1."""
    pieces = math.prod(len(p.args) for arg in args if isinstance(arg, sp.Basic) for p in arg.atoms(sp.Piecewise))
    if 1 < pieces <= MAX_FOLDED_PIECES:
        return sp.piecewise_fold(fn(*args))
    return fn(*args)


def _flat(x: Any) -> list[Any]:
    return list(np.asarray(x, dtype=object).reshape(-1))


#: (primitive, derivative text, SymPy form): the reductions (``name(x)``, ``name(x, axis)``) and the
#: functions along an axis, one row each
_REDUCTIONS = (
    (ops.SUM, "d/dx_i = 1", _sym_sum),
    (ops.MEAN, "d/dx_i = 1/n", _sym_mean),
    (ops.PROD, "d/dx_i = product of the other elements", _sym_prod),
    (ops.NORM, "d/dx_i = x_i / norm(x) (0 at 0)", _sym_norm),
    (ops.LOGSUMEXP, "d/dx_i = exp(x_i) / sum(exp(x))", _sym_logsumexp),
    (ops.VAR, "d/dx_i = 2*(x_i - mean(x))/(n - 1)", _sym_var),
    (ops.STD, "d/dx_i = (x_i - mean(x))/((n - 1)*std(x)) (0 where std is 0)", _sym_std),
)
_ALONG = (
    (ops.SOFTMAX, "d s_i/dx_j = s_i*([i == j] - s_j)", _sym_softmax),
    (ops.LOG_SOFTMAX, "d/dx_j = [i == j] - softmax(x)_j", _sym_log_softmax),
    (ops.CUMSUM, "d y_i/dx_j = 1 for j <= i", _sym_cumsum),
    (ops.CUMPROD, "d y_j/dx_i = product of x_k for k <= j, k != i (j >= i)", _sym_cumprod),
    (ops.FLIP, "d y_i/dx_(n-1-i) = 1", _sym_flip),
)


def _build() -> dict[str, BuiltinFunction]:
    table: dict[str, BuiltinFunction] = {}
    for prim in PRIMITIVES.values():
        if prim.public and prim.elementwise:
            table[prim.name] = _from_primitive(prim)
    table["log"] = BuiltinFunction(
        "log", (1, 2), _log, "d/dx = 1/x; log(x, b): d/dx = 1/(x*log(b)), d/db = -log(x)/(b*log(b)^2)",
        lambda sp, x, base=None: sp.log(x) if base is None else sp.log(x) / sp.log(base), ops.LOG,
        "natural logarithm; log(x, b) to base b", elementwise=(1, 2),
    )  # fmt: skip
    table["max"] = BuiltinFunction(
        "max", (1, 2), _extreme("max", "maximum"),
        "max(x): d/dx = 1 at the largest element (ties share it); "
        "max(a, b): d/da = 1 where a > b, d/db = 1 where b > a (ties: 1/2 each)",
        _sym_extreme("max"), ops.AMAX, "max(x): largest element; max(a, b): elementwise", elementwise=(2,),
    )  # fmt: skip
    table["min"] = BuiltinFunction(
        "min", (1, 2), _extreme("min", "minimum"),
        "min(x): d/dx = 1 at the smallest element (ties share it); "
        "min(a, b): d/da = 1 where a < b, d/db = 1 where b < a (ties: 1/2 each)",
        _sym_extreme("min"), ops.AMIN, "min(x): smallest element; min(a, b): elementwise", elementwise=(2,),
    )  # fmt: skip
    for prim, derivative, sym in _REDUCTIONS:
        table[prim.name] = _reduction(prim, derivative, sym)
    table["argsort"] = BuiltinFunction(
        "argsort", (1, 2), lambda gc, x, axis=None: gc.argsort(x, -1 if axis is None else _axis(axis)),
        "not differentiable (indices)", None, None,
        "argsort(x): the positions that sort x along the last axis; argsort(x, axis) along another",
        along=True, group="along an axis", analytic=False,
    )  # fmt: skip
    for name in ("argmax", "argmin"):
        table[name] = BuiltinFunction(
            name, (1, 2), lambda gc, x, axis=None, _n=name: getattr(gc, _n)(x, None if axis is None else _axis(axis)),
            "not differentiable (an index)", None, None,
            f"{name}(x): index of the {'largest' if name == 'argmax' else 'smallest'} element of the flattened x; "
            f"{name}(x, axis) along an axis", reduces=True, group="reductions", analytic=False,
        )  # fmt: skip
    for prim, derivative, sym in _ALONG:
        table[prim.name] = _along(prim, derivative, sym)
    table["dot"] = BuiltinFunction(
        "dot", (2,), lambda gc, a, b: gc.dot(a, b), "d/da = b; d/db = a",
        lambda sp, a, b: sum((u * v for u, v in zip(_flat(a), _flat(b))), sp.Integer(0)), ops.DOT,
        "inner product of two vectors",
    )  # fmt: skip
    _matrices(table)
    _ordering(table)
    _solving(table)
    table["reshape"] = _reshape_function()
    _indexing(table)
    for prim in COMPARISONS.values():  # 0/1 in the inputs' float dtype, as the operators give
        table[prim.name] = BuiltinFunction(
            prim.name, (2,), lambda gc, a, b, _p=prim: compare(gc, _p, a, b), "not differentiable (derivative 0)",
            lambda sp, a, b, _p=prim: indicator(sp, _p.sympy(sp, a, b)), prim,
            prim.doc + " (1 if true, else 0)", elementwise=(2,),
        )  # fmt: skip
    table["detach"] = BuiltinFunction(
        "detach", (1,), lambda gc, x: gc.detach(x), "not differentiable: the value passes, the gradient stops",
        _sym_detach, None, "the value of x, with no gradient through it", elementwise=(1,), group="elementwise",
    )  # fmt: skip
    table["clamp"] = BuiltinFunction(
        "clamp", (3,), _clamp, "d/dx = 1 where lo <= x <= hi, else 0; d/dlo = 1 where x < lo < hi; d/dhi = 1 where x > hi, hi < lo or x < lo = hi",
        ops.CLAMP_TENSOR.sympy, ops.CLAMP, "x limited to [lo, hi]", elementwise=(3,),
    )  # fmt: skip
    return {name: _grouped(f) for name, f in sorted(table.items())}


def _grouped(f: BuiltinFunction) -> BuiltinFunction:
    """``f`` with its group and analyticity filled in from its primitive where it names none of its own."""
    prim = f.primitive
    if prim is None:
        return f
    return f.replace(group=f.group or prim.group, analytic=f.analytic and prim.analytic)


def not_analytic_call(tree: Any) -> str | None:
    """The first function called in ``tree`` (a parsed program) that is not complex-analytic
    though no recorded node may say so: ``argmax`` gives an index without a gradient."""
    for node in tree.nodes():
        if isinstance(node, Call) and node.function in FUNCTIONS and not FUNCTIONS[node.function].analytic:
            return node.function
    return None


def _sym_detach(sp: Any, x: Any) -> Any:
    from .terms import stop_gradient  # lazy: start-up, eval never imports SymPy

    return stop_gradient(x)


def _objects(x: Any) -> Any:
    return np.asarray(x, dtype=object)


def _transpose(gc: Any, x: Any) -> Any:
    """The last two axes swapped (a vector or a number is its own transpose): ``x.T``."""
    return gc.transpose(x)


def _sym_transpose(sp: Any, x: Any) -> Any:
    return x if np.ndim(x) < 2 else np.swapaxes(_objects(x), -2, -1)


def _triangle(name: str) -> Callable[..., Any]:
    def apply(gc: Any, x: Any, k: Any = 0) -> Any:
        return getattr(gc, name)(x, _offset(k))

    return apply


def _sym_triangle(np_fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda sp, x, k=0: np_fn(_objects(x), _offset(k))


def _offset(value: Any) -> int:
    number = float(value.item() if hasattr(value, "item") else value)
    if number != int(number):
        raise ValueError(f"a diagonal offset must be a whole number, got {number:g}")
    return int(number)


def _limited(shape: tuple[int, ...], what: str) -> None:
    """The element limit, checked before a function that grows its input (n -> n^2) allocates."""
    limit_size(shape, what)


def _outer(gc: Any, a: Any, b: Any) -> Any:
    _limited((int(np.size(getattr(a, "array", a))), int(np.size(getattr(b, "array", b)))), "outer(a, b)")
    return gc.outer(a, b)


def _diag(gc: Any, x: Any, k: Any = 0) -> Any:
    if np.ndim(getattr(x, "array", x)) <= 1:
        n = int(np.size(getattr(x, "array", x))) + abs(_offset(k))
        _limited((n, n), "diag(v)")
    return gc.diag(x, _offset(k))


def _matrices(table: dict[str, BuiltinFunction]) -> None:
    """transpose (x.T), outer, trace, diag, tril, triu."""
    table["transpose"] = BuiltinFunction(
        "transpose", (1,), _transpose, "d/dx: the gradient transposed back",
        _sym_transpose, ops.PERMUTE, "the last two axes swapped (x.T); a vector is its own transpose",
        group="matrices",
    )  # fmt: skip
    table["outer"] = BuiltinFunction(
        "outer", (2,), _outer, "d/da_i = sum_j g_ij b_j; d/db_j = sum_i a_i g_ij",
        lambda sp, a, b: np.multiply.outer(_objects(a), _objects(b)), None,
        "outer product of two vectors: a_i * b_j", group="matrices",
    )  # fmt: skip
    table["trace"] = BuiltinFunction(
        "trace", (1,), lambda gc, x: gc.trace(x), "d/dx = I (1 on the diagonal)",
        ops.TRACE.sympy, ops.TRACE, ops.TRACE.doc,
    )  # fmt: skip
    table["diag"] = BuiltinFunction(
        "diag", (1, 2), _diag, "d/dx = 1 at the diagonal positions, else 0",
        lambda sp, x, k=0: np.diag(_objects(x), _offset(k)), None,
        "diag(v): the matrix with v on its diagonal; diag(A): the diagonal of A; diag(x, k): the k-th diagonal",
        group="matrices",
    )  # fmt: skip
    table["diagonal"] = BuiltinFunction(
        "diagonal", (1, 2), lambda gc, x, k=0: gc.diagonal(x, _offset(k)), "d/dx = 1 at the diagonal positions, else 0",
        lambda sp, x, k=0: np.diagonal(_objects(x), _offset(k)).copy(), ops.DIAGONAL,
        "diagonal(x): the diagonal of the first two axes (as the last axis); diagonal(x, k): the k-th",
    )  # fmt: skip
    table["cross"] = BuiltinFunction(
        "cross", (2,), lambda gc, a, b: gc.cross(a, b), "d/da = b x g; d/db = g x a",
        lambda sp, a, b: ops.CROSS.sympy(sp, a, b, -1), ops.CROSS,
        "cross(a, b): the cross product of 3-vectors (along the first axis of size 3)",
    )  # fmt: skip
    table["kron"] = BuiltinFunction(
        "kron", (2,), lambda gc, a, b: gc.kron(a, b), "d/da_i = sum of g times b over a_i's block; d/db = sum over the blocks of g times a_i",
        lambda sp, a, b: np.kron(_objects(a), _objects(b)), None,
        "kron(a, b): the Kronecker product, a block b * a_i for each element of a", group="matrices",
    )  # fmt: skip
    table["inv"] = BuiltinFunction(
        "inv", (1,), lambda gc, x: gc.inv(x), "d/dx = -inv(x)^T g inv(x)^T",
        ops.INV.sympy, ops.INV, ops.INV.doc,
    )  # fmt: skip
    for name, prim, np_fn in (("tril", ops.TRIL, np.tril), ("triu", ops.TRIU, np.triu)):
        table[name] = BuiltinFunction(
            name, (1, 2), _triangle(name), f"d/dx = 1 {prim.formulas[0][2:]}",
            _sym_triangle(np_fn), prim, prim.doc + f"; {name}(x, k) from the k-th diagonal",
        )  # fmt: skip


def _sort(gc: Any, x: Any, axis: Any = None) -> Any:
    return gc.sort(x, -1 if axis is None else _axis(axis)).values


def _topk(gc: Any, x: Any, k: Any, axis: Any = None) -> Any:
    return gc.topk(x, _count(k), -1 if axis is None else _axis(axis)).values


def _count(value: Any) -> int:
    number = float(value.item() if hasattr(value, "item") else value)
    if number != int(number) or number < 0:
        raise ValueError(f"k must be a whole number >= 0, got {number:g}")
    return int(number)


def _ordering(table: dict[str, BuiltinFunction]) -> None:
    """sort and topk: the values (the indices are gc.sort's and gc.topk's), no SymPy form."""
    table["sort"] = BuiltinFunction(
        "sort", (1, 2), _sort, "d/dx: 1 at the position each value came from (ties: the one sorted there)",
        None, ops.SORT, "sort(x): the values in ascending order along the last axis; sort(x, axis) along another"
        " (no SymPy form)",
    )  # fmt: skip
    table["topk"] = BuiltinFunction(
        "topk", (2, 3), _topk, "d/dx: 1 at the position each value came from",
        None, ops.TOPK, "topk(x, k): the k largest values along the last axis, largest first; topk(x, k, axis)"
        " along another (no SymPy form)",
    )  # fmt: skip


def _sym_solve(sp: Any, a: Any, b: Any) -> Any:
    return ops.SOLVE.sympy(sp, a, b, np.ndim(b) == 1)


def _solving(table: dict[str, BuiltinFunction]) -> None:
    """det and solve."""
    table["det"] = BuiltinFunction(
        "det", (1,), lambda gc, x: gc.det(x), "d/dx = the cofactor matrix of x (det(x) inv(x)^T where x is invertible)",
        ops.DET.sympy, ops.DET, ops.DET.doc,
    )  # fmt: skip
    table["solve"] = BuiltinFunction(
        "solve", (2,), lambda gc, a, b: gc.solve(a, b), "d/dA = -(inv(A)^T g) x^T; d/db = inv(A)^T g",
        _sym_solve, ops.SOLVE, "solve(A, b): x with A @ x = b (b a vector or a matrix)",
    )  # fmt: skip


def _sizes(shape: Any) -> tuple[int, ...]:
    """A shape literal ``[2, 3]`` (or one number) as whole sizes, -1 for the one to infer."""
    values = np.asarray(getattr(shape, "_value", shape), dtype=object).reshape(-1)
    sizes = []
    for value in values:
        number = float(value)
        if number != int(number) or number < -1:
            raise ValueError(f"a size must be a whole number >= 0 (or -1 once), got {number:g}")
        sizes.append(int(number))
    return tuple(sizes)


def _reshape_function() -> BuiltinFunction:
    """reshape(x, [2, 3]): the same values in another shape; -1 once for the size to infer."""
    return BuiltinFunction(
        "reshape", (2,), lambda gc, x, shape: gc.reshape(x, _sizes(shape)), "d/dx: the gradient reshaped back",
        lambda sp, x, shape: np.reshape(_objects(x), _sizes(shape)), ops.RESHAPE,
        "reshape(x, [2, 3]): the same values in another shape (-1 once: the size to infer)",
    )  # fmt: skip


def _whole(value: Any, what: str) -> np.ndarray:
    """Positions or sizes given as numbers: whole numbers, as an integer array."""
    raw = np.asarray(getattr(value, "array", value))
    if raw.dtype.kind in "biu":
        return raw.astype(np.intp)
    raw = raw.astype(np.float64)
    if not (np.isfinite(raw).all() and (raw == np.trunc(raw)).all()):
        raise ValueError(f"{what} must be whole numbers, got {raw}")
    return raw.astype(np.intp)


def _sym_whole(value: Any, what: str) -> np.ndarray:
    values = np.asarray(value, dtype=object)
    if not all(getattr(v, "is_number", True) for v in values.flat):
        raise TypeError(f"{what} that depend on a variable have no SymPy form")
    return np.asarray([int(v) for v in values.flat], dtype=np.intp).reshape(values.shape)


def _gather(gc: Any, x: Any, index: Any, axis: Any = -1) -> Any:
    return gc.gather(x, _axis(axis), _whole(index, "gather's positions"))


def _sym_gather(sp: Any, x: Any, index: Any, axis: Any = -1) -> Any:
    arr = _objects(x)
    return arr[gather_index(arr.ndim, _axis(axis) % max(arr.ndim, 1), _sym_whole(index, "positions"))]


def _index_select(gc: Any, x: Any, index: Any, axis: Any = -1) -> Any:
    return gc.index_select(x, _axis(axis), _whole(index, "index_select's positions"))


def _masked_fill(gc: Any, x: Any, mask: Any, value: Any) -> Any:
    return gc.masked_fill(x, np.asarray(getattr(mask, "array", mask)) != 0, value)


def _sym_masked_fill(sp: Any, x: Any, mask: Any, value: Any) -> Any:
    where = _sym_whole(np.asarray(mask, dtype=object) != 0, "a mask") != 0
    return np.where(where, value, _objects(x))


def _repeat(gc: Any, x: Any, sizes: Any) -> Any:
    counts = tuple(int(n) for n in np.atleast_1d(_whole(sizes, "repeat's counts")))
    shape = np.shape(getattr(x, "array", x))
    padded = (1,) * (len(counts) - len(shape)) + tuple(shape)
    if len(counts) >= len(shape):
        _limited(tuple(c * n for c, n in zip(counts, padded)), "repeat(x, sizes)")
    return gc.repeat(x, counts)


def _sym_repeat(sp: Any, x: Any, sizes: Any) -> Any:
    counts = tuple(int(n) for n in np.atleast_1d(_sym_whole(sizes, "counts")))
    arr = _objects(x)
    return np.tile(arr.reshape((1,) * (len(counts) - arr.ndim) + arr.shape), counts)


def _narrow_index(ndim: int, start: Any, length: Any, axis: Any) -> tuple:
    a = _axis(axis) % max(ndim, 1)
    s, n = _axis(start), _axis(length)
    return (slice(None),) * a + (slice(s, s + n if s + n != 0 else None),)


def _narrow(gc: Any, x: Any, start: Any, length: Any, axis: Any = -1) -> Any:
    return gc.narrow(x, _axis(axis), _axis(start), _axis(length))


def _sym_narrow(sp: Any, x: Any, start: Any, length: Any, axis: Any = -1) -> Any:
    arr = _objects(x)
    return arr[_narrow_index(arr.ndim, start, length, axis)]


def _roll(gc: Any, x: Any, shift: Any, axis: Any = None) -> Any:
    return gc.roll(x, _axis(shift), None if axis is None else _axis(axis))


def _sym_roll(sp: Any, x: Any, shift: Any, axis: Any = None) -> Any:
    return np.roll(_objects(x), _axis(shift), None if axis is None else _axis(axis))


def _indexing(table: dict[str, BuiltinFunction]) -> None:
    """gather, index_select, masked_fill, repeat (as PyTorch's, axes last and the last by default)."""
    table["gather"] = BuiltinFunction(
        "gather", (2, 3), _gather, "d/dx = 1 at each position read, added up where a position repeats",
        _sym_gather, ops.GATHER,
        "gather(x, index): x at the positions index along the last axis (index has x's number of axes); "
        "gather(x, index, axis) along another",
    )  # fmt: skip
    table["index_select"] = BuiltinFunction(
        "index_select", (2, 3), _index_select, "d/dx = 1 at each slice read, added up where a position repeats",
        lambda sp, x, index, axis=-1: np.take(_objects(x), _sym_whole(index, "positions"), _axis(axis)),
        ops.INDEX_SELECT,
        "index_select(x, index): the slices at the positions of the vector index along the last axis; "
        "index_select(x, index, axis) along another",
    )  # fmt: skip
    table["masked_fill"] = BuiltinFunction(
        "masked_fill", (3,), _masked_fill, "d/dx = 1 where mask is 0; d/dvalue = 1 summed where mask is not 0",
        _sym_masked_fill, ops.MASKED_FILL,
        "masked_fill(x, mask, value): value (a number) where mask is not 0, x elsewhere",
    )  # fmt: skip
    table["narrow"] = BuiltinFunction(
        "narrow", (3, 4), _narrow, "d/dx = 1 at each element kept, 0 elsewhere",
        _sym_narrow, ops.GETITEM,
        "narrow(x, start, length): length elements from start along the last axis; narrow(x, start, length, axis)"
        " along another (chunk and unbind, which give several values, are library only)",
    )  # fmt: skip
    table["roll"] = BuiltinFunction(
        "roll", (2, 3), _roll, "d/dx: the gradient rolled back",
        _sym_roll, ops.ROLL,
        "roll(x, n): the elements shifted n places (of the flattened x, coming round); roll(x, n, axis) along an axis",
    )  # fmt: skip
    for name, at_least in (("hstack", 1), ("vstack", 2)):
        table[name] = BuiltinFunction(
            name, (1, 2, 3, 4), lambda gc, *xs, _n=name: getattr(gc, _n)(list(xs)), "d/dx_k: the gradient's piece of x_k",
            lambda sp, *xs, _n=name: getattr(np, _n)([_objects(x) for x in xs]), None,
            f"{name}(a, b, ...): the values joined {'column-wise (vectors end to end)' if at_least == 1 else 'row-wise'}",
            group="indexing and shape",
        )  # fmt: skip
    table["repeat"] = BuiltinFunction(
        "repeat", (2,), _repeat, "d/dx = the sum over the copies",
        _sym_repeat, ops.REPEAT, "repeat(x, [n0, n1]): x tiled n_i times along each axis (extra counts add axes in front)",
    )  # fmt: skip


#: The comparisons' primitives by operator symbol (from the operator table); ``a < b`` and
#: ``lt(a, b)`` are the same primitive.
COMPARISONS = {symbol: row.primitive for symbol, row in OPERATOR_COMPARISONS.items()}


def compare(gc: Any, prim: Primitive, a: Any, b: Any) -> Any:
    """``a < b`` and ``lt(a, b)``: 0.0/1.0 (never a boolean, which later arithmetic would turn
    into float16), in the inputs' float dtype (float64 for numbers), with no gradient."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(prim.forward(a, b))
    floats = [d for d in (_dtype(a), _dtype(b)) if d is not None and d.kind == "f"]
    return getattr(gc, prim.name)(a, b).to(np.result_type(*floats) if floats else np.float64)


def _dtype(value: Any) -> np.dtype | None:
    raw = getattr(value, "_value", value)
    return raw.dtype if isinstance(raw, (np.ndarray, np.generic)) else None


def indicator(sp: Any, relation: Any) -> Any:
    """A SymPy relation as the number the language gives for it: 1 where it holds, else 0."""
    return sp.Piecewise((1, relation), (0, True))


def _clamp(gc: Any, x: Any, lo: Any, hi: Any) -> Any:
    """Number bounds are parameters (ClampBackward1); variable or array ones are inputs with gradients."""
    if any(getattr(b, "requires_grad", False) or np.ndim(getattr(b, "_value", b)) for b in (lo, hi)):
        return gc.clamp(x, gc.as_tensor(lo), gc.as_tensor(hi))
    return gc.clamp(x, _number(lo), _number(hi))


def _number(value: Any) -> float:
    return float(value.item() if hasattr(value, "item") else value)


_FILLING = RLock()


class _Table(dict):
    """The table before its first use: a plain expression (``(x+w)*(w+1)``) calls no function, and
    building ~90 entries was a tenth of ``gradcli eval``'s start-up over NumPy's. The first read
    fills it and makes it a plain dict (``_Built``), as fast to read as before."""

    __slots__ = ()

    def _filled(self) -> dict[str, BuiltinFunction]:
        if type(self) is _Table:
            with _FILLING:  # once, by whichever thread reads first: the others wait for it
                if type(self) is _Table:
                    self.update(_build())
                    self.__class__ = _Built
        return self

    def __getitem__(self, name: str) -> BuiltinFunction:
        return self._filled()[name]

    def __contains__(self, name: object) -> bool:
        return name in self._filled()

    def get(self, name: str, default: BuiltinFunction | None = None) -> BuiltinFunction | None:  # type: ignore[override]
        return self._filled().get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._filled())

    def __len__(self) -> int:
        return len(self._filled())

    def keys(self):  # noqa: ANN201
        return self._filled().keys()

    def values(self):  # noqa: ANN201
        return self._filled().values()

    def items(self):  # noqa: ANN201
        return self._filled().items()

    def __repr__(self) -> str:
        return repr(self._filled())

    def __eq__(self, other: object) -> bool:
        return self._filled() == other

    __hash__ = None  # type: ignore[assignment]


class _Built(dict):
    """The filled table: dict's own methods."""

    __slots__ = ()


FUNCTIONS: dict[str, BuiltinFunction] = _Table()
CONSTANTS = {"pi": math.pi, "e": math.e}
