"""Issue 27: the engine's modes and state are per thread, as PyTorch keeps them, so threads (a thread
pool in the library, the CLI's batched evaluator, Dask's workers) give the numbers one thread gives.

The bug: grad mode was one process-wide flag, and a backward pass turns it off while it runs (it
records nothing unless ``create_graph``), so another thread's forward pass, running meanwhile,
recorded nothing: ``--dask local:2`` wrote ``grad_x = 0`` and ``grad_w = x + w`` for a whole part of
``(x+w)*(w+1)``. The tests below force the interleavings with barriers where they can (so they fail
every time without per-thread state), and repeat real jobs in pools where they cannot.

(a) each mode (grad mode, the class used as a context, anomaly mode, a recording) is its thread's;
(b) library backward jobs in pools of 2 and 4 threads equal each job alone, byte for byte; the
Tensor methods a Python function's run watches (its escapes, a check's fixed ``detach``) act per
thread; (c) the --points batched evaluator in a pool equals one thread, warnings included; (d)
``--dask local:2`` and a real ``dask scheduler`` + ``dask worker --nthreads 2`` over several
Parquet parts, repeated, equal one process bit for bit, and say its first warning as it does; what
is made on first use is made once; the random generator stays the process's, as PyTorch's.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import gradcli as gc
from gradcli.autograd.tape import recording

TIMEOUT = 30  # seconds any barrier waits: a broken interleaving fails instead of hanging


def _in_thread(fn):
    """``fn()`` run on a new thread; what it returned (or raised)."""
    outcome = {}

    def run():
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            outcome["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join(TIMEOUT)
    assert not t.is_alive()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _together(*fns):
    """Each function on a thread of its own, started together; their results in order."""
    results = [None] * len(fns)
    errors = []

    def run(i, fn):
        try:
            results[i] = fn()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert not any(t.is_alive() for t in threads)
    if errors:
        raise errors[0]
    return results


def _overlapping(block, inside, other):
    """``other()`` on a thread while another thread is within ``block()`` (a context manager), then
    ``inside()`` in that block: both results."""
    entered, finished = threading.Event(), threading.Event()

    def first():
        with block():
            entered.set()
            assert finished.wait(TIMEOUT)
            return inside()

    def second():
        assert entered.wait(TIMEOUT)
        try:
            return other()
        finally:
            finished.set()

    return _together(first, second)


# --- (a) each mode belongs to its thread ------------------------------------------------------------


def test_no_module_uses_the_old_process_wide_flags():
    """The modes live in ``grad_mode.state`` (per thread) only: a module that still read or wrote
    ``grad_mode.enabled``, ``record.trace`` or ``anomaly.active`` would read a missing attribute,
    or set a process-wide one that nothing reads (a recording that records nothing)."""
    import re
    from pathlib import Path

    old = re.compile(r"\b_?(grad_mode\.enabled|record\.trace|anomaly\.(active|_current|check_nan))\b")
    package = Path(gc.__file__).parent
    found = [
        f"{path.relative_to(package)}:{i}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if old.search(line)
    ]
    assert found == []


def _records():
    x = gc.tensor(2.0, requires_grad=True)
    y = x * 3
    return gc.is_grad_enabled(), y.requires_grad


def test_a_new_thread_starts_with_grad_mode_on_whatever_its_maker_does():
    with gc.no_grad():
        assert _in_thread(_records) == (True, True)  # PyTorch: a new thread's grad mode is on
        assert _records() == (False, False)
    with gc.set_grad_enabled(False):
        assert _in_thread(_records) == (True, True)
    assert _records() == (True, True)


def test_no_grad_in_a_thread_stays_in_that_thread():
    assert _overlapping(gc.no_grad, _records, _records) == [(False, False), (True, True)]
    assert _records() == (True, True)


def test_the_class_used_as_a_context_restores_each_threads_own_mode():
    """``with gc.no_grad:`` (no parentheses) keeps what it replaced per thread: two threads whose
    blocks overlap each get their own mode back (a stack shared by the threads swapped them)."""
    barrier = threading.Barrier(2, timeout=TIMEOUT)

    def first():  # mode on, enters first, leaves first
        with gc.no_grad:
            barrier.wait()  # 1: inside
            barrier.wait()  # 2: the other is inside too
        barrier.wait()  # 3: left
        mode = gc.is_grad_enabled()
        barrier.wait()  # 4
        return mode

    def second():  # mode off, enters second, leaves second
        gc.autograd.grad_mode.set_enabled(False)
        barrier.wait()  # 1
        with gc.no_grad:
            barrier.wait()  # 2
            barrier.wait()  # 3: the other has left
        mode = gc.is_grad_enabled()
        barrier.wait()  # 4
        return mode

    assert _together(first, second) == [True, False]
    assert gc.is_grad_enabled()


def test_a_backward_pass_turns_grad_mode_off_only_in_its_own_thread():
    """The cause of the wrong Dask gradients, made deterministic: while one thread's backward pass
    runs (paused in a hook), another thread's forward pass records its operations."""
    in_backward = threading.Event()
    recorded = threading.Event()

    def backward():
        x = gc.tensor([1.0, 2.0], requires_grad=True)

        def hook(g):
            in_backward.set()
            assert recorded.wait(TIMEOUT)

        x.register_hook(hook)
        ((x + 1) * x).sum().backward()
        return x.grad.tolist()

    def forward():
        assert in_backward.wait(TIMEOUT)
        try:
            x = gc.tensor([1.0, 2.0], requires_grad=True)
            w = gc.tensor([3.0, 4.0], requires_grad=True)
            y = ((x + w) * (w + 1)).sum()
            y.backward()
            return y.requires_grad, x.grad.tolist(), w.grad.tolist()
        finally:
            recorded.set()

    grads, (requires_grad, gx, gw) = _together(backward, forward)
    assert grads == [3.0, 5.0]
    assert requires_grad and gx == [4.0, 5.0] and gw == [8.0, 11.0]  # d/dw = (w+1) + (x+w)


def test_anomaly_mode_is_per_thread():
    with gc.detect_anomaly(raise_error=False) as mode:
        assert gc.is_anomaly_enabled()

        def elsewhere():
            x = gc.tensor(0.0, requires_grad=True)
            gc.sqrt(x).backward()  # inf: anomaly mode would raise (or note it) here
            return gc.is_anomaly_enabled(), float(x.grad)

        assert _in_thread(elsewhere) == (False, float("inf"))
        assert mode.found is None  # nothing another thread did is reported here

    def on():
        x = gc.tensor(0.0, requires_grad=True)
        with pytest.raises(RuntimeError, match="SqrtBackward0"):
            gc.sqrt(x).backward()
        return True

    assert _overlapping(gc.detect_anomaly, on, elsewhere) == [True, (False, float("inf"))]
    assert not gc.is_anomaly_enabled()


def test_a_recording_keeps_only_its_own_threads_operations():
    barrier = threading.Barrier(2, timeout=TIMEOUT)

    def recorder():
        x = gc.tensor(2.0, requires_grad=True)
        with recording() as trace:
            barrier.wait()  # the other thread computes now...
            y = gc.sin(x)
            barrier.wait()  # ... and has finished
        return [type(node).__name__ for node, _, _ in trace], y

    def other():
        x = gc.tensor(3.0, requires_grad=True)
        barrier.wait()
        z = gc.exp(x) * x
        barrier.wait()
        return z.requires_grad

    (names, y), other_recorded = _together(recorder, other)
    assert names == ["SinBackward0"]
    assert other_recorded
    assert _in_thread(lambda: gc.autograd.grad_mode.state.trace) is None


def test_a_reentrant_backward_on_a_fresh_stack_keeps_the_callers_modes():
    """A backward run from a custom Function's backward deep in the stack continues on a new thread
    (engine._on_fresh_stack): that thread takes its caller's modes, not a new thread's defaults."""
    from gradcli.autograd import engine
    from gradcli.autograd.grad_mode import state

    with gc.no_grad(), gc.detect_anomaly(), recording() as trace:
        caller = state.snapshot()
        assert engine._on_fresh_stack(state.snapshot) == caller
        assert caller[0] is False and caller[1] is trace and caller[2] is not None
    assert _in_thread(state.snapshot) == (True, None, None)


# --- (b) library jobs in a thread pool, bit for bit as alone ----------------------------------------


def _bits(values):
    return [np.asarray(v, dtype=np.float64).tobytes() for v in values]


def _scalar_job(k):
    x = gc.tensor(0.25 + k / 7, requires_grad=True)
    w = gc.tensor(1.5 - k / 11, requires_grad=True)
    kind = k % 4
    if kind == 0:
        y = (x + w) * (w + 1)
    elif kind == 1:
        y = gc.sin(x * w) + gc.exp(-w) * x**2
    elif kind == 2:
        y = gc.log(x * x + 1) / (w * w + 2) - gc.tanh(x - w)
    else:
        y = gc.sqrt(x * x + w * w) * gc.cos(w)
    y.backward()
    return _bits([y.item(), x.grad, w.grad])


def _array_job(k):
    n = 3000
    x = gc.tensor(np.linspace(-1, 1, n) + k / 13, requires_grad=True)
    w = gc.tensor(np.linspace(0.5, 2, n) - k / 17, requires_grad=True)
    kind = k % 4
    if kind == 0:
        y = ((x + w) * (w + 1)).sum()
        y.backward()
        grads = [x.grad, w.grad]
    elif kind == 1:
        y = (gc.sin(x) * w**2 + gc.exp(-w * x)).mean()
        grads = gc.grad(y, [x, w])
    elif kind == 2:
        v = gc.stack([x, w])  # a non-elementwise step: the general engine loop
        y = (v @ v.T).sum() + gc.tanh(x).sum()
        grads = gc.grad(y, [x, w])
    else:
        y = ((x - w) ** 2 / (1 + w * w)).sum()
        (gx,) = gc.grad(y, [x], create_graph=True)  # a second order: grad mode on inside backward
        y = gx.sum()
        y.backward()
        grads = [x.grad, w.grad]
    return _bits([y.item(), *grads])


@pytest.mark.parametrize("workers", [2, 4])
def test_library_jobs_in_a_thread_pool_equal_each_job_alone(workers):
    jobs = [(_scalar_job, k) for k in range(160)] + [(_array_job, k) for k in range(160)]
    alone = [fn(k) for fn, k in jobs]
    with ThreadPoolExecutor(workers) as pool:
        for _ in range(2):
            together = list(pool.map(lambda job: job[0](job[1]), jobs))
            assert [i for i, (a, b) in enumerate(zip(alone, together)) if a != b] == []


# --- the Tensor methods a Python function's run watches, per thread ----------------------------------


def _function_program(fn):
    from gradcli.lang.program import Program

    return Program(f"<{fn.__name__}>", function=fn)


def test_watching_a_python_functions_escapes_is_per_thread_and_leaves_the_class_as_it_was():
    """``eval f.py:f`` notes how the function leaves autograd (``float(x)``...) by wrapping Tensor
    methods while it runs. Two runs that overlap on two threads must each note their own escapes,
    and leave the class's own methods behind (the second run's wrappers were saved over the first's
    and put back last: the class kept them, noting into a finished run's list forever)."""
    from gradcli.lang.python import run_function as _run_function

    originals = {name: gc.Tensor.__dict__[name] for name in ("item", "__float__", "numpy", "data")}
    both_inside = threading.Barrier(2, timeout=TIMEOUT)
    first_done = threading.Event()

    def plain(x):
        both_inside.wait()
        return x * 2

    def escaping(x):
        both_inside.wait()
        assert first_done.wait(TIMEOUT)
        return gc.tensor(float(x)) * x  # float(x): autograd cannot follow

    a, b = _function_program(plain), _function_program(escaping)

    def first():
        try:
            return _run_function(a, {"x": 1.5}, ["x"]).outputs[0].item()
        finally:
            first_done.set()

    assert _together(first, lambda: _run_function(b, {"x": 1.5}, ["x"]).outputs[0].item()) == [3.0, 2.25]
    assert a.escapes == [] and b.escapes == ["float()"]
    assert {name: gc.Tensor.__dict__[name] for name in originals} == originals
    x = gc.tensor(2.0, requires_grad=True)
    float(x)
    assert a.escapes == [] and b.escapes == ["float()"]  # no watcher is left behind


def test_detach_kept_fixed_in_one_thread_changes_no_other_threads_detach():
    """A gradient check keeps ``detach()`` of a Python function fixed at the point's values while it
    moves the point (``detach_fixed``); another thread's ``detach()`` meanwhile is its own value."""
    from gradcli.lang.python import detach_fixed

    def fixed():
        return float(gc.tensor(3.0).detach())

    def other():
        x = gc.tensor(3.0, requires_grad=True)
        return float(x.detach() * x)

    assert _overlapping(lambda: detach_fixed(replay=[np.float64(100.0)]), fixed, other) == [100.0, 9.0]
    assert gc.Tensor.__dict__["detach"].__qualname__ == "Tensor.detach"


# --- (c) the CLI's batched evaluator (the --points road) under a thread pool -----------------------

LONG = " + ".join(f"sin({0.5 + k / 97!r}*x - w)*{1 + k % 7}" for k in range(120))  # the flat road's length


def _points_programs(tmp_path):
    from gradcli.lang.program import load

    module = tmp_path / "user_fn.py"
    module.write_text(
        "import gradcli as gc\n\ndef f(x, w):\n    s = float(w)  # leaves autograd: noted as an escape\n"
        "    return gc.sin(x) * w ** 2 + s\n"
    )
    return {
        "product": (load("(x+w)*(w+1)"), {}, None),
        "vector": (load("sin(x)*w^2 + sum(v*x)"), {"v": np.array([1.0, 2.0])}, None),
        "seeded": (load("[x*w, exp(x)/w]"), {}, "[1, 2]"),
        "sqrt": (load("sqrt(x*x*w)*w"), {}, None),  # a zero row: an infinite gradient and its warning
        "long": (load(LONG), {}, None),
        "function": (load(f"{module}:f"), {}, None),  # point by point, its escapes watched
    }


def _points_job(program, values, seed, k, n=400):
    from gradcli.lang.compute.points import evaluate_points

    rng = np.random.default_rng(k)
    x = rng.uniform(-2, 2, n)
    w = rng.uniform(0.5, 2, n)
    x[k % n] = 0.0  # one row where sqrt(x*x*w) meets 0
    names, result = evaluate_points(program, {"x": x, "w": w}, values, None, seed, offset=1000 * k)
    return names, _bits([result.value, *result.gradient.values()]), result.warning


def test_the_batched_evaluator_in_a_thread_pool_equals_one_thread(tmp_path):
    programs = _points_programs(tmp_path)
    jobs = [(name, k) for k in range(8) for name in programs]

    def run(job):
        name, k = job
        program, values, seed = programs[name]
        return _points_job(program, values, seed, k, n=400 if name != "function" else 40)

    alone = [run(job) for job in jobs]
    assert any(warning for _, _, warning in alone)  # the sqrt rows warn (anomaly mode runs)
    assert programs["function"][0].escapes == ["float()"]
    with ThreadPoolExecutor(3) as pool:
        for _ in range(3):
            together = list(pool.map(run, jobs))
            assert [jobs[i] for i, (a, b) in enumerate(zip(alone, together)) if a != b] == []
    assert programs["function"][0].escapes == ["float()"]


# --- (d) --dask: several parts on two workers, bit for bit as one process --------------------------

EXPRESSION = "(x+w)*(w+1)"
PARTS, ROWS = 4, 50_000  # the report's data set: at 50,000 rows a part, most runs lost a part's gradients


@pytest.fixture(scope="module")
def data_set(tmp_path_factory):
    """A folder of Parquet parts, and what one process writes for it (``--points ... -o``)."""
    pytest.importorskip("dask.dataframe", reason="--dask needs dask[dataframe] (the scale extra)")
    pytest.importorskip("distributed", reason="--dask needs dask.distributed (the scale extra)")
    pa = pytest.importorskip("pyarrow", reason="--dask reads and writes Parquet through pyarrow")
    import pyarrow.parquet as pq

    folder = tmp_path_factory.mktemp("dask")
    parts = folder / "parts"
    parts.mkdir()
    rng = np.random.default_rng(27)
    for k in range(PARTS):
        table = pa.table({"x": rng.uniform(-3, 3, ROWS), "w": rng.uniform(-3, 3, ROWS)})
        pq.write_table(table, parts / f"part{k}.parquet")
    one = folder / "one.parquet"
    _cli(["eval", EXPRESSION, "--points", str(parts), "-o", str(one)])
    want = pq.read_table(one)
    assert want.num_rows == PARTS * ROWS and want.column_names == ["x", "w", "value", "grad_x", "grad_w"]
    x, w = want.column("x").to_numpy(), want.column("w").to_numpy()
    assert np.array_equal(want.column("grad_x").to_numpy(), w + 1)
    assert np.array_equal(want.column("grad_w").to_numpy(), (w + 1) + (x + w))
    return parts, want


def _cli(args):
    """``gradcli ARGS`` run here; what it warned of (a value or a gradient that is not finite)."""
    from typer.testing import CliRunner

    from gradcli.cli.app import app

    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    # (pytest shows the deprecation warnings of dask's own pandas calls, which a user does not see)
    return "".join(line for line in result.stderr.splitlines(True) if "non-finite" in line)


@pytest.fixture(scope="module")
def warning_set(data_set, tmp_path_factory):
    """Three parts whose second and third hold rows where sqrt's derivative is infinite, and what one
    process warns: the first of them, numbered by its row in the whole data set."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = tmp_path_factory.mktemp("warning") / "parts"
    parts.mkdir()
    for k in range(3):
        x = np.linspace(1, 2, 1000)
        x[[700, 20][k - 1] if k else 0] = 0.0 if k else 1.5
        pq.write_table(pa.table({"x": x, "w": np.full(1000, 2.0)}), parts / f"part{k}.parquet")
    said = _cli(["eval", "sqrt(x)*w", "--points", str(parts), "-o", str(parts.parent / "one.parquet")])
    assert said == (
        "warning: non-finite gradient: the derivative of 'sqrt(x)' at column 1 (SqrtBackward0) gave inf "
        "from input 0 at point 1701 (x = 0.0, w = 2.0)\n"
    )
    return parts, said


def _differing_columns(folder, want):
    """The columns where the folder of parts (read in the parts' order) differs from one process's
    output, by their bytes."""
    import re

    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted(
        folder.glob("*.parquet"), key=lambda p: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.name)]
    )
    got = pa.concat_tables([pq.read_table(f) for f in files])
    if got.column_names != want.column_names or got.num_rows != want.num_rows:
        return ["(the columns or the rows)"]
    return [c for c in want.column_names if got.column(c).to_numpy().tobytes() != want.column(c).to_numpy().tobytes()]


def test_dask_local_2_over_several_parts_equals_one_process_every_run(data_set, tmp_path):
    parts, want = data_set
    for run in range(5):
        out = tmp_path / f"out{run}"
        _cli(["eval", EXPRESSION, "--points", str(parts), "--dask", "local:2", "-o", str(out)])
        assert (run, _differing_columns(out, want)) == (run, [])


def test_dask_says_the_first_warning_once_numbered_as_one_process(warning_set, tmp_path):
    """A partition's warning was printed by the thread that ran it (on a real worker: in its log),
    once a partition, its point numbered from the partition's start (point 701 for row 1701)."""
    parts, said = warning_set
    for run in range(2):
        out = tmp_path / f"out{run}"
        assert _cli(["eval", "sqrt(x)*w", "--points", str(parts), "--dask", "local:2", "-o", str(out)]) == said


def test_a_real_scheduler_and_a_two_thread_worker_equal_one_process(data_set, warning_set, tmp_path):
    """``dask scheduler`` and ``dask worker --nthreads 2`` on 127.0.0.1 (processes of their own,
    stopped at the end): the worker's two threads evaluate two parts at once."""
    import json
    import os
    import subprocess
    import sys
    import time

    import distributed

    parts, want = data_set
    dask = os.path.join(os.path.dirname(sys.executable), "dask")
    if not os.path.exists(dask):
        pytest.skip(reason="no dask command beside this Python (dask[distributed]'s scripts are not installed)")
    here = os.path.dirname(os.path.dirname(os.path.abspath(gc.__file__)))  # this gradcli, on the workers too
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
    file = tmp_path / "scheduler.json"
    quiet = {"env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(file)]
    worker = ["worker", "--scheduler-file", str(file), "--nthreads", "2", "--no-nanny", "--no-dashboard"]
    processes = [subprocess.Popen([dask, *scheduler], **quiet)]
    try:
        deadline = time.monotonic() + 60
        while not (file.exists() and file.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(file.read_text())["address"]
        processes.append(subprocess.Popen([dask, *worker, "--host", "127.0.0.1"], **quiet))
        with distributed.Client(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
        for run in range(6):  # before the fix, about one run in four lost a part here
            out = tmp_path / f"out{run}"
            _cli(["eval", EXPRESSION, "--points", str(parts), "--dask", address, "-o", str(out)])
            assert (run, _differing_columns(out, want)) == (run, [])
        warned, said = warning_set
        assert (
            _cli(["eval", "sqrt(x)*w", "--points", str(warned), "--dask", address, "-o", str(tmp_path / "w")]) == said
        )
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


# --- what is built on first use is built once, whichever threads ask first --------------------------

FIRST_USE = r"""
import threading, time
from gradcli.autograd import factory
from gradcli.lang import flat, functions

calls = {"functions": 0, "flat": 0, "rng": 0}

def slow(name, real):
    def build(*args):
        calls[name] += 1
        time.sleep(0.2)  # long enough for every thread to arrive meanwhile
        return real(*args)
    return build

functions._build = slow("functions", functions._build)
flat._build_tables = slow("flat", flat._build_tables)
real_rng = factory.np.random.default_rng
factory.np.random.default_rng = slow("rng", real_rng)
barrier = threading.Barrier(4)
seen = []

def first_use():
    barrier.wait()
    seen.append((functions.FUNCTIONS["sin"], flat.tables(), factory._rng()))

threads = [threading.Thread(target=first_use) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
assert len(seen) == 4
same = [all(s[i] is seen[0][i] for s in seen) for i in range(3)]
print(calls["functions"], calls["flat"], calls["rng"], same)
"""


def test_the_random_generator_is_the_processs_as_pytorchs_default_generator_is():
    """``manual_seed`` seeds every thread's draws (PyTorch's default generator is global, not per
    thread): a draw on another thread continues the seeded sequence."""
    gc.manual_seed(27)
    here = gc.randn(3).tolist()
    gc.manual_seed(27)
    there = _in_thread(lambda: gc.randn(3).tolist())
    assert there == here and gc.randn(1).tolist() != here[:1]
    gc.manual_seed(27)
    assert gc.randn(4).tolist()[:3] == here


def test_tables_and_the_generator_are_made_once_whichever_threads_ask_first():
    """The function table, the flat road's tables and the random generator are made on first use:
    threads arriving together wait for one of them to make it, and all use that one (two
    generators would have let a thread draw from one that ``manual_seed`` never sees)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FIRST_USE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1", "1", "[True,", "True,", "True]"]
