"""PyTorch graphs at scale (issue 29): gradcli's picture and page of real models beside torchviz's.

    python benchmarks/framework_pictures.py            # writes examples/torch_*.png, prints the table
    python benchmarks/framework_pictures.py --out DIR  # elsewhere

For a 2-layer nn.TransformerEncoder (d_model 64, 4 heads, 8 tokens) and a small CNN, in one run:
the seconds gradcli takes to record the function and build its graph model (values, gradients,
module boxes), to draw the PNG and to write the page; the page's load time in headless Chromium
(when Selenium and Debian's chromium-driver are there); the PNG's size. Beside them, torchviz's
``make_dot`` of the same output (when torchviz is installed: it is never a dependency of gradcli) and
its PNG's size, so the README can show the two pictures side by side. A 10^4-deep sin loop is drawn
too (torchviz's make_dot recurses, pytorchviz#57). One thread for every library.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import shutil  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "torch"))


def png_size(path: Path) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    return struct.unpack(">II", head[16:24])


def gradcli_case(name: str, function, values: dict, folder: Path) -> dict:
    from gradcli.render.output import write
    from gradcli.render.torch_graph import torch_function_graph

    start = time.perf_counter()
    model = torch_function_graph(function, values, list(values))
    built = time.perf_counter() - start
    start = time.perf_counter()
    png = write(model, folder / f"torch_{name}_gradcli.png", None)
    drawn = time.perf_counter() - start
    start = time.perf_counter()
    page = write(model, folder / f"torch_{name}_gradcli.html", None)
    paged = time.perf_counter() - start
    boxes = len(model.clusters)
    return {"nodes": model.drawn_nodes, "boxes": boxes, "build": built, "png": drawn, "page": paged,
            "size": png_size(png), "html": page, "load": page_load(page)}  # fmt: skip


def page_load(page: Path) -> float | None:
    """Seconds from navigation to the page's load event in headless Chromium, or None without it."""
    if not (shutil.which("chromedriver") and (shutil.which("chromium") or shutil.which("chromium-browser"))):
        return None
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or ""
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        start = time.perf_counter()
        driver.get(page.resolve().as_uri())
        wall = time.perf_counter() - start
        timing = driver.execute_script(
            "const t = performance.timing; return (t.loadEventEnd - t.navigationStart) / 1000;"
        )
        return max(float(timing), 0.0) or wall
    finally:
        driver.quit()


def torchviz_case(name: str, function, values: dict, folder: Path) -> dict | None:
    try:
        from torchviz import make_dot
    except ImportError:
        return None
    import torch

    tensors = {k: torch.as_tensor(v, dtype=torch.float64).requires_grad_(True) for k, v in values.items()}
    start = time.perf_counter()
    try:
        out = function(**tensors)
        module = getattr(sys.modules[function.__module__], "encoder" if name == "transformer" else "cnn", None)
        params = dict(module.named_parameters()) if module is not None else {}
        dot = make_dot(out, params={**params, **tensors})
        dot.format = "png"
        target = dot.render(str(folder / f"torch_{name}_torchviz"), cleanup=True)
    except RecursionError:
        return {"error": "RecursionError"}
    return {"time": time.perf_counter() - start, "size": png_size(Path(target)), "nodes": dot.source.count("[label=")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "examples"), help="folder for the pictures (default: examples/)")
    args = parser.parse_args()
    import numpy as np
    import torch

    torch.set_num_threads(1)
    import models

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    cases = {
        "transformer": (models.transformer, {"tokens": rng.standard_normal((1, 8, 64))}),
        "cnn": (models.convnet, {"image": rng.standard_normal((1, 1, 8, 8))}),
        "deep": (models.deep, {"x": np.float64(0.5)}),
    }
    with tempfile.TemporaryDirectory() as scratch:
        print("| model | gradcli: nodes drawn, module boxes | record + model | PNG | page | page load (Chromium) "
              "| PNG size | torchviz make_dot | its PNG |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|---|")
        for name, (function, values) in cases.items():
            mine = gradcli_case(name, function, values, out if name != "deep" else Path(scratch))
            theirs = torchviz_case(name, function, values, out if name == "transformer" else Path(scratch))
            load = "n/a" if mine["load"] is None else f"{mine['load']:.2f} s"
            if theirs is None:
                viz = ("not installed", "")
            elif "error" in theirs:
                viz = (theirs["error"], "")
            else:
                viz = (f"{theirs['nodes']} boxes, {theirs['time']:.2f} s", "{}×{} px".format(*theirs["size"]))
            print(f"| {name} | {mine['nodes']}, {mine['boxes']} | {mine['build']:.2f} s | {mine['png']:.2f} s | "
                  f"{mine['page']:.2f} s | {load} | {mine['size'][0]}×{mine['size'][1]} px | {viz[0]} | {viz[1]} |")  # fmt: skip
    for stale in out.glob("torch_*_gradcli.html"):
        stale.unlink()  # the pages are measured, not kept


if __name__ == "__main__":
    main()
