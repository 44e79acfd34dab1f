"""Applying a primitive: compute the value, and record a node when it needs one.

A node is recorded only when grad mode is on and some input requires grad; it
points at its inputs' edges and keeps only what the primitive's rule uses.
``unary`` and ``binary`` are the hot paths of every operator and are kept lean.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ops import Meta, Primitive
from ..ops import linalg as _linalg
from ..ops import shape as _shape
from . import tensor as _tensor_mod
from .grad_mode import state as _state  # this thread's grad mode and tape: read on every operation
from .node import edge_node, next_seq, node_class
from .tensor import Tensor, storage_root, wrap

_ndarray = np.ndarray
_new = object.__new__
_SCALARS = (int, float, complex, bool, np.number, np.bool_)
_REAL_SCALARS = (int, float, np.floating, np.integer, np.bool_)  # (the fast path: complex ones note themselves)
_plain_classes: dict[Primitive, type] = {}
# (While a graph is being drawn, ``_state.trace`` keeps every recorded node with its output
# tensor and its inputs, tensors and constants, in evaluation order: see ``tape.recording``.)
_variant_classes: dict[tuple[Any, ...], type] = {}


def constant(x: Any) -> Any:
    """A non-tensor operand as NumPy sees it; numbers stay Python numbers (weakly typed)."""
    if isinstance(x, _SCALARS) or x.__class__ is _ndarray:
        _tensor_mod.mark_complex(x)
        return x
    if isinstance(x, (list, tuple)):
        if not _has_tensor(x):
            return np.asarray(x, dtype=np.float64)
        value = np.asarray(_values(x))
        _tensor_mod.mark_complex(value)
        return value
    raise TypeError(f"unsupported operand type: {type(x).__name__}")


_HALF = np.dtype(np.float16)
_F64_SCALAR = np.float64  # the common result: no dtype to look at
_BOOL = np.dtype(np.bool_)


def _is_bool(value: Any) -> bool:
    return getattr(value, "dtype", _HALF).kind == "b" or value.__class__ is bool


def _from_bools(out: Any, values: Any) -> bool:
    """NumPy computes on booleans in float16 (``exp``, ``atan2``) or int8 (``b ** 2``); PyTorch in
    float: true when ``out`` got such a dtype from booleans (not from a float16 input, nor with an
    integer tensor: ``k * mask`` stays integer, as in PyTorch)."""
    kind = getattr(out, "dtype", _HALF).kind
    if not (kind in "iu" or getattr(out, "dtype", None) == _HALF):
        return False
    found = False
    for v in values:
        if _is_bool(v):
            found = True
        elif getattr(v, "dtype", None) == _HALF or (v.__class__ is not int and getattr(v, "dtype", _HALF).kind in "iu"):
            return False
    return found


def _floats_over_ints(values: Any) -> list[Any] | None:
    """PyTorch computes integer tensors with floating ones in the floating dtype (int32 with float32
    is float32), NumPy in one wide enough for both (float64): the integer values cast to the
    floating dtype, or None when no value is an integer array beside a floating one."""
    dtypes = [getattr(v, "dtype", None) for v in values]
    first = None
    for d in dtypes:  # (the common case, kept fast: every value of one dtype, or a Python number)
        if d is not None and d is not first:
            if first is not None:
                break
            first = d
    else:
        return None
    ints = [d is not None and d.kind in "iu" for d in dtypes]
    floats = [d for d in dtypes if d is not None and d.kind in "fc"]
    if not floats or not any(ints):
        return None
    target = np.result_type(*floats)
    return [v.astype(target) if is_int else v for v, is_int in zip(values, ints)]


def _as_float(value: Any) -> Any:
    return np.float64(value) if value.__class__ is bool else value.astype(np.float64) if _is_bool(value) else value


def _has_tensor(items: Any) -> bool:
    return any(isinstance(i, Tensor) or (isinstance(i, (list, tuple)) and _has_tensor(i)) for i in items)


def _values(items: Any) -> Any:
    return [_values(i) if isinstance(i, (list, tuple)) else (i._value if isinstance(i, Tensor) else i) for i in items]


def _node_cls(prim: Primitive, inputs: Any, params: tuple[Any, ...]) -> type:
    if prim.variant is None:
        return _plain_classes.get(prim) or _plain_class(prim)
    consts = tuple(x.__class__ is not Tensor for x in inputs)
    choice = prim.variant(consts, params)
    key = (prim, choice)
    cls = _variant_classes.get(key)
    if cls is None:
        cls = _variant_classes.setdefault(key, node_class(prim, prim.node_name(consts, params)))
    return cls


def make_node(
    prim: Primitive, inputs: Any, values: Any, out: Any, params: tuple[Any, ...], edges: tuple[Any, ...]
) -> Any:
    saves = prim.saves
    saved = out_saved = versions = shapes = None
    if saves == "inputs" or saves == "both":
        saved = tuple(inputs) if not prim.reads else _read_inputs(prim, inputs, edges)
        if _tensor_mod.inplace_seen:
            seen = tuple(storage_root(x)._version if x.__class__ is Tensor else 0 for x in inputs)
            versions = seen if any(seen) else None
    elif saves == "meta":
        saved = tuple(Meta.of(v) for v in values)
        out_saved = Meta.of(out)
    if saves == "output" or saves == "both":
        out_saved = out
    if out.__class__ is _ndarray and (prim.elementwise or prim.arity == 2):
        oshape = out.shape
        in_shapes = tuple(np.shape(v) for v in values)
        for s, e in zip(in_shapes, edges):
            if e is not None and s != oshape:
                shapes = in_shapes
                break
    return _node_cls(prim, inputs, params)(edges, saved, out_saved, params, shapes, versions)


def _read_inputs(prim: Primitive, inputs: Any, edges: tuple[Any, ...]) -> tuple[Any, ...]:
    """The inputs that the rules of the inputs requiring grad read (``None`` for the rest)."""
    reads = prim.reads
    wanted = {j for i, e in enumerate(edges) if e is not None for j in reads[i]}
    return tuple(x if j in wanted else None for j, x in enumerate(inputs))


def _mark_view(result: Tensor, inputs: Any, prim: Primitive, params: tuple[Any, ...]) -> None:
    value = result._value
    source = inputs[0]
    if value.__class__ is not _ndarray or value.base is None or source.__class__ is not Tensor:
        return
    if not (value.flags.writeable or 0 in value.strides or _expanded_view(source)):
        # (a read-only result, NumPy's diagonal, is no view to write through: changed in place, it is
        # replaced; an expanded one is, and so is a view of it: it is written through to the base)
        return
    root = storage_root(source)
    if not np.may_share_memory(value, root._value):
        return  # a view of a copy NumPy made on the way (reshape of a transpose)
    result._base = root
    if not _state.enabled or source._no_grad_view:  # (PyTorch's creation_meta NO_GRAD_MODE)
        result._no_grad_view = True
    if source._multi_view is not None:  # a view of one of several views (unbind's): refused alike
        edge = result._edge
        name = source._multi_view[0] if edge is None else edge_node(edge).name()
        result._multi_view = (name.removesuffix("Backward0"), 0, *source._multi_view[2:])
    if source._detached:
        result._detached = True
    elif prim.arity == 1:  # how to take the view again from its base (an in-place change rebases it)
        chain = () if source._base is None else source._view_fn
        if chain is not None:
            result._view_fn = chain + ((prim, params),)
            _tensor_mod.note_view(root, result)


def _expanded_view(source: Any) -> bool:
    """A read-only view taken of a base: an expanded tensor or a view of one."""
    return source.__class__ is Tensor and source._base is not None and not source._value.flags.writeable


def apply(prim: Primitive, inputs: Any, params: tuple[Any, ...] = ()) -> Tensor:
    """Apply ``prim`` to tensors or constants (a sequence of tensors for stack/cat)."""
    if prim.arity < 0:
        inputs = tuple(inputs)
    values = []
    edges = []
    recording = False
    for x in inputs:
        if x.__class__ is Tensor:
            values.append(x._value)
            e = x._edge
            edges.append(e)
            recording = recording or e is not None
        else:
            values.append(constant(x))
            edges.append(None)
    out = prim.forward(values, *params) if prim.arity < 0 else prim.forward(*values, *params)
    if _from_bools(out, values):
        values = [_as_float(v) for v in values]  # NumPy computes on booleans in float16; PyTorch in float
        out = prim.forward(values, *params) if prim.arity < 0 else prim.forward(*values, *params)
    elif (cast := _floats_over_ints(values)) is not None:
        inputs = [c if c is not v else x for x, v, c in zip(inputs, values, cast)]  # the integers: constants
        values = cast
        out = prim.forward(values, *params) if prim.arity < 0 else prim.forward(*values, *params)
    if not recording or not _state.enabled or not prim.differentiable:
        result = wrap(out)
    else:
        if prim.arity >= 0:
            edges = [e if rule is not None else None for e, rule in zip(edges, prim.vjp)]
        result = wrap(out, make_node(prim, inputs, values, out, params, tuple(edges)))
        trace = _state.trace
        if trace is not None:
            trace.append((result._edge, result, tuple(inputs)))
    if not prim.elementwise:
        _mark_view(result, inputs, prim, params)
    return result


def _plain_class(prim: Primitive) -> type:
    cls = _plain_classes.get(prim)
    if cls is None:  # one class, whichever thread makes it first
        cls = _plain_classes.setdefault(prim, node_class(prim, prim.node_name()))
        if prim.variant is None and prim.saves != "meta":
            _plain_binary.setdefault(prim, cls)
    return cls


#: the node classes whose fields ``binary`` sets itself (no overloads, no metadata saved), filled
#: by ``_plain_class`` as each primitive's first node is made
_plain_binary: dict[Primitive, type] = {}


def unary(prim: Primitive, x: Tensor) -> Tensor:
    """``prim(x)`` for a one-input primitive without parameters (the hot path)."""
    value = x._value
    if x._edge is None and (
        value.__class__ is np.bool_ or value.__class__ is _ndarray and value.dtype is _BOOL
    ):  # a comparison's result: as floats (NumPy would use float16)
        value = value.astype(np.float64)
    out = prim.forward(value)
    result = _new(Tensor)
    result._value = out
    e = x._edge
    if e is None or not _state.enabled or prim.vjp[0] is None:
        result._edge = None
        return result
    saves = prim.saves
    if _tensor_mod.inplace_seen or saves == "meta":
        result._edge = make_node(prim, (x,), (x._value,), out, (), (e,))
        trace = _state.trace
        if trace is not None:
            trace.append((result._edge, result, (x,)))
        return result
    # inlined node construction: this runs once per operation
    node = _new(_plain_classes.get(prim) or _plain_class(prim))
    node.seq = next_seq()
    node.e0 = e
    node.s0 = x if saves == "inputs" or saves == "both" else None
    node.out = out if saves == "output" or saves == "both" else None
    result._edge = node
    trace = _state.trace
    if trace is not None:
        trace.append((node, result, (x,)))
    return result


def binary(prim: Primitive, a: Any, b: Any) -> Any:
    """``prim(a, b)`` for a two-input elementwise primitive (the hot path of every operator: two tensors
    take no call beyond the forward; a constant operand, a dtype to widen or no gradient take one)."""
    if a.__class__ is Tensor:
        av = a._value
        ea = a._edge
    else:  # a constant: a Python float as it is (0.5 * x), anything else through _operand
        a = av = a if a.__class__ is float else _operand(a)
        if a is NotImplemented:
            return NotImplemented
        ea = None
    if b.__class__ is Tensor:
        bv = b._value
        eb = b._edge
    else:
        b = bv = b if b.__class__ is float else _operand(b)
        if b is NotImplemented:
            return NotImplemented
        eb = None
    out = prim.forward(av, bv)
    if (out.__class__ is not _F64_SCALAR or av.__class__ is not bv.__class__) and getattr(
        av, "dtype", None
    ) is not getattr(bv, "dtype", None):  # (one dtype: nothing widened)
        a, b, av, bv, out = _widened(prim, a, b, av, bv, out)
    result = _new(Tensor)
    result._value = out
    if (ea is None and eb is None) or not _state.enabled:
        return _constant(prim, result, av, bv)
    rules = prim.vjp
    if rules[0] is None:
        ea = None
    if rules[1] is None:
        eb = None
    if ea is None and eb is None:
        result._edge = None
        return result
    cls = _plain_binary.get(prim)
    if cls is None or _tensor_mod.inplace_seen:  # (the first node of a primitive registers its class)
        node = make_node(prim, (a, b), (av, bv), out, (), (ea, eb))
    else:  # a plain node, its fields set here: this runs once per operation
        node = _new(cls)
        node.seq = next_seq()
        node.e0 = ea
        node.e1 = eb
        saves = prim.saves
        if saves in _SAVES_INPUTS:
            node.s0 = a
            node.s1 = b
            if (ea is None) is not (eb is None):  # one input without a gradient: its partner is not read
                _drop_unread(node, prim, ea)
        else:
            node.s0 = node.s1 = None
        node.out = out if saves in _SAVES_OUTPUT else None
        if out.__class__ is _ndarray:
            _note_broadcast(node, av, bv, out, ea, eb)
    result._edge = node
    trace = _state.trace
    if trace is not None:
        trace.append((node, result, (a, b)))
    return result


_SAVES_INPUTS = frozenset(("inputs", "both"))
_SAVES_OUTPUT = frozenset(("output", "both"))


def _operand(x: Any) -> Any:
    """A binary operation's operand that is not a Tensor: a NumPy number is weak, as PyTorch takes it
    (its Python number); a real number is used as it is; anything else is a constant, or NotImplemented."""
    if isinstance(x, np.generic) and not isinstance(x, np.str_):
        x = x.item()
    return x if isinstance(x, _REAL_SCALARS) else _constant_operand(x)


def _widened(prim: Primitive, a: Any, b: Any, av: Any, bv: Any, out: Any) -> tuple[Any, Any, Any, Any, Any]:
    """Operands of two dtypes: an integer tensor beside a float becomes a floating constant, as
    PyTorch promotes it, and the forward runs again on the widened values."""
    cast = _floats_over_ints((av, bv))
    if cast is None:
        return a, b, av, bv, out
    if cast[0] is not av:
        a = av = cast[0]
    if cast[1] is not bv:
        b = bv = cast[1]
    return a, b, av, bv, prim.forward(av, bv)


def _constant(prim: Primitive, result: Tensor, av: Any, bv: Any) -> Tensor:
    """A result with no gradient to record (constants, or grad mode off): booleans compute as floats."""
    out = result._value
    if out.__class__ is not _F64_SCALAR and _from_bools(out, (av, bv)):
        result._value = prim.forward(_as_float(av), _as_float(bv))
    result._edge = None
    return result


def _constant_operand(x: Any) -> Any:
    """A non-tensor operand as a constant, or NotImplemented (Python then tries the other operand)."""
    try:
        return constant(x)
    except TypeError:
        return NotImplemented


def _drop_unread(node: Any, prim: Primitive, ea: Any) -> None:
    """One side is constant: keep the other side's input only if its own rule reads it."""
    reads = prim.reads
    if reads:
        if ea is None:
            if 1 not in reads[1]:
                node.s1 = None
        elif 0 not in reads[0]:
            node.s0 = None


def _note_broadcast(node: Any, av: Any, bv: Any, out: np.ndarray, ea: Any, eb: Any) -> None:
    """Keep the inputs' shapes where broadcasting changed them (the engine undoes it once)."""
    oshape = out.shape
    sa = np.shape(av)
    sb = np.shape(bv)
    if (ea is not None and sa != oshape) or (eb is not None and sb != oshape):
        node.shapes = (sa, sb)


def matmul(a: Any, b: Any) -> Any:
    a_ndim = a.ndim if a.__class__ is Tensor else np.ndim(a)
    b_ndim = b.ndim if b.__class__ is Tensor else np.ndim(b)
    if a_ndim == 0 or b_ndim == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D")
    try:
        return apply(_linalg.matmul_primitive(a_ndim, b_ndim), (a, b))
    except ValueError:
        raise RuntimeError(matmul_mismatch(np.shape(_value(a)), np.shape(_value(b)))) from None


def _value(x: Any) -> Any:
    return x._value if x.__class__ is Tensor else x


def matmul_mismatch(sa: tuple[int, ...], sb: tuple[int, ...]) -> str:
    """PyTorch's message for operands whose inner sizes differ (naming both shapes)."""
    dims = "x".join
    if len(sa) == 1 and len(sb) == 1:
        return (
            f"inconsistent tensor size, expected tensor [{sa[0]}] and src [{sb[0]}] to have the same number of "
            f"elements, but got {sa[0]} and {sb[0]} elements respectively"
        )
    if len(sa) == 2 and len(sb) == 1:
        return f"size mismatch, got input ({sa[0]}), mat ({dims(map(str, sa))}), vec ({sb[0]})"
    if len(sa) <= 2 and len(sb) == 2:
        a2 = sa if len(sa) == 2 else (1,) + sa
        return f"mat1 and mat2 shapes cannot be multiplied ({dims(map(str, a2))} and {dims(map(str, sb))})"
    return f"matmul: shapes {list(sa)} and {list(sb)} cannot be multiplied (inner sizes or batch sizes differ)"


def getitem(x: Tensor, index: tuple[Any, ...]) -> Tensor:
    if len(index) > 2 and not _shape.is_basic_index(index):
        steps = _shape.split_selects(index)
        if steps is not None:  # PyTorch's order: the integers select first
            return getitem(getitem(x, steps[0]), steps[1])
    try:
        return apply(_shape.GETITEM, (x,), (index,))
    except IndexError as exc:
        raise IndexError(index_error(np.shape(_value(x)), index, exc)) from None


def index_error(shape: tuple[int, ...], index: tuple[Any, ...], exc: Exception) -> str:
    """PyTorch's words for an index that does not fit a value of ``shape`` (NumPy's otherwise)."""
    text = str(exc)
    for item in index:
        if isinstance(item, np.ndarray) and item.dtype.kind not in "biu":
            return "tensors used as indices must be long, int, byte or bool tensors"
    if text.startswith("too many indices"):
        return f"too many indices for tensor of dimension {len(shape)}"
    if "out of bounds for axis" in text:
        return text.replace("for axis", "for dimension")
    if text.startswith("boolean index did not match"):
        ellipsis = sum(1 for i in index if i is Ellipsis)
        used = sum(i.ndim if isinstance(i, np.ndarray) and i.dtype == np.bool_ else i is not None for i in index)
        dim = 0
        for item in index:
            if item is Ellipsis:
                dim += (len(shape) - used + ellipsis) if ellipsis else 0
            elif isinstance(item, np.ndarray) and item.dtype == np.bool_:
                covered = shape[dim : dim + item.ndim]
                for j, (m, n) in enumerate(zip(item.shape, covered)):
                    if m != n:
                        return (
                            f"The shape of the mask {list(item.shape)} at index {j} does not match the shape of "
                            f"the indexed tensor {list(shape)} at index {dim + j}"
                        )
                dim += item.ndim
            elif item is not None:
                dim += 1
    return text
