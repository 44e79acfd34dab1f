"""100 cases in one ``gradcli check --cases`` run against the same 100 cases as separate ``gradcli check``
processes (what examples/ci's bash loop did), interleaved round by round, medians.

    python benchmarks/check_cases.py [--cases 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# (expression, point, expected derivatives): cycled, at points moved a little each time
TEMPLATES = [
    ("x^2 * y", {"x": 2.0, "y": 3.0}, {"x": "2*x*y", "y": "x^2"}),
    ("(x + w) * (w + 1)", {"x": 2.0, "w": 1.0}, {"x": "w + 1", "w": "x + 2*w + 1"}),
    ("sin(x) * exp(x)", {"x": 0.5}, {"x": "exp(x) * (sin(x) + cos(x))"}),
    ("log(1 + exp(x))", {"x": -3.0}, {"x": "sigmoid(x)"}),
    ("tanh(a * w)", {"a": 1.5, "w": 0.2}, {"w": "(1 - tanh(a*w)^2) * a"}),
]


def cases(n: int) -> list[tuple[str, str, dict[str, float], dict[str, str]]]:
    found = []
    for i in range(n):
        expr, at, expect = TEMPLATES[i % len(TEMPLATES)]
        point = {k: v + 0.01 * (i // len(TEMPLATES)) for k, v in at.items()}
        found.append((f"case {i + 1}: {expr}", expr, point, expect))
    return found


def toml_text(found: list) -> str:
    blocks = []
    for name, expr, at, expect in found:
        at_text = ", ".join(f"{k} = {v!r}" for k, v in at.items())
        expect_text = ", ".join(f'{k} = "{v}"' for k, v in expect.items())
        blocks.append(
            f'[[case]]\nname = "{name}"\nexpr = "{expr}"\nat = {{ {at_text} }}\nexpect = {{ {expect_text} }}\n'
        )
    return "\n".join(blocks)


def commands(found: list) -> list[list[str]]:
    gradcli = [sys.executable, "-m", "gradcli"]
    out = []
    for _, expr, at, expect in found:
        args = [*gradcli, "check", expr, "--at", ",".join(f"{k}={v!r}" for k, v in at.items())]
        for k, v in expect.items():
            args += ["--expect", f"{k}={v}"]
        out.append(args)
    return out


def timed(calls: list[list[str]]) -> float:
    start = time.perf_counter()
    for args in calls:
        done = subprocess.run(args, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"failed: {shlex.join(args)}\n{done.stdout}{done.stderr}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    found = cases(options.cases)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "cases.toml")
        path.write_text(toml_text(found), encoding="utf-8")
        one = [[sys.executable, "-m", "gradcli", "check", "--cases", str(path)]]
        separate = commands(found)
        times: dict[str, list[float]] = {"one --cases run": [], "separate processes": []}
        for r in range(options.rounds):  # interleaved: the machine's load falls on both alike
            times["one --cases run"].append(timed(one))
            times["separate processes"].append(timed(separate))
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items()), flush=True)
    medians = {k: statistics.median(v) for k, v in times.items()}
    print(f"{options.cases} cases, median of {options.rounds} rounds:")
    for k, v in medians.items():
        print(f"  {k:<20} {v:7.1f} s")
    print(f"  ratio                {medians['separate processes'] / medians['one --cases run']:7.1f} x")


if __name__ == "__main__":
    main()
