"""Issue 36: the library's face of ``gradcli check``: ``gc.check(f, *args, blame=...)`` for an
expression, a gradcli function and a torch or JAX function, returning the verdict the command gives;
``gc.testing.assert_grad_close`` takes a torch function and its tensors (it refused them)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from frameworks import need

import gradcli as gc
from gradcli.check import check as check_program

ROOT = Path(__file__).resolve().parent.parent
POINT = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])


def test_an_expression_is_checked_at_keywords():
    result = gc.check("x^2 * y", x=2, y=3)
    assert result.ok and result.gradient == {"x": 12.0, "y": 4.0}
    assert set(result.checks) == {"sympy", "finite_difference", "complex_step"}
    wrong = gc.check("x^2 * y", x=2, y=3, expect={"x": "2*x"})
    assert not wrong.ok and wrong.checks["expect"].ok is False


def test_the_package_stays_a_package():
    assert callable(gc.check) and gc.check.check is check_program  # gradcli.check.check(program, values)


def test_a_gradcli_function_and_its_arguments_by_position():
    result = gc.check(lambda x, w: gc.sin(x) * w, 0.5, 2.0)
    assert result.ok
    np.testing.assert_allclose([result.gradient["x"], result.gradient["w"]], [2 * np.cos(0.5), np.sin(0.5)])
    with pytest.raises(TypeError, match="takes 2 inputs"):
        gc.check(lambda x, w: x * w, 1.0, 2.0, 3.0)
    with pytest.raises(TypeError, match="takes the point as keywords"):
        gc.check("x^2", 1.0)


def test_a_torch_model_with_a_wrong_custom_function_is_blamed_by_name():
    torch = need("torch")
    spec = importlib.util.spec_from_file_location("custom_functions", ROOT / "examples/torch/custom_functions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = gc.check(module.f, torch.tensor(POINT), blame=True)
    assert not result.ok and result.framework == "torch"
    assert result.blame is not None and "SoftplusBackward" in result.blame.text()
    assert "called in model at custom_functions.py:" in result.blame.text()
    assert result.verdict().startswith("MISMATCH: d/dx[0,0]: PyTorch")


def test_a_jax_function_is_checked_with_jaxs_numbers():
    need("jax")
    import jax.numpy as jnp

    result = gc.check(lambda x: jnp.sum(jnp.tanh(x) * x), np.array([0.3, -0.2]))
    assert result.ok and result.framework == "jax"
    x = np.array([0.3, -0.2])
    np.testing.assert_allclose(result.gradient["x"], np.tanh(x) + x / np.cosh(x) ** 2, rtol=1e-15)


def test_assert_grad_close_takes_torch_tensors_and_finds_a_wrong_backward():
    torch = need("torch")

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**2

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x  # wrong: 2x

    x = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64, requires_grad=True)
    gc.testing.assert_grad_close(lambda x: torch.sin(x) * x, x)
    with pytest.raises(AssertionError, match=r"d out\[2\]/d in\[2\] is 6.0 by autograd but 4.0"):
        gc.testing.assert_grad_close(lambda x: Twice.apply(x), x)
    w = torch.tensor([1.0, 2.0], dtype=torch.float64)  # no requires_grad: held constant
    gc.testing.assert_grad_close(lambda x, w: (x[:2] * w).sum(), (x, w))


def test_the_result_prints_as_the_command_does_in_a_pipe():
    from typer.testing import CliRunner

    from gradcli.cli.app import app

    shown = CliRunner().invoke(app, ["check", "x^2 * y", "--at", "x=2,y=3"]).stdout
    assert str(gc.check("x^2 * y", x=2, y=3)) + "\n" == shown
    assert shown.splitlines()[-1] == (
        "OK: autograd agrees with sympy, finite differences, complex step (largest relative error 0)"
    )


def test_version_is_answered_without_typer_and_is_the_packages():
    """``gradcli --version`` takes main's short road (typer's import took longer than the answer)."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom gradcli.cli import main\nsys.argv = ['gradcli', '--version']\nmain()\n"
        "print('typer' in sys.modules, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.stdout, done.stderr) == (f"gradcli {gc.__version__}\n", "False\n")
    tomllib = pytest.importorskip(
        "tomllib" if sys.version_info >= (3, 11) else "tomli", reason="tomli reads TOML before 3.11"
    )
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"] == gc.__version__


def test_a_function_naming_no_framework_is_told_by_the_tensors_it_is_given():
    """framework_of reads the values given first (testing, gc.check and gc.why share it)."""
    torch = need("torch")
    from gradcli.lang.frameworks import framework_of

    f = lambda x: (x * x).sum()  # noqa: E731  (refers to nothing of torch's)
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert (framework_of(f), framework_of(f, [x]), framework_of(f, [gc.tensor(1.0)])) == (None, "torch", None)
    assert gc.check(f, x).framework == "torch" and gc.why(f, x).framework == "PyTorch"
    gc.testing.assert_grad_close(f, x.requires_grad_(True))
