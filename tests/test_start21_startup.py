"""Issue 21 (start-up): ``gradcli eval`` of a plain expression loads only what it needs, and the
console script ends without the interpreter's teardown. Not timed: what is loaded is checked."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

INSTALLED = Path(sys.executable).with_name("gradcli")
GRADCLI = [str(INSTALLED)] if INSTALLED.exists() else [shutil.which("gradcli") or "gradcli"]

#: run in a fresh interpreter: the modules ``gradcli eval`` loads beyond NumPy's
LOADED = """
import json, sys
import numpy
before = set(sys.modules)
sys.argv = ["gradcli", "eval", "(x+w)*(w+1)", "--at", "x=2,w=1"]
from gradcli.cli import main
try:
    main()
except SystemExit:
    pass
from gradcli.lang.functions import FUNCTIONS
sys.stderr.write(json.dumps({"modules": sorted(set(sys.modules) - before), "table": dict.__len__(FUNCTIONS) > 0}))
"""

#: what a plain expression never needs: other commands, pictures, SymPy, typer, threads, paths, Jacobians
NOT_LOADED = [
    "typer", "click", "rich", "sympy", "graphviz", "gradcli.render", "gradcli.check", "gradcli.cli.app",
    "gradcli.cli.progress", "gradcli.lang.symbolic", "gradcli.lang.catalog", "gradcli.lang.compute.points",
    "gradcli.testing", "gradcli.autograd.replay", "pathlib", "threading", "importlib.util", "tempfile",
    "gradcli.functional", "gradcli.autograd.functional", "gradcli.autograd.function", "gradcli.autograd.forward",
    "gradcli.autograd.contract", "gradcli.autograd.linalg",
    "torch", "jax", "gradcli.lang.frameworks",  # a framework is imported only when a function of its is met
    "dataclasses",  # a dataclass compiles its methods with exec when defined: ~1 ms a class (gradcli/records.py)
]  # fmt: skip


def loaded() -> dict:
    result = subprocess.run([sys.executable, "-c", LOADED], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "value = 6\nd/dx  = 2\nd/dw  = 5\n"
    return json.loads(result.stderr)


def test_eval_of_a_plain_expression_loads_nothing_it_does_not_use():
    found = loaded()
    modules = found["modules"]
    assert "gradcli.lang.evaluate" in modules  # the check sees what eval loads
    heavy = [m for m in modules for name in NOT_LOADED if m == name or m.startswith(name + ".")]
    assert heavy == []
    assert found["table"] is False  # the function table is built when a function is called


def test_the_function_table_is_built_on_first_use():
    from gradcli.lang.functions import FUNCTIONS, _build, _Built, _Table

    full = _build()
    reads = {  # names, not entries: each build makes its own functions
        "in": lambda t: ("sin" in t, "nosuch" in t),
        "get": lambda t: (t.get("sin").name, t.get("nosuch")),
        "[]": lambda t: t["sin"].name,
        "iter": lambda t: list(t),
        "len": len,
        "keys": lambda t: list(t.keys()),
        "values": lambda t: [f.name for f in t.values()],
        "items": lambda t: [(k, f.name) for k, f in t.items()],
        "dict()": lambda t: list(dict(t)),
        "**": lambda t: list({**t}),
    }
    expected = {name: read(full) for name, read in reads.items()}
    for name, read in reads.items():
        table = _Table()
        assert read(table) == expected[name], name  # the first read of any kind sees the whole table
        assert type(table) is _Built
    assert expected["in"] == (True, False) and expected["get"][1] is None and expected["len"] > 80
    assert list(FUNCTIONS) == list(full)


def test_the_command_ends_quickly_with_its_output_and_exit_code():
    ok = subprocess.run([*GRADCLI, "eval", "(x+w)*(w+1)", "--at", "x=2,w=1", "--json"], capture_output=True, text=True)
    assert (ok.returncode, ok.stderr) == (0, "")
    assert json.loads(ok.stdout) == {"value": 6.0, "gradient": {"x": 2.0, "w": 5.0}}
    bad = subprocess.run([*GRADCLI, "eval", "(x+w", "--at", "x=2,w=1"], capture_output=True, text=True)
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr
    warned = subprocess.run([*GRADCLI, "eval", "x*2", "--at", "x=2,q=1"], capture_output=True, text=True)
    assert (warned.returncode, warned.stdout) == (0, "value = 4\nd/dx  = 2\n")
    assert warned.stderr == "warning: --at q is not used by the expression\n"


def test_a_long_output_to_a_pipe_is_complete():
    n = 3000  # a gradient longer than any buffer: flushed before the process ends
    result = subprocess.run(
        [*GRADCLI, "eval", "sum(x*x)", "--at", "x=[" + ",".join(map(str, range(n))) + "]", "--json"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["gradient"]["x"] == [2.0 * k for k in range(n)]


def test_handlers_registered_while_the_command_runs_still_run(tmp_path):
    """The teardown is skipped through an atexit handler registered before the command runs:
    handlers registered later (by the user's code) run first; with the user's Python code loaded
    the process ends as usual."""
    marker = tmp_path / "ran.txt"
    (tmp_path / "f.py").write_text(
        "import atexit\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'w').write('ran'))\n"
        "def f(x):\n    return x * x\n"
    )
    result = subprocess.run([*GRADCLI, "eval", "f.py:f", "--at", "x=3"], capture_output=True, text=True, cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "value = 9\nd/dx  = 6\n", "")
    assert marker.read_text() == "ran"


def test_called_from_other_code_main_returns_and_the_process_ends_as_usual():
    """Only the console script (or python -m gradcli) skips the teardown: called from other code,
    main() returns, what follows it runs, and so do handlers registered before it."""
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        "sys.argv = ['gradcli', 'eval', 'x*3', '--at', 'x=1']\n"
        "from gradcli.cli import main\n"
        "main()\n"
        "print('after')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, "value = 3\nd/dx  = 3\nafter\natexit ran\n")
    module = subprocess.run(
        [sys.executable, "-m", "gradcli", "eval", "x*3", "--at", "x=1"], capture_output=True, text=True, timeout=120
    )
    assert (module.returncode, module.stdout, module.stderr) == (0, "value = 3\nd/dx  = 3\n", "")
