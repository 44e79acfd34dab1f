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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Rule = Callable[..., Any]

#: What a node keeps for its backward rule.
SAVES = ("inputs", "output", "both", "meta", "nothing")


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


@dataclass(frozen=True, eq=False, slots=True)
class Primitive:
    """One row of the table. See the module docstring for the rule signature."""

    name: str
    arity: int  # number of tensor inputs; -1 for a sequence of tensors (stack)
    forward: Callable[..., Any]
    vjp: tuple[Rule | None, ...]  # one rule per input; None: not differentiable there
    saves: str = "inputs"
    elementwise: bool = False  # the Jacobian is diagonal: jvp(t) = sum_i vjp_i(t_i)
    jvp: Rule | None = None  # forward-mode rule (tangents, out, *inputs, *params)
    sympy: Callable[..., Any] | None = None  # (sympy_module, *args, *params) -> expr
    torch: str = ""  # PyTorch's op name, from which the backward name is derived
    variant: Callable[..., Any] | None = None  # (constant_mask, params) -> overload or (op, overload)
    backward_name: str = ""  # only for PyTorch's irregular names (CopyBackwards)
    label: str = ""  # how the op is shown in a graph: "+", "*", "sin"
    formulas: tuple[str, ...] = ()  # local derivative per input, "{0}" "{1}" "{out}"
    analytic: bool = True  # complex-analytic: complex step is exact through it
    numpy: tuple[Any, ...] = ()  # NumPy ufuncs that dispatch to this primitive on tensors
    nparams: int = 0  # trailing non-tensor arguments (axis, shape, index...)
    public: bool = True  # exported as gradcli.<name> and in `gradcli ops`
    domain: tuple[tuple[float, float], ...] = ()  # per input, an interval where it is smooth (tests, checks)
    arg_names: tuple[str, ...] = ()  # how docs name the inputs (default x; a, b; c, a, b)
    doc: str = ""
    # per input, which inputs its reverse rule reads (empty: every input). A node saves an
    # input only when the rule of some other input that requires grad reads it, so `3 * d`
    # does not keep `d` (PyTorch's test_no_unnecessary_save).
    reads: tuple[tuple[int, ...], ...] = ()
    # Complex inputs (PyTorch's conjugate Wirtinger convention): a holomorphic primitive
    # needs nothing here, its rules g * f'(z) become conj(rule(conj(g))) = g * conj(f'(z))
    # in reverse mode and stay as they are in forward mode. A primitive that is not
    # holomorphic (``analytic=False``) either has rules of its own for complex inputs,
    # written for that convention, or refuses complex inputs when differentiated.
    complex_vjp: tuple[Rule | None, ...] | None = None
    complex_jvp: Rule | None = None
    # The analytic continuation the complex step evaluates where the complex forward is not
    # holomorphic (norm: sqrt(sum(z*z)), not the modulus), so ``check`` keeps its exact method.
    continuation: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        if self.saves not in SAVES:
            raise ValueError(f"{self.name}: saves must be one of {SAVES}")
        if self.arity >= 0 and len(self.vjp) != self.arity:
            raise ValueError(f"{self.name}: one vjp rule per input is required")

    def domain_of(self, i: int) -> tuple[float, float]:
        """Where input ``i`` may be sampled: the declared interval, else [-3, 3]."""
        return self.domain[i] if i < len(self.domain) else (-3.0, 3.0)

    @property
    def differentiable(self) -> bool:
        return any(rule is not None for rule in self.vjp)

    @property
    def linear(self) -> bool:
        """Linear in its inputs: its rules need only shapes (so its forward rule is itself)."""
        return self.saves == "meta" and not self.elementwise

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
    """Declare and register a primitive."""
    return register(Primitive(name, arity, forward, tuple(vjp), **facts))


def set_binding(fn: Callable[[Primitive, Sequence[Any], Sequence[Any]], Any]) -> None:
    global bind
    bind = fn
