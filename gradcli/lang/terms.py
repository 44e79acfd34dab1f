"""The SymPy objects the language makes, below both the translation (symbolic.py) and the
printer: ``detach``'s ``stop_gradient``, the ``Element`` symbol of one array element, and
``as_expr`` for numbers. Only commands that use SymPy import this module.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp


class stop_gradient(sp.Function):  # noqa: N801  (the name SymPy prints)
    """``detach(e)``: the value of ``e``, whose derivative is 0."""

    def _at_number(cls, arg: Any) -> Any:
        if arg.is_Number:  # a constant has no gradient to stop (and log(detach(1)) is log(1) = 0)
            return arg
        return None

    eval = classmethod(_at_number)  # SymPy's hook, called as the node is made

    def fdiff(self, argindex: int = 1) -> Any:
        return sp.Integer(0)

    def _eval_evalf(self, prec: int) -> Any:
        return self.args[0]._eval_evalf(prec)


class Element(sp.Symbol):
    """The symbol of one element of an array (``x_0``, ``A_1_2``): printed ``x[0]``, ``A[1,2]``;
    it knows the array's name, shape and its own index."""

    def __new__(cls, name: str, array: str = "", shape: tuple[int, ...] = (), index: tuple[int, ...] = (), **kw: Any):
        obj = sp.Symbol.__xnew__(cls, name, **kw)
        obj.array, obj.shape, obj.index = array, tuple(shape), tuple(index)
        return obj

    def __getnewargs_ex__(self) -> Any:
        return (self.name, self.array, self.shape, self.index), self.assumptions0

    def _hashable_content(self) -> Any:
        return (*super()._hashable_content(), self.array, self.shape, self.index)


def as_expr(value: Any) -> Any:
    """A SymPy expression, or a Python/NumPy number made one (never text: no ``sympify``)."""
    if isinstance(value, sp.Basic):
        return value
    if isinstance(value, (bool, np.bool_)):
        return sp.Integer(int(value))
    if isinstance(value, (int, np.integer)):
        return sp.Integer(int(value))
    if isinstance(value, (float, np.floating)):
        return sp.Float(float(value))
    raise TypeError(f"not a SymPy value: {type(value).__name__}")
