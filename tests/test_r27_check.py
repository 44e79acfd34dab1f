"""Issue 27: a point's ``check`` verdict is the same whichever road reaches it. ``check --points`` (the
chunk's points batched), ``check --at`` (one point, its record replayed) and ``check --cases`` with
``points`` decide every point with one procedure (gradcli/check/decide.py), and the points' summary
names only the methods that disagreed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcli.check import check
from gradcli.check.cases import parse_cases, run_case
from gradcli.cli.app import app
from gradcli.cli.points.check import PointsCheck
from gradcli.lang.data import Chunk
from gradcli.lang.program import load

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "gradcli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def _csv(path: Path, rows: list[tuple[float, float]]) -> Path:
    path.write_text("x,y\n" + "".join(f"{x!r},{y!r}\n" for x, y in rows))
    return path


# --- the two reports, as a user ran them -------------------------------------------------------


def test_abs_is_not_run_through_the_complex_step_on_the_points_road(tmp_path):
    _csv(tmp_path / "a.csv", [(-0.185, -1.74)])
    points = _cli("check", "abs(y) + x*y", "--points", "a.csv", cwd=tmp_path)
    at = runner.invoke(app, ["check", "abs(y) + x*y", "--at", "x=-0.185,y=-1.74"])
    assert at.exit_code == 0, at.stdout + at.stderr
    assert points.returncode == 0, points.stdout + points.stderr
    assert points.stderr == ""
    lines = points.stdout.splitlines()
    assert lines[-2] == (
        "complex step: skipped: abs (AbsBackward0) is not complex-analytic: "
        "central differences (with their kink search) check the gradient instead"
    )
    assert lines[-1] == "OK: at all 1 points autograd agrees with finite differences"


def test_finite_differences_across_a_step_are_inconclusive_on_the_points_road(tmp_path):
    _csv(tmp_path / "b.csv", [(1.0, 2.99)])
    points = _cli("check", "trunc(y)*x", "--points", "b.csv", cwd=tmp_path)
    at = runner.invoke(app, ["check", "trunc(y)*x", "--at", "x=1,y=2.99"])
    assert at.exit_code == 0, at.stdout + at.stderr
    assert "finite differences: inconclusive at d/dy" in at.stdout
    assert points.returncode == 0, points.stdout + points.stderr
    out = points.stdout
    assert "casting" not in out  # the complex step is not tried on trunc at all
    assert "complex step: skipped: trunc (TruncBackward0) is not complex-analytic" in out
    assert "finite differences: inconclusive at 1 of 1 points" in out
    assert out.splitlines()[-1] == "OK: at all 1 points autograd agrees with finite differences"


# --- the summary names only the methods that disagreed -----------------------------------------


def test_the_summary_names_only_the_methods_that_disagreed(tmp_path):
    _csv(tmp_path / "c.csv", [(1.0, 2.0), (2.0, -1.0), (0.5, 0.25)])
    wrong = _cli("check", "x^2*y", "--points", "c.csv", "--expect", "x=2*x", cwd=tmp_path)
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    # 2*x equals 2*x*y only where y = 1: at no row here
    assert wrong.stdout.splitlines()[-1] == "MISMATCH: at 3 of 3 points autograd disagrees with expected"
    right = runner.invoke(app, ["check", "x^2*y", "--points", str(tmp_path / "c.csv"), "--expect", "x=2*x*y"])
    assert right.exit_code == 0, right.stdout + right.stderr
    assert right.stdout.splitlines()[-1] == (
        "OK: at all 3 points autograd agrees with finite differences, complex step, expected"
    )
    args = ["check", "x^2*y", "--points", str(tmp_path / "c.csv"), "--expect", "x=2*x", "--json"]
    doc = json.loads(runner.invoke(app, args).stdout)
    assert (doc["ok"], doc["failed"], doc["disagreeing"]) == (False, 3, ["expect"])


def test_a_point_where_nothing_disagrees_but_the_value_is_not_finite_says_so():
    result = runner.invoke(app, ["check", "log(x)", "--points", "-"], input="x\n1\n0\n4\n")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-1] == "MISMATCH: at 1 of 3 points the value or the gradient is not finite"


# --- the differential test: every row of --points against --at at that row ----------------------

EXPRESSIONS = [
    ("abs(y) + x*y", {}),
    ("trunc(y)*x", {}),
    ("floor(x)*y + x", {}),
    ("round(x*y) + y", {}),
    ("sign(x)*y^2", {}),
    ("max(x, y)*x", {}),
    ("min(x, y) + x*y", {}),
    ("relu(x)*y", {}),
    ("clamp(x, -1, 1)*y", {}),
    ("(x > y)*x^2 + y", {}),
    ("x^2 if x > 0 else -x*y", {}),  # where-like: both sides run, one is taken
    ("(x^2 if x < 1 else 2*x - 1)*y", {}),  # piecewise, differentiable at the seam
    ("abs(x - y)^3", {}),
    ("leaky_relu(x)*exp(y)", {}),
    ("sin(x)*exp(y)", {}),
    ("x*detach(x) + y", {}),  # held fixed on both roads, as autograd holds it
    ("log(1 + x^2)*y + x^3", {}),
    ("x^2*y", {"x": "2*x*y", "y": "x^2"}),  # right
    ("x^2*y", {"x": "2*x"}),  # wrong where y != 1
    ("abs(x)*y", {"x": "sign(x)*y"}),  # right, with a kink at x = 0
    ("sin(x)*y", {"y": "-sin(x)"}),  # a sign error
]


def _rows() -> list[tuple[float, float]]:
    special = [0.0, 1e-300, -1e-300, 1e-9, -0.5, 0.5, 1.0, 2.99, 3.0, -1.0, -2.5, 1.0 - 1e-12, 2.0 + 1e-10]
    rows = [(a, b) for a in special for b in (0.0, 0.5, -1.74, 2.99, 1.0)]
    rows += [(-0.185, -1.74), (1.0, 2.99), (0.3, 0.3), (-1.0, -1.0), (1.0, 1.0)]  # kinks of max/min, x = y
    rng = np.random.default_rng(27)
    rows += [(float(a), float(b)) for a, b in rng.uniform(-4, 4, size=(30, 2))]
    return rows


ROWS = _rows()


def _points_verdicts(expression: str, expect: dict[str, str]) -> list[tuple[bool, list[str]]]:
    program = load(expression)
    checker = PointsCheck(program, {}, [], None, [], None, None, expect)
    xs, ys = (np.array(c, dtype=np.float64) for c in zip(*ROWS))
    _, decision = checker.decided(Chunk({"x": xs, "y": ys}, {}, len(ROWS)))
    return [(bool(decision.ok[i]), decision.disagreeing(i)) for i in range(len(ROWS))]


def _at_verdict(expression: str, expect: dict[str, str], x: float, y: float) -> tuple[bool, list[str]]:
    result = check(load(expression), {"x": np.asarray(x), "y": np.asarray(y)}, methods=["fd", "complex"],
                   expect=expect or None)  # fmt: skip
    return result.ok, [name for name, c in result.checks.items() if c.ok is False]


@pytest.mark.parametrize("expression, expect", EXPRESSIONS, ids=[f"{e} {x}" for e, x in EXPRESSIONS])
def test_every_row_of_points_gets_the_verdict_check_at_gives_there(expression, expect):
    batched = _points_verdicts(expression, expect)
    for (x, y), found in zip(ROWS, batched):
        assert found == _at_verdict(expression, expect, x, y), (expression, x, y)
    if expect == {"x": "2*x"}:  # the wrong formula is caught where it is wrong, and only by the expected values
        wrong = [found for (x, y), found in zip(ROWS, batched) if y != 1.0 and abs(x) > 1e-6]
        assert len(wrong) > 40 and all(found == (False, ["expect"]) for found in wrong)
    reported = {"abs(y) + x*y": (-0.185, -1.74), "trunc(y)*x": (1.0, 2.99)}
    if expression in reported:  # the two reports' points pass
        assert batched[ROWS.index(reported[expression])] == (True, [])


def test_the_file_and_its_rows_one_by_one_agree_through_the_cli(tmp_path):
    """The CLI in-process over a file in chunks of 7: the failing rows' count and the methods named
    are those of check --at at each row."""
    path = _csv(tmp_path / "p.csv", ROWS)
    expression, expect = "x^2*y + abs(x)", {"x": "2*x*y"}  # wrong at x < 0
    args = ["check", expression, "--points", str(path), "--expect", "x=2*x*y", "--chunk-rows", "7", "--json"]
    doc = json.loads(runner.invoke(app, args).stdout)
    at = [_at_verdict(expression, expect, x, y) for x, y in ROWS]
    assert doc["points"] == len(ROWS) and doc["failed"] == sum(not ok for ok, _ in at) > 0
    assert doc["disagreeing"] == ["expect"] == sorted({m for _, named in at for m in named})


ONE_ROW = [
    ("abs(y) + x*y", (-0.185, -1.74)),
    ("abs(y) + x*y", (0.5, 0.0)),
    ("trunc(y)*x", (1.0, 2.99)),
    ("floor(x)*y", (2.995, 0.5)),
    ("(x > y)*x^2 + y", (0.5, 0.5)),
    ("x*detach(x) + y", (0.5, 2.0)),
    ("max(x, y)*x", (0.3, 0.3)),
    ("sin(x)*exp(y)", (0.3, -0.2)),
]


@pytest.mark.parametrize("expression, row", ONE_ROW, ids=[f"{e} at {r}" for e, r in ONE_ROW])
def test_a_one_row_file_gets_the_exit_code_check_at_gives(expression, row, tmp_path):
    """Through the CLI (in process): the file's verdict and exit code are those of --at at its row."""
    path = _csv(tmp_path / "one.csv", [row])
    at = ["--at", f"x={row[0]!r},y={row[1]!r}", "--method", "fd,complex"]
    by_points = runner.invoke(app, ["check", expression, "--points", str(path), "--json"])
    by_at = runner.invoke(app, ["check", expression, *at, "--json"])
    assert by_at.exit_code in (0, 1), by_at.stdout + by_at.stderr
    assert by_points.exit_code == by_at.exit_code, by_points.stdout + by_at.stdout
    assert json.loads(by_points.stdout)["ok"] is json.loads(by_at.stdout)["ok"]


def test_cases_with_points_agree_with_the_points_road(tmp_path):
    _csv(tmp_path / "p.csv", ROWS)
    text = '[[case]]\nname = "kinks"\nexpr = "abs(y) + max(x, y)*x"\npoints = "p.csv"\nmethods = ["fd", "complex"]\n'
    text += 'expect = { y = "sign(y) + (y > x)*x" }\n'
    path = tmp_path / "cases.toml"
    path.write_text(text)
    (case,) = parse_cases(text, str(path))
    result = run_case(case)
    failed_rows = result.result["points"]["failed_rows"]
    verdicts = _points_verdicts("abs(y) + max(x, y)*x", {"y": "sign(y) + (y > x)*x"})
    assert failed_rows == [i + 1 for i, (ok, _) in enumerate(verdicts) if not ok]


STEPS = [("trunc(y)*x", (0.5, 1.0), "y", 0.5), ("floor(y)*x + y", (2.0, 2.0), "y", 2.0),
         ("sign(y)*x", (0.5, 0.0), "y", 1.0), ("round(x)*y", (0.5, 2.0), "x", 2.0)]  # fmt: skip


@pytest.mark.parametrize("expression, row, element, jump", STEPS, ids=[e for e, *_ in STEPS])
def test_at_a_step_the_verdict_is_not_differentiable_on_both_roads(expression, row, element, jump):
    """Finite differences straddling a step grow like 1/h: a step found, not a mismatch of autograd's 0
    (as PyTorch gives there); both roads say so (before, both said MISMATCH)."""
    program = load(expression)
    result = check(program, {"x": np.asarray(row[0]), "y": np.asarray(row[1])}, methods=["fd", "complex"])
    assert result.ok, result.verdict()
    (kink,) = result.kinks
    assert (kink.element, kink.jump) == (element, pytest.approx(jump, rel=1e-6))
    assert float(result.gradient[element]) == (1.0 if expression.endswith("+ y") else 0.0)
    assert kink.text() == (
        f"{element}: not differentiable here: the function steps by {jump:.10g}; autograd gives "
        f"{result.gradient[element]:.10g} "
        "(as PyTorch does at a step), not judged"
    )
    checker = PointsCheck(program, {}, [], None, [], None, None, {})
    _, decision = checker.decided(Chunk({"x": np.array([row[0]]), "y": np.array([row[1]])}, {}, 1))
    assert decision.ok.tolist() == [True] and decision.kinked.any()


def test_a_python_function_gets_check_at_s_verdict_at_every_row(tmp_path):
    """Recorded point by point as check --at records it: its branches, abs, detach and an escape through
    float() are judged alike on both roads."""
    (tmp_path / "g.py").write_text(
        "import math\n\n\ndef g(x, y):\n    if x > 0:\n        return abs(y) * x + x.detach() * y\n"
        "    return math.sin(float(x)) + y * y\n"
    )
    program = load(None, None, f"{tmp_path / 'g.py'}:g")
    rows = [(0.5, 0.0), (-0.5, 1.0), (1.0, -2.0), (2.0, 0.3)]
    checker = PointsCheck(program, {}, [], None, [], None, None, {})
    xs, ys = (np.array(c) for c in zip(*rows))
    _, decision = checker.decided(Chunk({"x": xs, "y": ys}, {}, len(rows)))
    found = [(bool(decision.ok[i]), decision.disagreeing(i)) for i in range(len(rows))]
    at = [check(program, {"x": np.asarray(x), "y": np.asarray(y)}, methods=["fd", "complex"]) for x, y in rows]
    assert found == [(r.ok, [n for n, c in r.checks.items() if c.ok is False]) for r in at]
    assert [ok for ok, _ in found] == [True, False, True, True]  # float(x) hides d/dx from autograd at x < 0


def test_the_points_summary_counts_the_points_that_are_not_differentiable():
    result = runner.invoke(app, ["check", "abs(y) + x*y", "--points", "-"], input="x,y\n1,0\n2,1\n3,0\n")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == (
        "OK: at all 3 points autograd agrees with finite differences; not differentiable at 2 of them (a kink or a step)"
    )


def test_every_point_s_atol_scale_is_the_one_point_s():
    from gradcli.check.numeric import atol_scale, atol_scales

    rng = np.random.default_rng(3)
    f0, grad, x0 = rng.normal(size=(40, 1)) * 10.0, rng.normal(size=(40, 3)), rng.normal(size=(40, 3)) * 5.0
    f0[:3, 0], grad[3, 1], f0[4, 0], grad[4] = np.inf, np.nan, 0.0, 0.0
    x0[4] = 0.0
    expected = [atol_scale(f0[p], grad[p], x0[p]) for p in range(40)]
    assert atol_scales(f0, grad, x0).tolist() == expected
    assert expected[:3] == [1.0] * 3 and expected[4] == 1.0
