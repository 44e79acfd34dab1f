"""``eval --points DATA --dask ADDRESS -o DIR``: the same job on a Dask cluster.

``dask.dataframe`` reads the CSV or Parquet parts (each partition a piece of the data set, in order),
every partition is evaluated by gradcli's batched evaluator (``gradcli.lang.compute.points``) on the workers,
and the results are written as a folder of Parquet parts (``part.0.parquet``, ...), one per partition,
into a temporary folder beside ``-o DIR`` that takes its place when every part is written.
``--dask local:N`` starts a ``LocalCluster`` of N workers on this machine, shut down afterwards.

A worker evaluates several partitions at once, one a thread (``local:N``'s workers are threads of
this process; ``dask worker --nthreads 2`` has two): each partition gets one process's numbers
because gradcli's modes are per thread (``autograd/grad_mode.py``). A partition's warning (a
value or a gradient that is not finite) is not printed where it ran: it is sent to the scheduler
as an event, and this process prints the data set's first one, numbered as one process numbers it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import uuid
from typing import Any

import numpy as np

from ...errors import MissingProgram, UsageError, install_hint
from ...files import atomic_folder, refuse_same
from ...lang.data import BEYOND, CSV, IPC, PARQUET, Chunk, Columns, DataSet, inexact_integer, kind_of
from .. import output
from ..options import checked_number
from .run import Results
from .sink import OUT_EXTENSIONS


def _imports() -> tuple[Any, Any]:
    try:
        import dask.dataframe as dd
        import distributed
        import pyarrow  # noqa: F401
    except ImportError:
        raise MissingProgram(f"--dask needs dask and pyarrow: {install_hint('scale')}") from None
    return dd, distributed


def evaluate_on_dask(
    program: Any,
    spec: str,
    values: dict[str, Any],
    wrt: list[str],
    seed: str | None,
    address: str,
    out: str | None = None,
    chunk_rows: int | None = None,
    keep_columns: bool = False,
) -> None:
    """Every row of ``spec`` a point, evaluated on the cluster at ``address``, written to ``out``/."""
    if out is None:
        raise UsageError("--dask writes a folder of Parquet parts: give it with -o DIR")
    data = DataSet.resolved(spec)  # the files, once: the probe and the cluster read these
    files = list(data.files)
    if files == ["-"] or data.kind == IPC:
        raise UsageError("--dask reads CSV or Parquet files (a folder or a glob of parts), not stdin or Arrow IPC")
    _check_folder(out, [program.source, *files])
    workers = _local_workers(address)
    dd, distributed = _imports()
    columns, labels = _probe(program, data, values, wrt, seed, keep_columns)
    frame = _read(dd, files, columns)  # partitions of up to 64 MB of CSV, or one a Parquet row group
    meta = _empty(frame.dtypes, columns.kept, labels)
    job = (program, columns, values, wrt, seed, labels, f"gradcli-warning-{uuid.uuid4().hex}")
    result = frame.map_partitions(_partition, job, meta=meta)
    with atomic_folder(out) as folder, _client(distributed, address, workers) as client:  # the cluster ends first
        try:
            result.to_parquet(folder, write_index=False, overwrite=False)
        except UsageError:
            raise
        except (ValueError, TypeError) as exc:  # a cell pandas could not read as a number
            raise UsageError(f"--points {spec}: {str(exc).splitlines()[0]}") from None
        _first_warning(client, frame, job)
    parts = sum(1 for name in os.listdir(out) if name.endswith(".parquet"))
    output.wrote(out, f"{parts:,} Parquet part{'s' if parts != 1 else ''}")


_PARTS = re.compile(r"part\.\d+\.parquet|_metadata|_common_metadata")  # what a --dask result folder holds


def _check_folder(out: str, inputs: list[str | None]) -> None:
    """``-o`` names a folder that may be replaced whole: no file name (res.csv), no input, nothing
    but the parts of an earlier result in it."""
    ext = os.path.splitext(out.rstrip("/" + os.sep))[1].lower()
    if ext in OUT_EXTENSIONS and OUT_EXTENSIONS[ext] != PARQUET:
        raise UsageError(
            f"-o {out}: --dask writes a folder of Parquet parts, not a {ext} file; name a folder (out/ or out.parquet)"
        )
    refuse_same(out, inputs)
    if os.path.isdir(out):
        others = sorted(name for name in os.listdir(out) if not _PARTS.fullmatch(name))
        if others:
            raise UsageError(
                f"-o {out}: the folder holds other files than an earlier result's parts ({others[0]}, ...); "
                "give a new folder (it is replaced whole)"
            )
    elif os.path.exists(out):
        raise UsageError(f"-o {out}: a file of that name is in the way; --dask writes a folder of Parquet parts")


def _local_workers(address: str) -> int | None:
    if not address.startswith("local:"):
        return None
    count = address.removeprefix("local:")
    if not count.isdigit() or not count.isascii():
        raise UsageError(f"--dask {address}: give local:N with N workers (local:2), or a scheduler's address")
    return int(checked_number("--dask local:N", int(count)))  # type: ignore[arg-type]


class _client:
    """A Dask client for the scheduler at ``address``, or a LocalCluster of ``workers`` (closed after)."""

    def __init__(self, distributed: Any, address: str, workers: int | None) -> None:
        self.distributed, self.address, self.workers = distributed, address, workers
        self.cluster: Any = None
        self.client: Any = None
        self.quiet = contextlib.ExitStack()

    def __enter__(self) -> Any:
        d = self.distributed
        self.quiet.enter_context(_quiet_logs())  # until the cluster is closed: its last words are not ours
        if self.workers is not None:
            self.cluster = d.LocalCluster(
                n_workers=self.workers, threads_per_worker=1, processes=False, dashboard_address=None,
                silence_logs=logging.CRITICAL,  # a failed task is said once, as gradcli's error line
                # no dashboard, and the scheduler's own HTTP routes on a free port: with its default
                # (8787) a second run at the same time printed Dask's "Port 8787 is already in use"
                scheduler_kwargs={"dashboard_address": ":0"},
            )  # fmt: skip
            self.client = d.Client(self.cluster)
        else:
            try:
                self.client = d.Client(self.address, timeout=10)
            except (OSError, TimeoutError, ValueError) as exc:
                self.quiet.close()
                raise UsageError(f"--dask {self.address}: cannot reach the scheduler ({exc})") from None
        return self.client

    def __exit__(self, *exc: Any) -> None:
        with self.quiet:
            if self.client is not None:
                self.client.close()
            if self.cluster is not None:
                self.cluster.close()


@contextlib.contextmanager
def _quiet_logs() -> Any:
    """Dask's and asyncio's log lines silenced while the client lives: a comm closed while the
    cluster shuts down (``CommClosedError``) or a gather cut by Ctrl-C (``AllExit``, "Task exception
    was never retrieved") would print a traceback on stderr; gradcli says what went wrong itself."""
    loggers = [logging.getLogger(name) for name in ("distributed", "asyncio", "tornado")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _probe(
    program: Any, data: DataSet, values: dict[str, Any], wrt: list[str], seed: str | None, keep: bool
) -> tuple[Columns, list[str]]:
    """The header and the output's column names, from the data set's first row, here: an error in
    the program is said before any worker runs."""
    columns: list[Columns] = []
    results = Results(program, values, wrt, seed, warn=False)  # (the first row's warning is said with the rest)
    with contextlib.closing(data.chunks(set(program.variables), keep, 1, columns, values)) as chunks:
        for chunk in chunks:  # (closed on an error too: Arrow's reader threads end before the command)
            results.evaluate(chunk)
            return columns[0], results.labels
    raise UsageError(f"--points {data.spec}: no points after the header")


def _read(dd: Any, files: list[str], columns: Columns) -> Any:
    if kind_of(files[0]) == CSV:
        types = {h: (np.float64 if h in columns.variables else str) for h in columns.header}
        return dd.read_csv(files, usecols=columns.kept, dtype=types, float_precision="round_trip", blocksize="64MB")
    return dd.read_parquet(files, columns=columns.kept)


def _empty(dtypes: Any, kept: list[str], labels: list[str]) -> Any:
    """The result's columns with no rows (the partitions' ``meta``)."""
    import pandas as pd

    empty = {h: pd.Series([], dtype=dtypes[h]) for h in kept}
    empty.update({k: pd.Series([], dtype=np.float64) for k in labels})
    return pd.DataFrame(empty)


def _partition(frame: Any, job: tuple, partition_info: dict[str, Any] | None = None) -> Any:
    """One partition's points (on a worker): the kept columns, the value and the gradients."""
    import pandas as pd

    program, columns, values, wrt, seed, labels, topic = job
    if len(frame) == 0:
        return _empty(frame.dtypes, columns.kept, labels)
    for v in columns.variables:  # as one process reads them: an integer float64 cannot hold is refused
        i = inexact_integer(frame[v].to_numpy())
        if i >= 0:
            raise UsageError(f"column {v!r}: {frame[v].iloc[i]} {BEYOND} ({frame.index[i]} in its part)")
    numbers = {v: frame[v].to_numpy(dtype=np.float64) for v in columns.variables}
    bad = [v for v, c in numbers.items() if not np.isfinite(c).all()]
    if bad:
        i = int(np.argmax(~np.isfinite(numbers[bad[0]])))
        raise UsageError(f"column {bad[0]!r}: a cell that is empty, nan or infinite ({frame.index[i]} in its part)")
    arrays, result = Results(program, values, wrt, seed, warn=False).evaluate(Chunk(numbers, {}, len(frame)))
    if result.warning is not None:  # said by the client, where its row in the data set is known
        row = {v: float(c[result.point]) for v, c in numbers.items()}
        part = partition_info["number"] if partition_info else 0
        _worker().log_event(topic, {"part": part, "point": result.point, "row": row})
    out = {h: frame[h].to_numpy() for h in columns.kept}
    out.update(zip(labels, arrays))
    return pd.DataFrame(out)


def _worker() -> Any:
    from distributed import get_worker

    return get_worker()


def _first_warning(client: Any, frame: Any, job: tuple) -> None:
    """The warning of the data set's first partition that had one, as one process says it: its
    point evaluated again here, numbered by its row in the data set (the partitions before it
    are counted only then)."""
    program, columns, values, wrt, seed, _, topic = job
    found = [event for _, event in client.get_events(topic)]
    if not found:
        return
    first = min(found, key=lambda event: (event["part"], event["point"]))
    part = first["part"]
    before = int(frame.partitions[list(range(part))].map_partitions(len).compute().sum()) if part else 0
    row = {v: np.array([first["row"][v]]) for v in columns.variables}
    Results(program, values, wrt, seed).evaluate(Chunk(row, {}, 1, before + first["point"]))
