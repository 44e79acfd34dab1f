"""Issue 16: every console example of the README is true.

Each fenced ``console`` block of README.md is read as ``$ COMMAND`` lines, each followed by the
output it shows. Every command runs through a shell (so comments, quotes and ``; echo $?`` work as
a reader's shell runs them) in a fresh temporary folder holding a copy of ``examples/``, with the
installed ``gradcli`` first on PATH, stdout and stderr on pipes (the README shows piped output).
What it prints (stdout, then stderr) must be the block's text exactly, after normalising only what
must vary from run to run (memory addresses, timings). A line ``...`` alone stands for any
number of lines the README leaves out. The exit code must be a documented one (0, 1, 2, 3); a
README that wants to show it writes ``$ gradcli ...; echo $?``.

When an example fails, the message shows the exact output to paste into README.md.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from frameworks import need

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BIN = Path(sys.executable).parent  # the venv's bin: the installed ``gradcli`` console script
DOCUMENTED_EXIT_CODES = (0, 1, 2, 3)

#: what may differ between runs, and nothing else: (pattern, replacement)
NORMALISE = [
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "0x..."),  # object addresses in a repr
    (re.compile(r"\b\d+(?:\.\d+)? ?(?:ms|s)\b(?= elapsed| taken)"), "<time>"),  # a duration said in passing
    (re.compile(r"\b\d+\.\d+ s$"), "<time>"),  # check --cases: each case's time, and the summary's
]


@dataclass
class Example:
    line: int  # of the ``$`` line in README.md, 1-based
    command: str
    expected: list[str]
    block: list[Example] = field(default_factory=list)  # the examples before it in its console block

    def makers(self) -> list[tuple[str, Example]]:
        """The files this example reads that an earlier example of its block writes (``-o FILE``),
        with that example: under pytest-xdist the two may run in different workers' folders."""
        made = [(m.group(1), e) for e in self.block for m in [re.search(r"-o (\S+)", e.command)] if m]
        return [(name, e) for name, e in made if re.search(rf"(?<![\w/.]){re.escape(name)}\b", self.command)]

    def __str__(self) -> str:
        return f"README.md:{self.line}: $ {self.command}"


def console_examples(text: str) -> list[Example]:
    """The ``$ command`` lines of every ```` ```console ```` block, each with the lines under it."""
    examples: list[Example] = []
    inside = False
    current: Example | None = None
    block: list[Example] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not inside:
            inside = line.strip() == "```console"
            continue
        if line.strip() == "```":
            inside, current, block = False, None, []
            continue
        if line.startswith("$ "):
            current = Example(number, line[2:].strip(), [], list(block))
            examples.append(current)
            block.append(current)
        elif current is not None:
            current.expected.append(line)
        else:
            raise AssertionError(f"README.md:{number}: output before any '$ command' line in a console block")
    for example in examples:
        while example.expected and not example.expected[-1].strip():
            example.expected.pop()  # the blank line that separates examples
    return examples


EXAMPLES = console_examples(README.read_text(encoding="utf-8"))


def normalised(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        for pattern, replacement in NORMALISE:
            line = pattern.sub(replacement, line)
        out.append(line.rstrip())
    return out


def matches(expected: list[str], actual: list[str]) -> bool:
    """``expected`` equals ``actual``, where a line ``...`` alone stands for any run of lines."""
    if not expected:
        return not actual
    head, *rest = expected
    if head.strip() == "...":
        return any(matches(rest, actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and actual[0] == head and matches(rest, actual[1:])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("readme")
    shutil.copytree(ROOT / "examples", folder / "examples")
    return folder


def run(command: str, folder: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "80"}
    for name in ("GRADCLI_DEBUG", "NO_COLOR", "FORCE_COLOR", "PYTHONIOENCODING"):
        env.pop(name, None)
    return subprocess.run(
        ["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True, timeout=300,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_the_readme_has_console_examples():
    assert len(EXAMPLES) >= 15
    assert all(e.command.startswith("gradcli ") for e in EXAMPLES), [str(e) for e in EXAMPLES]
    assert shutil.which("gradcli", path=str(BIN)), "gradcli is not installed in this Python's environment"


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"line{e.line}" for e in EXAMPLES])
def test_readme_example(example: Example, workdir: Path):
    for framework in ("torch", "jax"):  # an example of the PyTorch or JAX road needs that framework (CI has both)
        if f"examples/{framework}/" in example.command:
            need(framework)
    for name, maker in example.makers():
        if not (workdir / name).exists():
            run(maker.command, workdir)
    done = run(example.command, workdir)
    printed = (done.stdout + done.stderr).splitlines()
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode in DOCUMENTED_EXIT_CODES, f"{example}: exit code {done.returncode}\n{done.stderr}"
    expected, actual = normalised(example.expected), normalised(printed)
    if not matches(expected, actual):
        shown = "\n".join(printed)
        pytest.fail(
            f"{example}\n"
            f"printed (exit code {done.returncode}), exactly:\n{shown}\n"
            f"README.md shows:\n" + "\n".join(example.expected) + "\n"
            f"hint: if gradcli's new output is right, paste the lines above into README.md under line {example.line}",
            pytrace=False,
        )


#: the exit-code table's rows: | code | when | `gradcli ...` [without Graphviz] → `what it says[ ...]` |
TABLE_ROW = re.compile(r"^\| (\d+) \|.*\| `(gradcli [^`]*)`( without Graphviz)? → `([^`]*)` \|$", re.MULTILINE)
TABLE = TABLE_ROW.findall(README.read_text(encoding="utf-8"))


def test_the_exit_code_table_has_an_example_for_each_code_but_70():
    assert sorted(int(code) for code, *_ in TABLE) == [0, 1, 2, 3]


@pytest.mark.parametrize("code,command,no_graphviz,said", TABLE, ids=[f"exit{row[0]}" for row in TABLE])
def test_exit_code_table_example(code: str, command: str, no_graphviz: str, said: str, workdir: Path):
    """Each example of the exit-code table exits with its row's code and says what the row quotes
    (up to the row's closing '...')."""
    if no_graphviz:  # the PATH a machine without Graphviz has: gradcli's own folder and no dot
        env = {**os.environ, "PATH": str(BIN)}
        env.pop("GRADCLI_DEBUG", None)
        done = subprocess.run(
            ["/bin/bash", "-c", command], cwd=workdir, env=env, capture_output=True, text=True, timeout=300
        )
    else:
        done = run(command, workdir)
    start = said.removesuffix("...").rstrip()
    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode == int(code), f"README.md's exit-code table: `{command}` exits {done.returncode}, not {code}"
    assert any(line.startswith(start) for line in lines), (
        f"README.md's exit-code table: `{command}` printed, exactly:\n{done.stdout}{done.stderr}"
        f"hint: the row quotes `{said}`; quote one of the lines above instead"
    )


def test_the_harness_reads_a_block_and_its_ellipsis():
    text = "intro\n```console\n$ gradcli a   # note\nx = 1\n\n$ gradcli b; echo $?\n...\n2\n```\n$ not this\n"
    found = console_examples(text)
    assert [(e.line, e.command, e.expected) for e in found] == [
        (3, "gradcli a   # note", ["x = 1"]),
        (6, "gradcli b; echo $?", ["...", "2"]),
    ]
    assert matches(["...", "2"], ["a", "b", "2"]) and matches(["...", "2"], ["2"])
    assert not matches(["...", "2"], ["2", "3"]) and not matches(["x = 1"], ["x = 1", "extra"])
    assert normalised(["<MulBackward0 object at 0x7f3a2b1c0d90>"]) == ["<MulBackward0 object at 0x...>"]
