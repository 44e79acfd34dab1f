"""A real model's graph, light (issue 35): ResNet-18's page, JSON and picture, time and memory.

    python benchmarks/light_graphs.py                  # this checkout
    python benchmarks/light_graphs.py --root ../main   # another checkout of gradcli (before/after)
    python benchmarks/light_graphs.py --size 224       # the input's side (default 64: 1x3x64x64)

Each case runs in a process of its own (peak memory is that process's ``ru_maxrss``, torch
included; "RSS before" is the process after importing torch and building the model, before
gradcli records anything), one thread for every library. The model is benchmarks/resnet18.py, a
faithful ResNet-18 (torchvision is not installed here), random weights, the sum of its logits as
the output. Cases:

- ``json``: record + graph model (``gc.render.graph(f, x)``), then the JSON document (``to_dict``
  and ``json.dumps``): seconds and bytes;
- ``page``: the same model, then the page (``View.html()``): seconds, bytes, dot runs;
- ``page+png``: the page and the PNG of one model: dot runs and their seconds (the layout is
  computed once and reused where the checkout does so);
- ``chain``: no torch: a 100-step Horner chain of gradcli's own (~400 nodes, ``max_nodes="all"``),
  its page, PNG, SVG and PDF: where layout dominates Graphviz's time.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
CASES = ("json", "page", "page+png", "chain")


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _count_dot() -> dict[str, float]:
    """Count (and time) every run of Graphviz, whichever function of gradcli starts it."""
    import subprocess as sp

    seen = {"runs": 0, "layouts": 0, "seconds": 0.0}
    original = sp.Popen.communicate

    def communicate(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            program = os.path.basename(str(self.args[0]))
            if program in ("dot", "neato"):
                seen["runs"] += 1
                seen["layouts"] += program == "dot"  # (neato -n2 draws a laid-out graph: no layout)
                seen["seconds"] += time.perf_counter() - start

    sp.Popen.communicate = communicate  # type: ignore[method-assign]
    return seen


def chain(folder: Path) -> dict[str, float]:
    """A Horner chain's page, PNG, SVG and PDF: seconds and Graphviz runs."""
    import gradcli as gc

    x = gc.tensor(0.5, requires_grad=True, name="x")
    with gc.render.recording() as trace:
        h = x
        for k in range(100):
            h = h * x + (k % 7 + 1)
    dot = _count_dot()
    found: dict[str, float] = {"rss_before_mb": _current_rss_mb()}
    start = time.perf_counter()
    view = gc.render.graph(h, trace=trace, max_nodes="all")
    found["model_s"], found["nodes"], found["cpu_s"] = time.perf_counter() - start, len(view.nodes), 0.0
    start = time.perf_counter()
    found["page_bytes"] = len(view.html().encode())
    found["page_s"] = time.perf_counter() - start
    start = time.perf_counter()
    for suffix in ("png", "svg", "pdf"):
        view.save(folder / f"chain.{suffix}")
    found["png_s"] = time.perf_counter() - start
    found["dot_runs"], found["layouts"], found["dot_s"] = dot["runs"], dot["layouts"], dot["seconds"]
    found["peak_rss_mb"] = _rss_mb()
    return found


def worker(case: str, size: int, folder: Path) -> dict[str, float]:
    """One case, in this process: what it measured."""
    if case == "chain":
        return chain(folder)
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    sys.path.insert(0, str(HERE))
    from resnet18 import resnet18

    import gradcli as gc

    model = resnet18()
    image = torch.randn(1, 3, size, size)

    def forward(image: torch.Tensor) -> torch.Tensor:
        return model(image).sum()

    forward(image.clone().requires_grad_(True)).backward()  # torch's own warm-up, outside gradcli's figures
    model.zero_grad(set_to_none=True)
    dot = _count_dot()
    found: dict[str, float] = {"rss_before_mb": _current_rss_mb()}
    cpu = time.process_time()
    start = time.perf_counter()
    view = gc.render.graph(forward, image)
    found["model_s"] = time.perf_counter() - start
    found["nodes"] = len(view.nodes)
    if case == "json":
        start = time.perf_counter()
        text = json.dumps(view.json())
        found["json_s"] = time.perf_counter() - start
        found["json_bytes"] = len(text.encode())
    else:
        start = time.perf_counter()
        page = view.html()
        found["page_s"] = time.perf_counter() - start
        found["page_bytes"] = len(page.encode())
    found["cpu_s"] = time.process_time() - cpu  # (this process: record, model and the page or JSON, not dot)
    if case == "page+png":
        start = time.perf_counter()
        view.save(folder / "resnet18.png")
        found["png_s"] = time.perf_counter() - start
    found["dot_runs"], found["layouts"], found["dot_s"] = dot["runs"], dot["layouts"], dot["seconds"]
    found["peak_rss_mb"] = _rss_mb()
    return found


def run(root: Path, case: str, size: int) -> dict[str, float]:
    """``case`` in a fresh process importing the gradcli of ``root``."""
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, PYTHONPATH=str(root))
        said = subprocess.run(
            [sys.executable, __file__, "--worker", case, "--size", str(size), "--folder", folder],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    if said.returncode != 0:
        raise SystemExit(f"{case} failed:\n{said.stderr[-3000:]}")
    return json.loads(said.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(HERE.parent), help="the gradcli checkout measured (default: this one)")
    parser.add_argument("--size", type=int, default=64, help="the input image's side (default 64)")
    parser.add_argument("--case", action="append", choices=CASES, help="only these cases (repeatable)")
    parser.add_argument("--worker", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.size, Path(args.folder))))
        return
    root = Path(args.root).resolve()
    print(f"ResNet-18, input 1x3x{args.size}x{args.size}, gradcli from {root}")
    print(
        "| case | nodes | record + model | page / JSON | CPU of both | PNG | Graphviz runs: all, layouts (s) | bytes | RSS before | peak RSS |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for case in args.case or CASES:
        r = run(root, case, args.size)
        out = r.get("page_s", r.get("json_s", 0.0))
        size = r.get("page_bytes", r.get("json_bytes", 0))
        png = f"{r['png_s']:.2f} s" if "png_s" in r else ""
        print(f"| {case} | {int(r['nodes'])} | {r['model_s']:.2f} s | {out:.2f} s | {r['cpu_s']:.2f} s | {png} | "
              f"{int(r['dot_runs'])}, {int(r['layouts'])} ({r['dot_s']:.2f} s) | {size / 1e6:.2f} MB | {r['rss_before_mb']:.0f} MB | "
              f"{r['peak_rss_mb']:.0f} MB |")  # fmt: skip


if __name__ == "__main__":
    main()
