"""Writing a graph to a file or stdout in the format asked for."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import UsageError
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


def render(graph: Graph, fmt: str) -> bytes | str:
    from . import views

    if fmt == "json":
        from ..text import jsonable

        return json.dumps(jsonable(graph.to_dict()), ensure_ascii=False) + "\n"
    if fmt == "dot":
        return views.dot(graph)
    if fmt == "text":
        return views.text(graph)
    if fmt == "tree":
        return views.tree_plain(graph)
    if fmt in BINARY:
        return views.picture(graph, fmt)
    if fmt == "html":
        from .page import page

        return page(graph)
    raise UsageError(f"unknown format {fmt!r}; use one of {', '.join(views.FORMATS)}")


def write(graph: Graph, path: Path, fmt: str | None = None) -> Path:
    from ..files import write_atomic

    data = render(graph, format_for(path, fmt))
    write_atomic(path, data)  # whole or not at all: a full disk keeps the old file
    return path


def show(graph: Graph, fmt: str, rich: bool = False) -> None:
    """Print a text format to stdout; the tree as a rich tree when ``rich`` (the caller knows the terminal)."""
    if fmt in BINARY or fmt == "html":
        raise UsageError(f"--format {fmt} needs -o FILE (a {'page' if fmt == 'html' else 'picture'} is not text)")
    if fmt == "tree" and rich:
        from rich.console import Console

        from .views import tree_rich

        console = Console(highlight=False)
        for tree in tree_rich(graph):
            console.print(tree)
        for note in graph.notes:
            console.print(f"[dim]({note})[/dim]")
        return
    data = render(graph, fmt)
    sys.stdout.write(data if isinstance(data, str) else data.decode())
