"""The primitive type and the registry that every other layer reads.

A primitive is declared once, with everything the program needs to know about
it: its NumPy forward, one reverse-mode rule per input, its forward-mode rule,
its SymPy counterpart and how it is displayed. The parser, the autograd engine,
the renderers, ``gradcli ops`` and the generated tests all read this table.

Every reverse rule has one signature, ``rule(g, out, *inputs, *params)``: ``g``
is the gradient flowing into the node, ``out`` the node's output (or a
:class:`Meta` placeholder when only its shape is kept), ``inputs`` the saved
inputs (``None`` where the primitive does not save them). Rules are written
with NumPy functions and operators, so the same rule runs on arrays (first
derivatives, at NumPy speed) and on gradcli tensors (``create_graph=True``,
where NumPy dispatches back to gradcli and the backward pass is recorded).
``g`` may carry extra leading batch axes (vectorised Jacobians); rules index
trailing axes only. Broadcasting is undone by the engine, not by the rules.

Every forward-mode rule has one signature too, ``jvp(tangents, out, *inputs, *params)``:
``tangents`` is a tuple with one tangent per input (``None`` for an input without
one; at least one is not ``None``), each with the same leading batch axes, and the
rule returns the output's tangent with those batch axes in front. ``out`` is the
output, or its :class:`Meta` when a batched run asks a linear map or a product
(whose rules read only its shape). A primitive whose Jacobian is diagonal
(``elementwise``) may leave ``jvp`` out: its tangent is the sum of its reverse
rules applied to the tangents.

How a primitive takes a batch of points (some inputs with leading batch axes) is
declared in its row, as JAX keeps a batching rule beside each primitive: ``batch``
names one of ``BATCH``:

- ``"elementwise"``: the forward broadcasts; batched inputs are lifted so that their
  batch axes stay in front.
- ``"linear"``: the forward rule is the forward itself and knows batch axes:
  ``jvp(batched inputs, out, *one point's inputs, *params)``.
- ``"reduce"``: the parameters are ``(axis, keepdims)``; the forward reduces over the
  value's own axes (``axis=None``: all of them, none of the batch axes).
- ``"product"``: bilinear in its two inputs: with one side batched the forward rule is
  the product itself; with both, ``batch_both(a, b, out, nb)``.
- ``"loop"``: no batched form; the forward runs point by point.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..records import Row, fill

Rule = Callable[..., Any]

#: What a node keeps for its backward rule.
SAVES = ("inputs", "output", "both", "meta", "nothing")

#: How a primitive takes a batch of points (see the module docstring).
BATCH = ("elementwise", "linear", "reduce", "product", "loop")

#: The groups ``gradcli ops`` and the README list the functions in, in that order. A row
#: names its own; one that does not takes its module's ``GROUP`` (see ``primitive``).
GROUPS = ("elementwise", "rounding", "comparisons", "reductions", "along an axis", "matrices", "indexing and shape")


class Meta:
    """Shape and dtype of a value whose data the backward rule does not need."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple[int, ...], dtype: Any) -> None:
        self.shape = shape
        self.dtype = dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @classmethod
    def of(cls, value: Any) -> Meta:
        return cls(np.shape(value), getattr(value, "dtype", np.dtype(np.float64)))

    def __repr__(self) -> str:
        return f"Meta(shape={self.shape}, dtype={self.dtype})"


def _camel(torch_name: str) -> str:
    # PyTorch's generator: "log1p" -> "Log1P", "linalg_vector_norm" -> "LinalgVectorNorm"
    return "".join(part.title() for part in torch_name.split("_"))


class Primitive(Row):
    """One row of the table. See the module docstring for the rule signature."""

    __slots__ = _fields = (
        "name",
        "arity",
        "forward",
        "vjp",
        "saves",
        "elementwise",
        "jvp",
        "batch",
        "batch_both",
        "sympy",
        "torch",
        "variant",
        "backward_name",
        "label",
        "formulas",
        "named_rule",
        "analytic",
        "numpy",
        "nparams",
        "public",
        "domain",
        "arg_names",
        "doc",
        "group",
        "reads",
        "complex_vjp",
        "complex_jvp",
        "continuation",
    )

    def __init__(
        self,
        name: str,
        arity: int,  # number of tensor inputs; -1 for a sequence of tensors (stack)
        forward: Callable[..., Any],
        vjp: tuple[Rule | None, ...],  # one rule per input; None: not differentiable there
        saves: str = "inputs",
        elementwise: bool = False,  # the Jacobian is diagonal: jvp(t) = sum_i vjp_i(t_i)
        jvp: Rule | None = None,  # forward-mode rule (tangents, out, *inputs, *params), tangents a tuple
        batch: str = "loop",  # how it takes a batch of points: one of BATCH (see the module docstring)
        batch_both: Callable[..., Any] | None = None,  # "product": (a, b, out, nb) with both sides batched
        sympy: Callable[..., Any] | None = None,  # (sympy_module, *args, *params) -> expr
        torch: str = "",  # PyTorch's op name, from which the backward name is derived
        variant: Callable[..., Any] | None = None,  # (constant_mask, params) -> overload or (op, overload)
        backward_name: str = "",  # only for PyTorch's irregular names (CopyBackwards)
        label: str = "",  # how the op is shown in a graph: "+", "*", "sin"
        formulas: tuple[str, ...] = (),  # local derivative per input, "{0}" "{1}" "{out}"
        named_rule: str = "",  # the rule's name in a derivation (diff --steps); "": "derivative of NAME"
        analytic: bool = True,  # complex-analytic: complex step is exact through it
        numpy: tuple[Any, ...] = (),  # NumPy ufuncs that dispatch to this primitive on tensors
        nparams: int = 0,  # trailing non-tensor arguments (axis, shape, index...)
        public: bool = True,  # exported as gradcli.<name> and in `gradcli ops`
        domain: tuple[tuple[float, float], ...] = (),  # per input, an interval where it is smooth (tests, checks)
        arg_names: tuple[str, ...] = (),  # how docs name the inputs (default x; a, b; c, a, b)
        doc: str = "",
        group: str = "",  # one of GROUPS: where gradcli ops and the README list it
        # per input, which inputs its reverse rule reads (empty: every input). A node saves an
        # input only when the rule of some other input that requires grad reads it, so `3 * d`
        # does not keep `d` (PyTorch's test_no_unnecessary_save).
        reads: tuple[tuple[int, ...], ...] = (),
        # Complex inputs (PyTorch's conjugate Wirtinger convention): a holomorphic primitive
        # needs nothing here, its rules g * f'(z) become conj(rule(conj(g))) = g * conj(f'(z))
        # in reverse mode and stay as they are in forward mode. A primitive that is not
        # holomorphic (``analytic=False``) either has rules of its own for complex inputs,
        # written for that convention, or refuses complex inputs when differentiated.
        complex_vjp: tuple[Rule | None, ...] | None = None,
        complex_jvp: Rule | None = None,
        # The analytic continuation the complex step evaluates where the complex forward is not
        # holomorphic (norm: sqrt(sum(z*z)), not the modulus), so ``check`` keeps its exact method.
        continuation: Callable[..., Any] | None = None,
    ) -> None:
        fill(self, locals())
        if self.saves not in SAVES:
            raise ValueError(f"{self.name}: saves must be one of {SAVES}")
        if self.arity >= 0 and len(self.vjp) != self.arity:
            raise ValueError(f"{self.name}: one vjp rule per input is required")
        self._check_batch()

    def _check_batch(self) -> None:
        """The batching rule declared fits the row (each kind needs what it reads)."""
        if self.batch not in BATCH:
            raise ValueError(f"{self.name}: batch must be one of {BATCH}")
        if self.elementwise and self.batch != "elementwise":
            raise ValueError(f"{self.name}: an elementwise primitive batches elementwise")
        if self.batch == "linear" and self.jvp is None:
            raise ValueError(f"{self.name}: a linear batch runs the forward rule: jvp is required")
        if self.batch == "reduce" and (self.arity, self.nparams) != (1, 2):
            raise ValueError(f"{self.name}: a reduction takes one input and the parameters (axis, keepdims)")
        if self.batch == "product" and (self.arity != 2 or self.jvp is None or self.batch_both is None):
            raise ValueError(f"{self.name}: a product takes two inputs and needs jvp and batch_both")

    @property
    def rule_name(self) -> str:
        """How a derivation names the rule this row applies: "product rule", "derivative of sin"."""
        return self.named_rule or f"derivative of {self.name}"

    def domain_of(self, i: int) -> tuple[float, float]:
        """Where input ``i`` may be sampled: the declared interval, else [-3, 3]."""
        return self.domain[i] if i < len(self.domain) else (-3.0, 3.0)

    @property
    def differentiable(self) -> bool:
        return any(rule is not None for rule in self.vjp)

    @property
    def frees(self) -> bool:
        """Whether backward releases what this primitive saved (values, not just shapes)."""
        return self.saves in ("inputs", "output", "both")

    def node_name(self, consts: tuple[bool, ...] = (), params: tuple = ()) -> str:
        """PyTorch's name for this primitive's backward node: ``MulBackward0``.

        ``consts`` says which inputs were plain numbers (``x ** 2`` is PowBackward0,
        ``2 ** x`` PowBackward2); a ``variant`` may also rename the op by its
        parameters (``x[0]`` is SelectBackward0, ``x[1:]`` SliceBackward0).
        """
        if self.backward_name:
            return self.backward_name
        op, overload = self.torch or self.name, 0
        consts = consts or (False,) * max(self.arity, 1)
        params = params or (None,) * self.nparams
        if self.variant is not None:
            chosen = self.variant(consts, params)
            op, overload = chosen if isinstance(chosen, tuple) else (op, chosen)
        return f"{_camel(op)}Backward{overload}"

    def __call__(self, *args: Any) -> Any:
        """Apply to arrays or tensors; tensors record the operation in the graph."""
        n = 1 if self.arity < 0 else self.arity
        return bind(self, args[:n], args[n:])

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"


def _evaluate(prim: Primitive, inputs: Sequence[Any], params: Sequence[Any]) -> Any:
    return prim.forward(*inputs, *params)


#: How ``Primitive.__call__`` evaluates; the autograd layer installs a binding
#: that records tensors in the graph (ops knows nothing of tensors).
bind: Callable[[Primitive, Sequence[Any], Sequence[Any]], Any] = _evaluate

PRIMITIVES: dict[str, Primitive] = {}


def register(prim: Primitive) -> Primitive:
    if prim.name in PRIMITIVES:
        raise ValueError(f"primitive {prim.name!r} declared twice")
    PRIMITIVES[prim.name] = prim
    return prim


def primitive(
    name: str, arity: int, forward: Callable[..., Any], vjp: Sequence[Rule | None], **facts: Any
) -> Primitive:
    """Declare and register a primitive. Without ``group=`` it takes the ``GROUP`` of the
    module that declares it (``ops/linalg.py``: "matrices"), so a row is grouped where it lives."""
    if "group" not in facts:
        facts["group"] = _declaring_module_group()
    return register(Primitive(name, arity, forward, tuple(vjp), **facts))


def _declaring_module_group() -> str:
    """The ``GROUP`` of the first module outside this one on the call stack ("" if it has none)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    return frame.f_globals.get("GROUP", "") if frame is not None else ""


def set_binding(fn: Callable[[Primitive, Sequence[Any], Sequence[Any]], Any]) -> None:
    global bind
    bind = fn
