"""The doctests of gradcli's modules for PyTorch and JAX (``torch_*.py``, ``jax_*.py``) are collected
only where that framework is installed: those modules import it when they are imported (and say how
to install it, exit 3, when it is missing), so without it their import is no test failure."""

import importlib.util

collect_ignore_glob = [
    f"gradcli/*/{framework}_*.py" for framework in ("torch", "jax") if importlib.util.find_spec(framework) is None
]
