"""Issue 18: ``--points DATA --dask local:2 -o DIR`` gives, as a folder of Parquet parts, exactly what
one process gives; without dask the option says how to install it (exit 3)."""

from __future__ import annotations

import builtins

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcli.cli.app import app
from gradcli.errors import install_hint

runner = CliRunner()


def _parts(folder) -> list:
    import re

    return sorted(
        folder.glob("*.parquet"), key=lambda p: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.name)]
    )


def test_dask_local_2_equals_one_process(tmp_path):
    pytest.importorskip("dask.dataframe", reason="--dask needs dask (the scale extra)")
    pytest.importorskip("distributed", reason="--dask needs dask.distributed (the scale extra)")
    pa = pytest.importorskip("pyarrow", reason="Parquet and Arrow need pyarrow (the scale extra)")
    pq = pytest.importorskip("pyarrow.parquet", reason="Parquet needs pyarrow (the scale extra)")
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(18)
    for k in range(3):
        x, w = rng.uniform(-2, 2, 40), rng.uniform(-2, 2, 40)
        rows = "".join(f"{float(a)!r},{float(b)!r},id{k}-{i}\n" for i, (a, b) in enumerate(zip(x, w)))
        (data / f"part{k}.csv").write_text("x,w,id\n" + rows)
    expression = ["eval", "sin(x)*w^2 + sum(v*x)", "--points", str(data), "--at", "v=[1,2]", "--keep-columns"]
    one = tmp_path / "one.parquet"
    result = runner.invoke(app, [*expression, "-o", str(one)])
    assert result.exit_code == 0, result.stderr
    out = tmp_path / "out"
    result = runner.invoke(app, [*expression, "--dask", "local:2", "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    parts = _parts(out)
    assert len(parts) >= 1
    got = pa.concat_tables([pq.read_table(p) for p in parts])
    want = pq.read_table(one)
    assert (
        got.column_names == want.column_names == ["x", "w", "id", "value", "grad_x", "grad_w", "grad_v[0]", "grad_v[1]"]
    )
    for name in want.column_names:  # the same doubles, the same order
        assert got.column(name).to_pylist() == want.column(name).to_pylist(), name
    x, w = want.column("x").to_numpy(), want.column("w").to_numpy()
    np.testing.assert_allclose(want.column("value").to_numpy(), np.sin(x) * w**2 + 3 * x, rtol=1e-15)
    # the folder of parts is itself a data set
    result = runner.invoke(app, ["eval", "2*grad_x", "--points", str(out)])
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 121


def test_dask_needs_an_output_folder_and_a_good_address(tmp_path):
    source = tmp_path / "p.csv"
    source.write_text("x\n1\n")
    result = runner.invoke(app, ["eval", "x", "--points", str(source), "--dask", "local:2"])
    assert (result.exit_code, result.stderr) == (
        2,
        "error: --dask writes a folder of Parquet parts: give it with -o DIR\n",
    )
    result = runner.invoke(
        app, ["eval", "x", "--points", str(source), "--dask", "local:zero", "-o", str(tmp_path / "o")]
    )
    assert result.exit_code == 2
    assert (
        result.stderr == "error: --dask local:zero: give local:N with N workers (local:2), or a scheduler's address\n"
    )


def test_without_dask_the_option_says_how_to_install_it(tmp_path, monkeypatch):
    source = tmp_path / "p.csv"
    source.write_text("x\n1\n")
    real_import = builtins.__import__

    def no_dask(name, *args, **kwargs):
        if name.split(".")[0] in ("dask", "distributed"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    result = runner.invoke(app, ["eval", "x", "--points", str(source), "--dask", "local:2", "-o", str(tmp_path / "o")])
    assert result.exit_code == 3
    assert result.stderr == f"error: --dask needs dask and pyarrow: {install_hint('scale')}\n"
