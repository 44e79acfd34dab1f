"""One benchmark job in a process of its own: ``python worker.py JOB``.

Prints ``{"seconds": ..., "peak_mb": ...}``: the time of the job's timed part
(after one warm-up run where the job allows it) and the process's peak resident
memory. A process of its own matters for graphs of Python objects: Python's
cycle collector rescans every live object as a graph grows, so a library's
time depends on what else is imported (with torch loaded, gradcli's scalar
graph took twice as long). Each library is measured as its users run it: alone.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import json  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

TERMS = 100_000 // 7  # sin(c*x + y) * exp(-c*y) and the running sum: 7 nodes a term
CHAIN = 10**6


def _library(name: str):
    if name == "torch":
        import torch

        torch.set_num_threads(1)
        return torch, lambda v: torch.tensor(v, dtype=torch.float64, requires_grad=True)
    import gradcli as gc

    return gc, lambda v: gc.tensor(v, requires_grad=True)


def scalar_graph(name: str) -> float:
    # variants for benchmarks/startup_modes.py --scalar (why measurements differ); defaults as run.py
    if os.environ.get("BENCH_WITH_TORCH") == "1":
        import torch  # noqa: F401  (its objects in the same process: the collector scans them too)
    if os.environ.get("BENCH_GC") == "off":
        import gc

        gc.disable()
    lib, leaf = _library(name)
    coefficients = [0.1 + 0.9 * k / (TERMS - 1) for k in range(TERMS)]
    sin, exp = lib.sin, lib.exp

    def run() -> float:
        start = time.perf_counter()
        x, y = leaf(0.3), leaf(0.7)
        total = 0.0
        for c in coefficients:
            total = total + sin(c * x + y) * exp(-c * y)
        total.backward()
        assert abs(x.grad.item()) > 0
        return time.perf_counter() - start

    if os.environ.get("BENCH_WARM", "1") == "1":
        run()  # warm-up
    return run()


def chain(name: str) -> float:
    """x = sin(x) + 0.5 x, a million times, and backward: no warm-up (memory is the point)."""
    lib, leaf = _library(name)
    sin = lib.sin
    start = time.perf_counter()
    x0 = leaf(0.3)
    x = x0
    for _ in range(CHAIN):
        x = sin(x) + 0.5 * x
    x.backward()
    return time.perf_counter() - start


def points(name: str) -> float:
    """``--points`` on the CSV file named by GRADCLI_BENCH_POINTS (columns x,w), output CSV to
    GRADCLI_BENCH_OUT: ``gradcli`` runs the whole command in this process (its peak memory is then
    this process's), ``arrow`` is the job by hand: pyarrow's read_csv, NumPy formulas, write_csv."""
    source, target = os.environ["GRADCLI_BENCH_POINTS"], os.environ["GRADCLI_BENCH_OUT"]
    start = time.perf_counter()
    if name == "arrow":
        import numpy as np
        import pyarrow as pa
        import pyarrow.csv as pcsv

        table = pcsv.read_csv(source)
        x, w = table.column("x").to_numpy(), table.column("w").to_numpy()
        value = (x + w) * (w + 1)
        dx = w + 1
        dw = (w + 1) + (x + w)
        out = pa.table({"x": x, "w": w, "value": value, "grad_x": dx, "grad_w": np.asarray(dw)})
        pcsv.write_csv(out, target)
        return time.perf_counter() - start
    from gradcli.cli import main

    sys.argv = ["gradcli", "eval", "(x+w)*(w+1)", "--points", source, "-o", target]
    try:
        main()
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    return time.perf_counter() - start


JOBS = {"scalar_graph": scalar_graph, "chain": chain, "points": points}


def peak_mb() -> float:
    """This process's own peak resident memory. Not getrusage's ru_maxrss: Linux carries that
    across exec from the parent, which has touched 2 GB before the large-array cases."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    job, library = sys.argv[1], sys.argv[2]
    seconds = JOBS[job](library)
    peak = peak_mb()
    print(json.dumps({"seconds": seconds, "peak_mb": peak}))
