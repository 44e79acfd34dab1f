"""Issue 27: no output file is lost or half-written, and bad inputs are refused cleanly.

Every ``-o`` of every command and format (eval --points CSV/JSON lines/Parquet/Arrow/Feather, the
--dask folder, jacobian/hessian CSV/npy/JSON/text, graph in every format, plot, check --junit) is run
(a) into a full disk (a real tmpfs with no room left; skipped without root), (b) onto its own input,
(c) interrupted by SIGINT and SIGTERM while the file is being written (in process, by delivering the
signal from inside the write; and in a child process, by a real signal once the temporary file
exists): each time the old file stays byte for byte, no temporary file is left, and the exit code is
the documented one (2, 130, 143)."""

from __future__ import annotations

import errno
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from gradcli import files
from gradcli.cli import fast_command
from gradcli.cli.app import app, command_names
from gradcli.errors import UsageError

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
OLD = b"the old content, which must survive\n"
CASES_TOML = '[[case]]\nname = "square"\nexpr = "x*x"\nat = {x = 1.5}\n'


def _points(prog: list[str], data: str, target: Path) -> list[str]:
    return ["eval", *prog, "--points", data, "-o", str(target)]


#: every -o: name -> (extension, argv(inputs folder, target, program as argv) , what it needs)
OUTPUTS = {
    **{
        f"eval-{ext}": (ext, lambda d, t, p: _points(p or ["x*w"], str(d / "data.parquet"), t), "pyarrow")
        for ext in ("csv", "jsonl", "parquet", "arrow", "feather")
    },
    **{
        f"jacobian-{ext}": (ext, lambda d, t, p: ["jacobian", *(p or ["v*2"]), "--at", "v=[1,2,3]", "-o", str(t)], None)
        for ext in ("csv", "npy", "json", "txt")
    },
    **{
        f"hessian-{ext}": (
            ext,
            lambda d, t, p: ["hessian", *(p or ["sum(v^3)"]), "--at", "v=[1,2]", "-o", str(t)],
            None,
        )
        for ext in ("csv", "npy", "json", "txt")
    },
    **{
        f"graph-{ext}": (
            ext,
            lambda d, t, p: ["graph", *(p or ["x*y + sin(x)"]), "--at", "x=1,y=2", "-o", str(t)],
            need,
        )
        for ext, need in (("dot", None), ("json", None), ("txt", None), ("html", "dot"), ("svg", "dot"), ("png", "dot"))
    },
    **{
        f"plot-{ext}": (ext, lambda d, t, p: ["plot", *(p or ["x^2"]), "--range", "-1,1", "-o", str(t)], "matplotlib")
        for ext in ("png", "svg", "pdf")
    },
    "check-junit": ("xml", lambda d, t, p: ["check", "--cases", str(d / "cases.toml"), "--junit", str(t)], None),
}


def _need(what: str | None) -> None:
    import shutil

    if what == "dot" and shutil.which("dot") is None:
        pytest.skip("Graphviz dot is not installed: the picture formats need it")
    elif what in ("pyarrow", "matplotlib"):
        pytest.importorskip(what, reason=f"{what} is an optional extra that this output needs")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """The data sets and the cases file every output reads (outside the folder the output goes to)."""
    folder = tmp_path_factory.mktemp("inputs")
    rng = np.random.default_rng(27)
    x, w = rng.uniform(-2, 2, 2000), rng.uniform(-2, 2, 2000)
    (folder / "data.csv").write_text("x,w\n" + "".join(f"{a!r},{b!r}\n" for a, b in zip(x.tolist(), w.tolist())))
    try:
        import pyarrow as pa
        import pyarrow.feather as feather
        import pyarrow.parquet as pq
    except ImportError:
        pass
    else:
        table = pa.table({"x": x, "w": w})
        pq.write_table(table, folder / "data.parquet")
        feather.write_feather(table, folder / "data.arrow")
        feather.write_feather(table, folder / "data.feather")
    (folder / "cases.toml").write_text(CASES_TOML)
    return folder


def _only(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _one_error(stderr: str, start: str) -> None:
    assert stderr.startswith(f"error: {start}") and stderr.count("\n") == 1, stderr


# --- (a) a full disk ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_disk(tmp_path_factory):
    """A 64 KiB tmpfs (root in a sandbox may mount one); skipped where it cannot be mounted."""
    import shutil

    if shutil.which("mount") is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    folder = tmp_path_factory.mktemp(f"tiny-{uuid.uuid4().hex[:6]}")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode(errors='replace').strip()})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def _fill(disk: Path, target: Path | None = None) -> None:
    """The old ``target``, then a filler taking every byte left: the disk is full."""
    if target is not None:
        for old in disk.iterdir():
            old.unlink()
        target.write_bytes(OLD)
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


@pytest.mark.parametrize("name", list(OUTPUTS))
def test_a_full_disk_keeps_the_old_file(name, inputs, tiny_disk):
    ext, argv, need = OUTPUTS[name]
    _need(need)
    target = tiny_disk / f"out.{ext}"
    _fill(tiny_disk, target)
    result = runner.invoke(app, argv(inputs, target, None))
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.endswith(f"error: cannot write {target}: No space left on device (nothing was changed)\n")
    assert result.stderr.count("error:") == 1
    assert target.read_bytes() == OLD
    assert _only(tiny_disk) == sorted(["filler", target.name]), "a temporary file was left"


def test_a_full_disk_keeps_the_old_dask_folder(inputs, tiny_disk):
    pytest.importorskip("dask.dataframe", reason="--dask needs the scale extra (dask)")
    pytest.importorskip("distributed", reason="--dask needs the scale extra (distributed)")
    target = tiny_disk / "res"
    for old in tiny_disk.iterdir():
        old.unlink()
    target.mkdir()
    (target / "part.0.parquet").write_bytes(OLD)
    _fill(tiny_disk)
    result = runner.invoke(
        app, ["eval", "x*w", "--points", str(inputs / "data.parquet"), "--dask", "local:1", "-o", str(target)]
    )
    assert result.exit_code == 2, result.stderr
    assert result.stderr.endswith(f"error: cannot write {target}: No space left on device (nothing was changed)\n")
    assert result.stderr.count("error:") == 1  # (pandas may warn of its own deprecations through dask)
    assert (target / "part.0.parquet").read_bytes() == OLD and _only(target) == ["part.0.parquet"]
    assert _only(tiny_disk) == ["filler", "res"]


# --- (b) onto its own input --------------------------------------------------------------------------


def _own_input(name: str, inputs: Path, folder: Path) -> tuple[list[str], Path]:
    """The command of ``name`` with ``-o`` naming one of its own inputs (the data, or the program)."""
    ext, argv, _ = OUTPUTS[name]
    target = folder / f"own.{ext}"
    if name.startswith("eval-") and ext != "jsonl":
        source = inputs / f"data.{ext}"
        target.write_bytes(source.read_bytes())
        return ["eval", "x*w", "--points", str(target), "-o", str(target)], target
    if name == "check-junit":
        target.write_text(CASES_TOML)
        return ["check", "--cases", str(target), "--junit", str(target)], target
    program = {"eval": "x*w", "jacobian": "v*2", "hessian": "sum(v^3)", "graph": "x*y", "plot": "x^2"}
    target.write_text(program[name.split("-")[0]])
    return argv(inputs, target, ["-f", str(target)]), target


@pytest.mark.parametrize("name", list(OUTPUTS))
def test_an_output_onto_its_own_input_is_refused(name, inputs, tmp_path):
    _need(OUTPUTS[name][2])
    argv, target = _own_input(name, inputs, tmp_path)
    before = target.read_bytes()
    result = runner.invoke(app, argv)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    option = "--junit" if name == "check-junit" else "-o"
    assert result.stderr == f"error: {option} {target} is also an input ({target}): write the result to another file\n"
    assert result.stdout == ""
    assert target.read_bytes() == before and _only(tmp_path) == [target.name]


def test_the_same_file_by_another_name_is_refused(inputs, tmp_path):
    pytest.importorskip("pyarrow", reason="Parquet needs the scale extra (pyarrow)")
    data = tmp_path / "data.parquet"
    data.write_bytes((inputs / "data.parquet").read_bytes())
    before = data.read_bytes()
    (tmp_path / "link.parquet").symlink_to(data)
    os.link(data, tmp_path / "hard.parquet")
    names = ["link.parquet", "hard.parquet", "./data.parquet", "sub/../data.parquet"]
    (tmp_path / "sub").mkdir()
    for out in names:
        for points in (str(data), str(tmp_path), str(tmp_path / "d*.parquet")):  # a file, a folder, a glob
            result = runner.invoke(app, ["eval", "x*w", "--points", points, "-o", str(tmp_path / out)])
            assert result.exit_code == 2, (out, points, result.stderr)
            _one_error(result.stderr, f"-o {tmp_path / out} is also an input (")
    assert data.read_bytes() == before
    assert _only(tmp_path) == ["data.parquet", "hard.parquet", "link.parquet", "sub"]
    # the program's file too: -f, FILE.py:func and --python
    code = tmp_path / "f.py"
    code.write_text("def f(x, w):\n    return x * w\n")
    for program in ([f"{code}:f"], ["--python", f"{code}:f"]):
        result = runner.invoke(app, ["graph", *program, "--at", "x=1,w=2", "--format", "dot", "-o", str(code)])
        assert result.exit_code == 2
        _one_error(result.stderr, f"-o {code} is also an input ({code})")
    assert code.read_text() == "def f(x, w):\n    return x * w\n"


def test_the_dask_folder_is_not_an_input_nor_a_file_name(inputs, tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "p0.csv").write_text("x,w\n1,2\n")
    for points in (parts, parts / "p0.csv", parts / "*.csv"):
        result = runner.invoke(app, ["eval", "x*w", "--points", str(points), "--dask", "local:2", "-o", str(parts)])
        assert (result.exit_code, result.stderr) == (
            2,
            f"error: -o {parts} holds an input ({parts / 'p0.csv'}): write the result to another folder\n",
        )
    assert _only(parts) == ["p0.csv"]
    for ext in ("csv", "jsonl", "json", "arrow", "feather", "txt"):
        out = tmp_path / f"res.{ext}"
        result = runner.invoke(app, ["eval", "x*w", "--points", str(parts), "--dask", "local:2", "-o", str(out)])
        assert (result.exit_code, result.stderr) == (
            2,
            f"error: -o {out}: --dask writes a folder of Parquet parts, not a .{ext} file; "
            "name a folder (out/ or out.parquet)\n",
        )
        assert not out.exists()
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    result = runner.invoke(app, ["eval", "x*w", "--points", str(parts), "--dask", "local:2", "-o", str(other)])
    assert result.exit_code == 2 and "holds other files" in result.stderr
    assert _only(other) == ["notes.txt"]


# --- (c) interrupted while writing ---------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("name", list(OUTPUTS))
def test_a_signal_while_writing_keeps_the_old_file(name, signum, inputs, tmp_path, monkeypatch):
    """The signal is delivered from inside the write to the temporary file: the handler in place then
    must end the command cleanly (SIGTERM's default action would kill the process and leave it)."""
    ext, argv, need = OUTPUTS[name]
    _need(need)
    out = tmp_path / "out"
    out.mkdir()
    target = out / f"old.{ext}"
    target.write_bytes(OLD)
    delivered = []

    def write(fd, data):
        if not delivered:
            delivered.append(True)
            handler = signal.getsignal(signum)
            assert callable(handler), "no handler: the signal would kill gradcli and leave the temporary file"
            handler(signum, None)
        return os.write(fd, data)

    monkeypatch.setattr(files, "_write", write)
    result = runner.invoke(app, argv(inputs, target, None))
    assert delivered, "the output was not written through gradcli.files"
    assert result.exit_code == 128 + signum, (result.exit_code, result.stderr)
    assert target.read_bytes() == OLD
    assert _only(out) == [target.name], "a temporary file was left"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handlers are put back
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """400,000 points: long enough a run to interrupt mid-write."""
    pa = pytest.importorskip("pyarrow", reason="the big data set is Parquet (the scale extra)")
    pq = pytest.importorskip("pyarrow.parquet", reason="the big data set is Parquet (the scale extra)")
    rng = np.random.default_rng(1)
    path = tmp_path_factory.mktemp("big") / "big.parquet"
    pq.write_table(pa.table({"x": rng.uniform(size=400_000), "w": rng.uniform(size=400_000)}), path)
    return path


@pytest.mark.parametrize(
    ("ext", "signum"),
    [("csv", signal.SIGINT), ("jsonl", signal.SIGTERM), ("parquet", signal.SIGTERM), ("arrow", signal.SIGINT)],
)  # each format and each signal (every pair is run in process above)
def test_a_real_signal_mid_run_keeps_the_old_file(ext, signum, big, tmp_path):
    target = tmp_path / f"old.{ext}"
    target.write_bytes(OLD)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GRADCLI_DEBUG", None)
    argv = [sys.executable, "-m", "gradcli", "eval", "x*w + sin(x)", "--points", str(big), "--chunk-rows", "5000"]
    child = subprocess.Popen([*argv, "-o", str(target)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60

    def started() -> bool:  # a temporary file beside the target, or (written in place) the target changed
        return any(p.name.endswith(".tmp") for p in tmp_path.iterdir()) or target.stat().st_size != len(OLD)

    while not started() and child.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    child.send_signal(signum)  # the output has started
    _, stderr = child.communicate(timeout=60)
    if child.returncode == 0:
        pytest.skip("the run ended before the signal arrived (a very fast machine)")
    assert child.returncode == 128 + signum, stderr
    assert stderr.decode() in ("interrupted\n", "")
    assert target.read_bytes() == OLD
    assert _only(tmp_path) == [target.name]


def test_an_interrupted_folder_is_removed_and_the_old_one_stays(tmp_path):
    old = tmp_path / "res"
    old.mkdir()
    (old / "part.0.parquet").write_bytes(OLD)
    with pytest.raises(KeyboardInterrupt), files.atomic_folder(old) as folder:
        Path(folder, "part.0.parquet").write_bytes(b"new")
        raise KeyboardInterrupt
    assert _only(tmp_path) == ["res"] and (old / "part.0.parquet").read_bytes() == OLD
    with files.atomic_folder(old) as folder:
        Path(folder, "part.0.parquet").write_bytes(b"new")
    assert _only(tmp_path) == ["res"] and (old / "part.0.parquet").read_bytes() == b"new"


def test_a_bad_row_late_in_the_data_writes_no_file(tmp_path):
    source = tmp_path / "bad.csv"
    source.write_text("x,w\n" + "1,2\n" * 50 + "7,oops\n")
    for ext in ("csv", "jsonl", "parquet", "arrow"):
        target = tmp_path / f"old.{ext}"
        target.write_bytes(OLD)
        result = runner.invoke(app, ["eval", "x*w", "--points", str(source), "--chunk-rows", "10", "-o", str(target)])
        assert (result.exit_code, result.stderr) == (
            2,
            f"error: --points {source}: row 52, column 'w': 'oops' is not a number\n",
        )
        assert target.read_bytes() == OLD
    assert _only(tmp_path) == ["bad.csv", "old.arrow", "old.csv", "old.jsonl", "old.parquet"]


# --- a column that --at gives too -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["csv", "parquet"])
@pytest.mark.parametrize("command", ["eval", "check"])
def test_a_column_given_by_at_too_is_refused(kind, command, tmp_path):
    if kind == "parquet":
        pytest.importorskip("pyarrow", reason="Parquet needs the scale extra (pyarrow)")
        import pyarrow as pa
        import pyarrow.parquet as pq

        source = tmp_path / "ok.parquet"
        pq.write_table(pa.table({"x": [1.0, 2.0], "w": [3.0, 4.0]}), source)
    else:
        source = tmp_path / "ok.csv"
        source.write_text("x,w\n1,3\n2,4\n")
    result = runner.invoke(app, [command, "x*w", "--points", str(source), "--at", "w=100"])
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        "error: --at w: 'w' is also a column of the --points data; give it once (drop --at w=... or the column)\n"
    )
    unused = runner.invoke(app, [command, "log(x)", "--points", str(source), "--at", "w=2"])  # w a column all the same
    assert (unused.exit_code, unused.stderr) == (2, result.stderr)
    fine = runner.invoke(app, [command, "x*v", "--points", str(source), "--at", "v=100"])
    assert fine.exit_code == 0, fine.stderr


# --- integers float64 cannot hold -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "values", "row", "shown"),
    [
        ("int64", [1, 2**63 - 1], 2, "9223372036854775807"),
        ("int64", [-(2**62), 1], 1, "-4611686018427387904"),
        ("uint64", [3, 2**64 - 1], 2, "18446744073709551615"),
        ("int64", [5, 2**53 + 1], 2, "9007199254740993"),
    ],
)
@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_an_integer_beyond_2_53_names_its_row_and_column(kind, values, row, shown, fmt, tmp_path):
    pa = pytest.importorskip("pyarrow", reason="Parquet and Arrow need the scale extra (pyarrow)")
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    source = tmp_path / f"ints.{fmt}"
    table = pa.table({"w": pa.array([1.0, 1.0]), "x": pa.array(values, getattr(pa, kind)())})
    pq.write_table(table, source) if fmt == "parquet" else feather.write_feather(table, source)
    for command in ("eval", "check"):
        result = runner.invoke(app, [command, "x*w", "--points", str(source)])
        assert result.exit_code == 2, result.stderr
        assert result.stderr == (
            f"error: --points {source}: data row {row}, column 'x': {shown} is an integer beyond 2^53 "
            "(9007199254740992), which float64 cannot hold exactly\n"
        )
    exact = tmp_path / "exact.parquet"
    pq.write_table(pa.table({"x": pa.array([2**53, -(2**53)], pa.int64())}), exact)
    result = runner.invoke(app, ["eval", "2*x", "--points", str(exact)])
    assert result.exit_code == 0 and result.stdout.splitlines()[1] == "9007199254740992,1.8014398509481984e+16,2.0"


# --- every numeric option: one range check ------------------------------------------------------------------


def _numeric_options() -> dict[str, set[str]]:
    """Every option of every command that takes an int or a float: option -> the commands."""
    group = typer.main.get_command(app)
    found: dict[str, set[str]] = {}
    for command in command_names():
        for param in group.commands[command].params:
            if param.param_type_name == "option" and param.type.name in ("int", "float"):
                found.setdefault(param.opts[0], set()).add(command)
    return found


def _validator():
    from gradcli.cli import options

    return options


def test_every_numeric_option_is_range_checked_by_the_one_validator():
    NUMBERS = _validator().NUMBERS
    options = _numeric_options()
    inside = {"--dask local:N"}  # a number inside a text option
    assert set(options) == set(NUMBERS) - inside == set(NUMERIC), "a numeric option without a range (or one too many)"
    from gradcli.cli import EVAL_OPTIONS

    assert {name for name, (_, kind) in EVAL_OPTIONS.items() if kind in (int, float)} <= set(NUMBERS)


ABSURD = ["99999999999999999999", "-1", "0", "nan", "inf", "-inf", "1e308", "1e400"]


def _prefix(command: str) -> list[str]:
    return {
        "eval": ["eval", "x", "--points", "p.csv"],
        "check": ["check", "x", "--at", "x=1"],
        "graph": ["graph", "x", "--at", "x=1"],
        "plot": ["plot", "x", "--json"],
        "diff": ["diff", "x"],
        "jacobian": ["jacobian", "x", "--at", "x=1"],
        "hessian": ["hessian", "x", "--at", "x=1"],
    }[command]


NUMERIC = ["--atol", "--chunk-rows", "--digits", "--jobs", "--layout-timeout", "--order", "--rtol",
           "--sympy-timeout"]  # fmt: skip


@pytest.mark.parametrize("option", NUMERIC)
def test_absurd_values_of_every_numeric_option_are_one_error_line(option, tmp_path, monkeypatch):
    range_problem = _validator().range_problem
    monkeypatch.chdir(tmp_path)
    Path("p.csv").write_text("x\n1\n")
    commands = _numeric_options()[option]
    if option == "--jobs":
        Path("c.toml").write_text(CASES_TOML)
    for command in sorted(commands):
        prefix = ["check", "--cases", "c.toml"] if option == "--jobs" else _prefix(command)
        for value in ABSURD:
            parsed = _parsed(option, value)
            result = runner.invoke(app, [*prefix, option, value])
            if parsed is not None and range_problem(option, parsed) is None:  # in range after all (--rtol 1e308)
                assert result.exit_code in (0, 1), (command, option, value, result.stderr)
                continue
            assert result.exit_code == 2, (command, option, value, result.stderr)
            assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
            assert "internal error" not in result.stderr


def _parsed(option: str, value: str):
    if _validator().NUMBERS[option].whole:
        try:
            return int(value)
        except ValueError:
            return None  # click refuses it as not an integer (also one error line)
    return float(value)


def test_the_validator_says_the_range():
    range_problem = _validator().range_problem
    assert range_problem("--chunk-rows", 99999999999999999999) == (
        "--chunk-rows must be at most 1,000,000,000 rows, got 99999999999999999999"
    )
    assert range_problem("--layout-timeout", 1e308) == "--layout-timeout must be at most 1,000,000 seconds, got 1e+308"
    assert (
        range_problem("--layout-timeout", math.inf)
        == "--layout-timeout must be a finite number of seconds > 0, got inf"
    )
    assert range_problem("--sympy-timeout", 0.0) == "--sympy-timeout must be a positive number of seconds, got 0.0"
    assert range_problem("--digits", 18) == "--digits must be between 1 and 17, got 18"
    assert range_problem("--rtol", 10**400) is None  # a whole number is finite, however large
    assert range_problem("--rtol", float("nan")) == "--rtol must be a finite number >= 0, got nan"
    assert range_problem("--digits", 17) is range_problem("--chunk-rows", None) is None
    with pytest.raises(UsageError, match="--jobs must be at most 1,024 processes, got 5000"):
        from gradcli.cli.options import checked_number

        checked_number("--jobs", 5000)


@pytest.mark.parametrize("count", ["0", "257", "5000", "99999999999999999999"])
def test_a_local_cluster_of_absurd_size_is_refused_before_it_starts(count, tmp_path):
    (tmp_path / "p.csv").write_text("x\n1\n")
    argv = ["eval", "x", "--points", str(tmp_path / "p.csv"), "--dask", f"local:{count}", "-o", str(tmp_path / "o")]
    result = runner.invoke(app, argv)
    low = "at least 1" if count == "0" else "at most 256 workers"
    assert (result.exit_code, result.stderr) == (2, f"error: --dask local:N must be {low}, got {int(count)}\n")
    assert _only(tmp_path) == ["p.csv"]


def test_the_fast_path_leaves_an_out_of_range_value_to_the_same_check():
    assert fast_command(["eval", "x", "--points", "p.csv", "--chunk-rows", "99999999999999999999"]) is None
    assert fast_command(["eval", "x", "--at", "x=1", "--digits", "0"]) is None
    assert fast_command(["eval", "x", "--points", "p.csv", "--chunk-rows", "7"])["chunk_rows"] == 7


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["eval", "x", "--points", "p.csv", "--chunk-rows", "99999999999999999999"],
         "error: --chunk-rows must be at most 1,000,000,000 rows, got 99999999999999999999\n"),
        (["graph", "x*y", "--at", "x=1,y=2", "--layout-timeout", "1e308", "-o", "g.svg"],
         "error: --layout-timeout must be at most 1,000,000 seconds, got 1e+308\n"),
    ],
)  # fmt: skip
def test_the_installed_command_says_one_line(argv, said, tmp_path):
    (tmp_path / "p.csv").write_text("x\n1\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GRADCLI_DEBUG", None)
    done = subprocess.run(
        [sys.executable, "-m", "gradcli", *argv], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert (done.returncode, done.stdout, done.stderr) == (2, "", said)
    assert _only(tmp_path) == ["p.csv"]


# --- a CSV header that reads back -----------------------------------------------------------------------------


def test_a_csv_header_quotes_the_names_that_hold_a_comma_and_reads_back(tmp_path):
    source = tmp_path / "p.csv"
    source.write_text("x\n1\n2\n")
    target = tmp_path / "out.csv"
    result = runner.invoke(
        app, ["eval", "sum(A*x)", "--points", str(source), "--at", "A=[[1,2],[3,4]]", "-o", str(target)]
    )
    assert result.exit_code == 0, result.stderr
    assert target.read_text() == (
        'x,value,"grad_A[0,0]","grad_A[0,1]","grad_A[1,0]","grad_A[1,1]",grad_x\n'
        "1,10.0,1.0,1.0,1.0,1.0,10.0\n2,20.0,2.0,2.0,2.0,2.0,10.0\n"
    )
    again = runner.invoke(app, ["eval", "2*grad_x", "--points", str(target), "--keep-columns", "--json"])
    assert again.exit_code == 2 and "the column 'value' would be written twice" in again.stderr  # every name read
    again = runner.invoke(app, ["eval", "3*grad_x", "--points", str(target)])
    assert (again.exit_code, again.stdout) == (0, "grad_x,value,grad_grad_x\n10.0,30.0,3.0\n10.0,30.0,3.0\n")


def test_an_error_after_a_warned_row_is_said_alone(tmp_path):
    """As eval --at says an error alone: the warning of an early row is dropped when a later row is bad
    (and said, after the rows, when the run ends well)."""
    source = tmp_path / "p.csv"
    source.write_text("x,w\n1e308,1\n1,1\n1\n")
    target = tmp_path / "out.csv"
    target.write_bytes(OLD)
    result = runner.invoke(
        app, ["eval", "(x + w) * (w + 1)", "--points", str(source), "--chunk-rows", "1", "-o", str(target)]
    )
    assert (result.exit_code, result.stderr) == (
        2,
        f"error: --points {source}: row 4 has 1 values, the header names 2\n",
    )
    assert target.read_bytes() == OLD
    source.write_text("x,w\n1e308,1\n1,1\n")
    result = runner.invoke(app, ["eval", "(x + w) * (w + 1)", "--points", str(source), "--chunk-rows", "1"])
    assert (
        result.exit_code == 0 and result.stdout == "x,w,value,grad_x,grad_w\n1e308,1,inf,2.0,1e+308\n1,1,4.0,2.0,4.0\n"
    )
    assert result.stderr == (
        "warning: non-finite value: '(x + w) * (w + 1)' at column 1 gave inf from inputs 1e+308, 2 "
        "at point 1 (x = 1e+308, w = 1.0)\n"
    )


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_as_the_temporary_file_is_made_leaves_no_file(signum, tmp_path, monkeypatch):
    """The signal arrives between mkstemp's open and its return (where a real SIGTERM landed): it is
    held until the temporary file's name is known, then raised, and the file removed."""
    import tempfile

    target = tmp_path / "out.dot"
    target.write_bytes(OLD)
    real = tempfile.mkstemp

    def made(*args, **kwargs):
        found = real(*args, **kwargs)
        handler = signal.getsignal(signum)
        assert callable(handler), "no handler: the signal would kill gradcli and leave the temporary file"
        handler(signum, None)
        return found

    monkeypatch.setattr(tempfile, "mkstemp", made)
    with pytest.raises(KeyboardInterrupt if signum == signal.SIGINT else SystemExit) as raised:
        files.write_atomic(target, b"digraph {}\n")
    assert signum == signal.SIGINT or raised.value.code == 143
    assert target.read_bytes() == OLD and _only(tmp_path) == ["out.dot"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_writing_to_a_device_puts_the_signal_handlers_back():
    """``commit`` of a device written directly (``/dev/null``) returned before it put the handlers back, so
    every later run in the process kept gradcli's SIGTERM handler (found by the whole suite on two workers)."""
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    files.write_atomic("/dev/null", "digraph {}\n")
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
