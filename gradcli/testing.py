"""Gradient checks for a test suite, in the spirit of ``torch.autograd.gradcheck``.

    import gradcli as gc

    def test_softclip_backward():
        x = gc.tensor([0.3, -1.2, 2.0], requires_grad=True)
        gc.testing.assert_grad_close(lambda x: SoftClip.apply(x), x)

``assert_grad_close`` computes the Jacobian of ``f`` by reverse mode (every
backward rule on the way, custom Functions included) and compares it with
the complex step when every recorded operation is complex-analytic (exact to
rounding), and otherwise with central differences refined by Richardson
extrapolation (``f`` called once a point, so Python control flow is
honoured), whose one-sided slopes tell a kink from a mismatch. A mismatch raises
``AssertionError`` naming the output, the input and the worst element, with
both Jacobians.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .autograd import grad_mode
from .autograd.engine import reachable_counts
from .autograd.forward import key
from .autograd.function import FunctionNode
from .autograd.functional import as_tuple, input_leaves, reverse_blocks, run_recorded
from .autograd.node import edge_node
from .autograd.replay import replay
from .autograd.tensor import Tensor, wrap
from .check.numeric import (
    NotRealValued,
    atol_scale,
    complex_step,
    default_tolerances,
    finite_differences,
    tolerance_problem,
)
from .check.run import not_analytic

__all__ = ["assert_grad_close"]


def assert_grad_close(
    f: Callable[..., Any],
    inputs: Any,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    method: str = "auto",
) -> None:
    """Assert that gradcli's reverse-mode Jacobian of ``f`` at ``inputs`` matches numerical derivatives.

    ``inputs``: a tensor (or array, or number) or a sequence of them; tensors
    with ``requires_grad=False`` are held constant when some others require
    grad. ``f`` returns a tensor or a tuple of tensors. ``method``: "fd"
    (finite differences), "complex" (complex step; every operation must be
    complex-analytic), or "auto" (complex step where every operation is
    complex-analytic, as it is exact to rounding; finite differences, with
    kinks detected, everywhere else). Tolerances default from the dtype: ``rtol=1e-7,
    atol=1e-12`` in float64, ``3e-3, 1e-5`` in float32 (each also allows the
    numerical method's own estimated error).
    """
    _check_options(method, rtol, atol)
    from .lang.frameworks import framework_of  # lazy: start-up, most checks are of gradcli's functions

    framework = framework_of(f, inputs if isinstance(inputs, (list, tuple)) else [inputs])
    if framework is not None:  # a torch or JAX function: one gradcli operation, its backward the framework's
        f, inputs = _as_gradcli(f, inputs, framework)
    leaves, varied = _varied_leaves(inputs)
    ins = [leaves[i] for i in varied]
    if not any(np.size(t.array) for t in ins):
        return  # no element to vary: nothing can disagree
    problem = _Problem(f, leaves, varied)
    default_rtol, default_atol = default_tolerances(problem.dtype)
    rtol = default_rtol if rtol is None else rtol
    if atol is None:
        atol = default_atol * atol_scale(problem.f0, problem.analytic, problem.x0)
    for name, numerical, error in _numerical_jacobians(problem, method):
        _compare(name, problem.analytic, numerical, error, rtol, atol, problem.out_sizes, problem.in_sizes,
                 problem.outs, problem.ins, problem.cut)  # fmt: skip


def _as_gradcli(f: Callable[..., Any], inputs: Any, framework: str) -> tuple[Callable[..., Any], list[Tensor]]:
    """``f`` as a function of gradcli tensors (the framework's forward and VJP, as ``FILE.py:f`` runs
    it), and the inputs as gradcli tensors: a torch tensor that does not require grad is held constant
    when another one does, as ``torch.autograd.gradcheck`` holds it."""
    from .check.face import as_array  # lazy: as above
    from .lang.program import function_program  # lazy: as above

    program = function_program(f, framework)
    names = program.variables
    given = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    flags = [bool(getattr(x, "requires_grad", True)) for x in given]
    flags = flags if any(flags) else [True] * len(given)
    tensors = [wrap(as_array(x)).requires_grad_(flag) for x, flag in zip(given, flags)]

    def call(*xs: Any) -> Any:
        return program.call(**dict(zip(names, xs)))

    return call, tensors


def _check_options(method: str, rtol: float | None, atol: float | None) -> None:
    if method not in ("auto", "fd", "complex"):
        raise ValueError(f"method={method!r}: use 'auto', 'fd' or 'complex'")
    for name, tol in (("rtol", rtol), ("atol", atol)):
        problem = tolerance_problem(name, tol)
        if problem:
            raise ValueError(problem)


def _varied_leaves(inputs: Any) -> tuple[list[Tensor], list[int]]:
    """The inputs as leaves, and which of them are varied (the others held constant)."""
    _, given = as_tuple(inputs)
    if not given:
        raise ValueError("assert_grad_close needs at least one input")
    varied = [i for i, x in enumerate(given) if isinstance(x, Tensor) and x.requires_grad]
    varied = varied or list(range(len(given)))
    leaves = input_leaves(tuple(given))
    for i, leaf in enumerate(leaves):
        if i not in varied:
            leaf.requires_grad_(False)
        elif not np.issubdtype(np.asarray(leaf.array).dtype, np.floating):
            raise ValueError(
                f"input {i} has dtype {np.asarray(leaf.array).dtype}: only real floating inputs can be varied"
            )
    return leaves, varied


class _Problem:
    """``f`` run once, recorded: its autograd Jacobian (flat outputs x flat inputs), and ways to
    evaluate it again at rows of flattened points (replaying the record, or calling ``f``)."""

    def __init__(self, f: Callable[..., Any], leaves: list[Tensor], varied: list[int]) -> None:
        self.f, self.leaves, self.varied = f, leaves, varied
        self.ins = ins = [leaves[i] for i in varied]
        _, self.outs, self.tape = run_recorded(f, leaves)
        outs = self.outs
        self.dtype = np.result_type(*(np.asarray(t.array) for t in ins))
        vectorised = not any(isinstance(n, FunctionNode) for n, _, _ in self.tape)
        blocks, _ = reverse_blocks(outs, ins, vectorised=vectorised)
        self.out_sizes = [int(np.size(o.array)) for o in outs]
        self.in_sizes = [int(np.size(t.array)) for t in ins]
        self.analytic = np.block([[np.asarray(b, dtype=np.float64).reshape(m, n) for b, n in zip(row, self.in_sizes)]
                                  for row, m in zip(blocks, self.out_sizes)])  # fmt: skip
        self.x0 = np.concatenate([np.asarray(t.array, dtype=np.float64).reshape(-1) for t in ins])
        self.f0 = np.concatenate([np.asarray(o.array, dtype=np.float64).reshape(-1) for o in outs])
        if not (np.isfinite(self.f0).all() and np.isfinite(self.analytic).all()):
            raise AssertionError(
                f"non-finite values: f = {_short(self.f0)}, autograd Jacobian = {_short(self.analytic)}"
            )
        self.cut = _cut(outs, ins)
        # f is called without recording, unless it differentiates inside (gc.grad needs a graph):
        # then as it was called first, with grad mode on and the varied inputs requiring grad
        self.recorded = False

    def split(self, points: np.ndarray) -> list[np.ndarray]:
        offsets = np.cumsum([0, *self.in_sizes])
        return [
            points[:, offsets[j] : offsets[j + 1]].reshape((len(points),) + t.shape) for j, t in enumerate(self.ins)
        ]

    def _args(self, row: tuple[Any, ...], requires_grad: bool) -> list[Any]:
        given: list[Any] = list(self.leaves)
        for j, value in zip(self.varied, row):
            given[j] = wrap(np.array(value, dtype=np.asarray(self.leaves[j].array).dtype))
            if requires_grad:
                given[j].requires_grad_(True)
        return given

    def call_at(self, row: tuple[Any, ...]) -> Any:
        if not self.recorded:
            try:
                with grad_mode.no_grad():
                    return self.f(*self._args(row, False))
            except RuntimeError:
                self.recorded = True
        with grad_mode.enable_grad():
            return self.f(*self._args(row, True))

    def call_each(self, points: np.ndarray) -> np.ndarray:
        rows = []
        for row in zip(*self.split(points)):
            _, result = as_tuple(self.call_at(row))
            rows.append(np.concatenate([np.asarray(_value(r), dtype=np.float64).reshape(-1) for r in result]))
        return np.array(rows)

    def replayed(self, points: np.ndarray) -> np.ndarray:
        values = replay(self.tape, {key(t): part for t, part in zip(self.ins, self.split(points))})
        parts = [
            np.broadcast_to(values.get(key(o), o.array), (len(points),) + o.shape).reshape(len(points), -1)
            for o in self.outs
        ]
        return np.concatenate(parts, axis=1)


def _numerical_jacobians(problem: _Problem, method: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(method name, Jacobian, its estimated error) for every numerical method that judges."""
    checks: list[tuple[str, np.ndarray, np.ndarray]] = []
    unsmooth = not_analytic(problem.tape)
    if method == "complex" and unsmooth:
        raise ValueError(f"method='complex' cannot be used: {unsmooth}")
    exact = None
    if method == "complex" or (method == "auto" and not unsmooth):
        try:
            exact = complex_step(problem.replayed, problem.x0, problem.dtype, problem.f0)
        except NotRealValued:
            if method == "complex":
                raise
    if method == "fd" or (method == "auto" and (exact is None or problem.cut)):
        # complex step, where valid, is exact to rounding; finite differences are not
        # (1 + x^2 at x = 1e-8 loses x's digits): they judge only where it cannot run, or where
        # an output is cut from the inputs' graph (the replayed record then is not the function)
        checks.append(("finite differences", *_finite_difference_jacobian(problem, smooth=not unsmooth)))
    if exact is not None:
        checks.append(("complex step", exact.value, exact.error))
    return checks


def _finite_difference_jacobian(problem: _Problem, smooth: bool) -> tuple[np.ndarray, np.ndarray]:
    """Central differences of ``f`` itself; a kink autograd's value does not lie across is an error."""
    analytic = problem.analytic
    estimate = finite_differences(problem.call_each, problem.x0, problem.f0, problem.dtype)
    kinks = estimate.kink & ~_between(analytic, estimate.left, estimate.right)
    if smooth:  # analytic operations have no kinks: two slopes are a step across a pole
        kinks[:] = False
        estimate.kink[:] = False
    if kinks.any():
        r, c = np.argwhere(kinks)[0]
        raise AssertionError(
            f"not differentiable at the point: d out/d in element ({r}, {c}) has one-sided derivatives "
            f"{estimate.left[r, c]:.10g} and {estimate.right[r, c]:.10g}, and autograd's {analytic[r, c]:.10g} "
            "lies outside them"
        )
    trusted = ~estimate.kink
    return np.where(trusted, estimate.value, analytic), estimate.error


def _cut(outs: list[Tensor], ins: list[Tensor]) -> list[int]:
    """The outputs not connected to any varied input in the recorded graph (constants, or values
    computed outside it: ``gc.grad`` without ``create_graph``, ``float()``, NumPy on ``.data``)."""
    targets = {edge_node(t._edge) for t in ins}
    return [k for k, o in enumerate(outs) if o._edge is None or targets.isdisjoint(reachable_counts([o._edge]))]


CUT_HINT = (
    "\noutput {i} is not connected to the inputs in gradcli's graph: the function leaves gradcli's operations "
    "(math, float(), .item(), NumPy on .data, gc.grad without create_graph=True...), so autograd cannot see "
    "how it changes"
)


def _value(x: Any) -> Any:
    return x.array if isinstance(x, Tensor) else x


def _between(a: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    lo, hi = np.minimum(left, right), np.maximum(left, right)
    slack = 1e-6 * np.maximum(1.0, np.maximum(np.abs(lo), np.abs(hi)))
    return (lo - slack <= a) & (a <= hi + slack)


def _compare(name: str, analytic: np.ndarray, numerical: np.ndarray, error: np.ndarray, rtol: float, atol: float,
             out_sizes: list[int], in_sizes: list[int], outs: list[Tensor], ins: list[Tensor],
             cut: Sequence[int] = ()) -> None:  # fmt: skip
    tolerance = atol + rtol * np.abs(numerical) + 3.0 * error
    with np.errstate(all="ignore"):
        badness = np.abs(analytic - numerical) / tolerance
    badness = np.where(np.isnan(badness), np.inf, badness)
    if (badness <= 1.0).all():
        return
    r, c = np.unravel_index(int(np.argmax(badness)), badness.shape)
    out_offsets, in_offsets = np.cumsum([0, *out_sizes]), np.cumsum([0, *in_sizes])
    i = int(np.searchsorted(out_offsets, r, side="right") - 1)
    j = int(np.searchsorted(in_offsets, c, side="right") - 1)
    block = (slice(out_offsets[i], out_offsets[i + 1]), slice(in_offsets[j], in_offsets[j + 1]))
    out_index = np.unravel_index(r - out_offsets[i], outs[i].shape) if outs[i].shape else ()
    in_index = np.unravel_index(c - in_offsets[j], ins[j].shape) if ins[j].shape else ()
    a, n = float(analytic[r, c]), float(numerical[r, c])
    raise AssertionError(
        f"Jacobian mismatch for output {i} with respect to input {j}: "
        f"d out{list(map(int, out_index))}/d in{list(map(int, in_index))} is {a!r} by autograd but {n!r} by {name} "
        f"(abs error {abs(a - n):.3g}, rel {abs(a - n) / max(abs(n), 1e-300):.3g}; tolerance {tolerance[r, c]:.3g})\n"
        f"{name}:\n{_short(numerical[block])}\nautograd:\n{_short(analytic[block])}"
        + (CUT_HINT.format(i=i) if i in cut else "")
    )


def _short(a: np.ndarray) -> str:
    return np.array2string(np.asarray(a), precision=10, threshold=64, edgeitems=3)
