"""A large tensor's statistics: what a graph keeps of a value or gradient over ``FULL_LIMIT`` elements.

A neutral module under the layers (render writes them, a framework's recorder may compute them).
Every statistic is NumPy's own, computed in float64 on the whole tensor where the value is recorded,
never by keeping the tensor for a later ``.tolist()``:

>>> s = tensor_stats(np.arange(100, dtype=np.float32))
>>> s.shape, s.dtype, s.mean, s.min, s.max, s.zeros, s.nonfinite
((100,), 'float32', 49.5, 0.0, 99.0, 0.01, 0)
>>> light(np.zeros(64)).shape, type(light(np.zeros(65))).__name__
((64,), 'TensorStats')
"""

from __future__ import annotations

from typing import Any

import numpy as np

FULL_LIMIT = 64  # elements: a value up to this size is kept (and written) whole; beyond, its statistics


class TensorStats:
    """``shape``, ``dtype``, ``mean``, ``std``, ``min``, ``max``, ``norm`` (the 2-norm of all elements),
    ``zeros`` (the fraction of exact zeros), ``nonfinite`` (NaN and infinities), ``nan``, ``inf``; an
    empty tensor has None for mean, std, min and max. A complex tensor's are those of its modulus
    (``of_modulus``). ``array``: the whole tensor, only where it was asked for (``--arrays``)."""

    __slots__ = ("shape", "dtype", "mean", "std", "min", "max", "norm", "zeros", "nan", "inf", "of_modulus", "array")

    def __init__(self, shape: tuple[int, ...], dtype: str, **stats: Any) -> None:
        self.shape, self.dtype = tuple(shape), dtype
        for key in ("mean", "std", "min", "max", "norm", "zeros", "nan", "inf", "of_modulus", "array"):
            setattr(self, key, stats.get(key))

    @property
    def size(self) -> int:  # (np.size reads it: a statistic counts as its tensor's size)
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nonfinite(self) -> int:
        return self.nan + self.inf

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of a value or gradient over ``FULL_LIMIT`` elements (SPEC, fourth round)."""
        found = {"shape": list(self.shape), "dtype": self.dtype}
        for key in ("mean", "std", "min", "max", "norm", "zeros"):
            found[key] = getattr(self, key)
        found.update(nonfinite=self.nonfinite, nan=self.nan, inf=self.inf)
        if self.of_modulus:
            found["of"] = "modulus"
        return found

    def __repr__(self) -> str:
        return f"TensorStats(shape={self.shape}, dtype={self.dtype}, mean={self.mean}, norm={self.norm})"


def tensor_stats(value: Any, keep: bool = False) -> TensorStats:
    """The statistics of ``value`` (an array or anything NumPy reads), each computed by NumPy in
    float64 on the whole of it; ``keep``: hold the array itself too (for ``--arrays``)."""
    original = np.asarray(value)
    a = np.abs(original) if original.dtype.kind == "c" else original
    a = np.asarray(a, dtype=np.float64)
    stats = TensorStats(original.shape, str(original.dtype), of_modulus=original.dtype.kind == "c")
    stats.array = original if keep else None
    if a.size == 0:
        stats.norm, stats.zeros, stats.nan, stats.inf = 0.0, 0.0, 0, 0
        return stats
    with np.errstate(all="ignore"):
        stats.min, stats.max = float(np.min(a)), float(np.max(a))
        stats.mean, stats.std = float(np.mean(a)), float(np.std(a))
        stats.norm = float(np.linalg.norm(a))
    stats.zeros = np.count_nonzero(a == 0) / a.size
    if np.isfinite(stats.min) and np.isfinite(stats.max):  # (a NaN or an infinity shows in min or max)
        stats.nan = stats.inf = 0
    else:
        stats.nan, stats.inf = int(np.count_nonzero(np.isnan(a))), int(np.count_nonzero(np.isinf(a)))
    return stats


def light(value: Any, limit: int = FULL_LIMIT, keep: bool = False) -> Any:
    """``value`` as a graph keeps it: itself when it has at most ``limit`` elements (or is None, or
    statistics already), else its ``TensorStats`` (holding the array too when ``keep``)."""
    if value is None or isinstance(value, TensorStats) or np.size(value) <= limit:
        return value
    return tensor_stats(value, keep)


def whole(value: Any) -> Any:
    """The whole array a kept value stands for: itself, the array its statistics hold, or None."""
    if isinstance(value, TensorStats):
        return value.array
    return None if value is None else np.asarray(value)
