"""Issue 18: ``check EXPR --points DATA`` checks the gradient at every point, the numeric methods
batched over the points (never one run a point), and reports the worst points; exit 1 on a mismatch."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from gradcli.autograd import replay as replay_module
from gradcli.cli.app import app

runner = CliRunner()


def _data(tmp_path, rows: int = 40):
    rng = np.random.default_rng(18)
    x, y = rng.uniform(0.1, 3, rows), rng.uniform(-2, 2, rows)
    path = tmp_path / "p.csv"
    path.write_text("x,y\n" + "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in zip(x, y)))
    return path, x, y


def test_every_point_agrees_and_the_methods_run_batched(tmp_path, monkeypatch):
    path, _, _ = _data(tmp_path)
    calls = []
    original = replay_module.replay
    monkeypatch.setattr(replay_module, "replay", lambda tape, batched, *a: calls.append(
        next(iter(batched.values())).shape[:2]) or original(tape, batched, *a))  # fmt: skip
    args = ["check", "sin(x)*exp(y) + sum(v*x)", "--points", str(path), "--at", "v=[1,2]", "--chunk-rows", "25"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert (doc["ok"], doc["points"], doc["failed"]) == (True, 40, 0)
    assert doc["methods"] == ["finite_difference", "complex_step"]
    assert all(w["error_over_tolerance"] <= 1 for w in doc["worst"])
    # per chunk (25 + 15 points) the chunk's record is replayed once for finite differences' round of steps
    # (8 for each of x, y, v[0], v[1], every point moved at once: 32 batches of 25 points) and once for the
    # complex step (4 batches); never one run a point
    assert sorted(calls) == [(4, 15), (4, 25), (32, 15), (32, 25)]
    text = runner.invoke(app, args)
    assert text.exit_code == 0
    assert text.stdout.splitlines()[-1] == "OK: at all 40 points autograd agrees with finite differences, complex step"


def test_a_wrong_formula_fails_and_the_worst_points_are_named(tmp_path):
    path, x, y = _data(tmp_path, 12)
    result = runner.invoke(app, ["check", "x^2*y", "--points", str(path), "--expect", "x=2*x*y + 1e-3*x^4"])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[-1] == "MISMATCH: at 12 of 12 points autograd disagrees with expected"  # only it disagrees
    worst = int(np.argmax(np.abs(1e-3 * x**4) / (1e-7 * np.abs(2 * x * y + 1e-3 * x**4))))
    assert lines[2].lstrip().startswith(f"{worst + 1} (x = {float(x[worst])!r}, y = {float(y[worst])!r})")
    assert lines[2].rstrip().endswith("MISMATCH")
    doc = json.loads(
        runner.invoke(app, ["check", "x^2*y", "--points", str(path), "--expect", "x=2*x", "--json"]).stdout
    )
    assert doc["ok"] is False and doc["failed"] == 12 and doc["worst"][0]["method"] == "expect"


def test_points_that_are_not_finite_fail(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("x\n1\n0\n4\n")
    result = runner.invoke(app, ["check", "log(x)", "--points", str(path), "--json"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["failed"] == 1 and doc["worst"][0]["point"] == 2


def test_sympy_alone_is_refused_with_points(tmp_path):
    path, _, _ = _data(tmp_path, 3)
    result = runner.invoke(app, ["check", "x*y", "--points", str(path), "--method", "sympy"])
    assert result.exit_code == 2
    assert (
        result.stderr
        == "error: check --points compares with fd, complex or --expect: SymPy works on one point at a time\n"
    )
