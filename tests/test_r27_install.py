"""Issue 27: a missing extra's hint says what works for the way gradcli was installed.

``pip install "gradcli[scale]"`` asks the package index, which does not have gradcli when it was
installed from a clone ("No matching distribution"). The hint comes from the installed
distribution's PEP 610 record (``direct_url.json``) and from where the running package lives.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gradcli.errors import install_command, install_hint

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("direct_url", "hint"),
    [
        (None, 'pip install "gradcli[scale]"'),  # from an index: no direct_url.json
        ({"url": "file:///home/u/gradcli", "dir_info": {}}, 'pip install "/home/u/gradcli[scale]"'),
        ({"url": "file:///home/u/gradcli", "dir_info": {"editable": True}}, 'pip install -e "/home/u/gradcli[scale]"'),
        ({"url": "file:///home/u/my%20code", "dir_info": {}}, 'pip install "/home/u/my code[scale]"'),
        ({"url": "file:///tmp/a$b", "dir_info": {}}, "pip install '/tmp/a$b[scale]'"),  # no expansion by the shell
        (
            {"url": "https://github.com/u/gradcli", "vcs_info": {"vcs": "git", "commit_id": "0123abc"}},
            'pip install "gradcli[scale] @ git+https://github.com/u/gradcli@0123abc"',
        ),
        (
            {"url": "https://example.org/gradcli-0.1.0.tar.gz", "archive_info": {}},
            'pip install "gradcli[scale] @ https://example.org/gradcli-0.1.0.tar.gz"',
        ),
    ],
)
def test_the_hint_follows_the_install_record(direct_url, hint, tmp_path):
    site_packages = tmp_path / "site-packages"  # an installed copy: no pyproject.toml beside it
    site_packages.mkdir()
    assert install_command("scale", direct_url, site_packages) == hint


def test_running_from_a_clone_says_the_clones_editable_install(tmp_path):
    assert install_command("plot", None, ROOT) == f'pip install -e "{ROOT}[plot]"'
    other = tmp_path / "other"  # a pyproject.toml of another project is not gradcli's clone
    other.mkdir()
    (other / "pyproject.toml").write_text('[project]\nname = "something"\n')
    assert install_command("plot", None, other) == 'pip install "gradcli[plot]"'


def _plot_without_matplotlib(pythonpath: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\nsys.modules['matplotlib'] = None\n"  # import matplotlib raises ImportError
        "from gradcli.cli import main\nsys.argv = ['gradcli', 'plot', 'x^2', '-o', sys.argv[1]]\nmain()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "p.png")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )


def _installed_copy(tmp_path: Path, direct_url: dict | None) -> Path:
    """gradcli as pip lays it out in site-packages, with its dist-info (found first on sys.path)."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "gradcli", site / "gradcli", ignore=shutil.ignore_patterns("__pycache__"))
    info = site / "gradcli-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gradcli\nVersion: 0.1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    return site


@pytest.mark.parametrize(
    ("direct_url", "command"),
    [
        ({"url": "file:///home/u/gradcli-clone", "dir_info": {}}, 'pip install "/home/u/gradcli-clone[plot]"'),
        (None, 'pip install "gradcli[plot]"'),
    ],
)
def test_the_cli_says_the_command_for_its_install(tmp_path, direct_url, command):
    done = _plot_without_matplotlib(_installed_copy(tmp_path, direct_url), tmp_path)
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr == f"error: gradcli plot needs matplotlib: {command}\n"


def test_the_cli_run_from_this_clone_says_its_editable_install(tmp_path):
    done = _plot_without_matplotlib(ROOT, tmp_path)
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr == f'error: gradcli plot needs matplotlib: pip install -e "{ROOT}[plot]"\n'
    assert install_hint("plot") == f'pip install -e "{ROOT}[plot]"'  # this process runs from the clone too
