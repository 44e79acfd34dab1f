"""The one reader of points files: a ``--points`` data set read in chunks (CSV, ``-`` for stdin, Parquet,
Arrow IPC/Feather, a folder or a glob of them, each chunk of at most ``chunk_rows`` rows, in order),
and ``check --cases``' whole CSV file (``read_points``), both with the same rows (``row_cells``), the
same cell pattern (``CELL``) and the same words for a bad cell (``bad_cell``).

A data set's spec is resolved to its files once (``DataSet.resolved``) and the files are read from that.

CSV is cut into chunks of whole lines here (so every row keeps its line number, the header being row 1,
and stdin works as a file does), and each chunk is parsed by pyarrow's multi-threaded reader as text
cells, converted to float64 by Arrow; a chunk that does not convert cleanly is read again cell by cell
in Python, which either reads it (spaces around a number) or names the first bad row and column.
Without pyarrow, CSV is read that Python way only (slower; the core install stays light).
"""

from __future__ import annotations

import csv
import glob
import io
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np

from ..errors import MissingProgram, UsageError, install_hint
from .values import NAME_CHARS, decode, read_bounded

CSV, PARQUET, IPC = "csv", "parquet", "ipc"
EXTENSIONS = {
    ".csv": CSV,
    ".txt": CSV,
    ".parquet": PARQUET,
    ".pq": PARQUET,
    ".arrow": IPC,
    ".feather": IPC,
    ".ipc": IPC,
}
MAX_ROW_BYTES = 16 * 2**20  # a line longer than this is not a row of numbers (/dev/zero, a binary file)
BLOCK = 4 * 2**20  # bytes read at a time

#: The largest file ``read_points`` reads whole: about 12 million rows of two 17-digit numbers, a few GB of
#: memory while it is read. (A program has its own limits: ``lexer.MAX_CHARACTERS`` and ``lexer.check_size``.)
MAX_POINTS_BYTES = 500_000_000

BARE_CR = "holds a carriage return (CR) that does not end a line: lines must end with LF or CR LF"
NOT_FINITE = "is not a finite float64 number (nan, an infinity, or too large)"

#: A number as a points cell may write it: what NumPy's reader takes, in ASCII digits only.
CELL = re.compile(r"[ \t]*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[ \t\r]*", re.ASCII)


def escaped(text: str) -> str:
    """``repr`` of a cell, control characters escaped, long cells shortened."""
    return repr(text if len(text) <= 40 else text[:37] + "...")


def bad_cell(what: str, row: int, column: str, cell: str, why: str = "is not a number") -> UsageError:
    """The error naming a cell by its row (the header is row 1) and column."""
    shown = escaped(cell.strip(" \t\r"))
    return UsageError(f"{what}: row {row}, column {column!r}: {shown} {why}")


def row_cells(line: str, row: int, width: int, what: str) -> list[str]:
    """The cells of one CSV line, or the error of a line that is no row of ``width`` cells."""
    if "\r" in line.rstrip("\r"):
        raise UsageError(f"{what}: row {row} {BARE_CR}")
    cells = line.rstrip("\r").split(",")
    if len(cells) != width:
        raise UsageError(f"{what}: row {row} has {len(cells)} values, the header names {width}")
    return cells


def arrow(what: str) -> Any:
    """pyarrow, or the error that says how to install it (exit 3)."""
    try:
        import pyarrow
    except ImportError:
        raise MissingProgram(f"{what} needs pyarrow: {install_hint('scale')}") from None
    return pyarrow


def has_arrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def float_numpy(array: Any) -> np.ndarray:
    """An Arrow float64 array as NumPy float64, nulls as nan (without pyarrow's pandas shim, which
    ``to_numpy(zero_copy_only=False)`` imports: a second and 50 MB)."""
    if array.null_count:
        array = array.fill_null(float("nan"))
    if hasattr(array, "combine_chunks"):
        array = array.combine_chunks()
    data = array.buffers()[1]
    return np.frombuffer(data, dtype=np.float64, count=len(array), offset=array.offset * 8)


def kind_of(path: str) -> str:
    return EXTENSIONS.get(os.path.splitext(path)[1].lower(), CSV)


def _natural(path: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path)]


def resolve(spec: str) -> list[str]:
    """The files of a data set: one file, ``-`` (stdin), a folder's files, or a glob's matches, in
    natural order (``part.2`` before ``part.10``), all of one format."""
    if spec == "-" or os.path.isfile(spec) or (os.path.exists(spec) and not os.path.isdir(spec)):
        return [spec]
    if os.path.isdir(spec):
        files = [os.path.join(spec, f) for f in os.listdir(spec) if os.path.splitext(f)[1].lower() in EXTENSIONS]
        files = [f for f in files if os.path.isfile(f)]
        if not files:
            raise UsageError(f"--points {spec}: the folder has no .csv, .parquet, .arrow or .feather files")
    elif any(c in spec for c in "*?["):
        files = [f for f in glob.glob(spec) if os.path.isfile(f)]
        if not files:
            raise UsageError(f"--points {spec}: no file matches")
    else:
        raise UsageError(f"--points {spec}: no such file")
    files.sort(key=_natural)
    kinds = {kind_of(f) for f in files}
    if len(kinds) > 1:
        raise UsageError(f"--points {spec}: mixes formats ({', '.join(sorted(kinds))}); give files of one format")
    return files


@dataclass
class Chunk:
    """Rows ``first .. first + n`` of the data set (0-based points): ``numbers`` the variables as
    float64, ``cells`` every column passed to the output as read (Arrow arrays, or lists of texts)."""

    numbers: dict[str, np.ndarray]
    cells: dict[str, Any]
    n: int
    first: int = 0
    text: bool = False  # cells are the CSV's own texts
    path: str = ""


@dataclass
class Columns:
    """The header of a data set: every column, those that are variables, those written out."""

    header: list[str]
    variables: list[str]
    kept: list[str] = field(default_factory=list)


def choose_columns(header: Sequence[str], what: str, used: set[str], keep: bool) -> Columns:
    """Which columns are the program's variables (those it uses) and which go to the output."""
    header = list(header)  # a column that is not a name (grad_v[0]) is no variable: dropped, or kept as it is
    if len(set(header)) != len(header):
        raise UsageError(f"{what}: a column is named twice in the header")
    variables = [h for h in header if h in used]
    if not variables:  # a program that uses none (``3``, ``2*a``): every column a point's value, as --at gives
        variables = [h for h in header if NAME_CHARS(h)]
        if not variables:
            raise UsageError(f"{what}: no column of the header is a variable name")
    return Columns(header, variables, header if keep else variables)


# --- CSV: whole lines, in chunks ------------------------------------------------------------------


class Lines:
    """A binary stream read as chunks of whole lines, with their first line's number and byte offset."""

    def __init__(self, stream: BinaryIO, what: str) -> None:
        self.stream = stream
        self.what = what
        self.rest = bytearray()
        self.line = 1  # the number of the next line
        self.offset = 0  # the byte offset of self.rest in the stream
        self.done = False

    def _more(self) -> int | None:
        """Read a block; the number of newlines in it, None at the end of the stream."""
        if self.done:
            return None
        block = self.stream.read(BLOCK)
        if not block:
            self.done = True
            return None
        self.rest += block
        return block.count(b"\n")

    def header(self) -> bytes:
        while b"\n" not in self.rest and self._more() is not None:
            self._too_long(self.rest)
        line, newline, rest = bytes(self.rest).partition(b"\n")
        self.rest = bytearray(rest)
        self._too_long(line)
        self.line, self.offset = 2, len(line) + len(newline)
        return line

    def _too_long(self, line: bytes) -> None:
        if len(line) > MAX_ROW_BYTES:
            raise UsageError(f"{self.what}: row {self.line} is longer than {MAX_ROW_BYTES:,} bytes: is it a CSV file?")

    def chunk(self, rows: int) -> tuple[bytes, int, int]:
        """Up to ``rows`` whole lines (the last may lack its newline at the end of the file)."""
        count = self.rest.count(b"\n")
        while count < rows:
            more = self._more()
            if more is None:
                break
            count += more
            tail = len(self.rest) - 1 - self.rest.rfind(b"\n")
            if tail > MAX_ROW_BYTES:
                self.line += count
                self._too_long(self.rest[-tail:])
        if count >= rows:
            ends = np.flatnonzero(np.frombuffer(self.rest, dtype=np.uint8) == 10)
            cut = int(ends[rows - 1]) + 1
        else:
            cut = len(self.rest)
        data = bytes(self.rest[:cut])
        del self.rest[:cut]
        line, offset = self.line, self.offset
        self.line += min(count, rows)
        self.offset += cut
        return data, line, offset


def _decode(data: bytes, what: str, offset: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:  # as values.decode says it, counted from the file's start
        raise UsageError(f"{what}: not UTF-8 text (byte {offset + exc.start})") from None


def csv_chunks(
    stream: BinaryIO, what: str, used: set[str], keep: bool, rows: int, columns: list[Columns]
) -> Iterator[Chunk]:
    """A CSV stream's chunks; ``columns`` receives the header's ``Columns`` before the first chunk."""
    lines = Lines(stream, what)
    first = lines.header()
    text = _decode(first, what, 0).lstrip("\ufeff")
    if "\r" in text.rstrip("\r"):
        raise UsageError(f"{what}: row 1 {BARE_CR}")
    if not text.strip():
        raise UsageError(f"{what}: the file is empty; expected a header naming the variables")
    names = next(csv.reader([text.rstrip("\r")]))  # a quoted name may hold a comma ("grad_A[0,1]")
    chosen = choose_columns([_unquoted(h.strip()) for h in names], what, used, keep)
    columns.append(chosen)
    fast = has_arrow()
    while True:
        data, line, offset = lines.chunk(rows)
        if not data:
            return
        if not data.strip():
            continue
        chunk = _arrow_chunk(data, chosen) if fast else None
        if chunk is None:
            chunk = _python_chunk(_decode(data, what, offset), line, what, chosen)
        if chunk.n:
            yield chunk


def _unquoted(name: str) -> str:
    """A header name as pyarrow's writer quotes it (``"x"``), unquoted."""
    if len(name) >= 2 and name[0] == name[-1] == '"' and '"' not in name[1:-1]:
        return name[1:-1]
    return name


def _arrow_chunk(data: bytes, chosen: Columns) -> Chunk | None:
    """The chunk parsed by Arrow, or None when anything in it needs a closer look."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    if data.count(b"\r") != data.count(b"\r\n"):
        return None
    try:
        table = pcsv.read_csv(
            pa.py_buffer(data),
            read_options=pcsv.ReadOptions(column_names=chosen.header, block_size=1 << 24),
            parse_options=pcsv.ParseOptions(quote_char=False, double_quote=False, escape_char=False),
            convert_options=pcsv.ConvertOptions(
                column_types={h: pa.string() for h in chosen.header},
                include_columns=chosen.kept,
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
        cells = {h: table.column(h).combine_chunks() for h in chosen.kept}
        numbers = {}
        for v in chosen.variables:
            column = float_numpy(pc.cast(cells[v], pa.float64()))
            if not np.isfinite(column).all():
                return None
            numbers[v] = column
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    return Chunk(numbers, cells, table.num_rows, text=True)


def _python_chunk(text: str, line: int, what: str, chosen: Columns) -> Chunk:
    """The chunk read cell by cell: numbers around spaces are read, a bad row named."""
    index = {h: i for i, h in enumerate(chosen.header)}
    wanted = [(v, index[v]) for v in chosen.variables]
    cells: dict[str, list[str]] = {h: [] for h in chosen.kept}
    numbers: dict[str, list[float]] = {v: [] for v in chosen.variables}
    width = len(chosen.header)
    for number, raw in enumerate(text.split("\n"), start=line):
        if not raw.strip():
            continue
        row = row_cells(raw, number, width, what)
        for name, i in wanted:
            numbers[name].append(_number(row[i], number, name, what))
        for h in chosen.kept:
            cells[h].append(row[index[h]])
    n = len(next(iter(numbers.values())))
    return Chunk({k: np.array(v, dtype=np.float64) for k, v in numbers.items()}, cells, n, text=True)


def _number(cell: str, row: int, column: str, what: str) -> float:
    if CELL.fullmatch(cell):
        value = float(cell)
        if np.isfinite(value):
            return value
    elif cell.strip(" \t\r").lower().lstrip("+-") not in ("nan", "inf", "infinity"):
        raise bad_cell(what, row, column, cell)
    raise bad_cell(what, row, column, cell, NOT_FINITE)


# --- Parquet and Arrow IPC: record batches --------------------------------------------------------


def columnar_chunks(
    path: str, kind: str, used: set[str], keep: bool, rows: int, columns: list[Columns]
) -> Iterator[Chunk]:
    pa = arrow(f"--points with {'parquet' if kind == PARQUET else 'arrow'}")
    what = f"--points {path}"
    try:
        schema, batches = _open_columnar(path, kind, rows)
    except (pa.ArrowInvalid, OSError) as exc:
        raise UsageError(f"{what}: cannot read it as {kind} ({str(exc).splitlines()[0]})") from None
    chosen = choose_columns(schema.names, what, used, keep)
    columns.append(chosen)
    done = 0
    for batch in batches:
        for start in range(0, batch.num_rows, rows):
            part = batch.slice(start, rows)
            numbers = {v: _numbers(part.column(v), v, what, done) for v in chosen.variables}
            yield Chunk(numbers, {h: part.column(h) for h in chosen.kept}, part.num_rows)
            done += part.num_rows


def _open_columnar(path: str, kind: str, rows: int) -> tuple[Any, Iterator[Any]]:
    import pyarrow as pa

    if kind == PARQUET:
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(path)
        return parquet.schema_arrow, parquet.iter_batches(batch_size=rows)
    source = pa.memory_map(path)
    try:
        reader = pa.ipc.open_file(source)
        return reader.schema, (reader.get_batch(i) for i in range(reader.num_record_batches))
    except pa.ArrowInvalid:
        source.seek(0)
        stream = pa.ipc.open_stream(source)
        return stream.schema, iter(stream)


EXACT = 2**53  # the integers float64 holds, every one: -2^53 .. 2^53
BEYOND = "is an integer beyond 2^53 (9007199254740992), which float64 cannot hold exactly"


def inexact_integer(values: np.ndarray) -> int:
    """The index of the first integer of ``values`` (int64 or uint64) beyond ±2^53 (-1: none)."""
    if values.dtype.kind not in "iu" or not len(values):
        return -1
    beyond = values > EXACT if values.dtype.kind == "u" else (values > EXACT) | (values < -EXACT)
    return int(np.argmax(beyond)) if beyond.any() else -1


def _numbers(column: Any, name: str, what: str, done: int) -> np.ndarray:
    import pyarrow as pa

    if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
        raise UsageError(f"{what}: column {name!r} holds {column.type}, not numbers")
    try:
        values = float_numpy(column.cast(pa.float64()))
    except pa.ArrowInvalid:  # an integer float64 cannot hold (Arrow's safe cast): name it
        i = inexact_integer(np.asarray(column.fill_null(0)))
        raise UsageError(f"{what}: data row {done + i + 1}, column {name!r}: {column[i].as_py()} {BEYOND}") from None
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.argmax(bad))
        kind = (
            "is missing (null)"
            if column.null_count and not column.is_valid()[i].as_py()
            else f"{float(values[i])!r} {NOT_FINITE}"
        )
        raise UsageError(f"{what}: data row {done + i + 1}, column {name!r}: {kind}")
    return values


def given_once(columns: Sequence[str] | Mapping[str, Any], values: Mapping[str, Any]) -> None:
    """A UsageError when an ``--at`` name is also a column of the data set (any column, used or not):
    as ``--at w=2,w=3`` is refused, neither value silently wins."""
    twice = [name for name in columns if name in values]
    if twice:
        name = twice[0]
        raise UsageError(
            f"--at {name}: {name!r} is also a column of the --points data; give it once (drop --at {name}=... "
            "or the column)"
        )


@dataclass(frozen=True)
class DataSet:
    """A ``--points`` data set, its spec resolved once: ``spec`` as given, its ``files`` (one format)."""

    spec: str
    files: tuple[str, ...]

    @classmethod
    def resolved(cls, spec: str) -> DataSet:
        return cls(spec, tuple(resolve(spec)))

    @property
    def kind(self) -> str:
        return kind_of(self.files[0])

    def chunks(
        self, used: set[str], keep: bool, rows: int, columns: list[Columns], given: Mapping[str, Any] | None = None
    ) -> Iterator[Chunk]:
        """Every chunk of the data set, numbered across its files; the files' headers must agree, and
        name no ``--at`` value of ``given``."""
        first = 0
        for path in self.files:
            kind = kind_of(path)
            got: list[Columns] = []
            if kind == CSV:
                parts = _csv_file(path, used, keep, rows, got)
            else:
                parts = columnar_chunks(path, kind, used, keep, rows, got)
            for chunk in parts:
                if len(got) == 1:
                    _agree(columns, got, self.spec, path)
                    given_once(columns[0].header, given or {})
                chunk.first, chunk.path = first, path
                first += chunk.n
                yield chunk
            if got and not columns:
                columns.append(got[0])


def _agree(columns: list[Columns], got: list[Columns], spec: str, path: str) -> None:
    mine = got.pop()
    if not columns:
        columns.append(mine)
    elif columns[0].header != mine.header:
        raise UsageError(
            f"--points {path}: its columns ({', '.join(mine.header)}) differ from the first file's "
            f"({', '.join(columns[0].header)}) in {spec}"
        )


def _csv_file(path: str, used: set[str], keep: bool, rows: int, got: list[Columns]) -> Iterator[Chunk]:
    what = f"--points {path}"
    if path == "-":
        yield from csv_chunks(sys.stdin.buffer, "--points - (standard input)", used, keep, rows, got)
        return
    try:
        stream = open(path, "rb")  # noqa: SIM115 - closed below, after the last chunk
    except FileNotFoundError:
        raise UsageError(f"{what}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{what}: cannot read it ({exc.strerror or exc})") from None
    with stream:
        yield from csv_chunks(stream, what, used, keep, rows, got)


# --- check --cases: one CSV file read whole -------------------------------------------------------


def read_points(path: str) -> dict[str, np.ndarray]:
    """A CSV file, one point a row, a header naming the variables: columns as float arrays."""
    return read_points_with_rows(path)[0]


def read_points_with_rows(path: str) -> tuple[dict[str, np.ndarray], list[str] | None]:
    """The columns, and each row's own text (to echo it unchanged) when the rows line up.

    Every column is a variable here (a case's file names no other), and the file is read at once, by
    NumPy's C reader: a million rows in about a second, with or without pyarrow. What it says of a
    defect is what check --cases always said, which differs from the chunked reader in four places:
    the header is split at every comma (no quoted names) and each column must be a variable name ("a
    variable is named twice"); the whole file is limited (``MAX_POINTS_BYTES``), not each row; its bytes
    are decoded before any row is read; and a cell that is no number is named before any nan or
    infinity, wherever it is (a ``nan`` then counts as no number)."""
    what = f"--points {path}"
    too_large = f"{what}: more than {MAX_POINTS_BYTES:,} bytes; split it into smaller files"
    text = decode(read_bounded(path, what, MAX_POINTS_BYTES, too_large), what)
    header_line, _, body = text.lstrip("\ufeff").partition("\n")
    header = _variables_header(header_line, what)
    if not body.strip():
        raise UsageError(f"{what}: no points after the header")
    try:
        data = np.loadtxt(io.StringIO(body), delimiter=",", dtype=np.float64, ndmin=2, comments=None)
    except ValueError:
        _locate_bad_row(what, header, body)
        raise
    if data.shape[1] != len(header):
        _locate_bad_row(what, header, body)
    if not np.isfinite(data).all():  # refused as --at refuses them: a point is a finite float64 value
        _locate_nonfinite(what, header, body, data)
    rows = [line.strip() for line in body.split("\n")]
    rows = [line for line in rows if line]
    columns = {name: data[:, i] for i, name in enumerate(header)}
    return columns, rows if len(rows) == len(data) else None


def _variables_header(line: str, what: str) -> list[str]:
    """The header of a file whose every column is a variable."""
    if "\r" in line.rstrip("\r"):
        raise UsageError(f"{what}: row 1 {BARE_CR}")
    header = [h.strip() for h in line.split(",")]
    if not line.strip():
        raise UsageError(f"{what}: the file is empty; expected a header naming the variables")
    for h in header:
        if not NAME_CHARS(h):
            raise UsageError(f"{what}: header column {h!r} is not a variable name")
    if len(set(header)) != len(header):
        raise UsageError(f"{what}: a variable is named twice in the header")
    return header


def _data_lines(body: str) -> Iterator[tuple[int, str]]:
    """Each non-blank line after the header with its row number (the header is row 1)."""
    for number, line in enumerate(body.split("\n"), start=2):
        if line.strip():
            yield number, line


def _locate_bad_row(what: str, header: list[str], body: str) -> None:
    """Raise an error naming the first row (and column) that cannot be read."""
    for number, line in _data_lines(body):
        for column, cell in zip(header, row_cells(line, number, len(header), what)):
            if not CELL.fullmatch(cell):
                raise bad_cell(what, number, column, cell) from None
    raise UsageError(f"{what}: cannot read the values")


def _locate_nonfinite(what: str, header: list[str], body: str, data: np.ndarray) -> None:
    """Raise an error naming the first cell that is nan, an infinity or beyond float64's range."""
    bad = ~np.isfinite(data)
    point = int(np.argmax(bad.any(axis=1)))
    column = int(np.argmax(bad[point]))
    number, line = next(item for i, item in enumerate(_data_lines(body)) if i == point)
    raise bad_cell(what, number, header[column], line.split(",")[column], NOT_FINITE)
