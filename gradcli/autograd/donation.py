"""Buffer donation: in-place forms of a few primitives' rules, which the backward pass runs instead
of the table's formulas.

The table (ops/) says what a derivative is (``g * cos(x)``); this module says where the engine may
write it. Each 10^7-element array a rule makes costs a pass of page faults, so for the rules of the
commonest elementwise chains (``IN_PLACE``) the result goes into a buffer that already exists:

- the gradient itself, when the engine allocated it and nobody else holds it: the engine lends it
  to the running node's rules (``DONATION.buffer``) and the rule that reads it last may write into it;
- a temporary the rule just made (``cos(x)``, ``2 x``);
- none at all: ``g`` is one 1.0 broadcast over the other operand's shape (a sum's gradient), and
  ``g * other`` is ``other`` bit for bit, handed on as a read-only view.

Every form computes the same operation on the same operands in the same order as the table's
rule, so results are bit-identical; it only chooses where the result is written.
"""

from __future__ import annotations

from _thread import _local as _thread_local  # threading.local itself, without importing threading at start-up
from typing import Any

import numpy as np

from ..ops import EXP, LOG, MUL, NEG, POW, SIN, Primitive

_ndarray = np.ndarray


class Donation(_thread_local):
    """The gradient buffer the engine hands the running node's rules (``buffer``): the engine
    allocated it and nobody else holds it, so the rule that reads it last may write into it.
    A rule that does sets ``buffer`` back to ``None`` (the engine reads that as "taken")."""

    buffer = None


DONATION = Donation()


def donated(g: Any, other: Any) -> bool:
    """``g`` may be overwritten with ``g (op) other`` (same shape and dtype as the result)."""
    if g.__class__ is not _ndarray or g is not DONATION.buffer:
        return False
    other_shape = other.shape if other.__class__ is _ndarray else ()
    if other_shape != g.shape and np.broadcast_shapes(other_shape, g.shape) != g.shape:
        return False
    if np.result_type(g, other) != g.dtype:
        return False
    DONATION.buffer = None
    return True


def _times(g: Any, c: Any) -> Any:
    """``g * c`` where ``c`` is a temporary the rule just made: written into ``c`` when it can hold it."""
    if (
        c.__class__ is _ndarray
        and g.__class__ is _ndarray
        and c.shape == g.shape
        and c.dtype == g.dtype
        and c.flags.writeable
    ):
        return np.multiply(g, c, out=c)
    return g * c


def unit(g: Any, other: Any) -> bool:
    """``g`` is one 1.0 broadcast over ``other``'s shape (a sum's gradient): ``g * other`` is
    ``other``, bit for bit, and the product can be a read-only view of it instead of a copy."""
    return (
        g.__class__ is _ndarray
        and other.__class__ is _ndarray
        and g.shape == other.shape
        and g.dtype == other.dtype
        and g.size > 1
        and not any(g.strides)
        and g.item(0) == 1.0
    )


def _mul_a(g, out, a, b):
    if g.__class__ is _ndarray and unit(g, b):
        return b.view()  # a view: the engine never writes into it (b is saved for backward)
    return g * b


def _mul_b(g, out, a, b):
    """``g * a``: the last rule of mul's node to read ``g``, so it may write into a donated ``g``."""
    if g.__class__ is _ndarray:  # (a scalar gradient: neither helper applies, and this runs per node)
        if donated(g, a):
            return np.multiply(g, a, out=g)
        if unit(g, a):
            return a.view()
    return g * a


def _sin(g, out, x):
    c = np.cos(x)
    return g * c if c.__class__ is not _ndarray else _times(g, c)


def _exp(g, out, x):
    if g.__class__ is _ndarray and donated(g, out):
        return np.multiply(g, out, out=g)
    return g * out


def _neg(g, out, x):
    if g.__class__ is _ndarray and g is DONATION.buffer:
        DONATION.buffer = None
        return np.negative(g, out=g)
    return -g


def _log(g, out, x):
    if g.__class__ is _ndarray and donated(g, x):
        return np.divide(g, x, out=g)
    return g / x


_pow_base = POW.vjp[0]


def _pow_dbase(g, out, x, y):
    if isinstance(y, (int, float)) and y == 2:  # the common square: 2x, multiplied into that temporary
        return _times(g, 2.0 * x)
    return _pow_base(g, out, x, y)


#: Primitive -> the in-place forms of its rules, one an input (``None``: the table's own rule).
IN_PLACE: dict[Primitive, tuple[Any, ...]] = {
    MUL: (_mul_a, _mul_b),
    SIN: (_sin,),
    EXP: (_exp,),
    NEG: (_neg,),
    LOG: (_log,),
    POW: (_pow_dbase, None),
}


def rules(prim: Primitive) -> tuple[Any, ...]:
    """The reverse rules a node of ``prim`` runs: the table's, each replaced by its in-place form
    where ``IN_PLACE`` has one."""
    own = IN_PLACE.get(prim)
    if own is None:
        return prim.vjp
    return tuple(table if mine is None or table is None else mine for mine, table in zip(own, prim.vjp))
