"""Issue 36: ``gradcli why FILE.py:f`` and ``gc.why(f, *args)`` for a Python function computing with
gradcli's own tensors. Each cause gradcli's library can produce has a case, asserted on its cause, its
operation, its line in the user's file and its numbers, and checked against gradcli's own gradient
(None, zero or not finite) so that a case can never diagnose a healthy gradient. The analysis is the
torch road's (check/why.py); only the reading of the run is gradcli's (lang/gradcli_flow.py)."""

from __future__ import annotations

import importlib.util
import json
import textwrap

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli.app import app

runner = CliRunner()
AT = "x=[1,-2],w=[0.5,1.5]"

CASES = textwrap.dedent(
    """
    import numpy as np
    import gradcli as gc

    SCALE = gc.tensor([2.0, 3.0])

    def unused(x, w):
        return (w * 2).sum()

    def detached(x, w):
        return (x.detach() * w).sum()

    def data(x, w):
        return (x.data * w).sum()

    def nograd(x, w):
        with gc.no_grad():
            y = x * 2
        return (y * w).sum()

    def item(x, w):
        return w.sum() * x.sum().item()

    def as_float(x, w):
        return w.sum() * float(x.sum())

    def rebuilt(x, w):
        return (gc.tensor(x.tolist()) * w).sum()

    def numpy_back(x, w):
        return (gc.tensor(x.detach().numpy() * 2) * w).sum()

    def argmax(x, w):
        return w[x.argmax()].sum()

    def cast(x, w):
        return (x.to(gc.int64) * w).sum() + x.long().sum()

    def compare(x, w):
        return ((x > 0) * w).sum()

    def rounded(x, w):
        return (gc.round(x) * w).sum()

    def floored(x, w):
        return (x.floor() * w).sum()

    def sign(x, w):
        return (gc.sign(x) * w).sum()

    def relu_off(x, w):
        return gc.relu(x - 10).sum() + w.sum()

    def tanh_saturated(x, w):
        return gc.tanh(x * 100).sum() + w.sum()

    def sigmoid_saturated(x, w):
        return (x * 1000).sigmoid().sum() + w.sum()

    def clamped(x, w):
        return gc.clamp(x, 5, 6).sum() + w.sum()

    def clamped_max(x, w):
        return x.clamp(max=-3).sum() + w.sum()

    def sqrt_at_zero(x, w):
        return gc.sqrt(x * 0).sum() + w.sum()

    def power_at_zero(x, w):
        return ((x * 0) ** 0.5).sum() + w.sum()

    def where_trick(x, w):
        return gc.where(x > 0, gc.sqrt(x), gc.zeros_like(x)).sum() + w.sum()

    def overwritten(x, w):
        y = x * 2
        y.zero_()
        return (y + w).sum()

    def assigned(x, w):
        y = x * 2
        y[:] = 1.0
        return (y * w).sum()

    def helper(h):
        return gc.relu(h * SCALE - 100)

    def through_helper(x, w):
        return helper(x).sum() + w.sum()

    class Halved(gc.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 0

    def custom(x, w):
        return Halved.apply(x).sum() + w.sum()

    def loop(x, w):
        total = 0
        for a in x:
            total = total + gc.relu(a - 10)
        return total + w.sum()

    def never_selected(x, w):
        return gc.maximum(x, w * 0 + 10).sum() + w.sum()

    def times_zero(x, w):
        return (x * 0).sum() + w.sum()

    def norm_at_zero(x, w):
        return gc.norm(x * 0) + w.sum()

    def times_log_zero(x, w):
        return (x * gc.log(w * 0)).sum()

    @gc.no_grad()
    def tripled(h):
        return h * 3

    def decorated(x, w):
        return (tripled(x) * w).sum()

    def grad_off(x, w):
        with gc.set_grad_enabled(False):
            y = gc.exp(x)
        return (y * w).sum()

    def asarray(x, w):
        return (gc.tensor(np.asarray(x) * 2) * w).sum()

    def scaled_in_place(x, w):
        y = x * 1
        y *= 0
        return (y + w).sum()

    def copied(x, w):
        y = x * 1
        y.copy_(w)
        return (y * w).sum()

    def from_float(x, w):
        return gc.tensor(float(x.sum())) * w.sum()

    def log_negative(x, w):
        return gc.log(x).sum() + w.sum()

    def divided(x, w):
        return (x / (w - w)).sum()

    def healthy(x, w):
        return (gc.tanh(x) * w).sum()

    def raises(x, w):
        return x.nope()
    """
)


def _line(text: str) -> str:
    """``cases.py:N`` of the line holding ``text``."""
    (number,) = [i + 1 for i, line in enumerate(CASES.splitlines()) if text in line]
    return f"cases.py:{number}"


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    folder = tmp_path_factory.mktemp("whypy")
    (folder / "cases.py").write_text(CASES)
    return folder / "cases.py"


@pytest.fixture(scope="module")
def module(cases):
    spec = importlib.util.spec_from_file_location("whypy_cases_module", cases)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def _why(cases, name, *extra):
    result = runner.invoke(app, ["why", f"{cases}:{name}", "--at", AT, *extra, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


#: name -> (gradient, cause, op, the text of its line, words the message holds)
EXPECTED = {
    "unused": ("None", "unused", None, None, "x is never used by the function"),
    "detached": ("None", "detach", "detach", "x.detach() * w", "it is detached (.detach() or .data)"),
    "data": ("None", "detach", "detach", "x.data * w", "it is detached (.detach() or .data)"),
    "nograd": ("None", "no_grad", "mul", "        y = x * 2", "mul runs under gc.no_grad()"),
    "item": ("None", "item", "item", "x.sum().item()", "read as a Python number (.item(), float() or int())"),
    "as_float": ("None", "item", "item", "w.sum() * float(x.sum())", "read as a Python number"),
    "rebuilt": ("None", "rebuilt", "tolist", "gc.tensor(x.tolist())", "values are read out (.tolist())"),
    "numpy_back": ("None", "detach", "detach", "x.detach().numpy()", "made of plain values at cases.py:"),
    "argmax": ("None", "integer", "argmax", "w[x.argmax()]", "argmax returns int64 values"),
    "cast": ("None", "integer", "to", "x.to(gc.int64) * w", "to returns int64 values"),
    "compare": ("None", "integer", "gt", "(x > 0) * w", "gt returns bool values"),
    "rounded": ("zero", "flat", "round", "gc.round(x)", "round has derivative 0"),
    "floored": ("zero", "flat", "floor", "x.floor()", "floor has derivative 0"),
    "sign": ("zero", "flat", "sign", "gc.sign(x)", "sign has derivative 0"),
    "relu_off": ("zero", "relu_off", "relu", "gc.relu(x - 10)", "its input is at most -9)"),
    "tanh_saturated": ("zero", "saturated", "tanh", "gc.tanh(x * 100)", "|input| >= 100; min -200, max 100"),
    "sigmoid_saturated": ("zero", "saturated", "sigmoid", "(x * 1000).sigmoid()", "|input| >= 1000"),
    "clamped": ("zero", "clamped", "clamp", "gc.clamp(x, 5, 6)", "every element is below its min 5 by at least 4"),
    "clamped_max": ("zero", "clamped", "clamp_max", "x.clamp(max=-3)", "above its max -3 by at least 1"),
    "sqrt_at_zero": ("nan", "nonfinite_backward", "sqrt", "gc.sqrt(x * 0)", "1/(2 sqrt(x)) is inf at x = 0"),
    "power_at_zero": ("nan", "nonfinite_backward", "pow", "((x * 0) ** 0.5)", "fractional power's derivative"),
    "where_trick": ("nan", "nonfinite_forward", "sqrt", "gc.where(x > 0", "sqrt of a negative number: input min -2"),
    "overwritten": ("zero", "overwritten", "zero_", "y.zero_()", "overwrites in place the tensor computed from x"),
    "assigned": ("zero", "overwritten", "index_put_", "y[:] = 1.0", "overwrites in place the tensor computed from x"),
    "custom": ("zero", "dead", "Halved", "Halved.apply(x)", "its derivative is zero at this input (min -2, max 1)"),
    "loop": ("zero", "relu_off", "relu", "gc.relu(a - 10)", "its input is at most -12)"),
    "never_selected": ("zero", "dead", "maximum", "gc.maximum(x, w * 0 + 10)", "the input is never the one selected"),
    "times_zero": ("zero", "dead", "mul", "return (x * 0).sum()", "it multiplies by zero"),
    "norm_at_zero": ("zero", "dead", "norm", "gc.norm(x * 0)", "input is 0 in every element, where norm's derivative"),
    "from_float": ("None", "item", "item", "gc.tensor(float(x.sum()))", "made of plain values at cases.py:"),
    "decorated": ("None", "no_grad", "mul", "return h * 3", "mul runs under gc.no_grad()"),
    "grad_off": ("None", "no_grad", "exp", "y = gc.exp(x)", "exp runs under gc.no_grad() (or with grad mode off)"),
    "asarray": ("None", "rebuilt", "numpy", "np.asarray(x)", "values are read out (.numpy())"),
    "scaled_in_place": ("zero", "overwritten", "mul_", "y *= 0", "its old values no longer reach the output"),
    "copied": ("zero", "overwritten", "copy_", "y.copy_(w)", "so the output no longer depends on it"),
    "through_helper": ("zero", "relu_off", "relu", "gc.relu(h * SCALE - 100)", "its input is at most -98)"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_cause_is_named_with_its_operation_and_line(cases, name):
    gradient, cause, op, text, words = EXPECTED[name]
    found = _why(cases, name)
    assert found["framework"] == "gradcli"
    (finding,) = [f for f in found["findings"] if f["input"] == "x"]
    assert (finding["gradient"], finding["cause"], finding["op"]) == (gradient, cause, op)
    assert finding["line"] == (_line(text) if text else None)
    assert words in finding["message"]
    assert finding["message"].startswith(f"{op} at {finding['line']}: " if op else "x ")
    assert found["healthy"] == ["w"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_gradient_said_is_gradclis_own(module, name):
    """A case is a real None, zero or non-finite gradient of gradcli's (never a healthy one diagnosed)."""
    x = gc.tensor([1.0, -2.0], requires_grad=True)
    w = gc.tensor([0.5, 1.5], requires_grad=True)
    with np.errstate(all="ignore"):
        (gx,) = gc.grad(getattr(module, name)(x, w), [x], allow_unused=True)
    kind = "None" if gx is None else "nan" if np.isnan(gx.array).any() else "zero" if (gx.array == 0).all() else "ok"
    assert kind == EXPECTED[name][0]


def test_the_values_that_make_it_so(cases):
    (clamped,) = _why(cases, "clamped")["findings"]
    assert clamped["values"] == {"input_min": -2.0, "input_max": 1.0, "bounds": [5, 6]}
    (relu,) = _why(cases, "through_helper")["findings"]
    assert relu["values"] == {"input_min": -106.0, "input_max": -98.0}  # [1*2-100, -2*3-100]
    (tanh,) = _why(cases, "tanh_saturated")["findings"]
    assert tanh["values"]["input_min_abs"] == 100.0


def test_a_non_finite_output_names_the_operation_that_made_it(cases):
    (log,) = _why(cases, "log_negative")["findings"]
    assert (log["input"], log["gradient"], log["cause"], log["op"]) == (
        "output",
        "value nan",
        "nonfinite_forward",
        "log",
    )
    assert log["line"] == _line("gc.log(x)")
    assert "log of a negative number or of 0: input min -2, max 1" in log["message"]
    found = _why(cases, "divided")
    (div,) = [f for f in found["findings"] if f["input"] == "output"]
    assert (div["gradient"], div["op"], div["line"]) == ("value nan", "div", _line("x / (w - w)"))
    assert "it makes inf from finite inputs (division by zero: input min -2, max 1)" in div["message"]


def test_zero_times_inf_names_the_operation_that_made_the_inf(cases):
    found = _why(cases, "times_log_zero")
    (x,) = [f for f in found["findings"] if f["input"] == "x"]
    assert (x["gradient"], x["cause"], x["op"], x["line"]) == (
        "inf",
        "nonfinite_forward",
        "mul",
        _line("gc.log(w * 0)"),
    )
    assert x["message"] == (
        f"mul at {x['line']}: its other input is inf (made by log at {x['line']} from finite inputs), "
        "so its derivative with respect to x is not finite (0 * inf = nan)"
    )


def test_the_terminal_text_wrt_and_a_healthy_function(cases):
    result = runner.invoke(app, ["why", f"{cases}:relu_off", "--at", AT])
    assert result.exit_code == 0
    assert result.stdout == (
        f"x: gradient zero: relu at {_line('gc.relu(x - 10)')}: the ReLU is off for every element "
        "(its input is at most -9)\nw: gradient finite and not zero\n"
    )
    result = runner.invoke(app, ["why", f"{cases}:relu_off", "--at", AT, "--wrt", "w"])
    assert (result.exit_code, result.stdout) == (0, "w: gradient finite and not zero\n")
    result = runner.invoke(app, ["why", f"{cases}:healthy", "--at", AT])
    assert (result.exit_code, result.stdout) == (0, "x, w: gradient finite and not zero\n")
    assert _why(cases, "healthy") == {"framework": "gradcli", "findings": [], "healthy": ["x", "w"]}


def test_a_function_that_raises_is_one_error_line(cases):
    result = runner.invoke(app, ["why", f"{cases}:raises", "--at", AT])
    assert result.exit_code == 2
    assert result.stderr == f"error: {cases}:raises raised AttributeError: 'Tensor' object has no attribute 'nope'\n"


def test_the_library_face(module):
    found = gc.why(module.clamped, gc.tensor([1.0, -2.0]), np.array([0.5, 1.5]))
    assert str(found) == (
        f"x: gradient zero: clamp at {_line('gc.clamp(x, 5, 6)')}: the clamp is at its bound: every element is "
        "below its min 5 by at least 4\nw: gradient finite and not zero"
    )
    (finding,) = found.findings
    assert (finding.input, finding.cause, finding.values["bounds"]) == ("x", "clamped", [5, 6])
    found = gc.why(module.item, gc.tensor([1.0, -2.0]), gc.tensor([0.5, 1.5]), wrt=["x"])
    assert [(f.input, f.cause, f.op, f.line) for f in found.findings] == [
        ("x", "item", "item", _line("x.sum().item()"))
    ]
    assert gc.why(module.healthy, gc.tensor([1.0, -2.0]), gc.tensor([0.5, 1.5])).healthy == ["x", "w"]


def test_the_example_in_the_readme():
    result = runner.invoke(app, ["why", "examples/why.py:loss", "--at", AT])
    assert result.exit_code == 0
    assert result.stdout == (
        "x: gradient zero: relu at why.py:15: the ReLU is off for every element (its input is at most -9.3)\n"
        "w: gradient None: item at why.py:16: it is read as a Python number (.item(), float() or int()): "
        "autograd does not follow it\n"
    )


def test_an_integer_cast_carries_no_gradient_as_in_pytorch():
    """PyTorch's rule, which the `cast` case above rests on: `.to(int64)`, `.long()`, `.int()` and
    `.bool()` of a tensor that requires grad give a tensor that does not; a float cast keeps it."""
    x = gc.tensor([1.5, -2.5], requires_grad=True)
    for y, dtype in ((x.to(gc.int64), np.int64), (x.long(), np.int64), (x.int(), np.int32), (x.bool(), np.bool_)):
        assert (y.requires_grad, y.grad_fn, y.dtype) == (False, None, np.dtype(dtype))
    assert x.long().tolist() == [1, -2] and x.bool().tolist() == [True, True]
    assert x.double().requires_grad and type(x.to(gc.float32).grad_fn).__name__ == "ToCopyBackward0"
    (x.to(gc.int64) * x).sum().backward()
    assert x.grad.tolist() == [1.0, -2.0]
