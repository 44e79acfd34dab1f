"""Issue 13's hunt: the classes of its language, SymPy and --blame defects, fuzzed.

The random expressions of ``test_random_expressions`` (every operator, the
conditional, comparisons, the functions, arrays, indexing, named steps), at
points drawn there, are run three more ways:

- **function forms**: the same tree written with ``add(a, b)``, ``pow(a, b)``,
  ``neg(a)``, ``lt(a, b)``, ``where(c, a, b)``... (each node one way or the other
  at random) must give the very same value and gradient as the operator text;
- **diff against autograd**: ``gradcli diff``'s derivative (SymPy, simplified),
  evaluated at the point, against autograd's gradient, with the text in either
  form and, half the time, scalar variables renamed to the names of array
  elements (``w_0``, ``u_1``, ``v_2``) to hunt symbol collisions;
- **--blame**: at smooth points and at points full of ties, zeros and kinks, no
  primitive of the table is blamed (every one of them agrees with finite
  differences: a blame of one is a false blame).

Bounded for the suite (a few seconds in all); ``GRADCLI_FUZZ_SCALE=100`` runs a
hundred times as many cases (the nightly size).
"""

from __future__ import annotations

import os
import re
import warnings
from typing import Any

import numpy as np
import pytest
from test_random_expressions import VARIABLES, Expression, Generator, Node, draw

from gradcli.check.blame import blame_nodes
from gradcli.lang.compute import value_and_grad
from gradcli.lang.program import load
from gradcli.render.build import recording


def _scale() -> int:
    text = os.environ.get("GRADCLI_FUZZ_SCALE", "1")
    return int(text) if text.isdigit() and int(text) > 0 else 1


SCALE = _scale()
FORMS_CASES = 120 * SCALE
DIFF_CASES = 40 * SCALE
DIFF_MAX_NODES = 20  # SymPy's work grows fast with size: small expressions only
DIFF_SIMPLIFIED_NODES = 8  # and simplify's faster still: diff's own output for the smallest
DIFF_TIME_LIMIT = 1.0  # seconds per expression; slower ones are counted and skipped
BLAME_CASES = 120 * SCALE
FIRST_SEED = 13_000_000  # apart from test_random_expressions' seeds

FORMS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "^"}
COMPARISONS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}


WRAPS = ["exp", "sin", "sigmoid", "abs", "tanh", "erf", "sqrt", "log1p", "softplus", "cosh"]


def render_forms(node: Node, rng: np.random.Generator, functions: float = 0.8, wrap: Any = None) -> str:
    """``node`` as text, each operator written as its function (with probability ``functions``)
    or as the operator, parenthesised. With ``wrap`` (a generator seeded alike for the texts to
    compare), comparisons are passed through a function half the time: ``exp(ge(a, b))``, where
    a boolean turned into float16."""

    def r(kid: Node) -> str:
        return render_forms(kid, rng, functions, wrap)

    op, k = node.op, node.kids
    as_function = rng.random() < functions
    if op in ("var", "named"):
        return node.arg
    if op == "num":
        return node.text_arg
    if op in FORMS:
        return f"{op}({r(k[0])}, {r(k[1])})" if as_function else f"({r(k[0])}) {FORMS[op]} ({r(k[1])})"
    if op == "matmul":  # no function form
        return f"({r(k[0])}) @ ({r(k[1])})"
    if op == "neg":
        return f"neg({r(k[0])})" if as_function else f"(-({r(k[0])}))"
    if op == "cmp":
        a, b = r(k[0]), r(k[1])
        text = f"{COMPARISONS[node.arg]}({a}, {b})" if as_function else f"(({a}) {node.arg} ({b}))"
        if wrap is not None and wrap.random() < 0.5:
            text = f"{WRAPS[int(wrap.integers(len(WRAPS)))]}({text})"
        return text
    if op == "cond":
        then, c, otherwise = (r(kid) for kid in k)
        return f"where({c}, {then}, {otherwise})" if as_function else f"(({then}) if ({c}) else ({otherwise}))"
    if op == "call":
        args = [r(kid) for kid in k] + ([node.text_arg] if node.text_arg else [])
        return f"{node.arg}({', '.join(args)})"
    if op == "index":
        return f"({r(k[0])})[{node.text_arg}]"
    if op == "vector":
        return "[" + ", ".join(r(kid) for kid in k) + "]"
    raise AssertionError(op)


def text_in_forms(expr: Expression, rng: np.random.Generator, functions: float = 0.8, wrap: Any = None) -> str:
    parts = [f"{name} = {render_forms(node, rng, functions, wrap)}" for name, node in expr.statements[:-1]]
    return "; ".join([*parts, render_forms(expr.output, rng, functions, wrap)])


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


# --- function forms against operator forms ---------------------------------------------------------


def forms_problems(seed: int) -> list[str]:
    case = draw(seed)
    rng = np.random.default_rng(seed)
    names = case.expr.variables
    problems = []
    for wrapped in (False, True):
        operators = text_in_forms(case.expr, rng, 0.0, np.random.default_rng(seed) if wrapped else None)
        reference = value_and_grad(load(operators), case.values, names)
        for functions in (1.0, 0.5):
            text = text_in_forms(case.expr, rng, functions, np.random.default_rng(seed) if wrapped else None)
            try:
                got = value_and_grad(load(text), case.values, names)
            except Exception as exc:  # noqa: BLE001 - any failure is a finding
                problems.append(f"{text!r}: {type(exc).__name__}: {exc} (the operators: {operators!r})")
                continue
            same = _same(got.value, reference.value)
            if not same or not all(_same(got.gradient[n], reference.gradient[n]) for n in names):
                problems.append(
                    f"{text!r} gives {got.value!r}, {got.gradient}; {operators!r} gives "
                    f"{reference.value!r}, {reference.gradient}"
                )
    return problems


@pytest.mark.parametrize("part", range(4))
def test_function_forms_of_operators_agree_with_operator_forms(part):
    seeds = range(FIRST_SEED + part, FIRST_SEED + FORMS_CASES, 4)
    problems = [p for seed in seeds for p in forms_problems(seed)]
    assert not problems, "\n".join(problems[:20])


# --- diff against autograd ---------------------------------------------------------------------------

COLLIDING = {"x": "w_0", "y": "u_1", "z": "v_2"}  # names of elements of w, u, v


def _renamed(text: str, values: dict[str, np.ndarray]) -> tuple[str, dict[str, np.ndarray]]:
    for old, new in COLLIDING.items():
        text = re.sub(rf"\b{old}\b", new, text)
    return text, {COLLIDING.get(k, k): v for k, v in values.items()}


def diff_problems(seed: int, counts: dict[str, int]) -> list[str]:
    """diff's derivatives at the point against autograd's gradient ([] when they agree): SymPy's
    derivative of gradcli's translation as it is, and (small expressions) simplified, as diff
    prints it."""
    import sympy as sp

    from gradcli.check.symbolic import Skipped, _evaluate, time_limit
    from gradcli.lang.compute import symbolic_derivatives
    from gradcli.lang.symbolic import to_sympy

    gen = Generator(seed)
    case = draw(seed)
    if case.expr.nodes > DIFF_MAX_NODES:
        counts["too large"] += 1
        return []
    text = text_in_forms(case.expr, gen.rng, 0.5) if seed % 2 else case.expr.text
    values = dict(case.values)
    if seed % 4 < 2:
        text, values = _renamed(text, values)
    names = list(values)
    program = load(text)
    shapes = {n: np.shape(v) for n, v in values.items()}
    found: dict[str, dict[str, np.ndarray]] = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a Python warning from this path is a finding too
            with time_limit(DIFF_TIME_LIMIT):
                (output,), symbols = to_sympy(program.tree, shapes)
                found["unsimplified"] = {
                    n: np.array([sp.diff(output, s) for s in np.ravel(np.asarray(symbols[n], dtype=object))])
                    for n in names
                }
                if case.expr.nodes <= DIFF_SIMPLIFIED_NODES:
                    found["diff"] = symbolic_derivatives(program, names, shapes)
    except Skipped:
        counts["timed out"] += 1
    except Exception as exc:  # noqa: BLE001 - any failure is a finding
        return [f"diff {text!r}: {type(exc).__name__}: {exc}"]
    if not found:
        return []
    point = {}
    for name, value in values.items():
        for symbol, number in zip(np.asarray(symbols[name], dtype=object).reshape(-1), np.ravel(value)):
            point[symbol] = sp.Float(float(number), 30)
    gradient = value_and_grad(program, values, names).gradient
    problems = []
    for how, derivatives in found.items():
        counts[how] += 1
        for name in names:
            derivative = np.asarray(derivatives[name], dtype=object).reshape(-1)
            symbolic = np.array([_evaluate(sp.sympify(d), point) for d in derivative], dtype=float)
            autograd = np.ravel(gradient[name])
            scale = max(float(np.max(np.abs(autograd))), 1.0)
            defined = np.isfinite(symbolic)  # nan: SymPy's formula is undefined at the point (0/0)
            counts["undefined"] += int((~defined).sum())
            bad = defined & ~(np.abs(symbolic - autograd) <= 1e-8 * scale)
            if bad.any():
                problems.append(
                    f"{how} {text!r} at {values}: d/d{name} = {symbolic.tolist()}, autograd {autograd.tolist()}"
                )
    return problems


@pytest.mark.parametrize("part", range(2))
def test_diff_agrees_with_autograd_at_random_points(part):
    counts = {"unsimplified": 0, "diff": 0, "too large": 0, "timed out": 0, "undefined": 0}
    problems = []
    for seed in range(FIRST_SEED + 1_000_000 + part, FIRST_SEED + 1_000_000 + DIFF_CASES, 2):
        problems += diff_problems(seed, counts)
    assert not problems, "\n".join(problems[:20])
    assert counts["unsimplified"] >= DIFF_CASES // 8, counts


# --- --blame never blames a primitive of the table ----------------------------------------------------


def blame_point(seed: int) -> tuple[Expression, dict[str, np.ndarray]]:
    """An expression and a point: smooth, or full of ties, zeros and kinks."""
    gen = Generator(seed)
    while True:
        expr = gen.expression()
        if expr.variables:
            break
    values = {n: gen.rng.uniform(-1.5, 1.5, VARIABLES[n]) for n in expr.variables}
    mode = seed % 5
    if mode == 0:
        values = {n: np.round(v) for n, v in values.items()}
    elif mode == 1:
        values = {n: np.round(v * 2) / 2 for n, v in values.items()}
    elif mode == 2:
        values = {n: v * 10 for n, v in values.items()}
    elif mode == 3:
        values = {n: np.zeros_like(v) for n, v in values.items()}
    return expr, values


@pytest.mark.parametrize("part", range(2))
def test_blame_never_blames_a_primitive_of_the_table(part):
    problems = []
    for seed in range(FIRST_SEED + 2_000_000 + part, FIRST_SEED + 2_000_000 + BLAME_CASES, 2):
        expr, values = blame_point(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no ComplexWarning (erf) or other leak from the checks
            with np.errstate(all="ignore"), recording() as tape:
                load(expr.text).run(values, expr.variables)
            found, _ = blame_nodes(tape)
        if found is not None:
            problems.append(f"{expr.text!r} at { ({k: v.tolist() for k, v in values.items()}) }: {found}")
    assert not problems, "\n".join(problems[:20])


# --- what this hunt found, kept small -------------------------------------------------------------------


def test_blame_found_log_at_1_along_a_short_direction():
    """Richardson's rounds settled on steps too small to move log's input (0, error 0)."""
    text = "t0 = detach(log(1+w^2))\nlog(1+atan([u, v, v][1][1])**2)"
    values = {"w": np.array([-1.0, -1.0]), "v": np.array([-0.0, -0.0, 1.0]), "u": np.array([-0.0, 1.0, -1.0])}
    with recording() as tape:
        load(text).run(values, ["w", "u", "v"])
    assert blame_nodes(tape) == (None, 10)


def test_blame_found_softplus_at_infinite_inputs():
    """An infinite input makes every difference quotient meaningless: not judged."""
    text = "sum(log2(softplus(log2(exp(v/exp(A))))))"
    values = {
        "A": np.array([[-13.858007892600885, 2.6969466382336105, -2.1248573304059626],
                       [14.713418743654948, -12.537022895903725, -5.998037905498325]]),
        "v": np.array([-14.447251711175308, -7.043601859608728, 4.208554188482408]),
    }  # fmt: skip
    with np.errstate(all="ignore"), recording() as tape:
        load(text).run(values, ["A", "v"])
    found, _ = blame_nodes(tape)
    assert found is None
