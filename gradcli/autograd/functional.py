"""Jacobians, Hessians and products with them (PyTorch's ``torch.autograd.functional``).

Every Jacobian is computed in batched passes, not a Python loop of one pass
per row: reverse mode sends all the output basis vectors back through the
graph at once (the rules accept leading batch axes), forward mode pushes all
the input basis vectors through the recorded run at once. ``mode="auto"``
picks the cheaper: forward when there are fewer inputs than outputs. Hessians
are forward-over-reverse: the gradient is recorded (``create_graph=True``)
and the input basis pushed forward through that record.

``create_graph=True`` follows PyTorch: inputs that require grad are used
through a recorded view of themselves, everything is computed by recorded
backward passes (forward products by PyTorch's double-backward trick), and the
results differentiate again, in either mode. A run nested in another (a JVP of
a create_graph Jacobian) hands its record on to the outer one.

>>> import gradcli as gc
>>> from gradcli.functional import hessian, jacobian
>>> jacobian(lambda x: x ** 2, gc.tensor([1.0, 2.0]))
tensor([[2., 0.],
        [0., 4.]])
>>> hessian(lambda x, y: x * x * y, (gc.tensor(2.0), gc.tensor(3.0)))
((tensor(6.), tensor(4.)), (tensor(4.), tensor(0.)))
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import ops
from ..memory import MAX_BATCH_ELEMENTS  # bounds the memory of a batched pass
from . import forward, grad_mode
from .basis import ScaledIdentity, Structured, identity
from .engine import grad as _grad
from .engine import reachable_counts, run_backward
from .function import FunctionNode
from .functions import cat
from .node import edge_node
from .record import apply
from .tape import nested_recording
from .tensor import Tensor, wrap


@dataclass
class Plan:
    """How a Jacobian was computed, for ``--explain``."""

    mode: str  # "forward" or "reverse"
    inputs: int  # n: the number of input elements
    outputs: int  # m: the number of output elements
    passes: int  # batched passes that ran
    vectorised: bool
    reason: str

    def explain(self) -> str:
        one = "1 reverse pass per output element" if self.mode == "reverse" else "1 forward pass per input element"
        batch = "all of them at once" if self.passes == 1 else f"in {self.passes} batches"
        how = f"{batch} (vectorised)" if self.vectorised else f"{self.passes} passes one by one (not vectorised)"
        return (
            f"{self.mode} mode: n = {self.inputs} inputs, m = {self.outputs} outputs. "
            f"Forward mode needs n = {self.inputs} tangent passes, reverse mode m = {self.outputs} cotangent "
            f"passes; {self.reason}. Ran {one}, {how}."
        )


def choose_mode(mode: str, n: int, m: int) -> tuple[str, str]:
    if mode not in ("auto", "forward", "reverse"):
        raise ValueError(f"mode must be 'auto', 'forward' or 'reverse', not {mode!r}")
    if mode != "auto":
        return mode, f"{mode} mode was asked for"
    if n < m:
        return "forward", f"forward mode chosen: fewer inputs than outputs ({n} < {m})"
    return "reverse", f"reverse mode chosen: no more outputs than inputs ({m} <= {n})"


# --- inputs and outputs ------------------------------------------------------------------------------------


def as_tuple(x: Any) -> tuple[bool, tuple[Any, ...]]:
    if isinstance(x, (tuple, list)):
        return True, tuple(x)
    return False, (x,)


def _as_tensors(x: Any, arg: str, fn: str) -> tuple[bool, tuple[Any, ...]]:
    """PyTorch's ``_as_tuple`` for the public functions: a Tensor or a tuple of Tensors, else its TypeError."""
    many = isinstance(x, tuple)
    items = x if many else (x,)
    for i, item in enumerate(items):
        if not isinstance(item, Tensor):
            where = f"the value at index {i}" if many else f"the given {arg}"
            raise TypeError(
                f"The {arg} given to {fn} must be either a Tensor or a tuple of Tensors but {where} has type "
                f"{type(item)}."
            )
    return many, items


STRICT_VECTORIZE = (
    "torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not supported together. "
    "Please either set `strict=False` or `vectorize=False`."
)


def input_leaves(inputs: tuple[Any, ...]) -> list[Tensor]:
    """Fresh leaves holding the inputs' values, requiring grad."""
    out = []
    for x in inputs:
        value = x.detach()._value if isinstance(x, Tensor) else Tensor(x)._value
        leaf = wrap(np.array(value, copy=True) if isinstance(value, np.ndarray) else value)
        leaf.requires_grad_(True)
        if isinstance(x, Tensor) and x.name:
            leaf.name = x.name
        out.append(leaf)
    return out


def run_recorded(
    func: Callable[..., Any], leaves: list[Tensor], name: str = "jacobian"
) -> tuple[bool, list[Tensor], list[Any]]:
    with nested_recording() as tape:
        result = func(*leaves)
    many, outs = as_tuple(result)
    return many, [_output(o, i, many, name) for i, o in enumerate(outs)], tape


_NUMBERS = (int, float, complex, np.number, np.ndarray)


def _output(value: Any, i: int, many: bool, name: str) -> Tensor:
    """An output as a tensor (a number or array is a constant); anything else is PyTorch's TypeError."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, _NUMBERS) and not isinstance(value, bool):
        return Tensor(value)
    where = f"the value at index {i}" if many else "the given outputs of the user-provided function"
    raise TypeError(
        f"The outputs of the user-provided function given to {name} must be either a Tensor or a tuple of "
        f"Tensors but {where} has type {type(value)}."
    )


def _sizes(tensors: Sequence[Tensor]) -> list[int]:
    return [int(np.size(t._value)) for t in tensors]


def _has_custom(tape: list[Any]) -> bool:
    return any(isinstance(node, FunctionNode) for node, _, _ in tape)


# --- the two passes ------------------------------------------------------------------------------------------


def reverse_blocks(
    outs: list[Tensor], ins: list[Tensor], *, create_graph: bool = False, vectorised: bool = True
) -> tuple[list[list[Any]], int]:
    """d out_k / d in_j for all k, j, by batched reverse passes: blocks of shape out_k + in_j."""
    if any(o._edge is None for o in outs):
        return _with_constants(outs, ins, create_graph, vectorised)
    sizes = _sizes(outs)
    total = sum(sizes)
    widest = max([total, *(_sizes(ins))])
    step = max(1, MAX_BATCH_ELEMENTS // max(widest, 1)) if vectorised else 1
    capture = {edge_node(x._edge): j for j, x in enumerate(ins)}
    rows: list[list[Any]] = [[] for _ in ins]
    passes = 0
    offsets = np.cumsum([0, *sizes])
    for start in range(0, total, step):
        stop = min(total, start + step)
        grads = _reverse_seeds(outs, start, stop, offsets, create_graph, vectorised)
        nbatch = 1 if vectorised else 0
        found = run_backward([o._edge for o in outs], grads, retain_graph=True, create_graph=create_graph,
                             capture=dict(capture), nbatch=nbatch) if outs else [None] * len(ins)  # fmt: skip
        passes += 1
        for j, g in enumerate(found):
            rows[j].append(_rows_of(g, ins[j], stop - start, create_graph, vectorised))
    blocks = [
        [_reshape(_concat(rows[j])[offsets[k] : offsets[k + 1]], out.shape + x.shape) for j, x in enumerate(ins)]
        for k, out in enumerate(outs)
    ]
    if len(outs) > 1:
        passes += _redo_not_finite(blocks, outs, ins, create_graph, vectorised)
    return blocks, passes


def _with_constants(
    outs: list[Tensor], ins: list[Tensor], create_graph: bool, vectorised: bool
) -> tuple[list[list[Any]], int]:
    """``reverse_blocks`` where some outputs have no grad_fn (a constant, a comparison's bool): they
    are no row of the batched pass (their zero seed would still meet another output's infinite
    derivative, 0 * inf = nan), their blocks are zeros."""
    grown = [o for o in outs if o._edge is not None]
    found, passes = reverse_blocks(grown, ins, create_graph=create_graph, vectorised=vectorised) if grown else ([], 0)
    rows_of = iter(found)
    return [next(rows_of) if o._edge is not None else [_zeros(o.shape + x.shape, create_graph, _float_dtype(x._value)) for x in ins]
            for o in outs], passes  # fmt: skip


def _basis_rows(start: int, stop: int, lo_k: int, hi_k: int, dtype: Any) -> np.ndarray:
    """Rows ``start .. stop`` of the identity over all elements, restricted to the columns ``lo_k ..
    hi_k`` of one tensor's elements: a batch of seeds for that tensor (flat)."""
    seed = np.zeros((stop - start, hi_k - lo_k), dtype=dtype)
    lo, hi = max(start, lo_k), min(stop, hi_k)
    if lo < hi:
        seed[np.arange(lo - start, hi - start), np.arange(lo - lo_k, hi - lo_k)] = 1.0
    return seed


def _reverse_seeds(
    outs: list[Tensor], start: int, stop: int, offsets: Any, create_graph: bool, vectorised: bool
) -> list[Any]:
    """The seeds of one batched reverse pass, one per output."""
    whole = start == 0 and stop == offsets[-1] and len(outs) == 1 and not create_graph
    grads = []
    for k, out in enumerate(outs):
        dtype = _float_dtype(out._value)
        if whole:  # every basis vector of the one output: kept diagonal while it stays so
            grads.append(identity(out.shape, dtype))
            continue
        seed = _basis_rows(start, stop, offsets[k], offsets[k + 1], dtype)
        # one row at a time (a custom Function may not take batches): no batch axis at all
        seed = seed.reshape(((stop - start,) if vectorised else ()) + out.shape)
        grads.append(wrap(seed) if create_graph else seed)
    return grads


def _rows_of(g: Any, x: Tensor, n: int, create_graph: bool, vectorised: bool) -> Any:
    """One pass's ``n`` rows of d out / d x (``g`` None: x was not reached, zeros)."""
    if g is None:
        return _zeros((n,) + x.shape, create_graph, _float_dtype(x._value))
    return _dense(g) if vectorised else np.reshape(_dense(g), (1,) + x.shape)


def _redo_not_finite(
    blocks: list[list[Any]], outs: list[Tensor], ins: list[Tensor], create_graph: bool, vectorised: bool
) -> int:
    """A zero seed of another output still meets its inf (0 * inf = nan): an output whose rows are
    not finite is done again alone, as PyTorch's jacobian does each output by itself. Returns the
    passes that took."""
    passes = 0
    for k, out in enumerate(outs):
        if not all(np.isfinite(getattr(b, "_value", b)).all() for b in blocks[k]):
            alone, more = reverse_blocks([out], ins, create_graph=create_graph, vectorised=vectorised)
            blocks[k], passes = alone[0], passes + more
    return passes


def _float_dtype(value: Any) -> np.dtype:
    """The dtype of a seed for ``value``: its own when floating or complex (float32 stays float32, as
    in PyTorch), float64 for integers and booleans."""
    dtype = np.asarray(value).dtype
    return dtype if dtype.kind in "fc" else np.dtype(np.float64)


def forward_blocks(
    outs: list[Tensor], ins: list[Tensor], tape: list[Any], structured: bool = False
) -> tuple[list[list[Any]], int]:
    """The same blocks by batched forward passes over the recorded run. ``structured``: one vector
    input's identity goes through as a ``basis.Structured`` batch (bands and low rank: a Hessian's)."""
    sizes = _sizes(ins)
    total = sum(sizes)
    widest = max([total, *_sizes(outs)])
    step = max(1, MAX_BATCH_ELEMENTS // max(widest, 1))
    offsets = np.cumsum([0, *sizes])
    columns: list[list[Any]] = [[] for _ in outs]
    passes = 0
    for start in range(0, total, step):
        stop = min(total, start + step)
        seeds = {}
        for j, x in enumerate(ins):
            if start == 0 and stop == total and len(ins) == 1:
                dtype = _float_dtype(x._value)
                if structured and x.ndim == 1 and dtype.kind == "f":
                    seeds[forward.key(x)] = Structured.identity(x.shape[0], dtype)
                else:
                    seeds[forward.key(x)] = identity(x.shape, dtype)
                continue
            seed = _basis_rows(start, stop, offsets[j], offsets[j + 1], _float_dtype(x._value))
            seeds[forward.key(x)] = seed.reshape((stop - start,) + x.shape)
        tangents = forward.push(tape, seeds, nbatch=1)
        passes += 1
        for k, out in enumerate(outs):
            t = tangents.get(forward.key(out))
            columns[k].append(
                np.zeros((stop - start,) + out.shape, _float_dtype(out._value)) if t is None else _dense(t)
            )
    blocks = []
    for k, out in enumerate(outs):
        full = np.concatenate(columns[k], axis=0)  # (n, *out_shape)
        full = np.moveaxis(full.reshape(total, -1), 0, -1)  # (m_k, n)
        row = []
        for j, x in enumerate(ins):
            row.append(full[:, offsets[j] : offsets[j + 1]].reshape(out.shape + x.shape))
        blocks.append(row)
    return blocks, passes


def _zeros(shape: tuple[int, ...], create_graph: bool, dtype: Any = np.float64) -> Any:
    zeros = np.zeros(shape, dtype)
    return wrap(zeros) if create_graph else zeros


def _dense(value: Any) -> Any:
    return np.asarray(value) if isinstance(value, (ScaledIdentity, Structured)) else value


def _concat(parts: list[Any]) -> Any:
    if isinstance(parts[0], Tensor):
        return cat(parts, 0) if len(parts) > 1 else parts[0]
    return np.concatenate(parts, axis=0)


def _reshape(value: Any, shape: tuple[int, ...]) -> Any:
    return value.reshape(shape) if isinstance(value, Tensor) else np.reshape(value, shape)


def jacobian_blocks(
    func: Callable[..., Any], inputs: tuple[Any, ...], mode: str = "auto"
) -> tuple[bool, list[Tensor], list[list[Any]], Plan]:
    """Outputs, d out_k / d in_j blocks and how they were computed."""
    leaves = input_leaves(inputs)
    many, outs, tape = run_recorded(func, leaves)
    blocks, plan = _jacobian_of_run(outs, leaves, tape, mode)
    return many, outs, blocks, plan


def _jacobian_of_run(
    outs: list[Tensor], leaves: list[Tensor], tape: list[Any], mode: str
) -> tuple[list[list[Any]], Plan]:
    n, m = sum(_sizes(leaves)), sum(_sizes(outs))
    chosen, reason = choose_mode(mode, n, m)
    custom = _has_custom(tape)
    if chosen == "forward":
        try:
            blocks, passes = forward_blocks(outs, leaves, tape)
            return blocks, Plan("forward", n, m, passes, True, reason)
        except forward.NoForwardRule as exc:
            if mode == "forward":
                raise
            chosen, reason = "reverse", f"{reason}, but {exc}: reverse mode instead"
    blocks, passes = reverse_blocks(outs, leaves, vectorised=not custom)
    if custom:
        reason += "; a custom Function's backward is called one row at a time (it may not accept batches)"
    return blocks, Plan("reverse", n, m, passes, not custom, reason)


# --- PyTorch's conventions: inputs, vectors, strict mode -------------------------------------------------------------


class StrategyError(ValueError, AssertionError):
    """An unknown ``strategy``: a ValueError, and the AssertionError PyTorch raises for it."""


_STRATEGY_HINT = (
    'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your function has more outputs '
    'than inputs, "forward-mode" tends to be more performant. Otherwise, prefer to use "reverse-mode".'
)
_V_NONE_OUTPUT = (
    "The vector v can only be None if the user-provided function returns a single Tensor with a single element."
)
_V_NONE_INPUT = (
    "The vector v can only be None if the input to the user-provided function is a single Tensor with a single element."
)


def _mode_of(strategy: str) -> str:
    """gradcli's mode for PyTorch's ``strategy`` ("forward-mode", "reverse-mode"; gradcli's own names pass)."""
    known = {"forward-mode": "forward", "reverse-mode": "reverse", "forward": "forward", "reverse": "reverse"}
    known["auto"] = "auto"
    if strategy not in known:
        raise StrategyError(_STRATEGY_HINT)
    return known[strategy]


def _grad_on(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run under grad mode, as PyTorch's functional API runs under ``enable_grad()``: it works inside ``no_grad``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        previous = grad_mode.set_enabled(True)
        try:
            return fn(*args, **kwargs)
        finally:
            grad_mode.set_enabled(previous)

    return wrapper


def _inputs(given: tuple[Any, ...], create_graph: bool) -> list[Tensor]:
    """PyTorch's ``_grad_preprocess``: with ``create_graph``, an input that requires grad is used through a
    new tensor linked to it (so the results are differentiable with respect to it); every other input
    becomes a fresh leaf."""
    out = []
    for x in given:
        if create_graph and isinstance(x, Tensor) and x._edge is not None:
            linked = apply(ops.RESHAPE, (x,), (x.shape,))  # PyTorch's x.view_as(x)
            if x.name:
                linked.name = x.name
            out.append(linked)
        else:
            out.extend(input_leaves((x,)))
    return out


def _vectors(v: Any, refs: list[Tensor], many: bool, create_graph: bool, if_none: str, fn: str) -> list[Tensor]:
    """The ``v`` of a product, one tensor per ``ref`` of the same shape (PyTorch's ``_validate_v``).

    ``None`` is a single 1 for a single one-element ``ref``. Without ``create_graph`` the vectors are
    constants; with it, a ``v`` that requires grad stays in the graph (the result is differentiable in it).
    """
    if v is None:
        if len(refs) != 1 or np.size(refs[0]._value) != 1:
            raise RuntimeError(if_none)
        return [wrap(np.ones_like(refs[0]._value))]
    _, vs = _as_tensors(v, "v", fn)
    if len(vs) != len(refs):
        if many:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(refs)} but got {len(vs)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    out = []
    for i, (t, ref) in enumerate(zip(vs, refs)):
        if not isinstance(t, Tensor):
            t = wrap(np.asarray(t, dtype=np.result_type(np.asarray(t), np.asarray(ref._value).dtype, np.float64)))
        elif not create_graph:
            t = t.detach()
        if tuple(t.shape) != tuple(ref.shape):
            where = f"Entry {i} in " if many else ""
            raise RuntimeError(f"{where}v has invalid size: should be {tuple(ref.shape)} but got {tuple(t.shape)}.")
        out.append(t)
    return out


def _check_outputs(outs: list[Tensor], strict: bool) -> None:
    if strict:
        for i, o in enumerate(outs):
            if o._edge is None:
                raise RuntimeError(
                    f"Output {i} of the user-provided function does not require gradients. The outputs must be "
                    "computed in a differentiable manner from the input when running in strict mode."
                )


def _depends(outs: list[Any], ins: list[Tensor]) -> list[list[bool]]:
    """``[k][j]``: whether output k is connected to input j in the graph (PyTorch's "independent" test)."""
    targets = [edge_node(x._edge) for x in ins]
    result = []
    for o in outs:
        reached = reachable_counts([o._edge]) if isinstance(o, Tensor) and o._edge is not None else {}
        result.append([t in reached for t in targets])
    return result


def _check_independent(outs: list[Tensor], ins: list[Tensor], strict: bool) -> None:
    """Strict mode: every output must depend on every input."""
    if strict:
        for k, row in enumerate(_depends(outs, ins)):
            for j, connected in enumerate(row):
                if not connected:
                    raise RuntimeError(
                        f"Output {k} of the user-provided function is independent of input {j}. "
                        "This is not allowed in strict mode."
                    )


def _check_jacobian(jac: list[Any], strict: bool, filled: bool = False) -> None:
    """Strict mode: the gradient of a Hessian's function must depend on the inputs (PyTorch's "jacobian" check).
    ``filled``: a missing gradient counts as zeros that do not depend on the input (``hessian``, whose inner
    jacobian is not strict), not as an input the output is independent of (``hvp``, ``vhp``)."""
    if strict:
        for i, g in enumerate(jac):
            if g is None and not filled:
                raise RuntimeError(
                    f"The output of the user-provided function is independent of input {i}. "
                    "This is not allowed in strict mode."
                )
            if g is None or g._edge is None:
                raise RuntimeError(
                    "While computing the hessian, found that the jacobian of the user-provided function with "
                    f"respect to input {i} is independent of the input. This is not allowed in strict mode. You "
                    "should ensure that your function is twice differentiable and that the jacobian depends on "
                    "the inputs (this would be violated by a linear function for example)."
                )


_INDEPENDENT = {
    "back": "The output of the user-provided function is independent of input {i}. This is not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the grad_outputs when "
    "using the double backward trick to compute forward mode gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. This is not allowed in "
    "strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} in the "
    "grad_jacobian. This is not allowed in strict mode as it prevents from using the double backward trick to "
    "replace forward mode AD.",
}


def _fill_zeros(grads: list[Any], refs: list[Tensor], strict: bool, create_graph: bool, stage: str) -> list[Tensor]:
    """PyTorch's ``_fill_in_zeros``: a missing gradient is zeros (or, in strict mode, an error)."""
    out = []
    for i, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(_INDEPENDENT[stage].format(i=i))
            g = wrap(np.zeros_like(ref._value))
        elif strict and create_graph and g._edge is None:
            what = "hessian" if stage.startswith("double") else "jacobian"
            raise RuntimeError(
                f"The {what} of the user-provided function is independent of input {i}. "
                "This is not allowed in strict mode when create_graph=True."
            )
        out.append(g)
    return out


def _backward(outs: list[Any], ins: list[Tensor], vs: list[Any], create_graph: bool) -> list[Any]:
    """``sum_k vs[k]^T d outs[k] / d ins`` (``None`` for an input no output reaches); outputs outside the
    graph (constants) add nothing, as in PyTorch's ``_autograd_grad``."""
    pairs = [(o, v) for o, v in zip(outs, vs) if isinstance(o, Tensor) and o._edge is not None]
    if not pairs:
        return [None] * len(ins)
    found = _grad(
        [o for o, _ in pairs],
        ins,
        grad_outputs=[v for _, v in pairs],
        create_graph=create_graph,
        allow_unused=True,
    )
    return list(found)


def _finish(tensors: list[Tensor], many: bool, create_graph: bool) -> Any:
    """PyTorch's ``_grad_postprocess``: results are cut from the graph unless ``create_graph``."""
    done = tuple(t if create_graph else t.detach() for t in tensors)
    return done if many else done[0]


def _single_output(result: Any, name: str) -> Tensor:
    if isinstance(result, (tuple, list)):
        for i, item in enumerate(result):  # PyTorch checks the outputs' types first (its TypeError)
            _output(item, i, True, name)
        raise RuntimeError(f"The function given to {name} should return a single Tensor")
    out = _output(result, 0, False, name)
    if np.size(out._value) != 1:
        raise RuntimeError(
            f"The Tensor returned by the function given to {name} should contain a single element "
            f"({name} needs a scalar output; the output has shape {tuple(out.shape)})"
        )
    return out


# --- the public functions -------------------------------------------------------------------------------------------


def _shape_result(many_in: bool, many_out: bool, blocks: list[list[Any]]) -> Any:
    wrapped = [[b if isinstance(b, Tensor) else wrap(np.asarray(b)) for b in row] for row in blocks]
    rows = [tuple(row) if many_in else row[0] for row in wrapped]
    return tuple(rows) if many_out else rows[0]


def _check_blocks(blocks: list[list[Any]], strict: bool, what: str) -> None:
    """Strict mode with ``create_graph``: every block must depend on the inputs."""
    if strict:
        for row in blocks:
            for j, b in enumerate(row):
                if not isinstance(b, Tensor) or b._edge is None:
                    raise RuntimeError(
                        f"The {what} of the user-provided function is independent of input {j}. "
                        "This is not allowed in strict mode when create_graph=True."
                    )


@_grad_on
def jacobian(
    func: Callable[..., Any],
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str | None = None,
    mode: str = "auto",
) -> Any:
    """d func(inputs) / d inputs, shaped ``output.shape + input.shape`` (tuples for several).

    ``mode``: "auto" (forward when inputs are fewer than outputs), "forward" or "reverse";
    PyTorch's ``strategy="forward-mode"/"reverse-mode"`` is accepted too. ``create_graph=True``
    gives a Jacobian differentiable with respect to the inputs that require grad (computed in
    reverse mode whatever the mode). ``strict=True`` raises PyTorch's RuntimeError when an output
    does not require grad or does not depend on an input (with ``create_graph``, also when a block
    does not depend on the inputs). ``vectorize`` is accepted (the passes are always batched); with
    ``strict`` it is refused, as in PyTorch.
    """
    if strategy is not None:
        mode = _mode_of(strategy)
    many_in, given = _as_tensors(inputs, "inputs", "jacobian")
    ins = _inputs(given, create_graph)
    many_out, outs, tape = run_recorded(func, ins)
    _check_outputs(outs, strict)
    if strict and vectorize:
        raise RuntimeError(STRICT_VECTORIZE)
    _check_independent(outs, ins, strict)
    if create_graph:  # (a custom Function's backward is called one row at a time: it may not take batches)
        blocks, _ = reverse_blocks(outs, ins, create_graph=True, vectorised=not _has_custom(tape))
        _check_blocks(blocks, strict, "jacobian")
    else:
        blocks, _ = _jacobian_of_run(outs, ins, tape, mode)
    return _shape_result(many_in, many_out, blocks)


def hessian_blocks(
    func: Callable[..., Any], inputs: tuple[Any, ...]
) -> tuple[Tensor, list[Tensor], list[list[Any]], Plan]:
    """The (scalar) output, its gradient and d2 out / d in_i d in_j, forward-over-reverse."""
    leaves = input_leaves(inputs)
    with nested_recording() as tape:
        out = func(*leaves)
        out = out if isinstance(out, Tensor) else Tensor(out)
        if np.size(out._value) != 1:
            raise RuntimeError(f"hessian needs a scalar output; the output has shape {out.shape}")
        grads = _materialised(_backward([out], leaves, [None], create_graph=True), leaves)
    blocks, plan = _second_blocks(grads, leaves, tape)
    return out, grads, blocks, plan


def _materialised(grads: list[Any], ins: list[Tensor]) -> list[Tensor]:
    return [wrap(np.zeros_like(x._value)) if g is None else g for g, x in zip(grads, ins)]


def _second_blocks(grads: list[Tensor], leaves: list[Tensor], tape: list[Any]) -> tuple[list[list[Any]], Plan]:
    n = sum(_sizes(leaves))
    try:
        blocks, passes = forward_blocks(grads, leaves, tape, structured=True)
        plan = Plan("forward", n, n, passes, True, "forward-over-reverse: the gradient's graph was recorded, "
                    "then all n input directions pushed forward through it")  # fmt: skip
    except forward.NoForwardRule as exc:
        blocks, passes = reverse_blocks(grads, leaves)
        plan = Plan("reverse", n, n, passes, True, f"reverse-over-reverse ({exc})")
    return blocks, plan


@_grad_on
def hessian(func: Callable[..., Any], inputs: Any, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "forward-mode") -> Any:  # fmt: skip
    """The second derivatives of a scalar ``func``: shape ``input.shape + input.shape``.

    Forward-over-reverse; with ``create_graph=True`` reverse-over-reverse, recorded, so the
    Hessian is differentiable with respect to the inputs that require grad. ``strict`` raises
    PyTorch's errors (an output that does not require grad, a gradient independent of the inputs).
    """
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise StrategyError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    many_in, given = _as_tensors(inputs, "inputs", "hessian")
    ins = _inputs(given, create_graph)
    with nested_recording() as tape:
        out = _single_output(func(*ins), "hessian")
        _check_outputs([out], strict)
        jac = _backward([out], ins, [None], create_graph=True)
    _check_jacobian(jac, strict, filled=True)
    if strict and vectorize:  # PyTorch's outer jacobian refuses them, after the inner one ran
        raise RuntimeError(STRICT_VECTORIZE)
    grads = _materialised(jac, ins)
    _check_independent(grads, ins, strict)
    if create_graph:
        blocks, _ = reverse_blocks(grads, ins, create_graph=True, vectorised=not _has_custom(tape))
        _check_blocks(blocks, strict, "jacobian")
    else:
        blocks, _ = _second_blocks(grads, ins, tape)
    return _shape_result(many_in, many_in, blocks)


@_grad_on
def vjp(
    func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """``(func(inputs), v^T J)``.

    ``v`` may be None when the output is a single element. Outputs that do not depend on the
    inputs give zeros (strict mode: PyTorch's RuntimeError). With ``create_graph=True`` both
    are differentiable with respect to the inputs (and ``v``) that require grad.
    """
    many_in, given = _as_tensors(inputs, "inputs", "vjp")
    ins = _inputs(given, create_graph)
    many_out, outs, _ = run_recorded(func, ins, "vjp")
    _check_outputs(outs, strict)
    vs = _vectors(v, outs, many_out, create_graph, _V_NONE_OUTPUT, "vjp")
    found = _fill_zeros(_backward(outs, ins, vs, create_graph), ins, strict, create_graph, "back")
    return _finish(outs, many_out, create_graph), _finish(found, many_in, create_graph)


@_grad_on
def jvp(
    func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """``(func(inputs), J v)``, by one forward pass.

    ``v`` may be None when the input is a single element. With ``create_graph=True`` the product is
    computed by PyTorch's double-backward trick, recorded: it is differentiable with respect to the
    inputs (and ``v``) that require grad, so derivatives of JVPs nest.
    """
    many_in, given = _as_tensors(inputs, "inputs", "jvp")
    ins = _inputs(given, create_graph)
    vs = _vectors(v, ins, many_in, create_graph, _V_NONE_INPUT, "jvp")
    many_out, outs, tape = run_recorded(func, ins, "jvp")
    _check_outputs(outs, strict)
    if create_graph:
        found = _double_back(outs, ins, vs, outs, True, strict, "back_trick")
    else:
        if strict:
            depends = _depends(outs, ins)
            _check_back_trick([ins[j] if any(row[j] for row in depends) else None for j in range(len(ins))])
            for k, row in enumerate(depends):
                if not any(row):
                    raise RuntimeError(_INDEPENDENT["back_trick"].format(i=k))
        try:
            found = _pushed(tape, ins, vs, outs, outs)
        except forward.NoForwardRule:  # a custom Function without jvp: by two backward passes instead
            found = _double_back(outs, ins, vs, outs, False, strict, "back_trick")
    return _finish(outs, many_out, create_graph), _finish(found, many_out, create_graph)


def _pushed(tape: list[Any], ins: list[Tensor], vs: list[Tensor], outs: list[Any], refs: list[Tensor]) -> list[Tensor]:
    """The tangents of ``outs`` given tangents ``vs`` of ``ins``, by one forward pass over the tape."""
    seeds = {  # float64, or complex where the input or its tangent is complex
        forward.key(x): np.asarray(t._value, dtype=np.result_type(x._value, t._value, 1.0)) for x, t in zip(ins, vs)
    }
    tangents = forward.push(tape, seeds, nbatch=0)
    return [
        wrap(np.array(tangents[forward.key(o)]))
        if o is not None and forward.key(o) in tangents
        else wrap(np.zeros_like(r._value))
        for o, r in zip(outs, refs)
    ]


def _double_back(outs: list[Any], ins: list[Tensor], vs: list[Tensor], refs: list[Tensor], create_graph: bool,
                 strict: bool, stage: str) -> list[Tensor]:  # fmt: skip
    """PyTorch's double-backward trick: the backward pass is linear in its seeds u, so the derivative
    of ``J^T u`` with respect to u, applied to v, is ``J v`` (``refs``: the shapes of the outputs)."""
    us = [wrap(np.zeros_like(r._value)).requires_grad_(True) for r in refs]
    back = _backward(outs, ins, us, create_graph=True)
    if strict and stage == "back_trick":
        _check_back_trick(back)
    return _fill_zeros(_backward(back, us, vs, create_graph), refs, strict, create_graph, stage)


def _check_back_trick(back: list[Any]) -> None:
    for i, g in enumerate(back):
        if g is None:
            raise RuntimeError(_INDEPENDENT["back"].format(i=i))
        if g._edge is None:
            raise RuntimeError(
                f"The gradient with respect to input {i} is independent of the inputs of the user-provided "
                "function. This is not allowed in strict mode."
            )


def _scalar_and_gradient(
    func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool, strict: bool, name: str
) -> tuple[bool, list[Tensor], list[Tensor], Tensor, list[Any], list[Any]]:
    """The common start of ``hvp`` and ``vhp``: inputs, vectors, the scalar output and its recorded gradient."""
    many_in, given = _as_tensors(inputs, "inputs", name)
    ins = _inputs(given, create_graph)
    vs = _vectors(v, ins, many_in, create_graph, _V_NONE_INPUT, name)
    with nested_recording() as tape:
        out = _single_output(func(*ins), name)
        _check_outputs([out], strict)
        jac = _backward([out], ins, [None], create_graph=True)
    _check_jacobian(jac, strict)
    return many_in, ins, vs, out, jac, tape


@_grad_on
def hvp(
    func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """``(func(inputs), H v)``: forward over reverse, one pass (``v`` may be None for a one-element input).

    With ``create_graph=True``, PyTorch's double-backward trick, recorded: the product is
    differentiable with respect to the inputs (and ``v``) that require grad.
    """
    many_in, ins, vs, out, jac, tape = _scalar_and_gradient(func, inputs, v, create_graph, strict, "hvp")
    if create_graph:
        found = _double_back(jac, ins, vs, ins, True, strict, "double_back_trick")
    else:
        try:
            found = _pushed(tape, ins, vs, jac, ins)
        except forward.NoForwardRule:  # a custom Function without jvp: by two more backward passes
            found = _double_back(jac, ins, vs, ins, False, strict, "double_back_trick")
    return _finish([out], False, create_graph), _finish(found, many_in, create_graph)


@_grad_on
def vhp(
    func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """``(func(inputs), v^T H)``: reverse over reverse (``v`` may be None for a one-element input)."""
    many_in, ins, vs, out, jac, _ = _scalar_and_gradient(func, inputs, v, create_graph, strict, "vhp")
    found = _fill_zeros(_backward(jac, ins, vs, create_graph), ins, strict, create_graph, "double_back")
    return _finish([out], False, create_graph), _finish(found, many_in, create_graph)


__all__ = ["Plan", "hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]
