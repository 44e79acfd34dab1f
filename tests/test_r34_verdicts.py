"""Issue 34, check's verdicts: no false alarm through casts and real-only operations under the complex
step, each custom Function judged at the precision it computes in, a staircase never a MISMATCH,
references at odds said to be, one verdict at a step, one name for a blamed node, PyTorch's OpInfo
samples never a false MISMATCH where gradcheck passes, and planted backward bugs inside nn.Modules
named by --blame with their module path."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from frameworks import need
from typer.testing import CliRunner

from gradcli.check.result import CheckResult, Kink, MethodCheck
from gradcli.check.run import check
from gradcli.cli.app import app
from gradcli.lang.program import load

runner = CliRunner()

TORCH_CASTS = """
import numpy as np
import torch

torch.manual_seed(0)
net32 = torch.nn.Linear(2, 1)  # float32 parameters


def cast32(x):
    return net32(x.float()).sum()


def double(x):
    x = x.double()
    return (x**3).sum()


def conj(x):
    return (x.conj() * x).sum()


def mh(x):
    return (x.mH @ x).sum()


def real(x):
    return (torch.real(x) ** 2).sum()


def conj_physical(x):
    return (torch.conj_physical(x) ** 2).sum()


def adjoint(x):
    return (x.adjoint() * x).sum()


class Exp32(torch.autograd.Function):
    # exp computed in float32 between float64 input and output: correct, to float32's precision
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x.float())
        ctx.save_for_backward(y)
        return y.double()

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y.double()


class Exp32Wrong(Exp32):
    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y.double() * 1.05


def exp32(x):
    return Exp32.apply(x).sum()


def exp32_wrong(x):
    return Exp32Wrong.apply(x).sum()


def rounded(x):
    return torch.round(x, decimals=3).sum()


def masked(x):
    return torch.softmax(x, 0)[0] * 3.0


class Square(torch.autograd.Function):
    # x * conj(x) through NumPy: x^2 of real values (its backward is right), |x|^2 of complex ones
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        a = x.detach().numpy()
        return torch.from_numpy(a * np.conj(a))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x


def escaped(x):
    return (Square.apply(x) * 0.5).sum()
"""

JAX_CASTS = """
import jax
import jax.numpy as jnp


def conj(x):
    return jnp.sum(jnp.conj(x) * x)


def real(x):
    return jnp.sum(jnp.real(x) ** 2)


def imag(x):
    return jnp.sum(jnp.imag(x) + x)


def double(x):
    return jnp.sum(x.astype(jnp.float64) ** 3)
"""

POINT = "x=[[0.5,0.3],[0.2,0.7]]"


@pytest.fixture
def torch_files(tmp_path, monkeypatch):
    need("torch")
    (tmp_path / "casts.py").write_text(TORCH_CASTS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def jax_files(tmp_path, monkeypatch):
    need("jax")
    (tmp_path / "jcasts.py").write_text(JAX_CASTS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def cli(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result.stdout


def cli_json(*args: str, code: int = 0) -> dict:
    return json.loads(cli(*args, "--json", code=code))


def torch_gradient(text: str, name: str, x: list) -> np.ndarray:
    torch = need("torch")
    space: dict = {}
    exec(text, space)
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(space[name](t), t)
    return g.numpy()


# --- 1. casts and real-only operations under the complex step ----------------------------------------------

REAL_ONLY = {  # function: what the complex step names as not complex-analytic
    "double": "PyTorch's cast to float64 (_to_copy) is not complex-analytic",
    "conj": "PyTorch's conj is not complex-analytic",
    "mh": "PyTorch's conj is not complex-analytic",
    "real": "PyTorch's view_as_real is not complex-analytic",
    "conj_physical": "PyTorch's conj_physical is not complex-analytic",
    "adjoint": "PyTorch's conj is not complex-analytic",
    "cast32": "PyTorch's cast to float32 (_to_copy) is not complex-analytic",
    "exp32": "PyTorch's cast to float32 (_to_copy) is not complex-analytic",
}


@pytest.mark.parametrize("name", list(REAL_ONLY))
def test_no_false_alarm_through_casts_and_real_only_operations(torch_files, name):
    """Before: MISMATCH: PyTorch 1 but complex step -1 (or 0), exit 1: x.conj(), torch.real, x.double()
    do nothing to a real tensor, so the operations seen at the real point were all analytic."""
    point = "x=[2.0,1.0]" if name in ("cast32", "exp32") else POINT
    found = cli_json("check", f"casts.py:{name}", "--at", point)
    assert found["ok"] is True, found["verdict"]
    assert found["checks"]["complex_step"]["ok"] is None
    assert found["checks"]["complex_step"]["reason"].startswith(f"skipped: {REAL_ONLY[name]}")
    assert found["checks"]["finite_difference"]["ok"] is True
    assert found["verdict"].startswith("OK: PyTorch agrees with finite differences")
    x = json.loads(point.partition("=")[2])
    np.testing.assert_array_equal(found["gradient"]["x"], torch_gradient(TORCH_CASTS, name, x))


@pytest.mark.parametrize("name, op", [("conj", "conj"), ("real", "real"), ("imag", "imag"),
                                      ("double", "cast to float64 (convert_element_type)")])  # fmt: skip
def test_no_false_alarm_through_jax_real_only_operations(jax_files, name, op):
    found = cli_json("check", f"jcasts.py:{name}", "--at", "x=[0.5,0.3]")
    assert found["ok"] is True, found["verdict"]
    assert found["checks"]["complex_step"]["reason"].startswith(f"skipped: JAX's {op} is not complex-analytic")


def test_an_analytic_function_keeps_its_complex_step(torch_files):
    (torch_files / "smooth.py").write_text(
        "import torch\n\ndef f(x):\n    return (torch.sin(x) * x.to(torch.complex128).real).sum()\n"
    )
    found = cli_json("check", "casts.py:conj_physical", "--at", "x=[0.5]")
    assert found["checks"]["complex_step"]["ok"] is None
    (torch_files / "smooth.py").write_text(
        "import torch\n\ndef f(x):\n    return (torch.sin(x) * x.clone() ** 2).sum()\n"
    )
    found = cli_json("check", "smooth.py:f", "--at", "x=[0.5,2.0]")
    assert found["checks"]["complex_step"]["ok"] is True and found["ok"] is True


# --- 2. a Function judged at the precision it computes in ---------------------------------------------------


def test_a_float32_function_inside_float64_is_not_blamed(torch_files):
    """Before: blamed, its differences judged at float64's tolerance (MISMATCH, exit 1)."""
    found = cli_json("check", "casts.py:exp32", "--at", "x=[2.0,1.0]", "--blame")
    assert found["ok"] is True, found["verdict"]
    assert found["blame"] is None
    assert found["rtol"] == 3e-3  # float32's
    np.testing.assert_array_equal(found["gradient"]["x"], torch_gradient(TORCH_CASTS, "exp32", [2.0, 1.0]))


def test_check_points_judges_a_float32_function_at_float32s_tolerance(torch_files):
    (torch_files / "p.csv").write_text("x\n2.0\n1.0\n")
    (torch_files / "one.py").write_text(TORCH_CASTS + "\n\ndef one(x):\n    return Exp32.apply(x)\n")
    found = cli_json("check", "one.py:one", "--points", "p.csv")
    assert found["ok"] is True, found


def test_a_wrong_float32_function_is_still_blamed(torch_files):
    found = cli_json("check", "casts.py:exp32_wrong", "--at", "x=[2.0,1.0]", "--blame", code=1)
    assert found["blame"]["op"] == "Exp32Wrong"
    assert found["verdict"].startswith("MISMATCH: d/dx[")


def test_torch_blame_reads_the_precision_a_function_computed_in(torch_files):
    from gradcli.check.torch_blame import blame_torch_calls

    sys.path.insert(0, str(torch_files))
    try:
        space: dict = {}
        exec(TORCH_CASTS, space)
    finally:
        sys.path.remove(str(torch_files))
    found, checked = blame_torch_calls(space["exp32"], {"x": np.array([2.0, 1.0])})
    assert (found, checked) == (None, 1)


# --- 3. staircases ------------------------------------------------------------------------------------------


def test_a_staircase_is_never_a_mismatch(torch_files):
    """Before: MISMATCH: PyTorch 0 but finite differences 1.024 (steps 2^-6..2^-9 each a whole number of
    1e-3 treads)."""
    result = runner.invoke(app, ["check", "casts.py:rounded", "--at", POINT])
    assert result.exit_code == 1, result.output  # INCONCLUSIVE
    assert "MISMATCH:" not in result.stdout
    assert result.stdout.splitlines()[-1] == (
        "INCONCLUSIVE: no method could judge autograd's gradient at this point (see above)"
    )
    assert (
        "finite differences: inconclusive at d/dx[0,0]: the differences change with the step (1.024 at steps down "
        "to 0.00195, 0 at 1.53e-05): no derivative at the steps' scale (a staircase, or noise), so they cannot "
        "judge it" in result.stdout
    )


@pytest.mark.parametrize("expression", ["round(1000*x)/1000", "round(1000*x)/1000 + x^2"])
def test_a_staircase_in_gradclis_language_is_never_a_mismatch(expression):
    result = check(load(expression), {"x": np.asarray(0.5)}, methods=["fd"])
    assert not result.verdict().startswith("MISMATCH"), result.verdict()
    assert result.checks["finite_difference"].ok is None
    assert "the differences change with the step" in result.checks["finite_difference"].reason


def test_a_small_real_error_is_still_a_mismatch():
    """The probes that catch a staircase leave a wrong derivative of 1e-6 relative a MISMATCH."""
    result = check(load("exp(x)"), {"x": np.asarray(0.7)}, methods=["fd"], expect={"x": "exp(x)*(1+1e-6)"})
    assert result.verdict().startswith("MISMATCH: d/dx: autograd 2.013752707 but the expected formula gives")
    assert result.checks["finite_difference"].ok is True


def test_an_infinite_input_is_not_differenced(torch_files):
    """Before: an internal error (ValueError: cannot reshape array of size 2 into shape (1,3)): an element
    at -inf has no step, and the first round of differences left it out of the estimate."""
    found = check(load("casts.py:masked"), {"x": np.array([0.5, -np.inf, 0.25])})
    assert found.ok, found.verdict()
    assert np.isnan(found.checks["finite_difference"].values["x"][1])
    torch = need("torch")
    x = torch.tensor([0.5, -np.inf, 0.25], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(torch.softmax(x, 0)[0] * 3.0, x)
    np.testing.assert_array_equal(found.gradient["x"], g.numpy())


# --- 4. references at odds ------------------------------------------------------------------------------------


def test_references_that_disagree_say_so(torch_files):
    """The complex step runs through NumPy's conj, which no dispatch sees: it gives 0 where finite
    differences and PyTorch give 1.4. Before: MISMATCH: d/dx[0]: PyTorch 1.4 but complex step 0."""
    found = cli_json("check", "casts.py:escaped", "--at", "x=[1.4,0.5]", code=1)
    assert found["ok"] is False
    assert found["verdict"] == (
        "INCONCLUSIVE: the references disagree at d/dx[0]: complex step 0, finite differences 1.4 "
        "(PyTorch gives 1.4); not judged"
    )


def test_an_expected_formula_that_disagrees_is_a_mismatch_still():
    result = check(load("x^2"), {"x": np.asarray(3.0)}, expect={"x": "3*x"})
    assert result.verdict().startswith("MISMATCH: d/dx: autograd 6 but the expected formula gives 9")


def test_the_disputed_verdict_from_its_parts():
    gradient = {"x": np.array([1.0, 2.0])}
    checks = {
        "finite_difference": MethodCheck("finite_difference", True, {"x": np.array([1.0, 2.0])}),
        "complex_step": MethodCheck("complex_step", False, {"x": np.array([-1.0, 2.0])}, worst="x[0]",
                                    worst_detail="d/dx[0]: autograd 1 but complex step -1"),
    }  # fmt: skip
    result = CheckResult(False, 0.0, gradient, checks, 1e-7, 1e-12, labels=["x[0]", "x[1]"])
    assert result.verdict() == (
        "INCONCLUSIVE: the references disagree at d/dx[0]: complex step -1, finite differences 1 "
        "(autograd gives 1); not judged"
    )


# --- 5. one verdict at a step ---------------------------------------------------------------------------------


def test_floor_at_a_step_has_one_verdict():
    """Before: 'not judged' on x's line, then 'OK: ... valid subgradient (one-sided derivatives above)'
    with none above."""
    out = cli("check", "floor(x)", "--at", "x=1")
    lines = out.splitlines()
    assert (
        lines[-2]
        == "x: not differentiable here: the function steps by 1; autograd gives 0 (as PyTorch does at a step), not judged"
    )
    assert lines[-1] == "OK: not differentiable here; the function steps at x, where autograd's value is not judged"
    assert "one-sided" not in out
    assert "finite differences: skipped: the function steps at every input (see below)" in out


def test_a_step_inside_a_staircase_has_its_own_size():
    """Before: "steps by -0.001", the extrapolation of differences that straddled several treads."""
    result = check(load("floor(1000*x)/1000"), {"x": np.asarray(0.5)})
    (kink,) = result.kinks
    assert kink.jump == pytest.approx(0.001, rel=1e-9)
    assert (
        kink.text()
        == "x: not differentiable here: the function steps by 0.001; autograd gives 0 (as PyTorch does at a step), not judged"
    )


def test_a_kink_verdict_points_at_the_one_sided_derivatives_it_shows():
    out = cli("check", "abs(x)", "--at", "x=0")
    lines = out.splitlines()
    assert lines[-2].startswith("x: not differentiable here: one-sided derivatives -1 (left) and 1 (right)")
    assert (
        lines[-1]
        == "OK: not differentiable here; autograd's value at x is a valid subgradient (one-sided derivatives above)"
    )


def test_a_kink_and_a_step_are_each_named():
    kinks = [Kink("x", -1.0, 1.0, 0.0), Kink("y", 0.0, 0.0, 0.0, jump=1.0)]
    result = CheckResult(True, 0.0, {"x": np.zeros(()), "y": np.zeros(())}, {}, 1e-7, 1e-12, kinks=kinks)
    assert result.verdict() == (
        "OK: not differentiable here; autograd's value at x is a valid subgradient (one-sided derivatives above); "
        "the function steps at y, where autograd's value is not judged"
    )


# --- 6. one name for a blamed node ------------------------------------------------------------------------------

LYING = """
import torch


class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x  # wrong: d(x^2)/dx is 2x


def lying(x):
    return Twice.apply(torch.sin(x)).sum()
"""


def test_cases_name_a_blamed_node_as_the_cli_does(torch_files):
    """Before: --cases said "call 1" where check --blame said "n2"."""
    (torch_files / "lying.py").write_text(LYING)
    (torch_files / "cases.toml").write_text(
        '[[case]]\nname = "lying"\nfile = "lying.py"\nfunction = "lying"\nat = { x = [1.0, 2.0] }\nblame = true\n'
    )
    alone = cli_json("check", "lying.py:lying", "--at", "x=[1,2]", "--blame", code=1)
    cases = cli_json("check", "--cases", "cases.toml", code=1)
    assert alone["blame"]["node"] == cases["cases"][0]["result"]["blame"]["node"] == "n2"
    text = cli("check", "--cases", "cases.toml", code=1)
    assert "blame: node n2: TwiceBackward (Twice(n1)) computes a wrong derivative" in text


# --- 7. the false-alarm sweep on PyTorch's OpInfo samples ------------------------------------------------------

#: a fixed subset, covering casts, conj/real, rounding, reductions, linalg and the rest (benchmarks/opinfo_sweep.py
#: or GRADCLI_OPINFO_SWEEP=full runs every op)
OPINFO_SUBSET = [
    "abs", "acos", "acosh", "add", "addcdiv", "addcmul", "addmm", "addmv", "addr", "amax", "amin", "angle", "asin",
    "asinh", "atan", "atan2", "atanh", "baddbmm", "bmm", "broadcast_to", "cat", "ceil", "clamp", "clone", "conj",
    "conj_physical", "copysign", "cos", "cosh", "cross", "cummax", "cumprod", "cumsum", "deg2rad", "diag",
    "diag_embed", "diagonal", "digamma", "div", "dot", "double", "erf", "erfc", "erfinv", "exp", "exp2", "expm1",
    "flip", "float", "floor", "fmax", "fmin", "frac", "gather", "hypot", "i0", "index_select", "inner", "kron",
    "lerp", "lgamma", "linalg.det", "linalg.inv", "linalg.norm", "linalg.slogdet", "linalg.solve", "linalg.svdvals",
    "log", "log10", "log1p", "log2", "logaddexp", "logcumsumexp", "logdet", "logit", "logsumexp", "masked_fill",
    "matmul", "max", "maximum", "mean", "min", "minimum", "mm", "mul", "mv", "nan_to_num", "nansum", "neg",
    "nn.functional.celu", "nn.functional.elu", "nn.functional.gelu", "nn.functional.hardtanh",
    "nn.functional.leaky_relu", "nn.functional.linear", "nn.functional.relu", "nn.functional.softplus", "norm",
    "outer", "permute", "polar", "pow", "prod", "rad2deg", "real", "reciprocal", "remainder", "repeat",
    "resolve_conj", "round", "rsqrt", "sgn", "sigmoid", "sign", "sin", "sinc", "sinh", "softmax", "sort", "sqrt",
    "square", "std", "sub", "sum", "t", "tan", "tanh", "trace", "trapezoid", "tril", "triu", "trunc", "var", "where",
    "xlogy",
]  # fmt: skip


def _sweep(names: set[str] | None) -> list:
    need("torch")
    sys.path.insert(0, str(Path(__file__).parent))
    from opinfo_sweep import op_db, sweep_one

    ops = [op for op in op_db() if names is None or op.name in names]
    return [s for s in (sweep_one(op, gradcheck=False) for op in ops) if s is not None]


PARTS = 4  # the subset in four parts, so that the suite's workers share it (about 24 s in one)


@pytest.mark.parametrize("part", range(PARTS))
def test_opinfo_samples_never_give_a_false_mismatch(part):
    """check on the first small float64 sample of each op, through FILE.py:f's road: OK or INCONCLUSIVE
    wherever torch.autograd.gradcheck passes, never MISMATCH, never an internal error."""
    full = os.environ.get("GRADCLI_OPINFO_SWEEP") == "full"
    if full and part:
        pytest.skip("GRADCLI_OPINFO_SWEEP=full sweeps every op in the first part")
    swept = _sweep(None if full else set(OPINFO_SUBSET[part::PARTS]))
    assert len(swept) >= (300 if full else 100 // PARTS)
    wrong = [s for s in swept if s.verdict in ("MISMATCH", "FAILED")]  # (gradcheck was run on these)
    assert [(s.name, s.line) for s in wrong if s.gradcheck is not False] == []
    # no verdict at all: none is left since the torch adapter reads ZeroTensors (sgn's gradient)
    assert {s.name for s in swept if s.verdict in ("ERROR", "CRASH")} == set()
    assert sum(s.verdict == "OK" for s in swept) >= 0.95 * len(swept)  # a sweep that judges, not one that shrugs


# --- 8. planted backward bugs inside nn.Modules --------------------------------------------------------------

PLANTED = '''
import torch
from torch import nn

W0 = torch.tensor([[0.9, -0.4, 0.3], [0.2, 1.1, -0.6], [-0.5, 0.7, 0.8]], dtype=torch.float64)


def rule(bug):
    class Op(torch.autograd.Function):
        """y = sin(x @ W) + (x @ W)^2; its backward with the bug ``bug`` planted (None: correct)."""

        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            z = x @ w
            return torch.sin(z) + z * z

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            z = x @ w
            gz = g * (torch.cos(z) + 2 * z)
            if bug == "wrong_input":
                gz = g * (torch.cos(x) + 2 * x)
            if bug == "missing_term":
                gz = g * torch.cos(z)
            gx, gw = gz @ w.T, x.T @ gz
            if bug == "sign":
                gx = -gx
            if bug == "transposed":
                gx = gz @ w
            if bug == "factor_1e-3":
                gx = gx * (1 + 1e-3)
            if bug == "factor_1e-6":
                gx = gx * (1 + 1e-6)
            if bug == "one_element":
                gx = gx.clone()
                gx[0, 1] = gx[0, 1] * 1.01
            if bug == "negative_only":
                gx = torch.where(x < 0, 1.1 * gx, gx)
            return gx, gw

    Op.__name__ = "Correct" if bug is None else "Planted_" + bug.replace("-", "_")
    return Op


class Block(nn.Module):
    def __init__(self, bug):
        super().__init__()
        self.w = nn.Parameter(W0.clone())
        self.op = rule(bug)

    def forward(self, x):
        return self.op.apply(x, self.w)


def model_with(bug):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 3).double(), nn.Sequential(nn.Tanh(), Block(None)), nn.Sequential(Block(bug)))


BUGS = ["sign", "transposed", "wrong_input", "missing_term", "factor_1e-3", "factor_1e-6", "one_element",
        "negative_only"]
MODELS = {bug: model_with(bug) for bug in [None, *BUGS]}
model = None


def f(x):
    return model(x).sum()
'''

BUGS = ["sign", "transposed", "wrong_input", "missing_term", "factor_1e-3", "factor_1e-6", "one_element",
        "negative_only"]  # fmt: skip


def test_planted_bugs_inside_modules_are_named_with_their_module_path(tmp_path, monkeypatch):
    """Each planted bug is the one --blame names, with its module path in the Sequential, and the correct
    Function before it is never blamed."""
    need("torch")
    from gradcli.check.framework_blame import framework_blame

    (tmp_path / "planted.py").write_text(PLANTED)
    monkeypatch.chdir(tmp_path)
    program = load("planted.py:f")
    module = program.function.__globals__  # the user's module, as gradcli imported it
    x = np.array([[0.3, -0.8, 0.5], [-0.2, 0.6, -0.9]])
    found = {}
    for bug in [None, *BUGS]:
        module["model"] = module["MODELS"][bug]
        blame, checked = framework_blame("torch", program.function, {"x": x}, ["x"], None, None)
        found[bug] = (None, checked) if blame is None else (blame.op, blame.scope, checked)
    assert found[None] == (None, 2)
    expected = {bug: (f"Planted_{bug.replace('-', '_')}", "model.2.0", 2) for bug in BUGS}
    assert {bug: found[bug] for bug in BUGS} == expected


def test_a_planted_bug_is_named_by_check_blame_on_the_command_line(tmp_path, monkeypatch):
    need("torch")
    (tmp_path / "planted.py").write_text(PLANTED + "\nmodel = MODELS['factor_1e-6']\n")
    monkeypatch.chdir(tmp_path)
    found = cli_json("check", "planted.py:f", "--at", "x=[[0.3,-0.8,0.5],[-0.2,0.6,-0.9]]", "--blame", code=1)
    assert found["blame"]["op"] == "Planted_factor_1e_6" and found["blame"]["scope"] == "model.2.0"
