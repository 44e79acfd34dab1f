"""Graph benchmarks (issue 13): building the graph model, and Graphviz laying out pictures.

    python benchmarks/graph_render.py            # model: 2e4 and 2e5 constants; dot: 4 pictures
    python benchmarks/graph_render.py --quick    # smaller model, no pictures

The model must be linear in the graph (2e5 constants took over 120 s when every node scanned
every edge), so the model's time is shown beside the time of computing the same expression.
Pictures run the whole command (`gradcli graph ... -o FILE.svg`, default --max-nodes 200),
each in its own process with the default --layout-timeout (30 s); a picture that hits the
limit prints its error. CPU seconds of the process and its children are shown beside the wall
time, as this shared machine's wall clock depends on the other jobs.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def model_case(n: int) -> tuple[float, float, int]:
    """Seconds to evaluate ``sum([x, 1, 1, ...])`` (n ones) with its gradient, and to build and
    write the model of its whole graph (text view), and the number of nodes."""
    from gradcli.lang.compute import value_and_grad
    from gradcli.lang.program import load
    from gradcli.render import views
    from gradcli.render.build import build, recording

    program = load(f"sum([x,{','.join(['1'] * n)}])", None)
    start = time.perf_counter()
    value_and_grad(program, {"x": 2.0}, ["x"])
    evaluate = time.perf_counter() - start
    start = time.perf_counter()
    with recording() as trace:
        evaluation = program.run({"x": 2.0}, ["x"], record_steps=True)
    model = build(evaluation.outputs, trace=trace, max_nodes=n + 10, free=True)
    views.text(model)
    return evaluate, time.perf_counter() - start, len(model.nodes)


def pictures() -> dict[str, str]:
    powers = {n: "+".join(f"x^{i}" for i in range(n)) for n in (80, 150, 300)}
    horner = "\n".join(["h0 = x", *(f"h{i + 1} = h{i}*x + {i % 7 + 1}" for i in range(3000))])
    return {
        "80-term sum x^0+...+x^79": powers[80],
        "150-term sum": powers[150],
        "300-term sum": powers[300],
        "3,000-step Horner chain": horner,
    }


def picture_case(program: str, folder: Path) -> tuple[float, float, str]:
    source = folder / "program.gc"
    source.write_text(program)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "gradcli", "graph", "-f", str(source), "--at", "x=0.5", "-o", str(folder / "g.svg")],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    print("| graph model of `sum([x,1,1,...])` | evaluate + gradient | build model + text view | nodes |")
    print("|---|---|---|---|")
    for n in (2_000, 20_000) if quick else (20_000, 200_000):
        evaluate, model, nodes = model_case(n)
        print(f"| {n:,} constants | {evaluate:.2f} s | {model:.2f} s | {nodes:,} |", flush=True)
    if quick or shutil.which("dot") is None:
        return
    print()
    print("| picture (`gradcli graph ... -o g.svg`, whole process) | wall | CPU | result |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, program in pictures().items():
            wall, cpu, said = picture_case(program, Path(tmp))
            print(f"| {name} | {wall:.1f} s | {cpu:.1f} s | {said} |", flush=True)
    print(f"\n(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
