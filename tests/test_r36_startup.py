"""Issue 36, part 1 (in a blink): ``gradcli --version`` and the help pages answer without NumPy, typer
or rich, the help pages are typer's own at every width, and ``import gradcli`` loads the engine on
first use of a name (PEP 562) with the package's face unchanged. Timed by
``benchmarks/startup_modes.py --commands``; here what is loaded, printed and returned is checked."""

from __future__ import annotations

import doctest
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

import gradcli
from gradcli.about import VERSION
from gradcli.cli import helprecord, helptext, main
from gradcli.cli.app import app, command_names

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("numpy", "typer", "click", "rich", "gradcli.autograd", "gradcli.lang", "gradcli.cli.app")


def typer_help(page: str) -> str:
    """The page as typer formats it (what ``gradcli help PAGE`` printed through typer), at the
    width of the terminal click measures (COLUMNS)."""
    group = typer.main.get_command(app)
    with group.make_context("gradcli", [], resilient_parsing=True) as top:
        if not page:
            return top.get_help()
        found = group.get_command(top, page)
        with found.make_context(page, ["--help"], parent=top, resilient_parsing=True) as inner:
            return found.get_help(inner)


def loaded_by(*arguments: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """``python -X importtime -m gradcli ARGUMENTS``, and the modules it imported."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gradcli", *arguments],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )  # fmt: skip
    modules = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return done, modules


def test_version_and_help_load_neither_numpy_nor_typer(monkeypatch):
    version, loaded = loaded_by("--version")
    assert (version.returncode, version.stdout) == (0, f"gradcli {VERSION}\n")
    assert "gradcli.cli" in loaded and [m for m in loaded if m.startswith(HEAVY)] == []
    page, loaded = loaded_by("help", "eval")
    monkeypatch.setenv("COLUMNS", "100")
    assert (page.returncode, page.stdout) == (0, typer_help("eval") + "\n")
    assert page.stdout.startswith("Usage: gradcli eval [OPTIONS] [EXPR]\n")
    assert "gradcli.cli.helptext" in loaded and [m for m in loaded if m.startswith(HEAVY)] == []


@pytest.mark.parametrize("columns", [1, 52, 80, 81, 100, 121, 200])
def test_every_help_page_is_typers_at_every_width(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    pages = ["", *command_names()]
    assert len(pages) >= 11 and set(pages) == set(helptext.PAGES)
    for page in pages:
        assert helptext.help_text(page) == typer_help(page), (page, columns)
    width = max(min(columns, 120) - 2, 50)
    assert max(len(line) for line in helptext.help_text("eval").splitlines()) <= width


def test_the_recorded_pages_are_todays():
    """helppages.py is what typer's formatter receives today: a changed option or text fails here."""
    assert helprecord.TARGET.read_text(encoding="utf-8") == helprecord.source(), (
        "the help pages changed: run `python -m gradcli.cli.helprecord` to write gradcli/cli/helppages.py"
    )


@pytest.mark.parametrize(
    ("argv", "page"),
    [([], ""), (["help"], ""), (["--help"], ""), (["-h"], ""), (["help", "eval"], "eval"),
     (["eval", "--help"], "eval"), (["why", "-h"], "why"), (["help", "help"], "help")],
)  # fmt: skip
def test_main_prints_the_page_and_returns(monkeypatch, capsys, argv, page):
    monkeypatch.setenv("COLUMNS", "90")
    monkeypatch.setattr(sys, "argv", ["gradcli", *argv])
    assert helptext.page_asked(argv) == page
    main()  # no SystemExit: exit code 0
    out = capsys.readouterr()
    assert (out.out, out.err) == (typer_help(page) + "\n", "")


@pytest.mark.parametrize(
    ("argv", "code", "said"),
    [(["help", "digg"], 2, "error: no such command 'digg'; did you mean 'diff'?\n"),
     (["help", "eval", "x"], 2, "error: got unexpected extra argument(s) (x)\n"),
     (["--help", "eval"], 0, None)],
)  # fmt: skip
def test_anything_else_goes_to_typer(monkeypatch, capsys, argv, code, said):
    monkeypatch.setenv("COLUMNS", "90")
    monkeypatch.setattr(sys, "argv", ["gradcli", *argv])
    assert helptext.page_asked(argv) is None
    try:
        main()
        ended = 0
    except SystemExit as exc:
        ended = exc.code
    out = capsys.readouterr()
    assert ended == code
    if said is not None:
        assert (out.out, out.err) == ("", said)
    else:  # click's eager --help: gradcli's own page
        assert out.out == typer_help("") + "\n"


def test_an_ascii_output_gets_utf8_as_typer_gives_it(monkeypatch):
    """click writes UTF-8 to a standard output whose encoding is ASCII (its remedy for a C locale):
    the page's f′ and f″ (plot's summary) arrive as typer prints them, not as an encoding error."""
    monkeypatch.setenv("COLUMNS", "90")
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii"))
    monkeypatch.setattr(sys, "argv", ["gradcli", "help"])
    main()
    assert raw.getvalue() == (typer_help("") + "\n").encode("utf-8")
    assert "f′ (and f″)".encode() in raw.getvalue()


def test_shell_completion_is_left_to_click(monkeypatch):
    monkeypatch.setenv("_GRADCLI_COMPLETE", "bash_complete")
    assert helptext.page_asked(["help"]) is None and helptext.page_asked([]) is None


FACE = """
import sys
import gradcli as gc
assert "numpy" not in sys.modules and "gradcli.autograd" not in sys.modules, "eager"
from gradcli import cli, errors
assert "numpy" not in sys.modules, "a submodule loaded the engine"
names = {}
exec("from gradcli import *", names)
x = gc.tensor(2.0, requires_grad=True)
(gc.sin(x) * x + names["tensor"](3.0) * x).backward()
print(round(float(x.grad), 6), sorted(set(names) & {"Function", "einsum", "grad", "no_grad", "sin", "tensor", "render"}))
print(len(gc.__all__), len(set(gc.__all__)), "tensor" in dir(gc), "render" in dir(gc), gc.Function is gc.autograd.Function)
try:
    gc.no_such_name
except AttributeError as exc:
    print(exc)
"""


def test_the_package_loads_the_engine_on_first_use():
    done = subprocess.run([sys.executable, "-c", FACE], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    # d/dx (sin(x) x + 3x) at 2 = cos(2)*2 + sin(2) + 3
    assert lines[0] == "3.077004 ['Function', 'einsum', 'grad', 'no_grad', 'sin', 'tensor']"
    assert lines[1] == f"{len(gradcli.__all__)} {len(gradcli.__all__)} True True True"
    assert lines[2] == "module 'gradcli' has no attribute 'no_such_name'"
    assert {"tensor", "sin", "grad", "Function", "check", "why", "autograd"} <= set(gradcli.__all__)


def test_the_module_docstring_still_runs():
    result = doctest.testmod(gradcli, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 6 and result.failed == 0
