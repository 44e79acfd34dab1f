"""What a check found: one object, built once; the CLI only prints it and picks the exit code.

Every comparison message is made here, in one place (as torch's gradcheck
builds its "Jacobian mismatch for output i with respect to input j" text).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..lang.frameworks import title
from ..text import in_message, number, plain_table
from .numeric import within_sides

REFERENCES = ("sympy", "finite_difference", "complex_step")  # the ways check computes the gradient itself
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
    jump: float | None = None  # f(x+) - f(x-) where the function steps here

    @property
    def subgradient(self) -> bool:
        """As the verdict decides it (numeric.within_sides): the words and the verdict cannot part."""
        jump = np.nan if self.jump is None else self.jump  # a step: no value of autograd's is wrong
        return bool(within_sides(self.left, self.right, self.autograd, jump))

    def text(self) -> str:
        if self.jump is not None:
            return (
                f"{self.element}: not differentiable here: the function steps by {in_message(self.jump)}; autograd gives "
                f"{in_message(self.autograd)} (as PyTorch does at a step), not judged"
            )
        verdict = "autograd's value lies between them" if self.subgradient else "autograd's value is outside them"
        return (
            f"{self.element}: not differentiable here: one-sided derivatives {in_message(self.left)} (left) and "
            f"{in_message(self.right)} (right); autograd gives {in_message(self.autograd)}, {verdict}"
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
    scope: str | None = None  # a framework's node: the nn.Module path it ran in ("encoder.layers.0")
    line: str | None = None  # a framework's node: the user's line that called it ("model.py:12")
    framework: str | None = None  # "torch" or "jax" for a framework's custom Function, None for gradcli's node
    occurrence: int = 0  # a framework's node: earlier calls from the same line in the same scope (a loop)
    hook: str | None = None  # a backward hook blamed (torch): its kind ("tensor hook"); op is its function's name
    without: float | None = None  # a hook blamed: v . J u by the backward with the hook removed
    registered: str | None = None  # a tensor hook blamed: the user's line that registered it

    def text(self) -> str:
        if self.hook is not None:
            return self._hook_text()
        where = "".join((f" in {self.scope}" if self.scope else "", f" at {self.line}" if self.line else ""))
        return (
            f"{self.grad_fn} ({self.label}) computes a wrong derivative: for random directions, "
            f"its backward gives {in_message(self.autograd)} where finite differences of its forward give {in_message(self.numeric)}"
            + (f" (at input{'s' if ',' in self.inputs else ''} {self.inputs})" if self.inputs else "")
            + (f"; called{where}" if where else "")
        )

    def _hook_text(self) -> str:
        lines = ", ".join(
            part
            for part in (
                f"defined at {self.line}" if self.line else "",
                f"registered at {self.registered}" if self.registered else "",
            )
            if part
        )
        return (
            f"the {self.hook} {self.op}{f' on {self.scope}' if self.scope else ''}{f' ({lines})' if lines else ''} "
            f"changes the gradient: along a random direction, {title(self.framework or 'torch')}'s gradient gives "
            f"{in_message(self.autograd)} with it and {in_message(self.without)} without it, where finite differences "
            f"of the function give {in_message(self.numeric)}"
        )  # fmt: skip

    @property
    def where(self) -> str:
        """How a report line names it: ``node n4: `` (a node of the graph), nothing for a hook (its text names it)."""
        return "" if self.hook is not None else f"node {self.node}: "


def _kinked(kinks: list[Kink]) -> list[str]:
    """What the verdict says of the elements where the function is not differentiable: at a kink,
    autograd's value lies between the one-sided derivatives shown above; at a step there is none to
    lie between, and autograd's value is not judged (as each element's own line says)."""
    slopes = [k.element for k in kinks if k.jump is None]
    steps = [k.element for k in kinks if k.jump is not None]
    parts = []
    if slopes:
        many = len(slopes) > 1
        parts.append(
            f"autograd's value{'s' if many else ''} at {', '.join(slopes)} "
            f"{'are valid subgradients' if many else 'is a valid subgradient'} (one-sided derivatives above)"
        )
    if steps:
        parts.append(f"the function steps at {', '.join(steps)}, where autograd's value is not judged")
    return parts


@dataclass
class WrongElement:
    """One input element whose derivative a check along directions found wrong, compared alone."""

    element: str  # its label ("w[3]")
    autograd: float
    reference: float  # the method's value
    method: str  # "finite_difference", "complex_step", "sympy" or "expect"
    abs_error: float
    rel_error: float
    tolerance: float

    def text(self, by: str) -> str:
        return (
            f"d/d{self.element}: {by} {in_message(self.autograd)} but {METHOD_NAMES[self.method]} "
            f"{in_message(self.reference)} (rel error {self.rel_error:.3g})"
        )


@dataclass
class Directional:
    """How a check along random directions went: ``count`` directions u1..uK (Gaussian, at each element's
    scale, from ``seed``), the gradient's projections on them (``along``), and where one disagreed, the
    search for the elements at fault: each input's part of that direction (``parts``: agrees or not),
    then halves of the disagreeing parts, recursively, down to elements compared one by one."""

    count: int
    seed: int
    along: np.ndarray  # (K,) the gradient . u_k
    direction: str | None = None  # the direction searched ("u3"); None: none disagreed
    method: str | None = None  # the method the search compared with
    parts: dict[str, bool] = field(default_factory=dict)  # input -> its part of the direction agrees
    wrong: list[WrongElement] = field(default_factory=list)  # the wrong elements found
    compared: int = 0  # elements compared one by one
    complete: bool = True  # every disagreeing half followed (False: the search kept the worst few)
    shortened: float = 1.0  # the directions' length against their first (measured again on a path with kinks)

    def lines(self, by: str) -> list[str]:
        """The report's lines about the directions and the search."""
        said = [
            f"checked along {self.count} random directions u1..u{self.count} (Gaussian, seed {self.seed}): d/du_k is "
            "the derivative of f(x + t u_k) at t = 0, against the gradient . u_k; --directions elementwise "
            "compares every element alone"
        ]
        if self.shortened != 1.0:
            said.append(
                f"finite differences disagreed on a path with kinks: measured again along directions {self.shortened:g} "
                "times as long (fewer kinks inside the steps)"
            )
        if self.direction is None:
            return said
        wrong_parts = [name for name, ok in self.parts.items() if not ok]
        if len(self.parts) > 1 and wrong_parts:
            said.append(f"{self.direction} disagrees in {' and '.join(wrong_parts)}'s part")
        elif len(self.parts) > 1:
            said.append(f"no input's part of {self.direction} disagrees alone")
        if self.wrong:
            said += [f"wrong element: {w.text(by)}" for w in self.wrong[:WRONG_SHOWN]]
            if len(self.wrong) > WRONG_SHOWN:
                said.append(f"and {len(self.wrong) - WRONG_SHOWN} more wrong elements (--json lists them)")
            if not self.complete:
                said.append("more elements may be wrong: the search followed the worst disagreeing halves only")
        else:
            said.append(
                f"no element of {self.direction}'s support disagrees alone among the {self.compared} compared: "
                "the error is spread over many elements, each too small to see alone"
            )
        return said

    def verdict(self, by: str) -> str:
        """What the verdict adds to the direction's mismatch: the wrong elements found."""
        if not self.wrong:
            return ""
        first = self.wrong[0].text(by)
        more = f" and {len(self.wrong) - 1} more" if len(self.wrong) > 1 else ""
        return f"; found by bisection: {first}{more}"

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {"count": self.count, "seed": self.seed, "along": self.along.tolist()}
        if self.direction is not None:
            document["localised"] = {
                "direction": self.direction, "method": self.method, "parts": self.parts, "compared": self.compared,
                "complete": self.complete,
                "wrong": [{"element": w.element, "autograd": w.autograd, w.method: w.reference,
                           "abs_error": w.abs_error, "rel_error": w.rel_error} for w in self.wrong],
            }  # fmt: skip
        return document


WRONG_SHOWN = 5  # wrong elements a report lists one by one
CHECK_ROWS = 12  # elements listed one by one; beyond, the worst element of each variable


@dataclass
class CheckRow:
    """One input element as the report shows it: autograd's derivative beside each method's."""

    label: str  # the element ("x", "v[1]"), as in d/d<label>
    autograd: float
    values: list[float]  # one per column of the table's ``methods``; nan where the method has none
    abs_error: float | None  # |autograd - the furthest method|; None where no method gives a number
    rel_error: float | None  # abs_error over the larger of that method's value and autograd's
    status: str  # "ok", "MISMATCH", "kink" or "-" (nothing compared)


@dataclass
class CheckTable:
    """The rows a report shows: every element, or past CHECK_ROWS the worst of each variable."""

    methods: list[str]  # the methods that ran, in order: the table's columns
    rows: list[CheckRow]
    note: str | None = None  # said when not every element is shown


def check_table(
    gradient: dict[str, np.ndarray], checks: dict[str, MethodCheck], kinks: list[Kink], labels: list[str]
) -> CheckTable:
    """Per-element errors, the method furthest from autograd, and the rows to show, computed once."""
    autograd = (
        np.concatenate([np.asarray(g, dtype=np.float64).reshape(-1) for g in gradient.values()])
        if labels
        else np.zeros(0)
    )
    shown = [c for c in checks.values() if c.ok is not None]
    columns = [_flat_values(c, gradient, len(labels)) for c in shown]
    with np.errstate(all="ignore"):
        errors = np.stack([np.abs(autograd - v) for v in columns]) if columns else np.zeros((0, len(labels)))
        abs_error = np.nanmax(np.where(np.isnan(errors), -np.inf, errors), axis=0, initial=-np.inf)
        worst_method = np.argmax(np.where(np.isnan(errors), -np.inf, errors), axis=0) if columns else None
    element_ok = np.ones(len(labels), dtype=bool)
    for c in shown:
        if c.element_ok is not None:
            element_ok &= c.element_ok
    rows_shown, note = list(range(len(labels))), None
    if len(labels) > CHECK_ROWS:
        rows_shown = _worst_of_each(gradient, autograd, abs_error, element_ok)
        note = f"{len(labels)} elements: the worst of each variable shown (--json has them all)"
    kinked = {k.element for k in kinks}
    rows = []
    for k in rows_shown:
        abs_k = rel_k = None
        if np.isfinite(abs_error[k]):
            scale = max(abs(columns[worst_method[k]][k]), abs(autograd[k]))
            abs_k, rel_k = abs_error[k], abs_error[k] / scale if scale else 0.0
        compared = any(not np.isnan(v[k]) for v in columns)
        status = "kink" if labels[k] in kinked else ("MISMATCH" if not element_ok[k] else "ok" if compared else "-")
        rows.append(CheckRow(labels[k], autograd[k], [v[k] for v in columns], abs_k, rel_k, status))
    return CheckTable([c.name for c in shown], rows, note)


def _flat_values(check: MethodCheck, gradient: dict[str, np.ndarray], size: int) -> np.ndarray:
    """A method's values, flat over every input element (nan where it has none)."""
    flat = np.full(size, np.nan)
    offset = 0
    for name, g in gradient.items():
        n = int(np.size(g))
        if name in check.values:
            flat[offset : offset + n] = np.asarray(check.values[name], dtype=np.float64).reshape(-1)
        offset += n
    return flat


def _worst_of_each(
    gradient: dict[str, np.ndarray], autograd: np.ndarray, abs_error: np.ndarray, element_ok: np.ndarray
) -> list[int]:
    """Each variable's element furthest from agreeing (among its failing ones, if any fail)."""
    rows, offset = [], 0
    for g in gradient.values():
        size = int(np.size(g))
        block = np.arange(offset, offset + size)
        failing = block[~element_ok[block]]
        pick = failing if failing.size else block
        score = abs_error[pick] / np.maximum(np.abs(autograd[pick]), 1e-300)
        if pick.size:
            rows.append(int(pick[np.argmax(np.where(np.isfinite(score), score, -1.0))]))
        offset += size
    return rows


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
    table: CheckTable | None = field(default=None, repr=False)  # the rows a report shows (check_table)
    framework: str | None = None  # "torch" or "jax": the gradient checked is that framework's own
    directional: Directional | None = None  # checked along random directions (None: element by element)

    @property
    def by(self) -> str:
        """Whose gradient was checked: autograd's (gradcli's), PyTorch's or JAX's."""
        return "autograd" if self.framework is None else title(self.framework)

    @property
    def compared(self) -> dict[str, np.ndarray]:
        """What the methods' values stand beside: the gradient, or its projections on the directions."""
        return self.gradient if self.directional is None else {"along": self.directional.along}

    def ran(self) -> list[MethodCheck]:
        return [c for c in self.checks.values() if c.ok is not None]

    def report(self, places: int | None = None) -> tuple[list[str], list[list[str]], list[str], str | None]:
        """What ``gradcli check`` prints: the table's header and rows (numbers with ``places``
        significant digits, all of them by default), the lines under it, and the table's note."""
        table = self.table or check_table(self.compared, self.checks, self.kinks, self.labels)
        header = ["", self.by, *(METHOD_NAMES[name] for name in table.methods), "abs err", "rel err", ""]
        body = [_cells(row, places) for row in table.rows]
        lines = [f"{METHOD_NAMES[c.name]}: {c.reason}" for c in self.checks.values() if c.reason]
        lines += [k.text() for k in self.kinks]
        if self.directional is not None:
            lines += self.directional.lines(self.by)
            body += [_cells(row, places) for row in _wrong_rows(self.directional, table.methods)]
        lines += self.notes
        if self.blame is not None:
            lines.append(f"blame: {self.blame.where}{self.blame.text()}")
        elif self.blame_checked:
            lines.append(f"blame: the derivatives of all {self.blame_checked} nodes agree with finite differences")
        return header, body, lines, table.note

    def __str__(self) -> str:
        """The report ``gradcli check`` prints in a pipe: ``print(gc.check(...))``."""
        header, body, lines, note = self.report()
        header[-1] = "ok"
        return "\n".join(plain_table(header, body) + ([f"({note})"] if note else []) + [*lines, self.verdict()])

    def verdict(self) -> str:
        """One line: what agreed, or the first thing that did not."""
        return self._mismatch() or self._agreement()

    def _mismatch(self) -> str | None:
        """The first thing that did not agree, or None."""
        if self.nonfinite:
            return f"FAILED: {self.nonfinite}"
        bad = [c for c in self.checks.values() if c.ok is False]
        disputed = self._disputed(bad)
        if disputed:
            return disputed
        if bad:
            c = bad[0]
            more = f" (and {len(bad) - 1} more method{'s' if len(bad) > 2 else ''})" if len(bad) > 1 else ""
            found = "" if self.directional is None else self.directional.verdict(self.by)
            return f"MISMATCH: {c.worst_detail}{more}{found}"
        if self.kinks and not all(k.subgradient for k in self.kinks):
            k = next(k for k in self.kinks if not k.subgradient)
            return f"MISMATCH: {k.text()}"
        if self.blame is not None:
            return f"MISMATCH: {self.blame.text()}"
        return None

    def _disputed(self, bad: list[MethodCheck]) -> str | None:
        """Where the methods that disagree with the gradient are references that disagree with another
        reference that agrees (complex step -1, finite differences 1, PyTorch 1), the references are at
        odds, not the gradient: said so, not judged (None otherwise; an expected formula's own mismatch
        is the user's claim, not a reference)."""
        agreeing = [c for c in self.checks.values() if c.ok is True and c.name in REFERENCES]
        if not bad or not agreeing or any(c.name not in REFERENCES for c in bad) or bad[0].worst not in self.labels:
            return None
        k = self.labels.index(bad[0].worst)
        compared = self.compared
        values = [(c, _flat_values(c, compared, len(self.labels))[k]) for c in (bad[0], *agreeing)]
        values = [(METHOD_NAMES[c.name], v) for c, v in values if np.isfinite(v)]
        if len(values) < 2:
            return None
        autograd = _flat_values(MethodCheck("", None, compared), compared, len(self.labels))[k]
        said = ", ".join(f"{name} {in_message(v)}" for name, v in values)
        return (
            f"INCONCLUSIVE: the references disagree at d/d{bad[0].worst}: {said} ({self.by} gives "
            f"{in_message(autograd)}); not judged"
        )

    def _agreement(self) -> str:
        """What agreed, when nothing disagreed (or why nothing could judge)."""
        ran = self.ran()
        if not ran and self.kinks:
            return "OK: not differentiable here; " + "; ".join(_kinked(self.kinks))
        if not ran and any((c.reason or "").startswith("inconclusive") for c in self.checks.values()):
            return "INCONCLUSIVE: no method could judge autograd's gradient at this point (see above)"
        if not ran:
            return "NOTHING CHECKED: no method could run (see the reasons)"
        names = ", ".join(METHOD_NAMES[c.name] for c in ran)
        worst = max((c.max_rel_error or 0.0) for c in ran)
        along = "" if self.directional is None else f" along {self.directional.count} random directions"
        text = f"OK: {self.by} agrees with {names}{along} (largest relative error {worst:.2g})"
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
            **({"framework": self.framework} if self.framework else {}),
            "method": "elementwise" if self.directional is None else "directions",
        }
        if self.directional is not None:
            document["directions"] = self.directional.count
            document["along"] = self.directional.to_dict()
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
            if self.blame is not None and self.blame.framework is not None:
                document["blame"].update(framework=self.blame.framework, scope=self.blame.scope, line=self.blame.line)
            if self.blame is not None and self.blame.hook is not None:
                document["blame"].update(hook=self.blame.hook, without_hook=self.blame.without,
                                         registered=self.blame.registered)  # fmt: skip
        return document


def _wrong_rows(directional: Directional, methods: list[str]) -> list[CheckRow]:
    """The wrong elements a search along a direction found, as rows of the table (its own columns)."""
    return [
        CheckRow(w.element, w.autograd, [w.reference if m == w.method else np.nan for m in methods], w.abs_error,
                 w.rel_error, "MISMATCH")
        for w in directional.wrong[:WRONG_SHOWN]
    ]  # fmt: skip


def _cells(row: Any, places: int | None) -> list[str]:
    cells = [f"d/d{row.label}", number(row.autograd, places)]
    cells += ["" if np.isnan(v) else number(v, places) for v in row.values]
    cells += ["", ""] if row.abs_error is None else [f"{row.abs_error:.2g}", f"{row.rel_error:.2g}"]
    cells.append(row.status)
    return cells
