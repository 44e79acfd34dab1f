"""Issue 29: ``FILE.py:f`` computing with PyTorch or JAX is one more kind of program, and every command
gives the framework's own numbers: compared here with PyTorch's ``torch.autograd`` and JAX's
``jax.grad``/``jax.jacrev``/``jax.hessian`` run directly, bit for bit where the operations are the
same, on every road (``FILE.py:f``, ``--python``, ``--framework``, ``--points`` in one chunk and in
many, a thread pool, check and check --cases), and a missing framework says how to install it (exit 3).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from frameworks import need
from typer.testing import CliRunner

from gradcli.cli.app import app
from gradcli.lang.compute import program_hessian, program_jacobian, value_and_grad
from gradcli.lang.program import load

runner = CliRunner()

TORCH_MODEL = """
import torch

def g(x, w):
    return torch.sin(x) * torch.exp(w) + x ** 3

def v(x):
    return torch.stack([x.sum(), (x ** 2).sum(), torch.tanh(x).prod()])

def both(x, y):
    return torch.sin(x) * y, torch.cos(x * y)

def kinked(x, w):
    return torch.relu(x) * w + torch.abs(w)

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
    return Twice.apply(x).sum()

torch.manual_seed(0)
layer = torch.nn.Linear(3, 2).double()

def net(x):
    return torch.tanh(layer(x)).sum()
"""

JAX_MODEL = """
import jax
import jax.numpy as jnp

def g(x, w):
    return jnp.sin(x) * jnp.exp(w) + x ** 3

def v(x):
    return jnp.stack([x.sum(), (x ** 2).sum(), jnp.tanh(x).prod()])

@jax.jit
def jitted(x, w):
    return jnp.tanh(x @ w).sum()
"""


def _model_folder(folder, monkeypatch, framework: str, files: dict[str, str]):
    """A working folder holding the model files of ``framework`` (skipped without it, unless required)."""
    need(framework)
    for name, text in files.items():
        (folder / name).write_text(text)
    monkeypatch.chdir(folder)
    return folder


@pytest.fixture
def torch_files(tmp_path, monkeypatch):
    return _model_folder(tmp_path, monkeypatch, "torch", {"model.py": TORCH_MODEL})


@pytest.fixture
def jax_files(tmp_path, monkeypatch):
    return _model_folder(tmp_path, monkeypatch, "jax", {"jmodel.py": JAX_MODEL})


def cli(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result.stdout


def cli_json(*args: str, code: int = 0) -> dict:
    return json.loads(cli(*args, "--json", code=code))


def torch_grad(fn, *values):
    torch = need("torch")
    xs = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in values]
    out = fn(*xs)
    return out.item(), [g.numpy() for g in torch.autograd.grad(out, xs)]


# --- eval, jacobian, hessian: the framework's numbers ------------------------------------------------


def test_eval_of_a_torch_function_is_pytorchs_value_and_gradient_bit_for_bit(torch_files):
    torch = need("torch")
    found = cli_json("eval", "model.py:g", "--at", "x=0.5,w=0.3")
    value, (dx, dw) = torch_grad(lambda x, w: torch.sin(x) * torch.exp(w) + x**3, 0.5, 0.3)
    assert found["value"] == value
    assert found["gradient"] == {"x": float(dx), "w": float(dw)}
    assert found["framework"] == "torch"
    assert found["framework_version"] == torch.__version__.split("+")[0]


def test_every_road_to_a_torch_function_gives_the_same_numbers(torch_files):
    inline = cli_json("eval", "model.py:g", "--at", "x=0.5,w=0.3")
    python = cli_json("eval", "--python", "model.py:g", "--at", "x=0.5,w=0.3")
    said = cli_json("eval", "model.py:g", "--at", "x=0.5,w=0.3", "--framework", "torch")
    assert inline == python == said


def test_the_seed_program_draws_pytorchs_numbers(torch_files):
    (torch_files / "seed.py").write_text("import torch\ndef f(x, w):\n    return (x + w) * (w + 1)\n")
    assert cli("eval", "seed.py:f", "--at", "x=2,w=1") == "value = 6\nd/dx  = 2\nd/dw  = 5\n"


def test_a_module_parameter_is_pytorchs_own(torch_files):
    torch = need("torch")
    point = [0.1, -0.4, 0.7]
    found = cli_json("eval", "model.py:net", "--at", "x=[0.1,-0.4,0.7]")
    sys.path.insert(0, str(torch_files))
    try:
        import model  # the same module, imported by the test: the same seed gives the same layer
    finally:
        sys.path.remove(str(torch_files))
    x = torch.tensor(point, dtype=torch.float64, requires_grad=True)
    out = model.net(x)
    (dx,) = torch.autograd.grad(out, [x])
    assert found["value"] == out.item()
    assert found["gradient"]["x"] == dx.tolist()


@pytest.mark.parametrize("mode", ["reverse", "forward", "auto"])
def test_jacobian_of_a_torch_function_equals_torchs(torch_files, mode):
    torch = need("torch")
    from torch.autograd.functional import jacobian

    found = cli_json("jacobian", "model.py:v", "--at", "x=[1,2,3]", "--mode", mode)
    expected = jacobian(
        lambda x: torch.stack([x.sum(), (x**2).sum(), torch.tanh(x).prod()]),
        torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64),
    )
    np.testing.assert_allclose(found["jacobian"], expected.numpy(), rtol=1e-15, atol=0)
    assert found["framework"] == "torch"


def test_hessian_of_a_torch_function_equals_torchs(torch_files):
    torch = need("torch")
    from torch.autograd.functional import hessian

    found = cli_json("hessian", "model.py:g", "--at", "x=0.5,w=0.3")
    x, w = (torch.tensor(v, dtype=torch.float64) for v in (0.5, 0.3))
    expected = hessian(lambda x, w: torch.sin(x) * torch.exp(w) + x**3, (x, w))
    np.testing.assert_allclose(found["hessian"], [[float(e) for e in row] for row in expected], rtol=1e-15, atol=0)


def test_several_outputs_of_a_torch_function(torch_files):
    torch = need("torch")
    found = cli_json("jacobian", "model.py:both", "--at", "x=0.5,y=2")
    x, y = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (0.5, 2.0))
    rows = [torch.autograd.grad(o, [x, y]) for o in (torch.sin(x) * y, torch.cos(x * y))]
    assert found["jacobian"] == [[float(a), float(b)] for a, b in rows]


def test_jax_function_eval_jacobian_hessian_equal_jaxs(jax_files):
    jax = need("jax")
    jnp = jax.numpy

    def g(x, w):
        return jnp.sin(x) * jnp.exp(w) + x**3

    found = cli_json("eval", "jmodel.py:g", "--at", "x=0.5,w=0.3")
    assert found["framework"] == "jax"
    assert found["value"] == float(g(0.5, 0.3))
    assert found["gradient"] == {"x": float(jax.grad(g, 0)(0.5, 0.3)), "w": float(jax.grad(g, 1)(0.5, 0.3))}
    hessian = cli_json("hessian", "jmodel.py:g", "--at", "x=0.5,w=0.3")["hessian"]
    expected = jax.hessian(lambda p: g(p[0], p[1]))(jnp.array([0.5, 0.3]))
    np.testing.assert_allclose(hessian, np.asarray(expected), rtol=1e-14, atol=0)
    x = jnp.array([1.0, 2.0, 3.0])
    expected = jax.jacrev(lambda x: jnp.stack([x.sum(), (x**2).sum(), jnp.tanh(x).prod()]))(x)
    for mode in ("reverse", "forward"):
        found = cli_json("jacobian", "jmodel.py:v", "--at", "x=[1,2,3]", "--mode", mode)
        np.testing.assert_allclose(found["jacobian"], np.asarray(expected), rtol=1e-15, atol=0)


def test_a_jitted_jax_function(jax_files):
    jax = need("jax")
    jnp = jax.numpy
    found = cli_json("eval", "jmodel.py:jitted", "--at", "x=[[1,2],[3,4]],w=[0.5,-0.25]")
    x, w = jnp.array([[1.0, 2], [3, 4]]), jnp.array([0.5, -0.25])
    gx, gw = jax.grad(lambda x, w: jnp.tanh(x @ w).sum(), (0, 1))(x, w)
    np.testing.assert_allclose(found["gradient"]["x"], np.asarray(gx), rtol=1e-15)
    np.testing.assert_allclose(found["gradient"]["w"], np.asarray(gw), rtol=1e-15)


# --- check ---------------------------------------------------------------------------------------------


def test_check_of_a_torch_function_compares_pytorchs_gradient(torch_files):
    out = cli("check", "model.py:g", "--at", "x=0.5,w=0.3")
    assert out.splitlines()[0].split() == ["PyTorch", "finite", "differences", "complex", "step", "abs", "err", "rel",
                                           "err", "ok"]  # fmt: skip
    assert "OK: PyTorch agrees with finite differences, complex step" in out
    found = cli_json("check", "model.py:g", "--at", "x=0.5,w=0.3")
    assert found["ok"] is True and found["framework"] == "torch"
    assert found["checks"]["complex_step"]["ok"] is True


def test_the_complex_step_is_not_trusted_through_operations_that_are_not_analytic(torch_files):
    found = cli_json("check", "model.py:kinked", "--at", "x=0.5,w=0.3")
    assert found["checks"]["complex_step"]["ok"] is None
    assert found["checks"]["complex_step"]["reason"].startswith("skipped: PyTorch's abs, relu are not complex-analytic")
    assert found["ok"] is True


def test_check_finds_a_wrong_backward_of_a_custom_function(torch_files):
    found = cli_json("check", "model.py:lying", "--at", "x=[1,2]", code=1)
    assert found["ok"] is False
    assert found["gradient"]["x"] == [3.0, 6.0]  # PyTorch's (wrong) backward, as PyTorch gives it
    np.testing.assert_allclose(found["checks"]["finite_difference"]["values"]["x"], [2.0, 4.0], rtol=1e-9)


def test_check_of_a_jax_function(jax_files):
    found = cli_json("check", "jmodel.py:g", "--at", "x=0.5,w=0.3")
    assert found["ok"] is True and found["framework"] == "jax"
    assert "OK: JAX agrees with finite differences, complex step" in found["verdict"]


# --- points, threads --------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", ["1", "100"])
def test_points_of_a_torch_function_equal_eval_at_each_point(torch_files, chunk):
    rows = [(0.5, 0.3), (-1.25, 2.0), (3.0, -0.5)]
    (torch_files / "p.csv").write_text("x,w\n" + "".join(f"{x},{w}\n" for x, w in rows))
    out = cli("eval", "model.py:g", "--points", "p.csv", "--chunk-rows", chunk, "--json")
    found = [json.loads(line) for line in out.splitlines()]
    for (x, w), line in zip(rows, found):
        one = cli_json("eval", "model.py:g", "--at", f"x={x},w={w}")
        assert line["value"] == one["value"]
        assert line["gradient"] == one["gradient"]


def test_a_thread_pool_gives_one_threads_numbers(torch_files):
    program = load("model.py:g")
    points = [{"x": 0.1 * k, "w": 0.05 * k} for k in range(16)]
    alone = [value_and_grad(program, p) for p in points]
    for _ in range(3):  # a race shows in some repetition, not necessarily the first
        with ThreadPoolExecutor(4) as pool:
            found = list(pool.map(lambda p: value_and_grad(program, p), points))
        for a, b in zip(alone, found):
            assert a.value == b.value
            assert a.gradient == b.gradient


def test_the_library_matrices_of_a_torch_function(torch_files):
    program = load("model.py:v")
    jac = program_jacobian(program, {"x": np.array([1.0, 2.0, 3.0])}, None, "reverse")
    assert np.asarray(jac.matrix)[:2].tolist() == [[1.0, 1.0, 1.0], [2.0, 4.0, 6.0]]
    hess = program_hessian(load("model.py:g"), {"x": 0.5, "w": 0.3}, None)
    assert np.shape(hess.matrix) == (2, 2)


# --- detection, errors --------------------------------------------------------------------------------------


def test_what_a_function_computes_with_is_told_from_what_it_uses(tmp_path):
    torch = need("torch")
    from gradcli.lang.frameworks import framework_of

    model = torch.nn.Linear(2, 2)

    def with_a_module(x):
        return model(x)

    def with_torch(x):
        return torch.sin(x)

    import gradcli as gc

    def with_gradcli(x):
        return gc.sin(x)

    assert framework_of(with_a_module) == "torch"
    assert framework_of(with_torch) == "torch"
    assert framework_of(with_gradcli) is None


def test_framework_is_only_for_a_python_function():
    out = runner.invoke(app, ["eval", "x*2", "--at", "x=1", "--framework", "torch"])
    assert out.exit_code == 2
    assert out.output == "error: --framework torch: only a Python function (FILE.py:func) computes with a framework\n"
    out = runner.invoke(app, ["eval", "x*2", "--at", "x=1", "--framework", "tf"])
    assert out.exit_code == 2
    assert out.output == "error: invalid value for '--framework': 'tf' is not one of torch, jax, gradcli\n"


@pytest.mark.parametrize("name", ["torch", "jax"])
def test_a_missing_framework_says_how_to_install_it(tmp_path, name):
    (tmp_path / "m.py").write_text(f"import {name}\ndef f(x):\n    return x\n")
    code = (
        f"import sys; sys.modules[{name!r}] = None\n"
        "from gradcli.cli import main\n"
        "sys.argv = ['gradcli', 'eval', 'm.py:f', '--at', 'x=1']\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    title = {"torch": "PyTorch", "jax": "JAX"}[name]
    assert done.stderr.startswith(f"error: this function computes with {title}, which is not installed")
    assert f"[{name}]" in done.stderr and "pip install" in done.stderr
    assert done.stderr.count("\n") == 1


def test_an_error_in_the_users_torch_function_is_one_line(torch_files):
    (torch_files / "bad.py").write_text("import torch\ndef f(x):\n    return torch.mm(x, x)\n")
    out = runner.invoke(app, ["eval", "bad.py:f", "--at", "x=[1,2]"])
    assert out.exit_code == 2
    assert out.output.startswith("error: bad.py:f raised RuntimeError: ")
    assert out.output.count("\n") == 1


def test_the_framework_is_imported_only_for_its_function():
    code = textwrap.dedent(
        """
        import sys
        from gradcli.cli import main
        sys.argv = ['gradcli', 'eval', 'sin(x)', '--at', 'x=1']
        try:
            main()
        except SystemExit:
            pass
        print(sorted(m for m in ('torch', 'jax', 'gradcli.lang.frameworks') if m in sys.modules), file=sys.stderr)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stderr.strip() == "[]"


# --- the seeds' PyTorch programs, with their numbers -------------------------------------------------------

SEEDS = str(__import__("pathlib").Path(__file__).parent.parent / "examples" / "torch" / "seeds.py")


def test_the_seeds_pytorch_programs_give_their_numbers():
    torch = need("torch")
    framework = {"framework": "torch", "framework_version": torch.__version__.split("+")[0]}
    assert cli_json("eval", f"{SEEDS}:two_paths", "--at", "w=1,x=2") == {
        "value": 6.0, "gradient": {"w": 5.0, "x": 2.0}, **framework}  # fmt: skip
    assert cli_json("eval", f"{SEEDS}:product", "--at", "x=2")["gradient"] == {"x": 7.0}
    z = cli_json("eval", f"{SEEDS}:higher_order", "--at", "x=2,y=3")
    assert (z["value"], z["gradient"]) == (12.0, {"x": 12.0, "y": 4.0})
    assert cli_json("hessian", f"{SEEDS}:higher_order", "--at", "x=2,y=3")["hessian"] == [[6.0, 4.0], [4.0, 0.0]]
    assert cli_json("eval", f"{SEEDS}:dot_twice", "--at", "x=[0,1,2,3]") == {
        "value": 28.0, "gradient": {"x": [0.0, 4.0, 8.0, 12.0]}, **framework}  # fmt: skip
    d = cli_json("eval", f"{SEEDS}:control_flow", "--at", "a=0.5946")
    assert d["gradient"]["a"] == d["value"] / 0.5946  # seed 004: a.grad == d / a
    rows = cli_json("jacobian", f"{SEEDS}:matrix_product", "--at", "x=[[1,2]],y=[[3,4],[5,6]]", "--wrt", "x")
    assert rows["jacobian"] == [[3.0, 5.0], [4.0, 6.0]]  # seed 000: backward with [[1,0]], then [[0,1]]


def test_dask_over_several_parts_gives_one_process_bits_for_a_torch_function(torch_files):
    pytest.importorskip("dask.dataframe", reason="--dask needs dask[dataframe] (the scale extra)")
    pytest.importorskip("distributed", reason="--dask needs dask[distributed] (the scale extra)")
    pa = pytest.importorskip("pyarrow", reason="--dask needs pyarrow (the scale extra)")
    import pyarrow.parquet as pq

    xs = np.linspace(-2, 2, 40)
    ws = np.cos(xs)
    folder = torch_files / "parts"
    folder.mkdir()
    for k in range(4):
        pq.write_table(pa.table({"x": xs[10 * k : 10 * k + 10], "w": ws[10 * k : 10 * k + 10]}),
                       folder / f"part{k}.parquet")  # fmt: skip
    (torch_files / "all.csv").write_text("x,w\n" + "".join(f"{float(x)!r},{float(w)!r}\n" for x, w in zip(xs, ws)))
    want = [json.loads(line) for line in cli("eval", "model.py:g", "--points", "all.csv", "--json").splitlines()]
    cli("eval", "model.py:g", "--points", "parts", "--dask", "local:2", "-o", "out")
    parts = sorted(
        (torch_files / "out").glob("*.parquet"), key=lambda f: int("".join(c for c in f.stem if c.isdigit()))
    )
    assert len(parts) == 4
    got = [row for part in parts for row in pq.read_table(part).to_pylist()]
    assert [r["value"] for r in got] == [w["value"] for w in want]
    assert [(r["grad_x"], r["grad_w"]) for r in got] == [(w["gradient"]["x"], w["gradient"]["w"]) for w in want]


# --- gradcli graph of a framework's function: every format ---------------------------------------------


@pytest.mark.parametrize("fmt", ["tree", "text", "json", "dot", "svg", "html"])
def test_graph_of_a_torch_function_in_every_format(torch_files, fmt):
    if fmt in ("svg", "html") and not __import__("shutil").which("dot"):
        pytest.skip("pictures and the page need Graphviz's dot")
    out = cli(
        "graph", "model.py:g", "--at", "x=0.5,w=0.3", *(["-o", f"g.{fmt}"] if fmt == "html" else ["--format", fmt])
    )
    shown = (torch_files / "g.html").read_text() if fmt == "html" else out
    for name in ("SinBackward0", "ExpBackward0", "MulBackward0", "PowBackward0", "AddBackward0"):
        assert name in shown, (fmt, name)
    if fmt == "json":
        document = json.loads(out)
        by_fn = {n["grad_fn"]: n for n in document["nodes"]}
        assert by_fn["MulBackward0"]["value"] == float(np.sin(0.5) * np.exp(0.3))
        assert by_fn["MulBackward0"]["grad"] == 1.0
        leaves = {n["name"]: n for n in document["nodes"] if n["is_leaf"]}
        assert leaves["x"]["grad"] == cli_json("eval", "model.py:g", "--at", "x=0.5,w=0.3")["gradient"]["x"]


def test_graph_json_of_a_module_names_its_scopes(torch_files):
    document = json.loads(cli("graph", "model.py:net", "--at", "x=[0.1,-0.4,0.7]", "--format", "json"))
    scoped = {n["grad_fn"]: n.get("scope") for n in document["nodes"] if n["kind"] == "op"}
    assert scoped["AddmmBackward0"] == "layer"
    assert {c["label"] for c in document["clusters"]} >= {"layer (Linear)"}
    names = {n["name"] for n in document["nodes"] if n["is_leaf"]}
    assert {"layer.weight", "layer.bias", "x"} <= names


def test_graph_of_a_jax_function(jax_files):
    document = json.loads(cli("graph", "jmodel.py:g", "--at", "x=0.5,w=0.3", "--format", "json"))
    ops = {n["op"]: n for n in document["nodes"] if n["kind"] == "op"}
    assert {"sin", "exp", "mul", "add"} <= set(ops)
    assert ops["sin"]["value"] == float(np.sin(0.5))
    x = next(n for n in document["nodes"] if n["name"] == "x")
    assert x["grad"] == cli_json("eval", "jmodel.py:g", "--at", "x=0.5,w=0.3")["gradient"]["x"]


def test_a_torch_graphs_nodes_take_the_names_the_function_gave_them(torch_files):
    (torch_files / "named.py").write_text(
        "import torch\n"
        "def half(v):\n"
        "    h = v * 0.5\n"
        "    return h\n"
        "def f(w, x):\n"
        "    a = torch.add(w, x)\n"
        "    b = torch.add(w, 1)\n"
        "    x = half(a) + half(b)  # a helper called twice: its h names neither; x is an input's name\n"
        "    return x * b\n"
    )
    nodes = json.loads(cli("graph", "named.py:f", "--at", "w=1,x=2", "--format", "json"))["nodes"]
    named = {n["name"]: n["grad_fn"] for n in nodes if n["name"]}
    assert named == {"w": "AccumulateGrad", "x": "AccumulateGrad", "a": "AddBackward0", "b": "AddBackward0",
                     "f": "MulBackward0"}  # fmt: skip
    assert [n["label"] for n in nodes if n["name"] == "a"] == ["a = w + x"]
