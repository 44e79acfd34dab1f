"""Issue 13, pictures: Graphviz's dot runs with a time limit, never outlives gradcli, and what it
says comes out as one gradcli warning; large graphs are laid out fast."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app

runner = CliRunner()
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
posix_only = pytest.mark.skipif(os.name != "posix", reason="a fake dot is a shell script")


def run(*args: str):
    result = runner.invoke(app, expression_after_dashes(list(args)))
    assert "Traceback" not in result.stdout + result.stderr
    return result


def fake_dot(folder: Path, body: str) -> Path:
    """A ``dot`` on PATH that runs ``body`` (sh), recording its pid in folder/dot.pid."""
    folder.mkdir(exist_ok=True)
    script = folder / "dot"
    script.write_text(f'#!/bin/sh\necho $$ > "{folder}/dot.pid"\n{body}\n')
    script.chmod(0o755)
    return folder


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its (dead) parent's reaper counts as ended
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return True


def wait_for(predicate, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@posix_only
def test_a_slow_dot_is_stopped_at_the_time_limit(monkeypatch, tmp_path):
    bin_dir = fake_dot(tmp_path / "bin", "exec sleep 60")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    started = time.monotonic()
    result = run("graph", "x^2 + x", "--at", "x=1", "-o", str(tmp_path / "g.svg"), "--layout-timeout", "0.5")
    assert time.monotonic() - started < 20
    assert result.exit_code == 2
    assert result.stderr == (
        "error: Graphviz's dot did not finish laying out 4 nodes within 0.5 s (--layout-timeout): "
        "show fewer with --max-nodes, allow more time with --layout-timeout, "
        "or write --format dot, text or json, which need no layout\n"
    )
    pid = int((bin_dir / "dot.pid").read_text())
    assert wait_for(lambda: not alive(pid)), "dot was left running"
    assert not (tmp_path / "g.svg").exists()


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_layout_timeout_must_be_positive_and_finite(value):
    result = run("graph", "x^2", "--at", "x=1", "--format", "text", "--layout-timeout", value)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --layout-timeout must be a finite number of seconds > 0")


@posix_only
def test_graphviz_messages_become_one_gradcli_warning(monkeypatch, tmp_path):
    bin_dir = fake_dot(
        tmp_path / "bin",
        "cat > /dev/null\n"
        "echo 'Warning: graph is too large for cairo-renderer bitmaps. Scaling by 0.416 to fit' >&2\n"
        "echo 'Warning: something else' >&2\n"
        "printf 'PNGDATA'",
    )
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    out = tmp_path / "g.png"
    result = run("graph", "x^2", "--at", "x=1", "-o", str(out))
    assert result.exit_code == 0
    assert out.read_bytes() == b"PNGDATA"
    lines = result.stderr.splitlines()
    assert lines[0] == (
        "warning: the picture is too large for a Graphviz bitmap: drawn at 0.42 of its size "
        "(write .svg or .pdf for full size, or show fewer nodes with --max-nodes) (and 1 more message from dot)"
    )
    assert lines[1].startswith("wrote ") and len(lines) == 2


@posix_only
def test_other_graphviz_messages_are_said_as_ours_and_escaped(monkeypatch, tmp_path):
    bin_dir = fake_dot(tmp_path / "bin", "cat > /dev/null\nprintf 'Error: bad \\033[31mthing\\n' >&2\nexit 1")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    result = run("graph", "x^2", "--at", "x=1", "-o", str(tmp_path / "g.svg"))
    assert result.exit_code == 2
    assert result.stderr == "error: Graphviz's dot could not draw the graph: Graphviz: bad \\x1b[31mthing\n"


def _gradcli_with_slow_dot(tmp_path: Path) -> tuple[subprocess.Popen, int]:
    bin_dir = fake_dot(tmp_path / "bin", "exec sleep 60")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    child = subprocess.Popen(
        [sys.executable, "-m", "gradcli", "graph", "x^2", "--at", "x=1", "-o", str(tmp_path / "g.svg")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    pid_file = bin_dir / "dot.pid"
    assert wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 60), "dot never started"
    return child, int(pid_file.read_text())


@posix_only
@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGINT, 130), (signal.SIGKILL, -signal.SIGKILL)]
)
def test_dot_ends_with_gradcli(tmp_path, signum, code):
    child, dot_pid = _gradcli_with_slow_dot(tmp_path)
    try:
        assert alive(dot_pid)
        child.send_signal(signum)
        child.wait(timeout=30)
        assert child.returncode == code
        assert wait_for(lambda: not alive(dot_pid)), "dot outlived gradcli"
        if signum == signal.SIGINT:
            assert child.stderr.read().decode() == "interrupted\n"
    finally:
        if child.poll() is None:
            child.kill()
        if alive(dot_pid):
            os.kill(dot_pid, signal.SIGKILL)


def sum_of_powers(n: int) -> str:
    return "+".join(f"x^{i}" for i in range(n))


@needs_dot
def test_the_pictures_that_took_minutes_are_drawn_within_the_limit(tmp_path):
    """Before: an 80-term sum took 17-30 s in dot, 150 terms over 120 s (nslimit and straight edges)."""
    for n in (80, 300):
        out = tmp_path / f"s{n}.svg"
        result = run("graph", sum_of_powers(n), "--at", "x=0.5", "-o", str(out), "--layout-timeout", "60")
        assert result.exit_code == 0, result.stderr
        assert out.read_bytes().lstrip().startswith(b"<?xml")


def test_large_pictures_get_layout_limits():
    small = run("graph", "x^2 + x", "--at", "x=1", "--format", "dot").stdout
    # (a chain whose steps repeat with period 5, too long to be a group: a sum of powers is drawn
    # as its groups since issue 17)
    chain = "; ".join(["h0 = a"] + [f"h{i + 1} = h{i}*{'abcde'[i % 5]} + 1" for i in range(40)])
    large = run("graph", chain, "--at", "a=0.5,b=0.5,c=0.5,d=0.5,e=0.5", "--format", "dot").stdout
    assert "nslimit=2" in small and "nslimit1=2" in small and "splines" not in small
    assert "nslimit=2" in large and "splines=line" in large
