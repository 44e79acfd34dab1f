"""Issue 34, the PyTorch road: functions of the kinds that failed (tests/r34_torch_kinds.py) through
every command where it applies, each compared with PyTorch itself (``torch.autograd.functional``):
forward mode where PyTorch has none falls back to reverse mode and says so; ZeroTensor, sparse and
bfloat16/float16 results become float64 numbers; torch.compile'd functions, inner
``torch.autograd.grad``/``.backward()`` calls, inputs not differentiated changed in place, and
``@once_differentiable`` under a Hessian."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest
from frameworks import need
from typer.testing import CliRunner

from gradcli.cli.app import app

runner = CliRunner()
KINDS = str(Path(__file__).with_name("r34_torch_kinds.py"))


@pytest.fixture(scope="module")
def kinds():
    """The kinds module, imported here for PyTorch's own numbers (the CLI imports its own copy)."""
    need("torch")
    return importlib.import_module("r34_torch_kinds")


def run(*args: str):
    return runner.invoke(app, list(args))


def cli_json(*args: str, code: int = 0) -> tuple[dict, str]:
    result = run(*args, "--json")
    assert result.exit_code == code, (result.stdout, result.stderr)
    return json.loads(result.stdout), result.stderr


def at(name: str, value) -> str:
    return f"{name}={json.dumps(np.asarray(value).tolist())}"


def tensor(value):
    torch = need("torch")
    return torch.tensor(value, dtype=torch.float64)


def torch_jacobian(function, x):
    torch = need("torch")
    return torch.autograd.functional.jacobian(function, tensor(x)).numpy().reshape(-1, np.size(x))


def torch_gradient(function, x):
    torch = need("torch")
    leaf = tensor(x).requires_grad_(True)
    out = function(leaf)
    (g,) = torch.autograd.grad(out, leaf)
    return out.detach().to(torch.float64).item(), (g.to_dense() if g.is_sparse else g).numpy(force=True)


X6 = [1.0, -2.0, 3.0, 0.5, 5.0, 7.0]
X2 = [0.7, -1.3]


# --- 1. forward mode where PyTorch has none: reverse mode's numbers, said once ------------------------


@pytest.mark.parametrize(
    "name, x",
    [("gradient_inside", X2), ("batchnorm", X6), ("custom", X2)],
)
def test_jacobian_mode_forward_without_pytorch_forward_mode_is_reverse_mode_said_once(kinds, name, x):
    found, stderr = cli_json("jacobian", f"{KINDS}:{name}", "--at", at("x", x), "--mode", "forward")
    expected = torch_jacobian(getattr(kinds, name), x)
    np.testing.assert_array_equal(found["jacobian"], expected)
    assert found["mode"] == "reverse"
    assert found["note"].startswith("--mode forward: PyTorch's forward mode cannot run this function (")
    assert found["note"].endswith("; the Jacobian is by reverse mode")
    said = [line for line in stderr.splitlines() if "forward" in line]  # (pytest shows PyTorch's deprecations)
    assert said == [f"warning: {found['note']}"]
    for mode in ("auto", "reverse"):
        other, _ = cli_json("jacobian", f"{KINDS}:{name}", "--at", at("x", x), "--mode", mode)
        np.testing.assert_array_equal(other["jacobian"], expected)


def test_jacobian_mode_forward_of_a_gradcli_function_without_jvp_is_reverse_mode(tmp_path):
    (tmp_path / "cube.py").write_text(
        "import gradcli as gc\n"
        "class Cube(gc.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        ctx.save_for_backward(x)\n"
        "        return x**3\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        (x,) = ctx.saved_tensors\n"
        "        return g * 3 * x**2\n"
        "def f(x):\n"
        "    return Cube.apply(x)\n"
    )
    found, stderr = cli_json("jacobian", f"{tmp_path / 'cube.py'}:f", "--at", "x=[1,2]", "--mode", "forward")
    assert found["jacobian"] == [[3.0, 0.0], [0.0, 12.0]] and found["mode"] == "reverse"
    note = "--mode forward: Cube has no jvp(ctx, *tangents) for forward mode; the Jacobian is by reverse mode"
    assert found["note"] == note and stderr == f"warning: {note}\n"


def test_reentrant_checkpoint_is_pytorchs_own_refusal_exit_2(kinds):
    torch = need("torch")
    with pytest.raises(RuntimeError, match="use_reentrant=True"):  # PyTorch's own jacobian refuses it
        torch.autograd.functional.jacobian(kinds.reentrant, tensor(X2))
    for mode in ("forward", "reverse"):
        result = run("jacobian", f"{KINDS}:reentrant", "--at", at("x", X2), "--mode", mode)
        assert result.exit_code == 2, result.stderr
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"error: {KINDS}:reentrant: When use_reentrant=True, torch.utils.checkpoint")


# --- 2. ZeroTensor, sparse gradients, bfloat16/float16 outputs ---------------------------------------


def test_a_zerotensor_gradient_is_zeros(kinds):
    found, _ = cli_json("eval", f"{KINDS}:sign", "--at", at("x", X2))
    value, gradient = torch_gradient(kinds.sign, X2)
    assert found["value"] == value == 0.0 and found["gradient"]["x"] == gradient.tolist() == [0.0, 0.0]


def test_the_hessian_of_abs_is_zeros_as_pytorchs(kinds):
    torch = need("torch")
    found, _ = cli_json("hessian", f"{KINDS}:absolute", "--at", at("x", X2))
    expected = torch.autograd.functional.hessian(kinds.absolute, tensor(X2)).numpy()
    np.testing.assert_array_equal(found["hessian"], expected)
    assert found["gradient"]["x"] == [2.0, -2.0]


W = [[0.3, -1.0], [2.0, 0.5], [1.5, -0.25], [4.0, 1.0]]


def test_a_sparse_embedding_gradient_is_made_dense(kinds):
    torch = need("torch")
    found, _ = cli_json("eval", f"{KINDS}:embedding", "--at", at("w", W))
    value, gradient = torch_gradient(kinds.embedding, W)
    assert found["value"] == value
    np.testing.assert_array_equal(found["gradient"]["w"], gradient)
    assert np.count_nonzero(gradient[[1, 3]]) == 0 and np.count_nonzero(gradient[[0, 2]]) == 4
    hessian, _ = cli_json("hessian", f"{KINDS}:embedding", "--at", at("w", W))
    dense = torch.autograd.functional.hessian(kinds.embedding_dense, tensor(W)).numpy().reshape(8, 8)
    np.testing.assert_allclose(hessian["hessian"], dense, rtol=1e-15, atol=1e-15)
    module, _ = cli_json("eval", f"{KINDS}:embedding_module", "--at", "x=2")
    assert module["gradient"]["x"] == kinds.table(kinds.INDEX).sum().item()


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_a_half_precision_output_is_its_value_cast_up_and_pytorchs_gradient(kinds, name):
    torch = need("torch")
    x = [1.1, 2.3]
    found, _ = cli_json("eval", f"{KINDS}:{name}", "--at", at("x", x))
    value, gradient = torch_gradient(getattr(kinds, name), x)
    assert found["value"] == value  # (PyTorch's own low-precision result, cast up to float64)
    assert found["gradient"]["x"] == gradient.tolist()
    jac, _ = cli_json("jacobian", f"{KINDS}:{name}", "--at", at("x", x), "--mode", "reverse")
    np.testing.assert_array_equal(jac["jacobian"], [gradient])
    hessian, _ = cli_json("hessian", f"{KINDS}:{name}", "--at", at("x", x))
    np.testing.assert_array_equal(hessian["hessian"], torch.autograd.functional.hessian(
        lambda t: getattr(kinds, name)(t).to(torch.float64), tensor(x)).numpy())  # fmt: skip


# --- 3. torch.compile ------------------------------------------------------------------------------


def test_a_compiled_function_on_every_command_is_pytorchs_numbers(kinds):
    need("torch")
    value, gradient = torch_gradient(kinds.compiled, X2)
    found, _ = cli_json("eval", f"{KINDS}:compiled", "--at", at("x", X2))
    assert found["value"] == value and found["gradient"]["x"] == gradient.tolist()
    checked, _ = cli_json("check", f"{KINDS}:compiled", "--at", at("x", X2), "--blame")
    assert checked["ok"] is True and checked["gradient"]["x"] == gradient.tolist()
    expected = torch_jacobian(kinds.compiled_vector, X2)
    for mode in ("auto", "forward", "reverse"):
        jac, _ = cli_json("jacobian", f"{KINDS}:compiled_vector", "--at", at("x", X2), "--mode", mode)
        np.testing.assert_allclose(jac["jacobian"], expected, rtol=1e-15)
    # aot_autograd refuses a double backward (torch.autograd.functional.hessian reads zeros): PyTorch's words
    result = run("hessian", f"{KINDS}:compiled", "--at", at("x", X2))
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        f"error: {KINDS}:compiled: torch.compile with aot_autograd does not currently support double backward"
    )


def test_check_blame_of_a_compiled_function_names_its_wrong_custom_function(kinds):
    result = run("check", f"{KINDS}:compiled_lying", "--at", at("x", X2), "--blame", "--json")
    assert result.exit_code == 1, result.stderr
    found = json.loads(result.stdout)
    assert found["ok"] is False and found["gradient"]["x"] == [3 * X2[0], 3 * X2[1]]
    assert "LyingBackward" in json.dumps(found["blame"])


# --- 4. a gradient computed inside the function --------------------------------------------------


@pytest.mark.parametrize("name", ["gradient_penalty", "backward_inside"])
def test_every_command_runs_a_function_that_differentiates_inside(kinds, name):
    torch = need("torch")
    function = getattr(kinds, name)
    value, gradient = torch_gradient(function, X2)
    found, _ = cli_json("check", f"{KINDS}:{name}", "--at", at("x", X2))
    assert found["ok"] is True and found["value"] == value and found["gradient"]["x"] == gradient.tolist()
    assert found["checks"]["finite_difference"]["ok"] is True
    evaluated, _ = cli_json("eval", f"{KINDS}:{name}", "--at", at("x", X2))
    assert evaluated["gradient"]["x"] == gradient.tolist()
    hessian, _ = cli_json("hessian", f"{KINDS}:{name}", "--at", at("x", X2))
    x = np.array(X2)  # both are sum(9 x^4) + (sin x for the penalty): PyTorch's Hessian where it can run it
    exact = np.diag(108 * x**2 - (np.sin(x) if name == "gradient_penalty" else 0))
    if name == "gradient_penalty":
        np.testing.assert_array_equal(
            exact.round(12), torch.autograd.functional.hessian(function, tensor(X2)).numpy().round(12)
        )
    np.testing.assert_allclose(hessian["hessian"], exact, rtol=1e-14)


# --- 5. inputs not differentiated are plain tensors ---------------------------------------------


def test_an_input_not_differentiated_is_a_plain_tensor_changed_in_place(kinds):
    plain = kinds.in_place(tensor(1.0), tensor(5.5)).item()  # a plain call: x * 2y
    assert plain == 11.0
    found, _ = cli_json("eval", f"{KINDS}:in_place", "--at", "x=1,y=5.5", "--wrt", "x")
    assert found["value"] == plain and found["gradient"] == {"x": 11.0}
    jac, _ = cli_json("jacobian", f"{KINDS}:in_place", "--at", "x=1,y=5.5", "--wrt", "x")
    assert jac["value"] == [plain] and jac["jacobian"] == [[11.0]]
    hessian, _ = cli_json("hessian", f"{KINDS}:in_place", "--at", "x=1,y=5.5", "--wrt", "x")
    assert hessian["value"] == plain and hessian["hessian"] == [[0.0]]
    checked, _ = cli_json("check", f"{KINDS}:in_place", "--at", "x=1,y=5.5", "--wrt", "x")
    assert checked["ok"] is True and checked["value"] == plain and checked["gradient"] == {"x": 11.0}


# --- 6. @once_differentiable under a Hessian --------------------------------------------------


def test_the_hessian_through_once_differentiable_is_pytorchs_refusal(kinds):
    found, _ = cli_json("eval", f"{KINDS}:once", "--at", at("x", X2))
    assert found["gradient"]["x"] == [3 * v**2 for v in X2]
    result = run("hessian", f"{KINDS}:once", "--at", at("x", X2))
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (
        "error: Cube's backward is @once_differentiable: PyTorch cannot differentiate it twice (trying to "
        "differentiate twice a function that was marked with @once_differentiable)\n"
    )


# --- 7. the road matrix: every kind through every command where it applies, against PyTorch -------

SCALAR_KINDS = [
    ("gradient_penalty", X2),
    ("backward_inside", X2),
    ("batchnorm_sum", X6),
    ("custom_sum", X2),
    ("sign", X2),
    ("absolute", X2),
    ("bfloat16", [1.1, 2.3]),
    ("compiled", X2),
]


@pytest.mark.parametrize("name, x", SCALAR_KINDS, ids=[k for k, _ in SCALAR_KINDS])
def test_road_matrix_of_a_scalar_kind_is_pytorchs_gradient_on_every_command(kinds, name, x):
    """eval, jacobian in each mode and check give PyTorch's gradient (float64's, or the low-precision
    value cast up); hessian torch.autograd.functional.hessian's."""
    torch = need("torch")
    value, gradient = torch_gradient(getattr(kinds, name), x)
    found, _ = cli_json("eval", f"{KINDS}:{name}", "--at", at("x", x))
    assert found["value"] == value and found["gradient"]["x"] == gradient.tolist()
    for mode in ("auto", "forward", "reverse"):
        jac, _ = cli_json("jacobian", f"{KINDS}:{name}", "--at", at("x", x), "--mode", mode)
        np.testing.assert_allclose(jac["jacobian"], [gradient], rtol=1e-15, atol=0, err_msg=mode)
    if name != "bfloat16":  # (bfloat16's differences are judged by check's verdicts, not here)
        checked, _ = cli_json("check", f"{KINDS}:{name}", "--at", at("x", x))
        assert checked["ok"] is True and checked["gradient"]["x"] == gradient.tolist()
    if name in ("compiled", "backward_inside"):  # (their Hessians: the tests above)
        return
    hessian, _ = cli_json("hessian", f"{KINDS}:{name}", "--at", at("x", x))
    expected = torch.autograd.functional.hessian(lambda t: getattr(kinds, name)(t).to(torch.float64), tensor(x))
    np.testing.assert_allclose(hessian["hessian"], expected, rtol=1e-12, atol=1e-12)
