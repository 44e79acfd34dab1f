"""Issue 34: how a ``FILE.py:func`` is loaded, its parameters read and its return value taken.

- a ``@torch.jit.script`` function's parameters come from its schema (no Python signature);
- a parameter with a default is optional, ``jax.jit``'s static arguments are Python numbers;
- the file's own folder is importable while it is loaded (``import helper``), and nothing leaks;
- None, a dict or complex values returned are one ``error:`` line (exit 2) on every road, while
  check's own complex step (complex inputs) still gives complex outputs;
- messages name the user's function, never an internal object, typer's line or an escaped newline;
- a random function is found by two calls at one point, and ``check`` never says OK for it.
"""

from __future__ import annotations

import json
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from frameworks import need
from typer.testing import CliRunner

from gradcli.cli.app import app
from gradcli.lang.program import load

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def run_json(*args: str, code: int = 0) -> dict:
    result = run(*args, "--json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def write(folder, text: str, name: str) -> str:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return str(path)


# --- 1. @torch.jit.script ----------------------------------------------------------------------------

SCRIPTED = """
    import torch

    @torch.jit.script
    def f(x, k: float = 2.0):
        return (torch.sin(x) * x * k).sum()
"""


def test_a_torchscript_function_is_evaluated_checked_and_differentiated_as_torch_does(tmp_path):
    torch = need("torch")
    path = write(tmp_path, SCRIPTED, "scripted.py")

    def expected(point, k=2.0):
        x = torch.tensor(point, dtype=torch.float64, requires_grad=True)
        out = (torch.sin(x) * x * k).sum()
        return out.item(), torch.autograd.grad(out, x)[0].tolist()

    found = run_json("eval", f"{path}:f", "--at", "x=[0.5,-1.5]")
    assert (found["value"], found["gradient"]) == (expected([0.5, -1.5])[0], {"x": expected([0.5, -1.5])[1]})
    assert found["framework"] == "torch"
    given = run_json("eval", f"{path}:f", "--at", "x=[0.5,-1.5],k=3")  # k: a TorchScript float, a Python number
    assert (given["value"], given["gradient"]) == (expected([0.5, -1.5], 3.0)[0], {"x": expected([0.5, -1.5], 3.0)[1]})
    jacobian = run_json("jacobian", f"{path}:f", "--at", "x=[0.5,-1.5]")
    assert (jacobian["outputs"], jacobian["jacobian"]) == (["f"], [expected([0.5, -1.5])[1]])
    hessian = run_json("hessian", f"{path}:f", "--at", "x=[0.5,-1.5]")["hessian"]
    x = torch.tensor([0.5, -1.5], dtype=torch.float64)
    np.testing.assert_allclose(
        hessian, torch.autograd.functional.hessian(lambda x: (torch.sin(x) * x * 2.0).sum(), x), rtol=1e-14
    )
    checked = run_json("check", f"{path}:f", "--at", "x=[0.5,-1.5]")
    assert checked["ok"] is True and checked["verdict"].startswith("OK: PyTorch agrees with")
    assert checked["gradient"] == {"x": expected([0.5, -1.5])[1]}
    assert checked["checks"]["complex_step"]["ok"] is True  # its complex inputs give complex outputs: no refusal


def test_a_torchscript_number_parameter_is_not_differentiated(tmp_path):
    need("torch")
    path = write(tmp_path, SCRIPTED, "scripted.py")
    result = run("eval", f"{path}:f", "--at", "x=1,k=3", "--wrt", "k")
    assert result.exit_code == 2
    said = [line for line in result.stderr.splitlines(keepends=True) if "torch.jit.script` is deprecated" not in line]
    assert "".join(said) == (
        f"error: --wrt k: {path}:f takes k as a Python number (its TorchScript type is float), "
        "which is not differentiated\n"
    )


# --- 2. defaults and jax.jit's static arguments -----------------------------------------------------------

DEFAULTS = """
    import gradcli as gc

    def f(x, k=2.0):
        return gc.sin(x) * k
"""


def test_a_parameter_with_a_default_is_optional_and_differentiated_only_when_given(tmp_path):
    path = write(tmp_path, DEFAULTS, "defaults.py")
    found = run_json("eval", f"{path}:f", "--at", "x=0.5")
    assert found == {"value": np.sin(0.5) * 2.0, "gradient": {"x": np.cos(0.5) * 2.0}}
    given = run_json("eval", f"{path}:f", "--at", "x=0.5,k=3")
    assert given == {"value": np.sin(0.5) * 3.0, "gradient": {"x": np.cos(0.5) * 3.0, "k": np.sin(0.5)}}
    assert run("eval", f"{path}:f", "--at", "x=0.5,k=3").stderr == ""  # k is used: no "not used" warning
    drawn = run("graph", f"{path}:f", "--format", "text")  # without --at: k keeps its default
    assert drawn.exit_code == 0 and [line.split(" =")[0] for line in drawn.stdout.splitlines()][:1] == ["x"]
    assert "k = variable" not in drawn.stdout


def test_torch_and_jax_parameters_with_defaults_are_optional(tmp_path):
    torch = need("torch")
    jax = need("jax")
    torch_path = write(tmp_path, "import torch\ndef f(x, k=2.0):\n    return (torch.sin(x) * k).sum()\n", "t.py")
    jax_path = write(
        tmp_path, "import jax.numpy as jnp\ndef f(x, k=2.0):\n    return jnp.sum(jnp.sin(x) * k)\n", "j.py"
    )
    x = torch.tensor([0.5, 1.0], dtype=torch.float64, requires_grad=True)
    out = (torch.sin(x) * 2.0).sum()
    assert run_json("eval", f"{torch_path}:f", "--at", "x=[0.5,1]")["gradient"] == {
        "x": torch.autograd.grad(out, x)[0].tolist()
    }
    found = run_json("eval", f"{jax_path}:f", "--at", "x=[0.5,1]")
    expected = jax.grad(lambda x: jax.numpy.sum(jax.numpy.sin(x) * 2.0))(jax.numpy.array([0.5, 1.0]))
    assert found["gradient"] == {"x": np.asarray(expected).tolist()}


STATIC = """
    from functools import partial

    import jax
    import jax.numpy as jnp

    @partial(jax.jit, static_argnames=("n",))
    def named(x, n):
        y = x
        for _ in range(n):  # a Python loop: n must be a Python int
            y = jnp.sin(y)
        return jnp.sum(y)

    @partial(jax.jit, static_argnums=(1,))
    def numbered(x, n=3):
        return jnp.sum(x ** n)
"""


def test_jax_jit_static_arguments_are_python_numbers_and_optional_with_a_default(tmp_path):
    jax = need("jax")
    jnp = jax.numpy
    path = write(tmp_path, STATIC, "static.py")

    def named(x, n):
        for _ in range(n):
            x = jnp.sin(x)
        return jnp.sum(x)

    point = jnp.array([0.5, 1.5])
    found = run_json("eval", f"{path}:named", "--at", "x=[0.5,1.5],n=2")
    assert found["value"] == float(named(point, 2))
    assert found["gradient"] == {"x": np.asarray(jax.grad(named)(point, 2)).tolist()}  # n: not a variable
    default = run_json("eval", f"{path}:numbered", "--at", "x=[0.5,1.5]")
    assert default["gradient"] == {"x": np.asarray(jax.grad(lambda x: jnp.sum(x**3))(point)).tolist()}
    given = run_json("jacobian", f"{path}:numbered", "--at", "x=[0.5,1.5],n=2")
    assert given["jacobian"] == [np.asarray(jax.grad(lambda x: jnp.sum(x**2))(point)).tolist()]
    hessian = run_json("hessian", f"{path}:numbered", "--at", "x=2,n=4")["hessian"]
    assert hessian == [[float(jax.hessian(lambda x: x**4)(2.0))]]
    assert run_json("check", f"{path}:named", "--at", "x=[0.5,1.5],n=2")["ok"] is True
    assert run_json("check", f"{path}:named", "--at", "x=[0.5,1.5],n=2", "--blame")["ok"] is True
    assert run_json("why", f"{path}:named", "--at", "x=[0.5,1.5],n=2")["healthy"] == ["x"]
    drawn = run("graph", f"{path}:named", "--at", "x=[0.5,1.5],n=2", "--format", "text")
    assert drawn.exit_code == 0, drawn.output
    assert [line.split(" = ")[1].split("(")[0] for line in drawn.stdout.splitlines()[1:]] == [
        "sin",
        "sin",
        "reduce_sum",
    ]
    refused = run("eval", f"{path}:named", "--at", "x=1,n=2", "--wrt", "n")
    assert (refused.exit_code, refused.stderr) == (
        2,
        f"error: --wrt n: {path}:named takes n as a Python number (a static argument of jax.jit), "
        "which is not differentiated\n",
    )
    missing = run("eval", f"{path}:named", "--at", "x=1")
    assert missing.stderr == f"error: {path}:named needs --at n=... (its parameters: x, n (static))\n"
    many = run("eval", f"{path}:named", "--at", "x=1,n=[1,2]")
    assert many.exit_code == 2 and many.stderr.startswith("error: --at n: ") and many.stderr.count("\n") == 1


# --- 3. the file's folder is importable while it is loaded -------------------------------------------------


def _folder_with_helper(folder, factor: int) -> str:
    folder.mkdir()
    (folder / "helper.py").write_text(f"FACTOR = {factor}\n\ndef scaled(x):\n    return x * FACTOR\n")
    return write(folder, "import helper\n\ndef f(x):\n    return helper.scaled(x) + 1\n", "uses.py")


def test_the_users_file_imports_a_helper_beside_it_and_leaks_nothing(tmp_path):
    path = _folder_with_helper(tmp_path / "one", 3)
    before = list(sys.path)
    assert run_json("eval", f"{path}:f", "--at", "x=2") == {"value": 7.0, "gradient": {"x": 3.0}}
    assert sys.path == before and "helper" not in sys.modules


def test_two_folders_each_import_their_own_helper_in_threads(tmp_path):
    paths = [_folder_with_helper(tmp_path / name, factor) for name, factor in (("a", 2), ("b", 5))]
    before = list(sys.path)

    def gradient(path: str) -> float:
        program = load(f"{path}:f")
        evaluation = program.run({"x": 1.0}, ["x"])
        evaluation.outputs[0].backward()
        return float(evaluation.inputs["x"].grad.item())

    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(gradient, paths * 4))
    assert found == [2.0, 5.0] * 4
    assert sys.path == before and "helper" not in sys.modules


# --- 4. None, a dict, complex values returned ------------------------------------------------------------------

RETURNS = {
    "gradcli": "import gradcli as gc\n\ndef none(x):\n    y = x * 2\n\ndef cplx(x):\n    return x * 1j\n",
    "torch": "import torch\n\ndef none(x):\n    y = x * 2\n\ndef cplx(x):\n    return torch.stack([x * 1j, x + 0j])\n\n"
    "def d(x):\n    return {'loss': x.sum()}\n",
    "jax": "import jax.numpy as jnp\n\ndef none(x):\n    y = x * 2\n\ndef cplx(x):\n    return x * 1j\n\n"
    "def d(x):\n    return {'loss': x.sum()}\n",
}


@pytest.mark.parametrize("framework", ["gradcli", "torch", "jax"])
def test_a_function_returning_none_is_one_error_line_on_every_command(tmp_path, framework):
    if framework != "gradcli":
        need(framework)
    path = write(tmp_path, RETURNS[framework], f"returns_{framework}.py")
    for command in ("eval", "jacobian", "hessian", "check", "graph"):
        result = run(command, f"{path}:none", "--at", "x=1")
        assert (command, result.exit_code, result.stderr, result.stdout) == (
            command, 2, f"error: {path}:none returned None: return the output (did you forget `return`?)\n", ""
        )  # fmt: skip


@pytest.mark.parametrize("framework", ["gradcli", "torch", "jax"])
def test_complex_values_from_real_inputs_are_refused_not_cut_to_their_real_part(tmp_path, framework):
    if framework != "gradcli":
        need(framework)
    path = write(tmp_path, RETURNS[framework], f"returns_{framework}.py")
    for command in ("eval", "jacobian", "graph"):
        result = (
            run(command, f"{path}:cplx", "--at", "x=1", "--seed", "ones")
            if command == "eval"
            else run(command, f"{path}:cplx", "--at", "x=1")
        )
        assert (command, result.exit_code, result.stderr) == (
            command, 2, f"error: {path}:cplx returned complex values from real inputs: gradcli differentiates "
            "real-valued functions; return a real value (its real part, its absolute value, or both as two outputs)\n",
        )  # fmt: skip


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_a_returned_dict_is_one_line_that_names_what_to_return(tmp_path, framework):
    need(framework)
    path = write(tmp_path, RETURNS[framework], f"returns_{framework}.py")
    what = "a tensor" if framework == "torch" else "an array"
    result = run("eval", f"{path}:d", "--at", "x=1")
    assert (result.exit_code, result.stderr) == (
        2, f"error: {path}:d returned a dict: return {what}, a number, or a tuple or list of them\n"
    )  # fmt: skip


# --- 5. messages -------------------------------------------------------------------------------------------


def test_a_non_finite_gradient_names_the_users_function_not_typer_or_an_internal_object(tmp_path):
    need("torch")
    path = write(
        tmp_path, "import torch\n\ndef f(x):\n    return torch.where(x > 0, torch.sqrt(x), 0 * x).sum()\n", "w.py"
    )
    said = f"the derivative of {path}:f (by PyTorch) gave nan from input -1"
    result = run("eval", f"{path}:f", "--at", "x=-1")
    assert (result.exit_code, result.stderr) == (0, f"warning: non-finite gradient: {said}\n")
    checked = run_json("check", f"{path}:f", "--at", "x=-1", code=1)
    assert checked["nonfinite"] == f"the gradient with respect to x is not finite: nan ({said})"


def test_a_message_of_several_lines_is_one_line_without_escaped_newlines(tmp_path):
    path = write(tmp_path, "def f(x):\n    raise ValueError('first line\\nsecond line\\n')\n", "raises.py")
    result = run("eval", f"{path}:f", "--at", "x=1")
    assert (result.exit_code, result.stderr) == (2, f"error: {path}:f raised ValueError: first line second line\n")
    broken = write(tmp_path, "raise RuntimeError('at import\\nwith detail')\ndef f(x):\n    return x\n", "broken.py")
    result = run("eval", f"{broken}:f", "--at", "x=1")
    assert result.stderr == f"error: {broken}: importing it raised RuntimeError: at import with detail\n"


# --- 6. random functions ------------------------------------------------------------------------------------

RANDOM = {
    "gradcli": "import numpy as np\nimport gradcli as gc\n\ndef f(x):\n    return (x * np.random.rand()).sum()\n\n"
    "def fixed(x):\n    return (x * np.random.default_rng(0).random()).sum()\n",
    "torch": "import torch\nimport torch.nn.functional as F\n\ndef f(x):\n    return F.dropout(x, 0.5, training=True).sum()\n\n"
    "def noise(x):\n    return (x * torch.randn(())).sum()\n\n"
    "def fixed(x):\n    torch.manual_seed(0)\n    return F.dropout(x, 0.5, training=True).sum()\n",
}


@pytest.mark.parametrize("framework", ["gradcli", "torch"])
def test_random_difference_says_whether_two_calls_at_one_point_differ(tmp_path, framework):
    if framework != "gradcli":
        need(framework)
    path = write(tmp_path, RANDOM[framework], f"random_{framework}.py")
    point = {"x": np.arange(1.0, 65.0)}  # (dropout keeps all 64 or none at both calls: once in 2^63)
    assert load(f"{path}:fixed").random_difference(point) is None
    assert load(f"{path}:f").random_difference(point) > 0
    assert load("x * 2").random_difference(point) is None  # an expression is never random


@pytest.mark.parametrize(("framework", "name"), [("gradcli", "f"), ("torch", "f"), ("torch", "noise")])
def test_check_never_says_ok_for_a_random_function(tmp_path, framework, name):
    if framework != "gradcli":
        need(framework)
    path = write(tmp_path, RANDOM[framework], f"random_{framework}.py")
    point = "x=[" + ",".join(str(k) for k in range(1, 25)) + "]"  # (dropout's two masks agree once in 2^24)
    result = run("check", f"{path}:{name}", "--at", point)
    verdict = result.stdout.splitlines()[-1]
    assert result.exit_code == 1
    assert verdict.startswith(f"RANDOM: {path}:{name} is random at this point (two calls differ by ")
    assert "torch.manual_seed(0)" in verdict and "model.eval()" in verdict
    found = run_json("check", f"{path}:{name}", "--at", point, code=1)
    assert (found["ok"], found["random"], found["verdict"][:8]) == (False, True, "RANDOM: ")
    assert found["random_difference"] > 0
    fixed = run_json("check", f"{path}:fixed", "--at", point)
    assert fixed["ok"] is True and "random" not in fixed
