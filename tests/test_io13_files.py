"""Issue 13: output files are written whole or not at all; input is read no further than the limit."""

from __future__ import annotations

import errno
import io
import os
import random
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradcli import files
from gradcli.cli.app import app
from gradcli.errors import UsageError
from gradcli.lang.values import read_bounded

runner = CliRunner()
# The process's own peak: VmHWM (ru_maxrss would carry over pytest's own peak across fork and exec).
PEAK = (
    "def _peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            return int(line.split()[1]) * 1024\n"
)
OLD = "the old content, which must survive\n"


def _fail_after(limit: int):
    """An os.write that writes ``limit`` bytes, then fails as a full disk does."""
    real = os.write
    state = {"written": 0}

    def write(fd, data):
        room = limit - state["written"]
        if room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real(fd, bytes(data[:room]))
        state["written"] += n
        return n

    return write


@pytest.mark.parametrize("name", ["g.dot", "g.json", "g.txt", "g.gv"])
def test_a_full_disk_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch, name):
    target = tmp_path / name
    target.write_text(OLD)
    monkeypatch.setattr(files, "_write", _fail_after(10))
    result = runner.invoke(app, ["graph", "x*y + sin(x)", "--at", "x=1,y=2", "-o", str(target)])
    assert result.exit_code == 2
    assert result.stderr == f"error: cannot write {target}: No space left on device (nothing was changed)\n"
    assert target.read_text() == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_an_interruption_while_writing_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "g.dot"
    target.write_text(OLD)

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(files, "_fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        files.write_atomic(target, "digraph {}\n")
    assert target.read_text() == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["g.dot"]


def test_a_written_file_is_whole_and_keeps_its_permissions(tmp_path):
    target = tmp_path / "g.dot"
    target.write_text(OLD)
    target.chmod(0o640)
    result = runner.invoke(app, ["graph", "x*2", "--at", "x=1", "-o", str(target)])
    assert result.exit_code == 0, result.stderr
    assert target.read_text().startswith("digraph") and target.read_text().endswith("}\n")
    assert target.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["g.dot"]


def test_a_new_file_gets_the_usual_permissions(tmp_path):
    target = tmp_path / "new.json"
    umask = os.umask(0o022)
    try:
        files.write_atomic(target, "{}\n")
    finally:
        os.umask(umask)
    assert target.read_text() == "{}\n"
    assert target.stat().st_mode & 0o777 == 0o644


def test_a_symbolic_link_is_followed_and_stays_a_link(tmp_path):
    real = tmp_path / "real.dot"
    real.write_text(OLD)
    link = tmp_path / "link.dot"
    link.symlink_to(real)
    files.write_atomic(link, "digraph {}\n")
    assert link.is_symlink() and real.read_text() == "digraph {}\n"


def test_a_device_is_written_directly():
    files.write_atomic("/dev/null", "digraph {}\n")  # not replaced by a regular file
    assert Path("/dev/null").is_char_device()


def test_a_directory_or_a_missing_folder_is_refused(tmp_path):
    with pytest.raises(UsageError, match="it is a directory"):
        files.write_atomic(tmp_path, "x")
    with pytest.raises(
        UsageError, match=r"cannot write .*/no/g.dot: No such file or directory \(nothing was changed\)"
    ):
        files.write_atomic(tmp_path / "no" / "g.dot", "x")


def test_a_writable_file_in_a_closed_folder_is_still_written(tmp_path, monkeypatch):
    import tempfile

    target = tmp_path / "g.dot"
    target.write_text(OLD)

    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    files.write_atomic(target, "digraph {}\n")
    assert target.read_text() == "digraph {}\n"
    with pytest.raises(UsageError, match="Permission denied"):
        files.write_atomic(tmp_path / "new.dot", "digraph {}\n")


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB tmpfs, where the test may mount one (root in a sandbox); skipped otherwise."""
    if shutil.which("mount") is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    folder = tmp_path / f"tiny-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def test_a_really_full_disk_keeps_the_old_file(tiny_disk):
    target = tiny_disk / "g.dot"
    target.write_text(OLD)
    # a DOT text far over the room left (steps of random shapes: nothing repeats to draw as one group)
    rng = random.Random(0)
    forms = ["h{i}*{v}", "sin(h{i})+{v}", "h{i}-{v}", "exp(h{i}*0.1)*{v}", "h{i}/(1+{v}*{v})", "cos(h{i})*{v}"]
    big = "; ".join(
        ["h0 = x"] + [f"h{i + 1} = " + rng.choice(forms).format(i=i, v=rng.choice("xyz")) for i in range(300)]
    )
    result = runner.invoke(app, ["graph", big, "--at", "x=0.5,y=0.3,z=0.2", "--max-nodes", "2000", "-o", str(target)])
    assert result.exit_code == 2
    assert result.stderr == f"error: cannot write {target}: No space left on device (nothing was changed)\n"
    assert target.read_text() == OLD
    assert [p.name for p in tiny_disk.iterdir()] == ["g.dot"]
    small = runner.invoke(app, ["graph", "x*2", "--at", "x=1", "-o", str(target)])  # room for a small one
    assert small.exit_code == 0 and target.read_text().startswith("digraph")


# --- reading no further than the limit -------------------------------------------------------------


class _Endless(io.RawIOBase):
    """A stream that never ends, counting what was asked of it."""

    def __init__(self) -> None:
        self.given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        buffer[:] = b"x" * len(buffer)
        self.given += len(buffer)
        return len(buffer)


def test_the_bounded_reader_reads_the_limit_plus_one_byte():
    stream = _Endless()
    with pytest.raises(UsageError, match="standard input is longer than the limit of 1,000 bytes"):
        read_bounded(stream, "standard input", 1000)
    assert stream.given == 1001


def test_the_bounded_reader_returns_what_fits(tmp_path):
    path = tmp_path / "p.txt"
    path.write_bytes(b"\xef\xbb\xbfx+1")
    assert read_bounded(str(path), "-f p.txt", 6) == b"\xef\xbb\xbfx+1"
    with pytest.raises(UsageError, match="too long!"):
        read_bounded(str(path), "-f p.txt", 5, "too long!")
    assert read_bounded(str(path), "-f p.txt", None) == b"\xef\xbb\xbfx+1"
    with pytest.raises(UsageError, match="-f nope: no such file"):
        read_bounded(str(tmp_path / "nope"), "-f nope", 10)
    with pytest.raises(UsageError, match="is a directory"):
        read_bounded(str(tmp_path), "-f dir", 10)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_dev_zero_is_refused_in_bounded_memory():
    code = (
        PEAK + "from gradcli.lang.program import load\n"
        "from gradcli.errors import UsageError\n"
        "try:\n    load(None, '/dev/zero')\nexcept UsageError as e:\n    print(e.message)\n"
        "print(_peak() // 1024)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    message, peak_kb = done.stdout.splitlines()
    assert message.startswith("/dev/zero is longer than the limit of 20,000,000 characters")
    assert int(peak_kb) < 400_000  # reading it whole took 3.7 GB


def test_stdin_is_read_no_further_than_the_limit(monkeypatch):
    from gradcli.lang import program

    stream = _Endless()
    monkeypatch.setattr(program.sys, "stdin", io.TextIOWrapper(io.BufferedReader(stream)))
    with pytest.raises(UsageError, match=r"<stdin> is longer than the limit of 20,000,000 characters"):
        program.read_stdin()
    assert stream.given < 4 * 20_000_000 + 100_000  # the limit at 4 bytes a character, and a buffer
