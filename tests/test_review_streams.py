"""Issue 13 (review): a standard error that cannot be written (``2>/dev/full``) keeps the
documented exit code; before, the failed write ended Python with code 1 ("check failed")."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")


def gradcli(*args: str) -> subprocess.CompletedProcess:
    with open("/dev/full", "w") as full:
        return subprocess.run(
            [sys.executable, "-m", "gradcli", *args],
            stdout=subprocess.PIPE,
            stderr=full,
            text=True,
            timeout=120,
        )


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["eval", "x +"], 2),  # a syntax error: the message is lost, the code is not
        (["eval", "log(x)", "--at", "x=0"], 0),  # a warning that cannot be said
        (["check", "x", "--at", "x=1", "--expect", "x=2"], 1),
        (["check", "x", "--at", "x=1"], 0),
        (["eval", "--no-such-option"], 2),
    ],
)
def test_full_stderr_keeps_the_exit_code(args: list[str], code: int) -> None:
    assert gradcli(*args).returncode == code


def test_full_stderr_still_prints_the_result() -> None:
    done = gradcli("eval", "log(x)", "--at", "x=2")
    assert done.returncode == 0
    assert done.stdout.splitlines()[0] == "value = 0.6931471805599453"
