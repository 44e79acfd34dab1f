"""Issue 18, ``--points`` at scale: streamed in chunks, CSV/Parquet/Arrow IPC in and out by extension,
folders and globs as one data set, stdin, ``--keep-columns``, a bad row in a later chunk, and CSV
without pyarrow (the core install)."""

from __future__ import annotations

import builtins
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcli.cli.app import app
from gradcli.errors import install_hint

pa = pytest.importorskip("pyarrow", reason="Parquet and Arrow need pyarrow (the scale extra)")
pq = pytest.importorskip("pyarrow.parquet", reason="Parquet needs pyarrow (the scale extra)")

runner = CliRunner()

X = np.array([0.5, -1.25, 2.0, 3.0, 0.1, -7.5, 1e-7])
W = np.array([1.0, 2.5, -0.75, 0.2, 1.0 / 3.0, 4.0, 123456.789])


def _invoke(*args: str, input: bytes | None = None):
    return runner.invoke(app, list(args), input=input)


def _csv(path, x=X, w=W) -> None:
    path.write_text("x,w\n" + "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in zip(x, w)))


def _expected(x=X, w=W) -> dict[str, np.ndarray]:
    """(x+w)*(w+1), its gradient: d/dx = w+1, d/dw = (w+1) + (x+w), as the backward pass sums it."""
    return {"value": (x + w) * (w + 1), "grad_x": w + 1, "grad_w": (w + 1) + (x + w)}


def _digits(text: str) -> str:
    """The significant digits of a number's text (``-1.25e+03`` -> ``125``)."""
    mantissa = text.lstrip("-").split("e")[0].replace(".", "")
    return mantissa.strip("0")


def _read(path) -> dict[str, np.ndarray]:
    """Any output file back as float64 columns (CSV through NumPy's own float parser)."""
    name = str(path)
    if name.endswith(".parquet"):
        table = pq.read_table(name)
    elif name.endswith((".arrow", ".feather")):
        table = pa.ipc.open_file(name).read_all()
    else:
        lines = path.read_text().splitlines()
        header = lines[0].split(",")
        cells = [line.split(",") for line in lines[1:]]
        return {h: np.array([float(c[i]) for c in cells]) for i, h in enumerate(header)}
    return {h: table.column(h).to_numpy() for h in table.column_names}


@pytest.mark.parametrize("middle", ["parquet", "arrow", "feather"])
def test_every_format_round_trips_to_the_same_doubles(tmp_path, middle):
    source = tmp_path / "in.csv"
    _csv(source)
    first = tmp_path / f"out.{middle}"
    result = _invoke("eval", "(x+w)*(w+1)", "--points", str(source), "-o", str(first))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    got = _read(first)
    assert list(got) == ["x", "w", "value", "grad_x", "grad_w"]
    np.testing.assert_array_equal(got["x"], X)
    for k, v in _expected().items():
        np.testing.assert_array_equal(got[k], v)  # exactly the same doubles
    # the columnar file back in (its x and w are doubles), out as CSV: the same doubles again
    back = tmp_path / "back.csv"
    result = _invoke("eval", "(x+w)*(w+1)", "--points", str(first), "--chunk-rows", "3", "-o", str(back))
    assert result.exit_code == 0, result.stderr
    again = _read(back)
    for k, v in _expected().items():
        np.testing.assert_array_equal(again[k], v)


def test_csv_numbers_are_shortest_round_trip_texts(tmp_path):
    rng = np.random.default_rng(18)
    x = rng.standard_normal(500) * 10.0 ** rng.integers(-30, 30, 500)
    w = rng.standard_normal(500)
    source = tmp_path / "in.csv"
    _csv(source, x, w)
    result = _invoke("eval", "(x+w)*(w+1)", "--points", str(source), "--chunk-rows", "64")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "x,w,value,grad_x,grad_w" and len(lines) == 501
    rows = [line.split(",") for line in lines[1:]]
    for k, (name, want) in enumerate(_expected(x, w).items(), start=2):
        got = [float(r[k]) for r in rows]
        np.testing.assert_array_equal(got, want, err_msg=name)
        assert [_digits(r[k]) for r in rows] == [_digits(repr(float(v))) for v in want]  # shortest, not %.17g
    assert [r[0] for r in rows] == [repr(float(v)) for v in x]  # each point as the file wrote it


def test_per_point_semantics_with_parameters_and_reductions_from_parquet(tmp_path):
    data = tmp_path / "p.parquet"
    pq.write_table(pa.table({"x": X[:4], "w": W[:4]}), data)
    out = tmp_path / "o.parquet"
    args = ["eval", "sum(x*v) + max(w*v)", "--points", str(data), "--at", "v=[1,2,3]", "-o", str(out)]
    result = _invoke(*args, "--chunk-rows", "3")
    assert result.exit_code == 0, result.stderr
    got = _read(out)
    v = np.array([1.0, 2.0, 3.0])
    for i in range(4):
        value = np.sum(X[i] * v) + np.max(W[i] * v)
        assert got["value"][i] == value
        assert got["grad_x"][i] == v.sum()
        one = json.loads(
            _invoke(
                "eval",
                "sum(x*v) + max(w*v)",
                "--at",
                f"x={float(X[i])!r},w={float(W[i])!r}",
                "--at",
                "v=[1,2,3]",
                "--json",
            ).stdout
        )
        assert [got[f"grad_v[{j}]"][i] for j in range(3)] == one["gradient"]["v"]  # each point its own gradient
        assert got["grad_w"][i] == one["gradient"]["w"]


def test_a_bad_row_in_the_second_chunk_names_the_row_and_writes_no_file(tmp_path):
    source = tmp_path / "bad.csv"
    source.write_text("x,w\n1,2\n3,4\n5,6\n7,oops\n9,10\n")
    result = _invoke("eval", "x*w", "--points", str(source), "--chunk-rows", "2")
    assert result.exit_code == 2
    assert result.stdout == "x,w,value,grad_x,grad_w\n1,2,2.0,2.0,1.0\n3,4,12.0,4.0,3.0\n"
    assert result.stderr == f"error: --points {source}: row 5, column 'w': 'oops' is not a number\n"
    for ext in ("parquet", "arrow", "csv"):  # a file is written whole or not at all (issue 27): none here
        out = tmp_path / f"so_far.{ext}"
        result = _invoke("eval", "x*w", "--points", str(source), "--chunk-rows", "2", "-o", str(out))
        assert result.exit_code == 2 and "row 5, column 'w'" in result.stderr
        assert not out.exists()


def test_non_finite_cells_and_wrong_widths_in_a_later_chunk(tmp_path):
    source = tmp_path / "bad.csv"
    source.write_text("x,w\n1,2\n\n3,4\n5,inf\n")
    result = _invoke("eval", "x*w", "--points", str(source), "--chunk-rows", "2")
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: --points {source}: row 5, column 'w': 'inf' is not a finite float64 number "
        "(nan, an infinity, or too large)\n"
    )
    source.write_text("x,w\n1,2\n3,4\n5,6,7\n")
    result = _invoke("eval", "x*w", "--points", str(source), "--chunk-rows", "2")
    assert result.exit_code == 2 and result.stderr.endswith("row 4 has 3 values, the header names 2\n")


def test_empty_and_header_only_files(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    result = _invoke("eval", "x*w", "--points", str(empty))
    assert result.exit_code == 2
    assert result.stderr == f"error: --points {empty}: the file is empty; expected a header naming the variables\n"
    header = tmp_path / "header.csv"
    header.write_text("x,w\n")
    result = _invoke("eval", "x*w", "--points", str(header))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"error: --points {header}: no points after the header\n"
    table = tmp_path / "none.parquet"
    pq.write_table(pa.table({"x": pa.array([], pa.float64())}), table)
    result = _invoke("eval", "x^2", "--points", str(table))
    assert result.exit_code == 2 and "no points" in result.stderr


def test_a_folder_and_a_glob_are_one_data_set_in_natural_order(tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    for k in (1, 2, 10):  # part.10 comes after part.2
        pq.write_table(pa.table({"x": [float(k), float(k) + 0.5]}), parts / f"part.{k}.parquet")
    (parts / "README").write_text("not data")
    want = "x,value,grad_x\n1.0,1.0,2.0\n1.5,2.25,3.0\n2.0,4.0,4.0\n2.5,6.25,5.0\n10.0,100.0,20.0\n10.5,110.25,21.0\n"
    for spec in (str(parts), str(parts / "part.*.parquet")):
        result = _invoke("eval", "x^2", "--points", spec)
        assert result.exit_code == 0, result.stderr
        assert result.stdout == want
    result = _invoke("eval", "x^2", "--points", str(tmp_path / "nothing*.csv"))
    assert result.exit_code == 2 and result.stderr.endswith("nothing*.csv: no file matches\n")
    (parts / "odd.csv").write_text("x\n1\n")
    result = _invoke("eval", "x^2", "--points", str(parts))
    assert result.exit_code == 2 and "mixes formats (csv, parquet)" in result.stderr


def test_points_from_standard_input(tmp_path):
    result = _invoke("eval", "x*w", "--points", "-", "--chunk-rows", "1", input=b"x,w\n1,2\n3,4\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "x,w,value,grad_x,grad_w\n1,2,2.0,2.0,1.0\n3,4,12.0,4.0,3.0\n"


def test_keep_columns_passes_unused_columns_through(tmp_path):
    source = tmp_path / "ids.csv"
    source.write_text("id,x,label,w\n7,1,a b,2\n8,3,c,4\n")
    result = _invoke("eval", "x*w", "--points", str(source))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "x,w,value,grad_x,grad_w\n1,2,2.0,2.0,1.0\n3,4,12.0,4.0,3.0\n"
    result = _invoke("eval", "x*w", "--points", str(source), "--keep-columns")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "id,x,label,w,value,grad_x,grad_w\n7,1,a b,2,2.0,2.0,1.0\n8,3,c,4,12.0,4.0,3.0\n"
    out = tmp_path / "ids.parquet"
    assert _invoke("eval", "x*w", "--points", str(source), "--keep-columns", "-o", str(out)).exit_code == 0
    table = pq.read_table(out)
    assert table.column_names == ["id", "x", "label", "w", "value", "grad_x", "grad_w"]
    assert table.column("label").to_pylist() == ["a b", "c"] and table.column("x").to_pylist() == [1.0, 3.0]


def test_json_lines_to_a_file_and_bad_output_names(tmp_path):
    source = tmp_path / "in.csv"
    _csv(source)
    out = tmp_path / "o.jsonl"
    result = _invoke("eval", "(x+w)*(w+1)", "--points", str(source), "--json", "-o", str(out), "--chunk-rows", "2")
    assert result.exit_code == 0 and result.stdout == ""
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    np.testing.assert_array_equal([d["value"] for d in docs], _expected()["value"])
    result = _invoke("eval", "x", "--points", str(source), "-o", str(tmp_path / "o.xlsx"))
    assert result.exit_code == 2
    assert (
        result.stderr
        == f"error: -o {tmp_path / 'o.xlsx'}: give a file ending in .csv, .jsonl, .parquet, .arrow or .feather\n"
    )
    result = _invoke("eval", "x", "--at", "x=1", "-o", "o.csv")
    assert (result.exit_code, result.stderr) == (2, "error: -o goes with --points DATA\n")
    result = _invoke("eval", "x", "--points", str(source), "--chunk-rows", "0")
    assert (result.exit_code, result.stderr) == (2, "error: --chunk-rows must be a positive number of rows, got 0\n")


def test_without_pyarrow_csv_still_works_and_parquet_says_how_to_install(tmp_path, monkeypatch):
    source = tmp_path / "in.csv"
    source.write_text("x,w\n1, 2\n0.1,-3e-5\n")
    with_arrow = _invoke("eval", "(x+w)*(w+1)", "--points", str(source)).stdout
    pq.write_table(pa.table({"x": [1.0]}), tmp_path / "p.parquet")
    real_import = builtins.__import__

    def no_arrow(name, *args, **kwargs):
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_arrow)
    result = _invoke("eval", "(x+w)*(w+1)", "--points", str(source))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == with_arrow
    assert result.stdout.startswith("x,w,value,grad_x,grad_w\n1, 2,9.0,3.0,6.0\n0.1,-3e-5,")
    result = _invoke("eval", "x", "--points", str(tmp_path / "p.parquet"))
    assert result.exit_code == 3
    assert result.stderr == f"error: --points with parquet needs pyarrow: {install_hint('scale')}\n"
    result = _invoke("eval", "x", "--points", str(source), "-o", str(tmp_path / "o.parquet"))
    assert result.exit_code == 3 and "needs pyarrow" in result.stderr
