"""The command line: the seeds as expressions, JSON, exit codes, inputs from everywhere."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app

runner = CliRunner()


def run(*args: str, input: str | None = None, env: dict[str, str] | None = None):
    result = runner.invoke(app, expression_after_dashes(list(args)), input=input, env=env)
    assert "Traceback" not in result.output + result.stderr, result.output + result.stderr
    return result


def run_json(*args: str, input: str | None = None):
    result = run(*args, "--json", input=input)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


# --- the seeds, as expressions ------------------------------------------------------------------


def test_seed_002_two_paths_add_up():
    assert run_json("eval", "(x + w) * (w + 1)", "--at", "x=2,w=1") == {"value": 6.0, "gradient": {"x": 2.0, "w": 5.0}}


def test_seed_003_case_1_and_2():
    assert run_json("eval", "(x + 1) * (x + 2)", "--at", "x=2")["gradient"] == {"x": 7.0}
    assert run_json("eval", "x * x * y", "--at", "x=2,y=3") == {"value": 12.0, "gradient": {"x": 12.0, "y": 4.0}}
    assert run_json("diff", "x * x * y") == {"derivative": {"x": "2*x*y", "y": "x^2"}}


def test_seed_003_case_3_vector_output_needs_a_seed():
    result = run("eval", "x * x", "--at", "x=[1,2]")
    assert result.exit_code == 2
    assert "grad can be implicitly created only for scalar outputs" in result.stderr
    assert "--seed" in result.stderr and "jacobian" in result.stderr
    assert run_json("eval", "x * x", "--at", "x=[1,2]", "--seed", "ones")["gradient"] == {"x": [2.0, 4.0]}
    assert run_json("eval", "sum(x * x)", "--at", "x=[1,2]")["gradient"] == {"x": [2.0, 4.0]}


def test_seed_000_rows_of_the_jacobian_of_mm():
    point = ["--at", "x=[[1,2]],y=[[3,4],[5,6]]", "--wrt", "x"]
    assert run_json("eval", "x @ y", *point, "--seed", "[[1,0]]")["gradient"] == {"x": [[3.0, 5.0]]}
    assert run_json("eval", "x @ y", *point, "--seed", "[[0,1]]")["gradient"] == {"x": [[4.0, 6.0]]}


def test_seed_004_dot_sum_and_detach():
    x = ["--at", "x=[0,1,2,3]"]
    assert run_json("eval", "2 * dot(x, x)", *x) == {"value": 28.0, "gradient": {"x": [0.0, 4.0, 8.0, 12.0]}}
    assert run_json("eval", "sum(x)", *x)["gradient"] == {"x": [1.0, 1.0, 1.0, 1.0]}
    assert run_json("eval", "sum(x * x)", *x)["gradient"] == {"x": [0.0, 2.0, 4.0, 6.0]}
    assert run_json("eval", "u = detach(x * x); sum(u * x)", *x)["gradient"] == {"x": [0.0, 1.0, 4.0, 9.0]}
    assert run_json("eval", "x^2 + detach(x^3)", "--at", "x=1") == {"value": 2.0, "gradient": {"x": 2.0}}


def test_seed_001_loss_of_the_small_network():
    program = "b = w1 * a; c = w2 * a; d = w3 * b + w4 * c; L = 10 - d"
    doc = run_json("eval", program, "--at", "a=2,w1=3,w2=5,w3=7,w4=11")
    assert doc["value"] == 10 - (7 * 3 * 2 + 11 * 5 * 2)
    assert doc["gradient"] == {"a": -(7 * 3 + 11 * 5), "w1": -14.0, "w2": -22.0, "w3": -6.0, "w4": -10.0}


SEED_004_F = Path(__file__).resolve().parent.parent / "examples" / "cli" / "seed004_f.py"


@pytest.mark.parametrize("a", [0.5946, -0.3, 7.0])
def test_seed_004_python_function_with_control_flow(a):
    doc = run_json("eval", f"{SEED_004_F}:f", "--at", f"a={a}")
    assert doc["gradient"]["a"] == pytest.approx(doc["value"] / a, rel=1e-15)


# --- options and inputs ----------------------------------------------------------------------------


def test_plain_output_when_not_a_terminal():
    result = run("eval", "(x + w) * (w + 1)", "--at", "x=2,w=1")
    assert result.exit_code == 0
    assert result.stdout == "value = 6\nd/dx  = 2\nd/dw  = 5\n"
    assert "\x1b[" not in result.stdout


def test_wrt_selects_and_orders_and_unused_variables_get_zero():
    assert run_json("eval", "x * y", "--at", "x=2,y=3", "--wrt", "y,x")["gradient"] == {"y": 2.0, "x": 3.0}
    assert run_json("eval", "x^2", "--at", "x=2,z=5", "--wrt", "x,z")["gradient"] == {"x": 4.0, "z": 0.0}
    result = run("eval", "x^2", "--at", "x=2", "--wrt", "q")
    assert result.exit_code == 2 and "'q' is neither in the expression nor given with --at" in result.stderr


def test_expression_starting_with_a_minus_after_dashes():
    assert run_json("eval", "--", "-x^2", "--at", "x=3") == {"value": -9.0, "gradient": {"x": -6.0}}


def test_expression_from_stdin_and_from_a_file(tmp_path):
    assert run_json("eval", "-", "--at", "x=2", input="x^3")["gradient"] == {"x": 12.0}
    program = tmp_path / "prog.txt"
    program.write_text("a = x + w\nb = w + 1  # the second factor\ny = a * b\n")
    assert run_json("eval", "-f", str(program), "--at", "x=2,w=1")["gradient"] == {"x": 2.0, "w": 5.0}
    assert run_json("eval", "-f", "-", "--at", "x=2,w=1", input=program.read_text())["value"] == 6.0


def test_values_are_expressions_of_the_language():
    doc = run_json("eval", "sin(x)", "--at", "x=pi/2")
    assert doc["value"] == 1.0
    assert run_json("eval", "x * e", "--at", "x=2")["value"] == pytest.approx(2 * np.e, rel=1e-16)
    assert run_json("eval", "x * e", "--at", "x=2,e=10")["value"] == 20.0  # given a value, e is a variable


def test_json_keeps_full_precision_and_writes_non_finite_values_as_strings():
    doc = run_json("eval", "x / 3", "--at", "x=1")
    assert doc["value"] == 1 / 3 and float(repr(doc["value"])) == 1 / 3
    result = run("eval", "log(x)", "--at", "x=-1", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"value": "nan", "gradient": {"x": -1.0}}
    assert "warning: non-finite value: 'log(x)' at column 1 gave nan" in result.stderr
    assert json.loads(run("eval", "1/x", "--at", "x=0", "--json").stdout)["value"] == "inf"


def test_points_file_is_evaluated_in_one_pass(tmp_path):
    points = tmp_path / "points.csv"
    points.write_text("x,y\n1,2\n3,4\n0.5,-1\n")
    result = run("eval", "x^2 * y", "--points", str(points))
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [  # each point as the file wrote it, then what was computed
        "x,y,value,grad_x,grad_y",
        "1,2,2.0,4.0,1.0",
        "3,4,36.0,24.0,9.0",
        "0.5,-1,-0.25,-1.0,0.25",
    ]
    lines = run("eval", "x^2 * y", "--points", str(points), "--json").stdout.splitlines()
    assert [json.loads(line) for line in lines][1] == {"value": 36.0, "gradient": {"x": 24.0, "y": 9.0}}


def test_points_with_many_rows(tmp_path):
    n = 100_000
    x = np.linspace(-1, 1, n)
    path = tmp_path / "many.csv"
    path.write_text("x\n" + "\n".join(map(repr, x.tolist())) + "\n")
    rows = run("eval", "sin(x) * x", "--points", str(path)).stdout.splitlines()
    assert len(rows) == n + 1
    got = np.array([r.split(",") for r in rows[1:]], dtype=float)
    np.testing.assert_array_equal(got[:, 1], np.sin(x) * x)
    np.testing.assert_array_equal(got[:, 2], np.cos(x) * x + np.sin(x))


def test_points_file_errors_name_the_row_and_column(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("x,y\n1,2\n3,oops\n")
    result = run("eval", "x * y", "--points", str(bad))
    assert result.exit_code == 2 and "row 3, column 'y': 'oops' is not a number" in result.stderr
    bad.write_text("x,y\n1,2,3\n")
    assert "row 2 has 3 values, the header names 2" in run("eval", "x * y", "--points", str(bad)).stderr
    result = run("eval", "sum(x)", "--points", str(tmp_path / "missing.csv"))
    assert result.exit_code == 2 and "no such file" in result.stderr
    bad.write_text("x\n1\n2\n")  # sum() reduces each point alone (per-point semantics)
    assert run("eval", "sum(x)", "--points", str(bad)).stdout == "x,value,grad_x\n1,1.0,1.0\n2,2.0,1.0\n"


def test_diff_gives_simplified_sympy_derivatives_and_latex():
    assert run("diff", "x^2 * sin(x)", "--wrt", "x").stdout == "d/dx = x*(x*cos(x) + 2*sin(x))\n"
    assert run_json("diff", "log(x, 2)")["derivative"] == {"x": "1/(x*log(2))"}
    assert run_json("diff", "x^2 * sin(x)", "--latex")["derivative"] == {
        "x": "x \\left(x \\cos{\\left(x \\right)} + 2 \\sin{\\left(x \\right)}\\right)"
    }
    assert run_json("diff", "sum(x * x)", "--at", "x=[1,2,3]")["derivative"] == {"x": "2*x"}
    assert run_json("diff", "detach(x^2) * x")["derivative"] == {"x": "detach(x^2)"}


def test_ops_lists_every_function_from_the_table():
    doc = run_json("ops")
    names = {op["name"]: op for op in doc["ops"]}
    for name in [
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "atan2",
        "sinh",
        "cosh",
        "tanh",
        "exp",
        "log",
        "log2",
        "log10",
        "log1p",
        "expm1",
        "sqrt",
        "abs",
        "sign",
        "min",
        "max",
        "relu",
        "sigmoid",
        "softplus",
        "erf",
        "sum",
        "mean",
        "prod",
        "dot",
        "norm",
        "logsumexp",
        "where",
        "detach",
    ]:
        assert name in names, name
    assert names["sin"] == {
        "name": "sin",
        "arity": 1,
        "group": "elementwise",
        "derivative": "d/dx = cos(x)",
        "derivatives": {"x": "cos(x)"},
        "differentiates": "x",
        "sympy": True,
        "complex_analytic": True,
        "doc": "sine",
        "backward": "SinBackward0",
    }
    assert names["log"]["arity"] == [1, 2]
    assert set(doc["operators"]) >= {"+", "-", "*", "/", "^", "@", "<"}
    text = run("ops").stdout
    header = ["function", "group", "arity", "gradient", "SymPy", "derivative", "what", "it", "computes"]
    assert text.splitlines()[0].split() == header


def test_every_command_has_help_with_an_example():
    from gradcli.cli.app import command_names

    assert "check" in command_names()  # the registry, not a list of names kept by hand (check was missing)
    for command in command_names():
        result = run(command, "--help")
        assert result.exit_code == 0
        assert "Example: gradcli " + command in result.stdout


# --- the installed program ---------------------------------------------------------------------------

GRADCLI = shutil.which("gradcli")


def _installed(*args: str, input: str | None = None, env: dict[str, str] | None = None):
    command = [GRADCLI] if GRADCLI else [sys.executable, "-m", "gradcli"]
    return subprocess.run(
        [*command, *args], input=input, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=120
    )


def test_installed_command_and_python_dash_m():
    done = _installed("eval", "(x + w) * (w + 1)", "--at", "x=2,w=1", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["gradient"] == {"x": 2.0, "w": 5.0}
    module = subprocess.run(
        [sys.executable, "-m", "gradcli", "eval", "--", "-x^2", "--at", "x=3"], capture_output=True, text=True
    )
    assert module.returncode == 0 and module.stdout == "value = -9\nd/dx  = -6\n"


def test_installed_command_reports_bad_input_without_a_traceback():
    done = _installed("eval", "sin((x + 1)", "--at", "x=1")
    assert done.returncode == 2
    assert done.stderr == "error: expected ')' to close '(' at column 4\n  sin((x + 1)\n             ^\n"


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
@pytest.mark.parametrize("no_color", [False, True])
def test_terminal_output_is_a_table_and_no_color_removes_colour(no_color):
    import pty

    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update({"TERM": "xterm-256color", "COLUMNS": "100"})
    if no_color:
        env["NO_COLOR"] = "1"
    command = [GRADCLI] if GRADCLI else [sys.executable, "-m", "gradcli"]
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [*command, "eval", "(x + w) * (w + 1)", "--at", "x=2,w=1"], stdout=follower, stderr=follower, env=env
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    process.wait(timeout=60)
    os.close(leader)
    text = b"".join(chunks).decode()
    assert process.returncode == 0
    assert "│" in text and "value" in text and "d/dw" in text  # a rich table (NO_COLOR too: issue 16)
    if no_color:
        assert "\x1b[" not in text
    else:
        assert "\x1b[" in text  # coloured


def test_examples_directory_runs():
    examples = Path(__file__).resolve().parent.parent / "examples"
    done = subprocess.run([sys.executable, str(examples / "quickstart.py")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "tensor(5.)" in done.stdout


# --- eval's fast path: the console script reads plain eval arguments without typer --------------

FAST_CASES = [
    ["eval", "(x + w) * (w + 1)", "--at", "x=2,w=1"],
    ["eval", "--at", "x=2", "--at=w=1", "(x + w) * (w + 1)", "--json"],
    ["eval", "x*y", "--at", "x=2,y=3", "--wrt", "y"],
    ["eval", "v * 2", "--at", "v=[1,2]", "--seed", "ones"],
    ["eval", "x +* 2", "--at", "x=1"],
    ["eval", "log(x)", "--at", "x=-1"],
    ["eval", "x"],
    ["eval"],
    ["check", "x^2", "--at", "x=1"],
    ["check", "sin(x) * y", "--at", "x=0.5,y=2", "--json", "--rtol", "1e-6", "--method", "fd"],
    ["check", "x^3", "--at", "x=2", "--expect", "x=12", "--digits", "4"],
    ["check", "x^3", "--at", "x=2", "--expect", "x=11"],
    ["diff", "x^2 * y", "--wrt", "x"],
    ["diff", "-x^2"],
    ["diff", "sin(x)", "--latex", "--sympy-timeout", "5"],
    ["jacobian", "x * y, x + y", "--at", "x=2,y=3", "--json"],
    ["hessian", "x^2 * y", "--at", "x=2,y=3", "--format", "csv"],
    ["check", "-f", str(SEED_004_F.with_name("seed002.gc")), "--at", "x=2,w=1"],
    ["jacobian", f"{SEED_004_F}:f", "--at", "a=0.5"],
    ["check", "--python", f"{SEED_004_F}:f", "--at", "a=-1.5", "--json"],
    ["diff", "-f", str(SEED_004_F.with_name("seed002.gc")), "--wrt", "w"],
    ["check", "-", "--at", "x=3,y=2"],
    ["hessian", "-f", "-", "--at", "x=3,y=2"],
]
STDIN = "x^2 * y\n"  # what the cases reading '-' read


@pytest.mark.parametrize("argv", FAST_CASES, ids=[" ".join(a) for a in FAST_CASES])
def test_the_fast_command_path_prints_what_typer_prints(argv, monkeypatch, capsys):
    from gradcli.cli import fast_command, main

    assert fast_command(argv) is not None
    monkeypatch.setattr(sys, "argv", ["gradcli", *argv])
    monkeypatch.setattr(sys, "stdin", io.StringIO(STDIN))
    monkeypatch.setenv("NO_COLOR", "1")
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code or 0
    fast = capsys.readouterr()
    slow = CliRunner().invoke(app, argv, input=STDIN)
    assert (code, fast.out, fast.err) == (slow.exit_code, slow.stdout, slow.stderr)


@pytest.mark.parametrize(
    "argv",
    [["eval", "--help"], ["eval", "-h"], ["eval", "x", "--bogus"], ["eval", "x", "--at"], ["eval", "x", "y"],
     ["eval", "--", "-x^2", "--at", "x=3"], ["eval", "x", "--json=1"], ["graph", "x^2"], ["why", "x"],
     ["check", "x", "--rtol", "abc"], ["check", "x", "--rtol", "-1"], ["check", "x", "--sympy-timeout", "nan"], ["check", "x", "--jobs", "1.5"], ["diff", "x", "--help"]],
)  # fmt: skip
def test_anything_but_plain_eval_goes_to_typer(argv):
    from gradcli.cli import fast_command

    assert fast_command(argv) is None


def test_the_fast_command_path_knows_exactly_evals_options():
    import typer.main

    from gradcli.cli import EVAL_OPTIONS

    command = typer.main.get_command(app).commands["eval"]
    options = {o for p in command.params for o in p.opts if o.startswith("-")} - {"-h", "--help"}
    assert options == set(EVAL_OPTIONS)
    names = {p.name for p in command.params if p.opts[0].startswith("-")}
    renamed = {"as_json": "json"}
    assert {renamed.get(v[0], v[0]) for v in EVAL_OPTIONS.values()} == names
