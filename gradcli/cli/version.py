"""``gradcli --version`` (and ``--version --verbose``): read without typer, whose import and command
building take longer than the answer (main's short road, as eval's fast path)."""

from __future__ import annotations

from ..about import VERSION  # (importlib.metadata would cost half of an eval's start-up)


def version_text(verbose: bool) -> str:
    """``gradcli X.Y.Z``; verbose: also Python's, NumPy's, SymPy's and Graphviz ``dot``'s versions."""
    lines = [f"gradcli {VERSION}"]
    if verbose:
        import platform
        from importlib import metadata

        lines.append(f"Python {platform.python_version()}")
        for label, package in (("NumPy", "numpy"), ("SymPy", "sympy")):
            try:
                lines.append(f"{label} {metadata.version(package)}")
            except metadata.PackageNotFoundError:
                lines.append(f"{label} not installed")
        lines.append(_dot_version())
    return "\n".join(lines)


def _dot_version() -> str:
    """``Graphviz dot 2.43.0``, or that it is not found (it is needed only for pictures)."""
    import re
    import shutil
    import subprocess

    dot = shutil.which("dot")
    if dot is None:
        return "Graphviz dot not found (needed for png, svg, pdf and html graphs)"
    try:
        said = subprocess.run([dot, "-V"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return f"Graphviz dot at {dot} (its version could not be read)"
    found = re.search(r"version\s+(\S+)", said.stderr + said.stdout)
    return f"Graphviz dot {found[1] if found else '(unknown version)'}"
