"""Issue 36: ``--blame`` of backward hooks (a ``register_hook`` that scales a gradient, a module's
``register_full_backward_hook`` that replaces ``grad_input``) names the hook, its module path and its
lines; a hook that only reads is not blamed."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from frameworks import need
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli.app import app

MODEL = """
import torch
from torch import nn

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return torch.tanh(self.lin(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(Block(), Block(), Block())

    def forward(self, x):
        return self.encoder(x)


model = Net().double()
seen = []


def scale(grad):  # the scaling hook
    return grad * 1.0001


def register(module, args, output):
    output.register_hook(scale)  # registered here


def log(module, grad_input, grad_output):  # the logging hook
    seen.append(float(grad_output[0].norm()))


def halve(module, grad_input, grad_output):  # the wrong full backward hook
    return (grad_input[0] * 0.5,)


def f(x):
    return model(x).sum()
"""
X = np.array([0.1, 0.2, 0.3])


def _model(tmp_path: Path, name: str, *hooks: str) -> tuple[Path, object]:
    """The model file with ``hooks`` (lines of Python run after it), written and imported."""
    path = tmp_path / f"{name}.py"
    path.write_text(MODEL + "\n".join(hooks) + "\n")
    sys.path.insert(0, str(tmp_path))
    try:
        sys.modules.pop(name, None)
        module = __import__(name)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)
    return path, module


def _line(path: Path, marker: str) -> str:
    number = next(k for k, text in enumerate(path.read_text().splitlines(), 1) if marker in text)
    return f"{path.name}:{number}"


def _true_gradient(module: object) -> np.ndarray:
    """d/dx of the model without any hook: PyTorch's own, on a copy of the model."""
    import copy

    torch = need("torch")
    clean = copy.deepcopy(module.model)  # (deepcopy keeps hooks: cleared)
    for sub in clean.modules():
        sub._backward_hooks.clear()
        sub._forward_hooks.clear()
    x = torch.tensor(X, requires_grad=True)
    (g,) = torch.autograd.grad(clean(x).sum(), x)
    return g.numpy()


def test_a_tensor_hook_scaling_by_1e4_is_blamed_at_its_module_and_line(tmp_path):
    need("torch")
    path, module = _model(tmp_path, "scaled", "model.encoder[1].register_forward_hook(register)")
    result = gc.check(module.f, X, blame=True)
    assert not result.ok
    found = result.blame
    assert (found.hook, found.op, found.scope, found.node) == ("tensor hook", "scale", "model.encoder.1", "hook 1")
    assert found.line == _line(path, "the scaling hook")
    assert found.registered == _line(path, "registered here")
    # with the hook the gradient is 1.0001 times the true one along the direction; without it, the true one
    assert found.autograd == pytest.approx(found.without * 1.0001, rel=1e-9)
    assert found.without == pytest.approx(found.numeric, rel=1e-8)
    np.testing.assert_allclose(result.gradient["x"], _true_gradient(module) * 1.0001, rtol=1e-12)
    assert result.notes[-1].startswith("--blame checked 0 custom torch.autograd.Function calls")
    assert ", and 1 backward hook (" in result.notes[-1]


def test_a_full_backward_hook_returning_a_wrong_grad_input_is_blamed(tmp_path):
    need("torch")
    path, module = _model(
        tmp_path, "halved",
        "model.encoder[0].register_full_backward_hook(log)", "model.encoder[2].lin.register_full_backward_hook(halve)",
    )  # fmt: skip
    result = gc.check(module.f, X, blame=True)
    found = result.blame
    assert (found.hook, found.op, found.scope, found.line) == (
        "full backward hook", "halve", "model.encoder.2.lin", _line(path, "the wrong full backward hook")
    )  # fmt: skip
    assert found.autograd == pytest.approx(found.without * 0.5, rel=1e-9)
    np.testing.assert_allclose(result.gradient["x"], _true_gradient(module) * 0.5, rtol=1e-12)
    assert module.seen  # the logging hook ran, and is not the one blamed
    assert result.to_dict()["blame"]["hook"] == "full backward hook"
    # the hooks are put back as they were: the model's own functions, not gradcli's watchers
    assert list(module.model.encoder[2].lin._backward_hooks.values()) == [module.halve]


def test_a_logging_hook_is_not_blamed(tmp_path):
    need("torch")
    _, module = _model(tmp_path, "logged", "model.encoder[1].register_full_backward_hook(log)")
    result = gc.check(module.f, X, blame=True)
    assert result.ok and result.blame is None
    assert len(module.seen) > 0
    assert "and 1 backward hook (" in result.notes[-1]
    np.testing.assert_allclose(result.gradient["x"], _true_gradient(module), rtol=1e-12)


def test_check_blame_on_the_command_line_exits_1_with_the_hooks_line(tmp_path):
    need("torch")
    path, _ = _model(tmp_path, "cli_scaled", "model.encoder[1].register_forward_hook(register)")
    result = CliRunner().invoke(app, ["check", f"{path}:f", "--at", "x=[0.1,0.2,0.3]", "--blame"])
    assert result.exit_code == 1, result.output
    blame = next(line for line in result.output.splitlines() if line.startswith("blame: "))
    assert blame.startswith(
        f"blame: the tensor hook scale on model.encoder.1 (defined at {_line(path, 'the scaling hook')}, "
        f"registered at {_line(path, 'registered here')}) changes the gradient: along a random direction, "
        "PyTorch's gradient gives "
    )
    assert result.output.splitlines()[-1].startswith("MISMATCH: d/dx[")
    drawn = CliRunner().invoke(app, ["graph", f"{path}:f", "--at", "x=[0.1,0.2,0.3]", "--blame", "--format", "text"])
    assert drawn.exit_code == 0, drawn.output
    assert drawn.stderr.splitlines()[-1] == blame  # (no node of the graph is the hook's: none marked)


# --- gradcli why of a program of the language ---------------------------------------------------------------------

#: (expression, point, the exact lines gradcli why prints)
WHY = {
    "issue": ("sqrt(x) * 0 + floor(w)", "x=0,w=1.5", [
        "x: gradient nan: sqrt at column 1: every value is finite, but its derivative is not at input 0 "
        "(sqrt's derivative 1/(2 sqrt(x)) is inf at x = 0)",
        "w: gradient zero: floor at column 15: floor has derivative 0 wherever it has one",
    ]),
    "unused": ("a = x^2; w", "x=1,w=2", [
        "x: gradient None: x is used, but the output is not computed from it",
        "w: gradient finite and not zero",
    ]),
    "round_sign": ("sign(x) + round(w)", "x=1,w=2.2", [
        "x: gradient zero: sign at column 1: sign has derivative 0 wherever it has one",
        "w: gradient zero: round at column 11: round has derivative 0 wherever it has one",
    ]),
    "comparison": ("(x > 0) * w", "x=1,w=2", [
        "x: gradient None: gt at column 4: gt is a comparison: its values (0 or 1) carry no gradient",
        "w: gradient finite and not zero",
    ]),
    "argmax": ("w * argmax([x, 2])", "x=1,w=2", [
        "x: gradient None: argmax at column 5: argmax returns int64 values: no gradient flows through it",
        "w: gradient finite and not zero",
    ]),
    "detach": ("detach(x) * w", "x=1,w=2", [
        "x: gradient None: detach at column 1: it is detached (detach(...)): autograd does not follow it",
        "w: gradient finite and not zero",
    ]),
    "relu": ("relu(x - 10) + w", "x=[1,-2],w=2", [
        "x: gradient zero: relu at column 1: the ReLU is off for every element (its input is at most -9)",
        "w: gradient finite and not zero",
    ]),
    "clamp": ("clamp(x, 5, 6) + w", "x=1,w=2", [
        "x: gradient zero: clamp at column 1: the clamp is at its bound: every element is below its min 5 by at least 4",
        "w: gradient finite and not zero",
    ]),
    "tanh": ("tanh(x * 100) + w", "x=1,w=2", [
        "x: gradient zero: tanh at column 1: tanh is saturated: its derivative is 0 in float64 for every element "
        "(|input| >= 100; 100)",
        "w: gradient finite and not zero",
    ]),
    "log_negative": ("log(x) + w", "x=-1,w=2", [
        "output: value nan: log at column 1: it makes nan from finite inputs (log of a negative number or of 0: input -1)",
        "x, w: gradient finite and not zero",
    ]),
    "where_trick": ("where(x > 0, sqrt(x), 0) + w", "x=-1,w=2", [
        "x: gradient nan: sqrt at column 14: it makes nan from finite inputs (sqrt of a negative number: input -1); "
        "where at column 1 drops that nan from the value, but not from the gradient (0 * nan = nan): compute sqrt "
        "on a safe input in the branch not taken",
        "w: gradient finite and not zero",
    ]),
    "power_at_zero": ("x^0.5 * 0 + w", "x=0,w=2", [
        "x: gradient nan: pow at column 2: every value is finite, but its derivative is not at input 0 "
        "(a fractional power's derivative is inf at 0)",
        "w: gradient finite and not zero",
    ]),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(WHY))
def test_why_names_each_cause_in_a_gradcli_program(case):
    expression, point, lines = WHY[case]
    result = CliRunner().invoke(app, ["why", expression, "--at", point])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == lines


def test_why_of_a_gradcli_program_gives_gradclis_own_gradient():
    """The gradients the lines above say are gradcli's own: nan, zero, None."""
    x, w = gc.tensor(0.0, requires_grad=True), gc.tensor(1.5, requires_grad=True)
    gx, gw = gc.grad(gc.sqrt(x) * 0 + gc.floor(w), [x, w])
    assert np.isnan(gx.item()) and gw.item() == 0.0
    x = gc.tensor(1.0, requires_grad=True)
    assert not (gc.detach(x) * 2).requires_grad  # no gradient function: autograd's None
    found = gc.why("clamp(x, 5, 6) + w", x=[1.0, 2.0], w=2.0)
    (finding,) = found.findings
    assert (finding.input, finding.cause, finding.op, finding.line) == ("x", "clamped", "clamp", "column 1")
    assert finding.values == {"input_min": 1.0, "input_max": 2.0, "bounds": [5, 6]}
    assert found.to_dict()["framework"] == "gradcli" and found.healthy == ["w"]


def test_why_of_a_multi_line_program_names_the_line():
    result = CliRunner().invoke(app, ["why", "a = x * 2\nb = relu(a - 10)\nb + w", "--at", "x=1,w=2", "--json"])
    assert result.exit_code == 0, result.output
    import json

    (finding,) = json.loads(result.stdout)["findings"]
    assert (finding["cause"], finding["op"], finding["line"]) == ("relu_off", "relu", "line 2, column 5")
    assert finding["values"] == {"input_min": -8.0, "input_max": -8.0}


# --- diff without SymPy where SymEngine's text is SymPy's road's ----------------------------------------------------

QUICK = ["x^2", "x^3 * y - 4*y", "-x^2", "2*x", "B*a^2", "5 - x^2", "x10*x2*x1", "xy*x^2 - 100*xy", "(x^3)^2 * w",
         "sin(x)", "cos(x)", "exp(x)", "sinh(x) * y^2", "-3*x^2*cosh(y)", "4*x - cos(x)", "2 - exp(x)", "x*y*sin(z)"]  # fmt: skip
QUICK_FIRST = {"B*a^2": "B", "xy*x^2 - 100*xy": "xy", "x10*x2*x1": "x10"}
SYMPYS = [
    "tan(x)",
    "sin(2*x)",
    "exp(-x)",
    "x^2*sin(x)",
    "sin(x)*cos(x)",
    "log(x)",
    "(x+w)*(w+1)",
    "x^2*y^3/3",
    "pi*x",
    "x^0.5",
    "abs(x)",
    "x^2/y",
    "4*x - x^2",
    "a = x^2; a*y",
]


@pytest.mark.parametrize("text", QUICK)
def test_diff_prints_symengines_derivative_as_sympys_road_does(text, monkeypatch):
    from gradcli.cli import commands

    with monkeypatch.context() as patched:  # SymPy's road, as before
        patched.setattr(commands, "quick_texts", lambda *a: None)
        before = CliRunner().invoke(app, ["diff", text])
    monkeypatch.setattr(commands, "_symbolic", lambda *a: pytest.fail("SymPy's road was taken"))
    result = CliRunner().invoke(app, ["diff", text])
    assert result.exit_code == before.exit_code == 0, result.output
    assert result.stdout == before.stdout and result.stderr == before.stderr == ""
    assert result.stdout.startswith(f"d/d{QUICK_FIRST.get(text, 'x')}")


@pytest.mark.parametrize("text", SYMPYS)
def test_what_symengine_does_not_print_as_sympy_goes_to_sympy(text):
    from gradcli.lang.compute import quick_texts
    from gradcli.lang.program import load

    assert quick_texts(load(text), None) is None


def test_diff_with_a_point_or_json_keeps_sympys_road(monkeypatch):
    result = CliRunner().invoke(app, ["diff", "x^3", "--at", "x=2"])
    assert result.stdout == "d/dx = 3*x^2 = 12\n"
    result = CliRunner().invoke(app, ["diff", "x^3", "--json"])
    assert result.stdout.startswith('{"derivative": {"x": "3*x^2"}')
