"""Issue 13 (review): where the complex step is "not compared" (a norm at 0, not analytic there),
the table still showed its value and counted it in "abs err" (``complex step 1, abs err 1,
rel err 1, ok``), and ``--json`` listed the value as if it were an estimate. Not compared means
not shown: blank in the table, "nan" in JSON (as SymPy's undefined elements are)."""

from __future__ import annotations

import json
import subprocess
import sys


def gradcli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gradcli", *args], capture_output=True, text=True, timeout=120)


def test_the_table_leaves_what_was_not_compared_blank() -> None:
    done = gradcli("check", "norm(v)*x + sum(v)", "--at", "x=1,v=[0,0,0]")
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line.startswith("d/d")}
    # autograd 1, sympy 1 (norm's SymPy counterpart has autograd's 0 at 0 since issue 27), finite
    # differences 1, (complex step blank), abs err 0, rel err 0, ok
    assert rows["d/dv[0]"] == ["d/dv[0]", "1", "1", "1", "0", "0", "ok"]
    assert rows["d/dx"] == ["d/dx", "0", "0", "0", "0", "0", "0", "ok"]
    assert "complex step: not compared at d/dv[0], d/dv[1], d/dv[2]" in done.stdout


def test_json_gives_nan_where_the_complex_step_was_not_compared() -> None:
    done = gradcli("check", "norm(v)*x", "--at", "x=1,v=[0,0,0]", "--json")
    assert done.returncode == 0, done.stderr
    step = json.loads(done.stdout)["checks"]["complex_step"]
    assert step["values"] == {"v": ["nan", "nan", "nan"], "x": 0.0}
    assert step["ok"] is True
