"""The cross-road matrix (issue 12, "the net that keeps them out").

Every program of ``tests/corpus/programs.py`` goes down every road that applies
to it: the library (its ``gc.*`` twin with ``backward``, ``gc.functional``),
``gradcli eval`` given inline, with ``-f``, on stdin and as ``file.py:func``;
``jacobian --mode forward|reverse``, ``hessian``, ``check``, ``graph --format
json`` from each of those input forms; ``--points`` row by row. Each road gives
some of four quantities: the value, ``1^T J`` (the gradient of a scalar output,
what ``eval --seed ones`` gives otherwise), the Jacobian, the Hessian. Every
road must give the numbers of the reference (gradcli's own language API) to
1e-12 relative, and the reference must give PyTorch's float64 numbers (the twin
run with ``gc`` bound to torch) to 1e-9.

A new command or input form is one entry in ``FORMS``, ``COMMANDS`` or
``LIBRARY`` below, not a new test.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from corpus.programs import PROGRAMS, Program
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app
from gradcli.lang.compute import program_hessian, program_jacobian
from gradcli.lang.program import load

CORPUS = Path(__file__).parent / "corpus" / "programs.py"
RTOL = 1e-12  # road against road: the same arithmetic, give or take the order of a sum
TORCH_RTOL = 1e-9
runner = CliRunner()


# --- the reference: gradcli's language API, once per program -----------------------------------------------------


@dataclass
class Numbers:
    """What a road gave. ``None``: this road does not give that quantity."""

    value: np.ndarray | None = None  # the output, flattened
    vjp: np.ndarray | None = None  # 1^T J, the variables flattened and concatenated in --at order
    jacobian: np.ndarray | None = None  # (output elements, variable elements)
    hessian: np.ndarray | None = None  # (variable elements, variable elements), scalar outputs only


def names(p: Program) -> list[str]:
    return list(p.at)


def at_text(values: dict[str, Any]) -> str:
    return ",".join(f"{k}={json.dumps(np.asarray(v).tolist())}" for k, v in values.items())


@functools.cache
def reference(name: str) -> Numbers:
    p = BY_NAME[name]
    values = {k: np.asarray(v, dtype=np.float64) for k, v in p.at.items()}
    jac = program_jacobian(load(p.text), values, names(p), "reverse")
    numbers = Numbers(jac.value, jac.matrix.sum(axis=0), jac.matrix)
    if scalar(p):
        numbers.hessian = program_hessian(load(p.text), values, names(p)).matrix
    return numbers


def scalar(p: Program) -> bool:
    return "outputs" not in p.tags


def scalar_variables(p: Program) -> list[str]:
    return [k for k, v in p.at.items() if np.ndim(v) == 0]


BY_NAME = {p.name: p for p in PROGRAMS}


# --- the input forms and the commands of the command line -----------------------------------------------------------


def invoke(args: list[str], input: str | None = None) -> Any:
    result = runner.invoke(app, expression_after_dashes(args), input=input)
    assert "Traceback" not in result.output + result.stderr, result.output + result.stderr
    return result


@dataclass(frozen=True)
class Form:
    """How the program reaches the command line: the EXPR arguments and standard input."""

    name: str
    expr: Callable[[Program, Path], tuple[list[str], str | None]]
    commands: tuple[str, ...] | None = None  # the commands taken along this form (None: all)


def inline(text: str) -> list[str]:
    """EXPR on the command line; one that starts with '-' follows ``--`` (SPEC)."""
    return ["--", text] if text.startswith("-") else [text]


def _program_file(p: Program, tmp: Path) -> Path:
    path = tmp / f"{p.name}.gc"
    if not path.exists():
        path.write_text(p.text + "\n", encoding="utf-8")
    return path


# -f and stdin change only how the text is read: the commands that compute differently suffice there
READ_ONLY = ("eval", "jacobian-forward", "jacobian-reverse", "hessian")
FORMS = [
    Form("inline", lambda p, tmp: (inline(p.text), None)),
    Form("file", lambda p, tmp: (["-f", str(_program_file(p, tmp))], None), READ_ONLY),
    Form("stdin", lambda p, tmp: (["-"], p.text), READ_ONLY),
    Form("python", lambda p, tmp: ([f"{CORPUS}:{p.name}"], None)),
]


def _flat_gradient(gradient: dict[str, Any], p: Program) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(gradient[n], dtype=np.float64)) for n in names(p)])


def _numbers(x: Any) -> np.ndarray:
    return np.ravel(np.asarray(x, dtype=np.float64))


def _eval(doc: dict[str, Any], p: Program) -> Numbers:
    return Numbers(value=_numbers(doc["value"]), vjp=_flat_gradient(doc["gradient"], p))


def _jacobian(doc: dict[str, Any], p: Program) -> Numbers:
    matrix = np.asarray(doc["jacobian"], dtype=np.float64)
    value = _numbers(doc["value"]) if "value" in doc else None
    return Numbers(value=value, vjp=matrix.sum(axis=0), jacobian=matrix)


def _hessian(doc: dict[str, Any], p: Program) -> Numbers:
    return Numbers(
        value=_numbers(doc["value"]) if "value" in doc else None,
        vjp=_flat_gradient(doc["gradient"], p) if "gradient" in doc else None,  # by variable (issue 16)
        hessian=np.asarray(doc["hessian"], dtype=np.float64),
    )


def _check(doc: dict[str, Any], p: Program) -> Numbers:
    assert doc["ok"] is True, doc.get("verdict")
    return Numbers(value=_numbers(doc["value"]) if "value" in doc else None, vjp=_flat_gradient(doc["gradient"], p))


def _graph(doc: dict[str, Any], p: Program) -> Numbers:
    leaves = {n["name"] or n["label"]: n for n in doc["nodes"] if n["is_leaf"] and n["kind"] == "variable"}
    outputs = [n for n in doc["nodes"] if n["id"] in doc["outputs"]]
    value = np.concatenate([_numbers(n["value"]) for n in outputs]) if outputs else None
    grads = {
        k: (np.zeros(np.shape(v)) if leaves[k]["grad"] is None else leaves[k]["grad"])
        for k, v in p.at.items()
        if k in leaves
    }
    for k, v in p.at.items():  # a variable the output does not reach has no node: its gradient is 0
        grads.setdefault(k, np.zeros(np.shape(v)))
    return Numbers(value=value, vjp=_flat_gradient(grads, p))


@dataclass(frozen=True)
class Command:
    name: str
    args: Callable[[Program], list[str]]
    read: Callable[[dict[str, Any], Program], Numbers]
    applies: Callable[[Program], bool] = lambda p: True


def _seed(p: Program) -> list[str]:
    return [] if scalar(p) else ["--seed", "ones"]


COMMANDS = [
    Command("eval", lambda p: ["eval", "--json", *_seed(p)], _eval),
    Command("jacobian-forward", lambda p: ["jacobian", "--json", "--mode", "forward"], _jacobian),
    Command("jacobian-reverse", lambda p: ["jacobian", "--json", "--mode", "reverse"], _jacobian),
    Command("jacobian-auto", lambda p: ["jacobian", "--json"], _jacobian),
    Command("hessian", lambda p: ["hessian", "--json"], _hessian, scalar),
    Command("check", lambda p: ["check", "--json"], _check, scalar),
    Command("graph", lambda p: ["graph", "--format", "json", *_seed(p)], _graph),
]


@dataclass(frozen=True)
class Road:
    name: str
    run: Callable[[Program, Path], Numbers]
    applies: Callable[[Program], bool] = lambda p: True


def _cli_road(form: Form, command: Command) -> Road:
    def run(p: Program, tmp: Path) -> Numbers:
        expr, stdin = form.expr(p, tmp)
        cmd, *options = command.args(p)
        result = invoke([cmd, *expr, *options, "--at", at_text(p.at), "--wrt", ",".join(names(p))], input=stdin)
        assert result.exit_code == 0, result.stderr
        return command.read(json.loads(result.stdout), p)

    return Road(f"{command.name}:{form.name}", run, command.applies)


# --- the library roads -------------------------------------------------------------------------------------------


def _leaves(p: Program) -> list[gc.Tensor]:
    return [gc.tensor(np.asarray(v, dtype=np.float64), requires_grad=True) for v in p.at.values()]


def _backward(p: Program, tmp: Path) -> Numbers:
    leaves = _leaves(p)
    out = p.twin(**dict(zip(names(p), leaves)))
    out.backward(None if scalar(p) else gc.ones(*out.shape))
    grads = [np.zeros(x.shape) if x.grad is None else x.grad.numpy() for x in leaves]
    return Numbers(value=_numbers(out.detach().numpy()), vjp=np.concatenate([np.ravel(g) for g in grads]))


def _as_positional(p: Program) -> Callable[..., Any]:
    return lambda *xs: p.twin(**dict(zip(names(p), xs)))


def _functional_jacobian(mode: str) -> Callable[[Program, Path], Numbers]:
    def run(p: Program, tmp: Path) -> Numbers:
        blocks = gc.functional.jacobian(_as_positional(p), tuple(_leaves(p)), mode=mode)
        m = int(np.prod(reference(p.name).value.shape))
        matrix = np.concatenate([np.asarray(b.numpy()).reshape(m, -1) for b in blocks], axis=1)
        return Numbers(jacobian=matrix, vjp=matrix.sum(axis=0))

    return run


def _functional_hessian(p: Program, tmp: Path) -> Numbers:
    blocks = gc.functional.hessian(_as_positional(p), tuple(_leaves(p)))
    sizes = [int(np.size(v)) for v in p.at.values()]
    rows = [np.concatenate([np.asarray(b.numpy()).reshape(si, sj) for b, sj in zip(row, sizes)], axis=1)
            for row, si in zip(blocks, sizes)]  # fmt: skip
    return Numbers(hessian=np.concatenate(rows, axis=0))


LIBRARY = [
    Road("library-backward", _backward),
    Road("library-jacobian-forward", _functional_jacobian("forward")),
    Road("library-jacobian-reverse", _functional_jacobian("reverse")),
    Road("library-hessian", _functional_hessian, scalar),
]


def _process(p: Program, tmp: Path) -> Numbers:
    """A real process reading the program from a pipe (what CliRunner's stdin only imitates)."""
    args = [sys.executable, "-m", "gradcli", "eval", "-", "--json", *_seed(p), "--at", at_text(p.at)]
    args += ["--wrt", ",".join(names(p))]
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run(args, input=p.text, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    return _eval(json.loads(done.stdout), p)


PROCESS_SAMPLE = {"rosenbrock", "named_steps_lines", "layer"}

ROADS = [
    *LIBRARY,
    *(_cli_road(form, c) for c in COMMANDS for form in FORMS if form.commands is None or c.name in form.commands),
    Road("eval:stdin-process", _process, lambda p: p.name in PROCESS_SAMPLE),
]


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("programs")


def assert_same(got: Numbers, want: Numbers, rtol: float, where: str) -> None:
    compared = 0
    for field in ("value", "vjp", "jacobian", "hessian"):
        a, b = getattr(got, field), getattr(want, field)
        if a is None or b is None:
            continue
        compared += 1
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        assert a.shape == b.shape, f"{where}: {field} has shape {a.shape}, expected {b.shape}"
        scale = max(float(np.max(np.abs(b), initial=0.0)), 1e-300)
        ok = np.abs(a - b) <= rtol * np.maximum(np.abs(a), np.abs(b)) + 1e-3 * rtol * scale
        assert ok.all(), f"{where}: {field}\n got {a.tolist()}\nwant {b.tolist()}"
    assert compared, f"{where}: the road gave nothing to compare"


@pytest.mark.parametrize(
    "program,road",
    [pytest.param(p, r, id=f"{p.name}-{r.name}") for p in PROGRAMS for r in ROADS if r.applies(p)],
)
def test_every_road_gives_the_same_numbers(program: Program, road: Road, tmp: Path) -> None:
    assert_same(road.run(program, tmp), reference(program.name), RTOL, f"{program.name} along {road.name}")


# --- --points, row by row ----------------------------------------------------------------------------------------


STEPS = (0.0, 0.013, -0.021)  # the second and third points: each scalar variable moved by step * (1 + |value|)


def point_rows(p: Program) -> list[dict[str, float]]:
    return [{k: float(p.at[k]) + s * (1 + abs(float(p.at[k]))) for k in scalar_variables(p)} for s in STEPS]


def _csv(rows: list[dict[str, float]]) -> str:
    header = list(rows[0])
    return ",".join(header) + "\n" + "\n".join(",".join(repr(r[k]) for k in header) for r in rows) + "\n"


POINT_FORMS = [
    ("inline", lambda p, tmp: inline(p.text)),
    ("file", lambda p, tmp: ["-f", str(_program_file(p, tmp))]),
    ("python", lambda p, tmp: [f"{CORPUS}:{p.name}"]),
]


@pytest.mark.parametrize("form", [f for f, _ in POINT_FORMS])
@pytest.mark.parametrize("program", [pytest.param(p, id=p.name) for p in PROGRAMS if scalar(p) and scalar_variables(p)])
def test_points_row_by_row(program: Program, form: str, tmp: Path) -> None:
    rows = point_rows(program)
    shared = {k: v for k, v in program.at.items() if k not in rows[0]}
    options = ["--json", "--wrt", ",".join(names(program))] + (["--at", at_text(shared)] if shared else [])
    csv = tmp / f"{program.name}.csv"
    csv.write_text(_csv(rows), encoding="utf-8")
    result = invoke(["eval", *dict(POINT_FORMS)[form](program, tmp), "--points", str(csv), *options])
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == len(rows)
    for i, (row, doc) in enumerate(zip(rows, lines)):
        single = invoke(
            [
                "eval",
                *inline(program.text),
                "--json",
                "--at",
                at_text({**program.at, **row}),
                "--wrt",
                ",".join(names(program)),
            ]
        )
        assert single.exit_code == 0, single.stderr
        assert_same(_eval(doc, program), _eval(json.loads(single.stdout), program), RTOL, f"{program.name} row {i}")


# --- PyTorch, float64: the reference against the peer ------------------------------------------------------------


class TorchNamespace:
    """``gc`` for the twins, spelled in PyTorch (the names the two share pass straight through)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch

    def __getattr__(self, name: str) -> Any:
        return getattr(self.torch, name)

    def tensor(self, value: Any) -> Any:
        return self.torch.tensor(value, dtype=self.torch.float64)

    def softplus(self, x: Any) -> Any:
        return self.torch.nn.functional.softplus(x)

    def logsumexp(self, x: Any, dim: Any = None) -> Any:
        return self.torch.logsumexp(x, dim=tuple(range(x.ndim)) if dim is None else dim)

    def norm(self, x: Any, dim: Any = None) -> Any:
        return self.torch.linalg.vector_norm(x, dim=dim)

    def pow(self, a: Any, b: Any) -> Any:
        return self.torch.pow(a, b)

    def cbrt(self, x: Any) -> Any:  # PyTorch has no cbrt
        return self.torch.sign(x) * self.torch.abs(x) ** (1 / 3)

    gelu = property(lambda self: self.torch.nn.functional.gelu)
    silu = property(lambda self: self.torch.nn.functional.silu)
    elu = property(lambda self: self.torch.nn.functional.elu)
    leaky_relu = property(lambda self: self.torch.nn.functional.leaky_relu)
    logsigmoid = property(lambda self: self.torch.nn.functional.logsigmoid)
    softsign = property(lambda self: self.torch.nn.functional.softsign)
    mish = property(lambda self: self.torch.nn.functional.mish)
    hardtanh = property(lambda self: self.torch.nn.functional.hardtanh)


def torch_twin(p: Program, torch: Any) -> Callable[..., Any]:
    globals_ = {**p.twin.__globals__, "gc": TorchNamespace(torch)}
    twin = types.FunctionType(p.twin.__code__, globals_, p.twin.__name__, p.twin.__defaults__, p.twin.__closure__)
    return lambda *xs: twin(**dict(zip(names(p), xs)))


def torch_numbers(p: Program, torch: Any) -> Numbers:
    f = torch_twin(p, torch)
    inputs = tuple(torch.tensor(np.asarray(v, dtype=np.float64)) for v in p.at.values())
    value = f(*inputs).detach().numpy().reshape(-1)
    blocks = torch.autograd.functional.jacobian(f, inputs)
    matrix = np.concatenate([b.detach().numpy().reshape(value.size, -1) for b in blocks], axis=1)
    numbers = Numbers(value, matrix.sum(axis=0), matrix)
    if scalar(p):
        h = torch.autograd.functional.hessian(f, inputs)
        sizes = [x.numel() for x in inputs]
        numbers.hessian = np.concatenate(
            [np.concatenate([h[i][j].numpy().reshape(si, sj) for j, sj in enumerate(sizes)], axis=1)
             for i, si in enumerate(sizes)], axis=0)  # fmt: skip
    return numbers


@pytest.mark.parametrize("program", [pytest.param(p, id=p.name) for p in PROGRAMS])
def test_the_reference_agrees_with_pytorch(program: Program) -> None:
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    assert_same(reference(program.name), torch_numbers(program, torch), TORCH_RTOL, f"{program.name} against PyTorch")


# --- the corpus itself --------------------------------------------------------------------------------------------


def test_the_corpus_covers_every_function_of_the_language() -> None:
    from gradcli.lang.functions import FUNCTIONS

    text = " ".join(p.text for p in PROGRAMS)
    operators = {"add": "+", "sub": "-", "mul": "*", "div": "/", "neg": "-"}
    comparisons = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
    missing = [
        name
        for name in FUNCTIONS
        if f"{name}(" not in text and operators.get(name, "\0") not in text and comparisons.get(name, "\0") not in text
    ]
    assert len(PROGRAMS) >= 40
    assert not missing, f"no program of the corpus uses {missing}"
