"""What a check found: one object, built once; the CLI only prints it and picks the exit code.

Every comparison message is made here, in one place (as torch's gradcheck
builds its "Jacobian mismatch for output i with respect to input j" text).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

METHOD_NAMES = {
    "sympy": "sympy",
    "finite_difference": "finite differences",
    "complex_step": "complex step",
    "expect": "expected",
}


@dataclass
class MethodCheck:
    """One way of computing the gradient, compared with autograd's."""

    name: str  # "sympy", "finite_difference", "complex_step" or "expect"
    ok: bool | None  # None: it did not run (see reason)
    values: dict[str, np.ndarray] = field(default_factory=dict)
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    worst: str | None = None  # the element furthest outside its tolerance
    worst_detail: str | None = None
    estimated_error: float | None = None  # the method's own error bound, where it has one
    reason: str | None = None
    element_ok: np.ndarray | None = field(default=None, repr=False)  # per input element (flat)
    element_error: np.ndarray | None = field(default=None, repr=False)  # |autograd - this| per element
    redo: Any = field(default=None, repr=False, compare=False)  # the comparison again (after measuring rounding)

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "ok": self.ok,
            "max_abs_error": self.max_abs_error,
            "max_rel_error": self.max_rel_error,
        }
        if self.reason:
            document["reason"] = self.reason
        if self.values:
            document["values"] = {name: np.asarray(v).tolist() for name, v in self.values.items()}
        if self.worst:
            document["worst"] = self.worst
        if self.estimated_error is not None:
            document["estimated_error"] = self.estimated_error
        return document


@dataclass
class Kink:
    """A point where the function is not differentiable along one input element."""

    element: str
    left: float
    right: float
    autograd: float

    @property
    def subgradient(self) -> bool:
        lo, hi = sorted((self.left, self.right))
        slack = 1e-6 * max(1.0, abs(lo), abs(hi))
        return lo - slack <= self.autograd <= hi + slack

    def text(self) -> str:
        verdict = "autograd's value lies between them" if self.subgradient else "autograd's value is outside them"
        return (
            f"{self.element}: not differentiable here: one-sided derivatives {_n(self.left)} (left) and "
            f"{_n(self.right)} (right); autograd gives {_n(self.autograd)}, {verdict}"
        )


@dataclass
class Blame:
    """The first node whose own derivative disagrees with finite differences of that node alone."""

    node: str  # its id in the graph
    op: str
    grad_fn: str
    label: str
    autograd: float  # v . J u from its backward rule
    numeric: float  # the same from finite differences of its forward
    inputs: str
    autograd_node: Any = field(default=None, repr=False, compare=False)

    def text(self) -> str:
        return (
            f"{self.grad_fn} ({self.label}) computes a wrong derivative: for random directions, "
            f"its backward gives {_n(self.autograd)} where finite differences of its forward give {_n(self.numeric)} "
            f"(at input{'s' if ',' in self.inputs else ''} {self.inputs})"
        )


@dataclass
class CheckResult:
    ok: bool
    value: Any
    gradient: dict[str, np.ndarray]
    checks: dict[str, MethodCheck]
    rtol: float
    atol: float
    nonfinite: str | None = None
    kinks: list[Kink] = field(default_factory=list)
    blame: Blame | None = None
    blame_checked: int = 0  # nodes whose own derivatives were checked (with --blame)
    labels: list[str] = field(default_factory=list)  # d/d<label> for each input element, flat
    notes: list[str] = field(default_factory=list)  # what a reader should know (rounding, one-sided differences)
    warnings: list[str] = field(default_factory=list)  # Python warnings caught on the way, in gradcli's words

    def ran(self) -> list[MethodCheck]:
        return [c for c in self.checks.values() if c.ok is not None]

    def verdict(self) -> str:
        """One line: what agreed, or the first thing that did not."""
        if self.nonfinite:
            return f"FAILED: {self.nonfinite}"
        bad = [c for c in self.checks.values() if c.ok is False]
        if bad:
            c = bad[0]
            more = f" (and {len(bad) - 1} more method{'s' if len(bad) > 2 else ''})" if len(bad) > 1 else ""
            return f"MISMATCH: {c.worst_detail}{more}"
        ran = self.ran()
        if self.kinks and not all(k.subgradient for k in self.kinks):
            k = next(k for k in self.kinks if not k.subgradient)
            return f"MISMATCH: {k.text()}"
        if self.blame is not None:
            return f"MISMATCH: {self.blame.text()}"
        if not ran and self.kinks:
            many = len(self.kinks) > 1
            return f"OK: not differentiable here; autograd's value{'s are valid subgradients' if many else ' is a valid subgradient'} (one-sided derivatives above)"
        if not ran and any((c.reason or "").startswith("inconclusive") for c in self.checks.values()):
            return "INCONCLUSIVE: no method could judge autograd's gradient at this point (see above)"
        if not ran:
            return "NOTHING CHECKED: no method could run (see the reasons)"
        names = ", ".join(METHOD_NAMES[c.name] for c in ran)
        worst = max((c.max_rel_error or 0.0) for c in ran)
        text = f"OK: autograd agrees with {names} (largest relative error {worst:.2g})"
        if self.kinks:
            text += f"; not differentiable at {len(self.kinks)} element{'s' if len(self.kinks) > 1 else ''} (see above)"
        return text

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "ok": self.ok,
            "value": np.asarray(self.value).tolist(),
            "gradient": {name: np.asarray(g).tolist() for name, g in self.gradient.items()},
            "checks": {name: c.to_dict() for name, c in self.checks.items()},
            "rtol": self.rtol,
            "atol": self.atol,
            "verdict": self.verdict(),
        }
        if self.kinks:
            document["not_differentiable"] = [
                {
                    "element": k.element,
                    "left": k.left,
                    "right": k.right,
                    "autograd": k.autograd,
                    "subgradient": k.subgradient,
                }
                for k in self.kinks
            ]
        if self.nonfinite:
            document["nonfinite"] = self.nonfinite
        if self.notes:
            document["notes"] = self.notes
        if self.blame is not None or self.blame_checked:
            document["blame"] = None if self.blame is None else {
                "node": self.blame.node, "op": self.blame.op, "grad_fn": self.blame.grad_fn, "label": self.blame.label,
                "autograd": self.blame.autograd, "finite_difference": self.blame.numeric, "inputs": self.blame.inputs,
            }  # fmt: skip
        return document


def _n(value: float) -> str:
    from ..text import number

    return number(value, 10)
