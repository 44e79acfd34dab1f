"""``einsum`` and ``tensordot``: PyTorch's contractions, composed from differentiable rows.

Both are written with rows that already have reverse and forward rules (permute, reshape,
indexing, products, sum), so first and higher derivatives follow without rules of their own.
``tensordot`` is one matrix product between two reshaped operands; ``einsum`` takes diagonals
for repeated labels, lines every operand up on the same labels, multiplies (broadcasting) and
sums the labels that are not in the output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import functions as F
from .tensor import Tensor


def tensordot(a: Any, b: Any, dims: Any = 2) -> Tensor:
    """Sum of products over ``dims``: the last ``dims`` axes of ``a`` with the first of ``b``, or the
    axes the pair of lists ``([a axes], [b axes])`` names."""
    a, b = F.as_tensor(a), F.as_tensor(b)
    da, db = _tensordot_axes(a, b, dims)
    a, b = _matched(a, da, b, db)
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    k = int(np.prod([a.shape[d] for d in da], dtype=np.int64))
    left = F.reshape(F.permute(a, free_a + da) if a.ndim else a, (-1, k))
    right = F.reshape(F.permute(b, db + free_b) if b.ndim else b, (k, -1))
    shape = tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b)
    return F.reshape(F.mm(left, right), shape)


def _tensordot_axes(a: Tensor, b: Tensor, dims: Any) -> tuple[list[int], list[int]]:
    """The axes of ``a`` and of ``b`` that ``tensordot``'s ``dims`` contracts."""
    if isinstance(dims, (int, np.integer)):
        n = int(dims)
        if n < 0 or n > min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot expects dims >= 0 and at most the dimensions of a and b, got {n}")
        return list(range(a.ndim - n, a.ndim)), list(range(n))
    da, db = ([int(d) for d in side] if isinstance(side, (list, tuple)) else [int(side)] for side in dims)
    da = [F.wrap_dim(d, a.ndim) for d in da]
    db = [F.wrap_dim(d, b.ndim) for d in db]
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    return da, db


def _matched(a: Tensor, da: list[int], b: Tensor, db: list[int]) -> tuple[Tensor, Tensor]:
    """``a`` and ``b`` with equal sizes on the contracted axes: a size 1 against n broadcasts, as in
    PyTorch (the other side summed there); other sizes that differ are refused."""
    for i, j in zip(da, db):
        if a.shape[i] == 1 and b.shape[j] != 1:
            b = F.sum(b, j, keepdim=True)
        elif b.shape[j] == 1 and a.shape[i] != 1:
            a = F.sum(a, i, keepdim=True)
        elif a.shape[i] != b.shape[j]:
            raise RuntimeError(
                f"contracted dimensions need to match, but first has size {a.shape[i]} in dim {i} "
                f"and second has size {b.shape[j]} in dim {j}"
            )
    return a, b


def _labels(term: str, ndim: int, where: str) -> list[str]:
    """The labels of one operand, ``...`` spelled as one label per axis it covers (counted from the right)."""
    if term.count("...") > 1 or "." in term.replace("...", ""):
        raise RuntimeError(f"einsum(): invalid subscript {term!r} {where}")
    head, dots, tail = term.partition("...")
    for ch in head + tail:
        if not ch.isalpha():
            raise RuntimeError(f"einsum(): invalid subscript given at index of {ch!r}: letters only")
    if not dots:
        if len(term) != ndim:
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({len(term)}) does not match the "
                f"number of dimensions ({ndim}) {where}"
            )
        return list(term)
    covered = ndim - len(head) - len(tail)
    if covered < 0:
        raise RuntimeError(f"einsum(): the number of subscripts in the equation exceeds the dimensions {where}")
    return list(head) + [f"...{covered - i}" for i in range(covered)] + list(tail)


def _diagonals(x: Tensor, labels: list[str]) -> tuple[Tensor, list[str]]:
    """Repeated labels in one operand (``ii``): the diagonal, its label once, at the end."""
    while len(set(labels)) != len(labels):
        label = next(lab for lab in labels if labels.count(lab) > 1)
        p, q = [i for i, lab in enumerate(labels) if lab == label][:2]
        if x.shape[p] != x.shape[q]:
            raise RuntimeError(f"einsum(): subscript {label} is repeated for operand but the sizes don't match")
        rest = [i for i in range(x.ndim) if i not in (p, q)]
        x = F.permute(x, rest + [p, q])
        index = np.arange(x.shape[-1])
        x = x[(Ellipsis, index, index)]
        labels = [labels[i] for i in rest] + [label]
    return x, labels


def _output(equation: str, terms: list[list[str]]) -> list[str]:
    """The output labels: as written after ``->``, else the labels seen once, sorted, after ``...``."""
    dots = max((sum(1 for lab in t if lab.startswith("...")) for t in terms), default=0)
    ellipsis = [f"...{dots - i}" for i in range(dots)]
    if "->" not in equation:
        counts: dict[str, int] = {}
        for t in terms:
            for lab in t:  # as written: ``ii`` is i twice (a trace), not once
                if not lab.startswith("..."):
                    counts[lab] = counts.get(lab, 0) + 1
        return ellipsis + sorted(lab for lab, n in counts.items() if n == 1)
    out = equation.split("->", 1)[1]
    labels = _labels(out, len(out.replace("...", "")) + (dots if "..." in out else 0), "in the output")
    seen = {lab for t in terms for lab in t}
    for lab in labels:
        if lab not in seen:
            raise RuntimeError(
                f"einsum(): output subscript {lab} does not appear in the equation for any input operand"
            )
        if labels.count(lab) > 1:
            raise RuntimeError(f"einsum(): output subscript {lab} appears more than once in the output")
    return labels


def einsum(equation: Any, *operands: Any) -> Tensor:
    """PyTorch's ``einsum``: ``"ij,jk->ik"``, ``...`` for the leading axes, the output implicit
    (labels seen once, in alphabetical order) when there is no ``->``; or its sublist form,
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])``, as NumPy and PyTorch take it."""
    if not isinstance(equation, str):
        equation, operands = _sublist_equation((equation, *operands))
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    xs = [F.as_tensor(x) for x in operands]
    equation = equation.replace(" ", "")
    inputs = equation.split("->", 1)[0].split(",")
    if len(inputs) != len(xs):
        raise RuntimeError(f"einsum(): {len(inputs)} operands in the equation, {len(xs)} given")
    written = [_labels(term, x.ndim, f"for operand {i}") for i, (term, x) in enumerate(zip(inputs, xs))]
    out = _output(equation, written)
    terms = []
    for i, labels in enumerate(written):
        xs[i], labels = _diagonals(xs[i], labels)
        terms.append(labels)
    return _contract(xs, terms, out)


def _sublist_equation(args: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
    """``(a, [0, 1], b, [1], [0])`` as ``("ab,b->a", (a, b))``: 0-25 are a-z, 26-51 A-Z, ``...`` itself."""

    def letters(sublist: Any) -> str:
        out = []
        for s in sublist:
            if s is Ellipsis:
                out.append("...")
                continue
            if not isinstance(s, (int, np.integer)) or not 0 <= s < 52:
                raise RuntimeError(f"einsum(): expected subscript to be within the range [0, 52), but got {s}")
            out.append(chr(ord("a") + s) if s < 26 else chr(ord("A") + s - 26))
        return "".join(out)

    items = list(args)
    operands, terms = [], []
    while len(items) >= 2:
        operands.append(items.pop(0))
        terms.append(letters(items.pop(0)))
    equation = ",".join(terms) + ("->" + letters(items[0]) if items else "")
    return equation, tuple(operands)


def _pair(a: Tensor, la: list[str], b: Tensor, lb: list[str], out: list[str]) -> Tensor | None:
    """Two operands as one batched matrix product (no n^3 intermediate), or None where a label
    broadcasts (size 1 on one side only): the general path takes those."""
    size = dict(zip(la, a.shape))
    for lab, n in zip(lb, b.shape):
        if size.setdefault(lab, n) != n:
            return None
    a, la, b, lb = (*_sum_own(a, la, lb, out), *_sum_own(b, lb, la, out))
    batch = [lab for lab in out if lab in la and lab in lb]
    inner = [lab for lab in la if lab in lb and lab not in out]
    free_a = [lab for lab in la if lab not in lb]
    free_b = [lab for lab in lb if lab not in la]
    left = _matrices(a, la, (batch, free_a, inner), size)
    right = _matrices(b, lb, (batch, inner, free_b), size)
    labels = batch + free_a + free_b
    product = F.reshape(F.matmul(left, right), tuple(size[lab] for lab in labels))
    return product if labels == out else F.permute(product, [labels.index(lab) for lab in out])


def _sum_own(x: Tensor, labels: list[str], other: list[str], out: list[str]) -> tuple[Tensor, list[str]]:
    """The labels of one operand alone, in neither the other operand nor the output: summed first."""
    own = [lab for lab in labels if lab not in other and lab not in out]
    if not own:
        return x, labels
    return F.sum(x, tuple(labels.index(lab) for lab in own)), [lab for lab in labels if lab not in own]


def _matrices(x: Tensor, labels: list[str], groups: tuple[list[str], ...], size: dict[str, int]) -> Tensor:
    """``x`` with its axes in the order of ``groups``, each group one axis (a batch of matrices)."""
    order = [lab for group in groups for lab in group]
    shape = tuple(int(np.prod([size[lab] for lab in group], dtype=np.int64)) for group in groups)
    return F.reshape(F.permute(x, [labels.index(lab) for lab in order]), shape)


def _contract(xs: Sequence[Tensor], terms: list[list[str]], out: list[str]) -> Tensor:
    if len(xs) == 2 and xs[0].ndim and xs[1].ndim:
        paired = _pair(xs[0], terms[0], xs[1], terms[1], out)
        if paired is not None:
            return paired
    summed = sorted({lab for t in terms for lab in t} - set(out))
    order = out + summed
    sizes: dict[str, int] = {}
    product = None
    for x, labels in zip(xs, terms):
        for lab, n in zip(labels, x.shape):
            if sizes.get(lab, 1) not in (1, n) and n != 1:
                raise RuntimeError(f"einsum(): operands do not broadcast with remapped shapes for subscript {lab}")
            sizes[lab] = max(sizes.get(lab, 1), n)
        mine = [lab for lab in order if lab in labels]
        if mine != labels:
            x = F.permute(x, [labels.index(lab) for lab in mine])
        aligned = F.reshape(x, tuple(x.shape[mine.index(lab)] if lab in mine else 1 for lab in order))
        product = aligned if product is None else product * aligned
    if summed:
        product = F.sum(product, tuple(range(len(out), len(order))))
    shape = tuple(sizes.get(lab, 1) for lab in out)
    return product if tuple(product.shape) == shape else F.expand(product, shape)
