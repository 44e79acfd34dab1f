"""Writing a graph to a file or stdout in the format asked for."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..files import atomic_output, write_atomic
from ..stats import TensorStats, whole
from ..text import jsonable
from . import views
from .model import Graph

EXTENSIONS = {".png": "png", ".svg": "svg", ".pdf": "pdf", ".dot": "dot", ".gv": "dot", ".json": "json", ".txt": "text"}
EXTENSIONS.update({".html": "html", ".htm": "html"})  # the interactive page (page.py)
BINARY = ("png", "svg", "pdf")


def format_for(path: Path | None, fmt: str | None) -> str:
    """The format asked for, else the one the file's extension names, else the tree."""
    if fmt:
        return fmt
    if path is None:
        return "tree"
    found = EXTENSIONS.get(path.suffix.lower())
    if found is None:
        known = ", ".join(sorted(EXTENSIONS))
        raise UsageError(
            f"-o {path}: cannot tell the format from '{path.suffix or 'no extension'}'; use one of {known} or --format"
        )
    return found


KEEP = "keep"  # render's digits: each view's own default


def render(graph: Graph, fmt: str, digits: int | None | str = KEEP) -> bytes | str:
    """The graph in ``fmt``; ``digits`` sets the significant digits of the text and tree views (None: all)."""
    places = {} if digits == KEEP else {"digits": digits}

    if fmt == "json":
        return json.dumps(jsonable(graph.to_dict()), ensure_ascii=False) + "\n"
    if fmt == "dot":
        return views.dot(graph)
    if fmt == "text":
        return views.text(graph, **places)
    if fmt == "tree":
        return views.tree_plain(graph, **places)
    if fmt in BINARY:
        return views.picture(graph, fmt)
    if fmt == "html":
        from .page import page  # lazy: start-up, only --format html builds the page (its assets, importlib.resources)

        return page(graph)
    raise UsageError(f"unknown format {fmt!r}; use one of {', '.join(views.FORMATS)}")


def write(graph: Graph, path: Path, fmt: str | None = None) -> Path:
    data = render(graph, format_for(path, fmt))
    write_atomic(path, data)  # whole or not at all: a full disk keeps the old file
    return path


def write_arrays(graph: Graph, path: Path) -> Path:
    """Every node's value and gradient, whole, to one ``.npz`` at ``path`` (keys ``n3.value``,
    ``n3.grad``; NumPy's own format, so each reads back bit for bit), written whole or not at all."""
    arrays: dict[str, Any] = {}
    for node in graph.nodes:
        for key in ("value", "grad"):
            value = getattr(node, key)
            if isinstance(value, TensorStats) and value.array is None:
                raise UsageError(
                    f"{path}: node {node.id} kept only the statistics of its {key}: build the graph with "
                    "--arrays FILE.npz (gc.render.graph(..., arrays=True); a torch forward recorded with "
                    "gc.render.recording(arrays=True)) to keep arrays whole"
                )
            if value is not None:
                arrays[f"{node.id}.{key}"] = whole(value)
    # as np.savez writes it (one .npy per key in a zip), streamed: the arrays are never held twice
    with atomic_output(path) as stream, zipfile.ZipFile(stream, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for key, array in arrays.items():
            with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
    return path


def show(graph: Graph, fmt: str, rich: bool = False, digits: int | None | str = KEEP, console: Any = None) -> None:
    """Print a text format (svg included) to stdout; the tree as a rich tree when ``rich`` (the caller knows
    the terminal, and gives the ``console``). PNG and PDF are bytes: the caller writes them."""
    if fmt == "html":
        raise UsageError("--format html needs -o FILE (a page is not text)")
    if fmt in BINARY and fmt != "svg":
        raise UsageError(f"--format {fmt} needs -o FILE (a picture is not text)")
    if fmt == "tree" and rich:
        from rich.console import Console
        from rich.text import Text

        console = console or Console(highlight=False)
        for tree in views.tree_rich(graph, **({} if digits == KEEP else {"digits": digits})):
            console.print(tree)
        for note in graph.notes:
            console.print(Text(f"({note})", style="dim"))
        return
    data = render(graph, fmt, digits)
    sys.stdout.write(data if isinstance(data, str) else data.decode())
