"""The README's lint command passes on a fresh install (issue 14): newer ruff formats Markdown code
blocks, so the Markdown files are excluded in pyproject's [tool.ruff]."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason="ruff is not installed")


def test_the_readme_names_the_lint_command():
    assert "ruff check . && ruff format --check ." in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("command", [["check", "."], ["format", "--check", "."]])
def test_the_lint_command_passes(command):
    done = subprocess.run([sys.executable, "-m", "ruff", *command], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
