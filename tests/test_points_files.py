"""Reading ``--points`` files (issue 13): bad cells name their row and column, non-finite cells are
refused as ``--at`` refuses them, a bare CR is a clear error, and the read is bounded."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from gradcli.cli.app import app
from gradcli.lang import data as source

runner = CliRunner()


def _run(tmp_path, body: str | bytes, *args: str):
    path = tmp_path / "points.csv"
    path.write_bytes(body if isinstance(body, bytes) else body.encode("utf-8"))
    return path, runner.invoke(app, ["eval", "x*y", "--points", str(path), *args])


@pytest.mark.parametrize("cell", ["١", "1_0", '"1"', "0x10", "1d3", "", "1 2", "\x1b[31m"])
def test_cells_that_are_not_numbers_name_the_row_and_column(tmp_path, cell):
    path, result = _run(tmp_path, f"x,y\n1,2\n3,{cell}\n")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == f"error: --points {path}: row 3, column 'y': {cell.strip()!r} is not a number\n"


@pytest.mark.parametrize("cell", ["1e309", "-1e999", "nan", "NaN", "inf", "-inf", "Infinity"])
def test_non_finite_cells_are_refused_as_at_refuses_them(tmp_path, cell):
    path, result = _run(tmp_path, f"x,y\n1,2\n\n{cell},4\n")  # the blank line counts as a row of the file
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (
        f"error: --points {path}: row 4, column 'x': {cell!r} is not a finite float64 number "
        "(nan, an infinity, or too large)\n"
    )
    at = runner.invoke(app, ["eval", "x*y", "--at", f"x={cell},y=4"])
    assert at.exit_code == 2  # --at refuses the same values


def test_a_bare_carriage_return_is_a_clear_error(tmp_path):
    message = "holds a carriage return (CR) that does not end a line: lines must end with LF or CR LF"
    path, result = _run(tmp_path, "x,y\n1,2\n3\r,4\n")
    assert result.exit_code == 2 and result.stderr == f"error: --points {path}: row 3 {message}\n"
    path, result = _run(tmp_path, "x,y\r1,2\r3,4\r")  # old Mac line ends
    assert result.exit_code == 2 and result.stderr == f"error: --points {path}: row 1 {message}\n"


def test_crlf_line_ends_are_read(tmp_path):
    _, result = _run(tmp_path, "\ufeffx,y\r\n1,2\r\n\r\n3,4\r\n")
    assert result.exit_code == 0
    assert result.stdout == "x,y,value,grad_x,grad_y\n1,2,2.0,2.0,1.0\n3,4,12.0,4.0,3.0\n"


def test_dev_zero_is_refused_at_its_first_row(monkeypatch):
    # issue 18: files are streamed (no size limit), but a row has one: /dev/zero never ends its first line
    monkeypatch.setattr(source, "MAX_ROW_BYTES", 1000)
    result = runner.invoke(app, ["eval", "x", "--points", "/dev/zero"])
    assert result.exit_code == 2
    assert result.stderr == "error: --points /dev/zero: row 1 is longer than 1,000 bytes: is it a CSV file?\n"


def test_a_large_regular_file_is_streamed_not_refused(tmp_path):
    path = tmp_path / "big.csv"
    path.write_text("x\n" + "1\n" * 100)
    result = runner.invoke(app, ["eval", "x", "--points", str(path), "--chunk-rows", "7"])
    assert result.exit_code == 0
    assert result.stdout == "x,value,grad_x\n" + "1,1.0,1.0\n" * 100
