"""Finite-difference oracles for the tests (independent of gradcli's engine)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

# 4th-order central stencil: error ~ h^4 f^(5) / 30 + eps |f| / h. With h = 2e-4 the
# truncation stays below 1e-10 even where f^(5) ~ 1e8 (log near 0.1), rounding ~1e-11.
STENCIL = ((-2.0, 1.0), (-1.0, -8.0), (1.0, 8.0), (2.0, -1.0))
STEP = 2e-4


def directional(
    f: Callable[[list[np.ndarray]], float], values: Sequence[np.ndarray], direction: Sequence[np.ndarray]
) -> float:
    """d/dt f(values + t * direction) at t = 0."""
    total = 0.0
    for offset, weight in STENCIL:
        total += weight * f([v + offset * STEP * d for v, d in zip(values, direction)])
    return total / (12.0 * STEP)


def gradient(f: Callable[[list[np.ndarray]], float], values: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The gradient of a scalar function of several arrays, element by element."""
    values = [np.asarray(v, dtype=np.float64) for v in values]
    grads = []
    for i, v in enumerate(values):
        g = np.zeros_like(v)
        for idx in np.ndindex(v.shape):
            direction = [np.zeros_like(u) for u in values]
            direction[i][idx] = 1.0
            g[idx] = directional(f, values, direction)
        grads.append(g)
    return grads
