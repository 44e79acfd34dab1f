"""The cross-road matrix for ``--points`` (issue 27, "the net that keeps them out").

``tests/test_roads_matrix.py`` holds every command and input form to one reference; this file adds the roads of
the points evaluator: the same rows read from CSV, Parquet and Arrow, in one chunk and in many (``--chunk-rows``),
written to standard output and to every ``-o`` format, in one process and on ``--dask local:2`` over several
Parquet parts. The rows are the corpus programs' points moved a little (``point_rows``), so every function of the
language is on these roads.

Road against road is bit for bit: the evaluator is the same code on the same rows, whatever reads or writes them or
whichever process runs it (Dask's partitions are pieces of the same columns). The first road is held against a
single ``eval --at`` per row to 1e-12 in ``tests/test_roads_matrix.py::test_points_row_by_row`` (the batched
evaluation may sum in another order there), and here once more for the chunked road.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from corpus.programs import PROGRAMS, Program
from test_roads_matrix import CORPUS, RTOL, _program_file, inline, invoke, names, scalar, scalar_variables

pa = pytest.importorskip("pyarrow", reason="the Parquet and Arrow roads need pyarrow (the scale extra)")
pq = pytest.importorskip("pyarrow.parquet", reason="the Parquet roads need pyarrow (the scale extra)")
import pyarrow.feather as feather  # noqa: E402

POINT_PROGRAMS = [p for p in PROGRAMS if scalar(p) and scalar_variables(p)]
STEPS = (0.0, 0.013, -0.021, 0.034, -0.005, 0.0101, -0.047)  # seven rows: chunks of 2 leave a part-filled last one


def point_rows(p: Program) -> list[dict[str, float]]:
    return [{k: float(p.at[k]) + s * (1 + abs(float(p.at[k]))) for k in scalar_variables(p)} for s in STEPS]


def shared_at(p: Program) -> list[str]:
    rows = point_rows(p)
    shared = {k: v for k, v in p.at.items() if k not in rows[0]}
    if not shared:
        return []
    return ["--at", ",".join(f"{k}={json.dumps(np.asarray(v).tolist())}" for k, v in shared.items())]


def columns(p: Program) -> dict[str, list[float]]:
    rows = point_rows(p)
    return {k: [r[k] for r in rows] for k in rows[0]}


# --- how the rows are given ----------------------------------------------------------------------------------------


def _write_csv(data: dict[str, list[float]], path: Path) -> None:
    header = list(data)
    lines = [",".join(header)] + [",".join(repr(data[k][i]) for k in header) for i in range(len(data[header[0]]))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_parquet(data: dict[str, list[float]], path: Path) -> None:
    pq.write_table(pa.table(data), path)


def _write_arrow(data: dict[str, list[float]], path: Path) -> None:
    feather.write_feather(pa.table(data), path)


SOURCES: dict[str, tuple[str, Callable[[dict[str, list[float]], Path], None]]] = {
    "csv": (".csv", _write_csv),
    "parquet": (".parquet", _write_parquet),
    "arrow": (".arrow", _write_arrow),
}


def points_file(p: Program, tmp: Path, source: str) -> Path:
    suffix, write = SOURCES[source]
    path = tmp / f"{p.name}-rows{suffix}"
    if not path.exists():
        write(columns(p), path)
    return path


PROGRAM_FORMS: dict[str, Callable[[Program, Path], list[str]]] = {
    "inline": lambda p, tmp: inline(p.text),
    "file": lambda p, tmp: ["-f", str(_program_file(p, tmp))],
    "python": lambda p, tmp: [f"{CORPUS}:{p.name}"],
}


# --- what a road gives: one (value, gradient by variable) per row ---------------------------------------------------


Rows = list[tuple[np.ndarray, dict[str, np.ndarray]]]  # a variable given by --at may be a vector


def _array(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _from_json_lines(text: str) -> Rows:
    docs = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [(_array(d["value"]), {k: _array(v) for k, v in d["gradient"].items()}) for d in docs]


def _from_table(table: Any, p: Program) -> Rows:
    """A file's rows: ``grad_v`` for a scalar variable, ``grad_v[0]``, ``grad_v[1]``, ... for an array (in order)."""
    data = table.to_pydict()

    def gradient(k: str, i: int) -> np.ndarray:
        if f"grad_{k}" in data:
            return _array(data[f"grad_{k}"][i])
        cells = [column for column in data if column.startswith(f"grad_{k}[")]
        assert len(cells) == np.size(p.at[k]), f"columns for grad_{k}: {cells}"
        return _array([data[column][i] for column in cells]).reshape(np.shape(p.at[k]))

    return [(_array(data["value"][i]), {k: gradient(k, i) for k in names(p)}) for i in range(table.num_rows)]


def _from_csv_file(path: Path, p: Program) -> Rows:
    import pyarrow.csv as pcsv

    return _from_table(pcsv.read_csv(path), p)


OUTPUTS: dict[str, Callable[[Path, Program], Rows]] = {
    ".csv": _from_csv_file,
    ".jsonl": lambda path, p: _from_json_lines(path.read_text(encoding="utf-8")),
    ".parquet": lambda path, p: _from_table(pq.read_table(path), p),
    ".arrow": lambda path, p: _from_table(feather.read_table(path), p),
}


def run_points(p: Program, tmp: Path, form: str, source: str, chunk_rows: int | None, out: str | None) -> Rows:
    args = ["eval", *PROGRAM_FORMS[form](p, tmp), "--points", str(points_file(p, tmp, source))]
    args += ["--wrt", ",".join(names(p)), *shared_at(p)]
    args += ["--chunk-rows", str(chunk_rows)] if chunk_rows else []
    if out is None:
        result = invoke([*args, "--json"])
        assert result.exit_code == 0, result.stderr
        return _from_json_lines(result.stdout)
    target = tmp / f"{p.name}-{form}-{source}-{chunk_rows}{out}"
    target.unlink(missing_ok=True)
    result = invoke([*args, *(["--json"] if out == ".jsonl" else []), "-o", str(target)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "", "with -o the rows go to the file only"
    return OUTPUTS[out](target, p)


@functools.cache
def _reference(name: str, tmp: Path) -> Rows:
    """The first road: the program inline, the rows from CSV in one chunk, JSON lines on standard output."""
    return run_points(BY_NAME[name], tmp, "inline", "csv", None, None)


BY_NAME = {p.name: p for p in POINT_PROGRAMS}


def assert_identical(got: Rows, want: Rows, where: str) -> None:
    assert len(got) == len(want), f"{where}: {len(got)} rows, expected {len(want)}"
    for i, ((value, grad), (value0, grad0)) in enumerate(zip(got, want)):
        same = np.array_equal(value, value0, equal_nan=True) and grad.keys() == grad0.keys()
        same = same and all(np.array_equal(grad[k], grad0[k], equal_nan=True) for k in grad0)
        assert same, f"{where}, row {i}: got {value!r} {grad!r}, expected {value0!r} {grad0!r}"


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("points-roads")


ROADS = [
    *(("inline", source, None, None) for source in ("parquet", "arrow")),
    *(("inline", source, 2, None) for source in SOURCES),  # many chunks, the last one part-filled
    ("inline", "csv", 1, None),
    *(("file", "parquet", 3, None), ("python", "arrow", 2, None), ("python", "csv", None, None)),
    *(("inline", "csv", 3, out) for out in OUTPUTS),
    *(("inline", "parquet", None, out) for out in (".csv", ".parquet", ".arrow")),
]


@pytest.mark.parametrize("road", [pytest.param(r, id="-".join(str(part) for part in r)) for r in ROADS])
@pytest.mark.parametrize("program", [pytest.param(p, id=p.name) for p in POINT_PROGRAMS])
def test_every_points_road_gives_the_same_bits(program: Program, road: tuple[Any, ...], tmp: Path) -> None:
    got = run_points(program, tmp, *road)
    assert_identical(got, _reference(program.name, tmp), f"{program.name} along {road}")


@pytest.mark.parametrize("program", [pytest.param(p, id=p.name) for p in POINT_PROGRAMS])
def test_the_chunked_road_equals_eval_at_each_row(program: Program, tmp: Path) -> None:
    """Many chunks against one ``eval --at`` per row, to 1e-12 (a batched sum may run in another order)."""
    rows = run_points(program, tmp, "inline", "csv", 2, None)
    for i, (row, (value, grad)) in enumerate(zip(point_rows(program), rows)):
        at = {**program.at, **row}
        text = ",".join(f"{k}={json.dumps(np.asarray(v).tolist())}" for k, v in at.items())
        single = invoke(["eval", *inline(program.text), "--json", "--at", text, "--wrt", ",".join(names(program))])
        assert single.exit_code == 0, single.stderr
        ((value1, grad1),) = _from_json_lines(single.stdout)
        for a, b in [(value, value1), *((grad[k], grad1[k]) for k in grad1)]:
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-300, err_msg=f"{program.name} row {i}")


# --- Dask: several parts, two workers, one process's bits ------------------------------------------------------------


DASK_SAMPLE = ["seed002", "rosenbrock", "trig", "activations", "deep_chain"]


def _parts(p: Program, folder: Path, parts: int, repeat: int) -> dict[str, list[float]]:
    """The program's rows repeated, cut into ``parts`` Parquet files in a folder; returns all the rows in order."""
    base = columns(p)
    data = {k: v * repeat for k, v in base.items()}
    n = len(next(iter(data.values())))
    folder.mkdir()
    edges = np.linspace(0, n, parts + 1).astype(int)
    for i in range(parts):
        pq.write_table(pa.table({k: v[edges[i] : edges[i + 1]] for k, v in data.items()}), folder / f"part{i}.parquet")
    return data


@pytest.mark.parametrize("program", [pytest.param(BY_NAME[n], id=n) for n in DASK_SAMPLE if n in BY_NAME])
def test_dask_over_several_parts_gives_one_process_bits(program: Program, tmp: Path) -> None:
    pytest.importorskip("dask.dataframe", reason="--dask needs dask[dataframe] (the scale extra)")
    pytest.importorskip("distributed", reason="--dask needs dask[distributed] (the scale extra)")
    folder = tmp / f"{program.name}-parts"
    data = _parts(program, folder, parts=4, repeat=300)  # 2,100 rows in 4 parts
    flat = tmp / f"{program.name}-all.parquet"
    pq.write_table(pa.table(data), flat)
    common = ["--wrt", ",".join(names(program)), *shared_at(program)]
    one = invoke(["eval", *inline(program.text), "--points", str(flat), "--json", *common])
    assert one.exit_code == 0, one.stderr
    want = _from_json_lines(one.stdout)
    out = tmp / f"{program.name}-dask-out"
    result = invoke(
        ["eval", *inline(program.text), "--points", str(folder), "--dask", "local:2", "-o", str(out), *common]
    )
    assert result.exit_code == 0, result.stderr
    parts = sorted(out.glob("*.parquet"), key=lambda f: int("".join(c for c in f.stem if c.isdigit()) or 0))
    assert len(parts) == 4, [f.name for f in out.iterdir()]
    got = [row for part in parts for row in _from_table(pq.read_table(part), program)]
    assert_identical(got, want, f"{program.name} on --dask local:2 over 4 parts")
