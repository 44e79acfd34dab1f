"""Issue 36: a model's inputs do not fit on a command line: ``--at w=@FILE`` reads one from a file
(.npy, .npz, .csv, .tsv, .txt; .pt with PyTorch; .safetensors where installed) on every command, with
the numbers of the same value typed after ``--at``; a bad file gets one ``error:`` line, exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest
from frameworks import need
from typer.testing import CliRunner

from gradcli.cli.app import app
from gradcli.lang.values import MANY_POINTS, assignments

runner = CliRunner()

W = np.array([[0.5, -1.25, 2.0], [3.0, 0.125, -0.75]])
TYPED = "w=[[0.5,-1.25,2.0],[3.0,0.125,-0.75]]"


@pytest.fixture()
def files(tmp_path):
    np.save(tmp_path / "w.npy", W)
    np.savez(tmp_path / "w.npz", w=W, other=np.zeros(2))
    np.savez(tmp_path / "single.npz", anything=W)
    np.savetxt(tmp_path / "w.csv", W, delimiter=",")
    np.savetxt(tmp_path / "w.tsv", W, delimiter="\t")
    np.savetxt(tmp_path / "w.txt", W)
    return tmp_path


def _json(args):
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("name", ["w.npy", "w.npz", "single.npz", "w.csv", "w.tsv", "w.txt"])
def test_every_format_reads_the_same_float64_value(files, name):
    (value,) = assignments([f"w=@{files / name}"]).values()
    assert value.dtype == np.float64
    np.testing.assert_array_equal(value, W)


@pytest.mark.parametrize(
    "command",
    [
        ["eval", "sum(w^3) + w[0, 1]"],
        ["jacobian", "sin(w) * 2"],
        ["hessian", "sum(w^3)"],
        ["check", "sum(exp(w) * w)"],
        ["graph", "sum(w * w)", "--format", "json"],
    ],
)
def test_every_command_gives_the_typed_values_numbers(files, command):
    from_file = _json([*command, "--at", f"w=@{files / 'w.npy'}"])
    typed = _json([*command, "--at", TYPED])
    assert from_file == typed


def test_a_function_of_the_users_takes_a_file_input(files):
    (files / "model.py").write_text("import numpy as np\n\ndef f(w, b):\n    return (w * w).sum() + b\n")
    found = _json(["eval", f"{files / 'model.py'}:f", "--at", f"w=@{files / 'w.csv'},b=1"])
    assert found["value"] == pytest.approx(float((W * W).sum()) + 1, rel=1e-15)
    np.testing.assert_array_equal(np.array(found["gradient"]["w"]), 2 * W)


def test_a_torch_file_and_a_torch_function(files):
    torch = need("torch")
    torch.save(torch.tensor(W, dtype=torch.float32), files / "w.pt")
    torch.save({"w": torch.tensor(W), "b": torch.zeros(1)}, files / "named.pt")
    (files / "net.py").write_text("import torch\n\ndef f(w):\n    return torch.tanh(w).sum()\n")
    for name in ("w.pt", "named.pt"):
        found = _json(["eval", f"{files / 'net.py'}:f", "--at", f"w=@{files / name}"])
        expected = torch.tensor(W, dtype=torch.float32).double() if name == "w.pt" else torch.tensor(W)
        expected.requires_grad_(True)
        torch.tanh(expected).sum().backward()
        np.testing.assert_array_equal(np.array(found["gradient"]["w"]), expected.grad.numpy())


@pytest.mark.parametrize(
    ("write", "at", "message"),
    [
        (None, "w=@{d}/none.npy", "error: --at w=@{d}/none.npy: no such file"),
        (None, "w=@{d}/w.xyz", "error: --at w=@{d}/w.xyz: unknown format '.xyz'; use one of .npy, .npz, .csv"),
        ("garbage", "w=@{d}/bad.npy", "error: --at w=@{d}/bad.npy: not a NumPy .npy file"),
        ("1,2\n3\n", "w=@{d}/ragged.csv", "error: --at w=@{d}/ragged.csv: cannot read it as .csv"),
        ("1,nan\n", "w=@{d}/nan.csv", "error: --at w=@{d}/nan.csv: holds a value that is not finite"),
        (None, "w=@", "error: --at w=@ needs a file name: --at w=@FILE.npy"),
        (None, "w=@{d}/two.npz", "error: --at w=@{d}/two.npz: it holds 2 arrays (a, b) and none named 'w'"),
    ],
)
def test_a_bad_file_is_one_error_line_exit_2(files, write, at, message):
    at, message = at.format(d=files), message.format(d=files)
    if write is not None:
        (files / at.split("/")[-1]).write_text(write)
    np.savez(files / "two.npz", a=W, b=W)
    result = runner.invoke(app, ["eval", "sum(w)", "--at", at])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(message), line


def test_a_value_near_the_shells_limit_names_the_file_form():
    assert "NAME=@FILE.npy" in MANY_POINTS
    result = runner.invoke(app, ["eval", "sum(w)", "--at", "w=[" + ",".join(["1"] * 40_000) + "]"])
    assert result.exit_code == 0
    assert result.stdout.startswith("value = 40000\n")
    assert result.stderr == (
        "warning: --at w is 80,003 characters long, near the shell's limit of 131,072 bytes for one argument: "
        "read a large input from a file, --at w=@FILE.npy (or .csv, .txt, .pt)\n"
    )
