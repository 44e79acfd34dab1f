"""Writing ``--points`` results chunk by chunk: CSV and JSON lines (stdout or ``-o FILE``), Parquet
and Arrow IPC/Feather (``-o FILE``). Every chunk is written before the next is read, to a temporary
file beside ``FILE`` (``gradcli.files``): ``close`` finishes it (Parquet's footer, IPC's end) and
renames it into place; ``discard`` (a bad row, a full disk, SIGINT or SIGTERM) removes it, and the
old ``FILE`` stays as it was.

CSV numbers are formatted by Arrow (shortest round-trip text, vectorised), with ``.0`` added to
integral values as Python's ``repr`` writes them; without pyarrow, by ``repr`` itself.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, BinaryIO

import numpy as np

from ...errors import UsageError
from ...files import AtomicFile
from ...lang.data import CSV, IPC, PARQUET, Chunk, arrow, float_numpy, has_arrow
from ..report import ReaderLeft, StreamProblem

JSON = "json"
OUT_EXTENSIONS = {".csv": CSV, ".txt": CSV, ".jsonl": JSON, ".json": JSON, ".parquet": PARQUET, ".pq": PARQUET,
                  ".arrow": IPC, ".feather": IPC, ".ipc": IPC}  # fmt: skip


def out_kind(path: str | None, as_json: bool) -> str:
    if path is None:
        return JSON if as_json else CSV
    ext = os.path.splitext(path)[1].lower()
    if ext not in OUT_EXTENSIONS:
        raise UsageError(f"-o {path}: give a file ending in .csv, .jsonl, .parquet, .arrow or .feather")
    kind = OUT_EXTENSIONS[ext]
    if as_json and kind != JSON:
        raise UsageError(f"-o {path}: --json writes JSON lines; name the file .jsonl")
    return kind


def formatted(values: Any) -> Any:
    """Shortest round-trip texts of float64 values (an Arrow string array): ``2.0``, ``0.1``, ``1e+16``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    array = np.ascontiguousarray(values, dtype=np.float64)
    texts = pc.cast(pa.array(array), pa.string())
    integral = np.isfinite(array) & (array == np.trunc(array))
    if integral.any():
        plain = pc.and_(pa.array(integral), pc.invert(pc.match_substring(texts, "e")))
        texts = pc.if_else(plain, pc.binary_join_element_wise(texts, ".0", ""), texts)
    return texts


def _header_cell(name: str) -> str:
    """A column name as CSV writes it: quoted when it holds a comma or a quote (``"grad_A[0,1]"``)."""
    if any(c in name for c in ',"\r\n'):
        return '"' + name.replace('"', '""') + '"'
    return name


def _repr_texts(values: Any) -> list[str]:
    return list(map(repr, np.asarray(values, dtype=np.float64).tolist()))


class Sink:
    """Where the rows go: ``start`` with the column names, ``write`` each chunk, ``close`` once."""

    def __init__(self, path: str | None, kind: str) -> None:
        self.path, self.kind = path, kind
        self.stream: BinaryIO | None = None
        self.file: Any = None  # the AtomicFile of -o FILE
        self.writer: Any = None
        self.rows = 0

    def _open(self) -> Any:
        if self.path is None:
            sys.stdout.flush()
            raw = getattr(sys.stdout, "buffer", None)
            if raw is None:
                raise StreamProblem("cannot write the result: standard output is closed")
            return raw
        self.file = AtomicFile(self.path)  # a temporary file beside the target, renamed by close()
        return self.file

    def start(self, inputs: list[str], outputs: list[str]) -> None:
        self.inputs, self.outputs = inputs, outputs
        if self.kind in (PARQUET, IPC):
            arrow(f"-o {self.path}")
        self.stream = self._open()
        if self.kind == CSV:
            self._put((",".join(map(_header_cell, [*inputs, *outputs])) + "\n").encode())

    def _put(self, data: bytes) -> None:
        """Bytes to the output; stdout's failures said as every command says them (a reader that left: none)."""
        assert self.stream is not None
        if self.path is not None:
            self.stream.write(data)
            return
        try:
            self.stream.write(data)
            self.stream.flush()
        except BrokenPipeError:
            raise ReaderLeft() from None
        except (OSError, ValueError) as exc:
            raise StreamProblem.writing(exc) from None

    def write(self, chunk: Chunk, results: list[np.ndarray], json_lines: list[str] | None = None) -> None:
        """``results``: one float64 column per output name (the value's elements, then each gradient's)."""
        assert self.stream is not None
        if self.kind == JSON:
            assert json_lines is not None
            self._put(("\n".join(json_lines) + "\n").encode())
        elif self.kind == CSV:
            self._put(self._csv(chunk, results))
        else:
            self._columnar(chunk, results)
        self.rows += chunk.n

    def _csv(self, chunk: Chunk, results: list[np.ndarray]) -> bytes:
        if not has_arrow():
            columns = [
                list(map(str, chunk.cells[h])) if chunk.text else _repr_texts(chunk.cells[h]) for h in self.inputs
            ]
            columns += [_repr_texts(r) for r in results]
            return ("\n".join(",".join(row) for row in zip(*columns)) + "\n").encode()
        import pyarrow as pa
        import pyarrow.csv as pcsv

        columns = [self._text_cells(chunk.cells[h]) for h in self.inputs] + [formatted(r) for r in results]
        names = [f"c{i}" for i in range(len(columns))]  # the header is written once, by start()
        table = pa.Table.from_arrays(columns, names=names)
        out = pa.BufferOutputStream()
        options = pcsv.WriteOptions(include_header=False, quoting_style="none", batch_size=1 << 16)
        pcsv.write_csv(table, out, write_options=options)
        return out.getvalue().to_pybytes()

    @staticmethod
    def _text_cells(cells: Any) -> Any:
        import pyarrow as pa

        if isinstance(cells, list):
            return pa.array(cells, pa.string())
        if pa.types.is_floating(cells.type):
            return formatted(float_numpy(cells.cast(pa.float64())))
        if pa.types.is_string(cells.type) or pa.types.is_large_string(cells.type):
            return cells
        return cells.cast(pa.string())

    def _columnar(self, chunk: Chunk, results: list[np.ndarray]) -> None:
        import pyarrow as pa

        columns = []
        for h in self.inputs:
            if h in chunk.numbers and chunk.text:  # a variable read from CSV: its number
                columns.append(pa.array(chunk.numbers[h]))
            else:
                cells = chunk.cells[h]
                columns.append(pa.array(cells, pa.string()) if isinstance(cells, list) else cells)
        columns += [pa.array(np.ascontiguousarray(r, dtype=np.float64)) for r in results]
        table = pa.Table.from_arrays(columns, names=[*self.inputs, *self.outputs])
        if self.writer is None:
            self.writer = self._columnar_writer(table.schema)
        elif table.schema != self.writer_schema:
            table = table.cast(self.writer_schema)
        self.writer.write_table(table)

    def _columnar_writer(self, schema: Any) -> Any:
        import pyarrow as pa

        self.writer_schema = schema
        if self.kind == PARQUET:
            import pyarrow.parquet as pq

            return pq.ParquetWriter(self.stream, schema)
        return pa.ipc.new_file(self.stream, schema)

    def close(self) -> None:
        """Finish the output: the file (Parquet's footer, IPC's end) renamed into place; stdout flushed."""
        try:
            if self.writer is None and self.kind in (PARQUET, IPC) and self.stream is not None:
                import pyarrow as pa

                schema = pa.schema([(name, pa.float64()) for name in [*self.inputs, *self.outputs]])
                self.writer = self._columnar_writer(schema)  # no rows: still a valid, empty file
            if self.writer is not None:
                self.writer.close()
                self.writer = None
            if self.file is not None:
                self.file.commit()
            self.file = self.stream = None
        except BaseException:  # a full disk, or a signal even here: no file, and no temporary file
            self.discard()
            raise

    def discard(self) -> None:
        """After an error or an interruption: no file (the old one, if any, stays as it was)."""
        writer, file, self.writer, self.file, self.stream = self.writer, self.file, None, None, None
        if file is not None:
            file.discard()  # first: what the writer still writes goes nowhere
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()
