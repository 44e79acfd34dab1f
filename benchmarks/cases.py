"""The benchmark cases: each builds its contenders (callables) and names its reference."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import gradcli as gc

try:
    import torch

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
except ImportError:  # pragma: no cover - depends on the machine
    torch = None
except RuntimeError:  # interop threads already set
    pass

TORCH_MISSING = "PyTorch is not installed: its columns are skipped (pip install torch==2.13.0 to compare)"


def versions() -> str:
    parts = [f"numpy {np.__version__}", f"gradcli {gc.__version__}"]
    parts.append(f"torch {torch.__version__}" if torch is not None else "torch: not installed")
    return ", ".join(parts)


@dataclass
class Case:
    name: str
    reference: str
    target: str
    setup: Callable[[], tuple[dict[str, Callable[[], object]], list[str]]]
    rounds: int = 0
    warm_bytes: int = 0  # memory to touch before each timed call (see run.warm_memory)


# --- large elementwise: value and gradient of 10^7 float64 ----------------------------------

N_ELEMENTWISE = 10**7


def _elementwise():
    x = np.random.default_rng(0).uniform(-2.0, 2.0, N_ELEMENTWISE)

    def numpy_by_hand():
        x2 = x * x
        e = np.exp(-x2)
        s = np.sin(x)
        value = np.sum(s * e + np.log(1 + x2))
        grad = np.cos(x) * e - 2 * x * s * e + 2 * x / (1 + x2)
        return value, grad

    def gradcli_autograd():
        t = gc.tensor(x, requires_grad=True)
        y = gc.sum(gc.sin(t) * gc.exp(-(t**2)) + gc.log(1 + t**2))
        y.backward()
        return y.item(), t.grad

    contenders = {"numpy, by hand": numpy_by_hand, "gradcli": gradcli_autograd}
    notes = []
    if torch is not None:
        xt = torch.from_numpy(x)

        def torch_autograd():
            t = xt.clone().requires_grad_(True)
            y = torch.sum(torch.sin(t) * torch.exp(-(t**2)) + torch.log(1 + t**2))
            y.backward()
            return y.item(), t.grad

        contenders["torch autograd"] = torch_autograd
    else:
        notes.append(TORCH_MISSING)
    value, grad = numpy_by_hand()
    got_value, got_grad = gradcli_autograd()
    np.testing.assert_allclose(got_value, value, rtol=1e-12)
    np.testing.assert_allclose(got_grad._value, grad, rtol=1e-12, atol=1e-12)
    return contenders, notes


# --- scalar graph: 10^5 nodes built one operation at a time ---------------------------------------


@dataclass
class Timed:
    """A contender's own measurement (a job timed inside its process), used instead of wall time."""

    seconds: float
    peak_mb: float = 0.0


def isolated(job: str, library: str) -> Callable[[], Timed]:
    """Run ``worker.py job library`` in a fresh process (see worker.py for why); gradcli's from
    the regular install (``installed``), as its users run it."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = str(Path(__file__).resolve().parent / "worker.py")
    python = str(installed() / "bin" / "python") if library == "gradcli" else sys.executable

    def run() -> Timed:
        done = subprocess.run([python, script, job, library], capture_output=True, text=True, check=True)
        return Timed(**json.loads(done.stdout))

    return run


def _scalar_graph():
    contenders = {"gradcli": isolated("scalar_graph", "gradcli")}
    notes = ["99,995 nodes: build + backward, each library in a process of its own (warmed up)"]
    if torch is not None:
        contenders["torch eager (0-d tensors)"] = isolated("scalar_graph", "torch")
    else:
        notes.append(TORCH_MISSING + "; the gradcli figure is absolute")
    return contenders, notes


def _chain():
    contenders = {"gradcli": isolated("chain", "gradcli")}
    notes = ["x = sin(x) + 0.5*x, 10^6 times (3e6 nodes), then backward; peak memory of each process below"]
    if torch is not None:
        contenders["torch eager"] = isolated("chain", "torch")
    else:
        notes.append(TORCH_MISSING + "; the gradcli figure is absolute")
    return contenders, notes


# --- a regular install, as users get it ----------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
_INSTALL: dict[str, Path] = {}


def installed(source: Path | None = None) -> Path:
    """The folder of a temporary venv holding a regular (not editable) ``pip install`` of the
    checkout ``source`` (this one by default), built once per benchmark run: what a user runs.
    Its dependencies are this interpreter's (a ``.pth`` line naming their folders, read as a
    plain path: none of that folder's own ``.pth`` hooks run), so only gradcli is installed.
    pip compiles the bytecode as it installs; an editable install instead runs an import hook
    in every process and, with PYTHONDONTWRITEBYTECODE set, compiles gradcli on every start."""
    import atexit
    import importlib.util
    import shutil
    import subprocess
    import sys
    import tempfile

    source = Path(source or ROOT)
    if str(source) in _INSTALL:
        return _INSTALL[str(source)]
    folder = Path(tempfile.mkdtemp(prefix="gradcli-bench-venv-"))
    atexit.register(shutil.rmtree, folder, True)
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check"]
    subprocess.run([*pip, str(source)], check=True, stdout=subprocess.DEVNULL)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    specs = [importlib.util.find_spec(name) for name in ("numpy", "typer", "rich", "sympy", "graphviz")]
    dependencies = {str(Path(spec.origin).parent.parent) for spec in specs if spec is not None and spec.origin}
    Path(site, "zz_gradcli_bench_dependencies.pth").write_text("".join(f"{d}\n" for d in sorted(dependencies)))
    where = subprocess.run(
        [str(python), "-c", "import gradcli; print(gradcli.__file__)"], capture_output=True, text=True, check=True,
        cwd=folder,  # not a checkout's folder, which python -c would put first on the path
    ).stdout.strip()  # fmt: skip
    assert where.startswith(site), f"the benchmark's venv imports gradcli from {where}, not its own install"
    _INSTALL[str(source)] = venv
    return venv


# --- start-up: a whole process, gradcli eval vs python -c "import numpy" -----------------------------

EVAL = ["eval", "(x+w)*(w+1)", "--at", "x=2,w=1"]


def _startup():
    import subprocess

    venv = installed()
    python, gradcli = str(venv / "bin" / "python"), str(venv / "bin" / "gradcli")

    def run(args):
        return lambda: subprocess.run(args, stdout=subprocess.PIPE, check=True)

    contenders = {
        'python -c "import numpy"': run([python, "-c", "import numpy"]),
        "gradcli eval": run([gradcli, *EVAL]),
    }
    return contenders, [
        "each process started by the same venv's python, a regular `pip install .` of this checkout; output to a pipe"
    ]


# --- --points: value and gradient at every row of a CSV file ------------------------------------

N_POINTS = 10**6


def _points():
    import subprocess
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="gradcli-points-"))
    rng = np.random.default_rng(0)
    data = rng.uniform(-2.0, 2.0, (N_POINTS, 2))
    source, target = folder / "points.csv", folder / "out.csv"
    np.savetxt(source, data, delimiter=",", header="x,w", comments="", fmt="%.17g")

    def numpy_by_hand():  # read, compute value and gradient, write with every digit, as gradcli does
        x, w = np.loadtxt(source, delimiter=",", skiprows=1, unpack=True)
        value = (x + w) * (w + 1) + np.sin(x * w)
        dx = (w + 1) + np.cos(x * w) * w
        dw = (x + w) + (w + 1) + np.cos(x * w) * x
        table = np.column_stack([x, w, value, dx, dw])
        np.savetxt(target, table, delimiter=",", header="x,w,value,grad_x,grad_w", comments="", fmt="%.17g")

    gradcli = str(installed() / "bin" / "gradcli")
    command = [gradcli, "eval", "(x + w) * (w + 1) + sin(x * w)", "--points", str(source)]

    def gradcli_points():  # the whole command, process start-up included
        with open(target, "w") as out:
            subprocess.run(command, stdout=out, check=True)

    return {"numpy, by hand": numpy_by_hand, "gradcli eval --points": gradcli_points}, [
        f"{N_POINTS:,} rows of x,w from a CSV file; output CSV with 17 significant digits"
    ]


# --- --points at scale (issue 18): streamed CSV against pyarrow by hand, with peak memory ----------


def _points_at_scale(rows: int):
    def setup():
        import os
        import tempfile
        from pathlib import Path

        import pyarrow as pa
        import pyarrow.csv as pcsv

        folder = Path(tempfile.mkdtemp(prefix="gradcli-scale-"))
        source = folder / "points.csv"
        rng = np.random.default_rng(18)
        with pcsv.CSVWriter(source, pa.schema([("x", pa.float64()), ("w", pa.float64())])) as writer:
            for start in range(0, rows, 10**6):  # in parts: the benchmark itself stays small
                n = min(10**6, rows - start)
                writer.write_table(pa.table({"x": rng.uniform(-2, 2, n), "w": rng.uniform(-2, 2, n)}))
        os.environ["GRADCLI_BENCH_POINTS"] = str(source)
        os.environ["GRADCLI_BENCH_OUT"] = str(folder / "out.csv")
        size = source.stat().st_size / 1e6
        notes = [f"{rows:,} rows of x,w ({size:,.0f} MB of CSV, shortest round-trip floats): read, value + gradient "
                 "of (x+w)*(w+1), write CSV; each in a process of its own (time inside it, its VmHWM)"]  # fmt: skip
        return {
            "pyarrow by hand": isolated("points", "arrow"),
            "gradcli eval --points": isolated("points", "gradcli"),
        }, notes

    return setup


# --- the language: parse + evaluate + backward of a long expression --------------------------------


def _long_expression():
    from gradcli.lang.compute import value_and_grad
    from gradcli.lang.parser import parse
    from gradcli.lang.program import Program, load

    text = "+".join(f"sin({k % 7 + 1}*x)*y" for k in range(100_000 // 4))  # 4 operations a term: 1e5 nodes
    sums = "+".join(["x"] * 100_000)
    point = {"x": 0.5, "y": 2.0}

    def as_eval(source):  # what `gradcli eval -f FILE --at x=0.5,y=2` computes: load, value and gradient
        return lambda: value_and_grad(load(source), point)

    def graph_road(source):  # the library's way when the graph itself is wanted: every node recorded
        def run():
            program = Program("expression", tree=parse(source))
            evaluation = program.run(point, ["x", "y"])
            return gc.grad(evaluation.outputs[0], list(evaluation.inputs.values()), allow_unused=True)

        return run

    contenders = {
        "1e5 terms x+x+... (gradcli eval)": as_eval(sums),
        "25,000 terms sin(k*x)*y, 1e5 nodes (gradcli eval)": as_eval(text),
        "1e5 terms x+x+..., tree and recorded graph": graph_road(sums),
        "25,000 terms sin(k*x)*y, tree and recorded graph": graph_road(text),
    }
    return contenders, [
        f"absolute times; {len(sums):,} and {len(text):,} characters; `gradcli eval` reads a long scalar "
        "expression onto a flat tape (gradcli/lang/flat.py), the graph road records a node an operation"
    ]


# --- gradcli check of a 1e3-term expression ------------------------------------------------------------

CHECK_VARIABLES = "abcdfghjkm"  # ten variables (e is the constant)


def _check_case():
    from gradcli.check import check
    from gradcli.check.numeric import finite_differences
    from gradcli.check.run import _Recorded
    from gradcli.lang.program import load

    rng = np.random.default_rng(3)
    functions = ["sin", "cos", "exp", "tanh", "log1p"]
    terms = [
        f"{functions[rng.integers(5)]}({rng.choice(list(CHECK_VARIABLES))}*{rng.uniform(0.1, 1):.3f})*{rng.choice(list(CHECK_VARIABLES))}"
        for _ in range(1000)
    ]
    program = load(" + ".join(terms))
    values = {v: np.asarray(0.1 * (i + 1)) for i, v in enumerate(CHECK_VARIABLES)}

    def autograd_only():
        evaluation = program.run(values, list(CHECK_VARIABLES))
        return gc.grad(evaluation.outputs[0], [evaluation.inputs[v] for v in CHECK_VARIABLES])

    def method(name):
        def run():
            result = check(program, values, methods=[name], sympy_timeout=300.0)
            assert result.ok and all(c.ok for c in result.checks.values()), result.verdict()
            return result

        return run

    def fd_one_call_a_point():  # what the batched replay replaces
        recorded = _Recorded(program, values, list(CHECK_VARIABLES), None)
        return finite_differences(recorded._call_each_expression, recorded.x0, recorded.f0)

    contenders = {
        "autograd value+grad": autograd_only,
        "check --method fd": method("fd"),
        "check --method complex": method("complex"),
        "check --method sympy": method("sympy"),
        "check (all three)": method("sympy,fd,complex"),
        "fd, one evaluation a point (not used)": fd_one_call_a_point,
    }
    notes = [f"1,000 terms, 10 variables, {len(program.tree.text):,} characters; FD and complex step replay the "
             "recorded program once for all their points"]  # fmt: skip
    return contenders, notes


# --- Jacobians and Hessians -----------------------------------------------------------------------------


def _jacobian_case(n):
    def setup():
        from gradcli.functional import jacobian

        rng = np.random.default_rng(n)
        A = rng.standard_normal((n, n)) / np.sqrt(n)
        x = rng.standard_normal(n)
        At = gc.tensor(A)

        def by_hand():
            return (1.0 - np.tanh(A @ x) ** 2)[:, None] * A

        contenders = {
            "hand formula": by_hand,
            "gradcli reverse": lambda: jacobian(lambda v: gc.tanh(At @ v), gc.tensor(x), mode="reverse"),
            "gradcli forward": lambda: jacobian(lambda v: gc.tanh(At @ v), gc.tensor(x), mode="forward"),
        }
        np.testing.assert_allclose(contenders["gradcli reverse"]()._value, by_hand(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(contenders["gradcli forward"]()._value, by_hand(), rtol=1e-12, atol=1e-14)
        notes = []
        if torch is not None:
            Atorch, xt = torch.from_numpy(A), torch.from_numpy(x)

            def f(v):
                return torch.tanh(Atorch @ v)

            contenders["torch.func.jacrev"] = lambda: torch.func.jacrev(f)(xt)
            contenders["torch.func.jacfwd"] = lambda: torch.func.jacfwd(f)(xt)
            contenders["torch functional, vectorized"] = lambda: torch.autograd.functional.jacobian(
                f, xt, vectorize=True
            )
        else:
            notes.append(TORCH_MISSING)
        return contenders, notes

    return setup


def _hessian_case(n):
    def setup():
        from gradcli.functional import hessian

        rng = np.random.default_rng(n + 1)
        x = rng.standard_normal(n) * 0.5

        def by_hand():
            e = np.exp(x[:-1])
            H = 8.0 * np.outer(x, x) + 4.0 * (x @ x) * np.eye(n)
            i = np.arange(n - 1)
            H[i, i] += e * x[1:]
            H[i, i + 1] += e
            H[i + 1, i] += e
            return H

        def f(v):
            return gc.sum(gc.exp(v[:-1]) * v[1:]) + (v @ v) ** 2

        contenders = {"analytic Hessian": by_hand, "gradcli": lambda: hessian(f, gc.tensor(x))}
        np.testing.assert_allclose(contenders["gradcli"]()._value, by_hand(), rtol=1e-12, atol=1e-12)
        notes = []
        if torch is not None:
            xt = torch.from_numpy(x)

            def ft(v):
                return torch.sum(torch.exp(v[:-1]) * v[1:]) + (v @ v) ** 2

            contenders["torch.func.hessian"] = lambda: torch.func.hessian(ft)(xt)
            contenders["torch functional, vectorized"] = lambda: torch.autograd.functional.hessian(
                ft, xt, vectorize=True
            )
            if n <= 300:
                contenders["torch functional, loop"] = lambda: torch.autograd.functional.hessian(ft, xt)
        else:
            notes.append(TORCH_MISSING)
        return contenders, notes

    return setup


CASES = [
    Case(
        "elementwise value+grad, 1e7 float64",
        "numpy, by hand",
        "gradcli <= 1.3x numpy by hand (issue 2); <= 1.2x (issue 7); <= 1.1x (issue 21)",
        _elementwise,
        warm_bytes=2 * 10**9,
    ),
    Case(
        "scalar graph, 1e5 nodes",
        "torch eager (0-d tensors)" if torch is not None else "gradcli",
        "gradcli <= 1.0x torch eager (issue 2); <= 0.5x (issue 7)",
        _scalar_graph,
        rounds=5,
    ),
    Case(
        "chain 1e6 deep, build + backward",
        "torch eager" if torch is not None else "gradcli",
        "gradcli <= torch's time, peak memory < 1 GB (issue 7)",
        _chain,
        rounds=1,
    ),
    Case(
        "start-up, whole process",
        'python -c "import numpy"',
        "gradcli eval <= 2.0x import numpy (issue 3); <= 1.3x (issue 7); <= 1.2x (issue 21)",
        _startup,
        rounds=41,
    ),
    *(
        Case(
            f"Jacobian of tanh(A @ x), n={n}",
            "hand formula",
            "gradcli <= fastest torch (issue 5); aim: JAX jit (7x)",
            _jacobian_case(n),
            rounds=5,
        )
        for n in (300, 1000)
    ),
    *(
        Case(
            f"Hessian of sum(exp(x[:-1])*x[1:])+(x@x)^2, n={n}",
            "analytic Hessian",
            "gradcli <= fastest torch (issue 5); <= 0.5x torch.func.hessian (issue 21); aim: JAX jit (1x)",
            _hessian_case(n),
            rounds=5,
        )
        for n in (300, 1000)
    ),
    Case(
        "--points, 1e6 rows",
        "numpy, by hand",
        "gradcli <= 2x numpy by hand (issue 7)",
        _points,
        rounds=3,
    ),
    *(
        Case(
            f"--points at scale, {rows:.0e} rows",
            "pyarrow by hand",
            "gradcli <= 1.5x pyarrow by hand, peak <= 400 MB (issue 18)",
            _points_at_scale(rows),
            rounds=3,
        )
        for rows in (10**6, 10**7)
    ),
    Case(
        "gradcli check, 1e3-term expression",
        "autograd value+grad",
        "every method vectorised (issue 6): time per method",
        _check_case,
        rounds=2,
    ),
    Case(
        "parse+evaluate+backward, 1e5 terms",
        "1e5 terms x+x+... (gradcli eval)",
        "each under 0.5 s (issue 21)",
        _long_expression,
        rounds=3,
    ),
]
