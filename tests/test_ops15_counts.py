"""How many language functions and primitives there are (issue 15's closing note quotes the figures):
`python -m gradcli.lang.catalog --count`, and this test with -s, print them."""

from __future__ import annotations

import subprocess
import sys

from gradcli.lang import catalog
from gradcli.lang.functions import FUNCTIONS
from gradcli.ops import PRIMITIVES

# main at 7ea06a1, before issue 15's functions
BEFORE = (48, 66)


def counts() -> tuple[int, int]:
    """(language functions, primitives)."""
    return len(FUNCTIONS), len(PRIMITIVES)


def test_the_counts_are_those_of_the_table_and_have_grown(capsys):
    functions, primitives = counts()
    assert catalog.total() == (functions, primitives)
    assert functions > BEFORE[0] and primitives > BEFORE[1]
    with capsys.disabled():
        print(f"\nlanguage functions: {BEFORE[0]} -> {functions}; primitives: {BEFORE[1]} -> {primitives}")


def test_the_count_command_prints_them():
    done = subprocess.run(
        [sys.executable, "-m", "gradcli.lang.catalog", "--count"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout == "{} language functions, {} primitives\n".format(*counts())


def test_the_readme_quotes_the_number_of_functions():
    assert f"{counts()[0]} functions; `gradcli ops NAME`" in catalog.README.read_text(encoding="utf-8")
