"""Issue 27, adversarial review: variations of the issue's examples that still went wrong.

- ``--dask local:2`` printed Dask's own log lines with a traceback on stderr (a comm closed while
  the cluster shut down, "Task exception was never retrieved ... AllExit" after Ctrl-C) beside
  gradcli's lines, in about two runs of three: stderr must hold only what gradcli says.
- ``plot --range -1e308,1e308``: both ends finite, so accepted, but the width overflows: the samples
  were inf and nan and the run exited 0 with an empty picture. Refused now (exit 2), one line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-m", "gradcli", *args], capture_output=True, text=True, env=env, **kw)


def _parts_with_a_nan_row(folder, rows: int = 3000) -> None:
    pa = pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (the scale extra)")
    pq = pytest.importorskip("pyarrow.parquet", reason="Parquet needs pyarrow (the scale extra)")
    folder.mkdir()
    rng = np.random.default_rng(27)
    for k in range(4):
        x, w = rng.uniform(0.5, 2, rows), rng.uniform(0.5, 2, rows)
        if k == 1:
            x[7] = -1.0  # sqrt(-1): a nan row, warned about once
        pq.write_table(pa.table({"x": x, "w": w}), str(folder / f"p{k}.parquet"))


def test_dask_local_prints_no_traceback_only_gradclis_lines(tmp_path):
    pytest.importorskip("dask.dataframe", reason="--dask needs dask (the scale extra)")
    pytest.importorskip("distributed", reason="--dask needs dask.distributed (the scale extra)")
    data = tmp_path / "parts"
    _parts_with_a_nan_row(data)
    for run in range(4):  # the shutdown race printed a traceback in about 2 runs of 3
        out = tmp_path / f"out{run}"
        result = _cli("eval", "sqrt(x)*log(w)", "--points", str(data), "--dask", "local:2", "-o", str(out))
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr and "distributed" not in result.stderr, result.stderr
        lines = result.stderr.splitlines()  # what it wrote (as every -o says it) and the first warning, no more
        warnings = [line for line in lines if line.startswith("warning: non-finite value: 'sqrt(x)'")]
        assert sorted(lines) == sorted([f"wrote {out} (4 Parquet parts)", *warnings]), result.stderr
        assert len(warnings) == 1 and "at point 3008" in warnings[0]  # numbered as one process numbers it


def test_dask_local_interrupted_says_interrupted_without_a_traceback(tmp_path):
    pytest.importorskip("dask.dataframe", reason="--dask needs dask (the scale extra)")
    pytest.importorskip("distributed", reason="--dask needs dask.distributed (the scale extra)")
    data = tmp_path / "parts"
    _parts_with_a_nan_row(data, rows=200_000)
    env = {**os.environ, "PYTHONPATH": ROOT}
    command = [sys.executable, "-m", "gradcli", "eval", "sin(x)*w+abs(x)", "--points", str(data), "--dask", "local:2"]
    for k, delay in enumerate((1.0, 1.3, 1.6)):  # mid-gather: Dask's AllExit traceback was printed there
        out = tmp_path / f"out{k}"
        out.mkdir()
        (out / "part.0.parquet").write_text("OLD")
        proc = subprocess.Popen([*command, "-o", str(out)], stderr=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        stderr = err.decode()
        assert "Traceback" not in stderr, stderr
        if proc.returncode == 130:  # interrupted: the old result stays
            assert stderr.strip().splitlines()[-1] == "interrupted", stderr
            assert (out / "part.0.parquet").read_text() == "OLD"
        else:  # finished before the signal (a fast machine)
            assert proc.returncode == 0, stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("spec", ["-1e308,1e308", "x=-1.7e308,1.7e308", "-1e308,9e307"])
def test_plot_range_whose_width_overflows_is_refused(spec):
    result = _cli("plot", "x*x", "--range", spec, "--json")
    assert result.returncode == 2, result.stdout
    assert result.stderr == f"error: --range {spec}: too wide, the end minus the start is beyond float64's range\n"
    assert json.loads(result.stdout)["exit_code"] == 2


def test_plot_widest_range_that_fits_gives_finite_samples():
    result = _cli("plot", "x", "--range", "-8e307,8e307", "--json")
    assert result.returncode == 0, result.stderr
    xs = json.loads(result.stdout)["x"]
    assert xs[0] == -8e307 and xs[-1] == 8e307 and all(isinstance(v, float) for v in xs)


@pytest.mark.parametrize(("cell", "shown"), [(float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf")])
@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_a_non_finite_cell_of_a_binary_file_is_named_as_a_number_not_a_numpy_repr(tmp_path, cell, shown, suffix):
    pa = pytest.importorskip("pyarrow", reason="Parquet and Arrow need pyarrow (the scale extra)")
    table = pa.table({"x": [1.0, 2.0, 3.0], "w": [1.0, cell, 2.0]})
    path = tmp_path / f"data{suffix}"
    if suffix == ".parquet":
        pytest.importorskip("pyarrow.parquet", reason="Parquet needs pyarrow").write_table(table, str(path))
    else:
        pytest.importorskip("pyarrow.feather", reason="Arrow IPC needs pyarrow").write_feather(table, str(path))
    result = _cli("eval", "x*w", "--points", str(path))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"error: --points {path}: data row 2, column 'w': {shown} is not a finite float64 number "
        "(nan, an infinity, or too large)\n"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["eval", "x", "--at", "x=1"],
        ["eval", "v", "--at", "v=[1,2]"],
        ["check", "v", "--at", "v=[1,2]"],
        ["graph", "v", "--at", "v=[1,2]"],
        ["eval", "v*x", "--at", "v=[1,2]", "--points", "POINTS"],
        ["check", "v*x", "--at", "v=[1,2]", "--points", "POINTS"],
    ],
)
@pytest.mark.parametrize("seed", ["1e400", "-1e309", "1/0", "[1e400,1]", "[1,-1e999]"])
def test_a_seed_that_is_not_finite_is_refused_as_at_values_are(tmp_path, args, seed):
    """--seed 1e400 gave d/dx = inf with exit 0 (and [1e400,1] inf in the gradient) where
    --at x=1e400 is refused: every road reads --seed through one parser, which now refuses it."""
    points = tmp_path / "p.csv"
    points.write_text("x\n1\n3\n")
    args = [str(points) if a == "POINTS" else a for a in args]
    if seed.startswith("[") and args[1] == "x":
        pytest.skip("a vector seed needs a vector output")
    result = _cli(*args, "--seed", seed)
    assert result.returncode == 2 and result.stdout == "", result.stdout
    assert result.stderr == f"error: --seed: {seed!r} is not a finite float64 number (too large, or 1/0)\n"


def test_the_largest_finite_seed_is_still_taken():
    result = _cli("eval", "v", "--at", "v=[1,2]", "--seed", "[1e308,1]", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["gradient"]["v"] == [1e308, 1.0]


@pytest.mark.parametrize("suffix", [".csv", ".parquet", "-"])
def test_check_points_expect_reads_a_column_the_expression_does_not_use(tmp_path, suffix):
    """check --at x=1,w=2,z=5 --expect x="w+z-5" is OK; at the same rows through --points the formula's
    z (a column of the data) was an "unknown name ... give it with --at z=", and --at z= is refused
    beside a column of that name: a dead end. The formula now reads its columns from the row."""
    rows = [(1.0, 2.0, 5.0), (3.0, 4.0, 6.0), (-2.0, 0.5, 5.0)]
    path = tmp_path / "data.csv"
    path.write_text("x,w,z\n" + "".join(f"{x!r},{w!r},{z!r}\n" for x, w, z in rows))
    if suffix == ".parquet":
        pa = pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (the scale extra)")
        pq = pytest.importorskip("pyarrow.parquet", reason="Parquet needs pyarrow (the scale extra)")
        path = tmp_path / "data.parquet"
        pq.write_table(pa.table({k: [r[i] for r in rows] for i, k in enumerate("xwz")}), str(path))
    spec, stdin = ("-", (tmp_path / "data.csv").read_text()) if suffix == "-" else (str(path), None)
    agree = _cli("check", "x*w", "--points", spec, "--expect", "x=w*z/z", "--json", input=stdin)
    assert agree.returncode == 0, agree.stderr
    assert json.loads(agree.stdout)["ok"] is True
    off = _cli("check", "x*w", "--points", spec, "--expect", "x=w+z-5", "--json", input=stdin)
    assert off.returncode == 1, off.stderr
    found = json.loads(off.stdout)
    assert found["failed"] == 1 and found["disagreeing"] == ["expect"]  # only the row with z = 6
    for x, w, z in rows:  # the same verdict as check --at at each row
        one = _cli("check", "x*w", "--at", f"x={x!r},w={w!r},z={z!r}", "--expect", "x=w+z-5")
        assert one.returncode == (1 if z != 5.0 else 0), one.stdout


@pytest.mark.parametrize(
    ("expr", "x", "y"),
    [("floor(x)*y + x", -1.0, 1e-9), ("trunc(x)*y + x*x", 3.0, 1e-7), ("round(x + 0.5)*y - x", 2.0, -1e-6)],
)
def test_a_small_step_under_the_slope_is_a_step_on_both_roads(tmp_path, expr, x, y):
    """floor(x)*1e-9 + x at x = -1: f(x+h) - f(x-h) = 1e-9 + 2h, so the step was not seen (it was
    looked for only where it outweighs 2 f' h) and the straddling central difference, 1 + 3e-7, was a
    MISMATCH through --points (exit 1) where check --at said OK (SymPy arbitrated). The part of
    f(x+h) - f(x-h) not linear in h, the same at every level, is now the step on every road."""
    points = tmp_path / "p.csv"
    points.write_text(f"x,y\n{x!r},{y!r}\n0.25,0.5\n")
    through_points = _cli("check", expr, "--points", str(points), "--json")
    assert through_points.returncode == 0, through_points.stdout
    found = json.loads(through_points.stdout)
    assert found["ok"] is True and found["not_differentiable_points"] == 1
    for method in ("fd", "sympy,fd,complex"):
        at = _cli("check", expr, "--at", f"x={x!r},y={y!r}", "--method", method)
        assert at.returncode == 0, at.stdout
        assert "x: not differentiable here: the function steps by" in at.stdout


def test_a_smooth_function_with_no_third_derivative_is_no_step():
    """The steady part of f(x+h) - f(x-h) is 0 for x^2 + 3x (no h^3 term): no step is claimed."""
    result = _cli("check", "x*x + 3*x + y", "--at", "x=-1,y=1e-9", "--method", "fd")
    assert result.returncode == 0 and "not differentiable" not in result.stdout, result.stdout


def test_an_interrupt_swallowed_in_a_gc_callback_still_stops_the_write(tmp_path):
    """Ctrl-C during --dask local:N could land in one of Dask's GC callbacks, where Python swallows the
    KeyboardInterrupt (printing 'Exception ignored ... Traceback'): the command then went on and put
    its result in place of the old one, exit 0. The interrupt is now raised again before that."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.txt").write_text("OLD")
    code = textwrap.dedent(
        f"""
        import gc, os, signal, sys
        from gradcli.files import atomic_folder

        class Interrupts:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGINT)  # handled inside __del__: its exception is swallowed
                for _ in range(1000):
                    pass

        try:
            with atomic_folder({str(tmp_path / "out")!r}) as folder:
                open(os.path.join(folder, "new.txt"), "w").write("NEW")
                Interrupts()
                gc.collect()
            print("committed")
        except KeyboardInterrupt:
            print("interrupted")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.stdout == "interrupted\n", done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["old.txt"]
