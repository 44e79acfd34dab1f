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

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
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
    """The statistics of ``value`` (an array or anything NumPy reads), each equal to NumPy's on the
    whole of it in float64 (``np.mean``, ``np.std``, ``np.min``, ``np.max``, ``np.linalg.norm``);
    ``keep``: hold the array itself too (for ``--arrays``)."""
    original = np.asarray(value)
    real = np.abs(original) if original.dtype.kind == "c" else original
    stats = TensorStats(original.shape, str(original.dtype), of_modulus=original.dtype.kind == "c")
    stats.array = original if keep else None
    if real.size == 0:
        stats.norm, stats.zeros, stats.nan, stats.inf = 0.0, 0.0, 0, 0
        return stats
    # min, max and the zeros in the tensor's own dtype (half the bytes of float64 for float32): rounding
    # to float64 is monotonic and exact at zero, so these equal NumPy's on the float64 tensor
    with np.errstate(all="ignore"):
        stats.min, stats.max = float(np.min(real)), float(np.max(real))
    stats.zeros = int(np.count_nonzero(real == 0)) / real.size
    if np.isfinite(stats.min) and np.isfinite(stats.max):  # (a NaN or an infinity shows in min or max)
        stats.nan = stats.inf = 0
    else:
        stats.nan, stats.inf = int(np.count_nonzero(np.isnan(real))), int(np.count_nonzero(np.isinf(real)))
    a = np.asarray(real, dtype=np.float64)
    with np.errstate(all="ignore"):
        stats.mean, stats.norm = float(np.mean(a)), float(np.linalg.norm(a))
        stats.std = _std(a, stats.mean, own=a is not real and a is not original)
    return stats


def _std(a: np.ndarray, mean: float, own: bool) -> float:
    """``np.std(a)`` as NumPy computes it (its mean, the squared deviations summed, divided, the root),
    without computing the mean again, and in ``a`` itself where it is a copy of our own (``own``)."""
    deviations = np.subtract(a, mean, out=a if own else np.empty_like(a))
    np.multiply(deviations, deviations, out=deviations)
    return float(np.sqrt(np.add.reduce(deviations, axis=None) / a.size))


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


_keep: ContextVar[bool] = ContextVar("keep_arrays", default=False)


@contextmanager
def keeping_arrays(keep: bool = True) -> Iterator[None]:
    """Graphs built (and recordings made) in the block keep their large values and gradients whole
    beside the statistics (for ``--arrays FILE.npz``); outside, only the statistics are kept."""
    token = _keep.set(keep)
    try:
        yield
    finally:
        _keep.reset(token)


def arrays_kept() -> bool:
    """Whether the graph being built keeps whole arrays (inside ``keeping_arrays``)."""
    return _keep.get()
