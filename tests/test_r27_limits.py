"""Issue 27: the first round's contract on long programs, restored.

The first round accepted a 1,000,001-character ``x+x+...`` given with ``-f`` and a program of 20,000
statements (557,791 characters); round 13's 500,000-character limit refused both. Programs are now
limited by what they would cost: an absurd size (over ``MAX_CHARACTERS``) or more memory than is
available, each refused before any work in one line that names the size. The hint "use --points"
belongs to a long ``--at`` list of numbers only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from gradcli.cli.app import app
from gradcli.lang.lexer import MAX_CHARACTERS

runner = CliRunner()


def gradcli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI end to end, in its own process (as a user runs it)."""
    environment = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "gradcli", *args], capture_output=True, text=True, timeout=300, env=environment
    )


def one_error(done: subprocess.CompletedProcess[str], *parts: str) -> str:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for part in parts:
        assert part in lines[0]
    assert "Traceback" not in done.stderr
    return lines[0]


def test_the_first_rounds_million_character_sum_is_read_from_a_file(tmp_path):
    source = tmp_path / "sum.txt"
    source.write_text("+".join(["x"] * 500_001))
    assert source.stat().st_size == 1_000_001
    done = gradcli("eval", "-f", str(source), "--at", "x=1.5")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "value = 750001.5\nd/dx  = 500001\n"


def test_the_first_rounds_twenty_thousand_statements_give_the_closed_form(tmp_path):
    lines = ["a0 = x"] + [f"a{i} = a{i - 1} * 1.0001 + 0" for i in range(1, 20_001)]
    source = tmp_path / "program.txt"
    source.write_text("\n".join(lines) + "\n")
    assert source.stat().st_size == 557_791
    done = gradcli("eval", "-f", str(source), "--at", "x=2", "--json")
    assert (done.returncode, done.stderr) == (0, "")
    result = json.loads(done.stdout)
    # a_i = a_{i-1} * 1.0001, a_0 = x: a_20000 = x * 1.0001^20000, d/dx = 1.0001^20000 (rounding of
    # 20,000 products: relative 20,000 * 2^-53 at most)
    assert result["value"] == pytest.approx(2 * 1.0001**20_000, rel=1e-11)
    assert result["gradient"]["x"] == pytest.approx(1.0001**20_000, rel=1e-11)
    assert result["gradient"]["x"] == pytest.approx(7.388317279514, rel=1e-12)


def test_ten_megabytes_of_generated_code_are_read_in_linear_time(tmp_path):
    """10 MB of a generated sum of 17-digit coefficients (what real generated code looks like): measured
    1.4-3.4 s end to end on the 2-core machine (idle to loaded), 0.19 GB; ``x+x+...`` of 10 MB (a token
    a character) takes 8 s. The bound below only catches a quadratic (that would take hours)."""
    import random

    rng = random.Random(27)
    coefficients = [rng.uniform(-1, 1) for _ in range(470_000)]
    text = "+".join(f"{c!r}*x" for c in coefficients)
    assert 10_000_000 <= len(text) < MAX_CHARACTERS
    source = tmp_path / "generated.txt"
    source.write_text(text)
    start = time.perf_counter()
    done = gradcli("eval", "-f", str(source), "--at", "x=3", "--json")
    elapsed = time.perf_counter() - start
    assert (done.returncode, done.stderr) == (0, "")
    result = json.loads(done.stdout)
    value = 0.0
    for c in coefficients:  # left to right, as the sum is read
        value += c * 3.0
    assert result["value"] == value
    assert result["gradient"]["x"] == pytest.approx(sum(coefficients), rel=1e-9, abs=1e-9)
    assert elapsed < 60, f"10 MB took {elapsed:.1f} s"


def test_a_program_that_would_exhaust_memory_is_refused_with_its_size(tmp_path):
    source = tmp_path / "sum.txt"
    source.write_text("+".join(["x"] * 1_500_001))  # 3,000,001 characters: 0.3 GB on the flat road
    done = gradcli("eval", "-f", str(source), "--at", "x=1", env={"GRADCLI_MAX_MEMORY": "200M"})
    line = one_error(done, "3,000,001 characters long", "more than GRADCLI_MAX_MEMORY (0.2 GB)")
    assert "--points" not in line
    # on the syntax tree's road (a statement: no flat road) the tokens are counted
    source.write_text("y = " + "+".join(["x"] * 1_500_001))
    done = gradcli("eval", "-f", str(source), "--at", "x=1", env={"GRADCLI_MAX_MEMORY": "400M"})
    one_error(done, "3,000,005 characters long, 3,000,003 tokens", "needs about 0.9 GB of memory")


def test_an_absurd_size_is_refused_before_any_work(tmp_path):
    source = tmp_path / "huge.txt"
    source.write_text("x+" * (MAX_CHARACTERS // 2) + "x")
    start = time.perf_counter()
    done = gradcli("eval", "-f", str(source), "--at", "x=1")
    line = one_error(done, f"is {MAX_CHARACTERS + 1:,} characters long, more than the limit of {MAX_CHARACTERS:,}")
    assert "--points" not in line
    assert time.perf_counter() - start < 30  # refused before the text is split (reading it takes 0.3 s)


def test_a_file_over_the_byte_limit_says_its_size(tmp_path):
    source = tmp_path / "huge.bin"
    with open(source, "wb") as out:
        out.truncate(4 * MAX_CHARACTERS + 10)  # sparse: nothing is written or read
    done = gradcli("eval", "-f", str(source), "--at", "x=1")
    one_error(done, f"longer than the limit of {MAX_CHARACTERS:,} characters (it is {4 * MAX_CHARACTERS + 10:,} bytes)")


def test_the_points_hint_goes_with_a_long_list_of_numbers_only(monkeypatch):
    from gradcli.lang import values

    monkeypatch.setattr(values, "MAX_CHARACTERS", 1_000)  # a command line holds no 20 MB argument
    value = "[" + ",".join(["1"] * 600) + "]"
    result = runner.invoke(app, ["eval", "x", "--at", f"x={value}"])
    assert result.exit_code == 2
    assert result.stderr == (
        "error: --at x is 1,201 characters long, more than the limit of 1,000 (for one large input, read it from a "
        "file with NAME=@FILE.npy (or .csv, .txt, .pt); for many points, use --points FILE.csv)\n"
    )
