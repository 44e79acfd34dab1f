"""Issue 16: the help of every REGISTERED command (the typer app's registry, not a list kept by
hand) has an example, and the example runs: through the installed ``gradcli``, in a folder with a
copy of ``examples/``, it exits 0 (or the code its help line documents as ``# exit N``)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gradcli.cli.app import command_names

ROOT = Path(__file__).resolve().parent.parent
GRADCLI = Path(sys.executable).with_name("gradcli")
COMMAND = [str(GRADCLI)] if GRADCLI.exists() else [sys.executable, "-m", "gradcli"]
EXAMPLE = re.compile(r"^\s*Example: (gradcli .*?)(?:\s+# exit (\d))?\s*$", re.MULTILINE)


def installed(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}  # no example folded over two lines
    env.pop("GRADCLI_DEBUG", None)
    return subprocess.run(
        [*COMMAND, *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env, stdin=subprocess.DEVNULL
    )


def test_the_registry_has_every_command_of_the_help():
    names = command_names()
    assert names[:7] == ["eval", "diff", "graph", "jacobian", "hessian", "check", "ops"]
    listing = installed(["--help"]).stdout
    for name in names:
        assert re.search(rf"^\s+{re.escape(name)}\s", listing, re.MULTILINE), (name, listing)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("help")
    shutil.copytree(ROOT / "examples", folder / "examples")
    return folder


@pytest.mark.parametrize("name", command_names())
def test_every_command_help_has_an_example_that_runs(name: str, workdir: Path):
    shown = installed([name, "--help"])
    assert shown.returncode == 0, shown.stderr
    found = EXAMPLE.findall(shown.stdout)
    assert found, f"`gradcli {name} --help` has no 'Example: gradcli {name} ...' line:\n{shown.stdout}"
    for text, code in found:
        args = shlex.split(text)
        assert args[:2] == ["gradcli", name], text
        done = installed(args[1:], cwd=workdir)
        assert done.returncode == int(code or 0), f"{text}: exit code {done.returncode}\n{done.stdout}{done.stderr}"
        assert "Traceback" not in done.stderr and done.stdout + done.stderr, text
