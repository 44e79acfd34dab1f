"""The file.py:func road gives the same numbers as the expression road (issue 12, issue 13).

jacobian and hessian of a Python function (every --mode), check of a function that leaves
gradcli's operations, eval's warning for it, and what a function may return.
"""

from __future__ import annotations

import json
import math
import textwrap

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app

runner = CliRunner()


def run(*args: str, input: str | None = None):
    result = runner.invoke(app, expression_after_dashes(list(args)), input=input)
    assert "Traceback" not in result.output + result.stderr, result.output + result.stderr
    return result


def run_json(*args: str):
    result = run(*args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def write(tmp_path, text: str, name: str = "funcs.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


FUNCS = """
    import gradcli as gc

    def polar(r, t):
        return r * gc.cos(t), r * gc.sin(t)

    def rosenbrock(x, y):
        return (1 - x) ** 2 + 100 * (y - x ** 2) ** 2

    def branchy(x, y):
        if x > 0:
            return x * x * y
        return -x * y
"""


@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
def test_jacobian_of_a_python_function_is_not_zero(tmp_path, mode):
    path = write(tmp_path, FUNCS)
    r, t = 2.0, 0.5
    doc = run_json("jacobian", f"{path}:polar", "--at", f"r={r},t={t}", "--mode", mode)
    expected = [[math.cos(t), -r * math.sin(t)], [math.sin(t), r * math.cos(t)]]
    np.testing.assert_allclose(doc["jacobian"], expected, rtol=1e-14)
    np.testing.assert_allclose(doc["value"], [r * math.cos(t), r * math.sin(t)], rtol=1e-14)
    assert doc["inputs"] == ["r", "t"] and doc["outputs"] == ["polar[0]", "polar[1]"]


@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
def test_jacobian_of_a_function_equals_the_expression_road(tmp_path, mode):
    path = write(tmp_path, FUNCS)
    at = ["--at", "x=1.5,y=-0.25"]
    from_function = run_json("jacobian", f"{path}:branchy", *at, "--mode", mode)["jacobian"]
    from_expression = run_json("jacobian", "x * x * y", *at, "--mode", mode)["jacobian"]
    assert from_function == from_expression == [[2 * 1.5 * -0.25, 1.5**2]]


def test_hessian_of_rosenbrock_as_a_python_function(tmp_path):
    path = write(tmp_path, FUNCS)
    x, y = 1.5, 0.5
    doc = run_json("hessian", f"{path}:rosenbrock", "--at", f"x={x},y={y}")
    expected = [[2 - 400 * (y - x * x) + 800 * x * x, -400 * x], [-400 * x, 200.0]]
    np.testing.assert_allclose(doc["hessian"], expected, rtol=1e-14)
    gradient = [doc["gradient"]["x"], doc["gradient"]["y"]]  # by variable (issue 16)
    np.testing.assert_allclose(gradient, [-2 * (1 - x) - 400 * x * (y - x * x), 200 * (y - x * x)], rtol=1e-14)
    expression = run_json("hessian", "(1 - x)^2 + 100*(y - x^2)^2", "--at", f"x={x},y={y}")
    assert doc["hessian"] == expression["hessian"]


def test_hessian_text_output_shows_the_numbers(tmp_path):
    path = write(tmp_path, FUNCS)
    result = run("hessian", f"{path}:rosenbrock", "--at", "x=1.5,y=0.5")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == ["x", "y", "x", "2502", "-600", "y", "-600", "200"]


def test_python_function_jacobian_and_hessian_match_torch(tmp_path):
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    path = write(tmp_path, FUNCS)
    x = torch.tensor([1.5, 0.5], dtype=torch.float64)
    rosen = lambda v: (1 - v[0]) ** 2 + 100 * (v[1] - v[0] ** 2) ** 2  # noqa: E731
    hess = torch.autograd.functional.hessian(rosen, x).numpy()
    np.testing.assert_allclose(run_json("hessian", f"{path}:rosenbrock", "--at", "x=1.5,y=0.5")["hessian"], hess,
                               rtol=1e-9)  # fmt: skip
    polar = lambda v: torch.stack([v[0] * torch.cos(v[1]), v[0] * torch.sin(v[1])])  # noqa: E731
    jac = torch.autograd.functional.jacobian(polar, torch.tensor([2.0, 0.5], dtype=torch.float64)).numpy()
    for mode in ("forward", "reverse"):
        doc = run_json("jacobian", f"{path}:polar", "--at", "r=2,t=0.5", "--mode", mode)
        np.testing.assert_allclose(doc["jacobian"], jac, rtol=1e-9)


# --- check and eval of a function that leaves gradcli's operations (issue 12) ----------------------

LEAVING = """
    import math

    import numpy as np

    import gradcli as gc

    def through_math(x):
        return math.sin(float(x))

    def through_item(x, y):
        return x * y.item()

    def through_data(x):
        return x * gc.tensor(np.sin(x.data))

    def printing(x):
        print(f"x is {float(x):.3f}")
        return x * x

    def stopped(x):
        return x ** 2 + gc.detach(x ** 3)

    def smooth(x, y):
        if y > 0:
            return gc.sin(x) * gc.exp(y)
        return x
"""


def test_check_of_a_function_through_math_is_a_mismatch_that_says_why(tmp_path):
    path = write(tmp_path, LEAVING)
    result = run("check", f"{path}:through_math", "--at", "x=1")
    assert result.exit_code == 1, result.stdout + result.stderr
    verdict = result.stdout.strip().splitlines()[-1]
    assert verdict.startswith("MISMATCH: d/dx: autograd 0 but finite differences 0.5403023")
    assert "leaves gradcli's operations (float() of a tensor that requires grad)" in verdict
    assert "does not connect x to the output" in verdict
    doc = json.loads(run("check", f"{path}:through_math", "--at", "x=1", "--json").stdout)
    assert doc["ok"] is False and doc["gradient"] == {"x": 0.0}
    fd = doc["checks"]["finite_difference"]
    assert fd["ok"] is False and fd["values"]["x"] == pytest.approx(math.cos(1.0), rel=1e-9)
    # the complex step no longer replays the record (which said 0): it cannot follow float()
    assert doc["checks"]["complex_step"]["ok"] is None


@pytest.mark.parametrize(
    ("name", "at", "wrong"), [("through_item", "x=1.5,y=2", "d/dy"), ("through_data", "x=1", "d/dx")]
)
def test_check_catches_item_and_numpy_on_data(tmp_path, name, at, wrong):
    path = write(tmp_path, LEAVING)
    result = run("check", f"{path}:{name}", "--at", at)
    assert result.exit_code == 1, result.stdout
    verdict = result.stdout.strip().splitlines()[-1]
    assert verdict.startswith(f"MISMATCH: {wrong}:") and "leaves gradcli's operations" in verdict


def test_check_finite_differences_call_the_function_itself_like_torch(tmp_path):
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    path = write(tmp_path, LEAVING)
    x = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    (torch.sin(x),)[0].backward()  # the true derivative of math.sin(float(x))
    doc = json.loads(run("check", f"{path}:through_math", "--at", "x=1", "--json").stdout)
    assert doc["checks"]["finite_difference"]["values"]["x"] == pytest.approx(x.grad.item(), rel=1e-9)


def test_check_of_a_correct_function_uses_the_complex_step_through_the_function(tmp_path):
    path = write(tmp_path, LEAVING)
    doc = run_json("check", f"{path}:smooth", "--at", "x=0.5,y=0.25")
    assert doc["ok"] is True
    cs = doc["checks"]["complex_step"]
    assert cs["ok"] is True
    assert cs["values"]["x"] == pytest.approx(math.cos(0.5) * math.exp(0.25), rel=1e-14)
    assert cs["values"]["y"] == pytest.approx(math.sin(0.5) * math.exp(0.25), rel=1e-14)


def test_detach_in_a_function_is_judged_as_in_an_expression(tmp_path):
    path = write(tmp_path, LEAVING)
    function = run_json("check", f"{path}:stopped", "--at", "x=1.25")
    expression = run_json("check", "x^2 + detach(x^3)", "--at", "x=1.25")
    assert function["ok"] is expression["ok"] is True
    assert function["gradient"] == expression["gradient"] == {"x": 2.5}
    result = run("eval", f"{path}:stopped", "--at", "x=1.25")
    assert result.exit_code == 0 and result.stderr == ""


def test_eval_warns_when_a_function_leaves_autograd(tmp_path):
    path = write(tmp_path, LEAVING)
    result = run("eval", f"{path}:through_math", "--at", "x=1", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"value": math.sin(1.0), "gradient": {"x": 0.0}}
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: autograd misses a derivative: ")
    assert "leaves gradcli's operations (float() of a tensor that requires grad)" in lines[0]
    result = run("eval", f"{path}:through_item", "--at", "x=1.5,y=2")
    assert result.exit_code == 0 and result.stderr.startswith("warning: ") and "(.item()" in result.stderr


def test_eval_does_not_warn_for_a_function_that_only_prints(tmp_path):
    path = write(tmp_path, LEAVING)
    result = run("eval", f"{path}:printing", "--at", "x=3", "--json")
    assert result.exit_code == 0 and result.stderr == ""
    assert json.loads(result.stdout.splitlines()[-1]) == {"value": 9.0, "gradient": {"x": 6.0}}


# --- which argument is a Python function (issue 13) ---------------------------------------------


def test_a_comment_naming_a_py_file_is_an_expression(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_json("eval", "x # see helper.py:f", "--at", "x=1") == {"value": 1.0, "gradient": {"x": 1.0}}


def test_a_file_whose_name_holds_a_comment_is_never_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "ran"
    (tmp_path / "x # note.py").write_text(f"open({str(marker)!r}, 'w').close()\ndef f(x):\n    return 7 * x\n")
    assert run_json("eval", "x # note.py:f", "--at", "x=2") == {"value": 2.0, "gradient": {"x": 1.0}}
    assert not marker.exists()
    # named explicitly, it is run
    assert run_json("eval", "--python", "x # note.py:f", "--at", "x=2") == {"value": 14.0, "gradient": {"x": 7.0}}
    assert marker.exists()


def test_a_missing_py_file_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run("eval", "helper.py:f", "--at", "x=1")
    assert (result.exit_code, result.stderr) == (2, "error: helper.py: no such file\n")


def test_python_option_on_every_command_that_takes_expr(tmp_path):
    folder = tmp_path / "my functions"
    folder.mkdir()
    path = write(folder, FUNCS, "polar # v2.py")
    spec = f"{path}:polar"
    doc = run_json("jacobian", "--python", spec, "--at", "r=2,t=0.5")
    np.testing.assert_allclose(
        doc["jacobian"], [[math.cos(0.5), -2 * math.sin(0.5)], [math.sin(0.5), 2 * math.cos(0.5)]]
    )
    rosen = f"{path}:rosenbrock"
    assert run_json("hessian", "--python", rosen, "--at", "x=1.5,y=0.5")["hessian"] == [
        [2502.0, -600.0],
        [-600.0, 200.0],
    ]
    assert run_json("eval", "--python", rosen, "--at", "x=1,y=1") == {"value": 0.0, "gradient": {"x": 0.0, "y": 0.0}}
    assert run_json("check", "--python", rosen, "--at", "x=1.5,y=0.5")["ok"] is True
    graph = run_json("graph", "--python", rosen, "--at", "x=1,y=2")
    assert {n["name"]: n["grad"] for n in graph["nodes"] if n["kind"] == "variable"} == {"x": -400.0, "y": 200.0}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["x", "--python", "a.py:f"], "error: give the program either as EXPR or with --python FILE:FUNC, not both\n"),
        (
            ["--python", "a.py"],
            "error: --python 'a.py': give FILE:FUNC, a Python file and the name of a function in it\n",
        ),
        (
            ["--python", "a.py:1f"],
            "error: --python 'a.py:1f': give FILE:FUNC, a Python file and the name of a function in it\n",
        ),
        (["--python", "missing.py:f"], "error: missing.py: no such file\n"),
    ],
)
def test_python_option_errors(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    for command in ("eval", "jacobian", "hessian", "check", "graph"):
        result = run(command, *args, "--at", "x=1")
        assert (result.exit_code, result.stderr) == (2, message), command


def test_python_option_on_the_fast_command_path(tmp_path, monkeypatch, capsys):
    import sys

    from gradcli.cli import fast_command, main

    path = write(tmp_path, FUNCS)
    argv = ["eval", "--python", f"{path}:rosenbrock", "--at", "x=1.5,y=0.5", "--json"]
    assert fast_command(argv)["python"] == f"{path}:rosenbrock"
    monkeypatch.setattr(sys, "argv", ["gradcli", *argv])
    main()
    assert capsys.readouterr().out == run(*argv).stdout


# --- what a function may return (issue 13) ---------------------------------------------------------

RETURNS = """
    import gradcli as gc

    def nothing(x):
        x * 2

    def text(x):
        return "x"

    def mapping(x):
        return {"y": x}

    def generator(x):
        yield x

    def empty(x):
        return ()

    def words(x):
        return [x, "y"]

    def several(x):
        return [x, 2.0, x * x]

    def pair(x):
        return (x * 3, 1)
"""


RETURNS_TOLD = "return a tensor, a number, or a tuple or list of them"


@pytest.mark.parametrize(
    ("name", "what"),
    [("nothing", "None"), ("text", "a str"), ("mapping", "a dict"), ("generator", "a generator"),
     ("empty", "an empty tuple"), ("words", "a str")],
)  # fmt: skip
@pytest.mark.parametrize("command", ["eval", "jacobian", "hessian", "check", "graph"])
def test_a_function_returning_no_numbers_is_bad_input(tmp_path, name, what, command):
    path = write(tmp_path, RETURNS)
    result = run(command, f"{path}:{name}", "--at", "x=1")
    told = "return the output (did you forget `return`?)" if what == "None" else RETURNS_TOLD  # (issue 34)
    expected = f"error: {path}:{name} returned {what}: {told}\n"
    assert (result.exit_code, result.stderr) == (2, expected)


def test_a_function_returning_a_list_or_tuple_of_tensors_and_numbers_is_fine(tmp_path):
    path = write(tmp_path, RETURNS)
    doc = run_json("jacobian", f"{path}:several", "--at", "x=3")
    assert doc["jacobian"] == [[1.0], [0.0], [6.0]] and doc["value"] == [3.0, 2.0, 9.0]
    doc = run_json("jacobian", f"{path}:pair", "--at", "x=3")
    assert doc["jacobian"] == [[3.0], [0.0]] and doc["value"] == [9.0, 1.0]
    assert run_json("eval", f"{path}:several", "--at", "x=3", "--seed", "ones") == {
        "value": [3.0, 2.0, 9.0],
        "gradient": {"x": 7.0},
    }


LEAVING_MATRIX = """
    import math

    import gradcli as gc

    def polar(r, t):
        return r * math.cos(float(t)), r * gc.sin(t)

    def rosenbrock(x, y):
        return (1 - x) ** 2 + 100 * (y - float(x) ** 2) ** 2
"""


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jacobian_warns_when_a_function_leaves_autograd(tmp_path, mode):
    path = write(tmp_path, LEAVING_MATRIX)
    result = run("jacobian", f"{path}:polar", "--at", "r=2,t=0.5", "--mode", mode, "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["jacobian"][0][1] == 0.0  # what autograd sees
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: autograd misses a derivative: ")
    assert "polar[0] changes at" in lines[0] and "(float() of a tensor that requires grad)" in lines[0]


def test_hessian_warns_when_a_function_leaves_autograd(tmp_path):
    path = write(tmp_path, LEAVING_MATRIX)
    result = run("hessian", f"{path}:rosenbrock", "--at", "x=1.5,y=0.5")
    assert result.exit_code == 0 and result.stderr.startswith("warning: autograd misses a derivative: ")


def test_no_warning_for_functions_that_stay_in_gradcli(tmp_path):
    path = write(tmp_path, FUNCS)
    for args in (["jacobian", f"{path}:polar", "--at", "r=2,t=0.5"], ["hessian", f"{path}:rosenbrock", "--at", "x=1,y=2"],
                 ["eval", f"{path}:branchy", "--at", "x=-1,y=2"]):  # fmt: skip
        result = run(*args)
        assert (result.exit_code, result.stderr) == (0, ""), args
