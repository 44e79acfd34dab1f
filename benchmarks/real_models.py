"""Real models drawn by gradcli and by the tools PyTorch users have (issue 35's proof).

    python benchmarks/real_models.py                      # every model, every tool installed (~30 min)
    python benchmarks/real_models.py --tools gradcli      # gradcli's side only (the table keeps the peers' rows)
    python benchmarks/real_models.py --models gpt2-12 gru # models whose name contains these
    python benchmarks/real_models.py --table              # README.md's table again from the saved results

Models (random weights, eval mode, the output a scalar loss): ResNet-18 (torchvision's
``resnet18(weights=None)``, or benchmarks/resnet18.py when torchvision does not load with this torch),
Hugging Face GPT-2 (``GPT2LMHeadModel`` from a ``GPT2Config``, GPT-2 small's width, 2, 12 and 48
blocks, 16 and 128 tokens, the language-model loss), six GRUCells stepped 20 times in a Python loop,
``nn.LSTM`` (2 layers, 20 steps), a JAX ``lax.scan`` RNN (20 steps), flax (nnx and linen) and equinox
MLPs. Tools: gradcli (its default view: for a torch model ``with gc.render.recording():`` around the forward,
``loss.backward()``, ``gc.render.graph(loss).save("x.png")``; for JAX ``gc.render.graph(f, *inputs)``; with
``color_by="grad-norm"`` when gradcli has it), torchview (``draw_graph(depth=3, roll=True)``),
torchlens (``trace(save_grads=True)``, ``log_backward``, ``draw(vis_mode="rolled", collapse="auto",
color_by="grad_norm")``) and torchviz (``make_dot(loss, params)``). A tool that is not installed is
skipped with a line saying so; none of them is a dependency of gradcli.

Each model and tool runs in a process of its own, one thread (OMP/OPENBLAS/MKL_NUM_THREADS=1,
``torch.set_num_threads(1)``), after one forward and backward of the model outside the figures:

- time: wall seconds from the model and its input to the PNG on disk (the tool's forward and
  backward, its graph and Graphviz);
- peak memory: that process's peak RSS while the tool ran (``VmHWM``, reset after the warm-up:
  torch, the model and the tool), and how much above the RSS before the tool began it went
  (Graphviz's own processes are not counted);
- pixels: the PNG's width x height;
- nodes drawn: the nodes of the DOT source Graphviz drew the PNG from (every run of ``dot``/``neato``
  is watched; invisible nodes not counted), and the module boxes (clusters);
- legibility: the smallest text in the PNG at 100%, in pixels (font size in points of the smallest
  text Graphviz placed, from ``-Tjson`` of that same source, times the PNG's pixels per point).

Results accumulate in ``benchmarks/real_models/results.json`` (one entry per model and tool, the
newest run's, with when and on which gradcli commit it was measured), ``benchmarks/real_models/README.md`` gets
the table, and README.md's subsection "Real models beside torchview and torchlens" (between its
``<!-- real models: ... -->`` markers) the pictures side by side and the key rows, every figure from the results. The full-size PNGs go to
``--pictures`` (default a folder under the system's temporary one); the committed copies in
benchmarks/real_models/ (12-block GPT-2 at 16 tokens and the GRU loop, every tool) are downscaled.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import platform
import re
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "real_models"
TOOLS = ("gradcli", "torchview", "torchlens", "torchviz")
TORCH_MODELS = ("resnet18", "gpt2-2L-16t", "gpt2-12L-16t", "gpt2-12L-128t", "gpt2-48L-16t", "gpt2-48L-128t",
                "gru-6x20", "lstm-2x20")  # fmt: skip
JAX_MODELS = ("jax-scan-rnn", "flax-nnx-mlp", "flax-linen-mlp", "equinox-mlp")
MODELS = TORCH_MODELS + JAX_MODELS
SHOWN = ("gpt2-12L-16t", "gru-6x20")  # the models whose pictures are committed, every tool's
IMPORT = {"torchview": "torchview", "torchlens": "torchlens", "torchviz": "torchviz", "gradcli": "gradcli"}
PACKAGES = ("gradcli", "torch", "torchvision", "transformers", "torchview", "torchlens", "torchviz", "jax", "jaxlib",
            "flax", "equinox", "numpy", "graphviz")  # fmt: skip


# ----------------------------------------------------------------------------------------------
# The models: each gives (kind, callable, inputs); torch callables are nn.Modules returning a loss.


def _torch_model(name: str) -> tuple[Any, tuple[Any, ...], str]:
    import torch
    from torch import nn

    torch.manual_seed(0)
    if name == "resnet18":
        return (*_resnet18(), "")
    if name.startswith("gpt2-"):
        layers, tokens = (int(part[:-1]) for part in name.split("-")[1:])
        return _gpt2(layers, tokens)

    if name == "gru-6x20":

        class GRULoop(nn.Module):
            """Six stacked GRUCells stepped over 20 time steps in a Python loop."""

            def __init__(self, width: int = 32, layers: int = 6) -> None:
                super().__init__()
                self.cells = nn.ModuleList(nn.GRUCell(width, width) for _ in range(layers))

            def forward(self, xs: torch.Tensor) -> torch.Tensor:
                hs = [xs.new_zeros(xs.shape[1], xs.shape[2]) for _ in self.cells]
                for x in xs:
                    for i, cell in enumerate(self.cells):
                        hs[i] = cell(x, hs[i])
                        x = hs[i]
                return (hs[-1] ** 2).mean()

        return GRULoop(), (torch.randn(20, 1, 32),), ""

    class LSTMModel(nn.Module):
        """nn.LSTM, 2 layers, over 20 steps, and a linear read-out."""

        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(32, 64, num_layers=2)
            self.head = nn.Linear(64, 1)

        def forward(self, xs: torch.Tensor) -> torch.Tensor:
            out, _ = self.lstm(xs)
            return (self.head(out[-1]) ** 2).mean()

    return LSTMModel(), (torch.randn(20, 1, 32),), ""


def _resnet18() -> tuple[Any, tuple[Any, ...]]:
    """torchvision's resnet18(weights=None), or the local copy when torchvision does not load."""
    import torch

    try:
        from torchvision.models import ResNet
    except Exception:  # noqa: BLE001 (torchvision built for another torch fails in many ways)
        sys.path.insert(0, str(HERE))
        from resnet18 import ResNet  # the same layers and initialisation

        source = "benchmarks/resnet18.py (torchvision does not load)"
    else:
        source = "torchvision"

    class ResNet18(ResNet):
        """ResNet-18 whose output is a loss: the sum of its logits."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return super().forward(x).sum()

    if source == "torchvision":
        from torchvision.models.resnet import BasicBlock

        model = ResNet18(BasicBlock, [2, 2, 2, 2])
    else:
        model = ResNet18((2, 2, 2, 2))
    model.source = source
    return model, (torch.randn(1, 3, 224, 224),)


def _gpt2(layers: int, tokens: int) -> tuple[Any, tuple[Any, ...], str]:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    class GPT2Loss(GPT2LMHeadModel):
        """Hugging Face's GPT-2 whose output is its language-model loss on the tokens given."""

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
            return super().forward(input_ids=input_ids, labels=input_ids).loss

    config = GPT2Config(n_layer=layers, n_positions=1024, loss_type="ForCausalLM")
    model = GPT2Loss(config)
    ids = torch.randint(0, config.vocab_size, (1, tokens), generator=torch.Generator().manual_seed(0))
    return model, (ids,), ""


def _jax_model(name: str) -> tuple[Any, tuple[Any, ...]]:
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    if name == "jax-scan-rnn":

        def rnn(w, u, xs):
            def step(h, x):
                h = jnp.tanh(w @ h + u @ x)
                return h, h

            h, _ = jax.lax.scan(step, jnp.zeros(w.shape[0]), xs)
            return jnp.sum(h**2)

        k1, k2, k3 = jax.random.split(key, 3)
        return rnn, (jax.random.normal(k1, (16, 16)) * 0.3, jax.random.normal(k2, (16, 8)) * 0.3,
                     jax.random.normal(k3, (20, 8)))  # fmt: skip
    x = jax.random.normal(key, (4, 8))
    if name == "flax-nnx-mlp":
        from flax import nnx

        class MLP(nnx.Module):
            def __init__(self, rngs: nnx.Rngs) -> None:
                self.layers = nnx.List([nnx.Linear(8, 16, rngs=rngs), nnx.Linear(16, 16, rngs=rngs),
                                        nnx.Linear(16, 1, rngs=rngs)])  # fmt: skip

            def __call__(self, x):
                for layer in self.layers[:-1]:
                    x = jax.nn.relu(layer(x))
                return self.layers[-1](x)

        def nnx_loss(model, x):
            return jnp.mean(model(x) ** 2)

        return nnx_loss, (MLP(nnx.Rngs(0)), x)
    if name == "flax-linen-mlp":
        import flax.linen as linen

        class LinenMLP(linen.Module):
            @linen.compact
            def __call__(self, x):
                x = jax.nn.relu(linen.Dense(16)(x))
                x = jax.nn.relu(linen.Dense(16)(x))
                return linen.Dense(1)(x)

        mlp = LinenMLP()
        params = mlp.init(key, x)

        def linen_loss(params, x):
            return jnp.mean(mlp.apply(params, x) ** 2)

        return linen_loss, (params, x)
    import equinox as eqx

    model = eqx.nn.MLP(8, 1, 16, 2, key=key)

    def eqx_loss(model, x):
        return jnp.mean(jax.vmap(model)(x) ** 2)

    return eqx_loss, (model, x)


# ----------------------------------------------------------------------------------------------
# Watching Graphviz: every dot/neato run a tool starts, its source and its own peak memory.


class Graphviz:
    """Every run of Graphviz in this process (``subprocess`` underneath graphviz, gradcli and the rest)."""

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []
        original = subprocess.Popen.communicate
        opened = subprocess.Popen.__init__
        seen = self

        def init(popen, args, *rest, **options):  # type: ignore[no-untyped-def]
            popen.watched_cwd = options.get("cwd")  # (graphviz's render() names its file from there)
            opened(popen, args, *rest, **options)

        def communicate(popen, input=None, timeout=None):  # type: ignore[no-untyped-def]
            args = [str(a) for a in (popen.args if isinstance(popen.args, (list, tuple)) else [popen.args])]
            program = os.path.basename(args[0]) if args else ""
            if program not in ("dot", "neato", "fdp", "sfdp", "twopi", "circo"):
                return original(popen, input, timeout)
            source = input.decode() if isinstance(input, bytes) else input
            if source is None:  # graphviz's render(): the source is the last argument, a file
                cwd = Path(getattr(popen, "watched_cwd", None) or ".")
                files = [cwd / a for a in args[1:] if not a.startswith("-") and (cwd / a).is_file()]
                source = Path(files[-1]).read_text() if files else None
            start = time.perf_counter()
            try:
                return original(popen, input, timeout)
            finally:
                fmt = next((a[2:] for a in args if a.startswith("-T")), "")
                options = [a for a in args[1:] if a.startswith(("-K", "-G", "-N", "-E", "-n", "-y"))]
                seen.runs.append({"program": program, "format": fmt, "options": options, "source": source,
                                  "seconds": time.perf_counter() - start})  # fmt: skip

        subprocess.Popen.communicate = communicate  # type: ignore[method-assign]
        subprocess.Popen.__init__ = init  # type: ignore[method-assign]

    def picture(self) -> dict[str, Any] | None:
        """The last run that drew a PNG."""
        found = [r for r in self.runs if r["format"].split(":")[0] == "png" and r["source"]]
        return found[-1] if found else None


def _png_size(path: Path) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    return struct.unpack(">II", head[16:24])


def _ops_fonts(ops: list[dict[str, Any]], size: float, sizes: list[float]) -> float:
    for op in ops:
        if op.get("op") == "F":
            size = float(op["size"])
        elif op.get("op") == "T" and str(op.get("text", "")).strip():
            sizes.append(size)
    return size


def measure_drawing(run: dict[str, Any], png: Path) -> dict[str, Any]:
    """Nodes, boxes and the smallest text (pixels at 100%) of the source Graphviz drew ``png`` from."""
    said = subprocess.run([run["program"], "-Tjson", *run["options"]], input=run["source"].encode(),
                          capture_output=True, check=False, timeout=1800)  # fmt: skip
    if said.returncode != 0:
        return {"measure_error": said.stderr.decode(errors="replace")[-300:]}
    laid = json.loads(said.stdout)
    objects = laid.get("objects", [])
    nodes = [o for o in objects if "nodes" not in o and "subgraphs" not in o and "invis" not in str(o.get("style", ""))]
    boxes = [o for o in objects if str(o.get("name", "")).startswith("cluster")]
    sizes: list[float] = []
    for thing in (laid, *objects, *laid.get("edges", [])):
        for key in ("_ldraw_", "_hldraw_", "_tldraw_", "_tdraw_", "_hdraw_", "_draw_"):
            _ops_fonts(thing.get(key, []), 14.0, sizes)
    x0, y0, x1, y1 = (float(v) for v in laid["bb"].split(","))
    width, height = _png_size(png)
    pad = 8.0  # Graphviz's pad: 4 points a side
    per_point = min(width / (x1 - x0 + pad), height / (y1 - y0 + pad))
    said = {"nodes": len(nodes), "boxes": len(boxes), "text_px": min(sizes) * per_point if sizes else None,
            "per_point": per_point}  # fmt: skip
    repeats = [o for o in boxes if "×" in str(o.get("label", "")) and "bb" in o]
    if repeats:  # the outermost box drawn for ×N: its top-left corner in the PNG (where the 100% crop goes)
        bx0, _, bx1, by1 = (float(v) for v in max(repeats, key=lambda o: _area(o["bb"]))["bb"].split(","))
        said["repeat_corner"] = [round((bx0 - x0 + pad / 2) * per_point), round((y1 - by1 + pad / 2) * per_point)]
    return said


def _area(bb: str) -> float:
    x0, y0, x1, y1 = (float(v) for v in bb.split(","))
    return (x1 - x0) * (y1 - y0)


# ----------------------------------------------------------------------------------------------
# One model, one tool, in this process.


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_reset() -> bool:
    """Set this process's peak RSS (VmHWM) to its RSS now (Linux's clear_refs 5): the peak read after
    is the tool's, not the model's warm-up's. False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def gradcli_picture(model: Any, inputs: tuple[Any, ...], png: Path) -> dict[str, Any]:
    """What a user does, with gradcli's default view: for a torch model, ``with gc.render.recording():``
    around its forward, ``loss.backward()``, then ``gc.render.graph(loss).save("x.png")``; for a JAX
    function ``gc.render.graph(f, *inputs).save("x.png")``. ``color_by="grad-norm"`` where gradcli has it."""
    import gradcli as gc

    options: dict[str, Any] = {}
    said: dict[str, Any] = {}
    if "color_by" in inspect.signature(gc.render.graph).parameters:
        options["color_by"] = "grad-norm"
    with warnings_kept() as warned:
        if hasattr(model, "named_parameters"):  # a torch nn.Module (named by this variable: model.h.0...)
            with gc.render.recording():
                loss = model(*inputs)
            loss.backward()
            view = gc.render.graph(loss, **options)
            said["road"] = "recording, backward, graph(loss)"
        else:
            view = gc.render.graph(model, *inputs, **options)  # (a JAX function)
            said["road"] = "graph(f, *inputs)"
        view.save(png)
    said["warnings"] = warned
    said["model_nodes"] = len(view.nodes)
    said["with_value"] = sum(getattr(n, "value", None) is not None for n in view.nodes)
    said["without_value"] = sorted({str(getattr(n, "op", None) or getattr(n, "label", "?")) for n in view.nodes
                                    if getattr(n, "value", None) is None})  # fmt: skip
    said["with_grad"] = sum(getattr(n, "grad", None) is not None for n in view.nodes)
    said["options"] = options
    hidden = getattr(view.model, "hidden", None)
    if hidden:
        said["hidden"] = hidden if isinstance(hidden, (int, dict)) else str(hidden)
    return said


@contextlib.contextmanager
def warnings_kept():  # type: ignore[no-untyped-def]
    import warnings

    kept: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield kept
    kept += sorted({f"{w.category.__name__}: {w.message}"[:300] for w in caught})


def torchview_picture(model: Any, inputs: tuple[Any, ...], png: Path) -> dict[str, Any]:
    from torchview import draw_graph

    said: dict[str, Any] = {"options": {"depth": 3, "roll": True}}
    try:
        graph = draw_graph(model, input_data=list(inputs), depth=3, roll=True, graph_name=png.stem)
    except Exception as error:  # noqa: BLE001 (Hugging Face's GPT-2 fails at depth 3: draw what depth 1 gives)
        said["fallback"] = f"depth=3 fails: {type(error).__name__}: {error}"[:300]
        said["options"]["depth"] = 1
        graph = draw_graph(model, input_data=list(inputs), depth=1, roll=True, graph_name=png.stem)
    graph.visual_graph.render(str(png.with_suffix("")), format="png", cleanup=True)
    return said


def torchlens_picture(model: Any, inputs: tuple[Any, ...], png: Path) -> dict[str, Any]:
    import torchlens as tl

    trace = tl.trace(model, list(inputs), capture=tl.options.CaptureOptions(save_grads=True))
    loss = trace[trace.output_layers[0]].out
    trace.log_backward(loss)
    trace.draw(vis_mode="rolled", collapse="auto", color_by="grad_norm", vis_outpath=str(png.with_suffix("")),
               vis_fileformat="png", vis_save_only=True)  # fmt: skip
    return {"options": {"vis_mode": "rolled", "collapse": "auto", "color_by": "grad_norm"}}


def torchviz_picture(model: Any, inputs: tuple[Any, ...], png: Path) -> dict[str, Any]:
    from torchviz import make_dot

    loss = model(*inputs)
    dot = make_dot(loss, params=dict(model.named_parameters()))
    dot.render(str(png.with_suffix("")), format="png", cleanup=True)
    return {}


PICTURE = {"gradcli": gradcli_picture, "torchview": torchview_picture, "torchlens": torchlens_picture,
           "torchviz": torchviz_picture}  # fmt: skip


def worker(model_name: str, tool: str, folder: Path) -> dict[str, Any]:
    """Draw ``model_name`` with ``tool`` in this process; what was measured."""
    found: dict[str, Any] = {"model": model_name, "tool": tool}
    if model_name in JAX_MODELS:
        import jax

        jax.config.update("jax_platforms", "cpu")
        function, inputs = _jax_model(model_name)
        if model_name == "equinox-mlp":
            import equinox as eqx

            eqx.filter_grad(function)(*inputs)  # JAX's own first run, outside the figures
        else:
            jax.grad(function)(*inputs)
        call = function
    else:
        import torch

        torch.set_num_threads(1)
        model, inputs, _ = _torch_model(model_name)
        model.eval()  # (dropout off: the same function at every call)
        found["params"] = sum(p.numel() for p in model.parameters())
        found["source"] = getattr(model, "source", None)
        model(*inputs).backward()  # torch's warm-up, outside the figures
        model.zero_grad(set_to_none=True)
        call = model
    watched = Graphviz()
    png = folder / f"{model_name}_{tool}.png"
    found["peak_reset"] = _peak_reset()
    found["rss_before_mb"] = _status_mb("VmRSS")
    start = time.perf_counter()
    found.update(PICTURE[tool](call, inputs, png))
    found["seconds"] = time.perf_counter() - start
    found["peak_mb"] = _status_mb("VmHWM")  # (since the reset: the tool's run, the model included)
    found["graphviz_runs"] = len(watched.runs)
    found["graphviz_seconds"] = sum(r["seconds"] for r in watched.runs)
    if not png.exists():
        found["error"] = "no PNG written"
        return found
    found["png"] = str(png)
    found["pixels"] = _png_size(png)
    run = watched.picture()
    if run is not None:
        found.update(measure_drawing(run, png))
    return found


# ----------------------------------------------------------------------------------------------
# The parent: a process per model and tool, the results file, the table and the pictures.


def versions() -> dict[str, str]:
    from importlib import metadata

    found = {"python": platform.python_version(), "machine": f"{os.cpu_count()} cores, {platform.machine()}"}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    # the last commit that changed gradcli's package (a commit of the benchmark's own does not change what ran)
    said = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %cd", "--date=format:%Y-%m-%d %H:%M", "--first-parent",
                           "--", "gradcli"], capture_output=True, text=True, check=False)  # fmt: skip
    changed = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "gradcli"],
                             capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
    if said.returncode == 0:
        found["gradcli"] += f" (commit {said.stdout.strip()}{', with changes not committed' if changed else ''})"
    said = subprocess.run(["dot", "-V"], capture_output=True, text=True, check=False)
    found["graphviz dot"] = said.stderr.strip().replace("dot - graphviz version ", "")
    return found


def installed(tool: str) -> bool:
    from importlib.util import find_spec

    return find_spec(IMPORT[tool]) is not None


def run_one(model: str, tool: str, pictures: Path, timeout: float) -> dict[str, Any]:
    """``tool`` on ``model`` in a fresh process (this checkout's gradcli first on the path)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    command = [sys.executable, __file__, "--worker", model, tool, "--pictures", str(pictures)]
    start = time.perf_counter()
    try:
        said = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"model": model, "tool": tool, "error": f"timeout: still running after {timeout:.0f} s (stopped)",
                "seconds": time.perf_counter() - start}  # fmt: skip
    lines = said.stdout.strip().splitlines()
    if said.returncode == 0 and lines and lines[-1].startswith("{"):
        return json.loads(lines[-1])
    tail = said.stderr.strip().splitlines()
    error = next((line for line in reversed(tail) if line and not line.startswith(" ")), f"exit {said.returncode}")
    return {"model": model, "tool": tool, "error": error[:400], "traceback": "\n".join(tail[-40:]),
            "seconds": time.perf_counter() - start}  # fmt: skip


def _wanted(names: list[str] | None, every: tuple[str, ...]) -> list[str]:
    if not names:
        return list(every)
    return [m for m in every if any(n.lower() in m.lower() for n in names)]


def load_results() -> dict[str, Any]:
    path = OUT / "results.json"
    return json.loads(path.read_text()) if path.exists() else {"runs": {}, "versions": {}}


def save_results(results: dict[str, Any]) -> None:
    OUT.mkdir(exist_ok=True)
    temporary = OUT / "results.json.tmp"
    temporary.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    temporary.replace(OUT / "results.json")


def cell(r: dict[str, Any]) -> list[str]:
    """The table's cells for one run: time, peak memory, pixels, nodes (boxes), smallest text, notes."""
    if "error" in r:
        return ["**fails**", "", "", "", "", r["error"][:140].replace("|", "\\|")]
    w, h = r.get("pixels", (0, 0))
    text = r.get("text_px")
    nodes = f"{r['nodes']}" + (f" ({r['boxes']})" if r.get("boxes") else "") if "nodes" in r else "?"
    notes = []
    if "fallback" in r:
        notes.append(f"depth={r['options']['depth']}: depth=3 fails ({r['fallback'].split(':')[1].strip()})")
    if r.get("with_value") is not None and r["with_value"] < r.get("model_nodes", 0):
        without = f" (not: {', '.join(r['without_value'])})" if r.get("without_value") else ""
        notes.append(f"values on {r['with_value']} of {r['model_nodes']} nodes{without}")
    if isinstance(r.get("hidden"), int):
        notes.append(f"{r['hidden']} nodes not drawn")
    notes += [
        f"drawn at {m.group(1)}" for w_ in r.get("warnings", []) for m in [re.search(r"drawn at ([0-9.]+)", w_)] if m
    ]
    return [f"{r['seconds']:.1f} s", f"{r['peak_mb']:.0f} MB (+{r['peak_mb'] - r['rss_before_mb']:.0f})",
            f"{w}×{h}", nodes, "?" if text is None else f"{text:.1f} px", "; ".join(notes)]  # fmt: skip


def table(results: dict[str, Any]) -> str:
    lines = ["| model | tool | time | peak RSS (+ above the model) | PNG pixels | nodes drawn (boxes) | smallest text at 100% | notes |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for model in MODELS:
        for tool in TOOLS:
            r = results["runs"].get(f"{model}/{tool}")
            if r is None or "skipped" in r:
                continue
            lines.append(f"| {model} | {'**gradcli**' if tool == 'gradcli' else tool} | " + " | ".join(cell(r)) + " |")
    return "\n".join(lines)


def shrink(source: Path, target: Path, side: int = 1400) -> None:
    """A copy of ``source`` at most ``side`` pixels a side, in 128 colours (the committed pictures stay small)."""
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = None
    with Image.open(source) as image:
        image = image.convert("RGB")
        image.thumbnail((side, side), Image.Resampling.LANCZOS)
        image.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(target, optimize=True)


def crop(source: Path, target: Path, side: int = 700, corner: list[int] | None = None) -> None:
    """The ``side`` x ``side`` pixels of ``source`` at 100% from ``corner`` (the box drawn for ×N: its
    title), or else those that hold the most ink (what its text looks like)."""
    from PIL import Image, ImageOps

    Image.MAX_IMAGE_PIXELS = None
    with Image.open(source) as image:
        image = image.convert("RGB")
        if corner is not None:
            x, y = (max(0, min(v - 12, extent - side)) for v, extent in zip(corner, image.size, strict=True))
            part = image.crop((x, y, min(x + side, image.width), min(y + side, image.height)))
            part.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(target, optimize=True)
            return
        step = max(1, side // 10)
        ink = ImageOps.invert(image.convert("L")).resize((max(1, image.width // step), max(1, image.height // step)))
        cells = ink.load()
        span = side // step
        best, where = -1.0, (0, 0)
        for y in range(max(1, ink.height - span + 1)):
            for x in range(max(1, ink.width - span + 1)):
                total = sum(
                    cells[i, j] for i in range(x, min(x + span, ink.width)) for j in range(y, min(y + span, ink.height))
                )
                if total > best:
                    best, where = total, (x * step, y * step)
        part = image.crop((where[0], where[1], min(where[0] + side, image.width), min(where[1] + side, image.height)))
        part.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(target, optimize=True)


def write_readme(results: dict[str, Any]) -> None:
    v = results.get("versions", {})
    said = ", ".join(f"{k} {v[k]}" for k in v)
    pictures = []
    for model in SHOWN:
        tools = [t for t in TOOLS if (OUT / f"{model}_{t}.png").exists()]
        missing = [t for t in TOOLS if t not in tools]
        pictures += [f"### {model}" + (f" (no picture: {', '.join(missing)})" if missing else ""), "",
                     "| " + " | ".join(tools) + " |", "|" + "---|" * len(tools),
                     "| " + " | ".join(f"![{t}]({model}_{t}.png)" for t in tools) + " |",
                     "| " + " | ".join(f"![{t} at 100%]({model}_{t}_100.png)" for t in tools) + " |", ""]  # fmt: skip
    text = "\n".join([
        "# Real models: gradcli beside torchview, torchlens and torchviz (issue 35)",
        "",
        "Written by `python benchmarks/real_models.py` (its docstring says what each column measures). "
        + measured(results),
        f"Versions (of the newest run): {said}.",
        "",
        "Peak RSS is the tool's process while it ran (the model's own memory included); in brackets how far "
        "above the process's RSS before the tool began it went. Nodes drawn: the nodes of the DOT source the "
        "PNG was drawn from; boxes: its clusters (module boxes). Smallest text: the smallest font Graphviz "
        "placed, in pixels of the PNG as written. The JAX models have no peer (torchview, torchlens and "
        "torchviz draw PyTorch only).",
        "",
        table(results),
        "",
        "Pictures: each downscaled to at most 1400 px a side, then 700x700 px of the PNG at 100%: from the "
        "top-left corner of the box drawn for ×N (its title) where there is one, else those that hold the most ink.",
        "",
        *pictures,
    ])  # fmt: skip
    (OUT / "README.md").write_text(text)
    write_top_readme(results)


def measured(results: dict[str, Any], tools: tuple[str, ...] = TOOLS) -> str:
    """Which rows were measured when (and gradcli's on which commit): a run of some tools keeps the others' rows."""
    said = []
    for tool in tools:
        rows = [r for k, r in results["runs"].items() if k.endswith("/" + tool) and "when" in r]
        if not rows:
            continue
        when = sorted(r["when"] for r in rows)
        span = (
            when[0]
            if when[0] == when[-1]
            else f"{when[0]} to {when[-1][-9:] if when[0][:10] == when[-1][:10] else when[-1]}"
        )
        commits = sorted({r["commit"] for r in rows if r.get("commit")})
        said.append(
            f"{tool}{chr(39) if tool.endswith('s') else chr(39) + 's'} rows {span}"
            + (f" (gradcli at {', '.join(commits)})" if tool == "gradcli" and commits else "")
        )
    return "Measured: " + "; ".join(said) + "." if said else ""


# ----------------------------------------------------------------------------------------------
# The top-level README's subsection: the pictures side by side and the key rows, from results.json.

TOP_README = ROOT / "README.md"
BEGIN = "<!-- real models: written by benchmarks/real_models.py from its results.json; edit the script, not here -->"
END = "<!-- real models: end -->"
KEY_MODELS = ("resnet18", "gpt2-12L-16t", "gpt2-12L-128t", "gpt2-48L-16t", "gru-6x20", "lstm-2x20")
KEY_TOOLS = ("gradcli", "torchview", "torchlens")
TITLES = {"gpt2-12L-16t": "GPT-2, 12 blocks, 16 tokens", "gru-6x20": "6 GRUCells × 20 steps"}


def _ok(results: dict[str, Any], model: str, tool: str) -> dict[str, Any] | None:
    r = results["runs"].get(f"{model}/{tool}")
    return r if r is not None and "seconds" in r and "error" not in r and "skipped" not in r else None


def _span(values: list[float], unit: str, digits: int = 1) -> str:
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return f"{low} {unit}" if low == high else f"{low}–{high} {unit}"


def _compare(results: dict[str, Any], peer: str) -> str:
    """How ``peer`` fares against gradcli on the key models, in numbers: where it is faster, lighter, smaller."""
    pairs = [(m, _ok(results, m, "gradcli"), _ok(results, m, peer)) for m in KEY_MODELS]
    pairs = [(m, g, p) for m, g, p in pairs if g and p]
    if not pairs:
        return ""

    def above(r: dict[str, Any]) -> float:
        return r["peak_mb"] - r["rss_before_mb"]

    def count(better: Any) -> str:
        n = sum(1 for _, g, p in pairs if better(g, p))
        return "all" if n == len(pairs) else ("none" if n == 0 else f"{n}")

    faster = count(lambda g, p: p["seconds"] < g["seconds"])
    lighter = count(lambda g, p: above(p) < above(g))
    smaller = count(lambda g, p: p["pixels"][0] * p["pixels"][1] < g["pixels"][0] * g["pixels"][1])
    return (f"{peer} is faster on {faster} of these {len(pairs)} models ({_span([p['seconds'] for _, _, p in pairs], 's')}, "
            f"gradcli {_span([g['seconds'] for _, g, _ in pairs], 's')}), needs less memory above the model on {lighter} "
            f"(+{_span([above(p) for _, _, p in pairs], 'MB', 0)}, gradcli +{_span([above(g) for _, g, _ in pairs], 'MB', 0)}) "
            f"and draws a smaller PNG on {smaller}; its smallest text is {min(p['text_px'] or 0 for _, _, p in pairs):.1f} px "
            f"(gradcli's {min(g['text_px'] or 0 for _, g, _ in pairs):.1f} px).")  # fmt: skip


def readme_section(results: dict[str, Any]) -> str:
    """The subsection of README.md's "PyTorch and JAX", every figure read from ``results``."""
    head = "<tr><th></th>" + "".join(f"<th>{t}</th>" for t in KEY_TOOLS) + "</tr>"
    rows = [head]
    for model in SHOWN:
        for suffix, title in (("", TITLES.get(model, model)), ("_100", "at 100%")):
            cells = []
            for tool in KEY_TOOLS:
                name = f"{model}_{tool}{suffix}.png"
                cells.append(f'<td><img src="benchmarks/real_models/{name}" alt="{tool}: {title}" width="260"></td>'
                             if (OUT / name).exists() else "<td>(no picture)</td>")  # fmt: skip
            rows.append(f"<tr><td>{title}</td>{''.join(cells)}</tr>")
    lines = ["| model | tool | time | peak RSS (+ above the model) | PNG pixels | nodes drawn (boxes) | smallest text | notes |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for model, tools in [*((m, KEY_TOOLS) for m in KEY_MODELS), *((m, ("gradcli",)) for m in JAX_MODELS)]:
        for tool in tools:
            r = results["runs"].get(f"{model}/{tool}")
            if r is not None and "skipped" not in r:
                name = f"**{tool}**" if tool == "gradcli" else tool
                lines.append(f"| {model} | {name} | " + " | ".join(cell(r)) + " |")
    fallback = _ok(results, "gpt2-12L-16t", "torchview")
    fallback_said = (
        f" On Hugging Face's GPT-2 torchview's `depth=3` fails ({fallback['fallback'].split(':')[1].strip()}): "
        f"its `depth=1` picture is {fallback['nodes']} nodes, the transformer one of them."
        if fallback and "fallback" in fallback
        else ""
    )
    return "\n".join([
        "### Real models beside torchview and torchlens",
        "",
        "`benchmarks/real_models.py` draws real models (random weights) with gradcli's default view (a recording "
        "around the forward, `loss.backward()`, `gc.render.graph(loss, color_by=\"grad-norm\")`) and, each in a "
        "process of its own on the same machine, with torchview (`depth=3, roll=True`) and torchlens (rolled, "
        "`collapse=\"auto\"`, `color_by=\"grad_norm\"`). Hugging Face's 12-block GPT-2 at 16 tokens and six "
        "GRUCells stepped 20 times in a Python loop (each picture downscaled to 1400 px, then 700 px of it at 100%: "
        "gradcli's from the corner of its ×N box, the others' where they hold the most ink):",
        "",
        "<table>", *rows, "</table>",
        "",
        "On this project's shared 2-core VM, other jobs running (times are noisy, within one run too). "
        + measured(results, KEY_TOOLS)
        + " A gradcli node without a value is one of several outputs (a split, an LSTM layer): its outputs "
        "are drawn with theirs.",
        "",
        *lines,
        "",
        "gradcli draws each GPT-2 block once, ×12 (×48), with a sparkline of the blocks' gradient norms, the "
        "GRU loop's six cells once, ×20, and the nodes' values and gradients (statistics past 64 elements). "
        + _compare(results, "torchview") + " It draws modules with their input and output shapes, no values or "
        "gradients." + fallback_said + " " + _compare(results, "torchlens")
        + " Its `collapse=\"auto\"` draws GPT-2's transformer as one node.",
        "",
        "Every model (GPT-2 at 2 and 48 blocks and 128 tokens too), torchviz's rows and every picture: "
        "[benchmarks/real_models/README.md](benchmarks/real_models/README.md).",
    ])  # fmt: skip


def write_top_readme(results: dict[str, Any]) -> None:
    """Replace the subsection between BEGIN and END in README.md (nothing when the markers are not there)."""
    text = TOP_README.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"README.md has no {BEGIN!r} ... {END!r}: its subsection not written", flush=True)
        return
    before, _, rest = text.partition(BEGIN)
    _, _, after = rest.partition(END)
    temporary = TOP_README.with_name("README.md.tmp")
    temporary.write_text(before + BEGIN + "\n" + readme_section(results) + "\n" + END + after, encoding="utf-8")
    temporary.replace(TOP_README)


def one_thread() -> None:
    """One thread for every library, set before torch or JAX is imported (they are imported by the
    workers only, each a process of its own that inherits this environment)."""
    os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
                      XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")  # fmt: skip


def main() -> None:
    one_thread()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", help="only models whose name contains one of these")
    parser.add_argument("--tools", nargs="*", help="only these tools (gradcli torchview torchlens torchviz)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a tool gets for a model (600)")
    parser.add_argument("--pictures", default=str(Path(tempfile.gettempdir()) / "gradcli-real-models"),
                        help="folder for the full-size PNGs")  # fmt: skip
    parser.add_argument(
        "--table", action="store_true", help="write the table of the saved results (README.md) and stop"
    )
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    pictures = Path(args.pictures)
    if args.worker:
        try:
            print(json.dumps(worker(args.worker[0], args.worker[1], pictures)))
        except BaseException:
            traceback.print_exc()
            raise SystemExit(1) from None
        return
    results = load_results()
    if args.table:
        write_readme(results)
        print(table(results))
        return
    pictures.mkdir(parents=True, exist_ok=True)
    results["versions"] = versions()
    print("versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()), flush=True)
    tools = [t for t in TOOLS if t in (args.tools or TOOLS)]
    for tool in tools:
        if not installed(tool):
            print(f"{tool}: not installed, skipped (pip install {tool})", flush=True)
    for model in _wanted(args.models, MODELS):
        for tool in tools:
            key = f"{model}/{tool}"
            if not installed(tool):
                continue
            if model in JAX_MODELS and tool != "gradcli":
                results["runs"][key] = {"model": model, "tool": tool, "skipped": "n/a (PyTorch only)"}
                continue
            r = run_one(model, tool, pictures, args.timeout)
            r["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            r["commit"] = results["versions"]["gradcli"].partition("(commit ")[2].split(" ")[0] or None
            results["runs"][key] = r
            save_results(results)
            print(f"| {model} | {tool} | " + " | ".join(cell(r)) + " |", flush=True)
            if model in SHOWN and "png" in r:
                shrink(Path(r["png"]), OUT / f"{model}_{tool}.png")
                crop(
                    Path(r["png"]),
                    OUT / f"{model}_{tool}_100.png",
                    corner=r.get("repeat_corner") if tool == "gradcli" else None,
                )
    save_results(results)
    write_readme(results)
    print(table(results))


if __name__ == "__main__":
    main()
