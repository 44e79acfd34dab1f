"""Issue 36: ``gradcli why FILE.py:f`` (and ``gc.why(f, *args)``) says, for every input whose gradient
is None, exactly zero or not finite, the cause, the operation, the user's line and module, with the
values that make it so. Each cause of the issue's list has a case here, asserted on its cause, its
operation, its line in the user's file and its numbers, and checked against PyTorch's own gradient
(None, zero or not finite) so that a case can never diagnose a healthy gradient."""

from __future__ import annotations

import json
import textwrap

import pytest
from frameworks import need
from typer.testing import CliRunner

from gradcli.cli.app import app

runner = CliRunner()

CASES = textwrap.dedent(
    """
    import torch

    def unused(x, w):
        return (w * 2).sum()

    def detached(x, w):
        return (x.detach() * w).sum()

    def data(x, w):
        return (x.data * w).sum()

    def nograd(x, w):
        with torch.no_grad():
            y = x * 2
        return (y * w).sum()

    def item(x, w):
        return w.sum() * x.sum().item()

    def rebuilt(x, w):
        return (torch.tensor(x.tolist(), dtype=torch.float64) * w).sum()

    def argmax(x, w):
        return w[x.argmax()].sum()

    def rounded(x, w):
        return (torch.round(x) * w).sum()

    def cast(x, w):
        return (x.long() * w).sum()

    def compare(x, w):
        return ((x > 0) * w).sum()

    def sign(x, w):
        return (torch.sign(x) * w).sum()

    def relu_off(x, w):
        return torch.relu(x - 10).sum() + w.sum()

    def tanh_saturated(x, w):
        return torch.tanh(x * 100).sum() + w.sum()

    def clamped(x, w):
        return torch.clamp(x, 5, 6).sum() + w.sum()

    def log_negative(x, w):
        return torch.log(x).sum() + w.sum()

    def sqrt_at_zero(x, w):
        return torch.sqrt(x * 0).sum() + w.sum()

    def power_at_zero(x, w):
        return ((x * 0) ** 0.5).sum() + w.sum()

    def where_trick(x, w):
        return torch.where(x > 0, torch.sqrt(x), torch.zeros_like(x)).sum() + w.sum()

    def overwritten(x, w):
        y = x * 2
        y.zero_()
        return (y + w).sum()

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(2, 2).double()
            self.act = torch.nn.ReLU()

        def forward(self, x):
            return self.act(self.linear(x) - 100)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = Block()

        def forward(self, x):
            return self.mlp(x)

    torch.manual_seed(0)
    net = Net()

    def model(x, w):
        return net(x).sum() + w.sum()
    """
)


def _line(text: str) -> str:
    """``cases.py:N`` of the line holding ``text``."""
    (number,) = [i + 1 for i, line in enumerate(CASES.splitlines()) if text in line]
    return f"cases.py:{number}"


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    need("torch")
    folder = tmp_path_factory.mktemp("why")
    (folder / "cases.py").write_text(CASES)
    return folder / "cases.py"


def _why(cases, name, *extra):
    result = runner.invoke(app, ["why", f"{cases}:{name}", "--at", "x=[1,-2],w=[0.5,1.5]", *extra, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


#: name -> (gradient, cause, op, the text of its line, words the message holds)
EXPECTED = {
    "unused": ("None", "unused", None, None, "x is never used by the function"),
    "detached": ("None", "detach", "detach", "x.detach() * w", ".detach() or .data"),
    "data": ("None", "detach", "detach", "x.data * w", ".detach() or .data"),
    "nograd": ("None", "no_grad", "mul", "        y = x * 2", "torch.no_grad()"),
    "item": ("None", "item", "_local_scalar_dense", "x.sum().item()", "Python number (.item()"),
    "rebuilt": ("None", "rebuilt", "lift_fresh", "torch.tensor(x.tolist()", "made from plain values"),
    "argmax": ("None", "integer", "argmax", "w[x.argmax()]", "argmax returns int64 values"),
    "cast": ("None", "integer", "_to_copy", "x.long() * w", "_to_copy returns int64 values"),
    "compare": ("None", "integer", "gt", "(x > 0) * w", "gt returns bool values"),
    "rounded": ("zero", "flat", "round", "torch.round(x)", "round has derivative 0"),
    "sign": ("zero", "flat", "sign", "torch.sign(x)", "sign has derivative 0"),
    "relu_off": ("zero", "relu_off", "relu", "torch.relu(x - 10)", "its input is at most -9"),
    "tanh_saturated": ("zero", "saturated", "tanh", "torch.tanh(x * 100)", "|input| >= 100"),
    "clamped": ("zero", "clamped", "clamp", "torch.clamp(x, 5, 6)", "below its min 5 by at least 4"),
    "sqrt_at_zero": ("nan", "nonfinite_backward", "sqrt", "torch.sqrt(x * 0)", "1/(2 sqrt(x)) is inf at x = 0"),
    "power_at_zero": ("nan", "nonfinite_backward", "pow", "((x * 0) ** 0.5)", "fractional power's derivative is inf"),
    "where_trick": ("nan", "nonfinite_forward", "sqrt", "torch.where(x > 0", "where at cases.py:"),
    "overwritten": ("zero", "overwritten", "zero_", "y.zero_()", "overwrites in place"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_cause_is_named_with_its_operation_and_line(cases, name):
    gradient, cause, op, text, words = EXPECTED[name]
    found = _why(cases, name)
    (finding,) = [f for f in found["findings"] if f["input"] == "x"]
    assert (finding["gradient"], finding["cause"], finding["op"]) == (gradient, cause, op)
    assert finding["line"] == (_line(text) if text else None)
    assert words in finding["message"]
    assert found["healthy"] == ["w"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_gradient_said_is_pytorchs_own(cases, name):
    """A case is a real None, zero or non-finite gradient of PyTorch's (never a healthy one diagnosed)."""
    torch = need("torch")
    import importlib.util

    spec = importlib.util.spec_from_file_location("why_cases_module", cases)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([0.5, 1.5], dtype=torch.float64, requires_grad=True)
    (gx,) = torch.autograd.grad(getattr(module, name)(x, w), [x], allow_unused=True)
    kind = "None" if gx is None else "nan" if gx.isnan().any() else "zero" if (gx == 0).all() else "healthy"
    assert kind == EXPECTED[name][0]


def test_a_module_path_is_named(cases):
    found = _why(cases, "model")
    (finding,) = found["findings"]
    assert (finding["cause"], finding["op"], finding["scope"]) == ("relu_off", "relu", "net.mlp.act")
    assert finding["line"] == _line("return self.act(self.linear(x) - 100)")
    assert finding["values"]["input_max"] < -90


def test_a_non_finite_output_names_the_operation_that_made_it(cases):
    found = _why(cases, "log_negative")
    (finding,) = found["findings"]
    assert finding["input"] == "output"
    assert (finding["gradient"], finding["cause"], finding["op"]) == ("value nan", "nonfinite_forward", "log")
    assert "log of a negative number or of 0: input min -2, max 1" in finding["message"]
    assert found["healthy"] == ["x", "w"]


def test_the_terminal_text_and_wrt(cases):
    result = runner.invoke(app, ["why", f"{cases}:relu_off", "--at", "x=[1,-2],w=[0.5,1.5]"])
    assert result.exit_code == 0
    assert result.stdout == (
        f"x: gradient zero: relu at {_line('torch.relu(x - 10)')}: the ReLU is off for every element "
        "(its input is at most -9)\nw: gradient finite and not zero\n"
    )
    result = runner.invoke(app, ["why", f"{cases}:relu_off", "--at", "x=[1,-2],w=[0.5,1.5]", "--wrt", "w"])
    assert result.stdout == "w: gradient finite and not zero\n"


def test_the_library_face(cases):
    torch = need("torch")
    import gradcli as gc

    found = gc.why(lambda x: torch.clamp(x, 5, 6).sum(), torch.tensor([1.0, 2.0], dtype=torch.float64))
    (finding,) = found.findings
    assert (finding.input, finding.cause, finding.values["bounds"]) == ("x", "clamped", [5, 6])
    assert "below its min 5 by at least 3" in str(found)


JAX_CASES = textwrap.dedent(
    """
    import jax
    import jax.numpy as jnp

    def unused(x, w):
        return (w * 2).sum()

    def stopped(x, w):
        return (jax.lax.stop_gradient(x) * w).sum()

    def argmax(x, w):
        return w[jnp.argmax(x)]

    def rounded(x, w):
        return (jnp.round(x) * w).sum()

    def relu_off(x, w):
        return jax.nn.relu(x - 10).sum() + w.sum()

    def where_trick(x, w):
        return jnp.where(x > 0, jnp.sqrt(x), 0.0).sum() + w.sum()

    def sqrt_at_zero(x, w):
        return jnp.sqrt(x * 0).sum() + w.sum()

    @jax.jit
    def layer(x):
        return jnp.tanh(x * 100)

    def tanh_saturated(x, w):
        return layer(x).sum() + w.sum()
    """
)

#: JAX gives an input autograd cannot reach a zero gradient (PyTorch: None): the cause is the same
JAX_EXPECTED = {
    "unused": ("zero", "unused", None, None),
    "stopped": ("zero", "stop_gradient", "stop_gradient", "jax.lax.stop_gradient(x) * w"),
    "argmax": ("zero", "integer", "argmax", "w[jnp.argmax(x)]"),
    "rounded": ("zero", "flat", "round", None),
    "relu_off": ("zero", "relu_off", "relu", "jax.nn.relu(x - 10)"),
    "where_trick": ("nan", "nonfinite_forward", "sqrt", "jnp.where(x > 0"),
    "sqrt_at_zero": ("nan", "nonfinite_backward", "sqrt", "jnp.sqrt(x * 0)"),
    "tanh_saturated": ("zero", "saturated", "tanh", "return jnp.tanh(x * 100)"),
}


@pytest.fixture(scope="module")
def jax_cases(tmp_path_factory):
    need("jax")
    folder = tmp_path_factory.mktemp("why_jax")
    (folder / "jcases.py").write_text(JAX_CASES)
    return folder / "jcases.py"


@pytest.mark.parametrize("name", sorted(JAX_EXPECTED))
def test_jax_causes_are_named_with_their_equation_and_line(jax_cases, name):
    gradient, cause, op, text = JAX_EXPECTED[name]
    result = runner.invoke(app, ["why", f"{jax_cases}:{name}", "--at", "x=[1,-2],w=[0.5,1.5]", "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    (finding,) = [f for f in found["findings"] if f["input"] == "x"]
    assert (finding["gradient"], finding["cause"], finding["op"]) == (gradient, cause, op)
    if text is not None:
        (number,) = [i + 1 for i, line in enumerate(JAX_CASES.splitlines()) if text in line]
        assert finding["line"] == f"jcases.py:{number}"
    assert found["framework"] == "JAX" and found["healthy"] == ["w"]
