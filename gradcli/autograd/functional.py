"""Jacobians, Hessians and products with them (PyTorch's ``torch.autograd.functional``).

Every Jacobian is computed in batched passes, not a Python loop of one pass
per row: reverse mode sends all the output basis vectors back through the
graph at once (the rules accept leading batch axes), forward mode pushes all
the input basis vectors through the recorded run at once. ``mode="auto"``
picks the cheaper: forward when there are fewer inputs than outputs. Hessians
are forward-over-reverse: the gradient is recorded (``create_graph=True``)
and the input basis pushed forward through that record.

>>> import gradcli as gc
>>> from gradcli.functional import hessian, jacobian
>>> jacobian(lambda x: x ** 2, gc.tensor([1.0, 2.0]))
tensor([[2., 0.],
        [0., 4.]])
>>> hessian(lambda x, y: x * x * y, (gc.tensor(2.0), gc.tensor(3.0)))
((tensor(6.), tensor(4.)), (tensor(4.), tensor(0.)))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import forward
from .basis import ScaledIdentity, identity
from .engine import grad as _grad
from .engine import run_backward
from .function import FunctionNode
from .node import edge_node
from .tensor import Tensor, wrap

#: Largest batch of basis vectors sent through at once (bounds the memory of a pass).
MAX_BATCH_ELEMENTS = 50_000_000


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


def _as_tuple(x: Any) -> tuple[bool, tuple[Any, ...]]:
    if isinstance(x, (tuple, list)):
        return True, tuple(x)
    return False, (x,)


def _leaves(inputs: tuple[Any, ...]) -> list[Tensor]:
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


def _run(func: Callable[..., Any], leaves: list[Tensor]) -> tuple[bool, list[Tensor], list[Any]]:
    from ..render.build import recording

    with recording() as tape:
        result = func(*leaves)
    many, outs = _as_tuple(result)
    return many, [o if isinstance(o, Tensor) else Tensor(o) for o in outs], tape


def _sizes(tensors: Sequence[Tensor]) -> list[int]:
    return [int(np.size(t._value)) for t in tensors]


def _has_custom(tape: list[Any]) -> bool:
    return any(isinstance(node, FunctionNode) for node, _, _ in tape)


# --- the two passes ------------------------------------------------------------------------------------------


def reverse_blocks(
    outs: list[Tensor], ins: list[Tensor], *, create_graph: bool = False, vectorised: bool = True
) -> tuple[list[list[Any]], int]:
    """d out_k / d in_j for all k, j, by batched reverse passes: blocks of shape out_k + in_j."""
    sizes = _sizes(outs)
    total = sum(sizes)
    widest = max([total, *(_sizes(ins))])
    step = max(1, MAX_BATCH_ELEMENTS // max(widest, 1)) if vectorised else 1
    roots = [(k, o) for k, o in enumerate(outs) if o._edge is not None]
    capture = {edge_node(x._edge): j for j, x in enumerate(ins)}
    rows: list[list[Any]] = [[] for _ in ins]
    passes = 0
    offsets = np.cumsum([0, *sizes])
    for start in range(0, total, step):
        stop = min(total, start + step)
        grads = []
        whole = start == 0 and stop == total and len(roots) == 1 and not create_graph
        for k, out in roots:
            if whole:  # every basis vector of the one output: kept diagonal while it stays so
                grads.append(identity(out.shape, np.result_type(out._value, np.float64)))
                continue
            seed = np.zeros((stop - start, sizes[k]), dtype=np.result_type(out._value, np.float64))
            lo, hi = max(start, offsets[k]), min(stop, offsets[k + 1])
            if lo < hi:
                seed[np.arange(lo - start, hi - start), np.arange(lo - offsets[k], hi - offsets[k])] = 1.0
            # one row at a time (a custom Function may not take batches): no batch axis at all
            seed = seed.reshape(((stop - start,) if vectorised else ()) + out.shape)
            grads.append(wrap(seed) if create_graph else seed)
        nbatch = 1 if vectorised else 0
        found = run_backward([o._edge for _, o in roots], grads, retain_graph=True, create_graph=create_graph,
                             capture=dict(capture), nbatch=nbatch) if roots else [None] * len(ins)  # fmt: skip
        passes += 1
        for j, g in enumerate(found):
            if g is None:
                rows[j].append(np.zeros((stop - start,) + ins[j].shape))
            else:
                rows[j].append(_dense(g) if vectorised else np.reshape(_dense(g), (1,) + ins[j].shape))
    blocks: list[list[Any]] = []
    for k, out in enumerate(outs):
        row = []
        for j, x in enumerate(ins):
            stacked = _concat(rows[j])[offsets[k] : offsets[k + 1]]
            row.append(_reshape(stacked, out.shape + x.shape))
        blocks.append(row)
    return blocks, passes


def forward_blocks(outs: list[Tensor], ins: list[Tensor], tape: list[Any]) -> tuple[list[list[Any]], int]:
    """The same blocks by batched forward passes over the recorded run."""
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
                seeds[forward.key(x)] = identity(x.shape, np.result_type(x._value, np.float64))
                continue
            seed = np.zeros((stop - start, sizes[j]), dtype=np.result_type(x._value, np.float64))
            lo, hi = max(start, offsets[j]), min(stop, offsets[j + 1])
            if lo < hi:
                seed[np.arange(lo - start, hi - start), np.arange(lo - offsets[j], hi - offsets[j])] = 1.0
            seeds[forward.key(x)] = seed.reshape((stop - start,) + x.shape)
        tangents = forward.push(tape, seeds, nbatch=1)
        passes += 1
        for k, out in enumerate(outs):
            t = tangents.get(forward.key(out))
            columns[k].append(np.zeros((stop - start,) + out.shape) if t is None else _dense(t))
    blocks = []
    for k, out in enumerate(outs):
        full = np.concatenate(columns[k], axis=0)  # (n, *out_shape)
        full = np.moveaxis(full.reshape(total, -1), 0, -1)  # (m_k, n)
        row = []
        for j, x in enumerate(ins):
            row.append(full[:, offsets[j] : offsets[j + 1]].reshape(out.shape + x.shape))
        blocks.append(row)
    return blocks, passes


def _dense(value: Any) -> Any:
    return np.asarray(value) if isinstance(value, ScaledIdentity) else value


def _concat(parts: list[Any]) -> Any:
    if isinstance(parts[0], Tensor):
        from .functions import cat

        return cat(parts, 0) if len(parts) > 1 else parts[0]
    return np.concatenate(parts, axis=0)


def _reshape(value: Any, shape: tuple[int, ...]) -> Any:
    return value.reshape(shape) if isinstance(value, Tensor) else np.reshape(value, shape)


def jacobian_blocks(
    func: Callable[..., Any], inputs: tuple[Any, ...], mode: str = "auto"
) -> tuple[bool, list[Tensor], list[list[Any]], Plan]:
    """Outputs, d out_k / d in_j blocks and how they were computed."""
    leaves = _leaves(inputs)
    many, outs, tape = _run(func, leaves)
    n, m = sum(_sizes(leaves)), sum(_sizes(outs))
    chosen, reason = choose_mode(mode, n, m)
    custom = _has_custom(tape)
    if chosen == "forward":
        try:
            blocks, passes = forward_blocks(outs, leaves, tape)
            return many, outs, blocks, Plan("forward", n, m, passes, True, reason)
        except forward.NoForwardRule as exc:
            if mode == "forward":
                raise
            chosen, reason = "reverse", f"{reason}, but {exc}: reverse mode instead"
    blocks, passes = reverse_blocks(outs, leaves, vectorised=not custom)
    if custom:
        reason += "; a custom Function's backward is called one row at a time (it may not accept batches)"
    return many, outs, blocks, Plan("reverse", n, m, passes, not custom, reason)


# --- the public functions -------------------------------------------------------------------------------------------


def _shape_result(many_in: bool, many_out: bool, blocks: list[list[Any]]) -> Any:
    wrapped = [[b if isinstance(b, Tensor) else wrap(np.asarray(b)) for b in row] for row in blocks]
    rows = [tuple(row) if many_in else row[0] for row in wrapped]
    return tuple(rows) if many_out else rows[0]


def jacobian(
    func: Callable[..., Any],
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = True,
    strategy: str | None = None,
    mode: str = "auto",
) -> Any:
    """d func(inputs) / d inputs, shaped ``output.shape + input.shape`` (tuples for several).

    ``mode``: "auto" (forward when inputs are fewer than outputs), "forward" or "reverse";
    PyTorch's ``strategy="forward-mode"/"reverse-mode"`` is accepted too.
    """
    if strategy is not None:
        mode = {"forward-mode": "forward", "reverse-mode": "reverse"}.get(strategy, strategy)
    many_in, ins = _as_tuple(inputs)
    if create_graph:
        leaves = list(ins)
        many_out, outs, _ = _run(func, leaves)
        blocks, _ = reverse_blocks(outs, leaves, create_graph=True)
        return _shape_result(many_in, many_out, blocks)
    many_out, _, blocks, _ = jacobian_blocks(func, ins, mode)
    return _shape_result(many_in, many_out, blocks)


def hessian_blocks(
    func: Callable[..., Any], inputs: tuple[Any, ...]
) -> tuple[Tensor, list[Tensor], list[list[Any]], Plan]:
    """The (scalar) output, its gradient and d2 out / d in_i d in_j, forward-over-reverse."""
    leaves = _leaves(inputs)
    from ..render.build import recording

    with recording() as tape:
        out = func(*leaves)
        out = out if isinstance(out, Tensor) else Tensor(out)
        if np.size(out._value) != 1:
            raise RuntimeError(f"hessian needs a scalar output; the output has shape {out.shape}")
        if out._edge is None:
            grads = [wrap(np.zeros_like(x._value)) for x in leaves]
        else:
            grads = list(_grad(out, leaves, create_graph=True, allow_unused=True, materialize_grads=True))
    n = sum(_sizes(leaves))
    try:
        blocks, passes = forward_blocks(grads, leaves, tape)
        plan = Plan("forward", n, n, passes, True, "forward-over-reverse: the gradient's graph was recorded, "
                    "then all n input directions pushed forward through it")  # fmt: skip
    except forward.NoForwardRule as exc:
        blocks, passes = reverse_blocks(grads, leaves)
        plan = Plan("reverse", n, n, passes, True, f"reverse-over-reverse ({exc})")
    return out, grads, blocks, plan


def hessian(func: Callable[..., Any], inputs: Any, create_graph: bool = False, strict: bool = False,
            vectorize: bool = True, outer_jacobian_strategy: str = "forward-mode") -> Any:  # fmt: skip
    """The second derivatives of a scalar ``func``: shape ``input.shape + input.shape``."""
    many_in, ins = _as_tuple(inputs)
    _, _, blocks, _ = hessian_blocks(func, ins)
    return _shape_result(many_in, many_in, blocks)


def vjp(
    func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """``(func(inputs), v^T J)``."""
    many_in, ins = _as_tuple(inputs)
    leaves = _leaves(ins)
    many_out, outs, _ = _run(func, leaves)
    _, vs = _as_tuple(v) if v is not None else (False, (None,) * len(outs))
    found = _grad(
        outs, leaves, grad_outputs=list(vs), create_graph=create_graph, allow_unused=True, materialize_grads=True
    )
    outputs = tuple(o.detach() for o in outs) if many_out else outs[0].detach()
    return outputs, (tuple(found) if many_in else found[0])


def jvp(
    func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """``(func(inputs), J v)``, by one forward pass."""
    many_in, ins = _as_tuple(inputs)
    leaves = _leaves(ins)
    many_out, outs, tape = _run(func, leaves)
    _, vs = _as_tuple(v) if v is not None else (False, tuple(np.ones_like(x._value) for x in leaves))
    seeds = {  # float64, or complex where the input or its tangent is complex
        forward.key(x): np.asarray(t._value if isinstance(t, Tensor) else t, dtype=np.result_type(x._value, t, 1.0))
        for x, t in zip(leaves, vs)
    }
    tangents = forward.push(tape, seeds, nbatch=0)
    found = tuple(wrap(np.asarray(tangents.get(forward.key(o), np.zeros_like(o._value)))) for o in outs)
    outputs = tuple(o.detach() for o in outs) if many_out else outs[0].detach()
    return outputs, (found if many_out else found[0])


def hvp(
    func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """``(func(inputs), H v)``: forward over reverse, one pass."""
    many_in, ins = _as_tuple(inputs)
    _, vs = _as_tuple(v)
    leaves = _leaves(ins)
    from ..render.build import recording

    with recording() as tape:
        out = func(*leaves)
        grads = _grad(out, leaves, create_graph=True, allow_unused=True, materialize_grads=True)
    seeds = {
        forward.key(x): np.asarray(t._value if isinstance(t, Tensor) else t, dtype=np.float64)
        for x, t in zip(leaves, vs)
    }
    tangents = forward.push(tape, seeds, nbatch=0)
    found = tuple(wrap(np.asarray(tangents.get(forward.key(g), np.zeros_like(g._value)))) for g in grads)
    return out.detach(), (found if many_in else found[0])


def vhp(
    func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """``(func(inputs), v^T H)`` (equal to ``H v``: a Hessian is symmetric)."""
    return hvp(func, inputs, v, create_graph, strict)


__all__ = ["Plan", "hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]
