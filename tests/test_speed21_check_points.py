"""check's points on the flat road (issue 21): one long scalar expression evaluated at the finite
differences' and the complex step's points by its postfix code gives the replay's numbers, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import gradcli as gc
from gradcli.autograd.forward import key
from gradcli.autograd.replay import replay
from gradcli.check import check
from gradcli.check.run import Recorded
from gradcli.lang.program import load

NAMES = "abcdfghjkm"


def _long_text(seed, functions=("sin", "cos", "exp", "tanh", "log1p", "sqrt", "abs", "sigmoid", "atan")):
    rng = np.random.default_rng(seed)
    terms = [
        f"{functions[rng.integers(len(functions))]}({rng.choice(list(NAMES))}*{rng.uniform(0.1, 1):.3f} - 2^-3)"
        f"*{rng.choice(list(NAMES))}/(1+{rng.choice(list(NAMES))}^2)"
        for _ in range(200)
    ]
    return " + ".join(terms) + " - pi*e + -(3*2)"


def _values():
    return {v: np.asarray(0.1 * (i + 1)) for i, v in enumerate(NAMES)}


def _replayed(recorded, points):
    batched = {key(t): part for t, part in zip(recorded.inputs, recorded.split(points))}
    return np.asarray(replay(recorded.tape, batched)[key(recorded.scalar)]).reshape(-1, 1)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("kind", ["real", "complex"])
def test_points_on_the_flat_road_are_the_replays_bits(seed, kind, monkeypatch):
    program = load(_long_text(seed))
    assert program.flat is not None
    recorded = Recorded(program, _values(), list(NAMES), None)
    rng = np.random.default_rng(seed)
    points = recorded.x0 + rng.normal(size=(40, len(NAMES))) * 0.3
    if kind == "complex":
        points = points + 1e-20j * rng.normal(size=points.shape)
    calls = []
    real = type(program.flat).at_points
    monkeypatch.setattr(type(program.flat), "at_points", lambda self, v: calls.append(1) or real(self, v))
    found = recorded.evaluate(points)
    assert calls  # the flat road was asked
    assert found.shape == (40, 1) and found.dtype == points.dtype
    assert found.tobytes() == _replayed(recorded, points).tobytes()


def test_complex_points_take_the_flat_road_whose_rows_have_no_continuation():
    """The replay evaluates complex points through a row's continuation (norm's); the flat road
    calls forward functions, so its tables refuse a row that has one, and complex points run."""
    from gradcli.lang import flat as flat_module

    flat_module._tables = None
    tables = flat_module.tables()  # builds and checks the rows
    assert tables["functions"]
    points = {v: np.array([0.5 + 1e-20j, 0.7]) for v in NAMES}
    found = load(_long_text(4, functions=("sin", "abs", "sqrt"))).flat.at_points(points)
    assert found is not None and found.dtype == np.complex128 and found.shape == (2,)


def test_values_the_flat_road_does_not_take_go_to_the_replay():
    flat = load(_long_text(5)).flat
    columns = {v: np.array([0.5, 0.7]) for v in NAMES}
    assert flat.at_points({**columns, "a": np.array([[0.5, 0.7]])}) is None  # not 1-d
    assert flat.at_points({**columns, "a": np.asarray(3)}) is None  # an integer
    assert flat.at_points({**columns, "a": np.array([0.5, 0.7], dtype=np.float32)}) is None  # not float64
    assert flat.at_points({v: columns[v] for v in NAMES[1:]}) is None  # "a" missing


def test_check_on_a_long_expression_agrees_with_autograd():
    program = load(_long_text(6, functions=("sin", "cos", "exp", "tanh", "log1p")))
    result = check(program, _values(), methods=["fd", "complex"])
    assert set(result.checks) == {"finite_difference", "complex_step"}
    assert all(c.ok for c in result.checks.values()), result.verdict()
    evaluation = program.run(_values(), list(NAMES))
    grads = [g.item() for g in gc.grad(evaluation.outputs[0], [evaluation.inputs[v] for v in NAMES])]
    fd = [float(result.checks["finite_difference"].values[v]) for v in NAMES]
    complex_step = [float(result.checks["complex_step"].values[v]) for v in NAMES]
    np.testing.assert_allclose(fd, grads, rtol=1e-6)
    np.testing.assert_allclose(complex_step, grads, rtol=1e-13)
