"""The tests of gradcli's PyTorch and JAX road import the framework through ``need``: without it they
skip, except where ``GRADCLI_FRAMEWORK_TESTS=required`` (``.ci/run``), where a missing framework fails
them: in CI these tests never skip."""

from __future__ import annotations

import os
from types import ModuleType

import pytest


def need(name: str) -> ModuleType:
    """``torch`` or ``jax``, imported (jax in float64, as gradcli runs it); skipped when missing, unless required."""
    if os.environ.get("GRADCLI_FRAMEWORK_TESTS") == "required":
        module = __import__(name)
    else:
        module = pytest.importorskip(name, reason=f"the tests of gradcli's {name} road need {name} (CI installs it)")
    if name == "jax":
        module.config.update("jax_enable_x64", True)
    return module
