"""examples/ci/ around ``check --cases`` (issue 20): the shipped cases pass, the workflow runs them and keeps
the JUnit report, and the pre-commit hook runs the command it names."""

from __future__ import annotations

import re
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradcli.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / "examples" / "ci"


def _yaml(path: Path):
    yaml = pytest.importorskip("yaml", reason="reads the workflow with PyYAML, which is not installed")
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_the_shipped_cases_pass_and_write_a_report(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    report = tmp_path / "report.xml"
    result = CliRunner().invoke(app, ["check", "--cases", "examples/ci/cases.toml", "--junit", str(report)])
    assert result.exit_code == 0, result.stdout + result.stderr
    assert re.fullmatch(r"7 passed, 0 failed, 0 inconclusive, 0 errors in \d+\.\d s", result.stdout.splitlines()[-1])
    suite = ET.parse(report).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("7", "0", "0")


def test_the_bash_loop_is_gone():
    assert not (CI / "check_derivatives.sh").exists() and not (CI / "derivatives.txt").exists()
    for path in [ROOT / "README.md", *CI.iterdir()]:
        text = path.read_text(encoding="utf-8")
        assert "check_derivatives.sh" not in text and "derivatives.txt" not in text, path


def test_the_workflow_runs_the_cases_and_uploads_the_report():
    text = (CI / "github-workflow.yml").read_text(encoding="utf-8")
    run = "gradcli check --cases examples/ci/cases.toml --junit report.xml"
    assert f"- run: {run}\n" in text
    assert "uses: actions/upload-artifact@v4" in text and "uses: mikepenz/action-junit-report@v5" in text
    assert text.count("path: report.xml") == 1 and text.count("report_paths: report.xml") == 1
    try:
        import yaml
    except ImportError:
        return
    steps = yaml.safe_load(text)["jobs"]["check"]["steps"]
    assert [s["run"] for s in steps if "run" in s][-1] == run
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["with"]["path"] == "report.xml" and upload["if"] == "${{ !cancelled() }}"


def test_the_pre_commit_hook_runs_check_cases_on_the_file_its_config_names(monkeypatch):
    text = (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    assert "- id: gradcli-check\n" in text and "  entry: gradcli check --cases\n" in text
    assert "  language: python\n" in text and "  pass_filenames: false" in text
    config = (CI / "pre-commit-config.yaml").read_text(encoding="utf-8")
    assert "- id: gradcli-check" in config
    (args,) = re.findall(r"args: \[([^\]]+)\]", config)
    entry = re.search(r"entry: (.+)", text)[1].strip()
    command = shlex.split(entry) + [a.strip() for a in args.split(",")]  # what pre-commit runs (no file names)
    assert command[:3] == ["gradcli", "check", "--cases"]
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(app, command[1:])
    assert result.exit_code == 0, result.stdout + result.stderr


def test_the_hook_files_are_yaml():
    (hook,) = _yaml(ROOT / ".pre-commit-hooks.yaml")
    assert hook["id"] == "gradcli-check" and hook["language"] == "python" and hook["pass_filenames"] is False
    assert re.search(hook["files"], "cases.toml") and not re.search(hook["files"], "README.md")
    config = _yaml(CI / "pre-commit-config.yaml")
    assert config["repos"][0]["hooks"][0]["args"] == ["examples/ci/cases.toml"]
