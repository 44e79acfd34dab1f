"""Where did the NaN come from: gc.detect_anomaly() and the CLI's non-finite warnings."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli.app import app


def test_backward_names_the_first_node_its_inputs_and_the_line_that_made_it():
    x = gc.tensor(0.0, requires_grad=True)
    with pytest.raises(RuntimeError) as info, gc.detect_anomaly():
        y = gc.sqrt(x) * 2  # the line named
        y.backward()
    message = str(info.value)
    assert message.startswith("Function 'SqrtBackward0' returned inf values in its 0th output.")
    assert "Its inputs: 0." in message
    assert "test_anomaly.py:" in message and "y = gc.sqrt(x) * 2" in message


def test_a_node_handed_a_non_finite_gradient_is_not_blamed():
    v = gc.tensor([1.0, 0.0, 4.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"^Function 'SqrtBackward0' returned nan values"), gc.detect_anomaly():
        (gc.sqrt(v) * v).sum().backward()  # 0 * inf = nan inside sqrt's rule; Mul and Sum stay finite


def test_the_forward_pass_warns_at_the_first_operation_that_made_a_nan():
    x = gc.tensor(-1.0, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught, gc.detect_anomaly():
        warnings.simplefilter("always")
        y = gc.log(x) + 1
        z = y * 2
        z.backward()
    ours = [w for w in caught if "gradcli anomaly" in str(w.message)]
    assert len(ours) == 1
    assert str(ours[0].message) == (
        "gradcli anomaly: log (LogBackward0) gave nan in the forward pass. Its inputs: -1. "
        f"It was made at {__file__}:{ours[0].lineno} (y = gc.log(x) + 1)."
    )
    assert ours[0].filename == __file__


def test_off_by_default_and_restored_after_the_block_and_as_a_decorator():
    assert not gc.is_anomaly_enabled()
    x = gc.tensor(0.0, requires_grad=True)
    gc.sqrt(x).backward()  # no anomaly mode: IEEE values, no error
    assert x.grad.item() == np.inf

    @gc.detect_anomaly()
    def run():
        assert gc.is_anomaly_enabled()
        gc.sqrt(gc.tensor(0.0, requires_grad=True)).backward()

    with pytest.raises(RuntimeError, match="SqrtBackward0"):
        run()
    assert not gc.is_anomaly_enabled()


def test_check_nan_false_lets_non_finite_values_through():
    x = gc.tensor(0.0, requires_grad=True)
    with gc.detect_anomaly(check_nan=False):
        gc.sqrt(x).backward()
    assert x.grad.item() == np.inf


def test_finite_graphs_run_the_same_with_anomaly_mode_on():
    x = gc.tensor([0.5, 1.5], requires_grad=True)
    with gc.detect_anomaly():
        (gc.sin(x) * gc.exp(x)).sum().backward()
    expected = np.cos([0.5, 1.5]) * np.exp([0.5, 1.5]) + np.sin([0.5, 1.5]) * np.exp([0.5, 1.5])
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-15)


# --- the CLI names the expression ---------------------------------------------------------------

CASES = [
    ("log(x)*2 + y", "x=-1,y=1", "warning: non-finite value: 'log(x)' at column 1 gave nan from input -1\n"),
    ("x/y", "x=1,y=0", "warning: non-finite value: 'x/y' at column 1 gave inf from inputs 1, 0\n"),
    ("sinh(x)", "x=-1e5", "warning: non-finite value: 'sinh(x)' at column 1 gave -inf from input -100000\n"),
    (
        "sqrt(x)*y",
        "x=0,y=1",
        "warning: non-finite gradient: the derivative of 'sqrt(x)' at column 1 (SqrtBackward0) gave inf from input 0\n",
    ),
    (
        "a = x - x; sqrt(a) + x",
        "x=1",
        "warning: non-finite gradient: the derivative of 'sqrt(a)' at column 12 (SqrtBackward0) gave inf from input 0\n",
    ),
]


@pytest.mark.parametrize("expression, point, warning", CASES, ids=[c[0] for c in CASES])
def test_eval_warns_naming_the_expression_and_its_inputs(expression, point, warning):
    result = CliRunner().invoke(app, ["eval", expression, "--at", point])
    assert result.exit_code == 0
    assert result.stderr == warning


def test_check_names_the_node_whose_derivative_is_not_finite():
    result = CliRunner().invoke(app, ["check", "sqrt(x)*y", "--at", "x=0,y=1"])
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-1] == (
        "FAILED: the gradient with respect to x is not finite: inf "
        "(the derivative of 'sqrt(x)' at column 1 (SqrtBackward0) gave inf from input 0)"
    )
