"""Issue 16: ``jacobian`` and ``hessian`` write ``--format csv`` and ``--format npy`` (``-o FILE`` by extension) that
NumPy and pandas read back to exactly the doubles of ``--json``; ``gradient`` is a mapping by variable in every
command's JSON; ``graph --format svg|dot|json|text`` write to stdout, ``png`` only when stdout is not a terminal."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest
from test_output16_complete import in_terminal, piped, posix_only

# values whose doubles have many digits, an array input (its labels hold commas: x[0,1]) and a NaN
JACOBIAN = ["jacobian", "[sin(x[0,0])*y, exp(x[0,1])/3, x[0,0]*y/7, log(y - 1)]", "--at", "x=[[0.1,0.7]],y=0.3"]
HESSIAN = ["hessian", "sum(sin(x)^2) * exp(y) / 3", "--at", "x=[0.1,0.7,1.3],y=0.3"]


def _json_matrix(args: list[str], key: str) -> np.ndarray:
    done = piped(*args, "--json")
    assert done.returncode == 0, done.stderr
    return np.array(json.loads(done.stdout)[key], dtype=np.float64)  # "nan" strings become nan


@pytest.mark.parametrize("args,key", [(JACOBIAN, "jacobian"), (HESSIAN, "hessian")], ids=["jacobian", "hessian"])
def test_csv_on_stdout_reads_back_exactly_with_numpy(args, key):
    done = piped(*args, "--format", "csv")
    assert done.returncode == 0, done.stderr
    loaded = np.loadtxt(io.StringIO(done.stdout), delimiter=",", ndmin=2)
    assert np.array_equal(loaded, _json_matrix(args, key), equal_nan=True)
    assert done.stdout.splitlines()[0] == ("# x[0][0],x[0][1],y" if key == "jacobian" else "# x[0],x[1],x[2],y")


@pytest.mark.parametrize("args,key", [(JACOBIAN, "jacobian"), (HESSIAN, "hessian")], ids=["jacobian", "hessian"])
def test_csv_and_npy_files_by_extension_read_back_exactly(args, key, tmp_path):
    expected = _json_matrix(args, key)
    for name in ("m.csv", "m.npy"):
        done = piped(*args, "-o", str(tmp_path / name))
        assert done.returncode == 0 and done.stdout == "", done.stderr
        wrote = f"wrote {tmp_path / name} ({expected.shape[0]} x {expected.shape[1]})"
        # log(y - 1) at y = 0.3 is nan: the Jacobian says so as eval does (issue 27)
        warned = ["warning: non-finite value: 'log(y - 1)' at column 44 gave nan from input -0.7"] * (key == "jacobian")
        assert done.stderr.splitlines() == [wrote, *warned]
    assert np.array_equal(np.loadtxt(tmp_path / "m.csv", delimiter=","), expected, equal_nan=True)
    assert np.array_equal(np.load(tmp_path / "m.npy", allow_pickle=False), expected, equal_nan=True)
    pd = pytest.importorskip("pandas", reason="reads the file back with pandas, which is not installed")
    frame = pd.read_csv(tmp_path / "m.csv")
    assert frame.shape == expected.shape
    assert np.array_equal(frame.to_numpy(dtype=np.float64), expected, equal_nan=True)


def test_npy_on_a_pipe_reads_back_exactly():
    import subprocess

    from test_output16_complete import COMMAND

    done = subprocess.run([*COMMAND, *JACOBIAN, "--format", "npy"], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"\x93NUMPY")
    assert np.array_equal(np.load(io.BytesIO(done.stdout)), _json_matrix(JACOBIAN, "jacobian"), equal_nan=True)


def test_the_csv_agrees_with_pytorch():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    done = piped(*HESSIAN, "--format", "csv")
    loaded = np.loadtxt(io.StringIO(done.stdout), delimiter=",")

    def f(v):
        return (torch.sin(v[:3]) ** 2).sum() * torch.exp(v[3]) / 3

    point = torch.tensor([0.1, 0.7, 1.3, 0.3], dtype=torch.float64)
    np.testing.assert_allclose(loaded, torch.autograd.functional.hessian(f, point).numpy(), rtol=1e-13, atol=1e-15)


@posix_only
def test_npy_is_not_sent_to_a_terminal():
    code, shown, _ = in_terminal(*JACOBIAN, "--format", "npy")
    assert code == 2
    assert shown == "error: --format npy is binary: write it with -o FILE, or send stdout to a file or a pipe\n"


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--format", "xls"], "error: --format xls: use one of text, csv, npy, json\n"),
        (
            ["-o", "m.xls"],
            "error: -o m.xls: cannot tell the format from '.xls'; use .csv, .npy, .json, .txt or --format\n",
        ),
        (["--json", "--format", "csv"], "error: --json and --format csv ask for two formats: give one\n"),
    ],
)
def test_bad_matrix_formats_are_one_error_line(extra, message):
    done = piped(*HESSIAN, *extra)
    # with --json the error is also one JSON object on stdout (issue 16: a script never parses stderr)
    stdout = (
        json.dumps({"error": message[len("error: ") :].rstrip("\n"), "exit_code": 2}) + "\n"
        if "--json" in extra
        else ""
    )
    assert (done.returncode, done.stdout, done.stderr) == (2, stdout, message)


# --- JSON: gradient by variable everywhere ---------------------------------------------------------------------------


def test_gradient_is_a_mapping_by_variable_in_every_command():
    at = ["--at", "x=[1,2],y=3"]
    expected = {"x": [3.0, 12.0], "y": 3.0}  # d/dx = x^2 y, d/dy = sum(x^3)/3
    for command in ("eval", "check", "hessian"):
        done = piped(command, "sum(x^3)/3*y", *at, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["gradient"] == expected, command
    document = json.loads(piped("hessian", "sum(x^3)/3*y", *at, "--json").stdout)
    assert document["inputs"] == ["x[0]", "x[1]", "y"]  # the keys SPEC fixes are kept
    assert document["hessian"] == [[6.0, 0.0, 1.0], [0.0, 12.0, 4.0], [1.0, 4.0, 0.0]]


# --- graph formats on stdout -------------------------------------------------------------------------------------------

GRAPH = ["graph", "x*y + sin(x)", "--at", "x=1,y=2"]


def _graph_bytes(*extra: str) -> bytes:
    import subprocess

    from test_output16_complete import COMMAND

    done = subprocess.run([*COMMAND, *GRAPH, *extra], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


needs_dot = pytest.mark.skipif(
    not any(os.access(os.path.join(p, "dot"), os.X_OK) for p in os.environ.get("PATH", "").split(os.pathsep)),
    reason="needs Graphviz's dot",
)


def test_graph_text_formats_go_to_stdout_without_o():
    assert _graph_bytes("--format", "dot").startswith(b"digraph gradcli {")
    document = json.loads(_graph_bytes("--format", "json"))
    assert {n["label"] for n in document["nodes"]} >= {"x", "y", "x * y", "sin(x)"}
    assert _graph_bytes("--format", "text").decode().splitlines()[0] == (
        "x = variable  # value=1  grad=2.5403023058681398 (2 + 0.5403023058681398)"
    )


@needs_dot
def test_graph_pictures_go_to_stdout_when_it_is_not_a_terminal():
    svg = _graph_bytes("--format", "svg")
    assert svg.startswith((b"<?xml", b"<svg")) and b"</svg>" in svg
    assert _graph_bytes("--format", "png").startswith(b"\x89PNG\r\n\x1a\n")
    assert _graph_bytes("--format", "pdf").startswith(b"%PDF")


@posix_only
def test_a_png_is_not_sent_to_a_terminal():
    code, shown, _ = in_terminal(*GRAPH, "--format", "png")
    assert code == 2
    assert shown == "error: --format png is binary: write it with -o FILE, or send stdout to a file or a pipe\n"
