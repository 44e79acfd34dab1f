"""Issue 27: the points fuzzer's failure roads. Random data sets (CSV, Parquet, Arrow; one chunk or
many), random outputs (CSV, JSON lines, Parquet, Arrow), and a random way for the run to go wrong: a
bad cell at a random row, an integer float64 cannot hold, a column that ``--at`` gives too, a full
disk after a random number of bytes, an interruption at a random write, the output onto the input,
an absurd ``--chunk-rows``. Whatever happens, the run ends with a documented exit code (0, 2, 130)
and at most one ``error:`` line; the old output file is byte for byte as it was unless the run
succeeded, and then it holds exactly what a clean run writes; no temporary file is left.
``GRADCLI_FILES_FUZZ=N`` runs N cases instead of 60."""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcli import files
from gradcli.cli.app import app

pa = pytest.importorskip("pyarrow", reason="the fuzzer writes Parquet and Arrow data sets (the scale extra)")
pq = pytest.importorskip("pyarrow.parquet", reason="the fuzzer writes Parquet data sets (the scale extra)")
feather = pytest.importorskip("pyarrow.feather", reason="the fuzzer writes Arrow data sets (the scale extra)")

runner = CliRunner()
COUNT = int(os.environ.get("GRADCLI_FILES_FUZZ", "60"))
OLD = b"old output\n"
ROADS = ["clean", "bad cell", "big integer", "at clash", "full disk", "interrupted", "onto input", "chunk rows"]
EXPRESSIONS = ["x*w", "sin(x) + w^2", "exp(-x*x) * w", "x / (1 + w*w)"]


def _data(rng: random.Random, folder, road: str) -> tuple[str, int]:
    """A data set of random rows and format; the road may spoil one row. Its path and its rows."""
    rows = rng.randint(1, 300)
    x = np.array([rng.uniform(-3, 3) for _ in range(rows)])
    w = np.array([rng.uniform(-3, 3) for _ in range(rows)])
    fmt = "csv" if road == "bad cell" else rng.choice(["csv", "parquet", "arrow"])
    if road == "big integer":
        fmt = rng.choice(["parquet", "arrow"])
    path = folder / f"data.{fmt}"
    if fmt == "csv":
        cells = [[repr(a), repr(b)] for a, b in zip(x.tolist(), w.tolist())]
        if road == "bad cell":
            cells[rng.randrange(rows)][rng.randrange(2)] = rng.choice(["oops", "nan", "", "1e999", "--1"])
        path.write_text("x,w\n" + "".join(",".join(c) + "\n" for c in cells))
        return str(path), rows
    columns = {"x": pa.array(x), "w": pa.array(w)}
    if road == "big integer":
        ints = [rng.randint(-(2**40), 2**40) for _ in range(rows)]
        ints[rng.randrange(rows)] = rng.choice([2**63 - 1, -(2**62), 2**53 + 1])
        columns["x"] = pa.array(ints, pa.int64())
    table = pa.table(columns)
    if fmt == "parquet":
        pq.write_table(table, path, row_group_size=rng.randint(1, 400))
    else:
        feather.write_feather(table, path)
    return str(path), rows


def _run(argv: list[str], monkeypatch, write=None):
    if write is not None:
        monkeypatch.setattr(files, "_write", write)
    try:
        return runner.invoke(app, argv)
    finally:
        monkeypatch.setattr(files, "_write", os.write)


def _failing_write(rng: random.Random, road: str, calls: list):
    room = rng.randint(0, 5000)
    count = {"bytes": 0}

    def write(fd, data):
        calls.append(len(data))
        if road == "interrupted" or count["bytes"] >= room:
            if road == "interrupted":
                raise KeyboardInterrupt
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = os.write(fd, bytes(data[: room - count["bytes"]]))
        count["bytes"] += n
        return n

    return write


@pytest.mark.parametrize("part", range(3))
def test_every_failure_road_keeps_the_old_file_or_writes_the_whole_new_one(part, tmp_path, monkeypatch):
    seen = set()
    for seed in range(part * COUNT // 3, (part + 1) * COUNT // 3):
        rng = random.Random(2700 + seed)
        road = ROADS[seed % len(ROADS)]
        folder = tmp_path / str(seed)
        folder.mkdir()
        data, rows = _data(rng, folder, road)
        given = Path(data).read_bytes()
        ext = rng.choice(["csv", "jsonl", "parquet", "arrow"])
        target = folder / f"out.{ext}"
        target.write_bytes(OLD)
        expression = rng.choice(EXPRESSIONS)
        chunk = str(rng.choice([1, 7, 64, 100_000]))
        argv = ["eval", expression, "--points", data, "-o", str(target), "--chunk-rows", chunk]
        reference = folder / f"reference.{ext}"
        clean = runner.invoke(app, [*argv[:5], str(reference), *argv[6:]])
        if road == "at clash":
            argv += ["--at", "w=2"]
        elif road == "onto input":
            argv[argv.index("-o") + 1] = data
        elif road == "chunk rows":
            argv[-1] = rng.choice(["0", "-5", "99999999999999999999", "1000000001"])
        calls: list[int] = []
        write = _failing_write(rng, road, calls) if road in ("full disk", "interrupted") else None
        result = _run(argv, monkeypatch, write)
        if write is not None and clean.exit_code == 0:  # the output went through gradcli.files
            assert calls, (seed, road, "the output was not written through gradcli.files")
        said = result.stderr.splitlines()
        assert result.exit_code in (0, 2, 130), (seed, road, result.exit_code, result.stderr)
        assert len([line for line in said if line.startswith("error:")]) <= 1, (seed, road, said)
        assert "internal error" not in result.stderr and "Traceback" not in result.stderr, (seed, road, said)
        if road == "clean":
            assert result.exit_code == 0, (seed, said)
        if result.exit_code == 0:
            assert clean.exit_code == 0 and road in ("clean", "full disk"), (seed, road, said)
            assert target.read_bytes() == reference.read_bytes(), (seed, road)
        else:
            assert target.read_bytes() == OLD, (seed, road, said)
            expected = {"clean": (), "full disk": (2,), "interrupted": (130,)}.get(road, (2,))
            assert result.exit_code in expected or (clean.exit_code == 2 and result.exit_code == 2), (seed, road)
        assert Path(data).read_bytes() == given, (seed, road)
        left = sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))
        assert not left, (seed, road, left)
        seen.add(road)
    assert seen == set(ROADS) or len(ROADS) * 3 > COUNT
