"""Issue 16: the README's ``check --blame`` example showed 0.3102105052 where the tool prints
0.1613094627. The tool is right: the numbers follow from blame's documented rule (directions drawn
by ``default_rng(0)`` in evaluation order, each input's at its own scale ``min(|value|, 1)``), and
their ratio is exactly the bug's factor. The README's pair was drawn before directions were scaled
(both of its numbers are the tool's divided by 0.52, the input's scale)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
GRADCLI = Path(sys.executable).with_name("gradcli")
COMMAND = [str(GRADCLI)] if GRADCLI.exists() else [sys.executable, "-m", "gradcli"]


def expected_blame_numbers(x: float, y: float) -> tuple[float, float]:
    """SoftClip's v . backward(u) and the true v . J u, with blame's own directions.

    f = sin(y) * SoftClip(x * y) + y**2 records sin(y) (one input), x * y (two inputs), then
    SoftClip at s = x * y; each node draws u (per differentiable input, times min(|input|, 1))
    then v. The buggy backward is g / (1 + |s|); the derivative is 1 / (1 + |s|)^2."""
    rng = np.random.default_rng(0)
    scale = lambda value: min(abs(value), 1.0)  # noqa: E731
    rng.standard_normal(()) * scale(y), rng.standard_normal(())  # sin(y)
    rng.standard_normal(()) * scale(x), rng.standard_normal(()) * scale(y), rng.standard_normal(())  # x * y
    s = x * y
    u, v = rng.standard_normal(()) * scale(s), rng.standard_normal(())
    return v * u / (1 + abs(s)), v * u / (1 + abs(s)) ** 2


def shown_as(text: str, value: float) -> bool:
    """``text`` is ``value`` rounded to as many significant digits as ``text`` shows (whatever
    precision the number format of the day prints)."""
    digits = len(re.sub(r"[^0-9]", "", text.lower().split("e")[0]).lstrip("0"))
    return float(text) == float(f"{value:.{digits}g}")


def test_the_blame_line_gives_the_numbers_of_its_rule_and_the_readme_shows_them():
    done = subprocess.run(
        [*COMMAND, "check", "examples/check/buggy_function.py:f", "--at", "x=1.3,y=0.4", "--blame"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("blame:"))
    found = re.search(
        r"backward gives (\S+) where finite differences of its forward give (\S+) \(at input 0.52\)", line
    )
    assert found, line
    want_backward, want_numeric = expected_blame_numbers(1.3, 0.4)
    assert shown_as(found[1], want_backward) and shown_as(found[2], want_numeric), line
    assert abs(float(found[1]) / float(found[2]) - 1.52) < 1e-6  # the bug: a factor 1 + |x y| too large
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert line in readme and "0.3102105052" not in readme
