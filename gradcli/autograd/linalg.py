"""``gradcli.linalg``: PyTorch's ``torch.linalg`` names for the matrix functions."""

from __future__ import annotations

from .functions import det, inv, solve

__all__ = ["det", "inv", "solve"]
