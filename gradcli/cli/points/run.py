"""``eval --points``, streamed: read a chunk, evaluate it batched (``gradcli.lang.compute.points``), write it,
then the next; memory is bounded by ``--chunk-rows``, not by the data set."""

from __future__ import annotations

import os
import sys
import time
from contextlib import closing
from typing import Any

import numpy as np

from ...errors import UsageError
from ...files import refuse_same
from ...lang.compute import element_labels
from ...lang.compute.points import evaluate_points
from ...lang.data import PARQUET, Chunk, Columns, DataSet, arrow, kind_of
from ...lang.values import checked_seed
from .. import output
from ..output import element_texts, nested, shown_path
from ..progress import working
from ..report import warn_later
from .sink import CSV, JSON, Sink, out_kind

CHUNK_ROWS = (
    100_000  # rows a chunk by default: ~100 MB of work at two variables (and faster than larger chunks: caches)
)


def check_chunk_rows(rows: int | None) -> int:
    """The rows a chunk: ``--chunk-rows N`` (in range: its callback, cli/options.py), else ``CHUNK_ROWS``."""
    return CHUNK_ROWS if rows is None else rows


class Results:
    """What one chunk gave, with the output's column names once the first chunk has run."""

    def __init__(
        self, program: Any, values: dict[str, Any], wrt: list[str], seed: str | None, warn: bool = True
    ) -> None:
        if seed is not None:  # a bad --seed is said before the data is opened (no reader's threads to outlive)
            checked_seed(seed)
        self.program, self.values, self.wrt, self.seed = program, values, wrt or None, seed
        self.warn = warn  # print the first warning (not on a Dask worker: distributed.py says it)
        self.names: list[str] = []
        self.labels: list[str] = []
        self.warning: str | None = None

    def evaluate(self, chunk: Chunk) -> tuple[list[np.ndarray], Any]:
        names, result = evaluate_points(self.program, chunk.numbers, self.values, self.wrt, self.seed, chunk.first)
        if not self.labels:
            self.names = names
            self.labels = element_labels("value", result.value.shape[1:])
            for name in names:
                self.labels += element_labels(f"grad_{name}", result.gradient[name].shape[1:])
        if result.warning and self.warning is None:
            self.warning = result.warning
            if self.warn:
                warn_later(result.warning)  # said when the run ends well: an error (a bad row later) is said alone
        arrays = [result.value, *(result.gradient[name] for name in names)]
        flat = [a.reshape(chunk.n, -1) for a in arrays]
        return [f[:, j] for f in flat for j in range(f.shape[1])], result


def json_lines(names: list[str], result: Any, n: int) -> list[str]:
    """eval's JSON document for each point (``value`` and ``gradient``), one a line."""
    arrays = [result.value, *(result.gradient[name] for name in names)]
    texts = [element_texts(a) for a in arrays]
    value_json, *grads_json = [nested(t, a.shape[1:], n) for t, a in zip(texts, arrays)]
    keys = [f'"{name}": ' for name in names]
    return [
        '{"value": ' + v + ', "gradient": {' + ", ".join(k + g[i] for k, g in zip(keys, grads_json)) + "}}"
        for i, v in enumerate(value_json)
    ]


class Pace:
    """Rows done, rows per second and the time left, for the progress line."""

    def __init__(self, data: DataSet) -> None:
        self.start = time.monotonic()
        self.rows = 0
        self.total = _estimated_rows(list(data.files))

    def text(self, rows: int, what: str) -> str:
        self.rows = rows
        spent = max(time.monotonic() - self.start, 1e-9)
        rate = rows / spent
        text = f"{what}: {rows:,} rows, {rate:,.0f} rows/s"
        total = self.total(rows) if self.total else None
        if total and rate > 0 and total > rows:
            text += f", about {_duration((total - rows) / rate)} left"
        return text


def _estimated_rows(files: list[str]) -> Any:
    """A function of the rows done giving the data set's rows: Parquet's metadata, else by bytes."""
    if files == ["-"]:
        return None
    sizes = [os.path.getsize(f) for f in files]
    total = sum(sizes)
    if not total:
        return None
    state = {"bytes_per_row": None}

    def estimate(rows: int) -> int | None:
        if state["bytes_per_row"] is None and rows:
            state["bytes_per_row"] = _bytes_per_row(files[0], sizes[0])
        per_row = state["bytes_per_row"]
        return int(total / per_row) if per_row else None

    return estimate


def _bytes_per_row(path: str, size: int) -> float | None:
    if kind_of(path) == PARQUET:
        try:
            import pyarrow.parquet as pq

            rows = pq.ParquetFile(path).metadata.num_rows
        except Exception:  # noqa: BLE001 - only an estimate
            return None
    else:
        with open(path, "rb") as stream:
            rows = stream.read(1 << 20).count(b"\n") or 1
        size = min(size, 1 << 20)
    return size / rows if rows else None


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    return f"{minutes} min {seconds:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def evaluate_points_file(
    program: Any,
    spec: str,
    values: dict[str, Any],
    wrt: list[str],
    as_json: bool,
    seed: str | None,
    out: str | None = None,
    chunk_rows: int | None = None,
    keep_columns: bool = False,
) -> None:
    """Every row of the data set ``spec`` its own point, streamed to stdout or ``out``."""
    rows = check_chunk_rows(chunk_rows)
    kind = out_kind(out, as_json)
    if kind not in (CSV, JSON):
        arrow(f"-o {out}")  # said before any work
    data = DataSet.resolved(spec)  # the files, once: every step below reads these
    refuse_same(out, [program.source, *data.files])
    sink = Sink(out, kind)
    results = Results(program, values, wrt, seed)
    columns: list[Columns] = []
    on_terminal = out is None and _stdout_is_terminal()
    pace = Pace(data)
    what = f"evaluating the points of {shown_path(spec)}"
    with working(what, quiet=as_json or on_terminal) as work:
        try:
            with closing(data.chunks(set(program.variables), keep_columns, rows, columns, values)) as chunks:
                for chunk in chunks:  # (closed on an error too: Arrow's reader threads end before the command)
                    arrays, result = results.evaluate(chunk)
                    if sink.stream is None:
                        _no_clash(columns[0].kept, results.labels, spec)
                        sink.start(columns[0].kept, results.labels)
                    lines = json_lines(results.names, result, chunk.n) if kind == JSON else None
                    sink.write(chunk, arrays, lines)
                    work.say(pace.text(sink.rows, "evaluating points"))
            if not sink.rows:
                shown = spec if len(data.files) == 1 else f"{spec} (every file)"
                raise UsageError(f"--points {shown}: no points after the header")
        except BaseException:
            sink.discard()  # -o FILE: the old file stays as it was, and no temporary file is left
            raise
        sink.close()
    if out is not None:
        output.wrote(out, f"{sink.rows:,} rows")


def _no_clash(inputs: list[str], outputs: list[str], spec: str) -> None:
    clash = [name for name in outputs if name in inputs]
    if clash:
        raise UsageError(
            f"--points {spec}: the column {clash[0]!r} would be written twice (an input column has the name "
            "of a result): rename it"
        )


def _stdout_is_terminal() -> bool:
    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError, OSError):
        return False


__all__ = ["CHUNK_ROWS", "CSV", "evaluate_points_file"]
